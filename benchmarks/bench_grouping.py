"""Benchmark the exact near-pair search and grouping against faiss and a pure-Python BK-tree.

Every method runs in its own subprocess (so each peak-memory figure is its own), on the same cached
hash set, side by side in one run; the table prints measured times, and times extrapolated from a
query sample are marked ``~``. Every method's pairs are checked against ours on a sample of query
hashes (all of them when the method ran in full): the ``exact`` column says whether they agreed,
and whether every brute-force pair touching a sampled hash lies inside one of our groups.

Methods (all exact):

- ``ours``: :func:`leakaudit.grouping.group_labels_within` end to end on all rows ("group"), and
  the pair search alone over the distinct values ("search"), with its peak RSS.
- ``faiss-flat``: ``faiss.IndexBinaryFlat`` range search (brute force in C++, all threads).
- ``faiss-mih``: ``faiss.IndexBinaryMultiHash(64, 3, 21)`` with ``nflip = t // 3``, which makes it
  exact (a pair within ``t`` has a band within ``t // 3``); its range search is strict, so it is
  given ``t + 1``.
- ``bktree``: the pure-Python BK-tree that imagededup and similar tools use (built on all distinct
  hashes, queried on a sample, then extrapolated); only at sizes up to ``--bktree-max``.

Faiss and the BK-tree search the distinct values, as ours does, so they are not charged for
duplicates. Run, e.g.::

    .venv/bin/python benchmarks/bench_grouping.py --sizes 100000 1000000 --thresholds 5 10
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic_hashes import DATA_DIR, band_collision_ratio, cached

METHODS = ["ours", "faiss-flat", "faiss-mih", "bktree"]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def query_sample(unique_count: int, size: int, seed: int) -> NDArray[np.int64]:
    rng = np.random.default_rng(seed + 12345)
    return np.sort(rng.choice(unique_count, size=min(size, unique_count), replace=False))


def pair_keys(a: NDArray[np.int64], b: NDArray[np.int64], n: int) -> NDArray[np.int64]:
    low, high = np.minimum(a, b), np.maximum(a, b)
    keys: NDArray[np.int64] = np.unique(low * n + high)
    return keys


def touching(
    a: NDArray[np.int64], b: NDArray[np.int64], queries: NDArray[np.int64], n: int
) -> NDArray[np.int64]:
    """Pair keys of the pairs with at least one end among ``queries``."""
    chosen = np.zeros(n, dtype=np.bool_)
    chosen[queries] = True
    keep = chosen[a] | chosen[b]
    return pair_keys(a[keep], b[keep], n)


# --------------------------------------------------------------------------------------------------
# Workers (one method, one configuration, one process)


def reference_sample(
    unique: NDArray[np.uint64], t: int, queries: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Brute-force pairs touching the sampled queries: the ground truth every method must match."""
    firsts, seconds = [], []
    step = max(1, (1 << 24) // unique.size)
    for start in range(0, queries.size, step):
        chunk = queries[start : start + step]
        rows, columns = np.nonzero(np.bitwise_count(unique[chunk, None] ^ unique[None, :]) <= t)
        firsts.append(chunk[rows])
        seconds.append(columns.astype(np.int64))
    a, b = np.concatenate(firsts), np.concatenate(seconds)
    keep = a != b
    return pair_keys(a[keep], b[keep], unique.size)


def run_ours(
    hashes: NDArray[np.uint64], t: int, queries: NDArray[np.int64], budget: float
) -> dict[str, Any]:
    from leakaudit.grouping import group_labels_within
    from leakaudit.search import choose_plan, iter_unique_pairs

    start = time.perf_counter()
    labels = group_labels_within(hashes, t)
    group_seconds = time.perf_counter() - start
    group_rss = peak_rss_mb()

    unique, first_row = np.unique(hashes, return_index=True)
    reference = reference_sample(unique, t, queries)
    # Grouping is exact on the sample when every brute-force pair touching a sampled value lies
    # inside one group (groups never over-merge: every link is a verified pair).
    unique_labels = labels[first_row]
    group_exact = bool(
        np.array_equal(
            unique_labels[reference // unique.size], unique_labels[reference % unique.size]
        )
    )
    # The pair search alone (what faiss does); on clumpy data at large t it enumerates billions
    # of pairs, so it gives up after the budget.
    start = time.perf_counter()
    plan = choose_plan(unique, t)
    found = 0
    sampled: list[NDArray[np.int64]] = []
    complete = True
    for a, b in iter_unique_pairs(unique, t, plan=plan):
        found += a.size
        sampled.append(touching(a, b, queries, unique.size))
        if time.perf_counter() - start > budget:
            complete = False
            break
    search_seconds = time.perf_counter() - start
    mine = np.unique(np.concatenate(sampled)) if sampled else np.zeros(0, np.int64)
    return {
        "seconds": search_seconds,
        "search_complete": complete,
        "search_exact": bool(np.array_equal(mine, reference)) if complete else None,
        "group_exact": group_exact,
        "group_seconds": group_seconds,
        "rss_mb": group_rss,
        "groups": int(labels.max()) + 1 if labels.size else 0,
        "pairs": found if complete else f">{found}",
        "plan": plan.describe(),
        "sample": reference,
        "full": True,
    }


def _timed_queries(
    search: Any, unique: NDArray[np.uint64], queries: NDArray[np.int64], budget: float
) -> tuple[float, bool, NDArray[np.int64]]:
    """Time ``search(rows) -> (a, b)`` on the sample; run all rows too if that fits the budget."""
    start = time.perf_counter()
    a, b = search(queries)
    per_query = (time.perf_counter() - start) / max(queries.size, 1)
    sample = touching(a, b, queries, unique.size)
    if per_query * unique.size <= budget:
        start = time.perf_counter()
        search(np.arange(unique.size))
        return time.perf_counter() - start, True, sample
    return per_query * unique.size, False, sample


def run_faiss(
    hashes: NDArray[np.uint64], t: int, queries: NDArray[np.int64], kind: str, budget: float
) -> dict[str, Any]:
    import faiss

    unique = np.unique(hashes)
    codes = unique.astype("<u8").view(np.uint8).reshape(-1, 8)
    start = time.perf_counter()
    index: Any
    if kind == "faiss-flat":
        index = faiss.IndexBinaryFlat(64)
    else:
        index = faiss.IndexBinaryMultiHash(64, 3, 21)
        index.nflip = t // 3
    index.add(codes)
    build = time.perf_counter() - start

    def search(rows: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        firsts, seconds = [], []
        for chunk in np.array_split(rows, max(1, rows.size // 20_000)):
            limits, _, found = index.range_search(codes[chunk], t + 1)
            owner = np.repeat(chunk, np.diff(limits).astype(np.int64))
            other = found.astype(np.int64)
            keep = owner != other
            firsts.append(owner[keep])
            seconds.append(other[keep])
        return np.concatenate(firsts), np.concatenate(seconds)

    seconds, full, sample = _timed_queries(search, unique, queries, budget)
    return {"seconds": build + seconds, "full": full, "sample": sample, "rss_mb": peak_rss_mb()}


def run_bktree(
    hashes: NDArray[np.uint64], t: int, queries: NDArray[np.int64], budget: float
) -> dict[str, Any]:
    unique = np.unique(hashes)
    values = unique.tolist()
    start = time.perf_counter()
    # node = [value, index, {distance: child}]
    root: list[Any] = [values[0], 0, {}]
    for position, value in enumerate(values[1:], start=1):
        node = root
        while True:
            distance = (value ^ node[0]).bit_count()
            child = node[2].get(distance)
            if child is None:
                node[2][distance] = [value, position, {}]
                break
            node = child
    build = time.perf_counter() - start

    def search(rows: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        firsts: list[int] = []
        seconds: list[int] = []
        for row in rows.tolist():
            value = values[row]
            stack = [root]
            while stack:
                node = stack.pop()
                distance = (value ^ node[0]).bit_count()
                if distance <= t and node[1] != row:
                    firsts.append(row)
                    seconds.append(node[1])
                for edge, child in node[2].items():
                    if distance - t <= edge <= distance + t:
                        stack.append(child)
        return np.array(firsts, dtype=np.int64), np.array(seconds, dtype=np.int64)

    seconds, full, sample = _timed_queries(search, unique, queries, budget)
    return {"seconds": build + seconds, "full": full, "sample": sample, "rss_mb": peak_rss_mb()}


def worker(args: argparse.Namespace) -> None:
    hashes = cached(args.kind, args.size, seed=args.seed)
    unique_count = np.unique(hashes).size
    queries = query_sample(unique_count, args.queries, args.seed)
    if args.method == "ours":
        result = run_ours(hashes, args.threshold, queries, args.budget)
    elif args.method == "bktree":
        result = run_bktree(hashes, args.threshold, queries, args.budget)
    else:
        result = run_faiss(hashes, args.threshold, queries, args.method, args.budget)
    np.save(args.out, result.pop("sample"))
    print(json.dumps(result))


# --------------------------------------------------------------------------------------------------
# The driver


def launch(args: argparse.Namespace, method: str, kind: str, size: int, t: int) -> dict[str, Any]:
    out = DATA_DIR / f"sample_{method}_{kind}_{size}_{t}.npy"
    command = [
        sys.executable,
        __file__,
        "--worker",
        method,
        "--kind",
        kind,
        "--size",
        str(size),
        "--threshold",
        str(t),
        "--queries",
        str(args.queries),
        "--budget",
        str(args.budget),
        "--seed",
        str(args.seed),
        "--out",
        str(out),
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=args.timeout, check=True
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {args.timeout}s"}
    except subprocess.CalledProcessError as error:
        return {"error": error.stderr.strip().splitlines()[-1]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["sample_path"] = str(out)
    return result


def seconds_text(result: dict[str, Any], key: str = "seconds") -> str:
    if "error" in result:
        return str(result["error"])
    if key == "seconds" and result.get("search_complete") is False:
        return f">{result[key]:.0f}"
    mark = "" if result.get("full", True) else "~"
    return f"{mark}{result[key]:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--kinds", nargs="+", default=["uniform", "clumpy"])
    parser.add_argument("--thresholds", type=int, nargs="+", default=[5, 10])
    parser.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    parser.add_argument("--queries", type=int, default=1000, help="query sample for the checks")
    parser.add_argument(
        "--budget",
        type=float,
        default=60.0,
        help="run a method in full if its extrapolated time is under this many seconds",
    )
    parser.add_argument("--bktree-max", type=int, default=100_000)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write all results here")
    parser.add_argument("--worker", choices=METHODS, dest="method", help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--threshold", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.method:
        worker(args)
        return 0

    import faiss

    print(
        f"faiss {faiss.__version__}, {faiss.omp_get_max_threads()} threads; numpy "
        f"{np.__version__}; ours on up to 2 threads. '~' = extrapolated from "
        f"{args.queries} sampled queries."
    )
    header = (
        f"{'data':8} {'N':>9} {'t':>2} {'distinct':>9} {'clump':>6} {'pairs':>10} "
        f"{'ours grp':>9} {'ours srch':>9} {'RSS MB':>7} {'flat':>9} {'mih':>9} {'bktree':>10} "
        f"{'best faiss/ours':>15} {'exact':>6}  plan"
    )
    print(header)
    records = []
    for size in args.sizes:
        for kind in args.kinds:
            hashes = cached(kind, size, seed=args.seed)
            distinct = np.unique(hashes).size
            clump = band_collision_ratio(hashes)
            del hashes
            for t in args.thresholds:
                results = {}
                for method in args.methods:
                    if method == "bktree" and size > args.bktree_max:
                        continue
                    results[method] = launch(args, method, kind, size, t)
                ours = results.get("ours", {})
                exact = "-"
                if "sample_path" in ours:
                    reference = np.load(ours["sample_path"])
                    checks = [
                        np.array_equal(np.load(r["sample_path"]), reference)
                        for m, r in results.items()
                        if m != "ours" and "sample_path" in r
                    ]
                    for key in ("search_exact", "group_exact"):
                        if ours.get(key) is not None:
                            checks.append(ours[key])
                    exact = ("yes" if all(checks) else "NO") if checks else "-"
                faiss_times = [
                    results[m]["seconds"]
                    for m in ("faiss-flat", "faiss-mih")
                    if m in results and "seconds" in results[m]
                ]
                ratio = (
                    f"{min(faiss_times) / ours['seconds']:.1f}x"
                    if faiss_times and ours.get("search_complete")
                    else "-"
                )
                none: dict[str, Any] = {"error": "-"}
                print(
                    f"{kind:8} {size:>9} {t:>2} {distinct:>9} {clump:>6.0f} "
                    f"{ours.get('pairs', '-'):>10} "
                    f"{seconds_text(ours, 'group_seconds') if ours else '-':>9} "
                    f"{seconds_text(ours) if ours else '-':>9} "
                    f"{ours.get('rss_mb', 0):>7.0f} "
                    f"{seconds_text(results.get('faiss-flat', none)):>9} "
                    f"{seconds_text(results.get('faiss-mih', none)):>9} "
                    f"{seconds_text(results.get('bktree', none)):>10} "
                    f"{ratio:>15} {exact:>6}  {ours.get('plan', '')}",
                    flush=True,
                )
                records.append(
                    {
                        "kind": kind,
                        "size": size,
                        "threshold": t,
                        "distinct": distinct,
                        "clump": clump,
                        "results": results,
                    }
                )
    if args.json:
        args.json.write_text(json.dumps(records, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
