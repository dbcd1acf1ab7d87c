"""A small built-in demo dataset with planted leaks (generated, no download)."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageEnhance

from leakaudit.safe_io import atomic_open

__all__ = ["DemoDataset", "build_demo_dataset", "photo_like_image"]

_CLASSES = ("cat", "dog")


def photo_like_image(seed: int, size: tuple[int, int] = (192, 144)) -> Image.Image:
    """Return a deterministic RGB image with photo-like structure.

    Smooth large-scale shading, a few soft-edged objects of random colour and
    a little sensor noise: enough structure for perceptual hashes to tell
    images apart, unlike flat synthetic drawings.
    """
    rng = np.random.default_rng(seed)
    width, height = size
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    channels = []
    base = rng.uniform(60, 190, 3)
    field_ = np.zeros((height, width))
    for _ in range(4):
        fx, fy = rng.uniform(0.005, 0.05, 2)
        phase = rng.uniform(0, 2 * np.pi, 2)
        field_ += (
            rng.uniform(10, 40)
            * np.sin(fx * x * 2 * np.pi + phase[0])
            * np.cos(fy * y * 2 * np.pi + phase[1])
        )
    for c in range(3):
        channels.append(base[c] + field_ * rng.uniform(0.6, 1.2))
    image = np.stack(channels, axis=-1)
    for _ in range(rng.integers(3, 7)):
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        rx, ry = rng.uniform(8, width / 3), rng.uniform(8, height / 3)
        inside = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2
        soft = np.clip(1.5 - inside, 0, 1)[..., None]
        colour = rng.uniform(0, 255, 3)
        image = image * (1 - soft) + colour * soft
    image += rng.normal(0, 3, image.shape)
    return Image.fromarray(np.clip(image, 0, 255).astype(np.uint8), "RGB")


@dataclass
class DemoDataset:
    """Where the demo dataset was written and which leaks were planted."""

    root: Path
    splits: dict[str, Path]
    planted_leaks: list[tuple[str, str, str]] = field(default_factory=list)
    """(original, copy, how the copy was made), paths relative to ``root``."""
    unreadable: list[str] = field(default_factory=list)


def _save(image: Image.Image, path: Path, **params: Any) -> None:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG" if path.suffix == ".png" else "JPEG", **params)
    _write(path, buffer.getvalue())


def _write(path: Path, data: bytes) -> None:
    # By rename, never in place: a file already at ``path`` may be a link to somebody's data.
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def build_demo_dataset(root: str | os.PathLike[str], *, seed: int = 0) -> DemoDataset:
    """Write a small ImageFolder-layout dataset with planted cross-split leaks.

    ``root/train``, ``root/val`` and ``root/test`` each hold ``cat/`` and
    ``dog/`` class folders of generated photo-like JPEGs. Planted: a renamed
    byte-identical copy, a JPEG re-encode at quality 50, a half-size PNG, a
    brightened copy, a duplicate kept within train (not a leak), two
    different blank images in different splits (not a leak: they are
    low-information) and one corrupt file (reported as unreadable).

    Parameters
    ----------
    root : path-like
        Folder to write into; created if needed. Existing files with the same
        names are replaced (by rename: a file linked there elsewhere keeps its
        bytes), nothing else is touched.
    seed : int, default 0
        Seed of the generated images.

    Returns
    -------
    DemoDataset
    """
    root = Path(root)
    counts = {"train": 40, "val": 10, "test": 12}
    splits = {name: root / name for name in counts}
    originals: dict[str, Image.Image] = {}
    image_seed = seed * 1000
    for split, count in counts.items():
        for index in range(count):
            label = _CLASSES[index % 2]
            rel = f"{split}/{label}/{split}_{index:03d}.jpg"
            image = photo_like_image(image_seed)
            image_seed += 1
            _save(image, root / rel, quality=92)
            originals[rel] = image

    planted: list[tuple[str, str, str]] = []

    def plant(source: str, target: str, how: str, image: Image.Image, **params: object) -> None:
        _save(image, root / target, **params)
        planted.append((source, target, how))

    source = "train/cat/train_000.jpg"
    _write(root / "test/cat/IMG_copy_4711.jpg", (root / source).read_bytes())
    planted.append((source, "test/cat/IMG_copy_4711.jpg", "renamed byte-identical copy"))
    source = "train/dog/train_001.jpg"
    plant(
        source,
        "test/dog/reencoded.jpg",
        "JPEG re-encode, quality 50",
        originals[source],
        quality=50,
    )
    source = "train/cat/train_002.jpg"
    small = originals[source].resize((96, 72), Image.Resampling.LANCZOS)
    plant(source, "val/cat/thumbnail.png", "resized to 50%, saved as PNG", small)
    source = "train/dog/train_003.jpg"
    brighter = ImageEnhance.Brightness(originals[source]).enhance(1.12)
    plant(source, "test/dog/brighter.jpg", "brightness +12%, re-encoded", brighter, quality=90)

    # Not leaks: a duplicate inside train, and two unrelated blank frames.
    source = "train/cat/train_004.jpg"
    buffer = io.BytesIO()
    originals[source].save(buffer, "JPEG", quality=70)
    _write(root / "train/cat/train_004_dup.jpg", buffer.getvalue())
    _save(Image.new("RGB", (192, 144), (0, 0, 0)), root / "train/dog/blank_frame.png")
    _save(Image.new("RGB", (160, 120), (2, 2, 2)), root / "test/cat/black.png")
    corrupt = root / "test/dog/corrupt.jpg"
    _write(corrupt, (root / "test/dog/test_001.jpg").read_bytes()[:300])
    return DemoDataset(
        root=root, splits=splits, planted_leaks=planted, unreadable=[str(corrupt.relative_to(root))]
    )
