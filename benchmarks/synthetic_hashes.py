"""Synthetic 64-bit hash sets for the search and grouping benchmarks: uniform, clumpy, pairs.

Uniform random hashes are the easy case for banding indexes: every band key is equally likely.
Real perceptual hashes are not: measured on 23k real images, 21-bit bands of dHash values collided
hundreds to thousands of times more often than uniform ones. :func:`clumpy_hashes` reproduces that
by hashing random *smooth* images drawn from a low-dimensional latent (a few low-frequency cosines
with 1/f amplitudes, as natural images have after a 9x8 downscale) with the real dHash rule
(``pixel > right neighbour``), then plants what real datasets contain:

- near-duplicates (re-encodes, resizes): copies of a row with 0-4 random bit flips;
- exact copies;
- near-blank images: hash 0 with 0-2 bits set (flat images make all-zero dHashes);
- chains A~B~C...: each link a couple of bits from the previous one, ends far apart.

:func:`clumpy_hash_pairs` makes the (pHash, dHash) pair of each row from one image model, so that
near-duplicates are near in both hashes, as they are on real photos (see its docstring).

:func:`band_collision_ratio` measures the clumpiness the way it was measured on real data, so the
benchmark can print it next to its timings.

Examples
--------
>>> hashes = clumpy_hashes(10_000, seed=0)
>>> hashes.dtype, hashes.shape
(dtype('uint64'), (10000,))
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import NDArray

DATA_DIR = Path(__file__).resolve().parent / "_data"
_CHUNK = 500_000


def uniform_hashes(n: int, *, seed: int = 0) -> NDArray[np.uint64]:
    """Return ``n`` independent uniform random 64-bit hashes."""
    rng = np.random.default_rng(seed)
    hashes: NDArray[np.uint64] = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    return hashes


def _smooth_image_basis(frequencies: int) -> NDArray[np.float32]:
    """Low-frequency 2-D cosines on the 8x9 dHash grid, weighted 1/f like natural images."""
    rows = (np.arange(8) + 0.5) / 8
    cols = (np.arange(9) + 0.5) / 9
    basis = []
    for u in range(frequencies):
        for v in range(frequencies):
            if u == v == 0:
                continue  # the mean brightness does not change a dHash
            wave = np.outer(np.cos(np.pi * u * rows), np.cos(np.pi * v * cols))
            basis.append(wave.ravel() / (u + v))
    return np.array(basis, dtype=np.float32)


def _dhash_bits(images: NDArray[np.float32]) -> NDArray[np.uint64]:
    grid = images.reshape(-1, 8, 9)
    bits = (grid[:, :, 1:] > grid[:, :, :-1]).reshape(-1, 64)
    packed = np.packbits(bits, axis=1, bitorder="little")
    return packed.view("<u8").reshape(-1).astype(np.uint64)


def clumpy_hashes(
    n: int,
    *,
    seed: int = 0,
    frequencies: int = 4,
    noise: float = 0.1,
    duplicate_fraction: float = 0.10,
    copy_fraction: float = 0.03,
    blank_fraction: float = 0.02,
    chain_fraction: float = 0.01,
) -> NDArray[np.uint64]:
    """Return ``n`` dHash-like hashes: clumpy originals plus planted duplicates, blanks and chains.

    Parameters
    ----------
    n : int
        Number of hashes.
    seed : int
        Seed of everything random.
    frequencies : int
        Cosine frequencies per axis of the smooth images (``frequencies**2 - 1`` latent dimensions);
        fewer means clumpier hashes.
    noise : float
        Per-pixel noise added to the smooth images (texture); more means less clumpy.
    duplicate_fraction, copy_fraction, blank_fraction, chain_fraction : float
        Shares of rows replaced by near-duplicates (0-4 flipped bits), exact copies, near-blank
        hashes (0-2 bits set) and links of chains.
    """
    rng = np.random.default_rng(seed)
    basis = _smooth_image_basis(frequencies)
    hashes = np.empty(n, dtype=np.uint64)
    for start in range(0, n, _CHUNK):
        size = min(_CHUNK, n - start)
        latent = rng.standard_normal((size, basis.shape[0]), dtype=np.float32)
        images = latent @ basis
        images += noise * rng.standard_normal(images.shape, dtype=np.float32)
        hashes[start : start + size] = _dhash_bits(images)

    rows = rng.permutation(n)
    cut = np.cumsum(
        [int(n * f) for f in (duplicate_fraction, copy_fraction, blank_fraction, chain_fraction)]
    )
    duplicates, copies, blanks, chains, _ = np.split(rows, cut)
    originals = rows[cut[-1] :]
    if originals.size == 0:
        return hashes
    source = rng.choice(originals, size=duplicates.size)
    hashes[duplicates] = hashes[source] ^ _random_flips(rng, duplicates.size, 4)
    hashes[copies] = hashes[rng.choice(originals, size=copies.size)]
    hashes[blanks] = _random_flips(rng, blanks.size, 2)
    # Chains of 10 links, 2 bits apart each: ends up to 18 bits apart, all one group at t >= 2.
    for chain in np.array_split(chains, max(1, chains.size // 10)):
        if chain.size == 0:
            continue
        steps = np.zeros(chain.size, dtype=np.uint64)
        steps[0] = hashes[rng.choice(originals)]
        steps[1:] = _exact_flips(rng, chain.size - 1, 2)
        hashes[chain] = np.bitwise_xor.accumulate(steps)
    return hashes


def _random_flips(rng: np.random.Generator, size: int, most: int) -> NDArray[np.uint64]:
    """Masks of 0..most random bits (repeats cancel, so sometimes fewer)."""
    masks = np.zeros(size, dtype=np.uint64)
    count = rng.integers(0, most + 1, size)
    for k in range(most):
        bit = rng.integers(0, 64, size).astype(np.uint64)
        masks ^= (count > k).astype(np.uint64) << bit
    return masks


def _exact_flips(rng: np.random.Generator, size: int, bits: int) -> NDArray[np.uint64]:
    """Masks of exactly ``bits`` distinct random bits."""
    chosen = np.argsort(rng.random((size, 64)), axis=1)[:, :bits].astype(np.uint64)
    masks: NDArray[np.uint64] = np.bitwise_or.reduce(np.uint64(1) << chosen, axis=1)
    return masks


def band_collision_ratio(
    hashes: NDArray[np.uint64], *, width: int = 21, sample: int = 4000, seed: int = 0
) -> float:
    """How many times more often sampled distinct hashes share a ``width``-bit band than random.

    Averaged over the three bands ``[0, w)``, ``[w, 2w)``, ``[2w, 3w)``; the uniform rate is
    ``2**-width``. Real dHash values gave hundreds to thousands for 21-bit bands.
    """
    rng = np.random.default_rng(seed)
    unique = np.unique(hashes)
    picked = unique[rng.choice(unique.size, size=min(sample, unique.size), replace=False)]
    first, second = np.triu_indices(picked.size, 1)
    differences = picked[first] ^ picked[second]
    mask = np.uint64((1 << width) - 1)
    rates = [
        np.count_nonzero((differences >> np.uint64(width * band)) & mask == 0) / differences.size
        for band in range(3)
    ]
    return float(np.mean(rates) * 2.0**width)


# --------------------------------------------------------------------------------------------------
# pHash + dHash pairs from one image model

# The image model of :func:`clumpy_hash_pairs`: the 8 x 8 low-frequency DCT coefficients of an
# image, drawn from a few "scene" directions (photos share their broad layouts: sky above, subject
# in the middle) plus an independent part, weighted 1/f**1.5, and a per-image texture on the dHash
# grid (smooth photos have little, busy ones a lot: its level is log-normal).
_PAIR_SIDE = 8
_SCENE_DIMENSIONS = 6
_INDEPENDENT_SHARE = 0.5
_SPECTRUM_EXPONENT = 1.5
_TEXTURE = 0.03
_BRIGHTNESS = 5.0


def _pair_model() -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
    """The 1/f amplitudes, the fixed scene directions, and the DCT basis on the dHash grid."""
    u, v = np.meshgrid(np.arange(_PAIR_SIDE), np.arange(_PAIR_SIDE), indexing="ij")
    frequency = (u + v).ravel().astype(np.float32)
    amplitude = np.where(
        frequency == 0, 0.0, np.maximum(frequency, 1.0) ** -_SPECTRUM_EXPONENT
    ).astype(np.float32)
    scenes = (
        np.random.default_rng(123)
        .standard_normal((_SCENE_DIMENSIONS, _PAIR_SIDE**2))
        .astype(np.float32)
    )
    rows = (np.arange(8) + 0.5) / 8
    cols = (np.arange(9) + 0.5) / 9
    basis = np.array(
        [
            np.outer(np.cos(np.pi * a * rows), np.cos(np.pi * b * cols)).ravel()
            for a in range(_PAIR_SIDE)
            for b in range(_PAIR_SIDE)
        ],
        dtype=np.float32,
    )
    return amplitude, scenes, basis


def _pack_msb_first(bits: NDArray[np.bool_]) -> NDArray[np.uint64]:
    """Rows of 64 bits as uint64, the first bit most significant (leakaudit's bit order)."""
    return np.packbits(bits, axis=1).view(">u8").reshape(-1).astype(np.uint64)


def _hashes_of_coefficients(
    coefficients: NDArray[np.float32], texture: NDArray[np.float32], basis: NDArray[np.float32]
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """pHash (coefficient above the median of the 64) and dHash (of the image on the 9 x 8 grid)."""
    median = np.median(coefficients, axis=1, keepdims=True)
    phash = _pack_msb_first(coefficients > median)
    grid = (coefficients @ basis + texture).reshape(-1, 8, 9)
    dhash = _pack_msb_first((grid[:, :, 1:] > grid[:, :, :-1]).reshape(-1, 64))
    return phash, dhash


def clumpy_hash_pairs(
    n: int,
    *,
    seed: int = 0,
    duplicate_fraction: float = 0.10,
    copy_fraction: float = 0.03,
    blank_fraction: float = 0.02,
    chain_fraction: float = 0.01,
    perturbation: float = 0.02,
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """Return ``(phash, dhash)`` of ``n`` synthetic photos, near-duplicates near in both hashes.

    Each image is its 8 x 8 low-frequency DCT coefficients: an equal mix of six fixed "scene"
    directions and an independent part, weighted ``1/f**1.5``, with a constant brightness. Its
    pHash is the real rule (coefficient above the median of the 64, so exactly 32 bits are set
    and pHash distances are even) and its dHash is the real rule applied to the image those
    coefficients make on the 9 x 8 grid, plus a per-image texture (log-normal level). The model
    was tuned to the rates measured on real photos (``benchmarks/RESULTS.md``, "Detection
    quality"; real values in brackets), on pairs of unrelated originals: pHash <= 8 in
    2.4 per million [8.7], dHash <= 5 in 540 per million [318], both <= 8 in 0.24 per million
    [0.22]; pHash distance percentiles 0.001/0.01/0.1/1/50% of 10/12/16/18/32 [10/14/18/22/32],
    dHash 1/3/7/12/32 [0/3/9/19/32]: a little clumpier than real photos, the harder case for
    a banded search.

    Planted, like :func:`clumpy_hashes`, in shares of the rows:

    - near-duplicates: an original's coefficients plus a small perturbation (a re-encode), about
      2 bits apart in each hash (99% within 6);
    - exact copies of both hashes;
    - near-blank images: dHash 0 with 0-2 bits set and a random pHash with 32 bits set (a flat
      image's pHash is noise);
    - chains of 10 links, each a perturbation of the previous one.

    Parameters
    ----------
    n : int
        Number of rows.
    seed : int
        Seed of everything random.
    duplicate_fraction, copy_fraction, blank_fraction, chain_fraction : float
        Shares of the rows planted as above.
    perturbation : float
        Size of a near-duplicate's change, relative to each coefficient's amplitude.

    Examples
    --------
    >>> phash, dhash = clumpy_hash_pairs(10_000, seed=0)
    >>> phash.shape, dhash.shape, int(np.bitwise_count(phash[0]))
    ((10000,), (10000,), 32)
    """
    rng = np.random.default_rng(seed)
    amplitude, scenes, basis = _pair_model()
    grid = basis.shape[1]
    noise_scale = amplitude * np.sqrt(
        np.arange(_PAIR_SIDE**2) % _PAIR_SIDE + np.arange(_PAIR_SIDE**2) // _PAIR_SIDE + 1.0
    )
    noise_scale = (perturbation * noise_scale).astype(np.float32)
    phash = np.empty(n, dtype=np.uint64)
    dhash = np.empty(n, dtype=np.uint64)
    shares = (duplicate_fraction, copy_fraction, blank_fraction, chain_fraction)
    for start in range(0, n, _CHUNK):
        size = min(_CHUNK, n - start)
        scene = rng.standard_normal((size, _SCENE_DIMENSIONS), dtype=np.float32) @ scenes
        coefficients = (1.0 - _INDEPENDENT_SHARE) / np.sqrt(_SCENE_DIMENSIONS) * scene
        coefficients += _INDEPENDENT_SHARE * rng.standard_normal(scene.shape, dtype=np.float32)
        del scene
        coefficients *= amplitude
        coefficients[:, 0] = _BRIGHTNESS
        level = _TEXTURE * np.exp(rng.standard_normal((size, 1), dtype=np.float32))
        texture = level * rng.standard_normal((size, grid), dtype=np.float32)
        del level
        rows = rng.permutation(size)
        cut = np.cumsum([int(size * share) for share in shares])
        duplicates, copies, blanks, chains, originals = np.split(rows, cut)
        if originals.size:
            source = rng.choice(originals, size=duplicates.size)
            coefficients[duplicates] = coefficients[source] + noise_scale * rng.standard_normal(
                (duplicates.size, _PAIR_SIDE**2), dtype=np.float32
            )
            texture[duplicates] = texture[source]
            for chain in np.array_split(chains, max(1, chains.size // 10)):
                if chain.size == 0:
                    continue
                steps = noise_scale * rng.standard_normal(
                    (chain.size, _PAIR_SIDE**2), dtype=np.float32
                )
                start_row = rng.choice(originals)
                steps[0] = coefficients[start_row]
                coefficients[chain] = np.cumsum(steps, axis=0)
                texture[chain] = texture[start_row]
        block_phash, block_dhash = _hashes_of_coefficients(coefficients, texture, basis)
        del coefficients, texture
        if originals.size:
            copied = rng.choice(originals, size=copies.size)
            block_phash[copies] = block_phash[copied]
            block_dhash[copies] = block_dhash[copied]
        half = np.argsort(rng.random((blanks.size, 64)), axis=1) < 32
        block_phash[blanks] = _pack_msb_first(half)
        block_dhash[blanks] = _random_flips(rng, blanks.size, 2)
        phash[start : start + size] = block_phash
        dhash[start : start + size] = block_dhash
    return phash, dhash


def cached_pairs(n: int, *, seed: int = 0) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """Return :func:`clumpy_hash_pairs` ``(phash, dhash)`` of size ``n``, cached under ``_data``.

    The two arrays are separate ``.npy`` files, so that they can be opened as memory maps.
    """
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    paths = [DATA_DIR / f"pairs_clumpy_{n}_{seed}_{name}.npy" for name in ("phash", "dhash")]
    if not all(path.exists() for path in paths):
        arrays = clumpy_hash_pairs(n, seed=seed)
        for path, array in zip(paths, arrays, strict=True):
            np.save(path, array)
    phash: NDArray[np.uint64] = np.load(paths[0])
    dhash: NDArray[np.uint64] = np.load(paths[1])
    return phash, dhash


def cached_pair_paths(n: int, *, seed: int = 0) -> tuple[Path, Path]:
    """The ``.npy`` files of :func:`cached_pairs` (made first when missing)."""
    cached_pairs(n, seed=seed)
    return (
        DATA_DIR / f"pairs_clumpy_{n}_{seed}_phash.npy",
        DATA_DIR / f"pairs_clumpy_{n}_{seed}_dhash.npy",
    )


def cached(kind: str, n: int, *, seed: int = 0) -> NDArray[np.uint64]:
    """Return hash set ``kind`` ("uniform" or "clumpy") of size ``n``, cached under ``_data``."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    path = DATA_DIR / f"hashes_{kind}_{n}_{seed}.npy"
    if path.exists():
        loaded: NDArray[np.uint64] = np.load(path)
        return loaded
    if kind == "uniform":
        hashes = uniform_hashes(n, seed=seed)
    elif kind == "clumpy":
        hashes = clumpy_hashes(n, seed=seed)
    else:
        raise ValueError(f"kind must be one of 'uniform', 'clumpy'; got {kind!r}.")
    np.save(path, hashes)
    return hashes
