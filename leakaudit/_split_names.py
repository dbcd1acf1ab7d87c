"""Split folders a user most likely meant: misspellings, and the audits that compare too little.

A dataset whose ``train/`` is spelt ``trian/`` audits one split and finds no
leak: nothing can leak across a single split. This module names what was found
under ROOT, the folders that look like a split name (``trian/`` ~ ``train``,
by :func:`difflib.get_close_matches` against the recognised split names) and
the ``--split NAME=FOLDER`` that names them, for the CLI's warnings and errors
and for the leakage guard.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path

from leakaudit._text import printable
from leakaudit.policy import SPLIT_ALIASES

__all__ = [
    "SPLIT_NAME_SPELLINGS",
    "likely_split_folders",
    "split_folder_hints",
    "too_few_splits",
]

#: The split names a folder is compared with, as users spell them.
SPLIT_NAME_SPELLINGS: tuple[str, ...] = (
    "train", "training", "val", "valid", "validation", "dev", "test", "testing", "eval",
)  # fmt: skip

#: How close a folder name must be to a split name to be named as its likely misspelling
#: (difflib's ratio: "trian" ~ "train" 0.8, "tset" ~ "test" 0.75, "images" ~ any < 0.6).
_CUTOFF = 0.7


def likely_split_folders(
    root: str | os.PathLike[str], splits: Mapping[str, Path] | None = None
) -> list[tuple[str, str]]:
    """(folder, split name) for each sub-folder of ``root`` whose name looks like a split's.

    Only folders that are not splits already (``splits``, by real path) and
    whose name is not itself a split name are considered; the split name is
    the usual one (``vaild`` -> ``val``). Hidden folders are skipped.

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> for name in ("trian", "test", "images"):
    ...     (root / name).mkdir()
    >>> likely_split_folders(root, {"test": root / "test"})
    [('trian', 'train')]
    """
    taken = {os.path.realpath(path) for path in (splits or {}).values()}
    found: list[tuple[str, str]] = []
    for child in _sub_folders(root):
        lowered = child.name.lower()
        if lowered in SPLIT_ALIASES or os.path.realpath(child) in taken:
            continue
        close = difflib.get_close_matches(lowered, SPLIT_NAME_SPELLINGS, n=1, cutoff=_CUTOFF)
        if close:
            found.append((child.name, SPLIT_ALIASES[close[0]]))
    return found


def _sub_folders(root: str | os.PathLike[str]) -> list[Path]:
    try:
        children = sorted(Path(root).iterdir())
    except OSError:
        return []
    return [child for child in children if not child.name.startswith(".") and child.is_dir()]


def split_folder_hints(
    root: str | os.PathLike[str], splits: Mapping[str, Path] | None = None
) -> str:
    """One sentence naming ROOT's other folders and the ``--split NAME=FOLDER`` for each
    likely misspelt split folder; empty when ROOT has no other folder.

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> for name in ("trian", "test"):
    ...     (root / name).mkdir()
    >>> print(split_folder_hints(root, {"test": root / "test"}))  # doctest: +NORMALIZE_WHITESPACE
    Other folders under ROOT: trian/. trian/ looks like a misspelt 'train': name it with
    --split train=trian.
    """
    taken = {os.path.realpath(path) for path in (splits or {}).values()}
    others = [c.name for c in _sub_folders(root) if os.path.realpath(c) not in taken]
    if not others:
        return ""
    text = "Other folders under ROOT: " + ", ".join(f"{printable(name)}/" for name in others) + "."
    used = {name.lower() for name in (splits or {})}
    likely = likely_split_folders(root, splits)
    for folder, name in likely:
        # A split of that name exists already: the folder joins under its own name.
        option = f"--split {name}={folder}" if name not in used else f"--split {folder}"
        text += (
            f" {printable(folder)}/ looks like a misspelt '{name}': name it with "
            f"{printable(option)}."
        )
    if not likely:
        text += " Name one as a split with --split NAME=FOLDER (e.g. --split train=" + (
            f"{printable(others[0])})."
        )
    return text


def too_few_splits(
    images_by_split: Mapping[str, int],
    *,
    root: str | os.PathLike[str] | None = None,
    splits: Mapping[str, Path] | None = None,
) -> str | None:
    """Why a leak check would compare nothing (fewer than two splits with images), or None.

    Names each split with its image count (and its folder, when ``splits``
    gives it) and, with ``root``, the other folders under it and the likely
    misspelt split folders.

    Examples
    --------
    >>> too_few_splits({"train": 3, "test": 2}) is None
    True
    >>> print(too_few_splits({"train": 0, "test": 5}))  # doctest: +NORMALIZE_WHITESPACE
    fewer than two splits have images, so nothing can leak across splits: train (0 images),
    test (5 images).
    """
    with_images = [name for name, count in images_by_split.items() if int(count) > 0]
    if len(with_images) >= 2:
        return None
    found = ", ".join(
        f"{printable(str(name))} ({int(count)} image{'s' if int(count) != 1 else ''}"
        + (f", folder {printable(str(splits[name]))}" if splits and name in splits else "")
        + ")"
        for name, count in images_by_split.items()
    )
    text = (
        "fewer than two splits have images, so nothing can leak across splits: "
        + (found or "no split")
        + "."
    )
    if root is not None:
        hints = split_folder_hints(root, splits)
        if hints:
            text += " " + hints.replace("ROOT", printable(os.fspath(root)), 1)
    return text
