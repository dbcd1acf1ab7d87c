"""The strip entries of a batch at once: :func:`leakaudit.hashing._entries.strip_entries`
for a stack of images of one shape and box, the same hashes bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias, cast

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit.hashing._entries import (
    _stack_entries_from_rows,
    _strip_plan,
    _strip_resamplers,
    strip_entries,
)
from leakaudit.hashing._maths import (
    _DCT_LOW,
    _HASH_SIDE,
    _PHASH_SIZE,
    _SERIAL_GEMM_SIZE,
    _pillow_pass_order,
    _vertical_first,
)
from leakaudit.hashing._planes import _column_pass, _planes_resample, _row_pass
from leakaudit.loading import Box

__all__ = ["_stack_strip_entries"]


# ------------------------------------------------------------------ strip entries
#
# strip_entries for many images: those of one shape and box share the canvas size and
# the strips' windows. Their canvases are Pillow's resize reproduced on the stack
# (_planes_resample, exact), the pass along the strips one product for all of them.
# The pass across the strips (a window of 64 canvas lines resampled to 32, or to the
# dHash strip's 9 or 8) is exact too: the canvas is integers, both passes' weights are
# multiples of 2**-22 whose absolute values sum to at most 1.41 per output, so every
# partial sum is a multiple of 2**-44 below 255 * 1.37 * 1.41 < 2**9 and float64 holds
# it exactly, in any order (test_strip_passes_are_exact). strip_entries' per-window
# product therefore equals any arrangement of the same sums: here the 64 -> 32 pass,
# whose inner outputs all have the same 12 weights two lines apart, is one correlation
# of each canvas line with those weights (shared by every strip; the strips overlap
# by 97%), read at each strip's outputs; the few outputs near a window's edges are
# their own small products. The DCT that follows is not exact: it is np.matmul over
# the stack of thumbnails, one BLAS call per thumbnail with strip_entries' shapes and
# strides, the same floats; or, for a wide image where the BLAS is checked to give the
# same floats that way (_strip_dct_first), its first product once over all the
# image's strip columns, each thumbnail being 32 of them.

#: Canvas pixels of the images whose strips are hashed in one go (bounded working set:
#: their products are about as large). Measured on the reduced images of jpeg-40k (125 x
#: 94, 152 x 114 canvases) and large (240 x 135, 203 x 114), ``bench_hashing.py``'s sets:
#: 0.13-0.16 and 0.23-0.29 ms an image from 2**17 to 3 * 2**17 (2**18: 15 and 11 images),
#: 0.35 on jpeg-40k at 25 images (3.3 MiB of canvases, more than a core's 2 MiB of L2).
_STRIP_VALUES = 1 << 18
#: Columns per block of the banded products across the strips (:func:`_banded_blocks`).
_STRIP_BLOCK = 16
#: Images of one shape and box stacked at least (fewer take strip_entries one at a time,
#: the same hashes) unless their plan is made already: a plan (the products' matrices
#: and the DCT check, :func:`_strip_plan_of`) costs about 4.5 ms, a stacked image about
#: 0.45 ms less than strip_entries (both measured on jpeg-40k's 125 x 94 reduced images,
#: ``benchmarks/bench_hashing.py``).
_STRIP_STACK_MIN = 10
#: Plans kept (:func:`_strip_plan_of`); all are dropped when there are more.
_STRIP_PLANS_KEPT = 256
_STRIP_PLANS: dict[tuple[int, tuple[int, ...], bool], tuple[object, ...]] = {}

_Blocks: TypeAlias = "tuple[tuple[int, int, int, int, NDArray[np.float64]], ...]"


def _banded_blocks(matrix: NDArray[np.float64], block: int) -> _Blocks:
    """``(first column, stop, first row, stop, weights)`` blocks of a banded ``matrix``.

    Each block's columns read only the rows between its first and last nonzero
    weight (zeros inside that range are multiplied, exactly).
    """
    blocks = []
    for first in range(0, matrix.shape[1], block):
        stop = min(matrix.shape[1], first + block)
        used = np.flatnonzero(matrix[:, first:stop].any(axis=1))
        low, high = (int(used[0]), int(used[-1]) + 1) if used.size else (0, 1)
        weights = np.ascontiguousarray(matrix[low:high, first:stop])
        weights.flags.writeable = False
        blocks.append((first, stop, low, high, weights))
    return tuple(blocks)


def _banded_product(lines: NDArray[np.float64], blocks: _Blocks) -> NDArray[np.float64]:
    """``lines`` times the matrix of :func:`_banded_blocks`, in single-threaded products."""
    out = np.empty((len(lines), blocks[-1][1]), dtype=np.float64)
    for first, stop, low, high, weights in blocks:
        step = max(1, _SERIAL_GEMM_SIZE // ((high - low) * (stop - first)))
        for row in range(0, len(lines), step):
            np.matmul(
                lines[row : row + step, low:high], weights, out=out[row : row + step, first:stop]
            )
    return out


def _sorted_columns(matrix: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """The columns of a banded ``matrix`` by their first nonzero row, and where each went."""
    order = np.argsort((matrix != 0).argmax(axis=0), kind="stable")
    moved = np.empty_like(order)
    moved[order] = np.arange(len(order))
    return np.ascontiguousarray(matrix[:, order]), moved


def _strip_window_products(
    length: int, at: tuple[int, ...], tall: bool
) -> tuple[_Blocks, NDArray[np.intp], _Blocks, NDArray[np.intp]]:
    """The passes across the strips starting at ``at`` of canvas lines of ``length``.

    For the pHash thumbnails and then the dHash strips: the blocks of a banded
    matrix that an image's lines (32, or the dHash strip's rows) are multiplied
    by, and where each strip's values lie in the product, flattened:
    ``(k, rows, columns)`` indices. The pHash matrix correlates a line with the
    weights most outputs share, at every position (every strip's inner outputs
    are some of those), then has a column for each other output of each strip;
    the dHash matrix a column for each output of each strip. Columns are sorted
    by their first row, so that a block of them reads few lines.
    """
    cols, cols_d = _strip_resamplers(tall)[1], _strip_resamplers(tall)[3]
    across, outputs = cols.shape
    k = len(at)
    spans = []
    for out in range(outputs):
        used = np.flatnonzero(cols[:, out])
        spans.append((out, int(used[0]), cols[used[0] : used[-1] + 1, out]))
    keys = [taps.tobytes() for _, _, taps in spans]
    common = max(set(keys), key=keys.count)
    shared = np.frombuffer(common, dtype=np.float64)
    positions = length - len(shared) + 1
    others = [span for span, key in zip(spans, keys, strict=True) if key != common]
    matrix = np.zeros((length, positions + k * len(others)), dtype=np.float64)
    for position in range(positions):
        matrix[position : position + len(shared), position] = shared
    where = np.empty((k, outputs), dtype=np.intp)  # column of strip s's output j
    for out, first, _ in spans:
        if keys[out] == common:
            where[:, out] = np.asarray(at) + first
    for e, (out, first, taps) in enumerate(others):
        for s, start in enumerate(at):
            column = positions + e * k + s
            matrix[start + first : start + first + len(taps), column] = taps
            where[s, out] = column
    matrix, moved = _sorted_columns(matrix)
    index = np.arange(_PHASH_SIZE)[None, :, None] * matrix.shape[1] + moved[where][:, None, :]
    rows_d = len(_strip_resamplers(tall)[2])
    outputs_d = cols_d.shape[1]
    matrix_d = np.zeros((length, k * outputs_d), dtype=np.float64)
    for s, start in enumerate(at):
        matrix_d[start : start + across, s * outputs_d : (s + 1) * outputs_d] = cols_d
    matrix_d, moved_d = _sorted_columns(matrix_d)
    where_d = moved_d.reshape(k, outputs_d)
    index_d = np.arange(rows_d)[None, :, None] * matrix_d.shape[1] + where_d[:, None, :]
    return (
        _banded_blocks(matrix, _STRIP_BLOCK),
        index.ravel(),
        _banded_blocks(matrix_d, _STRIP_BLOCK),
        index_d.ravel(),
    )


def _strip_canvases(
    stack: NDArray[np.uint8], size: tuple[int, int], region: Box
) -> NDArray[np.float64]:
    """strip_entries' canvases of a ``(m, height, width)`` stack, as ``(height, m, width)``."""
    m, height, width = stack.shape
    order = _pillow_pass_order()
    if order is None:  # Pillow itself, as strip_entries
        canvases = [
            np.asarray(
                Image.fromarray(np.ascontiguousarray(pixels)).resize(
                    size, Image.Resampling.LANCZOS, box=region
                ),
                dtype=np.float64,
            )
            for pixels in stack
        ]
        return np.stack(canvases, axis=1)
    planes = np.empty((height, m, width), dtype=np.float64)
    planes[...] = stack.transpose(1, 0, 2)
    vertical = order == "rule" and _vertical_first(width, height, size)
    return _planes_resample(planes, size, vertical, region)


def _strip_bands(
    stack: NDArray[np.uint8], tall: bool, size: tuple[int, int], region: Box, at: NDArray[np.intp]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The low DCT bands ``(m * k, 8, 8)`` and dHash strips of a stack's strips.

    The thumbnails and strips are strip_entries' bit for bit (rounded as it
    rounds them, a tall image's transposed back as it does), the bands the same
    floats too: the DCT is np.matmul over the thumbnails, one BLAS call each
    with strip_entries' shapes, or (:func:`_strip_dct_first`) its first product
    made for all of an image's strips at once.
    """
    m, k = len(stack), len(at)
    rows_d = _strip_resamplers(tall)[2]
    planes = _strip_canvases(stack, size, region)
    # The pass along the strips (unrounded, exact), as (m, outputs, canvas_long) lines.
    if tall:  # planes (canvas_long, m, along)
        shared = _row_pass(planes, _PHASH_SIZE, None, rounded=False).transpose(1, 2, 0)
        shared_d = _row_pass(planes, len(rows_d), None, rounded=False).transpose(1, 2, 0)
    else:  # planes (along, m, canvas_long)
        shared = _column_pass(planes, _PHASH_SIZE, None, rounded=False).transpose(1, 0, 2)
        shared_d = _column_pass(planes, len(rows_d), None, rounded=False).transpose(1, 0, 2)
    length = shared.shape[2]
    blocks, index, blocks_d, index_d, dct_first = _strip_plan_of(length, at, tall)
    products = []
    for lines, matrix in ((shared, blocks), (shared_d, blocks_d)):
        product = _banded_product(np.ascontiguousarray(lines).reshape(-1, length), matrix)
        # Rounded as strip_entries rounds each strip's values (here copies of them).
        np.rint(product, out=product)
        np.clip(product, 0.0, 255.0, out=product)
        products.append(product.reshape(m, -1))
    strips = np.take(products[1], index_d, axis=1).reshape(m * k, len(rows_d), -1)
    if tall:
        strips = strips.transpose(0, 2, 1)
    width = products[0].shape[1] // _PHASH_SIZE
    if dct_first:
        # A strip's thumbnail is some columns of its image's product, so the DCT's
        # first product of every strip is those columns of one product per image.
        first = np.matmul(_DCT_LOW, products[0].reshape(m, _PHASH_SIZE, width))
        columns = index.reshape(k, _PHASH_SIZE, _PHASH_SIZE)[:, 0]  # (k, 32) columns
        at_rows = np.arange(_HASH_SIDE)[None, :, None] * width + columns[:, None, :]
        left = np.take(first.reshape(m, -1), at_rows.ravel(), axis=1)
        low = np.matmul(left.reshape(m * k, _HASH_SIDE, _PHASH_SIZE), _DCT_LOW.T)
        return low, strips
    thumbs = np.take(products[0], index, axis=1).reshape(m * k, _PHASH_SIZE, _PHASH_SIZE)
    if tall:
        thumbs = thumbs.transpose(0, 2, 1)
    return np.matmul(np.matmul(_DCT_LOW, thumbs), _DCT_LOW.T), strips


def _strip_dct_first(
    length: int,
    at: tuple[int, ...],
    products: tuple[_Blocks, NDArray[np.intp], _Blocks, NDArray[np.intp]],
) -> bool:
    """Whether the DCT's first product of all of a wide image's strip columns gives
    each strip's thumbnail what strip_entries' product of the thumbnail gives it, here.

    For the very columns the strips take (:func:`_strip_window_products`), checked
    on random values: the BLAS does the same operations whatever the values, and
    one that summed a column differently in the wider product (measured: it does
    for some widths) would differ in the last bits of most of its values. False
    makes the strips' DCT strip_entries' own products.
    """
    index = products[1]
    columns = index.reshape(len(at), _PHASH_SIZE, _PHASH_SIZE)[:, 0]
    width = int(index.max()) // _PHASH_SIZE + 1
    rng = np.random.default_rng(20261204)
    values = np.floor(rng.random((2, _PHASH_SIZE, width)) * 256.0)
    whole = np.matmul(_DCT_LOW, values)
    thumbs = np.ascontiguousarray(values[:, :, columns].transpose(0, 2, 1, 3))
    each = np.matmul(_DCT_LOW, thumbs.reshape(-1, _PHASH_SIZE, _PHASH_SIZE))
    return bool(
        np.array_equal(whole[:, :, columns].transpose(0, 2, 1, 3).reshape(each.shape), each)
    )


def _strip_plan_of(
    length: int, at: NDArray[np.intp], tall: bool
) -> tuple[_Blocks, NDArray[np.intp], _Blocks, NDArray[np.intp], bool]:
    """:func:`_strip_window_products` and (wide images) :func:`_strip_dct_first`, kept."""
    key = (length, tuple(at.tolist()), tall)
    plan = _STRIP_PLANS.get(key)
    if plan is None:
        products = _strip_window_products(*key)
        plan = (*products, not tall and _strip_dct_first(length, key[1], products))
        if len(_STRIP_PLANS) >= _STRIP_PLANS_KEPT:
            _STRIP_PLANS.clear()
        _STRIP_PLANS[key] = plan
    return cast("tuple[_Blocks, NDArray[np.intp], _Blocks, NDArray[np.intp], bool]", plan)


def _stack_strip_entries(
    views: Sequence[tuple[NDArray[np.uint8], Box | None]],
) -> list[tuple[NDArray[np.uint64], NDArray[np.uint64]]]:
    """:func:`strip_entries` of every view, the views of one shape and box together."""
    empty = np.zeros(0, dtype=np.uint64)
    found = [(empty, empty)] * len(views)
    groups: dict[tuple[tuple[int, ...], Box | None], list[int]] = {}
    for index, (pixels, box) in enumerate(views):
        groups.setdefault((pixels.shape, box), []).append(index)
    for (shape, box), members in groups.items():
        plan = _strip_plan(shape, box)
        if plan is None:
            continue
        tall, size, region, at = plan
        k = len(at)
        length = size[1] if tall else size[0]
        if (
            len(members) < _STRIP_STACK_MIN
            and (length, tuple(at.tolist()), tall) not in _STRIP_PLANS
        ):
            for index in members:
                found[index] = strip_entries(*views[index])
            continue
        step = max(1, _STRIP_VALUES // (size[0] * size[1]))
        for start in range(0, len(members), step):
            part = members[start : start + step]
            stack = np.stack([views[i][0] for i in part])
            phash, dhash = _stack_entries_from_rows(*_strip_bands(stack, tall, size, region, at))
            for j, index in enumerate(part):
                found[index] = (phash[j * k : (j + 1) * k], dhash[j * k : (j + 1) * k])
    return found
