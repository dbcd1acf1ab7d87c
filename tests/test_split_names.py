"""Issue 37, point 3: a misspelt split folder (``trian/``) or a tree without images passed
``--fail-on-leak`` with "No leakage"; the warning named no folder and suggested a
``--split NAME=FOLDER`` that failed."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import imagegen
import pytest

from leakaudit.adapters.guard import assert_no_leakage, check_leakage
from leakaudit.audit import audit_splits
from leakaudit.cli import main
from leakaudit.listing import find_split_folders

COMMON = ["--workers", "1", "--no-cache"]


@pytest.fixture
def misspelt(tmp_path: Path) -> Path:
    """``trian/`` (meant ``train``) and ``test/``, one image of train copied into test."""
    root = tmp_path / "data"
    for folder in ("trian", "test", "notes"):
        (root / folder).mkdir(parents=True)
    for seed in range(3):
        imagegen.photo_like(seed, (64, 48)).save(root / "trian" / f"{seed}.png")
    imagegen.photo_like(7, (64, 48)).save(root / "test" / "own.png")
    imagegen.photo_like(1, (64, 48)).save(root / "test" / "copy.jpg", quality=90)
    return root


def test_fail_on_leak_refuses_a_misspelt_split_and_names_it(
    misspelt: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scan", str(misspelt), *COMMON, "--fail-on-leak"]) == 2
    err = capsys.readouterr().err
    line = next(line for line in err.splitlines() if "error:" in line)
    assert "--fail-on-leak needs two splits" in line
    assert f"test ({misspelt / 'test'})" in line  # the split found
    assert "notes/, trian/" in line  # every other folder
    assert "trian/ looks like a misspelt 'train'" in line and "--split train=trian" in line


def test_the_suggested_split_option_works(
    misspelt: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --fail-on-leak the run passes as before, and the warning's option finds the leak."""
    assert main(["scan", str(misspelt), *COMMON]) == 0
    err = capsys.readouterr().err
    assert "only one split folder (test)" in err
    suggested = re.search(r"name it with (--split \S+)\.", err)
    assert suggested is not None, err
    option = shlex.split(suggested.group(1))
    assert option == ["--split", "train=trian"]
    assert main(["scan", str(misspelt), *COMMON, *option, "--fail-on-leak"]) == 1
    out = capsys.readouterr().out
    assert "LEAKAGE" in out
    assert [line.split()[:3] for line in out.splitlines() if line.startswith("train ")] == [
        ["train", "3", "1"]
    ]


def test_a_tree_without_images_fails_with_fail_on_leak(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for split in ("train", "test"):
        (tmp_path / split).mkdir()
    assert main(["scan", str(tmp_path), *COMMON]) == 0  # today's behaviour, with a warning
    assert "fewer than two splits have images" in capsys.readouterr().err
    assert main(["scan", str(tmp_path), *COMMON, "--fail-on-leak"]) == 2
    err = capsys.readouterr().err
    assert (
        "error: --fail-on-leak: fewer than two splits have images, so nothing can leak across "
        f"splits: train (0 images, folder {tmp_path / 'train'}), test (0 images, folder "
        f"{tmp_path / 'test'})."
    ) in err


def test_one_split_with_images_fails_clean_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    for split in ("train", "test"):
        (root / split).mkdir(parents=True)
    imagegen.photo_like(0, (64, 48)).save(root / "train" / "a.png")
    out = tmp_path / "out"
    assert main(["clean", str(root), "--out", str(out), *COMMON, "--fail-on-leak"]) == 2
    assert "test (0 images" in capsys.readouterr().err
    assert not out.exists()
    assert main(["clean", str(root), "--out", str(out), *COMMON]) == 0
    assert (out / "train" / "a.png").exists()


def test_misspelt_split_exits_2_as_a_subprocess(misspelt: Path) -> None:
    exe = shutil.which("leakaudit", path=str(Path(sys.executable).parent))
    assert exe is not None
    result = subprocess.run(
        [exe, "scan", str(misspelt), *COMMON, "--fail-on-leak"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "--split train=trian" in result.stderr
    assert "No leakage" not in result.stdout


def test_the_guard_refuses_an_audit_that_compared_nothing(misspelt: Path) -> None:
    with pytest.raises(ValueError, match=r"leakage guard: fewer than two splits.*--split train="):
        assert_no_leakage(misspelt, workers=1, cache=False)
    report = audit_splits({"test": misspelt / "test"}, workers=1, cache=False)
    with pytest.raises(ValueError, match=r"test \(2 images\)"):
        check_leakage(report)


def test_named_split_folders(misspelt: Path) -> None:
    assert find_split_folders(misspelt, ["train=trian"]) == {
        "train": misspelt / "trian",
        "test": misspelt / "test",
    }
    (misspelt / "train").mkdir()
    with pytest.raises(ValueError, match=r"train/ under .* is already the split 'train'"):
        find_split_folders(misspelt, ["train=trian"])
    with pytest.raises(ValueError, match="no folder nope under"):
        find_split_folders(misspelt, ["holdout=nope"])
    with pytest.raises(ValueError, match="must be NAME or NAME=FOLDER"):
        find_split_folders(misspelt, ["up=../data"])


def test_no_split_folder_names_the_likely_ones(tmp_path: Path) -> None:
    for folder in ("trian", "tset", "images"):
        (tmp_path / folder).mkdir()
    with pytest.raises(ValueError) as caught:
        find_split_folders(tmp_path)
    message = str(caught.value)
    assert "--split train=trian" in message and "--split test=tset" in message
    assert "images/" in message and "'images'" not in message
