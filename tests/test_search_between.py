"""The search between two sets of hashes against its brute-force definition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leakaudit.search_between import iter_pairs_between, pairs_between_brute_force


def _collected(queries: np.ndarray, index: np.ndarray, threshold: int) -> np.ndarray:
    chunks = list(iter_pairs_between(queries, index, threshold))
    if not chunks:
        return np.zeros((0, 2), dtype=np.int64)
    pairs = np.concatenate(chunks)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def _near_copies(rng: np.random.Generator, base: np.ndarray, n: int, flips: int) -> np.ndarray:
    """``n`` hashes, each a random one of ``base`` with up to ``flips`` random bits flipped."""
    out = base[rng.integers(0, len(base), n)].copy()
    for _ in range(flips):
        bit = rng.integers(0, 64, n).astype(np.uint64)
        out ^= np.where(rng.random(n) < 0.7, np.uint64(1) << bit, np.uint64(0))
    return out


@pytest.mark.parametrize("threshold", [0, 1, 2, 5, 8, 9, 10, 13, 20, 64])
def test_banded_search_equals_brute_force_on_clumpy_hashes(threshold: int) -> None:
    rng = np.random.default_rng(threshold)
    base = rng.integers(0, 2**64, 40, dtype=np.uint64)
    index = np.concatenate(
        [base, _near_copies(rng, base, 6000, 12), rng.integers(0, 2**64, 2000, dtype=np.uint64)]
    )
    queries = np.concatenate([base[:5], _near_copies(rng, base, 400, 12)])
    expected = pairs_between_brute_force(queries, index, threshold)
    assert len(expected) > 0
    assert np.array_equal(_collected(queries, index, threshold), expected)
    # Either set may be the larger one: the pairs come back in (query, index) order.
    swapped = pairs_between_brute_force(index, queries, threshold)
    assert np.array_equal(_collected(index, queries, threshold), swapped)


def test_each_pair_comes_once_even_when_every_band_matches() -> None:
    queries = np.array([0, 2**64 - 1], dtype=np.uint64)
    index = np.array([0, 0, 1, 2**64 - 1, 2**64 - 2], dtype=np.uint64).repeat(2000)
    pairs = _collected(queries, index, 8)
    assert len(np.unique(pairs, axis=0)) == len(pairs) == (3 + 2) * 2000


def test_empty_sets_and_bad_arguments() -> None:
    hashes = np.array([1, 2], dtype=np.uint64)
    empty = np.zeros(0, dtype=np.uint64)
    assert list(iter_pairs_between(empty, hashes, 3)) == []
    assert list(iter_pairs_between(hashes, empty, 3)) == []
    with pytest.raises(ValueError, match="threshold"):
        list(iter_pairs_between(hashes, hashes, 65))
    with pytest.raises(TypeError, match="index"):
        iter_pairs_between(hashes, ["a"], 3)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    queries=st.lists(st.integers(0, 2**64 - 1), max_size=40),
    index=st.lists(st.integers(0, 2**64 - 1), max_size=40),
    flips=st.lists(st.integers(0, 63), max_size=6),
    threshold=st.integers(0, 12),
)
def test_property_equals_brute_force(
    queries: list[int], index: list[int], flips: list[int], threshold: int
) -> None:
    q = np.array(queries, dtype=np.uint64)
    # Near copies of the queries in the index, so that pairs exist at every threshold.
    near = q ^ np.uint64(sum(1 << bit for bit in set(flips))) if len(q) else q
    x = np.concatenate([np.array(index, dtype=np.uint64), near])
    # Force the banded path on small inputs too.
    import leakaudit.search_between as module

    cost = module._PROBE_COST_IN_PAIRS
    module._PROBE_COST_IN_PAIRS = 0
    try:
        got = _collected(q, x, threshold)
    finally:
        module._PROBE_COST_IN_PAIRS = cost
    assert np.array_equal(got, pairs_between_brute_force(q, x, threshold))


@pytest.mark.parametrize("threads", ["1", "3"])
def test_threads_follow_leakaudit_threads(threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import leakaudit.search_between as between

    monkeypatch.setenv("LEAKAUDIT_THREADS", threads)
    # The banded search and its threaded probing, always.
    monkeypatch.setattr(between, "_PROBE_COST_IN_PAIRS", 0)
    monkeypatch.setattr(between, "_PARALLEL_MIN_PAIRS", 0)
    rng = np.random.default_rng(7)
    base = rng.integers(0, 2**64, 30, dtype=np.uint64)
    index = np.concatenate([base, _near_copies(rng, base, 3000, 10)])
    queries = _near_copies(rng, base, 300, 10)
    assert np.array_equal(
        _collected(queries, index, 8), pairs_between_brute_force(queries, index, 8)
    )


def test_a_bad_leakaudit_threads_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import leakaudit.search_between as between

    monkeypatch.setenv("LEAKAUDIT_THREADS", "zero")
    monkeypatch.setattr(between, "_PROBE_COST_IN_PAIRS", 0)
    monkeypatch.setattr(between, "_PARALLEL_MIN_PAIRS", 0)
    hashes = np.arange(100, dtype=np.uint64)
    with pytest.raises(ValueError, match="LEAKAUDIT_THREADS"):
        list(iter_pairs_between(hashes, hashes, 8))
