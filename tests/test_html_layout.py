"""Issue 37 point 5: the HTML report's layout. The first pair on the first screen, small
images enlarged (nearest neighbour), paths broken between their parts, no sideways
scrolling at 500 px, and a histogram that says what it shows and marks the leaked images
(verified copies can lie right of the threshold)."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from imagegen import encode, textured_photo
from PIL import Image

import leakaudit
from leakaudit.htmlreport import render_html
from leakaudit.report import LeakageReport

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: A long folder name and a long file name: where a path may break.
DEEP = "a_rather_long_folder_name_for_class/and_another_level"


def _crop(image: Image.Image) -> Image.Image:
    w, h = image.size
    return image.crop((2, 2, w - 2, h - 2))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> LeakageReport:
    """CIFAR-size (32 px) photos: exact, re-encoded and cropped copies across splits, with
    long folder names, and 30 unrelated photos."""
    root = tmp_path_factory.mktemp("layout")
    splits = {"train": root / "train" / DEEP, "test": root / "test" / DEEP}
    for folder in splits.values():
        folder.mkdir(parents=True)
    for seed in range(1, 4):
        original = textured_photo(seed, (32, 32))
        (splits["train"] / f"original_{seed}.png").write_bytes(encode(original, "PNG"))
        copy = _crop(original) if seed == 3 else original
        fmt = "JPEG" if seed == 2 else "PNG"
        (splits["test"] / f"copy_{seed}.{fmt.lower()}").write_bytes(encode(copy, fmt))
    for seed in range(100, 130):
        folder = splits["train" if seed % 3 else "test"]
        (folder / f"other_{seed}.png").write_bytes(encode(textured_photo(seed, (32, 32)), "PNG"))
    return leakaudit.audit_splits(
        {name: root / name for name in splits}, cache=False, workers=1, progress=False
    )


def _sections(page: str) -> list[str]:
    return re.findall(r'<section id="([a-z]+)"', page)


def test_the_groups_come_before_histogram_and_verification(report: LeakageReport) -> None:
    sections = _sections(render_html(report))
    assert sections[:2] == ["summary", "leaked"], sections
    assert sections.index("leaked") < sections.index("histogram")
    assert sections.index("leaked") < sections.index("verification")


def test_small_images_are_enlarged_by_whole_pixels(report: LeakageReport) -> None:
    page = render_html(report, thumbnail_size=96)
    uris = re.findall(r'<img src="data:image/jpeg;base64,([^"]+)"', page)
    assert uris
    for uri in uris:
        with Image.open(io.BytesIO(base64.b64decode(uri))) as thumb:
            assert thumb.size in ((96, 96), (84, 84))  # 32 px (28 px cropped) x 3
            pixels = np.asarray(thumb.convert("L"), dtype=np.int16)
        # Nearest neighbour: each source pixel is a 3 x 3 block of (nearly) one value.
        side = pixels.shape[0] // 3
        blocks = pixels.reshape(side, 3, side, 3)
        spread = (blocks.max(axis=(1, 3)) - blocks.min(axis=(1, 3))).mean()
        assert spread < 6, spread
    assert "image-rendering: pixelated" in page


def test_paths_break_between_their_parts(report: LeakageReport) -> None:
    page = render_html(report)
    style = page.split("<style>")[1].split("</style>")[0]
    assert "break-all" not in style and "anywhere" not in style
    paths = re.findall(r'<span class="path">(.*?)</span>', page)
    assert paths
    for path in paths:
        # A break opportunity after every / and _, and nowhere else.
        assert path.count("<wbr>") == path.count("/") + path.count("_"), path
        assert re.sub("<wbr>", "", path).count("<") == 0


def test_histogram_says_what_it_shows_and_marks_the_leaked(report: LeakageReport) -> None:
    page = render_html(report)
    histogram = page.split('<section id="histogram">')[1].split("</section>")[0]
    assert "have a duplicate" not in histogram
    assert "does not mean it has no copy" in histogram
    marked = [int(n) for n in re.findall(r"<title>distance \d+: (\d+) leaked image", histogram)]
    assert sum(marked) == report.n_leaked_images
    # The cropped copy's whole-image hash is beyond the threshold: said and marked there.
    threshold = 8
    beyond = [
        int(n)
        for d, n in re.findall(r"<title>distance (\d+): (\d+) leaked image", histogram)
        if int(d) > threshold
    ]
    assert sum(beyond) >= 1
    assert f"{sum(beyond)} leaked image(s) lie right of the threshold" in histogram


_MEASURE = """<script>
addEventListener('load', () => {
  const pair = [...document.querySelectorAll('.group.leaked')[0].querySelectorAll('img')];
  const table = document.querySelector('table.summary').getBoundingClientRect();
  const image = document.querySelector('.group.leaked img').getBoundingClientRect();
  const out = document.createElement('pre');
  out.id = 'measure';
  out.textContent = JSON.stringify({
    scroll: document.documentElement.scrollWidth, width: document.documentElement.clientWidth,
    first: Math.max(...pair.slice(0, 2).map(i => i.getBoundingClientRect().bottom)),
    table: table.right, image: image.width});
  document.body.appendChild(out);
});
</script>"""


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian: apt-get install -y chromium)",
)
@pytest.mark.parametrize(("width", "height"), [(500, 900), (1280, 800)])
def test_layout_in_headless_chromium(
    report: LeakageReport, tmp_path: Path, width: int, height: int
) -> None:
    # The page itself runs no script (its CSP): a copy with a measuring script added.
    page = render_html(report)
    page = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    (tmp_path / "page.html").write_text(page.replace("</body>", _MEASURE + "</body>"))
    result = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--window-size={width},{height}",
            "--dump-dom",
            (tmp_path / "page.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    found = re.search(r'<pre id="measure">(.*?)</pre>', result.stdout)
    assert found, result.stdout[-2000:]
    measured = json.loads(found.group(1))
    assert measured["scroll"] <= measured["width"], measured  # no sideways scrolling
    assert measured["table"] <= measured["width"], measured  # the split table fits
    assert measured["first"] <= height, measured  # the first pair's pictures on the first screen
    assert measured["image"] >= 96, measured  # a 32 px image shown at a judgeable size
