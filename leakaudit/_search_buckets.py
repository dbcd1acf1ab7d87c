"""The building blocks of the hash search: checked hash arrays, band keys and flip masks, bucket
finders, block comparisons and the brute force that is the search's reference.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from leakaudit._memory import return_freed_memory
from leakaudit._search_plan import DIRECT_TABLE_MAX_BITS, HASH_BITS
from leakaudit._validation import check_int
from leakaudit.hashing import popcount64

__all__ = [
    "BLOCK_ELEMENTS",
    "Batcher",
    "Components",
    "DenseBand",
    "Second",
    "apart",
    "as_hash_array",
    "band_keys",
    "brute_unique_pairs",
    "bucket_finder",
    "concat_ranges",
    "flip_masks_by_top_bit",
    "map_ordered",
    "mask_bits",
    "owner_offsets",
    "pairs_within_brute_force",
    "size_class",
    "sort_band",
]

# Elements per block of the brute force and per candidate window: 4M uint64 = 32 MB, which keeps the
# peak memory bounded while each numpy call still amortises its overhead.
BLOCK_ELEMENTS = 1 << 22
# Worker threads' freed memory is handed back to the system after this many tasks (see
# leakaudit._memory): each call costs well under a millisecond.
_TRIM_EVERY = 16


def as_hash_array(hashes: object, *, name: str = "hashes") -> NDArray[np.uint64]:
    """Return ``hashes`` as a 1-D ``uint64`` array, checking its type.

    ``int64`` input is reinterpreted bit for bit (pandas often stores 64-bit hashes that way);
    other integer arrays are converted when no value is negative.

    Examples
    --------
    >>> as_hash_array([1, 2, 3]).dtype
    dtype('uint64')
    """
    array = np.asarray(hashes)
    if array.ndim == 1 and array.size == 0:
        return np.zeros(0, dtype=np.uint64)
    if array.ndim != 1 or array.dtype.kind not in "ui":
        raise TypeError(
            f"{name} must be a 1-D array of uint64; got a {array.ndim}-D array of {array.dtype}."
        )
    if array.dtype == np.uint64:
        return array
    if array.dtype == np.int64:
        return array.view(np.uint64)
    if array.dtype.kind == "i" and bool((array < 0).any()):
        raise ValueError(f"{name} must be a 1-D array of uint64; got negative values.")
    return array.astype(np.uint64)


def pairs_within_brute_force(hashes: NDArray[np.uint64], threshold: int) -> NDArray[np.int64]:
    """Return every pair of rows whose hashes differ in at most ``threshold`` bits, comparing all.

    This is the reference implementation: quadratic time, but memory stays bounded because rows are
    compared in blocks of about four million pairs.

    Parameters
    ----------
    hashes : ndarray of uint64, shape (n,)
        One 64-bit perceptual hash per row.
    threshold : int
        Largest Hamming distance (inclusive), in ``[0, 64]``.

    Returns
    -------
    ndarray of int64, shape (k, 2)
        Row pairs ``(i, j)`` with ``i < j``, sorted lexicographically.

    Examples
    --------
    >>> import numpy as np
    >>> hashes = np.array([0b0000, 0b0011, 0b1111, 0b0000], dtype=np.uint64)
    >>> pairs_within_brute_force(hashes, 2).tolist()
    [[0, 1], [0, 3], [1, 2], [1, 3]]
    """
    h = as_hash_array(hashes)
    t = check_int("threshold", threshold, 0, HASH_BITS)
    n = h.size
    found: list[NDArray[np.int64]] = [np.zeros((0, 2), dtype=np.int64)]
    rows = max(1, BLOCK_ELEMENTS // max(n, 1))
    for i0 in range(0, n, rows):
        i1 = min(n, i0 + rows)
        distance = popcount64(h[i0:i1, None] ^ h[None, i0:])
        ii, jj = np.nonzero(distance <= t)
        upper = jj > ii  # column jj is row i0 + jj, so this keeps j > i
        found.append(np.stack((ii[upper] + i0, jj[upper] + i0), axis=1).astype(np.int64))
    return np.concatenate(found)


class Batcher:
    """Collect pair arrays and hand them out in chunks of at most ``size`` rows."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.parts: list[NDArray[np.int64]] = []
        self.count = 0

    def add(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> Iterator[NDArray[np.int64]]:
        if a.size == 0:
            return
        pair = np.empty((a.size, 2), dtype=np.int64)
        np.minimum(a, b, out=pair[:, 0])
        np.maximum(a, b, out=pair[:, 1])
        self.parts.append(pair)
        self.count += a.size
        if self.count >= self.size:
            yield from self._drain(final=False)

    def flush(self) -> Iterator[NDArray[np.int64]]:
        yield from self._drain(final=True)

    def _drain(self, *, final: bool) -> Iterator[NDArray[np.int64]]:
        if not self.parts:
            return
        merged = self.parts[0] if len(self.parts) == 1 else np.concatenate(self.parts)
        full = merged.shape[0] // self.size * self.size
        for start in range(0, full, self.size):
            yield merged[start : start + self.size]
        rest = merged[full:]
        self.parts = [rest] if rest.shape[0] else []
        self.count = rest.shape[0]
        if final and rest.shape[0]:
            self.parts, self.count = [], 0
            yield rest


def owner_offsets(
    sizes: NDArray[np.int64], window: int
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Enumerate ``(owner, offset)`` for ``offset in range(sizes[owner])``, in bounded windows.

    This is the vectorised form of ``for owner, s in enumerate(sizes): for offset in range(s)``,
    used to expand bucket pairs into candidate pairs without a Python loop and without ever holding
    more than about ``window`` of them (one huge bucket, e.g. of blank images, can stand for
    billions).
    """
    sizes = sizes.astype(np.int64, copy=False)
    total = int(sizes.sum())
    if total == 0:
        return
    if total <= window:
        owner = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
        first = np.cumsum(sizes) - sizes
        yield owner, np.arange(total, dtype=np.int64) - first[owner]
        return
    ends = np.cumsum(sizes)
    for low in range(0, total, window):
        index = np.arange(low, min(total, low + window), dtype=np.int64)
        owner = np.searchsorted(ends, index, side="right").astype(np.int64)
        yield owner, index - (ends[owner] - sizes[owner])


@dataclass(frozen=True)
class Second:
    """A second hash a pair must also agree on: one value per searched value, and its threshold.

    Candidates are found through the first hash's bands and checked on both hashes before they
    leave the search, so pairs that fail the second hash are never materialised.
    """

    values: NDArray[np.uint64]
    threshold: int

    def close(self, a: NDArray[np.uint64], b: NDArray[np.uint64]) -> NDArray[np.bool_]:
        within: NDArray[np.bool_] = popcount64(a ^ b) <= self.threshold
        return within


class Components(Protocol):
    """What the search may ask of a union-find being filled from its output (see grouping).

    ``version`` changes whenever components merge; ``roots()`` returns each value's current root
    (as of the last merge; equal roots always mean one component); ``sync()`` merges every pair
    yielded so far, so that the search can prune with them at once.
    """

    version: int

    def roots(self) -> NDArray[np.int64]: ...

    def sync(self) -> None: ...


def brute_unique_pairs(
    unique: NDArray[np.uint64], t: int, second: Second | None = None
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    n = unique.size
    rows = max(1, BLOCK_ELEMENTS // n)
    for i0 in range(0, n, rows):
        i1 = min(n, i0 + rows)
        distance = popcount64(unique[i0:i1, None] ^ unique[None, i0:])
        ii, jj = np.nonzero(distance <= t)
        upper = jj > ii
        a, b = ii[upper].astype(np.int64) + i0, jj[upper].astype(np.int64) + i0
        if second is not None and a.size:
            close = second.close(second.values[a], second.values[b])
            a, b = a[close], b[close]
        if a.size:
            yield a, b


def mask_bits(mask: int) -> list[int]:
    return [bit for bit in range(HASH_BITS) if mask >> bit & 1]


def band_keys(unique: NDArray[np.uint64], mask: int) -> NDArray[np.uint64]:
    """Gather the bits of ``mask`` of each hash into a compact key (band bit k -> key bit k).

    Works a byte at a time through 256-entry lookup tables: eight small, cache-resident gathers
    per band instead of one shift-and-mask pass per bit.
    """
    bits = mask_bits(mask)
    octets = unique.astype("<u8", copy=False).view(np.uint8).reshape(-1, 8)
    keys = np.zeros(unique.size, dtype=np.uint64)
    values = np.arange(256, dtype=np.uint64)
    for byte in range(8):
        moves = [(bit - 8 * byte, dest) for dest, bit in enumerate(bits) if bit // 8 == byte]
        if not moves:
            continue
        lookup = np.zeros(256, dtype=np.uint64)
        for source, dest in moves:
            lookup |= ((values >> np.uint64(source)) & np.uint64(1)) << np.uint64(dest)
        keys |= lookup[octets[:, byte]]
    return keys


def flip_masks_by_top_bit(width: int, radius: int) -> list[NDArray[np.uint64]]:
    """For each key bit ``h``, the flip masks of 1..radius bits whose highest set bit is ``h``."""
    by_top: list[NDArray[np.uint64]] = []
    for top in range(width):
        masks = [1 << top]
        for extra in range(1, radius):
            for lower in itertools.combinations(range(top), extra):
                masks.append((1 << top) | sum(1 << bit for bit in lower))
        by_top.append(np.array(masks, dtype=np.uint64))
    return by_top


def concat_ranges(start: NDArray[np.int64], length: NDArray[np.int64]) -> NDArray[np.int64]:
    """Return ``concatenate([arange(s, s + n) for s, n in zip(start, length)])``; lengths > 0.

    One ``cumsum`` over a vector of ones with a jump written at each range's first slot: no
    division or modulo, and every pass is sequential.
    """
    if length.size == 0:
        return np.zeros(0, dtype=np.int64)
    step = np.ones(int(length.sum()), dtype=np.int64)
    offsets = np.cumsum(length) - length
    step[0] = start[0]
    step[offsets[1:]] = start[1:] - (start[:-1] + length[:-1] - 1)
    return np.cumsum(step, out=step)


# Block sizes of _block_pairs: powers of two and their halfway points (padding wastes < 1.5x).
_SIZE_CLASSES = np.array(
    sorted({1, 3 << 20} | {1 << k for k in range(22)} | {3 << k for k in range(21)}), np.int64
)


def size_class(counts: NDArray[np.int64]) -> NDArray[np.int64]:
    """The smallest of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... at least ``counts``."""
    classes: NDArray[np.int64] = _SIZE_CLASSES[np.searchsorted(_SIZE_CLASSES, counts)]
    return classes


_T = TypeVar("_T")


_R = TypeVar("_R")


def map_ordered(
    function: Callable[..., _R], tasks: Iterator[tuple[Any, ...]], threads: int
) -> Iterator[_R]:
    """``function(*task)`` for each task, in order, on up to ``threads`` threads.

    numpy releases the GIL inside its array loops (the compiled kernels run without it), so
    tasks overlap on several cores. Results come back in task order, whatever the timing, so
    the output stays deterministic; at most ``2 * threads`` tasks are in flight, which bounds
    the memory held by results.
    """
    if threads <= 1:
        for task in tasks:
            yield function(*task)
        return
    with ThreadPoolExecutor(max_workers=threads) as pool:
        pending: deque[Future[_R]] = deque()
        for done, task in enumerate(tasks, start=1):
            pending.append(pool.submit(function, *task))
            if len(pending) >= 2 * threads:
                yield pending.popleft().result()
            if done % _TRIM_EVERY == 0:
                return_freed_memory()
        while pending:
            yield pending.popleft().result()


def sort_band(
    unique: NDArray[np.uint64], mask: int
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Return the stable order of the hashes by band key, and the sorted keys."""
    n = unique.size
    keys = band_keys(unique, mask)
    if bin(mask).count("1") <= 32 and n < 2**32:
        # Key and position packed into one word: a plain sort of it is a stable argsort, and
        # faster (numpy's vectorised sort of uint64) than argsort itself.
        keys <<= np.uint64(32)
        keys |= np.arange(n, dtype=np.uint64)
        keys.sort()
        order = (keys & np.uint64(0xFFFF_FFFF)).astype(np.int64)
        keys >>= np.uint64(32)
        return order, keys
    order = np.argsort(keys, kind="stable").astype(np.int64)
    return order, keys[order]


def apart(
    components: Components, a: NDArray[np.int64], b: NDArray[np.int64]
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Yield the pairs whose ends are not yet one component (as of the last merge)."""
    roots = components.roots()
    keep = roots[a] != roots[b]
    if keep.any():
        yield a[keep], b[keep]


def bucket_finder(
    bucket_keys: NDArray[Any], width: int
) -> Callable[[NDArray[Any]], NDArray[np.int64]]:
    """Return a function from band keys to the index of their bucket in ``bucket_keys``, or -1.

    Bands up to :data:`DIRECT_TABLE_MAX_BITS` bits use a direct-address table. Wider bands use a
    hash table: keys sorted by a multiplicative hash slot (about two slots per bucket), and a
    direct table from each slot to its run of keys. Runs are short (usually 0 or 1 keys), so a
    few vectorised bisection steps over the probed keys that hit a non-empty run finish the
    search: two adjacent table reads per probe instead of a binary search over the whole sorted
    table, whose cache misses made wide bands an order of magnitude slower to probe.
    """
    count = bucket_keys.size
    index_dtype = np.int32 if count < 2**31 else np.int64
    if width <= DIRECT_TABLE_MAX_BITS:
        table = np.full(1 << width, -1, dtype=index_dtype)
        table[bucket_keys] = np.arange(count, dtype=index_dtype)

        def find_direct(query: NDArray[Any]) -> NDArray[np.int64]:
            found: NDArray[np.int64] = table[query].astype(np.int64)
            return found

        return find_direct
    if width <= 32 and count < 2**32 - 1:
        return _open_address_finder(bucket_keys, count)
    # A multiplicative hash picks each key's slot: band keys of clumpy data share long prefixes,
    # so a table over the keys' top bits would put hundreds of them in one slot.
    slot_bits = min(DIRECT_TABLE_MAX_BITS, max(16, count.bit_length() + 1))
    key_type = bucket_keys.dtype.type
    multiplier = key_type(0x9E3779B1 if key_type == np.uint32 else 0x9E3779B97F4A7C15)
    shift = key_type(8 * bucket_keys.itemsize - slot_bits)

    def slot_of(keys: NDArray[Any]) -> NDArray[np.intp]:
        slots: NDArray[np.intp] = ((keys * multiplier) >> shift).astype(np.intp)
        return slots

    slots = slot_of(bucket_keys)
    by_slot = np.argsort(slots, kind="stable")  # keys were sorted, so each slot's run is too
    slot_keys = bucket_keys[by_slot]
    first = np.zeros((1 << slot_bits) + 1, dtype=index_dtype)
    np.cumsum(np.bincount(slots, minlength=1 << slot_bits), out=first[1:])
    del slots

    def find_hashed(query: NDArray[Any]) -> NDArray[np.int64]:
        slot = slot_of(query)
        low = first[slot]
        high = first[slot + 1]
        found = np.full(query.size, -1, dtype=np.int64)
        active = np.flatnonzero(high > low)
        lo = low[active].astype(np.int64)
        hi = high[active].astype(np.int64)
        wanted = query[active]
        del slot, low, high
        # Invariant: the key, if present, lies in [lo, hi); stop when every run has one key.
        wide = np.flatnonzero(hi - lo > 1)
        while wide.size:
            middle = (lo[wide] + hi[wide]) // 2
            right = slot_keys[middle] <= wanted[wide]
            lo[wide[right]] = middle[right]
            hi[wide[~right]] = middle[~right]
            wide = wide[hi[wide] - lo[wide] > 1]
        match = slot_keys[lo] == wanted
        found[active[match]] = by_slot[lo[match]]
        return found

    return find_hashed


def _open_address_finder(
    bucket_keys: NDArray[Any], count: int
) -> Callable[[NDArray[Any]], NDArray[np.int64]]:
    """:func:`bucket_finder` for bands of 25 to 32 bits: a filtered open-addressing hash table.

    Each slot holds ``key << 32 | bucket`` in one word (all ones when empty); a multiplicative
    hash spreads the (clumpy) keys, at most a quarter of the slots are used, and collisions move
    on to the next slot (linear probing), inserted and looked up a round at a time, vectorised.
    Most probes miss, and a table of millions of words misses the cache on every read, so a
    bitmap of about 16 bits per key (a one-hash Bloom filter, small enough to stay in cache)
    turns away nearly all of them first.
    """
    multiplier = np.uint64(0x9E3779B97F4A7C15)
    slot_bits = max(4, (4 * count - 1).bit_length())
    slot_shift = np.uint64(64 - slot_bits)
    size = 1 << slot_bits
    filter_bits = max(6, (16 * count - 1).bit_length())
    filter_shift = np.uint64(64 - filter_bits)
    empty = np.uint64(2**64 - 1)
    table = np.full(size, empty, dtype=np.uint64)

    keys = bucket_keys.astype(np.uint64)
    product = keys * multiplier
    present = np.zeros(1 << filter_bits, dtype=np.bool_)
    present[(product >> filter_shift).astype(np.intp)] = True
    bitmap = np.packbits(present, bitorder="little")
    del present
    entries = (keys << np.uint64(32)) | np.arange(count, dtype=np.uint64)
    slot = (product >> slot_shift).astype(np.intp)
    del keys, product
    while entries.size:
        # Of the entries aimed at one free slot, one takes it; the others try the next.
        free = table[slot] == empty
        table[slot[free]] = entries[free]
        placed = table[slot] == entries
        entries, slot = entries[~placed], (slot[~placed] + 1) & (size - 1)
    low_bits = np.uint64(0xFFFF_FFFF)
    seven = np.uint64(7)
    one = np.uint8(1)

    def find_open(query: NDArray[Any]) -> NDArray[np.int64]:
        result = np.full(query.size, -1, dtype=np.int64)
        product = query.astype(np.uint64)
        product *= multiplier
        bit = product >> filter_shift
        maybe = np.flatnonzero(
            (bitmap[(bit >> np.uint64(3)).astype(np.intp)] >> (bit & seven).astype(np.uint8)) & one
        )
        del bit
        wanted = query[maybe].astype(np.uint64)
        slot = (product[maybe] >> slot_shift).astype(np.intp)
        del product
        entry = table[slot]
        # An empty slot reads as key 2**32 - 1, a valid key: empty slots never match.
        match = (entry >> np.uint64(32) == wanted) & (entry != empty)
        found = np.where(match, entry & low_bits, empty)
        # Occupied by another key: look on (rare, as the table is at most a quarter full).
        pending = np.flatnonzero((found == empty) & (entry != empty))
        while pending.size:
            slot_now = (slot[pending] + 1) & (size - 1)
            slot[pending] = slot_now
            entry = table[slot_now]
            hit = (entry >> np.uint64(32) == wanted[pending]) & (entry != empty)
            found[pending[hit]] = entry[hit] & low_bits
            pending = pending[~hit & (entry != empty)]
        known = found != empty
        result[maybe[known]] = found[known].astype(np.int64)
        return result

    return find_open


class DenseBand:
    """One band of a plan, bucketed for ``leakaudit.search._dense_links`` (grouping dense,
    clumpy data)."""

    def __init__(
        self,
        unique: NDArray[np.uint64],
        mask: int,
        radius: int,
        sorted_band: tuple[NDArray[np.int64], NDArray[np.uint64]] | None = None,
        second: Second | None = None,
    ) -> None:
        n = unique.size
        self.width = bin(mask).count("1")
        self.radius = radius
        self.order, sorted_keys = sorted_band if sorted_band else sort_band(unique, mask)
        boundary = np.empty(n, dtype=np.bool_)
        boundary[0] = True
        np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=boundary[1:])
        self.starts = np.flatnonzero(boundary)
        del boundary
        self.counts = np.diff(np.append(self.starts, n))
        key_dtype = np.uint32 if self.width <= 32 else np.uint64
        self.member_keys = sorted_keys.astype(key_dtype)
        del sorted_keys
        self.sorted_hashes = unique[self.order]
        self.second = (
            None if second is None else Second(second.values[self.order], second.threshold)
        )

    def find(self) -> Callable[[NDArray[Any]], NDArray[np.int64]]:
        """Build the band's bucket lookup (built per pass, so only one table is alive at a time)."""
        return bucket_finder(self.member_keys[self.starts], self.width)

    def probing(self) -> NDArray[np.int64]:
        """Positions in probing order: a fixed pseudo-random permutation.

        Each probing value links its neighbours, which then need not probe. In a dense core a
        value has hundreds of neighbours, so probing a spread-out 1% of the core links most of
        it; probing in bucket order would instead probe whole neighbourhoods before linking.
        """
        permutation: NDArray[np.int64] = np.random.default_rng(0).permutation(self.order.size)
        return permutation
