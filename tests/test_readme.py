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


#: Each example and the extras it needs (skipped cleanly, naming them, when one is missing).
EXAMPLES = {
    "seed_workflow.py": (),
    "training_guard.py": (),
    "torchvision_audit.py": ("torch", "torchvision"),
    "huggingface_audit.py": ("datasets",),
    "embedding_cascade.py": (),
    "leak_impact.py": (),
}


@pytest.mark.parametrize("script", sorted(EXAMPLES))
def test_examples_run(script: str) -> None:
    import importlib.util

    missing = [name for name in EXAMPLES[script] if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"{script} needs {', '.join(missing)} (pip install 'leakaudit-vision[all]')")
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    expected = 1 if script == "training_guard.py" else 0
    assert result.returncode == expected, result.stdout + result.stderr
    assert "LEAKAGE" in result.stdout + result.stderr or "leak" in result.stdout.lower()


def test_every_example_is_run() -> None:
    assert sorted(p.name for p in (ROOT / "examples").glob("*.py")) == sorted(EXAMPLES)
