"""The batched hashing path gives, bit for bit, what hashing one image at a time gives.

``hash_sources`` decodes a chunk of images together (``loading.greys_and_notes``) and
hashes them together (``hashing._hash_reduced_batch``: images of one size stacked,
the crop entries of many thumbnails in a few products). ``hash_image`` still takes
one image through the per-image functions; these tests hold the two paths equal on
seeded images of mixed sizes, modes and formats, with unreadable files in the mix.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from typing import Any

import imagegen
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from leakaudit import _decode, _jpegscan, hashing, loading
from leakaudit.errors import ImageLoadError
from leakaudit.hashing import hash_image, hash_sources
from leakaudit.loading import DecodeOptions, ImageDecodeWarning

OPTIONS = {
    "plain": ({}, DecodeOptions()),
    "dihedral": ({"dihedral": True}, DecodeOptions()),
    "audit": ({"dihedral": True, "crop_entries": True}, DecodeOptions()),
    "full-size": ({"dihedral": True, "crop_entries": True}, DecodeOptions(min_side=None)),
    "untrimmed": (
        {"dihedral": True, "crop_entries": True},
        DecodeOptions(trim_borders=False, exif_transpose=False),
    ),
    "small-side": ({}, DecodeOptions(min_side=16, background=(0, 0, 0))),
}


def _corrupt_exif_jpeg(seed: int) -> bytes:
    exif = Image.Exif()
    exif[0x010E] = "x" * 200
    return imagegen.encode(imagegen.photo_like(seed), "JPEG", exif=exif.tobytes()[:20])


def _padded(seed: int, size: tuple[int, int], colour: tuple[int, int, int]) -> Image.Image:
    canvas = Image.new("RGB", (size[0] + 60, size[1] + 40), colour)
    canvas.paste(imagegen.photo_like(seed, size), (30, 20))
    return canvas


def _oriented(seed: int, orientation: int, size: tuple[int, int]) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return imagegen.encode(imagegen.photo_like(seed, size), "JPEG", exif=exif.tobytes())


def mixed_sources(tmp_path: Path) -> list[Any]:
    """Paths, bytes and PIL images: many of a few sizes (stacked) and odd ones, bad ones too."""
    rng = np.random.default_rng(14)
    sources: list[Any] = []
    shared = [(32, 32), (64, 64), (500, 375), (160, 120)]
    for k in range(96):
        size = shared[k % len(shared)] if k % 5 else tuple(int(v) for v in rng.integers(9, 300, 2))
        image = imagegen.photo_like(k, size)
        kind = k % 9
        if kind == 0:
            sources.append(imagegen.encode(image, "PNG"))
        elif kind == 1:
            sources.append(imagegen.encode(image, "JPEG", quality=int(rng.integers(50, 98))))
        elif kind == 2:
            sources.append(image.convert("L"))
        elif kind == 3:
            sources.append(imagegen.encode(image.convert("P"), "PNG"))
        elif kind == 4:
            sources.append(_oriented(k, int(rng.integers(2, 9)), size))
        elif kind == 5:
            sources.append(imagegen.encode(_padded(k, size, (0, 0, 0)), "PNG"))
        elif kind == 6:
            sources.append(imagegen.encode(imagegen.icon(k, k + 1, 40 + k), "PNG"))
        elif kind == 7:
            sources.append(imagegen.encode(imagegen.flat_with_noise(90, 1.0, seed=k), "JPEG"))
        else:
            sources.append(image)
    sources += [
        imagegen.truncated(imagegen.encode(imagegen.photo_like(1, (64, 64)), "JPEG")),
        imagegen.truncated(imagegen.encode(imagegen.photo_like(2, (32, 32)), "PNG")),
        b"not an image",
        b"",
        imagegen.bomb_png(),
        _corrupt_exif_jpeg(3),
        imagegen.encode(Image.new("RGB", (50, 40), (10, 200, 30)), "PNG"),
    ]
    files = tmp_path / "files"
    files.mkdir()
    as_paths: list[Any] = []
    for i, source in enumerate(sources):
        if i % 4 == 1 and isinstance(source, bytes):
            path = files / f"{i:03d}.img"
            path.write_bytes(source)
            as_paths.append(str(path))
        else:
            as_paths.append(source)
    as_paths.insert(17, str(tmp_path / "missing.jpg"))
    as_paths.insert(40, str(files))
    order = np.random.default_rng(0).permutation(len(as_paths))
    return [as_paths[i] for i in order]


def one_by_one(
    sources: list[Any], decode: DecodeOptions, dihedral: bool, crop_entries: bool = False
) -> list[hashing.ImageHashes | str]:
    out: list[hashing.ImageHashes | str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ImageDecodeWarning)
        for source in sources:
            try:
                out.append(
                    hash_image(source, decode=decode, dihedral=dihedral, crop_entries=crop_entries)
                )
            except ImageLoadError as exc:
                out.append(exc.reason)
    return out


@pytest.mark.parametrize("name", list(OPTIONS))
def test_batched_table_equals_hash_image(tmp_path: Path, name: str) -> None:
    kwargs, decode = OPTIONS[name]
    sources = mixed_sources(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = hash_sources(sources, decode=decode, workers=1, on_error="ignore", **kwargs)
    expected = one_by_one(
        sources, decode, bool(kwargs.get("dihedral")), bool(kwargs.get("crop_entries"))
    )
    assert len(table) == len(expected)
    for row, want in enumerate(expected):
        if isinstance(want, str):
            assert not table.valid[row]
            assert table.errors[row] == want
            continue
        assert table.valid[row], table.errors.get(row)
        got = (int(table.phash[row]), int(table.dhash[row]), bool(table.low_information[row]))
        assert got == (want.phash, want.dhash, want.low_information), table.sources[row]
        assert int(table.digest[row]) == want.digest
        if table.orientations is not None:
            phash, dhash = table.orientations.of_row(row)
            assert list(zip(phash.tolist(), dhash.tolist(), strict=True)) == list(want.orientations)
            start, stop = np.searchsorted(table.orientations.owner, [row, row + 1])
            assert table.orientations.kind[start:stop].tolist() == list(want.kinds)
    assert table.orientations is not None or not kwargs
    # The corrupt EXIF block is named in one summary warning, as before batching.
    notes = [str(w.message) for w in caught if issubclass(w.category, ImageDecodeWarning)]
    assert len(notes) == 1 and "Corrupt EXIF data" in notes[0]


def test_chunks_with_failures_raise_the_first_in_input_order(tmp_path: Path) -> None:
    sources = mixed_sources(tmp_path)
    first = next(
        i for i, r in enumerate(one_by_one(sources, DecodeOptions(), False)) if isinstance(r, str)
    )
    with pytest.raises(ImageLoadError) as raised:
        hash_sources(sources, workers=1, on_error="raise")
    assert raised.value.path == hashing.source_name(sources[first], first)


@pytest.mark.filterwarnings("ignore::leakaudit.loading.ImageDecodeWarning")
def test_batches_of_any_length_agree(tmp_path: Path) -> None:
    sources = mixed_sources(tmp_path)
    names = [hashing.source_name(source, i) for i, source in enumerate(sources)]
    whole = hash_sources(sources, workers=1, on_error="ignore", dihedral=True)
    assert whole.orientations is not None
    for size in (1, 2, 7, 50):
        values, errors, owners = [], {}, []
        for start in range(0, len(sources), size):
            part = hashing._hash_items(
                sources[start : start + size], names[start : start + size], DecodeOptions(), True
            )
            values.append(part[0])
            errors.update({start + k: reason for k, reason in part[2].items()})
            owners.append(part[3][:, 0].astype(np.int64) + start)
        assert np.array_equal(np.concatenate(values)[:, 0], whole.phash)
        assert np.array_equal(np.concatenate(values)[:, 2], whole.digest)
        assert errors == whole.errors
        assert np.array_equal(np.concatenate(owners), whole.orientations.owner)


# ------------------------------------------------------------------ numeric parts


def _views(seed: int, shape: tuple[int, int], count: int) -> list[Any]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(count)]


BOXES = [
    None,
    (0.0, 0.0, 125.0, 93.75),
    (0.5, 0.0, 63.0, 135.0),
    (0.3, 0.125, 62.7, 46.9),
]


@pytest.mark.parametrize(
    "shape", [(32, 32), (64, 64), (94, 125), (136, 64), (47, 63), (300, 40), (8, 9), (5, 7)]
)
def test_stacked_thumbnails_equal_per_image(shape: tuple[int, int]) -> None:
    for box in BOXES:
        if box is not None and (box[2] > shape[1] or box[3] > shape[0]):
            continue
        stack = np.stack(_views(shape[0] * shape[1], shape, 5))
        thumbs, strips = hashing._stack_thumbnails(stack, box)
        for k, pixels in enumerate(stack):
            thumb, strip = hashing._thumbnails(pixels, box)
            assert np.array_equal(thumbs[k], thumb) and np.array_equal(strips[k], strip)
        # and both equal Pillow's own resize
        image = Image.fromarray(stack[0])
        pillow = np.asarray(image.resize((32, 32), Image.Resampling.LANCZOS, box=box))
        assert np.array_equal(thumbs[0], pillow)


@pytest.mark.parametrize(
    ("shape", "count", "box"),
    [
        ((64, 64), 40, None),  # products in several row and column slices
        ((30, 140), 24, (0.5, 0.0, 139.5, 30.0)),
        ((140, 30), 24, None),  # the vertical pass first
        ((32, 32), 70, None),  # the thumbnail is the image itself
        ((33, 33), 9, None),
    ],
)
def test_large_stacks_equal_per_image(
    shape: tuple[int, int], count: int, box: tuple[float, float, float, float] | None
) -> None:
    stack = np.stack(_views(count, shape, count))
    thumbs, strips = hashing._stack_thumbnails(stack, box)
    for k, pixels in enumerate(stack):
        thumb, strip = hashing._thumbnails(pixels, box)
        assert np.array_equal(thumbs[k], thumb) and np.array_equal(strips[k], strip)


def test_bands_cover_each_output_once() -> None:
    for in_size, out_size, span in [(64, 32, None), (64, 9, None), (125, 32, (0.0, 125.0))]:
        bands = hashing._bands(in_size, out_size, span)
        assert bands is not None
        weights = hashing._lanczos_weights(in_size, out_size, span)
        rebuilt = np.zeros_like(weights)
        for first, stop, low, high, block, transposed in bands:
            assert np.array_equal(block.T, transposed)
            rebuilt[first:stop, low:high] = block
        assert np.array_equal(rebuilt, weights)
    assert hashing._bands(32, 32, None) is None  # the identity: Pillow copies the pixels


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    shapes=st.lists(st.tuples(st.integers(4, 140), st.integers(4, 140)), min_size=1, max_size=3),
    count=st.integers(1, 12),
    dihedral=st.booleans(),
    crop=st.booleans(),
)
def test_batch_equals_per_image_hashes(
    seed: int, shapes: list[tuple[int, int]], count: int, dihedral: bool, crop: bool
) -> None:
    rng = np.random.default_rng(seed)
    views: list[tuple[Any, Any]] = []
    for k in range(count):
        height, width = shapes[k % len(shapes)]
        coarse = rng.integers(0, 256, (4, 4), dtype=np.uint8)
        smooth = np.asarray(
            Image.fromarray(coarse).resize((width, height), Image.Resampling.BILINEAR)
        )
        pixels = np.clip(smooth + rng.integers(-3, 4, smooth.shape), 0, 255).astype(np.uint8)
        if k % 3 == 1:
            pixels = np.full_like(pixels, int(rng.integers(0, 256)))  # low information
        if k % 4 == 2:
            pixels = pixels.T  # a transposed (non-contiguous) view, as an EXIF turn gives
        box = None
        if k % 2 and min(pixels.shape) > 2:
            box = (0.0, 0.0, pixels.shape[1] - 0.25, pixels.shape[0] - 0.5)
        views.append((pixels, box))
    phash, dhash, low, entries = hashing._hash_reduced_batch(views, dihedral, crop)
    for k, view in enumerate(views):
        one = hashing._hash_reduced(view, dihedral, crop)
        assert (int(phash[k]), int(dhash[k]), bool(low[k])) == one[:3]
        mine = [(int(p), int(d)) for owner, p, d, _ in entries.tolist() if owner == k]
        assert mine == one[3]
        kinds = [kind for owner, _, _, kind in entries.tolist() if owner == k]
        assert kinds == [int(kind) for kind in hashing.entry_kinds(np.zeros(len(mine), np.int64))]


def test_fast_crop_products_give_the_reference_floats() -> None:
    rng = np.random.default_rng(3)
    bases = np.floor(rng.random((70, 32, 32)) * 256.0)
    reference = hashing._crop_bands(bases)
    per_image = [hashing._crop_entries_of_thumbnail(base) for base in bases]
    hashes = hashing._stack_crop_entries(bases)
    for k in range(len(bases)):
        assert list(zip(hashes[0][k].tolist(), hashes[1][k].tolist(), strict=True)) == per_image[k]
    if hashing._fast_crop_products():
        fast = hashing._crop_bands_fast(bases)
        assert all(np.array_equal(a, b) for a, b in zip(fast, reference, strict=True))


def test_row_medians_equal_numpy_median() -> None:
    rng = np.random.default_rng(5)
    values = rng.normal(size=(200, 64))
    values[:20, :40] = 0.0  # ties at the middle
    assert np.array_equal(hashing._row_medians(values), np.median(values, axis=1))


@settings(max_examples=300, deadline=None)
@given(
    in_size=st.integers(1, 2000),
    out_size=st.sampled_from([1, 8, 9, 32, 33, 64]),
    span=st.one_of(
        st.none(),
        st.tuples(st.floats(0.0, 0.6), st.floats(0.4, 1.0)).filter(lambda s: s[1] - s[0] > 0.01),
    ),
)
def test_vectorised_lanczos_weights_equal_the_reference(
    in_size: int, out_size: int, span: tuple[float, float] | None
) -> None:
    # Every coefficient bit for bit: the vectorised weights (all outputs at once) against
    # the coefficient-at-a-time reference that follows Pillow's C loop.
    box = None if span is None else (span[0] * in_size, span[1] * in_size)
    hashing._lanczos_weights.cache_clear()
    fast = hashing._lanczos_weights(in_size, out_size, box)
    reference = hashing._lanczos_weights_reference(in_size, out_size, box)
    assert hashing._numpy_sine_is_libm()  # else the fast path is the reference itself
    assert fast.shape == reference.shape and np.array_equal(fast, reference)


def test_vectorised_lanczos_weights_resize_as_pillow_does() -> None:
    rng = np.random.default_rng(11)
    for _ in range(40):
        height, width = (int(v) for v in rng.integers(40, 700, 2))
        pixels = rng.integers(0, 256, (height, width), dtype=np.uint8)
        x0, y0 = float(rng.uniform(0, width * 0.2)), float(rng.uniform(0, height * 0.2))
        x1, y1 = float(rng.uniform(width * 0.8, width)), float(rng.uniform(height * 0.8, height))
        expected = np.asarray(
            Image.fromarray(pixels).resize((32, 32), Image.Resampling.LANCZOS, box=(x0, y0, x1, y1))
        )
        thumb, _ = hashing._thumbnails(pixels, (x0, y0, x1, y1))
        assert np.array_equal(thumb, expected)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 60), st.floats(-5, 100), st.floats(0.01, 1.0), st.integers(0, 40))
def test_inlined_lanczos_taps(first: int, center: float, inverse: float, count: int) -> None:
    expected = [hashing._lanczos((x - center + 0.5) * inverse) for x in range(first, first + count)]
    assert hashing._lanczos_taps(first, first + count, center, inverse) == expected


# ---------------------------------------------------------------------- decoding


def test_decode_batch_equals_one_at_a_time(tmp_path: Path) -> None:
    sources = [s for s in mixed_sources(tmp_path) if not isinstance(s, str)]
    names = [f"item {i}" for i in range(len(sources))]
    for options in (DecodeOptions(), DecodeOptions(exif_transpose=False, trim_borders=False)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ImageDecodeWarning)
            batch, notes = loading.greys_and_notes(sources, names, options)
        for i, source in enumerate(sources):
            try:
                if isinstance(source, Image.Image):
                    one, note = loading.grey_and_note_from_pil(source, names[i], options)
                else:
                    one, note = loading.grey_and_note_from_bytes(source, names[i], options)
            except ImageLoadError as exc:
                assert batch[i] == exc.reason
                continue
            got = batch[i]
            assert not isinstance(got, str)
            assert np.array_equal(got.pixels, one.pixels) and got.box == one.box
            assert notes.get(i, "") == note


def test_orientation_shortcut_agrees_with_getexif() -> None:
    photo = imagegen.photo_like(7, (40, 30))
    exif = Image.Exif()
    exif[0x0112] = 6
    xmp = b'<x:xmpmeta><rdf:Description tiff:Orientation="3"/></x:xmpmeta>'
    encoded = [
        imagegen.encode(photo, "JPEG"),
        imagegen.encode(photo, "JPEG", exif=exif.tobytes()),
        imagegen.encode(photo, "PNG"),
        imagegen.encode(photo, "PNG", exif=exif.tobytes()),
        imagegen.encode(photo, "TIFF"),
        imagegen.encode(photo, "WEBP", exif=exif.tobytes()),
        imagegen.encode(photo, "JPEG", xmp=xmp),
    ]
    for data in encoded:
        with Image.open(io.BytesIO(data)) as fresh, Image.open(io.BytesIO(data)) as other:
            fresh.load()
            other.load()
            assert _decode.loaded_orientation(fresh) == _decode.exif_orientation(other)


def _walked_alone(data: bytes) -> bool:
    _jpegscan._last_jpeg_header = None  # forget the last header: a walk from the start
    return _jpegscan.jpeg_scans_short(data)


def test_jpeg_scan_check_with_a_remembered_header() -> None:
    photos = [imagegen.photo_like(seed, (120, 90)) for seed in range(6)]
    files = [imagegen.encode(photo, "JPEG", quality=90) for photo in photos]
    cut = [data[: data.index(b"\xff\xda") + 40] + b"\xff\xd9" for data in files]
    rng = np.random.default_rng(2)
    flipped = []
    for data in files:
        damaged = bytearray(data)
        for position in rng.integers(2, len(data), 3).tolist():
            damaged[position] = 0xFF
        flipped.append(bytes(damaged))
    everything = files + cut + flipped
    expected = [_walked_alone(data) for data in everything]
    assert expected[: len(files)] == [False] * len(files)
    assert expected[len(files) : 2 * len(files)] == [True] * len(cut)
    # The same answers whichever file was walked before (and primed the header memo).
    for order in (
        everything,
        everything[::-1],
        [x for pair in zip(files, cut, flipped, strict=True) for x in pair],
    ):
        answers = {id(data): _jpegscan.jpeg_scans_short(data) for data in order}
        assert [answers[id(data)] for data in everything] == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=64), st.integers(0, 64), st.integers(0, 64))
def test_scan_window_search(data: bytes, start: int, length: int) -> None:
    data = data.replace(b"\x01", b"\xff")  # plenty of 0xFF bytes
    stop = start + length
    early = _jpegscan._SCAN_END.search(data, start, stop + 1)
    expected = early is not None and early.start() < stop
    assert _jpegscan._scan_ends_within(data, start, stop) == expected


def test_small_files_read_whole(tmp_path: Path) -> None:
    data = imagegen.encode(imagegen.photo_like(1), "PNG")
    path = tmp_path / "a.png"
    path.write_bytes(data)
    assert loading.read_source(str(path), "x") == (str(path), data)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(ImageLoadError, match="empty file"):
        hash_image(empty)
    with pytest.raises(ImageLoadError, match="file too large"):
        loading.read_source(str(path), "x", DecodeOptions(max_file_bytes=len(data) - 1))


def test_a_pixel_budget_splits_the_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = [s for s in mixed_sources(tmp_path) if not isinstance(s, str)]
    names = [f"item {i}" for i in range(len(sources))]
    options = DecodeOptions(min_side=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ImageDecodeWarning)
        whole, _ = loading.greys_and_notes(sources, names, options)
        first, _ = loading.greys_and_notes(sources, names, options, pixel_budget=1)
        assert len(first) == next(i for i, r in enumerate(whole) if not isinstance(r, str)) + 1
        expected = hash_sources(
            sources, decode=options, workers=1, on_error="ignore", dihedral=True
        )
        monkeypatch.setattr(hashing._batch, "_BATCH_PIXELS", 50_000)  # a few images per decode
        split = hash_sources(sources, decode=options, workers=1, on_error="ignore", dihedral=True)
    assert np.array_equal(split.phash, expected.phash) and split.errors == expected.errors
    assert split.orientations is not None and expected.orientations is not None
    assert np.array_equal(split.orientations.phash, expected.orientations.phash)


def test_hashes_and_notes_is_hash_sources_without_the_policy(tmp_path: Path) -> None:
    sources = mixed_sources(tmp_path)
    names = [hashing.source_name(source, i) for i, source in enumerate(sources)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # it warns about nothing itself
        table, notes = hashing.hashes_and_notes(sources, names, dihedral=True, crop_entries=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = hash_sources(
            sources,
            workers=1,
            on_error="ignore",
            dihedral=True,
            crop_entries=True,
        )
    assert table.sources == expected.sources and table.errors == expected.errors
    for column in ("phash", "dhash", "digest", "low_information", "valid"):
        assert np.array_equal(getattr(table, column), getattr(expected, column))
    assert table.orientations is not None and expected.orientations is not None
    assert np.array_equal(table.orientations.owner, expected.orientations.owner)
    assert np.array_equal(table.orientations.dhash, expected.orientations.dhash)
    assert len(notes) == 1 and "Corrupt EXIF data" in next(iter(notes.values()))
    with pytest.raises(ValueError, match="names must have one entry per source"):
        hashing.hashes_and_notes(sources, names[:-1])


def _grey_photo(seed: int, width: int, height: int) -> Any:
    photo = Image.fromarray(imagegen.photo_like_array(seed, (width, height)))
    return np.asarray(photo.convert("L"))


# Wide and tall sizes (4:3, 16:9, a panorama, near the strip aspect), whole and trimmed.
_STRIP_SIZES = ((125, 94), (240, 135), (94, 125), (135, 240), (400, 70), (63, 47), (130, 100))
_STRIP_TRIMS = (None, (0.0, 0.0, -0.25, -0.5), (1.5, 0.25, -3.0, -0.75))


def _strip_views(copies: int) -> list[tuple[Any, Any]]:
    views: list[tuple[Any, Any]] = []
    for n, (width, height) in enumerate(_STRIP_SIZES):
        for trim in _STRIP_TRIMS:
            box = None
            if trim is not None:
                box = (trim[0], trim[1], width + trim[2], height + trim[3])
            for copy in range(copies):
                pixels = _grey_photo(100 * n + copy, width, height)
                views.append((np.asfortranarray(pixels) if copy % 2 else pixels, box))
    return views


def test_stacked_strip_entries_equal_strip_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    # Several images of each size and trim stacked, in more than one chunk.
    monkeypatch.setattr(hashing._strips, "_STRIP_VALUES", 40_000)
    monkeypatch.setattr(hashing._strips, "_STRIP_STACK_MIN", 1)
    views = _strip_views(5)
    stacked = hashing._strips._stack_strip_entries(views)
    assert sum(len(phash) for phash, _ in stacked) > 0
    for view, (phash, dhash) in zip(views, stacked, strict=True):
        reference = hashing.strip_entries(*view)
        assert phash.tolist() == reference[0].tolist()
        assert dhash.tolist() == reference[1].tolist()
    # A square image has none; a tall one has bands.
    square = (_grey_photo(7, 80, 80), None)
    assert [len(p) for p, _ in hashing._strips._stack_strip_entries([square])] == [0]


def test_strip_passes_are_exact() -> None:
    # The stacked strip entries rearrange strip_entries' products across the strips,
    # which gives the same floats only because every partial sum is exact: 8-bit
    # pixels times two passes of weights in units of 2**-22 stay below 2**9.
    for tall in (False, True):
        rows, cols, rows_d, cols_d = hashing._strips._strip_resamplers(tall)
        for along, across in ((rows, cols), (rows_d, cols_d)):
            for weights in (along, across.T):
                assert np.array_equal(np.rint(weights * 2.0**22), weights * 2.0**22)
            bound = 255.0 * np.abs(along).sum(axis=1).max() * np.abs(across).sum(axis=0).max()
            assert bound < 2.0**9


def test_hash_reduced_equals_batch_with_strips(monkeypatch: pytest.MonkeyPatch) -> None:
    # The single-image path (strip_entries) and the batch path (stacked strips) give
    # every image the same entries, strips included.
    monkeypatch.setattr(hashing._strips, "_STRIP_STACK_MIN", 1)
    views = _strip_views(2)
    phash, dhash, low, entries = hashing._hash_reduced_batch(views, True, True)
    strips = 0
    for k, view in enumerate(views):
        one = hashing._hash_reduced(view, True, True)
        assert (int(phash[k]), int(dhash[k]), bool(low[k])) == one[:3]
        mine = entries[entries[:, 0] == k]
        assert [(int(p), int(d)) for _, p, d, _ in mine.tolist()] == one[3]
        strips += int((mine[:, 3] == hashing.EntryKind.STRIP).sum())
    assert strips > 0
