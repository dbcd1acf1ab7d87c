from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import imagegen
import pandas as pd
import pytest

from leakaudit import export
from leakaudit.cli import MANIFEST_COLUMNS, MANIFEST_NAME, main
from leakaudit.demo import build_demo_dataset

CLI_MODULE = [sys.executable, "-m", "leakaudit"]


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-demo")
    build_demo_dataset(root)
    return root


def test_demo_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", str(tmp_path / "demo"), "--quiet", "--workers", "1"])
    out = capsys.readouterr()
    assert code == 0
    assert "4 planted leaks" in out.out
    assert "LEAKAGE: 8 of" in out.out
    assert "corrupt.jpg" in out.err  # the unreadable file is named


def test_scan_writes_csv_and_json_and_fails_on_leak(
    demo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv, report_json = tmp_path / "t.csv", tmp_path / "r.json"
    code = main(
        [
            "scan",
            str(demo_root),
            "--quiet",
            "--workers",
            "1",
            "--csv",
            str(csv),
            "--json",
            str(report_json),
            "--fail-on-leak",
        ]
    )
    assert code == 1
    table = pd.read_csv(csv)
    assert {"path", "split", "hash", "group_id"} <= set(table.columns)
    assert json.loads(report_json.read_text())["n_leaked_images"] == 8
    assert main(["scan", str(demo_root), "--quiet", "--workers", "1", "--fail-on-leak", "20"]) == 0
    assert main(["scan", str(demo_root), "--quiet", "--workers", "1", "--fail-on-leak", "50%"]) == 0
    assert main(["scan", str(demo_root), "--quiet", "--workers", "1", "--fail-on-leak", "5%"]) == 1


def test_compare_prints_leakcheck_lines(
    demo_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["compare", str(demo_root / "train"), str(demo_root / "test"), "--quiet", "--workers", "1"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert out.count("LEAK  ") == 3
    assert "IMG_copy_4711.jpg" in out and "(distance 0)" in out
    assert "3 of 17 test images (17.6%) also appear in train." in out


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", str(tmp_path / "missing")]) == 2
    assert "folder not found" in capsys.readouterr().err
    assert main(["scan", str(tmp_path)]) == 2
    assert "no split folders" in capsys.readouterr().err
    assert main(["scan", str(tmp_path), "--threshold", "99"]) == 2
    assert main(["frobnicate"]) == 2
    assert main([]) == 2


def test_installed_entry_point_runs_as_subprocess(demo_root: Path) -> None:
    exe = shutil.which("leakaudit", path=str(Path(sys.executable).parent))
    assert exe is not None, "the leakaudit console script is not installed"
    result = subprocess.run(
        [exe, "scan", str(demo_root), "--quiet", "--fail-on-leak"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    assert "LEAKAGE" in result.stdout
    module = subprocess.run(
        [sys.executable, "-m", "leakaudit", "env"], capture_output=True, text=True, timeout=120
    )
    assert module.returncode == 0 and "leakaudit 0.1.0" in module.stdout


# --------------------------------------------------------------------- tiny trees

SPLIT_DIRS = {"train": "Train", "val": "VALIDATION", "test": "Test"}


def tiny_tree(root: Path) -> Path:
    """Train/VALIDATION/Test (mixed case) in the ImageFolder layout: t0 leaks into Test,
    t1 into VALIDATION; 64x48 images."""
    images = [imagegen.photo_like(seed, (64, 48)) for seed in range(8)]
    layout = {
        "Train/cat/t0.png": 0,
        "Train/cat/t1.png": 1,
        "Train/dog/t2.png": 2,
        "Train/dog/t3.png": 3,
        "VALIDATION/cat/v4.png": 4,
        "VALIDATION/cat/t1_copy.png": 1,
        "Test/cat/s5.png": 5,
        "Test/dog/s6.png": 6,
        "Test/cat/t0.png": 0,  # same relative path as the train original: a name collision
    }
    for rel, index in layout.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        images[index].save(root / rel)
    (root / "Train" / "labels.txt").write_text("cat\ndog\n")
    return root


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    return tiny_tree(tmp_path / "data")


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_scan_recognises_splits_case_insensitively_and_extra_ones(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tree / "holdout").mkdir()
    imagegen.photo_like(3, (64, 48)).save(tree / "holdout" / "h3.png")  # leaks from Train
    assert main(["scan", str(tree), "--quiet", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "LEAKAGE: 4 of 9 images" in out
    # Train first, then VALIDATION, then Test, whatever the alphabet says.
    assert out.index("Train  ") < out.index("VALIDATION  ") < out.index("Test  ")
    assert main(["scan", str(tree), "--quiet", "--workers", "1", "--split", "HoldOut"]) == 0
    assert "LEAKAGE: 6 of 10 images" in capsys.readouterr().out
    assert main(["scan", str(tree), "--quiet", "--split", "nope"]) == 2
    assert "--split names no folder" in capsys.readouterr().err


def test_scan_flat_layout_and_clean_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for split, seeds in {"train": (0, 1), "test": (2, 3)}.items():
        (tmp_path / split).mkdir()
        for seed in seeds:
            imagegen.photo_like(seed, (64, 48)).save(tmp_path / split / f"{seed}.png")
    assert main(["scan", str(tmp_path), "--quiet", "--workers", "1", "--fail-on-leak"]) == 0
    assert "No leakage" in capsys.readouterr().out


def test_all_outputs_have_the_documented_columns(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    argv = ["scan", str(tree), "--quiet", "--workers", "1", "--csv", str(out / "t.csv")]
    argv += ["--json", str(out / "r.json"), "--html", str(out / "r.html")]
    argv += ["--show", str(out / "pairs")]
    assert main(argv) == 0
    assert list(pd.read_csv(out / "t.csv").columns) == export.IMAGE_COLUMNS
    pairs = pd.read_csv(out / "t.pairs.csv")
    # A verified audit (report.edges) adds the evidence columns after the documented ones.
    kind = [export.PAIR_KIND_COLUMN]  # always last
    evidence = list(pairs.columns) != export.PAIR_COLUMNS + kind
    assert (
        list(pairs.columns) == export.PAIR_COLUMNS + evidence * export.PAIR_EVIDENCE_COLUMNS + kind
    )
    assert pairs["copy_kind"].tolist() == ["identical", "identical"]
    assert sorted(pairs["split_b"]) == ["Test", "VALIDATION"]
    assert set(pairs["split_a"]) == {"Train"} and (pairs["distance"] == 0).all()
    groups = pd.read_csv(out / "t.groups.csv")
    assert list(groups.columns) == export.GROUP_COLUMNS + evidence * export.GROUP_EVIDENCE_COLUMNS
    assert groups["kind"].tolist() == ["cross_split", "cross_split"]
    splits = pd.read_csv(out / "t.splits.csv")
    assert list(splits.columns) == export.SPLIT_COLUMNS
    assert splits["n_leaked"].tolist() == [2, 1, 1]
    data = json.loads((out / "r.json").read_text())
    assert data["format"] == "leakaudit-report" and data["n_leaked_images"] == 4
    assert {"splits", "groups", "pairs", "images"} <= set(data)
    assert set(data["pairs"][0]) == set(
        export.PAIR_COLUMNS + evidence * export.PAIR_EVIDENCE_COLUMNS + kind
    )
    assert (out / "r.html").read_text().count('class="group leaked"') == 2
    shown = sorted(p.name for p in (out / "pairs").iterdir())
    assert shown[0] == "index.csv" and len(shown) == 3
    assert all(name.endswith(".png") for name in shown[1:])
    index = pd.read_csv(out / "pairs" / "index.csv")
    assert list(index.columns) == [*export.MATCH_COLUMNS, "file"]
    assert sorted(index["file"]) == shown[1:]


def test_readme_documents_every_output_column() -> None:
    section = (Path(__file__).parents[1] / "docs" / "output.md").read_text()
    columns = export.IMAGE_COLUMNS + export.PAIR_COLUMNS + export.GROUP_COLUMNS
    columns += [*export.PAIR_EVIDENCE_COLUMNS, export.PAIR_KIND_COLUMN]
    columns += export.SPLIT_COLUMNS + MANIFEST_COLUMNS
    missing = [c for c in columns if f"`{c}`" not in section]
    assert missing == []


def test_clean_moves_leaks_and_never_touches_root(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _snapshot(tree)
    out = tmp_path / "clean"
    code = main(["clean", str(tree), "--out", str(out), "--quiet", "--workers", "1"])
    assert code == 0, capsys.readouterr().err
    assert _snapshot(tree) == before
    manifest = pd.read_csv(out / MANIFEST_NAME, keep_default_na=False)
    assert list(manifest.columns) == MANIFEST_COLUMNS
    folders = manifest[manifest["action"] == "folder"]
    assert sorted(folders["old_path"]) == sorted(folders["new_path"])
    assert {"Test/", "Test/cat/", "Train/cat/", "VALIDATION/cat/"} <= set(folders["old_path"])
    assert all((out / path).is_dir() for path in folders["new_path"])
    manifest = manifest[manifest["action"] != "folder"]
    assert len(manifest) == 10  # 9 images + labels.txt
    moved = manifest[manifest["action"] == "moved"].sort_values("old_path")
    assert moved["old_path"].tolist() == ["Test/cat/t0.png", "VALIDATION/cat/t1_copy.png"]
    # The test copy of t0 collides with Train/cat/t0.png, so it is renamed, not overwritten.
    assert moved["new_path"].tolist() == ["Train/cat/t0.from-Test.png", "Train/cat/t1_copy.png"]
    other = manifest[manifest["action"] == "unaudited"]
    assert other["new_path"].tolist() == ["Train/labels.txt"]
    for row in manifest.itertuples():
        assert (out / row.new_path).read_bytes() == (tree / row.old_path).read_bytes()
    assert main(["scan", str(out), "--quiet", "--workers", "1", "--fail-on-leak"]) == 0
    assert "Train  " in capsys.readouterr().out
    # Hard links where the file system allows them (a tmp folder does).
    assert (out / "Train/cat/t1.png").stat().st_ino == (tree / "Train/cat/t1.png").stat().st_ino


def test_clean_drop_policy_priority_and_copy(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "clean"
    argv = ["clean", str(tree), "--out", str(out), "--quiet", "--workers", "1"]
    argv += ["--policy", "drop", "--priority", "test,val,train", "--copy"]
    assert main(argv) == 0
    manifest = pd.read_csv(out / MANIFEST_NAME, keep_default_na=False)
    dropped = manifest[manifest["action"] == "dropped"].sort_values("old_path")
    # test outranks val outranks train: the train originals are the ones dropped.
    assert dropped["old_path"].tolist() == ["Train/cat/t0.png", "Train/cat/t1.png"]
    assert (dropped["new_path"] == "").all()
    assert not (out / "Train/cat/t0.png").exists() and (out / "Test/cat/t0.png").exists()
    assert (out / "Test/cat/t0.png").stat().st_ino != (tree / "Test/cat/t0.png").stat().st_ino
    assert "2 dropped" in capsys.readouterr().out


def test_clean_refuses_unsafe_targets(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--quiet", "--workers", "1"]
    assert main(["clean", str(tree), "--out", str(tree / "Train" / "clean"), *base]) == 2
    assert "outside ROOT" in capsys.readouterr().err
    assert main(["clean", str(tree), "--out", str(tree), *base]) == 2
    assert main(["clean", str(tree), "--out", str(tmp_path), *base]) == 2
    assert "must not contain ROOT" in capsys.readouterr().err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    assert main(["clean", str(tree), "--out", str(busy), *base]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["clean", str(tree), "--out", str(busy), "--priority", "tran", *base]) == 2
    # --force replaces only an earlier leakaudit output, never a folder of the user's.
    assert main(["clean", str(tree), "--out", str(busy), "--force", *base]) == 2
    assert (busy / "keep.txt").read_text() == "mine"
    assert "not an earlier leakaudit output" in capsys.readouterr().err
    # Re-running over a hard-linked copy replaces links instead of writing through them.
    earlier = tmp_path / "earlier"
    assert main(["clean", str(tree), "--out", str(earlier), *base]) == 0
    before = _snapshot(tree)
    assert main(["clean", str(tree), "--out", str(earlier), "--force", *base]) == 0
    assert _snapshot(tree) == before
    assert not (tree / "Train" / "clean").exists()


def test_more_usage_errors(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(tree / "Train")]) == 2
    assert "at least one TEST_DIR" in capsys.readouterr().err
    assert main(["compare", str(tree / "Train"), str(tmp_path / "nope")]) == 2
    assert "folder not found" in capsys.readouterr().err
    missing_dir = str(tmp_path / "no" / "r.html")
    assert main(["scan", str(tree), "--html", missing_dir]) == 2
    assert "--html: folder not found" in capsys.readouterr().err
    assert main(["scan", str(tree), "--fail-on-leak", "lots"]) == 2
    assert main(["scan", str(tree), "--fail-on-leak", "150%"]) == 2
    assert main(["scan", str(tree), "--workers", "0", "--quiet"]) == 2
    assert "workers must be an int" in capsys.readouterr().err
    assert main(["clean", str(tree)]) == 2  # --out is required


def test_env_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert "leakaudit 0.1.0" in out and "Pillow" in out
    assert main(["--version"]) == 0


def _copy_across_splits(tmp_path: Path) -> tuple[list[str], Path]:
    """A photo in train/ and its PNG copy in test/: ``compare`` arguments and its JSON path."""
    train, test = tmp_path / "train", tmp_path / "test"
    train.mkdir()
    test.mkdir()
    image = imagegen.photo_like(11, (160, 120))
    image.save(train / "a.jpg", quality=90)
    image.save(test / "a_copy.png")
    out = tmp_path / "report.json"
    return ["compare", str(train), str(test), "--no-cache", "--quiet", "--json", str(out)], out


def test_distinct_pixels_reaches_the_verification_and_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, out = _copy_across_splits(tmp_path)
    assert main([*args, "--distinct-pixels", "0"]) == 0
    report = json.loads(out.read_text())
    assert report["parameters"]["verification"]["distinct_pixels"] == 0
    assert report["n_leaked_images"] == 2
    for bad in ("-1", "2.5", "many"):
        assert main([*args, "--distinct-pixels", bad]) == 2
        assert "--distinct-pixels" in capsys.readouterr().err


def test_min_support_reaches_the_verification_and_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, out = _copy_across_splits(tmp_path)
    assert main([*args, "--min-support", "0"]) == 0
    report = json.loads(out.read_text())
    assert report["parameters"]["verification"]["min_support"] == 0.0
    assert report["n_leaked_images"] == 2
    assert main([*args, "--min-support", "1.5"]) == 2
    assert "--min-support" in capsys.readouterr().err


def test_tiny_photos_reaches_the_verification(tmp_path: Path) -> None:
    args, out = _copy_across_splits(tmp_path)
    assert main([*args, "--no-tiny-photos"]) == 0
    assert json.loads(out.read_text())["parameters"]["verification"]["tiny_photos"] is False
    assert main(args) == 0
    assert json.loads(out.read_text())["parameters"]["verification"]["tiny_photos"] is True


def test_argument_errors_are_one_line(tmp_path: Path) -> None:
    """Issue 25.4: a bad option is one line naming it and pointing at -h, not the usage block."""
    for argv in (
        ["scan", str(tmp_path), "--threshold", "abc"],
        ["scan", str(tmp_path), "--fail-on-leak", "150%"],
        ["scan", str(tmp_path), "--hash", "md5"],
        ["frobnicate"],
    ):
        result = subprocess.run([*CLI_MODULE, *argv], capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, (argv, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (argv, result.stderr)
        assert "error:" in lines[0] and "-h'" in lines[0], lines[0]
        assert "usage:" not in result.stderr


def test_fail_on_leak_names_each_split_over_its_limit(
    demo_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25.3: exit 1 says which split is over the limit, and by how much."""
    code = main(["scan", str(demo_root), "--quiet", "--workers", "1", "--fail-on-leak", "5%"])
    err = capsys.readouterr().err
    assert code == 1
    over = [line for line in err.splitlines() if "over --fail-on-leak 5%" in line]
    assert over, err
    assert any(line.startswith("leakaudit: test: ") and "images leak (" in line for line in over)


def test_closed_output_pipe_ends_quietly(demo_root: Path) -> None:
    """Issue 25.5: `leakaudit scan ROOT | head -1` ends quietly (141, as Unix tools do)."""
    exe = shutil.which("leakaudit", path=str(Path(sys.executable).parent))
    assert exe is not None
    for _ in range(3):  # the race between head closing and our writes varies run to run
        process = subprocess.Popen(
            [exe, "scan", str(demo_root), "--workers", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdout is not None and process.stderr is not None
        process.stdout.readline()
        process.stdout.close()  # what head does after its lines
        err = process.stderr.read().decode()
        code = process.wait(timeout=300)
        assert "Broken pipe" not in err and "Traceback" not in err, err
        assert code in (0, 141), (code, err)


def test_demo_without_dir_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25.10: `leakaudit demo` removes its temporary dataset (DIR keeps one)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    assert main(["demo", "--quiet", "--workers", "1", "--no-cache"]) == 0
    assert "removed at the end" in capsys.readouterr().out
    assert not list(tmp_path.glob("leakaudit-demo-*"))


def test_single_split_is_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 25.10: auditing one split says that nothing can leak across splits."""
    (tmp_path / "train").mkdir()
    for seed in range(3):
        imagegen.photo_like(seed, (64, 48)).save(tmp_path / "train" / f"{seed}.png")
    assert main(["scan", str(tmp_path), "--workers", "1", "--no-cache"]) == 0
    err = capsys.readouterr().err
    assert "only one split folder (train)" in err and "nothing can leak across splits" in err


@pytest.fixture(scope="module")
def clumped_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One photo copied into val and test six times each, and two leaked pairs besides."""
    root = tmp_path_factory.mktemp("show-cap")
    for split in ("train", "val", "test"):
        (root / split).mkdir()
    clump = imagegen.encode(imagegen.photo_like(40, (64, 48)), "PNG")
    (root / "train" / "clump.png").write_bytes(clump)
    for i in range(6):
        (root / "val" / f"clump{i}.png").write_bytes(clump)
        (root / "test" / f"clump{i}.png").write_bytes(clump)
    for seed in (41, 42):
        pair = imagegen.encode(imagegen.photo_like(seed, (64, 48)), "PNG")
        (root / "train" / f"p{seed}.png").write_bytes(pair)
        (root / "test" / f"p{seed}.png").write_bytes(pair)
    return root


def _shown(folder: Path) -> tuple[pd.DataFrame, list[str]]:
    index = pd.read_csv(folder / "index.csv", keep_default_na=False)
    return index, sorted(path.name for path in folder.glob("leak_*.png"))


def test_show_is_capped_and_says_what_it_left_out(
    clumped_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35, point 9: --show drew one PNG per leaked image with no cap (20,000 identical
    images: 13,333 PNGs, 1.7 GB, 5.5 minutes)."""
    base = ["scan", str(clumped_root), "--workers", "1", "--no-cache"]
    capsys.readouterr()
    # The default: up to 100 groups, at most 8 images of each (as the HTML report).
    assert main([*base, "--show", str(tmp_path / "d")]) == 0
    err = capsys.readouterr().err
    index, pictures = _shown(tmp_path / "d")
    assert list(index.columns) == [*export.MATCH_COLUMNS, "file"]
    assert len(index) == 14 and index["group_id"].nunique() == 3  # every leaked image listed
    drawn = index[index["file"] != ""]
    assert sorted(drawn["file"]) == pictures and len(pictures) == 10
    clump = drawn[drawn["path"].str.contains("clump")]
    assert clump["split"].value_counts().to_dict() == {"val": 4, "test": 4}  # splits in turn
    assert "--show drew 10 of the 14 side-by-side images" in err
    assert "the 3 strongest of 3 leaked group(s), at most 8 each; the other 4 (0 whole" in err
    # --show-limit 1: the strongest group only; the others listed without a file.
    assert main([*base, "--show", str(tmp_path / "one"), "--show-limit", "1"]) == 0
    err = capsys.readouterr().err
    index, pictures = _shown(tmp_path / "one")
    first = index["group_id"].iloc[0]
    assert len(index) == 14 and set(index.loc[index["file"] != "", "group_id"]) == {first}
    assert len(pictures) == min(8, int((index["group_id"] == first).sum()))
    left = 14 - len(pictures)
    assert f"the 1 strongest of 3 leaked group(s), at most 8 each; the other {left} " in err
    assert "(2 whole group(s))" in err
    # all (or 0): every leaked image, nothing said left out.
    for limit in ("all", "0"):
        folder = tmp_path / f"every-{limit}"
        assert main([*base, "--show", str(folder), "--show-limit", limit]) == 0
        assert "--show drew" not in capsys.readouterr().err
        index, pictures = _shown(folder)
        assert len(pictures) == len(index) == 14 and (index["file"] != "").all()


@pytest.mark.parametrize("value", ["-1", "many", "1.5"])
def test_show_limit_rejects_bad_values(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["scan", str(tmp_path), "--show", str(tmp_path / "s"), "--show-limit", value]
    assert main(argv) == 2
    assert f"expected a whole number >= 0 or 'all', got {value!r}" in capsys.readouterr().err
