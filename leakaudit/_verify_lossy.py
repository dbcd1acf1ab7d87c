"""What a lossy copy of a small image may carry: its own re-encoding noise (issue 36).

A JPEG or WebP keeps colour at half resolution (4:2:0) and quantises it in blocks of 16
pixels: on a 14-44 px flag or icon, a copy's colours move by 10-25 levels, more than the pixel
check's fixed limits allow. The judge (:mod:`leakaudit._verify_judge`) therefore compares a
pair with a lossy member's colour above that scale (:func:`chroma_blurred`), and lets its
colour and changed share reach :data:`LOSSY_SLACK` times what a JPEG q50 copy of either image
leaves (:func:`reencoded_noise`). RESULTS 41.
"""

from __future__ import annotations

import dataclasses
import io
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit._verify_view import GRID, LUMA, View, load_view

__all__ = ["LOSSY_SLACK", "chroma_blurred", "chroma_scale", "premultiplied", "reencoded_noise"]


#: How far a lossy pair's colours may differ beyond what a JPEG q50 copy of either image
#: leaves (:func:`reencoded_noise`): the copy may be turned, shifted or saved at another
#: quality (set on the real corpus's flags and icons, RESULTS §41).
LOSSY_SLACK = 1.25


def reencoded_noise(view: View, judge: Callable[[View, View], Any]) -> NDArray[np.float64]:
    """The colour difference and the changed share (as the pixel check measures them)
    between a small image and its own JPEG q50 copy, the most of the copies made in each of
    the 8 turns (a JPEG's blocks start at its top left corner: the noise depends on the
    turn, the most of the 8 does not), kept on the view; zeros for an image larger than
    the view (a re-encode's colour noise is finer than the grid there)."""
    if view.reencoded_noise is None:
        measured = np.zeros(2)
        if view.native is not None:
            source = view.native.convert("RGBA")
            flat = Image.new("RGB", source.size, (255, 255, 255))
            flat.paste(source, mask=source.getchannel("A"))
            # Both sides marked measured: the comparisons below do not ask again.
            itself = dataclasses.replace(view, reencoded_noise=(0.0, 0.0))
            for turn in _TURNS:
                buffer = io.BytesIO()
                (flat if turn is None else flat.transpose(turn)).save(buffer, "JPEG", quality=50)
                with Image.open(buffer) as decoded:
                    back = decoded.convert("RGB")
                if turn is not None:
                    back = back.transpose(_INVERSE_TURNS[turn])
                copy = dataclasses.replace(load_view(back, "copy"), reencoded_noise=(0.0, 0.0))
                verdict = judge(itself, copy)
                if math.isfinite(verdict.chroma):
                    measured = np.maximum(measured, (verdict.chroma, verdict.changed))
        view.reencoded_noise = (float(measured[0]), float(measured[1]))
    return np.array(view.reencoded_noise)


_TURNS: tuple[Image.Transpose | None, ...] = (None, *Image.Transpose)
#: Each turn's inverse (a quarter turn each way swap; the others are their own).
_INVERSE_TURNS = {
    turn: {
        Image.Transpose.ROTATE_90: Image.Transpose.ROTATE_270,
        Image.Transpose.ROTATE_270: Image.Transpose.ROTATE_90,
    }.get(turn, turn)
    for turn in Image.Transpose
}


def premultiplied(grid: NDArray[np.float32]) -> NDArray[np.float32]:
    """A grid's colours times its alpha, (pixels, 3)."""
    colours: NDArray[np.float32] = (grid[..., :3] * (grid[..., 3:] / 255.0)).reshape(-1, 3)
    return colours


def chroma_scale(a: View, b: View) -> float:
    """How many grid pixels two of the smaller image's own pixels span: the scale at which a
    JPEG or WebP copy (chroma kept at half resolution, 4:2:0) lost its colours' detail (used
    only for a pair with a lossy member: two lossless images lost nothing)."""
    sides = [view.native_side for view in (a, b) if view.native_side > 0]
    return 2.0 * GRID / min(sides) if sides else 0.0


def _box_kernel(width: float) -> NDArray[np.float32]:
    """A box ``width`` pixels wide (fractional ends), symmetric, summing to 1."""
    reach = math.ceil((width - 1.0) / 2.0)
    kernel = np.ones(2 * reach + 1, np.float32)
    if reach:
        kernel[0] = kernel[-1] = (width - (2 * reach - 1)) / 2.0
    result: NDArray[np.float32] = kernel / kernel.sum()
    return result


def chroma_blurred(
    residual: NDArray[np.float32], shape: tuple[int, ...], scale: float
) -> NDArray[np.float32]:
    """``residual`` (pixels, 3) with its chroma (not its luma) averaged over a box ``scale``
    grid pixels wide: the colour detail finer than a re-encode keeps is not compared (the
    same box for both images, the same in every turn). Below 1 pixel, as it is."""
    if scale <= 1.0 or len(residual) != shape[0] * shape[1]:
        return residual
    kernel = _box_kernel(min(scale, 4.0))
    luma = residual @ LUMA
    chroma = (residual - luma[:, None]).reshape(shape[0], shape[1], 3)
    pad = len(kernel) // 2
    padded = np.pad(chroma, ((pad, pad), (pad, pad), (0, 0)), mode="edge")
    rows = sum(k * padded[i : i + shape[0]] for i, k in enumerate(kernel))
    both = sum(k * rows[:, i : i + shape[1]] for i, k in enumerate(kernel))
    blurred: NDArray[np.float32] = (luma[:, None] + both.reshape(-1, 3)).astype(np.float32)
    return blurred
