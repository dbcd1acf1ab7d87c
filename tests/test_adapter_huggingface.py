"""The Hugging Face adapter on real ``datasets`` objects with planted leaks."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image as PILImage

datasets = pytest.importorskip("datasets")

from datasets import (  # noqa: E402
    ClassLabel,
    Dataset,
    DatasetDict,
    Features,
    Image,
    Value,
    load_from_disk,
)

from leakaudit.adapters.huggingface import (  # noqa: E402
    ClassMismatchWarning,
    audit_dataset_dict,
    clean_dataset_dict,
    find_image_column,
    hash_dataset,
    leak_free_split,
)
from leakaudit.demo import photo_like_image  # noqa: E402
from leakaudit.errors import ImageLoadError  # noqa: E402
from leakaudit.hashing import UnreadableImageWarning  # noqa: E402
from leakaudit.loading import DecodeOptions  # noqa: E402

SIZE = (96, 72)
NAMES = ["cat", "dog"]
#: Planted cross-split near-duplicates, as (split, row index) pairs.
PLANTED = {
    frozenset({("train", 0), ("test", 4)}),  # byte-identical copy, path missing
    frozenset({("train", 1), ("test", 5)}),  # JPEG re-encode at quality 40
    frozenset({("train", 2), ("test", 6)}),  # resized to half, PNG
    frozenset({("train", 3), ("val", 3)}),  # resized to 3/4, JPEG
}


def encode(image: PILImage.Image, fmt: str = "JPEG", **params: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)
    return buffer.getvalue()


def cell(data: bytes, path: str | None = "image.jpg") -> dict[str, Any]:
    # Every stored path is the same basename (as after a Hub parquet export) or None.
    return {"bytes": data, "path": path}


def build_dataset_dict(label_names: dict[str, list[str]] | None = None) -> DatasetDict:
    names = label_names or {}
    originals = [photo_like_image(200 + i, SIZE) for i in range(10)]
    train_cells = [cell(encode(image, quality=92)) for image in originals]
    val_cells = [cell(encode(photo_like_image(300 + i, SIZE), quality=92)) for i in range(3)]
    val_cells.append(cell(encode(originals[3].resize((72, 54)), quality=90), None))
    test_cells = [cell(encode(photo_like_image(400 + i, SIZE), quality=92)) for i in range(4)]
    test_cells += [
        cell(train_cells[0]["bytes"], None),
        cell(encode(originals[1], quality=40)),
        cell(encode(originals[2].resize((48, 36)), "PNG")),
    ]
    parts = {"train": train_cells, "val": val_cells, "test": test_cells}
    splits = {}
    for split, cells in parts.items():
        label_names_here = names.get(split, NAMES)
        classes = [NAMES[i % 2] for i in range(len(cells))]
        features = Features(
            {"image": Image(), "label": ClassLabel(names=label_names_here), "uid": Value("string")}
        )
        splits[split] = Dataset.from_dict(
            {
                "image": cells,
                "label": [label_names_here.index(c) for c in classes],
                "uid": [f"{split}-{i}" for i in range(len(cells))],
            },
            features=features,
        )
    return DatasetDict(splits)


def leaked_sets(report: Any) -> set[frozenset[tuple[str, int]]]:
    table = report.table
    out = set()
    for group_id in report.leaked_groups["group_id"]:
        rows = table[table["group_id"] == group_id]
        out.add(frozenset(zip(rows["split"], rows["index"].astype(int), strict=True)))
    return out


@pytest.fixture(scope="module")
def dataset_dict() -> DatasetDict:
    return build_dataset_dict()


def uids(dataset_dict: Any) -> Counter[str]:
    return Counter(uid for split in dataset_dict.values() for uid in split["uid"])


# ------------------------------------------------------------------------ audit


def test_audit_finds_exactly_the_planted_groups(dataset_dict: DatasetDict) -> None:
    report = audit_dataset_dict(dataset_dict, progress=False)
    assert leaked_sets(report) == PLANTED
    assert report.images_by_split.to_dict() == {"train": 10, "val": 4, "test": 7}
    table = report.table
    assert list(table["index"]) == [*range(10), *range(4), *range(7)]
    # The stored path is not an identity: shared basenames, or split[index] when missing.
    assert (table["path"] == "image.jpg").sum() == 19
    assert table.loc[(table["split"] == "test") & (table["index"] == 4), "path"].item() == "test[4]"


def test_workers_names_the_verification_threads_as_in_the_core(dataset_dict: DatasetDict) -> None:
    """``workers`` means what it means in the core; ``num_proc`` stays the hashing processes."""
    from leakaudit.adapters.guard import assert_no_leakage

    report = audit_dataset_dict(dataset_dict, progress=False, workers=1)
    assert leaked_sets(report) == PLANTED
    assert report.to_dict() == audit_dataset_dict(dataset_dict, progress=False).to_dict()
    # The guard passes the core's names through to every framework.
    guarded = assert_no_leakage(dataset_dict, max_leaked=100, progress=False, workers=1)
    assert guarded.n_leaked_images == report.n_leaked_images
    everything = datasets.concatenate_datasets(list(dataset_dict.values()))
    result = leak_free_split(
        everything, {"train": 0.6, "test": 0.4}, seed=0, progress=False, workers=1
    )
    assert result.splits.num_rows == {"train": 13, "test": 8}


def test_hash_dataset_stores_uint64_and_matches_with_num_proc(dataset_dict: DatasetDict) -> None:
    hashed = hash_dataset(dataset_dict["test"], progress=False)
    assert hashed.features["phash"] == Value("uint64")
    assert hashed.features["digest"] == Value("uint64")
    array = hashed.with_format("numpy")["phash"]
    assert np.asarray(array).dtype == np.uint64
    assert int(np.asarray(array).max()) > 2**63  # full 64-bit range survives
    parallel = hash_dataset(dataset_dict["test"], num_proc=2, progress=False)
    assert parallel["phash"][:] == hashed["phash"][:]
    assert hashed["source_path"][:4] == ["image.jpg"] * 4
    assert hashed["source_path"][4] is None


def test_image_column_detection(dataset_dict: DatasetDict) -> None:
    train = dataset_dict["train"]
    assert find_image_column(train) == "image"
    renamed = train.rename_column("image", "picture")
    report = audit_dataset_dict({"train": renamed}, image_column="picture", progress=False)
    assert report.total_images == 10
    with pytest.raises(ValueError, match="must name an Image feature"):
        find_image_column(train, "label")
    with pytest.raises(ValueError, match="no Image feature"):
        find_image_column(train.remove_columns("image"))
    raw = train.cast_column("image", Image(decode=False))["image"][:]
    two = train.add_column("thumb", raw, feature=Image())
    with pytest.raises(ValueError, match="several Image features"):
        find_image_column(two)
    assert find_image_column(two, "thumb") == "thumb"


def test_bad_arguments(dataset_dict: DatasetDict) -> None:
    with pytest.raises(TypeError, match="got a single Dataset"):
        audit_dataset_dict(dataset_dict["train"])
    with pytest.raises(TypeError, match="streaming datasets"):
        audit_dataset_dict({"train": dataset_dict["train"].to_iterable_dataset()})
    with pytest.raises(ValueError, match="at least one split"):
        audit_dataset_dict({})


def test_unreadable_rows_are_recorded() -> None:
    features = Features({"image": Image()})
    good = encode(photo_like_image(1, SIZE))
    broken = Dataset.from_dict(
        {"image": [cell(good), cell(b"not an image"), {"bytes": None, "path": "gone.jpg"}]},
        features=features,
    )
    with pytest.warns(UnreadableImageWarning, match="2 of 3"):
        report = audit_dataset_dict({"train": broken}, progress=False)
    assert report.n_unreadable == 2
    with pytest.raises(ImageLoadError, match=r"train\[1\]"):
        audit_dataset_dict({"train": broken}, progress=False, on_error="raise")


# ----------------------------------------------------------------------- clean


def test_clean_moves_groups_and_preserves_features(dataset_dict: DatasetDict) -> None:
    result = clean_dataset_dict(dataset_dict, progress=False, record_column="origin")
    new = result.splits
    assert isinstance(new, DatasetDict) and list(new) == ["train", "val", "test"]
    assert new.num_rows == {"train": 14, "val": 3, "test": 4}
    for split in new.values():
        assert split.features["label"] == ClassLabel(names=NAMES)
        assert isinstance(split.features["image"], Image) and split.features["image"].decode
    assert uids(new) == uids(dataset_dict)  # every row exactly once
    assert Counter(new["train"]["origin"]) == {"train": 10, "test": 3, "val": 1}
    assert "origin" not in dataset_dict["train"].column_names  # input untouched
    assert dataset_dict.num_rows == {"train": 10, "val": 4, "test": 7}

    moves = result.moves
    assert sorted(zip(moves["split"], moves["index"], strict=True)) == [
        ("test", 4),
        ("test", 5),
        ("test", 6),
        ("val", 3),
    ]
    assert set(moves["new_split"]) == {"train"}
    # Labels travel with their rows.
    expected = {
        u: NAMES[i % 2]
        for u, i in ((f"{s}-{i}", i) for s in ("train", "val", "test") for i in range(10))
    }
    train = new["train"]
    for uid, label in zip(train["uid"], train["label"], strict=True):
        assert NAMES[label] == expected[uid]
    for row in train:  # rows iterate and decode
        assert row["image"].size[0] >= 48

    again = audit_dataset_dict(new, progress=False)
    assert again.n_leaked_images == 0
    assert again.total_images == 21


def test_clean_feeds_a_torch_dataloader(dataset_dict: DatasetDict) -> None:
    torch = pytest.importorskip("torch")
    new = clean_dataset_dict(dataset_dict, progress=False).splits["train"]
    loader = torch.utils.data.DataLoader(new.with_format("torch", columns=["label"]), batch_size=4)
    assert sum(len(batch["label"]) for batch in loader) == 14


def test_clean_drop_policy(dataset_dict: DatasetDict) -> None:
    result = clean_dataset_dict(dataset_dict, progress=False, policy="drop")
    new = result.splits
    assert new.num_rows == {"train": 10, "val": 3, "test": 4}
    assert new["train"]["uid"][:] == dataset_dict["train"]["uid"][:]
    assert result.n_dropped == 4 and result.moves["new_split"].isna().all()
    assert audit_dataset_dict(new, progress=False).n_leaked_images == 0


def test_clean_remaps_class_labels_by_name() -> None:
    mixed = build_dataset_dict({"test": ["dog", "cat"], "val": ["bird", "cat", "dog"]})
    with pytest.warns(ClassMismatchWarning, match="bird"):
        result = clean_dataset_dict(mixed, progress=False)
    train = result.splits["train"]
    names = train.features["label"].names
    assert names == ["cat", "dog", "bird"]  # existing ids kept, the new class appended
    for uid, label in zip(train["uid"], train["label"], strict=True):
        index = int(uid.split("-")[1])
        assert names[label] == NAMES[index % 2]
    assert audit_dataset_dict(result.splits, progress=False).n_leaked_images == 0


def test_clean_rejects_mismatched_report(dataset_dict: DatasetDict) -> None:
    report = audit_dataset_dict({"train": dataset_dict["train"]}, progress=False)
    with pytest.raises(ValueError, match="same splits and sizes"):
        clean_dataset_dict(dataset_dict, report=report)
    with pytest.raises(ValueError, match="record_column must be a new column"):
        clean_dataset_dict(dataset_dict, progress=False, record_column="uid")


# ------------------------------------------------------------------ disk + cache


def test_second_audit_of_a_disk_backed_dataset_reuses_the_cache(
    dataset_dict: DatasetDict, tmp_path: Path
) -> None:
    dataset_dict.save_to_disk(str(tmp_path / "dd"))
    disk = load_from_disk(str(tmp_path / "dd"))

    def cache_files() -> set[Path]:
        return set((tmp_path / "dd").rglob("cache-*.arrow"))

    assert cache_files() == set()
    first = audit_dataset_dict(disk, progress=False)
    created = cache_files()
    assert len(created) == 3  # one hash table per split, next to the data
    mtimes = {p: p.stat().st_mtime_ns for p in created}
    reopened = load_from_disk(str(tmp_path / "dd"))
    second = audit_dataset_dict(reopened, progress=False)
    assert cache_files() == created
    assert {p: p.stat().st_mtime_ns for p in created} == mtimes  # read, not rewritten
    assert leaked_sets(second) == leaked_sets(first) == PLANTED
    assert second.table["phash"].tolist() == first.table["phash"].tolist()
    fresh = audit_dataset_dict(reopened, progress=False, load_from_cache_file=False)
    assert leaked_sets(fresh) == PLANTED


def test_hash_caches_are_keyed_by_the_options_and_reused_for_equal_ones(
    dataset_dict: DatasetDict, tmp_path: Path
) -> None:
    dataset_dict["train"].save_to_disk(str(tmp_path / "train"))
    disk = load_from_disk(str(tmp_path / "train"))

    def cache_files() -> set[Path]:
        return set((tmp_path / "train").rglob("cache-*.arrow"))

    plain = hash_dataset(disk, progress=False, cache=False)
    assert len(cache_files()) == 1
    again = hash_dataset(load_from_disk(str(tmp_path / "train")), progress=False, cache=False)
    assert len(cache_files()) == 1  # equal options (and any batch size): read back
    assert again["phash"] == plain["phash"]
    assert again._fingerprint == plain._fingerprint
    other_batches = hash_dataset(disk, progress=False, cache=False, batch_size=3)
    assert other_batches._fingerprint == plain._fingerprint
    turned = hash_dataset(disk, progress=False, cache=False, dihedral=True)
    untrimmed = hash_dataset(
        disk, progress=False, cache=False, decode=DecodeOptions(trim_borders=False)
    )
    assert len(cache_files()) == 3  # a cache per option set, never another's hashes
    assert "orientation_phash" in turned.column_names
    assert len({plain._fingerprint, turned._fingerprint, untrimmed._fingerprint}) == 3
    # Another dataset's hashes have another fingerprint too.
    assert hash_dataset(dataset_dict["test"], progress=False)._fingerprint != plain._fingerprint


def test_default_batch_size_holds_about_64_mb_of_encoded_images() -> None:
    from leakaudit.adapters.huggingface import _default_batch_size

    def of(row_bytes: int, rows: int = 40) -> int:
        data = Dataset.from_dict({"image": [{"bytes": b"x" * row_bytes, "path": None}] * rows})
        return _default_batch_size(data)

    assert of(2_000) == 1000  # CIFAR-sized files: datasets' own default
    assert 60 <= of(1 << 20) <= 64  # 1 MB photos (the column also holds offsets and paths)
    assert of(8 << 20, rows=3) == 16  # 4K photos: never fewer than 16 rows
    assert of(0, rows=0) == 1000


def test_hashes_do_not_depend_on_the_batch_size(dataset_dict: DatasetDict) -> None:
    data = dataset_dict["train"]
    default = hash_dataset(data, progress=False, cache=False, dihedral=True)
    for batch_size in (1, 3, 1000):
        other = hash_dataset(
            data, progress=False, cache=False, dihedral=True, batch_size=batch_size
        )
        assert other.to_dict() == default.to_dict()
    with pytest.raises(ValueError, match="batch_size"):
        hash_dataset(data, progress=False, batch_size=0)


# ------------------------------------------------------------- group-aware split


def test_leak_free_split_keeps_groups_whole(dataset_dict: DatasetDict) -> None:
    everything = datasets.concatenate_datasets(list(dataset_dict.values()))
    for seed in range(3):
        result = leak_free_split(everything, {"train": 0.6, "test": 0.4}, seed=seed, progress=False)
        assert result.splits.num_rows == {"train": 13, "test": 8}
        assert result.plan.max_abs_deviation == 0
        assert uids(result.splits) == uids(dataset_dict)
        assert audit_dataset_dict(result.splits, progress=False).n_leaked_images == 0
        assert result.splits["train"].features == everything.features
    again = leak_free_split(everything, {"train": 0.6, "test": 0.4}, seed=2, progress=False)
    assert again.splits["train"]["uid"][:] == result.splits["train"]["uid"][:]
    assert result.report.n_within_split_groups == 4


def test_leak_free_split_counts_and_stratification(dataset_dict: DatasetDict) -> None:
    everything = datasets.concatenate_datasets(list(dataset_dict.values()))
    result = leak_free_split(
        everything, {"a": 11, "b": 5, "c": 5}, seed=0, stratify_by_column="label", progress=False
    )
    assert result.splits.num_rows == {"a": 11, "b": 5, "c": 5}
    by_label = result.plan.by_label
    assert by_label is not None and list(by_label.columns) == ["a", "b", "c"]
    totals = Counter(everything["label"])
    for label, row in by_label.iterrows():
        assert row.sum() == totals[label]
        assert abs(row["a"] - totals[label] * 11 / 21) <= 2
    assert "assigned_split" in result.report.table.columns


def test_leak_free_split_validates(dataset_dict: DatasetDict) -> None:
    train = dataset_dict["train"]
    with pytest.raises(ValueError, match="sum to 1"):
        leak_free_split(train, {"a": 0.7, "b": 0.7})
    with pytest.raises(ValueError, match="stratify_by_column must be a column"):
        leak_free_split(train, {"a": 0.5, "b": 0.5}, stratify_by_column="nope")
    with pytest.raises(TypeError, match=r"datasets\.Dataset"):
        leak_free_split(dataset_dict, {"a": 0.5, "b": 0.5})


def test_path_cells_use_the_hash_cache(tmp_path: Path) -> None:
    """Cells that are file paths go through leakaudit's hash cache, like files everywhere."""
    from leakaudit.cache import HashCache

    files = []
    for i in range(4):
        path = tmp_path / f"{i}.jpg"
        path.write_bytes(encode(photo_like_image(i % 3, SIZE)))  # 0 and 3 are copies
        files.append(str(path))
    features = Features({"image": Image()})
    dd = DatasetDict(
        {
            "train": Dataset.from_dict({"image": files[:2]}, features=features),
            "test": Dataset.from_dict({"image": files[2:]}, features=features),
        }
    )
    folder = tmp_path / "cache"
    first = audit_dataset_dict(dd, progress=False, cache=folder, load_from_cache_file=False)
    assert first.n_leaked_images == 2
    assert HashCache(folder).path.exists()
    plain = audit_dataset_dict(dd, progress=False, cache=False, load_from_cache_file=False)
    assert plain.table is not None and first.table is not None
    assert plain.table["phash"].tolist() == first.table["phash"].tolist()
    parts = leak_free_split(dd["train"], {"a": 0.5, "b": 0.5}, seed=0, cache=folder,
                            progress=False)  # fmt: skip
    assert sum(len(p) for p in parts.splits.values()) == 2


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("audit", [False, True])
def test_hash_dataset_rows_equal_hash_image(tmp_path: Path, audit: bool, cached: bool) -> None:
    """A map batch is hashed as one batch; every row equals hash_image of its cell.

    With the hash cache on, the path cells of a batch are served by it and the
    bytes cells hashed: the batch's columns (orientation lists included) are
    put back together row by row.
    """
    from leakaudit.hashing import hash_image

    decode = DecodeOptions()
    stored = tmp_path / "stored.png"
    stored.write_bytes(encode(photo_like_image(7, (40, 30)), "PNG"))
    cells = [cell(encode(photo_like_image(i, SIZE), quality=90)) for i in range(12)]
    cells += [cell(encode(photo_like_image(i, (32, 32)), "PNG"), None) for i in range(12, 20)]
    cells[3] = cell(b"not an image")
    cells[9] = cell(encode(photo_like_image(9, SIZE))[:400])  # truncated
    cells[14] = cell(encode(PILImage.new("RGB", (64, 48), (20, 40, 60)), "PNG"))  # blank
    cells.append({"bytes": None, "path": str(stored)})  # a file, read from its path
    cells.insert(5, {"bytes": None, "path": str(stored)})  # mid-batch, among bytes cells
    cells.insert(6, None)  # no image
    cells[0] = {"bytes": cells[0]["bytes"], "path": "kept/name.jpg"}
    dataset = Dataset.from_dict({"image": cells}, features=Features({"image": Image()}))
    hashed = hash_dataset(
        dataset,
        batch_size=7,
        progress=False,
        decode=decode,
        dihedral=audit,
        cache=tmp_path / "cache" if cached else False,
        crop_entries=audit,
    )
    assert hashed["source_path"] == [source and source["path"] for source in cells]
    assert hashed["source_path"][:2] == ["kept/name.jpg", "image.jpg"]
    assert hashed[6]["error"] == "no image (the cell has neither bytes nor a path)"
    kinds = {name: str(feature) for name, feature in hashed.features.items()}
    assert kinds["phash"] == kinds["digest"] == str(Value("uint64"))
    for row, source in enumerate(cells):
        got = hashed[row]
        if source is None:
            continue
        try:
            want = hash_image(
                source["bytes"] if source["bytes"] is not None else source["path"],
                decode=decode,
                dihedral=audit,
                crop_entries=audit,
            )
        except ImageLoadError as exc:
            assert got["error"] == exc.reason
            continue
        assert got["error"] is None
        assert (got["phash"], got["dhash"], got["digest"], got["low_information"]) == (
            want.phash,
            want.dhash,
            want.digest,
            want.low_information,
        )
        if audit:
            pairs = list(zip(got["orientation_phash"], got["orientation_dhash"], strict=True))
            assert pairs == list(want.orientations)
