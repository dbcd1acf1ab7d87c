"""The verified cascade: candidate net, pixel verification, only verified edges group."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from imagegen import photo_like, textured_photo
from PIL import Image, ImageDraw, ImageEnhance

import leakaudit
from leakaudit.hashing import N_EXTRA_ENTRIES, entry_kinds, hash_sources
from leakaudit.loading import DecodeOptions
from leakaudit.report import COPY_KIND, EDGE_COLUMNS, TRANSITIVE
from leakaudit.verify import (
    TableEntries,
    VerifyOptions,
    candidate_pairs,
    compare_views,
    load_view,
    supported_pairs,
    verified_labels,
)

DECODE = DecodeOptions()


def _jpeg(image: Image.Image, quality: int = 85) -> bytes:
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def _verdict(a: bytes | Image.Image, b: bytes | Image.Image):  # type: ignore[no-untyped-def]
    options = VerifyOptions(geometry=False)
    return compare_views(load_view(a, "a", DECODE), load_view(b, "b", DECODE), options)


def _crop(image: Image.Image, keep: float, fx: float, fy: float) -> Image.Image:
    w, h = image.size
    cw, ch = round(w * keep), round(h * keep)
    x, y = round((w - cw) * fx), round((h - ch) * fy)
    return image.crop((x, y, x + cw, y + ch))


def sprite(body: tuple[int, int, int], pose: int, design: int = 0, size: int = 64) -> Image.Image:
    """A little character on a transparent canvas: head, body, two arms in a pose."""
    scale = size / 64
    image = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)

    def box(*xy: float) -> list[float]:
        return [v * scale for v in xy]

    if design == 0:
        draw.ellipse(box(22, 6, 42, 26), fill=(240, 200, 160, 255), outline=(40, 20, 10, 255))
    else:
        draw.rectangle(box(22, 6, 42, 26), fill=(120, 220, 120, 255), outline=(10, 40, 10, 255))
    draw.rectangle(box(24, 26, 40, 48), fill=(*body, 255), outline=(20, 20, 20, 255))
    arm = [(-8, 6), (8, -6), (0, 10)][pose % 3]
    draw.line(box(24, 30, 14, 30 + arm[0]), fill=(20, 20, 20, 255), width=max(1, round(3 * scale)))
    draw.line(box(40, 30, 50, 30 + arm[1]), fill=(20, 20, 20, 255), width=max(1, round(3 * scale)))
    legs = 6 if pose % 2 else 0
    draw.line(box(28, 48, 26 - legs, 60), fill=(20, 20, 60, 255), width=max(1, round(3 * scale)))
    draw.line(box(36, 48, 38 + legs, 60), fill=(20, 20, 60, 255), width=max(1, round(3 * scale)))
    return image


def folder_icon(
    colour: tuple[int, int, int], size: int = 48, emblem: tuple[int, int, int] | None = None
) -> Image.Image:
    """A folder in ``colour``, with a round emblem in ``emblem``'s colour when given (a
    part of the icon in another colour: what a global colour map cannot explain)."""
    image = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    s = size / 48
    draw.rectangle([4 * s, 12 * s, 44 * s, 40 * s], fill=(*colour, 255), outline=(30, 30, 30, 255))
    draw.rectangle([4 * s, 8 * s, 20 * s, 14 * s], fill=(*colour, 255), outline=(30, 30, 30, 255))
    if emblem is not None:
        draw.ellipse([16 * s, 18 * s, 32 * s, 34 * s], fill=(*emblem, 255))
    return image


# Textured, as photos are: partial and turned matches must agree in fine detail.
PHOTO = textured_photo(3, (320, 240))


# ------------------------------------------------------------ the pixel check


@pytest.mark.parametrize(
    ("name", "copy"),
    [
        ("re-encode q40", lambda im: _jpeg(im, 40)),
        ("half size", lambda im: _jpeg(im.resize((160, 120)))),
        ("mirror", lambda im: _jpeg(im.transpose(Image.Transpose.FLIP_LEFT_RIGHT))),
        ("rot90", lambda im: _jpeg(im.transpose(Image.Transpose.ROTATE_90))),
        ("crop 5%", lambda im: _jpeg(_crop(im, 0.95, 1.0, 0.5))),
        ("crop 15%", lambda im: _jpeg(_crop(im, 0.85, 0.0, 1.0))),
        ("rotate 5 degrees", lambda im: _jpeg(im.rotate(5, Image.Resampling.BICUBIC))),
    ],
)
def test_pixel_check_accepts_copies_of_a_photo(name: str, copy) -> None:  # type: ignore[no-untyped-def]
    verdict = _verdict(_jpeg(PHOTO, 92), copy(PHOTO))
    assert verdict.accepted, (name, verdict)
    assert verdict.stage == "pixels"
    assert 0.0 < verdict.strength <= 1.0


def test_pixel_check_accepts_a_letterboxed_copy() -> None:
    canvas = Image.new("RGB", (320, 320), "black")
    canvas.paste(PHOTO, (0, 40))
    assert _verdict(_jpeg(PHOTO, 92), _jpeg(canvas)).accepted


def test_pixel_check_rejects_an_unrelated_photo() -> None:
    verdict = _verdict(_jpeg(PHOTO), _jpeg(photo_like(11, (320, 240))))
    assert not verdict.accepted


def test_byte_identical_files_link_at_once() -> None:
    data = _jpeg(PHOTO)
    verdict = _verdict(data, data)
    assert verdict.accepted and verdict.stage == "bytes" and verdict.strength == 1.0


def test_recoloured_icon_is_a_copy_and_an_icon_with_another_part_is_not() -> None:
    # Issue 36: a global colour change that keeps the picture (here the folder's colour
    # turned: a channel order and gains) is a copy, for icons too; a part in another
    # colour (an emblem) is what no global map explains.
    blue = folder_icon((40, 90, 220), 128)
    red = folder_icon((220, 60, 40), 128)
    assert _verdict(_png(blue), _png(red)).accepted
    assert _verdict(_png(blue), _jpeg(blue, 90)).accepted  # flattened onto white, re-encoded
    for emblem in ((240, 200, 40), (40, 90, 220)):
        with_emblem = folder_icon(
            (40, 90, 220) if emblem != (40, 90, 220) else (220, 60, 40), 128, emblem
        )
        rejected = _verdict(_png(blue), _png(with_emblem))
        assert not rejected.accepted, emblem


def test_different_sprite_in_the_same_pose_is_rejected() -> None:
    first = sprite((200, 40, 40), pose=1, design=0, size=128)
    other = sprite((200, 40, 40), pose=1, design=1, size=128)
    assert not _verdict(_png(first), _png(other)).accepted


def test_palette_swap_of_a_sprite_is_judged_on_its_figure() -> None:
    """A recoloured body changes a tenth of the figure and a few hundredths of the
    canvas: on the whole canvas its chroma difference stays under the graphic limit;
    measured on the figure (what differs from the background) it does not."""
    from leakaudit import _verify_judge as judge
    from leakaudit._verify_view import flattened

    first = load_view(_png(sprite((200, 40, 40), pose=1, size=64)), "a", DECODE)
    swapped = load_view(_png(sprite((140, 60, 140), pose=1, size=64)), "b", DECODE)
    background = judge.pair_background(first, swapped)
    rgb_a = flattened(first.grid, background)
    rgb_b = flattened(swapped.grid, background)
    weight = judge._foreground_weight(rgb_a, rgb_b, background)
    assert weight is not None
    on_canvas = judge._chroma_difference(rgb_a, rgb_b, saturation=None)
    on_figure = judge._chroma_difference(rgb_a, rgb_b, saturation=1.3, weight=weight)
    options = VerifyOptions(geometry=False)
    assert on_canvas < options.graphic_chroma_difference < options.figure_chroma_difference
    assert on_figure > options.figure_chroma_difference
    verdict = compare_views(first, swapped, options)
    assert not verdict.accepted and "colours differ" in verdict.reason
    # Its own copies, and a brighter one, still pass on the figure's limits.
    original = sprite((200, 40, 40), pose=1, size=64)
    brighter = ImageEnhance.Brightness(original).enhance(1.2)
    for copy in (_jpeg(original, 70), _png(original.resize((32, 32))), _png(brighter)):
        assert _verdict(_png(original), copy).accepted


def test_a_canvas_without_background_is_measured_whole() -> None:
    from leakaudit import _verify_judge as judge

    rgb = np.asarray(PHOTO.resize((24, 24)), dtype=np.float32).reshape(-1, 3)
    assert judge._foreground_weight(rgb, rgb, np.full(3, 255.0, np.float32)) is None


def test_same_sprite_in_another_pose_is_rejected() -> None:
    first = sprite((40, 120, 200), pose=0, size=128)
    posed = sprite((40, 120, 200), pose=1, size=128)
    assert not _verdict(_png(first), _png(posed)).accepted


def test_sprite_copies_are_accepted() -> None:
    original = sprite((40, 160, 90), pose=2, size=128)
    for copy in (_jpeg(original, 90), _png(original.resize((64, 64))), _png(original)):
        assert _verdict(_png(original), copy).accepted


def _gif(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "GIF")
    return buffer.getvalue()


def _soft_sprite(body: tuple[int, int, int], pose: int, size: int) -> Image.Image:
    """A sprite drawn at 4x and reduced: anti-aliased, with a soft alpha fringe."""
    return sprite(body, pose, size=4 * size).resize((size, size), Image.Resampling.LANCZOS)


@pytest.mark.parametrize("size", [32, 48, 64, 128])
def test_a_gif_copy_of_a_soft_edged_sprite_is_accepted(size: int) -> None:
    # GIF keeps 1-bit transparency: each pixel of the anti-aliased fringe turns opaque
    # (with its colour, often a dark outline nearly transparent before) or transparent,
    # by Pillow's palette choice rather than one alpha level; at 32 px the fringe is a
    # large share of the sprite. The copy's own mask on the original's fringe
    # reproduces it (fringe_masked_grid); the fully opaque and transparent pixels must
    # still agree, so another pose or palette is no copy.
    original = _soft_sprite((40, 160, 90), pose=2, size=size)
    soft = load_view(_png(original), "png", DECODE)
    hard = load_view(_gif(original), "gif", DECODE)
    assert hard.binary_alpha and not soft.binary_alpha and soft.hardened_grids
    assert compare_views(soft, hard, VerifyOptions(geometry=False)).accepted
    assert compare_views(hard, soft, VerifyOptions(geometry=False)).accepted
    for other in (
        _soft_sprite((40, 160, 90), pose=1, size=size),  # another pose
        _soft_sprite((170, 60, 150), pose=2, size=size),  # another palette
    ):
        other_gif = load_view(_gif(other), "gif", DECODE)
        assert not compare_views(soft, other_gif, VerifyOptions(geometry=False)).accepted
        assert not compare_views(other_gif, soft, VerifyOptions(geometry=False)).accepted


def test_unreadable_image_cannot_be_verified(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    with pytest.raises(leakaudit.errors.ImageLoadError, match=r"bad\.jpg"):
        load_view(str(bad), str(bad), DECODE)


def test_verify_options_are_checked() -> None:
    with pytest.raises(ValueError, match="min_correlation"):
        VerifyOptions(min_correlation=2.0)
    with pytest.raises(ValueError, match="candidate_threshold"):
        VerifyOptions(candidate_threshold=99)


# ------------------------------------------------------------- the net


def test_crop_entries_follow_the_orientation_entries() -> None:
    images = [PHOTO, _crop(PHOTO, 0.85, 0.5, 0.5)]
    table = hash_sources(images, dihedral=True, crop_entries=True)
    assert table.orientations is not None
    kinds = table.orientations.kind
    assert np.array_equal(kinds, entry_kinds(table.orientations.owner))  # the stored layout
    per_row = np.bincount(table.orientations.owner)
    assert (per_row > N_EXTRA_ENTRIES).all()
    assert set(np.unique(kinds).tolist()) == {0, 1, 2, 3, 4, 5}  # 4:3: strips too


def test_views_take_the_tables_entries_as_they_are() -> None:
    """A view given the table's entries aligns on exactly them, and its extra kinds
    match what a view hashes afresh (as is, content, crops, rotations, in order)."""
    images = [PHOTO, _crop(PHOTO, 0.85, 0.5, 0.5)]
    decode = DecodeOptions()
    table = hash_sources(images, dihedral=True, decode=decode, crop_entries=True)
    assert table.orientations is not None
    entries = TableEntries(
        table.orientations.owner,
        table.orientations.phash,
        table.orientations.dhash,
        table.orientations.kind,
    )
    for row, image in enumerate(images):
        hashes, kinds = entries.of(row)
        given = load_view(image, "x", decode, entries=(hashes, kinds))
        fresh = load_view(image, "x", decode)
        assert np.array_equal(given.entries, hashes) and np.array_equal(given.kinds, kinds)
        extra = kinds != 0
        assert np.array_equal(kinds[extra], fresh.kinds[fresh.kinds != 0])
        # Entry by entry the same parts of the image (a view decodes on its own
        # path, so the bits may differ a little; the order must not). The content
        # entry is left out: on a photo its peel of near-uniform edge lines can stop a
        # line apart on another decode path (it only proposes candidates).
        bits = [
            bin(int(x) ^ int(y)).count("1")
            for x, y, kind in zip(
                hashes[extra, 0], fresh.entries[fresh.kinds != 0, 0], kinds[extra], strict=True
            )
            if kind != 4
        ]
        assert max(bits) <= 6
    assert compare_views(
        load_view(images[0], "a", decode, entries=entries.of(0)),
        load_view(images[1], "b", decode, entries=entries.of(1)),
        VerifyOptions(geometry=False),
    ).accepted


def _brute_force_candidates(owner, phash, dhash, kinds, linkable, threshold, crop, crop_dhash):  # type: ignore[no-untyped-def]
    allowed = {(0, 0), (3, 1), (1, 3), (3, 2), (2, 3), (1, 2), (2, 1), (4, 4), (4, 3), (3, 4)}
    allowed |= {(5, 3), (3, 5)}  # a strip with the as-is entry of a row that has strips
    striped = {int(o) for o, k in zip(owner, kinds, strict=True) if k == 5 and linkable[o]}
    found = set()
    for i in range(len(owner)):
        for j in range(i + 1, len(owner)):
            a, b = int(owner[i]), int(owner[j])
            if a == b or not (linkable[a] and linkable[b]):
                continue
            if (int(kinds[i]), int(kinds[j])) not in allowed:
                continue
            if 5 in (kinds[i], kinds[j]) and not (a in striped and b in striped):
                continue
            whole = kinds[i] == 0 and kinds[j] == 0
            if bin(int(phash[i]) ^ int(phash[j])).count("1") > (threshold if whole else crop):
                continue
            if bin(int(dhash[i]) ^ int(dhash[j])).count("1") > (threshold if whole else crop_dhash):
                continue
            found.add((min(a, b), max(a, b)))
    return found


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 5)), min_size=2, max_size=40),
    st.integers(0, 2**16),
    st.integers(0, 12),
    st.integers(0, 12),
    st.integers(0, 14),
)
def test_candidate_pairs_are_exactly_the_brute_force_pairs(  # type: ignore[no-untyped-def]
    entries, seed, threshold, crop, crop_dhash
) -> None:
    rng = np.random.default_rng(seed)
    owner = np.sort(np.array([o for o, _ in entries], dtype=np.int64))
    kinds = np.array([k for _, k in entries], dtype=np.int8)
    # Clumpy hashes: a few centres with a handful of flipped bits each.
    centres = rng.integers(0, 2**63, size=3, dtype=np.int64).astype(np.uint64)

    def near(n: int) -> np.ndarray:
        flips = rng.integers(0, 64, size=(n, 4))
        masks = np.bitwise_or.reduce(np.uint64(1) << flips.astype(np.uint64), axis=1)
        keep = rng.integers(0, 2, size=n).astype(np.uint64)
        return centres[rng.integers(0, 3, size=n)] ^ (masks * keep)

    phash, dhash = near(len(owner)), near(len(owner))
    linkable = rng.random(8) < 0.9
    pairs, _ = candidate_pairs(owner, phash, dhash, kinds, linkable, threshold, crop, crop_dhash)
    assert {tuple(p) for p in pairs.tolist()} == _brute_force_candidates(
        owner, phash, dhash, kinds, linkable, threshold, crop, crop_dhash
    )


def test_crop_candidate_dhash_threshold_is_validated_and_reported() -> None:
    with pytest.raises(ValueError, match="crop_candidate_dhash_threshold"):
        VerifyOptions(crop_candidate_dhash_threshold=65)
    assert (
        VerifyOptions(crop_candidate_dhash_threshold=12).parameters()[
            "crop_candidate_dhash_threshold"
        ]
        == 12
    )


# ------------------------------------------------------- only verified edges group


def _planted(tmp_path: Path) -> tuple[list[str], list[str]]:
    paths, splits = [], []
    for seed in range(6):
        image = photo_like(100 + seed, (256, 192))
        original = tmp_path / f"train_{seed}.jpg"
        original.write_bytes(_jpeg(image, 92))
        paths.append(str(original))
        splits.append("train")
        copy = tmp_path / f"test_{seed}.jpg"
        copy.write_bytes(_jpeg(_crop(image, 0.9, 0.3, 0.7), 70) if seed % 2 else _jpeg(image, 60))
        paths.append(str(copy))
        splits.append("test")
    for k, emblem in enumerate([None, (240, 200, 40), (230, 40, 40)]):
        icon_path = tmp_path / f"icon_{k}.png"
        icon_path.write_bytes(_png(folder_icon((40, 90, 220), 128, emblem)))
        paths.append(str(icon_path))
        splits.append("train" if k == 0 else "test")
    return paths, splits


def test_groups_are_the_components_of_the_verified_edges(tmp_path: Path) -> None:
    paths, _ = _planted(tmp_path)
    report = leakaudit.audit_splits({"all": paths}, cache=False, workers=1)
    assert report.edges is not None
    assert list(report.edges.columns) == [*EDGE_COLUMNS, COPY_KIND]
    labels = report.table["group_id"].to_numpy()
    # Union-find over the edges alone gives exactly the report's groups.
    parent = list(range(len(labels)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in report.edges[["row_a", "row_b"]].to_numpy().tolist():
        parent[find(a)] = find(b)
    roots = [find(i) for i in range(len(labels))]
    assert pd.Series(roots).factorize()[0].tolist() == pd.Series(labels).factorize()[0].tolist()


def test_verification_rejects_candidates_and_keeps_the_copies(tmp_path: Path) -> None:
    paths, _ = _planted(tmp_path)
    table = hash_sources(paths, dihedral=True, crop_entries=True, workers=1)
    labels, verified = verified_labels(
        table,
        paths,
        paths,
        low_information=table.low_information,
        exact_keys=[None] * len(paths),
        decode=DECODE,
        options=VerifyOptions(geometry=False),
        workers=1,
        dihedral=True,
    )
    for seed in range(6):  # every planted copy joins its original
        assert labels[2 * seed] == labels[2 * seed + 1]
    icons = labels[-3:]
    assert len(set(icons.tolist())) == 3  # icons with other emblems stay apart
    assert verified.n_candidates >= len(verified.edges)


def test_report_orders_groups_by_evidence_and_marks_transitive_ones() -> None:
    frame = pd.DataFrame(
        {
            "path": ["a", "b", "c", "d", "e"],
            "split": ["train", "train", "test", "train", "test"],
            "group_id": [0, 0, 0, 1, 1],
        }
    )
    edges = pd.DataFrame(
        {
            "row_a": [0, 1, 3],
            "row_b": [1, 2, 4],
            "stage": ["pixels", "pixels", "bytes"],
            "distance": pd.array([2, 9, 0], dtype="Int64"),
            "similarity": [0.97, 0.9, 1.0],
            "inliers": pd.array([pd.NA] * 3, dtype="Int64"),
            "strength": [0.97, 0.9, 1.0],
        }
    )
    report = leakaudit.dhash_audit(frame, edges=edges)
    assert report.leaked_groups["group_id"].tolist() == [1, 0]
    assert report.leaked_groups["evidence"].tolist() == ["bytes", "pixels"]
    only_within = edges.iloc[:1]
    chained = leakaudit.dhash_audit(frame.iloc[:3], edges=only_within)
    assert chained.leaked_groups["evidence"].tolist() == [TRANSITIVE]
    assert "TRANSITIVE ONLY" in chained.to_text()


def test_audit_says_which_stages_ran(tmp_path: Path) -> None:
    paths, _ = _planted(tmp_path)
    report = leakaudit.audit_splits({"all": paths}, cache=False, workers=1)
    assert report.parameters["stages"][:3] == ["hash candidates", "bytes", "pixels"]
    counts = report.parameters["verification"]
    assert counts["candidates"] >= counts["verified"] > 0
    plain = leakaudit.audit_splits({"all": paths}, cache=False, workers=1, verify=False)
    assert "stages" not in plain.parameters and plain.edges is None


def test_in_memory_images_fall_back_to_the_threshold_with_auto_and_fail_with_true() -> None:
    images = [PHOTO, PHOTO.resize((160, 120))]
    report = leakaudit.audit_sources(images, ["train", "test"], cache=False, workers=1)
    assert report.n_leaked_images == 2
    table = hash_sources(images, dihedral=True)
    with pytest.raises(ValueError, match="needs the images"):
        leakaudit.audit_hash_table(table, ["train", "test"], dihedral=True, verify=True)
    unverified = leakaudit.audit_hash_table(table, ["train", "test"], dihedral=True)
    assert unverified.parameters["verification"]["ran"] is False


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**16), st.integers(2, 40))
def test_only_the_returned_edges_form_the_groups(seed: int, n: int) -> None:
    """Whatever verification decides, the labels are the components of its edges."""
    rng = np.random.default_rng(seed)
    centres = rng.integers(0, 2**63, size=3, dtype=np.int64).astype(np.uint64)
    pick = rng.integers(0, 3, size=n)
    flips = np.uint64(1) << rng.integers(0, 64, size=n).astype(np.uint64)
    phash = centres[pick] ^ np.where(rng.random(n) < 0.5, flips, np.uint64(0))
    dhash = centres[(pick + 1) % 3] ^ np.where(rng.random(n) < 0.5, flips, np.uint64(0))
    table = leakaudit.HashTable(
        sources=[f"<PIL image #{i}>" for i in range(n)],
        phash=phash,
        dhash=dhash,
        digest=np.zeros(n, dtype=np.uint64),
        low_information=np.zeros(n, dtype=bool),
        valid=rng.random(n) < 0.9,
    )
    # Half the rows can be decoded (real images), half cannot (hash fallback).
    sources = [
        _jpeg(photo_like(int(seed % 7) + int(p), (64, 48))) if i % 2 else None
        for i, p in enumerate(pick)
    ]
    labels, verified = verified_labels(
        table,
        sources,
        [str(i) for i in range(n)],
        low_information=table.low_information,
        exact_keys=[None] * n,
        decode=DECODE,
        options=VerifyOptions(geometry=False),
        workers=1,
        dihedral=False,
    )
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in verified.edges[["row_a", "row_b"]].to_numpy().tolist():
        assert table.valid[a] and table.valid[b]
        parent[find(a)] = find(b)
    roots = [find(i) for i in range(n)]
    assert pd.Series(roots).factorize()[0].tolist() == pd.Series(labels).factorize()[0].tolist()
    assert verified.n_candidates == (
        len(verified.edges) + verified.n_rejected + verified.n_unsupported + verified.n_kept_apart
    )


def test_an_image_gone_before_verification_is_named_and_decided_by_its_hashes(
    tmp_path: Path,
) -> None:
    from leakaudit.verify import UnverifiableImageWarning, verify_candidates

    first, second = tmp_path / "a.jpg", tmp_path / "gone.jpg"
    first.write_bytes(_jpeg(PHOTO, 92))
    second.write_bytes(_jpeg(PHOTO, 60))
    paths = [str(first), str(second)]
    second.unlink()
    with pytest.warns(UnverifiableImageWarning, match=r"gone\.jpg"):
        verified = verify_candidates(np.array([[0, 1]]), np.array([2]), paths, paths, workers=1)
    assert verified.edges["stage"].tolist() == ["hash"]
    assert verified.n_unverified == 1


# ------------------------------------------------------------ support of a verified pair


def _support_oracle(pairs: np.ndarray, keep: np.ndarray, n: int, min_support: float) -> np.ndarray:
    """supported_pairs by its definition, on an adjacency matrix (with self-loops)."""
    alive = np.ones(len(pairs), dtype=bool)
    while True:
        adjacency = np.eye(n, dtype=bool)
        for (a, b), live in zip(pairs.tolist(), alive.tolist(), strict=True):
            if live:
                adjacency[a, b] = adjacency[b, a] = True
        drop = np.zeros(len(pairs), dtype=bool)
        for index, (a, b) in enumerate(pairs.tolist()):
            if alive[index] and not keep[index]:
                shared = np.count_nonzero(adjacency[a] & adjacency[b])
                smaller = min(np.count_nonzero(adjacency[a]), np.count_nonzero(adjacency[b]))
                drop[index] = shared < min_support * smaller
        if not drop.any():
            return alive
        alive &= ~drop


@settings(max_examples=200, deadline=None)
@given(
    st.integers(2, 14),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.0, 0.3, 0.5, 0.6, 0.75, 1.0]),
)
def test_supported_pairs_match_their_definition_in_any_order(
    n: int, seed: int, min_support: float
) -> None:
    rng = np.random.default_rng(seed)
    everything = np.array([(a, b) for a in range(n) for b in range(a + 1, n)], dtype=np.int64)
    pairs = everything[rng.random(len(everything)) < rng.uniform(0.1, 0.8)]
    keep = rng.random(len(pairs)) < 0.15
    expected = _support_oracle(pairs, keep, n, min_support)
    assert supported_pairs(pairs, keep, min_support).tolist() == expected.tolist()
    order = rng.permutation(len(pairs))  # the result does not depend on the order
    assert supported_pairs(pairs[order], keep[order], min_support).tolist() == (
        expected[order].tolist()
    )
    # A fixed point: every pair kept has its support among the pairs kept.
    kept = pairs[expected]
    assert _support_oracle(kept, keep[expected], n, min_support).all()
    assert expected[keep].all()  # byte-identical pairs always link


def test_a_look_alike_between_two_families_does_not_link_them() -> None:
    # Two families of copies (each verified with the others), one ambiguous copy that
    # verified with both, and a direct look-alike pair between the two originals.
    family_a = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    family_b = [(4, 5), (4, 6), (4, 7), (5, 6), (5, 7), (6, 7)]
    ambiguous = [(3, 8), (2, 8), (8, 4)]
    pairs = np.array([*family_a, *family_b, *ambiguous, (0, 4)], dtype=np.int64)
    linked = pairs[supported_pairs(pairs)]
    from leakaudit.grouping import connected_component_labels

    labels = connected_component_labels(9, iter([linked]))
    assert len(set(labels[:4].tolist())) == 1 and len(set(labels[4:8].tolist())) == 1
    assert labels[0] != labels[4]  # the families stay apart
    assert labels[8] == labels[0]  # the ambiguous copy joins the family it shares most with
    # A copy seen only with its original, and a lone pair, keep their link.
    assert supported_pairs(np.array([[0, 1], [0, 2], [1, 2], [2, 9]])).all()
    assert supported_pairs(np.array([[0, 1], [0, 2], [1, 2], [2, 9]]), None, 0.0).all()


def test_min_support_is_an_option_and_is_checked() -> None:
    assert VerifyOptions().min_support == 0.6
    assert VerifyOptions().parameters()["min_support"] == 0.6
    for bad in (-0.1, 1.5, "0.6"):
        with pytest.raises(ValueError, match="min_support"):
            VerifyOptions(min_support=bad)  # type: ignore[arg-type]


# ------------------------------------------------------------ colour (issue 24)


def _grey(image: Image.Image) -> Image.Image:
    return image.convert("L").convert("RGB")


def _sepia(image: Image.Image) -> Image.Image:
    luma = np.asarray(image.convert("L"), dtype=np.float32)
    toned = np.stack([luma * 1.07 + 20, luma * 0.95 + 10, luma * 0.75], axis=-1)
    return Image.fromarray(np.clip(np.rint(toned), 0, 255).astype(np.uint8))


def _channel_gain(image: Image.Image) -> Image.Image:
    scaled = np.asarray(image.convert("RGB"), dtype=np.float32) * np.array([1.3, 1.0, 0.7])
    return Image.fromarray(np.clip(np.rint(scaled), 0, 255).astype(np.uint8))


def _linked(tmp_path: Path, first: bytes, second: bytes, suffix: str = ".jpg") -> bool:
    """Whether the default audit puts ``first`` (train) and ``second`` (test) in one group."""
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    (tmp_path / "train" / f"a{suffix}").write_bytes(first)
    (tmp_path / "test" / f"b{suffix}").write_bytes(second)
    report = leakaudit.audit_splits(
        {"train": tmp_path / "train", "test": tmp_path / "test"}, cache=False, workers=1
    )
    return bool(report.table["group_id"].nunique() == 1)


@pytest.mark.parametrize("size", [(320, 240), (32, 32)])
@pytest.mark.parametrize(
    ("name", "edit"), [("grey", _grey), ("sepia", _sepia), ("channel gain", _channel_gain)]
)
def test_grey_toned_and_channel_scaled_copies_of_a_photo_are_linked(  # type: ignore[no-untyped-def]
    tmp_path: Path, name: str, edit, size: tuple[int, int]
) -> None:
    """Colour alone never vetoes a photo whose structure agrees: a grey, sepia or
    per-channel-gain copy is the same picture (a 32 px photo, as in CIFAR-10, too)."""
    photo = photo_like(21, size)
    assert _verdict(_jpeg(photo, 92), _jpeg(edit(photo), 90)).accepted, name
    assert _linked(tmp_path, _jpeg(photo, 92), _jpeg(edit(photo), 90)), name


def test_a_16_bit_grey_png_copy_of_a_photo_is_linked(tmp_path: Path) -> None:
    """The verifier sees a 16-bit grey PNG as the hashes do (rescaled to 8 bits), not
    clipped to white: 5 of 24 such copies of real photo crops were found before."""
    photo = photo_like(21, (320, 240))
    wide = np.asarray(photo.convert("L"), dtype=np.uint16) * 257
    buffer = io.BytesIO()
    Image.fromarray(wide.astype("<u2")).save(buffer, format="PNG")
    copy = buffer.getvalue()
    with Image.open(io.BytesIO(copy)) as opened:
        assert opened.mode.startswith("I")
    view = load_view(copy, "copy.png")
    assert 40 < float(view.grey.mean()) < 220  # not clipped to white
    assert _verdict(_jpeg(photo, 92), copy).accepted
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    (tmp_path / "train" / "a.jpg").write_bytes(_jpeg(photo, 92))
    (tmp_path / "test" / "b.png").write_bytes(copy)
    report = leakaudit.audit_splits(
        {"train": tmp_path / "train", "test": tmp_path / "test"}, cache=False, workers=1
    )
    assert report.table["group_id"].nunique() == 1


def _flat_photo(seed: int) -> Image.Image:
    """A 400 x 300 photo with a plain dark area inside it (a night sky): flat on the
    grid like a drawing, but a photo."""
    from imagegen import textured_photo

    pixels = np.asarray(textured_photo(seed, (400, 300)), dtype=np.float32).copy()
    pixels[25:275, 30:370] = (14, 16, 18)
    return Image.fromarray(pixels.astype(np.uint8))


def test_a_toned_copy_of_a_flat_photo_is_linked_and_another_flat_photo_is_not() -> None:
    """A large JPEG photo flat on the grid (the moon on black, a rocket on a plain sky):
    a global colour edit (sepia, channel gains) is a copy whatever the kind of picture
    (one colour rule, issue 36). Another picture with the same plain area is not."""
    photo = _flat_photo(3)
    sepia = _sepia(photo)
    assert _verdict(_jpeg(photo, 92), _jpeg(sepia, 92)).accepted
    assert _verdict(_jpeg(photo, 92), _jpeg(_channel_gain(photo), 92)).accepted
    other = _sepia(_flat_photo(4))
    assert not _verdict(_jpeg(photo, 92), _jpeg(other, 92)).accepted


@pytest.mark.parametrize("size", [(320, 240), (32, 32)])
def test_two_different_photos_are_not_linked_whatever_their_colours(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    first, other = photo_like(21, size), photo_like(22, size)
    assert not _verdict(_jpeg(first), _jpeg(_grey(other))).accepted
    assert not _linked(tmp_path, _jpeg(first), _jpeg(other))


def test_recoloured_icons_are_copies_and_other_interiors_are_not(tmp_path: Path) -> None:
    """Issue 36: a global colour change (a channel swap, grey with the alpha kept) keeps
    the picture, so it is a copy for a drawn graphic too; an icon of the same template
    with another interior is not."""
    from imagegen import icon

    original = icon(5, 7)
    rgba = np.asarray(original)
    swapped = Image.fromarray(rgba[..., [2, 0, 1, 3]])  # the channels in another order
    assert _verdict(_png(original), _png(swapped)).accepted
    assert not _verdict(_png(original), _png(icon(5, 8))).accepted
    grey = Image.merge("RGBA", (*_grey(original).split(), original.getchannel("A")))
    assert _verdict(_png(original), _png(grey)).accepted
    assert _linked(tmp_path, _png(original), _png(swapped), suffix=".png")


def test_a_pair_the_judge_fails_on_is_decided_by_its_hashes_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One pair the judge raises on (a 29 x 20 flag against its transposed WebP once did)
    # must not stop an audit of thousands: it is decided as an unverifiable pair is, by
    # its hashes alone, and named in one warning.
    import leakaudit._verify_stage as stage
    from leakaudit.verify import UnverifiableImageWarning

    for split in ("train", "test"):
        (tmp_path / split).mkdir()
    picture = textured_photo(5)
    picture.save(tmp_path / "train" / "a.png")
    picture.save(tmp_path / "test" / "a_copy.jpg", quality=95)
    textured_photo(9).save(tmp_path / "test" / "other.png")

    def broken(*args: object, **kwargs: object) -> object:
        raise ValueError("box can't exceed original image size")

    monkeypatch.setattr(stage, "compare_views", broken)
    with pytest.warns(UnverifiableImageWarning, match=r"could not be compared") as record:
        report = leakaudit.audit_splits(
            {"train": tmp_path / "train", "test": tmp_path / "test"}, cache=False
        )
    message = " ".join(str(w.message) for w in record)
    assert "a_copy.jpg" in message and "box can't exceed" in message
    assert report.n_leaked_groups == 1
    leaked = report.table[report.table["group_id"].duplicated(keep=False)]
    assert sorted(Path(p).name for p in leaked["path"]) == ["a.png", "a_copy.jpg"]
