"""Issue 26.1: the pair-evidence vocabulary (stage names, the columns of ``report.edges``,
"transitive") is defined once, in ``leakaudit/_evidence.py``, and the modules use it from there."""

from __future__ import annotations

import ast
from pathlib import Path

import leakaudit._evidence as evidence
from leakaudit import export, htmlreport, report

PACKAGE = Path(__file__).resolve().parents[1] / "leakaudit"
NAMES = {"EDGE_COLUMNS", "COPY_KIND", "TRANSITIVE", "PAIR_STAGES", "EDGE_STAGES", "VERIFIED_BEYOND"}


def _module_level_definitions() -> dict[str, list[str]]:
    """Module-level names of the vocabulary, and tuples/lists of stage names, by file."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.Assign | ast.AnnAssign):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            value = node.value
            strings = (
                {e.value for e in value.elts if isinstance(e, ast.Constant)}
                if isinstance(value, ast.Tuple | ast.List)
                else set()
            )
            if set(names) & NAMES or {"pixels", "geometry"} <= strings or "exact bytes" in strings:
                found.setdefault(path.name, []).extend(names)
    return found


def test_vocabulary_is_defined_once() -> None:
    found = _module_level_definitions()
    assert sorted(found) == ["_evidence.py"], found
    assert sorted(found["_evidence.py"]) == sorted(NAMES)


def test_old_names_are_the_same_objects() -> None:
    assert report.EDGE_COLUMNS is evidence.EDGE_COLUMNS
    assert report.COPY_KIND is evidence.COPY_KIND
    assert report.TRANSITIVE is evidence.TRANSITIVE
    assert export.PAIR_STAGES is evidence.PAIR_STAGES
    assert evidence.PAIR_STAGES[-1] == evidence.TRANSITIVE
    # Every stage an edge may carry has its own colour in the HTML report.
    for stage in evidence.EDGE_STAGES:
        assert htmlreport.evidence_badges(stage, 0.5).count(f"ev-{stage}") == 1


def test_verify_takes_edge_columns_from_below() -> None:
    """The verify stage (verify.py and its private ``_verify_*`` modules) no longer
    imports from the report (a higher floor) at module level."""
    modules = set()
    for path in [PACKAGE / "verify.py", *sorted(PACKAGE.glob("_verify_*.py"))]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules |= {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert "leakaudit.report" not in modules
    assert "leakaudit._evidence" in modules
