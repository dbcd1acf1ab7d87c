"""Compiled kernels for the banded search when numba is installed (``leakaudit-vision[fast]``).

Imported only by :mod:`leakaudit.search`, and only when a search is large enough to use them:
importing this module imports numba (about 0.4 s) and loads or compiles the kernels.

What is compiled is the inner part of one band of the multi-index search (see
:mod:`leakaudit.search`, section 2): a counting sort of the hashes by band key, then, for a range
of band keys, every bucket against itself and against each bucket reached by a flip mask of
1..radius bits (from the key where the mask's top bit is clear, so each pair of buckets is met
once), the candidates compared eight at a time (one 512-bit XOR and popcount where the CPU has
it; LLVM lowers the same vector code to what any other CPU has); and a sequential union-find
that keeps only the pairs that join two components.

Two details decide the speed, both measured on 10M photo-like rows: array indexing in numba
compiles the comparison loop to gathers, so the eight words are read from a raw address; and a
buffer that a kernel may reallocate costs reference counting on every iteration, so the output
buffers are passed in and a full buffer returns control (with the state to resume from) instead
of growing.

Compiled code is cached (``cache=True``): numba writes it to ``__pycache__`` beside this file or,
when that is read-only (a system site-packages), to its per-user cache directory
(``NUMBA_CACHE_DIR`` overrides it); never near the user's data. When neither can be written the
kernels compile in memory at each first use instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = [
    "DONE",
    "STATE_SIZE",
    "band_layout",
    "band_links",
    "merge_links",
    "spanning_links",
]

# Resume state of band_links: (phase, key or mask index, nonempty-key index, row).
STATE_SIZE = 4
_WITHIN, _ACROSS, DONE = 0, 1, 2


def _jit(function: Callable[..., Any], *, inline: bool = False) -> Any:
    """``numba.njit`` without the GIL, cached on disk when a cache directory can be written."""
    options: dict[str, Any] = {"nogil": True}
    if inline:
        options["inline"] = "always"
    try:
        return numba.njit(cache=True, **options)(function)
    except RuntimeError:  # no writable cache location: compile in memory
        return numba.njit(**options)(function)


def _popcount_typing(context: Any, value: Any) -> Any:
    signature = types.int64(types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, arguments: Any) -> Any:
        word = ir.IntType(64)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(word, [word]), "llvm.ctpop.i64"
        )
        return builder.call(function, arguments)

    return signature, codegen


def _trailing_zeros_typing(context: Any, value: Any) -> Any:
    signature = types.int64(types.int64)

    def codegen(context: Any, builder: Any, signature: Any, arguments: Any) -> Any:
        word = ir.IntType(64)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(word, [word, ir.IntType(1)]), "llvm.cttz.i64"
        )
        return builder.call(function, [arguments[0], ir.Constant(ir.IntType(1), 0)])

    return signature, codegen


def _close8_typing(context: Any, address: Any, offset: Any, value: Any, limit: Any) -> Any:
    """Bit ``k`` of the result: ``popcount(words[offset + k] ^ value) <= limit``, ``k < 8``.

    ``address`` is the data pointer of a ``uint64`` array, read as eight words from
    ``offset`` (the array must hold seven more words than are compared).
    """
    signature = types.int64(types.uintp, types.int64, types.uint64, types.int64)

    def codegen(context: Any, builder: Any, signature: Any, arguments: Any) -> Any:
        address_value, offset_value, hash_value, limit_value = arguments
        word = ir.IntType(64)
        vector = ir.VectorType(word, 8)
        base = builder.inttoptr(address_value, word.as_pointer())
        pointer = builder.bitcast(builder.gep(base, [offset_value]), vector.as_pointer())
        words = builder.load(pointer, align=8)
        lanes = ir.Constant(ir.VectorType(ir.IntType(32), 8), [0] * 8)
        first = ir.Constant(ir.IntType(32), 0)
        undefined = ir.Constant(vector, ir.Undefined)
        spread_value = builder.shuffle_vector(
            builder.insert_element(undefined, hash_value, first), undefined, lanes
        )
        spread_limit = builder.shuffle_vector(
            builder.insert_element(undefined, limit_value, first), undefined, lanes
        )
        popcount = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vector, [vector]), "llvm.ctpop.v8i64"
        )
        distance = builder.call(popcount, [builder.xor(words, spread_value)])
        close = builder.icmp_unsigned("<=", distance, spread_limit)
        return builder.zext(builder.bitcast(close, ir.IntType(8)), word)

    return signature, codegen


_popcount = intrinsic(_popcount_typing)
_trailing_zeros = intrinsic(_trailing_zeros_typing)
_close8 = intrinsic(_close8_typing)


def _band_key(value: np.uint64, lookup: Any) -> int:
    """The band key of ``value``: its band's bits gathered a byte at a time (see band_keys)."""
    key = 0
    for byte in range(8):
        key |= int(lookup[byte, (value >> np.uint64(8 * byte)) & np.uint64(255)])
    return key


_band_key_jit = _jit(_band_key, inline=True)


def _band_layout(
    values: Any, second: Any, lookup: Any, start_of: Any, order: Any
) -> tuple[Any, Any]:
    """Counting sort of the values by band key (stable), into the caller's tables.

    ``lookup[byte, b]`` is the band-key contribution of byte value ``b`` at byte ``byte``.
    Fills ``start_of`` (zeros on entry, one more than the keys; bucket of key ``k`` =
    positions ``start_of[k] : start_of[k + 1]``) and ``order`` (value index at each position),
    int32 when the values fit it (half the memory); returns the values and second values in
    that order, each followed by eight zero words (the comparisons read eight at a time).
    """
    n = values.size
    keys = start_of.size - 1
    # One table, no copy of it to fill from (a table's size less while a band is built): it
    # first holds each bucket's end, and the values, placed from the last, move it to its start.
    for index in range(n):
        start_of[_band_key_jit(values[index], lookup)] += 1
    for key in range(1, keys):
        start_of[key] += start_of[key - 1]
    start_of[keys] = n
    sorted_values = np.zeros(n + 8, dtype=np.uint64)
    sorted_second = np.zeros(n + 8, dtype=np.uint64)
    for index in range(n - 1, -1, -1):
        key = _band_key_jit(values[index], lookup)
        position = start_of[key] - 1
        start_of[key] = position
        order[position] = index
        sorted_values[position] = values[index]
        sorted_second[position] = second[index]
    return sorted_values, sorted_second


def _row_hits(
    base: int,
    row_value: np.uint64,
    low: int,
    high: int,
    limit: int,
) -> int:
    """Whether any of positions ``low..high-1`` lies within ``limit`` of ``row_value``."""
    hits = 0
    for start in range(low, high, 8):
        bits = _close8(base, start, row_value, limit)
        if high - start < 8:
            bits &= (np.int64(1) << (high - start)) - 1
        hits |= bits
    return hits


_row_hits_jit = _jit(_row_hits, inline=True)


def _band_links(
    key_low: int,
    key_high: int,
    start_of: Any,
    masks: Any,
    tops: Any,
    values: Any,
    second: Any,
    limit: int,
    second_limit: int,
    state: Any,
    left: Any,
    right: Any,
) -> int:
    """Write the pairs within both limits among the buckets of keys ``key_low..key_high-1``.

    Each bucket with itself (phase within), then with the bucket of ``key ^ mask`` for every
    flip mask whose top bit (``tops``) is clear in the key (phase across). Positions index
    ``values``; pairs go to ``left[:count]``, ``right[:count]`` with ``left < right``, and
    ``count`` is returned. A row is compared only when the buffers have room for all its pairs,
    so a full buffer returns early with ``state`` set to resume from; ``state[0] == DONE`` when
    the range is finished.
    """
    base = values.ctypes.data
    capacity = left.size
    count = 0
    if state[0] == _WITHIN:
        first_key, first_row = state[1], state[3]
        for key in range(max(key_low, first_key), key_high):
            low, high = start_of[key], start_of[key + 1]
            for row in range(max(low, first_row), high - 1):
                if capacity - count < high - row - 1:
                    state[1], state[3] = key, row
                    return count
                row_value = values[row]
                if _row_hits_jit(base, row_value, row + 1, high, limit) == 0:
                    continue
                row_second = second[row]
                for other in range(row + 1, high):
                    if (
                        _popcount(row_value ^ values[other]) <= limit
                        and _popcount(row_second ^ second[other]) <= second_limit
                    ):
                        left[count] = row
                        right[count] = other
                        count += 1
            first_row = 0
        state[0], state[1], state[2], state[3] = _ACROSS, 0, 0, 0
    # Keys of nonempty buckets in the range, probed mask by mask: consecutive keys meet
    # consecutive partners, so a mask's partner buckets are read from one region of memory.
    nonempty = np.empty(key_high - key_low, dtype=np.int64)
    filled = 0
    for key in range(key_low, key_high):
        if start_of[key + 1] > start_of[key]:
            nonempty[filled] = key
            filled += 1
    first_mask, first_index, first_row = state[1], state[2], state[3]
    for mask_index in range(first_mask, masks.size):
        mask, top = masks[mask_index], tops[mask_index]
        for index in range(first_index, filled):
            key = nonempty[index]
            if (key >> top) & 1:
                continue
            partner = key ^ mask
            partner_low, partner_high = start_of[partner], start_of[partner + 1]
            if partner_low == partner_high:
                continue
            low, high = start_of[key], start_of[key + 1]
            # Rows from the smaller bucket, each against the larger one: the longer run of
            # eight-word comparisons.
            if high - low > partner_high - partner_low:
                low, high, partner_low, partner_high = partner_low, partner_high, low, high
            for row in range(max(low, first_row), high):
                if capacity - count < partner_high - partner_low:
                    state[1], state[2], state[3] = mask_index, index, row
                    return count
                row_value = values[row]
                if _row_hits_jit(base, row_value, partner_low, partner_high, limit) == 0:
                    continue
                row_second = second[row]
                for other in range(partner_low, partner_high):
                    if (
                        _popcount(row_value ^ values[other]) <= limit
                        and _popcount(row_second ^ second[other]) <= second_limit
                    ):
                        left[count] = min(row, other)
                        right[count] = max(row, other)
                        count += 1
            first_row = 0
        first_index = 0
    state[0] = DONE
    return count


def _find(parent: Any, node: int) -> int:
    while parent[node] != node:
        parent[node] = parent[parent[node]]  # path halving
        node = parent[node]
    return node


_find_jit = _jit(_find, inline=True)


def _merge_links(parent: Any, order: Any, left: Any, right: Any, count: int) -> int:
    """Union the pairs ``order[left[k]], order[right[k]]`` into ``parent``; keep those that join.

    Roots are component minima (the smaller root is kept), as in :mod:`leakaudit.grouping`.
    The joining pairs, as value indices, overwrite ``left[:kept]``, ``right[:kept]``; their
    number is returned (at most one less than the number of values, over all calls).
    """
    kept = 0
    for index in range(count):
        a = order[left[index]]
        b = order[right[index]]
        root_a = _find_jit(parent, a)
        root_b = _find_jit(parent, b)
        if root_a == root_b:
            continue
        if root_a < root_b:
            parent[root_b] = root_a
        else:
            parent[root_a] = root_b
        left[kept] = a
        right[kept] = b
        kept += 1
    return kept


def _spanning_links(left: Any, right: Any, count: int) -> int:
    """Keep a spanning forest of the pairs ``left[:count]``, ``right[:count]`` (in place).

    Used when a worker's buffer fills: the pairs that join nothing new are dropped there, so a
    bucket whose members are all near one another (a clique of n members, n**2 / 2 pairs) holds
    at most n - 1 of them. Returns the number kept, at the front of the buffers.
    """
    if count == 0:
        return 0
    nodes = np.unique(np.concatenate((left[:count], right[:count])))
    parent = np.arange(nodes.size)
    kept = 0
    for index in range(count):
        a = _find_jit(parent, np.searchsorted(nodes, left[index]))
        b = _find_jit(parent, np.searchsorted(nodes, right[index]))
        if a == b:
            continue
        parent[max(a, b)] = min(a, b)
        left[kept] = left[index]
        right[kept] = right[index]
        kept += 1
    return kept


band_layout = _jit(_band_layout)
band_links = _jit(_band_links)
merge_links = _jit(_merge_links)
spanning_links = _jit(_spanning_links)
