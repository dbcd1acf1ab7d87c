"""The error policy of hashing: ``on_error`` (warn, raise, ignore) and the warning it gives."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from leakaudit._text import first_few
from leakaudit.errors import ImageLoadError

if TYPE_CHECKING:
    pass

__all__ = [
    "ON_ERROR_CHOICES",
    "UnreadableImageWarning",
    "apply_on_error",
]


ON_ERROR_CHOICES = ("warn", "raise", "ignore")


class UnreadableImageWarning(UserWarning):
    """Some images could not be read; they are recorded as invalid rows, not hashed."""


def _summarise_notes(notes: dict[int, str], total: int, shown: int = 10) -> str:
    """One message for the images hashed despite decoder warnings (each note names its file)."""
    rows = sorted(notes)
    listed = first_few((notes[i] for i in rows), len(rows), shown)
    return (
        f"{len(rows)} of {total} image(s) were decoded and hashed despite decoder warnings: "
        + listed
    )


def apply_on_error(
    errors: Mapping[int, str],
    on_error: str,
    *,
    total: int,
    name_of: Callable[[int], str],
    stacklevel: int = 2,
    shown: int = 10,
) -> None:
    """The unreadable-image policy, applied the one way every entry point applies it.

    ``"raise"``: the first failure (in row order) as
    :class:`~leakaudit.errors.ImageLoadError`; ``"warn"``: one
    :class:`UnreadableImageWarning` naming them (the first ``shown``, then a
    count); ``"ignore"``: nothing. Either way every failure stays recorded.

    Parameters
    ----------
    errors : mapping of int to str
        Row -> why that image could not be read.
    on_error : {"warn", "raise", "ignore"}
    total : int
        Rows in the batch.
    name_of : callable
        Row -> how to name that image to the user.
    stacklevel : int
        Of the warning, counted from the caller of this function.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     names = ["a", "b", "c"]
    ...     apply_on_error({1: "truncated image"}, "warn", total=3, name_of=names.__getitem__)
    >>> print(caught[0].message)  # doctest: +NORMALIZE_WHITESPACE
    1 of 3 images could not be read; they stay in the per-image table without a hash (its
    'error' column, in report.table and --csv FILE, says why) and take no part in grouping:
    b (truncated image).
    """
    if not errors:
        return
    failed = sorted(errors)
    if on_error == "raise":
        raise ImageLoadError(name_of(failed[0]), errors[failed[0]])
    if on_error != "warn":
        return
    listed = first_few((f"{name_of(i)} ({errors[i]})" for i in failed), len(failed), shown)
    # "1 of 8 images", "3 of 8 images": the noun counts the total
    noun = "image" if total == 1 else "images"
    warnings.warn(
        f"{len(failed)} of {total} {noun} could not be read; they stay in the per-image table "
        "without a hash (its 'error' column, in report.table and --csv FILE, says why) and "
        f"take no part in grouping: {listed}.",
        UnreadableImageWarning,
        stacklevel=stacklevel + 1,
    )
