"""Issue 37, point 4: ``clean`` kept unreadable files in the clean copy, so a DataLoader over
it failed (``OSError: Truncated File Read``). ``--unreadable drop|copy|fail`` (default drop)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import imagegen
import pandas as pd
import pytest
from PIL import Image

from leakaudit.cleantree import MANIFEST_NAME, plan_tree, walk_tree
from leakaudit.cli import main

BROKEN = "test/dog/broken.jpg"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """train/ and test/ with a planted leak and one truncated JPEG in test/dog."""
    top = tmp_path / "root"
    for split, seeds in {"train": (0, 1, 2), "test": (3, 4)}.items():
        for seed in seeds:
            path = top / split / "dog" / f"{seed}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            imagegen.photo_like(seed, (64, 48)).save(path)
    imagegen.photo_like(1, (64, 48)).save(top / "test" / "dog" / "copy.jpg", quality=90)
    jpeg = imagegen.encode(imagegen.photo_like(9, (64, 48)), "JPEG", quality=90)
    (top / BROKEN).write_bytes(imagegen.truncated(jpeg))
    return top


def _clean(root: Path, out: Path, *options: str) -> int:
    return main(["clean", str(root), "--out", str(out), "--workers", "1", "--no-cache", *options])


def _manifest(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / MANIFEST_NAME, keep_default_na=False).set_index("old_path")


def _decode_every_image(folder: Path) -> list[Path]:
    """What a DataLoader over the copy does: decode each image in full."""
    images = sorted(p for p in folder.rglob("*") if p.suffix in (".png", ".jpg"))
    for path in images:
        with Image.open(path) as image:
            image.load()
    return images


def test_the_default_leaves_unreadable_images_out(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (root / BROKEN).read_bytes()
    out = tmp_path / "out"
    assert _clean(root, out) == 0
    assert not (out / BROKEN).exists()
    assert len(_decode_every_image(out)) == 6  # every image of ROOT but the broken one
    assert (root / BROKEN).read_bytes() == before  # never deleted from ROOT
    row = _manifest(out).loc[BROKEN]
    assert (row["action"], row["new_path"]) == ("unreadable", "")
    assert "--unreadable drop" in row["reason"] and row["reason"].startswith("unreadable image")
    stdout = capsys.readouterr().out
    assert "1 unreadable image(s) left out" in stdout
    assert "Unreadable images: 1, left out of the copy (--unreadable drop; ROOT keeps" in stdout
    assert BROKEN in stdout


def test_copy_keeps_todays_behaviour_and_says_so(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _clean(root, out, "--unreadable", "copy") == 0
    assert (out / BROKEN).read_bytes() == (root / BROKEN).read_bytes()
    with pytest.raises(OSError):
        _decode_every_image(out)
    row = _manifest(out).loc[BROKEN]
    assert row["action"] == "kept" and "--unreadable copy" in row["reason"]
    assert "copied as they are (--unreadable copy)" in capsys.readouterr().out


def test_fail_writes_nothing_and_names_the_file(root: Path, tmp_path: Path) -> None:
    exe = shutil.which("leakaudit", path=str(Path(sys.executable).parent))
    assert exe is not None
    out = tmp_path / "out"
    result = subprocess.run(
        [exe, "clean", str(root), "--out", str(out), "--workers", "1", "--no-cache",
         "--unreadable", "fail"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "--unreadable fail: 1 image(s) under ROOT cannot be decoded" in result.stderr
    assert BROKEN in result.stderr
    assert not out.exists() and not list(tmp_path.glob(".leakaudit-partial-*"))


def test_a_clean_tree_says_the_choice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    top = tmp_path / "root"
    for split, seed in (("train", 0), ("test", 1)):
        (top / split).mkdir(parents=True)
        imagegen.photo_like(seed, (64, 48)).save(top / split / "a.png")
    assert _clean(top, tmp_path / "out", "--unreadable", "fail") == 0
    assert "Unreadable images: none (--unreadable fail)." in capsys.readouterr().out


def test_plan_tree_takes_the_choice(root: Path) -> None:
    cleaned = pd.DataFrame(
        {
            "path": [str(root / "train/dog/0.png"), str(root / BROKEN)],
            "split": ["train", "test"],
            "original_split": ["train", "test"],
            "reassigned": [False, False],
            "group_id": [0, 1],
            "error": [None, "truncated image"],
        }
    )
    walked = walk_tree(root, follow=["train", "test"])
    folders = {"train": "train", "test": "test"}
    actions = {e.old_path: e.action for e in plan_tree(root, walked, cleaned, folders)}
    assert actions[BROKEN] == "unreadable"
    copied = plan_tree(root, walked, cleaned, folders, unreadable="copy")
    assert {e.old_path: e.action for e in copied}[BROKEN] == "kept"
    with pytest.raises(ValueError, match=r"1 image\(s\) under ROOT cannot be decoded.*broken"):
        plan_tree(root, walked, cleaned, folders, unreadable="fail")
    with pytest.raises(ValueError, match="unreadable must be one of drop, copy, fail; got 'x'"):
        plan_tree(root, walked, cleaned, folders, unreadable="x")
