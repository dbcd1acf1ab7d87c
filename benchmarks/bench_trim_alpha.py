"""Transparent sprites and icons: does ``DecodeOptions(trim_borders=True)`` keep their copies?

A graphic drawn on a transparent canvas is flattened by leakaudit onto
``DecodeOptions.background`` (white), so its transparent margin becomes an exactly flat
border. Its ordinary re-encodes are not exact: a JPEG saved by another tool is flattened
onto white or black and rings next to the graphic, a resized copy shifts the edge by a
fraction of a pixel, a watermark puts text into the margin. This benchmark plants such
copies and measures, at the default rule (pHash <= 8 and dHash <= 8, both rows not
low-information), the recall of (original, copy) pairs with the trim off and on, per
copy kind and per canvas size, and the false pairs among the originals of different
graphics.

Generated data only (seeded, nothing read from disk):

- **sprites**: 2-5 anti-aliased shapes (ellipses, polygons, thick lines; several colours)
  drawn at 4x and reduced, on a transparent canvas of 32, 64, 128 or 256 px, with margins
  of 0-40% of the canvas (each side drawn separately, so most sprites are off-centre);
- **icons**: folder, document and gear templates in random colours at 16-256 px.

Copies of each original (an RGBA PNG): JPEG q90 / q75 flattened onto white and onto black,
a PNG flattened onto white, the RGBA resized by 0.5x and 2x (PNG), and a small text
watermark in a corner (RGBA PNG, and flattened onto white as JPEG q90).

Run from the repository root::

    .venv/bin/python benchmarks/bench_trim_alpha.py --markdown benchmarks/_out/trim_alpha.md

``--quick`` hashes a quarter of the graphics (a smoke run, a few seconds).
"""

from __future__ import annotations

import argparse
import io
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from leakaudit.hashing import HashTable, hash_sources
from leakaudit.loading import DecodeOptions
from leakaudit.policy import DEFAULT_THRESHOLDS

SUPERSAMPLE = 4
SPRITE_SIZES = (32, 64, 128, 256)
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256)
ICON_TEMPLATES = ("folder", "document", "gear")
THRESHOLD = DEFAULT_THRESHOLDS["phash+dhash"]


# ----------------------------------------------------------------- graphics


def _colour(rng: np.random.Generator) -> tuple[int, int, int, int]:
    red, green, blue = (int(c) for c in rng.integers(0, 256, 3))
    return red, green, blue, 255


def _reduce(canvas: Image.Image, size: int) -> Image.Image:
    # Pillow resizes RGBA with premultiplied alpha: anti-aliased edges, no dark fringe.
    return canvas.resize((size, size), Image.Resampling.LANCZOS)


def sprite(seed: int, size: int) -> Image.Image:
    """An RGBA sprite: a few shapes on a transparent canvas, margins 0-40% per side."""
    rng = np.random.default_rng(seed)
    big = size * SUPERSAMPLE
    canvas = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    draw = ImageDraw.Draw(canvas)
    left, top, right, bottom = (float(m) for m in rng.uniform(0.0, 0.4, 4))
    # Keep at least a fifth of the canvas for the drawing itself.
    if left + right > 0.8:
        left, right = left * 0.8 / (left + right), right * 0.8 / (left + right)
    if top + bottom > 0.8:
        top, bottom = top * 0.8 / (top + bottom), bottom * 0.8 / (top + bottom)
    x0, y0, x1, y1 = left * big, top * big, (1 - right) * big, (1 - bottom) * big
    width, height = x1 - x0, y1 - y0

    def point() -> tuple[float, float]:
        return float(x0 + rng.uniform(0, 1) * width), float(y0 + rng.uniform(0, 1) * height)

    # A body spanning the drawing area (so the margins are what was drawn), then details.
    body = rng.integers(0, 3)
    if body == 0:
        draw.ellipse((x0, y0, x1, y1), fill=_colour(rng))
    elif body == 1:  # a rounded box
        radius = float(min(width, height) * rng.uniform(0.05, 0.3))
        draw.rounded_rectangle((x0, y0, x1, y1), radius=radius, fill=_colour(rng))
    else:  # a quadrilateral touching each side of the drawing area once
        ux, uy = (float(v) for v in rng.uniform(0.2, 0.8, 2))
        vx, vy = (float(v) for v in rng.uniform(0.2, 0.8, 2))
        corners = [(x0 + ux * width, y0), (x1, y0 + uy * height)]
        corners += [(x0 + vx * width, y1), (x0, y0 + vy * height)]
        draw.polygon(corners, fill=_colour(rng))
    for _ in range(int(rng.integers(2, 5))):
        kind = rng.integers(0, 3)
        if kind == 0:
            (ax, ay), (bx, by) = point(), point()
            draw.ellipse((min(ax, bx), min(ay, by), max(ax, bx), max(ay, by)), fill=_colour(rng))
        elif kind == 1:
            draw.polygon([point() for _ in range(int(rng.integers(3, 6)))], fill=_colour(rng))
        else:
            line_width = max(1, int(big * rng.uniform(0.02, 0.06)))
            draw.line([point(), point()], fill=_colour(rng), width=line_width)
    return _reduce(canvas, size)


def icon(seed: int, template: str, size: int) -> Image.Image:
    """An RGBA icon from a template (folder, document, gear) in random colours."""
    rng = np.random.default_rng(seed)
    big = size * SUPERSAMPLE
    canvas = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    draw = ImageDraw.Draw(canvas)
    body, detail = _colour(rng), _colour(rng)
    u = big / 16  # icons are designed on a 16-unit grid with a 1-unit margin
    if template == "folder":
        draw.rounded_rectangle((1 * u, 3 * u, 7 * u, 6 * u), radius=u, fill=detail)  # tab
        draw.rounded_rectangle((1 * u, 4 * u, 15 * u, 14 * u), radius=u, fill=body)
        draw.rectangle((1 * u, 7 * u, 15 * u, 7.6 * u), fill=detail)
    elif template == "document":
        draw.polygon(
            [(3 * u, 1 * u), (10 * u, 1 * u), (13 * u, 4 * u), (13 * u, 15 * u), (3 * u, 15 * u)],
            fill=body,
        )
        draw.polygon([(10 * u, 1 * u), (10 * u, 4 * u), (13 * u, 4 * u)], fill=detail)
        for row in range(4):
            y = (7 + 2 * row) * u
            draw.line([(5 * u, y), ((11 - 2 * (row == 3)) * u, y)], fill=detail, width=int(u))
    elif template == "gear":
        teeth = int(rng.integers(6, 10))
        outer, inner, hole = 7.2 * u, 5.4 * u, 2.2 * u
        centre = 8 * u
        points = []
        for k in range(teeth * 4):
            angle = 2 * math.pi * k / (teeth * 4)
            radius = outer if k % 4 in (1, 2) else inner
            points.append((centre + radius * math.cos(angle), centre + radius * math.sin(angle)))
        draw.polygon(points, fill=body)
        draw.ellipse((centre - hole, centre - hole, centre + hole, centre + hole), fill=detail)
    else:
        raise ValueError(f"template must be one of {ICON_TEMPLATES}; got {template!r}.")
    return _reduce(canvas, size)


# ----------------------------------------------------------------- copies


def _flatten(image: Image.Image, colour: tuple[int, int, int]) -> Image.Image:
    out = Image.new("RGB", image.size, colour)
    out.paste(image, (0, 0), image)
    return out


def _encode(image: Image.Image, fmt: str, **params: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)
    return buffer.getvalue()


def _resized(image: Image.Image, factor: float) -> Image.Image:
    size = max(1, round(image.width * factor)), max(1, round(image.height * factor))
    return image.resize(size, Image.Resampling.LANCZOS)


def watermarked(image: Image.Image) -> Image.Image:
    """``image`` with a small opaque text mark in its bottom-right corner."""
    out = image.copy()
    draw = ImageDraw.Draw(out)
    font = ImageFont.load_default(size=max(6, image.height // 10))
    text = "(c) ab"
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    position = (image.width - (right - left) - 1 - left, image.height - (bottom - top) - 1 - top)
    draw.text(position, text, fill=(120, 120, 120, 255), font=font)
    return out


COPIES: dict[str, Callable[[Image.Image], bytes]] = {
    "jpeg q90 on white": lambda im: _encode(_flatten(im, (255, 255, 255)), "JPEG", quality=90),
    "jpeg q75 on white": lambda im: _encode(_flatten(im, (255, 255, 255)), "JPEG", quality=75),
    "jpeg q90 on black": lambda im: _encode(_flatten(im, (0, 0, 0)), "JPEG", quality=90),
    "jpeg q75 on black": lambda im: _encode(_flatten(im, (0, 0, 0)), "JPEG", quality=75),
    "png on white": lambda im: _encode(_flatten(im, (255, 255, 255)), "PNG"),
    "rgba 0.5x png": lambda im: _encode(_resized(im, 0.5), "PNG"),
    "rgba 2x png": lambda im: _encode(_resized(im, 2.0), "PNG"),
    "watermark rgba png": lambda im: _encode(watermarked(im), "PNG"),
    "watermark jpeg q90 on white": lambda im: _encode(
        _flatten(watermarked(im), (255, 255, 255)), "JPEG", quality=90
    ),
}


@dataclass(frozen=True)
class Graphic:
    family: str  # "sprite" or "icon"
    size: int
    seed: int
    template: str = ""

    def draw(self) -> Image.Image:
        if self.family == "sprite":
            return sprite(self.seed, self.size)
        return icon(self.seed, self.template, self.size)


def graphics(per_size: int) -> list[Graphic]:
    """``per_size`` sprites per sprite size and ``per_size`` icons per icon size."""
    out = [
        Graphic("sprite", size, 1000 * size + k) for size in SPRITE_SIZES for k in range(per_size)
    ]
    out += [
        Graphic("icon", size, 1000 * size + k, ICON_TEMPLATES[k % len(ICON_TEMPLATES)])
        for size in ICON_SIZES
        for k in range(per_size)
    ]
    return out


# ----------------------------------------------------------------- measurement


def _found(table: HashTable, a: int, b: int) -> bool:
    if (
        not (table.valid[a] and table.valid[b])
        or table.low_information[a]
        or table.low_information[b]
    ):
        return False
    phash = (int(table.phash[a]) ^ int(table.phash[b])).bit_count()
    dhash = (int(table.dhash[a]) ^ int(table.dhash[b])).bit_count()
    return max(phash, dhash) <= THRESHOLD


def _false_pairs(table: HashTable, rows: Sequence[int]) -> tuple[int, int]:
    """Pairs of different originals within the rule, and the pairs compared."""
    usable = [r for r in rows if table.valid[r] and not table.low_information[r]]
    phash = table.phash[usable]
    dhash = table.dhash[usable]
    hits = 0
    for i in range(len(usable)):
        ph = np.bitwise_xor(phash[i + 1 :], phash[i])
        dh = np.bitwise_xor(dhash[i + 1 :], dhash[i])
        ph_bits = np.unpackbits(ph.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)
        dh_bits = np.unpackbits(dh.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)
        hits += int(np.count_nonzero(np.maximum(ph_bits, dh_bits) <= THRESHOLD))
    return hits, len(rows) * (len(rows) - 1) // 2


def measure(per_size: int, workers: int | None) -> dict[str, object]:
    items = graphics(per_size)
    sources: list[bytes] = []
    rows: list[tuple[Graphic, str, int, int]] = []  # graphic, copy kind, original row, copy row
    originals: list[int] = []
    for item in items:
        image = item.draw()
        original = len(sources)
        originals.append(original)
        sources.append(_encode(image, "PNG"))
        for kind, make in COPIES.items():
            rows.append((item, kind, original, len(sources)))
            sources.append(make(image))
    tables = {
        trim: hash_sources(
            sources, decode=DecodeOptions(trim_borders=trim), workers=workers, progress=False
        )
        for trim in (False, True)
    }
    return {"items": items, "rows": rows, "originals": originals, "tables": tables}


def _percent(hits: int, total: int) -> str:
    return f"{100 * hits / total:.0f}% ({hits}/{total})" if total else "-"


def tables_markdown(result: dict[str, object]) -> str:
    rows: list[tuple[Graphic, str, int, int]] = result["rows"]  # type: ignore[assignment]
    tables: dict[bool, HashTable] = result["tables"]  # type: ignore[assignment]
    found = {trim: [_found(tables[trim], a, b) for _, _, a, b in rows] for trim in (False, True)}

    def line(label: str, picked: list[int]) -> str:
        cells = [_percent(sum(found[t][i] for i in picked), len(picked)) for t in (False, True)]
        return f"| {label} | {cells[0]} | {cells[1]} |"

    out = ["## Recall of (original RGBA PNG, copy) pairs, default rule", ""]
    for family in ("sprite", "icon"):
        out += [
            f"### {family}s, per copy kind",
            "",
            "| copy | trim off | trim on |",
            "|---|---|---|",
        ]
        for kind in COPIES:
            picked = [i for i, (g, k, _, _) in enumerate(rows) if g.family == family and k == kind]
            out.append(line(kind, picked))
        picked = [i for i, (g, _, _, _) in enumerate(rows) if g.family == family]
        out.append(line(f"**all {family}s**", picked))
        out += ["", f"### {family}s, per canvas size (all copy kinds)", ""]
        out += ["| size | trim off | trim on |", "|---|---|---|"]
        sizes = SPRITE_SIZES if family == "sprite" else ICON_SIZES
        for size in sizes:
            picked = [
                i for i, (g, _, _, _) in enumerate(rows) if g.family == family and g.size == size
            ]
            out.append(line(f"{size} px", picked))
        out.append("")
    out += ["### JPEG-on-white and JPEG-on-black copies, per family and size", ""]
    out += ["| family, size | trim off | trim on |", "|---|---|---|"]
    for family, sizes in (("sprite", SPRITE_SIZES), ("icon", ICON_SIZES)):
        for size in sizes:
            for colour in ("white", "black"):
                picked = [
                    i
                    for i, (g, k, _, _) in enumerate(rows)
                    if g.family == family
                    and g.size == size
                    and k.startswith("jpeg")
                    and k.endswith(f"on {colour}")
                ]
                out.append(line(f"{family} {size} px, jpeg on {colour}", picked))
    originals: list[int] = result["originals"]  # type: ignore[assignment]
    out += ["", "### Precision: pairs of *different* originals within the rule", ""]
    out += ["| | trim off | trim on |", "|---|---|---|"]
    cells = []
    low = []
    for trim in (False, True):
        hits, total = _false_pairs(tables[trim], originals)
        cells.append(f"{hits} of {total}")
        low.append(str(int(np.count_nonzero(tables[trim].low_information[originals]))))
    out.append(f"| false pairs | {cells[0]} | {cells[1]} |")
    out.append(f"| low-information originals (never matched) | {low[0]} | {low[1]} |")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-size", type=int, default=24, help="graphics per size (default 24)")
    parser.add_argument("--quick", action="store_true", help="smoke run (6 per size)")
    parser.add_argument("--workers", type=int, default=None, help="hashing processes")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args(argv)
    per_size = 6 if args.quick else args.per_size
    result = measure(per_size, args.workers)
    text = tables_markdown(result)
    print(text)
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
