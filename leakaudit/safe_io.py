"""Writing files without ever touching the user's data.

Every file leakaudit writes (CSV/JSON/HTML outputs, ``--show`` images, the
``clean`` manifest) goes through :func:`atomic_open`: the bytes go to a new
temporary file in the target's folder, which is then renamed over the target.
The target is never opened in place, so an output path that is a hard link or a
symbolic link to one of the user's files replaces that *name* and leaves the
user's file as it was; and a failed write (disk full, an exception, a kill)
leaves either the old file or nothing at the target, never a truncated one.

:func:`check_output_path` is the check made before any work starts: an output
must not resolve inside a protected folder (the dataset being audited) and its
folder must be writable.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

from leakaudit._interrupts import signals_held

__all__ = [
    "OutputPathError",
    "Protected",
    "atomic_open",
    "check_output_path",
    "is_within",
    "probe_writable",
    "protected_conflict",
    "resolve_within",
]


class OutputPathError(ValueError):
    """An output location is unsafe or unusable (inside the dataset, not writable, ...)."""


class Protected(NamedTuple):
    """A place no output may be, contain or lie inside: a real path and how to name it.

    ``real`` is already resolved (every link followed); ``what`` names it in
    messages, like ``"the split folder d/test (a link to /data/ext_test)"``.
    :func:`leakaudit.listing.dataset_boundary` builds them for a dataset.
    """

    real: str
    what: str


def _protected(items: Iterable[str | os.PathLike[str] | Protected]) -> list[Protected]:
    return [
        item
        if isinstance(item, Protected)
        else Protected(os.path.realpath(item), f"the dataset ({os.fspath(item)})")
        for item in items
    ]


def protected_conflict(
    path: str | os.PathLike[str],
    protected: Iterable[str | os.PathLike[str] | Protected],
    *,
    containing: bool = True,
) -> str | None:
    """How ``path`` (resolved here) meets a protected place, in words; None when it does not.

    ``path`` meets one when it is that place, lies inside it, or (with
    ``containing``, for a folder an output fills or replaces) contains it.

    Examples
    --------
    >>> protected_conflict("/data/ext/x.csv", [Protected("/data/ext", "the split folder d/test")])
    '/data/ext/x.csv lies inside the split folder d/test (/data/ext)'
    >>> protected_conflict("/data", [Protected("/data/ext", "the split folder d/test")])
    '/data contains the split folder d/test (/data/ext)'
    >>> protected_conflict("/elsewhere", [Protected("/data/ext", "d/test")]) is None
    True
    """
    real = os.path.realpath(path)
    inside = real.rstrip(os.sep) + os.sep
    for item in _protected(protected):
        top = item.real.rstrip(os.sep) + os.sep
        if real == item.real:
            relation = "is"
        elif real.startswith(top):
            relation = "lies inside"
        elif containing and item.real.startswith(inside):
            relation = "contains"
        else:
            continue
        shown = os.fspath(path)
        return f"{shown} {relation} {item.what} ({item.real})"
    return None


def is_within(path: Path, folder: Path) -> bool:
    """Return whether ``path`` is ``folder`` or lies below it (both already resolved)."""
    return path == folder or folder in path.parents


def resolve_within(path: object, root: str | os.PathLike[str]) -> str | None:
    """``path`` with every link resolved, when that lies inside ``root``; else None.

    The gate on reading image files named by data (a hash shard's ``path``
    column): only what resolves below the folder the user named is opened, and
    it is opened by its resolved name, so a link cannot lead out of ``root``.
    Relative paths are taken from the current folder.

    Examples
    --------
    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> resolve_within(os.path.join(root, "a", "..", "b.png"), root) == os.path.join(
    ...     os.path.realpath(root), "b.png")
    True
    >>> resolve_within("/etc/passwd", root) is None
    True
    """
    if not isinstance(path, (str, os.PathLike)):
        return None
    try:
        resolved = Path(os.path.realpath(path))
        folder = Path(os.path.realpath(root))
    except (OSError, ValueError, TypeError):  # NUL bytes, a bytes path, a loop
        return None
    return str(resolved) if is_within(resolved, folder) else None


def _temporary_sibling(target: Path) -> tuple[int, str]:
    # A short prefix keeps the temporary name within NAME_MAX even for a long target name.
    return tempfile.mkstemp(dir=target.parent, prefix=".leakaudit-", suffix=".tmp")


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike[str],
    mode: str = "w",
    *,
    encoding: str | None = "utf-8",
    errors: str | None = None,
    newline: str | None = None,
) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; on success rename it over ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        The file to (re)place. Its folder must exist.
    mode : {"w", "wb"}
        Text or binary.
    encoding, errors, newline
        As for :func:`open` (text mode only).

    Notes
    -----
    The rename replaces the directory entry, so a ``path`` that is a hard link
    to, or a symlink at, somebody's file never writes into that file. On any
    exception the temporary file is removed and the target is left as it was.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
    >>> with atomic_open(target) as handle:
    ...     _ = handle.write("hello")
    >>> target.read_text()
    'hello'
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb'; got {mode!r}.")
    target = Path(path)
    temporary: str | None = None
    try:
        with signals_held():  # the file and its name together: an interrupt never leaves it
            descriptor, temporary = _temporary_sibling(target)
        if mode == "wb":
            handle: IO[Any] = os.fdopen(descriptor, "wb")
        else:
            handle = os.fdopen(descriptor, "w", encoding=encoding, errors=errors, newline=newline)
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp makes the file 0600; give it the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, target)
    except BaseException:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise


def probe_writable(folder: Path) -> None:
    """Raise :class:`OutputPathError` unless a new file can be created in ``folder``.

    A real attempt (create and remove a temporary file), because permission
    bits do not tell the whole story (read-only mounts, root, ACLs).
    """
    with signals_held():  # an interrupt between the two would leave the probe behind
        try:
            descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=".leakaudit-probe-")
        except OSError as error:
            reason = error.strerror or str(error)
            raise OutputPathError(f"cannot write into {folder}: {reason}") from None
        os.close(descriptor)
        os.unlink(temporary)


def check_output_path(
    path: str | os.PathLike[str],
    *,
    option: str,
    protected: Iterable[str | os.PathLike[str] | Protected] = (),
    is_folder: bool = False,
    writable: bool = True,
) -> Path:
    """Check an output location before any work is done; return it as a ``Path``.

    Parameters
    ----------
    path : str or os.PathLike
        Where the output will be written.
    option : str
        The option's name for messages, like ``"--csv"``.
    protected : iterable of paths or Protected
        Places nothing may be written into (the dataset's root, its split
        folders, and where its followed links lead: see
        :func:`leakaudit.listing.dataset_boundary`). ``path`` is resolved
        (symlinks followed) before the comparison, so a link into a protected
        folder is refused too; a folder output (``is_folder``) that contains
        one is refused as well.
    is_folder : bool
        ``path`` is a folder to create or fill (``--show``), not a file.
    writable : bool, default True
        Also check that the location is of the right kind and accepts a new
        file. False checks only the protected folders: for an output the run
        can do without (the hash cache goes uncached, with a warning).

    Raises
    ------
    OutputPathError
        The location resolves inside a protected folder, is of the wrong kind,
        its folder is missing, or nothing can be created there.
    """
    target = Path(path)
    conflict = protected_conflict(target, protected, containing=is_folder)
    if conflict is not None:
        raise OutputPathError(
            f"{option} must be outside the dataset and every folder or file its links lead to; "
            f"{conflict}"
        )
    if not writable:
        return target
    if is_folder:
        if target.exists() and not target.is_dir():
            raise OutputPathError(f"{option} must be a folder; {target} is a file")
        existing = target
        while not existing.exists():
            existing = existing.parent
        probe_writable(existing)
        return target
    if target.is_dir():
        raise OutputPathError(f"{option} must be a file; {target} is a folder")
    if not target.parent.is_dir():
        raise OutputPathError(f"{option}: folder not found: {target.parent}")
    probe_writable(target.parent)
    return target
