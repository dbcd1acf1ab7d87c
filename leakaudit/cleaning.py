"""Leak-free split assignments: every leaked group whole in one split.

Two policies over plain numpy/pandas data, used alike by the command line, the
adapters and any user with a table of group ids:

- :func:`clean_splits` corrects an existing split: a leaked group goes whole to
  its highest-priority split (``policy="move"``), or its rows elsewhere are
  marked dropped (``policy="drop"``);
- :func:`split_groups` splits from scratch, keeping every duplicate group whole,
  sizes as close to those asked as the groups allow, optionally stratified.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._validation import check_choice, check_int, describe
from leakaudit.policy import DEFAULT_PRIORITY, match_priority, warn_unmatched_priority

__all__ = [
    "CLEAN_POLICIES",
    "DEFAULT_PRIORITY",
    "SplitPlan",
    "assign_groups",
    "clean_splits",
    "resolve_lengths",
    "split_groups",
]

#: What happens to a leaked group's rows outside its highest-priority split.
CLEAN_POLICIES: tuple[str, ...] = ("move", "drop")


def _check_priority(priority: Sequence[str]) -> tuple[str, ...]:
    if isinstance(priority, str) or not all(isinstance(p, str) for p in priority):
        raise TypeError(
            f"priority must be a sequence of split names, highest first; got {describe(priority)}."
        )
    names = tuple(priority)
    if len(set(names)) != len(names):
        raise ValueError(f"priority must not repeat a split; got {describe(priority)}.")
    return names


def split_rank(splits: Sequence[str], priority: Sequence[str]) -> dict[str, int]:
    """Rank every split: those in ``priority`` first (in that order), then the
    rest in order of first appearance."""
    rank = {name: i for i, name in enumerate(priority)}
    for name in splits:
        if name not in rank:
            rank[name] = len(rank)
    return rank


def clean_splits(
    grouped_df: pd.DataFrame,
    priority: Sequence[str] | None = None,
    *,
    policy: str = "move",
) -> pd.DataFrame:
    """Produce a leak-free split assignment.

    Every group whose members sit in more than one split is moved whole to the
    highest-priority split among them. Splits not named in ``priority`` rank
    after those that are, in order of first appearance. Rows of groups that do
    not leak are untouched; nothing is dropped. Rows without a split take no
    part (they stay without one).

    Parameters
    ----------
    grouped_df : pandas.DataFrame
        Columns ``group_id`` and ``split`` (and usually ``path``), as from
        :func:`~leakaudit.find_duplicate_groups`.
    priority : sequence of str, optional
        Split precedence, highest first: a leaked group touching train and
        test goes wholly to train. Default ``("train", "val", "test")``. A
        name matches a split of that name or any alias of it (``val`` matches
        ``valid``, ``validation`` and ``dev``, as Hugging Face's ``imagefolder``
        names it); a name given here that matches no split is named in a
        :class:`~leakaudit.policy.PriorityWarning`.
    policy : {"move", "drop"}, default "move"
        ``"move"``: the group's other members move to that split.
        ``"drop"``: they are marked ``dropped`` (their ``split`` becomes
        missing) so that no split grows; the rows stay in the table.

    Returns
    -------
    pandas.DataFrame
        A copy of ``grouped_df`` with ``split`` replaced by the corrected
        assignment, ``original_split`` holding the old one, a boolean
        ``reassigned`` marking exactly the rows that moved, and a boolean
        ``dropped`` marking those left out (always False with "move").

    Examples
    --------
    >>> groups = pd.DataFrame({
    ...     "path": ["a.jpg", "b.jpg", "c.jpg"],
    ...     "split": ["train", "test", "val"],
    ...     "group_id": [1, 1, 2],
    ... })
    >>> clean_splits(groups)[["path", "split", "reassigned"]].values.tolist()
    [['a.jpg', 'train', False], ['b.jpg', 'train', True], ['c.jpg', 'val', False]]
    >>> clean_splits(groups, policy="drop")[["split", "dropped"]].values.tolist()
    [['train', False], [None, True], ['val', False]]
    """
    check_choice("policy", policy, CLEAN_POLICIES)
    if not isinstance(grouped_df, pd.DataFrame):
        raise TypeError(f"grouped_df must be a pandas DataFrame; got {type(grouped_df).__name__}.")
    missing = [c for c in ("group_id", "split") if c not in grouped_df.columns]
    if missing:
        raise ValueError(
            "grouped_df must have columns 'group_id' and 'split' (from find_duplicate_groups); "
            f"missing: {', '.join(missing)}."
        )
    names = DEFAULT_PRIORITY if priority is None else _check_priority(priority)
    split = grouped_df["split"].astype(object).where(grouped_df["split"].notna(), None)
    has_split = split.notna().to_numpy()
    present = [str(s) for s in pd.unique(split[has_split])]
    ordered, unmatched = match_priority(names, present)
    if priority is not None:
        warn_unmatched_priority(unmatched, present)
    rank = split_rank(present, ordered)
    by_rank = {r: name for name, r in rank.items()}

    codes, _ = pd.factorize(grouped_df["group_id"])
    ranks = np.full(len(grouped_df), np.iinfo(np.int64).max, dtype=np.int64)
    ranks[has_split] = [rank[str(s)] for s in split[has_split]]
    best = pd.Series(ranks).groupby(codes).transform("min").to_numpy()
    worst = pd.Series(np.where(has_split, ranks, -1)).groupby(codes).transform("max").to_numpy()
    leaked = has_split & (best != worst)

    new_split = split.to_numpy(dtype=object).copy()
    new_split[leaked] = [by_rank[int(r)] for r in best[leaked]]
    out: pd.DataFrame = grouped_df.copy()
    original = split.to_numpy(dtype=object)
    # object dtype keeps missing splits as None (pandas 3 would turn them into NaN strings)
    out["original_split"] = pd.Series(original, index=out.index, dtype=object)
    changed = leaked & (new_split != original)
    dropped = changed if policy == "drop" else np.zeros(len(out), dtype=bool)
    new_split[dropped] = None
    out["split"] = pd.Series(new_split, index=out.index, dtype=object)
    out["reassigned"] = changed & ~dropped
    out["dropped"] = dropped
    return out


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


def _build_plan(
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


def split_groups(
    group_ids: Sequence[Any] | NDArray[Any],
    lengths: Sequence[Any],
    *,
    names: Sequence[str] | None = None,
    seed: int | np.random.Generator | None = 0,
    labels: Sequence[Any] | NDArray[Any] | None = None,
) -> SplitPlan:
    """Split rows into parts of the sizes asked for, never separating a duplicate group.

    The framework-free core of the adapters' ``leak_free_random_split`` and
    ``leak_free_split``: give it the ``group_id`` column of
    :func:`~leakaudit.find_duplicate_groups` (or of an audit's table).

    Parameters
    ----------
    group_ids : array-like
        One group id per row; rows sharing an id always land in the same split.
    lengths : sequence of int or float
        Sizes summing to the number of rows, or fractions summing to 1
        (resolved as ``torch.utils.data.random_split`` does).
    names : sequence of str, optional
        Split names (default ``split0``, ``split1``, ...).
    seed : int, numpy.random.Generator or None, default 0
        Seed of the random placement (a Generator is used as it is, and
        advanced; None: a fresh, unseeded one).
    labels : array-like, optional
        One class label per row, to stratify by.

    Returns
    -------
    SplitPlan
        ``assignment`` (per row, the index into ``names``), the sizes asked
        for and obtained.

    Examples
    --------
    >>> plan = split_groups([0, 0, 1, 2, 3, 4, 5, 6, 7, 8], [0.8, 0.2], names=["train", "test"])
    >>> plan.sizes.tolist(), bool(plan.assignment[0] == plan.assignment[1])
    ([8, 2], True)
    """
    group_list = list(group_ids)
    if isinstance(seed, np.random.Generator):
        rng = seed
    else:
        rng = np.random.default_rng(None if seed is None else check_int("seed", seed, 0))
    targets = resolve_lengths(lengths, len(group_list))
    split_names = (
        [f"split{i}" for i in range(len(targets))] if names is None else [str(n) for n in names]
    )
    if len(split_names) != len(targets):
        raise ValueError(
            f"names must have one name per length ({len(targets)}); got {len(split_names)}."
        )
    label_list = None if labels is None else list(labels)
    if label_list is not None and len(label_list) != len(group_list):
        raise ValueError(
            f"labels must have one label per row (length {len(group_list)}); "
            f"got length {len(label_list)}."
        )
    assignment = assign_groups(group_list, targets, rng=rng, labels=label_list)
    return _build_plan(split_names, targets, assignment, group_list, label_list)
