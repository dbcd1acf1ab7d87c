"""Benchmark the CSV, JSON and HTML outputs against the implementation before issue #11.

A seeded 100k-image report is built from synthetic hashes (no image is decoded) with the group
structure of a real dataset: ~16% of the images are copies, in groups of 2-12 near-duplicates (up
to 4 bits from their original in both pHash and dHash), two placeholder images copied hundreds of
times (groups over 200 members), chains that link only transitively, blank images linked by their
bytes, unreadable rows; splits 80/10/10 at random, so about 40% of the groups leak. The dHash of
the originals is :func:`synthetic_hashes.clumpy_hashes`' (real dHashes are clumpy), the pHash
uniform.

Every step runs in its own subprocess, so each peak-memory figure is its own: the audit (grouping
and the report, what ``audit_hash_table`` does after hashing), then each output written by the old
code and by the new, side by side. "peak MB" is the growth of the process's peak RSS
(``ru_maxrss``) over what it held after loading the report. The old code is the project's own at
``--old-ref`` (default ``dc2635b``, the commit before issue #11), read with ``git show`` and loaded
as a module; the outputs of both are compared byte for byte (the HTML without its "generated"
time), and the ``same`` column says whether they agree. Run, e.g.::

    .venv/bin/python benchmarks/bench_outputs.py --size 100000
"""

from __future__ import annotations

import argparse
import json
import pickle
import re
import resource
import subprocess
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic_hashes import _exact_flips, _random_flips, clumpy_hashes

from leakaudit import LeakageReport, audit_hash_table
from leakaudit.hashing import HashTable

REPO = Path(__file__).resolve().parent.parent
OUTPUTS = ["csv", "json", "html"]
SPLITS = ["train", "val", "test"]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic_table(n: int, *, seed: int = 0) -> tuple[HashTable, list[str]]:
    """The hashes of ``n`` images with planted duplicate groups, and each image's split."""
    rng = np.random.default_rng(seed)
    dhash = clumpy_hashes(
        n,
        seed=seed,
        duplicate_fraction=0,
        copy_fraction=0,
        blank_fraction=0,
        chain_fraction=0,
    )
    phash = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    order = rng.permutation(n)
    sizes = rng.choice(
        [2, 3, 4, 5, 6, 8, 12], size=n * 16 // 100, p=[0.70, 0.16, 0.07, 0.03, 0.02, 0.015, 0.005]
    )
    start = 0
    for size in [*sizes.tolist(), 300, 450]:  # the last two: placeholders copied many times
        members = order[start : start + size]
        start += size
        most = 6 if size > 200 else 4
        phash[members[1:]] = phash[members[0]] ^ _random_flips(rng, size - 1, most)
        dhash[members[1:]] = dhash[members[0]] ^ _random_flips(rng, size - 1, most)
    for _ in range(n // 1000):  # chains of 10 links, 3 bits apart each
        members = order[start : start + 10]
        start += 10
        for column in (phash, dhash):
            steps = _exact_flips(rng, 10, 3)
            steps[0] = column[members[0]]
            column[members] = np.bitwise_xor.accumulate(steps)
    blanks = order[start : start + n // 50]
    low = np.zeros(n, dtype=bool)
    low[blanks] = True
    phash[blanks] = 0
    dhash[blanks] = _random_flips(rng, len(blanks), 2)
    digest = np.zeros(n, dtype=np.uint64)
    digest[blanks] = rng.integers(1, max(2, len(blanks) // 3), len(blanks)).astype(np.uint64)
    valid = rng.random(n) > 0.005
    for column in (phash, dhash, digest):
        column[~valid] = 0
    low &= valid
    split = rng.choice(SPLITS, size=n, p=[0.8, 0.1, 0.1]).tolist()
    table = HashTable(
        sources=[f"/data/{s}/class_{i % 100:03d}/img_{i:07d}.jpg" for i, s in enumerate(split)],
        phash=phash,
        dhash=dhash,
        digest=digest,
        low_information=low,
        valid=valid,
        errors={int(i): "cannot identify image file" for i in np.flatnonzero(~valid)},
    )
    return table, split


# --------------------------------------------------------------------------------------------------
# Workers (one step, one process)


def old_modules(ref: str) -> tuple[types.ModuleType, types.ModuleType]:
    """``leakaudit.export`` and ``leakaudit.htmlreport`` as they were at ``ref``."""

    def load(name: str, path: str, replace: dict[str, str]) -> types.ModuleType:
        source = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{ref}:{path}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for old, new in replace.items():
            source = source.replace(old, new)
        module = types.ModuleType(name)
        module.__file__ = f"{ref}:{path}"
        sys.modules[name] = module  # dataclasses look their module up
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        return module

    export = load("_old_export", "leakaudit/export.py", {})
    # The old page renderer, on the old tables; DEFAULT_THRESHOLDS has moved since.
    replace = {"from leakaudit.export import": "from _old_export import"}
    try:
        from leakaudit.policy import DEFAULT_THRESHOLDS  # noqa: F401

        replace["from leakaudit.audit import DEFAULT_THRESHOLDS"] = (
            "from leakaudit.policy import DEFAULT_THRESHOLDS"
        )
    except ImportError:
        pass
    html = load("_old_htmlreport", "leakaudit/htmlreport.py", replace)
    return export, html


def audit_worker(args: argparse.Namespace) -> dict[str, Any]:
    table, split = synthetic_table(args.size, seed=args.seed)
    before = peak_rss_mb()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the placeholder groups warn of chaining
        report = audit_hash_table(table, split)
    seconds = time.perf_counter() - start
    peak = peak_rss_mb() - before
    with open(args.report, "wb") as handle:
        pickle.dump(report, handle)
    assert report.table is not None
    sizes = report.table.groupby("group_id").size()
    return {
        "seconds": seconds,
        "peak_mb": peak,
        "groups": int((sizes > 1).sum()),
        "leaked_groups": report.n_leaked_groups,
        "within_groups": report.n_within_split_groups,
        "largest": int(sizes.max()),
        "leaked_images": report.n_leaked_images,
    }


def output_worker(args: argparse.Namespace) -> dict[str, Any]:
    with open(args.report, "rb") as handle:
        report: LeakageReport = pickle.load(handle)
    if args.impl == "old":
        export, html = old_modules(args.old_ref)
    else:
        from leakaudit import export
        from leakaudit import htmlreport as html
    writers = {
        "csv": export.write_csv_tables,
        "json": export.write_json,
        "html": lambda report, path: html.write_html(report, path, progress=False),
    }
    before = peak_rss_mb()
    start = time.perf_counter()
    writers[args.output](report, args.out)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_mb": peak_rss_mb() - before, "base_mb": before}


def run_worker(args: argparse.Namespace, *extra: str) -> dict[str, Any]:
    command = [sys.executable, __file__, *extra, "--size", str(args.size), "--seed", str(args.seed)]
    command += ["--old-ref", args.old_ref]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=args.timeout, check=True
        )
    except subprocess.CalledProcessError as error:
        return {"error": (error.stderr.strip().splitlines() or ["failed"])[-1]}
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {args.timeout}s"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --------------------------------------------------------------------------------------------------
# The driver


def output_files(output: str, path: Path) -> list[Path]:
    if output != "csv":
        return [path]
    stem = path.name[: -len(path.suffix)]
    return [path, *(path.with_name(f"{stem}.{t}.csv") for t in ("pairs", "groups", "splits"))]


def same_outputs(output: str, old: Path, new: Path) -> bool:
    for a, b in zip(output_files(output, old), output_files(output, new), strict=True):
        left, right = a.read_bytes(), b.read_bytes()
        if output == "html":  # the page says when it was made
            stamp = rb"<tr><th>generated</th><td>[^<]*</td></tr>"
            left, right = re.sub(stamp, b"", left), re.sub(stamp, b"", right)
        if left != right:
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--outputs", nargs="+", default=OUTPUTS, choices=OUTPUTS)
    parser.add_argument("--old-ref", default="dc2635b", help="git revision of the old code")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--worker", choices=["audit", "output"], help=argparse.SUPPRESS)
    parser.add_argument("--impl", choices=["old", "new"], help=argparse.SUPPRESS)
    parser.add_argument("--output", choices=OUTPUTS, help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker == "audit":
        print(json.dumps(audit_worker(args)))
        return 0
    if args.worker == "output":
        print(json.dumps(output_worker(args)))
        return 0

    with tempfile.TemporaryDirectory(prefix="bench-outputs-") as folder:
        work = Path(folder)
        report = work / "report.pickle"
        audit = run_worker(args, "--worker", "audit", "--report", str(report))
        if "error" in audit:
            print(f"audit failed: {audit['error']}")
            return 1
        print(
            f"{args.size:,} images: {audit['groups']:,} duplicate groups "
            f"({audit['leaked_groups']:,} leaked, {audit['within_groups']:,} within one split, "
            f"largest {audit['largest']}), "
            f"{audit['leaked_images']:,} leaked images. Old code: {args.old_ref}."
        )
        print(
            f"audit (grouping + report, from hashes): {audit['seconds']:.2f} s, "
            f"peak +{audit['peak_mb']:.0f} MB"
        )
        print(
            f"{'output':6} {'old s':>8} {'new s':>8} {'old/new':>8} "
            f"{'old peak MB':>12} {'new peak MB':>12} {'size MB':>8} {'same':>5}"
        )
        total = {"old": 0.0, "new": 0.0}
        for output in args.outputs:
            results = {}
            for impl in ("old", "new"):
                out = work / impl / f"report.{output}"
                out.parent.mkdir(exist_ok=True)
                extra = ["--worker", "output", "--impl", impl, "--output", output]
                results[impl] = run_worker(args, *extra, "--report", str(report), "--out", str(out))
            old, new = results["old"], results["new"]
            if "error" in old or "error" in new:
                print(f"{output:6} failed: {old.get('error', '')} {new.get('error', '')}")
                continue
            total["old"] += old["seconds"]
            total["new"] += new["seconds"]
            size = sum(p.stat().st_size for p in output_files(output, work / "new" / out.name))
            same = same_outputs(output, work / "old" / out.name, work / "new" / out.name)
            print(
                f"{output:6} {old['seconds']:8.2f} {new['seconds']:8.2f} "
                f"{old['seconds'] / new['seconds']:8.1f} {old['peak_mb']:12.0f} "
                f"{new['peak_mb']:12.0f} {size / 1e6:8.1f} {'yes' if same else 'NO':>5}"
            )
        print(
            f"all     {total['old']:8.2f} {total['new']:8.2f} "
            f"{total['old'] / max(total['new'], 1e-9):8.1f}   "
            f"(audit {audit['seconds']:.2f} s: outputs/audit old "
            f"{total['old'] / audit['seconds']:.1f}x, new {total['new'] / audit['seconds']:.1f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
