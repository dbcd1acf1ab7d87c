"""How hashing runs in parallel from a user's script: the choice behind ``leakaudit._workers``.

Each row is a fresh Python process running a small script that hashes the same photo corpus
(``photos.build_photo_corpus``: real-photo JPEG crops, 500 x 375) and prints the seconds the
``hash_sources`` call took. The script imports torch first when ``--torch`` is given, as a
training script would, which is what a worker that imports the main module again pays for.

Rows, interleaved over ``--repeats`` rounds (median, min and max):

- ``serial``: ``workers=1``, everything in the script's process;
- ``pool (mainless)``: today's pool, workers started without importing ``__main__``;
- ``pool (re-imports main)``: the standard ``forkserver`` context, whose workers import the
  main script again (the code before issue 25; needs the script's ``__main__`` guard);
- ``threads``: a thread pool over the same chunks, not adopted: decoder warnings are collected
  with ``warnings.catch_warnings``, which is process-wide before Python 3.14.

Ratios are against ``serial`` in the same round. Run, e.g.::

    .venv/bin/python benchmarks/bench_parallel.py --images 2000 --repeats 3 --torch
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from photos import build_photo_corpus

SCRIPT = """
import sys, time
{torch}
import leakaudit.hashing as hashing
paths = sys.argv[1:]
mode = "{mode}"
if __name__ == "__main__":
    if mode == "pool (re-imports main)":
        import multiprocessing
        hashing.worker_context = lambda: multiprocessing.get_context("forkserver")
    start = time.perf_counter()
    if mode == "threads":
        from concurrent.futures import ThreadPoolExecutor
        options = hashing.resolve_decode(None)
        chunks = [paths[i : i + 32] for i in range(0, len(paths), 32)]
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda c: hashing._hash_chunk(c, c, options, True), chunks))
    else:
        workers = 1 if mode == "serial" else 2
        hashing.hash_sources(paths, workers=workers, dihedral=True, progress=False)
    print(time.perf_counter() - start)
"""

MODES = ["serial", "pool (mainless)", "pool (re-imports main)", "threads"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--torch", action="store_true", help="the script imports torch first")
    parser.add_argument("--data", type=Path, default=Path("benchmarks/_data/parallel"))
    args = parser.parse_args()
    paths = [str(p) for p in build_photo_corpus(args.data, args.images)]
    seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
    ratios: dict[str, list[float]] = {mode: [] for mode in MODES}
    scripts = Path(tempfile.mkdtemp(prefix="bench-parallel-"))
    for _ in range(args.repeats):
        round_: dict[str, float] = {}
        for number, mode in enumerate(MODES):
            script = scripts / f"script{number}.py"  # a main file, which workers may re-import
            script.write_text(
                textwrap.dedent(
                    SCRIPT.format(mode=mode, torch="import torch" if args.torch else "")
                )
            )
            done = subprocess.run(
                [sys.executable, str(script), *paths], capture_output=True, text=True, check=True
            )
            round_[mode] = float(done.stdout.split()[-1])
            seconds[mode].append(round_[mode])
        for mode in MODES:
            ratios[mode].append(round_["serial"] / round_[mode])
    print(
        f"{args.images} photo JPEGs, 2 workers, torch imported: {args.torch}, {args.repeats} rounds"
    )
    print()
    print("| mode | median s | min s | max s | speed-up vs serial (median) |")
    print("|---|---|---|---|---|")
    for mode in MODES:
        values = seconds[mode]
        print(
            f"| {mode} | {statistics.median(values):.2f} | {min(values):.2f} | "
            f"{max(values):.2f} | {statistics.median(ratios[mode]):.2f}x |"
        )


if __name__ == "__main__":
    main()
