"""Tests of the folder listing the audits start with (``list_image_paths``)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from leakaudit.listing import (
    IMAGE_EXTENSIONS,
    FolderScanWarning,
    list_image_files,
    list_image_paths,
)

NAMES = ["a", "a b", "a.png", "A", "b-c", "b", "b.d", "\u00e4", "z", ".h", "x.JPG", "y.jpeg"]
NAMES += ["q.txt", "a!", "noext", "..png", "a..png", "tif.tif", "0.webp"]


def reference_listing(root: Path, recursive: bool = True) -> list[str]:
    """The specification: every non-hidden image file under non-hidden folders, in Path order."""
    found: list[Path] = []
    for directory, folders, files in os.walk(root):
        folders[:] = [d for d in folders if not d.startswith(".")] if recursive else []
        for name in files:
            if not name.startswith(".") and os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS:
                found.append(Path(directory, name))
    return [str(p) for p in sorted(found)]


def random_tree(root: Path, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        path = root.joinpath(*(rng.choice(NAMES) for _ in range(rng.randint(1, 4))))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                path.write_bytes(b"x")
        except (FileExistsError, NotADirectoryError):
            pass  # a file already stands where a folder is wanted (or the reverse)


@pytest.mark.parametrize("seed", range(8))
def test_listing_is_path_order_of_non_hidden_images(tmp_path: Path, seed: int) -> None:
    random_tree(tmp_path, seed)
    for recursive in (True, False):
        expected = reference_listing(tmp_path, recursive)
        assert list_image_paths(tmp_path, recursive=recursive) == expected
        assert list_image_files(tmp_path, recursive=recursive) == [Path(p) for p in expected]


def test_names_as_given_and_a_folder_before_a_file_it_prefixes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a/x.png", "a b/x.png", "a.png", "a/b/c.png", "a-b.png"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    # Path order compares part by part: "a" < "a b" < "a-b.png" < "a.png".
    assert list_image_paths("./") == [
        "./a/b/c.png",
        "./a/x.png",
        "./a b/x.png",
        "./a-b.png",
        "./a.png",
    ]
    assert list_image_paths("a") == ["a/b/c.png", "a/x.png"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links")
def test_links_are_followed_as_imagefolder_follows_them_and_loops_are_named(
    tmp_path: Path,
) -> None:
    """Issue 35.4: folder links were skipped silently; ImageFolder follows them."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "x.png").write_bytes(b"x")
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    outside.mkdir()
    (outside / "o.png").write_bytes(b"o")
    try:
        os.symlink(tmp_path / "real", tmp_path / "loop.png")  # a folder named like an image
        os.symlink(tmp_path, tmp_path / "real" / "up")  # a loop
        os.symlink(tmp_path / "real" / "x.png", tmp_path / "y.png")
        os.symlink(tmp_path / "missing.png", tmp_path / "z.png")  # dangling
        os.symlink(outside, tmp_path / "away")  # a folder link leaving the folder
        os.symlink(outside / "o.png", tmp_path / "w.png")  # an image link leaving it
    except OSError:
        pytest.skip("cannot create symbolic links here")
    with pytest.warns(FolderScanWarning, match="2 folder link") as record:
        listed = list_image_paths(tmp_path)
    assert listed == [
        str(tmp_path / "away" / "o.png"),
        str(tmp_path / "loop.png" / "x.png"),
        str(tmp_path / "real" / "x.png"),
        str(tmp_path / "w.png"),
        str(tmp_path / "y.png"),
        str(tmp_path / "z.png"),
    ]
    # The view torchvision's ImageFolder has (os.walk(followlinks=True)), loops aside.
    seen = []
    for folder, folders, files in os.walk(tmp_path, followlinks=True):
        folders[:] = [name for name in folders if name != "up"]  # ImageFolder would loop
        seen += [os.path.join(folder, name) for name in files]
    assert sorted(seen) == sorted(listed)
    message = str(record[0].message)
    assert f"{tmp_path / 'real' / 'up'} -> {tmp_path}" in message
    assert f"{tmp_path / 'loop.png' / 'up'} -> {tmp_path}" in message


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links")
def test_a_cycle_through_two_links_ends(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path.parent / (tmp_path.name + "-b")
    a.mkdir()
    b.mkdir()
    (a / "1.png").write_bytes(b"1")
    (b / "2.png").write_bytes(b"2")
    (a / "to_b").symlink_to(b)
    (b / "to_a").symlink_to(a)
    with pytest.warns(FolderScanWarning, match="1 folder link"):
        assert list_image_paths(a) == [str(a / "1.png"), str(a / "to_b" / "2.png")]


def test_a_link_that_leads_nowhere_is_named_never_skipped_silently(tmp_path: Path) -> None:
    # A class folder linked with a wrong relative target (``ln -s ../../train/a test/c``):
    # ImageFolder skips it without a word; the audit names it.
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "b.png").write_bytes(b"x")
    (tmp_path / "test" / "c_inside").symlink_to("../../nowhere/a")
    with pytest.warns(FolderScanWarning, match="lead nowhere") as record:
        assert list_image_paths(tmp_path / "test") == [str(tmp_path / "test" / "b.png")]
    assert len(record) == 1
    assert "c_inside -> ../../nowhere/a" in str(record[0].message)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can list any folder"
)
def test_a_folder_that_cannot_be_listed_is_named_in_one_warning(tmp_path: Path) -> None:
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "a.png").write_bytes(b"x")
    for name in ("locked1", "locked2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "b.png").write_bytes(b"x")
        (tmp_path / name).chmod(0)
    try:
        with pytest.warns(FolderScanWarning, match="2 folder") as record:
            assert list_image_paths(tmp_path) == [str(tmp_path / "ok" / "a.png")]
        assert len(record) == 1
    finally:
        for name in ("locked1", "locked2"):
            (tmp_path / name).chmod(0o700)


def test_missing_root_and_file_root_raise(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="folder not found"):
        list_image_paths(tmp_path / "nope")
    (tmp_path / "file.png").write_bytes(b"x")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        list_image_paths(tmp_path / "file.png")


def test_repeated_paths_are_one_file_however_spelt(tmp_path: Path) -> None:
    import warnings

    from leakaudit.listing import RepeatedPathWarning, drop_repeated_paths

    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "d")
    top = str(tmp_path)
    spellings = [f"{top}/d/a.jpg", f"{top}/./d/a.jpg", f"{top}//d//a.jpg", f"{top}/link/a.jpg"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept, labels = drop_repeated_paths([*spellings, f"{top}/d/b.jpg"], list("abcde"))
    assert kept == [spellings[0], f"{top}/d/b.jpg"] and labels == ["a", "e"]
    assert [w.category for w in caught] == [RepeatedPathWarning]
    assert "3 file(s) were listed more than once" in str(caught[0].message)
