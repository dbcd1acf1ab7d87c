"""Any Pillow image mode to 8-bit greyscale: transparency flattened onto a background,
16/32-bit and float greyscale rescaled (public Pillow API and numpy only).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import cast

import numpy as np
from PIL import Image

__all__ = ["flatten_rgba", "normalised", "rgba_as_hashed", "to_grey"]

_ALPHA_MODES = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})
_WIDE_GREY_MODES = frozenset({"I;16", "I;16B", "I;16L", "I;16N", "I", "F"})


def to_grey(im: Image.Image, background: tuple[int, int, int]) -> Image.Image:
    """Return ``im`` as mode "L", transparency flattened onto ``background``."""
    mode = im.mode
    if mode == "L" and "transparency" not in im.info:
        return im
    if mode in _WIDE_GREY_MODES:
        return _wide_grey_to_l(im)
    if "transparency" in im.info and mode in ("P", "L", "RGB", "1"):
        im = im.convert("RGBA")
        mode = im.mode
    if mode in _ALPHA_MODES:
        if mode == "La":  # premultiplied: straight alpha (Pillow < 11 cannot convert La)
            im, mode = _straight_la(im), "LA"
        elif mode in ("PA", "RGBa"):  # palette or premultiplied: make straight alpha
            mode = "RGBA"
            im = im.convert(mode)
        alpha = im.getchannel("A")
        grey = im.getchannel("L") if mode == "LA" else im.convert("L")
        # paste with a mask composites grey over the flat background in one pass:
        # out = grey * a + bg * (1 - a), the same as flattening in RGB then
        # converting (the luma transform is linear) but on one channel.
        flat = Image.new("L", im.size, _background_luma(background))
        flat.paste(grey, (0, 0), alpha)
        return flat
    try:
        return im.convert("L")
    except ValueError:  # modes without a direct path to L (e.g. LAB, HSV)
        return im.convert("RGB").convert("L")


def _straight_la(im: Image.Image) -> Image.Image:
    """A premultiplied ``La`` image as straight ``LA`` (grey divided by its alpha)."""
    grey, alpha = (np.asarray(band, dtype=np.float32) for band in im.split())
    straight = np.where(alpha > 0, grey * 255.0 / np.maximum(alpha, 1.0), 0.0)
    return Image.merge(
        "LA",
        [
            Image.fromarray(np.clip(np.rint(straight), 0, 255).astype(np.uint8)),
            Image.fromarray(alpha.astype(np.uint8)),
        ],
    )


def _wide_grey_to_l(im: Image.Image) -> Image.Image:
    """Rescale 16/32-bit integer or float greyscale to 8 bits.

    ``I;16*`` is 0..65535 by definition. Mode ``I`` is what Pillow returns for
    16-bit PNGs and 16/32-bit TIFFs: its values are 16-bit unless they all fit
    in 0..255 (an 8-bit image stored wide). Mode ``F`` is taken as 0..1 when
    its maximum is at most 1, as 0..255 when at most 255, and 16-bit otherwise.
    """
    stored = np.asarray(im)  # one copy of the pixels as stored (2 or 4 bytes each)
    if stored.size == 0:
        return Image.new("L", im.size)
    # In blocks of rows, in float64: the same values as converting the whole image
    # at once, without its 8 to 40 bytes a pixel of temporaries (4 GB at 169M pixels).
    step = max(1, _WIDE_BLOCK // max(1, stored.shape[1]))
    blocks = [slice(top, top + step) for top in range(0, stored.shape[0], step)]
    finite, finite_max = False, -math.inf
    for rows in blocks:
        block = stored[rows].astype(np.float64)
        finite = finite or bool(np.isfinite(block).any())
        block_max = float(np.fmax.reduce(block, axis=None))  # NaN ignored
        if not math.isnan(block_max):
            finite_max = max(finite_max, block_max)
    if not finite:
        finite_max = 0.0
    out = np.empty(stored.shape, dtype=np.uint8)
    for rows in blocks:
        arr = stored[rows].astype(np.float64)
        if im.mode.startswith("I;16") or finite_max > 255.0:
            arr = arr / 257.0
        elif im.mode == "F" and finite_max <= 1.0:
            arr = arr * 255.0
        arr = np.nan_to_num(arr, nan=0.0, posinf=255.0, neginf=0.0)
        out[rows] = np.clip(np.rint(arr), 0, 255).astype(np.uint8)
    return Image.fromarray(out)


#: Pixels per block of :func:`_wide_grey_to_l`'s conversion (32 MiB of float64).
_WIDE_BLOCK = 4 * 2**20


@lru_cache(maxsize=16)
def _background_luma(background: tuple[int, int, int]) -> int:
    # Pillow's own RGB -> L conversion, so a flattened pixel equals the
    # convert("L") of the same pixel composited in RGB.
    value = Image.new("RGB", (1, 1), background).convert("L").getpixel((0, 0))
    return int(cast("float", value))


def rgba_as_hashed(im: Image.Image) -> Image.Image:
    """``im`` in mode ``RGBA`` with the values the hashes saw.

    Pillow's ``convert("RGBA")`` clips 16- and 32-bit grey to 255 (a 16-bit grey PNG
    turns white) and cannot convert premultiplied ``La`` before Pillow 11; the hashes
    rescale the one (:func:`_wide_grey_to_l`) and straighten the other, and so does
    this. Colour modes convert as Pillow converts them.
    """
    if im.mode in _WIDE_GREY_MODES:
        im = _wide_grey_to_l(im)
    elif im.mode == "La":
        im = _straight_la(im)
    return im.convert("RGBA")


def normalised(im: Image.Image, background: tuple[int, int, int], *, colour: bool) -> Image.Image:
    """``im`` in the one mode a decode gives: "RGBA" as hashed (``colour``), else flat "L".

    The hashes' decode takes :func:`to_grey`, the verifier's :func:`rgba_as_hashed`:
    the same rescaling of wide greyscale and straightening of premultiplied alpha.
    """
    return rgba_as_hashed(im) if colour else to_grey(im, background)


def flatten_rgba(rgba: Image.Image, background: tuple[int, int, int]) -> Image.Image:
    """An "RGBA" image composited onto ``background`` in RGB, then as "L".

    The verifier's grey (its trim and local features). An opaque image is
    converted directly (the same pixels).
    """
    if rgba.getchannel("A").getextrema()[0] == 255:  # opaque: nothing to flatten
        return rgba.convert("L")
    base = Image.new("RGBA", rgba.size, (*background, 255))
    return Image.alpha_composite(base, rgba).convert("L")
