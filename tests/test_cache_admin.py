"""Issue 37, point 8: the hash cache grew silently (326 MB after CIFAR runs); the --sscd
figures differed between the README, ``scan -h`` and docs/cli.md."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import imagegen
import pytest

from leakaudit._cache_admin import cache_info, clear_cache
from leakaudit._cache_file import DATABASE_NAME, SCHEMA_VERSION
from leakaudit._cli_parser import SSCD_MEASURED
from leakaudit.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A cache folder with the current database, stale ones and files that are not ours."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / DATABASE_NAME).write_bytes(b"c" * 3000)
    (cache / f"{DATABASE_NAME}-wal").write_bytes(b"w" * 100)
    (cache / "hashes-v4.sqlite3").write_bytes(b"o" * 2000)
    (cache / f"{DATABASE_NAME}.corrupt-20260101-120000-42").write_bytes(b"d" * 10)
    (cache / "notes.txt").write_text("the user's")
    (cache / "hashes-v3.sqlite3").mkdir()  # a folder of a cache file's name: not ours
    outside = tmp_path / "precious.sqlite3"
    outside.write_bytes(b"p")
    (cache / "hashes-v2.sqlite3").symlink_to(outside)  # a link: never followed nor removed
    return cache


def test_info_lists_only_leakaudits_files(folder: Path) -> None:
    info = cache_info(folder)
    assert {f.path.name: f.stale for f in info.files} == {
        DATABASE_NAME: "",
        f"{DATABASE_NAME}-wal": "",
        f"{DATABASE_NAME}.corrupt-20260101-120000-42": "a damaged cache file set aside",
        "hashes-v4.sqlite3": "schema version 4, no longer read",
    }
    assert info.size == 3000 + 100 + 2000 + 10
    assert len(info.stale_files) == 2
    text = info.to_text()
    assert f"Schema version: {SCHEMA_VERSION}" in text and "4 file(s)" not in text
    assert "leakaudit's files: 4, 5.0 KiB" in text
    assert cache_info(folder / "missing").files == ()


def test_clear_stale_then_all_never_touches_anything_else(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cache", "clear", "--stale", "--cache-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Removed 2 stale cache file(s) (2.0 KiB)" in out
    assert "hashes-v4.sqlite3" in out and "Left: 2 file(s)" in out
    assert (folder / DATABASE_NAME).exists() and not (folder / "hashes-v4.sqlite3").exists()
    assert main(["cache", "clear", "--cache-dir", str(folder)]) == 0
    assert "Removed 2 cache file(s) (3.0 KiB)" in capsys.readouterr().out
    assert sorted(p.name for p in folder.iterdir()) == [
        "hashes-v2.sqlite3",
        "hashes-v3.sqlite3",
        "notes.txt",
    ]
    assert (tmp_path / "precious.sqlite3").read_bytes() == b"p"
    assert main(["cache", "clear", "--cache-dir", str(folder)]) == 0
    assert "No cache file(s) of leakaudit to remove" in capsys.readouterr().out
    assert clear_cache(tmp_path / "missing") == []


def test_an_audit_says_where_the_cache_is_and_how_big_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    for split, seed in (("train", 0), ("test", 1)):
        (root / split).mkdir(parents=True)
        imagegen.photo_like(seed, (64, 48)).save(root / split / "a.png")
    cache = tmp_path / "cache"
    (cache).mkdir()
    (cache / "hashes-v4.sqlite3").write_bytes(b"o" * 2048)
    assert main(["scan", str(root), "--workers", "1", "--cache-dir", str(cache)]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "hash cache:" in line]
    size = cache_info(cache).size
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"leakaudit: INFO: hash cache: {cache}, ")
    assert re.search(r"in \d file\(s\), 2\.0 KiB of it stale \(`leakaudit cache clear", lines[0])
    assert size > 2048
    assert main(["scan", str(root), "--workers", "1", "--no-cache"]) == 0
    assert "hash cache:" not in capsys.readouterr().err
    assert main(["scan", str(root), "--workers", "1", "--cache-dir", str(cache), "--quiet"]) == 0
    assert "hash cache:" not in capsys.readouterr().err


def test_cache_info_as_a_subprocess(folder: Path) -> None:
    exe = shutil.which("leakaudit", path=str(Path(sys.executable).parent))
    assert exe is not None
    result = subprocess.run(
        [exe, "cache", "info", "--cache-dir", str(folder)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"Hash cache folder: {folder}" in result.stdout
    assert "hashes-v4.sqlite3  2.0 KiB  (stale: schema version 4, no longer read)" in result.stdout
    missing = subprocess.run([exe, "cache"], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "ACTION" in missing.stderr


def _squeezed(text: str) -> str:
    """Text without whitespace: markdown and argparse wrap lines where they like."""
    return "".join(text.split())


def test_sscd_figures_have_one_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", "-h"]) == 0
    sources = {
        "scan -h": capsys.readouterr().out,
        "README.md": (REPO / "README.md").read_text(),
        "docs/cli.md": (REPO / "docs" / "cli.md").read_text(),
    }
    for name, text in sources.items():
        assert _squeezed(SSCD_MEASURED) in _squeezed(text), f"{name} does not quote SSCD_MEASURED"
        for stale in ("136/142", "instead of 132", "5-6x", "5 min more"):
            assert stale not in text, f"{name} still has {stale!r}"
