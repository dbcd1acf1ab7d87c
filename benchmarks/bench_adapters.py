"""Benchmark the framework adapters against the core.

Two claims of issue 3 are measured on generated photo-like JPEGs:

1. Auditing an ``ImageFolder`` through ``leakaudit.adapters.torchvision`` adds under
   10% to auditing the same folders with the core (``leakaudit.audit.audit_splits``).
   Reported with and without building the ``ImageFolder`` objects (a training
   script builds them anyway; the core scans the folders itself).
2. A second ``leakaudit.adapters.huggingface`` audit of a disk-backed
   ``DatasetDict`` (``save_to_disk`` / ``load_from_disk``) is at least 10x faster
   than the first, because the hashes come from the ``datasets`` cache.

Run::

    python benchmarks/bench_adapters.py --n 20000          # the issue's size
    python benchmarks/bench_adapters.py --n 2000 --workers 2

Needs ``pip install 'leakaudit-vision[all]'``. Prints a table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

SPLITS = {"train": 0.8, "val": 0.1, "test": 0.1}
CLASSES = ("cat", "dog", "bird", "fish")


def generate_folders(root: Path, n: int, size: tuple[int, int]) -> dict[str, Path]:
    """Write ``n`` distinct JPEGs in ImageFolder layout, plus a few cross-split copies."""
    from leakaudit.demo import photo_like_image

    counts = {name: int(n * share) for name, share in SPLITS.items()}
    counts["train"] += n - sum(counts.values())
    seed = 0
    for split, count in counts.items():
        for i in range(count):
            folder = root / split / CLASSES[i % len(CLASSES)]
            folder.mkdir(parents=True, exist_ok=True)
            photo_like_image(seed, size).save(folder / f"{split}_{i:06d}.jpg", quality=90)
            seed += 1
    # A handful of leaks so the audit has something to report.
    train_files = sorted((root / "train").rglob("*.jpg"))
    for k, source in enumerate(train_files[: max(1, n // 1000)]):
        target = root / "test" / source.parent.name / f"leak_{k}.jpg"
        target.write_bytes(source.read_bytes())
    return {split: root / split for split in SPLITS}


def best_of(repeats: int, run: Callable[[], Any]) -> tuple[float, Any]:
    times = []
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def bench_torchvision(splits: dict[str, Path], workers: int | None, repeats: int) -> dict[str, Any]:
    from torchvision.datasets import ImageFolder

    from leakaudit.adapters.torchvision import audit_datasets
    from leakaudit.audit import audit_splits

    def core() -> Any:
        return audit_splits(splits, workers=workers, progress=False, cache=False)

    def build() -> dict[str, Any]:
        return {name: ImageFolder(str(path)) for name, path in splits.items()}

    built = build()

    def adapter_only() -> Any:
        return audit_datasets(built, workers=workers, progress=False, cache=False)

    def adapter_with_scan() -> Any:
        return audit_datasets(build(), workers=workers, progress=False, cache=False)

    core()  # warm the page cache and the worker pool's imports
    # Interleaved so that drift in machine load hits both sides alike.
    t_core, t_adapter, t_adapter_scan = [], [], []
    for _ in range(repeats):
        t_core.append(best_of(1, core)[0])
        t_adapter.append(best_of(1, adapter_only)[0])
        t_adapter_scan.append(best_of(1, adapter_with_scan)[0])
    core_report = core()
    adapter_report = adapter_only()
    if core_report.n_leaked_images != adapter_report.n_leaked_images:
        raise SystemExit("the adapter and the core disagree; the benchmark is void")
    best_core, best_adapter, best_scan = min(t_core), min(t_adapter), min(t_adapter_scan)
    return {
        "images": int(core_report.total_images),
        "core_s": round(best_core, 3),
        "adapter_s": round(best_adapter, 3),
        "adapter_with_imagefolder_s": round(best_scan, 3),
        "overhead_pct": round(100 * (best_adapter / best_core - 1), 1),
        "overhead_with_imagefolder_pct": round(100 * (best_scan / best_core - 1), 1),
        "leaked_images": int(core_report.n_leaked_images),
    }


def bench_huggingface(
    splits: dict[str, Path], workdir: Path, num_proc: int | None
) -> dict[str, Any]:
    from datasets import Dataset, DatasetDict, Features, Image, load_from_disk

    from leakaudit.adapters.huggingface import audit_dataset_dict, hash_dataset

    features = Features({"image": Image()})
    dd = DatasetDict(
        {
            name: Dataset.from_dict(
                {"image": [str(p) for p in sorted(path.rglob("*.jpg"))]}, features=features
            )
            for name, path in splits.items()
        }
    )
    stored = workdir / "hf"
    dd.save_to_disk(str(stored))  # embeds the image bytes: a self-contained copy

    def drop_cache() -> None:
        for cache in stored.rglob("cache-*.arrow"):
            cache.unlink()

    def audit() -> Any:
        return audit_dataset_dict(load_from_disk(str(stored)), num_proc=num_proc, progress=False)

    def hash_only() -> None:
        for split in load_from_disk(str(stored)).values():
            hash_dataset(split, num_proc=num_proc, progress=False)

    # The hashing phase alone (what the datasets cache saves) ...
    drop_cache()
    t_hash_first = best_of(1, hash_only)[0]
    t_hash_second = best_of(1, hash_only)[0]
    # ... and the whole audit (hashing + the core's grouping and report).
    drop_cache()
    t_first, first = best_of(1, audit)
    t_second, second = best_of(1, audit)
    if first.n_leaked_images != second.n_leaked_images:
        raise SystemExit("the cached audit disagrees with the first; the benchmark is void")
    return {
        "images": int(first.total_images),
        "first_s": round(t_first, 3),
        "second_s": round(t_second, 3),
        "speedup": round(t_first / t_second, 1),
        "hash_first_s": round(t_hash_first, 3),
        "hash_second_s": round(t_hash_second, 3),
        "hash_speedup": round(t_hash_first / t_hash_second, 1),
        "grouping_and_report_s": round(t_second - t_hash_second, 3),
        "leaked_images": int(first.n_leaked_images),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="images to generate (default 20000)")
    parser.add_argument(
        "--size",
        type=int,
        nargs=2,
        default=(160, 120),
        metavar=("W", "H"),
        help="image size (default 160 120)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="hashing processes for both sides (default: all cores)",
    )
    parser.add_argument(
        "--num-proc",
        type=int,
        default=None,
        help="Dataset.map processes for the HF audit (default: one)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per side (best kept)")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where to write the images (default: a temporary folder, removed)",
    )
    parser.add_argument("--skip-hf", action="store_true", help="skip the Hugging Face part")
    args = parser.parse_args(argv)
    try:
        import datasets

        datasets.disable_progress_bars()
    except ImportError:
        pass
    if args.n < 10:
        parser.error("--n must be at least 10")

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="leakaudit-bench-adapters-"))
    try:
        start = time.perf_counter()
        splits = generate_folders(workdir / "folders", args.n, tuple(args.size))
        print(
            f"generated {args.n} images in {time.perf_counter() - start:.1f}s under {workdir}",
            file=sys.stderr,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # LargeGroupWarning etc. are not the point here
            results: dict[str, Any] = {"n": args.n, "workers": args.workers}
            results["torchvision"] = bench_torchvision(splits, args.workers, args.repeats)
            if not args.skip_hf:
                results["huggingface"] = bench_huggingface(splits, workdir, args.num_proc)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    tv = results["torchvision"]
    print(f"torchvision ImageFolder, {tv['images']} images (best of {args.repeats}):")
    print(f"  core audit_splits              {tv['core_s']:8.3f} s")
    print(
        f"  adapter audit_datasets         {tv['adapter_s']:8.3f} s  "
        f"({tv['overhead_pct']:+.1f}%, target < +10%)"
    )
    print(
        f"  adapter incl. ImageFolder()    {tv['adapter_with_imagefolder_s']:8.3f} s  "
        f"({tv['overhead_with_imagefolder_pct']:+.1f}%)"
    )
    if "huggingface" in results:
        hf = results["huggingface"]
        print(f"Hugging Face, disk-backed DatasetDict, {hf['images']} images:")
        print(f"  first audit                    {hf['first_s']:8.3f} s")
        print(
            f"  second audit (datasets cache)  {hf['second_s']:8.3f} s  "
            f"({hf['speedup']:.1f}x faster, target >= 10x)"
        )
        print(
            f"  of which hashing: first        {hf['hash_first_s']:8.3f} s, cached "
            f"{hf['hash_second_s']:.3f} s ({hf['hash_speedup']:.1f}x)"
        )
        print(f"  grouping + report (the core)   {hf['grouping_and_report_s']:8.3f} s")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
