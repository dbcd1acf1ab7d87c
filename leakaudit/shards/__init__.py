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
``split`` (string)
    The split the image belongs to. A null is an error naming the file (or
    block), the row and its id: a row without a split would drop out of the
    audit unseen, and with it any leak it is part of.
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

Modules
-------
The package is split by job; every name is imported from ``leakaudit.shards``.

* ``_schema``: the columns, the schema metadata record, which files are shards, pyarrow;
* ``_write``: :func:`hash_shard_table` and :func:`write_hash_shards`;
* ``_read``: :func:`read_hash_shards` and :class:`HashShards`;
* ``_audit``: :func:`audit_hash_shards`.
"""

from __future__ import annotations

from leakaudit.shards._audit import audit_hash_shards
from leakaudit.shards._read import HashShards, read_hash_shards
from leakaudit.shards._schema import (
    OPTIONAL_SHARD_COLUMNS,
    SHARD_COLUMNS,
    SHARD_FORMAT,
    SHARD_FORMAT_VERSION,
    SHARD_METADATA_KEY,
    ShardWarning,
    decode_options_of,
    hashing_metadata,
    require_pyarrow,
    shard_files,
)
from leakaudit.shards._write import check_new_shard_folder, hash_shard_table, write_hash_shards

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
