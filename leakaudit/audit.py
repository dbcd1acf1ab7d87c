"""One-call audits: splits given as folders or path lists in, a :class:`LeakageReport` out.

This is the entry point the adapters and the command line call: hash every
image once (both hashes in one decode), group near-duplicates exactly, audit
the groups against the splits.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from PIL import Image

from leakaudit._copy_measure import describe_copies
from leakaudit._validation import check_bool, describe
from leakaudit.cache import CachedFiles, CacheSpec, hash_sources_with_files
from leakaudit.decisions import ReviewDecisions, apply_decisions, load_decisions
from leakaudit.embedding import run_embedding_stage
from leakaudit.frames import frame_from_hash_table
from leakaudit.grouping import link_labels
from leakaudit.hashing import (
    EntryKind,
    HashTable,
    OrientationHashes,
    bytes_digest,
    image_digest,
)
from leakaudit.listing import (
    drop_repeated_paths,
    list_image_paths,
    warn_empty_splits,
)
from leakaudit.loading import MAX_FILE_BYTES, DecodeOptions, resolve_decode
from leakaudit.policy import (
    DEFAULT_METHOD,
    ThresholdSpec,
    resolve_threshold,
    row_thresholds,
)
from leakaudit.report import LeakageReport, dhash_audit
from leakaudit.verify import VerifyOptions, verified_labels

if TYPE_CHECKING:
    from leakaudit.embedding import EmbeddingStage

#: What ``verify=`` takes: "auto", True, False or a :class:`~leakaudit.verify.VerifyOptions`.
VerifySpec = bool | str | VerifyOptions
#: What ``decisions=`` takes: a decisions file, or :class:`~leakaudit.decisions.ReviewDecisions`.
DecisionsSpec = ReviewDecisions | str | os.PathLike[str] | None

__all__ = [
    "DecisionsSpec",
    "VerifySpec",
    "audit_hash_table",
    "audit_sources",
    "audit_splits",
    "decode_parameters",
    "hashing_options",
    "resolve_decisions",
    "source_digest",
    "wants_crop_entries",
]


def _paths_of(name: str, spec: Any, recursive: bool) -> list[str]:
    if isinstance(spec, (str, os.PathLike)):
        return list_image_paths(spec, recursive=recursive)
    if isinstance(spec, Sequence) and not isinstance(spec, (bytes, bytearray)):
        return [os.fspath(p) if isinstance(p, (str, os.PathLike)) else p for p in spec]
    raise TypeError(
        f"splits[{name!r}] must be a folder or a list of image paths; got {describe(spec)}."
    )


def hashing_options(
    decode: DecodeOptions | None, *, dihedral: bool, verify: VerifySpec
) -> DecodeOptions:
    """The decoding an audit hashes with: ``decode`` (None: the defaults).

    The candidate net's entries are a hashing choice, not a decoding one: see
    :func:`wants_crop_entries`. (``dihedral`` and ``verify`` are kept for the
    callers that pass them.)
    """
    return resolve_decode(decode)


def wants_crop_entries(*, dihedral: bool, verify: VerifySpec) -> bool:
    """Whether an audit hashes the crop entries (``hash_sources(..., crop_entries=)``).

    With verification and dihedral matching: the crop, rotation, as-is and
    content entries ride on the orientation entries and propose the
    candidates verification decides (:mod:`leakaudit.verify`).

    Examples
    --------
    >>> wants_crop_entries(dihedral=True, verify="auto")
    True
    >>> wants_crop_entries(dihedral=True, verify=False)
    False
    """
    return verify is not False and bool(dihedral)


def decode_parameters(options: DecodeOptions) -> dict[str, Any]:
    """The decoding settings a report records in its ``parameters``."""
    return {
        "min_side": options.min_side,
        "exif_transpose": options.exif_transpose,
        "trim_borders": options.trim_borders,
    }


def audit_sources(
    sources: Sequence[Any],
    split: Sequence[str | None],
    *,
    names: Sequence[str] | None = None,
    method: str = DEFAULT_METHOD,
    threshold: ThresholdSpec = None,
    workers: int | None = None,
    progress: bool | None = None,
    on_error: str = "warn",
    decode: DecodeOptions | None = None,
    extra_parameters: Mapping[str, Any] | None = None,
    cache: CacheSpec = True,
    embedding: EmbeddingStage | None = None,
    dihedral: bool = True,
    verify: VerifySpec = "auto",
    decisions: DecisionsSpec = None,
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
    method, threshold, workers, progress, on_error, decode, cache, embedding, dihedral, verify
    decisions
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
    resolve_threshold(method, threshold)
    check_bool("dihedral", dihedral)
    review = resolve_decisions(decisions, verify=verify, method=method, threshold=threshold)
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
    options = hashing_options(decode, dihedral=dihedral, verify=verify)
    table, files = hash_sources_with_files(
        items,
        cache=cache,
        options=options,
        workers=workers,
        progress=progress,
        on_error=on_error,
        dihedral=dihedral,
        crop_entries=wants_crop_entries(dihedral=dihedral, verify=verify),
    )
    parameters = decode_parameters(options)
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
        dihedral=dihedral,
        verify=verify,
        decode=options,
        workers=workers,
        files=files,
        decisions=review,
    )
    if report.table is not None:
        _fill_copy_digests(report.table, table, items, files, options.max_file_bytes)
    return report


# The names hash_sources gives in-memory items: they cannot be reopened from the table.
_IN_MEMORY_NAME = re.compile(r"<(bytes|PIL image) #\d+>")


def source_digest(source: Any, *, max_bytes: int = MAX_FILE_BYTES) -> str | None:
    """A source's digest as 16 hex characters: :func:`~leakaudit.hashing.bytes_digest` of
    its bytes (a PIL image: :func:`~leakaudit.hashing.image_digest`, its mode, size, pixels).

    The same value ``HashTable.digest`` holds for the source, so a digest read here and one
    from a table or the hash cache compare equal for the same bytes or pixels. A file is
    read in 1 MiB pieces, and only a regular file of at most ``max_bytes``
    (``DecodeOptions.max_file_bytes``, what the loader reads): a larger one, or one that
    grows past it while read, has no digest (None), as has one that cannot be read.
    """
    try:
        if isinstance(source, Image.Image):
            value = image_digest(source)
        elif isinstance(source, (bytes, bytearray, memoryview)):
            value = bytes_digest(source)
        elif isinstance(source, (str, os.PathLike)):
            # Non-blocking open: a named pipe swapped in must not hang the run.
            descriptor = os.open(source, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(descriptor, "rb") as file:
                status = os.fstat(file.fileno())
                if not stat.S_ISREG(status.st_mode) or status.st_size > max_bytes:
                    return None
                value = bytes_digest(_pieces(file, max_bytes))
        else:
            return None
    except (OSError, ValueError, TypeError, _OverLimit):
        return None
    return f"{value:016x}"


class _OverLimit(Exception):
    """A file grew past ``max_bytes`` while :func:`source_digest` read it."""


def _pieces(file: Any, max_bytes: int) -> Iterator[bytes]:
    read = 0
    while chunk := file.read(2**20):
        read += len(chunk)
        if read > max_bytes:
            raise _OverLimit
        yield chunk


def _fill_copy_digests(
    frame: pd.DataFrame,
    table: HashTable,
    items: Sequence[Any],
    files: CachedFiles | None = None,
    max_bytes: int = MAX_FILE_BYTES,
) -> None:
    """Fill ``digest`` for rows whose two hashes equal another row's: the only byte-copy candidates.

    Identical bytes decode to identical hashes, so only these rows need reading again; the
    digest then tells a byte copy from a re-encode in the pairs table. Grouping never uses
    it (only low-information rows link by digest). With the hash cache (``files``), a
    file's digest is stored with its entry, so an unchanged file is read for it only once.
    """
    if "digest" not in frame.columns or len(items) != len(frame):
        return
    valid = np.asarray(table.valid, dtype=bool)
    rows = np.flatnonzero(valid & ~np.asarray(table.low_information, dtype=bool))
    hashes = pd.DataFrame({"phash": table.phash[rows], "dhash": table.dhash[rows]})
    shared = rows[hashes.duplicated(keep=False).to_numpy()]
    present = frame["digest"].notna().to_numpy()
    wanted = [row for row in shared.tolist() if not present[row]]
    if not wanted:
        return
    known = files.file_digests(wanted) if files is not None else {}
    frame.loc[wanted, "digest"] = [
        f"{known[row]:016x}" if row in known else source_digest(items[row], max_bytes=max_bytes)
        for row in wanted
    ]


def audit_hash_table(
    table: HashTable,
    split: Sequence[str | None],
    *,
    names: Sequence[str] | None = None,
    method: str = DEFAULT_METHOD,
    threshold: ThresholdSpec = None,
    extra_parameters: Mapping[str, Any] | None = None,
    embedding: EmbeddingStage | None = None,
    images: Sequence[Any] | None = None,
    dihedral: bool = False,
    extra_columns: Mapping[str, Sequence[Any] | NDArray[Any]] | None = None,
    verify: VerifySpec = "auto",
    decode: DecodeOptions | None = None,
    workers: int | None = None,
    files: CachedFiles | None = None,
    decisions: DecisionsSpec = None,
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
    dihedral : bool, default False
        Match flipped and rotated copies too; ``table`` must have been hashed
        with ``dihedral=True`` (it then has ``orientations``).
    extra_columns : mapping of str to array-like, optional
        More per-row columns for ``report.table``, placed after ``split`` in
        the order given (the adapters' ``index`` and ``label``), so the report
        is complete when built.
    verify : "auto", bool or VerifyOptions, default "auto"
        The verified cascade (:mod:`leakaudit.verify`): candidates from the
        wider net, each decided by verification before it links. "auto" runs
        it when the images can be read again (file paths, or ``images``
        given) and the method is "phash+dhash" with one threshold, and
        otherwise links by the threshold alone, saying so in
        ``parameters["stages"]``; True requires it; False is the bare threshold.
    decode : DecodeOptions, optional
        The decoding the table was hashed with (verification decodes alike).
    workers : int, optional
        Threads verification decodes with (the verification half of
        :func:`audit_splits`' ``workers``; the hashes are already made).
    files : CachedFiles, optional
        What the hash cache knows of the table's files (the second value of
        :func:`leakaudit.cache.hash_sources_with_files`): verification then
        keeps the thumbnails of tiny images in the cache too, so an audit of
        unchanged files decodes none of them again.
    decisions : path-like or ReviewDecisions, optional
        As in :func:`audit_splits`; each row's byte digest is read from
        ``images`` (default the table's file paths), or the hash cache's ``files``.

    Returns
    -------
    LeakageReport
    """
    search_threshold = resolve_threshold(method, threshold)
    review = resolve_decisions(decisions, verify=verify, method=method, threshold=threshold)
    check_bool("dihedral", dihedral)
    if dihedral and table.orientations is None:
        raise ValueError(
            "dihedral=True needs hashes of every orientation: hash the images with "
            "hash_sources(..., dihedral=True)."
        )
    if len(split) != len(table.valid):
        raise ValueError(
            f"split must have one label per row (length {len(table.valid)}); "
            f"got length {len(split)}."
        )
    primary = "dhash" if method == "dhash" else "phash"
    frame = frame_from_hash_table(
        table, list(split), method=primary, paths=list(names) if names is not None else None
    )
    for position, (name, column) in enumerate((extra_columns or {}).items(), start=2):
        if len(column) != len(frame):
            raise ValueError(
                f"extra_columns[{name!r}] must have one value per row (length {len(frame)}); "
                f"got length {len(column)}."
            )
        frame.insert(position, name, column)
    # The table's own arrays, not the frame's hex columns parsed back (same values).
    valid = np.asarray(table.valid, dtype=bool).copy()
    zero = np.uint64(0)
    values = np.where(valid, table.dhash if primary == "dhash" else table.phash, zero)
    second = np.where(valid, table.dhash, zero) if method == "phash+dhash" else None
    limits = None
    if isinstance(threshold, Mapping):
        limits = row_thresholds(
            threshold, method, frame["path"].astype(str).tolist(), frame["split"].tolist()
        )
    orientations = None
    if dihedral and table.orientations is not None:
        entries = table.orientations
        orientations = (
            entries.owner,
            entries.dhash if primary == "dhash" else entries.phash,
            entries.dhash if method == "phash+dhash" else None,
        )
    verify_options = _verify_options(verify, method, limits is not None)
    if verify_options is not None and not isinstance(verify, VerifyOptions):
        verify_options = dataclasses.replace(verify_options, link_threshold=search_threshold)
    sources = _verification_sources(table, images) if verify_options is not None else None
    if verify is True and sources is None:
        raise ValueError(
            "verify=True needs the images: table.sources names in-memory images; "
            "pass them as images=."
        )
    edges: pd.DataFrame | None = None
    verification: dict[str, Any] | None = None
    if verify_options is not None and sources is not None:
        labels, verified = verified_labels(
            table,
            sources,
            [str(path) for path in frame["path"].tolist()],
            low_information=np.asarray(table.low_information, dtype=bool),
            exact_keys=frame["digest"].to_numpy(),
            decode=resolve_decode(decode),
            options=verify_options,
            workers=workers,
            dihedral=dihedral,
            splits=frame["split"].to_numpy(),
            thumbnail_cache=None if files is None else files.thumbnails,
        )
        frame["group_id"] = labels
        # Words only: a leaked pair worded vaguely is checked on its images (shifted, ...).
        edges = describe_copies(
            verified.edges,
            sources,
            [str(path) for path in frame["path"].tolist()],
            resolve_decode(decode),
            frame["split"].tolist(),
        )
        verification = verified.parameters()
        stages = ["hash candidates", *verified.stages]
    else:
        frame["group_id"] = link_labels(
            values,
            valid,
            search_threshold,
            low_information=np.asarray(table.low_information, dtype=bool),
            exact_keys=frame["digest"].to_numpy(),
            second=second,
            second_threshold=search_threshold,
            orientations=orientations,
            limits=limits,
        )
        stages = ["hash threshold"]
    if limits is not None:
        frame["threshold"] = limits
    parameters: dict[str, Any] = {
        "method": method,
        "threshold": dict(threshold) if isinstance(threshold, Mapping) else search_threshold,
    }
    if dihedral:
        parameters["dihedral"] = True
    if verify is not False:
        parameters["stages"] = stages
    if verification is not None and verify_options is not None:
        parameters["verification"] = {**verification, **verify_options.parameters()}
    elif verify is not False:
        parameters["verification"] = {
            "ran": False,
            "why": _why_unverified(method, limits, sources),
        }
    embedding_pairs = None
    if embedding is not None:
        result = run_embedding_stage(
            _embedding_sources(table, images),
            frame["group_id"].to_numpy(dtype=np.int64),
            np.asarray(table.valid, dtype=bool) & ~frame["low_information"].to_numpy(dtype=bool),
            embedding,
        )
        frame["group_id"] = result.labels
        embedding_pairs = result.pairs
        if edges is not None:
            edges = _with_embedding_edges(edges, result.pairs)
        if verify is not False:
            parameters["stages"] = [*stages, "embedding"]
        parameters.update(embedding.parameters())
        parameters["embedded_images"] = result.n_embedded
    parameters.update(extra_parameters or {})
    if review is not None:
        if edges is None:
            raise ValueError(
                "decisions apply to the verified audit (verify='auto' or True, method "
                "'phash+dhash', one threshold, the images readable again); verification did "
                f"not run: {parameters['verification'].get('why', 'verify=False')}."
                if isinstance(parameters.get("verification"), Mapping)
                else "decisions apply to the verified audit; verification did not run."
            )
        digests = _content_digests(table, images, files, resolve_decode(decode).max_file_bytes)
        applied = apply_decisions(
            review, digests, edges, frame["group_id"].to_numpy(dtype=np.int64)
        )
        frame["group_id"] = applied.labels
        # Every row's digest: the key the decisions (and the next review) use.
        frame["digest"] = [
            d if d is not None else k for d, k in zip(digests, frame["digest"], strict=True)
        ]
        edges = applied.edges
        parameters["stages"] = [*parameters.get("stages", []), "decisions"]
        parameters["decisions"] = applied.parameters(review.source)
    return dhash_audit(
        frame,
        parameters=parameters,
        embedding_pairs=embedding_pairs,
        orientations=_whole_entries(table.orientations) if dihedral else None,
        edges=edges,
    )


def resolve_decisions(
    decisions: DecisionsSpec,
    *,
    verify: VerifySpec = "auto",
    method: str = DEFAULT_METHOD,
    threshold: ThresholdSpec = None,
) -> ReviewDecisions | None:
    """``decisions=`` as :class:`~leakaudit.decisions.ReviewDecisions`, checked before any
    image is hashed: a malformed file, or settings that cannot apply decisions (they edit
    the verified pairs, which ``verify=False``, another method or per-source thresholds
    do not make), stop the run at once."""
    if decisions is None:
        return None
    if isinstance(decisions, ReviewDecisions):
        review = decisions
    elif isinstance(decisions, (str, os.PathLike)):
        review = load_decisions(decisions)
    else:
        raise TypeError(
            "decisions must be a decisions file (path) or a ReviewDecisions; "
            f"got {describe(decisions)}."
        )
    if verify is False or method != "phash+dhash" or isinstance(threshold, Mapping):
        why = (
            "verify=False"
            if verify is False
            else f"method={method!r}"
            if method != "phash+dhash"
            else "per-source thresholds"
        )
        raise ValueError(
            "decisions apply to the verified audit (method 'phash+dhash', one threshold, "
            f"verification on); got {why}."
        )
    return review


def _content_digests(
    table: HashTable,
    images: Sequence[Any] | None,
    files: CachedFiles | None,
    max_bytes: int,
) -> list[str | None]:
    """Every readable row's byte digest (16 hex digits), the key of a review decision.

    Served by the hash cache where it knows the file (read once, then stored with its
    entry); otherwise read from ``images`` or the table's file paths.
    """
    valid = np.asarray(table.valid, dtype=bool)
    rows = np.flatnonzero(valid).tolist()
    known = files.file_digests(rows) if files is not None else {}
    sources: list[Any]
    if images is not None and len(images) == len(valid):
        sources = list(images)
    else:
        sources = [None if _IN_MEMORY_NAME.fullmatch(name) else name for name in table.sources]
    digests: list[str | None] = [None] * len(valid)
    for row in rows:
        if row in known:
            digests[row] = f"{known[row]:016x}"
        elif sources[row] is not None:
            digests[row] = source_digest(sources[row], max_bytes=max_bytes)
    return digests


def _verify_options(verify: Any, method: str, per_row_limits: bool) -> VerifyOptions | None:
    """The options verification runs with, or None when the bare threshold applies."""
    if isinstance(verify, VerifyOptions):
        options = verify
    elif verify is False:
        return None
    elif verify is True or verify == "auto":
        options = VerifyOptions()
    else:
        raise ValueError(
            f"verify must be 'auto', True, False or a VerifyOptions; got {describe(verify)}."
        )
    if method != "phash+dhash" or per_row_limits:
        if verify is True or isinstance(verify, VerifyOptions):
            raise ValueError(
                "verification runs with method='phash+dhash' and one threshold; "
                f"got method={method!r}"
                + (" with per-source thresholds" if per_row_limits else "")
                + ". Pass verify=False for the bare threshold."
            )
        return None
    return options


def _why_unverified(method: str, limits: Any, sources: Any) -> str:
    if method != "phash+dhash":
        return f"method {method!r} links by its threshold alone"
    if limits is not None:
        return "per-source thresholds link by the threshold alone"
    if sources is None:
        return "the images were not given (in-memory sources): pass images="
    return "verify=False"


def _verification_sources(table: HashTable, images: Sequence[Any] | None) -> list[Any] | None:
    """What verification decodes again: ``images``, else the table's file paths.

    In-memory rows without ``images`` are None: their pairs are decided by the
    hashes alone. None when no row can be decoded again.
    """
    if images is not None:
        return _embedding_sources(table, images)
    sources: list[Any] = [
        None if _IN_MEMORY_NAME.fullmatch(name) else name for name in table.sources
    ]
    return sources if any(source is not None for source in sources) else None


def _whole_entries(entries: OrientationHashes | None) -> OrientationHashes | None:
    """The orientation entries alone (without crop and rotation entries)."""
    if entries is None:
        return None
    whole = entries.kind == EntryKind.ORIENTATION
    if whole.all():
        return entries
    return OrientationHashes(
        entries.owner[whole], entries.phash[whole], entries.dhash[whole], entries.kind[whole]
    )


def _with_embedding_edges(edges: pd.DataFrame, pairs: pd.DataFrame | None) -> pd.DataFrame:
    if pairs is None or len(pairs) == 0:
        return edges
    a = pairs["row_a"].to_numpy(dtype=np.int64)
    b = pairs["row_b"].to_numpy(dtype=np.int64)
    extra = pd.DataFrame(
        {
            "row_a": np.minimum(a, b),
            "row_b": np.maximum(a, b),
            "stage": "embedding",
            "distance": pd.array([pd.NA] * len(a), dtype="Int64"),
            "similarity": pairs["similarity"].to_numpy(dtype=float),
            "inliers": pd.array([pd.NA] * len(a), dtype="Int64"),
            "strength": 0.5 * pairs["similarity"].to_numpy(dtype=float),
        }
    )
    combined: pd.DataFrame = pd.concat([edges, extra], ignore_index=True)
    return combined


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
    threshold: ThresholdSpec = None,
    workers: int | None = None,
    progress: bool | None = None,
    on_error: str = "warn",
    decode: DecodeOptions | None = None,
    recursive: bool = True,
    cache: CacheSpec = True,
    embedding: EmbeddingStage | None = None,
    dihedral: bool = True,
    root: str | os.PathLike[str] | None = None,
    verify: VerifySpec = "auto",
    decisions: DecisionsSpec = None,
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
    threshold : int or mapping of str to int, optional
        Largest Hamming distance counted as a near-duplicate; default 6 for
        pHash, 5 for dHash, 8 for "phash+dhash". A mapping sets thresholds per
        source: keys are split names or path patterns (``{"test": 4,
        "screenshots/*": 2, "*": 8}``, see :func:`row_thresholds`), and a pair
        links within the smaller of its two images' thresholds (the table
        then has a ``threshold`` column).
    workers : int, optional
        leakaudit's CPU workers on this machine, one number for both stages:
        processes that hash, then threads that decode candidate pairs for
        verification; default all usable cores. (The adapters' framework
        parallelism keeps its framework's name: torchvision's ``num_workers``,
        ``datasets``' ``num_proc``, Ray's ``concurrency``.)
    progress : bool, optional
        Progress bar; default only on long runs in a terminal.
    on_error : {"warn", "raise", "ignore"}, default "warn"
        Unreadable images are always recorded (``report.table["error"]``);
        "warn" emits one summary warning naming them.
    decode : DecodeOptions, optional
        Decoding policy (reduction, EXIF orientation, alpha background, size limit).
    recursive : bool, default True
        Scan split folders recursively (the ImageFolder layout).
    root : path-like, optional
        The dataset's top folder. Accepted for older callers: links are now
        followed as torchvision's ``ImageFolder`` follows them, wherever they
        lead (:func:`~leakaudit.listing.list_image_files`; a loop is named in a
        :class:`~leakaudit.listing.FolderScanWarning`), so nothing depends on it.
        A file listed twice (the same folder given for two splits, ``d`` and
        ``./d``) counts once, in the first split that lists it, with a
        :class:`~leakaudit.listing.RepeatedPathWarning`; a file reached through a
        link inside a split (a class folder of train linked into test) is a leak.
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
    dihedral : bool, default True
        Also match copies that are mirrored, flipped or rotated by 90, 180 or
        270 degrees. Each image is also hashed turned to a canonical
        orientation, from the same decode (about 1.1x the hashing time), and
        the search compares those canonical hashes
        (:class:`~leakaudit.hashing.OrientationHashes`; measured in
        ``benchmarks/RESULTS.md``, "Dihedral matching"). With verification
        (the default) the crop and rotation entries of the candidate net are
        hashed alongside (:func:`wants_crop_entries`). ``False`` hashes each
        image as it is only.
    verify : "auto", bool or VerifyOptions, default "auto"
        Hashes propose, verification decides (:mod:`leakaudit.verify`): the
        candidate pairs of the wider net (looser threshold, orientations,
        crops, small rotations) link only when the images, decoded again in
        colour, are verified to be copies (byte-identical, aligned pixels with
        the same colours and silhouette, or local features under a
        similarity transform when OpenCV is installed). ``False`` links every
        pair within ``threshold`` (the bare threshold rule). Which stages ran is in
        ``report.parameters["stages"]``, each linked pair's evidence in
        ``report.edges``. With ``dihedral=True`` it also indexes the crop and
        rotation entries (``hash_sources(..., crop_entries=True)``).
    decisions : path-like or ReviewDecisions, optional
        A reviewer's decisions (:mod:`leakaudit.decisions`; the file the HTML
        report's review controls save): a "not a copy" pair never links, a
        "copy" pair always links (stage ``decision`` in ``report.edges``).
        They name images by the digest of their bytes, so they survive renames
        and moves; a decision whose image is not among the audited ones (it
        changed) is not applied and is named in a
        :class:`~leakaudit.decisions.StaleDecisionWarning`. What they did is in
        ``report.parameters["decisions"]``. Needs the verified audit; reads
        every image's bytes once for its digest (kept in the hash cache).

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
    review = resolve_decisions(decisions, verify=verify, method=method, threshold=threshold)
    sources: list[Any] = []
    labels: list[str] = []
    tops: list[str | None] = []
    for name, spec in splits.items():
        paths = _paths_of(str(name), spec, recursive)
        sources.extend(paths)
        labels.extend([str(name)] * len(paths))
        top = os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else None
        tops.extend([top] * len(paths))
    sources, labels = drop_repeated_paths(sources, labels, tops=tops)
    every_split = warn_empty_splits(splits, labels)
    report = audit_sources(
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
        dihedral=dihedral,
        verify=verify,
        decisions=review,
    )
    return report.with_splits(every_split)  # an empty split keeps its row
