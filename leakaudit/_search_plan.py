"""How the hash search is planned: the band layouts it can use and the cost model that picks one
per input (section 4 of :mod:`leakaudit.search`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from leakaudit.hashing import popcount64

__all__ = [
    "DIRECT_TABLE_MAX_BITS",
    "HASH_BITS",
    "SearchPlan",
    "band_radii",
    "choose_plan",
    "contiguous_masks",
]

HASH_BITS = 64
# Bands this wide or narrower use a direct-address table (2**24 int32 = 64 MB at most).
DIRECT_TABLE_MAX_BITS = 24
_SAMPLE_SIZE = 1024
_GREEDY_SAMPLE_SIZE = 128
# Rough cost of choose_plan's sampling and greedy layouts, in seconds.
_PLANNING_SECONDS = 0.3
# Rough costs, in nanoseconds per element, measured on one core with numpy 2.x; only their ratios
# matter for choosing a plan.
_COST_BRUTE_PAIR = 2.0
_COST_KEY = 60.0  # per hash per band: key extraction, stable sort, bucket boundaries
_COST_PROBE = 6.0  # per probed key per flip mask (direct table)
_COST_PROBE_SORTED = 60.0  # per probed key per flip mask (binary search, bands over 24 bits)
_COST_TABLE = 1.0  # per direct-table slot
_COST_CANDIDATE = 25.0  # per candidate pair: expansion, gather, xor, popcount
_COST_MASK = 40_000.0  # fixed Python/numpy overhead per flip mask


@dataclass(frozen=True)
class SearchPlan:
    """How the distinct hashes are searched: brute force, or bands with radii.

    Attributes
    ----------
    band_masks : tuple of int
        One 64-bit mask per band (disjoint); empty for the brute force.
    radii : tuple of int
        Search radius of each band; ``sum(r + 1 for r in radii) > threshold``.
    estimated_seconds : float
        The cost model's estimate, for diagnostics and benchmarks.
    """

    band_masks: tuple[int, ...]
    radii: tuple[int, ...]
    estimated_seconds: float = 0.0

    @property
    def brute_force(self) -> bool:
        """Whether this plan compares all pairs of distinct values."""
        return not self.band_masks

    def describe(self) -> str:
        """Return a one-line summary, e.g. ``"3 bands: 22b r1, 21b r1, 21b r1"``."""
        if self.brute_force:
            return "brute force"
        parts = [
            f"{bin(m).count('1')}b r{r}" for m, r in zip(self.band_masks, self.radii, strict=True)
        ]
        return f"{len(parts)} bands: " + ", ".join(parts)


def _even_widths(bands: int) -> list[int]:
    base, extra = divmod(HASH_BITS, bands)
    return [base + 1] * extra + [base] * (bands - extra)


def _width_choices(bands: int) -> list[list[int]]:
    """Band widths to try, widest first (the widest bands get the larger radii).

    Even widths, and for up to four bands also uneven ones (each within two bits of even): a
    wider band makes fewer candidates at the same radius, which can pay for a narrower one at a
    smaller radius.
    """
    even = _even_widths(bands)
    if bands > 4:
        return [even]
    low, high = min(even) - 2, max(even) + 2
    choices = [even]
    for widths in itertools.combinations_with_replacement(range(high, low - 1, -1), bands):
        if sum(widths) == HASH_BITS and list(widths) != even:
            choices.append(list(widths))
    return choices


def contiguous_masks(widths: list[int]) -> list[int]:
    masks = []
    start = 0
    for width in widths:
        masks.append(((1 << width) - 1) << start)
        start += width
    return masks


def _strided_masks(widths: list[int]) -> list[int]:
    masks = [0] * len(widths)
    band = 0
    for bit in range(HASH_BITS):
        while bin(masks[band]).count("1") >= widths[band]:
            band = (band + 1) % len(widths)
        masks[band] |= 1 << bit
        band = (band + 1) % len(widths)
    return masks


def _bit_matrix(differences: NDArray[np.uint64]) -> NDArray[np.float32]:
    """Return the ``(pairs, 64)`` 0/1 matrix of which bits each sampled pair differs on."""
    bits = np.arange(HASH_BITS, dtype=np.uint64)
    matrix: NDArray[np.float32] = ((differences[:, None] >> bits) & np.uint64(1)).astype(np.float32)
    return matrix


def _greedy_masks(differ: NDArray[np.float32], widths: list[int]) -> list[int]:
    """Assign bits to bands round-robin, each time the bit that splits most still-colliding pairs.

    ``differ`` says which bits sampled pairs differ on (:func:`_bit_matrix`). A band's candidates
    are the pairs it fails to separate, so each band greedily takes the bit on which most of its
    still-agreeing sample pairs differ. This favours balanced bits and avoids putting strongly
    correlated bits (neighbouring dHash comparisons) into the same band.
    """
    agree = np.ones((len(widths), differ.shape[0]), dtype=np.float32)
    masks = [0] * len(widths)
    free = np.ones(HASH_BITS, dtype=np.bool_)
    while free.any():
        for band, width in enumerate(widths):
            if bin(masks[band]).count("1") >= width or not free.any():
                continue
            # einsum, not BLAS: a vector-matrix product this small costs more in
            # OpenBLAS thread start-up than in arithmetic (1 s vs 6 ms for a plan on a busy
            # machine). The counts are small integers, exact in float32 either way.
            score = np.einsum("i,ij->j", agree[band], differ)
            score[~free] = -1.0
            bit = int(np.argmax(score))
            masks[band] |= 1 << bit
            free[bit] = False
            agree[band] *= 1.0 - differ[:, bit]
    return masks


def band_radii(widths: list[int], t: int) -> list[int]:
    spare = max(0, t + 1 - len(widths))
    base, extra = divmod(spare, len(widths))
    return [base + 1 if k < extra else base for k in range(len(widths))]


def _flip_mask_count(width: int, radius: int) -> int:
    return sum(math.comb(width, k) for k in range(1, radius + 1))


def choose_plan(
    unique: NDArray[np.uint64],
    threshold: int,
    *,
    seed: int = 0,
    planning_seconds: float = _PLANNING_SECONDS,
) -> SearchPlan:
    """Pick the cheapest exact search plan for these distinct hashes by a sampled cost model.

    Candidate plans: 2 to ``threshold + 1`` bands of even width (and, up to four bands, uneven
    widths within two bits of even, the widest bands taking the largest radii), with
    contiguous, strided or greedily chosen bits, and the brute force. Each band's candidate
    count is estimated from the fraction of sampled pairs it would make candidates (never below
    the uniform-random rate), and its probing cost from the number of flip masks and keys. When
    the brute force is estimated to take less than ``planning_seconds`` (what planning itself
    costs), it is chosen without planning.

    Examples
    --------
    >>> import numpy as np
    >>> unique = np.unique(np.random.default_rng(0).integers(0, 2**63, 100_000, dtype=np.uint64))
    >>> choose_plan(unique, 5).describe()
    '3 bands: 22b r1, 21b r1, 21b r1'
    """
    n = unique.size
    total_pairs = n * (n - 1) / 2
    brute = SearchPlan((), (), _COST_BRUTE_PAIR * total_pairs * 1e-9)
    # Planning itself costs a few tenths of a second (sampling, greedy bit choice); below that
    # the brute force is already as fast, so typical datasets of a few thousand images never pay
    # for a plan. Distinct values are never within distance 0 of each other.
    if brute.estimated_seconds < planning_seconds or threshold == 0:
        return brute
    rng = np.random.default_rng(seed)
    # A search that brute force would finish in a few seconds gets a quarter of the sampled
    # pairs: its plan matters less than the time spent choosing it (a second audit of a
    # cached 20k-image folder spent a third of its time here).
    size = _SAMPLE_SIZE if brute.estimated_seconds > 10 * planning_seconds else _SAMPLE_SIZE // 2
    sample = unique[rng.choice(n, size=min(n, size), replace=False)]
    first, second = np.triu_indices(sample.size, 1)
    differences = sample[first] ^ sample[second]
    sampled_pairs = differences.size
    greedy_pairs = min(sampled_pairs, _GREEDY_SAMPLE_SIZE * (_GREEDY_SAMPLE_SIZE - 1) // 2)
    differ = _bit_matrix(differences[:greedy_pairs])

    def plan_cost(masks: tuple[int, ...], radii: list[int]) -> float:
        cost = 0.0
        for mask, radius in zip(masks, radii, strict=True):
            width = bin(mask).count("1")
            distance = popcount64(differences & np.uint64(mask))
            hits = int(np.count_nonzero(distance <= radius))
            uniform = sum(math.comb(width, k) for k in range(radius + 1)) / 2.0**width
            candidates = max(hits / sampled_pairs, uniform) * total_pairs
            keys = min(n, 2**width)
            flips = _flip_mask_count(width, radius)
            if width <= DIRECT_TABLE_MAX_BITS:
                probe = _COST_PROBE * flips * keys / 2 + _COST_TABLE * 2**width
            else:
                probe = _COST_PROBE_SORTED * flips * keys / 2
            cost += _COST_KEY * n + probe + _COST_CANDIDATE * candidates + _COST_MASK * flips
        return cost * 1e-9

    best = brute
    cheapest_by_bands: dict[int, tuple[float, list[int]]] = {}
    for bands in range(2, min(threshold + 1, 8) + 1):
        for widths in _width_choices(bands):
            radii = band_radii(widths, threshold)
            for masks in dict.fromkeys(
                [tuple(contiguous_masks(widths)), tuple(_strided_masks(widths))]
            ):
                seconds = plan_cost(masks, radii)
                if seconds < cheapest_by_bands.get(bands, (math.inf, widths))[0]:
                    cheapest_by_bands[bands] = (seconds, widths)
                if seconds < best.estimated_seconds:
                    best = SearchPlan(masks, tuple(radii), seconds)
    # The greedy bit choice is the costly part of planning: try it only for the two band counts
    # that the simple layouts rate best (it refines which bits go together, not how many bands).
    for bands in sorted(cheapest_by_bands, key=lambda b: cheapest_by_bands[b][0])[:2]:
        widths = cheapest_by_bands[bands][1]
        radii = band_radii(widths, threshold)
        masks = tuple(_greedy_masks(differ, widths))
        seconds = plan_cost(masks, radii)
        if seconds < best.estimated_seconds:
            best = SearchPlan(masks, tuple(radii), seconds)
    return best
