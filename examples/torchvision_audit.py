"""Audit torchvision ImageFolder splits, guard a training script, and re-split leak-free.

Run: python examples/torchvision_audit.py   (generates its own data; exits 0)
Needs: pip install 'leakaudit-vision[torch]'
"""

from __future__ import annotations

import sys
import tempfile

import torch
from torch.utils.data import DataLoader
from torchvision import transforms
from torchvision.datasets import ImageFolder

from leakaudit.adapters.guard import assert_no_leakage
from leakaudit.adapters.torchvision import audit_datasets, clean_datasets, leak_free_random_split
from leakaudit.demo import build_demo_dataset
from leakaudit.errors import LeakageError


def main() -> int:
    demo = build_demo_dataset(tempfile.mkdtemp(prefix="leakaudit-torchvision-"))
    train_tf = transforms.Compose(
        [transforms.RandomResizedCrop(64), transforms.RandomHorizontalFlip(), transforms.ToTensor()]
    )
    eval_tf = transforms.Compose([transforms.Resize((64, 64)), transforms.ToTensor()])
    splits = {
        "train": ImageFolder(str(demo.splits["train"]), transform=train_tf),
        "val": ImageFolder(str(demo.splits["val"]), transform=eval_tf),
        "test": ImageFolder(str(demo.splits["test"]), transform=eval_tf),
    }

    # 1. Audit: hashed from the files in `samples`, so the random train transform
    #    plays no part. (The demo plants one corrupt file: reported, not fatal.)
    report = audit_datasets(splits, on_error="ignore")
    print(report, end="\n\n")

    # 2. Guard: what a training script would run before building its DataLoaders.
    try:
        assert_no_leakage(report, max_fraction=0.01)
    except LeakageError as error:
        print("guard refused to train:", str(error).splitlines()[0], end="\n\n")

    # 3. Clean: new ImageFolders (each keeps its own transform); the originals are untouched.
    result = clean_datasets(splits, report=report)
    print("moved into a higher-priority split:")
    print(result.moves.to_string(index=False), end="\n\n")
    clean = result.splits
    assert_no_leakage(clean, on_error="ignore")  # passes now
    images, _ = next(iter(DataLoader(clean["val"], batch_size=8)))
    print(
        f"clean splits: { {k: len(v) for k, v in clean.items()} }; a val batch: "
        f"{tuple(images.shape)}"
    )

    # 4. A leak-free random_split of one folder (duplicates inside train stay together).
    parts = leak_free_random_split(
        splits["train"], [0.8, 0.2], torch.Generator().manual_seed(0), stratify=True
    )
    train, holdout = parts
    print(f"leak_free_random_split: {len(train)} / {len(holdout)}; {parts.plan}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
