"""The global colour maps a copy may have gone through, fitted between two aligned images.

Issue 36's rule: a global colour change that keeps the picture never turns a copy into a
non-copy, whatever the kind of image. Those changes are a small family, and the judge fits
exactly that family, both ways, and keeps the direction and member that leave least:

- per channel, a gain and an offset after any of the 6 channel orders: brightness,
  contrast, a colour cast, per-channel gain, a channel swap (and, approximately, gamma);
- one gain on the chroma and one on the luma with an offset per channel: saturation;
- onto a target whose colours vary along one line only (grey, sepia, a duotone): a gain and
  an offset per channel of the source's luma. Not any mix of the channels: onto a grey
  placeholder, some mix of a colour picture's channels is nearly flat, and would explain
  the picture away (emblem variants of a document icon, bench_real).

A map outside the family is not fitted: a palette swap that moves one colour of a sprite
and keeps the others (another character's head on the same body) is no gain, order or
saturation, so its pixels stay off. A broader map (any 3 x 3 matrix) would explain every
recolouring of a figure of four colours or fewer, which is most sprites and icons.
"""

from __future__ import annotations

from itertools import permutations

import numpy as np
from numpy.typing import NDArray

__all__ = ["LUMA", "mapped_colours"]

#: Rec. 601 luma weights.
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
#: A target whose second colour axis carries at most this share of its first's spread
#: (singular values of its centred colours) is one-dimensional: grey, sepia, a duotone.
#: A grey JPEG's chroma noise stays under 1%; a colour photo's second axis is 5-40%.
_ONE_DIMENSIONAL = 0.05

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
    """
    w = np.ones(len(rgb_a), np.float32) if weight is None else weight.astype(np.float32)
    w = w / max(float(w.sum()), 1e-6)
    x, y = rgb_a.astype(np.float32), rgb_b.astype(np.float32)

    def scored(
        fitted: NDArray[np.float32], target: NDArray[np.float32]
    ) -> tuple[float, NDArray[np.float32], NDArray[np.float32]]:
        return float(w @ np.abs(target - fitted).sum(axis=1)), fitted, target

    candidates = []
    for order in _ORDERS:
        inverse = [int(k) for k in np.argsort(order)]
        forth = scored(_per_channel(x[:, order], y, w), y)
        back = scored(_per_channel(y[:, inverse], x, w), x)
        candidates.append(max(forth, back, key=lambda c: c[0]))
    forth = scored(_saturation(x, y, w), y)
    back = scored(_saturation(y, x, w), x)
    candidates.append(max(forth, back, key=lambda c: c[0]))
    for source, target in ((x, y), (y, x)):
        if _one_dimensional(target, w):
            candidates.append(scored(_tint(source, target, w), target))
    _, fitted, target = min(candidates, key=lambda c: c[0])
    return fitted, (rgb_b if target is y else rgb_a)


def _tint(
    x: NDArray[np.float32], y: NDArray[np.float32], w: NDArray[np.float32]
) -> NDArray[np.float32]:
    """Each channel of ``y`` as a gain and offset of ``x``'s luma: a grey, sepia or duotone
    copy (any other mix of the channels would explain a part in another colour away)."""
    luma = np.repeat((x @ LUMA)[:, None], 3, axis=1).astype(np.float32)
    return _per_channel(luma, y, w)


def _saturation(
    x: NDArray[np.float32], y: NDArray[np.float32], w: NDArray[np.float32]
) -> NDArray[np.float32]:
    """``y`` as a saturation edit of ``x``: one gain on the luma, one on the chroma."""
    luma = x @ LUMA
    return _shared_gains(luma, x - luma[:, None], y, w)


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


def _one_dimensional(y: NDArray[np.float32], w: NDArray[np.float32]) -> bool:
    """Whether ``y``'s colours vary along one line (grey, sepia, a duotone)."""
    centred = (y - w @ y) * np.sqrt(w)[:, None]
    values = np.linalg.svd(centred, compute_uv=False)
    return bool(values[0] < 1e-3 or values[1] <= _ONE_DIMENSIONAL * values[0])
