"""Entries as a concept of their own: each entry stores its kind, and the crop entries are a
hashing choice (issue 26, point 2).

Kinds are stored where hashing makes the entries (``OrientationHashes.kind``), numbered
once (:class:`leakaudit.hashing.EntryKind`), and a crop or rotation entry's box is its
rank among its row's entries of its kind: appending a new kind of entry to a row moves no
reader. ``crop_entries`` is a parameter of the hashing functions, decided by the audit;
``DecodeOptions(crop_entries=True)`` still works, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import imagegen
import numpy as np
import pytest

from leakaudit import _verify_candidates
from leakaudit.audit import hashing_options, wants_crop_entries
from leakaudit.cache import hash_context, hash_sources_cached
from leakaudit.hashing import (
    CROP_BOXES,
    CROP_ROTATIONS,
    EXTRA_KINDS,
    MAX_ORIENTATIONS,
    N_EXTRA_ENTRIES,
    EntryKind,
    OrientationHashes,
    entry_kinds,
    hash_image,
    hash_sources,
)
from leakaudit.loading import DecodeOptions
from leakaudit.shards import decode_options_of, hashing_metadata
from leakaudit.verify import VerifyOptions

IMAGES = [imagegen.photo_like(seed, (96, 72)) for seed in range(4)]


def test_hashing_stores_each_entrys_kind() -> None:
    table = hash_sources(IMAGES, dihedral=True, crop_entries=True, workers=1)
    entries = table.orientations
    assert entries is not None and entries.kind.dtype == np.int8
    per_row = np.bincount(entries.owner, minlength=len(IMAGES))
    assert (per_row > N_EXTRA_ENTRIES).all()
    for row in range(len(IMAGES)):
        kinds = entries.kind[entries.owner == row].tolist()
        strips = kinds.count(EntryKind.STRIP)  # 4:3 images have strip entries last
        orientations = len(kinds) - N_EXTRA_ENTRIES - strips
        assert (
            kinds
            == [EntryKind.ORIENTATION] * orientations
            + list(EXTRA_KINDS)
            + [EntryKind.STRIP] * strips
        )
    # The stored kinds are the layout the old inference reads (cache, shards).
    assert np.array_equal(entries.kind, entry_kinds(entries.owner))
    # One image at a time: the same kinds.
    alone = hash_image(IMAGES[0], dihedral=True, crop_entries=True)
    assert list(alone.kinds) == entries.kind[entries.owner == 0].tolist()
    plain = hash_sources(IMAGES, dihedral=True, workers=1)
    assert plain.orientations is not None
    assert (plain.orientations.kind == EntryKind.ORIENTATION).all()
    assert (np.bincount(plain.orientations.owner) <= MAX_ORIENTATIONS).all()


def test_an_entrys_box_is_its_rank_among_its_kind() -> None:
    table = hash_sources(IMAGES[:2], dihedral=True, crop_entries=True, workers=1)
    entries = table.orientations
    assert entries is not None
    index = entries.index_in_kind()
    for row in range(2):
        mine = entries.owner == row
        for kind, count in (
            (EntryKind.CROP, len(CROP_BOXES)),
            (EntryKind.ROTATION, len(CROP_ROTATIONS)),
        ):
            assert index[mine & (entries.kind == kind)].tolist() == list(range(count))
        assert index[mine & (entries.kind == EntryKind.AS_IS)].tolist() == [0]
    # take() and merge() carry the kinds with the entries.
    taken = entries.take(np.array([1, 0]))
    assert np.array_equal(taken.kind[taken.owner == 0], entries.kind[entries.owner == 1])
    merged = OrientationHashes.merge([entries.take(np.array([1])), entries.take(np.array([0]))])
    assert merged.kind.tolist() == entries.kind[entries.owner == 1].tolist() + [
        int(k) for k in entries.kind[entries.owner == 0]
    ]


def test_an_appended_kind_moves_no_reader() -> None:
    """A future kind of entry appended after a row's entries (a new set of boxes) leaves
    the candidate net as it was: no reader counts from a row's end."""
    table = hash_sources(IMAGES, dihedral=True, crop_entries=True, workers=1)
    entries = table.orientations
    assert entries is not None
    future = len(EntryKind)  # a kind no reader knows
    extra = OrientationHashes(
        np.arange(len(IMAGES), dtype=np.int64),
        np.full(len(IMAGES), 12345, np.uint64),
        np.full(len(IMAGES), 678, np.uint64),
        np.full(len(IMAGES), future, np.int8),
    )
    grown = OrientationHashes.merge([entries, extra])
    assert np.array_equal(grown.index_in_kind()[grown.kind != future], entries.index_in_kind())
    options = VerifyOptions()
    low = np.zeros(len(IMAGES), dtype=bool)

    def net(found: OrientationHashes) -> list[list[int]]:
        view = SimpleNamespace(
            valid=table.valid, phash=table.phash, dhash=table.dhash, orientations=found
        )
        (pairs, _), _ = _verify_candidates.table_candidates(view, low, options, dihedral=True)
        return pairs.tolist()

    assert net(grown) == net(entries)


def test_the_verifier_uses_the_one_numbering() -> None:
    assert _verify_candidates.WHOLE is EntryKind.ORIENTATION
    for name in ("CROP", "ROTATION", "AS_IS", "CONTENT"):
        assert getattr(_verify_candidates, name) is EntryKind[name]
    assert _verify_candidates.PAIRED_KINDS.shape == (len(EntryKind), len(EntryKind))
    assert [int(kind) for kind in EntryKind] == [0, 1, 2, 3, 4, 5]  # stored values never change


def test_crop_entries_are_a_hashing_choice_the_audit_makes() -> None:
    assert wants_crop_entries(dihedral=True, verify="auto")
    assert not wants_crop_entries(dihedral=True, verify=False)
    assert not wants_crop_entries(dihedral=False, verify="auto")
    assert hashing_options(None, dihedral=True, verify="auto") == DecodeOptions()
    with pytest.raises(TypeError, match="crop_entries"):
        hash_sources(IMAGES, dihedral=True, crop_entries="yes", workers=1)  # type: ignore[arg-type]


def test_decode_options_crop_entries_is_deprecated_but_works() -> None:
    with pytest.warns(DeprecationWarning, match="crop_entries"):
        old = DecodeOptions(crop_entries=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        DecodeOptions()  # no warning by default
        new = hash_sources(IMAGES, dihedral=True, crop_entries=True, workers=1)
    was = hash_sources(IMAGES, dihedral=True, decode=old, workers=1)
    assert was.orientations is not None and new.orientations is not None
    assert np.array_equal(was.orientations.phash, new.orientations.phash)
    assert np.array_equal(was.orientations.kind, new.orientations.kind)
    # Either way of asking is one cache key; with and without entries are two.
    assert hash_context(old) == hash_context(DecodeOptions(), crop_entries=True)
    assert hash_context(DecodeOptions()) != hash_context(DecodeOptions(), crop_entries=True)


def test_cached_rows_with_and_without_entries_stay_apart(tmp_path: Path) -> None:
    paths = []
    for k, image in enumerate(IMAGES):
        path = tmp_path / f"{k}.png"
        image.save(path)
        paths.append(path)
    time.sleep(0.15)  # settled: the cache stores them
    cache = tmp_path / "cache"

    def run(crop: bool) -> OrientationHashes:
        table = hash_sources_cached(
            paths, cache=cache, dihedral=True, crop_entries=crop, workers=1, progress=False
        )
        assert table.orientations is not None
        return table.orientations

    plain, cropped = run(False), run(True)
    plain_again, cropped_again = run(False), run(True)
    assert (np.bincount(plain_again.owner) <= MAX_ORIENTATIONS).all()
    assert (np.bincount(cropped_again.owner) > N_EXTRA_ENTRIES).all()
    for first, again in ((plain, plain_again), (cropped, cropped_again)):
        assert np.array_equal(first.phash, again.phash)
        assert np.array_equal(first.kind, again.kind)  # served rows: kinds read from the layout


def test_shards_record_the_choice_and_read_no_deprecated_option() -> None:
    record = hashing_metadata(DecodeOptions(), dihedral=True, crop_entries=True)
    assert record["decode"]["crop_entries"] is True  # where shards always kept it
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert decode_options_of(record) == DecodeOptions()
