"""Issue 37 point 7: the set-up's weight is said, the commands keep one style, and the core's
tests run without torch (the tests that need an extra skip, naming it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BASH = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)
#: A shell command that needs the venv: leakaudit's command, Python, pip or pytest.
_NEEDS_VENV = re.compile(r"^(leakaudit|python|pip|pytest)\b")
ACTIVATE = ". .venv/bin/activate"
#: Modules that come with an extra, never with `test`.
HEAVY = ("torch", "torchvision", "datasets", "ray", "pyarrow", "cv2", "numba")


def _blocks(page: Path) -> list[tuple[int, list[str]]]:
    text = page.read_text(encoding="utf-8")
    return [
        (match.start(), [line.strip() for line in match.group(1).splitlines() if line.strip()])
        for match in _BASH.finditer(text)
    ]


def test_readme_says_the_weight_and_offers_a_core_run() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    intro = text.split("## Install")[0]
    assert "6.8 GB" in intro and "15 minutes on 2 cores" in intro and "0.45 GB" in intro
    blocks = _blocks(ROOT / "README.md")
    # The first block: the two commands (tests/test_readme.py); the second: the core's tests.
    assert len(blocks[0][1]) == 2
    core = blocks[1][1]
    assert core[0].startswith("python3 -m venv .venv && " + ACTIVATE)
    assert core[1].startswith("pip install -e '.[test]' && pytest")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_one_style_the_venv_activated(page: Path) -> None:
    """After the README's first two commands (which run without activating, from a fresh
    clone), every shell command runs in the activated venv: no `.venv/bin/` prefixes, and
    the venv is activated before the first command that needs it on each page."""
    blocks = _blocks(page)
    if page.name == "README.md":
        blocks = blocks[1:]
    for _, lines in blocks:
        for line in lines:
            assert ".venv/bin/" not in line.replace(ACTIVATE, ""), (page.name, line)
    needing = [start for start, lines in blocks if any(_NEEDS_VENV.match(x) for x in lines)]
    if needing:
        first = min(needing)
        activated = [start for start, lines in blocks if any(ACTIVATE in x for x in lines)]
        assert activated and min(activated) <= first, page.name


def test_the_test_extra_pulls_no_heavy_dependency() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    test = project["optional-dependencies"]["test"]
    names = {re.split(r"[<>=!~\[; ]", requirement)[0].lower() for requirement in test}
    assert not names & {"torch", "torchvision", "datasets", "ray", "pyarrow", "leakaudit-vision"}


def _module_level_imports(tree: ast.Module) -> list[tuple[int, str]]:
    found = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def _skipped_first(tree: ast.Module) -> dict[str, int]:
    """Module-level `pytest.importorskip("name")` calls: name -> line."""
    found: dict[str, int] = {}
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.Expr) else None
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "importorskip"
            and value.args
            and isinstance(value.args[0], ast.Constant)
        ):
            found.setdefault(str(value.args[0].value).split(".")[0], node.lineno)
    return found


@pytest.mark.parametrize(
    "test_file", sorted((ROOT / "tests").glob("test_*.py")), ids=lambda p: p.name
)
def test_a_test_module_needing_an_extra_skips_without_it(test_file: Path) -> None:
    """A module-level import of an extra's module comes after `pytest.importorskip` of it, so
    the core's run (`pip install -e '.[test]' && pytest`) skips the module, named, instead of
    failing to collect it."""
    tree = ast.parse(test_file.read_text(encoding="utf-8"))
    skipped = _skipped_first(tree)
    for line, module in _module_level_imports(tree):
        if module in HEAVY:
            assert module in skipped and skipped[module] < line, (test_file.name, module)


def test_install_page_names_the_core_run() -> None:
    text = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    assert "pip install -e '.[test]' && pytest" in text and "0.45 GB" in text
    assert "6.8 GB" in text
