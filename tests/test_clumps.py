"""Clumps of near-identical images (issue 35, point 6): verified along a spanning set.

A photo saved again and again (JPEG at other qualities, a little noise) has hashes that
all differ and all lie within the candidate threshold: verifying every candidate pair
was quadratic (1,000 copies: 499,500 pairs). The groups must stay those of every
candidate pair; only redundant pairs inside an already linked group go unasked.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from imagegen import photo_like_array
from PIL import Image

from leakaudit import audit_splits
from leakaudit._evidence import COPY_KIND, EDGE_COLUMNS
from leakaudit._verify_clumps import (
    CLUMP_MIN_MEMBERS,
    Spanned,
    Star,
    collapse_stars,
    cross_verify,
    find_stars,
    not_asked,
    span_verify,
)
from leakaudit._verify_stage import VerifiedPairs
from leakaudit.grouping import UnionFindForest, connected_component_labels
from leakaudit.hashing import hash_sources
from leakaudit.loading import DecodeOptions
from leakaudit.verify import VerifyOptions, table_candidates, verify_candidates


def _partition(labels: np.ndarray) -> set[frozenset[int]]:
    groups: dict[int, set[int]] = {}
    for row, label in enumerate(labels.tolist()):
        groups.setdefault(label, set()).add(row)
    return {frozenset(g) for g in groups.values()}


class _Relation:
    """A symmetric accept relation on pairs, as a verifier; counts and records what it is asked."""

    def __init__(self, accept: set[tuple[int, int]]) -> None:
        self.accept = accept
        self.asked: list[tuple[int, int]] = []

    def __call__(self, pairs: np.ndarray, distance: np.ndarray) -> VerifiedPairs:
        rows = [tuple(p) for p in pairs.tolist()]
        self.asked.extend(rows)
        ok = [p for p in rows if (min(p), max(p)) in self.accept]
        edges = pd.DataFrame(
            {
                "row_a": [a for a, _ in ok],
                "row_b": [b for _, b in ok],
                "stage": "pixels",
                "distance": pd.array([pd.NA] * len(ok), dtype="Int64"),
                "similarity": 1.0,
                "inliers": pd.array([pd.NA] * len(ok), dtype="Int64"),
                "strength": 1.0,
                COPY_KIND: "pixels",
            }
        )[[*EDGE_COLUMNS, COPY_KIND]]
        edges = edges.astype({"row_a": np.int64, "row_b": np.int64})
        return VerifiedPairs(edges, len(rows), len(rows) - len(ok), 0, ["pixels"], "off")


@st.composite
def _graphs(draw: st.DrawFn) -> tuple[int, np.ndarray, set[tuple[int, int]], list[Star]]:
    """A random candidate graph, a random accept relation on it, and random stars."""
    n = draw(st.integers(2, 40))
    density = draw(st.sampled_from([0.1, 0.4, 0.9]))
    accept_rate = draw(st.sampled_from([0.0, 0.3, 0.8, 1.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    a, b = np.triu_indices(n, 1)
    keep = rng.random(len(a)) < density
    pairs = np.stack([a[keep], b[keep]], axis=1).astype(np.int64)
    accepted = rng.random(len(pairs)) < accept_rate
    accept = {(int(x), int(y)) for (x, y), ok in zip(pairs.tolist(), accepted, strict=True) if ok}
    # Stars: disjoint hubs and members, each member a candidate of its hub.
    stars: list[Star] = []
    claimed: set[int] = set()
    for hub in rng.permutation(n)[: draw(st.integers(0, 3))].tolist():
        if hub in claimed:
            continue
        near = {int(y if x == hub else x) for x, y in pairs.tolist() if hub in (x, y)}
        members = np.array(sorted(near - claimed), dtype=np.int64)
        if len(members):
            claimed |= {hub, *members.tolist()}
            stars.append(Star(hub, members, np.zeros(len(members), dtype=np.int64)))
    return n, pairs, accept, stars


@settings(max_examples=300, deadline=None)
@given(_graphs())
def test_spanning_verification_gives_the_components_of_every_accepted_pair(
    graph: tuple[int, np.ndarray, set[tuple[int, int]], list[Star]],
) -> None:
    n, pairs, accept, stars = graph
    verify = _Relation(accept)
    # What verified_labels does: stars collapse, every pair among the rows standing for
    # themselves is verified, then the pairs crossing to the stars' members.
    spanned = Spanned([])
    hub_of = collapse_stars(stars, n, verify, spanned)
    stands = hub_of == np.arange(n)
    among = pairs[stands[pairs[:, 0]] & stands[pairs[:, 1]] & not_asked(pairs, stars)]
    main = verify(among, np.zeros(len(among), dtype=np.int64))
    linked = np.concatenate(
        [
            main.edges[["row_a", "row_b"]].to_numpy(dtype=np.int64).reshape(-1, 2),
            spanned.edge_frame()[["row_a", "row_b"]].to_numpy(dtype=np.int64).reshape(-1, 2),
        ]
    )

    def candidates(queries: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        across = (queries[pairs[:, 0]] & index[pairs[:, 1]]) | (
            index[pairs[:, 0]] & queries[pairs[:, 1]]
        )
        return pairs[across], np.zeros(int(across.sum()), dtype=np.int64)

    cross_verify(stars, hub_of, linked, np.ones(n, dtype=bool), candidates, verify, spanned)
    edges = np.concatenate(
        [linked, spanned.edge_frame()[["row_a", "row_b"]].to_numpy(dtype=np.int64).reshape(-1, 2)]
    )
    got = connected_component_labels(n, [edges])
    oracle = connected_component_labels(
        n, [np.array(sorted(accept), dtype=np.int64).reshape(-1, 2)]
    )
    assert _partition(got) == _partition(oracle)
    # Only candidate pairs are asked, each at most once.
    candidates_set = {tuple(p) for p in pairs.tolist()}
    asked = [(min(p), max(p)) for p in verify.asked]
    assert set(asked) <= candidates_set
    assert len(asked) == len(set(asked))


@settings(max_examples=300, deadline=None)
@given(_graphs())
def test_span_verify_skips_only_pairs_already_linked(
    graph: tuple[int, np.ndarray, set[tuple[int, int]], list[Star]],
) -> None:
    n, pairs, accept, _ = graph
    verify = _Relation(accept)
    forest = UnionFindForest(n)
    spanned = Spanned([])
    span_verify(pairs, np.zeros(len(pairs), dtype=np.int64), forest, verify, spanned)
    oracle = connected_component_labels(
        n, [np.array(sorted(accept), dtype=np.int64).reshape(-1, 2)]
    )
    assert _partition(forest.labels()) == _partition(oracle)
    # Every pair not asked lies inside one component (a redundant edge).
    asked = {(min(p), max(p)) for p in verify.asked}
    labels = forest.labels()
    for a, b in pairs.tolist():
        assert (a, b) in asked or labels[a] == labels[b]


def test_a_clique_of_accepted_pairs_asks_n_minus_one() -> None:
    n = 500
    a, b = np.triu_indices(n, 1)
    pairs = np.stack([a, b], axis=1).astype(np.int64)
    star = Star(0, np.arange(1, n, dtype=np.int64), np.zeros(n - 1, dtype=np.int64))
    verify = _Relation({(int(x), int(y)) for x, y in pairs.tolist()})
    spanned = Spanned([])
    hub_of = collapse_stars([star], n, verify, spanned)
    assert (hub_of == 0).all()
    assert len(verify.asked) == n - 1


def _noisy_copies(base: np.ndarray, n: int, seed: int) -> list[bytes]:
    """``n`` JPEGs of ``base``, each with its own +-6 noise and a quality in 85..94."""
    rng = np.random.default_rng(seed)
    copies = []
    for _ in range(n):
        noisy = np.clip(base.astype(np.int16) + rng.integers(-6, 7, base.shape), 0, 255)
        buffer = io.BytesIO()
        Image.fromarray(noisy.astype(np.uint8)).save(
            buffer, "JPEG", quality=int(rng.integers(85, 95))
        )
        copies.append(buffer.getvalue())
    return copies


def _write_clump(root: Path, copies: list[bytes]) -> None:
    for split in ("train", "test"):
        (root / split).mkdir(parents=True)
    for i, data in enumerate(copies):
        split = "test" if i % 4 == 3 else "train"
        (root / split / f"c{i:04d}.jpg").write_bytes(data)


def _audit(root: Path) -> tuple[pd.DataFrame, dict[str, int]]:
    report = audit_splits(
        {"train": root / "train", "test": root / "test"}, cache=False, progress=False
    )
    return report.table, report.parameters["verification"]


def test_a_clump_of_near_identical_photos_is_verified_in_linear_pairs(tmp_path: Path) -> None:
    n = 300
    copies = _noisy_copies(photo_like_array(35, (96, 72)), n, seed=1)
    _write_clump(tmp_path, copies)
    table, counts = _audit(tmp_path)
    # No two copies have the same hash entries (the identical-entries star never applies).
    entries = hash_sources(copies[:50], dihedral=True, crop_entries=True, progress=False)
    rows = entries.orientations
    keys = {
        (rows.phash[rows.owner == i].tobytes(), rows.dhash[rows.owner == i].tobytes())
        for i in range(50)
    }
    assert len(keys) == 50
    assert table["group_id"].nunique() == 1
    # Every pair: 44,850. Along the star: one per member (and a few crossing pairs).
    assert counts["candidates"] <= 2 * n
    assert counts["verified"] >= n - 1


def test_near_identical_tiny_photos_are_verified_in_linear_pairs(tmp_path: Path) -> None:
    n = 200
    copies = _noisy_copies(photo_like_array(7, (32, 32)), n, seed=2)
    _write_clump(tmp_path, copies)
    table, counts = _audit(tmp_path)
    assert table["group_id"].nunique() == 1
    assert counts["candidates"] <= 3 * n


def test_a_clump_gives_the_groups_every_candidate_pair_gives(tmp_path: Path) -> None:
    # Two photos' clumps, a few images of a third photo, and some copies too noisy for
    # the hub: the groups are the components of every accepted candidate pair.
    copies = (
        _noisy_copies(photo_like_array(3, (96, 72)), 2 * CLUMP_MIN_MEMBERS, seed=3)
        + _noisy_copies(photo_like_array(4, (96, 72)), CLUMP_MIN_MEMBERS + 8, seed=4)
        + _noisy_copies(photo_like_array(5, (96, 72)), 5, seed=5)
    )
    _write_clump(tmp_path, copies)
    table, counts = _audit(tmp_path)
    paths = [Path(p) for p in table["path"].tolist()]
    hashes = hash_sources(paths, dihedral=True, crop_entries=True, progress=False)
    options = VerifyOptions()
    (pairs, distance), _ = table_candidates(
        hashes, np.asarray(hashes.low_information), options, dihedral=True
    )
    every = verify_candidates(
        pairs, distance, paths, [str(p) for p in paths], decode=DecodeOptions()
    )
    oracle = connected_component_labels(
        len(paths), [every.edges[["row_a", "row_b"]].to_numpy(dtype=np.int64)]
    )
    assert _partition(table["group_id"].to_numpy()) == _partition(oracle)
    assert counts["candidates"] < len(pairs) // 4


def test_find_stars_reads_each_bucket_once_and_only_proposes_candidates() -> None:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2**63, size=2, dtype=np.uint64)
    n = 400
    flips = (np.uint64(1) << rng.integers(0, 64, size=(n, 2)).astype(np.uint64)).astype(np.uint64)
    phash = np.where(
        np.arange(n) < 300, base[0] ^ flips[:, 0], rng.integers(0, 2**63, n).astype(np.uint64)
    )
    dhash = np.where(
        np.arange(n) < 300, base[1] ^ flips[:, 1], rng.integers(0, 2**63, n).astype(np.uint64)
    )
    owner = np.arange(n, dtype=np.int64)
    kinds = np.zeros(n, dtype=np.int8)
    stars = find_stars(owner, phash, dhash, kinds, np.ones(n, dtype=bool), 10)
    assert len(stars) == 1
    star = stars[0]
    assert star.hub < 300 and set(star.members.tolist()) == set(range(300)) - {star.hub}
    from leakaudit.hashing import popcount64

    far = np.maximum(
        popcount64(phash[star.members] ^ phash[star.hub]),
        popcount64(dhash[star.members] ^ dhash[star.hub]),
    )
    assert (star.distance == far).all() and (far <= 10).all()
