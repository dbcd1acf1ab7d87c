"""Shared policy: hash methods and thresholds, split names, which split wins.

One place for the rules every entry point applies (the one-call audit, the
CLI, ``clean_splits``, calibration, the HTML report, the adapters and the
guard): the methods and their default thresholds, per-source threshold rules,
what the usual split names are (``val``, ``valid``, ``validation`` and ``dev``
are one split), and the default priority. Nothing here does any work on images.
"""

from __future__ import annotations

import fnmatch
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

from leakaudit._validation import check_choice, check_int, describe

__all__ = [
    "AUDIT_METHODS",
    "DEFAULT_METHOD",
    "DEFAULT_PRIORITY",
    "DEFAULT_THRESHOLDS",
    "SPLIT_ALIASES",
    "PriorityWarning",
    "ThresholdRuleWarning",
    "ThresholdSpec",
    "canonical_split",
    "match_priority",
    "resolve_threshold",
    "row_thresholds",
    "split_sort_key",
    "warn_unmatched_priority",
]

#: Hash methods the one-call audit accepts. "phash+dhash" links a pair only
#: when both hashes are within the threshold.
AUDIT_METHODS: tuple[str, ...] = ("phash+dhash", "phash", "dhash")
#: Chosen on real photos (benchmarks/RESULTS.md, "Detection quality"): both
#: hashes within 8 bits kept 100% recall on re-encodes, resizes and format
#: changes and made no false pair among 4.5M unrelated photo pairs, where
#: pHash <= 6 made 2.9 per million and dHash <= 5 made 300 per million.
#: pHash distances are always even (32 of its 64 bits are set), so its
#: thresholds are even.
DEFAULT_METHOD = "phash+dhash"
DEFAULT_THRESHOLDS: dict[str, int] = {"phash": 6, "dhash": 5, "phash+dhash": 8}

#: Folder and split names recognised as the three usual splits (case-insensitive).
SPLIT_ALIASES: dict[str, str] = {
    "train": "train", "training": "train",
    "val": "val", "valid": "val", "validation": "val", "dev": "val",
    "test": "test", "testing": "test", "eval": "test",
}  # fmt: skip

#: Split precedence, highest first: a leaked group goes whole to the highest split it touches.
DEFAULT_PRIORITY: tuple[str, ...] = ("train", "val", "test")

_RANK = {"train": 0, "val": 1, "test": 2}


class PriorityWarning(UserWarning):
    """A priority names a split that is not in the data."""


def canonical_split(name: str) -> str:
    """Return the usual name of a split (``"Validation"`` -> ``"val"``), else ``name`` lowered.

    Examples
    --------
    >>> canonical_split("Validation"), canonical_split("dev"), canonical_split("holdout")
    ('val', 'val', 'holdout')
    """
    lowered = name.lower()
    return SPLIT_ALIASES.get(lowered, lowered)


def split_sort_key(name: str) -> tuple[int, str]:
    """Order splits train, val, test (any alias), then the others by name."""
    return (_RANK.get(SPLIT_ALIASES.get(name.lower(), ""), 3), name.lower())


def match_priority(priority: Sequence[str], splits: Iterable[str]) -> tuple[list[str], list[str]]:
    """Map priority names to the splits present, highest first; also return the unmatched.

    A priority name matches a split of the same name (case-insensitive), or
    else every split that is an alias of it: ``val`` matches ``validation``,
    ``valid`` and ``dev``.

    Examples
    --------
    >>> match_priority(("train", "val", "test"), ["test", "validation", "train"])
    (['train', 'validation', 'test'], [])
    >>> match_priority(("train", "holdout"), ["train", "test"])
    (['train'], ['holdout'])
    """
    present = list(splits)
    resolved: list[str] = []
    unmatched: list[str] = []
    for name in priority:
        exact = [s for s in present if s.lower() == name.lower()]
        alias = [s for s in present if canonical_split(s) == canonical_split(name)]
        matches = exact or alias
        if not matches:
            unmatched.append(name)
        resolved.extend(s for s in matches if s not in resolved)
    return resolved, unmatched


def warn_unmatched_priority(unmatched: Sequence[str], splits: Iterable[str]) -> None:
    """Emit one :class:`PriorityWarning` naming priority entries that match no split."""
    if unmatched:
        warnings.warn(
            f"priority names {', '.join(repr(u) for u in unmatched)}, which match no split "
            f"(splits: {', '.join(sorted(str(s) for s in splits)) or 'none'}); they are ignored.",
            PriorityWarning,
            stacklevel=3,
        )


# ---------------------------------------------------------------- thresholds


ThresholdSpec: TypeAlias = "int | Mapping[str, int] | None"
"""What ``threshold=`` accepts: an int, a mapping of split names / path patterns to ints, None."""


class ThresholdRuleWarning(UserWarning):
    """A per-source threshold rule matched no image (a misspelt split or pattern?)."""


def resolve_threshold(method: str, threshold: ThresholdSpec) -> int:
    """Return the threshold to use for ``method`` (its default when None).

    For a per-source mapping (see :func:`row_thresholds`), the largest
    threshold it can give any image, after validating it.
    """
    check_choice("method", method, AUDIT_METHODS)
    if threshold is None:
        return DEFAULT_THRESHOLDS[method]
    if isinstance(threshold, Mapping):
        rules = _threshold_rules(threshold)
        # Images no rule matches take the "*" rule, else the method's default.
        return max([rules.get("*", DEFAULT_THRESHOLDS[method]), *rules.values()])
    return check_int("threshold", threshold, 0, 64)


def _threshold_rules(threshold: Mapping[Any, Any]) -> dict[str, int]:
    if not threshold:
        raise ValueError("threshold must not be an empty mapping; give an int or some rules.")
    rules: dict[str, int] = {}
    for key, value in threshold.items():
        if not isinstance(key, str) or not key:
            raise TypeError(
                "threshold mapping keys must be split names or path patterns (non-empty str); "
                f"got {describe(key)}."
            )
        rules[key] = check_int(f"threshold[{key!r}]", value, 0, 64)
    return rules


def _matches(pattern: str, path: str) -> bool:
    return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path, "*/" + pattern)


def row_thresholds(
    threshold: Mapping[str, int],
    method: str,
    paths: Sequence[str],
    splits: Sequence[str | None],
) -> NDArray[np.int64]:
    """Each image's threshold under per-source rules (screenshots vs photos, ...).

    Parameters
    ----------
    threshold : mapping of str to int
        Rules, each key a split name or a glob pattern on the image's path
        (``fnmatch``, ``/`` as separator; a pattern also matches any path that
        ends with it after a ``/``, so ``"screenshots/*"`` matches
        ``"data/train/screenshots/a.png"``). An image takes the threshold of its
        split's rule if there is one, else of the first pattern (in mapping
        order) its path matches, else the method's default; the key ``"*"``
        sets that default.
    method : str
        The hash method, for the default threshold.
    paths, splits : sequence
        Each image's path (as text) and split.

    Returns
    -------
    numpy.ndarray of int64
        One threshold per image. A pair of images links when its distance is
        within the *smaller* of their two thresholds.

    Warns
    -----
    ThresholdRuleWarning
        For every rule that applies to no image.

    Examples
    --------
    >>> paths = ["a/x.png", "a/screens/y.png", "b/z.png"]
    >>> row_thresholds({"test": 4, "screens/*": 2}, "phash+dhash", paths,
    ...                ["train", "train", "test"]).tolist()
    [8, 2, 4]
    """
    rules = _threshold_rules(threshold)
    check_choice("method", method, AUDIT_METHODS)
    if len(paths) != len(splits):
        raise ValueError(
            f"paths and splits must have the same length; got {len(paths)} and {len(splits)}."
        )
    split_names = {str(s) for s in splits if s is not None}
    by_split = {k: v for k, v in rules.items() if k in split_names}
    patterns = [(k, v) for k, v in rules.items() if k not in split_names and k != "*"]
    default = rules.get("*", DEFAULT_THRESHOLDS[method])
    limits = np.full(len(paths), default, dtype=np.int64)
    used: set[str] = set(by_split) | ({"*"} if "*" in rules else set())
    for row, (path, split) in enumerate(zip(paths, splits, strict=True)):
        if split is not None and str(split) in by_split:
            limits[row] = by_split[str(split)]
            continue
        text = str(path).replace(os.sep, "/")
        for pattern, value in patterns:
            if _matches(pattern, text):
                limits[row] = value
                used.add(pattern)
                break
    unused = [k for k in rules if k not in used]
    if unused:
        warnings.warn(
            "threshold rules that match no split name and no image path: "
            + ", ".join(repr(k) for k in unused)
            + f" (splits: {', '.join(sorted(split_names)) or 'none'}).",
            ThresholdRuleWarning,
            stacklevel=3,
        )
    return limits
