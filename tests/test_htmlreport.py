from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import imagegen
import numpy as np
import pytest

from leakaudit import audit_splits
from leakaudit.htmlreport import nearest_neighbour_distances, render_html, write_html
from leakaudit.report import LeakageReport

HOSTILE = "<img src=x onerror=alert(1)>.png"


def build_tree(root: Path) -> dict[str, Path]:
    """Train/Val/Test with two planted leaks (one under a hostile name), a within-train
    duplicate and a corrupt file; 64x48 images so everything stays fast."""
    splits = {name: root / name for name in ("train", "val", "test")}
    for path in splits.values():
        path.mkdir(parents=True)
    images = [imagegen.photo_like(seed, (64, 48)) for seed in range(10)]
    for i in range(5):
        images[i].save(splits["train"] / f"t{i}.png")
    images[5].save(splits["val"] / "v5.png")
    images[6].save(splits["test"] / "s6.png")
    images[0].save(splits["test"] / HOSTILE)  # leak 1, hostile name
    images[1].save(splits["val"] / "copy_of_t1.jpg", quality=90)  # leak 2
    images[2].save(splits["train"] / "t2_dup.jpg", quality=85)  # within-split duplicate
    (splits["test"] / "broken.png").write_bytes(
        imagegen.truncated(imagegen.encode(images[7], "PNG"))
    )
    return splits


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> LeakageReport:
    splits = build_tree(tmp_path_factory.mktemp("html-tree"))
    with pytest.warns(UserWarning, match="could not be read"):
        return audit_splits(splits, workers=1)


def test_report_sections_and_escaping(report: LeakageReport) -> None:
    assert report.n_leaked_groups == 2
    page = render_html(report, title="<b>title</b>")
    assert page.startswith("<!DOCTYPE html>")
    assert page.count('class="group leaked"') == 2
    assert page.count('class="group within"') == 1
    # The hostile file name only ever appears escaped.
    assert "&lt;img src=x onerror=alert(1)&gt;.png" in page
    assert "<img src=x" not in page and "onerror=alert(1)>" not in page
    assert "&lt;b&gt;title&lt;/b&gt;" in page and "<b>title</b>" not in page
    # Self-contained: every image is a data URI, nothing is fetched.
    assert re.findall(r'<img src="(?!data:image/jpeg;base64,)', page) == []
    assert page.count('<img src="data:image/jpeg;base64,') == 10  # 2 leaked + 1 within, x2
    # ... and the review section's 2 leaked pairs, x2 (test_review.py tests the section).
    for needle in ("<link", "href=", "url(", 'src="http'):
        assert needle not in page
    assert page.count("<script") == 1  # the review's own script, allowed by its hash
    plain = render_html(report, title="<b>title</b>", review=False)
    assert plain.count('<img src="data:image/jpeg;base64,') == 6
    assert "<script" not in plain and "&lt;img src=x onerror=alert(1)&gt;.png" in plain
    assert "broken.png" in page  # the unreadable file is listed, with its reason
    assert "<svg" in page and "threshold 8" in page
    assert "phash+dhash" in page  # the parameters used


def test_caps_groups_with_a_note(report: LeakageReport) -> None:
    page = render_html(report, max_groups=1, max_members=1)
    assert page.count('class="group leaked"') == 1
    assert "1 more group(s) not shown" in page
    assert "more member(s) without preview" in page


def test_nearest_neighbour_distances_exact_and_sampled(report: LeakageReport) -> None:
    exact = nearest_neighbour_distances(report)
    assert exact.exact and exact.n_images == exact.distances.size == 10
    assert (exact.distances[:1] >= 0).all() and int(exact.distances.min()) == 0
    sampled = nearest_neighbour_distances(report, sample=4, seed=1)
    assert not sampled.exact and sampled.distances.size == 4
    # A sampled image's nearest distance is its exact one: queries scan every image.
    assert set(sampled.distances.tolist()) <= set(exact.distances.tolist())


def test_rejects_bad_arguments(report: LeakageReport) -> None:
    with pytest.raises(ValueError, match="max_members must be an int"):
        render_html(report, max_members=0)
    # A report rebuilt from JSON has no table: the page still renders, without images.
    rebuilt = LeakageReport.from_json(report.to_json())
    page = render_html(rebuilt)
    assert page.count('class="group leaked"') == 2 and "rebuilt from its JSON summary" in page
    assert "<img" not in page and "&lt;img src=x" not in page  # no member paths: none stored


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian: apt-get install -y chromium)",
)
def test_report_renders_in_headless_chromium(report: LeakageReport, tmp_path: Path) -> None:
    page = write_html(report, tmp_path / "report.html")
    flags = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert html.count('class="group leaked"') == 2
    assert html.count('class="group within"') == 1
    # The parsed DOM holds the hostile name as text, and no element was injected from it.
    assert "&lt;img src=x onerror=alert(1)&gt;.png" in html
    assert not re.search(r'<img[^>]*src="x"', html)
    assert len(re.findall(r"<img ", html)) == len(re.findall(r'<img src="data:image/jpeg', html))
    assert "<svg" in html and "<rect" in html

    shot = tmp_path / "report.png"
    result = subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.is_file() and shot.stat().st_size > 20_000
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (1200, 1600)
        # A rendered page, not a blank one: many distinct colours (thumbnails, badges).
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 500
        assert np.asarray(image.convert("L")).std() > 10


def test_bidi_and_invisible_characters_are_shown_escaped(tmp_path: Path) -> None:
    """Issue 35, point 12: U+202E in a file name went raw into the HTML (the text report
    escapes it), so ``x\u202egnp.exe`` showed as ``xexe.png``."""
    train, test = tmp_path / "train", tmp_path / "hold\u202eout"
    train.mkdir()
    test.mkdir()
    image = imagegen.photo_like(3, (64, 48))
    image.save(train / "a.png")
    image.save(test / "x\u202egnp.exe.png")
    image.save(test / "zero\u200bwidth\u2066.png")
    (test / "broken\u200f.png").write_bytes(b"not an image")
    with pytest.warns(UserWarning, match="could not be read"):
        report = audit_splits({"train": train, "hold\u202eout": test}, workers=1)
    assert report.n_leaked_groups == 1
    page = render_html(report)
    for char in ("\u202e", "\u200b", "\u2066", "\u200f"):
        assert char not in page
    text = report.to_text()
    for shown in ("x\\u202egnp.exe.png", "zero\\u200bwidth\\u2066.png"):
        assert shown in page
        assert shown in text  # the same escape as the text report's
    assert "broken\\u200f.png" in page  # listed under the unreadable files
    assert "hold\\u202eout" in page
