"""Parquet hash shards: the schema, its validation, and grouping them like every other audit."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import imagegen
import numpy as np
import pandas as pd
import pytest
from PIL import Image

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from leakaudit.audit import (  # noqa: E402
    audit_hash_table,
    audit_sources,
    hashing_options,
    wants_crop_entries,
)
from leakaudit.errors import ImageLoadError  # noqa: E402
from leakaudit.export import write_csv_tables, write_json  # noqa: E402
from leakaudit.hashing import UnreadableImageWarning, hash_sources  # noqa: E402
from leakaudit.shards import (  # noqa: E402
    SHARD_COLUMNS,
    HashShards,
    ShardWarning,
    audit_hash_shards,
    check_new_shard_folder,
    decode_options_of,
    hash_shard_table,
    hashing_metadata,
    read_hash_shards,
    require_pyarrow,
    shard_files,
    write_hash_shards,
)

OPTIONS = hashing_options(None, dihedral=True, verify="auto")
CROP = wants_crop_entries(dihedral=True, verify="auto")  # the default audit's entries


def _encode(image: Image.Image, fmt: str = "JPEG", **params: Any) -> bytes:
    return imagegen.encode(image.convert("RGB") if fmt == "JPEG" else image, fmt, **params)


def build_dataset(root: Path, n: int = 30) -> tuple[list[str], list[str]]:
    """Image files in train/val/test with planted cross-split copies and broken files."""
    paths: list[str] = []
    splits: list[str] = []

    def add(split: str, name: str, data: bytes) -> None:
        path = root / split / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append(str(path))
        splits.append(split)

    originals = [_encode(imagegen.photo_like(i, (160, 120)), quality=92) for i in range(n)]
    for i, data in enumerate(originals):
        add("train", f"img_{i:04d}.jpg", data)
    photo = imagegen.photo_like
    add("test", "reencoded.jpg", _encode(photo(0, (160, 120)), quality=40))
    add("test", "resized.png", _encode(photo(1, (160, 120)).resize((120, 90)), "PNG"))
    add("test", "bytecopy.jpg", originals[2])
    add(
        "val",
        "flipped.jpg",
        _encode(photo(3, (160, 120)).transpose(Image.Transpose.FLIP_LEFT_RIGHT)),
    )
    add("train", "copy_within.jpg", originals[4])
    blank = _encode(Image.new("RGB", (80, 60), (250, 250, 250)), "PNG")
    add("val", "blank.png", blank)
    add("test", "blank_copy.png", blank)
    add("test", "truncated.jpg", imagegen.truncated(originals[5], 0.3))
    add("val", "not_an_image.jpg", b"hello, not an image")
    return paths, splits


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str]]:
    return build_dataset(tmp_path_factory.mktemp("shard-data"))


@pytest.fixture(scope="module")
def hashed(dataset: tuple[list[str], list[str]]) -> Any:
    paths, _ = dataset
    return hash_sources(
        paths, decode=OPTIONS, dihedral=True, crop_entries=CROP, workers=1, on_error="ignore"
    )


@pytest.fixture(scope="module")
def plain(dataset: tuple[list[str], list[str]]) -> Any:
    paths, splits = dataset
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableImageWarning)
        return audit_sources(paths, splits, workers=1, cache=False)


@pytest.fixture(scope="module")
def shard_folder(
    tmp_path_factory: pytest.TempPathFactory, dataset: tuple[list[str], list[str]], hashed: Any
) -> Path:
    paths, splits = dataset
    folder = tmp_path_factory.mktemp("shards") / "hashes"
    write_hash_shards(
        hashed,
        folder,
        ids=paths,
        split=splits,
        paths=paths,
        hashing=hashing_metadata(OPTIONS, dihedral=True, crop_entries=CROP),
        rows_per_shard=11,
    )
    return folder


def _quiet_audit(source: Any, **options: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableImageWarning)
        return audit_hash_shards(source, **options)


def assert_same_report(left: Any, right: Any, *, ignore: tuple[str, ...] = ()) -> None:
    """Two reports agree on every table and figure (``id`` and ``ignore`` columns aside)."""
    a, b = left.table, right.table
    drop = ["id", *ignore]
    pd.testing.assert_frame_equal(
        a.drop(columns=[c for c in drop if c in a.columns]),
        b.drop(columns=[c for c in drop if c in b.columns]),
    )
    pd.testing.assert_frame_equal(left.leaked_groups, right.leaked_groups)
    for name in ("n_leaked_images", "total_images", "n_within_split_groups", "n_unreadable"):
        assert getattr(left, name) == getattr(right, name), name
    pd.testing.assert_series_equal(left.images_by_split, right.images_by_split)
    pd.testing.assert_series_equal(left.leaked_by_split, right.leaked_by_split)
    if left.edges is None or right.edges is None:
        assert left.edges is None and right.edges is None
    else:
        pd.testing.assert_frame_equal(left.edges, right.edges)


def test_round_trip_keeps_every_hash(shard_folder: Path, hashed: Any, dataset: Any) -> None:
    paths, splits = dataset
    files = shard_files(shard_folder)
    assert [f.name for f in files] == [f"part-{i:05d}.parquet" for i in range(4)]
    shards = read_hash_shards(shard_folder)
    table = shards.hash_table()
    assert shards.phash.dtype == np.uint64 and shards.dhash.dtype == np.uint64
    assert shards.ids.tolist() == paths and shards.split.tolist() == splits
    for name in ("phash", "dhash", "digest", "low_information", "valid"):
        np.testing.assert_array_equal(getattr(table, name), getattr(hashed, name), err_msg=name)
    assert table.errors == hashed.errors
    for name in ("owner", "phash", "dhash"):
        np.testing.assert_array_equal(
            getattr(table.orientations, name),
            getattr(hashed.orientations, name),
        )
    assert shards.hashing == hashing_metadata(OPTIONS, dihedral=True, crop_entries=CROP)
    assert shards.file_rows.tolist() == [11, 11, 11, 6]
    assert shards.file_of(12) == str(files[1])


def test_schema_written(shard_folder: Path) -> None:
    schema = pq.read_schema(shard_files(shard_folder)[0])
    assert schema.names[:5] == list(SHARD_COLUMNS)
    assert schema.field("phash").type == pa.uint64()
    assert schema.field("phash_hex").type == pa.string()
    assert schema.field("orientation_phash").type == pa.list_(pa.uint64())
    table = pq.read_table(shard_files(shard_folder)[0])
    phash = table.column("phash").to_pylist()
    texts = table.column("phash_hex").to_pylist()
    assert [f"{v:016x}" if v is not None else None for v in phash] == texts
    record = json.loads(schema.metadata[b"leakaudit"])
    assert record["format"] == "leakaudit-hash-shards" and record["hashing"]["dihedral"] is True


def _root_of(dataset: tuple[list[str], list[str]]) -> Path:
    return Path(dataset[0][0]).parents[1]


def test_grouping_shards_equals_the_direct_audit(
    shard_folder: Path, plain: Any, dataset: Any
) -> None:
    report = _quiet_audit(shard_folder, images_root=_root_of(dataset))
    assert_same_report(plain, report)
    params = dict(report.parameters)
    assert params.pop("hash_shards") == 4
    assert params.pop("images_root") == str(_root_of(dataset).resolve())
    assert params == plain.parameters
    assert report.table.columns[2] == "id"
    assert report.n_leaked_images > 0 and report.n_unreadable == 2
    # the byte copy is told from re-encodes, as in the direct audit
    digest = report.table.set_index("path")["digest"]
    assert digest.filter(like="bytecopy").notna().all()


def test_shard_count_does_not_change_the_report(
    tmp_path: Path, hashed: Any, dataset: Any, shard_folder: Path
) -> None:
    paths, splits = dataset
    one = tmp_path / "one"
    write_hash_shards(hashed, one, ids=paths, split=splits, paths=paths)
    assert len(shard_files(one)) == 1
    root = _root_of(dataset)
    assert_same_report(
        _quiet_audit(one, images_root=root), _quiet_audit(shard_folder, images_root=root)
    )


def test_without_paths_groups_by_hashes_alone(tmp_path: Path, hashed: Any, dataset: Any) -> None:
    paths, splits = dataset
    folder = tmp_path / "no-paths"
    write_hash_shards(hashed, folder, ids=[f"row{i}" for i in range(len(paths))], split=splits)
    report = _quiet_audit(folder)
    verification = report.parameters["verification"]
    assert verification["ran"] is False and "grouped by the hashes alone" in verification["why"]
    assert report.parameters["stages"] == ["hash threshold"]
    assert "Verification: did not run" in report.to_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableImageWarning)
        bare = audit_hash_table(hashed, splits, dihedral=True, verify=False)
    np.testing.assert_array_equal(report.table["group_id"], bare.table["group_id"])
    with pytest.raises(ValueError, match="verify needs the images"):
        _quiet_audit(folder, verify=True)
    with pytest.raises(ValueError, match="verify must be 'auto', True, False"):
        _quiet_audit(folder, verify="yes")
    # another method: the core's own reason is kept
    by_phash = _quiet_audit(folder, method="phash")
    assert "'phash' links by its threshold" in by_phash.parameters["verification"]["why"]


def test_paths_that_do_not_exist_here_are_not_read(
    tmp_path: Path, hashed: Any, dataset: Any
) -> None:
    paths, splits = dataset
    folder = tmp_path / "elsewhere"
    moved = [f"/nonexistent/{Path(p).name}" for p in paths]
    write_hash_shards(hashed, folder, ids=paths, split=splits, paths=moved)
    report = _quiet_audit(folder)
    assert report.parameters["verification"]["ran"] is False
    assert report.table["path"].tolist() == moved


def test_unreadable_rows_are_recorded_and_named(shard_folder: Path) -> None:
    with pytest.warns(UnreadableImageWarning, match=r"truncated\.jpg") as caught:
        report = audit_hash_shards(shard_folder)
    assert "not_an_image.jpg" in str(caught[0].message)
    errors = report.table.set_index("path")["error"].dropna()
    assert len(errors) == 2 and errors.filter(like="not_an_image").iloc[0]
    assert report.n_unreadable == 2
    with pytest.raises(ImageLoadError, match=r"truncated\.jpg"):
        audit_hash_shards(shard_folder, on_error="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        audit_hash_shards(shard_folder, on_error="ignore")


def test_renderings_work(shard_folder: Path, tmp_path: Path) -> None:
    report = _quiet_audit(shard_folder)
    assert "LEAKAGE" in report.to_text()
    written = write_csv_tables(report, tmp_path / "t.csv")
    assert len(written) == 4
    data = json.loads(write_json(report, tmp_path / "r.json").read_text())
    assert data["n_leaked_images"] == report.n_leaked_images
    from leakaudit.htmlreport import write_html

    assert write_html(report, tmp_path / "r.html", progress=False).stat().st_size > 0


def test_engines_without_unsigned_ints_or_with_hex(
    tmp_path: Path, hashed: Any, dataset: Any
) -> None:
    """Spark writes signed longs, CSV-minded tools hex strings: both give the same groups."""
    paths, splits = dataset
    reference = tmp_path / "ref"
    write_hash_shards(hashed, reference, ids=paths, split=splits)
    table = pq.read_table(shard_files(reference)[0])
    signed = table.drop_columns(["phash", "dhash", "digest", "phash_hex", "dhash_hex"])
    for name in ("phash", "dhash", "digest"):
        values = table.column(name).fill_null(0).to_numpy()
        present = table.column(name).is_valid().to_numpy(zero_copy_only=False)
        as_int = values.astype(np.uint64).view(np.int64)
        signed = signed.append_column(name, pa.array(as_int, pa.int64(), mask=~present))
    (tmp_path / "spark").mkdir()
    pq.write_table(signed, tmp_path / "spark" / "part-00000-abc.snappy.parquet")
    (tmp_path / "spark" / "_SUCCESS").write_bytes(b"")
    (tmp_path / "spark" / ".part-00000-abc.snappy.parquet.crc").write_bytes(b"x")
    hexed = table.drop_columns(["phash", "dhash"]).rename_columns(
        [
            {"phash_hex": "phash", "dhash_hex": "dhash"}.get(n, n)
            for n in table.drop_columns(["phash", "dhash"]).column_names
        ]
    )
    (tmp_path / "hex").mkdir()
    pq.write_table(hexed, tmp_path / "hex" / "hashes.parquet")
    only_hex = table.drop_columns(["phash", "dhash"])
    (tmp_path / "only-hex").mkdir()
    pq.write_table(only_hex, tmp_path / "only-hex" / "hashes.parquet")
    expected = _quiet_audit(reference)
    for folder in ("spark", "hex", "only-hex"):
        assert_same_report(expected, _quiet_audit(tmp_path / folder))


def _write(folder: Path, name: str, table: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    pq.write_table(table, path)
    return path


def _minimal(ids: list[str], **overrides: Any) -> Any:
    n = len(ids)
    columns: dict[str, object] = {
        "id": pa.array(ids, pa.string()),
        "split": pa.array(["train"] * n, pa.string()),
        "phash": pa.array(list(range(1, n + 1)), pa.uint64()),
        "dhash": pa.array(list(range(1, n + 1)), pa.uint64()),
        "error": pa.array([None] * n, pa.string()),
    }
    columns.update(overrides)
    return pa.table({k: v for k, v in columns.items() if v is not None})


def test_schema_errors_name_the_file(tmp_path: Path) -> None:
    good = _write(tmp_path / "a", "part-0.parquet", _minimal(["x", "y"]))
    assert len(read_hash_shards(good.parent)) == 2

    missing = _write(tmp_path / "b", "part-0.parquet", _minimal(["x"], error=None))
    with pytest.raises(ValueError, match=r"part-0.parquet: missing column\(s\) error"):
        read_hash_shards(missing.parent)

    wrong = _write(tmp_path / "c", "p.parquet", _minimal(["x"], phash=pa.array([1.5])))
    with pytest.raises(ValueError, match=r"p.parquet: column 'phash' must be uint64, int64 or"):
        read_hash_shards(wrong.parent)

    bad_hex = _write(
        tmp_path / "d",
        "p.parquet",
        _minimal(["x", "y"], phash=pa.array(["00ff00ff00ff00ff", "zz"])),
    )
    with pytest.raises(ValueError, match=r"d/p.parquet: phash\[1\] must be a hex string; got .zz."):
        read_hash_shards(bad_hex.parent)

    int_ids = _write(tmp_path / "e", "p.parquet", _minimal(["x"], id=pa.array([7])))
    with pytest.raises(ValueError, match=r"column 'id' must hold strings; got type int64"):
        read_hash_shards(int_ids.parent)

    null_id = _write(tmp_path / "f", "p.parquet", _minimal(["x"], id=pa.array([None], pa.string())))
    with pytest.raises(ValueError, match=r"column 'id' must not be null; row 0"):
        read_hash_shards(null_id.parent)

    no_hash = _write(
        tmp_path / "g", "p.parquet", _minimal(["x", "y"], phash=pa.array([1, None], pa.uint64()))
    )
    with pytest.raises(ValueError, match=r"row 1 \(id 'y'\) has no phash and no error"):
        read_hash_shards(no_hash.parent)

    blank = _write(tmp_path / "h", "p.parquet", _minimal(["x"], low_information=pa.array([True])))
    with pytest.raises(ValueError, match="low_information without a digest"):
        read_hash_shards(blank.parent)

    half = _write(
        tmp_path / "i",
        "p.parquet",
        _minimal(["x"], orientation_phash=pa.array([[1]], pa.list_(pa.uint64()))),
    )
    with pytest.raises(ValueError, match="go together"):
        read_hash_shards(half.parent)

    uneven = _write(
        tmp_path / "j",
        "p.parquet",
        _minimal(
            ["x"],
            orientation_phash=pa.array([[1, 2]], pa.list_(pa.uint64())),
            orientation_dhash=pa.array([[1]], pa.list_(pa.uint64())),
        ),
    )
    with pytest.raises(ValueError, match=r"row 0 \(id 'x'\) has 2 and 1"):
        read_hash_shards(uneven.parent)

    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "p.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError, match=r"k/p.parquet: not a readable Parquet file"):
        read_hash_shards(tmp_path / "k")


def test_duplicate_ids_across_shards_name_both_files(tmp_path: Path) -> None:
    _write(tmp_path, "part-0.parquet", _minimal(["x", "y"]))
    _write(tmp_path, "part-1.parquet", _minimal(["z", "y"]))
    with pytest.raises(
        ValueError, match=r"'y' is in .*part-0.parquet \(row 1\) and in .*part-1.parquet \(row 1\)"
    ):
        read_hash_shards(tmp_path)


def test_no_shards_and_missing_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "_SUCCESS").write_bytes(b"")
    with pytest.raises(ValueError, match="no hash shards"):
        read_hash_shards(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="not found"):
        read_hash_shards(tmp_path / "missing")


def test_mixed_settings_and_mixed_entries_are_refused(
    tmp_path: Path, hashed: Any, dataset: Any
) -> None:
    paths, splits = dataset
    arrow = hash_shard_table(
        hashed,
        ids=paths,
        split=splits,
        hashing=hashing_metadata(OPTIONS, dihedral=True, crop_entries=CROP),
    )
    other = hash_shard_table(
        hashed,
        ids=[f"{p}#2" for p in paths],
        split=splits,
        hashing=hashing_metadata(
            hashing_options(None, dihedral=False, verify=False), dihedral=True
        ),
    )
    _write(tmp_path / "mixed", "a.parquet", arrow)
    _write(tmp_path / "mixed", "b.parquet", other)
    with pytest.raises(ValueError, match="hashed with different settings"):
        read_hash_shards(tmp_path / "mixed")
    flat = _minimal(["q"])
    _write(tmp_path / "entries", "a.parquet", arrow)
    _write(tmp_path / "entries", "b.parquet", flat)
    with pytest.raises(ValueError, match="orientation columns or none"):
        read_hash_shards(tmp_path / "entries")


def test_files_are_read_recursively_in_sorted_order(tmp_path: Path) -> None:
    _write(tmp_path / "split=b", "part-0.parquet", _minimal(["b0"]))
    _write(tmp_path / "split=a", "part-1.parquet", _minimal(["a1"]))
    _write(tmp_path / "split=a", "part-0.parquet", _minimal(["a0"]))
    _write(tmp_path / "_temporary", "part-0.parquet", _minimal(["tmp"]))
    shards = read_hash_shards(tmp_path)
    assert shards.ids.tolist() == ["a0", "a1", "b0"]


def test_dihedral_needs_entries(tmp_path: Path) -> None:
    _write(tmp_path, "p.parquet", _minimal(["x", "y"]))
    report = audit_hash_shards(tmp_path)
    assert "dihedral" not in report.parameters and report.total_images == 2
    with pytest.raises(ValueError, match="orientation entries"):
        audit_hash_shards(tmp_path, dihedral=True)


def test_empty_errors_count_as_none(tmp_path: Path) -> None:
    table = _minimal(
        ["x", "y", "z"],
        split=pa.array(["train", "test", "test"], pa.string()),
        error=pa.array(["", None, "bad file"], pa.string()),
        phash=pa.array([5, 5, None], pa.uint64()),
        dhash=pa.array([5, 5, None], pa.uint64()),
    )
    _write(tmp_path, "p.parquet", table)
    shards = read_hash_shards(tmp_path)
    assert shards.split.tolist() == ["train", "test", "test"]
    assert shards.errors == {2: "bad file"} and shards.valid.tolist() == [True, True, False]
    report = audit_hash_shards(tmp_path, on_error="ignore")
    assert report.table["group_id"].iloc[0] == report.table["group_id"].iloc[1]


@pytest.mark.parametrize(
    "split",
    [
        pa.array(["train", None, "test", None], pa.string()),
        pa.array(["train", None, "test", None], pa.large_string()),
        pa.array([b"train", None, b"test", None], pa.binary()),  # how names not UTF-8 are written
        pa.array(["train", None, "test", None], pa.string()).dictionary_encode(),
    ],
    ids=["string", "large_string", "binary", "dictionary"],
)
def test_a_null_split_is_an_error_naming_the_file_and_row(tmp_path: Path, split: Any) -> None:
    """Issue 35, point 5: rows with a null split dropped out of the audit, hiding their leaks
    ("No leakage", --fail-on-leak exit 0)."""
    table = _minimal(["a", "b", "c", "d"], split=split, phash=pa.array([7, 7, 7, 9], pa.uint64()))
    path = _write(tmp_path / "h", "part-3.parquet", table)
    with pytest.raises(ValueError) as raised:
        read_hash_shards(path.parent)
    assert str(raised.value) == (
        f"{path}: column 'split' must not be null; row 1 (id 'b') is, and 1 more row(s)."
    )
    with pytest.raises(ValueError, match=r"part-3.parquet: column 'split' must not be null"):
        audit_hash_shards(path.parent)


def test_empty_table_round_trips(tmp_path: Path) -> None:
    empty = hash_sources([], dihedral=True)
    files = write_hash_shards(empty, tmp_path / "h", ids=[], split=[])
    assert len(files) == 1
    report = audit_hash_shards(tmp_path / "h")
    assert report.total_images == 0 and not report.has_leakage


def test_write_never_overwrites(tmp_path: Path, hashed: Any, dataset: Any) -> None:
    paths, splits = dataset
    folder = tmp_path / "h"
    write_hash_shards(hashed, folder, ids=paths, split=splits)
    before = {p: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(FileExistsError, match="already holds hash shards"):
        write_hash_shards(hashed, folder, ids=paths, split=splits)
    assert {p: p.read_bytes() for p in folder.iterdir()} == before
    with pytest.raises(FileExistsError):
        check_new_shard_folder(folder)
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        check_new_shard_folder(tmp_path / "file")
    # a folder with other files is fine, and nothing temporary is left behind
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    write_hash_shards(hashed, other, ids=paths, split=splits)
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt", "part-00000.parquet"]
    assert (other / "notes.txt").read_text() == "keep me"


def test_lengths_are_checked(hashed: Any) -> None:
    with pytest.raises(ValueError, match="ids must have one value per row"):
        hash_shard_table(hashed, ids=["a"], split=["train"])
    with pytest.raises(TypeError, match="shards must be a HashShards"):
        audit_hash_shards(42)


def test_from_arrow_labels_blocks(hashed: Any, dataset: Any) -> None:
    paths, splits = dataset
    arrow = hash_shard_table(hashed, ids=paths, split=splits)
    shards = HashShards.from_arrow([arrow.slice(0, 5), arrow.slice(5)])
    assert shards.files == ("block 0", "block 1") and len(shards) == len(paths)
    with pytest.raises(
        ValueError, match=r"'.*img_0000.jpg' is in block 0 \(row 0\) and in block 1"
    ):
        HashShards.from_arrow([arrow, arrow])


def test_missing_pyarrow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"pip install 'leakaudit-vision\[parquet\]'"):
        require_pyarrow()


def test_hex_reading_accepts_any_case_and_short_strings(tmp_path: Path) -> None:
    table = _minimal(
        ["x", "y"],
        phash=pa.array(["00FF00FF00FF00FF", "00ff00ff00ff00ff"]),
        dhash=pa.array(["ff", "FF"]),
    )
    _write(tmp_path, "p.parquet", table)
    shards = read_hash_shards(tmp_path)
    assert shards.phash.tolist() == [0x00FF00FF00FF00FF] * 2 and shards.dhash.tolist() == [255, 255]


def test_hugging_face_map_output_is_a_shard(tmp_path: Path, dataset: Any, plain: Any) -> None:
    """``hash_dataset`` (``Dataset.map``) rows plus an id and a split are hash shards."""
    hf = pytest.importorskip("datasets")
    from leakaudit.adapters.huggingface import hash_dataset

    paths, splits = dataset
    ds = hf.Dataset.from_dict({"image": paths}).cast_column("image", hf.Image())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hashed = hash_dataset(ds, dihedral=True, cache=False, progress=False,
                              decode=OPTIONS, crop_entries=CROP)  # fmt: skip
    hashed = hashed.add_column("id", paths).add_column("split", splits)
    hashed = hashed.add_column("path", paths)
    (tmp_path / "hf").mkdir()
    hashed.to_parquet(str(tmp_path / "hf" / "hashes.parquet"))
    report = _quiet_audit(tmp_path / "hf", decode=OPTIONS, images_root=_root_of(dataset))
    assert_same_report(plain, report)


# ------------------------------------------------ what a shard may make us read (issue 23)

#: Files opened under a watched folder while ``_OPENED`` is a list (an audit hook sees every
#: ``open`` Python makes: builtins.open, os.open, Pillow's).
_OPENED: list[str] | None = None
_WATCHED: list[str] = []


def _audit_hook(event: str, args: tuple[Any, ...]) -> None:
    if _OPENED is None or event != "open" or not args:
        return
    name = args[0]
    if isinstance(name, (str, bytes)) or hasattr(name, "__fspath__"):
        text = os.fsdecode(name)
        if any(text.startswith(folder) for folder in _WATCHED):
            _OPENED.append(text)


sys.addaudithook(_audit_hook)


def _opened_under(folder: Path, call: Any) -> tuple[Any, list[str]]:
    """Run ``call()``; return its result and the files under ``folder`` it opened."""
    global _OPENED
    _WATCHED[:] = [str(folder), os.path.realpath(folder)]
    _OPENED = []
    try:
        result = call()
        return result, list(_OPENED)
    finally:
        _OPENED = None


def _private_layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A dataset root and a private folder beside it; shards naming files of both.

    ``data/train/a.png`` and ``data/test/copy.png`` are one image; the shards also name
    ``private/secret.png`` (the same image, outside the root), ``data/test/link.png`` (a
    link from inside the root to ``private/other.png``) and ``/etc/passwd``.
    """
    data, private = tmp_path / "data", tmp_path / "private"
    for folder in (data / "train", data / "test", private):
        folder.mkdir(parents=True)
    image = _encode(imagegen.photo_like(7, (160, 120)), "PNG")
    other = _encode(imagegen.photo_like(7, (160, 120)).resize((120, 90)), "PNG")
    (data / "train" / "a.png").write_bytes(image)
    (data / "test" / "copy.png").write_bytes(image)
    (private / "secret.png").write_bytes(image)
    (private / "other.png").write_bytes(other)
    (data / "test" / "link.png").symlink_to(private / "other.png")
    paths = [
        str(data / "train" / "a.png"),
        str(data / "test" / "copy.png"),
        str(private / "secret.png"),
        str(data / "test" / "link.png"),
        "/etc/passwd",
    ]
    hashed = hash_sources(
        [*paths[:4], paths[0]], decode=OPTIONS, dihedral=True, crop_entries=CROP, workers=1
    )  # /etc/passwd: a's hashes, as a crafted shard would claim
    folder = tmp_path / "shards"
    write_hash_shards(
        hashed,
        folder,
        ids=[f"row{i}" for i in range(5)],
        split=["train", "test", "test", "test", "test"],
        paths=paths,
        hashing=hashing_metadata(OPTIONS, dihedral=True, crop_entries=CROP),
    )
    return folder, data, private


def test_without_images_root_no_file_is_read(tmp_path: Path) -> None:
    folder, data, _ = _private_layout(tmp_path)
    report, opened = _opened_under(tmp_path, lambda: _quiet_audit(folder))
    assert opened == []
    assert report.parameters["images_root"] is None
    assert report.parameters["verification"]["ran"] is False
    text = report.to_text()
    assert "images not read: no images root given" in text
    assert "Note: image files named in the shards were not read" in text
    assert report.n_leaked_images == 5  # the hashes decide: every row is one image
    assert report.image_file(str(data / "train" / "a.png")) is None
    from leakaudit.htmlreport import render_html

    page, opened = _opened_under(tmp_path, lambda: render_html(report))
    assert opened == [] and "data:image/jpeg" not in page
    _, opened = _opened_under(Path("/etc"), lambda: render_html(report))
    assert opened == []
    _, opened = _opened_under(Path("/etc"), lambda: _quiet_audit(folder))
    assert opened == []


def test_images_root_reads_only_inside_it(tmp_path: Path) -> None:
    folder, data, private = _private_layout(tmp_path)
    with pytest.warns(ShardWarning, match=r"3 shard path\(s\) resolve outside the images root"):
        report, opened = _opened_under(
            private, lambda: audit_hash_shards(folder, images_root=data, workers=1)
        )
    assert opened == []  # not the file outside, not the one a link inside points to
    _, opened = _opened_under(Path("/etc"), lambda: _quiet_audit(folder, images_root=data))
    assert opened == []
    _, opened = _opened_under(data, lambda: _quiet_audit(folder, images_root=data))
    assert opened  # the files inside are verified
    assert report.parameters["images_root"] == str(data.resolve())
    verification = report.parameters["verification"]
    assert verification["verified"] >= 1 and verification["unverifiable"] >= 1
    assert "3 shard path(s) lie outside the images root" in report.to_text()
    from leakaudit.htmlreport import render_html

    page, opened = _opened_under(private, lambda: render_html(report))
    assert opened == []
    # a.png and copy.png only: one picture (byte copies), shown in the group and again in
    # the review section; nothing of the files outside the root
    assert page.count("data:image/jpeg") >= 2
    assert len(set(re.findall(r'data:image/jpeg;base64,[^"]+', page))) == 1
    assert report.image_file(str(data / "test" / "link.png")) is None
    assert report.image_file(str(data / "train" / "a.png")) == str(
        (data / "train" / "a.png").resolve()
    )
    with pytest.raises(ValueError, match="images_root must be a folder"):
        audit_hash_shards(folder, images_root=tmp_path / "missing")


def test_shard_metadata_never_sets_read_limits(tmp_path: Path) -> None:
    """A shard recording max_file_bytes=10**13 does not make a 600 MB file be read."""
    import tracemalloc

    from leakaudit.loading import DecodeOptions

    data = tmp_path / "data"
    (data / "train").mkdir(parents=True)
    (data / "test").mkdir()
    image = _encode(imagegen.photo_like(3, (160, 120)), "PNG")
    (data / "train" / "a.png").write_bytes(image)
    big = data / "test" / "big.png"
    with open(big, "wb") as file:  # a PNG, then a sparse tail: no disk used
        file.write(image)
        file.truncate(600 * 2**20)
    hashed = hash_sources(
        [data / "train" / "a.png"] * 2, decode=OPTIONS, dihedral=True, crop_entries=CROP
    )
    lax = dataclasses.replace(
        OPTIONS, max_file_bytes=10**13, max_pixels=10**12, max_decode_pixels=10**12
    )
    folder = tmp_path / "shards"
    write_hash_shards(
        hashed,
        folder,
        ids=["a", "big"],
        split=["train", "test"],
        paths=[str(data / "train" / "a.png"), str(big)],
        hashing=hashing_metadata(lax, dihedral=True, crop_entries=CROP),
    )
    shards = read_hash_shards(folder)
    assert shards.hashing is not None and shards.hashing["decode"]["max_file_bytes"] == 10**13
    recorded = decode_options_of(shards.hashing)
    assert recorded is not None
    assert recorded.max_file_bytes == DecodeOptions().max_file_bytes
    assert recorded.max_pixels == DecodeOptions().max_pixels
    assert recorded.max_decode_pixels == DecodeOptions().max_decode_pixels
    assert shards.hashing["decode"]["crop_entries"] is True  # how the hashes were made is kept
    assert not recorded.crop_entries  # a hashing choice: no DecodeOptions field read back
    tracemalloc.start()
    try:
        report = _quiet_audit(folder, images_root=data, workers=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20, peak
    assert report.n_leaked_images == 2  # decided by the hashes: the big file is not read
    assert report.table.set_index("id")["digest"].isna()["big"]


def test_source_digest_skips_files_over_the_limit(tmp_path: Path) -> None:
    import resource
    import tracemalloc

    from leakaudit.audit import source_digest

    huge = tmp_path / "huge.png"
    with open(huge, "wb") as file:
        file.write(b"\x89PNG\r\n\x1a\n")
        file.truncate(3 * 2**30)  # sparse: 3 GB that use no disk
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * 3_000_000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    try:
        assert source_digest(huge, max_bytes=2**20) is None
        assert source_digest(huge) is None  # over the default max_file_bytes (512 MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 2**10  # KiB
    import hashlib

    expected = hashlib.blake2b(small.read_bytes(), digest_size=8).hexdigest()
    assert source_digest(small) == expected  # read in pieces, same digest
    assert source_digest(small, max_bytes=2_999_999) is None
    assert source_digest(small, max_bytes=3_000_000) == expected
    os.mkfifo(tmp_path / "pipe")
    assert source_digest(tmp_path / "pipe") is None  # not a regular file: never blocks


def test_source_digest_is_the_tables_digest(tmp_path: Path) -> None:
    """Issue 26.1: one byte digest. audit.source_digest hashed a PIL image under another
    prefix than hashing.image_digest (HashTable.digest), so a shard row whose digest came
    from hashing and a row digested from ``images=`` disagreed on the same pixels."""
    from leakaudit.audit import source_digest
    from leakaudit.hashing import bytes_digest, hash_sources, image_digest

    image = imagegen.photo_like(5)
    assert source_digest(image) == f"{image_digest(image):016x}"
    data = b"\x89PNG not really" * 1000
    assert source_digest(data) == f"{bytes_digest(data):016x}"
    path = tmp_path / "a.png"
    image.save(path)
    solid = Image.new("RGB", (40, 30), (200, 10, 10))  # low information: the table has its digest
    table = hash_sources([solid, path.read_bytes()], workers=1)
    assert bool(table.low_information[0])
    assert source_digest(solid) == f"{int(table.digest[0]):016x}"
    assert source_digest(path) == f"{bytes_digest(path.read_bytes()):016x}"


# ------------------------------------------------------ empty orientation lists (issue 23)


def _entry_table(phash: list[int], dhash: list[int], entries: list[Any], splits: list[str]) -> Any:
    n = len(phash)
    lists = pa.list_(pa.uint64())
    return pa.table(
        {
            "id": pa.array([f"r{i}" for i in range(n)], pa.string()),
            "split": pa.array(splits, pa.string()),
            "phash": pa.array(phash, pa.uint64()),
            "dhash": pa.array(dhash, pa.uint64()),
            "error": pa.array([None] * n, pa.string()),
            "orientation_phash": pa.array(
                [None if e is None else [p for p, _ in e] for e in entries], lists
            ),
            "orientation_dhash": pa.array(
                [None if e is None else [d for _, d in e] for e in entries], lists
            ),
        }
    )


def test_rows_without_orientation_entries_still_match(tmp_path: Path) -> None:
    a, b = 0x0123456789ABCDEF, 0x0FEDCBA987654321
    table = _entry_table([a, a], [b, b], [[], None], ["train", "test"])
    path = _write(tmp_path / "empty", "part-0.parquet", table)
    with pytest.warns(ShardWarning, match=r"2 shard row\(s\) have no orientation entries"):
        report = audit_hash_shards(path.parent)
    assert report.n_leaked_images == 2
    assert "part-0.parquet (row 0), id 'r0'" in str(
        _warning_of(lambda: audit_hash_shards(path.parent))
    )


def _warning_of(call: Any) -> Any:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return next(w.message for w in caught if issubclass(w.category, ShardWarning))


def test_a_row_without_entries_matches_its_copy_that_has_them(tmp_path: Path) -> None:
    """The copy's entries are canonical orientations, not the image as it is."""
    for seed in range(40):
        image = imagegen.photo_like(seed, (160, 120))
        hashed = hash_sources([image], dihedral=True)
        own = (int(hashed.phash[0]), int(hashed.dhash[0]))
        entries = list(
            zip(hashed.orientations.phash.tolist(), hashed.orientations.dhash.tolist(), strict=True)
        )
        if own not in entries:
            break
    else:  # pragma: no cover - the canonical orientation is the identity 1 time in 8
        pytest.skip("no image found whose canonical orientation differs")
    table = _entry_table([own[0]] * 2, [own[1]] * 2, [entries, []], ["train", "test"])
    path = _write(tmp_path / "mixed", "part-0.parquet", table)
    with pytest.warns(ShardWarning, match="no orientation entries"):
        report = audit_hash_shards(path.parent)
    assert report.n_leaked_images == 2
    from leakaudit.cli import main

    assert main(["group", str(path.parent), "--quiet", "--fail-on-leak"]) == 1


def test_malformed_orientation_lists_are_errors(tmp_path: Path) -> None:
    a, b = 5, 6
    nine = [(a + i, b + i) for i in range(9)]  # more than 8 orientations, no crop entries
    table = _entry_table([a, a], [b, b], [[(a, b)], nine], ["train", "test"])
    path = _write(tmp_path / "long", "part-3.parquet", table)
    with pytest.raises(ValueError, match=r"part-3.parquet: column 'orientation_phash' row 1 "
                                         r"\(id 'r1'\) has 9 entries"):  # fmt: skip
        read_hash_shards(path.parent)
    table = _entry_table([a, a], [b, b], [[(a, b)], [(a, b)]], ["train", "test"])
    holes = pa.array([[a], [a, None]], pa.list_(pa.uint64()))
    bad = table.set_column(table.schema.get_field_index("orientation_phash"),
                           "orientation_phash", holes)  # fmt: skip
    path = _write(tmp_path / "holes", "part-4.parquet", bad)
    with pytest.raises(ValueError, match=r"part-4.parquet: column 'orientation_phash' must not "
                                         r"hold null hashes; row 1 \(id 'r1'\)"):  # fmt: skip
        read_hash_shards(path.parent)


# ------------------------------------------------------------ duplicated columns (issue 23)


def test_duplicated_column_names_are_one_clear_error(tmp_path: Path) -> None:
    base = _minimal(["x", "y"])
    doubled = pa.Table.from_arrays(
        [*base.columns, pa.array(["u", "v"])], names=[*base.column_names, "split"]
    )
    path = _write(tmp_path / "dup", "part-9.parquet", doubled)
    with pytest.raises(ValueError, match=r"part-9.parquet: column 'split' appears 2 times"):
        read_hash_shards(path.parent)
    with pytest.raises(ValueError, match=r"block 0: column 'split' appears 2 times"):
        HashShards.from_arrow([doubled])
