"""The judge: the pixel check of one candidate pair (:func:`compare_unregistered`) and its rules."""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit._colour_map import mapped_before_flattening, mapped_colours
from leakaudit._registration import MIN_DETAIL, fine_detail, registered_overlap, registered_overlaps
from leakaudit._verify_candidates import (
    AS_IS,
    CONTENT,
    CROP,
    PAIRED_KINDS,
    ROTATION,
    STRIP,
    WHOLE,
    repeats_as_is,
)
from leakaudit._verify_lossy import (
    LOSSY_SLACK,
    chroma_blurred,
    chroma_scale,
    premultiplied,
    reencoded_noise,
)
from leakaudit._verify_options import VerifyOptions
from leakaudit._verify_view import (
    CB,
    CR,
    GRID,
    LUMA,
    VIEW_SIDE,
    View,
    flattened,
    fringe_masked_grid,
    turned_grid,
)
from leakaudit.hashing import (
    CROP_BOXES,
    CROP_ROTATIONS,
    CROP_SCALES,
    STRIP_ASPECT,
    popcount64,
    triangle_weights,
    turned_view,
)

__all__ = [
    "DETAIL_GREY",
    "DETAIL_SIDE",
    "MIN_DETAIL_COVERAGE",
    "PairVerdict",
    "colour_change",
    "compare_grids",
    "compare_unregistered",
    "correlation",
    "detail_coverage",
    "pair_background",
    "rejected_by_detail",
    "strip_offsets",
    "symmetric_detail",
    "verdict_rank",
]


@dataclass(frozen=True)
class PairVerdict:
    """The verification of one candidate pair.

    Attributes
    ----------
    accepted : bool
    stage : str
        The stage that decided: ``"bytes"``, ``"pixels"`` or ``"geometry"``.
    similarity : float
        Structure score of the pixel check (NaN when it did not run).
    chroma : float
        Mean chroma difference on the aligned grid (NaN when not run).
    inliers : int
        RANSAC inliers of the geometric check (-1 when it did not run).
    reason : str
        Short text: why accepted or rejected.
    turn : int
        The dihedral code that turned the second image onto the first (0 as is).
    silhouette : float
        IoU of the alpha masks when both images have transparency (NaN otherwise).
    aligned : str
        The entries that aligned the pair (:data:`leakaudit.copykind.ALIGNMENTS`):
        ``"whole"`` images (turned by ``turn``), or a ``"crop"``, ``"rotation"`` or
        ``"content"`` entry of one against the other.
    colour : float
        Mean chroma difference of the aligned grids as they are, before any colour
        map (NaN when not measured): against ``chroma``, what tells a recoloured
        copy (:func:`colour_change`).
    detail : float
        Correlation of the aligned grids' fine detail (luma minus a blur), measured
        for a partial, turned or padded alignment of two photos the other checks
        accepted (NaN otherwise): :func:`_fine_detail_agreement`.
    """

    accepted: bool
    stage: str
    similarity: float = math.nan
    chroma: float = math.nan
    inliers: int = -1
    reason: str = ""
    turn: int = 0
    silhouette: float = math.nan
    changed: float = math.nan
    aligned: str = "whole"
    colour: float = math.nan
    detail: float = math.nan

    @property
    def strength(self) -> float:
        """Evidence strength in [0, 1]: 1 for a byte copy."""
        if not self.accepted:
            return 0.0
        if self.stage == "bytes":
            return 1.0
        if self.stage == "geometry":
            return 0.5 + 0.45 * min(1.0, self.inliers / 100.0)
        return float(min(0.99, max(0.0, self.similarity)))


def _region(view: View, kind: int, index: int) -> NDArray[np.float32]:
    """The view's part an entry hashed, on the comparison grid (float32, RGBA)."""
    if kind in (WHOLE, AS_IS):
        return view.grid
    key = (kind, index)
    found = view.regions.get(key)
    if found is not None:
        return found
    if kind == CONTENT:  # no content box: the content entry is the whole image's
        return view.grid
    side = float(VIEW_SIDE)
    image = view.rgba
    if kind == CROP:
        left, top, right, bottom = CROP_BOXES[index]
        box = (left * side, top * side, right * side, bottom * side)
    else:
        image = image.rotate(CROP_ROTATIONS[index], Image.Resampling.BILINEAR)
        margin = side * 0.075
        box = (margin, margin, side - margin, side - margin)
    grid = np.asarray(
        image.resize((GRID, GRID), Image.Resampling.BILINEAR, box=box), dtype=np.float32
    )
    # Not kept: a view of an image with many candidates would grow by 9 KB per
    # region (30 of them), and resampling a 48 x 48 view again is cheap.
    return grid


#: A crop alignment is searched around its box, in steps of this share of the spacing
#: between the box's neighbouring positions, up to half the spacing each way (a random
#: crop lies at most half a spacing from the nearest box).
#: RESULTS §10 session 9 (a 5 x 5 lattice: crop 15% 78.3 -> 86.0% on the generated
#: closure, with the factor below).
_REFINE_STEPS = (-0.5, -0.25, 0.0, 0.25, 0.5)
#: The changed share allowed at a refined crop alignment, as a multiple of the whole
#: image's (unrefined alignments allow 2: a region resampled from the 48 x 48 view is
#: blurrier than the whole view, and a box up to half a spacing off changes more).
#: RESULTS §10 session 9 table: x2 / x1.5 / x1 gave precision 94.5 / 95.1 / 95.2% on the
#: generated closure (the unrefined factor 2 in :func:`compare_unregistered` dates from the
#: same cascade). Generated data only.
_REFINED_CHANGED_FACTOR = 1.0


def _crop_spacing(index: int) -> float:
    """View pixels between neighbouring positions of crop box ``index``'s scale."""
    start = 0
    for keep, positions in CROP_SCALES:
        if index < start + positions * positions:
            return (1.0 - keep) * VIEW_SIDE / max(1, positions - 1)
        start += positions * positions
    return 0.0


@functools.lru_cache(maxsize=128)
def _refine_plan(
    index: int, height_px: int, width_px: int
) -> tuple[
    NDArray[np.float64], NDArray[np.float64], float, float, NDArray[np.float64], NDArray[np.float64]
]:
    """Box positions and resampling weights of :func:`_refined_crop`'s lattice for one box."""
    left, top, right, bottom = CROP_BOXES[index]
    width, height = (right - left) * width_px, (bottom - top) * height_px
    steps = np.asarray(_REFINE_STEPS) * _crop_spacing(index)
    xs = np.clip(left * width_px + steps, 0.0, width_px - width)
    ys = np.clip(top * height_px + steps, 0.0, height_px - height)
    rows = np.stack([triangle_weights(GRID, y, y + height, height_px) for y in ys])
    cols = np.stack([triangle_weights(GRID, x, x + width, width_px) for x in xs])
    return xs, ys, width, height, rows, cols


def _refined_crop(
    view: View,
    index: int,
    target: NDArray[np.float32],
    grid: NDArray[np.float32],
    background: NDArray[np.float32],
) -> NDArray[np.float32]:
    """The region near crop box ``index`` of ``view`` whose luma correlates best with ``target``.

    A copy cropped at a random position lies up to half a spacing from the
    nearest of the crop entries' boxes (2.5% of a side for 15% crops): enough
    to fail the changed-share limit on a small sharp graphic. The box is moved
    on a 5 x 5 lattice of up to half a spacing each way (``grid`` is the region
    at the box itself) and the best-correlating region is compared, with the
    whole image's changed limit rather than twice it. The 25 regions' lumas are
    resampled at once with the triangle weights of Pillow's bilinear filter
    (one product per axis); only the chosen region is resampled by Pillow.
    """
    pixels = np.asarray(view.rgba, dtype=np.float32)
    xs, ys, width, height, rows, cols = _refine_plan(index, pixels.shape[0], pixels.shape[1])
    luma = (flattened(pixels, background) @ LUMA).reshape(pixels.shape[:2])
    lines = rows @ luma  # (positions, 24, 48): each vertical position's rows
    regions = np.matmul(lines[:, None], cols.transpose(0, 2, 1)[None])
    regions = regions.reshape(len(ys) * len(xs), -1)
    regions -= regions.mean(axis=1, keepdims=True)
    regions /= np.maximum(np.linalg.norm(regions, axis=1, keepdims=True), 1e-6)
    wanted = (flattened(target, background) @ LUMA).astype(np.float64)
    wanted -= wanted.mean()
    wanted /= max(float(np.linalg.norm(wanted)), 1e-6)
    scores = regions @ wanted
    centre = (len(ys) // 2) * len(xs) + len(xs) // 2
    best = int(np.argmax(scores))
    if scores[best] <= scores[centre]:  # the box itself (ties included)
        return grid
    x0, y0 = float(xs[best % len(xs)]), float(ys[best // len(xs)])
    region: NDArray[np.float32] = np.asarray(
        view.rgba.resize(
            (GRID, GRID), Image.Resampling.BILINEAR, box=(x0, y0, x0 + width, y0 + height)
        ),
        dtype=np.float32,
    )
    return region


def _alignments(a: View, b: View, extra: int = 3) -> list[tuple[int, int, int, int]]:
    """Crop or rotation entry pairs ``(kind_a, index_a, kind_b, index_b)`` to align a pair by.

    The ``extra`` allowed pairs nearest in hash: the nearest alone can be a
    spurious one (a crop of a flat sprite hashes like many others), so the
    check takes the best of a few.
    """
    pa = a.entries[:, 0][:, None] ^ b.entries[:, 0][None, :]
    da = a.entries[:, 1][:, None] ^ b.entries[:, 1][None, :]
    shape = pa.shape
    hash_distance = np.maximum(popcount64(pa.ravel()), popcount64(da.ravel())).reshape(shape)
    allowed = PAIRED_KINDS[a.kinds[:, None], b.kinds[None, :]] & (a.kinds[:, None] != WHOLE)
    # A crop or rotation slot that repeats the image's own as-is hashes is no crop (a
    # 32 px photo's thumbnail makes only some of them): never an alignment.
    allowed &= ~_repeats(a)[:, None] & ~_repeats(b)[None, :]
    as_is = (a.kinds[:, None] == AS_IS) | (b.kinds[None, :] == AS_IS)
    content = (a.kinds[:, None] == CONTENT) | (b.kinds[None, :] == CONTENT)
    found: list[tuple[int, int, int, int]] = []
    # A whole image against the other's crops or rotations first (a crop, a small
    # rotation), then the contents inside backgrounds (padding), then crop against
    # rotation (a rotated copy with its corners cut): ranked together, spurious
    # crop-rotation pairs of a smooth image crowd out the one alignment that matters.
    for ok, count in (
        (allowed & as_is & ~content, extra),
        (allowed & content, 1),
        (allowed & ~as_is & ~content, 2),
    ):
        distance: NDArray[np.int64] = np.where(ok, hash_distance.astype(np.int64), 1000).ravel()
        for flat in np.argsort(distance, kind="stable")[:count].tolist():
            if distance[flat] >= 1000:
                break
            i, j = divmod(flat, shape[1])
            found.append(
                (
                    int(a.kinds[i]),
                    _index_in_kind(a.kinds, i),
                    int(b.kinds[j]),
                    _index_in_kind(b.kinds, j),
                )
            )
    return found


def _repeats(view: View) -> NDArray[np.bool_]:
    """:func:`~leakaudit._verify_candidates.repeats_as_is` of one view's entries."""
    owner = np.zeros(len(view.kinds), dtype=np.int64)
    return repeats_as_is(owner, view.entries[:, 0], view.entries[:, 1], view.kinds)


def _aligned_name(kind_a: int, kind_b: int) -> str:
    """The :attr:`PairVerdict.aligned` of an alignment by entries of these kinds."""
    kinds = {kind_a, kind_b}
    for kind, name in ((ROTATION, "rotation"), (CROP, "crop"), (CONTENT, "content")):
        if kind in kinds:
            return name
    return "whole"


def _index_in_kind(kinds: NDArray[np.int8], position: int) -> int:
    return int(np.count_nonzero(kinds[:position] == kinds[position]))


#: A pixel has changed when, after the best per-channel gain and offset between
#: the two images (brightness, contrast, a global colour cast), it is still this
#: far off in some channel. Not measured on its own in RESULTS; it came with
#: ``max_changed`` (§10 "Verification", generated closure). The gain is clipped to
#: [1/2, 2] (:func:`channel_gain`), also unmeasured.
_CHANGED_LEVEL = 48.0


#: A pixel is foreground when it is this far from the pair's background colour
#: in some channel (transparent pixels are flattened onto that colour). Came with the
#: figure limits of RESULTS §10 session 5 (generated closure); not measured on its own.
_FOREGROUND_LEVEL = 24.0
#: The foreground counts as at least this share of the grid: a tiny foreground
#: would make a few pixels of JPEG noise look like a large change. RESULTS §10 session 5
#: ("lifting the total to at least 40% of the grid"; generated closure, not varied).
_MIN_FOREGROUND = 0.4


def _foreground_weight(
    rgb_a: NDArray[np.float32], rgb_b: NDArray[np.float32], background: NDArray[np.float32]
) -> NDArray[np.float32] | None:
    """Weights that average over the foreground of either image, or None when the
    pair has no background to speak of.

    A sprite or a padded icon covers part of its canvas: a palette swap or
    another badge changes a tenth of the figure but a few hundredths of the
    canvas, so a graphic's colours and changed share are measured on what
    differs from the background in either image.
    """
    away = (np.abs(rgb_a - background).max(axis=1) > _FOREGROUND_LEVEL) | (
        np.abs(rgb_b - background).max(axis=1) > _FOREGROUND_LEVEL
    )
    share = float(away.mean())
    if share >= 0.9:
        return None
    floor = max(_MIN_FOREGROUND, share)
    # Foreground pixels weigh 1; the rest share what lifts the total to the floor.
    rest = (floor - share) / max(1e-6, 1.0 - share)
    weight: NDArray[np.float32] = np.where(away, 1.0, rest).astype(np.float32)
    return weight


def _chroma_difference(
    rgb_a: NDArray[np.float32],
    rgb_b: NDArray[np.float32],
    *,
    saturation: float | None,
    weight: NDArray[np.float32] | None = None,
) -> float:
    """Mean chroma difference (Cb and Cr), after the best saturation gain allowed.

    A saturation edit scales chroma, a recolouring turns it: a gain in
    ``[1 / saturation, saturation]`` on the first image's chroma is allowed
    before comparing (photos: 2). With ``saturation=None`` the images are
    compared as they are. ``weight``: the foreground's weights
    (:func:`_foreground_weight`), else every pixel counts alike.
    """
    chroma_a = np.stack([rgb_a @ CB, rgb_a @ CR], axis=1)
    chroma_b = np.stack([rgb_b @ CB, rgb_b @ CR], axis=1)
    gain = 1.0
    if saturation is not None:
        energy = float((chroma_a * chroma_a).sum())
        if energy > 1.0:
            fit = float((chroma_a * chroma_b).sum()) / energy
            gain = min(saturation, max(1.0 / saturation, fit))
    difference = np.abs(chroma_b - gain * chroma_a).sum(axis=1)
    if weight is None:
        return float(difference.mean())
    return float((difference * weight).sum() / weight.sum())


def _weighted_mean(values: NDArray[Any], weight: NDArray[np.float32] | None) -> float:
    if weight is None:
        return float(np.mean(values))
    return float((values * weight).sum() / weight.sum())


def _luma_column(rgb: NDArray[np.float32]) -> NDArray[np.float32]:
    """Luma as a one-channel (pixels, 1) array, for :func:`_changed_share`."""
    luma: NDArray[np.float32] = (rgb @ LUMA)[:, None]
    return luma


def correlation(x: NDArray[np.float32], y: NDArray[np.float32]) -> float:
    """The zero-mean correlation of two signals. A flat one (spread under a quarter of a
    level) has no structure to agree: two flat ones are alike when their levels are, and
    a flat one never agrees with one that is not (it once did, at 1.0, whenever the
    product of the two spreads was small: a flat region matched any picture)."""
    mean_x, mean_y = float(x.mean()), float(y.mean())
    x = x - mean_x
    y = y - mean_y
    energy_x, energy_y = float((x * x).sum()), float((y * y).sum())
    flat_x, flat_y = energy_x < _FLAT_ENERGY * x.size, energy_y < _FLAT_ENERGY * y.size
    if flat_x or flat_y:
        return 1.0 if flat_x and flat_y and abs(mean_x - mean_y) < 8 else 0.0
    return float((x * y).sum() / math.sqrt(energy_x * energy_y))


#: A signal whose variance is under this (grey levels squared) is flat.
_FLAT_ENERGY = 0.0625


def compare_unregistered(a: View, b: View, options: VerifyOptions | None = None) -> PairVerdict:
    """The pixel check of one pair (no geometry): accepted, rejected or left open.

    The whole images first, in the turn (of 8) whose luma correlates best (also
    untrimmed when a trim cut something, and, for a 1-bit transparent image such
    as a GIF against a soft-edged one, with the latter's alpha made 1-bit); when
    that does not accept, the few crop and rotation alignments nearest in hash.
    A pair left open has ``stage == "open"`` (plausible structure below
    ``min_correlation``, colours and silhouettes compatible).
    """
    options = options or VerifyOptions()
    if a.digest == b.digest:
        return PairVerdict(True, "bytes", 1.0, 0.0, reason="byte-identical")
    best = _content_box_detail(_whole_verdict(a.grid, b.grid, a, b, options), a, b, options)
    if best.accepted:
        return best
    if a.full_grid is not None or b.full_grid is not None:
        # One of them was trimmed: compare them untrimmed too (the other's trim may
        # have kept a margin this one lost).
        for grid_a, grid_b in (
            (a.full_grid if a.full_grid is not None else a.grid, b.grid),
            (a.grid, b.full_grid if b.full_grid is not None else b.grid),
            (
                a.full_grid if a.full_grid is not None else a.grid,
                b.full_grid if b.full_grid is not None else b.grid,
            ),
        ):
            verdict = _content_box_detail(
                _whole_verdict(grid_a, grid_b, a, b, options), a, b, options
            )
            if verdict_rank(verdict) > verdict_rank(best):
                best = verdict
                if best.accepted:
                    return best
    if a.binary_alpha != b.binary_alpha and (a.hardened_grids or b.hardened_grids):
        # One has 1-bit transparency (a GIF copy): its fringe went opaque or transparent
        # by the encoder's rule, so the other's soft edge is made 1-bit alike: by the
        # copy's own mask first, then at fixed levels.
        soft, binary = (a, b) if a.hardened_grids else (b, a)
        masked = fringe_masked_grid(soft, binary)
        for hard in ([] if masked is None else [masked]) + soft.hardened_grids:
            grid_a, grid_b = (hard, b.grid) if a.hardened_grids else (a.grid, hard)
            verdict = _whole_verdict(grid_a, grid_b, a, b, options)
            if verdict_rank(verdict) > verdict_rank(best):
                best = verdict
                if best.accepted:
                    return best
    for kind_a, index_a, kind_b, index_b in _alignments(a, b):
        if STRIP in (kind_a, kind_b):
            verdict = _strip_verdict(a, b, 0 if kind_a == STRIP else 1, options)
            if verdict_rank(verdict) > verdict_rank(best):
                best = verdict
                if best.accepted:
                    break
            continue
        grid_a, grid_b = _region(a, kind_a, index_a), _region(b, kind_b, index_b)
        # A region resampled from the 48 x 48 view is blurrier than the whole view:
        # twice the changed share is allowed there, unless the crop was refined.
        factor = 2.0
        if kind_a == CROP and kind_b in (AS_IS, WHOLE):
            grid_a = _refined_crop(a, index_a, grid_b, grid_a, pair_background(a, b))
            factor = _REFINED_CHANGED_FACTOR
        elif kind_b == CROP and kind_a in (AS_IS, WHOLE):
            grid_b = _refined_crop(b, index_b, grid_a, grid_b, pair_background(a, b))
            factor = _REFINED_CHANGED_FACTOR
        verdict = compare_grids(grid_a, grid_b, a, b, options, changed_factor=factor)
        verdict = dataclasses.replace(verdict, aligned=_aligned_name(kind_a, kind_b))
        rotated = None
        if ROTATION in (kind_a, kind_b):
            side = 0 if kind_a == ROTATION else 1
            rotated = (side, CROP_ROTATIONS[index_a if side == 0 else index_b])
        verdict = _with_detail(verdict, a, b, rotated)
        if verdict_rank(verdict) > verdict_rank(best):
            best = verdict
            if best.accepted:
                break
    return best


def strip_offsets(width: int, strip_width: float) -> NDArray[np.float64]:
    """Left edges of a strip ``strip_width`` wide slid along ``width``, every half pixel.

    The last one is ``width - strip_width`` exactly, so every box ends inside the image
    (a half-pixel step past it made Pillow refuse the box: a 29 x 20 flag against its
    transposed copy stopped the audit).
    """
    last = max(float(width) - strip_width, 0.0)
    return np.unique(np.minimum(np.arange(0.0, last + 0.5, 0.5), last))


def _strip_verdict(a: View, b: View, side: int, options: VerifyOptions) -> PairVerdict:
    """A strip alignment: one image (``side`` 0 for ``a``) a 9:16 strip of the other.

    The wide (or tall) image's strip that best correlates in luma with the other
    image is found along its whole length (at its own aspect, 48 pixels across),
    compared on the grid like a refined crop, and, as a partial match, decided by
    the fine detail of the two grey images (:func:`detail_coverage`) with the
    landscape cut to that strip: a strip is not linked where that cannot be measured.
    """
    wide, other = (a, b) if side == 0 else (b, a)
    source = wide.strip_rgba
    (wide_w, wide_h), (other_w, other_h) = wide.native_size, other.native_size
    if source is None or (wide_w > wide_h) == (other_w > other_h):
        return PairVerdict(False, "pixels", reason="strip: not a strip of the other's shape")
    tall = source.height > source.width  # a band of a tall image: turned to a strip
    pixels = np.asarray(source, dtype=np.float32)
    target = other.grid
    if tall:
        pixels, target = pixels.transpose(1, 0, 2), target.transpose(1, 0, 2)
    height, width = pixels.shape[:2]
    strip_width = min(float(width), STRIP_ASPECT * height)
    background = pair_background(a, b)
    luma = (flattened(pixels, background) @ LUMA).reshape(height, width)
    lines = triangle_weights(GRID, 0.0, float(height), height) @ luma
    xs = strip_offsets(width, strip_width)
    cols = np.stack([triangle_weights(GRID, x, x + strip_width, width) for x in xs])
    regions = np.matmul(lines[None], cols.transpose(0, 2, 1)).reshape(len(xs), -1)
    regions -= regions.mean(axis=1, keepdims=True)
    regions /= np.maximum(np.linalg.norm(regions, axis=1, keepdims=True), 1e-6)
    wanted = (flattened(target, background) @ LUMA).astype(np.float64)
    wanted -= wanted.mean()
    wanted /= max(float(np.linalg.norm(wanted)), 1e-6)
    x0 = float(xs[int(np.argmax(regions @ wanted))])
    box = (x0, 0.0, x0 + strip_width, float(height))
    turned = source.transpose(Image.Transpose.TRANSPOSE) if tall else source
    grid = np.asarray(
        turned.resize((GRID, GRID), Image.Resampling.BILINEAR, box=box), dtype=np.float32
    )
    if tall:
        grid = grid.transpose(1, 0, 2)
    grids = (grid, b.grid) if side == 0 else (a.grid, grid)
    verdict = compare_grids(*grids, a, b, options, changed_factor=_REFINED_CHANGED_FACTOR)
    verdict = dataclasses.replace(verdict, aligned="crop")
    if not verdict.accepted:
        return verdict
    detail = _strip_detail(wide.strip_grey, other.grey, x0 / width, strip_width / width, tall)
    if detail is not None and detail >= MIN_DETAIL_COVERAGE:
        return dataclasses.replace(verdict, detail=detail)
    if detail is None:
        return rejected_by_detail(verdict, math.nan, "strip: too small for the fine-detail rule")
    if math.isnan(detail):
        # A strip slides freely along the picture: with no detail to pin it, the
        # coarse fit is no evidence (tiles of one smooth picture fit anywhere).
        return rejected_by_detail(verdict, detail, "coarse layout only: no detail to align on")
    return rejected_by_detail(verdict, detail)


def _strip_detail(
    wide: NDArray[np.uint8], other: NDArray[np.uint8], start: float, size: float, tall: bool
) -> float | None:
    """The fine-detail rule of a strip match: ``wide``'s grey cut to the strip (``start``
    and ``size`` shares of its long side) against ``other``'s grey (None: too small)."""
    if wide.size == 0 or other.size == 0:
        return None
    if tall:
        wide, other = wide.T, other.T
    left = round(start * wide.shape[1])
    cut = wide[:, left : left + max(1, round(size * wide.shape[1]))]
    greys = [Image.fromarray(np.ascontiguousarray(g)) for g in (cut, other)]
    side = min(min(g.size) for g in greys) // 4 * 4
    if side < _STRIP_DETAIL_SIDE:
        return None
    pair = np.stack(
        [np.asarray(g.resize((side, side), Image.Resampling.BILINEAR), np.float32) for g in greys]
    )
    both = [detail_coverage(pair[0], pair[1]), detail_coverage(pair[1], pair[0])]
    return max((c for c in both if not math.isnan(c)), default=math.nan)


#: The smallest side at which a strip match's fine detail is compared (else it is not
#: linked). Below :data:`DETAIL_SIDE`: the verifier decodes a lossless picture reduced
#: to about 96 pixels on its shorter side, where a 9:16 strip is 54 wide; 48 still holds
#: 12-pixel blocks, finer than the 24 x 24 grid. Generated data only
#: (tests/test_strip_entries.py, ``bench_quality.py --failures``); not varied.
_STRIP_DETAIL_SIDE = 48


def _whole_verdict(
    grid_a: NDArray[np.float32],
    grid_b: NDArray[np.float32],
    a: View,
    b: View,
    options: VerifyOptions,
) -> PairVerdict:
    """Two whole grids compared in the turn (of 8) whose luma correlates best."""
    background = pair_background(a, b)
    rgb_b = flattened(grid_b, background)
    luma_b = (rgb_b @ LUMA).reshape(grid_b.shape[:2])
    # The 8 turns of b's luma, zero-mean and unit-norm, against a's in one product.
    turns = np.stack([turned_grid(luma_b[..., None], code)[..., 0].ravel() for code in range(8)])
    turns = turns - turns.mean(axis=1, keepdims=True)
    turns /= np.maximum(np.linalg.norm(turns, axis=1, keepdims=True), 1e-6)
    rgb_a = flattened(grid_a, background)
    luma_a = rgb_a @ LUMA
    code = int(np.argmax(turns @ (luma_a - luma_a.mean())))
    turned_rgb_b = turned_grid(rgb_b.reshape(*grid_b.shape[:2], 3), code).reshape(-1, 3)
    turned = turned_grid(grid_b, code)
    verdict = compare_grids(grid_a, turned, a, b, options, rgb=(rgb_a, turned_rgb_b))
    verdict = dataclasses.replace(verdict, turn=code)
    # A turn aligns the coarse layout of look-alikes (the quadrants of a symmetric
    # picture). A whole match after trimming a padding is not a partial one: a padded
    # copy of a smooth photo is a copy (with the rule, padded JPEG copies of low-texture
    # pictures failed at Pillow 10.4 by a block or two).
    if code != 0:
        free = grid_a is a.grid and grid_b is b.grid and _content_box_only(a, b, code, options)
        return _with_detail(verdict, a, b, free=free)
    return _recoloured_layout(verdict, a, b)


def _content_box_only(a: View, b: View, turn: int, options: VerifyOptions) -> bool:
    """Whether a match of two images both trimmed to their content boxes holds only for the
    boxes: the untrimmed images (in the same turn) do not match. Trimming both is then an
    alignment, as a crop is (two quarter discs of other radii on black are scaled copies
    of each other once cut to their content); when the untrimmed images match too, the
    match is a whole one (a copy trimmed as its original was)."""
    if a.full_grid is None or b.full_grid is None:
        return False
    untrimmed = compare_grids(a.full_grid, turned_grid(b.full_grid, turn), a, b, options)
    return not untrimmed.accepted


#: Least structure score of a whole match of two photos whose colours only a global
#: colour map explains and whose fine detail does not agree: colour is no longer
#: evidence there, so the layout must agree all but exactly. ``bench_quality.py
#: --failures`` (generated smooth tiles and discs): recoloured and grey copies of smooth
#: tiles score 0.998-1.00, the look-alikes linked through a colour map 0.89 (a grey tile
#: and its neighbour's mirror) and 0.93 (quadrants of two soft discs). CIFAR-10 (32 px,
#: no fine detail to measure) is outside the rule.
_RECOLOURED_SIMILARITY = 0.97


def _recoloured_layout(verdict: PairVerdict, a: View, b: View) -> PairVerdict:
    """An accepted whole match whose colours differ by a global colour edit (a grey or
    recoloured copy, :func:`colour_change`), rejected when its structure agrees short of
    :data:`_RECOLOURED_SIMILARITY` and its fine detail does not agree."""
    if (
        not verdict.accepted
        or verdict.similarity >= _RECOLOURED_SIMILARITY
        or not colour_change(a, b, verdict)
    ):
        return verdict
    detail = _fine_detail_agreement(a, b, verdict.turn)
    if detail is None or math.isnan(detail) or detail >= MIN_DETAIL_COVERAGE:
        return verdict
    return rejected_by_detail(
        verdict, detail, f"recoloured layout only: fine detail differs ({detail:.2f})"
    )


def _content_box_detail(
    verdict: PairVerdict, a: View, b: View, options: VerifyOptions
) -> PairVerdict:
    """A whole match of two images both trimmed to their content boxes, judged by its
    fine detail (:func:`_with_detail`) as a partial match is.

    Trimming both images is an alignment, as a crop is: two quarter discs of other radii
    and colours on black are scaled copies of each other once both are cut to their
    content. A match that covers the whole of one image (only the other was trimmed: a
    padded copy) stays a whole match.
    """
    if verdict.turn != 0 or a.full_grid is None or b.full_grid is None:
        return verdict  # a turn is judged by _whole_verdict already
    return _with_detail(verdict, a, b, free=_content_box_only(a, b, 0, options))


#: The smallest side at which two grey images of a partial or turned match are
#: compared for their fine detail (:func:`_fine_detail_agreement`): finer than the
#: 24 x 24 grid, where a large photo's detail (texture, grain) is still there. RESULTS
#: §19: on CIFAR-10 (real, 32 px) the grid holds no finer detail (same-shot pairs' grid
#: detail correlation down to 0.28); 64 itself was not varied.
DETAIL_SIDE = 64
#: The smallest grey image the fine-detail rule reads: twice the grid's side, so that it
#: holds detail finer than the grid. Before, the grey image itself had to reach
#: :data:`DETAIL_SIDE`, and the trimmed quadrants of 400 px discs (grey 63 px, decoded
#: at a quarter) escaped the rule: ``bench_quality.py --failures`` (generated discs).
DETAIL_GREY = 2 * GRID


def _fine_detail_agreement(
    a: View, b: View, turn: int, rotated: tuple[int, float] | None = None
) -> float | None:
    """The decision rule for a partial or turned match of two photos: how well their
    fine detail agrees once registered (None when there is nothing finer than the grid).

    Agreement of coarse layout is not evidence on an image with little detail: tiles
    of one smooth picture (a gradient, a vignette, a blurred edge) line up after a
    crop, and the quadrants of a symmetric one (a retina photo's disc on black) after
    a turn, at grid similarity 1.00; their fine detail does not line up. ``b``'s grey
    image is turned by ``turn`` (and the ``rotated`` side, 0 for ``a`` and 1 for
    ``b``, turned by its rotation entry's angle and cut to its centre), both are
    resized to the smaller one's shorter side (at least :data:`DETAIL_SIDE`),
    registered both ways (a scale and shift per axis absorb a crop or a pad), and the
    better direction's share of agreeing blocks (:func:`detail_coverage`) is
    returned. Graphics keep no grey image (their native check is
    :func:`distinct_pixel_count`); photos under :data:`DETAIL_SIDE` pixels have no
    detail finer than the grid.
    """
    if a.grey.size == 0 or b.grey.size == 0:
        return None
    # The file's own side says whether there is detail finer than the grid; the grey
    # image, decoded reduced (a 400 px JPEG at 100 px, its trimmed quadrant at 63),
    # must only be finer than the grid to show it. Unknown native sides: the grey's.
    native = min(a.native_side, b.native_side) or min(*a.grey.shape, *b.grey.shape)
    if native < DETAIL_SIDE or min(*a.grey.shape, *b.grey.shape) < DETAIL_GREY:
        return None
    greys = [Image.fromarray(a.grey), Image.fromarray(turned_view(b.grey, None, turn)[0])]
    if rotated is not None:
        side, angle = rotated
        turned = greys[side].rotate(angle, Image.Resampling.BILINEAR)
        w, h = turned.size
        greys[side] = turned.crop((w * 0.075, h * 0.075, w * 0.925, h * 0.925))
    # As fine as both grey images allow: a copy's grain survives there, two different
    # tiles' does not line up.
    side = min(min(g.size) for g in greys) // 4 * 4
    pair = np.stack(
        [np.asarray(g.resize((side, side), Image.Resampling.BILINEAR), np.float32) for g in greys]
    )
    both = [detail_coverage(pair[0], pair[1]), detail_coverage(pair[1], pair[0])]
    return max((c for c in both if not math.isnan(c)), default=math.nan)


#: The fine-detail rule's blocks: the registered overlap is cut into this many blocks per
#: side, and the pair's evidence is the share of them whose own fine detail agrees
#: (correlation at least :data:`leakaudit._registration.MIN_DETAIL`). RESULTS §19 table
#: (one correlation over the whole overlap vs 4 x 4 blocks, ``bench_quality.py
#: --failures``: generated discs and tiles of real skimage photos).
_DETAIL_BLOCKS = 4
#: Least share of agreeing blocks for a partial or turned match of two photos.
#: Measured with ``bench_quality.py --failures`` (retina-like discs, smooth tiles, real
#: copies of both) and bench_closure ``--quick`` (crops, rotations, pads, turns of real
#: photo crops): the quadrants of a noisy disc agree only along their one edge (at most
#: 4-6 of 16 blocks), real copies of detailed photos in most blocks (RESULTS §19;
#: generated discs, real photo content with generated copies).
#: A block holds detail when its fine detail's standard deviation is at least this (grey
#: levels) in both images: JPEG's ripple on a flat or smooth area stays under it.
#: Stated in RESULTS §19, not varied there.
_DETAIL_LEVEL = 1.0
MIN_DETAIL_COVERAGE = 0.5


def detail_coverage(first: NDArray[np.float32], second: NDArray[np.float32]) -> float:
    """The share of the registered overlap's blocks in which fine detail agrees.

    ``second`` is registered onto ``first`` (:func:`leakaudit._registration.register_pairs`);
    the overlap is cut into :data:`_DETAIL_BLOCKS` squared blocks and each block that
    lies mostly inside it counts once: agreeing when its fine detail (luma minus a blur)
    correlates at least ``MIN_DETAIL``. A block with no detail in either image (flat
    black, a smooth gradient) does not agree: one shared edge, or the layout of a smooth
    picture, is not evidence of a copy; detail that agrees across the picture is.
    """
    aligned, mask = registered_overlap(first, second)
    return _block_coverage(first, aligned, mask)


def _block_coverage(
    first: NDArray[np.float32], aligned: NDArray[np.float32], mask: NDArray[np.bool_]
) -> float:
    """:func:`detail_coverage` of ``first`` and a registered ``aligned`` over ``mask``."""
    side = first.shape[0]
    detail_a = fine_detail(first[None])[0]
    detail_b = fine_detail(aligned[None])[0]
    step = side // _DETAIL_BLOCKS
    agree = total = 0
    for i in range(_DETAIL_BLOCKS):
        for j in range(_DETAIL_BLOCKS):
            cell = np.s_[i * step : (i + 1) * step, j * step : (j + 1) * step]
            inside = mask[cell]
            if inside.mean() < 0.5:
                continue
            x, y = detail_a[cell][inside], detail_b[cell][inside]
            x, y = x - x.mean(), y - y.mean()
            if min(float(x @ x), float(y @ y)) / x.size < _DETAIL_LEVEL**2:
                # Detail counts only where both images hold some: a block flat in
                # either says nothing either way.
                continue
            total += 1
            norm = math.sqrt(float(x @ x) * float(y @ y))
            agree += float(x @ y) / norm >= MIN_DETAIL
    return agree / total if total else math.nan


def _with_detail(
    verdict: PairVerdict,
    a: View,
    b: View,
    rotated: tuple[int, float] | None = None,
    *,
    free: bool = True,
) -> PairVerdict:
    """An accepted partial or turned verdict, rejected when its fine detail disagrees
    (:func:`_fine_detail_agreement`, :data:`leakaudit._registration.MIN_DETAIL`)."""
    if not verdict.accepted:
        return verdict
    detail = _fine_detail_agreement(a, b, verdict.turn, rotated)
    if detail is None:
        return verdict
    if math.isnan(detail):
        # No block holds detail above the noise floor in both images. A whole turn has
        # no free offset: it is judged on what the pair has (the grid), not rejected for
        # lacking detail. A partial alignment (a crop, a strip, a rotation, two content
        # boxes) was slid to where the coarse layout fits best, which any smooth picture
        # allows anywhere: with no detail to pin it, the fit is no evidence.
        if not free:
            return verdict
        return rejected_by_detail(verdict, detail, "coarse layout only: no detail to align on")
    if detail < MIN_DETAIL_COVERAGE:
        return rejected_by_detail(verdict, detail)
    if free and symmetric_detail(a, b, detail):
        # Only a free alignment can pair a symmetric shape's parts (quadrants of two discs);
        # a whole turn of a symmetric picture is a copy of it.
        return rejected_by_detail(
            verdict, detail, "coarse layout only: a symmetric shape without texture"
        )
    return dataclasses.replace(verdict, detail=detail)


def rejected_by_detail(
    verdict: PairVerdict, detail: float, reason: str | None = None
) -> PairVerdict:
    """``verdict`` turned down by the fine-detail rule (the pixel stage's), with
    ``detail`` recorded; the reason says the layout agreed and the detail did not."""
    return dataclasses.replace(
        verdict,
        accepted=False,
        stage="pixels",
        detail=detail,
        reason=reason or f"coarse layout only: fine detail differs ({detail:.2f})",
    )


def symmetric_detail(a: View, b: View, detail: float) -> bool:
    """Whether either image's fine detail agrees with its own turn (of 7, not the
    identity) as well as the pair's does (``detail``).

    A photo's fine detail (texture, grain, noise) agrees with a copy's better than with
    its own mirror image; a rendered shape's (a noise-free ring on black, whose only
    detail is its rims) agrees with its own turn as well, and its quadrants are exact
    turns of one another, as are those of another ring of another radius once trimmed.
    Such a pair's agreement is its shape alone. ``bench_quality.py --failures``:
    generated rings' quadrants agree with each other at 0.5-0.69 and with their own turns
    as well; the real retina photo (a disc with vessels) with its own turns at 0.5-0.75,
    with its copies at 1.0.
    """
    for view in (a, b):
        if (CONTENT, 0) in view.regions:
            # An untrimmed uniform border (trimming off): its straight edges are
            # symmetric whatever the picture inside (tests/test_borders.py, a photo
            # letterboxed in black agrees with its own mirror at 0.62).
            continue
        own = _self_turn_detail(view)
        if own is not None and own >= detail:
            return True
    return False


def _self_turn_detail(view: View) -> float | None:
    """The best agreement of ``view``'s fine detail with its own turns (7, not the
    identity), as :func:`_fine_detail_agreement` of the view with itself turned; None
    when it has nothing finer than the grid. Computed once per view (kept on it), the
    seven registrations at once: an image takes part in many pairs, and one at a time
    the rule tripled the closure's audit time.

    One direction suffices: registering a turned image onto the image is registering
    the image onto the inverse turn (a turn of the block grid), and the inverse of a
    turn is among the seven.
    """
    if view.self_turn_detail is not None:
        return None if view.self_turn_detail < 0 else view.self_turn_detail
    grey = view.grey
    native = view.native_side or min(grey.shape, default=0)
    if grey.size == 0 or native < DETAIL_SIDE or min(grey.shape) < DETAIL_GREY:
        view.self_turn_detail = -1.0
        return None
    side = min(grey.shape) // 4 * 4
    image = Image.fromarray(grey)
    first = np.asarray(image.resize((side, side), Image.Resampling.BILINEAR), np.float32)
    turned = np.stack(
        [
            np.asarray(
                Image.fromarray(turned_view(grey, None, code)[0]).resize(
                    (side, side), Image.Resampling.BILINEAR
                ),
                np.float32,
            )
            for code in range(1, 8)
        ]
    )
    firsts = np.broadcast_to(first, turned.shape)
    aligned, masks = registered_overlaps(np.ascontiguousarray(firsts), turned)
    coverages = [_block_coverage(first, aligned[k], masks[k]) for k in range(len(turned))]
    best = max((c for c in coverages if not math.isnan(c)), default=-1.0)
    view.self_turn_detail = best
    if best < 0:
        return None
    return best


def pair_background(a: View, b: View) -> NDArray[np.float32]:
    """The colour transparent pixels are flattened onto for this pair.

    An opaque copy of a transparent image was flattened onto some colour by the
    tool that saved it: its border tells which, so both are compared on it.
    """
    if a.has_alpha and not b.has_alpha:
        return b.border
    if b.has_alpha and not a.has_alpha:
        return a.border
    return np.array([255.0, 255.0, 255.0], dtype=np.float32)


def verdict_rank(verdict: PairVerdict) -> tuple[int, float]:
    order = 2 if verdict.accepted else 1 if verdict.stage == "open" else 0
    return order, verdict.similarity


def compare_grids(
    grid_a: NDArray[np.float32],
    grid_b: NDArray[np.float32],
    a: View,
    b: View,
    options: VerifyOptions,
    *,
    changed_factor: float = 1.0,
    rgb: tuple[NDArray[np.float32], NDArray[np.float32]] | None = None,
) -> PairVerdict:
    """The pixel check of two aligned grids (``rgb``: the same grids already flattened onto
    :func:`pair_background`).

    One transparent, one opaque: the opaque one was flattened onto some colour and then
    perhaps recoloured (a darker copy of an icon saved as JPEG on white has a grey border,
    but its figure was darkened, not flattened onto grey). So the transparent one is
    flattened onto the opaque one's border, onto white and onto black, and the best
    verdict counts.
    """
    background = pair_background(a, b)
    if rgb is None:
        rgb = flattened(grid_a, background), flattened(grid_b, background)
    best = _compare_flattened(grid_a, grid_b, a, b, options, changed_factor, rgb, background)
    if a.has_alpha == b.has_alpha or best.accepted:
        return best
    for other in (_WHITE, _BLACK):
        if np.abs(other - background).max() < 1.0:
            continue
        verdict = _compare_flattened(
            grid_a,
            grid_b,
            a,
            b,
            options,
            changed_factor,
            (flattened(grid_a, other), flattened(grid_b, other)),
            other,
        )
        if verdict_rank(verdict) > verdict_rank(best):
            best = verdict
    return best


def _soft_alpha(view: View) -> bool:
    """Whether ``view`` has transparency with levels between clear and opaque."""
    return view.has_alpha and not view.binary_alpha


_WHITE = np.full(3, 255.0, np.float32)
_BLACK = np.zeros(3, np.float32)


def _compare_flattened(
    grid_a: NDArray[np.float32],
    grid_b: NDArray[np.float32],
    a: View,
    b: View,
    options: VerifyOptions,
    changed_factor: float,
    rgb: tuple[NDArray[np.float32], NDArray[np.float32]],
    background: NDArray[np.float32],
) -> PairVerdict:
    """:func:`compare_grids` with the grids flattened onto ``background`` (``rgb``)."""
    rgb_a, rgb_b = rgb
    similarity = correlation(rgb_a @ LUMA, rgb_b @ LUMA)
    graphic = a.graphic or b.graphic
    weight = _foreground_weight(rgb_a, rgb_b, background) if graphic else None
    limits = _Limits.of(options, graphic, changed_factor, figure=weight is not None)
    # One rule for every image: a global colour map (grey, toned, channel-swapped or
    # -scaled, brighter, more contrast) never vetoes; what no global map explains does.
    alpha_weighted = None
    if (a.has_alpha or b.has_alpha) and grid_a.shape[-1] == 4 and grid_b.shape[-1] == 4:
        alpha_weighted = (premultiplied(grid_a), premultiplied(grid_b))
    fitted, target = mapped_colours(rgb_a, rgb_b, weight, premultiplied=alpha_weighted)
    if alpha_weighted is not None and _soft_alpha(a) and _soft_alpha(b):
        # Both with soft transparency (shadows, fringes): flattening mixes the background
        # into their colours, so the map may act before it (a darker icon with a soft
        # shadow); the route that explains more is kept. With 1-bit alpha flattening mixes
        # nothing and the flattened map is the map.
        before = mapped_before_flattening(grid_a, grid_b, background)
        if before is not None and _weighted_mean(
            np.abs(before[1] - before[0]).sum(axis=1), weight
        ) < _weighted_mean(np.abs(target - fitted).sum(axis=1), weight):
            fitted, target = before
    similarity = max(similarity, correlation(fitted @ LUMA, target @ LUMA))
    if similarity < min(limits.geometry_correlation, limits.min_correlation):
        # Rejected whatever the colours and silhouettes say: spare their cost.
        return PairVerdict(
            False, "pixels", similarity, math.nan, reason=f"structure differs ({similarity:.2f})"
        )
    residual = target - fitted
    if not (a.lossless and b.lossless):
        residual = chroma_blurred(residual, grid_a.shape[:2], chroma_scale(a, b))
    chroma = _weighted_mean(np.abs(residual @ CB) + np.abs(residual @ CR), weight)
    iou = math.nan
    if a.has_alpha and b.has_alpha:
        mask_a = grid_a[..., 3] > 127.5
        mask_b = grid_b[..., 3] > 127.5
        union = np.count_nonzero(mask_a | mask_b)
        iou = np.count_nonzero(mask_a & mask_b) / union if union else 1.0
    changed = _weighted_mean(np.abs(residual).max(axis=1) > _CHANGED_LEVEL, weight)
    accepted, stage, reason = _decide(similarity, chroma, iou, changed, limits)
    if (
        not accepted
        and not (a.lossless and b.lossless)
        and (a.native is not None or b.native is not None)
    ):
        # A lossy copy of a small image carries colour noise of its own: what a JPEG q50
        # copy of either image leaves is explained by the edit.
        def judge(first: View, second: View) -> PairVerdict:
            return compare_grids(first.grid, second.grid, first, second, options)

        noise = np.maximum(reencoded_noise(a, judge), reencoded_noise(b, judge))
        limits = dataclasses.replace(
            limits,
            max_chroma_difference=max(limits.max_chroma_difference, LOSSY_SLACK * noise[0]),
            max_changed=max(limits.max_changed, LOSSY_SLACK * noise[1]),
        )
        accepted, stage, reason = _decide(similarity, chroma, iou, changed, limits)
    if stage == "open" and graphic:
        # Local features on a flat or transparent graphic match its outline, which
        # look-alike sprites and icons share: the pixel check decides those alone.
        stage, reason = "pixels", "graphic: " + reason
    return PairVerdict(
        accepted,
        stage,
        similarity,
        chroma,
        reason=reason,
        silhouette=iou,
        changed=changed,
        colour=_chroma_difference(rgb_a, rgb_b, saturation=None),
    )


@dataclass(frozen=True)
class _Limits:
    """The pixel check's limits for one pair: graphics take the stricter ones."""

    min_correlation: float
    max_chroma_difference: float
    max_changed: float
    min_silhouette: float
    geometry_correlation: float

    @classmethod
    def of(
        cls, options: VerifyOptions, graphic: bool, changed_factor: float, *, figure: bool = False
    ) -> _Limits:
        """The limits of a pair; ``figure``: a graphic measured on its figure."""
        correlation, chroma, changed = (
            options.min_correlation,
            options.max_chroma_difference,
            options.max_changed,
        )
        if graphic and figure:
            correlation = max(correlation, options.graphic_correlation)
            chroma = options.figure_chroma_difference
            changed = options.figure_changed
        elif graphic:
            correlation = max(correlation, options.graphic_correlation)
            chroma = min(chroma, options.graphic_chroma_difference)
            changed = min(changed, options.graphic_changed)
        return cls(
            correlation,
            chroma,
            changed * changed_factor,
            options.min_silhouette,
            options.geometry_correlation,
        )


def _decide(
    similarity: float, chroma: float, iou: float, changed: float, limits: _Limits
) -> tuple[bool, str, str]:
    """``(accepted, stage, reason)``: stage ``"open"`` leaves the pair to geometry."""
    if iou < limits.min_silhouette:
        return False, "pixels", f"silhouettes differ (IoU {iou:.2f})"
    if chroma > limits.max_chroma_difference:
        return False, "pixels", f"colours differ ({chroma:.1f})"
    if similarity >= limits.min_correlation and changed <= limits.max_changed:
        return True, "pixels", f"structure {similarity:.2f}"
    if similarity >= limits.geometry_correlation:
        return False, "open", "left to geometry"
    return False, "pixels", f"structure differs ({similarity:.2f})"


#: A grey image's mean chroma (Cb and Cr, 0-255 levels) is under this; a colour image
#: it was made from is over :data:`_COLOUR_CHROMA`.
_GREY_CHROMA = 2.0
_COLOUR_CHROMA = 6.0
#: An accepted pair whose aligned grids differ in chroma by more than this (mean of
#: Cb and Cr, before any colour map: :attr:`PairVerdict.colour`) is a recoloured copy;
#: a re-encode or a resize leaves a few levels. These three only name the kind of copy
#: (:func:`leakaudit.copykind.copy_kind`), never decide a link; none is measured in
#: RESULTS.
_RECOLOURED = 8.0


def colour_change(a: View, b: View, verdict: PairVerdict) -> str | bool:
    """Whether ``b`` is a recoloured copy of ``a`` (``verdict``: their pixel check).

    Returns ``"grey"`` when one is grey and the other in colour (judged on their
    whole grids, whatever the alignment), True when the aligned grids' colours
    differ beyond a re-encode (:attr:`PairVerdict.colour`, at least twice what
    is left after the best colour map, :attr:`PairVerdict.chroma`: a toned,
    channel-swapped or saturated copy that the check accepted because a global
    colour map explains it), else False.
    """
    white = np.full(3, 255.0, np.float32)
    saturation = []
    for view in (a, b):
        rgb = flattened(view.grid, white)
        saturation.append(float((np.abs(rgb @ CB) + np.abs(rgb @ CR)).mean()))
    if min(saturation) < _GREY_CHROMA and max(saturation) > _COLOUR_CHROMA:
        return "grey"
    # A global colour map must explain most of it (a misaligned crop differs in chroma
    # too, but no map removes that).
    return bool(verdict.colour > _RECOLOURED and verdict.colour > 2.0 * verdict.chroma)
