"""A 32 px photo's crop and rotation entries (the thumbnail's) keep the former net's pairs.

Images of at most 32 x 32 pixels that are not flat graphics (CIFAR's photos) make only the
boxes of ``THUMBNAIL_CROP_SCALES`` and the rotations of ``THUMBNAIL_ROTATIONS`` (the net
before issue 36's denser boxes); their other crop and rotation slots repeat their whole
hashes, which the candidate search and the judge's alignments leave out.
"""

from __future__ import annotations

import io

import imagegen
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from leakaudit import hashing
from leakaudit._verify_candidates import candidate_pairs, repeats_as_is
from leakaudit.hashing import EntryKind, hash_sources


def _png(image) -> bytes:  # type: ignore[no-untyped-def]
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def test_a_32_px_photo_makes_the_former_boxes_and_repeats_its_whole_hashes_elsewhere() -> None:
    images = [_png(imagegen.photo_like(seed, (32, 32))) for seed in range(6)]
    images.append(_png(imagegen.photo_like(9, (64, 48))))  # from its pixels: every box
    table = hash_sources(images, dihedral=True, crop_entries=True, workers=1, progress=False)
    entries = table.orientations
    assert entries is not None
    n_slots = hashing.N_CROP_ENTRIES + hashing.N_ROTATION_ENTRIES
    for row in range(len(images)):
        mine = entries.owner == row
        kinds = entries.kind[mine]
        phash, dhash = entries.phash[mine], entries.dhash[mine]
        as_is = np.flatnonzero(kinds == EntryKind.AS_IS)[0]
        slots = np.flatnonzero((kinds == EntryKind.CROP) | (kinds == EntryKind.ROTATION))
        assert len(slots) == n_slots
        repeats = (phash[slots] == phash[as_is]) & (dhash[slots] == dhash[as_is])
        if row < 6:
            made = np.zeros(n_slots, dtype=bool)
            made[hashing.THUMBNAIL_SLOTS] = True
            # The slots it does not make repeat the whole hashes; those it makes are crops.
            assert repeats[~made].all()
            assert repeats[made].mean() < 0.2
            # The former boxes, hashed as before: the thumbnail's entries in order.
            assert len(hashing.THUMBNAIL_SLOTS) == 29
        else:
            assert repeats.mean() < 0.2
        found = repeats_as_is(entries.owner[mine], phash, dhash, kinds)
        assert np.array_equal(found[slots], repeats)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_leaving_out_the_repeats_changes_no_pair_of_rows_that_make_every_box(data) -> None:  # type: ignore[no-untyped-def]
    # Rows with no repeated slot: the search with and without the repeat filter is one
    # search (the filter drops nothing), checked against brute force over the entries.
    n_rows = data.draw(st.integers(2, 6))
    kinds_of_row = [EntryKind.ORIENTATION, EntryKind.AS_IS, EntryKind.CROP, EntryKind.ROTATION]
    owner = np.repeat(np.arange(n_rows), len(kinds_of_row)).astype(np.int64)
    kinds = np.tile(np.array(kinds_of_row, dtype=np.int8), n_rows)
    base = data.draw(st.integers(0, 2**64 - 1))
    flips = data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=len(owner), max_size=len(owner)))
    # Near one base so that pairs occur: each entry is the base with a few bits flipped.
    rng = np.random.default_rng(int(flips[0] % 2**32))
    bits = rng.integers(0, 64, size=(len(owner), 2, 3))
    phash = np.array(
        [base ^ (1 << int(b0)) ^ (1 << int(b1)) ^ (1 << int(b2)) for b0, b1, b2 in bits[:, 0]],
        dtype=np.uint64,
    )
    dhash = np.array(
        [base ^ (1 << int(b0)) ^ (1 << int(b1)) for b0, b1, _ in bits[:, 1]], dtype=np.uint64
    )
    # One row's crop repeats its as-is entry: that entry is left out, and any pair it made
    # is one its as-is entry makes against crops and rotations.
    phash[2], dhash[2] = phash[1], dhash[1]
    linkable = np.ones(n_rows, dtype=bool)
    pairs, _ = candidate_pairs(owner, phash, dhash, kinds, linkable, 4, 2, 3)
    from leakaudit._verify_candidates import PAIRED_KINDS

    skip = repeats_as_is(owner, phash, dhash, kinds)
    assert skip.tolist() == [i == 2 for i in range(len(owner))]
    expected = set()
    for i in range(len(owner)):
        for j in range(len(owner)):
            if owner[i] >= owner[j] or skip[i] or skip[j]:
                continue
            if not PAIRED_KINDS[kinds[i], kinds[j]]:
                continue
            p = bin(int(phash[i] ^ phash[j])).count("1")
            d = bin(int(dhash[i] ^ dhash[j])).count("1")
            whole = kinds[i] == EntryKind.ORIENTATION and kinds[j] == EntryKind.ORIENTATION
            if (p <= 4 and d <= 4) if whole else (p <= 2 and d <= 3):
                expected.add((int(owner[i]), int(owner[j])))
    assert {tuple(p) for p in pairs.tolist()} == expected
