"""The Ray Data adapter on a local 2-CPU Ray cluster: the same audit as the plain core path.

A few thousand generated images with planted cross-split near-duplicates (re-encodes,
resizes, byte copies, mirror images, crops, blank images and their byte copies) and
broken files go through Ray and through :func:`leakaudit.audit.audit_sources`; the
reports must be identical.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import imagegen
import numpy as np
import pandas as pd
import pytest
from PIL import Image

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

from leakaudit.adapters.ray import (  # noqa: E402
    audit_ray_dataset,
    clean_ray_dataset,
    hash_ray_dataset,
    leak_free_ray_splits,
    relabel_ray_dataset,
    write_hash_shards,
)
from leakaudit.audit import audit_sources, hashing_options, wants_crop_entries  # noqa: E402
from leakaudit.cleaning import clean_splits  # noqa: E402
from leakaudit.errors import ImageLoadError  # noqa: E402
from leakaudit.hashing import UnreadableImageWarning, hash_sources  # noqa: E402
from leakaudit.shards import HashShards, audit_hash_shards, read_hash_shards  # noqa: E402

N_ORIGINALS = 2000
SIZE = (96, 72)


def _ray_processes() -> list[str]:
    """Ray's processes that are descendants of this one (Linux; empty elsewhere)."""
    if not os.path.isdir("/proc"):
        return []
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as file:
                stat = file.read()
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                names[int(entry)] = file.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    me = os.getpid()
    found = []
    for pid, name in names.items():
        ancestor = parents.get(pid)
        while ancestor and ancestor != me:
            ancestor = parents.get(ancestor)
        # Our own pools' forkserver and resource tracker carry Ray's sys.path entries
        # in their command line once Ray is imported: they are not Ray's.
        if ancestor == me and "ray" in name and "from multiprocessing." not in name:
            found.append(f"{pid} {name[:80]}")
    return found


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A local Ray cluster of 2 CPUs for this module, shut down (every process) after.

    Module scope: the tests after this module must not run beside Ray's processes
    (test_resources kills a pool worker it finds among this process's descendants).
    """
    if ray.is_initialized():  # pragma: no cover - never in this suite
        pytest.skip("a Ray cluster is already running in this process")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        logging_level="ERROR",
    )
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    try:
        yield
    finally:
        ray.shutdown()
        deadline = time.monotonic() + 30
        while _ray_processes() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _ray_processes() == [], "Ray left processes running"


# --------------------------------------------------------------------------- data


def _jpeg(image: Image.Image, quality: int = 90) -> bytes:
    return imagegen.encode(image.convert("RGB"), "JPEG", quality=quality)


def build_dataset(root: Path) -> tuple[list[str], list[str], list[tuple[int, int]]]:
    """Paths, splits and the planted cross-split pairs (as row pairs)."""
    paths: list[str] = []
    splits: list[str] = []
    planted: list[tuple[int, int]] = []

    def add(split: str, name: str, data: bytes) -> int:
        path = root / split / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append(str(path))
        splits.append(split)
        return len(paths) - 1

    originals = [_jpeg(imagegen.photo_like(seed, SIZE)) for seed in range(N_ORIGINALS)]
    rows = [
        add(("train", "val", "test")[i % 3], f"img_{i:05d}.jpg", d) for i, d in enumerate(originals)
    ]

    def copy_of(i: int, split: str, name: str, data: bytes) -> None:
        planted.append((rows[i], add(split, name, data)))

    for k in range(30):  # train originals (i % 3 == 0) copied into val and test
        i = 3 * k
        image = imagegen.photo_like(i, SIZE)
        copy_of(i, "val", f"reencoded_{i}.jpg", _jpeg(image, quality=45))
        copy_of(
            i + 3 * 30,
            "test",
            f"resized_{i}.png",
            imagegen.encode(imagegen.photo_like(i + 3 * 30, SIZE).resize((72, 54)), "PNG"),
        )
        copy_of(i + 3 * 60, "test", f"bytecopy_{i}.jpg", originals[i + 3 * 60])
        flipped = imagegen.photo_like(i + 3 * 90, SIZE).transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        copy_of(i + 3 * 90, "val", f"mirror_{i}.jpg", _jpeg(flipped))
        big = imagegen.photo_like(i + 3 * 120, (192, 144))
        crop = big.crop((10, 7, 182, 137)).resize(SIZE)
        # crops are reached by the candidate net and verification, not always: not "planted"
        add("train", f"big_{i}.jpg", _jpeg(big))
        add("test", f"crop_{i}.jpg", _jpeg(crop))
    blank = imagegen.encode(Image.new("RGB", (64, 48), (240, 240, 240)), "PNG")
    planted.append((add("train", "blank.png", blank), add("test", "blank_copy.png", blank)))
    add("val", "other_blank.png", imagegen.encode(Image.new("RGB", (64, 48), (10, 10, 10)), "PNG"))
    add("test", "truncated.jpg", imagegen.truncated(originals[7], 0.3))
    add("val", "not_an_image.jpg", b"this is not an image")
    add("train", "empty.png", b"")
    return paths, splits, planted


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str], list[Any]]:
    return build_dataset(tmp_path_factory.mktemp("ray-images"))


def _plain(sources: list[Any], splits: list[str], **options: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableImageWarning)
        return audit_sources(sources, splits, workers=1, cache=False, **options)


def _through_ray(ds: Any, **options: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableImageWarning)
        return audit_ray_dataset(ds, **options)


def assert_same_report(plain: Any, other: Any, *, ignore: tuple[str, ...] = ()) -> None:
    drop = ["id", *ignore]
    pd.testing.assert_frame_equal(
        plain.table.drop(columns=[c for c in drop if c in plain.table.columns]),
        other.table.drop(columns=[c for c in drop if c in other.table.columns]),
    )
    pd.testing.assert_frame_equal(plain.leaked_groups, other.leaked_groups)
    if plain.edges is None:
        assert other.edges is None
    else:
        pd.testing.assert_frame_equal(plain.edges, other.edges)
    for name in ("n_leaked_images", "total_images", "n_within_split_groups", "n_unreadable",
                 "n_low_information"):  # fmt: skip
        assert getattr(plain, name) == getattr(other, name), name
    pd.testing.assert_series_equal(plain.images_by_split, other.images_by_split)
    pd.testing.assert_series_equal(plain.pct_leaked_by_split, other.pct_leaked_by_split)
    assert plain.parameters == other.parameters
    assert plain.to_text() == other.to_text() or ignore


def _groups(report: Any, key: str = "path") -> set[frozenset[str]]:
    table = report.table
    return {
        frozenset(members[key].astype(str))
        for _, members in table.groupby("group_id")
        if len(members) > 1
    }


@pytest.fixture(scope="module")
def plain_paths(dataset: Any) -> Any:
    paths, splits, _ = dataset
    return _plain(paths, splits)


@pytest.fixture(scope="module")
def ray_paths(
    ray_cluster: None, dataset: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Any, Any, Path]:
    paths, splits, _ = dataset
    ds = ray.data.from_items(
        [
            {"image": p, "split": s, "label": i % 7}
            for i, (p, s) in enumerate(zip(paths, splits, strict=True))
        ],
        override_num_blocks=8,
    )
    folder = tmp_path_factory.mktemp("ray-shards") / "hashes"
    return ds, _through_ray(ds, hashes_out=folder), folder


# -------------------------------------------------------------------------- tests


def test_paths_through_ray_equal_the_plain_audit(
    ray_paths: tuple[Any, Any, Path], plain_paths: Any, dataset: Any
) -> None:
    _, report, _ = ray_paths
    assert_same_report(plain_paths, report)
    assert report.table["id"].tolist() == report.table["path"].tolist()
    # the planted pairs are found (each pair in one group), and nothing is lost
    _, _, planted = dataset
    group = report.table["group_id"].to_numpy()
    assert all(group[a] == group[b] for a, b in planted)
    assert report.n_unreadable == 3 and report.parameters["verification"]["verified"] > 0


def test_shards_written_through_ray_group_the_same(
    ray_paths: tuple[Any, Any, Path], plain_paths: Any
) -> None:
    _, report, folder = ray_paths
    shards = read_hash_shards(folder)
    assert len(shards) == report.total_images and len(shards.files) >= 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableImageWarning)
        # The shards' paths are data: images are read only under a root the user names.
        root = os.path.commonpath(plain_paths.table["path"].astype(str).tolist())
        grouped = audit_hash_shards(folder, images_root=root)
    # Ray's file order is its own: the same groups and figures, rows in another order
    assert _groups(grouped) == _groups(plain_paths)
    for name in ("n_leaked_images", "n_leaked_groups", "n_within_split_groups", "n_unreadable"):
        assert getattr(grouped, name) == getattr(plain_paths, name), name
    pd.testing.assert_series_equal(
        grouped.leaked_by_split.sort_index(), plain_paths.leaked_by_split.sort_index()
    )
    by_path = grouped.table.set_index("path").loc[plain_paths.table["path"]]
    for column in ("phash", "dhash", "digest", "error", "low_information"):
        assert by_path[column].tolist() == plain_paths.table[column].tolist(), column


def test_bytes_through_ray_equal_the_plain_audit(ray_cluster: None, dataset: Any) -> None:
    paths, splits, _ = dataset
    data = [Path(p).read_bytes() for p in paths]
    ds = ray.data.from_items(
        [
            {"id": f"row-{i}", "split": s, "image": d}
            for i, (d, s) in enumerate(zip(data, splits, strict=True))
        ],
        override_num_blocks=6,
    )
    report = _through_ray(ds)
    plain = _plain(data, splits)
    # in-memory images: the plain audit names them "<bytes #i>", Ray by their ids
    assert_same_report(plain, report, ignore=("path",))
    assert report.table["path"].tolist() == [f"row-{i}" for i in range(len(data))]
    assert report.parameters["verification"]["unverifiable"] == 0  # candidates were fetched
    # the byte copies are told from re-encodes, as in the plain audit
    assert report.table["digest"].notna().sum() == plain.table["digest"].notna().sum() > 0


def test_arrays_through_ray_equal_the_plain_audit(ray_cluster: None) -> None:
    images = [imagegen.photo_like(seed, SIZE) for seed in range(60)]
    images += [images[k].resize((80, 60)) for k in range(10)]  # different shape: ragged tensors
    images += [images[k].transpose(Image.Transpose.FLIP_TOP_BOTTOM) for k in range(10, 15)]
    images.append(Image.new("RGB", SIZE, (128, 128, 128)))
    images.append(Image.new("RGB", SIZE, (128, 128, 128)))
    splits = [("train", "test")[i % 2] for i in range(len(images))]
    arrays = [np.asarray(image) for image in images]
    arrays.append(np.zeros((4, 4, 2), dtype=np.uint8))
    splits.append("test")
    ds = ray.data.from_items(
        [
            {"id": i, "split": s, "image": a}
            for i, (a, s) in enumerate(zip(arrays, splits, strict=True))
        ],
        override_num_blocks=4,
    )
    report = _through_ray(ds)
    plain = _plain([*images, b"not an image"], splits)
    assert_same_report(plain, report, ignore=("path", "error"))
    assert report.table["error"].iloc[-1].startswith("unsupported image array of shape (4, 4, 2)")
    assert report.table["id"].tolist() == [str(i) for i in range(len(arrays))]


def test_bad_files_are_recorded_rows_and_named(
    ray_cluster: None, ray_paths: tuple[Any, Any, Path], plain_paths: Any
) -> None:
    ds, report, _ = ray_paths
    bad = report.table[report.table["error"].notna()]
    assert sorted(Path(p).name for p in bad["path"]) == [
        "empty.png",
        "not_an_image.jpg",
        "truncated.jpg",
    ]
    assert bad["error"].tolist() == plain_paths.table.loc[bad.index, "error"].tolist()
    small = ds.filter(lambda row: "truncated" in row["image"] or "img_0000" in row["image"])
    with pytest.warns(UnreadableImageWarning, match=r"truncated\.jpg \(truncated"):
        audit_ray_dataset(small)
    with pytest.raises(ImageLoadError, match=r"truncated\.jpg"):
        audit_ray_dataset(small, on_error="raise")


def test_hash_rows_are_the_cores_hashes(ray_cluster: None, dataset: Any) -> None:
    paths, _, _ = dataset
    some = paths[:40] + paths[-4:]
    ds = ray.data.from_items([{"image": p, "split": "x"} for p in some], override_num_blocks=3)
    hashed = hash_ray_dataset(ds, concurrency=1, batch_size=7)
    shards = HashShards.from_arrow(ray.get(hashed.to_arrow_refs()))
    core = hash_sources(
        some, decode=hashing_options(None, dihedral=True, verify="auto"), dihedral=True,
        crop_entries=wants_crop_entries(dihedral=True, verify="auto"),
        workers=1, on_error="ignore",
    )  # fmt: skip
    order = pd.Index(shards.ids).get_indexer(some)  # Ray's row order is its own here
    assert (order >= 0).all()
    table = shards.hash_table()
    for name in ("phash", "dhash", "valid", "low_information", "digest"):
        np.testing.assert_array_equal(getattr(table, name)[order], getattr(core, name), name)
    assert {some[k]: reason for k, reason in core.errors.items()} == {
        str(shards.ids[row]): reason for row, reason in shards.errors.items()
    }
    for position, row in enumerate(order.tolist()):
        mine, theirs = table.orientations.of_row(row), core.orientations.of_row(position)
        assert mine[0].tolist() == theirs[0].tolist() and mine[1].tolist() == theirs[1].tolist()


@pytest.mark.parametrize("policy", ["move", "drop"])
def test_clean_ray_dataset(
    ray_cluster: None, ray_paths: tuple[Any, Any, Path], policy: str
) -> None:
    ds, report, _ = ray_paths
    result = clean_ray_dataset(ds, report, policy=policy, record_column="original_split")
    plan = clean_splits(report.table, policy=policy)
    assert list(result.splits) == [str(s) for s in report.images_by_split.index]
    groups = report.table.set_index("id")["group_id"]
    seen: dict[int, str] = {}
    total = 0
    for name, part in result.splits.items():
        rows = part.to_pandas()
        total += len(rows)
        assert set(rows.columns) == {"image", "split", "label", "original_split"}
        assert (rows["split"] == name).all()
        assert set(rows["image"]) == set(plan.loc[plan["split"] == name, "id"])
        for group in groups.loc[rows["image"]]:
            assert seen.setdefault(int(group), name) == name  # no group spans two splits
        moved = rows[rows["original_split"] != name]
        assert set(moved["image"]) <= set(result.moves["id"])
    assert total == len(report.table) - result.n_dropped
    if policy == "move":
        assert result.n_moved == int(plan["reassigned"].sum()) > 0 and result.n_dropped == 0
    else:
        assert result.n_dropped == int(plan["dropped"].sum()) > 0 and result.n_moved == 0
    # the other columns ride along untouched
    relabelled = relabel_ray_dataset(ds, report, policy=policy).to_pandas().set_index("image")
    original = ds.to_pandas().set_index("image")
    assert (relabelled["label"] == original.loc[relabelled.index, "label"]).all()


def test_verify_false_and_concurrency_give_the_plain_result(
    ray_cluster: None, dataset: Any
) -> None:
    paths, splits, _ = dataset
    some = paths[:300] + paths[N_ORIGINALS:]
    labels = splits[:300] + splits[N_ORIGINALS:]
    ds = ray.data.from_items(
        [{"image": p, "split": s} for p, s in zip(some, labels, strict=True)], override_num_blocks=5
    )
    report = _through_ray(ds, verify=False, concurrency=1, batch_size=16)
    assert_same_report(_plain(some, labels, verify=False), report)
    assert "verification" not in report.parameters


def test_argument_errors(ray_cluster: None, tmp_path: Path) -> None:
    ds = ray.data.from_items([{"image": b"x", "split": "train"}])
    with pytest.raises(ValueError, match="needs an id"):
        audit_ray_dataset(ds)
    with pytest.raises(
        ValueError, match=r"image_column must name a column of the dataset \(image, split\)"
    ):
        audit_ray_dataset(ds, image_column="img")
    with pytest.raises(TypeError, match=r"ds must be a ray\.data\.Dataset"):
        audit_ray_dataset([{"image": b"x"}])
    floats = ray.data.from_items([{"image": b"x", "split": "train", "id": 1.5}])
    with pytest.raises(ValueError, match="must hold strings or integers"):
        audit_ray_dataset(floats)
    twice = ray.data.from_items(
        [{"image": b"x", "split": "train", "id": "a"}, {"image": b"y", "split": "test", "id": "a"}]
    )
    with pytest.raises(ValueError, match="ids must be unique"):
        audit_ray_dataset(twice, on_error="ignore")
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "old.parquet").write_bytes(b"keep")
    with pytest.raises(FileExistsError, match="already holds hash shards"):
        audit_ray_dataset(twice, hashes_out=tmp_path / "h")
    with pytest.raises(FileExistsError):
        write_hash_shards(hash_ray_dataset(twice), tmp_path / "h")
    assert (tmp_path / "h" / "old.parquet").read_bytes() == b"keep"
    with pytest.raises(ValueError, match="report must come from audit_ray_dataset"):
        relabel_ray_dataset(twice, _plain([b"x"], ["train"]))
    with pytest.raises(TypeError, match="apply only when report is not given"):
        clean_ray_dataset(twice, _plain([b"x"], ["train"]), threshold=3)


def test_leak_free_ray_splits_is_a_deprecated_alias() -> None:
    """The old name still works, warning with the new one (no cluster needed to see it)."""
    with (
        pytest.warns(DeprecationWarning, match="use clean_ray_dataset"),
        pytest.raises(TypeError, match=r"ds must be a ray\.data\.Dataset"),
    ):
        leak_free_ray_splits([{"image": b"x"}])


def test_empty_dataset(ray_cluster: None) -> None:
    ds = ray.data.from_items([{"image": "a.jpg", "split": "train"}]).filter(lambda row: False)
    report = audit_ray_dataset(ds)
    assert report.total_images == 0 and not report.has_leakage
