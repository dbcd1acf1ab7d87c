from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```bash", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.strip().splitlines()]


def test_readme_starts_with_two_commands_and_ci_runs_the_test_one() -> None:
    commands = _readme_commands()
    assert len(commands) == 2
    setup_and_demo, run_tests = commands
    assert setup_and_demo.endswith("leakaudit demo")
    assert "pytest" in run_tests
    assert run_tests in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "script",
    [
        "seed_workflow.py",
        "training_guard.py",
        "torchvision_audit.py",
        "huggingface_audit.py",
        "embedding_cascade.py",
    ],
)
def test_examples_run(script: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    expected = 1 if script == "training_guard.py" else 0
    assert result.returncode == expected, result.stdout + result.stderr
    assert "LEAKAGE" in result.stdout + result.stderr or "leak" in result.stdout.lower()
