"""Project the default method's cost (pHash and dHash both within 8) to 100M and 1B rows.

The exact banded search costs, per band, a part linear in the rows (band keys, sorting, the
lookup table, and ``flips`` probes per row) and a part linear in the *candidates* (pairs of rows
in buckets whose band keys differ by at most the radius), which are compared on both hashes.
On photo-like hashes the candidates are a fixed share of all pairs (measured here: 1.51e-3 of
all pairs at 1M, 3M and 10M rows), so they grow with the square of the rows and dominate
from a few million rows on.

This script measures, on :func:`synthetic_hashes.clumpy_hash_pairs` data:

1. the exact candidate count of the plan the cost model picks, band by band, at each size
   (from the bucket sizes: no pair is compared), and, from a sample of random pairs, the
   candidate share of other layouts (two 32-bit bands, for larger inputs);
2. nothing else: the time per candidate and per row come from ``bench_default_method.py`` runs
   at two sizes (``--seconds SIZE=SECONDS ...``), solved for ``seconds = a * rows + b *
   candidates``, and then projected: on this machine, and on ``--cores`` cores at
   ``--efficiency`` of linear scaling from the ``--measured-cores`` the runs had (the compiled
   kernels run without the GIL on ``LEAKAUDIT_THREADS`` threads; on a shared machine the
   effective cores are fewer than the threads).

The same fit applies to both search engines (numpy and the compiled kernels): they search the
same plan, so the same candidates; only ``a`` and ``b`` differ.

Run, e.g.::

    .venv/bin/python benchmarks/project_default_method.py --sizes 1000000 3000000 10000000 \\
        --seconds 1000000=9.6 3000000=71.0
    .venv/bin/python benchmarks/project_default_method.py --sizes 1000000 10000000 \\
        --seconds 1000000=4.9 10000000=60 --measured-cores 1.2 --cores 64
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic_hashes import cached_pairs

from leakaudit.grouping import distinct_hash_pairs
from leakaudit.search import _flip_masks_by_top_bit, band_keys, choose_plan

THRESHOLD = 8


def exact_candidates(unique: NDArray[np.uint64]) -> tuple[str, list[float], int]:
    """The chosen plan, its candidates per band (bucket pairs x members), and its flip masks."""
    plan = choose_plan(unique, THRESHOLD)
    per_band: list[float] = []
    flips_total = 0
    for mask, radius in zip(plan.band_masks, plan.radii, strict=True):
        width = bin(mask).count("1")
        keys, counts = np.unique(band_keys(unique, mask), return_counts=True)
        table = np.zeros(1 << width, dtype=np.int64)
        table[keys] = counts
        candidates = float((counts * (counts - 1) // 2).sum())
        flips = np.concatenate(_flip_masks_by_top_bit(width, radius))
        flips_total += flips.size
        for flip in flips.tolist():  # each flip mask pairs a bucket with one other bucket
            candidates += float((counts * table[keys ^ np.uint64(flip)]).sum()) / 2
        per_band.append(candidates)
    return plan.describe(), per_band, flips_total


def sampled_share(
    unique: NDArray[np.uint64], masks: list[int], radii: list[int], pairs: int, seed: int = 0
) -> float:
    """Share of random pairs of distinct values that some band makes a candidate."""
    rng = np.random.default_rng(seed)
    hit = 0
    for _ in range(max(1, pairs // 10_000_000)):
        a = rng.integers(0, unique.size, 10_000_000)
        b = rng.integers(0, unique.size, 10_000_000)
        difference = unique[a] ^ unique[b]
        candidate = np.zeros(a.size, dtype=bool)
        for mask, radius in zip(masks, radii, strict=True):
            candidate |= np.bitwise_count(difference & np.uint64(mask)) <= radius
        hit += int(np.count_nonzero(candidate & (a != b)))
    return hit / (max(1, pairs // 10_000_000) * 10_000_000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 3_000_000])
    parser.add_argument(
        "--seconds", nargs="*", default=[], help="measured SIZE=SECONDS of ours-link, two or more"
    )
    parser.add_argument("--sample-pairs", type=int, default=50_000_000)
    parser.add_argument(
        "--measured-cores", type=float, default=1.5, help="effective cores of the measured runs"
    )
    parser.add_argument("--cores", type=int, default=64, help="cores of the projected machine")
    parser.add_argument(
        "--efficiency", type=float, default=0.5, help="share of linear scaling on --cores"
    )
    args = parser.parse_args(argv)

    candidates_at: dict[int, float] = {}
    flips = 0
    distinct_share = 1.0
    share = 0.0
    for size in args.sizes:
        phash, dhash = cached_pairs(size)
        unique, _, _ = distinct_hash_pairs(phash, dhash)
        del phash, dhash
        plan, per_band, flips = exact_candidates(unique)
        total = sum(per_band)
        candidates_at[size] = total
        distinct_share = unique.size / size
        share = total / (unique.size * (unique.size - 1) / 2)
        bands = ", ".join(f"{c:.3g}" for c in per_band)
        print(
            f"{size:>11,} rows, {unique.size:,} distinct: {plan}; candidates {total:.3g} "
            f"({bands}), {share:.3g} of all pairs; {flips} flip masks per row"
        )
    two_bands = [int("5" * 16, 16), int("A" * 16, 16)]  # 32 even, 32 odd bits
    print(
        f"two 32-bit bands at radii 4 and 3 (sampled, largest size): "
        f"{sampled_share(unique, two_bands, [4, 3], args.sample_pairs):.3g} of all pairs, "
        f"{sum(math.comb(32, k) for k in range(1, 5)) + sum(math.comb(32, k) for k in range(1, 4))}"
        " flip masks per row"
    )
    measured = {}
    for item in args.seconds:
        size_text, seconds_text = item.split("=")
        measured[int(size_text)] = float(seconds_text)
    if len(measured) < 2:
        return 0
    sizes = sorted(measured)
    rows = np.array(
        [[s, candidates_at.get(s, share * (s * distinct_share) ** 2 / 2)] for s in sizes]
    )
    per_row, per_candidate = np.linalg.lstsq(
        rows, np.array([measured[s] for s in sizes]), rcond=None
    )[0]
    print(
        f"fit: {per_row * 1e6:.2f} us per row + {per_candidate * 1e9:.2f} ns per candidate "
        "(wall seconds on this machine)"
    )
    speedup = args.cores * args.efficiency / args.measured_cores
    for size in (10_000_000, 100_000_000, 1_000_000_000):
        candidates = share * (size * distinct_share) ** 2 / 2
        seconds = per_row * size + per_candidate * candidates
        print(
            f"{size:>13,} rows: {candidates:.3g} candidates, {seconds:,.0f} s "
            f"({seconds / 3600:.1f} h) on this machine, {seconds / speedup:,.0f} s "
            f"({seconds / speedup / 3600:.1f} h) on {args.cores} cores at "
            f"{args.efficiency:.0%} efficiency"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
