"""Memory one image may cost: formats decoded at full size are bounded by ``max_decode_pixels``.

Issue 23, point 9: under Pillow's pixel limit (178.9M) a few-KB PNG or WebP of a large
canvas cost 1 to 4 GB to decode, and verification let Pillow's DecompressionBombWarning
reach the user. Peak memory is measured in a subprocess (``ru_maxrss``).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import imagegen
import numpy as np
import pytest
from PIL import Image, features

from leakaudit.errors import ImageLoadError
from leakaudit.hashing import UnreadableImageWarning, hash_sources
from leakaudit.loading import DecodeOptions, load_reduced_grey
from leakaudit.verify import load_view

LINUX = sys.platform.startswith("linux")

_MEASURE = textwrap.dedent(
    """
    import json, resource, sys, warnings
    from PIL import Image
    from leakaudit.errors import ImageLoadError
    from leakaudit.hashing import hash_sources
    from leakaudit.verify import load_view

    Image.init()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = hash_sources(sys.argv[1:], workers=1)
        views = {}
        for path in sys.argv[1:]:
            try:
                load_view(path, path)
                views[path] = "decoded"
            except ImageLoadError as exc:
                views[path] = str(exc)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    errors = {table.sources[i]: reason for i, reason in table.errors.items()}
    shown = [[w.category.__name__, str(w.message)] for w in caught]
    print(json.dumps({"errors": errors, "views": views, "warnings": shown,
                      "growth_kib": after - before}))
    """
)


def _large_canvases(directory: Path) -> list[Path]:
    """A 12000 x 12000 single-colour PNG (a few hundred KB) and, with WebP support, a WebP."""
    png = directory / "canvas.png"
    png.write_bytes(imagegen.flat_png(12000, 12000))
    paths = [png]
    if features.check("webp"):
        webp = directory / "canvas.webp"
        buffer = io.BytesIO()
        Image.new("L", (12000, 12000), 90).save(buffer, "WEBP", lossless=True, method=0)
        webp.write_bytes(buffer.getvalue())  # tens of bytes
        paths.append(webp)
    return paths


@pytest.mark.skipif(not LINUX, reason="ru_maxrss is in KiB on Linux")
def test_large_canvases_are_refused_before_decoding(tmp_path: Path) -> None:
    paths = _large_canvases(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", _MEASURE, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout)
    reason = (
        "too large to decode at full size: 12000x12000 = 144000000 pixels exceeds "
        f"max_decode_pixels={DecodeOptions().max_decode_pixels} (only JPEGs are decoded reduced)"
    )
    for path in map(str, paths):
        assert measured["errors"][path] == reason
        assert measured["views"][path] == f"{path}: {reason}"
    # Our own warning names every file; Pillow's never reaches the user.
    categories = [category for category, _ in measured["warnings"]]
    assert categories == ["UnreadableImageWarning"]
    assert all(str(path) in measured["warnings"][0][1] for path in paths)
    # Decoding them cost 1.3 to 2.7 GB before the limit; refused from the header, nothing.
    assert measured["growth_kib"] < 64 * 1024


def test_max_decode_pixels_is_an_option(tmp_path: Path) -> None:
    path = tmp_path / "wide.png"
    path.write_bytes(imagegen.flat_png(400, 300))
    small = DecodeOptions(max_decode_pixels=100_000)
    with pytest.warns(UnreadableImageWarning, match=r"wide\.png"):
        table = hash_sources([str(path)], decode=small)
    assert table.errors[0].startswith("too large to decode at full size: 400x300 = 120000 pixels")
    with pytest.raises(ImageLoadError, match=r"wide\.png: too large to decode"):
        load_view(str(path), str(path), small)
    # The limit is for full-size decodes: a JPEG of the same size decodes reduced.
    jpeg = tmp_path / "photo.jpg"
    jpeg.write_bytes(imagegen.encode(imagegen.photo_like(1, (400, 300)), "JPEG"))
    assert hash_sources([str(jpeg)], decode=small).errors == {}
    load_view(str(jpeg), str(jpeg), small)
    # Raised, the PNG decodes.
    assert hash_sources([str(path)], decode=DecodeOptions(max_decode_pixels=120_000)).errors == {}
    with pytest.raises(ValueError, match="max_decode_pixels must be an int >= 1"):
        DecodeOptions(max_decode_pixels=0)


def test_pillow_bomb_warning_never_reaches_the_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pillow warns above its MAX_IMAGE_PIXELS (89.5M by default); lowered here so a
    # small image is over it, as a 100-megapixel scan is by default.
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1_500_000)
    path = tmp_path / "scan.png"
    path.write_bytes(imagegen.flat_png(1600, 1600))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = hash_sources([str(path)])
        load_view(str(path), str(path))
    assert table.errors == {}
    assert [w for w in caught if issubclass(w.category, Image.DecompressionBombWarning)] == []


@pytest.mark.parametrize("mode", ["I;16", "I", "F"])
def test_wide_grey_conversion_is_unchanged_by_blocks(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The 16/32-bit conversion runs in blocks of rows; a block far smaller than the
    # image gives the same pixels as one block for all.
    rng = np.random.default_rng(5)
    values = rng.uniform(0, 1.0 if mode == "F" else 60000, size=(70, 90))
    if mode == "F":
        values[3, 4] = np.nan
    dtype = {"I;16": np.uint16, "I": np.int32, "F": np.float32}[mode]
    image = Image.fromarray(values.astype(dtype), mode=mode if mode != "I;16" else None)
    assert image.mode == mode
    whole = np.asarray(load_reduced_grey(image, decode=DecodeOptions(min_side=None)))
    monkeypatch.setattr("leakaudit._greyscale._WIDE_BLOCK", 7)
    blocks = np.asarray(load_reduced_grey(image, decode=DecodeOptions(min_side=None)))
    assert np.array_equal(whole, blocks)
    assert whole.max() > 200  # rescaled, not clipped or zeroed
