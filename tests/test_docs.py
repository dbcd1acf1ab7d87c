"""The README and docs/: every Python snippet runs as written, every relative link resolves.

Each ```python block of README.md and docs/*.md runs as a script of its own, in a fresh
subprocess and an empty temporary folder (so it must build its own data), and must exit 0 with
no traceback. A block preceded by ``<!-- doc-test: raises NAME -->`` must fail with that
exception instead (a guard that stops a script). A block whose text holds
``# doc-test: skip (reason)`` is skipped, for what cannot run here (a Ray cluster, model
weights, the Hugging Face Hub).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_RAISES = re.compile(r"<!--\s*doc-test:\s*raises\s+(\w+)\s*-->\s*$")
_SKIP = re.compile(r"#\s*doc-test:\s*skip\s*\((.+?)\)")
#: Modules a snippet may import that come with an extra; without them the snippet is skipped.
_OPTIONAL = ("torch", "torchvision", "datasets", "pyarrow", "ray")


class Snippet(NamedTuple):
    page: str
    line: int
    code: str
    raises: str | None


def _snippets() -> list[Snippet]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            raises = _RAISES.search(before)
            line = text.count("\n", 0, match.start()) + 1
            found.append(
                Snippet(
                    str(page.relative_to(ROOT)),
                    line,
                    match.group(1),
                    raises.group(1) if raises else None,
                )
            )
    return found


SNIPPETS = _snippets()


def test_the_pages_have_snippets() -> None:
    assert any(s.page == "README.md" for s in SNIPPETS)
    assert len(SNIPPETS) >= 10


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[f"{s.page}:{s.line}" for s in SNIPPETS])
def test_snippet_runs(snippet: Snippet, tmp_path: Path) -> None:
    skip = _SKIP.search(snippet.code)
    if skip:
        pytest.skip(skip.group(1))
    imported = set(re.findall(r"^\s*(?:from|import)\s+(\w+)", snippet.code, re.MULTILINE))
    if re.search(r"\b(?:to|read)_parquet\(|\bshards\b", snippet.code):
        imported.add("pyarrow")  # pandas' Parquet and leakaudit's shards need it, unimported
    missing = [m for m in _OPTIONAL if m in imported and importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (pip install 'leakaudit-vision[all]')")
    work = tmp_path / "work"
    work.mkdir()
    script = work / "snippet.py"
    script.write_text(snippet.code, encoding="utf-8")
    env = {
        **os.environ,
        "LEAKAUDIT_CACHE_DIR": str(tmp_path / "cache"),
        "HF_DATASETS_CACHE": str(tmp_path / "hf-cache"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONWARNINGS": "",
    }
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    where = f"{snippet.page}, the block at line {snippet.line}:\n{output}"
    if snippet.raises:
        assert result.returncode == 1, where
        assert f"{snippet.raises}:" in result.stderr, where
    else:
        assert result.returncode == 0, where
        assert "Traceback" not in result.stderr, where


# ------------------------------------------------------------------------------ links

_LINK = re.compile(r"\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE):
        base = _anchor(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        anchors.add(base if count == 0 else f"{base}-{count}")
    return anchors


def _links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return [
        target
        for target in _LINK.findall(text)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def test_anchor_matches_github() -> None:
    assert _anchor("What `clean` guarantees") == "what-clean-guarantees"
    assert _anchor("Ray Data and Parquet hash shards (`[ray]`)") == (
        "ray-data-and-parquet-hash-shards-ray"
    )


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and (file.suffix != ".md" or anchor not in _anchors(file)):
            broken.append(f"{target} (no such heading in {file.name})")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in _links(ROOT / "README.md")}
    unlinked = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked


def test_the_first_screen_answers_what_install_scan_read_guard() -> None:
    first_screen = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:72])
    for needle in (
        "pip install -e .",
        "pip install leakaudit-vision",
        "leakaudit scan ROOT",
        "LEAKAGE:",
        "assert_no_leakage",
        "--fail-on-leak",
    ):
        assert needle in first_screen, needle
