"""The pixel-for-pixel check of two lossless sprites of one size (issue 36, point 4).

Consecutive animation frames of real sprites (frozen-bubble's 80 x 60 penguins) were linked:
their moved limbs are a pixel or two, which the native check's 3 x 3 neighbourhood absorbs,
and sprites over 48 px were never compared pixel for pixel. A lossless pair has no
re-encoding noise, so such a move is evidence; a copy's edits (whole shift, colour map, a
small rotation) are undone first.
"""

from __future__ import annotations

import io

import pytest
from PIL import Image, ImageDraw

from leakaudit.verify import (
    DISTINCT_PIXELS,
    VerifyOptions,
    compare_views,
    distinct_applies,
    distinct_pixel_count,
    load_view,
)


def _sprite(width: int, height: int, arm_lift: int = 0) -> Image.Image:
    """A figure on transparency: a body, a head with an eye, and an arm raised by
    ``arm_lift`` pixels (the next frame of the animation)."""
    image = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    w, h = width, height
    draw.ellipse((0.30 * w, 0.30 * h, 0.70 * w, 0.95 * h), fill=(120, 30, 90, 255))
    draw.ellipse((0.38 * w, 0.05 * h, 0.62 * w, 0.40 * h), fill=(235, 235, 240, 255))
    draw.ellipse((0.45 * w, 0.15 * h, 0.52 * w, 0.25 * h), fill=(10, 10, 10, 255))
    top = 0.50 * h - arm_lift
    draw.rectangle((0.02 * w, top, 0.32 * w, top + 0.08 * h), fill=(190, 110, 40, 255))
    draw.rectangle((0.62 * w, 0.80 * h, 0.85 * w, 0.90 * h), fill=(230, 150, 40, 255))
    return image


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def _judged(a: Image.Image, b: Image.Image) -> tuple[bool, int]:
    view_a, view_b = load_view(_png(a), "a"), load_view(_png(b), "b")
    verdict = compare_views(view_a, view_b, VerifyOptions(geometry=False))
    if not distinct_applies(view_a, view_b, verdict):
        return False, 0
    return True, distinct_pixel_count(view_a, view_b, verdict.turn)


@pytest.mark.parametrize(("width", "height"), [(80, 60), (64, 64), (40, 30)])
def test_the_next_frame_of_a_sprite_is_told_apart(width: int, height: int) -> None:
    # The arm raised by one pixel: the 3 x 3 neighbourhood absorbed it, and over 48 px the
    # sprite was not compared at its own pixels at all.
    applies, count = _judged(_sprite(width, height), _sprite(width, height, arm_lift=1))
    assert applies
    assert count >= DISTINCT_PIXELS


@pytest.mark.parametrize(("width", "height"), [(80, 60), (40, 30)])
@pytest.mark.parametrize("angle", [-7.0, 3.0, 9.5])
def test_a_rotated_copy_of_a_sprite_is_not_told_apart(
    width: int, height: int, angle: float
) -> None:
    # A rotation of 2-10 degrees keeps the canvas: pixel for pixel it differs at every
    # edge, but one rotation of either image explains it.
    sprite = _sprite(width, height)
    rotated = sprite.rotate(angle, Image.Resampling.BICUBIC, fillcolor=(0, 0, 0, 0))
    applies, count = _judged(sprite, rotated)
    assert count < DISTINCT_PIXELS or not applies


@pytest.mark.parametrize(
    "edit",
    [
        lambda im: im.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
        lambda im: Image.merge("RGBA", (*reversed(im.split()[:3]), im.split()[3])),
        lambda im: im.transform(im.size, Image.Transform.AFFINE, (1, 0, 2, 0, 1, -1)),
    ],
    ids=["mirror", "channel swap", "shift"],
)
def test_a_large_sprite_copy_is_not_told_apart(edit: object) -> None:
    sprite = _sprite(80, 60)
    copy = edit(sprite)  # type: ignore[operator]
    applies, count = _judged(sprite, copy)
    assert count < DISTINCT_PIXELS or not applies


def test_opaque_images_of_one_size_keep_the_general_check() -> None:
    # An opaque small photo's copy may be resampled at its size (CIFAR's PNGs): only images
    # with transparency are kept at their own pixels.
    a = Image.new("RGB", (80, 60), (200, 180, 150))
    assert load_view(_png(a), "a").own is None
    assert load_view(_png(_sprite(80, 60)), "b").own is not None
    assert load_view(_png(_sprite(120, 100)), "c").own is None  # over 96 px
