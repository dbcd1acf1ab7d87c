"""Geometric verification of candidate pairs: local features, ratio test and RANSAC.

The hashes propose candidate pairs; this stage decides, pair by pair, whether image B is a
*geometric copy* of image A: the same picture cropped a little, rotated a few degrees, padded
or letterboxed, resized, re-encoded, or re-framed so that one image lies inside the other (a
portrait re-crop of a landscape photo). It fits a similarity transform (scale, rotation,
shift) from A to B on matched local features and accepts the pair only when the fit is well
supported and plausible.

Pipeline, per image (:func:`extract_features`, done once per image and reused for every pair):
resize so that the longer side is ``max_side`` (tiny icons and sprites are upscaled, with
bicubic interpolation, so the detector sees their corners), then detect keypoints and compute
binary descriptors with OpenCV's ORB (the default, chosen by ``benchmarks/bench_verify.py``) or
SIFT. Per pair (:func:`match_features`): two nearest neighbours per descriptor and Lowe's ratio
test, then RANSAC on a similarity (``cv2.estimateAffinePartial2D``), then these checks, in order:

1. at least ``min_inliers`` inliers, and at least ``min_inlier_ratio`` of the matches whose
   point in A the transform maps inside B's frame (the others cannot be right);
2. the scale within ``scale_range`` and the rotation within ``max_rotation`` degrees (callers
   bring images to a common orientation first; flips and quarter turns are not searched);
3. *containment*: the larger of the two *coverages* (the fraction of A's frame that is visible
   in B, and the fraction of B's frame that is visible in A) is at least ``min_coverage``.
   One image must lie (almost) wholly inside the other. This is what separates a crop of a
   photo (B inside A, coverage 1) and a padded copy (A inside B) from two different crops of
   one scene, which a similarity also maps onto each other but which each show content the
   other lacks;
4. *spread*: the convex hull of the inliers covers at least ``min_spread`` of the convex hull
   of B's keypoints inside the region the two images share, so a fit carried by one small
   detail (an eye, an outline corner, a logo) is refused, while a photo with a plain sky or a
   sprite on a flat background, whose keypoints cover part of the frame only, is not.

Coordinates are normalised by each image's longer side, so a plain resize has scale 1.0 and the
scale of a crop that keeps 80% of each side, resized back, is 1.25.

OpenCV is an optional extra (``pip install 'leakaudit-vision[verify]'``); any ``cv2`` >= 4.5
works, whichever distribution provides it (``opencv-python``, ``opencv-python-headless``,
``opencv-contrib-python``). It is imported only inside the functions that need it.

Examples
--------
>>> import numpy as np
>>> from PIL import Image
>>> noise = np.random.default_rng(0).integers(0, 256, (60, 80), dtype=np.uint8)
>>> photo = Image.fromarray(noise).resize((320, 240), Image.Resampling.BICUBIC)
>>> grey = np.asarray(photo)
>>> result = verify_geometry(grey, grey[12:228, 16:304])  # doctest: +SKIP
>>> result.accepted, round(result.scale, 2)  # doctest: +SKIP
(True, 1.11)
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from leakaudit._validation import check_choice, check_int, describe

__all__ = [
    "DETECTORS",
    "Features",
    "GeometricMatch",
    "extract_features",
    "geometry_available",
    "geometry_backend",
    "match_features",
    "verify_geometry",
]

#: The detectors :func:`extract_features` offers (all in OpenCV's main modules since 4.4).
DETECTORS = ("orb", "sift")

# Defaults chosen by benchmarks/bench_verify.py (see its docstring for the measured table).
_DETECTOR = "orb"
_MAX_SIDE = 256
_N_FEATURES = 500
_MIN_INLIERS = 10
_RATIO = 0.8
_MIN_INLIER_RATIO = 0.4
_MIN_COVERAGE = 0.8
_MIN_SPREAD = 0.08
_MAX_ROTATION = 20.0
_SCALE_RANGE = (0.5, 2.0)
_RANSAC_THRESHOLD = 0.012  # of the longer side: 3 px at 256
_MIN_SIDE = 2  # smaller images hold no geometry to verify

_INSTALL_HINT = (
    "geometric verification needs OpenCV: pip install 'leakaudit-vision[verify]' "
    "(any existing cv2 >= 4.5 works too, e.g. from opencv-python)"
)


@functools.lru_cache(maxsize=1)
def _cv2_module() -> Any:
    try:
        import cv2
    except (ImportError, OSError):  # opencv-python without libGL raises ImportError too
        return None
    return cv2


def _require_cv2() -> Any:
    cv2 = _cv2_module()
    if cv2 is None:
        raise ImportError(_INSTALL_HINT)
    return cv2


def geometry_available() -> bool:
    """Return whether OpenCV (``cv2``) can be imported, so that this stage can run.

    The answer is computed once and cached.

    Examples
    --------
    >>> isinstance(geometry_available(), bool)
    True
    """
    return _cv2_module() is not None


def geometry_backend() -> str:
    """Return the library that verifies geometry, e.g. ``"opencv 4.10.0"``, or ``""`` if none.

    Examples
    --------
    >>> geometry_backend().startswith("opencv ") or not geometry_available()
    True
    """
    cv2 = _cv2_module()
    return "" if cv2 is None else f"opencv {cv2.__version__}"


@dataclass(frozen=True, eq=False)
class Features:
    """Keypoints and descriptors of one image, from :func:`extract_features`.

    Attributes
    ----------
    keypoints : numpy.ndarray
        ``(n, 2)`` float32 array of ``(x, y)`` positions, *normalised by the image's longer
        side*: ``x`` lies in ``[0, width / max(width, height)]``, ``y`` likewise.
    descriptors : numpy.ndarray
        ``(n, d)`` uint8 array: 32-byte binary strings for ORB, 128 bins for SIFT.
    size : tuple of int
        ``(width, height)`` of the image as given, before resizing.
    detector : str
        ``"orb"`` or ``"sift"``; only features of one detector can be matched.
    """

    keypoints: NDArray[np.float32]
    descriptors: NDArray[np.uint8]
    size: tuple[int, int]
    detector: str

    def __len__(self) -> int:
        return int(self.keypoints.shape[0])

    @property
    def extent(self) -> tuple[float, float]:
        """``(width, height)`` in normalised units: the longer one is 1.0."""
        width, height = self.size
        longer = max(width, height)
        return width / longer, height / longer


@dataclass(frozen=True)
class GeometricMatch:
    """The verdict on one pair, from :func:`match_features`.

    Attributes
    ----------
    inliers : int
        Matches consistent with the fitted transform.
    matches : int
        Putative matches left after the ratio test.
    scale : float
        How much larger A's content is drawn in B, both measured in units of their own longer
        side (1.0 for a plain resize). NaN when no transform was fitted.
    rotation : float
        Degrees, counter-clockwise on screen (the sense of ``PIL.Image.rotate``). NaN when no
        transform was fitted.
    shift : tuple of float
        ``(tx, ty)``: where A's top-left corner lands in B, as fractions of B's width and
        height. NaN when no transform was fitted.
    accepted : bool
        Whether B is judged a geometric copy of A (or A of B).
    reason : str
        A short explanation, e.g. ``"62 inliers of 80, scale 1.05, rotation 4.9, coverage
        0.96"`` or ``"too few keypoints (a: 3, b: 250)"``.
    coverage : float
        The larger of the two coverages: the fraction of one image's frame visible in the
        other (1.0 when one lies wholly inside the other). NaN when no transform was fitted.
    """

    inliers: int
    matches: int
    scale: float
    rotation: float
    shift: tuple[float, float]
    accepted: bool
    reason: str
    coverage: float = math.nan


def _rejected(reason: str, matches: int = 0) -> GeometricMatch:
    nan = math.nan
    return GeometricMatch(0, matches, nan, nan, (nan, nan), False, reason, nan)


def _check_grey(grey: Any) -> NDArray[np.uint8]:
    if not isinstance(grey, np.ndarray):
        raise TypeError(f"grey must be a 2-D uint8 numpy array; got {describe(type(grey))}.")
    if grey.ndim != 2:
        hint = " (convert colour images to grey first)" if grey.ndim == 3 else ""
        raise ValueError(
            f"grey must be a 2-D uint8 array (height, width); got shape {grey.shape}{hint}."
        )
    if grey.dtype != np.uint8:
        raise TypeError(f"grey must be a 2-D uint8 array; got dtype {grey.dtype}.")
    if grey.size == 0:
        raise ValueError(f"grey must be a non-empty 2-D uint8 array; got shape {grey.shape}.")
    return grey


def _working_image(cv2: Any, grey: NDArray[np.uint8], max_side: int) -> NDArray[np.uint8]:
    height, width = grey.shape
    factor = max_side / max(width, height)
    size = (max(1, round(width * factor)), max(1, round(height * factor)))
    if size == (width, height):
        resized: NDArray[np.uint8] = np.ascontiguousarray(grey)
    else:
        interpolation = cv2.INTER_AREA if factor < 1 else cv2.INTER_CUBIC
        resized = cv2.resize(grey, size, interpolation=interpolation)
    # Stretch the contrast (robust percentiles): dim, hazy or pale images otherwise give the
    # corner detectors' fixed thresholds almost nothing, and copies of one image stretch alike.
    low, high = (float(v) for v in np.percentile(resized, (0.5, 99.5)))
    if high - low < 1:
        return resized
    stretched = (resized.astype(np.float32) - low) * (255 / (high - low))
    result: NDArray[np.uint8] = np.clip(stretched, 0, 255).astype(np.uint8)
    return result


def _detector(cv2: Any, detector: str, n_features: int, max_side: int) -> Any:
    if detector == "sift":
        return cv2.SIFT_create(nfeatures=n_features)
    # ORB skips a border of edgeThreshold pixels; 31 px is 12% of a 256 px side, so the border
    # and patch shrink with the working size (crops remove borders: what is left must count).
    patch = 31 if max_side >= 384 else 23
    return cv2.ORB_create(
        nfeatures=n_features, edgeThreshold=patch, patchSize=patch, fastThreshold=12
    )


def extract_features(
    grey: NDArray[np.uint8],
    *,
    max_side: int = _MAX_SIDE,
    n_features: int = _N_FEATURES,
    detector: str = _DETECTOR,
) -> Features:
    """Detect keypoints and compute descriptors of one grey image.

    Parameters
    ----------
    grey : numpy.ndarray
        A 2-D uint8 array ``(height, width)`` of any size. Colour images must be converted
        (and brought to a common orientation) by the caller.
    max_side : int
        The image is resized (down with area averaging, up bicubically) so that its longer
        side is ``max_side`` pixels, in ``[32, 4096]``.
    n_features : int
        Most keypoints kept (the strongest), in ``[8, 100000]``.
    detector : str
        ``"orb"`` (default) or ``"sift"``.

    Returns
    -------
    Features
        Possibly with no keypoints (a flat image, a 1x1 image): matching it rejects the pair.

    Raises
    ------
    ImportError
        OpenCV is not installed.
    TypeError, ValueError
        ``grey`` is not a non-empty 2-D uint8 array, or an option is out of range.

    Examples
    --------
    >>> import numpy as np
    >>> grey = np.random.default_rng(0).integers(0, 256, (48, 64), dtype=np.uint8)
    >>> features = extract_features(grey)  # doctest: +SKIP
    >>> features.size, features.descriptors.shape[1]  # doctest: +SKIP
    ((64, 48), 32)
    """
    grey = _check_grey(grey)
    max_side = check_int("max_side", max_side, 32, 4096)
    n_features = check_int("n_features", n_features, 8, 100_000)
    detector = check_choice("detector", detector, DETECTORS)
    cv2 = _require_cv2()
    height, width = grey.shape
    width_out = 32 if detector == "orb" else 128
    empty = Features(
        np.zeros((0, 2), np.float32), np.zeros((0, width_out), np.uint8), (width, height), detector
    )
    if min(width, height) < _MIN_SIDE:
        return empty
    image = _working_image(cv2, grey, max_side)
    keypoints, descriptors = _detector(cv2, detector, n_features, max_side).detectAndCompute(
        image, None
    )
    if descriptors is None or not keypoints:
        return empty
    points = np.array([k.pt for k in keypoints], dtype=np.float32).reshape(-1, 2)
    points /= np.float32(max(image.shape))
    if descriptors.dtype != np.uint8:  # SIFT: float32 already saturated to [0, 255]
        descriptors = np.clip(np.rint(descriptors), 0, 255).astype(np.uint8)
    return Features(points, np.ascontiguousarray(descriptors), (width, height), detector)


def _clip_polygon(polygon: NDArray[np.float64], width: float, height: float) -> NDArray[np.float64]:
    """Clip a convex polygon to the rectangle [0, width] x [0, height] (Sutherland-Hodgman)."""
    # Each half-plane keeps the points with sign * coordinate >= sign * bound.
    half_planes = ((0, 1.0, 0.0), (0, -1.0, width), (1, 1.0, 0.0), (1, -1.0, height))
    points = [tuple(float(v) for v in p) for p in polygon]
    for axis, sign, bound in half_planes:
        kept: list[tuple[float, ...]] = []
        for index, current in enumerate(points):
            previous = points[index - 1]
            inside_now = sign * (current[axis] - bound) >= 0
            if inside_now != (sign * (previous[axis] - bound) >= 0):
                t = (bound - previous[axis]) / (current[axis] - previous[axis])
                kept.append(tuple(p + t * (c - p) for p, c in zip(previous, current, strict=True)))
            if inside_now:
                kept.append(current)
        points = kept
    return np.array(points, dtype=np.float64).reshape(-1, 2)


def _area(polygon: NDArray[np.float64]) -> float:
    if len(polygon) < 3:
        return 0.0
    x, y = polygon[:, 0], polygon[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def _hull_area(points: NDArray[np.float64]) -> float:
    """Area of the convex hull of ``points`` (Andrew's monotone chain)."""
    unique = sorted({(float(x), float(y)) for x, y in points})
    if len(unique) < 3:
        return 0.0

    def cross(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list[tuple[float, float]] = []
    upper: list[tuple[float, float]] = []
    for chain, sequence in ((lower, unique), (upper, unique[::-1])):
        for point in sequence:
            while len(chain) >= 2 and cross(chain[-2], chain[-1], point) <= 0:
                chain.pop()
            chain.append(point)
    return _area(np.array(lower[:-1] + upper[:-1], dtype=np.float64))


def _inside_polygon(points: NDArray[np.float64], polygon: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Which ``points`` lie in the convex ``polygon`` (vertices in order, either orientation)."""
    edges = np.roll(polygon, -1, axis=0) - polygon
    relative = points[:, None, :] - polygon[None, :, :]
    cross = edges[None, :, 0] * relative[:, :, 1] - edges[None, :, 1] * relative[:, :, 0]
    inside: NDArray[np.bool_] = np.all(cross >= 0, axis=1) | np.all(cross <= 0, axis=1)
    return inside


def _rectangle(width: float, height: float) -> NDArray[np.float64]:
    return np.array([[0, 0], [width, 0], [width, height], [0, height]], dtype=np.float64)


def _judge(
    points_a: NDArray[Any],
    points_b: NDArray[Any],
    matrix: NDArray[Any] | None,
    inlier_mask: NDArray[Any] | None,
    extent_a: tuple[float, float],
    extent_b: tuple[float, float],
    *,
    min_inliers: int,
    min_inlier_ratio: float,
    min_coverage: float,
    min_spread: float,
    max_rotation: float,
    scale_range: tuple[float, float],
    keypoints_b: NDArray[Any] | None = None,
) -> GeometricMatch:
    """Apply the acceptance checks to a fitted similarity (shared with the benchmark).

    ``points_a``/``points_b`` are the matched positions (normalised by the longer side),
    ``matrix`` the 2x3 similarity mapping A to B (None when the fit failed) and
    ``inlier_mask`` the RANSAC inliers.
    """
    matches = len(points_a)
    if matrix is None or inlier_mask is None:
        return _rejected("no transform found", matches)
    mask = np.asarray(inlier_mask).reshape(-1).astype(bool)
    inliers = int(mask.sum())
    linear = np.asarray(matrix, dtype=np.float64)[:, :2]
    tx, ty = (float(v) for v in np.asarray(matrix, dtype=np.float64)[:, 2])
    a, b = float(linear[0, 0]), float(linear[1, 0])  # [[a, -b], [b, a]] = scale * rotation
    scale = math.hypot(a, b)
    rotation = -math.degrees(math.atan2(b, a))  # y points down: flip to counter-clockwise
    shift = (tx / extent_b[0], ty / extent_b[1])
    area_a = extent_a[0] * extent_a[1]
    area_b = extent_b[0] * extent_b[1]
    offset = np.array([tx, ty], dtype=np.float64)
    coverage_a = coverage_b = spread = 0.0
    candidates = matches
    if scale > 0:
        a_in_b = _rectangle(*extent_a) @ linear.T + offset
        # Matches whose A point falls outside B's frame cannot be right: the inlier ratio is
        # counted among the others, so a partial overlap (a portrait re-crop) is not penalised.
        mapped = np.asarray(points_a, dtype=np.float64) @ linear.T + offset
        within = _inside_polygon(mapped, _rectangle(*extent_b))
        candidates = max(int(within.sum()), inliers)
        overlap_b = _area(_clip_polygon(a_in_b, *extent_b))
        coverage_b = overlap_b / area_b  # of B's frame, the part showing A
        coverage_a = overlap_b / (scale * scale) / area_a  # of A's frame, the part shown in B
        # Relative to where B has features at all inside the shared region, not to its area:
        # a sprite on a flat background or a photo with a plain sky has keypoints on part of
        # the frame only, and inliers on all of that part are as good as it gets.
        textured = overlap_b
        if keypoints_b is not None and len(keypoints_b) >= 3:
            inside = _inside_polygon(np.asarray(keypoints_b, dtype=np.float64), a_in_b)
            textured = min(overlap_b, _hull_area(np.asarray(keypoints_b, np.float64)[inside]))
        if inliers and textured > 0:
            spread = _hull_area(np.asarray(points_b, dtype=np.float64)[mask]) / textured
    coverage = max(coverage_a, coverage_b)
    summary = (
        f"{inliers} inliers of {matches}, scale {scale:.2f}, rotation {rotation:.1f}, "
        f"coverage {coverage:.2f}, spread {spread:.2f}"
    )
    low, high = scale_range
    failure = ""
    if inliers < min_inliers:
        failure = f"too few inliers (< {min_inliers})"
    elif inliers < min_inlier_ratio * candidates:
        failure = f"inlier ratio below {min_inlier_ratio:g}"
    elif not low <= scale <= high:
        failure = f"scale outside [{low:g}, {high:g}]"
    elif abs(rotation) > max_rotation:
        failure = f"rotation beyond {max_rotation:g} degrees"
    elif coverage < min_coverage:
        failure = f"neither image inside the other (coverage < {min_coverage:g})"
    elif spread < min_spread:
        failure = f"inliers span too small an area (spread < {min_spread:g})"
    reason = f"{failure}: {summary}" if failure else summary
    return GeometricMatch(
        inliers, matches, scale, rotation, shift, not failure, reason, float(coverage)
    )


def _check_fraction(name: str, value: Any, low: float = 0.0, high: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"{name} must be a number in [{low:g}, {high:g}]; got {describe(value)}.")
    return float(value)


def match_features(
    a: Features,
    b: Features,
    *,
    min_inliers: int = _MIN_INLIERS,
    ratio: float = _RATIO,
    min_inlier_ratio: float = _MIN_INLIER_RATIO,
    min_coverage: float = _MIN_COVERAGE,
    min_spread: float = _MIN_SPREAD,
    max_rotation: float = _MAX_ROTATION,
    scale_range: tuple[float, float] = _SCALE_RANGE,
    ransac_threshold: float = _RANSAC_THRESHOLD,
) -> GeometricMatch:
    """Decide whether image B is a geometric copy of image A from their features.

    Parameters
    ----------
    a, b : Features
        From :func:`extract_features`, with the same detector.
    min_inliers : int
        Fewest RANSAC inliers to accept, in ``[3, 10000]``.
    ratio : float
        Lowe's ratio test: a match is kept when its distance is below ``ratio`` times the
        second-nearest one's, in ``(0, 1]``.
    min_inlier_ratio : float
        Fewest inliers, as a fraction of the matches whose A point maps inside B's frame, in
        ``[0, 1]``.
    min_coverage : float
        How much of one image's frame must be visible in the other (see the module
        docstring), in ``[0, 1]``.
    min_spread : float
        Smallest area of the inliers' convex hull, as a fraction of the hull of B's keypoints
        in the region the images share, in ``[0, 1]``.
    max_rotation : float
        Largest rotation accepted, in degrees, in ``[0, 180]``.
    scale_range : tuple of float
        ``(low, high)`` scales accepted (see :class:`GeometricMatch`), ``0 < low <= high``.
    ransac_threshold : float
        RANSAC's reprojection tolerance, as a fraction of the longer side, in ``(0, 0.2]``.

    Returns
    -------
    GeometricMatch
        ``accepted`` with the transform, or not with the reason.

    Raises
    ------
    ImportError
        OpenCV is not installed.
    ValueError
        The features come from different detectors, or an option is out of range.

    Examples
    --------
    >>> import numpy as np
    >>> grey = np.random.default_rng(0).integers(0, 256, (48, 64), dtype=np.uint8)
    >>> features = extract_features(grey)  # doctest: +SKIP
    >>> match_features(features, features).accepted  # doctest: +SKIP
    True
    """
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, Features):
            raise TypeError(
                f"{name} must be a Features from extract_features; got {describe(value)}."
            )
    if a.detector != b.detector:
        raise ValueError(
            f"a and b must come from the same detector; got {a.detector!r} and {b.detector!r}."
        )
    min_inliers = check_int("min_inliers", min_inliers, 3, 10_000)
    ratio = _check_fraction("ratio", ratio)
    min_inlier_ratio = _check_fraction("min_inlier_ratio", min_inlier_ratio)
    min_coverage = _check_fraction("min_coverage", min_coverage)
    min_spread = _check_fraction("min_spread", min_spread)
    max_rotation = _check_fraction("max_rotation", max_rotation, 0.0, 180.0)
    ransac_threshold = _check_fraction("ransac_threshold", ransac_threshold, 0.0, 0.2)
    low, high = (float(v) for v in scale_range)
    if not 0 < low <= high:
        raise ValueError(
            f"scale_range must be (low, high) with 0 < low <= high; got {scale_range!r}."
        )
    if ratio <= 0 or ransac_threshold <= 0:
        raise ValueError("ratio and ransac_threshold must be > 0.")
    cv2 = _require_cv2()
    if len(a) < min_inliers or len(b) < min_inliers:
        return _rejected(f"too few keypoints (a: {len(a)}, b: {len(b)})")
    points_a, points_b = _ratio_matches(cv2, a, b, ratio)
    if len(points_a) < min_inliers:
        return _rejected(f"too few matches ({len(points_a)} < {min_inliers})", len(points_a))
    matrix, mask = _fit_similarity(cv2, points_a, points_b, ransac_threshold)
    return _judge(
        points_a,
        points_b,
        matrix,
        mask,
        a.extent,
        b.extent,
        min_inliers=min_inliers,
        min_inlier_ratio=min_inlier_ratio,
        min_coverage=min_coverage,
        min_spread=min_spread,
        max_rotation=max_rotation,
        scale_range=(low, high),
        keypoints_b=b.keypoints,
    )


def _fit_similarity(
    cv2: Any, points_a: NDArray[np.float32], points_b: NDArray[np.float32], threshold: float
) -> tuple[NDArray[np.float64] | None, NDArray[np.uint8] | None]:
    """RANSAC fit of a similarity mapping ``points_a`` onto ``points_b`` (OpenCV seeds its RNG)."""
    matrix, mask = cv2.estimateAffinePartial2D(
        points_a,
        points_b,
        method=cv2.RANSAC,
        ransacReprojThreshold=threshold,
        maxIters=2000,
        confidence=0.995,
        refineIters=10,
    )
    return matrix, mask


def _ratio_matches(
    cv2: Any, a: Features, b: Features, ratio: float
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """Positions of the matches that pass the ratio test, A's and B's, as (m, 2) arrays."""
    if a.detector == "orb":
        matcher = cv2.BFMatcher(cv2.NORM_HAMMING)
        found = matcher.knnMatch(a.descriptors, b.descriptors, k=2)
    else:
        matcher = cv2.BFMatcher(cv2.NORM_L2)
        found = matcher.knnMatch(
            a.descriptors.astype(np.float32), b.descriptors.astype(np.float32), k=2
        )
    pairs = [
        (pair[0].queryIdx, pair[0].trainIdx)
        for pair in found
        if len(pair) == 2 and pair[0].distance < ratio * pair[1].distance
    ]
    index = np.array(pairs, dtype=np.intp).reshape(-1, 2)
    return a.keypoints[index[:, 0]], b.keypoints[index[:, 1]]


def verify_geometry(
    grey_a: NDArray[np.uint8],
    grey_b: NDArray[np.uint8],
    *,
    max_side: int = _MAX_SIDE,
    n_features: int = _N_FEATURES,
    detector: str = _DETECTOR,
    **options: Any,
) -> GeometricMatch:
    """Extract the features of two grey images and match them: is B a geometric copy of A?

    Parameters
    ----------
    grey_a, grey_b : numpy.ndarray
        2-D uint8 arrays, any sizes.
    max_side, n_features, detector
        Passed to :func:`extract_features`.
    **options
        Passed to :func:`match_features` (``min_inliers``, ``min_coverage``, ...).

    Returns
    -------
    GeometricMatch

    Examples
    --------
    >>> import numpy as np
    >>> flat = np.full((64, 64), 128, np.uint8)
    >>> verify_geometry(flat, flat).reason  # doctest: +SKIP
    'too few keypoints (a: 0, b: 0)'
    """
    kwargs: dict[str, Any] = {"max_side": max_side, "n_features": n_features, "detector": detector}
    return match_features(
        extract_features(grey_a, **kwargs), extract_features(grey_b, **kwargs), **options
    )
