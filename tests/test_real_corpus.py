"""The real-image corpus loader and bench_real's edits (benchmarks/real_corpus.py, bench_real.py),
offline: reserved packages are refused, the cache stays outside the repository, icon sizes are
told apart (rendered copy or redrawn picture), every edit keeps the picture, and the edit plan
fills every edit x kind cell."""

from __future__ import annotations

import io
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_real  # noqa: E402
import real_corpus  # noqa: E402


@pytest.mark.parametrize(
    "package",
    [
        "plasma-workspace-wallpapers",
        "gnome-backgrounds",
        "mate-backgrounds",
        "ukui-wallpapers",
        "lomiri-wallpapers",
        "lomiri-wallpapers-20.04",
        "sway-backgrounds",
        "desktop-base",
        "oxygen-icon-theme",
        "wesnoth-1.16-data",
    ],
)
def test_reserved_packages_are_refused(package: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="reserved"):
        real_corpus.check_allowed(package)
    with pytest.raises(ValueError, match="reserved"):  # before anything is downloaded
        real_corpus.fetch_packages(("tango-icon-theme", package), tmp_path)
    assert not (tmp_path / "debs").exists()


def test_no_source_is_reserved() -> None:
    for package in (*real_corpus.FULL_PACKAGES, *real_corpus.CI_PACKAGES):
        real_corpus.check_allowed(package)
    assert set(real_corpus.CI_PACKAGES) <= set(real_corpus.FULL_PACKAGES)


def test_cache_inside_the_repository_is_refused() -> None:
    with pytest.raises(ValueError, match="inside the repository"):
        real_corpus.fetch_packages(("tango-icon-theme",), BENCHMARKS / "_real")


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LEAKAUDIT_REAL_CACHE", str(tmp_path))
    assert real_corpus.default_cache_dir() == tmp_path
    monkeypatch.delenv("LEAKAUDIT_REAL_CACHE")
    assert real_corpus.default_cache_dir().parts[-2:] == ("leakaudit-bench", "real")


def _icon(path: Path, image: Image.Image) -> dict[str, object]:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    member = "/" + "/".join(path.parts[path.parts.index("usr") :])
    return {"package": "theme", "member": member, "path": path, "size": image.size, "kind": "icon"}


def test_icon_sizes_rendered_or_redrawn(tmp_path: Path) -> None:
    """A 16 px icon that is the 48 px one downscaled is a rendered copy (no negative); one
    drawn differently is a redrawn negative."""
    big = Image.new("RGBA", (48, 48), (0, 0, 0, 0))
    draw = ImageDraw.Draw(big)
    draw.ellipse((4, 4, 44, 44), fill=(200, 40, 40, 255))
    draw.rectangle((18, 10, 30, 38), fill=(255, 255, 255, 255))
    redrawn = Image.new("RGBA", (16, 16), (0, 0, 0, 0))
    ImageDraw.Draw(redrawn).rectangle((1, 1, 14, 14), fill=(30, 30, 200, 255))
    root = tmp_path / "usr" / "share" / "icons" / "T"
    scanned = [
        _icon(root / "48x48" / "apps" / "rendered.png", big),
        _icon(
            root / "16x16" / "apps" / "rendered.png", big.resize((16, 16), Image.Resampling.LANCZOS)
        ),
        _icon(root / "48x48" / "apps" / "redrawn.png", big),
        _icon(root / "16x16" / "apps" / "redrawn.png", redrawn),
    ]
    pairs, rendered, ambiguous = real_corpus.redrawn_icon_pairs(scanned)
    assert [(a.name, b.parent.parent.name) for a, b, _ in pairs] == [("redrawn.png", "16x16")]
    assert (rendered, ambiguous) == (1, 0)


def _photo(width: int = 96, height: int = 64) -> Image.Image:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (height // 8, width // 8, 3), dtype=np.uint8)
    return Image.fromarray(base).resize((width, height), Image.Resampling.BICUBIC)


def _decoded(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as opened:
        opened.load()
        return opened.copy()


def test_every_edit_keeps_a_decodable_picture() -> None:
    rng = random.Random(0)
    for mode in ("RGB", "RGBA"):
        image = _photo().convert(mode)
        for name, edit in bench_real.EDITS.items():
            copy = edit(image, rng, 1)
            assert copy.data is not None, name
            decoded = _decoded(copy.data)
            assert min(decoded.size) >= 8, name
            if mode == "RGBA" and name == "grey (alpha kept)":
                assert decoded.mode == "LA"


def test_turns_and_colour_edits_do_what_they_say() -> None:
    image = _photo()
    pixels = np.asarray(image)
    rng = random.Random(0)
    mirrored = _decoded(bench_real.EDITS["mirror"](image, rng, 1).data)  # index 1: PNG
    assert np.array_equal(np.asarray(mirrored), pixels[:, ::-1])
    swapped = _decoded(bench_real.EDITS["channel swap"](image, rng, 0).data)
    assert np.array_equal(np.asarray(swapped), pixels[..., ::-1])
    rotated = _decoded(bench_real.EDITS["rotate 90"](image, rng, 1).data)
    assert rotated.size == (image.height, image.width)
    cropped = _decoded(bench_real.EDITS["crop 20%"](image, rng, 0).data)
    assert cropped.size == (round(96 * 0.8), round(64 * 0.8))
    assert bench_real.EDITS["portrait 9:16 strip"](image.resize((64, 64)), rng, 0).data is None
    strip = _decoded(bench_real.EDITS["portrait 9:16 strip"](image, rng, 0).data)
    assert strip.size == (36, 64)


def test_plan_fills_every_edit_and_kind_cell() -> None:
    images = [
        real_corpus.CorpusImage(f"{kind}{i}", kind, "p", "/m", (64, 64), "f", "s")
        for kind, count in (("icon", 300), ("wallpaper", 25))
        for i in range(count)
    ]
    corpus = real_corpus.Corpus(images, {}, {}, {}, Path("."))
    plan = bench_real._plan(corpus, 40, 0)["edits"]
    for kind in ("icon", "wallpaper"):
        counts = {edit: 0 for edit in bench_real.EDITS}
        for image in images:
            if image.kind == kind:
                assert len(set(plan[image.id])) == len(plan[image.id])  # no edit twice
                for edit in plan[image.id]:
                    counts[edit] += 1
        smallest = min(counts.values())
        assert smallest >= (40 if kind == "icon" else 25), (kind, counts)


def _figure(arm_lift: int = 0, hidden: tuple[int, int, int] = (0, 0, 0)) -> Image.Image:
    """A 40 x 30 sprite on transparency whose transparent pixels carry the colour ``hidden``."""
    image = Image.new("RGBA", (40, 30), (*hidden, 0))
    draw = ImageDraw.Draw(image)
    draw.ellipse((12, 8, 28, 29), fill=(120, 30, 90, 255))
    draw.rectangle((1, 14 - arm_lift, 13, 17 - arm_lift), fill=(200, 120, 40, 255))
    return image


def test_a_frame_is_a_negative_only_when_a_visible_part_moved() -> None:
    still = _figure()
    # The next frame: the arm raised by 3 px, a visible part moved.
    moved = real_corpus.unexplained_share(still, _figure(arm_lift=3), real_corpus.FRAME_LEVELS)
    assert moved >= real_corpus.FRAME_MIN_CHANGE
    # Other colours under fully transparent pixels: the old raw-RGBA rule counted every one of
    # them (a "different" frame that looks the same).
    invisible = _figure(hidden=(255, 255, 255))
    assert real_corpus.unexplained_share(still, invisible, real_corpus.FRAME_LEVELS) == 0.0
    # A copy shifted by 2 px and recoloured is explained by the copy edits.
    shifted = Image.new("RGBA", still.size, (0, 0, 0, 0))
    shifted.paste(still, (2, 1))
    red, green, blue, alpha = shifted.split()
    recoloured = Image.merge("RGBA", (blue, green, red, alpha))
    assert real_corpus.unexplained_share(still, recoloured, real_corpus.FRAME_LEVELS) < 0.01
