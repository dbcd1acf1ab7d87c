"""The native-resolution check (``verify.distinct_pixel_count``) on copies of small photos.

The check tells look-alike graphics apart on their own pixels. Photos under
``GRAPHIC_SIDE`` pixels stored losslessly (CIFAR-like 32 x 32 PNGs) count as graphics, so the
check runs on them too: this measures how often it would keep a true copy apart. Real-photo
crops (``photos.py``) at 32 x 32, each against 8 copies of the kinds such datasets hold (a JPEG
round trip saved as PNG, a re-crop shifted by a pixel of the output, a 5% wider framing, another
resampling filter, brightness, a mirror, sharpening); prints, per kind, the pairs the pixel check
on the grid accepted and how many of them the native check told apart. Nothing is timed.

Usage::

    python benchmarks/bench_distinct.py            # 300 crops, about 30 s
    python benchmarks/bench_distinct.py --n 1000
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance

sys.path.insert(0, str(Path(__file__).resolve().parent))

import photos

from leakaudit import verify
from leakaudit.loading import DecodeOptions

SIDE = 32


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def _jpeg_then_png(image: Image.Image, quality: int) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=quality)
    return _png(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))


def _copies(source: Image.Image, box: tuple[int, int, int, int]) -> dict[str, bytes]:
    x, y, right, _ = box
    side = right - x
    step = max(1, side // SIDE)  # one pixel of the output
    original = source.crop(box).resize((SIDE, SIDE), Image.Resampling.LANCZOS)
    wider = round(side * 1.05)

    def reduced(crop_box: tuple[int, int, int, int], method: Image.Resampling) -> bytes:
        return _png(source.crop(crop_box).resize((SIDE, SIDE), method))

    kinds: dict[str, Callable[[], bytes]] = {
        "jpeg q90 -> png": lambda: _jpeg_then_png(original, 90),
        "jpeg q75 -> png": lambda: _jpeg_then_png(original, 75),
        "re-crop 1 px": lambda: reduced(
            (x + step, y + step, x + side + step, y + side + step), Image.Resampling.LANCZOS
        ),
        "framing 1.05x": lambda: reduced((x, y, x + wider, y + wider), Image.Resampling.LANCZOS),
        "bilinear": lambda: reduced(box, Image.Resampling.BILINEAR),
        "brightness 1.1": lambda: _png(ImageEnhance.Brightness(original).enhance(1.1)),
        "mirror": lambda: _png(original.transpose(Image.Transpose.FLIP_LEFT_RIGHT)),
        "sharpen 1.5": lambda: _png(ImageEnhance.Sharpness(original).enhance(1.5)),
    }
    return {"original": _png(original)} | {name: make() for name, make in kinds.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300, help="photo crops (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sources = [image.convert("RGB") for image in photos.source_photos()]
    rng = np.random.default_rng(args.seed)
    decode, options = DecodeOptions(), verify.VerifyOptions(geometry=False)
    counts: dict[str, list[int]] = {}
    for _ in range(args.n):
        source = sources[int(rng.integers(len(sources)))]
        width, height = source.size
        side = int(rng.integers(80, min(width, height) // 2))
        x = int(rng.integers(0, width - side * 1.05 - 4))
        y = int(rng.integers(0, height - side * 1.05 - 4))
        files = _copies(source, (x, y, x + side, y + side))
        first = verify.load_view(files.pop("original"), "original", decode)
        for name, data in files.items():
            second = verify.load_view(data, name, decode)
            verdict = verify.compare_views(first, second, options)
            row = counts.setdefault(name, [0, 0, 0, 0])
            row[0] += 1
            row[1] += verdict.accepted
            if verify.distinct_applies(first, second, verdict):
                row[2] += 1
                count = verify.distinct_pixel_count(first, second, verdict.turn)
                row[3] += verdict.accepted and count >= options.distinct_pixels
    print(f"| copy of a {SIDE} px PNG photo | pairs | grid accepted | check ran | told apart |")
    print("|---|---|---|---|---|")
    for name, (pairs, accepted, ran, apart) in counts.items():
        print(f"| {name} | {pairs} | {accepted} | {ran} | {apart} |")
    apart = sum(row[3] for row in counts.values())
    accepted = sum(row[1] for row in counts.values())
    print(f"\nTrue copies told apart: {apart} of {accepted} the grid accepted.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
