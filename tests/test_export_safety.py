"""Issue #11: the CSV, JSON, HTML and text outputs are safe to write and to read, and cheap.

- Every output file is replaced through :func:`leakaudit.safe_io.atomic_open`: an output path
  that is a hard link or a symbolic link to a user's file never writes into that file, and a
  failed write leaves no partial file.
- The tables are built for all groups at once; their content is exactly what the
  implementation before issue #11 (commit dc2635b) gave, which is kept below as the reference.
- CSV text cells that a spreadsheet would run as a formula are quoted; JSON holds only valid
  Unicode (undecodable bytes of file names as ``\\xNN``); the text report shows names through
  :func:`leakaudit._text.printable`.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray

from leakaudit import LeakageReport, audit_hash_table, dhash_audit
from leakaudit._export_encoding import write_csv
from leakaudit.copykind import copy_kind
from leakaudit.distances import PairDistances
from leakaudit.export import (
    GROUP_COLUMNS,
    PAIR_COLUMNS,
    SPLIT_COLUMNS,
    csv_paths,
    group_table,
    image_table,
    pair_table,
    report_dict,
    split_table,
    write_csv_tables,
    write_json,
)
from leakaudit.frames import hash_values_from_frame
from leakaudit.hashing import HashTable, OrientationHashes, hashes_to_hex
from leakaudit.htmlreport import write_html

SPLITS = ["train", "val", "test"]


# --------------------------------------------------------------------------- seeded reports


def _flips(rng: np.random.Generator, size: int, most: int) -> NDArray[np.uint64]:
    """Masks of 0..most random bits."""
    masks = np.zeros(size, dtype=np.uint64)
    count = rng.integers(0, most + 1, size)
    for k in range(most):
        bit = rng.integers(0, 64, size).astype(np.uint64)
        masks ^= (count > k).astype(np.uint64) << bit
    return masks


def planted_table(
    n: int = 1600, *, seed: int = 0, dihedral: bool = False
) -> tuple[HashTable, list[str | None]]:
    """Random hashes with planted groups: many small ones, two over 200 members, blank images
    (low-information, some byte-identical), unreadable rows, rows without a split; with
    ``dihedral``, mirrored copies that match only through their orientation entries."""
    rng = np.random.default_rng(seed)
    phash = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    dhash = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    order = rng.permutation(n)
    sizes = rng.choice([2, 3, 4, 6, 9], size=n // 8, p=[0.6, 0.2, 0.1, 0.06, 0.04]).tolist()
    position = 0
    for size in [*sizes, *([260, 230] if n >= 1000 else [])]:
        members = order[position : position + size]
        position += size
        most = 6 if size > 200 else 4
        phash[members[1:]] = phash[members[0]] ^ _flips(rng, size - 1, most)
        dhash[members[1:]] = dhash[members[0]] ^ _flips(rng, size - 1, most)
    for _ in range(n // 100):  # chains: links 3 bits apart, ends far beyond the threshold
        members = order[position : position + 6]
        position += 6
        for column in (phash, dhash):
            steps = np.zeros(6, dtype=np.uint64)
            steps[0] = column[members[0]]
            for k in range(1, 6):
                bits = rng.choice(64, 3, replace=False).astype(np.uint64)
                steps[k] = np.bitwise_or.reduce(np.uint64(1) << bits)
            column[members] = np.bitwise_xor.accumulate(steps)
    blanks = order[position : position + n // 25]
    position += n // 25
    low = np.zeros(n, dtype=bool)
    low[blanks] = True
    phash[blanks] = 0
    dhash[blanks] = _flips(rng, len(blanks), 2)
    digest = np.zeros(n, dtype=np.uint64)
    digest[blanks] = rng.integers(1, 12, len(blanks)).astype(np.uint64)
    valid = rng.random(n) > 0.02
    for column in (phash, dhash, digest):
        column[~valid] = 0
    low &= valid
    orientations = None
    if dihedral:
        turned_p, turned_d = phash.copy(), dhash.copy()
        mirrored = order[position : position + n // 20]
        sources = rng.choice(order[: n // 2], size=len(mirrored))
        turned_p[mirrored] = phash[sources] ^ _flips(rng, len(mirrored), 3)
        turned_d[mirrored] = dhash[sources] ^ _flips(rng, len(mirrored), 3)
        phash[mirrored] = rng.integers(0, 2**64, size=len(mirrored), dtype=np.uint64)
        dhash[mirrored] = rng.integers(0, 2**64, size=len(mirrored), dtype=np.uint64)
        rows = np.flatnonzero(valid & ~low)
        near_ties = rows[rng.random(len(rows)) < 0.1]  # a second entry for these
        owner = np.sort(np.concatenate([rows, near_ties])).astype(np.int64)
        second = np.r_[False, owner[1:] == owner[:-1]]
        entry_p, entry_d = turned_p[owner], turned_d[owner]
        entry_p[second] ^= _flips(rng, int(second.sum()), 8)
        entry_d[second] ^= _flips(rng, int(second.sum()), 8)
        orientations = OrientationHashes(owner=owner, phash=entry_p, dhash=entry_d)
    split: list[str | None] = [SPLITS[i] for i in rng.choice(3, size=n, p=[0.7, 0.15, 0.15])]
    for i in rng.choice(n, size=n // 100, replace=False).tolist():
        split[i] = None
    table = HashTable(
        sources=[f"/data/{s}/img_{i:05d}.png" for i, s in enumerate(split)],
        phash=phash,
        dhash=dhash,
        digest=digest,
        low_information=low,
        valid=valid,
        errors={i: "cannot identify image file" for i in np.flatnonzero(~valid).tolist()},
        orientations=orientations,
    )
    return table, split


def audited(table: HashTable, split: list[str | None], **options: Any) -> LeakageReport:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # planted big groups warn of chaining
        # The bare threshold, as the previous implementation linked (the planted
        # hashes have no images to verify).
        options.setdefault("verify", False)
        return audit_hash_table(table, split, **options)


def with_embedding_pairs(report: LeakageReport, *, seed: int = 0) -> LeakageReport:
    """Embedding-stage pairs in leaked and big groups, some given twice, one across groups."""
    assert report.table is not None
    rng = np.random.default_rng(seed)
    labels = report.table["group_id"].to_numpy()
    sizes = report.table.groupby("group_id").size()
    chosen = [*sizes.index[sizes > 200].tolist(), *rng.choice(report.leaked_groups["group_id"], 40)]
    pairs = []
    for group in chosen:
        members = np.flatnonzero(labels == group)
        for _ in range(6):
            a, b = rng.choice(members, 2, replace=False).tolist()
            pairs.append((a, b, float(rng.uniform(0.9, 1.0)), bool(rng.random() < 0.5)))
    pairs += [(b, a, 0.5, joined) for a, b, _, joined in pairs[:10]]  # the last value counts
    pairs.append((0, len(labels) - 1, 0.95, True))
    frame = pd.DataFrame(pairs, columns=["row_a", "row_b", "similarity", "joined_groups"])
    return dataclasses.replace(report, embedding_pairs=frame)


def hand_built(*, seed: int = 0, with_threshold: bool = True) -> LeakageReport:
    """dhash_audit on a user's frame: string group ids, an odd index, extra columns, cells that
    look like formulas, a group over 200 members, missing hashes."""
    rng = np.random.default_rng(seed)
    n = 600
    group = rng.integers(0, 120, n)
    group[:230] = 999
    base = rng.integers(0, 2**64, size=1000, dtype=np.uint64)
    texts = np.array(hashes_to_hex(base[group] ^ _flips(rng, n, 5)), dtype=object)
    texts[rng.random(n) < 0.03] = None
    frame = pd.DataFrame(
        {
            "path": [f"=cmd|' /C calc'!A{i}.png" if i % 97 == 0 else f"-{i}.png" for i in range(n)],
            "split": rng.choice(["+train", "test", "@val"], n),
            "hash": texts,
            "group_id": [f"g{g:03d}" for g in group],
            "label": rng.integers(-5, 5, n),
            "score": np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n)),
            "note": pd.Series([None if i % 3 else "-x" for i in range(n)], dtype=object),
        },
        index=rng.permutation(n) * 3,
    )
    parameters = {"method": "dhash", "threshold": 6} if with_threshold else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dhash_audit(frame, parameters=parameters)


def _scenarios() -> Iterator[tuple[str, LeakageReport]]:
    table, split = planted_table()
    yield "phash+dhash", audited(table, split)
    yield "dhash", audited(table, split, method="dhash", threshold=5)
    yield "per-source", audited(table, split, threshold={"test": 4, "*": 8})
    yield "embedding", with_embedding_pairs(audited(table, split))
    turned, turned_split = planted_table(seed=1, dihedral=True)
    yield "dihedral", audited(turned, turned_split, dihedral=True)
    yield "hand-built", hand_built()
    yield "no-threshold", hand_built(with_threshold=False)


@pytest.fixture(scope="module")
def scenarios() -> dict[str, LeakageReport]:
    return dict(_scenarios())


@pytest.fixture(scope="module")
def small_report() -> LeakageReport:
    table, split = planted_table(200, seed=3)
    return audited(table, split)


# ------------------------------------------------------------------- 1. atomic replacement

WRITERS: dict[str, Callable[[LeakageReport, Path], Any]] = {
    "csv": write_csv_tables,
    "json": write_json,
    "html": write_html,
}


def _targets(kind: str, path: Path) -> list[Path]:
    return list(csv_paths(path).values()) if kind == "csv" else [path]


def _check_output(kind: str, path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    if kind == "csv":
        assert text.startswith("path,split,hash")
    elif kind == "json":
        assert json.loads(text)["format"] == "leakaudit-report"
    else:
        assert text.startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("kind", sorted(WRITERS))
@pytest.mark.parametrize("link", ["hard", "symbolic"])
def test_outputs_replace_a_link_and_leave_the_linked_file_alone(
    small_report: LeakageReport, tmp_path: Path, kind: str, link: str
) -> None:
    users = tmp_path / "users"
    users.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    path = out / f"report.{kind}"
    before = {}
    for number, target in enumerate(_targets(kind, path)):
        theirs = users / f"precious_{number}.dat"
        theirs.write_bytes(b"the user's data %d\n" % number)
        os.utime(theirs, ns=(1_000_000_000, 1_000_000_000))
        if link == "hard":
            os.link(theirs, target)
        else:
            os.symlink(theirs, target)
        stat = theirs.stat()
        before[theirs] = (theirs.read_bytes(), stat.st_ino, stat.st_mtime_ns, stat.st_nlink)
    WRITERS[kind](small_report, path)
    for theirs, (content, inode, mtime, _) in before.items():
        stat = theirs.stat()
        assert theirs.read_bytes() == content
        assert (stat.st_ino, stat.st_mtime_ns, stat.st_nlink) == (inode, mtime, 1)
    for target in _targets(kind, path):
        assert not target.is_symlink()
        assert target.stat().st_ino not in {inode for _, inode, _, _ in before.values()}
    _check_output(kind, path)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in _targets(kind, path))


def _unencodable_report(n: int = 3000) -> LeakageReport:
    """A report whose last image name cannot be encoded at all (a lone high surrogate)."""
    names = [f"img_{i}.png" for i in range(n - 1)] + ["broken_\ud800.png"]
    frame = pd.DataFrame(
        {
            "path": pd.Series(names, dtype=object),
            "split": ["train", "test"] * (n // 2) + ["train"] * (n % 2),
            "hash": [f"{i:016x}" for i in range(n)],
            "group_id": range(n),
        }
    )
    return dhash_audit(frame)


def test_a_csv_write_that_fails_midway_leaves_no_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    with pytest.raises(UnicodeEncodeError):
        write_csv_tables(_unencodable_report(), path)
    assert list(tmp_path.iterdir()) == []  # no truncated table, no temporary file


def test_a_failed_write_leaves_the_previous_outputs_as_they_were(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    for target in csv_paths(path).values():
        target.write_text("previous\n")
    with pytest.raises(UnicodeEncodeError):
        write_csv_tables(_unencodable_report(), path)
    assert {p.read_text() for p in tmp_path.iterdir()} == {"previous\n"}
    assert len(list(tmp_path.iterdir())) == 4
    # JSON fails while encoding the images, long after the file was started.
    report = _unencodable_report(10)
    assert report.table is not None
    report.table["extra"] = pd.Series([object()] * len(report.table), dtype=object)
    target = tmp_path / "report.json"
    target.write_text("previous\n")
    with pytest.raises(TypeError, match="not JSON serializable"):
        write_json(report, target)
    assert target.read_text() == "previous\n"
    assert len(list(tmp_path.iterdir())) == 5


# ------------------------------------------------- 2. the same tables, built without loops


def _normalised(frame: pd.DataFrame) -> pd.DataFrame:
    values: pd.DataFrame = frame.astype(object).where(frame.notna(), None)
    return values


def test_scenarios_cover_every_kind_of_pair_and_group(scenarios: dict[str, LeakageReport]) -> None:
    stages = {name: set(pair_table(report)["stage"]) for name, report in scenarios.items()}
    assert {"exact bytes", "hash", "transitive"} <= stages["phash+dhash"]
    assert "embedding" in stages["embedding"]
    assert "dihedral hash" in stages["dihedral"]
    for name in ("phash+dhash", "dihedral", "hand-built"):
        report = scenarios[name]
        assert report.table is not None
        sizes = report.table.groupby("group_id").size()
        assert (sizes > 200).any() and report.n_within_split_groups > 0
        assert report.n_leaked_groups > 50
    assert scenarios["phash+dhash"].n_unreadable > 0


@pytest.fixture(scope="module")
def reference(scenarios: dict[str, LeakageReport]) -> Callable[[str], dict[str, Any]]:
    """The reference tables and JSON document of a scenario, computed once (they are slow)."""
    found: dict[str, dict[str, Any]] = {}

    def get(name: str) -> dict[str, Any]:
        if name not in found:
            report = scenarios[name]
            tables = {
                "splits": reference_split_table(report),
                "groups": reference_group_table(report),
                "pairs": reference_pair_table(report),
            }
            found[name] = {**tables, "document": reference_report_dict(report, tables)}
        return found[name]

    return get


SCENARIOS = [name for name, _ in _scenarios()]


@pytest.mark.parametrize("name", SCENARIOS)
def test_tables_are_those_of_the_previous_implementation(
    scenarios: dict[str, LeakageReport], reference: Callable[[str], dict[str, Any]], name: str
) -> None:
    report, expected = scenarios[name], reference(name)
    pd.testing.assert_frame_equal(group_table(report), expected["groups"])
    pd.testing.assert_frame_equal(split_table(report), expected["splits"])
    pairs = pair_table(report)
    if name in ("hand-built", "no-threshold"):
        # A big group with no cross pair left an empty frame in the old concat, which turned
        # the text columns into object dtype; the values are the same.
        pd.testing.assert_frame_equal(_normalised(pairs), _normalised(expected["pairs"]))
    else:
        pd.testing.assert_frame_equal(pairs, expected["pairs"])


@pytest.mark.parametrize("name", SCENARIOS)
def test_json_and_csv_files_are_those_of_the_previous_implementation(
    scenarios: dict[str, LeakageReport],
    reference: Callable[[str], dict[str, Any]],
    name: str,
    tmp_path: Path,
) -> None:
    report, expected = scenarios[name], reference(name)
    written = write_json(report, tmp_path / "report.json").read_text(encoding="utf-8")
    assert written == json.dumps(expected["document"], indent=2) + "\n"
    assert report_dict(report) == expected["document"]
    without = {key: value for key, value in expected["document"].items() if key != "images"}
    assert report_dict(report, include_images=False) == without
    if name in ("hand-built", "no-threshold"):
        return  # cells that look like formulas: see test_csv_defuses_formula_cells...
    paths = write_csv_tables(report, tmp_path / "table.csv")
    frames = [image_table(report), expected["pairs"], expected["groups"], expected["splits"]]
    for path, frame in zip(paths, frames, strict=True):
        buffer = io.BytesIO()
        frame.to_csv(buffer, index=False, encoding="utf-8", errors="surrogateescape")
        assert path.read_bytes() == buffer.getvalue(), path.name


# ------------------------------------------------------------------------ 3. CSV injection


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_csv_defuses_formula_cells_in_text_columns_only(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "path": ['=HYPERLINK("http://x")', "+1.png", "@SUM(A1).png", "\tx.png", "ok.png"],
            "split": ["-train", "test", "@val", "-train", "test"],
            "hash": ["0", "1", "3", None, "ff"],
            "group_id": [1, 1, 1, 2, 3],
            "label": [-3, 4, -1, 0, 2],
            "score": [-0.5, 1.0, float("nan"), 2.0, -1e-3],
            "note": pd.Series(["-x", None, 5, "=1+1", "plain"], dtype=object),
        }
    )
    frame["hash"] = frame["hash"].str.rjust(16, "0")
    report = dhash_audit(frame, parameters={"method": "dhash", "threshold": 4})
    paths = csv_paths(tmp_path / "t.csv")
    write_csv_tables(report, tmp_path / "t.csv")
    images = _csv_rows(paths["images"])
    assert [row["path"] for row in images] == [
        '\'=HYPERLINK("http://x")',
        "'+1.png",
        "'@SUM(A1).png",
        "'\tx.png",
        "ok.png",
    ]
    assert [row["split"] for row in images] == ["'-train", "test", "'@val", "'-train", "test"]
    assert [row["note"] for row in images] == ["'-x", "", "5", "'=1+1", "plain"]
    # Numbers stay numbers, negative ones included.
    assert [row["label"] for row in images] == ["-3", "4", "-1", "0", "2"]
    assert [row["score"] for row in images] == ["-0.5", "1.0", "", "2.0", "-0.001"]
    pairs = _csv_rows(paths["pairs"])
    assert {(row["split_a"], row["split_b"]) for row in pairs} == {
        ("'-train", "test"),
        ("'-train", "'@val"),
        ("test", "'@val"),
    }
    assert {row["path_b"] for row in pairs} == {"'+1.png", "'@SUM(A1).png"}
    groups = _csv_rows(paths["groups"])
    assert groups[0]["splits_involved"] == "'-train, test, @val"
    assert groups[0]["members_by_split"] == "'-train:1, test:1, @val:1"
    assert [row["split"] for row in _csv_rows(paths["splits"])] == ["'-train", "test", "'@val"]
    # JSON is no spreadsheet format: it keeps the values.
    document = json.loads(write_json(report, tmp_path / "r.json").read_text())
    assert document["images"][0]["path"] == '=HYPERLINK("http://x")'
    assert document["pairs"][0]["split_a"] == "-train"
    assert document["images"][2]["note"] == 5
    # The tables themselves are unchanged too.
    assert image_table(report)["path"].tolist()[0] == '=HYPERLINK("http://x")'


def test_csv_defuses_a_leading_carriage_return(tmp_path: Path) -> None:
    frame = pd.DataFrame({"path": ["\rx.png"], "split": ["train"], "hash": ["0" * 16]})
    frame["group_id"] = 0
    write_csv_tables(dhash_audit(frame), tmp_path / "t.csv")
    # Defused, and quoted: a carriage return inside a cell no longer ends the row.
    assert (tmp_path / "t.csv").read_bytes().split(b"\r\n")[1].startswith(b"\"'\r")
    assert [row["path"] for row in _csv_rows(tmp_path / "t.csv")] == ["'\rx.png"]


def test_clean_manifest_defuses_formula_cells_as_the_scan_csvs_do(tmp_path: Path) -> None:
    """Issue 35.10: the manifest wrote ``=cmd.jpg`` and friends as bare cells."""
    from leakaudit.cleantree import PlannedEntry, write_manifest

    names = ["=cmd.jpg", "+1.jpg", "-x.jpg", "@SUM(A1).jpg", "\tt.jpg", "\rr.jpg", "ok.jpg"]
    entries = [PlannedEntry(f"train/{n}", n, "train", "test", "moved", 3) for n in names]
    entries.append(PlannedEntry("=top.txt", "=top.txt", "", "", "unaudited", reason="-why"))
    buffer = io.StringIO()
    write_manifest(buffer, entries)
    path = tmp_path / "manifest.csv"
    path.write_text(buffer.getvalue(), newline="")
    rows = _csv_rows(path)
    assert [row["new_path"] for row in rows] == [
        "'=cmd.jpg", "'+1.jpg", "'-x.jpg", "'@SUM(A1).jpg", "'\tt.jpg", "'\rr.jpg", "ok.jpg",
        "'=top.txt",
    ]  # fmt: skip
    assert rows[-1]["old_path"] == "'=top.txt" and rows[-1]["reason"] == "'-why"
    assert rows[0]["old_path"] == "train/=cmd.jpg"  # only a cell's first character counts
    assert [row["group_id"] for row in rows[:2]] == ["3", "3"]  # numbers stay numbers
    # The same rule, from one place, as the scan's CSVs.
    frame = pd.DataFrame({"path": names, "split": "train", "hash": "0" * 16, "group_id": 0})
    write_csv_tables(dhash_audit(frame), tmp_path / "t.csv")
    assert [row["path"] for row in _csv_rows(tmp_path / "t.csv")] == [
        row["new_path"] for row in rows[:-1]
    ]


# ---------------------------------------------------------------- 4. non-UTF-8 file names


def _hostile_names_report() -> LeakageReport:
    """A leak whose test copy has a Latin-1 (not UTF-8) name, and one with control characters."""
    names = [
        "/d/train/cafe.jpg",
        "/d/test/" + os.fsdecode(b"caf\xe9.jpg"),
        "/d/train/evil\n  group 99: 2 images [train:1, test:1]\x1b[31m.png",
        "/d/test/b.jpg",
        "/d/val/\x1b]0;owned\x07c.jpg",
    ]
    hashes = np.array([1, 1, 2**40, 2**40, 2**60], dtype=np.uint64)
    table = HashTable(
        sources=names,
        phash=hashes,
        dhash=hashes.copy(),
        digest=np.zeros(5, dtype=np.uint64),
        low_information=np.zeros(5, dtype=bool),
        valid=np.ones(5, dtype=bool),
    )
    return audited(table, ["train", "test", "train", "test", "val"])


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_json_holds_non_utf8_names_as_valid_text(tmp_path: Path) -> None:
    report = _hostile_names_report()
    path = write_json(report, tmp_path / "report.json")
    with open(path, encoding="utf-8", errors="strict") as handle:
        text = handle.read()
    document = json.loads(text)
    for value in _strings(document):
        value.encode("utf-8", errors="strict")  # no lone surrogate anywhere
    assert document["images"][1]["path"] == "/d/test/caf\\xe9.jpg"
    pairs = document["pairs"]
    assert "/d/test/caf\\xe9.jpg" in {pair["path_b"] for pair in pairs}
    # Control characters are JSON's to escape: the name is otherwise unchanged.
    assert document["images"][2]["path"] == report.table["path"].iloc[2]  # type: ignore[index]
    assert report_dict(report) == document


def test_csv_keeps_the_original_bytes_of_non_utf8_names(tmp_path: Path) -> None:
    paths = write_csv_tables(_hostile_names_report(), tmp_path / "table.csv")
    assert b"/d/test/caf\xe9.jpg" in paths[0].read_bytes()
    assert b"/d/test/caf\xe9.jpg" in paths[1].read_bytes()  # the pairs table


# ------------------------------------------------------------------------ 5. text report


def test_text_report_shows_names_without_control_characters() -> None:
    text = _hostile_names_report().to_text()
    assert "\x1b" not in text and "\x07" not in text
    for line in text.splitlines():
        assert line.isprintable(), line
    # The newline in a name forges no report line; the names still read.
    assert not any(line.startswith("  group 99") for line in text.splitlines())
    assert "evil\\x0a  group 99: 2 images [train:1, test:1]\\x1b[31m.png" in text
    assert "/d/test/caf\\xe9.jpg" in text


def test_text_report_escapes_split_names_and_keeps_the_columns_aligned() -> None:
    frame = pd.DataFrame(
        {
            "path": ["a.png", "b.png", "c.png"],
            "split": ["train", "te\x1b[2Jst", "train"],
            "group_id": [1, 1, 2],
        }
    )
    text = dhash_audit(frame).to_text()
    assert "\x1b" not in text
    header, *rows = text.split("\n\n")[1].splitlines()
    assert rows[1].startswith("te\\x1b[2Jst  ")
    assert {len(row) for row in rows} == {len(header)}


# =========================================================================================
# Reference: the tables as the implementation before issue #11 (commit dc2635b) built them,
# one group at a time. Kept verbatim but for names, to pin the output of the vectorised code.

_ALL_PAIRS_MAX_MEMBERS = 200


def _reference_table(report: LeakageReport) -> pd.DataFrame:
    if report.table is None:
        raise ValueError("report has no table")
    return report.table


def _reference_empty(columns: list[str]) -> pd.DataFrame:
    frame: pd.DataFrame = pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return frame


def _reference_member_index(table: pd.DataFrame) -> tuple[Any, NDArray[Any], NDArray[Any]]:
    positions = pd.Series(np.arange(len(table)), index=table.index)
    by_group = positions.groupby(table["group_id"].to_numpy())
    splits = table["split"].astype(object).to_numpy()
    paths = (
        np.array([str(p) for p in table["path"]], dtype=object)
        if "path" in table
        else positions.astype(str).to_numpy()
    )
    return by_group, splits, paths


def _reference_similarities(report: LeakageReport) -> dict[tuple[int, int], float]:
    pairs = getattr(report, "embedding_pairs", None)
    if pairs is None or len(pairs) == 0:
        return {}
    low = np.minimum(pairs["row_a"].to_numpy(dtype=np.int64), pairs["row_b"].to_numpy(np.int64))
    high = np.maximum(pairs["row_a"].to_numpy(dtype=np.int64), pairs["row_b"].to_numpy(np.int64))
    values = pairs["similarity"].to_numpy(dtype=np.float64)
    return {(int(x), int(y)): float(v) for x, y, v in zip(low, high, values, strict=True)}


def _reference_stages(
    a: Any, b: Any, plain: Any, distance: Any, limit: Any, digests: Any, low: Any, similarity: Any
) -> NDArray[Any]:
    stage = np.full(len(a), "transitive", dtype=object)
    stage[~np.isnan(similarity)] = "embedding"
    if limit is not None:
        hashable = ~low[a] & ~low[b]
        linked = (distance <= limit) & hashable
        stage[linked] = "dihedral hash"
        stage[linked & (plain <= limit)] = "hash"
    same_bytes = np.array(
        [digests[x] is not None and digests[x] == digests[y] for x, y in zip(a, b, strict=True)],
        dtype=bool,
    )
    stage[same_bytes] = "exact bytes"
    return stage


def reference_pair_table(report: LeakageReport) -> pd.DataFrame:
    table = _reference_table(report)
    distances = PairDistances.of_report(report, table)
    columns, valid, threshold = distances.columns, distances.valid, distances.threshold
    digests = (
        table["digest"].astype(object).where(table["digest"].notna(), None).to_numpy()
        if "digest" in table
        else np.full(len(table), None, dtype=object)
    )
    low = (
        table["low_information"].fillna(False).to_numpy(dtype=bool)
        if "low_information" in table
        else np.zeros(len(table), dtype=bool)
    )
    similar = _reference_similarities(report)
    split_rank = {str(s): r for r, s in enumerate(report.images_by_split.index)}
    by_group, splits, paths = _reference_member_index(table)
    frames: list[pd.DataFrame] = []
    for group_id in report.leaked_groups["group_id"].tolist():
        rows = by_group.get_group(group_id).to_numpy()
        rows = rows[valid[rows]]
        if len(rows) <= _ALL_PAIRS_MAX_MEMBERS or threshold is None:
            ii, jj = np.triu_indices(len(rows), k=1)
        elif distances.entries is not None:
            ii, jj = np.triu_indices(len(rows), k=1)
            near = distances(rows[ii], rows[jj]) <= threshold
            ii, jj = ii[near], jj[near]
        else:
            from leakaudit.search import pairs_within

            found = pairs_within(columns[0][rows], threshold)
            ii, jj = found[:, 0], found[:, 1]
            member = set(rows.tolist())
            linked = [p for p in similar if p[0] in member and p[1] in member]
            if linked:
                position = {int(r): i for i, r in enumerate(rows)}
                ii = np.concatenate([ii, [position[p[0]] for p in linked]]).astype(np.int64)
                jj = np.concatenate([jj, [position[p[1]] for p in linked]]).astype(np.int64)
                unique = np.unique(np.stack([ii, jj], axis=1), axis=0)
                ii, jj = unique[:, 0], unique[:, 1]
        a, b = rows[ii], rows[jj]
        cross = splits[a] != splits[b]
        a, b = a[cross], b[cross]
        rank_a = np.array([split_rank.get(str(s), len(split_rank)) for s in splits[a]], dtype=int)
        rank_b = np.array([split_rank.get(str(s), len(split_rank)) for s in splits[b]], dtype=int)
        swap = rank_b < rank_a
        a, b = np.where(swap, b, a), np.where(swap, a, b)
        plain = distances.plain(a, b)
        distance = distances(a, b)
        limit = distances.limit(a, b)
        similarity = np.array(
            [similar.get((min(x, y), max(x, y)), np.nan) for x, y in zip(a, b, strict=True)],
            dtype=np.float64,
        )
        keep = np.ones(len(a), dtype=bool)
        if len(rows) > _ALL_PAIRS_MAX_MEMBERS and limit is not None:
            keep = (distance <= limit) | ~np.isnan(similarity)
        part = pd.DataFrame(
            {
                "group_id": group_id,
                "split_a": splits[a],
                "path_a": paths[a],
                "split_b": splits[b],
                "path_b": paths[b],
                "distance": distance,
                "stage": _reference_stages(a, b, plain, distance, limit, digests, low, similarity),
                "similarity": similarity,
                "copy_kind": "",
                "within_threshold": (
                    distance <= limit if limit is not None else np.full(len(a), pd.NA, dtype=object)
                ),
                # Issue 23's column: no group here is a big identical one.
                "listed": "all",
            }
        )[keep]
        # Issue 25's column: the stage and distance in words (no edges in these scenarios).
        part["copy_kind"] = [
            copy_kind(stage, distance=bits)
            for stage, bits in zip(part["stage"], part["distance"], strict=True)
        ]
        frames.append(part.sort_values("distance", kind="stable"))
    if not frames:
        return _reference_empty([*PAIR_COLUMNS, "copy_kind"])
    pairs = pd.concat(frames, ignore_index=True)
    pairs["distance"] = pairs["distance"].astype(int)
    if threshold is not None:
        pairs["within_threshold"] = pairs["within_threshold"].astype(bool)
    result: pd.DataFrame = pairs[[*PAIR_COLUMNS, "copy_kind"]]
    return result


def reference_group_table(report: LeakageReport) -> pd.DataFrame:
    table = _reference_table(report)
    leaked = report.leaked_groups.copy()
    leaked.insert(1, "kind", "cross_split")
    sizes = table.groupby("group_id").size()
    leaked_ids = set(report.leaked_groups["group_id"].tolist())
    within_ids = [g for g in sizes.index[sizes > 1] if g not in leaked_ids]
    within = pd.DataFrame(columns=GROUP_COLUMNS)
    if within_ids:
        within = _reference_within_split_groups(table, within_ids)
    parts = [frame for frame in (leaked, within) if len(frame)]
    if not parts:
        return _reference_empty(GROUP_COLUMNS)
    groups = pd.concat(parts, ignore_index=True)
    result: pd.DataFrame = groups[GROUP_COLUMNS]
    return result


def _reference_within_split_groups(table: pd.DataFrame, group_ids: list[Any]) -> pd.DataFrame:
    from leakaudit.grouping import group_spread

    subset = table[table["group_id"].isin(group_ids)]
    rows = []
    for group_id, part in subset.groupby("group_id", sort=False):
        split = part["split"].dropna()
        name = str(split.iloc[0]) if len(split) else ""
        low = (
            bool(part["low_information"].fillna(False).astype(bool).any())
            if ("low_information" in part)
            else False
        )
        rows.append(
            {
                "group_id": group_id,
                "kind": "within_split",
                "n_members": len(part),
                "n_splits": 1 if name else 0,
                "splits_involved": name,
                "members_by_split": f"{name}:{len(split)}" if name else "",
                "low_information": low,
            }
        )
    groups = pd.DataFrame(rows)
    spread: dict[Any, Any] = {}
    if "hash" in subset:
        values, valid = hash_values_from_frame(subset)
        codes, uniques = pd.factorize(subset["group_id"].to_numpy()[valid])
        if len(codes):
            found = group_spread(values[valid], codes.astype(np.int64))
            spread = {
                uniques[c]: int(d)
                for c, d in zip(found["group_id"], found["max_distance"], strict=True)
            }
    groups["max_distance"] = pd.Series(
        [spread.get(g, pd.NA) for g in groups["group_id"]], dtype="Int64"
    )
    groups = groups.sort_values(["n_members", "group_id"], ascending=[False, True], kind="stable")
    result: pd.DataFrame = groups.reset_index(drop=True)[GROUP_COLUMNS]
    return result


def reference_split_table(report: LeakageReport) -> pd.DataFrame:
    table = report.table
    leaked = report.leaked_images_by_split()
    leaked_ids = set(report.leaked_groups["group_id"].tolist())
    rows = []
    sizes = table.groupby("group_id").size() if table is not None else None
    for split, count in report.images_by_split.items():
        unreadable = within = 0
        if table is not None and sizes is not None:
            in_split = table[table["split"] == split]
            if "error" in table:
                unreadable = int(in_split["error"].notna().sum())
            candidates = in_split[in_split["group_id"].map(sizes) > 1]
            within = int((~candidates["group_id"].isin(leaked_ids)).sum())
        rows.append(
            {
                "split": str(split),
                "n_images": int(count),
                "n_leaked": int(leaked.get(split, 0)),
                "pct_leaked": float(report.pct_leaked_by_split.get(split, 0.0)),
                "n_unreadable": unreadable,
                "n_within_split_duplicates": within,
            }
        )
    frame: pd.DataFrame = pd.DataFrame(rows, columns=SPLIT_COLUMNS)
    return frame


def _reference_plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _reference_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    clean = frame.astype(object).where(frame.notna(), None)
    return [
        {str(key): _reference_plain(value) for key, value in row.items()}
        for row in clean.to_dict(orient="records")
    ]


def _reference_finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _reference_finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_reference_finite(v) for v in value]
    return value


def reference_report_dict(
    report: LeakageReport, tables: dict[str, pd.DataFrame] | None = None
) -> dict[str, Any]:
    """The old ``report_dict``; ``tables`` holds the reference tables when already made."""
    tables = tables or {}
    data = report.to_dict()
    data["format"] = "leakaudit-report"
    data["format_version"] = 1
    splits = tables.get("splits")
    data["splits"] = _reference_records(
        splits if splits is not None else reference_split_table(report)
    )
    if report.table is not None:
        groups, pairs = tables.get("groups"), tables.get("pairs")
        groups = groups if groups is not None else reference_group_table(report)
        pairs = pairs if pairs is not None else reference_pair_table(report)
        data["groups"] = _reference_records(groups)
        data["pairs"] = _reference_records(pairs)
        data["images"] = _reference_records(image_table(report))
    finite: dict[str, Any] = _reference_finite(data)
    return finite


def test_an_empty_float_cell_is_written_without_a_warning() -> None:
    # pandas 2.0 casts a float column with values.astype(str), which numpy 1.24 (the
    # floors) reported as an invalid cast on NaN: a RuntimeWarning printed by every scan
    # whose CSV held an empty float cell.
    frame = pd.DataFrame({"distance": [1.5, float("nan")], "name": ["a", "b"]})
    buffer = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_csv(buffer, frame)
    assert buffer.getvalue().splitlines() == ["distance,name", "1.5,a", ",b"]
