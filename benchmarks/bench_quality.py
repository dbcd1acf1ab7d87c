"""Detection quality of leakaudit's hashes on real photos: the evidence for the defaults.

A labelled set is built from crops of the real photographs scikit-image and matplotlib
ship (:mod:`photos`): ``--n-base`` distinct base crops, and for every second one a family
of planted near-duplicates (re-encodes, resizes, format changes, photometric edits, crops,
flip, rotation). Every pair of images is then scored by each method at each threshold
0..16:

- precision: flagged pairs that belong to one planted family / all flagged pairs;
- recall: planted (base, copy) pairs found, overall and per transformation;
- false pairs per million unrelated pairs: flagged pairs among the distinct base crops,
  the figure that carries over to a dataset of any size (precision does not: it depends
  on how many duplicates there are).

Methods: leakaudit's pHash, its dHash, "both" (pHash <= t and dHash <= t), and
``imagehash.phash`` / ``imagehash.dhash`` on a plain ``Image.open`` as the reference.

It also answers how far the decode may be reduced (``DecodeOptions.min_side``): for each
reduction, the bit moves relative to a full decode, and recall/precision at the default
thresholds, for ImageNet-sized (500x375) and large (1920x1080) images.

Run from the repository root::

    .venv/bin/python benchmarks/bench_quality.py --markdown benchmarks/_out/quality.md

Data goes to ``benchmarks/_data/quality`` (reused between runs); ``--quick`` is a smaller
smoke run. ``--closure`` runs :mod:`bench_closure` instead (recall and precision on the group
closure, photos and graphics, at the default settings) with the remaining arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image, ImageEnhance

sys.path.insert(0, str(Path(__file__).resolve().parent))
from photos import build_photo_corpus, read_manifest

MAX_T = 16  # thresholds swept: 0..MAX_T
BINS = 65  # Hamming distances 0..64
MIN_SIDES: tuple[int | None, ...] = (None, 256, 128, 64, 32)
SIZES = {"500x375": (500, 375), "1920x1080": (1920, 1080)}
DEFAULT_DATA = Path(__file__).resolve().parent / "_data" / "quality"

# Pair categories in the all-pairs histograms.
SAME_FAMILY, BASE_SAME_SOURCE, BASE_OTHER_SOURCE, COPY_SAME_SOURCE, COPY_OTHER_SOURCE = range(5)
N_CATEGORIES = 5


# --------------------------------------------------------------------------------------------------
# Planted near-duplicates
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Transform:
    name: str
    kind: str  # "core" (re-encode/resize/format), "photometric", "geometric-small", "geometric"
    fmt: str
    apply: Callable[[Image.Image, np.random.Generator], Image.Image]
    quality: int = 90


def _same(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return image


def _resize_half(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return image.resize((image.width // 2, image.height // 2), Image.Resampling.LANCZOS)


def _resize_half_and_back(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return _resize_half(image, rng).resize(image.size, Image.Resampling.BICUBIC)


def _brightness(delta: int) -> Callable[[Image.Image, np.random.Generator], Image.Image]:
    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        pixels = np.asarray(image, dtype=np.int16) + delta
        return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))

    return apply


def _contrast(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return ImageEnhance.Contrast(image).enhance(1.25)


def _crop(low: float, high: float) -> Callable[[Image.Image, np.random.Generator], Image.Image]:
    """Remove a fraction in [low, high] of each dimension, split at random between edges."""

    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        width, height = image.size
        fraction = rng.uniform(low, high)
        left = rng.uniform(0, fraction) * width
        top = rng.uniform(0, fraction) * height
        box = (left, top, left + (1 - fraction) * width, top + (1 - fraction) * height)
        return image.resize(image.size, Image.Resampling.LANCZOS, box=box)

    return apply


def _hflip(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)


def _rot90(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return image.transpose(Image.Transpose.ROTATE_90)


TRANSFORMS = (
    Transform("jpeg_q90", "core", "JPEG", _same, 90),
    Transform("jpeg_q70", "core", "JPEG", _same, 70),
    Transform("jpeg_q40", "core", "JPEG", _same, 40),
    Transform("resize_50", "core", "JPEG", _resize_half),
    Transform("resize_50_back", "core", "JPEG", _resize_half_and_back),
    Transform("to_png", "core", "PNG", _same),
    Transform("to_webp_q80", "core", "WEBP", _same, 80),
    Transform("bright_+20", "photometric", "JPEG", _brightness(20)),
    Transform("bright_-20", "photometric", "JPEG", _brightness(-20)),
    Transform("contrast_x1.25", "photometric", "JPEG", _contrast),
    Transform("crop_2-5%", "geometric-small", "JPEG", _crop(0.02, 0.05)),
    Transform("crop_10%", "geometric", "JPEG", _crop(0.10, 0.10)),
    Transform("hflip", "geometric", "JPEG", _hflip),
    Transform("rot90", "geometric", "JPEG", _rot90),
)
EXPECTED_KINDS = ("core", "photometric", "geometric-small")
_EXTENSIONS = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp"}
_VARIANTS_VERSION = 1


def _variant_path(out_dir: Path, stem: str, transform: Transform) -> Path:
    return out_dir / f"{stem}__{transform.name}{_EXTENSIONS[transform.fmt]}"


def _make_variants(job: tuple[str, str, int]) -> None:
    """Write every planted copy of one base image (skipping files already there)."""
    base_path, out_dir, seed = job
    base = Path(base_path)
    todo = [t for t in TRANSFORMS if not _variant_path(Path(out_dir), base.stem, t).exists()]
    if not todo:
        return
    with Image.open(base) as opened:
        image = opened.convert("RGB")
    for position, transform in enumerate(TRANSFORMS):
        path = _variant_path(Path(out_dir), base.stem, transform)
        if transform not in todo:
            continue
        rng = np.random.default_rng([seed, int(base.stem.split("_")[0]), position])
        copy = transform.apply(image, rng)
        temporary = path.with_name(path.stem + ".part" + path.suffix)
        options: dict[str, Any] = {}
        if transform.fmt in ("JPEG", "WEBP"):
            options["quality"] = transform.quality
        copy.save(temporary, transform.fmt, **options)
        os.replace(temporary, path)


def build_labelled_set(
    out_dir: Path, n_base: int, size: tuple[int, int], *, seed: int, workers: int
) -> pd.DataFrame:
    """Build (or reuse) the base crops and planted copies; return one row per image file.

    Columns: ``path``, ``family`` (the base index), ``source`` (the source photo), ``transform``
    (``"base"`` for the base crops) and ``is_base``.
    """
    base_dir = out_dir / "base"
    copy_dir = out_dir / "copies"
    copy_dir.mkdir(parents=True, exist_ok=True)
    base_paths = build_photo_corpus(base_dir, n_base, size=size, seed=seed)
    sources = {item["file"]: item["source"] for item in read_manifest(base_dir)["items"]}
    recipe_path = copy_dir / "recipe.json"
    base_manifest = (base_dir / "manifest.json").read_bytes()
    recipe = {
        "version": _VARIANTS_VERSION,
        "seed": seed,
        "transforms": [t.name for t in TRANSFORMS],
        # the copies are made from the base files: rebuild them whenever the bases change
        "bases": hashlib.sha256(base_manifest).hexdigest(),
    }
    if recipe_path.exists() and json.loads(recipe_path.read_text()) != recipe:
        for stale in copy_dir.iterdir():
            stale.unlink()
    recipe_path.write_text(json.dumps(recipe))

    planted = base_paths[::2]
    jobs = [(str(p), str(copy_dir), seed) for p in planted]
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_make_variants, jobs, chunksize=4))

    rows = []
    for index, path in enumerate(base_paths):
        source = sources[path.stem]
        rows.append((str(path), index, source, "base"))
        if index % 2 == 0:
            for transform in TRANSFORMS:
                copy = _variant_path(copy_dir, path.stem, transform)
                rows.append((str(copy), index, source, transform.name))
    frame = pd.DataFrame(rows, columns=["path", "family", "source", "transform"])
    frame["is_base"] = frame["transform"] == "base"
    return frame


# --------------------------------------------------------------------------------------------------
# Hashing
# --------------------------------------------------------------------------------------------------


@dataclass
class Hashes:
    phash: np.ndarray  # uint64
    dhash: np.ndarray  # uint64
    valid: np.ndarray  # bool
    seconds: float
    low_information: int = 0


def _imagehash_one(path: str) -> tuple[int, int]:
    import imagehash

    def to_int(value: Any) -> int:
        return int(str(value), 16)

    with Image.open(path) as image:
        return to_int(imagehash.phash(image)), to_int(imagehash.dhash(image))


def hash_reference(paths: Sequence[str], workers: int) -> Hashes:
    """``imagehash.phash`` / ``imagehash.dhash`` on a plain ``Image.open`` (the reference)."""
    start = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        pairs = list(pool.map(_imagehash_one, paths, chunksize=32))
    seconds = time.perf_counter() - start
    values = np.array(pairs, dtype=np.uint64).reshape(-1, 2)
    return Hashes(values[:, 0], values[:, 1], np.ones(len(paths), dtype=bool), seconds)


def hash_ours(paths: Sequence[str], min_side: int | None, workers: int) -> Hashes:
    from leakaudit.hashing import hash_sources
    from leakaudit.loading import DecodeOptions

    start = time.perf_counter()
    table = hash_sources(list(paths), decode=DecodeOptions(min_side=min_side), workers=workers)
    seconds = time.perf_counter() - start
    valid = np.asarray(table.valid, dtype=bool)
    low = int(np.count_nonzero(np.asarray(table.low_information, dtype=bool) & valid))
    return Hashes(
        np.asarray(table.phash, dtype=np.uint64),
        np.asarray(table.dhash, dtype=np.uint64),
        valid,
        seconds,
        low,
    )


# --------------------------------------------------------------------------------------------------
# Pair statistics
# --------------------------------------------------------------------------------------------------


def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.bitwise_count(np.bitwise_xor(a, b)).astype(np.int64)


@dataclass
class PairStats:
    """Everything the tables need about one way of hashing one labelled set."""

    joint: np.ndarray  # (N_CATEGORIES, 65, 65) counts of pairs by (pHash distance, dHash distance)
    planted_p: pd.DataFrame  # one row per planted (base, copy) pair: transform, dp, dd
    n_invalid: int


def pair_stats(frame: pd.DataFrame, hashes: Hashes, block: int = 512) -> PairStats:
    valid = hashes.valid
    phash, dhash = hashes.phash[valid], hashes.dhash[valid]
    family = frame["family"].to_numpy()[valid]
    source = pd.factorize(frame["source"])[0][valid]
    is_base = frame["is_base"].to_numpy()[valid]
    n = len(phash)
    joint = np.zeros(N_CATEGORIES * BINS * BINS, dtype=np.int64)
    for start in range(0, n, block):
        rows = np.arange(start, min(start + block, n))
        cols = np.arange(start, n)
        dp = hamming(phash[rows, None], phash[None, cols])
        dd = hamming(dhash[rows, None], dhash[None, cols])
        same_family = family[rows, None] == family[None, cols]
        same_source = source[rows, None] == source[None, cols]
        both_base = is_base[rows, None] & is_base[None, cols]
        category = np.where(
            both_base,
            np.where(same_source, BASE_SAME_SOURCE, BASE_OTHER_SOURCE),
            np.where(same_source, COPY_SAME_SOURCE, COPY_OTHER_SOURCE),
        )
        category = np.where(same_family, SAME_FAMILY, category)
        upper = cols[None, :] > rows[:, None]
        code = (category * BINS + dp) * BINS + dd
        joint += np.bincount(code[upper], minlength=joint.size)
    joint = joint.reshape(N_CATEGORIES, BINS, BINS)

    index = {
        (f, t): i for i, (f, t) in enumerate(zip(frame["family"], frame["transform"], strict=True))
    }
    planted = []
    for i, (fam, transform) in enumerate(zip(frame["family"], frame["transform"], strict=True)):
        if transform == "base":
            continue
        b = index[(fam, "base")]
        if not (valid[i] and valid[b]):
            continue
        planted.append(
            (
                transform,
                int(hamming(hashes.phash[b], hashes.phash[i])),
                int(hamming(hashes.dhash[b], hashes.dhash[i])),
            )
        )
    planted_frame = pd.DataFrame(planted, columns=["transform", "dp", "dd"])
    return PairStats(joint, planted_frame, int(np.count_nonzero(~valid)))


# Categories of the unrelated pool's pairs.
POOL_OTHER_SOURCE, POOL_SAME_SOURCE, POOL_OVERLAPPING = range(3)
POOL_MAX_IOU = 0.6  # same-source crops overlapping more than this are left out as ambiguous


def build_pool(out_dir: Path, n: int, *, seed: int) -> pd.DataFrame:
    """Distinct crops only (no copies), for the rate of false pairs between unrelated images."""
    paths = build_photo_corpus(out_dir, n, size=SIZES["500x375"], seed=seed)
    items = read_manifest(out_dir)["items"][:n]
    boxes = np.array([item["box"] for item in items], dtype=np.float64)
    return pd.DataFrame(
        {
            "path": [str(p) for p in paths],
            "source": [item["source"] for item in items],
            "x0": boxes[:, 0],
            "y0": boxes[:, 1],
            "x1": boxes[:, 2],
            "y1": boxes[:, 3],
        }
    )


def box_iou(box: np.ndarray, area: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(len(rows), len(cols)) intersection over union of the crop boxes ``(x0, y0, x1, y1)``."""
    width = np.minimum(box[rows, None, 2], box[None, cols, 2]) - np.maximum(
        box[rows, None, 0], box[None, cols, 0]
    )
    height = np.minimum(box[rows, None, 3], box[None, cols, 3]) - np.maximum(
        box[rows, None, 1], box[None, cols, 1]
    )
    inter = np.clip(width, 0, None) * np.clip(height, 0, None)
    iou: np.ndarray = inter / (area[rows, None] + area[None, cols] - inter)
    return iou


def pool_stats(pool: pd.DataFrame, hashes: Hashes, block: int = 512) -> np.ndarray:
    """(3, 65, 65) counts of the pool's pairs by category, pHash distance and dHash distance."""
    valid = hashes.valid
    phash, dhash = hashes.phash[valid], hashes.dhash[valid]
    source = pd.factorize(pool["source"])[0][valid]
    box = pool[["x0", "y0", "x1", "y1"]].to_numpy()[valid]
    area = (box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1])
    n = len(phash)
    joint = np.zeros(3 * BINS * BINS, dtype=np.int64)
    for start in range(0, n, block):
        rows = np.arange(start, min(start + block, n))
        cols = np.arange(start, n)
        dp = hamming(phash[rows, None], phash[None, cols])
        dd = hamming(dhash[rows, None], dhash[None, cols])
        iou = box_iou(box, area, rows, cols)
        same_source = source[rows, None] == source[None, cols]
        category = np.where(
            same_source,
            np.where(iou > POOL_MAX_IOU, POOL_OVERLAPPING, POOL_SAME_SOURCE),
            POOL_OTHER_SOURCE,
        )
        upper = cols[None, :] > rows[:, None]
        code = (category * BINS + dp) * BINS + dd
        joint += np.bincount(code[upper], minlength=joint.size)
    return joint.reshape(3, BINS, BINS)


def pool_rate_table(named: dict[str, np.ndarray]) -> list[str]:
    """False pairs per million unrelated pairs, per threshold, for each method and rule."""
    header = ["t"]
    columns = []
    for name, joint in named.items():
        for rule in RULES:
            if name.startswith("imagehash") and rule == "both":
                continue
            header.append(f"{name} {rule}")
            columns.append((joint, rule))
    rows = []
    for t in range(MAX_T + 1):
        row: list[Any] = [t]
        for joint, rule in columns:
            unrelated = joint[[POOL_OTHER_SOURCE, POOL_SAME_SOURCE]]
            flagged = int((unrelated * _flag_mask(rule, t)).sum())
            row.append(f"{1e6 * flagged / max(int(unrelated.sum()), 1):.2f} ({flagged})")
        rows.append(row)
    return _table(header, rows)


def pool_distribution_table(named: dict[str, np.ndarray]) -> list[str]:
    quantiles = (0.0, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.05, 0.5)
    header = ["hash", "pairs", "min", "0.0001%", "0.001%", "0.01%", "0.1%", "1%", "5%", "median"]
    rows = []
    for name, joint in named.items():
        for attr, axis in (("pHash", 2), ("dHash", 1)):
            for label, cats in (
                ("unrelated", [POOL_OTHER_SOURCE, POOL_SAME_SOURCE]),
                ("other source", [POOL_OTHER_SOURCE]),
                (f"same source, IoU <= {POOL_MAX_IOU}", [POOL_SAME_SOURCE]),
                (f"same source, IoU > {POOL_MAX_IOU} (excluded)", [POOL_OVERLAPPING]),
            ):
                hist = joint[cats].sum(axis=(0, axis))
                total = int(hist.sum())
                cumulative = np.cumsum(hist)
                values: list[Any] = [
                    int(np.searchsorted(cumulative, max(q * total, 1), side="left"))
                    if total
                    else "-"
                    for q in quantiles
                ]
                rows.append([f"{name} {attr} ({label})", total, *values])
    return _table(header, rows)


RULES = ("phash", "dhash", "both")


def _flag_mask(rule: str, t: int) -> np.ndarray:
    """(65, 65) boolean mask over (pHash distance, dHash distance) of pairs the rule flags."""
    d = np.arange(BINS)
    p_ok = (d <= t)[:, None]
    d_ok = (d <= t)[None, :]
    if rule == "phash":
        return np.broadcast_to(p_ok, (BINS, BINS))
    if rule == "dhash":
        return np.broadcast_to(d_ok, (BINS, BINS))
    return p_ok & d_ok


def _planted_hits(planted: pd.DataFrame, rule: str, t: int) -> pd.Series:
    if rule == "phash":
        return planted["dp"] <= t
    if rule == "dhash":
        return planted["dd"] <= t
    return (planted["dp"] <= t) & (planted["dd"] <= t)


def _kind(transform: str) -> str:
    return next(t.kind for t in TRANSFORMS if t.name == transform)


def score(stats: PairStats, rule: str, t: int) -> dict[str, Any]:
    mask = _flag_mask(rule, t)
    flagged_by_cat = (stats.joint * mask).sum(axis=(1, 2))
    flagged = int(flagged_by_cat.sum())
    correct = int(flagged_by_cat[SAME_FAMILY])
    unrelated = stats.joint[[BASE_SAME_SOURCE, BASE_OTHER_SOURCE]].sum(axis=(1, 2))
    false_unrelated = flagged_by_cat[[BASE_SAME_SOURCE, BASE_OTHER_SOURCE]]
    planted = stats.planted_p
    hits = _planted_hits(planted, rule, t)
    kinds = planted["transform"].map(_kind)
    expected = kinds.isin(EXPECTED_KINDS)
    core = kinds == "core"
    per_transform = hits.groupby(planted["transform"]).mean()
    return {
        "t": t,
        "flagged": flagged,
        "correct": correct,
        "precision": correct / flagged if flagged else 1.0,
        "recall_core": float(hits[core].mean()),
        "recall_expected": float(hits[expected].mean()),
        "recall_all": float(hits.mean()),
        "false_per_m": 1e6 * false_unrelated.sum() / max(unrelated.sum(), 1),
        "false_per_m_same_source": 1e6 * false_unrelated[0] / max(unrelated[0], 1),
        "false_per_m_other_source": 1e6 * false_unrelated[1] / max(unrelated[1], 1),
        "false_unrelated": int(false_unrelated.sum()),
        "per_transform": per_transform.to_dict(),
    }


# --------------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------------


def _pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return [*lines, ""]


def threshold_table(stats: PairStats, rule: str) -> list[str]:
    rows = []
    for t in range(MAX_T + 1):
        s = score(stats, rule, t)
        rows.append(
            (
                t,
                s["flagged"],
                s["correct"],
                _pct(s["precision"], 2),
                _pct(s["recall_core"]),
                _pct(s["recall_expected"]),
                _pct(s["recall_all"]),
                f"{s['false_per_m']:.0f}",
                f"{s['false_per_m_same_source']:.0f}",
                f"{s['false_per_m_other_source']:.0f}",
            )
        )
    header = (
        "t",
        "flagged",
        "correct",
        "precision",
        "recall core",
        "recall expected",
        "recall all",
        "false /1M unrelated",
        "same source",
        "other source",
    )
    return _table(header, rows)


def per_transform_table(stats: PairStats, rule: str) -> list[str]:
    names = [t.name for t in TRANSFORMS]
    rows = []
    for t in range(MAX_T + 1):
        per = score(stats, rule, t)["per_transform"]
        rows.append([t] + [f"{100 * per.get(name, float('nan')):.0f}" for name in names])
    return _table(["t", *names], rows)


def distance_summary_table(named: dict[str, PairStats]) -> list[str]:
    """Median / 90th percentile / max distance of each planted transformation, per method."""
    header = ["transform", "kind"] + [f"{name} med/p90/max" for name in named]
    rows = []
    for transform in TRANSFORMS:
        row: list[Any] = [transform.name, transform.kind]
        for name, stats in named.items():
            column = "dp" if name.endswith("pHash") else "dd"
            d = stats.planted_p.loc[stats.planted_p["transform"] == transform.name, column]
            row.append(f"{d.median():.0f} / {d.quantile(0.9):.0f} / {d.max()}")
        rows.append(row)
    return _table(header, rows)


def unrelated_distribution_table(named: dict[str, PairStats]) -> list[str]:
    """Percentiles of the distance between distinct base crops."""
    quantiles = (0.0, 1e-5, 1e-4, 1e-3, 1e-2, 0.05, 0.5)
    header = ["method", "pairs", "min", "0.001%", "0.01%", "0.1%", "1%", "5%", "median"]
    rows = []
    for name, stats in named.items():
        axis = 2 if name.endswith("pHash") else 1
        for label, cats in (
            ("all", [BASE_SAME_SOURCE, BASE_OTHER_SOURCE]),
            ("same source", [BASE_SAME_SOURCE]),
            ("other source", [BASE_OTHER_SOURCE]),
        ):
            hist = stats.joint[cats].sum(axis=(0, axis))
            total = int(hist.sum())
            cumulative = np.cumsum(hist)
            values = [
                int(np.searchsorted(cumulative, max(q * total, 1), side="left")) for q in quantiles
            ]
            rows.append([f"{name} ({label})", total, *values])
    return _table(header, rows)


def _strip_gradient(path: str) -> float:
    """Mean |difference| between horizontal neighbours of the 9x8 dHash thumbnail (grey levels)."""
    from leakaudit.loading import load_reduced_grey

    strip = np.asarray(
        load_reduced_grey(path).resize((9, 8), Image.Resampling.LANCZOS), dtype=np.float64
    )
    return float(np.abs(np.diff(strip, axis=1)).mean())


def pool_close_pairs(pool: pd.DataFrame, hashes: Hashes, max_t: int) -> pd.DataFrame:
    """Unrelated pool pairs within ``max_t`` bits by pHash or dHash: columns a, b, dp, dd."""
    found = []
    n = len(pool)
    source = pool["source"].to_numpy()
    box = pool[["x0", "y0", "x1", "y1"]].to_numpy()
    for a in range(n - 1):
        b = np.arange(a + 1, n)
        dp = hamming(hashes.phash[a], hashes.phash[b])
        dd = hamming(hashes.dhash[a], hashes.dhash[b])
        keep = ((dp <= max_t) | (dd <= max_t)) & hashes.valid[a] & hashes.valid[b]
        for j, p, d in zip(b[keep], dp[keep], dd[keep], strict=True):
            if source[a] == source[j]:
                x = min(box[a, 2], box[j, 2]) - max(box[a, 0], box[j, 0])
                y = min(box[a, 3], box[j, 3]) - max(box[a, 1], box[j, 1])
                inter = max(x, 0) * max(y, 0)
                areas = np.prod(box[[a, j], 2:] - box[[a, j], :2], axis=1).sum()
                if inter / (areas - inter) > POOL_MAX_IOU:
                    continue
            found.append((a, int(j), int(p), int(d)))
    return pd.DataFrame(found, columns=["a", "b", "dp", "dd"])


def false_pairs_by_source_table(
    pool: pd.DataFrame,
    close: pd.DataFrame,
    gradient: np.ndarray,
    thresholds: dict[str, Sequence[int]],
) -> list[str]:
    """Which source photos the false pairs come from, and how flat their images are."""
    names = pool["source"].to_numpy()
    rows = []
    for rule, ts in thresholds.items():
        for t in ts:
            hit = close[_planted_hits(close, rule, t)]
            pairs = pd.Series(
                [
                    "-".join(sorted((names[a], names[b])))
                    for a, b in zip(hit["a"], hit["b"], strict=True)
                ],
                dtype=object,
            )
            top = ", ".join(f"{k} {v}" for k, v in pairs.value_counts().head(5).items())
            involved = np.unique(np.concatenate([hit["a"], hit["b"]]).astype(np.int64))
            flatness = f"{np.median(gradient[involved]):.1f}" if len(involved) else "-"
            rows.append([f"{rule} <= {t}", len(hit), flatness, top or "-"])
    header = [
        "rule",
        "false pairs",
        "median gradient of their images",
        "by source pair (top 5)",
    ]
    return _table(header, rows)


def bit_move_table(
    paths: Sequence[str], full: Hashes, reduced: dict[int | None, Hashes], size_label: str
) -> list[str]:
    from leakaudit.loading import reduction_scale

    width, height = SIZES[size_label]
    fmt = pd.Series([Path(p).suffix for p in paths])
    rows = []
    for min_side, hashes in reduced.items():
        if min_side is None:
            continue
        ok = full.valid & hashes.valid
        for subset, label in (
            (np.ones(len(paths), bool), "all"),
            (fmt.eq(".jpg").to_numpy(), "JPEG"),
        ):
            keep = ok & subset
            row: list[Any] = [
                size_label,
                min_side,
                f"1/{reduction_scale(width, height, min_side)}",
                label,
                int(keep.sum()),
            ]
            for attr in ("phash", "dhash"):
                moves = hamming(getattr(hashes, attr)[keep], getattr(full, attr)[keep])
                row += [
                    _pct(np.mean(moves == 0)),
                    _pct(np.mean(moves <= 1)),
                    _pct(np.mean(moves <= 2)),
                    _pct(np.mean(moves > 2)),
                    f"{moves.mean():.2f}",
                ]
            rows.append(row)
    header = ["size", "min_side", "scale (landscape)", "files", "n"]
    for name in ("pHash", "dHash"):
        header += [f"{name} =0", "<=1", "<=2", ">2", "mean"]
    return _table(header, rows)


def format_consistency_table(
    frame: pd.DataFrame, reduced: dict[int | None, Hashes], size_label: str
) -> list[str]:
    """Distance between each base JPEG and its copies in another container (same pixels)."""
    rows = []
    bases = frame[frame["is_base"]].set_index("family")
    for transform in ("to_png", "to_webp_q80", "jpeg_q90"):
        copies = frame[frame["transform"] == transform]
        b_idx = bases.loc[copies["family"], "row"].to_numpy()
        c_idx = copies["row"].to_numpy()
        for min_side, hashes in reduced.items():
            row: list[Any] = [size_label, transform, min_side]
            for attr in ("phash", "dhash"):
                h = getattr(hashes, attr)
                d = hamming(h[b_idx], h[c_idx])
                row += [_pct(np.mean(d == 0)), _pct(np.mean(d <= 2)), int(d.max())]
            rows.append(row)
    header = ["size", "copy", "min_side", "pHash =0", "<=2", "max", "dHash =0", "<=2", "max"]
    return _table(header, rows)


def reduction_quality_table(
    stats_by_min_side: dict[int | None, PairStats], size_label: str, thresholds: dict[str, int]
) -> list[str]:
    rows = []
    for min_side, stats in stats_by_min_side.items():
        for rule in RULES:
            t = thresholds[rule]
            s = score(stats, rule, t)
            per = s["per_transform"]
            core_missed = int(
                (~_planted_hits(stats.planted_p, rule, t))[
                    stats.planted_p["transform"].map(_kind) == "core"
                ].sum()
            )
            rows.append(
                [
                    size_label,
                    min_side,
                    f"{rule} <= {t}",
                    _pct(s["recall_core"]),
                    core_missed,
                    _pct(s["recall_expected"]),
                    _pct(per.get("resize_50", float("nan"))),
                    _pct(per.get("to_png", float("nan"))),
                    _pct(per.get("bright_+20", float("nan"))),
                    _pct(per.get("crop_2-5%", float("nan"))),
                    _pct(s["precision"], 2),
                    f"{s['false_per_m']:.0f}",
                ]
            )
    header = [
        "size",
        "min_side",
        "rule",
        "recall core",
        "core missed",
        "recall expected",
        "resize_50",
        "to_png",
        "bright_+20",
        "crop_2-5%",
        "precision",
        "false /1M unrelated",
    ]
    return _table(header, rows)


# --------------------------------------------------------------------------------------------------
# Failure classes of the judge (issue 24): the default audit on smooth tiles, turned quadrants,
# portrait strips, and real copies of the same smooth pictures
# --------------------------------------------------------------------------------------------------

FAILURES_DATA = Path(__file__).resolve().parent / "_data" / "failures"
_FAILURES_VERSION = 3
#: Classes that must never link (pairs of different pictures) and classes of planted copies.
NEVER_LINKED = ("smooth tiles", "disc quadrants", "photo copies")
COPY_KINDS = ("crop 5-15%", "rotate 4-6", "mirror", "recolour", "portrait strip")
#: Colour copies of detailed photos (crops of real photographs): issue 24's first class.
PHOTO_COPY_KINDS = (
    "photo: grey JPEG",
    "photo: grey 16-bit PNG",
    "photo: sepia",
    "photo: channel gain",
    "photo: channels swapped",
    "photo: brighter, less contrast",
)
_SMOOTH_SIZE = (960, 720)


def _smooth_picture(kind: str, seed: int) -> Image.Image:
    """A picture with little detail: a gradient, a vignette, one soft edge, a blurred photo."""
    from PIL import ImageFilter

    rng = np.random.default_rng(seed)
    width, height = _SMOOTH_SIZE
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    x, y = x / width - 0.5, y / height - 0.5
    c0, c1 = rng.uniform(20, 235, 3), rng.uniform(20, 235, 3)
    if kind == "photo":
        from photos import source_photos

        photo = source_photos()[seed % 19]
        photo = photo.resize(_SMOOTH_SIZE, Image.Resampling.BICUBIC)
        return photo.filter(ImageFilter.GaussianBlur(18 + 6 * (seed % 3)))
    if kind == "gradient":
        angle = rng.uniform(0, 2 * np.pi)
        t = np.clip(x * np.cos(angle) + y * np.sin(angle) + 0.5, 0, 1)
    elif kind == "vignette":
        cx, cy = rng.uniform(-0.15, 0.15, 2)
        t = np.clip(np.hypot(x - cx, (y - cy) * 0.75) * 1.6, 0, 1) ** 1.5
    else:  # "edge": one soft straight edge
        angle = rng.uniform(0, 2 * np.pi)
        offset = rng.uniform(-0.2, 0.2)
        t = 1 / (1 + np.exp(-(x * np.cos(angle) + y * np.sin(angle) - offset) * 12))
    pixels = c0 + (c1 - c0) * t[..., None]
    # Half of them dithered as wallpapers are (sensor or encoder noise, not texture).
    pixels += rng.normal(0, 1.5 * (seed % 2), pixels.shape)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def _disc_picture(seed: int, side: int = 800) -> Image.Image:
    """A retina-like photo: an orange disc or arc centred on black, symmetric but for noise."""
    rng = np.random.default_rng(seed)
    y, x = (np.mgrid[0:side, 0:side].astype(np.float32) - (side - 1) / 2) / (side / 2)
    r = np.hypot(x, y)
    radius = rng.uniform(0.6, 0.9)
    softness = (0.005, 0.02, 0.06)[seed % 3]  # a sharp edge to a soft one
    disc = 1 / (1 + np.exp((r - radius) / softness))
    if seed % 4 == 3:  # a bright arc (ring) rather than a filled disc
        disc = disc * (1 - 1 / (1 + np.exp((r - radius * 0.8) / softness)))
    shade = 1 - 0.35 * (r / radius) ** 2  # brighter centre, as a fundus photo
    colour = np.array([rng.uniform(210, 250), rng.uniform(90, 150), rng.uniform(10, 40)])
    pixels = disc[..., None] * shade[..., None] * colour + rng.normal(
        0, (0, 2, 4)[seed % 3], (side, side, 3)
    )
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def _tiles(image: Image.Image, columns: int, rows: int) -> list[Image.Image]:
    width, height = image.size
    w, h = width // columns, height // rows
    return [
        image.crop((i * w, j * h, (i + 1) * w, (j + 1) * h))
        for j in range(rows)
        for i in range(columns)
    ]


def _copy_of(image: Image.Image, kind: str, rng: np.random.Generator) -> Image.Image:
    """A real copy of ``image`` (:data:`COPY_KINDS` but the strip)."""
    if kind == "crop 5-15%":
        return _crop(0.05, 0.15)(image, rng)
    if kind == "rotate 4-6":
        angle = rng.uniform(4, 6) * rng.choice([-1, 1])
        rotated = image.rotate(angle, Image.Resampling.BICUBIC)
        width, height = image.size
        cos, sin = np.cos(np.radians(abs(angle))), np.sin(np.radians(abs(angle)))
        scale = min(width / (width * cos + height * sin), height / (width * sin + height * cos))
        w, h = width * scale, height * scale
        box = ((width - w) / 2, (height - h) / 2, (width + w) / 2, (height + h) / 2)
        return rotated.resize(image.size, Image.Resampling.LANCZOS, box=box)
    if kind == "mirror":
        return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    if kind == "recolour":
        gains = np.array([1.15, 0.95, 0.8]) if rng.random() < 0.5 else np.array([0.85, 1.0, 1.2])
        pixels = np.asarray(image, np.float32) * gains + 8
        return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    raise ValueError(kind)


def _photo_copy(image: Image.Image, kind: str, rng: np.random.Generator) -> Image.Image:
    """A colour copy of a photo (:data:`PHOTO_COPY_KINDS`); saved by the caller."""
    pixels = np.asarray(image.convert("RGB"), np.float32)
    if kind in ("photo: grey JPEG", "photo: grey 16-bit PNG"):
        return image.convert("L")
    if kind == "photo: sepia":
        luma = pixels @ np.array([0.299, 0.587, 0.114], np.float32)
        toned = luma[..., None] * np.array([1.07, 0.74, 0.43], np.float32) + 20
        return Image.fromarray(np.clip(toned, 0, 255).astype(np.uint8))
    if kind == "photo: channel gain":
        gains = rng.uniform(0.7, 1.3, 3).astype(np.float32)
        return Image.fromarray(np.clip(pixels * gains, 0, 255).astype(np.uint8))
    if kind == "photo: channels swapped":
        return Image.fromarray(pixels[..., ::-1].astype(np.uint8))
    if kind == "photo: brighter, less contrast":
        return Image.fromarray(np.clip((pixels - 128) * 0.75 + 128 + 30, 0, 255).astype(np.uint8))
    raise ValueError(kind)


def build_failure_set(out_dir: Path, n: int, seed: int = 0) -> pd.DataFrame:
    """Write the failure classes under ``out_dir/{train,val,test}``; one row per image:
    ``split, name, family, cls`` (``family``: the picture it shows; a copy shares its
    original's; ``cls``: the class, a copy kind for planted copies)."""
    manifest = out_dir / "manifest.csv"
    stamp = out_dir / "version.json"
    wanted = {"version": _FAILURES_VERSION, "n": n, "seed": seed}
    if manifest.exists() and stamp.exists() and json.loads(stamp.read_text()) == wanted:
        return pd.read_csv(manifest)
    rows: list[dict[str, Any]] = []
    splits = ("train", "test", "val")

    def save(
        image: Image.Image, split: str, name: str, family: str, cls: str, copy: bool = False
    ) -> None:
        (out_dir / split).mkdir(parents=True, exist_ok=True)
        (image if image.mode == "L" else image.convert("RGB")).save(
            out_dir / split / f"{name}.jpg", quality=92
        )
        rows.append(
            {"split": split, "name": f"{name}.jpg", "family": family, "cls": cls, "copy": copy}
        )

    rng = np.random.default_rng(seed)
    kinds = ("gradient", "vignette", "edge", "photo")
    for k in range(n):
        # (a) tiles of one smooth picture: 4 corners or 6 tiles, in turn across the splits.
        kind = kinds[k % len(kinds)]
        picture = _smooth_picture(kind, seed * 1000 + k)
        tiles = _tiles(picture, 2, 2) if k % 2 == 0 else _tiles(picture, 3, 2)
        for t, tile in enumerate(tiles):
            family = f"s{k}_{kind}_t{t}"
            split = splits[t % 3]
            save(tile, split, family, family, "smooth tiles")
            if t < 2:  # real copies of two tiles, in another split
                for c, copy_kind in enumerate(COPY_KINDS[:4]):
                    other = splits[(t + 1 + c % 2) % 3]
                    save(
                        _copy_of(tile, copy_kind, rng),
                        other,
                        f"{family}_c{c}",
                        family,
                        copy_kind,
                        True,
                    )
        # (b) the four quadrants of a retina-like disc.
        quadrants = _tiles(_disc_picture(seed * 1000 + k), 2, 2)
        for t, quadrant in enumerate(quadrants):
            family = f"d{k}_q{t}"
            save(quadrant, splits[t % 3], family, family, "disc quadrants")
    # The real retina photo's quadrants (textured: vessels) and a real copy of it.
    from photos import SOURCE_NAMES, source_photos

    photos = source_photos()
    retina = photos[SOURCE_NAMES.index("retina")]
    for t, quadrant in enumerate(_tiles(retina.resize((800, 800)), 2, 2)):
        save(quadrant, splits[t % 3], f"retina_q{t}", f"retina_q{t}", "disc quadrants")
    # Real copies of a retina photo (generated discs differ by nothing but noise: a
    # copy of one is indistinguishable from another, so only the real one is copied).
    whole = retina.resize((600, 600))
    save(whole, "train", "retina", "retina", "disc quadrants")
    for c, copy_kind in enumerate(COPY_KINDS[:4]):
        save(_copy_of(whole, copy_kind, rng), "test", f"retina_c{c}", "retina", copy_kind, True)
    # (c) portrait strips: a 9:16 strip of a 16:9 photo.
    for k, photo in enumerate(photos[: min(n, len(photos))]):
        width, height = photo.size
        h = min(height, int(width * 9 / 16))
        landscape = photo.crop((0, 0, int(h * 16 / 9), h)).resize(
            (1024, 576), Image.Resampling.LANCZOS
        )
        x0 = int(rng.uniform(0, 1024 - 324))
        strip = landscape.crop((x0, 0, x0 + 324, 576)).resize((360, 640), Image.Resampling.LANCZOS)
        family = f"p{k}_{SOURCE_NAMES[k]}"
        save(landscape, "train", family, family, "portrait strip")
        save(strip, "test", f"{family}_strip", family, "portrait strip", True)
    # (d) colour copies of detailed photos: real photo crops, each copied three ways.
    corpus = build_photo_corpus(
        out_dir / "_photos", 2 * len(PHOTO_COPY_KINDS) * n // 3, size=(400, 300), seed=seed + 7
    )
    for k, path in enumerate(corpus):
        family = f"c{k}_{path.stem.split('_', 1)[1]}"
        with Image.open(path) as opened:
            photo = opened.convert("RGB")
        save(photo, "train", family, family, "photo copies")
        for c in range(3):
            kind = PHOTO_COPY_KINDS[(3 * k + c) % len(PHOTO_COPY_KINDS)]
            copy = _photo_copy(photo, kind, rng)
            split = splits[1 + c % 2]
            name = f"{family}_c{c}"
            if kind == "photo: grey 16-bit PNG":
                (out_dir / split).mkdir(parents=True, exist_ok=True)
                wide = np.asarray(copy, np.uint16) * 257
                Image.fromarray(wide.astype("<u2")).save(out_dir / split / f"{name}.png")
                rows.append(
                    {
                        "split": split,
                        "name": f"{name}.png",
                        "family": family,
                        "cls": kind,
                        "copy": True,
                    }
                )
            else:
                save(copy, split, name, family, kind, True)
    frame = pd.DataFrame(rows)
    frame.to_csv(manifest, index=False)
    stamp.write_text(json.dumps(wanted))
    return frame


def score_failures(out_dir: Path, frame: pd.DataFrame, workers: int) -> dict[str, Any]:
    """The default audit of the failure set: recall of each copy kind, and the pairs of
    different pictures of each never-linked class found in one group."""
    import leakaudit

    start = time.perf_counter()
    report = leakaudit.audit_splits(
        {s: out_dir / s for s in ("train", "val", "test")}, cache=False, workers=workers
    )
    seconds = time.perf_counter() - start
    table = report.table
    key = list(zip(table["split"], table["path"].map(lambda p: Path(str(p)).name), strict=True))
    group = dict(zip(key, table["group_id"].to_numpy(), strict=True))
    frame = frame.assign(
        group=[group[(s, n)] for s, n in zip(frame["split"], frame["name"], strict=True)]
    )
    originals = frame[~frame["copy"]]
    original_group = dict(zip(originals["family"], originals["group"], strict=True))
    recall = {}
    missed: dict[str, list[str]] = {}
    for kind in (*COPY_KINDS, *PHOTO_COPY_KINDS):
        copies = frame[(frame["cls"] == kind) & frame["copy"]]
        hits = [
            original_group[f] == g for f, g in zip(copies["family"], copies["group"], strict=True)
        ]
        recall[kind] = (int(sum(hits)), len(hits))
        missed[kind] = [n for n, hit in zip(copies["name"], hits, strict=True) if not hit]
    false_pairs = {cls: 0 for cls in NEVER_LINKED}
    false_images = {cls: set() for cls in NEVER_LINKED}
    cls_of = {f: c for f, c in zip(originals["family"], originals["cls"], strict=True)}
    for _, members in frame.groupby("group"):
        families = sorted(set(members["family"]))
        for i, fa in enumerate(families):
            for fb in families[i + 1 :]:
                for cls in {cls_of.get(fa), cls_of.get(fb)} & set(NEVER_LINKED):
                    false_pairs[cls] += 1
                    false_images[cls].update(members["name"])
    counts = originals["cls"].value_counts().to_dict()
    return {
        "recall": recall,
        "missed": missed,
        "false_pairs": false_pairs,
        "false_images": {c: len(v) for c, v in false_images.items()},
        "originals": counts,
        "images": len(frame),
        "seconds": seconds,
    }


def failures_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        description="bench_quality --failures: the judge's failure classes"
    )
    parser.add_argument("--n", type=int, default=12, help="smooth pictures and discs (default 12)")
    parser.add_argument("--out", type=Path, default=FAILURES_DATA)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    frame = build_failure_set(args.out, args.n, args.seed)
    figures = score_failures(args.out, frame, args.workers)
    print("| class | measured |\n|---|---:|")
    for kind, (hit, total) in figures["recall"].items():
        print(f"| {kind}: copies found | {hit}/{total} ({hit / max(total, 1):.0%}) |")
    for cls in NEVER_LINKED:
        print(
            f"| {cls} ({figures['originals'].get(cls, 0)} pictures): pairs of different ones "
            f"linked (images) | {figures['false_pairs'][cls]} ({figures['false_images'][cls]}) |"
        )
    print(f"| audit of {figures['images']} images, s | {figures['seconds']:.0f} |")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=int))
    return 0


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--n-base", type=int, default=600, help="base crops at 500x375 (default 600)"
    )
    parser.add_argument(
        "--n-base-large", type=int, default=120, help="base crops at 1920x1080 (default 120)"
    )
    parser.add_argument(
        "--n-pool",
        type=int,
        default=3000,
        help="distinct crops for the unrelated-pairs rate (default 3000)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_DATA, help="data folder (reused)")
    parser.add_argument("--quick", action="store_true", help="small smoke run (120 + 24 bases)")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--phash-threshold", type=int, default=6, help="default pHash threshold")
    parser.add_argument("--dhash-threshold", type=int, default=6, help="default dHash threshold")
    parser.add_argument(
        "--both-threshold", type=int, default=8, help="default threshold of the 'both' rule"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.n_base, args.n_base_large = min(args.n_base, 120), min(args.n_base_large, 24)
        args.n_pool = min(args.n_pool, 500)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    rest = list(sys.argv[1:] if argv is None else argv)
    if "--failures" in rest:
        rest.remove("--failures")
        return failures_main(rest)
    if "--closure" in rest:
        rest.remove("--closure")
        import bench_closure

        return bench_closure.main(rest)
    args = _parse_args(argv)
    thresholds = {
        "phash": args.phash_threshold,
        "dhash": args.dhash_threshold,
        "both": args.both_threshold,
    }
    started = time.perf_counter()
    out: list[str] = []

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    out += [
        "# Detection quality on real photos",
        "",
        f"Command: `{' '.join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])}`",
        "",
        _versions(),
        "",
    ]
    sets: dict[str, tuple[pd.DataFrame, dict[int | None, Hashes], Hashes]] = {}
    for size_label, n_base in (("500x375", args.n_base), ("1920x1080", args.n_base_large)):
        if n_base <= 0:
            continue
        frame = build_labelled_set(
            args.out / size_label, n_base, SIZES[size_label], seed=args.seed, workers=args.workers
        )
        frame["row"] = np.arange(len(frame))
        log(
            f"{size_label}: {len(frame)} images "
            f"({n_base} bases, {len(TRANSFORMS)} copies of every second one)"
        )
        paths = frame["path"].tolist()
        ours = {}
        for min_side in MIN_SIDES:
            ours[min_side] = hash_ours(paths, min_side, args.workers)
            log(f"{size_label}: ours min_side={min_side}: {ours[min_side].seconds:.1f}s")
        reference = hash_reference(paths, args.workers)
        log(f"{size_label}: imagehash reference: {reference.seconds:.1f}s")
        sets[size_label] = (frame, ours, reference)

    default_min_side = _default_min_side()
    pool_joints: dict[str, np.ndarray] = {}
    if args.n_pool > 1:
        pool = build_pool(args.out / "pool", args.n_pool, seed=args.seed + 1)
        pool_paths = pool["path"].tolist()
        for min_side in dict.fromkeys([default_min_side, None]):
            label = f"ours min_side={min_side}"
            pool_joints[label] = pool_stats(pool, hash_ours(pool_paths, min_side, args.workers))
        pool_joints["imagehash"] = pool_stats(pool, hash_reference(pool_paths, args.workers))
        pool_default = hash_ours(pool_paths, default_min_side, args.workers)
        pool_close = pool_close_pairs(pool, pool_default, MAX_T)
        with ProcessPoolExecutor(args.workers) as executor:
            pool_gradient = np.array(list(executor.map(_strip_gradient, pool_paths, chunksize=32)))
        log(f"unrelated pool: {len(pool)} crops hashed and compared")
    out += [
        "Labelled set: crops of the real photographs shipped by scikit-image and matplotlib "
        "(benchmarks/photos.py). Every second base crop gets one copy per transformation; "
        "'core' = re-encode / resize / format change, 'expected' = core + photometric + "
        "2-5% crop, 'all' adds the expected misses (10% crop, flip, rot90). Precision counts "
        "a flagged pair as correct when both images belong to one planted family. "
        "'False /1M unrelated' counts flagged pairs among the distinct base crops (no "
        "copies), per million such pairs; 'same source' pairs are two different crops of "
        "one photograph (overlap IoU <= 0.6), the hard negatives.",
        "",
    ]
    for size_label, (frame, ours, reference) in sets.items():
        n_pairs = len(frame) * (len(frame) - 1) // 2
        n_bases = int(frame["is_base"].sum())
        out += [
            f"## {size_label}: {len(frame)} images, {n_pairs} pairs, "
            f"{n_bases * (n_bases - 1) // 2} unrelated base pairs",
            "",
        ]
        stats_by_min_side = {m: pair_stats(frame, h) for m, h in ours.items()}
        reference_stats = pair_stats(frame, reference)
        log(f"{size_label}: pair statistics done")
        default = stats_by_min_side[default_min_side]
        for m, h in ours.items():
            if h.low_information or stats_by_min_side[m].n_invalid:
                out.append(
                    f"- min_side={m}: {stats_by_min_side[m].n_invalid} invalid, "
                    f"{h.low_information} low-information images"
                )
        out.append("")
        methods = {
            f"leakaudit pHash (min_side={default_min_side})": (default, "phash"),
            f"leakaudit dHash (min_side={default_min_side})": (default, "dhash"),
            f"leakaudit both: pHash <= t and dHash <= t (min_side={default_min_side})": (
                default,
                "both",
            ),
            "imagehash.phash (Image.open)": (reference_stats, "phash"),
            "imagehash.dhash (Image.open)": (reference_stats, "dhash"),
        }
        for title, (stats, rule) in methods.items():
            out += [f"### {size_label} — {title}", ""]
            out += threshold_table(stats, rule)
            out += [f"Recall per transformation (%), {title}:", ""]
            out += per_transform_table(stats, rule)
        named = {
            "ours pHash": default,
            "ours dHash": default,
            "imagehash pHash": reference_stats,
            "imagehash dHash": reference_stats,
        }
        out += [f"### {size_label} — distance of each planted copy to its base", ""]
        out += distance_summary_table(named)
        out += [f"### {size_label} — distance between unrelated images (distinct base crops)", ""]
        out += unrelated_distribution_table(named)
        out += [f"### {size_label} — reduced decode: bit moves relative to a full decode", ""]
        out += bit_move_table(frame["path"].tolist(), ours[None], ours, size_label)
        out += [
            f"### {size_label} — same pixels, other container: base JPEG vs its copy, per min_side",
            "",
        ]
        out += format_consistency_table(frame, ours, size_label)
        out += [f"### {size_label} — reduced decode: detection at the default thresholds", ""]
        out += reduction_quality_table(stats_by_min_side, size_label, thresholds)
        out += [f"### {size_label} — hashing time ({args.workers} workers)", ""]
        rows = [
            [f"leakaudit min_side={m}", f"{h.seconds:.1f}", f"{len(frame) / h.seconds:.0f}"]
            for m, h in ours.items()
        ]
        rows.append(
            [
                "imagehash (full decode, p+d)",
                f"{reference.seconds:.1f}",
                f"{len(frame) / reference.seconds:.0f}",
            ]
        )
        out += _table(["method", "seconds", "images/s"], rows)

    if pool_joints:
        n_pool = args.n_pool
        out += [
            f"## Unrelated pairs at scale: {n_pool} distinct 500x375 crops, "
            f"{n_pool * (n_pool - 1) // 2} pairs",
            "",
            "A separate pool of crops (another seed; no planted copies). Two crops of one "
            f"photograph that overlap by IoU > {POOL_MAX_IOU} are left out as ambiguous; every "
            "other pair is unrelated. Cells: false pairs per million unrelated pairs (count). "
            "Multiply by n(n-1)/2 / 1e6 for the false pairs expected among n images "
            "(n = 100,000: x 5,000).",
            "",
        ]
        out += pool_rate_table(pool_joints)
        out += ["Distance between unrelated images in the pool (percentiles):", ""]
        out += pool_distribution_table(pool_joints)
        out += [
            f"Where the false pairs come from (ours, min_side={default_min_side}). 'Gradient' is "
            "the mean |difference| of horizontal neighbours in the 9x8 dHash thumbnail, in grey "
            f"levels; the pool's median is {np.median(pool_gradient):.1f}, its 10th percentile "
            f"{np.percentile(pool_gradient, 10):.1f}.",
            "",
        ]
        out += false_pairs_by_source_table(
            pool,
            pool_close,
            pool_gradient,
            {"phash": (4, 6, 8, 10), "dhash": (2, 4, 5, 6, 8), "both": (8, 10, 12, 16)},
        )

    log("done")
    text = "\n".join(out)
    print(text)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text + "\n", encoding="utf-8")
    return 0


def _versions() -> str:
    """Library versions and a fingerprint of the hashing code the figures were measured with."""
    import imagehash
    import PIL

    import leakaudit

    package = Path(leakaudit.__file__).parent
    digest = hashlib.sha256()
    for name in ("loading.py", "hashing.py"):
        digest.update((package / name).read_bytes())
    return (
        f"Pillow {PIL.__version__}, numpy {np.__version__}, imagehash {imagehash.__version__}, "
        f"leakaudit loading.py+hashing.py sha256 {digest.hexdigest()[:12]}."
    )


def _default_min_side() -> int | None:
    from leakaudit.loading import DecodeOptions

    value: int | None = DecodeOptions().min_side
    return value if value in MIN_SIDES else None


if __name__ == "__main__":
    raise SystemExit(main())
