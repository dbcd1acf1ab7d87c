"""Tests of leakaudit.loading: reduced decode, formats, orientation, alpha, bombs, failures."""

from __future__ import annotations

import io
import os
import warnings
import zlib
from pathlib import Path

import imagegen
import numpy as np
import PIL
import pytest
from PIL import Image, ImageFile

from leakaudit import _pillow_fast, loading
from leakaudit.errors import ImageLoadError
from leakaudit.hashing import hash_image
from leakaudit.loading import (
    DecodeOptions,
    grey_from_bytes,
    grey_from_pil,
    load_reduced_grey,
    reduction_scale,
)


def distance(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def hashes_close(a: object, b: object, *, phash: int = 0, dhash: int = 0) -> None:
    ha, hb = hash_image(a), hash_image(b)  # type: ignore[arg-type]
    assert distance(ha.phash, hb.phash) <= phash
    assert distance(ha.dhash, hb.dhash) <= dhash


@pytest.fixture(scope="module")
def photo() -> Image.Image:
    return imagegen.photo_like(1, (512, 384))


# --------------------------------------------------------------------- reduction


@pytest.mark.parametrize(
    ("size", "min_side", "expected"),
    [
        ((500, 375), 64, 4),
        ((1920, 1080), 64, 8),
        ((4000, 3000), 64, 8),
        ((255, 1000), 64, 2),
        ((127, 127), 64, 1),
        ((128, 128), 64, 2),
        ((64, 64), 64, 1),
        ((10, 10), 64, 1),
        ((5000, 5000), None, 1),
        ((500, 375), 16, 8),
    ],
)
def test_reduction_scale_is_largest_power_keeping_min_side(
    size: tuple[int, int], min_side: int | None, expected: int
) -> None:
    assert reduction_scale(*size, min_side) == expected


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "TIFF"])
def test_every_format_is_reduced_by_the_same_rule(fmt: str, photo: Image.Image) -> None:
    grey = load_reduced_grey(imagegen.encode(photo, fmt))
    assert grey.mode == "L"
    assert grey.size == (128, 96)
    full = load_reduced_grey(imagegen.encode(photo, fmt), decode=DecodeOptions(min_side=None))
    assert full.size == (512, 384)


def test_jpeg_and_png_reduce_to_the_same_size_when_not_divisible() -> None:
    # The partial last block is kept (ceil sizes, as libjpeg's DCT scaling gives)
    # and the hash box covers the original image: 263 / 2 x 199 / 2.
    photo = imagegen.photo_like(4, (263, 199))
    jpeg = load_reduced_grey(imagegen.encode(photo, "JPEG", quality=95))
    png = load_reduced_grey(imagegen.encode(photo, "PNG"))
    assert jpeg.size == png.size == (132, 100)
    for data in (imagegen.encode(photo, "JPEG", quality=95), imagegen.encode(photo, "PNG")):
        assert grey_from_bytes(data, "x", DecodeOptions()).box == (0, 0, 131.5, 99.5)
    assert grey_from_pil(photo, "x", DecodeOptions()).box == (0, 0, 131.5, 99.5)


@pytest.mark.parametrize(
    ("size", "box"),
    [
        ((512, 384), None),  # divisible: the whole reduced image
        ((500, 375), (0, 0, 125.0, 93.75)),
        ((1920, 1080), None),
        ((1917, 1077), (0, 0, 239.625, 134.625)),
        ((100, 100), None),  # no reduction
    ],
)
@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_hash_box_covers_exactly_the_original_image(
    size: tuple[int, int], box: tuple[float, ...] | None, fmt: str
) -> None:
    data = imagegen.encode(imagegen.photo_like(0, size), fmt)
    reduced = grey_from_bytes(data, "x", DecodeOptions())
    assert reduced.box == box
    scale = reduction_scale(*size, 64)
    assert reduced.pixels.shape == (-(-size[1] // scale), -(-size[0] // scale))


def test_partial_block_is_the_mean_of_the_pixels_there() -> None:
    arr = np.zeros((375, 500), dtype=np.uint8)
    arr[372:, :] = 200  # the 3 rows of the partial block
    arr[368:372, :] = 40
    grey = np.asarray(load_reduced_grey(Image.fromarray(arr)))
    assert grey.shape == (94, 125)
    assert (grey[-1] == 200).all() and (grey[-2] == 40).all()


def test_reduced_hashes_stay_close_to_the_full_decode() -> None:
    # Keeping the partial block by its true area, the reduced PNG hashes like the
    # full-size one. Measured on these 24 images: 2 pHash and 12 dHash bits moved
    # in all (most of them one 263 x 199 image whose dHash strip has near-equal
    # neighbours); cropping the block moved 34 and 23.
    phash_moves, dhash_moves = [], []
    for seed in range(8):
        for size in ((263, 199), (500, 375), (1917, 1077)):
            data = imagegen.encode(imagegen.photo_like(seed, size), "PNG")
            reduced = hash_image(data)
            full = hash_image(data, decode=DecodeOptions(min_side=None))
            phash_moves.append(distance(reduced.phash, full.phash))
            dhash_moves.append(distance(reduced.dhash, full.dhash))
    assert max(phash_moves) <= 2 and sum(phash_moves) <= 6
    assert sum(dhash_moves) <= 16


# ----------------------------------------------------------------------- formats


@pytest.mark.parametrize(
    ("fmt", "params", "mode", "tolerance"),
    [
        ("JPEG", {"quality": 90}, "RGB", 2),
        ("JPEG", {"quality": 90}, "L", 2),
        ("JPEG", {"quality": 90, "progressive": True}, "RGB", 2),
        ("JPEG", {"quality": 90}, "CMYK", 4),
        ("WEBP", {"quality": 90}, "RGB", 2),
        ("WEBP", {"lossless": True}, "RGB", 0),
        ("TIFF", {}, "RGB", 0),
        ("TIFF", {"compression": "tiff_lzw"}, "L", 0),
        ("BMP", {}, "RGB", 0),
        ("PNG", {}, "L", 0),
        ("PNG", {}, "P", 2),
        ("GIF", {}, "P", 4),
    ],
)
def test_formats_and_modes_hash_like_the_png_original(
    photo: Image.Image, fmt: str, params: dict[str, object], mode: str, tolerance: int
) -> None:
    data = imagegen.encode(photo.convert(mode), fmt, **params)
    assert Image.open(io.BytesIO(data)).mode == ("L" if fmt == "GIF" and mode == "L" else mode)
    hashes_close(imagegen.encode(photo, "PNG"), data, phash=tolerance, dhash=tolerance + 2)


@pytest.mark.parametrize("fmt", ["GIF", "WEBP"])
def test_animated_images_use_the_first_frame(fmt: str) -> None:
    frames = [imagegen.photo_like(seed, (120, 90)) for seed in (10, 11, 12)]
    data = imagegen.animated(frames, fmt)
    assert Image.open(io.BytesIO(data)).n_frames == 3
    animated, first, second = hash_image(data), hash_image(frames[0]), hash_image(frames[1])
    assert distance(animated.phash, first.phash) <= 4
    assert distance(animated.phash, second.phash) > 16


# ------------------------------------------------------------------- 16-bit grey


def _gradient(levels: float) -> np.ndarray:
    return np.tile(np.linspace(0.0, levels, 300), (200, 1))


@pytest.mark.parametrize("fmt", ["PNG", "TIFF"])
def test_16_bit_grey_hashes_like_its_8_bit_version(fmt: str) -> None:
    eight = Image.fromarray(np.rint(_gradient(255)).astype(np.uint8))
    sixteen = Image.fromarray(np.rint(_gradient(255) * 257).astype(np.uint16))
    data = imagegen.encode(sixteen, fmt)
    assert Image.open(io.BytesIO(data)).mode.startswith("I;16")
    ours, reference = hash_image(data), hash_image(eight)
    assert (ours.phash, ours.dhash) == (reference.phash, reference.dhash)
    assert not ours.low_information  # convert("L") would have clipped it to flat white
    grey = np.asarray(load_reduced_grey(data, decode=DecodeOptions(min_side=None)))
    assert grey.max() == 255 and grey.min() == 0


def test_16_bit_photo_is_not_clipped_to_white() -> None:
    photo = np.asarray(imagegen.photo_like(5, (200, 150), "L"), dtype=np.uint16) * 257
    data = imagegen.encode(Image.fromarray(photo), "PNG")
    hashes_close(data, imagegen.photo_like(5, (200, 150), "L"))


@pytest.mark.parametrize(
    ("array", "mode"),
    [
        (np.rint(_gradient(255) * 257).astype(np.int32), "I"),
        ((_gradient(255) / 255).astype(np.float32), "F"),
        (_gradient(255).astype(np.float32), "F"),
    ],
)
def test_wide_integer_and_float_grey_is_rescaled(array: np.ndarray, mode: str) -> None:
    image = Image.fromarray(array)
    assert image.mode == mode
    data = imagegen.encode(image, "TIFF")
    eight = Image.fromarray(np.rint(_gradient(255)).astype(np.uint8))
    hashes_close(data, eight)
    hashes_close(image, eight)


# ------------------------------------------------------------------- orientation


_STORED_FOR_DISPLAY = {  # the transpose that undoes each orientation's display transpose
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_90,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_270,
}


@pytest.mark.parametrize("transpose", list(Image.Transpose))
def test_array_transposes_are_pillow_transposes(transpose: Image.Transpose) -> None:
    from leakaudit.loading import _ARRAY_TRANSPOSE

    image = imagegen.photo_like(2, (23, 17), "L")
    expected = np.asarray(image.transpose(transpose))
    assert np.array_equal(_ARRAY_TRANSPOSE[transpose](np.asarray(image)), expected)


@pytest.mark.parametrize("orientation", range(2, 9))
@pytest.mark.parametrize("size", [(500, 375), (263, 199)])
def test_exif_oriented_png_decodes_to_exactly_the_upright_image(
    orientation: int, size: tuple[int, int]
) -> None:
    upright = imagegen.photo_like(3, size)
    exif = Image.Exif()
    exif[0x0112] = orientation
    stored = upright.transpose(_STORED_FOR_DISPLAY[orientation])
    data = imagegen.encode(stored, "PNG", exif=exif.tobytes())
    got = load_reduced_grey(data)
    expected = load_reduced_grey(imagegen.encode(upright, "PNG"))
    assert got.size == expected.size
    assert np.array_equal(np.asarray(got), np.asarray(expected))


@pytest.mark.parametrize("transpose", list(Image.Transpose))
def test_box_transposes_follow_the_array_transposes(transpose: Image.Transpose) -> None:
    from leakaudit.loading import _ARRAY_TRANSPOSE, _BOX_TRANSPOSE

    rng = np.random.default_rng(0)
    arr = rng.integers(0, 256, (17, 23), dtype=np.uint8)
    box = (3, 5, 20, 9)  # left, top, right, bottom
    moved = [int(v) for v in _BOX_TRANSPOSE[transpose](box, 23, 17)]
    cropped = arr[box[1] : box[3], box[0] : box[2]]
    expected = _ARRAY_TRANSPOSE[transpose](cropped)
    got = _ARRAY_TRANSPOSE[transpose](arr)[moved[1] : moved[3], moved[0] : moved[2]]
    assert np.array_equal(got, expected)


_PARTIAL_AT_LEFT_TOP = {
    2: (0.5, 0),
    3: (0.5, 0.5),
    4: (0, 0.5),
    5: (0, 0),
    6: (0.5, 0),
    7: (0.5, 0.5),
    8: (0, 0.5),
}


@pytest.mark.parametrize("orientation", range(2, 9))
def test_exif_oriented_jpeg_box_moves_with_the_partial_block(orientation: int) -> None:
    upright = imagegen.photo_like(3, (263, 199))
    exif = Image.Exif()
    exif[0x0112] = orientation
    stored = upright.transpose(_STORED_FOR_DISPLAY[orientation])
    data = imagegen.encode(stored, "JPEG", quality=95, exif=exif.tobytes())
    reduced = grey_from_bytes(data, "x", DecodeOptions())
    assert reduced.pixels.shape == (100, 132)
    left, top, right, bottom = reduced.box or (0, 0, 132, 100)
    assert (right - left, bottom - top) == (131.5, 99.5)  # the upright image's area
    # The partial block is at the stored right/bottom edge; the display transpose
    # takes it to the left edge (2: mirrored; 6: the stored bottom, rotated 90 degrees
    # clockwise), the top edge (4, 8), both (3, 7) or neither (5).
    assert (left, top) == _PARTIAL_AT_LEFT_TOP[orientation]
    ours = hash_image(data)
    reference = hash_image(imagegen.encode(upright, "JPEG", quality=95))
    assert distance(ours.phash, reference.phash) <= 3
    assert distance(ours.dhash, reference.dhash) <= 5


def test_exif_rotated_jpeg_hashes_like_the_upright_original(photo: Image.Image) -> None:
    rotated = imagegen.exif_oriented_jpeg(photo, 6, quality=90)
    assert Image.open(io.BytesIO(rotated)).size == (384, 512)  # stored sideways
    upright = imagegen.encode(photo, "JPEG", quality=90)
    ours, reference = hash_image(rotated), hash_image(upright)
    assert ours.phash == reference.phash
    assert distance(ours.dhash, reference.dhash) <= 1


def test_exif_transpose_false_hashes_the_stored_pixels(photo: Image.Image) -> None:
    rotated = imagegen.exif_oriented_jpeg(photo, 6, quality=90)
    raw = DecodeOptions(exif_transpose=False)
    assert load_reduced_grey(rotated, decode=raw).size == (96, 128)
    stored = photo.transpose(Image.Transpose.ROTATE_90)
    ours = hash_image(rotated, decode=raw)
    expected = hash_image(imagegen.encode(stored, "JPEG", quality=90))
    assert distance(ours.phash, expected.phash) <= 2
    assert distance(ours.phash, hash_image(photo).phash) > 10


# ---------------------------------------------------------------------- alpha


def test_icons_with_the_same_outline_do_not_collapse_together() -> None:
    first = imagegen.encode(imagegen.icon(0, 1), "PNG")
    second = imagegen.encode(imagegen.icon(0, 2), "PNG")
    a, b = hash_image(first), hash_image(second)
    assert distance(a.phash, b.phash) > 12
    assert distance(a.dhash, b.dhash) > 4


def test_pixels_hidden_under_full_transparency_never_reach_the_hash() -> None:
    icon = imagegen.icon(0, 1)
    other = np.asarray(icon).copy()
    other[other[..., 3] == 0, :3] = (7, 250, 3)
    a = hash_image(imagegen.encode(icon, "PNG"))
    b = hash_image(imagegen.encode(Image.fromarray(other), "PNG"))
    assert (a.phash, a.dhash) == (b.phash, b.dhash)


def test_alpha_is_flattened_onto_the_background() -> None:
    icon = imagegen.icon(0, 1)
    on_white = Image.new("RGB", icon.size, (255, 255, 255))
    on_white.paste(icon, (0, 0), icon)
    grey = np.asarray(load_reduced_grey(icon), dtype=int)
    expected = np.asarray(on_white.convert("L"), dtype=int)
    assert np.abs(grey - expected).max() <= 1
    black = load_reduced_grey(icon, decode=DecodeOptions(background=(0, 0, 0)))
    assert np.asarray(black)[0, 0] == 0 and grey[0, 0] == 255


@pytest.mark.parametrize("mode", ["LA", "PA", "RGBa", "La"])
def test_other_alpha_modes_are_flattened(mode: str) -> None:
    icon = imagegen.icon(0, 1)
    # Pillow's RGBA -> La conversion loses alpha; go through straight LA first.
    converted = icon.convert("LA").convert(mode) if mode == "La" else icon.convert(mode)
    if np.asarray(converted.split()[-1]).min() == 255:  # its alpha band
        pytest.skip(f"this Pillow ({PIL.__version__}) drops the alpha converting to {mode}")
    grey = np.asarray(load_reduced_grey(converted), dtype=int)
    assert grey[0, 0] == 255  # transparent corner shows the background
    reference = np.asarray(load_reduced_grey(icon), dtype=int)
    assert np.abs(grey - reference).mean() < 3


@pytest.mark.parametrize("fmt", ["PNG", "GIF"])
def test_palette_transparency_is_flattened(fmt: str) -> None:
    icon = imagegen.icon(0, 1)
    palette = icon.convert("RGB").quantize(64)
    alpha = np.asarray(icon)[..., 3]
    indices = np.asarray(palette).copy()
    indices[alpha == 0] = 255  # a palette slot used only for transparency
    image = Image.fromarray(indices, mode="P")
    colours = palette.getpalette() or []
    image.putpalette(colours + [0] * (768 - len(colours)))
    data = imagegen.encode(image, fmt, transparency=255)
    opened = Image.open(io.BytesIO(data))
    assert "transparency" in opened.info
    grey = np.asarray(load_reduced_grey(data), dtype=int)
    assert grey[0, 0] == 255 and grey[-1, -1] == 255


def test_grey_png_with_transparent_colour_is_flattened() -> None:
    arr = np.full((80, 80), 0, dtype=np.uint8)
    arr[20:60, 20:60] = 100
    data = imagegen.encode(Image.fromarray(arr), "PNG", transparency=0)
    grey = np.asarray(load_reduced_grey(data))
    assert grey[0, 0] == 255 and grey[40, 40] == 100


# --------------------------------------------------------------- PIL image input


def test_pil_input_is_not_modified(photo: Image.Image) -> None:
    before = photo.copy()
    load_reduced_grey(photo)
    hash_image(photo)
    assert photo.mode == "RGB" and photo.tobytes() == before.tobytes()


def test_pil_input_hashes_like_its_png(photo: Image.Image) -> None:
    hashes_close(photo, imagegen.encode(photo, "PNG"))


# ---------------------------------------------------------------------- failures


def _reason(source: object, options: DecodeOptions | None = None) -> str:
    with pytest.raises(ImageLoadError) as info:
        load_reduced_grey(source, decode=options or DecodeOptions())  # type: ignore[arg-type]
    assert isinstance(info.value, OSError)
    return info.value.reason


def test_decompression_bomb_is_refused_from_the_header_alone(tmp_path: Path) -> None:
    limit = Image.MAX_IMAGE_PIXELS
    bomb = imagegen.bomb_png(100_000, 100_000)
    assert len(bomb) < 200
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reason = _reason(bomb)
    assert reason.startswith("decompression bomb: declared 100000x100000")
    path = tmp_path / "bomb.png"
    path.write_bytes(bomb)
    with pytest.raises(ImageLoadError) as info:
        load_reduced_grey(path)
    assert info.value.path == str(path)
    assert limit == Image.MAX_IMAGE_PIXELS


def test_bomb_between_pillow_limits_is_refused_without_a_pillow_warning() -> None:
    bomb = imagegen.bomb_png(15_000, 15_000)  # above MAX_IMAGE_PIXELS, below twice it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reason = _reason(bomb)
    assert reason.startswith("decompression bomb: declared 15000x15000")


def test_max_pixels_option_applies_to_ordinary_images(photo: Image.Image) -> None:
    data = imagegen.encode(photo, "JPEG")
    reason = _reason(data, DecodeOptions(max_pixels=100_000))
    assert reason.startswith("decompression bomb: declared 512x384")
    assert _reason(photo, DecodeOptions(max_pixels=100_000)).startswith("decompression bomb")


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_truncated_images_are_failures(fmt: str, photo: Image.Image) -> None:
    data = imagegen.truncated(imagegen.encode(photo, fmt), 0.6)
    assert _reason(data) == "truncated image"
    assert _reason(data, DecodeOptions(min_side=None)) == "truncated image"


def test_unreadable_sources_give_reasons(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    text = tmp_path / "notes.png"
    text.write_text("this is not an image\n")
    assert _reason(empty) == "empty file (0 bytes)"
    assert _reason(text) == "not a recognised image format"
    assert _reason(tmp_path) == "is a directory"
    assert _reason(tmp_path / "missing.png") == "file not found"
    assert _reason(b"") == "empty file (0 bytes)"


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can read any file"
)
def test_permission_denied_is_a_failure(tmp_path: Path, photo: Image.Image) -> None:
    path = tmp_path / "secret.png"
    path.write_bytes(imagegen.encode(photo, "PNG"))
    path.chmod(0)
    try:
        assert _reason(path) == "permission denied"
    finally:
        path.chmod(0o644)


def test_bad_source_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="source must be a path, bytes or a PIL image"):
        load_reduced_grey(123)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"min_side": 0}, ValueError, r"min_side must be an int >= 1; got 0\."),
        ({"min_side": 2.5}, TypeError, r"min_side must be an int >= 1; got 2\.5\."),
        ({"background": (0, 0)}, ValueError, r"background must be a tuple of 3 ints"),
        ({"background": (0, 0, 256)}, ValueError, r"background must be a tuple of 3 ints"),
        ({"max_pixels": 0}, ValueError, r"max_pixels must be an int >= 1; got 0\."),
        ({"exif_transpose": "yes"}, TypeError, r"exif_transpose must be a bool"),
    ],
)
def test_decode_options_are_validated(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        DecodeOptions(**kwargs)  # type: ignore[arg-type]


# ------------------------------------------ JPEGs whose header Pillow has already read


#: The known-header decode is the fast path's (leakaudit._pillow_fast); with it off
#: (LEAKAUDIT_PILLOW_FAST=0, CI's second run) every file goes through Image.open.
needs_fast_path = pytest.mark.skipif(not _pillow_fast.ENABLED, reason=_pillow_fast.STATUS)


def _same_header_jpegs(size: tuple[int, int], quality: int) -> list[bytes]:
    """Good JPEGs of one encoder, size and quality (one header), and broken copies of them."""
    photos = [imagegen.photo_like(seed, size) for seed in range(4)]
    good = [imagegen.encode(photo, "JPEG", quality=quality) for photo in photos]
    rng = np.random.default_rng(sum(size) + quality)
    files: list[bytes] = []
    for data in good:
        files.append(data)
        end = len(data)
        flipped = bytearray(data)
        for position in rng.integers(end // 2, end - 2, 3).tolist():
            flipped[position] ^= 0xFF
        files += [
            data[: int(end * 0.7)],  # cut short
            data[: int(end * 0.7)] + b"\xff\xd9",  # cut short, then an end-of-image marker
            bytes(flipped),  # corrupt entropy-coded data
            data + b"trailing junk",
            data,
        ]
    return files


def _general_path(data: bytes, options: DecodeOptions) -> tuple[object, ...] | str:
    _pillow_fast._known_jpeg = None  # forget the header: Pillow opens this file itself
    return _outcome(data, options)


def _outcome(data: bytes, options: DecodeOptions) -> tuple[object, ...] | str:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (result,), notes = loading.greys_and_notes([data], ["x.jpg"], options)
    if isinstance(result, str):
        return result
    pixels, box = result
    return pixels.shape, pixels.tobytes(), box, notes, [str(w.message) for w in caught]


@needs_fast_path
@pytest.mark.parametrize(
    ("size", "quality", "options"),
    [
        ((64, 64), 90, DecodeOptions()),
        ((500, 375), 94, DecodeOptions()),
        ((333, 211), 70, DecodeOptions()),
        ((333, 211), 70, DecodeOptions(min_side=None)),
        ((640, 480), 85, DecodeOptions(min_side=16, trim_borders=False)),
    ],
)
def test_known_jpeg_header_decodes_as_pillow_does(
    size: tuple[int, int], quality: int, options: DecodeOptions
) -> None:
    files = _same_header_jpegs(size, quality)
    expected = [_general_path(data, options) for data in files]
    _pillow_fast._known_jpeg = None
    got = [_outcome(data, options) for data in files]  # from the second file on: known
    known = _pillow_fast._known_jpeg
    assert known is not None and files[1].startswith(known.header)
    assert got == expected
    assert any(isinstance(outcome, str) for outcome in expected)  # failures were tried too


@needs_fast_path
def test_known_jpeg_header_is_only_a_plain_one(photo: Image.Image) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6
    oriented = imagegen.encode(photo, "JPEG", exif=exif.tobytes())
    _pillow_fast._known_jpeg = None
    first = _outcome(oriented, DecodeOptions())
    assert _pillow_fast._known_jpeg is None  # EXIF: every file of it goes through Pillow
    assert _outcome(oriented, DecodeOptions()) == first
    plain = imagegen.encode(photo, "JPEG")
    _outcome(plain, DecodeOptions())
    assert _pillow_fast._known_jpeg is not None


def test_known_jpeg_header_respects_pillow_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    files = _same_header_jpegs((64, 64), 80)
    options = DecodeOptions()
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    expected = [_general_path(data, options) for data in files]
    _pillow_fast._known_jpeg = None
    assert [_outcome(data, options) for data in files] == expected


def _png(chunks: list[tuple[bytes, bytes]]) -> bytes:
    out = b"\x89PNG\r\n\x1a\n"
    for kind, payload in chunks:
        body = kind + payload
        out += len(payload).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")
    return out


def _same_header_pngs(mode: str, size: tuple[int, int]) -> list[bytes]:
    """Good PNGs of one header (Pillow's encoder, one size and mode), and altered copies."""
    exif = Image.Exif()
    exif[0x0112] = 6
    files: list[bytes] = []
    for seed in range(3):
        data = imagegen.encode(imagegen.photo_like(seed, size).convert(mode), "PNG")
        header = data[8:33]  # the IHDR chunk
        ihdr = header[8:21]
        idat = data[41:-16]  # Pillow writes one IDAT chunk, then IEND
        assert header[4:8] == b"IHDR" and data[37:41] == b"IDAT"
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x5A
        files += [
            data,
            data[: len(data) * 2 // 3],  # cut short
            _png([(b"IHDR", ihdr), (b"IDAT", idat[:9]), (b"IDAT", b""), (b"IDAT", idat[9:])])
            + _png([(b"IEND", b"")])[8:],  # the data in three chunks
            _png([(b"IHDR", ihdr), (b"IDAT", idat), (b"eXIf", exif.tobytes()), (b"IEND", b"")]),
            _png([(b"IHDR", ihdr), (b"IDAT", idat), (b"tEXt", b"Title\x00hi"), (b"IEND", b"")]),
            _png([(b"IHDR", ihdr), (b"IDAT", idat)]),  # no IEND
            _png([(b"IHDR", ihdr), (b"IDAT", idat[:-4]), (b"IEND", b"")]),  # data ends early
            bytes(flipped),
            data + b"after the end",
            data,
        ]
    return files


@needs_fast_path
@pytest.mark.parametrize(
    ("mode", "size", "options"),
    [
        ("RGB", (32, 32), DecodeOptions()),
        ("L", (32, 32), DecodeOptions()),
        ("RGB", (60, 41), DecodeOptions(trim_borders=False, exif_transpose=False)),
        ("RGB", (300, 200), DecodeOptions()),  # reduced: always the general path
        ("RGB", (300, 200), DecodeOptions(min_side=None)),
    ],
)
def test_known_png_header_decodes_as_pillow_does(
    mode: str, size: tuple[int, int], options: DecodeOptions
) -> None:
    files = _same_header_pngs(mode, size)
    _pillow_fast._known_png = None
    expected = []
    for data in files:
        _pillow_fast._known_png = None
        expected.append(_outcome(data, options))
    _pillow_fast._known_png = None
    got = [_outcome(data, options) for data in files]
    if reduction_scale(*size, options.min_side) == 1:
        known = _pillow_fast._known_png
        assert known is not None and files[1].startswith(known.header)
    assert got == expected
    assert any(isinstance(outcome, str) for outcome in expected)


@needs_fast_path
def test_known_png_header_is_only_a_plain_one() -> None:
    low_bits = imagegen.encode(imagegen.photo_like(1, (32, 32)).convert("L"), "PNG", bits=2)
    if low_bits[24] != 2:  # the IHDR's bit depth
        pytest.skip(f"this Pillow ({PIL.__version__}) writes no 2-bit PNG")
    palette = imagegen.encode(imagegen.photo_like(1, (32, 32)).convert("P"), "PNG")
    for data in (low_bits, palette):
        _pillow_fast._known_png = None
        _outcome(data, DecodeOptions())
        assert _pillow_fast._known_png is None


def test_loading_and_the_modules_split_from_it_stay_small() -> None:
    """Issue 26: no module over ~1,200 lines (loading.py was 1,864 before its split)."""
    package = Path(loading.__file__).parent
    sizes = {
        name: len((package / name).read_text(encoding="utf-8").splitlines())
        for name in (
            "loading.py",
            "_decode.py",
            "_pillow_fast.py",
            "_trim.py",
            "_greyscale.py",
            "_jpegscan.py",
        )
    }
    assert max(sizes.values()) <= 1200, sizes
