"""Dihedral matching (flips, 90-degree rotations) and per-source thresholds."""

from __future__ import annotations

import io
import itertools
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from imagegen import encode, photo_like
from PIL import Image

from leakaudit import audit_splits
from leakaudit.cli import main
from leakaudit.export import pair_table
from leakaudit.grouping import fuzzy_edges
from leakaudit.hashing import (
    OrientationHashes,
    _hashes_from_thumbnails,
    _oriented,
    _thumbnails,
    dihedral_orientations,
    hash_sources,
    popcount64,
)
from leakaudit.loading import DecodeOptions, grey_from_pil
from leakaudit.policy import ThresholdRuleWarning, row_thresholds

T = Image.Transpose
TURNS = {
    "mirror": T.FLIP_LEFT_RIGHT,
    "flip": T.FLIP_TOP_BOTTOM,
    "rot90": T.ROTATE_90,
    "rot180": T.ROTATE_180,
    "rot270": T.ROTATE_270,
    "transpose": T.TRANSPOSE,
    "transverse": T.TRANSVERSE,
}


def _jpeg(image: Image.Image, quality: int = 80) -> bytes:
    return encode(image.convert("RGB"), "JPEG", quality=quality)


# ----------------------------------------------------------------- hashing


@pytest.mark.parametrize("seed", range(6))
def test_all_eight_orientations_share_a_canonical_entry(seed: int) -> None:
    image = photo_like(seed, (150, 110))
    turned = [image] + [image.transpose(t) for t in TURNS.values()]
    table = hash_sources(turned, dihedral=True, workers=1)
    entries = table.orientations
    assert entries is not None
    sets = [
        set(
            zip(
                entries.phash[entries.owner == i].tolist(),
                entries.dhash[entries.owner == i].tolist(),
                strict=True,
            )
        )
        for i in range(len(turned))
    ]
    # Lossless turns of one image: some canonical entry is identical in all eight.
    assert set.intersection(*sets)
    # An image already in its canonical orientation has its plain hashes as first entry.
    first = np.searchsorted(entries.owner, np.arange(len(turned)))
    same = entries.phash[first] == table.phash
    assert same.any()
    assert (entries.dhash[first][same] == table.dhash[same]).all()


def test_orientation_codes_are_the_dihedral_group() -> None:
    pixels = np.asarray(photo_like(3, (90, 70), "L"))
    expected = {
        0: pixels,
        1: pixels.T,
        2: pixels[:, ::-1],
        4: pixels[::-1, :],
    }
    for code, array in expected.items():
        turned, box = _oriented(pixels, None, code)
        assert np.array_equal(turned, array)
    # A box is carried along: turning the cropped image equals cropping the turned one.
    box = (3.5, 2.0, 80.25, 61.0)
    for code in range(8):
        turned, turned_box = _oriented(pixels, box, code)
        assert turned_box is not None
        whole, _ = _oriented(pixels, None, code)
        assert np.array_equal(turned, whole)
        left, top, right, bottom = turned_box
        assert right - left == pytest.approx((box[3] - box[1]) if code & 1 else (box[2] - box[0]))
        assert bottom - top == pytest.approx((box[2] - box[0]) if code & 1 else (box[3] - box[1]))


def test_canonical_orientation_is_invariant_on_coefficients() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        ac = rng.normal(size=64)
        ac[0] = 0.0
        grid = ac.reshape(8, 8)
        sign = (-1.0) ** np.arange(8)
        variants = [
            grid,
            grid.T,
            grid * sign[None, :],
            grid * sign[:, None],
            grid.T * sign[None, :],
        ]
        codes = [dihedral_orientations(v.ravel(), 0.0) for v in variants]
        assert all(len(c) == 1 for c in codes)
        canonical = []
        for variant, (code,) in zip(variants, codes, strict=True):
            turned = variant.T if code & 1 else variant
            if code & 2:
                turned = turned * sign[None, :]
            if code & 4:
                turned = turned * sign[:, None]
            canonical.append(turned)
        for other in canonical[1:]:
            assert np.allclose(other, canonical[0])


def test_near_ties_index_both_choices() -> None:
    ac = np.zeros(64)
    ac[1], ac[8], ac[9] = 0.001, 5.0, 3.0  # (0, 1) is almost zero: mirror undecided
    codes = dihedral_orientations(ac, 0.02)
    assert len(codes) == 2
    assert dihedral_orientations(ac, 0.0) == codes[:1]


def test_entries_are_the_hashes_of_the_turned_pixels() -> None:
    image = photo_like(11, (140, 100))
    table = hash_sources([image], dihedral=True, workers=1)
    entries = table.orientations
    assert entries is not None
    pixels, box = grey_from_pil(image, "x", DecodeOptions())
    _, _, ac = _hashes_from_thumbnails(*_thumbnails(pixels, box))
    codes = dihedral_orientations(ac)
    expected = [
        _hashes_from_thumbnails(*_thumbnails(*_oriented(pixels, box, code)))[:2] for code in codes
    ]
    assert list(zip(entries.phash.tolist(), entries.dhash.tolist(), strict=True)) == expected


def test_pool_and_serial_orientations_agree(tmp_path: Path) -> None:
    paths = []
    for i in range(210):  # enough for the process pool
        path = tmp_path / f"{i}.jpg"
        path.write_bytes(
            _jpeg(
                photo_like(i % 70, (96, 72)).transpose(T.ROTATE_90)
                if i % 3
                else photo_like(i % 70, (96, 72))
            )
        )
        paths.append(path)
    paths.append(tmp_path / "missing.jpg")
    serial = hash_sources(paths, dihedral=True, workers=1, on_error="ignore")
    pooled = hash_sources(paths, dihedral=True, workers=2, on_error="ignore")
    assert serial.orientations is not None and pooled.orientations is not None
    for name in ("owner", "phash", "dhash"):
        assert np.array_equal(
            getattr(serial.orientations, name), getattr(pooled.orientations, name)
        )
    assert not (serial.orientations.owner == len(paths) - 1).any()  # unreadable: no entries


def test_blank_images_get_no_orientations() -> None:
    table = hash_sources([Image.new("RGB", (80, 60), "navy"), photo_like(1)], dihedral=True)
    assert table.orientations is not None
    assert set(table.orientations.owner.tolist()) == {1}


def test_dihedral_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="dihedral must be a bool"):
        hash_sources([photo_like(1)], dihedral="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dihedral must be a bool"):
        audit_splits({"a": [photo_like(1)]}, dihedral=1)  # type: ignore[arg-type]


def test_take_renumbers_entries() -> None:
    entries = OrientationHashes(
        owner=np.array([0, 0, 1, 3, 3, 3], dtype=np.int64),
        phash=np.arange(6, dtype=np.uint64),
        dhash=np.arange(6, dtype=np.uint64) + np.uint64(10),
    )
    taken = entries.take(np.array([3, 2, 0]))
    assert taken.owner.tolist() == [0, 0, 0, 2, 2]
    assert taken.phash.tolist() == [3, 4, 5, 0, 1]
    assert taken.dhash.tolist() == [13, 14, 15, 10, 11]


# ---------------------------------------------------------------- search


def _brute_row_pairs(
    owner: np.ndarray,
    values: np.ndarray,
    second: np.ndarray | None,
    limits: np.ndarray,
    linkable: np.ndarray,
) -> set[tuple[int, int]]:
    found = set()
    for i, j in itertools.combinations(range(len(values)), 2):
        a, b = int(owner[i]), int(owner[j])
        if a == b or not (linkable[a] and linkable[b]):
            continue
        limit = min(limits[a], limits[b])
        if popcount64(np.array([values[i] ^ values[j]]))[0] > limit:
            continue
        if second is not None and popcount64(np.array([second[i] ^ second[j]]))[0] > limit:
            continue
        found.add((min(a, b), max(a, b)))
    return found


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(2, 40),
    extra=st.integers(0, 40),
    base_bits=st.integers(0, 64),
    seed=st.integers(0, 2**31),
    per_row=st.booleans(),
    both=st.booleans(),
)
def test_entry_search_equals_brute_force(
    rows: int, extra: int, base_bits: int, seed: int, per_row: bool, both: bool
) -> None:
    rng = np.random.default_rng(seed)
    owner = np.sort(np.concatenate([np.arange(rows), rng.integers(0, rows, extra)])).astype(
        np.int64
    )
    # Clumpy values: few bits differ from a shared base, so many pairs are close.
    base = rng.integers(0, 2**64, dtype=np.uint64)
    noise = np.zeros(len(owner), dtype=np.uint64)
    for _ in range(rng.integers(0, 8)):
        noise ^= np.uint64(1) << rng.integers(0, max(1, base_bits), len(owner)).astype(np.uint64)
    values = base ^ noise
    second = (values * np.uint64(3)) if both else None
    limits = rng.integers(0, 12, rows).astype(np.int64) if per_row else np.full(rows, 6)
    linkable = rng.random(rows) > 0.1
    found = set()
    for edges in fuzzy_edges(
        values,
        int(limits.max()),
        linkable,
        second=second,
        second_threshold=6,
        owner=owner,
        limits=limits if per_row else None,
    ):
        found.update((min(a, b), max(a, b)) for a, b in edges.tolist())
    assert found == _brute_row_pairs(owner, values, second, limits, linkable)


# ----------------------------------------------------------------- audits


@pytest.fixture
def turned_splits(tmp_path: Path) -> dict[str, Path]:
    train, test = tmp_path / "train", tmp_path / "test"
    train.mkdir()
    test.mkdir()
    for i in range(12):
        photo_like(100 + i, (200, 150)).save(train / f"t{i:02d}.png")
    for k, (name, turn) in enumerate(TURNS.items()):
        image = photo_like(100 + k, (200, 150)).transpose(turn)
        (test / f"{name}.jpg").write_bytes(_jpeg(image, 75))
    (test / "plain_copy.jpg").write_bytes(_jpeg(photo_like(100 + 9, (200, 150)), 70))
    for i in range(6):
        photo_like(500 + i, (200, 150)).save(test / f"other{i}.png")
    return {"train": train, "test": test}


def _leaked_test_files(report) -> set[str]:  # type: ignore[no-untyped-def]
    table = report.table
    leaked = table["group_id"].isin(report.leaked_groups["group_id"])
    return {Path(p).name for p in table.loc[leaked & (table["split"] == "test"), "path"]}


def test_audit_catches_turned_copies_only_with_dihedral(turned_splits: dict[str, Path]) -> None:
    plain = audit_splits(turned_splits, workers=1, cache=False, dihedral=False, verify=False)
    assert _leaked_test_files(plain) == {"plain_copy.jpg"}
    turned = audit_splits(turned_splits, workers=1, cache=False, dihedral=True, verify=False)
    assert _leaked_test_files(turned) == {f"{name}.jpg" for name in TURNS} | {"plain_copy.jpg"}
    assert turned.parameters["dihedral"] is True
    assert turned.n_leaked_groups == len(TURNS) + 1

    pairs = pair_table(turned)
    stages = dict(zip(pairs["path_b"].map(lambda p: Path(p).name), pairs["stage"], strict=True))
    assert stages["plain_copy.jpg"] == "hash"
    assert all(stages[f"{name}.jpg"] == "dihedral hash" for name in TURNS)
    assert pairs["within_threshold"].all()
    assert (pairs["distance"] <= 8).all()


def test_dihedral_still_finds_ordinary_copies(tmp_path: Path) -> None:
    # Resized re-encodes well inside the threshold are found turned as they are unturned.
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for i in range(40):
        image = photo_like(i, (128, 96))
        image.save(a / f"{i}.png")
        _ = (b / f"{i}.jpg").write_bytes(_jpeg(image.resize((100, 75)), 40 + i))
    splits = {"a": a, "b": b}
    plain = audit_splits(splits, workers=1, cache=False, threshold=10)
    turned = audit_splits(splits, workers=1, cache=False, threshold=10, dihedral=True)
    plain_ids = plain.table["group_id"].to_numpy()
    turned_ids = turned.table["group_id"].to_numpy()
    for group in np.unique(plain_ids):
        members = np.flatnonzero(plain_ids == group)
        assert len(set(turned_ids[members].tolist())) == 1


def test_dihedral_needs_orientation_hashes() -> None:
    from leakaudit.audit import audit_hash_table

    table = hash_sources([photo_like(1), photo_like(2)])
    with pytest.raises(ValueError, match="dihedral=True"):
        audit_hash_table(table, ["a", "b"], dihedral=True)


# ----------------------------------------------------- per-source thresholds


def test_row_thresholds_rules() -> None:
    paths = ["d/train/x.png", "d/train/screens/y.png", "d/test/z.png", "d/test/screens/w.png"]
    splits = ["train", "train", "test", "test"]
    limits = row_thresholds({"screens/*": 2, "test": 4}, "phash+dhash", paths, splits)
    # Split rules first, then patterns in order, else the method's default.
    assert limits.tolist() == [8, 2, 4, 4]
    limits = row_thresholds({"*/screens/*": 2, "*": 10}, "phash", paths, splits)
    assert limits.tolist() == [10, 2, 10, 2]
    with pytest.warns(ThresholdRuleWarning, match="'val'"):
        row_thresholds({"val": 3}, "phash", paths, splits)


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ({}, ValueError, "empty mapping"),
        ({"test": 65}, ValueError, r"threshold\['test'\] must be an int in \[0, 64\]"),
        ({"test": "4"}, TypeError, r"threshold\['test'\]"),
        ({3: 4}, TypeError, "keys must be split names or path patterns"),
    ],
)
def test_threshold_rules_are_validated(spec: dict, error: type, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(error, match=message):
        audit_splits({"a": [photo_like(1)]}, threshold=spec, cache=False)


def test_per_source_threshold_links_within_the_smaller(tmp_path: Path) -> None:
    train, test = tmp_path / "train", tmp_path / "test"
    train.mkdir()
    test.mkdir()
    originals = [photo_like(200 + i, (160, 120)) for i in range(8)]
    for i, image in enumerate(originals):
        image.save(train / f"{i}.png")
    from leakaudit.hashing import hash_image

    distances = {}
    for i, image in enumerate(originals):
        data = _jpeg(image.resize((90, 68)), 35)
        (test / f"{i}.jpg").write_bytes(data)
        h0, h1 = hash_image(image), hash_image(data)
        distances[f"{i}.jpg"] = max(
            bin(h0.phash ^ h1.phash).count("1"), bin(h0.dhash ^ h1.dhash).count("1")
        )
    cut = sorted(distances.values())[len(distances) // 2]
    splits = {"train": train, "test": test}
    report = audit_splits(
        splits, workers=1, cache=False, threshold={"test": cut, "*": 20}, dihedral=False
    )
    assert report.table["threshold"].tolist() == [20] * 8 + [cut] * 8
    expected = {name for name, d in distances.items() if d <= cut}
    assert _leaked_test_files(report) == expected
    assert report.parameters["threshold"] == {"test": cut, "*": 20}
    pairs = pair_table(report)
    assert (pairs["within_threshold"] == (pairs["distance"] <= cut)).all()
    # The same with one number for everything links at least as much.
    wide = audit_splits(splits, workers=1, cache=False, threshold=20)
    assert _leaked_test_files(wide) >= expected


# -------------------------------------------------------------------- CLI


def test_cli_dihedral_and_threshold_rules(
    turned_splits: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pairs.json"
    code = main(
        [
            "compare",
            str(turned_splits["train"]),
            str(turned_splits["test"]),
            "--dihedral",
            "--threshold", "8",
            "--threshold", "test=8",
            "--no-cache",
            "--json", str(out),
            "--fail-on-leak", "1",
            "--quiet",
        ]
    )  # fmt: skip
    assert code == 1
    import json

    report = json.loads(out.read_text())
    assert report["parameters"]["dihedral"] is True
    assert report["parameters"]["threshold"] == {"test": 8, "*": 8}


@pytest.mark.parametrize("bad", ["x=abc", "=4", "70", "test=-1"])
def test_cli_rejects_bad_threshold(
    bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scan", str(tmp_path), "--threshold", bad]) == 2
    assert "--threshold" in capsys.readouterr().err


def test_bytes_sources_work_with_dihedral() -> None:
    image = photo_like(7, (120, 90))
    buffer = io.BytesIO()
    image.transpose(T.ROTATE_270).save(buffer, "PNG")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = audit_splits(
            {"train": [image], "test": [buffer.getvalue()]}, dihedral=True, workers=1
        )
    assert report.n_leaked_images == 2


def test_html_report_shows_turned_distances(turned_splits: dict[str, Path], tmp_path: Path) -> None:
    from leakaudit.htmlreport import write_html

    report = audit_splits(turned_splits, workers=1, cache=False, dihedral=True, threshold={"*": 8})
    out = write_html(report, tmp_path / "r.html")
    text = Path(out).read_text(encoding="utf-8")
    assert "turned to canonical orientation" in text
    assert "threshold 8" in text


def test_group_spread_uses_turned_distances(turned_splits: dict[str, Path]) -> None:
    report = audit_splits(turned_splits, workers=1, cache=False, dihedral=True)
    assert (report.leaked_groups["max_distance"] <= 8).all()
    plain = audit_splits(turned_splits, workers=1, cache=False)
    assert (plain.leaked_groups["max_distance"] <= 8).all()


def test_hash_image_orientations_match_hash_sources() -> None:
    from leakaudit.hashing import hash_image

    image = photo_like(21, (130, 90)).transpose(T.ROTATE_90)
    single = hash_image(image, dihedral=True)
    table = hash_sources([image], dihedral=True, workers=1)
    assert table.orientations is not None
    assert single.orientations == tuple(
        zip(table.orientations.phash.tolist(), table.orientations.dhash.tolist(), strict=True)
    )
    assert hash_image(image).orientations == ()
    with pytest.raises(TypeError, match="dihedral must be a bool"):
        hash_image(image, dihedral=None)  # type: ignore[arg-type]
