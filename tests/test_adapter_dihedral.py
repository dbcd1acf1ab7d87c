"""Dihedral matching and per-source thresholds through the framework adapters.

Real torchvision and ``datasets`` objects over one small ImageFolder tree: test
holds mirrored, flipped and rotated JPEG re-encodes of some train photos (found
only with ``dihedral=True``), a resized re-encode and a byte copy (found either
way), and unrelated photos.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from imagegen import photo_like
from PIL import Image

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
datasets = pytest.importorskip("datasets")

from datasets import ClassLabel, DatasetDict, Features, load_from_disk  # noqa: E402
from torch.utils.data import Dataset, Subset  # noqa: E402
from torchvision import transforms  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402

from leakaudit import audit_splits  # noqa: E402
from leakaudit.adapters.guard import assert_no_leakage  # noqa: E402
from leakaudit.adapters.huggingface import (  # noqa: E402
    audit_dataset_dict,
    clean_dataset_dict,
    hash_dataset,
    leak_free_split,
)
from leakaudit.adapters.torchvision import (  # noqa: E402
    audit_datasets,
    clean_datasets,
    leak_free_random_split,
)
from leakaudit.errors import LeakageError  # noqa: E402
from leakaudit.hashing import hash_sources  # noqa: E402

T = Image.Transpose
SIZE = (96, 72)
SPLITS = ("train", "test")
#: train image number -> (name, transpose) of its turned copy in test.
TURNS = {
    0: ("mirror", T.FLIP_LEFT_RIGHT),
    1: ("flip", T.FLIP_TOP_BOTTOM),
    2: ("rot90", T.ROTATE_90),
    3: ("rot180", T.ROTATE_180),
    4: ("transpose", T.TRANSPOSE),
}
TURNED = {
    frozenset({f"train/{'ab'[i % 2]}/t{i}.jpg", f"test/{'ab'[i % 2]}/{name}_t{i}.jpg"})
    for i, (name, _) in TURNS.items()
}
#: Found with or without dihedral matching.
PLAIN = {
    frozenset({"train/b/t5.jpg", "test/b/resized_t5.jpg"}),  # resized, JPEG quality 60
    frozenset({"train/a/t6.jpg", "test/a/copy_t6.jpg"}),  # byte copy
}
ALL = PLAIN | TURNED
#: A rule that changes the outcome: test images link only at distance 0.
STRICT_TEST = {"test": 0, "*": 8}


def build_tree(root: Path) -> Path:
    originals = [photo_like(10 + i, SIZE) for i in range(8)]
    for i, image in enumerate(originals):
        path = root / f"train/{'ab'[i % 2]}/t{i}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        image.save(path, "JPEG", quality=90)
    for i, (name, turn) in TURNS.items():
        path = root / f"test/{'ab'[i % 2]}/{name}_t{i}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        originals[i].transpose(turn).save(path, "JPEG", quality=80)
    originals[5].resize((80, 60)).save(root / "test/b/resized_t5.jpg", "JPEG", quality=60)
    shutil.copyfile(root / "train/a/t6.jpg", root / "test/a/copy_t6.jpg")
    for k in range(3):
        photo_like(50 + k, SIZE).save(root / f"test/{'ab'[k % 2]}/other_{k}.jpg", quality=90)
    return root


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tree(tmp_path_factory.mktemp("turned"))


def files(root: Path, split: str) -> list[Path]:
    """The split's images in ImageFolder order (class folder, then name)."""
    return [Path(path) for path, _ in ImageFolder(str(root / split)).samples]


def rel(root: Path, path: Any) -> str:
    return Path(path).relative_to(root).as_posix()


def leaked(report: Any, name_of: Callable[[str, int], str]) -> set[frozenset[str]]:
    """The leaked groups, each as the set of its images' names (``split/class/file``)."""
    table = report.table
    out = set()
    for group_id in report.leaked_groups["group_id"]:
        rows = table[table["group_id"] == group_id]
        pairs = zip(rows["split"], rows["index"], strict=True)
        out.add(frozenset(name_of(split, int(index)) for split, index in pairs))
    return out


def by_position(root: Path, splits: dict[str, list[Path]]) -> Callable[[str, int], str]:
    return lambda split, index: rel(root, splits[split][index])


class InMemory(Dataset):  # type: ignore[type-arg]
    """A generic dataset of decoded images (or of encoded bytes) and labels."""

    def __init__(self, paths: list[Path], kind: str = "pil") -> None:
        self.items: list[Any] = []
        for path in paths:
            if kind == "pil":
                with Image.open(path) as image:
                    self.items.append(image.convert("RGB"))
            else:
                self.items.append(path.read_bytes())
        self.labels = [0 if path.parent.name == "a" else 1 for path in paths]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        return self.items[index], self.labels[index]


def folders(root: Path, **kwargs: Any) -> dict[str, ImageFolder]:
    return {split: ImageFolder(str(root / split), **kwargs) for split in SPLITS}


def hf_splits(root: Path, kind: str) -> DatasetDict:
    """A DatasetDict of the tree: Image cells holding a path, or the bytes only."""
    out = {}
    for split in SPLITS:
        paths = files(root, split)
        cells: list[Any] = (
            [str(p) for p in paths]
            if kind == "files"
            else [{"bytes": p.read_bytes(), "path": None} for p in paths]
        )
        features = Features({"image": datasets.Image(), "label": ClassLabel(names=["a", "b"])})
        labels = [0 if p.parent.name == "a" else 1 for p in paths]
        columns = {"image": cells, "label": labels}
        out[split] = datasets.Dataset.from_dict(columns, features=features)
    return DatasetDict(out)


def hf_names(root: Path) -> Callable[[str, int], str]:
    return by_position(root, {split: files(root, split) for split in SPLITS})


# ------------------------------------------------------------------- torchvision


def test_image_folders_find_exactly_the_turned_copies(root: Path) -> None:
    splits = folders(root)
    name = by_position(root, {s: files(root, s) for s in SPLITS})
    turned = audit_datasets(splits, workers=1, dihedral=True)
    plain = audit_datasets(splits, workers=1, dihedral=False)
    assert leaked(turned, name) == ALL
    assert leaked(plain, name) == PLAIN
    assert turned.parameters["dihedral"] is True
    assert "dihedral" not in plain.parameters
    assert turned.orientations is not None and plain.orientations is None
    # The adapter's table matches the core's audit of the same files.
    core = audit_splits({s: root / s for s in SPLITS}, workers=1, dihedral=True)
    assert turned.table["group_id"].tolist() == core.table["group_id"].tolist()
    assert turned.table["path"].tolist() == core.table["path"].tolist()


@pytest.mark.parametrize("kind", ["pil", "bytes", "tensor"])
def test_generic_datasets_find_exactly_the_turned_copies(root: Path, kind: str) -> None:
    paths = {s: files(root, s) for s in SPLITS}
    splits: dict[str, Any]
    if kind == "tensor":  # an ImageFolder hashed through __getitem__, as tensors
        splits = folders(root, transform=transforms.ToTensor())
        options: dict[str, Any] = {"use_samples": False}
    else:
        splits = {s: InMemory(paths[s], kind) for s in SPLITS}
        options = {}
    name = by_position(root, paths)
    assert leaked(audit_datasets(splits, dihedral=True, **options), name) == ALL
    assert leaked(audit_datasets(splits, **options, dihedral=False), name) == PLAIN


def test_dataloader_workers_carry_the_orientation_entries(root: Path) -> None:
    splits = {s: InMemory(files(root, s)) for s in SPLITS}
    serial = audit_datasets(splits, dihedral=True)
    parallel = audit_datasets(splits, dihedral=True, num_workers=2)
    assert serial.orientations is not None and parallel.orientations is not None
    assert parallel.orientations.owner.tolist() == serial.orientations.owner.tolist()
    assert parallel.orientations.phash.tolist() == serial.orientations.phash.tolist()
    assert parallel.table["group_id"].tolist() == serial.table["group_id"].tolist()


def test_mixed_file_and_generic_rows_keep_their_own_entries(root: Path) -> None:
    # Generic rows first, file rows after: the merged entries must be renumbered
    # to table rows and sorted by row, each row's entries in their order.
    paths = {s: files(root, s) for s in SPLITS}
    splits = {"test": InMemory(paths["test"], "bytes"), "train": ImageFolder(str(root / "train"))}
    report = audit_datasets(splits, workers=1, dihedral=True)
    assert leaked(report, by_position(root, paths)) == ALL
    entries = report.orientations
    assert entries is not None
    assert (np.diff(entries.owner) >= 0).all()
    assert set(entries.owner.tolist()) == set(range(len(report.table)))
    n_test = len(paths["test"])
    direct = hash_sources([str(p) for p in paths["train"]], workers=1, dihedral=True).orientations
    assert direct is not None
    mine = entries.take(np.arange(n_test, len(report.table)))
    assert mine.owner.tolist() == direct.owner.tolist()
    assert mine.phash.tolist() == direct.phash.tolist()
    assert mine.dhash.tolist() == direct.dhash.tolist()
    assert entries.phash.dtype == np.uint64 and entries.owner.dtype == np.int64


def test_subsets_and_nested_subsets(root: Path) -> None:
    splits = folders(root)
    test_paths = files(root, "test")
    wanted = ["test/a/mirror_t0.jpg", "test/a/rot90_t2.jpg", "test/a/other_0.jpg"]
    wanted += ["test/b/resized_t5.jpg", "test/b/flip_t1.jpg"]
    indices = [next(i for i, p in enumerate(test_paths) if rel(root, p) == w) for w in wanted]
    outer = Subset(splits["test"], [*indices, 0, 1])
    nested = Subset(outer, list(range(len(indices))))
    chosen = [test_paths[i] for i in indices]
    name = by_position(root, {"train": files(root, "train"), "test": chosen})
    expected = {g for g in ALL if any(p in g for p in wanted)}
    for subset in (Subset(splits["test"], indices), nested):
        report = audit_datasets({"train": splits["train"], "test": subset}, dihedral=True)
        assert leaked(report, name) == expected
        plain = audit_datasets({"train": splits["train"], "test": subset}, dihedral=False)
        assert leaked(plain, name) == expected & PLAIN


@pytest.mark.parametrize("kind", ["folder", "generic"])
def test_clean_with_dihedral_is_leak_free_on_reaudit(root: Path, kind: str) -> None:
    splits: dict[str, Any] = (
        folders(root) if kind == "folder" else {s: InMemory(files(root, s)) for s in SPLITS}
    )
    sizes = {s: len(d) for s, d in splits.items()}
    result = clean_datasets(splits, workers=1, dihedral=True)
    assert result.report.parameters["dihedral"] is True
    assert result.n_moved == len(ALL)
    assert {s: len(d) for s, d in result.splits.items()} == {
        "train": sizes["train"] + len(ALL),
        "test": sizes["test"] - len(ALL),
    }
    assert {s: len(d) for s, d in splits.items()} == sizes  # the inputs are untouched
    again = audit_datasets(result.splits, workers=1, dihedral=True)
    assert again.n_leaked_groups == 0
    # A plain clean leaves the turned copies behind.
    plain = clean_datasets(splits, workers=1, dihedral=False)
    assert audit_datasets(plain.splits, workers=1, dihedral=True).n_leaked_groups == len(TURNED)
    with pytest.raises(TypeError, match="apply only when report is not given"):
        clean_datasets(splits, report=result.report, dihedral=True)


def test_leak_free_random_split_keeps_turned_copies_together(root: Path) -> None:
    dataset = ImageFolder(str(root))  # classes "test" and "train"
    position = {rel(root, path): i for i, (path, _) in enumerate(dataset.samples)}
    parts = leak_free_random_split(
        dataset, [0.5, 0.5], torch.Generator().manual_seed(0), workers=1, dihedral=True
    )
    assert parts.report.parameters["dihedral"] is True
    assert parts.report.table["group_id"].value_counts().max() == 2
    assert (parts.report.table["group_id"].value_counts() == 2).sum() == len(ALL)
    side = {i: k for k, part in enumerate(parts) for i in part.indices}
    for group in ALL:
        assert len({side[position[p]] for p in group}) == 1


def test_threshold_rules_through_torchvision(root: Path) -> None:
    core = audit_splits(
        {s: root / s for s in SPLITS}, workers=1, threshold=STRICT_TEST, dihedral=False
    )
    name = by_position(root, {s: files(root, s) for s in SPLITS})
    core_groups = {frozenset(rel(root, p) for p in g) for g in _core_groups(core)}
    assert core_groups != PLAIN  # the rule changes the outcome
    generic = {s: InMemory(files(root, s), "bytes") for s in SPLITS}
    for splits in (folders(root), generic):
        report = audit_datasets(splits, workers=1, threshold=STRICT_TEST, dihedral=False)
        assert leaked(report, name) == core_groups
        assert report.table["threshold"].tolist() == core.table["threshold"].tolist()
        assert set(report.table.loc[report.table["split"] == "test", "threshold"]) == {0}
        assert report.parameters["threshold"] == STRICT_TEST
    # With dihedral matching too, and by path pattern in a one-split random split.
    turned = audit_datasets(folders(root), workers=1, threshold=STRICT_TEST, dihedral=True)
    core_turned = audit_splits(
        {s: root / s for s in SPLITS}, workers=1, threshold=STRICT_TEST, dihedral=True
    )
    assert turned.table["group_id"].tolist() == core_turned.table["group_id"].tolist()
    parts = leak_free_random_split(
        ImageFolder(str(root)),
        [0.5, 0.5],
        torch.Generator().manual_seed(0),
        workers=1,
        threshold={"test/*": 0, "*": 8},
        dihedral=True,
    )
    table = parts.report.table
    is_test = table["path"].map(lambda p: rel(root, p).startswith("test/"))
    assert set(table.loc[is_test, "threshold"]) == {0}
    assert set(table.loc[~is_test, "threshold"]) == {8}


def _core_groups(report: Any) -> set[frozenset[str]]:
    table = report.table
    return {
        frozenset(table.loc[table["group_id"] == g, "path"])
        for g in report.leaked_groups["group_id"]
    }


# ------------------------------------------------------------------ Hugging Face


@pytest.mark.parametrize("kind", ["files", "bytes"])
def test_dataset_dict_finds_exactly_the_turned_copies(root: Path, kind: str) -> None:
    dd = hf_splits(root, kind)
    turned = audit_dataset_dict(dd, progress=False, dihedral=True, batch_size=4)
    plain = audit_dataset_dict(dd, progress=False, dihedral=False)
    assert leaked(turned, hf_names(root)) == ALL
    assert leaked(plain, hf_names(root)) == PLAIN
    assert turned.parameters["dihedral"] is True and "dihedral" not in plain.parameters
    entries = turned.orientations
    assert entries is not None and (np.diff(entries.owner) >= 0).all()
    assert set(entries.owner.tolist()) == set(range(len(turned.table)))


def test_hash_dataset_orientation_columns(root: Path) -> None:
    dd = hf_splits(root, "bytes")
    hashed = hash_dataset(dd["test"], progress=False, dihedral=True, batch_size=3)
    assert hashed.features["orientation_phash"] == datasets.Sequence(datasets.Value("uint64"))
    assert "orientation_phash" not in hash_dataset(dd["test"], progress=False).column_names
    direct = hash_sources(
        [str(p) for p in files(root, "test")], workers=1, dihedral=True
    ).orientations
    assert direct is not None
    rows = hashed["orientation_phash"][:]
    assert [len(r) for r in rows] == np.bincount(direct.owner, minlength=len(rows)).tolist()
    assert [h for r in rows for h in r] == direct.phash.tolist()
    assert [h for r in hashed["orientation_dhash"][:] for h in r] == direct.dhash.tolist()
    assert max(h for r in rows for h in r) > 2**63  # the full 64-bit range survives


@pytest.mark.parametrize("policy", ["move", "drop"])
def test_clean_dataset_dict_with_dihedral_is_leak_free_on_reaudit(root: Path, policy: str) -> None:
    dd = hf_splits(root, "files")
    result = clean_dataset_dict(dd, progress=False, dihedral=True, policy=policy)
    assert result.report.parameters["dihedral"] is True
    assert len(result.moves) == len(ALL)
    assert result.splits["test"].num_rows == dd["test"].num_rows - len(ALL)
    again = audit_dataset_dict(result.splits, progress=False, dihedral=True)
    assert again.n_leaked_groups == 0


def test_leak_free_split_keeps_turned_copies_together(root: Path) -> None:
    dd = hf_splits(root, "bytes")
    whole = datasets.concatenate_datasets([dd["train"], dd["test"]])
    names = [f"train/{rel(root / 'train', p)}" for p in files(root, "train")]
    names += [f"test/{rel(root / 'test', p)}" for p in files(root, "test")]
    result = leak_free_split(
        whole, {"train": 0.5, "test": 0.5}, seed=0, progress=False, dihedral=True
    )
    assert result.report.parameters["dihedral"] is True
    assigned = dict(zip(names, result.report.table["assigned_split"], strict=True))
    for group in ALL:
        assert len({assigned[p] for p in group}) == 1
    ruled = leak_free_split(
        whole, {"train": 0.5, "test": 0.5}, seed=0, progress=False, threshold={"dataset": 4}
    )
    assert set(ruled.report.table["threshold"]) == {4}


def test_threshold_rules_through_huggingface(root: Path) -> None:
    core = audit_splits(
        {s: root / s for s in SPLITS}, workers=1, threshold=STRICT_TEST, dihedral=False
    )
    expected = {frozenset(rel(root, p) for p in g) for g in _core_groups(core)}
    for kind in ("files", "bytes"):
        report = audit_dataset_dict(
            hf_splits(root, kind), progress=False, threshold=STRICT_TEST, dihedral=False
        )
        assert leaked(report, hf_names(root)) == expected
        assert report.table["threshold"].tolist() == core.table["threshold"].tolist()
        assert report.parameters["threshold"] == STRICT_TEST
    core_turned = audit_splits(
        {s: root / s for s in SPLITS}, workers=1, threshold=STRICT_TEST, dihedral=True
    )
    turned = audit_dataset_dict(
        hf_splits(root, "files"), progress=False, threshold=STRICT_TEST, dihedral=True
    )
    assert turned.table["group_id"].tolist() == core_turned.table["group_id"].tolist()


def test_map_cache_is_never_shared_between_plain_and_dihedral(root: Path, tmp_path: Path) -> None:
    hf_splits(root, "bytes").save_to_disk(str(tmp_path / "dd"))
    disk = load_from_disk(str(tmp_path / "dd"))
    name = hf_names(root)

    def cache_files() -> set[Path]:
        return set((tmp_path / "dd").rglob("cache-*.arrow"))

    plain = audit_dataset_dict(disk, progress=False, dihedral=False)
    after_plain = cache_files()
    assert len(after_plain) == 2
    turned = audit_dataset_dict(disk, progress=False, dihedral=True)
    after_turned = cache_files()
    assert len(after_turned) == 4  # a map of its own, not the plain run's
    assert leaked(plain, name) == PLAIN
    assert leaked(turned, name) == ALL
    # Both caches are then reused, each by its own kind of run.
    reopened = load_from_disk(str(tmp_path / "dd"))
    mtimes = {p: p.stat().st_mtime_ns for p in after_turned}
    assert leaked(audit_dataset_dict(reopened, progress=False, dihedral=False), name) == PLAIN
    assert leaked(audit_dataset_dict(reopened, progress=False, dihedral=True), name) == ALL
    assert {p: p.stat().st_mtime_ns for p in cache_files()} == mtimes
    first = hash_dataset(reopened["test"], progress=False, dihedral=True)
    assert "orientation_phash" in first.column_names
    assert "orientation_phash" not in hash_dataset(reopened["test"], progress=False).column_names


# ------------------------------------------------------------------------- guard


def test_guard_raises_on_a_turned_leak(root: Path) -> None:
    train_paths, test_paths = files(root, "train"), files(root, "test")
    turned_only = [i for i, p in enumerate(test_paths) if p.stem.split("_")[0] in _turn_names()]
    splits = folders(root)
    checked = {"train": splits["train"], "test": Subset(splits["test"], turned_only)}
    assert assert_no_leakage(checked, workers=1, dihedral=False).n_leaked_groups == 0
    with pytest.raises(LeakageError) as caught:
        assert_no_leakage(checked, workers=1, dihedral=True)
    assert caught.value.report.n_leaked_groups == len(TURNED)
    assert caught.value.report.parameters["dihedral"] is True
    # The same through Hugging Face and through plain path lists.
    dd = hf_splits(root, "bytes")
    hf = DatasetDict({"train": dd["train"], "test": dd["test"].select(turned_only)})
    assert_no_leakage(hf, progress=False, dihedral=False)
    with pytest.raises(LeakageError):
        assert_no_leakage(hf, progress=False, dihedral=True)
    lists = {"train": train_paths, "test": [test_paths[i] for i in turned_only]}
    assert_no_leakage(lists, workers=1, dihedral=False)
    with pytest.raises(LeakageError) as caught:
        assert_no_leakage(lists, workers=1, dihedral=True, threshold={"test": 8, "*": 8})
    assert set(caught.value.report.table["threshold"]) == {8}


def _turn_names() -> set[str]:
    return {name for name, _ in TURNS.values()}


def test_guard_threshold_rules(root: Path) -> None:
    with pytest.raises(LeakageError) as caught:
        assert_no_leakage(folders(root), workers=1, threshold=STRICT_TEST, dihedral=False)
    table = caught.value.report.table
    assert set(table.loc[table["split"] == "test", "threshold"]) == {0}
    assert caught.value.report.parameters["threshold"] == STRICT_TEST


# -------------------------------------------------------------------- validation


def _entry_points(root: Path) -> list[Callable[..., Any]]:
    splits = folders(root)
    dd = hf_splits(root, "bytes")
    return [
        lambda **kw: audit_datasets(splits, **kw),
        lambda **kw: clean_datasets(splits, **kw),
        lambda **kw: leak_free_random_split(splits["train"], [0.5, 0.5], **kw),
        lambda **kw: audit_dataset_dict(dd, **kw),
        lambda **kw: clean_dataset_dict(dd, **kw),
        lambda **kw: leak_free_split(dd["train"], {"a": 0.5, "b": 0.5}, **kw),
        lambda **kw: assert_no_leakage(splits, **kw),
        lambda **kw: assert_no_leakage(dd, **kw),
        lambda **kw: assert_no_leakage({s: root / s for s in SPLITS}, **kw),
    ]


def test_every_entry_point_validates_dihedral_and_threshold(root: Path) -> None:
    for call in _entry_points(root):
        with pytest.raises(TypeError, match=r"dihedral must be a bool; got 'yes'\."):
            call(dihedral="yes")
        with pytest.raises(TypeError, match=r"dihedral must be a bool; got 1\."):
            call(dihedral=1)
        with pytest.raises(ValueError, match=r"threshold\['test'\] must be an int in \[0, 64\]"):
            call(threshold={"test": 70})
        with pytest.raises(ValueError, match="threshold must not be an empty mapping"):
            call(threshold={})
    with pytest.raises(TypeError, match=r"dihedral must be a bool"):
        hash_dataset(hf_splits(root, "bytes")["test"], dihedral=None)
    report = audit_datasets(folders(root), workers=1, dihedral=False)
    with pytest.raises(TypeError, match="cannot apply to a report"):
        assert_no_leakage(report, dihedral=False)
    with pytest.raises(TypeError, match="cannot apply to a report"):
        assert_no_leakage(report, threshold=4, dihedral=False)
