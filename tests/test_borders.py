"""DecodeOptions(trim_borders=True): letterbox, pillarbox and padding trimmed, never content."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import imagegen
import numpy as np
import pytest
from PIL import Image, ImageDraw

from leakaudit.audit import audit_splits
from leakaudit.cache import hash_context
from leakaudit.hashing import content_box, hash_image
from leakaudit.loading import (
    TRIM_MIN_FRACTION,
    DecodeOptions,
    grey_from_bytes,
    grey_from_pil,
    load_reduced_grey,
    trim_allowed,
    trim_box,
)
from leakaudit.policy import DEFAULT_THRESHOLDS

TRIM = DecodeOptions(trim_borders=True)
THRESHOLD = DEFAULT_THRESHOLDS["phash+dhash"]


def distance(a: object, b: object, options: DecodeOptions = TRIM) -> int:
    """The distance the default rule applies to: the larger of the pHash and dHash distances."""
    ha, hb = hash_image(a, decode=options), hash_image(b, decode=options)  # type: ignore[arg-type]
    return max((ha.phash ^ hb.phash).bit_count(), (ha.dhash ^ hb.dhash).bit_count())


def photo(seed: int, size: tuple[int, int] = (402, 301)) -> Image.Image:
    # 402 x 301 reduces by 4 with a partial last block on both axes.
    return imagegen.photo_like(seed, size)


def place(
    image: Image.Image,
    canvas: tuple[int, int],
    colour: tuple[int, ...],
    offset: tuple[int, int] | None = None,
) -> Image.Image:
    out = Image.new(image.mode, canvas, colour)
    if offset is None:
        offset = ((canvas[0] - image.width) // 2, (canvas[1] - image.height) // 2)
    out.paste(image, offset)
    return out


def transparent_padding(image: Image.Image) -> Image.Image:
    """The image centred on a canvas 20% larger whose bars are alpha 0 over random colours."""
    rng = np.random.default_rng(7)
    width, height = round(image.width * 1.2), round(image.height * 1.2)
    garbage = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
    garbage[..., 3] = 0
    out = Image.fromarray(garbage, "RGBA")
    out.paste(image.convert("RGBA"), ((width - image.width) // 2, (height - image.height) // 2))
    return out


def _jpeg(image: Image.Image, quality: int = 90) -> bytes:
    return imagegen.encode(image, "JPEG", quality=quality)


def _png(image: Image.Image) -> bytes:
    return imagegen.encode(image, "PNG")


# name -> (original PIL image -> encoded padded copy)
PADDED: dict[str, Callable[[Image.Image], bytes]] = {
    "letterbox square black jpeg": lambda im: _jpeg(place(im, (im.width, im.width), (0, 0, 0))),
    "letterbox square white jpeg q60": lambda im: _jpeg(
        place(im, (im.width, im.width), (255, 255, 255)), 60
    ),
    "pillarbox 16:9 black png": lambda im: _png(
        place(im, (round(im.height * 16 / 9), im.height), (0, 0, 0))
    ),
    "padding all sides grey png": lambda im: _png(
        place(im, (im.width + 80, im.height + 60), (128, 128, 128))
    ),
    "padding all sides blue jpeg": lambda im: _jpeg(
        place(im, (im.width + 50, im.height + 50), (40, 110, 200))
    ),
    "padding right and bottom black png": lambda im: _png(
        place(im, (im.width, im.width), (0, 0, 0), offset=(0, 0))
    ),
    "transparent padding png": lambda im: _png(transparent_padding(im)),
    "letterbox black, half size, jpeg q75": lambda im: _jpeg(
        place(
            im.resize((im.width // 2, im.height // 2), Image.Resampling.LANCZOS),
            (im.width // 2, im.width // 2),
            (0, 0, 0),
        ),
        75,
    ),
}


@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("name", list(PADDED))
def test_padded_copy_hashes_like_its_original_when_trimmed(name: str, seed: int) -> None:
    original = _jpeg(photo(seed))
    padded = PADDED[name](photo(seed))
    assert distance(original, padded) <= THRESHOLD
    # ... which the whole-image hash misses: the test would pass without trimming otherwise.
    assert distance(original, padded, DecodeOptions(trim_borders=False)) > THRESHOLD


@pytest.mark.parametrize("name", list(PADDED))
def test_padded_copies_of_different_photos_stay_apart(name: str) -> None:
    padded = [PADDED[name](photo(seed)) for seed in (21, 22, 23)]
    originals = [_jpeg(photo(seed)) for seed in (21, 22, 23)]
    for i, a in enumerate(padded):
        for j, b in enumerate(padded + originals):
            if j % 3 != i:
                assert distance(a, b) > THRESHOLD


def test_audit_splits_groups_padded_copies_with_their_originals(tmp_path: Path) -> None:
    train, test = tmp_path / "train", tmp_path / "test"
    train.mkdir()
    test.mkdir()
    names = list(PADDED)
    for k, name in enumerate(names):
        seed = 40 + k
        (train / f"orig_{k}.jpg").write_bytes(_jpeg(photo(seed)))
        suffix = ".jpg" if "jpeg" in name else ".png"
        (test / f"padded_{k}{suffix}").write_bytes(PADDED[name](photo(seed)))
    for k in range(4):  # unrelated, some padded alike
        (test / f"unrelated_{k}.png").write_bytes(PADDED[names[k]](photo(90 + k)))
    report = audit_splits(
        {"train": train, "test": test}, decode=TRIM, workers=1, progress=False, cache=False
    )
    table = report.table.set_index(report.table["path"].map(lambda p: Path(p).stem))
    for k in range(len(names)):
        assert table.loc[f"padded_{k}", "group_id"] == table.loc[f"orig_{k}", "group_id"], names[k]
    groups = table["group_id"]
    for k in range(4):
        assert (groups == groups[f"unrelated_{k}"]).sum() == 1
    whole = audit_splits(
        {"train": train, "test": test},
        workers=1,
        progress=False,
        cache=False,
        decode=DecodeOptions(trim_borders=False),
        dihedral=False,
        verify=False,
    )
    assert whole.table["group_id"].nunique() == len(whole.table)  # no trim, no match


# ----------------------------------------------------------------- never into content


def _sky_photo(
    seed: int,
    *,
    noise: float,
    ramp: float = 6.0,
    horizon: float = 205.0,
    size: tuple[int, int] = (400, 300),
) -> Image.Image:
    """A photo whose top third is a graded sky (from 150 at the top to ``horizon``).

    ``ramp``: how much brighter the sky gets from left to right; ``noise``: its grain.
    With neither, every row of the sky is exactly flat and only the grading tells it
    from a bar.
    """
    rng = np.random.default_rng(seed)
    pixels = imagegen.photo_like_array(seed, size).astype(np.float64)
    sky_rows = size[1] // 3
    gradient = np.linspace(150, horizon, sky_rows)[:, None, None]
    tint = np.array([0.8, 0.9, 1.0])  # bluish
    sky = gradient * tint + np.linspace(0, ramp, size[0])[None, :, None]
    sky = sky + rng.normal(0.0, noise, sky.shape)
    pixels[:sky_rows] = sky
    return Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8))


@pytest.mark.parametrize(
    ("noise", "ramp", "horizon"),
    [(1.5, 6.0, 205.0), (0.0, 6.0, 205.0), (0.0, 0.0, 205.0), (0.0, 0.0, 165.0)],
    ids=["grainy", "smooth", "rows-flat", "rows-flat-slow"],
)
def test_a_graded_sky_is_not_trimmed(noise: float, ramp: float, horizon: float) -> None:
    for seed in (1, 2, 3):
        sky = _sky_photo(seed, noise=noise, ramp=ramp, horizon=horizon)
        for data in (_png(sky), _jpeg(sky)):
            pixels, box = grey_from_bytes(data, "sky", DecodeOptions(trim_borders=False))
            assert trim_box(pixels, box) is None
            assert hash_image(data, decode=TRIM) == hash_image(data)


@pytest.mark.parametrize("colour", [(0, 0, 0), (255, 255, 255), (60, 60, 60)])
def test_a_bar_above_a_sky_is_trimmed_to_the_bar_only(colour: tuple[int, int, int]) -> None:
    sky = _sky_photo(5, noise=1.5)
    bar = 48  # full-resolution rows: 12 reduced rows at scale 4
    padded = place(sky, (sky.width, sky.height + 2 * bar), colour)
    for data in (_png(padded), _jpeg(padded)):
        pixels, box = grey_from_bytes(data, "padded", DecodeOptions(trim_borders=False))
        trimmed = trim_box(pixels, box)
        assert trimmed is not None
        left, top, right, bottom = trimmed
        assert (left, right) == (0.0, pixels.shape[1])
        assert bar / 4 - 0.5 <= top <= bar / 4 + 1.0
        assert (sky.height + bar) / 4 - 1.0 <= bottom <= (sky.height + bar) / 4 + 0.5
        assert distance(_jpeg(sky), data) <= THRESHOLD


def test_unpadded_photos_are_not_trimmed() -> None:
    for seed in range(30):
        image = photo(seed)
        for data in (_png(image), _jpeg(image, 75)):
            assert hash_image(data, decode=TRIM) == hash_image(data)


def test_an_exactly_flat_strip_is_trimmed_alike_in_every_copy() -> None:
    # A clipped white sky is indistinguishable from white padding: it is trimmed, and
    # re-encoded or resized copies are trimmed alike, so they still match.
    pixels = imagegen.photo_like_array(8, (400, 300))
    pixels[:60] = 255
    clipped = Image.fromarray(pixels)
    grey, box = grey_from_pil(clipped, "clipped", DecodeOptions(trim_borders=False))
    trimmed = trim_box(grey, box)
    assert trimmed is not None and 14 <= trimmed[1] <= 16
    half = clipped.resize((200, 150), Image.Resampling.LANCZOS)
    assert distance(_png(clipped), _jpeg(clipped, 70)) <= THRESHOLD
    assert distance(_png(clipped), _jpeg(half)) <= THRESHOLD


@pytest.mark.parametrize(
    "image",
    [
        Image.new("RGB", (300, 200), (255, 255, 255)),
        Image.new("RGB", (300, 200), (20, 90, 160)),
        Image.new("L", (64, 64), 0),
        imagegen.flat_with_noise(128, 2.0),
    ],
    ids=["white", "colour", "black-small", "flat-noise"],
)
def test_blank_images_stay_untrimmed_and_low_information(image: Image.Image) -> None:
    pixels, box = grey_from_pil(image, "blank", DecodeOptions(trim_borders=False))
    assert trim_box(pixels, box) is None
    hashes = hash_image(image, decode=TRIM)
    assert hashes.low_information
    assert hashes == hash_image(image)


def test_a_small_object_on_a_wide_background_is_hashed_whole() -> None:
    # Less than TRIM_MIN_FRACTION of each side would remain: the axis is left untrimmed.
    canvas = place(photo(3, (60, 45)), (400, 300), (255, 255, 255))
    assert max(60 / 400, 45 / 300) < TRIM_MIN_FRACTION
    pixels, box = grey_from_pil(canvas, "small", DecodeOptions(trim_borders=False))
    assert trim_box(pixels, box) is None


def test_trimming_applies_to_the_upright_image() -> None:
    upright = place(photo(14), (402, 402), (0, 0, 0))
    rotated = imagegen.exif_oriented_jpeg(upright, 6, quality=90)
    assert distance(_jpeg(upright), rotated) <= 2
    assert distance(_jpeg(photo(14)), rotated) <= THRESHOLD
    pixels, _ = grey_from_bytes(rotated, "rotated", TRIM)
    assert pixels.shape[0] < pixels.shape[1]  # the letterbox bars (now top/bottom) are gone


def test_load_reduced_grey_returns_the_trimmed_pixels() -> None:
    padded = place(photo(15, (400, 300)), (400, 400), (0, 0, 0))
    assert load_reduced_grey(padded, decode=DecodeOptions(trim_borders=False)).size == (100, 100)
    trimmed = load_reduced_grey(padded, decode=TRIM)
    assert trimmed.size[0] == 100 and 73 <= trimmed.size[1] <= 75
    assert np.asarray(trimmed).min(axis=1).max() > 0  # no black bar row left


# ----------------------------------------------------------------- defaults and options


def test_trim_borders_is_on_by_default_and_off_changes_nothing() -> None:
    assert DecodeOptions().trim_borders is True
    padded = _jpeg(place(photo(16), (402, 402), (0, 0, 0)))
    assert hash_image(padded) == hash_image(padded, decode=DecodeOptions(trim_borders=True))
    assert hash_image(padded) != hash_image(padded, decode=DecodeOptions(trim_borders=False))
    pixels, box = grey_from_bytes(padded, "padded", DecodeOptions(trim_borders=False))
    assert pixels.shape == (101, 101) and box == (0.0, 0.0, 100.5, 100.5)


@pytest.mark.parametrize("value", [1, 0, "yes", None])
def test_trim_borders_must_be_a_bool(value: object) -> None:
    with pytest.raises(TypeError, match=r"^trim_borders must be a bool; got .+\.$"):
        DecodeOptions(trim_borders=value)  # type: ignore[arg-type]


def test_trim_borders_is_part_of_the_cache_key() -> None:
    assert hash_context(DecodeOptions(trim_borders=False)) != hash_context(TRIM)


def test_cli_trim_borders(tmp_path: Path) -> None:
    from leakaudit.cli import main

    train, test = tmp_path / "train", tmp_path / "test"
    train.mkdir()
    test.mkdir()
    (train / "orig.jpg").write_bytes(_jpeg(photo(5)))
    (test / "letterboxed.png").write_bytes(_png(place(photo(5), (402, 420), (0, 0, 0))))
    (test / "other.jpg").write_bytes(_jpeg(photo(6)))
    args = ["compare", str(train), str(test), "--no-cache", "--quiet", "--fail-on-leak", "0"]
    # Whole-image hashes alone miss the copy (the verified cascade's content entry, the
    # box inside the bars, finds it even untrimmed).
    assert main([*args, "--no-trim-borders", "--no-verify"]) == 0
    assert main([*args, "--no-trim-borders"]) == 1
    out = tmp_path / "report.json"
    assert main([*args, "--json", str(out)]) == 1  # trimmed by default
    import json

    report = json.loads(out.read_text())
    assert report["parameters"]["trim_borders"] is True
    assert report["n_leaked_images"] == 2


# ----------------------------------------------------------------- graphics on a transparent ground


def _sprite(seed: int, size: int) -> Image.Image:
    """An RGBA sprite: an anti-aliased ellipse body and a few shapes, on a transparent canvas.

    Drawn at 4x and reduced; margins of 8-30% of the canvas, different on each side.
    """
    rng = np.random.default_rng(seed)
    big = 4 * size
    canvas = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    draw = ImageDraw.Draw(canvas)
    left, top, right, bottom = (float(m) * big for m in rng.uniform(0.08, 0.3, 4))
    x0, y0, x1, y1 = left, top, big - right, big - bottom

    def colour() -> tuple[int, int, int, int]:
        return (*(int(c) for c in rng.integers(0, 200, 3)), 255)  # type: ignore[return-value]

    def point() -> tuple[float, float]:
        return float(rng.uniform(x0, x1)), float(rng.uniform(y0, y1))

    draw.ellipse((x0, y0, x1, y1), fill=colour())
    draw.polygon([point() for _ in range(4)], fill=colour())
    draw.line([point(), point()], fill=colour(), width=max(1, big // 25))
    (ax, ay), (bx, by) = point(), point()
    draw.ellipse((min(ax, bx), min(ay, by), max(ax, bx), max(ay, by)), fill=colour())
    return canvas.resize((size, size), Image.Resampling.LANCZOS)


def _gear_icon(seed: int, size: int) -> Image.Image:
    """An RGBA gear icon (pointed teeth, a hole) with a one-sixteenth margin."""
    rng = np.random.default_rng(seed)
    big = 4 * size
    canvas = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    draw = ImageDraw.Draw(canvas)
    centre, teeth = big / 2, int(rng.integers(6, 10))
    outer, inner = 0.45 * big, 0.34 * big
    points = []
    for k in range(4 * teeth):
        angle = 2 * np.pi * k / (4 * teeth)
        radius = outer if k % 4 in (1, 2) else inner
        points.append((centre + radius * np.cos(angle), centre + radius * np.sin(angle)))
    draw.polygon(points, fill=(*(int(c) for c in rng.integers(0, 200, 3)), 255))
    hole = 0.14 * big
    draw.ellipse((centre - hole, centre - hole, centre + hole, centre + hole), fill=(0, 0, 0, 0))
    return canvas.resize((size, size), Image.Resampling.LANCZOS)


def _flattened_jpeg(image: Image.Image, colour: tuple[int, int, int], quality: int) -> bytes:
    """What another tool saves: the RGBA flattened onto ``colour``, as JPEG."""
    flat = Image.new("RGB", image.size, colour)
    flat.paste(image, (0, 0), image)
    return _jpeg(flat, quality)


def _both_within(a: bytes, b: bytes) -> bool:
    ha, hb = hash_image(a, decode=TRIM), hash_image(b, decode=TRIM)
    phash, dhash = (ha.phash ^ hb.phash).bit_count(), (ha.dhash ^ hb.dhash).bit_count()
    return max(phash, dhash) <= THRESHOLD and not ha.low_information


GRAPHICS: dict[str, Callable[[int, int], Image.Image]] = {"sprite": _sprite, "gear": _gear_icon}


@pytest.mark.parametrize("quality", [90, 75])
@pytest.mark.parametrize("size", [32, 128, 256])
@pytest.mark.parametrize("kind", list(GRAPHICS))
def test_a_transparent_graphic_and_its_jpeg_on_white_hash_alike(
    kind: str, size: int, quality: int
) -> None:
    # The PNG's transparent margin flattens to exact white, the JPEG's rings next to the
    # shape: trimming them gave different boxes. A shape on a plain ground is hashed whole.
    for seed in range(6):
        graphic = GRAPHICS[kind](seed, size)
        original = _png(graphic)
        copy = _flattened_jpeg(graphic, (255, 255, 255), quality)
        assert _both_within(original, copy), seed
        assert hash_image(original, decode=TRIM) == hash_image(
            original, decode=DecodeOptions(trim_borders=False)
        )


@pytest.mark.parametrize("size", [32, 128])
@pytest.mark.parametrize("kind", list(GRAPHICS))
def test_a_graphic_flattened_onto_black_is_trimmed_as_its_flattened_png(
    kind: str, size: int
) -> None:
    # On black, the JPEG copy and the same graphic decoded with background=(0, 0, 0) see
    # the same ground: whatever the trim decides, it decides alike.
    black = DecodeOptions(background=(0, 0, 0), trim_borders=True)
    for seed in range(6):
        graphic = GRAPHICS[kind](seed, size)
        original = hash_image(_png(graphic), decode=black)
        copy = hash_image(_flattened_jpeg(graphic, (0, 0, 0), 90), decode=black)
        distance_ = max(
            (original.phash ^ copy.phash).bit_count(), (original.dhash ^ copy.dhash).bit_count()
        )
        assert distance_ <= THRESHOLD, seed


@pytest.mark.parametrize("size", [128, 256])
def test_a_graphic_on_a_plain_ground_is_never_trimmed(size: int) -> None:
    # (Smaller images are not trimmed at all: test_small_images_are_never_trimmed.)
    for seed in range(6):
        graphic = _sprite(seed, size)
        for data in (_png(graphic), _flattened_jpeg(graphic, (255, 255, 255), 75)):
            pixels, box = grey_from_bytes(data, "sprite", DecodeOptions(trim_borders=False))
            assert trim_box(pixels, box) is None


def test_small_images_are_never_trimmed() -> None:
    # Decoded unreduced, a small JPEG's blocks ring across its few-pixel margins.
    small = place(photo(17, (100, 75)), (100, 100), (0, 0, 0))
    assert not trim_allowed(small.size) and trim_allowed((128, 400))
    for data in (_png(small), _jpeg(small)):
        assert hash_image(data, decode=TRIM) == hash_image(
            data, decode=DecodeOptions(trim_borders=False)
        )
    pixels, box = grey_from_pil(small, "small", DecodeOptions(trim_borders=False))
    assert trim_box(pixels, box) is not None  # trim_box itself would trim it


@pytest.mark.parametrize("colour", [(0, 0, 0), (255, 255, 255)])
def test_a_letterboxed_photo_is_still_trimmed(colour: tuple[int, int, int]) -> None:
    # The case the trim is for: the photo fills the box to its corners.
    for seed in (31, 32, 33):
        image = photo(seed)
        boxed = place(image, (image.width, image.width), colour)
        for data in (_png(boxed), _jpeg(boxed, 75)):
            pixels, _ = grey_from_bytes(data, "boxed", TRIM)
            assert pixels.shape[0] < pixels.shape[1] - 15
            assert distance(_jpeg(image), data) <= THRESHOLD


# ---------------------------------------------------------------- the content entry's box


def _figure_canvas(side: int = 48) -> np.ndarray:
    """A grey figure with an uneven outline on a white (flattened transparent) canvas."""
    canvas = np.full((side, side), 255, dtype=np.uint8)
    canvas[12:36, 16:30] = 90  # body
    canvas[8:12, 20:26] = 40  # head, narrower than the body
    canvas[20:24, 10:16] = 60  # an arm
    return canvas


def _framed(canvas: np.ndarray, pad: tuple[int, int], value: int) -> np.ndarray:
    rows, cols = pad
    out = np.full((canvas.shape[0] + 2 * rows, canvas.shape[1] + 2 * cols), value, np.uint8)
    out[rows : rows + canvas.shape[0], cols : cols + canvas.shape[1]] = canvas
    return out


@pytest.mark.parametrize(
    ("pad", "value"),
    [((0, 0), 0), ((5, 5), 0), ((5, 5), 128), ((0, 21), 0), ((9, 0), 30), ((5, 5), 255)],
)
def test_content_box_peels_nested_backgrounds_to_the_figure(
    pad: tuple[int, int], value: int
) -> None:
    # A transparent sprite flattened onto white, padded or letterboxed with black or grey:
    # the bars come off, then the white margin, down to the same figure box.

    framed = _framed(_figure_canvas(), pad, value)
    rows, cols = pad
    assert content_box(framed) == (10.0 + cols, 8.0 + rows, 30.0 + cols, 36.0 + rows)


def test_content_box_keeps_a_flat_figure_and_ignores_pictures_without_background() -> None:

    flat = _framed(np.full((10, 10), 200, np.uint8), (15, 15), 0)  # a flat block: kept whole
    assert content_box(flat) == (15.0, 15.0, 25.0, 25.0)
    assert content_box(np.asarray(photo(5).convert("L"))) is None  # nothing uniform to peel
    assert content_box(np.full((30, 30), 7, np.uint8)) is None  # blank: no content


@pytest.mark.parametrize("layout", ["pad_black", "pad_grey", "letterbox_black"])
def test_a_transparent_sprite_padded_or_letterboxed_on_a_colour_is_found(
    tmp_path: Path, layout: str
) -> None:
    # The copy is a coloured frame around the sprite's own transparent canvas (flattened
    # onto white): the content entry peels the frame, then the white, down to the figure.
    sprite = Image.new("RGBA", (256, 256), (0, 0, 0, 0))
    draw = ImageDraw.Draw(sprite)
    draw.ellipse((88, 24, 168, 104), fill=(240, 200, 160, 255), outline=(40, 20, 10, 255), width=6)
    draw.rectangle(
        (96, 104, 160, 192), fill=(40, 120, 200, 255), outline=(20, 20, 20, 255), width=6
    )
    draw.line((96, 120, 40, 88), fill=(20, 20, 20, 255), width=12)
    draw.line((160, 120, 216, 160), fill=(20, 20, 20, 255), width=12)
    draw.line((112, 192, 96, 248), fill=(20, 20, 60, 255), width=12)
    draw.line((144, 192, 168, 248), fill=(20, 20, 60, 255), width=12)
    sprite = sprite.resize((64, 64), Image.Resampling.LANCZOS)
    colour = {"pad_black": 0, "pad_grey": 128, "letterbox_black": 0}[layout]
    size = (114, 64) if layout == "letterbox_black" else (78, 78)
    copy = Image.new("RGBA", size, (colour, colour, colour, 255))
    copy.paste(sprite, ((size[0] - 64) // 2, (size[1] - 64) // 2))  # keeps the transparency
    train, test = tmp_path / "train.png", tmp_path / "test.png"
    sprite.save(train)
    copy.save(test)
    report = audit_splits({"train": [str(train)], "test": [str(test)]}, cache=False, workers=1)
    assert report.n_leaked_images == 2


@pytest.mark.parametrize(
    "halves",
    ["top-bottom", "left-right"],
)
def test_content_box_of_two_flat_halves_warns_nothing(halves: str) -> None:
    # Each side peels its own flat half: nothing is left, so the layer was the content.
    image = np.zeros((40, 60), dtype=np.uint8)
    if halves == "top-bottom":
        image[20:] = 255
    else:
        image[:, 30:] = 255
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert content_box(image) is None
