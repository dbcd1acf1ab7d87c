"""The files of ``leakaudit impact``: a saved report's images table, a predictions table,
and the figures written back as JSON or CSV.

A report is read from what ``leakaudit scan`` writes: the ``--json`` file (its ``images``
records) or the ``--csv`` images table (``path``, ``split``, ``leaked``, ``group_id``). The
HTML report holds no table to read back.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pandas as pd

from leakaudit._export_encoding import write_csv
from leakaudit.impact import ScoreImpact
from leakaudit.report import LeakageReport, dhash_audit
from leakaudit.safe_io import atomic_open

__all__ = [
    "PREDICTION_SUFFIXES",
    "read_predictions",
    "read_report_images",
    "summary_report",
    "write_impact_csv",
    "write_impact_json",
]

#: File types a predictions table may be: CSV, or Parquet (needs pyarrow).
PREDICTION_SUFFIXES = (".csv", ".parquet", ".pq")
# The first character of a text cell that --csv writes behind a quote (against spreadsheet
# formulas, leakaudit._export_encoding): such a cell is read back without the quote.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_OTHER_TABLES = {
    "split_a": "the pairs table (.pairs.csv)",
    "members_by_split": "the groups table (.groups.csv)",
    "n_within_split_duplicates": "the splits table (.splits.csv)",
}


def read_predictions(path: str | Path) -> pd.DataFrame:
    """Read a predictions table: ``.csv``, or ``.parquet`` / ``.pq`` (pyarrow).

    Paths and labels are read as text (a class named ``007`` stays ``007``).
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in PREDICTION_SUFFIXES:
        raise ValueError(f"predictions must be a .csv or .parquet file; got {target.name!r}.")
    if not target.is_file():
        raise ValueError(f"predictions file not found: {target}")
    if suffix == ".csv":
        text_columns = {"path": object, "label": object, "prediction": object}
        frame = pd.read_csv(
            target, dtype=text_columns, encoding_errors="surrogateescape", keep_default_na=False,
            na_values=[""],
        )  # fmt: skip
        return frame
    try:
        return pd.read_parquet(target)
    except ImportError:
        raise ImportError(
            "reading a .parquet predictions table needs pyarrow: "
            "pip install 'leakaudit-vision[parquet]'"
        ) from None


def _undefused(column: pd.Series) -> pd.Series:
    def plain(value: Any) -> Any:
        if isinstance(value, str) and value[:1] == "'" and value[1:2].startswith(_FORMULA_STARTS):
            return value[1:] if value[1:2] else value
        return value

    return column.map(plain)


def read_report_images(path: str | Path) -> pd.DataFrame:
    """The per-image table of a saved report: ``path``, ``split``, ``leaked``, ``group_id``.

    ``path`` is a ``--json`` file (``leakaudit scan --json``) or the ``--csv`` images table.
    """
    target = Path(path)
    if not target.is_file():
        raise ValueError(f"report file not found: {target}")
    suffix = target.suffix.lower()
    if suffix in (".html", ".htm"):
        raise ValueError(
            f"{target.name}: an HTML report cannot be read back; give the --json file or the "
            "--csv images table of the same scan."
        )
    if suffix == ".json":
        with open(target, encoding="utf-8") as handle:
            document = json.load(handle)
        if not isinstance(document, dict) or document.get("format") != "leakaudit-report":
            raise ValueError(f"{target.name} is not a leakaudit report (leakaudit scan --json).")
        if "images" not in document:
            raise ValueError(
                f"{target.name} has no images table (the report had no table); scan again "
                "with --json."
            )
        frame = pd.DataFrame(document["images"])
    elif suffix == ".csv":
        frame = pd.read_csv(
            target, dtype={"path": object, "split": object}, keep_default_na=False,
            na_values=[""], encoding_errors="surrogateescape",
        )  # fmt: skip
        for column in ("path", "split"):
            if column in frame.columns:
                frame[column] = _undefused(frame[column])
    else:
        raise ValueError(
            f"the report must be the .json file of `leakaudit scan --json` or the .csv "
            f"images table of --csv; got {target.name!r}."
        )
    missing = [c for c in ("path", "split", "leaked", "group_id") if c not in frame.columns]
    if missing:
        other = next((name for column, name in _OTHER_TABLES.items() if column in frame), None)
        hint = f": this is {other}; give the images table (the file --csv named)" if other else ""
        raise ValueError(
            f"{target.name} has no {', '.join(repr(c) for c in missing)} column(s){hint}."
        )
    leaked = frame["leaked"]
    if leaked.dtype != bool:
        words = leaked.astype(str).str.strip().str.lower()
        if not words.isin(["true", "false"]).all():
            raise ValueError(f"{target.name}: the 'leaked' column must be true or false.")
        frame["leaked"] = words == "true"
    images: pd.DataFrame = frame[["path", "split", "leaked", "group_id"]].reset_index(drop=True)
    return images


def summary_report(images: pd.DataFrame, path: str | Path) -> LeakageReport:
    """A report without its table, for an HTML page of the summary: from the JSON file's
    own summary, or rebuilt from the images table's groups."""
    target = Path(path)
    if target.suffix.lower() == ".json":
        with open(target, encoding="utf-8") as handle:
            return LeakageReport.from_dict(json.load(handle))
    report = dhash_audit(images[["path", "split", "group_id"]])
    return dataclasses.replace(report, table=None)


def write_impact_json(impact: ScoreImpact, path: str | Path) -> Path:
    """Write :meth:`ScoreImpact.to_dict` as indented JSON (by temporary name + rename)."""
    target = Path(path)
    with atomic_open(target, "w", encoding="utf-8") as handle:
        json.dump(impact.to_dict(), handle, indent=2)
        handle.write("\n")
    return target


def write_impact_csv(impact: ScoreImpact, path: str | Path) -> Path:
    """Write :meth:`ScoreImpact.to_frame` as CSV (by temporary name + rename)."""
    target = Path(path)
    with atomic_open(target, "w", encoding="utf-8", errors="surrogateescape", newline="") as handle:
        write_csv(handle, impact.to_frame())
    return target
