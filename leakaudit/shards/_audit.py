"""Grouping hash shards: :func:`audit_hash_shards`, the same report as every other entry point."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._text import printable
from leakaudit._validation import check_choice, describe
from leakaudit.audit import VerifySpec, audit_hash_table, decode_parameters, source_digest
from leakaudit.hashing import ON_ERROR_CHOICES, apply_on_error
from leakaudit.loading import DecodeOptions, resolve_decode
from leakaudit.policy import DEFAULT_METHOD, ThresholdSpec, resolve_threshold
from leakaudit.report import LeakageReport
from leakaudit.safe_io import resolve_within
from leakaudit.shards._read import HashShards, read_hash_shards
from leakaudit.shards._schema import ShardWarning, decode_options_of
from leakaudit.verify import VerifyOptions


def _why_unverified(method: str, threshold: ThresholdSpec) -> str | None:
    """Why the verified cascade would not run anyway (as the core words it), or None."""
    if method != "phash+dhash":
        return f"method {method!r} links by its threshold alone"
    if isinstance(threshold, Mapping):
        return "per-source thresholds link by the threshold alone"
    return None


def _readable_paths(
    paths: NDArray[np.object_] | None, root: str
) -> tuple[list[Any] | None, list[str]]:
    """The files of the ``path`` column that may be read: those resolving inside ``root``.

    Returns ``(sources, outside)``: each row's resolved file (None where there
    is none to read; None for all when no row has one) and the paths that
    resolve outside ``root``, which are never opened.
    """
    if paths is None:
        return None, []
    found: list[Any] = []
    outside: list[str] = []
    for path in paths.tolist():
        if not isinstance(path, str):
            found.append(None)
            continue
        resolved = resolve_within(path, root)
        if resolved is None:
            outside.append(path)
        found.append(resolved if resolved is not None and os.path.isfile(resolved) else None)
    return (found if any(p is not None for p in found) else None), outside


def _fill_copy_digests(
    frame: pd.DataFrame, shards: HashShards, images: Sequence[Any] | None, max_bytes: int
) -> None:
    """The report's ``digest`` of rows whose two hashes equal another row's, as the core fills it.

    These rows are the only byte-copy candidates; the digest lets the pairs
    table tell a byte copy from a re-encode (grouping never uses it). It comes
    from the shards' ``digest`` column, else from the row's image when there is
    one (``images``, or the readable file of its ``path``), never reading a
    file over ``max_bytes``.
    """
    rows = np.flatnonzero(shards.valid & ~shards.low_information)
    hashes = pd.DataFrame({"phash": shards.phash[rows], "dhash": shards.dhash[rows]})
    shared = rows[hashes.duplicated(keep=False).to_numpy()]
    present = frame["digest"].notna().to_numpy()
    wanted = [row for row in shared.tolist() if not present[row]]
    if not wanted:
        return
    values: list[str | None] = []
    for row in wanted:
        if shards.has_digest[row]:
            values.append(f"{int(shards.digest[row]):016x}")
        else:
            digest = None
            if images is not None:
                digest = source_digest(images[row], max_bytes=max_bytes)
            values.append(digest)
    frame.loc[wanted, "digest"] = values


def audit_hash_shards(
    shards: HashShards | str | os.PathLike[str],
    *,
    method: str = DEFAULT_METHOD,
    threshold: ThresholdSpec = None,
    dihedral: bool | None = None,
    verify: VerifySpec = "auto",
    images: Sequence[Any] | None = None,
    decode: DecodeOptions | None = None,
    on_error: str = "warn",
    workers: int | None = None,
    images_root: str | os.PathLike[str] | None = None,
) -> LeakageReport:
    """Group hash shards and audit the groups against their splits.

    The same grouping as every other entry point
    (:func:`leakaudit.audit.audit_hash_table`), so the report renders as text,
    JSON, CSV and HTML alike.

    Parameters
    ----------
    shards : HashShards or path-like
        The shards, or a folder of them (:func:`read_hash_shards`).
    method, threshold
        As in :func:`leakaudit.audit_splits` (default ``"phash+dhash"`` at 8).
    dihedral : bool, optional
        Match flipped and rotated copies through the orientation entries.
        Default: when the shards have the entry columns.
    verify : "auto", bool or VerifyOptions, default "auto"
        Hashes propose, verification decides, as in
        :func:`leakaudit.audit_splits`; it needs the images. They are ``images``
        when given, else the files of the ``path`` column that exist inside
        ``images_root``. When there are none, the shards are grouped by their
        hashes alone (the threshold rule, as for any table without images) and
        ``report.parameters["verification"]`` says so; ``verify=True`` then
        raises.
    images : sequence, optional
        One image (path, bytes, PIL image, or None) per row, for verification.
    decode : DecodeOptions, optional
        The decoding the hashes were made with (verification decodes alike);
        default: what the shards record, else the defaults. Limits on what is
        read (``max_file_bytes``, ``max_pixels``) are never taken from the
        shards: they are ``decode``'s, else the defaults.
    on_error : {"warn", "raise", "ignore"}, default "warn"
        Rows with an ``error`` stay in the report as unreadable images; "warn"
        emits one :class:`~leakaudit.hashing.UnreadableImageWarning` naming
        them, "raise" raises the first as
        :class:`~leakaudit.errors.ImageLoadError`.
    workers : int, optional
        Threads verification decodes with.
    images_root : path-like, optional
        The folder image files may be read from. The ``path`` column is data
        (anyone who wrote the shards chose it), so a file is opened only when
        its path resolves, links followed, inside this folder: for
        verification, the byte digests, and the HTML thumbnails and ``--show``
        pictures of the report (:meth:`LeakageReport.image_file`). Paths that
        resolve elsewhere are never opened (one :class:`ShardWarning` counts
        them; their pairs are decided by the hashes). Default None: no file
        is read, the hashes decide, and the report says so.

    Returns
    -------
    LeakageReport
        ``report.table`` has one row per shard row, in shard order, with an
        ``id`` column after ``split``. Without ``images``,
        ``parameters["images_root"]`` records the resolved folder (None: none)
        and ``parameters["images"]`` what was not read, in words.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from leakaudit.demo import photo_like_image
    >>> from leakaudit.hashing import hash_sources
    >>> from leakaudit.shards import write_hash_shards
    >>> a, b = photo_like_image(1), photo_like_image(2)
    >>> hashed = hash_sources([a, b, a.resize((96, 72))])
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "hashes"
    >>> _ = write_hash_shards(hashed, folder, ids=["a", "b", "a-small"],
    ...                       split=["train", "train", "test"])
    >>> report = audit_hash_shards(folder)
    >>> report.n_leaked_images, report.parameters["verification"]["ran"]
    (2, False)
    """
    check_choice("on_error", on_error, ON_ERROR_CHOICES)
    resolve_threshold(method, threshold)
    root: str | None = None
    if images_root is not None:
        if not isinstance(images_root, (str, os.PathLike)) or not os.path.isdir(images_root):
            raise ValueError(f"images_root must be a folder; got {describe(images_root)}.")
        root = os.path.realpath(images_root)
    from_folder = not isinstance(shards, HashShards)
    if not isinstance(shards, HashShards):
        if not isinstance(shards, (str, os.PathLike)):
            raise TypeError(
                f"shards must be a HashShards or a folder of hash shards; got {describe(shards)}."
            )
        shards = read_hash_shards(shards)
    if dihedral is None:
        dihedral = shards.orientations is not None
    elif dihedral and shards.orientations is None:
        raise ValueError(
            "dihedral=True needs the orientation entries: the shards have no "
            "orientation_phash / orientation_dhash columns (hash with dihedral=True)."
        )
    # What the shards record says how the hashes were made; the limits on reading are
    # the caller's (decode_options_of never takes them from the record).
    options = resolve_decode(decode) if decode is not None else decode_options_of(shards.hashing)
    table = shards.hash_table()
    names = table.sources
    if images is not None and len(images) != len(shards):
        raise ValueError(
            f"images must have one image per row (length {len(shards)}); got length {len(images)}."
        )
    # Images given are used as given (None rows are decided by their hashes); from the
    # path column, only files inside images_root count, and none at all means no images.
    outside: list[str] = []
    sources: list[Any] | None = None
    if images is not None:
        sources = list(images)
    elif root is not None:
        sources, outside = _readable_paths(shards.paths, root)
    apply_on_error(table.errors, on_error, total=len(shards), name_of=names.__getitem__)
    parameters: dict[str, Any] = decode_parameters(options) if options is not None else {}
    if from_folder:
        parameters["hash_shards"] = len(shards.files)
    if images is None:
        # The path column is data: pictures are read only under a root the user named.
        # Images given by the caller (the Ray adapter's, from the user's own dataset) are
        # trusted as any other audit's are.
        parameters["images_root"] = root
    if root is None and images is None:
        parameters["images"] = (
            "image files named in the shards were not read (no --images-root / images_root "
            "given): the hashes decided; no thumbnails or --show pictures"
        )
    elif outside:
        parameters["images"] = (
            f"{len(outside)} shard path(s) lie outside the images root {root} and were not "
            "read: the hashes decided their pairs"
        )
        warnings.warn(
            f"{len(outside)} shard path(s) resolve outside the images root {root} and are not "
            f"read (the hashes decide their pairs), e.g. {printable(outside[0])}",
            ShardWarning,
            stacklevel=2,
        )
    run_verify: VerifySpec = verify
    if sources is None and verify is not False:
        if verify is True or isinstance(verify, VerifyOptions):
            raise ValueError(
                "verify needs the images: the shards have no 'path' column with files that "
                "exist inside images_root (--images-root); pass images_root= or images=, or "
                "verify='auto' / False to group by hashes alone."
            )
        if verify != "auto":
            raise ValueError(
                f"verify must be 'auto', True, False or a VerifyOptions; got {describe(verify)}."
            )
        run_verify = False  # nothing to decode: the threshold rule, said so below
        parameters["stages"] = ["hash threshold"]
        no_images = (
            "images not read: no images root given (--images-root, images_root=); grouped "
            "by the hashes alone"
            if root is None
            else "the shards carry no readable image paths inside the images root: grouped "
            "by the hashes alone"
        )
        parameters["verification"] = {
            "ran": False,
            "why": _why_unverified(method, threshold) or no_images,
        }
    report = audit_hash_table(
        table,
        list(shards.split),
        names=names,
        method=method,
        threshold=threshold,
        extra_parameters=parameters,
        images=sources,
        dihedral=dihedral,
        extra_columns={"id": pd.Series(shards.ids, dtype=object)},  # names need not be UTF-8
        verify=run_verify,
        decode=options,
        workers=workers,
    )
    if report.table is not None:
        limit = resolve_decode(options).max_file_bytes
        _fill_copy_digests(report.table, shards, sources, limit)
    return report
