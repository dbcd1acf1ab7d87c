from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leakaudit import clean_splits, dhash_audit


def test_seed_example_moves_test_member_to_train() -> None:
    groups = pd.DataFrame(
        {
            "path": ["a.jpg", "b.jpg", "c.jpg"],
            "split": ["train", "test", "val"],
            "group_id": [1, 1, 2],
        }
    )
    out = clean_splits(groups)
    assert out["split"].tolist() == ["train", "train", "val"]
    assert out["reassigned"].tolist() == [False, True, False]
    assert out["original_split"].tolist() == ["train", "test", "val"]
    assert out["path"].tolist() == groups["path"].tolist()
    # the input is not modified
    assert groups["split"].tolist() == ["train", "test", "val"]


def test_custom_priority_and_unknown_splits_rank_last() -> None:
    groups = pd.DataFrame(
        {
            "path": list("abcdefg"),
            "split": ["holdout", "test", "val", "extra", "holdout", "train", "test"],
            "group_id": [0, 0, 1, 1, 2, 2, 3],
        }
    )
    out = clean_splits(groups, priority=["test", "val", "train"])
    # group 0: holdout is not in priority -> test wins
    # group 1: val beats the unknown split "extra"
    # group 2: train beats holdout
    assert out["split"].tolist() == ["test", "test", "val", "val", "train", "train", "test"]
    assert out["reassigned"].tolist() == [True, False, False, True, True, False, False]


def test_unknown_splits_rank_by_first_appearance() -> None:
    groups = pd.DataFrame({"split": ["b", "a", "a", "b"], "group_id": [0, 1, 0, 1]})
    out = clean_splits(groups, priority=[])
    assert out["split"].tolist() == ["b", "b", "b", "b"]


def test_missing_split_rows_stay_unassigned() -> None:
    groups = pd.DataFrame({"split": ["train", None, "test"], "group_id": [0, 0, 0]})
    out = clean_splits(groups)
    assert out["split"].tolist() == ["train", None, "train"]
    assert out["reassigned"].tolist() == [False, False, True]


def test_bad_arguments_have_clear_errors() -> None:
    with pytest.raises(ValueError, match="missing: split"):
        clean_splits(pd.DataFrame({"group_id": [1]}))
    with pytest.raises(TypeError, match="priority must be a sequence"):
        clean_splits(pd.DataFrame({"group_id": [1], "split": ["a"]}), priority="train")
    with pytest.raises(ValueError, match="must not repeat"):
        clean_splits(pd.DataFrame({"group_id": [1], "split": ["a"]}), priority=["a", "a"])
    with pytest.raises(TypeError, match="DataFrame"):
        clean_splits([1, 2])  # type: ignore[arg-type]


split_names = st.sampled_from(["train", "val", "test", "extra", None])


@pytest.mark.filterwarnings("ignore::leakaudit.policy.PriorityWarning")
@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(split_names, st.integers(0, 8)), min_size=0, max_size=60),
    priority=st.permutations(["train", "val", "test"]),
)
def test_cleaning_invariants(rows: list[tuple[str | None, int]], priority: list[str]) -> None:
    frame = pd.DataFrame(
        {
            "path": [f"img{i}.png" for i in range(len(rows))],
            "split": pd.Series([r[0] for r in rows], dtype=object),
            "group_id": [r[1] for r in rows],
        }
    )
    out = clean_splits(frame, priority=priority)
    # no row lost, duplicated or reordered
    assert out["path"].tolist() == frame["path"].tolist()
    # no group left spanning splits
    spans = out.dropna(subset=["split"]).groupby("group_id")["split"].nunique()
    assert (spans <= 1).all()
    # untouched groups keep their split; reassigned marks exactly the changes
    changed = [a != b for a, b in zip(frame["split"].tolist(), out["split"].tolist(), strict=True)]
    assert out["reassigned"].tolist() == changed
    leaked = set(dhash_audit(frame).leaked_groups["group_id"]) if len(frame) else set()
    for row, was_changed in zip(frame.itertuples(index=False), changed, strict=True):
        if was_changed:
            assert row.group_id in leaked
    # each leaked group went to its highest-priority split present
    order = {name: i for i, name in enumerate([*priority, "extra"])}
    for _, part in frame.dropna(subset=["split"]).groupby("group_id"):
        best = min(part["split"], key=order.__getitem__)
        assert set(out.loc[part.index, "split"]) == {best}
    # idempotent: cleaning the output changes nothing
    again = clean_splits(out.drop(columns=["reassigned", "original_split"]), priority=priority)
    assert not again["reassigned"].any()


def test_validation_ranks_as_val_not_below_test() -> None:
    """HF's imagefolder names the split ``validation``: it is ``val`` in the default priority."""
    groups = pd.DataFrame(
        {"split": ["validation", "test", "train", "dev"], "group_id": [1, 1, 2, 2]}
    )
    out = clean_splits(groups)
    assert out["split"].tolist() == ["validation", "validation", "train", "train"]
    explicit = clean_splits(groups, priority=["test", "val", "train"])
    assert explicit["split"].tolist() == ["test", "test", "dev", "dev"]


def test_priority_name_matching_no_split_is_a_warning() -> None:
    from leakaudit.policy import PriorityWarning

    groups = pd.DataFrame({"split": ["train", "test"], "group_id": [1, 1]})
    with pytest.warns(PriorityWarning, match="'holdout'"):
        out = clean_splits(groups, priority=["holdout", "train", "test"])
    assert out["split"].tolist() == ["train", "train"]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clean_splits(groups)  # the default priority never warns about a split you lack


def test_drop_policy_in_the_core() -> None:
    groups = pd.DataFrame({"split": ["train", "test", "test", "val"], "group_id": [1, 1, 2, 1]})
    out = clean_splits(groups, policy="drop")
    assert out["split"].tolist() == ["train", None, "test", None]
    assert out["dropped"].tolist() == [False, True, False, True]
    assert not out["reassigned"].any()
    assert len(out) == len(groups)  # rows are marked, never removed
    with pytest.raises(ValueError, match="policy must be one of"):
        clean_splits(groups, policy="delete")


def test_split_groups_for_a_list_of_paths(tmp_path: pytest.TempPathFactory) -> None:
    """A user with paths: hash, group, split, all from the core."""
    import imagegen

    from leakaudit import compute_hashes, find_duplicate_groups, split_groups

    paths = []
    for i in range(20):
        path = tmp_path / f"{i}.png"  # type: ignore[operator]
        imagegen.photo_like(i % 15).save(path)  # 5 pairs of copies
        paths.append(str(path))
    groups = find_duplicate_groups(compute_hashes(paths, method="phash"), threshold=6)
    plan = split_groups(groups["group_id"], [0.7, 0.3], names=["train", "test"], seed=3)
    assert plan.sizes.sum() == 20 and plan.names == ["train", "test"]
    split_of = dict(zip(groups["path"], plan.assignment, strict=True))
    for i in range(5):
        assert split_of[paths[i]] == split_of[paths[i + 15]]
    again = split_groups(groups["group_id"], [0.7, 0.3], names=["train", "test"], seed=3)
    assert again.assignment.tolist() == plan.assignment.tolist()
