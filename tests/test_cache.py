"""Tests of leakaudit.cache: correctness of hits, invalidation, concurrency, damage."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import struct
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
    CACHE_DIR_ENV,
    DATABASE_NAME,
    CacheWarning,
    HashCache,
    default_cache_dir,
    hash_sources_cached,
    resolve_cache,
)
from leakaudit.cli import main
from leakaudit.errors import ImageLoadError
from leakaudit.hashing import HashTable, UnreadableImageWarning, hash_sources
from leakaudit.loading import DecodeOptions

# Files changed less than this long ago are not stored (the racy-timestamp rule).
SETTLE_S = 0.12


def settle() -> None:
    time.sleep(SETTLE_S)


def assert_same_table(actual: HashTable, expected: HashTable) -> None:
    assert actual.sources == expected.sources
    assert actual.errors == expected.errors
    for column in ("phash", "dhash", "digest", "low_information", "valid"):
        got, want = getattr(actual, column), getattr(expected, column)
        assert got.dtype == want.dtype, column
        assert np.array_equal(got, want), column


def entries(cache: HashCache) -> list[tuple[bytes, int, str | None]]:
    """``(path, phash, error)`` of every entry (the record packs size, mtime, ctime, inode,
    phash, dhash, digest, flags as little-endian 64-bit integers)."""
    with sqlite3.connect(cache.path) as db:
        rows = db.execute("SELECT path, record, error FROM entries ORDER BY path").fetchall()
    db.close()
    return [(bytes(p), struct.unpack("<8Q", r)[4], e) for p, r, e in rows]


def set_cached_phash(cache: HashCache, path: Path, value: int) -> None:
    """Overwrite a stored hash in the database file, to see whether it is served."""
    db = sqlite3.connect(cache.path)
    with db:
        key = os.fsencode(path.absolute())
        (record,) = db.execute("SELECT record FROM entries WHERE path = ?", (key,)).fetchone()
        fields = list(struct.unpack("<8Q", record))
        fields[4] = value
        db.execute(
            "UPDATE entries SET record = ? WHERE path = ?", (struct.pack("<8Q", *fields), key)
        )
    db.close()


def stored_record(cache: HashCache, path: Path) -> list[int] | None:
    """The unpacked record of ``path``'s entry, or None."""
    with sqlite3.connect(cache.path) as db:
        row = db.execute(
            "SELECT record FROM entries WHERE path = ?", (os.fsencode(path.absolute()),)
        ).fetchone()
    db.close()
    return None if row is None else list(struct.unpack("<8Q", row[0]))


def set_cached_digest(cache: HashCache, path: Path, value: int) -> None:
    """Overwrite a stored byte digest in the database file, to see whether it is served."""
    record = stored_record(cache, path)
    assert record is not None
    record[6] = value
    db = sqlite3.connect(cache.path)
    with db:
        db.execute(
            "UPDATE entries SET record = ? WHERE path = ?",
            (struct.pack("<8Q", *record), os.fsencode(path.absolute())),
        )
    db.close()


@pytest.fixture()
def files(tmp_path: Path) -> list[Path]:
    """Six photos, one blank image (low information), one broken file."""
    images = [imagegen.photo_like(seed, (96, 72)) for seed in range(6)]
    images.append(Image.new("RGB", (80, 60), (10, 20, 30)))
    paths = imagegen.write_images(tmp_path / "images", images)
    broken = tmp_path / "images" / "broken.png"
    broken.write_text("not an image")
    settle()
    return [*paths, broken]


def test_second_run_is_served_from_the_cache_and_equals_an_uncached_run(
    tmp_path: Path, files: list[Path]
) -> None:
    cache = HashCache(tmp_path / "cache")
    reference = hash_sources(files, on_error="ignore", workers=1)
    first = hash_sources_cached(files, cache=cache, on_error="ignore", workers=1)
    assert_same_table(first, reference)
    stored = entries(cache)
    assert len(stored) == len(files)
    assert [e for _, _, e in stored].count("not a recognised image format") == 1
    # Prove the second run reads the database, not the files: a planted value is served.
    set_cached_phash(cache, files[0], 12345)
    second = hash_sources_cached(files, cache=cache, on_error="ignore", workers=1)
    assert int(second.phash[0]) == 12345
    second.phash[0] = reference.phash[0]
    assert_same_table(second, reference)
    assert reference.low_information[6] and second.digest[6] == reference.digest[6] != 0


def test_cache_folder_argument_and_hash_cache_object_are_equivalent(
    tmp_path: Path, files: list[Path]
) -> None:
    hash_sources_cached(files, cache=tmp_path / "c", on_error="ignore", workers=1)
    assert len(HashCache(tmp_path / "c")) == len(files)
    assert (tmp_path / "c" / DATABASE_NAME).is_file()


def test_a_changed_file_is_rehashed_even_with_its_mtime_restored(tmp_path: Path) -> None:
    path = tmp_path / "a.bmp"
    path.write_bytes(imagegen.encode(imagegen.photo_like(1, (64, 64)), "BMP"))
    settle()
    cache = HashCache(tmp_path / "cache")
    before = hash_sources_cached([path], cache=cache, workers=1)
    old = path.stat()
    # Same size (BMP of the same dimensions), mtime put back: only ctime tells.
    path.write_bytes(imagegen.encode(imagegen.photo_like(2, (64, 64)), "BMP"))
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
    assert path.stat().st_size == old.st_size and path.stat().st_mtime_ns == old.st_mtime_ns
    after = hash_sources_cached([path], cache=cache, workers=1)
    assert_same_table(after, hash_sources([path], workers=1))
    assert after.phash[0] != before.phash[0]


def test_a_replaced_file_is_rehashed(tmp_path: Path, files: list[Path]) -> None:
    cache = HashCache(tmp_path / "cache")
    hash_sources_cached(files, cache=cache, on_error="ignore", workers=1)
    # The broken file is fixed, a photo is swapped for another one.
    files[-1].write_bytes(imagegen.encode(imagegen.photo_like(40), "PNG"))
    files[0].write_bytes(imagegen.encode(imagegen.photo_like(41), "PNG"))
    settle()
    again = hash_sources_cached(files, cache=cache, on_error="ignore", workers=1)
    assert_same_table(again, hash_sources(files, on_error="ignore", workers=1))
    assert again.valid.all()
    assert len(entries(cache)) == len(files)  # replaced, not added


def test_decode_options_are_part_of_the_key(tmp_path: Path) -> None:
    upright = imagegen.photo_like(3, (120, 90))
    path = tmp_path / "rotated.jpg"
    path.write_bytes(imagegen.exif_oriented_jpeg(upright, 6))
    settle()
    cache = HashCache(tmp_path / "cache")
    for options in (
        DecodeOptions(),
        DecodeOptions(exif_transpose=False),
        DecodeOptions(min_side=None),
        DecodeOptions(background=(0, 0, 0)),
        DecodeOptions(max_pixels=100),
        DecodeOptions(trim_borders=False),
    ):
        for _ in range(2):
            got = hash_sources_cached([path], cache=cache, decode=options, on_error="ignore")
            assert_same_table(got, hash_sources([path], decode=options, on_error="ignore"))
    assert len(HashCache(tmp_path / "cache")) == 6


def test_in_memory_sources_bypass_the_cache(tmp_path: Path) -> None:
    photo = imagegen.photo_like(5)
    sources: list[object] = [imagegen.encode(photo, "PNG"), photo, b"junk"]
    cache = HashCache(tmp_path / "cache")
    table = hash_sources_cached(sources, cache=cache, on_error="ignore")  # type: ignore[arg-type]
    assert_same_table(table, hash_sources(sources, on_error="ignore"))  # type: ignore[arg-type]
    assert table.sources == ["<bytes #0>", "<PIL image #1>", "<bytes #2>"]
    assert len(cache) == 0


def test_transient_failures_are_never_cached(tmp_path: Path) -> None:
    missing = tmp_path / "later.png"
    folder = tmp_path / "folder.png"
    folder.mkdir()
    cache = HashCache(tmp_path / "cache")
    table = hash_sources_cached([missing, folder], cache=cache, on_error="ignore")
    assert table.errors == {0: "file not found", 1: "is a directory"}
    assert len(cache) == 0
    missing.write_bytes(imagegen.encode(imagegen.photo_like(7), "PNG"))
    assert hash_sources_cached([missing], cache=cache, on_error="ignore").valid.all()


def test_files_changed_a_moment_ago_are_not_stored(tmp_path: Path) -> None:
    path = tmp_path / "fresh.png"
    path.write_bytes(imagegen.encode(imagegen.photo_like(8), "PNG"))
    cache = HashCache(tmp_path / "cache")
    # A timestamp that is not safely in the past (here: in the future, as after a
    # clock step): a rewrite within the same tick could keep it, so it is not stored.
    future = time.time_ns() + 10**9
    os.utime(path, ns=(future, future))
    hash_sources_cached([path], cache=cache)
    assert len(cache) == 0
    os.utime(path, ns=(future - 3 * 10**9, future - 3 * 10**9))
    settle()  # the ctime utime just set must be in the past too
    hash_sources_cached([path], cache=cache)
    assert len(cache) == 1


def test_on_error_policies_apply_to_cached_failures(tmp_path: Path, files: list[Path]) -> None:
    cache = HashCache(tmp_path / "cache")
    hash_sources_cached(files, cache=cache, on_error="ignore")
    with pytest.warns(UnreadableImageWarning, match="1 of 8 image") as record:
        hash_sources_cached(files, cache=cache)
    assert len(record) == 1
    with pytest.raises(ImageLoadError) as info:
        hash_sources_cached(
            [files[0], files[-1], tmp_path / "gone.png"], cache=cache, on_error="raise"
        )
    assert info.value.path == str(files[-1])
    assert info.value.reason == "not a recognised image format"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hash_sources_cached(files, cache=cache, on_error="ignore")


def test_duplicate_and_relative_paths_share_one_entry(
    tmp_path: Path, files: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(files[0].parent)
    cache = HashCache(tmp_path / "cache")
    table = hash_sources_cached([files[0].name, files[0], files[0].name], cache=cache)
    assert table.sources == [files[0].name, str(files[0]), files[0].name]
    assert len(set(table.phash.tolist())) == 1
    assert len(cache) == 1


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match=r"cache must be True, False, a folder path or a HashCache"):
        resolve_cache(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"sources\[1\] must be a path, bytes or a PIL image"):
        hash_sources_cached(["a.png", 3], cache=False)  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"sources\[1\] must be a path, bytes or a PIL image"):
        hash_sources_cached(["a.png", 3], cache=HashCache("unused"))  # type: ignore[list-item]
    with pytest.raises(ValueError, match="on_error must be one of"):
        hash_sources_cached([], cache=HashCache("unused"), on_error="loud")
    assert not Path("unused").exists()


def test_paths_spelt_differently_share_one_entry(
    tmp_path: Path, files: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = files[0].parent
    (folder / "sub").mkdir()
    monkeypatch.chdir(folder / "sub")
    name = files[0].name
    spellings = [
        f"../{name}",
        f"./../{name}",
        f"../sub/../{name}",
        str(files[0]),
        str(folder / "sub" / ".." / name),
    ]
    cache = HashCache(tmp_path / "cache")
    table = hash_sources_cached(spellings, cache=cache, workers=1)
    assert table.sources == spellings
    assert len(set(table.phash.tolist())) == 1
    assert len(cache) == 1
    set_cached_phash(cache, files[0], 777)  # every spelling is served from the one entry
    assert hash_sources_cached(spellings, cache=cache, workers=1).phash.tolist() == [777] * 5


def test_a_lookup_among_many_unrelated_entries_still_serves_every_hit(
    tmp_path: Path, files: list[Path]
) -> None:
    cache = HashCache(tmp_path / "cache")
    reference = hash_sources(files, on_error="ignore", workers=1)
    hash_sources_cached(files, cache=cache, on_error="ignore", workers=1)
    # Entries of other files whose keys sort between the wanted ones: the key range the
    # lookup would read is mostly someone else's, so it takes the batched path instead.
    keys = sorted(os.fsencode(p.absolute()) for p in files)
    db = sqlite3.connect(cache.path)
    (context,) = {c for (c,) in db.execute("SELECT context FROM entries")}
    with db:
        db.executemany(
            "INSERT INTO entries (context, path, record, error) VALUES (?, ?, ?, NULL)",
            [(context, keys[0] + b"-%05d" % i, bytes(64)) for i in range(2 * len(files) + 1100)],
        )
    db.close()
    set_cached_phash(cache, files[0], 4321)
    again = hash_sources_cached(files, cache=cache, on_error="ignore", workers=1)
    assert int(again.phash[0]) == 4321
    again.phash[0] = reference.phash[0]
    assert_same_table(again, reference)


PLAIN = {"dihedral": False, "verify": False}


def _byte_copies(tmp_path: Path) -> dict[str, Path]:
    """train/a.png and test/a_copy.png: the same bytes (two files); test/b.png: another photo."""
    train, test = tmp_path / "split" / "train", tmp_path / "split" / "test"
    train.mkdir(parents=True)
    test.mkdir()
    data = imagegen.encode(imagegen.photo_like(21, (96, 72)), "PNG")
    (train / "a.png").write_bytes(data)
    (test / "a_copy.png").write_bytes(data)
    (test / "b.png").write_bytes(imagegen.encode(imagegen.photo_like(22, (96, 72)), "PNG"))
    return {"train": train, "test": test}


def _digest_of(report: object, path: Path) -> str | None:
    table = report.table  # type: ignore[attr-defined]
    value = table.loc[table["path"] == str(path), "digest"].item()
    return None if value is None else str(value)


def test_byte_digests_are_read_once_and_never_served_for_a_changed_file(tmp_path: Path) -> None:
    import hashlib

    from PIL.PngImagePlugin import PngInfo

    # The cache helpers below read and plant entries under DecodeOptions()'s context,
    # which the verified cascade's decode (crop entries on) does not share.
    splits = _byte_copies(tmp_path)
    original, copy = splits["train"] / "a.png", splits["test"] / "a_copy.png"
    settle()
    cache = HashCache(tmp_path / "cache")
    first = audit_splits(splits, cache=cache, workers=1, **PLAIN)
    expected = hashlib.blake2b(original.read_bytes(), digest_size=8).hexdigest()
    assert _digest_of(first, original) == _digest_of(first, copy) == expected
    assert _digest_of(first, splits["test"] / "b.png") is None
    record = stored_record(cache, copy)
    assert record is not None and f"{record[6]:016x}" == expected  # kept with the entry
    # The second audit serves the digest: a planted value shows.
    set_cached_digest(cache, copy, 0x1234)
    second = audit_splits(splits, cache=cache, workers=1, **PLAIN)
    assert _digest_of(second, copy) == "0000000000001234"
    # A hash table from the cache still equals an uncached one (digests of blank images only).
    paths = [original, copy]
    assert_same_table(hash_sources_cached(paths, cache=cache), hash_sources(paths))
    # New bytes, same pixels (a PNG text chunk), mtime put back: the planted digest is stale.
    old = copy.stat()
    info = PngInfo()
    info.add_text("comment", "re-saved")
    copy.write_bytes(imagegen.encode(imagegen.photo_like(21, (96, 72)), "PNG", pnginfo=info))
    os.utime(copy, ns=(old.st_atime_ns, old.st_mtime_ns))
    third = audit_splits(splits, cache=cache, workers=1, **PLAIN)  # not settled: nothing stored
    fresh = hashlib.blake2b(copy.read_bytes(), digest_size=8).hexdigest()
    assert _digest_of(third, copy) == fresh != expected
    assert stored_record(cache, copy) == [*record[:6], 0x1234, record[7]]  # the old entry
    settle()
    fourth = audit_splits(splits, cache=cache, workers=1, **PLAIN)
    assert _digest_of(fourth, copy) == fresh
    stored = stored_record(cache, copy)
    assert stored is not None and f"{stored[6]:016x}" == fresh
    assert stored[:4] == [copy.stat().st_size, old.st_mtime_ns, copy.stat().st_ctime_ns, old.st_ino]


def test_far_future_timestamps_beyond_64_bit_nanoseconds_are_hashed_not_cached(
    tmp_path: Path,
) -> None:
    path = tmp_path / "far-future.png"
    path.write_bytes(imagegen.encode(imagegen.photo_like(9), "PNG"))
    far = 2**63 + 10**18  # around the year 2330
    try:
        os.utime(path, ns=(far, far))
    except (OSError, OverflowError, ValueError):
        pytest.skip("this platform cannot set such a timestamp")
    if path.stat().st_mtime_ns < 2**63:
        pytest.skip("this file system clamps timestamps")
    cache = HashCache(tmp_path / "cache")
    table = hash_sources_cached([path], cache=cache, workers=1)
    assert_same_table(table, hash_sources([path], workers=1))
    assert len(cache) == 0


# ---------------------------------------------------------------------- location


def test_default_location_follows_env_and_xdg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "override"))
    assert default_cache_dir() == tmp_path / "override"
    monkeypatch.delenv(CACHE_DIR_ENV)
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert default_cache_dir() == tmp_path / "xdg" / "leakaudit"
        monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
        assert default_cache_dir() == Path.home() / ".cache" / "leakaudit"
    resolved = resolve_cache(True)
    assert resolved is not None and resolved.directory == default_cache_dir()
    assert resolve_cache(False) is None and resolve_cache(None) is None


def test_audit_uses_the_env_folder_by_default_and_skips_it_when_asked(
    tmp_path: Path, files: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "env-cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableImageWarning)
        audit_splits({"train": files[:4], "test": files[4:]}, workers=1, cache=False)
        assert not (tmp_path / "env-cache").exists()
        audit_splits({"train": files[:4], "test": files[4:]}, workers=1)
    assert len(HashCache(tmp_path / "env-cache")) == len(files)


def test_cli_cache_options(
    tmp_path: Path, files: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = files[0].parent
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "env-cache"))
    (root.parent / "data" / "train").mkdir(parents=True)
    (root.parent / "data" / "test").mkdir()
    for i, path in enumerate(files):
        os.link(path, root.parent / "data" / ("train" if i % 2 else "test") / path.name)
    settle()  # a new link changes the file's ctime: let it settle, or it is (rightly) not stored
    data = root.parent / "data"
    assert main(["scan", str(data), "--quiet", "--workers", "1", "--no-cache"]) == 0
    assert not (tmp_path / "env-cache").exists()
    assert (
        main(["scan", str(data), "--quiet", "--workers", "1", "--cache-dir", str(tmp_path / "c")])
        == 0
    )
    assert len(HashCache(tmp_path / "c")) == len(files)
    assert not (tmp_path / "env-cache").exists()
    assert main(["scan", str(data), "--quiet", "--workers", "1"]) == 0
    assert len(HashCache(tmp_path / "env-cache")) == len(files)


# ------------------------------------------------------------------- concurrency


def _hammer(args: tuple[str, list[str], int]) -> list[list[int]]:
    """Worker: hash the files in small batches, in a worker-specific order."""
    cache_dir, paths, seed = args
    order = np.random.default_rng(seed).permutation(len(paths)).tolist()
    cache = HashCache(cache_dir)
    results: list[list[int]] = [[] for _ in paths]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        for start in range(0, len(order), 7):
            batch = order[start : start + 7]
            table = hash_sources_cached([paths[i] for i in batch], cache=cache, workers=1)
            for k, i in enumerate(batch):
                results[i] = [int(table.phash[k]), int(table.dhash[k])]
    return results


def test_concurrent_writers_lose_nothing_and_corrupt_nothing(tmp_path: Path) -> None:
    images = [Image.fromarray(imagegen.photo_like_array(s, (40, 32))) for s in range(120)]
    paths = [str(p) for p in imagegen.write_images(tmp_path / "images", images)]
    settle()
    reference = hash_sources(paths, workers=1)
    expected = [[int(p), int(d)] for p, d in zip(reference.phash, reference.dhash, strict=True)]
    cache_dir = str(tmp_path / "cache")
    context = multiprocessing.get_context("spawn")
    jobs = [(cache_dir, paths, seed) for seed in range(4)]
    with context.Pool(4) as pool:
        results = pool.map(_hammer, jobs)
    for result in results:
        assert result == expected
    cache = HashCache(cache_dir)
    assert len(cache) == len(paths)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert_same_table(hash_sources_cached(paths, cache=cache, workers=1), reference)
    with sqlite3.connect(cache.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()


def _open_at(args: tuple[str, float]) -> list[str]:
    """Worker: open the cache at ``start`` (a shared moment); the cache warnings it raised."""
    cache_dir, start = args
    while time.time() < start:
        pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        len(HashCache(cache_dir))
    return [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


def test_processes_creating_one_cache_at_once_never_see_it_damaged(tmp_path: Path) -> None:
    # A regression: each process read the file's header and its tables one by one, so a
    # process could see the empty header and then the tables another had just created,
    # call the new cache damaged and set it aside (half the rounds failed on 2 cores).
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        pool.map(_open_at, [(str(tmp_path / "warm"), 0.0)] * 4)  # start the workers
        for round_ in range(25):
            cache_dir = str(tmp_path / f"cache{round_}")
            start = time.time() + 0.05
            caught = [m for ms in pool.map(_open_at, [(cache_dir, start)] * 4) for m in ms]
            assert caught == [], f"round {round_}: {caught[0]}"
            assert not list(Path(cache_dir).glob("*.corrupt-*"))


def _audit_copies(args: tuple[str, dict[str, str]]) -> list[str | None]:
    cache_dir, splits = args
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        results = []
        for _ in range(3):
            report = audit_splits(splits, cache=HashCache(cache_dir), workers=1)
            assert report.table is not None
            results = report.table["digest"].tolist()
    return results


def test_concurrent_audits_store_byte_digests_safely(tmp_path: Path) -> None:
    splits = _byte_copies(tmp_path)
    for i in range(6):  # more byte copies, so several digests are written at once
        data = imagegen.encode(imagegen.photo_like(30 + i, (64, 48)), "PNG")
        (splits["train"] / f"c{i}.png").write_bytes(data)
        (splits["test"] / f"c{i}_copy.png").write_bytes(data)
    settle()
    cache_dir = str(tmp_path / "cache")
    expected = audit_splits(splits, cache=False, workers=1).table["digest"].tolist()  # type: ignore[index]
    assert sum(d is not None for d in expected) == 14
    named = {k: str(v) for k, v in splits.items()}
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        results = pool.map(_audit_copies, [(cache_dir, named)] * 3)
    assert results == [expected] * 3
    cache = HashCache(cache_dir)
    assert len(cache) == 15
    with sqlite3.connect(cache.path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    records = [
        stored_record(cache, p) for p in [*splits["train"].iterdir(), *splits["test"].iterdir()]
    ]
    assert sum(r is not None and r[6] != 0 for r in records) == 14  # every copy's digest kept


# ------------------------------------------------------------------------ damage


def _damaged_run(cache_dir: Path, paths: list[Path]) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = hash_sources_cached(paths, cache=cache_dir, workers=1, on_error="ignore")
    assert_same_table(table, hash_sources(paths, workers=1, on_error="ignore"))
    return [w for w in caught if issubclass(w.category, CacheWarning)]


def _write_other_version(path: Path) -> None:
    """The cache as another leakaudit version (another schema version) leaves it."""
    db = sqlite3.connect(path)
    version = db.execute("PRAGMA user_version").fetchone()[0]
    db.execute(f"PRAGMA user_version={version + 1}")
    db.close()


def test_at_most_one_set_aside_cache_is_kept(tmp_path: Path, files: list[Path]) -> None:
    """Each run under a new cache version sets the old file aside: only the last one stays."""
    cache_dir = tmp_path / "cache"
    hash_sources_cached(files, cache=cache_dir, workers=1, on_error="ignore")
    database = cache_dir / DATABASE_NAME
    # What earlier runs (other seconds, other processes) left, and a file of the user's.
    for stamp in ("20240101-000000-11", "20250101-000000-12"):
        (cache_dir / f"{DATABASE_NAME}.corrupt-{stamp}").write_bytes(b"old")
        (cache_dir / f"{DATABASE_NAME}.corrupt-{stamp}-wal").write_bytes(b"old")
    (cache_dir / "notes.txt").write_text("mine")
    for _ in range(3):
        _write_other_version(database)
        caught = _damaged_run(cache_dir, files)
        assert len(caught) == 1 and "was damaged" in str(caught[0].message)
        aside = [p.name for p in cache_dir.iterdir() if ".corrupt-" in p.name]
        assert len([n for n in aside if not n.endswith("-wal")]) == 1, aside
        assert len(aside) <= 2, aside
    assert (cache_dir / "notes.txt").read_text() == "mine"
    assert len(HashCache(cache_dir)) == len(files)  # rebuilt


def _write_wrong_schema(path: Path) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE entries (path TEXT, phash INTEGER)")
        db.execute("INSERT INTO entries VALUES ('x', 1)")
    db.close()


def _write_foreign_database(path: Path) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE notes (text TEXT)")
    db.close()


def _write_bad_record(path: Path) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute("PRAGMA ignore_check_constraints = ON")  # what a foreign writer could do
        db.execute("UPDATE entries SET record = x'0102'")
    db.close()


def _truncate(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as file:
        file.truncate(size // 2)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: p.write_bytes(os.urandom(5000)), id="garbage-bytes"),
        pytest.param(
            lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200), id="bad-header"
        ),
        pytest.param(_truncate, id="truncated"),
        pytest.param(_write_wrong_schema, id="wrong-schema"),
        pytest.param(_write_foreign_database, id="foreign-database"),
        pytest.param(_write_bad_record, id="bad-record"),
    ],
)
def test_a_damaged_cache_is_set_aside_with_one_warning_and_rebuilt(
    tmp_path: Path, files: list[Path], damage: object
) -> None:
    cache_dir = tmp_path / "cache"
    more = imagegen.write_images(
        tmp_path / "more", [imagegen.photo_like(s, (40, 30)) for s in range(300)]
    )
    settle()
    paths = [*files, *more]
    hash_sources_cached(paths, cache=cache_dir, workers=1, on_error="ignore")
    database = cache_dir / DATABASE_NAME
    if damage in (_write_wrong_schema, _write_foreign_database):
        database.unlink()
    damage(database)  # type: ignore[operator]
    caught = _damaged_run(cache_dir, paths)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert "was damaged" in str(caught[0].message)
    aside = sorted(p.name for p in cache_dir.iterdir() if ".corrupt-" in p.name)
    assert len(aside) == 1 and aside[0].startswith(DATABASE_NAME + ".corrupt-")
    assert len(HashCache(cache_dir)) == len(paths)  # rebuilt
    assert _damaged_run(cache_dir, paths) == []  # and healthy again


def test_an_unusable_cache_folder_means_an_uncached_run_with_one_warning(
    tmp_path: Path, files: list[Path]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the cache folder should be")
    caught = _damaged_run(blocker / "cache", files)
    assert len(caught) == 1 and "hashing without the cache" in str(caught[0].message)
    # The database path taken by a folder: cannot be opened, cannot be moved aside safely.
    (tmp_path / "cache" / DATABASE_NAME).mkdir(parents=True)
    caught = _damaged_run(tmp_path / "cache", files)
    assert len(caught) == 1 and "hashing without the cache" in str(caught[0].message)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can write any folder"
)
def test_a_read_only_cache_folder_means_an_uncached_run(tmp_path: Path, files: list[Path]) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        caught = _damaged_run(folder, files)
        assert len(caught) == 1
    finally:
        folder.chmod(0o700)


def test_a_damaged_cache_never_breaks_an_audit(tmp_path: Path, files: list[Path]) -> None:
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    (cache_dir / DATABASE_NAME).write_bytes(b"\x00garbage" * 100)
    with pytest.warns(CacheWarning), warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableImageWarning)
        report = audit_splits({"train": files[:4], "test": files[4:]}, workers=1, cache=cache_dir)
    assert report.total_images == len(files)
    assert report.n_unreadable == 1


# ------------------------------------------------------------- orientation hashes


def _orientation_rows(table: HashTable) -> list[tuple[int, int, int]]:
    entries = table.orientations
    assert entries is not None
    return list(
        zip(entries.owner.tolist(), entries.phash.tolist(), entries.dhash.tolist(), strict=True)
    )


def test_orientation_hashes_are_cached_and_served(tmp_path: Path, files: list[Path]) -> None:
    cache = HashCache(tmp_path / "cache")
    turned = [imagegen.photo_like(40, (90, 70)).transpose(Image.Transpose.ROTATE_90)]
    sources: list[object] = [*files, *turned]  # an in-memory image among the files
    reference = hash_sources(sources, on_error="ignore", workers=1, dihedral=True)
    # A plain run first: its entries are kept, the orientations computed on the next run.
    hash_sources_cached(files, cache=cache, on_error="ignore", workers=1)
    first = hash_sources_cached(sources, cache=cache, on_error="ignore", workers=1, dihedral=True)
    assert_same_table(first, reference)
    assert _orientation_rows(first) == _orientation_rows(reference)
    # Prove the second dihedral run reads the database: a planted orientation is served.
    key = os.fsencode(files[0].absolute())
    db = sqlite3.connect(cache.path)
    with db:
        (record,) = db.execute("SELECT record FROM turned WHERE path = ?", (key,)).fetchone()
        planted = record[:32] + struct.pack("<QQ", 777, 888)
        db.execute("UPDATE turned SET record = ? WHERE path = ?", (planted, key))
    db.close()
    second = hash_sources_cached(sources, cache=cache, on_error="ignore", workers=1, dihedral=True)
    assert_same_table(second, reference)
    rows = _orientation_rows(second)
    assert rows[0] == (0, 777, 888)
    assert rows[1:] == [r for r in _orientation_rows(reference) if r[0] != 0]
    # The blank image (row 6) and the broken file have no orientations, the others do.
    assert {r[0] for r in rows} == {0, 1, 2, 3, 4, 5, 8}


def test_orientation_hashes_of_a_changed_file_are_not_served(tmp_path: Path) -> None:
    cache = HashCache(tmp_path / "cache")
    path = tmp_path / "a.png"
    imagegen.photo_like(1, (90, 70)).save(path)
    settle()
    hash_sources_cached([path], cache=cache, workers=1, dihedral=True)
    mtime = path.stat().st_mtime_ns
    imagegen.photo_like(2, (90, 70)).transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(path)
    os.utime(path, ns=(mtime, mtime))
    settle()
    got = hash_sources_cached([path], cache=cache, workers=1, dihedral=True)
    want = hash_sources([path], workers=1, dihedral=True)
    assert _orientation_rows(got) == _orientation_rows(want)


def test_a_damaged_orientation_record_is_set_aside(tmp_path: Path, files: list[Path]) -> None:
    cache = HashCache(tmp_path / "cache")
    hash_sources_cached(files, cache=cache, on_error="ignore", workers=1, dihedral=True)
    db = sqlite3.connect(cache.path)
    with db:
        db.execute("UPDATE turned SET record = ?", (b"short",))
    db.close()
    reference = hash_sources(files, on_error="ignore", workers=1, dihedral=True)
    with pytest.warns(CacheWarning, match="damaged"):
        again = HashCache(tmp_path / "cache")
        got = hash_sources_cached(files, cache=again, on_error="ignore", workers=1, dihedral=True)
    assert _orientation_rows(got) == _orientation_rows(reference)
