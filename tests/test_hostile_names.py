"""File names with line breaks and with bytes that are not UTF-8, through every export.

Issue 23, points 11 and 12: a carriage return in a file name split CSV rows (Python's csv
module and pandas read 2 rows as 4), and a name that is not valid UTF-8 crashed
``scan --hashes-out`` after the whole audit (pandas 3 stores strings in Arrow when
pyarrow is installed, and Arrow strings are UTF-8 only).
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import imagegen
import pandas as pd
import pytest

from leakaudit import dhash_audit
from leakaudit.cleantree import MANIFEST_COLUMNS, MANIFEST_NAME
from leakaudit.cli import main
from leakaudit.export import (
    GROUP_COLUMNS,
    IMAGE_COLUMNS,
    NAME_COLUMNS,
    PAIR_COLUMNS,
    SPLIT_COLUMNS,
    csv_paths,
    write_csv_tables,
)

pytest.importorskip("pyarrow")


def _photo(seed: int) -> bytes:
    return imagegen.encode(imagegen.photo_like(seed, (160, 120)), "PNG")


def _csv_module_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as handle:
        return list(csv.DictReader(handle))


def _check_round_trip(csv_file: Path, document: dict[str, object]) -> None:
    """Each of the four CSV tables reads back, with both readers, as the JSON's rows."""
    for table, path in csv_paths(csv_file).items():
        expected = document[table]
        assert isinstance(expected, list)
        rows = _csv_module_rows(path)
        frame = pd.read_csv(path, keep_default_na=False, dtype=str)
        assert len(rows) == len(frame) == len(expected), (table, rows)
        for column in ("path", "path_a", "path_b", "split"):
            if rows and column in rows[0]:
                want = [str(record[column]) for record in expected]
                assert [row[column] for row in rows] == want, (table, column)
                assert frame[column].tolist() == want, (table, column)


@pytest.fixture
def cr_root(tmp_path: Path) -> Path:
    """train and test with a planted copy each way, the copies named with CR and LF."""
    root = tmp_path / "data"
    (root / "train").mkdir(parents=True)
    (root / "test").mkdir()
    (root / "train" / "a\rb.png").write_bytes(_photo(1))
    (root / "train" / "c\nd.png").write_bytes(_photo(2))
    (root / "train" / "plain.png").write_bytes(_photo(3))
    (root / "test" / "copy\r\r.png").write_bytes(_photo(1))
    (root / "test" / "line\r\nbreak.png").write_bytes(_photo(2))
    (root / "test" / "other.png").write_bytes(_photo(4))
    return root


def test_csv_tables_quote_carriage_returns(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "path": ["x\ry.png", "z\r.png", "w\n.png", "v.png"],
            "split": ["tr\rain", "test", "tr\rain", "test"],
            "hash": ["0" * 16, "0" * 16, "f" * 16, "f" * 16],
            "group_id": [0, 0, 1, 1],
        }
    )
    report = dhash_audit(frame)
    write_csv_tables(report, tmp_path / "t.csv")
    images = _csv_module_rows(tmp_path / "t.csv")
    assert [row["path"] for row in images] == frame["path"].tolist()
    assert [row["split"] for row in images] == frame["split"].tolist()
    read = pd.read_csv(tmp_path / "t.csv", keep_default_na=False, dtype=str)
    assert read["path"].tolist() == frame["path"].tolist()
    splits = csv_paths(tmp_path / "t.csv")["splits"]
    assert [row["split"] for row in _csv_module_rows(splits)] == ["tr\rain", "test"]
    assert pd.read_csv(splits)["split"].tolist() == ["tr\rain", "test"]
    pairs = csv_paths(tmp_path / "t.csv")["pairs"]
    assert len(_csv_module_rows(pairs)) == len(pd.read_csv(pairs)) == 2


@pytest.mark.parametrize("command", ["scan", "compare", "group"])
def test_cli_csv_round_trips_names_with_line_breaks(
    cr_root: Path, tmp_path: Path, command: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    common = ["--quiet", "--workers", "1", "--no-cache"]
    csv_file, report = out / "t.csv", out / "r.json"
    outputs = ["--csv", str(csv_file), "--json", str(report)]
    if command == "scan":
        argv = ["scan", str(cr_root), *common, *outputs]
    elif command == "compare":
        argv = ["compare", str(cr_root / "train"), str(cr_root / "test"), *common, *outputs]
    else:
        hashes = out / "hashes"
        assert main(["scan", str(cr_root), *common, "--hashes-out", str(hashes)]) == 0
        argv = ["group", str(hashes), "--quiet", "--workers", "1", *outputs]
    assert main(argv) == 0
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["total_images"] == 6
    assert document["n_leaked_images"] == 4
    _check_round_trip(csv_file, document)


@pytest.mark.skipif(sys.platform != "linux", reason="names of any bytes: a POSIX file system")
def test_hashes_out_and_group_keep_non_utf8_names(tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "train").mkdir(parents=True)
    (root / "test").mkdir()
    train_name = os.fsencode(root / "train") + b"/\xff\xfe.png"
    test_name = os.fsencode(root / "test") + b"/caf\xe9\r.png"
    with open(train_name, "wb") as handle:
        handle.write(_photo(7))
    with open(test_name, "wb") as handle:
        handle.write(_photo(7))
    (root / "train" / "plain.png").write_bytes(_photo(8))
    (root / "test" / "other.png").write_bytes(_photo(9))
    out = tmp_path / "out"
    out.mkdir()
    hashes = out / "hashes"
    scanned = [
        "--csv",
        str(out / "s.csv"),
        "--json",
        str(out / "s.json"),
        "--html",
        str(out / "s.html"),
    ]
    common = ["--quiet", "--workers", "1", "--no-cache"]
    assert main(["scan", str(root), *common, "--hashes-out", str(hashes), *scanned]) == 0
    from leakaudit.shards import read_hash_shards

    shards = read_hash_shards(hashes)
    assert shards.paths is not None
    # Read back as the very paths: each names the file it was made from.
    assert {os.fsencode(path) for path in shards.paths} >= {train_name, test_name}
    assert all(os.path.isfile(path) for path in shards.paths)
    grouped = ["--csv", str(out / "g.csv"), "--json", str(out / "g.json")]
    grouped += ["--html", str(out / "g.html")]
    assert main(["group", str(hashes), "--quiet", "--workers", "1", *grouped]) == 0
    for prefix in ("s", "g"):
        document = json.loads((out / f"{prefix}.json").read_text(encoding="utf-8"))
        assert document["n_leaked_images"] == 2
        rows = _csv_module_rows(out / f"{prefix}.csv")
        assert len(rows) == 4
        names = {os.fsencode(row["path"]) for row in rows}
        # The CSV holds the original bytes: absolute from group, as listed from scan.
        assert any(name.endswith(b"/\xff\xfe.png") for name in names)
        assert any(name.endswith(b"/caf\xe9\r.png") for name in names)
        pairs = _csv_module_rows(csv_paths(out / f"{prefix}.csv")["pairs"])
        assert len(pairs) == 1
        html = (out / f"{prefix}.html").read_text(encoding="utf-8")
        assert "fe.png<" in html  # escaped, in a file that is valid UTF-8


@pytest.fixture(params=[True, False], ids=["arrow-strings", "object-strings"])
def string_inference(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Run under pandas' default text inference (pyarrow-backed ``str`` in pandas 3) and without."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the option is deprecated in pandas 3 (always on in 4)
        try:
            previous = pd.get_option("future.infer_string")
        except KeyError:  # pandas < 2.1
            pytest.skip("this pandas has no future.infer_string option")
        pd.set_option("future.infer_string", request.param)
    try:
        yield bool(request.param)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pd.set_option("future.infer_string", previous)


def _read_back(path: Path) -> pd.DataFrame:
    """A CSV table read back as docs/output.md says ("Reading the files back")."""
    return pd.read_csv(
        path, encoding_errors="surrogateescape", dtype=dict.fromkeys(NAME_COLUMNS, object)
    )


@pytest.mark.skipif(sys.platform != "linux", reason="names of any bytes: a POSIX file system")
def test_non_utf8_names_pass_through_every_output(tmp_path: Path, string_inference: bool) -> None:
    """Issue 35, point 8: ``compare`` and ``--show`` exited 2 after writing the report and CSVs
    (pandas 3 + pyarrow refuse the surrogate escapes of such names), and ``read_csv(...,
    encoding_errors="surrogateescape")`` failed on the CSVs that docs/output.md said read back."""
    root = tmp_path / "data"
    (root / "train").mkdir(parents=True)
    (root / "test").mkdir()
    train_name = os.fsencode(root / "train") + b"/caf\xe9.png"
    test_name = os.fsencode(root / "test") + b"/\xff\xfe copy.png"
    for name in (train_name, test_name):
        with open(name, "wb") as handle:
            handle.write(_photo(11))
    (root / "train" / "plain.png").write_bytes(_photo(12))
    (root / "test" / "other.png").write_bytes(_photo(13))
    out = tmp_path / "out"
    out.mkdir()
    common = ["--quiet", "--workers", "1", "--no-cache"]
    runs = {
        "scan": ["scan", str(root), *common, "--hashes-out", str(out / "hashes")],
        "compare": ["compare", str(root / "train"), str(root / "test"), *common],
    }
    for command, argv in runs.items():
        outputs = ["--csv", str(out / f"{command}.csv"), "--json", str(out / f"{command}.json")]
        outputs += ["--html", str(out / f"{command}.html"), "--show", str(out / command)]
        assert main([*argv, *outputs]) == 0, command
    group = ["group", str(out / "hashes"), "--images-root", str(root), "--quiet"]
    assert main([*group, "--csv", str(out / "group.csv"), "--show", str(out / "group")]) == 0
    for command in ("scan", "compare", "group"):
        assert len(list((out / command).glob("leak_*.png"))) == 1, command
        images = _read_back(out / f"{command}.csv")
        assert len(images) == 4
        names = {os.fsencode(os.path.join(root, path)) for path in images["path"]}
        assert {train_name, test_name} <= names, command  # each names its file, byte for byte
        pairs = _read_back(csv_paths(out / f"{command}.csv")["pairs"])
        pair = [os.fsencode(p).rsplit(b"/", 1)[-1] for p in pairs[["path_a", "path_b"]].iloc[0]]
        assert pair == [b"caf\xe9.png", b"\xff\xfe copy.png"], command
    assert main(["clean", str(root), "--out", str(out / "clean"), *common]) == 0
    manifest = _read_back(out / "clean" / MANIFEST_NAME)
    assert b"caf\xe9.png" in {os.fsencode(p).rsplit(b"/", 1)[-1] for p in manifest["old_path"]}


def test_name_columns_cover_every_text_column_that_holds_a_name() -> None:
    assert {"old_path", "new_path", "old_split", "new_split", "reason"} <= set(MANIFEST_COLUMNS)
    assert {c for c in MANIFEST_COLUMNS if c not in ("action", "group_id")} <= set(NAME_COLUMNS)
    for columns in (IMAGE_COLUMNS, PAIR_COLUMNS, GROUP_COLUMNS, SPLIT_COLUMNS):
        named = [c for c in columns if ("path" in c or "split" in c) and not c.startswith("n_")]
        assert set(named) <= set(NAME_COLUMNS), columns
