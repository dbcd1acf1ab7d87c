"""Geometric verification (leakaudit.geometry): planted copies are accepted, others refused."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

pytest.importorskip("cv2")

from leakaudit import geometry
from leakaudit.geometry import (
    Features,
    GeometricMatch,
    extract_features,
    geometry_available,
    geometry_backend,
    match_features,
    verify_geometry,
)

WIDTH, HEIGHT = 320, 240


def textured(seed: int, size: tuple[int, int] = (WIDTH, HEIGHT)) -> Image.Image:
    """A photo-like grey image: smoothed noise at two scales plus drawn shapes, seeded."""
    rng = np.random.default_rng(seed)
    width, height = size
    coarse = Image.fromarray(rng.integers(0, 256, (height // 16, width // 16), dtype=np.uint8))
    fine = Image.fromarray(rng.integers(0, 256, (height // 4, width // 4), dtype=np.uint8))
    base = np.asarray(coarse.resize(size, Image.Resampling.BICUBIC), dtype=np.float32)
    detail = np.asarray(fine.resize(size, Image.Resampling.BICUBIC), dtype=np.float32)
    image = Image.fromarray(np.clip(0.6 * base + 0.4 * detail, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(30):
        x, y = (int(v) for v in rng.integers(0, (width, height)))
        w, h = (int(v) for v in rng.integers(6, 40, 2))
        fill, outline = (int(v) for v in rng.integers(0, 256, 2))
        if rng.random() < 0.5:
            draw.ellipse((x, y, x + w, y + h), fill=fill, outline=outline, width=2)
        else:
            draw.rectangle((x, y, x + w, y + h), fill=fill, outline=outline, width=2)
    return image.filter(ImageFilter.GaussianBlur(0.7))


def grey(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("L"))


def jpeg(image: Image.Image, quality: int) -> Image.Image:
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=quality)
    buffer.seek(0)
    return Image.open(buffer).convert("L")


@pytest.fixture(scope="module")
def photo() -> Image.Image:
    return textured(1)


def crop(image: Image.Image, removed: float, x_share: float, y_share: float) -> Image.Image:
    """Remove ``removed`` of each side in total, ``x_share``/``y_share`` of it at the left/top."""
    w, h = image.size
    dx, dy = w * removed, h * removed
    box = (dx * x_share, dy * y_share, w - dx * (1 - x_share), h - dy * (1 - y_share))
    return image.crop(tuple(round(v) for v in box))


def accepted(a: Image.Image, b: Image.Image) -> GeometricMatch:
    result = verify_geometry(grey(a), grey(b))
    assert result.accepted, result.reason
    return result


def test_geometry_available() -> None:
    assert geometry_available() is True
    assert geometry_available() is True  # cached
    assert geometry_backend().startswith("opencv ")


def test_identical_image(photo: Image.Image) -> None:
    result = accepted(photo, photo)
    assert result.scale == pytest.approx(1.0, abs=0.01)
    assert result.rotation == pytest.approx(0.0, abs=0.5)
    assert result.shift == pytest.approx((0.0, 0.0), abs=0.01)
    assert result.coverage == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("x_share, y_share", [(0.5, 0.5), (0.0, 1.0), (1.0, 0.0)])
def test_crop_5_percent(photo: Image.Image, x_share: float, y_share: float) -> None:
    result = accepted(photo, crop(photo, 0.05, x_share, y_share))
    assert result.scale == pytest.approx(1 / 0.95, abs=0.03)
    assert result.shift[0] == pytest.approx(-0.05 * x_share / 0.95, abs=0.02)


@pytest.mark.parametrize("x_share, y_share", [(0.5, 0.5), (0.0, 0.0), (1.0, 1.0)])
def test_crop_15_percent_resized_back(photo: Image.Image, x_share: float, y_share: float) -> None:
    cropped = crop(photo, 0.15, x_share, y_share).resize(photo.size, Image.Resampling.LANCZOS)
    result = accepted(photo, cropped)
    assert result.scale == pytest.approx(1 / 0.85, abs=0.04)
    # Either direction is a copy: A inside B is accepted like B inside A.
    assert verify_geometry(grey(cropped), grey(photo)).accepted


@pytest.mark.parametrize("angle", [5.0, -5.0])
def test_rotation_5_degrees_with_fill(photo: Image.Image, angle: float) -> None:
    rotated = photo.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=0)
    result = accepted(photo, rotated)
    assert result.rotation == pytest.approx(angle, abs=0.7)  # counter-clockwise, like PIL


def test_rotation_then_recrop(photo: Image.Image) -> None:
    rotated = photo.rotate(5, resample=Image.Resampling.BICUBIC)
    recropped = rotated.crop((24, 18, WIDTH - 24, HEIGHT - 18)).resize(photo.size)
    assert accepted(photo, recropped).rotation == pytest.approx(5.0, abs=0.7)


def test_letterbox(photo: Image.Image) -> None:
    boxed = Image.new("L", (WIDTH, WIDTH), 0)
    boxed.paste(photo.convert("L"), (0, (WIDTH - HEIGHT) // 2))
    result = accepted(photo, boxed)
    assert result.shift[1] == pytest.approx((WIDTH - HEIGHT) / 2 / WIDTH, abs=0.02)


def test_half_size_resize(photo: Image.Image) -> None:
    small = photo.resize((WIDTH // 2, HEIGHT // 2), Image.Resampling.LANCZOS)
    assert accepted(photo, small).scale == pytest.approx(1.0, abs=0.02)


def test_jpeg_quality_40(photo: Image.Image) -> None:
    accepted(photo, jpeg(photo, 40))


def test_portrait_recrop_of_landscape(photo: Image.Image) -> None:
    portrait = photo.crop((70, 0, 70 + HEIGHT * 3 // 4, HEIGHT))
    assert accepted(photo, portrait).coverage == pytest.approx(1.0, abs=0.02)


def test_tiny_graphic_upscaled_before_detection() -> None:
    icon = Image.new("L", (32, 32), 255)
    draw = ImageDraw.Draw(icon)
    draw.polygon([(4, 26), (10, 5), (16, 18), (22, 3), (28, 27)], fill=60, outline=0)
    draw.ellipse((11, 20, 19, 28), fill=180, outline=0)
    draw.rectangle((2, 2, 8, 8), fill=120, outline=0)
    result = verify_geometry(grey(icon), grey(icon.resize((64, 64), Image.Resampling.BICUBIC)))
    assert result.accepted, result.reason


def test_rejects_unrelated_images(photo: Image.Image) -> None:
    for seed in (2, 3, 4):
        result = verify_geometry(grey(photo), grey(textured(seed)))
        assert not result.accepted, result.reason


def test_rejects_two_crops_with_small_overlap() -> None:
    wide = textured(5, (480, 240))
    left, right = wide.crop((0, 0, 264, 240)), wide.crop((216, 0, 480, 240))  # 55% each
    result = verify_geometry(grey(left), grey(right))
    assert not result.accepted, result.reason


def test_rejects_two_crops_of_one_scene_neither_inside_the_other() -> None:
    # IoU 0.5 and each crop shows a third that the other lacks: same scene, different picture.
    wide = textured(6, (400, 240))
    left, right = wide.crop((0, 0, 300, 240)), wide.crop((100, 0, 400, 240))
    result = verify_geometry(grey(left), grey(right))
    assert not result.accepted
    assert "coverage" in result.reason


@pytest.mark.parametrize(
    "image",
    [np.full((64, 64), 128, np.uint8), np.zeros((1, 1), np.uint8), np.zeros((1, 500), np.uint8)],
    ids=["flat", "1x1", "1x500"],
)
def test_degenerate_content_is_rejected_with_a_reason(image: np.ndarray) -> None:
    features = extract_features(image)
    assert len(features) == 0
    assert features.size == (image.shape[1], image.shape[0])
    result = verify_geometry(image, image)
    assert not result.accepted
    assert result.reason.startswith("too few keypoints")
    assert math.isnan(result.scale)


def test_malformed_arrays_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"2-D uint8 array .*shape \(8, 8, 3\).*grey first"):
        extract_features(np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(TypeError, match="dtype float64"):
        extract_features(np.zeros((8, 8)))
    with pytest.raises(ValueError, match="non-empty"):
        extract_features(np.zeros((0, 8), np.uint8))
    with pytest.raises(TypeError, match="numpy array"):
        extract_features([[0, 1], [2, 3]])  # type: ignore[arg-type]


def test_bad_options_raise() -> None:
    image = grey(textured(7))
    with pytest.raises(ValueError, match=r"max_side must be an int in \[32, 4096\]; got 8"):
        extract_features(image, max_side=8)
    with pytest.raises(ValueError, match="detector must be one of 'orb', 'sift'; got 'surf'"):
        extract_features(image, detector="surf")
    features = extract_features(image)
    with pytest.raises(ValueError, match="min_coverage must be a number in"):
        match_features(features, features, min_coverage=1.5)
    with pytest.raises(ValueError, match="same detector"):
        match_features(features, extract_features(image, detector="sift"))


def test_features_extracted_once_match_many_pairs(photo: Image.Image) -> None:
    base = extract_features(grey(photo))
    assert isinstance(base, Features)
    assert base.keypoints.dtype == np.float32 and base.keypoints.shape[1] == 2
    assert base.descriptors.dtype == np.uint8 and base.descriptors.shape == (len(base), 32)
    assert base.size == (WIDTH, HEIGHT) and base.extent == (1.0, 0.75)
    assert base.keypoints.min() >= 0 and base.keypoints[:, 0].max() <= 1.0
    copies = [jpeg(photo, 50), photo.resize((160, 120)), textured(8)]
    verdicts = [match_features(base, extract_features(grey(c))).accepted for c in copies]
    assert verdicts == [True, True, False]


def test_sift_detector_also_verifies(photo: Image.Image) -> None:
    result = verify_geometry(grey(photo), grey(crop(photo, 0.1, 0.3, 0.6)), detector="sift")
    assert result.accepted, result.reason


def test_deterministic(photo: Image.Image) -> None:
    cropped = grey(crop(photo, 0.12, 0.2, 0.7))
    first = verify_geometry(grey(photo), cropped)
    assert verify_geometry(grey(photo), cropped) == first


def test_all_is_sorted_and_complete() -> None:
    assert geometry.__all__ == sorted(geometry.__all__)
    assert all(hasattr(geometry, name) for name in geometry.__all__)
