"""The same images get the same verdicts through every entry point (issue 25, point 6).

One folder dataset (ImageFolder layout) holds leaks that only the verified cascade
decides: a 10% crop, a JPEG re-encode, a half-size PNG, a byte copy, and an unrelated
image. It is audited as folders (``audit_splits``), by the CLI, as torchvision
``ImageFolder`` objects, and as Hugging Face ``DatasetDict``s whose cells hold paths or
only bytes; every route must link exactly the same images, having read every candidate
pair's pixels (none "decided by hashes alone").
"""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Any

import imagegen
import pytest

import leakaudit
from leakaudit.cli import main

SPLITS = ("train", "test")


def _build(root: Path) -> None:
    originals = [imagegen.photo_like(900 + i, (160, 120)) for i in range(6)]
    files: dict[str, Any] = {
        "train/cat/a.jpg": originals[0],
        "train/cat/b.jpg": originals[1],
        "train/dog/c.jpg": originals[2],
        "train/dog/d.jpg": originals[3],
        "train/dog/e.jpg": originals[4],
        "test/cat/a_crop.jpg": originals[0].crop((16, 12, 144, 108)),  # 10% off each side
        "test/cat/b_q40.jpg": (originals[1], {"quality": 40}),
        "test/dog/c_half.png": originals[2].resize((80, 60)),
        "test/dog/other.jpg": originals[5],
    }
    for relative, image in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(image, tuple):
            image[0].save(path, **image[1])
        else:
            image.save(path, quality=92) if path.suffix == ".jpg" else image.save(path)
    (root / "test/dog/d_copy.jpg").write_bytes((root / "train/dog/d.jpg").read_bytes())


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("entry-points")
    _build(folder)
    return folder


def _leaked_names(report: Any, names: list[str]) -> set[frozenset[str]]:
    """Each leaked group as the set of its members' ``split/class/file`` names."""
    table = report.table
    groups = set()
    for group_id in report.leaked_groups["group_id"]:
        rows = table.index[table["group_id"] == group_id]
        groups.add(frozenset(names[i] for i in rows))
    return groups


EXPECTED = {
    frozenset({"train/cat/a.jpg", "test/cat/a_crop.jpg"}),
    frozenset({"train/cat/b.jpg", "test/cat/b_q40.jpg"}),
    frozenset({"train/dog/c.jpg", "test/dog/c_half.png"}),
    frozenset({"train/dog/d.jpg", "test/dog/d_copy.jpg"}),
}


def _relative(root: Path, paths: Any) -> list[str]:
    return [Path(p).relative_to(root).as_posix() for p in paths]


def _all_verified(report: Any) -> None:
    verification = report.parameters["verification"]
    assert verification["unverifiable"] == 0, verification


def test_folders(root: Path) -> None:
    report = leakaudit.audit_splits({s: root / s for s in SPLITS}, cache=False, workers=1)
    assert _leaked_names(report, _relative(root, report.table["path"])) == EXPECTED
    _all_verified(report)


def test_cli(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    argv = ["scan", str(root), "--quiet", "--no-cache", "--workers", "1", "--json", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    data = json.loads(out.read_text())
    leaked = {group["group_id"] for group in data["leaked_groups"]}
    members: dict[int, set[str]] = {}
    for image in data["images"]:
        if image["group_id"] in leaked:
            members.setdefault(image["group_id"], set()).add(
                Path(image["path"]).relative_to(root).as_posix()
            )
    assert {frozenset(group) for group in members.values()} == EXPECTED
    assert data["parameters"]["verification"]["unverifiable"] == 0


def test_torchvision_image_folders(root: Path) -> None:
    datasets = pytest.importorskip("torchvision.datasets")
    from leakaudit.adapters.torchvision import audit_datasets

    folders = {s: datasets.ImageFolder(str(root / s)) for s in SPLITS}
    report = audit_datasets(folders, cache=False, workers=1)
    assert _leaked_names(report, _relative(root, report.table["path"])) == EXPECTED
    _all_verified(report)


@pytest.mark.parametrize("cells", ["paths", "bytes"])
def test_hugging_face_dataset_dicts(root: Path, cells: str) -> None:
    hf = pytest.importorskip("datasets")
    from leakaudit.adapters.huggingface import audit_dataset_dict

    names: list[str] = []
    parts = {}
    for split in SPLITS:
        files = sorted((root / split).rglob("*.*"))
        names += _relative(root, files)
        if cells == "paths":
            column = [{"path": str(f), "bytes": None} for f in files]
        else:  # as after a Hub export: the bytes, and no usable path
            column = [{"path": None, "bytes": f.read_bytes()} for f in files]
        parts[split] = hf.Dataset.from_dict(
            {"image": column}, features=hf.Features({"image": hf.Image()})
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        report = audit_dataset_dict(hf.DatasetDict(parts), cache=False)
    assert _leaked_names(report, names) == EXPECTED
    _all_verified(report)


def test_bytes_alone_through_the_core(root: Path) -> None:
    """Encoded bytes given to audit_sources are verified too (Ray's route)."""
    files = [f for s in SPLITS for f in sorted((root / s).rglob("*.*"))]
    data = [io.BytesIO(f.read_bytes()).getvalue() for f in files]
    splits = [f.relative_to(root).parts[0] for f in files]
    report = leakaudit.audit_sources(data, splits, cache=False, workers=1)
    assert _leaked_names(report, _relative(root, files)) == EXPECTED
    _all_verified(report)


def test_compare_says_why_a_pair_over_the_threshold_leaks(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25.7: a verified crop 18 bits apart is not printed as a bare '(distance 18)'."""
    argv = ["compare", str(root / "train"), str(root / "test"), "--quiet", "--no-cache"]
    assert main([*argv, "--workers", "1"]) == 0
    crop = next(line for line in capsys.readouterr().out.splitlines() if "a_crop.jpg" in line)
    assert "over the threshold 8: linked by verification, not by the hashes" in crop


def test_html_report_puts_the_groups_before_the_counts_and_parameters(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25.7: the verification counts and parameters sit at the end, collapsed."""
    out = tmp_path / "report.html"
    argv = ["scan", str(root), "--quiet", "--no-cache", "--workers", "1", "--html", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    page = out.read_text()
    leaked, details = page.index('id="leaked"'), page.index('id="details"')
    assert leaked < details < page.index('class="params verification"')
    # Issue 37.5: the groups come first (the first pair on the first screen); one line of the
    # verification's prose stays on top, under the verdict, its section after the groups.
    assert leaked < page.index('id="verification"')
    assert page.index('class="checked">The hashes proposed') < leaked
    tail = page[details:]
    assert "<details><summary>Verification counts and limits</summary>" in tail
    assert '<details id="parameters"><summary>Parameters</summary>' in tail
