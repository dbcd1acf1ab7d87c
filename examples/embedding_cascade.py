"""The hash -> embedding cascade on a generated dataset (no download, no weights).

Builds the demo dataset, adds two mirror images of training photos to the test
split (which no plain hash catches), audits with hashes only, then again with
the embedding stage, and prints which stage linked each cross-split pair.

The "model" here is a deterministic feature function that a horizontal flip
cannot change (the picture averaged with its mirror image), so the example runs
anywhere. With real weights, pass a copy-detection model instead, e.g.
``EmbeddingStage(embed=torch.jit.load("sscd_disc_mixup.torchscript.pt"),
transform=preprocess, similarity=0.75)``; see :mod:`leakaudit.embedding`.

Run: python examples/embedding_cascade.py
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageOps

from leakaudit import audit_splits
from leakaudit.demo import build_demo_dataset
from leakaudit.embedding import EmbeddingStage
from leakaudit.export import pair_table


def mirror_invariant_features(images: list[Image.Image]) -> NDArray[np.float64]:
    """One vector per image: a 32x32 thumbnail plus its mirror image, centred."""
    vectors = []
    for image in images:
        pixels = np.asarray(image.resize((32, 32), Image.Resampling.BILINEAR), np.float64)
        symmetric = pixels + pixels[:, ::-1]
        vectors.append((symmetric - symmetric.mean(axis=(0, 1))).ravel())
    return np.stack(vectors)


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="leakaudit-embedding-"))
    demo = build_demo_dataset(root)
    for name in ("train_005.jpg", "train_006.jpg"):
        source = next((root / "train").rglob(name))
        with Image.open(source) as image:
            ImageOps.mirror(image).save(root / "test" / "cat" / f"mirrored_{name}", quality=90)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the demo's corrupt file is reported in the table
        # Plain hashes (no dihedral matching, no verification), to show what the
        # embedding stage adds: the default audit finds mirrored copies by itself.
        plain = {"dihedral": False, "verify": False}
        hashes_only = audit_splits(demo.splits, cache=False, progress=False, **plain)
        stage = EmbeddingStage(embed=mirror_invariant_features, similarity=0.9, batch_size=32)
        cascade = audit_splits(demo.splits, cache=False, progress=False, embedding=stage, **plain)

    print(f"hashes only: {hashes_only.n_leaked_groups} leaked group(s)")
    print(
        f"with the embedding stage: {cascade.n_leaked_groups} leaked group(s); "
        f"{cascade.parameters['embedded_images']} of {cascade.total_images} images embedded"
    )
    print()
    print(cascade)
    print()
    pairs = pair_table(cascade)
    print("Which stage linked each cross-split pair:")
    for row in pairs.itertuples(index=False):
        similarity = "" if np.isnan(row.similarity) else f", cosine {row.similarity:.3f}"
        print(
            f"  {row.stage:<12} {Path(row.path_a).relative_to(root)} ~ "
            f"{Path(row.path_b).relative_to(root)} (distance {row.distance}{similarity})"
        )
    missed = {"embedding"} - set(pairs["stage"])
    if missed or cascade.n_leaked_groups <= hashes_only.n_leaked_groups:
        raise SystemExit("the embedding stage did not find the mirrored copies")


if __name__ == "__main__":
    main()
