"""The verification stage: decode the candidates' images (threads) and judge every pair."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit import geometry
from leakaudit._evidence import COPY_KIND, EDGE_COLUMNS
from leakaudit._text import first_few, printable
from leakaudit._validation import usable_cpu_count
from leakaudit._verify_align import compare_views
from leakaudit._verify_judge import PairVerdict, colour_change
from leakaudit._verify_native import distinct_applies, distinct_pixel_count
from leakaudit._verify_options import VerifyOptions
from leakaudit._verify_view import View, load_view
from leakaudit.copykind import copy_kind
from leakaudit.errors import ImageLoadError
from leakaudit.hashing import turned_view
from leakaudit.loading import DecodeOptions, resolve_decode

__all__ = [
    "TableEntries",
    "UnverifiableImageWarning",
    "VerifiedPairs",
    "verify_candidates",
]


@dataclass(frozen=True)
class VerifiedPairs:
    """The outcome of verifying every candidate.

    Attributes
    ----------
    edges : pandas.DataFrame
        The accepted pairs, columns :data:`leakaudit.report.EDGE_COLUMNS`.
    n_candidates, n_rejected, n_unverified : int
        Candidates, rejected ones, and ones that could not be verified (an
        image that cannot be decoded again: the hashes alone decided those).
    stages : list of str
        The stages that ran.
    geometry : str
        The geometric backend that ran, or why it did not.
    n_unsupported : int
        Pairs the checks accepted that do not link: their images' verified
        neighbourhoods disagree (:func:`supported_pairs`). Not in ``edges``.
    distinct : numpy.ndarray of int64, shape (m, 2)
        Row pairs seen to differ at native resolution
        (:func:`distinct_pixel_count`): rejected, and kept in different groups.
    distinct_passed : numpy.ndarray of bool, shape (m,)
        Which of them the pixel check on the grid had accepted: they still count
        in their images' neighbourhoods for :func:`supported_pairs` (two
        look-alikes that match each other on the grid share their copies).
    n_kept_apart : int
        Verified pairs that do not link because linking them would put a
        ``distinct`` pair into one group (:func:`linking_pairs_kept_apart`). Not
        in ``edges``.
    """

    edges: pd.DataFrame
    n_candidates: int
    n_rejected: int
    n_unverified: int
    stages: list[str]
    geometry: str
    n_unsupported: int = 0
    distinct: NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    distinct_passed: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, bool))
    n_kept_apart: int = 0

    def parameters(self) -> dict[str, Any]:
        """Counts for the report's ``parameters["verification"]``."""
        return {
            "candidates": self.n_candidates,
            "verified": len(self.edges),
            "rejected": self.n_rejected,
            "unsupported": self.n_unsupported,
            "distinct": len(self.distinct),
            "kept_apart": self.n_kept_apart,
            "unverifiable": self.n_unverified,
            "geometry": self.geometry,
        }


def _geometry_choice(options: VerifyOptions) -> tuple[bool, str]:
    available = geometry.geometry_available()
    if options.geometry is False:
        return False, "off (geometry=False)"
    if not available:
        if options.geometry:
            raise ImportError(
                "geometry=True needs OpenCV: pip install 'leakaudit-vision[verify]' "
                "(or any opencv-python >= 4.5)."
            )
        return False, "not installed (pip install 'leakaudit-vision[verify]')"
    return True, geometry.geometry_backend()


class UnverifiableImageWarning(UserWarning):
    """Images that could not be decoded again: their pairs were decided by hashes alone."""


def _views(
    sources: Sequence[Any],
    names: Sequence[str],
    rows: NDArray[np.int64],
    decode: DecodeOptions,
    workers: int,
    entries: TableEntries | None = None,
) -> dict[int, View | None]:
    """Each row's view; None where there is no source or it cannot be decoded again.

    Rows whose source cannot be decoded (gone, changed or unreadable since it
    was hashed) are named in one :class:`UnverifiableImageWarning`.
    """
    failures: dict[int, str] = {}

    def load(row: int) -> View | None:
        if sources[row] is None:
            return None
        try:
            return load_view(
                sources[row],
                names[row],
                decode,
                entries=None if entries is None else entries.of(row),
            )
        except ImageLoadError as exc:
            failures[row] = exc.reason
        except (OSError, ValueError, MemoryError) as exc:
            failures[row] = str(exc) or type(exc).__name__
        return None

    row_list = rows.tolist()
    if workers <= 1 or len(row_list) < 64:
        views = {row: load(row) for row in row_list}
    else:
        # Pillow decodes and resizes without the GIL: threads share the work.
        with ThreadPoolExecutor(max_workers=workers) as pool:
            views = dict(zip(row_list, pool.map(load, row_list, chunksize=16), strict=True))
    if failures:
        named = (f"{printable(names[row])} ({reason})" for row, reason in sorted(failures.items()))
        warnings.warn(
            f"{len(failures)} image(s) could not be decoded again for verification; their "
            "candidate pairs were decided by their hashes alone (stage 'hash' in "
            f"report.edges): {first_few(named, len(failures))}.",
            UnverifiableImageWarning,
            stacklevel=4,
        )
    return views


@dataclass(frozen=True)
class TableEntries:
    """A hash table's entries, by row: what proposed each candidate pair.

    Attributes
    ----------
    owner : numpy.ndarray of int64
        The row of each entry, ascending (a row's entries are contiguous).
    phash, dhash : numpy.ndarray of uint64
    kinds : numpy.ndarray of int8
        Each entry's :class:`leakaudit.hashing.EntryKind` (``OrientationHashes.kind``).
    """

    owner: NDArray[np.int64]
    phash: NDArray[np.uint64]
    dhash: NDArray[np.uint64]
    kinds: NDArray[np.int8]

    def of(self, row: int) -> tuple[NDArray[np.uint64], NDArray[np.int8]]:
        """``(hashes, kinds)`` of one row's entries (hashes shape (k, 2))."""
        start, stop = np.searchsorted(self.owner, [row, row + 1])
        hashes = np.stack([self.phash[start:stop], self.dhash[start:stop]], axis=1)
        return hashes, self.kinds[start:stop]


def verify_candidates(
    pairs: NDArray[np.int64],
    distance: NDArray[np.int64],
    sources: Sequence[Any],
    names: Sequence[str],
    *,
    decode: DecodeOptions | None = None,
    options: VerifyOptions | None = None,
    workers: int | None = None,
    entries: TableEntries | None = None,
) -> VerifiedPairs:
    """Verify candidate pairs of rows; return the accepted ones as edges.

    Parameters
    ----------
    pairs : numpy.ndarray of int64, shape (k, 2)
        Candidate row pairs (from :func:`candidate_pairs`).
    distance : numpy.ndarray of int64, shape (k,)
        Their whole-image hash distance (-1 unknown), kept on the edges.
    sources : sequence
        The images (paths, bytes or PIL images), one per row.
    names : sequence of str
        The names used in messages.
    decode : DecodeOptions, optional
        The decoding the hashes used (trim, EXIF, background).
    options : VerifyOptions, optional
    workers : int, optional
        Threads decoding the images again; default the usable cores.
    entries : TableEntries, optional
        The hash table's entries: used instead of hashing each image again.
    """
    options = options or VerifyOptions()
    decode = resolve_decode(decode)
    use_geometry, backend = _geometry_choice(options)
    if workers is None:
        workers = usable_cpu_count()
    n_workers = max(1, int(workers))
    rows = np.unique(pairs.ravel()) if len(pairs) else np.zeros(0, dtype=np.int64)
    views = _views(sources, names, rows, decode, n_workers, entries)

    features: dict[tuple[int, int], Any] = {}
    accepted: list[tuple[int, int, str, int, float, int, float, str]] = []
    distinct: list[tuple[int, int]] = []
    distinct_passed: list[bool] = []
    rejected = unverified = 0
    ran = {"bytes", "pixels"}
    crashed: list[str] = []
    for (a, b), d in zip(pairs.tolist(), distance.tolist(), strict=True):
        view_a, view_b = views.get(a), views.get(b)
        verdict = None
        if view_a is not None and view_b is not None:
            try:
                verdict = compare_views(view_a, view_b, options)
            except Exception as exc:  # a defect of the judge must not stop the audit
                crashed.append(
                    f"{printable(names[a])} ~ {printable(names[b])} ({type(exc).__name__}: {exc})"
                )
        if verdict is None or view_a is None or view_b is None:
            # The images cannot be seen again (an in-memory item, a file gone or
            # unreadable since it was hashed), or the judge failed on them: the
            # hashes alone decide, at the linking threshold, as without verification.
            unverified += 1
            if 0 <= d <= options.link_threshold:
                ran.add("hash")
                kind = copy_kind("hash", distance=d)
                accepted.append((a, b, "hash", d, math.nan, -1, 1.0 - d / 64.0, kind))
            else:
                rejected += 1
            continue
        if options.distinct_pixels and distinct_applies(view_a, view_b, verdict):
            count = distinct_pixel_count(view_a, view_b, verdict.turn, options.distinct_pixels)
            if count >= options.distinct_pixels:
                ran.add("native")
                distinct.append((a, b))
                distinct_passed.append(verdict.accepted)
                verdict = dataclasses.replace(
                    verdict, accepted=False, reason=f"differs at native resolution ({count} px)"
                )
        if verdict.stage == "open" and use_geometry:
            ran.add("geometry")
            for key, grey in (((a, 0), view_a.grey), ((b, verdict.turn), view_b.grey)):
                if key not in features:
                    turned_grey, _ = turned_view(grey, None, key[1])
                    features[key] = geometry.extract_features(np.ascontiguousarray(turned_grey))
            match = geometry.match_features(features[(a, 0)], features[(b, verdict.turn)])
            verdict = PairVerdict(
                match.accepted,
                "geometry",
                verdict.similarity,
                verdict.chroma,
                match.inliers,
                match.reason,
                turn=verdict.turn,
                aligned=verdict.aligned,
                colour=verdict.colour,
            )
        if verdict.accepted:
            kind = copy_kind(
                verdict.stage,
                turn=verdict.turn,
                aligned=verdict.aligned,
                size_a=view_a.native_size,
                size_b=view_b.native_size,
                recoloured=colour_change(view_a, view_b, verdict),
                padded=(view_a.full_grid is None) != (view_b.full_grid is None),
                distance=d,
            )
            accepted.append(
                (
                    a,
                    b,
                    verdict.stage,
                    d,
                    verdict.similarity,
                    verdict.inliers,
                    verdict.strength,
                    kind,
                )
            )
        else:
            rejected += 1
    if crashed:
        warnings.warn(
            f"{len(crashed)} candidate pair(s) could not be compared (an error in leakaudit's "
            "verification; please report it); the hashes alone decided them (stage 'hash' in "
            f"report.edges): {first_few(crashed, len(crashed))}.",
            UnverifiableImageWarning,
            stacklevel=4,
        )
    edges = pd.DataFrame(accepted, columns=[*EDGE_COLUMNS, COPY_KIND])
    edges = edges.astype({"row_a": np.int64, "row_b": np.int64, "strength": float})
    edges["distance"] = edges["distance"].where(edges["distance"] >= 0).astype("Int64")
    edges["inliers"] = edges["inliers"].where(edges["inliers"] >= 0).astype("Int64")
    edges["similarity"] = edges["similarity"].astype(float)
    stages: list[str] = [s for s in ("bytes", "pixels", "native", "geometry", "hash") if s in ran]
    return VerifiedPairs(
        edges,
        len(pairs),
        rejected,
        unverified,
        stages,
        backend,
        distinct=np.array(distinct, dtype=np.int64).reshape(-1, 2),
        distinct_passed=np.array(distinct_passed, dtype=bool),
    )
