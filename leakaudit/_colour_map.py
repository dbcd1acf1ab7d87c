"""The global colour maps a copy may have gone through, fitted between two aligned images.

Issue 36's rule: a global colour change that keeps the picture never turns a copy into a
non-copy, whatever the kind of image. Those changes are a small family, and the judge fits
exactly that family, both ways, and keeps the direction and member that leave least:

- per channel, a gain and an offset after any of the 6 channel orders: brightness,
  contrast, a colour cast, per-channel gain, a channel swap (and, approximately, gamma);
- one gain on the chroma and one on the luma with an offset per channel: saturation;
- onto a toned target (grey, sepia, another tone: its colours run along the grey axis,
  :func:`_toned`): a gain and an offset per channel of the source's luma, also fitted on
  the unclipped pixels only when the tone clipped at 255. Not any mix of the channels: onto
  a grey placeholder, some mix of a colour picture's channels is nearly flat, and would
  explain the picture away (emblem variants of a document icon, bench_real); not onto
  shades of one vivid colour either (a blue folder is no toned copy of a red one with an
  emblem whose brightness matches the folder's).

A map outside the family is not fitted: a palette swap that moves one colour of a sprite
and keeps the others (another character's head on the same body) is no gain, order or
saturation, so its pixels stay off. A broader map (any 3 x 3 matrix) would explain every
recolouring of a figure of four colours or fewer, which is most sprites and icons.
"""

from __future__ import annotations

import math
from itertools import permutations

import numpy as np
from numpy.typing import NDArray

__all__ = ["LUMA", "SOLID_ALPHA", "mapped_before_flattening", "mapped_colours"]

#: Rec. 601 luma weights.
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)

#: Gains are kept within [1/2, 2], as the changed-pixel rule always had them: contrast,
#: brightness and channel gains change a channel's spread by less, and a gain near 0 would
#: erase a channel (map a part in another colour onto a flat one), which no picture-keeping
#: edit does. Grey and sepia, which do collapse the colours, are the one-dimensional member.
_MIN_GAIN = 0.5

_ORDERS = [list(order) for order in permutations(range(3))]


def mapped_colours(
    rgb_a: NDArray[np.float32],
    rgb_b: NDArray[np.float32],
    weight: NDArray[np.float32] | None = None,
    opaque: NDArray[np.bool_] | None = None,
    premultiplied: tuple[NDArray[np.float32], NDArray[np.float32]] | None = None,
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """``(fitted, target)``: one image's colours (shape (n, 3)) mapped onto the other's by
    the best global colour map of the family, and the other's colours (the very array
    passed in).

    ``weight`` (n,): how much each pixel counts (a figure's pixels more than its
    background's). A gain, order or saturation edit is invertible, so such a member must
    fit both ways and is scored by its worse direction (else a map onto a flat channel
    would explain a part in another colour away); a grey or sepia target is fitted from
    the colour image only (the colours it dropped cannot come back). The member that
    leaves the smallest weighted mean residual is returned, in its scored direction.

    ``opaque`` (n,): the pixels that are opaque in both images (the others were flattened
    onto a background, which a toned copy's tone did not reach): the grey or sepia member is
    tested and fitted on them when they carry weight enough. ``premultiplied``: the two
    images' colours times their alpha (not flattened onto a background: a toned copy's
    soft fringe stays on its tone's line, which passes through black); when given, whether
    a target's colours lie on a line is tested on them.
    """
    w = np.ones(len(rgb_a), np.float32) if weight is None else weight.astype(np.float32)
    w = w / max(float(w.sum()), 1e-6)
    x, y = rgb_a.astype(np.float32), rgb_b.astype(np.float32)

    def scored(
        fitted: NDArray[np.float32], target: NDArray[np.float32]
    ) -> tuple[float, NDArray[np.float32], NDArray[np.float32]]:
        return float(w @ np.abs(target - fitted).sum(axis=1)), fitted, target

    # The 6 channel orders, both ways, from the 9 (source channel, target channel) fits of
    # each way: an order's residual is the sum of its three channels' (one pass over the
    # pixels, not 36 fits); only the best order's colours are made.
    forth_residuals, back_residuals = _channel_residuals(x, y, w), _channel_residuals(y, x, w)
    best_order: tuple[float, list[int], bool] | None = None
    for order in _ORDERS:
        inverse = [int(k) for k in np.argsort(order)]
        forth = float(sum(forth_residuals[order[k], k] for k in range(3)))
        back = float(sum(back_residuals[inverse[k], k] for k in range(3)))
        worse = (forth, order, True) if forth >= back else (back, inverse, False)
        if best_order is None or worse[0] < best_order[0]:
            best_order = worse
    assert best_order is not None
    score, order, forward = best_order
    candidates = [
        (score, _per_channel(x[:, order], y, w), y)
        if forward
        else (score, _per_channel(y[:, order], x, w), x)
    ]
    forth_saturated = scored(_saturation(x, y, w), y)
    back_saturated = scored(_saturation(y, x, w), x)
    candidates.append(max(forth_saturated, back_saturated, key=lambda c: c[0]))
    tint_w = w
    if opaque is not None and float(w @ opaque) > _MIN_UNCLIPPED:
        tint_w = w * opaque
        tint_w = tint_w / float(tint_w.sum())
    lines = (y, x) if premultiplied is None else (premultiplied[1], premultiplied[0])
    for (source, target), line in zip(((x, y), (y, x)), lines, strict=True):
        if _toned(line, tint_w):
            candidates.append(scored(_tint(source, target, tint_w, clipped=False), target))
        inside = tint_w * _unclipped(target)
        if inside.sum() > _MIN_UNCLIPPED and _toned(line, inside / inside.sum()):
            # A toned copy whose bright colours clipped: its unclipped colours lie on a line.
            candidates.append(scored(_tint(source, target, tint_w, clipped=True), target))
    _, fitted, target = min(candidates, key=lambda c: c[0])
    return fitted, (rgb_b if target is y else rgb_a)


def _tint(
    x: NDArray[np.float32], y: NDArray[np.float32], w: NDArray[np.float32], *, clipped: bool
) -> NDArray[np.float32]:
    """Each channel of ``y`` as a gain and offset of ``x``'s luma: a grey, sepia or duotone
    copy (any other mix of the channels would explain a part in another colour away).

    ``clipped``: the copy's bright colours clipped at 255 (sepia lifts red by a third):
    each channel's gain and offset are fitted on the pixels where that channel of ``y`` is
    not clipped, and the fitted colours are clipped as the copy's were."""
    luma = np.repeat((x @ LUMA)[:, None], 3, axis=1).astype(np.float32)
    if not clipped:
        return _per_channel(luma, y, w)
    fitted = np.empty_like(y)
    for channel in range(3):
        inside = ((y[:, channel] > _CLIP_LOW) & (y[:, channel] < _CLIP_HIGH)).astype(np.float32)
        weight = w * inside if (w @ inside) > _MIN_UNCLIPPED else w
        weight = weight / max(float(weight.sum()), 1e-6)
        fitted[:, channel] = _per_channel(
            luma[:, channel : channel + 1], y[:, channel : channel + 1], weight
        )[:, 0]
    within: NDArray[np.float32] = np.clip(fitted, 0.0, 255.0)
    return within


def _unclipped(y: NDArray[np.float32]) -> NDArray[np.float32]:
    """1 where no channel of ``y`` is clipped (at 0 or 255), else 0."""
    inside: NDArray[np.float32] = np.all((y > _CLIP_LOW) & (y < _CLIP_HIGH), axis=1).astype(
        np.float32
    )
    return inside


#: A channel at or beyond these levels may have been clipped by a toning edit.
_CLIP_LOW, _CLIP_HIGH = 1.5, 253.5
#: The unclipped pixels fit a tint only when they carry this share of the weight at least
#: (else every pixel counts: a black-and-white drawing is mostly at the extremes).
_MIN_UNCLIPPED = 0.2


def _saturation(
    x: NDArray[np.float32], y: NDArray[np.float32], w: NDArray[np.float32]
) -> NDArray[np.float32]:
    """``y`` as a saturation edit of ``x``: one gain on the luma, one on the chroma."""
    luma = x @ LUMA
    return _shared_gains(luma, x - luma[:, None], y, w)


def _channel_residuals(
    x: NDArray[np.float32], y: NDArray[np.float32], w: NDArray[np.float32]
) -> NDArray[np.float64]:
    """(3, 3): the weighted mean absolute residual of channel ``k`` of ``y`` fitted as a gain
    and offset of channel ``j`` of ``x`` (:func:`_per_channel`'s fit), at ``[j, k]``."""
    mean_x, mean_y = w @ x, w @ y
    dx, dy = x - mean_x, y - mean_y
    variance = w @ (dx * dx)
    covariance = (dx * w[:, None]).T @ dy  # [j, k]
    gain = np.where(variance[:, None] > 1e-3, covariance / np.maximum(variance, 1e-3)[:, None], 1.0)
    gain = np.clip(gain, _MIN_GAIN, 1.0 / _MIN_GAIN).astype(np.float32)
    off = np.abs(dy[:, None, :] - dx[:, :, None] * gain[None, :, :])
    residuals: NDArray[np.float64] = np.einsum("n,njk->jk", w, off).astype(np.float64)
    return residuals


def _per_channel(
    x: NDArray[np.float32], y: NDArray[np.float32], w: NDArray[np.float32]
) -> NDArray[np.float32]:
    """Each channel of ``y`` as a gain and offset of the same channel of ``x``."""
    mean_x, mean_y = w @ x, w @ y
    dx, dy = x - mean_x, y - mean_y
    variance = w @ (dx * dx)
    gain = np.where(variance > 1e-3, (w @ (dx * dy)) / np.maximum(variance, 1e-3), 1.0)
    gain = np.clip(gain, _MIN_GAIN, 1.0 / _MIN_GAIN)
    fitted: NDArray[np.float32] = (dx * gain + mean_y).astype(np.float32)
    return fitted


def _shared_gains(
    luma: NDArray[np.float32],
    chroma: NDArray[np.float32],
    y: NDArray[np.float32],
    w: NDArray[np.float32],
) -> NDArray[np.float32]:
    """``y`` as ``g_l * luma + g_c * chroma`` plus an offset per channel."""
    centred = [np.broadcast_to((luma - w @ luma)[:, None], y.shape), chroma - w @ chroma]
    dy = y - w @ y
    gram = np.array([[float(w @ (a * b).sum(axis=1)) for b in centred] for a in centred])
    right = np.array([float(w @ (a * dy).sum(axis=1)) for a in centred])
    gains = np.linalg.solve(gram + 1e-6 * np.eye(2), right)
    gains = np.array(
        [np.clip(gains[0], _MIN_GAIN, 1.0 / _MIN_GAIN), np.clip(gains[1], 0.0, 1.0 / _MIN_GAIN)]
    )
    fitted: NDArray[np.float32] = (gains[0] * centred[0] + gains[1] * centred[1] + w @ y).astype(
        np.float32
    )
    return fitted


def _toned(y: NDArray[np.float32], w: NDArray[np.float32]) -> bool:
    """Whether ``y`` is a toned picture (grey, sepia, another tone): every colour of it,
    but for :data:`_TONE_OUTLIERS` of the weight, runs within :data:`_TONE_ANGLE` of the
    grey axis (as a direction from black; near-black colours have none). A toning edit
    keeps the picture's light and dark and drops its hues; a picture in shades of one
    vivid colour (a blue folder), or with a part in one, is not a toned copy of another.
    A colour passes when it runs along the grey axis from black or from the mean colour.
    Tested colour by colour, not as a line fitted to all of them: a tone that clipped at
    255 bends its line, and the grid's resampling mixes the two arms."""
    limit = math.cos(math.radians(_TONE_ANGLE))
    length = np.linalg.norm(y, axis=1)
    lit = length > _TONE_DARK
    if float(w @ lit) < 1e-6:
        return True
    toned = (y @ _GREY_AXIS) >= limit * length
    # A tone with lifted blacks (an offset) runs along the grey axis from its mean colour,
    # not from black.
    spread = y - w @ y
    reach = np.linalg.norm(spread, axis=1)
    toned |= (reach > _TONE_DARK) & (np.abs(spread @ _GREY_AXIS) >= limit * reach)
    return float(w @ (lit & ~toned)) <= _TONE_OUTLIERS * float(w @ lit)


_GREY_AXIS = np.full(3, 1.0 / math.sqrt(3.0), np.float32)
#: A toned copy's colours run at most this far (degrees) from the grey axis: sepia's run
#: 8.4 degrees from it, a cyanotype's about 12; shades of a vivid blue (40, 90, 220) 33.
_TONE_ANGLE = 20.0
#: The share of a toned copy's lit colours that may lie farther off (JPEG noise, a fringe
#: flattened onto a coloured background).
_TONE_OUTLIERS = 0.05
#: Colours closer to black (or to the mean colour) than this (RGB length) have no direction
#: to test: a tone whose blacks are lifted by up to 20 levels (toned film) puts a colour of
#: this length up to 18 degrees off the grey axis, and JPEG noise turns darker ones further.
_TONE_DARK = 64.0


#: Pixels at least this opaque in both images carry their colours (a fringe's colour is
#: mostly what it is flattened onto).
SOLID_ALPHA = 128.0


def mapped_before_flattening(
    rgba_a: NDArray[np.float32], rgba_b: NDArray[np.float32], background: NDArray[np.float32]
) -> tuple[NDArray[np.float32], NDArray[np.float32]] | None:
    """``(fitted, target)`` as :func:`mapped_colours` gives them, flattened onto
    ``background`` (shape (pixels, 3)), with the map fitted on the straight colours of the
    pixels solid in both images (alpha at least :data:`SOLID_ALPHA`) and applied before
    flattening. A colour edit of an image with transparency acts on its colours, not on
    what shows through: flattened, a darker copy's white page goes grey while the white it
    lies on stays white, and a soft shadow stays as it was, which no map of the flattened
    colours explains. None when fewer than 16 pixels are solid in both.

    ``rgba_a``, ``rgba_b``: aligned RGBA pixels, shape (..., 4), one shape.
    """
    a, b = rgba_a.reshape(-1, 4), rgba_b.reshape(-1, 4)
    solid = (a[:, 3] >= SOLID_ALPHA) & (b[:, 3] >= SOLID_ALPHA)
    if np.count_nonzero(solid) < 16:
        return None
    colours_a, colours_b = a[solid, :3], b[solid, :3]
    fitted, target = mapped_colours(colours_a, colours_b, opaque=np.ones(len(colours_a), bool))
    source, other = (a, b) if target is colours_b else (b, a)
    # Every member of the family is affine in the colours: refitted by least squares on
    # the solid pixels, the map is applied to every pixel's straight colour.
    design = np.concatenate([source[solid, :3], np.ones((len(fitted), 1), np.float32)], axis=1)
    coef = np.linalg.lstsq(design, fitted, rcond=None)[0]
    whole = np.concatenate([source[:, :3], np.ones((len(source), 1), np.float32)], axis=1)
    mapped = np.clip(whole @ coef, 0.0, 255.0).astype(np.float32)
    return _flattened(mapped, source[:, 3], background), _flattened(
        other[:, :3], other[:, 3], background
    )


def _flattened(
    colours: NDArray[np.float32], alpha: NDArray[np.float32], background: NDArray[np.float32]
) -> NDArray[np.float32]:
    """Straight ``colours`` (pixels, 3) with ``alpha`` (pixels,) composited onto ``background``."""
    weight = (alpha / 255.0)[:, None]
    flat: NDArray[np.float32] = (colours * weight + background * (1.0 - weight)).astype(np.float32)
    return flat
