"""Issue 25 point 7: reports say in words what kind of copy a pair is."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from imagegen import encode, photo_like
from PIL import Image, ImageOps

import leakaudit
from leakaudit.cli import main
from leakaudit.copykind import copy_kind
from leakaudit.export import PAIR_KIND_COLUMN, pair_table, write_csv_tables
from leakaudit.htmlreport import render_html
from leakaudit.report import LeakageReport

SIZE = (160, 120)


def _tinted(image: Image.Image) -> Image.Image:
    """A warm colour cast (red up, blue down): the structure kept, the colours moved."""
    pixels = np.asarray(image, dtype=np.float64) * np.array([1.15, 0.95, 0.6])
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


#: name -> (the copy's bytes from the original, a word its phrase must hold).
EDITS = {
    "identical": (lambda im: encode(im, "PNG"), "identical"),
    "jpeg": (lambda im: encode(im, "JPEG", quality=75), "re-encoded"),
    "resized": (lambda im: encode(im.resize((80, 60), Image.Resampling.LANCZOS), "PNG"), "resized"),
    "mirrored": (lambda im: encode(ImageOps.mirror(im), "PNG"), "mirrored"),
    "rot90": (lambda im: encode(im.rotate(90, expand=True), "PNG"), "rotated 90"),
    "cropped": (lambda im: encode(im.crop((0, 0, 136, 102)), "PNG"), "cropped"),
    "grey": (lambda im: encode(im.convert("L").convert("RGB"), "PNG"), "recoloured"),
    "tinted": (lambda im: encode(_tinted(im), "PNG"), "recoloured"),
    "resized_mirrored": (
        lambda im: encode(ImageOps.mirror(im.resize((80, 60), Image.Resampling.LANCZOS)), "PNG"),
        "resized, mirrored",
    ),
}


def _tree(root: Path) -> dict[str, Path]:
    """train/NAME.png originals, test/NAME.(png|jpg) their copies, one seed per edit."""
    splits = {"train": root / "train", "test": root / "test"}
    for folder in splits.values():
        folder.mkdir(parents=True)
    for seed, (name, (make, _)) in enumerate(EDITS.items(), 1):
        original = photo_like(seed, SIZE)
        (splits["train"] / f"{name}.png").write_bytes(encode(original, "PNG"))
        suffix = ".jpg" if name == "jpeg" else ".png"
        (splits["test"] / f"{name}{suffix}").write_bytes(make(original))
    return splits


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _tree(tmp_path_factory.mktemp("copykind"))


@pytest.fixture(scope="module")
def report(tree: dict[str, Path]) -> LeakageReport:
    return leakaudit.audit_splits(tree, cache=False, workers=1, progress=False)


def _kinds(report: LeakageReport) -> dict[str, str]:
    pairs = pair_table(report)
    return {
        Path(a).stem: kind
        for a, b, kind in zip(
            pairs["path_a"], pairs["path_b"], pairs[PAIR_KIND_COLUMN], strict=True
        )
        if Path(a).stem == Path(b).stem
    }


def test_each_generated_copy_is_worded(report: LeakageReport) -> None:
    kinds = _kinds(report)
    assert set(kinds) == set(EDITS), kinds
    for name, (_, word) in EDITS.items():
        assert word in kinds[name], (name, kinds[name])
    assert kinds["identical"] == "identical"
    assert kinds["jpeg"] == "re-encoded"
    assert kinds["grey"] == "recoloured (grey)"
    # A plain copy is not called resized, mirrored or recoloured.
    for name in ("identical", "jpeg", "mirrored", "rot90"):
        assert "resized" not in kinds[name] and "recoloured" not in kinds[name], kinds[name]
    assert "mirrored" not in kinds["rot90"] and "rotated" not in kinds["mirrored"]


def test_verified_edges_carry_the_phrase(report: LeakageReport) -> None:
    assert report.edges is not None
    worded = report.edges["copy_kind"].dropna()
    assert len(worded) and all(isinstance(kind, str) and kind for kind in worded)


def test_html_report_words_the_pairs(report: LeakageReport) -> None:
    page = render_html(report)
    assert '<b class="kind">resized, mirrored</b>' in page
    assert '<b class="kind">recoloured (grey)</b>' in page
    assert '<b class="kind">rotated 90</b>' in page
    # The nested distance notes are gone from the pair lines.
    assert "Distance <b>" not in page and "(pHash" not in page.split('class="pair"')[1][:300]


def test_pairs_csv_has_the_column_last(report: LeakageReport, tmp_path: Path) -> None:
    written = write_csv_tables(report, tmp_path / "t.csv")
    with open(written[1], newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        records = list(reader)
    assert reader.fieldnames is not None and reader.fieldnames[-1] == "copy_kind"
    assert {r["copy_kind"] for r in records} >= {"identical", "re-encoded", "resized"}


def test_compare_prints_the_phrase(
    tree: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", str(tree["train"]), str(tree["test"]), "--quiet", "--no-cache"]
    assert main([*argv, "--workers", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("LEAK")]
    by_name = {Path(line.split()[1]).stem: line for line in lines}
    assert "  resized, mirrored (distance " in by_name["resized_mirrored"]
    assert "  identical (distance 0)" in by_name["identical"]
    assert "  re-encoded (distance " in by_name["jpeg"]


def test_pairs_decided_by_hashes_alone_say_what_the_hashes_show(
    tree: dict[str, Path],
) -> None:
    report = leakaudit.audit_splits(tree, cache=False, workers=1, progress=False, verify=False)
    kinds = _kinds(report)
    assert kinds["identical"] == "identical"
    assert kinds["jpeg"] in ("identical hashes", "near-identical hashes")
    assert kinds["mirrored"] == "mirrored or rotated (hashes)"
    assert all("hashes" in kinds[n] for n in kinds if n != "identical"), kinds


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"stage": "bytes"}, "identical"),
        ({"stage": "hash", "distance": 0}, "identical hashes"),
        ({"stage": "hash", "distance": 5}, "near-identical hashes"),
        ({"stage": "dihedral hash", "distance": 2}, "mirrored or rotated (hashes)"),
        ({"stage": "transitive"}, "joined through other images"),
        ({"stage": "embedding"}, "similar content (embedding)"),
        ({"stage": "pixels"}, "verified copy (pixels)"),
        ({"stage": "pixels", "aligned": "whole", "turn": 6}, "rotated 180"),
        (
            {
                "stage": "pixels",
                "aligned": "whole",
                "turn": 5,
                "size_a": (40, 30),
                "size_b": (30, 40),
            },
            "rotated 90",
        ),
        ({"stage": "pixels", "aligned": "rotation"}, "cropped or rotated slightly"),
        ({"stage": "pixels", "aligned": "content"}, "padded"),
        ({"stage": "pixels", "aligned": "whole", "padded": True}, "padded"),
        ({"stage": "pixels", "aligned": "whole", "distance": 9}, "edited"),
        ({"stage": "pixels", "aligned": "crop", "recoloured": True}, "cropped, recoloured"),
        (
            {"stage": "geometry", "aligned": "whole", "turn": 2},
            "mirrored, cropped or rotated (features)",
        ),
    ],
)
def test_copy_kind_vocabulary(arguments: dict[str, object], expected: str) -> None:
    stage = arguments.pop("stage")
    assert copy_kind(stage, **arguments) == expected  # type: ignore[arg-type]
