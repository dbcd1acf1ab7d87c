"""What the hash cache holds on disk, and removing it: ``leakaudit cache info|clear``.

The cache (:mod:`leakaudit.cache`, :mod:`leakaudit._cache_file`) grows with every
folder audited and says nothing while it does. This module lists leakaudit's own
files in a cache folder, by name only (never anything else there): the current
database ``hashes-v<SCHEMA_VERSION>.sqlite3`` with its ``-wal`` / ``-shm`` /
``-journal`` companions, databases of earlier schemas (``hashes-v4.sqlite3``, read
by no version of leakaudit that writes ``v5``) and damaged files set aside
(``....corrupt-<stamp>-<pid>``); the last two are *stale*.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from leakaudit._cache_file import DATABASE_NAME, SCHEMA_VERSION

__all__ = ["CacheFile", "CacheInfo", "cache_info", "clear_cache", "size_text"]

#: leakaudit's own file names in a cache folder; nothing else there is ever listed or removed.
_OWN_NAME = re.compile(
    r"^hashes-v(?P<version>\d+)\.sqlite3"
    r"(?P<set_aside>\.corrupt-[0-9-]+)?(?:-wal|-shm|-journal)?$"
)


@dataclass(frozen=True)
class CacheFile:
    """One of leakaudit's files in the cache folder."""

    path: Path
    size: int
    schema_version: int
    #: Why the file is stale (no run reads it), or "" for the current database.
    stale: str


@dataclass(frozen=True)
class CacheInfo:
    """The cache folder, leakaudit's files in it and their size."""

    directory: Path
    files: tuple[CacheFile, ...]

    @property
    def size(self) -> int:
        """Bytes taken by leakaudit's files in the folder."""
        return sum(file.size for file in self.files)

    @property
    def stale_files(self) -> tuple[CacheFile, ...]:
        """Files no run reads: earlier schemas' databases, damaged files set aside."""
        return tuple(file for file in self.files if file.stale)

    def summary(self) -> str:
        """One line: where the cache is and how big (the CLI says it once per run).

        Examples
        --------
        >>> CacheInfo(Path("/c"), ()).summary()
        'hash cache: /c, empty'
        """
        if not self.files:
            return f"hash cache: {self.directory}, empty"
        stale = self.stale_files
        text = f"hash cache: {self.directory}, {size_text(self.size)} in {len(self.files)} file(s)"
        if stale:
            text += (
                f", {size_text(sum(f.size for f in stale))} of it stale "
                "(`leakaudit cache clear --stale` removes it)"
            )
        return text

    def to_text(self) -> str:
        """The report of ``leakaudit cache info``."""
        lines = [
            f"Hash cache folder: {self.directory}"
            + ("" if self.directory.is_dir() else " (does not exist yet)"),
            f"Schema version: {SCHEMA_VERSION} (database {DATABASE_NAME})",
            f"leakaudit's files: {len(self.files)}, {size_text(self.size)}",
        ]
        for file in self.files:
            what = f"stale: {file.stale}" if file.stale else "current"
            lines.append(f"  {file.path.name}  {size_text(file.size)}  ({what})")
        stale = self.stale_files
        if stale:
            lines.append(
                f"Stale: {len(stale)} file(s), {size_text(sum(f.size for f in stale))}; "
                "`leakaudit cache clear --stale` removes only those."
            )
        lines.append(
            "`leakaudit cache clear` removes leakaudit's files (the next audit hashes every "
            "image again); nothing else in the folder is touched."
        )
        return "\n".join(lines)


def size_text(size: int) -> str:
    """Bytes as a person reads them.

    Examples
    --------
    >>> size_text(512), size_text(326 * 1024 * 1024)
    ('512 B', '326.0 MiB')
    """
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _own_file(directory: Path, name: str) -> CacheFile | None:
    match = _OWN_NAME.match(name)
    if match is None:
        return None
    path = directory / name
    try:
        status = path.lstat()
    except OSError:
        return None
    if not stat.S_ISREG(status.st_mode):
        return None  # a link or a folder of that name is not ours to count or remove
    version = int(match["version"])
    if match["set_aside"]:
        stale = "a damaged cache file set aside"
    elif version != SCHEMA_VERSION:
        stale = f"schema version {version}, no longer read"
    else:
        stale = ""
    return CacheFile(path, status.st_size, version, stale)


def cache_info(directory: str | os.PathLike[str]) -> CacheInfo:
    """List leakaudit's files in the cache folder ``directory`` (none when it is missing).

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "hashes-v4.sqlite3").write_bytes(b"x" * 10)
    >>> _ = (folder / "notes.txt").write_text("mine")
    >>> info = cache_info(folder)
    >>> [(f.path.name, f.stale) for f in info.files]
    [('hashes-v4.sqlite3', 'schema version 4, no longer read')]
    """
    folder = Path(directory)
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        names = []
    files = [found for name in names if (found := _own_file(folder, name)) is not None]
    return CacheInfo(folder, tuple(files))


def clear_cache(directory: str | os.PathLike[str], *, stale_only: bool = False) -> list[CacheFile]:
    """Remove leakaudit's files from the cache folder; return those removed.

    Only files named as the cache names its own (:func:`cache_info`) are
    removed, never a link, a folder or any other file; the folder stays.
    ``stale_only`` removes only earlier schemas' databases and damaged files
    set aside. A run using the cache meanwhile starts a new database.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "hashes-v4.sqlite3").write_bytes(b"x")
    >>> _ = (folder / "notes.txt").write_text("mine")
    >>> [f.path.name for f in clear_cache(folder)], sorted(os.listdir(folder))
    (['hashes-v4.sqlite3'], ['notes.txt'])
    """
    removed: list[CacheFile] = []
    for file in cache_info(directory).files:
        if stale_only and not file.stale:
            continue
        try:
            file.path.unlink()
        except FileNotFoundError:
            continue
        removed.append(file)
    return removed
