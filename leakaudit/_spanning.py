"""Which leaked groups the pairs table lists as a spanning set rather than every pair.

Shared by the report's text, the exported tables and the HTML report (it sits below all three).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit.distances import ALL_PAIRS_MAX_MEMBERS, AuditSettings, PairDistances

__all__ = [
    "SPANNING_PAIRS_PER_MEMBER",
    "GroupedReport",
    "Members",
    "hash_classes",
    "lists_spanning",
    "spanning_group_ids",
]


class GroupedReport(AuditSettings, Protocol):
    """What this module reads of a report (a :class:`leakaudit.report.LeakageReport`):
    named here so this module does not import the report's (the report imports this one)."""

    @property
    def leaked_groups(self) -> pd.DataFrame: ...

    @property
    def table(self) -> pd.DataFrame | None: ...


#: A leaked group over :data:`~leakaudit.distances.ALL_PAIRS_MAX_MEMBERS` members whose
#: identical pairs (equal hashes: a placeholder copied thousands of times) number more than
#: this many per member lists a spanning set in the pairs table, not every pair: 10,000
#: copies of one image would be 50M rows (``listed`` is then ``"spanning"``).
SPANNING_PAIRS_PER_MEMBER = 25


class Members:
    """The valid rows of the report's leaked groups, grouped in the report's group order.

    ``rows`` holds table positions, one run per group (``start``/``count``,
    indexed by the group's rank in ``report.leaked_groups``), each run in table
    order: what a ``groupby(...).get_group`` per group gives, without a pandas
    call per group.
    """

    def __init__(
        self, report: GroupedReport, table: pd.DataFrame, valid: NDArray[np.bool_]
    ) -> None:
        self.ids = report.leaked_groups["group_id"].to_numpy()
        rank = pd.Index(self.ids).get_indexer(table["group_id"].to_numpy())
        rows = np.flatnonzero((rank >= 0) & valid)
        self.rows: NDArray[np.int64] = rows[np.argsort(rank[rows], kind="stable")]
        self.rank: NDArray[np.int64] = rank[self.rows].astype(np.int64)
        self.count: NDArray[np.int64] = np.bincount(self.rank, minlength=len(self.ids))
        self.start: NDArray[np.int64] = np.cumsum(self.count) - self.count

    def group_rows(self, rank: int) -> NDArray[np.int64]:
        start = int(self.start[rank])
        return self.rows[start : start + int(self.count[rank])]


def hash_classes(distances: PairDistances, rows: NDArray[np.int64]) -> NDArray[np.int64]:
    """A code per row of ``rows``, equal for rows whose hash columns are all equal."""
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64)  # pandas 2.0 cannot factorize an empty MultiIndex
    codes, _ = pd.factorize(pd.MultiIndex.from_arrays([c[rows] for c in distances.columns]))
    result: NDArray[np.int64] = np.asarray(codes, dtype=np.int64)
    return result


def lists_spanning(distances: PairDistances, rows: NDArray[np.int64]) -> bool:
    """Whether a group lists a spanning set: see :data:`SPANNING_PAIRS_PER_MEMBER`."""
    if len(rows) <= ALL_PAIRS_MAX_MEMBERS:
        return False
    counts = np.bincount(hash_classes(distances, rows))
    identical = int((counts * (counts - 1) // 2).sum())
    return identical > SPANNING_PAIRS_PER_MEMBER * len(rows)


def spanning_group_ids(report: GroupedReport) -> list[Any]:
    """The leaked groups whose pairs table lists a spanning set, not every pair.

    Groups over :data:`~leakaudit.distances.ALL_PAIRS_MAX_MEMBERS` members made mostly of
    identical images (see :data:`SPANNING_PAIRS_PER_MEMBER`).
    """
    if report.table is None or not len(report.leaked_groups):
        return []
    sizes = report.leaked_groups["n_members"].to_numpy()
    if not np.any(sizes > ALL_PAIRS_MAX_MEMBERS):
        return []
    table = report.table
    distances = PairDistances.of_report(report, table)
    members = Members(report, table, distances.valid)
    return [
        members.ids[rank]
        for rank in np.flatnonzero(members.count > ALL_PAIRS_MAX_MEMBERS).tolist()
        if lists_spanning(distances, members.group_rows(rank))
    ]
