"""Pairwise verification: hashes propose candidate pairs, this stage decides each one.

The candidate net (:func:`candidate_pairs`) is wider than a bare threshold: whole-image
hashes at a looser threshold (:data:`CANDIDATE_THRESHOLD`), with dihedral orientation
entries, and the crop and rotation entries of :func:`leakaudit.hashing.hash_sources`
(``DecodeOptions.crop_entries``), which reach cropped and slightly rotated copies. A
candidate links only when verification accepts it, cheapest stage first, and each
accepted pair records the stage and its evidence (:data:`leakaudit.report.EDGE_COLUMNS`):

1. ``bytes``: the two files are byte-identical (BLAKE2b of the bytes);
2. ``pixels``: the two images, decoded again in colour with their alpha, trimmed and
   turned as the hashes saw them, are aligned by the best-matching pair of entries
   (whole, crop or rotation) and compared on a 24 x 24 grid: the structure (zero-mean
   correlation of luma), the colour (mean chroma difference: as it is for a drawn
   image, after the best global colour map for a picture, so a grey, toned or
   channel-scaled copy of a photo passes) and, with transparency, the silhouette (IoU
   of the alpha masks). This is what separates a recoloured icon or a different
   sprite in the same pose from a re-encoded copy: their hashes agree (both are luma
   structure), their colours or silhouettes do not;
3. ``geometry``: pairs the pixel check finds plausible but not conclusive (crops,
   pads, rotations, partial overlaps) go to local-feature matching with RANSAC
   (:mod:`leakaudit.geometry`, OpenCV), when it is installed.

Only accepted pairs enter the union-find, so a chain of near-misses cannot glue
unrelated images into one group. Without the images (precomputed hashes) nothing can
be verified and the plain threshold rule applies.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import itertools
import math
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from PIL import Image, ImageOps

from leakaudit._evidence import COPY_KIND, EDGE_COLUMNS
from leakaudit._text import first_few, printable
from leakaudit._validation import check_bool, check_int, usable_cpu_count
from leakaudit.copykind import copy_kind
from leakaudit.errors import ImageLoadError
from leakaudit.hashing import (
    CROP_BOXES,
    CROP_ROTATIONS,
    CROP_SCALES,
    N_CROP_ENTRIES,
    bytes_digest,
    content_box,
    dihedral_orientations,
    entry_kinds,
    image_digest,
    popcount64,
    triangle_weights,
    turned_view,
    whole_and_crop_hashes,
    whole_hashes,
)
from leakaudit.loading import (
    DecodeOptions,
    check_declared_size,
    check_full_decode,
    read_source,
    resolve_decode,
    rgba_as_hashed,
    trim_allowed,
    trim_box,
)
from leakaudit.search import iter_pairs_within
from leakaudit.search_between import iter_pairs_between

__all__ = [
    "CANDIDATE_THRESHOLD",
    "CROP_CANDIDATE_DHASH_THRESHOLD",
    "CROP_CANDIDATE_THRESHOLD",
    "DISTINCT_MIN_SIDE",
    "DISTINCT_PIXELS",
    "GRAPHIC_SIDE",
    "MIN_SUPPORT",
    "PairVerdict",
    "TableEntries",
    "UnverifiableImageWarning",
    "VerifiedPairs",
    "VerifyOptions",
    "View",
    "candidate_pairs",
    "colour_change",
    "compare_views",
    "distinct_applies",
    "distinct_pixel_count",
    "iter_edge_chunks",
    "kept_together",
    "load_view",
    "supported_pairs",
    "table_candidates",
    "verified_labels",
    "verify_candidates",
]

#: Candidate threshold of the net: a pair of entries (whole, crop or rotation) is a
#: candidate when both its pHash and its dHash lie within this many bits.
CANDIDATE_THRESHOLD = 10
#: The pHash threshold of pairs involving a crop or rotation entry.
CROP_CANDIDATE_THRESHOLD = 8
#: The dHash limit of such a pair (:class:`VerifyOptions`).
CROP_CANDIDATE_DHASH_THRESHOLD = 10
#: A verified pair links only when its two images share at least this share of the
#: smaller of their verified neighbourhoods (:func:`supported_pairs`).
MIN_SUPPORT = 0.6
#: Pixels that must differ strongly at native resolution to keep two images apart
#: (:attr:`VerifyOptions.distinct_pixels`), and the smallest shorter side at which the
#: check is trusted: at 16 px a badge is a few blurred pixels.
DISTINCT_PIXELS = 4
DISTINCT_MIN_SIDE = 24

_VIEW_SIDE = 48  # the colour thumbnail kept per image
#: Images under this many pixels on the shorter side (or with transparency) are
#: graphics: look-alikes (sprites of one pose, icons of one template) are common
#: among them, so they are verified with the stricter limits of VerifyOptions.
GRAPHIC_SIDE = 96
_GRID = 24  # the comparison grid
_GEOMETRY_SIDE = 160  # the grey image kept for local features
_DECODE_SIDE = 96  # decode reduced (JPEG draft) to about this on the short side

# Entry kinds, as hashing.entry_kinds numbers them.
WHOLE, CROP, ROTATION, AS_IS, CONTENT = 0, 1, 2, 3, 4
# Which kinds of entries pair up: turned whole images with each other; the image as it
# is with crops and rotations; crops with rotations (a rotated copy's crop against the
# original's rotation); the content inside a uniform background with another's content
# or whole image (a padded or letterboxed graphic). Never crop with crop or rotation
# with rotation.
_PAIRS = np.zeros((5, 5), dtype=bool)
for _x, _y in (
    (WHOLE, WHOLE),
    (AS_IS, CROP),
    (AS_IS, ROTATION),
    (CROP, ROTATION),
    (CONTENT, CONTENT),
    (CONTENT, AS_IS),
):
    _PAIRS[_x, _y] = _PAIRS[_y, _x] = True


@dataclass(frozen=True)
class VerifyOptions:
    """How candidate pairs are proposed and verified.

    Parameters
    ----------
    candidate_threshold : int, default 10
        Both hashes of a pair of whole-image entries within this many bits make
        a candidate.
    crop_candidate_threshold : int, default 8
        The pHash limit of a pair involving a crop or rotation entry: there are
        30 such entries per image, and the search's cost grows steeply with
        the threshold (20,000 photos: 3.3 s at 8, 11.3 s at 10).
    crop_candidate_dhash_threshold : int, default 10
        The dHash limit of such a pair. A crop's dHash moves more than its
        pHash: at 12, 18 more of 143 15% crops enter the net, but on the
        closure benchmark recall of 15% crops rose only 72.0 -> 76.2% while
        precision fell 92.1 -> 89.7%, and 20,000 unrelated photos made twice
        the candidates (benchmarks/RESULTS.md, section 10).
    link_threshold : int, default 8
        For a pair whose images cannot be decoded again (in-memory items
        without ``images=``, a file gone since it was hashed): both whole-image
        hashes within this many bits link it (stage ``"hash"``), as the bare
        threshold rule would; other such pairs are rejected.
    min_correlation : float, default 0.80
        Structure score (zero-mean correlation of luma on the aligned 24 x 24
        grid) at or above which the pixel check accepts a pair.
    max_chroma_difference : float, default 12.0
        Largest mean chroma difference (Cb and Cr, 0-255 scale) of an accepted
        pair; above it the pair is rejected (another colouring). Measured as it
        is when one image is drawn (a figure on a plain or transparent
        background, or flat regions), else after the best global colour map
        (grey, toned and channel-scaled copies of a photo are copies).
    min_silhouette : float, default 0.75
        Smallest IoU of the two alpha masks when both images have transparency.
    geometry : bool or None, default None
        Run local-feature verification on pairs the pixel check leaves open;
        None runs it when OpenCV is installed.
    geometry_correlation : float, default 0.45
        Pairs scoring between this and ``min_correlation`` are left open (go
        to the geometric stage, or are rejected without it).
    max_changed : float, default 0.045
        Largest share of pixels that still differ after a global gain and
        offset per channel (:func:`_changed_share`): what tells a sprite in
        another pose, or another character in the same pose, from a copy.
    graphic_correlation, graphic_chroma_difference, graphic_changed : float
        The same three limits (0.85, 10.0, 0.03) for pairs where either image
        is a graphic (transparent, or under :data:`GRAPHIC_SIDE` pixels):
        icons of one template and sprites of one pose differ in a few pixels.
        Local features never decide a graphic.
    figure_chroma_difference, figure_changed : float
        The colour and changed-share limits (12.0, 0.075) of a graphic on a
        uniform or transparent background, where both are measured on the
        figure (what differs from the background in either image) rather than
        on the whole canvas: a palette swap or another badge changes a tenth of
        the figure but a few hundredths of the canvas.
    min_support : float, default 0.6
        A verified pair links only when its two images share at least this
        share of the smaller of their verified neighbourhoods
        (:func:`supported_pairs`): copies of one picture verify against one
        another, two look-alikes each with their own copies. 0 links every
        verified pair.
    distinct_pixels : int, default 4
        Two losslessly stored images, one of them a graphic, both at least
        :data:`DISTINCT_MIN_SIDE` pixels on their shorter side and aligned on
        the comparison grid, are told apart when at least this many pixels
        still differ strongly at the smaller one's native resolution
        (:func:`distinct_pixel_count`: a badge, a glyph, a changed eye). Such
        a pair is rejected and its two images are kept in different groups
        however many copies verify against both (:func:`linking_pairs_kept_apart`).
        0 turns the check off.
    tiny_photos : bool, default True
        Run the tiny-photo net (:mod:`leakaudit._registration`): opaque photos
        at most 64 px on their shorter side are paired with their mutual
        nearest layout neighbour in another split and linked when, registered
        (a scale and shift per axis), their luma and fine detail agree (stage
        ``"registered"``). It reaches rescaled, shifted and re-cropped copies
        of 32 px images that no hash threshold does.

    All defaults were chosen on ``benchmarks/bench_closure.py``'s generated
    photos, sprites and icons (``benchmarks/RESULTS.md``, "The verified
    cascade").
    """

    candidate_threshold: int = CANDIDATE_THRESHOLD
    crop_candidate_threshold: int = CROP_CANDIDATE_THRESHOLD
    crop_candidate_dhash_threshold: int = CROP_CANDIDATE_DHASH_THRESHOLD
    link_threshold: int = 8
    min_correlation: float = 0.80
    max_chroma_difference: float = 12.0
    min_silhouette: float = 0.75
    geometry: bool | None = None
    geometry_correlation: float = 0.45
    max_changed: float = 0.045
    graphic_correlation: float = 0.85
    graphic_chroma_difference: float = 10.0
    graphic_changed: float = 0.03
    figure_chroma_difference: float = 12.0
    figure_changed: float = 0.075
    min_support: float = MIN_SUPPORT
    distinct_pixels: int = DISTINCT_PIXELS
    tiny_photos: bool = True

    def __post_init__(self) -> None:
        check_int("candidate_threshold", self.candidate_threshold, 0, 64)
        check_int("crop_candidate_threshold", self.crop_candidate_threshold, 0, 64)
        check_int("crop_candidate_dhash_threshold", self.crop_candidate_dhash_threshold, 0, 64)
        check_int("link_threshold", self.link_threshold, 0, 64)
        check_int("distinct_pixels", self.distinct_pixels, 0)
        for name in ("min_correlation", "geometry_correlation", "min_silhouette"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not -1.0 <= float(value) <= 1.0:
                raise ValueError(f"{name} must be a number in [-1, 1]; got {value!r}.")
        for name in (
            "max_chroma_difference",
            "graphic_chroma_difference",
            "figure_chroma_difference",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= float(value) <= 255:
                raise ValueError(f"{name} must be a number in [0, 255]; got {value!r}.")
        for name in (
            "max_changed",
            "graphic_changed",
            "figure_changed",
            "graphic_correlation",
            "min_support",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"{name} must be a number in [0, 1]; got {value!r}.")
        if self.geometry is not None:
            check_bool("geometry", self.geometry)
        check_bool("tiny_photos", self.tiny_photos)

    def parameters(self) -> dict[str, Any]:
        """The options as report parameters."""
        return {
            "candidate_threshold": self.candidate_threshold,
            "crop_candidate_threshold": self.crop_candidate_threshold,
            "crop_candidate_dhash_threshold": self.crop_candidate_dhash_threshold,
            "min_correlation": self.min_correlation,
            "max_chroma_difference": self.max_chroma_difference,
            "min_silhouette": self.min_silhouette,
            "max_changed": self.max_changed,
            "graphic_correlation": self.graphic_correlation,
            "graphic_chroma_difference": self.graphic_chroma_difference,
            "graphic_changed": self.graphic_changed,
            "figure_chroma_difference": self.figure_chroma_difference,
            "figure_changed": self.figure_changed,
            "min_support": self.min_support,
            "distinct_pixels": self.distinct_pixels,
            "tiny_photos": self.tiny_photos,
        }


# ------------------------------------------------------------------ candidates


def candidate_pairs(
    owner: NDArray[np.int64],
    phash: NDArray[np.uint64],
    dhash: NDArray[np.uint64],
    kinds: NDArray[np.int8],
    linkable: NDArray[np.bool_],
    threshold: int,
    crop_threshold: int | None = None,
    crop_dhash_threshold: int | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Row pairs with a pair of entries within the thresholds on both hashes.

    Entries pair turned whole images with each other (both hashes within
    ``threshold``), and the image as it is with crops and rotations, and crops
    with rotations (a rotated copy's crop against the original's rotation):
    pHash within ``crop_threshold`` and dHash within ``crop_dhash_threshold``
    (both default ``threshold``). Never crop with crop or rotation with
    rotation (they add false candidates and reach nothing the others miss).
    Every search is exact (:func:`leakaudit.search.iter_pairs_within`,
    :func:`leakaudit.search_between.iter_pairs_between`): every such pair of
    entries is found.

    Returns
    -------
    pairs : numpy.ndarray of int64, shape (k, 2)
        Row pairs ``(a, b)``, ``a < b``, each once.
    distance : numpy.ndarray of int64, shape (k,)
        The smallest ``max(pHash, dHash)`` distance of a whole-with-whole entry
        pair of the two rows; -1 when only crop or rotation entries matched.
    """
    crop_threshold = threshold if crop_threshold is None else crop_threshold
    crop_dhash_threshold = threshold if crop_dhash_threshold is None else crop_dhash_threshold
    usable = linkable[owner]

    def of_kinds(*wanted: int) -> NDArray[np.int64]:
        return np.flatnonzero(usable & np.isin(kinds, wanted))

    def within(entries: NDArray[np.int64], t: int) -> Iterator[NDArray[np.int64]]:
        if entries.size >= 2:
            for chunk in iter_pairs_within(phash[entries], t):
                yield entries[chunk]

    def between(
        queries: NDArray[np.int64], index: NDArray[np.int64], t: int
    ) -> Iterator[NDArray[np.int64]]:
        for chunk in iter_pairs_between(phash[queries], phash[index], t):
            yield np.stack([queries[chunk[:, 0]], index[chunk[:, 1]]], axis=1)

    # Crops only ever meet as-is and rotation entries: searching between the sets, not
    # within their union, never makes the crop-with-crop pairs (most of them an image's
    # own crops), about 5x the work at 20k photos.
    searches = itertools.chain(
        within(of_kinds(WHOLE), threshold),
        within(of_kinds(AS_IS, CONTENT), crop_threshold),
        between(of_kinds(AS_IS, ROTATION), of_kinds(CROP), crop_threshold),
        between(of_kinds(AS_IS), of_kinds(ROTATION), crop_threshold),
    )
    found: list[NDArray[np.int64]] = []
    dist: list[NDArray[np.int64]] = []
    for e in searches:
        a, b = e[:, 0], e[:, 1]
        d = popcount64(dhash[a] ^ dhash[b]).astype(np.int64)
        whole = (kinds[a] == WHOLE) & (kinds[b] == WHOLE)
        d_limit = np.where(whole, threshold, crop_dhash_threshold)
        keep = (owner[a] != owner[b]) & (d <= d_limit) & _PAIRS[kinds[a], kinds[b]]
        if not keep.any():
            continue
        a, b, d, whole = a[keep], b[keep], d[keep], whole[keep]
        p = popcount64(phash[a] ^ phash[b]).astype(np.int64)
        lo, hi = np.minimum(owner[a], owner[b]), np.maximum(owner[a], owner[b])
        found.append(np.stack([lo, hi], axis=1))
        dist.append(np.where(whole, np.maximum(p, d), 10_000))
    if not found:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    pairs = np.concatenate(found)
    distance = np.concatenate(dist)
    order = np.lexsort((distance, pairs[:, 1], pairs[:, 0]))
    pairs, distance = pairs[order], distance[order]
    first = np.ones(len(pairs), dtype=bool)
    first[1:] = np.any(pairs[1:] != pairs[:-1], axis=1)
    pairs, distance = pairs[first], distance[first]
    return pairs, np.where(distance >= 10_000, -1, distance)


# ----------------------------------------------------------------------- views


@dataclass
class View:
    """What verification keeps of one image.

    Attributes
    ----------
    rgba : PIL.Image.Image
        The trimmed image as it is (upright), RGBA, 48 x 48.
    grey : numpy.ndarray of uint8
        The trimmed grey image, longer side <= 160, for local features (photos
        only: empty for a graphic).
    entries : numpy.ndarray of uint64, shape (k, 2)
        Its whole, crop and rotation entries, as the hashes index them.
    kinds : numpy.ndarray of int8
        The kind of each entry.
    digest : int
        BLAKE2b-64 of the encoded bytes (of mode, size and pixels for a PIL image).
    has_alpha : bool
        Some pixel is not fully opaque.
    grid : numpy.ndarray of float32, shape (24, 24, 4)
        The whole view on the comparison grid.
    regions : dict
        ``{(CONTENT, 0): grid}``: the content inside a uniform background on the
        comparison grid, when there is such a background.
    full_grid : numpy.ndarray of float32 or None
        The untrimmed image on the comparison grid, when the trim cut
        something (None otherwise): the trim of a small graphic and of its
        copy flattened onto another colour can differ.
    border : numpy.ndarray of float32, shape (3,)
        Median colour of the outermost pixels before trimming: what an opaque
        copy of a transparent image was flattened onto.
    graphic : bool
        Transparent, or under :data:`GRAPHIC_SIDE` pixels on its shorter side:
        icons, sprites and thumbnails, checked more strictly.
    binary_alpha : bool
        Transparent with 1-bit transparency only (every pixel fully opaque or
        fully transparent, as GIF and PNG-8 store it).
    hardened_grids : list of numpy.ndarray of float32
        For soft transparency: the grid again with the alpha made 1-bit at
        :data:`_HARDENING_LEVELS` (a copy saved as GIF turns the anti-aliased
        fringe fully opaque or fully transparent, by the encoder's rule).
    native_side : int
        The trimmed image's shorter side in the file's own pixels (0 unknown).
    native : PIL.Image.Image or None
        The trimmed image at its decoded size when neither side exceeds 48
        pixels (None otherwise): the native check compares small graphics on
        their own pixels, not on the 48 x 48 view resampled back.
    lossless : bool
        The pixels are as the file stores them without loss: PNG, BMP, PPM,
        TGA, an uncompressed or losslessly compressed TIFF, or an image given
        in memory; not JPEG, WebP, GIF or any palette image (quantised). Only
        such images are told apart at native resolution
        (:func:`distinct_pixel_count`).
    native_size : tuple of int
        The trimmed image's (width, height) in the file's own pixels ((0, 0) unknown).
    """

    rgba: Image.Image
    grey: NDArray[np.uint8]
    entries: NDArray[np.uint64]
    kinds: NDArray[np.int8]
    digest: int
    has_alpha: bool
    grid: NDArray[np.float32] = field(default_factory=lambda: np.zeros((0, 0, 4), np.float32))
    graphic: bool = False
    full_grid: NDArray[np.float32] | None = None
    border: NDArray[np.float32] = field(default_factory=lambda: np.full(3, 255.0, np.float32))
    regions: dict[tuple[int, int], NDArray[np.float32]] = field(default_factory=dict)
    binary_alpha: bool = False
    hardened_grids: list[NDArray[np.float32]] = field(default_factory=list)
    native_side: int = 0
    lossless: bool = False
    native: Image.Image | None = None
    native_size: tuple[int, int] = (0, 0)


#: Alpha levels at or above which a soft edge is taken as opaque when the other image of
#: a pair has 1-bit transparency: any coverage (Pillow's GIF writer keeps most of the
#: fringe), and half (the usual threshold of other encoders).
_HARDENING_LEVELS = (1, 128)


def _hardened_grids(region: Image.Image) -> list[NDArray[np.float32]]:
    """The region's comparison grids with its alpha made 1-bit at each hardening level."""
    alpha = np.asarray(region.getchannel("A"))
    grids = []
    for level in _HARDENING_LEVELS:
        hard = region.copy()
        hard.putalpha(Image.fromarray(np.where(alpha >= level, 255, 0).astype(np.uint8)))
        grids.append(_view_and_grid(hard)[1])
    return grids


def _view_and_grid(region: Image.Image) -> tuple[Image.Image, NDArray[np.float32]]:
    """A region's 48 x 48 view and its comparison grid (the one way both are made)."""
    small = region.resize((_VIEW_SIDE, _VIEW_SIDE), Image.Resampling.BOX)
    grid = np.asarray(small.resize((_GRID, _GRID), Image.Resampling.BILINEAR), dtype=np.float32)
    return small, grid


def _flatten(rgba: Image.Image, background: tuple[int, int, int]) -> Image.Image:
    if rgba.getchannel("A").getextrema()[0] == 255:  # opaque: nothing to flatten
        return rgba.convert("L")
    base = Image.new("RGBA", rgba.size, (*background, 255))
    return Image.alpha_composite(base, rgba).convert("L")


def load_view(
    source: Any,
    name: str,
    decode: DecodeOptions | None = None,
    *,
    entries: tuple[NDArray[np.uint64], NDArray[np.int8]] | None = None,
) -> View:
    """Decode one image for verification (colour, alpha, trimmed, canonical orientation).

    Parameters
    ----------
    source : path, bytes or PIL image
    name : str
        The name used in messages.
    decode : DecodeOptions, optional
        The decoding the hashes used.
    entries : tuple, optional
        ``(hashes, kinds)``: the row's entries as the hash table holds them
        (``hashes`` shape (k, 2), pHash and dHash; ``kinds`` as
        :func:`leakaudit.hashing.entry_kinds`), crop and rotation entries
        included. They are used as they are instead of being hashed again, so
        the check aligns on exactly the entries that proposed the pair.

    Raises
    ------
    ImageLoadError
        The image cannot be read.
    """
    options = resolve_decode(decode)
    if isinstance(source, Image.Image):
        image = source
        lossless = _stored_losslessly(image)
        digest = image_digest(image)
    else:
        name, data = read_source(source, name, options)
        digest = bytes_digest(data)
        try:
            with warnings.catch_warnings():
                # Our own limits (checked below) replace Pillow's warning.
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                image = Image.open(io.BytesIO(data))
                declared_size = image.size
                check_declared_size(declared_size, name, options)
                drafted = None
                if image.format == "JPEG":
                    short = min(image.size)
                    scale = max(1, short // _DECODE_SIDE)
                    drafted = image.draft(
                        "RGB", (max(1, image.width // scale), max(1, image.height // scale))
                    )
                if drafted is None:  # decoded at full size
                    check_full_decode(declared_size, name, options)
                image.load()
            lossless = _stored_losslessly(image)
        except ImageLoadError:
            raise
        except Exception as exc:
            raise ImageLoadError(name, f"cannot decode for verification: {exc}") from exc
    original_size = image.size if isinstance(source, Image.Image) else declared_size
    try:
        if options.exif_transpose:
            image = ImageOps.exif_transpose(image)
        rgba = rgba_as_hashed(image)
    except Exception as exc:
        raise ImageLoadError(name, f"cannot decode for verification: {exc}") from exc
    if min(rgba.size) > 2 * _DECODE_SIDE:
        factor = min(rgba.size) / _DECODE_SIDE
        rgba = rgba.resize(
            (max(1, round(rgba.width / factor)), max(1, round(rgba.height / factor))),
            Image.Resampling.BOX,
        )
    grey = np.asarray(_flatten(rgba, options.background), dtype=np.uint8)
    # The hashes' trim (the same rules, so the same box as the hashes saw).
    trim = options.trim_borders and trim_allowed(original_size)
    box = trim_box(grey) if trim else None
    if box is None:
        box = (0.0, 0.0, float(grey.shape[1]), float(grey.shape[0]))
    if entries is not None and np.any(entries[1] == CROP):
        entry_hashes, kinds = np.asarray(entries[0], dtype=np.uint64), entries[1]
    else:
        entry_hashes, kinds = _entries_of(grey, box)
    content = content_box(grey, box)
    region = rgba.crop(tuple(round(v) for v in box))  # type: ignore[arg-type]
    region_alpha = np.asarray(region.getchannel("A"))
    has_alpha = bool(region_alpha.min() < 250)
    binary_alpha = has_alpha and bool(np.all((region_alpha == 0) | (region_alpha == 255)))
    graphic = has_alpha or min(original_size) < GRAPHIC_SIDE
    small, grid = _view_and_grid(region)
    # The trimmed box in the file's own pixels (the decode may have been reduced).
    to_native = min(original_size) / max(1, min(rgba.size))
    native_side = round(min(box[2] - box[0], box[3] - box[1]) * to_native)
    native_size = (round((box[2] - box[0]) * to_native), round((box[3] - box[1]) * to_native))
    # Only photos go on to local features (see _compare_grids): graphics keep no grey image.
    geometry_grey = np.zeros((0, 0), dtype=np.uint8)
    if not graphic:
        grey_image = _flatten(region, options.background)
        if max(grey_image.size) > _GEOMETRY_SIDE:
            grey_image.thumbnail((_GEOMETRY_SIDE, _GEOMETRY_SIDE), Image.Resampling.BOX)
        geometry_grey = np.asarray(grey_image, dtype=np.uint8)
    regions: dict[tuple[int, int], NDArray[np.float32]] = {}
    if content is not None:
        regions[(CONTENT, 0)] = np.asarray(
            rgba.resize((_GRID, _GRID), Image.Resampling.BOX, box=content), dtype=np.float32
        )
    return View(
        regions=regions,
        rgba=small,
        grey=geometry_grey,
        entries=entry_hashes,
        kinds=kinds,
        digest=digest,
        has_alpha=has_alpha,
        grid=grid,
        graphic=graphic,
        binary_alpha=binary_alpha,
        hardened_grids=_hardened_grids(region) if has_alpha and not binary_alpha else [],
        native_side=native_side,
        lossless=lossless,
        native=region if max(region.size) <= _VIEW_SIDE else None,
        native_size=native_size,
        border=_border_colour(np.asarray(rgba, dtype=np.float32)),
        full_grid=(
            None
            if box == (0.0, 0.0, float(grey.shape[1]), float(grey.shape[0]))
            else np.asarray(rgba.resize((_GRID, _GRID), Image.Resampling.BOX), dtype=np.float32)
        ),
    )


#: Formats that store pixels without loss (TIFF only when its compression is lossless).
_LOSSLESS_FORMATS = frozenset({"PNG", "BMP", "PPM", "TGA", "QOI", "TIFF"})
_LOSSY_TIFF_COMPRESSIONS = frozenset({"jpeg", "tiff_jpeg", "webp"})


def _stored_losslessly(image: Image.Image) -> bool:
    """Whether ``image`` (as opened, before any conversion) holds its pixels without loss.

    Palette images count as lossy (a GIF or PNG-8 copy is quantised), and so do JPEG
    and WebP; an image built in memory (no format) is taken as it is given.
    """
    if image.mode in ("P", "PA", "1"):
        return False
    if image.format is None:
        return True
    if image.format == "TIFF":
        return str(image.info.get("compression", "raw")) not in _LOSSY_TIFF_COMPRESSIONS
    return image.format in _LOSSLESS_FORMATS


def _entries_of(
    grey: NDArray[np.uint8], box: tuple[float, float, float, float]
) -> tuple[NDArray[np.uint64], NDArray[np.int8]]:
    """A view's entries hashed from its grey image: canonical whole, as is, content,
    crops, rotations (for images given without the table's entries)."""
    phash, dhash, ac, extra = whole_and_crop_hashes(grey, box)
    code = dihedral_orientations(ac)[0]
    whole = (phash, dhash) if code == 0 else whole_hashes(*turned_view(grey, box, code))[:2]
    kinds = np.array(
        [WHOLE, AS_IS, CONTENT] + [CROP] * N_CROP_ENTRIES + [ROTATION] * len(CROP_ROTATIONS),
        dtype=np.int8,
    )
    return np.array([whole, (phash, dhash), *extra], dtype=np.uint64), kinds


# -------------------------------------------------------------------- the check


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
    side = float(_VIEW_SIDE)
    image = view.rgba
    if kind == CROP:
        left, top, right, bottom = CROP_BOXES[index]
        box = (left * side, top * side, right * side, bottom * side)
    else:
        image = image.rotate(CROP_ROTATIONS[index], Image.Resampling.BILINEAR)
        margin = side * 0.075
        box = (margin, margin, side - margin, side - margin)
    grid = np.asarray(
        image.resize((_GRID, _GRID), Image.Resampling.BILINEAR, box=box), dtype=np.float32
    )
    # Not kept: a view of an image with many candidates would grow by 9 KB per
    # region (30 of them), and resampling a 48 x 48 view again is cheap.
    return grid


#: A crop alignment is searched around its box, in steps of this share of the spacing
#: between the box's neighbouring positions, up to half the spacing each way (a random
#: crop lies at most half a spacing from the nearest box).
_REFINE_STEPS = (-0.5, -0.25, 0.0, 0.25, 0.5)
#: The changed share allowed at a refined crop alignment, as a multiple of the whole
#: image's (unrefined alignments allow 2: a region resampled from the 48 x 48 view is
#: blurrier than the whole view, and a box up to half a spacing off changes more).
_REFINED_CHANGED_FACTOR = 1.0


def _crop_spacing(index: int) -> float:
    """View pixels between neighbouring positions of crop box ``index``'s scale."""
    start = 0
    for keep, positions in CROP_SCALES:
        if index < start + positions * positions:
            return (1.0 - keep) * _VIEW_SIDE / max(1, positions - 1)
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
    rows = np.stack([triangle_weights(_GRID, y, y + height, height_px) for y in ys])
    cols = np.stack([triangle_weights(_GRID, x, x + width, width_px) for x in xs])
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
    luma = (_flattened(pixels, background) @ _LUMA).reshape(pixels.shape[:2])
    lines = rows @ luma  # (positions, 24, 48): each vertical position's rows
    regions = np.matmul(lines[:, None], cols.transpose(0, 2, 1)[None])
    regions = regions.reshape(len(ys) * len(xs), -1)
    regions -= regions.mean(axis=1, keepdims=True)
    regions /= np.maximum(np.linalg.norm(regions, axis=1, keepdims=True), 1e-6)
    wanted = (_flattened(target, background) @ _LUMA).astype(np.float64)
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
            (_GRID, _GRID), Image.Resampling.BILINEAR, box=(x0, y0, x0 + width, y0 + height)
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
    allowed = _PAIRS[a.kinds[:, None], b.kinds[None, :]] & (a.kinds[:, None] != WHOLE)
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


def _aligned_name(kind_a: int, kind_b: int) -> str:
    """The :attr:`PairVerdict.aligned` of an alignment by entries of these kinds."""
    kinds = {kind_a, kind_b}
    for kind, name in ((ROTATION, "rotation"), (CROP, "crop"), (CONTENT, "content")):
        if kind in kinds:
            return name
    return "whole"


def _index_in_kind(kinds: NDArray[np.int8], position: int) -> int:
    return int(np.count_nonzero(kinds[:position] == kinds[position]))


def _turned_grid(grid: NDArray[np.float32], code: int) -> NDArray[np.float32]:
    """A grid turned by a dihedral code (as :func:`leakaudit.hashing.turned_view`)."""
    if code & 1:
        grid = grid.transpose(1, 0, 2)
    if code & 2:
        grid = grid[:, ::-1]
    if code & 4:
        grid = grid[::-1]
    return grid


_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
_CB = np.array([-0.168736, -0.331264, 0.5], dtype=np.float32)
_CR = np.array([0.5, -0.418688, -0.081312], dtype=np.float32)


def _flattened(grid: NDArray[np.float32], background: NDArray[np.float32]) -> NDArray[np.float32]:
    """RGB of a grid flattened onto ``background``, as (pixels, 3)."""
    flat = grid.reshape(-1, 4)
    if flat[:, 3].min() >= 255.0:  # opaque (most photos): the same values, 5x faster
        opaque: NDArray[np.float32] = flat[:, :3].copy()
        return opaque
    alpha = flat[:, 3:4] / 255.0
    rgb: NDArray[np.float32] = flat[:, :3] * alpha + background * (1.0 - alpha)
    return rgb


def _border_colour(grid: NDArray[np.float32]) -> NDArray[np.float32]:
    border = np.concatenate([grid[0, :, :3], grid[-1, :, :3], grid[:, 0, :3], grid[:, -1, :3]])
    colour: NDArray[np.float32] = np.median(border, axis=0).astype(np.float32)
    return colour


#: A pixel has changed when, after the best per-channel gain and offset between
#: the two images (brightness, contrast, a global colour cast), it is still this
#: far off in some channel.
_CHANGED_LEVEL = 48.0


def _changed_share(
    rgb_a: NDArray[np.float32],
    rgb_b: NDArray[np.float32],
    weight: NDArray[np.float32] | None = None,
) -> float:
    """Share of pixels that differ beyond a global gain and offset per channel.

    A re-encode, a resize or a photometric edit changes few pixels this way; a
    sprite in another pose or a different character in the same pose changes its
    limbs, face or clothes: a tenth of the picture or more. With ``weight`` (the
    foreground, :func:`_foreground_weight`) the share is of the weighted pixels.
    """
    x = rgb_a - rgb_a.mean(axis=0)
    y = rgb_b - rgb_b.mean(axis=0)
    changed = np.abs(y - _channel_gain(x, y) * x).max(axis=1) > _CHANGED_LEVEL
    if weight is None:
        return float(np.mean(changed))
    return float((changed * weight).sum() / weight.sum())


def _channel_gain(x: NDArray[np.float32], y: NDArray[np.float32]) -> NDArray[np.float32]:
    """Per channel, the gain (0.5-2) that best maps the zero-mean pixels ``x`` onto ``y``
    (least squares; 1 for a flat channel)."""
    variance = (x * x).mean(axis=0)
    gain = np.where(variance > 1.0, (x * y).mean(axis=0) / np.maximum(variance, 1.0), 1.0)
    clipped: NDArray[np.float32] = np.clip(gain, 0.5, 2.0)
    return clipped


#: A pixel is foreground when it is this far from the pair's background colour
#: in some channel (transparent pixels are flattened onto that colour).
_FOREGROUND_LEVEL = 24.0
#: The foreground counts as at least this share of the grid: a tiny foreground
#: would make a few pixels of JPEG noise look like a large change.
_MIN_FOREGROUND = 0.4
#: The saturation gains allowed before comparing colours: a photo's saturation
#: edit (up to 2x), and the figure of a graphic on a background (up to 1.3x: its
#: brightness and contrast edits scale its chroma a little; a palette swap turns it).
_PHOTO_SATURATION = 2.0
_FIGURE_SATURATION = 1.3


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
    chroma_a = np.stack([rgb_a @ _CB, rgb_a @ _CR], axis=1)
    chroma_b = np.stack([rgb_b @ _CB, rgb_b @ _CR], axis=1)
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


#: A grid pixel is flat when its luma differs from each of its 4 neighbours' by less
#: than this (0-255), and an image is drawn when at least this share of its whole grid
#: (opaque pixels flattened onto white) is flat. Luma, so that a grey copy is as flat as
#: its original. Measured on opaque graphics' grids: 1,200 CIFAR-10 train photos
#: (airplane, automobile, cat) 0.01 (median), 0.24 (95th percentile), 0.44 (99th);
#: bench_closure's icons and their copies 0.54 (median), 0.23 (10th percentile); its
#: sprites and copies 0.54 (median), 0.41 (5th percentile); its 32 px photos 0.02
#: (median), 0.31 (99th).
_FLAT_LEVEL = 2.0
_DRAWN_SHARE = 0.4


def _flat_share(grid: NDArray[np.float32]) -> float:
    """Share of a grid's pixels whose luma matches all their neighbours' (:data:`_FLAT_LEVEL`)."""
    luma = (_flattened(grid, np.full(3, 255.0, np.float32)) @ _LUMA).reshape(grid.shape[:2])
    across = np.abs(np.diff(luma, axis=1)) < _FLAT_LEVEL
    down = np.abs(np.diff(luma, axis=0)) < _FLAT_LEVEL
    flat = np.ones(luma.shape, dtype=bool)
    flat[:, :-1] &= across
    flat[:, 1:] &= across
    flat[:-1] &= down
    flat[1:] &= down
    return float(flat.mean())


def _drawn(a: View, b: View, weight: NDArray[np.float32] | None) -> bool:
    """Whether a pair is judged on its colours as they are: one image is drawn.

    A drawn image is a figure on a transparent or plain background (``weight``,
    :func:`_foreground_weight`, or a uniform border that was trimmed) or a picture
    made of flat regions (:data:`_DRAWN_SHARE`, on the whole image, whatever the
    alignment), at any size. Look-alike drawings differ by palette alone (icons of
    one template recoloured, sprites in another palette), and a colour map between a
    few flat colours explains any palette swap, so there colour is compared as it is
    (:func:`_chroma_difference`). A low-detail photo (a blurred object on a flat
    ground) counts as drawn too: its structure says little, so its colour keeps its
    say.
    """
    if weight is not None or a.has_alpha or b.has_alpha:
        return True
    if a.full_grid is not None or b.full_grid is not None:
        return True
    return _flat(a, b)


def _flat(a: View, b: View) -> bool:
    """Whether one image of a pair is made of flat regions (:data:`_DRAWN_SHARE`)."""
    return max(_flat_share(a.grid), _flat_share(b.grid)) >= _DRAWN_SHARE


#: A lossy image at least this large on its shorter side is a photo, however flat its
#: grid (a rocket on a plain sky, the moon on black): measured with ``bench_quality.py
#: --failures`` on crops of real photographs, 400 x 300 JPEG, whose grey, sepia and
#: channel-gain copies were vetoed by colour as drawn (21 of 24 sepia copies found). The
#: closure's drawn images (icons, sprites) are at most 128 px or stored losslessly.
_LOSSY_PHOTO_SIDE = 256


def _recoloured_photo(
    a: View, b: View, rgb_a: NDArray[np.float32], rgb_b: NDArray[np.float32], limit: float
) -> float | None:
    """The colour residual of a recoloured copy of a flat photo, or None.

    Two large lossy photos drawn only by their flatness (a plain sky, a black ground)
    whose colours differ beyond ``limit`` but by a global colour edit: a grey, toned or
    channel-scaled copy of one picture when their fine detail agrees
    (:func:`_fine_detail_agreement`); tiles of one smooth picture, or two smooth
    pictures, hold no detail that agrees, and keep colour's veto.
    """
    if a.lossless or b.lossless or min(a.native_side, b.native_side) < _LOSSY_PHOTO_SIDE:
        return None
    residual = _recolour_difference(rgb_a, rgb_b)
    if residual > limit:
        return None
    detail = _fine_detail_agreement(a, b, 0)
    if detail is None or detail < _MIN_DETAIL_COVERAGE:
        return None
    return residual


def _recolour_difference(rgb_a: NDArray[np.float32], rgb_b: NDArray[np.float32]) -> float:
    """Mean chroma difference (Cb and Cr) left after the best global colour map.

    The decision rule for pictures: structure decides; colour vetoes only what no
    global colour edit explains. A grey, toned (sepia), channel-scaled, saturated or
    white-balanced copy is an affine map of the original's RGB (a grey original maps
    onto its colour copy's luma the other way round), so the map is fitted (least
    squares, 3 x 3 and an offset) both ways and the smaller residual counts. Two
    different pictures, or one misaligned on another (a crop of other content), leave
    chroma no global map explains.
    """
    residuals = []
    ones = np.ones((rgb_a.shape[0], 1), dtype=np.float32)
    for x, y in ((rgb_a, rgb_b), (rgb_b, rgb_a)):
        design = np.concatenate([x, ones], axis=1)
        coef = np.linalg.lstsq(design, y, rcond=None)[0]
        rest = y - design @ coef
        residuals.append(float((np.abs(rest @ _CB) + np.abs(rest @ _CR)).mean()))
    return min(residuals)


def _luma_column(rgb: NDArray[np.float32]) -> NDArray[np.float32]:
    """Luma as a one-channel (pixels, 1) array, for :func:`_changed_share`."""
    luma: NDArray[np.float32] = (rgb @ _LUMA)[:, None]
    return luma


def _correlation(x: NDArray[np.float32], y: NDArray[np.float32]) -> float:
    x = x - x.mean()
    y = y - y.mean()
    norm = math.sqrt(float((x * x).sum()) * float((y * y).sum()))
    if norm < 1e-6:
        # Both flat: alike when their levels are.
        return 1.0 if abs(float(x.mean() - y.mean())) < 8 else 0.0
    return float((x * y).sum() / norm)


def compare_views(a: View, b: View, options: VerifyOptions | None = None) -> PairVerdict:
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
    best = _whole_verdict(a.grid, b.grid, a, b, options)
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
            verdict = _whole_verdict(grid_a, grid_b, a, b, options)
            if _rank(verdict) > _rank(best):
                best = verdict
                if best.accepted:
                    return best
    if a.binary_alpha != b.binary_alpha and (a.hardened_grids or b.hardened_grids):
        # One has 1-bit transparency (a GIF copy): its fringe went opaque or transparent
        # by the encoder's rule, so the other's soft edge is made 1-bit alike.
        for hard in a.hardened_grids or b.hardened_grids:
            grid_a, grid_b = (hard, b.grid) if a.hardened_grids else (a.grid, hard)
            verdict = _whole_verdict(grid_a, grid_b, a, b, options)
            if _rank(verdict) > _rank(best):
                best = verdict
                if best.accepted:
                    return best
    for kind_a, index_a, kind_b, index_b in _alignments(a, b):
        grid_a, grid_b = _region(a, kind_a, index_a), _region(b, kind_b, index_b)
        # A region resampled from the 48 x 48 view is blurrier than the whole view:
        # twice the changed share is allowed there, unless the crop was refined.
        factor = 2.0
        if kind_a == CROP and kind_b in (AS_IS, WHOLE):
            grid_a = _refined_crop(a, index_a, grid_b, grid_a, _pair_background(a, b))
            factor = _REFINED_CHANGED_FACTOR
        elif kind_b == CROP and kind_a in (AS_IS, WHOLE):
            grid_b = _refined_crop(b, index_b, grid_a, grid_b, _pair_background(a, b))
            factor = _REFINED_CHANGED_FACTOR
        verdict = _compare_grids(grid_a, grid_b, a, b, options, changed_factor=factor)
        verdict = dataclasses.replace(verdict, aligned=_aligned_name(kind_a, kind_b))
        rotated = None
        if ROTATION in (kind_a, kind_b):
            side = 0 if kind_a == ROTATION else 1
            rotated = (side, CROP_ROTATIONS[index_a if side == 0 else index_b])
        verdict = _with_detail(verdict, a, b, rotated)
        if _rank(verdict) > _rank(best):
            best = verdict
            if best.accepted:
                break
    return best


def _whole_verdict(
    grid_a: NDArray[np.float32],
    grid_b: NDArray[np.float32],
    a: View,
    b: View,
    options: VerifyOptions,
) -> PairVerdict:
    """Two whole grids compared in the turn (of 8) whose luma correlates best."""
    background = _pair_background(a, b)
    rgb_b = _flattened(grid_b, background)
    luma_b = (rgb_b @ _LUMA).reshape(grid_b.shape[:2])
    # The 8 turns of b's luma, zero-mean and unit-norm, against a's in one product.
    turns = np.stack([_turned_grid(luma_b[..., None], code)[..., 0].ravel() for code in range(8)])
    turns = turns - turns.mean(axis=1, keepdims=True)
    turns /= np.maximum(np.linalg.norm(turns, axis=1, keepdims=True), 1e-6)
    rgb_a = _flattened(grid_a, background)
    luma_a = rgb_a @ _LUMA
    code = int(np.argmax(turns @ (luma_a - luma_a.mean())))
    turned_rgb_b = _turned_grid(rgb_b.reshape(*grid_b.shape[:2], 3), code).reshape(-1, 3)
    turned = _turned_grid(grid_b, code)
    verdict = _compare_grids(grid_a, turned, a, b, options, rgb=(rgb_a, turned_rgb_b))
    verdict = dataclasses.replace(verdict, turn=code)
    # A turn aligns the coarse layout of look-alikes (the quadrants of a symmetric
    # picture). A whole match after trimming a padding is not a partial one: a padded
    # copy of a smooth photo is a copy (with the rule, padded JPEG copies of low-texture
    # pictures failed at Pillow 10.4 by a block or two).
    return _with_detail(verdict, a, b) if code != 0 else verdict


#: The smallest side at which two grey images of a partial or turned match are
#: compared for their fine detail (:func:`_fine_detail_agreement`): finer than the
#: 24 x 24 grid, where a large photo's detail (texture, grain) is still there.
_DETAIL_SIDE = 64


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
    resized to the smaller one's shorter side (at least :data:`_DETAIL_SIDE`),
    registered both ways (a scale and shift per axis absorb a crop or a pad), and the
    better direction's share of agreeing blocks (:func:`_detail_coverage`) is
    returned. Graphics keep no grey image (their native check is
    :func:`distinct_pixel_count`); photos under :data:`_DETAIL_SIDE` pixels have no
    detail finer than the grid.
    """
    if a.grey.size == 0 or b.grey.size == 0 or min(*a.grey.shape, *b.grey.shape) < _DETAIL_SIDE:
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
    return max(_detail_coverage(pair[0], pair[1]), _detail_coverage(pair[1], pair[0]))


#: The fine-detail rule's blocks: the registered overlap is cut into this many blocks per
#: side, and the pair's evidence is the share of them whose own fine detail agrees
#: (correlation at least :data:`leakaudit._registration.MIN_DETAIL`).
_DETAIL_BLOCKS = 4
#: Least share of agreeing blocks for a partial or turned match of two photos.
#: Measured with ``bench_quality.py --failures`` (retina-like discs, smooth tiles, real
#: copies of both) and bench_closure ``--quick`` (crops, rotations, pads, turns of real
#: photo crops): the quadrants of a noisy disc agree only along their one edge (at most
#: 4-6 of 16 blocks), real copies of detailed photos in most blocks.
#: A block holds detail when its fine detail's standard deviation is at least this (grey
#: levels) in both images: JPEG's ripple on a flat or smooth area stays under it.
_DETAIL_LEVEL = 1.0
_MIN_DETAIL_COVERAGE = 0.5


def _detail_coverage(first: NDArray[np.float32], second: NDArray[np.float32]) -> float:
    """The share of the registered overlap's blocks in which fine detail agrees.

    ``second`` is registered onto ``first`` (:func:`leakaudit._registration.register_pairs`);
    the overlap is cut into :data:`_DETAIL_BLOCKS` squared blocks and each block that
    lies mostly inside it counts once: agreeing when its fine detail (luma minus a blur)
    correlates at least ``MIN_DETAIL``. A block with no detail in either image (flat
    black, a smooth gradient) does not agree: one shared edge, or the layout of a smooth
    picture, is not evidence of a copy; detail that agrees across the picture is.
    """
    from leakaudit._registration import MIN_DETAIL, fine_detail, registered_overlap

    side = first.shape[0]
    aligned, mask = registered_overlap(first, second)
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
            total += 1
            x, y = detail_a[cell][inside], detail_b[cell][inside]
            x, y = x - x.mean(), y - y.mean()
            energy = min(float(x @ x), float(y @ y)) / x.size
            norm = math.sqrt(float(x @ x) * float(y @ y))
            agree += energy >= _DETAIL_LEVEL**2 and float(x @ y) / norm >= MIN_DETAIL
    return agree / total if total else 0.0


def _with_detail(
    verdict: PairVerdict, a: View, b: View, rotated: tuple[int, float] | None = None
) -> PairVerdict:
    """An accepted partial or turned verdict, rejected when its fine detail disagrees
    (:func:`_fine_detail_agreement`, :data:`leakaudit._registration.MIN_DETAIL`)."""
    if not verdict.accepted:
        return verdict
    detail = _fine_detail_agreement(a, b, verdict.turn, rotated)
    if detail is None:
        return verdict
    if detail >= _MIN_DETAIL_COVERAGE:
        return dataclasses.replace(verdict, detail=detail)
    return dataclasses.replace(
        verdict,
        accepted=False,
        stage="pixels",
        detail=detail,
        reason=f"coarse layout only: fine detail differs ({detail:.2f})",
    )


def _pair_background(a: View, b: View) -> NDArray[np.float32]:
    """The colour transparent pixels are flattened onto for this pair.

    An opaque copy of a transparent image was flattened onto some colour by the
    tool that saved it: its border tells which, so both are compared on it.
    """
    if a.has_alpha and not b.has_alpha:
        return b.border
    if b.has_alpha and not a.has_alpha:
        return a.border
    return np.array([255.0, 255.0, 255.0], dtype=np.float32)


def _rank(verdict: PairVerdict) -> tuple[int, float]:
    order = 2 if verdict.accepted else 1 if verdict.stage == "open" else 0
    return order, verdict.similarity


def _compare_grids(
    grid_a: NDArray[np.float32],
    grid_b: NDArray[np.float32],
    a: View,
    b: View,
    options: VerifyOptions,
    *,
    changed_factor: float = 1.0,
    rgb: tuple[NDArray[np.float32], NDArray[np.float32]] | None = None,
) -> PairVerdict:
    """The pixel check of two aligned grids (``rgb``: the same grids already flattened)."""
    if rgb is None:
        background = _pair_background(a, b)
        rgb = _flattened(grid_a, background), _flattened(grid_b, background)
    rgb_a, rgb_b = rgb
    similarity = _correlation(rgb_a @ _LUMA, rgb_b @ _LUMA)
    graphic = a.graphic or b.graphic
    weight = _foreground_weight(rgb_a, rgb_b, _pair_background(a, b)) if graphic else None
    limits = _Limits.of(options, graphic, changed_factor, figure=weight is not None)
    if similarity < min(limits.geometry_correlation, limits.min_correlation):
        # Rejected whatever the colours and silhouettes say: spare their cost.
        return PairVerdict(
            False, "pixels", similarity, math.nan, reason=f"structure differs ({similarity:.2f})"
        )
    if not graphic:
        saturation: float | None = _PHOTO_SATURATION
    elif weight is not None:
        saturation = _FIGURE_SATURATION
    else:
        # A flat graphic's palette can differ from another's by saturation alone.
        saturation = None
    drawn = _drawn(a, b, weight)
    if drawn:
        chroma = _chroma_difference(rgb_a, rgb_b, saturation=saturation, weight=weight)
        if (
            chroma > limits.max_chroma_difference
            and weight is None
            and not (a.has_alpha or b.has_alpha)
            and a.full_grid is None
            and b.full_grid is None
        ):
            residual = _recoloured_photo(a, b, rgb_a, rgb_b, limits.max_chroma_difference)
            if residual is not None:
                chroma, drawn = residual, False
    else:
        # A picture: colour vetoes only what no global colour edit explains.
        chroma = _recolour_difference(rgb_a, rgb_b)
    iou = math.nan
    if a.has_alpha and b.has_alpha:
        mask_a = grid_a[..., 3] > 127.5
        mask_b = grid_b[..., 3] > 127.5
        union = np.count_nonzero(mask_a | mask_b)
        iou = np.count_nonzero(mask_a & mask_b) / union if union else 1.0
    changed = math.nan  # not needed where silhouettes or colours already reject
    if not (iou < limits.min_silhouette or chroma > limits.max_chroma_difference):
        # A picture's changed pixels are counted on luma: a grey copy's channels are
        # not a gain and offset of the original's.
        changed = (
            _changed_share(rgb_a, rgb_b, weight)
            if drawn
            else _changed_share(_luma_column(rgb_a), _luma_column(rgb_b), weight)
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


#: The native-resolution check (:func:`distinct_pixel_count`): the pair must align on
#: the comparison grid at least this well (luma correlation), a pixel differs strongly
#: when it is this far off in some channel from every pixel of the other image's 3 x 3
#: neighbourhood (after a gain and offset per channel), and pixels that are background
#: in both images are left out.
_DISTINCT_ALIGNED = 0.97
_DISTINCT_LEVEL = 96.0
_DISTINCT_BACKGROUND = 24.0
_DISTINCT_MARGIN = 0.1


def distinct_applies(a: View, b: View, verdict: PairVerdict) -> bool:
    """Whether the pixel check's verdict on ``(a, b)`` can be followed by
    :func:`distinct_pixel_count`: the pixel check decided (no geometry), with a
    structure of at least 0.9, one image is a graphic, both are stored losslessly
    (a JPEG's ringing or a GIF's palette would look like a change) and both are at
    least :data:`DISTINCT_MIN_SIDE` pixels on their shorter side."""
    return (
        verdict.stage == "pixels"
        and verdict.similarity >= 0.9
        and (a.graphic or b.graphic)
        and a.lossless
        and b.lossless
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
    background = _pair_background(a, b)
    grid_a = _flattened(a.grid, background)
    grid_b = _flattened(np.ascontiguousarray(_turned_grid(b.grid, turn)), background)
    if _correlation(grid_a @ _LUMA, grid_b @ _LUMA) < _DISTINCT_ALIGNED:
        return 0
    side = max(1, min(a.native_side, b.native_side, _VIEW_SIDE))
    native_a, native_b = _native_rgba(a, side), _native_rgba(b, side)
    first = _flattened(native_a, background).reshape(side, side, 3)
    second = _flattened(native_b, background).reshape(side, side, 3)
    own_a = background if a.has_alpha else a.border
    own_b = background if b.has_alpha else b.border
    # The outer tenth on each side is left out: copies differ there (a rotation's fill,
    # a re-crop, transparent corners flattened onto a colour); a badge sits inside.
    margin = round(_DISTINCT_MARGIN * side)
    inside = np.zeros((side, side), dtype=bool)
    inside[margin : side - margin, margin : side - margin] = True
    off_a = inside & (np.abs(first - own_a).max(axis=2) >= _DISTINCT_BACKGROUND)
    # One transparent, one opaque: the opaque one may be the other flattened onto any
    # colour, so what is transparent in the one says nothing.
    seen = None
    if a.has_alpha != b.has_alpha:
        seen = (native_a if a.has_alpha else native_b)[..., 3]
    counts = []
    # The grid's own turn first: when it already finds few, the others need not run.
    for code in [turn, *(c for c in range(8) if c != turn)]:
        turned = np.ascontiguousarray(_turned_grid(second, code))
        use = off_a | (inside & (np.abs(turned - own_b).max(axis=2) >= _DISTINCT_BACKGROUND))
        if seen is not None:
            opaque = seen if a.has_alpha else _turned_grid(seen[..., None], code)[..., 0]
            use &= opaque >= 128
        counts.append(_strong_differences(first, turned, use))
        if counts[-1] < stop_below:
            break
    return min(counts)


def _native_rgba(view: View, side: int) -> NDArray[np.float32]:
    """A view at ``side`` x ``side``, RGBA, shape (side, side, 4): from the image's own
    pixels when it is small (exactly them at its own size)."""
    image = view.native if view.native is not None else view.rgba
    if image.size != (side, side):
        image = image.resize((side, side), Image.Resampling.BOX)
    rgba: NDArray[np.float32] = np.asarray(image, dtype=np.float32)
    return rgba


def _strong_differences(
    first: NDArray[np.float32], second: NDArray[np.float32], use: NDArray[np.bool_]
) -> int:
    """Pixels of ``use`` more than :data:`_DISTINCT_LEVEL` off the other image's 3 x 3
    neighbourhood (either way) after a gain and offset per channel."""
    if np.count_nonzero(use) < 16:
        use = np.ones_like(use)
    x, y = first[use], second[use]
    x_mean, y_mean = x.mean(axis=0), y.mean(axis=0)
    matched = (second - y_mean) * _channel_gain(y - y_mean, x - x_mean) + x_mean
    off = np.maximum(_off_every_neighbour(first, matched), _off_every_neighbour(matched, first))
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


# ------------------------------------------------------------------ the stage


@dataclass(frozen=True)
class VerifiedPairs:
    """The outcome of verifying every candidate.

    Attributes
    ----------
    edges : pandas.DataFrame
        The accepted pairs, columns :data:`leakaudit.report.EDGE_COLUMNS`.
    n_candidates, n_rejected, n_unverified : int
        Candidates, rejected ones, and ones that could not be verified (an
        image that cannot be decoded again: the hashes alone decided those).
    stages : list of str
        The stages that ran.
    geometry : str
        The geometric backend that ran, or why it did not.
    n_unsupported : int
        Pairs the checks accepted that do not link: their images' verified
        neighbourhoods disagree (:func:`supported_pairs`). Not in ``edges``.
    distinct : numpy.ndarray of int64, shape (m, 2)
        Row pairs seen to differ at native resolution
        (:func:`distinct_pixel_count`): rejected, and kept in different groups.
    distinct_passed : numpy.ndarray of bool, shape (m,)
        Which of them the pixel check on the grid had accepted: they still count
        in their images' neighbourhoods for :func:`supported_pairs` (two
        look-alikes that match each other on the grid share their copies).
    n_kept_apart : int
        Verified pairs that do not link because linking them would put a
        ``distinct`` pair into one group (:func:`linking_pairs_kept_apart`). Not
        in ``edges``.
    """

    edges: pd.DataFrame
    n_candidates: int
    n_rejected: int
    n_unverified: int
    stages: list[str]
    geometry: str
    n_unsupported: int = 0
    distinct: NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    distinct_passed: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, bool))
    n_kept_apart: int = 0

    def parameters(self) -> dict[str, Any]:
        """Counts for the report's ``parameters["verification"]``."""
        return {
            "candidates": self.n_candidates,
            "verified": len(self.edges),
            "rejected": self.n_rejected,
            "unsupported": self.n_unsupported,
            "distinct": len(self.distinct),
            "kept_apart": self.n_kept_apart,
            "unverifiable": self.n_unverified,
            "geometry": self.geometry,
        }


def _geometry_choice(options: VerifyOptions) -> tuple[bool, str]:
    try:
        from leakaudit import geometry
    except ImportError:  # pragma: no cover - the module ships with the package
        return False, "unavailable"
    available = geometry.geometry_available()
    if options.geometry is False:
        return False, "off (geometry=False)"
    if not available:
        if options.geometry:
            raise ImportError(
                "geometry=True needs OpenCV: pip install 'leakaudit-vision[verify]' "
                "(or any opencv-python >= 4.5)."
            )
        return False, "not installed (pip install 'leakaudit-vision[verify]')"
    return True, geometry.geometry_backend()


class UnverifiableImageWarning(UserWarning):
    """Images that could not be decoded again: their pairs were decided by hashes alone."""


def _views(
    sources: Sequence[Any],
    names: Sequence[str],
    rows: NDArray[np.int64],
    decode: DecodeOptions,
    workers: int,
    entries: TableEntries | None = None,
) -> dict[int, View | None]:
    """Each row's view; None where there is no source or it cannot be decoded again.

    Rows whose source cannot be decoded (gone, changed or unreadable since it
    was hashed) are named in one :class:`UnverifiableImageWarning`.
    """
    failures: dict[int, str] = {}

    def load(row: int) -> View | None:
        if sources[row] is None:
            return None
        try:
            return load_view(
                sources[row],
                names[row],
                decode,
                entries=None if entries is None else entries.of(row),
            )
        except ImageLoadError as exc:
            failures[row] = exc.reason
        except (OSError, ValueError, MemoryError) as exc:
            failures[row] = str(exc) or type(exc).__name__
        return None

    row_list = rows.tolist()
    if workers <= 1 or len(row_list) < 64:
        views = {row: load(row) for row in row_list}
    else:
        # Pillow decodes and resizes without the GIL: threads share the work.
        with ThreadPoolExecutor(max_workers=workers) as pool:
            views = dict(zip(row_list, pool.map(load, row_list, chunksize=16), strict=True))
    if failures:
        named = (f"{printable(names[row])} ({reason})" for row, reason in sorted(failures.items()))
        warnings.warn(
            f"{len(failures)} image(s) could not be decoded again for verification; their "
            "candidate pairs were decided by their hashes alone (stage 'hash' in "
            f"report.edges): {first_few(named, len(failures))}.",
            UnverifiableImageWarning,
            stacklevel=4,
        )
    return views


@dataclass(frozen=True)
class TableEntries:
    """A hash table's entries, by row: what proposed each candidate pair.

    Attributes
    ----------
    owner : numpy.ndarray of int64
        The row of each entry, ascending (a row's entries are contiguous).
    phash, dhash : numpy.ndarray of uint64
    kinds : numpy.ndarray of int8
        As :func:`leakaudit.hashing.entry_kinds`.
    """

    owner: NDArray[np.int64]
    phash: NDArray[np.uint64]
    dhash: NDArray[np.uint64]
    kinds: NDArray[np.int8]

    def of(self, row: int) -> tuple[NDArray[np.uint64], NDArray[np.int8]]:
        """``(hashes, kinds)`` of one row's entries (hashes shape (k, 2))."""
        start, stop = np.searchsorted(self.owner, [row, row + 1])
        hashes = np.stack([self.phash[start:stop], self.dhash[start:stop]], axis=1)
        return hashes, self.kinds[start:stop]


def verify_candidates(
    pairs: NDArray[np.int64],
    distance: NDArray[np.int64],
    sources: Sequence[Any],
    names: Sequence[str],
    *,
    decode: DecodeOptions | None = None,
    options: VerifyOptions | None = None,
    workers: int | None = None,
    entries: TableEntries | None = None,
) -> VerifiedPairs:
    """Verify candidate pairs of rows; return the accepted ones as edges.

    Parameters
    ----------
    pairs : numpy.ndarray of int64, shape (k, 2)
        Candidate row pairs (from :func:`candidate_pairs`).
    distance : numpy.ndarray of int64, shape (k,)
        Their whole-image hash distance (-1 unknown), kept on the edges.
    sources : sequence
        The images (paths, bytes or PIL images), one per row.
    names : sequence of str
        The names used in messages.
    decode : DecodeOptions, optional
        The decoding the hashes used (trim, EXIF, background).
    options : VerifyOptions, optional
    workers : int, optional
        Threads decoding the images again; default the usable cores.
    entries : TableEntries, optional
        The hash table's entries: used instead of hashing each image again.
    """
    options = options or VerifyOptions()
    decode = resolve_decode(decode)
    use_geometry, backend = _geometry_choice(options)
    if workers is None:
        workers = usable_cpu_count()
    n_workers = max(1, int(workers))
    rows = np.unique(pairs.ravel()) if len(pairs) else np.zeros(0, dtype=np.int64)
    views = _views(sources, names, rows, decode, n_workers, entries)

    features: dict[tuple[int, int], Any] = {}
    accepted: list[tuple[int, int, str, int, float, int, float, str]] = []
    distinct: list[tuple[int, int]] = []
    distinct_passed: list[bool] = []
    rejected = unverified = 0
    ran = {"bytes", "pixels"}
    for (a, b), d in zip(pairs.tolist(), distance.tolist(), strict=True):
        view_a, view_b = views.get(a), views.get(b)
        if view_a is None or view_b is None:
            # The images cannot be seen again (an in-memory item, a file gone or
            # unreadable since it was hashed): the hashes alone decide, at the
            # linking threshold, as without verification.
            unverified += 1
            if 0 <= d <= options.link_threshold:
                ran.add("hash")
                kind = copy_kind("hash", distance=d)
                accepted.append((a, b, "hash", d, math.nan, -1, 1.0 - d / 64.0, kind))
            else:
                rejected += 1
            continue
        verdict = compare_views(view_a, view_b, options)
        if options.distinct_pixels and distinct_applies(view_a, view_b, verdict):
            count = distinct_pixel_count(view_a, view_b, verdict.turn, options.distinct_pixels)
            if count >= options.distinct_pixels:
                ran.add("native")
                distinct.append((a, b))
                distinct_passed.append(verdict.accepted)
                verdict = dataclasses.replace(
                    verdict, accepted=False, reason=f"differs at native resolution ({count} px)"
                )
        if verdict.stage == "open" and use_geometry:
            from leakaudit import geometry

            ran.add("geometry")
            for key, grey in (((a, 0), view_a.grey), ((b, verdict.turn), view_b.grey)):
                if key not in features:
                    turned_grey, _ = turned_view(grey, None, key[1])
                    features[key] = geometry.extract_features(np.ascontiguousarray(turned_grey))
            match = geometry.match_features(features[(a, 0)], features[(b, verdict.turn)])
            verdict = PairVerdict(
                match.accepted,
                "geometry",
                verdict.similarity,
                verdict.chroma,
                match.inliers,
                match.reason,
                turn=verdict.turn,
                aligned=verdict.aligned,
                colour=verdict.colour,
            )
        if verdict.accepted:
            kind = copy_kind(
                verdict.stage,
                turn=verdict.turn,
                aligned=verdict.aligned,
                size_a=view_a.native_size,
                size_b=view_b.native_size,
                recoloured=colour_change(view_a, view_b, verdict),
                padded=(view_a.full_grid is None) != (view_b.full_grid is None),
                distance=d,
            )
            accepted.append(
                (
                    a,
                    b,
                    verdict.stage,
                    d,
                    verdict.similarity,
                    verdict.inliers,
                    verdict.strength,
                    kind,
                )
            )
        else:
            rejected += 1
    edges = pd.DataFrame(accepted, columns=[*EDGE_COLUMNS, COPY_KIND])
    edges = edges.astype({"row_a": np.int64, "row_b": np.int64, "strength": float})
    edges["distance"] = edges["distance"].where(edges["distance"] >= 0).astype("Int64")
    edges["inliers"] = edges["inliers"].where(edges["inliers"] >= 0).astype("Int64")
    edges["similarity"] = edges["similarity"].astype(float)
    stages: list[str] = [s for s in ("bytes", "pixels", "native", "geometry", "hash") if s in ran]
    return VerifiedPairs(
        edges,
        len(pairs),
        rejected,
        unverified,
        stages,
        backend,
        distinct=np.array(distinct, dtype=np.int64).reshape(-1, 2),
        distinct_passed=np.array(distinct_passed, dtype=bool),
    )


#: A grey image's mean chroma (Cb and Cr, 0-255 levels) is under this; a colour image
#: it was made from is over :data:`_COLOUR_CHROMA`.
_GREY_CHROMA = 2.0
_COLOUR_CHROMA = 6.0
#: An accepted pair whose aligned grids differ in chroma by more than this (mean of
#: Cb and Cr, before any colour map: :attr:`PairVerdict.colour`) is a recoloured copy;
#: a re-encode or a resize leaves a few levels.
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
        rgb = _flattened(view.grid, white)
        saturation.append(float((np.abs(rgb @ _CB) + np.abs(rgb @ _CR)).mean()))
    if min(saturation) < _GREY_CHROMA and max(saturation) > _COLOUR_CHROMA:
        return "grey"
    # A global colour map must explain most of it (a misaligned crop differs in chroma
    # too, but no map removes that).
    return bool(verdict.colour > _RECOLOURED and verdict.colour > 2.0 * verdict.chroma)


def supported_pairs(
    pairs: NDArray[np.int64],
    keep: NDArray[np.bool_] | None = None,
    min_support: float = MIN_SUPPORT,
    weights: NDArray[np.int64] | None = None,
) -> NDArray[np.bool_]:
    """Which verified pairs keep the support of their images' neighbourhoods.

    An image's verified neighbourhood is itself and every image it verified
    against. A pair ``(a, b)`` is supported when the two neighbourhoods share at
    least ``min_support`` of the smaller one. Copies of one picture verify
    against one another, so a pair of copies shares most of its neighbours (a
    copy seen only with its original shares all of its own); two look-alikes
    (an icon with another badge, a sprite in another palette), each verified
    with its own copies, share only the few images too degraded to tell them
    apart, and such a chain is what glued unrelated families into one group.
    Unsupported pairs are dropped and the rest judged again on what remains,
    until none is dropped. Deterministic: the result does not depend on the
    order of ``pairs``.

    Parameters
    ----------
    pairs : numpy.ndarray of int64, shape (k, 2)
        Verified row pairs, each once.
    keep : numpy.ndarray of bool, shape (k,), optional
        Pairs kept whatever their support (byte-identical files); they still
        count in the neighbourhoods.
    min_support : float, default :data:`MIN_SUPPORT`
        0 keeps every pair.
    weights : numpy.ndarray of int64, optional
        How many images each row stands for (indexed by row; default 1 each):
        a row standing for ``w`` identical copies counts ``w`` times in every
        neighbourhood, as its copies would (:func:`verified_labels` verifies
        one representative of each set of identical images).

    Returns
    -------
    numpy.ndarray of bool, shape (k,)

    Examples
    --------
    Two families of three copies each, and one verified pair between them:

    >>> pairs = np.array([[0, 1], [0, 2], [1, 2], [3, 4], [3, 5], [4, 5], [2, 3]])
    >>> supported_pairs(pairs).tolist()
    [True, True, True, True, True, True, False]
    >>> supported_pairs(np.array([[0, 1], [0, 2], [0, 3]])).tolist()  # copies of image 0
    [True, True, True]
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    alive = np.ones(len(pairs), dtype=bool)
    fixed = np.zeros(len(pairs), dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    if min_support <= 0 or not len(pairs):
        return alive
    listed = pairs.tolist()
    while True:
        neighbours: dict[int, set[int]] = {}
        for (a, b), live in zip(listed, alive.tolist(), strict=True):
            if live:
                neighbours.setdefault(a, {a}).add(b)
                neighbours.setdefault(b, {b}).add(a)
        dropped = False
        for index in np.flatnonzero(alive & ~fixed).tolist():
            a, b = listed[index]
            first, second = neighbours[a], neighbours[b]
            common = first & second if len(first) < len(second) else second & first
            if weights is None:
                shared, smaller = len(common), min(len(first), len(second))
            else:
                shared = int(weights[list(common)].sum())
                smaller = int(min(weights[list(first)].sum(), weights[list(second)].sum()))
            if shared < min_support * smaller:
                alive[index] = False
                dropped = True
        if not dropped:
            return alive


def kept_together(edges: pd.DataFrame, distinct: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Which verified edges link when the rows of each ``distinct`` pair stay apart.

    The edges are linked strongest first (by their ``strength``: 1 for byte-identical
    copies, the pixel check's structure score, a geometric match's share of inliers;
    ties by row), each one only if
    it puts no ``distinct`` pair into one group (:func:`linking_pairs_kept_apart`):
    a copy too degraded to tell two look-alikes apart joins the one it matches best.

    Returns
    -------
    numpy.ndarray of bool, shape (len(edges),)
    """
    from leakaudit.grouping import linking_pairs_kept_apart

    rows = edges[["row_a", "row_b"]].to_numpy(dtype=np.int64)
    strength = edges["strength"].to_numpy(dtype=float)
    order = np.lexsort((rows[:, 1], rows[:, 0], -strength))
    keep = np.zeros(len(rows), dtype=bool)
    keep[order] = linking_pairs_kept_apart(rows[order], distinct)
    return keep


def iter_edge_chunks(edges: pd.DataFrame) -> Iterator[NDArray[np.int64]]:
    """The accepted pairs as one chunk for :func:`leakaudit.grouping.connected_component_labels`."""
    if len(edges):
        yield edges[["row_a", "row_b"]].to_numpy(dtype=np.int64)


def table_candidates(
    table: Any, low_information: NDArray[np.bool_], options: VerifyOptions, *, dihedral: bool
) -> tuple[
    tuple[NDArray[np.int64], NDArray[np.int64]],
    tuple[NDArray[np.int64], NDArray[np.uint64], NDArray[np.uint64], NDArray[np.int8]],
]:
    """The candidate net of a hash table (or anything with its columns): the one place
    that decides which rows verification will compare.

    Candidates come from the table's entries (orientations, crops, rotations)
    with ``dihedral`` when it has them, else from its whole-image hashes;
    low-information rows are never candidates.

    Returns
    -------
    ((pairs, distance), (owner, phash, dhash, kinds))
        :func:`candidate_pairs`' result, and the entries it searched.
    """
    n = len(table.valid)
    valid = np.asarray(table.valid, dtype=bool)
    linkable = valid & ~np.asarray(low_information, dtype=bool)
    entries = table.orientations if dihedral else None
    if entries is not None and len(entries):
        owner, phash, dhash = entries.owner, entries.phash, entries.dhash
        kinds = entry_kinds(owner)
    else:
        owner = np.arange(n, dtype=np.int64)
        phash = np.where(valid, table.phash, np.uint64(0)).astype(np.uint64)
        dhash = np.where(valid, table.dhash, np.uint64(0)).astype(np.uint64)
        kinds = np.zeros(n, dtype=np.int8)
    found = candidate_pairs(
        owner,
        phash,
        dhash,
        kinds,
        linkable,
        options.candidate_threshold,
        options.crop_candidate_threshold,
        options.crop_candidate_dhash_threshold,
    )
    return found, (owner, phash, dhash, kinds)


#: A set of images with identical hash entries but different bytes (re-encoded
#: placeholders) with more members than this is verified along a star, each member
#: once against the set's first image, instead of every pair: up to this size every
#: pair is verified, as for any other candidates.
IDENTICAL_ALL_PAIRS_MAX = 8


def _first_of_code(codes: NDArray[np.int64], eligible: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Each row's representative: the first ``eligible`` row of its code (itself elsewhere)."""
    first = np.arange(len(codes), dtype=np.int64)
    rows = np.flatnonzero(eligible & (codes >= 0))
    if rows.size:
        order = np.lexsort((rows, codes[rows]))
        sorted_codes, sorted_rows = codes[rows][order], rows[order]
        start = np.ones(len(order), dtype=bool)
        start[1:] = sorted_codes[1:] != sorted_codes[:-1]
        first[sorted_rows] = sorted_rows[start][np.cumsum(start) - 1]
    return first


def _entry_codes(
    n: int,
    owner: NDArray[np.int64],
    phash: NDArray[np.uint64],
    dhash: NDArray[np.uint64],
    kinds: NDArray[np.int8],
) -> NDArray[np.int64]:
    """A code per row, equal for rows whose hash entries are all equal (-1: no entries).

    Each entry is mixed with its place in its row; a row's code is its entries'
    XOR and count. A collision only sends two rows to be verified together.
    """
    order = np.argsort(owner, kind="stable")
    owner = owner[order]
    place = np.arange(len(owner), dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if len(owner) else place
    place -= np.repeat(starts, np.diff(np.r_[starts, len(owner)]))
    with np.errstate(over="ignore"):
        mixed = (
            phash[order] * np.uint64(0x9E3779B97F4A7C15)
            ^ (dhash[order] * np.uint64(0xC2B2AE3D27D4EB4F))
            ^ ((kinds[order].astype(np.uint64) + np.uint64(1)) << np.uint64(56))
            ^ (place.astype(np.uint64) * np.uint64(0x165667B19E3779F9))
        )
        mixed ^= mixed >> np.uint64(29)
        mixed *= np.uint64(0xBF58476D1CE4E5B9)
    key = np.zeros(n, dtype=np.uint64)
    count = np.zeros(n, dtype=np.int64)
    if len(owner):
        key[owner[starts]] = np.bitwise_xor.reduceat(mixed, starts)
        count[owner[starts]] = np.diff(np.r_[starts, len(owner)])
    codes, _ = pd.factorize(pd.MultiIndex.from_arrays([key, count]))
    return np.where(count > 0, codes, -1).astype(np.int64)


def _source_digest(source: Any, name: str, decode: DecodeOptions) -> int | None:
    """The digest :func:`load_view` gives a source (None where it cannot be read)."""
    try:
        if isinstance(source, Image.Image):
            return image_digest(source)
        _, data = read_source(source, name, decode)
    except (ImageLoadError, OSError, ValueError, TypeError):
        return None
    return bytes_digest(data)


def _same_bytes(
    sources: Sequence[Any],
    names: Sequence[str],
    rows: NDArray[np.int64],
    within: NDArray[np.int64],
    decode: DecodeOptions,
    workers: int | None,
) -> NDArray[np.int64]:
    """Each of ``rows``' first row (of ``rows``) with the same bytes and the same ``within``.

    Indexed by row (itself for rows not in ``rows`` and unreadable ones).
    """
    if workers is None:
        workers = usable_cpu_count()

    def digest(row: int) -> int | None:
        source = sources[row]
        return None if source is None else _source_digest(source, names[row], decode)

    row_list = rows.tolist()
    if workers <= 1 or len(row_list) < 64:
        digests = [digest(row) for row in row_list]
    else:
        with ThreadPoolExecutor(max_workers=int(workers)) as pool:
            digests = list(pool.map(digest, row_list, chunksize=64))
    codes, _ = pd.factorize(pd.Series(digests, dtype=object), use_na_sentinel=True)
    codes = codes.astype(np.int64)
    unknown = codes < 0
    codes[unknown] = codes.max(initial=-1) + 1 + np.arange(int(unknown.sum()))
    keys, _ = pd.factorize(pd.MultiIndex.from_arrays([within[rows], codes]))
    key = np.full(len(within), -1, dtype=np.int64)
    key[rows] = keys
    return _first_of_code(key, key >= 0)


def _byte_copy_edges(rows: NDArray[np.int64], representative: NDArray[np.int64]) -> pd.DataFrame:
    """Edges (stage ``bytes``) joining each row to its byte-identical representative."""
    a, b = np.minimum(rows, representative[rows]), np.maximum(rows, representative[rows])
    edges: pd.DataFrame = pd.DataFrame(
        {
            "row_a": a.astype(np.int64),
            "row_b": b.astype(np.int64),
            "stage": "bytes",
            "distance": pd.array(np.zeros(len(rows), dtype=np.int64), dtype="Int64"),
            "similarity": np.ones(len(rows)),
            "inliers": pd.array([pd.NA] * len(rows), dtype="Int64"),
            "strength": np.ones(len(rows)),
        }
    )[EDGE_COLUMNS]
    return edges


def _with_registered(
    verified: VerifiedPairs,
    sources: Sequence[Any],
    rows: NDArray[np.int64],
    splits: Sequence[Any] | NDArray[Any],
    decode: DecodeOptions,
) -> VerifiedPairs:
    """``verified`` with the tiny-photo net's registered pairs added as edges."""
    from leakaudit._registration import registered_pairs

    codes, _ = pd.factorize(pd.Series(list(splits), dtype=object))
    pairs, found, candidates = registered_pairs(
        sources, rows, np.asarray(codes, dtype=np.int64), decode
    )
    if candidates == 0:
        return verified
    edges = verified.edges
    have = set(zip(edges["row_a"].tolist(), edges["row_b"].tolist(), strict=True))
    new = np.array([(a, b) not in have for a, b in pairs.tolist()], dtype=bool)
    added = pd.DataFrame(
        {
            "row_a": pairs[new, 0],
            "row_b": pairs[new, 1],
            "stage": "registered",
            "distance": pd.array([pd.NA] * int(new.sum()), dtype="Int64"),
            "similarity": found.correlation[new].astype(float),
            "inliers": pd.array([pd.NA] * int(new.sum()), dtype="Int64"),
            "strength": np.minimum(0.99, found.correlation[new].astype(float)),
        }
    )
    if COPY_KIND in edges.columns:
        added[COPY_KIND] = [
            copy_kind("registered", scale=scale, shift=shift)
            for scale, shift in zip(
                found.scale[new].tolist(), found.shift[new].tolist(), strict=True
            )
        ]
    if len(added):
        edges = pd.concat([edges, added], ignore_index=True)
        edges = edges.sort_values(["row_a", "row_b"], kind="stable", ignore_index=True)
    return dataclasses.replace(
        verified,
        edges=edges,
        n_candidates=verified.n_candidates + candidates,
        n_rejected=verified.n_rejected + candidates - len(pairs),
        stages=[*verified.stages, "registered"],
    )


def verified_labels(
    table: Any,
    sources: Sequence[Any],
    names: Sequence[str],
    *,
    low_information: NDArray[np.bool_],
    exact_keys: Sequence[Any] | NDArray[Any],
    decode: DecodeOptions,
    options: VerifyOptions,
    workers: int | None,
    dihedral: bool,
    splits: Sequence[Any] | NDArray[Any] | None = None,
) -> tuple[NDArray[np.int64], VerifiedPairs]:
    """Group labels from verified edges only, and the verification's outcome.

    Candidates come from the table's entries (orientations, crops, rotations)
    when it has them, else from its whole-image hashes; low-information rows
    link only to byte-identical low-information rows, as in
    :func:`leakaudit.grouping.link_labels`. Verified pairs without the support
    of their neighbourhoods (:func:`supported_pairs`) do not link.

    Identical images are verified once, never every pair of them (a placeholder
    copied 10,000 times made 50M candidate pairs): byte-identical files (equal
    ``exact_keys``) collapse to their first row, which stands for all of them in
    the candidate search, the verification and the support rule (weighted by
    their number), and each copy links to it directly (stage ``bytes``). The
    groups are the ones every pair would give: byte copies get the same
    verdicts. Images with identical hash entries but different bytes collapse
    the same way when there are more than :data:`IDENTICAL_ALL_PAIRS_MAX`
    of them: each is verified once against the first; those it accepts link to
    it, the others stay candidates as before.
    """
    from leakaudit.grouping import connected_component_labels, exact_key_edges

    n = len(table.valid)
    low = np.asarray(low_information, dtype=bool) & np.asarray(table.valid, dtype=bool)
    linkable = np.asarray(table.valid, dtype=bool) & ~low
    byte_codes, _ = pd.factorize(pd.Series(list(exact_keys), dtype=object), use_na_sentinel=True)
    byte_rep = _first_of_code(byte_codes.astype(np.int64), linkable)
    node = byte_rep.copy()
    star: VerifiedPairs | None = None
    if dihedral and table.orientations is not None and len(table.orientations):
        entries_found = table.orientations
        entry_owner, entry_phash, entry_dhash = (
            entries_found.owner,
            entries_found.phash,
            entries_found.dhash,
        )
        entry_kinds_found = entry_kinds(entry_owner)
    else:
        entry_owner = np.arange(n, dtype=np.int64)
        entry_phash = np.asarray(table.phash).astype(np.uint64)
        entry_dhash = np.asarray(table.dhash).astype(np.uint64)
        entry_kinds_found = np.zeros(n, dtype=np.int8)
    first_entry = _first_of_code(
        _entry_codes(n, entry_owner, entry_phash, entry_dhash, entry_kinds_found),
        linkable & (node == np.arange(n)),
    )
    size = np.bincount(first_entry[linkable & (node == np.arange(n))], minlength=n)
    spoke = np.flatnonzero(linkable & (node == np.arange(n)) & (first_entry != np.arange(n)))
    spoke = spoke[size[first_entry[spoke]] > IDENTICAL_ALL_PAIRS_MAX]
    if len(spoke):
        # Byte copies among them first: a digest each (the file read once), no view.
        wanted = np.concatenate([np.unique(first_entry[spoke]), spoke])
        same = _same_bytes(sources, names, wanted, first_entry, decode, workers)
        byte_rep[wanted] = same[wanted]
        node = byte_rep[byte_rep]
        spoke = spoke[same[spoke] == spoke]
        size = np.bincount(first_entry[linkable & (node == np.arange(n))], minlength=n)
        spoke = spoke[size[first_entry[spoke]] > IDENTICAL_ALL_PAIRS_MAX]
    copies = np.flatnonzero(linkable & (byte_rep != np.arange(n)))
    if len(spoke):
        star = verify_candidates(
            np.stack([first_entry[spoke], spoke], axis=1),
            np.zeros(len(spoke), dtype=np.int64),
            sources,
            names,
            decode=decode,
            options=options,
            workers=workers,
        )
        joined = star.edges["row_b"].to_numpy(dtype=np.int64)
        node[np.isin(node, joined)] = first_entry[node[np.isin(node, joined)]]
    stands_for = np.arange(n) == node
    (pairs, distance), (owner, phash, dhash, kinds) = table_candidates(
        table, low | ~stands_for, options, dihedral=dihedral
    )
    verified = verify_candidates(
        pairs,
        distance,
        sources,
        names,
        decode=decode,
        options=options,
        workers=workers,
        entries=(
            TableEntries(owner, phash, dhash, kinds)
            if np.any(kinds == CROP) and bool(np.all(np.diff(owner) >= 0))
            else None
        ),
    )
    edges = verified.edges
    if options.tiny_photos and splits is not None:
        verified = _with_registered(
            verified, sources, np.flatnonzero(linkable & stands_for), splits, decode
        )
        edges = verified.edges
    if options.min_support > 0 and len(edges):
        # Pairs the grid accepted but the native check told apart still count as
        # neighbours: the support rule judges the grid's matches.
        passed = verified.distinct[verified.distinct_passed]
        weights = np.bincount(node[linkable], minlength=n)
        supported = supported_pairs(
            np.concatenate([edges[["row_a", "row_b"]].to_numpy(dtype=np.int64), passed]),
            np.concatenate([edges["stage"].eq("bytes").to_numpy(), np.zeros(len(passed), bool)]),
            options.min_support,
            weights if np.any(weights > 1) else None,
        )[: len(edges)]
        if not supported.all():
            edges = edges[supported].reset_index(drop=True)
            verified = dataclasses.replace(
                verified, edges=edges, n_unsupported=int(np.count_nonzero(~supported))
            )
    if len(verified.distinct) and len(edges):
        keep = kept_together(edges, verified.distinct)
        if not keep.all():
            edges = edges[keep].reset_index(drop=True)
            verified = dataclasses.replace(
                verified, edges=edges, n_kept_apart=int(np.count_nonzero(~keep))
            )
    if len(copies) or star is not None:
        # The collapsed images link to the image that stood for them.
        parts = [edges, _byte_copy_edges(copies, byte_rep)]
        if star is not None:
            parts.append(star.edges)
        edges = pd.concat([p for p in parts if len(p)] or [edges], ignore_index=True)
        edges = edges.sort_values(["row_a", "row_b"], kind="stable", ignore_index=True)
        verified = dataclasses.replace(
            verified,
            edges=edges,
            n_candidates=verified.n_candidates
            + len(copies)
            + (0 if star is None else star.n_candidates),
            n_rejected=verified.n_rejected + (0 if star is None else star.n_rejected),
        )
    chunks: list[NDArray[np.int64]] = list(iter_edge_chunks(edges))
    if low.any():
        exact = list(exact_key_edges(exact_keys, low))
        chunks.extend(exact)
        if exact:
            rows = np.concatenate(exact)
            blank = pd.DataFrame(
                {
                    "row_a": np.minimum(rows[:, 0], rows[:, 1]),
                    "row_b": np.maximum(rows[:, 0], rows[:, 1]),
                    "stage": "bytes",
                    "distance": pd.array([pd.NA] * len(rows), dtype="Int64"),
                    "similarity": np.nan,
                    "inliers": pd.array([pd.NA] * len(rows), dtype="Int64"),
                    "strength": 1.0,
                }
            )
            edges = pd.concat([edges, blank], ignore_index=True)
            verified = dataclasses.replace(verified, edges=edges)
    labels = connected_component_labels(n, iter(chunks))
    return labels, verified
