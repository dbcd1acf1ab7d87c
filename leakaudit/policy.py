"""Shared policy: what split names mean and which split wins a leaked group.

One place for the rules every entry point applies (the CLI, ``clean_splits``,
the adapters and the guard), so that ``val``, ``valid``, ``validation`` and
``dev`` mean the same split everywhere.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence

__all__ = [
    "DEFAULT_PRIORITY",
    "SPLIT_ALIASES",
    "PriorityWarning",
    "canonical_split",
    "match_priority",
    "split_sort_key",
    "warn_unmatched_priority",
]

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
