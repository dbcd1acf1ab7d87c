"""The one home of Pillow's private API: the decode fast path of :mod:`leakaudit.loading`,
on only where it was tested (Pillow 10.4 to 13.x) and unless ``LEAKAUDIT_PILLOW_FAST=0``.

With the fast path off, :mod:`leakaudit.loading` decodes through Pillow's public API
alone (``Image.open``, ``draft``, ``load``, ``convert``, ``reduce``, ``paste``,
``getexif``, ``tobytes``) and gives the same pixels, hashes and failures; only the
decode is slower (about 1.8x for a small JPEG or PNG: ``docs/install.md``, "Pillow's
fast path"). What the fast path does:

- Image cores (``im.im``) are passed around and pasted into one canvas per size
  instead of wrapping each in an ``Image`` (``paste_core``, ``core_of``,
  ``plain_grey_core``).
- JPEGs and PNGs that start with the same header bytes as the last plain one Pillow
  opened (the files of one dataset usually do) are decoded by the same decoder call
  (``Image._getdecoder`` on a ``PIL._imaging`` core) without ``Image.open`` parsing
  the header again (``decode_jpeg_l``, ``decode_png``). Whether a header is plain
  reads ``im.tile`` and ``im._exif``.
- An opened image's orientation is 1 without building an ``Exif`` when nothing in it
  can carry one (``no_orientation_source``, which reads ``im._exif``).

The switch is read once, at import: ``LEAKAUDIT_PILLOW_FAST=0`` (or ``false``, ``no``,
``off``) turns the fast path off; so does a Pillow outside the tested range or one
lacking the private names used here, with no error. :data:`STATUS` says which.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import PIL
from PIL import Image, ImageFile

__all__ = [
    "ENABLED",
    "STATUS",
    "TESTED_FLOOR",
    "TESTED_MAJOR",
    "KnownJpeg",
    "KnownPng",
    "core_of",
    "decode_jpeg_l",
    "decode_png",
    "known_headers",
    "no_orientation_source",
    "paste_core",
    "pillow_tested",
    "plain_grey_core",
    "plain_jpeg_header",
    "plain_png_header",
    "png_data_offset",
    "remember_header",
    "still_valid",
]

#: The oldest Pillow the fast path was tested on: the floor of ``pyproject.toml``.
TESTED_FLOOR: Final = (10, 4)
#: The newest Pillow major version the fast path was tested on (13.0 in session 12).
TESTED_MAJOR: Final = 13


def pillow_tested(version: str) -> bool:
    """Whether a Pillow ``version`` is in the tested range: ``TESTED_FLOOR`` to ``TESTED_MAJOR``.x.

    Examples
    --------
    >>> pillow_tested("10.4.0"), pillow_tested("13.0.0"), pillow_tested("11.3.0.dev0")
    (True, True, True)
    >>> pillow_tested("10.3.0"), pillow_tested("14.0.0"), pillow_tested("unknown")
    (False, False, False)
    """
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        return False
    major, minor = int(found[1]), int(found[2])
    return (major, minor) >= TESTED_FLOOR and major <= TESTED_MAJOR


def _status() -> str:
    """Why the fast path is on or off (:data:`STATUS`)."""
    switch = os.environ.get("LEAKAUDIT_PILLOW_FAST", "").strip().lower()
    if switch in ("0", "false", "no", "off"):
        return f"off: LEAKAUDIT_PILLOW_FAST={switch}"
    version = PIL.__version__
    if not pillow_tested(version):
        floor = ".".join(map(str, TESTED_FLOOR))
        return f"off: Pillow {version} is outside the tested range {floor} to {TESTED_MAJOR}.x"
    if _imaging is None or not hasattr(_imaging, "new") or not hasattr(Image, "_getdecoder"):
        return f"off: Pillow {version} lacks PIL._imaging.new or Image._getdecoder"
    return f"on: Pillow {version}"


try:
    from PIL import _imaging
except ImportError:  # pragma: no cover - every Pillow build has it today
    _imaging = None  # type: ignore[assignment]

#: Why the fast path is on or off, e.g. ``"on: Pillow 13.0.0"`` or
#: ``"off: LEAKAUDIT_PILLOW_FAST=0"``; read once, at import.
STATUS: Final = _status()
#: Whether :mod:`leakaudit.loading` may call this module (its functions assume it is).
ENABLED: Final = STATUS.startswith("on")


# ------------------------------------------------------------------- image cores


def core_of(im: Image.Image) -> Any:
    """The core of a loaded image (``im.im``)."""
    return im.im


def paste_core(canvas: Image.Image, core: Any, box: tuple[int, int, int, int]) -> None:
    """Paste an "L" core into an "L" canvas at ``box``: a memcpy, no ``Image`` wrapper."""
    canvas.im.paste(core, box)


def plain_grey_core(im: Image.Image) -> Any:
    """The "L" core of a loaded image that needs no flattening (L or RGB), else None.

    What ``loading._plain_grey`` returns for these, without the wrapping Image:
    an "L" image without transparency is itself, an RGB one is ``convert("L")``,
    which is this same core conversion (the dither argument only matters for
    modes "1" and "P").
    """
    if "transparency" in im.info:
        return None
    if im.mode == "L":
        return im.im
    if im.mode == "RGB":
        return im.im.convert("L", Image.Dither.FLOYDSTEINBERG)
    return None


def no_orientation_source(im: Image.Image) -> bool:
    """Whether an image opened and loaded here has nothing that can carry an orientation.

    ``getexif`` reads the orientation from ``info`` (EXIF bytes, a PNG's raw
    profile, XMP) or a TIFF's tags; an image with none of them has orientation
    1, which building an empty ``Exif`` to say so costs as much as copying its
    pixels.
    """
    info = im.info
    return (
        getattr(im, "_exif", None) is None
        and not hasattr(im, "tag_v2")
        and not info.get("exif")
        and not info.get("Raw profile type exif")
        and not info.get("XML:com.adobe.xmp")
        and not info.get("xmp")
    )


# ----------------------------------------------------------------- known headers

# A JPEG's header up to the end of its first scan header decides everything Pillow's
# ``Image.open`` does with it (JpegImagePlugin parses markers up to that scan, then
# stops; the MPO and EXIF checks read what it parsed), and a PNG's bytes before its
# first IDAT chunk do the same for PngImagePlugin. The files of one dataset often
# share those bytes exactly (one encoder, size and quality). So once Pillow has
# opened a header, decoded the file without a warning and found nothing in it that
# changes pixels or orientation, a file starting with the same bytes is decoded by
# the same decoder call directly, without Pillow parsing the header again in Python:
# about a third of the time of a small file. The last header of each format is kept.


class KnownJpeg(NamedTuple):
    """A JPEG header Pillow opened as a plain JPEG: the bytes, the size it declares."""

    header: bytes
    size: tuple[int, int]
    #: ``Image.MAX_IMAGE_PIXELS`` then (``Image.open`` warns or refuses by it).
    max_image_pixels: int | None


class KnownPng(NamedTuple):
    """The bytes before a plain PNG's first IDAT chunk, the size and mode they declare."""

    header: bytes
    size: tuple[int, int]
    mode: str  # "L" or "RGB", 8 bits, not interlaced, no transparency
    max_image_pixels: int | None


# The last known header of each format. Shared by the threads of a process and
# thread-safe by immutable replacement, without a lock: each value is an immutable
# NamedTuple of bytes, ints and str, bound in one assignment (atomic, also on
# free-threaded builds); readers take one reference to a local (known_headers) and
# check that their file starts with its bytes before using it. Two threads racing
# only replace each other's entry: a lost entry costs one ``Image.open``.
_known_jpeg: KnownJpeg | None = None
_known_png: KnownPng | None = None
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


def known_headers() -> tuple[KnownJpeg | None, KnownPng | None]:
    """The last plain JPEG and PNG headers remembered (one consistent read of each)."""
    return _known_jpeg, _known_png


def remember_header(header: KnownJpeg | KnownPng) -> None:
    """Keep ``header`` as the known one of its format (replacing the previous one)."""
    global _known_jpeg, _known_png
    if isinstance(header, KnownJpeg):
        _known_jpeg = header
    else:
        _known_png = header


def still_valid(known: KnownJpeg | KnownPng) -> bool:
    """Whether Pillow's settings are still those ``known`` was opened under."""
    return not ImageFile.LOAD_TRUNCATED_IMAGES and known.max_image_pixels == Image.MAX_IMAGE_PIXELS


def png_data_offset(im: ImageFile.ImageFile) -> int:
    """Where a PNG's first IDAT data starts, for 8 bits a sample (rawmode = mode); else 0."""
    tile = im.tile
    if im.format == "PNG" and len(tile) == 1 and tile[0][3] == im.mode:
        return int(tile[0][2])
    return 0


def plain_jpeg_header(
    im: Image.Image, data: bytes, size: tuple[int, int], walked: bytes | None
) -> KnownJpeg | None:
    """The header of a JPEG Pillow just decoded at "L", when it is a plain one.

    ``walked`` is the header the JPEG scan check walked last
    (``_jpegscan.last_jpeg_header``): up to the end of the first scan header.
    """
    if (
        walked is None
        or not data.startswith(walked)
        or im.format != "JPEG"
        or not _PLAIN_JPEG_INFO.issuperset(im.info)
        or getattr(im, "_exif", None) is not None
        or ImageFile.LOAD_TRUNCATED_IMAGES
    ):
        return None
    known = _known_jpeg
    if known is not None and known.header == walked:
        return None  # already known
    return KnownJpeg(walked, size, Image.MAX_IMAGE_PIXELS)


def plain_png_header(im: Image.Image, data: bytes, offset: int) -> KnownPng | None:
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
    return KnownPng(data[:start], im.size, im.mode, Image.MAX_IMAGE_PIXELS)


# ------------------------------------------------------------ the decoder calls


def decode_jpeg_l(data: bytes, size: tuple[int, int], scale: int) -> Any:
    """``ImageFile.load`` of a JPEG drafted to "L" at ``scale``: the core; None on any trouble.

    The decoder ``draft`` sets up, fed the file in ``ImageFile.MAXBLOCK`` pieces
    as ``ImageFile.load`` feeds it.
    """
    block = ImageFile.MAXBLOCK
    pieces = [data[first : first + block] for first in range(0, len(data), block)]
    return _decode_pieces("L", "jpeg", ("L", ""), (scale, 0), size, pieces)


def decode_png(data: bytes, start: int, known: KnownPng) -> Any:
    """``load()`` of a PNG with a known header as PngImagePlugin makes it, then to "L".

    The IDAT data from ``start`` is fed to the zip decoder chunk by chunk, in
    ``ImageFile.MAXBLOCK`` pieces; None unless every chunk from there is a whole
    IDAT followed by IEND alone, and on any decoder trouble.
    """
    pieces = _png_idat_pieces(data, start)
    if pieces is None:
        return None
    core = _decode_pieces(known.mode, "zip", known.mode, (), known.size, pieces)
    if core is None:
        return None
    if known.mode == "RGB":
        core = core.convert("L", Image.Dither.FLOYDSTEINBERG)  # plain_grey_core's conversion
    return core


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
        core = _imaging.new(mode, size)
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
