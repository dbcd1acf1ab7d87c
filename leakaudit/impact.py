"""How much the leak inflates a score: accuracy on the leaked images and on the clean rest.

A test image with a copy in the training split is easy to get right, so accuracy on the whole
test split overstates how the model does on pictures it has not seen. :func:`score_impact`
takes which images leaked (from a :class:`~leakaudit.report.LeakageReport`, or the per-image
table of ``--csv`` / ``--json``) and a model's predictions, and returns accuracy on all images
of the split, on the leaked ones and on the clean rest, the differences, and the same per
class, each with a bootstrap interval (:class:`ScoreImpact`).

Pure functions over numpy and pandas: files are read in :mod:`leakaudit._impact_io`, the HTML
section is drawn in :mod:`leakaudit._impact_html`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from leakaudit._text import first_few, printable
from leakaudit._validation import check_int, describe

__all__ = [
    "DEFAULT_N_BOOT",
    "DEFAULT_SEED",
    "IMPACT_COLUMNS",
    "PARTS",
    "ScoreImpact",
    "aligned_predictions",
    "correct_column",
    "leak_status",
    "score_impact",
]

#: Bootstrap resamples behind each interval: the 2.5% and 97.5% percentiles of 2,000 draws
#: move by about 0.1 accuracy points between seeds on a 10,000-image test split.
DEFAULT_N_BOOT = 2000
#: The bootstrap's seed: the same inputs give the same intervals.
DEFAULT_SEED = 0
#: The rows of :attr:`ScoreImpact.overall`: every image of the split with a prediction, the
#: leaked ones (a copy in another split), and the clean rest.
PARTS = ("all", "leaked", "clean")
#: The columns of :meth:`ScoreImpact.to_frame` (the ``--csv`` file): one row per class (or
#: ``all`` classes) and measure; ``measure`` is ``accuracy`` of a part, or a difference.
IMPACT_COLUMNS = ["class", "measure", "images", "correct", "estimate", "low", "high"]

_TRUE = frozenset({"true", "1", "yes", "y", "t", "1.0"})
_FALSE = frozenset({"false", "0", "no", "n", "f", "0.0"})
_DIFFERENCES = ("all - clean", "leaked - clean")


def leak_status(table: pd.DataFrame, leaked_group_ids: Iterable[Any]) -> pd.DataFrame:
    """Each image's ``path`` (when known), ``split`` and ``leaked`` (its group spans splits).

    Examples
    --------
    >>> table = pd.DataFrame({"path": ["a", "b", "c"], "split": ["train", "test", "test"],
    ...                       "group_id": [0, 0, 1]})
    >>> leak_status(table, [0])["leaked"].tolist()
    [True, True, False]
    """
    for column in ("split", "group_id"):
        if column not in table.columns:
            raise ValueError(f"the image table must have a {column!r} column.")
    status: pd.DataFrame = pd.DataFrame(
        {
            "split": table["split"].to_numpy(dtype=object),
            "leaked": table["group_id"].isin(list(leaked_group_ids)).to_numpy(dtype=bool),
        }
    )
    if "path" in table.columns:
        status.insert(0, "path", table["path"].to_numpy(dtype=object))
    return status


def correct_column(predictions: pd.DataFrame) -> pd.Series:
    """Whether each prediction is right, as bools: ``correct``, or ``label == prediction``.

    ``correct`` may hold bools, 0/1, or the words true/false, yes/no; ``label`` and
    ``prediction`` are compared as numbers when both columns are numbers, else as text.

    Examples
    --------
    >>> correct_column(pd.DataFrame({"label": [1, 2], "prediction": [1, 3]})).tolist()
    [True, False]
    >>> correct_column(pd.DataFrame({"correct": ["yes", "0"]})).tolist()
    [True, False]
    """
    if "correct" in predictions.columns:
        column = predictions["correct"]
        missing = column.isna().to_numpy()
        if missing.any():
            raise ValueError(_rows_message("'correct' is missing", predictions, missing))
        if column.dtype == bool:
            return column.astype(bool).reset_index(drop=True)
        words = column.map(lambda v: str(v).strip().lower())
        known = words.isin(_TRUE | _FALSE).to_numpy()
        if not known.all():
            raise ValueError(
                _rows_message(
                    "'correct' must be true/false, yes/no or 1/0", predictions, ~known, column
                )
            )
        return words.isin(_TRUE).reset_index(drop=True)
    if "label" in predictions.columns and "prediction" in predictions.columns:
        label, prediction = predictions["label"], predictions["prediction"]
        missing = (label.isna() | prediction.isna()).to_numpy()
        if missing.any():
            raise ValueError(
                _rows_message("'label' or 'prediction' is missing", predictions, missing)
            )
        # Numbers when both columns are numbers (read from CSV as text: "3" equals "3.0").
        numbers = [pd.to_numeric(column, errors="coerce") for column in (label, prediction)]
        if all(n.notna().all() for n in numbers) and label.dtype != bool:
            same = numbers[0].to_numpy(dtype=float) == numbers[1].to_numpy(dtype=float)
        else:
            same = label.astype(str).str.strip().to_numpy() == (
                prediction.astype(str).str.strip().to_numpy()
            )
        result: pd.Series = pd.Series(same, dtype=bool)
        return result
    found = ", ".join(repr(str(c)) for c in predictions.columns) or "none"
    raise ValueError(
        "predictions must have a 'correct' column (true/false or 1/0), or 'label' and "
        f"'prediction' columns; found columns: {found}."
    )


def _rows_message(
    what: str, predictions: pd.DataFrame, mask: np.ndarray, values: pd.Series | None = None
) -> str:
    rows = np.flatnonzero(mask)
    names = [
        f"row {int(r) + 1}" + ("" if values is None else f" ({describe(values.iloc[r])})")
        for r in rows[:5]
    ]
    return f"predictions: {what} in {first_few(names, len(rows), shown=5)}."


def _parts(path: str) -> tuple[str, ...]:
    return tuple(part for part in os.path.normpath(path).split(os.sep) if part not in ("", "."))


def _path_rows(paths: list[str], wanted: list[str]) -> np.ndarray:
    """For each wanted path, the row of ``paths`` it names (-1: none; -2: several).

    Equal paths match; otherwise the longest ending of whole folder names that the two
    share, when it names exactly one image (``test/cat/1.png`` names ``data/test/cat/1.png``,
    and ``/home/me/data/test/cat/1.png`` does too). At least the file name and its folder
    must agree, unless the wanted path is a bare file name.
    """
    exact = {path: row for row, path in enumerate(paths)}
    endings: dict[tuple[str, ...], list[int]] = {}
    for row, path in enumerate(paths):
        parts = _parts(path)
        for start in range(len(parts)):
            endings.setdefault(parts[start:], []).append(row)
    rows = np.full(len(wanted), -1, dtype=np.int64)
    for position, path in enumerate(wanted):
        if path in exact:
            rows[position] = exact[path]
            continue
        parts = _parts(path)
        for start in range(len(parts)):
            ending = parts[start:]
            if len(ending) < min(2, len(parts)):
                break
            found = endings.get(ending)
            if found:
                rows[position] = found[0] if len(found) == 1 else -2
                break
    return rows


def aligned_predictions(
    images: pd.DataFrame, predictions: pd.DataFrame, *, split: str = "test"
) -> pd.DataFrame:
    """The split's images that have a prediction: ``path``, ``leaked``, ``correct``, ``class``.

    ``predictions`` is keyed by ``path`` (matched as :func:`score_impact` says), else by
    ``index`` (the image's position among the split's images in the report's order), else
    by its order (as many rows as the split has images).

    Raises
    ------
    ValueError
        The split is not in the report, a path or index names no image of it (or several),
        an image has two predictions, an unkeyed table has another length, or the columns
        that say what is right are missing.
    """
    if not isinstance(predictions, pd.DataFrame):
        raise TypeError(
            f"predictions must be a pandas DataFrame; got {type(predictions).__name__}."
        )
    for column in ("split", "leaked"):
        if column not in images.columns:
            raise ValueError(f"the image table must have a {column!r} column.")
    splits = [str(s) for s in pd.unique(images["split"].dropna())]
    if split not in splits:
        raise ValueError(
            f"split {split!r} is not in the report; its splits are: "
            f"{', '.join(repr(s) for s in splits) or 'none'}."
        )
    mine = images[(images["split"] == split).to_numpy()].reset_index(drop=True)
    correct = correct_column(predictions)
    n = len(mine)
    if "path" in predictions.columns:
        if "path" not in mine.columns:
            raise ValueError("predictions are keyed by 'path' but the report has no paths.")
        wanted = [str(p) for p in predictions["path"].tolist()]
        rows = _path_rows([str(p) for p in mine["path"].tolist()], wanted)
        _check_paths(images, split, wanted, rows)
    elif "index" in predictions.columns:
        index = pd.to_numeric(predictions["index"], errors="coerce")
        bad = (index.isna() | (index % 1 != 0) | (index < 0) | (index >= n)).to_numpy()
        if bad.any():
            raise ValueError(
                _rows_message(
                    f"'index' must be an image's position in split {split!r} (0 to {n - 1})",
                    predictions,
                    bad,
                    predictions["index"],
                )
            )
        rows = index.to_numpy(dtype=np.int64)
    else:
        if len(predictions) != n:
            raise ValueError(
                f"predictions have {len(predictions)} rows and no 'path' or 'index' column, "
                f"so they are read in order, but split {split!r} has {n} images: add a 'path' "
                "or 'index' column."
            )
        rows = np.arange(n, dtype=np.int64)
    _check_duplicates(mine, rows)
    aligned: pd.DataFrame = pd.DataFrame(
        {
            "path": mine["path"].to_numpy(dtype=object)[rows] if "path" in mine else rows,
            "leaked": mine["leaked"].to_numpy(dtype=bool)[rows],
            "correct": correct.to_numpy(dtype=bool),
        }
    )
    aligned["class"] = _classes(predictions, aligned, has_paths="path" in mine.columns)
    return aligned


def _check_paths(images: pd.DataFrame, split: str, wanted: list[str], rows: np.ndarray) -> None:
    if (rows >= 0).all():
        return
    ambiguous = [wanted[i] for i in np.flatnonzero(rows == -2)]
    if ambiguous:
        raise ValueError(
            f"predictions: {len(ambiguous)} path(s) name more than one image of split "
            f"{split!r}; give longer paths: "
            f"{first_few(map(printable, ambiguous), len(ambiguous), 5)}."
        )
    unknown = [wanted[i] for i in np.flatnonzero(rows == -1)]
    elsewhere = ""
    if "path" in images.columns:
        others = images[(images["split"] != split).to_numpy()]
        found = _path_rows([str(p) for p in others["path"].tolist()], unknown)
        in_other = sorted({str(others["split"].iloc[r]) for r in found if r >= 0})
        if in_other:
            elsewhere = f" (some are in split(s) {', '.join(in_other)}: see --split)"
    raise ValueError(
        f"predictions: {len(unknown)} path(s) are not images of split {split!r} in the "
        f"report{elsewhere}: {first_few(map(printable, unknown), len(unknown), 5)}."
    )


def _check_duplicates(mine: pd.DataFrame, rows: np.ndarray) -> None:
    counts = np.bincount(rows, minlength=len(mine))
    twice = np.flatnonzero(counts > 1)
    if twice.size:
        names = (
            [printable(str(mine["path"].iloc[r])) for r in twice]
            if "path" in mine
            else [f"index {int(r)}" for r in twice]
        )
        raise ValueError(
            f"predictions: {twice.size} image(s) have more than one prediction: "
            f"{first_few(names, twice.size, 5)}."
        )


def _classes(predictions: pd.DataFrame, aligned: pd.DataFrame, *, has_paths: bool) -> pd.Series:
    """Each image's class: ``label``, else its folder when the images sit in several."""
    if "label" in predictions.columns:
        labels: pd.Series = pd.Series(
            predictions["label"].astype(str).str.strip().to_numpy(), dtype=object
        )
        return labels
    if has_paths:
        folders = pd.Series(
            [os.path.basename(os.path.dirname(str(p))) for p in aligned["path"]], dtype=object
        )
        if folders.nunique() > 1:
            return folders
    return pd.Series([None] * len(aligned), dtype=object)


def _interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    if draws.size == 0 or np.isnan(draws).all():
        return math.nan, math.nan
    tail = (1 - confidence) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return float(low), float(high)


def _bootstrap(
    correct: np.ndarray, leaked: np.ndarray, rng: np.random.Generator, n_boot: int
) -> dict[str, np.ndarray]:
    """Accuracy of each part and the differences in ``n_boot`` resamples of the images.

    The resample keeps the numbers of leaked and clean images (a bootstrap stratified by leak
    status), so neither part is ever empty by chance. Resampling m images of a 0/1 column
    with replacement gives a count of right answers that is binomial (m, share right): the
    draws are binomial, the same distribution as index resampling at no cost per image.
    """
    draws = {}
    counts = {}
    for part, mask in (("leaked", leaked), ("clean", ~leaked)):
        m = int(mask.sum())
        share = float(correct[mask].mean()) if m else 0.0
        counts[part] = m
        draws[part] = rng.binomial(m, share, size=n_boot).astype(float)
    total = counts["leaked"] + counts["clean"]
    with np.errstate(invalid="ignore", divide="ignore"):
        result = {
            "all": (draws["leaked"] + draws["clean"]) / total if total else np.full(n_boot, np.nan),
            "leaked": draws["leaked"] / counts["leaked"]
            if counts["leaked"]
            else np.full(n_boot, np.nan),
            "clean": draws["clean"] / counts["clean"]
            if counts["clean"]
            else np.full(n_boot, np.nan),
        }
    result["all - clean"] = result["all"] - result["clean"]
    result["leaked - clean"] = result["leaked"] - result["clean"]
    return result


def _estimates(correct: np.ndarray, leaked: np.ndarray) -> dict[str, tuple[int, int, float]]:
    """``part -> (images, right, accuracy)``; accuracy NaN for an empty part."""
    found = {}
    for part, mask in (("all", np.ones_like(leaked)), ("leaked", leaked), ("clean", ~leaked)):
        m, right = int(mask.sum()), int(correct[mask].sum())
        found[part] = (m, right, right / m if m else math.nan)
    return found


def _measures(
    correct: np.ndarray,
    leaked: np.ndarray,
    rng: np.random.Generator,
    n_boot: int,
    confidence: float,
) -> list[dict[str, Any]]:
    """The rows of one class (or all): the three accuracies, then the two differences."""
    estimates = _estimates(correct, leaked)
    draws = _bootstrap(correct, leaked, rng, n_boot)
    rows: list[dict[str, Any]] = []
    for part in PARTS:
        m, right, accuracy = estimates[part]
        low, high = _interval(draws[part], confidence)
        rows.append(
            {"measure": part, "images": m, "correct": right, "estimate": accuracy,
             "low": low, "high": high}
        )  # fmt: skip
    for name in _DIFFERENCES:
        first, second = (part.strip() for part in name.split("-"))
        value = estimates[first][2] - estimates[second][2]
        low, high = _interval(draws[name], confidence)
        rows.append(
            {"measure": name, "images": estimates[first][0], "correct": None,
             "estimate": value, "low": low, "high": high}
        )  # fmt: skip
    return rows


@dataclass(frozen=True)
class ScoreImpact:
    """Accuracy of one split on all its images, on the leaked ones and on the clean rest.

    Attributes
    ----------
    split : str
        The split scored (``"test"`` by default).
    overall : pandas.DataFrame
        Index ``all``, ``leaked``, ``clean``; columns ``images``, ``correct``, ``accuracy``
        (a share, 0-1; NaN for a part with no image), ``low`` and ``high`` (the bootstrap
        interval).
    differences : pandas.DataFrame
        Index ``all - clean`` (how much the leak inflates the score over the whole split)
        and ``leaked - clean``; columns ``estimate``, ``low``, ``high`` (shares: 0.015 is
        1.5 accuracy points).
    by_class : pandas.DataFrame or None
        One row per class (``label``, else the images' folder): ``class``, ``images``,
        ``leaked`` (counts), ``all``, ``all_low``, ``all_high``, ``leaked_accuracy``,
        ``clean``, ``clean_low``, ``clean_high``, ``inflation`` (all - clean),
        ``inflation_low``, ``inflation_high``; None when no class is known. The intervals of
        every class are in :meth:`to_frame`.
    n_without_prediction : int
        Images of the split the predictions do not cover (left out of every figure).
    n_boot, seed, confidence : int, int, float
        The bootstrap: resamples, seed and interval level.
    images : pandas.DataFrame
        The scored images: ``path``, ``leaked``, ``correct``, ``class``.
    """

    split: str
    overall: pd.DataFrame
    differences: pd.DataFrame
    by_class: pd.DataFrame | None
    n_without_prediction: int
    n_boot: int
    seed: int
    confidence: float
    images: pd.DataFrame = field(repr=False)
    _rows: pd.DataFrame = field(repr=False)

    @property
    def inflation(self) -> float:
        """Accuracy on all images minus accuracy on the clean ones (a share: 0.015 = 1.5 points)."""
        return float(self.differences["estimate"].to_numpy(dtype=float)[0])

    def to_frame(self) -> pd.DataFrame:
        """Every figure as one long table (:data:`IMPACT_COLUMNS`): what ``--csv`` writes.

        ``class`` is ``all`` for the whole split; ``measure`` is ``all``, ``leaked``,
        ``clean`` (accuracies) or ``all - clean``, ``leaked - clean`` (differences, with
        ``correct`` empty).
        """
        frame: pd.DataFrame = self._rows.copy()
        return frame

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the split, the bootstrap, ``overall``, ``differences``, ``by_class``.

        Shares and intervals are numbers (missing ones ``None``), as in :attr:`overall`.
        """

        def number(value: Any) -> Any:
            if value is None or (isinstance(value, float) and math.isnan(value)):
                return None
            return int(value) if isinstance(value, (int, np.integer)) else float(value)

        def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
            return [
                {str(k): (v if isinstance(v, str) else number(v)) for k, v in row.items()}
                for row in frame.to_dict(orient="records")
            ]

        return {
            "format": "leakaudit-impact",
            "format_version": 1,
            "split": self.split,
            "n_boot": self.n_boot,
            "seed": self.seed,
            "confidence": self.confidence,
            "n_without_prediction": self.n_without_prediction,
            "overall": records(self.overall.reset_index(names="part")),
            "differences": records(self.differences.reset_index(names="difference")),
            "by_class": None if self.by_class is None else records(self.by_class),
        }

    def headline(self) -> str:
        """One sentence: the score on all images, on the clean ones, and the difference."""
        all_, clean = self.overall.loc["all"], self.overall.loc["clean"]
        leaked = int(self.overall["images"].to_numpy()[1])
        if not leaked:
            return (
                f"No image of {printable(self.split)} with a prediction leaks: accuracy "
                f"{_pct(all_['accuracy'])} on all {int(all_['images'])} is the clean score."
            )
        low, high = self.differences.loc["all - clean", ["low", "high"]]
        return (
            f"Accuracy on {printable(self.split)}: {_pct(all_['accuracy'])} on all "
            f"{int(all_['images'])} images, {_pct(clean['accuracy'])} on the "
            f"{int(clean['images'])} clean ones (no copy in another split): the {leaked} "
            f"leaked image(s) add {_points(self.inflation)} "
            f"({_level(self.confidence)} interval {_points(low)} to {_points(high)})."
        )

    def to_text(self, *, max_classes: int = 20) -> str:
        """The table ``leakaudit impact`` prints."""
        level = _level(self.confidence)
        lines = [self.headline(), ""]
        lines.append(f"{'images':<16}{'count':>7}{'correct':>9}{'accuracy':>10}  {level} interval")
        for part, row in self.overall.iterrows():
            label = {"all": "all", "leaked": "leaked", "clean": "clean (the rest)"}[str(part)]
            lines.append(
                f"{label:<16}{int(row['images']):>7}{int(row['correct']):>9}"
                f"{_pct(row['accuracy']):>10}  {_span(row['low'], row['high'])}"
            )
        for name, row in self.differences.iterrows():
            lines.append(
                f"{name!s:<32}{_points(row['estimate']):>10}  "
                f"{_span(row['low'], row['high'], points=True)}"
            )
        if self.by_class is not None:
            lines.extend(["", "Per class (accuracy on all / leaked / clean images; all - clean):"])
            width = max(5, *(len(printable(str(c))) for c in self.by_class["class"]))
            lines.append(
                f"{'class':<{width}}{'images':>8}{'leaked':>8}{'all':>9}{'leaked':>9}"
                f"{'clean':>9}{'all - clean':>13}  {level} interval"
            )
            for row in self.by_class.head(max_classes).itertuples(index=False):
                lines.append(
                    f"{printable(str(row[0])):<{width}}{row.images:>8}{row.leaked:>8}"
                    f"{_pct(row.all):>9}{_pct(row.leaked_accuracy):>9}{_pct(row.clean):>9}"
                    f"{_points(row.inflation):>13}  "
                    f"{_span(row.inflation_low, row.inflation_high, points=True)}"
                )
            if len(self.by_class) > max_classes:
                lines.append(f"... and {len(self.by_class) - max_classes} more class(es) (--csv)")
        notes = [
            f"Intervals: percentile bootstrap, {self.n_boot} resamples of the images (leaked "
            f"and clean resampled apart), seed {self.seed}."
        ]
        if self.n_without_prediction:
            notes.append(
                f"{self.n_without_prediction} image(s) of {printable(self.split)} have no "
                "prediction and are left out."
            )
        lines.append("")
        lines.extend(notes)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


def _level(confidence: float) -> str:
    return f"{100 * confidence:g}%"


def _pct(value: Any) -> str:
    return "-" if value is None or math.isnan(float(value)) else f"{100 * float(value):.2f}%"


def _points(value: Any) -> str:
    if value is None or math.isnan(float(value)):
        return "-"
    return f"{100 * float(value):+.2f} pts"


def _span(low: Any, high: Any, *, points: bool = False) -> str:
    if math.isnan(float(low)):
        return "-"
    if points:
        return f"[{100 * float(low):+.2f}, {100 * float(high):+.2f}]"
    return f"[{100 * float(low):.2f}%, {100 * float(high):.2f}%]"


def score_impact(
    images: pd.DataFrame,
    predictions: pd.DataFrame,
    *,
    split: str = "test",
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> ScoreImpact:
    """Accuracy of ``split`` on all its images, the leaked ones and the clean rest.

    Parameters
    ----------
    images : pandas.DataFrame
        One row per audited image: ``split``, ``leaked`` (bool) and, to match predictions
        by path, ``path`` (:func:`leak_status` of a report, or the ``--csv`` images table).
    predictions : pandas.DataFrame
        One row per image of ``split``: a ``correct`` column (bool, 0/1, true/false), or
        ``label`` and ``prediction`` columns; keyed by ``path`` (equal, or sharing the
        file name and enough folders to name one image of the split: ``test/cat/1.png``
        and ``/home/me/data/test/cat/1.png`` match ``data/test/cat/1.png``; a bare file name
        matches when one image of the split has it), else ``index`` (position among the split's
        images in the report's order: sorted paths for folders, the dataset's index for the
        torchvision adapter), else read in order. Per-class figures use
        ``label``, else each image's folder (an ``ImageFolder``'s class) when the images
        sit in more than one folder.
    split : str, default "test"
        The split the predictions are for.
    n_boot : int, default 2000
        Bootstrap resamples (:data:`DEFAULT_N_BOOT`).
    seed : int, default 0
        The bootstrap's seed: the same inputs and seed give the same intervals.
    confidence : float, default 0.95
        The intervals' level.

    Returns
    -------
    ScoreImpact

    Examples
    --------
    >>> images = pd.DataFrame({"path": ["a", "b", "c", "d"], "split": "test",
    ...                        "leaked": [True, False, False, False]})
    >>> predictions = pd.DataFrame({"path": ["a", "b", "c", "d"],
    ...                             "correct": [True, True, False, False]})
    >>> impact = score_impact(images, predictions)
    >>> impact.overall["accuracy"].round(3).to_dict()
    {'all': 0.5, 'leaked': 1.0, 'clean': 0.333}
    >>> round(impact.inflation, 3)
    0.167
    """
    if not isinstance(images, pd.DataFrame):
        raise TypeError(f"images must be a pandas DataFrame; got {type(images).__name__}.")
    n_boot = check_int("n_boot", n_boot, 1)
    seed = check_int("seed", seed, 0)
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, (int, float))
        or not (0 < confidence < 1)
    ):
        raise ValueError(f"confidence must be a number in (0, 1); got {describe(confidence)}.")
    aligned = aligned_predictions(images, predictions, split=split)
    n_split = int((images["split"] == split).sum())
    rng = np.random.default_rng(seed)
    correct = aligned["correct"].to_numpy(dtype=bool)
    leaked = aligned["leaked"].to_numpy(dtype=bool)
    rows = [{"class": "all", **row} for row in _measures(correct, leaked, rng, n_boot, confidence)]
    classes = aligned["class"]
    by_class = None
    if classes.notna().all() and len(classes):
        per_class = []
        for name in sorted(classes.unique(), key=str):
            mask = (classes == name).to_numpy()
            measures = _measures(correct[mask], leaked[mask], rng, n_boot, float(confidence))
            rows.extend({"class": str(name), **row} for row in measures)
            per_class.append(_class_row(str(name), measures))
        by_class = pd.DataFrame(per_class)
    frame = pd.DataFrame(rows, columns=IMPACT_COLUMNS)
    mine = frame[frame["class"] == "all"].set_index("measure")
    overall = mine.loc[list(PARTS), ["images", "correct", "estimate", "low", "high"]].rename(
        columns={"estimate": "accuracy"}
    )
    overall = overall.astype({"images": int, "correct": int})
    overall.index.name = None
    differences = mine.loc[list(_DIFFERENCES), ["estimate", "low", "high"]].astype(float)
    differences.index.name = None
    return ScoreImpact(
        split=split,
        overall=overall,
        differences=differences,
        by_class=by_class,
        n_without_prediction=n_split - len(aligned),
        n_boot=n_boot,
        seed=seed,
        confidence=float(confidence),
        images=aligned,
        _rows=frame,
    )


def _class_row(name: str, measures: list[dict[str, Any]]) -> dict[str, Any]:
    by = {row["measure"]: row for row in measures}
    return {
        "class": name,
        "images": by["all"]["images"],
        "leaked": by["leaked"]["images"],
        "all": by["all"]["estimate"],
        "all_low": by["all"]["low"],
        "all_high": by["all"]["high"],
        "leaked_accuracy": by["leaked"]["estimate"],
        "clean": by["clean"]["estimate"],
        "clean_low": by["clean"]["low"],
        "clean_high": by["clean"]["high"],
        "inflation": by["all - clean"]["estimate"],
        "inflation_low": by["all - clean"]["low"],
        "inflation_high": by["all - clean"]["high"],
    }
