"""What kind of copy a pair of images is, in words: the one home of that vocabulary.

:func:`copy_kind` turns what the pipeline knows about a pair (the stage that linked
it, how verification aligned it, the two images' sizes, whether their colours differ
beyond a re-encoding) into a short phrase such as ``"identical"``,
``"re-encoded"``, ``"resized, mirrored"`` or ``"cropped, recoloured"``. The
reports (HTML, text, ``leakaudit compare``) and the pairs table's ``copy_kind``
column all take their words from it.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

__all__ = ["ALIGNMENTS", "KIND_MEANING", "copy_kind", "kind_meaning"]

#: How verification aligned a pair (:attr:`leakaudit.verify.PairVerdict.aligned`): the
#: whole images (in one of 8 turns), a crop entry of one against the other as it is, a
#: small-rotation entry, or the content inside a uniform background (padding).
ALIGNMENTS = ("whole", "crop", "rotation", "content")

#: What each word of a kind of copy means, for a reader (the HTML report's tooltips; the
#: same words as the pairs table's column in docs/output.md).
KIND_MEANING = {
    "identical": "the same file contents",
    "re-encoded": "the same picture at the same size, only the compression differs",
    "shifted": "moved by a pixel or a few",
    "brightened": "the same picture, brighter",
    "darkened": "the same picture, darker",
    "edited": "the same size, changed in a way no other word names (blur, noise, a local edit)",
    "resized": "the same picture at another size",
    "cropped": "one is a window of the other",
    "padded": "a uniform border one image has and the other lacks",
    "mirrored": "flipped left to right (or top to bottom)",
    "rotated 90": "turned by a quarter",
    "rotated 180": "turned upside down",
    "cropped or rotated slightly": "aligned on a slightly rotated centre crop: a crop or a "
    "small rotation",
    "cropped or rotated (features)": "the same local features in the same layout",
    "recoloured": "a colour edit one colour map explains (toned, channel-swapped, saturated)",
    "recoloured (grey)": "a grey copy of a colour picture",
    "identical hashes": "decided by the hashes alone: equal hashes",
    "near-identical hashes": "decided by the hashes alone: a few bits apart",
    "mirrored or rotated (hashes)": "decided by the hashes alone, once turned",
    "similar content (embedding)": "your embedding model's vectors are close",
    "joined through other images": "no direct link: the two meet through other members",
}


def kind_meaning(kind: str) -> str:
    """What a :func:`copy_kind` phrase means, word by word (empty for unknown words).

    Examples
    --------
    >>> kind_meaning("cropped, resized")
    'cropped: one is a window of the other; resized: the same picture at another size'
    """
    if kind in KIND_MEANING:
        return f"{kind}: {KIND_MEANING[kind]}"
    words = [w for w in kind.split(", ") if w in KIND_MEANING]
    return "; ".join(f"{w}: {KIND_MEANING[w]}" for w in words)


#: Hash distance (bits) up to which a same-size, unturned, unaligned copy counts as
#: re-encoded rather than edited (a JPEG re-encode moves a few bits at most).
_REENCODE_BITS = 4
#: Relative size difference below which two images count as the same size (rounding).
_SAME_SIZE = 0.02


def _present(value: Any) -> bool:
    if value is None or value is pd.NA:
        return False
    try:
        return not math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def _turn_words(turn: int) -> str:
    """A dihedral code (as :func:`leakaudit.hashing.turned_view`: 1 transpose, 2 mirror
    left-right, 4 flip top-bottom) in words."""
    if turn == 0:
        return ""
    if bin(turn).count("1") % 2:  # an odd number of reflections: a mirror image
        return "mirrored"
    return "rotated 180" if turn == 6 else "rotated 90"


def _resized(
    size_a: tuple[int, int] | None, size_b: tuple[int, int] | None, turn: int
) -> bool | None:
    """Whether two (width, height) sizes differ; None when either is unknown."""
    if not size_a or not size_b:
        return None
    (wa, ha), (wb, hb) = (float(v) for v in size_a), (float(v) for v in size_b)
    if min(wa, ha, wb, hb) <= 0:
        return None
    if turn & 1:  # transposed: width and height swapped
        wb, hb = hb, wb
    return abs(wa - wb) > _SAME_SIZE * max(wa, wb) or abs(ha - hb) > _SAME_SIZE * max(ha, hb)


def copy_kind(
    stage: Any,
    *,
    turn: Any = 0,
    aligned: Any = None,
    size_a: tuple[int, int] | None = None,
    size_b: tuple[int, int] | None = None,
    recoloured: Any = None,
    padded: bool = False,
    distance: Any = None,
    scale: Any = None,
    shift: Any = None,
) -> str:
    """A short phrase saying what kind of copy a linked pair is.

    Parameters
    ----------
    stage : str
        What linked the pair: a verification stage (``"bytes"``, ``"pixels"``,
        ``"geometry"``, ``"hash"``, ``"registered"``, ``"texture"``, ``"embedding"``, as in
        ``report.edges``), or the
        pairs table's hash-rule stages (``"exact bytes"``, ``"hash"``,
        ``"dihedral hash"``, ``"embedding"``, ``"transitive"``).
    turn : int, default 0
        The dihedral code that turned the second image onto the first.
    aligned : str, optional
        How verification aligned the pair (:data:`ALIGNMENTS`). Unknown (an edge
        made without it) for a verified pair: the phrase says only that it was
        verified (``"verified copy (pixels)"``).
    size_a, size_b : (width, height), optional
        The two images' sizes (after trimming uniform borders), when known.
    recoloured : str or bool, optional
        ``"grey"`` when one image is a grey copy of the other, True when their
        colours differ beyond a re-encoding (a colour edit verification accepted).
    padded : bool, default False
        One image has a uniform border (trimmed before comparing) the other lacks.
    distance : int, optional
        The pair's hash distance (bits).
    scale, shift : pair of float, optional
        For a ``"registered"`` pair (the tiny-photo net): the alignment found, a scale
        per axis and a shift per axis in pixels of the 32 px thumbnail.

    Returns
    -------
    str

    Examples
    --------
    >>> copy_kind("bytes")
    'identical'
    >>> copy_kind("pixels", aligned="whole", distance=0, size_a=(64, 48), size_b=(64, 48))
    're-encoded'
    >>> copy_kind("pixels", aligned="whole", turn=2, size_a=(64, 48), size_b=(32, 24))
    'resized, mirrored'
    >>> copy_kind("pixels", aligned="crop", recoloured="grey")
    'cropped, recoloured (grey)'
    >>> copy_kind("dihedral hash", distance=3)
    'mirrored or rotated (hashes)'
    >>> copy_kind("registered", scale=(0.9, 0.88), shift=(1.5, 0.0))
    'resized, shifted'
    >>> copy_kind("texture", turn=2, size_a=(512, 512), size_b=(256, 256))
    'texture copy, resized, mirrored'
    """
    name = str(stage) if _present(stage) or isinstance(stage, str) else ""
    bits = int(distance) if _present(distance) and float(distance) >= 0 else None
    if name in ("bytes", "exact bytes"):
        return "identical"
    if name == "hash":
        return "identical hashes" if bits == 0 else "near-identical hashes"
    if name == "dihedral hash":
        return "mirrored or rotated (hashes)"
    if name == "embedding":
        return "similar content (embedding)"
    if name == "transitive":
        return "joined through other images"
    if name == "registered":
        return _registered_words(scale, shift)
    if name == "texture":
        code = int(turn) if _present(turn) else 0
        turned = [w for w in (_resized(size_a, size_b, code) and "resized", _turn_words(code)) if w]
        return ", ".join(["texture copy", *turned])
    if name not in ("pixels", "geometry"):
        return name
    if not isinstance(aligned, str):
        return "verified copy (pixels)" if name == "pixels" else "verified copy (features)"
    code = int(turn) if _present(turn) else 0
    how = aligned
    words = []
    if how == "whole" and _resized(size_a, size_b, code):
        words.append("resized")
    if _turn_words(code):
        words.append(_turn_words(code))
    if how == "crop":
        words.append("cropped")
    elif how == "content" or padded:
        words.append("padded")
    elif how == "rotation":
        # A rotation entry is a rotated centre crop: a crop near the centre aligns on it too.
        words.append("cropped or rotated slightly")
    elif name == "geometry":
        words.append("cropped or rotated (features)")
    if recoloured == "grey":
        words.append("recoloured (grey)")
    elif recoloured is True:
        words.append("recoloured")
    if words:
        return ", ".join(words)
    if bits is not None and bits > _REENCODE_BITS:
        return "edited"
    return "re-encoded"


#: A registered pair counts as resized when a scale differs from 1 by more than this,
#: as shifted when it moved by at least this many thumbnail pixels.
_REGISTERED_SCALE = 0.03
_REGISTERED_SHIFT = 0.5


def _registered_words(scale: Any, shift: Any) -> str:
    """A tiny-photo net pair in words (its colours were not compared)."""
    words = []
    if scale is not None and any(abs(float(v) - 1.0) > _REGISTERED_SCALE for v in scale):
        words.append("resized")
    if shift is not None and any(abs(float(v)) >= _REGISTERED_SHIFT for v in shift):
        words.append("shifted")
    return ", ".join(words) if words else "re-encoded"
