from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest

from leakaudit import LargeGroupWarning, LeakageReport, dhash_audit, find_duplicate_groups


def seed_example() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "path": ["a.jpg", "b.jpg", "c.jpg", "d.jpg"],
            "split": ["train", "test", "train", "val"],
            "group_id": [1, 1, 2, 3],
        }
    )


def test_seed_example() -> None:
    report = dhash_audit(seed_example())
    assert report.total_images == 4
    assert report.n_leaked_images == 2
    assert report.leaked_groups["group_id"].tolist() == [1]
    assert report.leaked_groups["n_members"].tolist() == [2]
    assert report.leaked_groups["splits_involved"].tolist() == ["train, test"]
    assert report.pct_leaked_by_split.to_dict() == {"train": 50.0, "test": 100.0, "val": 0.0}
    assert report.has_leakage
    text = str(report)
    assert "LEAKAGE: 2 of 4 images" in text
    assert "a.jpg" in text and "b.jpg" in text


def test_no_leakage() -> None:
    frame = seed_example().assign(group_id=[0, 1, 2, 3])
    report = dhash_audit(frame)
    assert not report.has_leakage
    assert report.n_leaked_images == 0
    assert report.leaked_groups.empty
    assert list(report.leaked_groups.columns)[:3] == ["group_id", "n_members", "splits_involved"]
    assert "No leakage" in str(report)


def test_missing_splits_are_ignored_when_deciding_leakage() -> None:
    frame = pd.DataFrame(
        {"path": list("abcd"), "split": ["train", None, "test", None], "group_id": [0, 0, 1, 1]}
    )
    report = dhash_audit(frame)
    assert not report.has_leakage
    assert report.total_images == 4
    assert report.images_by_split.to_dict() == {"train": 1, "test": 1}


def test_percentages_are_rounded_to_two_decimals() -> None:
    frame = pd.DataFrame({"split": ["train"] * 3 + ["test"] * 3, "group_id": [0, 1, 2, 0, 3, 4]})
    report = dhash_audit(frame)
    assert report.pct_leaked_by_split.to_dict() == {"train": 33.33, "test": 33.33}


def test_spread_and_member_counts_use_hashes() -> None:
    frame = pd.DataFrame(
        {
            "path": ["a", "b", "c", "d"],
            "split": ["train", "test", "test", "val"],
            "hash": [
                "0000000000000000",
                "000000000000000f",
                "00000000000000ff",
                "ffffffffffffffff",
            ],
        }
    )
    grouped = find_duplicate_groups(frame, threshold=4)
    report = dhash_audit(grouped)
    row = report.leaked_groups.iloc[0]
    assert row["n_members"] == 3
    assert row["members_by_split"] == "train:1, test:2"
    assert row["max_distance"] == 8  # a and c are 8 bits apart, linked through b


def test_json_round_trip() -> None:
    report = dhash_audit(seed_example(), parameters={"method": "phash", "threshold": 6})
    again = LeakageReport.from_json(report.to_json())
    assert again.to_dict() == report.to_dict()
    assert json.loads(report.to_json())["n_leaked_images"] == 2


def test_large_group_warning() -> None:
    frame = pd.DataFrame(
        {"split": ["train"] * 30 + ["test"] * 30, "group_id": [0] * 12 + list(range(1, 49))}
    )
    frame.loc[30, "group_id"] = 0
    with pytest.warns(LargeGroupWarning, match="group 0 holds 12 of 30"):
        dhash_audit(frame)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dhash_audit(seed_example())


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="missing: split"):
        dhash_audit(pd.DataFrame({"group_id": [1]}))
    with pytest.raises(TypeError, match="DataFrame"):
        dhash_audit({"group_id": [1]})  # type: ignore[arg-type]


def test_per_split_counts_are_exact_not_rebuilt_from_percentages() -> None:
    """7 leaked images of 200,000 were reported as 0 (7 / 200,000 rounds to 0.00%)."""
    from leakaudit.export import split_table

    n = 200_000
    frame = pd.DataFrame(
        {
            "split": ["train"] * n + ["test"] * 7,
            "group_id": list(range(n - 7)) + list(range(7)) + list(range(7)),
        }
    )
    frame["group_id"] = list(range(n)) + list(range(7))
    report = dhash_audit(frame)
    assert report.leaked_images_by_split().to_dict() == {"train": 7, "test": 7}
    assert report.pct_leaked_by_split["train"] == 0.0  # derived from the count, 2 decimals
    assert split_table(report).set_index("split")["n_leaked"].to_dict() == {"train": 7, "test": 7}
    assert "train   200000        7" in report.to_text()
    assert report.leak_counts.loc["train", "leaked"] == 7
    again = type(report).from_json(report.to_json())
    assert again.leaked_images_by_split().to_dict() == {"train": 7, "test": 7}


def test_a_report_is_built_once_and_not_changed_afterwards() -> None:
    import dataclasses

    report = dhash_audit(pd.DataFrame({"split": ["train", "test"], "group_id": [0, 0]}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.embedding_pairs = None  # type: ignore[misc]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_small_integer_group_ids_count_as_any_other_ids(seed: int) -> None:
    # Ids 0..g-1 are counted by array indexing; far-apart ids go through pandas' groupby.
    # Both must give the same report (a split may be missing, groups may be singletons).
    import numpy as np

    rng = np.random.default_rng(seed)
    n = 400
    groups = rng.integers(0, 150, n)
    splits = rng.choice(np.array(["train", "val", "test", None], dtype=object), n)
    small = dhash_audit(pd.DataFrame({"group_id": groups, "split": splits}))
    offset = 10**12
    large = dhash_audit(pd.DataFrame({"group_id": groups * 7 + offset, "split": splits}))
    expected = large.leaked_groups.copy()
    expected["group_id"] = (expected["group_id"] - offset) // 7
    pd.testing.assert_frame_equal(small.leaked_groups, expected)
    assert small.n_leaked_images == large.n_leaked_images
    assert small.n_within_split_groups == large.n_within_split_groups
    pd.testing.assert_series_equal(small.pct_leaked_by_split, large.pct_leaked_by_split)
    pd.testing.assert_series_equal(small.leaked_by_split, large.leaked_by_split)
    pd.testing.assert_series_equal(small.images_by_split, large.images_by_split)


def test_parameters_are_a_typed_frozen_record_that_reads_as_a_mapping() -> None:
    import dataclasses

    from leakaudit import AuditParameters

    given = {
        "method": "phash+dhash",
        "threshold": 8,
        "dihedral": True,
        "stages": ["hash candidates", "pixels"],
        "verification": {"ran": True, "candidates": 3},
        "images_root": None,
        "index_column": "idx",  # a caller's own key
        "min_side": "large",  # the wrong type for its field: kept as given
    }
    report = dhash_audit(seed_example(), parameters=given)
    parameters = report.parameters
    assert isinstance(parameters, AuditParameters)
    assert parameters.method == "phash+dhash" and parameters.threshold == 8
    assert parameters.stages == ("hash candidates", "pixels") and parameters.dihedral is True
    assert parameters.min_side is None and parameters.extra["min_side"] == "large"
    assert parameters.images_root is None and "images_root" in parameters
    assert parameters.hash_shards is None and "hash_shards" not in parameters
    # The mapping view: same keys in the same order, same values (stages as a list).
    assert list(parameters) == list(given) and dict(parameters) == given
    assert parameters == given and parameters["stages"] == ["hash candidates", "pixels"]
    assert parameters.get("embedded_images", "absent") == "absent"
    with pytest.raises(KeyError):
        parameters["hash_shards"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        parameters.method = "dhash"  # type: ignore[misc]
    with pytest.raises(TypeError):
        parameters["method"] = "dhash"  # type: ignore[index]
    # The JSON writes the mapping as given and reads back the same record.
    assert json.loads(report.to_json())["parameters"] == given
    again = LeakageReport.from_json(report.to_json()).parameters
    assert list(again) == list(given) and again.method == "phash+dhash"
    # A report built by hand with a dict gets the record too; replace() records new keys last.
    assert isinstance(dataclasses.replace(report, parameters={"a": 1}).parameters, AuditParameters)
    assert list(parameters.replace(embedded_images=4)) == [*given, "embedded_images"]


def test_parameters_record_types_every_key_the_audit_records() -> None:
    import dataclasses

    from leakaudit import AuditParameters

    fields = {f.name for f in dataclasses.fields(AuditParameters)} - {"extra", "recorded"}
    recorded = {
        "method", "threshold", "dihedral", "stages", "verification", "min_side",
        "exif_transpose", "trim_borders", "hash_shards", "images_root", "images",
        "embedding_similarity", "embedding_k", "embedding_only_ungrouped", "embedded_images",
    }  # fmt: skip
    assert fields == recorded
    assert AuditParameters(method="dhash", threshold=4).recorded == ("method", "threshold")
