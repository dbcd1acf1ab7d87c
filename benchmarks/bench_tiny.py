"""Tiny photos (32 px): shifted, rescaled and grey copies across splits, and the false links.

The failure classes of issue 24 point 3 as generated pairs of *real* photo content
(crops of the photographs scikit-image and matplotlib ship, :mod:`photos`), at
CIFAR-10's size: ``train`` holds ``--n`` distinct 32 px crops, ``test`` a copy of
every fourth of them, one class each in turn, plus ``--distractors`` distinct crops
that are in no family:

- ``shift1`` .. ``shift3``: the same 32 px window moved by 1, 2 or 3 px in a random
  direction over the 40 px crop it was cut from (new content enters at one edge);
- ``shrink``: the image rescaled by 80-95% and pasted onto a plain border (its mean
  colour, black or white), moved by up to 1 px;
- ``zoom``: the centre 80-95% enlarged back to 32 px;
- ``grey_shift``: a grey copy moved by 2 px.

Every image is saved as a JPEG of quality 75-95. One default audit of
``{"train": ..., "test": ...}`` is run as it is and with
``VerifyOptions(tiny_photos=False)`` (the net off, the code before it), and for each:
recall per class (the copy in one group with its original), the distractors flagged
(in a group with a train image: false), and the planted test images linked to a train
image other than their original's group (false). Crops of one source photo overlap by
at most IoU 0.6 (:mod:`photos`), so two of them can share a part of a scene: such links
are counted apart.

Run from the repository root::

    .venv/bin/python benchmarks/bench_tiny.py --n 2000

Data goes to ``benchmarks/_data/tiny`` (rebuilt when the recipe changes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from photos import build_photo_corpus, read_manifest

DEFAULT_DATA = Path(__file__).resolve().parent / "_data" / "tiny"
CLASSES = ("shift1", "shift2", "shift3", "shrink", "zoom", "grey_shift")
SIDE = 32
MARGIN = 4  # the 40 px crop around each 32 px image
_RECIPE_VERSION = 1


def _window(image: Image.Image, dx: int, dy: int) -> Image.Image:
    return image.crop((MARGIN + dx, MARGIN + dy, MARGIN + dx + SIDE, MARGIN + dy + SIDE))


def _direction(rng: np.random.Generator, k: int) -> tuple[int, int]:
    while True:
        dx, dy = (int(v) for v in rng.integers(-k, k + 1, 2))
        if max(abs(dx), abs(dy)) == k:
            return dx, dy


def planted_copy(kind: str, source: Image.Image, rng: np.random.Generator) -> Image.Image:
    """The ``kind`` copy of the 32 px window at the centre of a 40 px ``source``."""
    original = _window(source, 0, 0)
    if kind.startswith("shift"):
        return _window(source, *_direction(rng, int(kind[-1])))
    if kind == "grey_shift":
        return _window(source, *_direction(rng, 2)).convert("L").convert("RGB")
    keep = float(rng.uniform(0.80, 0.95))
    if kind == "zoom":
        inner = SIDE * keep
        lo = (SIDE - inner) / 2
        return original.resize(
            (SIDE, SIDE), Image.Resampling.BICUBIC, box=(lo, lo, lo + inner, lo + inner)
        )
    # shrink: onto a plain border
    inner_px = round(SIDE * keep)
    small = original.resize((inner_px, inner_px), Image.Resampling.BICUBIC)
    choice = int(rng.integers(3))
    mean = tuple(int(v) for v in np.asarray(original).reshape(-1, 3).mean(axis=0))
    colour = (mean, (0, 0, 0), (255, 255, 255))[choice]
    canvas = Image.new("RGB", (SIDE, SIDE), colour)
    offset = (SIDE - inner_px) // 2
    dx, dy = (int(v) for v in rng.integers(-1, 2, 2))
    canvas.paste(small, (max(0, offset + dx), max(0, offset + dy)))
    return canvas


def build(data: Path, n: int, distractors: int, seed: int) -> dict[str, object]:
    """Write the set (reused when the recipe matches); return its manifest."""
    recipe = {"version": _RECIPE_VERSION, "n": n, "distractors": distractors, "seed": seed}
    manifest_path = data / "set.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("recipe") == recipe:
            return dict(manifest)
    for sub in ("train", "test"):
        shutil.rmtree(data / sub, ignore_errors=True)
        (data / sub).mkdir(parents=True)
    corpus = data / "corpus"
    sources = build_photo_corpus(
        corpus, n + distractors, size=(SIDE + 2 * MARGIN,) * 2, fmt="PNG", seed=seed
    )
    items = read_manifest(corpus)["items"]
    rng = np.random.default_rng(seed)
    planted: list[dict[str, object]] = []
    for i, path in enumerate(sources):
        source = Image.open(path).convert("RGB")
        quality = int(rng.integers(75, 96))
        if i >= n:
            _window(source, 0, 0).save(data / "test" / f"d{i:05d}.jpg", quality=quality)
            continue
        name = f"{i:05d}.jpg"
        _window(source, 0, 0).save(data / "train" / name, quality=quality)
        if i % 4 == 0:
            kind = CLASSES[(i // 4) % len(CLASSES)]
            copy = planted_copy(kind, source, rng)
            copy.save(data / "test" / f"c{i:05d}.jpg", quality=int(rng.integers(75, 96)))
            planted.append({"copy": f"c{i:05d}.jpg", "original": name, "kind": kind})
    manifest = {
        "recipe": recipe,
        "planted": planted,
        "source": [str(item["source"]) for item in items],
    }
    manifest_path.write_text(json.dumps(manifest))
    return manifest


def score(data: Path, manifest: dict[str, object], *, tiny: bool) -> dict[str, object]:
    import leakaudit
    from leakaudit.verify import VerifyOptions

    start = time.perf_counter()
    report = leakaudit.audit_splits(
        {"train": data / "train", "test": data / "test"},
        cache=False,
        verify=VerifyOptions(tiny_photos=tiny),
    )
    seconds = time.perf_counter() - start
    table = report.table
    names = table["path"].map(lambda p: Path(str(p)).name)
    group = dict(zip(zip(table["split"], names, strict=True), table["group_id"], strict=True))
    train_groups: dict[int, list[str]] = {}
    for (split, name), gid in group.items():
        if split == "train":
            train_groups.setdefault(int(gid), []).append(name)
    sources = manifest["source"]
    assert isinstance(sources, list)
    planted = manifest["planted"]
    assert isinstance(planted, list)
    found = {kind: [0, 0] for kind in CLASSES}
    wrong = same_source = 0
    for item in planted:
        gid = int(group[("test", item["copy"])])
        hit = gid == int(group[("train", item["original"])])
        found[item["kind"]][0] += hit
        found[item["kind"]][1] += 1
        others = [m for m in train_groups.get(gid, []) if m != item["original"]]
        if others and not hit:
            index = int(item["original"][:5])
            if any(sources[int(m[:5])] == sources[index] for m in others):
                same_source += 1
            else:
                wrong += 1
    flagged = same_source_d = 0
    for (split, name), gid in group.items():
        if split == "test" and name.startswith("d") and int(gid) in train_groups:
            index = int(name[1:6])
            if any(sources[int(m[:5])] == sources[index] for m in train_groups[int(gid)]):
                same_source_d += 1
            else:
                flagged += 1
    return {
        "recall": {k: (v[0], v[1]) for k, v in found.items()},
        "wrong": wrong,
        "wrong_same_source": same_source,
        "distractors_flagged": flagged,
        "distractors_same_source": same_source_d,
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="train images")
    parser.add_argument("--distractors", type=int, default=500, help="unrelated test images")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    manifest = build(args.data, args.n, args.distractors, args.seed)
    results = {"net off": score(args.data, manifest, tiny=False)}
    results["default (net on)"] = score(args.data, manifest, tiny=True)
    print(f"| 32 px copies of photo crops ({args.n} train) | " + " | ".join(results) + " |")
    print("|---|" + "---:|" * len(results))
    for kind in CLASSES:
        cells = []
        for r in results.values():
            hit, total = r["recall"][kind]  # type: ignore[index]
            cells.append(f"{hit}/{total} ({100 * hit / max(total, 1):.0f}%)")
        print(f"| {kind} | " + " | ".join(cells) + " |")
    for key, label in (
        ("wrong", "copies linked to another train image"),
        ("wrong_same_source", "... a crop of the same source photo"),
        ("distractors_flagged", f"distractors flagged (of {args.distractors})"),
        ("distractors_same_source", "... with a crop of the same source photo"),
        ("seconds", "audit, s"),
    ):
        values = [r[key] for r in results.values()]
        shown = [f"{v:.1f}" if isinstance(v, float) else str(v) for v in values]
        print(f"| {label} | " + " | ".join(shown) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
