"""The compiled band search (numba) must link exactly what brute force and the numpy path link.

Every test here compares three answers: ``engine="numba"``, ``engine="numpy"`` and a brute-force
union-find over all pairs. Only the tests that run the kernels need numba; they are skipped
cleanly without it (``pytest.importorskip``), and the rest check the fallback, the ``threads``
argument and ``LEAKAUDIT_THREADS``.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from leakaudit import search
from leakaudit.grouping import UnionFindForest, distinct_hash_pairs
from leakaudit.hashing import popcount64
from leakaudit.search import (
    SearchPlan,
    iter_linking_pairs,
    iter_pairs_within,
    pairs_within,
    pairs_within_brute_force,
)

MAX64 = 2**64 - 1
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def kernels() -> ModuleType:
    """numba, or a clean skip: only the tests that run the kernels ask for this."""
    return pytest.importorskip("numba")


def brute_force_labels(
    first: NDArray[np.uint64],
    second: NDArray[np.uint64] | None,
    threshold: int,
    second_threshold: int,
) -> list[int]:
    """Component of each value (its smallest member) by a plain union-find over all close pairs."""
    parent = list(range(first.size))

    def find(node: int) -> int:
        while parent[node] != node:
            node = parent[node]
        return node

    for a, b in pairs_within_brute_force(first, threshold).tolist():
        if second is not None and int(popcount64(second[a] ^ second[b])) > second_threshold:
            continue
        low, high = sorted((find(a), find(b)))
        if low != high:
            parent[high] = low
    return [find(node) for node in range(first.size)]


def linked_labels(
    unique: NDArray[np.uint64],
    threshold: int,
    *,
    engine: str,
    plan: SearchPlan | None = None,
    second: NDArray[np.uint64] | None = None,
    second_threshold: int | None = None,
    threads: int | None = None,
) -> list[int]:
    """Component of each value (its smallest member) from ``iter_linking_pairs``' pairs."""
    forest = UnionFindForest(unique.size, batch=5)
    for a, b in iter_linking_pairs(
        unique,
        threshold,
        forest,
        plan=plan,
        second=second,
        second_threshold=second_threshold,
        threads=threads,
        engine=engine,
    ):
        assert bool((popcount64(unique[a] ^ unique[b]) <= threshold).all())
        if second is not None and second_threshold is not None:
            assert bool((popcount64(second[a] ^ second[b]) <= second_threshold).all())
        forest.add(a, b)
    forest.sync()
    return [int(root) for root in forest.roots()]


def flip_bits(value: int, bits: list[int]) -> int:
    for bit in bits:
        value ^= 1 << bit
    return value


@st.composite
def clumpy_rows(
    draw: st.DrawFn, max_size: int = 150
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """Distinct (first, second) rows: near copies of a few bases (near in both hashes, as photos
    are), blank-like first hashes with unrelated seconds, exact first-hash copies, chains and
    random rows."""
    bases = draw(st.lists(st.integers(0, MAX64), min_size=1, max_size=5))
    key = draw(st.integers(0, MAX64))
    flips = draw(st.integers(0, 10))
    firsts: list[int] = []
    seconds: list[int] = []
    for _ in range(draw(st.integers(0, max_size))):
        kind = draw(st.sampled_from(["near", "near", "blank", "copy", "random", "chain"]))
        if kind == "blank":
            first = flip_bits(0, draw(st.lists(st.integers(0, 63), max_size=2)))
            second = draw(st.integers(0, MAX64))
        elif kind == "copy" and firsts:
            first = draw(st.sampled_from(firsts))
            second = flip_bits(first ^ key, draw(st.lists(st.integers(0, 63), max_size=flips)))
        elif kind == "random":
            first, second = draw(st.integers(0, MAX64)), draw(st.integers(0, MAX64))
        elif kind == "chain" and firsts:
            first = flip_bits(firsts[-1], draw(st.lists(st.integers(0, 63), max_size=3)))
            second = flip_bits(seconds[-1], draw(st.lists(st.integers(0, 63), max_size=3)))
        else:
            base = draw(st.sampled_from(bases))
            first = flip_bits(base, draw(st.lists(st.integers(0, 63), max_size=flips)))
            second = flip_bits(base ^ key, draw(st.lists(st.integers(0, 63), max_size=flips)))
        firsts.append(first)
        seconds.append(second)
    unique, unique_second, _ = distinct_hash_pairs(
        np.array(firsts, dtype=np.uint64), np.array(seconds, dtype=np.uint64)
    )
    return unique, unique_second


def banded_plan(widths: list[int], threshold: int, permutation: list[int]) -> SearchPlan:
    """Bands of these widths over permuted bits, radii covering ``threshold`` (widest first)."""
    radii = search._radii(widths, threshold)
    masks = []
    start = 0
    for width in widths:
        masks.append(sum(1 << bit for bit in permutation[start : start + width]))
        start += width
    return SearchPlan(tuple(masks), tuple(radii))


LAYOUTS = [[22, 21, 21], [16, 16, 16, 16], [24, 20, 20], [13, 13, 13, 13, 12], [32, 32]]


# --------------------------------------------------------------------------------------------------
# Exactness: kernels, numpy and brute force agree


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=clumpy_rows(),
    threshold=st.integers(0, 10),
    second_threshold=st.integers(0, 10),
    layout=st.sampled_from(LAYOUTS),
    permutation=st.permutations(list(range(64))),
    one_hash=st.booleans(),
    threads=st.sampled_from([1, 2, 3]),
)
def test_kernels_link_exactly_what_brute_force_and_numpy_link(
    kernels: ModuleType,
    rows: tuple[NDArray[np.uint64], NDArray[np.uint64]],
    threshold: int,
    second_threshold: int,
    layout: list[int],
    permutation: list[int],
    one_hash: bool,
    threads: int,
) -> None:
    if one_hash:
        unique, second = np.unique(rows[0]), None
    else:
        unique, second = rows
    plan = banded_plan(layout, threshold, permutation)
    expected = brute_force_labels(unique, second, threshold, second_threshold)
    options = {
        "plan": plan,
        "second": second,
        "second_threshold": None if second is None else second_threshold,
        "threads": threads,
    }
    assert linked_labels(unique, threshold, engine="numba", **options) == expected
    assert linked_labels(unique, threshold, engine="numpy", **options) == expected


@pytest.mark.parametrize("buffer_pairs", [1, 64, 1 << 16])
@pytest.mark.parametrize("threads", [1, 2])
def test_kernels_are_exact_on_clumpy_data_with_full_buffers(
    kernels: ModuleType, monkeypatch: pytest.MonkeyPatch, buffer_pairs: int, threads: int
) -> None:
    # Near copies of a few bases make buckets of every size up to hundreds of members, and
    # cliques of near-identical rows whose pairs overflow small buffers again and again (each
    # overflow cuts the buffer down to a spanning forest and resumes mid-bucket).
    rng = np.random.default_rng(5)
    bases = rng.integers(0, 2**64, 10, dtype=np.uint64)
    n = 2500
    pick = rng.integers(0, bases.size, n)
    first = bases[pick].copy()
    second = bases[pick] ^ np.uint64(0x5555_0000_AAAA_FFFF)
    for _ in range(3):
        first ^= np.left_shift(np.uint64(1), rng.integers(0, 64, n).astype(np.uint64))
        second ^= np.left_shift(np.uint64(1), rng.integers(0, 64, n).astype(np.uint64))
    first[: n // 10] = 0  # blank-like: one huge bucket, seconds unrelated
    second[: n // 10] = rng.integers(0, 2**64, n // 10, dtype=np.uint64)
    unique, unique_second, _ = distinct_hash_pairs(first, second)
    monkeypatch.setattr(search, "_KERNEL_BUFFER_PAIRS", buffer_pairs)
    monkeypatch.setattr(search, "_KERNEL_TASKS_PER_THREAD", 3)
    expected = brute_force_labels(unique, unique_second, 8, 8)
    for widths in ([22, 21, 21], [16, 16, 16, 16]):
        plan = banded_plan(widths, 8, list(range(64)))
        options = {"plan": plan, "second": unique_second, "second_threshold": 8}
        assert linked_labels(unique, 8, engine="numba", threads=threads, **options) == expected
    single = np.unique(first)
    plan = banded_plan([22, 21, 21], 6, list(range(64)))
    expected_single = brute_force_labels(single, None, 6, 0)
    assert linked_labels(single, 6, engine="numba", plan=plan, threads=threads) == expected_single


@pytest.mark.parametrize(
    ("threshold", "second_threshold"), [(0, 0), (0, 8), (8, 0), (8, 8), (10, 10), (10, 3)]
)
def test_default_plans_agree_with_brute_force_on_both_engines(
    kernels: ModuleType, threshold: int, second_threshold: int
) -> None:
    # No plan given: the cost model chooses (and may band the second hash when the first has
    # threshold 0), on inputs large enough that it bands at all.
    rng = np.random.default_rng(threshold * 11 + second_threshold)
    bases = rng.integers(0, 2**64, 300, dtype=np.uint64)
    n = 6000
    pick = rng.integers(0, bases.size, n)
    first, second = bases[pick].copy(), bases[pick] ^ np.uint64(0xF0F0)
    for _ in range(5):
        first ^= np.left_shift(np.uint64(1), rng.integers(0, 64, n).astype(np.uint64))
        second ^= np.left_shift(np.uint64(1), rng.integers(0, 64, n).astype(np.uint64))
    unique, unique_second, _ = distinct_hash_pairs(first, second)
    expected = brute_force_labels(unique, unique_second, threshold, second_threshold)
    for engine in ("numba", "numpy"):
        found = linked_labels(
            unique,
            threshold,
            engine=engine,
            second=unique_second,
            second_threshold=second_threshold,
        )
        assert found == expected, engine


@pytest.mark.parametrize("engine", ["numba", "numpy"])
def test_edge_cases(kernels: ModuleType, engine: str) -> None:
    plan = banded_plan([22, 21, 21], 8, list(range(64)))
    empty = np.zeros(0, dtype=np.uint64)
    assert linked_labels(empty, 8, engine=engine, plan=plan) == []
    one = np.array([7], dtype=np.uint64)
    assert linked_labels(one, 8, engine=engine, plan=plan, second=one, second_threshold=8) == [0]
    # All first hashes equal, seconds spread: the one bucket decides alone, on the second hash.
    same = np.zeros(50, dtype=np.uint64)
    seconds = np.array([(1 << (k % 64)) * (k // 64 + 1) for k in range(50)], dtype=np.uint64)
    for second_threshold in (0, 1, 2, 8):
        expected = brute_force_labels(same, seconds, 8, second_threshold)
        found = linked_labels(
            same, 8, engine=engine, plan=plan, second=seconds, second_threshold=second_threshold
        )
        assert found == expected
    # Threshold 0 on the banded hash: only pairs equal on it (the cost model then bands the
    # second hash; here the plan forces the first, at radius 0 per band).
    zero = SearchPlan(plan.band_masks, (0, 0, 0))
    for second_threshold in (0, 5):
        expected = brute_force_labels(same, seconds, 0, second_threshold)
        found = linked_labels(
            same, 0, engine=engine, plan=zero, second=seconds, second_threshold=second_threshold
        )
        assert found == expected


# --------------------------------------------------------------------------------------------------
# Choosing the engine, and numba left out


def test_engine_is_validated() -> None:
    unique = np.arange(4, dtype=np.uint64)
    with pytest.raises(ValueError, match="engine must be one of 'auto', 'numba', 'numpy'"):
        iter_linking_pairs(unique, 2, UnionFindForest(4), engine="gpu")


def test_numba_engine_without_numba_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numba", None)  # as if not installed
    unique = np.arange(3000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    plan = banded_plan([22, 21, 21], 8, list(range(64)))
    with pytest.raises(ImportError, match=r"pip install 'leakaudit-vision\[fast\]'"):
        list(iter_linking_pairs(unique, 8, UnionFindForest(unique.size), plan=plan, engine="numba"))


def test_auto_engine_falls_back_to_numpy_without_numba(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.setattr(search, "_KERNEL_MIN_VALUES", 0)  # would use the kernels if it could
    rng = np.random.default_rng(3)
    unique, second, _ = distinct_hash_pairs(
        rng.integers(0, 2**64, 2000, dtype=np.uint64) & np.uint64(0xFFFF_FFFF_0000_FFFF),
        rng.integers(0, 2**64, 2000, dtype=np.uint64) & np.uint64(0xFFFF),
    )
    plan = banded_plan([22, 21, 21], 8, list(range(64)))
    expected = brute_force_labels(unique, second, 8, 6)
    found = linked_labels(unique, 8, engine="auto", plan=plan, second=second, second_threshold=6)
    assert found == expected


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        env=_base_env(),
    )
    return done.stdout


def _base_env() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if not key.startswith("NUMBA_")}


def test_importing_leakaudit_does_not_import_numba() -> None:
    code = """
        import sys
        import leakaudit, leakaudit.search, leakaudit.grouping
        print("numba" in sys.modules, "leakaudit._kernels" in sys.modules)
    """
    assert run_python(code).split() == ["False", "False"]


def test_the_core_works_without_numba() -> None:
    # numba hidden from the interpreter: the default path (auto) groups on numpy alone.
    code = """
        import sys
        sys.modules["numba"] = None
        import numpy as np
        from leakaudit import search
        from leakaudit.grouping import group_labels_within
        search._KERNEL_MIN_VALUES = 0
        rng = np.random.default_rng(0)
        first = rng.integers(0, 2**64, 3000, dtype=np.uint64)
        first[1500:] = first[:1500] ^ np.uint64(0b101)
        second = first ^ np.uint64(0xFF)
        labels = group_labels_within(first, 8, second=second, second_threshold=8)
        print(int(labels.max()) + 1, "leakaudit._kernels" in sys.modules)
    """
    assert run_python(code).split() == ["1500", "False"]


# --------------------------------------------------------------------------------------------------
# Threads: the argument and LEAKAUDIT_THREADS


@pytest.mark.parametrize("bad", [0, -2])
def test_threads_out_of_range_are_rejected(bad: int) -> None:
    unique = np.arange(4, dtype=np.uint64)
    message = f"threads must be an int >= 1; got {bad}."
    with pytest.raises(ValueError, match=message):
        iter_linking_pairs(unique, 2, UnionFindForest(4), threads=bad)
    with pytest.raises(ValueError, match=message):
        iter_pairs_within(unique, 2, threads=bad)
    with pytest.raises(ValueError, match=message):
        pairs_within(unique, 2, threads=bad)


@pytest.mark.parametrize("bad", ["2", 2.0, True])
def test_threads_of_the_wrong_type_are_rejected(bad: object) -> None:
    unique = np.arange(4, dtype=np.uint64)
    with pytest.raises(TypeError, match="threads must be an int >= 1; got"):
        iter_linking_pairs(unique, 2, UnionFindForest(4), threads=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["abc", "0", "-1", "2.5"])
def test_bad_leakaudit_threads_is_rejected(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("LEAKAUDIT_THREADS", text)
    hashes = np.arange(3000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    message = f"LEAKAUDIT_THREADS must be an int >= 1; got '{text}'"
    with pytest.raises(ValueError, match=message):
        pairs_within(hashes, 8)
    with pytest.raises(ValueError, match=message):
        iter_linking_pairs(hashes, 8, UnionFindForest(hashes.size))
    # The argument wins over the environment.
    assert np.array_equal(pairs_within(hashes, 8, threads=1), pairs_within_brute_force(hashes, 8))


@pytest.mark.parametrize("engine", ["numba", "numpy"])
@pytest.mark.parametrize("text", ["1", "3", " 2 "])
def test_leakaudit_threads_sets_the_threads(
    kernels: ModuleType, monkeypatch: pytest.MonkeyPatch, engine: str, text: str
) -> None:
    monkeypatch.setenv("LEAKAUDIT_THREADS", text)
    rng = np.random.default_rng(8)
    unique, second, _ = distinct_hash_pairs(
        np.repeat(rng.integers(0, 2**64, 400, dtype=np.uint64), 5)
        ^ (np.uint64(1) << rng.integers(0, 64, 2000).astype(np.uint64)),
        rng.integers(0, 2**64, 2000, dtype=np.uint64) & np.uint64(0x0F0F),
    )
    plan = banded_plan([22, 21, 21], 8, list(range(64)))
    expected = brute_force_labels(unique, second, 8, 4)
    found = linked_labels(unique, 8, engine=engine, plan=plan, second=second, second_threshold=4)
    assert found == expected


# --------------------------------------------------------------------------------------------------
# The compiled code's cache


def test_kernels_write_nothing_into_the_working_folder(kernels: ModuleType, tmp_path: Path) -> None:
    # The cache goes beside leakaudit/_kernels.py (or numba's per-user folder), never near the
    # data: a run from the data's folder leaves it as it was.
    code = f"""
        import numpy as np
        from leakaudit.grouping import UnionFindForest
        from leakaudit.search import SearchPlan, iter_linking_pairs
        unique = np.arange(5000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        plan = SearchPlan({banded_plan([22, 21, 21], 8, list(range(64))).band_masks}, (2, 2, 2))
        forest = UnionFindForest(unique.size)
        for a, b in iter_linking_pairs(unique, 8, forest, plan=plan, engine="numba"):
            forest.add(a, b)
        print("ok")
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=_base_env(),
    )
    assert done.stdout.split() == ["ok"]
    assert list(tmp_path.iterdir()) == []


def test_kernels_compile_in_memory_when_no_cache_folder_is_writable(
    kernels: ModuleType, tmp_path: Path
) -> None:
    # Only numba's user-provided locator allowed, pointed at a path under a file: no cache
    # location can be written (as with a read-only site-packages and no writable home), so the
    # kernels compile in memory, and still answer exactly.
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = """
        import numpy as np
        from leakaudit.grouping import UnionFindForest
        from leakaudit.search import SearchPlan, iter_linking_pairs, pairs_within_brute_force
        rng = np.random.default_rng(1)
        unique = np.unique(np.repeat(rng.integers(0, 2**64, 300, dtype=np.uint64), 4)
                           ^ (np.uint64(1) << rng.integers(0, 64, 1200).astype(np.uint64)))
        plan = SearchPlan((0x3FFFFF, 0x7FFFFC00000, 0xFFFFF80000000000), (2, 2, 2))
        forest = UnionFindForest(unique.size)
        for a, b in iter_linking_pairs(unique, 8, forest, plan=plan, engine="numba"):
            forest.add(a, b)
        check = UnionFindForest(unique.size)
        check.add(*pairs_within_brute_force(unique, 8).T.copy())
        print(bool(np.array_equal(forest.labels(), check.labels())))
    """
    environment = {
        **_base_env(),
        "NUMBA_CACHE_LOCATOR_CLASSES": "UserProvidedCacheLocator",
        "NUMBA_CACHE_DIR": str(blocker / "cache"),
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
    assert done.stdout.split() == ["True"]
    assert not (blocker.parent / "cache").exists()


def test_layouts_cover_every_bit() -> None:
    # The plans the tests force are valid: disjoint bands over all 64 bits, covering t.
    for widths in LAYOUTS:
        plan = banded_plan(widths, 10, list(range(64)))
        assert sum(plan.band_masks) == MAX64
        assert all(a & b == 0 for a, b in itertools.combinations(plan.band_masks, 2))
        assert sum(r + 1 for r in plan.radii) > 10
