"""The table-level API: hashes and duplicate groups as pandas DataFrames.

These functions keep the names and semantics of the R package ``leakaudit``
(``compute_hashes``, ``find_duplicate_groups``); the heavy lifting happens in
:mod:`leakaudit.hashing` (decode + hash), :mod:`leakaudit.search` (exact
all-pairs-within-threshold index) and :mod:`leakaudit.grouping` (the linking
policy and union-find, on arrays). This module only converts between
DataFrames of hex strings and those arrays.

Table columns
-------------
``path``
    The image's path as given (``str``).
``split``
    The split the image belongs to, or missing.
``hash``
    The 64-bit hash as 16 lowercase hex characters; missing when the image
    could not be read.
``low_information``
    ``True`` for blank or near-flat images, whose perceptual hashes carry no
    meaning; they link only to byte-identical files.
``digest``
    For low-information images, a 64-bit BLAKE2b of the file's bytes as 16 hex
    characters (their exact-copy key); missing for the others.
``error``
    Why the image could not be read, or missing.
``group_id``
    (after :func:`find_duplicate_groups`) compact integer group ids, 0-based,
    in order of first appearance.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._memory import return_freed_memory
from leakaudit._validation import check_choice, check_int
from leakaudit.cache import CacheSpec, hash_sources_cached
from leakaudit.grouping import link_labels
from leakaudit.hashing import (
    HASH_METHODS,
    HashTable,
    hashes_to_hex,
    hashes_to_hex_arrow,
    hex_to_hashes,
    source_name,
)
from leakaudit.loading import DecodeOptions

__all__ = [
    "compute_hashes",
    "find_duplicate_groups",
    "frame_from_hash_table",
    "hash_values_from_frame",
]

ImageSource = Any  # str | os.PathLike[str] | bytes | PIL.Image.Image


def _split_labels(split: Any, n: int) -> list[str | None]:
    """Validate ``split`` (None, a scalar string, or one label per path)."""
    if split is None:
        return [None] * n
    if isinstance(split, str):
        return [split] * n
    labels = list(split)
    if len(labels) != n:
        raise ValueError(
            f"split must have one label per path (length {n}); got length {len(labels)}."
        )
    out: list[str | None] = []
    for label in labels:
        if label is None or (isinstance(label, float) and np.isnan(label)) or label is pd.NA:
            out.append(None)
        else:
            out.append(str(label))
    return out


def frame_from_hash_table(
    table: HashTable,
    split: Sequence[str | None],
    *,
    method: str,
    paths: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Return the ``path, split, hash, ...`` table for an already computed :class:`HashTable`.

    Parameters
    ----------
    table : HashTable
        Result of :func:`leakaudit.hashing.hash_sources`.
    split : sequence of str or None
        One split label per row.
    method : {"dhash", "phash"}
        Which hash fills the ``hash`` column; both are kept as ``dhash`` and
        ``phash`` columns too.
    paths : sequence of str, optional
        Names for the ``path`` column; defaults to ``table.sources``.
    """
    check_choice("method", method, HASH_METHODS)
    valid = np.asarray(table.valid, dtype=bool)
    hex_phash = _hex_column(table.phash, valid)
    hex_dhash = _hex_column(table.dhash, valid)
    low_information = np.asarray(table.low_information, dtype=bool) & valid
    # The byte digest is computed only where it is used: linking blank images to exact copies
    # (and encoded only there: a million hex strings that would be dropped cost ~70 MB).
    hex_digest = np.full(len(valid), None, dtype=object)
    blank = np.flatnonzero(low_information)
    if blank.size:
        hex_digest[blank] = hashes_to_hex(table.digest[blank])
    chosen = hex_phash if method == "phash" else hex_dhash
    errors = np.full(len(valid), None, dtype=object)
    for index, reason in table.errors.items():
        errors[index] = reason
    frame: pd.DataFrame = pd.DataFrame(
        {
            # object dtype: a pandas string column cannot hold the surrogate escapes of
            # file names that are not UTF-8 (os.fsdecode), and would refuse the table.
            "path": pd.Series(
                list(paths) if paths is not None else list(table.sources), dtype=object
            ),
            "split": pd.Series(list(split), dtype=object),
            "hash": chosen,
            "phash": hex_phash,
            "dhash": hex_dhash,
            "low_information": low_information,
            "digest": hex_digest,
            "error": errors,
        }
    )
    return frame


def _hex_column(values: NDArray[np.uint64], present: NDArray[np.bool_]) -> Any:
    """The 16-character hex strings of ``values`` (missing where not ``present``) as a column.

    When pandas stores strings in Arrow (pandas 3 with pyarrow, its default), the column is
    built straight from the hex text, one buffer for all rows, instead of a Python string per
    row that pandas would then convert: at 1M rows that is ~25 MB per column instead of ~100 MB
    of strings plus the conversion (what made ``audit_hash_table`` peak at 660 MB). The values
    and the dtype are the ones pandas infers from the strings either way.
    """
    n = len(values)
    # The dtype pandas gives a column of strings: object before pandas 3 (unless its
    # future.infer_string option is set), an Arrow-backed StringDtype from pandas 3 with pyarrow.
    # Asked of pandas itself, so the column is the same on every version it supports.
    dtype = pd.Series(["0"]).dtype
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow" and n > 0:
        # pyarrow is present: pandas stores its strings with it.
        return pd.array(hashes_to_hex_arrow(values, present), dtype=dtype)
    column = np.asarray(hashes_to_hex(values), dtype=object)
    column[~present] = None
    return column


def compute_hashes(
    paths: Sequence[ImageSource],
    split: Sequence[str | None] | str | None = None,
    *,
    method: str = "dhash",
    workers: int | None = None,
    progress: bool | None = None,
    on_error: str = "warn",
    decode: DecodeOptions | None = None,
    cache: CacheSpec = True,
) -> pd.DataFrame:
    """Compute perceptual hashes for a set of images.

    Parameters
    ----------
    paths : sequence of path-like, bytes or PIL images
        The images. Files are decoded at reduced size, EXIF-rotated and
        alpha-flattened first (see :mod:`leakaudit.loading`).
    split : sequence of str, str or None, optional
        The split each image belongs to (same length as ``paths``), one label
        for all, or None for unsplit images.
    method : {"dhash", "phash"}, default "dhash"
        Which hash fills the ``hash`` column (dHash by default, as in the R package; the
        one-call :func:`leakaudit.audit_splits` defaults to pHash and dHash
        agreeing, more precise on real photos, see ``benchmarks/RESULTS.md``). Both are
        computed in one pass and returned as ``dhash`` and ``phash`` columns.
    workers : int, optional
        Processes to use; default all usable cores.
    progress : bool, optional
        Show a progress bar; default: only on long runs with a terminal.
    on_error : {"warn", "raise", "ignore"}, default "warn"
        What to do about unreadable images. Every failure is recorded in the
        ``error`` column with a missing ``hash``; "warn" emits one summary
        :class:`~leakaudit.hashing.UnreadableImageWarning` naming the files.
    decode : DecodeOptions, optional
        Decoding policy (reduction, EXIF, alpha background, size limit).
    cache : bool, str, os.PathLike or HashCache, default True
        Persistent hash cache for files, as in :func:`leakaudit.audit_splits`.

    Returns
    -------
    pandas.DataFrame
        Columns ``path, split, hash, phash, dhash, low_information, digest, error``,
        one row per input, in input order.

    Raises
    ------
    ValueError
        If ``split`` has the wrong length or an option is invalid.

    Examples
    --------
    >>> from PIL import Image
    >>> img = Image.linear_gradient("L").resize((64, 64))
    >>> df = compute_hashes([img, img.rotate(90)], split=["train", "test"], progress=False)
    >>> list(df.columns[:3])
    ['path', 'split', 'hash']
    >>> len(df.loc[0, "hash"])
    16
    """
    check_choice("method", method, HASH_METHODS)
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise TypeError(
            f"paths must be a sequence of image paths; got a single {type(paths).__name__}. "
            "Wrap it in a list."
        )
    items = list(paths)
    labels = _split_labels(split, len(items))
    table = hash_sources_cached(
        items,
        cache=cache,
        decode=decode,
        workers=workers,
        progress=progress,
        on_error=on_error,
    )
    return frame_from_hash_table(
        table, labels, method=method, paths=[source_name(item, i) for i, item in enumerate(items)]
    )


# Columns from this many rows up hand the parse's freed memory back (see _memory).
_TRIM_ROWS = 1 << 16


def hash_values_from_frame(
    hash_df: pd.DataFrame, column: str = "hash"
) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """Return ``(values, valid)`` for a hex hash column of ``hash_df``."""
    if column not in hash_df.columns:
        raise ValueError(
            f"hash_df must have a {column!r} column; got columns {list(hash_df.columns)}."
        )
    values, valid = hex_to_hashes(hash_df[column], name=column)
    if values.size >= _TRIM_ROWS:
        # The parse's text copies and masks (about 100 bytes a row) go back to the system
        # rather than staying in the heap, scattered, under whatever comes next.
        return_freed_memory()
    return values, valid


def find_duplicate_groups(hash_df: pd.DataFrame, threshold: int = 5) -> pd.DataFrame:
    """Group near-duplicate images by hash distance.

    Any two images within ``threshold`` Hamming bits are linked, and links are
    transitive (A~B~C form one group even when A and C are far apart). The
    search is exact: it returns what comparing all pairs would, using a
    multi-index (pigeonhole) search instead of all pairs.

    Parameters
    ----------
    hash_df : pandas.DataFrame
        At least ``path`` and ``hash`` columns (hex strings of equal length, at
        most 16 characters), as from :func:`compute_hashes`. When a boolean
        ``low_information`` column is present, those rows link only to rows
        with an identical ``digest`` (or, without a ``digest`` column, an
        identical ``hash``).
    threshold : int, default 5
        Largest Hamming distance, in bits, that counts as a near-duplicate
        (0 = identical hashes only).

    Returns
    -------
    pandas.DataFrame
        A copy of ``hash_df`` with an integer ``group_id`` column: 0-based,
        compact, numbered in order of first appearance. Rows with a missing
        hash are singletons. Row order is preserved.

    Examples
    --------
    >>> hashes = pd.DataFrame({
    ...     "path": ["a.jpg", "b.jpg", "c.jpg", "d.jpg"],
    ...     "hash": ["0000000000000000", "0000000000000001",
    ...              "ffffffffffffffff", "1234567890abcdef"],
    ... })
    >>> find_duplicate_groups(hashes, threshold=5)["group_id"].tolist()
    [0, 0, 1, 2]
    """
    if not isinstance(hash_df, pd.DataFrame):
        raise TypeError(f"hash_df must be a pandas DataFrame; got {type(hash_df).__name__}.")
    threshold = check_int("threshold", threshold, 0, 64)
    values, valid = hash_values_from_frame(hash_df)
    low = None
    if "low_information" in hash_df.columns:
        low = hash_df["low_information"].fillna(False).to_numpy(dtype=bool)
    key_column = "digest" if "digest" in hash_df.columns else "hash"
    labels = link_labels(
        values, valid, threshold, low_information=low, exact_keys=hash_df[key_column].to_numpy()
    )
    out: pd.DataFrame = hash_df.copy()
    out["group_id"] = labels
    return out
