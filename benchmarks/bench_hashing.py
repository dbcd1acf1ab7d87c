"""Hashing throughput: leakaudit vs imagehash vs the decode floor, measured side by side.

For each image set it times, on the same files in one run (page cache warmed first,
methods interleaved pass by pass, best of ``--repeat`` passes):

* ``leakaudit``       ``hash_sources`` (pHash + dHash, one decode; the BLAKE2b digest
  only for low-information images), 1 worker
* ``leakaudit-all``   the same on all usable cores, pool start-up included (after the
  first pass the forkserver is warm, as in any long-running process)
* ``imagehash.phash`` ``imagehash.phash(Image.open(path))``
* ``imagehash.dhash`` ``imagehash.dhash(Image.open(path))``
* ``decode-floor``    decoding alone at leakaudit's reduction (``draft`` for JPEG, full
  decode for other formats), no hashing

and prints throughput (images/s), the mean file size of each set, and the ratios the
design targets: >= 3x imagehash.phash on ImageNet-like JPEGs, >= 5x on large JPEGs,
no slower on PNG, within 1.5x of the decode floor, and all-core scaling >= 1.7x on 2
cores. Scaling is given twice: ``all-core`` (pool start-up included) and
``steady`` (start-up excluded: the all-core run on the whole set minus the same run
on its first quarter, both of which pay the start-up once).

Image sets (realistic file sizes matter: the decode floor is mostly entropy decoding):

* ``imagenet``  500 x 375 JPEG, quality 97 plus mild photographic grain: ~100 KB, like
  real ImageNet photos (~110 KB on average). Crops of real photographs upscaled to
  500 x 375 are smoother than photos and would give ~35-55 KB files.
* ``large``     1920 x 1080 JPEG, quality 95 plus grain: ~650 KB.
* ``png``       500 x 375 PNG of the same kind of crops.

Usage::

    python benchmarks/bench_hashing.py --n 2000
    python benchmarks/bench_hashing.py --sets imagenet --n 200 --repeat 1   # quick
    python benchmarks/bench_hashing.py --profile imagenet                   # cProfile ours

Data is generated under ``benchmarks/_data/bench_hashing/`` (gitignored) from the real
photographs shipped with scikit-image (``benchmarks/photos.py``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from leakaudit._validation import usable_cpu_count  # noqa: E402
from leakaudit.hashing import hash_sources  # noqa: E402
from leakaudit.loading import DecodeOptions, reduction_scale  # noqa: E402

# name -> (size, format, description, grain recipe or None)
# A recipe re-encodes each crop as JPEG with Gaussian grain: (quality, luma sigma,
# per-channel sigma).
SETS: dict[str, tuple[tuple[int, int], str, str, tuple[int, float, float] | None]] = {
    "imagenet": ((500, 375), "JPEG", "ImageNet-like JPEG 500x375 q97+grain", (97, 4.0, 1.5)),
    "large": ((1920, 1080), "JPEG", "large JPEG 1920x1080 q95+grain", (95, 3.0, 1.0)),
    "png": ((500, 375), "PNG", "PNG 500x375", None),
}


def build_set(name: str, n: int, data_dir: Path) -> list[Path]:
    """Return ``n`` image paths of set ``name``, generating them when missing."""
    size, fmt, _, recipe = SETS[name]
    if recipe is None:
        return _crops(data_dir / name, n, size, fmt, quality=90)
    # Crops saved at quality 95, then grain added and re-encoded.
    base = _crops(data_dir / f"{name}-base", n, size, "JPEG", quality=95)
    return _grainy_set(data_dir / f"{name}-grain", base, recipe)


def _crops(out_dir: Path, n: int, size: tuple[int, int], fmt: str, quality: int) -> list[Path]:
    try:
        from photos import build_photo_corpus
    except ImportError:  # the shared corpus builder is not there: a small local one
        return _fallback_corpus(out_dir, n, size=size, fmt=fmt, quality=quality)
    return build_photo_corpus(out_dir, n, size=size, fmt=fmt, quality=quality, seed=0)


def _add_grain(job: tuple[str, str, tuple[int, float, float], int]) -> None:
    source, target, (quality, luma, chroma), seed = job
    rng = np.random.default_rng(seed)
    with Image.open(source) as image:
        pixels = np.asarray(image.convert("RGB"), dtype=np.float32)
    grain = rng.normal(0.0, luma, pixels.shape[:2]).astype(np.float32)[..., None]
    grain = grain + rng.normal(0.0, chroma, pixels.shape).astype(np.float32)
    noisy = np.clip(np.rint(pixels + grain), 0, 255).astype(np.uint8)
    partial = target + ".part.jpg"
    Image.fromarray(noisy).save(partial, "JPEG", quality=quality)
    os.replace(partial, target)


def _grainy_set(out_dir: Path, base: list[Path], recipe: tuple[int, float, float]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = out_dir / "recipe.json"
    wanted = json.dumps({"recipe": list(recipe), "version": 1})
    if not stamp.exists() or stamp.read_text() != wanted:
        shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True)
        stamp.write_text(wanted)
    paths = [out_dir / f"{i:05d}.jpg" for i in range(len(base))]
    jobs = [
        (str(src), str(dst), recipe, i)
        for i, (src, dst) in enumerate(zip(base, paths, strict=True))
        if not dst.exists()
    ]
    if jobs:
        with ProcessPoolExecutor(usable_cpu_count()) as pool:
            list(pool.map(_add_grain, jobs, chunksize=16))
    return paths


def _fallback_corpus(
    out_dir: Path, n: int, *, size: tuple[int, int], fmt: str, quality: int
) -> list[Path]:
    from skimage import data as skdata

    names = ["astronaut", "coffee", "chelsea", "rocket", "camera", "immunohistochemistry"]
    photos = [Image.fromarray(getattr(skdata, name)()).convert("RGB") for name in names]
    rng = np.random.default_rng(0)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = out_dir / f"{i:05d}.{'jpg' if fmt == 'JPEG' else fmt.lower()}"
        paths.append(path)
        if path.exists():
            continue
        photo = photos[i % len(photos)]
        w, h = photo.size
        scale = rng.uniform(0.4, 0.9)
        cw, ch = int(w * scale), int(w * scale * size[1] / size[0])
        ch = min(ch, h)
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        crop = photo.crop((x, y, x + cw, y + ch)).resize(size, Image.Resampling.LANCZOS)
        crop.save(path, fmt, **({"quality": quality} if fmt == "JPEG" else {}))
    return paths


# ----------------------------------------------------------------------- methods


def run_ours(paths: Sequence[Path], workers: int) -> None:
    table = hash_sources(paths, workers=workers, progress=False, on_error="raise")
    assert table.valid.all()


def run_imagehash(paths: Sequence[Path], which: str) -> None:
    import imagehash

    function = getattr(imagehash, which)
    for path in paths:
        with Image.open(path) as image:
            function(image)


def run_decode_floor(paths: Sequence[Path]) -> None:
    min_side = DecodeOptions().min_side
    for path in paths:
        with Image.open(path) as image:
            if image.format == "JPEG" and min_side is not None:
                if reduction_scale(image.width, image.height, min_side) > 1:
                    image.draft("L", (min_side, min_side))
                else:
                    image.draft("L", None)
            image.load()


def run_simplejpeg_floor(paths: Sequence[Path]) -> None:
    """The decode floor with simplejpeg (libjpeg-turbo, DCT scaling, luma only), not Pillow."""
    import simplejpeg

    min_side = DecodeOptions().min_side or 1
    for path in paths:
        data = path.read_bytes()
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
        scale = reduction_scale(width, height, min_side)
        simplejpeg.decode_jpeg(
            data,
            colorspace="GRAY",
            min_width=-(-width // scale),
            min_height=-(-height // scale),
        )


def _have_simplejpeg() -> bool:
    try:
        import simplejpeg  # noqa: F401
    except ImportError:
        return False
    return True


def warm_page_cache(paths: Sequence[Path]) -> int:
    return sum(len(p.read_bytes()) for p in paths)


def bench_set(name: str, paths: list[Path], workers: int, repeat: int) -> dict[str, float]:
    n = len(paths)
    quarter = paths[: max(1, n // 4)]
    total_bytes = warm_page_cache(paths)
    methods: dict[str, Callable[[], None]] = {
        "leakaudit": lambda: run_ours(paths, 1),
        "leakaudit-all": lambda: run_ours(paths, workers),
        "_all-quarter": lambda: run_ours(quarter, workers),
        "imagehash.phash": lambda: run_imagehash(paths, "phash"),
        "imagehash.dhash": lambda: run_imagehash(paths, "dhash"),
        "decode-floor": lambda: run_decode_floor(paths),
    }
    if name != "png" and _have_simplejpeg():
        # Would a faster JPEG binding move the floor? (pip install simplejpeg)
        methods["simplejpeg-floor"] = lambda: run_simplejpeg_floor(paths)
    # Methods are interleaved pass by pass (not run back to back), so a burst of
    # load on a shared machine hits them all alike; the best pass of each is kept.
    best = dict.fromkeys(methods, float("inf"))
    for round_number in range(repeat):
        for method, function in methods.items():
            start = time.perf_counter()
            function()
            seconds = time.perf_counter() - start
            best[method] = min(best[method], seconds)
            count = len(quarter) if method == "_all-quarter" else n
            print(
                f"  {name:9s} pass {round_number + 1} {method:16s} {seconds:8.2f} s"
                f"  {count / seconds:9.1f} img/s",
                file=sys.stderr,
            )
    rates = {m: n / s for m, s in best.items() if m != "_all-quarter"}
    # Both all-core runs pay the pool start-up once: their difference does not.
    extra = best["leakaudit-all"] - best["_all-quarter"]
    rates["_steady"] = (n - len(quarter)) / extra if extra > 0 else float("nan")
    rates["_kb"] = total_bytes / n / 1024
    return rates


def print_table(
    results: dict[str, dict[str, float]], n: dict[str, int], workers: int, load: str
) -> None:
    columns = ["leakaudit", "leakaudit-all", "imagehash.phash", "imagehash.dhash", "decode-floor"]
    print()
    print(f"Throughput, images/s (1 core unless marked; all = {workers} workers). {load}")
    header = f"{'set (mean file size)':46s} {'n':>5s} " + " ".join(f"{c:>15s}" for c in columns)
    print(header)
    print("-" * len(header))
    for name, rates in results.items():
        description = f"{SETS[name][2]} ({rates['_kb']:.0f} KB)"
        cells = " ".join(f"{rates[c]:15.1f}" for c in columns)
        print(f"{description:46s} {n[name]:5d} {cells}")
    print()
    print("Ratios")
    header = (
        f"{'set':10s} {'vs phash':>9s} {'vs dhash':>9s} {'floor/ours':>11s} {'all-core':>9s}"
        f" {'steady':>7s}"
        "   (targets: >=3x imagenet, >=5x large, >=1x png; floor/ours <=1.5; all-core >=1.7)"
    )
    print(header)
    for name, rates in results.items():
        ours = rates["leakaudit"]
        vs_phash = ours / rates["imagehash.phash"]
        vs_dhash = ours / rates["imagehash.dhash"]
        floor = rates["decode-floor"] / ours
        scaling = rates["leakaudit-all"] / ours
        steady = rates["_steady"] / ours
        print(
            f"{name:10s} {vs_phash:8.2f}x {vs_dhash:8.2f}x {floor:10.2f}x {scaling:8.2f}x"
            f" {steady:6.2f}x"
        )
    print()
    print(
        "Ceiling: imagehash.phash time / decode-floor time, the ratio leakaudit would reach if "
        "hashing cost nothing (entropy decoding of every coefficient is the floor of any "
        "libjpeg-turbo decoder, whatever the scale)"
    )
    for name, rates in results.items():
        line = f"{name:10s} Pillow draft {rates['decode-floor'] / rates['imagehash.phash']:5.2f}x"
        if "simplejpeg-floor" in rates:
            line += f"   simplejpeg {rates['simplejpeg-floor'] / rates['imagehash.phash']:5.2f}x"
        print(line)


def machine_load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def profile(paths: list[Path]) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    run_ours(paths, 1)
    profiler.disable()
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(20)
    print(stream.getvalue())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="images per set (default 1000)")
    parser.add_argument(
        "--n-large", type=int, default=None, help="images in the large set (default: --n)"
    )
    parser.add_argument(
        "--sets", nargs="+", choices=list(SETS), default=list(SETS), help="sets to run"
    )
    parser.add_argument("--workers", type=int, default=None, help="all-core workers")
    parser.add_argument("--repeat", type=int, default=3, help="passes per method; best kept")
    parser.add_argument(
        "--data-dir", type=Path, default=HERE / "_data" / "bench_hashing", help="image folder"
    )
    parser.add_argument("--profile", choices=list(SETS), help="cProfile leakaudit on one set")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.n < 1 or (args.n_large is not None and args.n_large < 1):
        parser.error("--n, --n-large and --repeat must be >= 1")
    workers = args.workers or usable_cpu_count()

    def count(name: str) -> int:
        return int(args.n_large) if name == "large" and args.n_large else int(args.n)

    if args.profile:
        profile(build_set(args.profile, count(args.profile), args.data_dir))
        return 0

    results: dict[str, dict[str, float]] = {}
    counts: dict[str, int] = {}
    paths_by_set: dict[str, list[Path]] = {}
    for name in args.sets:
        start = time.perf_counter()
        paths_by_set[name] = build_set(name, count(name), args.data_dir)
        print(
            f"{name}: {count(name)} images ready in {time.perf_counter() - start:.1f} s",
            file=sys.stderr,
        )
    load_before = machine_load()
    for name, paths in paths_by_set.items():
        counts[name] = len(paths)
        results[name] = bench_set(name, paths, workers, args.repeat)
    info: dict[str, Any] = {"before": load_before, "after": machine_load()}
    print_table(results, counts, workers, f"Before: {info['before']}; after: {info['after']}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
