"""The training-script guard: folders, torchvision objects, Hugging Face objects, reports."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pandas as pd
import pytest

from leakaudit.adapters.guard import assert_no_leakage, check_leakage, leaked_counts
from leakaudit.demo import DemoDataset, build_demo_dataset
from leakaudit.errors import LeakageError, LeakauditError
from leakaudit.report import dhash_audit


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoDataset:
    return build_demo_dataset(tmp_path_factory.mktemp("demo"))


def test_folders_raise_with_the_report_attached(demo: DemoDataset) -> None:
    with pytest.raises(LeakageError) as caught:
        assert_no_leakage(demo.splits, workers=1, on_error="ignore")
    error = caught.value
    assert isinstance(error, LeakauditError) and isinstance(error, AssertionError)
    assert error.report.n_leaked_groups == 4
    message = str(error)
    assert message.startswith("leakage guard: 3 split(s) exceed the limit (at most 0 leaked")
    assert "test: 3 of 17 images leak (17.65%)" in message
    assert "val: 1 of 11 images leak (9.09%)" in message
    assert "Leaked groups" in message  # the report's worst groups follow the summary


def test_limits_by_count_and_fraction(demo: DemoDataset) -> None:
    report = assert_no_leakage(demo.splits, max_leaked=4, workers=1, on_error="ignore")
    assert report.n_leaked_images == 8
    assert assert_no_leakage(report, max_fraction=0.20) is report
    with pytest.raises(LeakageError, match=r"at most 10% of a split\): test: 3 of 17"):
        assert_no_leakage(report, max_fraction=0.10)
    with pytest.raises(LeakageError, match="at most 2 leaked image"):
        assert_no_leakage(report, max_leaked=2, max_fraction=0.5)  # either limit fails
    with pytest.raises(ValueError, match=r"max_fraction must be a number in \[0, 1\]"):
        assert_no_leakage(report, max_fraction=5)
    with pytest.raises(ValueError, match="max_leaked must be an int >= 0"):
        check_leakage(report, max_leaked=-1)


def test_root_folder_of_split_folders(demo: DemoDataset) -> None:
    with pytest.raises(LeakageError) as caught:
        assert_no_leakage(demo.root, workers=1, on_error="ignore")
    # The CLI's finder: the usual split names, in the order train, val, test.
    assert list(caught.value.report.images_by_split.index) == ["train", "val", "test"]
    with pytest.raises(ValueError, match="no split folders under"):
        assert_no_leakage(demo.root / "train" / "cat")


def test_clean_splits_pass(demo: DemoDataset) -> None:
    train = demo.splits["train"]
    report = assert_no_leakage({"cats": train / "cat", "dogs": train / "dog"}, workers=1)
    assert not report.has_leakage
    # One split alone compares nothing: no pass (issue 37, point 3).
    with pytest.raises(ValueError, match=r"fewer than two splits have images.*train \(42"):
        assert_no_leakage({"train": train}, workers=1)


def test_leaked_counts_are_exact() -> None:
    table = pd.DataFrame(
        {"split": ["train", "test", "test", "val", None], "group_id": [0, 0, 1, 2, 0]}
    )
    counts = leaked_counts(dhash_audit(table))
    assert counts["leaked"].to_dict() == {"train": 1, "test": 1, "val": 0}
    assert counts.loc["test", "fraction"] == 0.5


def test_torchvision_datasets(demo: DemoDataset) -> None:
    pytest.importorskip("torchvision")
    from torchvision.datasets import ImageFolder

    splits = {name: ImageFolder(str(path)) for name, path in demo.splits.items()}
    with pytest.raises(LeakageError) as caught:
        assert_no_leakage(splits, max_fraction=0.05, workers=1, on_error="ignore")
    assert caught.value.report.n_leaked_groups == 4
    assert "index" in caught.value.report.table.columns  # came through the adapter


def test_huggingface_dataset_dict(demo: DemoDataset) -> None:
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"image": datasets.Image()})
    dd = datasets.DatasetDict(
        {
            name: datasets.Dataset.from_dict(
                {"image": sorted(str(p) for p in path.rglob("*.jpg") if "corrupt" not in p.name)},
                features=features,
            )
            for name, path in demo.splits.items()
        }
    )
    with pytest.raises(LeakageError) as caught:
        assert_no_leakage(dd, progress=False)
    assert caught.value.report.n_leaked_groups == 3  # the planted PNG thumbnail is not listed


def test_mixed_or_unknown_inputs_are_rejected(demo: DemoDataset) -> None:
    with pytest.raises(TypeError, match="same kind of data"):
        assert_no_leakage({"train": demo.splits["train"], "test": 3})
    with pytest.raises(TypeError, match="got 42"):
        assert_no_leakage(42)
    with pytest.raises(TypeError, match="already computed"):
        assert_no_leakage(dhash_audit(pd.DataFrame({"split": ["a"], "group_id": [0]})), workers=1)


def test_importing_the_adapters_imports_no_framework() -> None:
    code = (
        "import sys, leakaudit.adapters, leakaudit.adapters.guard, "
        "leakaudit.adapters.torchvision, leakaudit.adapters.huggingface; "
        "print(sorted(m for m in ('torch', 'torchvision', 'datasets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_guard_and_cli_audit_the_same_splits(tmp_path: pathlib.Path) -> None:
    """One finder: a stray folder (``notes/``) is a split for neither."""
    from leakaudit.cli import main
    from leakaudit.listing import find_split_folders

    demo = build_demo_dataset(tmp_path / "d")
    (demo.root / "notes").mkdir()
    (demo.root / "notes" / "copy.jpg").write_bytes(
        (demo.root / "train/cat/train_000.jpg").read_bytes()
    )
    report = assert_no_leakage(demo.root, workers=1, on_error="ignore", max_leaked=10_000)
    assert list(report.images_by_split.index) == ["train", "val", "test"]
    assert list(find_split_folders(demo.root)) == ["train", "val", "test"]
    json_path = tmp_path / "r.json"
    assert main(["scan", str(demo.root), "--quiet", "--json", str(json_path)]) == 0
    import json

    splits = [row["split"] for row in json.loads(json_path.read_text())["splits"]]
    assert splits == ["train", "val", "test"]


def test_fail_on_leak_and_max_leaked_mean_the_same(tmp_path: pathlib.Path) -> None:
    """Both limits are per split: the demo leaks 4 of 42 train, 1 of 11 val, 3 of 17 test."""
    from leakaudit.cli import main

    demo = build_demo_dataset(tmp_path / "d")
    base = ["scan", str(demo.root), "--quiet", "--workers", "1", "--fail-on-leak"]
    for limit, fails in ((3, True), (4, False), (5, False)):
        assert main([*base, str(limit)]) == (1 if fails else 0)
        if fails:
            with pytest.raises(LeakageError):
                assert_no_leakage(demo.root, max_leaked=limit, workers=1, on_error="ignore")
        else:
            assert_no_leakage(demo.root, max_leaked=limit, workers=1, on_error="ignore")
    for percent, fails in ((15.0, True), (20.0, False)):
        assert main([*base, f"{percent}%"]) == (1 if fails else 0)
        try:
            assert_no_leakage(demo.root, max_fraction=percent / 100, workers=1, on_error="ignore")
            raised = False
        except LeakageError:
            raised = True
        assert raised == fails
