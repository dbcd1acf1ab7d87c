"""``leakaudit impact REPORT PREDICTIONS`` and ``scan --predictions``: a model's accuracy on
the leaked and on the clean images (:mod:`leakaudit.impact`).

Errors are ``ValueError`` (one line, exit 2, as every input error of the command line).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from leakaudit._impact_io import (
    read_predictions,
    read_report_images,
    summary_report,
    write_impact_csv,
    write_impact_json,
)
from leakaudit.htmlreport import write_html
from leakaudit.impact import (
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    ScoreImpact,
    correct_column,
    score_impact,
)
from leakaudit.report import LeakageReport
from leakaudit.safe_io import check_output_path

__all__ = [
    "add_impact_parser",
    "add_scan_predictions",
    "cmd_impact",
    "scan_impact",
    "scan_predictions",
]

_PREDICTIONS_HELP = (
    "a .csv or .parquet table with one row per image: a 'correct' column (true/false, 1/0), "
    "or 'label' and 'prediction' columns; keyed by 'path' (as in the report, or its end: "
    "test/cat/1.png), else 'index' (position among the split's images in the report), else "
    "read in order"
)


def add_impact_parser(sub: Any) -> None:
    """The ``impact`` subcommand's arguments."""
    impact = sub.add_parser(
        "impact",
        help="a model's accuracy on the leaked and on the clean test images",
        description="Score a model's predictions on one split of a saved report: accuracy on "
        "all its images, on the leaked ones (a copy in another split) and on the clean rest, "
        "the differences, and the same per class (the 'label' column, else the images' "
        "folders), each with a percentile bootstrap interval.",
    )
    impact.add_argument(
        "report",
        type=Path,
        metavar="REPORT",
        help="the --json file of `leakaudit scan`, or its --csv images table",
    )
    impact.add_argument("predictions", type=Path, metavar="PREDICTIONS", help=_PREDICTIONS_HELP)
    impact.add_argument(
        "--split", default="test", metavar="NAME", help="the split scored (default: test)"
    )
    impact.add_argument(
        "--n-boot",
        type=int,
        default=DEFAULT_N_BOOT,
        metavar="N",
        help=f"bootstrap resamples per interval (default: {DEFAULT_N_BOOT})",
    )
    impact.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"bootstrap seed (default: {DEFAULT_SEED})"
    )
    impact.add_argument("--json", type=Path, metavar="FILE", help="write the figures as JSON")
    impact.add_argument(
        "--csv", type=Path, metavar="FILE", help="write every figure, per class too, as CSV"
    )
    impact.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="write an HTML page: the report's summary and the accuracy section",
    )


def add_scan_predictions(scan: argparse.ArgumentParser) -> None:
    """``scan --predictions FILE [--predictions-split NAME]``."""
    group = scan.add_argument_group("a model's score")
    group.add_argument(
        "--predictions",
        type=Path,
        metavar="FILE",
        help="also print the model's accuracy on the leaked and the clean images of "
        "--predictions-split, and show it in --html; FILE is " + _PREDICTIONS_HELP,
    )
    group.add_argument(
        "--predictions-split",
        default="test",
        metavar="NAME",
        help="the split --predictions scores (default: test)",
    )


def _check_outputs(args: argparse.Namespace) -> None:
    inputs = {args.report.resolve(), args.predictions.resolve()}
    for option in ("json", "csv", "html"):
        target: Path | None = getattr(args, option)
        if target is None:
            continue
        if target.resolve() in inputs:
            raise ValueError(f"--{option} {target} would overwrite an input file.")
        check_output_path(target, option=f"--{option}")


def cmd_impact(args: argparse.Namespace) -> int:
    """Run ``leakaudit impact``."""
    _check_outputs(args)
    images = read_report_images(args.report)
    predictions = _read(args.predictions)
    impact = score_impact(images, predictions, split=args.split, n_boot=args.n_boot, seed=args.seed)
    print(impact.to_text())
    _write(impact, args)
    if args.html is not None:
        write_html(summary_report(images, args.report), args.html, impact=impact)
    return 0


def _read(path: Path) -> pd.DataFrame:
    try:
        return read_predictions(path)
    except ImportError as error:
        raise ValueError(str(error)) from None


def _write(impact: ScoreImpact, args: argparse.Namespace) -> None:
    if args.json is not None:
        write_impact_json(impact, args.json)
    if args.csv is not None:
        write_impact_csv(impact, args.csv)


def scan_predictions(args: argparse.Namespace, splits: Iterable[str]) -> pd.DataFrame | None:
    """``scan --predictions``: the table, read and its columns and split checked before the
    audit (which may take hours)."""
    if getattr(args, "predictions", None) is None:
        return None
    names = [str(name) for name in splits]
    if args.predictions_split not in names:
        raise ValueError(
            f"--predictions-split {args.predictions_split!r} is not a split here; the splits "
            f"are: {', '.join(names)}."
        )
    if args.html is not None and args.predictions.resolve() == args.html.resolve():
        raise ValueError(f"--html {args.html} would overwrite the --predictions file.")
    predictions = _read(args.predictions)
    correct_column(predictions)
    return predictions


def scan_impact(
    report: LeakageReport, args: argparse.Namespace, predictions: pd.DataFrame | None
) -> ScoreImpact | None:
    """``scan --predictions``: the figures, printed after the report."""
    if predictions is None:
        return None
    impact = report.score_impact(predictions, split=args.predictions_split)
    print()
    print(impact.to_text())
    return impact
