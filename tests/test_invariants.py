"""Invariants of the whole audit, property-tested with hypothesis.

The unit-level properties live beside their modules (search vs brute force in
test_search.py, ``group_labels_within`` order invariance in test_grouping.py, the
cleaning rules on arbitrary group tables in test_cleaning.py, hex round trips of
plain values in test_hashing.py). These check the same promises where users meet
them: :func:`leakaudit.audit_hash_table` on both hashes at once with
low-information rows and unreadable rows mixed in, cleaning of a real audit's
table, and round trips of whole reports.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from leakaudit import LeakageReport, audit_hash_table, clean_splits
from leakaudit.grouping import connected_component_labels
from leakaudit.hashing import HashTable, hashes_to_hex, hex_to_hashes, popcount64
from leakaudit.search import pairs_within_brute_force

SPLITS = ["train", "val", "test"]
# Random clusters often make groups big enough for the report's chaining warning.
pytestmark = pytest.mark.filterwarnings("ignore::leakaudit.LargeGroupWarning")


@st.composite
def hash_tables(draw: st.DrawFn) -> tuple[HashTable, list[str]]:
    """Tables with clusters of near hashes, some blank (low-information) and unreadable rows."""
    n = draw(st.integers(0, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    centres = rng.integers(0, 2**63, size=max(1, n // 4), dtype=np.uint64) * np.uint64(2)
    pick = rng.integers(0, centres.size, size=n)
    flips = rng.integers(0, 64, size=(n, 2, 3))
    noise = rng.random((n, 2, 3)) < 0.6

    def near(which: int) -> NDArray[np.uint64]:
        values = centres[pick].copy()
        for k in range(3):
            bits = np.left_shift(np.uint64(1), flips[:, which, k].astype(np.uint64))
            values ^= np.where(noise[:, which, k], bits, np.uint64(0))
        result: NDArray[np.uint64] = values
        return result

    phash, dhash = near(0), near(1)
    low = rng.random(n) < draw(st.sampled_from([0.0, 0.2, 0.6]))
    digest = np.where(low, rng.integers(1, 4, size=n).astype(np.uint64), np.uint64(0))
    valid = rng.random(n) > 0.1
    for column in (phash, dhash, digest):
        column[~valid] = 0
    low &= valid
    table = HashTable(
        sources=[f"img_{i:03d}.png" for i in range(n)],
        phash=phash,
        dhash=dhash,
        digest=digest.astype(np.uint64),
        low_information=low,
        valid=valid,
        errors={i: "truncated image" for i in np.flatnonzero(~valid).tolist()},
    )
    split = [SPLITS[i] for i in rng.integers(0, 3, size=n)]
    return table, split


#: The tables here are generated hashes with made-up names: nothing to decode again,
#: so the invariants are those of the threshold rule (what the cascade falls back to).
HASHES_ONLY = {"verify": False}


def expected_labels(table: HashTable, threshold: int) -> NDArray[np.int64]:
    """The oracle: brute-force pairs within threshold on both hashes, plus equal digests."""
    n = len(table)
    linkable = np.flatnonzero(table.valid & ~table.low_information)
    pairs = linkable[pairs_within_brute_force(table.phash[linkable], threshold)]
    if pairs.size:
        close = popcount64(table.dhash[pairs[:, 0]] ^ table.dhash[pairs[:, 1]]) <= threshold
        pairs = pairs[close]
    low = np.flatnonzero(table.low_information)
    same = [
        (int(a), int(b))
        for i, a in enumerate(low)
        for b in low[i + 1 :]
        if table.digest[a] == table.digest[b]
    ]
    edges = [pairs.astype(np.int64).reshape(-1, 2), np.array(same, dtype=np.int64).reshape(-1, 2)]
    return connected_component_labels(n, edges)


def same_partition(a: NDArray[np.int64], b: NDArray[np.int64]) -> bool:
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def permuted(table: HashTable, order: NDArray[np.intp]) -> HashTable:
    position = {int(old): new for new, old in enumerate(order)}
    return HashTable(
        sources=[table.sources[i] for i in order],
        phash=table.phash[order],
        dhash=table.dhash[order],
        digest=table.digest[order],
        low_information=table.low_information[order],
        valid=table.valid[order],
        errors={position[i]: reason for i, reason in table.errors.items()},
    )


settings_ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings_
@given(data=hash_tables(), threshold=st.integers(0, 12))
def test_audit_groups_are_exactly_the_brute_force_components(
    data: tuple[HashTable, list[str]], threshold: int
) -> None:
    """Every pair within the threshold (on both hashes) is grouped; nothing else links."""
    table, split = data
    report = audit_hash_table(
        table, split, method="phash+dhash", threshold=threshold, **HASHES_ONLY
    )
    assert report.table is not None
    labels = report.table["group_id"].to_numpy()
    assert same_partition(labels, expected_labels(table, threshold))
    # Unreadable rows are singletons; blank rows join only byte-identical blank rows.
    for i in np.flatnonzero(~table.valid).tolist():
        assert (labels == labels[i]).sum() == 1
    for i in np.flatnonzero(table.low_information).tolist():
        members = np.flatnonzero(labels == labels[i])
        assert (table.digest[members] == table.digest[i]).all()


@settings_
@given(data=hash_tables(), threshold=st.integers(0, 12), seed=st.integers(0, 2**32 - 1))
def test_audit_grouping_is_independent_of_input_order(
    data: tuple[HashTable, list[str]], threshold: int, seed: int
) -> None:
    table, split = data
    order = np.random.default_rng(seed).permutation(len(table))
    first = audit_hash_table(table, split, threshold=threshold, **HASHES_ONLY)
    second = audit_hash_table(
        permuted(table, order), [split[i] for i in order], threshold=threshold, **HASHES_ONLY
    )
    assert first.table is not None and second.table is not None
    labels = first.table["group_id"].to_numpy()[order]
    assert same_partition(labels, second.table["group_id"].to_numpy())
    assert first.n_leaked_images == second.n_leaked_images
    assert first.n_leaked_groups == second.n_leaked_groups
    assert first.to_dict()["pct_leaked_by_split"] == second.to_dict()["pct_leaked_by_split"]


@pytest.mark.filterwarnings("ignore::leakaudit.policy.PriorityWarning")
@settings_
@given(data=hash_tables(), threshold=st.integers(0, 12), priority=st.permutations(SPLITS))
def test_cleaning_an_audit_leaves_no_leak_and_loses_nothing(
    data: tuple[HashTable, list[str]], threshold: int, priority: list[str]
) -> None:
    table, split = data
    report = audit_hash_table(table, split, threshold=threshold, **HASHES_ONLY)
    assert report.table is not None
    cleaned = clean_splits(report.table, priority)
    # No row lost, duplicated or reordered; every other column untouched.
    assert cleaned["path"].tolist() == report.table["path"].tolist()
    rest = [c for c in report.table.columns if c != "split"]
    pd.testing.assert_frame_equal(cleaned[rest], report.table[rest])
    # No group spans splits; groups that did not leak keep their split.
    assert (cleaned.groupby("group_id")["split"].nunique() <= 1).all()
    leaked = set(report.leaked_groups["group_id"])
    untouched = ~report.table["group_id"].isin(leaked)
    assert cleaned.loc[untouched, "split"].tolist() == report.table.loc[untouched, "split"].tolist()
    # Re-auditing the cleaned table finds nothing; cleaning again changes nothing.
    regrouped = audit_hash_table(
        table, cleaned["split"].tolist(), threshold=threshold, **HASHES_ONLY
    )
    assert not regrouped.has_leakage
    again = clean_splits(cleaned.drop(columns=["reassigned", "original_split"]), priority)
    assert not again["reassigned"].any()
    assert again["split"].tolist() == cleaned["split"].tolist()


@settings_
@given(data=hash_tables(), threshold=st.integers(0, 12))
def test_report_json_round_trip(data: tuple[HashTable, list[str]], threshold: int) -> None:
    table, split = data
    report = audit_hash_table(
        table, split, threshold=threshold, extra_parameters={"note": "ünïcode ✓"}, **HASHES_ONLY
    )
    text = report.to_json()
    again = LeakageReport.from_json(text)
    assert again.to_dict() == report.to_dict()
    assert json.loads(again.to_json()) == json.loads(text)
    assert again.n_leaked_images == report.n_leaked_images
    assert again.has_leakage == report.has_leakage
    assert again.leaked_groups["group_id"].tolist() == report.leaked_groups["group_id"].tolist()


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.integers(0, 2**64 - 1)), max_size=50),
    upper=st.booleans(),
)
def test_hex_round_trip_with_missing_values(values: list[int | None], upper: bool) -> None:
    array = np.array([v or 0 for v in values], dtype=np.uint64)
    texts: list[str | None] = [
        None if v is None else (t.upper() if upper else t)
        for v, t in zip(values, hashes_to_hex(array), strict=True)
    ]
    parsed, valid = hex_to_hashes(texts)
    assert valid.tolist() == [v is not None for v in values]
    assert parsed.tolist() == [v or 0 for v in values]
    assert hashes_to_hex(parsed) == [t.lower() if t else "0" * 16 for t in texts]
