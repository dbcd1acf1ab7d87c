"""Perceptual hashes (dHash, pHash) of images, hex encoding, and Hamming distances.

Both hashes are computed from one decode: :func:`leakaudit.loading.load_reduced_grey`
returns a small greyscale image, which is resized with Lanczos to

* 9 wide x 8 high for **dHash**: bit ``(r, c)`` is set when
  ``pixel[r, c + 1] > pixel[r, c]`` (``imagehash.dhash``);
* 32 x 32 for **pHash**: the unnormalised DCT-II of both axes (what
  ``scipy.fftpack.dct`` computes, done here with a precomputed matrix), keep the
  low-frequency 8 x 8 block *including* the DC term, and set bit ``(r, c)`` when
  that coefficient is above the median of the 64 (``imagehash.phash``).

Bit order
---------
A hash is a ``uint64``. The 8 x 8 bit matrix is read row-major, and the first
element (row 0, column 0) is the **most significant** bit. Printed as 16 lowercase
hex digits this is exactly ``str(imagehash.phash(image))`` /
``str(imagehash.dhash(image))`` for images that need no reduction or flattening.

Hashes of near-flat images are noise: their 63 AC coefficients are all close to
zero and the median split flips at random. Such images are flagged with
``low_information=True`` so the search can treat them separately; for them (and
only for them) a ``digest`` of the file bytes is computed, which links a blank
image to its byte-identical copies.

Resampling
----------
The two Lanczos resizes are Pillow's own ``Image.resize(size, LANCZOS)``
reproduced exactly in numpy (see :func:`_lanczos_weights`): the same fixed-point
coefficients, the same rounding and clipping after each pass, the same pass
order. Both thumbnails come from one float64 matrix product per pass, several
times cheaper than two calls into Pillow on images this small. The emulation
checks itself against the installed Pillow once per process and falls back to
Pillow's resize should they ever disagree.

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

import contextlib
import hashlib
import math
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit._progress import Progress, progress_enabled
from leakaudit._text import first_few, printable
from leakaudit._validation import (
    check_bool,
    check_choice,
    check_int,
    check_workers,
    describe,
    usable_cpu_count,
)
from leakaudit._workers import worker_context
from leakaudit.errors import ImageLoadError
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
    from multiprocessing.connection import Connection

    import pandas as pd

__all__ = [
    "CROP_BOXES",
    "CROP_ROTATIONS",
    "CROP_SCALES",
    "HASH_METHODS",
    "MAX_ORIENTATIONS",
    "N_CROP_ENTRIES",
    "N_EXTRA_ENTRIES",
    "N_ROTATION_ENTRIES",
    "ON_ERROR_CHOICES",
    "HashTable",
    "ImageHashes",
    "OrientationHashes",
    "UnreadableImageWarning",
    "apply_on_error",
    "bytes_digest",
    "content_box",
    "dihedral_orientations",
    "entry_kinds",
    "hamming_distance",
    "hash_image",
    "hash_sources",
    "hashes_and_notes",
    "hashes_to_hex",
    "hashes_to_hex_arrow",
    "hex_to_hashes",
    "image_digest",
    "popcount64",
    "source_name",
    "triangle_weights",
    "turned_view",
    "whole_and_crop_hashes",
    "whole_hashes",
]

HASH_METHODS: tuple[str, ...] = ("dhash", "phash")
ON_ERROR_CHOICES = ("warn", "raise", "ignore")

# Below this many items a process pool costs more to start than it saves.
PARALLEL_MIN_ITEMS = 200
# Chunks handed to the pool and not yet finished, per worker: enough to keep every
# worker busy while results are collected in order, without queueing the whole
# batch (each queued chunk holds its sources and a future until it runs).
POOL_CHUNKS_PER_WORKER = 3

# Low-information criterion: the RMS of the 63 AC coefficients of the low 8 x 8 DCT
# block pHash thresholds, in orthonormal units (grey levels). The 32 x 32 thumbnail
# is rounded to 8 bits, which alone puts noise of RMS 0.29 on every coefficient, and
# JPEG ringing/resampling add as much again. pHash compares each coefficient to
# their median; when the coefficients themselves are only a few times that noise,
# which side of the median each lands on is chance and the hash is not
# reproducible (a solid colour is the extreme: all 63 are 0 plus float noise).
# Measuring the *low band* rather than the thumbnail's standard deviation
# separates structure from noise better: a real image or a gradient puts its
# energy in low frequencies (this RMS is ~3.5 x its std), white noise spreads it
# evenly (~1.4 x). Measured: solid colours and JPEGs of them give 0; flat fields
# with sensor noise of std <= 8 give < 2; a 3-level gradient gives 3.3; real
# photos squeezed into 10 grey levels give 2.4-16; ordinary photos 30-200.
LOW_INFORMATION_RMS = 2.0

_PHASH_SIZE = 32
_HASH_SIDE = 8
_LANCZOS = Image.Resampling.LANCZOS
_DHASH_SIZE = (_HASH_SIDE + 1, _HASH_SIDE)  # (width, height) of the dHash strip


def _dct_ii_matrix(n: int, keep: int) -> NDArray[np.float64]:
    # Row k of the unnormalised DCT-II (scipy.fftpack.dct, type 2, norm=None):
    # y[k] = 2 * sum_n x[n] * cos(pi * k * (2n + 1) / (2N)).
    k = np.arange(keep, dtype=np.float64)[:, None]
    i = np.arange(n, dtype=np.float64)[None, :]
    return 2.0 * np.cos(np.pi * k * (2.0 * i + 1.0) / (2.0 * n))


_DCT_LOW = _dct_ii_matrix(_PHASH_SIZE, _HASH_SIDE)  # (8, 32)
_DCT_LOW_T = np.ascontiguousarray(_DCT_LOW.T)


def _ac_orthonormal_scale(n: int, keep: int) -> NDArray[np.float64]:
    # Factors turning unnormalised DCT-II coefficients into orthonormal ones
    # (norm="ortho"), with the DC term zeroed: sqrt(1/4N) for k = 0, sqrt(1/2N) else.
    axis = np.full(keep, np.sqrt(1.0 / (2.0 * n)))
    axis[0] = np.sqrt(1.0 / (4.0 * n))
    scale = np.outer(axis, axis).ravel()
    scale[0] = 0.0
    return scale


_MEDIAN_LOW = _HASH_SIDE * _HASH_SIDE // 2 - 1  # index of the lower middle value
_AC_SCALE = _ac_orthonormal_scale(_PHASH_SIZE, _HASH_SIDE)  # (64,), DC = 0
# sum(ac ** 2) / 63 < RMS ** 2, without the square root.
_LOW_INFORMATION_ENERGY = LOW_INFORMATION_RMS**2 * (_HASH_SIDE * _HASH_SIDE - 1)


class UnreadableImageWarning(UserWarning):
    """Some images could not be read; they are recorded as invalid rows, not hashed."""


@dataclass(frozen=True)
class ImageHashes:
    """The hashes of one image.

    Attributes
    ----------
    phash, dhash : int
        64-bit perceptual hashes (see the module docstring for the bit order).
    low_information : bool
        The image is (nearly) flat; its pHash is not reproducible.
    digest : int
        Only when ``low_information`` is True: the 64-bit BLAKE2b of the encoded
        file bytes (for a PIL image: of its mode, size and pixel bytes); equal
        digests mean identical files. **0 for every other image**: the digest is
        only used to link blank images to their byte-identical copies, and
        hashing the bytes of every file would cost as much as a third of the
        decode.
    orientations : tuple of (int, int)
        With ``hash_image(..., dihedral=True)``: the ``(phash, dhash)`` of the
        image turned to its canonical orientation(s) (see
        :class:`OrientationHashes`); empty otherwise, and for low-information
        images.
    """

    phash: int
    dhash: int
    low_information: bool
    digest: int
    orientations: tuple[tuple[int, int], ...] = ()


@dataclass
class OrientationHashes:
    """Hashes of images turned to their canonical orientation, for dihedral matching.

    Each image that can link by hash (valid, not low-information) has one or
    more entries: the image turned to its canonical orientation (see
    :func:`dihedral_orientations`) first, then, when a decision of that
    orientation is close to a tie, turned to the other choices. Two images
    match under flips and 90-degree rotations when any entry of one lies
    within the threshold of any entry of the other.

    Canonical entries are what a dihedral search compares, not the hashes of
    the images as they are: a pair right at the threshold can fall either side
    of it once both are turned (the dHash of a transposed image compares
    vertical neighbours), so a dihedral audit is not a strict superset of a
    plain one; measured on real photos it finds 99.8-100% of the ordinary
    copies a plain audit finds, with the same false pairs
    (``benchmarks/RESULTS.md``, "Dihedral matching").

    Attributes
    ----------
    owner : numpy.ndarray of int64
        The table row of each entry, ascending.
    phash, dhash : numpy.ndarray of uint64
        The hashes of that row's image in the entry's orientation.
    """

    owner: NDArray[np.int64]
    phash: NDArray[np.uint64]
    dhash: NDArray[np.uint64]

    def __len__(self) -> int:
        return len(self.owner)

    @classmethod
    def merge(cls, parts: Sequence[OrientationHashes]) -> OrientationHashes:
        """One set of entries from parts whose owners are already table rows.

        The one way orientation entries are assembled (hashing, the cache, both
        adapters). The parts cover disjoint rows; a stable sort by owner makes
        owners ascending and keeps each row's entries in their order (the
        canonical orientation first).

        Examples
        --------
        >>> a = OrientationHashes(np.array([2]), np.array([5], np.uint64), np.array([6], np.uint64))
        >>> b = OrientationHashes(np.array([0, 0]), np.array([1, 3], np.uint64),
        ...                       np.array([2, 4], np.uint64))
        >>> OrientationHashes.merge([a, b]).owner.tolist()
        [0, 0, 2]
        """
        owner = np.concatenate([np.zeros(0, dtype=np.int64), *(p.owner for p in parts)])
        phash = np.concatenate([np.zeros(0, dtype=np.uint64), *(p.phash for p in parts)])
        dhash = np.concatenate([np.zeros(0, dtype=np.uint64), *(p.dhash for p in parts)])
        order = np.argsort(owner, kind="stable")
        return cls(
            owner=owner[order].astype(np.int64, copy=False),
            phash=phash[order].astype(np.uint64, copy=False),
            dhash=dhash[order].astype(np.uint64, copy=False),
        )

    def of_row(self, row: int) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
        """The ``(phash, dhash)`` entries of one row, in their order."""
        start, stop = np.searchsorted(self.owner, [row, row + 1])
        return self.phash[start:stop], self.dhash[start:stop]

    def take(self, rows: NDArray[np.intp]) -> OrientationHashes:
        """The entries of ``rows`` (in that order), renumbered to positions in ``rows``."""
        rows = np.asarray(rows, dtype=np.intp)
        start = np.searchsorted(self.owner, rows, side="left")
        counts = np.searchsorted(self.owner, rows, side="right") - start
        offset = np.cumsum(counts) - counts
        picked = np.arange(int(counts.sum()), dtype=np.intp) + np.repeat(start - offset, counts)
        return OrientationHashes(
            owner=np.repeat(np.arange(len(rows), dtype=np.int64), counts),
            phash=self.phash[picked],
            dhash=self.dhash[picked],
        )


@dataclass
class HashTable:
    """Hashes of many images, one row per source, in input order.

    Attributes
    ----------
    sources : list of str
        ``str(path)``, or ``"<bytes #i>"`` / ``"<PIL image #i>"`` for in-memory items.
    phash, dhash : numpy.ndarray of uint64
        The hashes; 0 in invalid rows.
    digest : numpy.ndarray of uint64
        BLAKE2b of the file bytes (see :class:`ImageHashes`), computed **only for
        low_information rows**; 0 in every other row, which means "not
        computed", not "equal".
    low_information : numpy.ndarray of bool
        Near-flat images whose pHash is noise (False in invalid rows).
    valid : numpy.ndarray of bool
        False where the image could not be read.
    errors : dict of int to str
        Row index -> reason, for every invalid row.
    orientations : OrientationHashes or None
        With dihedral matching (``hash_sources(..., dihedral=True)``): the
        hashes of each image in its canonical orientation(s). None otherwise.
    """

    sources: list[str]
    phash: NDArray[np.uint64]
    dhash: NDArray[np.uint64]
    digest: NDArray[np.uint64]
    low_information: NDArray[np.bool_]
    valid: NDArray[np.bool_]
    errors: dict[int, str] = field(default_factory=dict)
    orientations: OrientationHashes | None = None

    def __len__(self) -> int:
        return len(self.sources)

    def to_frame(self) -> pd.DataFrame:
        """Return the table as a DataFrame with hex-string hashes (missing where invalid).

        ``digest`` is missing too wherever it was not computed (rows that are not
        ``low_information``).

        Examples
        --------
        >>> from PIL import Image
        >>> table = hash_sources([Image.new("L", (64, 64), 0)])
        >>> list(table.to_frame().columns)
        ['source', 'phash', 'dhash', 'digest', 'low_information', 'valid', 'error']
        """
        import pandas as pd

        def column(
            values: NDArray[np.uint64], present: NDArray[np.bool_] = self.valid
        ) -> list[str | None]:
            texts = hashes_to_hex(values)
            return [t if ok else None for t, ok in zip(texts, present.tolist(), strict=True)]

        frame: pd.DataFrame = pd.DataFrame(
            {
                "source": self.sources,
                "phash": column(self.phash),
                "dhash": column(self.dhash),
                "digest": column(self.digest, self.valid & self.low_information),
                "low_information": self.low_information,
                "valid": self.valid,
                "error": [self.errors.get(i) for i in range(len(self.sources))],
            }
        )
        return frame


# ------------------------------------------------------------------- resampling

# Pillow's fixed-point resampling of 8-bit images (src/libImaging/Resample.c):
# coefficients are rounded to multiples of 2**-22 (PRECISION_BITS = 32 - 8 - 2),
# each pass accumulates pixel * coefficient in integers plus 1 << 21, shifts right
# by 22 and clips to 0..255, so the intermediate image is 8-bit again.
_PRECISION_BITS = 22
_FIXED_ONE = float(1 << _PRECISION_BITS)
_LANCZOS_SUPPORT = 3.0


def _sinc(x: float) -> float:
    if x == 0.0:
        return 1.0
    x = x * math.pi
    return math.sin(x) / x


def _lanczos(x: float) -> float:
    # Pillow's lanczos_filter, in the same double arithmetic (math.sin is libm's sin).
    if -3.0 <= x < 3.0:
        return _sinc(x) * _sinc(x / 3.0)
    return 0.0


def _lanczos_taps(first: int, stop: int, center: float, inverse: float) -> list[float]:
    """``[_lanczos((x - center + 0.5) * inverse) for x in range(first, stop)]``, inlined.

    The same double operations in the same order (a box the hashes resample,
    e.g. an image's content, makes new weights, and this loop is most of their cost).
    """
    sin, pi = math.sin, math.pi
    taps: list[float] = []
    for x in range(first, stop):
        t = (x - center + 0.5) * inverse
        if -3.0 <= t < 3.0:
            if t == 0.0:
                near = 1.0
            else:
                u = t * pi
                near = sin(u) / u
            v = t / 3.0
            if v == 0.0:
                far = 1.0
            else:
                w = v * pi
                far = sin(w) / w
            taps.append(near * far)
        else:
            taps.append(0.0)
    return taps


@lru_cache(maxsize=1024)
def _lanczos_weights(
    in_size: int, out_size: int, span: tuple[float, float] | None = None
) -> NDArray[np.float64]:
    """Pillow's Lanczos coefficients for ``in_size -> out_size`` as an (out, in) matrix.

    ``span`` is the ``(start, stop)`` of the box along this axis (``resize``'s
    ``box``, which may be fractional); None means ``(0, in_size)``.

    precompute_coeffs + normalize_coeffs_8bpc, step for step: the coefficients
    are computed in double, normalised by their (sequential) sum, rounded half
    away from zero to integers k in units of 2**-22, and stored as ``k / 2**22``.
    Those are exact in float64, and so is every product of a product pass: a
    pixel (<= 255) times k (< 2**23) over a few hundred taps stays below 2**40,
    far inside float64's 53 bits whatever order BLAS sums in. A matrix product
    therefore returns Pillow's integer accumulator / 2**22 exactly.

    With a box: Pillow passes the box as C ``float`` and precompute_coeffs takes
    ``float in0, in1``, so the box ends are rounded to float32 and the box
    length ``in1 - in0`` is a float32 subtraction before it becomes a double;
    the centre is ``in0 + (x + 0.5) * scale`` (checked against Pillow on
    thousands of random fractional boxes).
    """
    if span is None:
        start, scale = 0.0, in_size / out_size
    else:
        low, high = np.float32(span[0]), np.float32(span[1])
        start, scale = float(low), float(high - low) / out_size
    filterscale = max(scale, 1.0)
    support = _LANCZOS_SUPPORT * filterscale
    inverse = 1.0 / filterscale
    matrix = np.zeros((out_size, in_size), dtype=np.float64)
    for out in range(out_size):
        center = start + (out + 0.5) * scale
        first = max(int(center - support + 0.5), 0)  # int(): truncation, as C's (int)
        stop = min(int(center + support + 0.5), in_size)
        taps = _lanczos_taps(first, stop, center, inverse)
        total = 0.0
        for tap in taps:  # summed in order, as the C loop does (not pairwise)
            total += tap
        if total != 0.0:
            taps = [tap / total for tap in taps]
        matrix[out, first:stop] = [
            int(0.5 + tap * _FIXED_ONE) if tap >= 0 else int(-0.5 + tap * _FIXED_ONE)
            for tap in taps
        ]
    matrix /= _FIXED_ONE
    matrix.flags.writeable = False
    return matrix


@lru_cache(maxsize=512)
def _horizontal_pair(width: int, span: tuple[float, float] | None) -> NDArray[np.float64]:
    """(width, 32 + 9): right-multiplying rows by this resamples them to both widths."""
    stacked = np.concatenate(
        [
            _lanczos_weights(width, _PHASH_SIZE, span),
            _lanczos_weights(width, _DHASH_SIZE[0], span),
        ]
    )
    both: NDArray[np.float64] = np.ascontiguousarray(stacked.T)
    both.flags.writeable = False
    return both


@lru_cache(maxsize=512)
def _vertical_pair(height: int, span: tuple[float, float] | None) -> NDArray[np.float64]:
    """(32 + 8, height): left-multiplying columns by this resamples them to both heights."""
    both = np.concatenate(
        [
            _lanczos_weights(height, _PHASH_SIZE, span),
            _lanczos_weights(height, _DHASH_SIZE[1], span),
        ]
    )
    both.flags.writeable = False
    return both


def _spans(
    box: Box | None, width: int, height: int
) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """The box as (columns, rows) spans; None for an axis the box covers whole."""
    if box is None:
        return None, None
    x0, y0, x1, y1 = box
    columns = None if (x0, x1) == (0.0, width) else (x0, x1)
    rows = None if (y0, y1) == (0.0, height) else (y0, y1)
    return columns, rows


# OpenBLAS runs a GEMM on one thread while m * n * k <= 65536 * 4 and splits larger
# ones across every core. For products this small threads cost more than they
# save, and in a process pool (one worker per core) they oversubscribe the CPU:
# larger products are done in row blocks that each stay under the limit.
_SERIAL_GEMM_SIZE = 65536 * 4


def _matmul(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """``a @ b``, in row blocks small enough for BLAS to stay single-threaded."""
    rows, inner = a.shape
    step = max(1, _SERIAL_GEMM_SIZE // (inner * b.shape[1]))
    if rows <= step:
        product: NDArray[np.float64] = a @ b
        return product
    out = np.empty((rows, b.shape[1]), dtype=np.float64)
    for start in range(0, rows, step):
        np.matmul(a[start : start + step], b, out=out[start : start + step])
    return out


def _round_clip(acc: NDArray[np.float64]) -> NDArray[np.float64]:
    """Pillow's ``clip8((acc + 1 << 21) >> 22)`` on accumulators in units of 2**22, in place."""
    acc += 0.5  # exact: acc is a multiple of 2**-22 below 2**10
    np.floor(acc, out=acc)
    np.clip(acc, 0.0, 255.0, out=acc)
    return acc


def _vertical_first(width: int, height: int, size: tuple[int, int]) -> bool:
    """Pillow >= 13's pass order: vertical first when the height shrinks much more.

    (python-pillow/Pillow#9549: when the height is reduced and by more than twice
    as many rows as the width loses columns.)
    """
    out_width, out_height = size
    return out_height < height and height - out_height > 2 * (width - out_width)


def _resample(
    pixels: NDArray[np.float64],
    size: tuple[int, int],
    vertical_first: bool,
    box: Box | None = None,
) -> NDArray[np.float64]:
    """One Pillow Lanczos resize of float64 pixels (exact 8-bit values) to ``size``."""
    height, width = pixels.shape
    column_span, row_span = _spans(box, width, height)
    rows = _lanczos_weights(height, size[1], row_span)
    columns = _lanczos_weights(width, size[0], column_span).T
    if vertical_first:
        return _round_clip(_matmul(_round_clip(_matmul(rows, pixels)), columns))
    return _round_clip(_matmul(rows, _round_clip(_matmul(pixels, columns))))


@lru_cache(maxsize=1)
def _pillow_pass_order() -> str | None:
    """Which pass order the installed Pillow uses, checked on probe images.

    ``"rule"``: :func:`_vertical_first` (Pillow >= 13); ``"horizontal"``: always
    horizontal first (Pillow < 13); None: the emulation does not reproduce this
    Pillow, so :func:`_thumbnails` calls Pillow itself.
    """
    rng = np.random.default_rng(20240601)
    # (height, width): tall (vertical first under the rule), wide, upscaled, and
    # either side of the rule's boundary for each target. Random pixels, so
    # that the two orders give different results.
    shapes = ((181, 37), (40, 150), (7, 5), (88, 60), (89, 60), (50, 30), (51, 30))
    probes: list[tuple[NDArray[np.uint8], Box | None]] = [
        (rng.integers(0, 256, shape, dtype=np.uint8), None) for shape in shapes
    ]
    # Fractional boxes, as the reduced decode produces (a partial last block at
    # either edge), and a box that is not float32-exact.
    probes += [
        (rng.integers(0, 256, (94, 125), dtype=np.uint8), (0.0, 0.0, 125.0, 93.75)),
        (rng.integers(0, 256, (135, 63), dtype=np.uint8), (0.5, 0.0, 63.0, 135.0)),
        (rng.integers(0, 256, (47, 63), dtype=np.uint8), (0.3, 0.125, 62.7, 46.9)),
    ]
    for order in ("rule", "horizontal"):
        if all(
            np.array_equal(
                np.asarray(Image.fromarray(probe).resize(size, _LANCZOS, box=box)),
                _resample(
                    probe.astype(np.float64),
                    size,
                    order == "rule" and _vertical_first(probe.shape[1], probe.shape[0], size),
                    box,
                ),
            )
            for probe, box in probes
            for size in ((_PHASH_SIZE, _PHASH_SIZE), _DHASH_SIZE)
        ):
            return order
    return None


def _thumbnails(
    pixels: NDArray[np.uint8], box: Box | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The 32 x 32 pHash thumbnail and the 8 x 9 dHash strip, as Pillow's LANCZOS makes them.

    ``box`` is the ``(left, top, right, bottom)`` region of ``pixels`` to
    resample, possibly fractional; None is the whole array. Both results are
    float64 arrays of 8-bit values, bit-identical to
    ``Image.fromarray(pixels).resize(size, Image.Resampling.LANCZOS, box=box)``.
    """
    order = _pillow_pass_order()
    if order is None:
        image = Image.fromarray(np.ascontiguousarray(pixels))
        return (
            np.asarray(
                image.resize((_PHASH_SIZE, _PHASH_SIZE), _LANCZOS, box=box), dtype=np.float64
            ),
            np.asarray(image.resize(_DHASH_SIZE, _LANCZOS, box=box), dtype=np.float64),
        )
    height, width = pixels.shape
    source = pixels.astype(np.float64)
    # Pillow >= 13 picks the pass order from the input and output sizes only,
    # not from the box (checked empirically, see _pillow_pass_order).
    vertical = order == "rule" and _vertical_first(width, height, (_PHASH_SIZE, _PHASH_SIZE))
    if vertical == (order == "rule" and _vertical_first(width, height, _DHASH_SIZE)):
        # Both targets in one product per pass: the (32 + 8) x (32 + 9) result holds
        # the thumbnail and the strip as its diagonal blocks.
        column_span, row_span = _spans(box, width, height)
        rows, columns = _vertical_pair(height, row_span), _horizontal_pair(width, column_span)
        if vertical:
            both = _round_clip(_matmul(_round_clip(_matmul(rows, source)), columns))
        else:
            both = _round_clip(_matmul(rows, _round_clip(_matmul(source, columns))))
        return both[:_PHASH_SIZE, :_PHASH_SIZE], both[_PHASH_SIZE:, _PHASH_SIZE:]
    return (
        _resample(source, (_PHASH_SIZE, _PHASH_SIZE), vertical, box),
        _resample(source, _DHASH_SIZE, not vertical, box),
    )


# ------------------------------------------------------------------------ hashes


def _pack_bits(bits: NDArray[np.bool_]) -> int:
    # np.packbits is big-endian within each byte: bits[0] becomes the MSB.
    return int.from_bytes(np.packbits(bits).tobytes(), "big")


def _hashes_from_thumbnails(
    thumb: NDArray[np.float64], strip: NDArray[np.float64]
) -> tuple[int, int, NDArray[np.float64]]:
    """pHash, dHash and the orthonormal low-band coefficients (DC zeroed) of the thumbnails."""
    # C-contiguous, as the DCT has always been computed: the same BLAS call on
    # the same values gives the same coefficients to the last bit.
    thumb = np.ascontiguousarray(thumb)
    low = (_DCT_LOW @ thumb @ _DCT_LOW_T).ravel()
    # The median of 64 values, as np.median computes it (mean of the two middle
    # values), without np.median's per-call overhead.
    middle = np.partition(low, (_MEDIAN_LOW, _MEDIAN_LOW + 1))
    median = (middle[_MEDIAN_LOW] + middle[_MEDIAN_LOW + 1]) / 2.0
    phash = _pack_bits(low > median)
    dhash = _pack_bits((strip[:, 1:] > strip[:, :-1]).ravel())
    return phash, dhash, low * _AC_SCALE


# ------------------------------------------------------------ dihedral matching

#: Decisions of the canonical orientation closer to a tie than this fraction of
#: the low band's AC energy (RMS over the 63 coefficients, times sqrt(63)) also
#: index the other choice, so that a flipped copy whose JPEG noise tips a
#: near-tie the other way still shares an orientation. Chosen by measurement
#: (benchmarks/bench_dihedral.py).
DIHEDRAL_MARGIN = 0.02


def _oriented(
    pixels: NDArray[np.uint8], box: Box | None, code: int
) -> tuple[NDArray[np.uint8], Box | None]:
    """The pixels (a view) and box turned by one of the 8 dihedral transforms.

    ``code`` bit 1: transpose (first); bit 2: mirror left-right; bit 4: flip
    top-bottom. Every rotation and reflection of a rectangle is one of these.
    """
    if code == 0:
        return pixels, box
    height, width = pixels.shape
    left, top, right, bottom = box if box is not None else (0.0, 0.0, float(width), float(height))
    if code & 1:
        pixels = pixels.T
        left, top, right, bottom = top, left, bottom, right
        height, width = width, height
    if code & 2:
        pixels = pixels[:, ::-1]
        left, right = width - right, width - left
    if code & 4:
        pixels = pixels[::-1, :]
        top, bottom = height - bottom, height - top
    return pixels, (left, top, right, bottom)


def dihedral_orientations(ac: NDArray[np.float64], margin: float = DIHEDRAL_MARGIN) -> list[int]:
    """The canonical orientation code(s) of an image from its low-band DCT coefficients.

    The canonical orientation makes the first horizontal and vertical cosine
    coefficients non-negative (the image's brighter side left and top) with the
    horizontal one the larger in magnitude. A mirror negates one of them, a
    transposition swaps them, so all 8 rotations and reflections of an image
    share one canonical orientation. The first code is the canonical one; any
    further codes are the other choices of decisions within ``margin`` of a tie.
    """
    a, b = float(ac[1]), float(ac[_HASH_SIDE])  # coefficients (0, 1) and (1, 0)
    tie = margin * math.sqrt(float(ac @ ac))
    transposes = [abs(a) < abs(b)]
    if abs(abs(a) - abs(b)) < tie:
        transposes.append(not transposes[0])
    codes: list[int] = []
    for transpose in transposes:
        x, y = (b, a) if transpose else (a, b)
        mirrors = [x < 0] + ([x >= 0] if abs(x) < tie else [])
        flips = [y < 0] + ([y >= 0] if abs(y) < tie else [])
        codes.extend(int(transpose) | 2 * m | 4 * f for m in mirrors for f in flips)
    return list(dict.fromkeys(codes))


def _dihedral_entries(
    pixels: NDArray[np.uint8], box: Box | None, identity: tuple[int, int, NDArray[np.float64]]
) -> list[tuple[int, int]]:
    """``(phash, dhash)`` of the image in each canonical-orientation candidate."""
    phash, dhash, ac = identity
    entries: list[tuple[int, int]] = []
    for code in dihedral_orientations(ac):
        if code == 0:
            entries.append((phash, dhash))
        else:
            turned_phash, turned_dhash, _ = _hashes_from_thumbnails(
                *_thumbnails(*_oriented(pixels, box, code))
            )
            entries.append((turned_phash, turned_dhash))
    return entries


# ------------------------------------------------------- crop and rotation entries

#: The crop entries: (side kept, positions per axis). Each keeps that fraction of the
#: image's width and height, at positions spread evenly from one edge to the other
#: (3 x 3 or 4 x 4 of them). Chosen by the recall of the candidate net on 5% and 15%
#: crops against the false candidates it adds (``benchmarks/RESULTS.md``, "The
#: verified cascade"); smaller crops (0.80) also matched different framings of one
#: scene (two crops of one photo overlapping by IoU 0.6).
CROP_SCALES = ((0.95, 3), (0.85, 4))
#: Rotations (degrees) of the rotation entries, each hashed over its centre 85%.
CROP_ROTATIONS = (3.0, -3.0, 6.0, -6.0)
_ROTATION_KEEP = 0.85
_BASE_SIDE = 32


def _crop_boxes() -> list[tuple[float, float, float, float]]:
    boxes = []
    for keep, positions in CROP_SCALES:
        margin = 1.0 - keep
        steps = [k / (positions - 1) for k in range(positions)]
        for fy in steps:
            for fx in steps:
                boxes.append((fx * margin, fy * margin, fx * margin + keep, fy * margin + keep))
    return boxes


#: The crop entries' regions, ``(left, top, right, bottom)`` as fractions of the image.
CROP_BOXES = _crop_boxes()
#: Entries a row has beyond its orientation entries when ``crop_entries`` is on: its
#: hashes as it is, its content's (:func:`content_box`), the crops (in
#: :data:`CROP_SCALES` order, rows of positions), then the rotations; all of the image
#: as it is (not turned: a canonical orientation is decided by the low band, which a
#: crop can tip, and then the crops of the original and the copy would sit in
#: different orientations).
N_CROP_ENTRIES = len(CROP_BOXES)
N_ROTATION_ENTRIES = len(CROP_ROTATIONS)
N_EXTRA_ENTRIES = 2 + N_CROP_ENTRIES + N_ROTATION_ENTRIES


def triangle_weights(
    n_out: int, low: float, high: float, n_in: int = _BASE_SIDE
) -> NDArray[np.float64]:
    """Rows of weights resampling ``[low, high)`` of ``n_in`` samples to ``n_out`` (antialiased).

    The triangle filter of Pillow's BILINEAR resize (its support widened by the
    scale when reducing), as an ``(n_out, n_in)`` matrix whose rows sum to 1.

    Examples
    --------
    >>> triangle_weights(2, 0.0, 4.0, 4).round(3).tolist()
    [[0.429, 0.429, 0.143, 0.0], [0.0, 0.143, 0.429, 0.429]]
    """
    scale = (high - low) / n_out
    support = max(1.0, scale)
    centres = low + (np.arange(n_out) + 0.5) * scale
    weights = np.clip(1.0 - np.abs(np.arange(n_in) + 0.5 - centres[:, None]) / support, 0.0, None)
    normalised: NDArray[np.float64] = weights / weights.sum(axis=1, keepdims=True)
    return normalised


def _entry_matrices(
    boxes: Sequence[tuple[float, float, float, float]],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Per box: the DCT-of-resample matrices of pHash (rows, columns) and the dHash strip's."""
    side = float(_BASE_SIDE)
    rows = [_DCT_LOW @ triangle_weights(_PHASH_SIZE, b[1] * side, b[3] * side) for b in boxes]
    cols = [_DCT_LOW @ triangle_weights(_PHASH_SIZE, b[0] * side, b[2] * side) for b in boxes]
    strip_rows = [triangle_weights(_HASH_SIDE, b[1] * side, b[3] * side) for b in boxes]
    strip_cols = [triangle_weights(_HASH_SIDE + 1, b[0] * side, b[2] * side) for b in boxes]
    return (
        np.stack(rows),
        np.ascontiguousarray(np.stack(cols).transpose(0, 2, 1)),
        np.stack(strip_rows),
        np.ascontiguousarray(np.stack(strip_cols).transpose(0, 2, 1)),
    )


_CROP_MATRICES = _entry_matrices(CROP_BOXES)
_CENTRE_MARGIN = (1.0 - _ROTATION_KEEP) / 2
_ROTATION_MATRICES = _entry_matrices(
    [(_CENTRE_MARGIN, _CENTRE_MARGIN, 1.0 - _CENTRE_MARGIN, 1.0 - _CENTRE_MARGIN)]
)


def _packed_rows(bits: NDArray[np.bool_]) -> NDArray[np.uint64]:
    """Each row of 64 bits as one uint64, first bit the most significant (as :func:`_pack_bits`)."""
    packed: NDArray[np.uint64] = (
        np.packbits(np.ascontiguousarray(bits), axis=1).view(">u8").ravel().astype(np.uint64)
    )
    return packed


def _entries_from_rows(
    low: NDArray[np.float64], strip: NDArray[np.float64]
) -> list[tuple[int, int]]:
    """Hashes from per-entry low bands ``(k, 8, 8)`` and dHash strips ``(k, 8, 9)``."""
    k = len(low)
    flat = low.reshape(k, -1)
    middle = np.partition(flat, (_MEDIAN_LOW, _MEDIAN_LOW + 1), axis=1)
    median = (middle[:, _MEDIAN_LOW] + middle[:, _MEDIAN_LOW + 1]) / 2.0
    phash = _packed_rows(flat > median[:, None])
    dhash = _packed_rows((strip[:, :, 1:] > strip[:, :, :-1]).reshape(k, -1))
    return list(zip(phash.tolist(), dhash.tolist(), strict=True))


def _entries_from_base(
    base: NDArray[np.float64],
    matrices: tuple[
        NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]
    ],
) -> list[tuple[int, int]]:
    """Hashes of every box of ``matrices`` on one base."""
    rows, cols, strip_rows, strip_cols = matrices
    k = len(rows)
    # One GEMM for every entry's row pass (small enough for BLAS to stay on one
    # thread, see _matmul), then the small per-entry column pass.
    low = np.matmul((rows.reshape(-1, _BASE_SIDE) @ base).reshape(k, _HASH_SIDE, -1), cols)
    strip = np.matmul(
        (strip_rows.reshape(-1, _BASE_SIDE) @ base).reshape(k, _HASH_SIDE, -1), strip_cols
    )
    return _entries_from_rows(low, strip)


def _entries_from_bases(
    bases: NDArray[np.float64],
    matrices: tuple[
        NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]
    ],
) -> list[tuple[int, int]]:
    """Hashes of the one box of ``matrices`` on each of several bases ``(m, 64, 64)``."""
    rows, cols, strip_rows, strip_cols = matrices
    low = np.matmul(np.matmul(rows[0], bases), cols[0])
    strip = np.matmul(np.matmul(strip_rows[0], bases), strip_cols[0])
    return _entries_from_rows(low, strip)


def _rotation_gather(angle: float) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """Flat source indices (4, n) and bilinear weights (4, n) rotating the base by ``angle``.

    Counter-clockwise about the centre, as ``PIL.Image.rotate``; outside the
    base the image reads as black (weight 0), like Pillow's fill.
    """
    side = _BASE_SIDE
    theta = math.radians(angle)
    centre = side / 2.0
    ys, xs = np.mgrid[0:side, 0:side].astype(np.float64) + 0.5
    # Inverse map: the source position of each output pixel.
    dx, dy = xs - centre, ys - centre
    sx = math.cos(theta) * dx - math.sin(theta) * dy + centre - 0.5
    sy = math.sin(theta) * dx + math.cos(theta) * dy + centre - 0.5
    x0, y0 = np.floor(sx), np.floor(sy)
    fx, fy = sx - x0, sy - y0
    indices, weights = [], []
    for oy, ox, weight in (
        (0, 0, (1 - fx) * (1 - fy)),
        (0, 1, fx * (1 - fy)),
        (1, 0, (1 - fx) * fy),
        (1, 1, fx * fy),
    ):
        x, y = (x0 + ox).astype(np.intp), (y0 + oy).astype(np.intp)
        inside = (x >= 0) & (x < side) & (y >= 0) & (y < side)
        indices.append(np.where(inside, y * side + x, 0).ravel())
        weights.append(np.where(inside, weight, 0.0).ravel())
    return np.stack(indices), np.stack(weights)


_ROTATION_GATHERS = [_rotation_gather(angle) for angle in CROP_ROTATIONS]
# All rotations in one gather: (rotations, 4 neighbours, pixels).
_ROTATION_INDICES = np.stack([indices for indices, _ in _ROTATION_GATHERS])
_ROTATION_WEIGHTS = np.stack([weights for _, weights in _ROTATION_GATHERS])


def _crop_entries_of_thumbnail(thumb: NDArray[np.float64]) -> list[tuple[int, int]]:
    """The crop and rotation entries from the image's 32 x 32 pHash thumbnail.

    Not Pillow's exact resampling of each region (the whole-image hashes are):
    every entry is two small products on the thumbnail the pHash already made
    (enough for the 8 x 8 low band of an 85% crop), so all of them cost about
    as much as one exact thumbnail. They only propose candidates, which
    verification decides.
    """
    base = np.ascontiguousarray(thumb, dtype=np.float64)
    entries = _entries_from_base(base, _CROP_MATRICES)
    rotated = (base.ravel()[_ROTATION_INDICES] * _ROTATION_WEIGHTS).sum(axis=1)
    rotated = rotated.reshape(len(CROP_ROTATIONS), _BASE_SIDE, _BASE_SIDE)
    return entries + _entries_from_bases(rotated, _ROTATION_MATRICES)


#: Flat images (see :func:`_uses_pixel_entries`) at most this many pixels on their
#: longer side (after the reduced decode) have their crop and rotation entries
#: resampled from their own pixels rather than from the 32 x 32 thumbnail.
PIXEL_ENTRY_MAX_SIDE = 64
#: ... when at least this share of their pixels has one grey level (a sprite's or an
#: icon's background; measured on the closure set's bases: photos <= 0.29, sprites and
#: icons 0.25-0.81, median 0.67 and 0.57).
PIXEL_ENTRY_FLAT_SHARE = 0.3
_CENTRE_BOX = ((_CENTRE_MARGIN, _CENTRE_MARGIN, 1.0 - _CENTRE_MARGIN, 1.0 - _CENTRE_MARGIN),)
_FracBox = tuple[float, float, float, float]


def _uses_pixel_entries(pixels: NDArray[np.uint8]) -> bool:
    """Whether an image's crop and rotation entries are resampled from its pixels.

    Small flat graphics (sprites, icons): their sharp edges resample so differently
    on the thumbnail (a triangle filter) and in Pillow's Lanczos (ringing, clipped
    each pass) that the thumbnail's entries pair 4-13% of their 15% crops against
    74-100% from the pixels (``benchmarks/RESULTS.md``, section 10, session 9).
    Photos keep the thumbnail's entries: from the pixels they also pair framings
    of one scene that lie inside one another.
    """
    if max(pixels.shape) > PIXEL_ENTRY_MAX_SIDE or pixels.size == 0:
        return False
    counts = np.bincount(np.asarray(pixels).ravel(), minlength=256)
    return bool(counts.max() >= PIXEL_ENTRY_FLAT_SHARE * pixels.size)


@lru_cache(maxsize=256)
def _pixel_entry_plan(
    height: int, width: int, box: Box | None, boxes: tuple[_FracBox, ...]
) -> tuple[
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.intp],
    NDArray[np.intp],
]:
    """Pillow's Lanczos coefficients of each box's rows and columns, for one image size.

    Returns the row passes of every distinct vertical span stacked (pHash 32 rows
    each, dHash 8 rows each), the column passes per distinct horizontal span
    (transposed: ``(spans, width, 32)`` and ``(spans, width, 9)``), and each box's
    vertical and horizontal span index.
    """
    left, top, right, bottom = box if box is not None else (0.0, 0.0, float(width), float(height))
    box_width, box_height = right - left, bottom - top
    vertical = sorted({(b[1], b[3]) for b in boxes})
    horizontal = sorted({(b[0], b[2]) for b in boxes})

    def rows_of(span: tuple[float, float]) -> tuple[float, float]:
        return top + span[0] * box_height, top + span[1] * box_height

    def columns_of(span: tuple[float, float]) -> tuple[float, float]:
        return left + span[0] * box_width, left + span[1] * box_width

    rows = np.concatenate([_lanczos_weights(height, _PHASH_SIZE, rows_of(v)) for v in vertical])
    strip_rows = np.concatenate(
        [_lanczos_weights(height, _HASH_SIDE, rows_of(v)) for v in vertical]
    )
    cols = np.stack([_lanczos_weights(width, _PHASH_SIZE, columns_of(h)).T for h in horizontal])
    strip_cols = np.stack(
        [_lanczos_weights(width, _HASH_SIDE + 1, columns_of(h)).T for h in horizontal]
    )
    which_rows = np.array([vertical.index((b[1], b[3])) for b in boxes], dtype=np.intp)
    which_cols = np.array([horizontal.index((b[0], b[2])) for b in boxes], dtype=np.intp)
    return rows, strip_rows, cols, strip_cols, which_rows, which_cols


def _pixel_box_entries(
    pixels: NDArray[np.uint8], box: Box | None, boxes: tuple[_FracBox, ...]
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """pHash and dHash of each fractional box of the region ``box``, from the pixels.

    Each box is resampled as Pillow's LANCZOS ``resize(..., box=)`` does it, one pass
    then the other, each rounded and clipped to 0..255 (close to Pillow's results,
    not bit-identical: these entries only propose candidates).
    """
    height, width = pixels.shape
    rows, strip_rows, cols, strip_cols, which_rows, which_cols = _pixel_entry_plan(
        height, width, box, boxes
    )
    source = np.asarray(pixels, dtype=np.float64)
    spans = len(rows) // _PHASH_SIZE
    first = np.clip(np.rint(rows @ source), 0.0, 255.0).reshape(spans, _PHASH_SIZE, width)
    strip_first = np.clip(np.rint(strip_rows @ source), 0.0, 255.0)
    strip_first = strip_first.reshape(spans, _HASH_SIDE, width)
    thumbs = np.clip(np.rint(np.matmul(first[which_rows], cols[which_cols])), 0.0, 255.0)
    strips = np.clip(
        np.rint(np.matmul(strip_first[which_rows], strip_cols[which_cols])), 0.0, 255.0
    )
    return _stack_entries_from_rows(np.matmul(np.matmul(_DCT_LOW, thumbs), _DCT_LOW.T), strips)


def _pixel_entries(
    pixels: NDArray[np.uint8], box: Box | None
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """The crop and rotation entries of a small flat image, from its pixels.

    The crops of :data:`CROP_BOXES`, then the image turned by each of
    :data:`CROP_ROTATIONS` (Pillow's bilinear ``rotate``, as the thumbnail's
    rotation entries are made) with its centre hashed: the rotation entries must be
    made like the crops, since a rotated copy's crop entry is matched against its
    original's rotation entry.
    """
    phash, dhash = _pixel_box_entries(pixels, box, tuple(CROP_BOXES))
    image = Image.fromarray(np.ascontiguousarray(pixels))
    turned = [
        _pixel_box_entries(
            np.asarray(image.rotate(angle, Image.Resampling.BILINEAR)), box, _CENTRE_BOX
        )
        for angle in CROP_ROTATIONS
    ]
    return (
        np.concatenate([phash, *[t[0] for t in turned]]),
        np.concatenate([dhash, *[t[1] for t in turned]]),
    )


def _crop_entries_of_image(
    pixels: NDArray[np.uint8], box: Box | None, thumb: NDArray[np.float64]
) -> list[tuple[int, int]]:
    """The crop and rotation entries of one image: from its pixels or its thumbnail."""
    if _uses_pixel_entries(pixels):
        phash, dhash = _pixel_entries(pixels, box)
        return list(zip(phash.tolist(), dhash.tolist(), strict=True))
    return _crop_entries_of_thumbnail(thumb)


def whole_hashes(
    pixels: NDArray[np.uint8], box: Box | None = None
) -> tuple[int, int, NDArray[np.float64]]:
    """pHash, dHash and low-band DCT coefficients of grey pixels (the region ``box``)."""
    return _hashes_from_thumbnails(*_thumbnails(np.ascontiguousarray(pixels), box))


def whole_and_crop_hashes(
    pixels: NDArray[np.uint8], box: Box | None = None
) -> tuple[int, int, NDArray[np.float64], list[tuple[int, int]]]:
    """:func:`whole_hashes`, then the content, crop and rotation entries (as is)."""
    pixels = np.ascontiguousarray(pixels)
    thumb, strip = _thumbnails(pixels, box)
    phash, dhash, ac = _hashes_from_thumbnails(thumb, strip)
    return (
        phash,
        dhash,
        ac,
        [_content_entry(pixels, box, (phash, dhash)), *_crop_entries_of_image(pixels, box, thumb)],
    )


#: A line (row or column) is background when every pixel of it lies within this many
#: grey levels of the line's median.
CONTENT_STEP = 12
#: Layers of background peeled at most (a pad of one colour around a transparent
#: margin flattened onto another is two).
_CONTENT_ROUNDS = 6


def _background_run(lines: NDArray[np.int16]) -> int:
    """How many of ``lines`` (rows, outermost first) are uniform in the first one's colour.

    Lines are judged in growing batches (1, 2, 4, ... lines), so an image whose outermost
    line is not uniform, most photos, costs one line's median, not one per line.
    """
    if lines.size == 0:  # nothing left to peel
        return 0
    if int(lines[0].max()) - int(lines[0].min()) > 2 * CONTENT_STEP:
        return 0  # no median lies within the step of both ends
    colour = float(np.median(lines[0]))
    done, batch = 0, 1
    while done < len(lines):
        chunk = lines[done : done + batch]
        median = np.median(chunk, axis=1, keepdims=True)
        uniform = np.all(np.abs(chunk - median) <= CONTENT_STEP, axis=1)
        uniform &= np.abs(median[:, 0] - colour) <= CONTENT_STEP
        if not uniform.all():
            return done + int(np.argmin(uniform))
        done += len(chunk)
        batch *= 2
    return done


def content_box(pixels: NDArray[np.uint8], box: Box | None = None) -> Box | None:
    """The box of the content inside uniform backgrounds, or None when there is none.

    Layer after layer, each side sheds its lines that are uniform (every
    pixel within :data:`CONTENT_STEP` grey levels of the line's median) in the
    colour of its outermost line, so nested backgrounds of different colours
    come off alike: black letterbox bars, then the white that a transparent
    margin was flattened onto, down to the figure. A padded, letterboxed or
    re-flattened copy of a graphic and the graphic itself peel to the same
    figure. Looser than the hashes' trim (:func:`leakaudit.loading.trim_box`)
    and applied to images of any size: it only proposes candidates (the
    content entry), so a box that differs between an image and its copy costs
    a candidate, never a false link.

    A layer that would leave under 2% of the region (or a line) was the
    content itself, a flat figure, and is kept. None when nothing is peeled,
    or the content keeps more than 94% of the region (the whole image's entry
    already covers it).

    Examples
    --------
    >>> canvas = np.zeros((40, 60), dtype=np.uint8)
    >>> canvas[10:30, 20:35] = 200
    >>> content_box(canvas)
    (20.0, 10.0, 35.0, 30.0)
    >>> framed = np.zeros((40, 60), dtype=np.uint8)   # black bars around a white
    >>> framed[:, 10:50] = 255                         # canvas holding a figure
    >>> framed[15:25, 25:32] = 90
    >>> content_box(framed)
    (25.0, 15.0, 32.0, 25.0)
    """
    height, width = pixels.shape
    left, top, right, bottom = box if box is not None else (0.0, 0.0, float(width), float(height))
    x0, y0 = int(left), int(top)
    x1, y1 = max(x0 + 1, math.ceil(right)), max(y0 + 1, math.ceil(bottom))
    region = pixels[y0:y1, x0:x1].astype(np.int16)
    if min(region.shape) < 4:
        return None
    y_a, y_b, x_a, x_b = 0, region.shape[0], 0, region.shape[1]
    for _ in range(_CONTENT_ROUNDS):
        # One layer a round: each side sheds its run of lines of its outermost colour.
        before = y_a, y_b, x_a, x_b
        y_a += _background_run(region[y_a:y_b, x_a:x_b])
        y_b -= _background_run(region[y_a:y_b, x_a:x_b][::-1])
        x_a += _background_run(region[y_a:y_b, x_a:x_b].T)
        x_b -= _background_run(region[y_a:y_b, x_a:x_b].T[::-1])
        small = (y_b - y_a) * (x_b - x_a) < 0.02 * region.size
        if small or y_b - y_a < 2 or x_b - x_a < 2:
            y_a, y_b, x_a, x_b = before  # that layer was the content itself (a flat figure)
            break
        if (y_a, y_b, x_a, x_b) == before:
            break
    kept = (y_b - y_a) * (x_b - x_a)
    if kept < 0.02 * region.size or kept > 0.94 * region.size:
        return None
    return float(x0 + x_a), float(y0 + y_a), float(x0 + x_b), float(y0 + y_b)


def _content_entry(
    pixels: NDArray[np.uint8], box: Box | None, whole: tuple[int, int]
) -> tuple[int, int]:
    """The hashes of the content box (:func:`content_box`), or ``whole`` without one."""
    content = content_box(pixels, box)
    if content is None:
        return whole
    phash, dhash, _ = _hashes_from_thumbnails(*_thumbnails(pixels, content))
    return phash, dhash


def turned_view(
    pixels: NDArray[np.uint8], box: Box | None, code: int
) -> tuple[NDArray[np.uint8], Box | None]:
    """The pixels and box turned by dihedral ``code`` (see :func:`dihedral_orientations`)."""
    return _oriented(pixels, box, code)


#: Most orientation entries a row can have (all 8 dihedral codes); a row with more
#: entries also has the as-is, crop and rotation entries.
MAX_ORIENTATIONS = 8


def entry_kinds(owner: NDArray[np.int64]) -> NDArray[np.int8]:
    """The kind of each of a table's entries.

    0: whole image in a canonical orientation (dihedral matching); 3: the whole
    image as it is; 4: its content (:func:`content_box`); 1: a crop; 2: a small
    rotation. A row hashed with ``crop_entries`` ends with its
    :data:`N_EXTRA_ENTRIES` entries, in that order: as-is, content, crops,
    rotations (it then has more than 8 entries); the ones before are its
    orientations.

    Examples
    --------
    >>> owner = np.repeat(np.array([0, 1]), [1, 1 + N_EXTRA_ENTRIES])
    >>> np.bincount(entry_kinds(owner)).tolist() == [2, N_CROP_ENTRIES, N_ROTATION_ENTRIES, 1, 1]
    True
    """
    owner = np.asarray(owner, dtype=np.int64)
    kinds = np.zeros(len(owner), dtype=np.int8)
    if len(owner) == 0:
        return kinds
    last = np.r_[np.flatnonzero(np.diff(owner)), len(owner) - 1]
    counts = np.diff(np.r_[-1, last])
    stop = np.repeat(last, counts)
    from_end = stop - np.arange(len(owner))
    extra = np.repeat(counts > MAX_ORIENTATIONS, counts)
    kinds[extra & (from_end == N_EXTRA_ENTRIES - 1)] = 3
    kinds[extra & (from_end == N_EXTRA_ENTRIES - 2)] = 4
    kinds[extra & (from_end < N_EXTRA_ENTRIES - 2)] = 1
    kinds[extra & (from_end < N_ROTATION_ENTRIES)] = 2
    return kinds


def _hash_reduced(
    reduced: tuple[NDArray[np.uint8], Box | None], dihedral: bool, crop_entries: bool = False
) -> tuple[int, int, bool, list[tuple[int, int]]]:
    """pHash, dHash, low-information flag and (with ``dihedral``) the entries.

    The entries are the orientation entries, then (with ``crop_entries``) the
    :data:`N_EXTRA_ENTRIES` as-is, crop and rotation entries.
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
            *_crop_entries_of_image(pixels, box, thumb),
        ]
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


#: Outputs per block of a banded resampling product (:func:`_bands`): measured fastest
#: on 64 x 64 and 125 x 94 images (8 outputs of a halving read 26 of 64 inputs).
_BAND_BLOCK = 8
#: A pass is banded when its blocks read at most this share of the dense product's
#: inputs; else it is one dense product (small products cost more per multiply).
_BAND_SHARE = 0.75

_Band: TypeAlias = "tuple[int, int, int, int, NDArray[np.float64], NDArray[np.float64]]"


@lru_cache(maxsize=512)
def _bands(
    in_size: int, out_size: int, span: tuple[float, float] | None
) -> tuple[_Band, ...] | None:
    """One axis's Lanczos weights as blocks of outputs and the inputs they read.

    Each block is ``(first output, stop, first input, stop, weights, transposed)``,
    ``weights`` the ``(outputs, inputs)`` block and ``transposed`` the same as
    ``(inputs, outputs)``, both C-contiguous: a Lanczos output reads only the few
    inputs under its kernel, so a product block by block does a fraction of the
    dense product's work (exactly, as every product here is exact). One block
    when banding saves too little; None when the weights are the identity (the
    same size, the whole span: Pillow copies the pixels).
    """
    weights = _lanczos_weights(in_size, out_size, span)
    if in_size == out_size and np.array_equal(weights, np.eye(in_size)):
        return None
    spans: list[tuple[int, int, int, int]] = []
    for first in range(0, out_size, _BAND_BLOCK):
        stop = min(out_size, first + _BAND_BLOCK)
        used = np.flatnonzero(weights[first:stop].any(axis=0))
        low, high = (int(used[0]), int(used[-1]) + 1) if used.size else (0, 1)
        spans.append((first, stop, low, high))
    if sum((b[1] - b[0]) * (b[3] - b[2]) for b in spans) > _BAND_SHARE * out_size * in_size:
        spans = [(0, out_size, 0, in_size)]
    blocks: list[_Band] = []
    for first, stop, low, high in spans:
        block = np.ascontiguousarray(weights[first:stop, low:high])
        transposed = np.ascontiguousarray(block.T)
        block.flags.writeable = False
        transposed.flags.writeable = False
        blocks.append((first, stop, low, high, block, transposed))
    return tuple(blocks)


def _row_pass(
    planes: NDArray[np.float64], out_size: int, span: tuple[float, float] | None
) -> NDArray[np.float64]:
    """The horizontal Lanczos pass of ``(height, m, width)`` planes, rounded as Pillow's.

    Each row of each image is one line of the ``(height * m, width)`` matrix; its
    block products write the output columns they make.
    """
    height, m, width = planes.shape
    bands = _bands(width, out_size, span)
    if bands is None:
        return planes
    lines = planes.reshape(height * m, width)
    out = np.empty((height * m, out_size), dtype=np.float64)
    for first, stop, low, high, _, weights in bands:
        # Row slices small enough for BLAS to stay single-threaded (see _matmul).
        step = max(1, _SERIAL_GEMM_SIZE // ((high - low) * (stop - first)))
        for row in range(0, len(lines), step):
            np.matmul(
                lines[row : row + step, low:high], weights, out=out[row : row + step, first:stop]
            )
    return _round_clip(out).reshape(height, m, out_size)


def _column_pass(
    planes: NDArray[np.float64], out_size: int, span: tuple[float, float] | None
) -> NDArray[np.float64]:
    """The vertical Lanczos pass of ``(height, m, width)`` planes, rounded as Pillow's.

    The planes are a ``(height, m * width)`` matrix whose columns are the
    images' columns side by side: one left product per block, on the rows
    (input lines) it reads, no transposition.
    """
    height, m, width = planes.shape
    bands = _bands(height, out_size, span)
    if bands is None:
        return planes
    columns = planes.reshape(height, m * width)
    out = np.empty((out_size, m * width), dtype=np.float64)
    for first, stop, low, high, weights, _ in bands:
        step = max(1, _SERIAL_GEMM_SIZE // ((high - low) * (stop - first)))
        for column in range(0, m * width, step):
            np.matmul(
                weights,
                columns[low:high, column : column + step],
                out=out[first:stop, column : column + step],
            )
    return _round_clip(out).reshape(out_size, m, width)


def _planes_resample(
    planes: NDArray[np.float64], size: tuple[int, int], vertical_first: bool, box: Box | None
) -> NDArray[np.float64]:
    """:func:`_resample` of every image of ``(height, m, width)`` planes, as planes."""
    height, _, width = planes.shape
    column_span, row_span = _spans(box, width, height)
    if vertical_first:
        return _row_pass(_column_pass(planes, size[1], row_span), size[0], column_span)
    return _column_pass(_row_pass(planes, size[0], column_span), size[1], row_span)


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


def _stack_entries_from_rows(
    low: NDArray[np.float64], strip: NDArray[np.float64]
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """:func:`_entries_from_rows` as arrays: hashes of ``(k, 8, 8)`` bands, ``(k, 8, 9)`` strips."""
    k = len(low)
    flat = low.reshape(k, -1)
    phash = _packed_rows(flat > _row_medians(flat)[:, None])
    dhash = _packed_rows((strip[:, :, 1:] > strip[:, :, :-1]).reshape(k, -1))
    return phash, dhash


def _row_medians(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """The median of each row of 64 values, as np.median computes it.

    The mean of the two middle values of the sorted row: the same two values
    however they are found, and sorting many short rows is several times
    cheaper than partitioning them.
    """
    ordered = np.sort(values, axis=1)
    median: NDArray[np.float64] = (ordered[:, _MEDIAN_LOW] + ordered[:, _MEDIAN_LOW + 1]) / 2.0
    return median


def _stack_crop_entries(
    thumbs: NDArray[np.float64],
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """:func:`_crop_entries_of_thumbnail` of stacked thumbnails: ``(m, 29)`` pHashes, dHashes."""
    m = len(thumbs)
    n_entries = N_CROP_ENTRIES + N_ROTATION_ENTRIES
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
    shape = (m, N_CROP_ENTRIES, _HASH_SIDE, -1)
    low = np.matmul(np.matmul(rows.reshape(-1, _BASE_SIDE), bases).reshape(shape), cols)
    strip = np.matmul(
        np.matmul(strip_rows.reshape(-1, _BASE_SIDE), bases).reshape(shape), strip_cols
    )
    turned = _rotated_bases(bases)
    turn_low = np.matmul(np.matmul(turn_rows[0], turned), turn_cols[0])
    turn_strip = np.matmul(np.matmul(turn_strip_rows[0], turned), turn_strip_cols[0])
    return (
        np.concatenate([low, turn_low.reshape(m, N_ROTATION_ENTRIES, _HASH_SIDE, -1)], axis=1),
        np.concatenate([strip, turn_strip.reshape(m, N_ROTATION_ENTRIES, _HASH_SIDE, -1)], axis=1),
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
    n_entries = N_CROP_ENTRIES + N_ROTATION_ENTRIES
    low = np.empty((m, n_entries, _HASH_SIDE, _HASH_SIDE), dtype=np.float64)
    strip = np.empty((m, n_entries, _HASH_SIDE, _HASH_SIDE + 1), dtype=np.float64)
    turned = _rotated_bases(bases)
    for out, distinct, row_of, columns, turn_row, turn_col in (
        (low, _CROP_ROWS, _CROP_ROW_OF, cols, turn_rows, turn_cols),
        (strip, _CROP_STRIP_ROWS, _CROP_STRIP_ROW_OF, strip_cols, turn_strip_rows, turn_strip_cols),
    ):
        left = np.matmul(distinct.reshape(-1, _BASE_SIDE), bases)
        left = left.reshape(m, len(distinct), _HASH_SIDE, _BASE_SIDE)
        for box in range(N_CROP_ENTRIES):
            lines = left[:, row_of[box]].reshape(-1, _BASE_SIDE)
            out[:, box] = _rows_matmul(lines, columns[box]).reshape(m, _HASH_SIDE, -1)
        turn_left = np.matmul(turn_row[0], turned).reshape(-1, _BASE_SIDE)
        out[:, N_CROP_ENTRIES:] = _rows_matmul(turn_left, turn_col[0]).reshape(
            m, N_ROTATION_ENTRIES, _HASH_SIDE, -1
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

    The entries are ``(position, phash, dhash)`` rows, each image's in
    :func:`_hash_reduced`'s order, images in order. Bit for bit what the
    per-image function returns (``tests/test_batch_hashing.py``).
    """
    n = len(reduced)
    no_entries = np.zeros((0, 3), dtype=np.uint64)
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
    starts = np.cumsum(per_row) - per_row
    entries = np.empty((int(per_row.sum()), 3), dtype=np.uint64)
    entries[:, 0] = np.repeat(linked, per_row)
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
            stacked = _stack_crop_entries(thumbs[linked[~from_pixels]])
            crop_phash[~from_pixels], crop_dhash[~from_pixels] = stacked
        for k in np.flatnonzero(from_pixels).tolist():
            crop_phash[k], crop_dhash[k] = _pixel_entries(*reduced[int(linked[k])])
        columns = base[:, None] + 2 + np.arange(N_CROP_ENTRIES + N_ROTATION_ENTRIES)
        entries[columns, 1] = crop_phash
        entries[columns, 2] = crop_dhash
    return phash, dhash, low_information, entries


def bytes_digest(data: bytes | bytearray | memoryview | Iterable[bytes]) -> int:
    """The byte digest: BLAKE2b-64 of an encoded image's bytes, as an int.

    The one digest of bytes everywhere (``HashTable.digest``, the hash cache's file
    digests, verification's ``bytes`` evidence, the report's ``digest`` column):
    ``data`` is the bytes, or an iterable of their pieces in order (a file read in
    pieces has the digest of its whole content).

    Examples
    --------
    >>> bytes_digest(b"abc") == bytes_digest(b"abc") != bytes_digest(b"abd")
    True
    >>> bytes_digest([b"ab", b"c"]) == bytes_digest(b"abc")
    True
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")
    h = hashlib.blake2b(digest_size=8)
    for piece in data:
        h.update(piece)
    return int.from_bytes(h.digest(), "big")


def image_digest(image: Image.Image) -> int:
    """The digest of an in-memory image: its mode, size and pixels.

    The byte digest of ``"{mode}:{width}x{height}:"`` followed by the pixels, so two
    images have one digest exactly when they have the same pixels in the same mode
    (what "byte copy" means for an image that has no file).

    Examples
    --------
    >>> image_digest(Image.new("L", (2, 2))) != image_digest(Image.new("L", (2, 1)))
    True
    """
    header = f"{image.mode}:{image.width}x{image.height}:".encode()
    return bytes_digest((header, image.tobytes()))


def hash_image(
    source: ImageSource, *, decode: DecodeOptions | None = None, dihedral: bool = False
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
    if isinstance(source, Image.Image):
        reduced, note = grey_and_note_from_pil(source, "<in-memory PIL image>", options)
        phash, dhash, low_information, entries = _hash_reduced(
            reduced, dihedral, options.crop_entries
        )
        digest = image_digest(source) if low_information else 0
    else:
        name, data = read_source(source, "<in-memory bytes>", options)
        reduced, note = grey_and_note_from_bytes(data, name, options)
        phash, dhash, low_information, entries = _hash_reduced(
            reduced, dihedral, options.crop_entries
        )
        digest = bytes_digest(data) if low_information else 0
    if note:
        warnings.warn(note, ImageDecodeWarning, stacklevel=2)
    return ImageHashes(phash, dhash, low_information, digest, tuple(entries))


# One result per item: (phash, dhash, low_information, digest, orientation entries,
# decode warning), or the failure reason. The entries are the (phash, dhash) of the
# canonical orientation candidates (empty unless dihedral matching was asked for);
# the warning is the ImageDecodeWarning text, "" when Pillow warned about nothing.
_ItemResult: TypeAlias = "tuple[int, int, bool, int, list[tuple[int, int]], str] | str"
# One result per chunk of items, as arrays (cheap to send back from a worker):
# (len, 3) uint64 columns phash, dhash, digest; the low_information flags;
# position in the chunk -> failure reason (those rows are all zero); the
# orientation entries as (position in the chunk, phash, dhash) columns; and
# position in the chunk -> decode warning.
_ChunkResult: TypeAlias = (
    "tuple[NDArray[np.uint64], NDArray[np.bool_], dict[int, str], NDArray[np.uint64], "
    "dict[int, str]]"
)


def _hash_encoded(
    source: str | bytes, name: str, options: DecodeOptions, dihedral: bool = False
) -> _ItemResult:
    return _item_result(_hash_items([source], [name], options, dihedral))


def _hash_pil(
    image: Image.Image, name: str, options: DecodeOptions, dihedral: bool = False
) -> _ItemResult:
    return _item_result(_hash_items([image], [name], options, dihedral))


def _item_result(result: _ChunkResult) -> _ItemResult:
    """The one item of a chunk result, as an item result."""
    values, low_information, errors, entries, notes = result
    if errors:
        return errors[0]
    phash, dhash, digest = (int(v) for v in values[0])
    pairs = [(int(p), int(d)) for p, d in entries[:, 1:].tolist()]
    return phash, dhash, bool(low_information[0]), digest, pairs, notes.get(0, "")


def _hash_chunk(
    sources: list[str | bytes], names: list[str], options: DecodeOptions, dihedral: bool = False
) -> _ChunkResult:
    """Worker entry point: hash a chunk of paths/bytes (runs in a pool process)."""
    return _hash_items(sources, names, options, dihedral)


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
            [cast("ReducedGrey", reduced[j]) for j in read], dihedral, options.crop_entries
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
    if len(names) != len(sources):
        raise ValueError(
            f"names must have one entry per source (length {len(sources)}); "
            f"got length {len(names)}."
        )
    values, low_information, errors, entries, notes = _hash_items(
        list(sources), [str(name) for name in names], options, dihedral
    )
    valid = np.ones(len(values), dtype=np.bool_)
    valid[list(errors)] = False
    orientations = None
    if dihedral:
        orientations = OrientationHashes(
            owner=entries[:, 0].astype(np.int64),
            phash=entries[:, 1].copy(),
            dhash=entries[:, 2].copy(),
        )
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


def _entry_array(rows: list[tuple[int, int, int]]) -> NDArray[np.uint64]:
    return np.array(rows, dtype=np.uint64).reshape(-1, 3)


class _Collector:
    """The columns of a HashTable being filled in; raises the first failure if asked."""

    def __init__(self, names: list[str], raise_first: bool) -> None:
        n = len(names)
        self.names = names
        self.raise_first = raise_first
        self.values = np.zeros((n, 3), dtype=np.uint64)  # phash, dhash, digest
        self.low_information = np.zeros(n, dtype=np.bool_)
        self.valid = np.zeros(n, dtype=np.bool_)
        self.done = np.zeros(n, dtype=np.bool_)
        self.errors: dict[int, str] = {}
        self.notes: dict[int, str] = {}  # row -> ImageDecodeWarning text
        self.entries: list[NDArray[np.uint64]] = []

    def item(self, index: int, result: _ItemResult) -> None:
        self.done[index] = True
        if isinstance(result, str):
            if self.raise_first:
                raise ImageLoadError(self.names[index], result)
            self.errors[index] = result
            return
        phash, dhash, low_information, digest, entries, note = result
        if entries:
            self.entries.append(_entry_array([(index, phash, dhash) for phash, dhash in entries]))
        if note:
            self.notes[index] = note
        self.values[index] = (phash, dhash, digest)
        self.low_information[index] = low_information
        self.valid[index] = True

    def chunk(self, indices: list[int], result: _ChunkResult) -> None:
        values, low_information, errors, entries, notes = result
        if errors and self.raise_first:
            first = min(errors)
            raise ImageLoadError(self.names[indices[first]], errors[first])
        rows = np.asarray(indices, dtype=np.intp)
        self.values[rows] = values
        self.low_information[rows] = low_information
        self.valid[rows] = True
        self.done[rows] = True
        if len(entries):
            entries = entries.copy()
            entries[:, 0] = rows[entries[:, 0].astype(np.intp)]
            self.entries.append(entries)
        for k, reason in sorted(errors.items()):
            self.valid[indices[k]] = False
            self.errors[indices[k]] = reason
        for k, note in notes.items():
            self.notes[indices[k]] = note

    def table(self, dihedral: bool = False) -> HashTable:
        for i in np.flatnonzero(~self.done).tolist():
            self.errors[i] = "not processed"
        orientations = None
        if dihedral:
            entries = np.concatenate([_entry_array([]), *self.entries])
            # Rows in order, each row's canonical orientation first (a stable sort
            # keeps the order the entries were made in).
            entries = entries[np.argsort(entries[:, 0], kind="stable")]
            orientations = OrientationHashes(
                owner=entries[:, 0].astype(np.int64),
                phash=entries[:, 1].copy(),
                dhash=entries[:, 2].copy(),
            )
        return HashTable(
            sources=list(self.names),
            phash=self.values[:, 0].copy(),
            dhash=self.values[:, 1].copy(),
            digest=self.values[:, 2].copy(),
            low_information=self.low_information,
            valid=self.valid,
            errors=dict(sorted(self.errors.items())),
            orientations=orientations,
        )


def source_name(item: object, index: int) -> str:
    """What the tables call source ``index``: its path, or ``<bytes #i>`` / ``<PIL image #i>``.

    The one naming of in-memory images, shared by hashing, the cache and the
    DataFrame API.

    Examples
    --------
    >>> source_name("train/a.jpg", 0), source_name(b"...", 3)
    ('train/a.jpg', '<bytes #3>')
    """
    if isinstance(item, (str, os.PathLike)):
        return str(os.fspath(item))
    if isinstance(item, Image.Image):
        return f"<PIL image #{index}>"
    return f"<bytes #{index}>"


def _normalise_sources(
    sources: Sequence[ImageSource],
) -> tuple[list[str | bytes | Image.Image], list[str]]:
    if isinstance(sources, (str, bytes, bytearray, os.PathLike, Image.Image)):
        raise TypeError(
            "sources must be a sequence of paths, bytes or PIL images; "
            f"got a single {type(sources).__name__}. Wrap it in a list."
        )
    items: list[str | bytes | Image.Image] = []
    names: list[str] = []
    for i, source in enumerate(sources):
        if isinstance(source, str):
            items.append(source)
            names.append(source)
        elif isinstance(source, os.PathLike):
            path = os.fspath(source)
            if not isinstance(path, str):
                raise TypeError(f"sources[{i}] must be a str path; got {describe(source)}.")
            items.append(path)
            names.append(path)
        elif isinstance(source, (bytes, bytearray, memoryview)):
            items.append(bytes(source))
            names.append(source_name(source, i))
        elif isinstance(source, Image.Image):
            items.append(source)
            names.append(source_name(source, i))
        else:
            raise TypeError(
                f"sources[{i}] must be a path, bytes or a PIL image; got {type(source).__name__}."
            )
    return items, names


def _pool_context() -> Any:
    context = worker_context()  # workers that never import __main__ (see leakaudit._workers)
    if context.get_start_method() == "forkserver":
        # Workers fork from a server that has already imported numpy/Pillow/leakaudit,
        # instead of each importing them again. Only takes effect if the server
        # is not running yet.
        context.set_forkserver_preload(["leakaudit.hashing"])
    return context


def _chunks(indices: list[int], size: int) -> list[list[int]]:
    return [indices[i : i + size] for i in range(0, len(indices), size)]


def hash_sources(
    sources: Sequence[ImageSource],
    *,
    decode: DecodeOptions | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    on_error: str = "warn",
    dihedral: bool = False,
) -> HashTable:
    """Hash many images, in parallel, recording (not raising) every failure.

    Parameters
    ----------
    sources : sequence of str, os.PathLike, bytes or PIL.Image.Image
        Paths, encoded image bytes, or opened images, in any mix.
    decode : DecodeOptions, optional
        Decoding settings shared by all images.
    workers : int or None, default None
        Processes to use; None means every usable core, and more than that are
        not started (a ``RuntimeWarning`` says so). Batches under 200 items,
        and ``workers=1``, run in this process. PIL images are always hashed in
        this process (no pickling of pixel buffers). The pool starts its workers
        with ``forkserver`` on Linux (``spawn`` elsewhere) without importing the
        main module again, so a script needs no ``if __name__ == "__main__":``
        guard to call this (see :mod:`leakaudit._workers`). The workers exit as
        soon as this process is gone (killed included) and at once on
        ``KeyboardInterrupt``; only a few chunks per worker are queued at a time.
    progress : bool or None, default None
        Draw a progress bar on stderr. None: only when stderr is a terminal and
        there are at least 500 items.
    on_error : {"warn", "raise", "ignore"}, default "warn"
        What to do about unreadable images besides recording them in
        ``HashTable.errors``: emit one :class:`UnreadableImageWarning` naming them,
        raise the first :class:`~leakaudit.errors.ImageLoadError`, or stay silent.
    dihedral : bool, default False
        Also hash each image in its canonical orientation
        (``HashTable.orientations``), for matching flipped and rotated copies.
        From the same decode; costs one more pair of thumbnails per image.

    Returns
    -------
    HashTable
        One row per source, in input order; unreadable rows have ``valid=False``.

    Warns
    -----
    ImageDecodeWarning
        One, naming (in input order) the images that were hashed although
        Pillow warned about them (corrupt EXIF data, ...), each with the warning.
    UnreadableImageWarning
        With ``on_error="warn"``, one naming the images that could not be read.
    RuntimeWarning
        ``workers`` is more than the usable cores; or the worker processes
        failed and the rest was hashed in this process.

    Examples
    --------
    >>> import io
    >>> from PIL import Image
    >>> buffer = io.BytesIO()
    >>> Image.effect_noise((96, 96), 40).save(buffer, "PNG")
    >>> table = hash_sources([buffer.getvalue(), b"not an image"], on_error="ignore")
    >>> table.valid.tolist(), table.errors
    ([True, False], {1: 'not a recognised image format'})
    """
    check_choice("on_error", on_error, ON_ERROR_CHOICES)
    options = resolve_decode(decode)
    check_bool("dihedral", dihedral)
    n_workers = check_workers(workers)
    usable = usable_cpu_count()
    if n_workers > usable:
        # More processes than cores only adds memory (a worker each) and switching.
        warnings.warn(
            f"asked for workers={n_workers} but only {usable} cores are usable; "
            f"using {usable} worker processes.",
            RuntimeWarning,
            stacklevel=2,
        )
        n_workers = usable
    items, names = _normalise_sources(sources)
    n = len(items)
    collector = _Collector(names, raise_first=on_error == "raise")
    bar = Progress(n, label="hashing", enabled=progress_enabled(progress, n))

    try:
        encoded = [i for i, item in enumerate(items) if not isinstance(item, Image.Image)]
        in_memory = [i for i, item in enumerate(items) if isinstance(item, Image.Image)]
        if n_workers > 1 and len(encoded) >= PARALLEL_MIN_ITEMS:
            _hash_in_pool(
                items, names, encoded, in_memory, options, n_workers, collector, bar, dihedral
            )
        else:
            for start in range(0, n, _BATCH_ITEMS):
                chunk = list(range(start, min(n, start + _BATCH_ITEMS)))
                result = _hash_items(
                    items[start : chunk[-1] + 1], names[start : chunk[-1] + 1], options, dihedral
                )
                collector.chunk(chunk, result)
                bar.update(len(chunk))
    finally:
        bar.close()

    table = collector.table(dihedral)
    if collector.notes:
        warnings.warn(_summarise_notes(collector.notes, n), ImageDecodeWarning, stacklevel=2)
    if on_error == "warn":  # "raise" has already raised the first failure, in input order
        apply_on_error(table.errors, on_error, total=n, name_of=table.sources.__getitem__)
    return table


def _hash_in_pool(
    items: list[str | bytes | Image.Image],
    names: list[str],
    encoded: list[int],
    in_memory: list[int],
    options: DecodeOptions,
    n_workers: int,
    collector: _Collector,
    bar: Progress,
    dihedral: bool = False,
) -> None:
    """Hash the encoded items in a process pool, the in-memory ones here, in input order.

    One function on purpose: the futures in flight, the chunks hashed here while
    the pool starts, the PIL results waiting for their turn and the shutdown on
    an interrupt are one loop's shared state, and each step needs all of it.
    """
    # Small chunks balance the load (the last one finishes alone) and keep the bar
    # moving; a chunk of 32 images is tens of milliseconds of work, far above the
    # per-task IPC cost (a list of paths out, three small arrays back).
    size = max(4, min(32, len(encoded) // (n_workers * 16) or 1))
    chunks = _chunks(encoded, size)
    in_flight = max(1, POOL_CHUNKS_PER_WORKER * n_workers)
    futures: dict[int, Future[_ChunkResult]] = {}  # submitted, not collected yet
    running: set[Future[_ChunkResult]] = set()  # submitted, not finished
    local: dict[int, _ChunkResult] = {}
    pil_results: dict[int, _ItemResult] = {}
    broken: BaseException | None = None
    submitted = 0  # chunks [0, submitted) went to the pool
    pool_end = len(chunks)  # chunks [pool_end, len) are hashed here

    def encoded_items(chunk: list[int]) -> list[str | bytes]:
        return [cast("str | bytes", items[i]) for i in chunk]

    def hash_here(chunk: list[int]) -> _ChunkResult:
        return _hash_chunk(encoded_items(chunk), [names[i] for i in chunk], options, dihedral)

    context = _pool_context()
    # Every worker holds the reading end of this pipe and exits when it reads EOF:
    # when this process closes the writing end, or dies (SIGKILL included).
    alive_reader, alive_writer = context.Pipe(duplex=False)
    try:
        with ProcessPoolExecutor(
            max_workers=n_workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(alive_reader,),
        ) as pool:

            def top_up() -> None:
                nonlocal submitted, broken
                running.difference_update([f for f in running if f.done()])
                while broken is None and submitted < pool_end and len(running) < in_flight:
                    chunk = chunks[submitted]
                    try:
                        future = pool.submit(
                            _hash_chunk,
                            encoded_items(chunk),
                            [names[i] for i in chunk],
                            options,
                            dihedral,
                        )
                    except BrokenProcessPool as exc:
                        broken = exc
                        return
                    futures[submitted] = future
                    running.add(future)
                    submitted += 1

            worker_results = 0
            try:
                top_up()
                # A fresh pool needs a few hundred milliseconds (a new interpreter
                # importing numpy, Pillow, leakaudit) before its first result. Work
                # here meanwhile: in-memory images first (never pickled), then chunks
                # taken from the end, which the pool has not been given yet. (Never
                # by cancelling a queued one: on Python 3.11, should a worker then
                # die, the pool's manager thread fails on the cancelled future and
                # leaves the other workers running.)
                for i in in_memory:
                    image = items[i]
                    assert isinstance(image, Image.Image)
                    pil_results[i] = _hash_pil(image, names[i], options, dihedral)
                    bar.update()
                first = futures.get(0)
                while pool_end > max(1, submitted) and first is not None and not first.done():
                    pool_end -= 1
                    local[pool_end] = hash_here(chunks[pool_end])
                    bar.update(len(chunks[pool_end]))
                # Stored in input order, so on_error="raise" reports the same (first)
                # failure as a serial run.
                pending_pil = sorted(pil_results, reverse=True)

                def store_pil_before(limit: int) -> None:
                    while pending_pil and pending_pil[-1] < limit:
                        index = pending_pil.pop()
                        collector.item(index, pil_results[index])

                for number, chunk in enumerate(chunks):
                    if number in local:
                        result = local.pop(number)
                    else:
                        top_up()
                        future = futures.pop(number, None)
                        if future is None:  # the pool broke before it was given this chunk
                            result = hash_here(chunk)
                        else:
                            while not future.done():
                                wait(running, return_when=FIRST_COMPLETED)
                                top_up()  # keep the workers fed meanwhile
                            try:
                                result = future.result()
                                worker_results += 1
                            except BrokenProcessPool as exc:  # a worker died or could not start
                                broken = broken or exc
                                result = hash_here(chunk)
                        bar.update(len(chunk))
                    errors = result[2]
                    store_pil_before(chunk[min(errors)] if errors else chunk[0])
                    collector.chunk(chunk, result)
                store_pil_before(len(items))
            except BaseException:
                # KeyboardInterrupt (or a first failure to raise): stop the workers
                # now rather than after the chunks they are on.
                alive_writer.close()
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    finally:
        alive_writer.close()
        alive_reader.close()
    if broken is not None:
        warnings.warn(
            f"the worker processes failed ({broken}); the images they had not hashed "
            "were hashed in this process instead." + _unguarded_main_hint(worker_results),
            RuntimeWarning,
            stacklevel=3,
        )


def _unguarded_main_hint(worker_results: int) -> str:
    """Why workers that never returned a result most likely failed, when a script runs.

    Each worker imports the main script again (Python's ``forkserver`` and
    ``spawn``): a script that calls leakaudit at its top level, not under
    ``if __name__ == "__main__":``, makes every worker start the audit again,
    which Python refuses.
    """
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if worker_results or not main_file:
        return ""
    return (
        f" No worker returned a result: if {printable(os.path.basename(main_file))} calls "
        "leakaudit with workers > 1 at its top level, move the call under "
        "'if __name__ == \"__main__\":' (every worker process imports the script again)."
    )


def _init_worker(alive: Connection) -> None:
    """Set up a pool worker: leave Ctrl-C to the main process, and die with it.

    The main process stops the pool on KeyboardInterrupt; a worker that took
    the terminal's SIGINT itself would print a traceback, or take a chunk's
    exception for the result. A worker's parent is the forkserver, not the
    main process, so the parent-death signal (Linux) only covers the
    forkserver dying; the thread reading ``alive`` covers the main process: it
    holds the only writing end, so the read ends (EOF) when it closes it or
    dies, however it dies. Once the workers are gone the forkserver and the
    resource tracker exit by themselves (each waits for EOF on a pipe that
    only the main process and the workers hold open).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        _exit_with_parent()
    threading.Thread(
        target=_exit_when_closed, args=(alive,), name="leakaudit-watchdog", daemon=True
    ).start()


def _exit_with_parent() -> None:
    """Ask Linux to send this process SIGTERM when its parent exits (PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl: the watchdog thread still works
        pass


def _exit_when_closed(alive: Connection) -> None:
    """Block until the main process closes its end of ``alive`` (or dies), then exit."""
    with contextlib.suppress(EOFError, OSError):
        alive.recv_bytes()  # nothing is ever sent: this returns only at EOF
    # From a thread only os._exit ends the process, and a worker has nothing to clean up.
    os._exit(1)


def _summarise_notes(notes: dict[int, str], total: int, shown: int = 10) -> str:
    """One message for the images hashed despite decoder warnings (each note names its file)."""
    rows = sorted(notes)
    listed = first_few((notes[i] for i in rows), len(rows), shown)
    return (
        f"{len(rows)} of {total} image(s) were decoded and hashed despite decoder warnings: "
        + listed
    )


def apply_on_error(
    errors: Mapping[int, str],
    on_error: str,
    *,
    total: int,
    name_of: Callable[[int], str],
    stacklevel: int = 2,
    shown: int = 10,
) -> None:
    """The unreadable-image policy, applied the one way every entry point applies it.

    ``"raise"``: the first failure (in row order) as
    :class:`~leakaudit.errors.ImageLoadError`; ``"warn"``: one
    :class:`UnreadableImageWarning` naming them (the first ``shown``, then a
    count); ``"ignore"``: nothing. Either way every failure stays recorded.

    Parameters
    ----------
    errors : mapping of int to str
        Row -> why that image could not be read.
    on_error : {"warn", "raise", "ignore"}
    total : int
        Rows in the batch.
    name_of : callable
        Row -> how to name that image to the user.
    stacklevel : int
        Of the warning, counted from the caller of this function.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     names = ["a", "b", "c"]
    ...     apply_on_error({1: "truncated image"}, "warn", total=3, name_of=names.__getitem__)
    >>> print(caught[0].message)  # doctest: +NORMALIZE_WHITESPACE
    1 of 3 images could not be read; they stay in the table without a hash (the 'error'
    column says why) and take no part in grouping: b (truncated image).
    """
    if not errors:
        return
    failed = sorted(errors)
    if on_error == "raise":
        raise ImageLoadError(name_of(failed[0]), errors[failed[0]])
    if on_error != "warn":
        return
    listed = first_few((f"{name_of(i)} ({errors[i]})" for i in failed), len(failed), shown)
    # "1 of 8 images", "3 of 8 images": the noun counts the total
    noun = "image" if total == 1 else "images"
    warnings.warn(
        f"{len(failed)} of {total} {noun} could not be read; they stay in the table without a "
        f"hash (the 'error' column says why) and take no part in grouping: {listed}.",
        UnreadableImageWarning,
        stacklevel=stacklevel + 1,
    )


# ----------------------------------------------------------------------------- hex


def hashes_to_hex(values: NDArray[np.uint64], *, n_bits: int = 64) -> list[str]:
    """Format hashes as zero-padded lowercase hex strings (16 characters for 64 bits).

    Parameters
    ----------
    values : array of uint64
        The hashes.
    n_bits : int, default 64
        Bits per hash; the strings have ``ceil(n_bits / 4)`` characters and only
        the low ``n_bits`` bits are kept.

    Examples
    --------
    >>> import numpy as np
    >>> hashes_to_hex(np.array([0, 2**64 - 1, 0xABC], dtype=np.uint64))
    ['0000000000000000', 'ffffffffffffffff', '0000000000000abc']
    >>> hashes_to_hex(np.array([0xFF01], dtype=np.uint64), n_bits=16)
    ['ff01']
    """
    n_bits = check_int("n_bits", n_bits, 1, 64)
    array = np.asarray(values)
    if array.dtype != np.uint64:
        if array.size and (array.dtype.kind not in "iu" or (array < 0).any()):
            raise ValueError(f"values must be non-negative integers; got dtype {array.dtype}.")
        array = array.astype(np.uint64)
    array = array.ravel()
    if n_bits == 64:
        # One C-level hex conversion of the big-endian bytes, then slicing.
        text = array.astype(">u8").tobytes().hex()
        return [text[i : i + 16] for i in range(0, len(text), 16)]
    width = math.ceil(n_bits / 4)
    mask = (1 << n_bits) - 1
    return [format(v & mask, f"0{width}x") for v in array.tolist()]


_HEX_RE = re.compile(r"[0-9a-fA-F]+\Z")


def _is_missing(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return value != value  # NaN
    if isinstance(value, str):
        return value == ""
    if type(value).__name__ in ("NAType", "NaTType"):  # pandas missing scalars
        return True
    return isinstance(value, np.floating) and bool(np.isnan(value))


def _check_hex(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a hex string or missing; got {describe(value)}.")
    if not _HEX_RE.match(value):
        raise ValueError(f"{what} must be a hex string; got {describe(value)}.")
    return value


def hashes_to_hex_arrow(values: NDArray[np.uint64], present: NDArray[np.bool_]) -> Any:
    """:func:`hashes_to_hex`'s strings as a pyarrow string array, null where not ``present``.

    Built from one buffer of hex text, with no Python string per row (the Parquet shards'
    ``*_hex`` columns, and pandas columns when pandas stores strings in Arrow). Past the
    rows a 32-bit offset can address it is a ``large_string`` array. Needs pyarrow.
    """
    import pyarrow as pa

    n = len(values)
    text = np.ascontiguousarray(values, dtype=">u8").tobytes().hex().encode("ascii")
    large = n > _ARROW_HEX_ROWS
    offsets = np.arange(0, 16 * (n + 1), 16, dtype=np.int64 if large else np.int32)
    present = np.asarray(present, dtype=bool)
    missing = int(n - np.count_nonzero(present))
    validity = pa.py_buffer(np.packbits(present, bitorder="little")) if missing else None
    kind = pa.LargeStringArray if large else pa.StringArray
    return kind.from_buffers(
        n, pa.py_buffer(offsets), pa.py_buffer(text), validity, null_count=missing
    )


# Rows up to which a hex column fits an Arrow string array (int32 offsets, 16 bytes a row).
_ARROW_HEX_ROWS = (2**31 - 1) // 16


def hex_to_hashes(
    strings: Sequence[str | None] | Iterable[str | None], *, name: str = "strings"
) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """Parse hex strings (up to 16 characters, all the same length) into uint64 hashes.

    The one rule for hex hashes read anywhere (the DataFrame API's columns, Parquet shards'
    ``*_hex`` columns): each present value is a str of 1 to 16 hex digits (either case),
    nothing else (no ``0x``, no whitespace), and all present values have the same number of
    digits, as :func:`hashes_to_hex` writes them (a shorter string is a shorter hash, not
    the same one with its zeros left off). Vectorised: no Python work per row beyond a
    type check.

    Parameters
    ----------
    strings : sequence of str or None
        Hex strings, e.g. from :func:`hashes_to_hex` or a CSV column. None, NaN,
        ``pd.NA`` and ``""`` are missing.
    name : str, default "strings"
        What the values are, for error messages (``name[row]``).

    Returns
    -------
    values : numpy.ndarray of uint64
        The hashes, 0 where missing.
    valid : numpy.ndarray of bool
        False where missing.

    Raises
    ------
    TypeError
        A value is neither a str nor missing; the message names its row.
    ValueError
        A string is not hex, is longer than 16 characters, or differs in length from
        the first; the message names its row and value.

    Examples
    --------
    >>> values, valid = hex_to_hashes(["ffffffffffffffff", None, "000000000000000a"])
    >>> values.tolist(), valid.tolist()
    ([18446744073709551615, 0, 10], [True, False, True])
    >>> hex_to_hashes(["ff00", "0f"])
    Traceback (most recent call last):
    ...
    ValueError: hashes must be the same length; got 4 and 2 hex characters (strings[1]).
    """
    import pandas as pd

    if isinstance(strings, pd.Series):
        items = strings.to_numpy(dtype=object)
    else:
        listed = _as_list(strings)
        items = np.empty(len(listed), dtype=object)
        items[:] = listed
    n = len(items)
    parsed = np.zeros(n, dtype=np.uint64)
    present: NDArray[np.bool_] = ~np.asarray(pd.isna(items), dtype=bool)
    rows = np.flatnonzero(present)
    if rows.size == 0:
        return parsed, present
    chosen = items[rows] if rows.size < n else items
    listed = chosen.tolist()
    try:
        fast = _parse_uniform_hex(listed)
    except TypeError:  # something other than a string
        for row, item in zip(rows.tolist(), listed, strict=True):
            if not isinstance(item, str):
                raise TypeError(
                    f"{name}[{row}] must be a hex string or missing; got {describe(item)}."
                ) from None
        raise
    if fast is not None:  # the usual case: clean hex strings of one width
        parsed[rows] = fast
        return parsed, present
    lengths = np.fromiter(map(len, listed), dtype=np.int64, count=len(listed))
    blank = lengths == 0
    if blank.any():
        present[rows[blank]] = False
        rows, chosen, lengths = rows[~blank], chosen[~blank], lengths[~blank]
        if rows.size == 0:
            return parsed, present
    long = np.flatnonzero(lengths > 16)
    if long.size:
        row = int(rows[long[0]])
        raise ValueError(
            f"{name}[{row}] must be at most 16 hex characters (64 bits); "
            f"got {describe(items[row])}."
        )
    widest = int(lengths.max())
    codes = chosen.astype(f"U{widest}").view(np.uint32).reshape(rows.size, widest)
    nibbles = _HEX_NIBBLES[np.minimum(codes, 255)]
    inside = np.arange(widest) < lengths[:, None]
    bad = np.flatnonzero(((nibbles == 255) & inside).any(axis=1))
    if bad.size:
        row = int(rows[bad[0]])
        raise ValueError(f"{name}[{row}] must be a hex string; got {describe(items[row])}.")
    width = int(lengths[0])
    odd = np.flatnonzero(lengths != width)
    if odd.size:
        raise ValueError(
            f"hashes must be the same length; got {width} and {int(lengths[odd[0]])} hex "
            f"characters ({name}[{int(rows[odd[0]])}])."
        )
    parsed[rows] = _combine_nibbles(nibbles)
    return parsed, present


_HEX_NIBBLES = np.full(256, 255, dtype=np.uint8)
for _digit in range(16):
    _HEX_NIBBLES[ord(f"{_digit:x}")] = _digit
    _HEX_NIBBLES[ord(f"{_digit:X}")] = _digit


def _parse_uniform_hex(listed: list[str]) -> NDArray[np.uint64] | None:
    """Parse strings that are all hex digits of one width <= 16; None if they are not.

    The strings are joined with a newline after each, so that when (and only
    when) they all have the same width the text is a matrix whose last column
    is all newlines; any other newline, or any non-hex character, sends the
    column to the general path.
    """
    n, width = len(listed), len(listed[0])
    text = "\n".join(listed) + "\n"
    if not 0 < width <= 16 or len(text) != n * (width + 1) or not text.isascii():
        return None
    flat = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    if not (flat[width :: width + 1] == ord("\n")).all():
        return None
    # Hex digits by arithmetic over the whole contiguous buffer (cheaper than a table
    # lookup): '0'-'9' are 48-57; 'a'-'f' and 'A'-'F' are 97-102 and 65-70 (equal once
    # bit 5 is set). The n newlines are the only other characters allowed.
    digit = (flat - np.uint8(48)) < 10
    letter = ((flat | np.uint8(32)) - np.uint8(97)) < 6
    if int(np.count_nonzero(digit | letter)) != n * width:
        return None
    nibbles = (flat & np.uint8(15)) + np.uint8(9) * (flat >> np.uint8(6))
    return _combine_nibbles(nibbles.reshape(n, width + 1)[:, :width])


def _combine_nibbles(nibbles: NDArray[np.uint8]) -> NDArray[np.uint64]:
    """Rows of up to 16 nibbles (most significant first) as uint64 values."""
    n, width = nibbles.shape
    padded = np.zeros((n, 16), dtype=np.uint8)
    padded[:, 16 - width :] = nibbles
    octets = np.ascontiguousarray((padded[:, 0::2] << 4) | padded[:, 1::2])
    return octets.view(">u8").ravel().astype(np.uint64)


def _as_list(values: object) -> list[object]:
    if isinstance(values, (str, bytes)):
        return [values]
    tolist = getattr(values, "tolist", None)
    if callable(tolist) and not isinstance(values, (list, tuple)):
        result = tolist()
        return list(result) if isinstance(result, list) else [result]
    return list(cast("Iterable[object]", values))


# ------------------------------------------------------------------------- hamming

_POPCOUNT_LUT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def popcount64(values: NDArray[np.uint64]) -> NDArray[np.uint8]:
    """Count the set bits of each uint64.

    Uses ``np.bitwise_count`` (numpy >= 2.0), else a byte lookup table.

    Examples
    --------
    >>> import numpy as np
    >>> popcount64(np.array([0, 1, 0xFF, 2**64 - 1], dtype=np.uint64)).tolist()
    [0, 1, 8, 64]
    """
    array = np.asarray(values, dtype=np.uint64)
    if hasattr(np, "bitwise_count"):
        counts: NDArray[np.uint8] = np.bitwise_count(array).astype(np.uint8, copy=False)
        return counts
    return _popcount64_table(array)


def _popcount64_table(array: NDArray[np.uint64]) -> NDArray[np.uint8]:
    """:func:`popcount64` by a byte lookup table: numpy 1.x, which has no ``bitwise_count``."""
    as_bytes = np.ascontiguousarray(array, dtype=np.uint64).view(np.uint8).reshape(*array.shape, 8)
    summed: NDArray[np.uint8] = _POPCOUNT_LUT[as_bytes].sum(axis=-1, dtype=np.uint8)
    return summed


def _is_scalar(value: object) -> bool:
    if isinstance(value, (str, bytes)) or value is None:
        return True
    if isinstance(value, np.ndarray):
        return value.ndim == 0
    return not isinstance(value, Iterable)


def hamming_distance(hash1: Any, hash2: Any) -> Any:
    """Count the bits that differ between hex-encoded hashes.

    Parameters
    ----------
    hash1, hash2 : str, None, or a list / numpy array / pandas Series of them
        Hex strings of equal length (any length: ``"ff00"`` is a 16-bit hash).
        Vectors are compared element-wise; a length-1 side is recycled. None and
        NaN are missing.

    Returns
    -------
    int, pandas.NA or pandas.arrays.IntegerArray
        For two scalars an int (``pd.NA`` when either is missing); otherwise a
        nullable ``Int64`` array, missing wherever either input is missing.

    Raises
    ------
    ValueError
        Vector lengths differ (and neither is 1), two hashes have different
        lengths, or a value is not hex.

    Examples
    --------
    >>> hamming_distance("ff00", "ff01")
    1
    >>> hamming_distance(["ffff", "0000", None], "0000")
    <IntegerArray>
    [16, 0, <NA>]
    Length: 3, dtype: Int64
    >>> hamming_distance("ffffffffffffffff", None)
    <NA>
    """
    import pandas as pd

    scalar = _is_scalar(hash1) and _is_scalar(hash2)
    left = [hash1] if _is_scalar(hash1) else _as_list(hash1)
    right = [hash2] if _is_scalar(hash2) else _as_list(hash2)
    if len(left) != len(right):
        if len(left) == 1:
            left = left * len(right)
        elif len(right) == 1:
            right = right * len(left)
        else:
            raise ValueError(
                "hash1 and hash2 must have the same length, or one of them length 1; "
                f"got {len(left)} and {len(right)}."
            )
    n = len(left)
    mask = np.zeros(n, dtype=np.bool_)
    xors: list[int] = [0] * n
    for i, (a, b) in enumerate(zip(left, right, strict=True)):
        missing_a, missing_b = _is_missing(a), _is_missing(b)
        if not missing_a:
            _check_hex(a, "hash1" if scalar else f"hash1[{i}]")
        if not missing_b:
            _check_hex(b, "hash2" if scalar else f"hash2[{i}]")
        if missing_a or missing_b:
            mask[i] = True
            continue
        assert isinstance(a, str) and isinstance(b, str)
        if len(a) != len(b):
            raise ValueError(
                f"hashes must be the same length; got {len(a)} and {len(b)} hex characters."
            )
        xors[i] = int(a, 16) ^ int(b, 16)
    counts = [x.bit_count() for x in xors]
    if scalar:
        return pd.NA if mask[0] else counts[0]
    return pd.arrays.IntegerArray(np.array(counts, dtype=np.int64), mask)
