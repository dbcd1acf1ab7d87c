"""Writing a leak-free copy of a dataset folder without touching the original.

``leakaudit clean ROOT --out NEW_ROOT`` in three steps, each a function here:

1. :func:`walk_tree` lists everything under ROOT without following a single
   symbolic link: regular files, links (with where they point), other kinds
   (pipes, devices, sockets) and folders that cannot be listed.
2. :func:`plan_tree` turns that listing and ``clean_splits``' table into one
   :class:`PlannedEntry` per entry: where it goes in NEW_ROOT, or why not.
3. :func:`write_tree` builds NEW_ROOT in a temporary folder beside it, writes
   the manifest last, and renames the folder into place. Either the old state
   or the complete new tree exists, never a half of it.

The guarantees (README, "What clean guarantees"):

- ROOT is never written to: files are hard-linked (a new name for the same
  inode; nothing is ever opened for writing through it) or copied from a
  descriptor opened with ``O_NOFOLLOW`` after checking it is a regular file.
  Devices, pipes and sockets are never read.
- Links are followed as the audit's listing (and torchvision's ``ImageFolder``)
  follows them, inside the split folders only: a split folder, or a folder
  link at any depth below one, that the audit scanned is written to NEW_ROOT
  as a real folder (manifest ``followed``), and an image link leaving ROOT
  that the audit read is written as a regular file; a folder link that loops
  back stays a link. Any other link that resolves inside ROOT is recreated as
  a relative link to where its target now is (or, if the target is left out,
  replaced by a copy of it); one that leaves ROOT, dangles, loops or would
  point at itself is left out and recorded.
- Files are reached through directory descriptors, ``O_NOFOLLOW`` at every
  level but the followed folder links, so a folder swapped for a link during
  the run redirects nothing.
- Every entry under ROOT gets a manifest row, including those left out, with
  the reason, and every folder of ROOT is in NEW_ROOT (an empty one too), so
  class folders, and the class indices read from them, stay as they were.
- Only staging folders this module created (a marker inside) are ever
  removed, never ROOT, a folder the audit reads through a link, or a folder
  holding one.
- NEW_ROOT is replaced only as a whole: an empty folder, or (``replace=True``)
  an earlier leakaudit output with its manifest at the top. A NEW_ROOT that
  is, holds or lies inside ROOT or a folder the audit reads through a link,
  or holds a link into one, is refused.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import pandas as pd

from leakaudit._export_encoding import defused_cell
from leakaudit._text import first_few, printable
from leakaudit.listing import folder_link_loop
from leakaudit.safe_io import Protected, atomic_open, is_within, probe_writable, protected_conflict

__all__ = [
    "MANIFEST_COLUMNS",
    "MANIFEST_NAME",
    "UNREADABLE_CHOICES",
    "CleanTreeError",
    "PlannedEntry",
    "TreeEntry",
    "TreeWriteSummary",
    "check_tree_target",
    "manifest_inside",
    "plan_tree",
    "remove_stale_partials",
    "unique_name",
    "walk_tree",
    "write_manifest",
    "write_tree",
]

#: File name of the manifest at the top of NEW_ROOT.
MANIFEST_NAME = "leakaudit-manifest.csv"
#: The manifest's columns, in order.
MANIFEST_COLUMNS = [
    "old_path", "new_path", "old_split", "new_split", "action", "group_id", "reason",
]  # fmt: skip

_NAME_MAX = 255  # bytes; the limit of every common Linux, macOS and Windows file system
_COPY_CHUNK = 1 << 20
_PARTIAL = ".leakaudit-partial-"
_OLD = ".leakaudit-old-"
#: Written inside each staging folder at its creation: only folders holding it are
#: ever removed as a killed run's leftovers.
_MARKER = "leakaudit-staging-folder"
_MARKER_TEXT = b"leakaudit: a staging folder of clean; safe to delete once its process has ended\n"
_FOLDER_KINDS = ("folder", "followed", "unlistable")
#: ``--unreadable``: what the copy does with images the audit could not decode. ``drop``
#: (the default) leaves them out, so a DataLoader over NEW_ROOT never meets one; ``copy``
#: writes them as they are; ``fail`` refuses before anything is written.
UNREADABLE_CHOICES = ("drop", "copy", "fail")


class CleanTreeError(OSError):
    """NEW_ROOT could not be written; nothing was left at NEW_ROOT (the message says)."""


@dataclass(frozen=True)
class TreeEntry:
    """One entry under ROOT, as :func:`walk_tree` found it (no link followed).

    Attributes
    ----------
    relative : str
        Path relative to ROOT, ``/``-separated; folders end in ``/``.
    kind : {"file", "folder", "link", "followed", "other", "unlistable"}
        A regular file, a folder, a symbolic link, a split folder's symbolic
        link that is followed (see :func:`walk_tree`), another kind of file
        (pipe, device, socket), or a folder that could not be listed.
    detail : str
        For ``link`` and ``followed``: what it points to, as stored. For ``other``: the kind
        (``"named pipe"``...). For ``unlistable``: the reason.
    """

    relative: str
    kind: str
    detail: str = ""


@dataclass(frozen=True)
class PlannedEntry:
    """What happens to one entry under ROOT: a manifest row, plus how to write it.

    ``new_path`` is empty for entries left out (``action`` ``dropped``,
    ``unreadable`` or ``skipped``). Folders have ``action`` ``folder`` (``followed`` for a split
    folder's symbolic link, written as a real folder); their paths end in
    ``/``. ``link_to`` is set when the entry is written as a symbolic link
    (relative, pointing at its target's place in NEW_ROOT); otherwise the file
    at ``source`` is hard-linked or copied (``follow_link``: ``source`` is a
    link to an image outside ROOT, which the audit followed; the image it leads
    to is written, as a regular file).
    """

    old_path: str
    new_path: str
    old_split: str
    new_split: str
    action: str
    group_id: Any = None
    reason: str = ""
    source: str | None = None
    link_to: str | None = None
    follow_link: bool = False

    def row(self) -> dict[str, Any]:
        """The manifest row."""
        return {name: getattr(self, name) for name in MANIFEST_COLUMNS}


@dataclass
class TreeWriteSummary:
    """What :func:`write_tree` did."""

    entries: list[PlannedEntry]
    manifest: Path
    linked: int = 0
    copied: int = 0
    symlinks: int = 0
    removed_partials: list[Path] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Entries per action."""
        counts: dict[str, int] = {}
        for entry in self.entries:
            counts[entry.action] = counts.get(entry.action, 0) + 1
        return counts


# ------------------------------------------------------------------ walking


_OTHER_KINDS = (
    (stat.S_ISFIFO, "named pipe"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
)


def _other_kind(mode: int) -> str:
    for test, name in _OTHER_KINDS:
        if test(mode):
            return name
    return "not a regular file"


def walk_tree(root: str | os.PathLike[str], *, follow: Iterable[str] = ()) -> list[TreeEntry]:
    """List every entry under ``root``; inside the split folders, follow links as the audit does.

    Folders are descended in name order (depth first), each one listed as a
    ``folder`` entry (``train/cat/``) before what it holds; a folder that
    cannot be listed is one ``unlistable`` entry with the reason. ``follow``
    names the split folders directly under ``root``. Inside them links to
    folders are followed as the audit's listing follows them
    (:func:`~leakaudit.listing.list_image_paths`, torchvision's ``ImageFolder``
    view): a split folder that is a link, and a folder link at any depth below
    one, is one ``followed`` entry, and what its folder holds is listed under
    its name; a folder link that leads back into a folder holding it
    (:func:`~leakaudit.listing.folder_link_loop`) stays a ``link``. Every other
    link (outside the split folders, to a file, dangling) is reported as a link.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "train").mkdir(); _ = (root / "train" / "a.txt").write_text("x")
    >>> (root / "link").symlink_to("train/a.txt")
    >>> [(e.relative, e.kind) for e in walk_tree(root)]
    [('link', 'link'), ('train/', 'folder'), ('train/a.txt', 'file')]
    """
    entries: list[TreeEntry] = []
    top = os.fspath(root)
    splits = set(follow)

    def listing(directory: str, relative: str, kind: str = "folder") -> list[os.DirEntry[str]]:
        try:
            with os.scandir(directory) as scan:
                found = list(scan)
        except OSError as error:
            entries.append(TreeEntry(relative, "unlistable", error.strerror or str(error)))
            return []
        if kind:
            entries.append(TreeEntry(relative, kind))
        found.sort(key=lambda entry: entry.name)
        return found

    # Each level: its prefix, its entries, and (inside a split folder) the real paths of
    # the folders descended from the split folder down, for the audit's loop rule.
    stack: list[tuple[str, Any, tuple[str, ...] | None]] = [("", iter(listing(top, "", "")), None)]
    while stack:
        prefix, iterator, chain = stack[-1]
        for entry in iterator:
            relative = prefix + entry.name
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError as error:  # vanished since the listing
                entries.append(TreeEntry(relative, "other", error.strerror or str(error)))
                continue
            in_split = chain is not None or (not prefix and entry.name in splits)
            if stat.S_ISLNK(mode):
                try:
                    target = os.readlink(entry.path)
                except OSError as error:
                    target = f"? ({error.strerror})"
                if in_split and os.path.isdir(entry.path):
                    real = os.path.realpath(entry.path)
                    if chain is None or not folder_link_loop(real, chain):
                        entries.append(TreeEntry(relative, "followed", target))
                        below = iter(listing(entry.path, relative + "/", ""))
                        stack.append((relative + "/", below, (*(chain or ()), real)))
                        break
                entries.append(TreeEntry(relative, "link", target))
            elif stat.S_ISDIR(mode):
                real = chain[-1] + os.sep + entry.name if chain else os.path.realpath(entry.path)
                below = iter(listing(entry.path, relative + "/"))
                stack.append((relative + "/", below, (*(chain or ()), real) if in_split else None))
                break
            elif stat.S_ISREG(mode):
                entries.append(TreeEntry(relative, "file"))
            else:
                entries.append(TreeEntry(relative, "other", _other_kind(mode)))
        else:
            stack.pop()
    return entries


# ------------------------------------------------------------------ planning


def _fit_name(stem: str, tail: str) -> str:
    """``stem + tail`` with ``stem`` shortened until the name fits NAME_MAX bytes."""
    name = stem + tail
    while len(os.fsencode(name)) > _NAME_MAX and stem:
        stem = stem[:-1]
        name = stem + tail
    return name


def unique_name(relative: str, origin: str, taken: set[str]) -> str:
    """Return ``relative``, or a ``.from-<origin>`` variant of it not in ``taken``.

    The stem is shortened if needed so that the new name stays within the
    file system's 255-byte name limit.

    Examples
    --------
    >>> unique_name("train/a.jpg", "test", {"train/a.jpg"})
    'train/a.from-test.jpg'
    >>> unique_name("train/a.jpg", "test", {"train/a.jpg", "train/a.from-test.jpg"})
    'train/a.from-test-2.jpg'
    """
    if relative not in taken:
        return relative
    folder, _, name = relative.rpartition("/")
    dot = name.rfind(".")
    stem, suffix = (name[:dot], name[dot:]) if dot > 0 else (name, "")
    number = 1
    while True:
        tag = f".from-{origin}" + (f"-{number}" if number > 1 else "")
        candidate = _fit_name(stem, tag + suffix)
        candidate = f"{folder}/{candidate}" if folder else candidate
        if candidate not in taken:
            return candidate
        number += 1


def _split_of(relative: str, split_folders: Mapping[str, str]) -> str:
    top = relative.split("/", 1)[0]
    return split_folders.get(top, "") if "/" in relative else ""


_LEAVING = "symbolic link leaving ROOT"


def _readable_image(item: PlannedEntry) -> bool:
    """An image the audit read (kept or moved, and not an unreadable one copied as it is)."""
    return item.action in ("kept", "moved") and not item.reason


def _resolve_inside(root_real: str, root: str, relative: str) -> tuple[str | None, str]:
    """Where the link at ``relative`` finally points, relative to ROOT, or why not usable.

    A link leaving ROOT gets the reason ``"symbolic link leaving ROOT (to REAL); ..."``.
    """
    path = os.path.join(root, relative)
    try:
        real = os.path.realpath(path, strict=True)
    except FileNotFoundError:
        return None, "dangling symbolic link"
    except OSError as error:
        if error.errno == errno.ELOOP:
            return None, "symbolic link loop"
        return None, f"symbolic link cannot be resolved: {error.strerror}"
    if not is_within(Path(real), Path(root_real)):
        return None, f"{_LEAVING} (to {real}); not followed"
    inside = os.path.relpath(real, root_real).replace(os.sep, "/")
    return ("" if inside == "." else inside), ""


def plan_tree(
    root: str | os.PathLike[str],
    entries: Iterable[TreeEntry],
    cleaned: pd.DataFrame,
    split_folders: Mapping[str, str],
    *,
    reserved: Iterable[str] = (),
    unreadable: str = "drop",
) -> list[PlannedEntry]:
    """Plan NEW_ROOT: one :class:`PlannedEntry` per entry under ROOT.

    Parameters
    ----------
    root : path-like
        ROOT.
    entries : iterable of TreeEntry
        :func:`walk_tree` of ROOT.
    cleaned : pandas.DataFrame
        :func:`~leakaudit.clean_splits` output for the audited images:
        ``path`` (as listed under ROOT), ``split``, ``original_split``,
        ``reassigned``, ``dropped`` (optional) and ``group_id``.
    split_folders : mapping of str to str
        Split name -> its folder's name directly under ROOT.
    reserved : iterable of str
        NEW_ROOT-relative paths taken by something else (the manifest); an
        entry planned there gets a ``.from-<split>`` name instead.
    unreadable : {"drop", "copy", "fail"}, default "drop"
        Images the audit could not decode (``cleaned["error"]`` set): left out
        of NEW_ROOT (action ``unreadable``; ROOT keeps them), copied as they
        are (action ``kept``/``moved``, the reason says so), or a ``ValueError``
        naming them before anything is planned.

    Returns
    -------
    list of PlannedEntry
        Images first (those that stay before those that move, so a moved file
        never displaces one), then the other entries in walk order.
    """
    top = os.fspath(root)
    walked = list(entries)
    taken: set[str] = set(reserved)
    # Every folder keeps its name: no file may be planned where one is.
    taken.update(e.relative.rstrip("/") for e in walked if e.kind in _FOLDER_KINDS)
    if unreadable not in UNREADABLE_CHOICES:
        raise ValueError(
            f"unreadable must be one of {', '.join(UNREADABLE_CHOICES)}; got {unreadable!r}."
        )
    if unreadable == "fail":
        _refuse_unreadable(top, cleaned)
    images = _plan_images(top, cleaned, split_folders, taken, drop_unreadable=unreadable == "drop")
    planned = {item.old_path: item for item in images}
    split_of_folder = {folder: split for split, folder in split_folders.items()}
    for entry in walked:
        if entry.relative not in planned:
            planned[entry.relative] = _plan_other(entry, split_of_folder, taken)
    # Links last: they point at wherever their target ended up.
    kinds = {entry.relative: entry.kind for entry in walked}
    by_path = {entry.relative: entry for entry in walked}
    for old, item in list(planned.items()):
        if kinds.get(old) == "link" and item.new_path:
            planned[old] = _plan_link(item, top, planned, kinds, taken)
        elif kinds.get(old) == "link" and item.action == "unreadable":
            # A link the copy would skip anyway (to a device, out of ROOT) says so.
            linked = _plan_link(item, top, planned, kinds, taken)
            planned[old] = linked if linked.action == "skipped" else item
        elif kinds.get(old) == "other" and item.action == "unreadable":
            planned[old] = _plan_other(by_path[old], split_of_folder, taken)  # a pipe, a device
    image_paths = {item.old_path for item in images}
    return [planned[item.old_path] for item in images] + [
        planned[entry.relative]
        for entry in walked
        if entry.relative in planned and entry.relative not in image_paths
    ]


def _refuse_unreadable(top: str, cleaned: pd.DataFrame) -> None:
    """``unreadable="fail"``: a ValueError naming every unreadable image, if any."""
    if "error" not in cleaned.columns:
        return
    failed = [
        f"{printable(os.path.relpath(str(path), top))} ({printable(str(error))})"
        for path, error in zip(cleaned["path"], cleaned["error"], strict=True)
        if isinstance(error, str)
    ]
    if failed:
        raise ValueError(
            f"--unreadable fail: {len(failed)} image(s) under ROOT cannot be decoded, so no "
            f"copy was written: {first_few(failed, len(failed))}. Fix or remove them in ROOT, "
            "or pass --unreadable drop (leave them out of the copy) or copy (keep them as they are)"
        )


def _plan_images(
    top: str,
    cleaned: pd.DataFrame,
    split_folders: Mapping[str, str],
    taken: set[str],
    *,
    drop_unreadable: bool = True,
) -> list[PlannedEntry]:
    """The audited images' entries; those that stay claim their names first."""
    errors = cleaned["error"] if "error" in cleaned.columns else None
    dropped = cleaned["dropped"] if "dropped" in cleaned.columns else None
    planned: dict[str, PlannedEntry] = {}
    order = sorted(range(len(cleaned)), key=lambda i: bool(cleaned["reassigned"].iat[i]))
    for i in order:
        old = os.path.relpath(str(cleaned["path"].iat[i]), top).replace(os.sep, "/")
        if old in planned:
            continue  # listed twice: the first listing wins (audit_splits warns)
        error = errors.iat[i] if errors is not None else None
        note = (
            f"unreadable image ({error}); copied as it is (--unreadable copy)"
            if isinstance(error, str)
            else ""
        )
        old_split = str(cleaned["original_split"].iat[i])
        raw_group: Any = cleaned["group_id"].iat[i]
        group = None if pd.isna(raw_group) else int(raw_group)
        if isinstance(error, str) and drop_unreadable:
            note = (
                f"unreadable image ({error}); left out of the copy (--unreadable drop), "
                "still in ROOT"
            )
            planned[old] = PlannedEntry(old, "", old_split, "", "unreadable", group, note)
            continue
        if dropped is not None and bool(dropped.iat[i]):
            planned[old] = PlannedEntry(old, "", old_split, "", "dropped", group, note)
            continue
        new_split = str(cleaned["split"].iat[i])
        within = old.split("/", 1)[1] if "/" in old else old
        target = unique_name(f"{split_folders[new_split]}/{within}", old_split, taken)
        taken.add(target)
        action = "moved" if bool(cleaned["reassigned"].iat[i]) else "kept"
        planned[old] = PlannedEntry(
            old, target, old_split, new_split, action, group, note, source=old
        )
    return list(planned.values())


def _plan_other(
    entry: TreeEntry, split_of_folder: Mapping[str, str], taken: set[str]
) -> PlannedEntry:
    """An entry the audit did not take: copied as it is, or skipped with the reason."""
    split = split_of_folder.get(entry.relative.split("/", 1)[0], "")
    if entry.kind == "followed":
        what = "split folder" if "/" not in entry.relative else "folder"
        reason = (
            f"{what} is a symbolic link (to {entry.detail}); followed, as the audit and "
            "ImageFolder follow it: its files were scanned and are written here as a real folder"
        )
        return PlannedEntry(entry.relative, entry.relative + "/", split, split, "followed",
                            reason=reason)  # fmt: skip
    split = split if "/" in entry.relative else ""
    if entry.kind == "folder":
        return PlannedEntry(entry.relative, entry.relative, split, split, "folder")
    if entry.kind == "unlistable":
        reason = f"folder could not be listed: {entry.detail}"
        return PlannedEntry(entry.relative, "", split, "", "skipped", reason=reason)
    if entry.kind == "other":
        reason = f"{entry.detail}; only regular files are copied"
        return PlannedEntry(entry.relative, "", split, "", "skipped", reason=reason)
    target = unique_name(entry.relative, split or "root", taken)
    taken.add(target)
    return PlannedEntry(entry.relative, target, split, split, "unaudited", source=entry.relative)


def _plan_link(
    item: PlannedEntry,
    top: str,
    planned: Mapping[str, PlannedEntry],
    kinds: Mapping[str, str],
    taken: set[str],
) -> PlannedEntry:
    """A symbolic link: re-pointed at its target's new place, copied, or skipped."""

    def skipped(reason: str) -> PlannedEntry:
        taken.discard(item.new_path)
        return replace(
            item, new_path="", new_split="", action="skipped", reason=reason, source=None
        )

    inside, reason = _resolve_inside(os.path.realpath(top), top, item.old_path)
    if inside is None and reason.startswith(_LEAVING) and _readable_image(item):
        # An image the audit read through the link (as ImageFolder would): its
        # picture is part of the split, so NEW_ROOT holds it as a regular file.
        return replace(
            item,
            follow_link=True,
            reason=reason.replace("; not followed", "")
            + "; followed, as the audit and ImageFolder follow it: written as a regular file",
        )
    if inside is None:
        return skipped(reason)
    if inside == item.old_path:  # it was a link when listed, a file when resolved
        return skipped("changed while being read (resolves to itself); not written")
    destination = planned.get(inside)
    left_out = destination is None or not destination.new_path
    if destination is not None and left_out and kinds.get(inside) != "file":
        return skipped(f"points at {inside}, which is left out")
    if destination is not None and destination.action == "unreadable":
        return skipped(f"points at {inside}, an unreadable image left out (--unreadable drop)")
    if left_out and not os.path.isdir(os.path.join(top, inside)):
        # The target is left out of NEW_ROOT: keep what the link showed, as a file.
        return replace(item, source=inside, reason="link target left out; written as a copy of it")
    new_target = destination.new_path if destination is not None else inside
    if new_target == item.new_path:
        return skipped("symbolic link to itself; not written")
    link = os.path.relpath(new_target or ".", os.path.dirname(item.new_path) or ".")
    return replace(
        item,
        link_to=link.replace(os.sep, "/"),
        source=None,
        reason="symbolic link inside ROOT; points at its target's new place",
    )


# ------------------------------------------------------------------ target checks


def _is_earlier_output(folder: Path) -> bool:
    return (folder / MANIFEST_NAME).is_file() and not (folder / MANIFEST_NAME).is_symlink()


def check_tree_target(
    root: Path, out: Path, *, replace: bool, protected: Iterable[Protected] = ()
) -> None:
    """Refuse an unsafe NEW_ROOT before any work is done.

    ``protected`` adds to ROOT the places the audit reads besides it (the real
    folders behind split folder links, and where every followed link leads:
    :func:`~leakaudit.listing.dataset_boundary`); NEW_ROOT may not be, contain or
    lie inside any of them, so ``--force`` never replaces a folder the dataset
    reads from.

    Raises
    ------
    ValueError
        ``out`` is inside ROOT or contains it, is, holds or lies inside a
        protected place, is a file, holds a symbolic link that resolves into
        ROOT or a protected place, or is not empty and not an earlier leakaudit
        output (``replace=True`` replaces only those).
    OSError
        Nothing can be created beside ``out`` (where NEW_ROOT is built).
    """
    real_root = root.resolve()
    real_out = out.resolve()
    if is_within(real_out, real_root):
        raise ValueError(f"--out must be outside ROOT ({root}); got {out}")
    if is_within(real_root, real_out):
        raise ValueError(f"--out must not contain ROOT ({root}); got {out}")
    places = [Protected(str(real_root), f"ROOT {root}"), *protected]
    conflict = protected_conflict(out, places)
    if conflict is not None:
        raise ValueError(
            f"--out must be outside the dataset and every folder or file its links lead to; "
            f"{conflict}"
        )
    if out.is_symlink():
        raise ValueError(f"--out must not be a symbolic link; {out} is one")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out must be a folder; {out} is a file")
    if out.is_dir() and any(out.iterdir()):
        for entry in walk_tree(out):
            if entry.kind != "link":
                continue
            inside = protected_conflict(out / entry.relative, places, containing=False)
            if inside is not None:
                raise ValueError(
                    f"--out {out} holds a symbolic link into the dataset ({entry.relative} -> "
                    f"{entry.detail}: {inside}); refusing to replace it. Choose a new folder."
                )
        if not replace:
            raise ValueError(
                f"--out {out} exists and is not empty; choose a new folder, or pass --force "
                "to replace an earlier leakaudit output"
            )
        if not _is_earlier_output(out):
            raise ValueError(
                f"--out {out} is not empty and has no {MANIFEST_NAME}: it is not an earlier "
                "leakaudit output, so --force will not replace it. Choose a new folder."
            )
    existing = out.parent
    while not existing.exists():
        existing = existing.parent
    probe_writable(existing)


# ------------------------------------------------------------------ writing


_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
#: Sources are reached through directory descriptors where the platform allows it.
_DIR_FD = bool(_O_DIRECTORY and _O_NOFOLLOW) and {os.open, os.stat, os.link} <= os.supports_dir_fd


def _open_source(opener: Callable[[int], int], source: str) -> tuple[int, str | None]:
    """Open ``source`` for reading with ``opener(flags)``; return (descriptor, why not)."""
    try:
        descriptor = opener(os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return -1, "became a symbolic link; not followed"
        return -1, f"cannot be read: {error.strerror}"
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        os.close(descriptor)
        return -1, f"{_other_kind(info.st_mode)}; only regular files are copied"
    return descriptor, None


def _copy_from(descriptor: int, target: str) -> str | None:
    """Copy the open regular file to a new file ``target`` (closes the descriptor).

    Problems reading the source are returned; problems writing the target (disk
    full) are raised.
    """
    with os.fdopen(descriptor, "rb") as reader:
        info = os.fstat(descriptor)
        writer_fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(writer_fd, "wb") as writer:
            remaining = info.st_size  # never more than the file declared (it may grow)
            while remaining > 0:
                try:
                    chunk = reader.read(min(_COPY_CHUNK, remaining))
                except OSError as error:
                    writer.close()
                    os.unlink(target)
                    return f"cannot be read: {error.strerror}"
                if not chunk:
                    break
                writer.write(chunk)
                remaining -= len(chunk)
        os.chmod(target, stat.S_IMODE(info.st_mode))
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
    return None


_LINK_FALLBACK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES}
if hasattr(errno, "EOPNOTSUPP"):
    _LINK_FALLBACK.add(errno.EOPNOTSUPP)


class _SourceTree:
    """ROOT, opened once; its files reached through directory descriptors.

    Every folder on a file's path is opened relative to its parent's descriptor
    with ``O_NOFOLLOW``, so a folder swapped for a symbolic link after the
    listing cannot redirect a read (the open fails instead). The only folder
    links followed are those in ``followed`` (paths relative to ROOT: split
    folders and the folder links inside them that :func:`walk_tree` followed);
    a file is read through its own link only when its entry says
    ``follow_link``.
    """

    def __init__(self, root: str, followed: set[str]) -> None:
        self.root = root
        self.followed = followed
        self.fd = os.open(root, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC) if _DIR_FD else -1
        self._folder: str | None = None
        self._folder_fd = -1

    def close(self) -> None:
        self._forget()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _forget(self) -> None:
        if self._folder_fd >= 0:
            os.close(self._folder_fd)
        self._folder, self._folder_fd = None, -1

    def parent(self, relative: str) -> tuple[int, str]:
        """The descriptor of the folder holding ``relative`` (kept open), and its name."""
        folder, _, name = relative.rpartition("/")
        if folder != self._folder:
            self._forget()
            self._folder_fd, self._folder = self._open_folder(folder), folder
        return self._folder_fd, name

    def _open_folder(self, folder: str) -> int:
        current = os.dup(self.fd)
        parts = folder.split("/") if folder else []
        for i, part in enumerate(parts):
            flags = os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC
            if "/".join(parts[: i + 1]) not in self.followed:
                flags |= _O_NOFOLLOW
            try:
                opened = os.open(part, flags, dir_fd=current)
            finally:
                os.close(current)
            current = opened
        return current

    def place(
        self, source: str, target: str, link: bool, follow: bool = False
    ) -> tuple[str, str | None]:
        """Hard-link or copy the regular file ``source`` (relative to ROOT) to ``target``.

        ``follow``: ``source`` is a link to an image outside ROOT; the file it
        leads to is written (still only a regular file).
        """
        if not _DIR_FD:
            return self._place_by_path(source, target, link, follow)
        try:
            parent, name = self.parent(source)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                return "", "a folder on its path is no longer a folder; no link is followed"
            if error.errno == errno.ENOENT:
                return "", "vanished during the run"
            return "", f"cannot be read: {error.strerror}"
        if link:
            try:
                info = os.stat(name, dir_fd=parent, follow_symlinks=follow)
            except OSError as error:
                if error.errno == errno.ENOENT:
                    return "", "vanished during the run"
                return "", f"cannot be read: {error.strerror}"
            if not stat.S_ISREG(info.st_mode):
                return "", f"{_other_kind(info.st_mode)}; only regular files are copied"
            try:
                os.link(name, target, src_dir_fd=parent, follow_symlinks=follow)
            except OSError as error:
                if error.errno == errno.ENOENT:
                    return "", "vanished during the run"
                if error.errno not in _LINK_FALLBACK:
                    raise
            else:
                now = os.lstat(target)
                if stat.S_ISREG(now.st_mode) and (now.st_dev, now.st_ino) == (
                    info.st_dev,
                    info.st_ino,
                ):
                    return "linked", None
                os.unlink(target)  # swapped between the check and the link
                return "", "changed during the run (swapped for another entry); not written"
        unfollow = ~_O_NOFOLLOW if follow else -1
        descriptor, problem = _open_source(
            lambda flags: os.open(name, flags & unfollow, dir_fd=parent), ""
        )
        if problem is not None:
            return "", problem
        problem = _copy_from(descriptor, target)
        return ("copied", None) if problem is None else ("", problem)

    def _place_by_path(
        self, source: str, target: str, link: bool, follow: bool
    ) -> tuple[str, str | None]:
        """Where descriptors relative to a folder are not available (Windows)."""
        path = os.path.join(self.root, source)
        parts = source.split("/")
        for depth in range(1, len(parts)):
            if "/".join(parts[:depth]) in self.followed:
                continue
            if os.path.islink(os.path.join(self.root, *parts[:depth])):
                return "", "a folder on its path is no longer a folder; no link is followed"
        try:
            info = os.stat(path) if follow else os.lstat(path)
        except OSError as error:
            return "", f"cannot be read: {error.strerror}"
        if not stat.S_ISREG(info.st_mode):
            return "", f"{_other_kind(info.st_mode)}; only regular files are copied"
        if link:
            try:
                os.link(path, target, follow_symlinks=follow)
                return "linked", None
            except OSError as error:
                if error.errno == errno.ENOENT:
                    return "", "vanished during the run"
                if error.errno not in _LINK_FALLBACK:
                    raise
        unfollow = ~_O_NOFOLLOW if follow else -1
        descriptor, problem = _open_source(lambda flags: os.open(path, flags & unfollow), path)
        if problem is not None:
            return "", problem
        problem = _copy_from(descriptor, target)
        return ("copied", None) if problem is None else ("", problem)


def _resolves_to_itself(new_path: str, link_to: str) -> bool:
    folder = os.path.dirname(new_path)
    return os.path.normpath(os.path.join(folder, link_to)) == os.path.normpath(new_path)


def _place(
    entry: PlannedEntry, sources: _SourceTree, staging: str, link: bool
) -> tuple[str, str | None]:
    """Write one entry into the staging tree; return (how, problem with the source)."""
    target = os.path.join(staging, entry.new_path)
    if entry.action in ("folder", "followed"):
        os.makedirs(target, exist_ok=True)
        return "folder", None
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if entry.link_to is not None:
        if _resolves_to_itself(entry.new_path, entry.link_to):
            return "", "symbolic link to itself; not written"
        os.symlink(entry.link_to, target)
        return "symlink", None
    assert entry.source is not None
    return sources.place(entry.source, target, link, entry.follow_link)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _has_marker(folder: Path) -> bool:
    """``folder`` holds the marker :func:`write_tree` writes in its staging folders."""
    try:
        descriptor = os.open(folder / _MARKER, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return False
        return handle.read(len(_MARKER_TEXT) + 1) == _MARKER_TEXT


def _staging_pid(name: str, prefix: str) -> int | None:
    """The process id in a staging folder's ``name`` (``PREFIX<pid>-<random>``), or None.

    Only a name that starts with exactly ``prefix`` and continues with digits and a
    ``-`` qualifies: ``.o1.leakaudit-partial-...`` is never read as a leftover of
    ``--out 'o[12]'``.

    Examples
    --------
    >>> _staging_pid(".o.leakaudit-partial-123-abc", ".o.leakaudit-partial-")
    123
    >>> _staging_pid(".o1.leakaudit-partial-123-abc", ".o[12].leakaudit-partial-") is None
    True
    """
    if not name.startswith(prefix):
        return None
    pid_text, dash, _ = name[len(prefix) :].partition("-")
    if not dash or not pid_text.isascii() or not pid_text.isdigit() or len(pid_text) > 10:
        return None
    pid = int(pid_text)
    return pid if 0 < pid < 2**31 else None  # os.kill(0, ...) would signal our own group


def remove_stale_partials(
    out: Path,
    root: str | os.PathLike[str] | None = None,
    *,
    protected: Iterable[Protected] = (),
) -> list[Path]:
    """Remove unfinished builds of ``out`` left by runs that were killed; return them.

    Only this module's own staging folders are removed: named exactly like one
    of ``out`` (the folder beside it is listed and each name compared with the
    prefix, never matched as a pattern, so ``[``, ``*`` or ``?`` in ``out``'s
    name match only themselves), with a process id that has ended, a real
    folder (not a symbolic link) holding the marker file written at its
    creation, and neither ROOT nor a ``protected`` place (see
    :func:`check_tree_target`), inside one, nor containing one.
    """
    removed: list[Path] = []
    if not out.parent.is_dir():
        return removed
    places = list(protected)
    if root is not None:
        places.append(Protected(os.path.realpath(root), "ROOT"))
    try:
        names = sorted(os.listdir(out.parent))
    except OSError:
        return removed
    for prefix in (f".{out.name}{_PARTIAL}", f".{out.name}{_OLD}"):
        for name in names:
            pid = _staging_pid(name, prefix)
            if pid is None or _process_alive(pid):
                continue
            candidate = out.parent / name
            if candidate.is_symlink() or not candidate.is_dir() or not _has_marker(candidate):
                continue
            if protected_conflict(candidate, places) is not None:
                continue
            shutil.rmtree(candidate, ignore_errors=True)
            removed.append(candidate)
    return removed


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange)
    if result != 0:
        code = ctypes.get_errno()
        if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            return False
        raise OSError(code, os.strerror(code), os.fspath(second))
    return True


def _install(tree: Path, shell: Path, out: Path) -> None:
    """Put the finished ``tree`` at ``out`` (replacing an empty or earlier one).

    An earlier output ends up inside ``shell`` (the staging folder, with its
    marker), which the caller removes.
    """
    if not out.exists() or not any(out.iterdir()):
        os.rename(tree, out)  # rename(2) replaces an empty folder
        return
    if _exchange(tree, out):
        return  # the earlier output is now at ``tree``
    os.rename(out, shell / "old")
    os.rename(tree, out)


def manifest_inside(out: Path, manifest: str | os.PathLike[str] | None) -> str | None:
    """The manifest's path relative to ``out`` when it is written inside the tree, else None."""
    if manifest is None:
        return MANIFEST_NAME
    resolved, real_out = Path(manifest).resolve(), out.resolve()
    if is_within(resolved, real_out) and resolved != real_out:
        return resolved.relative_to(real_out).as_posix()
    return None


def _csv_field(value: Any) -> str:
    """One CSV field: quoted when it holds a comma, a quote, a CR or an LF (RFC 4180).

    Text a spreadsheet would run as a formula gets a ``'`` in front, as in the
    scan's CSVs (:func:`~leakaudit._export_encoding.defused_cell`).
    """
    text = "" if value is None else str(defused_cell(value))
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def write_manifest(handle: IO[str], entries: Iterable[PlannedEntry]) -> None:
    """Write the manifest rows as CSV to the text ``handle`` (opened with ``newline=""``).

    Written field by field, not through pandas: a name that is not valid UTF-8
    (kept as surrogates, written back as its bytes by a ``surrogateescape``
    handle) never meets an Arrow string column, and every field holding a
    carriage return or a line feed is quoted, so each row reads back as one row
    with Python's csv module and with :func:`pandas.read_csv`.

    Examples
    --------
    >>> import io
    >>> buffer = io.StringIO()
    >>> write_manifest(buffer, [PlannedEntry("a\\rb.jpg", "a\\rb.jpg", "train", "train", "kept")])
    >>> buffer.getvalue().split("\\n")[1]
    '"a\\rb.jpg","a\\rb.jpg",train,train,kept,,'
    """
    handle.write(",".join(MANIFEST_COLUMNS) + "\n")
    for entry in entries:
        row = entry.row()
        group = row["group_id"]
        row["group_id"] = "" if group is None or pd.isna(group) else int(group)
        handle.write(",".join(_csv_field(row[name]) for name in MANIFEST_COLUMNS) + "\n")


def write_tree(
    plan: list[PlannedEntry],
    root: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    link: bool = True,
    manifest: str | os.PathLike[str] | None = None,
    on_progress: Callable[[], None] | None = None,
    protected: Iterable[Protected] = (),
) -> TreeWriteSummary:
    """Write NEW_ROOT from ``plan``, all or nothing, and its manifest last.

    The tree is built in a hidden folder beside ``out``
    (``.NAME.leakaudit-partial-PID-...``, holding a marker file and the tree)
    and renamed into place once complete, with the manifest inside it (or, with
    ``manifest=FILE``, written to FILE right after, by rename). On any error,
    or an interrupt, the partial folder is removed and :class:`CleanTreeError`
    (or the interrupt) is raised; a ``kill -9`` leaves only the hidden folder,
    which the next run removes (only folders with the marker are removed, never
    ROOT). Call :func:`check_tree_target` first.

    Files are read through directory descriptors opened without following
    links (see :class:`_SourceTree`). Entries whose source turns out to be
    unreadable, no longer a regular file, or reached through a folder that
    became a link, are not written; their manifest row says ``skipped`` and why.
    """
    top = os.fspath(root)
    target = Path(out)
    summary = TreeWriteSummary(entries=[], manifest=Path())
    summary.removed_partials = remove_stale_partials(target, top, protected=protected)
    target.parent.mkdir(parents=True, exist_ok=True)
    shell = Path(
        tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}{_PARTIAL}{os.getpid()}-")
    )
    staging = shell / "tree"
    sources: _SourceTree | None = None
    try:
        marker = os.open(shell / _MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC, 0o600)
        with os.fdopen(marker, "wb") as handle:
            handle.write(_MARKER_TEXT)
        umask = os.umask(0)
        os.umask(umask)
        staging.mkdir(0o777 & ~umask)  # mkdtemp's 0700 is not what a new folder gets
        followed = {entry.old_path for entry in plan if entry.action == "followed"}
        sources = _SourceTree(top, followed)
        final: list[PlannedEntry] = []
        for entry in plan:
            if entry.new_path:
                how, problem = _place(entry, sources, os.fspath(staging), link)
                if problem is not None:
                    entry = replace(
                        entry,
                        new_path="",
                        new_split="",
                        action="skipped",
                        reason=problem,
                        source=None,
                    )
                else:
                    summary.linked += how == "linked"
                    summary.copied += how == "copied"
                    summary.symlinks += how == "symlink"
                if on_progress is not None:
                    on_progress()
            final.append(entry)
        sources.close()
        summary.entries = final
        inside = manifest_inside(target, manifest)
        if inside is not None:
            summary.manifest = target / inside
            (staging / inside).parent.mkdir(parents=True, exist_ok=True)
            with atomic_open(staging / inside, errors="surrogateescape", newline="") as fh:
                write_manifest(fh, final)
            _install(staging, shell, target)
        else:
            assert manifest is not None  # manifest_inside returns a path for None
            summary.manifest = Path(manifest)
            with atomic_open(manifest, errors="surrogateescape", newline="") as fh:
                write_manifest(fh, final)
                fh.flush()
                _install(staging, shell, target)  # the manifest appears right after the tree
    except BaseException as error:
        if sources is not None:
            sources.close()
        with contextlib.suppress(OSError):
            shutil.rmtree(shell)
        if isinstance(error, OSError) and not isinstance(error, CleanTreeError):
            where = f" ({error.filename})" if error.filename else ""
            raise CleanTreeError(
                error.errno,
                f"could not write {target}: {error.strerror or error}{where}; nothing was "
                f"written there (the partial copy was removed)",
            ) from error
        raise
    with contextlib.suppress(OSError):
        shutil.rmtree(shell)  # the marker, and an earlier output that was replaced
    return summary
