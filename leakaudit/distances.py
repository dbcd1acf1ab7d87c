"""Distances between images as the audit compared them.

One definition used by the report (group spreads), the exported tables and the
HTML report: for ``"phash+dhash"`` the larger of the two hash distances, and
with dihedral matching the smallest distance over the images' canonical
orientations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._parameters import AuditParameters
from leakaudit.frames import hash_values_from_frame
from leakaudit.hashing import popcount64

if TYPE_CHECKING:
    from leakaudit.hashing import OrientationHashes

__all__ = ["ALL_PAIRS_MAX_MEMBERS", "AuditSettings", "PairDistances", "table_distances"]

#: Groups up to this size are measured on every pair of members (spreads, the pairs table);
#: bigger ones, usually transitive chaining, only through their direct links or a sample.
ALL_PAIRS_MAX_MEMBERS = 200


def table_distances(
    table: pd.DataFrame, method: str | None
) -> tuple[list[NDArray[np.uint64]], NDArray[np.bool_]]:
    """Return the hash columns the threshold applies to, and which rows have them.

    For ``"phash+dhash"`` the distance of two images is the larger of their
    pHash and dHash distances (a pair links when both are within the
    threshold); for ``"phash"``/``"dhash"`` that column alone; otherwise the
    ``hash`` column.
    """
    names = {"phash+dhash": ["phash", "dhash"], "phash": ["phash"], "dhash": ["dhash"]}.get(
        method or "", ["hash"]
    )
    if not all(name in table.columns for name in names):
        names = ["hash"]
    columns: list[NDArray[np.uint64]] = []
    valid = np.ones(len(table), dtype=bool)
    for name in names:
        values, ok = hash_values_from_frame(table, name)
        columns.append(values)
        valid &= ok
    return columns, valid


def _distance(columns: list[NDArray[np.uint64]], i: NDArray[np.int64], j: NDArray[np.int64]) -> Any:
    result = np.zeros(np.broadcast(i, j).shape, dtype=np.int64)
    for values in columns:
        result = np.maximum(result, popcount64(values[i] ^ values[j]).astype(np.int64))
    return result


class AuditSettings(Protocol):
    """What :meth:`PairDistances.of_report` reads of a report (a
    :class:`leakaudit.report.LeakageReport`): named here so this module does not
    import the report's (the report imports this one)."""

    @property
    def parameters(self) -> AuditParameters: ...

    @property
    def orientations(self) -> OrientationHashes | None: ...


class PairDistances:
    """Distances of row pairs as the audit saw them.

    The plain distance of :func:`table_distances`; with dihedral matching
    (``orientations``) the smallest over the two rows' canonical
    orientation entries (what the search compared); with per-source
    thresholds (a ``threshold`` column) each pair's limit is the smaller of
    its rows'.
    """

    def __init__(
        self,
        table: pd.DataFrame,
        *,
        method: str | None,
        threshold: int | None = None,
        orientations: OrientationHashes | None = None,
    ) -> None:
        self.columns, self.valid = table_distances(table, method)
        self.threshold = threshold
        self.limits: NDArray[np.int64] | None = None
        if "threshold" in table.columns:
            self.limits = table["threshold"].to_numpy(dtype=np.int64)
            self.threshold = int(self.limits.max()) if len(self.limits) else None
        self.entries: list[NDArray[np.uint64]] | None = None
        if orientations is not None and len(orientations):
            by_method = {"phash": [orientations.phash], "dhash": [orientations.dhash]}
            self.entries = by_method.get(method or "", [orientations.phash, orientations.dhash])
            rows = np.arange(len(table))
            self.start = np.searchsorted(orientations.owner, rows, side="left")
            self.count = np.searchsorted(orientations.owner, rows, side="right") - self.start

    def plain(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
        return _distance(self.columns, a, b)  # type: ignore[no-any-return]

    def turned(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
        """Smallest distance over the orientation entries (65 where a row has none)."""
        a, b = np.broadcast_arrays(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
        result = np.full(len(a), 65, dtype=np.int64)
        if self.entries is None or not len(a):
            return result
        count_a, count_b = self.count[a], self.count[b]
        per_pair = count_a * count_b
        pair = np.repeat(np.arange(len(a)), per_pair)
        offset = np.arange(int(per_pair.sum())) - np.repeat(
            np.cumsum(per_pair) - per_pair, per_pair
        )
        ia = self.start[a][pair] + offset // count_b[pair]
        ib = self.start[b][pair] + offset % count_b[pair]
        distance = np.zeros(len(pair), dtype=np.int64)
        for values in self.entries:
            distance = np.maximum(distance, popcount64(values[ia] ^ values[ib]))
        np.minimum.at(result, pair, distance)
        return result

    def __call__(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
        """The distance the search linked by: the orientation entries' where both rows have them."""
        plain = self.plain(a, b)
        if self.entries is None:
            return plain
        turned = self.turned(a, b)
        both = (self.count[a] > 0) & (self.count[b] > 0)
        return np.where(both, turned, plain)

    @classmethod
    def of_report(cls, report: AuditSettings, table: pd.DataFrame) -> PairDistances:
        """The distances of a report's audit (its method, threshold and orientations)."""
        threshold = report.parameters.threshold
        single = None if threshold is None or isinstance(threshold, Mapping) else int(threshold)
        return cls(
            table,
            method=report.parameters.method,
            threshold=single,
            orientations=report.orientations,
        )

    def max_within(self, rows: NDArray[np.int64]) -> int | None:
        """The largest distance between two of ``rows`` (those with hashes); None if < 2."""
        rows = rows[self.valid[rows]]
        if len(rows) < 2:
            return None
        ii, jj = np.triu_indices(len(rows), k=1)
        return int(self(rows[ii], rows[jj]).max())

    def limit(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64] | int | None:
        if self.limits is not None:
            return np.minimum(self.limits[a], self.limits[b])
        return self.threshold
