"""The words of a verified pair, checked on the two images themselves.

Verification words a pair from how it aligned the two images
(:func:`leakaudit.copykind.copy_kind`), which leaves some kinds of copy under a
vaguer or a wrong word: a copy one pixel to the side is ``edited`` (its hashes
moved), a brighter copy ``re-encoded`` (the pixel check compares structure, not
brightness), a grey copy of a pale colour photo ``re-encoded``, a tiny picture
with a border added ``resized`` (the tiny-photo net lines up the pictures, not
the files). :func:`describe_copies` looks again at the pairs so worded, on the
two images at the verifier's size, and says what changed: ``shifted``,
``brightened`` or ``darkened``, ``recoloured (grey)``, ``cropped`` (one image is
a window of the other at the same pixel size), ``padded`` (a uniform border one
lacks), ``cropped, resized`` (the same size, the picture enlarged: a zoom).

Only the words change: links, groups and scores are verification's. A pair
whose images cannot be decoded again keeps its words.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from PIL import Image

from leakaudit._decode import DecodeOptions, DecodePurpose, decode_stored, decode_view
from leakaudit._evidence import COPY_KIND
from leakaudit._trim import trim_box
from leakaudit.loading import read_source

__all__ = ["REVISED_KINDS", "describe_copies", "describe_pair"]

#: The words :func:`describe_copies` looks at again (the others are specific already).
REVISED_KINDS = frozenset(
    {
        "re-encoded",
        "edited",
        "resized",
        "cropped or rotated slightly",
        "cropped",
        "recoloured",
        "verified copy (pixels)",
    }
)
#: The stages whose pairs are looked at (a byte copy is identical; a features match
#: and an embedding link say so).
_STAGES = frozenset({"pixels", "registered"})
#: The shorter side the images are compared at (the verifier's view: 96 px).
_SIDE = 96
_PURPOSE = DecodePurpose(colour=True, side=_SIDE)
#: Mean chroma (|Cb| + |Cr|, levels) under which an image is grey and over which
#: another is in colour. Synthetic and CIFAR-10 photos measured 9-60; a grey copy
#: saved as JPEG keeps under 1.
_GREY = 2.0
_COLOUR = 4.0
#: Mean grey-level difference (aligned) beyond which a copy is brighter or darker:
#: a JPEG re-encode at quality 50 moves the mean by under 1 level, +10% brightness
#: by about 10.
_BRIGHTNESS = 5.0
#: The mean residual (levels) under which one gain and offset for all channels explain a
#: colour change: a brightness change, not a recolouring (a re-encode leaves 1-3).
_ONE_GAIN = 5.0
#: The largest shift looked for (pixels of the compared images), and how much
#: lower the mean difference must be there than unshifted (a re-encode's best
#: offset is (0, 0); a 1 px shift halves the difference or better).
_MAX_SHIFT = 3
_SHIFT_GAIN = 0.6
#: A window of the larger image matches the smaller (the smaller is a crop) when
#: their correlation is at least this.
_CROP_CORRELATION = 0.97
#: The enlargements tried for a zoomed copy (a crop of 5-25% of each side, resized back),
#: the likeliest first.
_ZOOMS = tuple(1.0 / (1.0 - cut) for cut in (0.1, 0.05, 0.15, 0.2, 0.25, 0.075, 0.125))
#: The grey-level spread under which the rest of the larger image is a uniform border
#: (a padded copy) rather than more of the picture (the smaller is a crop).
_FLAT = 4.0
#: The most window positions tried for a crop (the larger image is sampled beyond).
_MAX_WINDOWS = 4096

_CB = np.array([-0.168736, -0.331264, 0.5])
_CR = np.array([0.5, -0.418688, -0.081312])


class _Pictures(NamedTuple):
    """One image as compared: grey and colour pixels, and its size on file."""

    grey: NDArray[np.float64]
    rgb: NDArray[np.float64]
    size: tuple[int, int]
    reduced: bool


def _load(source: Any, name: str, decode: DecodeOptions) -> _Pictures | None:
    try:
        if isinstance(source, Image.Image):
            data: bytes | Image.Image = source
        else:
            name, data = read_source(source, name, decode)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            decoded = decode_stored(data, name, decode, _PURPOSE)
            view = decode_view(decoded, decode, _SIDE)
    except Exception:  # words only: an image that cannot be read again keeps its words
        return None
    rgba = np.asarray(view.rgba, dtype=np.float64)
    alpha = rgba[..., 3:4] / 255.0
    background = np.asarray(decode.background, dtype=np.float64)
    rgb = rgba[..., :3] * alpha + background * (1.0 - alpha)
    reduced = view.rgba.size != decoded.size and view.rgba.size != decoded.size[::-1]
    return _Pictures(np.asarray(view.grey, dtype=np.float64), rgb, decoded.size, reduced)


def _chroma(rgb: NDArray[np.float64]) -> float:
    return float((np.abs(rgb @ _CB) + np.abs(rgb @ _CR)).mean())


def _mean_difference(a: NDArray[np.float64], b: NDArray[np.float64], dy: int, dx: int) -> float:
    """Mean absolute difference of ``a`` and ``b`` moved by (dy, dx), on their overlap."""
    h, w = a.shape
    ya, yb = max(0, dy), max(0, -dy)
    xa, xb = max(0, dx), max(0, -dx)
    hh, ww = h - abs(dy), w - abs(dx)
    pa = a[ya : ya + hh, xa : xa + ww]
    pb = b[yb : yb + hh, xb : xb + ww]
    # Compared after matching means: a brighter copy is still found where it lies.
    return float(np.abs((pa - pa.mean()) - (pb - pb.mean())).mean())


def _shift(a: NDArray[np.float64], b: NDArray[np.float64]) -> tuple[int, int]:
    """The offset (at most :data:`_MAX_SHIFT`) that lines ``b`` up with ``a``."""
    if a.shape != b.shape or min(a.shape) <= 4 * _MAX_SHIFT:
        return 0, 0
    unshifted = _mean_difference(a, b, 0, 0)
    best, offset = unshifted, (0, 0)
    for dy in range(-_MAX_SHIFT, _MAX_SHIFT + 1):
        for dx in range(-_MAX_SHIFT, _MAX_SHIFT + 1):
            if (dy, dx) != (0, 0):
                score = _mean_difference(a, b, dy, dx)
                if score < best:
                    best, offset = score, (dy, dx)
    return offset if best < _SHIFT_GAIN * unshifted else (0, 0)


def _brightness(a: NDArray[np.float64], b: NDArray[np.float64], offset: tuple[int, int]) -> str:
    dy, dx = offset
    h, w = a.shape
    pa = a[max(0, dy) : max(0, dy) + h - abs(dy), max(0, dx) : max(0, dx) + w - abs(dx)]
    pb = b[max(0, -dy) : max(0, -dy) + h - abs(dy), max(0, -dx) : max(0, -dx) + w - abs(dx)]
    change = float(pb.mean() - pa.mean())
    if abs(change) <= _BRIGHTNESS:
        return ""
    return "brightened" if change > 0 else "darkened"


def _one_gain(a: NDArray[np.float64], b: NDArray[np.float64], offset: tuple[int, int]) -> bool:
    """Whether one gain and offset, the same for the three channels, take ``a``'s colours
    to ``b``'s (a brightness change) rather than a colour edit: fitted on the pixels that
    neither image clips."""
    dy, dx = offset
    h, w = a.shape[:2]
    pa = a[max(0, dy) : max(0, dy) + h - abs(dy), max(0, dx) : max(0, dx) + w - abs(dx)]
    pb = b[max(0, -dy) : max(0, -dy) + h - abs(dy), max(0, -dx) : max(0, -dx) + w - abs(dx)]
    keep = ((pa < 250) & (pb < 250) & (pa > 5) & (pb > 5)).all(axis=2)
    if keep.sum() < 16:
        return False
    x, y = pa[keep].ravel(), pb[keep].ravel()
    gain, shift = np.polyfit(x, y, 1)
    return float(np.abs(y - (gain * x + shift)).mean()) < _ONE_GAIN


def _window(small: NDArray[np.float64], large: NDArray[np.float64]) -> tuple[int, int] | None:
    """Where ``small`` is a window of ``large`` at the same pixel size, or None."""
    (hs, ws), (hl, wl) = small.shape, large.shape
    if hs > hl or ws > wl or (hs, ws) == (hl, wl) or min(hs, ws) < 8:
        return None
    ys, xs = np.arange(hl - hs + 1), np.arange(wl - ws + 1)
    step = max(1, int(np.ceil(np.sqrt(len(ys) * len(xs) / _MAX_WINDOWS))))
    s = small - small.mean()
    s_norm = float(np.sqrt((s * s).sum()))
    if s_norm == 0:
        return None
    best, where = -1.0, (0, 0)
    for y in ys[::step].tolist():
        for x in xs[::step].tolist():
            window = large[y : y + hs, x : x + ws]
            d = window - window.mean()
            norm = float(np.sqrt((d * d).sum()))
            if norm > 0 and float((s * d).sum()) / (s_norm * norm) > best:
                best, where = float((s * d).sum()) / (s_norm * norm), (y, x)
    return where if best >= _CROP_CORRELATION else None


def _normalised(pixels: NDArray[np.float64]) -> NDArray[np.float64] | None:
    """``pixels`` less their mean, scaled to unit length (None when flat)."""
    centred = (pixels - pixels.mean()).ravel()
    norm = float(np.sqrt(centred @ centred))
    return centred / norm if norm > 0 else None


def _zoomed(a: NDArray[np.float64], b: NDArray[np.float64]) -> bool:
    """Whether one of two same-size images is a window of the other enlarged to its size."""
    h, w = a.shape
    if min(h, w) < 16:
        return False
    unit_a, unit_b = _normalised(a), _normalised(b)
    if unit_a is None or unit_b is None:
        return False
    needed = max(_CROP_CORRELATION, float(unit_a @ unit_b) + 0.01)
    for source, target in ((a, unit_b), (b, unit_a)):
        picture = Image.fromarray(source.astype(np.float32), mode="F")
        for scale in _ZOOMS:
            wh, ww = h / scale, w / scale
            for fy in (0.5, 0.0, 1.0):
                for fx in (0.5, 0.0, 1.0):
                    top, left = fy * (h - wh), fx * (w - ww)
                    enlarged = picture.resize(
                        (w, h), Image.Resampling.BILINEAR, box=(left, top, left + ww, top + wh)
                    )
                    unit = _normalised(np.asarray(enlarged, np.float64))
                    if unit is not None and float(unit @ target) >= needed:
                        return True
    return False


def _uniform_outside(large: NDArray[np.float64], box: tuple[int, int, int, int]) -> bool:
    """Whether ``large`` outside ``box`` (top, left, height, width) is one flat colour."""
    top, left, height, width = box
    outside = np.ones(large.shape, dtype=bool)
    outside[top : top + height, left : left + width] = False
    values = large[outside]
    return bool(values.size) and float(values.std()) < _FLAT


def _has_border(grey: NDArray[np.float64]) -> bool:
    box = trim_box(np.clip(np.rint(grey), 0, 255).astype(np.uint8))
    if box is None:
        return False
    left, top, right, bottom = box
    h, w = grey.shape
    return bool(right - left < w - 1 or bottom - top < h - 1)


def _measured(kind: str, stage: str, a: _Pictures, b: _Pictures) -> list[str]:
    """What changed between two images verification aligned whole and unturned."""
    words: list[str] = []
    if a.size == b.size and a.grey.shape == b.grey.shape:
        offset = _shift(a.grey, b.grey)
        if kind == "resized" and stage == "registered":
            # The tiny-photo net found a scale between two files of one size: a zoom.
            border = _has_border(a.grey) or _has_border(b.grey)
            words.append("padded, resized" if border else "cropped, resized")
        elif offset != (0, 0):
            words.append("shifted")
        elif kind in ("cropped or rotated slightly", "cropped") and _zoomed(a.grey, b.grey):
            words.append("cropped, resized")
        brighter = _brightness(a.grey, b.grey, offset)
        if brighter and (kind != "recoloured" or _one_gain(a.rgb, b.rgb, offset)):
            words.append(brighter)
    elif not (a.reduced or b.reduced):
        small, large = (a, b) if a.grey.size < b.grey.size else (b, a)
        where = _window(small.grey, large.grey)
        if where is not None:
            box = (*where, *small.grey.shape)
            words.append("padded" if _uniform_outside(large.grey, box) else "cropped")
        elif _has_border(large.grey) and not _has_border(small.grey):
            words.append("padded")
    return words


def describe_pair(kind: str, stage: str, a: _Pictures, b: _Pictures) -> str:
    """``kind`` (verification's words for a pair) checked on the two images.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> grey = rng.integers(0, 200, (40, 40)).astype(float)
    >>> rgb = np.stack([grey, grey * 0.5, grey * 0.2], axis=2)
    >>> pictures = _Pictures(grey, rgb, (40, 40), False)
    >>> brighter = _Pictures(grey + 30, rgb + 30, (40, 40), False)
    >>> describe_pair("re-encoded", "pixels", pictures, brighter)
    'brightened'
    >>> flat = np.repeat(grey[..., None], 3, axis=2)
    >>> describe_pair("re-encoded", "pixels", pictures, _Pictures(grey, flat, (40, 40), False))
    'recoloured (grey)'
    """
    words = [word for word in kind.split(", ") if word]
    if kind in REVISED_KINDS:
        measured = _measured(kind, stage, a, b)
        if measured:
            words = measured
    chroma = sorted((_chroma(a.rgb), _chroma(b.rgb)))
    if chroma[0] < _GREY and chroma[1] > _COLOUR and "recoloured (grey)" not in words:
        words = [w for w in words if w not in ("recoloured", "re-encoded", "edited")]
        words.append("recoloured (grey)")
    return ", ".join(words) if words else kind


def describe_copies(
    edges: pd.DataFrame,
    sources: Sequence[Any],
    names: Sequence[str],
    decode: DecodeOptions,
    splits: Sequence[Any] | None = None,
) -> pd.DataFrame:
    """``edges`` (``report.edges``) with the :data:`~leakaudit._evidence.COPY_KIND` of
    pairs worded vaguely (:data:`REVISED_KINDS`) checked on their images.

    ``sources``, ``names`` and ``splits`` are indexed by row (``row_a``, ``row_b``).
    With ``splits``, only the pairs across two splits are looked at (the leaks, which the
    pairs table lists and the reports show): a pair within one split keeps verification's
    words. On three CIFAR-10 classes (18,000 images, 2,689 verified pairs, most within
    train), looking at every pair cost 10 s beside the audit's 34 s, the pairs across splits
    2 s (2 shared cores). Each image is decoded once however many pairs it is in.
    """
    if COPY_KIND not in edges.columns or not len(edges):
        return edges
    kinds = edges[COPY_KIND].tolist()
    stages = edges["stage"].tolist()
    rows_a, rows_b = edges["row_a"].tolist(), edges["row_b"].tolist()
    todo = [
        k
        for k, (kind, stage) in enumerate(zip(kinds, stages, strict=True))
        if stage in _STAGES
        and kind in REVISED_KINDS
        and (splits is None or splits[rows_a[k]] != splits[rows_b[k]])
    ]
    if not todo:
        return edges
    seen: dict[int, _Pictures | None] = {}

    def pictures(row: int) -> _Pictures | None:
        if row not in seen:
            seen[row] = _load(sources[row], names[row], decode)
        return seen[row]

    revised = list(kinds)
    for k in todo:
        a, b = pictures(int(rows_a[k])), pictures(int(rows_b[k]))
        if a is not None and b is not None:
            revised[k] = describe_pair(str(kinds[k]), str(stages[k]), a, b)
    result: pd.DataFrame = edges.copy()
    result[COPY_KIND] = revised
    return result
