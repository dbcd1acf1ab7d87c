"""Exceptions raised by leakaudit.

The hierarchy, rooted in :class:`LeakauditError`; each member also subclasses
the built-in exception a caller would naturally catch::

    LeakauditError(Exception)
    +-- ImageLoadError(LeakauditError, OSError)      one image could not be decoded
    +-- LeakageError(LeakauditError, AssertionError) a guard found more leakage than allowed

Bad arguments raise plain ``ValueError`` / ``TypeError`` with one wording:
``"<name> must be <expectation>; got <value>."``
"""

from __future__ import annotations

from typing import Any

__all__ = ["ImageLoadError", "LeakageError", "LeakauditError"]


class LeakauditError(Exception):
    """Base class of every error leakaudit raises on purpose."""


class ImageLoadError(LeakauditError, OSError):
    """An image could not be opened or decoded.

    Parameters
    ----------
    path : str
        The file (or a description of the in-memory source) that failed.
    reason : str
        A short, human-readable reason, e.g. ``"truncated JPEG"``.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class LeakageError(LeakauditError, AssertionError):
    """A leakage guard found more cross-split duplicates than allowed.

    The full :class:`~leakaudit.report.LeakageReport` is attached as ``report``.
    """

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report
