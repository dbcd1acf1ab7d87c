"""Leak-free split assignments: move every leaked group whole into one split."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from leakaudit._validation import describe
from leakaudit.policy import DEFAULT_PRIORITY, match_priority, warn_unmatched_priority

__all__ = ["DEFAULT_PRIORITY", "clean_splits"]


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


def clean_splits(grouped_df: pd.DataFrame, priority: Sequence[str] | None = None) -> pd.DataFrame:
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

    Returns
    -------
    pandas.DataFrame
        A copy of ``grouped_df`` with ``split`` replaced by the corrected
        assignment, ``original_split`` holding the old one, and a boolean
        ``reassigned`` marking exactly the rows whose split changed.

    Examples
    --------
    >>> groups = pd.DataFrame({
    ...     "path": ["a.jpg", "b.jpg", "c.jpg"],
    ...     "split": ["train", "test", "val"],
    ...     "group_id": [1, 1, 2],
    ... })
    >>> clean_splits(groups)[["path", "split", "reassigned"]].values.tolist()
    [['a.jpg', 'train', False], ['b.jpg', 'train', True], ['c.jpg', 'val', False]]
    """
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
    out["split"] = pd.Series(new_split, index=out.index, dtype=object)
    out["reassigned"] = leaked & (new_split != original)
    return out
