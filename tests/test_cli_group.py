"""``leakaudit group SHARDS_DIR`` and ``--hashes-out DIR`` on ``scan`` and ``compare``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from leakaudit.cli import main  # noqa: E402
from leakaudit.demo import build_demo_dataset  # noqa: E402
from leakaudit.shards import read_hash_shards, shard_files  # noqa: E402


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("group-demo")
    build_demo_dataset(root)
    return root


@pytest.fixture(scope="module")
def scanned(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``scan --hashes-out``: the shard folder and the scan's JSON report."""
    out = tmp_path_factory.mktemp("scanned")
    report = out / "scan.json"
    code = main(
        [
            "scan",
            str(demo_root),
            "--quiet",
            "--workers",
            "1",
            "--hashes-out",
            str(out / "hashes"),
            "--json",
            str(report),
        ]
    )
    assert code == 0
    return out / "hashes", report


def _tables(report: dict[str, object]) -> dict[str, pd.DataFrame]:
    tables = report.get("tables", report)
    assert isinstance(tables, dict)
    return {name: pd.DataFrame(rows) for name, rows in tables.items() if isinstance(rows, list)}


def test_scan_writes_shards_group_gives_the_same_report(
    scanned: tuple[Path, Path], demo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hashes, scan_json = scanned
    assert [f.name for f in shard_files(hashes)] == ["part-00000.parquet"]
    shards = read_hash_shards(hashes)
    assert shards.orientations is not None and shards.hashing is not None
    assert all(Path(p).is_absolute() for p in shards.paths if p is not None)  # type: ignore[union-attr]
    group_json = tmp_path / "group.json"
    capsys.readouterr()
    code = main(
        [
            "group",
            str(hashes),
            "--json",
            str(group_json),
            "--workers",
            "1",
            "--images-root",
            str(demo_root),
        ]
    )
    out = capsys.readouterr()
    assert code == 0
    assert "LEAKAGE: 8 of 70 images" in out.out
    assert "Verification: 5 candidate pair(s), 5 verified" in out.out
    assert "corrupt.jpg" in out.err  # the unreadable image is named, as in scan
    scan, group = json.loads(scan_json.read_text()), json.loads(group_json.read_text())
    for key in ("n_leaked_images", "total_images", "n_unreadable", "n_low_information"):
        assert scan[key] == group[key], key
    group_parameters = dict(group["parameters"])
    assert group_parameters.pop("hash_shards") == 1
    assert group_parameters.pop("images_root") == str(demo_root.resolve())
    assert group_parameters == scan["parameters"]
    left, right = _tables(scan), _tables(group)
    assert set(left) == set(right)
    for name in left:
        frame = right[name].drop(columns=[c for c in ("id",) if c in right[name].columns])
        pd.testing.assert_frame_equal(left[name], frame, check_dtype=False, obj=name)


def test_group_fails_on_leak_and_writes_outputs(scanned: tuple[Path, Path], tmp_path: Path) -> None:
    hashes, _ = scanned
    csv, html = tmp_path / "t.csv", tmp_path / "r.html"
    code = main(
        ["group", str(hashes), "--quiet", "--csv", str(csv), "--html", str(html), "--fail-on-leak"]
    )
    assert code == 1
    table = pd.read_csv(csv)
    assert {"path", "split", "id", "group_id", "leaked"} <= set(table.columns)
    assert (tmp_path / "t.pairs.csv").exists() and html.stat().st_size > 0
    assert main(["group", str(hashes), "--quiet", "--fail-on-leak", "50%"]) == 0
    assert main(["group", str(hashes), "--quiet", "--no-verify", "--hash", "phash"]) == 0


def test_group_usage_errors_exit_2(
    scanned: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hashes, _ = scanned
    assert main(["group", str(tmp_path / "missing")]) == 2
    assert "folder not found" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["group", str(tmp_path / "empty")]) == 2
    assert "no hash shards" in capsys.readouterr().err
    assert main(["group", str(hashes), "--threshold", "99"]) == 2
    assert main(["group", str(hashes), "--workers", "0"]) == 2
    capsys.readouterr()
    # an output inside the shard folder is refused before anything is read
    assert main(["group", str(hashes), "--json", str(hashes / "r.json")]) == 2
    assert "outside the dataset" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    pq.write_table(pa.table({"id": ["a"], "split": ["train"]}), bad / "part-7.parquet")
    assert main(["group", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "part-7.parquet: missing column(s) phash, dhash, error" in err


def test_group_without_paths_says_it_grouped_by_hashes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "spark"
    folder.mkdir()
    table = pa.table(
        {
            "id": ["a", "b", "c"],
            "split": ["train", "test", "test"],
            "phash": pa.array([-5, -5, 12345], pa.int64()),  # signed, as Spark writes longs
            "dhash": pa.array([77, 78, 999999], pa.int64()),
            "error": pa.array([None, None, None], pa.string()),
        }
    )
    pq.write_table(table, folder / "part-00000-1.snappy.parquet")
    (folder / "_SUCCESS").write_bytes(b"")
    assert main(["group", str(folder), "--fail-on-leak"]) == 1
    out = capsys.readouterr().out
    assert "LEAKAGE: 2 of 3 images" in out
    assert "Verification: did not run (images not read: no images root given" in out
    assert "Note: image files named in the shards were not read" in out


def test_hashes_out_refuses_existing_shards(
    scanned: tuple[Path, Path], demo_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hashes, _ = scanned
    before = {p: p.read_bytes() for p in hashes.iterdir()}
    code = main(["scan", str(demo_root), "--quiet", "--hashes-out", str(hashes)])
    assert code == 2
    assert "already holds hash shards" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in hashes.iterdir()} == before
    # not inside the dataset either
    assert main(["scan", str(demo_root), "--hashes-out", str(demo_root / "h")]) == 2
    assert "outside the dataset" in capsys.readouterr().err
    assert not (demo_root / "h").exists()


def test_compare_hashes_out_with_no_cache(
    demo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_cache = tmp_path / "user-cache"
    monkeypatch.setenv("LEAKAUDIT_CACHE_DIR", str(user_cache))
    hashes = tmp_path / "hashes"
    report = tmp_path / "r.json"
    argv = ["compare", str(demo_root / "train"), str(demo_root / "test"), "--quiet"]
    code = main([*argv, "--no-cache", "--hashes-out", str(hashes), "--json", str(report)])
    assert code == 0
    assert not user_cache.exists()  # --no-cache: the user's cache is neither read nor written
    shards = read_hash_shards(hashes)
    assert set(shards.split_names) == {"train", "test"}
    grouped = tmp_path / "g.json"
    assert main(["group", str(hashes), "--quiet", "--json", str(grouped)]) == 0
    a, b = json.loads(report.read_text()), json.loads(grouped.read_text())
    assert a["n_leaked_images"] == b["n_leaked_images"] == 6


def test_group_as_a_subprocess(scanned: tuple[Path, Path], tmp_path: Path) -> None:
    hashes, _ = scanned
    result = subprocess.run(
        [sys.executable, "-m", "leakaudit", "group", str(hashes), "--fail-on-leak"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    assert "LEAKAGE: 8 of 70 images" in result.stdout
    help_text = subprocess.run(
        [sys.executable, "-m", "leakaudit", "scan", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    assert "--hashes-out DIR" in help_text


def test_group_reads_images_only_under_images_root(
    scanned: tuple[Path, Path], demo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Crafted shard paths (outside the dataset) are never decoded, thumbnailed or shown."""
    hashes, _ = scanned
    shards = read_hash_shards(hashes)
    assert shards.paths is not None
    # The same shards, every path moved to a private copy of the dataset beside it.
    private = tmp_path / "private"
    private.mkdir()
    moved = []
    for path in shards.paths.tolist():
        target = private / Path(path).relative_to(demo_root.resolve())
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(Path(path).read_bytes())
        moved.append(str(target))
    table = pq.read_table(shard_files(hashes)[0])
    table = table.set_column(table.schema.get_field_index("path"), "path", pa.array(moved))
    crafted = tmp_path / "crafted"
    crafted.mkdir()
    pq.write_table(table, crafted / "part-00000.parquet")
    show, html = tmp_path / "show", tmp_path / "r.html"
    argv = ["group", str(crafted), "--quiet", "--show", str(show), "--html", str(html)]
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "images not read: no images root given" in out.out
    assert "Note: image files named in the shards were not read" in out.out
    assert not show.exists() or not any(show.iterdir())
    assert "data:image/jpeg" not in html.read_text()
    # --images-root DIR: the dataset, where none of the crafted paths lies
    assert main([*argv, "--images-root", str(demo_root)]) == 0
    out = capsys.readouterr()
    assert "lie outside the images root" in out.out
    assert "resolve outside the images root" in out.err  # the one warning
    assert "data:image/jpeg" not in html.read_text()
    # --images-root the private copy: now they are read, verified and shown
    assert main([*argv, "--images-root", str(private)]) == 0
    out = capsys.readouterr()
    assert "Verification: 5 candidate pair(s), 5 verified" in out.out
    assert any(show.glob("leak_*.png")) and "data:image/jpeg" in html.read_text()
    assert main([*argv, "--images-root", str(tmp_path / "nope")]) == 2
    assert "--images-root must be a folder" in capsys.readouterr().err


def test_group_duplicated_column_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "dup"
    folder.mkdir()
    table = pa.Table.from_arrays(
        [pa.array(["a"]), pa.array(["train"]), pa.array([1], pa.uint64()),
         pa.array([2], pa.uint64()), pa.array([None], pa.string()), pa.array([3], pa.uint64())],
        names=["id", "split", "phash", "dhash", "error", "phash"],
    )  # fmt: skip
    pq.write_table(table, folder / "part-1.parquet")
    assert main(["group", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "part-1.parquet: column 'phash' appears 2 times" in err[0]


def test_group_refuses_a_shard_with_a_null_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35, point 5: a null split hid the leak of its row: "No leakage: none of 13
    images", and --fail-on-leak exited 0."""
    shard = pa.table(
        {
            "id": ["a", "other", "b", "b-copy"],
            "split": pa.array(["train", "test", "train", None], pa.string()),
            "phash": pa.array([1, 2**63 - 1, 2**40, 2**40], pa.uint64()),
            "dhash": pa.array([1, 2**63 - 1, 2**40, 2**40], pa.uint64()),
            "error": pa.array([None] * 4, pa.string()),
        }
    )
    folder = tmp_path / "hashes"
    folder.mkdir()
    pq.write_table(shard, folder / "part-0.parquet")
    capsys.readouterr()
    assert main(["group", str(folder), "--quiet", "--fail-on-leak"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"leakaudit: error: {folder / 'part-0.parquet'}: column 'split' must not be null; "
        "row 3 (id 'b-copy') is.\n"
    )
