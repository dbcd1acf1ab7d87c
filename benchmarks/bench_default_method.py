"""Benchmark the default method (pHash and dHash both within 8) at scale against faiss.

Every method runs in its own subprocess, side by side in one run, on the same cached hashes
(:func:`synthetic_hashes.clumpy_hash_pairs`: photo-like pHash+dHash pairs, near-duplicates near
in both, tuned to the false-pair rates measured on real photos); each reports its wall time and
the peak RSS of its whole process (imports and input arrays included), and writes its labels,
which must be identical to every other method's (compact, in order of first appearance).

Methods:

- ``ours-link``: :func:`leakaudit.grouping.link_labels` with ``second=`` (the engine that
  :func:`leakaudit.audit_hash_table` calls for precomputed hashes), as installed: with numba,
  the compiled kernels (their cached code loaded at the first call, included in the time);
- ``ours-link-numpy``: the same with numba hidden from the worker (``sys.modules["numba"] =
  None``), i.e. the numpy path a core install runs;
- ``ours-link-cold``: ``ours-link`` with an empty numba cache (a fresh ``NUMBA_CACHE_DIR``, the
  only cache location allowed): its time minus ``ours-link``'s is the first-ever compile;
- ``ours-stream``: the previous default-method path, kept as :func:`leakaudit.grouping.fuzzy_edges`
  (every pHash pair within 8 streamed from :func:`leakaudit.search.iter_pairs_within`, filtered by
  dHash, then union-find), for before/after figures;
- ``ours-audit``: :func:`leakaudit.audit_hash_table` end to end (``verify=False``: the images are
  not there), the public precomputed-hash path, report included;
- ``ours-frame``: a DataFrame with ``phash`` and ``dhash`` hex columns: both parsed by
  :func:`leakaudit.frames.hash_values_from_frame`, then ``link_labels`` (parse time reported);
- ``ours-spilled``: :func:`leakaudit.outofcore.spilled_group_labels` from memory-mapped ``.npy``
  files with ``--budget-mb`` of memory for the shards;
- ``faiss``: ``faiss.IndexBinaryMultiHash(64, 3, 21)`` with ``nflip = 8 // 3`` (exact) range
  search on pHash, the pairs filtered by dHash, then our union-find (faiss has none);
- for the single-hash DataFrame API: ``ours-fdg`` (:func:`leakaudit.find_duplicate_groups` on a
  ``hash`` hex column, uniform hashes, ``t = 5``) against ``faiss-single`` (MultiHash, nflip 1).

Each row also gives the machine's 1-minute load average when the worker started and ended
(the machine may be shared). ``--threads N`` sets ``LEAKAUDIT_THREADS`` in the workers.

Run, e.g.::

    .venv/bin/python benchmarks/bench_default_method.py            # 1M, all methods
    .venv/bin/python benchmarks/bench_default_method.py --methods ours-link ours-link-numpy \
        ours-link-cold faiss                                       # kernels vs numpy vs faiss
    .venv/bin/python benchmarks/bench_default_method.py --quick    # 100k, under a minute
    .venv/bin/python benchmarks/bench_default_method.py --sizes 10000000 --methods ours-link \\
        ours-spilled --timeout 1800
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic_hashes import DATA_DIR, cached, cached_pair_paths

THRESHOLD = 8
SINGLE_THRESHOLD = 5
DEFAULT_METHODS = [
    "ours-link",
    "ours-link-numpy",
    "ours-link-cold",
    "ours-stream",
    "ours-audit",
    "ours-frame",
    "ours-spilled",
    "faiss",
]
SINGLE_METHODS = ["ours-fdg", "faiss-single"]
ALL_METHODS = DEFAULT_METHODS + SINGLE_METHODS


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_pairs(size: int, *, mapped: bool = False) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    phash_path, dhash_path = cached_pair_paths(size)
    mode = "r" if mapped else None
    phash: NDArray[np.uint64] = np.load(phash_path, mmap_mode=mode)
    dhash: NDArray[np.uint64] = np.load(dhash_path, mmap_mode=mode)
    return phash, dhash


def faiss_labels(
    first: NDArray[np.uint64], second: NDArray[np.uint64] | None, t: int, t2: int
) -> NDArray[np.int64]:
    """faiss MultiHash range search on ``first`` (exact nflip), ``second`` filter, union-find."""
    import faiss

    from leakaudit.grouping import connected_component_labels

    codes = first.astype("<u8").view(np.uint8).reshape(-1, 8)
    index = faiss.IndexBinaryMultiHash(64, 3, 21)
    index.nflip = t // 3
    index.add(codes)

    def edges() -> Any:
        rows = np.arange(first.size)
        for chunk in np.array_split(rows, max(1, rows.size // 20_000)):
            limits, _, found = index.range_search(codes[chunk], t + 1)  # strict: radius t + 1
            owner = np.repeat(chunk, np.diff(limits).astype(np.int64))
            other = found.astype(np.int64)
            keep = owner < other
            if second is not None:
                keep &= np.bitwise_count(second[owner] ^ second[other]) <= t2
            yield np.stack((owner[keep], other[keep]), axis=1)

    return connected_component_labels(first.size, edges())


def hex_frame(columns: dict[str, NDArray[np.uint64]]) -> Any:
    import pandas as pd

    from leakaudit.hashing import hashes_to_hex

    n = len(next(iter(columns.values())))
    data: dict[str, Any] = {"path": [f"{i}.jpg" for i in range(n)]}
    for name, values in columns.items():
        data[name] = pd.Series(hashes_to_hex(values), dtype=object)
    return pd.DataFrame(data)


def worker(args: argparse.Namespace) -> dict[str, Any]:
    method, size = args.worker, args.size
    result: dict[str, Any] = {"load_start": os.getloadavg()[0]}
    if method == "ours-link-numpy":
        sys.modules["numba"] = None  # type: ignore[assignment]  # as if not installed
    if method in SINGLE_METHODS:
        values = cached("uniform", size)
        if method == "ours-fdg":
            from leakaudit.frames import find_duplicate_groups, hash_values_from_frame

            frame = hex_frame({"hash": values})
            del values
            start = time.perf_counter()
            hash_values_from_frame(frame, "hash")
            result["parse_seconds"] = time.perf_counter() - start
            start = time.perf_counter()
            labels = find_duplicate_groups(frame, SINGLE_THRESHOLD)["group_id"].to_numpy()
        else:
            start = time.perf_counter()
            labels = faiss_labels(values, None, SINGLE_THRESHOLD, 0)
        result["seconds"] = time.perf_counter() - start
    else:
        phash, dhash = load_pairs(size, mapped=method == "ours-spilled")
        if method in ("ours-link", "ours-link-numpy", "ours-link-cold"):
            from leakaudit.grouping import link_labels

            start = time.perf_counter()
            labels = link_labels(
                phash, np.ones(size, dtype=bool), THRESHOLD, second=dhash, second_threshold=8
            )
        elif method == "ours-stream":
            from leakaudit.grouping import connected_component_labels, fuzzy_edges

            start = time.perf_counter()
            linkable = np.ones(size, dtype=bool)
            labels = connected_component_labels(
                size, fuzzy_edges(phash, THRESHOLD, linkable, second=dhash, second_threshold=8)
            )
        elif method == "ours-audit":
            from leakaudit import HashTable, audit_hash_table

            table = HashTable(
                sources=[f"<bytes #{i}>" for i in range(size)],
                phash=phash,
                dhash=dhash,
                digest=np.zeros(size, dtype=np.uint64),
                low_information=np.zeros(size, dtype=bool),
                valid=np.ones(size, dtype=bool),
            )
            split = np.array(["train", "val", "test"], dtype=object)[np.arange(size) % 3]
            start = time.perf_counter()
            report = audit_hash_table(table, list(split), verify=False)
            assert report.table is not None
            labels = report.table["group_id"].to_numpy()
        elif method == "ours-frame":
            from leakaudit.frames import hash_values_from_frame
            from leakaudit.grouping import link_labels

            frame = hex_frame({"phash": phash, "dhash": dhash})
            del phash, dhash
            start = time.perf_counter()
            first, valid = hash_values_from_frame(frame, "phash")
            second, valid_second = hash_values_from_frame(frame, "dhash")
            result["parse_seconds"] = time.perf_counter() - start
            labels = link_labels(
                first, valid & valid_second, THRESHOLD, second=second, second_threshold=8
            )
        elif method == "ours-spilled":
            from leakaudit.outofcore import spilled_group_labels

            start = time.perf_counter()
            labels = spilled_group_labels(
                phash,
                THRESHOLD,
                second=dhash,
                second_threshold=8,
                memory_bytes=args.budget_mb << 20,
            )
        else:
            start = time.perf_counter()
            labels = faiss_labels(np.asarray(phash), np.asarray(dhash), THRESHOLD, 8)
        result["seconds"] = time.perf_counter() - start
    result["rss_mb"] = peak_rss_mb()
    result["load_end"] = os.getloadavg()[0]
    result["engine"] = "numba" if "leakaudit._kernels" in sys.modules else "numpy"
    result["groups"] = int(labels.max()) + 1 if labels.size else 0
    np.save(args.out, np.asarray(labels, dtype=np.int64))
    return result


def launch(args: argparse.Namespace, method: str, size: int) -> dict[str, Any]:
    out = DATA_DIR / f"labels_{method}_{size}.npy"
    command = [
        sys.executable,
        __file__,
        "--worker",
        method,
        "--size",
        str(size),
        "--budget-mb",
        str(args.budget_mb),
        "--out",
        str(out),
    ]
    environment = dict(os.environ)
    if args.threads is not None:
        environment["LEAKAUDIT_THREADS"] = str(args.threads)
    cold_cache = None
    if method == "ours-link-cold":
        cold_cache = tempfile.TemporaryDirectory(prefix="leakaudit-bench-numba-")
        environment["NUMBA_CACHE_DIR"] = cold_cache.name
        environment["NUMBA_CACHE_LOCATOR_CLASSES"] = "UserProvidedCacheLocator"
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=args.timeout,
            check=True,
            env=environment,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {args.timeout:.0f}s"}
    except subprocess.CalledProcessError as error:
        return {"error": (error.stderr.strip().splitlines() or ["failed"])[-1]}
    finally:
        if cold_cache is not None:
            cold_cache.cleanup()
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["labels"] = str(out)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--methods", nargs="+", default=ALL_METHODS, choices=ALL_METHODS)
    parser.add_argument("--budget-mb", type=int, default=256, help="ours-spilled's shard memory")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--threads", type=int, help="LEAKAUDIT_THREADS for the workers")
    parser.add_argument(
        "--expected",
        help="labels to compare with ('same'), a path with {size}, e.g. a previous run's "
        "benchmarks/_data/labels_session6_ours-link_{size}.npy; default: the first method's",
    )
    parser.add_argument("--quick", action="store_true", help="100k rows, under a minute")
    parser.add_argument("--json", type=Path, help="also write all results here")
    parser.add_argument("--worker", choices=ALL_METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    if args.quick:
        args.sizes = [100_000]
        args.budget_mb = min(args.budget_mb, 8)

    import faiss

    from leakaudit._validation import usable_cpu_count

    try:
        import numba

        kernels = f"numba {numba.__version__}"
    except ImportError:
        kernels = "no numba (numpy path only)"
    threads = args.threads or os.environ.get("LEAKAUDIT_THREADS") or usable_cpu_count()
    print(
        f"faiss {faiss.__version__} ({faiss.omp_get_max_threads()} threads), numpy "
        f"{np.__version__}, {kernels}; ours: kernels on {threads} threads, numpy path on "
        f"{args.threads or os.environ.get('LEAKAUDIT_THREADS') or 2}; {os.cpu_count()} CPUs; "
        "RSS = peak of the whole worker process; load = 1-min load average at start -> end."
    )
    records = []
    for size in args.sizes:
        for family, methods, reference_name in (
            ("phash+dhash t=8, photo-like pairs", DEFAULT_METHODS, "faiss"),
            ("single hash t=5, uniform, DataFrame API", SINGLE_METHODS, "faiss-single"),
        ):
            chosen = [m for m in methods if m in args.methods]
            if not chosen:
                continue
            results = {method: launch(args, method, size) for method in chosen}
            labels = {m: np.load(r["labels"]) for m, r in results.items() if "labels" in r}
            first = next(iter(labels.values()), None)
            expected = Path(args.expected.format(size=size)) if args.expected else None
            if expected is not None and expected.exists() and family.startswith("phash"):
                first = np.load(expected)
                print(f"'same': labels identical to {expected}")
            reference = results.get(reference_name, {})
            print(f"\n{size:,} rows, {family}")
            print(
                f"{'method':16} {'engine':>6} {'seconds':>9} {'parse s':>8} {'RSS MB':>8} "
                f"{'B/row':>6} {'groups':>9} {'vs faiss':>9} {'same':>5} {'load':>11}"
            )
            for method, result in results.items():
                if "error" in result:
                    print(f"{method:16} {result['error']}")
                    continue
                ratio = (
                    f"{reference['seconds'] / result['seconds']:.1f}x"
                    if "seconds" in reference and method != reference_name
                    else "-"
                )
                same = (
                    "yes" if first is not None and np.array_equal(labels[method], first) else "NO"
                )
                parse = f"{result['parse_seconds']:.2f}" if "parse_seconds" in result else "-"
                load = f"{result['load_start']:.1f} -> {result['load_end']:.1f}"
                print(
                    f"{method:16} {result['engine']:>6} {result['seconds']:>9.2f} {parse:>8} "
                    f"{result['rss_mb']:>8.0f} {result['rss_mb'] * 2**20 / size:>6.0f} "
                    f"{result['groups']:>9,} {ratio:>9} {same:>5} {load:>11}",
                    flush=True,
                )
            records.append({"size": size, "family": family, "results": results})
    if args.json:
        args.json.write_text(json.dumps(records, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
