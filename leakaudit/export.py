"""Tables derived from a :class:`~leakaudit.report.LeakageReport`, for CSV and JSON export.

Four tables with stable column names (documented in the README, "Output columns"):

``image_table``
    One row per image: the report's table plus ``leaked``.
``pair_table``
    Cross-split pairs inside leaked groups, with their distance.
``group_table``
    Every duplicate group of two or more images, cross-split and within-split.
``split_table``
    The per-split summary.

``leak_matches`` is the leakcheck view the command line prints: each leaked
image with its closest match in the reference split.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit.frames import hash_values_from_frame
from leakaudit.report import LeakageReport

__all__ = [
    "GROUP_COLUMNS",
    "IMAGE_COLUMNS",
    "MATCH_COLUMNS",
    "PAIR_COLUMNS",
    "PAIR_STAGES",
    "SPLIT_COLUMNS",
    "group_table",
    "image_table",
    "leak_matches",
    "pair_table",
    "report_dict",
    "split_table",
    "table_distances",
    "write_csv_tables",
    "write_json",
]

IMAGE_COLUMNS = [
    "path",
    "split",
    "hash",
    "phash",
    "dhash",
    "low_information",
    "digest",
    "error",
    "group_id",
    "leaked",
]
PAIR_COLUMNS = [
    "group_id",
    "split_a",
    "path_a",
    "split_b",
    "path_b",
    "distance",
    "within_threshold",
    "stage",
    "similarity",
]
#: Values of the pairs table's ``stage`` column, cheapest evidence first.
PAIR_STAGES = ("exact bytes", "hash", "dihedral hash", "embedding", "transitive")
GROUP_COLUMNS = [
    "group_id",
    "kind",
    "n_members",
    "n_splits",
    "splits_involved",
    "members_by_split",
    "max_distance",
    "low_information",
]
SPLIT_COLUMNS = [
    "split",
    "n_images",
    "n_leaked",
    "pct_leaked",
    "n_unreadable",
    "n_within_split_duplicates",
]
MATCH_COLUMNS = ["group_id", "split", "path", "match_split", "match_path", "distance"]

# Groups up to this size list every cross-split pair; bigger ones (usually transitive chaining)
# list only the pairs within the threshold, which keeps the table linear in practice.
_ALL_PAIRS_MAX_MEMBERS = 200


def _empty(columns: list[str]) -> pd.DataFrame:
    frame: pd.DataFrame = pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return frame


def _require_table(report: LeakageReport) -> pd.DataFrame:
    if report.table is None:
        raise ValueError("report has no table (it was rebuilt from JSON); re-run the audit.")
    return report.table


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
        result = np.maximum(result, np.bitwise_count(values[i] ^ values[j]).astype(np.int64))
    return result


class PairDistances:
    """Distances of row pairs as the audit saw them.

    The plain distance of :func:`table_distances`; with dihedral matching
    (``report.orientations``) the smallest over the two rows' canonical
    orientation entries (what the search compared); with per-source
    thresholds (a ``threshold`` column) each pair's limit is the smaller of
    its rows'.
    """

    def __init__(self, report: LeakageReport, table: pd.DataFrame) -> None:
        method = _method(report)
        self.columns, self.valid = table_distances(table, method)
        self.threshold = _threshold(report)
        self.limits: NDArray[np.int64] | None = None
        if "threshold" in table.columns:
            self.limits = table["threshold"].to_numpy(dtype=np.int64)
            self.threshold = int(self.limits.max()) if len(self.limits) else None
        self.entries: list[NDArray[np.uint64]] | None = None
        orientations = report.orientations
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
            distance = np.maximum(distance, np.bitwise_count(values[ia] ^ values[ib]))
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

    def limit(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64] | int | None:
        if self.limits is not None:
            return np.minimum(self.limits[a], self.limits[b])
        return self.threshold


def turned_group_spreads(report: LeakageReport) -> None:
    """Recompute ``report.leaked_groups["max_distance"]`` on canonical-orientation distances.

    For dihedral audits, where the distance between a copy and its mirrored
    original is the one between their turned hashes. Groups over 200 members
    keep the spread of the hashes as stored (sampled), as computing all pairs
    would cost too much.
    """
    table = report.table
    if report.orientations is None or table is None or not len(report.leaked_groups):
        return
    distances = PairDistances(report, table)
    by_group, _, _ = _member_index(table)
    spreads = []
    for group_id, old in zip(
        report.leaked_groups["group_id"], report.leaked_groups["max_distance"], strict=True
    ):
        rows = by_group.get_group(group_id).to_numpy()
        rows = rows[distances.valid[rows]]
        if len(rows) < 2 or len(rows) > _ALL_PAIRS_MAX_MEMBERS:
            spreads.append(old)
            continue
        ii, jj = np.triu_indices(len(rows), k=1)
        spreads.append(int(distances(rows[ii], rows[jj]).max()))
    report.leaked_groups["max_distance"] = pd.Series(
        spreads, index=report.leaked_groups.index, dtype="Int64"
    )


def _method(report: LeakageReport) -> str | None:
    method = report.parameters.get("method")
    return method if isinstance(method, str) else None


def _threshold(report: LeakageReport) -> int | None:
    threshold = report.parameters.get("threshold")
    return int(threshold) if isinstance(threshold, (int, np.integer)) else None


def _leaked_ids(report: LeakageReport) -> set[Any]:
    return set(report.leaked_groups["group_id"].tolist())


def image_table(report: LeakageReport) -> pd.DataFrame:
    """Return the per-image table: the report's table plus a boolean ``leaked``.

    Columns missing from the report's table (e.g. ``phash`` when it was built
    by hand) are omitted; the order is :data:`IMAGE_COLUMNS`, then any other
    columns.
    """
    table = _require_table(report).copy()
    table["leaked"] = table["group_id"].isin(_leaked_ids(report))
    first = [c for c in IMAGE_COLUMNS if c in table.columns]
    ordered: pd.DataFrame = table[first + [c for c in table.columns if c not in first]]
    return ordered


def _ordered_groups(report: LeakageReport) -> list[Any]:
    return list(report.leaked_groups["group_id"].tolist())


def pair_table(report: LeakageReport) -> pd.DataFrame:
    """Return the cross-split pairs inside leaked groups, with their distance.

    Every pair of members of a leaked group that sit in different splits, for
    groups of up to 200 members; bigger groups (usually transitive chaining)
    list only their pairs within the threshold. ``distance`` is the one the
    threshold applies to (for ``phash+dhash``, the larger of the two);
    ``within_threshold`` says whether the pair links directly (grouping is
    transitive, so a group can hold farther pairs); with per-source
    thresholds, within the smaller of the two images' thresholds. Rows follow the report's
    group order, closest pairs first within a group; ``split_a`` comes before
    ``split_b`` in split order.

    ``stage`` says what links the pair directly, cheapest evidence first: ``"exact bytes"``
    (equal ``digest``: byte-identical files, or identical pixels for in-memory images),
    ``"hash"`` (within the threshold), ``"dihedral hash"`` (with dihedral matching, where
    ``distance`` is the one between the images turned to their canonical orientation: within the
    threshold turned, but not as they are: a mirrored, flipped or rotated copy), ``"embedding"``
    (cosine similarity at or above the embedding stage's threshold; ``similarity`` holds it) or
    ``"transitive"`` (no direct link: the two are joined through other members). ``similarity``
    is missing unless the embedding stage compared the pair.
    """
    table = _require_table(report)
    distances = PairDistances(report, table)
    columns, valid, threshold = distances.columns, distances.valid, distances.threshold
    digests = (
        table["digest"].astype(object).where(table["digest"].notna(), None).to_numpy()
        if "digest" in table
        else np.full(len(table), None, dtype=object)
    )
    low = (
        table["low_information"].fillna(False).to_numpy(dtype=bool)
        if "low_information" in table
        else np.zeros(len(table), dtype=bool)
    )
    similar = _embedding_similarities(report)
    split_rank = {str(s): r for r, s in enumerate(report.images_by_split.index)}
    by_group, splits, paths = _member_index(table)
    frames: list[pd.DataFrame] = []
    for group_id in _ordered_groups(report):
        rows = by_group.get_group(group_id).to_numpy()
        rows = rows[valid[rows]]
        if len(rows) <= _ALL_PAIRS_MAX_MEMBERS or threshold is None:
            ii, jj = np.triu_indices(len(rows), k=1)
        elif distances.entries is not None:
            ii, jj = np.triu_indices(len(rows), k=1)
            near = distances(rows[ii], rows[jj]) <= threshold
            ii, jj = ii[near], jj[near]
        else:
            from leakaudit.search import pairs_within

            found = pairs_within(columns[0][rows], threshold)
            ii, jj = found[:, 0], found[:, 1]
            member = set(rows.tolist())
            linked = [p for p in similar if p[0] in member and p[1] in member]
            if linked:
                # The embedding stage's pairs in a big group are listed too.
                position = {int(r): i for i, r in enumerate(rows)}
                ii = np.concatenate([ii, [position[p[0]] for p in linked]]).astype(np.int64)
                jj = np.concatenate([jj, [position[p[1]] for p in linked]]).astype(np.int64)
                unique = np.unique(np.stack([ii, jj], axis=1), axis=0)
                ii, jj = unique[:, 0], unique[:, 1]
        a, b = rows[ii], rows[jj]
        cross = splits[a] != splits[b]
        a, b = a[cross], b[cross]
        # Put the higher-ranked split (train before test) on the left.
        rank_a = np.array([split_rank.get(str(s), len(split_rank)) for s in splits[a]], dtype=int)
        rank_b = np.array([split_rank.get(str(s), len(split_rank)) for s in splits[b]], dtype=int)
        swap = rank_b < rank_a
        a, b = np.where(swap, b, a), np.where(swap, a, b)
        plain = distances.plain(a, b)
        distance = distances(a, b)
        limit = distances.limit(a, b)
        similarity = np.array(
            [similar.get((min(x, y), max(x, y)), np.nan) for x, y in zip(a, b, strict=True)],
            dtype=np.float64,
        )
        keep = np.ones(len(a), dtype=bool)
        if len(rows) > _ALL_PAIRS_MAX_MEMBERS and limit is not None:
            keep = (distance <= limit) | ~np.isnan(similarity)
        part = pd.DataFrame(
            {
                "group_id": group_id,
                "split_a": splits[a],
                "path_a": paths[a],
                "split_b": splits[b],
                "path_b": paths[b],
                "distance": distance,
                "stage": _pair_stages(a, b, plain, distance, limit, digests, low, similarity),
                "similarity": similarity,
                "within_threshold": (
                    distance <= limit if limit is not None else np.full(len(a), pd.NA, dtype=object)
                ),
            }
        )[keep]
        frames.append(part.sort_values("distance", kind="stable"))
    if not frames:
        return _empty(PAIR_COLUMNS)
    pairs = pd.concat(frames, ignore_index=True)
    pairs["distance"] = pairs["distance"].astype(int)
    if threshold is not None:
        pairs["within_threshold"] = pairs["within_threshold"].astype(bool)
    result: pd.DataFrame = pairs[PAIR_COLUMNS]
    return result


def _embedding_similarities(report: LeakageReport) -> dict[tuple[int, int], float]:
    """``(row_a, row_b) -> cosine`` for the pairs the embedding stage linked (``row_a < row_b``)."""
    pairs = getattr(report, "embedding_pairs", None)
    if pairs is None or len(pairs) == 0:
        return {}
    low = np.minimum(pairs["row_a"].to_numpy(dtype=np.int64), pairs["row_b"].to_numpy(np.int64))
    high = np.maximum(pairs["row_a"].to_numpy(dtype=np.int64), pairs["row_b"].to_numpy(np.int64))
    values = pairs["similarity"].to_numpy(dtype=np.float64)
    return {(int(x), int(y)): float(v) for x, y, v in zip(low, high, values, strict=True)}


def _pair_stages(
    a: NDArray[np.int64],
    b: NDArray[np.int64],
    plain: NDArray[np.int64],
    distance: NDArray[np.int64],
    limit: NDArray[np.int64] | int | None,
    digests: NDArray[Any],
    low: NDArray[np.bool_],
    similarity: NDArray[np.float64],
) -> NDArray[Any]:
    """The cheapest stage that links each pair directly (see :func:`pair_table`)."""
    stage = np.full(len(a), "transitive", dtype=object)
    stage[~np.isnan(similarity)] = "embedding"
    if limit is not None:
        # Low-information rows never link by hash, only by identical bytes.
        hashable = ~low[a] & ~low[b]
        linked = (distance <= limit) & hashable
        stage[linked] = "dihedral hash"
        stage[linked & (plain <= limit)] = "hash"
    same_bytes = np.array(
        [digests[x] is not None and digests[x] == digests[y] for x, y in zip(a, b, strict=True)],
        dtype=bool,
    )
    stage[same_bytes] = "exact bytes"
    return stage


def group_table(report: LeakageReport) -> pd.DataFrame:
    """Return every duplicate group of two or more images.

    ``kind`` is ``"cross_split"`` (a leak; the report's leaked groups, in its
    order) or ``"within_split"`` (duplicates that stay in one split, largest
    first). ``max_distance`` is the largest distance between two members on
    the ``hash`` column (as in ``report.leaked_groups``; exact up to 200
    members, sampled beyond).
    """
    table = _require_table(report)
    leaked = report.leaked_groups.copy()
    leaked.insert(1, "kind", "cross_split")
    sizes = table.groupby("group_id").size()
    leaked_ids = _leaked_ids(report)
    within_ids = [g for g in sizes.index[sizes > 1] if g not in leaked_ids]
    within = pd.DataFrame(columns=GROUP_COLUMNS)
    if within_ids:
        within = _within_split_groups(table, within_ids)
    parts = [frame for frame in (leaked, within) if len(frame)]
    if not parts:
        return _empty(GROUP_COLUMNS)
    groups = pd.concat(parts, ignore_index=True)
    result: pd.DataFrame = groups[GROUP_COLUMNS]
    return result


def _within_split_groups(table: pd.DataFrame, group_ids: list[Any]) -> pd.DataFrame:
    from leakaudit.grouping import group_spread

    subset = table[table["group_id"].isin(group_ids)]
    rows = []
    for group_id, part in subset.groupby("group_id", sort=False):
        split = part["split"].dropna()
        name = str(split.iloc[0]) if len(split) else ""
        low = (
            bool(part["low_information"].fillna(False).astype(bool).any())
            if ("low_information" in part)
            else False
        )
        rows.append(
            {
                "group_id": group_id,
                "kind": "within_split",
                "n_members": len(part),
                "n_splits": 1 if name else 0,
                "splits_involved": name,
                "members_by_split": f"{name}:{len(split)}" if name else "",
                "low_information": low,
            }
        )
    groups = pd.DataFrame(rows)
    spread: dict[Any, Any] = {}
    if "hash" in subset:
        values, valid = hash_values_from_frame(subset)
        codes, uniques = pd.factorize(subset["group_id"].to_numpy()[valid])
        if len(codes):
            found = group_spread(values[valid], codes.astype(np.int64))
            spread = {
                uniques[c]: int(d)
                for c, d in zip(found["group_id"], found["max_distance"], strict=True)
            }
    groups["max_distance"] = pd.Series(
        [spread.get(g, pd.NA) for g in groups["group_id"]], dtype="Int64"
    )
    groups = groups.sort_values(["n_members", "group_id"], ascending=[False, True], kind="stable")
    result: pd.DataFrame = groups.reset_index(drop=True)[GROUP_COLUMNS]
    return result


def split_table(report: LeakageReport) -> pd.DataFrame:
    """Return the per-split summary (:data:`SPLIT_COLUMNS`), in the report's split order.

    ``n_within_split_duplicates`` counts the split's images that sit in a
    duplicate group confined to that split.
    """
    table = report.table
    leaked = report.leaked_images_by_split()
    rows = []
    sizes = table.groupby("group_id").size() if table is not None else None
    for split, count in report.images_by_split.items():
        unreadable = within = 0
        if table is not None and sizes is not None:
            in_split = table[table["split"] == split]
            if "error" in table:
                unreadable = int(in_split["error"].notna().sum())
            candidates = in_split[in_split["group_id"].map(sizes) > 1]
            within = int((~candidates["group_id"].isin(_leaked_ids(report))).sum())
        rows.append(
            {
                "split": str(split),
                "n_images": int(count),
                "n_leaked": int(leaked.get(split, 0)),
                "pct_leaked": float(report.pct_leaked_by_split.get(split, 0.0)),
                "n_unreadable": unreadable,
                "n_within_split_duplicates": within,
            }
        )
    frame: pd.DataFrame = pd.DataFrame(rows, columns=SPLIT_COLUMNS)
    return frame


def leak_matches(report: LeakageReport, reference: str | None = None) -> pd.DataFrame:
    """Return each leaked image with its closest match in a higher-ranked split.

    Parameters
    ----------
    report : LeakageReport
        An audit with its table.
    reference : str, optional
        Match every leaked image outside this split against its group's
        members in this split (the leakcheck view: test images against
        train); groups without a member in it are skipped. By default each
        group's reference is its first split in the report's split order.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`MATCH_COLUMNS`, in the report's group order.
    """
    table = _require_table(report)
    distances = PairDistances(report, table)
    valid = distances.valid
    order = [str(s) for s in report.images_by_split.index]
    by_group, splits, paths = _member_index(table)
    records: list[dict[str, Any]] = []
    for group_id in _ordered_groups(report):
        rows = by_group.get_group(group_id).to_numpy()
        rows = rows[valid[rows]]
        present = {str(s) for s in splits[rows] if s is not None}
        home = reference
        if home is None:
            home = next((s for s in order if s in present), None)
        if home is None or home not in present:
            continue
        ref = rows[splits[rows] == home]
        others = rows[(splits[rows] != home) & pd.notna(splits[rows])]
        for row in others:
            distance = distances(np.full(len(ref), row), ref)
            best = int(np.argmin(distance))
            records.append(
                {
                    "group_id": group_id,
                    "split": splits[row],
                    "path": paths[row],
                    "match_split": home,
                    "match_path": paths[ref[best]],
                    "distance": int(distance[best]),
                }
            )
    frame: pd.DataFrame = pd.DataFrame(records, columns=MATCH_COLUMNS)
    return frame


def _member_index(table: pd.DataFrame) -> tuple[Any, NDArray[Any], NDArray[Any]]:
    """Return (row positions grouped by group_id, split per row, path per row as str)."""
    positions = pd.Series(np.arange(len(table)), index=table.index)
    by_group = positions.groupby(table["group_id"].to_numpy())
    splits = table["split"].astype(object).to_numpy()
    # object, not str dtype: pandas 3 string columns reject undecodable (surrogate) file names
    paths = (
        np.array([str(p) for p in table["path"]], dtype=object)
        if "path" in table
        else positions.astype(str).to_numpy()
    )
    return by_group, splits, paths


def _plain(value: Any) -> Any:
    """Return ``value`` as a plain Python scalar for ``json``."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    # Not frame.to_json: its encoder refuses the surrogate escapes of non-UTF-8 file names,
    # which json.dumps writes as \udcxx escapes.
    clean = frame.astype(object).where(frame.notna(), None)
    return [
        {str(key): _plain(value) for key, value in row.items()}
        for row in clean.to_dict(orient="records")
    ]


def report_dict(report: LeakageReport, *, include_images: bool = True) -> dict[str, Any]:
    """Return the JSON document the command line's ``--json`` writes.

    The keys of :meth:`LeakageReport.to_dict` (unchanged), plus ``format``
    (``"leakaudit-report"``), ``format_version`` (1), ``splits``, ``groups``,
    ``pairs`` and, with ``include_images``, ``images``: the four tables as
    lists of records with the CSV columns.
    """
    data = report.to_dict()
    data["format"] = "leakaudit-report"
    data["format_version"] = 1
    data["splits"] = _records(split_table(report))
    if report.table is not None:
        data["groups"] = _records(group_table(report))
        data["pairs"] = _records(pair_table(report))
        if include_images:
            data["images"] = _records(image_table(report))
    finite: dict[str, Any] = _finite(data)
    return finite


def _finite(value: Any) -> Any:
    """Replace NaN/inf (not valid JSON) by None, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def write_json(report: LeakageReport, path: str | Path) -> Path:
    """Write :func:`report_dict` to ``path`` as indented JSON; return the path."""
    target = Path(path)
    target.write_text(json.dumps(report_dict(report), indent=2) + "\n", encoding="utf-8")
    return target


def csv_paths(path: str | Path) -> dict[str, Path]:
    """Return where :func:`write_csv_tables` writes each table for ``--csv path``."""
    target = Path(path)
    stem = target.name[: -len(target.suffix)] if target.suffix else target.name
    sibling = target.with_name
    return {
        "images": target,
        "pairs": sibling(f"{stem}.pairs.csv"),
        "groups": sibling(f"{stem}.groups.csv"),
        "splits": sibling(f"{stem}.splits.csv"),
    }


def write_csv_tables(report: LeakageReport, path: str | Path) -> list[Path]:
    """Write the four tables as CSV: images at ``path``, the others beside it.

    ``table.csv`` gives ``table.csv`` (per image), ``table.pairs.csv``,
    ``table.groups.csv`` and ``table.splits.csv``. Returns the paths written.
    """
    targets = csv_paths(path)
    frames: Sequence[tuple[str, pd.DataFrame]] = [
        ("images", image_table(report)),
        ("pairs", pair_table(report)),
        ("groups", group_table(report)),
        ("splits", split_table(report)),
    ]
    for name, frame in frames:
        frame.to_csv(targets[name], index=False, errors="surrogateescape")
    return [targets[name] for name, _ in frames]
