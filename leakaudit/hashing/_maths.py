"""The hash maths: Pillow's Lanczos resize reproduced in numpy, the DCT, and dHash and
pHash from the two thumbnails of one decoded image.

Resampling
----------
The two Lanczos resizes are Pillow's own ``Image.resize(size, LANCZOS)``
reproduced exactly in numpy (see :func:`_lanczos_weights`): the same fixed-point
coefficients, the same rounding and clipping after each pass, the same pass
order. Both thumbnails come from one float64 matrix product per pass, several
times cheaper than two calls into Pillow on images this small. The emulation
checks itself against the installed Pillow once per process and falls back to
Pillow's resize should they ever disagree.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit.loading import (
    Box,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "HASH_METHODS",
]


HASH_METHODS: tuple[str, ...] = ("dhash", "phash")

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

    ``span`` is the ``(start, stop)`` of the box along this axis (``resize``'s ``box``,
    which may be fractional); None means ``(0, in_size)``. Computed for all outputs at
    once, by the same double operations in the same order as
    :func:`_lanczos_weights_reference` (which documents them): numpy's elementwise
    arithmetic rounds as Python's does, a cumulative sum adds in order as the C loop
    does, and the sine is checked once per process to be libm's (else the reference
    runs). A box the hashes resample (an image's content, each crop entry) makes new
    weights: this was most of the cost of the crop entries (RESULTS 45).
    """
    if not _numpy_sine_is_libm():
        return _lanczos_weights_reference(in_size, out_size, span)
    if span is None:
        start, scale = 0.0, in_size / out_size
    else:
        low, high = np.float32(span[0]), np.float32(span[1])
        start, scale = float(low), float(high - low) / out_size
    filterscale = max(scale, 1.0)
    support = _LANCZOS_SUPPORT * filterscale
    inverse = 1.0 / filterscale
    center = start + (np.arange(out_size, dtype=np.float64) + 0.5) * scale
    first = np.maximum(np.trunc(center - support + 0.5), 0).astype(np.int64)
    stop = np.minimum(np.trunc(center + support + 0.5), in_size).astype(np.int64)
    width = max(int((stop - first).max(initial=0)), 0)
    matrix = np.zeros((out_size, in_size), dtype=np.float64)
    if width == 0:
        matrix.flags.writeable = False
        return matrix
    x = first[:, None] + np.arange(width)[None, :]
    used = x < stop[:, None]
    t = ((x - center[:, None]) + 0.5) * inverse
    with np.errstate(divide="ignore", invalid="ignore"):
        u = t * math.pi
        near = np.where(t == 0.0, 1.0, np.sin(u) / u)
        v = t / 3.0
        w = v * math.pi
        far = np.where(v == 0.0, 1.0, np.sin(w) / w)
    taps = np.where(used & (t >= -3.0) & (t < 3.0), near * far, 0.0)
    total = np.cumsum(taps, axis=1)[:, -1]  # in order, as the C loop sums
    taps = np.where(
        (total != 0.0)[:, None], taps / np.where(total != 0.0, total, 1.0)[:, None], taps
    )
    scaled = taps * _FIXED_ONE
    fixed = np.where(taps >= 0, np.trunc(0.5 + scaled), np.trunc(-0.5 + scaled))
    rows, offsets = np.nonzero(used)
    matrix[rows, x[rows, offsets]] = fixed[rows, offsets]
    matrix /= _FIXED_ONE
    matrix.flags.writeable = False
    return matrix


@lru_cache(maxsize=1)
def _numpy_sine_is_libm() -> bool:
    """Whether numpy's float64 sine gives libm's (``math.sin``) bits on this machine, on
    the arguments the Lanczos taps take (SIMD builds may differ in the last bit)."""
    grid = np.linspace(-3.0 * math.pi, 3.0 * math.pi, 4099)
    grid = np.concatenate([grid, grid * 0.3183, grid / 3.0 + 1e-7])
    return bool(np.array_equal(np.sin(grid), np.array([math.sin(value) for value in grid])))


def _lanczos_weights_reference(
    in_size: int, out_size: int, span: tuple[float, float] | None = None
) -> NDArray[np.float64]:
    """:func:`_lanczos_weights`, one coefficient at a time in Python (the oracle its
    vectorised form is tested against, and its fallback where numpy's sine is not libm's).

    Pillow's Lanczos coefficients for ``in_size -> out_size`` as an (out, in) matrix.

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


def _row_medians(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """The median of each row of 64 values, as np.median computes it.

    The mean of the two middle values of the sorted row: the same two values
    however they are found, and sorting many short rows is several times
    cheaper than partitioning them.
    """
    ordered = np.sort(values, axis=1)
    median: NDArray[np.float64] = (ordered[:, _MEDIAN_LOW] + ordered[:, _MEDIAN_LOW + 1]) / 2.0
    return median
