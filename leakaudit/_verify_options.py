"""The verifier's options and its public tuned constants.

Every value says which measurement set it, by section of ``benchmarks/RESULTS.md`` (§N), and
on which data: *real* (CIFAR-10), *real photo content* (crops of the scikit-image and
matplotlib photographs with generated edits) or *generated* (bench_closure's sprites and icons).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leakaudit._validation import check_bool, check_int

__all__ = [
    "CANDIDATE_THRESHOLD",
    "CROP_CANDIDATE_DHASH_THRESHOLD",
    "CROP_CANDIDATE_THRESHOLD",
    "DISTINCT_MIN_SIDE",
    "DISTINCT_PIXELS",
    "GRAPHIC_SIDE",
    "MIN_SUPPORT",
    "VerifyOptions",
]

#: Candidate threshold of the net: a pair of entries (whole, crop or rotation) is a
#: candidate when both its pHash and its dHash lie within this many bits.
#: Set by RESULTS §1 (both <= 10: expected-copy recall 98.5%, 1.11 false pairs per
#: million unrelated pairs; real photo content, generated copies) and §10 "The net"
#: (generated closure). Not re-measured on real copies (CIFAR-10 §15: the missed pairs
#: lie 10-36 bits apart).
CANDIDATE_THRESHOLD = 10
#: The pHash threshold of pairs involving a crop or rotation entry. Set by RESULTS §10
#: "The net" (300 crops of real photos, generated crops: crop 15% recall 42/63/81% at
#: 8/10/12) and its cost table (20,000 generated photo-like JPEGs: search 3.7 s at 8,
#: 11.3 s at 10); 6 lost crop recall on the generated closure's quick set.
CROP_CANDIDATE_THRESHOLD = 8
#: The dHash limit of such a pair (:class:`VerifyOptions`). Set by RESULTS §10 session
#: 7, "Dead end 1": at 12 the generated closure's precision fell 92.1 -> 89.7% for crop
#: 15% 72.0 -> 76.2%, and 20,000 generated photo-like JPEGs made twice the candidates.
#: Generated data only.
CROP_CANDIDATE_DHASH_THRESHOLD = 10
#: A verified pair links only when its two images share at least this share of the
#: smaller of their verified neighbourhoods (:func:`supported_pairs`). Set by RESULTS
#: §10 session 6 (``tune_verify.py --grid min_support=0,0.5,0.6,0.7`` on the closure's
#: full set: precision 83.0 / 89.4 / 92.1 / 92.8%, 0.7 losing pad and crop recall).
#: Generated data only.
MIN_SUPPORT = 0.6
#: Pixels that must differ strongly at native resolution to keep two images apart
#: (:attr:`VerifyOptions.distinct_pixels`), and the smallest shorter side at which the
#: check is trusted: at 16 px a badge is a few blurred pixels. Both set by RESULTS §10
#: session 8 (``tune_verify.py --grid distinct_pixels=12,8,6,4`` on the generated
#: closure: 4 the one value reaching 95.0% precision; badges at 16-24 px left). Checked
#: on real photo content by ``bench_distinct.py`` (300 crops of real photos at 32 px PNG,
#: generated copies: none of the 2,321 accepted pairs told apart). Set on generated data.
DISTINCT_PIXELS = 4
DISTINCT_MIN_SIDE = 24

#: Images under this many pixels on the shorter side (or with transparency) are
#: graphics: look-alikes (sprites of one pose, icons of one template) are common
#: among them, so they are verified with the stricter limits of VerifyOptions.
#: Not measured on its own in RESULTS: it came with the graphic limits of §10
#: "Verification" (the generated closure's 16-256 px icons and 32-128 px sprites); §10
#: session 8 notes that real photos under 96 px stored losslessly (CIFAR-like PNGs)
#: count as graphics. Generated data only.
GRAPHIC_SIDE = 96


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
        pair, measured after the best global colour map of the family
        (:mod:`leakaudit._colour_map`) for every kind of image: grey, toned,
        channel-scaled or -swapped copies are copies; what no such map explains
        (another colouring of a part) is rejected above it.
    min_silhouette : float, default 0.75
        Smallest IoU of the two alpha masks when both images have transparency.
    geometry : bool or None, default None
        Run local-feature verification on pairs the pixel check leaves open;
        None runs it when OpenCV is installed.
    geometry_correlation : float, default 0.45
        Pairs scoring between this and ``min_correlation`` are left open (go
        to the geometric stage, or are rejected without it).
    max_changed : float, default 0.045
        Largest share of pixels that still differ by more than 48 levels after
        the best global colour map (:func:`leakaudit._colour_map.mapped_colours`):
        what tells a sprite in another pose, or another character in the same
        pose, from a copy.
    graphic_correlation, graphic_chroma_difference, graphic_changed : float
        The same three limits (0.85, 10.0, 0.03) for pairs where either image
        is a graphic (transparent, or under :data:`GRAPHIC_SIDE` pixels):
        icons of one template and sprites of one pose differ in a few pixels.
        Local features never decide a graphic.
    figure_chroma_difference, figure_changed : float
        The colour and changed-share limits (12.0, 0.075) of a graphic on a
        uniform or transparent background, where both are measured on the
        figure (what differs from the background in either image) rather than
        on the whole canvas: another part or badge changes a tenth of the figure
        but a few hundredths of the canvas.
    min_support : float, default 0.6
        A verified pair links only when its two images share at least this
        share of the smaller of their verified neighbourhoods
        (:func:`supported_pairs`): copies of one picture verify against one
        another, two look-alikes each with their own copies. Byte copies and
        pairs of two tiny photos (``tiny_photos``) link whatever their support.
        0 links every verified pair.
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

    Most defaults were chosen on ``benchmarks/bench_closure.py``'s generated
    sprites and icons and its photo crops (real photo content, generated edits;
    ``benchmarks/RESULTS.md`` §10, "The verified cascade"); the comment above
    each field says which measurement set it and on which data.
    """

    #: :data:`CANDIDATE_THRESHOLD` (RESULTS §1, §10).
    candidate_threshold: int = CANDIDATE_THRESHOLD
    #: :data:`CROP_CANDIDATE_THRESHOLD` (RESULTS §10 "The net").
    crop_candidate_threshold: int = CROP_CANDIDATE_THRESHOLD
    #: :data:`CROP_CANDIDATE_DHASH_THRESHOLD` (RESULTS §10 session 7; generated data).
    crop_candidate_dhash_threshold: int = CROP_CANDIDATE_DHASH_THRESHOLD
    #: RESULTS §1: pHash and dHash <= 8 found 100% of core and 97.2% of expected copies
    #: at 1 false pair in 4.5M (crops of real photos, generated copies).
    link_threshold: int = 8
    #: RESULTS §10 "Verification" (the generated closure's quick set; a 32 x 32 grid and
    #: other limits tried there). Generated data only.
    min_correlation: float = 0.80
    #: RESULTS §10 "Verification" (generated closure); kept when the colour rule changed
    #: (§15): CIFAR-10's colour-shifted same-shot pairs (real) leave a residual of median
    #: 4.1, 95th percentile 9.9, under it.
    max_chroma_difference: float = 12.0
    #: RESULTS §10 "Verification": transparent sprites and icons, generated data only.
    min_silhouette: float = 0.75
    #: A switch, not tuned: OpenCV chosen by RESULTS §10 "Geometric stage: libraries"
    #: (``bench_verify.py``, 799 pairs of the generated closure).
    geometry: bool | None = None
    #: Not measured on its own in RESULTS (set with §10's cascade on the generated
    #: closure); §15 counts CIFAR-10 pairs left open between 0.45 and 0.85.
    geometry_correlation: float = 0.45
    #: RESULTS §10 "Verification": cut false accepts among sprites 347 -> 27 for 5 points
    #: of true accepts (generated closure). Generated data only.
    max_changed: float = 0.045
    #: This and the next two: RESULTS §10 "Verification" (graphics 0.85 / 10 / 3%) and
    #: session 7 "Dead end 2" (2% changed lost crop and rotate recall). Generated data only.
    graphic_correlation: float = 0.85
    graphic_chroma_difference: float = 10.0
    graphic_changed: float = 0.03
    #: This and the next: RESULTS §10 session 5 (``tune_verify.py`` on the closure's full
    #: set: changed 6% / 9%, chroma 14 tried). Generated data only.
    figure_chroma_difference: float = 12.0
    figure_changed: float = 0.075
    #: :data:`MIN_SUPPORT` (RESULTS §10 session 6; generated data).
    min_support: float = MIN_SUPPORT
    #: :data:`DISTINCT_PIXELS` (RESULTS §10 session 8; generated data).
    distinct_pixels: int = DISTINCT_PIXELS
    #: RESULTS §17: the tiny-photo net, measured on CIFAR-10's dev classes (real).
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
