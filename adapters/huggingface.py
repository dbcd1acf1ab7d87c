"""Audit Hugging Face ``datasets`` splits in place and hand back a leak-free ``DatasetDict``.

Install with ``pip install 'leakaudit-vision[hf]'``. ``datasets`` is imported only
inside the functions that need it.

How images are read
-------------------
The image column (auto-detected when the dataset has exactly one ``Image``
feature) is cast to ``Image(decode=False)``, so each row gives the encoded file
bytes (or, when the bytes are not stored, a local path) and nothing is decoded by
``datasets``: leakaudit decodes once, at reduced size. Hashing runs inside
``Dataset.map(batched=True, num_proc=...)``; for a dataset stored on disk
(``load_dataset``, ``load_from_disk``), ``datasets`` caches the result next to the
data, so auditing it again (or splitting it after auditing) re-reads the hashes
instead of recomputing them. Hashes are stored as ``uint64``.

Rows
----
``path`` is not an identity: after ``save_to_disk`` or a Hub parquet export it is
a basename or ``None``, and two rows may share it. Every image is identified by
its split and its row index; ``report.table`` has an ``index`` column, and its
``path`` column holds the stored path when there is one, else ``"split[index]"``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from leakaudit._validation import check_bool, check_choice, check_int, describe
from leakaudit.adapters._common import (
    ClassMismatchWarning,
    GroupSplitResult,
    ResplitResult,
    check_dihedral,
    check_report_matches,
    destination_rows,
    leave_out_unreadable,
    moves_table,
    rows_verification_reads,
)
from leakaudit.audit import (
    VerifySpec,
    audit_hash_table,
    decode_parameters,
    hashing_options,
    wants_crop_entries,
)
from leakaudit.cache import CacheSpec, hash_context, hash_sources_cached, resolve_cache
from leakaudit.cleaning import clean_splits, resolve_lengths, split_groups
from leakaudit.hashing import HashTable, OrientationHashes, apply_on_error, hashes_and_notes
from leakaudit.loading import DecodeOptions, ImageDecodeWarning
from leakaudit.policy import DEFAULT_METHOD, ThresholdSpec, resolve_threshold
from leakaudit.report import LeakageReport

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict

__all__ = [
    "ClassMismatchWarning",
    "audit_dataset_dict",
    "clean_dataset_dict",
    "find_image_column",
    "hash_dataset",
    "leak_free_split",
]

_INSTALL_HINT = "pip install 'leakaudit-vision[hf]'"

#: ``batch_size=None`` picks rows per ``map`` batch holding about this many encoded bytes ...
_BATCH_BYTES = 64 << 20
#: ... between these bounds (``datasets``' own default is 1,000 rows).
_BATCH_ROWS = (16, 1000)


def _require_datasets() -> Any:
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - exercised only without datasets
        raise ImportError(
            f"leakaudit.adapters.huggingface needs the datasets library: {_INSTALL_HINT}"
        ) from exc
    return datasets


def _as_splits(dataset_dict: Any) -> dict[str, Any]:
    datasets = _require_datasets()
    if isinstance(dataset_dict, datasets.Dataset):
        raise TypeError(
            "dataset_dict must be a DatasetDict or a mapping of split name to Dataset; got a "
            "single Dataset. Wrap it ({'train': dataset}) or use leak_free_split to split it."
        )
    if not isinstance(dataset_dict, Mapping):
        raise TypeError(
            "dataset_dict must be a DatasetDict or a mapping of split name to Dataset; "
            f"got {describe(dataset_dict)}."
        )
    if not dataset_dict:
        raise ValueError("dataset_dict must name at least one split; got an empty mapping.")
    out: dict[str, Any] = {}
    for name, value in dataset_dict.items():
        if not isinstance(value, datasets.Dataset):
            kind = type(value).__name__
            hint = " (streaming datasets cannot be audited in place)" if "Iterable" in kind else ""
            raise TypeError(f"dataset_dict[{name!r}] must be a datasets.Dataset; got {kind}{hint}.")
        out[str(name)] = value
    return out


def find_image_column(dataset: Dataset, image_column: str | None = None) -> str:
    """Return the name of ``dataset``'s image column.

    Parameters
    ----------
    dataset : datasets.Dataset
        The dataset.
    image_column : str, optional
        The column to use; checked to be an ``Image`` feature. When None, the one
        ``Image`` feature of the dataset.

    Raises
    ------
    ValueError
        The column is missing or not an image, or there is no or more than one
        image column to choose from; the message lists the columns.

    Examples
    --------
    >>> from datasets import Dataset, Features, Image, Value
    >>> ds = Dataset.from_dict({"img": [None], "label": [0]},
    ...                        features=Features({"img": Image(), "label": Value("int64")}))
    >>> find_image_column(ds)
    'img'
    """
    datasets = _require_datasets()
    features = dataset.features
    images = [name for name, feature in features.items() if isinstance(feature, datasets.Image)]
    listing = ", ".join(f"{name} ({type(f).__name__})" for name, f in features.items())
    if image_column is not None:
        if image_column not in features or not isinstance(features[image_column], datasets.Image):
            raise ValueError(
                f"image_column must name an Image feature of the dataset ({listing}); "
                f"got {image_column!r}."
            )
        return image_column
    if len(images) == 1:
        return str(images[0])
    if not images:
        raise ValueError(
            f"the dataset has no Image feature to audit (columns: {listing}); cast the column "
            "holding images with dataset.cast_column(name, datasets.Image()) first."
        )
    raise ValueError(
        f"the dataset has several Image features ({', '.join(images)}); pass image_column."
    )


# ---------------------------------------------------------------------- hashing

_HASH_COLUMNS = ("phash", "dhash", "digest", "low_information", "error", "source_path")
#: The extra columns of a dihedral :func:`hash_dataset`: per row, the pHashes and
#: dHashes of its canonical-orientation entries (see
#: :class:`~leakaudit.hashing.OrientationHashes`), canonical first, as two
#: ``uint64`` lists of one length.
_ORIENTATION_COLUMNS = ("orientation_phash", "orientation_dhash")


def _hash_batch(
    images: list[Any],
    options: DecodeOptions,
    dihedral: bool = False,
    cache_dir: str | None = None,
    crop_entries: bool = False,
) -> Any:
    """``Dataset.map`` function: hash a batch of undecoded image cells.

    Module level (not a closure) so ``datasets`` can fingerprint it stably and
    reuse its cache, and so ``num_proc`` workers can pickle it. ``dihedral``
    travels in ``fn_kwargs``, as ``options`` does, so it is part of the map's
    fingerprint: a plain run's cached hashes are never read for a dihedral run (and
    ``crop_entries`` likewise).
    Cells that are file paths (no bytes) go through leakaudit's hash cache in
    ``cache_dir`` (None: off), as files do everywhere else; bytes never do.

    Returns the batch's columns as a ``pyarrow.Table``, which ``datasets``
    writes as it is (a dict of lists would be converted column by column,
    row by row for the strings and the orientation lists).
    """
    import pyarrow as pa

    n = len(images)
    phash = np.zeros(n, dtype=np.uint64)
    dhash = np.zeros(n, dtype=np.uint64)
    digest = np.zeros(n, dtype=np.uint64)
    low = np.zeros(n, dtype=np.bool_)
    errors: list[str | None] = [None] * n
    # Orientation entries as (batch rows, phash, dhash) parts, each in row order.
    turned: list[tuple[Any, Any, Any]] = []
    cells = [cell if isinstance(cell, Mapping) else {} for cell in images]
    datas = [cell.get("bytes") for cell in cells]
    paths: list[Any] = [cell.get("path") for cell in cells]
    rows: list[int] | range
    sources: list[Any]
    if None not in datas:
        # Every cell holds its bytes (the usual Hub / in-memory case): all are hashed.
        rows, sources = range(n), datas
    else:
        files = [
            i
            for i, (data, path) in enumerate(zip(datas, paths, strict=True))
            if data is None and isinstance(path, str)
        ]
        if cache_dir is not None and files:
            cached = hash_sources_cached(
                [paths[i] for i in files],
                cache=cache_dir,
                decode=options,
                workers=1,
                progress=False,
                on_error="ignore",
                dihedral=dihedral,
                crop_entries=crop_entries,
            )
            cached_rows = np.asarray(files, dtype=np.int64)
            phash[cached_rows], dhash[cached_rows] = cached.phash, cached.dhash
            digest[cached_rows] = cached.digest
            low[cached_rows] = cached.low_information
            for position, reason in cached.errors.items():
                errors[files[position]] = reason
            if cached.orientations is not None:
                entries = cached.orientations
                turned.append((cached_rows[entries.owner], entries.phash, entries.dhash))
        served = set(files) if cache_dir is not None else set()
        rows, sources = [], []
        for i, (data, path) in enumerate(zip(datas, paths, strict=True)):
            if i in served:
                continue
            source = data if data is not None else path
            if source is None:
                errors[i] = "no image (the cell has neither bytes nor a path)"
                continue
            rows.append(i)
            sources.append(source)
    if rows:
        # The whole map batch as one batch: what hash_image would give row by row.
        names = [s if isinstance(s, str) else "<in-memory bytes>" for s in sources]
        table, notes = hashes_and_notes(
            sources, names, decode=options, dihedral=dihedral, crop_entries=crop_entries
        )
        at = np.asarray(rows, dtype=np.int64)
        phash[at], dhash[at], digest[at] = table.phash, table.dhash, table.digest
        low[at] = table.low_information
        for position, reason in table.errors.items():
            errors[rows[position]] = reason
        for position in sorted(notes):
            warnings.warn(notes[position], ImageDecodeWarning, stacklevel=2)
        if table.orientations is not None:
            entries = table.orientations
            turned.append((at[entries.owner], entries.phash, entries.dhash))
    columns: dict[str, Any] = {
        "phash": pa.array(phash, type=pa.uint64()),
        "dhash": pa.array(dhash, type=pa.uint64()),
        "digest": pa.array(digest, type=pa.uint64()),
        "low_information": pa.array(low, type=pa.bool_()),
        "error": pa.array(errors, type=pa.string()),
        "source_path": pa.array(paths, type=pa.string()),
    }
    if dihedral:
        owner = np.concatenate([part[0] for part in turned]) if turned else np.zeros(0, np.int64)
        # Parts cover disjoint rows and keep each row's entries in order: a stable sort
        # by row puts every row's entries together, canonical first.
        order = np.argsort(owner, kind="stable")
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.bincount(owner, minlength=n), out=offsets[1:])
        for name, k in zip(_ORIENTATION_COLUMNS, (1, 2), strict=True):
            values = (
                np.concatenate([part[k] for part in turned])[order]
                if turned
                else np.zeros(0, dtype=np.uint64)
            )
            columns[name] = pa.ListArray.from_arrays(
                pa.array(offsets), pa.array(values, type=pa.uint64())
            )
    return pa.table(columns)


def _default_batch_size(raw: Dataset) -> int:
    """Rows per ``map`` batch holding about ``_BATCH_BYTES`` of the (only) image column."""
    table = raw.data
    per_row = table.nbytes / max(1, table.num_rows)
    low, high = _BATCH_ROWS
    return int(min(high, max(low, _BATCH_BYTES // max(1.0, per_row))))


def _hashes_fingerprint(raw: Dataset, column: str, fn_kwargs: Mapping[str, Any]) -> str | None:
    """The fingerprint of the hashes of ``raw``: its own, the hashing code's and the options.

    What ``datasets`` would compute from the map's arguments, without pickling
    them (about 1 ms per call), and more: ``datasets`` pickles ``_hash_batch``
    by reference, so a change to leakaudit's decoding or hashing code never
    entered its fingerprint; :func:`leakaudit.cache.hash_context` (the key of
    leakaudit's own hash cache) does, so hashes cached by another version of
    that code are never read back. The batch size is left out, as it changes no
    hash. None (let ``datasets`` compute it) when the dataset has no fingerprint.
    """
    import hashlib

    own = getattr(raw, "_fingerprint", None)
    if not isinstance(own, str) or not own:
        return None
    # hash_context: leakaudit's hash version, a fingerprint of the decoding and hashing
    # code, the Pillow and numpy versions and every decode option, as the hash cache keys.
    context = hash_context(
        fn_kwargs["options"], crop_entries=bool(fn_kwargs.get("crop_entries", False))
    )
    text = repr((own, column, "leakaudit.hash_dataset", context, sorted(fn_kwargs.items())))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@contextlib.contextmanager
def _progress_bars(progress: bool | None) -> Iterator[None]:
    datasets = _require_datasets()
    if progress is None:
        yield
        return
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be a bool or None; got {describe(progress)}.")
    was_disabled = datasets.are_progress_bars_disabled()
    if progress:
        datasets.enable_progress_bars()
    else:
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_disabled:
            datasets.disable_progress_bars()
        else:
            datasets.enable_progress_bars()


def hash_dataset(
    dataset: Dataset,
    *,
    image_column: str | None = None,
    num_proc: int | None = None,
    batch_size: int | None = None,
    progress: bool | None = None,
    decode: DecodeOptions | None = None,
    load_from_cache_file: bool | None = None,
    desc: str | None = None,
    dihedral: bool = False,
    cache: CacheSpec = True,
    crop_entries: bool = False,
) -> Dataset:
    """Return a dataset of the hashes of ``dataset``'s images, one row per row.

    Columns: ``phash``, ``dhash``, ``digest`` (``uint64``), ``low_information``
    (bool), ``error`` (why the image could not be read, or None) and
    ``source_path`` (the stored path, or None); with ``dihedral=True`` also
    ``orientation_phash`` and ``orientation_dhash`` (lists of ``uint64`` of one
    length per row: the hashes of the image turned to its canonical
    orientation(s), canonical first; empty for unreadable and low-information
    images). Computed with ``Dataset.map(batched=True)``, so ``datasets``
    caches it for datasets stored on disk; the cache of a plain run and that of
    a dihedral run are kept apart.

    Parameters
    ----------
    dataset : datasets.Dataset
        The images.
    image_column : str, optional
        See :func:`find_image_column`.
    num_proc : int, optional
        Processes for ``Dataset.map`` (default: this process only).
    batch_size : int, optional
        Rows per ``map`` batch. Default: as many rows as hold about 64 MB of
        encoded images, between 16 and 1,000 (1,000 for small files: a batch
        costs about 1.5 ms on its own; a few for 4K photos, whose bytes the
        batch holds in memory).
    progress : bool, optional
        Show (True) or hide (False) the ``datasets`` progress bar for this call;
        None leaves the ``datasets`` setting alone.
    decode : DecodeOptions, optional
        How images are decoded before hashing.
    load_from_cache_file : bool, optional
        As in ``Dataset.map`` (None: use the cache when caching is enabled).
    desc : str, optional
        Progress bar label.
    dihedral : bool, default False
        Also hash each image turned to its canonical orientation(s), for
        matching mirrored, flipped and rotated copies
        (:func:`leakaudit.hashing.hash_image`).
    cache : bool, path or HashCache, default True
        leakaudit's persistent hash cache (as in :func:`leakaudit.audit_splits`)
        for image cells that are file paths; cells holding bytes are hashed
        from their bytes and never cached (``datasets``' own map cache covers
        datasets stored on disk). False: no cache.
    crop_entries : bool, default False
        With ``dihedral``, also the crop entries of the verification's
        candidate net (:func:`leakaudit.hashing.hash_sources`), in the
        orientation columns after each row's orientations (the audit asks for
        them: :func:`leakaudit.audit.wants_crop_entries`).

    Returns
    -------
    datasets.Dataset
    """
    datasets = _require_datasets()
    check_dihedral(dihedral)
    check_bool("crop_entries", crop_entries)
    column = find_image_column(dataset, image_column)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, 1)
    if num_proc is not None:
        num_proc = check_int("num_proc", num_proc, 1)
    options = decode if decode is not None else DecodeOptions()
    if not isinstance(options, DecodeOptions):
        raise TypeError(f"decode must be a DecodeOptions; got {describe(options)}.")
    columns = {
        "phash": datasets.Value("uint64"),
        "dhash": datasets.Value("uint64"),
        "digest": datasets.Value("uint64"),
        "low_information": datasets.Value("bool"),
        "error": datasets.Value("string"),
        "source_path": datasets.Value("string"),
    }
    if dihedral:
        for name in _ORIENTATION_COLUMNS:
            columns[name] = datasets.Sequence(datasets.Value("uint64"))
    features = datasets.Features(columns)
    resolved = resolve_cache(cache)
    cache_dir = str(resolved.directory) if resolved is not None else None
    raw = dataset.select_columns([column]).cast_column(column, datasets.Image(decode=False))
    if len(raw) == 0:
        return datasets.Dataset.from_dict({name: [] for name in columns}, features=features)
    fn_kwargs = {
        "options": options,
        "dihedral": dihedral,
        "cache_dir": cache_dir,
        "crop_entries": crop_entries,
    }
    with _progress_bars(progress):
        return raw.map(
            _hash_batch,
            batched=True,
            batch_size=batch_size if batch_size is not None else _default_batch_size(raw),
            input_columns=[column],
            remove_columns=[column],
            fn_kwargs=fn_kwargs,
            features=features,
            new_fingerprint=_hashes_fingerprint(raw, column, fn_kwargs),
            num_proc=num_proc if num_proc and num_proc > 1 else None,
            load_from_cache_file=load_from_cache_file,
            desc=desc or "leakaudit: hashing",
        )


def _hash_splits(
    splits: Mapping[str, Any],
    *,
    image_column: str | None,
    num_proc: int | None,
    batch_size: int | None,
    progress: bool | None,
    on_error: str,
    decode: DecodeOptions,
    load_from_cache_file: bool | None,
    dihedral: bool = False,
    cache: CacheSpec = True,
    crop_entries: bool = False,
) -> tuple[HashTable, list[str], list[int], list[str]]:
    check_choice("on_error", on_error, ("warn", "raise", "ignore"))
    parts: list[Any] = []
    split: list[str] = []
    index: list[int] = []
    names: list[str] = []
    errors: dict[int, str] = {}
    for name, dataset in splits.items():
        hashed = hash_dataset(
            dataset,
            image_column=image_column,
            num_proc=num_proc,
            batch_size=batch_size,
            progress=progress,
            decode=decode,
            load_from_cache_file=load_from_cache_file,
            desc=f"leakaudit: hashing {name}",
            dihedral=dihedral,
            cache=cache,
            crop_entries=crop_entries,
        )
        table = hashed.with_format("arrow")[:]
        parts.append(table)
        start = len(split)
        n = table.num_rows
        split.extend([name] * n)
        index.extend(range(n))
        for offset, (path, reason) in enumerate(
            zip(
                table.column("source_path").to_pylist(),
                table.column("error").to_pylist(),
                strict=True,
            )
        ):
            names.append(path if path else f"{name}[{offset}]")
            if reason is not None:
                errors[start + offset] = reason

    def column(name: str, dtype: Any) -> np.ndarray[Any, Any]:
        arrays = [np.asarray(t.column(name).to_numpy(), dtype=dtype) for t in parts]
        return np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)

    valid = np.ones(len(split), dtype=np.bool_)
    if errors:
        valid[np.fromiter(errors, dtype=np.int64)] = False
    table = HashTable(
        sources=names,
        phash=column("phash", np.uint64),
        dhash=column("dhash", np.uint64),
        digest=column("digest", np.uint64),
        low_information=column("low_information", np.bool_) & valid,
        valid=valid,
        errors=errors,
        orientations=_orientations(parts) if dihedral else None,
    )
    apply_on_error(
        errors,
        on_error,
        total=len(split),
        name_of=lambda i: f"{split[i]}[{index[i]}] {names[i]}",
        stacklevel=3,
    )
    return table, split, index, names


def _orientations(parts: Sequence[Any]) -> OrientationHashes:
    """The orientation entries of the hashed splits' Arrow tables, rows numbered across them.

    Each row's entries are kept in their order (canonical first); rows are
    consecutive, so owners come out ascending.
    """
    pieces: list[OrientationHashes] = []
    start = 0
    for table in parts:
        # One ListArray per column; flatten() and value_lengths() honour a sliced
        # array's offset (``.values`` would not).
        turned = [table.column(name).combine_chunks() for name in _ORIENTATION_COLUMNS]
        counts = [
            np.asarray(t.value_lengths().fill_null(0).to_numpy(), dtype=np.int64) for t in turned
        ]
        if not np.array_equal(counts[0], counts[1]):
            raise ValueError(
                "orientation_phash and orientation_dhash must have one length per row; the "
                "hashed dataset is inconsistent (re-run with load_from_cache_file=False)."
            )
        pieces.append(
            OrientationHashes(
                owner=np.repeat(
                    np.arange(start, start + table.num_rows, dtype=np.int64), counts[0]
                ),
                phash=np.asarray(turned[0].flatten().to_numpy(), dtype=np.uint64),
                dhash=np.asarray(turned[1].flatten().to_numpy(), dtype=np.uint64),
            )
        )
        start += table.num_rows
    return OrientationHashes.merge(pieces)


def _audit(
    splits: Mapping[str, Any],
    *,
    labels: Sequence[str] | None = None,
    image_column: str | None,
    method: str,
    threshold: ThresholdSpec,
    num_proc: int | None,
    batch_size: int | None,
    progress: bool | None,
    on_error: str,
    decode: DecodeOptions | None,
    load_from_cache_file: bool | None,
    dihedral: bool = False,
    cache: CacheSpec = True,
    verify: VerifySpec = "auto",
    workers: int | None = None,
) -> LeakageReport:
    resolve_threshold(method, threshold)
    check_dihedral(dihedral)
    options = hashing_options(decode, dihedral=dihedral, verify=verify)
    table, split, index, names = _hash_splits(
        splits,
        image_column=image_column,
        num_proc=num_proc,
        batch_size=batch_size,
        progress=progress,
        on_error=on_error,
        decode=options,
        load_from_cache_file=load_from_cache_file,
        dihedral=dihedral,
        cache=cache,
        crop_entries=wants_crop_entries(dihedral=dihedral, verify=verify),
    )
    report = audit_hash_table(
        table,
        list(labels) if labels is not None else split,
        names=names,
        method=method,
        threshold=threshold,
        dihedral=dihedral,
        extra_parameters=decode_parameters(options),
        extra_columns={"index": np.asarray(index, dtype=np.int64)},
        verify=verify,
        decode=options,
        workers=workers,
        images=_verification_images(
            splits,
            table,
            split,
            index,
            image_column=image_column,
            method=method,
            threshold=threshold,
            verify=verify,
            dihedral=dihedral,
        ),
    )
    return report


def _verification_images(
    splits: Mapping[str, Any],
    table: HashTable,
    split: Sequence[str],
    index: Sequence[int],
    *,
    image_column: str | None,
    method: str,
    threshold: ThresholdSpec,
    verify: VerifySpec,
    dihedral: bool,
) -> list[Any]:
    """One image per row where the audit reads it again, else None.

    The rows' own cells, fetched by index from their split: the encoded bytes
    when the cell holds them (a stored path may be just the original file's
    name), else the path when it names a file. So a ``DatasetDict`` of bytes is
    verified exactly as the same images in folders are.
    """
    datasets = _require_datasets()
    images: list[Any] = [None] * len(split)
    needed = rows_verification_reads(
        table, method=method, threshold=threshold, verify=verify, dihedral=dihedral
    )
    by_split: dict[str, list[int]] = {}
    for row in needed.tolist():
        by_split.setdefault(split[row], []).append(row)
    for name, rows in by_split.items():
        dataset = splits[name]
        column = find_image_column(dataset, image_column)
        raw = dataset.select_columns([column]).cast_column(column, datasets.Image(decode=False))
        cells = raw.select([index[row] for row in rows])[column]
        for row, cell in zip(rows, cells, strict=True):
            cell = cell if isinstance(cell, Mapping) else {}
            data, path = cell.get("bytes"), cell.get("path")
            if data is not None:
                images[row] = bytes(data)
            elif isinstance(path, str) and os.path.isabs(path) and os.path.isfile(path):
                images[row] = path
    return images


def audit_dataset_dict(
    dataset_dict: DatasetDict | Mapping[str, Dataset],
    *,
    image_column: str | None = None,
    method: str = DEFAULT_METHOD,
    threshold: ThresholdSpec = None,
    num_proc: int | None = None,
    batch_size: int | None = None,
    progress: bool | None = None,
    on_error: str = "warn",
    decode: DecodeOptions | None = None,
    load_from_cache_file: bool | None = None,
    dihedral: bool = True,
    verify: VerifySpec = "auto",
    cache: CacheSpec = True,
    workers: int | None = None,
) -> LeakageReport:
    """Audit the splits of a ``DatasetDict`` for near-duplicate images across splits.

    Parameters
    ----------
    dataset_dict : DatasetDict or mapping of str to Dataset
        The splits.
    image_column : str, optional
        The ``Image`` column (auto-detected when there is exactly one).
    method, on_error, decode
        As in :func:`leakaudit.audit.audit_splits`.
    threshold : int or mapping of str to int, optional
        As in :func:`leakaudit.audit.audit_splits`: an int, or rules per split
        name or path pattern (``{"test": 4, "*": 8}``, see
        :func:`leakaudit.policy.row_thresholds`); patterns match the ``path``
        column (the stored path, or ``"split[index]"``). With a mapping,
        ``report.table`` has a ``threshold`` column.
    num_proc : int, optional
        Processes for hashing (``Dataset.map``'s ``num_proc``, the ``datasets``
        name): the hashing half of the core's ``workers``.
    batch_size : int, optional
        Rows per ``map`` batch. Default: as many rows as hold about 64 MB of
        encoded images, between 16 and 1,000 (1,000 for small files: a batch
        costs about 1.5 ms on its own; a few for 4K photos, whose bytes the
        batch holds in memory).
    progress : bool, optional
        Show or hide the ``datasets`` progress bars (None: its own setting).
    load_from_cache_file : bool, optional
        As in ``Dataset.map``: False forces re-hashing.
    dihedral : bool, default True
        Also match copies that are mirrored, flipped or rotated by 90, 180 or
        270 degrees, as in :func:`leakaudit.audit.audit_splits`. The hashing
        ``map`` then has its own cache, apart from that of plain audits; the
        report's ``parameters`` record ``"dihedral": True``.
    verify : "auto", bool or VerifyOptions, default "auto"
        Hashes propose, verification decides (as in
        :func:`leakaudit.audit_splits`); False links every pair within the
        threshold.
    cache : bool, path or HashCache, default True
        leakaudit's hash cache for image cells that are file paths (as in
        :func:`hash_dataset`); cells of bytes rely on ``datasets``' map cache.
    workers : int, optional
        Threads that decode candidate pairs for verification (the
        verification half of the core's ``workers``; hashing runs in
        ``num_proc`` processes); default all usable cores.

    Returns
    -------
    LeakageReport
        ``report.table`` holds one row per image, split by split, with its
        ``index`` in the split.

    Examples
    --------
    >>> from datasets import Dataset, DatasetDict, Features, Image
    >>> from leakaudit.demo import photo_like_image
    >>> features = Features({"image": Image()})
    >>> a, b = photo_like_image(1), photo_like_image(2)
    >>> dd = DatasetDict({
    ...     "train": Dataset.from_dict({"image": [a, b]}, features=features),
    ...     "test": Dataset.from_dict({"image": [a.resize((96, 72))]}, features=features),
    ... })
    >>> audit_dataset_dict(dd, progress=False).n_leaked_images
    2
    """
    splits = _as_splits(dataset_dict)
    return _audit(
        splits,
        image_column=image_column,
        method=method,
        threshold=threshold,
        num_proc=num_proc,
        batch_size=batch_size,
        progress=progress,
        on_error=on_error,
        decode=decode,
        load_from_cache_file=load_from_cache_file,
        dihedral=dihedral,
        cache=cache,
        verify=verify,
        workers=workers,
    )


# ----------------------------------------------------------------------- re-split


def _target_features(
    destination: str, sources: Sequence[str], splits: Mapping[str, Any]
) -> tuple[Any, list[str]]:
    """The destination's features, with ClassLabel names extended for arriving classes."""
    datasets = _require_datasets()
    features = splits[destination].features.copy()
    added: list[str] = []
    for source in dict.fromkeys(sources):
        incoming = splits[source].features
        if set(incoming) != set(features):
            raise ValueError(
                f"split {source!r} must have the same columns as split {destination!r} to move "
                f"rows into it; got {sorted(incoming)} vs {sorted(features)}."
            )
        for column, feature in features.items():
            other = incoming[column]
            if isinstance(feature, datasets.ClassLabel) and isinstance(other, datasets.ClassLabel):
                missing = [n for n in other.names if n not in feature.names]
                if missing:
                    added.extend(missing)
                    features[column] = datasets.ClassLabel(names=[*feature.names, *missing])
    return features, added


def _remap_labels(batch: dict[str, Any], lookups: dict[str, list[int]]) -> dict[str, Any]:
    for column, lookup in lookups.items():
        batch[column] = [lookup[v] if v is not None and v >= 0 else v for v in batch[column]]
    return batch


def _conform(part: Any, features: Any) -> Any:
    """Cast ``part`` to ``features``, remapping ClassLabel ids by name."""
    datasets = _require_datasets()
    if part.features == features:
        return part
    lookups: dict[str, list[int]] = {}
    for column, feature in features.items():
        own = part.features[column]
        if (
            isinstance(feature, datasets.ClassLabel)
            and isinstance(own, datasets.ClassLabel)
            and own.names != feature.names[: len(own.names)]
        ):
            lookups[column] = [feature.names.index(name) for name in own.names]
    if lookups and len(part):
        part = part.map(
            _remap_labels,
            batched=True,
            fn_kwargs={"lookups": lookups},
            features=features,
            desc="leakaudit: remapping labels",
        )
    return part.cast(features) if part.features != features else part


def clean_dataset_dict(
    dataset_dict: DatasetDict | Mapping[str, Dataset],
    *,
    report: LeakageReport | None = None,
    priority: Sequence[str] | None = None,
    policy: str = "move",
    unreadable: str = "drop",
    record_column: str | None = None,
    **audit_options: Any,
) -> ResplitResult:
    """Return a new ``DatasetDict`` in which no duplicate group spans two splits.

    Each destination split is its own surviving rows (in order) followed by the
    rows moved into it (``select`` + ``concatenate_datasets``); nothing is
    decoded or re-encoded, and the input datasets are untouched. Features are
    kept, ``ClassLabel`` included: a moved row's label is remapped by class name
    when the splits' ``ClassLabel`` names differ (a name the destination lacks is
    appended, with a warning).

    Parameters
    ----------
    dataset_dict : DatasetDict or mapping of str to Dataset
        The splits, as audited.
    report : LeakageReport, optional
        The result of :func:`audit_dataset_dict` on these very splits; audited now
        when not given.
    priority : sequence of str, optional
        Default ``("train", "val", "test")``; ``val`` also matches ``valid``,
        ``validation`` and ``dev``.
        Split precedence, highest first.
    policy : {"move", "drop"}, default "move"
        ``"move"``: a leaked group goes whole to its highest-priority split.
        ``"drop"``: its rows in the lower-priority splits are removed instead, so
        train never grows.
    unreadable : {"drop", "copy", "fail"}, default "drop"
        Images the audit could not decode (an ``error`` in ``report.table``):
        ``"drop"`` leaves them out of the clean splits (named in a warning and in
        ``moves``, so a DataLoader over the result never meets one), ``"copy"``
        keeps them where they were, ``"fail"`` raises a ValueError naming them.
    record_column : str, optional
        When given, add a string column of this name holding each row's original
        split (what moved is then visible in the data itself).
    **audit_options
        Passed to :func:`audit_dataset_dict` when ``report`` is None, e.g.
        ``threshold`` (an int or per-split / path-pattern rules such as
        ``{"test": 4, "*": 8}``) and ``dihedral`` (bool, default False: also
        treat mirrored, flipped and rotated copies as leaks, so they are moved
        too). Validated before anything is hashed.

    Returns
    -------
    ResplitResult
        ``result.splits`` (a ``DatasetDict``), ``result.moves`` (one row per
        moved or dropped image: ``split``, ``index``, ``new_split``,
        ``group_id``, ``path``) and ``result.report``.

    Examples
    --------
    >>> from datasets import Dataset, DatasetDict, Features, Image
    >>> from leakaudit.demo import photo_like_image
    >>> features = Features({"image": Image()})
    >>> a, b = photo_like_image(1), photo_like_image(2)
    >>> dd = DatasetDict({
    ...     "train": Dataset.from_dict({"image": [a, b]}, features=features),
    ...     "test": Dataset.from_dict({"image": [a.resize((96, 72))]}, features=features),
    ... })
    >>> result = clean_dataset_dict(dd, progress=False)
    >>> {name: part.num_rows for name, part in result.splits.items()}
    {'train': 3, 'test': 0}
    """
    datasets = _require_datasets()
    check_choice("policy", policy, ("move", "drop"))
    check_choice("unreadable", unreadable, ("drop", "copy", "fail"))
    splits = _as_splits(dataset_dict)
    if report is None:
        report = audit_dataset_dict(splits, **audit_options)
    elif audit_options:
        raise TypeError(
            "audit options (" + ", ".join(sorted(audit_options)) + ") apply only when "
            "report is not given."
        )
    if record_column is not None and any(record_column in d.column_names for d in splits.values()):
        raise ValueError(f"record_column must be a new column name; got {record_column!r}.")
    check_report_matches(
        report, {name: len(d) for name, d in splits.items()}, "leakaudit.adapters.huggingface"
    )
    assert report.table is not None
    plan = clean_splits(report.table, priority, policy=policy)
    plan = leave_out_unreadable(plan, unreadable)
    rows = destination_rows(plan, list(splits))

    sources_by_name = dict(splits)
    if record_column is not None:
        # Added to each whole split once (a zero-copy append), before any select(),
        # so no indices mapping has to be flattened.
        sources_by_name = {
            name: d.add_column(record_column, [name] * len(d), feature=datasets.Value("string"))
            for name, d in splits.items()
        }
    out = datasets.DatasetDict()
    for destination in splits:
        dataset = sources_by_name[destination]
        wanted = rows[destination]
        if wanted == [(destination, i) for i in range(len(dataset))]:
            out[destination] = dataset
            continue
        # Consecutive rows from one source become one select().
        runs: list[tuple[str, list[int]]] = []
        for source, index in wanted:
            if runs and runs[-1][0] == source:
                runs[-1][1].append(index)
            else:
                runs.append((source, [index]))
        parts = [sources_by_name[source].select(indices) for source, indices in runs]
        sources = [source for source, _ in runs]
        if not parts:
            parts, sources = [dataset.select([])], [destination]
        features, added = _target_features(destination, sources, sources_by_name)
        if added:
            warnings.warn(
                f"split {destination!r} receives rows of classes its ClassLabel lacked "
                f"({', '.join(added)}); they were appended to its names.",
                ClassMismatchWarning,
                stacklevel=2,
            )
        parts = [_conform(part, features) for part in parts]
        out[destination] = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    return ResplitResult(splits=out, moves=moves_table(plan), report=report, policy=policy)


# ------------------------------------------------------------- group-aware split


def leak_free_split(
    dataset: Dataset,
    sizes: Mapping[str, float | int],
    *,
    seed: int | None = None,
    stratify_by_column: str | None = None,
    image_column: str | None = None,
    method: str = DEFAULT_METHOD,
    threshold: ThresholdSpec = None,
    num_proc: int | None = None,
    batch_size: int | None = None,
    progress: bool | None = None,
    on_error: str = "warn",
    decode: DecodeOptions | None = None,
    load_from_cache_file: bool | None = None,
    dihedral: bool = True,
    verify: VerifySpec = "auto",
    cache: CacheSpec = True,
    workers: int | None = None,
) -> GroupSplitResult:
    """Split one ``Dataset`` into a ``DatasetDict`` without splitting any duplicate group.

    The "deduplicate before splitting" rule: near-duplicates are grouped first
    and every group lands in one split, with split sizes as close to ``sizes`` as
    the groups allow (the deviation is in ``result.plan``).

    Parameters
    ----------
    dataset : datasets.Dataset
        The images to split.
    sizes : mapping of str to float or int
        Split name -> fraction (summing to 1) or row count (summing to
        ``len(dataset)``), e.g. ``{"train": 0.8, "val": 0.1, "test": 0.1}``.
    seed : int, optional
        Seed of the random assignment.
    stratify_by_column : str, optional
        A label column (e.g. a ``ClassLabel``) whose proportions each split keeps.
    image_column, method, num_proc, batch_size, progress, on_error, decode, workers,\
 load_from_cache_file
        As in :func:`audit_dataset_dict`.
    threshold : int or mapping of str to int, optional
        As in :func:`audit_dataset_dict`. The dataset is audited as one split
        named ``"dataset"``, so a mapping's rules are path patterns (or
        ``"*"``, or ``"dataset"``).
    dihedral : bool, default True
        Also keep mirrored, flipped and rotated copies together, as in
        :func:`audit_dataset_dict`.
    verify : "auto", bool or VerifyOptions, default "auto"
        Hashes propose, verification decides (as in
        :func:`leakaudit.audit_splits`); False links every pair within the
        threshold.
    cache : bool, path or HashCache, default True
        As in :func:`audit_dataset_dict`.

    Returns
    -------
    GroupSplitResult
        ``result.splits`` (a ``DatasetDict``; rows keep their original order),
        ``result.plan`` (sizes asked for and obtained) and ``result.report``
        (the duplicate groups found).

    Examples
    --------
    >>> from datasets import Dataset, Features, Image
    >>> from leakaudit.demo import photo_like_image
    >>> images = [photo_like_image(i) for i in range(8)]
    >>> images.append(images[0].resize((96, 72)))
    >>> ds = Dataset.from_dict({"image": images}, features=Features({"image": Image()}))
    >>> result = leak_free_split(ds, {"train": 0.5, "test": 0.5}, seed=0, progress=False)
    >>> sorted(result.splits.num_rows.values())
    [4, 5]
    """
    datasets = _require_datasets()
    if not isinstance(dataset, datasets.Dataset):
        raise TypeError(f"dataset must be a datasets.Dataset; got {type(dataset).__name__}.")
    resolve_threshold(method, threshold)
    check_dihedral(dihedral)
    if not isinstance(sizes, Mapping) or not sizes:
        raise TypeError(
            "sizes must be a non-empty mapping of split name to fraction or count; "
            f"got {describe(sizes)}."
        )
    names = [str(name) for name in sizes]
    resolve_lengths(list(sizes.values()), len(dataset))  # bad sizes fail before the audit
    labels = None
    if stratify_by_column is not None:
        if stratify_by_column not in dataset.column_names:
            raise ValueError(
                f"stratify_by_column must be a column of the dataset ({dataset.column_names}); "
                f"got {stratify_by_column!r}."
            )
        labels = (
            dataset.select_columns([stratify_by_column])
            .with_format("arrow")[:]
            .column(stratify_by_column)
            .to_pylist()
        )
    report = _audit(
        {"dataset": dataset},
        image_column=image_column,
        method=method,
        threshold=threshold,
        num_proc=num_proc,
        batch_size=batch_size,
        progress=progress,
        on_error=on_error,
        decode=decode,
        load_from_cache_file=load_from_cache_file,
        dihedral=dihedral,
        cache=cache,
        verify=verify,
        workers=workers,
    )
    assert report.table is not None
    group_ids = report.table["group_id"].to_numpy()
    plan = split_groups(group_ids, list(sizes.values()), names=names, seed=seed, labels=labels)
    assignment = plan.assignment
    out = datasets.DatasetDict(
        {
            name: dataset.select(np.flatnonzero(assignment == k).tolist())
            for k, name in enumerate(names)
        }
    )
    # A new report with the assignment beside each row: the audit's own stays as built.
    table = report.table.copy()
    table.insert(3, "assigned_split", np.array([names[k] for k in assignment], dtype=object))
    return GroupSplitResult(splits=out, plan=plan, report=dataclasses.replace(report, table=table))
