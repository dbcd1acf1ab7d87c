from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from leakaudit.cli import main
from leakaudit.demo import build_demo_dataset


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
