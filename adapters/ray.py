"""Audit a Ray Dataset of images on a Ray cluster, and re-split it leak-free.

Install with ``pip install 'leakaudit-vision[ray]'``. ``ray`` is imported only
inside the functions that need it.

How it runs
-----------
Hashing is one ``Dataset.map_batches`` over the dataset: each batch goes
through the core's own :func:`leakaudit.hashing.hash_sources` (in the task's
process, decoding exactly as :func:`leakaudit.audit_splits` does:
:func:`leakaudit.audit.hashing_options`), and comes out as rows of the hash
shard schema (:mod:`leakaudit.shards`): ``id, split, phash, dhash, error``, the
orientation entries, and so on. Those rows (about 300 bytes an image with the
default dihedral entries, plus its id) come back to the driver, which groups
them as every other entry point does
(:func:`leakaudit.shards.audit_hash_shards`, hence
:func:`leakaudit.audit.audit_hash_table`) and returns the same
:class:`~leakaudit.report.LeakageReport`. Optionally the rows are also written
as Parquet shards (``hashes_out=``), which ``leakaudit group`` reads back.

Verification (``verify="auto"``, the default) decodes the candidate pairs
again, on the driver: rows whose ``path`` the driver can read are read from
their files; the other candidate rows (encoded bytes, arrays, files only the
workers see) are fetched from the dataset in one more filtered pass that
returns those rows only.

Images
------
The image column may hold encoded file bytes (``ray.data.read_binary_files``),
numpy arrays (``ray.data.read_images``: ``uint8`` of shape ``H x W``,
``H x W x 3`` or ``H x W x 4``; they are hashed as PIL images, so no EXIF and
no reduced JPEG decode), file paths, or ``{"bytes": ..., "path": ...}``
structs (Hugging Face's image cells). An image that cannot be read becomes a
row with its ``error`` (the core's wording) and takes no part in grouping; one
:class:`~leakaudit.hashing.UnreadableImageWarning` names them all.

Rows
----
Ray Datasets have no stable row numbers, so each row is identified by an id:
``id_column`` (strings or integers), else an ``id`` column, else the path
column (``path``, as ``read_images(..., include_paths=True)`` adds), else the
image column when it holds paths. Ids must be unique. ``report.table`` holds
the rows in the dataset's order (hashing runs with ``preserve_order``), with an
``id`` column; :func:`clean_ray_dataset` finds rows by it.

The persistent hash cache is not used (workers may sit on other machines);
results are the same either way.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from PIL import Image

from leakaudit._validation import check_choice, check_int, describe
from leakaudit.adapters._common import ResplitResult, check_dihedral, rows_verification_reads
from leakaudit.audit import VerifySpec, hashing_options, wants_crop_entries
from leakaudit.cleaning import CLEAN_POLICIES, clean_splits
from leakaudit.hashing import (
    ON_ERROR_CHOICES,
    HashTable,
    OrientationHashes,
    hash_sources,
)
from leakaudit.loading import DecodeOptions
from leakaudit.policy import DEFAULT_METHOD, ThresholdSpec, resolve_threshold
from leakaudit.report import LeakageReport
from leakaudit.shards import (
    HashShards,
    audit_hash_shards,
    check_new_shard_folder,
    hash_shard_table,
    hashing_metadata,
    require_pyarrow,
    shard_files,
)

if TYPE_CHECKING:
    from ray.data import Dataset

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "audit_ray_dataset",
    "clean_ray_dataset",
    "hash_ray_dataset",
    "leak_free_ray_splits",
    "relabel_ray_dataset",
    "write_hash_shards",
]

_INSTALL_HINT = "pip install 'leakaudit-vision[ray]'"
#: Images per ``map_batches`` batch: about 0.7 s of hashing of ~100 KB JPEGs, several
#: times Ray's per-task cost (0.1-0.2 s measured on a loaded 2-core machine; at 64 images
#: a task it ate the second worker's gain, ``benchmarks/bench_ray.py``), small enough to
#: balance the last tasks and to hold a batch of encoded images in memory.
DEFAULT_BATCH_SIZE = 256


def _require_ray() -> Any:
    try:
        import ray
        import ray.data  # the submodule holds Dataset
    except ImportError as exc:  # pragma: no cover - exercised only without ray
        raise ImportError(f"leakaudit.adapters.ray needs Ray Data: {_INSTALL_HINT}") from exc
    return ray


def _check_dataset(ds: Any, name: str = "ds") -> None:
    ray = _require_ray()
    if not isinstance(ds, ray.data.Dataset):
        raise TypeError(f"{name} must be a ray.data.Dataset; got {describe(ds)}.")


# ------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class _RowSpec:
    """Which columns hold what: read by the hashing, the fetch and the re-split alike."""

    image_column: str
    split_column: str
    id_column: str  # the column ids come from: the id, path or image column
    path_column: str | None


def _row_spec(
    ds: Any,
    image_column: str,
    split_column: str,
    id_column: str | None,
    path_column: str | None,
) -> _RowSpec:
    for name, given in (("image_column", image_column), ("split_column", split_column)):
        if not isinstance(given, str):
            raise TypeError(f"{name} must be a column name (str); got {describe(given)}.")
    for name, optional in (("id_column", id_column), ("path_column", path_column)):
        if optional is not None and not isinstance(optional, str):
            raise TypeError(
                f"{name} must be a column name (str) or None; got {describe(optional)}."
            )
    schema = ds.schema()
    if schema is None:  # an empty dataset: nothing to check against
        return _RowSpec(image_column, split_column, id_column or image_column, path_column)
    names = list(schema.names)
    types = dict(zip(names, schema.types, strict=True))
    listing = ", ".join(names)
    for option, column in (
        ("image_column", image_column),
        ("split_column", split_column),
        ("id_column", id_column),
        ("path_column", path_column),
    ):
        if column is not None and column not in names:
            raise ValueError(
                f"{option} must name a column of the dataset ({listing}); got {column!r}."
            )
    if path_column is None and "path" in names and image_column != "path":
        path_column = "path"
    source = id_column
    if source is None:
        if "id" in names:
            source = "id"
        elif path_column is not None:
            source = path_column
        elif _is_text_type(types[image_column]):
            source = image_column
        else:
            raise ValueError(
                f"each row needs an id (Ray Datasets have no stable row numbers) and the "
                f"dataset has no id or path column ({listing}): pass id_column=, or read the "
                "images with include_paths=True."
            )
    kind = types[source]
    if isinstance(kind, require_pyarrow().DataType) and not (
        _is_text_type(kind) or _is_integer_type(kind)
    ):
        raise ValueError(f"the id column {source!r} must hold strings or integers; got {kind}.")
    return _RowSpec(image_column, split_column, source, path_column)


def _is_text_type(kind: Any) -> bool:
    pa = require_pyarrow()
    return isinstance(kind, pa.DataType) and bool(
        pa.types.is_string(kind) or pa.types.is_large_string(kind)
    )


def _is_integer_type(kind: Any) -> bool:
    pa = require_pyarrow()
    return isinstance(kind, pa.DataType) and bool(pa.types.is_integer(kind))


def _id_text(value: Any) -> str:
    if value is None:
        raise ValueError("ids must not be null; a row of the id column is.")
    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        return str(int(value))
    return str(value)


def _batch_ids(batch: Mapping[str, Any], spec: _RowSpec) -> list[str]:
    return [_id_text(value) for value in batch[spec.id_column]]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _as_image(array: NDArray[Any]) -> Image.Image | str:
    """A numpy image cell as a PIL image, or why it cannot be one."""
    shape = array.shape
    if array.dtype == np.uint8 and (array.ndim == 2 or (array.ndim == 3 and shape[2] in (1, 3, 4))):
        if array.ndim == 3 and shape[2] == 1:
            array = array[:, :, 0]
        return Image.fromarray(np.ascontiguousarray(array))
    return (
        f"unsupported image array of shape {tuple(shape)} and dtype {array.dtype} "
        "(expected uint8 H x W, H x W x 3 or H x W x 4)"
    )


def _source_of(cell: Any) -> tuple[Any, str | None, str | None]:
    """``(source for hash_sources, the file's path, why there is no source)`` of one cell."""
    if isinstance(cell, str):
        return cell, cell, None
    if isinstance(cell, (bytes, bytearray, memoryview)):
        return bytes(cell), None, None
    if isinstance(cell, np.ndarray):
        if cell.dtype == object:
            return None, None, f"unsupported image cell (an array of {cell.dtype})"
        image = _as_image(cell)
        return (image, None, None) if not isinstance(image, str) else (None, None, image)
    if isinstance(cell, Mapping):
        data, path = cell.get("bytes"), cell.get("path")
        if data is not None:
            # A struct's path beside its bytes is only a name (a basename after an export).
            return bytes(data), None, None
        if isinstance(path, str):
            return path, path, None
        return None, None, "no image (the cell has neither bytes nor a path)"
    if _missing(cell):
        return None, None, "no image (the cell is empty)"
    return None, None, f"unsupported image cell of type {type(cell).__name__}"


def _expand(
    hashed: HashTable | None, rows: Sequence[int], n: int, errors: dict[int, str], *, dihedral: bool
) -> HashTable:
    """The batch's HashTable: ``hashed`` holds rows ``rows``; the others failed before hashing."""
    index = np.asarray(rows, dtype=np.int64)
    phash = np.zeros(n, dtype=np.uint64)
    dhash = np.zeros(n, dtype=np.uint64)
    digest = np.zeros(n, dtype=np.uint64)
    low = np.zeros(n, dtype=bool)
    valid = np.zeros(n, dtype=bool)
    found = dict(errors)
    orientations = (
        OrientationHashes(np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.uint64))
        if dihedral
        else None
    )
    if hashed is not None:
        phash[index], dhash[index], digest[index] = hashed.phash, hashed.dhash, hashed.digest
        low[index], valid[index] = hashed.low_information, hashed.valid
        found.update({int(index[k]): reason for k, reason in hashed.errors.items()})
        if dihedral and hashed.orientations is not None:
            entries = hashed.orientations
            orientations = OrientationHashes(
                index[entries.owner], entries.phash, entries.dhash, entries.kind
            )
    return HashTable(
        sources=[""] * n,
        phash=phash,
        dhash=dhash,
        digest=digest,
        low_information=low,
        valid=valid,
        errors=dict(sorted(found.items())),
        orientations=orientations,
    )


def _hash_batch(
    batch: dict[str, Any],
    *,
    spec: _RowSpec,
    options: DecodeOptions,
    dihedral: bool,
    hashing: dict[str, Any],
    crop_entries: bool = False,
) -> Any:
    """``map_batches`` function: the core's hashing of one batch, as hash-shard rows.

    Module level (not a closure), so Ray pickles it by reference.
    """
    cells = batch[spec.image_column]
    n = len(cells)
    items: list[Any] = []
    rows: list[int] = []
    errors: dict[int, str] = {}
    paths: list[str | None] = [None] * n
    for row, cell in enumerate(cells):
        source, path, problem = _source_of(cell)
        paths[row] = path
        if problem is not None:
            errors[row] = problem
        else:
            items.append(source)
            rows.append(row)
    hashed = None
    if items:
        hashed = hash_sources(
            items,
            decode=options,
            workers=1,
            progress=False,
            on_error="ignore",
            dihedral=dihedral,
            crop_entries=crop_entries,
        )
    table = _expand(hashed, rows, n, errors, dihedral=dihedral)
    if spec.path_column is not None:
        paths = [None if _missing(v) else str(v) for v in batch[spec.path_column]]
    return hash_shard_table(
        table,
        ids=_batch_ids(batch, spec),
        split=[None if _missing(v) else str(v) for v in batch[spec.split_column]],
        paths=paths,
        hashing=hashing,
    )


def _task_limit(concurrency: int | None) -> dict[str, Any]:
    """``map_batches`` options capping concurrent tasks, in this Ray version's spelling.

    Ray 2.51 deprecated ``concurrency=`` for ``compute=TaskPoolStrategy(size=...)``.
    """
    if concurrency is None:
        return {}
    ray = _require_ray()
    strategy = getattr(ray.data, "TaskPoolStrategy", None)
    if strategy is not None:
        try:
            return {"compute": strategy(size=concurrency)}
        except TypeError:  # an older TaskPoolStrategy without a size
            pass
    return {"concurrency": concurrency}


def _used_columns(spec: _RowSpec) -> list[str]:
    names = [spec.image_column, spec.split_column, spec.id_column, spec.path_column]
    return list(dict.fromkeys(name for name in names if name is not None))


def hash_ray_dataset(
    ds: Dataset,
    *,
    image_column: str = "image",
    split_column: str = "split",
    id_column: str | None = None,
    path_column: str | None = None,
    decode: DecodeOptions | None = None,
    dihedral: bool = True,
    verify: VerifySpec = "auto",
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int | None = None,
) -> Dataset:
    """Return a (lazy) Ray Dataset of the hashes of ``ds``'s images, in the hash-shard schema.

    One row per row of ``ds``: ``id, split, phash, dhash, error, path,
    low_information, digest, phash_hex, dhash_hex`` and, with ``dihedral``,
    ``orientation_phash, orientation_dhash`` (see :mod:`leakaudit.shards`).
    Computed by ``map_batches`` with the core's hashing, so every value equals
    what :func:`leakaudit.hashing.hash_sources` gives for the same image.

    Parameters
    ----------
    ds : ray.data.Dataset
        The images and their splits.
    image_column : str, default "image"
        Encoded bytes, numpy arrays, paths or ``{"bytes", "path"}`` structs.
    split_column : str, default "split"
        Each row's split (a missing one is written as null, which grouping the
        hashes refuses, naming the row).
    id_column : str, optional
        Unique row ids (strings or integers); default an ``id`` column, else
        the path column, else the image column when it holds paths.
    path_column : str, optional
        Each row's file (the shards' ``path``); default a ``path`` column when
        there is one, else the image column's paths. Verification reads it when
        the driver can, so it must be the very image the row holds (as
        ``read_binary_files(..., include_paths=True)`` gives), not another file.
    decode : DecodeOptions, optional
        Decoding settings, as in :func:`leakaudit.audit_splits`.
    dihedral : bool, default True
        Also hash each image turned to its canonical orientation(s).
    verify : "auto", bool or VerifyOptions, default "auto"
        The verification the hashes are for: with ``dihedral``, it adds the
        crop and rotation entries (:func:`leakaudit.audit.wants_crop_entries`).
    batch_size : int, default 256
        Images per ``map_batches`` batch.
    concurrency : int, optional
        Most hashing tasks at once (default: as many as the cluster's CPUs allow).

    Returns
    -------
    ray.data.Dataset
    """
    _check_dataset(ds)
    require_pyarrow()
    check_dihedral(dihedral)
    batch_size = check_int("batch_size", batch_size, 1)
    if concurrency is not None:
        concurrency = check_int("concurrency", concurrency, 1)
    spec = _row_spec(ds, image_column, split_column, id_column, path_column)
    options = hashing_options(decode, dihedral=dihedral, verify=verify)
    crop_entries = wants_crop_entries(dihedral=dihedral, verify=verify)
    return ds.select_columns(_used_columns(spec)).map_batches(
        _hash_batch,
        batch_format="numpy",
        batch_size=batch_size,
        **_task_limit(concurrency),
        fn_kwargs={
            "spec": spec,
            "options": options,
            "dihedral": dihedral,
            "crop_entries": crop_entries,
            "hashing": hashing_metadata(options, dihedral=dihedral, crop_entries=crop_entries),
        },
    )


def write_hash_shards(hashed: Dataset, folder: str | os.PathLike[str]) -> list[Path]:
    """Write a :func:`hash_ray_dataset` result to ``folder`` as Parquet hash shards.

    ``folder`` is created when missing and must not hold shards already
    (``FileExistsError``): one folder is one run's hashes. Ray writes the files
    (one or more per block, uniquely named), so on a cluster ``folder`` must be
    a path every node can write to. ``leakaudit group folder`` (or
    :func:`leakaudit.shards.audit_hash_shards`) groups them.

    Returns
    -------
    list of pathlib.Path
        The shard files written, sorted.
    """
    _check_dataset(hashed, "hashed")
    target = check_new_shard_folder(folder)
    target.mkdir(parents=True, exist_ok=True)
    hashed.write_parquet(str(target))
    return shard_files(target)


# ---------------------------------------------------------------------- auditing


@contextlib.contextmanager
def _preserving_order(ds: Any) -> Iterator[None]:
    """Run executions of ``ds`` in its order (its context is shared: restored after)."""
    context = getattr(ds, "context", None) or _require_ray().data.DataContext.get_current()
    options = context.execution_options
    previous = options.preserve_order
    options.preserve_order = True
    try:
        yield
    finally:
        options.preserve_order = previous


def _empty_table(
    spec: _RowSpec, options: DecodeOptions, dihedral: bool, crop_entries: bool = False
) -> Any:
    table = _expand(None, [], 0, {}, dihedral=dihedral)
    return hash_shard_table(
        table,
        ids=[],
        split=[],
        paths=[],
        hashing=hashing_metadata(options, dihedral=dihedral, crop_entries=crop_entries),
    )


def _pick_batch(batch: dict[str, Any], *, spec: _RowSpec, wanted: frozenset[str]) -> Any:
    """``map_batches`` function: the image of each wanted row, as bytes or a raw array."""
    pa = require_pyarrow()
    ids: list[str] = []
    kinds: list[str] = []
    data: list[bytes | None] = []
    shapes: list[list[int]] = []
    for row_id, cell in zip(_batch_ids(batch, spec), batch[spec.image_column], strict=True):
        if row_id not in wanted:
            continue
        source, _, problem = _source_of(cell)
        if isinstance(source, str):
            try:
                with open(source, "rb") as file:
                    source = file.read()
            except OSError:
                source = None
        ids.append(row_id)
        if isinstance(source, Image.Image):
            pixels = np.asarray(cell)
            kinds.append("array")
            data.append(np.ascontiguousarray(pixels).tobytes())
            shapes.append([int(s) for s in pixels.shape])
        else:
            kinds.append("bytes")
            data.append(source if problem is None else None)
            shapes.append([])
    return pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "kind": pa.array(kinds, pa.string()),
            "data": pa.array(data, pa.binary()),
            "shape": pa.array(shapes, pa.list_(pa.int64())),
        }
    )


def _fetch_images(ds: Any, spec: _RowSpec, ids: Sequence[str], batch_size: int) -> dict[str, Any]:
    """The images of rows ``ids``, from one filtered pass over ``ds`` (bytes or PIL images)."""
    picked = ds.select_columns(_used_columns(spec)).map_batches(
        _pick_batch,
        batch_format="numpy",
        batch_size=batch_size,
        fn_kwargs={"spec": spec, "wanted": frozenset(ids)},
    )
    found: dict[str, Any] = {}
    for row in picked.take_all():
        data = row["data"]
        if data is None:
            continue
        if row["kind"] == "array":
            shape = [int(s) for s in row["shape"]]
            image = _as_image(np.frombuffer(data, dtype=np.uint8).reshape(shape))
            found[str(row["id"])] = image if not isinstance(image, str) else None
        else:
            found[str(row["id"])] = bytes(data)
    return found


def _verification_images(
    ds: Any,
    spec: _RowSpec,
    shards: HashShards,
    *,
    method: str,
    threshold: ThresholdSpec,
    verify: VerifySpec,
    dihedral: bool,
    batch_size: int,
) -> list[Any]:
    """One image per row where verification (or a byte-copy digest) needs it, else None."""
    needed = rows_verification_reads(
        shards, method=method, threshold=threshold, verify=verify, dihedral=dihedral
    )
    images: list[Any] = [None] * len(shards)
    remote: list[int] = []
    for row in needed.tolist():
        path = shards.paths[row] if shards.paths is not None else None
        if isinstance(path, str) and os.path.isfile(path):
            images[row] = path
        else:
            remote.append(row)
    if remote:
        fetched = _fetch_images(ds, spec, [str(shards.ids[row]) for row in remote], batch_size)
        for row in remote:
            images[row] = fetched.get(str(shards.ids[row]))
    return images


def audit_ray_dataset(
    ds: Dataset,
    *,
    image_column: str = "image",
    split_column: str = "split",
    id_column: str | None = None,
    path_column: str | None = None,
    method: str = DEFAULT_METHOD,
    threshold: ThresholdSpec = None,
    decode: DecodeOptions | None = None,
    dihedral: bool = True,
    verify: VerifySpec = "auto",
    on_error: str = "warn",
    hashes_out: str | os.PathLike[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int | None = None,
    workers: int | None = None,
) -> LeakageReport:
    """Audit a Ray Dataset of images for near-duplicates across its splits.

    Hashes on the cluster (:func:`hash_ray_dataset`), groups on the driver,
    and returns the :class:`~leakaudit.report.LeakageReport` that
    :func:`leakaudit.audit.audit_sources` returns for the same images in the
    same order (the same groups, pairs, evidence and figures).

    Parameters
    ----------
    ds : ray.data.Dataset
        One row per image, with a split column.
    image_column, split_column, id_column, path_column, decode, dihedral, batch_size, concurrency
        As in :func:`hash_ray_dataset`.
    method, threshold
        As in :func:`leakaudit.audit_splits`.
    verify : "auto", bool or VerifyOptions, default "auto"
        Hashes propose, verification decides (:mod:`leakaudit.verify`), on the
        driver; candidate rows the driver cannot read from a file are fetched
        from ``ds`` in one filtered pass. False links every pair within the
        threshold.
    on_error : {"warn", "raise", "ignore"}, default "warn"
        Unreadable images are always recorded (``report.table["error"]``);
        "warn" emits one :class:`~leakaudit.hashing.UnreadableImageWarning`.
    hashes_out : path-like, optional
        Also write the hash rows there as Parquet shards (a new or empty
        folder that every node can write to), for ``leakaudit group``.
    workers : int, optional
        Threads the driver's verification decodes with.

    Returns
    -------
    LeakageReport
        ``report.table`` holds one row per image in the dataset's order, its
        ``path`` (the file, else the id) and an ``id`` column.

    Examples
    --------
    >>> import ray
    >>> from leakaudit.demo import photo_like_image
    >>> _ = ray.init(num_cpus=1, include_dashboard=False)  # doctest: +SKIP
    >>> a, b = photo_like_image(1), photo_like_image(2)
    >>> ds = ray.data.from_items([
    ...     {"id": "a", "split": "train", "image": a},
    ...     {"id": "b", "split": "train", "image": b},
    ...     {"id": "a-copy", "split": "test", "image": a.resize((96, 72))},
    ... ])  # doctest: +SKIP
    >>> audit_ray_dataset(ds).n_leaked_images  # doctest: +SKIP
    2
    """
    ray = _require_ray()
    _check_dataset(ds)
    check_choice("on_error", on_error, ON_ERROR_CHOICES)
    resolve_threshold(method, threshold)
    check_dihedral(dihedral)
    if hashes_out is not None:
        check_new_shard_folder(hashes_out, option="hashes_out")
    spec = _row_spec(ds, image_column, split_column, id_column, path_column)
    options = hashing_options(decode, dihedral=dihedral, verify=verify)
    hashed = hash_ray_dataset(
        ds,
        image_column=image_column,
        split_column=split_column,
        id_column=spec.id_column,
        path_column=spec.path_column,
        decode=decode,
        dihedral=dihedral,
        verify=verify,
        batch_size=batch_size,
        concurrency=concurrency,
    )
    with _preserving_order(hashed):
        materialized = hashed.materialize()
        if hashes_out is not None:
            write_hash_shards(materialized, hashes_out)
        tables = [table for table in ray.get(materialized.to_arrow_refs()) if table.num_rows]
    if not tables:
        tables = [
            _empty_table(
                spec,
                options,
                dihedral,
                wants_crop_entries(dihedral=dihedral, verify=verify),
            )
        ]
    shards = HashShards.from_arrow(tables)
    images = _verification_images(
        ds,
        spec,
        shards,
        method=method,
        threshold=threshold,
        verify=verify,
        dihedral=dihedral,
        batch_size=batch_size,
    )
    return audit_hash_shards(
        shards,
        method=method,
        threshold=threshold,
        dihedral=dihedral,
        verify=verify,
        images=images,
        decode=options,
        on_error=on_error,
        workers=workers,
    )


# ----------------------------------------------------------------------- re-split


def _relabel_batch(
    batch: Any,
    *,
    spec: _RowSpec,
    moved_ids: Any,
    moved_to: Any,
    record_column: str | None,
) -> Any:
    """``map_batches`` function: each moved row's new split; dropped rows left out."""
    pa = require_pyarrow()
    import pyarrow.compute as pc

    ids = pa.array(
        _batch_ids(
            {spec.id_column: batch.column(spec.id_column).to_numpy(zero_copy_only=False)}, spec
        ),
        pa.string(),
    )
    position = pc.index_in(ids, value_set=moved_ids)
    moved = pc.is_valid(position)
    old = batch.column(spec.split_column).cast(pa.string())
    new = pc.if_else(moved, pc.take(moved_to, position), old)
    dropped = pc.and_(moved, pc.is_null(new))
    where = batch.schema.get_field_index(spec.split_column)
    batch = batch.set_column(where, spec.split_column, new)
    if record_column is not None:
        batch = batch.append_column(record_column, old)
    return batch.filter(pc.invert(dropped))


def _check_report(report: Any) -> pd.DataFrame:
    if not isinstance(report, LeakageReport):
        raise TypeError(f"report must be a LeakageReport; got {describe(report)}.")
    if report.table is None or "id" not in report.table.columns:
        raise ValueError(
            "report must come from audit_ray_dataset (or audit_hash_shards): a table with an "
            "'id' column; got a report without one."
        )
    return report.table


def _plan(report: LeakageReport, priority: Sequence[str] | None, policy: str) -> pd.DataFrame:
    check_choice("policy", policy, CLEAN_POLICIES)
    return clean_splits(_check_report(report), priority, policy=policy)


def relabel_ray_dataset(
    ds: Dataset,
    report: LeakageReport,
    *,
    priority: Sequence[str] | None = None,
    policy: str = "move",
    image_column: str = "image",
    split_column: str = "split",
    id_column: str | None = None,
    path_column: str | None = None,
    record_column: str | None = None,
) -> Dataset:
    """Return ``ds`` with its split column corrected so that no duplicate group spans splits.

    The rules of :func:`leakaudit.clean_splits`: a leaked group goes whole to
    its highest-priority split (``policy="move"``), or its rows in the other
    splits are left out (``policy="drop"``). Every other row and every other
    column is as it was; nothing is decoded. Rows are found by their id, as
    :func:`audit_ray_dataset` named them (pass the same column options).

    Parameters
    ----------
    ds : ray.data.Dataset
        The dataset that was audited.
    report : LeakageReport
        Its :func:`audit_ray_dataset` report.
    priority : sequence of str, optional
        Split precedence, highest first (default ``("train", "val", "test")``).
    policy : {"move", "drop"}, default "move"
    image_column, split_column, id_column, path_column
        As in :func:`audit_ray_dataset`.
    record_column : str, optional
        Add a column of this name holding each row's original split.

    Returns
    -------
    ray.data.Dataset
    """
    _check_dataset(ds)
    pa = require_pyarrow()
    plan = _plan(report, priority, policy)
    spec = _row_spec(ds, image_column, split_column, id_column, path_column)
    if record_column is not None:
        schema = ds.schema()
        if schema is not None and record_column in schema.names:
            raise ValueError(f"record_column must be a new column name; got {record_column!r}.")
    changed = plan[plan["reassigned"] | plan["dropped"]]
    targets = changed["split"].to_numpy(dtype=object)
    return ds.map_batches(
        _relabel_batch,
        batch_format="pyarrow",
        fn_kwargs={
            "spec": spec,
            "moved_ids": pa.array([str(i) for i in changed["id"].tolist()], pa.string()),
            "moved_to": pa.array([None if pd.isna(t) else str(t) for t in targets], pa.string()),
            "record_column": record_column,
        },
    )


def _split_batch(batch: Any, *, split_column: str, name: str) -> Any:
    import pyarrow.compute as pc

    return batch.filter(pc.equal(batch.column(split_column), name))


def clean_ray_dataset(
    ds: Dataset,
    report: LeakageReport | None = None,
    *,
    priority: Sequence[str] | None = None,
    policy: str = "move",
    image_column: str = "image",
    split_column: str = "split",
    id_column: str | None = None,
    path_column: str | None = None,
    record_column: str | None = None,
    **audit_options: Any,
) -> ResplitResult:
    """Return one leak-free Ray Dataset per split, by the :func:`leakaudit.clean_splits` rules.

    The Ray counterpart of ``clean_datasets`` (torchvision) and
    ``clean_dataset_dict`` (Hugging Face): ``clean_*`` repairs the splits a
    dataset has; ``leak_free_*split`` draws new ones. Formerly
    ``leak_free_ray_splits`` (a deprecated alias).

    Parameters
    ----------
    ds : ray.data.Dataset
        The images, with their split column.
    report : LeakageReport, optional
        The :func:`audit_ray_dataset` report of ``ds``; audited now when not given.
    priority, policy, image_column, split_column, id_column, path_column, record_column
        As in :func:`relabel_ray_dataset`.
    **audit_options
        Passed to :func:`audit_ray_dataset` when ``report`` is None.

    Returns
    -------
    ResplitResult
        ``result.splits``: split name -> ``ray.data.Dataset`` (lazy: each a
        filter of the relabelled dataset, in the report's split order);
        ``result.moves``: one row per moved or dropped image (``split``,
        ``id``, ``new_split``, ``group_id``, ``path``); ``result.report``.
    """
    _check_dataset(ds)
    if report is None:
        report = audit_ray_dataset(
            ds,
            image_column=image_column,
            split_column=split_column,
            id_column=id_column,
            path_column=path_column,
            **audit_options,
        )
    elif audit_options:
        raise TypeError(
            "audit options (" + ", ".join(sorted(audit_options)) + ") apply only when "
            "report is not given."
        )
    plan = _plan(report, priority, policy)
    relabelled = relabel_ray_dataset(
        ds,
        report,
        priority=priority,
        policy=policy,
        image_column=image_column,
        split_column=split_column,
        id_column=id_column,
        path_column=path_column,
        record_column=record_column,
    )
    names = [str(name) for name in report.images_by_split.index]
    splits = {
        name: relabelled.map_batches(
            _split_batch,
            batch_format="pyarrow",
            fn_kwargs={"split_column": split_column, "name": name},
        )
        for name in names
    }
    changed = plan[plan["reassigned"] | plan["dropped"]]
    moves = pd.DataFrame(
        {
            "split": changed["original_split"].to_numpy(dtype=object),
            "id": changed["id"].to_numpy(dtype=object),
            "new_split": pd.Series(changed["split"].to_numpy(dtype=object), dtype=object).where(
                changed["split"].notna().to_numpy(), None
            ),
            "group_id": changed["group_id"].to_numpy(),
            "path": changed["path"].to_numpy(dtype=object),
        }
    ).reset_index(drop=True)
    return ResplitResult(splits=splits, moves=moves, report=report, policy=policy)


def leak_free_ray_splits(ds: Dataset, *args: Any, **kwargs: Any) -> ResplitResult:
    """Deprecated alias of :func:`clean_ray_dataset` (it cleans the splits ``ds`` has)."""
    warnings.warn(
        "leak_free_ray_splits is deprecated: use clean_ray_dataset (same arguments).",
        DeprecationWarning,
        stacklevel=2,
    )
    return clean_ray_dataset(ds, *args, **kwargs)
