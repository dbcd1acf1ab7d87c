"""Interrupt a large scan at random moments: hangs, exit codes, lines printed (issue #35, point 7).

Writes N tiny distinct PNGs (24 px, 80% train / 20% test) once under ``--root``
(reused on later runs), then starts ``python -m leakaudit scan ROOT --no-cache
--workers 2`` ``--interrupts`` times and sends SIGINT (to the process group, as
a terminal's Ctrl-C does) or SIGTERM (to the process, or to its group as
``timeout`` does) at a random moment of the run, counted from leakaudit's
first line (its SIGTERM handler in place). For each: whether it ended within
20 s, its exit code, the lines it printed on stderr (INFO lines aside), and the
processes left behind.

    python benchmarks/bench_signals.py --root /tmp/signals100k --images 100000 --interrupts 50
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_signals import CLI, interrupt_run, write_tiny_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--images", type=int, default=100_000)
    parser.add_argument("--interrupts", type=int, default=50)
    parser.add_argument("--latest", type=float, default=None, help="latest moment, seconds")
    parser.add_argument("--seed", type=int, default=35)
    args = parser.parse_args()
    if not (args.root / "train").is_dir():
        started = time.perf_counter()
        write_tiny_dataset(args.root, args.images)
        print(f"wrote {args.images} images in {time.perf_counter() - started:.0f} s")
    argv = ["scan", str(args.root), "--no-cache", "--workers", "2"]
    latest = args.latest
    if latest is None:  # the moments spread over a whole run
        started = time.perf_counter()
        whole = subprocess.run([*CLI, *argv], capture_output=True, check=False)
        latest = time.perf_counter() - started
        print(f"uninterrupted run: {latest:.1f} s, code {whole.returncode}")
    rng = random.Random(args.seed)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for _ in range(args.interrupts):
            signum = rng.choice([signal.SIGINT, signal.SIGTERM])
            group = signum == signal.SIGINT or rng.random() < 0.5
            delay = rng.uniform(0.0, latest)
            run = interrupt_run(argv, delay, signum, group=group, workdir=Path(work))
            row = {
                "signal": signal.Signals(signum).name,
                "group": group,
                "delay": round(delay, 2),
                "finished_first": run["finished_first"],
                "code": run["code"],
                "lines": run["lines"],
                "left": len(run["left"]),  # type: ignore[arg-type]
                "exit_seconds": round(float(run["seconds"]), 2),  # type: ignore[arg-type]
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    interrupted = [r for r in rows if not r["finished_first"]]
    hung = [r for r in interrupted if r["code"] is None]
    codes = collections.Counter((r["signal"], r["code"]) for r in interrupted)
    lines = collections.Counter(len(r["lines"]) for r in interrupted)  # type: ignore[arg-type]
    slowest = max((float(r["exit_seconds"]) for r in interrupted), default=0.0)  # type: ignore[arg-type]
    print(
        f"{len(interrupted)} interrupted ({len(rows) - len(interrupted)} finished first), "
        f"{len(hung)} hung, codes {dict(codes)}, stderr lines {dict(lines)}, "
        f"processes left {sum(int(r['left']) for r in rows)}, "  # type: ignore[call-overload]
        f"slowest exit {slowest:.2f} s"
    )


if __name__ == "__main__":
    main()
