"""The fine-detail rule's cost: matrix products against shifted sums and two-tap gathers.

The rule (``leakaudit._verify_judge._fine_detail_agreement``) registers two grey images of
up to 160 px (``leakaudit._registration``: a blur, a warp per Gauss-Newton step) for every
crop, rotation, content or turned match of two photos. Blurs and warps were products with
``(side, side)`` matrices, which cost ``side / 2`` times the two taps they hold; above
``_DIRECT_SIDE`` they are now shifted sums and gathers. This script times both ways
side by side in one process on the same pairs (crops of real photographs, ``photos.py``:
a 10% crop, a 5-degree rotation and a different crop of the same source for each) and
checks that both give the same agreement.

    .venv/bin/python benchmarks/bench_detail.py --pairs 60
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from photos import build_photo_corpus

DATA = Path(__file__).resolve().parent / "_data" / "detail"


def _jpeg(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    from leakaudit import _registration
    from leakaudit._verify_judge import _fine_detail_agreement
    from leakaudit.verify import load_view

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=60, help="source photos (3 pairs each)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    paths = build_photo_corpus(DATA, args.pairs + 1, size=(500, 375))
    pairs = []
    for k, path in enumerate(paths[: args.pairs]):
        with Image.open(path) as opened:
            photo = opened.convert("RGB")
        w, h = photo.size
        crop = photo.resize(
            (w, h), Image.Resampling.LANCZOS, box=(w * 0.05, h * 0.05, w * 0.95, h * 0.95)
        )
        rotated = photo.rotate(5, Image.Resampling.BICUBIC)
        with Image.open(paths[k + 1]) as opened:
            other = opened.convert("RGB")
        a = load_view(_jpeg(photo), "a")
        pairs += [
            (a, load_view(_jpeg(crop), "crop")),
            (a, load_view(_jpeg(rotated), "rot")),
            (a, load_view(_jpeg(other), "other")),
        ]

    def run(direct_side: int) -> tuple[float, list[float | None]]:
        _registration._DIRECT_SIDE = direct_side
        start = time.perf_counter()
        found = [_fine_detail_agreement(a, b, 0) for a, b in pairs]
        return time.perf_counter() - start, found

    saved = _registration._DIRECT_SIDE
    products, sums = [], []
    for _ in range(args.repeat):  # interleaved
        seconds, before = run(1 << 30)
        products.append(seconds)
        seconds, after = run(saved)
        sums.append(seconds)
    _registration._DIRECT_SIDE = saved
    differ = sum(
        (x is None) != (y is None) or (x is not None and y is not None and abs(x - y) > 1e-6)
        for x, y in zip(before, after, strict=True)
    )
    mp, ms = statistics.median(products), statistics.median(sums)
    print(
        f"| {len(pairs)} pairs (160 px grey images) | matrix products | sums and gathers | ratio |"
    )
    print("|---|---:|---:|---:|")
    print(
        f"| ms per pair (median of {args.repeat}) | {mp / len(pairs) * 1e3:.1f} "
        f"| {ms / len(pairs) * 1e3:.1f} | {mp / ms:.1f}x |"
    )
    print(f"| pairs whose agreement differs | - | {differ} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
