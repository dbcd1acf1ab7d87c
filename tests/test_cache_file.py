"""Tests of the hash cache's SQLite file (issue 35.11): its size, other processes' locks,
and values that do not parse (damage, never data)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path

import imagegen
import numpy as np
import pytest
from PIL import Image

from leakaudit import audit_splits
from leakaudit.cache import (
    DATABASE_NAME,
    CacheWarning,
    HashCache,
    hash_context,
    hash_sources_cached,
    hash_sources_with_files,
)
from leakaudit.hashing import hash_sources
from leakaudit.loading import DecodeOptions

SETTLE_S = 0.12  # files changed less than this long ago are not stored (racy timestamps)


@pytest.fixture()
def files(tmp_path: Path) -> list[Path]:
    """Five photos, one blank image (low information), one broken file."""
    images = [imagegen.photo_like(seed, (96, 72)) for seed in range(5)]
    images.append(Image.new("RGB", (80, 60), (10, 20, 30)))
    paths = imagegen.write_images(tmp_path / "images", images)
    broken = tmp_path / "images" / "broken.png"
    broken.write_text("not an image")
    time.sleep(SETTLE_S)
    return [*paths, broken]


def _cache_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


def _run(cache: HashCache | Path, paths: list[Path], **options: object) -> list[str]:
    """A cached run, checked against an uncached one; the cache warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = hash_sources_cached(paths, cache=cache, workers=1, on_error="ignore", **options)  # type: ignore[arg-type]
    reference = hash_sources(paths, workers=1, on_error="ignore", **options)  # type: ignore[arg-type]
    assert table.errors == reference.errors
    for column in ("phash", "dhash", "digest", "valid"):
        assert np.array_equal(getattr(table, column), getattr(reference, column)), column
    return _cache_warnings(caught)


def _file_size(cache: HashCache) -> int:
    return sum(
        p.stat().st_size
        for p in cache.path.parent.iterdir()
        if p.name.startswith(cache.path.name) and ".corrupt-" not in p.name
    )


# ------------------------------------------------------------------------ layout


def test_thumbnails_take_about_their_own_bytes_on_disk(tmp_path: Path) -> None:
    # Issue 35: each ~1.1 KB thumbnail row spilled into a 4 KiB overflow page of its own
    # (465 MB for 111 MB of thumbnails at 100k images). Rows of a CIFAR-like folder, as
    # an audit of tiny images stores them (an entry and a thumbnail per image), written
    # in a shuffled order (the worst case for a B-tree's fill).
    cache = HashCache(tmp_path / "cache")
    context = hash_context(DecodeOptions())
    n = 3000
    rng = np.random.default_rng(0)
    keys = [f"/home/someone/data/train/class{i % 10}/{i:06d}.png".encode() for i in range(n)]
    identity = bytes(32)
    order = rng.permutation(n).tolist()
    entry_rows = [(keys[i], identity + rng.bytes(24) + bytes(8), None) for i in order]
    thumb_rows = [(keys[i], identity + rng.bytes(1024)) for i in order]
    for start in range(0, n, 500):  # several runs' worth of writes
        cache._store(entry_rows[start : start + 500], context)
        cache._store_side("thumbs", thumb_rows[start : start + 500], context)
    data = sum(8 + len(key) + len(record) for key, record, _ in entry_rows)
    data += sum(8 + len(key) + len(record) for key, record in thumb_rows)
    size = _file_size(cache)
    assert size <= 1.3 * data, f"{size / 1e6:.1f} MB on disk for {data / 1e6:.1f} MB of rows"
    with sqlite3.connect(cache.path) as db:
        assert db.execute("PRAGMA page_size").fetchone()[0] == 8192
    db.close()
    assert len(cache) == n  # and every row reads back


def test_a_cache_of_the_former_layout_is_left_beside_the_new_one(
    tmp_path: Path, files: list[Path]
) -> None:
    """A layout change is a new file name (as every schema bump was): the old file is
    never read, nor rewritten; a file under the new name with another version is set aside."""
    folder = tmp_path / "cache"
    folder.mkdir()
    old = folder / "hashes-v5.sqlite3"
    old.write_bytes(b"a v5 cache")
    assert _run(folder, files) == []
    assert old.read_bytes() == b"a v5 cache"
    assert DATABASE_NAME == "hashes-v6.sqlite3"
    db = sqlite3.connect(folder / DATABASE_NAME)
    db.execute("PRAGMA user_version=5")
    db.close()
    caught = _run(folder, files)
    assert len(caught) == 1 and "was damaged" in caught[0] and "user_version 5" in caught[0]
    assert _run(folder, files) == []


# ------------------------------------------------------------------------- locks

_HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
if sys.argv[2] == "everything":  # readers shut out too
    db.execute("PRAGMA locking_mode=EXCLUSIVE")
db.execute("BEGIN EXCLUSIVE")
db.execute("DELETE FROM entries WHERE 0")
print("held", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("held", ["writes", "everything"])
def test_a_lock_held_by_another_process_is_reported_soon_and_the_run_goes_on(
    tmp_path: Path, files: list[Path], held: str
) -> None:
    # Issue 35: eight retries of a 10 s busy timeout stalled such a run 86 s.
    cache_dir = tmp_path / "cache"
    other = imagegen.write_images(tmp_path / "other", [imagegen.photo_like(50, (64, 48))])
    time.sleep(SETTLE_S)
    assert _run(cache_dir, other) == []  # the cache exists (WAL mode); files are misses
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(cache_dir / DATABASE_NAME), held],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        cache = HashCache(cache_dir)
        start = time.monotonic()
        caught = _run(cache, files)
        elapsed = time.monotonic() - start
        assert elapsed < 8, f"the run took {elapsed:.1f} s"
        assert len(caught) == 1, caught
        assert "another process holds a lock" in caught[0] and str(cache.path) in caught[0]
        assert "hashing without the cache" in caught[0]
    finally:
        holder.kill()
        holder.wait()
    assert _run(cache_dir, files) == []  # the lock gone, the cache works again
    assert len(HashCache(cache_dir)) == len(files) + 1


# ------------------------------------------------------------- values that do not parse


def _tamper(path: Path, statement: str) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute("PRAGMA ignore_check_constraints = ON")  # what a foreign writer could do
        assert db.execute(statement).rowcount >= 1
    db.close()


def _thumbnail_run(cache: HashCache, paths: list[Path]) -> tuple[list[bytes | None], list[int]]:
    """Thumbnails of every file through the cache: the values, and the rows computed."""
    _, files = hash_sources_with_files(
        [str(p) for p in paths],
        cache=cache,
        options=DecodeOptions(),
        workers=1,
        progress=False,
        on_error="ignore",
    )
    assert files is not None
    computed: list[int] = []

    def compute(rows: list[int]) -> list[bytes | None]:
        computed.extend(rows)
        return [bytes([row]) * 16 for row in rows]

    return files.thumbnails(list(range(len(paths))), compute, "test"), computed


NOT_UTF8 = "CAST(x'ff41' AS TEXT)"
FIRST_PHOTO = "path = (SELECT min(path) FROM {table})"


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param(f"UPDATE entries SET error = {NOT_UTF8} WHERE error IS NOT NULL", id="error"),
        pytest.param(
            f"UPDATE entries SET error = {NOT_UTF8} WHERE error IS NULL", id="error-of-images"
        ),
        pytest.param(f"UPDATE entries SET record = {NOT_UTF8}", id="record"),
        pytest.param(f"UPDATE turned SET record = {NOT_UTF8}", id="turned-record"),
        pytest.param(f"UPDATE thumbs SET record = {NOT_UTF8}", id="thumbs-record"),
    ],
)
def test_a_text_value_that_is_not_utf8_is_damage_set_aside_once(
    tmp_path: Path, files: list[Path], statement: str
) -> None:
    # Issue 35: such a value made every run go uncached, and the file was never set aside.
    cache = HashCache(tmp_path / "cache")
    assert _run(cache, files, dihedral=True) == []
    first, _ = _thumbnail_run(cache, files)
    _tamper(cache.path, statement)
    caught = _run(HashCache(tmp_path / "cache"), files, dihedral=True)
    if "thumbs" in statement:  # read only by the thumbnail lookup
        assert caught == []
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            values, computed = _thumbnail_run(HashCache(tmp_path / "cache"), files)
        caught = _cache_warnings(record)
        assert values == first and computed == list(range(len(files)))
    assert len(caught) == 1, caught
    assert "was damaged" in caught[0] and "not UTF-8" in caught[0]
    assert len(list((tmp_path / "cache").glob(f"{DATABASE_NAME}.corrupt-*"))) == 1
    # The next run has a working cache: served, without a warning.
    assert _run(HashCache(tmp_path / "cache"), files, dihedral=True) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        _, computed = _thumbnail_run(HashCache(tmp_path / "cache"), files)
    assert computed == [] or "thumbs" not in statement


def _leak(tmp_path: Path) -> dict[str, Path]:
    train, test = tmp_path / "split" / "train", tmp_path / "split" / "test"
    train.mkdir(parents=True)
    test.mkdir()
    data = imagegen.encode(imagegen.photo_like(21, (96, 72)), "PNG")
    (train / "a.png").write_bytes(data)
    (train / "b.png").write_bytes(imagegen.encode(imagegen.photo_like(22, (96, 72)), "PNG"))
    (test / "a_copy.png").write_bytes(data)
    time.sleep(SETTLE_S)
    return {"train": train, "test": test}


@pytest.mark.parametrize(
    "error",
    [
        pytest.param("'tampered'", id="free-text"),
        pytest.param("'truncated image'", id="a-real-reason-beside-hashes"),
        pytest.param("x'74727563617465642069'", id="a-blob"),
        pytest.param("7", id="a-number"),
    ],
)
def test_a_tampered_error_column_never_hides_a_leaked_image(tmp_path: Path, error: str) -> None:
    # Issue 35: the leaked image's row read as a cached failure: "No leakage", exit 0.
    splits = _leak(tmp_path)
    cache = HashCache(tmp_path / "cache")
    assert audit_splits(splits, cache=cache, workers=1).n_leaked_groups == 1
    key = os.fsencode((splits["test"] / "a_copy.png").absolute())
    db = sqlite3.connect(cache.path)
    with db:
        db.execute(f"UPDATE entries SET error = {error} WHERE path = ?", (key,))
    db.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = audit_splits(splits, cache=HashCache(tmp_path / "cache"), workers=1)
    assert report.n_leaked_groups == 1 and report.n_unreadable == 0
    messages = _cache_warnings(caught)
    assert len(messages) == 1 and "was damaged" in messages[0]


def test_an_unknown_flag_is_damage(tmp_path: Path, files: list[Path]) -> None:
    cache = HashCache(tmp_path / "cache")
    assert _run(cache, files) == []
    db = sqlite3.connect(cache.path)
    with db:
        for path, record in db.execute("SELECT path, record FROM entries").fetchall():
            flagged = record[:56] + (2 | record[56]).to_bytes(8, "little")
            db.execute("UPDATE entries SET record = ? WHERE path = ?", (flagged, path))
    db.close()
    caught = _run(HashCache(tmp_path / "cache"), files)
    assert len(caught) == 1 and "was damaged" in caught[0] and "flags" in caught[0]
    assert _run(HashCache(tmp_path / "cache"), files) == []


def test_a_text_key_is_never_served(tmp_path: Path, files: list[Path]) -> None:
    """A TEXT key sorts before every BLOB key: never read; the files are hashed again."""
    cache = HashCache(tmp_path / "cache")
    assert _run(cache, files) == []
    _tamper(cache.path, "UPDATE entries SET path = CAST(path AS TEXT) WHERE error IS NULL")
    assert _run(HashCache(tmp_path / "cache"), files) == []
    assert _run(HashCache(tmp_path / "cache"), files) == []
