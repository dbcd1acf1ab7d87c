"""Many identical images (issue 23, points 7 and 8): verified and exported in linear work."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
from imagegen import encode, photo_like
from PIL import Image, PngImagePlugin

from leakaudit import audit_splits
from leakaudit.export import pair_table, write_csv_tables, write_json
from leakaudit.grouping import connected_component_labels
from leakaudit.hashing import hash_sources
from leakaudit.loading import DecodeOptions
from leakaudit.verify import (
    VerifyOptions,
    candidate_pairs,
    kept_together,
    supported_pairs,
    verified_labels,
    verify_candidates,
)

DECODE = DecodeOptions()
OPTIONS = VerifyOptions(geometry=False)


def _same_pixels_other_bytes(image: Image.Image, k: int) -> bytes:
    """A PNG of ``image`` whose bytes differ by ``k`` (a text chunk): identical hashes."""
    info = PngImagePlugin.PngInfo()
    info.add_text("copy", str(k))
    buffer = io.BytesIO()
    image.save(buffer, "PNG", pnginfo=info)
    return buffer.getvalue()


def _sources(n_identical: int, *, distinct_bytes: bool) -> list[bytes]:
    """``n_identical`` copies of one picture, then distinct pictures and 3 near-duplicates."""
    picture = photo_like(5, size=(64, 48))
    same = encode(picture, "PNG")
    copies = [
        _same_pixels_other_bytes(picture, k) if distinct_bytes else same for k in range(n_identical)
    ]
    others = [encode(photo_like(100 + k, size=(64, 48)), "PNG") for k in range(4)]
    near = photo_like(7, size=(96, 72))
    trio = [encode(near, "PNG"), encode(near, "JPEG", quality=90), encode(near, "JPEG", quality=75)]
    return copies + others + trio


def _brute_force_labels(table, sources: list[bytes]) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The groups every candidate pair verified gives (the code before issue 23)."""
    owner = table.orientations.owner
    from leakaudit.hashing import entry_kinds

    n = len(sources)
    pairs, distance = candidate_pairs(
        owner,
        table.orientations.phash,
        table.orientations.dhash,
        entry_kinds(owner),
        np.asarray(table.valid, dtype=bool) & ~np.asarray(table.low_information, dtype=bool),
        OPTIONS.candidate_threshold,
        OPTIONS.crop_candidate_threshold,
        OPTIONS.crop_candidate_dhash_threshold,
    )
    names = [f"img{k}" for k in range(n)]
    verified = verify_candidates(
        pairs, distance, sources, names, decode=DECODE, options=OPTIONS, workers=1
    )
    edges = verified.edges
    passed = verified.distinct[verified.distinct_passed]
    supported = supported_pairs(
        np.concatenate([edges[["row_a", "row_b"]].to_numpy(dtype=np.int64), passed]),
        np.concatenate([edges["stage"].eq("bytes").to_numpy(), np.zeros(len(passed), bool)]),
        OPTIONS.min_support,
    )[: len(edges)]
    edges = edges[supported].reset_index(drop=True)
    if len(verified.distinct) and len(edges):
        edges = edges[kept_together(edges, verified.distinct)].reset_index(drop=True)
    return connected_component_labels(n, iter([edges[["row_a", "row_b"]].to_numpy(np.int64)]))


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    return bool((pd.Series(a).factorize()[0] == pd.Series(b).factorize()[0]).all())


def _verified(sources: list[bytes]):  # type: ignore[no-untyped-def]
    table = hash_sources(sources, dihedral=True, workers=1)
    labels, verified = verified_labels(
        table,
        sources,
        [f"img{k}" for k in range(len(sources))],
        low_information=table.low_information,
        exact_keys=[None] * len(sources),
        decode=DECODE,
        options=OPTIONS,
        workers=1,
        dihedral=True,
    )
    return table, labels, verified


def test_identical_copies_are_verified_once_each_and_group_as_every_pair_would() -> None:
    n = 300
    sources = _sources(n, distinct_bytes=False)
    table, labels, verified = _verified(sources)
    members = len(sources)
    # Linear: each copy verified once against the first, not 44,850 pairs.
    assert verified.n_candidates <= 2 * members
    assert len(verified.edges) <= 2 * members
    assert len(set(labels[:n].tolist())) == 1
    assert labels[-3] == labels[-2] == labels[-1] != labels[0]
    assert _same_partition(labels, _brute_force_labels(table, sources))


def test_identical_hashes_with_other_bytes_are_verified_along_a_star() -> None:
    n = 40  # same pixels, different bytes: identical hashes, no byte copy among them
    sources = _sources(n, distinct_bytes=True)
    assert len(set(sources[:n])) == n
    table, labels, verified = _verified(sources)
    assert verified.n_candidates <= 2 * len(sources)
    assert set(verified.edges["stage"]) >= {"pixels"}
    assert len(set(labels[:n].tolist())) == 1
    assert _same_partition(labels, _brute_force_labels(table, sources))


def _tree(root: Path, n: int) -> None:
    """``n`` byte-identical images over train and test (3:1), distinct ones, 3 near-duplicates."""
    sources = _sources(n, distinct_bytes=False)
    for split in ("train", "test"):
        (root / split).mkdir(parents=True)
    for k, data in enumerate(sources[:n]):
        (root / ("test" if k % 4 == 3 else "train") / f"ph{k:04d}.png").write_bytes(data)
    for k, data in enumerate(sources[n : n + 4]):
        (root / ("test" if k % 2 else "train") / f"other{k}.png").write_bytes(data)
    trio = sources[n + 4 :]
    (root / "train" / "near.png").write_bytes(trio[0])
    (root / "test" / "near_a.jpg").write_bytes(trio[1])
    (root / "test" / "near_b.jpg").write_bytes(trio[2])


def test_pairs_table_of_a_big_identical_group_is_a_spanning_set(tmp_path: Path) -> None:
    n = 300
    _tree(tmp_path / "root", n)
    report = audit_splits(
        {s: tmp_path / "root" / s for s in ("train", "test")}, cache=False, workers=1
    )
    table = report.table
    assert table is not None
    big = table.loc[table["path"].str.contains("ph0"), "group_id"]
    assert big.nunique() == 1
    pairs = pair_table(report)
    in_big = pairs[pairs["group_id"] == big.iloc[0]]
    # Linear in the members (before: 225 x 75 = 16,875 rows), and every member listed.
    assert len(in_big) <= 2 * n
    assert set(in_big["listed"]) == {"spanning"}
    listed = set(in_big["path_a"]) | set(in_big["path_b"])
    assert listed == set(table.loc[table["group_id"] == big.iloc[0], "path"])
    assert (in_big["distance"] == 0).all() and in_big["within_threshold"].all()
    # The small group of three near-duplicates still lists all its cross-split pairs.
    near = table.loc[table["path"].str.contains("near"), "group_id"]
    assert near.nunique() == 1
    small = pairs[pairs["group_id"] == near.iloc[0]]
    assert len(small) == 2 and set(small["listed"]) == {"all"}
    # The text and HTML reports say so in words; the CSV and JSON hold the same rows.
    assert "spanning set" in report.to_text()
    csv_paths = write_csv_tables(report, tmp_path / "out.csv")
    pairs_csv = next(p for p in csv_paths if p.name.endswith("pairs.csv"))
    assert len(pd.read_csv(pairs_csv)) == len(pairs)
    data = json.loads(write_json(report, tmp_path / "out.json").read_text())
    assert len(data["pairs"]) == len(pairs)
    from leakaudit.htmlreport import write_html

    html = write_html(report, tmp_path / "out.html").read_text()
    assert "spanning set" in html
