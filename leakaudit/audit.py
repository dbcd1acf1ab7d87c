"""One-call audits: splits given as folders or path lists in, a :class:`LeakageReport` out.

This is the entry point the adapters and the command line call: hash every
image once (both hashes in one decode), group near-duplicates exactly, audit
the groups against the splits.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from PIL import Image

from leakaudit._validation import check_choice, check_int, describe
from leakaudit.cache import CacheSpec, hash_sources_cached
from leakaudit.frames import frame_from_hash_table, group_labels_for_frame, hash_values_from_frame
from leakaudit.hashing import HashTable
from leakaudit.loading import DecodeOptions
from leakaudit.report import LeakageReport, dhash_audit

if TYPE_CHECKING:
    from leakaudit.embedding import EmbeddingStage

__all__ = [
    "AUDIT_METHODS",
    "DEFAULT_METHOD",
    "DEFAULT_THRESHOLDS",
    "IMAGE_EXTENSIONS",
    "audit_hash_table",
    "audit_sources",
    "audit_splits",
    "list_image_files",
    "list_image_paths",
]

#: Hash methods the one-call audit accepts. "phash+dhash" links a pair only
#: when both hashes are within the threshold.
AUDIT_METHODS: tuple[str, ...] = ("phash+dhash", "phash", "dhash")
#: Chosen on real photos (benchmarks/RESULTS.md, "Detection quality"): both
#: hashes within 8 bits kept 100% recall on re-encodes, resizes and format
#: changes and made no false pair among 4.5M unrelated photo pairs, where
#: pHash <= 6 made 2.9 per million and dHash <= 5 made 300 per million.
#: pHash distances are always even (32 of its 64 bits are set), so its
#: thresholds are even.
DEFAULT_METHOD = "phash+dhash"
DEFAULT_THRESHOLDS: dict[str, int] = {"phash": 6, "dhash": 5, "phash+dhash": 8}

IMAGE_EXTENSIONS: frozenset[str] = frozenset(
    {
        ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".gif", ".bmp", ".dib", ".webp",
        ".tif", ".tiff", ".ppm", ".pgm", ".pbm", ".pnm", ".ico", ".tga",
    }
)  # fmt: skip


class FolderScanWarning(UserWarning):
    """Something under a scanned folder could not be listed."""


def list_image_files(folder: str | os.PathLike[str], *, recursive: bool = True) -> list[Path]:
    """Return the image files under ``folder``, sorted.

    Files are recognised by extension (case-insensitive, see
    :data:`IMAGE_EXTENSIONS`); hidden files and folders are skipped. Symbolic
    links to folders are not followed (a link loop cannot hang the scan).
    Sub-folders that cannot be listed are named in one
    :class:`FolderScanWarning`.

    Raises
    ------
    FileNotFoundError, NotADirectoryError
        If ``folder`` does not exist or is not a folder.
    """
    root = Path(folder)
    return [Path(path) for path in list_image_paths(root, recursive=recursive)]


def list_image_paths(folder: str | os.PathLike[str], *, recursive: bool = True) -> list[str]:
    """Return the image files under ``folder`` as strings, in :func:`list_image_files` order.

    The fast path the audits use: no ``Path`` object per file (which costs more than the
    listing itself on folders of tens of thousands of images).
    """
    root = os.fspath(folder)
    if not os.path.exists(root):
        raise FileNotFoundError(f"folder not found: {root}")
    if not os.path.isdir(root):
        raise NotADirectoryError(f"not a folder: {root}")
    problems: list[str] = []
    found: list[tuple[tuple[str, ...], str]] = []
    walker = os.walk(root, onerror=lambda err: problems.append(f"{err.filename}: {err.strerror}"))
    for directory, subdirs, files in walker:
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        if not recursive:
            subdirs[:] = []
        parts = Path(directory).parts  # the order of Path comparison: part by part
        for name in files:
            if not name.startswith(".") and os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS:
                found.append(((*parts, name), os.path.join(directory, name)))
    if problems:
        warnings.warn(
            f"{len(problems)} folder(s) under {root} could not be listed: "
            + "; ".join(problems[:10])
            + (f"; and {len(problems) - 10} more" if len(problems) > 10 else ""),
            FolderScanWarning,
            stacklevel=3,
        )
    found.sort()
    return [path for _, path in found]


def _paths_of(name: str, spec: Any, recursive: bool) -> list[str]:
    if isinstance(spec, (str, os.PathLike)):
        return list_image_paths(spec, recursive=recursive)
    if isinstance(spec, Sequence) and not isinstance(spec, (bytes, bytearray)):
        return [os.fspath(p) if isinstance(p, (str, os.PathLike)) else p for p in spec]
    raise TypeError(
        f"splits[{name!r}] must be a folder or a list of image paths; got {describe(spec)}."
    )


def resolve_threshold(method: str, threshold: int | None) -> int:
    """Return the threshold to use for ``method`` (its default when None)."""
    check_choice("method", method, AUDIT_METHODS)
    if threshold is None:
        return DEFAULT_THRESHOLDS[method]
    return check_int("threshold", threshold, 0, 64)


def audit_sources(
    sources: Sequence[Any],
    split: Sequence[str | None],
    *,
    names: Sequence[str] | None = None,
    method: str = DEFAULT_METHOD,
    threshold: int | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    on_error: str = "warn",
    decode: DecodeOptions | None = None,
    extra_parameters: Mapping[str, Any] | None = None,
    cache: CacheSpec = True,
    embedding: EmbeddingStage | None = None,
) -> LeakageReport:
    """Hash, group and audit images given as paths, bytes or PIL images.

    This is the building block of :func:`audit_splits` and of the adapters.

    Parameters
    ----------
    sources : sequence of path-like, bytes or PIL images
        The images.
    split : sequence of str or None
        The split of each image (same length as ``sources``).
    names : sequence of str, optional
        What to call each image in the table's ``path`` column (defaults to
        the path, or a description for in-memory images).
    method, threshold, workers, progress, on_error, decode, cache, embedding
        As in :func:`audit_splits`.
    extra_parameters : mapping, optional
        Recorded in the report's ``parameters``.

    Returns
    -------
    LeakageReport
        With ``table`` holding one row per image and its ``group_id``. Images
        whose pHash and dHash both equal another image's also get their
        ``digest`` (BLAKE2b of the bytes), so the pairs table can tell byte
        copies (``stage == "exact bytes"``) from re-encodes.
    """
    threshold = resolve_threshold(method, threshold)
    items = list(sources)
    labels = list(split)
    if len(labels) != len(items):
        raise ValueError(
            f"split must have one label per source (length {len(items)}); got length {len(labels)}."
        )
    if names is not None and len(names) != len(items):
        raise ValueError(
            f"names must have one entry per source (length {len(items)}); got length {len(names)}."
        )
    options = decode if decode is not None else DecodeOptions()
    table = hash_sources_cached(
        items, cache=cache, options=options, workers=workers, progress=progress, on_error=on_error
    )
    parameters: dict[str, Any] = {
        "min_side": options.min_side,
        "exif_transpose": options.exif_transpose,
    }
    parameters.update(extra_parameters or {})
    report = audit_hash_table(
        table,
        labels,
        names=names,
        method=method,
        threshold=threshold,
        extra_parameters=parameters,
        embedding=embedding,
        images=items,
    )
    if report.table is not None:
        _fill_copy_digests(report.table, table, items)
    return report


# The names hash_sources gives in-memory items: they cannot be reopened from the table.
_IN_MEMORY_NAME = re.compile(r"<(bytes|PIL image) #\d+>")


def _source_digest(source: Any) -> str | None:
    """BLAKE2b-64 of a source's bytes as 16 hex characters (a PIL image: its mode, size, pixels)."""
    digest = hashlib.blake2b(digest_size=8)
    try:
        if isinstance(source, Image.Image):
            digest.update(f"{source.mode}{source.size}".encode())
            digest.update(source.tobytes())
        elif isinstance(source, (bytes, bytearray, memoryview)):
            digest.update(bytes(source))
        elif isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as file:
                digest.update(file.read())
        else:
            return None
    except (OSError, ValueError):
        return None
    return digest.hexdigest()


def _fill_copy_digests(frame: pd.DataFrame, table: HashTable, items: Sequence[Any]) -> None:
    """Fill ``digest`` for rows whose two hashes equal another row's: the only byte-copy candidates.

    Identical bytes decode to identical hashes, so only these rows need reading again; the
    digest then tells a byte copy from a re-encode in the pairs table. Grouping never uses
    it (only low-information rows link by digest).
    """
    if "digest" not in frame.columns or len(items) != len(frame):
        return
    candidates = table.valid & ~np.asarray(table.low_information, dtype=bool)
    keys = pd.Series(list(zip(table.phash.tolist(), table.dhash.tolist(), strict=True)))
    shared = keys.duplicated(keep=False).to_numpy() & candidates
    present = frame["digest"].notna().to_numpy()
    for row in np.flatnonzero(shared & ~present).tolist():
        frame.at[row, "digest"] = _source_digest(items[row])


def audit_hash_table(
    table: HashTable,
    split: Sequence[str | None],
    *,
    names: Sequence[str] | None = None,
    method: str = DEFAULT_METHOD,
    threshold: int | None = None,
    extra_parameters: Mapping[str, Any] | None = None,
    embedding: EmbeddingStage | None = None,
    images: Sequence[Any] | None = None,
) -> LeakageReport:
    """Group and audit images whose hashes are already computed.

    For callers that hash by other means (e.g. inside ``datasets.Dataset.map``)
    and assemble a :class:`~leakaudit.hashing.HashTable` themselves.

    Parameters
    ----------
    table : HashTable
        Hashes of every image, in row order.
    split : sequence of str or None
        The split of each row.
    names, method, threshold, extra_parameters, embedding
        As in :func:`audit_sources`.
    images : sequence of path-like, bytes or PIL images, optional
        The images, for the embedding stage; default ``table.sources``, which
        works when those are file paths.

    Returns
    -------
    LeakageReport
    """
    threshold = resolve_threshold(method, threshold)
    if len(split) != len(table.valid):
        raise ValueError(
            f"split must have one label per row (length {len(table.valid)}); "
            f"got length {len(split)}."
        )
    primary = "dhash" if method == "dhash" else "phash"
    frame = frame_from_hash_table(
        table, list(split), method=primary, paths=list(names) if names is not None else None
    )
    values, valid = hash_values_from_frame(frame)
    second = None
    if method == "phash+dhash":
        second, _ = hash_values_from_frame(frame, "dhash")
    frame["group_id"] = group_labels_for_frame(
        frame, values, valid, threshold, second=second, second_threshold=threshold
    )
    parameters: dict[str, Any] = {"method": method, "threshold": threshold}
    embedding_pairs = None
    if embedding is not None:
        from leakaudit.embedding import run_embedding_stage

        result = run_embedding_stage(
            _embedding_sources(table, images),
            frame["group_id"].to_numpy(dtype=np.int64),
            np.asarray(table.valid, dtype=bool) & ~frame["low_information"].to_numpy(dtype=bool),
            embedding,
        )
        frame["group_id"] = result.labels
        embedding_pairs = result.pairs
        parameters.update(embedding.parameters())
        parameters["embedded_images"] = result.n_embedded
    parameters.update(extra_parameters or {})
    report = dhash_audit(frame, parameters=parameters)
    report.embedding_pairs = embedding_pairs
    return report


def _embedding_sources(table: HashTable, images: Sequence[Any] | None) -> list[Any]:
    if images is not None:
        sources = list(images)
        if len(sources) != len(table.valid):
            raise ValueError(
                f"images must have one image per row (length {len(table.valid)}); "
                f"got length {len(sources)}."
            )
        return sources
    if any(_IN_MEMORY_NAME.fullmatch(name) for name in table.sources):
        raise ValueError(
            "the embedding stage needs the images: table.sources names in-memory images; "
            "pass them as images=."
        )
    return list(table.sources)


def audit_splits(
    splits: Mapping[str, str | os.PathLike[str] | Sequence[Any]],
    *,
    method: str = DEFAULT_METHOD,
    threshold: int | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    on_error: str = "warn",
    decode: DecodeOptions | None = None,
    recursive: bool = True,
    cache: CacheSpec = True,
    embedding: EmbeddingStage | None = None,
) -> LeakageReport:
    """Audit dataset splits for near-duplicate leakage in one call.

    Parameters
    ----------
    splits : mapping of str to folder or list of paths
        Split name -> a folder (scanned for image files, recursively by
        default) or a list of image paths.
    method : {"phash+dhash", "phash", "dhash"}, default "phash+dhash"
        Hash to compare. The default links a pair only when both pHash and
        dHash agree, which measured most precise on real photos at no loss of
        recall (``benchmarks/RESULTS.md``); dHash alone links many unrelated
        smooth photos.
    threshold : int, optional
        Largest Hamming distance counted as a near-duplicate; default 6 for
        pHash, 5 for dHash, 8 for "phash+dhash".
    workers : int, optional
        Processes used for hashing; default all usable cores.
    progress : bool, optional
        Progress bar; default only on long runs in a terminal.
    on_error : {"warn", "raise", "ignore"}, default "warn"
        Unreadable images are always recorded (``report.table["error"]``);
        "warn" emits one summary warning naming them.
    decode : DecodeOptions, optional
        Decoding policy (reduction, EXIF orientation, alpha background, size limit).
    recursive : bool, default True
        Scan split folders recursively (the ImageFolder layout).
    cache : bool, str, os.PathLike or HashCache, default True
        Persistent hash cache for files (:mod:`leakaudit.cache`): True uses the
        user cache folder (``$LEAKAUDIT_CACHE_DIR`` overrides it), a path uses
        that folder, False hashes everything afresh. Unchanged files are not
        read again; in-memory images are never cached.
    embedding : EmbeddingStage, optional
        The cascade's last step (:mod:`leakaudit.embedding`): embed images with
        the given model and also link pairs whose cosine similarity reaches
        ``embedding.similarity``. ``report.table``'s groups are then the union
        of hash and embedding links, and the pairs table's ``stage`` says
        which linked each pair.

    Returns
    -------
    LeakageReport
        The audit; ``report.table`` is the grouped table (``path, split, hash,
        ..., group_id``) that :func:`~leakaudit.clean_splits` takes.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for split in ("train", "test"):
    ...     (root / split).mkdir()
    >>> img = Image.effect_mandelbrot((128, 128), (-2, -1.5, 1, 1.5), 100)
    >>> img.save(root / "train" / "a.png"); img.save(root / "test" / "a_copy.jpg", quality=80)
    >>> report = audit_splits({"train": root / "train", "test": root / "test"}, workers=1)
    >>> report.n_leaked_images
    2
    """
    if not isinstance(splits, Mapping):
        raise TypeError(
            f"splits must be a mapping of split name to folder or paths; got {describe(splits)}."
        )
    if not splits:
        raise ValueError("splits must name at least one split; got an empty mapping.")
    resolve_threshold(method, threshold)
    sources: list[Any] = []
    labels: list[str] = []
    for name, spec in splits.items():
        paths = _paths_of(str(name), spec, recursive)
        sources.extend(paths)
        labels.extend([str(name)] * len(paths))
    return audit_sources(
        sources,
        labels,
        method=method,
        threshold=threshold,
        workers=workers,
        progress=progress,
        on_error=on_error,
        decode=decode,
        cache=cache,
        embedding=embedding,
    )


def leaked_rows(report: LeakageReport) -> pd.DataFrame:
    """Return the table rows that sit in a leaked group."""
    if report.table is None:
        raise ValueError("report has no table (it was rebuilt from JSON).")
    rows: pd.DataFrame = report.table[
        report.table["group_id"].isin(report.leaked_groups["group_id"])
    ]
    return rows
