"""A ``--cache-dir`` that cannot be written: the run goes uncached, with one warning (issue 23, 14).

The README and :mod:`leakaudit.cache` say so; the CLI used to refuse such a folder (exit 2).
We run as root in CI, where permission bits stop nothing, so the folders here cannot be
written by anyone: a file where the folder should be, a folder under a file, a path
under ``/proc``, and (for other users) a folder without write permission.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import imagegen
import pytest

from leakaudit.cli import main


@pytest.fixture
def root(tmp_path: Path) -> Path:
    top = tmp_path / "data"
    for split in ("train", "test"):
        (top / split).mkdir(parents=True)
    image = imagegen.encode(imagegen.photo_like(1, (160, 120)), "PNG")
    (top / "train" / "a.png").write_bytes(image)
    (top / "test" / "a.png").write_bytes(image)
    return top


def _unwritable(tmp_path: Path) -> list[Path]:
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a folder")
    folders = [blocker, blocker / "cache"]
    if sys.platform.startswith("linux"):
        folders.append(Path("/proc/leakaudit-cache"))
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        folders.append(locked / "cache")
    return folders


def test_an_unwritable_cache_dir_runs_uncached_with_one_warning(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pyarrow")  # --hashes-out writes Parquet (the core's run lacks it)
    for folder in _unwritable(tmp_path):
        argv = ["scan", str(root), "--workers", "1", "--cache-dir", str(folder)]
        hashes = tmp_path / f"hashes-{abs(hash(folder))}"
        assert main([*argv, "--fail-on-leak", "--hashes-out", str(hashes)]) == 1
        captured = capsys.readouterr()
        assert "LEAKAGE: 2 of 2 images" in captured.out  # the audit ran
        lines = [line for line in captured.err.splitlines() if "WARNING" in line]
        assert len(lines) == 1, lines
        assert f"the cache folder {folder} cannot be used" in lines[0]
        assert "hashing without the cache" in lines[0]
    assert (tmp_path / "a-file").read_bytes() == b"not a folder"  # left as it was


def test_a_cache_dir_inside_the_dataset_is_still_refused(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["scan", str(root), "--quiet", "--cache-dir", str(root / "test" / "cache")]
    assert main(argv) == 2
    assert "must be outside the dataset" in capsys.readouterr().err
    assert not (root / "test" / "cache").exists()
