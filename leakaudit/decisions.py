"""A reviewer's decisions on pairs of images: "copy" or "not a copy", applied to an audit.

Copy detection ends in a person's judgment. The HTML report's review controls
(:mod:`leakaudit._review`) save each decision as one row of a small CSV file;
``audit_splits(..., decisions=FILE)`` and ``leakaudit scan|clean --decisions FILE``
apply them:

- a ``not a copy`` pair never links: the two images end in different groups
  (the verified pairs that would join them are dropped, weakest first, as
  :func:`leakaudit.grouping.linking_pairs_kept_apart` drops them);
- a ``copy`` pair always links: it is added to the verified pairs with stage
  ``decision``.

A decision names its images by content, the 16-hex-digit BLAKE2b digest of the
file's bytes (:func:`leakaudit.hashing.bytes_digest`, the report's ``digest``
column), so it survives renames and moves. A decision whose image is no longer
among the audited images (the file changed, or was removed) is stale: it is
reported (:class:`StaleDecisionWarning`, ``report.parameters["decisions"]``) and
not applied.

The file (``docs/review.md``)::

    decision,digest_a,digest_b,path_a,path_b
    not a copy,3f0c...,9a41...,train/cat/1.png,test/cat/9.png
    copy,77b2...,0c5e...,train/dog/4.png,val/dog/2.png

``path_a`` and ``path_b`` are the paths as the reviewer saw them, for people;
only the digests are read. A JSON file holds the same rows as a list of objects
(``{"decisions": [{"decision": ..., "digest_a": ..., ...}]}``).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._evidence import COPY_KIND, DECISION, EDGE_COLUMNS
from leakaudit._text import first_few, printable
from leakaudit.errors import LeakauditError
from leakaudit.grouping import connected_component_labels, linking_pairs_kept_apart

__all__ = [
    "COPY",
    "DECISION_COLUMNS",
    "NOT_A_COPY",
    "AppliedDecisions",
    "Decision",
    "DecisionsFileError",
    "ReviewDecisions",
    "StaleDecisionWarning",
    "apply_decisions",
    "decisions_csv",
    "load_decisions",
]

#: The two verdicts a reviewer gives a pair.
COPY = "copy"
NOT_A_COPY = "not a copy"
#: The columns of a decisions file, in order (``path_a`` and ``path_b`` are for people).
DECISION_COLUMNS = ("decision", "digest_a", "digest_b", "path_a", "path_b")
#: What a decision edge's ``copy_kind`` says.
DECIDED_KIND = "a copy, by a reviewer's decision"

_DIGEST = re.compile(r"[0-9a-f]{16}")
#: Decisions files are small (one row per reviewed pair): a larger one is not one.
_MAX_BYTES = 64 * 2**20


class DecisionsFileError(LeakauditError, ValueError):
    """A decisions file cannot be read, or one of its rows is malformed (named with its line)."""


class StaleDecisionWarning(UserWarning):
    """Decisions whose images are no longer among the audited ones: not applied."""


@dataclass(frozen=True)
class Decision:
    """One reviewed pair: the verdict and the two images' byte digests.

    Attributes
    ----------
    decision : {"copy", "not a copy"}
    digest_a, digest_b : str
        16 lowercase hex digits each (the report's ``digest`` column).
    path_a, path_b : str
        The paths the reviewer saw (not used to find the images).
    line : int
        Where the decision is in its file (1: the first line), for messages.
    """

    decision: str
    digest_a: str
    digest_b: str
    path_a: str = ""
    path_b: str = ""
    line: int = 0

    @property
    def key(self) -> tuple[str, str]:
        """The pair, in either order: ``(min digest, max digest)``."""
        low, high = sorted((self.digest_a, self.digest_b))
        return low, high

    def describe(self) -> str:
        """``'not a copy: a.png ~ b.png (line 3)'``, for messages."""
        names = f"{self.path_a or self.digest_a} ~ {self.path_b or self.digest_b}"
        where = f" (line {self.line})" if self.line else ""
        return printable(f"{self.decision}: {names}{where}")


@dataclass(frozen=True)
class ReviewDecisions:
    """The decisions of one file (or made in code), one per pair of images.

    Examples
    --------
    >>> decisions = ReviewDecisions(
    ...     [Decision("not a copy", "00000000000000aa", "00000000000000bb")]
    ... )
    >>> len(decisions), decisions.decisions[0].key
    (1, ('00000000000000aa', '00000000000000bb'))
    """

    decisions: Sequence[Decision]
    source: str = ""

    def __post_init__(self) -> None:
        seen: dict[tuple[str, str], Decision] = {}
        for decision in self.decisions:
            _check_decision(decision, self.source)
            earlier = seen.setdefault(decision.key, decision)
            if earlier.decision != decision.decision:
                raise DecisionsFileError(
                    f"{self.source or 'decisions'}: the pair {decision.path_a or decision.digest_a}"
                    f" ~ {decision.path_b or decision.digest_b} is decided twice, "
                    f"{earlier.decision!r} (line {earlier.line}) and {decision.decision!r} "
                    f"(line {decision.line}); keep one."
                )

    def __len__(self) -> int:
        return len(self.decisions)


def _check_decision(decision: Decision, source: str) -> None:
    where = f"{source or 'decisions'}, line {decision.line}" if decision.line else "decisions"
    if decision.decision not in (COPY, NOT_A_COPY):
        raise DecisionsFileError(
            f"{where}: decision must be 'copy' or 'not a copy'; got {decision.decision!r}."
        )
    for name in ("digest_a", "digest_b"):
        value = getattr(decision, name)
        if not isinstance(value, str) or not _DIGEST.fullmatch(value):
            raise DecisionsFileError(
                f"{where}: {name} must be 16 lowercase hex digits (the report's digest "
                f"column); got {value!r}."
            )
    if decision.digest_a == decision.digest_b:
        raise DecisionsFileError(
            f"{where}: digest_a and digest_b name the same bytes (byte-identical files are "
            "always copies); remove the row."
        )


def load_decisions(path: str | os.PathLike[str]) -> ReviewDecisions:
    """Read a decisions file: the CSV the HTML report saves, or the same rows as JSON.

    Parameters
    ----------
    path : path-like
        The file. JSON when its first non-blank character is ``{`` or ``[``.

    Returns
    -------
    ReviewDecisions

    Raises
    ------
    DecisionsFileError
        The file cannot be read, or a row is malformed: the message names the file
        and the line.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> file = pathlib.Path(tempfile.mkdtemp()) / "decisions.csv"
    >>> _ = file.write_text(
    ...     "decision,digest_a,digest_b,path_a,path_b\\n"
    ...     "copy,00000000000000aa,00000000000000bb,train/a.png,test/b.png\\n"
    ... )
    >>> load_decisions(file).decisions[0].describe()
    'copy: train/a.png ~ test/b.png (line 2)'
    """
    name = printable(os.fspath(path))
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_BYTES + 1)
    except OSError as exc:
        raise DecisionsFileError(
            f"{name}: cannot read the decisions file ({exc.strerror or exc})."
        ) from exc
    if len(data) > _MAX_BYTES:
        raise DecisionsFileError(
            f"{name}: larger than {_MAX_BYTES // 2**20} MiB; not a decisions file."
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DecisionsFileError(f"{name}, line {line}: not UTF-8 text.") from exc
    json_like = text.lstrip()[:1] in ("{", "[")
    rows = _json_rows(text, name) if json_like else _csv_rows(text, name)
    return ReviewDecisions(rows, source=name)


def _csv_rows(text: str, name: str) -> list[Decision]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise DecisionsFileError(f"{name}, line 1: not CSV ({exc}).") from exc
    if header is None:
        return []
    header = [column.strip() for column in header]
    missing = [c for c in DECISION_COLUMNS[:3] if c not in header]
    if missing:
        raise DecisionsFileError(
            f"{name}, line 1: the header must name the columns "
            f"{', '.join(DECISION_COLUMNS)}; missing {', '.join(missing)}."
        )
    at = {column: header.index(column) for column in DECISION_COLUMNS if column in header}
    rows: list[Decision] = []
    try:
        for record in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in record):
                continue
            if len(record) != len(header):
                raise DecisionsFileError(
                    f"{name}, line {line}: {len(record)} field(s), the header has {len(header)}."
                )
            values = {column: record[index].strip() for column, index in at.items()}
            rows.append(_decision(values, line))
    except csv.Error as exc:
        raise DecisionsFileError(f"{name}, line {reader.line_num}: not CSV ({exc}).") from exc
    return rows


def _json_rows(text: str, name: str) -> list[Decision]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DecisionsFileError(f"{name}, line {exc.lineno}: not JSON ({exc.msg}).") from exc
    items = data.get("decisions") if isinstance(data, Mapping) else data
    if not isinstance(items, list):
        raise DecisionsFileError(
            f"{name}: JSON decisions must be a list of objects, or an object whose "
            "'decisions' is one."
        )
    rows = []
    for number, item in enumerate(items, start=1):
        if not isinstance(item, Mapping):
            raise DecisionsFileError(f"{name}, decision {number}: must be an object.")
        values = {column: item.get(column, "") for column in DECISION_COLUMNS}
        rows.append(_decision(values, number))
    return rows


def _decision(values: Mapping[str, Any], line: int) -> Decision:
    verdict = str(values.get("decision", "")).strip().lower().replace("_", " ").replace("-", " ")
    return Decision(
        " ".join(verdict.split()),
        str(values.get("digest_a", "")).strip().lower(),
        str(values.get("digest_b", "")).strip().lower(),
        str(values.get("path_a", "") or ""),
        str(values.get("path_b", "") or ""),
        line,
    )


def decisions_csv(decisions: Sequence[Decision]) -> str:
    """The CSV text of ``decisions``: what the HTML report's save button writes."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(DECISION_COLUMNS)
    for d in decisions:
        writer.writerow([d.decision, d.digest_a, d.digest_b, d.path_a, d.path_b])
    return buffer.getvalue()


@dataclass(frozen=True)
class AppliedDecisions:
    """What applying decisions did to one audit.

    Attributes
    ----------
    labels : numpy.ndarray of int64
        The group of each row afterwards (``0..g-1``).
    edges : pandas.DataFrame
        The verified pairs afterwards: ``copy`` decisions added (stage ``decision``),
        pairs that would join a ``not a copy`` pair dropped.
    linked : int
        ``copy`` decisions that joined two images no verified pair had joined: the
        links that came from decisions.
    separated : int
        ``not a copy`` decisions whose images the audit had put in one group.
    confirmed : int
        Decisions the audit already agreed with.
    refused : list of Decision
        ``copy`` decisions not applied because they would join a ``not a copy`` pair.
    stale : list of Decision
        Decisions one of whose images is not among the audited images (changed or
        gone): not applied.
    dropped_edges : int
        Verified pairs dropped to keep ``not a copy`` pairs apart.
    apart : list of str
        The applied ``not a copy`` pairs, each ``"digest_a digest_b"`` (the smaller
        first): the HTML report names them as kept apart by a decision.
    """

    labels: NDArray[np.int64]
    edges: pd.DataFrame
    linked: int = 0
    separated: int = 0
    confirmed: int = 0
    refused: list[Decision] = field(default_factory=list)
    stale: list[Decision] = field(default_factory=list)
    dropped_edges: int = 0
    apart: list[str] = field(default_factory=list)

    def parameters(self, source: str) -> dict[str, Any]:
        """The record kept in ``report.parameters["decisions"]``."""
        return {
            "file": source,
            "links_from_decisions": self.linked,
            "separated": self.separated,
            "confirmed": self.confirmed,
            "dropped_pairs": self.dropped_edges,
            "refused": [d.describe() for d in self.refused],
            "stale": [d.describe() for d in self.stale],
            "apart": list(self.apart),
        }


def apply_decisions(
    decisions: ReviewDecisions,
    digests: Sequence[str | None],
    edges: pd.DataFrame,
    labels: NDArray[np.int64],
) -> AppliedDecisions:
    """Apply ``decisions`` to the verified pairs of one audit, and regroup.

    Parameters
    ----------
    decisions : ReviewDecisions
    digests : sequence of str or None
        Each row's byte digest (16 hex digits; None: unreadable).
    edges : pandas.DataFrame
        The verified pairs (columns :data:`leakaudit._evidence.EDGE_COLUMNS`) whose
        connected components are ``labels``.
    labels : numpy.ndarray of int64
        The groups before the decisions.

    Returns
    -------
    AppliedDecisions
        Stale decisions are also named in one :class:`StaleDecisionWarning`.
    """
    n = len(digests)
    rows_of: dict[str, list[int]] = {}
    for row, digest in enumerate(digests):
        if isinstance(digest, str):
            rows_of.setdefault(digest, []).append(row)
    stale: list[Decision] = []
    copies: list[tuple[int, int, Decision]] = []
    apart: list[tuple[int, int]] = []
    apart_decisions: list[tuple[Decision, list[int], list[int]]] = []
    for decision in decisions.decisions:
        rows_a, rows_b = rows_of.get(decision.digest_a), rows_of.get(decision.digest_b)
        if not rows_a or not rows_b:
            stale.append(decision)
        elif decision.decision == COPY:
            copies.append((rows_a[0], rows_b[0], decision))
        else:
            apart.extend((a, b) for a in rows_a for b in rows_b if a != b)
            apart_decisions.append((decision, rows_a, rows_b))
    if stale:
        warnings.warn(
            f"{len(stale)} decision(s) of {decisions.source or 'the decisions'} name an image "
            "that is not among the audited images (changed or removed since the review); not "
            f"applied: {first_few((d.describe() for d in stale), len(stale))}.",
            StaleDecisionWarning,
            stacklevel=3,
        )
    before = np.asarray(labels, dtype=np.int64)
    confirmed = sum(1 for a, b, _ in copies if before[a] == before[b])
    confirmed += sum(
        1 for _, rows_a, rows_b in apart_decisions if before[rows_a[0]] != before[rows_b[0]]
    )
    columns = [*EDGE_COLUMNS, COPY_KIND] if COPY_KIND in edges.columns else list(EDGE_COLUMNS)
    decided = pd.DataFrame(
        {
            "row_a": np.array([min(a, b) for a, b, _ in copies], dtype=np.int64),
            "row_b": np.array([max(a, b) for a, b, _ in copies], dtype=np.int64),
            "stage": DECISION,
            "distance": pd.array([pd.NA] * len(copies), dtype="Int64"),
            "similarity": np.full(len(copies), np.nan),
            "inliers": pd.array([pd.NA] * len(copies), dtype="Int64"),
            "strength": np.ones(len(copies)),
        }
    )
    if COPY_KIND in columns:
        decided[COPY_KIND] = DECIDED_KIND
    combined = edges[columns].reset_index(drop=True)
    # Decisions first: a reviewer's "copy" outranks any verified pair.
    pairs = np.concatenate(
        [
            decided[["row_a", "row_b"]].to_numpy(dtype=np.int64),
            combined[["row_a", "row_b"]].to_numpy(dtype=np.int64),
        ]
    )
    strength = combined["strength"].to_numpy(dtype=float)
    order = np.lexsort((pairs[len(decided) :, 1], pairs[len(decided) :, 0], -strength))
    ordered = np.concatenate([np.arange(len(decided)), len(decided) + order])
    keep = np.ones(len(pairs), dtype=bool)
    if apart:
        keep[ordered] = linking_pairs_kept_apart(
            pairs[ordered], np.array(apart, dtype=np.int64).reshape(-1, 2)
        )
    refused = [copies[i][2] for i in np.flatnonzero(~keep[: len(decided)]).tolist()]
    kept_decided = decided[keep[: len(decided)]]
    kept_edges = combined[keep[len(decided) :]]
    after = connected_component_labels(n, [pairs[keep]])
    linked = sum(
        1
        for (a, b, _), kept in zip(copies, keep[: len(decided)].tolist(), strict=True)
        if kept and before[a] != before[b]
    )
    separated = sum(
        1 for _, rows_a, rows_b in apart_decisions if before[rows_a[0]] == before[rows_b[0]]
    )
    parts = [frame for frame in (kept_edges, kept_decided) if len(frame)]
    result = pd.concat(parts, ignore_index=True) if parts else combined.iloc[:0]
    result = result.sort_values(["row_a", "row_b"], kind="stable", ignore_index=True)
    return AppliedDecisions(
        labels=after,
        edges=result,
        linked=linked,
        separated=separated,
        confirmed=confirmed,
        refused=refused,
        stale=stale,
        dropped_edges=int(np.count_nonzero(~keep[len(decided) :])),
        apart=[" ".join(d.key) for d, _, _ in apart_decisions],
    )
