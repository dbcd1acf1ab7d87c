"""An empty split stays in the report (issue 23, point 13).

A split folder with no images used to vanish from the report, the splits table and the
JSON without a word, so a test split emptied by mistake passed ``--fail-on-leak``.
"""

from __future__ import annotations

import json
from pathlib import Path

import imagegen
import pytest

from leakaudit import EmptySplitWarning, audit_splits
from leakaudit.cli import main
from leakaudit.export import csv_paths, report_dict, split_table


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """train and val with one planted copy between them; test is an empty folder."""
    top = tmp_path / "data"
    for split in ("train", "val", "test"):
        (top / split).mkdir(parents=True)
    for seed in (1, 2, 3):
        image = imagegen.photo_like(seed, (160, 120))
        (top / "train" / f"p{seed}.png").write_bytes(imagegen.encode(image, "PNG"))
    copy = imagegen.encode(imagegen.photo_like(1, (160, 120)), "PNG")
    (top / "val" / "copy.png").write_bytes(copy)
    return top


def test_an_empty_split_keeps_its_row_and_is_named(root: Path) -> None:
    splits = {name: root / name for name in ("train", "val", "test")}
    with pytest.warns(EmptySplitWarning) as caught:
        report = audit_splits(splits, workers=1, cache=False)
    [warning] = [w for w in caught if issubclass(w.category, EmptySplitWarning)]
    assert "split 'test'" in str(warning.message)
    assert str(root / "test") in str(warning.message)
    assert report.images_by_split.to_dict() == {"train": 3, "val": 1, "test": 0}
    assert report.leak_counts.loc["test"].tolist() == [0, 0, 0.0]
    table = split_table(report)
    assert table["split"].tolist() == ["train", "val", "test"]
    assert table.iloc[2][["n_images", "n_leaked", "pct_leaked"]].tolist() == [0, 0, 0.0]
    document = report_dict(report)
    assert document["images_by_split"]["test"] == 0
    assert [row["split"] for row in document["splits"]] == ["train", "val", "test"]
    assert ["test", "0", "0", "0.00"] in [line.split() for line in report.to_text().splitlines()]
    # An empty list of paths is an empty split too.
    with pytest.warns(EmptySplitWarning, match="'extra' has no images to audit \\(an empty list"):
        listed = audit_splits({"train": root / "train", "extra": []}, workers=1, cache=False)
    assert listed.images_by_split.to_dict() == {"train": 3, "extra": 0}


def test_cli_reports_the_empty_split(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_file, report_json = tmp_path / "t.csv", tmp_path / "r.json"
    argv = ["scan", str(root), "--workers", "1", "--no-cache", "--fail-on-leak"]
    code = main([*argv, "--csv", str(csv_file), "--json", str(report_json)])
    assert code == 1  # train and val leak
    captured = capsys.readouterr()
    assert f"split 'test' has no images to audit (folder {root / 'test'})" in captured.err
    lines = captured.out.splitlines()
    assert any(line.split() == ["test", "0", "0", "0.00"] for line in lines)
    splits = csv_paths(csv_file)["splits"].read_text().splitlines()
    assert splits[-1].startswith("test,0,0,0.0,")
    assert json.loads(report_json.read_text())["images_by_split"] == {
        "train": 3,
        "val": 1,
        "test": 0,
    }
