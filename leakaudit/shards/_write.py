"""Writing hash shards: a :class:`~leakaudit.hashing.HashTable` as an Arrow table, and as
Parquet files in a new folder."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from leakaudit._validation import check_int
from leakaudit.hashing import HashTable, hashes_to_hex_arrow
from leakaudit.shards._schema import (
    _ROWS_PER_SHARD,
    SHARD_METADATA_KEY,
    _metadata_bytes,
    require_pyarrow,
    shard_files,
)


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
    >>> from leakaudit.shards import read_hash_shards
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
