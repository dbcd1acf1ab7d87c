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
from pathlib import Path

import imagegen
import pandas as pd
import pytest

from leakaudit import dhash_audit
from leakaudit.cli import main
from leakaudit.export import csv_paths, write_csv_tables

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
