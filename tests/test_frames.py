from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from leakaudit import UnreadableImageWarning, compute_hashes, find_duplicate_groups
from leakaudit.demo import photo_like_image
from leakaudit.hashing import hex_to_hashes


def test_seed_example_groups() -> None:
    hashes = pd.DataFrame(
        {
            "path": ["a.jpg", "b.jpg", "c.jpg", "d.jpg"],
            "hash": [
                "0000000000000000",
                "0000000000000001",
                "ffffffffffffffff",
                "1234567890abcdef",
            ],
        }
    )
    out = find_duplicate_groups(hashes, threshold=5)
    assert out["group_id"].tolist() == [0, 0, 1, 2]
    assert out["path"].tolist() == hashes["path"].tolist()
    assert "group_id" not in hashes.columns  # input untouched


def test_transitive_chain_forms_one_group() -> None:
    # a~b (4 bits), b~c (4 bits), a and c are 8 bits apart
    hashes = pd.DataFrame(
        {
            "path": list("xacbz"),
            "hash": [
                "ffff000000000000",
                "0000000000000000",
                "00000000000000ff",
                "000000000000000f",
                "ffffffffffffffff",
            ],
        }
    )
    out = find_duplicate_groups(hashes, threshold=4)
    assert out["group_id"].tolist() == [0, 1, 1, 1, 2]


def test_missing_hashes_are_singletons_and_ids_compact() -> None:
    hashes = pd.DataFrame(
        {
            "path": list("abcde"),
            "hash": [None, "00000000000000ff", np.nan, "00000000000000fe", None],
        }
    )
    out = find_duplicate_groups(hashes, threshold=1)
    assert out["group_id"].tolist() == [0, 1, 2, 1, 3]


def test_short_hex_hashes_and_threshold_zero() -> None:
    hashes = pd.DataFrame({"path": list("abc"), "hash": ["ff00", "ff01", "ff00"]})
    assert find_duplicate_groups(hashes, threshold=0)["group_id"].tolist() == [0, 1, 0]
    assert find_duplicate_groups(hashes, threshold=1)["group_id"].tolist() == [0, 0, 0]


def test_low_information_rows_link_only_to_exact_copies() -> None:
    hashes = pd.DataFrame(
        {
            "path": list("abcd"),
            "hash": [
                "0000000000000000",
                "0000000000000000",
                "0000000000000001",
                "0000000000000000",
            ],
            "low_information": [True, True, False, True],
            "digest": [
                "aaaaaaaaaaaaaaaa",
                "bbbbbbbbbbbbbbbb",
                "cccccccccccccccc",
                "aaaaaaaaaaaaaaaa",
            ],
        }
    )
    out = find_duplicate_groups(hashes, threshold=5)
    # a and d are byte-identical; b is a different blank image; c is a normal image
    assert out["group_id"].tolist() == [0, 1, 2, 0]


def test_find_duplicate_groups_bad_input() -> None:
    with pytest.raises(ValueError, match="same length"):
        find_duplicate_groups(pd.DataFrame({"path": ["a", "b"], "hash": ["ff00", "ff"]}))
    with pytest.raises(ValueError, match="hex"):
        find_duplicate_groups(pd.DataFrame({"path": ["a"], "hash": ["zz00"]}))
    with pytest.raises(ValueError, match=r"threshold must be an int in \[0, 64\]; got 70"):
        find_duplicate_groups(pd.DataFrame({"path": ["a"], "hash": ["ff00"]}), threshold=70)
    with pytest.raises(TypeError, match="threshold must be an int"):
        find_duplicate_groups(pd.DataFrame({"path": ["a"], "hash": ["ff00"]}), threshold=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'hash' column"):
        find_duplicate_groups(pd.DataFrame({"path": ["a"]}))


def _jpeg_bytes(image: Image.Image, quality: int) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def test_compute_hashes_on_files(tmp_path: Path) -> None:
    paths = []
    for i in range(4):
        path = tmp_path / f"img{i}.png"
        photo_like_image(i).save(path)
        paths.append(path)
    copy = tmp_path / "copy_of_0.jpg"
    copy.write_bytes(_jpeg_bytes(photo_like_image(0), 60))
    paths.append(copy)
    df = compute_hashes(paths, ["train"] * 4 + ["test"], workers=1, progress=False)
    assert df.columns.tolist()[:3] == ["path", "split", "hash"]
    assert df["path"].tolist() == [str(p) for p in paths]
    assert all(isinstance(h, str) and len(h) == 16 for h in df["hash"])
    assert df["hash"].str.fullmatch("[0-9a-f]{16}").all()
    grouped = find_duplicate_groups(df, threshold=5)
    assert grouped.loc[0, "group_id"] == grouped.loc[4, "group_id"]
    assert grouped["group_id"].nunique() == 4
    phash = compute_hashes(paths, method="phash", workers=1, progress=False)
    assert phash["hash"].tolist() == df["phash"].tolist()
    assert phash["split"].isna().all()


def test_compute_hashes_records_bad_files_in_one_warning(tmp_path: Path) -> None:
    good = tmp_path / "good.png"
    photo_like_image(1).save(good)
    text = tmp_path / "notes.png"
    text.write_text("this is not an image")
    missing = tmp_path / "gone.jpg"
    with pytest.warns(UnreadableImageWarning) as record:
        df = compute_hashes([good, text, missing], workers=1, progress=False)
    assert len(record) == 1
    message = str(record[0].message)
    assert "notes.png" in message and "gone.jpg" in message
    assert df["hash"].isna().tolist() == [False, True, True]
    assert df["error"].notna().tolist() == [False, True, True]
    assert len(df) == 3


def test_compute_hashes_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"split must have one label per path \(length 2\); got length 3"
    ):
        compute_hashes(["a.png", "b.png"], ["train", "test", "val"])
    with pytest.raises(ValueError, match="method must be one of"):
        compute_hashes(["a.png"], method="ahash")
    with pytest.raises(TypeError, match="Wrap it in a list"):
        compute_hashes("a.png")


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 16).flatmap(
        lambda width: st.lists(
            st.one_of(
                st.none(),
                st.just(""),
                st.text("0123456789abcdefABCDEF", min_size=width, max_size=width),
            ),
            max_size=40,
        )
    )
)
def test_hex_parse_matches_int_per_row(values: list[str | None]) -> None:
    """The vectorised parse of a hash column agrees with int(text, 16) row by row, and
    with hashing.hex_to_hashes: one rule for hex hashes (issue 26.1)."""
    from leakaudit.frames import hash_values_from_frame

    parsed, valid = hash_values_from_frame(pd.DataFrame({"hash": pd.Series(values, dtype=object)}))
    for value, number, ok in zip(values, parsed.tolist(), valid.tolist(), strict=True):
        assert ok == bool(value)
        assert number == (int(value, 16) if value else 0)
    same, same_valid = hex_to_hashes(values)
    assert np.array_equal(same, parsed) and np.array_equal(same_valid, valid)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (" 00ff", r"hash\[2\] must be a hex string; got ' 00ff'"),
        ("00ff\t", r"hash\[2\] must be a hex string; got '00ff\\t'"),
        ("0x00ff", r"hash\[2\] must be a hex string; got '0x00ff'"),
        ("0f", r"same length; got 4 and 2 hex characters \(hash\[2\]\)"),
        ("f" * 17, r"hash\[2\] must be at most 16 hex characters"),
        (b"00ff", r"hash\[2\] must be a hex string or missing; got b'00ff'"),
    ],
)
def test_hex_column_and_hex_to_hashes_share_one_rule(bad: object, message: str) -> None:
    """Issue 26.1: frames' hex parse stripped whitespace and demanded one width while
    hashing.hex_to_hashes rejected whitespace and took any width; now both reject both,
    naming the row and the value."""
    from leakaudit.frames import hash_values_from_frame

    column = ["00ff", None, bad, "abcd"]
    error = TypeError if isinstance(bad, bytes) else ValueError
    with pytest.raises(error, match=message):
        hash_values_from_frame(pd.DataFrame({"hash": pd.Series(column, dtype=object)}))
    with pytest.raises(error, match=message):
        hex_to_hashes(column, name="hash")


def test_in_memory_images_have_one_naming_scheme() -> None:
    """compute_hashes said <Image #0> where audit_sources said <PIL image #0>."""
    from leakaudit import audit_sources

    image = photo_like_image(3)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    sources = [image, buffer.getvalue()]
    frame = compute_hashes(sources, split=["a", "b"], cache=False)
    report = audit_sources(sources, ["a", "b"], workers=1, cache=False)
    assert report.table is not None
    assert (
        frame["path"].tolist()
        == report.table["path"].tolist()
        == [
            "<PIL image #0>",
            "<bytes #1>",
        ]
    )


def test_find_duplicate_groups_equals_the_grouping_engine_at_scale() -> None:
    # Large enough for the banded search; with and without low-information rows (the two ways
    # link_labels returns its labels), and missing hashes.
    from leakaudit.grouping import group_labels_within
    from leakaudit.hashing import hashes_to_hex

    rng = np.random.default_rng(0)
    values = rng.integers(0, 2**64, 30_000, dtype=np.uint64)
    values[15_000:] = values[:15_000] ^ (
        np.uint64(1) << rng.integers(0, 64, 15_000).astype(np.uint64)
    )
    texts = pd.Series(hashes_to_hex(values), dtype=object)
    missing = rng.random(values.size) < 0.01
    texts[missing] = None
    frame = pd.DataFrame({"path": [f"{i}.jpg" for i in range(values.size)], "hash": texts})
    expected = group_labels_within(values, 5, valid=~missing)
    assert np.array_equal(find_duplicate_groups(frame, 5)["group_id"].to_numpy(), expected)
    frame["low_information"] = False
    frame.loc[:3, "low_information"] = True
    grouped = find_duplicate_groups(frame, 5)["group_id"].to_numpy()
    # The four low-information rows have distinct hashes: singletons, as if they could not link.
    linkable = ~missing & ~frame["low_information"].to_numpy(dtype=bool)
    assert np.array_equal(grouped, group_labels_within(values, 5, valid=linkable))


def test_phash_and_dhash_hex_columns_group_by_both() -> None:
    # The default method from a DataFrame of hex columns: both parsed, both must agree.
    from leakaudit.frames import hash_values_from_frame
    from leakaudit.grouping import link_labels

    frame = pd.DataFrame(
        {
            "path": ["a", "b", "c", "d"],
            "phash": ["0000000000000000", "0000000000000003", "00000000000000ff", None],
            "dhash": ["ffffffffffffffff", "fffffffffffffff0", "ffffffffffffffff", "0" * 16],
        }
    )
    phash, valid_p = hash_values_from_frame(frame, "phash")
    dhash, valid_d = hash_values_from_frame(frame, "dhash")
    assert valid_p.tolist() == [True, True, True, False] and valid_d.all()
    labels = link_labels(phash, valid_p & valid_d, 4, second=dhash, second_threshold=4)
    assert labels.tolist() == [0, 0, 1, 2]
    labels = link_labels(phash, valid_p & valid_d, 4, second=dhash, second_threshold=3)
    assert labels.tolist() == [0, 1, 2, 3]
