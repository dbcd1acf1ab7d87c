"""Measure, on the user's own images, how well the audit finds copies, and choose a threshold.

There is no universal threshold: screenshots, scans and photographs have very
different hash distributions. :func:`calibrate_threshold` measures on the
images at hand:

1. take a seeded sample of the readable, non-blank images;
2. make known near-duplicates of each, in memory (JPEG re-encodes, resizes, a
   small crop, brightness and contrast changes, a PNG round trip, a mirror
   image), encoded to bytes as a file would be;
3. run the default audit (:func:`~leakaudit.audit_sources` with its defaults,
   as ``leakaudit scan`` and :func:`~leakaudit.audit_splits` run it: both
   hashes, dihedral matching, every candidate pair verified) on the sample's
   files and the copies: the share of each kind of copy it groups with its
   original, and the pairs of distinct sample images it links. This is the
   headline recommendation, in options the audit takes (the defaults, unless
   another setting measures better);
4. for the bare threshold (``verify=False``, ``--no-verify``), with the
   audit's hashes in their canonical orientations (so mirror images are found):
   positives are (original, its copy) pairs, negatives all pairs of distinct
   sample images; for each method and threshold, precision, recall (overall
   and per transformation) and false pairs per million unrelated pairs, plus
   the distance distribution between unrelated images, and the threshold to
   pass with ``--no-verify``.

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

import math
import os
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from PIL import Image

from leakaudit._calibrate_copies import TRANSFORMS, CopyTransform, plant_copies
from leakaudit._calibrate_copies import copies_of as _copies_of
from leakaudit._calibrate_copies import open_for_copies as _open_for_copies
from leakaudit._calibrate_result import DEFAULT_AUDIT as _DEFAULT_AUDIT
from leakaudit._calibrate_result import LIKELY_DUPLICATE_DISTANCE as _LIKELY_DUPLICATE_DISTANCE
from leakaudit._calibrate_result import LOOKALIKE_NEIGHBOURS, CalibrationResult
from leakaudit._progress import Progress, progress_enabled
from leakaudit._text import bits, first_few
from leakaudit._validation import check_choice, check_int, describe
from leakaudit.audit import audit_sources
from leakaudit.hashing import HashTable, UnreadableImageWarning, hash_sources, popcount64
from leakaudit.listing import list_image_files
from leakaudit.loading import DecodeOptions
from leakaudit.policy import AUDIT_METHODS, DEFAULT_METHOD, DEFAULT_THRESHOLDS
from leakaudit.verify import compare_views, load_view

__all__ = [
    "LOOKALIKE_NEIGHBOURS",
    "MIN_CALIBRATION_IMAGES",
    "TRANSFORMS",
    "CalibrationResult",
    "CopyTransform",
    "LookAlikeWarning",
    "bare_flags",
    "calibrate_threshold",
    "plant_copies",
]

#: Fewest usable (readable, non-blank) images a calibration accepts.
MIN_CALIBRATION_IMAGES = 10

# Look-alike pairs named in the warning and the text.
_LOOKALIKE_EXAMPLES = 3


class LookAlikeWarning(UserWarning):
    """Different images of the sample lie within the default threshold of each other.

    Typical of small graphics on flat or transparent backgrounds: a bare hash
    threshold links them; verification (or a lower threshold) keeps them apart.
    """


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


@dataclass
class _Entries:
    """Each row's whole-image hashes in its canonical orientation(s), as the audit compares.

    Row ``r``'s entries are ``phash[start[r]:start[r + 1]]`` (and ``dhash``); a
    row without entries (unreadable, blank) matches nothing by hash.
    """

    start: NDArray[np.int64]
    phash: NDArray[np.uint64]
    dhash: NDArray[np.uint64]

    @classmethod
    def from_run(cls, run: _AuditRun, rows: int, fallback: _Sample) -> _Entries:
        """The audits' dihedral entries; a sample image without any gets its stored hashes."""
        owner, phash, dhash = run.owner, run.phash, run.dhash
        missing = np.setdiff1d(np.arange(len(fallback.paths)), owner)
        if len(missing):  # not expected (same decoder): keep the sample's own hashes
            owner = np.concatenate([owner, missing])
            phash = np.concatenate([phash, fallback.phash[missing]])
            dhash = np.concatenate([dhash, fallback.dhash[missing]])
            order = np.argsort(owner, kind="stable")
            owner, phash, dhash = owner[order], phash[order], dhash[order]
        start = np.searchsorted(owner, np.arange(rows + 1)).astype(np.int64)
        return cls(start, phash, dhash)

    def pair(self, i: int, j: int) -> tuple[int, int, int]:
        """``(phash, dhash, phash+dhash)`` distances of rows i and j: the closest entries."""
        a = slice(self.start[i], self.start[i + 1])
        b = slice(self.start[j], self.start[j + 1])
        if a.start == a.stop or b.start == b.stop:
            return _NO_MATCH, _NO_MATCH, _NO_MATCH
        dp = popcount64(self.phash[a, None] ^ self.phash[None, b]).astype(np.int64)
        dd = popcount64(self.dhash[a, None] ^ self.dhash[None, b]).astype(np.int64)
        return int(dp.min()), int(dd.min()), int(np.maximum(dp, dd).min())

    def blocks(self, n: int) -> Iterator[tuple[int, int, dict[str, NDArray[np.int64]]]]:
        """Rows ``a:b`` of the ``n x n`` distance matrices of rows 0..n-1, per method.

        Each method takes its closest pair of entries (for "phash+dhash", the
        entry pair whose larger distance is smallest, as the audit matches).
        Every one of the n rows must have an entry.
        """
        columns = slice(self.start[0], self.start[n])
        heads = self.start[:n] - self.start[0]
        for a in range(0, n, _ROW_BLOCK):
            b = min(n, a + _ROW_BLOCK)
            rows = slice(self.start[a], self.start[b])
            dp = popcount64(self.phash[rows, None] ^ self.phash[None, columns]).astype(np.int64)
            dd = popcount64(self.dhash[rows, None] ^ self.dhash[None, columns]).astype(np.int64)
            firsts = self.start[a:b] - self.start[a]
            found = {}
            for method, values in (
                ("phash", dp),
                ("dhash", dd),
                ("phash+dhash", np.maximum(dp, dd)),
            ):
                by_column = np.minimum.reduceat(values, heads, axis=1)
                found[method] = np.minimum.reduceat(by_column, firsts, axis=0)
            yield a, b, found


def _unrelated_histograms(
    entries: _Entries, n: int
) -> tuple[dict[str, NDArray[np.int64]], list[tuple[int, int]]]:
    """Histogram (0..64) of every method's distance over all distinct pairs of the sample.

    Pairs close on both hashes (likely real duplicates) are returned apart and
    left out of the histograms. Computed in row blocks, so memory stays small.
    """
    bins = {method: np.zeros(65, dtype=np.int64) for method in AUDIT_METHODS}
    likely: list[tuple[int, int]] = []
    for a, b, values in entries.blocks(n):
        upper = np.arange(n)[None, :] > np.arange(a, b)[:, None]
        close = upper & (values["phash+dhash"] <= _LIKELY_DUPLICATE_DISTANCE)
        for i, j in zip(*np.nonzero(close), strict=True):
            likely.append((int(i) + a, int(j)))
        keep = upper & ~close
        for method in AUDIT_METHODS:
            bins[method] += np.bincount(values[method][keep], minlength=65)[:65]
    return bins, likely


def _told_apart(
    paths: list[str], likely: list[tuple[int, int]], options: DecodeOptions
) -> list[tuple[int, int]]:
    """The likely-duplicate pairs that the pixel check rejects: different images after all.

    A pair it accepts, leaves open or cannot read again stays a likely duplicate.
    """
    if not likely:
        return []
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


def _pair_distances(entries: _Entries, pairs: NDArray[np.int64]) -> dict[str, NDArray[np.int64]]:
    """Each method's distance of each row pair ``(i, j)``."""
    found = np.array([entries.pair(int(i), int(j)) for i, j in pairs], dtype=np.int64).reshape(
        -1, 3
    )
    return {"phash": found[:, 0], "dhash": found[:, 1], "phash+dhash": found[:, 2]}


def _lookalike_pairs(
    entries: _Entries,
    n: int,
    excluded: list[tuple[int, int]],
    neighbours: int = LOOKALIKE_NEIGHBOURS,
) -> dict[str, tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Per method, each image's ``neighbours`` nearest other images: pairs ``i < j`` and distances.

    ``excluded`` pairs (likely real duplicates) are never neighbours. Each pair
    once, closest first. Computed in row blocks, so memory stays small.
    """
    k = min(neighbours, n - 1)
    skip = np.array(excluded, dtype=np.int64).reshape(-1, 2)
    found: dict[str, list[NDArray[np.int64]]] = {method: [] for method in AUDIT_METHODS}
    for a, b, blocks in entries.blocks(n):
        rows = np.arange(a, b)
        for method in AUDIT_METHODS:
            values = blocks[method].copy()
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
        distance = _pair_distances(entries, pairs)[method]
        order = np.argsort(distance, kind="stable")
        result[method] = (pairs[order], distance[order])
    return result


def _lookalike_message(
    method: str,
    pairs: NDArray[np.int64],
    distance: NDArray[np.int64],
    paths: list[str],
    audit_linked: set[tuple[int, int]],
) -> str:
    """The :class:`LookAlikeWarning` text, or "" when no look-alike is within the default.

    ``audit_linked`` holds the sample pairs the default audit linked.
    """
    threshold = DEFAULT_THRESHOLDS.get(method)
    if threshold is None or not len(distance):
        return ""
    linked = np.flatnonzero(distance <= threshold)
    if not len(linked):
        return ""
    examples = "; ".join(
        f"{paths[int(pairs[r, 0])]} ~ {paths[int(pairs[r, 1])]} ({bits(int(distance[r]))})"
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
    by_audit = sum((int(pairs[r, 0]), int(pairs[r, 1])) in audit_linked for r in linked)
    return (
        f"{len(linked)} of {len(distance)} look-alike pair(s) (each image's nearest other "
        f"images, all different pictures) are within the default {method} threshold "
        f"{threshold}, so the bare threshold (--no-verify, verify=False) would link them: "
        f"{examples}{more}. This is typical of small graphics on flat or transparent "
        "backgrounds (sprites, icons sharing a template, recoloured shapes). The default "
        "audit verifies each candidate pair's pixels before it links"
        + (
            f" and linked {by_audit} of them: check those pairs (leakaudit compare A B)"
            if by_audit
            else " and linked none of them: keep verification on"
        )
        + f"; without verification, lower the threshold ({lower})."
    )


def _audit_headline(
    per_transform: pd.DataFrame,
    n_false: int,
    n_pairs: int,
    false_links: list[tuple[int, int]],
    paths: list[str],
) -> str:
    """The recommendation for the default audit, from what it did on the sample."""
    copies = int(per_transform["copies"].sum())
    found = int(per_transform["found"].sum())
    recall = found / copies if copies else math.nan
    missed = [
        f"{row['transform']} {float(row['recall']):.0%}"
        for row in per_transform.to_dict("records")
        if int(row["found"]) < int(row["copies"])
    ]
    text = (
        f"Default audit ({_DEFAULT_AUDIT}): it finds {found:,} of {copies:,} planted copies "
        f"({recall:.1%}; mirror images included)"
        + (f", missing some of: {', '.join(missed)}" if missed else "")
    )
    if n_false == 0:
        return text + (
            f", and links none of the {n_pairs:,} pairs of distinct sample images: keep the "
            "defaults (leakaudit scan ROOT, audit_splits(splits); no option needed)."
        )
    shown = "; ".join(f"{paths[i]} ~ {paths[j]}" for i, j in false_links[:_LOOKALIKE_EXAMPLES])
    more = f"; and {n_false - _LOOKALIKE_EXAMPLES} more" if n_false > _LOOKALIKE_EXAMPLES else ""
    return text + (
        f", and links {n_false} of the {n_pairs:,} pairs of different sample images: {shown}"
        f"{more}. Each is a real near-duplicate in your data (an overlapping crop, a copy) or "
        "a false link: look with leakaudit compare A B. Keep the defaults (the setting "
        "measured here); a leak such a pair makes is worth that look."
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
            f"{method}: {bare_flags(method, int(first['threshold']))}. Even the smallest "
            "threshold makes "
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
        f"{method}: {bare_flags(method, threshold)}. It finds {best:.1%} of the planted copies "
        f"with {budget_text} among {n_pairs:,} unrelated pairs"
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
        text += f". The default threshold is {default}"
    return threshold, text + "."


def bare_flags(method: str, threshold: int) -> str:
    """The ``leakaudit scan`` options of a bare-threshold audit with ``method`` and ``threshold``.

    Examples
    --------
    >>> bare_flags("phash+dhash", 9)
    '--no-verify --threshold 9'
    >>> bare_flags("phash", 8)
    '--no-verify --hash phash --threshold 8'
    """
    method_flag = "" if method == DEFAULT_METHOD else f" --hash {method}"
    return f"--no-verify{method_flag} --threshold {threshold}"


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


def _make_copies(
    sample: _Sample, seed: int, progress: bool | None
) -> tuple[list[bytes], NDArray[np.int64], list[CopyTransform]]:
    """The known copies of each sample image, encoded as files: bytes, original, transform."""
    n = len(sample.paths)
    copies: list[bytes] = []
    origin: list[int] = []
    kinds: list[CopyTransform] = []
    bar = Progress(
        n, label="making copies", enabled=progress_enabled(progress, n * len(TRANSFORMS))
    )
    for index, image in enumerate(sample.images):
        copies.extend(_copies_of(image, index, seed))
        origin.extend([index] * len(TRANSFORMS))
        kinds.extend(TRANSFORMS)
        bar.update()
    bar.close()
    sample.images.clear()
    return copies, np.array(origin, dtype=np.int64), kinds


@dataclass
class _AuditRun:
    """What the default audit did with the sample and each transformation's copies."""

    found: NDArray[np.bool_]  # per copy: grouped with its original
    linked: set[tuple[int, int]]  # pairs i < j of sample images whose families were grouped
    owner: NDArray[np.int64]  # the audits' whole-image entries: original rows 0..n-1, copy r
    phash: NDArray[np.uint64]  # at row n + r
    dhash: NDArray[np.uint64]


def _default_audits(
    paths: list[str],
    copies: list[bytes],
    origin: NDArray[np.int64],
    kinds: list[CopyTransform],
    options: DecodeOptions,
    workers: int | None,
    progress: bool | None,
) -> _AuditRun:
    """Audit the sample with each transformation's copies, as ``audit_splits`` does by default.

    One audit per transformation, each of the sample's files (split
    ``"sample"``) and one copy of each (in-memory bytes, verified like files;
    split ``"copies"``), as a dataset holds an image and a copy of it: copies
    do not help one another into their original's group. The sample is hashed
    once (a hash cache private to the run). The audits' own warnings are about
    this made-up dataset, not the user's, and are not passed on.
    """
    import tempfile

    n = len(paths)
    found = np.zeros(len(copies), dtype=bool)
    linked: set[tuple[int, int]] = set()
    owners: list[NDArray[np.int64]] = []
    phashes: list[NDArray[np.uint64]] = []
    dhashes: list[NDArray[np.uint64]] = []
    names = np.array([t.name for t in kinds], dtype=object)
    bar = Progress(
        len(TRANSFORMS),
        label="auditing copies",
        enabled=progress_enabled(progress, len(copies) * 4),
    )
    with tempfile.TemporaryDirectory(prefix="leakaudit-calibrate-") as cache:
        for position, transform in enumerate(TRANSFORMS):
            mine = np.flatnonzero(names == transform.name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                report = audit_sources(
                    [*paths, *(copies[r] for r in mine)],
                    ["sample"] * n + ["copies"] * len(mine),
                    names=[*paths, *(f"<{transform.name} copy #{r}>" for r in mine)],
                    decode=options,
                    workers=workers,
                    progress=False,
                    on_error="ignore",
                    cache=cache,
                )
            table = report.table
            assert table is not None  # audit_sources always keeps its table
            group = table["group_id"].to_numpy()
            read = table["error"].isna().to_numpy()  # unreadable rows are never linked
            family = np.concatenate([np.arange(n), origin[mine]])
            found[mine] = (group[n:] == group[family[n:]]) & read[n:]
            members: dict[int, set[int]] = {}
            for g, f in zip(group[read].tolist(), family[read].tolist(), strict=True):
                members.setdefault(g, set()).add(f)
            for families in members.values():
                linked.update((i, j) for i in families for j in families if i < j)
            entries = report.orientations
            if entries is not None:
                keep = entries.owner >= (0 if position == 0 else n)  # the sample's once
                row = entries.owner[keep]
                owners.append(np.where(row < n, row, n + mine[np.maximum(row - n, 0)]))
                phashes.append(entries.phash[keep])
                dhashes.append(entries.dhash[keep])
            bar.update()
    bar.close()
    owner = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
    order = np.argsort(owner, kind="stable")
    return _AuditRun(
        found=found,
        linked=linked,
        owner=owner[order],
        phash=np.concatenate(phashes)[order] if owners else np.zeros(0, dtype=np.uint64),
        dhash=np.concatenate(dhashes)[order] if owners else np.zeros(0, dtype=np.uint64),
    )


def _copy_distances(
    entries: _Entries, sample: _Sample, origin: NDArray[np.int64], kinds: list[CopyTransform]
) -> _PlantedCopies:
    """Each copy's distance to its original under the dihedral orientations, per method."""
    n = len(sample.paths)
    found = np.array(
        [entries.pair(n + r, int(i)) for r, i in enumerate(origin)], dtype=np.int64
    ).reshape(-1, 3)
    distance = {"phash": found[:, 0], "dhash": found[:, 1], "phash+dhash": found[:, 2]}
    expected = np.array([t.expected for t in kinds], dtype=bool)
    names = np.array([t.name for t in kinds], dtype=object)
    frame = pd.DataFrame(
        {
            "original": [sample.paths[i] for i in origin],
            "transform": names,
            "expected": expected,
            **distance,
        }
    )
    return _PlantedCopies(distance, expected, names, frame)


def _audit_outcome(
    run: _AuditRun, names: NDArray[Any], likely: list[tuple[int, int]]
) -> tuple[pd.DataFrame, list[tuple[int, int]]]:
    """Per transformation, the copies the audits grouped with their original; their false links.

    A false link is a pair of distinct sample images (not a likely duplicate
    pair) whose families, originals or copies, an audit put in one group.
    """
    rows = []
    for transform in TRANSFORMS:
        mine = names == transform.name
        rows.append(
            {
                "transform": transform.name,
                "copies": int(mine.sum()),
                "found": int(run.found[mine].sum()),
                "recall": float(run.found[mine].mean()) if mine.any() else math.nan,
            }
        )
    return pd.DataFrame(rows), sorted(run.linked - set(likely))


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
    """Measure the default audit, and each bare hash threshold, on the user's own images.

    A seeded sample of the readable, non-blank images is taken; known
    near-duplicates of each (see :data:`TRANSFORMS`, :func:`plant_copies`) are
    made in memory, encoded as files would be. The default audit runs on the
    sample's files and the copies: ``audit_per_transform`` and
    ``audit_false_links`` say what it found, ``audit_options`` and ``headline``
    what to pass to it.

    The threshold tables are for the bare threshold (``verify=False``), on the
    audit's hashes in their canonical orientations. Positives are (original,
    copy) pairs; negatives are all pairs of distinct sample images, and the
    hardest of them, each image's :data:`LOOKALIKE_NEIGHBOURS` nearest other
    images (the look-alikes), are measured apart: their false-link rate per
    threshold is in ``table``. The recommended bare threshold of a method is
    the smallest one that reaches the highest recall among the thresholds
    whose false-pair rate stays within the budget.

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
        lie within the default threshold of the default method, so that the
        bare threshold would link them: how many, a few of them, how many the
        default audit linked, and what to do.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from leakaudit.demo import photo_like_image
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> for seed in range(12):
    ...     photo_like_image(seed).save(folder / f"{seed}.jpg", quality=92)
    >>> result = calibrate_threshold(folder, sample_size=12, workers=1)
    >>> result.audit_options  # what to pass to audit_splits: the defaults here
    {}
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
    planted, origin, kinds = _make_copies(sample, seed, progress)
    run = _default_audits(sample.paths, planted, origin, kinds, options, workers, progress)
    del planted
    entries = _Entries.from_run(run, n + len(origin), sample)
    copies = _copy_distances(entries, sample, origin, kinds)
    histograms, likely = _unrelated_histograms(entries, n)
    apart = _told_apart(sample.paths, likely, options)
    if apart:  # different images after all: unrelated pairs, not duplicates
        likely = [pair for pair in likely if pair not in set(apart)]
        found = _pair_distances(entries, np.array(apart, dtype=np.int64))
        for method, values in found.items():
            histograms[method] += np.bincount(values, minlength=65)[:65]
    n_pairs = int(histograms["phash"].sum())
    lookalikes = _lookalike_pairs(entries, n, likely)
    audit_per_transform, false_links = _audit_outcome(run, copies.names, likely)

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
    message = _lookalike_message(warned, *lookalikes[warned], sample.paths, set(false_links))
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
        audit_per_transform=audit_per_transform,
        audit_false_links=[(sample.paths[i], sample.paths[j]) for i, j in false_links],
        audit_options={},
        audit_command="",
        headline=_audit_headline(
            audit_per_transform, len(false_links), n_pairs, false_links, sample.paths
        ),
    )
