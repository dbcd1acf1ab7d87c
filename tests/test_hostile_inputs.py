"""Hostile input, end to end: every broken or odd file is a recorded failure or handled right.

The corpus is generated here (no committed binaries): a dataset tree whose train and
test splits hold, besides a few ordinary photos, every kind of file a real dataset
throws at an audit. Each test runs the whole audit (``audit_splits`` or the CLI) and
checks the outcome file by file, and that the rest of the run went on (the planted
leaks are still found).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import imagegen
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from leakaudit import UnreadableImageWarning, audit_splits, list_image_files
from leakaudit.cli import main
from leakaudit.loading import DecodeOptions

LINUX = sys.platform.startswith("linux")


def _corrupt_png(image: Image.Image) -> bytes:
    """A PNG whose compressed pixel data is overwritten in the middle (CRC and zlib broken)."""
    data = bytearray(imagegen.encode(image, "PNG"))
    start = data.index(b"IDAT") + 40
    data[start : start + 64] = bytes(range(64))
    return bytes(data)


def _sixteen_bit_png(seed: int) -> bytes:
    grey = np.asarray(imagegen.photo_like(seed, (120, 90), "L"), dtype=np.uint16) * 257
    image = Image.fromarray(grey)
    data = imagegen.encode(image, "PNG")
    assert Image.open(io.BytesIO(data)).mode.startswith("I")
    return data


def _palette_with_transparency(seed: int) -> bytes:
    image = imagegen.photo_like(seed, (120, 90)).convert("P", palette=Image.Palette.ADAPTIVE)
    data = imagegen.encode(image, "PNG", transparency=0)
    assert "transparency" in Image.open(io.BytesIO(data)).info
    return data


# Expected outcome per file name: a failure reason (prefix), or "ok".
HOSTILE: dict[str, str] = {
    "zero_bytes.jpg": "empty file (0 bytes)",
    "truncated.jpg": "truncated image",
    "text.png": "not a recognised image format",
    "corrupt.png": "",  # some decode error; its wording is Pillow's
    "bomb.png": "decompression bomb: declared 100000x100000",
    "sixteen_bit.png": "ok",
    "cmyk.jpg": "ok",
    "palette_transparent.png": "ok",
    "animated.gif": "ok",
    "photo.webp": "ok",
    "photo.tiff": "ok",
    "loop.jpg": "cannot read file",  # a symbolic link to itself
    "фото_日本_ñ.png": "ok",
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """train: photos 0-5 and the hostile files; test: copies of photos 0-2, and photos 10-12."""
    root = tmp_path_factory.mktemp("hostile")
    train, test = root / "train", root / "test"
    train.mkdir()
    test.mkdir()
    photos = {seed: imagegen.photo_like(seed, (160, 120)) for seed in (0, 1, 2, 3, 4, 5)}
    for seed, photo in photos.items():
        (train / f"photo_{seed}.png").write_bytes(imagegen.encode(photo, "PNG"))
    # Planted leaks, in formats that must be handled correctly: a CMYK JPEG, a WebP, a TIFF.
    (test / "leak_0_cmyk.jpg").write_bytes(imagegen.encode(photos[0].convert("CMYK"), "JPEG"))
    (test / "leak_1.webp").write_bytes(imagegen.encode(photos[1], "WEBP", quality=90))
    (test / "leak_2.tiff").write_bytes(imagegen.encode(photos[2], "TIFF"))
    for seed in (10, 11, 12):
        (test / f"photo_{seed}.jpg").write_bytes(imagegen.encode(imagegen.photo_like(seed), "JPEG"))

    photo = imagegen.photo_like(20, (120, 90))
    (train / "zero_bytes.jpg").write_bytes(b"")
    (train / "truncated.jpg").write_bytes(imagegen.truncated(imagegen.encode(photo, "JPEG")))
    (train / "text.png").write_text("this is a text file\n")
    (train / "corrupt.png").write_bytes(_corrupt_png(photo))
    (train / "bomb.png").write_bytes(imagegen.bomb_png())
    (train / "sixteen_bit.png").write_bytes(_sixteen_bit_png(21))
    (train / "cmyk.jpg").write_bytes(
        imagegen.encode(imagegen.photo_like(22).convert("CMYK"), "JPEG")
    )
    (train / "palette_transparent.png").write_bytes(_palette_with_transparency(23))
    frames = [imagegen.photo_like(s, (100, 80)) for s in (24, 25, 26)]
    (train / "animated.gif").write_bytes(imagegen.animated(frames, "GIF"))
    (train / "photo.webp").write_bytes(imagegen.encode(imagegen.photo_like(27), "WEBP"))
    (train / "photo.tiff").write_bytes(imagegen.encode(imagegen.photo_like(28), "TIFF"))
    (train / "фото_日本_ñ.png").write_bytes(imagegen.encode(imagegen.photo_like(29), "PNG"))
    # A folder named like an image (never listed: list_image_files lists files only).
    (train / "folder.jpg").mkdir()
    (train / "folder.jpg" / "inside.png").write_bytes(
        imagegen.encode(imagegen.photo_like(30), "PNG")
    )
    # Symbolic-link loops: a file link to itself, and a folder link back up the tree.
    os.symlink("loop.jpg", train / "loop.jpg")
    os.symlink("..", train / "folder.jpg" / "back_up")
    if LINUX:  # a file name that is not UTF-8 (Linux file names are bytes)
        with open(os.fsencode(train) + b"/latin1_\xe9\xff.png", "wb") as file:
            file.write(imagegen.encode(imagegen.photo_like(31), "PNG"))
    return root


def _audit(root: Path, cache: Path | bool = False) -> pd.DataFrame:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = audit_splits(
            {"train": root / "train", "test": root / "test"}, workers=1, cache=cache
        )
    unreadable = [w for w in caught if issubclass(w.category, UnreadableImageWarning)]
    assert len(unreadable) == 1  # one summary, not one line per file
    assert report.table is not None
    table = report.table.copy()
    # object dtype: a pandas string column refuses non-UTF-8 names (surrogate escapes)
    table["name"] = pd.Series([Path(p).name for p in table["path"]], dtype=object)
    leaked = set(report.leaked_groups["group_id"])
    table["leaked"] = table["group_id"].isin(leaked)
    result: pd.DataFrame = table
    return result


def _check_outcomes(table: pd.DataFrame) -> None:
    rows = table.set_index("name")
    for name, expected in HOSTILE.items():
        error = rows.loc[name, "error"]
        if expected == "ok":
            assert pd.isna(error), (name, error)
            assert isinstance(rows.loc[name, "hash"], str)
        else:
            assert isinstance(error, str) and error.startswith(expected), (name, error)
            assert pd.isna(rows.loc[name, "hash"])
    assert "folder.jpg" not in rows.index
    assert pd.isna(rows.loc["inside.png", "error"])  # the tree under it is still scanned
    if LINUX:
        latin1 = os.fsdecode(b"latin1_\xe9\xff.png")
        assert pd.isna(rows.loc[latin1, "error"])
    # The rest of the run went on: exactly the planted leaks are found.
    leaked = set(table.loc[table["leaked"], "name"])
    assert leaked == {
        "photo_0.png", "leak_0_cmyk.jpg",
        "photo_1.png", "leak_1.webp",
        "photo_2.png", "leak_2.tiff",
    }  # fmt: skip


def test_list_image_files_survives_links_loops_and_odd_names(tree: Path) -> None:
    names = {p.name for p in list_image_files(tree / "train")}
    assert "loop.jpg" in names  # listed (a file entry), fails when read
    assert "folder.jpg" not in names
    assert "inside.png" in names
    assert not any("back_up" in str(p) for p in list_image_files(tree / "train"))


@pytest.mark.parametrize("cached", [False, True])
def test_audit_records_every_hostile_file_and_goes_on(
    tree: Path, tmp_path: Path, cached: bool
) -> None:
    if cached:  # run twice through a cache: the second run serves failures and hashes
        time.sleep(0.1)
        first = _audit(tree, cache=tmp_path / "cache")
        table = _audit(tree, cache=tmp_path / "cache")
        pd.testing.assert_frame_equal(first, table)
    else:
        table = _audit(tree)
    _check_outcomes(table)


def test_paths_given_explicitly_directory_and_file_deleted_after_listing(
    tree: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.png"
    victim.write_bytes(imagegen.encode(imagegen.photo_like(40), "PNG"))
    train = [*list_image_files(tree / "train"), victim, tree / "train" / "folder.jpg"]
    victim.unlink()  # deleted between listing and reading
    with pytest.warns(UnreadableImageWarning):
        report = audit_splits(
            {"train": train, "test": tree / "test"}, workers=1, cache=tmp_path / "cache"
        )
    assert report.table is not None
    errors = dict(zip(report.table["path"], report.table["error"], strict=True))
    assert errors[str(victim)] == "file not found"
    assert errors[str(tree / "train" / "folder.jpg")] == "is a directory"
    assert report.n_leaked_groups == 3


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="running as root: file permissions do not stop root from reading "
    "(the reason itself is tested for non-root users in test_loading.py)",
)
def test_unreadable_permissions_are_a_recorded_failure(tmp_path: Path) -> None:
    locked = tmp_path / "train" / "locked.png"
    locked.parent.mkdir()
    locked.write_bytes(imagegen.encode(imagegen.photo_like(41), "PNG"))
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "copy.png").write_bytes(locked.read_bytes())
    locked.chmod(0)
    try:
        with pytest.warns(UnreadableImageWarning):
            report = audit_splits(
                {"train": tmp_path / "train", "test": tmp_path / "test"}, workers=1, cache=False
            )
    finally:
        locked.chmod(0o644)
    assert report.table is not None
    assert report.table["error"].tolist() == ["permission denied", None]


@pytest.fixture()
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A named pipe called like an image, and a rescuer that unblocks a reader stuck on it."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes on this platform")
    path = tmp_path / "pipe.png"
    os.mkfifo(path)
    done = threading.Event()

    def rescue() -> None:
        # If a reader blocks opening the pipe, give it end-of-file after a few seconds.
        deadline = time.monotonic() + 3.0
        while not done.wait(0.05):
            if time.monotonic() < deadline:
                continue
            with contextlib.suppress(OSError):  # OSError: no reader is waiting
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    thread = threading.Thread(target=rescue, daemon=True)
    thread.start()
    yield path
    done.set()
    thread.join()


def test_a_named_pipe_is_a_recorded_failure_not_a_hang(fifo: Path) -> None:
    start = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableImageWarning)
        report = audit_splits({"train": [fifo]}, workers=1, cache=False)
    assert report.table is not None
    assert isinstance(report.table["error"].iloc[0], str)
    assert time.monotonic() - start < 2.0


def test_cli_scan_reports_hostile_files_and_finds_the_leaks(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["scan", str(tree), "--workers", "1", "--no-cache"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    # The one summary warning, logged, names each failure with its reason.
    assert "6 of 27 images could not be read" in captured.err
    for name, expected in HOSTILE.items():
        if expected not in ("ok", ""):
            assert f"{name} ({expected}" in captured.err, name
    assert "3 leaked group" in captured.out or "Leaked groups" in captured.out
    assert main(["scan", str(tree), "--workers", "1", "--no-cache", "--fail-on-leak"]) == 1
    capsys.readouterr()


@pytest.mark.skipif(not LINUX, reason="non-UTF-8 file names are a Linux (bytes) thing")
@pytest.mark.parametrize("option", ["--csv", "--json"])
def test_cli_outputs_with_non_utf8_file_names(
    tree: Path, tmp_path: Path, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(["scan", str(tree), "--workers", "1", "--no-cache", option, str(out)])
    capsys.readouterr()
    assert code == 0
    assert out.stat().st_size > 0


# ------------------------------------------------------------------ EXIF orientation


@pytest.fixture(scope="module")
def rotated_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """train: an upright photo; test: the same photo stored sideways with EXIF orientation 6."""
    root = tmp_path_factory.mktemp("orientation")
    (root / "train").mkdir()
    (root / "test").mkdir()
    upright = imagegen.photo_like(50, (200, 150))
    (root / "train" / "upright.png").write_bytes(imagegen.encode(upright, "PNG"))
    (root / "test" / "sideways.jpg").write_bytes(imagegen.exif_oriented_jpeg(upright, 6))
    (root / "test" / "other.jpg").write_bytes(imagegen.encode(imagegen.photo_like(51), "JPEG"))
    return root


def test_exif_oriented_copy_leaks_as_displayed_and_not_as_stored(rotated_tree: Path) -> None:
    splits = {"train": rotated_tree / "train", "test": rotated_tree / "test"}
    displayed = audit_splits(splits, workers=1, cache=False)
    assert displayed.n_leaked_images == 2
    raw = audit_splits(
        splits, workers=1, cache=False, decode=DecodeOptions(exif_transpose=False), dihedral=False
    )
    assert raw.n_leaked_images == 0  # stored sideways: only dihedral matching would see it
    assert raw.parameters["exif_transpose"] is False


def test_cli_raw_orientation(rotated_tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["scan", str(rotated_tree), "--workers", "1", "--no-cache", "--fail-on-leak"]
    assert main(args) == 1
    assert main([*args, "--raw-orientation", "--no-dihedral"]) == 0
    capsys.readouterr()


# -------------------------------------------------------------------- blank images


def test_distinct_blank_images_never_become_one_leak(tmp_path: Path) -> None:
    """50 different blank/flat images over train and test: no leaked group at all."""
    images = [
        imagegen.flat_with_noise(30 + 4 * i, 1.0 * (i % 3), size=(80, 60), seed=i)
        if i % 2
        else Image.new("RGB", (80 + i, 60), (i * 5, 255 - i * 5, 128))
        for i in range(50)
    ]
    train = imagegen.write_images(tmp_path / "train", images[:25])
    test = imagegen.write_images(tmp_path / "test", images[25:])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no LargeGroupWarning either
        report = audit_splits(
            {"train": tmp_path / "train", "test": tmp_path / "test"}, workers=1, cache=False
        )
    assert report.table is not None
    assert report.table["low_information"].all()
    assert report.n_low_information == 50
    assert not report.has_leakage
    assert report.table["group_id"].nunique() == len(train) + len(test)


def test_byte_identical_blank_copies_leak_and_are_flagged_low_information(tmp_path: Path) -> None:
    blank = imagegen.encode(Image.new("RGB", (64, 48), (200, 200, 200)), "PNG")
    other_blank = imagegen.encode(Image.new("RGB", (64, 48), (201, 200, 200)), "PNG")
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    (tmp_path / "train" / "blank.png").write_bytes(blank)
    (tmp_path / "test" / "blank_copy.png").write_bytes(blank)
    (tmp_path / "test" / "other_blank.png").write_bytes(other_blank)
    imagegen.write_images(tmp_path / "train" / "photos", [imagegen.photo_like(60)])
    report = audit_splits(
        {"train": tmp_path / "train", "test": tmp_path / "test"}, workers=1, cache=False
    )
    assert report.n_leaked_groups == 1
    group = report.leaked_groups.iloc[0]
    assert bool(group["low_information"]) is True
    assert group["n_members"] == 2
    assert "LOW-INFORMATION" in report.to_text()


@pytest.mark.parametrize("shape", [(1, 20_000), (3, 4_000), (20_000, 1)])
def test_a_line_of_pixels_is_hashed_in_bounded_memory(shape: tuple[int, int]) -> None:
    # Strip entries of a wide image are cut from a canvas proportional to its aspect:
    # a 1 x 20,000 PNG once took a 2.8 GB canvas. Past 8:1 an image has no strips.
    import tracemalloc

    from leakaudit.hashing import EntryKind, hash_sources

    pixels = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    tracemalloc.start()
    try:
        table = hash_sources([buffer.getvalue()], dihedral=True, crop_entries=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert table.valid.all()
    assert peak < 200 * 2**20
    assert not np.any(table.orientations.kind == EntryKind.STRIP)
