"""Dihedral matching (flips and 90-degree rotations): detection, precision and cost.

With ``dihedral=True`` every image is also hashed in its *canonical orientation*
(``leakaudit.hashing.dihedral_orientations``): the rotation/reflection that puts the
brighter side left and top, read from the first two DCT coefficients of the pHash
thumbnail, from the same decode. Decisions within ``margin`` of a tie index the other
choice too, so an image can have up to 8 entries. Two images match when any pair of
their entries is within the threshold on both pHash and dHash (the default method).

This script measures, on real-photo crops (``benchmarks/photos.py``) saved as JPEG:

* recall of flipped / rotated / transposed copies, re-encoded (and resized), plain mode
  vs dihedral mode, per margin;
* recall of ordinary near-duplicates (re-encode, resize, brightness): dihedral mode
  must lose none of them compared with plain mode;
* false pairs among genuinely different photos (all pairs of the base crops, many of
  them crops of one source photo: the hard negatives), per million pairs;
* entries per image (what the search indexes) per margin;
* cost, side by side in one run: hashing with and without orientations (1 worker,
  best of ``--repeat``), and grouping the planted set plus a clumpy synthetic set with
  the measured entries-per-image ratio, plain vs dihedral.

Usage::

    python benchmarks/bench_dihedral.py --n 1500
    python benchmarks/bench_dihedral.py --n 300 --repeat 1 --synthetic 100000   # quick
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageEnhance

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from photos import build_photo_corpus  # noqa: E402
from synthetic_hashes import cached  # noqa: E402

from leakaudit.grouping import fuzzy_edges  # noqa: E402
from leakaudit.hashing import (  # noqa: E402
    _hashes_from_thumbnails,
    _oriented,
    _thumbnails,
    dihedral_orientations,
    hash_sources,
)
from leakaudit.loading import DecodeOptions, grey_from_bytes  # noqa: E402

THRESHOLD = 8  # the default for phash+dhash
#: (label, margin, also index the image as it is)
MODES = (
    ("canon m=0", 0.0, False),
    ("canon m=.02", 0.02, False),
    ("canon m=.05", 0.05, False),
    ("+as-is m=.02", 0.02, True),
)
LEAKAUDIT_MODE = "canon m=.02"  # what hash_sources(..., dihedral=True) indexes
T = Image.Transpose


def _jpeg(image: Image.Image, quality: int) -> bytes:
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def _resize(image: Image.Image, factor: float) -> Image.Image:
    w, h = image.size
    return image.resize((max(8, round(w * factor)), max(8, round(h * factor))), Image.LANCZOS)


Variant = Callable[[Image.Image], bytes]
GEOMETRIC: dict[str, Variant] = {
    "mirror q75": lambda im: _jpeg(im.transpose(T.FLIP_LEFT_RIGHT), 75),
    "flip top-bottom q75": lambda im: _jpeg(im.transpose(T.FLIP_TOP_BOTTOM), 75),
    "rot90 q75": lambda im: _jpeg(im.transpose(T.ROTATE_90), 75),
    "rot180 q75": lambda im: _jpeg(im.transpose(T.ROTATE_180), 75),
    "rot270 q75": lambda im: _jpeg(im.transpose(T.ROTATE_270), 75),
    "transpose q75": lambda im: _jpeg(im.transpose(T.TRANSPOSE), 75),
    "mirror + resize 0.6 q70": lambda im: _jpeg(_resize(im.transpose(T.FLIP_LEFT_RIGHT), 0.6), 70),
    "rot90 + brightness q80": lambda im: _jpeg(
        ImageEnhance.Brightness(im.transpose(T.ROTATE_90)).enhance(1.15), 80
    ),
}
PLAIN: dict[str, Variant] = {
    "re-encode q60": lambda im: _jpeg(im, 60),
    "resize 0.5 q80": lambda im: _jpeg(_resize(im, 0.5), 80),
    "brightness +10% q85": lambda im: _jpeg(ImageEnhance.Brightness(im).enhance(1.1), 85),
}


def _all_orientations(
    data: bytes, options: DecodeOptions
) -> tuple[NDArray[np.uint64], NDArray[np.float64]]:
    """(8, 2) phash/dhash of the image in every orientation code, and its AC coefficients."""
    pixels, box = grey_from_bytes(data, "<bench>", options)
    out = np.zeros((8, 2), dtype=np.uint64)
    ac = np.zeros(64)
    for code in range(8):
        phash, dhash, coefficients = _hashes_from_thumbnails(
            *_thumbnails(*_oriented(pixels, box, code))
        )
        out[code] = (phash, dhash)
        if code == 0:
            ac = coefficients
    return out, ac


def _codes(ac: NDArray[np.float64], margin: float, as_is: bool) -> list[int]:
    codes = dihedral_orientations(ac, margin)
    return list(dict.fromkeys([0, *codes])) if as_is else codes


def _entries(
    hashes: NDArray[np.uint64], acs: NDArray[np.float64], margin: float, as_is: bool
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    owner: list[int] = []
    rows: list[NDArray[np.uint64]] = []
    for i in range(len(hashes)):
        for code in _codes(acs[i], margin, as_is):
            owner.append(i)
            rows.append(hashes[i, code])
    return np.array(owner, dtype=np.int64), np.array(rows, dtype=np.uint64).reshape(-1, 2)


def _distance(a: NDArray[np.uint64], b: NDArray[np.uint64]) -> NDArray[np.int64]:
    """Both-hash distance (max of pHash and dHash distances) of entry rows."""
    d = np.bitwise_count(a ^ b).astype(np.int64)
    return d.max(axis=-1)  # type: ignore[no-any-return]


def _pair_distance(owner: NDArray[np.int64], entries: NDArray[np.uint64], i: int, j: int) -> int:
    ei, ej = entries[owner == i], entries[owner == j]
    return int(_distance(ei[:, None, :], ej[None, :, :]).min())


def _false_pairs(owner: NDArray[np.int64], entries: NDArray[np.uint64], n: int) -> int:
    """Distinct base pairs with some entry pair within the threshold."""
    found = set()
    block = 2048
    for start in range(0, len(entries), block):
        d = _distance(entries[start : start + block, None, :], entries[None, :, :])
        a, b = np.nonzero(d <= THRESHOLD)
        oa, ob = owner[start + a], owner[b]
        keep = oa < ob
        found.update(zip(oa[keep].tolist(), ob[keep].tolist(), strict=True))
    return len(found)


def _best_of(repeat: int, function: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=1500, help="base photos (default 1500)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--synthetic", type=int, default=1_000_000, help="synthetic hashes for the grouping cost"
    )
    parser.add_argument("--data-dir", type=Path, default=HERE / "_data" / "dihedral")
    args = parser.parse_args(argv)
    options = DecodeOptions()
    print(f"load average before: {os.getloadavg()}")

    bases = build_photo_corpus(args.data_dir / "base", args.n, quality=92)
    base_bytes = [p.read_bytes() for p in bases]
    images = [Image.open(io.BytesIO(b)).convert("RGB") for b in base_bytes]
    kinds = {**GEOMETRIC, **PLAIN}
    # Copies of the first third of the bases, every variant each.
    planted_of = list(range(0, args.n, 3))
    copies: dict[str, list[bytes]] = {
        name: [make(images[i]) for i in planted_of] for name, make in kinds.items()
    }

    base_hashes = np.zeros((args.n, 8, 2), dtype=np.uint64)
    base_acs = np.zeros((args.n, 64))
    for i, data in enumerate(base_bytes):
        base_hashes[i], base_acs[i] = _all_orientations(data, options)
    copy_hashes = {}
    for name, datas in copies.items():
        h = np.zeros((len(datas), 8, 2), dtype=np.uint64)
        a = np.zeros((len(datas), 64))
        for k, data in enumerate(datas):
            h[k], a[k] = _all_orientations(data, options)
        copy_hashes[name] = (h, a)

    print(
        f"\n{args.n} base photos (500x375 JPEG q92), {len(planted_of)} planted copies per kind; "
        f"threshold {THRESHOLD} on both pHash and dHash (the default)"
    )
    header = f"{'copy kind':28s} {'plain':>7s}" + "".join(f" {m[0]:>13s}" for m in MODES)
    print("\nRecall (copy linked directly to its original)")
    print(header)
    for name in kinds:
        h, a = copy_hashes[name]
        plain = np.mean(
            [_distance(base_hashes[i, 0], h[k, 0]) <= THRESHOLD for k, i in enumerate(planted_of)]
        )
        row = f"{name:28s} {plain:7.1%}"
        for _, margin, as_is in MODES:
            hits = 0
            for k, i in enumerate(planted_of):
                oi = _codes(base_acs[i], margin, as_is)
                ok = _codes(a[k], margin, as_is)
                d = _distance(base_hashes[i, oi][:, None, :], h[k, ok][None, :, :]).min()
                hits += d <= THRESHOLD
            row += f" {hits / len(planted_of):13.1%}"
        print(row)

    n_pairs = args.n * (args.n - 1) // 2
    plain_owner = np.arange(args.n, dtype=np.int64)
    plain_false = _false_pairs(plain_owner, base_hashes[:, 0], args.n)
    print(
        f"\nFalse pairs among the {n_pairs:,} pairs of different base photos, and entries per image"
    )
    print(f"{'mode':12s} {'false pairs':>12s} {'per million':>12s} {'entries/img':>12s}")
    print(f"{'plain':12s} {plain_false:12d} {plain_false / n_pairs * 1e6:12.1f} {1.0:12.2f}")
    ratios = {}
    for label, margin, as_is in MODES:
        owner, entries = _entries(base_hashes, base_acs, margin, as_is)
        false = _false_pairs(owner, entries, args.n)
        ratios[label] = len(owner) / args.n
        print(f"{label:12s} {false:12d} {false / n_pairs * 1e6:12.1f} {ratios[label]:12.2f}")
    if args.synthetic == 0:
        return 0

    # ------------------------------------------------------------------ cost
    paths = [str(p) for p in bases]
    hash_sources(paths[:50], workers=1, progress=False)  # warm imports
    plain_s = dihedral_s = float("inf")
    for _ in range(args.repeat):
        plain_s = min(plain_s, _best_of(1, lambda: hash_sources(paths, workers=1, progress=False)))
        dihedral_s = min(
            dihedral_s,
            _best_of(1, lambda: hash_sources(paths, workers=1, progress=False, dihedral=True)),
        )
    print(
        f"\nHashing {args.n} JPEGs, 1 worker, best of {args.repeat}: plain {plain_s:.2f} s, "
        f"dihedral {dihedral_s:.2f} s, ratio {dihedral_s / plain_s:.2f}x"
    )

    from leakaudit.hashing import DIHEDRAL_MARGIN

    ratio = ratios[LEAKAUDIT_MODE]
    n = args.synthetic
    phash = cached("clumpy", n, seed=0)
    dhash = cached("clumpy", n, seed=1)
    extra = round(n * (ratio - 1.0))
    rng = np.random.default_rng(7)
    # An image's other orientations look like other images, not like it: draw them
    # from fresh clumpy sets (same distribution, no planted copies of this one).
    owner = np.concatenate([np.arange(n), rng.choice(n, size=extra)]).astype(np.int64)
    sets = -(-extra // n)  # fresh sets of n needed
    entry_p = np.concatenate([phash, *(cached("clumpy", n, seed=2 + 2 * k) for k in range(sets))])
    entry_d = np.concatenate([dhash, *(cached("clumpy", n, seed=3 + 2 * k) for k in range(sets))])
    entry_p, entry_d = entry_p[: n + extra], entry_d[: n + extra]
    order = np.argsort(owner, kind="stable")
    owner, entry_p, entry_d = owner[order], entry_p[order], entry_d[order]
    linkable = np.ones(n, dtype=bool)

    def plain_run() -> int:
        return sum(
            len(e)
            for e in fuzzy_edges(
                phash, THRESHOLD, linkable, second=dhash, second_threshold=THRESHOLD
            )
        )

    def dihedral_run() -> int:
        return sum(
            len(e)
            for e in fuzzy_edges(
                entry_p,
                THRESHOLD,
                linkable,
                second=entry_d,
                second_threshold=THRESHOLD,
                owner=owner,
            )
        )

    plain_g = _best_of(args.repeat, plain_run)
    dihedral_g = _best_of(args.repeat, dihedral_run)
    print(
        f"Grouping {n:,} clumpy synthetic pHash+dHash at t={THRESHOLD} with {ratio:.2f} entries "
        f"per image (margin {DIHEDRAL_MARGIN}), best of {args.repeat}: plain {plain_g:.2f} s, "
        f"dihedral {dihedral_g:.2f} s, ratio {dihedral_g / plain_g:.2f}x"
    )
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
