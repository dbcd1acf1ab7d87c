"""Every pair between two sets of 64-bit hashes within a Hamming distance: exact.

:mod:`leakaudit.search` finds the pairs *within* one set. The candidate net of
verification needs pairs *between* two sets: an image's 123 crop entries are
only ever compared with other images' as-is and rotation entries, never with
crops. Searching the union would find every crop-with-crop pair first (most of
them between crops of the same image) only to throw them away; at 20k photos
that search took about twice the CPU time of the searches between the sets.

The index is a pigeonhole one: the 64 bits are dealt into three bands with
radii ``r_i`` such that ``sum(r_i + 1) > threshold``, so two hashes within the
threshold are within ``r_i`` bits on at least one band ``i``. The larger set is
sorted by each band's key once and addressed through a direct table of
bucket starts; every key of the smaller set within ``r_i`` bits is probed. A
pair found on band ``j`` is emitted only if no earlier band would have found
it, so each pair comes once. When the probes would cost more than comparing
every pair (large thresholds, tiny sets) every pair is compared instead:
the result is the same.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from math import comb
from typing import Any

import numpy as np
from numpy.typing import NDArray

from leakaudit._validation import check_int
from leakaudit.hashing import popcount64
from leakaudit.search import as_hash_array, band_keys, worker_threads

__all__ = ["iter_pairs_between", "pairs_between_brute_force"]

_BITS = 64
_BANDS = 3
# Probed keys (query rows x flip masks) handled at once.
_PROBES_PER_CHUNK = 1 << 20
# Compared pairs per chunk on the all-pairs path.
_PAIRS_PER_CHUNK = 1 << 22
# Probing one key costs about as much as comparing this many pairs outright.
_PROBE_COST_IN_PAIRS = 8
# Below this many query x index pairs the bands run on the calling thread.
_PARALLEL_MIN_PAIRS = 1 << 26


def pairs_between_brute_force(
    queries: NDArray[np.uint64], index: NDArray[np.uint64], threshold: int
) -> NDArray[np.int64]:
    """Every ``(i, j)`` with ``queries[i]`` and ``index[j]`` within ``threshold`` bits.

    The reference the fast path is tested against: all pairs compared, sorted
    by ``(i, j)``.

    Examples
    --------
    >>> import numpy as np
    >>> q = np.array([0b0000, 0b1111], dtype=np.uint64)
    >>> x = np.array([0b0001, 0b0111, 0b0000], dtype=np.uint64)
    >>> pairs_between_brute_force(q, x, 1).tolist()
    [[0, 0], [0, 2], [1, 1]]
    """
    q = as_hash_array(queries, name="queries")
    x = as_hash_array(index, name="index")
    t = check_int("threshold", threshold, 0, _BITS)
    found = [chunk for chunk in _all_pairs(q, x, t)]
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    pairs = np.concatenate(found)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def iter_pairs_between(
    queries: NDArray[np.uint64], index: NDArray[np.uint64], threshold: int
) -> Iterator[NDArray[np.int64]]:
    """Stream every pair ``(i, j)``: ``queries[i]`` and ``index[j]`` within ``threshold`` bits.

    Exact: the same pairs as :func:`pairs_between_brute_force`, each once, in
    chunks of unspecified order.

    Parameters
    ----------
    queries, index : ndarray of uint64
        The two sets. Either may be the larger; the larger one is indexed.
    threshold : int
        Largest Hamming distance (inclusive), in ``[0, 64]``.

    Yields
    ------
    ndarray of int64, shape (k, 2)
        ``(query row, index row)`` pairs, ``k >= 1``.

    Examples
    --------
    >>> import numpy as np
    >>> q = np.array([0b0000, 0b1111], dtype=np.uint64)
    >>> x = np.array([0b0001, 0b0111, 0b0000], dtype=np.uint64)
    >>> sorted(map(tuple, np.concatenate(list(iter_pairs_between(q, x, 1))).tolist()))
    [(0, 0), (0, 2), (1, 1)]
    """
    q = as_hash_array(queries, name="queries")
    x = as_hash_array(index, name="index")
    t = check_int("threshold", threshold, 0, _BITS)
    if q.size == 0 or x.size == 0:
        return iter(())
    swapped = q.size > x.size
    probe, indexed = (x, q) if swapped else (q, x)
    widths = [len(range(band, _BITS, _BANDS)) for band in range(_BANDS)]
    radii = _radii(t, _BANDS)
    probes = sum(_flip_count(w, r) for w, r in zip(widths, radii, strict=True))
    if probes * _PROBE_COST_IN_PAIRS >= indexed.size:
        chunks = _all_pairs(probe, indexed, t)
    else:
        chunks = _banded_pairs(probe, indexed, t, widths, radii)
    if swapped:
        return (chunk[:, ::-1].copy() for chunk in chunks)
    return chunks


def _radii(threshold: int, bands: int) -> list[int]:
    """Band radii with ``sum(r + 1) == threshold + 1`` (pigeonhole); -1 means never probed."""
    base, extra = divmod(threshold + 1, bands)
    return [base - 1 + (band < extra) for band in range(bands)]


def _flip_count(width: int, radius: int) -> int:
    return sum(comb(width, k) for k in range(radius + 1))


def _flip_masks(width: int, radius: int) -> NDArray[np.uint64]:
    masks = [0]
    for k in range(1, radius + 1):
        masks += [sum(1 << bit for bit in bits) for bits in itertools.combinations(range(width), k)]
    return np.array(masks, dtype=np.uint64)


def _all_pairs(
    probe: NDArray[np.uint64], indexed: NDArray[np.uint64], t: int
) -> Iterator[NDArray[np.int64]]:
    rows = max(1, _PAIRS_PER_CHUNK // max(1, indexed.size))
    for start in range(0, probe.size, rows):
        block = probe[start : start + rows]
        near = popcount64(block[:, None] ^ indexed[None, :]) <= t
        i, j = np.nonzero(near)
        if i.size:
            yield np.stack([i.astype(np.int64) + start, j.astype(np.int64)], axis=1)


def _banded_pairs(
    probe: NDArray[np.uint64],
    indexed: NDArray[np.uint64],
    t: int,
    widths: list[int],
    radii: list[int],
) -> Iterator[NDArray[np.int64]]:
    # Bit k goes to band k % bands: pHash's bits run from low to high frequencies and similar
    # photos agree on the low ones, so contiguous bands would make 2x the candidates.
    count = len(widths)
    masks = [sum(1 << bit for bit in range(band, _BITS, count)) for band in range(count)]
    bands = [band for band in range(count) if radii[band] >= 0]

    def index_of(band: int) -> _BandIndex:
        return _BandIndex.build(indexed, masks[band], radii[band])

    def probe_rows(band_index: _BandIndex, band: int, first: int, stop: int) -> list[Any]:
        earlier = [(np.uint64(masks[b]), radii[b]) for b in bands if b < band]
        return list(band_index.pairs(probe, first, stop, indexed, t, earlier))

    if probe.size * indexed.size < _PARALLEL_MIN_PAIRS:
        for band in bands:
            yield from probe_rows(index_of(band), band, 0, probe.size)
        return
    # One band's index at a time (a few hundred MB at 25M entries); numpy's gathers release
    # the GIL, so threads (2 unless LEAKAUDIT_THREADS says) share its probing in even slices
    # of the queries.
    threads = worker_threads()
    slices = np.linspace(0, probe.size, 2 * threads + 1).astype(int).tolist()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for band in bands:
            band_index = index_of(band)
            tasks = [
                (band_index, band, first, stop)
                for first, stop in itertools.pairwise(slices)
                if stop > first
            ]
            for found in pool.map(lambda task: probe_rows(*task), tasks):
                yield from found
            del band_index, tasks  # before the next band's index is built


class _BandIndex:
    """One band of the indexed set: its rows sorted by key, and where each key's bucket starts."""

    def __init__(
        self,
        mask: int,
        radius: int,
        order: NDArray[np.signedinteger[Any]],
        sorted_hashes: NDArray[np.uint64],
        occupied: NDArray[np.bool_],
        starts: NDArray[np.int32],
    ) -> None:
        self.mask, self.radius = mask, radius
        self.order, self.sorted_hashes = order, sorted_hashes
        self.occupied, self.starts = occupied, starts

    @classmethod
    def build(cls, indexed: NDArray[np.uint64], mask: int, radius: int) -> _BandIndex:
        width = bin(mask).count("1")
        keys = band_keys(indexed, mask).astype(np.int32)
        order = np.argsort(keys, kind="stable")
        if indexed.size < 2**31:
            order = order.astype(np.int32)
        counts = np.bincount(keys, minlength=1 << width)
        starts = np.zeros((1 << width) + 1, dtype=np.int32)
        np.cumsum(counts, out=starts[1:])
        # Most probes miss: a byte per key (4 MB at 22 bits) answers them from cache before
        # the bucket starts (16 MB) are touched.
        return cls(mask, radius, order, indexed[order], counts > 0, starts)

    def pairs(
        self,
        probe: NDArray[np.uint64],
        first: int,
        stop: int,
        indexed: NDArray[np.uint64],
        t: int,
        earlier: list[tuple[np.uint64, int]],
    ) -> Iterator[NDArray[np.int64]]:
        """Pairs of ``probe[first:stop]`` on this band that no ``earlier`` band finds."""
        width = bin(self.mask).count("1")
        flips = _flip_masks(width, self.radius).astype(np.int32)
        probe_keys = band_keys(probe[first:stop], self.mask).astype(np.int32)
        rows_per_chunk = max(1, _PROBES_PER_CHUNK // flips.size)
        for chunk in range(0, probe_keys.size, rows_per_chunk):
            probed = (probe_keys[chunk : chunk + rows_per_chunk, None] ^ flips[None, :]).ravel()
            hit = np.flatnonzero(self.occupied.take(probed))
            if hit.size == 0:
                continue
            key = probed[hit]
            lo = self.starts.take(key).astype(np.int64)
            count = self.starts.take(key + 1) - lo
            query = np.repeat(hit // flips.size + (first + chunk), count)
            position = _ranges(lo, count)
            xor = probe[query] ^ self.sorted_hashes[position]
            keep = popcount64(xor) <= t
            for earlier_mask, earlier_radius in earlier:  # an earlier band finds these
                keep &= popcount64(xor & earlier_mask) > earlier_radius
            if keep.any():
                yield np.stack([query[keep], self.order[position[keep]]], axis=1)


def _ranges(start: NDArray[np.int64], length: NDArray[np.int64]) -> NDArray[np.int64]:
    """``concatenate([arange(s, s + n) for s, n in zip(start, length)])``, lengths > 0.

    One ``cumsum`` over ones with a jump at each range's first slot.
    """
    step = np.ones(int(length.sum()), dtype=np.int64)
    offsets = np.cumsum(length) - length
    step[0] = start[0]
    step[offsets[1:]] = start[1:] - (start[:-1] + length[:-1] - 1)
    return np.cumsum(step, out=step)
