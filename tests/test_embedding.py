"""The embedding stage: batching, exact cosine kNN, merging into hash groups, stage attribution."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from PIL import Image, ImageOps

from leakaudit import audit_sources, audit_splits
from leakaudit.demo import photo_like_image
from leakaudit.embedding import (
    EmbeddingStage,
    cosine_neighbour_pairs,
    embed_images,
    embedding_rows,
)
from leakaudit.export import PAIR_COLUMNS, PAIR_KIND_COLUMN, pair_table
from leakaudit.hashing import hash_sources

HAS_FAISS = importlib.util.find_spec("faiss") is not None
NO_FAISS = pytest.mark.skipif(not HAS_FAISS, reason="faiss-cpu is not installed")
BACKENDS = ["numpy", pytest.param("faiss", marks=NO_FAISS)]


def mirror_invariant(images: list[Image.Image]) -> NDArray[np.float64]:
    """A deterministic feature a horizontal flip cannot change: the image plus its mirror."""
    out = []
    for image in images:
        pixels = np.asarray(image.resize((32, 32), Image.Resampling.BILINEAR), np.float64)
        symmetric = pixels + pixels[:, ::-1]
        out.append((symmetric - symmetric.mean(axis=(0, 1))).ravel())
    return np.stack(out)


def brute_force_pairs(
    vectors: NDArray[np.float64], similarity: float, k: int | None
) -> set[tuple[int, int]]:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = unit @ unit.T
    np.fill_diagonal(cosine, -np.inf)
    found = set()
    for i in range(len(vectors)):
        order = np.argsort(-cosine[i], kind="stable")
        neighbours = order if k is None else order[:k]
        for j in neighbours:
            if cosine[i, j] >= similarity:
                found.add((min(i, int(j)), max(i, int(j))))
    return found


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", [1, 5, None])
def test_knn_is_exact_against_brute_force(backend: str, k: int | None) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(300, 8))
    # Plant a few near-copies so that high thresholds find something too.
    vectors[250:] = vectors[:50] + rng.normal(scale=0.05, size=(50, 8))
    for similarity in (0.6, 0.95):
        pairs, sims = cosine_neighbour_pairs(vectors, similarity=similarity, k=k, backend=backend)
        assert {tuple(p) for p in pairs.tolist()} == brute_force_pairs(vectors, similarity, k)
        assert (pairs[:, 0] < pairs[:, 1]).all() and (sims >= similarity).all()
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        expected = (unit[pairs[:, 0]] * unit[pairs[:, 1]]).sum(axis=1)
        np.testing.assert_allclose(sims, expected, atol=1e-5)


def test_numpy_search_spans_blocks_exactly() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(1100, 4))  # more rows than one block of the matrix product
    pairs, _ = cosine_neighbour_pairs(vectors, similarity=0.97, k=3, backend="numpy")
    assert {tuple(p) for p in pairs.tolist()} == brute_force_pairs(vectors, 0.97, 3)


def test_zero_vectors_and_tiny_inputs_never_link() -> None:
    pairs, _ = cosine_neighbour_pairs(np.zeros((3, 4)), similarity=0.0, backend="numpy")
    assert pairs.shape == (0, 2)
    pairs, _ = cosine_neighbour_pairs(np.ones((1, 4)), similarity=0.5)
    assert pairs.shape == (0, 2)


def test_callable_is_called_in_batches() -> None:
    sizes: list[int] = []

    def embed(images: list[Image.Image]) -> NDArray[np.float64]:
        sizes.append(len(images))
        assert all(image.mode == "RGB" for image in images)
        return mirror_invariant(images)

    images = [photo_like_image(seed, (48, 36)) for seed in range(10)]
    vectors, ok = embed_images(images, embed, batch_size=4, progress=False)
    assert sizes == [4, 4, 2]
    assert vectors.shape == (10, 32 * 32 * 3) and ok.all()
    np.testing.assert_allclose(vectors, mirror_invariant(images), rtol=1e-5)


def test_unreadable_images_are_skipped_and_bad_outputs_refused(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"not an image")
    good = photo_like_image(1, (48, 36))
    vectors, ok = embed_images([broken, good], mirror_invariant, progress=False)
    assert ok.tolist() == [False, True] and not vectors[0].any()
    with pytest.raises(ValueError, match="shape"):
        embed_images([good, good], lambda images: np.zeros((1, 3)), progress=False)
    with pytest.raises(ValueError, match="non-finite"):
        embed_images([good], lambda images: np.full((1, 3), np.nan), progress=False)


def test_torch_module_runs_batched_without_grad_on_its_device() -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(),
    )
    model.train()  # the wrapper must switch it to eval()
    calls: list[tuple[int, bool, str]] = []
    model.register_forward_hook(
        lambda module, inputs, output: calls.append(
            (inputs[0].shape[0], torch.is_grad_enabled(), inputs[0].device.type)
        )
    )

    def to_tensor(image: Image.Image) -> Any:
        return torch.from_numpy(np.asarray(image, np.float32) / 255).permute(2, 0, 1)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    images = [photo_like_image(seed, (40, 40)) for seed in range(5)]
    vectors, ok = embed_images(images, model, batch_size=2, transform=to_tensor, progress=False)
    assert [c[0] for c in calls] == [2, 2, 1]
    assert not any(c[1] for c in calls) and {c[2] for c in calls} == {device}
    assert not model.training and vectors.shape == (5, 128) and ok.all()
    with torch.no_grad():
        expected = model(torch.stack([to_tensor(i) for i in images]).to(device)).cpu().numpy()
    np.testing.assert_allclose(vectors, expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="transform is required"):
        EmbeddingStage(embed=model)


def test_stage_validates_its_options() -> None:
    with pytest.raises(ValueError, match=r"similarity must be a float in \[-1, 1\]; got 2"):
        EmbeddingStage(embed=mirror_invariant, similarity=2.0)
    with pytest.raises(TypeError, match="embed must be"):
        EmbeddingStage(embed="sscd.pt")
    with pytest.raises(ValueError, match="backend"):
        EmbeddingStage(embed=mirror_invariant, backend="annoy")
    with pytest.raises(TypeError, match="batch_size"):
        EmbeddingStage(embed=mirror_invariant, batch_size=2.5)  # type: ignore[arg-type]


def test_only_ungrouped_embeds_singletons_and_one_representative() -> None:
    labels = np.array([0, 1, 0, 2, 1, 3, 3])
    eligible = np.array([True, True, True, True, True, False, True])
    assert embedding_rows(labels, eligible, only_ungrouped=True).tolist() == [0, 1, 3, 6]
    assert embedding_rows(labels, eligible, only_ungrouped=False).tolist() == [0, 1, 2, 3, 4, 6]


@pytest.fixture()
def splits(tmp_path: Path) -> dict[str, Path]:
    """train: 8 photos; test: a byte copy, a re-encode, a mirror image, 3 unrelated photos."""
    root = tmp_path / "data"
    for name in ("train", "test"):
        (root / name).mkdir(parents=True)
    originals = [photo_like_image(seed) for seed in range(8)]
    for index, image in enumerate(originals):
        image.save(root / "train" / f"t{index}.jpg", quality=92)
    (root / "test" / "byte_copy.jpg").write_bytes((root / "train" / "t0.jpg").read_bytes())
    originals[1].save(root / "test" / "reencoded.jpg", quality=50)
    ImageOps.mirror(originals[2]).save(root / "test" / "mirrored.jpg", quality=92)
    # A mirror image of a photo that the hash already grouped with its re-encode:
    # the embedding stage sees only the group's representative and still joins it.
    ImageOps.mirror(originals[1]).save(root / "test" / "mirrored_of_group.jpg", quality=92)
    for seed in range(100, 103):
        photo_like_image(seed).save(root / "test" / f"other{seed}.jpg", quality=92)
    return {"train": root / "train", "test": root / "test"}


def _stages(pairs: Any) -> dict[str, str]:
    return {Path(b).name: stage for b, stage in zip(pairs["path_b"], pairs["stage"], strict=True)}


def test_hash_only_audit_attributes_exact_bytes_and_hash(splits: dict[str, Path]) -> None:
    report = audit_splits(
        splits, workers=1, cache=False, progress=False, dihedral=False, verify=False
    )
    pairs = pair_table(report)
    assert list(pairs.columns) == [*PAIR_COLUMNS, PAIR_KIND_COLUMN]
    assert _stages(pairs) == {"byte_copy.jpg": "exact bytes", "reencoded.jpg": "hash"}
    assert pairs["similarity"].isna().all()
    assert report.embedding_pairs is None and "embedding" not in report.to_text()


@pytest.mark.parametrize("only_ungrouped", [True, False])
def test_embedding_stage_links_what_the_hash_misses(
    splits: dict[str, Path], only_ungrouped: bool
) -> None:
    sizes: list[int] = []

    def embed(images: list[Image.Image]) -> NDArray[np.float64]:
        sizes.append(len(images))
        return mirror_invariant(images)

    stage = EmbeddingStage(
        embed=embed, similarity=0.9, batch_size=3, only_ungrouped=only_ungrouped, progress=False
    )
    report = audit_splits(
        splits,
        workers=1,
        cache=False,
        progress=False,
        embedding=stage,
        dihedral=False,
        verify=False,
    )
    # 15 images; the hash groups {t0, byte_copy} and {t1, reencoded}: 13 embedded when cheap.
    embedded = 13 if only_ungrouped else 15
    assert sum(sizes) == embedded == report.parameters["embedded_images"]
    assert max(sizes) == 3
    pairs = pair_table(report)
    stages = _stages(pairs)
    assert stages["byte_copy.jpg"] == "exact bytes"
    assert stages["reencoded.jpg"] == "hash"
    assert stages["mirrored.jpg"] == "embedding"
    assert stages["mirrored_of_group.jpg"] in {"embedding", "transitive"}
    assert "embedding" in set(pairs.loc[pairs["path_b"].str.contains("mirrored_of"), "stage"])
    linked = pairs[pairs["stage"] == "embedding"]
    assert (linked["similarity"] >= 0.9).all() and not linked["within_threshold"].any()
    assert not any(name.startswith("other") for name in stages)
    table = report.table
    assert table is not None
    group = dict(zip(table["path"].map(lambda p: Path(p).name), table["group_id"], strict=True))
    assert group["mirrored.jpg"] == group["t2.jpg"]
    assert group["mirrored_of_group.jpg"] == group["reencoded.jpg"] == group["t1.jpg"]
    assert report.n_leaked_groups == 3
    assert "joined by the embedding stage" in report.to_text()
    assert report.parameters["embedding_similarity"] == 0.9


def test_audit_sources_with_in_memory_images() -> None:
    photo = photo_like_image(5)
    images = [photo, photo_like_image(6), ImageOps.mirror(photo), photo_like_image(7)]
    stage = EmbeddingStage(embed=mirror_invariant, similarity=0.9, progress=False)
    report = audit_sources(
        images, ["train", "train", "test", "test"], workers=1, embedding=stage, dihedral=False
    )
    assert report.table is not None
    assert report.table["group_id"].tolist() == [0, 1, 0, 2]
    assert pair_table(report)["stage"].tolist() == ["embedding"]


def test_audit_hash_table_needs_images_for_in_memory_sources() -> None:
    from leakaudit import audit_hash_table

    images = [photo_like_image(5), ImageOps.mirror(photo_like_image(5))]
    table = hash_sources(images, workers=1, progress=False)
    stage = EmbeddingStage(embed=mirror_invariant, progress=False)
    with pytest.raises(ValueError, match="pass them as images="):
        audit_hash_table(table, ["train", "test"], embedding=stage)
    report = audit_hash_table(table, ["train", "test"], embedding=stage, images=images)
    assert report.n_leaked_images == 2


def test_example_runs() -> None:
    script = Path(__file__).resolve().parents[1] / "examples" / "embedding_cascade.py"
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "joined by the embedding stage" in result.stdout
