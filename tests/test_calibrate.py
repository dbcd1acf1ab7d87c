"""Threshold calibration on the user's own images (``leakaudit calibrate``)."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from leakaudit.audit import audit_sources
from leakaudit.calibrate import (
    TRANSFORMS,
    CalibrationResult,
    bare_flags,
    calibrate_threshold,
    plant_copies,
)
from leakaudit.cli import main
from leakaudit.demo import photo_like_image
from leakaudit.hashing import UnreadableImageWarning
from leakaudit.policy import AUDIT_METHODS

N_PHOTOS = 30


def _write_photos(folder: Path, count: int, start: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for seed in range(start, start + count):
        photo_like_image(seed).save(folder / f"photo_{seed:03d}.jpg", quality=92)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 photos in split folders, plus a corrupt file, a blank one and a real duplicate."""
    root = tmp_path_factory.mktemp("calibrate")
    _write_photos(root / "train", 20)
    _write_photos(root / "test", 10, start=20)
    (root / "train" / "corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    Image.new("RGB", (160, 120), (3, 3, 3)).save(root / "test" / "blank.png")
    buffer = io.BytesIO()
    photo_like_image(0).save(buffer, "JPEG", quality=70)
    (root / "test" / "photo_000_again.jpg").write_bytes(buffer.getvalue())
    return root


@pytest.fixture(scope="module")
def result(dataset: Path) -> CalibrationResult:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = calibrate_threshold(dataset, sample_size=50, workers=1, progress=False)
    unreadable = [w for w in caught if issubclass(w.category, UnreadableImageWarning)]
    assert len(unreadable) == 1
    assert "corrupt.jpg" in str(unreadable[0].message)
    return outcome


def test_result_shape(result: CalibrationResult) -> None:
    n_sample = N_PHOTOS + 1  # the duplicate is a readable image too
    assert len(result.sample) == n_sample
    assert result.n_files == N_PHOTOS + 3
    assert result.n_blank == 1
    assert len(result.unreadable) == 1
    assert next(iter(result.unreadable)).endswith("corrupt.jpg")
    assert len(result.table) == len(AUDIT_METHODS) * 17
    assert {
        "method", "threshold", "precision", "recall", "recall_all", "false_pairs_per_million",
    } <= set(result.table.columns)  # fmt: skip
    assert len(result.per_transform) == len(AUDIT_METHODS) * 17 * len(TRANSFORMS)
    assert len(result.copy_distances) == n_sample * len(TRANSFORMS)
    unrelated = result.unrelated_distances
    assert list(unrelated["method"]) == list(AUDIT_METHODS)
    # The planted duplicate pair is recognised and kept out of the unrelated pairs.
    assert len(result.likely_duplicates) == 1
    assert {Path(p).name for p in result.likely_duplicates[0]} == {
        "photo_000.jpg",
        "photo_000_again.jpg",
    }
    assert (unrelated["pairs"] == n_sample * (n_sample - 1) // 2 - 1).all()
    assert (unrelated["min"] <= unrelated["p1"]).all()
    assert (unrelated["p1"] <= unrelated["median"]).all()


def test_recommendation_is_safe_and_catches_reencodes(result: CalibrationResult) -> None:
    assert set(result.recommended) == set(AUDIT_METHODS)
    per = result.per_transform
    for method, threshold in result.recommended.items():
        assert 0 <= threshold <= 64
        row = result.table[
            (result.table["method"] == method) & (result.table["threshold"] == threshold)
        ]
        assert int(row["false_pairs"].iloc[0]) == 0
        at = per[(per["method"] == method) & (per["threshold"] == threshold)].set_index("transform")
        for name in ("jpeg_q90", "jpeg_q70", "jpeg_q40", "png"):
            assert at.loc[name, "recall"] == 1.0, (method, name)
        assert f"{method}: {bare_flags(method, threshold)}." in result.explanation


def test_flips_are_caught_by_the_default_audit_and_the_bare_threshold(
    result: CalibrationResult,
) -> None:
    # The default audit matches mirror images (dihedral), and so does the bare threshold
    # measured in the same canonical orientations: flips are expected, and found.
    audit = result.audit_per_transform.set_index("transform")
    assert audit.loc["hflip", "recall"] == 1.0
    assert audit.loc["hflip", "copies"] == len(result.sample)
    copies = result.copy_distances
    assert copies.loc[copies["transform"] == "hflip", "expected"].all()
    for row in result.table.itertuples(index=False):
        distance = copies[row.method] <= row.threshold
        assert row.recall == pytest.approx(distance.mean()) == row.recall_all
    per = result.per_transform
    flips = per[
        (per["method"] == "phash+dhash")
        & (per["threshold"] == result.recommended["phash+dhash"])
        & (per["transform"] == "hflip")
    ]
    assert float(flips["recall"].iloc[0]) == 1.0
    text = result.to_text()
    assert "expected miss" not in text
    hflip_line = next(line for line in text.splitlines() if line.startswith("hflip "))
    assert hflip_line.split()[1] == "100.0%"  # the default audit's column


def test_recommendation_is_what_the_default_audit_does(
    result: CalibrationResult, dataset: Path
) -> None:
    # The headline recommendation is an option set the audit takes (here: the defaults),
    # and auditing the same sample and copies with it gives the recall calibrate reported.
    assert result.audit_options == {} and result.audit_command == ""
    assert "keep the defaults" in result.headline
    assert result.audit_false_links == []
    assert result.audit_recall >= 0.95
    planted = plant_copies(result.sample)
    assert len(planted) == len(result.sample) * len(TRANSFORMS)
    n = len(result.sample)
    audit = result.audit_per_transform.set_index("transform")
    # calibrate audits the sample with each transformation's copies in turn; two of them:
    for name in ("crop_2-5%", "hflip"):
        mine = [(original, data) for original, kind, data in planted if kind == name]
        sources = [*result.sample, *(data for _, data in mine)]
        splits = ["sample"] * n + ["copies"] * len(mine)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = audit_sources(
                sources, splits, **result.audit_options, workers=1, progress=False, cache=False
            )
        assert report.table is not None
        group = report.table["group_id"].to_numpy()
        found = sum(group[n + k] == group[original] for k, (original, _) in enumerate(mine))
        assert found == audit.loc[name, "found"], name
        assert found / len(mine) == audit.loc[name, "recall"]
    assert audit["found"].sum() / audit["copies"].sum() == result.audit_recall
    # The bare recommendation is an option set the audit takes too; it groups at least
    # the copies the bare table counts (groups also join copies through one another).
    bare = result.bare_options()
    assert bare == {"method": "phash+dhash", "threshold": result.recommended["phash+dhash"],
                    "verify": False}  # fmt: skip
    sources = [*result.sample, *(data for _, _, data in planted)]
    splits = ["sample"] * n + ["copies"] * len(planted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = audit_sources(sources, splits, **bare, workers=1, progress=False, cache=False)
    assert plain.table is not None
    grouped = plain.table["group_id"].to_numpy()
    origin = [original for original, _, _ in planted]
    bare_recall = (grouped[n:] == grouped[origin]).mean()
    row = result.table[
        (result.table["method"] == "phash+dhash")
        & (result.table["threshold"] == result.recommended["phash+dhash"])
    ]
    assert bare_recall >= float(row["recall"].iloc[0])


def test_phash_distances_are_even_and_text_shows_even_thresholds(
    result: CalibrationResult,
) -> None:
    assert (result.copy_distances["phash"] % 2 == 0).all()
    text = result.to_text()
    phash_block = text.split("\nphash, bare threshold\n")[1].split("\n\n")[0]
    thresholds = [int(line.split()[0]) for line in phash_block.splitlines()[1:]]
    assert thresholds == list(range(0, 17, 2))
    assert "Recommendation:" in text and "Default audit (" in text
    assert "--no-verify --threshold" in text


def test_bad_arguments_and_too_few_images(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        calibrate_threshold(tmp_path / "missing")
    with pytest.raises(ValueError, match="sample_size must be an int >= 10"):
        calibrate_threshold(tmp_path, sample_size=5)
    with pytest.raises(ValueError, match="methods must be one of"):
        calibrate_threshold(tmp_path, methods=["md5"])
    with pytest.raises(TypeError, match="paths_or_folder"):
        calibrate_threshold(42)  # type: ignore[arg-type]
    _write_photos(tmp_path, 4)
    Image.new("L", (64, 64), 0).save(tmp_path / "blank.png")
    with pytest.raises(ValueError, match=r"at least 10 readable.*found 4 .* 1 blank"):
        calibrate_threshold(tmp_path, workers=1)


def test_cli(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "calibration.csv"
    code = main(
        ["calibrate", str(dataset), "--sample", "12", "--seed", "3", "--workers", "1",
         "--quiet", "--csv", str(out)]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0
    assert "Threshold calibration on 12 of" in captured.out
    assert "phash+dhash" in captured.out and "Recommendation:" in captured.out
    assert out.exists() and (tmp_path / "calibration.per_transform.csv").exists()
    assert (tmp_path / "calibration.unrelated.csv").exists()
    audit = pd.read_csv(tmp_path / "calibration.audit.csv")
    assert list(audit.columns) == ["transform", "copies", "found", "recall"]
    assert list(audit["transform"]) == [t.name for t in TRANSFORMS]

    assert main(["calibrate", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "folder not found" in err

    assert main(["calibrate", str(dataset), "--sample", "3"]) == 2
    assert "--sample must be at least 10" in capsys.readouterr().err

    few = tmp_path / "few"
    _write_photos(few, 3)
    assert main(["calibrate", str(few), "--workers", "1", "--quiet"]) == 2
    assert "at least 10 readable" in capsys.readouterr().err
