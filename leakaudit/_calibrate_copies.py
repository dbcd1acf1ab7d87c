"""The known copies a calibration plants: the transformations (re-encodes, resizes, crops,
brightness, contrast, mirror) and the planting of each as encoded bytes.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageEnhance, ImageOps

from leakaudit.loading import DecodeOptions

__all__ = [
    "TRANSFORMS",
    "CopyTransform",
    "copies_of",
    "open_for_copies",
    "plant_copies",
]

# Copies are made from the image as displayed, reduced to at most this many pixels on
# its long side: the hashes only look at a 32 x 32 thumbnail (decoded from >= 64 px),
# and encoding a dozen full-size copies of 12-megapixel photos would dominate the run.
_WORK_SIDE = 512


@dataclass(frozen=True)
class CopyTransform:
    """One kind of planted near-duplicate.

    Attributes
    ----------
    name : str
        Short label used in the tables (``"jpeg_q70"``).
    description : str
        What was done, in words.
    apply : callable
        ``(image, rng) -> image``.
    format : str
        Pillow format the copy is encoded in (``"JPEG"`` or ``"PNG"``).
    quality : int
        JPEG quality.
    expected : bool
        Whether the audit is expected to catch it; False keeps it out of the
        recall a threshold is chosen by. Every transformation of
        :data:`TRANSFORMS` is expected: mirror images are matched in the
        canonical orientations the audit uses by default.
    """

    name: str
    description: str
    apply: Callable[[Image.Image, np.random.Generator], Image.Image]
    format: str = "JPEG"
    quality: int = 90
    expected: bool = True


def _same(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return image


def _half(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    size = (max(1, image.width // 2), max(1, image.height // 2))
    return image.resize(size, Image.Resampling.LANCZOS)


def _half_and_back(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return _half(image, rng).resize(image.size, Image.Resampling.BICUBIC)


def _crop(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    # 2-5% of each side removed, split at random between the two edges, resized back.
    width, height = image.size
    fraction = rng.uniform(0.02, 0.05)
    left = rng.uniform(0, fraction) * width
    top = rng.uniform(0, fraction) * height
    box = (left, top, left + (1 - fraction) * width, top + (1 - fraction) * height)
    return image.resize(image.size, Image.Resampling.LANCZOS, box=box)


def _brightness(factor: float) -> Callable[[Image.Image, np.random.Generator], Image.Image]:
    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        return ImageEnhance.Brightness(image).enhance(factor)

    return apply


def _contrast(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return ImageEnhance.Contrast(image).enhance(1.25)


def _mirror(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)


#: The near-duplicates made of every sample image (JPEG at quality 90 unless stated).
TRANSFORMS: tuple[CopyTransform, ...] = (
    CopyTransform("jpeg_q90", "JPEG re-encode, quality 90", _same, quality=90),
    CopyTransform("jpeg_q70", "JPEG re-encode, quality 70", _same, quality=70),
    CopyTransform("jpeg_q40", "JPEG re-encode, quality 40", _same, quality=40),
    CopyTransform("png", "PNG round trip", _same, format="PNG"),
    CopyTransform("resize_50", "resized to 50%", _half),
    CopyTransform("resize_50_back", "resized to 50% and back", _half_and_back),
    CopyTransform("crop_2-5%", "2-5% cropped off the edges, resized back", _crop),
    CopyTransform("bright_+15%", "brightness +15%", _brightness(1.15)),
    CopyTransform("bright_-15%", "brightness -15%", _brightness(0.85)),
    CopyTransform("contrast_+25%", "contrast +25%", _contrast),
    CopyTransform("hflip", "mirrored left-right", _mirror),
)


def open_for_copies(path: str, options: DecodeOptions) -> Image.Image:
    """Open ``path`` as displayed (EXIF orientation, flattened alpha), at most _WORK_SIDE px."""
    with Image.open(path) as opened:
        opened.draft("RGB", (_WORK_SIDE, _WORK_SIDE))
        opened.seek(0)
        image = ImageOps.exif_transpose(opened) if options.exif_transpose else opened.copy()
    if image.mode in ("RGBA", "LA", "PA", "P"):
        rgba = image.convert("RGBA")
        canvas = Image.new("RGBA", rgba.size, (*options.background, 255))
        image = Image.alpha_composite(canvas, rgba)
    image = image.convert("RGB")
    image.thumbnail((_WORK_SIDE, _WORK_SIDE), Image.Resampling.LANCZOS)
    return image


def _encode(image: Image.Image, transform: CopyTransform) -> bytes:
    buffer = io.BytesIO()
    if transform.format == "JPEG":
        image.save(buffer, "JPEG", quality=transform.quality)
    elif transform.format == "PNG":  # lossless at any level; the default level took 60 ms
        image.save(buffer, "PNG", compress_level=1)
    else:
        image.save(buffer, transform.format)
    return buffer.getvalue()


def copies_of(image: Image.Image, index: int, seed: int) -> list[bytes]:
    """The encoded copies of the ``index``-th sample image, one per :data:`TRANSFORMS`."""
    return [
        _encode(transform.apply(image, np.random.default_rng([seed, index, position])), transform)
        for position, transform in enumerate(TRANSFORMS)
    ]


def plant_copies(
    sample: Sequence[str | os.PathLike[str]],
    *,
    seed: int = 0,
    decode: DecodeOptions | None = None,
) -> list[tuple[int, str, bytes]]:
    """The copies :func:`~leakaudit.calibrate.calibrate_threshold` plants of ``sample`` (its
    ``result.sample``).

    Parameters
    ----------
    sample : sequence of path-like
        The sampled images, in the sample's order.
    seed : int, default 0
        The calibration's seed.
    decode : DecodeOptions, optional
        The calibration's decoding policy.

    Returns
    -------
    list of (int, str, bytes)
        For each copy: its original's position in ``sample``, the
        transformation's name, and the encoded file. Auditing the sample's
        files and these bytes with ``result.audit_options`` reproduces
        ``result.audit_per_transform``.
    """
    options = decode if decode is not None else DecodeOptions()
    planted: list[tuple[int, str, bytes]] = []
    for index, path in enumerate(sample):
        copies = copies_of(open_for_copies(os.fspath(path), options), index, seed)
        planted.extend(
            (index, transform.name, data)
            for transform, data in zip(TRANSFORMS, copies, strict=True)
        )
    return planted
