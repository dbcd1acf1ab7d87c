"""The candidate net: which pairs of rows verification compares (entry kinds that pair up)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from leakaudit._verify_options import VerifyOptions
from leakaudit.hashing import EntryKind, popcount64
from leakaudit.search import iter_pairs_within
from leakaudit.search_between import iter_pairs_between

__all__ = [
    "AS_IS",
    "CONTENT",
    "CROP",
    "PAIRED_KINDS",
    "ROTATION",
    "STRIP",
    "WHOLE",
    "candidate_pairs",
    "candidate_pairs_between",
    "repeats_as_is",
    "table_candidates",
]

# The entry kinds by the names verification gives them (one numbering: EntryKind).
WHOLE = EntryKind.ORIENTATION
CROP = EntryKind.CROP
ROTATION = EntryKind.ROTATION
AS_IS = EntryKind.AS_IS
CONTENT = EntryKind.CONTENT
STRIP = EntryKind.STRIP
# Which kinds of entries pair up: turned whole images with each other; the image as it
# is with crops and rotations; crops with rotations (a rotated copy's crop against the
# original's rotation); the content inside a uniform background with another's content
# or whole image (a padded or letterboxed graphic); a strip of a wide (or band of a
# tall) image with the image as it is of a row that has strips too (a portrait copy is
# tall enough to have bands). Never crop with crop or rotation with rotation.
PAIRED_KINDS = np.zeros((len(EntryKind), len(EntryKind)), dtype=bool)
for _x, _y in (
    (WHOLE, WHOLE),
    (AS_IS, CROP),
    (AS_IS, ROTATION),
    (CROP, ROTATION),
    (CONTENT, CONTENT),
    (CONTENT, AS_IS),
    (STRIP, AS_IS),
):
    PAIRED_KINDS[_x, _y] = PAIRED_KINDS[_y, _x] = True


def candidate_pairs(
    owner: NDArray[np.int64],
    phash: NDArray[np.uint64],
    dhash: NDArray[np.uint64],
    kinds: NDArray[np.int8],
    linkable: NDArray[np.bool_],
    threshold: int,
    crop_threshold: int | None = None,
    crop_dhash_threshold: int | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Row pairs with a pair of entries within the thresholds on both hashes.

    Entries pair turned whole images with each other (both hashes within
    ``threshold``), and the image as it is with crops and rotations, and crops
    with rotations (a rotated copy's crop against the original's rotation),
    and strips with the image as it is of rows that have strips:
    pHash within ``crop_threshold`` and dHash within ``crop_dhash_threshold``
    (both default ``threshold``). Never crop with crop or rotation with
    rotation (they add false candidates and reach nothing the others miss).
    Every search is exact (:func:`leakaudit.search.iter_pairs_within`,
    :func:`leakaudit.search_between.iter_pairs_between`): every such pair of
    entries is found.

    Returns
    -------
    pairs : numpy.ndarray of int64, shape (k, 2)
        Row pairs ``(a, b)``, ``a < b``, each once.
    distance : numpy.ndarray of int64, shape (k,)
        The smallest ``max(pHash, dHash)`` distance of a whole-with-whole entry
        pair of the two rows; -1 when only crop or rotation entries matched.
    """
    return _row_pairs(
        owner, phash, dhash, kinds, linkable, None, threshold, crop_threshold, crop_dhash_threshold
    )


def candidate_pairs_between(
    owner: NDArray[np.int64],
    phash: NDArray[np.uint64],
    dhash: NDArray[np.uint64],
    kinds: NDArray[np.int8],
    queries: NDArray[np.bool_],
    index: NDArray[np.bool_],
    threshold: int,
    crop_threshold: int | None = None,
    crop_dhash_threshold: int | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The pairs of :func:`candidate_pairs` with one row in ``queries`` and one in ``index``.

    ``queries`` and ``index`` are disjoint masks of rows. Every search is one between
    the two sets' entries (never within either), so the pairs inside one set (a
    clump's members among themselves: quadratic) are never made. The same pairs,
    distances and order as :func:`candidate_pairs` over ``queries | index`` restricted
    to pairs across the two sets.
    """
    if np.any(queries & index):
        raise ValueError("queries and index must be disjoint masks of rows.")
    return _row_pairs(
        owner,
        phash,
        dhash,
        kinds,
        queries | index,
        (queries, index),
        threshold,
        crop_threshold,
        crop_dhash_threshold,
    )


def _row_pairs(
    owner: NDArray[np.int64],
    phash: NDArray[np.uint64],
    dhash: NDArray[np.uint64],
    kinds: NDArray[np.int8],
    linkable: NDArray[np.bool_],
    sides: tuple[NDArray[np.bool_], NDArray[np.bool_]] | None,
    threshold: int,
    crop_threshold: int | None,
    crop_dhash_threshold: int | None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """:func:`candidate_pairs` (``sides`` None) or :func:`candidate_pairs_between`."""
    crop_threshold = threshold if crop_threshold is None else crop_threshold
    crop_dhash_threshold = threshold if crop_dhash_threshold is None else crop_dhash_threshold
    usable = linkable[owner] & ~repeats_as_is(owner, phash, dhash, kinds)

    def of_kinds(*wanted: int) -> NDArray[np.int64]:
        return np.flatnonzero(usable & np.isin(kinds, wanted))

    def one_way(
        queries: NDArray[np.int64], index: NDArray[np.int64], t: int
    ) -> Iterator[NDArray[np.int64]]:
        for chunk in iter_pairs_between(phash[queries], phash[index], t):
            yield np.stack([queries[chunk[:, 0]], index[chunk[:, 1]]], axis=1)

    def within(entries: NDArray[np.int64], t: int) -> Iterator[NDArray[np.int64]]:
        if sides is not None:
            on_query = sides[0][owner[entries]]
            yield from one_way(entries[on_query], entries[sides[1][owner[entries]]], t)
        elif entries.size >= 2:
            for chunk in iter_pairs_within(phash[entries], t):
                yield entries[chunk]

    def between(
        queries: NDArray[np.int64], index: NDArray[np.int64], t: int
    ) -> Iterator[NDArray[np.int64]]:
        if sides is None:
            yield from one_way(queries, index, t)
            return
        # Both directions: a query's entry of either kind against the index's of the other.
        first, second = sides
        yield from one_way(queries[first[owner[queries]]], index[second[owner[index]]], t)
        yield from one_way(queries[second[owner[queries]]], index[first[owner[index]]], t)

    # Crops only ever meet as-is and rotation entries: searching between the sets, not
    # within their union, never makes the crop-with-crop pairs (most of them an image's
    # own crops), about 5x the work at 20k photos.
    strips = of_kinds(STRIP)
    searches = itertools.chain(
        within(of_kinds(WHOLE), threshold),
        within(of_kinds(AS_IS, CONTENT), crop_threshold),
        between(of_kinds(AS_IS, ROTATION), of_kinds(CROP), crop_threshold),
        between(of_kinds(AS_IS), of_kinds(ROTATION), crop_threshold),
        # Strips only meet the as-is entries of wide or tall rows (those with strips):
        # none at all in a set of square images.
        between(strips, _as_is_of_owners(owner, kinds, usable, strips), crop_threshold),
    )
    found: list[NDArray[np.int64]] = []
    dist: list[NDArray[np.int64]] = []
    for e in searches:
        a, b = e[:, 0], e[:, 1]
        d = popcount64(dhash[a] ^ dhash[b]).astype(np.int64)
        whole = (kinds[a] == WHOLE) & (kinds[b] == WHOLE)
        d_limit = np.where(whole, threshold, crop_dhash_threshold)
        keep = (owner[a] != owner[b]) & (d <= d_limit) & PAIRED_KINDS[kinds[a], kinds[b]]
        if not keep.any():
            continue
        a, b, d, whole = a[keep], b[keep], d[keep], whole[keep]
        p = popcount64(phash[a] ^ phash[b]).astype(np.int64)
        lo, hi = np.minimum(owner[a], owner[b]), np.maximum(owner[a], owner[b])
        found.append(np.stack([lo, hi], axis=1))
        dist.append(np.where(whole, np.maximum(p, d), 10_000))
    if not found:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    pairs = np.concatenate(found)
    distance = np.concatenate(dist)
    order = np.lexsort((distance, pairs[:, 1], pairs[:, 0]))
    pairs, distance = pairs[order], distance[order]
    first = np.ones(len(pairs), dtype=bool)
    first[1:] = np.any(pairs[1:] != pairs[:-1], axis=1)
    pairs, distance = pairs[first], distance[first]
    return pairs, np.where(distance >= 10_000, -1, distance)


def repeats_as_is(
    owner: NDArray[np.int64],
    phash: NDArray[np.uint64],
    dhash: NDArray[np.uint64],
    kinds: NDArray[np.int8],
) -> NDArray[np.bool_]:
    """Crop and rotation entries with both hashes equal to their own row's as-is entry.

    A row hashed from its thumbnail (a photo of at most 32 x 32 pixels) holds its
    whole-image hashes in the crop and rotation slots it does not make
    (``hashing.THUMBNAIL_SLOTS``). Such an entry is no crop: it is left out of the
    searches (and of the judge's alignments), so such a row gets the pairs of the net
    before issue 36's denser boxes and their search costs nothing. (A crop made from
    the pixels whose 128 bits both equal the whole image's is left out too: its
    hashes are the as-is entry's, which the crop-with-rotation pairs already meet.)
    """
    repeats = np.zeros(len(owner), dtype=bool)
    as_is = np.flatnonzero(kinds == AS_IS)
    if not as_is.size:
        return repeats
    rows = np.full(int(owner.max()) + 1, -1, dtype=np.int64)
    rows[owner[as_is]] = as_is
    other = rows[owner]
    candidates = np.flatnonzero(((kinds == CROP) | (kinds == ROTATION)) & (other >= 0))
    same = (phash[candidates] == phash[other[candidates]]) & (
        dhash[candidates] == dhash[other[candidates]]
    )
    repeats[candidates[same]] = True
    return repeats


def _as_is_of_owners(
    owner: NDArray[np.int64],
    kinds: NDArray[np.int8],
    usable: NDArray[np.bool_],
    strips: NDArray[np.int64],
) -> NDArray[np.int64]:
    """The usable as-is entries of the rows that own some of the entries ``strips``."""
    if not strips.size:
        return strips
    return np.flatnonzero(usable & (kinds == AS_IS) & np.isin(owner, np.unique(owner[strips])))


def table_candidates(
    table: Any, low_information: NDArray[np.bool_], options: VerifyOptions, *, dihedral: bool
) -> tuple[
    tuple[NDArray[np.int64], NDArray[np.int64]],
    tuple[NDArray[np.int64], NDArray[np.uint64], NDArray[np.uint64], NDArray[np.int8]],
]:
    """The candidate net of a hash table (or anything with its columns): the one place
    that decides which rows verification will compare.

    Candidates come from the table's entries (orientations, crops, rotations)
    with ``dihedral`` when it has them, else from its whole-image hashes;
    low-information rows are never candidates.

    Returns
    -------
    ((pairs, distance), (owner, phash, dhash, kinds))
        :func:`candidate_pairs`' result, and the entries it searched.
    """
    n = len(table.valid)
    valid = np.asarray(table.valid, dtype=bool)
    linkable = valid & ~np.asarray(low_information, dtype=bool)
    entries = table.orientations if dihedral else None
    if entries is not None and len(entries):
        owner, phash, dhash, kinds = entries.owner, entries.phash, entries.dhash, entries.kind
    else:
        owner = np.arange(n, dtype=np.int64)
        phash = np.where(valid, table.phash, np.uint64(0)).astype(np.uint64)
        dhash = np.where(valid, table.dhash, np.uint64(0)).astype(np.uint64)
        kinds = np.zeros(n, dtype=np.int8)
    found = candidate_pairs(
        owner,
        phash,
        dhash,
        kinds,
        linkable,
        options.candidate_threshold,
        options.crop_candidate_threshold,
        options.crop_candidate_dhash_threshold,
    )
    return found, (owner, phash, dhash, kinds)
