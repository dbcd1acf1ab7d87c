from __future__ import annotations

import os
from pathlib import Path

import pytest

from leakaudit import (
    UnreadableImageWarning,
    audit_splits,
    clean_splits,
    dhash_audit,
    list_image_files,
)
from leakaudit.demo import build_demo_dataset


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return build_demo_dataset(tmp_path_factory.mktemp("demo"))


def _leaked_pairs(report) -> set[frozenset[str]]:  # type: ignore[no-untyped-def]
    table = report.table
    leaked = table[table["group_id"].isin(report.leaked_groups["group_id"])]
    return {
        frozenset(os.path.relpath(p, report_root) for p in part["path"])
        for _, part in leaked.groupby("group_id")
    }


report_root = ""


@pytest.mark.parametrize("method", ["phash", "dhash", "phash+dhash"])
def test_audit_finds_exactly_the_planted_leaks(demo, method: str) -> None:  # type: ignore[no-untyped-def]
    global report_root
    report_root = str(demo.root)
    with pytest.warns(UnreadableImageWarning, match="corrupt.jpg"):
        report = audit_splits(demo.splits, method=method, workers=1, progress=False)
    planted = {frozenset(pair[:2]) for pair in demo.planted_leaks}
    assert _leaked_pairs(report) == planted
    assert report.n_leaked_images == 8
    assert report.n_unreadable == 1
    assert report.total_images == 62 + 4 + 1 + 2 + 1  # originals, planted, dup, blanks, corrupt
    # the within-train duplicate is a duplicate group, not a leak
    assert report.n_within_split_groups >= 1
    assert report.parameters["method"] == method
    # cleaning leaves nothing to find
    cleaned = clean_splits(report.table)
    assert cleaned["reassigned"].sum() == 4
    assert set(cleaned.loc[cleaned["reassigned"], "split"]) == {"train"}
    assert not dhash_audit(cleaned).has_leakage


def test_audit_accepts_path_lists(demo) -> None:  # type: ignore[no-untyped-def]
    train = list_image_files(demo.splits["train"])
    test = [p for p in list_image_files(demo.splits["test"]) if p.name != "corrupt.jpg"]
    report = audit_splits({"train": train, "test": test}, workers=1, progress=False)
    assert report.n_leaked_groups == 3
    assert set(report.images_by_split.index) == {"train", "test"}


def test_parallel_audit_equals_serial(demo) -> None:  # type: ignore[no-untyped-def]
    with pytest.warns(UnreadableImageWarning):
        serial = audit_splits(demo.splits, workers=1, progress=False)
    with pytest.warns(UnreadableImageWarning):
        parallel = audit_splits(demo.splits, workers=2, progress=False)
    assert serial.table["hash"].tolist() == parallel.table["hash"].tolist()
    assert serial.table["group_id"].tolist() == parallel.table["group_id"].tolist()


def test_audit_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="folder not found"):
        audit_splits({"train": tmp_path / "nope"})
    with pytest.raises(ValueError, match="at least one split"):
        audit_splits({})
    with pytest.raises(TypeError, match="mapping"):
        audit_splits([tmp_path])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="method must be one of"):
        audit_splits({"train": tmp_path}, method="ahash")
    with pytest.raises(ValueError, match=r"threshold must be an int in \[0, 64\]; got 65"):
        audit_splits({"train": tmp_path}, threshold=65)


def test_list_image_files_skips_hidden_and_non_images(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.JPG").write_bytes(b"")
    (tmp_path / "a" / "notes.txt").write_text("hi")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "y.png").write_bytes(b"")
    (tmp_path / "b.png").write_bytes(b"")
    (tmp_path / "loop").symlink_to(tmp_path, target_is_directory=True)
    assert list_image_files(tmp_path) == [tmp_path / "a" / "x.JPG", tmp_path / "b.png"]
    assert list_image_files(tmp_path, recursive=False) == [tmp_path / "b.png"]
