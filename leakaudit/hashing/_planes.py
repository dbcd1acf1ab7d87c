"""Resampling stacks of same-size images as planes: Pillow's Lanczos passes, banded and exact.

A stack ``(m, height, width)`` is held as planes ``(height, m, width)`` (row ``r`` of every
image side by side), so the horizontal pass works on lines and the vertical pass is one left
product; every product is exact (integers times multiples of 2**-22), so the blocks may be
summed in any order and the results are Pillow's to the last bit
(:mod:`leakaudit.hashing._batch` for the thumbnails, :mod:`leakaudit.hashing._strips` for
the strip entries' canvases).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

from leakaudit.hashing._maths import _SERIAL_GEMM_SIZE, _lanczos_weights, _round_clip, _spans
from leakaudit.loading import Box

__all__ = ["_bands", "_column_pass", "_planes_resample", "_row_pass"]


#: Outputs per block of a banded resampling product (:func:`_bands`): measured fastest
#: on 64 x 64 and 125 x 94 images (8 outputs of a halving read 26 of 64 inputs).
_BAND_BLOCK = 8
#: A pass is banded when its blocks read at most this share of the dense product's
#: inputs; else it is one dense product (small products cost more per multiply).
_BAND_SHARE = 0.75

_Band: TypeAlias = "tuple[int, int, int, int, NDArray[np.float64], NDArray[np.float64]]"


@lru_cache(maxsize=512)
def _bands(
    in_size: int, out_size: int, span: tuple[float, float] | None
) -> tuple[_Band, ...] | None:
    """One axis's Lanczos weights as blocks of outputs and the inputs they read.

    Each block is ``(first output, stop, first input, stop, weights, transposed)``,
    ``weights`` the ``(outputs, inputs)`` block and ``transposed`` the same as
    ``(inputs, outputs)``, both C-contiguous: a Lanczos output reads only the few
    inputs under its kernel, so a product block by block does a fraction of the
    dense product's work (exactly, as every product here is exact). One block
    when banding saves too little; None when the weights are the identity (the
    same size, the whole span: Pillow copies the pixels).
    """
    weights = _lanczos_weights(in_size, out_size, span)
    if in_size == out_size and np.array_equal(weights, np.eye(in_size)):
        return None
    spans: list[tuple[int, int, int, int]] = []
    for first in range(0, out_size, _BAND_BLOCK):
        stop = min(out_size, first + _BAND_BLOCK)
        used = np.flatnonzero(weights[first:stop].any(axis=0))
        low, high = (int(used[0]), int(used[-1]) + 1) if used.size else (0, 1)
        spans.append((first, stop, low, high))
    if sum((b[1] - b[0]) * (b[3] - b[2]) for b in spans) > _BAND_SHARE * out_size * in_size:
        spans = [(0, out_size, 0, in_size)]
    blocks: list[_Band] = []
    for first, stop, low, high in spans:
        block = np.ascontiguousarray(weights[first:stop, low:high])
        transposed = np.ascontiguousarray(block.T)
        block.flags.writeable = False
        transposed.flags.writeable = False
        blocks.append((first, stop, low, high, block, transposed))
    return tuple(blocks)


def _row_pass(
    planes: NDArray[np.float64],
    out_size: int,
    span: tuple[float, float] | None,
    rounded: bool = True,
) -> NDArray[np.float64]:
    """The horizontal Lanczos pass of ``(height, m, width)`` planes, rounded as Pillow's.

    Each row of each image is one line of the ``(height * m, width)`` matrix; its
    block products write the output columns they make. ``rounded=False`` leaves
    the exact products (multiples of 2**-22) as they are.
    """
    height, m, width = planes.shape
    bands = _bands(width, out_size, span)
    if bands is None:
        return planes
    lines = planes.reshape(height * m, width)
    out = np.empty((height * m, out_size), dtype=np.float64)
    for first, stop, low, high, _, weights in bands:
        # Row slices small enough for BLAS to stay single-threaded (see _matmul).
        step = max(1, _SERIAL_GEMM_SIZE // ((high - low) * (stop - first)))
        for row in range(0, len(lines), step):
            np.matmul(
                lines[row : row + step, low:high], weights, out=out[row : row + step, first:stop]
            )
    return (_round_clip(out) if rounded else out).reshape(height, m, out_size)


def _column_pass(
    planes: NDArray[np.float64],
    out_size: int,
    span: tuple[float, float] | None,
    rounded: bool = True,
) -> NDArray[np.float64]:
    """The vertical Lanczos pass of ``(height, m, width)`` planes, rounded as Pillow's.

    The planes are a ``(height, m * width)`` matrix whose columns are the
    images' columns side by side: one left product per block, on the rows
    (input lines) it reads, no transposition. ``rounded`` as :func:`_row_pass`.
    """
    height, m, width = planes.shape
    bands = _bands(height, out_size, span)
    if bands is None:
        return planes
    columns = planes.reshape(height, m * width)
    out = np.empty((out_size, m * width), dtype=np.float64)
    for first, stop, low, high, weights, _ in bands:
        step = max(1, _SERIAL_GEMM_SIZE // ((high - low) * (stop - first)))
        for column in range(0, m * width, step):
            np.matmul(
                weights,
                columns[low:high, column : column + step],
                out=out[first:stop, column : column + step],
            )
    return (_round_clip(out) if rounded else out).reshape(out_size, m, width)


def _planes_resample(
    planes: NDArray[np.float64], size: tuple[int, int], vertical_first: bool, box: Box | None
) -> NDArray[np.float64]:
    """:func:`_resample` of every image of ``(height, m, width)`` planes, as planes."""
    height, _, width = planes.shape
    column_span, row_span = _spans(box, width, height)
    if vertical_first:
        return _row_pass(_column_pass(planes, size[1], row_span), size[0], column_span)
    return _column_pass(_row_pass(planes, size[0], column_span), size[1], row_span)
