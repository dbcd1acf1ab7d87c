"""The adapters' clean_* and images that cannot be decoded (issue 37, point 4, the trial).

``leakaudit clean`` leaves unreadable images out of the copy by default; the torchvision and
Hugging Face ``clean_*`` handed them back inside the clean split, so the first epoch over it
died with ``OSError: Truncated File Read``. They now take the same ``unreadable`` choice.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import pytest
from imagegen import photo_like, truncated


def _tree(root: Path) -> Path:
    """train/{cat,dog} and test/{cat,dog}: one byte copy across splits, one truncated JPEG."""
    for split, count in (("train", 4), ("test", 3)):
        for c, name in enumerate(("cat", "dog")):
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(count):
                seed = {"train": 100, "test": 200}[split] + 10 * c + i
                photo_like(seed, (80, 64)).save(folder / f"{i}.png")
    original = root / "train" / "cat" / "0.png"
    (root / "test" / "cat" / "copy.png").write_bytes(original.read_bytes())
    buffer = io.BytesIO()
    photo_like(999, (80, 64)).save(buffer, "JPEG", quality=90)
    (root / "test" / "dog" / "broken.jpg").write_bytes(truncated(buffer.getvalue(), 0.5))
    return root


def _clean_tv(root: Path, **options: object) -> object:
    pytest.importorskip("torchvision")
    from torchvision.datasets import ImageFolder

    from leakaudit.adapters.torchvision import clean_datasets

    splits = {name: ImageFolder(str(root / name)) for name in ("train", "test")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = clean_datasets(splits, workers=1, cache=False, **options)
    return splits, result, [str(w.message) for w in caught]


def test_torchvision_clean_leaves_unreadable_out_by_default(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torchvision import transforms

    splits, result, messages = _clean_tv(_tree(tmp_path))
    test = result.splits["test"]
    paths = [Path(p).name for p, _ in test.samples]
    assert "broken.jpg" not in paths and "copy.png" not in paths
    assert len(test) == len(splits["test"]) - 2  # the copy moved to train, the broken one out
    assert len(test.targets) == len(test.samples) == len(test.imgs)
    assert any("broken.jpg" in m and "left out of the clean splits" in m for m in messages)
    dropped = result.moves[result.moves["new_split"].isna()]
    assert [Path(p).name for p in dropped["path"]] == ["broken.jpg"]
    assert result.n_moved == 1 and result.n_dropped == 1
    # The first epoch over the clean split runs through (it raised OSError before).
    test.transform = transforms.ToTensor()
    seen = sum(len(batch[0]) for batch in torch.utils.data.DataLoader(test, batch_size=4))
    assert seen == len(test)
    assert any(Path(p).name == "broken.jpg" for p, _ in splits["test"].samples)  # theirs kept


def test_torchvision_clean_unreadable_copy_and_fail(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    _, kept, _ = _clean_tv(root, unreadable="copy")
    assert "broken.jpg" in [Path(p).name for p, _ in kept.splits["test"].samples]
    assert kept.n_dropped == 0
    with pytest.raises(ValueError, match=r"unreadable='fail'.*broken\.jpg"):
        _clean_tv(root, unreadable="fail")


def test_unreadable_choice_checked_before_hashing(tmp_path: Path) -> None:
    pytest.importorskip("torchvision")
    from torchvision.datasets import ImageFolder

    from leakaudit.adapters.torchvision import clean_datasets

    root = _tree(tmp_path)
    splits = {name: ImageFolder(str(root / name)) for name in ("train", "test")}
    with pytest.raises(ValueError, match="unreadable must be one of"):
        clean_datasets(splits, unreadable="skip", threshold=99)  # threshold would fail later


def test_huggingface_clean_leaves_unreadable_out_by_default(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    from leakaudit.adapters.huggingface import clean_dataset_dict

    root = _tree(tmp_path)
    dd = datasets.DatasetDict(
        {
            name: datasets.Dataset.from_dict(
                {"image": sorted(str(p) for p in (root / name).rglob("*.*"))}
            ).cast_column("image", datasets.Image())
            for name in ("train", "test")
        }
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = clean_dataset_dict(dd, workers=1, cache=False, progress=False)
    assert any("broken.jpg" in str(w.message) for w in caught)
    test = result.splits["test"]
    assert test.num_rows == dd["test"].num_rows - 2
    assert all(image.size == (80, 64) for image in test["image"])  # every row decodes
    kept = clean_dataset_dict(dd, workers=1, cache=False, progress=False, unreadable="copy")
    assert kept.splits["test"].num_rows == dd["test"].num_rows - 1
