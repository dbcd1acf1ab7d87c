"""Open an image and return the small greyscale picture the hashes are computed from.

Every hash in leakaudit is defined on the image returned by :func:`load_reduced_grey`:

1. The declared size (from the file header) is checked against
   ``DecodeOptions.max_pixels`` *before* any pixel is decoded, so a decompression
   bomb is a recorded failure, never an out-of-memory kill. Pillow's global
   ``Image.MAX_IMAGE_PIXELS`` is never modified. A file over 1 MiB is
   identified from its header before the rest of it is read: one that is no
   image, a bomb, or larger than ``DecodeOptions.max_file_bytes`` (or than any
   JPEG of its declared size can be) is rejected without being read whole. A
   JPEG whose scans hold fewer bytes (or restart markers) than its declared
   size needs is reported as truncated, even when it ends in an end-of-image
   marker (libjpeg would fill the missing part with grey).
2. The image is decoded at a reduced size: the scale ``s`` is the largest of
   8, 4, 2, 1 for which both ``W // s`` and ``H // s`` stay ``>= min_side``.
   JPEGs get this for free from libjpeg's DCT scaling (``Image.draft``),
   decoding only the luma channel; every other format is fully decoded and
   box-reduced with :meth:`PIL.Image.Image.reduce` by the same scale, so a PNG
   and a JPEG copy of one photo hash alike. Both give ``ceil(W / s) x
   ceil(H / s)`` pixels: when a side is not a multiple of ``s`` the last pixel
   column/row is a *partial block* (the average of the ``W % s`` / ``H % s``
   pixels there), which stands for only a fraction of a reduced pixel.
3. Transparency is flattened onto ``DecodeOptions.background`` (the colour a
   viewer shows), not dropped: pixels hidden under alpha = 0 never reach the hash.
4. 16-bit and 32-bit greyscale is rescaled to 8 bits (``convert("L")`` would
   clip it to white).
5. The EXIF orientation is applied last, on the small image, so the hash
   describes the image as displayed.

The hashes are then defined on the reduced image **with the partial block
weighted by its true area**: the thumbnails are resampled from the box
``(0, 0, W / s, H / s)`` of the reduced image (Pillow's ``resize(...,
box=box)``; see :class:`ReducedGrey`), which covers exactly the original
image. Cropping the partial block instead would shift every hash input by up
to 1.9% of the image; keeping it at full weight would stretch it. For an
EXIF-rotated or flipped JPEG the partial block sits at the stored right/bottom
edge, so the box is mapped through the same transpose (after a 180 degree
rotation it is fractional at the left/top). Other formats that carry an EXIF
orientation are transposed *before* the reduction, so their blocks line up
with the upright image's and an oriented PNG reduces to exactly the pixels of
the upright PNG. With no reduction (``s = 1``, or sides divisible by ``s``) the
box is the whole image and the hashes equal ``imagehash``'s.

With ``DecodeOptions(trim_borders=True)`` uniform borders (letterbox and
pillarbox bars, padding, transparent padding once flattened) are then cut off
the upright reduced image: the pixels become a view of the rows and columns
inside the bars and the box the part of it the hashes cover (:func:`trim_box`).

Only the first frame of an animated GIF/WebP/TIFF is used.

JPEGs and PNGs that start with the same header bytes as the last plain one Pillow
opened (the files of one dataset usually do) are decoded by the same Pillow decoder
call without ``Image.open`` parsing the header again; anything unusual about a file
sends it through Pillow as usual, so pixels, failures and warnings are the same.

Warnings Pillow emits while decoding (a corrupt EXIF block, a malformed APNG, ...)
do not name the file; they are caught and given again as one
:class:`ImageDecodeWarning` per image, its message starting with the file's name.
"""

from __future__ import annotations

import io
import math
import os
import re
import stat
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import IO, Any, NamedTuple, TypeAlias, cast

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageFile, UnidentifiedImageError
from PIL import _imaging as _pillow_core

from leakaudit._validation import check_bool, check_int, describe
from leakaudit.errors import ImageLoadError

__all__ = [
    "MAX_FILE_BYTES",
    "Box",
    "DecodeOptions",
    "ImageDecodeWarning",
    "ImageSource",
    "ReducedGrey",
    "check_declared_size",
    "check_full_decode",
    "grey_and_note_from_bytes",
    "grey_and_note_from_pil",
    "greys_and_notes",
    "load_reduced_grey",
    "read_source",
    "resolve_decode",
    "rgba_as_hashed",
    "trim_allowed",
    "trim_box",
]

ImageSource: TypeAlias = "str | os.PathLike[str] | bytes | Image.Image"
"""What the loaders accept: a path, the encoded bytes of a file, or a PIL image."""

Box: TypeAlias = "tuple[float, float, float, float]"
"""A ``(left, top, right, bottom)`` region in pixel coordinates, possibly fractional."""


class ReducedGrey(NamedTuple):
    """The reduced, flattened, upright greyscale pixels and the region the hashes cover.

    Attributes
    ----------
    pixels : numpy.ndarray of uint8, shape (height, width)
        Possibly a read-only, non-contiguous view.
    box : Box or None
        The region of ``pixels`` that covers exactly the original image:
        ``(0, 0, W / s, H / s)``, moved with the EXIF transpose, when the last
        column/row is a partial block; None when it is the whole array. With
        ``trim_borders``, ``pixels`` is the part inside the borders and the box
        keeps only the fractional edges of untrimmed sides.
    """

    pixels: NDArray[np.uint8]
    box: Box | None


# EXIF orientation tag value -> the transpose that shows the image upright
# (the same table as PIL.ImageOps.exif_transpose).
_ORIENTATION_TAG = 0x0112
_TRANSPOSE_FOR_ORIENTATION = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
# The same transposes as numpy views of a (rows, columns) array: pixel for pixel
# what Image.transpose returns, without copying.
_ARRAY_TRANSPOSE: dict[Image.Transpose, Callable[[NDArray[np.uint8]], NDArray[np.uint8]]] = {
    Image.Transpose.FLIP_LEFT_RIGHT: lambda a: a[:, ::-1],
    Image.Transpose.FLIP_TOP_BOTTOM: lambda a: a[::-1],
    Image.Transpose.ROTATE_90: lambda a: a.T[::-1],
    Image.Transpose.ROTATE_180: lambda a: a[::-1, ::-1],
    Image.Transpose.ROTATE_270: lambda a: a[::-1].T,
    Image.Transpose.TRANSPOSE: lambda a: a.T,
    Image.Transpose.TRANSVERSE: lambda a: a[::-1, ::-1].T,
}
# The same transposes of a box (left, top, right, bottom) in an array of
# (width, height) before the transpose: where the region lands afterwards.
_BOX_TRANSPOSE: dict[Image.Transpose, Callable[[Box, int, int], Box]] = {
    Image.Transpose.FLIP_LEFT_RIGHT: lambda b, w, h: (w - b[2], b[1], w - b[0], b[3]),
    Image.Transpose.FLIP_TOP_BOTTOM: lambda b, w, h: (b[0], h - b[3], b[2], h - b[1]),
    Image.Transpose.ROTATE_90: lambda b, w, h: (b[1], w - b[2], b[3], w - b[0]),
    Image.Transpose.ROTATE_180: lambda b, w, h: (w - b[2], h - b[3], w - b[0], h - b[1]),
    Image.Transpose.ROTATE_270: lambda b, w, h: (h - b[3], b[0], h - b[1], b[2]),
    Image.Transpose.TRANSPOSE: lambda b, w, h: (b[1], b[0], b[3], b[2]),
    Image.Transpose.TRANSVERSE: lambda b, w, h: (h - b[3], w - b[2], h - b[1], w - b[0]),
}
_ALPHA_MODES = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})
_WIDE_GREY_MODES = frozenset({"I;16", "I;16B", "I;16L", "I;16N", "I", "F"})

#: The default ``DecodeOptions.max_file_bytes``: 512 MiB.
MAX_FILE_BYTES = 512 * 2**20
#: The default ``DecodeOptions.max_decode_pixels``: 64 Mi pixels (8192 x 8192). Every
#: format but JPEG is decoded at full size before it is reduced, at 5 to 16 bytes a
#: pixel (an RGB PNG about 5, a WebP 16: libwebp's buffer and Pillow's copy), so
#: Pillow's ``max_pixels`` threshold (178.9M) let a few-KB file cost 1 to 4 GB.
#: 50- and 61-megapixel camera images stay under it.
MAX_DECODE_PIXELS = 64 * 2**20
#: How much of a file larger than ``max_file_bytes`` is read to tell whether it is an
#: image at all (its reason is then "file too large" rather than "not an image").
_HEADER_BYTES = 64 * 2**10
#: Files up to this size are read whole straight away, as cheap as reading a header
#: (the decode identifies them); larger ones are identified from their header first.
_IDENTIFY_ABOVE = 2**20
#: The most a JPEG can hold per declared pixel (and frame): a Huffman code of at most
#: 16 bits plus 11 bits of value for each of the 64 coefficients of an 8 x 8 block is
#: 27 bits per pixel and component; 4 components, every byte stuffed, a progressive
#: file's refinement scans: under 64 bytes.
_JPEG_BYTES_PER_PIXEL = 64
#: What a JPEG may hold besides its pixels: EXIF (with a thumbnail), ICC and XMP
#: segments, a motion photo's video appended after the image.
_JPEG_OTHER_BYTES = 64 * 2**20


class ImageDecodeWarning(UserWarning):
    """An image was decoded (and hashed), but warnings were raised meanwhile.

    Pillow's own warnings (``Corrupt EXIF data``, ``Invalid APNG``, ...) name no
    file; they are given again naming it (or ``<bytes #i>`` / ``<PIL image #i>``):
    one warning for one image, one summary for a batch.
    """


@dataclass(frozen=True)
class DecodeOptions:
    """How images are decoded before hashing.

    Parameters
    ----------
    min_side : int or None, default 64
        Decode at a reduced size: the largest scale among 8, 4, 2, 1 that keeps
        both sides at least ``min_side`` pixels. ``None`` decodes at full size.
        The hashes only look at a 32 x 32 thumbnail, so 64 loses nothing that
        matters and makes large JPEGs several times cheaper to decode.
    exif_transpose : bool, default True
        Apply the EXIF orientation, so the hash describes the image as a viewer
        displays it. ``False`` hashes the stored pixels.
    background : tuple of 3 ints, default (255, 255, 255)
        The RGB colour transparent pixels are flattened onto.
    max_pixels : int, default 178_956_970
        Images whose header declares more than ``max_pixels`` pixels (W x H) are
        reported as decompression bombs and never decoded. Pillow's own guard
        still refuses images above ``2 * PIL.Image.MAX_IMAGE_PIXELS``; those are
        reported the same way.
    max_decode_pixels : int, default 67_108_864 (64 Mi pixels, 8192 x 8192)
        The most pixels of an image decoded at full size: every format but
        JPEG (which libjpeg decodes reduced, so ``max_pixels`` alone bounds
        it). A larger one is reported as a failure ("too large to decode at
        full size") before any pixel is decoded, so one image costs at most
        about 0.3 GB (an RGB PNG) to 1 GB (a WebP) however small its file. 50-
        and 61-megapixel camera images stay under the default; raise it for
        larger PNG, TIFF or WebP scans.
    max_file_bytes : int, default 536_870_912 (512 MiB)
        Files larger than this are reported as failures ("file too large: N bytes
        exceeds max_file_bytes=M") after reading only their header, never read
        whole. A JPEG is also refused when it is larger than any JPEG of its
        declared size can be (64 bytes per pixel plus 64 MiB of metadata: a small
        image's header in front of a huge tail). Raise the limit for very large
        uncompressed TIFF, BMP or PPM files; in-memory bytes are not checked.
    trim_borders : bool, default True
        Hash only what lies inside uniform borders: letterbox bars (top and
        bottom), pillarbox bars (left and right) and padding on any side, in a
        solid colour or transparent (flattened onto ``background``, so a
        transparent bar is a uniform one). A padded or letterboxed copy then
        hashes like its original. The trim is found on the reduced greyscale
        image and expressed as the region the hashes cover, with the
        safeguards listed in :func:`trim_box`: lines must be flat, the same
        colour as the outermost line and end in a sharp step, and at least a
        quarter of each side is kept, so blank images stay untrimmed. Measured
        on real photos: padded copies found at the default threshold go from
        0.4% to 99.5%, false pairs between unrelated photos unchanged, about 2%
        more hashing time (``benchmarks/RESULTS.md``, "Borders and crops").
    crop_entries : bool, default False
        With dihedral matching (``hash_sources(..., dihedral=True)``), also
        index each image's hashes as it is, of its content inside a uniform
        background, of a few crops (95% of each side at 9 positions, 85% at
        16) and of small rotations (+-3 and +-6 degrees, centre crops): the
        candidate net that reaches padded, cropped and slightly rotated copies,
        which no whole-image hash does. These entries only *propose*
        candidate pairs; :mod:`leakaudit.verify` decides each one (the audits
        turn this on when ``verify`` is). Well under a decode per image: fixed
        matrices on the 32 x 32 pHash thumbnail, not Pillow's exact resampling.

    Examples
    --------
    >>> DecodeOptions(min_side=None).min_side is None
    True
    >>> DecodeOptions(background=(0, 0, 0)).background
    (0, 0, 0)
    >>> DecodeOptions(trim_borders=True).trim_borders
    True
    >>> DecodeOptions().max_file_bytes == 512 * 2**20
    True
    >>> DecodeOptions().max_decode_pixels == 8192 * 8192
    True
    """

    min_side: int | None = 64
    exif_transpose: bool = True
    background: tuple[int, int, int] = (255, 255, 255)
    max_pixels: int = 178_956_970
    trim_borders: bool = True
    max_file_bytes: int = MAX_FILE_BYTES
    crop_entries: bool = False
    max_decode_pixels: int = MAX_DECODE_PIXELS

    def __post_init__(self) -> None:
        if self.min_side is not None:
            check_int("min_side", self.min_side, 1)
        check_bool("exif_transpose", self.exif_transpose)
        background = self.background
        if (
            not isinstance(background, tuple)
            or len(background) != 3
            or not all(
                isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in background
            )
        ):
            raise ValueError(
                f"background must be a tuple of 3 ints in [0, 255]; got {describe(background)}."
            )
        check_int("max_pixels", self.max_pixels, 1)
        check_bool("trim_borders", self.trim_borders)
        check_int("max_file_bytes", self.max_file_bytes, 1)
        check_bool("crop_entries", self.crop_entries)
        check_int("max_decode_pixels", self.max_decode_pixels, 1)


_DEFAULT_OPTIONS = DecodeOptions()


def resolve_decode(decode: DecodeOptions | None) -> DecodeOptions:
    """Return ``decode=`` as every entry point takes it: None means the defaults.

    Raises ``TypeError`` (one wording everywhere) for anything else.
    """
    if decode is None:
        return _DEFAULT_OPTIONS
    if not isinstance(decode, DecodeOptions):
        raise TypeError(f"decode must be a DecodeOptions or None; got {describe(decode)}.")
    return decode


def load_reduced_grey(source: ImageSource, *, decode: DecodeOptions | None = None) -> Image.Image:
    """Decode an image to the small greyscale picture the hashes are defined on.

    Parameters
    ----------
    source : str, os.PathLike, bytes or PIL.Image.Image
        A path, the encoded bytes of an image file, or an already opened image.
    decode : DecodeOptions, optional
        Reduction, orientation, transparency and size-limit settings.

    Returns
    -------
    PIL.Image.Image
        A mode ``"L"`` image, reduced by the scale described in
        :class:`DecodeOptions` (``ceil(W / s) x ceil(H / s)``, the last
        column/row a partial block when a side is not a multiple of ``s``),
        transparency flattened, upright. The hashes resample the box of it that
        covers the original image exactly (see the module docstring).

    Raises
    ------
    ImageLoadError
        The source cannot be read or decoded; ``reason`` says why (missing file,
        empty file, not an image, truncated image, decompression bomb, ...).

    Examples
    --------
    >>> from PIL import Image
    >>> im = Image.new("RGB", (640, 480), (200, 30, 30))
    >>> grey = load_reduced_grey(im)
    >>> grey.mode, grey.size
    ('L', (160, 120))
    >>> load_reduced_grey(im, decode=DecodeOptions(min_side=None)).size
    (640, 480)
    """
    options = resolve_decode(decode)
    if isinstance(source, Image.Image):
        reduced, note = grey_and_note_from_pil(source, "<in-memory PIL image>", options)
    else:
        name, data = read_source(source, "<in-memory bytes>", options)
        reduced, note = grey_and_note_from_bytes(data, name, options)
    if note:
        warnings.warn(note, ImageDecodeWarning, stacklevel=2)
    return Image.fromarray(np.ascontiguousarray(reduced.pixels))


def read_source(
    source: object, fallback: str, decode: DecodeOptions | None = None
) -> tuple[str, bytes]:
    """Return ``(name, encoded bytes)`` for a path or bytes source.

    A file over 1 MiB is identified from its header first: one that is not an
    image, that declares more than ``decode.max_pixels`` pixels, or that is
    larger than ``decode.max_file_bytes`` (or than a JPEG of its declared size
    can be) is refused without being read whole. Smaller files are read whole
    (the decode identifies them). Bytes are returned as they are.

    Raises
    ------
    ImageLoadError
        The file cannot be read, or is refused as above.
    TypeError
        ``source`` is neither a path nor bytes.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        return fallback, bytes(source)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(
            f"source must be a path, bytes or a PIL image; got {type(source).__name__}."
        )
    name = os.fspath(source)
    if not isinstance(name, str):
        raise TypeError(f"source must be a str path, not bytes path; got {describe(name)}.")
    try:
        # Only regular files: opening a named pipe (or a device) named like an image would
        # block the whole run until a writer appears.
        status = os.stat(name)
        if not stat.S_ISREG(status.st_mode):
            kind = "is a directory" if os.path.isdir(name) else "not a regular file"
            raise ImageLoadError(name, kind)
        options = resolve_decode(decode)
        if status.st_size <= min(_IDENTIFY_ABOVE, options.max_file_bytes):
            return name, _read_small(name, status.st_size, options.max_file_bytes)
        with open(name, "rb") as file:
            return name, _read_checked(file, name, status.st_size, options)
    except FileNotFoundError:
        raise ImageLoadError(name, "file not found") from None
    except IsADirectoryError:
        raise ImageLoadError(name, "is a directory") from None
    except PermissionError:
        reason = "is a directory" if os.path.isdir(name) else "permission denied"
        raise ImageLoadError(name, reason) from None
    except ImageLoadError:
        raise
    except OSError as exc:
        raise ImageLoadError(name, f"cannot read file: {exc.strerror or exc}") from None


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)
#: Most bytes asked of one ``os.read`` (a file that grew since it was stat-ed is read
#: on up to ``max_file_bytes``, which must not be allocated up front).
_READ_STEP = 4 * 2**20


def _read_small(name: str, size: int, limit: int) -> bytes:
    """:func:`_read_checked` for a file of at most ``_IDENTIFY_ABOVE`` bytes (no header check).

    With ``os.read`` on a descriptor: a file object costs more than the read of
    a small image.
    """
    descriptor = os.open(name, _READ_FLAGS)
    try:
        data = _read_up_to(descriptor, size + 1)
        if len(data) > size:  # the file grew since it was stat-ed: read on, up to the limit
            data += _read_up_to(descriptor, max(0, limit + 1 - len(data)))
    finally:
        os.close(descriptor)
    if len(data) > limit:
        raise ImageLoadError(
            name, f"file too large: more than {limit} bytes (it grew while being read)"
        )
    return data


def _read_up_to(descriptor: int, count: int) -> bytes:
    """Read ``count`` bytes, or up to the end of the file when it has fewer (as ``read(count)``)."""
    parts: list[bytes] = []
    while count > 0:
        part = os.read(descriptor, min(count, _READ_STEP))
        if not part:
            break
        parts.append(part)
        count -= len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _read_checked(file: IO[bytes], name: str, size: int, options: DecodeOptions) -> bytes:
    """Read an open file of ``size`` bytes after checking its header (see :func:`read_source`).

    The header of a file over ``_IDENTIFY_ABOVE`` is parsed by Pillow itself, on
    the file, so it reads only what identifying the format needs; the decode
    later parses it again from the bytes, with the same result. Whatever else
    goes wrong in the header is left for that decode to report, with its usual
    reason.
    """
    limit = options.max_file_bytes
    if size > limit:
        head = file.read(_HEADER_BYTES)
        if _is_image_header(head):
            raise ImageLoadError(
                name, f"file too large: {size} bytes exceeds max_file_bytes={limit}"
            )
        raise ImageLoadError(name, "not a recognised image format")
    if size > _IDENTIFY_ABOVE:
        bound = _plausible_size(file, name, options)
        if bound is not None and size > bound[0]:
            raise ImageLoadError(
                name,
                f"file too large: {size} bytes, more than a {bound[1]} JPEG can hold "
                f"({bound[0]} bytes)",
            )
        limit = min(limit, bound[0]) if bound is not None else limit
        file.seek(0)
    data = file.read(size + 1)
    if len(data) > size:  # the file grew since it was stat-ed: read on, up to the limit
        data += file.read(max(0, limit + 1 - len(data)))
    if len(data) > limit:
        raise ImageLoadError(
            name, f"file too large: more than {limit} bytes (it grew while being read)"
        )
    return data


def _plausible_size(file: IO[bytes], name: str, options: DecodeOptions) -> tuple[int, str] | None:
    """Identify the image in ``file`` and check its declared size; return a JPEG's size bound.

    Returns ``(most bytes, "WxH")`` for a JPEG, None for other formats and for
    headers Pillow cannot parse here (the decode reports those).

    Raises
    ------
    ImageLoadError
        Not a recognised image format, or a decompression bomb.
    """
    try:
        with warnings.catch_warnings():
            # The decode parses the header again and reports its warnings.
            warnings.simplefilter("ignore")
            im = Image.open(file)
    except UnidentifiedImageError:
        raise ImageLoadError(name, "not a recognised image format") from None
    except Image.DecompressionBombError as exc:
        raise _bomb_error(file, name, options, exc) from None
    except Exception:  # a corrupt header: the decode gives the reason
        return None
    _check_declared_size(im.size, name, options)
    if im.format not in ("JPEG", "MPO"):
        return None
    frames = getattr(im, "n_frames", 1) if im.format == "MPO" else 1
    if not isinstance(frames, int) or frames < 1:
        frames = 1
    width, height = im.size
    most = _JPEG_OTHER_BYTES + _JPEG_BYTES_PER_PIXEL * width * height * frames
    return most, f"{width}x{height}"


def _is_image_header(head: bytes) -> bool:
    """Whether ``head``, the start of a file, looks like an image Pillow could open."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Image.open(io.BytesIO(head))
    except UnidentifiedImageError:
        # A header longer than ``head`` fails to parse: trust the format's signature.
        prefix = head[:16]
        return any(
            accept is not None and accept(prefix)
            for _, accept in (Image.OPEN[format_id] for format_id in Image.ID)
        )
    except Exception:  # anything else: an image whose header did not fit in ``head``
        return True
    return True


def reduction_scale(width: int, height: int, min_side: int | None) -> int:
    """Return the decode scale: the largest of 8, 4, 2, 1 keeping both sides >= min_side.

    Examples
    --------
    >>> reduction_scale(500, 375, 64)
    4
    >>> reduction_scale(1920, 1080, 64), reduction_scale(100, 100, 64)
    (8, 1)
    """
    if min_side is None:
        return 1
    fit = min(width // min_side, height // min_side)
    for scale in (8, 4, 2):
        if fit >= scale:
            return scale
    return 1


def grey_from_bytes(data: bytes, name: str, options: DecodeOptions) -> ReducedGrey:
    """Decode encoded image bytes to the reduced, flattened, upright greyscale pixels.

    Returns the ``(height, width)`` uint8 array of :func:`load_reduced_grey`'s image
    (possibly a read-only, non-contiguous view) and the box the hashes cover.
    Pillow's warnings are given again as one :class:`ImageDecodeWarning` naming ``name``.
    """
    reduced, note = grey_and_note_from_bytes(data, name, options)
    if note:
        warnings.warn(note, ImageDecodeWarning, stacklevel=2)
    return reduced


def grey_from_pil(image: Image.Image, name: str, options: DecodeOptions) -> ReducedGrey:
    """Apply the same pipeline to an already opened PIL image (never modified).

    Returns what :func:`grey_from_bytes` does; the pixels never share memory with ``image``.
    """
    reduced, note = grey_and_note_from_pil(image, name, options)
    if note:
        warnings.warn(note, ImageDecodeWarning, stacklevel=2)
    return reduced


def grey_and_note_from_bytes(
    data: bytes, name: str, options: DecodeOptions
) -> tuple[ReducedGrey, str]:
    """:func:`grey_from_bytes`, returning the text of its warning ("" when none) instead."""
    if not data:
        raise ImageLoadError(name, "empty file (0 bytes)")
    return _one(greys_and_notes([data], [name], options), name)


def grey_and_note_from_pil(
    image: Image.Image, name: str, options: DecodeOptions
) -> tuple[ReducedGrey, str]:
    """:func:`grey_from_pil`, returning the text of its warning ("" when none) instead."""
    return _one(greys_and_notes([image], [name], options), name)


def _one(
    batch: tuple[list[ReducedGrey | str], dict[int, str]], name: str
) -> tuple[ReducedGrey, str]:
    (result,), notes = batch
    if isinstance(result, str):
        raise ImageLoadError(name, result)
    return result, notes.get(0, "")


class _Small(NamedTuple):
    """A decoded image whose pixels are not taken out yet: mode "L", reduced, not yet upright.

    ``core`` is the Pillow image core; ``box`` (None: the whole image) and
    ``transpose`` (None: none) are still in stored coordinates.
    """

    core: Any
    width: int
    height: int
    box: Box | None
    transpose: Image.Transpose | None
    trim: bool
    #: A header Pillow opened for this file, to decode the next files sharing it
    #: directly (:func:`_remember_header`); None when it is not a plain one.
    header: _KnownJpeg | _KnownPng | None = None


#: Decoded images up to this many pixels have their pixels taken out together with the
#: others of their size (one copy for all of them); larger ones on their own.
_SHARED_COPY_PIXELS = 1 << 18


def greys_and_notes(
    sources: Sequence[bytes | Image.Image],
    names: Sequence[str],
    options: DecodeOptions,
    *,
    pixel_budget: int | None = None,
) -> tuple[list[ReducedGrey | str], dict[int, str]]:
    """:func:`grey_and_note_from_bytes` / :func:`grey_and_note_from_pil` for several images.

    Returns, per source, its :class:`ReducedGrey` or why it could not be read,
    and the decoder warnings of the images that were read (position -> the text
    :func:`grey_and_note_from_bytes` returns). The same pipeline image for image,
    with the per-image costs that do not depend on the image paid once: one
    warnings context for the batch, and one copy of the pixels out of Pillow for
    all images of one size.

    With ``pixel_budget``, decoding stops after the image that brings the pixels
    held to the budget: the results then cover only the first sources (at least
    one), and the caller goes on with the rest once it has used these.

    Examples
    --------
    >>> greys, notes = greys_and_notes(
    ...     [Image.new("RGB", (640, 480), "teal"), b"junk"], ["a", "b"], DecodeOptions()
    ... )
    >>> greys[0].pixels.shape, greys[1], notes
    ((120, 160), 'not a recognised image format', {})
    """
    results: list[ReducedGrey | str] = []
    held = 0
    spans: dict[int, tuple[int, int]] = {}
    pending: dict[tuple[int, int], list[tuple[int, _Small]]] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Our own max_pixels check replaces Pillow's warning.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        for position, (source, name) in enumerate(zip(sources, names, strict=True)):
            start = len(caught)
            try:
                if isinstance(source, Image.Image):
                    small = _small_from_pil(source, name, options)
                else:
                    small = _small_from_bytes(source, name, options)
            except ImageLoadError as exc:  # its warnings go with it, as for one image
                results.append(exc.reason)
                continue
            if len(caught) > start:
                spans[position] = (start, len(caught))
            elif small.header is not None:
                _remember_header(small.header)
            results.append("")  # filled in below
            if small.width * small.height <= _SHARED_COPY_PIXELS:
                pending.setdefault((small.width, small.height), []).append((position, small))
            else:
                results[position] = _upright(
                    _pixels_of(small.core, small.width, small.height), small
                )
            held += small.width * small.height
            if pixel_budget is not None and held >= pixel_budget:
                break
        for (width, height), group in pending.items():
            # One canvas for every image of this size: pasting a core is a memcpy,
            # and one tobytes replaces an encoder set-up per image.
            canvas = Image.new("L", (width, height * len(group)))
            for k, (_, small) in enumerate(group):
                canvas.im.paste(small.core, (0, k * height, width, (k + 1) * height))
            stack = np.frombuffer(canvas.tobytes(), dtype=np.uint8).reshape(-1, height, width)
            flat_edges = _flat_edges(stack) if any(small.trim for _, small in group) else None
            for k, (position, small) in enumerate(group):
                if small.transpose is None and not small.trim:
                    results[position] = ReducedGrey(stack[k], small.box)  # the usual case
                    continue
                trim = small.trim and flat_edges is not None and bool(flat_edges[k])
                results[position] = _upright(stack[k], small, trim=trim)
    notes: dict[int, str] = {}
    for position, (start, stop) in spans.items():
        note = _decode_note(names[position], caught[start:stop])
        if note:
            notes[position] = note
    return results, notes


def _small_from_bytes(data: bytes, name: str, options: DecodeOptions) -> _Small:
    """Decode encoded bytes (inside the caller's warnings context); raises ImageLoadError."""
    if not data:
        raise ImageLoadError(name, "empty file (0 bytes)")
    jpeg, png = _known_jpeg, _known_png
    small: _Small | None = None
    if jpeg is not None and data.startswith(jpeg.header):
        small = _small_from_known_jpeg(data, name, options, jpeg)
    elif png is not None and data.startswith(png.header):
        small = _small_from_known_png(data, name, options, png)
    if small is not None:
        return small
    png_offset = 0
    try:
        im = Image.open(io.BytesIO(data))
        _check_declared_size(im.size, name, options)
        size = im.size  # before a draft shrinks it
        scale = reduction_scale(im.width, im.height, options.min_side)
        drafted_box: Box | None = None
        if im.format in ("JPEG", "MPO"):
            if _jpeg_scans_short(data):
                raise ImageLoadError(name, "truncated image")
            # libjpeg scales in the DCT domain and, for colour JPEGs, decodes
            # only the luma plane: the two big savings of the whole pipeline.
            side = options.min_side or 1
            drafted = im.draft("L", (side, side) if scale > 1 else None)
            if drafted is not None:  # None: multi-tile JPEG, reduce after decoding
                # libjpeg rounds the size up, keeping the partial last block;
                # draft reports the region covering the original image,
                # (0, 0, W / scale, H / scale).
                drafted_box = drafted[1]
                scale = 1
        elif im.format == "PNG" and len(im.tile) == 1 and im.tile[0][3] == im.mode:
            # 8 bits per sample (rawmode = mode): where the first IDAT chunk's data starts
            png_offset = im.tile[0][2]
        if drafted_box is None:  # decoded at full size, then reduced
            check_full_decode(size, name, options)
        im.load()
        orientation = _loaded_orientation(im) if options.exif_transpose else 1
        core = _plain_grey_core(im) if scale == 1 else None
        grey = _to_grey(im, options.background) if core is None else None
    except ImageLoadError:
        raise
    except UnidentifiedImageError:
        raise ImageLoadError(name, "not a recognised image format") from None
    except Image.DecompressionBombError as exc:
        raise _bomb_error(io.BytesIO(data), name, options, exc) from None
    except MemoryError:
        raise ImageLoadError(name, "out of memory while decoding") from None
    except Exception as exc:  # Pillow raises many types for corrupt files
        raise ImageLoadError(name, _describe_decode_error(exc)) from None
    trim = options.trim_borders and trim_allowed(size)
    if core is not None:
        width, height = im.size
        box = drafted_box
        if box == (0.0, 0.0, float(width), float(height)):
            box = None
        header: _KnownJpeg | _KnownPng | None = None
        if drafted_box is not None:
            header = _plain_jpeg_header(im, data, size)
        elif png_offset:
            header = _plain_png_header(im, data, png_offset)
        transpose = _TRANSPOSE_FOR_ORIENTATION.get(orientation)
        return _Small(core, width, height, box, transpose, trim, header)
    assert grey is not None
    return _reduce(grey, scale, orientation, drafted_box, trim)


# A JPEG's header up to the end of its first scan header decides everything Pillow's
# ``Image.open`` does with it (JpegImagePlugin parses markers up to that scan, then
# stops; the MPO and EXIF checks read what it parsed), and a PNG's bytes before its
# first IDAT chunk do the same for PngImagePlugin. The files of one dataset often
# share those bytes exactly (one encoder, size and quality). So once Pillow has
# opened a header, decoded the file without a warning and found nothing in it that
# changes pixels or orientation, a file starting with the same bytes is decoded by
# the same decoder call directly, without Pillow parsing the header again in Python:
# about a third of the time of a small file. The last header of each format is kept.


class _KnownJpeg(NamedTuple):
    """A JPEG header Pillow opened as a plain JPEG: the bytes, the size it declares."""

    header: bytes
    size: tuple[int, int]
    #: ``Image.MAX_IMAGE_PIXELS`` then (``Image.open`` warns or refuses by it).
    max_image_pixels: int | None


class _KnownPng(NamedTuple):
    """The bytes before a plain PNG's first IDAT chunk, the size and mode they declare."""

    header: bytes
    size: tuple[int, int]
    mode: str  # "L" or "RGB", 8 bits, not interlaced, no transparency
    max_image_pixels: int | None


_known_jpeg: _KnownJpeg | None = None
_known_png: _KnownPng | None = None
#: Pillow's ``info`` keys of a JPEG whose header holds nothing that changes its pixels
#: or its orientation (no EXIF, XMP, ICC profile or MPO index).
_PLAIN_JPEG_INFO = frozenset(
    {
        "jfif",
        "jfif_version",
        "jfif_unit",
        "jfif_density",
        "dpi",
        "progressive",
        "progression",
        "comment",
        "adobe",
        "adobe_transform",
    }
)
#: The same for a PNG (no transparency, text, EXIF, interlacing or animation).
_PLAIN_PNG_INFO = frozenset({"gamma", "srgb", "dpi", "aspect", "chromaticity", "icc_profile"})
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _remember_header(header: _KnownJpeg | _KnownPng) -> None:
    global _known_jpeg, _known_png
    if isinstance(header, _KnownJpeg):
        _known_jpeg = header
    else:
        _known_png = header


def _plain_jpeg_header(im: Image.Image, data: bytes, size: tuple[int, int]) -> _KnownJpeg | None:
    """The header of a JPEG Pillow just decoded at "L", when it is a plain one."""
    walked = _last_jpeg_header  # what _jpeg_scans_short walked for this file
    if (
        walked is None
        or not data.startswith(walked[0])
        or im.format != "JPEG"
        or not _PLAIN_JPEG_INFO.issuperset(im.info)
        or getattr(im, "_exif", None) is not None
        or ImageFile.LOAD_TRUNCATED_IMAGES
    ):
        return None
    known = _known_jpeg
    if known is not None and known.header == walked[0]:
        return None  # already known
    return _KnownJpeg(walked[0], size, Image.MAX_IMAGE_PIXELS)


def _plain_png_header(im: Image.Image, data: bytes, offset: int) -> _KnownPng | None:
    """The header of a PNG Pillow just decoded whole, when it is a plain one."""
    start = offset - 8  # the IDAT chunk's length and type
    if (
        im.format != "PNG"
        or im.mode not in ("L", "RGB")
        or getattr(im, "is_animated", True)
        or not _PLAIN_PNG_INFO.issuperset(im.info)
        or getattr(im, "_exif", None) is not None
        or ImageFile.LOAD_TRUNCATED_IMAGES
        or start < len(_PNG_SIGNATURE)
        or data[start + 4 : offset] != b"IDAT"
        or not data.startswith(_PNG_SIGNATURE)
    ):
        return None
    known = _known_png
    if known is not None and len(known.header) == start and data.startswith(known.header):
        return None  # already known
    return _KnownPng(data[:start], im.size, im.mode, Image.MAX_IMAGE_PIXELS)


def _small_from_known_jpeg(
    data: bytes, name: str, options: DecodeOptions, known: _KnownJpeg
) -> _Small | None:
    """What :func:`_small_from_bytes` gives a JPEG starting with a known header; None: ask it.

    The same steps on the same facts: the size checks, the scan check, then
    ``draft("L", ...)`` and ``load()`` as Pillow makes them (the decoder
    ``draft`` sets up, fed the file in ``ImageFile.MAXBLOCK`` pieces as
    ``ImageFile.load`` feeds it). Anything else (a file the decoder does not
    finish cleanly, Pillow settings changed since) is left to the general path,
    which then fails or warns in its own words.
    """
    if ImageFile.LOAD_TRUNCATED_IMAGES or known.max_image_pixels != Image.MAX_IMAGE_PIXELS:
        return None
    size = known.size
    _check_declared_size(size, name, options)
    if _jpeg_scans_short(data):
        raise ImageLoadError(name, "truncated image")
    width, height = size
    scale = 1
    if reduction_scale(width, height, options.min_side) > 1:
        side = options.min_side or 1
        # JpegImageFile.draft: the largest of 8, 4, 2, 1 not above the ratio.
        ratio = min(width // side, height // side)
        scale = next(s for s in (8, 4, 2, 1) if ratio >= s)
    out_width, out_height = -(-width // scale), -(-height // scale)
    core = _decode_jpeg_l(data, (out_width, out_height), scale)
    if core is None:
        return None
    box: Box | None = (0, 0, width / scale, height / scale)  # as draft reports it
    if box == (0.0, 0.0, float(out_width), float(out_height)):
        box = None
    trim = options.trim_borders and trim_allowed(size)
    return _Small(core, out_width, out_height, box, None, trim)


def _decode_jpeg_l(data: bytes, size: tuple[int, int], scale: int) -> Any:
    """``ImageFile.load`` of a JPEG drafted to "L" at ``scale``: the core; None on any trouble."""
    block = ImageFile.MAXBLOCK
    pieces = [data[first : first + block] for first in range(0, len(data), block)]
    return _decode_pieces("L", "jpeg", ("L", ""), (scale, 0), size, pieces)


def _small_from_known_png(
    data: bytes, name: str, options: DecodeOptions, known: _KnownPng
) -> _Small | None:
    """What :func:`_small_from_bytes` gives a PNG starting with a known header; None: ask it.

    Only for images hashed at full size whose IDAT chunks are followed by IEND
    alone (Pillow reads text, EXIF and other chunks after the image data into
    ``info``, which may set an orientation): the size check, then ``load()``
    as PngImagePlugin makes it (the IDAT data fed to the zip decoder chunk by
    chunk, in ``ImageFile.MAXBLOCK`` pieces) and the conversion to "L".
    """
    if ImageFile.LOAD_TRUNCATED_IMAGES or known.max_image_pixels != Image.MAX_IMAGE_PIXELS:
        return None
    start = len(known.header)
    if data[start + 4 : start + 8] != b"IDAT":
        return None
    size = known.size
    _check_declared_size(size, name, options)
    check_full_decode(size, name, options)
    if reduction_scale(size[0], size[1], options.min_side) > 1:
        return None
    pieces = _png_idat_pieces(data, start)
    if pieces is None:
        return None
    core = _decode_pieces(known.mode, "zip", known.mode, (), size, pieces)
    if core is None:
        return None
    if known.mode == "RGB":
        core = core.convert("L", Image.Dither.FLOYDSTEINBERG)  # _plain_grey_core's conversion
    trim = options.trim_borders and trim_allowed(size)
    return _Small(core, size[0], size[1], None, None, trim)


def _png_idat_pieces(data: bytes, start: int) -> list[bytes] | None:
    """The pieces ``PngImageFile.load_read`` returns for the IDAT chunks from ``start``.

    None unless every chunk from there is a whole IDAT (CRC included) and the
    first other chunk is IEND.
    """
    block = ImageFile.MAXBLOCK
    pieces: list[bytes] = []
    position = start
    while True:
        if position + 8 > len(data):
            return None
        length = int.from_bytes(data[position : position + 4], "big")
        kind = data[position + 4 : position + 8]
        if kind == b"IEND":
            return pieces
        stop = position + 8 + length
        if kind != b"IDAT" or stop + 4 > len(data):
            return None
        for first in range(position + 8, stop, block):
            pieces.append(data[first : min(stop, first + block)])
        position = stop + 4  # past the CRC, which load_read does not check either


def _decode_pieces(
    mode: str,
    decoder_name: str,
    args: Any,
    extra: tuple[Any, ...],
    size: tuple[int, int],
    pieces: Sequence[bytes],
) -> Any:
    """``ImageFile.load``'s decoding loop over ``pieces``: the core; None on any trouble."""
    try:
        core = _pillow_core.new(mode, size)
        decoder = Image._getdecoder(mode, decoder_name, args, extra)
    except Exception:
        return None
    try:
        decoder.setimage(core, (0, 0, *size))
        pending = b""
        error = -3
        for piece in pieces:
            pending += piece
            consumed, error = decoder.decode(pending)
            if consumed < 0:
                break
            pending = pending[consumed:]
        else:
            return None  # the data ended first: the general path says how
    except Exception:
        return None
    finally:
        decoder.cleanup()
    return core if error >= 0 else None


def _small_from_pil(image: Image.Image, name: str, options: DecodeOptions) -> _Small:
    """The same for an opened image (never modified); raises ImageLoadError."""
    try:
        _check_declared_size(image.size, name, options)
        scale = reduction_scale(image.width, image.height, options.min_side)
        orientation = _orientation(image) if options.exif_transpose else 1
        grey = _to_grey(image, options.background)
    except ImageLoadError:
        raise
    except MemoryError:
        raise ImageLoadError(name, "out of memory while decoding") from None
    except Exception as exc:
        raise ImageLoadError(name, _describe_decode_error(exc)) from None
    trim = options.trim_borders and trim_allowed(image.size)
    return _reduce(grey, scale, orientation, None, trim)


def _plain_grey_core(im: Image.Image) -> Any:
    """The "L" core of a loaded image that needs no flattening (L or RGB), else None.

    What :func:`_to_grey` returns for these, without the wrapping Image: an "L"
    image without transparency is itself, an RGB one is ``convert("L")``, which
    is this same core conversion (the dither argument only matters for modes
    "1" and "P").
    """
    if "transparency" in im.info:
        return None
    if im.mode == "L":
        return im.im
    if im.mode == "RGB":
        return im.im.convert("L", Image.Dither.FLOYDSTEINBERG)
    return None


def _reduce(
    grey: Image.Image, scale: int, orientation: int, drafted_box: Box | None, trim: bool
) -> _Small:
    """Reduce by ``scale`` and find the hash box; the EXIF ``orientation`` is left to apply.

    ``drafted_box`` is the region ``Image.draft`` reported for a JPEG that
    libjpeg already reduced (``scale`` is then 1); None for everything else.
    A reduction keeps the partial last block (``Image.reduce`` averages the
    pixels there) and the box covers the original image exactly, the partial
    block by its true fraction. For images reduced here, a remainder and an
    EXIF orientation make the full-size image be transposed first, so the
    blocks start at the displayed top-left corner as in the upright original;
    a drafted JPEG's blocks are fixed by libjpeg, so its box is transposed with
    the pixels instead (:func:`_upright`).
    """
    transpose = _TRANSPOSE_FOR_ORIENTATION.get(orientation)
    box: Box | None = None
    if drafted_box is not None:
        box = drafted_box
    elif scale > 1:
        if transpose is not None and (grey.width % scale or grey.height % scale):
            grey = grey.transpose(transpose)
            transpose = None
        width, height = grey.size
        grey = grey.reduce(scale)
        box = (0.0, 0.0, width / scale, height / scale)
    if box == (0.0, 0.0, float(grey.width), float(grey.height)):
        box = None
    grey.load()  # a caller's lazily opened image: what tobytes() would do
    return _Small(grey.im, grey.width, grey.height, box, transpose, trim)


def _pixels_of(core: Any, width: int, height: int) -> NDArray[np.uint8]:
    """The pixels of an "L" core as a (read-only) array."""
    image = Image.new("L", (width, height))
    image.im.paste(core, (0, 0, width, height))
    return np.frombuffer(image.tobytes(), dtype=np.uint8).reshape(height, width)


def _upright(pixels: NDArray[np.uint8], small: _Small, *, trim: bool | None = None) -> ReducedGrey:
    """Apply the EXIF transpose (a numpy view: no copy) to pixels and box, then the trim.

    With ``trim``, uniform borders of the upright pixels are cut off
    (:func:`trim_box`): the pixels become a view of the rows and columns the
    trimmed box touches, again no copy. ``trim=False`` where the caller knows
    that no edge line is flat (:func:`_flat_edges`): nothing would be trimmed.
    """
    box = small.box
    transpose = small.transpose
    if transpose is not None:
        pixels = _ARRAY_TRANSPOSE[transpose](pixels)
        if box is not None:
            box = _BOX_TRANSPOSE[transpose](box, small.width, small.height)
    if small.trim if trim is None else trim:
        return _apply_trim(pixels, box)
    return ReducedGrey(pixels, box)


def _flat_edges(stack: NDArray[np.uint8]) -> NDArray[np.bool_]:
    """Per image of a ``(k, height, width)`` stack: is one of its four edge lines flat?

    :func:`trim_box` trims nothing unless the first or last row or column of the
    image is flat (:func:`_trim_axis`'s first test; the columns it tests are
    whole when no row is trimmed, and a transpose maps edge lines to edge
    lines), so images without one skip it.
    """
    spread = 2 * TRIM_TOLERANCE
    flat = np.zeros(len(stack), dtype=np.bool_)
    for line in (stack[:, 0, :], stack[:, -1, :], stack[:, :, 0], stack[:, :, -1]):
        flat |= line.max(axis=1).astype(np.int16) - line.min(axis=1) <= spread
    return flat


def _decode_note(name: str, caught: list[warnings.WarningMessage]) -> str:
    """One line naming the image and what was warned about it ("" when nothing was).

    Deprecation warnings are about code, not the image: they are given again as
    they were, under the caller's filters.
    """
    texts: dict[str, None] = {}
    for caught_warning in caught:
        if issubclass(caught_warning.category, (DeprecationWarning, PendingDeprecationWarning)):
            warnings.warn_explicit(
                caught_warning.message,
                caught_warning.category,
                caught_warning.filename,
                caught_warning.lineno,
                source=caught_warning.source,
            )
        else:
            texts[" ".join(str(caught_warning.message).split())] = None
    if not texts:
        return ""
    return f"{name}: decoded despite warnings: {'; '.join(texts)}"


# Border trimming (DecodeOptions.trim_borders), on the reduced upright grey pixels.
# Measured in benchmarks/bench_borders.py (benchmarks/RESULTS.md, "Borders and crops").
#: A bar line's pixels all lie within this many grey levels of the bar colour (the
#: median of the outermost line): a digital bar is flat, JPEG-compressed too away
#: from its edge; the flattest real-photo edges (a moon's surface) are not.
TRIM_TOLERANCE = 2
#: Up to this many lines between the flat bar and the content may be JPEG ringing of
#: the edge: within TRIM_RINGING_TOLERANCE of the bar colour and on average within
#: TRIM_RINGING_MEAN (content moves the whole line, ringing single pixels).
TRIM_RINGING_LINES = 3
TRIM_RINGING_TOLERANCE = 8
TRIM_RINGING_MEAN = 2.0
#: The line after a bar, or the one after it, holds a pixel at least this far from
#: the bar colour: a bar ends in a step, a graded sky in a drift.
TRIM_STEP = 12
#: A trim must keep at least this fraction of each side (and TRIM_MIN_PIXELS
#: reduced pixels); otherwise that axis is left untrimmed, so a blank image, or
#: a small object on a wide background, is hashed whole.
TRIM_MIN_FRACTION = 0.25
TRIM_MIN_PIXELS = 8
#: Graphics on a plain ground are not padded pictures. A sprite or icon drawn on a
#: transparent canvas becomes, once flattened onto ``background``, an exactly flat
#: margin around a silhouette; its JPEG copy (flattened by another tool onto white)
#: has the same margin with ringing near the silhouette. Trimmed, the two boxes end
#: wherever the first line off the margin touches the silhouette's tips, which the
#: ringing moves, so they differed (or one copy stayed whole) and the copy was lost
#: (benchmarks/bench_trim_alpha.py: sprite JPEG copies 100% found untrimmed, 25-75%
#: trimmed). A padded picture fills the trimmed box up to its corners; a silhouette
#: leaves them ground. So a trim is refused when at least TRIM_GROUND_CORNERS corners
#: of the trimmed box are still border colour (a square just inside the corner,
#: TRIM_CORNER_FRACTION of the box's shorter side and at least TRIM_CORNER_PIXELS
#: lines, every pixel within TRIM_CORNER_TOLERANCE of the bar colour of a trimmed
#: side next to it): the graphic and all its copies are hashed whole,
#: as without trimming. One ground corner is allowed: a photo's dark corner next to
#: a black bar, a document icon's folded corner. Transparent and opaque copies are
#: judged alike: the test sees only the flattened grey pixels.
#: Swept on bench_borders' 3,300 padded photo copies / bench_trim_alpha's sprites of
#: 128 px and more (copies found, trim on): a 2-line square within 8 levels refused
#: 36 photo trims (1.1%) / 89%; within 4, 22 / 89%; 12% of the side within 4, 4 / 83%
#: (a larger square is less often all bar colour in a photo, and still all ground in
#: the corner of a round or pointed silhouette).
TRIM_GROUND_CORNERS = 2
TRIM_CORNER_FRACTION = 0.12
TRIM_CORNER_PIXELS = 2
TRIM_CORNER_TOLERANCE = 4
#: Images whose shorter side is under this many pixels are never trimmed. They are
#: decoded unreduced (the reduced decode starts at 2 x the default min_side), so a
#: JPEG copy's 8 x 8 blocks ring over up to 7 pixels next to the content: a margin
#: of a few pixels (a 16-64 px icon's) is flat in a PNG and noise in its JPEG copy,
#: and no tolerance tells that noise from content. Padded photos are larger.
TRIM_MIN_IMAGE_SIDE = 128


def trim_allowed(size: tuple[int, int]) -> bool:
    """Whether an image of ``size`` (width, height, before any reduction) may be trimmed.

    False under :data:`TRIM_MIN_IMAGE_SIDE` pixels on the shorter side.

    Examples
    --------
    >>> trim_allowed((500, 375)), trim_allowed((64, 64))
    (True, False)
    """
    return min(size) >= TRIM_MIN_IMAGE_SIDE


def trim_box(
    pixels: NDArray[np.uint8],
    box: Box | None = None,
    *,
    tolerance: int = TRIM_TOLERANCE,
    ringing_lines: int = TRIM_RINGING_LINES,
    step: int = TRIM_STEP,
) -> Box | None:
    """Return the region of ``pixels`` (within ``box``) inside uniform borders.

    A side's border is the run of lines (rows for top and bottom, columns for
    left and right) whose pixels all lie within ``tolerance`` grey levels of
    the median of the outermost line, followed by at most ``ringing_lines``
    lines of JPEG ringing (see :data:`TRIM_RINGING_TOLERANCE`). It counts only
    when the line after it (or the one after that) has a pixel at least
    ``step`` levels away from the bar colour, so a gently graded sky is never
    taken for a bar. The bar's edge is placed inside the first content line
    by the share of bar colour mixed into it (the reduced decode averages the
    pixels on both sides of the edge), so the region is fractional. Rows are
    trimmed first, then columns within the rows kept. An axis is left
    untrimmed when the trim would keep less than :data:`TRIM_MIN_FRACTION` of
    it or fewer than :data:`TRIM_MIN_PIXELS` pixels (a blank image is all
    border). No side is trimmed when two or more corners of the trimmed region
    are still border colour (:data:`TRIM_GROUND_CORNERS`): that is a shape on a
    plain or transparent ground (a sprite, an icon), not a padded picture, and
    its copies could not be trimmed alike. The image size rule
    (:func:`trim_allowed`) is applied by the decoder, not here.

    Parameters
    ----------
    pixels : numpy.ndarray of uint8, shape (height, width)
        The reduced, upright greyscale image.
    box : Box or None
        The region the hashes cover without trimming; None is the whole array.

    Returns
    -------
    Box or None
        ``(left, top, right, bottom)`` in pixel coordinates of ``pixels``;
        None when no side is trimmed.

    Examples
    --------
    >>> import numpy as np
    >>> picture = np.zeros((40, 60), dtype=np.uint8)
    >>> picture[10:30] = 40 + np.arange(60, dtype=np.uint8) * 3
    >>> trim_box(picture)
    (0.0, 10.0, 60.0, 30.0)
    >>> trim_box(np.full((40, 60), 255, dtype=np.uint8)) is None
    True
    """
    height, width = pixels.shape
    left, top, right, bottom = box if box is not None else (0.0, 0.0, float(width), float(height))
    box_top, box_bottom = top, bottom
    limits = (tolerance, ringing_lines, step)
    box_left, box_right = left, right
    new_top, new_bottom, top_colour, bottom_colour = _trim_axis(pixels, top, bottom, limits)
    if (new_top, new_bottom) == (top, bottom):
        top_colour = bottom_colour = None
    top, bottom = new_top, new_bottom
    # Columns are judged on the rows kept, less the mixed lines at trimmed edges.
    row_start = _inward(top, top == box_top, lower=True)
    row_stop = _inward(bottom, bottom == box_bottom, lower=False)
    rows = pixels[math.floor(row_start) : math.ceil(row_stop)]
    new_left, new_right, left_colour, right_colour = _trim_axis(rows.T, left, right, limits)
    if (new_left, new_right) == (left, right):
        left_colour = right_colour = None
    left, right = new_left, new_right
    colours = (left_colour, top_colour, right_colour, bottom_colour)
    if all(colour is None for colour in colours):
        return None
    column_start = _inward(left, left == box_left, lower=True)
    column_stop = _inward(right, right == box_right, lower=False)
    inner = (column_start, row_start, column_stop, row_stop)
    if _ground_corners(pixels, inner, colours) >= TRIM_GROUND_CORNERS:
        return None
    return left, top, right, bottom


def _ground_corners(pixels: NDArray[np.uint8], inner: Box, colours: tuple[int | None, ...]) -> int:
    """How many corners of ``inner`` are border colour (:data:`TRIM_GROUND_CORNERS`).

    ``colours`` are the bar colours of the left, top, right and bottom sides
    (None: that side is not trimmed). A corner counts only when a side next to it
    is trimmed, and is border colour when every pixel of the square inside it
    (:data:`TRIM_CORNER_FRACTION` of the shorter side, at least
    :data:`TRIM_CORNER_PIXELS` lines) lies within
    :data:`TRIM_CORNER_TOLERANCE` of that side's bar colour.
    """
    left, top, right, bottom = (round(edge) for edge in inner)
    shorter = min(right - left, bottom - top)
    size = min(max(TRIM_CORNER_PIXELS, round(TRIM_CORNER_FRACTION * shorter)), shorter)
    if size <= 0:
        return 0
    left_colour, top_colour, right_colour, bottom_colour = colours
    corners = (
        (slice(top, top + size), slice(left, left + size), (top_colour, left_colour)),
        (slice(top, top + size), slice(right - size, right), (top_colour, right_colour)),
        (slice(bottom - size, bottom), slice(left, left + size), (bottom_colour, left_colour)),
        (slice(bottom - size, bottom), slice(right - size, right), (bottom_colour, right_colour)),
    )
    count = 0
    for rows, columns, near in corners:
        patch = pixels[rows, columns]
        low, high = int(patch.min()), int(patch.max())
        if any(
            colour is not None
            and low >= colour - TRIM_CORNER_TOLERANCE
            and high <= colour + TRIM_CORNER_TOLERANCE
            for colour in near
        ):
            count += 1
    return count


def _trim_axis(
    lines: NDArray[np.uint8], start: float, stop: float, limits: tuple[int, int, int]
) -> tuple[float, float, int | None, int | None]:
    """The ``(start, stop)`` span of axis 0 of ``lines`` left after trimming bars at both ends.

    Also the colours of the bars at the start and at the stop (None where there is none).
    """
    count = lines.shape[0]
    if count < 2 or lines.shape[1] == 0:
        return start, stop, None, None
    # Most images have no flat outermost line: two reductions of it settle that.
    spread = 2 * limits[0]
    head_flat = int(lines[0].max()) - int(lines[0].min()) <= spread
    tail_flat = int(lines[-1].max()) - int(lines[-1].min()) <= spread
    if not head_flat and not tail_flat:
        return start, stop, None, None
    low = lines.min(axis=1).astype(np.int16)
    high = lines.max(axis=1).astype(np.int16)
    head, head_colour = _bar_depth(lines, low, high, limits) if head_flat else (0.0, 0)
    tail, tail_colour = (
        _bar_depth(lines[::-1], low[::-1], high[::-1], limits) if tail_flat else (0.0, 0)
    )
    if not head and not tail:
        return start, stop, None, None
    new_start, new_stop = max(start, head), min(stop, count - tail)
    if new_stop - new_start < max(TRIM_MIN_FRACTION * (stop - start), TRIM_MIN_PIXELS):
        return start, stop, None, None
    return (
        new_start,
        new_stop,
        head_colour if new_start != start else None,
        tail_colour if new_stop != stop else None,
    )


def _bar_depth(
    lines: NDArray[np.uint8],
    low: NDArray[np.int16],
    high: NDArray[np.int16],
    limits: tuple[int, int, int],
) -> tuple[float, int]:
    """How deep the bar at the start of ``lines`` reaches (0.0 when none), and its colour."""
    tolerance, ringing_lines, step = limits
    count = len(low)
    middle = len(lines[0]) // 2  # the median without np.median's overhead
    colour = int(np.partition(lines[0], middle)[middle])
    flat = (high <= colour + tolerance) & (low >= colour - tolerance)
    if not flat[0]:
        return 0.0, colour
    depth = int(np.argmin(flat)) if not flat.all() else count
    for _ in range(ringing_lines):
        if depth >= count:
            break
        if (
            high[depth] > colour + TRIM_RINGING_TOLERANCE
            or low[depth] < colour - TRIM_RINGING_TOLERANCE
            or np.abs(lines[depth].astype(np.float64) - colour).mean() > TRIM_RINGING_MEAN
        ):
            break
        depth += 1
    if depth >= count - 1:
        return float(count), colour  # all border: the caller keeps the axis whole
    after = slice(depth, depth + 2)
    if max(int(high[after].max()) - colour, colour - int(low[after].min())) < step:
        return 0.0, colour
    # The first content line may hold a share of bar colour: its signed deviation is
    # (1 - share) times the next line's, which stands in for the content behind it.
    first = lines[depth].astype(np.float64) - colour
    behind = lines[depth + 1].astype(np.float64) - colour
    energy = float(behind @ behind)
    if energy <= 0.0:
        return float(depth), colour
    share = 1.0 - float(first @ behind) / energy
    return depth + min(max(share, 0.0), 1.0), colour


def _apply_trim(pixels: NDArray[np.uint8], box: Box | None) -> ReducedGrey:
    """Cut ``pixels`` to :func:`trim_box`'s region, trimmed edges on whole lines (a view).

    The first content line after a bar holds a share of bar colour, and Lanczos
    would resample it as content: it is dropped (unless under a tenth of it is
    bar), which measured better than keeping it whole or cutting inside it.
    Untrimmed sides keep their box edge (the partial last block of the decode).
    """
    trimmed = trim_box(pixels, box)
    if trimmed is None:
        return ReducedGrey(pixels, box)
    height, width = pixels.shape
    original = box if box is not None else (0.0, 0.0, float(width), float(height))
    left, top, right, bottom = (
        float(_inward(edge, edge == old, lower=lower))
        for edge, old, lower in zip(trimmed, original, (True, True, False, False), strict=True)
    )
    column, row = math.floor(left), math.floor(top)
    view = pixels[row : math.ceil(bottom), column : math.ceil(right)]
    local: Box | None = (left - column, top - row, right - column, bottom - row)
    if local == (0.0, 0.0, float(view.shape[1]), float(view.shape[0])):
        local = None
    return ReducedGrey(view, local)


def _inward(edge: float, untouched: bool, *, lower: bool) -> float:
    """A trimmed edge moved inward to a whole line (dropping a line under a tenth content)."""
    if untouched:
        return edge
    return float(math.ceil(edge - 0.1) if lower else math.floor(edge + 0.1))


def _check_declared_size(size: tuple[int, int], name: str, options: DecodeOptions) -> None:
    width, height = size
    if width * height > options.max_pixels:
        raise ImageLoadError(
            name,
            f"decompression bomb: declared {width}x{height} = {width * height} pixels "
            f"exceeds max_pixels={options.max_pixels}",
        )
    if width < 1 or height < 1:
        raise ImageLoadError(name, f"empty image: declared {width}x{height}")


def check_declared_size(size: tuple[int, int], name: str, options: DecodeOptions) -> None:
    """Refuse a declared size over ``max_pixels`` (a decompression bomb) or an empty one.

    Raises
    ------
    ImageLoadError
        Naming the file, its size and the limit.
    """
    _check_declared_size(size, name, options)


def check_full_decode(size: tuple[int, int], name: str, options: DecodeOptions) -> None:
    """Refuse an image that would be decoded at full size with more than ``max_decode_pixels``.

    Raises
    ------
    ImageLoadError
        Naming the file, its size and the limit.

    Examples
    --------
    >>> check_full_decode((100, 100), "a.png", DecodeOptions(max_decode_pixels=10_000))
    >>> try:
    ...     check_full_decode((200, 100), "a.png", DecodeOptions(max_decode_pixels=10_000))
    ... except ImageLoadError as exc:
    ...     print(exc.reason.split(" = ")[0])
    too large to decode at full size: 200x100
    """
    width, height = size
    if width * height > options.max_decode_pixels:
        raise ImageLoadError(
            name,
            f"too large to decode at full size: {width}x{height} = {width * height} pixels "
            f"exceeds max_decode_pixels={options.max_decode_pixels} "
            "(only JPEGs are decoded reduced)",
        )


def _bomb_error(
    stream: IO[bytes], name: str, options: DecodeOptions, exc: Exception
) -> ImageLoadError:
    """The failure for an image Pillow refused as a decompression bomb (with its declared size)."""
    size = _declared_size(stream)
    if size is not None:
        try:
            _check_declared_size(size, name, options)
        except ImageLoadError as error:
            return error
    return ImageLoadError(name, f"decompression bomb: {exc}")


def _declared_size(stream: IO[bytes]) -> tuple[int, int] | None:
    """Read the size a header declares, for files Pillow refused to open as bombs.

    ``Image.open`` raises before returning the image when the size exceeds
    twice Pillow's global limit; the format plugins themselves only parse the
    header, so one of them tells us the declared size without decoding anything.
    """
    stream.seek(0)
    prefix = stream.read(16)
    for format_id in Image.ID:
        factory, accept = Image.OPEN[format_id]
        try:
            if accept is not None and not accept(prefix):
                continue
            stream.seek(0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                im = factory(stream, "")
        except Exception:
            continue
        return im.size
    return None


# JPEG scan check (_jpeg_scans_short). Start-of-frame markers of Huffman-coded frames
# (baseline, extended, progressive) -> the fewest bits a scan holds per 8 x 8 block:
# a sequential scan codes a DC difference and at least an end-of-block code (each at
# least 1 bit); a progressive DC scan at least 1 bit; a progressive AC scan can code
# long runs of empty blocks in a few bits, so it gives no bound.
_HUFFMAN_FRAMES = {0xC0: 2, 0xC1: 2, 0xC2: 1}
_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Inside entropy-coded data a 0xFF byte is followed by 0x00 (stuffing) or a restart
# marker; anything else ends the scan.
_SCAN_END = re.compile(rb"\xff[^\x00\xd0-\xd7]")
_RESTART_MARKER = re.compile(rb"\xff[\xd0-\xd7]")
# Markers whose segments the walk reads (frames, restart interval, scans); it skips the others.
_WALKED_MARKERS = _FRAME_MARKERS | {0xDA, 0xDD}
# A frame: (SOF marker, width, height, {component id: (h, v) sampling}, max h, max v).
_Frame: TypeAlias = "tuple[int, int, int, dict[int, tuple[int, int]], int, int]"


def _jpeg_scans_short(data: bytes) -> bool:
    """Whether a JPEG's scans certainly hold less than its declared frame needs.

    libjpeg does not fail on a scan that ends early (at an end-of-image marker
    appended to a cut-off file, or a frame header that claims more than the file
    holds): it fills the missing blocks with grey and only warns, and Pillow
    drops the warning. Walking the markers finds such files without decoding:
    a scan is short when its bytes (stuffing and restart markers included) are
    fewer than its blocks need at the least (see ``_HUFFMAN_FRAMES``), or when it
    has fewer restart markers than its restart interval requires; the image is
    incomplete when it ends before every component had its DC coefficients
    coded. Anything unusual (arithmetic coding, lossless or hierarchical
    frames, a height given later by a DNL marker, bytes between segments,
    malformed headers) gives False: libjpeg judges those.

    The walk up to the first scan depends only on the bytes before that scan's
    data, which the JPEGs of one dataset (one encoder, size and quality) often
    share byte for byte: that part of the walk is remembered for the last header
    seen, and a file starting with the same bytes continues from there.
    """
    remembered = _last_jpeg_header
    if remembered is not None and data.startswith(remembered[0]):
        first = remembered[1]
    else:
        walked = _jpeg_walk(data, 2, None, 0, set(), first=True)  # 2: after SOI
        if isinstance(walked, bool):
            return walked
        first = walked
        _remember_jpeg_header(data[: first[2]], first)
    frame, restart, end, scan = first
    dc_coded: set[int] = set()
    verdict, pos = _jpeg_scan_check(data, frame, restart, end, scan, dc_coded)
    if verdict is not None:
        return verdict
    result = _jpeg_walk(data, pos, frame, restart, dc_coded, first=False)
    assert isinstance(result, bool)
    return result


# (frame, restart interval, end of the scan header, the scan) at a JPEG's first scan.
_FirstScan: TypeAlias = "tuple[_Frame, int, int, tuple[list[int], int, int, int]]"
# The bytes up to the end of the first scan header of the last JPEG walked, and what
# the walk found there (see _jpeg_scans_short); replaced whole, never mutated.
_last_jpeg_header: tuple[bytes, _FirstScan] | None = None


def _remember_jpeg_header(header: bytes, first: _FirstScan) -> None:
    global _last_jpeg_header
    _last_jpeg_header = (header, first)


def _jpeg_walk(
    data: bytes,
    pos: int,
    frame: _Frame | None,
    restart: int,
    dc_coded: set[int],
    *,
    first: bool,
) -> bool | _FirstScan:
    """Walk the markers from ``pos``: the verdict, or (``first``) the state at the first scan."""
    size = len(data)
    while pos + 1 < size:
        if data[pos] != 0xFF:
            return False
        marker = data[pos + 1]
        if marker == 0xFF:  # a fill byte before the marker
            pos += 1
            continue
        if marker == 0xD9:  # EOI
            return frame is not None and not dc_coded.issuperset(frame[3])
        if 0xD0 <= marker <= 0xD8 or marker == 0x01:  # markers without a segment
            pos += 2
            continue
        if pos + 4 > size:
            return False
        body = pos + 4
        end = pos + 2 + (data[pos + 2] << 8 | data[pos + 3])
        if end < body or end > size:
            return False
        if marker not in _WALKED_MARKERS:
            pos = end
        elif marker == 0xDA:  # SOS: the scan header, then entropy-coded data
            if frame is None:
                return False
            scan = _jpeg_scan(data[body:end], frame)
            if scan is None:
                return False
            if first:
                return frame, restart, end, scan
            verdict, pos = _jpeg_scan_check(data, frame, restart, end, scan, dc_coded)
            if verdict is not None:
                return verdict
        elif marker == 0xDD:  # DRI
            if end - body >= 2:
                restart = data[body] << 8 | data[body + 1]
            pos = end
        else:  # a start-of-frame marker
            if frame is not None or marker not in _HUFFMAN_FRAMES:
                return False
            frame = _jpeg_frame(data[body:end], marker)
            if frame is None:
                return False
            pos = end
    return False  # no EOI: Pillow reports a file that ends inside a scan as truncated


def _jpeg_scan_check(
    data: bytes,
    frame: _Frame,
    restart: int,
    end: int,
    scan: tuple[list[int], int, int, int],
    dc_coded: set[int],
) -> tuple[bool | None, int]:
    """Check one scan whose data starts at ``end``: ``(verdict, None to go on; where)``."""
    ids, units, blocks, spectral_start = scan
    size = len(data)
    if spectral_start == 0:
        # The scan's data must not end (at a marker, or the end of the file)
        # within its first `need` bytes; only that window is searched.
        need = _ceil_div(blocks * _HUFFMAN_FRAMES[frame[0]], 8)
        if end + need > size:
            return True, end
        if _scan_ends_within(data, end, end + need):
            return True, end
        dc_coded.update(ids)
    if not restart and dc_coded.issuperset(frame[3]):
        # Nothing further can be short: AC scans give no bound (the usual
        # baseline file is one scan and ends here, without reading it all).
        return False, end
    found = _SCAN_END.search(data, end)
    stop = found.start() if found is not None else size
    if restart and len(_RESTART_MARKER.findall(data, end, stop)) < _ceil_div(units, restart) - 1:
        return True, end
    return None, stop


def _scan_ends_within(data: bytes, start: int, stop: int) -> bool:
    """Whether entropy-coded data starting at ``start`` ends (at a marker) before ``stop``.

    That is, whether ``_SCAN_END`` matches at a position in ``[start, stop)``.
    Usually every 0xFF byte there is stuffing (0xFF 0x00): two C-level counts
    say so without the regular expression walking the window byte by byte.
    """
    if data.count(b"\xff", start, stop) == data.count(b"\xff\x00", start, stop + 1):
        return False  # each 0xFF in the window is followed by 0x00: no marker
    early = _SCAN_END.search(data, start, stop + 1)
    return early is not None and early.start() < stop


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _jpeg_frame(segment: bytes, marker: int) -> _Frame | None:
    """The frame an SOF segment declares (see ``_Frame``), None when malformed."""
    if len(segment) < 6:
        return None
    height = segment[1] << 8 | segment[2]
    width = segment[3] << 8 | segment[4]
    count = segment[5]
    if not width or not height or not count or len(segment) < 6 + 3 * count:
        return None
    components: dict[int, tuple[int, int]] = {}
    h_max = v_max = 0
    for k in range(7, 7 + 3 * count, 3):
        sampling = segment[k]
        h, v = sampling >> 4, sampling & 15
        if not h or not v:
            return None
        components[segment[k - 1]] = (h, v)
        h_max, v_max = max(h_max, h), max(v_max, v)
    return marker, width, height, components, h_max, v_max


def _jpeg_scan(segment: bytes, frame: _Frame) -> tuple[list[int], int, int, int] | None:
    """``(component ids, MCUs, 8 x 8 blocks, spectral start)`` of an SOS segment."""
    _, width, height, components, h_max, v_max = frame
    count = segment[0] if segment else 0
    if not count or len(segment) < 4 + 2 * count:
        return None
    ids = list(segment[1 : 1 + 2 * count : 2])
    for component in ids:
        if component not in components:
            return None
    if count == 1:  # non-interleaved: one block per MCU, the component's own size
        h, v = components[ids[0]]
        columns = _ceil_div(_ceil_div(width * h, h_max), 8)
        rows = _ceil_div(_ceil_div(height * v, v_max), 8)
        return ids, columns * rows, columns * rows, segment[1 + 2 * count]
    units = _ceil_div(width, 8 * h_max) * _ceil_div(height, 8 * v_max)
    per_unit = 0
    for component in ids:
        h, v = components[component]
        per_unit += h * v
    return ids, units, units * per_unit, segment[1 + 2 * count]


def _loaded_orientation(im: Image.Image) -> int:
    """:func:`_orientation` of an image opened here and loaded, without parsing for nothing.

    ``getexif`` reads the orientation from ``info`` (EXIF bytes, a PNG's raw
    profile, XMP) or a TIFF's tags; an image with none of them has orientation 1,
    which building an empty ``Exif`` to say so costs as much as copying its pixels.
    """
    info = im.info
    if (
        getattr(im, "_exif", None) is None
        and not hasattr(im, "tag_v2")
        and not info.get("exif")
        and not info.get("Raw profile type exif")
        and not info.get("XML:com.adobe.xmp")
        and not info.get("xmp")
    ):
        return 1
    return _orientation(im)


def _orientation(im: Image.Image) -> int:
    try:
        value = im.getexif().get(_ORIENTATION_TAG, 1)
    except Exception:  # a broken EXIF block must not fail an otherwise fine image
        return 1
    return value if isinstance(value, int) else 1


def _to_grey(im: Image.Image, background: tuple[int, int, int]) -> Image.Image:
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


def _describe_decode_error(exc: Exception) -> str:
    text = str(exc)
    if "truncated" in text.lower() or isinstance(exc, EOFError):
        return "truncated image"
    return (
        f"cannot decode image ({type(exc).__name__}: {text})"
        if text
        else (f"cannot decode image ({type(exc).__name__})")
    )


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
