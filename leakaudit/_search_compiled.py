"""The numpy side of the compiled band search (:mod:`leakaudit._kernels`, section 9 of
:mod:`leakaudit.search`): band layouts in the kernels' form, and the links they find.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import numpy as np
from numpy.typing import NDArray

from leakaudit._memory import return_freed_memory
from leakaudit._search_buckets import Second, flip_masks_by_top_bit, map_ordered, mask_bits
from leakaudit._search_plan import HASH_BITS, SearchPlan

__all__ = [
    "compiled_layout",
    "compiled_links",
]


def _band_lookup(mask: int) -> NDArray[np.int64]:
    """``lookup[byte, b]``: the band-key bits of byte value ``b`` at byte ``byte`` (band_keys)."""
    bits = mask_bits(mask)
    values = np.arange(256, dtype=np.int64)
    lookup = np.zeros((8, 256), dtype=np.int64)
    for dest, bit in enumerate(bits):
        lookup[bit // 8] |= ((values >> (bit % 8)) & 1) << dest
    return lookup


# Positions in a band (bucket starts, value order): int32 below this many values.
_INT32_POSITIONS = 2**31 - 16
_Positions = NDArray[np.int32] | NDArray[np.int64]
_Layout = tuple[_Positions, _Positions, NDArray[np.uint64], NDArray[np.uint64]]


def compiled_layout(
    kernels: ModuleType, unique: NDArray[np.uint64], mask: int, second: Second | None
) -> _Layout:
    """One band's bucket table, order and hashes in band order (:func:`_kernels.band_layout`).

    The table and the order are int32 when the values allow it: 20 MB less at 1M values in a
    22-bit band, in the arrays that set the search's peak memory.
    """
    values = np.ascontiguousarray(unique)
    others = values if second is None else np.ascontiguousarray(second.values)
    positions = np.int32 if values.size < _INT32_POSITIONS else np.int64
    start_of = np.zeros((1 << bin(mask).count("1")) + 1, dtype=positions)
    order = np.empty(values.size, dtype=positions)
    in_order = kernels.band_layout(values, others, _band_lookup(mask), start_of, order)
    return start_of, order, in_order[0], in_order[1]


def compiled_links(
    kernels: ModuleType,
    unique: NDArray[np.uint64],
    t: int,
    plan: SearchPlan,
    second: Second | None,
    first_layout: _Layout,
    threads: int,
    *,
    tasks_per_thread: int,
    buffer_pairs: int,
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Links of a banded plan from the compiled kernels: the pairs that join two components.

    Per band: a counting sort by band key (:func:`_kernels.band_layout`), then ranges of band
    keys searched on the worker threads (:func:`_kernels.band_links`; every bucket against
    itself and its flip-mask partners, both hashes checked), their pairs merged in task order
    on this thread into a union-find (:func:`_kernels.merge_links`), which keeps the pairs that
    join two components: at most one less than the values, all within both thresholds.
    Memory: the union-find (8 bytes per value) and, for the band being searched, its order and
    both hashes in band order (20 bytes per value with int32 positions), plus its key table
    (4 bytes per key with int32 positions) and the worker buffers (1 MB each, two per thread);
    a band's arrays are all freed before the next band is laid out. ``tasks_per_thread`` and
    ``buffer_pairs`` are the search's tunables (``leakaudit.search._KERNEL_TASKS_PER_THREAD``,
    ``_KERNEL_BUFFER_PAIRS``), read by the caller so that a test can set them there.
    """
    n = unique.size
    parent = np.arange(n, dtype=np.int64)
    second_limit = HASH_BITS if second is None else second.threshold
    layout: _Layout | None = first_layout
    del first_layout
    for mask, radius in zip(plan.band_masks, plan.radii, strict=True):
        if layout is None:
            layout = compiled_layout(kernels, unique, mask, second)
        start_of, order, values, others = layout
        layout = None
        width = bin(mask).count("1")
        flips = flip_masks_by_top_bit(width, radius)
        masks = np.concatenate(flips).astype(np.int64)
        tops = np.repeat(np.arange(width, dtype=np.int64), [f.size for f in flips])
        largest = _largest_bucket(start_of)
        capacity = max(buffer_pairs, 2 * largest)
        keys = 1 << width
        span = max(256, keys // (tasks_per_thread * threads))

        def search_keys(
            key_low: int,
            key_high: int,
            start_of: _Positions = start_of,
            values: NDArray[np.uint64] = values,
            others: NDArray[np.uint64] = others,
            masks: NDArray[np.int64] = masks,
            tops: NDArray[np.int64] = tops,
            capacity: int = capacity,
        ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
            """Pairs among the buckets of keys ``key_low..key_high-1`` (positions in band order).

            A full buffer is cut down to a spanning forest of its pairs, and doubled when that
            does not free half of it: memory stays bounded even for a bucket of near copies.
            """
            state = np.zeros(kernels.STATE_SIZE, dtype=np.int64)
            left = np.empty(capacity, dtype=np.int64)
            right = np.empty(capacity, dtype=np.int64)
            count = 0
            while True:
                count += kernels.band_links(
                    key_low,
                    key_high,
                    start_of,
                    masks,
                    tops,
                    values,
                    others,
                    t,
                    second_limit,
                    state,
                    left[count:],
                    right[count:],
                )
                if state[0] == kernels.DONE:
                    return left[:count], right[:count]
                count = kernels.spanning_links(left, right, count)
                if 2 * count > left.size:
                    left = np.concatenate((left, np.empty(left.size, dtype=np.int64)))
                    right = np.concatenate((right, np.empty(right.size, dtype=np.int64)))

        tasks = ((low, min(keys, low + span)) for low in range(0, keys, span))
        left = right = np.empty(0, dtype=np.int64)
        for left, right in map_ordered(search_keys, tasks, threads):
            kept = kernels.merge_links(parent, order, left, right, left.size)
            if kept:
                yield left[:kept].copy(), right[:kept].copy()
        # The band's arrays are also held by search_keys' defaults and the last task's buffers:
        # all must go before the next band is laid out (about 60 MB at 1M values).
        del start_of, order, values, others, search_keys, tasks, left, right
        return_freed_memory()


def _largest_bucket(start_of: _Positions) -> int:
    """The most members of one bucket, from a table of bucket starts, in slices.

    ``np.diff`` of the whole table would be a second table (32 MB for a 22-bit band).
    """
    step = 1 << 16
    largest = 0
    for low in range(0, start_of.size - 1, step):
        piece = start_of[low : low + step + 1]
        largest = max(largest, int((piece[1:] - piece[:-1]).max()))
    return largest
