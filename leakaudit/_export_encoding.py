"""How the tables' cells are written: JSON values (valid Unicode, no NaN) encoded in chunks, and
the CSV cells a spreadsheet would run as a formula, quoted.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from typing import IO, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._text import printable

__all__ = [
    "csv_safe",
    "defused_cell",
    "encode_string",
    "encode_value",
    "holds_carriage_return",
    "iter_records_json",
    "json_ready",
    "json_records",
    "write_csv",
]


def _plain(value: Any) -> Any:
    """Return ``value`` as a plain Python scalar for ``json``."""
    if isinstance(value, np.generic):
        return value.item()
    return value


# Lone surrogates: in a str they can only stand for undecodable bytes (os.fsdecode's
# surrogateescape) or other broken text; strict JSON parsers reject them.
_SURROGATES = re.compile("[\ud800-\udfff]")


def _json_text(text: str) -> str:
    """``text`` with each lone surrogate written as :func:`~leakaudit._text.printable` does.

    An undecodable byte of a non-UTF-8 file name becomes the four characters
    ``\\xNN``; everything else is kept (``json`` escapes control characters
    itself).
    """
    if _SURROGATES.search(text) is None:
        return text
    return _SURROGATES.sub(lambda match: printable(match.group()), text)


def json_ready(value: Any) -> Any:
    """``value`` with NaN/inf (not valid JSON) as None and text made strict, recursively."""
    if isinstance(value, str):
        return _json_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {json_ready(k) if isinstance(k, str) else k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_ready(v) for v in value]
    return value


def _column_values(column: pd.Series) -> tuple[list[Any], bool]:
    """The column as the values its records hold, and whether they are all text or None.

    Plain Python values, missing and non-finite ones as None, text made
    strict (:func:`json_ready`).
    """
    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biu":
        values: list[Any] = column.to_numpy().tolist()
        return values, False
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        array = column.to_numpy()
        values = array.tolist()
        for index in np.flatnonzero(~np.isfinite(array)).tolist():
            values[index] = None
        return values, False
    objects = column.astype(object)
    values = objects.where(objects.notna(), None).tolist()
    if pd.api.types.infer_dtype(values, skipna=True) == "string":
        # Only a surrogate needs a change, and most columns hold none: one search for all.
        if _SURROGATES.search("".join(filter(None, values))) is None:
            return values, True
        return [None if v is None else _json_text(v) for v in values], True
    return [json_ready(_plain(v)) for v in values], False


def json_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    # Column by column, not frame.to_dict: a Python call per cell cost seconds on 100k rows.
    # Not frame.to_json either: its encoder refuses the surrogates of non-UTF-8 file names.
    keys = [_json_text(str(key)) for key in frame.columns]
    if not keys:
        return [{} for _ in range(len(frame))]
    columns = [_column_values(frame.iloc[:, i])[0] for i in range(frame.shape[1])]
    return [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]


# Rows encoded per step when writing the tables: bounds the text held at once.
_JSON_CHUNK_ROWS = 20_000


# What ``json.dumps(..., indent=2)`` (ensure_ascii) writes for a string.
encode_string: Callable[[str], str] = json.encoder.encode_basestring_ascii


def encode_value(value: Any, newline: str) -> str:
    """JSON of one JSON-ready value, as ``json.dumps(..., indent=2)`` nests it at ``newline``."""
    if isinstance(value, str):
        return encode_string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return float.__repr__(value)
    return json.dumps(value, indent=2).replace("\n", newline)


def _encoded_column(column: pd.Series, newline: str) -> list[str]:
    """JSON of each value of ``column`` in a record nested at ``newline``."""
    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype.kind == "b":
        encoded: list[str] = np.where(column.to_numpy(), "true", "false").tolist()
        return encoded
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        return [int.__repr__(v) for v in column.to_numpy().tolist()]
    values, text = _column_values(column)
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        return ["null" if v is None else float.__repr__(v) for v in values]
    if text:
        if None not in values:
            return list(map(encode_string, values))
        return ["null" if v is None else encode_string(v) for v in values]
    return [encode_value(v, newline) for v in values]


def iter_records_json(frame: pd.DataFrame) -> Iterator[str]:
    """The text of ``frame`` as a list of records, one level into the document (``indent=2``).

    What ``json.dumps`` writes for :func:`json_records`, without building the
    records: column by column, a chunk of rows at a time.
    """
    if not len(frame):
        yield "[]"
        return
    keys = [encode_string(_json_text(str(key))) for key in frame.columns]
    # A record is a dict at level 2, its values at level 3.
    template = "{" + ",".join(f"\n      {key.replace('%', '%%')}: %s" for key in keys) + "\n    }"
    if not keys:
        template = "{}"
    yield "["
    for start in range(0, len(frame), _JSON_CHUNK_ROWS):
        part = frame.iloc[start : start + _JSON_CHUNK_ROWS]
        columns = [_encoded_column(part.iloc[:, i], "\n      ") for i in range(part.shape[1])]
        rows = zip(*columns, strict=True) if columns else (() for _ in range(len(part)))
        records = [template % row for row in rows]
        yield ("\n    " if start == 0 else ",\n    ") + ",\n    ".join(records)
    yield "\n  ]"


# What spreadsheet tools read as the start of a formula (OWASP, "CSV injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def defused_cell(value: Any) -> Any:
    """``value`` with a ``'`` in front when it is text a spreadsheet would run as a formula.

    The one rule for every CSV leakaudit writes (the scan's tables, ``clean``'s
    manifest): text starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
    return gets the quote; anything else is returned unchanged.

    Examples
    --------
    >>> [defused_cell(value) for value in ("=HYPERLINK(1)", "-1.jpg", "a.jpg", -1)]
    ["'=HYPERLINK(1)", "'-1.jpg", 'a.jpg', -1]
    """
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


# A formula start after the separator ``_may_hold_formulas`` joins cells with.
_JOINED_FORMULA = re.compile("\x00[=+\\-@\t\r]")


def _may_hold_formulas(values: NDArray[Any]) -> bool:
    """False when no cell of ``values`` starts like a formula; True when one may.

    One search over the cells joined (a check per cell costs seconds on 100k
    rows); a separator inside a cell can only make it answer True.
    """
    present = values[pd.notna(values)].tolist()
    if pd.api.types.infer_dtype(present, skipna=False) not in ("string", "empty"):
        return True
    return _JOINED_FORMULA.search("\x00" + "\x00".join(present)) is not None


def _is_text(dtype: Any) -> bool:
    if isinstance(dtype, pd.CategoricalDtype):
        return _is_text(dtype.categories.dtype)
    return (isinstance(dtype, np.dtype) and dtype.kind == "O") or isinstance(dtype, pd.StringDtype)


def csv_safe(frame: pd.DataFrame) -> tuple[pd.DataFrame, bool | list[str]]:
    """``frame`` with text cells that a spreadsheet would run as a formula defused, and its header.

    Only text columns are looked at (a negative number stays a number).
    """
    names = [str(name) for name in frame.columns]
    header: bool | list[str] = True
    if any(name.startswith(_FORMULA_STARTS) for name in names):
        header = [defused_cell(name) for name in names]
    safe = frame
    for index, dtype in enumerate(frame.dtypes.tolist()):
        if not _is_text(dtype):
            continue
        values = frame.iloc[:, index].to_numpy(dtype=object)
        if not _may_hold_formulas(values):
            continue
        risky = [isinstance(v, str) and v.startswith(_FORMULA_STARTS) for v in values]
        if not any(risky):
            continue
        if safe is frame:
            safe = frame.copy()
        changed = values.copy()
        for row in np.flatnonzero(risky).tolist():
            changed[row] = defused_cell(changed[row])
        safe.isetitem(index, pd.Series(changed, index=frame.index, dtype=object))
    return safe, header


def holds_carriage_return(frame: pd.DataFrame) -> bool:
    """Whether a text cell or a column name of ``frame`` holds a carriage return."""
    if any("\r" in str(name) for name in frame.columns):
        return True
    for index, dtype in enumerate(frame.dtypes.tolist()):
        if not _is_text(dtype):
            continue
        values = frame.iloc[:, index].to_numpy(dtype=object)
        present = [value for value in values[pd.notna(values)].tolist() if isinstance(value, str)]
        if "\r" in "".join(present):
            return True
    return False


def write_csv(handle: IO[str], frame: pd.DataFrame) -> None:
    """Write ``frame`` as CSV to ``handle``, as every CSV of leakaudit is written.

    ``handle`` is a text file opened with ``newline=""`` and
    ``errors="surrogateescape"`` (a name that is not UTF-8 written as its own
    bytes). Cells a spreadsheet would run as a formula are quoted
    (:func:`csv_safe`); a file whose cells hold a carriage return ends its
    lines with ``\\r\\n``, which makes the writer quote each cell holding one.
    """
    safe, header = csv_safe(frame)
    # Python's csv writer quotes a field holding a character of the line
    # terminator: with "\n" alone, a carriage return in a file name went
    # out bare and readers split the row there.
    terminator = "\r\n" if holds_carriage_return(safe) else "\n"
    # pandas 2.0 writes a float column as values.astype(str), which numpy 1.24 (the floors)
    # reports as an invalid cast where a cell is NaN: a RuntimeWarning on the user's
    # terminal for an empty cell, which is written as one all the same.
    with np.errstate(invalid="ignore"):
        safe.to_csv(handle, index=False, header=header, lineterminator=terminator)
