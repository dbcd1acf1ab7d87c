"""Copies of low-information images: the texture net (issue 36).

The pHash marks an image *low-information* when the low band of its 32 x 32 thumbnail
carries almost nothing (``leakaudit.hashing.LOW_INFORMATION_RMS``): a blank page, a solid
colour, but also a paper or canvas texture, whose grain is finer than the thumbnail sees.
Such images never link by hash distance (thousands of blank images would become one group);
they link to byte copies, and through this net to copies of their *texture*:

1. **Signature.** The image's reduced grey (the hashes' own decode: trim, EXIF, background)
   resampled to :data:`SIDE` x :data:`SIDE` in floating point, minus its
   :data:`BLUR`-pixel box blur: the texture's grain at a scale a half-size copy keeps. Its
   rms is the image's *detail*, in grey levels.
2. **Blank.** An image whose detail is below :data:`DETAIL_FLOOR` has nothing to compare
   but rounding and codec noise: it links only to byte copies, as before.
3. **Propose.** The signature, scaled to unit rms, is projected on 64 fixed random +-1
   patterns; the signs are a 64-bit hash, one per turn of the signature (8 entries per
   image). Pairs of images with entries within :data:`PROPOSE_BITS` bits are candidates
   (an exact search, :func:`leakaudit.search.iter_pairs_within`). Two unrelated textures
   differ in 32 +- 4 bits; a copy whose signature correlates at ``r`` flips a share
   ``arccos(r) / pi`` of them.
4. **Decide.** The pair is registered (the turn its hashes found, and every shift of up to
   :data:`MAX_SHIFT` pixels of the signature) and linked when the signatures correlate at
   least :data:`MIN_CORRELATION` and their details and mean grey levels differ by at most
   a factor :data:`MAX_GAIN` (the colour rule's gains: a texture darkened to a third is
   another texture of its package, as ``mypaint``'s ``mamurk_a_2`` and ``mamurk_b_1``).

Different noise of one distribution, adjacent tiles of one texture and other textures
of one package correlate near 0 (at most 0.05 on the real corpus; the noise of a
64 x 64 signature is about 1/64); copies (turned, re-encoded as JPEG q50, grey, sepia,
half or double size, contrast, gamma, shifted 1-3 px, padded) at 0.4-1.0:
``benchmarks/RESULTS.md``, section 39.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from PIL import Image

from leakaudit._evidence import COPY_KIND
from leakaudit.copykind import copy_kind
from leakaudit.hashing._bits import popcount64
from leakaudit.loading import (
    DecodeOptions,
    grey_and_note_from_bytes,
    grey_and_note_from_pil,
    read_source,
)
from leakaudit.search import iter_pairs_within

__all__ = ["TextureSignatures", "texture_edges", "texture_signatures", "textures_match"]

#: The signature's side (pixels): a 512 px paper and its half-size copy both reduce to it.
SIDE = 64
#: The high-pass's box (pixels of the signature): grain finer than 1/8 of the picture.
BLUR = 8
#: Detail (rms grey levels of the signature) below which an image is blank: the 8-bit
#: rounding alone gives 0.29; the mypaint papers and canvases of the real corpus hold
#: 0.9-2.1, solid colours with JPEG noise below 0.3.
DETAIL_FLOOR = 0.5
#: Largest hash distance (bits, of 64) proposed. The hash is taken on the signature
#: smoothed by a 3 x 3 binomial: the real copies above differ in 0-17 bits (pads and
#: shifts the most); unrelated textures in 32 +- 4 (within 18 bits in one of the 15
#: entry pairs searched, one image as it is against the other's 8 turns, about 1 pair
#: in 200, each judged in a fraction of a millisecond).
PROPOSE_BITS = 18
#: Smallest correlation of the registered signatures that links (real copies 0.4-1.0,
#: unrelated textures, tiles and noise <= 0.05).
MIN_CORRELATION = 0.35
#: Largest ratio of the two signatures' detail, and of their mean grey levels (the colour
#: map's gains, 1/2-2: mypaint ships one paper grain in a grey (``mamurk_a_1``), a yellow
#: (``a_2``: a copy by the colour rule, correlation 0.99) and a dark tint, turned
#: (``b_1``: mean level 64 against 189, correlation 0.81, another picture).
MAX_GAIN = 2.0
#: Shifts tried in registration, pixels of the signature each way (a 1-3 px shift or a pad
#: of a 512 px picture moves its signature by under a pixel).
MAX_SHIFT = 1

#: Grey level under which two mean levels compare as this one (a black paper's gain is
#: not measurable).
MIN_LEVEL = 16.0

_TURNS = 8


def _within_gain(a: float, b: float) -> bool:
    return 1.0 / MAX_GAIN <= a / b <= MAX_GAIN


def _patterns() -> NDArray[np.float32]:
    """64 fixed +-1 patterns over the signature (a multiplicative hash of the position,
    the same on every platform)."""
    k = np.arange(64, dtype=np.uint64)[:, None]
    i = np.arange(SIDE * SIDE, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        mixed = (i + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15) ^ (k + np.uint64(1)) * np.uint64(
            0xC2B2AE3D27D4EB4F
        )
        mixed = (mixed ^ (mixed >> np.uint64(31))) * np.uint64(0x94D049BB133111EB)
    bits = (mixed >> np.uint64(40)) & np.uint64(1)
    signs: NDArray[np.float32] = (bits.astype(np.float32) * 2 - 1).reshape(64, SIDE, SIDE)
    return signs


_PATTERNS = _patterns()
_WEIGHTS = np.uint64(1) << np.arange(64, dtype=np.uint64)


def turned(signature: NDArray[np.float32], code: int) -> NDArray[np.float32]:
    """The signature in one of the 8 turns (code: bit 1 transpose, 2 mirror, 4 flip, as
    :func:`leakaudit.hashing.turned_view`)."""
    out = signature.T if code & 1 else signature
    if code & 2:
        out = out[:, ::-1]
    if code & 4:
        out = out[::-1]
    return out


def signature_of(pixels: NDArray[np.uint8], box: Any = None) -> NDArray[np.float32]:
    """The texture signature of a reduced grey image (:data:`SIDE` square, float32)."""
    image = Image.fromarray(np.ascontiguousarray(pixels, dtype=np.float32), mode="F")
    small = np.asarray(
        image.resize((SIDE, SIDE), Image.Resampling.BILINEAR, box=box), dtype=np.float32
    )
    # The box blur, by a summed-area table (edges replicated).
    padded = np.pad(small.astype(np.float64), BLUR // 2, mode="edge")
    table = np.zeros((padded.shape[0] + 1, padded.shape[1] + 1))
    table[1:, 1:] = padded.cumsum(0).cumsum(1)
    sums = table[BLUR:, BLUR:] - table[:-BLUR, BLUR:] - table[BLUR:, :-BLUR] + table[:-BLUR, :-BLUR]
    blur = sums[:SIDE, :SIDE] / (BLUR * BLUR)
    return (small - blur).astype(np.float32)


def _smoothed(signature: NDArray[np.float32]) -> NDArray[np.float32]:
    """A 3 x 3 binomial blur (edges replicated): the hash's view, steadier under the
    sub-pixel shift that a pad or a 1-3 px shift makes."""
    p = np.pad(signature, 1, mode="edge")
    rows = (p[:-2] + 2 * p[1:-1] + p[2:]) / 4
    return ((rows[:, :-2] + 2 * rows[:, 1:-1] + rows[:, 2:]) / 4).astype(np.float32)


def _hash(unit: NDArray[np.float32]) -> int:
    """The signs of the (smoothed) signature's projections on :data:`_PATTERNS`."""
    projections = np.tensordot(_PATTERNS, _smoothed(unit), axes=([1, 2], [0, 1]))
    return int(np.sum(_WEIGHTS[projections > 0], dtype=np.uint64))


@dataclass(frozen=True)
class TextureSignatures:
    """The signatures of some rows.

    Attributes
    ----------
    rows : numpy.ndarray of int64
        The rows with detail above :data:`DETAIL_FLOOR` (the others are blank).
    unit : numpy.ndarray of float32, shape (len(rows), SIDE, SIDE)
        Their signatures at zero mean and unit rms.
    detail : numpy.ndarray of float64
        Their signatures' rms (grey levels).
    level : numpy.ndarray of float64
        Their mean grey level.
    hashes : numpy.ndarray of uint64, shape (len(rows), 8)
        The hash of each turn of each signature.
    n_blank, n_unreadable : int
        Rows left out: below the floor; not decoded again.
    """

    rows: NDArray[np.int64]
    unit: NDArray[np.float32]
    detail: NDArray[np.float64]
    level: NDArray[np.float64]
    hashes: NDArray[np.uint64]
    n_blank: int = 0
    n_unreadable: int = 0


def _decoded(
    source: Any, name: str, decode: DecodeOptions
) -> tuple[NDArray[np.float32], float] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the hashing already reported what the decode says
            if isinstance(source, Image.Image):
                reduced, _ = grey_and_note_from_pil(source, name, decode)
            else:
                label, data = read_source(source, name, decode)
                reduced, _ = grey_and_note_from_bytes(data, label, decode)
    except Exception:  # unreadable since it was hashed: it keeps its byte copies only
        return None
    return signature_of(reduced.pixels, reduced.box), float(np.mean(reduced.pixels))


def texture_signatures(
    sources: Sequence[Any],
    names: Sequence[str],
    rows: NDArray[np.int64],
    decode: DecodeOptions,
    workers: int = 1,
) -> TextureSignatures:
    """Decode ``rows`` again and compute their signatures; blank ones are left out."""
    row_list = [int(r) for r in rows.tolist() if sources[int(r)] is not None]

    def one(row: int) -> tuple[NDArray[np.float32], float] | None:
        return _decoded(sources[row], names[row], decode)

    if workers > 1 and len(row_list) >= 16:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            found = list(pool.map(one, row_list, chunksize=8))
    else:
        found = [one(row) for row in row_list]
    kept, units, details, levels, hashes = [], [], [], [], []
    blank = unreadable = 0
    for row, decoded in zip(row_list, found, strict=True):
        if decoded is None:
            unreadable += 1
            continue
        signature, level = decoded
        centred = signature - signature.mean()
        detail = float(np.sqrt(np.mean(centred.astype(np.float64) ** 2)))
        if detail < DETAIL_FLOOR:
            blank += 1
            continue
        unit = (centred / detail).astype(np.float32)
        kept.append(row)
        units.append(unit)
        details.append(detail)
        levels.append(level)
        hashes.append([_hash(turned(unit, code)) for code in range(_TURNS)])
    return TextureSignatures(
        np.array(kept, dtype=np.int64),
        np.stack(units) if units else np.zeros((0, SIDE, SIDE), np.float32),
        np.array(details, dtype=np.float64),
        np.array(levels, dtype=np.float64),
        np.array(hashes, dtype=np.uint64).reshape(-1, _TURNS),
        blank,
        unreadable,
    )


def textures_match(
    unit_a: NDArray[np.float32], unit_b: NDArray[np.float32], turns: Sequence[int] = range(_TURNS)
) -> tuple[float, int]:
    """The best correlation of two unit signatures over ``turns`` of ``b`` and shifts of up
    to :data:`MAX_SHIFT` pixels, and the turn that gave it."""
    best, best_turn = -1.0, 0
    size = float(SIDE * SIDE)
    for code in turns:
        b = turned(unit_b, code)
        for dy in range(-MAX_SHIFT, MAX_SHIFT + 1):
            for dx in range(-MAX_SHIFT, MAX_SHIFT + 1):
                moved = np.roll(b, (dy, dx), axis=(0, 1)) if dy or dx else b
                value = float(np.vdot(unit_a, moved)) / size
                if value > best:
                    best, best_turn = value, code
    return best, best_turn


def candidate_pairs(hashes: NDArray[np.uint64]) -> NDArray[np.int64]:
    """Index pairs ``(i, j)``, ``i < j``, where one image as it is (its turn 0) lies within
    :data:`PROPOSE_BITS` of some turn of the other (a turn of both is a turn of one)."""
    n = len(hashes)
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    owner = np.repeat(np.arange(n, dtype=np.int64), _TURNS)
    found = []
    for chunk in iter_pairs_within(hashes.reshape(-1), PROPOSE_BITS):
        rows = owner[chunk]
        either_as_is = np.any(chunk % _TURNS == 0, axis=1)
        rows = rows[(rows[:, 0] != rows[:, 1]) & either_as_is]
        if len(rows):
            found.append(np.sort(rows, axis=1))
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    return np.unique(np.concatenate(found), axis=0)


def _turns_within(hashes_a: NDArray[np.uint64], hashes_b: NDArray[np.uint64]) -> list[int]:
    """The turns of ``b`` whose hash lies within reach of some turn of ``a``, as turns of
    ``b`` onto ``a`` as it is (a turn of both is one turn of ``b``)."""
    found = set()
    for code_a in range(_TURNS):
        close = popcount64(hashes_b ^ hashes_a[code_a]) <= PROPOSE_BITS
        for code_b in np.flatnonzero(close).tolist():
            found.add(_relative(code_a, int(code_b)))
    return sorted(found)


def _compose(first: int, second: int) -> NDArray[np.float32]:
    probe = np.arange(9, dtype=np.float32).reshape(3, 3)
    return turned(turned(probe, first), second)


def _relative(code_a: int, code_b: int) -> int:
    """The turn ``t`` with ``turned(x, t) == inverse(turn a)(turn b (x))``."""
    target = _compose(code_b, 0)
    for t in range(_TURNS):
        if np.array_equal(_compose(t, code_a), target):
            return t
    raise AssertionError("the 8 turns form a group")


def texture_edges(
    sources: Sequence[Any],
    names: Sequence[str],
    rows: NDArray[np.int64],
    decode: DecodeOptions,
    sizes: Sequence[tuple[int, int] | None] | None = None,
    workers: int = 1,
) -> tuple[pd.DataFrame, int]:
    """The texture net's accepted pairs among ``rows`` (low-information images) as edges
    (``stage`` ``"texture"``), and the number of candidate pairs it judged."""
    found = texture_signatures(sources, names, rows, decode, workers)
    candidates = candidate_pairs(found.hashes)
    kept: list[tuple[int, int, float, int]] = []
    for i, j in candidates.tolist():
        if not (
            _within_gain(found.detail[i], found.detail[j])
            and _within_gain(max(found.level[i], MIN_LEVEL), max(found.level[j], MIN_LEVEL))
        ):
            continue
        turns = _turns_within(found.hashes[i], found.hashes[j])
        correlation, turn = textures_match(found.unit[i], found.unit[j], turns)
        if correlation >= MIN_CORRELATION:
            kept.append((int(found.rows[i]), int(found.rows[j]), correlation, turn))
    edges = pd.DataFrame(
        {
            "row_a": np.array([k[0] for k in kept], dtype=np.int64),
            "row_b": np.array([k[1] for k in kept], dtype=np.int64),
            "stage": "texture",
            "distance": pd.array([pd.NA] * len(kept), dtype="Int64"),
            "similarity": np.array([k[2] for k in kept], dtype=float),
            "inliers": pd.array([pd.NA] * len(kept), dtype="Int64"),
            "strength": np.minimum(0.99, np.array([k[2] for k in kept], dtype=float)),
        }
    )
    edges[COPY_KIND] = [
        copy_kind(
            "texture",
            turn=turn,
            size_a=None if sizes is None else sizes[a],
            size_b=None if sizes is None else sizes[b],
        )
        for a, b, _, turn in kept
    ]
    return edges, len(candidates)
