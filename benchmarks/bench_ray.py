"""Hashing through Ray Data vs the plain core path, 1 and 2 workers, measured side by side.

On the same photo-like JPEGs, in one run (page cache warmed first, methods interleaved
pass by pass, best of ``--repeat`` passes), with the default audit's decoding
(``hashing_options(None, dihedral=True, verify="auto")``: pHash + dHash, the dihedral
orientation entries and the crop and rotation entries):

* ``core-1``    ``hash_sources(paths, workers=1)``
* ``core-2``    ``hash_sources(paths, workers=2)`` (the forkserver pool, started once untimed)
* ``ray-1``     ``hash_ray_dataset(ds, concurrency=1)``: one hashing task at a time, rows
  materialized and brought to the driver as Arrow tables (what ``audit_ray_dataset`` does)
* ``ray-2``     the same, ``concurrency=2``

on a local Ray cluster started here (``ray.init(num_cpus=2)``, started once, and one
untimed warm-up pass of each path, before the timed passes). Optionally (``--audit``)
the whole audit too: ``audit_sources(workers=2)`` vs ``audit_ray_dataset`` (hashing,
grouping and verification). It prints throughput
(images/s), the ratios Ray/core at equal workers and the 2-worker scaling of each, and
checks that Ray's hashes equal the core's, bit for bit (phash, dhash, digests, errors,
every orientation, crop and rotation entry).

Usage::

    python benchmarks/bench_ray.py --n 2000
    python benchmarks/bench_ray.py --n 300 --repeat 1      # quick

Data: the ``imagenet`` set of ``bench_hashing.py`` (500 x 375 JPEG, ~100 KB, real-photo
crops with grain, ``benchmarks/photos.py``), generated under
``benchmarks/_data/bench_hashing/`` (gitignored) when missing. Needs
``pip install 'leakaudit-vision[ray,bench]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_hashing import build_set, machine_load, warm_page_cache  # noqa: E402

from leakaudit.audit import audit_sources, hashing_options, wants_crop_entries  # noqa: E402
from leakaudit.hashing import HashTable, hash_sources  # noqa: E402
from leakaudit.shards import HashShards  # noqa: E402


def run_core(paths: Sequence[str], workers: int) -> HashTable:
    options = hashing_options(None, dihedral=True, verify="auto")
    return hash_sources(
        paths,
        decode=options,
        dihedral=True,
        crop_entries=wants_crop_entries(dihedral=True, verify="auto"),
        workers=workers,
        progress=False,
    )


def run_ray(ds: Any, concurrency: int, batch_size: int) -> HashShards:
    import ray

    from leakaudit.adapters.ray import hash_ray_dataset

    hashed = hash_ray_dataset(ds, concurrency=concurrency, batch_size=batch_size)
    return HashShards.from_arrow(ray.get(hashed.materialize().to_arrow_refs()))


def check_exact(core: HashTable, shards: HashShards, paths: Sequence[str]) -> list[str]:
    """Where Ray's rows differ from the core's (empty: they agree on everything)."""
    import pandas as pd

    order = pd.Index(shards.ids).get_indexer(list(paths))
    if (order < 0).any():
        return ["rows missing from Ray's output"]
    table = shards.hash_table()
    problems = [
        name
        for name in ("phash", "dhash", "digest", "valid", "low_information")
        if not np.array_equal(getattr(table, name)[order], getattr(core, name))
    ]
    mine = {paths[k]: r for k, r in core.errors.items()}
    theirs = {str(shards.ids[row]): r for row, r in shards.errors.items()}
    if mine != theirs:
        problems.append("errors")
    assert core.orientations is not None and table.orientations is not None
    entries = table.orientations.take(order.astype(np.intp))
    for name in ("owner", "phash", "dhash"):
        if not np.array_equal(getattr(entries, name), getattr(core.orientations, name)):
            problems.append(f"orientations.{name}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="images (default 2000)")
    parser.add_argument("--repeat", type=int, default=3, help="passes per method; best kept")
    parser.add_argument(
        "--batch-size", type=int, default=256, help="map_batches batch size (default 256)"
    )
    parser.add_argument("--audit", action="store_true", help="also time the whole audit")
    parser.add_argument(
        "--data-dir", type=Path, default=HERE / "_data" / "bench_hashing", help="image folder"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.n < 1 or args.repeat < 1:
        parser.error("--n and --repeat must be >= 1")

    import ray

    start = time.perf_counter()
    paths = [str(p) for p in build_set("imagenet", args.n, args.data_dir)]
    total_bytes = warm_page_cache([Path(p) for p in paths])
    print(f"{len(paths)} images ready in {time.perf_counter() - start:.1f} s", file=sys.stderr)

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    ray_start = time.perf_counter() - start
    try:
        ds = ray.data.from_items(
            [{"image": p, "split": "train"} for p in paths],
            override_num_blocks=max(2, len(paths) // args.batch_size),
        ).materialize()
        results: dict[str, Any] = {}
        methods: dict[str, Callable[[], Any]] = {
            "core-1": lambda: run_core(paths, 1),
            "core-2": lambda: run_core(paths, 2),
            "ray-1": lambda: run_ray(ds, 1, args.batch_size),
            "ray-2": lambda: run_ray(ds, 2, args.batch_size),
        }
        if args.audit:
            from leakaudit.adapters.ray import audit_ray_dataset

            splits = [("train", "val", "test")[i % 3] for i in range(len(paths))]
            labelled = ray.data.from_items(
                [{"image": p, "split": s} for p, s in zip(paths, splits, strict=True)],
                override_num_blocks=max(2, len(paths) // args.batch_size),
            ).materialize()
            methods["audit-core-2"] = lambda: audit_sources(paths, splits, workers=2, cache=False)
            methods["audit-ray-2"] = lambda: audit_ray_dataset(labelled, concurrency=2)
        # Warm-up, untimed: Ray's worker processes import leakaudit and numpy once, the
        # core's forkserver pool starts once; a long-running job pays either only once.
        warm = paths[: min(len(paths), 4 * args.batch_size)]
        run_core(warm, 2)
        run_ray(ds.limit(len(warm)), 2, args.batch_size)
        load_before = machine_load()
        best = dict.fromkeys(methods, float("inf"))
        for round_number in range(args.repeat):
            for name, function in methods.items():
                begin = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    results[name] = function()
                seconds = time.perf_counter() - begin
                best[name] = min(best[name], seconds)
                print(
                    f"  pass {round_number + 1} {name:13s} {seconds:8.2f} s "
                    f"{len(paths) / seconds:8.1f} img/s",
                    file=sys.stderr,
                )
        load_after = machine_load()
        problems = check_exact(results["core-1"], results["ray-2"], paths)
        problems += check_exact(results["core-2"], results["ray-1"], paths)
        if args.audit:
            a, b = results["audit-core-2"], results["audit-ray-2"]
            if not a.table["group_id"].equals(b.table["group_id"]):
                problems.append("audit groups")
    finally:
        ray.shutdown()

    rates = {name: len(paths) / seconds for name, seconds in best.items()}
    print()
    print(
        f"Hashing throughput, images/s: {len(paths)} photo-like JPEGs 500x375 "
        f"({total_bytes / len(paths) / 1024:.0f} KB mean), default audit decoding "
        f"(dihedral + crop entries), best of {args.repeat}. Before: {load_before}; "
        f"after: {load_after}. Ray start-up (once, not timed below): {ray_start:.1f} s."
    )
    header = f"{'workers':>8s} {'core':>9s} {'ray':>9s} {'ray/core':>9s}"
    print(header)
    print("-" * len(header))
    for k in (1, 2):
        core, through_ray = rates[f"core-{k}"], rates[f"ray-{k}"]
        print(f"{k:8d} {core:9.1f} {through_ray:9.1f} {through_ray / core:8.2f}x")
    print(
        f"{'2 vs 1':>8s} {rates['core-2'] / rates['core-1']:8.2f}x "
        f"{rates['ray-2'] / rates['ray-1']:8.2f}x"
    )
    if args.audit:
        core, through_ray = rates["audit-core-2"], rates["audit-ray-2"]
        print(
            f"whole audit, 2 workers: core {core:.1f} img/s, ray {through_ray:.1f} img/s "
            f"({through_ray / core:.2f}x)"
        )
    print(
        "exactness: Ray's hashes equal the core's on every row and entry"
        if not problems
        else f"EXACTNESS FAILED: {', '.join(problems)}"
    )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "n": len(paths),
                    "rates": rates,
                    "ray_start_s": ray_start,
                    "load": [load_before, load_after],
                    "exact": not problems,
                },
                indent=2,
            )
        )
    return 0 if not problems else 1


if __name__ == "__main__":
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    raise SystemExit(main())
