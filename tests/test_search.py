"""The fast exact index must return exactly the brute-force pairs, for any input and threshold."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from leakaudit.hashing import popcount64
from leakaudit.search import (
    SearchPlan,
    as_hash_array,
    band_keys,
    choose_plan,
    iter_linking_pairs,
    iter_pairs_within,
    iter_unique_pairs,
    pairs_within,
    pairs_within_brute_force,
)

MAX64 = 2**64 - 1


def flip_bits(value: int, bits: list[int]) -> int:
    for bit in bits:
        value ^= 1 << bit
    return value


@st.composite
def skewed_hashes(draw: st.DrawFn, max_size: int = 120) -> NDArray[np.uint64]:
    """Clumpy hash sets: near-duplicate clusters, exact copies, near-zero (blank) hashes, chains."""
    bases = draw(st.lists(st.integers(0, MAX64), min_size=1, max_size=6))
    size = draw(st.integers(0, max_size))
    max_flips = draw(st.integers(0, 12))
    values = []
    for _ in range(size):
        kind = draw(st.sampled_from(["cluster", "cluster", "blank", "copy", "random"]))
        if kind == "blank":
            values.append(flip_bits(0, draw(st.lists(st.integers(0, 63), max_size=3))))
        elif kind == "copy" and values:
            values.append(draw(st.sampled_from(values)))
        elif kind == "random":
            values.append(draw(st.integers(0, MAX64)))
        else:
            base = draw(st.sampled_from(bases))
            values.append(flip_bits(base, draw(st.lists(st.integers(0, 63), max_size=max_flips))))
    if draw(st.booleans()):  # a chain: each link a few bits from the previous one
        value = draw(st.integers(0, MAX64))
        for _ in range(draw(st.integers(1, 10))):
            value = flip_bits(value, draw(st.lists(st.integers(0, 63), min_size=1, max_size=4)))
            values.append(value)
    hashes: NDArray[np.uint64] = np.array(values, dtype=np.uint64)
    return hashes


def planted_hashes(n: int, seed: int) -> NDArray[np.uint64]:
    """A few thousand hashes with planted copies, near-duplicates, blanks and chains."""
    rng = np.random.default_rng(seed)
    # Clumpy "originals": bits biased per position, as in real dHash values.
    bias = rng.uniform(0.05, 0.95, 64)
    bits = rng.random((n, 64)) < bias
    weights = np.uint64(1) << np.arange(64, dtype=np.uint64)
    hashes: NDArray[np.uint64] = (bits.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
    planted = rng.choice(n, size=n // 2, replace=False)
    source = rng.choice(n, size=planted.size)
    noise = np.zeros(planted.size, dtype=np.uint64)
    for _ in range(6):  # near-duplicates: up to 6 random bit flips
        flip = (rng.random(planted.size) < 0.5).astype(np.uint64)
        noise ^= flip << rng.integers(0, 64, planted.size).astype(np.uint64)
    hashes[planted] = hashes[source] ^ noise
    hashes[: n // 20] = np.uint64(1) << rng.integers(0, 64, n // 20).astype(np.uint64)  # blanks
    hashes[n // 20 : n // 10] = hashes[0]  # exact copies
    chain = n // 10
    for k in range(1, 30):
        hashes[chain + k] = hashes[chain + k - 1] ^ (np.uint64(0b111) << np.uint64(k % 60))
    return hashes


def as_pair_set(pairs: NDArray[np.int64]) -> set[tuple[int, int]]:
    return {(int(i), int(j)) for i, j in pairs}


def masks_from_permutation(permutation: list[int], widths: list[int]) -> tuple[int, ...]:
    masks = []
    start = 0
    for width in widths:
        masks.append(sum(1 << bit for bit in permutation[start : start + width]))
        start += width
    return tuple(masks)


# --------------------------------------------------------------------------------------------------
# The reference


def test_brute_force_on_a_known_case() -> None:
    hashes = np.array([0b0000, 0b0011, 0b1111, 0b0000, MAX64], dtype=np.uint64)
    assert pairs_within_brute_force(hashes, 0).tolist() == [[0, 3]]
    assert pairs_within_brute_force(hashes, 2).tolist() == [[0, 1], [0, 3], [1, 2], [1, 3]]
    assert pairs_within_brute_force(hashes, 64).shape == (10, 2)


def test_brute_force_matches_a_python_double_loop() -> None:
    rng = np.random.default_rng(3)
    hashes = rng.integers(0, 16, 200, dtype=np.uint64) * np.uint64(0x0101010101010101)
    expected = [
        [i, j]
        for i, j in itertools.combinations(range(hashes.size), 2)
        if bin(int(hashes[i]) ^ int(hashes[j])).count("1") <= 9
    ]
    assert pairs_within_brute_force(hashes, 9).tolist() == expected


@pytest.mark.parametrize("function", [pairs_within, pairs_within_brute_force])
def test_bad_threshold_is_rejected_with_the_shared_wording(function: object) -> None:
    hashes = np.zeros(3, dtype=np.uint64)
    # STYLE.md's wording is "an int in [0, 64]"; the shared helper currently omits "in" (reported).
    with pytest.raises(ValueError, match=r"^threshold must be an int (in )?\[0, 64\]; got 70\.$"):
        function(hashes, 70)  # type: ignore[operator]
    with pytest.raises(TypeError, match="threshold must be an int"):
        function(hashes, 2.0)  # type: ignore[operator]


def test_bad_hashes_are_rejected() -> None:
    with pytest.raises(TypeError, match="hashes must be a 1-D array of uint64"):
        pairs_within(np.zeros(3, dtype=np.float64), 3)
    with pytest.raises(TypeError, match="hashes must be a 1-D array of uint64"):
        pairs_within(np.zeros((3, 2), dtype=np.uint64), 3)
    with pytest.raises(ValueError, match="negative"):
        pairs_within(np.array([-1, 2], dtype=np.int32), 3)
    with pytest.raises(ValueError, match=r"chunk_pairs must be an int >= 1; got 0\."):
        list(iter_pairs_within(np.zeros(3, dtype=np.uint64), 3, chunk_pairs=0))


def test_int64_hashes_are_read_bit_for_bit() -> None:
    hashes = np.array([-1, -2, 5], dtype=np.int64)
    assert as_hash_array(hashes).tolist() == [MAX64, MAX64 - 1, 5]
    assert pairs_within(hashes, 1).tolist() == [[0, 1]]  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# The fast index equals the reference


@pytest.mark.parametrize("n", [0, 1, 2])
@pytest.mark.parametrize("threshold", [0, 1, 5, 64])
def test_tiny_inputs(n: int, threshold: int) -> None:
    hashes = np.array([0, 1][:n], dtype=np.uint64)
    assert pairs_within(hashes, threshold).tolist() == (
        pairs_within_brute_force(hashes, threshold).tolist()
    )
    assert pairs_within(hashes, threshold).dtype == np.int64


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hashes=skewed_hashes(), threshold=st.integers(0, 64))
def test_pairs_within_equals_brute_force(hashes: NDArray[np.uint64], threshold: int) -> None:
    expected = pairs_within_brute_force(hashes, threshold)
    assert np.array_equal(pairs_within(hashes, threshold), expected)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hashes=skewed_hashes(),
    threshold=st.integers(1, 12),
    bands=st.integers(2, 8),
    permutation=st.permutations(list(range(64))),
)
def test_every_band_layout_finds_each_pair_exactly_once(
    hashes: NDArray[np.uint64], threshold: int, bands: int, permutation: list[int]
) -> None:
    # The cost model picks the brute force on inputs this small, so force band plans here: any
    # disjoint bit layout with sum(r + 1) > t must be exact.
    bands = min(bands, threshold + 1)
    base, extra = divmod(64, bands)
    widths = [base + 1] * extra + [base] * (bands - extra)
    spare = max(0, threshold + 1 - bands)
    radii = tuple(spare // bands + (1 if k < spare % bands else 0) for k in range(bands))
    if sum(math.comb(max(widths), k) for k in range(max(radii) + 1)) > 5000:
        return  # too many flip masks for a unit test; the cost model never picks these
    plan = SearchPlan(masks_from_permutation(permutation, widths), radii)
    unique = np.unique(hashes)
    found = [
        (min(a, b), max(a, b))
        for first, second in iter_unique_pairs(unique, threshold, plan=plan)
        for a, b in zip(first.tolist(), second.tolist(), strict=True)
    ]
    assert len(found) == len(set(found))
    assert set(found) == as_pair_set(pairs_within_brute_force(unique, threshold))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hashes=skewed_hashes(),
    threshold=st.integers(0, 64),
    chunk_pairs=st.integers(1, 50),
)
def test_iter_pairs_within_streams_each_pair_once(
    hashes: NDArray[np.uint64], threshold: int, chunk_pairs: int
) -> None:
    chunks = list(iter_pairs_within(hashes, threshold, chunk_pairs=chunk_pairs))
    assert all(1 <= len(chunk) <= chunk_pairs for chunk in chunks)
    pairs = np.concatenate(chunks) if chunks else np.zeros((0, 2), dtype=np.int64)
    assert pairs.dtype == np.int64
    assert bool((pairs[:, 0] < pairs[:, 1]).all())
    assert len(as_pair_set(pairs)) == len(pairs)
    assert as_pair_set(pairs) == as_pair_set(pairs_within_brute_force(hashes, threshold))


def test_many_identical_hashes() -> None:
    hashes = np.full(300, 0xDEADBEEF, dtype=np.uint64)
    hashes[::7] = 0
    for threshold in (0, 3, 64):
        assert np.array_equal(
            pairs_within(hashes, threshold), pairs_within_brute_force(hashes, threshold)
        )


@pytest.mark.parametrize("threshold", [3, 5, 8, 10])
def test_a_few_thousand_planted_hashes_take_the_band_path(threshold: int) -> None:
    hashes = planted_hashes(4000, seed=threshold)
    unique = np.unique(hashes)
    # Without the planning floor, the cost model bands these at small thresholds; with it, a
    # few thousand hashes are compared all-pairs (planning would cost more than it saves).
    plan = choose_plan(unique, threshold, planning_seconds=0.0)
    if threshold <= 5:  # at larger thresholds, 4000 hashes are cheaper to compare all-pairs
        assert not plan.brute_force, plan.describe()
    assert choose_plan(unique, threshold).brute_force
    expected = pairs_within_brute_force(unique, threshold)
    assert len(expected) > 1000  # the planted structure is there
    found = [np.stack(pair, axis=1) for pair in iter_unique_pairs(unique, threshold, plan=plan)]
    # iter_unique_pairs yields each pair once, in no particular order within the pair
    assert as_pair_set(np.sort(np.concatenate(found), axis=1)) == as_pair_set(expected)
    assert np.array_equal(
        pairs_within(hashes, threshold), pairs_within_brute_force(hashes, threshold)
    )


def test_uniform_hashes_take_the_band_path() -> None:
    # 20k distinct values: past the planning floor, so the default path bands them.
    hashes = np.random.default_rng(5).integers(0, 2**63, 20_000, dtype=np.uint64) * np.uint64(2)
    hashes[3000:3100] = hashes[:100] ^ np.uint64(0b10101)
    plan = choose_plan(np.unique(hashes), 5)
    assert not plan.brute_force
    assert np.array_equal(pairs_within(hashes, 5), pairs_within_brute_force(hashes, 5))


def test_band_keys_gather_the_masked_bits() -> None:
    hashes = np.array([0b1011_0110, MAX64, 1 << 63], dtype=np.uint64)
    mask = 0b1010_0010 | (1 << 63)
    # bits 1, 5, 7, 63 of each hash -> key bits 0..3
    assert band_keys(hashes, mask).tolist() == [0b0111, 0b1111, 0b1000]


def test_search_plan_describes_itself() -> None:
    assert SearchPlan((), ()).describe() == "brute force"
    assert SearchPlan((0xFF, 0xFF00), (1, 0)).describe() == "2 bands: 8b r1, 8b r0"


def draw_uneven_plan(
    threshold: int, cuts: list[int], permutation: list[int], data: st.DataObject
) -> SearchPlan | None:
    """Bands cut at ``cuts`` with drawn radii covering ``threshold`` (None: too many masks)."""
    edges = [0, *sorted(cuts), 64]
    widths = [high - low for low, high in itertools.pairwise(edges)]
    radii = [data.draw(st.integers(0, min(3, w))) for w in widths]
    while sum(r + 1 for r in radii) <= threshold:
        k = data.draw(st.integers(0, len(radii) - 1))
        radii[k] = min(widths[k], radii[k] + 1)
        if all(r == w for r, w in zip(radii, widths, strict=True)):
            break
    if sum(math.comb(w, r) for w, r in zip(widths, radii, strict=True)) > 3000:
        return None
    return SearchPlan(masks_from_permutation(permutation, widths), tuple(radii))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hashes=skewed_hashes(),
    threshold=st.integers(1, 10),
    cuts=st.lists(st.integers(1, 63), min_size=1, max_size=4, unique=True),
    permutation=st.permutations(list(range(64))),
    data=st.data(),
)
def test_uneven_band_layouts_find_each_pair_exactly_once(
    hashes: NDArray[np.uint64],
    threshold: int,
    cuts: list[int],
    permutation: list[int],
    data: st.DataObject,
) -> None:
    # Uneven widths and radii (as the cost model may choose): exact as long as sum(r + 1) > t.
    plan = draw_uneven_plan(threshold, cuts, permutation, data)
    if plan is None:
        return  # too many flip masks for a unit test
    unique = np.unique(hashes)
    found = [
        (min(a, b), max(a, b))
        for first, second in iter_unique_pairs(unique, threshold, plan=plan)
        for a, b in zip(first.tolist(), second.tolist(), strict=True)
    ]
    assert len(found) == len(set(found))
    assert set(found) == as_pair_set(pairs_within_brute_force(unique, threshold))


def test_threads_do_not_change_the_output(monkeypatch: pytest.MonkeyPatch) -> None:
    from leakaudit import search

    unique = np.unique(planted_hashes(6000, seed=11))
    plan = SearchPlan((0x3FFFFF, 0x3FFFFF << 22, ((1 << 20) - 1) << 44), (2, 2, 1))
    monkeypatch.setattr(search, "_PROBE_ELEMENTS", 512)  # many blocks in flight
    outputs = []
    for threads in (1, 2):
        monkeypatch.setattr(search, "_THREADS", threads)
        outputs.append([np.stack(pair) for pair in iter_unique_pairs(unique, 5, plan=plan)])
    assert len(outputs[0]) == len(outputs[1])
    assert all(np.array_equal(a, b) for a, b in zip(*outputs, strict=True))
    found = np.sort(np.concatenate(outputs[0], axis=1).T, axis=1)
    assert as_pair_set(found) == as_pair_set(pairs_within_brute_force(unique, 5))


# --------------------------------------------------------------------------------------------------
# Bucket lookup


@settings(max_examples=150, deadline=None)
@given(
    width=st.sampled_from([8, 20, 25, 32, 33, 48, 64]),
    seed=st.integers(0, 2**32 - 1),
    size=st.integers(1, 3000),
    clumpy=st.booleans(),
)
def test_bucket_finder_finds_exactly_the_present_keys(
    width: int, seed: int, size: int, clumpy: bool
) -> None:
    from leakaudit.search import _bucket_finder

    rng = np.random.default_rng(seed)
    top = np.uint64(2**width - 1)
    keys = rng.integers(0, 2**63, size, dtype=np.uint64) * np.uint64(2) & top
    if clumpy:  # long shared prefixes, as band keys of real dHash values have
        keys = (keys & np.uint64(0xFF)) | (top & ~np.uint64(0xFF) & np.uint64(0xA5A5A5A5A5A5A500))
    keys = np.unique(np.append(keys, top if size % 2 else np.uint64(0)))  # all ones: an edge
    if width <= 32:
        keys = keys.astype(np.uint32)
    find = _bucket_finder(keys, width)
    absent = rng.integers(0, 2**63, 500, dtype=np.uint64) * np.uint64(2) & top
    query = np.concatenate(
        [
            keys.astype(np.uint64),
            absent,
            keys.astype(np.uint64) ^ np.uint64(1),
            np.array([top, 0], np.uint64),
        ]
    )
    query = query.astype(keys.dtype)
    found = find(query)
    position = {int(k): i for i, k in enumerate(keys.tolist())}
    assert found.tolist() == [position.get(int(q), -1) for q in query.tolist()]


# --------------------------------------------------------------------------------------------------
# Grouping mode: linking pairs with forced plans, dense path included


def linking_labels(unique: NDArray[np.uint64], threshold: int, plan: SearchPlan) -> list[int]:
    from leakaudit.grouping import UnionFindForest

    forest = UnionFindForest(unique.size, batch=7)
    for a, b in iter_linking_pairs(unique, threshold, forest, plan=plan):
        assert bool((popcount64(unique[a] ^ unique[b]) <= threshold).all())
        forest.add(a, b)
    return forest.labels().tolist()


def component_labels(unique: NDArray[np.uint64], threshold: int) -> list[int]:
    from leakaudit.grouping import connected_component_labels

    pairs = pairs_within_brute_force(unique, threshold)
    return connected_component_labels(unique.size, [pairs]).tolist()


# Every example sets the three patched constants itself, so sharing the fixture is safe.
@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    hashes=skewed_hashes(),
    threshold=st.integers(1, 10),
    cuts=st.lists(st.integers(1, 63), min_size=1, max_size=4, unique=True),
    permutation=st.permutations(list(range(64))),
    dense=st.booleans(),
    first_chunk=st.integers(1, 8),
    data=st.data(),
)
def test_linking_pairs_connect_exactly_the_brute_force_components(
    monkeypatch: pytest.MonkeyPatch,
    hashes: NDArray[np.uint64],
    threshold: int,
    cuts: list[int],
    permutation: list[int],
    dense: bool,
    first_chunk: int,
    data: st.DataObject,
) -> None:
    from leakaudit import search

    # Force either search path (the dense one on inputs far smaller than it is meant for), with
    # tiny chunks and probe blocks so that merges, giant choices and skips happen often.
    monkeypatch.setattr(search, "_DENSE_PAIRS_PER_VALUE", -1 if dense else 10**9)
    monkeypatch.setattr(search, "_FIRST_CHUNK", first_chunk)
    monkeypatch.setattr(search, "_PROBE_ELEMENTS", data.draw(st.sampled_from([1, 37, 1 << 18])))
    plan = draw_uneven_plan(threshold, cuts, permutation, data)
    if plan is None:
        return  # too many flip masks for a unit test
    unique = np.unique(hashes)
    assert linking_labels(unique, threshold, plan) == component_labels(unique, threshold)


@pytest.mark.parametrize(
    ("widths", "radii", "dense"),
    [([22, 21, 21], (1, 1, 1), True), ([32, 32], (2, 2), False), ([40, 24], (3, 1), False)],
)
def test_clumpy_data_takes_the_dense_path_and_groups_exactly(
    widths: list[int], radii: tuple[int, ...], dense: bool
) -> None:
    from leakaudit.search import _contiguous_masks, _is_dense, _sort_band

    # A dense core: near copies (up to 6 flipped bits) of a few dozen hashes, and a sparse rest.
    rng = np.random.default_rng(4)
    bases = rng.integers(0, 2**63, 40, dtype=np.uint64)
    hashes = planted_hashes(4000, seed=4)
    core = bases[rng.integers(0, 40, 8000)]
    for _ in range(6):
        flip = (rng.random(core.size) < 0.5).astype(np.uint64)
        core ^= flip << rng.integers(0, 64, core.size).astype(np.uint64)
    unique = np.unique(np.concatenate([hashes, core]))
    plan = SearchPlan(tuple(_contiguous_masks(widths)), radii)
    assert _is_dense(_sort_band(unique, plan.band_masks[0])[1]) == dense
    assert linking_labels(unique, 5, plan) == component_labels(unique, 5)


# --------------------------------------------------------------------------------------------------
# Two hashes (pHash + dHash): candidates from one hash's bands, checked on both in the kernel


@st.composite
def hash_pairs(
    draw: st.DrawFn, max_size: int = 120
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """Rows of two hashes: the second near a function of the first (near rows are near in both,
    as for photos), independent, or a copy of another row's second hash."""
    first = draw(skewed_hashes(max_size=max_size))
    mode = draw(st.sampled_from(["related", "independent", "mixed"]))
    key = draw(st.integers(0, MAX64))
    seconds = []
    for value in first.tolist():
        kind = mode if mode != "mixed" else draw(st.sampled_from(["related", "independent"]))
        if kind == "related":
            flips = draw(st.lists(st.integers(0, 63), max_size=draw(st.integers(0, 8))))
            seconds.append(flip_bits(value ^ key, flips))
        elif seconds and draw(st.booleans()):
            seconds.append(draw(st.sampled_from(seconds)))
        else:
            seconds.append(draw(st.integers(0, MAX64)))
    second: NDArray[np.uint64] = np.array(seconds, dtype=np.uint64)
    return first, second


def distinct_pairs(
    first: NDArray[np.uint64], second: NDArray[np.uint64]
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    from leakaudit.grouping import distinct_hash_pairs

    unique, unique_second, _ = distinct_hash_pairs(first, second)
    return unique, unique_second


def brute_two_hash_pairs(
    first: NDArray[np.uint64], second: NDArray[np.uint64], t: int, t2: int
) -> set[tuple[int, int]]:
    n = first.size
    return {
        (i, j)
        for i in range(n)
        for j in range(i + 1, n)
        if int(first[i] ^ first[j]).bit_count() <= t
        and int(second[i] ^ second[j]).bit_count() <= t2
    }


def found_pairs(chunks: object) -> list[tuple[int, int]]:
    return [
        (min(a, b), max(a, b))
        for left, right in chunks  # type: ignore[attr-defined]
        for a, b in zip(left.tolist(), right.tolist(), strict=True)
    ]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=hash_pairs(), threshold=st.integers(0, 16), second_threshold=st.integers(0, 16))
def test_two_hash_pairs_equal_brute_force(
    rows: tuple[NDArray[np.uint64], NDArray[np.uint64]], threshold: int, second_threshold: int
) -> None:
    unique, second = distinct_pairs(*rows)
    found = found_pairs(
        iter_unique_pairs(unique, threshold, second=second, second_threshold=second_threshold)
    )
    assert len(found) == len(set(found))
    assert set(found) == brute_two_hash_pairs(unique, second, threshold, second_threshold)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=hash_pairs(),
    threshold=st.integers(1, 10),
    second_threshold=st.integers(0, 12),
    cuts=st.lists(st.integers(1, 63), min_size=1, max_size=4, unique=True),
    permutation=st.permutations(list(range(64))),
    data=st.data(),
)
def test_two_hash_search_with_any_band_layout_finds_each_pair_once(
    rows: tuple[NDArray[np.uint64], NDArray[np.uint64]],
    threshold: int,
    second_threshold: int,
    cuts: list[int],
    permutation: list[int],
    data: st.DataObject,
) -> None:
    plan = draw_uneven_plan(threshold, cuts, permutation, data)
    if plan is None:
        return  # too many flip masks for a unit test
    unique, second = distinct_pairs(*rows)
    found = found_pairs(
        iter_unique_pairs(
            unique, threshold, plan=plan, second=second, second_threshold=second_threshold
        )
    )
    assert len(found) == len(set(found))
    assert set(found) == brute_two_hash_pairs(unique, second, threshold, second_threshold)


def two_hash_components(
    unique: NDArray[np.uint64], second: NDArray[np.uint64], t: int, t2: int
) -> list[int]:
    from leakaudit.grouping import connected_component_labels

    pairs = np.array(sorted(brute_two_hash_pairs(unique, second, t, t2)), dtype=np.int64)
    return connected_component_labels(unique.size, [pairs.reshape(-1, 2)]).tolist()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    rows=hash_pairs(),
    threshold=st.integers(1, 10),
    second_threshold=st.integers(0, 12),
    cuts=st.lists(st.integers(1, 63), min_size=1, max_size=4, unique=True),
    permutation=st.permutations(list(range(64))),
    dense=st.booleans(),
    data=st.data(),
)
def test_two_hash_linking_pairs_connect_exactly_the_brute_force_components(
    monkeypatch: pytest.MonkeyPatch,
    rows: tuple[NDArray[np.uint64], NDArray[np.uint64]],
    threshold: int,
    second_threshold: int,
    cuts: list[int],
    permutation: list[int],
    dense: bool,
    data: st.DataObject,
) -> None:
    from leakaudit import search
    from leakaudit.grouping import UnionFindForest

    # Clumpy first hashes would take the dense passes with one hash; with two they must not
    # (and the answer must not depend on it). Tiny probe blocks make merges and skips frequent.
    monkeypatch.setattr(search, "_DENSE_PAIRS_PER_VALUE", -1 if dense else 10**9)
    monkeypatch.setattr(search, "_PROBE_ELEMENTS", data.draw(st.sampled_from([1, 37, 1 << 18])))
    plan = draw_uneven_plan(threshold, cuts, permutation, data)
    if plan is None:
        return
    unique, second = distinct_pairs(*rows)
    forest = UnionFindForest(unique.size, batch=7)
    for a, b in iter_linking_pairs(
        unique, threshold, forest, plan=plan, second=second, second_threshold=second_threshold
    ):
        assert bool((popcount64(unique[a] ^ unique[b]) <= threshold).all())
        assert bool((popcount64(second[a] ^ second[b]) <= second_threshold).all())
        forest.add(a, b)
    expected = two_hash_components(unique, second, threshold, second_threshold)
    assert forest.labels().tolist() == expected


@pytest.mark.parametrize("swap", [False, True])
def test_two_hash_search_bands_the_cheaper_hash_and_stays_exact(swap: bool) -> None:
    from leakaudit.search import _cheaper_first, _Second

    # A clumpy hash (planted: biased bits, copies, chains) and a uniform one: the cost model
    # bands the uniform one, whichever argument it is, and the pairs are the same.
    rng = np.random.default_rng(2)
    clumpy = planted_hashes(20000, seed=2)
    uniform = rng.integers(0, 2**64, clumpy.size, dtype=np.uint64)
    uniform[clumpy.size // 2 :] = uniform[: clumpy.size - clumpy.size // 2] ^ np.uint64(0b1011)
    first, second = (uniform, clumpy) if swap else (clumpy, uniform)
    unique, unique_second = distinct_pairs(first, second)
    banded = _cheaper_first(unique, 6, _Second(unique_second, 6))[0]
    assert np.array_equal(banded, unique_second if not swap else unique)
    found = found_pairs(iter_unique_pairs(unique, 6, second=unique_second, second_threshold=6))
    assert len(found) == len(set(found))
    reference = pairs_within_brute_force(unique, 6)
    close = popcount64(unique_second[reference[:, 0]] ^ unique_second[reference[:, 1]]) <= 6
    assert set(found) == as_pair_set(reference[close])


def test_second_hash_must_match_the_values() -> None:
    unique = np.arange(5, dtype=np.uint64)
    with pytest.raises(ValueError, match="second must have one hash per value"):
        list(iter_unique_pairs(unique, 2, second=unique[:3], second_threshold=2))
    with pytest.raises(ValueError, match="second_threshold must be an int in"):
        list(iter_unique_pairs(unique, 2, second=unique, second_threshold=65))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("window", [64, 1 << 18])
def test_clumpy_two_hash_grouping_with_every_bucket_size_is_exact(
    monkeypatch: pytest.MonkeyPatch, threads: int, window: int
) -> None:
    from leakaudit import search
    from leakaudit.grouping import UnionFindForest

    # Near copies of a few bases in the first hash make buckets of every size class up to and
    # past _BLOCK_MAX (so single, block and range comparisons all run); the second hash keeps
    # most of those candidates apart. Tiny probe chunks put many tasks in flight, so the
    # worker threads skip with component snapshots that are often out of date.
    rng = np.random.default_rng(11)
    bases = rng.integers(0, 2**64, 12, dtype=np.uint64)
    n = 3000
    first = bases[rng.integers(0, bases.size, n)]
    for _ in range(4):
        first ^= np.left_shift(np.uint64(1), rng.integers(0, 64, n).astype(np.uint64))
    second = rng.integers(0, 2**64, n, dtype=np.uint64)
    copies = rng.integers(0, n, n // 3)
    second[n - copies.size :] = second[copies] ^ np.left_shift(
        np.uint64(1), rng.integers(0, 64, copies.size).astype(np.uint64)
    )
    unique, unique_second = distinct_pairs(first, second)
    monkeypatch.setattr(search, "_THREADS", threads)
    monkeypatch.setattr(search, "_PROBE_ELEMENTS", 97)
    monkeypatch.setattr(search, "_WINDOW_ELEMENTS", window)
    plan = SearchPlan((0xFFFF, 0xFFFF << 16, 0xFFFF << 32, 0xFFFF << 48), (2, 2, 1, 1))
    forest = UnionFindForest(unique.size, batch=13)
    for a, b in iter_linking_pairs(
        unique, 8, forest, plan=plan, second=unique_second, second_threshold=8
    ):
        assert bool((popcount64(unique[a] ^ unique[b]) <= 8).all())
        assert bool((popcount64(unique_second[a] ^ unique_second[b]) <= 8).all())
        forest.add(a, b)
    from leakaudit.grouping import connected_component_labels

    reference = pairs_within_brute_force(unique, 8)
    close = popcount64(unique_second[reference[:, 0]] ^ unique_second[reference[:, 1]]) <= 8
    expected = connected_component_labels(unique.size, [reference[close]])
    assert forest.labels().tolist() == expected.tolist()
