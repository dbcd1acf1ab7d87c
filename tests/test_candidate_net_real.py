"""The candidate net proposes cropped and slightly rotated copies of real pictures (issue 36).

The pictures are the real CI corpus of ``benchmarks/real_corpus.py`` (as in
``tests/test_metamorphic_real.py``: six small Debian packages fetched once into
``$LEAKAUDIT_REAL_CACHE`` or ``~/.cache/leakaudit-bench/real``, never into the repository;
the module skips without them, or with ``LEAKAUDIT_REAL_CORPUS=0``). Each picture is hashed
as the audit hashes it (``hash_image(dihedral=True, crop_entries=True)``) beside one copy
per edit, and the pair is searched by :func:`leakaudit._verify_candidates.candidate_pairs`
alone (``benchmarks/probe_net.py``'s ``proposed``): a copy the net does not propose is
never judged. Before the denser crop boxes, the pixel-made crop entries and the +/-9 degree
rotations, the net proposed 68.3% of these 15% crops, 32.9% of the 20% crops and 55.5% of
the 5-10 degree rotations (this test on the earlier code; RESULTS 40).
"""

from __future__ import annotations

import io
import os
import random
import sys
from pathlib import Path

import pytest
from PIL import Image

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_real  # noqa: E402
import probe_net  # noqa: E402
import real_corpus  # noqa: E402

from leakaudit._verify_options import VerifyOptions  # noqa: E402
from leakaudit.hashing import hash_image  # noqa: E402

N_IMAGES = 200
SEED = 36


@pytest.fixture(scope="module")
def hashed() -> list[tuple[str, Image.Image, object]]:
    if os.environ.get("LEAKAUDIT_REAL_CORPUS") == "0":
        pytest.skip("LEAKAUDIT_REAL_CORPUS=0: the real-image corpus is not used")
    try:
        loaded = real_corpus.load_corpus(N_IMAGES, seed=SEED, ci=True)
    except (RuntimeError, OSError) as error:
        pytest.skip(f"the real-image corpus cannot be fetched here: {error}")
    out = []
    for image in loaded.images:
        with Image.open(image.file) as opened:
            opened.load()
            picture = opened.copy()
        hashes = hash_image(picture, dihedral=True, crop_entries=True)
        if not hashes.low_information:  # linked only to byte copies, by design
            out.append((f"{image.kind}:{image.id}", picture, hashes))
    assert len(out) >= 150
    return out


def _rotated(image: Image.Image, rng: random.Random) -> bytes:
    """Turned 5-10 degrees either way about its centre, corners filled (as bench_real)."""
    angle = rng.uniform(5, 10) * rng.choice((-1, 1))
    fill = (0, 0, 0, 0) if image.mode == "RGBA" else (0, 0, 0)
    turned = image.rotate(angle, Image.Resampling.BICUBIC, expand=False, fillcolor=fill)
    buffer = io.BytesIO()
    turned.save(buffer, "PNG")
    return buffer.getvalue()


def _proposed_share(hashed: list[tuple[str, Image.Image, object]], edit: str) -> float:
    rng = random.Random(f"{SEED}-{edit}")
    options = VerifyOptions()
    found, missed = 0, []
    for label, picture, hashes in hashed:
        if edit == "rotate 5-10 deg":
            data = _rotated(picture, rng)
        else:
            data = bench_real.EDITS[edit](picture, rng, 0).data
        assert data is not None
        copy = hash_image(data, dihedral=True, crop_entries=True)
        if not copy.low_information and probe_net.proposed(hashes, copy, options):
            found += 1
        else:
            missed.append(label)
    share = found / len(hashed)
    print(f"{edit}: {found}/{len(hashed)} proposed ({share:.1%}); missed e.g. {missed[:5]}")
    return share


# With the flat share for pixel entries at 0.3 (kept for CIFAR-10's precision): crop 20%
# 76.8%, rotations 86.6%. Measured at the change (RESULTS 40, flat share 0.15): crop 15%
# 95.1%, crop 20% 89.6%, rotations
# 5-10 degrees 92.1%; the bounds leave a few pictures' room for platform differences
# in the resampling (Pillow's rounding) and stay far above the former net's rates.
@pytest.mark.parametrize(
    ("edit", "least"), [("crop 15%", 0.88), ("crop 20%", 0.74), ("rotate 5-10 deg", 0.84)]
)
def test_cropped_and_rotated_copies_are_proposed(
    hashed: list[tuple[str, Image.Image, object]], edit: str, least: float
) -> None:
    assert _proposed_share(hashed, edit) >= least
