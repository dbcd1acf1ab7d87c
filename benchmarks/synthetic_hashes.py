"""Synthetic 64-bit hash sets for the search and grouping benchmarks: uniform, clumpy (dHash-like).

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
