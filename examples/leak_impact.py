"""How much a leak inflates a score: a 1-nearest-neighbour classifier, scored on the leaked
and on the clean test images.

A 1-NN classifier on raw pixels answers with the label of the closest training image, so a
test image with a copy in train is almost always right: exactly the effect a leak has on any
model that memorises. The script trains it on ROOT/train (numpy only: no torch), predicts
ROOT/test and writes a predictions table (``path,label,prediction``) that
``leakaudit impact`` scores against a report of the same folders.

With no argument it does it all on the demo dataset (its two classes are random pictures:
50% is chance) and prints the figures; by hand, with the command line::

    leakaudit demo data --json report.json
    python examples/leak_impact.py data predictions.csv
    leakaudit impact report.json predictions.csv

On CIFAR-10 as class folders (``train/<class>/*.jpg``, ``test/<class>/*.jpg``)::

    leakaudit scan /work/data/cifar10 --json cifar.json
    python examples/leak_impact.py /work/data/cifar10 cifar-predictions.csv
    leakaudit impact cifar.json cifar-predictions.csv

Images are shrunk to ``--side`` pixels a side (default 16), in colour, each scaled to zero
mean and unit length, and compared by cosine similarity. Unreadable files are named and left
out of the predictions (``leakaudit impact`` counts them as images without a prediction).
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

import leakaudit
from leakaudit.demo import build_demo_dataset

_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"}


def _images(split: Path) -> list[tuple[Path, str]]:
    """``(file, class)`` for each image below ``split``: the class is its folder's name."""
    found = []
    for path in sorted(split.rglob("*")):
        if path.suffix.lower() in _SUFFIXES and path.is_file():
            found.append((path, path.parent.name))
    return found


def _features(files: list[tuple[Path, str]], side: int) -> tuple[np.ndarray, list[int]]:
    """Each readable image as a unit vector of its ``side`` x ``side`` colour thumbnail."""
    vectors, kept = [], []
    for number, (path, _) in enumerate(files):
        try:
            with Image.open(path) as image:
                pixels = np.asarray(image.convert("RGB").resize((side, side), Image.BILINEAR))
        except OSError as error:
            warnings.warn(f"{path}: not read ({error}); left out", stacklevel=2)
            continue
        vector = pixels.astype(np.float32).ravel()
        vector -= vector.mean()
        vectors.append(vector / max(float(np.linalg.norm(vector)), 1e-6))
        kept.append(number)
    return np.stack(vectors) if vectors else np.zeros((0, 3 * side * side), np.float32), kept


def predict(root: Path, *, side: int = 16, chunk: int = 1024) -> list[tuple[str, str, str]]:
    """``(path, label, prediction)`` per readable test image: the nearest train image's class."""
    train = _images(root / "train")
    test = _images(root / "test")
    if not train or not test:
        raise SystemExit(f"{root} needs train/ and test/ folders of images")
    train_vectors, train_kept = _features(train, side)
    train_labels = np.array([train[i][1] for i in train_kept], dtype=object)
    test_vectors, test_kept = _features(test, side)
    rows = []
    for start in range(0, len(test_kept), chunk):
        similarity = test_vectors[start : start + chunk] @ train_vectors.T
        nearest = similarity.argmax(axis=1)
        for offset, match in enumerate(nearest.tolist()):
            path, label = test[test_kept[start + offset]]
            rows.append((str(path), label, str(train_labels[match])))
    return rows


def _demo() -> int:
    """No arguments: the whole loop on the demo dataset, in Python."""
    demo = build_demo_dataset(tempfile.mkdtemp(prefix="leakaudit-impact-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the demo's truncated JPEG, named in the report
        report = leakaudit.audit_splits(demo.splits, progress=False)
        rows = predict(demo.root)
    predictions = pd.DataFrame(rows, columns=["path", "label", "prediction"])
    print(report.score_impact(predictions))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "root", type=Path, nargs="?", help="the dataset: ROOT/train and ROOT/test (default: "
        "the demo dataset, audited and scored here)",
    )  # fmt: skip
    parser.add_argument("out", type=Path, nargs="?", help="the predictions CSV to write")
    parser.add_argument("--side", type=int, default=16, help="thumbnail side in pixels")
    args = parser.parse_args(argv)
    if args.root is None:
        return _demo()
    if args.out is None:
        parser.error("give OUT, the predictions CSV to write")
    rows = predict(args.root, side=args.side)
    with open(args.out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["path", "label", "prediction"])
        writer.writerows(rows)
    right = sum(label == prediction for _, label, prediction in rows)
    print(f"{len(rows)} test images, {right} right ({100 * right / len(rows):.2f}%): {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
