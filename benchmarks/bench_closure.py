"""Detection quality on the group closure, photos and small graphics, at the default settings.

What a user gets from the one-call API with nothing set: the planted cross-split copies
found, and how precise the resulting groups (the transitive closure that ``clean_splits``
acts on) are, per transformation, per image kind and per size, and what it costs. Three
configurations are audited side by side on the same files in one run:

- ``today``: ``audit_splits(splits, cache=False, workers=W)`` plus ``dihedral=False``,
  ``decode=DecodeOptions(trim_borders=False)`` and ``verify=False`` (each passed only when
  the installed ``audit_splits``/``DecodeOptions`` accept it), the settings of the
  hash-only audit;
- ``dihedral+trim``: ``dihedral=True``, ``trim_borders=True`` (and ``verify=False``).
  Both pin ``DecodeOptions(crop_entries=False)`` where that option exists, so they keep
  the hash-only feature set on every version (:func:`config_kwargs`);
- ``default``: ``audit_splits(splits, cache=False, workers=W)`` with nothing else.

The script does not change when the defaults do: rerun it on a new version and the
``default`` column shows the new defaults against the old ones.

Data (``benchmarks/_data/closure/``, deterministic from ``--seed``, reused between runs):

- photos: crops of the real photographs of :mod:`photos`, at 32x32, 64x64, 256x256,
  500x375 (most), 1920x1080 and 3840x2160, JPEG q90;
- sprites and icons drawn by :mod:`graphics` (RGBA PNG), with their hard negatives: the
  same character in another pose or palette, another character in the same pose, an icon
  recoloured or with another badge or glyph. Each of those is a different picture, so a
  link between two of them is false;
- planted copies: a family is an original in ``train`` and copies of it in ``val`` or
  ``test``, made by named transformations grouped into kinds (:data:`TRANSFORMS`); the
  other base images are spread 70/15/15 over the three splits, every hard-negative cluster
  over at least two of them.

Scores:

- recall: a planted copy is found when its ``group_id`` equals its original's;
- precision on the closure: of all cross-split pairs of images in one group, the share whose
  two images belong to one family (from group sizes, no pair loop); also on the direct pairs
  when the report carries ``edges``;
- the largest false groups (groups holding a cross-split pair of different families);
- the wall time of each audit, and ``--cost N``: default vs today on N images.

Run from the repository root::

    .venv/bin/python benchmarks/bench_closure.py --quick
    .venv/bin/python benchmarks/bench_closure.py --markdown benchmarks/_out/closure.md
    .venv/bin/python benchmarks/bench_closure.py --cost 20000
    .venv/bin/python benchmarks/bench_quality.py --closure --quick   # the same, via bench_quality
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import os
import shutil
import statistics
import sys
import time
import warnings
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageEnhance, ImageFont

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from graphics import icon_specs, render_icon, render_sprite, sprite_specs  # noqa: E402
from photos import MAX_IOU, build_photo_corpus, read_manifest  # noqa: E402

DEFAULT_DATA = HERE / "_data" / "closure"
SYNTHETIC_CORPORA = HERE / "_data" / "cache"
_RECIPE_VERSION = 3  # bump when a transformation or the base recipe changes
SPLITS = ("train", "val", "test")
IMAGE_KINDS = ("photo", "sprite", "icon")
CONFIGS = ("today", "dihedral+trim", "default")

#: Recall targets per kind ("Done means"), and for precision on the closure.
TARGETS = {
    "reencode": 0.95,
    "resize": 0.95,
    "format": 0.95,
    "photometric": 0.95,
    "colour": 0.95,
    "flip": 0.95,
    "rotate90": 0.95,
    "pad": 0.95,
    "letterbox": 0.95,
    "crop5": 0.90,
    "crop15": 0.80,
    "rotate5": 0.80,
}
PRECISION_TARGET = 0.95
SIZE_BUCKETS = ((32, "<=32 px"), (64, "33-64"), (128, "65-128"), (256, "129-256"))
SIZE_BUCKETS += ((640, "257-640"), (1920, "641-1920"), (10**9, ">1920"))


# --------------------------------------------------------------------------------------------------
# Transformations
# --------------------------------------------------------------------------------------------------

Apply = Callable[[Image.Image, np.random.Generator], Image.Image]
Applies = Callable[[str, int, int], bool]


def _always(image_kind: str, width: int, height: int) -> bool:
    return True


@dataclass(frozen=True)
class Transform:
    """A named way of making a copy; ``fmt`` "same" keeps the original's format."""

    name: str
    kind: str
    apply: Apply
    fmt: str = "same"
    quality: int = 90
    applies: Applies = _always


def _same(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return image


def _flatten(image: Image.Image, colour: tuple[int, int, int]) -> Image.Image:
    if "A" not in image.getbands():
        return image.convert("RGB")
    flat = Image.new("RGBA", image.size, (*colour, 255))
    flat.alpha_composite(image.convert("RGBA"))
    return flat.convert("RGB")


def _flattened(colour: tuple[int, int, int]) -> Apply:
    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        return _flatten(image, colour)

    return apply


def _on_random_colour(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    r, g, b = (int(v) for v in rng.integers(40, 216, 3))
    return _flatten(image, (r, g, b))


def _scaled(factor: float) -> Apply:
    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        size = (max(1, round(image.width * factor)), max(1, round(image.height * factor)))
        return image.resize(size, Image.Resampling.LANCZOS)

    return apply


def _to_size(width: int, height: int) -> Apply:
    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        return image.resize((width, height), Image.Resampling.LANCZOS)

    return apply


def _on_rgb(image: Image.Image, edit: Callable[[Image.Image], Image.Image]) -> Image.Image:
    """Apply a colour edit to the RGB channels, keeping any alpha channel."""
    if "A" not in image.getbands():
        return edit(image.convert("RGB"))
    rgba = image.convert("RGBA")
    edited = edit(rgba.convert("RGB")).convert("RGBA")
    edited.putalpha(rgba.getchannel("A"))
    return edited


def _enhanced(enhancer: Callable[[Image.Image], Any], factor: float) -> Apply:
    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        return _on_rgb(image, lambda rgb: enhancer(rgb).enhance(factor))

    return apply


def _gamma(value: float) -> Apply:
    table = [round(255 * (i / 255) ** value) for i in range(256)] * 3

    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        return _on_rgb(image, lambda rgb: rgb.point(table))

    return apply


def _transposed(method: Image.Transpose) -> Apply:
    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        return image.transpose(method)

    return apply


def _fill_of(image: Image.Image, colour: str) -> tuple[int, ...]:
    if colour == "transparent":
        return (0, 0, 0, 0)
    value = {"grey": 128, "white": 255, "black": 0}[colour]
    return (value, value, value, 255) if image.mode == "RGBA" else (value, value, value)


def _placed(image: Image.Image, size: tuple[int, int], colour: str) -> Image.Image:
    """``image`` centred on a canvas of ``size`` filled with ``colour``."""
    mode = "RGBA" if colour == "transparent" or "A" in image.getbands() else "RGB"
    source = image.convert(mode)
    canvas = Image.new(mode, size, _fill_of(source, colour))
    canvas.paste(source, ((size[0] - image.width) // 2, (size[1] - image.height) // 2))
    return canvas


def _padded(colour: str) -> Apply:
    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        dx, dy = max(1, round(image.width * 0.1)), max(1, round(image.height * 0.1))
        return _placed(image, (image.width + 2 * dx, image.height + 2 * dy), colour)

    return apply


def _letterboxed(aspect: float, colour: str) -> Apply:
    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        width, height = image.size
        if width / height < aspect:
            size = (round(height * aspect), height)
        else:
            size = (width, round(width / aspect))
        return _placed(image, size, colour)

    return apply


def _not_aspect(aspect: float) -> Applies:
    def applies(image_kind: str, width: int, height: int) -> bool:
        return abs(width / height - aspect) > 0.02

    return applies


def _cropped(keep: float) -> Apply:
    """Keep ``keep`` of each side at a random position; no resize."""

    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        width, height = image.size
        w, h = max(1, round(width * keep)), max(1, round(height * keep))
        x0, y0 = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
        return image.crop((x0, y0, x0 + w, y0 + h))

    return apply


def _signed_angle(rng: np.random.Generator) -> float:
    return 5.0 if rng.random() < 0.5 else -5.0


def _rotate_fill(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """+-5 degrees, same canvas; corners black (opaque images) or transparent (alpha)."""
    fill = (0, 0, 0, 0) if image.mode == "RGBA" else (0, 0, 0)
    return image.rotate(_signed_angle(rng), Image.Resampling.BICUBIC, fillcolor=fill)


def _rotate_recrop(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """+-5 degrees, cut to the largest centred same-aspect box free of corners, resized back."""
    angle = _signed_angle(rng)
    rotated = image.rotate(angle, Image.Resampling.BICUBIC)
    width, height = image.size
    cos, sin = math.cos(math.radians(abs(angle))), math.sin(math.radians(abs(angle)))
    scale = min(width / (width * cos + height * sin), height / (width * sin + height * cos))
    w, h = width * scale, height * scale
    box = ((width - w) / 2, (height - h) / 2, (width + w) / 2, (height + h) / 2)
    return rotated.resize(image.size, Image.Resampling.LANCZOS, box=box)


def _portrait_window(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """A 9:16 window of the full height at a random position (a phone re-crop)."""
    width, height = image.size
    w = max(1, round(height * 9 / 16))
    x0 = int(rng.integers(0, width - w + 1))
    return image.crop((x0, 0, x0 + w, height))


def _watermark(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """Small white text with a dark outline in a random corner."""
    marked = image.copy()
    draw = ImageDraw.Draw(marked)
    size = max(8, round(min(image.size) * 0.07))
    font = ImageFont.load_default(size=size)
    text = str(rng.choice(["(c) stockpix", "sample", "@artist", "preview"]))
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font, stroke_width=1)
    margin = max(2, size // 3)
    corner = int(rng.integers(4))
    x = margin if corner % 2 == 0 else image.width - (right - left) - margin
    y = margin if corner < 2 else image.height - (bottom - top) - margin
    white = (255, 255, 255, 255) if image.mode == "RGBA" else (255, 255, 255)
    dark = (20, 20, 20, 255) if image.mode == "RGBA" else (20, 20, 20)
    draw.text((x - left, y - top), text, font=font, fill=white, stroke_width=1, stroke_fill=dark)
    return marked


def _graphics(image_kind: str, width: int, height: int) -> bool:
    return image_kind != "photo"


def _photos(image_kind: str, width: int, height: int) -> bool:
    return image_kind == "photo"


def _toned(gains: tuple[float, float, float], offsets: tuple[float, float, float]) -> Apply:
    """A grey or toned copy of a photo (issue 24): each channel a gain and offset of the
    image's luma (grey: gains 1, offsets 0; sepia: a warm tint)."""

    def edit(image: Image.Image) -> Image.Image:
        rgb = np.asarray(image, dtype=np.float32)
        source = rgb @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
        out = np.stack([source * g + o for g, o in zip(gains, offsets, strict=True)], axis=-1)
        return Image.fromarray(np.clip(np.rint(out), 0, 255).astype(np.uint8))

    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        return _on_rgb(image, edit)

    return apply


def _channel_gains(gains: tuple[float, float, float]) -> Apply:
    def edit(image: Image.Image) -> Image.Image:
        rgb = np.asarray(image, dtype=np.float32) * np.array(gains, dtype=np.float32)
        return Image.fromarray(np.clip(np.rint(rgb), 0, 255).astype(np.uint8))

    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        return _on_rgb(image, edit)

    return apply


def _icons_not(size: int) -> Applies:
    def applies(image_kind: str, width: int, height: int) -> bool:
        return image_kind == "icon" and width != size

    return applies


def _min_side(side: int) -> Applies:
    def applies(image_kind: str, width: int, height: int) -> bool:
        return min(width, height) >= side

    return applies


def _max_side(side: int) -> Applies:
    def applies(image_kind: str, width: int, height: int) -> bool:
        return max(width, height) <= side

    return applies


def _landscape(image_kind: str, width: int, height: int) -> bool:
    return width > height


_BRIGHTNESS = ImageEnhance.Brightness
TRANSFORMS = (
    Transform("jpeg_q90", "reencode", _same, "JPEG", 90),
    Transform("jpeg_q70", "reencode", _same, "JPEG", 70),
    Transform("jpeg_q40", "reencode", _same, "JPEG", 40),
    Transform("resize_0.5x", "resize", _scaled(0.5), applies=_min_side(32)),
    Transform("resize_2x", "resize", _scaled(2.0), applies=_max_side(2048)),
    Transform("squash_224", "resize", _to_size(224, 224), applies=_not_aspect(1.0)),
    Transform("icon_to_32", "resize", _to_size(32, 32), "PNG", applies=_icons_not(32)),
    Transform("icon_to_128", "resize", _to_size(128, 128), "PNG", applies=_icons_not(128)),
    Transform("to_png", "format", _same, "PNG"),
    Transform("to_webp_q80", "format", _same, "WEBP", 80),
    Transform("to_gif", "format", _same, "GIF", applies=_graphics),
    Transform("bright_+20%", "photometric", _enhanced(_BRIGHTNESS, 1.2)),
    Transform("bright_-20%", "photometric", _enhanced(_BRIGHTNESS, 0.8)),
    Transform("contrast_x1.25", "photometric", _enhanced(ImageEnhance.Contrast, 1.25)),
    Transform("saturation_x1.5", "photometric", _enhanced(ImageEnhance.Color, 1.5)),
    Transform("gamma_0.8", "photometric", _gamma(0.8)),
    Transform("grey", "colour", _toned((1.0, 1.0, 1.0), (0.0, 0.0, 0.0)), applies=_photos),
    Transform("sepia", "colour", _toned((1.07, 0.95, 0.75), (20.0, 10.0, 0.0)), applies=_photos),
    Transform("channel_gain", "colour", _channel_gains((1.3, 1.0, 0.7)), applies=_photos),
    Transform("mirror", "flip", _transposed(Image.Transpose.FLIP_LEFT_RIGHT)),
    Transform("flip_tb", "flip", _transposed(Image.Transpose.FLIP_TOP_BOTTOM)),
    Transform("rot90", "rotate90", _transposed(Image.Transpose.ROTATE_90)),
    Transform("rot180", "rotate90", _transposed(Image.Transpose.ROTATE_180)),
    Transform("rot270", "rotate90", _transposed(Image.Transpose.ROTATE_270)),
    Transform("pad10_grey", "pad", _padded("grey")),
    Transform("pad10_white", "pad", _padded("white")),
    Transform("pad10_black", "pad", _padded("black")),
    Transform("pad10_transparent", "pad", _padded("transparent"), "PNG"),
    Transform(
        "letterbox_square_black", "letterbox", _letterboxed(1.0, "black"), applies=_not_aspect(1.0)
    ),
    Transform(
        "letterbox_square_white", "letterbox", _letterboxed(1.0, "white"), applies=_not_aspect(1.0)
    ),
    Transform(
        "letterbox_16x9_black",
        "letterbox",
        _letterboxed(16 / 9, "black"),
        applies=_not_aspect(16 / 9),
    ),
    Transform(
        "letterbox_16x9_white",
        "letterbox",
        _letterboxed(16 / 9, "white"),
        applies=_not_aspect(16 / 9),
    ),
    Transform("crop5", "crop5", _cropped(0.95)),
    Transform("crop15", "crop15", _cropped(0.85)),
    Transform("rotate5_fill", "rotate5", _rotate_fill),
    Transform("rotate5_recrop", "rotate5", _rotate_recrop),
    Transform("portrait_9x16", "partial", _portrait_window, applies=_landscape),
    Transform("jpeg_on_black", "flatten", _flattened((0, 0, 0)), "JPEG", 90, _graphics),
    Transform("png_on_black", "flatten", _flattened((0, 0, 0)), "PNG", applies=_graphics),
    Transform("png_on_colour", "flatten", _on_random_colour, "PNG", applies=_graphics),
    Transform("watermark_text", "watermark", _watermark, applies=_min_side(64)),
)
TRANSFORM_BY_NAME = {t.name: t for t in TRANSFORMS}
KINDS = tuple(dict.fromkeys(t.kind for t in TRANSFORMS))
_EXTENSIONS = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp", "GIF": ".gif"}


def _format_of(transform: Transform, original: Path) -> str:
    if transform.fmt != "same":
        return transform.fmt
    return "JPEG" if original.suffix.lower() in (".jpg", ".jpeg") else "PNG"


def _save(image: Image.Image, path: Path, fmt: str, quality: int) -> None:
    """Write atomically; JPEG flattens any alpha onto white (leakaudit's own background)."""
    if fmt == "JPEG":
        image = _flatten(image, (255, 255, 255))
    options: dict[str, Any] = {"quality": quality} if fmt in ("JPEG", "WEBP") else {}
    temporary = path.with_name(path.stem + ".part" + path.suffix)
    image.save(temporary, fmt, **options)
    os.replace(temporary, path)


def copy_path(copy_dir: Path, base: Path, transform: Transform) -> Path:
    fmt = _format_of(transform, base)
    return copy_dir / f"{base.stem}__{transform.name}{_EXTENSIONS[fmt]}"


def _stable_int(text: str) -> int:
    return zlib.crc32(text.encode())


def _write_copies(job: tuple[str, str, tuple[str, ...], int]) -> None:
    """Write the copies of one original (skipping files already there)."""
    base_path, copy_dir, names, seed = job
    base = Path(base_path)
    todo = [n for n in names if not copy_path(Path(copy_dir), base, TRANSFORM_BY_NAME[n]).exists()]
    if not todo:
        return
    with Image.open(base) as opened:
        image = opened.convert("RGBA" if "A" in opened.getbands() else "RGB")
    for name in todo:
        transform = TRANSFORM_BY_NAME[name]
        rng = np.random.default_rng([seed, _stable_int(base.stem), _stable_int(name)])
        copy = transform.apply(image, rng)
        fmt = _format_of(transform, base)
        _save(copy, copy_path(Path(copy_dir), base, transform), fmt, transform.quality)


# --------------------------------------------------------------------------------------------------
# Base images
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """How many base images of each kind, and how many copies per planted family."""

    photos: Mapping[str, int]  # size label "WxH" -> count
    sprite_designs: int
    sprite_palettes: int
    sprite_poses: int
    icons_per_template: int
    family_share: float  # share of base images that get planted copies
    copies_per_family: int


QUICK = Plan(
    photos={"32x32": 10, "64x64": 10, "256x256": 10, "500x375": 40, "1920x1080": 6, "3840x2160": 2},
    sprite_designs=10,
    sprite_palettes=2,
    sprite_poses=3,
    icons_per_template=5,
    family_share=0.45,
    copies_per_family=14,
)
FULL = Plan(
    photos={
        "32x32": 60,
        "64x64": 60,
        "256x256": 60,
        "500x375": 480,
        "1920x1080": 40,
        "3840x2160": 8,
    },
    sprite_designs=40,
    sprite_palettes=2,
    sprite_poses=3,
    icons_per_template=12,
    family_share=0.4,
    copies_per_family=10,
)


def _size_of(label: str) -> tuple[int, int]:
    width, height = (int(v) for v in label.split("x"))
    return width, height


def _photo_group(labels: Iterable[str]) -> dict[tuple[int, int], list[str]]:
    """Size labels grouped by the corpus they are cut from: one per aspect, at its largest
    size up to 1920 px, so crops of different sizes keep photos.py's overlap limit."""
    groups: dict[tuple[int, int], list[str]] = {}
    for label in labels:
        width, height = _size_of(label)
        divisor = math.gcd(width, height)
        groups.setdefault((width // divisor, height // divisor), []).append(label)
    return groups


def _corpus_size(labels: Sequence[str]) -> tuple[int, int]:
    sizes = sorted((_size_of(label) for label in labels), key=lambda s: s[0])
    fitting = [s for s in sizes if s[0] <= 1920]
    return fitting[-1] if fitting else sizes[0]


def build_photo_bases(data: Path, plan: Plan, seed: int) -> list[dict[str, Any]]:
    """Photo base images: corpus files, or resized copies of them for the other sizes."""
    rows = []
    base_dir = data / "bases"
    base_dir.mkdir(parents=True, exist_ok=True)
    for aspect, labels in _photo_group(plan.photos).items():
        corpus_size = _corpus_size(labels)
        total = sum(plan.photos[label] for label in labels)
        corpus_dir = data / "photos" / f"{aspect[0]}x{aspect[1]}"
        paths = build_photo_corpus(corpus_dir, total, size=corpus_size, seed=seed + 10 * aspect[0])
        items = read_manifest(corpus_dir)["items"]
        sources = {item["file"]: item["source"] for item in items}
        boxes = {item["file"]: item.get("box") for item in items}
        start = 0
        for label in labels:
            size = _size_of(label)
            for path in paths[start : start + plan.photos[label]]:
                # named by size too: crops of two corpora share a file name
                target = base_dir / f"photo{label}_{path.stem}.jpg"
                if size == corpus_size:
                    _link_or_copy(path, target)
                elif not target.exists():
                    with Image.open(path) as image:
                        resized = image.convert("RGB").resize(size, Image.Resampling.LANCZOS)
                    _save(resized, target, "JPEG", 90)
                row = _base_row(target, "photo", f"photo_{sources[path.stem]}", size)
                row["box"] = boxes.get(path.stem)
                rows.append(row)
            start += plan.photos[label]
    return rows


def _link_or_copy(source: Path, target: Path) -> None:
    if target.exists():
        return
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _base_row(path: Path, image_kind: str, cluster: str, size: tuple[int, int]) -> dict[str, Any]:
    return {
        "path": str(path),
        "image_kind": image_kind,
        "cluster": cluster,
        "width": size[0],
        "height": size[1],
    }


def build_graphic_bases(data: Path, plan: Plan, seed: int) -> list[dict[str, Any]]:
    """Sprites and icons, rendered once to ``bases/`` as RGBA PNG."""
    base_dir = data / "bases"
    base_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    sprites = sprite_specs(
        plan.sprite_designs, palettes=plan.sprite_palettes, poses=plan.sprite_poses, seed=seed
    )
    for spec in sprites:
        path = base_dir / f"{spec.name}_{spec.size}.png"
        if not path.exists():
            _save(render_sprite(spec), path, "PNG", 0)
        rows.append(_base_row(path, "sprite", spec.cluster, (spec.size, spec.size)))
    for icon in icon_specs(plan.icons_per_template, seed=seed):
        path = base_dir / f"{icon.name}_{icon.size}.png"
        if not path.exists():
            _save(render_icon(icon), path, "PNG", 0)
        rows.append(_base_row(path, "icon", icon.cluster, (icon.size, icon.size)))
    return rows


def _pixel_digest(path: str) -> str:
    with Image.open(path) as image:
        return hashlib.sha256(
            image.convert("RGBA").tobytes() + repr(image.size).encode()
        ).hexdigest()


def _overlap(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """(intersection, area of a, area of b) of two boxes (left, top, right, bottom)."""
    width = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    height = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    return width * height, (a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1])


def _iou(a: Sequence[float], b: Sequence[float]) -> float:
    inter, area_a, area_b = _overlap(a, b)
    union = area_a + area_b - inter
    return inter / union if union > 0 else 0.0


def overlapping_families(bases: pd.DataFrame) -> dict[str, str]:
    """One family for photo bases cut from one source photo that overlap by more than MAX_IOU.

    Each corpus keeps its own crops of a source apart (IoU <= MAX_IOU), but the corpora
    of different aspect ratios are cut independently, so a 16:9 crop can contain most
    of a 4:3 one: by the benchmark's own definition those are near-duplicates (a crop),
    not distinct images, and scoring them as different families counted true crop links
    as false ones.
    """
    if "box" not in bases.columns:
        return {}
    photos = bases[(bases["image_kind"] == "photo") & bases["box"].notna()]
    parent = {path: path for path in photos["path"]}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for _, members in photos.groupby("cluster"):
        rows = list(members[["path", "box"]].itertuples(index=False))
        for i, (path_a, box_a) in enumerate(rows):
            for path_b, box_b in rows[i + 1 :]:
                if _iou(box_a, box_b) > MAX_IOU:
                    parent[find(path_a)] = find(path_b)
    return {path: Path(find(path)).stem for path in parent}


#: A photo base whose box lies this much inside another's box of the same source photo is, by
#: its pixels, a crop of it (the relation the "partial" and crop copies plant).
SUBCROP_CONTAINMENT = 0.9


def _containment(a: Sequence[float], b: Sequence[float]) -> float:
    """Share of the smaller box that lies inside the other."""
    inter, area_a, area_b = _overlap(a, b)
    smaller = min(area_a, area_b)
    return inter / smaller if smaller > 0 else 0.0


def subcrop_precision(frame: pd.DataFrame, group: np.ndarray) -> tuple[int, int]:
    """(cross-split pairs in one group, of those in one family or a photo and its sub-crop).

    The corpus keeps crops of one source apart by IoU (<= MAX_IOU), but a crop can still lie
    almost wholly inside a larger one of the same source (a zoomed-in framing: IoU 0.5,
    containment 1.0), while the benchmark plants a 9:16 window (IoU about 0.42) as a copy to
    be found. So such pairs are scored both ways: :func:`closure_precision` counts them as
    false, this figure counts a pair whose originals are photos of one source with one box
    at least :data:`SUBCROP_CONTAINMENT` inside the other as a copy. Pair by pair (groups
    are small), never through a transitive family.
    """
    pairs = same = 0
    boxes = frame["box"].to_numpy() if "box" in frame.columns else None
    families = frame["family"].to_numpy()
    clusters = frame["cluster"].to_numpy()
    splits = frame["split"].to_numpy()
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.r_[True, group[order][1:] != group[order][:-1]])
    for members in np.split(order, starts[1:]):
        if len(members) < 2:
            continue
        for x, a in enumerate(members.tolist()):
            for b in members[x + 1 :].tolist():
                if splits[a] == splits[b]:
                    continue
                pairs += 1
                if families[a] == families[b] or (
                    boxes is not None
                    and clusters[a] == clusters[b]
                    and isinstance(boxes[a], (list, tuple))
                    and isinstance(boxes[b], (list, tuple))
                    and _containment(boxes[a], boxes[b]) >= SUBCROP_CONTAINMENT
                ):
                    same += 1
    return pairs, same


def drop_identical(bases: pd.DataFrame) -> pd.DataFrame:
    """Keep one of any base images with identical pixels (two specs that render alike)."""
    digests = bases["path"].map(_pixel_digest)
    return bases[~digests.duplicated()].reset_index(drop=True)


# --------------------------------------------------------------------------------------------------
# Splits and planted families
# --------------------------------------------------------------------------------------------------


def assign_splits(bases: pd.DataFrame, plan: Plan, seed: int) -> pd.DataFrame:
    """Choose the family originals (in train) and spread the others 70/15/15.

    Every graphics hard-negative cluster (a sprite design, an icon template) is then made to
    span at least two splits, moving one non-family member if needed.
    """
    rng = np.random.default_rng([seed, 3])
    bases = bases.copy()
    bases["is_family"] = rng.random(len(bases)) < plan.family_share
    spread = rng.choice(SPLITS, len(bases), p=[0.7, 0.15, 0.15])
    bases["split"] = np.where(bases["is_family"], "train", spread)
    for _, members in bases[bases["image_kind"] != "photo"].groupby("cluster"):
        if members["split"].nunique() > 1:
            continue
        movable = members.index[~members["is_family"].to_numpy()]
        if len(movable):
            current = bases.at[movable[0], "split"]
            bases.at[movable[0], "split"] = "val" if current != "val" else "test"
    return bases


def plan_copies(bases: pd.DataFrame, plan: Plan, seed: int) -> dict[str, list[str]]:
    """Per family original, the transformations of its copies: the applicable ones used least
    so far for its image kind, so every transformation gets about as many copies."""
    rng = np.random.default_rng([seed, 4])
    used: dict[str, Counter[str]] = {kind: Counter() for kind in IMAGE_KINDS}
    chosen: dict[str, list[str]] = {}
    for row in bases[bases["is_family"]].itertuples(index=False):
        counts = used[row.image_kind]
        names = [t.name for t in TRANSFORMS if t.applies(row.image_kind, row.width, row.height)]
        tie_break = {name: float(rng.random()) for name in names}
        names.sort(key=lambda n: (counts[n], tie_break[n]))
        chosen[row.path] = names[: plan.copies_per_family]
        counts.update(chosen[row.path])
    return chosen


def _size_bucket(width: int, height: int) -> str:
    side = max(width, height)
    return next(label for limit, label in SIZE_BUCKETS if side <= limit)


def build_dataset(data: Path, plan: Plan, seed: int, workers: int) -> pd.DataFrame:
    """Build (or reuse) every file; one row per image: its split, family and labels."""
    _check_recipe(data, seed)
    bases = pd.DataFrame(
        build_photo_bases(data, plan, seed) + build_graphic_bases(data, plan, seed)
    )
    bases = assign_splits(drop_identical(bases), plan, seed)
    chosen = plan_copies(bases, plan, seed)
    copy_dir = data / "copies"
    copy_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(path, str(copy_dir), tuple(names), seed) for path, names in chosen.items()]
    jobs.sort(key=lambda job: -os.path.getsize(job[0]))  # the 4K originals first
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_write_copies, jobs))
    rows = []
    families = overlapping_families(bases)
    rng = np.random.default_rng([seed, 5])
    for base in bases.itertuples(index=False):
        common = {
            "image_kind": base.image_kind,
            "cluster": base.cluster,
            "family": families.get(base.path, Path(base.path).stem),
            "box": getattr(base, "box", None) if base.image_kind == "photo" else None,
            "bucket": _size_bucket(base.width, base.height),
        }
        rows.append(
            {
                "path": base.path,
                "split": base.split,
                "transform": "base",
                "original": base.path,
                **common,
            }
        )
        for name in chosen.get(base.path, []):
            target = copy_path(copy_dir, Path(base.path), TRANSFORM_BY_NAME[name])
            split = "val" if rng.random() < 0.5 else "test"
            rows.append(
                {
                    "path": str(target),
                    "split": split,
                    "transform": name,
                    "original": base.path,
                    **common,
                }
            )
    frame = pd.DataFrame(rows)
    frame["kind"] = frame["transform"].map(
        lambda n: TRANSFORM_BY_NAME[n].kind if n != "base" else "base"
    )
    return frame


def _check_recipe(data: Path, seed: int) -> None:
    """Delete the generated files when the recipe (version, seed) changed."""
    recipe = {"version": _RECIPE_VERSION, "seed": seed, "transforms": [t.name for t in TRANSFORMS]}
    path = data / "recipe.json"
    if path.exists() and json.loads(path.read_text()) != recipe:
        for folder in ("bases", "copies", "photos"):
            shutil.rmtree(data / folder, ignore_errors=True)
    data.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recipe))


# --------------------------------------------------------------------------------------------------
# Auditing
# --------------------------------------------------------------------------------------------------


def config_kwargs(config: str) -> dict[str, Any]:
    """The keyword arguments of one configuration, as the installed API accepts them.

    "today" and "dihedral+trim" pin the feature set of the hash-only audit: options the
    installed version lacks are left out, and decode options added since (the crop and
    rotation entries of the candidate net) are pinned off, so those two columns mean the
    same on every version.
    """
    import leakaudit
    from leakaudit.loading import DecodeOptions

    if config == "default":
        return {}
    accepted = inspect.signature(leakaudit.audit_splits).parameters
    wanted: dict[str, Any] = {"dihedral": config != "today", "verify": False}
    kwargs = {name: value for name, value in wanted.items() if name in accepted}
    decode_fields = {f.name for f in fields(DecodeOptions)}
    pinned = {"trim_borders": config != "today", "crop_entries": False}
    decode = {name: value for name, value in pinned.items() if name in decode_fields}
    if "decode" in accepted and decode:
        kwargs["decode"] = DecodeOptions(**decode)
    return kwargs


@dataclass
class Audit:
    config: str
    kwargs: dict[str, Any]
    group: np.ndarray  # group_id per row of the dataset frame
    seconds: float
    report: Any
    warnings: list[str]


def run_audit(frame: pd.DataFrame, config: str, workers: int) -> Audit:
    """One ``audit_splits`` call on the dataset's three splits, timed end to end."""
    import leakaudit

    splits = {name: frame.loc[frame["split"] == name, "path"].tolist() for name in SPLITS}
    kwargs = config_kwargs(config)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        report = leakaudit.audit_splits(splits, cache=False, workers=workers, **kwargs)
        seconds = time.perf_counter() - start
    table = report.table
    order = [p for name in SPLITS for p in splits[name]]
    if len(table) != len(order) or list(map(os.path.basename, table["path"].astype(str))) != list(
        map(os.path.basename, order)
    ):
        raise RuntimeError("report.table rows are not the images in the order given")
    position = pd.Series(np.arange(len(order)), index=order)
    group = table["group_id"].to_numpy()[position.loc[frame["path"]].to_numpy()]
    messages = [
        f"{type(w.message).__name__}: {str(w.message).splitlines()[0][:160]}" for w in caught
    ]
    return Audit(config, kwargs, group, seconds, report, messages)


def _describe_kwargs(kwargs: Mapping[str, Any]) -> str:
    parts = []
    for name, value in kwargs.items():
        if name == "decode":
            pinned = ("trim_borders", "crop_entries")
            shown = [f"{f}={getattr(value, f)}" for f in pinned if hasattr(value, f)]
            value = f"DecodeOptions({', '.join(shown)})"
        parts.append(f"{name}={value}")
    return ", ".join(parts) or "(nothing else)"


# --------------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------------


def found_copies(frame: pd.DataFrame, group: np.ndarray) -> pd.DataFrame:
    """The planted copies, with ``found`` = same group as their original."""
    with_group = frame.assign(group=group)
    originals = with_group[with_group["transform"] == "base"].set_index("path")["group"]
    copies = with_group[with_group["transform"] != "base"].copy()
    copies["found"] = copies["group"].to_numpy() == originals.loc[copies["original"]].to_numpy()
    return copies


def _cross_split_pairs(counts: pd.Series, levels: list[int]) -> pd.Series:
    """Pairs in different splits per key ``levels``, from counts whose last level is the split."""
    total = counts.groupby(level=levels).sum()
    squares = (counts**2).groupby(level=levels).sum()
    return (total**2 - squares) // 2


def _pair_counts(frame: pd.DataFrame, group: np.ndarray) -> tuple[pd.Series, pd.Series]:
    """Per group: its cross-split pairs, and those of them within one family."""
    g = pd.Series(group, index=frame.index, name="group")
    counts = frame.groupby([g, frame["family"], frame["split"]]).size()
    by_group = counts.groupby(level=[0, 2]).sum()
    pairs = _cross_split_pairs(by_group, [0])
    same = _cross_split_pairs(counts, [0, 1]).groupby(level=0).sum()
    return pairs, same.reindex(pairs.index, fill_value=0)


def closure_precision(frame: pd.DataFrame, group: np.ndarray) -> tuple[int, int]:
    """(cross-split pairs in one group, of those in one family), from group sizes."""
    pairs, same = _pair_counts(frame, group)
    return int(pairs.sum()), int(same.sum())


def false_groups(frame: pd.DataFrame, group: np.ndarray, top: int = 10) -> tuple[pd.DataFrame, int]:
    """The ``top`` largest groups with a cross-split pair of two families, described, and
    how many such groups there are."""
    pairs, same = _pair_counts(frame, group)
    wrong = pairs - same
    wrong = wrong[wrong > 0]
    g = pd.Series(group, index=frame.index)
    sizes = g.value_counts()
    rows = []
    for gid in sorted(wrong.index, key=lambda i: (-sizes[i], -wrong[i]))[:top]:
        members = frame[(g == gid).to_numpy()]
        kinds = Counter(members["image_kind"]).most_common()
        clusters = Counter(members["cluster"]).most_common(3)
        splits = Counter(members["split"]).most_common()
        rows.append(
            {
                "members": int(sizes[gid]),
                "families": members["family"].nunique(),
                "false pairs": int(wrong[gid]),
                "image kinds": ", ".join(f"{k} x{n}" for k, n in kinds),
                "splits": ", ".join(f"{s} {n}" for s, n in splits),
                "top clusters": ", ".join(f"{c} x{n}" for c, n in clusters),
            }
        )
    return pd.DataFrame(rows), len(wrong)


def edge_precision(
    frame: pd.DataFrame, report: Any, order_rows: np.ndarray
) -> tuple[int, int] | None:
    """(cross-split direct pairs, of those in one family) when the report has an edges table."""
    edges = getattr(report, "edges", None)
    if edges is None or not {"row_a", "row_b"} <= set(edges.columns):
        return None
    family = frame["family"].to_numpy()[order_rows]
    split = frame["split"].to_numpy()[order_rows]
    a = edges["row_a"].to_numpy(dtype=np.int64)
    b = edges["row_b"].to_numpy(dtype=np.int64)
    cross = split[a] != split[b]
    return int(cross.sum()), int((cross & (family[a] == family[b])).sum())


# --------------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return [*lines, ""]


def _pct(found: pd.Series) -> str:
    return f"{100 * found.mean():.1f}%" if len(found) else "-"


def _short_pct(found: pd.Series) -> str:
    return f"{100 * found.mean():.0f}" if len(found) else "-"


def dataset_table(frame: pd.DataFrame) -> list[str]:
    rows = []
    for image_kind in IMAGE_KINDS:
        part = frame[frame["image_kind"] == image_kind]
        bases = part[part["transform"] == "base"]
        copies = part[part["transform"] != "base"]
        families = copies["family"].nunique()
        per_split = ", ".join(f"{s} {int((part['split'] == s).sum())}" for s in SPLITS)
        sizes = ", ".join(
            f"{b} {n}" for b, n in bases["bucket"].value_counts().sort_index().items()
        )
        rows.append([image_kind, len(bases), families, len(copies), len(part), per_split, sizes])
    is_copy = frame["transform"] != "base"
    per_split = ", ".join(f"{s} {int((frame['split'] == s).sum())}" for s in SPLITS)
    n_families = frame.loc[is_copy, "family"].nunique()
    rows.append(
        ["all", int((~is_copy).sum()), n_families, int(is_copy.sum()), len(frame), per_split, ""]
    )
    header = [
        "image kind",
        "base images",
        "families",
        "planted copies",
        "files",
        "per split",
        "bases by size",
    ]
    return _table(header, rows)


def headline_table(
    copies: Mapping[str, pd.DataFrame], precision: Mapping[str, tuple[int, int]]
) -> list[str]:
    rows = []
    for kind in KINDS:
        target = TARGETS.get(kind)
        cells = [_pct(c.loc[c["kind"] == kind, "found"]) for c in copies.values()]
        default = copies["default"].loc[copies["default"]["kind"] == kind, "found"]
        verdict = "-" if target is None else ("pass" if default.mean() >= target else "FAIL")
        n = int((copies["default"]["kind"] == kind).sum())
        rows.append(
            [kind, n, f">= {100 * target:.0f}%" if target else "(measured)", *cells, verdict]
        )
    cells, verdict = [], "-"
    for config, (pairs, correct) in precision.items():
        value = correct / pairs if pairs else 1.0
        cells.append(f"{100 * value:.2f}% ({pairs - correct} false of {pairs})")
        if config == "default":
            verdict = "pass" if value >= PRECISION_TARGET else "FAIL"
    rows.append(["precision (closure)", "", f">= {100 * PRECISION_TARGET:.0f}%", *cells, verdict])
    return _table(["kind", "copies", "target", *copies, "default meets target"], rows)


def kind_by_image_table(copies: Mapping[str, pd.DataFrame]) -> list[str]:
    header = ["kind"] + [f"{config} {k}" for config in copies for k in IMAGE_KINDS]
    rows = []
    for kind in KINDS:
        row: list[Any] = [kind]
        for c in copies.values():
            part = c[c["kind"] == kind]
            row += [_short_pct(part.loc[part["image_kind"] == k, "found"]) for k in IMAGE_KINDS]
        rows.append(row)
    return _table(header, rows)


def transform_table(copies: Mapping[str, pd.DataFrame]) -> list[str]:
    rows = []
    first = next(iter(copies.values()))
    for transform in TRANSFORMS:
        part = first[first["transform"] == transform.name]
        if part.empty:
            continue
        counts = "/".join(str(int((part["image_kind"] == k).sum())) for k in IMAGE_KINDS)
        row: list[Any] = [transform.name, transform.kind, counts]
        for c in copies.values():
            p = c[c["transform"] == transform.name]
            split = "/".join(_short_pct(p.loc[p["image_kind"] == k, "found"]) for k in IMAGE_KINDS)
            row.append(f"{_pct(p['found'])} ({split})")
        rows.append(row)
    header = ["transform", "kind", "n photo/sprite/icon", *(f"{c} (p/s/i)" for c in copies)]
    return _table(header, rows)


def bucket_table(copies: Mapping[str, pd.DataFrame]) -> list[str]:
    rows = []
    first = next(iter(copies.values()))
    for _, label in SIZE_BUCKETS:
        part = first[first["bucket"] == label]
        if part.empty:
            continue
        counts = "/".join(str(int((part["image_kind"] == k).sum())) for k in IMAGE_KINDS)
        row: list[Any] = [label, counts]
        for c in copies.values():
            p = c[(c["bucket"] == label) & c["kind"].isin(list(TARGETS))]
            row.append(_pct(p["found"]))
        rows.append(row)
    header = ["original's longer side", "copies p/s/i", *(f"{c} (targeted kinds)" for c in copies)]
    return _table(header, rows)


def precision_table(frame: pd.DataFrame, audits: Mapping[str, Audit]) -> list[str]:
    rows = []
    for config, audit in audits.items():
        row: list[Any] = [config]
        for subset in (None, *IMAGE_KINDS):
            mask = (
                np.ones(len(frame), bool)
                if subset is None
                else (frame["image_kind"] == subset).to_numpy()
            )
            pairs, correct = closure_precision(frame[mask], audit.group[mask])
            row.append(
                f"{100 * correct / pairs:.2f}% ({pairs - correct}/{pairs})" if pairs else "-"
            )
        direct = edge_precision(frame, audit.report, _order_rows(frame))
        row.append(
            "-"
            if direct is None
            else f"{100 * direct[1] / max(direct[0], 1):.2f}% ({direct[0] - direct[1]}/{direct[0]})"
        )
        low = audit.report.table.get("low_information")
        row.append(int(np.asarray(low, dtype=bool).sum()) if low is not None else "-")
        rows.append(row)
    header = [
        "config",
        "closure, all",
        "photos only",
        "sprites only",
        "icons only",
        "direct pairs (edges)",
        "low-information images",
    ]
    return _table(header, rows)


def _order_rows(frame: pd.DataFrame) -> np.ndarray:
    """Dataset row of each report.table row (the images in split order)."""
    return np.concatenate([np.flatnonzero((frame["split"] == s).to_numpy()) for s in SPLITS])


def stage_lines(audits: Mapping[str, Audit], n_images: int) -> list[str]:
    lines = []
    for config, audit in audits.items():
        parameters = getattr(audit.report, "parameters", {}) or {}
        for key in ("stages", "verification"):
            if key not in parameters:
                continue
            value = parameters[key]
            lines.append(f"- {config} `{key}`: `{json.dumps(value, default=str)}`")
            if isinstance(value, Mapping):
                per = [f"{k} {v / n_images:.2f}" for k, v in value.items() if _is_count(str(k), v)]
                if per:
                    lines.append(f"  - per image: {', '.join(per)}")
    return lines or ["- no `stages` / `verification` in `report.parameters` (hash-only audit)."]


#: Integer verification settings that are not counts.
SETTINGS = frozenset({"distinct_pixels"})


def _is_count(name: str, value: Any) -> bool:
    """Integer entries that count things (candidates, verified, ...), not settings."""
    setting = "threshold" in name or name.startswith(("min_", "max_")) or name in SETTINGS
    integer = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    return integer and not setting


def cost_table(audits: Mapping[str, Audit], n_images: int) -> list[str]:
    today = audits["today"].seconds
    rows = [
        [
            c,
            _describe_kwargs(a.kwargs),
            f"{a.seconds:.1f}",
            f"{1000 * a.seconds / n_images:.2f}",
            f"{a.seconds / today:.2f}x",
        ]
        for c, a in audits.items()
    ]
    return _table(
        ["config", "arguments beyond cache=False, workers", "seconds", "ms / image", "vs today"],
        rows,
    )


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small set (about 1,000 images)")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="data folder (reused)")
    parser.add_argument("--workers", type=int, default=2, help="audit and build processes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cost", type=int, metavar="N", help="only time default vs today on N images"
    )
    parser.add_argument("--repeat", type=int, default=1, help="--cost: runs per config (median)")
    return parser.parse_args(argv)


def _versions() -> str:
    import PIL

    import leakaudit

    package = Path(leakaudit.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(package.glob("*.py")):
        digest.update(path.read_bytes())
    version = getattr(leakaudit, "__version__", "?")
    return (
        f"leakaudit {version} (sources sha256 {digest.hexdigest()[:12]}), "
        f"Pillow {PIL.__version__}, numpy {np.__version__}."
    )


def _warm(paths: Iterable[str]) -> None:
    for path in paths:
        with open(path, "rb") as handle:
            while handle.read(1 << 20):
                pass


def quality_report(args: argparse.Namespace, log: Callable[[str], None]) -> list[str]:
    plan = QUICK if args.quick else FULL
    data = args.data
    frame = build_dataset(data, plan, args.seed, args.workers)
    log(f"data set: {len(frame)} files under {data}")
    _warm(frame["path"])
    audits = {}
    for config in CONFIGS:
        audits[config] = run_audit(frame, config, args.workers)
        log(f"{config}: {audits[config].seconds:.1f}s")
    copies = {c: found_copies(frame, a.group) for c, a in audits.items()}
    precision = {c: closure_precision(frame, a.group) for c, a in audits.items()}
    out = ["## Data set", ""]
    out += dataset_table(frame)
    out += [
        "Hard negatives are distinct images: sprites of one design in another pose or palette, "
        "other designs in the same pose, icons of one template recoloured or with another badge, "
        "glyph or background. Each graphics cluster spans two or more splits.",
        "",
        "## Recall per kind at each configuration (closure: copy in its original's group)",
        "",
    ]
    out += headline_table(copies, precision)
    subcrop = {c: subcrop_precision(frame, a.group) for c, a in audits.items()}
    out += [
        "Precision on the closure counting a photo and its sub-crop (one base lying at least "
        f"{100 * SUBCROP_CONTAINMENT:.0f}% inside another of the same source) as a copy: "
        + ", ".join(f"{c} {100 * same / max(n, 1):.1f}%" for c, (n, same) in subcrop.items())
        + ".",
        "",
    ]
    out += ["## Recall per kind and image kind (%)", ""]
    out += kind_by_image_table(copies)
    out += ["## Recall per transformation (overall, then photo/sprite/icon %)", ""]
    out += transform_table(copies)
    out += ["## Recall by size of the original (kinds with a target only)", ""]
    out += bucket_table(copies)
    out += [
        "## Precision on the closure (cross-split pairs in one group that are one family)",
        "",
        "'photos only' etc. count only the pairs between two images of that kind.",
        "",
    ]
    out += precision_table(frame, audits)
    for config, audit in audits.items():
        top, n_false = false_groups(frame, audit.group)
        out += [f"### {config}: {n_false} false groups; the 10 largest", ""]
        out += (
            _table(list(top.columns), top.itertuples(index=False)) if len(top) else ["(none)", ""]
        )
    out += ["## Cost (same files, same run)", ""]
    out += cost_table(audits, len(frame))
    out += stage_lines(audits, len(frame))
    for config, audit in audits.items():
        summary = Counter(audit.warnings)
        for message, count in summary.items():
            out.append(f"- {config} warning x{count}: {message}")
    return [*out, ""]


def cost_corpus(
    args: argparse.Namespace, n: int, log: Callable[[str], None]
) -> tuple[list[Path], str]:
    """``n`` photo-like 500x375 JPEGs: bench_cache.py's synthetic corpus (``leakaudit.demo``'s
    generator, image ``i`` from seed ``i``), made where missing (about 20 min per 20,000 on two
    cores). The 20,000-image folder is reused as the first 20,000 of a larger one."""
    folder = SYNTHETIC_CORPORA / f"synthetic_500x375_{n}"
    smaller = SYNTHETIC_CORPORA / "synthetic_500x375_20000"
    from bench_cache import _link, build_corpus

    if n > 20000 and smaller.is_dir() and not folder.is_dir():
        folder.mkdir(parents=True)
        for path in smaller.glob("synthetic_*.jpg"):  # the same seeds: the same images
            _link(path, folder / path.name)  # a copy where hard links are not possible
    have = len(list(folder.glob("synthetic_*.jpg"))) if folder.is_dir() else 0
    if have < n:
        log(f"generating {n - have} photo-like JPEGs in {folder} (about 1 min per 1000 per core)")
    paths = build_corpus("synthetic", n, (500, 375), SYNTHETIC_CORPORA)
    return paths, f"{folder.relative_to(HERE.parent)} (bench_cache.py's photo-like 500x375 JPEGs)"


def cost_report(args: argparse.Namespace, log: Callable[[str], None]) -> list[str]:
    n = int(args.cost)
    files, described = cost_corpus(args, n, log)
    split = np.array(["train"] * 14 + ["val"] * 3 + ["test"] * 3)[np.arange(n) % 20]
    frame = pd.DataFrame(
        {"path": [str(p) for p in files], "split": split, "family": [p.stem for p in files]}
    )
    frame["image_kind"] = "photo"
    _warm(frame["path"])
    seconds: dict[str, list[float]] = {"today": [], "default": []}
    last: dict[str, Audit] = {}
    for _ in range(max(1, args.repeat)):
        for config in seconds:
            last[config] = run_audit(frame, config, 2)
            seconds[config].append(last[config].seconds)
            log(f"cost {config}: {last[config].seconds:.1f}s")
    median = {c: statistics.median(v) for c, v in seconds.items()}
    rows = [[c, f"{median[c]:.1f}", " / ".join(f"{s:.1f}" for s in v)] for c, v in seconds.items()]
    out = [
        f"## Cost: {n} images, workers=2, cache=False",
        "",
        f"Corpus: {described}; splits 70/15/15.",
        "",
    ]
    out += _table(["config", "seconds (median)", "runs"], rows)
    out += [f"default / today: **{median['default'] / median['today']:.2f}x**", ""]
    return [*out, *stage_lines(last, n), ""]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    command = " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])  # as typed
    out = ["# Detection quality on the group closure (photos and graphics)", ""]
    out += [f"Command: `{command}`", "", _versions(), ""]
    if args.cost:
        out += cost_report(args, log)
    else:
        out += quality_report(args, log)
    log("done")
    out.append(f"Total run time: {time.perf_counter() - started:.0f} s.")
    text = "\n".join(out)
    print(text)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
