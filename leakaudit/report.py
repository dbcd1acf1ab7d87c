"""The leakage audit: which duplicate groups span splits, and how much of each split leaks."""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from leakaudit._decision_text import decision_lines
from leakaudit._evidence import COPY_KIND, EDGE_COLUMNS, EVIDENCE_MEANING, TRANSITIVE
from leakaudit._parameters import AuditParameters
from leakaudit._spanning import spanning_group_ids
from leakaudit._text import bits, printable
from leakaudit.distances import ALL_PAIRS_MAX_MEMBERS, PairDistances
from leakaudit.frames import hash_values_from_frame
from leakaudit.grouping import group_spread
from leakaudit.impact import DEFAULT_N_BOOT, DEFAULT_SEED, ScoreImpact, leak_status, score_impact
from leakaudit.safe_io import resolve_within

if TYPE_CHECKING:
    from leakaudit.hashing import OrientationHashes

__all__ = [
    "COPY_KIND",
    "EDGE_COLUMNS",
    "LEAKED_GROUP_COLUMNS",
    "TRANSITIVE",
    "AuditParameters",
    "LargeGroupWarning",
    "LeakageReport",
    "dhash_audit",
]

# A group holding at least this share of a split (and at least _LARGE_GROUP_MIN
# images) is almost never one photo copied many times: it is transitive
# chaining through intermediates, or many blank images.
_LARGE_GROUP_SHARE = 0.10
_LARGE_GROUP_MIN = 10

LEAKED_GROUP_COLUMNS = [
    "group_id",
    "n_members",
    "splits_involved",
    "n_splits",
    "members_by_split",
    "max_distance",
    "low_information",
    "evidence",
    "evidence_strength",
]


class LargeGroupWarning(UserWarning):
    """One duplicate group swallows a large share of a split (likely chaining)."""


def _legend(groups: pd.DataFrame) -> list[str]:
    """The lines that explain the words of the leaked groups shown: the hash distance and
    each evidence word that appears."""
    lines = [
        "  (hashes up to N bits apart: the largest hash distance between two members, of 64 bits)"
    ]
    shown = [] if "evidence" not in groups else groups["evidence"].tolist()
    words = [w for w in dict.fromkeys(shown) if isinstance(w, str) and w in EVIDENCE_MEANING]
    words = [w for w in words if w != TRANSITIVE]
    if words:
        meanings = "; ".join(f"{w} = {EVIDENCE_MEANING[w]}" for w in words)
        lines.append(f"  (evidence: what proved the copy: {meanings})")
    return lines


def _is_missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


@dataclass(frozen=True)
class LeakageReport:
    """The audit of duplicate groups against splits.

    Built once, complete, by :func:`dhash_audit` (the one-call audits and the
    adapters pass it everything: exact counts, spreads under dihedral
    matching, the embedding stage's pairs, their per-row columns), and not
    changed afterwards: its fields cannot be reassigned. Counts are exact;
    percentages are derived from them.

    Attributes
    ----------
    leaked_groups : pandas.DataFrame
        One row per group spanning more than one split, worst first, with
        columns ``group_id, n_members, splits_involved, n_splits,
        members_by_split, max_distance, low_information, evidence,
        evidence_strength``. ``splits_involved`` lists the splits
        comma-separated in order of first appearance; ``max_distance`` is the
        largest Hamming distance between two members (exact up to 200 members,
        sampled beyond; missing without hashes). With :attr:`edges` known,
        ``evidence`` is the verification stage of the strongest pair that joins
        two splits directly (``"bytes"``, ``"hash"``, ``"pixels"``,
        ``"geometry"``, ``"registered"``, ``"embedding"``), or ``"transitive"`` when the splits
        are joined only through chains of same-split members;
        ``evidence_strength`` is that pair's strength (1 = byte copy, 0 for
        transitive groups), and groups are ordered by it, strongest first.
        Without edges both are missing and groups are ordered largest first.
    n_leaked_images : int
        Images sitting in a leaked group.
    pct_leaked_by_split : pandas.Series
        Per split, the percentage (2 decimals) of that split's images that sit
        in a leaked group, derived from ``leaked_by_split``.
    total_images : int
        Images audited (including unreadable ones, which can never leak).
    images_by_split : pandas.Series
        Images per split.
    n_within_split_groups : int
        Duplicate groups (2+ members) that stay inside one split.
    n_unreadable : int
        Images that could not be read (see ``table["error"]``).
    n_low_information : int
        Blank or near-flat images, linked only to byte-identical copies.
    parameters : AuditParameters
        How the audit was made (method, threshold, ...): a typed, frozen
        record that also reads as a mapping (``parameters["stages"]``); a
        mapping given here is turned into one.
    table : pandas.DataFrame
        The grouped table the audit was computed from.
    embedding_pairs : pandas.DataFrame or None
        When the audit ran the embedding stage (:mod:`leakaudit.embedding`):
        the pairs it linked, columns ``row_a, row_b, similarity,
        joined_groups`` (positions in ``table``; ``joined_groups`` is False
        where the hash stage had linked them already); None otherwise. The
        pairs table (``pair_table``) turns them into its ``stage`` and
        ``similarity`` columns.
    orientations : OrientationHashes or None
        With dihedral matching: each row's orientation entries
        (:class:`~leakaudit.hashing.OrientationHashes`), from which the pairs
        table computes distances under flips and rotations; None otherwise.
    leaked_by_split : pandas.Series
        Per split, how many of its images sit in a leaked group (exact).
    edges : pandas.DataFrame or None
        The pairs that formed the groups, after verification (columns
        :data:`EDGE_COLUMNS`): ``row_a < row_b`` are positions in ``table``;
        ``stage`` the verification stage that accepted the pair; ``distance``
        the hash distance the candidate search measured (missing when the
        pair came from a crop entry or the embedding); ``similarity`` the pixel
        check's score in [0, 1]; ``inliers`` the geometric check's inlier
        count; ``strength`` the evidence strength in [0, 1]; and, from
        verification, :data:`COPY_KIND`: what kind of copy the pair is, in words
        (missing on byte-copy and embedding edges). Only these pairs were
        unioned into groups. None when the grouping kept no edges (the
        precomputed-hash DataFrame path).
    """

    leaked_groups: pd.DataFrame
    n_leaked_images: int
    pct_leaked_by_split: pd.Series
    total_images: int
    images_by_split: pd.Series
    n_within_split_groups: int = 0
    n_unreadable: int = 0
    n_low_information: int = 0
    parameters: AuditParameters = field(default_factory=AuditParameters)
    table: pd.DataFrame | None = field(default=None, repr=False)
    embedding_pairs: pd.DataFrame | None = field(default=None, repr=False)
    orientations: OrientationHashes | None = field(default=None, repr=False)
    leaked_by_split: pd.Series | None = field(default=None, repr=False)
    edges: pd.DataFrame | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        given: Any = self.parameters  # a mapping, as before the record, is turned into one
        if not isinstance(given, AuditParameters):
            object.__setattr__(self, "parameters", AuditParameters.from_mapping(given))
        if self.leaked_by_split is None:  # a report rebuilt from an older JSON file
            estimate = (self.pct_leaked_by_split * self.images_by_split / 100).round()
            object.__setattr__(self, "leaked_by_split", estimate.astype(int))

    def with_splits(self, splits: Sequence[str]) -> LeakageReport:
        """This report with a row, of 0 images, for each of ``splits`` it has none for.

        The per-split counts follow the order of ``splits`` (then any other
        split of the report): a split with no images still shows in the
        splits table, the text and the JSON, as 0 images, 0 leaked.

        Examples
        --------
        >>> frame = pd.DataFrame({"path": ["a.png"], "split": ["train"], "group_id": [0]})
        >>> dhash_audit(frame).with_splits(["train", "test"]).images_by_split.to_dict()
        {'train': 1, 'test': 0}
        """
        order = [str(s) for s in splits]
        order += [s for s in self.images_by_split.index if s not in set(order)]
        if order == list(self.images_by_split.index):
            return self
        leaked = self.leaked_images_by_split()
        return dataclasses.replace(
            self,
            images_by_split=self.images_by_split.reindex(order, fill_value=0).astype(int),
            pct_leaked_by_split=self.pct_leaked_by_split.reindex(order, fill_value=0.0).astype(
                float
            ),
            leaked_by_split=leaked.reindex(order, fill_value=0).astype(int),
        )

    @property
    def has_leakage(self) -> bool:
        """Whether any group spans more than one split."""
        return self.n_leaked_images > 0

    @property
    def n_leaked_groups(self) -> int:
        """Number of groups spanning more than one split."""
        return len(self.leaked_groups)

    def leaked_images_by_split(self) -> pd.Series:
        """Per split, how many of its images sit in a leaked group (exact counts)."""
        assert self.leaked_by_split is not None  # set in __post_init__
        counts: pd.Series = self.leaked_by_split.copy()
        return counts

    @property
    def leak_counts(self) -> pd.DataFrame:
        """Per split: ``images``, ``leaked`` (exact) and ``fraction`` (leaked / images).

        The one count behind the text report, the CSV/HTML split tables, the
        CLI's ``--fail-on-leak`` and the guard.
        """
        images = self.images_by_split.astype(int)
        leaked = self.leaked_images_by_split().reindex(images.index, fill_value=0).astype(int)
        fraction = (leaked / images.where(images > 0)).fillna(0.0).astype(float)
        frame: pd.DataFrame = pd.DataFrame(
            {"images": images, "leaked": leaked, "fraction": fraction}
        )
        frame.index.name = "split"
        return frame

    def splits_over_limit(
        self, *, max_leaked: int | None = None, max_fraction: float | None = None
    ) -> pd.DataFrame:
        """The rows of :attr:`leak_counts` for splits that leak more than allowed.

        A split fails when more than ``max_leaked`` of its images, or more than
        ``max_fraction`` of it (0.01 = 1%), sit in leaked groups. Both limits
        are per split; with neither given, any leaked image fails its split.

        Examples
        --------
        >>> report = dhash_audit(pd.DataFrame({"split": ["train", "test", "test"],
        ...                                    "group_id": [0, 0, 1]}))
        >>> report.splits_over_limit(max_leaked=0).index.tolist()
        ['train', 'test']
        >>> report.splits_over_limit(max_fraction=0.5).index.tolist()
        ['train']
        """
        counts = self.leak_counts
        if max_leaked is None and max_fraction is None:
            max_leaked = 0
        over = np.zeros(len(counts), dtype=bool)
        if max_leaked is not None:
            over |= (counts["leaked"] > max_leaked).to_numpy()
        if max_fraction is not None:
            over |= (counts["fraction"] > max_fraction).to_numpy()
        failing: pd.DataFrame = counts[over]
        return failing

    def score_impact(
        self,
        predictions: pd.DataFrame,
        *,
        split: str = "test",
        n_boot: int = DEFAULT_N_BOOT,
        seed: int = DEFAULT_SEED,
        confidence: float = 0.95,
    ) -> ScoreImpact:
        """How much the leak inflates a model's accuracy on ``split``.

        Accuracy on all of the split's images with a prediction, on the leaked ones
        and on the clean rest, their differences and the same per class, each with a
        percentile bootstrap interval: :func:`leakaudit.impact.score_impact`, whose
        ``predictions`` (a ``correct`` column, or ``label`` and ``prediction``; keyed by
        ``path``, ``index`` or order) and options this takes.

        Examples
        --------
        >>> frame = pd.DataFrame({"path": ["a", "b", "c"], "split": ["train", "test", "test"],
        ...                       "group_id": [0, 0, 1]})
        >>> predictions = pd.DataFrame({"path": ["b", "c"], "correct": [True, False]})
        >>> dhash_audit(frame).score_impact(predictions).overall["accuracy"].tolist()
        [0.5, 1.0, 0.0]
        """
        if self.table is None:
            raise ValueError(
                "report has no table (it was rebuilt from JSON): score the images table of "
                "the JSON file with leakaudit.impact.score_impact, or `leakaudit impact`."
            )
        images = leak_status(self.table, self.leaked_groups["group_id"].tolist())
        return score_impact(
            images, predictions, split=split, n_boot=n_boot, seed=seed, confidence=confidence
        )

    def image_file(self, path: object) -> str | None:
        """The file to open for the picture of the image called ``path``, or None.

        What the HTML thumbnails and ``--show`` read. A report of hash shards
        records ``parameters["images_root"]``: only files that resolve (links
        followed) inside that folder are opened, by their resolved name, and
        none when it is None. Any other report opens its paths as they are.

        Examples
        --------
        >>> report = dhash_audit(pd.DataFrame({"split": ["a"], "group_id": [0]}),
        ...                      parameters={"images_root": None})
        >>> report.image_file("/etc/passwd") is None
        True
        """
        if not isinstance(path, str):
            return None
        if "images_root" not in self.parameters:
            return path
        root = self.parameters.images_root
        if root is None:
            return None
        return resolve_within(path, root)

    def to_text(self, *, max_groups: int = 20) -> str:
        """Return a readable plain-text rendering (what ``print(report)`` shows).

        File and split names (and parameters) are shown through
        :func:`~leakaudit._text.printable`: a control character, such as a
        newline or a terminal escape, in a name is written as ``\\xNN`` and
        cannot forge a line of the report or reach the terminal.
        """
        lines = []
        if self.has_leakage:
            pct = 100.0 * self.n_leaked_images / self.total_images if self.total_images else 0.0
            lines.append(
                f"LEAKAGE: {self.n_leaked_images} of {self.total_images} images ({pct:.2f}%) "
                f"sit in {self.n_leaked_groups} duplicate group(s) that span splits."
            )
        else:
            lines.append(
                f"No leakage: none of {self.total_images} images has a near-duplicate "
                "in another split."
            )
        shown = {
            k: v
            for k, v in self.parameters.items()
            if k not in ("stages", "verification", "images", "decisions")  # their own lines
        }
        if shown:
            lines.append(
                "Parameters: " + ", ".join(printable(f"{k}={v}") for k, v in shown.items())
            )
        lines.extend(self._verification_lines())
        lines.extend(decision_lines(self.parameters.get("decisions")))
        lines.append("")
        leaked = self.leaked_images_by_split()
        width = max([5, *(len(printable(str(s))) for s in self.images_by_split.index)])
        lines.append(f"{'split':<{width}}  {'images':>7}  {'leaked':>7}  {'% leaked':>8}")
        for split, count in self.images_by_split.items():
            lines.append(
                f"{printable(str(split)):<{width}}  {count:>7}  {leaked.get(split, 0):>7}  "
                f"{self.pct_leaked_by_split.get(split, 0.0):>8.2f}"
            )
        embedded = self._embedding_group_ids()
        if self.has_leakage:
            spanning = set(spanning_group_ids(self)) if self.table is not None else set()
            lines.append("")
            ordered = "strongest evidence first" if self.edges is not None else "largest first"
            lines.append(f"Leaked groups ({ordered}):")
            for row in self.leaked_groups.head(max_groups).itertuples(index=False):
                spread = (
                    ""
                    if _is_missing(row.max_distance)
                    else ", identical hashes"
                    if row.max_distance == 0
                    else f", hashes up to {bits(row.max_distance)} apart"
                )
                flag = ", LOW-INFORMATION (blank/flat images)" if row.low_information else ""
                if row.group_id in embedded:
                    flag += ", joined by the embedding stage"
                if row.evidence == TRANSITIVE:
                    flag += (
                        ", TRANSITIVE ONLY (no verified pair joins two splits directly: "
                        "they meet through chains of same-split members)"
                    )
                elif isinstance(row.evidence, str) and row.evidence:
                    flag += f", evidence: {row.evidence}"
                lines.append(
                    f"  group {printable(str(row.group_id))}: {row.n_members} images "
                    f"[{printable(str(row.members_by_split))}]{spread}{flag}"
                )
                lines.extend(self._member_lines(row.group_id))
                if row.group_id in spanning:
                    lines.append(
                        "      (mostly identical images: the pairs table lists a spanning set, "
                        "each image with an identical one in another split, not every pair; "
                        "column listed = spanning)"
                    )
            if self.n_leaked_groups > max_groups:
                lines.append(f"  ... and {self.n_leaked_groups - max_groups} more group(s)")
            lines.extend(_legend(self.leaked_groups.head(max_groups)))
        extras = []
        if self.n_within_split_groups:
            extras.append(f"{self.n_within_split_groups} duplicate group(s) stay within one split")
        if self.n_low_information:
            extras.append(
                f"{self.n_low_information} blank or near-flat image(s) were linked only to "
                "byte-identical copies or, verified, to copies of their texture (their "
                "perceptual hashes carry no information)"
            )
        if self.n_unreadable:
            extras.append(
                f"{self.n_unreadable} image(s) could not be read (why: the 'error' column of "
                "the per-image table, --csv FILE or report.table)"
            )
        images = self.parameters.images
        if images:
            extras.append(images)
        if extras:
            lines.append("")
            lines.extend(f"Note: {printable(text)}." for text in extras)
        return "\n".join(lines)

    def _verification_lines(self) -> list[str]:
        """One line on the verified cascade: the stages that ran and what they decided."""
        stages = self.parameters.stages
        counts = self.parameters.verification
        if counts is None:
            return []
        if counts.get("ran") is False:
            return [f"Verification: did not run ({printable(str(counts.get('why', '')))})."]
        text = (
            f"Verification: {counts.get('candidates', 0)} candidate pair(s), "
            f"{counts.get('verified', 0)} verified, {counts.get('rejected', 0)} rejected"
        )
        if counts.get("unsupported"):
            text += (
                f", {counts['unsupported']} verified but not linked (their images' other "
                "matches disagree: look-alikes)"
            )
        if counts.get("distinct"):
            text += (
                f", {counts['distinct']} told apart at native resolution (look-alike "
                "graphics: a badge, a glyph; never grouped together)"
            )
        if counts.get("kept_apart"):
            text += (
                f", {counts['kept_apart']} verified but not linked (they would have joined "
                "images told apart)"
            )
        if counts.get("unverifiable"):
            text += f", {counts['unverifiable']} decided by hashes alone (images not readable)"
        if stages is not None:
            text += "; stages: " + ", ".join(printable(str(stage)) for stage in stages)
        if counts.get("geometry"):
            text += f"; geometry: {printable(str(counts['geometry']))}"
        return [text + "."]

    def _embedding_group_ids(self) -> set[Any]:
        """Groups the embedding stage joined (a pair the hash stage had in different groups)."""
        pairs = self.embedding_pairs
        if pairs is None or self.table is None or len(pairs) == 0:
            return set()
        if "joined_groups" in pairs.columns:
            pairs = pairs[pairs["joined_groups"].astype(bool)]
        group = self.table["group_id"].to_numpy()
        return set(group[pairs["row_a"].to_numpy(dtype=np.int64)].tolist())

    def _member_lines(self, group_id: int, limit: int = 4) -> list[str]:
        if self.table is None or "path" not in self.table.columns:
            return []
        members = self.table[self.table["group_id"] == group_id]
        lines = [
            f"      {printable(str(row.split)):>8}  {printable(str(row.path))}"
            for row in members.head(limit).itertuples(index=False)
        ]
        if len(members) > limit:
            lines.append(f"      ... {len(members) - limit} more")
        return lines

    def __str__(self) -> str:
        return self.to_text()

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of the summary and leaked groups (not the table)."""
        groups = self.leaked_groups.astype(object).where(self.leaked_groups.notna(), None)
        return {
            "total_images": int(self.total_images),
            "n_leaked_images": int(self.n_leaked_images),
            "n_leaked_groups": int(self.n_leaked_groups),
            "n_within_split_groups": int(self.n_within_split_groups),
            "n_unreadable": int(self.n_unreadable),
            "n_low_information": int(self.n_low_information),
            "images_by_split": {str(k): int(v) for k, v in self.images_by_split.items()},
            "pct_leaked_by_split": {str(k): float(v) for k, v in self.pct_leaked_by_split.items()},
            "leaked_by_split": {str(k): int(v) for k, v in self.leaked_images_by_split().items()},
            "parameters": dict(self.parameters),
            "leaked_groups": groups.to_dict(orient="records"),
        }

    def to_json(self, **kwargs: Any) -> str:
        """Return :meth:`to_dict` as a JSON string."""
        kwargs.setdefault("indent", 2)
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LeakageReport:
        """Rebuild a report (without its table) from :meth:`to_dict` output."""
        # Reports written before evidence was recorded lack its columns (left missing).
        groups = pd.DataFrame(list(data["leaked_groups"]), columns=LEAKED_GROUP_COLUMNS)
        return cls(
            leaked_groups=groups,
            n_leaked_images=int(data["n_leaked_images"]),
            pct_leaked_by_split=pd.Series(data["pct_leaked_by_split"], dtype=float),
            total_images=int(data["total_images"]),
            images_by_split=pd.Series(data["images_by_split"], dtype=int),
            n_within_split_groups=int(data.get("n_within_split_groups", 0)),
            n_unreadable=int(data.get("n_unreadable", 0)),
            n_low_information=int(data.get("n_low_information", 0)),
            parameters=AuditParameters.from_mapping(data.get("parameters", {})),
            leaked_by_split=(
                pd.Series(data["leaked_by_split"], dtype=int) if "leaked_by_split" in data else None
            ),
        )

    @classmethod
    def from_json(cls, text: str) -> LeakageReport:
        """Rebuild a report (without its table) from :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))


def _split_order(splits: pd.Series) -> list[str]:
    return [str(s) for s in pd.unique(splits.dropna())]


def dhash_audit(
    grouped_df: pd.DataFrame,
    *,
    parameters: Mapping[str, Any] | None = None,
    embedding_pairs: pd.DataFrame | None = None,
    orientations: OrientationHashes | None = None,
    edges: pd.DataFrame | None = None,
) -> LeakageReport:
    """Audit train/val/test leakage from duplicate groups.

    Parameters
    ----------
    grouped_df : pandas.DataFrame
        Columns ``group_id`` and ``split`` (and usually ``path`` and ``hash``),
        as from :func:`find_duplicate_groups`. Rows with a missing split are
        counted in ``total_images`` but ignored when deciding whether a group
        spans splits.
    parameters : mapping, optional
        How the groups were made, kept in the report (method, threshold, ...)
        as an :class:`~leakaudit.report.AuditParameters` record.
    embedding_pairs : pandas.DataFrame, optional
        The embedding stage's pairs (see :class:`LeakageReport`).
    orientations : OrientationHashes, optional
        With dihedral matching, each row's orientation entries: group spreads
        are then measured as the search compared (turned), not as stored.
    edges : pandas.DataFrame, optional
        The verified pairs the groups were built from (columns
        :data:`EDGE_COLUMNS`, see :class:`LeakageReport`): each leaked group's
        ``evidence`` is then its strongest pair across splits, and groups are
        ordered by it.

    Returns
    -------
    LeakageReport

    Warns
    -----
    LargeGroupWarning
        When one group holds at least 10% of a split (and 10+ images): usually
        transitive chaining or blank images, not one photo copied many times.

    Examples
    --------
    >>> groups = pd.DataFrame({
    ...     "path": ["a.jpg", "b.jpg", "c.jpg", "d.jpg"],
    ...     "split": ["train", "test", "train", "val"],
    ...     "group_id": [1, 1, 2, 3],
    ... })
    >>> report = dhash_audit(groups)
    >>> report.n_leaked_images, report.pct_leaked_by_split.to_dict()
    (2, {'train': 50.0, 'test': 100.0, 'val': 0.0})
    """
    if not isinstance(grouped_df, pd.DataFrame):
        raise TypeError(f"grouped_df must be a pandas DataFrame; got {type(grouped_df).__name__}.")
    missing = [c for c in ("group_id", "split") if c not in grouped_df.columns]
    if missing:
        raise ValueError(
            "grouped_df must have columns 'group_id' and 'split' (from find_duplicate_groups "
            f"with split given to compute_hashes); missing: {', '.join(missing)}."
        )
    if grouped_df["group_id"].isna().any():
        raise ValueError("grouped_df['group_id'] must not contain missing values.")
    split = grouped_df["split"].astype(object).where(grouped_df["split"].notna(), None)
    group = grouped_df["group_id"].to_numpy()
    order = _split_order(split)
    # The split as a categorical: the counts below group 1M rows by small codes instead of
    # hashing 1M string objects (about 40 MB less at the peak).
    frame = pd.DataFrame({"group_id": group, "split": pd.Categorical(split)})

    with_split = frame[frame["split"].notna()]
    counted = _count_small_ids(group, frame["split"].cat.codes.to_numpy(), len(order))
    if counted is not None:
        leaked_ids, sizes, in_leaked = counted
    else:
        n_splits = with_split.groupby("group_id")["split"].nunique()
        leaked_ids = n_splits.index[n_splits > 1]
        sizes = frame.groupby("group_id").size()
        in_leaked = frame["group_id"].isin(leaked_ids).to_numpy()

    images_by_split = with_split.groupby("split", observed=True).size().reindex(order).astype(int)
    leaked_by_split = (
        with_split[in_leaked[frame["split"].notna().to_numpy()]]
        .groupby("split", observed=True)
        .size()
        .reindex(order, fill_value=0)
    )
    pct = (100.0 * leaked_by_split / images_by_split).fillna(0.0).round(2).astype(float)
    images_by_split.index.name = None
    pct.index.name = None
    leaked_by_split = leaked_by_split.astype(int)
    leaked_by_split.index.name = None

    record = AuditParameters.from_mapping(parameters)  # checked once, read typed
    leaked_groups = _leaked_group_table(grouped_df, frame, leaked_ids, order)
    if edges is not None:
        edges = _checked_edges(edges, len(grouped_df))
        leaked_groups = _with_evidence(leaked_groups, edges, group, split.to_numpy())
    if orientations is not None:
        _turned_spreads(grouped_df, leaked_groups, record, orientations)
    multi = sizes[sizes > 1].index
    n_within = int(len(multi) - len(leaked_ids.intersection(multi)))
    _warn_large_groups(frame, images_by_split, sizes)

    return LeakageReport(
        leaked_groups=leaked_groups,
        n_leaked_images=int(in_leaked.sum()),
        pct_leaked_by_split=pct,
        total_images=len(grouped_df),
        images_by_split=images_by_split,
        n_within_split_groups=n_within,
        n_unreadable=int(grouped_df["error"].notna().sum()) if "error" in grouped_df else 0,
        n_low_information=(
            int(grouped_df["low_information"].fillna(False).astype(bool).sum())
            if "low_information" in grouped_df
            else 0
        ),
        parameters=record,
        table=grouped_df,
        embedding_pairs=embedding_pairs,
        orientations=orientations,
        leaked_by_split=leaked_by_split,
        edges=edges,
    )


def _count_small_ids(
    group: np.ndarray, split_codes: np.ndarray, n_splits: int
) -> tuple[pd.Index, pd.Series, np.ndarray] | None:
    """``(leaked_ids, sizes, in_leaked)`` by array counts, or None unless ids are small ints.

    Group ids from the grouping engine are ``0..g-1``: they then index arrays directly, and the
    splits of each group fit a boolean matrix of ``g x splits``. Same results as grouping the
    rows with pandas (ids ascending), without its hash tables over a million rows (the
    largest transient of the report). ``split_codes`` are the categorical codes (-1: missing).
    """
    n = group.size
    if n == 0 or group.dtype.kind not in "iu":
        return None
    low, high = int(group.min()), int(group.max())
    if low < 0 or high >= 4 * n or (high + 1) * n_splits > 4 * n + (1 << 20):
        return None
    counts = np.bincount(group, minlength=high + 1)
    present = np.zeros((high + 1, n_splits), dtype=bool)
    with_split = split_codes >= 0
    present[group[with_split], split_codes[with_split]] = True
    leaked = np.count_nonzero(present, axis=1) > 1
    del present, with_split
    ids = np.flatnonzero(counts)
    leaked_ids = pd.Index(np.flatnonzero(leaked).astype(group.dtype), name="group_id")
    sizes = pd.Series(counts[ids], index=pd.Index(ids.astype(group.dtype), name="group_id"))
    return leaked_ids, sizes, leaked[group]


def _checked_edges(edges: pd.DataFrame, n_rows: int) -> pd.DataFrame:
    if not isinstance(edges, pd.DataFrame):
        raise TypeError(f"edges must be a pandas DataFrame; got {type(edges).__name__}.")
    missing = [c for c in EDGE_COLUMNS if c not in edges.columns]
    if missing:
        raise ValueError(f"edges is missing column(s) {', '.join(missing)}.")
    rows = edges[["row_a", "row_b"]].to_numpy(dtype=np.int64)
    if rows.size and (rows.min() < 0 or rows.max() >= n_rows):
        raise ValueError(f"edges rows must be positions in the table (0..{n_rows - 1}).")
    columns = [*EDGE_COLUMNS, COPY_KIND] if COPY_KIND in edges.columns else EDGE_COLUMNS
    checked: pd.DataFrame = edges[columns].reset_index(drop=True)
    return checked


def _with_evidence(
    leaked_groups: pd.DataFrame,
    edges: pd.DataFrame,
    group: np.ndarray,
    split: np.ndarray,
) -> pd.DataFrame:
    """Each leaked group's strongest cross-split pair; groups reordered strongest first."""
    table = leaked_groups.copy()
    a = edges["row_a"].to_numpy(dtype=np.int64)
    b = edges["row_b"].to_numpy(dtype=np.int64)
    split_a, split_b = pd.Series(split[a]), pd.Series(split[b])
    across = (split_a.notna() & split_b.notna() & (split_a != split_b)).to_numpy()
    cross = pd.DataFrame(
        {
            "group_id": group[a[across]],
            "stage": edges["stage"].to_numpy()[across],
            "strength": edges["strength"].to_numpy(dtype=float)[across],
        }
    )
    best = cross.sort_values("strength", ascending=False, kind="stable").drop_duplicates("group_id")
    stage_of = dict(zip(best["group_id"], best["stage"], strict=True))
    strength_of = dict(zip(best["group_id"], best["strength"], strict=True))
    ids = table["group_id"].tolist()
    table["evidence"] = [str(stage_of.get(g, TRANSITIVE)) for g in ids]
    table["evidence_strength"] = [float(strength_of.get(g, 0.0)) for g in ids]
    table = table.sort_values(
        ["evidence_strength", "n_members", "group_id"],
        ascending=[False, False, True],
        kind="stable",
    )
    ordered: pd.DataFrame = table.reset_index(drop=True)
    return ordered


def _turned_spreads(
    grouped_df: pd.DataFrame,
    leaked_groups: pd.DataFrame,
    parameters: AuditParameters,
    orientations: OrientationHashes,
) -> None:
    """Set ``max_distance`` of each leaked group (up to 200 members) on turned distances.

    For dihedral audits, where the distance between a copy and its mirrored
    original is the one between their canonical-orientation hashes. Called
    while the report is built, before anyone sees it.
    """
    if not len(leaked_groups) or not len(orientations):
        return

    distances = PairDistances(grouped_df, method=parameters.method, orientations=orientations)
    positions = pd.Series(np.arange(len(grouped_df)), index=grouped_df.index)
    by_group = positions.groupby(grouped_df["group_id"].to_numpy())
    spreads = []
    for group_id, old in zip(leaked_groups["group_id"], leaked_groups["max_distance"], strict=True):
        rows = by_group.get_group(group_id).to_numpy()
        rows = rows[distances.valid[rows]]
        spread = distances.max_within(rows) if len(rows) <= ALL_PAIRS_MAX_MEMBERS else None
        spreads.append(old if spread is None else spread)
    leaked_groups["max_distance"] = pd.Series(spreads, index=leaked_groups.index, dtype="Int64")


def _leaked_group_table(
    grouped_df: pd.DataFrame, frame: pd.DataFrame, leaked_ids: pd.Index, order: list[str]
) -> pd.DataFrame:
    if len(leaked_ids) == 0:
        empty: pd.DataFrame = pd.DataFrame(
            {c: pd.Series(dtype=object) for c in LEAKED_GROUP_COLUMNS}
        ).astype({"n_members": int, "n_splits": int, "low_information": bool})
        return empty
    mask = frame["group_id"].isin(leaked_ids).to_numpy()
    members = frame[mask]
    # One count per (group, split) as a matrix with the splits in report order: no per-group
    # pandas calls (a leaked group per planted copy makes thousands of them) and no Python
    # object per (group, split) (82k leaked groups at 1M rows: ~60 MB of dicts and tuples).
    codes, ids = pd.factorize(members["group_id"].to_numpy())
    split_codes = members["split"].cat.codes.to_numpy()
    categories = [str(name) for name in members["split"].cat.categories]
    names = [name for name in order if name in categories]
    column_of = np.full(len(categories), -1, dtype=np.int64)
    column_of[[categories.index(name) for name in names]] = np.arange(len(names))
    with_split = split_codes >= 0
    counts = np.zeros((len(ids), len(names)), dtype=np.int64)
    np.add.at(counts, (codes[with_split], column_of[split_codes[with_split]]), 1)
    present = counts > 0
    table = pd.DataFrame(
        {
            "group_id": ids,
            "n_members": np.bincount(codes, minlength=len(ids)).astype(int),
            "splits_involved": [
                ", ".join(name for name, here in zip(names, row, strict=True) if here)
                for row in present.tolist()
            ],
            "n_splits": present.sum(axis=1).astype(int),
            "members_by_split": [
                ", ".join(
                    f"{name}:{count}" for name, count in zip(names, row, strict=True) if count
                )
                for row in counts.tolist()
            ],
        }
    )
    del codes, split_codes, counts, present
    table["max_distance"] = _spread_of(grouped_df, mask, table["group_id"])
    if "low_information" in grouped_df.columns:
        low = grouped_df.loc[mask, "low_information"].fillna(False).astype(bool)
        low_any = low.groupby(frame.loc[mask, "group_id"]).any()
        table["low_information"] = table["group_id"].map(low_any).fillna(False).astype(bool)
    else:
        table["low_information"] = False
    table["evidence"] = None
    table["evidence_strength"] = np.nan
    table = table.sort_values(["n_members", "group_id"], ascending=[False, True], kind="stable")
    ordered: pd.DataFrame = table.reset_index(drop=True)[LEAKED_GROUP_COLUMNS]
    return ordered


def _spread_of(grouped_df: pd.DataFrame, mask: np.ndarray, group_ids: pd.Series) -> pd.Series:
    """Largest Hamming distance inside each leaked group (missing when no hashes)."""
    missing = pd.Series([pd.NA] * len(group_ids), dtype="Int64")
    if "hash" not in grouped_df.columns:
        return missing
    subset = grouped_df.loc[mask, ["hash", "group_id"]]  # not every column's copy
    try:
        values, valid = hash_values_from_frame(subset)
    except (TypeError, ValueError):
        return missing
    labels = subset["group_id"].to_numpy()[valid]
    if labels.size == 0:
        return missing
    codes, uniques = pd.factorize(labels)
    spread = group_spread(values[valid], codes.astype(np.int64))
    by_code = dict(zip(spread["group_id"], spread["max_distance"], strict=False))
    result = {uniques[c]: by_code.get(c, 0) for c in range(len(uniques))}
    spread_by_group: pd.Series = pd.Series([result.get(g, pd.NA) for g in group_ids], dtype="Int64")
    return spread_by_group


def _warn_large_groups(frame: pd.DataFrame, images_by_split: pd.Series, sizes: pd.Series) -> None:
    # Only groups big enough to matter need a look: their rows alone are counted.
    large = sizes.index[sizes >= _LARGE_GROUP_MIN]
    if len(large) == 0:
        return
    with_split = frame[frame["group_id"].isin(large).to_numpy() & frame["split"].notna().to_numpy()]
    if with_split.empty:
        return
    counts = with_split.groupby(["group_id", "split"], observed=True).size()
    # Only groups big enough to matter need a look (a loop over every group is slow at 1M).
    counts = counts[counts >= _LARGE_GROUP_MIN]
    for (group_id, split), count in counts.items():
        total = images_by_split.get(split, 0)
        if count >= _LARGE_GROUP_MIN and total and count >= _LARGE_GROUP_SHARE * total:
            warnings.warn(
                f"duplicate group {group_id} holds {count} of {total} images of split "
                f"{split!r} ({100.0 * count / total:.1f}%): this is usually transitive chaining "
                "or blank images, not one photo copied many times. Check the group's spread, "
                "or lower the threshold.",
                LargeGroupWarning,
                stacklevel=3,
            )
            return
