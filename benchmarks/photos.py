"""A corpus of real-photo crops for the benchmarks, built offline.

The benchmarks need photo-like images, and no network: the only real photographs at hand
are the ones scikit-image and matplotlib ship in their wheels. :func:`source_photos`
returns those, and :func:`build_photo_corpus` cuts ``n`` distinct crops out of them
(random position and scale, mild colour jitter), resizes each to a fixed size and saves
it.

Crops of one source photo share content but are different framings, so pairs of them are
the realistic hard negatives of near-duplicate detection ("same scene, different
picture"). Two crops of one source overlap by at most :data:`MAX_IOU` (intersection over
union) whenever the rejection sampler can manage it; the manifest records the box and the
largest overlap of every crop, so a benchmark can tell how similar any two of them are.

Excluded on purpose: synthetic images (``horse``, ``logo``, ``checkerboard``, ...),
scikit-image files that need a download (``eagle``, ``lily``, ...), the duplicate ``cat``
(it is ``chelsea``), the right image of ``stereo_motorcycle`` (a near-duplicate of the
left one), and photographs too small to crop at benchmark sizes without heavy upscaling
(``page``, ``text``, ``microaneurysms``, LFW's 25x25 faces).

Examples
--------
>>> from pathlib import Path
>>> paths = build_photo_corpus(Path("benchmarks/_data/photos"), 20)  # doctest: +SKIP
>>> len(paths)  # doctest: +SKIP
20
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

__all__ = [
    "MAX_IOU",
    "SOURCE_NAMES",
    "build_photo_corpus",
    "read_manifest",
    "source_photos",
]

#: Largest overlap (intersection over union) the sampler accepts between two crops of one source.
MAX_IOU = 0.6

#: Names of the source photos, in the order :func:`source_photos` returns them.
SOURCE_NAMES = (
    "astronaut",
    "brick",
    "camera",
    "cell",
    "chelsea",
    "clock",
    "coffee",
    "coins",
    "grass",
    "gravel",
    "hubble_deep_field",
    "immunohistochemistry",
    "moon",
    "motorcycle",
    "retina",
    "rocket",
    "grace_hopper",
)

_MANIFEST = "manifest.json"
_VERSION = 2  # bump when the crop recipe changes, so old corpora are rebuilt rather than reused
_EXTENSIONS = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp", "BMP": ".bmp", "TIFF": ".tif"}
_MAX_UPSCALE = 2.5  # crops are kept large enough that resizing them up to `size` stays below this
_CANDIDATES = 200  # rejection-sampling tries per crop


def _load_source(name: str) -> np.ndarray:
    if name == "grace_hopper":
        from matplotlib import cbook

        with cbook.get_sample_data("grace_hopper.jpg") as handle, Image.open(handle) as image:
            return np.asarray(image.convert("RGB"))
    import skimage.data

    if name == "motorcycle":
        return np.asarray(skimage.data.stereo_motorcycle()[0])
    return np.asarray(getattr(skimage.data, name)())


@functools.lru_cache(maxsize=1)
def _named_sources() -> tuple[tuple[str, Image.Image], ...]:
    sources = []
    for name in SOURCE_NAMES:
        pixels = _load_source(name)
        image = Image.fromarray(pixels)
        sources.append((name, image.convert("RGB")))
    return tuple(sources)


def source_photos() -> list[Image.Image]:
    """Return every real photograph shipped offline by scikit-image and matplotlib, as RGB images.

    The order and names are those of :data:`SOURCE_NAMES`. Greyscale photographs are
    converted to RGB.

    Returns
    -------
    list of PIL.Image.Image
        Fresh copies; callers may modify them.

    Examples
    --------
    >>> photos = source_photos()
    >>> len(photos) == len(SOURCE_NAMES) and all(p.mode == "RGB" for p in photos)
    True
    """
    return [image.copy() for _, image in _named_sources()]


def _max_iou(box: tuple[float, ...], placed: np.ndarray, placed_area: np.ndarray) -> float:
    """Largest intersection over union between ``box`` and the rows of ``placed``."""
    if not len(placed):
        return 0.0
    width = np.minimum(box[2], placed[:, 2]) - np.maximum(box[0], placed[:, 0])
    height = np.minimum(box[3], placed[:, 3]) - np.maximum(box[1], placed[:, 1])
    inter = np.where((width > 0) & (height > 0), width * height, 0.0)
    area = (box[2] - box[0]) * (box[3] - box[1])
    return float((inter / (area + placed_area - inter)).max())


def _sample_crop(
    rng: np.random.Generator,
    source_size: tuple[int, int],
    size: tuple[int, int],
    others: list[tuple[float, ...]],
) -> tuple[tuple[float, ...], float]:
    """Draw a crop box of the target aspect, overlapping ``others`` by <= MAX_IOU if possible."""
    src_w, src_h = source_size
    aspect = size[0] / size[1]
    full_w = min(src_w, src_h * aspect)  # the largest crop of the target aspect
    full_h = full_w / aspect
    low = float(np.clip(size[1] / _MAX_UPSCALE / full_h, 0.3, 0.6))
    placed = np.array(others, dtype=np.float64).reshape(-1, 4)
    placed_area = (placed[:, 2] - placed[:, 0]) * (placed[:, 3] - placed[:, 1])
    best: tuple[tuple[float, ...], float] | None = None
    for attempt in range(_CANDIDATES):
        # Crowded sources run out of room for large crops: allow smaller (more upscaled) ones late.
        scale = rng.uniform(low if attempt < _CANDIDATES // 2 else 0.3, 0.85)
        w, h = full_w * scale, full_h * scale
        x0 = rng.uniform(0, src_w - w)
        y0 = rng.uniform(0, src_h - h)
        box = (x0, y0, x0 + w, y0 + h)
        overlap = _max_iou(box, placed, placed_area)
        if best is None or overlap < best[1]:
            best = (box, overlap)
        if overlap <= MAX_IOU:
            break
    assert best is not None  # _CANDIDATES > 0
    return best


def _render(item: dict[str, Any], size: tuple[int, int]) -> Image.Image:
    sources = dict(_named_sources())
    box = tuple(item["box"])
    image = sources[item["source"]].resize(size, Image.Resampling.LANCZOS, box=box)
    gains = np.asarray(item["gains"], dtype=np.float32)
    pixels = np.asarray(image, dtype=np.float32) * gains
    return Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8))


def _plan(count: int, size: tuple[int, int], seed: int, items: list[dict[str, Any]]) -> None:
    """Extend ``items`` to ``count`` crops; the i-th depends only on seed and items < i."""
    sources = _named_sources()
    boxes: dict[str, list[tuple[float, ...]]] = {}
    for item in items:
        boxes.setdefault(item["source"], []).append(tuple(item["box"]))
    for index in range(len(items), count):
        name, image = sources[index % len(sources)]
        rng = np.random.default_rng([seed, index])
        others = boxes.setdefault(name, [])
        box, overlap = _sample_crop(rng, image.size, size, others)
        box = tuple(round(v, 3) for v in box)  # as stored, so a reloaded corpus extends alike
        others.append(box)
        jitter = rng.random() < 0.5
        gains = rng.uniform(0.93, 1.07, 3) if jitter else np.ones(3)
        items.append(
            {
                "file": f"{index:05d}_{name}",
                "source": name,
                "box": list(box),
                "max_iou": round(overlap, 4),
                "gains": [round(float(g), 4) for g in gains],
            }
        )


def read_manifest(out_dir: Path) -> dict[str, Any]:
    """Return the manifest of a corpus built by :func:`build_photo_corpus` in ``out_dir``.

    Its ``items`` list holds, per image: ``file`` (name without extension), ``source`` (one of
    :data:`SOURCE_NAMES`), ``box`` (the crop in source pixels), ``max_iou`` (largest overlap with an
    earlier crop of the same source) and ``gains`` (the per-channel colour jitter).
    """
    with open(Path(out_dir) / _MANIFEST, encoding="utf-8") as handle:
        manifest: dict[str, Any] = json.load(handle)
    return manifest


def build_photo_corpus(
    out_dir: Path,
    n: int,
    *,
    size: tuple[int, int] = (500, 375),
    fmt: str = "JPEG",
    quality: int = 90,
    seed: int = 0,
) -> list[Path]:
    """Write ``n`` distinct photo-like images to ``out_dir`` and return their paths.

    Each image is a crop of one of :func:`source_photos` (sources taken in turn) at a
    random position and scale, with mild per-channel colour jitter on half of them, resized
    to ``size`` with Lanczos and saved as ``fmt``. Files are named
    ``{index:05d}_{source}.{ext}``; the i-th file depends only on ``seed``, ``size`` and the
    crops before it, so a larger ``n`` extends a corpus without changing it.

    Idempotent: a ``manifest.json`` in ``out_dir`` records the recipe, and files already
    there that match it are reused. A corpus built with another recipe is replaced (only
    the files its manifest names are deleted).

    Parameters
    ----------
    out_dir : Path
        Folder to write into; created if missing.
    n : int
        Number of images.
    size : tuple of int
        ``(width, height)`` of every image.
    fmt : str
        A Pillow format name: ``"JPEG"``, ``"PNG"``, ``"WEBP"``, ``"BMP"`` or ``"TIFF"``.
    quality : int
        Encoder quality for JPEG and WebP.
    seed : int
        Seed of the crop sampler.

    Returns
    -------
    list of Path
        The ``n`` image paths, in index order.

    Examples
    --------
    >>> import tempfile
    >>> paths = build_photo_corpus(Path(tempfile.mkdtemp()), 3, size=(64, 48))
    >>> [p.name for p in paths]
    ['00000_astronaut.jpg', '00001_brick.jpg', '00002_camera.jpg']
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0; got {n!r}.")
    if fmt not in _EXTENSIONS:
        options = ", ".join(repr(f) for f in _EXTENSIONS)
        raise ValueError(f"fmt must be one of {options}; got {fmt!r}.")
    width, height = (int(v) for v in size)
    if width < 8 or height < 8:
        raise ValueError(f"size must be (width, height) with both >= 8; got {size!r}.")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    recipe = {
        "version": _VERSION,
        "size": [width, height],
        "fmt": fmt,
        "quality": quality,
        "seed": seed,
    }
    extension = _EXTENSIONS[fmt]

    items: list[dict[str, Any]] = []
    manifest_path = out_dir / _MANIFEST
    if manifest_path.exists():
        old = read_manifest(out_dir)
        if old.get("recipe") == recipe:
            items = list(old["items"])
        else:
            old_ext = _EXTENSIONS.get(old.get("recipe", {}).get("fmt", ""), "")
            for item in old.get("items", []):
                (out_dir / (item["file"] + old_ext)).unlink(missing_ok=True)
    if len(items) < n:
        _plan(n, (width, height), seed, items)
        temporary = manifest_path.with_suffix(".tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump({"recipe": recipe, "items": items}, handle, indent=1)
        os.replace(temporary, manifest_path)

    paths = []
    for item in items[:n]:
        path = out_dir / (item["file"] + extension)
        if not path.exists():
            image = _render(item, (width, height))
            temporary = path.with_name(path.stem + ".part" + extension)
            options: dict[str, Any] = {"quality": quality} if fmt in ("JPEG", "WEBP") else {}
            image.save(temporary, fmt, **options)
            os.replace(temporary, path)  # a killed run never leaves a truncated image behind
        paths.append(path)
    return paths
