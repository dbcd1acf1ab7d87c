"""The seed's table-level API: hashes and duplicate groups as pandas DataFrames.

These functions keep the names and semantics of the R package ``leakaudit``
(``compute_hashes``, ``find_duplicate_groups``); the heavy lifting happens in
:mod:`leakaudit.hashing` (decode + hash), :mod:`leakaudit.search` (exact
all-pairs-within-threshold index) and :mod:`leakaudit.grouping` (union-find).

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
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._validation import check_choice, check_int, describe
from leakaudit.cache import CacheSpec, hash_sources_cached
from leakaudit.grouping import connected_component_labels, group_labels_within
from leakaudit.hashing import HASH_METHODS, HashTable, hashes_to_hex, popcount64
from leakaudit.loading import DecodeOptions
from leakaudit.search import iter_pairs_within

__all__ = [
    "compute_hashes",
    "find_duplicate_groups",
    "frame_from_hash_table",
    "hash_values_from_frame",
    "merge_group_labels",
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


def _source_names(paths: Sequence[ImageSource]) -> list[str]:
    names = []
    for index, item in enumerate(paths):
        if isinstance(item, (str, os.PathLike)):
            names.append(os.fspath(item))
        else:
            names.append(f"<{type(item).__name__} #{index}>")
    return names


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
    valid = table.valid
    hex_phash = np.asarray(hashes_to_hex(table.phash), dtype=object)
    hex_dhash = np.asarray(hashes_to_hex(table.dhash), dtype=object)
    hex_digest = np.asarray(hashes_to_hex(table.digest), dtype=object)
    for column in (hex_phash, hex_dhash):
        column[~valid] = None
    low_information = np.asarray(table.low_information, dtype=bool) & valid
    # The byte digest is computed only where it is used: linking blank images to exact copies.
    hex_digest[~low_information] = None
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
        Which hash fills the ``hash`` column (the seed's default is dHash; the
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
        options=decode if decode is not None else DecodeOptions(),
        workers=workers,
        progress=progress,
        on_error=on_error,
    )
    return frame_from_hash_table(table, labels, method=method, paths=_source_names(items))


def _parse_hex_column(values: pd.Series, name: str) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """Parse a column of hex hashes (<= 16 hex chars, all the same length)."""
    n = len(values)
    parsed = np.zeros(n, dtype=np.uint64)
    valid = np.zeros(n, dtype=bool)
    width: int | None = None
    for index, value in enumerate(values.tolist()):
        if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
            continue
        if not isinstance(value, str):
            raise TypeError(f"{name} must hold hex strings; got {describe(value)} in row {index}.")
        text = value.strip().lower()
        if text == "":
            continue
        if width is None:
            width = len(text)
            if width > 16:
                raise ValueError(
                    f"{name} must hold hashes of at most 64 bits (16 hex characters); "
                    f"got {width} characters in row {index}."
                )
        elif len(text) != width:
            raise ValueError(
                f"hashes must be the same length; got {width} and {len(text)} hex characters "
                f"(row {index} of {name})."
            )
        try:
            parsed[index] = int(text, 16)
        except ValueError:
            raise ValueError(
                f"{name} must hold hex strings; got {value!r} in row {index}."
            ) from None
        valid[index] = True
    return parsed, valid


def hash_values_from_frame(
    hash_df: pd.DataFrame, column: str = "hash"
) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """Return ``(values, valid)`` for a hex hash column of ``hash_df``."""
    if column not in hash_df.columns:
        raise ValueError(
            f"hash_df must have a {column!r} column; got columns {list(hash_df.columns)}."
        )
    return _parse_hex_column(hash_df[column], column)


def _shared_code_edges(
    codes: NDArray[np.int64], eligible: NDArray[np.bool_]
) -> Iterator[NDArray[np.int64]]:
    """Yield edges chaining together eligible rows that share a code (codes < 0 never link)."""
    codes = np.where(eligible, codes, -1)
    rows = np.flatnonzero(codes >= 0)
    if rows.size < 2:
        return
    order = rows[np.argsort(codes[rows], kind="stable")]
    same = codes[order[1:]] == codes[order[:-1]]
    if same.any():
        yield np.stack([order[:-1][same], order[1:][same]], axis=1).astype(np.int64)


def _exact_key_edges(
    keys: Sequence[Any], eligible: NDArray[np.bool_]
) -> Iterator[NDArray[np.int64]]:
    """Yield edges chaining together eligible rows that share a (non-missing) key."""
    codes, _ = pd.factorize(pd.Series(list(keys), dtype=object), use_na_sentinel=True)
    yield from _shared_code_edges(codes.astype(np.int64), eligible)


def fuzzy_edges(
    values: NDArray[np.uint64],
    threshold: int,
    linkable: NDArray[np.bool_],
    *,
    second: NDArray[np.uint64] | None = None,
    second_threshold: int | None = None,
    owner: NDArray[np.int64] | None = None,
    limits: NDArray[np.int64] | None = None,
) -> Iterator[NDArray[np.int64]]:
    """Yield row pairs whose hashes lie within ``threshold`` among ``linkable`` rows.

    With ``second`` given, a pair must also lie within ``second_threshold`` on
    that second hash (both hashes agreeing).

    ``owner`` makes ``values`` (and ``second``) *entries*: several hashes per
    row (its orientations, for dihedral matching), entry ``k`` belonging to row
    ``owner[k]``; two rows link when any entry of one is within reach of any
    entry of the other. ``limits`` gives each row its own largest distance: a
    pair links when within the smaller of its two rows' limits, on both hashes
    (``threshold`` must then be at least the largest limit).
    """
    entry_rows = owner if owner is not None else np.arange(len(values), dtype=np.int64)
    entries = np.flatnonzero(linkable[entry_rows])
    if entries.size < 2:
        return
    for chunk in iter_pairs_within(values[entries], threshold):
        pairs = entries[chunk]
        rows = entry_rows[pairs]
        keep = rows[:, 0] != rows[:, 1]
        if limits is not None:
            limit = np.minimum(limits[rows[:, 0]], limits[rows[:, 1]])
            keep &= popcount64(values[pairs[:, 0]] ^ values[pairs[:, 1]]) <= limit
            if second is not None:
                keep &= popcount64(second[pairs[:, 0]] ^ second[pairs[:, 1]]) <= limit
        elif second is not None and second_threshold is not None:
            keep &= popcount64(second[pairs[:, 0]] ^ second[pairs[:, 1]]) <= second_threshold
        if keep.any():
            yield rows[keep]


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
    labels = group_labels_for_frame(hash_df, values, valid, threshold)
    out: pd.DataFrame = hash_df.copy()
    out["group_id"] = labels
    return out


def group_labels_for_frame(
    hash_df: pd.DataFrame,
    values: NDArray[np.uint64],
    valid: NDArray[np.bool_],
    threshold: int,
    *,
    second: NDArray[np.uint64] | None = None,
    second_threshold: int | None = None,
    orientations: tuple[NDArray[np.int64], NDArray[np.uint64], NDArray[np.uint64] | None]
    | None = None,
    limits: NDArray[np.int64] | None = None,
) -> NDArray[np.int64]:
    """Group labels for a hash table, honouring ``low_information`` rows.

    ``orientations`` is ``(owner, values, second)`` of the rows' orientation
    entries (dihedral matching, see :class:`~leakaudit.hashing.OrientationHashes`),
    searched instead of ``values``/``second``; ``limits`` are per-row
    thresholds (see :func:`fuzzy_edges`).
    """
    n = len(hash_df)
    if "low_information" in hash_df.columns:
        low = hash_df["low_information"].fillna(False).to_numpy(dtype=bool)
    else:
        low = np.zeros(n, dtype=bool)
    low = low & valid
    linkable = valid & ~low

    def edges() -> Iterator[NDArray[np.int64]]:
        if orientations is not None or limits is not None:
            owner, entry_values, entry_second = (
                orientations if orientations is not None else (None, values, second)
            )
            yield from fuzzy_edges(
                entry_values,
                threshold,
                linkable,
                second=entry_second,
                second_threshold=second_threshold,
                owner=owner,
                limits=limits,
            )
        elif second is None:
            # One hash: the grouping engine merges identical hashes directly and lets the
            # search skip buckets already joined, far cheaper than streaming every pair.
            fuzzy = group_labels_within(values, threshold, valid=valid, linkable=linkable)
            yield from _shared_code_edges(fuzzy, linkable)
        else:
            yield from fuzzy_edges(
                values, threshold, linkable, second=second, second_threshold=second_threshold
            )
        if low.any():
            key_column = "digest" if "digest" in hash_df.columns else "hash"
            # Exact copies of a blank image are still copies; two different
            # blank images are not evidence of anything.
            yield from _exact_key_edges(hash_df[key_column].tolist(), low)

    return connected_component_labels(n, edges())


def merge_group_labels(
    labels: NDArray[np.int64], extra_edges: Iterable[NDArray[np.int64]]
) -> NDArray[np.int64]:
    """Join groups linked by ``extra_edges`` (pairs of rows) to the groups in ``labels``.

    Used by the embedding stage: its pairs are unioned with the hash groups,
    transitively. The result is compact and numbered in order of first
    appearance, like :func:`find_duplicate_groups`'s ``group_id``.

    Examples
    --------
    >>> merge_group_labels(np.array([0, 0, 1, 2]), [np.array([[1, 3]])]).tolist()
    [0, 0, 1, 0]
    """
    codes = np.asarray(labels, dtype=np.int64)

    def edges() -> Iterator[NDArray[np.int64]]:
        yield from _shared_code_edges(codes, np.ones(len(codes), dtype=bool))
        for chunk in extra_edges:
            pairs = np.asarray(chunk, dtype=np.int64).reshape(-1, 2)
            if pairs.size:
                yield pairs

    return connected_component_labels(len(codes), edges())
