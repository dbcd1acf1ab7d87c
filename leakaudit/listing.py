"""Finding the images of a dataset: split folders, image files, repeated listings.

The file-finding half of the loading stage: what :mod:`leakaudit.loading`
decodes, this module finds. Links are handled by one rule everywhere: a link to
an image is followed only when it resolves inside the dataset, and folder links
are never followed (a loop cannot hang the scan).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from leakaudit._text import first_few, printable
from leakaudit.policy import SPLIT_ALIASES, split_sort_key

__all__ = [
    "IMAGE_EXTENSIONS",
    "EmptySplitWarning",
    "FolderScanWarning",
    "RepeatedPathWarning",
    "drop_repeated_paths",
    "find_split_folders",
    "list_image_files",
    "list_image_paths",
    "warn_empty_splits",
]

IMAGE_EXTENSIONS: frozenset[str] = frozenset(
    {
        ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".gif", ".bmp", ".dib", ".webp",
        ".tif", ".tiff", ".ppm", ".pgm", ".pbm", ".pnm", ".ico", ".tga",
        ".avif", ".avifs", ".heic", ".heif",
    }
)  # fmt: skip
#: AVIF decodes with Pillow >= 11.2 (or the pillow-avif-plugin); HEIC/HEIF with the
#: pillow-heif plugin. Without a decoder such a file is listed and recorded as
#: unreadable ("not a recognised image format"), never silently left out.


class FolderScanWarning(UserWarning):
    """Something under a scanned folder could not be listed, or a link was not followed."""


class RepeatedPathWarning(UserWarning):
    """The same file was listed more than once (in one split or several); it counts once."""


class EmptySplitWarning(UserWarning):
    """A split has no image to audit; it stays in the report with 0 images."""


def warn_empty_splits(splits: Mapping[str, Any], labels: Sequence[str]) -> list[str]:
    """Name each split of ``splits`` that no row of ``labels`` belongs to; return them all.

    One :class:`EmptySplitWarning` names each such split and its folder (or
    says it was an empty list): a split that leaks nothing because it holds
    nothing must not pass an audit unnoticed.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_empty_splits({"train": "d/train", "test": "d/test"}, ["train"])
    ['train', 'test']
    >>> print(caught[0].message)  # doctest: +NORMALIZE_WHITESPACE
    split 'test' has no images to audit (folder d/test): it is kept in the report with 0 images,
    and nothing can leak into it.
    """
    present = set(labels)
    names = [str(name) for name in splits]
    for name, spec in splits.items():
        if str(name) in present:
            continue
        where = (
            f"folder {printable(os.fsdecode(spec))}"
            if isinstance(spec, (str, os.PathLike))
            else "an empty list of paths"
        )
        warnings.warn(
            f"split '{printable(str(name))}' has no images to audit ({where}): it is kept in the "
            "report with 0 images, and nothing can leak into it.",
            EmptySplitWarning,
            stacklevel=3,
        )
    return names


def list_image_files(
    folder: str | os.PathLike[str],
    *,
    recursive: bool = True,
    within: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
) -> list[Path]:
    """Return the image files under ``folder``, sorted.

    Files are recognised by extension (case-insensitive, see
    :data:`IMAGE_EXTENSIONS`); hidden files and folders are skipped. Symbolic
    links to folders are not followed (a link loop cannot hang the scan).
    Symbolic links to files are followed only when they resolve inside
    ``within`` (a folder or several; default ``folder`` itself): a link that
    leaves the dataset is not read. Sub-folders that cannot be listed, and
    links that were not followed, are named in one :class:`FolderScanWarning`.

    Raises
    ------
    FileNotFoundError, NotADirectoryError
        If ``folder`` does not exist or is not a folder.
    """
    root = Path(folder)
    return [Path(path) for path in list_image_paths(root, recursive=recursive, within=within)]


def _boundaries(
    folder: str, within: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None
) -> list[str]:
    if within is None:
        folders: Sequence[str | os.PathLike[str]] = [folder]
    elif isinstance(within, (str, os.PathLike)):
        folders = [within]
    else:
        folders = within
    return [os.path.realpath(os.fspath(path)) for path in folders]


def _inside(path: str, boundaries: list[str]) -> bool:
    return any(path == top or path.startswith(top.rstrip(os.sep) + os.sep) for top in boundaries)


def list_image_paths(
    folder: str | os.PathLike[str],
    *,
    recursive: bool = True,
    within: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
) -> list[str]:
    """Return the image files under ``folder`` as strings, in :func:`list_image_files` order.

    The fast path the audits use: no ``Path`` object per file (which costs more than the
    listing itself on folders of tens of thousands of images).
    """
    root = os.fspath(folder)
    if not os.path.exists(root):
        raise FileNotFoundError(f"folder not found: {root}")
    if not os.path.isdir(root):
        raise NotADirectoryError(f"not a folder: {root}")
    boundaries = _boundaries(root, within)
    problems: list[str] = []
    outside: list[str] = []
    found: list[str] = []

    def entries_by_name(directory: str) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except OSError as err:  # as os.walk: the folder is reported and skipped
            problems.append(f"{err.filename}: {err.strerror}")
            return []
        entries.sort(key=lambda entry: entry.name)
        return entries

    def is_folder(entry: os.DirEntry[str]) -> bool:
        try:
            return entry.is_dir()
        except OSError:  # as os.walk: counted as a file
            return False

    # Depth first, each folder's entries in name order: that is the order of Path
    # comparison (part by part) without a sort key per file. A stack, not recursion:
    # no depth limit. Links to folders are not followed (a loop cannot hang the scan).
    stack = [iter(entries_by_name(root))]
    while stack:
        for entry in stack[-1]:
            name = entry.name
            if name.startswith("."):
                continue
            if is_folder(entry):
                if recursive and not entry.is_symlink():
                    stack.append(iter(entries_by_name(entry.path)))
                    break
                continue
            dot = name.rfind(".")  # os.path.splitext for a name not starting with "."
            if dot > 0 and name[dot:].lower() in IMAGE_EXTENSIONS:
                # A dangling or looping link stays in (its read is a recorded failure);
                # one that resolves outside the dataset is never read.
                if entry.is_symlink() and not _inside(os.path.realpath(entry.path), boundaries):
                    outside.append(entry.path)
                    continue
                found.append(entry.path)
        else:
            stack.pop()
    if problems:
        warnings.warn(
            f"{len(problems)} folder(s) under {root} could not be listed: "
            + first_few(problems, len(problems)),
            FolderScanWarning,
            stacklevel=3,
        )
    if outside:
        warnings.warn(
            f"{len(outside)} symbolic link(s) under {root} point outside the dataset "
            f"({', '.join(printable(top) for top in boundaries)}) and were not followed: "
            + first_few(
                (f"{printable(path)} -> {printable(os.path.realpath(path))}" for path in outside),
                len(outside),
            ),
            FolderScanWarning,
            stacklevel=3,
        )
    return found


def _path_text(source: Any) -> str | None:
    if isinstance(source, os.PathLike):
        path = os.fspath(source)
        return path if isinstance(path, str) else None
    return None


def drop_repeated_paths(sources: list[Any], labels: list[str]) -> tuple[list[Any], list[str]]:
    """Keep the first listing of each file; warn (:class:`RepeatedPathWarning`) about the rest.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     drop_repeated_paths(["d/a.jpg", "./d/a.jpg", "d/b.jpg"], ["train", "test", "test"])
    (['d/a.jpg', 'd/b.jpg'], ['train', 'test'])
    """
    # A file's identity: its folder resolved, its own name kept. Folders are resolved
    # (d, ./d and a link to d are one folder), file links are not: a link in train to a
    # test image is a real leak. Each folder is resolved once (a system call per part).
    folders: dict[str, str] = {}
    seen: dict[str, str] = {}
    keep: list[int] = []
    repeats: list[str] = []
    separator = os.sep
    for i, source in enumerate(sources):
        path = source if type(source) is str else _path_text(source)
        if path is None:
            keep.append(i)
            continue
        folder, sep, name = path.rpartition(separator)
        folder = folder or (separator if sep else os.curdir)  # "/x.jpg" or "x.jpg"
        real = folders.get(folder)
        if real is None:
            real = folders[folder] = os.path.realpath(folder)
        key = real + separator + name
        first = seen.get(key)
        if first is None:
            seen[key] = labels[i]
            keep.append(i)
        else:
            repeats.append(f"{printable(path)} ({first}, {labels[i]})")
    if not repeats:
        return sources, labels
    warnings.warn(
        f"{len(repeats)} file(s) were listed more than once; each is counted once, in the "
        "first split that lists it (a file is not a leak of itself): "
        + first_few(repeats, len(repeats)),
        RepeatedPathWarning,
        stacklevel=3,
    )
    return [sources[i] for i in keep], [labels[i] for i in keep]


def find_split_folders(root: str | os.PathLike[str], extra: Sequence[str] = ()) -> dict[str, Path]:
    """Return split name -> folder for the split folders directly under ``root``.

    The one finder behind ``leakaudit scan ROOT``, ``leakaudit clean ROOT`` and
    ``assert_no_leakage(ROOT)``. Folder names in
    :data:`~leakaudit.policy.SPLIT_ALIASES` (``train``, ``val``, ``valid``,
    ``validation``, ``dev``, ``test``, ...), and those in ``extra``, are
    recognised case-insensitively; the split keeps the folder's own name.
    Splits come in the order train, val, test, then the others by name.

    Raises
    ------
    FileNotFoundError, NotADirectoryError
        ``root`` is missing or not a folder.
    ValueError
        No split folder was found, or a name in ``extra`` names no folder.
    """
    top = Path(root)
    if not top.exists():
        raise FileNotFoundError(f"folder not found: {top}")
    if not top.is_dir():
        raise NotADirectoryError(f"not a folder: {top}")
    wanted = {name.lower() for name in extra}
    found = [
        child
        for child in top.iterdir()
        if child.is_dir() and (child.name.lower() in SPLIT_ALIASES or child.name.lower() in wanted)
    ]
    if not found:
        raise ValueError(
            f"no split folders under {top}: expected sub-folders named like "
            "train/, val/ (valid/, validation/, dev/) or test/; name others as extra splits "
            "(CLI: --split NAME)."
        )
    missing = sorted(wanted - {child.name.lower() for child in found})
    if missing:
        raise ValueError(f"--split names no folder under {top}: {', '.join(missing)}")
    return {child.name: child for child in sorted(found, key=lambda c: split_sort_key(c.name))}
