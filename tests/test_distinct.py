"""Telling look-alike graphics apart at native resolution, and keeping them apart in groups."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw, ImageEnhance

import leakaudit
from leakaudit.grouping import connected_component_labels, linking_pairs_kept_apart
from leakaudit.htmlreport import render_html
from leakaudit.loading import DecodeOptions
from leakaudit.verify import (
    DISTINCT_MIN_SIDE,
    DISTINCT_PIXELS,
    VerifyOptions,
    compare_views,
    distinct_applies,
    distinct_pixel_count,
    kept_together,
    load_view,
    verify_candidates,
)

DECODE = DecodeOptions()


def badge_icon(
    badge: str, size: int = 48, colour: tuple[int, int, int] = (60, 110, 200)
) -> Image.Image:
    """A folder on a rounded tile with a red disc at the bottom right holding ``badge``
    ("plus", "check", "dot": the plain disc), drawn large and reduced (anti-aliased)."""
    big = size * 4
    image = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    s = big / 48
    draw.rounded_rectangle((0, 0, big - 1, big - 1), radius=10 * s, fill=(235, 235, 225, 255))
    draw.rectangle((8 * s, 14 * s, 40 * s, 36 * s), fill=(*colour, 255), outline=(30, 30, 30, 255))
    draw.rectangle((8 * s, 10 * s, 20 * s, 16 * s), fill=(*colour, 255), outline=(30, 30, 30, 255))
    cx, cy, r = 36 * s, 36 * s, 9 * s
    draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=(220, 50, 50, 255))
    arm, width = r * 0.6, round(2.5 * s)
    if badge == "plus":
        draw.line((cx - arm, cy, cx + arm, cy), fill=(255, 255, 255, 255), width=width)
        draw.line((cx, cy - arm, cx, cy + arm), fill=(255, 255, 255, 255), width=width)
    elif badge == "check":
        points = (cx - arm, cy, cx - arm * 0.2, cy + arm * 0.7, cx + arm, cy - arm * 0.6)
        draw.line(points, fill=(255, 255, 255, 255), width=width)
    return image.resize((size, size), Image.Resampling.LANCZOS)


def _encoded(image: Image.Image, fmt: str, **params: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)
    return buffer.getvalue()


def _png(image: Image.Image) -> bytes:
    return _encoded(image, "PNG")


def _count(a: bytes | Image.Image, b: bytes | Image.Image) -> tuple[bool, int]:
    """(does the native check apply, its count) for a pair as verification sees it."""
    view_a, view_b = load_view(a, "a", DECODE), load_view(b, "b", DECODE)
    verdict = compare_views(view_a, view_b, VerifyOptions(geometry=False))
    if not distinct_applies(view_a, view_b, verdict):
        return False, 0
    return True, distinct_pixel_count(view_a, view_b, verdict.turn)


# ------------------------------------------------------------------ the check


@pytest.mark.parametrize(
    ("first", "second", "size"),
    [
        ("plus", "check", 32),
        ("plus", "check", 48),
        ("plus", "check", 64),
        ("dot", "check", 24),
        ("dot", "check", 32),
        ("dot", "check", 48),
        ("dot", "check", 96),
    ],
)
def test_an_icon_with_another_badge_is_told_apart(first: str, second: str, size: int) -> None:
    a, b = _png(badge_icon(first, size)), _png(badge_icon(second, size))
    view_a, view_b = load_view(a, "a", DECODE), load_view(b, "b", DECODE)
    verdict = compare_views(view_a, view_b, VerifyOptions(geometry=False))
    # The comparison grid alone does not see the badge's glyph ...
    assert verdict.similarity >= 0.9
    # ... the native check does.
    assert distinct_applies(view_a, view_b, verdict)
    assert distinct_pixel_count(view_a, view_b, verdict.turn) >= DISTINCT_PIXELS


COPIES = {
    "re-saved": lambda im: _png(im),
    "mirror": lambda im: _png(im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)),
    "rot90": lambda im: _png(im.transpose(Image.Transpose.ROTATE_90)),
    "twice the size": lambda im: _png(
        im.resize((im.width * 2, im.height * 2), Image.Resampling.LANCZOS)
    ),
    "brighter": lambda im: _png(ImageEnhance.Brightness(im).enhance(1.2)),
    "more contrast": lambda im: _png(ImageEnhance.Contrast(im).enhance(1.25)),
    "on white": lambda im: _png(Image.alpha_composite(Image.new("RGBA", im.size, "white"), im)),
    "as BMP": lambda im: _encoded(im.convert("RGB"), "BMP"),
}


@pytest.mark.parametrize("name", list(COPIES))
@pytest.mark.parametrize("badge", ["plus", "check", "dot"])
@pytest.mark.parametrize("size", [24, 32, 48])
def test_copies_of_an_icon_are_not_told_apart(name: str, badge: str, size: int) -> None:
    original = badge_icon(badge, size)
    _, count = _count(_png(original), COPIES[name](original))
    assert count < DISTINCT_PIXELS


def test_lossy_palette_and_tiny_images_are_not_judged() -> None:
    plus, check = badge_icon("plus", 48), badge_icon("check", 48)
    jpeg = _encoded(check.convert("RGB"), "JPEG", quality=95)
    gif = _encoded(check, "GIF")
    assert not _count(_png(plus), jpeg)[0]  # JPEG ringing would look like a change
    assert not _count(_png(plus), gif)[0]  # a palette copy is quantised
    tiny = DISTINCT_MIN_SIDE - 4
    # Tiny icons of two sizes are not judged (the general check resamples them) ...
    assert not _count(_png(badge_icon("plus", tiny)), _png(badge_icon("check", tiny + 2)))[0]
    # ... two of one size are compared pixel for pixel (nothing resampled between them).
    applies, count = _count(_png(badge_icon("plus", tiny)), _png(badge_icon("check", tiny)))
    assert applies and count >= DISTINCT_PIXELS


@pytest.mark.parametrize(
    ("fmt", "mode", "params", "lossless"),
    [
        ("PNG", "RGBA", {}, True),
        ("PNG", "P", {}, False),
        ("BMP", "RGB", {}, True),
        ("TIFF", "RGB", {}, True),
        ("TIFF", "RGB", {"compression": "tiff_lzw"}, True),
        ("TIFF", "RGB", {"compression": "jpeg"}, False),
        ("JPEG", "RGB", {}, False),
        ("WEBP", "RGB", {}, False),
        ("GIF", "P", {}, False),
    ],
)
def test_views_know_whether_their_pixels_are_stored_losslessly(
    fmt: str, mode: str, params: dict[str, object], lossless: bool
) -> None:
    image = badge_icon("plus", 40).convert(mode)
    view = load_view(_encoded(image, fmt, **params), "x", DECODE)
    assert view.lossless is lossless
    assert view.native_side == 40


def test_in_memory_images_count_as_lossless_unless_they_came_from_a_lossy_file() -> None:
    icon = badge_icon("plus", 40)
    assert load_view(icon, "mem", DECODE).lossless
    opened = Image.open(io.BytesIO(_encoded(icon.convert("RGB"), "JPEG")))
    assert not load_view(opened, "jpeg", DECODE).lossless


def test_native_side_is_in_the_files_own_pixels() -> None:
    big = _encoded(badge_icon("plus", 48).resize((400, 400)).convert("RGB"), "JPEG")
    view = load_view(big, "big", DECODE)  # decoded reduced, measured in the file's pixels
    assert abs(view.native_side - 400) <= 4


def test_distinct_pixels_is_an_option_and_is_checked() -> None:
    assert VerifyOptions().distinct_pixels == DISTINCT_PIXELS == 4
    assert VerifyOptions().parameters()["distinct_pixels"] == DISTINCT_PIXELS
    with pytest.raises(ValueError, match="distinct_pixels"):
        VerifyOptions(distinct_pixels=-1)
    with pytest.raises(TypeError, match="distinct_pixels"):
        VerifyOptions(distinct_pixels=2.5)  # type: ignore[arg-type]


def test_verification_rejects_the_pair_records_it_and_says_the_stage_ran() -> None:
    sources = [
        _png(badge_icon("plus")),
        _png(badge_icon("check")),
        COPIES["mirror"](badge_icon("plus")),
    ]
    pairs = np.array([[0, 1], [0, 2], [1, 2]])
    verified = verify_candidates(
        pairs,
        np.zeros(3, np.int64),
        sources,
        ["plus", "check", "mirror"],
        options=VerifyOptions(geometry=False),
        workers=1,
    )
    linked = {tuple(p) for p in verified.edges[["row_a", "row_b"]].to_numpy().tolist()}
    assert (0, 2) in linked and (0, 1) not in linked
    assert [0, 1] in verified.distinct.tolist()
    assert "native" in verified.stages
    assert verified.parameters()["distinct"] >= 1
    off = verify_candidates(
        pairs,
        np.zeros(3, np.int64),
        sources,
        ["plus", "check", "mirror"],
        options=VerifyOptions(geometry=False, distinct_pixels=0),
        workers=1,
    )
    assert len(off.distinct) == 0 and "native" not in off.stages


# ------------------------------------------------------------- kept apart


def _oracle(n: int, pairs: list[tuple[int, int]], apart: list[tuple[int, int]]) -> list[bool]:
    """The definition, step by step: a pair links unless joining puts an apart pair together."""
    label = list(range(n))
    kept = []
    for a, b in pairs:
        if label[a] == label[b]:
            kept.append(True)
            continue
        merged = [label[b] if x == label[a] else x for x in label]
        if any(merged[x] == merged[y] for x, y in apart if x != y):
            kept.append(False)
            continue
        label = merged
        kept.append(True)
    return kept


@settings(max_examples=300, deadline=None)
@given(
    st.integers(2, 12).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=30),
            st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=6),
        )
    )
)
def test_linking_pairs_kept_apart_matches_its_definition(case) -> None:  # type: ignore[no-untyped-def]
    n, pairs, apart = case
    kept = linking_pairs_kept_apart(
        np.array(pairs, dtype=np.int64).reshape(-1, 2),
        np.array(apart, dtype=np.int64).reshape(-1, 2),
    )
    assert kept.tolist() == _oracle(n, pairs, apart)
    # No apart pair ends in one group of the kept pairs.
    kept_pairs = np.array(pairs, dtype=np.int64).reshape(-1, 2)[kept]
    labels = connected_component_labels(n, iter([kept_pairs]))
    assert all(labels[x] != labels[y] for x, y in apart if x != y)


def test_without_apart_pairs_every_pair_links() -> None:
    pairs = np.array([[0, 1], [1, 2]])
    assert linking_pairs_kept_apart(pairs, np.zeros((0, 2), np.int64)).tolist() == [True, True]


def test_an_ambiguous_copy_joins_the_look_alike_it_matches_best() -> None:
    # 0 and 1 were told apart; 2 verified against both, better against 1.
    edges = pd.DataFrame(
        {
            "row_a": [0, 1, 0],
            "row_b": [2, 2, 3],
            "stage": ["pixels", "pixels", "bytes"],
            "similarity": [0.95, 0.98, np.nan],
            "strength": [0.95, 0.98, 1.0],
        }
    )
    assert kept_together(edges, np.array([[0, 1]])).tolist() == [False, True, True]


# ------------------------------------------------------------- through the audit


def test_the_audit_keeps_two_badges_apart_and_finds_their_copies(tmp_path: Path) -> None:
    files = {
        "train/plus.png": _png(badge_icon("plus")),
        "train/check_copy.png": COPIES["brighter"](badge_icon("check")),
        "test/check.png": _png(badge_icon("check")),
        "test/plus_mirror.png": COPIES["mirror"](badge_icon("plus")),
        "test/plus_big.png": COPIES["twice the size"](badge_icon("plus")),
    }
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    report = leakaudit.audit_splits(
        {"train": str(tmp_path / "train"), "test": str(tmp_path / "test")},
        cache=False,
        workers=1,
        verify=VerifyOptions(geometry=False),
    )
    table = report.table.set_index(report.table["path"].map(lambda p: Path(p).name))
    group = table["group_id"]
    assert group["plus.png"] == group["plus_mirror.png"] == group["plus_big.png"]
    assert group["check.png"] == group["check_copy.png"]
    assert group["plus.png"] != group["check.png"]
    counts = report.parameters["verification"]
    assert counts["distinct"] >= 1
    assert "native" in report.parameters["stages"]
    # Both reports say what the native check did.
    assert "told apart at native resolution" in report.to_text()
    assert "told apart at" in render_html(report)


@pytest.mark.parametrize("seed", range(6))
def test_copies_of_a_small_lossless_photo_are_not_told_apart(seed: int) -> None:
    # A CIFAR-like 32 x 32 PNG counts as a graphic (under GRAPHIC_SIDE), so the check runs.
    from imagegen import photo_like

    big = photo_like(seed, (96, 96))
    original = big.resize((32, 32), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    original.save(buffer, "JPEG", quality=80)
    copies = [
        _png(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")),
        _png(big.resize((32, 32), Image.Resampling.BILINEAR)),
        _png(big.crop((3, 3, 96, 96)).resize((32, 32), Image.Resampling.LANCZOS)),
        _png(ImageEnhance.Brightness(original).enhance(1.1)),
        _png(original.transpose(Image.Transpose.FLIP_LEFT_RIGHT)),
    ]
    results = [_count(_png(original), copy) for copy in copies]
    assert sum(ran for ran, _ in results) >= 3  # the check does run on such photos
    assert all(count < DISTINCT_PIXELS for _, count in results)


def test_frames_of_one_sprite_are_told_apart_and_its_shifted_copy_is_not() -> None:
    """Two small lossless sprites of one size are compared pixel for pixel at the whole
    shift that matches best: a copy moved by 2 px matches exactly there; another frame (an
    arm moved by 2 px) does not, however it is shifted (a 3 x 3 neighbourhood absorbed such
    moves: bench_real linked 126 of 150 consecutive real animation frames)."""
    from leakaudit.verify import distinct_pixel_count, load_view

    def frame(arm: int) -> Image.Image:
        image = Image.new("RGBA", (32, 32), (0, 0, 0, 0))
        draw = ImageDraw.Draw(image)
        draw.ellipse((9, 4, 22, 16), fill=(240, 200, 160, 255), outline=(30, 20, 10, 255))
        draw.rectangle((10, 16, 21, 28), fill=(200, 40, 40, 255), outline=(20, 20, 20, 255))
        draw.line((21, 18, 29, 18 + arm), fill=(20, 20, 20, 255), width=2)
        return image

    first, moved_arm = frame(0), frame(4)
    shifted = Image.new("RGBA", (32, 32), (0, 0, 0, 0))
    shifted.paste(first, (2, 1))
    a = load_view(_png(first), "a")
    assert distinct_pixel_count(a, load_view(_png(moved_arm), "b"), 0) >= DISTINCT_PIXELS
    assert distinct_pixel_count(a, load_view(_png(shifted), "c"), 0) < DISTINCT_PIXELS
    mirrored = load_view(_png(first.transpose(Image.Transpose.FLIP_LEFT_RIGHT)), "d")
    assert distinct_pixel_count(a, mirrored, 2) < DISTINCT_PIXELS
