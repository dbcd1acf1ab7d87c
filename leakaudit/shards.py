"""Hash shards: the hashes of a dataset as Parquet files that any engine can write.

Hashing is the expensive, parallel part of an audit; grouping needs only the
hashes. A folder of Parquet *hash shards* is the hand-over between the two: Ray
(:mod:`leakaudit.adapters.ray`), Spark, Dask, ``datasets.Dataset.map``, or
``leakaudit scan --hashes-out DIR`` write them, and :func:`audit_hash_shards`
(``leakaudit group DIR``) groups them into the same :class:`LeakageReport`
every other entry point returns.

The schema
----------
One row per image. Required columns:

``id`` (string)
    Unique across all shards of a folder (a duplicate is an error naming both
    files): what the image is called in the report, and how a re-split finds
    its row again.
``split`` (string, null allowed)
    The split the image belongs to; rows without one take no part in cleaning.
``phash``, ``dhash`` (uint64, int64 or 16-character hex string)
    The 64-bit hashes (:mod:`leakaudit.hashing` bit order). ``uint64`` is what
    leakaudit writes; ``int64`` (engines without unsigned types: Spark, Java)
    is read as the same 64 bits; hex strings are what the CSV and JSON exports
    hold. Null only in rows with an ``error``.
``error`` (string, null when the image was read)
    Why the image could not be read. Such rows stay in the report as
    unreadable images (never dropped); their hashes are ignored. An empty
    string counts as null.

Optional columns:

``path`` (string, null allowed)
    The image file. Only when the caller names an images root
    (``audit_hash_shards(images_root=)``, ``--images-root``) and the file
    resolves inside it, verification decodes it again (``verify="auto"``) and
    the report's thumbnails show it; a path is never opened otherwise. The
    report's ``path`` column shows it (else the ``id``).
``low_information`` (bool)
    Blank or near-flat images, which link only to byte-identical copies (by
    ``digest``); such a row must have a ``digest``. Absent: no row is.
``digest`` (uint64, int64 or hex string, null allowed)
    BLAKE2b-64 of the file's bytes (what :class:`~leakaudit.hashing.HashTable`
    holds for low-information images, and the report's ``digest`` column for
    byte copies). Null or 0: not computed.
``orientation_phash``, ``orientation_dhash`` (list of uint64 or int64)
    Both or neither: each row's entries of
    :class:`~leakaudit.hashing.OrientationHashes` (canonical orientation
    first; hashed with ``crop_entries`` the crop and rotation entries after
    them), for dihedral matching and the verification's candidate net. The
    shards store no kinds: a row's are read from its layout
    (:func:`~leakaudit.hashing.entry_kinds`).
    A row's list is empty or null (it then matches on its own hashes, with a
    :class:`ShardWarning`), or 1 to 8 orientations, with or without the crop
    and rotation entries; any other length, or a null hash, is an error.
``phash_hex``, ``dhash_hex`` (string)
    Written beside ``phash`` and ``dhash`` as 16 lowercase hex characters, the
    form of the CSV exports, for engines and tools without unsigned 64-bit
    integers. Read only when ``phash``/``dhash`` are absent.

The text columns (``id``, ``split``, ``error``, ``path``) may also be binary
(``binary``, ``large_binary``), read as UTF-8 with ``surrogateescape``: leakaudit
writes a column that way when one of its values is not valid UTF-8 (a file name
made of other bytes, which Python holds as lone surrogates and Arrow strings
cannot), so the name reads back as the very path it was.

Any other column is ignored. leakaudit also records how the hashes were made
(decoding options, dihedral entries) in the Parquet schema metadata under the
key ``leakaudit``; shards whose records disagree are refused. The record
says how the hashes were made; limits on reading (``max_file_bytes``,
``max_pixels``, ``max_decode_pixels``) are never taken from it.

Reading a folder takes every ``*.parquet`` file below it (recursively, names
starting with ``.`` or ``_`` skipped, as Spark's ``_SUCCESS`` and temporary
files), in sorted order of their relative paths. Hashes are loaded as
``uint64`` numpy arrays (:class:`HashShards`), never as Python objects per row.

``pyarrow`` is needed to read and write shards: ``pip install
'leakaudit-vision[parquet]'``. It is imported only by the functions that use it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._text import printable
from leakaudit._validation import check_choice, check_int, describe
from leakaudit.audit import VerifySpec, audit_hash_table, decode_parameters, source_digest
from leakaudit.frames import hash_values_from_frame
from leakaudit.hashing import (
    MAX_ORIENTATIONS,
    N_EXTRA_ENTRIES,
    ON_ERROR_CHOICES,
    HashTable,
    OrientationHashes,
    apply_on_error,
    hashes_to_hex_arrow,
)
from leakaudit.loading import DecodeOptions, resolve_decode
from leakaudit.policy import DEFAULT_METHOD, ThresholdSpec, resolve_threshold
from leakaudit.report import LeakageReport
from leakaudit.safe_io import resolve_within
from leakaudit.verify import VerifyOptions

__all__ = [
    "OPTIONAL_SHARD_COLUMNS",
    "SHARD_COLUMNS",
    "SHARD_FORMAT",
    "SHARD_FORMAT_VERSION",
    "SHARD_METADATA_KEY",
    "HashShards",
    "ShardWarning",
    "audit_hash_shards",
    "check_new_shard_folder",
    "decode_options_of",
    "hash_shard_table",
    "hashing_metadata",
    "read_hash_shards",
    "require_pyarrow",
    "shard_files",
    "write_hash_shards",
]

#: The columns every hash shard has.
SHARD_COLUMNS: tuple[str, ...] = ("id", "split", "phash", "dhash", "error")
#: The columns a shard may have besides (see the module docstring).
OPTIONAL_SHARD_COLUMNS: tuple[str, ...] = (
    "path",
    "low_information",
    "digest",
    "phash_hex",
    "dhash_hex",
    "orientation_phash",
    "orientation_dhash",
)
#: The Parquet schema metadata key under which leakaudit records how the hashes were made.
SHARD_METADATA_KEY = "leakaudit"
SHARD_FORMAT = "leakaudit-hash-shards"
SHARD_FORMAT_VERSION = 1

#: DecodeOptions fields that bound what is read: never taken from a shard's metadata.
_READ_LIMITS = ("max_file_bytes", "max_pixels", "max_decode_pixels")
_INSTALL_HINT = "pip install 'leakaudit-vision[parquet]'"
_ORIENTATION_COLUMNS = ("orientation_phash", "orientation_dhash")
#: Rows per file :func:`write_hash_shards` writes (about 40 MB of Parquet with entries).
_ROWS_PER_SHARD = 1_000_000


class ShardWarning(UserWarning):
    """Shard rows taken as they could be: paths outside the images root, rows without entries."""


def require_pyarrow() -> Any:
    """Import and return ``pyarrow``, or raise ImportError naming the extra to install."""
    try:
        import pyarrow
        import pyarrow.parquet  # the submodule is what reads and writes
    except ImportError as exc:
        raise ImportError(
            f"reading and writing hash shards needs pyarrow: {_INSTALL_HINT}"
        ) from exc
    return pyarrow


# ---------------------------------------------------------------------- metadata


def hashing_metadata(
    decode: DecodeOptions, *, dihedral: bool, crop_entries: bool = False
) -> dict[str, Any]:
    """How hashes were made, as shards record it (JSON-ready).

    ``crop_entries`` (the hashing choice, see
    :func:`~leakaudit.hashing.hash_sources`) is recorded where the record has
    always kept it, as ``decode["crop_entries"]``.

    Examples
    --------
    >>> meta = hashing_metadata(DecodeOptions(), dihedral=True, crop_entries=True)
    >>> meta["dihedral"], meta["decode"]["min_side"], meta["decode"]["crop_entries"]
    (True, 64, True)
    """
    fields = {
        f.name: list(value) if isinstance(value, tuple) else value
        for f in dataclasses.fields(decode)
        for value in [getattr(decode, f.name)]
    }
    fields["crop_entries"] = bool(crop_entries or decode.crop_entries)
    return {"dihedral": bool(dihedral), "decode": fields}


def decode_options_of(hashing: Mapping[str, Any] | None) -> DecodeOptions | None:
    """The :class:`DecodeOptions` a :func:`hashing_metadata` record describes (None: unknown).

    Fields the record lacks take their defaults; fields this version does not
    know are ignored, and so is ``crop_entries`` (a hashing choice, not a
    decoding one: the record keeps it). The limits on what is read (``max_file_bytes``,
    ``max_pixels``, ``max_decode_pixels``) always take their defaults: a
    record is data, and data never decides how much of a file is read.

    Examples
    --------
    >>> decode_options_of(hashing_metadata(DecodeOptions(min_side=32), dihedral=False)).min_side
    32
    >>> big = hashing_metadata(DecodeOptions(max_file_bytes=10**13), dihedral=False)
    >>> decode_options_of(big).max_file_bytes == DecodeOptions().max_file_bytes
    True
    >>> decode_options_of(None) is None
    True
    """
    if not hashing or not isinstance(hashing.get("decode"), Mapping):
        return None
    known = {f.name for f in dataclasses.fields(DecodeOptions)} - set(_READ_LIMITS)
    known.discard("crop_entries")
    values: dict[str, Any] = {}
    for name, value in hashing["decode"].items():
        if name in known:
            values[name] = tuple(value) if isinstance(value, list) else value
    try:
        return DecodeOptions(**values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the shards' recorded decoding options are invalid: {error}") from None


def _metadata_bytes(hashing: Mapping[str, Any] | None) -> bytes:
    from leakaudit import __version__

    record: dict[str, Any] = {
        "format": SHARD_FORMAT,
        "version": SHARD_FORMAT_VERSION,
        "leakaudit": __version__,
    }
    if hashing is not None:
        record["hashing"] = dict(hashing)
    return json.dumps(record, sort_keys=True).encode("utf-8")


def _hashing_of(schema: Any, label: str) -> dict[str, Any] | None:
    """The ``hashing`` record of a shard's schema metadata (None when not written by us)."""
    metadata = schema.metadata or {}
    raw = metadata.get(SHARD_METADATA_KEY.encode())
    if raw is None:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        raise ValueError(
            f"{label}: the {SHARD_METADATA_KEY!r} schema metadata must be JSON; "
            f"got {describe(raw)}."
        ) from None
    if not isinstance(record, dict) or record.get("format") != SHARD_FORMAT:
        return None
    hashing = record.get("hashing")
    return dict(hashing) if isinstance(hashing, dict) else None


# ------------------------------------------------------------------------ writing


def _uint64_array(pa: Any, values: NDArray[np.uint64], present: NDArray[np.bool_] | None) -> Any:
    values = np.ascontiguousarray(values, dtype=np.uint64)
    if present is None or present.all():
        return pa.array(values, type=pa.uint64())
    return pa.array(values, type=pa.uint64(), mask=~np.asarray(present, dtype=bool))


def _text_array(pa: Any, values: Sequence[Any]) -> Any:
    """A text column: ``string``, or ``binary`` when a value is not valid UTF-8.

    A file name that is not valid UTF-8 reaches Python as a str holding lone
    surrogates (``surrogateescape``), which no Arrow string can hold: the
    column is then written as the values' UTF-8 bytes with those surrogates
    turned back into the original bytes, which :func:`_strings` reads back to
    the same str.
    """
    texts = [None if v is None else str(v) for v in values]
    try:
        return pa.array(texts, type=pa.string())
    except UnicodeEncodeError:
        encoded = [None if t is None else t.encode("utf-8", "surrogateescape") for t in texts]
        return pa.array(encoded, type=pa.binary())


def _entry_lists(pa: Any, owner: NDArray[np.int64], values: NDArray[np.uint64], n: int) -> Any:
    counts = np.bincount(np.asarray(owner, dtype=np.int64), minlength=n)[:n]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    kind = pa.int32() if offsets[-1] < 2**31 else pa.int64()
    lists = pa.LargeListArray if kind == pa.int64() else pa.ListArray
    return lists.from_arrays(
        pa.array(offsets, type=kind), pa.array(np.asarray(values, dtype=np.uint64), pa.uint64())
    )


def hash_shard_table(
    table: HashTable,
    *,
    ids: Sequence[Any],
    split: Sequence[str | None],
    paths: Sequence[str | None] | None = None,
    digests: tuple[NDArray[np.uint64], NDArray[np.bool_]] | None = None,
    hashing: Mapping[str, Any] | None = None,
) -> Any:
    """Return a :class:`HashTable` as one ``pyarrow.Table`` in the shard schema.

    Parameters
    ----------
    table : HashTable
        The hashes; with ``orientations``, the entry columns are written too.
    ids : sequence of str
        One unique id per row.
    split : sequence of str or None
        One split per row.
    paths : sequence of str or None, optional
        The image files (the ``path`` column); omitted when None.
    digests : (values, present), optional
        Byte digests to record (``uint64`` values and where they are known);
        default: the table's digests of low-information rows.
    hashing : mapping, optional
        How the hashes were made (:func:`hashing_metadata`), recorded in the
        schema metadata.

    Returns
    -------
    pyarrow.Table

    Examples
    --------
    >>> from PIL import Image
    >>> from leakaudit.hashing import hash_sources
    >>> hashed = hash_sources([Image.new("L", (64, 64), 0), b"not an image"], on_error="ignore")
    >>> shard = hash_shard_table(hashed, ids=["a", "b"], split=["train", "test"])
    >>> shard.column_names[:5]
    ['id', 'split', 'phash', 'dhash', 'error']
    >>> shard.column("error").to_pylist()
    [None, 'not a recognised image format']
    """
    pa = require_pyarrow()
    n = len(table)
    for name, column in (("ids", ids), ("split", split), ("paths", paths)):
        if column is not None and len(column) != n:
            raise ValueError(
                f"{name} must have one value per row (length {n}); got length {len(column)}."
            )
    valid = np.asarray(table.valid, dtype=bool)
    low = np.asarray(table.low_information, dtype=bool) & valid
    if digests is None:
        digest_values, digest_present = np.asarray(table.digest, dtype=np.uint64), low
    else:
        digest_values = np.asarray(digests[0], dtype=np.uint64)
        digest_present = np.asarray(digests[1], dtype=bool) & valid
    errors: list[str | None] = [None] * n
    for row, reason in table.errors.items():
        errors[row] = reason
    columns: dict[str, Any] = {
        "id": _text_array(pa, ids),
        "split": _text_array(pa, split),
        "phash": _uint64_array(pa, table.phash, valid),
        "dhash": _uint64_array(pa, table.dhash, valid),
        "error": _text_array(pa, errors),
    }
    if paths is not None:
        columns["path"] = _text_array(pa, paths)
    columns["low_information"] = pa.array(low, type=pa.bool_())
    columns["digest"] = _uint64_array(pa, digest_values, digest_present)
    columns["phash_hex"] = hashes_to_hex_arrow(table.phash, valid)
    columns["dhash_hex"] = hashes_to_hex_arrow(table.dhash, valid)
    if table.orientations is not None:
        entries = table.orientations
        columns["orientation_phash"] = _entry_lists(pa, entries.owner, entries.phash, n)
        columns["orientation_dhash"] = _entry_lists(pa, entries.owner, entries.dhash, n)
    schema = pa.schema(
        [pa.field(name, column.type) for name, column in columns.items()],
        metadata={SHARD_METADATA_KEY: _metadata_bytes(hashing)},
    )
    return pa.Table.from_arrays(list(columns.values()), schema=schema)


def shard_files(folder: str | os.PathLike[str]) -> list[Path]:
    """Every hash shard of ``folder``: its ``*.parquet`` files, recursively, sorted.

    Names starting with ``.`` or ``_`` (in the file's name or any folder below
    ``folder``) are skipped: temporary files, Spark's ``_SUCCESS`` and
    ``_temporary``. A path to one ``.parquet`` file is that file alone.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("b.parquet", "a.parquet", "_SUCCESS", ".part.parquet"):
    ...     _ = (root / name).write_bytes(b"")
    >>> [p.name for p in shard_files(root)]
    ['a.parquet', 'b.parquet']
    """
    root = Path(folder)
    if root.is_file():
        return [root]
    if not root.exists():
        raise FileNotFoundError(f"hash shard folder not found: {root}")
    if not root.is_dir():
        raise ValueError(f"hash shards must be a folder of .parquet files; got {root}.")
    found = []
    for path in root.rglob("*.parquet"):
        relative = path.relative_to(root).parts
        if any(part.startswith((".", "_")) for part in relative) or not path.is_file():
            continue
        found.append((path.relative_to(root).as_posix(), path))
    return [path for _, path in sorted(found)]


def check_new_shard_folder(folder: str | os.PathLike[str], *, option: str = "folder") -> Path:
    """Raise ``FileExistsError`` when ``folder`` already holds hash shards; return it.

    New shards are never written next to (or over) existing ones: a folder is
    one run's hashes, so mixing two would repeat ids.
    """
    target = Path(folder)
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{option} must be a folder; {target} is a file")
    if target.is_dir():
        existing = shard_files(target)
        if existing:
            raise FileExistsError(
                f"{option} {target} already holds hash shards ({existing[0].name}"
                + (f" and {len(existing) - 1} more" if len(existing) > 1 else "")
                + "); write to a new or empty folder (shard files are never overwritten)"
            )
    return target


def _write_new_file(target: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write a file that must not exist yet: a temporary sibling, then a hard link.

    ``os.link`` fails when the target exists, so no file is ever replaced, and
    a reader never sees a half-written shard.
    """
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=".leakaudit-", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        try:
            os.link(temporary, target)
        except FileExistsError:
            raise FileExistsError(
                f"{target} already exists; shard files are never overwritten"
            ) from None
        except OSError:  # a file system without hard links
            if target.exists():
                raise FileExistsError(
                    f"{target} already exists; shard files are never overwritten"
                ) from None
            os.rename(temporary, target)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def write_hash_shards(
    table: HashTable,
    folder: str | os.PathLike[str],
    *,
    ids: Sequence[Any],
    split: Sequence[str | None],
    paths: Sequence[str | None] | None = None,
    digests: tuple[NDArray[np.uint64], NDArray[np.bool_]] | None = None,
    hashing: Mapping[str, Any] | None = None,
    rows_per_shard: int = _ROWS_PER_SHARD,
) -> list[Path]:
    """Write a :class:`HashTable` to ``folder`` as hash shards; return the files written.

    The files are ``part-00000.parquet``, ``part-00001.parquet``, ... of at
    most ``rows_per_shard`` rows (one file, with the schema, when there are no
    rows). ``folder`` is created when missing; a folder that already holds
    shards is refused (``FileExistsError``), and no existing file is ever
    replaced.

    Parameters
    ----------
    table, ids, split, paths, digests, hashing
        As in :func:`hash_shard_table`.
    folder : path-like
        Where to write.
    rows_per_shard : int, default 1_000_000
        Rows per file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> from leakaudit.hashing import hash_sources
    >>> hashed = hash_sources([Image.effect_noise((64, 64), 60)] * 3)
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "hashes"
    >>> files = write_hash_shards(hashed, folder, ids=["a", "b", "c"], split=["train"] * 3,
    ...                           rows_per_shard=2)
    >>> [f.name for f in files]
    ['part-00000.parquet', 'part-00001.parquet']
    >>> len(read_hash_shards(folder))
    3
    """
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    rows_per_shard = check_int("rows_per_shard", rows_per_shard, 1)
    arrow = hash_shard_table(
        table, ids=ids, split=split, paths=paths, digests=digests, hashing=hashing
    )
    target = check_new_shard_folder(folder)
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    starts = range(0, max(arrow.num_rows, 1), rows_per_shard)
    for number, start in enumerate(starts):
        part = arrow.slice(start, rows_per_shard)
        path = target / f"part-{number:05d}.parquet"

        def write(handle: IO[bytes], part: Any = part) -> None:
            pq.write_table(part, pa.PythonFile(handle, mode="w"))

        _write_new_file(path, write)
        written.append(path)
    return written


# ------------------------------------------------------------------------ reading


def _is_text(pa: Any, kind: Any) -> bool:
    return bool(
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or getattr(pa.types, "is_string_view", lambda _: False)(kind)
    )


def _decoded(pa: Any, column: Any) -> Any:
    """A dictionary-encoded or string-view column as plain values."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        return column.cast(kind.value_type)
    if getattr(pa.types, "is_string_view", lambda _: False)(kind):
        return column.cast(pa.string())
    return column


def _is_binary(pa: Any, kind: Any) -> bool:
    return bool(
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or getattr(pa.types, "is_binary_view", lambda _: False)(kind)
    )


def _strings(pa: Any, column: Any, name: str, label: str, *, nullable: bool) -> NDArray[np.object_]:
    column = _decoded(pa, column)
    if _is_binary(pa, column.type):
        # Text that is not valid UTF-8 (file names, as _text_array writes them):
        # the bytes decoded as os.fsdecode does on POSIX, so a name comes back
        # as the str Python gave it, lone surrogates included.
        raw = column.to_pylist()
        if not nullable and column.null_count:
            row = next(i for i, value in enumerate(raw) if value is None)
            raise ValueError(f"{label}: column {name!r} must not be null; row {row} is.")
        decoded: NDArray[np.object_] = np.empty(len(raw), dtype=object)
        decoded[:] = [
            None if value is None else bytes(value).decode("utf-8", "surrogateescape")
            for value in raw
        ]
        return decoded
    if not _is_text(pa, column.type):
        raise ValueError(
            f"{label}: column {name!r} must hold strings; got type {column.type}."
            + (" Cast the ids to strings when writing the shards." if name == "id" else "")
        )
    values: NDArray[np.object_] = np.asarray(column.to_numpy(zero_copy_only=False), dtype=object)
    if not nullable and column.null_count:
        row = int(np.flatnonzero(pd.isna(values))[0])
        raise ValueError(f"{label}: column {name!r} must not be null; row {row} is.")
    return values


def _hash_values(
    pa: Any, column: Any, name: str, label: str
) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """A hash column as ``(uint64 values, present)``: unsigned, signed or hex."""
    import pyarrow.compute as pc

    column = _decoded(pa, column)
    kind = column.type
    present = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_uint64(kind) or pa.types.is_int64(kind):
        filled = pc.fill_null(column, 0).to_numpy()
        values = np.ascontiguousarray(filled).view(np.uint64).copy()
        return values, present
    if _is_text(pa, kind):
        texts = pd.Series(column.to_numpy(zero_copy_only=False), dtype=object)
        try:
            values, parsed = hash_values_from_frame(pd.DataFrame({name: texts}), name)
        except (ValueError, TypeError) as error:
            raise ValueError(f"{label}: {error}") from None
        return values, parsed
    raise ValueError(
        f"{label}: column {name!r} must be uint64, int64 or 16-character hex strings; "
        f"got type {kind}."
    )


@dataclass(frozen=True)
class _Part:
    ids: NDArray[np.object_]
    split: NDArray[np.object_]
    phash: NDArray[np.uint64]
    dhash: NDArray[np.uint64]
    errors: dict[int, str]
    paths: NDArray[np.object_] | None
    low_information: NDArray[np.bool_]
    digest: NDArray[np.uint64]
    has_digest: NDArray[np.bool_]
    entry_counts: NDArray[np.int64] | None
    entry_phash: NDArray[np.uint64] | None
    entry_dhash: NDArray[np.uint64] | None
    hashing: dict[str, Any] | None


def _entries(
    pa: Any, column: Any, name: str, label: str, ids: NDArray[np.object_]
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    kind = column.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not (
        pa.types.is_uint64(kind.value_type) or pa.types.is_int64(kind.value_type)
    ):
        raise ValueError(
            f"{label}: column {name!r} must be a list of uint64 (or int64); got type {kind}."
        )
    lists = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    counts = np.asarray(lists.value_lengths().fill_null(0).to_numpy(), dtype=np.int64)
    flat = lists.flatten()
    if flat.null_count:
        at = int(np.flatnonzero(~np.asarray(flat.is_valid().to_numpy(zero_copy_only=False)))[0])
        row = int(np.searchsorted(np.cumsum(counts), at, side="right"))
        raise ValueError(
            f"{label}: column {name!r} must not hold null hashes; row {row} (id {ids[row]!r}) does."
        )
    values = np.ascontiguousarray(flat.to_numpy(zero_copy_only=False)).view(np.uint64).copy()
    # An empty or null list is no entries (the row then matches on its own hashes, see
    # _combine); any other length must be one hashing writes: 1-8 orientations, then
    # with crop entries the N_EXTRA_ENTRIES after them.
    allowed = ((counts >= 1) & (counts <= MAX_ORIENTATIONS)) | (
        (counts > N_EXTRA_ENTRIES) & (counts <= N_EXTRA_ENTRIES + MAX_ORIENTATIONS)
    )
    bad = np.flatnonzero((counts != 0) & ~allowed)
    if bad.size:
        row = int(bad[0])
        raise ValueError(
            f"{label}: column {name!r} row {row} (id {ids[row]!r}) has {counts[row]} entries; "
            f"a row has none, 1 to {MAX_ORIENTATIONS} (orientations), or those and "
            f"{N_EXTRA_ENTRIES} crop and rotation entries."
        )
    return counts, values


def _check_unique_columns(names: Sequence[str], label: str) -> None:
    """One clear line for a column name that appears twice (pyarrow's own error is internals)."""
    repeated = pd.Index(list(names)).duplicated()
    if repeated.any():
        name = names[int(np.flatnonzero(repeated)[0])]
        raise ValueError(
            f"{label}: column {printable(str(name))!r} appears {list(names).count(name)} times; "
            "a hash shard names each column once."
        )


def _parse_part(table: Any, label: str) -> _Part:
    """Validate one shard's table and turn it into compact arrays."""
    pa = require_pyarrow()
    _check_unique_columns(table.column_names, label)
    names = set(table.column_names)
    missing = [c for c in ("id", "split") if c not in names]
    missing += [c for c in ("phash", "dhash") if c not in names and f"{c}_hex" not in names]
    missing += [c for c in ("error",) if c not in names]
    if missing:
        raise ValueError(
            f"{label}: missing column(s) {', '.join(missing)}; a hash shard has columns "
            f"{', '.join(SHARD_COLUMNS)} (see leakaudit.shards); "
            f"got {', '.join(table.column_names)}."
        )
    n = table.num_rows
    ids = _strings(pa, table.column("id"), "id", label, nullable=False)
    split = _strings(pa, table.column("split"), "split", label, nullable=True)
    error_text = _strings(pa, table.column("error"), "error", label, nullable=True)
    failed = np.flatnonzero(~pd.isna(error_text) & (error_text != ""))
    errors = {int(row): str(error_text[row]) for row in failed.tolist()}
    valid = np.ones(n, dtype=bool)
    valid[failed] = False
    hashes: dict[str, NDArray[np.uint64]] = {}
    for name in ("phash", "dhash"):
        source = name if name in names else f"{name}_hex"
        values, present = _hash_values(pa, table.column(source), source, label)
        absent = np.flatnonzero(valid & ~present)
        if absent.size:
            raise ValueError(
                f"{label}: row {int(absent[0])} (id {ids[absent[0]]!r}) has no {source} and no "
                "error; a row without hashes must say why in 'error'."
            )
        values[~valid] = 0
        hashes[name] = values
    paths = None
    if "path" in names:
        paths = _strings(pa, table.column("path"), "path", label, nullable=True)
    low = np.zeros(n, dtype=bool)
    if "low_information" in names:
        column = table.column("low_information")
        if not pa.types.is_boolean(column.type):
            raise ValueError(
                f"{label}: column 'low_information' must be bool; got type {column.type}."
            )
        low = np.asarray(column.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
        low &= valid
    digest = np.zeros(n, dtype=np.uint64)
    has_digest = np.zeros(n, dtype=bool)
    if "digest" in names:
        digest, has_digest = _hash_values(pa, table.column("digest"), "digest", label)
        # 0 is "not computed", as in HashTable (Dataset.map writes it for every photo).
        has_digest &= valid & (digest != 0)
        digest[~has_digest] = 0
    blank = np.flatnonzero(low & ~has_digest)
    if blank.size:
        raise ValueError(
            f"{label}: row {int(blank[0])} (id {ids[blank[0]]!r}) is low_information without a "
            "digest; low-information images link only by their byte digest."
        )
    present_entries = [c for c in _ORIENTATION_COLUMNS if c in names]
    counts = entry_phash = entry_dhash = None
    if len(present_entries) == 1:
        raise ValueError(
            f"{label}: columns orientation_phash and orientation_dhash go together; "
            f"got only {present_entries[0]}."
        )
    if present_entries:
        counts, entry_phash = _entries(
            pa, table.column("orientation_phash"), "orientation_phash", label, ids
        )
        other, entry_dhash = _entries(
            pa, table.column("orientation_dhash"), "orientation_dhash", label, ids
        )
        if not np.array_equal(counts, other):
            row = int(np.flatnonzero(counts != other)[0])
            raise ValueError(
                f"{label}: orientation_phash and orientation_dhash must have one length per "
                f"row; row {row} (id {ids[row]!r}) has {counts[row]} and {other[row]}."
            )
    return _Part(
        ids=ids,
        split=split,
        phash=hashes["phash"],
        dhash=hashes["dhash"],
        errors=errors,
        paths=paths,
        low_information=low,
        digest=digest,
        has_digest=has_digest,
        entry_counts=counts,
        entry_phash=entry_phash,
        entry_dhash=entry_dhash,
        hashing=_hashing_of(table.schema, label),
    )


@dataclass(frozen=True, eq=False)
class HashShards:
    """The rows of a folder of hash shards, as compact arrays.

    Attributes
    ----------
    ids : numpy.ndarray of object
        Each row's id (str), unique.
    split_codes : numpy.ndarray of int32
        Each row's split as a position in ``split_names``; -1 for none.
    split_names : tuple of str
        The splits, in order of first appearance.
    phash, dhash : numpy.ndarray of uint64
        The hashes (0 in unreadable rows).
    digest : numpy.ndarray of uint64
        Byte digests, 0 where ``has_digest`` is False.
    has_digest : numpy.ndarray of bool
    low_information : numpy.ndarray of bool
    valid : numpy.ndarray of bool
        False in rows with an error.
    errors : dict of int to str
        Row -> why its image could not be read.
    paths : numpy.ndarray of object or None
        The ``path`` column (str or None per row), when the shards have one.
    orientations : OrientationHashes or None
        The entry columns, when the shards have them.
    files : tuple of str
        Where the rows came from (file paths, or block names), in order.
    file_rows : numpy.ndarray of int64
        Rows of each of ``files``.
    hashing : dict or None
        How the hashes were made (:func:`hashing_metadata`), when recorded.
    """

    ids: NDArray[np.object_]
    split_codes: NDArray[np.int32]
    split_names: tuple[str, ...]
    phash: NDArray[np.uint64]
    dhash: NDArray[np.uint64]
    digest: NDArray[np.uint64]
    has_digest: NDArray[np.bool_]
    low_information: NDArray[np.bool_]
    valid: NDArray[np.bool_]
    errors: dict[int, str]
    paths: NDArray[np.object_] | None
    orientations: OrientationHashes | None
    files: tuple[str, ...]
    file_rows: NDArray[np.int64]
    hashing: dict[str, Any] | None

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def split(self) -> NDArray[np.object_]:
        """Each row's split name (None for none)."""
        lookup = np.array([*self.split_names, None], dtype=object)
        picked: NDArray[np.object_] = lookup[self.split_codes]
        return picked

    @property
    def names(self) -> list[str]:
        """What the report calls each row: its ``path`` when it has one, else its ``id``."""
        if self.paths is None:
            return [str(i) for i in self.ids]
        return [
            str(p) if p is not None else str(i) for p, i in zip(self.paths, self.ids, strict=True)
        ]

    def file_of(self, row: int) -> str:
        """The file (or block) row ``row`` came from."""
        ends = np.cumsum(self.file_rows)
        return self.files[int(np.searchsorted(ends, row, side="right"))]

    def hash_table(self) -> HashTable:
        """The rows as the :class:`HashTable` the grouping takes."""
        low = self.low_information & self.valid
        return HashTable(
            sources=self.names,
            phash=self.phash,
            dhash=self.dhash,
            digest=np.where(low & self.has_digest, self.digest, np.uint64(0)).astype(np.uint64),
            low_information=low,
            valid=self.valid,
            errors=dict(self.errors),
            orientations=self.orientations,
        )

    @classmethod
    def from_arrow(
        cls, tables: Sequence[Any], *, labels: Sequence[str] | None = None
    ) -> HashShards:
        """Validate ``pyarrow.Table`` s in the shard schema and combine them, in order.

        ``labels`` name each table in messages (default ``"block 0"``, ...).
        """
        names = list(labels) if labels is not None else [f"block {i}" for i in range(len(tables))]
        if len(names) != len(tables):
            raise ValueError(
                f"labels must name each table (length {len(tables)}); got length {len(names)}."
            )
        return _combine(
            [_parse_part(t, name) for t, name in zip(tables, names, strict=True)], names
        )


def _known(values: NDArray[Any] | None) -> NDArray[Any]:
    if values is None:  # pragma: no cover - callers check that every part has entries
        raise ValueError("a shard lacks its orientation entries.")
    return values


def _own_entries(
    entries: OrientationHashes,
    counts: NDArray[np.int64],
    phash: NDArray[np.uint64],
    dhash: NDArray[np.uint64],
    linkable: NDArray[np.bool_],
    place: Callable[[int], str],
) -> OrientationHashes:
    """Entries for rows that have none: their own hashes, so no row drops out of matching.

    A row that can link (valid, not low-information) with an empty or null
    entry list is matched on its own hashes, as its one entry, with one
    :class:`ShardWarning`. So that its copies among the rows with entries are
    found too (their entries are canonical orientations, which need not be the
    image as it is), those rows get their own hashes as one more entry when
    they lack them: the as-is orientation, one of the eight an entry stands
    for (rows with crop entries hold it already, as do rows with all eight).
    """
    missing = linkable & (counts == 0)
    if not missing.any():
        return entries
    first = int(np.flatnonzero(missing)[0])
    warnings.warn(
        f"{int(missing.sum())} shard row(s) have no orientation entries (the first: "
        f"{place(first)}): they match on their own hashes, and their flipped or rotated "
        "copies are not found.",
        ShardWarning,
        stacklevel=4,
    )
    add = missing.copy()
    partial = linkable & (counts >= 1) & (counts < MAX_ORIENTATIONS)
    if partial.any():
        # Rows that already hold their own hashes among their entries need no second copy.
        rows = entries.owner
        holds_own = np.zeros(len(counts), dtype=bool)
        holds_own[rows[(entries.phash == phash[rows]) & (entries.dhash == dhash[rows])]] = True
        add |= partial & ~holds_own
    extra = np.flatnonzero(add)
    return OrientationHashes.merge(
        [entries, OrientationHashes(owner=extra, phash=phash[extra], dhash=dhash[extra])]
    )


def _combine(parts: Sequence[_Part], labels: Sequence[str]) -> HashShards:
    if not parts:
        raise ValueError("no hash shards to combine.")
    with_entries = [part.entry_counts is not None for part in parts]
    if any(with_entries) and not all(with_entries):
        first = labels[with_entries.index(True)]
        other = labels[with_entries.index(False)]
        raise ValueError(
            f"shards must all have orientation columns or none; {first} has them, {other} does not."
        )
    hashing: dict[str, Any] | None = None
    hashing_label = ""
    for part, label in zip(parts, labels, strict=True):
        if part.hashing is None:
            continue
        if hashing is None:
            hashing, hashing_label = part.hashing, label
        elif part.hashing != hashing:
            raise ValueError(
                f"shards were hashed with different settings: {hashing_label} records {hashing}, "
                f"{label} records {part.hashing}. Group shards of one run only."
            )
    sizes = np.array([len(part.ids) for part in parts], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    ids = np.concatenate([part.ids for part in parts]).astype(object)

    def place(row: int) -> str:
        k = int(np.searchsorted(starts, row, side="right")) - 1
        return f"{labels[k]} (row {row - int(starts[k])})"

    duplicated = pd.Index(ids, dtype=object).duplicated()  # object: names need not be UTF-8
    if duplicated.any():
        repeat = int(np.flatnonzero(duplicated)[0])
        original = int(np.flatnonzero(ids == ids[repeat])[0])
        raise ValueError(
            f"ids must be unique across the shards; {ids[repeat]!r} is in {place(original)} "
            f"and in {place(repeat)}."
        )
    split = np.concatenate([part.split for part in parts]).astype(object)
    codes, uniques = pd.factorize(pd.Series(split, dtype=object), use_na_sentinel=True)
    errors: dict[int, str] = {}
    for part, start in zip(parts, starts.tolist(), strict=True):
        errors.update({start + row: reason for row, reason in part.errors.items()})
    with_paths = [part.paths is not None for part in parts]
    paths = None
    if any(with_paths):
        paths = np.concatenate(
            [
                part.paths if part.paths is not None else np.full(len(part.ids), None, object)
                for part in parts
            ]
        ).astype(object)
    valid = np.ones(len(ids), dtype=bool)
    if errors:
        valid[np.fromiter(errors, dtype=np.int64)] = False
    orientations = None
    phash = np.concatenate([part.phash for part in parts])
    dhash = np.concatenate([part.dhash for part in parts])
    low = np.concatenate([part.low_information for part in parts])
    if all(with_entries):
        counts = np.concatenate([_known(p.entry_counts) for p in parts])
        keep = np.repeat(valid, counts)  # an unreadable row's entries are not kept
        orientations = _own_entries(
            OrientationHashes(
                owner=np.repeat(np.arange(len(ids), dtype=np.int64), np.where(valid, counts, 0)),
                phash=np.concatenate([_known(p.entry_phash) for p in parts])[keep],
                dhash=np.concatenate([_known(p.entry_dhash) for p in parts])[keep],
            ),
            np.where(valid, counts, 0),
            phash,
            dhash,
            valid & ~low,
            lambda row: f"{place(row)}, id {ids[row]!r}",
        )
    return HashShards(
        ids=ids,
        split_codes=np.asarray(codes, dtype=np.int32),
        split_names=tuple(str(name) for name in uniques),
        phash=phash,
        dhash=dhash,
        digest=np.concatenate([part.digest for part in parts]),
        has_digest=np.concatenate([part.has_digest for part in parts]),
        low_information=low,
        valid=valid,
        errors=errors,
        paths=paths,
        orientations=orientations,
        files=tuple(labels),
        file_rows=sizes,
        hashing=hashing,
    )


def read_hash_shards(folder: str | os.PathLike[str]) -> HashShards:
    """Read and validate a folder of hash shards (see the module docstring for the schema).

    Parameters
    ----------
    folder : path-like
        A folder of ``*.parquet`` shards (:func:`shard_files`), or one file.

    Returns
    -------
    HashShards

    Raises
    ------
    FileNotFoundError
        The folder does not exist.
    ValueError
        No shards were found, or a shard breaks the schema (the message names
        the file and, where it applies, the row): a missing column, a wrong
        type, a bad hex string, a row with neither hashes nor an error, an id
        repeated across shards.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> shard = pa.table({"id": ["a", "b"], "split": ["train", "test"],
    ...                   "phash": ["00ff00ff00ff00ff", None], "dhash": ["0f0f0f0f0f0f0f0f", None],
    ...                   "error": [None, "truncated file"]})
    >>> pq.write_table(shard, folder / "part-0.parquet")
    >>> shards = read_hash_shards(folder)
    >>> shards.phash.dtype, shards.valid.tolist(), shards.errors
    (dtype('uint64'), [True, False], {1: 'truncated file'})
    """
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    files = shard_files(folder)
    if not files:
        raise ValueError(f"no hash shards (*.parquet files) found in {folder}.")
    parts: list[_Part] = []
    for path in files:
        try:
            schema = pq.read_schema(path)
            _check_unique_columns(schema.names, str(path))
            wanted = [
                name for name in schema.names if name in (*SHARD_COLUMNS, *OPTIONAL_SHARD_COLUMNS)
            ]
            # The uint64 columns win: their hex twins are not read at all.
            wanted = [
                name
                for name in wanted
                if not (name.endswith("_hex") and name[: -len("_hex")] in schema.names)
            ]
            table = pq.read_table(path, columns=wanted)
        except (OSError, pa.ArrowException) as error:
            raise ValueError(f"{path}: not a readable Parquet file ({error})") from None
        parts.append(_parse_part(table, str(path)))
    return _combine(parts, [str(path) for path in files])


# ------------------------------------------------------------------------ grouping


def _why_unverified(method: str, threshold: ThresholdSpec) -> str | None:
    """Why the verified cascade would not run anyway (as the core words it), or None."""
    if method != "phash+dhash":
        return f"method {method!r} links by its threshold alone"
    if isinstance(threshold, Mapping):
        return "per-source thresholds link by the threshold alone"
    return None


def _readable_paths(
    paths: NDArray[np.object_] | None, root: str
) -> tuple[list[Any] | None, list[str]]:
    """The files of the ``path`` column that may be read: those resolving inside ``root``.

    Returns ``(sources, outside)``: each row's resolved file (None where there
    is none to read; None for all when no row has one) and the paths that
    resolve outside ``root``, which are never opened.
    """
    if paths is None:
        return None, []
    found: list[Any] = []
    outside: list[str] = []
    for path in paths.tolist():
        if not isinstance(path, str):
            found.append(None)
            continue
        resolved = resolve_within(path, root)
        if resolved is None:
            outside.append(path)
        found.append(resolved if resolved is not None and os.path.isfile(resolved) else None)
    return (found if any(p is not None for p in found) else None), outside


def _fill_copy_digests(
    frame: pd.DataFrame, shards: HashShards, images: Sequence[Any] | None, max_bytes: int
) -> None:
    """The report's ``digest`` of rows whose two hashes equal another row's, as the core fills it.

    These rows are the only byte-copy candidates; the digest lets the pairs
    table tell a byte copy from a re-encode (grouping never uses it). It comes
    from the shards' ``digest`` column, else from the row's image when there is
    one (``images``, or the readable file of its ``path``), never reading a
    file over ``max_bytes``.
    """
    rows = np.flatnonzero(shards.valid & ~shards.low_information)
    hashes = pd.DataFrame({"phash": shards.phash[rows], "dhash": shards.dhash[rows]})
    shared = rows[hashes.duplicated(keep=False).to_numpy()]
    present = frame["digest"].notna().to_numpy()
    wanted = [row for row in shared.tolist() if not present[row]]
    if not wanted:
        return
    values: list[str | None] = []
    for row in wanted:
        if shards.has_digest[row]:
            values.append(f"{int(shards.digest[row]):016x}")
        else:
            digest = None
            if images is not None:
                digest = source_digest(images[row], max_bytes=max_bytes)
            values.append(digest)
    frame.loc[wanted, "digest"] = values


def audit_hash_shards(
    shards: HashShards | str | os.PathLike[str],
    *,
    method: str = DEFAULT_METHOD,
    threshold: ThresholdSpec = None,
    dihedral: bool | None = None,
    verify: VerifySpec = "auto",
    images: Sequence[Any] | None = None,
    decode: DecodeOptions | None = None,
    on_error: str = "warn",
    workers: int | None = None,
    images_root: str | os.PathLike[str] | None = None,
) -> LeakageReport:
    """Group hash shards and audit the groups against their splits.

    The same grouping as every other entry point
    (:func:`leakaudit.audit.audit_hash_table`), so the report renders as text,
    JSON, CSV and HTML alike.

    Parameters
    ----------
    shards : HashShards or path-like
        The shards, or a folder of them (:func:`read_hash_shards`).
    method, threshold
        As in :func:`leakaudit.audit_splits` (default ``"phash+dhash"`` at 8).
    dihedral : bool, optional
        Match flipped and rotated copies through the orientation entries.
        Default: when the shards have the entry columns.
    verify : "auto", bool or VerifyOptions, default "auto"
        Hashes propose, verification decides, as in
        :func:`leakaudit.audit_splits`; it needs the images. They are ``images``
        when given, else the files of the ``path`` column that exist inside
        ``images_root``. When there are none, the shards are grouped by their
        hashes alone (the threshold rule, as for any table without images) and
        ``report.parameters["verification"]`` says so; ``verify=True`` then
        raises.
    images : sequence, optional
        One image (path, bytes, PIL image, or None) per row, for verification.
    decode : DecodeOptions, optional
        The decoding the hashes were made with (verification decodes alike);
        default: what the shards record, else the defaults. Limits on what is
        read (``max_file_bytes``, ``max_pixels``) are never taken from the
        shards: they are ``decode``'s, else the defaults.
    on_error : {"warn", "raise", "ignore"}, default "warn"
        Rows with an ``error`` stay in the report as unreadable images; "warn"
        emits one :class:`~leakaudit.hashing.UnreadableImageWarning` naming
        them, "raise" raises the first as
        :class:`~leakaudit.errors.ImageLoadError`.
    workers : int, optional
        Threads verification decodes with.
    images_root : path-like, optional
        The folder image files may be read from. The ``path`` column is data
        (anyone who wrote the shards chose it), so a file is opened only when
        its path resolves, links followed, inside this folder: for
        verification, the byte digests, and the HTML thumbnails and ``--show``
        pictures of the report (:meth:`LeakageReport.image_file`). Paths that
        resolve elsewhere are never opened (one :class:`ShardWarning` counts
        them; their pairs are decided by the hashes). Default None: no file
        is read, the hashes decide, and the report says so.

    Returns
    -------
    LeakageReport
        ``report.table`` has one row per shard row, in shard order, with an
        ``id`` column after ``split``. Without ``images``,
        ``parameters["images_root"]`` records the resolved folder (None: none)
        and ``parameters["images"]`` what was not read, in words.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from leakaudit.demo import photo_like_image
    >>> from leakaudit.hashing import hash_sources
    >>> a, b = photo_like_image(1), photo_like_image(2)
    >>> hashed = hash_sources([a, b, a.resize((96, 72))])
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "hashes"
    >>> _ = write_hash_shards(hashed, folder, ids=["a", "b", "a-small"],
    ...                       split=["train", "train", "test"])
    >>> report = audit_hash_shards(folder)
    >>> report.n_leaked_images, report.parameters["verification"]["ran"]
    (2, False)
    """
    check_choice("on_error", on_error, ON_ERROR_CHOICES)
    resolve_threshold(method, threshold)
    root: str | None = None
    if images_root is not None:
        if not isinstance(images_root, (str, os.PathLike)) or not os.path.isdir(images_root):
            raise ValueError(f"images_root must be a folder; got {describe(images_root)}.")
        root = os.path.realpath(images_root)
    from_folder = not isinstance(shards, HashShards)
    if not isinstance(shards, HashShards):
        if not isinstance(shards, (str, os.PathLike)):
            raise TypeError(
                f"shards must be a HashShards or a folder of hash shards; got {describe(shards)}."
            )
        shards = read_hash_shards(shards)
    if dihedral is None:
        dihedral = shards.orientations is not None
    elif dihedral and shards.orientations is None:
        raise ValueError(
            "dihedral=True needs the orientation entries: the shards have no "
            "orientation_phash / orientation_dhash columns (hash with dihedral=True)."
        )
    # What the shards record says how the hashes were made; the limits on reading are
    # the caller's (decode_options_of never takes them from the record).
    options = resolve_decode(decode) if decode is not None else decode_options_of(shards.hashing)
    table = shards.hash_table()
    names = table.sources
    if images is not None and len(images) != len(shards):
        raise ValueError(
            f"images must have one image per row (length {len(shards)}); got length {len(images)}."
        )
    # Images given are used as given (None rows are decided by their hashes); from the
    # path column, only files inside images_root count, and none at all means no images.
    outside: list[str] = []
    sources: list[Any] | None = None
    if images is not None:
        sources = list(images)
    elif root is not None:
        sources, outside = _readable_paths(shards.paths, root)
    apply_on_error(table.errors, on_error, total=len(shards), name_of=names.__getitem__)
    parameters: dict[str, Any] = decode_parameters(options) if options is not None else {}
    if from_folder:
        parameters["hash_shards"] = len(shards.files)
    if images is None:
        # The path column is data: pictures are read only under a root the user named.
        # Images given by the caller (the Ray adapter's, from the user's own dataset) are
        # trusted as any other audit's are.
        parameters["images_root"] = root
    if root is None and images is None:
        parameters["images"] = (
            "image files named in the shards were not read (no --images-root / images_root "
            "given): the hashes decided; no thumbnails or --show pictures"
        )
    elif outside:
        parameters["images"] = (
            f"{len(outside)} shard path(s) lie outside the images root {root} and were not "
            "read: the hashes decided their pairs"
        )
        warnings.warn(
            f"{len(outside)} shard path(s) resolve outside the images root {root} and are not "
            f"read (the hashes decide their pairs), e.g. {printable(outside[0])}",
            ShardWarning,
            stacklevel=2,
        )
    run_verify: VerifySpec = verify
    if sources is None and verify is not False:
        if verify is True or isinstance(verify, VerifyOptions):
            raise ValueError(
                "verify needs the images: the shards have no 'path' column with files that "
                "exist inside images_root (--images-root); pass images_root= or images=, or "
                "verify='auto' / False to group by hashes alone."
            )
        if verify != "auto":
            raise ValueError(
                f"verify must be 'auto', True, False or a VerifyOptions; got {describe(verify)}."
            )
        run_verify = False  # nothing to decode: the threshold rule, said so below
        parameters["stages"] = ["hash threshold"]
        no_images = (
            "images not read: no images root given (--images-root, images_root=); grouped "
            "by the hashes alone"
            if root is None
            else "the shards carry no readable image paths inside the images root: grouped "
            "by the hashes alone"
        )
        parameters["verification"] = {
            "ran": False,
            "why": _why_unverified(method, threshold) or no_images,
        }
    report = audit_hash_table(
        table,
        list(shards.split),
        names=names,
        method=method,
        threshold=threshold,
        extra_parameters=parameters,
        images=sources,
        dihedral=dihedral,
        extra_columns={"id": pd.Series(shards.ids, dtype=object)},  # names need not be UTF-8
        verify=run_verify,
        decode=options,
        workers=workers,
    )
    if report.table is not None:
        limit = resolve_decode(options).max_file_bytes
        _fill_copy_digests(report.table, shards, sources, limit)
    return report
