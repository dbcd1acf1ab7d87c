"""Issue 37.2: how much the leak inflates the score (leakaudit.impact, `leakaudit impact`)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from leakaudit.cli import main
from leakaudit.demo import build_demo_dataset
from leakaudit.htmlreport import render_html
from leakaudit.impact import score_impact
from leakaudit.report import dhash_audit

# Ten test images (three leaked) and one train image; the predictions below, by hand:
#   all:    6 of 10 right = 60%
#   leaked: 3 of 3        = 100%
#   clean:  3 of 7        = 42.857%
#   all - clean = 60 - 42.857 = +17.143 points; leaked - clean = +57.143 points
#   class a (images 0, 1, 4, 5, 8): all 3/5 = 60%, leaked 2/2, clean 1/3 = 33.3%, +26.67
#   class b (images 2, 3, 6, 7, 9): all 3/5 = 60%, leaked 1/1, clean 2/4 = 50%, +10.00
_CLASSES = "aabbaabbab"
_CORRECT = [1, 1, 1, 1, 0, 1, 0, 1, 0, 0]


def _images() -> pd.DataFrame:
    paths = [f"data/test/{c}/{i}.png" for i, c in enumerate(_CLASSES)]
    return pd.DataFrame(
        {
            "path": [*paths, "data/train/a/x.png"],
            "split": ["test"] * 10 + ["train"],
            "leaked": [True, True, True] + [False] * 7 + [True],
        }
    )


def _predictions() -> pd.DataFrame:
    return pd.DataFrame(
        {"path": [f"test/{c}/{i}.png" for i, c in enumerate(_CLASSES)], "correct": _CORRECT}
    )


def test_accuracies_match_the_hand_computation() -> None:
    impact = score_impact(_images(), _predictions())
    overall = impact.overall
    assert overall["images"].tolist() == [10, 3, 7]
    assert overall["correct"].tolist() == [6, 3, 3]
    assert overall["accuracy"].tolist() == pytest.approx([0.6, 1.0, 3 / 7])
    assert impact.inflation == pytest.approx(0.6 - 3 / 7)
    assert impact.differences.loc["leaked - clean", "estimate"] == pytest.approx(1 - 3 / 7)
    classes = impact.by_class.set_index("class")
    assert classes["images"].to_dict() == {"a": 5, "b": 5}
    assert classes["leaked"].to_dict() == {"a": 2, "b": 1}
    assert classes["all"].tolist() == pytest.approx([0.6, 0.6])
    assert classes["clean"].tolist() == pytest.approx([1 / 3, 0.5])
    assert classes["inflation"].tolist() == pytest.approx([0.6 - 1 / 3, 0.1])
    assert impact.n_without_prediction == 0
    text = impact.to_text()
    assert "60.00% on all 10 images, 42.86% on the 7 clean ones" in text
    assert "+17.14 pts" in text


def test_intervals_hold_the_estimate_and_repeat_under_the_seed() -> None:
    first = score_impact(_images(), _predictions(), seed=7)
    again = score_impact(_images(), _predictions(), seed=7)
    other = score_impact(_images(), _predictions(), seed=8)
    frame = first.to_frame()
    pd.testing.assert_frame_equal(frame, again.to_frame())
    # Ten images allow few distinct resamples (both seeds may meet the same percentiles).
    pd.testing.assert_frame_equal(frame.drop(columns=["low", "high"]),
                                  other.to_frame().drop(columns=["low", "high"]))  # fmt: skip
    big = pd.DataFrame({"split": "test", "leaked": np.arange(500) % 5 == 0})
    right = pd.DataFrame({"correct": np.arange(500) % 3 != 0})
    lows = {
        seed: score_impact(big, right, seed=seed, n_boot=200).to_frame()["low"] for seed in (7, 8)
    }
    assert not lows[7].equals(lows[8])
    assert (frame["low"] <= frame["estimate"] + 1e-12).all()
    assert (frame["estimate"] <= frame["high"] + 1e-12).all()
    # Every leaked image is right: no resample can change that part's accuracy.
    assert first.overall.loc["leaked", ["low", "high"]].tolist() == [1.0, 1.0]


def test_interval_width_matches_the_binomial_standard_error() -> None:
    """1,000 clean images, 900 right: the 95% interval is about 90% +- 1.96 * 0.95 points."""
    n = 1000
    images = pd.DataFrame({"split": "test", "leaked": [False] * n})
    predictions = pd.DataFrame({"correct": [True] * 900 + [False] * 100})
    impact = score_impact(images, predictions, n_boot=4000)
    low, high = impact.overall.loc["clean", ["low", "high"]]
    half = 1.96 * math.sqrt(0.9 * 0.1 / n)
    assert low == pytest.approx(0.9 - half, abs=0.003)
    assert high == pytest.approx(0.9 + half, abs=0.003)
    assert math.isnan(impact.overall.loc["leaked", "accuracy"])  # no leaked image
    assert impact.inflation == 0.0


def test_keys_index_order_and_labels() -> None:
    images = _images()
    by_index = pd.DataFrame({"index": list(range(10))[::-1], "correct": _CORRECT[::-1]})
    in_order = pd.DataFrame({"correct": _CORRECT})
    labels = pd.DataFrame(
        {
            "path": [f"data/test/{c}/{i}.png" for i, c in enumerate(_CLASSES)],
            "label": ["3", "3", "5", "5", "3", "3", "5", "5", "3", "5"],
            # Read from a CSV as text: "3.0" is the number 3.
            "prediction": ["3.0", "3", "5", "5", "5", "3", "3", "5", "5", "3"],
        }
    )
    expected = score_impact(images, _predictions()).to_frame()
    for predictions in (by_index, in_order):
        found = score_impact(images, predictions).to_frame()
        pd.testing.assert_frame_equal(found[found["class"] == "all"], expected.iloc[:5])
    with_labels = score_impact(images, labels)
    assert with_labels.overall["correct"].tolist() == [6, 3, 3]
    assert with_labels.by_class["class"].tolist() == ["3", "5"]


@pytest.mark.parametrize(
    ("predictions", "message"),
    [
        (pd.DataFrame({"path": ["test/a/0.png"], "score": [1]}), "found columns: 'path', 'score'"),
        (pd.DataFrame({"path": ["test/a/99.png"], "correct": [1]}), "not images of split 'test'"),
        (pd.DataFrame({"path": ["train/a/x.png"], "correct": [1]}), "in split(s) train"),
        (pd.DataFrame({"correct": [1, 0]}), "have 2 rows and no 'path' or 'index' column"),
        (pd.DataFrame({"index": [0, 0], "correct": [1, 0]}), "more than one prediction"),
        (pd.DataFrame({"index": [0, 10], "correct": [1, 0]}), "'index' must be an image's"),
        (pd.DataFrame({"path": ["b/0.png"], "correct": [1]}), "not images of split"),
        (pd.DataFrame({"index": [0], "correct": ["maybe"]}), "row 1 ('maybe')"),
        (pd.DataFrame({"index": [0], "label": [1], "prediction": [None]}), "is missing"),
    ],
)
def test_bad_predictions_are_named(predictions: pd.DataFrame, message: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        score_impact(_images(), predictions)
    assert message in str(caught.value)


def test_a_missing_split_and_an_ambiguous_path_are_named() -> None:
    with pytest.raises(ValueError, match="split 'val' is not in the report; its splits are"):
        score_impact(_images(), _predictions(), split="val")
    images = pd.DataFrame(
        {"path": ["x/test/a/1.png", "y/test/a/1.png"], "split": "test", "leaked": [True, False]}
    )
    with pytest.raises(ValueError, match="name more than one image"):
        score_impact(images, pd.DataFrame({"path": ["test/a/1.png"], "correct": [1]}))
    found = score_impact(images, pd.DataFrame({"path": ["y/test/a/1.png"], "correct": [1]}))
    assert found.overall.loc["clean", "images"] == 1
    assert found.n_without_prediction == 1


def test_report_method_and_html_section() -> None:
    table = pd.DataFrame(
        {
            "path": ["tr/a.png", "te/a.png", "te/b.png", "te/c.png"],
            "split": ["train", "test", "test", "test"],
            "hash": [
                "0f0f0f0f0f0f0f0f",
                "0f0f0f0f0f0f0f0f",
                "ffff0000ffff0000",
                "1234567812345678",
            ],
            "group_id": [0, 0, 1, 2],
        }
    )
    report = dhash_audit(table)
    predictions = pd.DataFrame({"path": ["te/a.png", "te/b.png", "te/c.png"], "correct": [1, 1, 0]})
    impact = report.score_impact(predictions)
    assert impact.overall["accuracy"].tolist() == pytest.approx([2 / 3, 1.0, 0.5])
    page = render_html(report, impact=impact)
    assert page.count('<section id="impact">') == 1
    assert page.index('id="impact"') > page.index('id="summary"')
    assert "66.67%" in page and "+16.67" in page
    assert 'id="impact"' not in render_html(report)


def _demo_predictions(root: Path, out: Path) -> Path:
    """The 1-NN classifier of examples/leak_impact.py on the demo's folders."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    try:
        import leak_impact
    finally:
        sys.path.pop(0)
    with pytest.warns(UserWarning, match="corrupt.jpg"):
        assert leak_impact.main([str(root), str(out)]) == 0
    return out


def test_impact_command_on_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    build_demo_dataset("data")
    assert main(["scan", "data", "--quiet", "--workers", "1", "--json", "report.json",
                 "--csv", "table.csv"]) == 0  # fmt: skip
    predictions = _demo_predictions(Path("data"), tmp_path / "predictions.csv")
    capsys.readouterr()
    outputs = ["--json", "impact.json", "--csv", "impact.csv", "--html", "impact.html"]
    assert main(["impact", "report.json", str(predictions), *outputs]) == 0
    printed = capsys.readouterr().out

    # By hand, from the report's own images table and the predictions file.
    images = pd.DataFrame(json.loads(Path("report.json").read_text())["images"])
    test = images[images["split"] == "test"].set_index("path")
    rows = pd.read_csv(predictions)
    rows["leaked"] = test.loc[rows["path"], "leaked"].to_numpy()
    rows["correct"] = rows["label"] == rows["prediction"]
    leaked, clean = rows[rows["leaked"]], rows[~rows["leaked"]]
    assert len(leaked) == 3  # the demo's three test copies of train images
    figures = json.loads(Path("impact.json").read_text())
    overall = {row["part"]: row for row in figures["overall"]}
    assert overall["all"]["accuracy"] == pytest.approx(rows["correct"].mean())
    assert overall["leaked"]["accuracy"] == pytest.approx(leaked["correct"].mean())
    assert overall["clean"]["accuracy"] == pytest.approx(clean["correct"].mean())
    assert figures["n_without_prediction"] == 1  # the truncated JPEG the classifier skipped
    assert f"{100 * rows['correct'].mean():.2f}% on all {len(rows)} images" in printed
    long = pd.read_csv("impact.csv")
    assert set(long["class"]) == {"all", "cat", "dog"}
    assert 'id="impact"' in Path("impact.html").read_text()

    # The --csv images table gives the same figures; a pairs table is refused by name.
    capsys.readouterr()
    assert main(["impact", "table.csv", str(predictions), "--json", "from-csv.json"]) == 0
    assert json.loads(Path("from-csv.json").read_text())["overall"] == figures["overall"]
    assert main(["impact", "table.pairs.csv", str(predictions)]) == 2
    assert "this is the pairs table" in capsys.readouterr().err
    assert main(["impact", "report.json", str(predictions), "--json", "report.json"]) == 2
    assert "would overwrite an input file" in capsys.readouterr().err


def test_scan_predictions_adds_the_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    build_demo_dataset("data")
    Path("bad.csv").write_text("path,score\ndata/test/cat/test_000.jpg,1\n")
    # Refused before the audit: the columns, then the split.
    assert main(["scan", "data", "--quiet", "--predictions", "bad.csv"]) == 2
    assert "found columns: 'path', 'score'" in capsys.readouterr().err
    predictions = _demo_predictions(Path("data"), tmp_path / "predictions.csv")
    assert main(["scan", "data", "--quiet", "--predictions", str(predictions),
                 "--predictions-split", "tset"]) == 2  # fmt: skip
    assert "--predictions-split 'tset' is not a split here" in capsys.readouterr().err
    assert main(["scan", "data", "--quiet", "--workers", "1", "--html", "page.html",
                 "--predictions", str(predictions)]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "LEAKAGE" in printed and "Accuracy on test:" in printed
    page = Path("page.html").read_text()
    assert page.count('<section id="impact">') == 1
    assert np.isfinite(score_impact(_images(), _predictions()).inflation)


def test_files_are_read_or_refused_by_name(tmp_path: Path) -> None:
    from leakaudit._impact_io import read_predictions, read_report_images

    (tmp_path / "p.txt").write_text("path,correct\n")
    with pytest.raises(ValueError, match=r"must be a \.csv or \.parquet file"):
        read_predictions(tmp_path / "p.txt")
    csv_file = tmp_path / "p.csv"
    csv_file.write_text("path,label,prediction\ntest/007.png,007,7\n")
    read = read_predictions(csv_file)
    assert read["label"].tolist() == ["007"]  # a class name stays text
    images = pd.DataFrame({"path": ["d/test/007.png"], "split": "test", "leaked": [False]})
    assert score_impact(images, read).overall.loc["all", "correct"] == 1  # 007 == 7
    pytest.importorskip("pyarrow")
    read.to_parquet(tmp_path / "p.parquet")
    parquet = read_predictions(tmp_path / "p.parquet")
    assert parquet.astype(str).to_dict("list") == read.astype(str).to_dict("list")
    page = tmp_path / "report.html"
    page.write_text("<html></html>")
    with pytest.raises(ValueError, match="an HTML report cannot be read back"):
        read_report_images(page)
    other = tmp_path / "other.json"
    other.write_text('{"format": "something-else"}')
    with pytest.raises(ValueError, match="is not a leakaudit report"):
        read_report_images(other)


def test_index_is_the_torchvision_dataset_index(tmp_path: Path) -> None:
    """A DataLoader's outputs (shuffle=False) are in the dataset's order: `index` keys them."""
    pytest.importorskip("torchvision")
    from torchvision.datasets import ImageFolder

    from leakaudit.adapters.torchvision import audit_datasets

    build_demo_dataset(tmp_path)
    splits = {name: ImageFolder(str(tmp_path / name)) for name in ("train", "val", "test")}
    with pytest.warns(UserWarning):  # the demo's truncated JPEG
        report = audit_datasets(splits, progress=False, workers=1)
    samples = splits["test"].samples
    # A "model" right on the dataset's even positions.
    by_index = pd.DataFrame(
        {"index": range(len(samples)), "correct": [i % 2 == 0 for i in range(len(samples))]}
    )
    by_path = pd.DataFrame({"path": [p for p, _ in samples], "correct": by_index["correct"]})
    found = report.score_impact(by_index).to_frame()
    pd.testing.assert_frame_equal(found, report.score_impact(by_path).to_frame())
    leaked = report.score_impact(by_path).images
    assert leaked["leaked"].sum() == 3
