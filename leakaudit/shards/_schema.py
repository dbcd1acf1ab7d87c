"""The hash shards' format: its columns, the ``leakaudit`` schema metadata record, which
files of a folder are shards, and the pyarrow import."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leakaudit._validation import describe
from leakaudit._version import __version__
from leakaudit.loading import DecodeOptions

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
