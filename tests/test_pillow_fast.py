"""Issue 26.5: Pillow's private API has one gated home, ``leakaudit._pillow_fast``.

With ``LEAKAUDIT_PILLOW_FAST=0`` (or a Pillow outside the tested range) decoding uses
Pillow's public API only and gives the same pixels, boxes and hashes.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import imagegen
import numpy as np
import pytest
import tomllib
from PIL import Image

import leakaudit
from leakaudit import _pillow_fast

ROOT = Path(__file__).resolve().parents[1]


def test_tested_floor_is_the_declared_floor() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (spec,) = [d for d in project["dependencies"] if d.lower().startswith("pillow")]
    floor = re.fullmatch(r"pillow\s*>=\s*([0-9.]+)", spec, re.IGNORECASE)
    assert floor is not None
    assert tuple(int(part) for part in floor[1].split(".")[:2]) == _pillow_fast.TESTED_FLOOR


@pytest.mark.parametrize(
    ("version", "tested"),
    [
        ("10.4.0", True),
        ("11.3.0", True),
        (f"{_pillow_fast.TESTED_MAJOR}.9.1", True),
        ("10.3.0", False),
        ("9.5.0", False),
        (f"{_pillow_fast.TESTED_MAJOR + 1}.0.0", False),
        ("", False),
    ],
)
def test_pillow_versions_outside_the_tested_range_turn_it_off(version: str, tested: bool) -> None:
    assert _pillow_fast.pillow_tested(version) is tested


#: Attribute names of Pillow's private API: image cores, tiles, the EXIF cache, the
#: decoder factory and the C module.
_PRIVATE = {"im", "tile", "_exif", "_getdecoder", "_imaging", "_new"}


def test_no_other_module_touches_pillow_private_api() -> None:
    """Read statically: ``im.im``, ``im.tile``, ``_exif``, ``PIL._imaging``... only there."""
    found = []
    for folder in ("leakaudit", "adapters"):
        for path in sorted((ROOT / folder).glob("*.py")):
            if path.name == "_pillow_fast.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names: list[str] = []
                if isinstance(node, ast.Attribute):
                    names = [node.attr]
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    names = [node.value]  # getattr(im, "_exif", None)
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("PIL"):
                    names = [alias.name for alias in node.names]
                line = getattr(node, "lineno", 0)
                found += [f"{path.name}:{line} {n}" for n in names if n in _PRIVATE]
    assert found == []


# What the subprocess runs: decode and hash every file in a folder (in an order that
# lets the fast path learn headers), record any call into _pillow_fast and any call
# from leakaudit's code straight into a private Pillow function (dunders such as
# __array_interface__, which numpy calls, are protocol, not private).
_SCRIPT = r"""
import hashlib, json, os, sys
from pathlib import Path
import PIL
from leakaudit import _pillow_fast, loading
from leakaudit.hashing import hash_image

pil_dir = os.path.dirname(PIL.__file__)
ours = os.path.dirname(loading.__file__)
fast_file = _pillow_fast.__file__
fast_calls, private_calls = set(), set()

def ours_not_fast(filename):
    return filename.startswith(ours) and filename != fast_file

def profile(frame, event, arg):
    code = frame.f_code
    if event == "call":
        if code.co_filename == fast_file:
            fast_calls.add(code.co_name)
        elif code.co_filename.startswith(pil_dir) and code.co_name[:1] == "_" != code.co_name[1:2]:
            caller = frame.f_back
            if caller is not None and ours_not_fast(caller.f_code.co_filename):
                private_calls.add(code.co_name)
    elif event == "c_call" and ours_not_fast(code.co_filename):
        if getattr(arg, "__module__", None) == "PIL._imaging" or type(
            getattr(arg, "__self__", None)
        ).__module__ == "PIL._imaging":
            private_calls.add(getattr(arg, "__name__", "?"))

files = sorted(Path(sys.argv[1]).iterdir())
datas = [f.read_bytes() for f in files]
out = {}
sys.setprofile(profile)
for options in (loading.DecodeOptions(), loading.DecodeOptions(min_side=None)):
    greys, notes = loading.greys_and_notes(datas, [f.name for f in files], options)
    for f, data, grey in zip(files, datas, greys):
        h = hash_image(data, decode=options)
        pixels = hashlib.sha256(grey.pixels.tobytes()).hexdigest()
        key = f"{f.name} min_side={options.min_side}"
        out[key] = [pixels, grey.pixels.shape, grey.box, h.phash, h.dhash, notes.get(0, "")]
sys.setprofile(None)
print(json.dumps({
    "status": _pillow_fast.STATUS,
    "fast_calls": sorted(fast_calls),
    "private_calls": sorted(private_calls),
    "results": out,
}))
"""


def _images(folder: Path) -> None:
    """JPEG, PNG, 16-bit PNG, CMYK, palette, RGBA, EXIF-rotated: each twice with one header."""
    exif = Image.Exif()
    exif[0x0112] = 6
    wide = (np.asarray(imagegen.photo_like(5, (150, 100), "L")).astype(np.uint16) * 257) ^ 0x3A
    for seed in (1, 2):
        photo = imagegen.photo_like(seed, (320, 240))
        small = imagegen.photo_like(seed, (60, 40))
        rgba = photo.convert("RGBA")
        rgba.putalpha(Image.linear_gradient("L").resize(photo.size))
        encoded = {
            "jpeg.jpg": imagegen.encode(photo, "JPEG", quality=90),
            "jpeg_small.jpg": imagegen.encode(small, "JPEG", quality=90),
            "png.png": imagegen.encode(photo, "PNG"),
            "png_small.png": imagegen.encode(small, "PNG"),
            "png_grey_small.png": imagegen.encode(small.convert("L"), "PNG"),
            "png16.png": imagegen.encode(Image.fromarray(wide ^ seed), "PNG"),
            "cmyk.jpg": imagegen.encode(photo.convert("CMYK"), "JPEG"),
            "palette.png": imagegen.encode(photo.convert("P"), "PNG"),
            "palette.gif": imagegen.encode(small.convert("P"), "GIF"),
            "rgba.png": imagegen.encode(rgba, "PNG"),
            "rotated.jpg": imagegen.encode(photo, "JPEG", exif=exif.tobytes()),
            "webp.webp": imagegen.encode(photo, "WEBP"),
        }
        for name, data in encoded.items():
            stem, ext = name.split(".")
            (folder / f"{stem}_{seed}.{ext}").write_bytes(data)  # one header's files adjacent


def _run(folder: Path, switch: str) -> dict[str, object]:
    env = {**os.environ, "LEAKAUDIT_PILLOW_FAST": switch}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(folder)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_switch_off_uses_public_api_only_and_hashes_alike(tmp_path: Path) -> None:
    _images(tmp_path)
    off = _run(tmp_path, "0")
    on = _run(tmp_path, "1")
    assert off["status"] == "off: LEAKAUDIT_PILLOW_FAST=0"
    assert off["fast_calls"] == []  # the gated module is never entered
    assert off["private_calls"] == []
    assert on["private_calls"] == []  # on: only _pillow_fast calls them
    if str(on["status"]).startswith("on"):
        # The fast path really ran, known headers included, and changed nothing.
        fast_calls = on["fast_calls"]
        assert isinstance(fast_calls, list)
        assert {"decode_jpeg_l", "decode_png", "paste_core"} <= set(fast_calls)
    assert on["results"] == off["results"]
    results = off["results"]
    assert isinstance(results, dict) and len(results) == 2 * 2 * 12


def test_status_is_read_once_and_documented() -> None:
    assert _pillow_fast.STATUS.startswith("on") == _pillow_fast.ENABLED
    docs = (ROOT / "docs" / "install.md").read_text()
    assert "LEAKAUDIT_PILLOW_FAST=0" in docs
    assert leakaudit.__file__ is not None
