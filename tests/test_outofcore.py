"""Grouping beyond memory: the spilled, sharded search must group exactly as in memory."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from test_grouping import brute_two_hash_labels, union_find_oracle
from test_search import hash_pairs, planted_hashes, skewed_hashes

from leakaudit.grouping import group_labels_within
from leakaudit.outofcore import ENGINE_BYTES_PER_ROW, spilled_group_labels
from leakaudit.search import pairs_within_brute_force

# A budget of a few rows: every input is sharded, and shards are split again.
TINY = 3 * ENGINE_BYTES_PER_ROW


def brute_labels(hashes: NDArray[np.uint64], threshold: int, valid: NDArray[np.bool_]) -> list[int]:
    pairs = pairs_within_brute_force(hashes, threshold)
    keep = valid[pairs[:, 0]] & valid[pairs[:, 1]]
    return union_find_oracle(hashes.size, [(int(i), int(j)) for i, j in pairs[keep]])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hashes=skewed_hashes(max_size=80),
    threshold=st.integers(0, 20),
    rows_per_shard=st.integers(1, 40),
    chunk_rows=st.integers(1, 50),
    data=st.data(),
)
def test_one_hash_matches_brute_force_with_tiny_shards(
    hashes: NDArray[np.uint64],
    threshold: int,
    rows_per_shard: int,
    chunk_rows: int,
    data: st.DataObject,
) -> None:
    n = hashes.size
    valid = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    labels = spilled_group_labels(
        hashes,
        threshold,
        valid=valid,
        memory_bytes=rows_per_shard * ENGINE_BYTES_PER_ROW,
        chunk_rows=chunk_rows,
    )
    assert labels.dtype == np.int64
    assert labels.tolist() == brute_labels(hashes, threshold, valid)
    assert np.array_equal(labels, group_labels_within(hashes, threshold, valid=valid))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=hash_pairs(max_size=80),
    threshold=st.integers(0, 12),
    second_threshold=st.integers(0, 12),
    rows_per_shard=st.integers(1, 40),
    data=st.data(),
)
def test_two_hashes_match_brute_force_with_tiny_shards(
    rows: tuple[NDArray[np.uint64], NDArray[np.uint64]],
    threshold: int,
    second_threshold: int,
    rows_per_shard: int,
    data: st.DataObject,
) -> None:
    first, second = rows
    n = first.size
    valid = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    labels = spilled_group_labels(
        first,
        threshold,
        second=second,
        second_threshold=second_threshold,
        valid=valid,
        memory_bytes=rows_per_shard * ENGINE_BYTES_PER_ROW,
        chunk_rows=data.draw(st.integers(1, 50)),
    )
    assert labels.tolist() == brute_two_hash_labels(
        first, second, threshold, second_threshold, valid
    )


def test_memory_mapped_inputs_group_as_in_memory(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    first = planted_hashes(6000, seed=3)
    second = first ^ np.uint64(0x0F0F_0000)
    second[::4] = rng.integers(0, 2**64, second[::4].size, dtype=np.uint64)
    np.save(tmp_path / "phash.npy", first)
    np.save(tmp_path / "dhash.npy", second)
    mapped_first = np.load(tmp_path / "phash.npy", mmap_mode="r")
    mapped_second = np.load(tmp_path / "dhash.npy", mmap_mode="r")
    spill = tmp_path / "spill"
    spill.mkdir()
    labels = spilled_group_labels(
        mapped_first,
        8,
        second=mapped_second,
        second_threshold=8,
        spill_dir=spill,
        memory_bytes=500 * ENGINE_BYTES_PER_ROW,
        chunk_rows=1000,
    )
    expected = group_labels_within(first, 8, second=second, second_threshold=8)
    assert np.array_equal(labels, expected)
    assert list(spill.iterdir()) == []  # the spill directory is left as it was


def test_spill_directory_is_removed_even_on_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leakaudit import outofcore

    calls = []

    def failing(*args: object, **kwargs: object) -> NDArray[np.int64]:
        calls.append(1)
        if len(calls) > 3:
            raise RuntimeError("disk full")
        return np.zeros((0, 2), dtype=np.int64)

    monkeypatch.setattr(outofcore, "_group_links", failing)
    hashes = planted_hashes(500, seed=1)
    with pytest.raises(RuntimeError, match="disk full"):
        spilled_group_labels(hashes, 5, spill_dir=tmp_path, memory_bytes=TINY)
    assert list(tmp_path.iterdir()) == []


def test_default_spill_directory_is_temporary_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Point the system's temporary directory at tmp_path: nothing may be left there.
    monkeypatch.setenv("TMPDIR", os.fspath(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    hashes = planted_hashes(800, seed=2)
    labels = spilled_group_labels(hashes, 5, memory_bytes=TINY)
    assert np.array_equal(labels, group_labels_within(hashes, 5))
    assert list(tmp_path.iterdir()) == []


def test_a_second_threshold_below_the_first_shards_on_the_second_hash() -> None:
    rng = np.random.default_rng(6)
    first = rng.integers(0, 2**64, 400, dtype=np.uint64)
    second = planted_hashes(400, seed=6)
    first[200:] = first[:200] ^ np.uint64(0b111)
    labels = spilled_group_labels(first, 10, second=second, second_threshold=2, memory_bytes=TINY)
    assert labels.tolist() == brute_two_hash_labels(first, second, 10, 2)


def test_bad_arguments_are_rejected(tmp_path: Path) -> None:
    hashes = np.arange(4, dtype=np.uint64)
    with pytest.raises(ValueError, match="spill_dir must be an existing directory"):
        spilled_group_labels(hashes, 2, spill_dir=tmp_path / "missing")
    with pytest.raises(TypeError, match="valid must be a boolean array of shape"):
        spilled_group_labels(hashes, 2, valid=np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match="second must have one hash per row"):
        spilled_group_labels(hashes, 2, second=hashes[:2], second_threshold=2)
    with pytest.raises(ValueError, match="memory_bytes must be an int"):
        spilled_group_labels(hashes, 2, memory_bytes=0)
    with pytest.raises(ValueError, match="threshold must be an int in"):
        spilled_group_labels(hashes, 65)


def test_empty_and_tiny_inputs() -> None:
    assert spilled_group_labels(np.zeros(0, dtype=np.uint64), 3).tolist() == []
    assert spilled_group_labels(np.array([7], dtype=np.uint64), 3, memory_bytes=1).tolist() == [0]
