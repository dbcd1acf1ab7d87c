"""From verified pairs to groups: the support rule, pairs kept apart, identical images collapsed."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from PIL import Image

from leakaudit._evidence import COPY_KIND, EDGE_COLUMNS
from leakaudit._registration import ThumbnailCache, registered_pairs
from leakaudit._validation import usable_cpu_count
from leakaudit._verify_candidates import CROP, candidate_pairs_between, table_candidates
from leakaudit._verify_clumps import (
    Spanned,
    collapse_stars,
    cross_verify,
    find_stars,
    not_asked,
)
from leakaudit._verify_options import MIN_SUPPORT, VerifyOptions
from leakaudit._verify_stage import TableEntries, VerifiedPairs, verify_candidates
from leakaudit._verify_texture import texture_edges
from leakaudit.copykind import copy_kind
from leakaudit.errors import ImageLoadError
from leakaudit.grouping import connected_component_labels, exact_key_edges, linking_pairs_kept_apart
from leakaudit.hashing import bytes_digest, image_digest
from leakaudit.loading import DecodeOptions, read_source

__all__ = [
    "IDENTICAL_ALL_PAIRS_MAX",
    "iter_edge_chunks",
    "kept_together",
    "supported_pairs",
    "verified_labels",
]


def supported_pairs(
    pairs: NDArray[np.int64],
    keep: NDArray[np.bool_] | None = None,
    min_support: float = MIN_SUPPORT,
    weights: NDArray[np.int64] | None = None,
) -> NDArray[np.bool_]:
    """Which verified pairs keep the support of their images' neighbourhoods.

    An image's verified neighbourhood is itself and every image it verified
    against. A pair ``(a, b)`` is supported when the two neighbourhoods share at
    least ``min_support`` of the smaller one. Copies of one picture verify
    against one another, so a pair of copies shares most of its neighbours (a
    copy seen only with its original shares all of its own); two look-alikes
    (an icon with another badge, a sprite in another palette), each verified
    with its own copies, share only the few images too degraded to tell them
    apart, and such a chain is what glued unrelated families into one group.
    Unsupported pairs are dropped and the rest judged again on what remains,
    until none is dropped. Deterministic: the result does not depend on the
    order of ``pairs``.

    Parameters
    ----------
    pairs : numpy.ndarray of int64, shape (k, 2)
        Verified row pairs, each once.
    keep : numpy.ndarray of bool, shape (k,), optional
        Pairs kept whatever their support (byte-identical files); they still
        count in the neighbourhoods.
    min_support : float, default :data:`MIN_SUPPORT`
        0 keeps every pair.
    weights : numpy.ndarray of int64, optional
        How many images each row stands for (indexed by row; default 1 each):
        a row standing for ``w`` identical copies counts ``w`` times in every
        neighbourhood, as its copies would (:func:`verified_labels` verifies
        one representative of each set of identical images).

    Returns
    -------
    numpy.ndarray of bool, shape (k,)

    Examples
    --------
    Two families of three copies each, and one verified pair between them:

    >>> pairs = np.array([[0, 1], [0, 2], [1, 2], [3, 4], [3, 5], [4, 5], [2, 3]])
    >>> supported_pairs(pairs).tolist()
    [True, True, True, True, True, True, False]
    >>> supported_pairs(np.array([[0, 1], [0, 2], [0, 3]])).tolist()  # copies of image 0
    [True, True, True]
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    alive = np.ones(len(pairs), dtype=bool)
    fixed = np.zeros(len(pairs), dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    if min_support <= 0 or not len(pairs):
        return alive
    listed = pairs.tolist()
    while True:
        neighbours: dict[int, set[int]] = {}
        for (a, b), live in zip(listed, alive.tolist(), strict=True):
            if live:
                neighbours.setdefault(a, {a}).add(b)
                neighbours.setdefault(b, {b}).add(a)
        dropped = False
        for index in np.flatnonzero(alive & ~fixed).tolist():
            a, b = listed[index]
            first, second = neighbours[a], neighbours[b]
            common = first & second if len(first) < len(second) else second & first
            if weights is None:
                shared, smaller = len(common), min(len(first), len(second))
            else:
                shared = int(weights[list(common)].sum())
                smaller = int(min(weights[list(first)].sum(), weights[list(second)].sum()))
            if shared < min_support * smaller:
                alive[index] = False
                dropped = True
        if not dropped:
            return alive


def kept_together(edges: pd.DataFrame, distinct: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Which verified edges link when the rows of each ``distinct`` pair stay apart.

    The edges are linked strongest first (by their ``strength``: 1 for byte-identical
    copies, the pixel check's structure score, a geometric match's share of inliers;
    ties by row), each one only if
    it puts no ``distinct`` pair into one group (:func:`linking_pairs_kept_apart`):
    a copy too degraded to tell two look-alikes apart joins the one it matches best.

    Returns
    -------
    numpy.ndarray of bool, shape (len(edges),)
    """
    rows = edges[["row_a", "row_b"]].to_numpy(dtype=np.int64)
    strength = edges["strength"].to_numpy(dtype=float)
    order = np.lexsort((rows[:, 1], rows[:, 0], -strength))
    keep = np.zeros(len(rows), dtype=bool)
    keep[order] = linking_pairs_kept_apart(rows[order], distinct)
    return keep


def iter_edge_chunks(edges: pd.DataFrame) -> Iterator[NDArray[np.int64]]:
    """The accepted pairs as one chunk for :func:`leakaudit.grouping.connected_component_labels`."""
    if len(edges):
        yield edges[["row_a", "row_b"]].to_numpy(dtype=np.int64)


#: A set of images with identical hash entries but different bytes (re-encoded
#: placeholders) with more members than this is verified along a star, each member
#: once against the set's first image, instead of every pair: up to this size every
#: pair is verified, as for any other candidates. A bound on cost, not on what links
#: (RESULTS §14: the groups are those every pair gives; generated placeholders).
IDENTICAL_ALL_PAIRS_MAX = 8


def _first_of_code(codes: NDArray[np.int64], eligible: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Each row's representative: the first ``eligible`` row of its code (itself elsewhere)."""
    first = np.arange(len(codes), dtype=np.int64)
    rows = np.flatnonzero(eligible & (codes >= 0))
    if rows.size:
        order = np.lexsort((rows, codes[rows]))
        sorted_codes, sorted_rows = codes[rows][order], rows[order]
        start = np.ones(len(order), dtype=bool)
        start[1:] = sorted_codes[1:] != sorted_codes[:-1]
        first[sorted_rows] = sorted_rows[start][np.cumsum(start) - 1]
    return first


def _entry_codes(
    n: int,
    owner: NDArray[np.int64],
    phash: NDArray[np.uint64],
    dhash: NDArray[np.uint64],
    kinds: NDArray[np.int8],
) -> NDArray[np.int64]:
    """A code per row, equal for rows whose hash entries are all equal (-1: no entries).

    Each entry is mixed with its place in its row; a row's code is its entries'
    XOR and count. A collision only sends two rows to be verified together.
    """
    order = np.argsort(owner, kind="stable")
    owner = owner[order]
    place = np.arange(len(owner), dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if len(owner) else place
    place -= np.repeat(starts, np.diff(np.r_[starts, len(owner)]))
    with np.errstate(over="ignore"):
        mixed = (
            phash[order] * np.uint64(0x9E3779B97F4A7C15)
            ^ (dhash[order] * np.uint64(0xC2B2AE3D27D4EB4F))
            ^ ((kinds[order].astype(np.uint64) + np.uint64(1)) << np.uint64(56))
            ^ (place.astype(np.uint64) * np.uint64(0x165667B19E3779F9))
        )
        mixed ^= mixed >> np.uint64(29)
        mixed *= np.uint64(0xBF58476D1CE4E5B9)
    key = np.zeros(n, dtype=np.uint64)
    count = np.zeros(n, dtype=np.int64)
    if len(owner):
        key[owner[starts]] = np.bitwise_xor.reduceat(mixed, starts)
        count[owner[starts]] = np.diff(np.r_[starts, len(owner)])
    if n == 0:
        return np.zeros(0, dtype=np.int64)  # pandas 2.0 cannot factorize an empty MultiIndex
    codes, _ = pd.factorize(pd.MultiIndex.from_arrays([key, count]))
    return np.where(count > 0, codes, -1).astype(np.int64)


def _source_digest(source: Any, name: str, decode: DecodeOptions) -> int | None:
    """The digest :func:`load_view` gives a source (None where it cannot be read)."""
    try:
        if isinstance(source, Image.Image):
            return image_digest(source)
        _, data = read_source(source, name, decode)
    except (ImageLoadError, OSError, ValueError, TypeError):
        return None
    return bytes_digest(data)


def _same_bytes(
    sources: Sequence[Any],
    names: Sequence[str],
    rows: NDArray[np.int64],
    within: NDArray[np.int64],
    decode: DecodeOptions,
    workers: int | None,
) -> NDArray[np.int64]:
    """Each of ``rows``' first row (of ``rows``) with the same bytes and the same ``within``.

    Indexed by row (itself for rows not in ``rows`` and unreadable ones).
    """
    if workers is None:
        workers = usable_cpu_count()

    def digest(row: int) -> int | None:
        source = sources[row]
        return None if source is None else _source_digest(source, names[row], decode)

    row_list = rows.tolist()
    if workers <= 1 or len(row_list) < 64:
        digests = [digest(row) for row in row_list]
    else:
        with ThreadPoolExecutor(max_workers=int(workers)) as pool:
            digests = list(pool.map(digest, row_list, chunksize=64))
    codes, _ = pd.factorize(pd.Series(digests, dtype=object), use_na_sentinel=True)
    codes = codes.astype(np.int64)
    unknown = codes < 0
    codes[unknown] = codes.max(initial=-1) + 1 + np.arange(int(unknown.sum()))
    keys = (
        pd.factorize(pd.MultiIndex.from_arrays([within[rows], codes]))[0]
        if len(rows)
        else np.zeros(0, dtype=np.int64)
    )
    key = np.full(len(within), -1, dtype=np.int64)
    key[rows] = keys
    return _first_of_code(key, key >= 0)


def _byte_copy_edges(rows: NDArray[np.int64], representative: NDArray[np.int64]) -> pd.DataFrame:
    """Edges (stage ``bytes``) joining each row to its byte-identical representative."""
    a, b = np.minimum(rows, representative[rows]), np.maximum(rows, representative[rows])
    edges: pd.DataFrame = pd.DataFrame(
        {
            "row_a": a.astype(np.int64),
            "row_b": b.astype(np.int64),
            "stage": "bytes",
            "distance": pd.array(np.zeros(len(rows), dtype=np.int64), dtype="Int64"),
            "similarity": np.ones(len(rows)),
            "inliers": pd.array([pd.NA] * len(rows), dtype="Int64"),
            "strength": np.ones(len(rows)),
        }
    )[EDGE_COLUMNS]
    return edges


def _with_registered(
    verified: VerifiedPairs,
    sources: Sequence[Any],
    rows: NDArray[np.int64],
    splits: Sequence[Any] | NDArray[Any],
    decode: DecodeOptions,
    thumbnail_cache: ThumbnailCache | None = None,
) -> tuple[VerifiedPairs, NDArray[np.int64]]:
    """``verified`` with the tiny-photo net's registered pairs added as edges, and
    the rows that are tiny photos (:func:`leakaudit._registration.registered_pairs`)."""
    codes, _ = pd.factorize(pd.Series(list(splits), dtype=object))
    net = registered_pairs(
        sources, rows, np.asarray(codes, dtype=np.int64), decode, thumbnail_cache
    )
    pairs, found, tiny = net.pairs, net.registration, net.tiny
    if net.candidates == 0:
        return verified, tiny
    edges = verified.edges
    have = set(zip(edges["row_a"].tolist(), edges["row_b"].tolist(), strict=True))
    new = np.array([(a, b) not in have for a, b in pairs.tolist()], dtype=bool)
    added = pd.DataFrame(
        {
            "row_a": pairs[new, 0],
            "row_b": pairs[new, 1],
            "stage": "registered",
            "distance": pd.array([pd.NA] * int(new.sum()), dtype="Int64"),
            "similarity": found.correlation[new].astype(float),
            "inliers": pd.array([pd.NA] * int(new.sum()), dtype="Int64"),
            "strength": np.minimum(0.99, found.correlation[new].astype(float)),
        }
    )
    if COPY_KIND in edges.columns:
        added[COPY_KIND] = [
            copy_kind("registered", scale=scale, shift=shift)
            for scale, shift in zip(
                found.scale[new].tolist(), found.shift[new].tolist(), strict=True
            )
        ]
    if len(added):
        edges = pd.concat([edges, added], ignore_index=True)
        edges = edges.sort_values(["row_a", "row_b"], kind="stable", ignore_index=True)
    # A pair the checks above had already accepted is not counted again: the counts
    # keep candidates = verified + rejected + unsupported + kept apart.
    already = len(pairs) - int(new.sum())
    return dataclasses.replace(
        verified,
        edges=edges,
        n_candidates=verified.n_candidates + net.candidates - already,
        n_rejected=verified.n_rejected + net.candidates - len(pairs),
        stages=[*verified.stages, "registered"],
    ), tiny


def _with_textures(
    verified: VerifiedPairs,
    sources: Sequence[Any],
    names: Sequence[str],
    rows: NDArray[np.int64],
    decode: DecodeOptions,
    workers: int | None,
) -> VerifiedPairs:
    """``verified`` with the texture net's pairs among low-information ``rows`` added
    (:func:`leakaudit._verify_texture.texture_edges`)."""
    added, judged = texture_edges(
        sources, names, rows, decode, workers=usable_cpu_count() if workers is None else workers
    )
    if not judged:
        return verified
    edges = verified.edges
    if COPY_KIND not in edges.columns:
        added = added.drop(columns=[COPY_KIND])
    if len(added):
        edges = pd.concat([edges, added], ignore_index=True) if len(edges) else added
        edges = edges.sort_values(["row_a", "row_b"], kind="stable", ignore_index=True)
    return dataclasses.replace(
        verified,
        edges=edges,
        n_candidates=verified.n_candidates + judged,
        n_rejected=verified.n_rejected + judged - len(added),
        stages=[*verified.stages, "texture"] if len(added) else verified.stages,
    )


def _with_spanned(verified: VerifiedPairs, spanned: Spanned) -> VerifiedPairs:
    """``verified``'s counts with the pairs ``spanned`` asked added (not its edges)."""
    distinct = [verified.distinct, *(spanned.distinct or [])]
    passed = [verified.distinct_passed, *(spanned.distinct_passed or [])]
    ran = set(verified.stages) | (spanned.stages or set())
    order = ("bytes", "pixels", "native", "geometry", "hash", "registered", "texture")
    return dataclasses.replace(
        verified,
        n_candidates=verified.n_candidates + spanned.asked,
        n_rejected=verified.n_rejected + spanned.rejected,
        n_unverified=verified.n_unverified + spanned.unverified,
        stages=[stage for stage in order if stage in ran],
        distinct=np.concatenate(distinct).reshape(-1, 2),
        distinct_passed=np.concatenate(passed),
    )


def verified_labels(
    table: Any,
    sources: Sequence[Any],
    names: Sequence[str],
    *,
    low_information: NDArray[np.bool_],
    exact_keys: Sequence[Any] | NDArray[Any],
    decode: DecodeOptions,
    options: VerifyOptions,
    workers: int | None,
    dihedral: bool,
    splits: Sequence[Any] | NDArray[Any] | None = None,
    thumbnail_cache: ThumbnailCache | None = None,
) -> tuple[NDArray[np.int64], VerifiedPairs]:
    """Group labels from verified edges only, and the verification's outcome.

    Candidates come from the table's entries (orientations, crops, rotations)
    when it has them, else from its whole-image hashes; low-information rows
    link only to byte-identical low-information rows, as in
    :func:`leakaudit.grouping.link_labels`. Verified pairs without the support
    of their neighbourhoods (:func:`supported_pairs`) do not link, but for byte
    copies and pairs of two tiny photos (the tiny-photo net's images, with
    ``options.tiny_photos``). The rule is for look-alike graphics (an icon with
    another badge, each verified with its own copies), which the net leaves out;
    a tiny photo's copies come in families (a train image and its re-encodes,
    a test image and its own) that one registered pair joins, and the rule cut
    that pair (on CIFAR-10, a same-shot airliner pair; exempting tiny photos
    changed neither the generated closures' precision nor any failure class:
    ``benchmarks/RESULTS.md``, section 29).

    Identical images are verified once, never every pair of them (a placeholder
    copied 10,000 times made 50M candidate pairs): byte-identical files (equal
    ``exact_keys``) collapse to their first row, which stands for all of them in
    the candidate search, the verification and the support rule (weighted by
    their number), and each copy links to it directly (stage ``bytes``). The
    groups are the ones every pair would give: byte copies get the same
    verdicts. Images with identical hash entries but different bytes collapse
    the same way when there are more than :data:`IDENTICAL_ALL_PAIRS_MAX`
    of them: each is verified once against the first; those it accepts link to
    it, the others stay candidates as before.

    With ``splits`` (and ``options.tiny_photos``), the tiny-photo net adds its
    registered pairs (:func:`leakaudit._registration.registered_pairs`);
    ``thumbnail_cache`` serves its thumbnails of unchanged files.
    """
    n = len(table.valid)
    low = np.asarray(low_information, dtype=bool) & np.asarray(table.valid, dtype=bool)
    linkable = np.asarray(table.valid, dtype=bool) & ~low
    byte_codes, _ = pd.factorize(pd.Series(list(exact_keys), dtype=object), use_na_sentinel=True)
    byte_rep = _first_of_code(byte_codes.astype(np.int64), linkable)
    node = byte_rep.copy()
    star: VerifiedPairs | None = None
    if dihedral and table.orientations is not None and len(table.orientations):
        entries_found = table.orientations
        entry_owner, entry_phash, entry_dhash, entry_kinds_found = (
            entries_found.owner,
            entries_found.phash,
            entries_found.dhash,
            entries_found.kind,
        )
    else:
        entry_owner = np.arange(n, dtype=np.int64)
        entry_phash = np.asarray(table.phash).astype(np.uint64)
        entry_dhash = np.asarray(table.dhash).astype(np.uint64)
        entry_kinds_found = np.zeros(n, dtype=np.int8)
    first_entry = _first_of_code(
        _entry_codes(n, entry_owner, entry_phash, entry_dhash, entry_kinds_found),
        linkable & (node == np.arange(n)),
    )
    size = np.bincount(first_entry[linkable & (node == np.arange(n))], minlength=n)
    spoke = np.flatnonzero(linkable & (node == np.arange(n)) & (first_entry != np.arange(n)))
    spoke = spoke[size[first_entry[spoke]] > IDENTICAL_ALL_PAIRS_MAX]
    if len(spoke):
        # Byte copies among them first: a digest each (the file read once), no view.
        wanted = np.concatenate([np.unique(first_entry[spoke]), spoke])
        same = _same_bytes(sources, names, wanted, first_entry, decode, workers)
        byte_rep[wanted] = same[wanted]
        node = byte_rep[byte_rep]
        spoke = spoke[same[spoke] == spoke]
        size = np.bincount(first_entry[linkable & (node == np.arange(n))], minlength=n)
        spoke = spoke[size[first_entry[spoke]] > IDENTICAL_ALL_PAIRS_MAX]
    copies = np.flatnonzero(linkable & (byte_rep != np.arange(n)))
    if len(spoke):
        star = verify_candidates(
            np.stack([first_entry[spoke], spoke], axis=1),
            np.zeros(len(spoke), dtype=np.int64),
            sources,
            names,
            decode=decode,
            options=options,
            workers=workers,
        )
        joined = star.edges["row_b"].to_numpy(dtype=np.int64)
        node[np.isin(node, joined)] = first_entry[node[np.isin(node, joined)]]
    table_entries = (
        TableEntries(entry_owner, entry_phash, entry_dhash, entry_kinds_found)
        if np.any(entry_kinds_found == CROP) and bool(np.all(np.diff(entry_owner) >= 0))
        else None
    )

    def verify(pairs: NDArray[np.int64], distance: NDArray[np.int64]) -> VerifiedPairs:
        return verify_candidates(
            pairs,
            distance,
            sources,
            names,
            decode=decode,
            options=options,
            workers=workers,
            entries=table_entries,
        )

    # Clumps of near-identical images: each member verified against its star's hub,
    # which then stands for those it accepts (see leakaudit._verify_clumps).
    participants = linkable & (node == np.arange(n))
    stars = find_stars(
        entry_owner,
        entry_phash,
        entry_dhash,
        entry_kinds_found,
        participants,
        options.candidate_threshold,
    )
    along = Spanned([])
    hub_of = collapse_stars(stars, n, verify, along)
    node = hub_of[node]
    stands_for = np.arange(n) == node
    (pairs, distance), _ = table_candidates(table, low | ~stands_for, options, dihedral=dihedral)
    fresh = not_asked(pairs, stars)
    verified = _with_spanned(verify(pairs[fresh], distance[fresh]), along)
    star_edges = along.edge_frame()
    crossing = Spanned([])
    edges = verified.edges
    tiny = np.zeros(0, dtype=np.int64)
    if options.tiny_photos and splits is not None:
        verified, tiny = _with_registered(
            verified,
            sources,
            np.flatnonzero(linkable & stands_for),
            splits,
            decode,
            thumbnail_cache,
        )
        edges = verified.edges
    if options.min_support > 0 and len(edges):
        # Pairs the grid accepted but the native check told apart still count as
        # neighbours: the support rule judges the grid's matches.
        passed = verified.distinct[verified.distinct_passed]
        weights = np.bincount(node[linkable], minlength=n)
        edge_pairs = edges[["row_a", "row_b"]].to_numpy(dtype=np.int64)
        # Byte copies, and pairs of two tiny photos, link whatever their support.
        exempt = edges["stage"].eq("bytes").to_numpy() | np.isin(edge_pairs, tiny).all(axis=1)
        supported = supported_pairs(
            np.concatenate([edge_pairs, passed]),
            np.concatenate([exempt, np.zeros(len(passed), bool)]),
            options.min_support,
            weights if np.any(weights > 1) else None,
        )[: len(edges)]
        if not supported.all():
            edges = edges[supported].reset_index(drop=True)
            verified = dataclasses.replace(
                verified, edges=edges, n_unsupported=int(np.count_nonzero(~supported))
            )
    if len(verified.distinct) and len(edges):
        keep = kept_together(edges, verified.distinct)
        if not keep.all():
            edges = edges[keep].reset_index(drop=True)
            verified = dataclasses.replace(
                verified, edges=edges, n_kept_apart=int(np.count_nonzero(~keep))
            )
    if stars:
        # Every candidate pair between a star's members and another group so far.
        linked = [edges, _byte_copy_edges(copies, byte_rep), star_edges]
        if star is not None:
            linked.append(star.edges)
        cross_verify(
            stars,
            hub_of,
            np.concatenate([f[["row_a", "row_b"]].to_numpy(dtype=np.int64) for f in linked]),
            participants,
            lambda queries, index: candidate_pairs_between(
                entry_owner,
                entry_phash,
                entry_dhash,
                entry_kinds_found,
                queries,
                index,
                options.candidate_threshold,
                options.crop_candidate_threshold,
                options.crop_candidate_dhash_threshold,
            ),
            verify,
            crossing,
        )
        verified = _with_spanned(verified, crossing)
    if len(copies) or star is not None or stars:
        # The collapsed images link to the image that stood for them.
        parts = [edges, _byte_copy_edges(copies, byte_rep), star_edges, crossing.edge_frame()]
        if star is not None:
            parts.append(star.edges)
        edges = pd.concat([p for p in parts if len(p)] or [edges], ignore_index=True)
        edges = edges.sort_values(["row_a", "row_b"], kind="stable", ignore_index=True)
        verified = dataclasses.replace(
            verified,
            edges=edges,
            n_candidates=verified.n_candidates
            + len(copies)
            + (0 if star is None else star.n_candidates),
            n_rejected=verified.n_rejected + (0 if star is None else star.n_rejected),
        )
    if low.any():
        # Copies of low-information images (textures), judged on their grain: one row of
        # each set of byte copies (those link by their bytes below).
        first_low = _first_of_code(byte_codes.astype(np.int64), low) == np.arange(n)
        verified = _with_textures(
            verified, sources, names, np.flatnonzero(low & first_low), decode, workers
        )
        edges = verified.edges
    chunks: list[NDArray[np.int64]] = list(iter_edge_chunks(edges))
    if low.any():
        exact = list(exact_key_edges(exact_keys, low))
        chunks.extend(exact)
        if exact:
            rows = np.concatenate(exact)
            blank = pd.DataFrame(
                {
                    "row_a": np.minimum(rows[:, 0], rows[:, 1]),
                    "row_b": np.maximum(rows[:, 0], rows[:, 1]),
                    "stage": "bytes",
                    "distance": pd.array([pd.NA] * len(rows), dtype="Int64"),
                    "similarity": np.nan,
                    "inliers": pd.array([pd.NA] * len(rows), dtype="Int64"),
                    "strength": 1.0,
                }
            )
            edges = pd.concat([edges, blank], ignore_index=True)
            verified = dataclasses.replace(verified, edges=edges)
    labels = connected_component_labels(n, iter(chunks))
    return labels, verified
