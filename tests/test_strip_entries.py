"""Strip entries: a 9:16 strip of a 16:9 picture is proposed and verified (issue 24, point 3).

A wide image is also hashed as full-height portrait strips (a tall one as full-width
bands), searched against the as-is entries of the other wide or tall images only, and a
strip match is a partial one: its fine detail decides (RESULTS section 19).
"""

from __future__ import annotations

from pathlib import Path

import imagegen
import numpy as np
import pytest
from PIL import Image

import leakaudit
from leakaudit._verify_judge import strip_offsets
from leakaudit.cache import hash_sources_cached
from leakaudit.hashing import (
    N_EXTRA_ENTRIES,
    STRIP_ASPECT,
    STRIP_GROUP,
    EntryKind,
    entry_kinds,
    hash_image,
    hash_sources,
    strip_boxes,
)

LANDSCAPE = (768, 432)  # 16:9
STRIP_WIDTH = 243  # 9:16 of its height


def _strip(image: Image.Image, left: int) -> Image.Image:
    """A 9:16 strip of ``image`` at ``left``, resized by 1.1 as a phone crop would be."""
    height = image.height
    strip = image.crop((left, 0, left + STRIP_WIDTH, height))
    return strip.resize((round(STRIP_WIDTH * 1.1), round(height * 1.1)), Image.Resampling.LANCZOS)


def _smooth(seed: int, size: tuple[int, int]) -> Image.Image:
    """A picture with no fine detail: a smooth colour field (a sky, a blurred wall)."""
    coarse = np.random.default_rng(seed).integers(0, 256, (3, 4, 3), dtype=np.uint8)
    return Image.fromarray(coarse).resize(size, Image.Resampling.BICUBIC)


def _linked(paths: dict[str, list[str]]) -> set[frozenset[str]]:
    report = leakaudit.audit_splits(paths, cache=False, workers=1)
    assert report.edges is not None
    sources = report.table["path"].tolist()
    return {
        frozenset((Path(sources[a]).name, Path(sources[b]).name))
        for a, b in report.edges[["row_a", "row_b"]].to_numpy().tolist()
    }


def test_wide_and_tall_images_get_strips_in_groups_that_the_layout_tells() -> None:
    assert strip_boxes(32, 32) == [] and strip_boxes(500, 440) == []  # square, 8:7
    assert len(strip_boxes(500, 400)) == 32  # 5:4 (STRIP_MIN_ASPECT 1.2)
    assert len(strip_boxes(400, 300)) == 40  # 4:3
    wide, tall = strip_boxes(1024, 576), strip_boxes(576, 1024)
    assert len(wide) % STRIP_GROUP == 0 and len(wide) == len(tall)
    assert all(box[1] == 0.0 and box[3] == 1.0 for box in wide)
    assert all(box[0] == 0.0 and box[2] == 1.0 for box in tall)
    # Neighbouring strips are at most STRIP_STEP (4%) of a strip's width apart.
    starts = np.array([box[0] for box in wide])
    assert np.diff(starts).max() <= 0.04 * (wide[0][2] - wide[0][0]) + 1e-9
    images = [
        imagegen.photo_like(1, LANDSCAPE),
        imagegen.photo_like(2, (96, 84)),  # 8:7: no strips
        imagegen.photo_like(3, (200, 400)),
    ]
    table = hash_sources(images, dihedral=True, crop_entries=True, workers=1)
    entries = table.orientations
    assert entries is not None
    strips = np.bincount(entries.owner[entries.kind == EntryKind.STRIP], minlength=3)
    assert strips.tolist() == [len(wide), 0, len(strip_boxes(200, 400))]
    # The cache, shards and adapters keep no kinds: the layout must still tell them.
    assert np.array_equal(entries.kind, entry_kinds(entries.owner))
    alone = hash_image(images[0], dihedral=True, crop_entries=True)
    assert list(alone.kinds) == entries.kind[entries.owner == 0].tolist()
    assert len(alone.kinds) > N_EXTRA_ENTRIES + len(wide)
    # Without crop entries (or for square images) nothing changes.
    plain = hash_sources(images, dihedral=True, workers=1).orientations
    assert plain is not None and not (plain.kind == EntryKind.STRIP).any()


def test_the_cache_serves_strip_entries_with_their_kinds(tmp_path: Path) -> None:
    paths = []
    for k, image in enumerate([imagegen.photo_like(4, LANDSCAPE), imagegen.photo_like(5)]):
        path = tmp_path / f"{k}.png"
        image.save(path)
        paths.append(str(path))
    fresh = hash_sources(paths, dihedral=True, crop_entries=True, workers=1).orientations
    for _ in range(2):  # written, then served
        cached = hash_sources_cached(
            paths, cache=tmp_path / "cache", dihedral=True, crop_entries=True, workers=1
        ).orientations
        assert fresh is not None and cached is not None
        assert np.array_equal(cached.kind, fresh.kind)
        assert np.array_equal(cached.phash, fresh.phash)


def test_a_portrait_strip_of_a_landscape_photo_is_linked(tmp_path: Path) -> None:
    landscape = imagegen.textured_photo(11, LANDSCAPE)
    other = imagegen.textured_photo(12, LANDSCAPE)
    (tmp_path / "landscape.png").write_bytes(imagegen.encode(landscape, "PNG"))
    (tmp_path / "other.png").write_bytes(imagegen.encode(other, "PNG"))
    # A re-encoded strip at a position between two strip entries, and a strip of another
    # picture (different content, same shape).
    (tmp_path / "strip.jpg").write_bytes(
        imagegen.encode(_strip(landscape, 301), "JPEG", quality=85)
    )
    (tmp_path / "elsewhere.jpg").write_bytes(
        imagegen.encode(_strip(imagegen.textured_photo(13, LANDSCAPE), 301), "JPEG", quality=85)
    )
    linked = _linked(
        {
            "train": [str(tmp_path / "landscape.png"), str(tmp_path / "other.png")],
            "test": [str(tmp_path / "strip.jpg"), str(tmp_path / "elsewhere.jpg")],
        }
    )
    assert linked == {frozenset(("landscape.png", "strip.jpg"))}


def test_strips_of_a_smooth_picture_are_not_linked(tmp_path: Path) -> None:
    smooth = _smooth(21, LANDSCAPE)
    (tmp_path / "left.jpg").write_bytes(imagegen.encode(_strip(smooth, 0), "JPEG", quality=90))
    (tmp_path / "right.jpg").write_bytes(
        imagegen.encode(_strip(smooth, LANDSCAPE[0] - STRIP_WIDTH), "JPEG", quality=90)
    )
    # Nor a smooth picture with its own strip: coarse layout alone is no evidence.
    (tmp_path / "whole.jpg").write_bytes(imagegen.encode(smooth, "JPEG", quality=90))
    (tmp_path / "inside.jpg").write_bytes(imagegen.encode(_strip(smooth, 300), "JPEG", quality=90))
    linked = _linked(
        {
            "train": [str(tmp_path / "left.jpg"), str(tmp_path / "whole.jpg")],
            "test": [str(tmp_path / "right.jpg"), str(tmp_path / "inside.jpg")],
        }
    )
    assert linked == set()


@pytest.mark.parametrize("height", range(8, 49))
def test_every_strip_box_ends_inside_the_image(height: int) -> None:
    # A 29 x 20 flag against its transposed copy once stopped the audit: a strip 11.25 px
    # wide slid in half-pixel steps reached x0 = 18.0, past 29 - 11.25 (Pillow refused the box).
    for width in range(height, 4 * height + 1):
        strip_width = min(float(width), STRIP_ASPECT * height)
        offsets = strip_offsets(width, strip_width)
        assert offsets[0] == 0.0
        assert offsets[-1] == pytest.approx(width - strip_width)
        assert np.all(offsets + strip_width <= width)
        assert np.all(np.diff(offsets) > 0) and np.all(np.diff(offsets) <= 0.5)
