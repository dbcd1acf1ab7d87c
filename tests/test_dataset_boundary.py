"""Issue 35, points 1-4: the dataset's edges, as the links that are followed draw them.

ROOT, every split folder and every folder a followed link leads to (at any depth)
are resolved first; no output may be, contain or lie inside any of them. Links are
followed as torchvision's ``ImageFolder`` follows them (``os.walk(followlinks=True)``),
with loops named in a warning. Each reproduction checks ROOT and every followed
link target (bytes, inodes, modes, mtimes) before and after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import imagegen
import pandas as pd
import pytest
from test_clean_safety import _snapshot, assert_unchanged

import leakaudit
from leakaudit.cleantree import _MARKER, _MARKER_TEXT, MANIFEST_NAME, remove_stale_partials
from leakaudit.cli import main
from leakaudit.listing import FolderScanWarning, find_split_folders

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links")


# ---------------------------------------------------------------- 3. glob characters in --out


def test_stale_partials_of_a_glob_like_out_leave_other_runs_alone(tmp_path: Path) -> None:
    """``--out 'o[12]'`` deleted a live run's ``.o1.leakaudit-partial-<pid>-...`` folder."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pid = live.pid
        others = []
        for name in (f".o1.leakaudit-partial-{pid}-abc", f".o2.leakaudit-old-{pid}-abc",
                     f".o[12].leakaudit-partial-{pid}x-abc"):  # fmt: skip
            folder = tmp_path / name
            (folder / "tree").mkdir(parents=True)
            (folder / _MARKER).write_bytes(_MARKER_TEXT)
            (folder / "tree" / "work.jpg").write_bytes(b"in progress")
            others.append(folder)
        # A real leftover of this very --out, its process ended: removed.
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        stale = tmp_path / f".o[12].leakaudit-partial-{int(dead.stdout)}-xyz"
        (stale / "tree").mkdir(parents=True)
        (stale / _MARKER).write_bytes(_MARKER_TEXT)
        assert remove_stale_partials(tmp_path / "o[12]") == [stale]
        assert not stale.exists()
        for folder in others:
            assert (folder / "tree" / "work.jpg").read_bytes() == b"in progress", folder.name
    finally:
        live.kill()
        live.wait()


# ---------------------------------------------------------------- helpers


def _image(path: Path, seed: int, quality: int = 90) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(imagegen.encode(imagegen.photo_like(seed), "JPEG", quality=quality))


def _run(*argv: str) -> int:
    return main([*argv, "--quiet", "--workers", "1"])


def _clean(root: Path, out: Path, *options: str) -> int:
    return _run("clean", str(root), "--out", str(out), "--no-cache", *options)


def _dataset(top: Path) -> None:
    """train/{a,b} and test/{a,b}: distinct pictures, one re-encoded leak (test/a/t0)."""
    for i in range(4):
        _image(top / "train" / ("a" if i < 2 else "b") / f"r{i}.jpg", i)
        _image(top / "test" / ("a" if i < 2 else "b") / f"t{i}.jpg", 100 + i)
    _image(top / "test" / "a" / "t0.jpg", 0, quality=60)


def _manifest(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False)


def _classes(folder: Path) -> set[str]:
    return {entry.name for entry in os.scandir(folder) if entry.is_dir()}


# ---------------------------------------------------------------- 1. data loss through --force


def test_force_never_replaces_an_output_that_a_followed_split_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``clean root2 --out out --force`` deleted out/test/cat/unique_reencode.jpg (exit 0)."""
    monkeypatch.chdir(tmp_path)
    _dataset(Path("src"))
    assert _clean(Path("src"), Path("out"), "--copy") == 0
    shutil.rmtree("src")
    Path("root2").mkdir()
    shutil.copytree("out/train", "root2/train")
    Path("root2/test").symlink_to("../out/test")
    _image(Path("out/test/a/unique_reencode.jpg"), 77)  # only here, on disk once
    before_root, before_out = _snapshot(Path("root2")), _snapshot(Path("out"))
    capsys.readouterr()
    assert _clean(Path("root2"), Path("out"), "--force", "--policy", "drop") == 2
    error = capsys.readouterr().err
    assert "--out" in error and str((tmp_path / "out" / "test").resolve()) in error
    assert Path("out/test/a/unique_reencode.jpg").is_file()
    assert_unchanged(before_root, Path("root2"))
    assert_unchanged(before_out, Path("out"))


def test_an_empty_followed_split_is_no_place_for_the_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``clean root --out emptytest`` succeeded and ROOT/test then held the whole output."""
    root = tmp_path / "root"
    _dataset(root)
    shutil.rmtree(root / "test")
    (tmp_path / "emptytest").mkdir()
    (root / "test").symlink_to("../emptytest")
    before = _snapshot(root)
    assert _clean(root, tmp_path / "emptytest") == 2
    assert "--out" in capsys.readouterr().err
    assert list((tmp_path / "emptytest").iterdir()) == []
    assert_unchanged(before, root)
    # A folder holding the followed split's target is refused too, --force or not.
    assert _clean(root, tmp_path, "--force") == 2
    assert_unchanged(before, root)


# ---------------------------------------------------------------- 2. writes through a followed link


@pytest.fixture()
def linked(tmp_path: Path) -> dict[str, Path]:
    """d/test -> ../ext_test; d/train/x -> ../../ext_class (a class folder link);
    d/train/a/f.jpg -> ../../../ext_file.jpg (an image link): each leads outside d."""
    top = tmp_path / "d"
    _dataset(top)
    (top / "test").rename(tmp_path / "ext_test")
    (top / "test").symlink_to("../ext_test")
    _image(tmp_path / "ext_class" / "e.jpg", 300)
    (top / "train" / "x").symlink_to("../../ext_class")
    _image(tmp_path / "ext_file.jpg", 301)
    (top / "train" / "a" / "f.jpg").symlink_to("../../../ext_file.jpg")
    return {
        "d": top,
        "ext_test": tmp_path / "ext_test",
        "ext_class": tmp_path / "ext_class",
        "ext_file": tmp_path / "ext_file.jpg",
    }


@pytest.mark.parametrize(
    ("option", "inside"),
    [
        ("--show", "ext_test/show"),
        ("--csv", "ext_test/x.csv"),
        ("--json", "ext_test/deeper/../x.json"),
        ("--html", "ext_class/x.html"),
        ("--cache-dir", "ext_test/.c"),
        ("--csv", "ext_file.jpg"),
        ("--show", "."),  # holds every followed target
    ],
)
@pytest.mark.parametrize("command", ["scan", "clean"])
def test_no_output_lands_where_a_followed_link_leads(
    linked: dict[str, Path],
    tmp_path: Path,
    command: str,
    option: str,
    inside: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "ext_test" / "deeper").mkdir()
    before = {name: _snapshot(path) for name, path in linked.items()}
    argv = [command, str(linked["d"]), option, str(tmp_path / inside)]
    if command == "clean":
        argv += ["--out", str(tmp_path / "new")]
    if option != "--cache-dir":
        argv.append("--no-cache")
    assert _run(*argv) == 2
    error = capsys.readouterr().err
    assert option in error and "must be outside the dataset" in error
    assert not (tmp_path / "new").exists()
    for name, path in linked.items():
        assert_unchanged(before[name], path)


@pytest.mark.parametrize("out", ["ext_test/new", "ext_class/new", "ext_test"])
def test_clean_out_where_a_followed_link_leads_is_refused(
    linked: dict[str, Path], tmp_path: Path, out: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {name: _snapshot(path) for name, path in linked.items()}
    assert _clean(linked["d"], tmp_path / out, "--force") == 2
    error = capsys.readouterr().err
    assert "--out" in error and ("where the link" in error or "(a link)" in error)
    for name, path in linked.items():
        assert_unchanged(before[name], path)


def test_default_cache_where_a_followed_link_leads_is_refused(
    linked: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("LEAKAUDIT_CACHE_DIR", str(tmp_path / "ext_class" / "cache"))
    before = _snapshot(linked["ext_class"])
    assert _run("scan", str(linked["d"])) == 2
    assert "LEAKAUDIT_CACHE_DIR" in capsys.readouterr().err
    assert_unchanged(before, linked["ext_class"])


def test_clean_reads_through_the_links_and_writes_a_tree_of_its_own(
    linked: dict[str, Path], tmp_path: Path
) -> None:
    before = {name: _snapshot(path) for name, path in linked.items()}
    new = tmp_path / "new"
    assert _clean(linked["d"], new) == 0
    for name, path in linked.items():
        assert_unchanged(before[name], path, new)
    # Followed folders and the followed image are real entries of NEW_ROOT.
    for relative in ("test", "train/x"):
        assert (new / relative).is_dir() and not (new / relative).is_symlink()
    assert (new / "train/x/e.jpg").read_bytes() == (linked["ext_class"] / "e.jpg").read_bytes()
    image = new / "train/a/f.jpg"
    assert not image.is_symlink() and image.read_bytes() == linked["ext_file"].read_bytes()
    manifest = _manifest(new / MANIFEST_NAME).set_index("old_path")
    assert manifest.loc["train/x", "action"] == "followed"
    assert manifest.loc["train/a/f.jpg", "action"] == "kept"
    assert "written as a regular file" in manifest.loc["train/a/f.jpg", "reason"]


# ---------------------------------------------------------------- 4. class-folder links


@pytest.fixture()
def class_links(tmp_path: Path) -> dict[str, Path]:
    """The issue's tree: r/test/c_inside -> ../train/a (byte copies of train),
    r/test/c_outside -> a class folder outside r (new pictures)."""
    top = tmp_path / "r"
    for i in range(4):
        _image(top / "train" / "a" / f"r{i}.jpg", i)
        _image(top / "train" / "b" / f"r{i}.jpg", 10 + i)
        _image(top / "test" / ("a" if i < 2 else "b") / f"t{i}.jpg", 100 + i)
        _image(tmp_path / "outside" / f"o{i}.jpg", 200 + i)
    (top / "test" / "c_inside").symlink_to("../train/a")
    (top / "test" / "c_outside").symlink_to("../../outside")
    return {"r": top, "outside": tmp_path / "outside"}


def _imagefolder_view(folder: Path) -> list[str]:
    """The files torchvision's ImageFolder lists: os.walk(followlinks=True)."""
    return sorted(
        os.path.join(directory, name)
        for directory, _, files in os.walk(folder, followlinks=True)
        for name in files
    )


def test_scan_sees_what_imagefolder_sees_through_class_links(
    class_links: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``ln -s ../train/a r/test/c_inside``: scan said "No leakage", with no warning."""
    top = class_links["r"]
    before = {name: _snapshot(path) for name, path in class_links.items()}
    report = leakaudit.audit_splits(find_split_folders(top), workers=1, cache=False)
    assert report.table is not None
    listed = report.table.groupby("split")["path"].apply(sorted).to_dict()
    assert listed["test"] == _imagefolder_view(top / "test")
    assert listed["train"] == _imagefolder_view(top / "train")
    table = report.table
    spanning = table.groupby("group_id")["split"].nunique()
    leaked = table[table["group_id"].isin(spanning[spanning > 1].index)]
    test_paths = leaked[leaked["split"] == "test"]["path"]
    leaked_test = {Path(p).relative_to(top).as_posix() for p in test_paths}
    assert leaked_test == {f"test/c_inside/r{i}.jpg" for i in range(4)}
    assert _run("scan", str(top), "--no-cache", "--fail-on-leak") == 1
    assert "4 of 12 images leak" in capsys.readouterr().err
    for name, path in class_links.items():
        assert_unchanged(before[name], path)


@pytest.mark.parametrize("policy", ["move", "drop"])
def test_clean_keeps_every_class_folder_and_removes_the_leak(
    class_links: dict[str, Path], tmp_path: Path, policy: str
) -> None:
    """A class link leaving ROOT was dropped: test's classes became {a, b, c_inside}."""
    top, new = class_links["r"], tmp_path / "new"
    before = {name: _snapshot(path) for name, path in class_links.items()}
    assert _clean(top, new, "--policy", policy) == 0
    for name, path in class_links.items():
        assert_unchanged(before[name], path, new)
    assert _classes(new / "test") == {"a", "b", "c_inside", "c_outside"} == _classes(top / "test")
    for name in ("c_inside", "c_outside"):
        assert not (new / "test" / name).is_symlink()
    outside = sorted(p.name for p in (new / "test" / "c_outside").iterdir())
    assert outside == [f"o{i}.jpg" for i in range(4)]
    assert list((new / "test" / "c_inside").iterdir()) == []  # the leak left test
    manifest = _manifest(new / MANIFEST_NAME).set_index("old_path")
    assert manifest.loc["test/c_outside", "action"] == "followed"
    assert manifest.loc["test/c_inside", "action"] == "followed"
    assert _run("scan", str(new), "--no-cache", "--fail-on-leak") == 0


def test_a_link_loop_is_named_and_ends(
    class_links: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    top = class_links["r"]
    (top / "test" / "a" / "up").symlink_to("..")  # r/test/a/up -> r/test
    (class_links["outside"] / "back").symlink_to(top)  # through c_outside back to r
    before = _snapshot(top)
    with pytest.warns(FolderScanWarning, match="loop") as record:
        leakaudit.audit_splits(find_split_folders(top), workers=1, cache=False)
    message = " ".join(str(w.message) for w in record)
    assert str(top / "test" / "a" / "up") in message
    assert str(top / "test" / "c_outside" / "back") in message
    new = tmp_path / "new"
    assert _clean(top, new) == 0
    assert "loop" in capsys.readouterr().err
    assert_unchanged(before, top, new)
    assert (new / "test" / "a" / "up").is_symlink()  # recreated as it was, not walked
