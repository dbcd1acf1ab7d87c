"""The one decode of an image, for a purpose: the hashes' (reduced grey) or the verifier's
(a colour view): size checks, JPEG draft, EXIF orientation, mode, trim rule, with their options.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit import _pillow_fast
from leakaudit._greyscale import flatten_rgba, normalised
from leakaudit._jpegscan import jpeg_scans_short as _jpeg_scans_short
from leakaudit._trim import Box, trim_allowed, trim_box
from leakaudit._validation import check_bool, check_int, describe
from leakaudit.errors import ImageLoadError

__all__ = [
    "HASHES",
    "MAX_DECODE_PIXELS",
    "MAX_FILE_BYTES",
    "TRANSPOSE_FOR_ORIENTATION",
    "DecodeOptions",
    "DecodePurpose",
    "Decoded",
    "DecodedView",
    "check_declared_size",
    "check_full_decode",
    "decode_stored",
    "decode_view",
    "exif_orientation",
    "loaded_orientation",
    "reduction_scale",
    "resolve_decode",
    "stored_losslessly",
    "symmetric_resize",
    "trims_borders",
]

# EXIF orientation tag value -> the transpose that shows the image upright
# (the same table as PIL.ImageOps.exif_transpose).
_ORIENTATION_TAG = 0x0112
TRANSPOSE_FOR_ORIENTATION = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}

#: The default ``DecodeOptions.max_file_bytes``: 512 MiB.
MAX_FILE_BYTES = 512 * 2**20
#: The default ``DecodeOptions.max_decode_pixels``: 64 Mi pixels (8192 x 8192). Every
#: format but JPEG is decoded at full size before it is reduced, at 5 to 16 bytes a
#: pixel (an RGB PNG about 5, a WebP 16: libwebp's buffer and Pillow's copy), so
#: Pillow's ``max_pixels`` threshold (178.9M) let a few-KB file cost 1 to 4 GB.
#: 50- and 61-megapixel camera images stay under it.
MAX_DECODE_PIXELS = 64 * 2**20


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


@dataclass(frozen=True)
class DecodePurpose:
    """What a decode is for: the settings on which the hashes' and the verifier's differ.

    Everything else (the size checks, the JPEG scan check, the EXIF orientation,
    the rescaling of wide greyscale, the trim rule) is one rule in
    :func:`decode_stored` for both.

    Parameters
    ----------
    colour : bool, default False
        Keep colour: a JPEG is drafted in "RGB" (else "L", the luma plane only)
        and the pixels come out as "RGBA" with the values the hashes saw
        (else "L" flattened onto the background).
    side : int or None, default None
        The reduction target. None: the hashes' (the scale of
        ``DecodeOptions.min_side``, 8, 4, 2 or 1, libjpeg's or
        ``Image.reduce``). An int: about this many pixels on the shorter side
        (libjpeg's draft, then a box reduction when still over twice it: the
        verifier's view, :func:`decode_view`).
    """

    colour: bool = False
    side: int | None = None


#: The hashes' decode.
HASHES = DecodePurpose()


class Decoded(NamedTuple):
    """An image decoded for a purpose, not yet upright, converted or reduced by us.

    Attributes
    ----------
    image : PIL.Image.Image
        Loaded (a caller's PIL image as given), possibly reduced by libjpeg.
    size : tuple of int
        The declared (width, height), as stored, before any reduction.
    drafted_box : Box or None
        The region of ``image`` covering the original image when libjpeg
        reduced it (``Image.draft``); None when it was decoded at full size.
    scale : int
        The reduction the hashes still apply (1: none; always 1 with
        ``purpose.side`` set).
    orientation : int
        The EXIF orientation to apply (1: none, or ``exif_transpose`` off).
    trim : bool
        Borders may be trimmed: ``trim_borders`` is on and the image is large
        enough (:func:`trim_allowed`, on ``size``).
    lossless : bool
        The pixels are as the file stores them without loss
        (:func:`stored_losslessly`).
    png_offset : int
        Where a PNG's IDAT data starts, for the fast path's next files (0: not
        known, or not asked).
    """

    image: Image.Image
    size: tuple[int, int]
    drafted_box: Box | None
    scale: int
    orientation: int
    trim: bool
    lossless: bool
    png_offset: int = 0


#: The formats libjpeg decodes reduced for each purpose. The verifier has never
#: drafted MPO (a camera's multi-picture JPEG): its view of one is decoded at full
#: size and box-reduced, which gives other pixels than a draft, so drafting it too
#: would change verdicts; kept as it was.
_DRAFTED = {False: frozenset({"JPEG", "MPO"}), True: frozenset({"JPEG"})}


def decode_stored(
    source: bytes | Image.Image, name: str, options: DecodeOptions, purpose: DecodePurpose = HASHES
) -> Decoded:
    """Decode an image for ``purpose``: the one decode of the hashes and the verifier.

    Open, check the declared size (``max_pixels``), refuse a JPEG whose scans
    are short (truncated), draft a JPEG to the purpose's size, check a full
    decode (``max_decode_pixels``), load, and read the EXIF orientation and
    whether borders may be trimmed. A PIL image is only checked and read.

    Raises
    ------
    ImageLoadError
        From the size checks and the scan check. Anything else Pillow raises
        is left to the caller to word (the hashes name the failure, the
        verifier says it cannot decode for verification).

    Examples
    --------
    >>> decoded = decode_stored(Image.new("RGB", (640, 480)), "a", DecodeOptions())
    >>> decoded.size, decoded.scale, decoded.orientation, decoded.trim
    ((640, 480), 4, 1, True)
    """
    side = purpose.side
    if isinstance(source, Image.Image):
        size = source.size
        _check_declared_size(size, name, options)
        scale = reduction_scale(size[0], size[1], options.min_side) if side is None else 1
        orientation = exif_orientation(source) if options.exif_transpose else 1
        trim = trims_borders(size, options)
        return Decoded(source, size, None, scale, orientation, trim, stored_losslessly(source))
    im = Image.open(io.BytesIO(source))
    _check_declared_size(im.size, name, options)
    size = im.size  # before a draft shrinks it
    scale = reduction_scale(im.width, im.height, options.min_side) if side is None else 1
    drafted_box: Box | None = None
    png_offset = 0
    mode = "RGB" if purpose.colour else "L"
    if im.format in _DRAFTED[purpose.colour]:
        if _jpeg_scans_short(source):
            raise ImageLoadError(name, "truncated image")
        if side is None:
            # libjpeg scales in the DCT domain and, for colour JPEGs, decodes
            # only the luma plane: the two big savings of the whole pipeline.
            wanted = options.min_side or 1
            drafted = im.draft(mode, (wanted, wanted) if scale > 1 else None)
        else:
            step = max(1, min(size) // side)
            drafted = im.draft(mode, (max(1, size[0] // step), max(1, size[1] // step)))
        if drafted is not None:  # None: multi-tile JPEG, reduce after decoding
            # libjpeg rounds the size up, keeping the partial last block;
            # draft reports the region covering the original image,
            # (0, 0, W / scale, H / scale).
            drafted_box = drafted[1]
            scale = 1
    elif _pillow_fast.ENABLED and not purpose.colour and im.format == "PNG":
        png_offset = _pillow_fast.png_data_offset(im)  # where the IDAT data starts
    if drafted_box is None:  # decoded at full size, then reduced
        check_full_decode(size, name, options)
    im.load()
    orientation = loaded_orientation(im) if options.exif_transpose else 1
    trim = trims_borders(size, options)
    return Decoded(
        im, size, drafted_box, scale, orientation, trim, stored_losslessly(im), png_offset
    )


def trims_borders(size: tuple[int, int], options: DecodeOptions) -> bool:
    """Whether borders may be trimmed off an image of declared ``size``: the one rule."""
    return options.trim_borders and trim_allowed(size)


#: Formats that store pixels without loss (TIFF only when its compression is lossless).
_LOSSLESS_FORMATS = frozenset({"PNG", "BMP", "PPM", "TGA", "QOI", "TIFF"})
_LOSSY_TIFF_COMPRESSIONS = frozenset({"jpeg", "tiff_jpeg", "webp"})


def stored_losslessly(image: Image.Image) -> bool:
    """Whether ``image`` (as opened, before any conversion) holds its pixels without loss.

    Palette images count as lossy (a GIF or PNG-8 copy is quantised), and so do JPEG
    and WebP; an image built in memory (no format) is taken as it is given.

    Examples
    --------
    >>> stored_losslessly(Image.new("RGB", (4, 4))), stored_losslessly(Image.new("P", (4, 4)))
    (True, False)
    """
    if image.mode in ("P", "PA", "1"):
        return False
    if image.format is None:
        return True
    if image.format == "TIFF":
        return str(image.info.get("compression", "raw")) not in _LOSSY_TIFF_COMPRESSIONS
    return image.format in _LOSSLESS_FORMATS


class DecodedView(NamedTuple):
    """An image as the verifier sees it (:func:`decode_view`).

    Attributes
    ----------
    rgba : PIL.Image.Image
        Upright, "RGBA" with the values the hashes saw, about ``purpose.side``
        pixels on the shorter side (or smaller when the image is).
    grey : numpy.ndarray of uint8
        ``rgba`` flattened onto the background, as "L".
    box : Box
        The region of ``rgba`` inside uniform borders (the whole image when
        nothing is trimmed).
    size : tuple of int
        The declared (width, height), as stored, before any reduction.
    lossless : bool
        :func:`stored_losslessly` of the image as opened.
    """

    rgba: Image.Image
    grey: NDArray[np.uint8]
    box: Box
    size: tuple[int, int]
    lossless: bool


def symmetric_resize(
    image: Image.Image,
    size: tuple[int, int],
    box: tuple[float, float, float, float] | None = None,
) -> Image.Image:
    """``image`` resized to ``size`` (bilinear, antialiased when reducing), RGBA, the same
    for a turned image as turned: in float, each channel alone, colours premultiplied by
    alpha (Pillow's RGBA resize rounds the premultiplied colours and its first pass to 8
    bits, and a quarter turn swaps the passes: a turned view differed by up to 21 levels)."""
    rgba = np.asarray(image.convert("RGBA"), dtype=np.float32)
    alpha = rgba[..., 3]
    premultiplied = rgba[..., :3] * (alpha[..., None] / 255.0)

    def resized(channel: NDArray[np.float32]) -> NDArray[np.float32]:
        plane = Image.fromarray(np.ascontiguousarray(channel), "F")
        return np.asarray(plane.resize(size, Image.Resampling.BILINEAR, box=box), np.float32)

    new_alpha = resized(alpha)
    colour = np.stack([resized(premultiplied[..., c]) for c in range(3)], axis=-1)
    covered = new_alpha[..., None]
    colour = np.where(covered > 1e-3, colour * (255.0 / np.maximum(covered, 1e-3)), 0.0)
    out = np.dstack([colour, new_alpha]).round().clip(0, 255).astype(np.uint8)
    return Image.fromarray(out, "RGBA")


def decode_view(decoded: Decoded, options: DecodeOptions, side: int) -> DecodedView:
    """The verifier's view of a :func:`decode_stored` image (``DecodePurpose(True, side)``).

    The EXIF transpose and the mode of the hashes' decode; then a bilinear reduction to
    about ``side`` pixels on the shorter side when it is over twice that, and the
    trim found on the view's own grey pixels by :func:`trim_box` (under the same
    :func:`trim_allowed` rule). The hashes' trim box is not reused: it lies on
    their reduced grey, whose pixels differ from the view's (another reduction,
    another flattening), and the view's own box is what verification was measured
    with. Pillow's errors are left to the caller to word.
    """
    image = decoded.image
    transpose = TRANSPOSE_FOR_ORIENTATION.get(decoded.orientation)
    if transpose is not None:
        image = image.transpose(transpose)
    rgba = normalised(image, options.background, colour=True)
    if min(rgba.size) > 2 * side:
        factor = min(rgba.size) / side
        size = (max(1, round(rgba.width / factor)), max(1, round(rgba.height / factor)))
        # Bilinear (antialiased when reducing) is symmetric: the view of a turned image is
        # the turned view (a box filter's half-pixel ties fell to one side). With
        # transparency, in float on premultiplied colours (Pillow rounds them to 8 bits).
        if np.asarray(rgba.getchannel("A")).min() < 255:
            rgba = symmetric_resize(rgba, size)
        else:
            rgba = rgba.convert("RGB").resize(size, Image.Resampling.BILINEAR).convert("RGBA")
    grey = np.asarray(flatten_rgba(rgba, options.background), dtype=np.uint8)
    box = trim_box(grey) if decoded.trim else None
    if box is None:
        box = (0.0, 0.0, float(grey.shape[1]), float(grey.shape[0]))
    return DecodedView(rgba, grey, box, decoded.size, decoded.lossless)


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


def loaded_orientation(im: Image.Image) -> int:
    """:func:`exif_orientation` of an image opened here and loaded, without parsing for nothing.

    With the fast path on, an image with nothing that can carry an orientation
    is 1 without building an ``Exif`` (``_pillow_fast.no_orientation_source``).
    """
    if _pillow_fast.ENABLED and _pillow_fast.no_orientation_source(im):
        return 1
    return exif_orientation(im)


def exif_orientation(im: Image.Image) -> int:
    """The EXIF orientation of ``im`` (1: none, or a broken EXIF block)."""
    try:
        value = im.getexif().get(_ORIENTATION_TAG, 1)
    except Exception:  # a broken EXIF block must not fail an otherwise fine image
        return 1
    return value if isinstance(value, int) else 1
