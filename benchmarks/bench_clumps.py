"""Benchmark auditing clumps of near-identical images (issue 35, point 6).

One photo saved N times, each copy with its own +-6 noise and a JPEG quality drawn from
85..94, so no two copies have the same hash entries and every pair of them is a
candidate. The photo is a real one from scikit-image's data when it is installed, else
matplotlib's sample data, else a generated natural-looking image (1/f colour noise);
``--tiny`` copies are resized to 32 x 32 px (they go through the tiny-photo net too).
ROOT holds the copies over ``train`` and ``test`` (3:1); ``leakaudit scan ROOT --no-cache
--quiet --json`` runs as a subprocess with the defaults, and the table gives its wall
time, the child's peak RSS (``ru_maxrss``), the candidate pairs verified and the groups.

``--baseline REV`` runs the same scan with the code of git revision REV (checked out
with ``git worktree`` into a temporary folder, on this checkout's venv via PYTHONPATH)
for the sizes up to ``--baseline-max``, for the ratio. Run, e.g.::

    .venv/bin/python benchmarks/bench_clumps.py --sizes 1000 3000 10000 --tiny-sizes 10000 \
        --baseline main --baseline-max 1000
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

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parent.parent


def base_photo() -> tuple[str, Image.Image]:
    """The photo the copies are made of, and where it came from."""
    try:
        import skimage.data

        return "scikit-image chelsea", Image.fromarray(skimage.data.chelsea()).convert("RGB")
    except ImportError:
        pass
    try:
        from matplotlib import cbook

        with cbook.get_sample_data("grace_hopper.jpg") as handle, Image.open(handle) as image:
            return "matplotlib grace_hopper", image.convert("RGB").resize((320, 240))
    except (ImportError, OSError):
        pass
    return "generated 1/f colour noise", natural_image()


def natural_image(width: int = 320, height: int = 240, seed: int = 35) -> Image.Image:
    """A natural-looking image: 1/f^1.6 noise in three correlated colour channels."""
    rng = np.random.default_rng(seed)
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.fftfreq(width)[None, :]
    frequency = np.sqrt(fx**2 + fy**2)
    frequency[0, 0] = 1.0
    channels = []
    for _ in range(3):
        spectrum = rng.normal(size=(height, width)) + 1j * rng.normal(size=(height, width))
        plane = np.real(np.fft.ifft2(spectrum / frequency**1.6))
        channels.append((plane - plane.mean()) / plane.std())
    mix = np.array([[0.6, 0.3, 0.1], [0.3, 0.6, 0.1], [0.2, 0.3, 0.5]])
    pixels = 128 + 45 * np.tensordot(np.stack(channels, -1), mix, axes=([2], [1]))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def build_root(root: Path, n: int, *, tiny: bool, seed: int = 1) -> None:
    """``n`` noisy JPEG copies of the base photo over train/test (3:1)."""
    _, photo = base_photo()
    if tiny:
        photo = photo.resize((32, 32), Image.Resampling.LANCZOS)
    base = np.asarray(photo).astype(np.int16)
    rng = np.random.default_rng(seed)
    for split in ("train", "test"):
        (root / split / "x").mkdir(parents=True)
    for i in range(n):
        noisy = np.clip(base + rng.integers(-6, 7, size=base.shape), 0, 255).astype(np.uint8)
        split = "test" if i % 4 == 3 else "train"
        Image.fromarray(noisy).save(
            root / split / "x" / f"c{i:06d}.jpg", quality=int(rng.integers(85, 95))
        )


def run_scan(root: Path, out: Path, *, code: Path | None, timeout: float) -> dict[str, float]:
    """Scan ``root`` (with the code at ``code``, default this checkout); time, peak RSS, counts."""
    argv = [str(root), "--no-cache", "--quiet", "--json", str(out / "report.json")]
    # This checkout's leakaudit is an editable install (a finder ahead of sys.path): for
    # another revision's code, drop that finder and put the revision's folder first.
    start_code = (
        "import sys\n"
        f"code = {str(code) if code else ''!r}\n"
        "if code:\n"
        "    sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
        "    sys.path.insert(0, code)\n"
        "from leakaudit.cli import main\n"
        f"sys.exit(main(['scan', *{argv!r}]))\n"
    )
    command = [sys.executable, "-c", start_code]
    env = dict(os.environ)
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"wall": float("nan"), "peak": float("nan"), "pairs": -1, "groups": -1}
    wall = time.perf_counter() - start
    # ru_maxrss of children is the largest child so far: each size runs in its own
    # process (see main), so this is this scan's peak.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if done.returncode not in (0, 1):
        raise RuntimeError(f"scan failed ({done.returncode}): {done.stderr[-2000:]}")
    report = json.loads((out / "report.json").read_text())
    verification = report["parameters"].get("verification", {})
    groups = {row["group_id"] for row in report.get("images", report.get("rows", []))}
    return {
        "wall": wall,
        "peak": peak,
        "pairs": verification.get("candidates", -1),
        "groups": len(groups) if groups else -1,
    }


def one(n: int, tiny: bool, code: str | None, tmp: str | None, timeout: float) -> None:
    """Build ROOT, scan it once, print the result as JSON (run in a child of main)."""
    with tempfile.TemporaryDirectory(dir=tmp) as folder:
        root, out = Path(folder) / "root", Path(folder) / "out"
        out.mkdir()
        build_root(root, n, tiny=tiny)
        result = run_scan(root, out, code=Path(code) if code else None, timeout=timeout)
    print(json.dumps(result))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 3000, 10000])
    parser.add_argument("--tiny-sizes", type=int, nargs="*", default=[10000])
    parser.add_argument("--baseline", default=None, help="git revision to compare (e.g. main)")
    parser.add_argument("--baseline-max", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per scan")
    parser.add_argument("--tmp", default=None, help="folder for ROOT (default: system temp)")
    parser.add_argument("--one", nargs=4, metavar=("N", "TINY", "CODE", "TIMEOUT"))
    args = parser.parse_args(argv)
    if args.one:
        n, tiny, code, timeout = args.one
        one(int(n), tiny == "1", code or None, args.tmp, float(timeout))
        return 0
    jobs = [(n, False) for n in args.sizes] + [(n, True) for n in args.tiny_sizes]
    with tempfile.TemporaryDirectory() as checkout:
        baseline = None
        if args.baseline:
            baseline = Path(checkout) / "baseline"
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(REPO),
                    "worktree",
                    "add",
                    "--detach",
                    str(baseline),
                    args.baseline,
                ],
                check=True,
                capture_output=True,
            )
        try:
            rows = []
            for n, tiny in jobs:
                codes: list[tuple[str, str]] = [("this", "")]
                if baseline is not None and n <= args.baseline_max:
                    codes.append((args.baseline, str(baseline)))
                for label, code in codes:
                    # A fresh child per scan, so its RUSAGE_CHILDREN peak is this scan's alone.
                    done = subprocess.run(
                        [
                            sys.executable,
                            __file__,
                            "--one",
                            str(n),
                            "1" if tiny else "0",
                            code,
                            str(args.timeout),
                        ]
                        + (["--tmp", args.tmp] if args.tmp else []),
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    result = json.loads(done.stdout.strip().splitlines()[-1])
                    rows.append((n, tiny, label, result))
                    print(f"N={n} tiny={tiny} code={label}: {result}", file=sys.stderr, flush=True)
        finally:
            if baseline is not None:
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(baseline)],
                    check=False,
                    capture_output=True,
                )
    print(f"photo: {base_photo()[0]}; cores: {os.cpu_count()}, python {sys.version.split()[0]}")
    print()
    print("| copies | size | code | scan s | peak RSS MB | pairs verified | groups |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for n, tiny, label, r in rows:
        wall = "killed" if r["wall"] != r["wall"] else f"{r['wall']:.1f}"
        peak = "" if r["peak"] != r["peak"] else f"{r['peak']:.0f}"
        print(
            f"| {n:,} | {'32 px' if tiny else 'full'} | {label} | {wall} | {peak} | "
            f"{int(r['pairs']):,} | {int(r['groups'])} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
