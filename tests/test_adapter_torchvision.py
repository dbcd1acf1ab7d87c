"""The torchvision adapter on real ImageFolder / Subset / Dataset objects with planted leaks."""

from __future__ import annotations

import copy
import io
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from torch.utils.data import DataLoader, Dataset, Subset, random_split  # noqa: E402
from torchvision import transforms  # noqa: E402
from torchvision.datasets import DatasetFolder, ImageFolder  # noqa: E402

from leakaudit.adapters.torchvision import (  # noqa: E402
    KEEP_TRANSFORM,
    LeakFreeSplit,
    SplitDeviationWarning,
    audit_datasets,
    clean_datasets,
    leak_free_random_split,
)
from leakaudit.demo import photo_like_image  # noqa: E402
from leakaudit.errors import ImageLoadError  # noqa: E402
from leakaudit.hashing import UnreadableImageWarning  # noqa: E402

SIZE = (96, 72)
COUNTS = {"train": 10, "val": 4, "test": 4}
#: (original, copy) relative paths of the planted cross-split near-duplicates.
PLANTED = {
    frozenset({"train/cat/train_00.jpg", "test/cat/renamed_copy.jpg"}),  # byte-identical
    frozenset({"train/dog/train_01.jpg", "val/dog/reencoded_q40.jpg"}),  # JPEG re-encode
    frozenset({"train/cat/train_02.jpg", "test/dog/resized_half.png"}),  # resize + PNG
}


def _write(image: Image.Image, path: Path, fmt: str = "JPEG", **params: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, fmt, **params)


def build_folders(root: Path) -> Path:
    """ImageFolder layout with 3 planted cross-split leaks; val has an extra class."""
    seed = 100
    images: dict[str, Image.Image] = {}
    for split, count in COUNTS.items():
        for i in range(count):
            rel = f"{split}/{('cat', 'dog')[i % 2]}/{split}_{i:02d}.jpg"
            images[rel] = photo_like_image(seed, SIZE)
            seed += 1
            _write(images[rel], root / rel, quality=92)
    # val alone has a "bird" class, so its class_to_idx differs from train's.
    _write(photo_like_image(seed, SIZE), root / "val/bird/val_bird.jpg", quality=92)
    (root / "test/cat/renamed_copy.jpg").write_bytes((root / "train/cat/train_00.jpg").read_bytes())
    _write(images["train/dog/train_01.jpg"], root / "val/dog/reencoded_q40.jpg", quality=40)
    half = images["train/cat/train_02.jpg"].resize((SIZE[0] // 2, SIZE[1] // 2))
    _write(half, root / "test/dog/resized_half.png", "PNG")
    return root


def leaked_sets(report: Any, root: Path) -> set[frozenset[str]]:
    table = report.table
    out = set()
    for group_id in report.leaked_groups["group_id"]:
        paths = table.loc[table["group_id"] == group_id, "path"]
        out.add(frozenset(Path(p).relative_to(root).as_posix() for p in paths))
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_folders(tmp_path_factory.mktemp("folders"))


def folders(root: Path, **kwargs: Any) -> dict[str, ImageFolder]:
    return {split: ImageFolder(str(root / split), **kwargs) for split in COUNTS}


def snapshot(dataset: Any) -> Any:
    """What must not change on the user's objects."""
    if isinstance(dataset, Subset):
        return ("subset", list(dataset.indices), id(dataset.dataset), snapshot(dataset.dataset))
    state = {
        key: copy.copy(value)
        for key, value in vars(dataset).items()
        if key in ("samples", "imgs", "targets", "classes", "class_to_idx", "root")
    }
    state["transform"] = id(getattr(dataset, "transform", None))
    state["samples_list"] = id(getattr(dataset, "samples", None))
    return state


def sample_paths(splits: dict[str, Any]) -> list[str]:
    paths: list[str] = []
    for dataset in splits.values():
        if isinstance(dataset, Subset):
            base, indices = dataset.dataset, list(dataset.indices)
            while isinstance(base, Subset):
                indices = [list(base.indices)[i] for i in indices]
                base = base.dataset
            paths.extend(base.samples[i][0] for i in indices)
        else:
            paths.extend(path for path, _ in dataset.samples)
    return sorted(paths)


# ------------------------------------------------------------------------ audit


def test_audit_image_folders_finds_exactly_the_planted_groups(root: Path) -> None:
    report = audit_datasets(folders(root), workers=1)
    assert leaked_sets(report, root) == PLANTED
    assert report.images_by_split.to_dict() == {"train": 10, "val": 6, "test": 6}
    table = report.table
    assert list(table["index"]) == [*range(10), *range(6), *range(6)]
    val = ImageFolder(str(root / "val"))
    val_rows = table[table["split"] == "val"]
    assert list(val_rows["path"]) == [p for p, _ in val.samples]
    assert list(val_rows["label"]) == val.targets


def test_audit_matches_the_core_on_the_same_folders(root: Path) -> None:
    from leakaudit.audit import audit_splits

    core = audit_splits({split: root / split for split in COUNTS}, workers=1)
    adapter = audit_datasets(folders(root), workers=1)
    assert adapter.n_leaked_images == core.n_leaked_images
    assert leaked_sets(adapter, root) == leaked_sets(core, root)


def test_audit_random_split_subsets_and_nested_subsets(tmp_path: Path) -> None:
    # One folder holding everything; the planted pairs end up in different subsets.
    flat = tmp_path / "all"
    build_folders(tmp_path / "src")
    for path in sorted((tmp_path / "src").rglob("*.*")):
        target = flat / path.parent.name / f"{path.parent.parent.name}_{path.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    full = ImageFolder(str(flat))
    name_of = [Path(p).name for p, _ in full.samples]
    copies = {"test_renamed_copy.jpg", "val_reencoded_q40.jpg", "test_resized_half.png"}
    originals = {"train_train_00.jpg", "train_train_01.jpg", "train_train_02.jpg"}
    held_out = [i for i, n in enumerate(name_of) if n in copies]
    rest = [i for i in range(len(full)) if i not in held_out]
    train, other = random_split(
        Subset(full, rest), [0.5, 0.5], generator=torch.Generator().manual_seed(0)
    )
    # Make sure the originals are on the train side: nested Subset of a Subset.
    train_idx = [i for i in range(len(rest)) if name_of[rest[i]] in originals]
    train_idx += [i for i in train.indices if i not in train_idx]
    nested_train = Subset(Subset(full, rest), train_idx)
    test = Subset(full, held_out)
    before = (snapshot(nested_train), snapshot(test))
    report = audit_datasets({"train": nested_train, "test": test}, workers=1)
    assert report.n_leaked_groups == 3
    assert report.n_leaked_images == 6
    assert (snapshot(nested_train), snapshot(test)) == before
    shared = audit_datasets({"a": train, "b": other}, workers=1)
    assert shared.images_by_split.sum() == len(rest)


def test_unreadable_file_is_recorded_once(tmp_path: Path) -> None:
    root = build_folders(tmp_path)
    (root / "test/cat/corrupt.jpg").write_bytes(b"\xff\xd8\xff not really a jpeg")
    with pytest.warns(UnreadableImageWarning, match="1 of 23"):
        report = audit_datasets(folders(root), workers=1)
    assert report.n_unreadable == 1
    with pytest.raises(ImageLoadError):
        audit_datasets(folders(root), workers=1, on_error="raise")


# ----------------------------------------------------------------------- clean


def test_clean_moves_leaked_groups_into_train_and_keeps_each_kind(root: Path) -> None:
    tf = {
        "train": transforms.Compose([transforms.Resize((32, 32)), transforms.ToTensor()]),
        "val": transforms.Compose([transforms.Resize((24, 24)), transforms.ToTensor()]),
        "test": transforms.Compose([transforms.Resize((16, 16)), transforms.ToTensor()]),
    }
    splits = {split: ImageFolder(str(root / split), transform=tf[split]) for split in COUNTS}
    before = {name: snapshot(ds) for name, ds in splits.items()}
    result = clean_datasets(splits, workers=1)
    assert {name: snapshot(ds) for name, ds in splits.items()} == before  # never mutated

    new = result.splits
    assert list(new) == ["train", "val", "test"]
    for name, dataset in new.items():
        assert type(dataset) is ImageFolder
        assert dataset is not splits[name]
        assert dataset.transform is tf[name]  # each split keeps its own transform
        assert dataset.imgs is dataset.samples
        assert dataset.targets == [t for _, t in dataset.samples]
    assert sample_paths(new) == sample_paths(splits)  # every sample exactly once
    assert len(new["train"]) == 13 and len(new["val"]) == 5 and len(new["test"]) == 4
    assert result.n_moved == 3 and result.n_dropped == 0
    assert set(result.moves["new_split"]) == {"train"}
    assert sorted(map(tuple, result.moves[["split", "index"]].values.tolist())) == sorted(
        [("test", 0), ("test", 3), ("val", 3)]
    )

    # Labels are remapped by class name: val has bird/cat/dog, train has cat/dog.
    train_map = new["train"].class_to_idx
    for path, target in new["train"].samples:
        assert target == train_map[Path(path).parent.name]

    for name, dataset in new.items():
        side = {"train": 32, "val": 24, "test": 16}[name]
        batches = list(DataLoader(dataset, batch_size=4))
        assert sum(len(y) for _, y in batches) == len(dataset)
        assert batches[0][0].shape[-2:] == (side, side)

    again = audit_datasets(new, workers=1)
    assert again.n_leaked_images == 0
    assert again.total_images == result.report.total_images


def test_clean_drop_policy_never_grows_train(root: Path) -> None:
    splits = folders(root)
    result = clean_datasets(splits, policy="drop", workers=1)
    new = result.splits
    assert [p for p, _ in new["train"].samples] == [p for p, _ in splits["train"].samples]
    assert len(new["val"]) == 5 and len(new["test"]) == 4
    assert result.n_dropped == 3 and result.n_moved == 0
    assert result.moves["new_split"].isna().all()
    dropped = {Path(p).name for p in result.moves["path"]}
    assert dropped == {"renamed_copy.jpg", "reencoded_q40.jpg", "resized_half.png"}
    assert audit_datasets(new, workers=1).n_leaked_images == 0


def test_clean_priority_can_favour_test(root: Path) -> None:
    result = clean_datasets(folders(root), priority=("test", "val", "train"), workers=1)
    assert set(result.moves["new_split"]) == {"test", "val"}
    assert len(result.splits["train"]) == 7


def test_clean_subsets_gives_subsets_over_the_same_parent(tmp_path: Path) -> None:
    root = build_folders(tmp_path)
    to_tensor = transforms.Compose([transforms.Resize((32, 32)), transforms.ToTensor()])
    full = ImageFolder(str(root), transform=to_tensor)  # classes: test/train/val
    by_split = {
        split: [
            i
            for i, (p, _) in enumerate(full.samples)
            if Path(p).relative_to(root).parts[0] == split
        ]
        for split in COUNTS
    }
    splits = {split: Subset(full, idx) for split, idx in by_split.items()}
    splits["test"] = Subset(
        Subset(full, by_split["test"] + by_split["val"]), list(range(len(by_split["test"])))
    )  # nested
    before = {name: snapshot(ds) for name, ds in splits.items()}
    result = clean_datasets(splits, workers=1)
    assert {name: snapshot(ds) for name, ds in splits.items()} == before
    for dataset in result.splits.values():
        assert type(dataset) is Subset
        assert dataset.dataset is full
    assert sample_paths(result.splits) == sample_paths(splits)
    assert audit_datasets(result.splits, workers=1).n_leaked_images == 0
    loader = DataLoader(result.splits["train"], batch_size=5)
    assert sum(len(y) for _, y in loader) == 13


def test_clean_subsets_of_different_folders(root: Path) -> None:
    splits = folders(root)
    subsets = {name: Subset(ds, list(range(len(ds)))) for name, ds in splits.items()}
    result = clean_datasets(subsets, workers=1)
    train = result.splits["train"]
    assert type(train) is Subset and len(train) == 13
    assert train.dataset is not splits["train"]  # a copy with the arriving samples appended
    assert len(splits["train"].samples) == 10
    assert sample_paths(result.splits) == sample_paths(subsets)
    assert result.splits["val"].dataset is splits["val"]  # nothing arrived: same parent
    assert audit_datasets(result.splits, workers=1).n_leaked_images == 0


def test_clean_rejects_a_report_of_other_datasets(root: Path) -> None:
    splits = folders(root)
    report = audit_datasets({"train": splits["train"]}, workers=1)
    with pytest.raises(ValueError, match="same splits and sizes"):
        clean_datasets(splits, report=report)
    with pytest.raises(ValueError, match="policy must be one of"):
        clean_datasets(splits, report=report, policy="shuffle")


def test_dataset_folder_with_custom_loader(root: Path) -> None:
    def loader(path: str) -> Image.Image:
        with Image.open(path) as image:
            return image.convert("RGB")

    splits = {
        split: DatasetFolder(str(root / split), loader=loader, extensions=(".jpg", ".png"))
        for split in COUNTS
    }
    report = audit_datasets(splits, workers=1)
    assert leaked_sets(report, root) == PLANTED
    new = clean_datasets(splits, report=report).splits
    assert type(new["train"]) is DatasetFolder and not hasattr(new["train"], "imgs")
    assert new["train"].loader is loader
    assert len(new["train"]) == 13


# --------------------------------------------------------------- generic datasets


class ListDataset(Dataset):  # type: ignore[type-arg]
    """A plain Dataset over in-memory images (no paths, no samples)."""

    def __init__(self, images: list[Image.Image], labels: list[int], transform: Any = None):
        self.images = images
        self.labels = labels
        self.transform = transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        image = self.images[index]
        return (self.transform(image) if self.transform else image), self.labels[index]


def _decoded(root: Path, split: str) -> tuple[list[Image.Image], list[int]]:
    folder = ImageFolder(str(root / split))
    return [folder.loader(p) for p, _ in folder.samples], list(folder.targets)


def test_generic_datasets_yielding_pil_and_tensors(root: Path) -> None:
    train = ListDataset(*_decoded(root, "train"))
    val = ListDataset(*_decoded(root, "val"), transform=transforms.ToTensor())
    test_images, test_labels = _decoded(root, "test")
    arrays = ListDataset([np.asarray(i) for i in test_images], test_labels)
    report = audit_datasets({"train": train, "val": val, "test": arrays})
    assert report.n_leaked_groups == 3
    assert set(report.table.loc[report.table["split"] == "val", "path"]) == {
        f"val[{i}]" for i in range(6)
    }
    assert list(report.table["label"][:10]) == train.labels


def test_random_augmentations_are_skipped_with_transform_override(root: Path) -> None:
    augment = transforms.Compose(
        [
            transforms.RandomResizedCrop(48, scale=(0.2, 0.4)),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
        ]
    )
    splits = {split: ImageFolder(str(root / split), transform=augment) for split in COUNTS}
    torch.manual_seed(0)
    noisy = audit_datasets(splits, use_samples=False)  # hashes random crops
    assert noisy.n_leaked_groups < 3
    before = {name: snapshot(ds) for name, ds in splits.items()}
    clean = audit_datasets(splits, use_samples=False, transform_override=None)
    assert clean.n_leaked_groups == 3
    resize = audit_datasets(splits, use_samples=False, transform_override=transforms.Resize(64))
    assert resize.n_leaked_groups == 3
    assert {name: snapshot(ds) for name, ds in splits.items()} == before
    for dataset in splits.values():
        assert dataset.transform is augment


def test_transform_override_is_exception_safe(root: Path) -> None:
    calls = {"n": 0}

    def explode(image: Image.Image) -> Image.Image:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # not an image problem: must propagate
        return image

    dataset = ListDataset(*_decoded(root, "train"), transform=transforms.ToTensor())
    with pytest.raises(KeyboardInterrupt):
        audit_datasets({"train": dataset}, transform_override=explode)
    assert isinstance(dataset.transform, transforms.ToTensor)
    with pytest.raises(TypeError, match="'transform' attribute"):
        audit_datasets({"train": Subset(list(range(3)), [0])}, transform_override=None)


def test_generic_dataset_errors_are_recorded(root: Path) -> None:
    images, _ = _decoded(root, "train")
    items: list[Any] = [*images[:3], "not an image at all"]

    class Mixed(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 5

        def __getitem__(self, index: int) -> Any:
            if index == 4:
                raise OSError("disk on fire")
            return items[index], 0

    with pytest.warns(UnreadableImageWarning, match="2 of 5"):
        report = audit_datasets({"train": Mixed()})
    errors = report.table["error"].tolist()
    assert [e is None or e != e for e in errors[:3]] == [True] * 3  # missing
    assert "disk on fire" in errors[4]


def test_progress_bar_for_generic_datasets(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = ListDataset(*_decoded(root, "val"))
    audit_datasets({"val": dataset}, progress=True)
    assert "hashing val" in capsys.readouterr().err


def test_num_workers_uses_a_dataloader(root: Path) -> None:
    splits = {
        "train": ListDataset(*_decoded(root, "train")),
        "test": ListDataset(*_decoded(root, "test")),
    }
    serial = audit_datasets(splits)
    parallel = audit_datasets(splits, num_workers=2)
    assert parallel.table["phash"].tolist() == serial.table["phash"].tolist()
    assert parallel.n_leaked_groups == 2


def test_clean_generic_datasets_returns_subsets(root: Path) -> None:
    splits = {
        "train": ListDataset(*_decoded(root, "train")),
        "test": ListDataset(*_decoded(root, "test")),
    }
    result = clean_datasets(splits)
    assert type(result.splits["train"]) is Subset and len(result.splits["train"]) == 12
    assert len(result.splits["test"]) == 4
    assert audit_datasets(result.splits).n_leaked_images == 0
    untouched = clean_datasets({"train": splits["train"]})
    assert untouched.splits["train"] is splits["train"]


def test_keep_transform_sentinel_is_stable() -> None:
    import pickle

    assert pickle.loads(pickle.dumps(KEEP_TRANSFORM)) is KEEP_TRANSFORM
    assert repr(KEEP_TRANSFORM) == "KEEP_TRANSFORM"


# --------------------------------------------------------------- random split


def _all_in_one(tmp_path: Path) -> ImageFolder:
    root = build_folders(tmp_path)
    return ImageFolder(str(root))


def test_leak_free_random_split_keeps_groups_whole(tmp_path: Path) -> None:
    full = _all_in_one(tmp_path)
    for seed in range(3):
        parts = leak_free_random_split(
            full, [0.5, 0.5], torch.Generator().manual_seed(seed), workers=1
        )
        assert isinstance(parts, LeakFreeSplit) and len(parts) == 2
        assert all(type(p) is Subset and p.dataset is full for p in parts)
        assert sorted(parts[0].indices + parts[1].indices) == list(range(len(full)))
        assert [len(p) for p in parts] == [11, 11]
        assert parts.plan.max_abs_deviation == 0
        check = audit_datasets({"a": parts[0], "b": parts[1]}, workers=1)
        assert check.n_leaked_images == 0
    again = leak_free_random_split(full, [0.5, 0.5], torch.Generator().manual_seed(2), workers=1)
    assert again[0].indices == parts[0].indices  # reproducible with a seeded generator
    assert parts.report.n_within_split_groups == 3


def test_leak_free_random_split_takes_the_cache_switch(tmp_path: Path) -> None:
    """The same ``cache`` switch as every entry point that hashes files."""
    full = _all_in_one(tmp_path / "data")
    folder = tmp_path / "cache"
    first = leak_free_random_split(
        full, [0.5, 0.5], torch.Generator().manual_seed(0), workers=1, cache=folder
    )
    assert any(folder.glob("*.sqlite3"))
    again = leak_free_random_split(
        full, [0.5, 0.5], torch.Generator().manual_seed(0), workers=1, cache=False
    )
    assert again[0].indices == first[0].indices


def test_leak_free_random_split_integer_lengths_and_stratify(tmp_path: Path) -> None:
    full = _all_in_one(tmp_path)  # classes test/train/val, 6/10/6 images
    parts = leak_free_random_split(
        full, [14, 8], torch.Generator().manual_seed(1), stratify=True, workers=1
    )
    assert [len(p) for p in parts] == [14, 8]
    by_label = parts.plan.by_label
    assert by_label is not None
    assert (by_label.sum(axis=1).to_numpy() == np.bincount(full.targets)).all()
    assert (abs(by_label["0"] - by_label.sum(axis=1) * 14 / 22) <= 2).all()


def test_leak_free_random_split_reports_deviation(tmp_path: Path) -> None:
    image = photo_like_image(7, SIZE)
    images = [image] * 8 + [photo_like_image(8 + i, SIZE) for i in range(4)]
    dataset = ListDataset(images, [0] * 12)
    with pytest.warns(SplitDeviationWarning, match="deviate"):
        parts = leak_free_random_split(dataset, [0.5, 0.5], torch.Generator().manual_seed(0))
    assert sorted(len(p) for p in parts) == [4, 8]
    assert parts.plan.deviation in ({"0": 2, "1": -2}, {"0": -2, "1": 2})
    assert "kept whole" in str(parts.plan)


def test_leak_free_random_split_validates_lengths(tmp_path: Path) -> None:
    dataset = ListDataset([photo_like_image(i, SIZE) for i in range(4)], [0, 1, 0, 1])
    with pytest.raises(ValueError, match="summing to the dataset size"):
        leak_free_random_split(dataset, [3, 3])
    with pytest.raises(ValueError, match="sum to 1"):
        leak_free_random_split(dataset, [0.5, 0.6])
    with pytest.raises(ValueError, match="stratify=True needs a label"):
        leak_free_random_split(_unlabelled(), [0.5, 0.5], stratify=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parts = leak_free_random_split(dataset, [0.5, 0.5])
    assert sorted(parts[0].indices + parts[1].indices) == [0, 1, 2, 3]


def _unlabelled() -> Dataset:  # type: ignore[type-arg]
    class Images(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 4

        def __getitem__(self, index: int) -> Image.Image:
            return photo_like_image(index, SIZE)

    return Images()


def _encoded(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def test_tensor_conversion_handles_common_layouts() -> None:
    from leakaudit.adapters.torchvision import _hash_item
    from leakaudit.loading import DecodeOptions

    image = photo_like_image(3, SIZE)
    reference = _hash_item(image, DecodeOptions())
    tensor = transforms.ToTensor()(image)
    normalised = transforms.Normalize([0.5] * 3, [0.25] * 3)(tensor)
    uint8 = torch.from_numpy(np.array(image)).permute(2, 0, 1).contiguous()
    for variant in (tensor, normalised, uint8, np.asarray(image), _encoded(image)):
        result = _hash_item((variant, 1), DecodeOptions())
        assert not isinstance(result, str)
        assert bin(result[0] ^ reference[0]).count("1") <= 4
    assert isinstance(_hash_item(torch.zeros(2, 5, 7, 9), DecodeOptions()), str)
