"""with_extra_links: pairs judged outside the audit join its groups, counts and evidence."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from imagegen import photo_like

import leakaudit
from leakaudit.extra_links import with_extra_links
from leakaudit.report import dhash_audit


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "path": ["a", "b", "c", "d", "e"],
            "split": ["train", "train", "test", "test", "val"],
            "group_id": [0, 0, 1, 2, 3],
        }
    )


def test_links_join_groups_transitively_and_every_count_follows() -> None:
    report = dhash_audit(_frame())
    assert report.n_leaked_images == 0
    pairs = pd.DataFrame({"row_a": [0, 3], "row_b": [2, 4]})
    linked = with_extra_links(report, pairs, evidence="reviewed")
    group = linked.table["group_id"].tolist()
    assert group[0] == group[1] == group[2]  # b joins through a's hash group
    assert group[3] == group[4] != group[0]
    assert linked.n_leaked_images == 5
    assert linked.n_leaked_groups == 2
    assert linked.leaked_images_by_split().to_dict() == {"train": 2, "test": 2, "val": 1}
    assert linked.parameters["extra_links"] == {"reviewed": 2}
    # The report given is not changed.
    assert report.n_leaked_images == 0
    assert report.table["group_id"].tolist() == [0, 0, 1, 2, 3]


def test_clean_splits_sees_the_links() -> None:
    linked = with_extra_links(
        dhash_audit(_frame()), pd.DataFrame({"row_a": [0], "row_b": [3]}), evidence="reviewed"
    )
    clean = leakaudit.clean_splits(linked.table)
    assert clean.loc[3, "split"] == "train"  # d moved to train with its copy a
    assert clean.loc[2, "split"] == "test"


def test_no_pairs_change_nothing_but_the_record() -> None:
    report = dhash_audit(_frame())
    linked = with_extra_links(report, pd.DataFrame({"row_a": [], "row_b": []}), evidence="x")
    assert linked.table["group_id"].tolist() == report.table["group_id"].tolist()
    assert linked.n_leaked_images == report.n_leaked_images
    assert linked.parameters["extra_links"] == {"x": 0}


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (pd.DataFrame({"row_a": [0]}), "row_b"),
        (pd.DataFrame({"row_a": [0], "row_b": [5]}), "positions"),
        (pd.DataFrame({"row_a": [-1], "row_b": [2]}), "positions"),
        (pd.DataFrame({"row_a": [1], "row_b": [1]}), "two different rows"),
        (pd.DataFrame({"row_a": [0], "row_b": [2], "similarity": [1.5]}), "similarity"),
        (pd.DataFrame({"row_a": [0], "row_b": [2], "strength": [np.nan]}), "strength"),
    ],
)
def test_bad_pairs_are_refused(pairs: pd.DataFrame, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        with_extra_links(dhash_audit(_frame()), pairs, evidence="reviewed")


@pytest.mark.parametrize("evidence", ["", "transitive", None])
def test_evidence_must_name_the_judge(evidence: object) -> None:
    pairs = pd.DataFrame({"row_a": [0], "row_b": [2]})
    with pytest.raises(ValueError, match="evidence"):
        with_extra_links(dhash_audit(_frame()), pairs, evidence=evidence)  # type: ignore[arg-type]


def test_a_non_frame_is_refused() -> None:
    with pytest.raises(TypeError, match="DataFrame"):
        with_extra_links(dhash_audit(_frame()), [(0, 2)], evidence="x")  # type: ignore[arg-type]


def test_an_audits_report_gets_the_evidence_and_its_stage(tmp_path: Path) -> None:
    for split, seeds in (("train", (1, 2)), ("test", (3, 4))):
        (tmp_path / split).mkdir()
        for seed in seeds:
            photo_like(seed, (96, 96)).save(tmp_path / split / f"{seed}.png")
    report = leakaudit.audit_splits(
        {"train": tmp_path / "train", "test": tmp_path / "test"}, cache=False, workers=1
    )
    assert report.n_leaked_images == 0 and report.edges is not None
    names = report.table["path"].map(lambda p: Path(p).name).tolist()
    pairs = pd.DataFrame(
        {"row_a": [names.index("1.png")], "row_b": [names.index("3.png")], "similarity": [0.8]}
    )
    linked = with_extra_links(report, pairs, evidence="sscd")
    assert linked.n_leaked_images == 2
    assert linked.leaked_groups["evidence"].tolist() == ["sscd"]
    assert linked.leaked_groups["evidence_strength"].tolist() == [pytest.approx(0.4)]
    edge = linked.edges[linked.edges["stage"] == "sscd"]
    assert len(edge) == 1 and edge["similarity"].iloc[0] == pytest.approx(0.8)
    assert list(linked.parameters["stages"])[-1] == "sscd"
    # The text, the JSON and the pairs' reading of it take the new evidence.
    assert "sscd" in linked.to_text()
    again = leakaudit.LeakageReport.from_json(linked.to_json())
    assert again.n_leaked_images == 2
    assert json.loads(linked.to_json())["parameters"]["extra_links"] == {"sscd": 1}
