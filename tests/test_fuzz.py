"""A bounded fuzz target for the loading + hashing path (hypothesis byte strategies).

Inputs start from small valid encodings (PNG, JPEG, GIF, WebP, TIFF, BMP, and an
EXIF-rotated JPEG) and are mutated: bytes flipped, runs overwritten, slices
truncated, inserted or deleted, and header fields (sizes, chunk lengths) set to
extremes; plain random bytes too. Whatever comes in, ``hash_image`` returns
hashes or raises ``ImageLoadError`` (never anything else), and ``hash_sources``
records each item as valid or with a reason. Runs in CI in well under a minute
(``max_examples`` below); raise ``LEAKAUDIT_FUZZ_EXAMPLES`` for a longer session.
"""

from __future__ import annotations

import os
import warnings
from functools import lru_cache

import imagegen
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from leakaudit.errors import ImageLoadError
from leakaudit.hashing import hash_image, hash_sources
from leakaudit.loading import DecodeOptions

EXAMPLES = int(os.environ.get("LEAKAUDIT_FUZZ_EXAMPLES", "300"))
# A small size limit keeps a mutated header that declares a huge image from being
# decoded for real (it is refused from the header, as a bomb would be).
OPTIONS = DecodeOptions(max_pixels=1_000_000)


@lru_cache(maxsize=1)
def seeds() -> tuple[bytes, ...]:
    photo = imagegen.photo_like(7, (48, 36))
    rgba = photo.convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize((48, 36)))
    frames = [imagegen.photo_like(s, (24, 18)) for s in (1, 2)]
    return (
        imagegen.encode(photo, "PNG"),
        imagegen.encode(rgba, "PNG"),
        imagegen.encode(photo.convert("P"), "PNG", transparency=0),
        imagegen.encode(photo, "JPEG", quality=70),
        imagegen.encode(photo, "JPEG", quality=70, progressive=True),
        imagegen.exif_oriented_jpeg(photo, 6),
        imagegen.animated(frames, "GIF"),
        imagegen.encode(photo, "WEBP", quality=60),
        imagegen.encode(rgba, "WEBP", lossless=True),
        imagegen.encode(photo, "TIFF"),
        imagegen.encode(photo.convert("L"), "TIFF", compression="tiff_lzw"),
        imagegen.encode(photo, "BMP"),
        imagegen.encode(Image.fromarray(np.full((20, 30), 40000, dtype=np.uint16)), "PNG"),
    )


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds())))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "overwrite", "truncate", "insert", "delete", "max"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "overwrite":
            patch = draw(st.binary(min_size=1, max_size=16))
            data[at : at + len(patch)] = patch
        elif kind == "truncate":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=32))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif kind == "max":  # a size or length field pushed to an extreme
            data[at : at + 4] = draw(st.sampled_from([b"\xff\xff\xff\xff", b"\x00\x00\x00\x00"]))
    return bytes(data)


def fuzz_inputs() -> st.SearchStrategy[bytes]:
    return st.one_of(
        mutated(),
        st.binary(max_size=256),
        st.builds(
            lambda head, tail: head + tail,
            st.sampled_from(seeds()).map(lambda b: b[:32]),
            st.binary(max_size=64),
        ),
    )


def check_one(data: bytes) -> None:
    try:
        hashes = hash_image(data, decode=OPTIONS)
    except ImageLoadError as error:
        assert isinstance(error.reason, str) and error.reason
        return
    assert 0 <= hashes.phash < 2**64 and 0 <= hashes.dhash < 2**64
    if not hashes.low_information:
        assert hashes.digest == 0  # the digest is only computed for flat images


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=fuzz_inputs())
def test_hash_image_raises_only_image_load_error(data: bytes) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pillow's own warnings on odd files are fine
        check_one(data)


@settings(max_examples=max(10, EXAMPLES // 10), deadline=None)
@given(batch=st.lists(fuzz_inputs(), min_size=1, max_size=8))
def test_hash_sources_records_each_item_as_valid_or_with_a_reason(batch: list[bytes]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = hash_sources(batch, decode=OPTIONS, on_error="ignore", workers=1)
    assert len(table) == len(batch)
    for index in range(len(batch)):
        if table.valid[index]:
            assert index not in table.errors
        else:
            assert table.errors[index]
            assert table.phash[index] == table.dhash[index] == 0
