"""The net for tiny photos: layout neighbours across splits, judged by registration.

A copy of a 32 px photo that was rescaled by 5-20% (often with a border), shifted by
1-3 px or re-cropped hashes 20-40 bits away from its original (a pixel at 32 px is
3% of the side; the hashes' 8 x 8 DCT and gradients move with it), so no threshold
of the hash net reaches it. At that size an image has few pixels, and a direct test
is cheap:

1. **Layout neighbours.** Each tiny opaque photo gets two descriptors: its layout
   (luma, blurred, averaged to 8 x 8) and its spectrum (log magnitudes of the low
   frequencies, blind to a shift), each zero-mean and unit-norm. A pair is a
   candidate when each image is the other's nearest neighbour among the images of
   the *other* splits (mutual nearest neighbours, cosine) by either descriptor, or
   when the spectrum of one, zoomed in by :data:`NET_ZOOM`, and the spectrum of the
   other are each other's nearest (a copy rescaled by 5-20%: the magnitudes do not
   follow a shift, but they do follow a rescale).
   Exact: every row is compared with every row of the other splits
   (:func:`mutual_nearest_pairs`, :func:`mutual_nearest_between`), so the
   candidates are exactly brute force's; at most three per image.
2. **Registration.** The candidate pair is aligned by least squares (Gauss-Newton,
   coarse to fine): a scale and a shift per axis, with a gain and an offset of the
   brightness (:func:`register_pairs`). Then the decision rule: **two images are
   copies when, aligned, their luma agrees (correlation) and so does their fine
   detail** (the correlation of what a blur removes). Agreement of coarse layout
   alone is not evidence: two smooth images (a sky, a gradient, a flat hull on a
   grey sea) line up after any small scale and shift, but their fine detail is
   noise and does not correlate. Nor are borders: tiny images are not trimmed when
   decoded, and two different pictures letterboxed alike line up bar for bar, the
   bars' edges the strongest detail of all; so both are scored inside each image's
   content (:func:`content_boxes`). Colour is not compared: a grey, toned or
   recoloured copy is a copy.

Drawn images (flat regions, :data:`FLAT_SHARE`) and transparent ones are left to the
pixel check: icons and sprites of one template share their layout and outline.

The constants were measured on CIFAR-10's five dev classes (airplane, automobile,
bird, cat, deer; ``benchmarks/bench_cifar.py``): ciFAIR's 142 same-shot test -> train
pairs (judgment 0-1) against the 4,227 top-3 layout neighbours of 1,500 test images
that no list holds (mostly different pictures). At correlation >= 0.93 and detail
>= 0.5, 94% of the same-shot pairs pass and 10 of the 4,227 neighbours, most of
which are copies by eye that no list held (``benchmarks/RESULTS.md``, section 17).
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit._trim import flat_edges, trim_box
from leakaudit.errors import ImageLoadError
from leakaudit.loading import DecodeOptions, greys_and_notes, read_source

__all__ = [
    "MIN_CORRELATION",
    "MIN_DETAIL",
    "NET_ZOOM",
    "TINY_SIDE",
    "NetPairs",
    "Registration",
    "ThumbnailCache",
    "blurred",
    "content_boxes",
    "fine_detail",
    "gauss_newton",
    "layout_descriptors",
    "masked_correlation",
    "mutual_nearest_between",
    "mutual_nearest_pairs",
    "nearest_in_other_groups",
    "register_pairs",
    "registered_overlap",
    "registered_overlaps",
    "registered_pairs",
    "spectrum_descriptors",
    "tiny_thumbnails",
    "warped_stacks",
]

#: Images whose shorter side is at most this many pixels take the net: above it a
#: 1-3 px shift or a 5-20% rescale keeps the hashes close (the hash net's thumbnail
#: is 32 px), and decoding every large image again would double an audit's cost.
TINY_SIDE = 64
#: The side of the luma thumbnail every tiny image is registered on.
THUMB_SIDE = 32
#: The layout descriptor's side (8 x 8 block means of the blurred thumbnail). Chosen
#: on CIFAR-10's dev classes by the rank of a same-shot pair's partner among 50,000
#: train images: 127 of 142 pairs are mutual nearest neighbours at 8 x 8, 113 at
#: 4 x 4, 123 on the centre 6 x 6 (borders ignored).
LAYOUT_SIDE = 8
#: A drawn image: at least this share of its thumbnail's pixels equal their four
#: neighbours within :data:`FLAT_LEVEL` grey levels (the pixel check's rule for
#: drawn images; CIFAR-10 train photos: 0.01 median, 0.44 at the 99th percentile).
FLAT_SHARE = 0.4
FLAT_LEVEL = 2.0
#: Registered copies: aligned luma correlation, and correlation of the fine detail
#: (luma minus its 5-tap binomial blur). Measured on CIFAR-10's dev classes (see the
#: module docstring): correlation >= 0.93 alone admits 25 of the 4,227 layout
#: neighbours, detail >= 0.5 cuts them to 10 (most of them unlisted copies) and
#: keeps 134 of 142 same-shot pairs.
MIN_CORRELATION = 0.93
MIN_DETAIL = 0.5
#: The aligned overlap must cover at least this share of the first image's inner
#: region (a registration that pushed one image mostly off the other proves nothing).
MIN_OVERLAP = 0.5
#: Bounds of the alignment: scale per axis and shift (thumbnail pixels).
_SCALE_RANGE = (0.7, 1.4)
_MAX_SHIFT = 8.0
#: The pyramid: (reduction factor, Gauss-Newton steps). On CIFAR-10's dev classes, 2, 3
#: and 1 steps accept the same 138 of 142 same-shot pairs as 3, 5 and 2, 20% faster. A
#: floor on the coarse levels' correlation would not spare work: layout neighbours agree
#: at 8 x 8 (median 0.87), only the fine detail tells them apart.
_LEVELS = ((4, 2), (2, 3), (1, 1))
#: Pixels left out at each edge when scoring (a border added by a rescale, JPEG's
#: edge blocks).
_MARGIN = 2
#: Lines left out inside a trimmed side of a thumbnail's content box when scoring
#: (:func:`content_boxes`): the bar's edge, blended by the resize and JPEG's ringing,
#: is a step the fine detail would see for two blurs' reach.
_CONTENT_MARGIN = 2
#: Score blocks of rows against this many score cells at most (64 MB of float32).
_BLOCK_CELLS = 1 << 24

_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
#: Thumbnails turned to float32 at a time (8 MB of them).
_CHUNK = 2048
_BINOMIAL = np.array([1.0, 4.0, 6.0, 4.0, 1.0], dtype=np.float32) / 16.0


@dataclass(frozen=True)
class Registration:
    """Registered pairs (one value per pair).

    Attributes
    ----------
    correlation : numpy.ndarray of float32
        Zero-mean correlation of the aligned lumas over their overlap.
    detail : numpy.ndarray of float32
        The same for their fine detail (luma minus its blur).
    scale, shift : numpy.ndarray of float32, shape (k, 2)
        The alignment: the second image's pixel ``(x, y)`` that lands on the first
        image's ``(u, v)`` is ``scale * ((u, v) - c) + c + shift``, ``c`` the centre.
    overlap : numpy.ndarray of float32
        Share of the first image's inner region the aligned second image covers.
    """

    correlation: NDArray[np.float32]
    detail: NDArray[np.float32]
    scale: NDArray[np.float32]
    shift: NDArray[np.float32]
    overlap: NDArray[np.float32]

    @property
    def copies(self) -> NDArray[np.bool_]:
        """The decision rule: aligned luma and fine detail both agree."""
        return (
            (self.correlation >= MIN_CORRELATION)
            & (self.detail >= MIN_DETAIL)
            & (self.overlap >= MIN_OVERLAP)
        )


@functools.lru_cache(maxsize=8)
def _blur_matrix(side: int) -> NDArray[np.float32]:
    """The 5-tap binomial blur of one axis as a ``(side, side)`` matrix, edges repeated."""
    matrix = np.zeros((side, side), dtype=np.float32)
    for out in range(side):
        for tap, weight in enumerate(_BINOMIAL):
            matrix[out, min(side - 1, max(0, out + tap - 2))] += weight
    return matrix


#: Above this side a blur is five shifted sums per axis, and a warp two gathered taps per
#: axis, rather than products with ``(side, side)`` matrices (the products win on stacks
#: of 32 px thumbnails; at the fine-detail rule's 160 px they did 30 times the work).
_DIRECT_SIDE = 48


def _blurred_axis(x: NDArray[np.float32], axis: int) -> NDArray[np.float32]:
    """The 5-tap binomial blur along ``axis`` of ``x`` as shifted sums (edges repeated)."""
    size = x.shape[axis]
    out = np.zeros_like(x)
    for tap, weight in enumerate(_BINOMIAL):
        at = np.clip(np.arange(size) + tap - 2, 0, size - 1)
        out += weight * np.take(x, at, axis=axis)
    return out


def blurred(images: NDArray[Any]) -> NDArray[np.float32]:
    """A 5-tap binomial blur of a stack of images ``(n, h, w)`` (edges repeated).

    Two matrix products over the whole stack (one per axis), or shifted sums for
    large images (:data:`_DIRECT_SIDE`).
    """
    n, h, w = images.shape
    x = np.asarray(images, dtype=np.float32)
    if max(h, w) > _DIRECT_SIDE:
        return np.ascontiguousarray(_blurred_axis(_blurred_axis(x, 2), 1))
    x = (x.reshape(n * h, w) @ _blur_matrix(w).T).reshape(n, h, w)
    x = (x.transpose(0, 2, 1).reshape(n * w, h) @ _blur_matrix(h).T).reshape(n, w, h)
    return np.ascontiguousarray(x.transpose(0, 2, 1))


def _separable(
    images: NDArray[Any], rows: NDArray[np.float32], cols: NDArray[np.float32]
) -> NDArray[np.float32]:
    """``rows @ image @ cols`` for every image of a stack, as two products over the stack
    (``rows`` (p, h), ``cols`` (w, q); the result (n, p, q))."""
    parts = []
    for start in range(0, len(images), _CHUNK):  # bounded float copies of uint8 stacks
        x = np.asarray(images[start : start + _CHUNK], dtype=np.float32)
        n, h, w = x.shape
        half = (x.reshape(n * h, w) @ cols).reshape(n, h, -1)  # (n, h, q)
        q = half.shape[2]
        full = (np.ascontiguousarray(half.transpose(0, 2, 1)).reshape(n * q, h) @ rows.T).reshape(
            n, q, -1
        )
        parts.append(full.transpose(0, 2, 1))
    if not parts:
        return np.zeros((0, rows.shape[0], cols.shape[1]), dtype=np.float32)
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


@functools.lru_cache(maxsize=8)
def _layout_matrix(side: int) -> NDArray[np.float32]:
    """Blur, then 8 x 8 block means, of one axis as a ``(LAYOUT_SIDE, side)`` matrix."""
    block = side // LAYOUT_SIDE
    pool = np.kron(np.eye(LAYOUT_SIDE, dtype=np.float32), np.full((1, block), 1.0 / block))
    return np.asarray(pool @ _blur_matrix(side), dtype=np.float32)


def layout_descriptors(thumbs: NDArray[Any]) -> NDArray[np.float32]:
    """Unit-norm, zero-mean 8 x 8 block means of the blurred thumbnails, ``(n, 64)``."""
    n, side = len(thumbs), thumbs.shape[1]
    matrix = _layout_matrix(side)
    flat = _separable(thumbs, matrix, matrix.T).reshape(n, -1)
    flat -= flat.mean(axis=1, keepdims=True)
    norm = np.linalg.norm(flat, axis=1, keepdims=True)
    return np.asarray(flat / np.maximum(norm, 1e-6), dtype=np.float32)


#: The zoom of the net's third descriptor: the spectrum of each image's centre enlarged
#: by this factor, compared with the other images' spectra. On CIFAR-10's dev classes
#: (59,381 tiny photos; ``/tmp`` scripts of RESULTS section 28) zooms of 1.05 to 1.1
#: each made two missed same-shot pairs candidates that registration accepts
#: (automobile/0657 and 0370), 1.13 none and 1.15 one; at 1.1 the new candidates
#: (4,268) flagged 12 more dev test images no list held, all same-shot copies by eye
#: (1.05: 3,238 candidates, 8 more).
NET_ZOOM = 1.1


@functools.lru_cache(maxsize=8)
def _zoom_matrix(side: int, zoom: float) -> NDArray[np.float32]:
    """The centre of one axis enlarged by ``zoom`` (bilinear, edges repeated) as a
    ``(side, side)`` matrix; the identity at 1."""
    centre = (side - 1) / 2
    at = np.clip(centre + (np.arange(side) - centre) / zoom, 0, side - 1)
    low = np.floor(at).astype(np.int64)
    high = np.minimum(low + 1, side - 1)
    weight = (at - low).astype(np.float32)
    matrix = np.zeros((side, side), dtype=np.float32)
    np.add.at(matrix, (np.arange(side), low), 1 - weight)
    np.add.at(matrix, (np.arange(side), high), weight)
    return matrix


#: The spectrum descriptor's frequencies per axis (0 to 5 cycles per image, both signs
#: vertically): its magnitude does not move when the picture does.
SPECTRUM_FREQUENCIES = 6


@functools.lru_cache(maxsize=8)
def _spectrum_matrices(
    side: int, zoom: float = 1.0
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """The zoom, blur, window and DFT of the low frequencies as real matrices: ``rows``
    (2(2k-1), side), cosines then sines of the vertical frequencies 0..k-1 and
    -(k-1)..-1, and ``cols`` (side, 2k), cosines then sines of the horizontal ones."""
    k = SPECTRUM_FREQUENCIES
    window = np.hanning(side)
    x = np.arange(side)
    vertical = np.array(list(range(k)) + list(range(-(k - 1), 0)))
    angle_v = 2 * np.pi * np.outer(vertical, x) / side
    angle_h = 2 * np.pi * np.outer(x, np.arange(k)) / side
    rows = np.concatenate([np.cos(angle_v), np.sin(angle_v)]) * window[None, :]
    cols = np.concatenate([np.cos(angle_h), np.sin(angle_h)], axis=1) * window[:, None]
    blur = _blurred_zoom(side, zoom)
    return (rows @ blur).astype(np.float32), (blur.T @ cols).astype(np.float32)


def _blurred_zoom(side: int, zoom: float) -> NDArray[np.float64]:
    """The blur of one axis after its zoom, as a ``(side, side)`` matrix."""
    return _blur_matrix(side).astype(np.float64) @ _zoom_matrix(side, zoom).astype(np.float64)


def spectrum_descriptors(thumbs: NDArray[Any], zoom: float = 1.0) -> NDArray[np.float32]:
    """Unit-norm, zero-mean log magnitudes of the low frequencies of the windowed,
    blurred thumbnails (their mean removed), ``(n, 66)``: blind to a shift (a magnitude
    spectrum is), so it pairs shifted copies whose 8 x 8 layouts moved apart.

    ``zoom`` above 1 describes each thumbnail's centre enlarged by that factor (edges
    repeated), in the same pass.
    """
    n, side = len(thumbs), thumbs.shape[1]
    k, r = SPECTRUM_FREQUENCIES, 2 * SPECTRUM_FREQUENCIES - 1
    rows, cols = _spectrum_matrices(side, zoom)
    full = _separable(thumbs, rows, cols)  # (n, 2r, 2k): [cos; sin] x [cos | sin]
    # The blurred image's mean, removed: its transform is the mean times the
    # transform of a constant image.
    weights = _blurred_zoom(side, zoom).sum(axis=0).astype(np.float32)
    mean = (
        np.concatenate(
            [
                (
                    np.asarray(thumbs[s : s + _CHUNK], dtype=np.float32).reshape(-1, side) @ weights
                ).reshape(-1, side)
                @ weights
                for s in range(0, n, _CHUNK)
            ]
            or [np.zeros(0, np.float32)]
        )
        / side**2
    )
    constant = rows.sum(axis=1)[:, None] * cols.sum(axis=0)[None, :]
    full = full - mean[:, None, None] * constant[None]
    real = full[:, :r, :k] - full[:, r:, k:]
    imag = -(full[:, :r, k:] + full[:, r:, :k])
    flat = np.log1p(np.hypot(real, imag)).reshape(n, -1)
    flat -= flat.mean(axis=1, keepdims=True)
    norm = np.linalg.norm(flat, axis=1, keepdims=True)
    return np.asarray(flat / np.maximum(norm, 1e-6), dtype=np.float32)


def nearest_in_other_groups(
    descriptors: NDArray[np.float32], groups: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Each row's nearest row (largest dot product) among rows of another group.

    Exact: every row is scored against every row of the other groups, a block at a
    time. Ties go to the lower row; -1 where no other group has a row.
    """
    return _nearest_across(descriptors, descriptors, groups)[0]


def _nearest_across(
    left: NDArray[np.float32], right: NDArray[np.float32], groups: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Each ``left`` row's nearest ``right`` row of another group, and each ``right``
    row's nearest ``left`` row of another group (ties to the lower row, -1 where none).

    When ``left`` is ``right`` the two are one answer and each pair of groups is
    scored once (a score matrix and its transpose).
    """
    n = len(left)
    same = left is right
    to_right = np.full(n, -1, dtype=np.int64)
    to_right_score = np.full(n, -np.inf, dtype=np.float32)
    to_left, to_left_score = (
        (to_right, to_right_score)
        if same
        else (np.full(n, -1, dtype=np.int64), np.full(n, -np.inf, dtype=np.float32))
    )
    codes = np.unique(groups).tolist()
    members = {int(code): np.flatnonzero(groups == code) for code in codes}
    for g in codes:
        rows = members[g]
        for h in codes:
            if h == g or (same and h < g):
                continue
            cols = members[h]
            step = max(1, _BLOCK_CELLS // max(1, len(cols)))
            col_best = np.full(len(cols), -1, dtype=np.int64)
            col_score = np.full(len(cols), -np.inf, dtype=np.float32)
            for start in range(0, len(rows), step):
                block = rows[start : start + step]
                scores = left[block] @ right[cols].T
                _merge(to_right, to_right_score, block, cols, scores)
                # The columns' best: a maximum along rows is cheap, an argmax along
                # rows is not, so the argmax runs only on columns this block improves
                # (all at the first block, few later). Strictly better only: earlier
                # blocks hold the lower rows.
                top = scores.max(axis=0)
                better = np.flatnonzero(top > col_score)
                if len(better):
                    at = np.argmax(scores[:, better], axis=0)
                    col_best[better] = block[at]
                    col_score[better] = top[better]
            _merge_columns(to_left, to_left_score, cols, col_best, col_score)
    return to_right, to_left


def _merge(
    best: NDArray[np.int64],
    best_score: NDArray[np.float32],
    block: NDArray[np.int64],
    cols: NDArray[np.int64],
    scores: NDArray[np.float32],
) -> None:
    at = np.argmax(scores, axis=1)
    top = scores[np.arange(len(block)), at]
    _merge_columns(best, best_score, block, cols[at], top)


def _merge_columns(
    best: NDArray[np.int64],
    best_score: NDArray[np.float32],
    rows: NDArray[np.int64],
    found: NDArray[np.int64],
    score: NDArray[np.float32],
) -> None:
    held, held_row = best_score[rows], best[rows]
    better = (score > held) | (
        (score == held) & (found >= 0) & ((held_row < 0) | (found < held_row))
    )
    best[rows[better]] = found[better]
    best_score[rows[better]] = score[better]


def mutual_nearest_pairs(
    descriptors: NDArray[np.float32], groups: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Pairs ``(i, j)``, ``i < j``, each the other's nearest row in another group."""
    nearest = nearest_in_other_groups(descriptors, groups)
    rows = np.flatnonzero(nearest >= 0)
    mutual = rows[(nearest[nearest[rows]] == rows) & (rows < nearest[rows])]
    return np.stack([mutual, nearest[mutual]], axis=1).astype(np.int64)


def mutual_nearest_between(
    left: NDArray[np.float32], right: NDArray[np.float32], groups: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Pairs ``(i, j)`` of rows in different groups where ``right[j]`` is ``left[i]``'s
    nearest ``right`` row of another group and ``left[i]`` is ``right[j]``'s nearest
    ``left`` row (two descriptions of the same rows, such as a zoomed and a plain
    spectrum); at most one pair per row."""
    to_right, to_left = _nearest_across(left, right, groups)
    rows = np.flatnonzero(to_right >= 0)
    mutual = rows[to_left[to_right[rows]] == rows]
    return np.stack([mutual, to_right[mutual]], axis=1).astype(np.int64)


def _source_positions(
    scale: NDArray[Any], shift: NDArray[Any], side: int
) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
    """One axis of the warp: the source position (in pixel indices) each output pixel
    samples, ``scale * (u - c) + c + shift`` per image ``(k, side)``, and which of
    them fall inside the source."""
    centre = (side - 1) / 2.0
    axis = np.arange(side, dtype=np.float32)
    position = scale[:, None] * (axis[None] - centre) + centre + shift[:, None]
    return position, (position >= -0.5) & (position <= side - 0.5)


def _interpolation(
    scale: NDArray[Any], shift: NDArray[Any], side: int
) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
    """Linear-interpolation matrices ``(k, side, side)`` of one axis, and which output
    positions fall inside the source (the same positions as :func:`_taps`)."""
    axis = np.arange(side, dtype=np.float32)
    position, inside = _source_positions(scale, shift, side)
    position = np.clip(position, 0.0, side - 1.0)
    weights = np.maximum(0.0, 1.0 - np.abs(position[:, :, None] - axis[None, None]))
    return np.asarray(weights * inside[:, :, None], dtype=np.float32), inside


def _warp_matrices(
    scale: NDArray[Any], shift: NDArray[Any], side: int
) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.bool_]]:
    """``(rows, cols_t, valid)``: ``rows @ image @ cols_t`` is the warped image, ``valid``
    where it falls inside the source (the warp is separable: a scale and shift per axis)."""
    cols, inside_x = _interpolation(scale[:, 0], shift[:, 0], side)
    rows, inside_y = _interpolation(scale[:, 1], shift[:, 1], side)
    return rows, cols.transpose(0, 2, 1), inside_y[:, :, None] & inside_x[:, None, :]


def _taps(
    scale: NDArray[Any], shift: NDArray[Any], side: int
) -> tuple[NDArray[np.intp], NDArray[np.float32], NDArray[np.float32], NDArray[np.bool_]]:
    """One axis of :func:`_interpolation` as two taps per output position: the first
    source index, the two weights (zero outside the source), and which are inside."""
    position, inside = _source_positions(scale, shift, side)
    position = np.clip(position, 0.0, side - 1.0)
    first = np.minimum(np.floor(position), side - 2).astype(np.intp)
    upper = (position - first).astype(np.float32)
    lower = (1.0 - upper) * inside
    return first, lower.astype(np.float32), (upper * inside).astype(np.float32), inside


def warped_stacks(
    stacks: Sequence[NDArray[Any]], scale: NDArray[Any], shift: NDArray[Any]
) -> tuple[list[NDArray[np.float32]], NDArray[np.bool_]]:
    """Each stack ``(n, side, side)`` warped by the per-image scale and shift (as
    ``rows @ image @ cols_t`` of :func:`_warp_matrices`), and where the warp falls
    inside the source. Matrix products on small images; gathers of the two taps per
    axis on large ones (:data:`_DIRECT_SIDE`), where the products did side / 2
    times the work."""
    side = stacks[0].shape[1]
    if side <= _DIRECT_SIDE:
        rows, cols_t, valid = _warp_matrices(scale, shift, side)
        return [np.asarray(rows @ x @ cols_t, dtype=np.float32) for x in stacks], valid
    y0, y_low, y_high, inside_y = _taps(scale[:, 1], shift[:, 1], side)
    x0, x_low, x_high, inside_x = _taps(scale[:, 0], shift[:, 0], side)
    out = []
    for x in stacks:
        x = np.asarray(x, dtype=np.float32)
        top = np.take_along_axis(x, y0[:, :, None], axis=1)
        bottom = np.take_along_axis(x, y0[:, :, None] + 1, axis=1)
        x = top * y_low[:, :, None] + bottom * y_high[:, :, None]
        left = np.take_along_axis(x, x0[:, None, :], axis=2)
        right = np.take_along_axis(x, x0[:, None, :] + 1, axis=2)
        out.append(np.asarray(left * x_low[:, None, :] + right * x_high[:, None, :], np.float32))
    return out, inside_y[:, :, None] & inside_x[:, None, :]


def content_boxes(thumbs: NDArray[Any]) -> NDArray[np.float32]:
    """Each thumbnail's content: the box inside its uniform borders, ``(n, 4)``.

    A letterboxed or padded tiny photo keeps its bars (tiny images are never
    trimmed when decoded, :data:`leakaudit._trim.TRIM_MIN_IMAGE_SIDE`). Bars are
    not the picture: two different photos letterboxed alike line up bar for bar,
    and the bars' edges are strong fine detail. So registration scores only the
    content. The box is :func:`leakaudit._trim.trim_box`'s on the thumbnail
    (which refuses a shape on a plain ground: its corners stay ground), each
    trimmed side moved in by :data:`_CONTENT_MARGIN`; the whole thumbnail,
    ``(0, 0, side, side)``, where no side is trimmed.
    """
    thumbs = np.asarray(thumbs)
    n, side = len(thumbs), thumbs.shape[-1] if thumbs.ndim == 3 else 0
    boxes = np.repeat(np.array([[0.0, 0.0, side, side]], dtype=np.float32), n, axis=0)
    if n == 0:
        return boxes
    # Only thumbnails with a flat edge line can have a bar (trim_box's first test).
    for k in np.flatnonzero(flat_edges(thumbs)).tolist():
        box = trim_box(np.ascontiguousarray(thumbs[k], dtype=np.uint8))
        if box is None:
            continue
        left, top, right, bottom = box
        boxes[k] = (
            left + _CONTENT_MARGIN if left > 0 else 0.0,
            top + _CONTENT_MARGIN if top > 0 else 0.0,
            right - _CONTENT_MARGIN if right < side else side,
            bottom - _CONTENT_MARGIN if bottom < side else side,
        )
    return boxes


def _in_boxes(x: NDArray[Any], y: NDArray[Any], boxes: NDArray[Any]) -> NDArray[np.bool_]:
    """``(n, side, side)``: the pixels whose sampled position (``x``, ``y``: ``(n, side)``
    pixel indices, :func:`_source_positions`) lies inside each image's box (pixel
    ``i`` spans ``[i, i + 1)``, so its centre is ``i + 0.5``)."""
    inside_x = (x + 0.5 >= boxes[:, 0, None]) & (x + 0.5 <= boxes[:, 2, None])
    inside_y = (y + 0.5 >= boxes[:, 1, None]) & (y + 0.5 <= boxes[:, 3, None])
    return np.asarray(inside_y[:, :, None] & inside_x[:, None, :])


def register_pairs(
    first: NDArray[np.float32],
    second: NDArray[np.float32],
    *,
    first_boxes: NDArray[np.float32] | None = None,
    second_boxes: NDArray[np.float32] | None = None,
    chunk: int = 2048,
) -> Registration:
    """Align each ``second[k]`` onto ``first[k]`` (square luma thumbnails) and score.

    Gauss-Newton on a scale and a shift per axis with a brightness gain and offset,
    coarse to fine (:data:`_LEVELS`), on the blurred thumbnails; then the
    correlation of the aligned lumas and of their fine detail over the overlap
    (less a :data:`_MARGIN` at each edge of the first image), counting only the
    pixels inside both images' content (``first_boxes``, ``second_boxes``:
    :func:`content_boxes`, each ``(k, 4)``; None is the whole thumbnail). The
    overlap is a share of the first image's content.
    """
    first = np.asarray(first, dtype=np.float32)
    second = np.asarray(second, dtype=np.float32)
    if first.shape != second.shape or first.ndim != 3 or first.shape[1] != first.shape[2]:
        raise ValueError("register_pairs takes two stacks of square thumbnails of one shape")
    side = first.shape[1]
    whole = np.repeat(np.array([[0.0, 0.0, side, side]], np.float32), len(first), axis=0)
    boxes_a = whole if first_boxes is None else np.asarray(first_boxes, dtype=np.float32)
    boxes_b = whole if second_boxes is None else np.asarray(second_boxes, dtype=np.float32)
    if boxes_a.shape != whole.shape or boxes_b.shape != whole.shape:
        raise ValueError("register_pairs takes one (left, top, right, bottom) box per image")
    parts = [
        _register_chunk(
            first[s : s + chunk],
            second[s : s + chunk],
            boxes_a[s : s + chunk],
            boxes_b[s : s + chunk],
        )
        for s in range(0, len(first), chunk)
    ] or [_register_chunk(first[:0], second[:0], boxes_a[:0], boxes_b[:0])]
    return Registration(*(np.concatenate(values) for values in zip(*parts, strict=True)))


def _register_chunk(
    first: NDArray[np.float32],
    second: NDArray[np.float32],
    boxes_a: NDArray[np.float32],
    boxes_b: NDArray[np.float32],
) -> tuple[NDArray[np.float32], ...]:
    n, side = len(first), first.shape[1]
    if n == 0:
        nothing = np.zeros(0, dtype=np.float32)
        return nothing, nothing, np.zeros((0, 2), np.float32), np.zeros((0, 2), np.float32), nothing
    scale = np.ones((n, 2), dtype=np.float32)
    shift = np.zeros((n, 2), dtype=np.float32)
    blur_a, blur_b = blurred(first), blurred(second)
    for factor, steps in _LEVELS:
        if factor > side // 4:
            continue
        level = side // factor
        a, b = blur_a, blur_b
        if factor > 1:
            a = a.reshape(n, level, factor, level, factor).mean(axis=(2, 4))
            b = b.reshape(n, level, factor, level, factor).mean(axis=(2, 4))
        scale, shift = gauss_newton(a, b, scale, shift / factor, steps, _MAX_SHIFT / factor)
        shift = shift * factor
    (aligned,), valid = warped_stacks([second], scale, shift)
    inner = np.zeros((side, side), dtype=bool)
    inner[_MARGIN : side - _MARGIN, _MARGIN : side - _MARGIN] = True
    own = np.broadcast_to(np.arange(side, dtype=np.float32), (n, side))
    content = inner[None] & _in_boxes(own, own, boxes_a)
    x, _ = _source_positions(scale[:, 0], shift[:, 0], side)
    y, _ = _source_positions(scale[:, 1], shift[:, 1], side)
    mask = valid & content & _in_boxes(x, y, boxes_b)
    overlap = mask.sum(axis=(1, 2)) / np.maximum(content.sum(axis=(1, 2)), 1).astype(np.float32)
    correlation = masked_correlation(first, aligned, mask)
    detail = masked_correlation(fine_detail(first), fine_detail(aligned), mask)
    return correlation, detail, scale, shift, overlap.astype(np.float32)


def gauss_newton(
    a: NDArray[Any],
    b: NDArray[Any],
    scale: NDArray[Any],
    shift: NDArray[Any],
    steps: int,
    max_shift: float,
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """``steps`` Gauss-Newton steps aligning each ``b`` onto ``a`` (one pyramid level).

    The model: ``a ~ gain * warp(b) + offset``, the warp a scale and a shift per
    axis about the centre; linearised, one 6 x 6 least-squares system per pair.
    """
    n, level = len(a), a.shape[1]
    grad_y, grad_x = np.gradient(b, axis=(1, 2))
    u = np.arange(level, dtype=np.float32) - (level - 1) / 2.0
    scale = np.asarray(scale, dtype=np.float32).copy()
    shift = np.asarray(shift, dtype=np.float32).copy()
    for _ in range(steps):
        (sample, gx, gy), valid = warped_stacks([b, grad_x, grad_y], scale, shift)
        weight = valid.astype(np.float32)[..., None]
        jacobian = np.stack(
            [gx * u[None, None, :], gy * u[None, :, None], gx, gy, sample, np.ones_like(sample)],
            axis=-1,
        )
        flat = (jacobian * weight).reshape(n, -1, 6)
        target = (a * weight[..., 0]).reshape(n, -1, 1)
        flat_t = flat.transpose(0, 2, 1)
        normal = flat_t @ flat + 1e-3 * np.eye(6, dtype=np.float32)
        solution = np.linalg.solve(normal, flat_t @ target)[..., 0]
        # Linearised, a ~ gain * (warp(b) + J dp) + offset: the solved geometric
        # terms are gain * dp.
        gain = solution[:, 4]
        gain = np.where(np.abs(gain) < 1e-2, np.copysign(1e-2, gain), gain)
        step = np.clip(solution[:, :4] / gain[:, None], -1.0, 1.0)
        scale = np.clip(scale + step[:, :2], *_SCALE_RANGE).astype(np.float32)
        shift = np.clip(shift + step[:, 2:], -max_shift, max_shift).astype(np.float32)
    return scale, shift


def registered_overlap(
    first: NDArray[np.float32], second: NDArray[np.float32]
) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
    """``second`` (one square image) registered onto ``first``, and where it overlaps
    ``first``'s inner region (less :data:`_MARGIN` at each edge)."""
    aligned, masks = registered_overlaps(first[None], second[None])
    return aligned[0], masks[0]


def registered_overlaps(
    first: NDArray[np.float32], second: NDArray[np.float32]
) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
    """:func:`registered_overlap` of stacks ``(n, side, side)``, pair by pair, at once."""
    found = register_pairs(first, second)
    (warped,), valid = warped_stacks([second], found.scale, found.shift)
    mask = valid.copy()
    mask[:, :_MARGIN] = mask[:, -_MARGIN:] = False
    mask[:, :, :_MARGIN] = mask[:, :, -_MARGIN:] = False
    return np.asarray(warped, dtype=np.float32), mask


def fine_detail(images: NDArray[Any]) -> NDArray[np.float32]:
    """The fine detail of a stack of images ``(n, h, w)``: what a 5-tap blur removes.

    The evidence of the decision rule (here and in the pixel check's partial and
    turned alignments): smooth look-alikes agree in layout, not in fine detail.
    """
    return np.asarray(images - blurred(images), dtype=np.float32)


def masked_correlation(
    x: NDArray[Any], y: NDArray[Any], mask: NDArray[np.bool_]
) -> NDArray[np.float32]:
    count = np.maximum(mask.sum(axis=(1, 2)), 1)
    mean_x = np.where(mask, x, 0).sum(axis=(1, 2)) / count
    mean_y = np.where(mask, y, 0).sum(axis=(1, 2)) / count
    dx = np.where(mask, x - mean_x[:, None, None], 0)
    dy = np.where(mask, y - mean_y[:, None, None], 0)
    norm = np.sqrt((dx * dx).sum(axis=(1, 2)) * (dy * dy).sum(axis=(1, 2)))
    return np.asarray((dx * dy).sum(axis=(1, 2)) / np.maximum(norm, 1e-6), dtype=np.float32)


def flat_share(thumbs: NDArray[Any]) -> NDArray[np.float32]:
    """Share of each thumbnail's inner pixels within :data:`FLAT_LEVEL` of all 4 neighbours."""
    shares = []
    for start in range(0, len(thumbs), _CHUNK):
        part = np.asarray(thumbs[start : start + _CHUNK], dtype=np.float32)
        centre = part[:, 1:-1, 1:-1]
        flat = np.ones(centre.shape, dtype=bool)
        for dy, dx in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            neighbour = part[:, 1 + dy : part.shape[1] - 1 + dy, 1 + dx : part.shape[2] - 1 + dx]
            flat &= np.abs(centre - neighbour) <= FLAT_LEVEL
        shares.append(flat.reshape(len(part), -1).mean(axis=1))
    return np.asarray(np.concatenate(shares) if shares else np.zeros(0), dtype=np.float32)


#: Files larger than this are not read for the net: a tiny image is a small file (a
#: 64 x 64 RGB BMP is 12 KB), and reading every large photo again would cost an audit
#: of large images as much as its hashing.
_MAX_FILE_BYTES = 1 << 18
#: Images decoded together (:func:`leakaudit.loading.greys_and_notes`).
_DECODE_BATCH = 512


_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (all but DHT, JPG and DAC), which hold the size.
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _plain_header(data: bytes) -> tuple[tuple[int, int], bool] | None:
    """``((width, height), transparent)`` from a PNG or JPEG header read directly
    (a third of the net's cost on 32 px JPEGs was Pillow opening them); None for
    another format or a header this does not follow."""
    if data[:8] == _PNG_MAGIC and data[12:16] == b"IHDR" and len(data) >= 26:
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        colour = data[25]
        return (width, height), colour in (4, 6) or (colour == 3 and b"tRNS" in data)
    if data[:2] != b"\xff\xd8":
        return None
    at = 2
    while at + 9 <= len(data) and data[at] == 0xFF:
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _JPEG_FRAMES:
            height = int.from_bytes(data[at + 5 : at + 7], "big")
            width = int.from_bytes(data[at + 7 : at + 9], "big")
            return (width, height), False
        if marker == 0xDA:  # a scan before any frame: not followed
            return None
        at += 2 + int.from_bytes(data[at + 2 : at + 4], "big")
    return None


def _transparent(image: Image.Image) -> bool:
    return "A" in image.mode or "transparency" in image.info


def _tiny_source(source: Any, decode: DecodeOptions) -> bytes | Image.Image | bool:
    """The encoded bytes (or the PIL image) of a tiny opaque image; False for any other,
    True when it cannot be read now."""
    try:
        if isinstance(source, Image.Image):
            data: bytes | Image.Image = source
            size, transparent = source.size, _transparent(source)
        else:
            in_memory = isinstance(source, (bytes, bytearray, memoryview))
            if not in_memory and os.stat(source).st_size > _MAX_FILE_BYTES:
                return False
            data = read_source(source, "<in-memory bytes>", decode)[1]
            header = _plain_header(data)
            if header is None:
                with Image.open(io.BytesIO(data)) as opened:
                    header = opened.size, _transparent(opened)
            size, transparent = header
    except (OSError, ValueError, TypeError, ImageLoadError, Image.DecompressionBombError):
        return True  # unreadable now: the hashing stage has named it if it was then
    if transparent or not 8 <= min(size) <= TINY_SIDE:
        return False
    return data


def _thumbnails_of(
    sources: Sequence[Any], rows: list[int], decode: DecodeOptions
) -> list[bytes | None]:
    """Luma thumbnails (``THUMB_SIDE`` square, as bytes) of ``rows``: ``b""`` where the
    image is not tiny and opaque, None where it cannot be read now."""
    found = [_tiny_source(sources[r], decode) for r in rows]
    out: list[bytes | None] = [None if data is True else b"" for data in found]
    at = [i for i, data in enumerate(found) if not isinstance(data, bool)]
    if not at:
        return out
    greys, _ = greys_and_notes(
        [found[i] for i in at],  # type: ignore[misc]
        [str(rows[i]) for i in at],
        decode,
    )
    for i, grey in zip(at, greys, strict=True):
        if isinstance(grey, str):
            out[i] = None
            continue
        pixels = grey.pixels
        if grey.box is not None:
            left, top, right, bottom = grey.box
            pixels = pixels[
                int(top) : max(int(top) + 1, int(bottom)),
                int(left) : max(int(left) + 1, int(right)),
            ]
        if pixels.shape != (THUMB_SIDE, THUMB_SIDE):
            pixels = np.asarray(
                Image.fromarray(np.ascontiguousarray(pixels)).resize(
                    (THUMB_SIDE, THUMB_SIDE), Image.Resampling.BILINEAR
                )
            )
        out[i] = np.asarray(pixels, dtype=np.uint8).tobytes()
    return out


#: Names the code that makes a file's thumbnail, for thumbnails kept in the hash cache
#: (:meth:`leakaudit.cache.CachedFiles.thumbnails`, whose key also holds the decoding's
#: code and options): this module's source, so any change to it computes them afresh.
@functools.cache
def _thumbnail_version() -> str:
    try:
        source = Path(__file__).read_bytes()
    except OSError:  # a frozen or zip-imported install: the side alone
        source = b"?"
    return f"thumbnail {THUMB_SIDE} {hashlib.blake2b(source, digest_size=16).hexdigest()}"


#: Serves the thumbnails a hash cache holds and stores the others
#: (:meth:`leakaudit.cache.CachedFiles.thumbnails`): ``(rows, compute, version) -> values``.
ThumbnailCache: TypeAlias = Callable[
    [list[int], Callable[[list[int]], list[bytes | None]], str], list[bytes | None]
]


def tiny_thumbnails(
    sources: Sequence[Any],
    rows: NDArray[np.int64],
    decode: DecodeOptions,
    cache: ThumbnailCache | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.uint8]]:
    """The rows that are tiny opaque photos, and their luma thumbnails.

    Decoded as the hashes saw them (:class:`leakaudit.loading.DecodeOptions`:
    upright, trimmed). Drawn images (a flat share of at least :data:`FLAT_SHARE`)
    are left out; so are unreadable ones (the hashing stage has named them) and
    files over 256 KB (not tiny). With ``cache``, the thumbnails of unchanged
    files come from the hash cache (a second audit decodes none of them again).
    """

    def compute(wanted: list[int]) -> list[bytes | None]:
        # In this thread: decoding collects each image's warnings with
        # warnings.catch_warnings, which is not thread-safe before Python 3.14 (and
        # threads gained nothing here: the per-image work holds the GIL).
        with warnings.catch_warnings():
            # The hashing stage already reported each image's decoding notes.
            warnings.simplefilter("ignore")
            return [
                thumb
                for start in range(0, len(wanted), _DECODE_BATCH)
                for thumb in _thumbnails_of(sources, wanted[start : start + _DECODE_BATCH], decode)
            ]

    listed = np.asarray(rows, dtype=np.int64).tolist()
    values = compute(listed) if cache is None else cache(listed, compute, _thumbnail_version())
    size = THUMB_SIDE * THUMB_SIDE
    kept = [i for i, value in enumerate(values) if value is not None and len(value) == size]
    if not kept:
        return np.zeros(0, dtype=np.int64), np.zeros((0, THUMB_SIDE, THUMB_SIDE), np.uint8)
    stack = np.frombuffer(b"".join(values[i] for i in kept), dtype=np.uint8)  # type: ignore[misc]
    stack = stack.reshape(-1, THUMB_SIDE, THUMB_SIDE)  # uint8: 1 KB an image
    photo = flat_share(stack) < FLAT_SHARE
    return np.asarray(rows, dtype=np.int64)[np.asarray(kept)][photo], stack[photo]


#: See :func:`registered_pairs`.
_RETRY_CORRELATION = 0.85


def _scattered(values: NDArray[np.float32], at: NDArray[np.int64], n: int) -> NDArray[np.float32]:
    """``values`` placed at rows ``at`` of an array of ``n`` rows (zeros elsewhere)."""
    out = np.zeros((n, *values.shape[1:]), dtype=np.float32)
    out[at] = values
    return out


class NetPairs(NamedTuple):
    """What the tiny-photo net found (:func:`registered_pairs`).

    Attributes
    ----------
    pairs : numpy.ndarray of int64, shape (k, 2)
        The accepted row pairs (``a < b``).
    registration : Registration
        Their scores.
    candidates : int
        The mutual neighbours registered (layout, spectrum, zoomed spectrum).
    tiny : numpy.ndarray of int64
        The rows that are tiny opaque photos (the net's images), sorted.
    """

    pairs: NDArray[np.int64]
    registration: Registration
    candidates: int
    tiny: NDArray[np.int64]


def registered_pairs(
    sources: Sequence[Any],
    rows: NDArray[np.int64],
    groups: NDArray[np.int64],
    decode: DecodeOptions,
    cache: ThumbnailCache | None = None,
) -> NetPairs:
    """The tiny-photo net: registered copies among ``rows`` across ``groups`` (splits).

    ``cache`` serves the thumbnails of unchanged files (:func:`tiny_thumbnails`).
    """
    rows = np.asarray(rows, dtype=np.int64)
    groups = np.asarray(groups, dtype=np.int64)
    none = np.zeros((0, THUMB_SIDE, THUMB_SIDE), np.float32)
    nothing = np.zeros(0, dtype=np.int64)
    if len(np.unique(groups[rows])) < 2:
        return NetPairs(np.zeros((0, 2), dtype=np.int64), register_pairs(none, none), 0, nothing)
    tiny, thumbs = tiny_thumbnails(sources, rows, decode, cache)
    if len(np.unique(groups[tiny])) < 2:
        return NetPairs(
            np.zeros((0, 2), dtype=np.int64), register_pairs(none, none), 0, np.sort(tiny)
        )
    spectrum = spectrum_descriptors(thumbs)
    local = np.unique(
        np.concatenate(
            [
                mutual_nearest_pairs(layout_descriptors(thumbs), groups[tiny]),
                mutual_nearest_pairs(spectrum, groups[tiny]),
                np.sort(
                    mutual_nearest_between(
                        spectrum_descriptors(thumbs, NET_ZOOM), spectrum, groups[tiny]
                    ),
                    axis=1,
                ),
            ]
        ),
        axis=0,
    )
    # Both ways: sampling the image that must shrink aliases its fine detail (a 20%
    # rescale of a same-shot CIFAR-10 pair scored detail 0.32 one way, 0.79 the other),
    # so a pair is judged in the direction that enlarges. On the dev classes' 142
    # same-shot pairs: 134 pass one way, 138 either way.
    boxes = content_boxes(thumbs)
    forward = register_pairs(
        thumbs[local[:, 0]],
        thumbs[local[:, 1]],
        first_boxes=boxes[local[:, 0]],
        second_boxes=boxes[local[:, 1]],
    )
    # Only pairs that nearly line up one way are tried the other way: no same-shot
    # pair nor any of 6,000 layout neighbours on CIFAR-10 passed backward alone with a
    # forward correlation under 0.85 (_RETRY_CORRELATION).
    retry = np.flatnonzero(~forward.copies & (forward.correlation >= _RETRY_CORRELATION))
    partial = register_pairs(
        thumbs[local[retry, 1]],
        thumbs[local[retry, 0]],
        first_boxes=boxes[local[retry, 1]],
        second_boxes=boxes[local[retry, 0]],
    )
    backward = Registration(
        *(
            _scattered(getattr(partial, name), retry, len(local))
            for name in ("correlation", "detail", "scale", "shift", "overlap")
        )
    )
    use_backward = backward.copies & ~forward.copies
    keep = forward.copies | backward.copies

    def chosen(f: NDArray[np.float32], b: NDArray[np.float32]) -> NDArray[np.float32]:
        pick = use_backward if f.ndim == 1 else use_backward[:, None]
        return np.where(pick, b, f)[keep]

    kept = Registration(
        *(
            chosen(getattr(forward, name), getattr(backward, name))
            for name in ("correlation", "detail", "scale", "shift", "overlap")
        )
    )
    return NetPairs(np.sort(tiny[local[keep]], axis=1), kept, len(local), np.sort(tiny))
