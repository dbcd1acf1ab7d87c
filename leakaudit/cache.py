"""A persistent cache of image hashes: never hash an unchanged file twice.

Audits run again and again on the same folders (every training run, every CI
job). :func:`hash_sources_cached` wraps :func:`leakaudit.hashing.hash_sources`
from the outside: it looks every file up in a small SQLite database, hashes
only the misses, stores what it computed and returns the same
:class:`~leakaudit.hashing.HashTable` an uncached run would, row for row.

What makes an entry (never serve a stale one)
---------------------------------------------
An entry is keyed by the file's **identity** and by the **hash context**.

* Identity: the absolute path (as bytes, so non-UTF-8 names work), and the
  ``size``, ``st_mtime_ns``, ``st_ctime_ns`` and inode of :func:`os.stat`. An
  entry is served only when all five still match; a changed file is re-hashed
  and its entry replaced. ``ctime`` catches a content change whose ``mtime``
  was put back (``touch -d``, ``rsync -t``), the inode a file replaced by a
  rename.
* Context: :data:`HASH_VERSION`, a fingerprint of the source of
  :mod:`leakaudit.loading` and :mod:`leakaudit.hashing`, the Pillow and numpy
  versions, Pillow's ``MAX_IMAGE_PIXELS``, and every field of the
  :class:`~leakaudit.loading.DecodeOptions` (``min_side``, ``exif_transpose``,
  ``background``, ``max_pixels``, ``trim_borders``, and any added later: the
  fields are read, not listed). The hash method and size need no place in it:
  both 64-bit hashes come from one decode and both are stored.

A file is stat-ed before it is hashed and again after; its result is stored
only when the two agree and its last change is older than the moment hashing
started by more than the file system's timestamp granularity (git's "racily
clean" rule), so a file rewritten while or just after it was read, within one
timestamp tick, is never cached under the identity of its new content.

Byte digests
------------
An entry also keeps the BLAKE2b-64 of the file's bytes once something asked for
it: hashing computes it for low-information images, and an audit for images whose
two hashes equal another image's (to tell byte copies from re-encodes). The file
is stat-ed before and after that read, and the digest is stored only in the entry
of that very identity (an ``UPDATE`` conditioned on the whole stored record), so
a later audit of unchanged files reads none of them again, and a changed file
never gets an old digest. The :class:`~leakaudit.hashing.HashTable` still holds
digests of low-information images only, as an uncached run does.

Orientation hashes
------------------
Dihedral matching (``dihedral=True``) also needs each image's hashes in its
canonical orientation(s). They are kept in a second table, ``turned``, under the
same key and context, with the identity they were computed under in front; a
file whose entry lacks them is decoded again (its entry is kept as it is) and
they are stored by the same rules as hashes.

Thumbnails
----------
The verified audit's tiny-photo net (:mod:`leakaudit._registration`) decodes every
tiny image (a side of at most 64 px) once more, to a 32 x 32 luma thumbnail. Those
are kept in a third table, ``thumbs``, by the same rules as orientation hashes (the
identity in front, stored only for a file unchanged while it was read and settled),
under a key that adds a fingerprint of the net's source to the hash context: a
second audit of unchanged files decodes none of them again
(:meth:`CachedFiles.thumbnails`).

Lookups
-------
A second audit of an unchanged folder is stat + lookup: keys are made absolute
once per folder, and the file (:mod:`leakaudit._cache_file`) serves a folder's
entries in one read, their identities compared as one array.

Failures
--------
Failures that depend on the moment (file not found, permission denied, a read
error, out of memory) are never cached. Failures that depend only on the
bytes (empty file, not an image, truncated, corrupt, decompression bomb) are
cached like hashes: with the identity unchanged the bytes are the same and the
decoder (pinned by the context) answers the same, and datasets full of broken
files would otherwise pay for decoding them again on every run.

Concurrency and damage
----------------------
The file (:mod:`leakaudit._cache_file`, which has the details) runs in WAL mode,
every write one short transaction. A lock another process holds is waited for 2 s
at most, then the run goes uncached with one :class:`CacheWarning` naming the
file. A file that is not a database, is truncated, has another schema, or holds
a value this version never writes (a record of the wrong shape, text that is not
UTF-8, a failure reason outside the cached failures' vocabulary or beside
hashes) is damaged: it is renamed aside (``<name>.corrupt-<time>``, at most one
kept) with one warning and rebuilt, so a bad value is never served as data and
the next run has a working cache. A cache folder that cannot be written makes
the run go uncached, with one warning. The cache never breaks an audit.

.. important::
   Bump :data:`HASH_VERSION` whenever the hashes (or failure reasons) of a file
   may change: the loading pipeline, the hash definitions, the low-information
   rule. The golden-hash tests in ``tests/test_hashing.py``
   (``test_golden_png_hashes``, ``test_golden_jpeg_hashes``) fail on such a
   change; when you update their expected values, bump this constant too. (The
   source fingerprint catches edits to ``loading.py`` and ``hashing/*.py`` on its
   own; the constant covers everything else.)
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import TypeAlias, cast

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit import hashing, loading
from leakaudit._cache_file import (
    DATABASE_NAME,
    DETERMINISTIC_FAILURES,
    IDENTITY,
    LOW_INFORMATION,
    RESULT,
    SCHEMA_VERSION,
    TURNED_PAIR,
    CacheWarning,
    HashCache,
)
from leakaudit._validation import check_bool, check_choice, describe
from leakaudit.hashing import (
    ON_ERROR_CHOICES,
    HashTable,
    OrientationHashes,
    apply_on_error,
    bytes_digest,
    hash_sources,
    source_name,
)
from leakaudit.loading import DecodeOptions, ImageSource, resolve_decode

__all__ = [
    "CACHE_DIR_ENV",
    "DATABASE_NAME",
    "HASH_VERSION",
    "SCHEMA_VERSION",
    "CacheSpec",
    "CacheWarning",
    "CachedFiles",
    "HashCache",
    "default_cache_dir",
    "hash_context",
    "hash_sources_cached",
    "hash_sources_with_files",
    "resolve_cache",
]

#: Version of the hash values a file produces. Bump it whenever the hashes or the
#: failure reasons of some file may change (see the module docstring).
HASH_VERSION = 4  # 4: strip entries of wide and tall images (3: small flat images' crop
# and rotation entries from their pixels)
#: Environment variable naming the cache folder (overrides the platform default).
CACHE_DIR_ENV = "LEAKAUDIT_CACHE_DIR"
# A path key's directory part is made absolute once per directory, not once per file.
_POSIX_PATHS = os.sep == "/" and os.altsep is None

CacheSpec: TypeAlias = "bool | str | os.PathLike[str] | HashCache | None"
"""What ``cache=`` accepts: True (default folder), False/None (off), a folder, a HashCache."""


def default_cache_dir() -> Path:
    """Return the folder the hash cache lives in by default.

    ``$LEAKAUDIT_CACHE_DIR`` when set; otherwise the platform's user cache
    folder: ``$XDG_CACHE_HOME/leakaudit`` (``~/.cache/leakaudit``) on Linux and
    other Unixes, ``~/Library/Caches/leakaudit`` on macOS,
    ``%LOCALAPPDATA%\\leakaudit\\Cache`` on Windows.

    Examples
    --------
    >>> default_cache_dir().name in ("leakaudit", "Cache") or CACHE_DIR_ENV in os.environ
    True
    """
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "leakaudit" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "leakaudit"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG spec: a relative value is invalid and must be ignored.
    base_dir = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base_dir / "leakaudit"


def resolve_cache(cache: CacheSpec) -> HashCache | None:
    """Turn a ``cache=`` argument into a :class:`HashCache` (None: no caching).

    Parameters
    ----------
    cache : bool, str, os.PathLike, HashCache or None
        True: the :func:`default_cache_dir`; False or None: off; a path: that
        folder; a HashCache: itself.

    Examples
    --------
    >>> resolve_cache(False) is None
    True
    >>> resolve_cache("/tmp/somewhere").directory.name
    'somewhere'
    """
    if cache is None or cache is False:
        return None
    if cache is True:
        return HashCache(default_cache_dir())
    if isinstance(cache, HashCache):
        return cache
    if isinstance(cache, (str, os.PathLike)) and not isinstance(cache, bytes):
        return HashCache(cache)
    raise TypeError(
        f"cache must be True, False, a folder path or a HashCache; got {describe(cache)}."
    )


def _stat_identity(path: str) -> bytes | None:
    """The packed identity of the regular file at ``path``; None when it cannot be cached.

    (Size, mtime, ctime and inode: see "What makes an entry" above.)
    """
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # missing, no permission, a link loop, a NUL in the name
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        return IDENTITY.pack(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    except struct.error:  # a timestamp beyond the int64 nanoseconds of 1678-2262
        return None


def _identify(
    names: Sequence[str], file_rows: Iterable[int]
) -> tuple[list[int], list[bytes], list[bytes]]:
    """Stat the files of ``file_rows``; return the cacheable rows, their keys and identities.

    A key is the absolute path as bytes (non-UTF-8 names work): ``abspath``, not
    ``realpath``, which costs an lstat per path component; the stat identity already
    tells two files apart, whatever links lead to them. On POSIX the folder part is made
    absolute once per folder, not once per file (``abspath`` per file cost as much as
    the whole SQLite lookup on 20k files). This loop is most of what a second audit of
    an unchanged folder does, hence :func:`_stat_identity` inlined.
    """
    rows: list[int] = []
    keys: list[bytes] = []
    identities: list[bytes] = []
    prefixes: dict[str, bytes] = {}
    encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    stat_of, is_regular, pack = os.stat, stat.S_ISREG, IDENTITY.pack
    for row in file_rows:
        path = names[row]
        try:
            st = stat_of(path)
        except (OSError, ValueError):  # missing, no permission, a link loop, a NUL in the name
            continue
        if not is_regular(st.st_mode):
            continue
        try:
            identity = pack(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        except struct.error:  # a timestamp beyond the int64 nanoseconds of 1678-2262
            continue
        if _POSIX_PATHS:
            head, separator, name = path.rpartition("/")
            prefix = prefixes.get(head)
            if prefix is None:
                # "" is the current folder ("a.jpg") or the root ("/a.jpg").
                prefix = os.fsencode(os.path.abspath(head or ("/" if separator else ".")))
                if not prefix.endswith(b"/"):
                    prefix += b"/"
                prefixes[head] = prefix
            # A regular file's last component is a name, never "." or "..": nothing to
            # normalise.
            key = prefix + name.encode(encoding, errors)
        else:
            key = os.fsencode(os.path.abspath(path))
        rows.append(row)
        keys.append(key)
        identities.append(identity)
    return rows, keys, identities


def _settled(identity: bytes, started_ns: int) -> bool:
    """Whether any later write to the file must change its timestamps.

    True when the file's last change is older than ``started_ns`` (taken before
    it was read) by more than the timestamp granularity: 2 s when the stamps are
    whole seconds (FAT, HFS+, ext3), else 50 ms (a few clock ticks).
    """
    _, mtime_ns, ctime_ns, _ = (int(v) for v in IDENTITY.unpack(identity))
    newest = max(mtime_ns, ctime_ns)
    coarse = mtime_ns % 1_000_000_000 == 0 and ctime_ns % 1_000_000_000 == 0
    margin = 2_000_000_000 if coarse else 50_000_000
    return newest < started_ns - margin


def _storable(path: str, identity: bytes, started_ns: int) -> bool:
    """Whether a value computed from ``path`` (read after ``started_ns``) may be stored
    under ``identity``: the file still has that identity and its last change is
    :func:`settled <_settled>`, so a later change must show in its identity."""
    return _stat_identity(path) == identity and _settled(identity, started_ns)


@lru_cache(maxsize=1)
def _source_fingerprint() -> str:
    """BLAKE2b of the code that turns bytes into hashes (``loading.py``, ``hashing/*.py``)."""
    package = Path(hashing.__file__ or "").parent
    files = [Path(loading.__file__ or ""), *sorted(package.glob("*.py"))]
    digest = hashlib.blake2b(digest_size=16)
    for path in files:
        try:
            digest.update(path.read_bytes())
        except OSError:  # a frozen or zip-imported install: HASH_VERSION alone
            digest.update(b"?")
    return digest.hexdigest()


def hash_context(options: DecodeOptions, *, crop_entries: bool = False) -> int:
    """Return the signed 64-bit key of everything besides the file that decides its hashes.

    ``crop_entries`` (the hashing choice, see
    :func:`~leakaudit.hashing.hash_sources`) is part of it: rows hashed with and
    without the crop entries are kept apart. It takes the place of the
    deprecated ``DecodeOptions.crop_entries`` in the key, so either way of
    asking gives the same key (and a cache written before keeps serving).

    Examples
    --------
    >>> hash_context(DecodeOptions()) == hash_context(DecodeOptions())
    True
    >>> hash_context(DecodeOptions()) == hash_context(DecodeOptions(exif_transpose=False))
    False
    >>> hash_context(DecodeOptions()) == hash_context(DecodeOptions(), crop_entries=True)
    False
    """
    import PIL

    # Every field, by name: an option added to DecodeOptions is part of the key
    # without anyone remembering to list it here.
    decode = tuple(
        (
            field.name,
            bool(crop_entries or options.crop_entries)
            if field.name == "crop_entries"
            else getattr(options, field.name),
        )
        for field in fields(options)
    )
    text = repr(
        (
            HASH_VERSION,
            _source_fingerprint(),
            PIL.__version__,
            np.__version__,
            Image.MAX_IMAGE_PIXELS,
            decode,
        )
    )
    return int.from_bytes(
        hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True
    )


def _cacheable_failure(reason: str) -> bool:
    """Whether a failure depends only on the file's bytes (see "Failures" above)."""
    return reason.startswith(DETERMINISTIC_FAILURES)


def _check_source(item: object, index: int) -> None:
    # hash_sources' own checks, with the index into the caller's list.
    if isinstance(item, os.PathLike) and not isinstance(os.fspath(item), str):
        raise TypeError(f"sources[{index}] must be a str path; got {describe(item)}.")
    if not isinstance(item, (str, os.PathLike, bytes, bytearray, memoryview, Image.Image)):
        raise TypeError(
            f"sources[{index}] must be a path, bytes or a PIL image; got {type(item).__name__}."
        )


def hash_sources_cached(
    sources: Sequence[ImageSource],
    *,
    cache: CacheSpec = True,
    decode: DecodeOptions | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    on_error: str = "warn",
    dihedral: bool = False,
    crop_entries: bool = False,
) -> HashTable:
    """:func:`~leakaudit.hashing.hash_sources`, served from the hash cache where possible.

    Files with a current cache entry are not read at all; the others are hashed
    (in parallel, as ``hash_sources`` does) and stored. In-memory sources
    (bytes, PIL images), and anything that is not a regular file, bypass the
    cache. The result equals what ``hash_sources`` returns, row for row, names,
    errors and warning included; with ``on_error="raise"`` every miss is hashed
    (and stored) before the first failure, in input order, is raised.

    Parameters
    ----------
    sources : sequence of str, os.PathLike, bytes or PIL.Image.Image
        The images.
    cache : bool, str, os.PathLike, HashCache or None, default True
        True: the :func:`default_cache_dir`; a folder: that one; False/None:
        plain ``hash_sources``.
    decode, workers, progress, on_error, dihedral, crop_entries
        As in :func:`~leakaudit.hashing.hash_sources`. The cache holds no
        orientation hashes: with ``dihedral=True`` every image is hashed (and
        its entry stored for plain runs).

    Returns
    -------
    HashTable

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> Image.effect_mandelbrot((96, 96), (-2, -1.5, 1, 1.5), 50).save(folder / "a.png")
    >>> first = hash_sources_cached([folder / "a.png"], cache=folder / "cache")
    >>> second = hash_sources_cached([folder / "a.png"], cache=folder / "cache")
    >>> bool(first.phash[0] == second.phash[0])
    True
    """
    table, _ = hash_sources_with_files(
        sources,
        cache=cache,
        options=resolve_decode(decode),
        workers=workers,
        progress=progress,
        on_error=on_error,
        dihedral=dihedral,
        crop_entries=crop_entries,
    )
    return table


@dataclass
class CachedFiles:
    """What one cached hashing run knows about its file rows, for the digests asked for later.

    ``rows[k]`` is the row of the ``k``-th cacheable file, ``keys[k]`` its cache key and
    ``identities[k]`` the identity its result was served or hashed under; ``results``
    holds every row's phash, dhash, digest (0: not computed) and flags.
    """

    store: HashCache
    context: int
    names: list[str]
    rows: list[int]
    keys: list[bytes]
    identities: list[bytes]
    results: NDArray[np.uint64]

    def file_digests(self, rows: Sequence[int]) -> dict[int, int]:
        """Return the BLAKE2b-64 of the bytes of the files of ``rows`` (valid file rows).

        A digest an earlier run stored is served; otherwise the file is read, and its
        digest is stored with its entry when the file kept the identity it was hashed
        under while it was read and its last change is settled (the rule hashes are
        stored by). Rows whose file is not cacheable, or changed since it was hashed,
        are left out: the caller reads those itself.
        """
        slots = {row: k for k, row in enumerate(self.rows)}
        digests: dict[int, int] = {}
        updates: list[tuple[bytes, bytes, bytes]] = []
        for row in rows:
            slot = slots.get(row)
            if slot is None:
                continue
            phash, dhash, known, flags = (int(v) for v in self.results[row])
            if known:
                digests[row] = known
                continue
            identity, path = self.identities[slot], self.names[row]
            started_ns = time.time_ns()
            if _stat_identity(path) != identity:
                continue
            try:
                with open(path, "rb") as file:
                    data = file.read()
            except OSError:
                continue
            if _stat_identity(path) != identity:
                continue
            digest = bytes_digest(data)
            digests[row] = digest
            self.results[row, 2] = digest
            if _settled(identity, started_ns):
                old = identity + RESULT.pack(phash, dhash, known, flags)
                new = identity + RESULT.pack(phash, dhash, digest, flags)
                updates.append((self.keys[slot], old, new))
        self.store._replace_records(updates, self.context)
        return digests

    def thumbnails(
        self,
        rows: Sequence[int],
        compute: Callable[[list[int]], list[bytes | None]],
        version: str,
    ) -> list[bytes | None]:
        """Each row's thumbnail from the ``thumbs`` table, or from ``compute`` and stored.

        For the verified audit's tiny-photo net (:mod:`leakaudit._registration`),
        which decodes every tiny image again: a second audit of unchanged files
        reads the thumbnails instead. A value is served when it was stored under
        the identity the row was hashed under and under this ``version`` (the
        hash context and what the caller names its own code by), so a changed
        file, decoding or thumbnail never gets an old value. The rest are asked
        of ``compute`` (rows in order), whose values are stored by the rules
        hashes are stored by: the file kept that identity while it was read, and
        its last change is settled.

        Parameters
        ----------
        rows : sequence of int
            Table rows (any: rows that are not cacheable files are computed).
        compute : callable
            ``compute(rows) -> values``: bytes (``b""`` for "none": still a
            value, and stored), or None where nothing can be said now (a read
            failed): returned, never stored.
        version : str
            Names the code that computes the values.

        Returns
        -------
        list of bytes or None
            One value per row.
        """
        context = _side_context(self.context, version)
        slots = {row: k for k, row in enumerate(self.rows)}
        wanted = [slots[row] for row in rows if row in slots]
        served = self.store._lookup_side(
            "thumbs",
            [self.keys[k] for k in wanted],
            [self.identities[k] for k in wanted],
            context,
        )
        known: dict[int, bytes | None] = {self.rows[wanted[i]]: v for i, v in served.items()}
        missing = [row for row in rows if row not in known]
        if missing:
            started_ns = time.time_ns()
            before = {row: _stat_identity(self.names[row]) for row in missing if row in slots}
            values = compute(missing)
            new: list[tuple[bytes, bytes]] = []
            for row, value in zip(missing, values, strict=True):
                known[row] = value
                slot = slots.get(row)
                if value is None or slot is None:
                    continue
                identity = self.identities[slot]
                if before[row] == identity and _storable(self.names[row], identity, started_ns):
                    new.append((self.keys[slot], identity + value))
            self.store._store_side("thumbs", new, context)
        return [known[row] for row in rows]


def _side_context(context: int, version: str) -> int:
    """The key of a side table's values: the hash context and the version of their code."""
    text = repr((context, version))
    return int.from_bytes(
        hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True
    )


def _turned_by_row(fresh: HashTable, misses: Sequence[int]) -> dict[int, bytes]:
    """The packed orientation pairs of freshly hashed rows, by row of the whole table."""
    entries = fresh.orientations
    if entries is None or not len(entries):
        return {}
    pairs = np.stack([entries.phash, entries.dhash], axis=1).astype("<u8")
    bounds = np.flatnonzero(np.diff(entries.owner)) + 1
    starts = np.concatenate([[0], bounds]).tolist()
    stops = np.concatenate([bounds, [len(entries)]]).tolist()
    return {
        misses[int(entries.owner[a])]: pairs[a:b].tobytes()
        for a, b in zip(starts, stops, strict=True)
    }


def _orientations(*parts: dict[int, bytes]) -> OrientationHashes:
    """One :class:`OrientationHashes` from packed pairs by row (rows ascending, order kept)."""
    pieces = []
    for part in parts:
        rows = list(part)
        pairs = np.frombuffer(b"".join(part.values()), dtype="<u8").reshape(-1, 2)
        counts = [len(part[row]) // TURNED_PAIR.size for row in rows]
        owner = np.repeat(np.asarray(rows, dtype=np.int64), counts)
        pieces.append(
            OrientationHashes(owner, pairs[:, 0].astype(np.uint64), pairs[:, 1].astype(np.uint64))
        )
    return OrientationHashes.merge(pieces)


def hash_sources_with_files(
    sources: Sequence[ImageSource],
    *,
    cache: CacheSpec,
    options: DecodeOptions,
    workers: int | None,
    progress: bool | None,
    on_error: str,
    dihedral: bool = False,
    crop_entries: bool = False,
) -> tuple[HashTable, CachedFiles | None]:
    """:func:`hash_sources_cached`, plus what it knows of the files (None: uncached).

    One function on purpose: the lookup, the hashing of the misses and the
    storing of their entries share the rows, keys and identities of one batch,
    and splitting them would pass all of that between the parts.
    """
    store = resolve_cache(cache)
    if store is None:
        table = hash_sources(
            sources,
            decode=options,
            workers=workers,
            progress=progress,
            on_error=on_error,
            dihedral=dihedral,
            crop_entries=crop_entries,
        )
        return table, None
    check_choice("on_error", on_error, ON_ERROR_CHOICES)
    if not isinstance(options, DecodeOptions):
        raise TypeError(f"options must be a DecodeOptions; got {describe(options)}.")
    check_bool("dihedral", dihedral)
    check_bool("crop_entries", crop_entries)
    if isinstance(sources, (str, bytes, bytearray, os.PathLike, Image.Image)):
        raise TypeError(
            "sources must be a sequence of paths, bytes or PIL images; "
            f"got a single {type(sources).__name__}. Wrap it in a list."
        )
    items = list(sources)
    n = len(items)
    if set(map(type, items)) <= {str}:  # the audits' case: no check per item
        names = cast("list[str]", items)
        file_rows: Sequence[int] = range(n)
    else:
        for index, item in enumerate(items):
            _check_source(item, index)
        names = [source_name(item, i) for i, item in enumerate(items)]
        file_rows = [
            i
            for i, item in enumerate(items)
            if isinstance(item, (str, os.PathLike)) and isinstance(os.fspath(item), str)
        ]
    context = hash_context(options, crop_entries=crop_entries)

    # Stat every file; the cacheable ones (regular files) get a key and an identity.
    rows, keys, identities = _identify(names, file_rows)
    found = store._lookup(keys, b"".join(identities), context)
    hit = found.hit
    turned: dict[int, bytes] = {}
    if dihedral:
        # A dihedral run also needs each file's orientation hashes (cached failures
        # have none); a file without them is hashed again, its entry kept.
        turned = store._lookup_turned(keys, identities, context)
        complete = np.array([k in turned or k in found.errors for k in range(len(keys))])
        hit = hit & complete.astype(np.bool_)

    cached_rows = np.asarray(rows, dtype=np.intp)
    results = np.zeros((n, 4), dtype=np.uint64)  # phash, dhash, digest, flags
    results[cached_rows] = found.results
    valid = np.zeros(n, dtype=np.bool_)
    valid[cached_rows[hit]] = True
    errors = {rows[k]: reason for k, reason in found.errors.items() if hit[k]}
    valid[list(errors)] = False
    served = np.zeros(n, dtype=np.bool_)
    served[cached_rows[hit]] = True
    misses = np.flatnonzero(~served).tolist()

    started_ns = time.time_ns()
    fresh = hash_sources(
        [items[i] for i in misses],
        decode=options,
        workers=workers,
        progress=progress,
        on_error="ignore",
        dihedral=dihedral,
        crop_entries=crop_entries,
    )
    if misses:
        at = np.asarray(misses, dtype=np.intp)
        results[at, 0] = fresh.phash
        results[at, 1] = fresh.dhash
        results[at, 2] = fresh.digest
        results[at, 3] = fresh.low_information.astype(np.uint64) * LOW_INFORMATION
        valid[at] = fresh.valid
        for k, message in fresh.errors.items():
            errors[misses[k]] = message

    fresh_turned = _turned_by_row(fresh, misses) if dihedral else {}
    packed_results = results.astype("<u8", copy=False)
    new_rows: list[tuple[bytes, bytes, str | None]] = []
    new_turned: list[tuple[bytes, bytes]] = []
    for slot in np.flatnonzero(~hit).tolist():
        row, before = rows[slot], identities[slot]
        reason = errors.get(row)
        if reason is not None and not _cacheable_failure(reason):
            continue
        if not _storable(names[row], before, started_ns):
            continue  # changed while (or just before) it was read: hash it again next time
        if not found.hit[slot]:  # an entry served but for its orientations is kept as it is
            new_rows.append((keys[slot], before + packed_results[row].tobytes(), reason))
        if dihedral and reason is None:
            new_turned.append((keys[slot], before + fresh_turned.get(row, b"")))
    store._store(new_rows, context)
    store._store_turned(new_turned, context)

    low_information = (results[:, 3] & LOW_INFORMATION).astype(np.bool_)
    table = HashTable(
        sources=names,
        phash=results[:, 0].copy(),
        dhash=results[:, 1].copy(),
        # Only low-information rows carry their digest (an uncached run computes no other).
        digest=np.where(low_information, results[:, 2], np.uint64(0)),
        low_information=low_information,
        valid=valid,
        errors=dict(sorted(errors.items())),
    )
    if dihedral:
        table.orientations = _orientations(
            {rows[k]: turned[k] for k in np.flatnonzero(hit).tolist() if k in turned},
            fresh_turned,
        )
    apply_on_error(
        table.errors, on_error, total=len(names), name_of=names.__getitem__, stacklevel=3
    )
    files = CachedFiles(store, context, names, rows, keys, identities, results)
    return table, files
