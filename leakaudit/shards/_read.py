"""Reading hash shards: a folder of Parquet files as one :class:`HashShards` (uint64 arrays),
checked column by column."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._text import printable
from leakaudit.frames import hash_values_from_frame
from leakaudit.hashing import (
    MAX_ORIENTATIONS,
    MAX_STRIP_ENTRIES,
    N_EXTRA_ENTRIES,
    HashTable,
    OrientationHashes,
)
from leakaudit.shards._schema import (
    _ORIENTATION_COLUMNS,
    OPTIONAL_SHARD_COLUMNS,
    SHARD_COLUMNS,
    ShardWarning,
    _hashing_of,
    require_pyarrow,
    shard_files,
)


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


def _null_rows(column: Any, name: str, label: str, ids: NDArray[np.object_] | None) -> ValueError:
    """The error for a required column with nulls: the file, the first row and its id, how many."""
    valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    nulls = np.flatnonzero(~valid)
    row = int(nulls[0])
    which = f"row {row}" + (f" (id {printable(str(ids[row]))!r})" if ids is not None else "")
    more = f", and {nulls.size - 1} more row(s)" if nulls.size > 1 else ""
    return ValueError(f"{label}: column {name!r} must not be null; {which} is{more}.")


def _strings(
    pa: Any,
    column: Any,
    name: str,
    label: str,
    *,
    nullable: bool,
    ids: NDArray[np.object_] | None = None,
) -> NDArray[np.object_]:
    """A text column as str values (None for nulls); ``ids`` name a null row in the error."""
    column = _decoded(pa, column)
    if not nullable and column.null_count:
        raise _null_rows(column, name, label, ids)
    if _is_binary(pa, column.type):
        # Text that is not valid UTF-8 (file names, as _text_array writes them):
        # the bytes decoded as os.fsdecode does on POSIX, so a name comes back
        # as the str Python gave it, lone surrogates included.
        raw = column.to_pylist()
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
    # with crop entries the N_EXTRA_ENTRIES after them, and then any strip entries (a
    # multiple of STRIP_GROUP, which entry_kinds reads off the count).
    allowed = ((counts >= 1) & (counts <= MAX_ORIENTATIONS)) | (
        (counts > N_EXTRA_ENTRIES)
        & (counts <= N_EXTRA_ENTRIES + MAX_ORIENTATIONS + MAX_STRIP_ENTRIES)
    )
    bad = np.flatnonzero((counts != 0) & ~allowed)
    if bad.size:
        row = int(bad[0])
        raise ValueError(
            f"{label}: column {name!r} row {row} (id {ids[row]!r}) has {counts[row]} entries; "
            f"a row has none, 1 to {MAX_ORIENTATIONS} (orientations), or those and "
            f"{N_EXTRA_ENTRIES} crop and rotation entries (and up to {MAX_STRIP_ENTRIES} "
            "strip entries)."
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
    # A row without a split would drop out of the audit unseen: its leaks hidden.
    split = _strings(pa, table.column("split"), "split", label, nullable=False, ids=ids)
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
