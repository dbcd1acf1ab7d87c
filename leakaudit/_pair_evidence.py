"""The evidence of a pair of images in the tables: the verified pair that links them (looked up by
row pair), or what their hashes and digests show; its stage, scores and kind of copy.
"""

from __future__ import annotations

import collections
import math
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._evidence import COPY_KIND, TRANSITIVE
from leakaudit._text import bits as bits_text
from leakaudit.copykind import copy_kind
from leakaudit.distances import PairDistances
from leakaudit.report import LeakageReport

__all__ = [
    "Chains",
    "EdgeIndex",
    "PairKinds",
    "Similarities",
    "copy_kinds",
    "digest_codes",
    "evidence_text",
    "hash_rule_evidence",
    "pair_stages",
    "require_table",
]


def require_table(report: LeakageReport) -> pd.DataFrame:
    if report.table is None:
        raise ValueError("report has no table (it was rebuilt from JSON); re-run the audit.")
    return report.table


def copy_kinds(
    stage: NDArray[Any], distance: NDArray[Any], edges: EdgeIndex, edge: NDArray[np.int64]
) -> NDArray[Any]:
    """:data:`~leakaudit.export.PAIR_KIND_COLUMN` of pairs: ``stage`` by the hash rule
    (:func:`pair_stages`), ``edge`` each pair's verified edge (-1: none)."""
    kinds = np.empty(len(stage), dtype=object)
    worded: dict[tuple[Any, Any], str] = {}  # a table has few distinct (stage, distance)

    def words(how: Any, bits: Any) -> str:
        key = (how, bits)
        if key not in worded:
            worded[key] = copy_kind(how, distance=bits)
        return worded[key]

    for k, (how, bits, found) in enumerate(
        zip(stage.tolist(), distance.tolist(), edge.tolist(), strict=True)
    ):
        if how == "exact bytes":
            kinds[k] = words(how, None)
        elif found >= 0:
            told = edges.kind[found]
            kinds[k] = (
                told
                if isinstance(told, str) and told
                else words(edges.stage[found], edges.distance[found])
            )
        else:
            kinds[k] = words(TRANSITIVE if edges.present else how, bits)
    return kinds


class PairKinds:
    """:data:`~leakaudit.export.PAIR_KIND_COLUMN` of any row pairs of one report, as the pairs
    table words them.

    Built once per report (its distances and verified pairs indexed), then called
    with arrays of row pairs, e.g. each group card of the HTML report.
    """

    def __init__(self, report: LeakageReport, distances: PairDistances | None = None) -> None:
        table = require_table(report)
        self.distances = distances or PairDistances.of_report(report, table)
        self.digests = digest_codes(table)
        self.low = _low_information(table)
        self.similar = Similarities(report)
        self.edges = EdgeIndex(report.edges)

    def __call__(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[Any]:
        """The phrase of each pair ``(a[k], b[k])`` (rows of the report's table, valid ones)."""
        distance = self.distances(a, b)
        stage = pair_stages(
            a,
            b,
            self.distances.plain(a, b),
            distance,
            self.distances.limit(a, b),
            self.digests,
            self.low,
            self.similar.lookup(a, b),
        )
        return copy_kinds(stage, distance, self.edges, self.edges.lookup(a, b))


def digest_codes(table: pd.DataFrame) -> NDArray[np.int64]:
    """One code per distinct ``digest`` (-1 where missing), so equal digests compare as ints."""
    if "digest" not in table:
        return np.full(len(table), -1, dtype=np.int64)
    digests = table["digest"].astype(object).where(table["digest"].notna(), None)
    codes, _ = pd.factorize(digests.to_numpy(), use_na_sentinel=True)
    result: NDArray[np.int64] = codes.astype(np.int64)
    return result


class _PairKeys:
    """Unordered row pairs as sorted integer keys ``low * scale + high``, for lookups."""

    def __init__(self, keys: NDArray[np.int64], scale: int) -> None:
        self.keys = keys  # ascending, unique
        self.scale = scale

    @classmethod
    def empty(cls) -> _PairKeys:
        return cls(np.zeros(0, dtype=np.int64), 0)

    def positions(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
        """The place in ``keys`` of each pair ``(a[k], b[k])``; -1 where it is not there."""
        result = np.full(len(a), -1, dtype=np.int64)
        if not len(self.keys) or not len(a):
            return result
        low, high = np.minimum(a, b), np.maximum(a, b)
        inside = np.flatnonzero(high < self.scale)
        keys = low[inside] * self.scale + high[inside]
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        found = self.keys[at] == keys
        result[inside[found]] = at[found]
        return result

    def within(self, rows: NDArray[np.int64]) -> NDArray[np.int64]:
        """The pairs with both rows among ``rows`` (ascending), as positions in ``rows``."""
        if not len(self.keys):
            return np.zeros((0, 2), dtype=np.int64)
        low, high = self.keys // self.scale, self.keys % self.scale
        inside = np.isin(low, rows) & np.isin(high, rows)
        return np.stack(
            [np.searchsorted(rows, low[inside]), np.searchsorted(rows, high[inside])], axis=1
        ).astype(np.int64)


class Similarities:
    """Cosines of the pairs the embedding stage linked, looked up by row pair.

    Where the stage reports a pair twice, the last value counts (as in a dict
    built from its pairs in order).
    """

    def __init__(self, report: LeakageReport) -> None:
        self.pairs = _PairKeys.empty()
        self.values = np.zeros(0, dtype=np.float64)
        pairs = getattr(report, "embedding_pairs", None)
        if pairs is None or len(pairs) == 0:
            return
        row_a = pairs["row_a"].to_numpy(dtype=np.int64)
        row_b = pairs["row_b"].to_numpy(dtype=np.int64)
        low, high = np.minimum(row_a, row_b), np.maximum(row_a, row_b)
        scale = int(high.max()) + 1
        keys = low * scale + high
        # np.unique gives each key's first place in the reversed list: its last in the stage's.
        unique, last = np.unique(keys[::-1], return_index=True)
        self.pairs = _PairKeys(unique, scale)
        self.values = pairs["similarity"].to_numpy(dtype=np.float64)[::-1][last]

    def lookup(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
        """The similarity of each pair ``(a[k], b[k])``; NaN where the stage did not link it."""
        at = self.pairs.positions(a, b)
        result = np.full(len(a), np.nan, dtype=np.float64)
        result[at >= 0] = self.values[at[at >= 0]]
        return result

    def within(self, rows: NDArray[np.int64]) -> NDArray[np.int64]:
        """The linked pairs with both rows among ``rows`` (ascending), as positions in ``rows``."""
        return self.pairs.within(rows)


class EdgeIndex:
    """The verified pairs of ``report.edges``, looked up by row pair.

    Where a pair is given twice (a pixel edge and an embedding edge), the
    stronger counts.
    """

    def __init__(self, edges: pd.DataFrame | None) -> None:
        self.present = edges is not None
        self.pairs = _PairKeys.empty()
        self.index = np.zeros(0, dtype=np.int64)
        n = 0 if edges is None else len(edges)
        self.row_a = np.zeros(n, dtype=np.int64)
        self.row_b = np.zeros(n, dtype=np.int64)
        self.stage = np.zeros(n, dtype=object)
        self.kind = np.full(n, None, dtype=object)
        self.distance = np.full(n, np.nan)
        self.similarity = np.full(n, np.nan)
        self.inliers = np.full(n, np.nan)
        self.strength = np.zeros(n)
        if edges is None or n == 0:
            return
        row_a = edges["row_a"].to_numpy(dtype=np.int64)
        row_b = edges["row_b"].to_numpy(dtype=np.int64)
        self.row_a, self.row_b = np.minimum(row_a, row_b), np.maximum(row_a, row_b)
        self.stage = edges["stage"].astype(object).to_numpy()
        if COPY_KIND in edges:
            self.kind = edges[COPY_KIND].astype(object).to_numpy()
        self.distance = _numbers(edges["distance"])
        self.distance[self.distance < 0] = np.nan  # -1: only crop or rotation entries matched
        self.similarity = _numbers(edges["similarity"])
        self.inliers = _numbers(edges["inliers"])
        self.inliers[self.inliers < 0] = np.nan
        self.strength = np.nan_to_num(_numbers(edges["strength"]), nan=0.0)
        scale = int(self.row_b.max()) + 1
        keys = self.row_a * scale + self.row_b
        order = np.lexsort((-self.strength, keys))  # by key, the strongest first
        first = np.r_[True, keys[order][1:] != keys[order][:-1]]
        self.pairs = _PairKeys(keys[order][first], scale)
        self.index = order[first]

    def lookup(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
        """The edge of each pair ``(a[k], b[k])`` (a position in ``edges``); -1 where none."""
        at = self.pairs.positions(a, b)
        result = np.full(len(a), -1, dtype=np.int64)
        result[at >= 0] = self.index[at[at >= 0]]
        return result

    def within(self, rows: NDArray[np.int64]) -> NDArray[np.int64]:
        """The edges with both rows among ``rows`` (ascending), as positions in ``rows``."""
        return self.pairs.within(rows)

    def columns(self, found: NDArray[np.int64]) -> dict[str, Any]:
        """:data:`~leakaudit.export.PAIR_EVIDENCE_COLUMNS` of the pairs whose edges are ``found``
        (-1: none)."""
        direct = found >= 0
        take = np.where(direct, found, 0)

        def pick(values: NDArray[Any], missing: Any) -> NDArray[Any]:
            if not len(values):
                return np.full(len(found), missing, dtype=values.dtype)
            return np.where(direct, values[take], missing)

        inliers = pick(self.inliers, np.nan)
        return {
            "direct": direct,
            "evidence": pick(self.stage, TRANSITIVE).astype(object),
            "evidence_similarity": pick(self.similarity, np.nan).astype(float),
            "inliers": pd.array(
                [pd.NA if np.isnan(v) else int(v) for v in inliers.tolist()], dtype="Int64"
            ),
            "evidence_strength": pick(self.strength, 0.0).astype(float),
        }


def _numbers(column: pd.Series) -> NDArray[np.float64]:
    """``column`` as floats, missing values (None, NA, NaN) as NaN."""
    numbers = pd.Series(pd.to_numeric(column, errors="coerce"), dtype="Float64")
    values: NDArray[np.float64] = np.array(
        numbers.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64
    )
    return values


def _present(value: Any) -> bool:
    return (
        value is not None
        and value is not pd.NA
        and not (isinstance(value, float) and math.isnan(value))
    )


def evidence_text(
    stage: Any,
    *,
    distance: Any = None,
    similarity: Any = None,
    inliers: Any = None,
) -> str:
    """Describe a verified pair's evidence in a few words (text, to be escaped by the caller).

    Parameters
    ----------
    stage : str
        The stage that accepted the pair (a value of ``report.edges["stage"]``),
        or ``"transitive"``.
    distance, similarity, inliers : number, optional
        The pair's hash distance, the pixel check's (or the embedding's)
        similarity and the geometric check's inlier count; missing ones are left out.

    Returns
    -------
    str

    Examples
    --------
    >>> evidence_text("pixels", distance=6, similarity=0.934)
    'pixels: similarity 0.93, distance 6 bits'
    >>> evidence_text("geometry", inliers=57, distance=None)
    'geometry: 57 inliers'
    >>> evidence_text("bytes", distance=0)
    'bytes: identical files'
    """
    name = str(stage)
    if name == "bytes":
        return "bytes: identical files"
    if name == TRANSITIVE:
        return "transitive: no verified pair links them directly"
    parts = []
    if _present(similarity) and name in (
        "pixels",
        "geometry",
        "registered",
        "texture",
        "embedding",
    ):
        label = "cosine" if name == "embedding" else "similarity"
        parts.append(f"{label} {float(similarity):.2f}")
    if _present(inliers) and float(inliers) >= 0:
        parts.append(f"{int(inliers)} inliers")
    if _present(distance) and float(distance) >= 0:
        parts.append(f"distance {bits_text(int(distance))}")
    return name + (": " + ", ".join(parts) if parts else "")


def pair_stages(
    a: NDArray[np.int64],
    b: NDArray[np.int64],
    plain: NDArray[np.int64],
    distance: NDArray[np.int64],
    limit: NDArray[np.int64] | int | None,
    digests: NDArray[np.int64],
    low: NDArray[np.bool_],
    similarity: NDArray[np.float64],
) -> NDArray[Any]:
    """The cheapest stage that links each pair directly (see
    :func:`leakaudit.export.pair_table`)."""
    stage = np.full(len(a), "transitive", dtype=object)
    stage[~np.isnan(similarity)] = "embedding"
    if limit is not None:
        # Low-information rows never link by hash, only by identical bytes.
        hashable = ~low[a] & ~low[b]
        linked = (distance <= limit) & hashable
        stage[linked] = "dihedral hash"
        stage[linked & (plain <= limit)] = "hash"
    stage[(digests[a] >= 0) & (digests[a] == digests[b])] = "exact bytes"
    return stage


def _low_information(table: pd.DataFrame) -> NDArray[np.bool_]:
    low: NDArray[np.bool_] = (
        table["low_information"].fillna(False).to_numpy(dtype=bool)
        if "low_information" in table
        else np.zeros(len(table), dtype=bool)
    )
    return low


def hash_rule_evidence(
    report: LeakageReport,
    table: pd.DataFrame,
    distances: PairDistances,
    a: NDArray[np.int64],
    b: NDArray[np.int64],
) -> dict[str, Any]:
    """:data:`~leakaudit.export.PAIR_EVIDENCE_COLUMNS` of pairs by the hash rule (a report
    without edges)."""
    low = _low_information(table)
    similarity = Similarities(report).lookup(a, b)
    stage = pair_stages(
        a,
        b,
        distances.plain(a, b),
        distances(a, b),
        distances.limit(a, b),
        digest_codes(table),
        low,
        similarity,
    )
    return {
        "direct": stage != TRANSITIVE,
        "evidence": stage,
        "evidence_similarity": similarity,
        "inliers": pd.array([pd.NA] * len(a), dtype="Int64"),
        "evidence_strength": np.full(len(a), np.nan),
    }


class Chains:
    """The graph of verified pairs, for the shortest chains between images."""

    def __init__(self, edges: EdgeIndex) -> None:
        self.neighbours: dict[int, list[int]] = {}
        for a, b in zip(edges.row_a.tolist(), edges.row_b.tolist(), strict=True):
            self.neighbours.setdefault(a, []).append(b)
            self.neighbours.setdefault(b, []).append(a)

    def nearest(self, sources: list[int]) -> dict[int, tuple[int, int]]:
        """Each image reachable from ``sources``: (links to the nearest source, that source)."""
        reached = {source: (0, source) for source in sources}
        queue = collections.deque(sources)
        while queue:
            node = queue.popleft()
            steps, origin = reached[node]
            for neighbour in self.neighbours.get(node, ()):
                if neighbour not in reached:
                    reached[neighbour] = (steps + 1, origin)
                    queue.append(neighbour)
        return reached
