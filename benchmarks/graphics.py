"""Seeded small graphics for the benchmarks: game sprites and flat icons, with hard negatives.

Photos are not the only images datasets hold: sprite sheets, icon sets and UI assets are
small, flat, often transparent, and many of their images differ only by a pose or a colour.
This module draws them with Pillow, deterministically from a seed, so a benchmark can plant
copies of them and count how often different pictures are wrongly linked.

- **Sprites** (:func:`sprite_specs`, :func:`render_sprite`): a character built from a body,
  a head, two arms and two legs (ellipses and polygons with dark outlines), eyes and an
  optional accessory, on a transparent background (RGBA), at 32, 64 or 128 px. A *design*
  fixes the shapes and proportions; each design comes in a few *palettes* and *poses* (limb
  angles).
- **Icons** (:func:`icon_specs`, :func:`render_icon`): flat templates (folder, document,
  gear, star, cloud, trash can, envelope, ...) in one colour scheme, on a transparent
  background, a rounded tile or a flat square, with an optional badge (plus, check, dot,
  cross) or glyph variant, at 16 to 256 px.

The hard negatives are built in: the same design in another pose, another design in the same
pose, a palette swap, the same icon template recoloured or with another badge or glyph.
**Each of them is a different image** (a different picture, whatever its resemblance), so a
benchmark must count a link between two of them as false. Every spec is unique in its
content fields whatever its size: the same picture at two sizes is never two base images.

Examples
--------
>>> specs = sprite_specs(4, palettes=2, poses=2, seed=0)
>>> len(specs), specs[0].name
(16, 'sprite_d000_p0_stand')
>>> image = render_sprite(specs[0])
>>> image.mode, image.size == (specs[0].size, specs[0].size)
('RGBA', True)
>>> icon = render_icon(icon_specs(1, seed=0)[0])
>>> icon.mode
'RGBA'
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

__all__ = [
    "ICON_SIZES",
    "ICON_TEMPLATES",
    "POSES",
    "SPRITE_SIZES",
    "IconSpec",
    "SpriteSpec",
    "icon_specs",
    "render_icon",
    "render_sprite",
    "sprite_specs",
]

Colour = tuple[int, int, int]

SUPERSAMPLE = 4  # drawn at 4x and reduced with Lanczos: anti-aliased edges like real assets
SPRITE_SIZES = (32, 64, 128)
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256)
_ICON_SIZE_WEIGHTS = (1, 1, 3, 3, 3, 2, 1)

#: Limb angles in degrees from straight down (left arm, right arm, left leg, right leg);
#: positive turns a limb outward, away from the body.
POSES: dict[str, tuple[float, float, float, float]] = {
    "stand": (12.0, 12.0, 4.0, 4.0),
    "walk": (40.0, -30.0, 28.0, -22.0),
    "jump": (150.0, 150.0, 35.0, 35.0),
    "wave": (165.0, 10.0, 6.0, 6.0),
    "kick": (60.0, 25.0, 5.0, 80.0),
}


# --------------------------------------------------------------------------------------------------
# Colours
# --------------------------------------------------------------------------------------------------


def _random_colour(rng: np.random.Generator, low: int = 30, high: int = 235) -> Colour:
    r, g, b = (int(v) for v in rng.integers(low, high, 3))
    return (r, g, b)


def _darker(colour: Colour, factor: float = 0.45) -> Colour:
    r, g, b = (int(c * factor) for c in colour)
    return (r, g, b)


# --------------------------------------------------------------------------------------------------
# Sprites
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpriteSpec:
    """One sprite image: a design (shapes), a palette and a pose, at one size."""

    design: int
    palette: int
    pose: str
    size: int
    body: str  # "ellipse", "box", "pear"
    head: str  # "circle", "square", "eared"
    accessory: str  # "none", "hat", "antenna", "tail", "cape"
    body_width: float  # fractions of the canvas
    body_height: float
    head_radius: float
    limb_width: float
    limb_length: float
    colours: tuple[Colour, Colour, Colour, Colour]  # body, head, limbs, accent

    @property
    def name(self) -> str:
        return f"sprite_d{self.design:03d}_p{self.palette}_{self.pose}"

    @property
    def cluster(self) -> str:
        """The hard-negative cluster: every palette and pose of one design."""
        return f"sprite_d{self.design:03d}"


def sprite_specs(
    n_designs: int, *, palettes: int = 2, poses: int = 3, seed: int = 0
) -> list[SpriteSpec]:
    """``n_designs`` characters, each in ``palettes`` colourings and ``poses`` poses.

    Poses are drawn from :data:`POSES` per design; the size (one of :data:`SPRITE_SIZES`)
    is drawn per design, so the palettes and poses of one design share a size, as in a
    sprite sheet.
    """
    if not 1 <= poses <= len(POSES):
        raise ValueError(f"poses must be an int in [1, {len(POSES)}]; got {poses!r}.")
    specs = []
    pose_names = list(POSES)
    for design in range(n_designs):
        rng = np.random.default_rng([seed, 1, design])
        shape = {
            "body": str(rng.choice(["ellipse", "box", "pear"])),
            "head": str(rng.choice(["circle", "square", "eared"])),
            "accessory": str(rng.choice(["none", "hat", "antenna", "tail", "cape"])),
            "body_width": float(rng.uniform(0.22, 0.38)),
            "body_height": float(rng.uniform(0.24, 0.34)),
            "head_radius": float(rng.uniform(0.11, 0.17)),
            "limb_width": float(rng.uniform(0.05, 0.09)),
            "limb_length": float(rng.uniform(0.16, 0.22)),
        }
        size = int(rng.choice(SPRITE_SIZES))
        chosen = [pose_names[i] for i in sorted(rng.choice(len(POSES), poses, replace=False))]
        for palette in range(palettes):
            colours = (
                _random_colour(rng),
                _random_colour(rng, 80, 250),
                _random_colour(rng),
                _random_colour(rng),
            )
            for pose in chosen:
                specs.append(
                    SpriteSpec(design, palette, pose, size, colours=colours, **shape)  # type: ignore[arg-type]
                )
    return specs


def _limb(
    draw: ImageDraw.ImageDraw,
    start: tuple[float, float],
    angle: float,
    length: float,
    width: float,
    fill: Colour,
    outline: Colour,
    line: int,
) -> None:
    """A rotated rectangle from ``start`` with a round end (hand or foot)."""
    dx, dy = math.sin(math.radians(angle)), math.cos(math.radians(angle))
    end = (start[0] + dx * length, start[1] + dy * length)
    nx, ny = -dy * width / 2, dx * width / 2
    corners = [
        (start[0] + nx, start[1] + ny),
        (end[0] + nx, end[1] + ny),
        (end[0] - nx, end[1] - ny),
        (start[0] - nx, start[1] - ny),
    ]
    draw.polygon(corners, fill=fill, outline=outline, width=line)
    r = width * 0.7
    draw.ellipse(
        (end[0] - r, end[1] - r, end[0] + r, end[1] + r), fill=fill, outline=outline, width=line
    )


def _sprite_body(
    draw: ImageDraw.ImageDraw, spec: SpriteSpec, box: tuple[float, ...], line: int
) -> None:
    fill, outline = spec.colours[0], _darker(spec.colours[0], 0.3)
    x0, y0, x1, y1 = box
    if spec.body == "ellipse":
        draw.ellipse(box, fill=fill, outline=outline, width=line)
    elif spec.body == "box":
        draw.rounded_rectangle(box, radius=(x1 - x0) * 0.2, fill=fill, outline=outline, width=line)
    else:  # pear: narrow shoulders, wide hips
        inset = (x1 - x0) * 0.22
        draw.polygon(
            [(x0 + inset, y0), (x1 - inset, y0), (x1, y1), (x0, y1)],
            fill=fill,
            outline=outline,
            width=line,
        )
    belt = y0 + (y1 - y0) * 0.62
    draw.line(
        (x0 + (x1 - x0) * 0.15, belt, x1 - (x1 - x0) * 0.15, belt),
        fill=spec.colours[3],
        width=line * 2,
    )


def _sprite_head(
    draw: ImageDraw.ImageDraw, spec: SpriteSpec, centre: tuple[float, float], r: float, line: int
) -> None:
    fill, outline = spec.colours[1], _darker(spec.colours[1], 0.3)
    cx, cy = centre
    if spec.head == "eared":
        for side in (-1, 1):
            draw.polygon(
                [
                    (cx + side * r * 0.9, cy - r * 0.2),
                    (cx + side * r * 0.8, cy - r * 1.5),
                    (cx + side * r * 0.2, cy - r * 0.8),
                ],
                fill=fill,
                outline=outline,
                width=line,
            )
    box = (cx - r, cy - r, cx + r, cy + r)
    if spec.head == "square":
        draw.rounded_rectangle(box, radius=r * 0.35, fill=fill, outline=outline, width=line)
    else:
        draw.ellipse(box, fill=fill, outline=outline, width=line)
    eye = r * 0.18
    for side in (-1, 1):
        ex, ey = cx + side * r * 0.38, cy - r * 0.05
        draw.ellipse((ex - eye, ey - eye, ex + eye, ey + eye), fill=(20, 20, 20))
    draw.arc(
        (cx - r * 0.4, cy + r * 0.05, cx + r * 0.4, cy + r * 0.6), 20, 160, fill=outline, width=line
    )


def _sprite_accessory(
    draw: ImageDraw.ImageDraw,
    spec: SpriteSpec,
    head: tuple[float, float],
    r: float,
    body: tuple[float, ...],
    line: int,
) -> None:
    accent, outline = spec.colours[3], _darker(spec.colours[3], 0.3)
    cx, cy = head
    if spec.accessory == "hat":
        draw.rectangle(
            (cx - r * 1.1, cy - r * 0.95, cx + r * 1.1, cy - r * 0.75),
            fill=accent,
            outline=outline,
            width=line,
        )
        draw.rectangle(
            (cx - r * 0.6, cy - r * 1.7, cx + r * 0.6, cy - r * 0.8),
            fill=accent,
            outline=outline,
            width=line,
        )
    elif spec.accessory == "antenna":
        draw.line((cx, cy - r, cx + r * 0.3, cy - r * 1.7), fill=outline, width=line)
        draw.ellipse(
            (cx + r * 0.1, cy - r * 1.95, cx + r * 0.5, cy - r * 1.55),
            fill=accent,
            outline=outline,
            width=line,
        )
    elif spec.accessory == "tail":
        x1, y1 = body[2], body[3]
        draw.line(
            (x1 - r * 0.2, y1 - r * 0.3, x1 + r * 0.9, y1 - r * 1.2), fill=accent, width=line * 3
        )
    elif spec.accessory == "cape":
        x0, y0, x1, _ = body
        draw.polygon(
            [(x0, y0), (x1, y0), (x1 + r * 0.5, y0 + r * 2.4), (x0 - r * 0.5, y0 + r * 2.4)],
            fill=accent,
            outline=outline,
            width=line,
        )


def render_sprite(spec: SpriteSpec) -> Image.Image:
    """Draw ``spec`` on a transparent ``size`` x ``size`` RGBA canvas."""
    side = spec.size * SUPERSAMPLE
    canvas = Image.new("RGBA", (side, side), (0, 0, 0, 0))
    draw = ImageDraw.Draw(canvas)
    line = max(1, round(side * 0.02))
    s = float(side)
    body_w, body_h = spec.body_width * s, spec.body_height * s
    cx, top = s / 2, s * 0.42
    body = (cx - body_w / 2, top, cx + body_w / 2, top + body_h)
    r = spec.head_radius * s
    head = (cx, top - r * 0.85)
    arm_l, arm_r, leg_l, leg_r = POSES[spec.pose]
    length, width = spec.limb_length * s, spec.limb_width * s
    limb, limb_line = spec.colours[2], _darker(spec.colours[2], 0.3)
    if spec.accessory == "cape":
        _sprite_accessory(draw, spec, head, r, body, line)
    hip_y = body[3] - width * 0.5
    for x, angle in ((cx - body_w * 0.25, -leg_l), (cx + body_w * 0.25, leg_r)):
        _limb(draw, (x, hip_y), angle, length * 1.1, width * 1.2, limb, limb_line, line)
    _sprite_body(draw, spec, body, line)
    shoulder_y = top + width * 0.8
    for x, angle in ((body[0] + width * 0.4, -arm_l), (body[2] - width * 0.4, arm_r)):
        _limb(draw, (x, shoulder_y), angle, length, width, limb, limb_line, line)
    _sprite_head(draw, spec, head, r, line)
    if spec.accessory not in ("none", "cape"):
        _sprite_accessory(draw, spec, head, r, body, line)
    return canvas.resize((spec.size, spec.size), Image.Resampling.LANCZOS)


# --------------------------------------------------------------------------------------------------
# Icons
# --------------------------------------------------------------------------------------------------


#: Colour schemes: (foreground, accent, background of the tile or square).
ICON_SCHEMES: tuple[tuple[Colour, Colour, Colour], ...] = (
    ((33, 118, 210), (255, 214, 64), (227, 240, 252)),
    ((211, 47, 47), (255, 255, 255), (252, 228, 228)),
    ((56, 142, 60), (255, 241, 118), (232, 245, 233)),
    ((245, 124, 0), (62, 39, 35), (255, 243, 224)),
    ((123, 31, 162), (240, 98, 146), (243, 229, 245)),
    ((0, 137, 123), (255, 255, 255), (38, 50, 56)),
    ((97, 97, 97), (255, 193, 7), (250, 250, 250)),
    ((251, 192, 45), (93, 64, 55), (55, 71, 79)),
)
BADGES = ("none", "plus", "check", "dot", "cross")
BACKGROUNDS = ("transparent", "tile", "square")


@dataclass(frozen=True)
class IconSpec:
    """One icon image: a template in a colour scheme, on a background, with a badge or glyph."""

    template: str
    scheme: int
    background: str  # one of BACKGROUNDS
    badge: str  # one of BADGES
    glyph: int  # 0 or 1: a template's alternative inner drawing, where it has one
    size: int

    @property
    def name(self) -> str:
        return f"icon_{self.template}_s{self.scheme}_{self.background}_{self.badge}_g{self.glyph}"

    @property
    def cluster(self) -> str:
        """The hard-negative cluster: every colouring and badge of one template."""
        return f"icon_{self.template}"


Box = tuple[float, float, float, float]
Painter = Callable[[ImageDraw.ImageDraw, Box, Colour, Colour, int, int], None]


def _folder(d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    d.rounded_rectangle(
        (x0, y0 + h * 0.12, x0 + w * 0.45, y0 + h * 0.35), radius=w * 0.05, fill=_darker(fg, 0.75)
    )
    d.rounded_rectangle((x0, y0 + h * 0.25, x1, y1 - h * 0.1), radius=w * 0.07, fill=fg)
    if glyph:
        _star(d, (x0 + w * 0.35, y0 + h * 0.4, x0 + w * 0.65, y0 + h * 0.75), ac, ac, line, 0)


def _document(
    d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int
) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    left, right = x0 + w * 0.18, x1 - w * 0.18
    fold = w * 0.2
    d.polygon(
        [(left, y0), (right - fold, y0), (right, y0 + fold), (right, y1), (left, y1)], fill=fg
    )
    d.polygon(
        [(right - fold, y0), (right - fold, y0 + fold), (right, y0 + fold)], fill=_darker(fg, 0.7)
    )
    if glyph:  # a picture: sun and mountain
        d.polygon(
            [
                (left + w * 0.08, y1 - h * 0.15),
                (left + w * 0.25, y0 + h * 0.5),
                (right - w * 0.08, y1 - h * 0.15),
            ],
            fill=ac,
        )
        d.ellipse((right - w * 0.25, y0 + h * 0.28, right - w * 0.1, y0 + h * 0.43), fill=ac)
        return
    for k in range(4):
        y = y0 + h * (0.35 + 0.14 * k)
        d.line(
            (left + w * 0.1, y, right - w * (0.1 + 0.1 * (k == 3)), y), fill=ac, width=max(1, line)
        )


def _gear(d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int) -> None:
    x0, y0, x1, y1 = b
    cx, cy, r = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2
    teeth = 8
    points = []
    for k in range(teeth * 4):
        angle = 2 * math.pi * k / (teeth * 4)
        radius = r * (0.95 if (k // 2) % 2 == 0 else 0.72)
        points.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
    d.polygon(points, fill=fg)
    hole = r * 0.3
    d.ellipse((cx - hole, cy - hole, cx + hole, cy + hole), fill=ac)


def _star(d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int) -> None:
    x0, y0, x1, y1 = b
    cx, cy, r = (x0 + x1) / 2, (y0 + y1) / 2 + (y1 - y0) * 0.04, (x1 - x0) / 2
    points = []
    for k in range(10):
        angle = -math.pi / 2 + math.pi * k / 5
        radius = r if k % 2 == 0 else r * 0.42
        points.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
    d.polygon(points, fill=fg, outline=_darker(fg, 0.7), width=line)


def _cloud(d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    d.ellipse((x0 + w * 0.05, y0 + h * 0.42, x0 + w * 0.45, y0 + h * 0.8), fill=fg)
    d.ellipse((x0 + w * 0.25, y0 + h * 0.22, x0 + w * 0.7, y0 + h * 0.7), fill=fg)
    d.ellipse((x0 + w * 0.55, y0 + h * 0.38, x1 - w * 0.05, y0 + h * 0.8), fill=fg)
    d.rectangle((x0 + w * 0.25, y0 + h * 0.6, x0 + w * 0.75, y0 + h * 0.8), fill=fg)
    if glyph:  # rain drops
        for k in range(3):
            x = x0 + w * (0.3 + 0.2 * k)
            d.line((x, y0 + h * 0.85, x - w * 0.05, y1), fill=ac, width=line * 2)


def _trash(d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    d.rectangle((x0 + w * 0.4, y0 + h * 0.05, x0 + w * 0.6, y0 + h * 0.15), fill=fg)
    d.rectangle((x0 + w * 0.15, y0 + h * 0.14, x1 - w * 0.15, y0 + h * 0.24), fill=fg)
    d.polygon(
        [
            (x0 + w * 0.22, y0 + h * 0.28),
            (x1 - w * 0.22, y0 + h * 0.28),
            (x1 - w * 0.28, y1),
            (x0 + w * 0.28, y1),
        ],
        fill=fg,
    )
    for k in range(3):
        x = x0 + w * (0.38 + 0.12 * k)
        d.line((x, y0 + h * 0.38, x, y1 - h * 0.1), fill=ac, width=max(1, line))


def _envelope(
    d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int
) -> None:
    x0, y0, x1, y1 = b
    h = y1 - y0
    top, bottom = y0 + h * 0.2, y1 - h * 0.2
    d.rectangle((x0, top, x1, bottom), fill=fg)
    d.line(
        (x0, top, (x0 + x1) / 2, (top + bottom) / 2 + h * 0.05, x1, top), fill=ac, width=line * 2
    )


def _heart(d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    d.ellipse((x0 + w * 0.05, y0 + h * 0.15, x0 + w * 0.52, y0 + h * 0.6), fill=fg)
    d.ellipse((x0 + w * 0.48, y0 + h * 0.15, x1 - w * 0.05, y0 + h * 0.6), fill=fg)
    d.polygon(
        [
            (x0 + w * 0.07, y0 + h * 0.45),
            (x1 - w * 0.07, y0 + h * 0.45),
            ((x0 + x1) / 2, y1 - h * 0.05),
        ],
        fill=fg,
    )


def _house(d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    d.polygon(
        [(x0, y0 + h * 0.45), ((x0 + x1) / 2, y0 + h * 0.05), (x1, y0 + h * 0.45)],
        fill=_darker(fg, 0.7),
    )
    d.rectangle((x0 + w * 0.15, y0 + h * 0.45, x1 - w * 0.15, y1), fill=fg)
    d.rectangle((x0 + w * 0.42, y0 + h * 0.65, x0 + w * 0.58, y1), fill=ac)


def _magnifier(
    d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int
) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    d.line(
        (x0 + w * 0.6, y0 + h * 0.6, x1 - w * 0.05, y1 - h * 0.05),
        fill=_darker(fg, 0.6),
        width=max(2, int(w * 0.14)),
    )
    d.ellipse((x0 + w * 0.05, y0 + h * 0.05, x0 + w * 0.68, y0 + h * 0.68), fill=fg)
    d.ellipse((x0 + w * 0.15, y0 + h * 0.15, x0 + w * 0.58, y0 + h * 0.58), fill=ac)


def _bell(d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    d.chord((x0 + w * 0.2, y0 + h * 0.1, x1 - w * 0.2, y0 + h * 0.9), 180, 360, fill=fg)
    d.rectangle((x0 + w * 0.2, y0 + h * 0.48, x1 - w * 0.2, y0 + h * 0.75), fill=fg)
    d.rectangle((x0 + w * 0.1, y0 + h * 0.72, x1 - w * 0.1, y0 + h * 0.8), fill=fg)
    d.ellipse((x0 + w * 0.42, y0 + h * 0.8, x0 + w * 0.58, y0 + h * 0.95), fill=ac)


def _lock(d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    d.arc(
        (x0 + w * 0.25, y0 + h * 0.05, x1 - w * 0.25, y0 + h * 0.7),
        180,
        360,
        fill=_darker(fg, 0.6),
        width=max(2, int(w * 0.1)),
    )
    d.rounded_rectangle(
        (x0 + w * 0.15, y0 + h * 0.4, x1 - w * 0.15, y1 - h * 0.05), radius=w * 0.08, fill=fg
    )
    d.ellipse((x0 + w * 0.43, y0 + h * 0.55, x0 + w * 0.57, y0 + h * 0.69), fill=ac)


def _chat(d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    d.rounded_rectangle((x0, y0 + h * 0.1, x1, y0 + h * 0.72), radius=w * 0.15, fill=fg)
    d.polygon(
        [
            (x0 + w * 0.2, y0 + h * 0.65),
            (x0 + w * 0.45, y0 + h * 0.65),
            (x0 + w * 0.18, y1 - h * 0.05),
        ],
        fill=fg,
    )
    if glyph:  # lines of text
        for k in range(2):
            y = y0 + h * (0.3 + 0.2 * k)
            d.line((x0 + w * 0.18, y, x1 - w * 0.18, y), fill=ac, width=max(1, line * 2))
        return
    for k in range(3):
        cx, cy, r = x0 + w * (0.28 + 0.22 * k), y0 + h * 0.41, w * 0.06
        d.ellipse((cx - r, cy - r, cx + r, cy + r), fill=ac)


def _calendar(
    d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int
) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    d.rounded_rectangle(
        (x0 + w * 0.08, y0 + h * 0.12, x1 - w * 0.08, y1),
        radius=w * 0.08,
        fill=(250, 250, 250),
        outline=fg,
        width=line * 2,
    )
    d.rectangle((x0 + w * 0.08, y0 + h * 0.12, x1 - w * 0.08, y0 + h * 0.32), fill=fg)
    cells = 3 if glyph else 2
    for i in range(cells):
        for j in range(cells):
            cw = (w * 0.7) / cells
            cx0, cy0 = x0 + w * 0.15 + i * cw, y0 + h * 0.4 + j * (h * 0.55 / cells)
            d.rectangle(
                (cx0 + cw * 0.15, cy0, cx0 + cw * 0.8, cy0 + h * 0.5 / cells * 0.7),
                fill=ac if (i + j) % 2 else fg,
            )


def _user(d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    d.ellipse((x0 + w * 0.3, y0 + h * 0.05, x1 - w * 0.3, y0 + h * 0.45), fill=fg)
    d.chord((x0 + w * 0.1, y0 + h * 0.5, x1 - w * 0.1, y1 + h * 0.5), 180, 360, fill=fg)


def _camera(d: ImageDraw.ImageDraw, b: Box, fg: Colour, ac: Colour, line: int, glyph: int) -> None:
    x0, y0, x1, y1 = b
    w, h = x1 - x0, y1 - y0
    d.rectangle((x0 + w * 0.32, y0 + h * 0.15, x0 + w * 0.62, y0 + h * 0.3), fill=fg)
    d.rounded_rectangle((x0, y0 + h * 0.25, x1, y1 - h * 0.12), radius=w * 0.08, fill=fg)
    d.ellipse((x0 + w * 0.3, y0 + h * 0.36, x1 - w * 0.3, y1 - h * 0.22), fill=ac)
    d.ellipse((x0 + w * 0.4, y0 + h * 0.46, x1 - w * 0.4, y1 - h * 0.32), fill=_darker(fg, 0.6))


ICON_TEMPLATES: dict[str, Painter] = {
    "folder": _folder,
    "document": _document,
    "gear": _gear,
    "star": _star,
    "cloud": _cloud,
    "trash": _trash,
    "envelope": _envelope,
    "heart": _heart,
    "house": _house,
    "magnifier": _magnifier,
    "bell": _bell,
    "lock": _lock,
    "chat": _chat,
    "calendar": _calendar,
    "user": _user,
    "camera": _camera,
}
_GLYPH_TEMPLATES = ("folder", "document", "cloud", "chat", "calendar")


def icon_specs(n_per_template: int, *, seed: int = 0) -> list[IconSpec]:
    """``n_per_template`` distinct icons of every template in :data:`ICON_TEMPLATES`.

    The first variant of a template is plain; the others change its colour scheme, badge,
    glyph or background, one or two at a time, so they are the recolours and re-badgings a
    real icon set holds. No two specs share (template, scheme, background, badge, glyph).
    """
    specs = []
    for t_index, template in enumerate(ICON_TEMPLATES):
        rng = np.random.default_rng([seed, 2, t_index])
        seen: set[tuple[int, str, str, int]] = set()
        background = str(rng.choice(BACKGROUNDS))
        scheme = int(rng.integers(len(ICON_SCHEMES)))
        badge, glyph = "none", 0
        tries = 0
        while len(seen) < n_per_template and tries < 1000:
            tries += 1
            key = (scheme, background, badge, glyph)
            if key not in seen:
                seen.add(key)
                size = int(
                    rng.choice(ICON_SIZES, p=np.array(_ICON_SIZE_WEIGHTS) / sum(_ICON_SIZE_WEIGHTS))
                )
                specs.append(IconSpec(template, scheme, background, badge, glyph, size))
            change = rng.choice(
                ["scheme", "badge", "glyph", "background"], p=[0.45, 0.3, 0.15, 0.1]
            )
            if change == "scheme":
                scheme = int(rng.integers(len(ICON_SCHEMES)))
            elif change == "badge":
                badge = str(rng.choice(BADGES))
            elif change == "glyph" and template in _GLYPH_TEMPLATES:
                glyph = 1 - glyph
            else:
                background = str(rng.choice(BACKGROUNDS))
    return specs


def _badge(d: ImageDraw.ImageDraw, side: float, kind: str, colour: Colour, line: int) -> None:
    r = side * 0.17
    cx, cy = side * 0.78, side * 0.78
    d.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colour, outline=(255, 255, 255), width=line)
    arm = r * 0.55
    white = (255, 255, 255)
    width = max(1, line * 2)
    if kind == "plus":
        d.line((cx - arm, cy, cx + arm, cy), fill=white, width=width)
        d.line((cx, cy - arm, cx, cy + arm), fill=white, width=width)
    elif kind == "check":
        d.line(
            (cx - arm, cy, cx - arm * 0.2, cy + arm * 0.7, cx + arm, cy - arm * 0.6),
            fill=white,
            width=width,
        )
    elif kind == "cross":
        d.line((cx - arm, cy - arm, cx + arm, cy + arm), fill=white, width=width)
        d.line((cx - arm, cy + arm, cx + arm, cy - arm), fill=white, width=width)
    # "dot": the plain disc


def render_icon(spec: IconSpec) -> Image.Image:
    """Draw ``spec`` as a ``size`` x ``size`` RGBA image."""
    side = spec.size * SUPERSAMPLE
    fg, accent, back = ICON_SCHEMES[spec.scheme]
    canvas = Image.new("RGBA", (side, side), (0, 0, 0, 0))
    draw = ImageDraw.Draw(canvas)
    line = max(1, round(side * 0.015))
    if spec.background == "tile":
        draw.rounded_rectangle((0, 0, side - 1, side - 1), radius=side * 0.2, fill=back)
    elif spec.background == "square":
        draw.rectangle((0, 0, side - 1, side - 1), fill=back)
    margin = side * (0.18 if spec.background != "transparent" else 0.08)
    box = (margin, margin, side - margin, side - margin)
    ICON_TEMPLATES[spec.template](draw, box, fg, accent, line, spec.glyph)
    if spec.badge != "none":
        badge_colour = (229, 57, 53) if spec.scheme != 1 else (30, 136, 229)
        _badge(draw, side, spec.badge, badge_colour, line)
    return canvas.resize((spec.size, spec.size), Image.Resampling.LANCZOS)
