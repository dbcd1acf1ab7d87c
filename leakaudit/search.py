"""All pairs of 64-bit hashes within a Hamming distance: brute-force reference and fast exact index.

:func:`pairs_within_brute_force` compares every pair (in bounded row blocks); it is the reference
the fast path is tested against. :func:`iter_pairs_within` and :func:`pairs_within` give the same
answer, exactly, much faster on large inputs:

1. Identical hashes are collapsed first (``np.unique``). Real datasets hold many exact copies
   (blank images, re-encodes); they are linked trivially and the search runs over distinct values.
2. Multi-index hashing (pigeonhole banding). The 64 bits are split into ``m`` disjoint bands with
   search radii ``r_i`` such that ``sum(r_i + 1) > t``. If two hashes are within ``t`` then, by
   pigeonhole, some band differs by at most its radius. Each band's keys are bucketed (sorted once,
   with a direct-address table for bands up to 24 bits, and for wider bands a hash table behind a
   small bitmap filter, since a binary search over millions of sorted keys misses the cache at
   every step); candidates are the members of a bucket and
   of the buckets reached by flipping at most ``r_i`` key bits; every candidate is verified by
   popcount. A flip mask is probed only from keys where its highest bit is clear, so each pair of
   buckets is visited once, never in both directions. In narrow bands the hashes of small buckets
   probe one by one, many flip masks per numpy call (a block of hashes x masks keys), and a
   single-member partner is verified in the same pass from a compact array of bucket hashes;
   larger buckets probe as buckets. Probing and the comparisons it leads to run on two threads
   (numpy releases the GIL in its loops) and their results are taken in order, so the output
   does not depend on timing; when grouping, a worker skips bucket pairs by a snapshot of which
   buckets are already one component (components only merge, so a stale snapshot skips less,
   never wrongly).
3. Each pair is emitted by exactly one band: the first band within its radius. Later bands re-find
   it as a candidate and drop it, so no global de-duplication (no set of all pairs) is ever needed.
4. The band layout (number of bands, radii, and which bits form each band) is chosen per input by a
   small cost model evaluated on a sample. Perceptual hashes are clumpy: on real dHash values,
   21-bit bands collide hundreds to thousands of times more often than uniform random ones, so a
   layout that is optimal for random data can produce orders of magnitude more candidates. The
   model counts, on sampled pairs, how often each band would make a candidate, adds the probing
   cost, and falls back to the chunked brute force when banding would not pay (tiny inputs, large
   thresholds). Widths may be uneven (e.g. 22, 22, 20 bits at radii 3, 3, 2 for ``t = 10``): the
   widest bands take the largest radii.
5. Grouping needs links, not pairs (:func:`iter_linking_pairs`): a pair whose ends are already one
   component is dropped, and on dense, clumpy data (whose dense core holds billions of near pairs
   and ends up as one giant component) the search runs in passes of increasing flip weight in
   which only values outside the giant component probe, in a spread-out order, merging as it
   goes (see :func:`_dense_links`): at 10M clumpy hashes the core is never enumerated.
6. Two hashes (``second=``, the default ``phash+dhash`` method): a pair must lie within its
   threshold on both. The values searched are the distinct ``(first, second)`` pairs; the bands
   are those of whichever hash the cost model rates cheaper (pHash on photos: its 21-bit bands
   collide ~20x more often than uniform ones, dHash's ~1000x), and every candidate is checked
   on both hashes inside the kernel, so a pair that fails the other hash never leaves it. The
   dense passes are not used there: the joint relation is much sparser than either hash's
   clumps (on 1M photo-like pairs the largest joint group held 5% of the rows).
7. Bucket pairs of up to :data:`_BLOCK_MAX` members a side are compared as padded blocks, one
   broadcast XOR per size class (:func:`_block_pairs`), instead of expanding every candidate
   into index arrays, with the bucket pairs on the contiguous axis (numpy's inner loop runs
   over thousands of them rather than over a bucket's few members).
8. Cost, measured on 1M-10M photo-like (pHash, dHash) rows at the default ``t = 8``: the
   candidates are a fixed 1.5e-3 of all pairs (3 bands of 21-22 bits at radius 2), so they
   grow with the square of the rows; about 9 us per row (keys, sorts, 715 flip masks of
   probing) plus 4 ns per candidate, wall time on two shared cores
   (``benchmarks/project_default_method.py``).
9. Compiled kernels (optional: ``pip install 'leakaudit-vision[fast]'``, numba). A linking
   search over at least ``_KERNEL_MIN_VALUES`` values (``engine="auto"``), or any with
   ``engine="numba"``, runs each band in :mod:`leakaudit._kernels`: a counting sort by band
   key into a direct table of bucket starts, then ranges of keys on the worker threads, each
   bucket against itself and its flip-mask partners (probed mask by mask over consecutive
   keys, so partners are read from one region of memory), eight candidates per vector
   comparison, the other hash checked on the few hits; a union-find on the calling thread
   keeps the pairs that join two components. Same plan, same candidates, same answer, in
   under 1 ns of CPU time per candidate (probing included): the 10M rows of section 8 in
   45-60 s of search on two cores shared with other jobs (``link_labels`` 73 s in all,
   against 251 s). Memory: 28 bytes per searched value (the union-find; the band's order,
   int32 below 2**31 values, and both hashes in band order), 4 bytes per band key (16 MB for
   22 bits; one band's arrays at a time), and about 130 MB for numba and the loaded kernels.
   Compiling them takes about 6 s, once: the compiled code is cached (340 KB; see
   :mod:`leakaudit._kernels`), and importing numba and loading it takes about 1.5 s per
   process, which is why ``"auto"`` leaves small searches to numpy. Without numba, or for
   the dense single-hash passes and bands over 24 bits, the numpy path above runs.
10. Threads: ``threads=`` on the public functions, else the ``LEAKAUDIT_THREADS`` environment
    variable, else every usable CPU for the kernels and two for the numpy path.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import warnings
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from leakaudit._memory import return_freed_memory
from leakaudit._search_buckets import BLOCK_ELEMENTS as _BLOCK_ELEMENTS
from leakaudit._search_buckets import Batcher as _Batcher
from leakaudit._search_buckets import Components, as_hash_array, band_keys, pairs_within_brute_force
from leakaudit._search_buckets import DenseBand as _DenseBand
from leakaudit._search_buckets import Second as _Second
from leakaudit._search_buckets import apart as _apart
from leakaudit._search_buckets import brute_unique_pairs as _brute_unique_pairs
from leakaudit._search_buckets import bucket_finder as _bucket_finder
from leakaudit._search_buckets import concat_ranges as _concat_ranges
from leakaudit._search_buckets import flip_masks_by_top_bit as _flip_masks_by_top_bit
from leakaudit._search_buckets import map_ordered as _map_ordered
from leakaudit._search_buckets import owner_offsets as _owner_offsets
from leakaudit._search_buckets import size_class as _size_class
from leakaudit._search_buckets import sort_band as _sort_band
from leakaudit._search_compiled import compiled_layout as _compiled_layout
from leakaudit._search_compiled import compiled_links as _compiled_links
from leakaudit._search_plan import DIRECT_TABLE_MAX_BITS as _DIRECT_TABLE_MAX_BITS
from leakaudit._search_plan import HASH_BITS as _BITS
from leakaudit._search_plan import SearchPlan, choose_plan
from leakaudit._search_plan import band_radii as _radii  # noqa: F401  (tests use search._radii)
from leakaudit._search_plan import contiguous_masks as _contiguous_masks  # noqa: F401  (tests)
from leakaudit._validation import check_choice, check_int, usable_cpu_count
from leakaudit.hashing import popcount64

__all__ = [
    "as_hash_array",
    "band_keys",
    "iter_linking_pairs",
    "iter_pairs_within",
    "pairs_within",
    "pairs_within_brute_force",
    "worker_threads",
]

# Probed keys per numpy call: flip masks sharing a top bit are batched up to this many keys.
_PROBE_ELEMENTS = 1 << 18
# Candidate pairs per verification window: small enough that the window's arrays stay in cache.
_WINDOW_ELEMENTS = 1 << 18
# Threads for the probing (numpy releases the GIL in its loops); results stay in order. None:
# the ``threads`` argument, else ``LEAKAUDIT_THREADS``, else the defaults below (see
# _thread_count); tests set an int to fix it.
_THREADS: int | None = None
# The numpy path's default: its worker threads spend part of their time holding the GIL, and
# each task in flight holds its arrays, so it was measured and tuned on two.
_NUMPY_THREADS = 2
# Linking searches over at least this many distinct values use the compiled kernels when numba
# is installed (engine="auto"); below it the numpy path takes well under a second, less than
# importing numba and loading the cached kernels.
_KERNEL_MIN_VALUES = 200_000
# Compiled band search: band keys per task (about 64 tasks per thread, at least 256 keys).
_KERNEL_TASKS_PER_THREAD = 64
# Compiled band search: pairs per worker buffer (16 bytes each), grown when a bucket needs more.
_KERNEL_BUFFER_PAIRS = 1 << 16
_ENGINES = ("auto", "numba", "numpy")
# Grouping: a plan is searched by _dense_links when its first band's buckets hold more than
# this many pairs per value (clumpy data).
_DENSE_PAIRS_PER_VALUE = 4
# Grouping, dense bands: the first chunk of probing values; chunks then double up to 1/32 of n.
_FIRST_CHUNK = 1 << 12
# Buckets of at most this many members probe member by member (see _band_pairs).
_PER_MEMBER_MAX = 4
# Bucket pairs of at most this many members a side are compared as padded blocks (_block_pairs).
_BLOCK_MAX = 48


def iter_pairs_within(
    hashes: NDArray[np.uint64],
    threshold: int,
    *,
    chunk_pairs: int = 4_000_000,
    threads: int | None = None,
) -> Iterator[NDArray[np.int64]]:
    """Stream every pair of rows whose hashes differ in at most ``threshold`` bits.

    Exact (the same pairs as :func:`pairs_within_brute_force`), but chunked so that the full set of
    pairs, which grows roughly quadratically on real, clumpy data, is never held in memory.
    Each pair appears exactly once over all chunks (a band only emits the pairs no earlier band
    caught), always as ``(i, j)`` with ``i < j``; the order of pairs is unspecified.

    Parameters
    ----------
    hashes : ndarray of uint64, shape (n,)
        One 64-bit perceptual hash per row.
    threshold : int
        Largest Hamming distance (inclusive), in ``[0, 64]``.
    chunk_pairs : int, default 4_000_000
        Largest number of pairs per yielded chunk.
    threads : int, optional
        Worker threads of the search; default ``LEAKAUDIT_THREADS`` when set, else 2 (see
        :func:`iter_linking_pairs`).

    Yields
    ------
    ndarray of int64, shape (k, 2)
        Row pairs, ``1 <= k <= chunk_pairs``.

    Examples
    --------
    >>> import numpy as np
    >>> hashes = np.array([0b0000, 0b0011, 0b1111, 0b0000], dtype=np.uint64)
    >>> chunks = list(iter_pairs_within(hashes, 2, chunk_pairs=3))
    >>> [len(chunk) for chunk in chunks]
    [3, 1]
    >>> sorted(map(tuple, np.concatenate(chunks).tolist()))
    [(0, 1), (0, 3), (1, 2), (1, 3)]
    """
    h = as_hash_array(hashes)
    t = check_int("threshold", threshold, 0, _BITS)
    chunk = check_int("chunk_pairs", chunk_pairs, 1)
    _check_threads(threads)
    return _iter_row_pairs(h, t, chunk, threads)


def _iter_row_pairs(
    h: NDArray[np.uint64], t: int, chunk: int, threads: int | None = None
) -> Iterator[NDArray[np.int64]]:
    unique, inverse, counts = np.unique(h, return_inverse=True, return_counts=True)
    # Rows grouped by their distinct value: members of value v are order[starts[v] : starts[v] + c].
    order = np.argsort(inverse, kind="stable")
    starts = np.cumsum(counts) - counts
    batcher = _Batcher(chunk)

    # Identical hashes: every pair of rows sharing a value.
    positions = np.arange(h.size, dtype=np.int64)
    ends = np.repeat(starts + counts, counts)
    for owner, offset in _owner_offsets(ends - positions - 1, _BLOCK_ELEMENTS):
        yield from batcher.add(order[owner], order[owner + 1 + offset])

    # Distinct values within the threshold, expanded to all their rows.
    for a, b in iter_unique_pairs(unique, t, threads=threads):
        ca = counts[a]
        cb = counts[b]
        if bool((ca == 1).all()) and bool((cb == 1).all()):
            yield from batcher.add(order[starts[a]], order[starts[b]])
            continue
        for owner, offset in _owner_offsets(ca * cb, _BLOCK_ELEMENTS):
            rows_a = order[starts[a[owner]] + offset // cb[owner]]
            rows_b = order[starts[b[owner]] + offset % cb[owner]]
            yield from batcher.add(rows_a, rows_b)
    yield from batcher.flush()


def pairs_within(
    hashes: NDArray[np.uint64], threshold: int, *, threads: int | None = None
) -> NDArray[np.int64]:
    """Return every pair of rows whose hashes differ in at most ``threshold`` bits.

    Equal to :func:`pairs_within_brute_force` for every input, computed with the fast index of
    :func:`iter_pairs_within`. All pairs are materialised: on large, clumpy inputs prefer
    :func:`iter_pairs_within` or :func:`leakaudit.grouping.group_labels_within`.

    Parameters
    ----------
    hashes : ndarray of uint64, shape (n,)
        One 64-bit perceptual hash per row.
    threshold : int
        Largest Hamming distance (inclusive), in ``[0, 64]``.
    threads : int, optional
        Worker threads of the search (see :func:`iter_pairs_within`).

    Returns
    -------
    ndarray of int64, shape (k, 2)
        Row pairs ``(i, j)`` with ``i < j``, sorted lexicographically, without repeats.

    Examples
    --------
    >>> import numpy as np
    >>> hashes = np.array([0b0000, 0b0011, 0b1111, 0b0000], dtype=np.uint64)
    >>> pairs_within(hashes, 2).tolist()
    [[0, 1], [0, 3], [1, 2], [1, 3]]
    """
    h = as_hash_array(hashes)
    t = check_int("threshold", threshold, 0, _BITS)
    _check_threads(threads)
    n = h.size
    chunks = list(_iter_row_pairs(h, t, 1 << 24, threads))
    if not chunks:
        return np.zeros((0, 2), dtype=np.int64)
    pairs = np.concatenate(chunks)
    # One int64 key per pair sorts lexicographically and drops repeats in one call (n**2 < 2**63
    # for any n that fits in memory).
    keys = np.unique(pairs[:, 0] * n + pairs[:, 1])
    return np.stack((keys // n, keys % n), axis=1)


# --------------------------------------------------------------------------------------------------
# The index over distinct values


def _second_of(
    unique: NDArray[np.uint64], second: NDArray[np.uint64] | None, threshold: int | None
) -> _Second | None:
    if second is None:
        return None
    values = as_hash_array(second, name="second")
    if values.shape != unique.shape:
        raise ValueError(
            f"second must have one hash per value (length {unique.size}); got length {values.size}."
        )
    return _Second(values, check_int("second_threshold", threshold, 0, _BITS))


def iter_unique_pairs(
    unique: NDArray[np.uint64],
    threshold: int,
    *,
    plan: SearchPlan | None = None,
    second: NDArray[np.uint64] | None = None,
    second_threshold: int | None = None,
    threads: int | None = None,
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Yield index pairs ``(a, b)`` of distinct values within ``threshold``, each pair exactly once.

    ``unique`` must hold distinct values (as from ``np.unique``); ``a`` and ``b`` are positions in
    it, in no particular order within a pair. ``plan`` overrides the cost model (used by tests to
    exercise every layout on small inputs). With ``second`` (one more hash per position), a pair
    must also lie within ``second_threshold`` on it; ``unique`` may then repeat a value, as long as
    its ``(unique, second)`` pairs are distinct. ``threads`` as in :func:`iter_linking_pairs`
    (this search always runs on numpy).
    """
    _check_threads(threads)
    return _search(
        unique, threshold, plan, None, _second_of(unique, second, second_threshold), threads
    )


def iter_linking_pairs(
    unique: NDArray[np.uint64],
    threshold: int,
    components: Components,
    *,
    plan: SearchPlan | None = None,
    second: NDArray[np.uint64] | None = None,
    second_threshold: int | None = None,
    threads: int | None = None,
    engine: str = "auto",
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Yield enough pairs within ``threshold`` to connect what all of them would connect.

    For grouping: the caller merges the pairs into ``components`` as they come, and the search
    skips whole buckets (and pairs of buckets) whose members are already one component, which on
    clumpy data avoids enumerating most of the (possibly billions of) near pairs. Pairs may repeat,
    and a pair whose ends are already one component may be left out. ``plan`` overrides the cost
    model, and ``second`` adds a second hash that linked pairs must agree on, as in
    :func:`iter_unique_pairs`.

    Parameters
    ----------
    threads : int, optional
        Worker threads. Default: the ``LEAKAUDIT_THREADS`` environment variable when set (a
        positive int), else every CPU this process may use for the compiled kernels and 2 for
        the numpy path (whose threads contend for the GIL).
    engine : {"auto", "numba", "numpy"}, default "auto"
        ``"numba"``: the compiled kernels (:mod:`leakaudit._kernels`, ``pip install
        'leakaudit-vision[fast]'``), which keep their own union-find and yield only the pairs
        that join two components (at most one per value). ``"numpy"``: the numpy path.
        ``"auto"``: the kernels when numba is installed and at least 200,000 values are
        searched, else numpy. Both are exact; the dense passes of single-hash clumpy data
        (:func:`_dense_links`) and bands wider than 24 bits always run on numpy.
    """
    _check_threads(threads)
    check_choice("engine", engine, _ENGINES)
    return _search(
        unique,
        threshold,
        plan,
        components,
        _second_of(unique, second, second_threshold),
        threads,
        engine,
    )


def _search(
    unique: NDArray[np.uint64],
    threshold: int,
    plan: SearchPlan | None,
    components: Components | None,
    second: _Second | None = None,
    threads: int | None = None,
    engine: str = "numpy",
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    n = unique.size
    if n < 2 or (threshold == 0 and second is None):  # distinct values are at distance >= 1
        return
    if plan is None and second is not None:
        unique, threshold, second, plan = _cheaper_first(unique, threshold, second)
    if plan is None:
        plan = choose_plan(unique, threshold)
    if plan.brute_force or threshold == 0:
        # With a second hash, a value may repeat (its second hashes differ): at threshold 0
        # those pairs are the only ones, and the brute force finds them.
        yield from _brute_unique_pairs(unique, threshold, second)
        return
    covered = sum(r + 1 for r in plan.radii)
    if covered <= threshold:
        raise ValueError(f"plan covers distance < {covered}; threshold {threshold} needs more.")
    widest = max(bin(mask).count("1") for mask in plan.band_masks)
    kernels = None
    if components is not None and widest <= _DIRECT_TABLE_MAX_BITS:
        kernels = _compiled_kernels(engine, n)
    if kernels is not None:
        layout = _compiled_layout(kernels, unique, plan.band_masks[0], second)
        # Single-hash clumpy data goes to the dense passes below (numpy), as on that path.
        if second is not None or not _is_dense_counts(np.diff(layout[0]), n):
            workers = _thread_count(threads, compiled=True)
            links = _compiled_links(
                kernels,
                unique,
                threshold,
                plan,
                second,
                layout,
                workers,
                tasks_per_thread=_KERNEL_TASKS_PER_THREAD,
                buffer_pairs=_KERNEL_BUFFER_PAIRS,
            )
            del layout  # the generator holds it until its first band is searched, then drops it
            yield from links
            return
        del layout
    threads = _thread_count(threads, compiled=False)
    first_band: Future[tuple[NDArray[np.int64], NDArray[np.uint64]]] = Future()
    first_band.set_result(_sort_band(unique, plan.band_masks[0]))
    # Dense passes bet on one giant component of the searched relation. With a second hash that
    # relation is sparser than the first hash's clumps suggest (1M photo-like pairs: dense
    # pHash buckets, yet the largest joint group held 5% of the rows), and the passes, which
    # compare whole buckets, then cost several times the plain search: measured 3x slower.
    if components is not None and second is None and _is_dense(first_band.result()[1]):
        first = _DenseBand(unique, plan.band_masks[0], plan.radii[0], first_band.result(), second)
        del first_band
        yield from _dense_links(unique, threshold, plan, components, first, second, threads)
        return
    if threads <= 1:
        bands: list[Future[tuple[NDArray[np.int64], NDArray[np.uint64]]] | None] = [first_band]
        del first_band  # each band's sort is freed once searched
        bands.extend([None] * (len(plan.band_masks) - 1))
        for index in range(len(plan.band_masks)):
            band, bands[index] = bands[index], None
            yield from _band_pairs(
                unique, threshold, plan, index, components, band, second, threads
            )
            del band
        return
    # Each band's keys are sorted on a second thread while the previous band is searched.
    with ThreadPoolExecutor(max_workers=1) as ahead:
        sorted_band = first_band
        del first_band
        for index in range(len(plan.band_masks)):
            current = sorted_band
            if index + 1 < len(plan.band_masks):
                sorted_band = ahead.submit(_sort_band, unique, plan.band_masks[index + 1])
            yield from _band_pairs(
                unique, threshold, plan, index, components, current, second, threads
            )
            del current
            return_freed_memory()


def _cheaper_first(
    unique: NDArray[np.uint64], threshold: int, second: _Second
) -> tuple[NDArray[np.uint64], int, _Second, SearchPlan]:
    """Search through whichever of the two hashes the cost model rates cheaper, check the other.

    Both orders find the same pairs (positions are shared); on photos pHash is usually the
    cheaper one to band (its 21-bit bands collide ~20 times more than uniform ones, dHash's
    ~1000 times), but the model decides on the data at hand.
    """
    swapped = (second.values, second.threshold, _Second(unique, threshold))
    if threshold == 0 and second.threshold > 0:
        return (*swapped, choose_plan(second.values, second.threshold))
    plan = choose_plan(unique, threshold)
    if plan.brute_force or second.threshold == 0:
        return unique, threshold, second, plan
    other = choose_plan(second.values, second.threshold)
    if other.estimated_seconds < plan.estimated_seconds:
        return (*swapped, other)
    return unique, threshold, second, plan


# --------------------------------------------------------------------------------------------------
# Threads and the compiled kernels


def _check_threads(threads: object) -> None:
    """Check ``threads`` and, when it is None, ``LEAKAUDIT_THREADS``, at the public boundary."""
    if threads is not None:
        check_int("threads", threads, 1)
    else:
        _thread_count(None, compiled=False)


def worker_threads(threads: int | None = None, *, compiled: bool = False) -> int:
    """The worker threads a search runs with.

    ``threads`` when given (an int >= 1), else the ``LEAKAUDIT_THREADS`` environment
    variable when set, else every usable CPU for the compiled kernels and at most 2 for
    numpy code (whose threads contend for the GIL).

    Raises
    ------
    ValueError
        ``threads`` or ``LEAKAUDIT_THREADS`` is not an int >= 1.
    """
    return _thread_count(threads, compiled=compiled)


def _thread_count(threads: int | None, *, compiled: bool) -> int:
    """Resolve the worker threads: the argument, a test's override, ``LEAKAUDIT_THREADS``, default.

    The default is every CPU this process may use for the compiled kernels (they run without
    the GIL and hold little per task) and :data:`_NUMPY_THREADS` for the numpy path.
    """
    if threads is not None:
        return check_int("threads", threads, 1)
    if _THREADS is not None:
        return _THREADS
    text = os.environ.get("LEAKAUDIT_THREADS", "").strip()
    if text:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(f"LEAKAUDIT_THREADS must be an int >= 1; got {text!r}.")
        return value
    cores = usable_cpu_count()
    return cores if compiled else min(_NUMPY_THREADS, cores)


def _compiled_kernels(engine: str, n: int) -> ModuleType | None:
    """The compiled kernels for a linking search over ``n`` values, or None for numpy.

    numba is looked up without importing it; it is imported (with the kernels) only when they
    are used. ``engine="numba"`` without numba raises an ``ImportError`` naming the extra.
    """
    if engine == "numpy" or (engine == "auto" and n < _KERNEL_MIN_VALUES):
        return None
    if importlib.util.find_spec("numba") is None:
        if engine == "numba":
            raise ImportError("engine='numba' needs numba: pip install 'leakaudit-vision[fast]'.")
        return None
    try:
        from leakaudit import _kernels
    except ImportError as error:  # numba present but unusable (e.g. built for another numpy)
        if engine == "numba":
            raise
        warnings.warn(
            f"numba is installed but could not be imported ({error}); searching with numpy.",
            RuntimeWarning,
            stacklevel=4,
        )
        return None
    return _kernels


def _range_pairs(
    sorted_hashes: NDArray[np.uint64],
    left: NDArray[np.int64],
    start: NDArray[np.int64],
    length: NDArray[np.int64],
    t: int,
    second: _Second | None = None,
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Yield the pairs ``(left[k], q)``, ``start[k] <= q < start[k] + length[k]``, within ``t``.

    Positions index ``sorted_hashes`` (hashes in band-key order), so the right-hand sides of a
    range are contiguous in memory and the left-hand hash is repeated rather than gathered.
    Windows hold about :data:`_WINDOW_ELEMENTS` candidates; longer ranges are cut first. With
    ``second`` (its values in the same band order), pairs must also be close on it.
    """
    keep = length > 0
    if not keep.all():
        left, start, length = left[keep], start[keep], length[keep]
    if left.size == 0:
        return
    window = _WINDOW_ELEMENTS
    if int(length.max()) > window:
        pieces = (length + window - 1) // window
        owner = np.repeat(np.arange(length.size), pieces)
        piece = np.arange(owner.size) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        left = left[owner]
        start = start[owner] + piece * window
        length = np.minimum(window, length[owner] - piece * window)
    ends = np.cumsum(length)
    first = 0
    done = 0
    while first < left.size:
        last = max(first + 1, int(np.searchsorted(ends, done + window, side="right")))
        lf, st, ln = left[first:last], start[first:last], length[first:last]
        right = _concat_ranges(st, ln)
        values = np.repeat(sorted_hashes[lf], ln)
        values ^= sorted_hashes[right]
        hit = np.flatnonzero(popcount64(values) <= t)
        del values
        if hit.size * 8 > right.size:  # dense hits (clumpy data): one sequential pass
            p, q = np.repeat(lf, ln)[hit], right[hit]
        elif hit.size:
            offsets = np.cumsum(ln) - ln
            p, q = lf[np.searchsorted(offsets, hit, side="right") - 1], right[hit]
        if hit.size and second is not None:
            close = second.close(second.values[p], second.values[q])
            p, q = p[close], q[close]
        if hit.size and p.size:
            yield p, q
        done = int(ends[last - 1])
        first = last


def _block_pairs(
    sorted_hashes: NDArray[np.uint64],
    start_a: NDArray[np.int64],
    count_a: NDArray[np.int64],
    start_b: NDArray[np.int64],
    count_b: NDArray[np.int64],
    t: int,
    second: _Second | None = None,
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Yield the pairs within ``t`` between runs ``start_a + [0, count_a)``, ``start_b + ...``.

    Runs are padded to a size class (:func:`_size_class`) by repeating their last member, so
    that every run pair of one class is one ``(A, B, k)`` broadcast XOR and popcount: no
    per-candidate index arrays, which is what makes the expansion of :func:`_range_pairs` cost
    several passes per candidate. The few hits are then cut back to the real members. The run
    pairs are the last (contiguous) axis: numpy's inner loop then runs over thousands of them,
    not over a class width of 1 to 48, which made the same comparison 2 to 8 times slower
    (10 ns per candidate for 6 x 2 blocks, 1.3 ns now).
    """
    class_a = _size_class(count_a)
    class_b = _size_class(count_b)
    # Codes below 96 * 96 fit 16 bits, which numpy sorts stably by radix, in linear time.
    classes = (class_a * (_BLOCK_MAX * 2) + class_b).astype(np.int16)
    # One sort, then each class's run pairs are a slice (one comparison pass per class over all
    # of them cost a tenth of the comparisons themselves).
    by_class = np.argsort(classes, kind="stable")
    sorted_classes = classes[by_class]
    cuts = np.flatnonzero(sorted_classes[1:] != sorted_classes[:-1]) + 1
    for first, last in zip([0, *cuts.tolist()], [*cuts.tolist(), classes.size], strict=True):
        width_a, width_b = divmod(int(sorted_classes[first]), _BLOCK_MAX * 2)
        chosen = by_class[first:last]
        step = max(1, _WINDOW_ELEMENTS // (width_a * width_b))
        offsets_a = np.arange(width_a, dtype=np.int64)[:, None]
        offsets_b = np.arange(width_b, dtype=np.int64)[:, None]
        for k0 in range(0, chosen.size, step):
            part = chosen[k0 : k0 + step]
            sa, ca, sb, cb = start_a[part], count_a[part], start_b[part], count_b[part]
            hashes_a = sorted_hashes[sa + np.minimum(offsets_a, ca - 1)]  # (A, k)
            hashes_b = sorted_hashes[sb + np.minimum(offsets_b, cb - 1)]  # (B, k)
            values = hashes_a[:, None, :] ^ hashes_b[None, :, :]
            hit = np.flatnonzero(popcount64(values) <= t)
            del values, hashes_a, hashes_b
            if hit.size == 0:
                continue
            i, rest = np.divmod(hit, width_b * part.size)
            j, pair = np.divmod(rest, part.size)
            real = (i < ca[pair]) & (j < cb[pair])
            p = sa[pair[real]] + i[real]
            q = sb[pair[real]] + j[real]
            if second is not None:
                close = second.close(second.values[p], second.values[q])
                p, q = p[close], q[close]
            if p.size:
                yield p, q


def _is_dense(sorted_keys: NDArray[np.uint64]) -> bool:
    """Whether a band's buckets hold more pairs than :data:`_DENSE_PAIRS_PER_VALUE` per value.

    Clumpy data (real dHash values) is dense; uniform data holds far fewer pairs than values.
    """
    n = sorted_keys.size
    boundary = np.empty(n + 1, dtype=np.bool_)
    boundary[0] = boundary[n] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=boundary[1:n])
    return _is_dense_counts(np.diff(np.flatnonzero(boundary)), n)


def _is_dense_counts(counts: NDArray[np.int64], n: int) -> bool:
    """:func:`_is_dense` from the bucket sizes of a band over ``n`` values."""
    sizes = counts.astype(np.float64)
    return float(np.dot(sizes, sizes - 1.0)) / 2 > _DENSE_PAIRS_PER_VALUE * n


def _dense_links(
    unique: NDArray[np.uint64],
    t: int,
    plan: SearchPlan,
    components: Components,
    first: _DenseBand,
    second: _Second | None = None,
    threads: int = _NUMPY_THREADS,
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Yield links on dense, clumpy data, skipping what is already in the giant component.

    Clumpy data (real dHash values) has a dense core whose near pairs number in the billions and
    which ends up as one giant component. The search runs in passes, one per band and flip
    weight ``w`` (the band keys that differ in exactly ``w`` bits; ``w = 0`` is a value's own
    bucket), weights 0 and 1 first, then 2, and so on: the cheap passes link most of the core
    before the costly ones. In a pass, values probe with every flip mask of its weights and are
    compared with every member of each bucket found; a value in the giant component (the
    largest one when the pass starts, or after its first chunk) does not probe. That is exact:
    a pair at band distance ``w`` of which neither end probed in the pass of ``w`` lies inside
    the giant component, since membership only grows.
    """
    bands = [first]
    bands.extend(
        _DenseBand(unique, mask, radius, None, second)
        for mask, radius in zip(plan.band_masks[1:], plan.radii[1:], strict=True)
    )
    giant = -1
    # Weights 0 and 1 share the first passes: a value's own bucket alone does not join the
    # buckets of a dense core, so the first chunk could not pick its giant component.
    for weights in [(0, 1), *((w,) for w in range(2, max(plan.radii) + 1))]:
        for band in bands:
            chosen = [w for w in weights if w <= band.radius]
            if chosen:
                giant = yield from _dense_pass(band, chosen, t, components, giant, threads)


def _dense_pass(
    band: _DenseBand,
    weights: list[int],
    t: int,
    components: Components,
    giant: int,
    threads: int = _NUMPY_THREADS,
) -> Generator[tuple[NDArray[np.int64], NDArray[np.int64]], None, int]:
    """One pass of :func:`_dense_links` (flip masks of these weights); returns the giant."""
    key_dtype = band.member_keys.dtype.type
    masks = np.array(
        [
            sum(1 << bit for bit in bits)
            for weight in weights
            for bits in itertools.combinations(range(band.width), weight)
        ],
        dtype=np.uint64,
    ).astype(key_dtype)
    find = band.find()
    starts, counts, order = band.starts, band.counts, band.order
    sorted_hashes, member_keys = band.sorted_hashes, band.member_keys
    step = max(1, _PROBE_ELEMENTS // masks.size)
    n = order.size

    def probe(chosen: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        query = member_keys[chosen][:, None] ^ masks[None, :]
        bucket = find(query.reshape(-1))
        del query
        hit = np.flatnonzero(bucket >= 0)
        found = bucket[hit]
        row = chosen[hit // masks.size]
        del bucket, hit
        firsts: list[NDArray[np.int64]] = [np.zeros(0, dtype=np.int64)]
        seconds: list[NDArray[np.int64]] = [np.zeros(0, dtype=np.int64)]
        for p, q in _range_pairs(sorted_hashes, row, starts[found], counts[found], t, band.second):
            other = p != q
            firsts.append(order[p[other]])
            seconds.append(order[q[other]])
        return np.concatenate(firsts), np.concatenate(seconds)

    if giant >= 0:  # the largest component now, which may have overtaken the previous giant
        giant = int(np.argmax(np.bincount(components.roots(), minlength=1)))
    probing = band.probing()
    # Without a giant component yet, start small: the first chunk forms it.
    chunk = _FIRST_CHUNK if giant < 0 else max(_FIRST_CHUNK, n // 32)
    done = 0
    while done < probing.size:
        positions = probing[done : done + chunk]
        done += positions.size
        chunk = min(2 * chunk, max(_FIRST_CHUNK, n // 32))
        if giant >= 0:
            roots = components.roots()
            positions = positions[roots[order[positions]] != roots[giant]]
            del roots
        # Before the giant component exists, probing values sit in the dense core, where each
        # one is within reach of thousands: smaller blocks bound the pairs held at once.
        size = step if giant >= 0 else max(1, step // 16)
        tasks = ((positions[k : k + size],) for k in range(0, positions.size, size))
        for a, b in _map_ordered(probe, tasks, threads):
            if a.size:
                yield from _apart(components, a, b)
        components.sync()
        if giant < 0:
            giant = int(np.argmax(np.bincount(components.roots(), minlength=1)))
    return giant


def _band_pairs(
    unique: NDArray[np.uint64],
    t: int,
    plan: SearchPlan,
    index: int,
    components: Components | None,
    sorted_band: Future[tuple[NDArray[np.int64], NDArray[np.uint64]]] | None = None,
    second: _Second | None = None,
    threads: int = _NUMPY_THREADS,
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Pairs within ``t`` that band ``index`` of ``plan`` finds (see :class:`_BandSearch`)."""
    search = _BandSearch(unique, t, plan, index, components, sorted_band, second, threads)
    yield from search.within_buckets()
    if search.radius == 0:
        return
    if search.width > _DIRECT_TABLE_MAX_BITS:
        yield from search.wide_band_pairs()
        return
    search.build_table()
    yield from search.small_bucket_pairs()
    yield from search.large_bucket_pairs()


class _BandSearch:
    """One band of the multi-index search, over hashes sorted by their band key.

    Hashes sharing a band key form a bucket (a contiguous run in band order). A
    pair within ``t`` whose band keys differ in at most ``radius`` bits is found
    either inside one bucket or between two buckets whose keys differ by a flip
    mask of 1..radius bits. Each stage below is one of those searches:
    :meth:`within_buckets`, then either :meth:`wide_band_pairs` (keys found
    through a prefix table) or, for narrow bands, a direct-address table probed
    member by member for small buckets (:meth:`small_bucket_pairs`) and bucket
    by bucket for large ones (:meth:`large_bucket_pairs`).

    In grouping mode (``components`` given) repeats are harmless, so pairs
    already in one component are skipped instead of filtered by earlier bands.
    """

    def __init__(
        self,
        unique: NDArray[np.uint64],
        t: int,
        plan: SearchPlan,
        index: int,
        components: Components | None,
        sorted_band: Future[tuple[NDArray[np.int64], NDArray[np.uint64]]] | None,
        second: _Second | None = None,
        threads: int = _NUMPY_THREADS,
    ) -> None:
        mask = plan.band_masks[index]
        self.t = t
        self.threads = threads
        self.radius = plan.radii[index]
        self.width = bin(mask).count("1")
        self.components = components
        n = unique.size
        order, sorted_keys = sorted_band.result() if sorted_band else _sort_band(unique, mask)
        boundary = np.empty(n, dtype=np.bool_)
        boundary[0] = True
        np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=boundary[1:])
        self.order = order
        self.starts = np.flatnonzero(boundary)
        bucket_keys = sorted_keys[self.starts]
        del sorted_keys, boundary
        self.counts = np.diff(np.append(self.starts, n))
        # Hashes in bucket order: candidates are then contiguous runs, read sequentially.
        self.sorted_hashes = unique[order]
        # When grouping, repeats are harmless, so the first-band filter is skipped.
        self.earlier = (
            [] if components else [(plan.band_masks[k], plan.radii[k]) for k in range(index)]
        )
        self.seen_version = -1
        # Per bucket: the component all its members already share, or -1 (grouping mode).
        self.bucket_component = np.full(self.starts.size, -1, dtype=np.int64)
        self.key_dtype: type[np.unsignedinteger[Any]] = np.uint32 if self.width <= 32 else np.uint64
        self.compact_keys = bucket_keys.astype(self.key_dtype)
        self.first_hash = self.sorted_hashes[self.starts]  # verifies single-member buckets
        self.second: _Second | None = None
        self.first_second: NDArray[np.uint64] | None = None
        if second is not None:
            self.second = _Second(second.values[order], second.threshold)
            self.first_second = self.second.values[self.starts]

    def refresh(self) -> None:
        """Update which buckets already sit wholly in one component (grouping mode)."""
        components = self.components
        if components is None or components.version == self.seen_version:
            return
        self.seen_version = components.version
        roots = components.roots()[self.order]
        low = np.minimum.reduceat(roots, self.starts)
        self.bucket_component = np.where(low == np.maximum.reduceat(roots, self.starts), low, -1)

    def emit(
        self, p: NDArray[np.int64], q: NDArray[np.int64]
    ) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
        """Yield verified pairs (positions in band order) as rows of ``unique``."""
        if self.earlier:
            # A pair is emitted by the first band within its radius only, so that the bands,
            # which overlap in what they find, together emit each pair once.
            diff = self.sorted_hashes[p] ^ self.sorted_hashes[q]
            first = np.ones(p.size, dtype=np.bool_)
            for other_mask, other_radius in self.earlier:
                first &= popcount64(diff & np.uint64(other_mask)) > other_radius
            p, q = p[first], q[first]
        if self.components is not None and p.size:
            yield from _apart(self.components, self.order[p], self.order[q])
        elif p.size:
            yield self.order[p], self.order[q]

    def ranges(
        self,
        left: NDArray[np.int64],
        right_start: NDArray[np.int64],
        right_count: NDArray[np.int64],
    ) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
        """Each ``left`` position against a run of positions, verified and emitted."""
        for p, q in _range_pairs(
            self.sorted_hashes, left, right_start, right_count, self.t, self.second
        ):
            yield from self.emit(p, q)

    def within_buckets(self) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
        """Pairs inside a bucket (band distance 0): each position with the rest of its bucket.

        Buckets go in chunks of about :data:`_PROBE_ELEMENTS` members, compared on the worker
        threads: all at once, the expanded positions cost 40 bytes per hash of the band.
        """
        shared = np.flatnonzero(self.counts > 1)
        if shared.size == 0:
            return
        ends = np.cumsum(self.counts[shared])
        cuts = np.searchsorted(ends, np.arange(_PROBE_ELEMENTS, int(ends[-1]), _PROBE_ELEMENTS))
        grouping = self.components is not None

        def compare(
            buckets: NDArray[np.int64], bucket_component: NDArray[np.int64]
        ) -> list[tuple[NDArray[np.int64], NDArray[np.int64]]]:
            if grouping:  # skip buckets already in one group (a snapshot: see compared_pairs)
                buckets = buckets[bucket_component[buckets] < 0]
            if buckets.size == 0:
                return []
            starts, counts = self.starts[buckets], self.counts[buckets]
            positions = _concat_ranges(starts, counts)
            later = np.repeat(starts + counts, counts) - positions - 1
            return list(
                _range_pairs(
                    self.sorted_hashes, positions, positions + 1, later, self.t, self.second
                )
            )

        def tasks() -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
            for buckets in np.split(shared, np.unique(cuts)):
                self.refresh()  # on the main thread, as the task is handed out
                yield buckets, self.bucket_component

        for pairs in _map_ordered(compare, tasks(), self.threads):
            for p, q in pairs:
                yield from self.emit(p, q)

    def bucket_pairs(
        self, bucket_a: NDArray[np.int64], bucket_b: NDArray[np.int64]
    ) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
        """Every member of each bucket ``a`` against every member of its bucket ``b``."""
        self.refresh()
        for p, q in self.compared_pairs(bucket_a, bucket_b, self.bucket_component):
            yield from self.emit(p, q)

    def compared_pairs(
        self,
        bucket_a: NDArray[np.int64],
        bucket_b: NDArray[np.int64],
        bucket_component: NDArray[np.int64],
    ) -> list[tuple[NDArray[np.int64], NDArray[np.int64]]]:
        """The verified pairs (positions in band order) between buckets ``a`` and ``b``.

        When grouping, bucket pairs already wholly in one component by ``bucket_component``
        are skipped. That is a snapshot, possibly out of date: components only ever merge, so
        a stale one skips less, never wrongly. Nothing read here is changed by the caller, so
        it runs on a worker thread.
        """
        found: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = []
        if self.components is not None:
            component_a = bucket_component[bucket_a]
            apart = (component_a < 0) | (component_a != bucket_component[bucket_b])
            if not apart.all():
                bucket_a, bucket_b = bucket_a[apart], bucket_b[apart]
        if bucket_a.size == 0:
            return found
        count_a = self.counts[bucket_a]
        count_b = self.counts[bucket_b]
        single = (count_a == 1) & (count_b == 1)
        if single.any():
            sa, sb = bucket_a[single], bucket_b[single]
            near = popcount64(self.first_hash[sa] ^ self.first_hash[sb]) <= self.t
            if self.second is not None and self.first_second is not None:
                near &= self.second.close(self.first_second[sa], self.first_second[sb])
            close = np.flatnonzero(near)
            if close.size:
                found.append((self.starts[sa[close]], self.starts[sb[close]]))
            if single.all():
                return found
            many = ~single
            bucket_a, bucket_b = bucket_a[many], bucket_b[many]
            count_a, count_b = count_a[many], count_b[many]
        # Bucket pairs of up to _BLOCK_MAX members a side: one broadcast comparison per size
        # class; larger ones: each member of bucket a against the whole (contiguous) bucket b.
        blocked = (count_a <= _BLOCK_MAX) & (count_b <= _BLOCK_MAX)
        if blocked.any():
            found.extend(
                _block_pairs(
                    self.sorted_hashes,
                    self.starts[bucket_a[blocked]],
                    count_a[blocked],
                    self.starts[bucket_b[blocked]],
                    count_b[blocked],
                    self.t,
                    self.second,
                )
            )
            if blocked.all():
                return found
            rest = ~blocked
            bucket_a, bucket_b = bucket_a[rest], bucket_b[rest]
            count_a, count_b = count_a[rest], count_b[rest]
        left = _concat_ranges(self.starts[bucket_a], count_a)
        found.extend(
            _range_pairs(
                self.sorted_hashes,
                left,
                np.repeat(self.starts[bucket_b], count_a),
                np.repeat(count_b, count_a),
                self.t,
                self.second,
            )
        )
        return found

    def wide_band_pairs(self) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
        """Wide bands: bucket keys are found through a table of key prefixes."""
        key_dtype, keys = self.key_dtype, self.compact_keys
        lookup = _bucket_finder(keys, self.width)
        for top, flips in enumerate(_flip_masks_by_top_bit(self.width, self.radius)):
            # Probe only from buckets whose key has the mask's top bit clear: the partner then
            # has it set, so each unordered pair of buckets is met once.
            probe = np.flatnonzero((keys >> key_dtype(top)) & key_dtype(1) == 0)
            probe_keys = keys[probe]
            for flip in flips.astype(key_dtype).tolist() if probe.size else []:
                partner = lookup(probe_keys ^ key_dtype(flip))
                hit = np.flatnonzero(partner >= 0)
                if hit.size:
                    yield from self.bucket_pairs(probe[hit], partner[hit])

    def build_table(self) -> None:
        """Narrow bands: a direct-address table from key to bucket.

        Written -1 for an empty slot, the bucket for a small bucket (at most
        ``_PER_MEMBER_MAX`` members) and -2 - bucket for a larger one.
        """
        bucket_count = self.starts.size
        self.small = self.counts <= _PER_MEMBER_MAX
        dtype = np.int32 if bucket_count < 2**30 else np.int64
        self.table = np.full(1 << self.width, -1, dtype=dtype)
        code = np.arange(bucket_count, dtype=dtype)
        self.table[self.compact_keys] = np.where(self.small, code, -2 - code)

    def small_bucket_pairs(self) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
        """Members of small buckets probe one by one for small partner buckets.

        Nearly all hashes of uniform data are here. Probes go from keys with the
        mask's top bit clear, so each pair is met once. A single-member partner
        is verified at once; a small one is expanded. Masks sharing a top bit
        are probed together, a block of (hashes x masks) keys per numpy call,
        probed and verified on a worker thread.
        """
        key_dtype, table, t = self.key_dtype, self.table, self.t
        is_single = self.counts == 1
        small_bucket = np.flatnonzero(self.small)
        member_bucket = np.repeat(small_bucket, self.counts[small_bucket])
        members = _concat_ranges(self.starts[small_bucket], self.counts[small_bucket])
        member_keys = self.compact_keys[member_bucket]
        member_hashes = self.sorted_hashes[members]
        first_hash = self.first_hash
        second = self.second
        member_second = None if second is None else second.values[members]
        first_second = self.first_second
        grouping = self.components is not None

        def probe_block(
            chosen: NDArray[np.int64],
            masks: NDArray[np.unsignedinteger],
            bucket_component: NDArray[np.int64],
        ) -> list[tuple[NDArray[np.int64], NDArray[np.int64]]]:
            """Probe members ``chosen`` with ``masks``: close single partners, then small ones."""
            query = member_keys[chosen][:, None] ^ masks[None, :]
            partner = table[query.reshape(-1)]
            del query
            hit = np.flatnonzero(partner >= 0)
            found = partner[hit].astype(np.int64)
            del partner
            row = chosen[hit // masks.size]
            del hit
            if grouping:  # skip pairs already in one group (a snapshot: see compared_pairs)
                own = bucket_component[member_bucket[row]]
                apart = (own < 0) | (own != bucket_component[found])
                row, found = row[apart], found[apart]
            one = is_single[found]
            close = one & (popcount64(member_hashes[row] ^ first_hash[found]) <= t)
            if second is not None and member_second is not None and first_second is not None:
                close &= second.close(member_second[row], first_second[found])
            pairs = [(members[row[close]], self.starts[found[close]])]
            many = ~one
            if many.any():
                pairs.extend(
                    _range_pairs(
                        self.sorted_hashes,
                        members[row[many]],
                        self.starts[found[many]],
                        self.counts[found[many]],
                        t,
                        second,
                    )
                )
            return pairs

        def blocks() -> Iterator[
            tuple[NDArray[np.int64], NDArray[np.unsignedinteger], NDArray[np.int64]]
        ]:
            for top, flips in enumerate(_flip_masks_by_top_bit(self.width, self.radius)):
                chosen = np.flatnonzero((member_keys >> key_dtype(top)) & key_dtype(1) == 0)
                masks = np.sort(flips).astype(key_dtype)
                step = max(1, _PROBE_ELEMENTS // masks.size)
                for k0 in range(0, chosen.size, step):
                    self.refresh()  # on the main thread, as the task is handed out
                    yield chosen[k0 : k0 + step], masks, self.bucket_component

        for pairs in _map_ordered(probe_block, blocks(), self.threads):
            for p, q in pairs:
                if p.size:
                    yield from self.emit(p, q)

    def large_bucket_pairs(self) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
        """Larger buckets probe every mask in both directions.

        Small buckets skip them as partners; a larger partner is kept from the
        lower-numbered side only. Each chunk of flip masks is probed and its bucket
        pairs compared (:meth:`compared_pairs`: skipped when grouping and both
        buckets already share a group) on a worker thread.
        """
        large = np.flatnonzero(~self.small)
        if large.size == 0:
            return
        flips = _flip_masks_by_top_bit(self.width, self.radius)
        flips_all = np.concatenate(flips).astype(self.key_dtype)
        large_keys = self.compact_keys[large]
        step = max(1, _PROBE_ELEMENTS // large.size)

        def probe_flips(
            flip_chunk: NDArray[np.unsignedinteger], bucket_component: NDArray[np.int64]
        ) -> list[tuple[NDArray[np.int64], NDArray[np.int64]]]:
            query = large_keys[None, :] ^ flip_chunk[:, None]
            partner = self.table[query.reshape(-1)]
            del query
            hit = np.flatnonzero(partner != -1)
            if hit.size == 0:
                return []
            found = partner[hit].astype(np.int64)
            column = hit % large.size
            del partner, hit
            larger = found < 0
            found[larger] = -2 - found[larger]
            keep = ~larger | (found > large[column])
            return self.compared_pairs(large[column[keep]], found[keep], bucket_component)

        def tasks() -> Iterator[tuple[NDArray[np.unsignedinteger], NDArray[np.int64]]]:
            for f0 in range(0, flips_all.size, step):
                self.refresh()  # on the main thread, as the task is handed out
                yield flips_all[f0 : f0 + step], self.bucket_component

        for pairs in _map_ordered(probe_flips, tasks(), self.threads):
            for p, q in pairs:
                yield from self.emit(p, q)
