"""The native-resolution check: look-alike graphics told apart on their own pixels."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit._colour_map import mapped_colours
from leakaudit._verify_judge import PairVerdict, correlation, pair_background
from leakaudit._verify_moved import moved_part_count
from leakaudit._verify_options import DISTINCT_MIN_SIDE
from leakaudit._verify_view import LUMA, VIEW_SIDE, View, flattened, turned_grid

__all__ = [
    "distinct_applies",
    "distinct_pixel_count",
    "registered_pixel_count",
]

#: The native-resolution check (:func:`distinct_pixel_count`): the pair must align on
#: the comparison grid at least this well (luma correlation), a pixel differs strongly
#: when it is this far off in some channel from every pixel of the other image's 3 x 3
#: neighbourhood (after a gain and offset per channel), and pixels that are background
#: in both images are left out.
#: Set by RESULTS §10 session 8 on the generated closure (0.96 and a looser alignment
#: test lost pad or crop 5% recall; without the outer tenth, flattened tile icons were
#: told apart); ``_DISTINCT_BACKGROUND`` was not varied. Generated data only (checked on
#: 300 real-photo crops at 32 px with generated copies: none told apart).
_DISTINCT_ALIGNED = 0.97
_DISTINCT_LEVEL = 96.0
_DISTINCT_BACKGROUND = 24.0
_DISTINCT_MARGIN = 0.1


def distinct_applies(a: View, b: View, verdict: PairVerdict) -> bool:
    """Whether the pixel check's verdict on ``(a, b)`` can be followed by
    :func:`distinct_pixel_count`: the pixel check decided (no geometry), with a
    structure of at least 0.9, one image is a graphic, both are stored losslessly
    (a JPEG's ringing or a GIF's palette would look like a change) and both are at
    least :data:`DISTINCT_MIN_SIDE` pixels on their shorter side (all set in RESULTS
    §10 session 8, on the generated closure); or, whatever their size and similarity,
    both lossless images with transparency kept at their own pixels
    (:attr:`View.own`) and of one size once turned (compared pixel for pixel: issue
    36, consecutive animation frames and emblem variants of real icon themes)."""
    if verdict.stage != "pixels" or not (a.lossless and b.lossless):
        return False
    if _same_pixels_kind(a, b, verdict.turn):
        # Two lossless sprites or icons of one size: compared pixel for pixel whatever
        # their size and similarity (no resampling between them to allow for).
        return True
    return (
        verdict.similarity >= 0.9
        and (a.graphic or b.graphic)
        and min(a.native_side, b.native_side) >= DISTINCT_MIN_SIDE
    )


def distinct_pixel_count(a: View, b: View, turn: int, stop_below: int = 1) -> int:
    """Pixels that differ strongly between two aligned images at native resolution.

    The comparison grid (24 x 24) cannot see a badge or a glyph of a few pixels,
    so two icons of one template, or a sprite and its palette-swapped twin with
    one changed eye, pass it. Here:

    - the pair must be aligned as a whole: ``b`` turned by ``turn`` (its best of
      the 8 turns on the grid) correlates >= 0.97 with ``a`` on the grid (not a
      crop or a pad, which the grid check aligned by their entries);
    - both images are brought to the smaller one's shorter side (at most 48),
      from their own pixels when they are that small (:attr:`View.native`),
      and flattened as the pixel check does;
    - pixels that are background in both, the outer tenth on each side (where
      copies differ: a rotation's fill, a re-crop, transparent corners flattened
      onto a colour), and, for one transparent and one opaque image, what is
      transparent in the one, are left out;
    - the rest is matched per channel by a gain and offset, and a pixel differs
      strongly when it is more than 96 levels off every pixel of the other's
      3 x 3 neighbourhood, in both directions (which absorbs a pixel of
      misalignment and resampling).

    The count is the smallest over the 8 turns of ``b``, so a symmetric figure is
    not held against its mirror image; the turns stop at the first count under
    ``stop_below`` (the decision's threshold: nothing smaller is needed then).

    Returns
    -------
    int
        The count, or 0 when the two are not aligned on the grid.
    """
    background = pair_background(a, b)
    if _same_pixels_kind(a, b, turn):
        return moved_part_count(a, b, turn, background, stop_below)
    grid_a = flattened(a.grid, background)
    grid_b = flattened(np.ascontiguousarray(turned_grid(b.grid, turn)), background)
    if correlation(grid_a @ LUMA, grid_b @ LUMA) < _DISTINCT_ALIGNED:
        return 0
    side = max(1, min(a.native_side, b.native_side, VIEW_SIDE))
    native_a, native_b = _native_rgba(a, side), _native_rgba(b, side)
    first = flattened(native_a, background).reshape(side, side, 3)
    second = flattened(native_b, background).reshape(side, side, 3)
    own_b = _own_background(b, background)
    off_a = _figure_inside(first, _own_background(a, background))
    # One transparent, one opaque: the opaque one may be the other flattened onto any
    # colour, so what is transparent in the one says nothing.
    seen = None
    if a.has_alpha != b.has_alpha:
        seen = (native_a if a.has_alpha else native_b)[..., 3]
    counts = []
    # The grid's own turn first: when it already finds few, the others need not run.
    for code in [turn, *(c for c in range(8) if c != turn)]:
        turned = np.ascontiguousarray(turned_grid(second, code))
        use = off_a | _figure_inside(turned, own_b)
        if seen is not None:
            opaque = seen if a.has_alpha else turned_grid(seen[..., None], code)[..., 0]
            use &= opaque >= 128
        counts.append(_strong_differences(first, turned, use))
        if counts[-1] < stop_below:
            break
    return min(counts)


def registered_pixel_count(
    a: View, b: View, first: NDArray[np.float32], second: NDArray[np.float32]
) -> int:
    """:func:`distinct_pixel_count` of a registered pair: ``first`` and ``second`` (RGBA,
    one square side) are the overlap of ``a`` and of ``b`` (turned) at native resolution
    (:func:`leakaudit._verify_align.registered_natives`), compared in that one alignment."""
    background = pair_background(a, b)
    side = first.shape[0]
    flat_a = flattened(first, background).reshape(side, side, 3)
    flat_b = flattened(second, background).reshape(side, side, 3)
    use = _figure_inside(flat_a, _own_background(a, background)) | _figure_inside(
        flat_b, _own_background(b, background)
    )
    if a.has_alpha != b.has_alpha:
        use &= (first if a.has_alpha else second)[..., 3] >= 128
    return _strong_differences(flat_a, flat_b, use)


def _own_background(view: View, background: NDArray[np.float32]) -> NDArray[np.float32]:
    """What counts as ``view``'s background once flattened onto ``background``: that, for
    an image with transparency, else its own border colour."""
    return background if view.has_alpha else view.border


def _figure_inside(flat: NDArray[np.float32], own: NDArray[np.float32]) -> NDArray[np.bool_]:
    """Pixels of a flattened square image (side, side, 3) off its background ``own`` by
    :data:`_DISTINCT_BACKGROUND` at least, less the outer tenth on each side: copies
    differ there (a rotation's fill, a re-crop, transparent corners flattened onto a
    colour); a badge sits inside."""
    side = flat.shape[0]
    margin = round(_DISTINCT_MARGIN * side)
    inside = np.zeros(flat.shape[:2], dtype=bool)
    inside[margin : side - margin, margin : side - margin] = True
    figure: NDArray[np.bool_] = inside & (np.abs(flat - own).max(axis=2) >= _DISTINCT_BACKGROUND)
    return figure


def _same_pixels_kind(a: View, b: View, turn: int) -> bool:
    """Both images lossless with transparency and kept as their own pixels
    (:attr:`View.own`, up to 96 px), of one size once ``b`` is turned: nothing was
    resampled between them, so they are compared pixel for pixel."""
    if a.own is None or b.own is None:
        # Only figures on transparency (sprites, icons, :attr:`View.own`): an opaque small
        # photo's copy may be resampled at the same size (CIFAR's PNGs), and one flattened
        # onto some colour says nothing where the other is transparent; the general check
        # handles those.
        return False
    width, height = b.own.size
    turned_size = (height, width) if turn & 1 else (width, height)
    return a.own.size == turned_size


def _native_rgba(view: View, side: int) -> NDArray[np.float32]:
    """A view at ``side`` x ``side``, RGBA, shape (side, side, 4): from the image's own
    pixels when it is small (exactly them at its own size)."""
    image = view.native if view.native is not None else view.rgba
    if image.size != (side, side):
        image = image.resize((side, side), Image.Resampling.BILINEAR)
    rgba: NDArray[np.float32] = np.asarray(image, dtype=np.float32)
    return rgba


def _strong_differences(
    first: NDArray[np.float32], second: NDArray[np.float32], use: NDArray[np.bool_]
) -> int:
    """Pixels of ``use`` more than :data:`_DISTINCT_LEVEL` off the other image's 3 x 3
    neighbourhood (either way) after a gain and offset per channel."""
    if np.count_nonzero(use) < 16:
        use = np.ones_like(use)
    # The best global colour map of the family (leakaudit._colour_map), fitted on the
    # pixels used, applied to all (a grey or channel-swapped copy is a copy).
    first_used, second_used = first[use], second[use]
    fitted, target_used = mapped_colours(first_used, second_used)
    swapped = target_used is first_used
    source, target = (second, first) if swapped else (first, second)
    matched = _applied(source[use], fitted, source)
    off = np.maximum(_off_every_neighbour(target, matched), _off_every_neighbour(matched, target))
    return int(np.count_nonzero((off > _DISTINCT_LEVEL) & use))


def _off_every_neighbour(
    image: NDArray[np.float32], other: NDArray[np.float32]
) -> NDArray[np.float32]:
    """Per pixel of ``image``: its smallest largest-channel distance to the 3 x 3
    neighbourhood of the same pixel in ``other``."""
    height, width = image.shape[:2]
    padded = np.pad(other, ((1, 1), (1, 1), (0, 0)), mode="edge")
    best = np.full((height, width), np.inf, dtype=np.float32)
    for dy in range(3):
        for dx in range(3):
            distance = np.abs(image - padded[dy : dy + height, dx : dx + width]).max(axis=2)
            np.minimum(best, distance, out=best)
    return best


def _applied(
    used: NDArray[np.float32], fitted: NDArray[np.float32], image: NDArray[np.float32]
) -> NDArray[np.float32]:
    """The colour map that took ``used`` (pixels of ``image``) to ``fitted``, applied to the
    whole ``image``: an affine map of the pixels' colours, refitted by least squares (every
    member of the family is affine in the colours)."""
    design = np.concatenate([used, np.ones((len(used), 1), np.float32)], axis=1)
    coef = np.linalg.lstsq(design, fitted, rcond=None)[0]
    whole = np.concatenate([image, np.ones((*image.shape[:2], 1), np.float32)], axis=2)
    mapped: NDArray[np.float32] = (whole @ coef).astype(np.float32)
    return mapped
