"""Choose a hash threshold on the user's own images, from a table like the tutorial's.

There is no universal threshold: screenshots, scans and photographs have very
different hash distributions. :func:`calibrate_threshold` measures one on the
images at hand:

1. take a seeded sample of the readable, non-blank images;
2. make known near-duplicates of each, in memory (JPEG re-encodes, resizes, a
   small crop, brightness and contrast changes, a PNG round trip, a mirror
   image), encoded to bytes as a file would be, and hash them with the same
   decoder an audit uses;
3. positives are (original, its copy) pairs; negatives are all pairs of
   distinct sample images, the dataset's genuinely different pictures;
4. for each method and threshold: precision, recall (overall and per
   transformation) and false pairs per million unrelated pairs, plus the
   distance distribution between unrelated images.

Mirror images are expected misses of whole-image hashes: they are reported,
but left out of the recall a threshold is chosen by.

Random unrelated pairs are mostly far apart, so they say little about the
pictures a threshold really confuses. The hardest negatives are measured too:
each sample image's nearest other sample images by hash distance (not in its
planted family), the *look-alikes*. Small graphics on flat or transparent
backgrounds (sprites, icons sharing a template, recoloured shapes) have
look-alikes within any useful threshold; :class:`LookAlikeWarning` says so,
naming them, and suggests verification or a lower threshold. Sample pairs so
close on both hashes that they would be taken for real duplicates go through
the pixel check of :mod:`leakaudit.verify` first: those it tells apart are
look-alikes (and unrelated pairs), not duplicates.
"""

from __future__ import annotations

import io
import math
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from PIL import Image, ImageEnhance, ImageOps

from leakaudit._progress import Progress, progress_enabled
from leakaudit._text import first_few
from leakaudit._validation import check_choice, check_int, describe
from leakaudit.hashing import HashTable, UnreadableImageWarning, hash_sources, popcount64
from leakaudit.listing import list_image_files
from leakaudit.loading import DecodeOptions
from leakaudit.policy import AUDIT_METHODS, DEFAULT_METHOD, DEFAULT_THRESHOLDS

__all__ = [
    "LOOKALIKE_NEIGHBOURS",
    "MIN_CALIBRATION_IMAGES",
    "TRANSFORMS",
    "CalibrationResult",
    "CopyTransform",
    "LookAlikeWarning",
    "calibrate_threshold",
]

#: Fewest usable (readable, non-blank) images a calibration accepts.
MIN_CALIBRATION_IMAGES = 10

#: Nearest unrelated neighbours taken per sample image as its look-alike negatives.
LOOKALIKE_NEIGHBOURS = 3
# Look-alike pairs named in the warning and the text.
_LOOKALIKE_EXAMPLES = 3


class LookAlikeWarning(UserWarning):
    """Different images of the sample lie within the default threshold of each other.

    Typical of small graphics on flat or transparent backgrounds: a bare hash
    threshold links them; verification (or a lower threshold) keeps them apart.
    """


# Copies are made from the image as displayed, reduced to at most this many pixels on
# its long side: the hashes only look at a 32 x 32 thumbnail (decoded from >= 64 px),
# and encoding a dozen full-size copies of 12-megapixel photos would dominate the run.
_WORK_SIDE = 512
# Pairs of sample images whose pHash and dHash both lie within this distance are
# almost certainly duplicates the dataset already holds (what the audit is for: on
# real photos not one unrelated pair in 4.5M came within 8 on both), not unrelated
# images; counting them as false pairs would drag the threshold down to 0. They are
# listed in the result instead.
_LIKELY_DUPLICATE_DISTANCE = 4
# Bits kept between the recommended threshold and the sample's closest unrelated pair.
_MARGIN = 2
_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p0.1", 0.001),
    ("p1", 0.01),
    ("p5", 0.05),
    ("median", 0.5),
)
_NO_MATCH = 65  # distance given to copies no hash can link (unreadable or blank copies)
_ROW_BLOCK = 512  # rows of the unrelated-pairs distance matrix computed at once


@dataclass(frozen=True)
class CopyTransform:
    """One kind of planted near-duplicate.

    Attributes
    ----------
    name : str
        Short label used in the tables (``"jpeg_q70"``).
    description : str
        What was done, in words.
    apply : callable
        ``(image, rng) -> image``.
    format : str
        Pillow format the copy is encoded in (``"JPEG"`` or ``"PNG"``).
    quality : int
        JPEG quality.
    expected : bool
        Whether a whole-image hash is expected to catch it; False (mirror
        images) keeps it out of the recall a threshold is chosen by.
    """

    name: str
    description: str
    apply: Callable[[Image.Image, np.random.Generator], Image.Image]
    format: str = "JPEG"
    quality: int = 90
    expected: bool = True


def _same(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return image


def _half(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    size = (max(1, image.width // 2), max(1, image.height // 2))
    return image.resize(size, Image.Resampling.LANCZOS)


def _half_and_back(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return _half(image, rng).resize(image.size, Image.Resampling.BICUBIC)


def _crop(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    # 2-5% of each side removed, split at random between the two edges, resized back.
    width, height = image.size
    fraction = rng.uniform(0.02, 0.05)
    left = rng.uniform(0, fraction) * width
    top = rng.uniform(0, fraction) * height
    box = (left, top, left + (1 - fraction) * width, top + (1 - fraction) * height)
    return image.resize(image.size, Image.Resampling.LANCZOS, box=box)


def _brightness(factor: float) -> Callable[[Image.Image, np.random.Generator], Image.Image]:
    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        return ImageEnhance.Brightness(image).enhance(factor)

    return apply


def _contrast(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return ImageEnhance.Contrast(image).enhance(1.25)


def _mirror(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)


#: The near-duplicates made of every sample image (JPEG at quality 90 unless stated).
TRANSFORMS: tuple[CopyTransform, ...] = (
    CopyTransform("jpeg_q90", "JPEG re-encode, quality 90", _same, quality=90),
    CopyTransform("jpeg_q70", "JPEG re-encode, quality 70", _same, quality=70),
    CopyTransform("jpeg_q40", "JPEG re-encode, quality 40", _same, quality=40),
    CopyTransform("png", "PNG round trip", _same, format="PNG"),
    CopyTransform("resize_50", "resized to 50%", _half),
    CopyTransform("resize_50_back", "resized to 50% and back", _half_and_back),
    CopyTransform("crop_2-5%", "2-5% cropped off the edges, resized back", _crop),
    CopyTransform("bright_+15%", "brightness +15%", _brightness(1.15)),
    CopyTransform("bright_-15%", "brightness -15%", _brightness(0.85)),
    CopyTransform("contrast_+25%", "contrast +25%", _contrast),
    CopyTransform("hflip", "mirrored left-right", _mirror, expected=False),
)


@dataclass
class CalibrationResult:
    """What :func:`calibrate_threshold` measured, and the thresholds it recommends.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per method and threshold: ``method, threshold, true_pairs_found,
        false_pairs, precision, recall, recall_all, false_pairs_per_million``.
        ``recall`` counts only the expected transformations (not mirror
        images); ``recall_all`` counts every copy. Precision is over the mixed
        set (original, copy) + (unrelated, unrelated) pairs.
    per_transform : pandas.DataFrame
        One row per method, threshold and transformation: ``method, threshold,
        transform, expected, copies, found, recall``.
    unrelated_distances : pandas.DataFrame
        One row per method: ``method, pairs, min, p0.1, p1, p5, median``
        (nearest-rank percentiles of the distance between unrelated images;
        for "phash+dhash" the larger of the two distances).
    copy_distances : pandas.DataFrame
        One row per planted copy: ``original, transform, expected, phash,
        dhash, phash+dhash`` (Hamming distance to its original).
    recommended : dict of str to int
        The recommended threshold per method.
    explanation : str
        Why, in words, one paragraph per method.
    sample : list of str
        The sampled images (the originals).
    unreadable : dict of str to str
        Files that could not be read (path -> reason); skipped.
    n_blank : int
        Blank (low-information) images left out of the sample.
    likely_duplicates : list of tuple of str
        Sample pairs so close on both hashes that they are taken for real
        duplicates and left out of the unrelated pairs.
    n_files : int
        Image files the sample was drawn from.
    max_false_pairs_per_million : float
        The budget the recommendation honours.
    lookalikes : pandas.DataFrame
        The look-alike negatives: for each method, each sample image's
        :data:`LOOKALIKE_NEIGHBOURS` nearest other sample images (its hardest
        unrelated pairs), each pair once: ``method, image, neighbour,
        distance``, closest first. ``table`` gives, per threshold,
        ``lookalike_pairs``, ``lookalike_false_pairs`` (those within it) and
        ``lookalike_false_rate``.
    told_apart : list of tuple of str
        Sample pairs close enough on both hashes to pass for duplicates that
        the pixel check tells apart: counted as unrelated (and look-alikes),
        not as duplicates.
    lookalike_warning : str
        The :class:`LookAlikeWarning` message when look-alikes are linked at
        the default threshold; empty otherwise.
    """

    table: pd.DataFrame
    per_transform: pd.DataFrame
    unrelated_distances: pd.DataFrame
    copy_distances: pd.DataFrame
    recommended: dict[str, int]
    explanation: str
    sample: list[str] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)
    n_blank: int = 0
    likely_duplicates: list[tuple[str, str]] = field(default_factory=list)
    n_files: int = 0
    max_false_pairs_per_million: float = 0.0
    lookalikes: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["method", "image", "neighbour", "distance"])
    )
    told_apart: list[tuple[str, str]] = field(default_factory=list)
    lookalike_warning: str = ""

    @property
    def n_unrelated_pairs(self) -> int:
        """The number of unrelated pairs every false-pair rate is measured on."""
        return (
            int(self.unrelated_distances["pairs"].iloc[0]) if len(self.unrelated_distances) else 0
        )

    def to_text(self) -> str:
        """Return the tables and the recommendation as readable text.

        pHash distances are always even (32 of its 64 bits are set), so the
        pHash table shows even thresholds only.
        """
        n = len(self.sample)
        lines = [
            f"Threshold calibration on {n} of {self.n_files} images "
            f"({len(self.unreadable)} unreadable, {self.n_blank} blank left out), "
            f"{len(self.copy_distances)} planted copies, "
            f"{self.n_unrelated_pairs:,} unrelated pairs.",
        ]
        if self.likely_duplicates:
            lines.append(
                f"{len(self.likely_duplicates)} sample pair(s) look like real duplicates "
                f"(both hashes within {_LIKELY_DUPLICATE_DISTANCE}) and were not counted as "
                "unrelated:"
            )
            for first, second in self.likely_duplicates[:5]:
                lines.append(f"  {first}  ~  {second}")
            if len(self.likely_duplicates) > 5:
                lines.append(f"  ... and {len(self.likely_duplicates) - 5} more")
        for method in self.table["method"].unique():
            rows = self.table[self.table["method"] == method]
            if method == "phash":
                rows = rows[rows["threshold"] % 2 == 0]
            chosen = self.recommended.get(str(method))
            lines += [
                "",
                f"{method}" + (" (both distances <= threshold)" if method == "phash+dhash" else ""),
                "threshold  found copies  false pairs  precision  recall  recall+flip  false/1M",
            ]
            for row in rows.itertuples(index=False):
                mark = "  <- recommended" if row.threshold == chosen else ""
                lines.append(
                    f"{row.threshold:9d} {row.true_pairs_found:13d} {row.false_pairs:12d} "
                    f"{row.precision:10.1%} {row.recall:7.1%} {row.recall_all:12.1%} "
                    f"{row.false_pairs_per_million:9.1f}{mark}"
                )
        lines += ["", "Recall per transformation at the recommended thresholds:"]
        methods = list(self.recommended)
        lines.append(f"{'transform':16s}" + "".join(f"{m:>14s}" for m in methods))
        for transform in TRANSFORMS:
            cells = []
            for method in methods:
                hit = self.per_transform[
                    (self.per_transform["method"] == method)
                    & (self.per_transform["threshold"] == self.recommended[method])
                    & (self.per_transform["transform"] == transform.name)
                ]
                cells.append(f"{hit['recall'].iloc[0]:14.1%}" if len(hit) else f"{'-':>14s}")
            suffix = "" if transform.expected else "  (expected miss; not in recall)"
            lines.append(f"{transform.name:16s}" + "".join(cells) + suffix)
        lines += [
            "",
            "Distance between unrelated images in this dataset:",
            f"{'method':12s} {'pairs':>10s} {'min':>5s} {'0.1%':>5s} {'1%':>5s} {'5%':>5s} "
            f"{'median':>7s}",
        ]
        for row in self.unrelated_distances.to_dict("records"):
            lines.append(
                f"{row['method']:12s} {row['pairs']:10,d} {_cell(row['min']):>5s} "
                f"{_cell(row['p0.1']):>5s} {_cell(row['p1']):>5s} {_cell(row['p5']):>5s} "
                f"{_cell(row['median']):>7s}"
            )
        lines += self._lookalike_lines()
        lines += ["", "Recommendation:", self.explanation]
        return "\n".join(lines)

    def _lookalike_lines(self) -> list[str]:
        if "lookalike_pairs" not in self.table or not len(self.lookalikes):
            return []
        lines = [
            "",
            f"Look-alike negatives (each image's {LOOKALIKE_NEIGHBOURS} nearest other images, "
            "the hardest unrelated pairs):",
            f"{'method':12s} {'pairs':>7s} {'nearest':>8s} {'linked at default':>18s} "
            f"{'linked at recommended':>22s}",
        ]
        for method in self.table["method"].unique():
            rows = self.table[self.table["method"] == method].set_index("threshold")
            mine = self.lookalikes[self.lookalikes["method"] == method]
            cells = []
            for threshold in (DEFAULT_THRESHOLDS.get(str(method)), self.recommended.get(method)):
                if threshold is None or threshold not in rows.index:
                    cells.append("-")
                    continue
                row = rows.loc[threshold]
                cells.append(
                    f"{int(row['lookalike_false_pairs'])} ({row['lookalike_false_rate']:.1%}) "
                    f"at {threshold}"
                )
            nearest = str(int(mine["distance"].min())) if len(mine) else "-"
            lines.append(
                f"{method:12s} {int(rows['lookalike_pairs'].iloc[0]):7d} {nearest:>8s} "
                f"{cells[0]:>18s} {cells[1]:>22s}"
            )
        if self.told_apart:
            lines.append(
                f"{len(self.told_apart)} sample pair(s) within {_LIKELY_DUPLICATE_DISTANCE} bits "
                "on both hashes were told apart by the pixel check (different images, not "
                "duplicates)."
            )
        if self.lookalike_warning:
            lines.append("Warning: " + self.lookalike_warning)
        return lines


def _cell(value: Any) -> str:
    return "-" if value is None or bool(pd.isna(value)) else str(value)


# ------------------------------------------------------------------------------ sampling


def _image_paths(paths_or_folder: Any) -> list[str]:
    if isinstance(paths_or_folder, (str, os.PathLike)):
        return [os.fspath(p) for p in list_image_files(paths_or_folder)]
    if isinstance(paths_or_folder, Iterable) and not isinstance(
        paths_or_folder, (bytes, bytearray)
    ):
        paths: list[str] = []
        for i, item in enumerate(paths_or_folder):
            if not isinstance(item, (str, os.PathLike)):
                raise TypeError(f"paths_or_folder[{i}] must be a path; got {describe(item)}.")
            paths.append(os.fspath(item))
        return paths
    raise TypeError(
        "paths_or_folder must be a folder or a list of image paths; "
        f"got {describe(paths_or_folder)}."
    )


def _open_for_copies(path: str, options: DecodeOptions) -> Image.Image:
    """Open ``path`` as displayed (EXIF orientation, flattened alpha), at most _WORK_SIDE px."""
    with Image.open(path) as opened:
        opened.draft("RGB", (_WORK_SIDE, _WORK_SIDE))
        opened.seek(0)
        image = ImageOps.exif_transpose(opened) if options.exif_transpose else opened.copy()
    if image.mode in ("RGBA", "LA", "PA", "P"):
        rgba = image.convert("RGBA")
        canvas = Image.new("RGBA", rgba.size, (*options.background, 255))
        image = Image.alpha_composite(canvas, rgba)
    image = image.convert("RGB")
    image.thumbnail((_WORK_SIDE, _WORK_SIDE), Image.Resampling.LANCZOS)
    return image


def _encode(image: Image.Image, transform: CopyTransform) -> bytes:
    buffer = io.BytesIO()
    if transform.format == "JPEG":
        image.save(buffer, "JPEG", quality=transform.quality)
    else:
        image.save(buffer, transform.format)
    return buffer.getvalue()


@dataclass
class _Sample:
    paths: list[str]
    phash: NDArray[np.uint64]
    dhash: NDArray[np.uint64]
    images: list[Image.Image]
    unreadable: dict[str, str]
    n_blank: int


def _draw_sample(
    paths: list[str],
    sample_size: int,
    seed: int,
    options: DecodeOptions,
    workers: int | None,
    progress: bool | None,
) -> _Sample:
    """Hash files in a seeded order until ``sample_size`` usable images are found."""
    order = np.random.default_rng(seed).permutation(len(paths))
    candidates = [paths[i] for i in order]
    kept: list[str] = []
    phash: list[int] = []
    dhash: list[int] = []
    images: list[Image.Image] = []
    unreadable: dict[str, str] = {}
    n_blank = 0
    start = 0
    while len(kept) < sample_size and start < len(candidates):
        # A little slack: a few files in any batch are usually unreadable or blank.
        want = sample_size - len(kept)
        batch = candidates[start : start + want + max(4, want // 10)]
        start += len(batch)
        table: HashTable = hash_sources(
            batch, decode=options, workers=workers, progress=progress, on_error="ignore"
        )
        for i, path in enumerate(batch):
            if len(kept) >= sample_size:
                break
            if not table.valid[i]:
                unreadable[path] = table.errors.get(i, "unreadable")
                continue
            if table.low_information[i]:
                n_blank += 1
                continue
            try:
                image = _open_for_copies(path, options)
            except Exception as error:  # the hash decoded it; a full decode may still fail
                unreadable[path] = f"{type(error).__name__}: {error}"
                continue
            kept.append(path)
            phash.append(int(table.phash[i]))
            dhash.append(int(table.dhash[i]))
            images.append(image)
    return _Sample(
        paths=kept,
        phash=np.array(phash, dtype=np.uint64),
        dhash=np.array(dhash, dtype=np.uint64),
        images=images,
        unreadable=unreadable,
        n_blank=n_blank,
    )


# ------------------------------------------------------------------------------ measuring


def _unrelated_histograms(
    phash: NDArray[np.uint64], dhash: NDArray[np.uint64]
) -> tuple[dict[str, NDArray[np.int64]], list[tuple[int, int]]]:
    """Histogram (0..64) of every method's distance over all distinct pairs.

    Pairs close on both hashes (likely real duplicates) are returned apart and
    left out of the histograms. Computed in row blocks, so memory stays small.
    """
    n = len(phash)
    bins = {method: np.zeros(65, dtype=np.int64) for method in AUDIT_METHODS}
    likely: list[tuple[int, int]] = []
    for a in range(0, n, _ROW_BLOCK):
        b = min(n, a + _ROW_BLOCK)
        rows = np.arange(a, b)[:, None]
        upper = np.arange(n)[None, :] > rows
        dp = popcount64(phash[a:b, None] ^ phash[None, :]).astype(np.int64)
        dd = popcount64(dhash[a:b, None] ^ dhash[None, :]).astype(np.int64)
        close = upper & (dp <= _LIKELY_DUPLICATE_DISTANCE) & (dd <= _LIKELY_DUPLICATE_DISTANCE)
        for i, j in zip(*np.nonzero(close), strict=True):
            likely.append((int(i) + a, int(j)))
        keep = upper & ~close
        for method, values in (("phash", dp), ("dhash", dd), ("phash+dhash", np.maximum(dp, dd))):
            bins[method] += np.bincount(values[keep], minlength=65)[:65]
    return bins, likely


def _told_apart(
    paths: list[str], likely: list[tuple[int, int]], options: DecodeOptions
) -> list[tuple[int, int]]:
    """The likely-duplicate pairs that the pixel check rejects: different images after all.

    A pair it accepts, leaves open or cannot read again stays a likely duplicate.
    """
    if not likely:
        return []
    from leakaudit.verify import compare_views, load_view

    views: dict[int, Any] = {}

    def view(index: int) -> Any:
        if index not in views:
            try:
                views[index] = load_view(paths[index], paths[index], options)
            except (OSError, ValueError, MemoryError):
                views[index] = None
        return views[index]

    apart = []
    for i, j in likely:
        first, second = view(i), view(j)
        if first is None or second is None:
            continue
        verdict = compare_views(first, second)
        if not verdict.accepted and verdict.stage == "pixels":
            apart.append((i, j))
    return apart


def _pair_distances(
    phash: NDArray[np.uint64], dhash: NDArray[np.uint64], pairs: NDArray[np.int64]
) -> dict[str, NDArray[np.int64]]:
    """Each method's distance of each row pair ``(i, j)``."""
    dp = popcount64(phash[pairs[:, 0]] ^ phash[pairs[:, 1]]).astype(np.int64)
    dd = popcount64(dhash[pairs[:, 0]] ^ dhash[pairs[:, 1]]).astype(np.int64)
    return {"phash": dp, "dhash": dd, "phash+dhash": np.maximum(dp, dd)}


def _lookalike_pairs(
    phash: NDArray[np.uint64],
    dhash: NDArray[np.uint64],
    excluded: list[tuple[int, int]],
    neighbours: int = LOOKALIKE_NEIGHBOURS,
) -> dict[str, tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Per method, each image's ``neighbours`` nearest other images: pairs ``i < j`` and distances.

    ``excluded`` pairs (likely real duplicates) are never neighbours. Each pair
    once, closest first. Computed in row blocks, so memory stays small.
    """
    n = len(phash)
    k = min(neighbours, n - 1)
    skip = np.array(excluded, dtype=np.int64).reshape(-1, 2)
    found: dict[str, list[NDArray[np.int64]]] = {method: [] for method in AUDIT_METHODS}
    for a in range(0, n, _ROW_BLOCK):
        b = min(n, a + _ROW_BLOCK)
        dp = popcount64(phash[a:b, None] ^ phash[None, :]).astype(np.int64)
        dd = popcount64(dhash[a:b, None] ^ dhash[None, :]).astype(np.int64)
        rows = np.arange(a, b)
        for method, values in (("phash", dp), ("dhash", dd), ("phash+dhash", np.maximum(dp, dd))):
            values = values.copy()
            values[rows - a, rows] = 1000  # an image is not its own neighbour
            for i, j in ((skip[:, 0], skip[:, 1]), (skip[:, 1], skip[:, 0])):
                mine = (i >= a) & (i < b)
                values[i[mine] - a, j[mine]] = 1000
            nearest = np.argpartition(values, k - 1, axis=1)[:, :k] if k > 0 else rows[:, :0]
            first = np.repeat(rows, nearest.shape[1])
            second = nearest.ravel()
            keep = values[first - a, second] < 1000
            found[method].append(
                np.stack([np.minimum(first, second), np.maximum(first, second)], axis=1)[keep]
            )
    result = {}
    for method, parts in found.items():
        pairs = np.unique(np.concatenate(parts).reshape(-1, 2), axis=0).astype(np.int64)
        distance = _pair_distances(phash, dhash, pairs)[method]
        order = np.argsort(distance, kind="stable")
        result[method] = (pairs[order], distance[order])
    return result


def _lookalike_message(
    method: str, pairs: NDArray[np.int64], distance: NDArray[np.int64], paths: list[str]
) -> str:
    """The :class:`LookAlikeWarning` text, or "" when no look-alike is within the default."""
    threshold = DEFAULT_THRESHOLDS.get(method)
    if threshold is None or not len(distance):
        return ""
    linked = np.flatnonzero(distance <= threshold)
    if not len(linked):
        return ""
    examples = "; ".join(
        f"{paths[int(pairs[r, 0])]} ~ {paths[int(pairs[r, 1])]} ({int(distance[r])} bits)"
        for r in linked[:_LOOKALIKE_EXAMPLES]
    )
    more = (
        f"; and {len(linked) - _LOOKALIKE_EXAMPLES} more"
        if len(linked) > _LOOKALIKE_EXAMPLES
        else ""
    )
    closest = int(distance.min())
    lower = (
        f"a threshold of at most {closest - 1} keeps these apart"
        if closest > 0
        else "no threshold keeps them all apart: some are 0 bits apart"
    )
    return (
        f"{len(linked)} of {len(distance)} look-alike pair(s) (each image's nearest other "
        f"images, all different pictures) are within the default {method} threshold "
        f"{threshold}, so a bare threshold would link them: {examples}{more}. This is typical "
        "of small graphics on flat or transparent backgrounds (sprites, icons sharing a "
        "template, recoloured shapes). Audit with verification (verify=True), which checks "
        f"each candidate pair's pixels before it links, or lower the threshold ({lower})."
    )


def _nearest_rank(histogram: NDArray[np.int64], fraction: float) -> int | None:
    total = int(histogram.sum())
    if total == 0:
        return None
    rank = max(1, math.ceil(fraction * total))
    return int(np.searchsorted(np.cumsum(histogram), rank))


def _recommend(
    method: str,
    rows: pd.DataFrame,
    budget: float,
    n_pairs: int,
    nearest: int | None,
) -> tuple[int, str]:
    """Pick the smallest threshold reaching the best recall within the false-pair budget.

    Thresholds must also stay ``_MARGIN`` bits below the closest unrelated pair of
    the sample: the whole dataset holds far more pairs than the sample, so its
    closest unrelated pair is nearer than the sample's.
    """
    budget_text = "no false pair" if budget == 0 else f"at most {budget:g} false pairs per million"
    within = rows[rows["false_pairs_per_million"] <= budget]
    if within.empty:
        first = rows.iloc[0]
        return int(first["threshold"]), (
            f"{method}: {int(first['threshold'])}. Even the smallest threshold makes "
            f"{int(first['false_pairs'])} false pair(s) among {n_pairs:,} unrelated pairs, over "
            f"the budget ({budget_text}); this hash does not separate your images well: look "
            "at the closest unrelated pairs, or prefer another method."
        )
    limit = 64 if nearest is None else nearest - _MARGIN
    feasible = within[within["threshold"] <= limit]
    margin_kept = not feasible.empty
    if not margin_kept:
        feasible = within
    best = float(feasible["recall"].max())
    chosen = feasible[feasible["recall"] >= best].iloc[0]
    threshold = int(chosen["threshold"])
    edge = int(within["threshold"].max())
    if method == "phash":
        edge -= edge % 2  # pHash distances are even: t and t + 1 flag the same pairs
    text = (
        f"{method}: {threshold}. It finds {best:.1%} of the expected copies "
        f"(mirror images left out; {float(chosen['recall_all']):.1%} counting them) with "
        f"{budget_text} among {n_pairs:,} unrelated pairs"
    )
    if nearest is not None:
        text += f". The closest unrelated pair is at distance {nearest}"
        if margin_kept:
            text += f"; a margin of at least {_MARGIN} bits to it is kept"
        else:
            text += f", too close to keep a margin of {_MARGIN} bits"
    if edge > threshold:
        largest = " (the largest measured)" if edge >= int(rows["threshold"].max()) - 1 else ""
        text += f". Thresholds up to {edge}{largest} make no more false pairs in this sample" + (
            " but buy no more recall" if float(within["recall"].max()) <= best else ""
        )
    if budget == 0 and n_pairs:
        # Rule of three: zero events in n trials bounds the rate below 3/n at 95%.
        text += (
            f". Zero false pairs in {n_pairs:,} bounds the true rate below "
            f"{3e6 / n_pairs:,.0f} per million (95%); a larger --sample tightens this"
        )
    default = DEFAULT_THRESHOLDS.get(method)
    if default is not None:
        text += f". The library default is {default}"
    return threshold, text + "."


def _check_options(
    methods: Sequence[str],
    thresholds: Iterable[int],
    max_false_pairs_per_million: float,
    decode: DecodeOptions | None,
) -> tuple[list[str], list[int], float, DecodeOptions]:
    """Validate :func:`calibrate_threshold`'s options (one wording with the rest)."""
    if isinstance(methods, str):
        methods = [methods]
    chosen = [check_choice("methods", m, AUDIT_METHODS) for m in methods]
    if not chosen:
        raise ValueError("methods must name at least one method; got an empty sequence.")
    levels = sorted({check_int("thresholds", t, 0, 64) for t in thresholds})
    if not levels:
        raise ValueError("thresholds must hold at least one int in [0, 64]; got none.")
    budget = max_false_pairs_per_million
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget >= 0:
        raise ValueError(
            f"max_false_pairs_per_million must be a number >= 0; got {describe(budget)}."
        )
    options = decode if decode is not None else DecodeOptions()
    if not isinstance(options, DecodeOptions):
        raise TypeError(f"decode must be a DecodeOptions; got {describe(decode)}.")
    return list(dict.fromkeys(chosen)), levels, float(budget), options


def _warn_unreadable(unreadable: dict[str, str]) -> None:
    if not unreadable:
        return
    listed = first_few((f"{p} ({why})" for p, why in unreadable.items()), len(unreadable))
    warnings.warn(
        f"{len(unreadable)} sampled image(s) could not be read and were skipped: {listed}.",
        UnreadableImageWarning,
        stacklevel=3,
    )


@dataclass
class _PlantedCopies:
    """Distances from every planted copy to its original, per method."""

    distance: dict[str, NDArray[np.int64]]
    expected: NDArray[np.bool_]
    names: NDArray[Any]
    frame: pd.DataFrame


def _planted_copies(
    sample: _Sample,
    seed: int,
    options: DecodeOptions,
    workers: int | None,
    progress: bool | None,
) -> _PlantedCopies:
    """Make the known copies of each sample image, encoded as files, and hash them."""
    n = len(sample.paths)
    copies: list[bytes] = []
    origin: list[int] = []
    kinds: list[CopyTransform] = []
    bar = Progress(
        n, label="making copies", enabled=progress_enabled(progress, n * len(TRANSFORMS))
    )
    for index, image in enumerate(sample.images):
        for position, transform in enumerate(TRANSFORMS):
            rng = np.random.default_rng([seed, index, position])
            copies.append(_encode(transform.apply(image, rng), transform))
            origin.append(index)
            kinds.append(transform)
        bar.update()
    bar.close()
    sample.images.clear()
    hashed = hash_sources(
        copies, decode=options, workers=workers, progress=progress, on_error="ignore"
    )
    source = np.array(origin, dtype=np.int64)
    usable = hashed.valid & ~hashed.low_information  # an audit links neither by hash
    copy_phash = popcount64(hashed.phash ^ sample.phash[source]).astype(np.int64)
    copy_dhash = popcount64(hashed.dhash ^ sample.dhash[source]).astype(np.int64)
    copy_phash[~usable] = _NO_MATCH
    copy_dhash[~usable] = _NO_MATCH
    distance = {
        "phash": copy_phash,
        "dhash": copy_dhash,
        "phash+dhash": np.maximum(copy_phash, copy_dhash),
    }
    expected = np.array([t.expected for t in kinds], dtype=bool)
    names = np.array([t.name for t in kinds], dtype=object)
    frame = pd.DataFrame(
        {
            "original": [sample.paths[i] for i in origin],
            "transform": names,
            "expected": expected,
            "phash": copy_phash,
            "dhash": copy_dhash,
            "phash+dhash": distance["phash+dhash"],
        }
    )
    return _PlantedCopies(distance, expected, names, frame)


def _method_rows(
    method: str,
    copies: _PlantedCopies,
    histogram: NDArray[np.int64],
    levels: list[int],
    n_pairs: int,
    lookalike: NDArray[np.int64],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The threshold table's rows and the per-transformation rows of one method.

    ``lookalike`` holds the distances of the method's look-alike pairs.
    """
    distance, expected, names = copies.distance[method], copies.expected, copies.names
    cumulative = np.cumsum(histogram)
    rows: list[dict[str, Any]] = []
    per_transform: list[dict[str, Any]] = []
    for t in levels:
        hit = distance <= t
        false_pairs = int(cumulative[t])
        found = int(hit.sum())
        flagged = found + false_pairs
        rows.append(
            {
                "method": method,
                "threshold": t,
                "true_pairs_found": found,
                "false_pairs": false_pairs,
                "precision": found / flagged if flagged else 1.0,
                "recall": float(hit[expected].mean()) if expected.any() else math.nan,
                "recall_all": float(hit.mean()),
                "false_pairs_per_million": 1e6 * false_pairs / n_pairs if n_pairs else 0.0,
                "lookalike_pairs": len(lookalike),
                "lookalike_false_pairs": int((lookalike <= t).sum()),
                "lookalike_false_rate": float((lookalike <= t).mean()) if len(lookalike) else 0.0,
            }
        )
        for transform in TRANSFORMS:
            mine = names == transform.name
            per_transform.append(
                {
                    "method": method,
                    "threshold": t,
                    "transform": transform.name,
                    "expected": transform.expected,
                    "copies": int(mine.sum()),
                    "found": int(hit[mine].sum()),
                    "recall": float(hit[mine].mean()) if mine.any() else math.nan,
                }
            )
    return rows, per_transform


def calibrate_threshold(
    paths_or_folder: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    sample_size: int = 200,
    methods: Sequence[str] = AUDIT_METHODS,
    thresholds: Iterable[int] = range(0, 17),
    max_false_pairs_per_million: float = 0.0,
    seed: int = 0,
    workers: int | None = None,
    progress: bool | None = None,
    decode: DecodeOptions | None = None,
) -> CalibrationResult:
    """Measure precision and recall of each hash threshold on the user's own images.

    A seeded sample of the readable, non-blank images is taken; known
    near-duplicates of each (see :data:`TRANSFORMS`) are made in memory,
    encoded as files would be, and hashed by the same decoder as an audit.
    Positives are (original, copy) pairs; negatives are all pairs of distinct
    sample images, and the hardest of them, each image's
    :data:`LOOKALIKE_NEIGHBOURS` nearest other images (the look-alikes), are
    measured apart: their false-link rate per threshold is in ``table``.

    The recommended threshold of a method is the smallest one that reaches the
    highest recall (over the expected transformations: mirror images are
    reported but left out, whole-image hashes cannot catch them) among the
    thresholds whose false-pair rate stays within the budget.

    Parameters
    ----------
    paths_or_folder : path-like or sequence of path-like
        A folder (scanned recursively, split folders included) or image paths.
    sample_size : int, default 200
        Images to sample; unrelated pairs grow as its square (200 -> 19,900).
    methods : sequence of str, default ("phash+dhash", "phash", "dhash")
        Methods to measure; "phash+dhash" links a pair when both distances are
        within the threshold, as in the audit.
    thresholds : iterable of int, default range(0, 17)
        Thresholds to measure, each in [0, 64].
    max_false_pairs_per_million : float, default 0.0
        The false-pair budget the recommendation honours (0: none at all in
        the sample).
    seed : int, default 0
        Seed of the sample and of the random crops.
    workers : int, optional
        Processes for hashing; default all usable cores.
    progress : bool, optional
        Progress bars on stderr; default only on long runs in a terminal.
    decode : DecodeOptions, optional
        Decoding policy, as in :func:`~leakaudit.audit_splits`.

    Returns
    -------
    CalibrationResult
        The tables, the recommended threshold per method and the reasons.

    Raises
    ------
    ValueError
        Fewer than :data:`MIN_CALIBRATION_IMAGES` usable images, or a bad argument.

    Warns
    -----
    UnreadableImageWarning
        Once, naming the sampled files that could not be read (they are skipped).
    LookAlikeWarning
        When look-alike negatives (each image's nearest other sample images)
        lie within the default threshold of the default method: how many, a
        few of them, and what to do (verification, or a lower threshold).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from leakaudit.demo import photo_like_image
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> for seed in range(12):
    ...     photo_like_image(seed).save(folder / f"{seed}.jpg", quality=92)
    >>> result = calibrate_threshold(folder, sample_size=12, workers=1)
    >>> sorted(result.recommended)
    ['dhash', 'phash', 'phash+dhash']
    >>> 0 <= result.recommended["phash+dhash"] <= 16
    True
    """
    sample_size = check_int("sample_size", sample_size, MIN_CALIBRATION_IMAGES)
    seed = check_int("seed", seed, 0)
    chosen_methods, levels, budget, options = _check_options(
        methods, thresholds, max_false_pairs_per_million, decode
    )
    paths = _image_paths(paths_or_folder)
    sample = _draw_sample(paths, sample_size, seed, options, workers, progress)
    _warn_unreadable(sample.unreadable)
    n = len(sample.paths)
    if n < MIN_CALIBRATION_IMAGES:
        raise ValueError(
            f"calibration needs at least {MIN_CALIBRATION_IMAGES} readable, non-blank images; "
            f"found {n} among {len(paths)} image file(s) ({len(sample.unreadable)} unreadable, "
            f"{sample.n_blank} blank)."
        )
    copies = _planted_copies(sample, seed, options, workers, progress)
    histograms, likely = _unrelated_histograms(sample.phash, sample.dhash)
    apart = _told_apart(sample.paths, likely, options)
    if apart:  # different images after all: unrelated pairs, not duplicates
        likely = [pair for pair in likely if pair not in set(apart)]
        found = _pair_distances(sample.phash, sample.dhash, np.array(apart, dtype=np.int64))
        for method, values in found.items():
            histograms[method] += np.bincount(values, minlength=65)[:65]
    n_pairs = int(histograms["phash"].sum())
    lookalikes = _lookalike_pairs(sample.phash, sample.dhash, likely)

    table_rows: list[dict[str, Any]] = []
    transform_rows: list[dict[str, Any]] = []
    unrelated_rows: list[dict[str, Any]] = []
    recommended: dict[str, int] = {}
    reasons: list[str] = []
    for method in chosen_methods:
        rows, per_transform = _method_rows(
            method, copies, histograms[method], levels, n_pairs, lookalikes[method][1]
        )
        table_rows.extend(rows)
        transform_rows.extend(per_transform)
        row: dict[str, Any] = {"method": method, "pairs": n_pairs}
        row["min"] = _nearest_rank(histograms[method], 0.0)
        for label, fraction in _PERCENTILES:
            row[label] = _nearest_rank(histograms[method], fraction)
        unrelated_rows.append(row)
        threshold, reason = _recommend(method, pd.DataFrame(rows), budget, n_pairs, row["min"])
        recommended[method] = threshold
        reasons.append(reason)

    warned = DEFAULT_METHOD if DEFAULT_METHOD in chosen_methods else chosen_methods[0]
    message = _lookalike_message(warned, *lookalikes[warned], sample.paths)
    if message:
        warnings.warn(message, LookAlikeWarning, stacklevel=2)
    lookalike_frame = pd.DataFrame(
        [
            {
                "method": method,
                "image": sample.paths[int(i)],
                "neighbour": sample.paths[int(j)],
                "distance": int(d),
            }
            for method in chosen_methods
            for (i, j), d in zip(*lookalikes[method], strict=True)
        ],
        columns=["method", "image", "neighbour", "distance"],
    )
    if likely:
        reasons.append(
            f"{len(likely)} pair(s) of sample images are within {_LIKELY_DUPLICATE_DISTANCE} bits "
            "on both hashes: taken for duplicates your data already holds (run an audit), not "
            "counted as unrelated."
        )
    return CalibrationResult(
        table=pd.DataFrame(table_rows),
        per_transform=pd.DataFrame(transform_rows),
        unrelated_distances=pd.DataFrame(unrelated_rows).astype(
            {k: "Int64" for k in ("min", *(label for label, _ in _PERCENTILES))}
        ),
        copy_distances=copies.frame,
        recommended=recommended,
        explanation="\n".join(reasons),
        sample=list(sample.paths),
        unreadable=dict(sample.unreadable),
        n_blank=sample.n_blank,
        likely_duplicates=[(sample.paths[i], sample.paths[j]) for i, j in likely],
        n_files=len(paths),
        max_false_pairs_per_million=budget,
        lookalikes=lookalike_frame,
        told_apart=[(sample.paths[i], sample.paths[j]) for i, j in apart],
        lookalike_warning=message,
    )
