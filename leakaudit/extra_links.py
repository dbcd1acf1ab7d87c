"""Add pairs judged outside the audit to a report: its groups, counts and evidence follow.

An audit's groups are the union of the pairs its stages accepted. A caller that judges
more pairs by other means (a learned copy detector, a reviewer's list, an adapter such
as :mod:`leakaudit.adapters.sscd`) adds them with :func:`with_extra_links`: the pairs
join the groups transitively, and the new report is built as the audit builds its own
(:func:`~leakaudit.report.dhash_audit`), so ``leaked_groups``, the per-split counts,
:func:`~leakaudit.clean_splits` and the pairs table all see them. Each added pair is an
edge whose ``stage`` names its evidence, so a group joined by one says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from leakaudit._evidence import EDGE_COLUMNS, TRANSITIVE
from leakaudit.grouping import merge_group_labels
from leakaudit.report import LeakageReport, dhash_audit

__all__ = ["EXTRA_LINKS_KEY", "with_extra_links"]

#: The parameters' key under which :func:`with_extra_links` records how many pairs each
#: evidence added (``report.parameters["extra_links"] == {"sscd": 12}``).
EXTRA_LINKS_KEY = "extra_links"


def _pair_rows(pairs: pd.DataFrame, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(pairs, pd.DataFrame):
        raise TypeError(f"pairs must be a pandas DataFrame; got {type(pairs).__name__}.")
    missing = [c for c in ("row_a", "row_b") if c not in pairs.columns]
    if missing:
        raise ValueError(
            f"pairs must have columns 'row_a' and 'row_b' (positions in report.table); "
            f"missing: {', '.join(missing)}."
        )
    if pairs[["row_a", "row_b"]].isna().any().any():
        raise ValueError("pairs' row_a and row_b must not contain missing values.")
    a = pairs["row_a"].to_numpy(dtype=np.int64)
    b = pairs["row_b"].to_numpy(dtype=np.int64)
    if a.size and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= n_rows):
        raise ValueError(f"pairs' rows must be positions in report.table (0..{n_rows - 1}).")
    if (a == b).any():
        raise ValueError("pairs must join two different rows (row_a == row_b found).")
    return a, b


def _column(pairs: pd.DataFrame, name: str, default: float) -> np.ndarray:
    if name not in pairs.columns:
        return np.full(len(pairs), default, dtype=float)
    values = pd.to_numeric(pairs[name], errors="raise").to_numpy(dtype=float)
    if np.isnan(values).any() or ((values < 0) | (values > 1)).any():
        raise ValueError(f"pairs[{name!r}] must hold numbers in [0, 1].")
    return values


def with_extra_links(
    report: LeakageReport,
    pairs: pd.DataFrame,
    *,
    evidence: str,
) -> LeakageReport:
    """``report`` with ``pairs`` (judged elsewhere) joined into its groups.

    Parameters
    ----------
    report : LeakageReport
        An audit with its table (every audit function returns one).
    pairs : pandas.DataFrame
        Columns ``row_a`` and ``row_b``: positions in ``report.table`` of two images
        judged copies. Optional ``similarity`` (the judge's score in [0, 1]) and
        ``strength`` (the evidence strength in [0, 1] that orders the leaked groups;
        default half the similarity, as the embedding stage's pairs, or 0.5).
    evidence : str
        What judged the pairs (``"sscd"``, ``"reviewed"``): their edges' ``stage``, and
        the ``evidence`` of a leaked group whose strongest cross-split pair is one.

    Returns
    -------
    LeakageReport
        A new report (``report`` is not changed): groups joined transitively by the
        pairs and renumbered, every count recomputed, the pairs appended to ``edges``
        (when the report has edges; a report without them, the bare-threshold audit,
        has no evidence to add to), ``evidence`` appended to ``parameters["stages"]``
        when it has stages, and ``parameters["extra_links"]`` counting the pairs added
        per evidence.

    Examples
    --------
    >>> frame = pd.DataFrame({"path": ["a", "b", "c"], "split": ["train", "test", "test"],
    ...                       "group_id": [0, 1, 2]})
    >>> report = dhash_audit(frame)
    >>> linked = with_extra_links(report, pd.DataFrame({"row_a": [0], "row_b": [2]}),
    ...                           evidence="reviewed")
    >>> report.n_leaked_images, linked.n_leaked_images
    (0, 2)
    """
    if not isinstance(report, LeakageReport):
        raise TypeError(f"report must be a LeakageReport; got {type(report).__name__}.")
    if not isinstance(evidence, str) or not evidence.strip() or evidence == TRANSITIVE:
        raise ValueError(
            f"evidence must name what judged the pairs (a non-empty string other than "
            f"{TRANSITIVE!r}); got {evidence!r}."
        )
    table = report.table
    if table is None:
        raise ValueError("report has no table: with_extra_links needs report.table.")
    a, b = _pair_rows(pairs, len(table))
    similarity = (
        _column(pairs, "similarity", 0.0)
        if "similarity" in pairs.columns
        else np.full(len(a), np.nan, dtype=float)
    )
    strength = _column(pairs, "strength", 0.5)
    if "strength" not in pairs.columns and "similarity" in pairs.columns:
        strength = 0.5 * similarity
    codes = pd.factorize(table["group_id"], sort=False)[0].astype(np.int64)
    grouped = table.copy()
    grouped["group_id"] = merge_group_labels(codes, [np.column_stack([a, b])])

    edges = report.edges
    if edges is not None:
        added = pd.DataFrame(
            {
                "row_a": np.minimum(a, b),
                "row_b": np.maximum(a, b),
                "stage": evidence,
                "distance": pd.array([pd.NA] * len(a), dtype="Int64"),
                "similarity": similarity,
                "inliers": pd.array([pd.NA] * len(a), dtype="Int64"),
                "strength": strength,
            }
        )[EDGE_COLUMNS]
        edges = pd.concat([edges, added], ignore_index=True) if len(added) else edges

    parameters: dict[str, Any] = dict(report.parameters)
    if "stages" in parameters and evidence not in parameters["stages"]:
        parameters["stages"] = [*parameters["stages"], evidence]
    counts = dict(parameters.get(EXTRA_LINKS_KEY) or {})
    counts[evidence] = int(counts.get(evidence, 0)) + len(a)
    parameters[EXTRA_LINKS_KEY] = counts
    rebuilt = dhash_audit(
        grouped,
        parameters=parameters,
        embedding_pairs=report.embedding_pairs,
        orientations=report.orientations,
        edges=edges,
    )
    return rebuilt.with_splits([str(s) for s in report.images_by_split.index])
