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
That fast path, and every other use of Pillow's private API, lives in
:mod:`leakaudit._pillow_fast`: on for the Pillow versions it was tested on, off
(Pillow's public API only, the same pixels) outside them or with
``LEAKAUDIT_PILLOW_FAST=0``.

The border trim lives in :mod:`leakaudit._trim`, the conversion of any mode to
grey in :mod:`leakaudit._greyscale`, the JPEG scan check in
:mod:`leakaudit._jpegscan`; their public names are importable from here.

Warnings Pillow emits while decoding (a corrupt EXIF block, a malformed APNG, ...)
do not name the file; they are caught and given again as one
:class:`ImageDecodeWarning` per image, its message starting with the file's name.
"""

from __future__ import annotations

import io
import os
import stat
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any, NamedTuple, TypeAlias

import numpy as np
from numpy.typing import NDArray
from PIL import Image, UnidentifiedImageError

from leakaudit import _pillow_fast
from leakaudit._greyscale import rgba_as_hashed
from leakaudit._greyscale import to_grey as _to_grey
from leakaudit._jpegscan import jpeg_scans_short as _jpeg_scans_short
from leakaudit._jpegscan import last_jpeg_header
from leakaudit._pillow_fast import KnownJpeg, KnownPng

# Border trimming has a module of its own; its names stay importable from here.
from leakaudit._trim import TRIM_CORNER_FRACTION as TRIM_CORNER_FRACTION
from leakaudit._trim import TRIM_CORNER_PIXELS as TRIM_CORNER_PIXELS
from leakaudit._trim import TRIM_CORNER_TOLERANCE as TRIM_CORNER_TOLERANCE
from leakaudit._trim import TRIM_GROUND_CORNERS as TRIM_GROUND_CORNERS
from leakaudit._trim import TRIM_MIN_FRACTION as TRIM_MIN_FRACTION
from leakaudit._trim import TRIM_MIN_IMAGE_SIDE as TRIM_MIN_IMAGE_SIDE
from leakaudit._trim import TRIM_MIN_PIXELS as TRIM_MIN_PIXELS
from leakaudit._trim import TRIM_RINGING_LINES as TRIM_RINGING_LINES
from leakaudit._trim import TRIM_RINGING_MEAN as TRIM_RINGING_MEAN
from leakaudit._trim import TRIM_RINGING_TOLERANCE as TRIM_RINGING_TOLERANCE
from leakaudit._trim import TRIM_STEP as TRIM_STEP
from leakaudit._trim import TRIM_TOLERANCE as TRIM_TOLERANCE
from leakaudit._trim import Box, apply_trim, flat_edges, trim_allowed, trim_box
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
        Deprecated (a ``DeprecationWarning`` when True): the crop entries are a
        hashing choice, ``hash_sources(..., crop_entries=True)`` (and
        ``hash_image``, ``hashes_and_notes``, ``hash_sources_cached``); the
        audits ask for them by themselves when they verify with dihedral
        matching. True still hashes them, as before.

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
        if self.crop_entries:
            warnings.warn(
                "DecodeOptions(crop_entries=True) is deprecated: pass crop_entries=True to "
                "the hashing function (hash_sources, hash_image, hashes_and_notes, "
                "hash_sources_cached) instead; the audits hash the entries they need.",
                DeprecationWarning,
                stacklevel=3,
            )
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

    ``core`` is the picture: a Pillow image core with the fast path on
    (:mod:`leakaudit._pillow_fast`), an ``Image.Image`` with it off; ``box``
    (None: the whole image) and ``transpose`` (None: none) are still in stored
    coordinates.
    """

    core: Any
    width: int
    height: int
    box: Box | None
    transpose: Image.Transpose | None
    trim: bool
    #: A header Pillow opened for this file, to decode the next files sharing it
    #: directly (``_pillow_fast.remember_header``); None when it is not a plain one.
    header: KnownJpeg | KnownPng | None = None


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
                _pillow_fast.remember_header(small.header)
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
                _paste(canvas, small.core, (0, k * height, width, (k + 1) * height))
            stack = np.frombuffer(canvas.tobytes(), dtype=np.uint8).reshape(-1, height, width)
            flat = flat_edges(stack) if any(small.trim for _, small in group) else None
            for k, (position, small) in enumerate(group):
                if small.transpose is None and not small.trim:
                    results[position] = ReducedGrey(stack[k], small.box)  # the usual case
                    continue
                trim = small.trim and flat is not None and bool(flat[k])
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
    fast = _pillow_fast.ENABLED
    if fast:
        jpeg, png = _pillow_fast.known_headers()
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
        elif fast and im.format == "PNG":
            png_offset = _pillow_fast.png_data_offset(im)  # where the IDAT data starts
        if drafted_box is None:  # decoded at full size, then reduced
            check_full_decode(size, name, options)
        im.load()
        orientation = _loaded_orientation(im) if options.exif_transpose else 1
        core = _plain_grey(im) if scale == 1 else None
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
        header: KnownJpeg | KnownPng | None = None
        if fast and drafted_box is not None:
            header = _pillow_fast.plain_jpeg_header(im, data, size, last_jpeg_header())
        elif png_offset:  # only with the fast path on
            header = _pillow_fast.plain_png_header(im, data, png_offset)
        transpose = _TRANSPOSE_FOR_ORIENTATION.get(orientation)
        return _Small(core, width, height, box, transpose, trim, header)
    assert grey is not None
    return _reduce(grey, scale, orientation, drafted_box, trim)


def _small_from_known_jpeg(
    data: bytes, name: str, options: DecodeOptions, known: KnownJpeg
) -> _Small | None:
    """What :func:`_small_from_bytes` gives a JPEG starting with a known header; None: ask it.

    The same steps on the same facts: the size checks, the scan check, then
    ``draft("L", ...)`` and ``load()`` as Pillow makes them
    (``_pillow_fast.decode_jpeg_l``). Anything else (a file the decoder does not
    finish cleanly, Pillow settings changed since) is left to the general path,
    which then fails or warns in its own words.
    """
    if not _pillow_fast.still_valid(known):
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
    core = _pillow_fast.decode_jpeg_l(data, (out_width, out_height), scale)
    if core is None:
        return None
    box: Box | None = (0, 0, width / scale, height / scale)  # as draft reports it
    if box == (0.0, 0.0, float(out_width), float(out_height)):
        box = None
    trim = options.trim_borders and trim_allowed(size)
    return _Small(core, out_width, out_height, box, None, trim)


def _small_from_known_png(
    data: bytes, name: str, options: DecodeOptions, known: KnownPng
) -> _Small | None:
    """What :func:`_small_from_bytes` gives a PNG starting with a known header; None: ask it.

    Only for images hashed at full size whose IDAT chunks are followed by IEND
    alone (Pillow reads text, EXIF and other chunks after the image data into
    ``info``, which may set an orientation): the size check, then ``load()``
    as PngImagePlugin makes it and the conversion to "L"
    (``_pillow_fast.decode_png``).
    """
    if not _pillow_fast.still_valid(known):
        return None
    start = len(known.header)
    if data[start + 4 : start + 8] != b"IDAT":
        return None
    size = known.size
    _check_declared_size(size, name, options)
    check_full_decode(size, name, options)
    if reduction_scale(size[0], size[1], options.min_side) > 1:
        return None
    core = _pillow_fast.decode_png(data, start, known)
    if core is None:
        return None
    trim = options.trim_borders and trim_allowed(size)
    return _Small(core, size[0], size[1], None, None, trim)


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


def _plain_grey(im: Image.Image) -> Any:
    """The "L" picture of a loaded image that needs no flattening (L or RGB), else None.

    What :func:`_to_grey` returns for these: an "L" image without transparency
    is itself, an RGB one is ``convert("L")``. With the fast path on, the core
    of it (``_pillow_fast.plain_grey_core``: the same conversion, no wrapper).
    """
    if _pillow_fast.ENABLED:
        return _pillow_fast.plain_grey_core(im)
    if "transparency" in im.info:
        return None
    if im.mode == "L":
        return im
    if im.mode == "RGB":
        return im.convert("L")
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
    picture = _pillow_fast.core_of(grey) if _pillow_fast.ENABLED else grey
    return _Small(picture, grey.width, grey.height, box, transpose, trim)


def _paste(canvas: Image.Image, picture: Any, box: tuple[int, int, int, int]) -> None:
    """Paste an "L" picture (a core or an Image: see :class:`_Small`) into ``canvas``."""
    if _pillow_fast.ENABLED:
        _pillow_fast.paste_core(canvas, picture, box)
    else:
        canvas.paste(picture, box[:2])


def _pixels_of(picture: Any, width: int, height: int) -> NDArray[np.uint8]:
    """The pixels of an "L" picture (see :class:`_Small`) as a (read-only) array."""
    if _pillow_fast.ENABLED:
        image = Image.new("L", (width, height))
        _pillow_fast.paste_core(image, picture, (0, 0, width, height))
    else:
        image = picture
    return np.frombuffer(image.tobytes(), dtype=np.uint8).reshape(height, width)


def _upright(pixels: NDArray[np.uint8], small: _Small, *, trim: bool | None = None) -> ReducedGrey:
    """Apply the EXIF transpose (a numpy view: no copy) to pixels and box, then the trim.

    With ``trim``, uniform borders of the upright pixels are cut off
    (:func:`trim_box`): the pixels become a view of the rows and columns the
    trimmed box touches, again no copy. ``trim=False`` where the caller knows
    that no edge line is flat (``_trim.flat_edges``): nothing would be trimmed.
    """
    box = small.box
    transpose = small.transpose
    if transpose is not None:
        pixels = _ARRAY_TRANSPOSE[transpose](pixels)
        if box is not None:
            box = _BOX_TRANSPOSE[transpose](box, small.width, small.height)
    if small.trim if trim is None else trim:
        return ReducedGrey(*apply_trim(pixels, box))
    return ReducedGrey(pixels, box)


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


def _loaded_orientation(im: Image.Image) -> int:
    """:func:`_orientation` of an image opened here and loaded, without parsing for nothing.

    With the fast path on, an image with nothing that can carry an orientation
    is 1 without building an ``Exif`` (``_pillow_fast.no_orientation_source``).
    """
    if _pillow_fast.ENABLED and _pillow_fast.no_orientation_source(im):
        return 1
    return _orientation(im)


def _orientation(im: Image.Image) -> int:
    try:
        value = im.getexif().get(_ORIENTATION_TAG, 1)
    except Exception:  # a broken EXIF block must not fail an otherwise fine image
        return 1
    return value if isinstance(value, int) else 1


def _describe_decode_error(exc: Exception) -> str:
    text = str(exc)
    if "truncated" in text.lower() or isinstance(exc, EOFError):
        return "truncated image"
    return (
        f"cannot decode image ({type(exc).__name__}: {text})"
        if text
        else (f"cannot decode image ({type(exc).__name__})")
    )
