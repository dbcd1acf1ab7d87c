from __future__ import annotations

import subprocess
import sys

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
