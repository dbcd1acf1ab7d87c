"""The ``leakaudit`` command line.

``main(argv) -> int`` is callable from tests; exit codes: 0 no leakage (or not
asked to fail), 1 leakage over the allowed amount (``--fail-on-leak``), 2 usage
or input error.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from leakaudit import __version__
from leakaudit.audit import AUDIT_METHODS, DEFAULT_METHOD, DEFAULT_THRESHOLDS, audit_splits
from leakaudit.hashing import popcount64
from leakaudit.report import LeakageReport

__all__ = ["SPLIT_ALIASES", "find_split_folders", "main", "main_entry"]

log = logging.getLogger("leakaudit")

#: Folder names recognised as splits by ``leakaudit scan`` (case-insensitive).
SPLIT_ALIASES: dict[str, str] = {
    "train": "train", "training": "train",
    "val": "val", "valid": "val", "validation": "val", "dev": "val",
    "test": "test", "testing": "test", "eval": "test",
}  # fmt: skip


class UsageError(Exception):
    """A problem with the command line or its inputs (exit code 2)."""


def find_split_folders(root: Path, extra: Sequence[str] = ()) -> dict[str, Path]:
    """Return split name -> folder for the split folders directly under ``root``."""
    if not root.is_dir():
        raise UsageError(f"not a folder: {root}")
    wanted = {name.lower() for name in extra}
    found: dict[str, Path] = {}
    for child in sorted(root.iterdir()):
        name = child.name.lower()
        if child.is_dir() and (name in SPLIT_ALIASES or name in wanted):
            found[child.name] = child
    if not found:
        raise UsageError(
            f"no split folders under {root}: expected sub-folders named like "
            "train/, val/ (valid/, validation/, dev/) or test/; name others with --split."
        )
    return found


def _fail_limit(text: str) -> tuple[float, bool]:
    """Parse ``--fail-on-leak`` (a count, or a percentage ending in %)."""
    try:
        if text.endswith("%"):
            return float(text[:-1]), True
        return float(int(text)), False
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a number of images or a percentage like 1%; got {text!r}"
        ) from None


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hash",
        dest="method",
        choices=AUDIT_METHODS,
        default=DEFAULT_METHOD,
        help="hash to compare (default: %(default)s)",
    )
    parser.add_argument(
        "--threshold",
        type=int,
        default=None,
        help=f"largest Hamming distance counted as a duplicate (default: {DEFAULT_THRESHOLDS})",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="processes for hashing (default: all cores)"
    )
    parser.add_argument("--csv", type=Path, help="write the per-image table to this CSV file")
    parser.add_argument("--json", type=Path, help="write the report to this JSON file")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, summary only")
    parser.add_argument(
        "--fail-on-leak",
        nargs="?",
        const="0",
        default=None,
        type=_fail_limit,
        metavar="N|P%",
        help="exit 1 when more than N images (or P%% of any split) leak "
        "(default when given without a value: any leak)",
    )


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``leakaudit`` command."""
    parser = argparse.ArgumentParser(
        prog="leakaudit",
        description="Find near-duplicate images leaking across train/val/test splits.",
    )
    parser.add_argument("--version", action="version", version=f"leakaudit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    scan = sub.add_parser("scan", help="audit the split folders under ROOT")
    scan.add_argument("root", type=Path, metavar="ROOT")
    scan.add_argument(
        "--split",
        action="append",
        default=[],
        metavar="NAME",
        help="also treat sub-folder NAME as a split (repeatable)",
    )
    _add_common(scan)

    compare = sub.add_parser("compare", help="check TEST_DIR (and more) against TRAIN_DIR")
    compare.add_argument(
        "dirs", type=Path, nargs="+", metavar="DIR", help="TRAIN_DIR TEST_DIR [MORE_DIRS]"
    )
    _add_common(compare)

    demo = sub.add_parser("demo", help="build a demo dataset with planted leaks and audit it")
    demo.add_argument(
        "dir",
        type=Path,
        nargs="?",
        default=None,
        metavar="DIR",
        help="where to write it (default: a new temporary folder)",
    )
    _add_common(demo)

    sub.add_parser("env", help="print versions, for bug reports")
    return parser


def _check_dir(path: Path) -> Path:
    if not path.exists():
        raise UsageError(f"folder not found: {path}")
    if not path.is_dir():
        raise UsageError(f"not a folder: {path}")
    return path


def _run_audit(splits: dict[str, Path], args: argparse.Namespace) -> LeakageReport:
    progress = False if args.quiet else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = audit_splits(
            splits,
            method=args.method,
            threshold=args.threshold,
            workers=args.workers,
            progress=progress,
        )
    for warning in caught:
        log.warning("%s", warning.message)
    return report


def _write_outputs(report: LeakageReport, args: argparse.Namespace) -> None:
    if args.csv is not None and report.table is not None:
        report.table.to_csv(args.csv, index=False)
        log.info("wrote %s", args.csv)
    if args.json is not None:
        args.json.write_text(report.to_json(), encoding="utf-8")
        log.info("wrote %s", args.json)


def _exit_code(report: LeakageReport, args: argparse.Namespace) -> int:
    if args.fail_on_leak is None:
        return 0
    limit, is_percent = args.fail_on_leak
    if is_percent:
        over = bool((report.pct_leaked_by_split > limit).any())
    else:
        over = report.n_leaked_images > limit
    return 1 if over else 0


def _compare_lines(report: LeakageReport, reference: str) -> list[str]:
    """One line per leaked non-reference image with its closest reference match."""
    table = report.table
    assert table is not None
    lines = []
    leaked = table[table["group_id"].isin(report.leaked_groups["group_id"])]
    for _, members in leaked.groupby("group_id", sort=False):
        ref = members[members["split"] == reference]
        if ref.empty:
            continue
        ref_hashes = np.array([int(h, 16) for h in ref["hash"]], dtype=np.uint64)
        for row in members[members["split"] != reference].itertuples(index=False):
            distance = popcount64(ref_hashes ^ np.uint64(int(row.hash, 16)))
            best = int(np.argmin(distance))
            lines.append(
                f"LEAK  {row.path}  ~  {ref['path'].iloc[best]}  (distance {distance[best]})"
            )
    return lines


def _cmd_compare(args: argparse.Namespace) -> int:
    if len(args.dirs) < 2:
        raise UsageError("compare needs TRAIN_DIR and at least one TEST_DIR")
    splits: dict[str, Path] = {}
    for path in args.dirs:
        _check_dir(path)
        name = path.resolve().name or str(path)
        while name in splits:
            name += "'"
        splits[name] = path
    reference = next(iter(splits))
    report = _run_audit(splits, args)
    for line in _compare_lines(report, reference):
        print(line)
    assert report.table is not None
    for split, count in report.images_by_split.items():
        if split == reference:
            continue
        table = report.table
        in_split = table[table["split"] == split]
        leaked_ids = set(report.leaked_groups["group_id"])
        ref_groups = set(table.loc[table["split"] == reference, "group_id"]) & leaked_ids
        n = int(in_split["group_id"].isin(ref_groups).sum())
        pct = 100.0 * n / count if count else 0.0
        print(f"{n} of {count} {split} images ({pct:.1f}%) also appear in {reference}.")
    _write_outputs(report, args)
    return _exit_code(report, args)


def _cmd_scan(args: argparse.Namespace) -> int:
    splits = find_split_folders(_check_dir(args.root), args.split)
    report = _run_audit(splits, args)
    print(report.to_text())
    _write_outputs(report, args)
    return _exit_code(report, args)


def _cmd_demo(args: argparse.Namespace) -> int:
    from leakaudit.demo import build_demo_dataset

    root = args.dir if args.dir is not None else Path(tempfile.mkdtemp(prefix="leakaudit-demo-"))
    demo = build_demo_dataset(root)
    print(f"Demo dataset written to {root} with {len(demo.planted_leaks)} planted leaks:")
    for original, copy, how in demo.planted_leaks:
        print(f"  {copy}  <-  {original}  ({how})")
    print()
    report = _run_audit(demo.splits, args)
    print(report.to_text())
    _write_outputs(report, args)
    return _exit_code(report, args)


def _cmd_env() -> int:
    import pandas
    import PIL

    print(f"leakaudit {__version__}")
    print(f"python {platform.python_version()} ({sys.executable})")
    print(f"platform {platform.platform()}")
    print(f"numpy {np.__version__}, pandas {pandas.__version__}, Pillow {PIL.__version__}")
    for name in ("torch", "torchvision", "datasets"):
        try:
            from importlib.metadata import version

            print(f"{name} {version(name)}")
        except Exception:
            print(f"{name} not installed")
    print(f"cpus {os.cpu_count()}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.command is None:
        parser.print_help()
        return 2
    quiet = getattr(args, "quiet", False)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("leakaudit: %(levelname)s: %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(logging.WARNING if quiet else logging.INFO)
    log.propagate = False
    commands: dict[str, Any] = {
        "scan": _cmd_scan,
        "compare": _cmd_compare,
        "demo": _cmd_demo,
    }
    try:
        if args.command == "env":
            return _cmd_env()
        code: int = commands[args.command](args)
        return code
    except (UsageError, FileNotFoundError, NotADirectoryError, ValueError, TypeError) as error:
        print(f"leakaudit: error: {error}", file=sys.stderr)
        return 2


def main_entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
