"""Issue 26.1: "decode as the hash saw it" has one home (``leakaudit._decode``), used by the
hashes' decode (``loading``) and the verifier's (``_verify_view.load_view``)."""

from __future__ import annotations

import ast
from pathlib import Path

import imagegen
import pytest
from PIL import Image

from leakaudit import loading
from leakaudit.errors import ImageLoadError
from leakaudit.loading import DecodeOptions, DecodePurpose, decode_stored, grey_from_bytes
from leakaudit.verify import load_view

VIEW = DecodePurpose(colour=True, side=96)


def _hash_reason(source: bytes | Image.Image, options: DecodeOptions) -> str:
    with pytest.raises(ImageLoadError) as caught:
        if isinstance(source, Image.Image):
            loading.grey_from_pil(source, "x", options)
        else:
            grey_from_bytes(source, "x", options)
    return caught.value.reason


def test_the_verifier_refuses_a_jpeg_cut_short_as_the_hashes_do() -> None:
    """A JPEG whose scans end early (then an end-of-image marker): libjpeg fills it with grey.

    The hashes refused it; the verifier's own decode used to give a view of it.
    """
    data = imagegen.encode(imagegen.photo_like(4, (320, 240)), "JPEG", quality=90)
    cut = data[: data.index(b"\xff\xda") + 40] + b"\xff\xd9"  # 40 bytes of its scan
    assert _hash_reason(cut, DecodeOptions()) == "truncated image"
    with pytest.raises(ImageLoadError) as caught:
        load_view(cut, "cut.jpg")
    assert caught.value.reason == "truncated image"


def test_the_verifier_checks_an_in_memory_image_against_max_pixels_as_the_hashes_do() -> None:
    image = imagegen.photo_like(2, (200, 150))
    options = DecodeOptions(max_pixels=10_000)
    reason = _hash_reason(image, options)
    assert reason.startswith("decompression bomb: declared 200x150")
    with pytest.raises(ImageLoadError) as caught:
        load_view(image, "x", options)
    assert caught.value.reason == reason


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_both_purposes_read_one_orientation_and_one_trim_rule(fmt: str) -> None:
    upright = imagegen.photo_like(5, (300, 200))
    data = imagegen.exif_oriented_jpeg(upright, 6, fmt)
    hashes = decode_stored(data, "x", DecodeOptions())
    view = decode_stored(data, "x", DecodeOptions(), VIEW)
    assert hashes.orientation == view.orientation == 6
    assert hashes.size == view.size == (200, 300)  # as stored
    assert hashes.trim is view.trim is True
    small = decode_stored(imagegen.encode(upright.resize((100, 80)), fmt), "x", DecodeOptions())
    assert small.trim is False  # under TRIM_MIN_IMAGE_SIDE, for both
    # The view is upright: its native size is the displayed one.
    assert load_view(data, "x").native_size == (300, 200)
    off = DecodeOptions(exif_transpose=False)
    assert decode_stored(data, "x", off, VIEW).orientation == 1
    assert load_view(data, "x", off).native_size == (200, 300)


def test_the_verifier_has_no_decode_of_its_own() -> None:
    """Opening, drafting, orienting, converting and trimming are the loading layer's."""
    source = Path(__file__).resolve().parents[1] / "leakaudit" / "_verify_view.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    own = {
        name
        for node in ast.walk(tree)
        for name in (
            [node.attr]
            if isinstance(node, ast.Attribute)
            else [node.id]
            if isinstance(node, ast.Name)
            else []
        )
    }
    decoding = {
        "open",
        "draft",
        "exif_transpose",
        "ImageOps",
        "rgba_as_hashed",
        "trim_box",
        "trim_allowed",
        "check_declared_size",
        "check_full_decode",
    }
    assert own & decoding == set()
