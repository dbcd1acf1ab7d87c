"""The SQLite file of the hash cache: its layout, reads and writes, locks and damage.

:mod:`leakaudit.cache` decides what is cached and when (identities, the hash
context, the racy-timestamp rule); this module keeps the file: one
:class:`HashCache` per folder, whose operations never raise.

Layout
------
Three tables, each keyed by ``(context, path)`` (the hash context, the absolute
path as bytes) and ``WITHOUT ROWID``: ``entries`` (one packed 64-byte record per
file: identity, then phash, dhash, digest, flags; and the failure reason, or
NULL), ``turned`` (orientation hashes) and ``thumbs`` (tiny images' luma
thumbnails), each side record the identity it was computed under, then its value.
The file is created with 8 KiB pages, so a thumbnail's row sits in its page
(:data:`_PAGE_SIZE`).

Lookups
-------
A second audit of an unchanged folder is stat + lookup, so the lookup is built
for it: the entries of the key range the wanted paths span are read in one
``SELECT`` (a folder's entries sit together in the primary key; batched ``IN``
queries when that range is mostly other entries), and the identities are
compared as one array.

Concurrency and damage
----------------------
The database runs in WAL mode (readers never block the writer); every write is
one short ``BEGIN IMMEDIATE`` transaction of ``executemany`` batches. An
operation waits for other processes' locks :data:`_LOCK_PATIENCE_S` (2 s) in
all; then the cache is off for this run, with one :class:`CacheWarning` naming
the file and saying another process holds it (never a stall of minutes).

A cache file that is not a database, is truncated, or has another schema, and
any value read that this version never writes (a record of the wrong shape, a
TEXT value that is not UTF-8, a key that is not a BLOB, flags it never sets, a
failure reason outside :data:`DETERMINISTIC_FAILURES` or beside hashes) is
damage, never data: the file is renamed aside (``<name>.corrupt-<time>``,
replacing any earlier one: at most one is kept) with one :class:`CacheWarning`
and rebuilt, and the operation runs again on the new file. A cache folder that
cannot be written makes the run go uncached, with one warning. The cache never
breaks an audit.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import struct
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "DATABASE_NAME",
    "DETERMINISTIC_FAILURES",
    "IDENTITY",
    "LOW_INFORMATION",
    "RESULT",
    "SCHEMA_VERSION",
    "TURNED_PAIR",
    "CacheWarning",
    "Found",
    "HashCache",
]

#: Version of the database layout; part of the file name, so two layouts never
#: meet in one file. 2: one packed ``record`` per entry, and ``digest`` kept for
#: any file whose bytes were digested (version 1 had one column per field, and a
#: digest only for low-information images). 3: a ``turned`` table of orientation
#: hashes for dihedral matching. 4: a ``thumbs`` table of tiny images' luma thumbnails
#: (the verified audit's tiny-photo net, :meth:`CachedFiles.thumbnails`). 5: 8 KiB
#: pages (:data:`_PAGE_SIZE`), so a thumbnail's record sits in its table's page. 6: the
#: candidate net's denser crop boxes, rotations of +/-9 degrees and crop entries from the
#: pixels of every image larger than 32 px (a row's entries changed, issue 36).
SCHEMA_VERSION = 6
DATABASE_NAME = f"hashes-v{SCHEMA_VERSION}.sqlite3"

_APPLICATION_ID = 0x4C4B4155  # "LKAU": marks the file as ours
# The page size a new file is created with. A WITHOUT ROWID table keeps at most
# (page - 12) * 64 / 255 - 23 bytes of a row in its page: 1,002 at SQLite's default
# 4 KiB, so every thumbnail row (1,056 bytes of record, its key besides) spilled into
# an overflow page of its own, and the file took 4.7x the thumbnails' bytes (issue 35).
# At 8 KiB a row holds 2,030 bytes (a key up to ~900 bytes beside a thumbnail): 1.3x on
# 20k and 100k rows, about the data itself with its keys; 16 KiB did no better
# (benchmarks/bench_cache.py --layout, benchmarks/RESULTS.md).
_PAGE_SIZE = 8192
# How long one operation waits for a lock another process holds before this run goes
# on without the cache: writers hold it for one short batch (milliseconds), so only a
# lock held on purpose, or by a stuck process, lasts this long. (Eight retries of a
# 10 s busy timeout stalled a run 86 s, issue 35.)
_LOCK_PATIENCE_S = 2.0
_LOOKUP_BATCH = 500  # bound parameters per SELECT (SQLite's default limit is 32766)
_STORE_BATCH = 2000  # rows per write transaction: short, so other writers get their turn
# Failure reasons that depend only on the file's bytes (see "Failures" above).
DETERMINISTIC_FAILURES = (
    "empty file",
    "empty image",
    "not a recognised image format",
    "truncated image",
    "cannot decode image",
    "decompression bomb",
)
# An entry's record: the identity (size, st_mtime_ns, st_ctime_ns, inode), then the
# result (phash, dhash, digest, flags), little-endian. Packed in one BLOB so that a
# lookup fetches two small values per row and compares identities as one array.
IDENTITY = struct.Struct("<qqqQ")
RESULT = struct.Struct("<QQQQ")
RECORD_SIZE = IDENTITY.size + RESULT.size
TURNED_PAIR = struct.Struct("<QQ")  # one orientation entry: phash, dhash
LOW_INFORMATION = 1  # flags bit
_COLUMNS = ("context", "path", "record", "error")
_SIDE_COLUMNS = ("context", "path", "record")
# A side table: one record per (context, path); see _SIDE_TABLES below.
_SIDE_SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    context INTEGER NOT NULL,
    path BLOB NOT NULL,
    record BLOB NOT NULL,
    PRIMARY KEY (context, path)
) WITHOUT ROWID
"""
# The side tables, keyed like ``entries``: orientation hashes (dihedral matching) and
# tiny images' thumbnails (:meth:`CachedFiles.thumbnails`), each record the identity
# it was computed under, then its value: a whole number of units of the width given.
_SIDE_UNIT = {"turned": TURNED_PAIR.size, "thumbs": 1}
_SIDE_TABLES = tuple(_SIDE_UNIT)
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS entries (
    context INTEGER NOT NULL,
    path BLOB NOT NULL,
    record BLOB NOT NULL CHECK (length(record) = {RECORD_SIZE}),
    error TEXT,
    PRIMARY KEY (context, path)
) WITHOUT ROWID
"""


class CacheWarning(UserWarning):
    """The hash cache was damaged or unusable; the audit went on (rebuilt, or uncached)."""


@dataclass
class Found:
    """What a lookup served, per wanted key: a hit flag and the stored result."""

    hit: NDArray[np.bool_]
    results: NDArray[np.uint64]  # (n, 4): phash, dhash, digest, flags; 0 where missed
    errors: dict[int, str]


def _error_name(exc: sqlite3.Error) -> str:
    """The SQLite result code name (``SQLITE_BUSY``...), from the message before Python 3.11."""
    name = getattr(exc, "sqlite_errorname", None)
    if isinstance(name, str):
        return name
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return "SQLITE_BUSY"
    if "not a database" in text:
        return "SQLITE_NOTADB"
    if "malformed" in text or "corrupt" in text:
        return "SQLITE_CORRUPT"
    return "SQLITE_ERROR"


def _is_busy(exc: sqlite3.Error) -> bool:
    return _error_name(exc).startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))


def _is_damage(exc: sqlite3.Error) -> bool:
    return _error_name(exc).startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))


class _Damaged(Exception):
    """The cache file is not ours or is damaged (set it aside and rebuild)."""


class _Unusable(Exception):
    """The cache cannot be used this run (go uncached)."""


def _strict_text(value: bytes) -> str:
    """A TEXT value read from the file; one that is not UTF-8 is damage (this module
    writes only UTF-8), never a reason to give the cache up on every run."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise _Damaged("a text value is not UTF-8") from None


class HashCache:
    """A folder holding the SQLite hash cache.

    Parameters
    ----------
    directory : str or os.PathLike
        The folder; created on first use. The database is
        ``directory / "hashes-v6.sqlite3"`` (the number is :data:`SCHEMA_VERSION`).

    Notes
    -----
    Each operation opens its own short-lived connection, so one HashCache may
    be shared by threads and used from several processes at once. Problems
    never raise: a damaged file is set aside and rebuilt; an unusable folder, or a
    lock another process holds for over 2 s, disables the cache for this object;
    each with one :class:`CacheWarning`.

    Examples
    --------
    >>> import tempfile
    >>> cache = HashCache(tempfile.mkdtemp())
    >>> len(cache)
    0
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / DATABASE_NAME
        self.disabled_reason: str | None = None
        self._ready = False
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"HashCache({str(self.directory)!r})"

    def __len__(self) -> int:
        """Number of entries stored (0 when the cache is unusable)."""
        counted = self._run(lambda db: db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])
        return int(counted) if counted is not None else 0

    # ------------------------------------------------------------ public operations

    def _lookup(self, keys: Sequence[bytes], identities: bytes, context: int) -> Found:
        """Serve every key whose entry under ``context`` has the packed identity given for it.

        One read of the key range the wanted paths span (a folder's entries sit next
        to each other in the primary key), the identities compared as one array;
        batched ``IN`` queries instead when that range holds many other entries.
        """
        n = len(keys)
        hit = np.zeros(n, dtype=np.bool_)
        results = np.zeros((n, 4), dtype=np.uint64)
        if not n:
            return Found(hit, results, {})

        def select(db: sqlite3.Connection) -> tuple[tuple[bytes, ...], bytes, tuple[Any, ...]]:
            rows = _select_keys(db, "entries", "path, record, error", keys, context)
            if not rows:
                return (), b"", ()
            paths, records, reasons = zip(*rows, strict=True)
            try:  # every record a BLOB of the right length (TEXT or numbers fail to join)
                packed = b"".join(records) if set(map(len, records)) == {RECORD_SIZE} else b""
            except TypeError:
                packed = b""
            if not packed:
                raise _Damaged("an entry's record is not what this version writes")
            _check_entries(paths, packed, reasons)
            return paths, packed, reasons

        selected = self._run(select)
        if not selected or not selected[0]:
            return Found(hit, results, {})
        paths, packed, reasons = selected
        stored = np.frombuffer(packed, dtype="<u8").reshape(-1, 8)
        position = dict(zip(paths, range(len(paths)), strict=True))
        index = np.array(list(map(position.get, keys, repeat(-1))), dtype=np.intp)
        wanted = np.frombuffer(identities, dtype="<u8").reshape(n, 4)
        found = index >= 0
        candidates = stored[np.where(found, index, 0)]
        hit = found & (candidates[:, :4] == wanted).all(axis=1)
        results = np.where(hit[:, None], candidates[:, 4:], 0).astype(np.uint64)
        errors: dict[int, str] = {}
        if reasons.count(None) < len(reasons):  # some entries are cached failures
            failed = {k: reason for k, reason in enumerate(reasons) if reason is not None}
            rows_failed = np.flatnonzero(hit & np.isin(index, list(failed)))
            errors = {int(i): str(failed[int(index[i])]) for i in rows_failed}
        return Found(hit, results, errors)

    def _lookup_turned(
        self, keys: Sequence[bytes], identities: Sequence[bytes], context: int
    ) -> dict[int, bytes]:
        """Orientation hashes stored for ``keys`` under the identities given: slot -> pairs.

        The value is the packed ``(phash, dhash)`` pairs (possibly none: a blank image).
        """
        return self._lookup_side("turned", keys, identities, context)

    def _lookup_side(
        self, table: str, keys: Sequence[bytes], identities: Sequence[bytes], context: int
    ) -> dict[int, bytes]:
        """Records of a side table (``turned``, ``thumbs``) stored for ``keys`` under the
        identities given: slot -> the record after its identity."""
        if not keys:
            return {}
        width = _SIDE_UNIT[table]

        def select(db: sqlite3.Connection) -> dict[bytes, bytes]:
            stored: dict[bytes, bytes] = {}
            for path, record in _select_keys(db, table, "path, record", keys, context):
                if (
                    type(path) is not bytes
                    or not isinstance(record, bytes)
                    or len(record) < IDENTITY.size
                    or (len(record) - IDENTITY.size) % width
                ):
                    raise _Damaged(f"a {table} record is not what this version writes")
                stored[path] = record
            return stored

        stored = self._run(select)
        if not stored:
            return {}
        found: dict[int, bytes] = {}
        size = IDENTITY.size
        for slot, (key, identity) in enumerate(zip(keys, identities, strict=True)):
            record = stored.get(key)
            if record is not None and record[:size] == identity:
                found[slot] = record[size:]
        return found

    def _store_turned(self, rows: Sequence[tuple[bytes, bytes]], context: int) -> None:
        """Insert or replace ``(key, record)`` orientation rows under ``context``."""
        self._store_side("turned", rows, context)

    def _store_side(self, table: str, rows: Sequence[tuple[bytes, bytes]], context: int) -> None:
        """Insert or replace ``(key, record)`` rows of a side table under ``context``."""
        if not rows:
            return
        values = [(context, key, record) for key, record in rows]
        statement = f"INSERT OR REPLACE INTO {table} ({','.join(_SIDE_COLUMNS)}) VALUES (?,?,?)"
        self._write(statement, values)

    def _store(self, rows: Sequence[tuple[bytes, bytes, str | None]], context: int) -> None:
        """Insert or replace ``(key, record, error)`` rows under ``context``, in short batches."""
        if not rows:
            return
        values = [(context, key, record, error) for key, record, error in rows]
        statement = f"INSERT OR REPLACE INTO entries ({','.join(_COLUMNS)}) VALUES (?,?,?,?)"
        self._write(statement, values)

    def _replace_records(self, rows: Sequence[tuple[bytes, bytes, bytes]], context: int) -> None:
        """Replace ``(key, old record, new record)`` where the entry still holds the old record.

        An entry replaced meanwhile (another process saw the file change) is left alone.
        """
        values = [(new, context, key, old) for key, old, new in rows]
        statement = "UPDATE entries SET record = ? WHERE context = ? AND path = ? AND record = ?"
        self._write(statement, values)

    def _write(self, statement: str, values: list[Any]) -> None:
        for start in range(0, len(values), _STORE_BATCH):
            batch = values[start : start + _STORE_BATCH]

            def write(db: sqlite3.Connection, batch: list[Any] = batch) -> bool:
                with _transaction(db):
                    db.executemany(statement, batch)
                return True

            if self._run(write) is None:
                return

    # ------------------------------------------------------------------ machinery

    def _run(self, operation: Any) -> Any:
        """Run ``operation(connection)`` with retries on busy and one rebuild on damage.

        Returns its result, or None when the cache is (or just became) unusable.
        """
        for attempt in range(2):
            if self.disabled_reason is not None:
                return None
            try:
                return self._with_retries(operation)
            except _Damaged as damage:
                if attempt == 0 and self._set_aside(str(damage)):
                    continue
                self._disable(f"the cache file {self.path} is damaged ({damage})")
            except _Unusable as problem:
                self._disable(str(problem))
        return None

    def _with_retries(self, operation: Any) -> Any:
        """Run ``operation(connection)``, waiting for other processes' locks
        :data:`_LOCK_PATIENCE_S` in all, then giving up (:class:`_Unusable`).

        Giving up makes this run go uncached (its results are the same; the next run,
        the lock gone, fills the cache) rather than keep trying in the background: the
        lookup cannot wait for later, and a writer left running would hold the audit's
        exit back by as long as the lock lasts.
        """
        deadline = time.monotonic() + _LOCK_PATIENCE_S
        delay = 0.02
        while True:
            try:
                with closing(self._connect(deadline - time.monotonic())) as db:
                    return operation(db)
            except sqlite3.Error as exc:
                if _is_damage(exc):
                    raise _Damaged(str(exc)) from None
                if not _is_busy(exc):
                    raise _Unusable(f"the cache {self.path} cannot be used ({exc})") from None
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Unusable(
                        f"another process holds a lock on the hash cache {self.path} "
                        f"(waited {_LOCK_PATIENCE_S:g} s)"
                    ) from None
                time.sleep(min(delay, left))
                delay = min(delay * 2, 0.25)
            except OSError as exc:
                raise _Unusable(
                    f"the cache folder {self.directory} cannot be used ({exc})"
                ) from None

    def _connect(self, timeout: float) -> sqlite3.Connection:
        """A connection whose statements wait for a lock at most ``timeout`` seconds."""
        self.directory.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(
            self.path, timeout=max(timeout, 0.0), isolation_level=None, check_same_thread=False
        )
        db.text_factory = _strict_text
        try:
            if not self._ready:
                self._prepare(db)
                self._ready = True
            db.execute("PRAGMA synchronous=NORMAL")  # safe with WAL: a crash loses no old entry
        except BaseException:
            db.close()
            raise
        return db

    def _prepare(self, db: sqlite3.Connection) -> None:
        """Check the file is our cache (or empty: create it) and switch it to WAL."""
        application_id, version, has_tables = _identity(db)
        if not has_tables and application_id == 0:
            # Before the first write (an existing file keeps its own page size).
            db.execute(f"PRAGMA page_size={_PAGE_SIZE}")
            with _transaction(db):
                # Re-checked inside the write lock: another process may have just done it.
                if not db.execute("SELECT name FROM sqlite_master").fetchall():
                    db.execute(_SCHEMA)
                    for side in _SIDE_TABLES:
                        db.execute(_SIDE_SCHEMA.format(table=side))
                    db.execute(f"PRAGMA application_id={_APPLICATION_ID}")
                    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            application_id, version, has_tables = _identity(db)
        columns = tuple(row[1] for row in db.execute("PRAGMA table_info(entries)").fetchall())
        if application_id != _APPLICATION_ID or version != SCHEMA_VERSION:
            raise _Damaged(
                f"not a leakaudit v{SCHEMA_VERSION} cache "
                f"(application_id {application_id:#x}, user_version {version})"
            )
        if sorted(columns) != sorted(_COLUMNS):
            raise _Damaged(f"unexpected columns {list(columns)}")
        for side in _SIDE_TABLES:
            found = tuple(row[1] for row in db.execute(f"PRAGMA table_info({side})").fetchall())
            if sorted(found) != sorted(_SIDE_COLUMNS):
                raise _Damaged(f"unexpected {side} columns {list(found)}")
        if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":  # e.g. a file system without shared memory
                db.execute("PRAGMA journal_mode=DELETE")

    def _set_aside(self, why: str) -> bool:
        """Rename the damaged file (and its WAL) aside; return whether the path is free now."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{os.getpid()}")
        try:
            os.replace(self.path, target)
        except FileNotFoundError:
            pass  # another process set it aside first
        except OSError as exc:
            self._disable(
                f"the cache file {self.path} is damaged ({why}) and cannot be moved ({exc})"
            )
            return False
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(self.path.name + suffix)
            try:
                if suffix == "-wal":
                    os.replace(side, target.with_name(target.name + suffix))
                else:
                    side.unlink()
            except OSError:
                pass
        self._remove_older_set_aside(target)
        self._ready = False
        self._warn(
            "damaged",
            f"the hash cache {self.path} was damaged ({why}); it was moved to {target.name} "
            "and a new one is being built.",
        )
        return True

    def _remove_older_set_aside(self, kept: Path) -> None:
        """Keep one set-aside cache: remove the ones earlier runs left (each ours, by name).

        Every change of the cache's format sets the old file aside; without this, each
        would stay beside the cache forever.
        """
        prefix = f"{self.path.name}.corrupt-"
        try:
            names = os.listdir(self.directory)
        except OSError:
            return
        for name in names:
            if not name.startswith(prefix) or name in (kept.name, kept.name + "-wal"):
                continue
            with suppress(OSError):
                old = self.directory / name
                if stat.S_ISREG(old.lstat().st_mode):
                    old.unlink()

    def _disable(self, reason: str) -> None:
        if self.disabled_reason is None:
            self.disabled_reason = reason
            self._warn("disabled", f"{reason}; hashing without the cache.")

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, CacheWarning, stacklevel=5)


def _check_entries(paths: Sequence[Any], packed: bytes, reasons: Sequence[Any]) -> None:
    """Raise :class:`_Damaged` unless every entry read is one this version writes.

    A value that does not parse is damage, never data: a failure reason outside the
    vocabulary of cached failures (:data:`DETERMINISTIC_FAILURES`), or beside hashes
    (a failed file has none), would otherwise hide a readable image as unreadable
    (issue 35: a tampered ``error`` turned a leak into "No leakage").
    """
    if any(type(path) is not bytes for path in paths):
        raise _Damaged("an entry's path is not a BLOB")
    stored = np.frombuffer(packed, dtype="<u8").reshape(-1, 8)
    if (stored[:, 7] & ~np.uint64(LOW_INFORMATION)).any():
        raise _Damaged("an entry's flags hold bits this version never sets")
    if reasons.count(None) == len(reasons):
        return
    for k, reason in enumerate(reasons):
        if reason is None:
            continue
        if not isinstance(reason, str) or not reason.startswith(DETERMINISTIC_FAILURES):
            raise _Damaged(f"an entry's error {reason!r:.80} is not a failure this version caches")
        if stored[k, 4:].any():
            raise _Damaged("an entry holds both a failure and hashes")


def _select_keys(
    db: sqlite3.Connection, table: str, columns: str, keys: Sequence[bytes], context: int
) -> list[Any]:
    """Rows of ``table`` under ``context`` for ``keys`` (and maybe others in their key range).

    One read of the key range the wanted paths span (a folder's entries sit next to
    each other in the primary key); batched ``IN`` queries instead when that range
    holds many other entries.
    """
    limit = 2 * len(keys) + 1000
    rows: list[Any] = db.execute(
        f"SELECT {columns} FROM {table} WHERE context = ? AND path BETWEEN ? AND ? LIMIT ?",
        (context, min(keys), max(keys), limit),
    ).fetchall()
    if len(rows) == limit:
        rows = []
        unique = sorted(set(keys))
        for start in range(0, len(unique), _LOOKUP_BATCH):
            batch = unique[start : start + _LOOKUP_BATCH]
            marks = ",".join("?" * len(batch))
            rows += db.execute(
                f"SELECT {columns} FROM {table} WHERE context = ? AND path IN ({marks})",
                (context, *batch),
            ).fetchall()
    return rows


def _identity(db: sqlite3.Connection) -> tuple[int, int, bool]:
    """``(application_id, user_version, has tables)`` of the file, read from one snapshot.

    Read one by one, outside a transaction, a process can see the header of an empty
    file and then the tables another process has just committed: a cache being built
    would look damaged and be set aside (losing what the other process stored).
    """
    with _transaction(db, "DEFERRED"):  # the first read takes one shared snapshot
        tables = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        application_id = int(db.execute("PRAGMA application_id").fetchone()[0])
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
    return application_id, version, bool(tables)


@contextmanager
def _transaction(db: sqlite3.Connection, begin: str = "IMMEDIATE") -> Iterator[None]:
    """One transaction: committed, or rolled back when the body raises.

    ``IMMEDIATE`` (for writes) takes the write lock up front: a deferred transaction that
    later upgrades can fail with SQLITE_BUSY without the busy handler ever running.
    ``DEFERRED`` (for reads) takes a shared snapshot at its first read.
    """
    db.execute(f"BEGIN {begin}")
    try:
        yield
    except BaseException:
        if db.in_transaction:  # SQLite ends it by itself after some errors (e.g. busy, full)
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
