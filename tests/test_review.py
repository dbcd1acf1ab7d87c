"""Issue 37 point 1: review decisions. A person marks pairs "copy" / "not a copy" in the HTML
report, saves them, and the next audit honours them (keyed by the digest of the bytes, so
renames and moves keep them; a decision whose image changed is reported, not applied)."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import imagegen
import numpy as np
import pytest
from PIL import Image

from leakaudit import audit_splits
from leakaudit._review import near_misses, review_pairs, script_hash
from leakaudit.cli import main
from leakaudit.decisions import (
    Decision,
    DecisionsFileError,
    ReviewDecisions,
    StaleDecisionWarning,
    load_decisions,
)
from leakaudit.htmlreport import render_html
from leakaudit.report import LeakageReport

HEADER = "decision,digest_a,digest_b,path_a,path_b\n"


def build_tree(root: Path) -> dict[str, Path]:
    """train/test: one planted leak (t0 ~ test/leak.jpg, a re-encode) and one near-miss the
    judge rejects by design (icon.png ~ test/recoloured.png, the icon with red and blue
    swapped in its upper half only: hashes close, and no global colour map explains a part
    recoloured)."""
    splits = {name: root / name for name in ("train", "test")}
    for folder in splits.values():
        folder.mkdir(parents=True)
    for seed in range(6):
        imagegen.photo_like(seed, (64, 48)).save(splits["train"] / f"t{seed}.png")
    imagegen.photo_like(0, (64, 48)).save(splits["test"] / "leak.jpg", quality=90)
    icon = imagegen.icon(5, 6)
    icon.save(splits["train"] / "icon.png")
    swapped = np.asarray(icon).copy()
    half = swapped.shape[0] // 2
    swapped[:half, :, :3] = swapped[:half, :, [2, 1, 0]]
    Image.fromarray(swapped).save(splits["test"] / "recoloured.png")
    imagegen.photo_like(7, (64, 48)).save(splits["test"] / "s7.png")
    return splits


def audit(splits: dict[str, Path], **options: object) -> LeakageReport:
    return audit_splits(splits, workers=1, cache=False, **options)  # type: ignore[arg-type]


def members(report: LeakageReport) -> list[set[str]]:
    """The leaked groups as sets of file names."""
    assert report.table is not None
    table = report.table
    leaked = report.leaked_groups["group_id"].tolist()
    return [{Path(p).name for p in table.loc[table["group_id"] == g, "path"]} for g in leaked]


def digest_of(report: LeakageReport, name: str) -> str:
    from leakaudit._review import content_digests

    assert report.table is not None
    names = [Path(p).name for p in report.table["path"]]
    digests = content_digests(report, range(len(names)))
    found = digests[names.index(name)]
    assert found is not None
    return found


@pytest.fixture()
def tree(tmp_path: Path) -> dict[str, Path]:
    return build_tree(tmp_path / "data")


@pytest.fixture()
def before(tree: dict[str, Path]) -> LeakageReport:
    return audit(tree)


def test_the_tree_has_a_leak_and_a_near_miss(before: LeakageReport) -> None:
    assert members(before) == [{"t0.png", "leak.jpg"}]
    assert before.table is not None
    names = [Path(p).name for p in before.table["path"]]
    leaked = review_pairs(before)
    assert [{names[p.row_a], names[p.row_b]} for p in leaked] == [{"t0.png", "leak.jpg"}]
    assert leaked[0].linked and "pixels" in leaked[0].why
    missed = near_misses(before)
    assert [{names[p.row_a], names[p.row_b]} for p in missed] == [{"icon.png", "recoloured.png"}]
    assert missed[0].why.startswith("the judge rejected it: ")


def write_decisions(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    path.write_text(HEADER + "".join(f"{d},{a},{b},x,y\n" for d, a, b in rows))
    return path


def test_not_a_copy_splits_and_copy_joins(
    tree: dict[str, Path], before: LeakageReport, tmp_path: Path
) -> None:
    file = write_decisions(
        tmp_path / "decisions.csv",
        [
            ("not a copy", digest_of(before, "t0.png"), digest_of(before, "leak.jpg")),
            ("copy", digest_of(before, "recoloured.png"), digest_of(before, "icon.png")),
        ],
    )
    after = audit(tree, decisions=file)
    assert members(after) == [{"icon.png", "recoloured.png"}]
    assert after.leaked_groups["evidence"].tolist() == ["decision"]
    record = after.parameters["decisions"]
    assert record["links_from_decisions"] == 1 and record["separated"] == 1
    assert record["stale"] == []
    assert after.edges is not None and "decision" in set(after.edges["stage"])
    text = after.to_text()
    assert "1 link(s) came from decisions, 1 pair(s) kept apart" in text
    # A ReviewDecisions object works as the file does.
    again = audit(tree, decisions=load_decisions(file))
    assert members(again) == members(after)


def test_not_a_copy_cuts_a_chain(tmp_path: Path) -> None:
    """Three copies in a chain: 'not a copy' on the two ends keeps them in two groups."""
    splits = {name: tmp_path / name for name in ("train", "test")}
    for folder in splits.values():
        folder.mkdir()
    image = imagegen.photo_like(11, (80, 60))
    image.save(splits["train"] / "a.png")
    image.save(splits["test"] / "b.jpg", quality=92)
    image.save(splits["test"] / "c.jpg", quality=80)
    before = audit(splits)
    assert members(before) == [{"a.png", "b.jpg", "c.jpg"}]
    file = write_decisions(
        tmp_path / "d.csv", [("not a copy", digest_of(before, "a.png"), digest_of(before, "c.jpg"))]
    )
    after = audit(splits, decisions=file)
    assert after.table is not None
    group = dict(
        zip(after.table["path"].map(lambda p: Path(p).name), after.table["group_id"], strict=True)
    )
    assert group["a.png"] != group["c.jpg"]


def test_decisions_survive_renames_and_moves(
    tree: dict[str, Path], before: LeakageReport, tmp_path: Path
) -> None:
    file = write_decisions(
        tmp_path / "decisions.csv",
        [
            ("not a copy", digest_of(before, "t0.png"), digest_of(before, "leak.jpg")),
            ("copy", digest_of(before, "recoloured.png"), digest_of(before, "icon.png")),
        ],
    )
    (tree["test"] / "sub").mkdir()
    shutil.move(tree["test"] / "recoloured.png", tree["test"] / "sub" / "renamed.png")
    shutil.move(tree["train"] / "t0.png", tree["train"] / "moved_t0.png")
    after = audit(tree, decisions=file)
    assert members(after) == [{"icon.png", "renamed.png"}]
    assert after.parameters["decisions"]["stale"] == []


def test_stale_decision_is_reported_not_applied(
    tree: dict[str, Path], before: LeakageReport, tmp_path: Path
) -> None:
    file = write_decisions(
        tmp_path / "decisions.csv",
        [("copy", digest_of(before, "recoloured.png"), digest_of(before, "icon.png"))],
    )
    # The recoloured icon is edited after the review: its bytes, so its digest, change.
    Image.open(tree["test"] / "recoloured.png").rotate(3).save(tree["test"] / "recoloured.png")
    with pytest.warns(StaleDecisionWarning, match=r"not applied: copy: x ~ y \(line 2\)"):
        after = audit(tree, decisions=file)
    assert members(after) == [{"t0.png", "leak.jpg"}]
    record = after.parameters["decisions"]
    assert record["stale"] == ["copy: x ~ y (line 2)"] and record["links_from_decisions"] == 0
    assert "Decisions that no longer match an audited image" in after.to_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("decision,digest_a\n", r"line 1: the header must name .* missing digest_b"),
        (HEADER + "maybe,00000000000000aa,00000000000000bb,,\n", r"line 2: decision must be"),
        (HEADER + "copy,00000000000000aa,XYZ,,\n", r"line 2: digest_b must be 16 lowercase hex"),
        (HEADER + "\ncopy,00000000000000aa,00000000000000bb\n", r"line 3: 3 field\(s\)"),
        (
            HEADER
            + "copy,00000000000000aa,00000000000000bb,,\n"
            + "not a copy,00000000000000bb,00000000000000aa,,\n",
            r"decided twice, 'copy' \(line 2\) and 'not a copy' \(line 3\)",
        ),
        ('{"decisions": [{"decision": "copy"', r"line 1: not JSON"),
        (HEADER + "copy,00000000000000aa,00000000000000aa,,\n", r"line 2: .* the same bytes"),
    ],
)
def test_malformed_file_names_the_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    file = tmp_path / "bad.csv"
    file.write_text(text)
    with pytest.raises(DecisionsFileError, match=re.escape(str(file)) + ".*" + message):
        load_decisions(file)


def test_json_decisions_and_missing_file(tmp_path: Path) -> None:
    file = tmp_path / "d.json"
    file.write_text(
        '{"decisions": [{"decision": "Not_A_Copy", "digest_a": "00000000000000AA", '
        '"digest_b": "00000000000000bb"}]}'
    )
    assert load_decisions(file).decisions == [
        Decision("not a copy", "00000000000000aa", "00000000000000bb", line=1)
    ]
    with pytest.raises(DecisionsFileError, match="cannot read the decisions file"):
        load_decisions(tmp_path / "absent.csv")
    assert len(ReviewDecisions([])) == 0


def test_cli_decisions_error_and_stale_lines(
    tree: dict[str, Path], before: LeakageReport, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tree["train"].parent
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "copy,nothex,00000000000000bb,,\n")
    assert main(["scan", str(root), "--no-cache", "--workers", "1", "--decisions", str(bad)]) == 2
    assert f"{bad}, line 2: digest_a must be" in capsys.readouterr().err
    file = write_decisions(
        tmp_path / "decisions.csv",
        [
            ("copy", "0123456789abcdef", digest_of(before, "icon.png")),
            ("not a copy", digest_of(before, "t0.png"), digest_of(before, "leak.jpg")),
        ],
    )
    code = main(["scan", str(root), "--no-cache", "--workers", "1", "--decisions", str(file)])
    out = capsys.readouterr().out
    assert code == 0 and "No leakage" in out
    assert "0 link(s) came from decisions, 1 pair(s) kept apart" in out
    assert "Decisions that no longer match an audited image" in out
    assert "copy: x ~ y (line 2)" in out


def test_html_review_section_without_script_when_asked(before: LeakageReport) -> None:
    page = render_html(before)
    assert page.count("<script>") == 1
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert csp is not None
    directives = [d.strip() for d in csp.group(1).replace("&#x27;", "'").split(";")]
    # Only the page's own script, by its hash: nothing injected could run.
    assert [d for d in directives if d.startswith("script-src")] == [f"script-src {script_hash()}"]
    assert page.count('<tr class="pair leaked"') == 1 and page.count('<tr class="pair near"') == 1
    assert "the judge rejected it: " in page
    plain = render_html(before, review=False)
    assert "<script" not in plain and 'id="review"' not in plain


# ------------------------------------------------------------------ a real browser


def _browser():  # type: ignore[no-untyped-def]
    """Headless Chromium through Selenium, or a skip naming what is missing."""
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed (pip install selenium)"
    )
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip("needs chromium and chromedriver (apt-get install chromium chromium-driver)")
    return webdriver, chromium, driver_path


def test_review_loop_in_a_real_browser(
    tree: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    webdriver, chromium, driver_path = _browser()
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    root = tree["train"].parent
    page = tmp_path / "report.html"
    common = ["scan", str(root), "--no-cache", "--workers", "1"]
    assert main([*common, "--html", str(page)]) == 0
    capsys.readouterr()
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    browser = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        browser.execute_cdp_cmd(
            "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
        )
        browser.get(page.as_uri())
        assert browser.execute_script("return document.documentElement.className") == "js"
        leaked = browser.find_element(By.CSS_SELECTOR, "tr.pair.leaked")
        near = browser.find_element(By.CSS_SELECTOR, "tr.pair.near")
        assert "leak.jpg" in leaked.text and "recoloured.png" in near.text
        leaked.find_element(By.CSS_SELECTOR, "input[value='not a copy']").click()
        near.find_element(By.CSS_SELECTOR, "input[value='copy']").click()
        assert browser.find_element(By.ID, "review-count").text == "2 decision(s)"
        # Decisions persist in the browser: a reload restores them.
        browser.refresh()
        near = browser.find_element(By.CSS_SELECTOR, "tr.pair.near")
        assert near.find_element(By.CSS_SELECTOR, "input[value='copy']").is_selected()
        browser.find_element(By.ID, "review-save").click()
        saved = downloads / "leakaudit-decisions.csv"
        deadline = time.monotonic() + 20
        while not saved.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert saved.exists(), os.listdir(downloads)
        errors = [
            entry
            for entry in browser.get_log("browser")
            if entry.get("level") == "SEVERE" and "favicon" not in entry.get("message", "")
        ]
        assert errors == []
    finally:
        browser.quit()
    decisions = load_decisions(saved)
    assert sorted(d.decision for d in decisions.decisions) == ["copy", "not a copy"]
    assert {Path(d.path_b).name for d in decisions.decisions} | {
        Path(d.path_a).name for d in decisions.decisions
    } == {"t0.png", "leak.jpg", "icon.png", "recoloured.png"}
    assert main([*common, "--decisions", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "1 duplicate group(s) that span splits" in out
    assert "recoloured.png" in out and "leak.jpg" not in out.split("Leaked groups")[1]
    assert "1 link(s) came from decisions, 1 pair(s) kept apart" in out


def test_kept_apart_pair_is_named_in_the_review(
    tree: dict[str, Path], before: LeakageReport, tmp_path: Path
) -> None:
    file = write_decisions(
        tmp_path / "decisions.csv",
        [("not a copy", digest_of(before, "t0.png"), digest_of(before, "leak.jpg"))],
    )
    after = audit(tree, decisions=file)
    assert after.table is not None
    names = [Path(p).name for p in after.table["path"]]
    kept = [
        p for p in near_misses(after) if {names[p.row_a], names[p.row_b]} == {"t0.png", "leak.jpg"}
    ]
    assert [p.why for p in kept] == ["kept apart by a reviewer's decision (not a copy)"]


def test_decisions_need_the_verified_audit(tree: dict[str, Path], tmp_path: Path) -> None:
    file = write_decisions(tmp_path / "d.csv", [])
    with pytest.raises(
        ValueError, match=r"decisions apply to the verified audit.*got verify=False"
    ):
        audit(tree, verify=False, decisions=file)
    with pytest.raises(TypeError, match="decisions must be a decisions file"):
        audit(tree, decisions=3)


def test_clean_honours_decisions(
    tree: dict[str, Path], before: LeakageReport, tmp_path: Path
) -> None:
    """clean --decisions: the decided leak (recoloured.png, a "copy") leaves test; the pair marked
    "not a copy" (leak.jpg) stays where it was."""
    root = tree["train"].parent
    file = write_decisions(
        tmp_path / "decisions.csv",
        [
            ("not a copy", digest_of(before, "t0.png"), digest_of(before, "leak.jpg")),
            ("copy", digest_of(before, "recoloured.png"), digest_of(before, "icon.png")),
        ],
    )
    out = tmp_path / "clean"
    argv = ["clean", str(root), "--out", str(out), "--quiet", "--workers", "1", "--no-cache"]
    assert main([*argv, "--decisions", str(file)]) == 0
    assert (out / "test" / "leak.jpg").is_file() and (out / "train" / "t0.png").is_file()
    assert not (out / "test" / "recoloured.png").exists()
    assert (root / "test" / "recoloured.png").is_file()  # ROOT is never touched


def test_decisions_with_the_hash_cache(
    tree: dict[str, Path], before: LeakageReport, tmp_path: Path
) -> None:
    """With the hash cache the digests come from it (stored on the first run): same groups."""
    file = write_decisions(
        tmp_path / "decisions.csv",
        [("copy", digest_of(before, "recoloured.png"), digest_of(before, "icon.png"))],
    )
    cache = tmp_path / "cache"
    for _ in range(2):
        after = audit_splits(tree, workers=1, cache=cache, decisions=file)
        assert sorted(map(sorted, members(after))) == [
            ["icon.png", "recoloured.png"],
            ["leak.jpg", "t0.png"],
        ]
        assert after.parameters["decisions"]["links_from_decisions"] == 1


def test_no_decision_applies_no_change(
    tree: dict[str, Path], before: LeakageReport, tmp_path: Path
) -> None:
    """Decisions that all agree with the audit (or a file with none) change no group."""
    assert before.table is not None
    empty = audit(tree, decisions=write_decisions(tmp_path / "empty.csv", []))
    agreeing = audit(
        tree,
        decisions=write_decisions(
            tmp_path / "agree.csv",
            [("copy", digest_of(before, "t0.png"), digest_of(before, "leak.jpg"))],
        ),
    )
    for after in (empty, agreeing):
        assert after.table is not None
        assert after.table["group_id"].tolist() == before.table["group_id"].tolist()
    assert agreeing.parameters["decisions"]["confirmed"] == 1
    assert agreeing.parameters["decisions"]["links_from_decisions"] == 0


def test_byte_copies_get_no_controls(tmp_path: Path) -> None:
    splits = {name: tmp_path / name for name in ("train", "test")}
    for folder in splits.values():
        folder.mkdir()
    imagegen.photo_like(1, (64, 48)).save(splits["train"] / "a.png")
    shutil.copyfile(splits["train"] / "a.png", splits["test"] / "a.png")
    page = render_html(audit(splits))
    assert "byte-identical files: always a copy" in page
    assert 'type="radio"' not in page
