from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import leakaudit


def test_all_is_sorted_and_complete() -> None:
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions, each alphabetical
    def kind(name: str) -> tuple[int, str]:
        group = 0 if name.isupper() else 1 if name[:1].isupper() else 2
        return group, name

    assert leakaudit.__all__ == sorted(leakaudit.__all__, key=kind)
    for name in leakaudit.__all__:
        assert hasattr(leakaudit, name), name
    for name in (
        "compute_hashes",
        "hamming_distance",
        "find_duplicate_groups",
        "dhash_audit",
        "clean_splits",
        "audit_splits",
    ):
        assert name in leakaudit.__all__


def test_import_does_not_pull_in_frameworks() -> None:
    code = (
        "import sys, leakaudit, leakaudit.adapters, leakaudit.cli; "
        "heavy = ('torch', 'torchvision', 'datasets', 'scipy', 'imagehash'); "
        "bad = [m for m in heavy if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_adapters_ship_inside_leakaudit() -> None:
    import leakaudit.adapters

    assert leakaudit.adapters.__name__ == "leakaudit.adapters"
    assert leakaudit.adapters.__file__ is not None


def test_every_public_name_is_in_all() -> None:
    """The reverse check: nothing public in ``leakaudit``'s namespace is left out of __all__."""
    public = {
        name
        for name, value in vars(leakaudit).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"  # from __future__
    }
    assert sorted(public - set(leakaudit.__all__)) == []


def _core_modules() -> list[str]:
    """Every module of the core, sub-packages' modules included (``leakaudit.hashing._maths``)."""
    names = [info.name for info in pkgutil.walk_packages(leakaudit.__path__, "leakaudit.")]
    return sorted(
        n
        for n in names
        if n != "leakaudit.__main__"
        and n != "leakaudit.adapters"
        and not n.startswith("leakaudit.adapters.")
    )


def _package_files() -> list[Path]:
    root = Path(leakaudit.__file__).parent
    adapters = Path(importlib.import_module("leakaudit.adapters").__file__ or "").parent
    return sorted([*root.rglob("*.py"), *adapters.glob("*.py")])


def _module_name(path: Path) -> str:
    """``leakaudit/hashing/_maths.py`` -> ``leakaudit.hashing._maths``."""
    parts = path.relative_to(Path(leakaudit.__file__).parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("path", _package_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_cross_module_imports_use_exported_names(path: Path) -> None:
    """A module imports from another only what that module exports (a real boundary).

    The private modules of one sub-package (``leakaudit/hashing/_*.py``) are one unit:
    they share their private names with one another and with their ``__init__``.
    """
    own = _module_name(path)
    package = own.rsplit(".", 1)[0] if path.name != "__init__.py" else own
    problems = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.ImportFrom) and node.module):
            continue
        if not node.module.startswith("leakaudit"):
            continue
        if package != "leakaudit" and node.module.startswith(package + "."):
            continue  # a sibling in the same sub-package
        module = importlib.import_module(node.module)
        if hasattr(module, "__path__"):
            continue  # a package: its submodules are imported by name
        exported = set(getattr(module, "__all__", ()))
        problems += [
            f"line {node.lineno}: {node.module}.{alias.name}"
            for alias in node.names
            if alias.name not in exported
        ]
    assert problems == []


#: Modules whose examples use an optional dependency.
_EXAMPLES_NEED = {
    "leakaudit.embedding": "torch",
    "leakaudit._kernels": "numba",
    # Hash shards are Parquet files (the core's run, `pip install -e '.[test]'`, lacks it).
    "leakaudit.shards._audit": "pyarrow",
    "leakaudit.shards._read": "pyarrow",
    "leakaudit.shards._write": "pyarrow",
}


@pytest.mark.parametrize("name", _core_modules())
def test_docstring_examples_run(name: str) -> None:
    """The core's docstring examples are tests (``--doctest-modules`` on the core)."""
    if name in _EXAMPLES_NEED:  # examples of an optional dependency (the floors run lacks it)
        pytest.importorskip(_EXAMPLES_NEED[name])
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_every_install_hint_names_a_declared_extra() -> None:
    """Issue 25.9: every `pip install 'leakaudit-vision[X]'` hint names an extra that exists."""
    import re

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    root = Path(__file__).resolve().parents[1]
    extras = set(
        tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    hints = [
        (path.name, extra)
        for folder in ("leakaudit", "adapters", "README.md")
        for path in (
            [root / folder] if folder.endswith(".md") else sorted((root / folder).glob("*.py"))
        )
        for extra in re.findall(r"leakaudit-vision\[([a-z,]+)\]", path.read_text())
    ]
    assert hints, "no install hints found: the pattern is out of date"
    unknown = [(name, extra) for name, extra in hints if not set(extra.split(",")) <= extras]
    assert not unknown, f"install hints naming no declared extra: {unknown}; extras are {extras}"


def test_popcount_has_one_home() -> None:
    """Issue 25.9 / 26.1: popcounts of hash arrays all go through hashing.popcount64, the
    one caller of np.bitwise_count (numpy >= 2) and owner of the numpy 1.x lookup table."""
    root = Path(__file__).resolve().parents[1]
    home = root / "leakaudit" / "hashing" / "_bits.py"
    for pattern in ("np.bitwise_count(", "unpackbits(", "_POPCOUNT_LUT = "):
        callers = [
            str(path.relative_to(root))
            for folder in ("leakaudit", "adapters")
            for path in sorted((root / folder).rglob("*.py"))
            if pattern in path.read_text() and path != home
        ]
        assert callers == [], pattern
    assert home.read_text().count("np.bitwise_count(") == 1


def test_hashing_modules_stay_small() -> None:
    """Issue 26.4: the hashing package is split by job, no module over ~1,200 lines."""
    package = Path(leakaudit.__file__).parent / "hashing"
    sizes = {p.name: len(p.read_text().splitlines()) for p in package.glob("*.py")}
    assert len(sizes) >= 6, sizes
    assert max(sizes.values()) <= 1200, sizes


def test_module_level_imports_have_no_cycle() -> None:
    """The core's modules import one another in one direction at module level, type-only
    imports included (imports inside functions, kept lazy, are not counted here)."""
    package = Path(__file__).resolve().parents[1] / "leakaudit"
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        name = _module_name(path)
        found: set[str] = set()
        nodes = list(ast.parse(path.read_text(encoding="utf-8")).body)
        while nodes:  # module level, including `if TYPE_CHECKING:` blocks
            node = nodes.pop()
            if isinstance(node, ast.If):
                nodes.extend(node.body + node.orelse)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("leakaudit."):
                    found.add(node.module)
                elif node.module == "leakaudit":  # `from leakaudit import geometry`
                    found.update(
                        f"leakaudit.{a.name}"
                        for a in node.names
                        if (package / f"{a.name}.py").exists() or (package / a.name).is_dir()
                    )
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("leakaudit."))
        graph[name] = found - {name}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*trail, node, nxt]))
            if nxt not in state:
                visit(nxt, [*trail, node])
        state[node] = 2

    for module in sorted(graph):
        if module != "leakaudit" and module not in state:
            visit(module, [])


#: Issue 26.6: the imports of our own modules kept inside functions, each with the optional
#: dependency it keeps lazy (the imported module imports it at module level). Every other
#: import of ``leakaudit`` modules is at module level: a new lazy one fails the test below.
_LAZY_OWN_IMPORTS = {
    ("adapters/guard.py", "leakaudit.adapters.huggingface"): "datasets",
    ("adapters/guard.py", "leakaudit.adapters.torchvision"): "torch",
    ("leakaudit/search.py", "leakaudit._kernels"): "numba",
    # The command's signal handlers go in before numpy and pandas load (issue 35.7).
    ("leakaudit/__main__.py", "leakaudit.cli"): "numpy",
}
#: Opt-in adapters the core's command line imports only when their option is given: the
#: core never depends on them (nor on what they need, onnxruntime for SSCD), even lazily
#: at module level of the adapter. The option that asks for each.
_OPT_IN_ADAPTERS = {("leakaudit/cli.py", "leakaudit.adapters.sscd"): "--sscd"}


def _top_level_imports(tree: ast.Module) -> set[str]:
    """The modules ``tree`` imports at module level (``if``/``try`` blocks included)."""
    found: set[str] = set()
    nodes: list[ast.stmt] = list(tree.body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.If):
            nodes.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            nodes.extend(node.body + node.orelse + [s for h in node.handlers for s in h.body])
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _function_level_own_imports() -> dict[tuple[str, str], int]:
    """``(file, imported leakaudit module) -> line`` for imports inside function bodies."""
    root = Path(__file__).resolve().parents[1]
    found: dict[tuple[str, str], int] = {}
    for path in _package_files():
        file = path.relative_to(root).as_posix()
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                modules: list[str] = []
                if isinstance(node, ast.ImportFrom):
                    assert node.level == 0, f"{file}:{node.lineno}: relative import"
                    if node.module == "leakaudit":  # `from leakaudit import _kernels`
                        modules = [f"leakaudit.{alias.name}" for alias in node.names]
                    elif node.module and node.module.startswith("leakaudit."):
                        modules = [node.module]
                elif isinstance(node, ast.Import):
                    modules = [a.name for a in node.names if a.name.startswith("leakaudit")]
                for module in modules:
                    found.setdefault((file, module), node.lineno)
    return found


def test_function_level_imports_only_keep_optional_dependencies_lazy() -> None:
    """Issue 26.6: an import of our own module inside a function is there only to keep an
    optional dependency (torch, datasets, numba...) out of ``import leakaudit``."""
    found = _function_level_own_imports()
    new = sorted(
        f"{file}:{line}: {module}"
        for (file, module), line in found.items()
        if (file, module) not in _LAZY_OWN_IMPORTS and (file, module) not in _OPT_IN_ADAPTERS
    )
    assert not new, f"import these at module level (or list them with their reason): {new}"
    assert sorted(found) == sorted({**_LAZY_OWN_IMPORTS, **_OPT_IN_ADAPTERS}), "stale entries"
    for (file, _), option in _OPT_IN_ADAPTERS.items():
        assert option in Path(file).read_text(encoding="utf-8"), (file, option)
    for (_, module), dependency in _LAZY_OWN_IMPORTS.items():
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, module
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        imported = {name.split(".")[0] for name in _top_level_imports(tree)}
        assert dependency in imported, f"{module} no longer imports {dependency}: import it eagerly"


def test_audit_hash_shards_is_exported_and_documented() -> None:
    from leakaudit.shards import audit_hash_shards

    assert "audit_hash_shards" in leakaudit.__all__
    assert leakaudit.audit_hash_shards is audit_hash_shards
    docs = Path(__file__).resolve().parents[1] / "docs" / "ray-and-shards.md"
    assert "from leakaudit import audit_hash_shards" in docs.read_text(encoding="utf-8")
