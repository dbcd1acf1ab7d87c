"""The DataFrame functions, step by step (see docs/python-api.md).

compute_hashes -> find_duplicate_groups -> dhash_audit -> clean_splits, on a
generated demo dataset (no download). Run: python examples/seed_workflow.py
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import leakaudit
from leakaudit.demo import build_demo_dataset


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="leakaudit-example-"))
    demo = build_demo_dataset(root)
    paths, splits = [], []
    for split, folder in demo.splits.items():
        files = leakaudit.list_image_files(folder)
        paths += files
        splits += [split] * len(files)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hashes = leakaudit.compute_hashes(paths, splits, method="phash", progress=False)
    for warning in caught:  # the demo plants one corrupt file: it is reported, not fatal
        print("warning:", warning.message)

    groups = leakaudit.find_duplicate_groups(hashes, threshold=6)
    report = leakaudit.dhash_audit(groups)
    print(report)

    cleaned = leakaudit.clean_splits(groups, priority=["train", "val", "test"])
    moved = cleaned[cleaned["reassigned"]]
    print(f"\nclean_splits moved {len(moved)} image(s):")
    for row in moved.itertuples():
        print(f"  {Path(row.path).relative_to(root)}: {row.original_split} -> {row.split}")
    assert not leakaudit.dhash_audit(cleaned).has_leakage
    print("hamming_distance('ff00', 'ff01') =", leakaudit.hamming_distance("ff00", "ff01"))


if __name__ == "__main__":
    main()
