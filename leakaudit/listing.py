"""Finding the images of a dataset: split folders, image files, repeated listings.

The file-finding half of the loading stage: what :mod:`leakaudit.loading`
decodes, this module finds. Links are handled by one rule at every depth, the
view torchvision's ``ImageFolder`` has of the data: every link to a folder or to
an image is followed, wherever it leads, except a folder link that leads back
into a folder holding it (a loop), which is named in a warning.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from leakaudit._split_names import split_folder_hints
from leakaudit._text import first_few, printable
from leakaudit.policy import SPLIT_ALIASES, split_sort_key
from leakaudit.safe_io import Protected

__all__ = [
    "IMAGE_EXTENSIONS",
    "EmptySplitWarning",
    "FolderScanWarning",
    "RepeatedPathWarning",
    "dataset_boundary",
    "drop_repeated_paths",
    "find_split_folders",
    "folder_link_loop",
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
    links are followed as torchvision's ``ImageFolder`` follows them
    (``os.walk(followlinks=True)``), at every depth and wherever they lead: a
    link to a folder is listed like the folder, a link to an image like the
    image. The one exception is a loop: a folder link that leads back to a
    folder holding it (by real path) is not followed, and is named in a
    :class:`FolderScanWarning`, as are sub-folders that cannot be listed.
    ``within`` is accepted for older callers and no longer narrows anything.

    Raises
    ------
    FileNotFoundError, NotADirectoryError
        If ``folder`` does not exist or is not a folder.
    """
    root = Path(folder)
    return [Path(path) for path in list_image_paths(root, recursive=recursive, within=within)]


def _contains(folder: str, path: str) -> bool:
    """``path`` is ``folder`` or lies below it (both real paths)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def folder_link_loop(target: str, chain: Sequence[str]) -> bool:
    """Whether a folder link resolving to ``target`` leads back into the folders it is in.

    The one loop rule of every walk that follows links (the listing here,
    ``clean``'s :func:`~leakaudit.cleantree.walk_tree`): ``chain`` holds the
    real paths of the folders descended to reach the link, ``target`` the
    link's real path; following a link whose target holds one of them would
    list that folder again, without end.

    Examples
    --------
    >>> folder_link_loop("/d", ["/d/test", "/d/test/a"])
    True
    >>> folder_link_loop("/d/train/a", ["/d/test"])
    False
    """
    return any(_contains(target, folder) for folder in chain)


class _Walk:
    """One listing of a folder with the link policy of :func:`list_image_files`."""

    def __init__(self, root: str, *, recursive: bool, targets: bool = False) -> None:
        self.root = root
        self.images: list[str] = []
        self.problems: list[str] = []
        self.loops: list[str] = []
        #: Links that lead nowhere and name no image: what they stood for is unknown.
        self.dangling: list[str] = []
        #: (link, the real path it leads to) for every followed link, when ``targets``.
        self.targets: list[tuple[str, str]] = []
        self._targets = targets
        self._walk(recursive)

    def _entries(self, directory: str) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except OSError as err:  # as os.walk: the folder is reported and skipped
            self.problems.append(f"{printable(str(err.filename))}: {err.strerror}")
            return []
        entries.sort(key=lambda entry: entry.name)
        return entries

    def _walk(self, recursive: bool) -> None:
        # Depth first, each folder's entries in name order: that is the order of Path
        # comparison (part by part) without a sort key per file. A stack, not recursion:
        # no depth limit. ``chain`` holds the real path of each folder on the stack.
        chain = [os.path.realpath(self.root)]
        stack = [iter(self._entries(self.root))]
        while stack:
            for entry in stack[-1]:
                name = entry.name
                if name.startswith("."):
                    continue
                try:
                    folder = entry.is_dir()
                except OSError:  # as os.walk: counted as a file
                    folder = False
                if folder:
                    if not recursive:
                        continue
                    if entry.is_symlink():
                        real = os.path.realpath(entry.path)
                        if folder_link_loop(real, chain):
                            self.loops.append(f"{printable(entry.path)} -> {printable(real)}")
                            continue
                        if self._targets:
                            self.targets.append((entry.path, real))
                    else:
                        real = os.path.join(chain[-1], name)
                    chain.append(real)
                    stack.append(iter(self._entries(entry.path)))
                    break
                dot = name.rfind(".")  # os.path.splitext for a name not starting with "."
                if dot > 0 and name[dot:].lower() in IMAGE_EXTENSIONS:
                    # A dangling or looping link stays in: its read is a recorded failure.
                    if self._targets and entry.is_symlink():
                        self.targets.append((entry.path, os.path.realpath(entry.path)))
                    self.images.append(entry.path)
                elif entry.is_symlink() and not os.path.exists(entry.path):
                    # Perhaps a class folder whose target is gone: never a silent skip.
                    self.dangling.append(
                        f"{printable(entry.path)} -> {printable(os.readlink(entry.path))}"
                    )
            else:
                stack.pop()
                chain.pop()

    def warn(self) -> None:
        """One :class:`FolderScanWarning` each for unlistable folders, loops, dangling links."""
        if self.problems:
            warnings.warn(
                f"{len(self.problems)} folder(s) under {printable(self.root)} could not be "
                "listed: " + first_few(self.problems, len(self.problems)),
                FolderScanWarning,
                stacklevel=4,
            )
        if self.loops:
            warnings.warn(
                f"{len(self.loops)} folder link(s) under {printable(self.root)} lead back into "
                "a folder that holds them (a loop) and were not followed: "
                + first_few(self.loops, len(self.loops)),
                FolderScanWarning,
                stacklevel=4,
            )
        if self.dangling:
            warnings.warn(
                f"{len(self.dangling)} link(s) under {printable(self.root)} lead nowhere (their "
                "target is missing) and were skipped: "
                + first_few(self.dangling, len(self.dangling)),
                FolderScanWarning,
                stacklevel=4,
            )


def _check_folder(root: str) -> None:
    if not os.path.exists(root):
        raise FileNotFoundError(f"folder not found: {root}")
    if not os.path.isdir(root):
        raise NotADirectoryError(f"not a folder: {root}")


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
    _check_folder(root)
    walk = _Walk(root, recursive=recursive)
    walk.warn()
    return walk.images


def dataset_boundary(
    folders: Iterable[str | os.PathLike[str]],
    *,
    root: str | os.PathLike[str] | None = None,
    recursive: bool = True,
) -> list[Protected]:
    """Every place an audit of ``folders`` reads, resolved: what no output may touch.

    ROOT (when given), each listed folder (a split folder that is a link is
    resolved to its target) and every folder or image that a link under them
    leads to, followed as :func:`list_image_paths` follows links (at every
    depth, inside followed folders too). Each is a
    :class:`~leakaudit.safe_io.Protected` (a real path and how to name it) for
    :func:`~leakaudit.safe_io.check_output_path`: the output, the hash cache,
    ``--show`` and ``clean``'s NEW_ROOT may not be, contain or lie inside one.
    Nothing is warned here (the audit's own listing does).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> top = pathlib.Path(tempfile.mkdtemp())
    >>> (top / "d" / "train").mkdir(parents=True); (top / "ext_test").mkdir()
    >>> (top / "d" / "test").symlink_to("../ext_test")
    >>> [item.real == str((top / "ext_test").resolve()) for item in
    ...  dataset_boundary([top / "d" / "train", top / "d" / "test"], root=top / "d")]
    [False, False, True]
    """
    protected: list[Protected] = []
    if root is not None:
        protected.append(Protected(os.path.realpath(root), f"ROOT {printable(os.fspath(root))}"))
    for folder in folders:
        name = os.fspath(folder)
        real = os.path.realpath(name)
        shown = printable(name)
        what = f"the folder {shown}" if not os.path.islink(name) else f"{shown} (a link)"
        protected.append(Protected(real, what))
        if not os.path.isdir(name):
            continue
        for link, target in _Walk(name, recursive=recursive, targets=True).targets:
            if any(_contains(item.real, target) for item in protected):
                continue  # inside a place already protected
            protected.append(Protected(target, f"where the link {printable(link)} leads"))
    return protected


def _path_text(source: Any) -> str | None:
    if isinstance(source, os.PathLike):
        path = os.fspath(source)
        return path if isinstance(path, str) else None
    return None


def drop_repeated_paths(
    sources: list[Any], labels: list[str], *, tops: Sequence[str | None] | None = None
) -> tuple[list[Any], list[str]]:
    """Keep the first listing of each file; warn (:class:`RepeatedPathWarning`) about the rest.

    ``tops``, when given, names for each source the folder it was listed from
    (None for a path given as such): that folder is resolved, what the listing
    found below it is not, so a file reached through a link the listing followed
    (a class folder linked from train into test) is a second file, a real leak,
    and only the same folder listed twice (``d`` and ``./d``, a split folder
    and a link to it) repeats. Without ``tops``, each path's folder is resolved.

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
        top = tops[i] if tops is not None else None
        if top is not None and path.startswith(top):
            folder, name = top, path[len(top) :].lstrip(separator)
        else:
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
    recognised case-insensitively; the split keeps the folder's own name. An
    entry ``NAME=FOLDER`` of ``extra`` makes the folder ``root/FOLDER`` the split
    ``NAME`` (``train=trian`` for a misspelt ``trian/``).
    Splits come in the order train, val, test, then the others by name.

    Raises
    ------
    FileNotFoundError, NotADirectoryError
        ``root`` is missing or not a folder.
    ValueError
        No split folder was found (the message names folders that look like
        misspelt split names), or a name in ``extra`` names no folder.
    """
    top = Path(root)
    if not top.exists():
        raise FileNotFoundError(f"folder not found: {top}")
    if not top.is_dir():
        raise NotADirectoryError(f"not a folder: {top}")
    named = dict(_named_split(top, entry) for entry in extra if "=" in entry)
    wanted = {name.lower() for name in extra if "=" not in name}
    found = [
        child
        for child in top.iterdir()
        if child.is_dir() and (child.name.lower() in SPLIT_ALIASES or child.name.lower() in wanted)
    ]
    if not found and not named:
        hints = split_folder_hints(top).replace("ROOT", printable(str(top)), 1)
        raise ValueError(
            f"no split folders under {top}: expected sub-folders named like "
            "train/, val/ (valid/, validation/, dev/) or test/; name others as extra splits "
            "(CLI: --split NAME, or --split NAME=FOLDER to give FOLDER the split name NAME)."
            + (f" {hints}" if hints else "")
        )
    missing = sorted(wanted - {child.name.lower() for child in found})
    if missing:
        raise ValueError(f"--split names no folder under {top}: {', '.join(missing)}")
    splits = {child.name: child for child in found}
    for name, folder in named.items():
        # The folder is that split now, not also a split of its own name.
        splits = {k: v for k, v in splits.items() if v != folder}
        clash = next((split for split in splits if split.lower() == name.lower()), None)
        if clash is not None:
            raise ValueError(
                f"--split {name}={folder.relative_to(top).as_posix()}: "
                f"{printable(str(splits[clash].relative_to(top)))}/ under {top} is already "
                f"the split {printable(clash)!r}; choose another NAME"
            )
        splits[name] = folder
    return {name: splits[name] for name in sorted(splits, key=split_sort_key)}


def _named_split(top: Path, entry: str) -> tuple[str, Path]:
    """``NAME=FOLDER`` of ``--split``: the split NAME and the folder ``top/FOLDER``."""
    name, _, relative = entry.partition("=")
    name, relative = name.strip(), relative.strip()
    parts = Path(relative).parts
    if not name or not relative or Path(relative).is_absolute() or ".." in parts:
        raise ValueError(
            f"--split must be NAME or NAME=FOLDER with FOLDER a folder under ROOT; got {entry!r}"
        )
    folder = top / relative
    if not folder.is_dir():
        raise ValueError(f"--split {entry}: no folder {relative} under {top}")
    return name, folder
