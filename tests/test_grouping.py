"""Grouping: vectorised union-find against a plain one, transitivity, order-invariance, spread."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from test_search import hash_pairs, planted_hashes, skewed_hashes

from leakaudit.grouping import (
    GroupSpread,
    connected_component_labels,
    group_labels_within,
    group_spread,
)
from leakaudit.hashing import popcount64
from leakaudit.search import pairs_within_brute_force


def union_find_oracle(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """A plain pure-Python union-find, labels in order of first appearance."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in edges:
        root_a, root_b = find(a), find(b)
        if root_a != root_b:
            parent[max(root_a, root_b)] = min(root_a, root_b)
    names: dict[int, int] = {}
    return [names.setdefault(find(x), len(names)) for x in range(n)]


def brute_group_labels(hashes: NDArray[np.uint64], threshold: int) -> list[int]:
    pairs = pairs_within_brute_force(hashes, threshold)
    return union_find_oracle(hashes.size, [(int(i), int(j)) for i, j in pairs])


def same_partition(first: NDArray[np.int64], second: NDArray[np.int64]) -> bool:
    """Whether two labelings group the rows identically (labels may differ)."""
    pairs = set(zip(first.tolist(), second.tolist(), strict=True))
    return len(pairs) == len(set(first.tolist())) == len(set(second.tolist()))


# --------------------------------------------------------------------------------------------------
# connected_component_labels


@settings(max_examples=300, deadline=None)
@given(data=st.data(), n=st.integers(0, 80))
def test_components_match_a_plain_union_find(data: st.DataObject, n: int) -> None:
    edges = (
        data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=150))
        if n
        else []
    )
    cuts = sorted(data.draw(st.lists(st.integers(0, len(edges)), max_size=4)))
    array = np.array(edges, dtype=np.int64).reshape(-1, 2)
    chunks = [array[a:b] for a, b in itertools.pairwise([0, *cuts, len(edges)])]
    labels = connected_component_labels(n, chunks)
    assert labels.dtype == np.int64
    assert labels.tolist() == union_find_oracle(n, edges)


def test_labels_follow_first_appearance() -> None:
    edges = [np.array([[5, 9], [9, 2]]), np.array([[7, 8]]), np.array([[8, 1]])]
    assert connected_component_labels(10, edges).tolist() == [0, 1, 2, 3, 4, 2, 5, 1, 1, 2]


@pytest.mark.parametrize(
    "edges",
    [
        np.stack([np.arange(1, 200_000), np.arange(199_999)], axis=1),  # a long chain
        np.stack([np.full(199_999, 199_999), np.arange(199_999)], axis=1),  # a star
        np.stack([np.arange(199_999, 0, -1), np.arange(199_998, -1, -1)], axis=1),  # reversed chain
    ],
)
def test_adversarial_shapes_end_in_one_component(edges: NDArray[np.int64]) -> None:
    assert not connected_component_labels(200_000, [edges]).any()


def test_many_small_chunks_against_a_persistent_forest() -> None:
    rng = np.random.default_rng(0)
    n = 5000
    edges = rng.integers(0, n, size=(4000, 2))
    labels = connected_component_labels(n, np.array_split(edges, 400))
    assert labels.tolist() == union_find_oracle(n, [(int(a), int(b)) for a, b in edges])


def test_bad_edges_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"node ids in \[0, 2\]; got ids from 0 to 3"):
        connected_component_labels(3, [np.array([[0, 3]])])
    with pytest.raises(TypeError, match=r"shape \(k, 2\)"):
        connected_component_labels(3, [np.array([0, 1, 2])])
    with pytest.raises(ValueError, match=r"n must be an int >= 0; got -1\."):
        connected_component_labels(-1, [])


# --------------------------------------------------------------------------------------------------
# group_labels_within


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hashes=skewed_hashes(), threshold=st.integers(0, 64))
def test_groups_match_brute_force_components(hashes: NDArray[np.uint64], threshold: int) -> None:
    labels = group_labels_within(hashes, threshold)
    assert labels.tolist() == brute_group_labels(hashes, threshold)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hashes=skewed_hashes(), threshold=st.integers(0, 20), seed=st.integers(0, 2**32 - 1))
def test_grouping_is_order_invariant(hashes: NDArray[np.uint64], threshold: int, seed: int) -> None:
    permutation = np.random.default_rng(seed).permutation(hashes.size)
    labels = group_labels_within(hashes, threshold)
    permuted = group_labels_within(hashes[permutation], threshold)
    assert same_partition(labels[permutation], permuted)


def test_chains_are_grouped_transitively() -> None:
    a = 0
    b = a ^ 0b111  # 3 bits from a
    c = b ^ 0b111000  # 3 bits from b, 6 from a
    d = c ^ (0b111 << 40)  # 9 bits from a
    far = (1 << 64) - 1
    hashes = np.array([far, d, a, c, b], dtype=np.uint64)
    assert group_labels_within(hashes, 3).tolist() == [0, 1, 1, 1, 1]
    assert group_labels_within(hashes, 2).tolist() == [0, 1, 2, 3, 4]


def test_a_few_thousand_planted_hashes() -> None:
    hashes = planted_hashes(3000, seed=1)
    for threshold in (4, 6):
        labels = group_labels_within(hashes, threshold)
        assert labels.tolist() == brute_group_labels(hashes, threshold)
        assert labels.max() < hashes.size - 100  # the planted duplicates were merged


def test_invalid_and_unlinkable_rows_are_singletons() -> None:
    hashes = np.array([0, 0, 1, 0, 0], dtype=np.uint64)
    valid = np.array([True, True, True, False, True])
    linkable = np.array([True, False, True, True, True])
    assert group_labels_within(hashes, 1).tolist() == [0, 0, 0, 0, 0]
    assert group_labels_within(hashes, 1, valid=valid).tolist() == [0, 0, 0, 1, 0]
    assert group_labels_within(hashes, 1, linkable=linkable).tolist() == [0, 1, 0, 0, 0]
    both = group_labels_within(hashes, 1, valid=valid, linkable=linkable)
    assert both.tolist() == [0, 1, 0, 2, 0]


def test_bad_masks_are_rejected() -> None:
    hashes = np.zeros(3, dtype=np.uint64)
    with pytest.raises(TypeError, match=r"valid must be a boolean array of shape \(3,\)"):
        group_labels_within(hashes, 1, valid=np.array([1, 0, 1]))
    with pytest.raises(TypeError, match=r"linkable must be a boolean array of shape \(3,\)"):
        group_labels_within(hashes, 1, linkable=np.ones(2, dtype=bool))


def test_empty_input() -> None:
    empty = np.zeros(0, dtype=np.uint64)
    assert group_labels_within(empty, 5).tolist() == []
    assert connected_component_labels(0, []).tolist() == []


# --------------------------------------------------------------------------------------------------
# group_spread


def brute_spread(hashes: NDArray[np.uint64], labels: NDArray[np.int64]) -> dict[int, int]:
    spread: dict[int, int] = {}
    for group in np.unique(labels).tolist():
        members = hashes[labels == group].tolist()
        if len(members) > 1:
            pairs = itertools.combinations(members, 2)
            spread[group] = max(bin(x ^ y).count("1") for x, y in pairs)
    return spread


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hashes=skewed_hashes(), threshold=st.integers(0, 12))
def test_spread_is_exact_for_small_groups(hashes: NDArray[np.uint64], threshold: int) -> None:
    labels = group_labels_within(hashes, threshold)
    frame = group_spread(hashes, labels)
    assert list(frame.columns) == GroupSpread.columns()
    assert dict(zip(frame["group_id"].tolist(), frame["max_distance"].tolist(), strict=True)) == (
        brute_spread(hashes, labels)
    )
    assert not frame["sampled"].any()
    counts = np.bincount(labels) if labels.size else np.zeros(0, dtype=np.int64)
    assert frame["n_members"].tolist() == [int(counts[g]) for g in frame["group_id"]]


def test_spread_samples_large_groups() -> None:
    rng = np.random.default_rng(0)
    hashes = rng.integers(0, 2**63, 1000, dtype=np.uint64)
    labels = np.where(np.arange(1000) < 700, 3, np.arange(1000))
    frame = group_spread(hashes, labels, max_members=50, seed=1)
    assert frame.shape == (1, 4)
    row = frame.iloc[0]
    assert (row["group_id"], row["n_members"], bool(row["sampled"])) == (3, 700, True)
    assert row["max_distance"] <= brute_spread(hashes, labels)[3]
    assert frame.dtypes.tolist() == [np.int64, np.int64, np.int64, np.bool_]


def test_spread_of_singletons_is_empty() -> None:
    frame = group_spread(np.arange(4, dtype=np.uint64), np.arange(4))
    assert isinstance(frame, pd.DataFrame)
    assert frame.empty
    assert list(frame.columns) == GroupSpread.columns()


@pytest.mark.parametrize("threshold", [3, 5, 8])
def test_grouping_skips_linked_buckets_without_losing_links(threshold: int) -> None:
    # Merging every 50 edges makes the search skip buckets already in one component as often as
    # possible; the groups must not change.
    from leakaudit.grouping import UnionFindForest
    from leakaudit.search import iter_linking_pairs

    hashes = np.unique(planted_hashes(4000, seed=threshold))
    forest = UnionFindForest(hashes.size, batch=50)
    for a, b in iter_linking_pairs(hashes, threshold, forest):
        forest.add(a, b)
    assert forest.version >= 2
    assert forest.labels().tolist() == brute_group_labels(hashes, threshold)


# --------------------------------------------------------------------------------------------------
# Two hashes: group_labels_within(second=...), link_labels' default method


def brute_two_hash_labels(
    first: NDArray[np.uint64],
    second: NDArray[np.uint64],
    t: int,
    t2: int,
    active: NDArray[np.bool_] | None = None,
) -> list[int]:
    n = first.size
    keep = np.ones(n, dtype=bool) if active is None else active
    edges = [
        (i, j)
        for i in range(n)
        for j in range(i + 1, n)
        if keep[i]
        and keep[j]
        and int(first[i] ^ first[j]).bit_count() <= t
        and int(second[i] ^ second[j]).bit_count() <= t2
    ]
    return union_find_oracle(n, edges)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=hash_pairs(),
    threshold=st.integers(0, 14),
    second_threshold=st.integers(0, 14),
    data=st.data(),
)
def test_two_hash_groups_match_brute_force(
    rows: tuple[NDArray[np.uint64], NDArray[np.uint64]],
    threshold: int,
    second_threshold: int,
    data: st.DataObject,
) -> None:
    first, second = rows
    n = first.size
    valid = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    labels = group_labels_within(
        first, threshold, valid=valid, second=second, second_threshold=second_threshold
    )
    assert labels.tolist() == brute_two_hash_labels(
        first, second, threshold, second_threshold, valid
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=hash_pairs(), threshold=st.integers(0, 12), seed=st.integers(0, 2**32 - 1))
def test_two_hash_grouping_is_order_invariant(
    rows: tuple[NDArray[np.uint64], NDArray[np.uint64]], threshold: int, seed: int
) -> None:
    first, second = rows
    order = np.random.default_rng(seed).permutation(first.size)
    labels = group_labels_within(first, threshold, second=second, second_threshold=threshold)
    shuffled = group_labels_within(
        first[order], threshold, second=second[order], second_threshold=threshold
    )
    assert same_partition(labels[order], shuffled)


def test_a_few_thousand_planted_pairs_group_by_both_hashes() -> None:
    # Large enough for the banded search (not the brute force) on both orders of the hashes.
    rng = np.random.default_rng(5)
    first = planted_hashes(20000, seed=5)
    second = first ^ rng.integers(0, 2**64, 1, dtype=np.uint64)
    noisy = rng.random(first.size) < 0.3
    second[noisy] ^= np.uint64(1) << rng.integers(0, 64, int(noisy.sum())).astype(np.uint64)
    second[::7] = rng.integers(0, 2**64, second[::7].size, dtype=np.uint64)
    labels = group_labels_within(first, 8, second=second, second_threshold=8)
    pairs = pairs_within_brute_force(first, 8)
    close = popcount64(second[pairs[:, 0]] ^ second[pairs[:, 1]]) <= 8
    expected = connected_component_labels(first.size, [pairs[close]])
    assert np.array_equal(labels, expected)
    swapped = group_labels_within(second, 8, second=first, second_threshold=8)
    assert np.array_equal(swapped, expected)


def test_link_labels_with_a_second_hash_keeps_the_linking_policy() -> None:
    from leakaudit.grouping import fuzzy_edges, link_labels

    # Low-information rows link only by their exact key; invalid rows never link; the others
    # by both hashes: the same groups as streaming the pairs through fuzzy_edges.
    rng = np.random.default_rng(8)
    first = planted_hashes(3000, seed=8)
    second = first ^ np.uint64(0xF0F0)
    second[::5] = rng.integers(0, 2**64, second[::5].size, dtype=np.uint64)
    valid = rng.random(first.size) > 0.05
    low = (rng.random(first.size) < 0.05) & valid
    keys = np.array([f"d{k}" for k in rng.integers(0, 40, first.size)], dtype=object)
    labels = link_labels(
        first, valid, 6, low_information=low, exact_keys=keys, second=second, second_threshold=7
    )
    linkable = valid & ~low
    edges = list(fuzzy_edges(first, 6, linkable, second=second, second_threshold=7))
    codes = pd.factorize(pd.Series(keys))[0]
    for code in np.unique(codes[low]).tolist():
        members = np.flatnonzero(low & (codes == code))
        edges.append(np.stack([members[:-1], members[1:]], axis=1))
    expected = connected_component_labels(first.size, edges)
    assert np.array_equal(labels, expected)
    # Without its threshold, a second hash constrains nothing (as fuzzy_edges reads it).
    assert np.array_equal(
        link_labels(first, valid, 6, second=second),
        link_labels(first, valid, 6),
    )


@settings(max_examples=200, deadline=None)
@given(
    first=st.lists(st.integers(0, 5), max_size=60),
    data=st.data(),
)
def test_distinct_hash_pairs_is_unique_over_both_hashes(
    first: list[int], data: st.DataObject
) -> None:
    from leakaudit.grouping import distinct_hash_pairs

    second = data.draw(st.lists(st.integers(0, 3), min_size=len(first), max_size=len(first)))
    a = np.array(first, dtype=np.uint64)
    b = np.array(second, dtype=np.uint64)
    unique_a, unique_b, inverse = distinct_hash_pairs(a, b)
    expected = sorted(set(zip(first, second, strict=True)))
    assert list(zip(unique_a.tolist(), unique_b.tolist(), strict=True)) == expected
    assert np.array_equal(unique_a[inverse], a) and np.array_equal(unique_b[inverse], b)


def test_second_hash_of_the_wrong_length_is_rejected() -> None:
    hashes = np.arange(4, dtype=np.uint64)
    with pytest.raises(ValueError, match="second must have one hash per row"):
        group_labels_within(hashes, 2, second=hashes[:2], second_threshold=2)
    with pytest.raises(TypeError, match="second_threshold must be an int"):
        group_labels_within(hashes, 2, second=hashes)
