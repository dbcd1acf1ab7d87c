"""Hashing one image or a batch of them: the per-image pipeline and its stacked twin, which
resamples same-size images with one product per pass (bit for bit the same hashes).

Batches
-------
:func:`hash_sources` decodes and hashes images in batches: the images of a batch
share one warnings context and one copy out of Pillow per size
(:func:`leakaudit.loading.greys_and_notes`), and images of one size are resampled
together, one product per pass over the whole stack, restricted to the inputs each
block of outputs reads (the products are exact, so their order does not matter).
Products that are not exact (the DCT, the crop and rotation entries) keep the
per-image shapes, broadcast over the stack, or are regrouped only where a check
once per process finds the BLAS giving the same floats. The hashes are bit for bit
those of :func:`hash_image` (``tests/test_batch_hashing.py``); on small files the
batch costs a fraction of one image at a time (``benchmarks/bench_hashing.py``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, TypeAlias, cast

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit._validation import (
    check_bool,
)
from leakaudit.errors import ImageLoadError
from leakaudit.hashing._bits import (
    bytes_digest,
    image_digest,
)
from leakaudit.hashing._entries import (
    _BASE_SIDE,
    _CROP_MATRICES,
    _ROTATION_INDICES,
    _ROTATION_MATRICES,
    _ROTATION_WEIGHTS,
    CONTENT_STEP,
    DIHEDRAL_MARGIN,
    EXTRA_KINDS,
    N_CROP_ENTRIES,
    N_EXTRA_ENTRIES,
    N_ROTATION_ENTRIES,
    N_THUMBNAIL_CROPS,
    THUMBNAIL_SLOTS,
    EntryKind,
    _content_entry,
    _crop_entries_of_image,
    _dihedral_entries,
    _oriented,
    _packed_rows,
    _pixel_entries,
    _stack_entries_from_rows,
    _thumbnail_layout,
    _uses_pixel_entries,
    content_box,
    dihedral_orientations,
    entry_kinds,
    strip_entries,
)
from leakaudit.hashing._maths import (
    _AC_SCALE,
    _DCT_LOW,
    _DCT_LOW_T,
    _DHASH_SIZE,
    _HASH_SIDE,
    _LOW_INFORMATION_ENERGY,
    _PHASH_SIZE,
    _hashes_from_thumbnails,
    _pillow_pass_order,
    _row_medians,
    _thumbnails,
    _vertical_first,
)
from leakaudit.hashing._planes import _planes_resample
from leakaudit.hashing._records import (
    HashTable,
    ImageHashes,
    OrientationHashes,
)
from leakaudit.hashing._strips import _stack_strip_entries
from leakaudit.loading import (
    Box,
    DecodeOptions,
    ImageDecodeWarning,
    ImageSource,
    ReducedGrey,
    grey_and_note_from_bytes,
    grey_and_note_from_pil,
    greys_and_notes,
    read_source,
    resolve_decode,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "hash_image",
    "hashes_and_notes",
]


def _hash_reduced(
    reduced: tuple[NDArray[np.uint8], Box | None], dihedral: bool, crop_entries: bool = False
) -> tuple[int, int, bool, list[tuple[int, int]]]:
    """pHash, dHash, low-information flag and (with ``dihedral``) the entries.

    The entries are the orientation entries, then (with ``crop_entries``) the
    :data:`N_EXTRA_ENTRIES` as-is, crop and rotation entries and the strip
    entries of a wide or tall image (:func:`strip_entries`).
    """
    pixels, box = reduced
    thumb, strip = _thumbnails(pixels, box)
    identity = _hashes_from_thumbnails(thumb, strip)
    phash, dhash, ac = identity
    low_information = bool(ac @ ac < _LOW_INFORMATION_ENERGY)
    # Blank images never link by hash, so they need no orientations.
    if not dihedral or low_information:
        return phash, dhash, low_information, []
    entries = _dihedral_entries(pixels, box, identity)
    if crop_entries:
        entries += [
            (phash, dhash),
            _content_entry(pixels, box, (phash, dhash)),
            *_crop_entries_of_image(pixels, box, thumb, (phash, dhash)),
        ]
        strip_phash, strip_dhash = strip_entries(pixels, box)
        entries += list(zip(strip_phash.tolist(), strip_dhash.tolist(), strict=True))
    return phash, dhash, low_information, entries


# ------------------------------------------------------------------------ batches
#
# The same hashes for many images at once. Images of one size (and hash box) are
# stacked and resampled with one matrix product per pass, exact as the per-image
# products are (integers times multiples of 2**-22: any summation order gives the
# same sums). Every product that is not exact (the DCT, the crop and rotation
# entries) is np.matmul broadcast over the stack, which makes one BLAS call per
# image with the same shapes and strides as the per-image code: the same floats
# to the last bit. Decisions that depend on a sum numpy could order differently
# (an image's low-band energy) are re-made the per-image way when they are close.

#: Most pixels a stacked resampling works on at once: a group of same-size images is
#: hashed in slices of at most this many pixels. Small enough for the float64 copies
#: to stay in cache and be reused by the allocator (fresh megabytes of memory cost
#: page faults); measured best at 2**16 on 64 x 64 and 125 x 94 images.
_STACK_VALUES = 1 << 16
#: Images whose crop and rotation entries are computed in one go (bounded working set).
_CROP_STACK = 64
_N_TURNS = len(THUMBNAIL_SLOTS) - N_THUMBNAIL_CROPS  # the thumbnail rotation entries


def _stack_thumbnails(
    stack: NDArray[np.uint8], box: Box | None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """:func:`_thumbnails` of every image of a ``(m, height, width)`` stack sharing ``box``.

    Returns the ``(m, 32, 32)`` thumbnails and ``(m, 8, 9)`` strips (views; copy
    them to have them C-contiguous). The stack is resampled as planes, row ``r``
    of every image side by side (``(height, m, width)``): the horizontal pass
    then works on lines and the vertical pass is one left product on the
    planes, neither needing a transposed copy.
    """
    order = _pillow_pass_order()
    if order is None or len(stack) == 1:
        pairs = [_thumbnails(pixels, box) for pixels in stack]
        return (
            np.stack([np.ascontiguousarray(thumb) for thumb, _ in pairs]),
            np.stack([strip for _, strip in pairs]),
        )
    m, height, width = stack.shape
    planes = np.empty((height, m, width), dtype=np.float64)
    planes[...] = stack.transpose(1, 0, 2)
    rule = order == "rule"
    thumb = _planes_resample(
        planes,
        (_PHASH_SIZE, _PHASH_SIZE),
        rule and _vertical_first(width, height, (_PHASH_SIZE, _PHASH_SIZE)),
        box,
    )
    strip = _planes_resample(
        planes, _DHASH_SIZE, rule and _vertical_first(width, height, _DHASH_SIZE), box
    )
    return thumb.transpose(1, 0, 2), strip.transpose(1, 0, 2)


def _stack_hashes(
    thumbs: NDArray[np.float64], strips: NDArray[np.float64]
) -> tuple[NDArray[np.uint64], NDArray[np.uint64], NDArray[np.float64]]:
    """:func:`_hashes_from_thumbnails` of stacked thumbnails: pHashes, dHashes, low bands."""
    m = len(thumbs)
    low = np.matmul(np.matmul(_DCT_LOW, thumbs), _DCT_LOW_T).reshape(m, -1)
    median = _row_medians(low)
    phash = _packed_rows(low > median[:, None])
    dhash = _packed_rows((strips[:, :, 1:] > strips[:, :, :-1]).reshape(m, -1))
    return phash, dhash, low * _AC_SCALE


def _views_hashes(
    views: Sequence[tuple[NDArray[np.uint8], Box | None]],
) -> tuple[NDArray[np.uint64], NDArray[np.uint64], NDArray[np.float64], NDArray[np.float64]]:
    """pHash, dHash, low band and 32 x 32 thumbnail of each ``(pixels, box)`` view.

    :func:`whole_hashes` of every view, with the views of one shape and box
    resampled together (:func:`_stack_thumbnails`).
    """
    n = len(views)
    thumbs = np.empty((n, _PHASH_SIZE, _PHASH_SIZE), dtype=np.float64)
    strips = np.empty((n, _HASH_SIDE, _HASH_SIDE + 1), dtype=np.float64)
    groups: dict[tuple[tuple[int, ...], Box | None], list[int]] = {}
    for index, (pixels, box) in enumerate(views):
        groups.setdefault((pixels.shape, box), []).append(index)
    for (shape, box), members in groups.items():
        per_stack = max(1, _STACK_VALUES // max(1, shape[0] * shape[1]))
        for start in range(0, len(members), per_stack):
            part = members[start : start + per_stack]
            stack = np.stack([views[i][0] for i in part])
            thumbs[part], strips[part] = _stack_thumbnails(stack, box)
    phash, dhash, ac = _stack_hashes(thumbs, strips)
    return phash, dhash, ac, thumbs


def _low_band_energy(ac: NDArray[np.float64]) -> NDArray[np.float64]:
    """``ac[i] @ ac[i]`` for every row (the same dot product per row as for one image)."""
    energy: NDArray[np.float64] = np.matmul(ac[:, None, :], ac[:, :, None]).reshape(-1)
    return energy


def _close(values: NDArray[np.float64], limit: NDArray[np.float64] | float) -> NDArray[np.bool_]:
    """Where ``values`` lie within a relative 1e-9 of ``limit``: decisions to re-make exactly."""
    close: NDArray[np.bool_] = np.abs(values - limit) <= 1e-9 * np.abs(limit)
    return close


def _stack_orientations(ac: NDArray[np.float64], energy: NDArray[np.float64]) -> list[list[int]]:
    """:func:`dihedral_orientations` of every row of ``ac``.

    Rows with no decision near a tie have one code, found in a few array
    operations; the others (and any whose comparisons with the tie margin are
    within rounding of it) go through :func:`dihedral_orientations` itself.
    """
    a, b = ac[:, 1], ac[:, _HASH_SIDE]
    tie = DIHEDRAL_MARGIN * np.sqrt(energy)
    abs_a, abs_b = np.abs(a), np.abs(b)
    gap = np.abs(abs_a - abs_b)
    transpose = abs_a < abs_b
    x = np.where(transpose, b, a)
    y = np.where(transpose, a, b)
    single = ~((gap < tie) | (np.abs(x) < tie) | (np.abs(y) < tie))
    single &= ~(_close(gap, tie) | _close(abs_a, tie) | _close(abs_b, tie))
    codes = transpose.astype(np.int64) | 2 * (x < 0) | 4 * (y < 0)
    return [
        [code] if alone else dihedral_orientations(ac[row])
        for row, (code, alone) in enumerate(zip(codes.tolist(), single.tolist(), strict=True))
    ]


def _stack_crop_entries(
    thumbs: NDArray[np.float64],
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """:func:`_crop_entries_of_thumbnail` of stacked thumbnails: ``(m, 29)`` pHashes, dHashes
    (one per :data:`THUMBNAIL_SLOTS`)."""
    m = len(thumbs)
    n_entries = len(THUMBNAIL_SLOTS)
    phash = np.empty((m, n_entries), dtype=np.uint64)
    dhash = np.empty((m, n_entries), dtype=np.uint64)
    bands = _crop_bands_fast if _fast_crop_products() else _crop_bands
    for start in range(0, m, _CROP_STACK):
        bases = thumbs[start : start + _CROP_STACK]
        low, strip = bands(bases)
        stop = start + len(bases)
        hashes = _stack_entries_from_rows(
            low.reshape(-1, _HASH_SIDE, _HASH_SIDE), strip.reshape(-1, _HASH_SIDE, _HASH_SIDE + 1)
        )
        phash[start:stop] = hashes[0].reshape(len(bases), -1)
        dhash[start:stop] = hashes[1].reshape(len(bases), -1)
    return phash, dhash


def _rotated_bases(bases: NDArray[np.float64]) -> NDArray[np.float64]:
    """The rotation entries' bases of every thumbnail: ``(m * 4, 32, 32)``.

    The per-image gather and sum over the 4 bilinear neighbours, adding them in
    the same order (first to last), one neighbour at a time.
    """
    flat = bases.reshape(len(bases), -1)
    rotated = np.take(flat, _ROTATION_INDICES[:, 0], axis=1)
    rotated *= _ROTATION_WEIGHTS[:, 0]
    for neighbour in range(1, _ROTATION_INDICES.shape[1]):
        term = np.take(flat, _ROTATION_INDICES[:, neighbour], axis=1)
        term *= _ROTATION_WEIGHTS[:, neighbour]
        rotated += term
    return rotated.reshape(-1, _BASE_SIDE, _BASE_SIDE)


def _crop_bands(
    bases: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The low bands ``(m, 29, 8, 8)`` and strips ``(m, 29, 8, 9)`` of crop and rotation entries.

    The products of :func:`_crop_entries_of_thumbnail`, broadcast over the stack:
    one BLAS call per image and box with that function's shapes and strides.
    """
    m = len(bases)
    rows, cols, strip_rows, strip_cols = _CROP_MATRICES
    turn_rows, turn_cols, turn_strip_rows, turn_strip_cols = _ROTATION_MATRICES
    shape = (m, N_THUMBNAIL_CROPS, _HASH_SIDE, -1)
    low = np.matmul(np.matmul(rows.reshape(-1, _BASE_SIDE), bases).reshape(shape), cols)
    strip = np.matmul(
        np.matmul(strip_rows.reshape(-1, _BASE_SIDE), bases).reshape(shape), strip_cols
    )
    turned = _rotated_bases(bases)
    turn_low = np.matmul(np.matmul(turn_rows[0], turned), turn_cols[0])
    turn_strip = np.matmul(np.matmul(turn_strip_rows[0], turned), turn_strip_cols[0])
    return (
        np.concatenate([low, turn_low.reshape(m, _N_TURNS, _HASH_SIDE, -1)], axis=1),
        np.concatenate([strip, turn_strip.reshape(m, _N_TURNS, _HASH_SIDE, -1)], axis=1),
    )


def _distinct_blocks(
    matrices: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """The distinct matrices of a stack, and which of them each one is."""
    flat = matrices.reshape(len(matrices), -1)
    _, first, index = np.unique(flat, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # in order of first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return np.ascontiguousarray(matrices[np.sort(first)]), rank[index.ravel()]


# The crop boxes share their row ranges (and column ranges): 7 distinct of each for 25.
_CROP_ROWS, _CROP_ROW_OF = _distinct_blocks(_CROP_MATRICES[0])
_CROP_STRIP_ROWS, _CROP_STRIP_ROW_OF = _distinct_blocks(_CROP_MATRICES[2])
#: Rows per product of the fast crop path (:func:`_rows_matmul`): one shape, checked once.
_ROW_BLOCK = 512


def _rows_matmul(lines: NDArray[np.float64], matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    """``lines @ matrix`` in products of exactly ``_ROW_BLOCK`` rows (the last one padded)."""
    n = len(lines)
    blocks = -(-n // _ROW_BLOCK)
    padded = np.zeros((blocks * _ROW_BLOCK, lines.shape[1]), dtype=np.float64)
    padded[:n] = lines
    out = np.empty((len(padded), matrix.shape[1]), dtype=np.float64)
    for start in range(0, len(padded), _ROW_BLOCK):
        stop = start + _ROW_BLOCK
        np.matmul(padded[start:stop], matrix, out=out[start:stop])
    return out[:n]


def _crop_bands_fast(
    bases: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """:func:`_crop_bands` with less work, used where it gives the very same floats.

    Of the 25 crop boxes' row products only 7 differ (boxes in one row of
    positions share their rows), and the per-box products that follow are made
    for all images and boxes at once, in fixed-shape blocks. This relies on the
    BLAS giving each row of a product the value it gives that row alone, which
    :func:`_fast_crop_products` checks once per process.
    """
    m = len(bases)
    cols, strip_cols = _CROP_MATRICES[1], _CROP_MATRICES[3]
    turn_rows, turn_cols, turn_strip_rows, turn_strip_cols = _ROTATION_MATRICES
    n_entries = len(THUMBNAIL_SLOTS)
    low = np.empty((m, n_entries, _HASH_SIDE, _HASH_SIDE), dtype=np.float64)
    strip = np.empty((m, n_entries, _HASH_SIDE, _HASH_SIDE + 1), dtype=np.float64)
    turned = _rotated_bases(bases)
    for out, distinct, row_of, columns, turn_row, turn_col in (
        (low, _CROP_ROWS, _CROP_ROW_OF, cols, turn_rows, turn_cols),
        (strip, _CROP_STRIP_ROWS, _CROP_STRIP_ROW_OF, strip_cols, turn_strip_rows, turn_strip_cols),
    ):
        left = np.matmul(distinct.reshape(-1, _BASE_SIDE), bases)
        left = left.reshape(m, len(distinct), _HASH_SIDE, _BASE_SIDE)
        for box in range(N_THUMBNAIL_CROPS):
            lines = left[:, row_of[box]].reshape(-1, _BASE_SIDE)
            out[:, box] = _rows_matmul(lines, columns[box]).reshape(m, _HASH_SIDE, -1)
        turn_left = np.matmul(turn_row[0], turned).reshape(-1, _BASE_SIDE)
        out[:, N_THUMBNAIL_CROPS:] = _rows_matmul(turn_left, turn_col[0]).reshape(
            m, _N_TURNS, _HASH_SIDE, -1
        )
    return low, strip


@lru_cache(maxsize=1)
def _fast_crop_products() -> bool:
    """Whether :func:`_crop_bands_fast` gives :func:`_crop_bands`'s floats bit for bit here.

    Checked on random thumbnails (a BLAS whose result for a row depended on the
    other rows, or on the number of rows, would differ in the last bits of
    almost every value); False makes the crop entries use the per-image shapes.
    """
    rng = np.random.default_rng(20250101)
    bases = np.floor(rng.random((_ROW_BLOCK // _HASH_SIDE + 7, _BASE_SIDE, _BASE_SIDE)) * 256.0)
    fast, reference = _crop_bands_fast(bases), _crop_bands(bases)
    return all(np.array_equal(a, b) for a, b in zip(fast, reference, strict=True))


def _content_boxes(views: Sequence[tuple[NDArray[np.uint8], Box | None]]) -> list[Box | None]:
    """:func:`content_box` of every view.

    Most images have no uniform outermost line: that first test of
    :func:`content_box` is made for all views of one shape and box at once, and
    only the views that pass it go through :func:`content_box` itself.
    """
    found: list[Box | None] = [None] * len(views)
    groups: dict[tuple[tuple[int, ...], Box | None], list[int]] = {}
    for index, (pixels, box) in enumerate(views):
        groups.setdefault((pixels.shape, box), []).append(index)
    for (shape, box), members in groups.items():
        height, width = shape
        left, top, right, bottom = (
            box if box is not None else (0.0, 0.0, float(width), float(height))
        )
        x0, y0 = int(left), int(top)
        x1, y1 = max(x0 + 1, math.ceil(right)), max(y0 + 1, math.ceil(bottom))
        if min(min(y1, height) - y0, min(x1, width) - x0) < 4:
            continue  # content_box gives None for regions this small
        stack = np.stack([views[i][0][y0:y1, x0:x1] for i in members]).astype(np.int16)
        # content_box peels nothing unless some outermost line is uniform.
        peelable = np.zeros(len(members), dtype=bool)
        for line in (stack[:, 0], stack[:, -1], stack[:, :, 0], stack[:, :, -1]):
            median = np.median(line, axis=1, keepdims=True)
            peelable |= np.all(np.abs(line - median) <= CONTENT_STEP, axis=1)
        for k in np.flatnonzero(peelable).tolist():
            pixels, view_box = views[members[k]]
            found[members[k]] = content_box(pixels, view_box)
    return found


def _hash_reduced_batch(
    reduced: Sequence[tuple[NDArray[np.uint8], Box | None]],
    dihedral: bool,
    crop_entries: bool = False,
) -> tuple[NDArray[np.uint64], NDArray[np.uint64], NDArray[np.bool_], NDArray[np.uint64]]:
    """:func:`_hash_reduced` of many images: pHashes, dHashes, low-information flags, entries.

    The entries are ``(position, phash, dhash, kind)`` rows (kind an
    :class:`~leakaudit.hashing.EntryKind`), each image's in
    :func:`_hash_reduced`'s order, images in order. Bit for bit what the
    per-image function returns (``tests/test_batch_hashing.py``).
    """
    n = len(reduced)
    no_entries = np.zeros((0, 4), dtype=np.uint64)
    if n == 0:
        empty = np.zeros(0, dtype=np.uint64)
        return empty, empty.copy(), np.zeros(0, dtype=np.bool_), no_entries
    phash, dhash, ac, thumbs = _views_hashes(reduced)
    energy = _low_band_energy(ac)
    low_information = energy < _LOW_INFORMATION_ENERGY
    for row in np.flatnonzero(_close(energy, _LOW_INFORMATION_ENERGY)).tolist():
        low_information[row] = bool(ac[row] @ ac[row] < _LOW_INFORMATION_ENERGY)
    if not dihedral:
        return phash, dhash, low_information, no_entries
    # Blank images never link by hash, so they need no orientations.
    linked = np.flatnonzero(~low_information)
    if not len(linked):
        return phash, dhash, low_information, no_entries
    codes = _stack_orientations(ac[linked], energy[linked])
    jobs = [
        (row, code)
        for row, row_codes in zip(linked.tolist(), codes, strict=True)
        for code in row_codes
        if code
    ]
    turned_phash, turned_dhash = phash[:0], dhash[:0]
    if jobs:
        turned_phash, turned_dhash = _views_hashes(
            [_oriented(reduced[row][0], reduced[row][1], code) for row, code in jobs]
        )[:2]
    counts = np.array([len(row_codes) for row_codes in codes], dtype=np.int64)
    per_row = counts + (N_EXTRA_ENTRIES if crop_entries else 0)
    strips: list[tuple[NDArray[np.uint64], NDArray[np.uint64]]] = []
    if crop_entries:
        strips = _stack_strip_entries([reduced[row] for row in linked.tolist()])
        per_row += np.array([len(p) for p, _ in strips], dtype=np.int64)
    starts = np.cumsum(per_row) - per_row
    entries = np.empty((int(per_row.sum()), 4), dtype=np.uint64)
    entries[:, 0] = np.repeat(linked, per_row)
    entries[:, 3] = EntryKind.ORIENTATION
    # Orientation entries, the canonical code first; code 0 is the image as it is.
    first = np.cumsum(counts) - counts
    slots = np.repeat(starts - first, counts) + np.arange(int(counts.sum()))
    flat_codes = np.array([code for row_codes in codes for code in row_codes], dtype=np.int64)
    owners = np.repeat(linked, counts)
    same = flat_codes == 0
    entries[slots[same], 1] = phash[owners[same]]
    entries[slots[same], 2] = dhash[owners[same]]
    entries[slots[~same], 1] = turned_phash
    entries[slots[~same], 2] = turned_dhash
    if crop_entries:
        base = starts + counts  # where each row's extra entries begin
        entries[base, 1] = phash[linked]
        entries[base, 2] = dhash[linked]
        content_phash = phash[linked].copy()
        content_dhash = dhash[linked].copy()
        boxes = _content_boxes([reduced[row] for row in linked.tolist()])
        inside = [k for k, box in enumerate(boxes) if box is not None]
        if inside:
            views = []
            for k in inside:
                pixels = reduced[int(linked[k])][0]
                content = boxes[k]
                assert content is not None
                views.append((pixels, content))
            content_phash[inside], content_dhash[inside] = _views_hashes(views)[:2]
        entries[base + 1, 1] = content_phash
        entries[base + 1, 2] = content_dhash
        # As _crop_entries_of_image: small flat images from their pixels, the rest stacked.
        from_pixels = np.array([_uses_pixel_entries(reduced[row][0]) for row in linked.tolist()])
        crop_phash = np.empty((len(linked), N_CROP_ENTRIES + N_ROTATION_ENTRIES), dtype=np.uint64)
        crop_dhash = np.empty_like(crop_phash)
        if not from_pixels.all():
            on_thumbs = linked[~from_pixels]
            stacked = _stack_crop_entries(thumbs[on_thumbs])
            crop_phash[~from_pixels], crop_dhash[~from_pixels] = _thumbnail_layout(
                *stacked, (phash[on_thumbs], dhash[on_thumbs])
            )
        for k in np.flatnonzero(from_pixels).tolist():
            crop_phash[k], crop_dhash[k] = _pixel_entries(*reduced[int(linked[k])])
        columns = base[:, None] + 2 + np.arange(N_CROP_ENTRIES + N_ROTATION_ENTRIES)
        entries[columns, 1] = crop_phash
        entries[columns, 2] = crop_dhash
        extra = base[:, None] + np.arange(N_EXTRA_ENTRIES)
        entries[extra, 3] = np.asarray(EXTRA_KINDS, dtype=np.uint64)
        for k, (strip_phash, strip_dhash) in enumerate(strips):
            if len(strip_phash):
                at = int(base[k]) + N_EXTRA_ENTRIES + np.arange(len(strip_phash))
                entries[at, 1], entries[at, 2] = strip_phash, strip_dhash
                entries[at, 3] = EntryKind.STRIP
    return phash, dhash, low_information, entries


def hash_image(
    source: ImageSource,
    *,
    decode: DecodeOptions | None = None,
    dihedral: bool = False,
    crop_entries: bool = False,
) -> ImageHashes:
    """Compute pHash, dHash, the low-information flag and (if flagged) the byte digest.

    Parameters
    ----------
    source : str, os.PathLike, bytes or PIL.Image.Image
        A path, the encoded bytes of an image file, or an opened image.
    decode : DecodeOptions, optional
        Decoding settings (reduced decode, EXIF orientation, background, size limit).
    dihedral : bool, default False
        Also hash the image turned to its canonical orientation(s)
        (``ImageHashes.orientations``), for matching flipped and rotated copies.
    crop_entries : bool, default False
        With ``dihedral``, also the entries of the candidate net that reaches
        padded, cropped and slightly rotated copies (see :func:`hash_sources`).

    Returns
    -------
    ImageHashes

    Raises
    ------
    ImageLoadError
        The image cannot be read; ``reason`` says why.

    Examples
    --------
    >>> import numpy as np
    >>> from PIL import Image
    >>> ramp = Image.fromarray(np.tile(np.arange(0, 256, 4, dtype=np.uint8), (64, 1)))
    >>> h = hash_image(ramp)
    >>> f"{h.dhash:016x}", h.low_information
    ('ffffffffffffffff', False)
    >>> hash_image(Image.new("RGB", (50, 50), "navy")).low_information
    True
    """
    options = resolve_decode(decode)
    check_bool("dihedral", dihedral)
    check_bool("crop_entries", crop_entries)
    crop = _wants_crop_entries(options, crop_entries)
    if isinstance(source, Image.Image):
        reduced, note = grey_and_note_from_pil(source, "<in-memory PIL image>", options)
        phash, dhash, low_information, entries = _hash_reduced(reduced, dihedral, crop)
        digest = image_digest(source) if low_information else 0
    else:
        name, data = read_source(source, "<in-memory bytes>", options)
        reduced, note = grey_and_note_from_bytes(data, name, options)
        phash, dhash, low_information, entries = _hash_reduced(reduced, dihedral, crop)
        digest = bytes_digest(data) if low_information else 0
    if note:
        warnings.warn(note, ImageDecodeWarning, stacklevel=2)
    kinds = entry_kinds(np.zeros(len(entries), dtype=np.int64)).tolist()
    return ImageHashes(
        phash, dhash, low_information, digest, tuple(entries), tuple(int(k) for k in kinds)
    )


# One result per item: (phash, dhash, low_information, digest, orientation entries,
# decode warning), or the failure reason. The entries are the (phash, dhash, kind) of
# the canonical orientation candidates and the crop entries (empty unless dihedral
# matching was asked for); the warning is the ImageDecodeWarning text, "" when Pillow
# warned about nothing.
_ItemResult: TypeAlias = "tuple[int, int, bool, int, list[tuple[int, int, int]], str] | str"
# One result per chunk of items, as arrays (cheap to send back from a worker):
# (len, 3) uint64 columns phash, dhash, digest; the low_information flags;
# position in the chunk -> failure reason (those rows are all zero); the
# orientation entries as (position in the chunk, phash, dhash, kind) columns; and
# position in the chunk -> decode warning.
_ChunkResult: TypeAlias = (
    "tuple[NDArray[np.uint64], NDArray[np.bool_], dict[int, str], NDArray[np.uint64], "
    "dict[int, str]]"
)


def _hash_encoded(
    source: str | bytes,
    name: str,
    options: DecodeOptions,
    dihedral: bool = False,
    crop_entries: bool = False,
) -> _ItemResult:
    return _item_result(_hash_items([source], [name], options, dihedral, crop_entries))


def _hash_pil(
    image: Image.Image,
    name: str,
    options: DecodeOptions,
    dihedral: bool = False,
    crop_entries: bool = False,
) -> _ItemResult:
    return _item_result(_hash_items([image], [name], options, dihedral, crop_entries))


def _item_result(result: _ChunkResult) -> _ItemResult:
    """The one item of a chunk result, as an item result."""
    values, low_information, errors, entries, notes = result
    if errors:
        return errors[0]
    phash, dhash, digest = (int(v) for v in values[0])
    pairs = [(int(p), int(d), int(k)) for p, d, k in entries[:, 1:].tolist()]
    return phash, dhash, bool(low_information[0]), digest, pairs, notes.get(0, "")


def _hash_chunk(
    sources: list[str | bytes],
    names: list[str],
    options: DecodeOptions,
    dihedral: bool = False,
    crop_entries: bool = False,
) -> _ChunkResult:
    """Worker entry point: hash a chunk of paths/bytes (runs in a pool process)."""
    return _hash_items(sources, names, options, dihedral, crop_entries)


#: Items decoded before their hashes are computed together (:func:`_hash_items`), and
#: the most encoded bytes held for that meanwhile (for the digests of blank images).
_BATCH_ITEMS = 128
_BATCH_BYTES = 32 * 2**20
#: And the most decoded pixels held at once (images decoded at full size are large).
_BATCH_PIXELS = 1 << 23


def _hash_items(
    items: Sequence[str | bytes | Image.Image],
    names: Sequence[str],
    options: DecodeOptions,
    dihedral: bool = False,
    crop_entries: bool = False,
) -> _ChunkResult:
    """Hash paths, bytes and PIL images: read and decode each, then hash them together.

    The result of :func:`_hash_encoded` / :func:`_hash_pil` for each item, as a
    chunk result: decoding batches (:func:`leakaudit.loading.greys_and_notes`)
    and hashing batches (:func:`_hash_reduced_batch`) cost less per image than
    one image at a time, and give the same hashes.
    """
    n = len(items)
    values = np.zeros((n, 3), dtype=np.uint64)  # phash, dhash, digest
    low_information = np.zeros(n, dtype=np.bool_)
    errors: dict[int, str] = {}
    notes: dict[int, str] = {}
    entry_parts: list[NDArray[np.uint64]] = []
    positions: list[int] = []
    decodable: list[bytes | Image.Image] = []
    held = 0

    def flush() -> None:
        nonlocal held
        while positions:
            decoded = greys_and_notes(
                decodable, [names[k] for k in positions], options, pixel_budget=_BATCH_PIXELS
            )
            hash_decoded(*decoded)
        held = 0

    def hash_decoded(reduced: list[ReducedGrey | str], batch_notes: dict[int, str]) -> None:
        # The first len(reduced) pending items were decoded: hash them, then drop them.
        read: list[int] = []
        for j, result in enumerate(reduced):
            if isinstance(result, str):
                errors[positions[j]] = result
            else:
                read.append(j)
        for j, note in batch_notes.items():
            notes[positions[j]] = note
        rows = np.asarray([positions[j] for j in read], dtype=np.intp)
        phash, dhash, low, entries = _hash_reduced_batch(
            [cast("ReducedGrey", reduced[j]) for j in read],
            dihedral,
            _wants_crop_entries(options, crop_entries),
        )
        values[rows, 0] = phash
        values[rows, 1] = dhash
        low_information[rows] = low
        for t in np.flatnonzero(low).tolist():
            source = decodable[read[t]]
            values[rows[t], 2] = (
                image_digest(source) if isinstance(source, Image.Image) else bytes_digest(source)
            )
        if len(entries):
            entries[:, 0] = rows[entries[:, 0].astype(np.intp)]
            entry_parts.append(entries)
        del positions[: len(reduced)]
        del decodable[: len(reduced)]

    for k, (item, name) in enumerate(zip(items, names, strict=True)):
        if type(item) is bytes or isinstance(item, Image.Image):
            decodable.append(item)  # read_source would return bytes as they are
            held += len(item) if type(item) is bytes else 0
        else:
            try:
                data = read_source(item, name, options)[1]
            except ImageLoadError as exc:
                errors[k] = exc.reason
                continue
            decodable.append(data)
            held += len(data)
        positions.append(k)
        if len(positions) >= _BATCH_ITEMS or held >= _BATCH_BYTES:
            flush()
    flush()
    entries = np.concatenate([_entry_array([]), *entry_parts])
    return values, low_information, errors, entries, notes


def hashes_and_notes(
    sources: Sequence[str | bytes | Image.Image],
    names: Sequence[str],
    *,
    decode: DecodeOptions | None = None,
    dihedral: bool = False,
    crop_entries: bool = False,
) -> tuple[HashTable, dict[int, str]]:
    """Hash a batch of images in this process, and return the decoder warnings unsaid.

    What :func:`hash_sources` does with one chunk of its sources, for callers that
    name the images and report their failures and warnings their own way (the
    Hugging Face adapter, inside ``Dataset.map``): no process pool, no progress
    bar, no ``on_error`` policy, no warning emitted. The hashes are those of
    :func:`hash_image`, image for image.

    Parameters
    ----------
    sources : sequence of str, bytes or PIL.Image.Image
        Paths, encoded image bytes, or opened images.
    names : sequence of str
        What to call each image in the table (``HashTable.sources``) and in
        decoder warnings.
    decode : DecodeOptions, optional
        Decoding settings shared by all images.
    dihedral : bool, default False
        Also hash each image in its canonical orientation(s)
        (``HashTable.orientations``).
    crop_entries : bool, default False
        With ``dihedral``, also the crop entries (see :func:`hash_sources`).

    Returns
    -------
    table : HashTable
        One row per source; unreadable rows have ``valid=False`` and a reason in
        ``errors``.
    notes : dict of int to str
        Row -> the :class:`~leakaudit.loading.ImageDecodeWarning` text of images
        that were hashed although Pillow warned about them.

    Examples
    --------
    >>> from PIL import Image
    >>> table, notes = hashes_and_notes([Image.new("L", (64, 64)), b"junk"], ["blank", "junk"])
    >>> table.valid.tolist(), table.errors, notes
    ([True, False], {1: 'not a recognised image format'}, {})
    """
    options = resolve_decode(decode)
    check_bool("dihedral", dihedral)
    check_bool("crop_entries", crop_entries)
    if len(names) != len(sources):
        raise ValueError(
            f"names must have one entry per source (length {len(sources)}); "
            f"got length {len(names)}."
        )
    values, low_information, errors, entries, notes = _hash_items(
        list(sources), [str(name) for name in names], options, dihedral, crop_entries
    )
    valid = np.ones(len(values), dtype=np.bool_)
    valid[list(errors)] = False
    orientations = None
    if dihedral:
        orientations = _orientation_hashes(entries)
    table = HashTable(
        sources=[str(name) for name in names],
        phash=values[:, 0].copy(),
        dhash=values[:, 1].copy(),
        digest=values[:, 2].copy(),
        low_information=low_information,
        valid=valid,
        errors=dict(sorted(errors.items())),
        orientations=orientations,
    )
    return table, notes


def _wants_crop_entries(options: DecodeOptions, crop_entries: bool) -> bool:
    """Whether to hash the crop entries: asked for, or by the deprecated
    ``DecodeOptions.crop_entries``."""
    return bool(crop_entries or options.crop_entries)


def _entry_array(rows: list[tuple[int, int, int, int]]) -> NDArray[np.uint64]:
    """Entries as ``(row, phash, dhash, kind)`` columns (see :func:`_hash_reduced_batch`)."""
    return np.array(rows, dtype=np.uint64).reshape(-1, 4)


def _orientation_hashes(entries: NDArray[np.uint64]) -> OrientationHashes:
    """:class:`OrientationHashes` of ``(row, phash, dhash, kind)`` columns, rows ascending."""
    return OrientationHashes(
        owner=entries[:, 0].astype(np.int64),
        phash=entries[:, 1].copy(),
        dhash=entries[:, 2].copy(),
        kind=entries[:, 3].astype(np.int8),
    )
