"""Issue 35, points 1-4: the dataset's edges, as the links that are followed draw them.

ROOT, every split folder and every folder a followed link leads to (at any depth)
are resolved first; no output may be, contain or lie inside any of them. Links are
followed as torchvision's ``ImageFolder`` follows them (``os.walk(followlinks=True)``),
with loops named in a warning. Each reproduction checks ROOT and every followed
link target (bytes, inodes, modes, mtimes) before and after.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import imagegen
import pytest

from leakaudit.cleantree import _MARKER, _MARKER_TEXT, remove_stale_partials

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links")


# ---------------------------------------------------------------- 3. glob characters in --out


def test_stale_partials_of_a_glob_like_out_leave_other_runs_alone(tmp_path: Path) -> None:
    """``--out 'o[12]'`` deleted a live run's ``.o1.leakaudit-partial-<pid>-...`` folder."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pid = live.pid
        others = []
        for name in (f".o1.leakaudit-partial-{pid}-abc", f".o2.leakaudit-old-{pid}-abc",
                     f".o[12].leakaudit-partial-{pid}x-abc"):  # fmt: skip
            folder = tmp_path / name
            (folder / "tree").mkdir(parents=True)
            (folder / _MARKER).write_bytes(_MARKER_TEXT)
            (folder / "tree" / "work.jpg").write_bytes(b"in progress")
            others.append(folder)
        # A real leftover of this very --out, its process ended: removed.
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        stale = tmp_path / f".o[12].leakaudit-partial-{int(dead.stdout)}-xyz"
        (stale / "tree").mkdir(parents=True)
        (stale / _MARKER).write_bytes(_MARKER_TEXT)
        assert remove_stale_partials(tmp_path / "o[12]") == [stale]
        assert not stale.exists()
        for folder in others:
            assert (folder / "tree" / "work.jpg").read_bytes() == b"in progress", folder.name
    finally:
        live.kill()
        live.wait()
