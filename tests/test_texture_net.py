"""The texture net: copies of low-information images (paper, canvas) found by their grain,
blank and noise images never linked wholesale (issue 36, ``leakaudit/_verify_texture.py``).

The real textures are the low-information pictures of the CI corpus of
``benchmarks/real_corpus.py`` (mypaint-data-extras' papers and canvases), fetched as
``tests/test_metamorphic_real.py`` fetches them; without the corpus those tests skip.
"""

from __future__ import annotations

import io
import itertools
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from leakaudit import audit_splits
from leakaudit._decode import resolve_decode
from leakaudit._verify_texture import (
    PROPOSE_BITS,
    _turns_within,
    candidate_pairs,
    texture_signatures,
    textures_match,
    turned,
)
from leakaudit.hashing import hash_image

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_real  # noqa: E402
import real_corpus  # noqa: E402

COPY_EDITS = ("mirror", "rotate 90", "JPEG q50-95", "grey (alpha kept)", "half size", "WebP q80")


@pytest.fixture(scope="module")
def textures() -> list[tuple[str, Image.Image]]:
    """The CI corpus's low-information pictures (the pHash sees no structure in them)."""
    if os.environ.get("LEAKAUDIT_REAL_CORPUS") == "0":
        pytest.skip("LEAKAUDIT_REAL_CORPUS=0: the real-image corpus is not used")
    try:
        loaded = real_corpus.load_corpus(200, seed=36, ci=True)
    except (RuntimeError, OSError) as error:
        pytest.skip(f"the real-image corpus cannot be fetched here: {error}")
    found = []
    for image in loaded.images:
        if hash_image(image.file).low_information:
            with Image.open(image.file) as opened:
                opened.load()
                found.append((image.id, opened.copy()))
    assert len(found) >= 4, "the CI corpus holds mypaint's low-information papers"
    return found


def _groups(report: object) -> dict[str, int]:
    table = report.table  # type: ignore[attr-defined]
    return dict(zip(table["path"].astype(str), table["group_id"].astype(int), strict=True))


def test_copies_of_real_textures_are_linked(
    textures: list[tuple[str, Image.Image]], tmp_path: Path
) -> None:
    """Mirrored, turned, JPEG q50-95, grey, half-size and WebP copies of real low-information
    textures join their originals' groups (before the texture net: none did, as the
    audit linked low-information images only to byte copies); the originals stay apart."""
    rng = random.Random(36)
    train, test, origin = [], [], {}
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    for k, (_name, image) in enumerate(textures):
        original = tmp_path / "train" / f"{k}.png"
        image.save(original)
        train.append(str(original))
        for edit in COPY_EDITS:
            copy = bench_real.EDITS[edit](image, rng, k)
            assert copy.data is not None
            path = tmp_path / "test" / f"{k}-{edit.split()[0]}{copy.suffix}"
            path.write_bytes(copy.data)
            test.append(str(path))
            origin[str(path)] = str(original)
    report = audit_splits({"train": train, "test": test}, cache=False, progress=False)
    groups = _groups(report)
    assert report.table["low_information"].astype(bool).sum() >= len(train)
    missed = [
        Path(copy).name for copy, original in origin.items() if groups[copy] != groups[original]
    ]
    assert not missed, f"copies of real textures not linked: {missed}"
    assert len({groups[path] for path in train}) == len(train), "two different papers linked"
    edges = report.edges
    assert edges is not None and "texture" in set(edges["stage"])
    texture = edges[edges["stage"] == "texture"]
    assert texture["copy_kind"].str.startswith("texture copy").all()
    assert report.parameters["stages"][-1] == "texture"


def _jpeg(pixels: np.ndarray, quality: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def test_blank_images_are_not_grouped_beyond_identical_pixels(tmp_path: Path) -> None:
    """200 blank images of 4 solid colours, each with its own light noise and JPEG
    re-encoding (and some byte copies), link only where their pixels are identical."""
    rng = np.random.default_rng(0)
    colours = [(250, 250, 250), (20, 20, 20), (200, 30, 30), (90, 140, 200)]
    paths = []
    for k in range(200):
        colour = np.array(colours[k % 4], dtype=float)
        noise = rng.normal(0, 1.5, (80, 96, 1)) if k % 5 else np.zeros((80, 96, 1))
        pixels = np.clip(np.round(colour + noise), 0, 255).astype(np.uint8)
        path = tmp_path / ("train" if k % 2 else "test") / f"{k}.jpg"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(_jpeg(pixels, 75 + k % 4 * 5))
        paths.append(path)
    report = audit_splits(
        {"train": str(tmp_path / "train"), "test": str(tmp_path / "test")},
        cache=False,
        progress=False,
    )
    table = report.table
    assert table["low_information"].astype(bool).all()
    pixels = {str(p): np.asarray(Image.open(p).convert("RGB")).tobytes() for p in paths}
    for _, members in table.groupby("group_id")["path"]:
        assert len({pixels[str(p)] for p in members}) == 1, (
            f"blank images with different pixels grouped: {list(members)[:5]}"
        )
    # The noise-free ones of one colour and quality are byte copies: those still link.
    assert table["group_id"].nunique() < len(table)


def test_different_noise_is_not_linked(tmp_path: Path) -> None:
    """Noise images of one distribution have detail (they enter the net) but no two are
    copies; each image's own mirrored copy is found."""
    rng = np.random.default_rng(1)
    train, test = [], []
    for k in range(40):
        noise = rng.normal(128, 6, (256, 256))
        pixels = np.clip(np.round(noise), 0, 255).astype(np.uint8)
        path = tmp_path / f"noise{k}.png"
        Image.fromarray(pixels).save(path)
        (train if k % 2 else test).append(str(path))
    mirrored = tmp_path / "mirrored.png"
    Image.open(train[0]).transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(mirrored)
    test.append(str(mirrored))
    found = texture_signatures(
        [*train, *test], [*train, *test], np.arange(len(train) + len(test)), resolve_decode(None)
    )
    assert len(found.rows) == len(train) + len(test), "noise is detail, not blank"
    report = audit_splits({"train": train, "test": test}, cache=False, progress=False)
    groups = _groups(report)
    assert groups[str(mirrored)] == groups[train[0]]
    assert len(set(groups.values())) == len(groups) - 1, "different noise images linked"


def _brute_force(hashes: np.ndarray) -> set[tuple[int, int]]:
    out = set()
    for i, j in itertools.combinations(range(len(hashes)), 2):
        one_as_is = [(hashes[i][0], b) for b in hashes[j]] + [(a, hashes[j][0]) for a in hashes[i]]
        distance = min(bin(int(a) ^ int(b)).count("1") for a, b in one_as_is)
        if distance <= PROPOSE_BITS:
            out.add((i, j))
    return out


def test_candidate_search_matches_brute_force() -> None:
    """The exact search finds the pairs a brute-force comparison finds (each image as it is
    against every turn of the other)."""
    rng = np.random.default_rng(2)
    hashes = rng.integers(0, 2**63, size=(150, 8), dtype=np.int64).astype(np.uint64)
    hashes |= rng.integers(0, 2, size=(150, 8), dtype=np.int64).astype(np.uint64) << np.uint64(63)
    for k in range(0, 150, 10):  # plant near copies: a turn's hash with a few bits flipped
        flips = rng.choice(64, size=int(rng.integers(0, PROPOSE_BITS + 4)), replace=False)
        mask = np.uint64(sum(1 << int(f) for f in flips))
        hashes[k + 1, int(rng.integers(8))] = hashes[k, int(rng.integers(8))] ^ mask
    found = {tuple(pair) for pair in candidate_pairs(hashes).tolist()}
    expected = _brute_force(hashes)
    assert found == expected
    assert len(expected) >= 10


def test_turn_found_by_the_hashes_registers_the_pair() -> None:
    """For each turn of a texture, the turns the hashes propose hold the one that maps the
    copy back onto the original (correlation 1)."""
    from leakaudit._verify_texture import _hash

    rng = np.random.default_rng(3)
    unit = rng.normal(size=(64, 64)).astype(np.float32)
    unit = (unit - unit.mean()) / unit.std()
    hashes_a = np.array([_hash(turned(unit, code)) for code in range(8)], dtype=np.uint64)
    for code in range(8):
        copy = np.ascontiguousarray(turned(unit, code))
        hashes_b = np.array([_hash(turned(copy, c)) for c in range(8)], dtype=np.uint64)
        turns = _turns_within(hashes_a, hashes_b)
        correlation, _ = textures_match(unit, copy, turns)
        assert correlation == pytest.approx(1.0, abs=1e-4), (code, turns)
