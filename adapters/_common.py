"""Framework-free helpers the adapters share: re-split plans and group-aware splitting.

Everything here works on plain numpy/pandas data (group ids, split labels, class
labels), so the torchvision and Hugging Face adapters differ only in how they read
images and how they rebuild their own dataset objects.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._validation import check_bool, check_choice, describe
from leakaudit.cleaning import clean_splits
from leakaudit.report import LeakageReport

__all__ = [
    "RESPLIT_POLICIES",
    "ClassMismatchWarning",
    "GroupSplitResult",
    "ResplitResult",
    "SplitPlan",
    "assign_groups",
    "plan_resplit",
    "resolve_lengths",
]

#: What happens to a leaked group's rows outside its highest-priority split.
RESPLIT_POLICIES: tuple[str, ...] = ("move", "drop")


class ClassMismatchWarning(UserWarning):
    """A moved image's class does not exist in its new split; the class name was appended."""


@dataclass
class ResplitResult:
    """Leak-free splits rebuilt from an audit.

    Attributes
    ----------
    splits : mapping of str to dataset
        The new dataset objects, one per split, in the order of the input
        (a ``dict`` for torchvision, a ``datasets.DatasetDict`` for Hugging Face).
    moves : pandas.DataFrame
        One row per image that changed split or was dropped, with columns
        ``split`` (where it was), ``index`` (its position in that split's
        dataset), ``new_split`` (where it is now; missing when dropped),
        ``group_id`` and ``path``.
    report : LeakageReport
        The audit the new splits were computed from.
    policy : str
        ``"move"`` or ``"drop"``.
    """

    splits: Any
    moves: pd.DataFrame
    report: LeakageReport
    policy: str = "move"

    def __getitem__(self, split: str) -> Any:
        return self.splits[split]

    @property
    def n_moved(self) -> int:
        """Images that now sit in another split."""
        return int(self.moves["new_split"].notna().sum())

    @property
    def n_dropped(self) -> int:
        """Images removed (``policy="drop"``)."""
        return int(self.moves["new_split"].isna().sum())


def plan_resplit(
    table: pd.DataFrame,
    *,
    priority: Sequence[str] | None = None,
    policy: str = "move",
) -> pd.DataFrame:
    """Decide where every row of a grouped table goes.

    Parameters
    ----------
    table : pandas.DataFrame
        A report's table: columns ``split`` and ``group_id`` (plus anything else,
        kept).
    priority : sequence of str, optional
        Default ``("train", "val", "test")``; ``val`` also matches ``valid``,
        ``validation`` and ``dev``.
        Split precedence, as in :func:`leakaudit.cleaning.clean_splits`.
    policy : {"move", "drop"}, default "move"
        ``"move"``: every leaked group goes whole to its highest-priority split
        (:func:`~leakaudit.cleaning.clean_splits`). ``"drop"``: the group's rows in
        that split stay, its rows in every other split are dropped, so no split
        grows.

    Returns
    -------
    pandas.DataFrame
        A copy of ``table`` with ``split`` the new assignment (missing for a
        dropped row), ``original_split``, ``reassigned`` (moved) and ``dropped``.

    Examples
    --------
    >>> table = pd.DataFrame({"split": ["train", "test", "val"], "group_id": [0, 0, 1]})
    >>> plan_resplit(table, policy="drop")[["split", "dropped"]].values.tolist()
    [['train', False], [None, True], ['val', False]]
    """
    check_choice("policy", policy, RESPLIT_POLICIES)
    moved = clean_splits(table, priority)
    if policy == "move":
        moved["dropped"] = False
        return moved
    reassigned = moved["reassigned"].to_numpy(dtype=bool)
    new_split = moved["split"].to_numpy(dtype=object).copy()
    new_split[reassigned] = None
    moved["split"] = pd.Series(new_split, dtype=object, index=moved.index)
    moved["dropped"] = reassigned
    moved["reassigned"] = False
    return moved


def moves_table(plan: pd.DataFrame) -> pd.DataFrame:
    """Return the rows of a :func:`plan_resplit` result that moved or were dropped."""
    changed = plan[plan["reassigned"] | plan["dropped"]]
    columns = {
        "split": changed["original_split"].to_numpy(dtype=object),
        "index": changed["index"].to_numpy(dtype=np.int64),
        "new_split": pd.Series(changed["split"].to_numpy(dtype=object), dtype=object).where(
            changed["split"].notna().to_numpy(), None
        ),
        "group_id": changed["group_id"].to_numpy(),
        "path": changed["path"].to_numpy(dtype=object),
    }
    frame: pd.DataFrame = pd.DataFrame(columns).reset_index(drop=True)
    return frame


def destination_rows(
    plan: pd.DataFrame, split_order: Sequence[str]
) -> dict[str, list[tuple[str, int]]]:
    """For each split, the ``(source split, index)`` rows it receives, in a stable order.

    A split keeps its own surviving rows first, in their original order, then
    receives moved rows ordered by source split (in ``split_order``) and index.
    """
    position = {name: i for i, name in enumerate(split_order)}
    out: dict[str, list[tuple[str, int]]] = {name: [] for name in split_order}
    sources = plan["original_split"].to_numpy(dtype=object)
    targets = plan["split"].to_numpy(dtype=object, copy=True)
    targets[pd.isna(targets)] = None
    indices = plan["index"].to_numpy(dtype=np.int64)
    keys = sorted(
        range(len(plan)),
        key=lambda i: (
            position[str(targets[i])] if targets[i] is not None else -1,
            sources[i] != targets[i],
            position[str(sources[i])],
            int(indices[i]),
        ),
    )
    for i in keys:
        if targets[i] is not None:
            out[str(targets[i])].append((str(sources[i]), int(indices[i])))
    return out


def check_dihedral(dihedral: Any) -> bool:
    """Return ``dihedral`` after checking it is a bool (one wording with the core).

    Examples
    --------
    >>> check_dihedral(True)
    True
    >>> check_dihedral(1)
    Traceback (most recent call last):
    ...
    TypeError: dihedral must be a bool; got 1.
    """
    return check_bool("dihedral", dihedral)


def check_report_matches(report: LeakageReport, sizes: Mapping[str, int], what: str) -> None:
    """Raise ``ValueError`` unless ``report`` audited exactly these splits and sizes."""
    if report.table is None or "index" not in report.table.columns:
        raise ValueError(
            f"report must come from {what} (a table with 'split' and 'index' columns); "
            "got a report without one."
        )
    counts = report.table.groupby("split", sort=False).size().to_dict()
    expected = {k: v for k, v in sizes.items() if v}
    if {str(k): int(v) for k, v in counts.items()} != {str(k): int(v) for k, v in expected.items()}:
        raise ValueError(
            f"report must audit the same splits and sizes as the datasets given ({expected}); "
            f"got {counts}. Re-run the audit on these datasets."
        )


# ------------------------------------------------------------ group-aware splitting


@dataclass
class SplitPlan:
    """How a group-aware split came out against what was asked.

    Attributes
    ----------
    names : list of str
        The splits, in order.
    targets : numpy.ndarray of int
        The sizes asked for (fractions resolved as ``random_split`` does).
    sizes : numpy.ndarray of int
        The sizes obtained; they differ from ``targets`` only where duplicate
        groups (kept whole) made an exact fit impossible.
    assignment : numpy.ndarray of int
        Per row, the index into ``names`` of its split.
    n_groups : int
        Duplicate groups (2+ images) that were kept whole.
    n_grouped_images : int
        Images in those groups.
    stratified : bool
        Whether the split was stratified by label.
    by_label : pandas.DataFrame or None
        When stratified: images per label (rows) and split (columns).
    """

    names: list[str]
    targets: NDArray[np.int64]
    sizes: NDArray[np.int64]
    assignment: NDArray[np.int64]
    n_groups: int = 0
    n_grouped_images: int = 0
    stratified: bool = False
    by_label: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def deviation(self) -> dict[str, int]:
        """Per split, size obtained minus size asked for."""
        return {n: int(s - t) for n, s, t in zip(self.names, self.sizes, self.targets, strict=True)}

    @property
    def max_abs_deviation(self) -> int:
        """The largest absolute deviation over the splits."""
        return int(np.max(np.abs(self.sizes - self.targets))) if len(self.sizes) else 0

    def summary(self) -> pd.DataFrame:
        """One row per split: ``target``, ``size``, ``deviation``, and both as fractions."""
        total = max(int(self.targets.sum()), 1)
        frame: pd.DataFrame = pd.DataFrame(
            {
                "target": self.targets,
                "size": self.sizes,
                "deviation": self.sizes - self.targets,
                "target_fraction": np.round(self.targets / total, 4),
                "fraction": np.round(self.sizes / total, 4),
            },
            index=pd.Index(self.names, name="split"),
        )
        return frame

    def __str__(self) -> str:
        parts = ", ".join(
            f"{n}: {s} (asked {t}, {s - t:+d})"
            for n, s, t in zip(self.names, self.sizes, self.targets, strict=True)
        )
        return (
            f"group-aware split of {int(self.sizes.sum())} images, {self.n_groups} duplicate "
            f"group(s) ({self.n_grouped_images} images) kept whole: {parts}"
        )


@dataclass
class GroupSplitResult:
    """A dataset split group by group.

    Attributes
    ----------
    splits : mapping of str to dataset
        The new splits (a ``datasets.DatasetDict`` for Hugging Face).
    plan : SplitPlan
        Sizes asked for and obtained, and the row -> split assignment.
    report : LeakageReport
        The duplicate groups found in the dataset before splitting.
    """

    splits: Any
    plan: SplitPlan
    report: LeakageReport

    def __getitem__(self, split: str) -> Any:
        return self.splits[split]


def resolve_lengths(lengths: Sequence[Any], n: int) -> NDArray[np.int64]:
    """Turn ``lengths`` into integer sizes summing to ``n``, as ``random_split`` does.

    Integers must sum to ``n``. Fractions must sum to 1: each split gets
    ``floor(n * fraction)`` and the remainder is dealt one by one, round-robin.

    Examples
    --------
    >>> resolve_lengths([0.8, 0.1, 0.1], 11).tolist()
    [9, 1, 1]
    >>> resolve_lengths([7, 3], 10).tolist()
    [7, 3]
    """
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence) or not lengths:
        raise TypeError(
            f"lengths must be a non-empty sequence of ints or fractions; got {describe(lengths)}."
        )
    values: list[Any] = list(lengths)
    if all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
        sizes = np.asarray(values, dtype=np.int64)
        if (sizes < 0).any() or int(sizes.sum()) != n:
            raise ValueError(
                f"lengths must be non-negative ints summing to the dataset size ({n}); "
                f"got {values}."
            )
        return sizes
    if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values):
        raise TypeError(f"lengths must be ints or fractions; got {describe(values)}.")
    fractions = np.asarray(values, dtype=np.float64)
    if (
        (fractions < 0).any()
        or (fractions > 1).any()
        or not math.isclose(float(fractions.sum()), 1.0, abs_tol=1e-6)
    ):
        raise ValueError(
            f"lengths given as fractions must lie in [0, 1] and sum to 1; got {values}."
        )
    sizes = np.floor(n * fractions).astype(np.int64)
    remainder = n - int(sizes.sum())
    for i in range(remainder):
        sizes[i % len(sizes)] += 1
    return sizes


def _largest_fit(deficit: NDArray[np.float64], size: int, rng: np.random.Generator) -> int:
    # Prefer a split where the group fits; among equals, random (so ties do not
    # always favour the first split).
    fits = np.flatnonzero(deficit >= size)
    candidates = fits if fits.size else np.arange(deficit.size)
    best = deficit[candidates].max()
    tied = candidates[deficit[candidates] == best]
    return int(tied[rng.integers(tied.size)]) if tied.size > 1 else int(tied[0])


def _apportion(counts: NDArray[np.int64], targets: NDArray[np.int64]) -> NDArray[np.int64]:
    """Integer matrix (strata x splits) with row sums ``counts`` and column sums ``targets``."""
    total = max(int(counts.sum()), 1)
    ideal = counts[:, None] * targets[None, :] / total
    matrix = np.floor(ideal).astype(np.int64)
    row_left = counts - matrix.sum(axis=1)
    col_left = targets - matrix.sum(axis=0)
    remainders = ideal - matrix
    for s in np.argsort(-remainders.max(axis=1), kind="stable"):
        for _ in range(int(row_left[s])):
            open_cols = np.flatnonzero(col_left > 0)
            k = int(open_cols[np.argmax(remainders[s, open_cols])])
            matrix[s, k] += 1
            col_left[k] -= 1
            remainders[s, k] = -1.0
    return matrix


def assign_groups(
    group_ids: Sequence[Any] | NDArray[Any],
    targets: NDArray[np.int64],
    *,
    rng: np.random.Generator,
    labels: Sequence[Any] | NDArray[Any] | None = None,
) -> NDArray[np.int64]:
    """Assign every row to a split, keeping each group whole, sizes close to ``targets``.

    Groups are placed largest first (random order among equal sizes) into the
    split with the largest remaining room that still fits them; single images
    come last and fill the splits exactly, so the result matches ``targets``
    whenever the groups allow it. With ``labels``, the same is done per label
    (a group counts under its most common label) against per-label targets that
    add up to ``targets``.

    Parameters
    ----------
    group_ids : array-like
        One group id per row.
    targets : numpy.ndarray of int
        Split sizes asked for, summing to the number of rows.
    rng : numpy.random.Generator
        Source of randomness.
    labels : array-like, optional
        One label per row, to stratify by.

    Returns
    -------
    numpy.ndarray of int
        Per row, the index of its split.
    """
    codes, _ = pd.factorize(pd.Series(list(group_ids), dtype=object))
    n = len(codes)
    sizes = np.bincount(codes, minlength=codes.max() + 1 if n else 0).astype(np.int64)
    n_groups = sizes.size
    if labels is None:
        strata = np.zeros(n_groups, dtype=np.int64)
        counts = np.array([n], dtype=np.int64)
    else:
        label_codes, _ = pd.factorize(pd.Series(list(labels), dtype=object))
        # A group counts under its most common label (first one on ties).
        pairs = pd.DataFrame({"group": codes, "label": label_codes})
        majority = (
            pairs.groupby(["group", "label"], sort=True)
            .size()
            .reset_index(name="k")
            .sort_values(["group", "k"], ascending=[True, False], kind="stable")
            .drop_duplicates("group")
        )
        strata = np.zeros(n_groups, dtype=np.int64)
        strata[majority["group"].to_numpy()] = majority["label"].to_numpy()
        counts = np.bincount(strata, weights=sizes, minlength=label_codes.max() + 1 if n else 0)
        counts = counts.astype(np.int64)
    quota = _apportion(counts, np.asarray(targets, dtype=np.int64)).astype(np.float64)

    split_of_group = np.zeros(n_groups, dtype=np.int64)
    order = rng.permutation(n_groups)
    order = order[np.argsort(-sizes[order], kind="stable")]
    room = quota.copy()
    for g in order:
        s = strata[g]
        k = _largest_fit(room[s], int(sizes[g]), rng)
        split_of_group[g] = k
        room[s, k] -= sizes[g]
    return split_of_group[codes] if n else np.zeros(0, dtype=np.int64)


def build_plan(
    names: Sequence[str],
    targets: NDArray[np.int64],
    assignment: NDArray[np.int64],
    group_ids: Sequence[Any] | NDArray[Any],
    labels: Sequence[Any] | NDArray[Any] | None,
) -> SplitPlan:
    """Summarise an :func:`assign_groups` result."""
    sizes = np.bincount(assignment, minlength=len(names)).astype(np.int64)
    group_sizes = pd.Series(list(group_ids), dtype=object).value_counts()
    multi = group_sizes[group_sizes > 1]
    by_label = None
    if labels is not None:
        by_label = pd.crosstab(
            pd.Series(list(labels), name="label"),
            pd.Series([names[k] for k in assignment], name="split"),
        ).reindex(columns=list(names), fill_value=0)
    return SplitPlan(
        names=list(names),
        targets=np.asarray(targets, dtype=np.int64),
        sizes=sizes,
        assignment=assignment,
        n_groups=len(multi),
        n_grouped_images=int(multi.sum()),
        stratified=labels is not None,
        by_label=by_label,
    )
