"""Benchmark auditing many identical images (issue 23, points 7 and 8).

Scraped data is full of placeholders ("image not available"): one picture copied thousands of
times. ROOT holds ``N`` byte-identical small images (8 x 8 PNGs of a textured placeholder, so they
are not low-information) spread over ``train`` and ``test``, plus a few distinct images and one
near-duplicate pair. ``leakaudit scan ROOT --csv --json --html`` runs as a subprocess (no cache);
the table gives its wall time, its peak RSS (``ru_maxrss`` of the child) and the size of each
output, and the rows of the pairs table. Run, e.g.::

    .venv/bin/python benchmarks/bench_identical.py --sizes 1000 10000 100000
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parent.parent


def placeholder_bytes(side: int = 8) -> bytes:
    """One textured placeholder PNG, as bytes."""
    import io

    rng = np.random.default_rng(23)
    pixels = rng.integers(0, 256, size=(side, side, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def build_root(root: Path, n: int) -> None:
    """``n`` identical images over train/test (3:1), plus distinct ones and a planted pair."""
    data = placeholder_bytes()
    for split in ("train", "test"):
        (root / split / "x").mkdir(parents=True)
    for i in range(n):
        split = "test" if i % 4 == 3 else "train"
        (root / split / "x" / f"ph{i:06d}.png").write_bytes(data)
    rng = np.random.default_rng(1)
    for i in range(6):
        side = 64
        pixels = rng.integers(0, 256, size=(side // 8, side // 8, 3), dtype=np.uint8)
        image = Image.fromarray(pixels).resize((side, side), Image.Resampling.BILINEAR)
        split = "test" if i % 2 else "train"
        image.save(root / split / "x" / f"distinct{i}.png")
        if i == 0:  # a near-duplicate in the other split
            image.save(root / "test" / "x" / "distinct0_copy.jpg", quality=90)


def run_scan(root: Path, out: Path) -> dict[str, float]:
    """Scan ``root`` with every output; return wall time, peak RSS and output sizes."""
    command = [
        str(REPO / ".venv" / "bin" / "leakaudit"),
        "scan",
        str(root),
        "--no-cache",
        "--quiet",
        "--csv",
        str(out / "report.csv"),
        "--json",
        str(out / "report.json"),
        "--html",
        str(out / "report.html"),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode not in (0, 1):
        raise RuntimeError(f"scan failed ({done.returncode}): {done.stderr[-2000:]}")
    sizes = {
        path.name: path.stat().st_size / 1e6 for path in sorted(out.iterdir()) if path.is_file()
    }
    pairs_file = next((p for p in out.iterdir() if p.name.endswith("pairs.csv")), None)
    n_pairs = 0
    if pairs_file is not None:
        with pairs_file.open(newline="") as file:
            n_pairs = sum(1 for _ in csv.reader(file)) - 1
    return {
        "wall": wall,
        # ru_maxrss of children is the largest child so far: report it only when it grew.
        "peak": max(peak, before) / 1024,
        "csv": sum(v for k, v in sizes.items() if k.endswith(".csv")),
        "json": sizes.get("report.json", 0.0),
        "html": sizes.get("report.html", 0.0),
        "pairs": n_pairs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--tmp", default=None, help="folder for ROOT (default: system temp)")
    args = parser.parse_args(argv)
    rows = []
    for n in sorted(args.sizes):
        with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
            root, out = Path(tmp) / "root", Path(tmp) / "out"
            out.mkdir()
            start = time.perf_counter()
            build_root(root, n)
            build = time.perf_counter() - start
            result = run_scan(root, out)
            shutil.rmtree(root)
        rows.append((n, build, result))
        print(f"N={n}: {result}", file=sys.stderr, flush=True)
    print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}")
    print()
    print(
        "| identical images | build s | scan s | peak RSS MB | pair rows | "
        "CSV MB | JSON MB | HTML MB |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, build, r in rows:
        print(
            f"| {n:,} | {build:.1f} | {r['wall']:.1f} | {r['peak']:.0f} | {int(r['pairs']):,} | "
            f"{r['csv']:.2f} | {r['json']:.2f} | {r['html']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
