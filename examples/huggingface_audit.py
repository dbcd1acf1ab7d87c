"""Audit a Hugging Face DatasetDict, guard a training script, and re-split leak-free.

Run: python examples/huggingface_audit.py   (generates its own data; exits 0)
Needs: pip install 'leakaudit-vision[hf]'
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from datasets import ClassLabel, Dataset, DatasetDict, Features, Image, load_from_disk

from leakaudit.adapters.guard import assert_no_leakage
from leakaudit.adapters.huggingface import audit_dataset_dict, clean_dataset_dict, leak_free_split
from leakaudit.demo import build_demo_dataset
from leakaudit.errors import LeakageError


def demo_dataset_dict(workdir: Path) -> DatasetDict:
    """The demo folders as a DatasetDict stored on disk (image bytes embedded)."""
    demo = build_demo_dataset(workdir / "folders")
    features = Features({"image": Image(), "label": ClassLabel(names=["cat", "dog"])})
    splits = {}
    for name, folder in demo.splits.items():
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        splits[name] = Dataset.from_dict(
            {"image": [str(p) for p in files], "label": [p.parent.name for p in files]},
            features=features,
        )
    DatasetDict(splits).save_to_disk(str(workdir / "hf"))
    return load_from_disk(str(workdir / "hf"))


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="leakaudit-hf-"))
    dataset_dict = demo_dataset_dict(workdir)

    # 1. Audit. Hashing runs in Dataset.map, so the second audit reads HF's cache.
    start = time.perf_counter()
    report = audit_dataset_dict(dataset_dict, progress=False, on_error="ignore")
    first = time.perf_counter() - start
    start = time.perf_counter()
    audit_dataset_dict(dataset_dict, progress=False, on_error="ignore")
    second = time.perf_counter() - start
    print(report, end="\n\n")
    print(f"first audit {first:.2f}s, second (cached) {second:.2f}s", end="\n\n")

    # 2. Guard.
    try:
        assert_no_leakage(report, max_leaked=0)
    except LeakageError as error:
        print("guard refused to train:", str(error).splitlines()[0], end="\n\n")

    # 3. Clean: move leaked groups to train (or policy="drop" to keep train as is).
    result = clean_dataset_dict(dataset_dict, report=report, record_column="original_split")
    print(result.splits)
    print(result.moves.to_string(index=False), end="\n\n")
    assert_no_leakage(result.splits, progress=False, on_error="ignore")  # passes now
    dropped = clean_dataset_dict(dataset_dict, report=report, policy="drop")
    print("drop policy sizes:", dropped.splits.num_rows, end="\n\n")

    # 4. Deduplicate before splitting: one Dataset -> a leak-free DatasetDict.
    split = leak_free_split(
        dataset_dict["train"],
        {"train": 0.8, "test": 0.2},
        seed=0,
        stratify_by_column="label",
        progress=False,
    )
    print(split.plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
