"""Borders, padding, letterboxing and small crops: what ``DecodeOptions.trim_borders`` buys.

Three questions, measured on crops of real photographs (:mod:`photos`), at the default
method and threshold (pHash <= 8 and dHash <= 8, ``leakaudit.policy.DEFAULT_THRESHOLDS``):

1. **Padded copies.** Every base photo (500x375 JPEG) gets planted copies placed on a larger
   canvas with uniform bars: letterboxed to a square, pillarboxed to 16:9, padded on all four
   sides or on one, in black, white, grey, a colour and transparent (PNG with garbage under
   alpha 0), some re-encoded or resized. Recall of (base, copy) pairs with trimming off and on.
2. **Precision.** False pairs per million unrelated pairs, trimming off and on, among the
   distinct crops of a separate pool (bench_quality's, 3,000 crops, 4.5 M pairs) and among the
   padded copies of *different* photos (bars shared by unrelated images are hard negatives of
   their own). Also: how many unpadded photos the trim touches at all (a trim of a photo with
   no border is a trim into content), for a sweep of the tolerance and step.
3. **Small crops.** Crops of 2%, 5%, 8% off the edges (centred, and off one side), recall at the
   default threshold for the whole-image hash, for hashes of the central 90% / 80% region
   (``centre``) and for a multi-crop match (an image's whole hash compared with the other's
   hashes of a few crops), each with its false pairs in the pool.

Hashing cost: ``hash_sources`` on the pool with ``trim_borders`` off and on, one worker,
interleaved, best of ``--repeat``; the ratio is the figure to read.

The tolerance sweep and the crop schemes are computed in-process from one decode per file
(``grey_from_bytes`` with trimming off, then :func:`leakaudit.loading.trim_box` with the
swept parameters); the default parameters are checked bit-for-bit against
``hash_sources(decode=DecodeOptions(trim_borders=True))``.

Run from the repository root::

    .venv/bin/python benchmarks/bench_borders.py --markdown benchmarks/_out/borders.md

Data goes to ``benchmarks/_data/borders`` (the bases and the pool are bench_quality's, in
``benchmarks/_data/quality``; everything is reused between runs). ``--quick`` is a smoke run.
"""

from __future__ import annotations

import argparse
import math
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
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_quality import POOL_MAX_IOU, box_iou, build_pool
from photos import build_photo_corpus

from leakaudit.hashing import _hash_reduced, hash_sources
from leakaudit.loading import (
    TRIM_RINGING_LINES,
    TRIM_STEP,
    TRIM_TOLERANCE,
    Box,
    DecodeOptions,
    grey_from_bytes,
    trim_box,
)
from leakaudit.policy import DEFAULT_THRESHOLDS

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE / "_data"
THRESHOLD = DEFAULT_THRESHOLDS["phash+dhash"]
SIZE = (500, 375)
TOLERANCES = (0, 1, 2, 3, 4, 6, 8)
RINGING = (0, 1, 2, 3, 4)
STEPS = (0, 12, 24, 48)
# How the fractional edge of a trim becomes the hashed region: "fraction" (the box edge
# inside the first content line, which keeps its share of bar colour), "fill" (the same
# box, that line replaced by the next one: a copy of the pixels), "outward" (whole lines:
# the first content line is kept whole), "inward" (whole lines: it is dropped unless less
# than a tenth of it is bar).
EDGES = ("fraction", "fill", "outward", "inward")
TRIM_EDGE = "inward"  # what DecodeOptions(trim_borders=True) does (checked in main)

# --------------------------------------------------------------------------------------------------
# Planted copies
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    name: str
    kind: str  # "padded" or "crop"
    fmt: str
    make: Callable[[Image.Image, np.random.Generator], Image.Image]
    quality: int = 90


def _place(
    canvas: tuple[int, int],
    colour: tuple[int, ...],
    anchor: str = "centre",
    *,
    scale: float = 1.0,
    mode: str = "RGB",
) -> Callable[[Image.Image, np.random.Generator], Image.Image]:
    """Put the image (optionally resized by ``scale``) on a canvas of ``canvas`` x its size."""

    def make(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        if scale != 1.0:
            image = image.resize(
                (round(image.width * scale), round(image.height * scale)),
                Image.Resampling.LANCZOS,
            )
        width = round(canvas[0] * image.width)
        height = round(canvas[1] * image.height)
        if mode == "RGBA":
            # Garbage under alpha = 0: a viewer never shows it, neither may the hash.
            noise = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
            noise[..., 3] = 0
            out = Image.fromarray(noise, "RGBA")
            content: Image.Image = image.convert("RGBA")
        else:
            out = Image.new(mode, (width, height), colour)
            content = image
        if anchor == "centre":
            offset = ((width - image.width) // 2, (height - image.height) // 2)
        else:  # "top-left": padding on the right and bottom only, as pad-to-square pipelines do
            offset = (0, 0)
        out.paste(content, offset)
        return out

    return make


def _aspect(target: float) -> tuple[float, float]:
    """Canvas factors that bring a 4:3 image to aspect ``target`` (width / height)."""
    aspect = SIZE[0] / SIZE[1]
    return (target / aspect, 1.0) if target > aspect else (1.0, aspect / target)


def _crop(
    left: float, top: float, right: float, bottom: float
) -> Callable[[Image.Image, np.random.Generator], Image.Image]:
    """Cut the given fractions off each edge (no resize)."""

    def make(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        w, h = image.size
        return image.crop(
            (round(left * w), round(top * h), round((1 - right) * w), round((1 - bottom) * h))
        )

    return make


BLACK, WHITE, GREY, BLUE = (0, 0, 0), (255, 255, 255), (128, 128, 128), (40, 110, 200)
PADDED = (
    Variant("letterbox_square_black", "padded", "JPEG", _place(_aspect(1.0), BLACK)),
    Variant("letterbox_square_white", "padded", "JPEG", _place(_aspect(1.0), WHITE)),
    Variant("pillarbox_16x9_black", "padded", "JPEG", _place(_aspect(16 / 9), BLACK)),
    Variant("pillarbox_16x9_grey_png", "padded", "PNG", _place(_aspect(16 / 9), GREY)),
    Variant("pad_all_10%_grey_png", "padded", "PNG", _place((1.2, 1.2), GREY)),
    Variant("pad_all_6%_blue", "padded", "JPEG", _place((1.12, 1.12), BLUE)),
    Variant("pad_all_10%_white_webp", "padded", "WEBP", _place((1.2, 1.2), WHITE), 80),
    Variant(
        "pad_square_bottom_black_png", "padded", "PNG", _place(_aspect(1.0), BLACK, "top-left")
    ),
    Variant("transparent_pad_png", "padded", "PNG", _place((1.2, 1.2), (0,), mode="RGBA")),
    Variant(
        "letterbox_black_half_q70", "padded", "JPEG", _place(_aspect(1.0), BLACK, scale=0.5), 70
    ),
    Variant("letterbox_white_q50", "padded", "JPEG", _place(_aspect(1.0), WHITE), 50),
)
CROPS = (
    Variant("crop_2%_centre", "crop", "JPEG", _crop(0.01, 0.01, 0.01, 0.01)),
    Variant("crop_5%_centre", "crop", "JPEG", _crop(0.025, 0.025, 0.025, 0.025)),
    Variant("crop_8%_centre", "crop", "JPEG", _crop(0.04, 0.04, 0.04, 0.04)),
    Variant("crop_2%_left", "crop", "JPEG", _crop(0.02, 0, 0, 0)),
    Variant("crop_5%_left", "crop", "JPEG", _crop(0.05, 0, 0, 0)),
    Variant("crop_5%_top", "crop", "JPEG", _crop(0, 0.05, 0, 0)),
    Variant("crop_8%_bottom", "crop", "JPEG", _crop(0, 0, 0, 0.08)),
    Variant("crop_5%_right_bottom", "crop", "JPEG", _crop(0, 0, 0.05, 0.05)),
)
VARIANTS = PADDED + CROPS
_EXTENSIONS = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp"}


def _variant_path(out_dir: Path, stem: str, variant: Variant) -> Path:
    return out_dir / f"{stem}__{variant.name}{_EXTENSIONS[variant.fmt]}"


def _make_variants(job: tuple[str, str, int]) -> None:
    base_path, out_dir, seed = job
    base = Path(base_path)
    with Image.open(base) as opened:
        image = opened.convert("RGB")
    for position, variant in enumerate(VARIANTS):
        path = _variant_path(Path(out_dir), base.stem, variant)
        if path.exists():
            continue
        rng = np.random.default_rng([seed, int(base.stem.split("_")[0]), position])
        copy = variant.make(image, rng)
        options: dict[str, Any] = {}
        if variant.fmt in ("JPEG", "WEBP"):
            options["quality"] = variant.quality
        temporary = path.with_name(path.stem + ".part" + path.suffix)
        copy.save(temporary, variant.fmt, **options)
        os.replace(temporary, path)


def build_labelled_set(data: Path, n_base: int, *, workers: int, seed: int = 0) -> pd.DataFrame:
    """The bases (bench_quality's 500x375 crops) and every planted copy of each."""
    base_paths = build_photo_corpus(data / "quality" / "500x375" / "base", n_base, size=SIZE)
    out_dir = data / "borders" / "copies"
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(str(p), str(out_dir), seed) for p in base_paths]
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_make_variants, jobs, chunksize=4))
    rows = []
    for family, path in enumerate(base_paths):
        rows.append((str(path), family, "base", "base"))
        for variant in VARIANTS:
            rows.append(
                (
                    str(_variant_path(out_dir, path.stem, variant)),
                    family,
                    variant.name,
                    variant.kind,
                )
            )
    return pd.DataFrame(rows, columns=["path", "family", "variant", "kind"])


# --------------------------------------------------------------------------------------------------
# Decoding once, hashing many ways
# --------------------------------------------------------------------------------------------------

Decoded = tuple[np.ndarray, "Box | None"]


def _decode(path: str) -> Decoded:
    with open(path, "rb") as handle:
        pixels, box = grey_from_bytes(handle.read(), path, DecodeOptions())
    return np.ascontiguousarray(pixels), box


def decode_all(paths: Sequence[str], workers: int) -> list[Decoded]:
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(_decode, paths, chunksize=64))


def _full_box(pixels: np.ndarray, box: Box | None) -> Box:
    return box if box is not None else (0.0, 0.0, float(pixels.shape[1]), float(pixels.shape[0]))


def _shrink(box: Box, left: float, top: float, right: float, bottom: float) -> Box:
    """``box`` less the given fractions of its width/height at each edge."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    return (x0 + left * w, y0 + top * h, x1 - right * w, y1 - bottom * h)


def _region(pixels: np.ndarray, box: Box) -> tuple[np.ndarray, Box | None]:
    """The rows/columns ``box`` touches (a view) and the box within them, as the trim does."""
    x0, y0, x1, y1 = box
    c0, r0 = math.floor(x0), math.floor(y0)
    view = pixels[r0 : math.ceil(y1), c0 : math.ceil(x1)]
    local: Box | None = (x0 - c0, y0 - r0, x1 - c0, y1 - r0)
    if local == (0.0, 0.0, float(view.shape[1]), float(view.shape[0])):
        local = None
    return view, local


def _apply_trim_fill(
    pixels: np.ndarray, box: Box | None, trimmed: Box
) -> tuple[np.ndarray, Box | None]:
    """The trimmed region, its first content line on each trimmed side replaced by the next."""
    view, local = _region(pixels, trimmed)
    if local is None:
        return view, local
    full = _full_box(pixels, box)
    out = view.copy()
    x0, y0, x1, y1 = local
    if trimmed[1] != full[1] and y0 > 0 and out.shape[0] > 1:
        out[0] = out[1]
    if trimmed[3] != full[3] and y1 < out.shape[0] and out.shape[0] > 1:
        out[-1] = out[-2]
    if trimmed[0] != full[0] and x0 > 0 and out.shape[1] > 1:
        out[:, 0] = out[:, 1]
    if trimmed[2] != full[2] and x1 < out.shape[1] and out.shape[1] > 1:
        out[:, -1] = out[:, -2]
    return out, local


# A scheme maps one decoded image to the regions it is hashed on (the first is its main hash).
Scheme = Callable[[np.ndarray, "Box | None"], list[tuple[np.ndarray, "Box | None"]]]


def scheme_whole(pixels: np.ndarray, box: Box | None) -> list[tuple[np.ndarray, Box | None]]:
    return [(pixels, box)]


@dataclass(frozen=True)
class Trim:
    tolerance: int = TRIM_TOLERANCE
    ringing_lines: int = TRIM_RINGING_LINES
    step: int = TRIM_STEP
    edge: str = TRIM_EDGE

    @property
    def name(self) -> str:
        return (
            f"trim tol={self.tolerance} ringing={self.ringing_lines} step={self.step} "
            f"edge={self.edge}"
        )

    def box(self, pixels: np.ndarray, box: Box | None) -> Box | None:
        trimmed = trim_box(
            pixels,
            box,
            tolerance=self.tolerance,
            ringing_lines=self.ringing_lines,
            step=self.step,
        )
        if trimmed is None or self.edge in ("fraction", "fill"):
            return trimmed
        full = _full_box(pixels, box)
        edges = []
        for value, original, lower in zip(trimmed, full, (True, True, False, False), strict=True):
            if value == original:
                edges.append(value)
            else:  # a trimmed edge: whole lines outward or inward
                outward = math.floor(value) if lower else math.ceil(value)
                inward = math.ceil(value - 0.1) if lower else math.floor(value + 0.1)
                edges.append(float(outward if self.edge == "outward" else inward))
        return (edges[0], edges[1], edges[2], edges[3])


def scheme_trim(trim: Trim) -> Scheme:
    def regions(pixels: np.ndarray, box: Box | None) -> list[tuple[np.ndarray, Box | None]]:
        trimmed = trim.box(pixels, box)
        if trimmed is None:
            return [(pixels, box)]
        if trim.edge == "fill":
            return [_apply_trim_fill(pixels, box, trimmed)]
        return [_region(pixels, trimmed)]

    return regions


def scheme_centre(fraction: float) -> Scheme:
    margin = (1 - fraction) / 2

    def regions(pixels: np.ndarray, box: Box | None) -> list[tuple[np.ndarray, Box | None]]:
        return [_region(pixels, _shrink(_full_box(pixels, box), margin, margin, margin, margin))]

    return regions


# Multi-crop: the whole image plus crops of it; a pair matches when the whole hash of one is
# within the threshold of any hash of the other (crops are never compared with crops).
MULTI_CROPS: dict[str, tuple[tuple[float, float, float, float], ...]] = {
    "multi: centre 95/90": ((0.025,) * 4, (0.05,) * 4),
    "multi: centre 95/90 + 5% off each side": (
        (0.025,) * 4,
        (0.05,) * 4,
        (0.05, 0, 0, 0),
        (0, 0.05, 0, 0),
        (0, 0, 0.05, 0),
        (0, 0, 0, 0.05),
    ),
}


def scheme_multi(crops: Sequence[tuple[float, float, float, float]]) -> Scheme:
    def regions(pixels: np.ndarray, box: Box | None) -> list[tuple[np.ndarray, Box | None]]:
        full = _full_box(pixels, box)
        return [(pixels, box)] + [_region(pixels, _shrink(full, *c)) for c in crops]

    return regions


def hash_scheme(decoded: Sequence[Decoded], scheme: Scheme) -> tuple[np.ndarray, np.ndarray]:
    """(n, k) uint64 pHash and dHash of every image's k regions."""
    phash, dhash = [], []
    for pixels, box in decoded:
        values = [_hash_reduced((p, b), False)[:2] for p, b in scheme(pixels, box)]
        phash.append([v[0] for v in values])
        dhash.append([v[1] for v in values])
    return np.array(phash, dtype=np.uint64), np.array(dhash, dtype=np.uint64)


def trimmed_share(decoded: Sequence[Decoded], trim: Trim) -> tuple[float, float]:
    """Share of images the trim touches, and the mean area it removes from those."""
    touched, removed = 0, []
    for pixels, box in decoded:
        full = _full_box(pixels, box)
        trimmed = trim.box(pixels, box)
        if trimmed is not None:
            touched += 1
            area = (full[2] - full[0]) * (full[3] - full[1])
            kept = (trimmed[2] - trimmed[0]) * (trimmed[3] - trimmed[1])
            removed.append(1 - kept / area)
    return touched / len(decoded), float(np.mean(removed)) if removed else 0.0


# --------------------------------------------------------------------------------------------------
# Distances
# --------------------------------------------------------------------------------------------------


def _popcount(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(x).astype(np.int16)


def pair_distance(pa: np.ndarray, da: np.ndarray, pb: np.ndarray, db: np.ndarray) -> np.ndarray:
    """Distance the default rule applies to, max(pHash, dHash), minimised over the comparisons.

    ``pa``/``da``: (..., ka) hashes of one side, ``pb``/``db``: (..., kb) of the other. The main
    hash (index 0) of each side is compared with every hash of the other side.
    """
    pieces = [
        np.maximum(_popcount(pa[..., :1] ^ pb), _popcount(da[..., :1] ^ db)),
        np.maximum(_popcount(pa ^ pb[..., :1]), _popcount(da ^ db[..., :1])),
    ]
    return np.minimum(pieces[0].min(axis=-1), pieces[1].min(axis=-1))


def unrelated_histogram(
    phash: np.ndarray, dhash: np.ndarray, unrelated: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray:
    """Histogram (0..64) of the distance of every pair ``unrelated(rows, cols)`` marks."""
    n = len(phash)
    hist = np.zeros(65, dtype=np.int64)
    block = max(1, 2_000_000 // (n * phash.shape[1]))
    for start in range(0, n, block):
        rows = np.arange(start, min(start + block, n))
        cols = np.arange(n)
        d = pair_distance(
            phash[rows, None, :], dhash[rows, None, :], phash[None, cols, :], dhash[None, cols, :]
        )
        keep = unrelated(rows, cols) & (cols[None, :] > rows[:, None])
        hist += np.bincount(d[keep].ravel(), minlength=65)[:65]
    return hist


def _pool_unrelated(pool: pd.DataFrame) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    source = pd.factorize(pool["source"])[0]
    box = pool[["x0", "y0", "x1", "y1"]].to_numpy()
    area = (box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1])

    def unrelated(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        iou = box_iou(box, area, rows, cols)
        return ~((source[rows, None] == source[None, cols]) & (iou > POOL_MAX_IOU))

    return unrelated


def _families_differ(frame: pd.DataFrame) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    family = frame["family"].to_numpy()

    def unrelated(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return family[rows, None] != family[None, cols]

    return unrelated


def planted_distances(frame: pd.DataFrame, phash: np.ndarray, dhash: np.ndarray) -> pd.DataFrame:
    """One row per planted (base, copy) pair: variant, kind, distance."""
    base_row = frame.index[frame["variant"] == "base"].to_numpy()
    base_of = base_row[frame["family"].to_numpy()]
    copies = np.flatnonzero(frame["variant"].to_numpy() != "base")
    b = base_of[copies]
    d = pair_distance(phash[b], dhash[b], phash[copies], dhash[copies])
    return pd.DataFrame(
        {
            "variant": frame["variant"].to_numpy()[copies],
            "kind": frame["kind"].to_numpy()[copies],
            "distance": d,
        }
    )


# --------------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return [*lines, ""]


def _pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"


def _rate(hist: np.ndarray, t: int = THRESHOLD) -> str:
    flagged = int(hist[: t + 1].sum())
    return f"{1e6 * flagged / max(int(hist.sum()), 1):.2f} ({flagged})"


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-base", type=int, default=300, help="base photos (default 300)")
    parser.add_argument("--n-pool", type=int, default=3000, help="unrelated crops (default 3000)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="data folder (reused)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--repeat", type=int, default=3, help="timing repeats (best of)")
    parser.add_argument("--quick", action="store_true", help="smoke run (60 bases, 500 pool)")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_base, args.n_pool, args.repeat = min(args.n_base, 60), min(args.n_pool, 500), 1
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    frame = build_labelled_set(args.data, args.n_base, workers=args.workers)
    pool = build_pool(args.data / "quality" / "pool", args.n_pool, seed=1)
    log(f"{len(frame)} labelled images, {len(pool)} pool crops")
    decoded = decode_all(frame["path"].tolist(), args.workers)
    pool_decoded = decode_all(pool["path"].tolist(), args.workers)
    log("decoded")

    # The in-process trim at the default parameters is exactly what hash_sources does.
    check = frame.groupby("variant").head(3)["path"].tolist()
    table = hash_sources(check, decode=DecodeOptions(trim_borders=True), workers=1)
    index = {p: i for i, p in enumerate(frame["path"])}
    ours = hash_scheme([decoded[index[p]] for p in check], scheme_trim(Trim()))
    assert np.array_equal(np.asarray(table.phash, dtype=np.uint64), ours[0][:, 0])
    assert np.array_equal(np.asarray(table.dhash, dtype=np.uint64), ours[1][:, 0])

    out = [
        "# Borders, padding and small crops",
        "",
        f"Command: `{' '.join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])}`",
        "",
        f"{args.n_base} base photos (500x375 JPEG crops of real photographs), each with "
        f"{len(PADDED)} padded and {len(CROPS)} cropped copies; pool of {len(pool)} unrelated "
        f"crops. Rule: pHash <= {THRESHOLD} and dHash <= {THRESHOLD}. Defaults: "
        f"tolerance {TRIM_TOLERANCE}, ringing lines {TRIM_RINGING_LINES}, step {TRIM_STEP}, "
        f"edge {TRIM_EDGE}.",
        "",
    ]

    # ---- 1 + 2: trimming off/on, and the sweep of its parameters
    trims = [Trim()]
    trims += [Trim(tolerance=t) for t in TOLERANCES]
    trims += [Trim(ringing_lines=r) for r in RINGING]
    trims += [Trim(step=s) for s in STEPS]
    trims += [Trim(edge=e) for e in EDGES]
    trims += [Trim(edge=e, step=0) for e in EDGES]
    configs: dict[str, tuple[Scheme, Trim | None]] = {"off": (scheme_whole, None)}
    for trim in trims:
        configs.setdefault(trim.name, (scheme_trim(trim), trim))
    default_name = Trim().name
    families_differ = _families_differ(frame)
    pool_unrelated = _pool_unrelated(pool)
    results: dict[str, dict[str, Any]] = {}
    for name, (scheme, trim) in configs.items():
        phash, dhash = hash_scheme(decoded, scheme)
        pool_p, pool_d = hash_scheme(pool_decoded, scheme)
        planted = planted_distances(frame, phash, dhash)
        padded = planted[planted["kind"] == "padded"]
        base_or_padded = (frame["kind"] != "crop").to_numpy()
        sub = frame[base_or_padded].reset_index(drop=True)
        results[name] = {
            "planted": planted,
            "recall_padded": float((padded["distance"] <= THRESHOLD).mean()),
            "pool_hist": unrelated_histogram(pool_p, pool_d, pool_unrelated),
            "padded_hist": unrelated_histogram(
                phash[base_or_padded], dhash[base_or_padded], _families_differ(sub)
            ),
            "trimmed": trimmed_share(pool_decoded, trim) if trim else (0.0, 0.0),
        }
        log(f"{name}: recall padded {results[name]['recall_padded']:.3f}")
    del families_differ

    off, on = results["off"], results[default_name]
    out += [
        "## Padded copies: recall, trimming off vs on",
        "",
        f"Distance = max(pHash, dHash) between the base and its copy; recall at <= {THRESHOLD}.",
        "",
    ]
    rows = []
    for variant in PADDED:
        row: list[Any] = [variant.name]
        for res in (off, on):
            d = res["planted"].loc[res["planted"]["variant"] == variant.name, "distance"]
            row += [_pct(float((d <= THRESHOLD).mean())), f"{d.median():.0f} / {d.max()}"]
        rows.append(row)
    rows.append(["**all padded**", _pct(off["recall_padded"]), "", _pct(on["recall_padded"]), ""])
    out += _table(
        ["copy", "recall off", "distance med/max off", "recall on", "distance med/max on"], rows
    )

    out += [
        "## Precision: false pairs per million unrelated pairs (count), trimming off vs on",
        "",
        f"Pool: {len(pool)} distinct crops (same-source pairs overlapping by IoU > "
        f"{POOL_MAX_IOU} left out). Padded set: bases and padded copies, pairs of different "
        "photos only (bars shared by unrelated images). 'Pool images trimmed': share of the "
        "unpadded pool photos the trim touches at all (each such trim cuts into content), "
        "and the mean area it removes from those.",
        "",
    ]
    rows = []
    for name, res in results.items():
        share, area = res["trimmed"]
        rows.append(
            [
                name,
                _pct(res["recall_padded"]),
                _rate(res["pool_hist"]),
                _rate(res["padded_hist"]),
                _pct(share, 2),
                _pct(area),
            ]
        )
    out += _table(
        [
            "setting",
            "recall padded",
            "false /1M pool",
            "false /1M padded set",
            "pool images trimmed",
            "mean area removed",
        ],
        rows,
    )
    log("borders done")

    # ---- 3: small crops
    schemes: dict[str, Scheme] = {
        "whole image (default)": scheme_whole,
        "trim on": scheme_trim(Trim()),
        "centre 90%": scheme_centre(0.9),
        "centre 80%": scheme_centre(0.8),
    }
    schemes.update({name: scheme_multi(crops) for name, crops in MULTI_CROPS.items()})
    crop_rows, crop_header = [], ["scheme", *(v.name for v in CROPS), "all crops", "false /1M pool"]
    padded_recall = []
    for name, scheme in schemes.items():
        phash, dhash = hash_scheme(decoded, scheme)
        planted = planted_distances(frame, phash, dhash)
        pool_p, pool_d = hash_scheme(pool_decoded, scheme)
        hist = unrelated_histogram(pool_p, pool_d, pool_unrelated)
        row = [name]
        for variant in CROPS:
            d = planted.loc[planted["variant"] == variant.name, "distance"]
            row.append(_pct(float((d <= THRESHOLD).mean()), 0))
        crops = planted[planted["kind"] == "crop"]
        row += [_pct(float((crops["distance"] <= THRESHOLD).mean())), _rate(hist)]
        crop_rows.append(row)
        padded = planted[planted["kind"] == "padded"]
        padded_recall.append(
            [name, _pct(float((padded["distance"] <= THRESHOLD).mean())), _rate(hist, 6),
             _rate(hist), _rate(hist, 10)]
        )  # fmt: skip
        log(f"crops: {name}")
    out += [
        "## Small crops: recall at the default threshold per scheme",
        "",
        "Crops without resizing, re-saved as JPEG q90. 'centre' hashes only the central region "
        "of every image; 'multi' compares each image's whole hash with the other's hashes of "
        "the listed crops (and vice versa), so a pair has 1 + 2k chances to match.",
        "",
    ]
    out += _table(crop_header, crop_rows)
    out += ["Same schemes: padded-copy recall and pool false pairs at <= 6 / 8 / 10:", ""]
    out += _table(
        ["scheme", "recall padded", "false /1M pool <= 6", "<= 8", "<= 10"], padded_recall
    )

    # ---- cost
    padded_paths = frame.loc[frame["kind"] == "padded", "path"].tolist()
    cost_rows = []
    for label, paths in (
        ("unrelated photos (pool JPEGs, no border)", pool["path"].tolist()),
        ("padded copies (JPEG, PNG, WebP)", padded_paths),
    ):
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeat):
            for trim in (False, True):
                start = time.perf_counter()
                hash_sources(paths, decode=DecodeOptions(trim_borders=trim), workers=1)
                times[trim].append(time.perf_counter() - start)
        off_s, on_s = min(times[False]), min(times[True])
        cost_rows.append(
            [
                f"{label}: {len(paths)}",
                f"{off_s:.2f} ({1e3 * off_s / len(paths):.3f} ms)",
                f"{on_s:.2f} ({1e3 * on_s / len(paths):.3f} ms)",
                f"{on_s / off_s:.3f}",
            ]
        )
    out += [f"## Hashing cost: hash_sources, 1 worker, best of {args.repeat}", ""]
    out += _table(
        ["images", "trim off: s (per image)", "trim on: s (per image)", "ratio"], cost_rows
    )
    log("done")
    text = "\n".join(out)
    print(text)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
