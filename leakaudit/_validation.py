"""Argument validation shared by the public functions (one wording everywhere)."""

from __future__ import annotations

import numbers
from collections.abc import Collection
from typing import Any

__all__ = [
    "check_bool",
    "check_choice",
    "check_int",
    "check_workers",
    "describe",
    "usable_cpu_count",
]


def describe(value: Any) -> str:
    """Return a short repr of ``value`` for error messages."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    """Return ``value`` as an int after checking it lies in ``[low, high]``.

    Raises ``TypeError`` for non-integers (bools included) and ``ValueError``
    for integers out of range, worded ``"<name> must be an int in [low, high]; got v."``.
    """
    bounds = f"in [{low}, {high}]" if high is not None else f">= {low}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int {bounds}; got {describe(value)}.")
    result = int(value)
    if result < low or (high is not None and result > high):
        raise ValueError(f"{name} must be an int {bounds}; got {result}.")
    return result


def check_bool(name: str, value: Any) -> bool:
    """Return ``value`` after checking it is a bool (``1``, ``"yes"``, ``None`` are not)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool; got {describe(value)}.")
    return value


def check_choice(name: str, value: Any, choices: Collection[str]) -> str:
    """Return ``value`` after checking it is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {options}; got {describe(value)}.")
    return value


def check_workers(value: Any) -> int:
    """Resolve ``workers`` (None = all usable cores) to a positive int."""
    if value is None:
        return usable_cpu_count()
    return check_int("workers", value, 1)


def usable_cpu_count() -> int:
    """Return the number of CPUs this process may run on."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
