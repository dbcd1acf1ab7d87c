"""Benchmark: a second audit of an unchanged dataset, served by the hash cache, vs the first.

Both runs are the same public call, ``audit_splits({"train": ..., "test": ...})`` on
folders, timed end to end in one process against one fresh cache folder; the ratio is
first / second. Each repeat starts from a new empty cache; the medians are reported.
The files are read once before the first run, so neither run pays for a cold disk.

Corpora (built once under ``benchmarks/_data/cache/``, reused):

* ``synthetic``  generated photo-like 500x375 JPEGs (quality 90, ~36 KB): smooth content,
  cheap to decode (about 0.4 ms per file on 2 workers).
* ``grain``      the same images with ``bench_hashing.py``'s ImageNet grain recipe
  (JPEG quality 97 plus Gaussian grain, ~100 KB like real ImageNet photos): the
  realistic decode cost.
* ``photos``     real-photo crops (``photos.py``); slow to build at 20k.

Each corpus is audited as two split folders of hard links (every fifth image in
``test/``), plus ``--copies`` byte-identical copies of train images planted in
``test/``: leaked groups whose members are told apart from re-encodes by a digest of
their bytes, which the cache keeps too.

Then one more second run is taken apart, step by step as ``audit_splits`` does it:
listing the folders, the cache (stat + SQLite lookup), grouping + report, byte digests.

``--layout`` measures the file instead (issue 35): the cache's size against the bytes of
the tiny images' thumbnails it holds, for ``--layout-n`` images of a CIFAR-like folder
(an entry and a 32 x 32 thumbnail each, written through the cache's own methods in
listing order and shuffled), with the schema-5 file's 8 KiB pages and with SQLite's
default 4 KiB pages of schema 4.

Usage::

    .venv/bin/python benchmarks/bench_cache.py                      # 20000, synthetic + grain
    .venv/bin/python benchmarks/bench_cache.py --n 2000 --corpus grain --repeat 1
    .venv/bin/python benchmarks/bench_cache.py --layout --layout-n 20000 100000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from PIL import Image

from leakaudit import _cache_file, audit_hash_table, audit_splits
from leakaudit.audit import _fill_copy_digests
from leakaudit.cache import CacheWarning, HashCache, hash_context, hash_sources_with_files
from leakaudit.listing import list_image_paths
from leakaudit.loading import DecodeOptions

HERE = Path(__file__).resolve().parent
# bench_hashing.py's "imagenet" recipe: JPEG quality, luma sigma, per-channel sigma.
GRAIN = (97, 4.0, 1.5)


def _write_synthetic(job: tuple[str, int, tuple[int, int]]) -> None:
    from leakaudit.demo import photo_like_image

    path, seed, size = job
    if not os.path.exists(path):
        photo_like_image(seed, size).save(path + ".part.jpg", "JPEG", quality=90)
        os.replace(path + ".part.jpg", path)


def _write_grainy(job: tuple[str, str, int]) -> None:
    source, path, seed = job
    if os.path.exists(path):
        return
    quality, luma, chroma = GRAIN
    rng = np.random.default_rng(seed)
    with Image.open(source) as image:
        pixels = np.asarray(image.convert("RGB"), dtype=np.float32)
    noise = rng.normal(0.0, luma, pixels.shape[:2]).astype(np.float32)[..., None]
    noise = noise + rng.normal(0.0, chroma, pixels.shape).astype(np.float32)
    noisy = Image.fromarray(np.clip(np.rint(pixels + noise), 0, 255).astype(np.uint8))
    noisy.save(path + ".part.jpg", "JPEG", quality=quality)
    os.replace(path + ".part.jpg", path)


def build_corpus(kind: str, n: int, size: tuple[int, int], data: Path) -> list[Path]:
    """Return the ``n`` image files of corpus ``kind``, generating the missing ones."""
    if kind == "photos":
        sys.path.insert(0, str(HERE))
        from photos import build_photo_corpus

        return build_photo_corpus(
            data / f"jpeg_{size[0]}x{size[1]}", n, size=size, fmt="JPEG", quality=85
        )
    folder = data / f"synthetic_{size[0]}x{size[1]}_{n}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"synthetic_{i:06d}.jpg" for i in range(n)]
    jobs: list[tuple[str, int, tuple[int, int]]] = [
        (str(p), i, size) for i, p in enumerate(paths) if not p.exists()
    ]
    if jobs:
        with Pool() as pool:
            pool.map(_write_synthetic, jobs, chunksize=64)
    if kind == "synthetic":
        return paths
    # The grain corpus: the synthetic images with grain, re-encoded at quality 97.
    grainy = data / f"grain_{size[0]}x{size[1]}_{n}"
    grainy.mkdir(parents=True, exist_ok=True)
    targets = [grainy / p.name for p in paths]
    grain_jobs = [
        (str(p), str(t), i) for i, (p, t) in enumerate(zip(paths, targets, strict=True))
        if not t.exists()
    ]  # fmt: skip
    if grain_jobs:
        with Pool() as pool:
            pool.map(_write_grainy, grain_jobs, chunksize=64)
    return targets


def split_folders(files: list[Path], copies: int) -> dict[str, Path]:
    """Hard-link ``files`` into ``train/`` and ``test/`` (every fifth), plus planted copies."""
    root = files[0].parent.with_name(files[0].parent.name + f"-splits-{len(files)}-{copies}")
    folders = {"train": root / "train", "test": root / "test"}
    if not (root / "done").exists():
        shutil.rmtree(root, ignore_errors=True)
        for folder in folders.values():
            folder.mkdir(parents=True)
        train = [f for i, f in enumerate(files) if i % 5]
        for i, file in enumerate(files):
            _link(file, folders["test" if i % 5 == 0 else "train"] / file.name)
        step = max(1, len(train) // max(copies, 1))
        for file in train[::step][:copies]:
            _link(file, folders["test"] / f"copy_{file.name}")
        (root / "done").touch()
        time.sleep(0.2)  # linking changed the ctimes: let them settle (racy timestamps)
    return folders


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # no hard links here: a copy
        shutil.copy2(source, target)


def warm_page_cache(folders: dict[str, Path]) -> float:
    megabytes = 0.0
    for folder in folders.values():
        for path in list_image_paths(folder):
            with open(path, "rb") as file:
                megabytes += len(file.read()) / 1e6
    return megabytes


def timed_audit(folders: dict[str, Path], cache_dir: Path, workers: int | None) -> float:
    start = time.perf_counter()
    audit_splits(dict(folders), cache=HashCache(cache_dir), workers=workers, progress=False)
    return time.perf_counter() - start


def breakdown(folders: dict[str, Path], cache_dir: Path, workers: int | None) -> dict[str, float]:
    """Time the steps of one (second) audit as ``audit_splits`` runs them."""
    times: dict[str, float] = {}
    start = time.perf_counter()
    sources: list[str] = []
    labels: list[str] = []
    for name, folder in folders.items():
        paths = list_image_paths(folder)
        sources += paths
        labels += [name] * len(paths)
    times["list"] = time.perf_counter() - start
    mark = time.perf_counter()
    table, files = hash_sources_with_files(
        sources,
        cache=HashCache(cache_dir),
        options=DecodeOptions(),
        workers=workers,
        progress=False,
        on_error="warn",
    )
    times["cache"] = time.perf_counter() - mark
    mark = time.perf_counter()
    report = audit_hash_table(table, labels)
    times["group"] = time.perf_counter() - mark
    mark = time.perf_counter()
    assert report.table is not None
    _fill_copy_digests(report.table, table, sources, files)
    times["digests"] = time.perf_counter() - mark
    times["total"] = time.perf_counter() - start
    return times


def machine_load() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load unknown"
    return f"load {one:.2f} (5 min {five:.2f}) on {os.cpu_count()} cores"


def bench(kind: str, args: argparse.Namespace) -> tuple[float, float]:
    start = time.perf_counter()
    files = build_corpus(kind, args.n, tuple(args.size), args.data)
    folders = split_folders(files, args.copies)
    megabytes = warm_page_cache(folders)
    n_files = sum(len(list_image_paths(f)) for f in folders.values())
    print(
        f"\n[{kind}] {n_files} JPEGs {args.size[0]}x{args.size[1]} in {folders['train'].parent}"
        f" ({megabytes / n_files * 1000:.0f} KB each, {args.copies} planted byte copies;"
        f" {time.perf_counter() - start:.1f} s to build or check)"
    )
    firsts, seconds = [], []
    for attempt in range(args.repeat):
        cache_dir = Path(tempfile.mkdtemp(prefix="leakaudit-bench-cache-"))
        try:
            first = timed_audit(folders, cache_dir, args.workers)
            second = timed_audit(folders, cache_dir, args.workers)
            steps = breakdown(folders, cache_dir, args.workers)
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)
        firsts.append(first)
        seconds.append(second)
        print(
            f"  repeat {attempt + 1}: first {first:6.2f} s  second {second:5.3f} s  "
            f"ratio {first / second:5.1f}x   second run, step by step: "
            + "  ".join(f"{k} {v * 1000:.0f} ms" for k, v in steps.items())
            + f"   [{machine_load()}]"
        )
    first, second = statistics.median(firsts), statistics.median(seconds)
    print(
        f"  median: first audit {first:.2f} s, second audit {second:.3f} s: "
        f"{first / second:.1f}x faster (target 20x)"
    )
    return first, second


def layout_sizes(n: int, page_size: int, *, shuffled: bool) -> tuple[int, int, int]:
    """Write ``n`` images' entries and thumbnails into a new cache with ``page_size``
    pages; return the file's size, the thumbnails' bytes and all rows' bytes (keys too)."""
    folder = Path(tempfile.mkdtemp(prefix="leakaudit-bench-layout-"))
    kept = _cache_file._PAGE_SIZE
    _cache_file._PAGE_SIZE = page_size  # type: ignore[misc]
    try:
        cache = HashCache(folder)
        context = hash_context(DecodeOptions())
        rng = np.random.default_rng(0)
        keys = [f"/home/someone/data/cifar10/train/class{i % 10}/{i:06d}.png" for i in range(n)]
        order = rng.permutation(n).tolist() if shuffled else list(range(n))
        identity, rows = bytes(32), 0
        for start in range(0, n, 2000):  # one batch per write transaction, as a run writes
            batch = [keys[i].encode() for i in order[start : start + 2000]]
            entries = [(k, identity + rng.bytes(24) + bytes(8), None) for k in batch]
            thumbs = [(k, identity + rng.bytes(1024)) for k in batch]
            cache._store(entries, context)
            cache._store_side("thumbs", thumbs, context)
            rows += sum(16 + 2 * len(k) + 64 + 32 + 1024 for k in batch)
        size = sum(p.stat().st_size for p in folder.iterdir())
    finally:
        _cache_file._PAGE_SIZE = kept  # type: ignore[misc]
        shutil.rmtree(folder, ignore_errors=True)
    return size, 1024 * n, rows


def layout(counts: list[int]) -> None:
    print("cache file size against the thumbnails it holds (an entry + a 32x32 thumbnail each)")
    for n in counts:
        for shuffled in (False, True):
            for page, name in ((4096, "schema 4 (4 KiB pages)"), (8192, "schema 5 (8 KiB pages)")):
                start = time.perf_counter()
                size, thumbs, rows = layout_sizes(n, page, shuffled=shuffled)
                print(
                    f"  {n:7d} images, {'shuffled' if shuffled else 'in order'}, {name}: "
                    f"{size / 1e6:6.1f} MB for {thumbs / 1e6:6.1f} MB of thumbnails "
                    f"({size / thumbs:.2f}x; {size / rows:.2f}x all rows with their keys)"
                    f"  [{time.perf_counter() - start:.1f} s]"
                )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="images (default: %(default)s)")
    parser.add_argument(
        "--size", type=int, nargs=2, default=(500, 375), metavar=("W", "H"),
        help="image size (default: %(default)s, ImageNet-like)",
    )  # fmt: skip
    parser.add_argument(
        "--corpus", nargs="+", choices=("synthetic", "grain", "photos"),
        default=["synthetic", "grain"], help="corpora to measure (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--copies", type=int, default=None,
        help="byte-identical copies planted in test/ (default: 1%% of --n)",
    )  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, help="first+second pairs (median)")
    parser.add_argument("--workers", type=int, default=None, help="hashing processes")
    parser.add_argument("--data", type=Path, default=HERE / "_data" / "cache")
    parser.add_argument("--layout", action="store_true", help="measure the file's size instead")
    parser.add_argument(
        "--layout-n", type=int, nargs="+", default=[20000, 100000],
        help="images for --layout (default: %(default)s)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.layout:
        layout(args.layout_n)
        return 0
    if args.copies is None:
        args.copies = args.n // 100
    warnings.simplefilter("error", CacheWarning)  # a cache problem must not pass unseen
    print(f"python {sys.version.split()[0]}, {machine_load()}")
    for kind in args.corpus:
        bench(kind, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
