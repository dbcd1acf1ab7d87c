"""Decode for verification: one image as the judge sees it (:class:`View`) and its grids."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit._decode import symmetric_resize
from leakaudit._greyscale import flatten_rgba
from leakaudit._verify_candidates import CONTENT, CROP
from leakaudit._verify_options import GRAPHIC_SIDE
from leakaudit.errors import ImageLoadError
from leakaudit.hashing import (
    EXTRA_KINDS,
    EntryKind,
    bytes_digest,
    content_box,
    dihedral_orientations,
    image_digest,
    strip_boxes,
    strip_entries,
    turned_view,
    whole_and_crop_hashes,
    whole_hashes,
)
from leakaudit.loading import (
    DecodeOptions,
    DecodePurpose,
    decode_stored,
    decode_view,
    read_source,
    resolve_decode,
)

__all__ = [
    "CB",
    "CR",
    "GRID",
    "LUMA",
    "VIEW_SIDE",
    "View",
    "flattened",
    "fringe_masked_grid",
    "load_view",
    "turned_grid",
]

#: The colour thumbnail kept per image. Not measured on its own in RESULTS (§10: the
#: native check compares images up to this side; generated closure).
VIEW_SIDE = 48
#: The comparison grid. RESULTS §10 "Tried and not adopted": a 32 x 32 grid lost crop and
#: rotate recall on the generated closure's quick set. Generated data only.
GRID = 24
#: The grey image kept for local features (and the fine-detail rule, §19). Not measured
#: on its own in RESULTS.
_GEOMETRY_SIDE = 160
#: Decode reduced (JPEG draft) to about this on the short side. Not measured on its own
#: in RESULTS (the hashes' reduced decode, §1, is a separate setting).
_DECODE_SIDE = 96
#: The verifier's decode: colour, reduced towards :data:`_DECODE_SIDE`.
_VIEW_DECODE = DecodePurpose(colour=True, side=_DECODE_SIDE)


@dataclass
class View:
    """What verification keeps of one image.

    Attributes
    ----------
    rgba : PIL.Image.Image
        The trimmed image as it is (upright), RGBA, 48 x 48.
    grey : numpy.ndarray of uint8
        The trimmed grey image, longer side <= 160, for local features (photos
        only: empty for a graphic).
    entries : numpy.ndarray of uint64, shape (k, 2)
        Its whole, crop and rotation entries, as the hashes index them.
    kinds : numpy.ndarray of int8
        The kind of each entry.
    digest : int
        BLAKE2b-64 of the encoded bytes (of mode, size and pixels for a PIL image).
    has_alpha : bool
        Some pixel is not fully opaque.
    grid : numpy.ndarray of float32, shape (24, 24, 4)
        The whole view on the comparison grid.
    regions : dict
        ``{(CONTENT, 0): grid}``: the content inside a uniform background on the
        comparison grid, when there is such a background.
    full_grid : numpy.ndarray of float32 or None
        The untrimmed image on the comparison grid, when the trim cut
        something (None otherwise): the trim of a small graphic and of its
        copy flattened onto another colour can differ.
    border : numpy.ndarray of float32, shape (3,)
        Median colour of the outermost pixels before trimming: what an opaque
        copy of a transparent image was flattened onto.
    graphic : bool
        Transparent, or under :data:`GRAPHIC_SIDE` pixels on its shorter side:
        icons, sprites and thumbnails, checked more strictly.
    binary_alpha : bool
        Transparent with 1-bit transparency only (every pixel fully opaque or
        fully transparent, as GIF and PNG-8 store it).
    hardened_grids : list of numpy.ndarray of float32
        For soft transparency: the grid again with the alpha made 1-bit at
        :data:`_HARDENING_LEVELS` (a copy saved as GIF turns the anti-aliased
        fringe fully opaque or fully transparent, by the encoder's rule).
    native_side : int
        The trimmed image's shorter side in the file's own pixels (0 unknown).
    native : PIL.Image.Image or None
        The trimmed image at its decoded size when neither side exceeds 48
        pixels (None otherwise): the native check compares small graphics on
        their own pixels, not on the 48 x 48 view resampled back.
    lossless : bool
        The pixels are as the file stores them without loss: PNG, BMP, PPM,
        TGA, an uncompressed or losslessly compressed TIFF, or an image given
        in memory; not JPEG, WebP, GIF or any palette image (quantised). Only
        such images are told apart at native resolution
        (:func:`distinct_pixel_count`).
    native_size : tuple of int
        The trimmed image's (width, height) in the file's own pixels ((0, 0) unknown).
    self_turn_detail : float or None
        Kept by the judge once measured: how well the image's fine detail agrees with
        its own turns (negative: nothing finer than the grid; None: not measured).
    strip_rgba : PIL.Image.Image or None
        An image with strip entries (:func:`leakaudit.hashing.strip_boxes`: wide or
        tall): the trimmed image at its own aspect, :data:`VIEW_SIDE` pixels on its
        shorter side, where a strip match is found (None for other images).
    strip_grey : numpy.ndarray of uint8
        Such an image's grey, at most :data:`_GEOMETRY_SIDE` on its shorter side
        (photos only; empty otherwise): the fine-detail rule of a strip match.
    own : PIL.Image.Image or None
        The trimmed image at the file's own pixels, for a lossless image with
        transparency (a sprite, an icon) decoded unreduced and at most
        :data:`_DECODE_SIDE` pixels on its longer side (None otherwise): two such
        images of one size are compared pixel for pixel
        (:mod:`leakaudit._verify_native`), where a moved limb or a changed emblem
        is evidence, there being no re-encoding noise to allow for.
    reencoded_noise : tuple of float or None
        Kept by the judge once measured: the colour difference and the changed share between
        this small image and its own JPEG q50 copy (the noise a lossy copy of it may carry;
        None: not measured).
    content_box : tuple of float or None
        The content inside uniform backgrounds (:func:`leakaudit.hashing.content_box`) as
        shares ``(left, top, right, bottom)`` of the trimmed image, when there is such a
        background (None otherwise): a frame the registration step may align
        (:mod:`leakaudit._verify_align`).
    content_rgba : PIL.Image.Image or None
        That content cut from the decoded image (finer than the 48 x 48 view of the whole:
        a letterboxed strip is a few of its rows) at 48 x 48, RGBA (None without a box).
    """

    rgba: Image.Image
    grey: NDArray[np.uint8]
    entries: NDArray[np.uint64]
    kinds: NDArray[np.int8]
    digest: int
    has_alpha: bool
    grid: NDArray[np.float32] = field(default_factory=lambda: np.zeros((0, 0, 4), np.float32))
    graphic: bool = False
    full_grid: NDArray[np.float32] | None = None
    border: NDArray[np.float32] = field(default_factory=lambda: np.full(3, 255.0, np.float32))
    regions: dict[tuple[int, int], NDArray[np.float32]] = field(default_factory=dict)
    binary_alpha: bool = False
    hardened_grids: list[NDArray[np.float32]] = field(default_factory=list)
    native_side: int = 0
    lossless: bool = False
    native: Image.Image | None = None
    native_size: tuple[int, int] = (0, 0)
    self_turn_detail: float | None = None
    strip_rgba: Image.Image | None = None
    strip_grey: NDArray[np.uint8] = field(default_factory=lambda: np.zeros((0, 0), np.uint8))
    reencoded_noise: tuple[float, float] | None = None
    content_box: tuple[float, float, float, float] | None = None
    content_rgba: Image.Image | None = None
    own: Image.Image | None = None


#: Alpha levels at or above which a soft edge is taken as opaque when the other image of
#: a pair has 1-bit transparency: any coverage (Pillow's GIF writer keeps most of the
#: fringe), and half (the usual threshold of other encoders).
#: RESULTS §10 session 6, "GIF copies of soft-edged graphics": format 93.0 -> 95.9% on the
#: generated closure, precision unchanged. Generated data only.
_HARDENING_LEVELS = (1, 128)


def _hardened_grids(region: Image.Image) -> list[NDArray[np.float32]]:
    """The region's comparison grids with its alpha made 1-bit at each hardening level."""
    alpha = np.asarray(region.getchannel("A"))
    grids = []
    for level in _HARDENING_LEVELS:
        hard = region.copy()
        hard.putalpha(Image.fromarray(np.where(alpha >= level, 255, 0).astype(np.uint8)))
        grids.append(_view_and_grid(hard)[1])
    return grids


def fringe_masked_grid(soft: View, binary: View) -> NDArray[np.float32] | None:
    """``soft``'s grid with the fringe of its alpha made 1-bit by ``binary``'s mask.

    A copy saved with 1-bit transparency (GIF, PNG-8) keeps each pixel of the soft
    fringe (0 < alpha < 255) fully opaque, with its colour as it was, or fully
    transparent: which, is the encoder's rule (Pillow's GIF writer keeps most of it,
    dropping the pixels whose colour lands on the transparent palette entry), so no
    fixed level (:data:`_HARDENING_LEVELS`) reproduces it. The copy's own mask says
    which: ``soft`` re-made with that mask on its fringe is the copy, while its
    fully opaque and fully transparent pixels keep theirs (another pose or outline
    still differs). At 32 px the fringe of a soft sprite can be half its pixels,
    and the copy's dark halo of once nearly transparent pixels half its changes.

    On the two images' own pixels when both are small enough to be kept
    (:attr:`View.native`) and of one size; else on their 48 px views. None when
    ``soft`` has no soft alpha or ``binary`` none at all.
    """
    if not soft.has_alpha or soft.binary_alpha or not binary.binary_alpha:
        return None
    own, other = soft.rgba, binary.rgba
    first, second = soft.native, binary.native
    if first is not None and second is not None and first.size == second.size:
        own, other = first, second
    pixels = np.array(own.convert("RGBA"))
    mask = np.asarray(other.convert("RGBA"))[..., 3] >= 128
    return _view_and_grid(Image.fromarray(_fringe_masked(pixels, mask)))[1]


def _fringe_masked(pixels: NDArray[np.uint8], mask: NDArray[np.bool_]) -> NDArray[np.uint8]:
    alpha = pixels[..., 3]
    fringe = (alpha > 0) & (alpha < 255)
    pixels[..., 3] = np.where(fringe, np.where(mask, 255, 0), alpha).astype(np.uint8)
    return pixels


def _view_and_grid(region: Image.Image) -> tuple[Image.Image, NDArray[np.float32]]:
    """A region's 48 x 48 view and its comparison grid (the one way both are made)."""
    small = symmetric_resize(region, (VIEW_SIDE, VIEW_SIDE))
    grid = np.asarray(symmetric_resize(small, (GRID, GRID)), dtype=np.float32)
    return small, grid


def load_view(
    source: Any,
    name: str,
    decode: DecodeOptions | None = None,
    *,
    entries: tuple[NDArray[np.uint64], NDArray[np.int8]] | None = None,
) -> View:
    """Decode one image for verification (colour, alpha, trimmed, canonical orientation).

    Parameters
    ----------
    source : path, bytes or PIL image
    name : str
        The name used in messages.
    decode : DecodeOptions, optional
        The decoding the hashes used.
    entries : tuple, optional
        ``(hashes, kinds)``: the row's entries as the hash table holds them
        (``hashes`` shape (k, 2), pHash and dHash; ``kinds`` as
        :class:`leakaudit.hashing.EntryKind`), crop and rotation entries
        included. They are used as they are instead of being hashed again, so
        the check aligns on exactly the entries that proposed the pair.

    Raises
    ------
    ImageLoadError
        The image cannot be read.
    """
    options = resolve_decode(decode)
    if isinstance(source, Image.Image):
        data: bytes | Image.Image = source
        digest = image_digest(source)
    else:
        name, data = read_source(source, name, options)
        digest = bytes_digest(data)
    try:
        with warnings.catch_warnings():
            # Our own limits (checked by decode_stored) replace Pillow's warning.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            decoded = decode_stored(data, name, options, _VIEW_DECODE)
        # The hashes' decode (orientation, mode, trim rule), reduced for the view.
        view = decode_view(decoded, options, _DECODE_SIDE)
    except ImageLoadError:
        raise
    except Exception as exc:
        raise ImageLoadError(name, f"cannot decode for verification: {exc}") from exc
    rgba, grey, box, original_size, lossless = view
    if entries is not None and np.any(entries[1] == CROP):
        entry_hashes, kinds = np.asarray(entries[0], dtype=np.uint64), entries[1]
    else:
        entry_hashes, kinds = _entries_of(grey, box)
    content = content_box(grey, box)
    region = rgba.crop(tuple(round(v) for v in box))  # type: ignore[arg-type]
    region_alpha = np.asarray(region.getchannel("A"))
    has_alpha = bool(region_alpha.min() < 250)
    binary_alpha = has_alpha and bool(np.all((region_alpha == 0) | (region_alpha == 255)))
    graphic = has_alpha or min(original_size) < GRAPHIC_SIDE
    small, grid = _view_and_grid(region)
    # The trimmed box in the file's own pixels (the decode may have been reduced).
    to_native = min(original_size) / max(1, min(rgba.size))
    native_side = round(min(box[2] - box[0], box[3] - box[1]) * to_native)
    native_size = (round((box[2] - box[0]) * to_native), round((box[3] - box[1]) * to_native))
    # Only photos go on to local features (see compare_grids): graphics keep no grey image.
    geometry_grey = np.zeros((0, 0), dtype=np.uint8)
    if not graphic:
        grey_image = flatten_rgba(region, options.background)
        if max(grey_image.size) > _GEOMETRY_SIDE:
            grey_image.thumbnail((_GEOMETRY_SIDE, _GEOMETRY_SIDE), Image.Resampling.BILINEAR)
        geometry_grey = np.asarray(grey_image, dtype=np.uint8)
    strip_rgba, strip_grey = _strip_images(region, options, graphic)
    regions: dict[tuple[int, int], NDArray[np.float32]] = {}
    if content is not None:
        regions[(CONTENT, 0)] = np.asarray(
            symmetric_resize(rgba, (GRID, GRID), box=content), dtype=np.float32
        )
    return View(
        regions=regions,
        rgba=small,
        grey=geometry_grey,
        entries=entry_hashes,
        kinds=kinds,
        digest=digest,
        has_alpha=has_alpha,
        grid=grid,
        graphic=graphic,
        binary_alpha=binary_alpha,
        hardened_grids=_hardened_grids(region) if has_alpha and not binary_alpha else [],
        native_side=native_side,
        lossless=lossless,
        native=region if max(region.size) <= VIEW_SIDE else None,
        own=(
            region
            if lossless
            and has_alpha
            and region.size == native_size
            and max(region.size) <= _DECODE_SIDE
            else None
        ),
        native_size=native_size,
        strip_rgba=strip_rgba,
        strip_grey=strip_grey,
        content_box=None if content is None else _shares_of(content, box),
        content_rgba=(
            None if content is None else symmetric_resize(rgba, (VIEW_SIDE, VIEW_SIDE), box=content)
        ),
        border=_border_colour(np.asarray(rgba, dtype=np.float32)),
        full_grid=(
            None
            if box == (0.0, 0.0, float(grey.shape[1]), float(grey.shape[0]))
            else np.asarray(symmetric_resize(rgba, (GRID, GRID)), dtype=np.float32)
        ),
    )


def _shares_of(
    inner: tuple[float, float, float, float], outer: tuple[float, float, float, float]
) -> tuple[float, float, float, float]:
    """``inner`` as shares of ``outer`` (both ``(left, top, right, bottom)`` boxes), clipped."""
    width, height = max(outer[2] - outer[0], 1e-6), max(outer[3] - outer[1], 1e-6)
    left, top = (inner[0] - outer[0]) / width, (inner[1] - outer[1]) / height
    right, bottom = (inner[2] - outer[0]) / width, (inner[3] - outer[1]) / height
    return (
        min(max(left, 0.0), 1.0),
        min(max(top, 0.0), 1.0),
        min(max(right, 0.0), 1.0),
        min(max(bottom, 0.0), 1.0),
    )


def _strip_images(
    region: Image.Image, options: DecodeOptions, graphic: bool
) -> tuple[Image.Image | None, NDArray[np.uint8]]:
    """:attr:`View.strip_rgba` and :attr:`View.strip_grey` of a trimmed region."""
    no_grey = np.zeros((0, 0), dtype=np.uint8)
    width, height = region.size
    if not strip_boxes(width, height):
        return None, no_grey
    short = min(width, height)

    def at_short_side(image: Image.Image, side: int) -> Image.Image:
        scale = min(1.0, side / short)
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        return image if size == image.size else image.resize(size, Image.Resampling.BILINEAR)

    rgba = at_short_side(region, VIEW_SIDE)
    if graphic:
        return rgba, no_grey
    grey = at_short_side(flatten_rgba(region, options.background), _GEOMETRY_SIDE)
    return rgba, np.asarray(grey, dtype=np.uint8)


def _entries_of(
    grey: NDArray[np.uint8], box: tuple[float, float, float, float]
) -> tuple[NDArray[np.uint64], NDArray[np.int8]]:
    """A view's entries hashed from its grey image: canonical whole, as is, content,
    crops, rotations, strips (for images given without the table's entries)."""
    phash, dhash, ac, extra = whole_and_crop_hashes(grey, box)
    code = dihedral_orientations(ac)[0]
    whole = (phash, dhash) if code == 0 else whole_hashes(*turned_view(grey, box, code))[:2]
    strip_phash, strip_dhash = strip_entries(grey, box)
    kinds = np.array(
        [EntryKind.ORIENTATION, *EXTRA_KINDS, *[EntryKind.STRIP] * len(strip_phash)],
        dtype=np.int8,
    )
    strips = list(zip(strip_phash.tolist(), strip_dhash.tolist(), strict=True))
    return np.array([whole, (phash, dhash), *extra, *strips], dtype=np.uint64), kinds


def turned_grid(grid: NDArray[np.float32], code: int) -> NDArray[np.float32]:
    """A grid turned by a dihedral code (as :func:`leakaudit.hashing.turned_view`)."""
    if code & 1:
        grid = grid.transpose(1, 0, 2)
    if code & 2:
        grid = grid[:, ::-1]
    if code & 4:
        grid = grid[::-1]
    return grid


LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
CB = np.array([-0.168736, -0.331264, 0.5], dtype=np.float32)
CR = np.array([0.5, -0.418688, -0.081312], dtype=np.float32)


def flattened(grid: NDArray[np.float32], background: NDArray[np.float32]) -> NDArray[np.float32]:
    """RGB of a grid flattened onto ``background``, as (pixels, 3)."""
    flat = grid.reshape(-1, 4)
    if flat[:, 3].min() >= 255.0:  # opaque (most photos): the same values, 5x faster
        opaque: NDArray[np.float32] = flat[:, :3].copy()
        return opaque
    alpha = flat[:, 3:4] / 255.0
    rgb: NDArray[np.float32] = flat[:, :3] * alpha + background * (1.0 - alpha)
    return rgb


def _border_colour(grid: NDArray[np.float32]) -> NDArray[np.float32]:
    border = np.concatenate([grid[0, :, :3], grid[-1, :, :3], grid[:, 0, :3], grid[:, -1, :3]])
    colour: NDArray[np.float32] = np.median(border, axis=0).astype(np.float32)
    return colour
