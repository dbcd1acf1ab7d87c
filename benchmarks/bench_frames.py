"""Benchmark: the DataFrame API's hex parse, before and after it was vectorised.

``find_duplicate_groups`` takes hex strings; parsing them was a per-row Python loop (3.3 s of
7.4 s at 1M rows in issue 12's measurement). This times, in one run, the parse of the same
column by the implementation at ``--old-ref`` (read with ``git show``) and by the current one,
checks they return the same values, and times ``find_duplicate_groups`` end to end.

Usage::

    .venv/bin/python benchmarks/bench_frames.py                 # 1M uniform hashes, t=5
    .venv/bin/python benchmarks/bench_frames.py --n 100000 --kind clumpy
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic_hashes import cached

from leakaudit.frames import find_duplicate_groups, hash_values_from_frame
from leakaudit.hashing import hashes_to_hex

ROOT = Path(__file__).resolve().parents[1]


def old_parser(ref: str) -> Any:
    """The ``_parse_hex_column`` of ``ref``'s frames.py."""
    source = subprocess.run(
        ["git", "show", f"{ref}:leakaudit/frames.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    start = source.index("def _parse_hex_column(")
    end = source.index("def hash_values_from_frame(")
    namespace: dict[str, Any] = {}
    exec(  # the old function alone, with the names it uses
        "from __future__ import annotations\nimport numpy as np\nimport pandas as pd\n"
        "from leakaudit._validation import describe\n" + source[start:end],
        namespace,
    )
    return namespace["_parse_hex_column"]


def best_of(function: Any, repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--kind", choices=["uniform", "clumpy"], default="uniform")
    parser.add_argument("--threshold", type=int, default=5)
    parser.add_argument("--missing", type=float, default=0.01, help="share of missing hashes")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--old-ref", default="7cf9ec5")
    args = parser.parse_args()

    values = cached(args.kind, args.n)
    texts = pd.Series(hashes_to_hex(values), dtype=object)
    rng = np.random.default_rng(0)
    texts[rng.random(args.n) < args.missing] = None
    frame = pd.DataFrame({"path": [f"{i}.jpg" for i in range(args.n)], "hash": texts})

    old = old_parser(args.old_ref)
    t_old, (old_values, old_valid) = best_of(lambda: old(texts, "hash"), args.repeat)
    t_new, (new_values, new_valid) = best_of(
        lambda: hash_values_from_frame(frame, "hash"), args.repeat
    )
    assert np.array_equal(old_values, new_values) and np.array_equal(old_valid, new_valid)
    t_group, grouped = best_of(lambda: find_duplicate_groups(frame, args.threshold), 1)
    print(
        f"{args.kind} {args.n:,} hex hashes ({args.missing:.0%} missing), t={args.threshold}:\n"
        f"  parse  old {t_old:.3f} s  new {t_new:.3f} s  ({t_old / t_new:.1f}x), same values\n"
        f"  find_duplicate_groups end to end {t_group:.2f} s "
        f"(parse {100 * t_new / t_group:.0f}% of it; {grouped['group_id'].nunique():,} groups)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
