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

When the report holds its verified pairs (:attr:`LeakageReport.edges`), the
pairs table gains :data:`PAIR_EVIDENCE_COLUMNS` (whether the pair is a verified
direct link, the stage and scores that accepted it) and the groups table
:data:`GROUP_EVIDENCE_COLUMNS`; reports without edges keep their columns.

:func:`write_csv_tables` and :func:`write_json` replace their files through
:func:`~leakaudit.safe_io.atomic_open` (never writing through a link, never
leaving a partial file); the CSV cells that a spreadsheet would run as a
formula are quoted, and the JSON holds only valid Unicode (see their
docstrings). The tables are built for all groups at once: a report of 100k
images and 16k duplicate groups writes its CSV and JSON in about a second each.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._evidence import COPY_KIND, PAIR_STAGES, TRANSITIVE, VERIFIED_BEYOND
from leakaudit._export_encoding import encode_string as _encode_string
from leakaudit._export_encoding import encode_value as _encode_value
from leakaudit._export_encoding import iter_records_json as _iter_records_json
from leakaudit._export_encoding import json_ready as _json_ready
from leakaudit._export_encoding import json_records as _records
from leakaudit._export_encoding import write_csv as _write_csv
from leakaudit._pair_evidence import Chains as _Chains
from leakaudit._pair_evidence import EdgeIndex as _EdgeIndex
from leakaudit._pair_evidence import PairKinds, evidence_text
from leakaudit._pair_evidence import Similarities as _Similarities
from leakaudit._pair_evidence import copy_kinds as _copy_kinds
from leakaudit._pair_evidence import digest_codes as _digest_codes
from leakaudit._pair_evidence import hash_rule_evidence as _hash_rule_evidence
from leakaudit._pair_evidence import pair_stages as _pair_stages
from leakaudit._pair_evidence import require_table as _require_table
from leakaudit._spanning import SPANNING_PAIRS_PER_MEMBER, spanning_group_ids
from leakaudit._spanning import Members as _Members
from leakaudit._spanning import hash_classes as _hash_classes
from leakaudit._spanning import lists_spanning as _lists_spanning
from leakaudit.distances import ALL_PAIRS_MAX_MEMBERS, PairDistances
from leakaudit.frames import hash_values_from_frame
from leakaudit.grouping import group_spread
from leakaudit.report import LeakageReport
from leakaudit.safe_io import atomic_open
from leakaudit.search import pairs_within

__all__ = [
    "GROUP_COLUMNS",
    "GROUP_EVIDENCE_COLUMNS",
    "IMAGE_COLUMNS",
    "MATCH_COLUMNS",
    "MATCH_EVIDENCE_COLUMNS",
    "NAME_COLUMNS",
    "PAIR_COLUMNS",
    "PAIR_EVIDENCE_COLUMNS",
    "PAIR_KIND_COLUMN",
    "PAIR_STAGES",
    "SPANNING_PAIRS_PER_MEMBER",
    "SPLIT_COLUMNS",
    "PairKinds",
    "csv_paths",
    "evidence_text",
    "group_table",
    "image_table",
    "leak_matches",
    "pair_table",
    "report_dict",
    "spanning_group_ids",
    "split_table",
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
    "listed",
]
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
_MATCH_TEXT_COLUMNS = frozenset({"split", "path", "match_split", "match_path"})
#: Columns the pairs table gains when the report has verified edges: ``direct`` (the pair is a
#: verified edge: it links directly), ``evidence`` (the stage that accepted it, or
#: ``"transitive"``), ``evidence_similarity`` (the pixel check's score, or the embedding's
#: cosine), ``inliers`` (the geometric check's) and ``evidence_strength`` (0 when transitive).
PAIR_EVIDENCE_COLUMNS = [
    "direct",
    "evidence",
    "evidence_similarity",
    "inliers",
    "evidence_strength",
]
#: Columns the groups table gains when the report has verified edges (as in ``leaked_groups``).
GROUP_EVIDENCE_COLUMNS = ["evidence", "evidence_strength"]
#: The last column of the pairs table (and of ``leak_matches(..., evidence=True)``): what
#: kind of copy the pair is, in words (:func:`leakaudit.copykind.copy_kind`): from its
#: verified pair ("identical", "re-encoded", "resized, mirrored", "cropped", "recoloured",
#: ...), or, decided by hashes alone, what the hashes show ("near-identical hashes",
#: "mirrored or rotated (hashes)"), or "joined through other images".
PAIR_KIND_COLUMN = COPY_KIND
#: Columns ``leak_matches(..., evidence=True)`` adds: :data:`PAIR_EVIDENCE_COLUMNS`,
#: ``via``, how many other images the shortest chain of links passes through (0 when direct;
#: missing when unknown), and :data:`PAIR_KIND_COLUMN`.
MATCH_EVIDENCE_COLUMNS = [*PAIR_EVIDENCE_COLUMNS, "via", PAIR_KIND_COLUMN]
#: The columns of the CSV files (the four tables, ``clean``'s manifest, the ``--show``
#: folder's index) that hold a file or split name, or text that may quote one (``error``,
#: ``reason``; ``id``, a hash shard's image id, which ``--hashes-out`` writes as the path).
#: A name that is not valid UTF-8 is written as its own bytes; pandas' string dtype refuses
#: them (pandas 3 keeps text in Arrow, UTF-8 only), so read these columns back as ``object``:
#: ``pandas.read_csv(path, encoding_errors="surrogateescape",
#: dtype=dict.fromkeys(NAME_COLUMNS, object))``.
NAME_COLUMNS = (
    "path",
    "split",
    "error",
    "id",
    "split_a",
    "path_a",
    "split_b",
    "path_b",
    "splits_involved",
    "members_by_split",
    "match_split",
    "match_path",
    "old_path",
    "new_path",
    "old_split",
    "new_split",
    "reason",
)


def _empty(columns: list[str]) -> pd.DataFrame:
    frame: pd.DataFrame = pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return frame


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


def _all_pairs(
    members: _Members, groups: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Every pair ``i < j`` within each chosen group, as positions in ``members.rows``.

    In ``np.triu_indices`` order within a group, groups in rank order.
    """
    position = np.arange(len(members.rows))
    size = members.count[members.rank]
    local = position - members.start[members.rank]
    partners = np.where(groups[members.rank], size - 1 - local, 0)
    first = np.repeat(position, partners)
    offset = np.arange(int(partners.sum())) - np.repeat(np.cumsum(partners) - partners, partners)
    return first, first + 1 + offset


def _spanning_pairs(
    distances: PairDistances,
    rows: NDArray[np.int64],
    splits: NDArray[Any],
    threshold: int,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """A spanning set of a group's pairs, as positions in ``rows`` (linear in its members).

    Images with equal hashes are one class: each member is paired with the first
    member of its class in another split (the first such split), or with the
    class's first member when the class sits in one split; each class is paired
    with its nearest other class within the threshold (first members).
    """
    codes = _hash_classes(distances, rows)
    split_codes, _ = pd.factorize(pd.Series(splits[rows], dtype=object).astype(str))
    split_codes = split_codes.astype(np.int64)
    position = np.arange(len(rows), dtype=np.int64)
    n_classes = int(codes.max()) + 1
    n_splits = int(split_codes.max()) + 1
    # The first member of each (class, split), and of each class.
    anchor = np.full((n_classes, n_splits), -1, dtype=np.int64)
    key = codes * n_splits + split_codes
    order = np.lexsort((position, key))
    first = np.ones(len(order), dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    anchor.ravel()[key[order][first]] = position[order][first]
    class_first = np.full(n_classes, len(rows), dtype=np.int64)
    np.minimum.at(class_first, codes, position)
    partner = class_first[codes].copy()
    # The first split other than the member's own that holds a member of its class.
    present = anchor >= 0
    for split in range(n_splits):
        other = present.copy()
        other[:, split] = False
        has = other.any(axis=1)
        choice = np.argmax(other, axis=1)
        mine = (split_codes == split) & has[codes]
        partner[mine] = anchor[codes[mine], choice[codes[mine]]]
    ii, jj = position, partner
    keep = ii != jj
    ii, jj = ii[keep], jj[keep]
    if n_classes > 1:
        # Each class with its nearest other class within the threshold.
        reps = class_first
        ci, cj = np.triu_indices(n_classes, k=1)
        near = distances(rows[reps[ci]], rows[reps[cj]])
        within = near <= threshold
        ci, cj, near = ci[within], cj[within], near[within]
        both = np.concatenate([ci, cj])
        other = np.concatenate([cj, ci])
        by = np.lexsort((other, np.concatenate([near, near]), both))
        best = np.ones(len(by), dtype=bool)
        best[1:] = both[by][1:] != both[by][:-1]
        ii = np.concatenate([ii, reps[both[by][best]]])
        jj = np.concatenate([jj, reps[other[by][best]]])
    return ii.astype(np.int64), jj.astype(np.int64)


def _big_group_pairs(
    members: _Members,
    rank: int,
    distances: PairDistances,
    threshold: int,
    similar: _Similarities,
    edges: _EdgeIndex,
    splits: NDArray[Any],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The pairs of a group over 200 members that are listed: those within the threshold.

    And the verified edges among them. Positions in ``members.rows``, in the
    order the search gives them. A group of mostly identical images lists a
    spanning set instead (:func:`_spanning_pairs`).
    """
    rows = members.group_rows(rank)
    if _lists_spanning(distances, rows):
        ii, jj = _spanning_pairs(distances, rows, splits, threshold)
    elif distances.entries is not None:
        ii, jj = np.triu_indices(len(rows), k=1)
        near = distances(rows[ii], rows[jj]) <= threshold
        ii, jj = ii[near], jj[near]
    else:
        found = pairs_within(distances.columns[0][rows], threshold)
        ii, jj = found[:, 0], found[:, 1]
        linked = similar.within(rows)
        if len(linked):
            # The embedding stage's pairs in a big group are listed too.
            ii = np.concatenate([ii, linked[:, 0]]).astype(np.int64)
            jj = np.concatenate([jj, linked[:, 1]]).astype(np.int64)
            unique = np.unique(np.stack([ii, jj], axis=1), axis=0)
            ii, jj = unique[:, 0], unique[:, 1]
    verified = edges.within(rows)
    if len(verified):
        ii = np.concatenate([ii, verified[:, 0]]).astype(np.int64)
        jj = np.concatenate([jj, verified[:, 1]]).astype(np.int64)
        unique = np.unique(np.stack([np.minimum(ii, jj), np.maximum(ii, jj)], axis=1), axis=0)
        ii, jj = unique[:, 0], unique[:, 1]
    start = int(members.start[rank])
    return ii.astype(np.int64) + start, jj.astype(np.int64) + start


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

    With the report's verified pairs (:attr:`LeakageReport.edges`), the table
    also has :data:`PAIR_EVIDENCE_COLUMNS`: ``direct`` is True for a verified
    edge (only those were linked: a pair within the threshold that
    verification rejected is not direct), ``evidence`` its stage (``bytes``,
    ``hash``, ``pixels``, ``geometry``, ``embedding``) or ``transitive``,
    ``evidence_similarity`` and ``inliers`` its scores, ``evidence_strength``
    its strength (0 when transitive); big groups list their verified edges too.

    ``listed`` says which pairs of the group are listed: ``"all"``, or ``"spanning"`` for a
    group over 200 members made mostly of identical images (more than
    :data:`SPANNING_PAIRS_PER_MEMBER` identical pairs per member, see
    :func:`spanning_group_ids`): each member with an identical image in another split (the
    first one), each set of identical images with its nearest other set, and the verified
    edges, so the table grows with the images, not with their pairs.
    """
    table = _require_table(report)
    distances = PairDistances.of_report(report, table)
    if not len(report.leaked_groups):
        return _empty(
            PAIR_COLUMNS
            + (PAIR_EVIDENCE_COLUMNS if report.edges is not None else [])
            + [PAIR_KIND_COLUMN]
        )
    threshold = distances.threshold
    digests = _digest_codes(table)
    low = (
        table["low_information"].fillna(False).to_numpy(dtype=bool)
        if "low_information" in table
        else np.zeros(len(table), dtype=bool)
    )
    similar = _Similarities(report)
    edges = _EdgeIndex(report.edges)
    split_rank = {str(s): r for r, s in enumerate(report.images_by_split.index)}
    splits, paths = _splits_and_paths(table)
    members = _Members(report, table, distances.valid)
    # Groups over 200 members list only their pairs within the threshold (a search each); the
    # others list all their pairs, made for all of them at once (a DataFrame per group cost
    # seconds on 16k groups).
    big = members.count > ALL_PAIRS_MAX_MEMBERS
    if threshold is None:
        big[:] = False
    found = [_all_pairs(members, ~big)]
    if threshold is not None:
        found += [
            _big_group_pairs(members, rank, distances, threshold, similar, edges, splits)
            for rank in np.flatnonzero(big).tolist()
        ]
    spanning = np.zeros(len(members.ids), dtype=bool)
    if threshold is not None:
        for rank in np.flatnonzero(big).tolist():
            spanning[rank] = _lists_spanning(distances, members.group_rows(rank))
    first = np.concatenate([pair[0] for pair in found])
    second = np.concatenate([pair[1] for pair in found])
    # Groups in the report's order, each group's pairs in the order they were found.
    order = np.argsort(members.rank[first], kind="stable")
    a, b = members.rows[first[order]], members.rows[second[order]]
    pair_rank = members.rank[first[order]]
    cross = splits[a] != splits[b]
    a, b, pair_rank = a[cross], b[cross], pair_rank[cross]
    # Put the higher-ranked split (train before test) on the left.
    ranks = np.zeros(len(table), dtype=int)
    ranks[members.rows] = [split_rank.get(str(s), len(split_rank)) for s in splits[members.rows]]
    swap = ranks[b] < ranks[a]
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    plain = distances.plain(a, b)
    distance = distances(a, b)
    limit = distances.limit(a, b)
    similarity = similar.lookup(a, b)
    edge = edges.lookup(a, b)
    if limit is not None and big.any():
        keep = ~big[pair_rank] | (distance <= limit) | ~np.isnan(similarity) | (edge >= 0)
        a, b, pair_rank, edge = a[keep], b[keep], pair_rank[keep], edge[keep]
        plain, distance, similarity = plain[keep], distance[keep], similarity[keep]
        if isinstance(limit, np.ndarray):
            limit = limit[keep]
    stage = _pair_stages(a, b, plain, distance, limit, digests, low, similarity)
    # A pair verified directly is never "transitive", even when its whole images' hashes
    # are beyond the threshold (a crop, strip or rotation entry or the tiny-photo net
    # proposed it).
    stage[(stage == TRANSITIVE) & (edge >= 0)] = VERIFIED_BEYOND
    within = distance <= limit if limit is not None else np.full(len(a), pd.NA, dtype=object)
    # Closest pairs first within a group; equal distances keep the order found.
    by_distance = np.argsort(distance, kind="stable")
    order = by_distance[np.argsort(pair_rank[by_distance], kind="stable")]
    pairs = pd.DataFrame(
        {
            "group_id": members.ids[pair_rank[order]],
            "split_a": _text_column(splits[a[order]]),
            "path_a": _text_column(paths[a[order]]),
            "split_b": _text_column(splits[b[order]]),
            "path_b": _text_column(paths[b[order]]),
            "distance": distance[order].astype(int),
            "within_threshold": within[order],
            "stage": stage[order],
            "similarity": similarity[order],
            "listed": np.where(spanning[pair_rank[order]], "spanning", "all"),
        }
    )
    if threshold is not None:
        pairs["within_threshold"] = pairs["within_threshold"].astype(bool)
    columns = PAIR_COLUMNS
    if edges.present:
        for name, values in edges.columns(edge[order]).items():
            pairs[name] = values
        columns = PAIR_COLUMNS + PAIR_EVIDENCE_COLUMNS
    pairs[PAIR_KIND_COLUMN] = _copy_kinds(stage[order], distance[order], edges, edge[order])
    result: pd.DataFrame = pairs[[*columns, PAIR_KIND_COLUMN]]
    return result


def _text_column(values: NDArray[Any]) -> pd.Series:
    """``values`` as pandas infers them, or as objects where it cannot.

    A pandas string column refuses the surrogate escapes of file names that are not UTF-8.
    """
    try:
        inferred: pd.Series = pd.Series(values)
    except (UnicodeEncodeError, ValueError):
        inferred = pd.Series(values, dtype=object)
    return inferred


def _splits_and_paths(table: pd.DataFrame) -> tuple[NDArray[Any], NDArray[Any]]:
    """Split per row, and path per row as str (object arrays)."""
    splits = table["split"].astype(object).to_numpy()
    # object, not str dtype: pandas 3 string columns reject undecodable (surrogate) file names
    paths = (
        np.array([str(p) for p in table["path"]], dtype=object)
        if "path" in table
        else pd.Series(np.arange(len(table))).astype(str).to_numpy(dtype=object)
    )
    return splits, paths


def group_table(report: LeakageReport) -> pd.DataFrame:
    """Return every duplicate group of two or more images.

    ``kind`` is ``"cross_split"`` (a leak; the report's leaked groups, in its
    order) or ``"within_split"`` (duplicates that stay in one split, largest
    first). ``max_distance`` is the largest distance between two members on
    the ``hash`` column (as in ``report.leaked_groups``; exact up to 200
    members, sampled beyond).

    With the report's verified pairs (:attr:`LeakageReport.edges`), the table
    also has :data:`GROUP_EVIDENCE_COLUMNS`: for a leaked group, as in
    ``report.leaked_groups`` (its strongest pair across splits, or
    ``transitive``); for a within-split group, its strongest verified pair.
    """
    table = _require_table(report)
    columns = GROUP_COLUMNS + (GROUP_EVIDENCE_COLUMNS if report.edges is not None else [])
    leaked = report.leaked_groups.copy()
    leaked.insert(1, "kind", "cross_split")
    sizes = table.groupby("group_id").size()
    multi = sizes.index[sizes.to_numpy() > 1]
    within_ids = multi[~multi.isin(list(_leaked_ids(report)))]
    within = pd.DataFrame(columns=GROUP_COLUMNS)
    if len(within_ids):
        within = _within_split_groups(table, within_ids)
        if report.edges is not None:
            within = _with_strongest_edges(within, table, report.edges)
    parts = [frame for frame in (leaked, within) if len(frame)]
    if not parts:
        return _empty(columns)
    groups = pd.concat(parts, ignore_index=True)
    result: pd.DataFrame = groups[columns]
    return result


def _with_strongest_edges(
    groups: pd.DataFrame, table: pd.DataFrame, edges: pd.DataFrame
) -> pd.DataFrame:
    """``groups`` with the stage and strength of each one's strongest verified pair."""
    index = _EdgeIndex(edges)
    labels = table["group_id"].to_numpy()
    strongest = (
        pd.DataFrame(
            {"group_id": labels[index.row_a], "stage": index.stage, "strength": index.strength}
        )
        .sort_values("strength", ascending=False, kind="stable")
        .drop_duplicates("group_id")
    )
    stage_of = dict(zip(strongest["group_id"], strongest["stage"], strict=True))
    strength_of = dict(zip(strongest["group_id"], strongest["strength"], strict=True))
    found = groups.copy()
    ids = found["group_id"].tolist()
    found["evidence"] = pd.Series([stage_of.get(g) for g in ids], index=found.index, dtype=object)
    found["evidence_strength"] = [float(strength_of.get(g, math.nan)) for g in ids]
    result: pd.DataFrame = found
    return result


def _within_split_groups(table: pd.DataFrame, group_ids: pd.Index) -> pd.DataFrame:
    subset = table[table["group_id"].isin(group_ids)]
    # Per-group values by grouped reductions, groups in order of first appearance (a pandas
    # call per group cost seconds on 10k groups).
    keys = subset["group_id"].to_numpy()
    split = subset["split"].groupby(keys, sort=False)
    n_members = split.size()
    first = split.first()  # the first split that is not missing
    present = first.notna().to_numpy()
    names = [str(name) if ok else "" for name, ok in zip(first.tolist(), present, strict=True)]
    counts = split.count().to_numpy()
    if "low_information" in subset:
        flags = subset["low_information"].fillna(False).astype(bool)
        low = flags.groupby(keys, sort=False).any().to_numpy(dtype=bool)
    else:
        low = np.zeros(len(n_members), dtype=bool)
    groups = pd.DataFrame(
        {
            "group_id": n_members.index.to_numpy(),
            "kind": "within_split",
            "n_members": n_members.to_numpy(),
            "n_splits": [1 if name else 0 for name in names],
            "splits_involved": _text_column(np.array(names, dtype=object)),
            "members_by_split": _text_column(
                np.array(
                    [
                        f"{name}:{count}" if name else ""
                        for name, count in zip(names, counts, strict=True)
                    ],
                    dtype=object,
                )
            ),
            "low_information": low,
        }
    )
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
    unreadable_rows = within_rows = None
    if table is not None:
        sizes = table.groupby("group_id").size()
        multi = (table["group_id"].map(sizes) > 1).to_numpy(dtype=bool)
        within_rows = multi & ~table["group_id"].isin(_leaked_ids(report)).to_numpy(dtype=bool)
        if "error" in table:
            unreadable_rows = table["error"].notna().to_numpy(dtype=bool)
    rows = []
    for split, count in report.images_by_split.items():
        unreadable = within = 0
        if table is not None and within_rows is not None:
            in_split = (table["split"] == split).to_numpy(dtype=bool)
            if unreadable_rows is not None:
                unreadable = int(unreadable_rows[in_split].sum())
            within = int(within_rows[in_split].sum())
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


def leak_matches(
    report: LeakageReport, reference: str | None = None, *, evidence: bool = False
) -> pd.DataFrame:
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
    evidence : bool, default False
        Add :data:`MATCH_EVIDENCE_COLUMNS`: why the two are linked. With the
        report's verified pairs (:attr:`LeakageReport.edges`), the match is
        the image's strongest verified partner in the reference split when it
        has one (``direct`` True, ``evidence`` its stage, ``via`` 0), else the
        reference image the shortest chain of verified pairs reaches
        (``evidence`` ``"transitive"``, ``via`` the images the chain passes
        through). Without edges, ``evidence`` is the pairs table's ``stage``
        (the hash rule), ``direct`` whether it is not ``"transitive"``.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`MATCH_COLUMNS` (and with ``evidence``,
        :data:`MATCH_EVIDENCE_COLUMNS`), in the report's group order.
    """
    table = _require_table(report)
    distances = PairDistances.of_report(report, table)
    valid = distances.valid
    order = [str(s) for s in report.images_by_split.index]
    by_group, splits, paths = _member_index(table)
    edges = _EdgeIndex(report.edges if evidence else None)
    chains = _Chains(edges) if edges.present else None
    records: dict[str, list[Any]] = {name: [] for name in MATCH_COLUMNS}
    matched: list[tuple[int, int]] = []
    via: list[Any] = []
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
        reached = chains.nearest(ref.tolist()) if chains is not None else {}
        for row in others:
            distance = distances(np.full(len(ref), row), ref)
            best = int(np.argmin(distance))
            hops: Any = pd.NA
            if chains is not None:
                found = edges.lookup(np.full(len(ref), row, dtype=np.int64), ref)
                direct = np.flatnonzero(found >= 0)
                if len(direct):  # the strongest verified partner, the closest among equals
                    rank = np.lexsort((distance[direct], -edges.strength[found[direct]]))
                    best, hops = int(direct[rank[0]]), 0
                elif int(row) in reached:
                    steps, origin = reached[int(row)]
                    best, hops = int(np.flatnonzero(ref == origin)[0]), steps - 1
            matched.append((int(row), int(ref[best])))
            via.append(hops)
            found_row = (group_id, splits[row], paths[row], home, paths[ref[best]])
            for name, value in zip(MATCH_COLUMNS, found_row, strict=False):
                records[name].append(value)
            records["distance"].append(int(distance[best]))
    # The names column by column: a frame built from records infers a string dtype that
    # refuses the surrogate escapes of names that are not UTF-8 (pandas 3 with pyarrow).
    frame: pd.DataFrame = pd.DataFrame(
        {
            name: _text_column(np.array(values, dtype=object))
            if name in _MATCH_TEXT_COLUMNS
            else pd.Series(values)
            for name, values in records.items()
        },
        columns=MATCH_COLUMNS,
    )
    if evidence:
        pairs = np.array(matched, dtype=np.int64).reshape(-1, 2)
        a, b = pairs[:, 0], pairs[:, 1]
        if edges.present:
            columns = edges.columns(edges.lookup(a, b))
        else:
            columns = _hash_rule_evidence(report, table, distances, a, b)
            via = [0 if direct else pd.NA for direct in columns["direct"].tolist()]
        for name, values in columns.items():
            frame[name] = values
        frame["via"] = pd.array(via, dtype="Int64")
        frame[PAIR_KIND_COLUMN] = PairKinds(report, distances)(a, b)
    return frame


def _member_index(table: pd.DataFrame) -> tuple[Any, NDArray[Any], NDArray[Any]]:
    """Return (row positions grouped by group_id, split per row, path per row as str)."""
    positions = pd.Series(np.arange(len(table)), index=table.index)
    by_group = positions.groupby(table["group_id"].to_numpy())
    splits, paths = _splits_and_paths(table)
    return by_group, splits, paths


def _report_tables(report: LeakageReport, *, include_images: bool) -> dict[str, pd.DataFrame]:
    tables = {"splits": split_table(report)}
    if report.table is not None:
        tables["groups"] = group_table(report)
        tables["pairs"] = pair_table(report)
        if include_images:
            tables["images"] = image_table(report)
    return tables


def _summary(report: LeakageReport) -> dict[str, Any]:
    data = report.to_dict()
    data["format"] = "leakaudit-report"
    data["format_version"] = 1
    return data


def report_dict(report: LeakageReport, *, include_images: bool = True) -> dict[str, Any]:
    """Return the JSON document the command line's ``--json`` writes.

    The keys of :meth:`LeakageReport.to_dict` (unchanged), plus ``format``
    (``"leakaudit-report"``), ``format_version`` (1), ``splits``, ``groups``,
    ``pairs`` and, with ``include_images``, ``images``: the four tables as
    lists of records with the CSV columns.

    Every string is valid Unicode, so that strict JSON parsers read the
    document: a file name that is not valid UTF-8 (on Linux, names are bytes)
    has each undecodable byte written as the four characters ``\\xNN`` (the
    byte in hex, as :func:`~leakaudit._text.printable` shows it), so
    ``caf\\xe9.jpg`` stands for the Latin-1 name; a name that really contains a
    backslash followed by ``x`` and two hex digits reads the same. Nothing
    else is changed (JSON escapes control characters itself). Missing values
    and NaN are ``null``.
    """
    data: dict[str, Any] = _json_ready(_summary(report))
    for key, frame in _report_tables(report, include_images=include_images).items():
        data[key] = _records(frame)
    return data


def _iter_report_json(report: LeakageReport) -> Iterator[str]:
    """The text of ``json.dumps(report_dict(report), indent=2)``, in pieces."""
    summary = _summary(report)
    # The leaked groups can be thousands of records: encoded like the tables, from the frame.
    summary["leaked_groups"] = []
    items: list[tuple[str, Any]] = [
        (key, report.leaked_groups if key == "leaked_groups" else value)
        for key, value in _json_ready(summary).items()
    ]
    items += _report_tables(report, include_images=True).items()
    yield "{"
    for number, (key, value) in enumerate(items):
        yield ("\n  " if number == 0 else ",\n  ") + _encode_string(key) + ": "
        if isinstance(value, pd.DataFrame):
            yield from _iter_records_json(value)
        else:
            yield _encode_value(value, "\n  ")
    yield "\n}"


def write_json(report: LeakageReport, path: str | Path) -> Path:
    """Write :func:`report_dict` to ``path`` as indented JSON; return the path.

    The text is that of ``json.dumps(report_dict(report), indent=2)`` plus a
    newline, ASCII only, written record by record rather than built in memory;
    file names that are not valid UTF-8 are written as described in
    :func:`report_dict`. The file is replaced atomically
    (:func:`~leakaudit.safe_io.atomic_open`): a link at ``path`` is replaced,
    never written through, and a failed write leaves the old file.
    """
    target = Path(path)
    with atomic_open(target, "w", encoding="utf-8") as handle:
        for piece in _iter_report_json(report):
            handle.write(piece)
        handle.write("\n")
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

    Notes
    -----
    A text cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a
    carriage return (a file or split name, say) is written with a single quote
    ``'`` in front, as OWASP advises against CSV injection: spreadsheet tools
    would otherwise run it as a formula; they show the quote-prefixed text as
    text. Only text columns are changed (and header names): numbers, negative
    ones included, are written as they are. :func:`image_table` and the other
    tables, and the JSON output, keep the values unchanged.

    A cell holding a line break is quoted, so every reader keeps its row whole:
    a file whose cells hold a carriage return (legal in a POSIX file name) is
    written with ``\r\n`` line ends (RFC 4180), which makes Python's csv
    writer quote each cell holding ``\r`` or ``\n``; other files end lines
    with ``\n``.

    File names that are not valid UTF-8 are written as their original bytes
    (``surrogateescape``), so a tool reading the file as bytes can open the
    files it names; the CSV is then not valid UTF-8 in those cells (unlike the
    JSON output, see :func:`report_dict`); read such a file back with
    ``encoding_errors="surrogateescape"`` and the :data:`NAME_COLUMNS` as ``object``.

    All four files are written first to temporary files beside their targets
    and then renamed over them (:func:`~leakaudit.safe_io.atomic_open`): a
    link at a target is replaced, never written through, and a failure while
    writing any table replaces none.
    """
    targets = csv_paths(path)
    frames: Sequence[tuple[str, pd.DataFrame]] = [
        ("images", image_table(report)),
        ("pairs", pair_table(report)),
        ("groups", group_table(report)),
        ("splits", split_table(report)),
    ]
    with contextlib.ExitStack() as stack:
        for name, frame in frames:
            handle = stack.enter_context(
                atomic_open(
                    targets[name], "w", encoding="utf-8", errors="surrogateescape", newline=""
                )
            )
            _write_csv(handle, frame)
    return [targets[name] for name, _ in frames]
