"""Metamorphic properties of the judge on real images (issue 36, point 1), today's judge.

A copy is a copy whatever its orientation, colours, container or size: these properties hold
by definition of a copy, so they need no labelled data, only real pictures. The pictures are
the real corpus of ``benchmarks/real_corpus.py`` built from its CI packages (icons, sprites,
wallpapers, earth maps, screenshots and drawings from six small Debian packages, 15 MB, 170
distinct pictures: all of them are used, a seeded sample of up to :data:`N_IMAGES`), fetched
once with ``apt-get download`` into ``$LEAKAUDIT_REAL_CACHE`` or
``~/.cache/leakaudit-bench/real`` (never into the repository). Without ``apt-get`` or the
network, and no cache, the module skips; ``LEAKAUDIT_REAL_CORPUS=0`` skips it on purpose.
About 30 s, the first fetch included.

``LEAKAUDIT_REAL_CORPUS=full`` runs the same properties on bench_real's whole dev corpus
(every package of ``real_corpus.FULL_PACKAGES`` and the scikit-image photos: 1,080 real
images, 77-220 of each kind; about 4 minutes once fetched), and
``LEAKAUDIT_META_FAILURES=FILE`` appends every failure with its reason to FILE (RESULTS 41).

The verdict is the verification stage's decision on one pair (``bench_real.verdict``: the
pixel check, the native-resolution check, the geometric check), through ``leakaudit.verify``'s
public functions and :mod:`leakaudit.geometry`. Today's judge fails several properties (issue
36 measured it); each such test is marked ``xfail(strict=False)`` with the failure rate
measured here, so CI stays green while the rewrite is pending, and each prints its failure
rate and the first failing images. The rewrite removes the marks.
"""

from __future__ import annotations

import io
import os
import random
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_real  # noqa: E402
import real_corpus  # noqa: E402

N_IMAGES = 200  # the seeded subset (balanced over kinds as far as the CI packages allow)
N_FULL = 1200  # LEAKAUDIT_REAL_CORPUS=full: bench_real's whole dev corpus (every package)
SEED = 36
TURNS = [None, *bench_real.TURNS.values()]  # the 8 turns: identity first
COLOUR_EDITS = (
    "grey (alpha kept)",
    "sepia",
    "channel gain",
    "channel swap",
    "brighter 25%",
    "darker 25%",
    "contrast +20%",
    "contrast -20%",
    "gamma 0.7",
    "gamma 1.4",
)


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, Image.Image]]:
    if os.environ.get("LEAKAUDIT_REAL_CORPUS") == "0":
        pytest.skip("LEAKAUDIT_REAL_CORPUS=0: the real-image corpus is not used")
    full = os.environ.get("LEAKAUDIT_REAL_CORPUS") == "full"
    try:
        if full:
            loaded = real_corpus.load_corpus(N_FULL, seed=SEED)
        else:
            loaded = real_corpus.load_corpus(N_IMAGES, seed=SEED, ci=True)
    except (RuntimeError, OSError) as error:
        pytest.skip(f"the real-image corpus cannot be fetched here: {error}")
    images = []
    for image in loaded.images:
        with Image.open(image.file) as opened:
            opened.load()
            images.append((f"{image.kind}:{image.id}", opened.copy()))
    return images


def _encoded(image: Image.Image, rng: random.Random) -> bytes:
    """The image re-encoded as JPEG q50-95, PNG or WebP (seeded choice)."""
    container = rng.choice(("JPEG", "PNG", "WEBP"))
    if container == "JPEG":
        copy = bench_real._save(image, "JPEG", quality=rng.randint(50, 95))
    elif container == "WEBP":
        copy = bench_real._save(image, "WEBP", quality=rng.randint(75, 95))
    else:
        copy = bench_real._save(image, "PNG")
    assert copy.data is not None
    return copy.data


def _turned(image: Image.Image, turn: Image.Transpose | None) -> Image.Image:
    """The image turned; a decoded JPEG's turn keeps its format (the judge allows a lossy
    image its re-encoding noise, and the pixels of a turned JPEG are still a JPEG's)."""
    if turn is None:
        return image
    turned = image.transpose(turn)
    turned.format = image.format
    return turned


def _decoded(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as opened:
        opened.load()
        return opened.copy()


def _check(
    corpus: list[tuple[str, Image.Image]],
    name: str,
    case: Callable[[str, Image.Image, random.Random], str | None],
) -> None:
    """Run ``case`` on every image (it returns None when the property holds, else why not);
    fail naming the rate and the first failures."""
    rng = random.Random(f"{SEED}-{name}")
    failures = []
    for label, image in corpus:
        problem = case(label, image, rng)
        if problem is not None:
            failures.append(f"{label}: {problem}")
    rate = len(failures) / len(corpus)
    per_kind = Counter(label.split(":")[0] for label, _ in corpus)
    failed = Counter(failure.split(":")[0] for failure in failures)
    by_kind = ", ".join(f"{kind} {failed[kind]}/{per_kind[kind]}" for kind in sorted(per_kind))
    print(f"{name}: {len(failures)}/{len(corpus)} fail ({100 * rate:.1f}%; {by_kind})")
    dump = os.environ.get("LEAKAUDIT_META_FAILURES")
    if dump:  # every failure, one per line, for whoever studies them
        with open(dump, "a", encoding="utf-8") as out:
            out.writelines(f"{name}\t{failure}\n" for failure in failures)
    assert not failures, (
        f"{name} fails on {len(failures)} of {len(corpus)} real images ({100 * rate:.1f}%): "
        + "; ".join(failures[:5])
    )


@pytest.mark.xfail(
    strict=False,
    reason="issue 36: the judge rejects 1.2% of turned copies here (15.9% before the colour map), "
    "0.3% on the full corpus (4.7% before the lossy noise allowance, RESULTS 41, 44)",
)
def test_turned_reencoded_copy_is_accepted(corpus: list[tuple[str, Image.Image]]) -> None:
    """verdict(a, T(a)) accepts for each of the 8 turns T, re-encoded as JPEG q50-95, PNG or
    WebP (one turn and one container per image, seeded)."""

    def case(label: str, image: Image.Image, rng: random.Random) -> str | None:
        turn = rng.choice(TURNS)
        accepted, reason = bench_real.verdict(image, _encoded(_turned(image, turn), rng))
        return None if accepted else f"turn {turn}: {reason}"

    _check(corpus, "turned copies accepted", case)


def test_verdict_is_equivariant_to_turns(corpus: list[tuple[str, Image.Image]]) -> None:
    """verdict(T(a), T(b)) == verdict(a, b), for pairs of a copy (b an edit of a) and of two
    pictures of one package (its neighbour in the corpus)."""
    pictures = [image for _, image in corpus]

    def case(label: str, image: Image.Image, rng: random.Random) -> str | None:
        if rng.random() < 0.5:
            edit = rng.choice(("JPEG q50-95", "half size", "crop 10%", "sepia", "pad"))
            copy = bench_real.EDITS[edit](image, rng, 0)
            if copy.data is None:
                return None  # the edit does not apply to this picture (too small to crop)
            other = _decoded(copy.data)
        else:
            other = rng.choice(pictures)
        turn = rng.choice(TURNS[1:])
        plain, plain_reason = bench_real.verdict(image, other)
        turned, turned_reason = bench_real.verdict(_turned(image, turn), _turned(other, turn))
        if plain == turned:
            return None
        return f"turn {turn}: as is {plain} ({plain_reason}), turned {turned} ({turned_reason})"

    _check(corpus, "equivariance to turns", case)


@pytest.mark.xfail(
    strict=False,
    reason="issue 36: 0.6% of recoloured copies still rejected here (19.4% before), 3.5% on "
    "the full corpus (small sprites JPEG'd, recoloured and saved as PNG: RESULTS 41, 44)",
)
def test_global_colour_change_never_vetoes(corpus: list[tuple[str, Image.Image]]) -> None:
    """If verdict(a, b) accepts (b: a JPEG q90 copy of a), verdict(a, c(b)) accepts for a global
    colour change c that keeps the picture (one c per image, seeded)."""

    def case(label: str, image: Image.Image, rng: random.Random) -> str | None:
        copy = bench_real._save(image, "JPEG", quality=90)
        assert copy.data is not None
        if not bench_real.verdict(image, copy.data)[0]:
            return None  # nothing to keep: the property says nothing about this image
        edit = rng.choice(COLOUR_EDITS)
        recoloured = bench_real.EDITS[edit](_decoded(copy.data), rng, 0)
        accepted, reason = bench_real.verdict(image, recoloured.data)
        return None if accepted else f"{edit}: {reason}"

    _check(corpus, "colour never vetoes", case)


@pytest.mark.xfail(
    strict=False,
    reason=(
        "issue 36: the judge rejects 1.2% of resized, padded or shifted copies here (4.1% "
        "before the alignment step, 11.2% before that; full dev corpus 2.1%, was 6.4%)"
    ),
)
def test_resized_padded_shifted_copy_is_accepted(corpus: list[tuple[str, Image.Image]]) -> None:
    """A copy resized 0.5-2x, padded, letterboxed or shifted 1-3 px is accepted (one edit per
    image, seeded)."""

    def case(label: str, image: Image.Image, rng: random.Random) -> str | None:
        edit = rng.choice(("resize", "pad", "letterbox", "shift 1-3 px"))
        if edit == "resize":
            factor = rng.uniform(0.5, 2.0)
            size = (round(image.width * factor), round(image.height * factor))
            if min(size) < 8:
                return None
            data = bench_real._save(image.resize(size, Image.Resampling.LANCZOS)).data
            edit = f"resize {factor:.2f}"
        else:
            data = bench_real.EDITS[edit](image, rng, 0).data
        accepted, reason = bench_real.verdict(image, data)
        return None if accepted else f"{edit}: {reason}"

    _check(corpus, "resized, padded, shifted copies accepted", case)


def test_corpus_covers_every_ci_kind(corpus: list[tuple[str, Image.Image]]) -> None:
    kinds = {label.split(":")[0] for label, _ in corpus}
    assert kinds == {"icon", "sprite", "wallpaper", "photo", "screenshot", "drawing"}
    assert len(corpus) >= 150
    # Every picture decodes to something that is neither tiny nor flat.
    for label, image in corpus:
        assert min(image.size) >= 8, label
        assert np.ptp(np.asarray(image.convert("L"))) >= 16, label


def test_views_are_equivariant_to_turns(corpus: list[tuple[str, Image.Image]]) -> None:
    """The judge's view of a turned image is the view of the image, turned (to within a
    grey level): the resampling is symmetric. A box filter was not (its half-pixel ties
    fall to one side), and a mirrored 32 px icon's grid differed from its original's
    mirrored by up to 255 levels, so the judge lost plain mirrors (issue 36)."""
    from leakaudit._verify_view import turned_grid
    from leakaudit.verify import load_view

    def case(label: str, image: Image.Image, rng: random.Random) -> str | None:
        turn = rng.choice(TURNS[1:])
        plain = load_view(image, "a").grid
        turned = load_view(_turned(image, turn), "b").grid
        error = min(
            float(np.abs(turned_grid(turned, code) - plain).max())
            if turned_grid(turned, code).shape == plain.shape
            else np.inf
            for code in range(8)
        )
        return None if error <= 1.0 else f"turn {turn}: grids differ by {error:.0f} levels"

    _check(corpus, "views equivariant to turns", case)
