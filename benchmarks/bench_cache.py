"""Benchmark: a second audit of an unchanged folder, served by the hash cache, vs the first.

Builds ``N`` small photo-like JPEGs under ``benchmarks/_data/cache/`` (reused across
runs), then audits them twice against a fresh cache folder and prints both times, the
ratio, and where the second run spends its time: listing the files, the cache lookup
(stat + SQLite), and grouping + report, so a missed target can be attributed.

Usage::

    .venv/bin/python benchmarks/bench_cache.py            # N = 20000
    .venv/bin/python benchmarks/bench_cache.py --n 2000 --workers 2
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

from leakaudit import audit_hash_table
from leakaudit.audit import list_image_paths
from leakaudit.cache import HashCache, hash_sources_cached

HERE = Path(__file__).resolve().parent


def _build(folder: Path, n: int, size: tuple[int, int]) -> list[Path]:
    sys.path.insert(0, str(HERE))
    from photos import build_photo_corpus

    return build_photo_corpus(folder, n, size=size, fmt="JPEG", quality=85)


def _write_synthetic(args: tuple[Path, int, tuple[int, int]]) -> None:
    from leakaudit.demo import photo_like_image

    path, seed, size = args
    if not path.exists():
        photo_like_image(seed, size).save(path, quality=90)


def _build_synthetic(folder: Path, n: int, size: tuple[int, int]) -> None:
    """Generated photo-like JPEGs: much faster to make than non-overlapping real-photo crops
    (whose overlap check makes 20k crops take over half an hour), same decode cost per pixel."""
    from multiprocessing import Pool

    folder.mkdir(parents=True, exist_ok=True)
    jobs = [(folder / f"synthetic_{i:06d}.jpg", i, size) for i in range(n)]
    with Pool() as pool:
        pool.map(_write_synthetic, jobs, chunksize=64)


def _audit(folder: Path, cache: HashCache, workers: int | None) -> dict[str, float]:
    times: dict[str, float] = {}
    start = time.perf_counter()
    paths = list_image_paths(folder)  # what audit_splits lists with
    times["list"] = time.perf_counter() - start
    mark = time.perf_counter()
    table = hash_sources_cached(paths, cache=cache, workers=workers, progress=False)
    times["hash"] = time.perf_counter() - mark
    mark = time.perf_counter()
    splits = ["train" if i % 5 else "test" for i in range(len(paths))]
    report = audit_hash_table(table, splits)
    times["group"] = time.perf_counter() - mark
    times["total"] = time.perf_counter() - start
    times["leaked"] = float(report.n_leaked_images)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="images (default: %(default)s)")
    parser.add_argument(
        "--size", type=int, nargs=2, default=(500, 375), metavar=("W", "H"),
        help="image size (default: %(default)s, ImageNet-like)",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, default=None, help="hashing processes")
    parser.add_argument("--data", type=Path, default=HERE / "_data" / "cache")
    parser.add_argument(
        "--synthetic", action="store_true",
        help="generated photo-like JPEGs instead of real-photo crops (fast to build at 20k)",
    )  # fmt: skip
    args = parser.parse_args()

    kind = "synthetic" if args.synthetic else "jpeg"
    folder = args.data / f"{kind}_{args.size[0]}x{args.size[1]}_{args.n}"
    start = time.perf_counter()
    if args.synthetic:
        _build_synthetic(folder, args.n, tuple(args.size))
    else:
        _build(folder, args.n, tuple(args.size))
    print(f"corpus: {args.n} JPEGs {args.size[0]}x{args.size[1]} in {folder} "
          f"({time.perf_counter() - start:.1f} s to build or check)")  # fmt: skip
    time.sleep(0.2)  # files written a moment ago are not cached (racy timestamps)
    cache_dir = Path(tempfile.mkdtemp(prefix="leakaudit-bench-cache-"))
    try:
        warnings.simplefilter("error", UserWarning)  # a cache problem must not pass unseen
        cache = HashCache(cache_dir)
        first = _audit(folder, cache, args.workers)
        second = _audit(folder, HashCache(cache_dir), args.workers)
        assert first["leaked"] == second["leaked"]
        print(f"{'':8s}{'list':>9s}{'hash/lookup':>13s}{'group+report':>14s}{'total':>9s}")
        for name, t in (("first", first), ("second", second)):
            print(f"{name:8s}{t['list']:9.2f}{t['hash']:13.2f}{t['group']:14.2f}{t['total']:9.2f}")
        print(f"cache entries: {len(cache)}; database {cache.path.stat().st_size / 1e6:.1f} MB")
        print(f"hash step speed-up: {first['hash'] / second['hash']:.0f}x")
        print(f"second audit vs first: {first['total'] / second['total']:.1f}x faster")
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
