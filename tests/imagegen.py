"""Seeded generators of test images: photo-like scenes, planted near-duplicates, hostile files.

Nothing here is random without a seed, so every test image (and every golden hash
computed from one) is reproducible. No binary fixtures are committed.
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageDraw

__all__ = [
    "animated",
    "bomb_png",
    "encode",
    "exif_oriented_jpeg",
    "flat_png",
    "flat_with_noise",
    "icon",
    "photo_like",
    "photo_like_array",
    "truncated",
    "write_images",
]


def photo_like_array(seed: int, size: tuple[int, int] = (160, 120)) -> NDArray[np.uint8]:
    """Return an RGB array (H, W, 3) with photo-like statistics.

    Smooth large-scale colour fields (a bilinear upsample of a coarse random
    grid), a few hard-edged objects, and a little grain: enough structure at
    every scale for both hashes to be stable, and different seeds give
    unrelated images.
    """
    rng = np.random.default_rng(seed)
    width, height = size
    coarse = rng.integers(0, 256, (4, 5, 3), dtype=np.uint8)
    base = Image.fromarray(coarse).resize((width, height), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(base)
    for _ in range(4):
        x0, x1 = sorted(rng.integers(0, width, 2).tolist())
        y0, y1 = sorted(rng.integers(0, height, 2).tolist())
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        if rng.random() < 0.5:
            draw.ellipse((x0, y0, x1 + 4, y1 + 4), fill=colour)
        else:
            draw.rectangle((x0, y0, x1 + 4, y1 + 4), fill=colour)
    arr = np.asarray(base, dtype=np.float64)
    arr += rng.normal(0.0, 3.0, arr.shape)
    return np.clip(np.rint(arr), 0, 255).astype(np.uint8)


def photo_like(seed: int, size: tuple[int, int] = (160, 120), mode: str = "RGB") -> Image.Image:
    """Return :func:`photo_like_array` as a PIL image in ``mode``."""
    return Image.fromarray(photo_like_array(seed, size)).convert(mode)


def textured_photo(seed: int, size: tuple[int, int] = (160, 120)) -> Image.Image:
    """:func:`photo_like` with texture at a few pixels' scale, as real photos have (grass,
    skin, fabric, grain): the fine detail a copy keeps and a look-alike does not."""
    width, height = size
    rng = np.random.default_rng(50_000 + seed)
    coarse = rng.normal(128, 50, (max(2, height // 4), max(2, width // 4)))
    texture = Image.fromarray(coarse.clip(0, 255).astype(np.uint8)).resize(
        (width, height), Image.Resampling.BICUBIC
    )
    pixels = photo_like_array(seed, size).astype(np.float32)
    pixels += 0.5 * (np.asarray(texture, np.float32)[..., None] - 128)
    return Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8))


def flat_with_noise(
    value: int, noise: float, *, size: tuple[int, int] = (200, 150), seed: int = 0
) -> Image.Image:
    """Return a flat grey image of ``value`` with Gaussian noise of std ``noise``."""
    rng = np.random.default_rng(seed)
    arr = value + rng.normal(0.0, noise, (size[1], size[0]))
    return Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8))


def encode(image: Image.Image, fmt: str, **params: object) -> bytes:
    """Return ``image`` encoded as ``fmt`` (e.g. ``"PNG"``, ``"JPEG"``)."""
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)  # type: ignore[arg-type]
    return buffer.getvalue()


def exif_oriented_jpeg(
    upright: Image.Image, orientation: int = 6, fmt: str = "JPEG", **params: object
) -> bytes:
    """Store ``upright`` rotated so that a viewer applying ``orientation`` shows it upright.

    Orientation 6 means "rotate 90 degrees clockwise to display", so the stored
    pixels are the upright image rotated 90 degrees counter-clockwise.
    """
    stored_for = {
        3: Image.Transpose.ROTATE_180,
        6: Image.Transpose.ROTATE_90,  # counter-clockwise
        8: Image.Transpose.ROTATE_270,
    }
    stored = upright.transpose(stored_for[orientation])
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(stored, fmt, exif=exif.tobytes(), **params)


def icon(outline_seed: int, interior_seed: int, size: int = 96) -> Image.Image:
    """An RGBA icon: an opaque disc (same for equal ``outline_seed``) on transparency.

    The disc's interior pattern depends on ``interior_seed``; the transparent
    pixels around it hold garbage colour that must never reach a hash.
    """
    rng = np.random.default_rng(interior_seed)
    inside = photo_like_array(interior_seed + 1000, (size, size))
    rgba = np.zeros((size, size, 4), dtype=np.uint8)
    rgba[..., :3] = inside
    outline_rng = np.random.default_rng(outline_seed)
    radius = size * (0.30 + 0.1 * outline_rng.random())
    y, x = np.mgrid[0:size, 0:size]
    disc = (x - size / 2) ** 2 + (y - size / 2) ** 2 < radius**2
    rgba[..., 3] = np.where(disc, 255, 0)
    garbage = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    rgba[~disc, :3] = garbage[~disc]
    return Image.fromarray(rgba)


def animated(frames: list[Image.Image], fmt: str) -> bytes:
    """Encode ``frames`` as an animated GIF or WebP."""
    return encode(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0)


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    body = kind + payload
    return struct.pack(">I", len(payload)) + body + struct.pack(">I", zlib.crc32(body))


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A tiny PNG whose header declares ``width x height`` 8-bit grey pixels."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + _png_chunk(b"IEND", b"")
    )


def flat_png(width: int, height: int, value: int = 90) -> bytes:
    """A real single-colour 8-bit grey PNG of any size: a few KB however large the canvas.

    Compressed row by row, so making a 12000 x 12000 one costs no 144 MB buffer.
    """
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    compressor = zlib.compressobj(9)
    row = b"\x00" + bytes([value]) * width  # filter type 0, then the pixels
    body = b"".join(compressor.compress(row) for _ in range(height)) + compressor.flush()
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", body)
        + _png_chunk(b"IEND", b"")
    )


def truncated(data: bytes, keep: float = 0.6) -> bytes:
    """Return the first ``keep`` fraction of an encoded file."""
    return data[: int(len(data) * keep)]


def write_images(
    directory: Path, images: list[Image.Image], fmt: str = "PNG", suffix: str = ".png"
) -> list[Path]:
    """Write ``images`` as ``img_0000<suffix>``... and return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, image in enumerate(images):
        path = directory / f"img_{i:04d}{suffix}"
        path.write_bytes(encode(image, fmt))
        paths.append(path)
    return paths
