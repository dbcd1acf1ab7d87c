"""What a calibration returns: :class:`CalibrationResult`, its tables, recommendation and text."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from leakaudit._calibrate_copies import TRANSFORMS
from leakaudit.policy import DEFAULT_METHOD, DEFAULT_THRESHOLDS

__all__ = [
    "DEFAULT_AUDIT",
    "LIKELY_DUPLICATE_DISTANCE",
    "LOOKALIKE_NEIGHBOURS",
    "CalibrationResult",
]

#: Nearest unrelated neighbours taken per sample image as its look-alike negatives.
LOOKALIKE_NEIGHBOURS = 3
# Pairs of sample images whose pHash and dHash both lie within this distance are
# almost certainly duplicates the dataset already holds (what the audit is for: on
# real photos not one unrelated pair in 4.5M came within 8 on both), not unrelated
# images; counting them as false pairs would drag the threshold down to 0. They are
# listed in the result instead.
LIKELY_DUPLICATE_DISTANCE = 4
#: What the default audit is, in words (the one the headline recommendation is about).
DEFAULT_AUDIT = (
    "what leakaudit scan and audit_splits run: phash+dhash, mirrors and turns matched, "
    "every candidate pair verified"
)


@dataclass
class CalibrationResult:
    """What :func:`~leakaudit.calibrate.calibrate_threshold` measured, and the thresholds it
    recommends.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per method and threshold: ``method, threshold, true_pairs_found,
        false_pairs, precision, recall, recall_all, false_pairs_per_million``.
        ``recall`` counts only the expected transformations (all of
        :data:`~leakaudit.calibrate.TRANSFORMS`); ``recall_all`` counts every copy. Precision
        is over the mixed set (original, copy) + (unrelated, unrelated) pairs.
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
        The :class:`~leakaudit.calibrate.LookAlikeWarning` message when look-alikes are linked at
        the default threshold; empty otherwise.
    audit_per_transform : pandas.DataFrame
        What the default audit (``audit_splits`` and ``leakaudit scan`` with
        their defaults: phash+dhash, dihedral matching, verification) did with
        the sample and its planted copies, one row per transformation:
        ``transform, copies, found, recall`` (a copy is found when the audit
        puts it in its original's group).
    audit_false_links : list of tuple of str
        Pairs of distinct sample images (not likely duplicates) the default
        audit put in one group, directly or through their copies.
    audit_options : dict
        The recommended keyword arguments of :func:`~leakaudit.audit_splits`
        and :func:`~leakaudit.audit_sources` (empty: the defaults).
    audit_command : str
        The same as ``leakaudit scan`` options (empty: the defaults).
    headline : str
        The recommendation for the default audit, in words.

    The threshold tables (``table``, ``per_transform``, ``recommended``) are
    for the bare threshold (``verify=False``, ``--no-verify``): a pair links
    when its hashes are within the threshold, in the canonical orientations
    the audit uses by default (so mirror images are found). The default audit
    uses its candidate net and verification instead; its threshold only
    decides pairs whose images cannot be read again.
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
    audit_per_transform: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["transform", "copies", "found", "recall"])
    )
    audit_false_links: list[tuple[str, str]] = field(default_factory=list)
    audit_options: dict[str, Any] = field(default_factory=dict)
    audit_command: str = ""
    headline: str = ""

    @property
    def audit_recall(self) -> float:
        """The share of planted copies the default audit grouped with their original."""
        copies = int(self.audit_per_transform["copies"].sum())
        return int(self.audit_per_transform["found"].sum()) / copies if copies else math.nan

    def bare_options(self, method: str = DEFAULT_METHOD) -> dict[str, Any]:
        """The recommended bare-threshold audit of ``method``, as audit keyword arguments.

        ``audit_splits(splits, **result.bare_options())`` is what
        ``leakaudit scan ROOT`` + :func:`~leakaudit.calibrate.bare_flags` runs.
        """
        return {"method": method, "threshold": self.recommended[method], "verify": False}

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
                f"(both hashes within {LIKELY_DUPLICATE_DISTANCE}) and were not counted as "
                "unrelated:"
            )
            for first, second in self.likely_duplicates[:5]:
                lines.append(f"  {first}  ~  {second}")
            if len(self.likely_duplicates) > 5:
                lines.append(f"  ... and {len(self.likely_duplicates) - 5} more")
        if self.headline:
            false = len(self.audit_false_links)
            lines += [
                "",
                f"Default audit ({DEFAULT_AUDIT}):",
                f"  finds {self.audit_recall:.1%} of the planted copies; "
                f"links {false} of the {self.n_unrelated_pairs:,} pairs of different sample "
                "images" + (" (real duplicates or false links: check them)" if false else ""),
            ]
            for first, second in self.audit_false_links[:5]:
                lines.append(f"  linked: {first}  ~  {second}")
        lines += [
            "",
            "Bare threshold (--no-verify, verify=False): a pair links when both hashes are",
            "within the threshold, in the audit's canonical orientations (mirrors, turns).",
        ]
        for method in self.table["method"].unique():
            rows = self.table[self.table["method"] == method]
            if method == "phash":
                rows = rows[rows["threshold"] % 2 == 0]
            chosen = self.recommended.get(str(method))
            lines += [
                "",
                f"{method}, bare threshold"
                + (" (both distances <= threshold)" if method == "phash+dhash" else ""),
                "threshold  found copies  false pairs  precision  recall  false/1M",
            ]
            for row in rows.itertuples(index=False):
                mark = "  <- recommended" if row.threshold == chosen else ""
                lines.append(
                    f"{row.threshold:9d} {row.true_pairs_found:13d} {row.false_pairs:12d} "
                    f"{row.precision:10.1%} {row.recall:7.1%} "
                    f"{row.false_pairs_per_million:9.1f}{mark}"
                )
        lines += [
            "",
            "Recall per transformation: the default audit, and each bare threshold at its "
            "recommended value:",
        ]
        methods = list(self.recommended)
        audit = self.audit_per_transform.set_index("transform")
        lines.append(
            f"{'transform':16s}{'default audit':>14s}"
            + "".join(f"{f'{m} {self.recommended[m]}':>16s}" for m in methods)
        )
        for transform in TRANSFORMS:
            cells = [
                f"{audit.loc[transform.name, 'recall']:14.1%}"
                if transform.name in audit.index
                else f"{'-':>14s}"
            ]
            for method in methods:
                hit = self.per_transform[
                    (self.per_transform["method"] == method)
                    & (self.per_transform["threshold"] == self.recommended[method])
                    & (self.per_transform["transform"] == transform.name)
                ]
                cells.append(f"{hit['recall'].iloc[0]:16.1%}" if len(hit) else f"{'-':>16s}")
            suffix = "" if transform.expected else "  (not in the bare recall)"
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
        lines += ["", "Recommendation:"]
        if self.headline:
            lines += [self.headline, "", "With verification off (bare threshold):"]
        lines.append(self.explanation)
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
                f"{len(self.told_apart)} sample pair(s) within {LIKELY_DUPLICATE_DISTANCE} bits "
                "on both hashes were told apart by the pixel check (different images, not "
                "duplicates)."
            )
        return lines


def _cell(value: Any) -> str:
    return "-" if value is None or bool(pd.isna(value)) else str(value)
