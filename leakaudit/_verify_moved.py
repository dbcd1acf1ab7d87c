"""The pixel-for-pixel check of two lossless sprites or icons of one size: a moved part.

Two images that are stored without loss and share their size (:attr:`View.own`) carry no
re-encoding noise, so what differs between them, once the edits a copy may carry are
undone, is evidence. The edits undone here are the whole shift of up to
:data:`_MAX_SHIFT` pixels, the global colour map (:func:`leakaudit._colour_map.mapped_colours`)
and a small rotation (up to :data:`_MAX_ANGLE` degrees, the issue's "rotations 2-10 degrees").
What is left is a part that moved: a limb of the next animation frame, a turned globe's
continents; or a part that changed: a badge, an emblem, a watermark (a mark in one place is
the same pixels whether a watermark or an emblem put it there; it is counted).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit._colour_map import SOLID_ALPHA, mapped_colours
from leakaudit._verify_view import LUMA, View, flattened, turned_grid

__all__ = ["moved_part_count"]

#: The largest whole shift (pixels, each way) of a small image's copy: a shift copy moves
#: 1-3 pixels (issue 36's edits).
_MAX_SHIFT = 3

#: A pixel differs strongly when it is this far off in some channel (its opacity, or a
#: colour where both are solid) after the shift and the colour map (the native check's
#: level, :mod:`leakaudit._verify_native`).
_LEVEL = 96.0

#: Rotations tried (degrees, each way, in steps of :data:`_ANGLE_STEP`) before a change is
#: counted: a rotated copy keeps its canvas (issue 36: rotations of 2-10 degrees).
_MAX_ANGLE = 10.0
_ANGLE_STEP = 0.5

#: How many of those rotations, the best by their luma, are counted pixel for pixel.
_ANGLES_COUNTED = 3


def moved_part_count(
    a: View, b: View, turn: int, background: NDArray[np.float32], stop_below: int = 1
) -> int:
    """Pixels that differ strongly between two lossless images of one size (:attr:`View.own`),
    compared pixel for pixel once ``b`` is turned by ``turn``, at the whole shift that
    matches best and after the best global colour map; when that reaches ``stop_below``,
    the smallest count over small rotations of either image (a rotated copy keeps its
    canvas), stopping at the first under ``stop_below``.

    A copy shifted as a whole matches exactly at its shift; a frame of the same animation
    (a limb, a wing, an eye moved by a pixel or two) differs there, however it is shifted
    (a 3 x 3 neighbourhood, which absorbs resampling, absorbed those moves too: 126 of 150
    consecutive frames were linked, bench_real).
    """
    assert a.own is not None and b.own is not None
    first = np.asarray(a.own.convert("RGBA"), np.float32)
    second = np.ascontiguousarray(turned_grid(np.asarray(b.own.convert("RGBA"), np.float32), turn))
    off = _off_pixels(first, second, background)
    count = int(np.count_nonzero(off))
    if count < stop_below:
        return count
    own_a, own_b = Image.fromarray(first.astype(np.uint8)), Image.fromarray(second.astype(np.uint8))
    # Coarse to fine: every small rotation of either image is scored by its luma at the
    # canvas it keeps (one rotate and one difference each); only the best few are
    # counted pixel for pixel (a shift search and a colour fit each, 80 of which cost
    # 0.4 s on a pair of different sprites); a rotated copy keeps its canvas, so its
    # shift is searched a pixel each way only.
    scored = []
    lumas = [_flat_luma(first, background), _flat_luma(second, background)]
    fill = float(background @ LUMA)
    steps = round(_MAX_ANGLE / _ANGLE_STEP)
    for step in range(1, steps + 1):
        for angle in (step * _ANGLE_STEP, -step * _ANGLE_STEP):
            for side in (0, 1):
                plane = Image.fromarray(lumas[1 - side], "F")
                rotated_luma = np.asarray(
                    plane.rotate(angle, Image.Resampling.BICUBIC, fillcolor=fill), np.float32
                )
                fixed_luma = lumas[side]
                cost = float(
                    np.abs(
                        (fixed_luma - fixed_luma.mean()) - (rotated_luma - rotated_luma.mean())
                    ).mean()
                )
                scored.append((cost, angle, side))
    scored.sort()
    for _, angle, side in scored[:_ANGLES_COUNTED]:
        fixed, turned = (first, own_b) if side == 0 else (second, own_a)
        rotated = turned.rotate(angle, Image.Resampling.BICUBIC, fillcolor=(0, 0, 0, 0))
        count = min(
            count,
            int(
                np.count_nonzero(_off_pixels(fixed, np.asarray(rotated, np.float32), background, 1))
            ),
        )
        if count < stop_below:
            return count
    return count


def _flat_luma(rgba: NDArray[np.float32], background: NDArray[np.float32]) -> NDArray[np.float32]:
    """The luma of ``rgba`` flattened onto ``background``."""
    height, width = rgba.shape[:2]
    luma: NDArray[np.float32] = (flattened(rgba, background) @ LUMA).reshape(height, width)
    return np.ascontiguousarray(luma, dtype=np.float32)


def _off_pixels(
    first: NDArray[np.float32],
    second: NDArray[np.float32],
    background: NDArray[np.float32],
    max_shift: int = _MAX_SHIFT,
) -> NDArray[np.bool_]:
    """Where ``first`` and ``second`` (RGBA, one size) differ strongly at the best whole shift,
    after the best global colour map: a boolean image of ``first``'s overlap with
    ``second``."""
    height, width = first.shape[:2]
    flat_a = flattened(first, background).reshape(height, width, 3)
    flat_b = flattened(second, background).reshape(height, width, 3)
    luma_a, luma_b = flat_a @ LUMA, flat_b @ LUMA
    best: tuple[float, int, int] | None = None
    for dy in range(-max_shift, max_shift + 1):
        for dx in range(-max_shift, max_shift + 1):
            x, y = _overlap(luma_a, luma_b, dx, dy)
            if x.size < 16:
                continue
            cost = float(np.abs((x - x.mean()) - (y - y.mean())).mean())
            if best is None or cost < best[0]:
                best = (cost, dx, dy)
    if best is None:
        return np.zeros((0, 0), dtype=bool)
    _, dx, dy = best
    x, y = _overlap(first, second, dx, dy)
    shape = x.shape[:2]
    x, y = x.reshape(-1, 4), y.reshape(-1, 4)
    # A global colour edit acts on the colours, not on what is transparent: the map is
    # fitted and tested on the straight colours of the pixels solid in both (flattened,
    # a darker copy's white page went grey while the white it was flattened onto stayed
    # white, and a soft shadow stayed as it was: no map explains both). What is solid in
    # one image only is a part that moved or changed.
    solid = (x[:, 3] >= SOLID_ALPHA) & (y[:, 3] >= SOLID_ALPHA)
    off = np.zeros(len(x), np.float32)
    if np.count_nonzero(solid) >= 16:
        colours_a, colours_b = x[solid, :3], y[solid, :3]
        fitted, target = mapped_colours(colours_a, colours_b, opaque=np.ones(len(colours_a), bool))
        off[solid] = np.abs(target - fitted).max(axis=1)
    off = np.maximum(off, np.abs(x[:, 3] - y[:, 3]))
    strong: NDArray[np.bool_] = (off > _LEVEL).reshape(shape)
    return strong


def _overlap(
    first: NDArray[np.float32], second: NDArray[np.float32], dx: int, dy: int
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """The parts of ``first`` and ``second`` that overlap when ``second`` is moved by
    ``(dx, dy)``."""
    height, width = first.shape[:2]
    ys, yd = (
        slice(max(0, dy), min(height, height + dy)),
        slice(max(0, -dy), min(height, height - dy)),
    )
    xs, xd = slice(max(0, dx), min(width, width + dx)), slice(max(0, -dx), min(width, width - dx))
    return first[ys, xs], second[yd, xd]
