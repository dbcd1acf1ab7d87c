"""Signals (issue #35, point 7): SIGINT or SIGTERM at any moment of a run.

Whenever the signal comes (interpreter start-up, the pandas import, listing,
the forkserver and its workers starting, hashing, verification, the report):
one line on stderr, exit 130 (SIGINT) or 143 (SIGTERM), no hang, no process
left behind, no partial output, and a cache that the next run uses as it is.
Ctrl-C is sent as a terminal sends it, to the whole process group (workers,
forkserver and resource tracker included); SIGTERM as ``kill`` sends it, to the
main process, and as ``timeout``/systemd do, to the group.

``LEAKAUDIT_SIGNAL_STRESS=N`` runs N interrupts at random moments instead of
the fixed ones (``benchmarks/bench_signals.py`` runs them on 100k images).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

LINUX = sys.platform.startswith("linux")
pytestmark = [
    pytest.mark.skipif(not LINUX, reason="reads the process tree from /proc"),
    pytest.mark.slow,
]

#: A run must end this long after its signal (measured: well under a second).
EXIT_LIMIT_SECONDS = 20.0
CLI = [sys.executable, "-m", "leakaudit"]


def write_tiny_dataset(root: Path, n: int, *, seed: int = 0) -> None:
    """``n`` small distinct PNGs in ROOT/train and ROOT/test (80/20), ten classes each."""
    rng = np.random.default_rng(seed)
    for split, share in (("train", 0.8), ("test", 0.2)):
        count = int(n * share)
        coarse = rng.integers(0, 256, (count, 4, 4, 3), dtype=np.uint8)
        for c in range(10):
            (root / split / f"c{c}").mkdir(parents=True, exist_ok=True)
        for i in range(count):
            image = Image.fromarray(coarse[i]).resize((24, 24), Image.Resampling.BILINEAR)
            image.save(root / split / f"c{i % 10}" / f"{i:06d}.png", compress_level=1)


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as file:
            stat = file.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def _catches_sigterm(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as file:
            caught = next(line for line in file if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(int(caught.split()[1], 16) >> (signal.SIGTERM - 1) & 1)


def descendants(pid: int) -> dict[int, str]:
    """Every live process below ``pid``, with its start time (to tell a reused pid)."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and fields[0] != "Z":
                parents[int(entry)] = (int(fields[1]), fields[19])
    found = {pid}
    grew = True
    while grew:
        grew = False
        for child, (parent, _) in parents.items():
            if parent in found and child not in found:
                found.add(child)
                grew = True
    found.discard(pid)
    return {child: parents[child][1] for child in found}


def alive(processes: dict[int, str]) -> list[int]:
    living = []
    for pid, started in processes.items():
        fields = _stat(pid)
        if fields is not None and fields[19] == started and fields[0] != "Z":
            living.append(pid)
    return living


def interrupt_run(
    argv: list[str], delay: float, signum: int, *, group: bool, workdir: Path
) -> dict[str, object]:
    """Start ``leakaudit argv``, send ``signum`` after ``delay`` s; what became of the run."""
    err_path = workdir / "stderr.txt"
    with open(err_path, "wb") as err:  # a file: a process left behind never blocks a read
        process = subprocess.Popen(
            [*CLI, *argv], stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
    tree: dict[int, str] = {}
    # The clock starts when leakaudit's first line has run (its SIGTERM handler is in):
    # a signal during the interpreter's own start-up, before that, is Python's.
    deadline = time.monotonic() + 60
    while not _catches_sigterm(process.pid) and process.poll() is None:
        assert time.monotonic() < deadline, "leakaudit never started"
        time.sleep(0.002)
    start = time.monotonic()
    while time.monotonic() - start < delay and process.poll() is None:
        tree.update(descendants(process.pid))
        time.sleep(0.005)
    finished_first = process.poll() is not None
    if not finished_first:
        tree.update(descendants(process.pid))
        (os.killpg if group else os.kill)(process.pid, signum)
    sent = time.monotonic()
    try:
        code: int | None = process.wait(timeout=EXIT_LIMIT_SECONDS)
    except subprocess.TimeoutExpired:
        code = None
    seconds = time.monotonic() - sent
    deadline = time.monotonic() + 10
    while alive(tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = alive(tree)
    for pid in left:  # never leave a process behind, even when failing
        os.kill(pid, signal.SIGKILL)
    if code is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    lines = err_path.read_text(errors="replace").splitlines()
    return {
        "finished_first": finished_first,
        "code": code,
        "seconds": seconds,
        "lines": [line for line in lines if not line.startswith("leakaudit: INFO:")],
        "left": left,
    }


def check_interrupted(run: dict[str, object], signum: int) -> None:
    expected = "leakaudit: terminated" if signum == signal.SIGTERM else "leakaudit: interrupted"
    assert run["code"] is not None, f"hung: no exit {EXIT_LIMIT_SECONDS} s after the signal"
    assert (run["code"], run["lines"]) == (128 + signum, [expected])
    assert run["left"] == []


def check_outputs(out: Path) -> None:
    """Only finished outputs: every file has its final name, and the JSON parses."""
    names = {p.name for p in out.iterdir()}
    final = {"report.json", "t.csv", "t.pairs.csv", "t.groups.csv", "t.splits.csv"}
    assert names <= final, names - final
    if "report.json" in names:
        json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("signals") / "root"
    write_tiny_dataset(root, 3000)
    return root


def _moments() -> list[tuple[float, int, bool]]:
    """(delay, signal, to the group): from interpreter start-up to the report."""
    stress = int(os.environ.get("LEAKAUDIT_SIGNAL_STRESS", "0"))
    if stress:
        rng = random.Random(35)
        return [
            (rng.uniform(0.0, 4.0), rng.choice([signal.SIGINT, signal.SIGTERM]), rng.random() < 0.5)
            for _ in range(stress)
        ]
    delays = [0.0, 0.02, 0.05, 0.08, 0.12, 0.18, 0.25, 0.35, 0.5, 0.7, 0.9, 1.2, 1.6, 2.0, 2.6]
    return [
        (delay, signum, signum == signal.SIGINT or i % 3 == 0)
        for i, delay in enumerate(delays)
        for signum in (signal.SIGINT, signal.SIGTERM)
    ]


def test_a_signal_at_any_moment_is_one_line_and_leaves_nothing(
    dataset: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    interrupted = 0
    for number, (delay, signum, group) in enumerate(_moments()):
        out = tmp_path / f"out{number}"
        out.mkdir()
        argv = ["scan", str(dataset), "--workers", "2"]
        argv += ["--json", str(out / "report.json"), "--csv", str(out / "t.csv")]
        # Half the runs fill one cache, interrupted at every step of it.
        argv += ["--cache-dir", str(cache)] if number % 2 else ["--no-cache"]
        run = interrupt_run(argv, delay, signum, group=group, workdir=tmp_path)
        context = f"{signal.Signals(signum).name} after {delay:.2f} s (group={group}): {run}"
        if not run["finished_first"]:
            interrupted += 1
            try:
                check_interrupted(run, signum)
            except AssertionError as error:
                raise AssertionError(context) from error
        check_outputs(out)
    assert interrupted >= len(_moments()) * 3 // 4  # the moments fell inside the runs
    # The cache is whole: the next run uses it without a word about it, and finishes.
    done = subprocess.run(
        [*CLI, "scan", str(dataset), "--workers", "2", "--cache-dir", str(cache)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if "INFO" not in line] == []
    assert not [p for p in tmp_path.rglob("*") if "tmp" in p.name.lower()]


# A hook that sends the signal the moment pandas starts to be imported: the heavy
# import the command line begins with, once its own handlers are in place.
_DURING_IMPORT = textwrap.dedent(
    """
    import importlib.abc, os, signal, sys

    class SignalOnImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "pandas":
                sys.meta_path.remove(self)
                os.kill(os.getpid(), signal.{signal})
            return None

    sys.meta_path.insert(0, SignalOnImport())
    sys.argv = ["leakaudit", "scan", {root!r}, "--no-cache"]
    import runpy
    runpy.run_module("leakaudit", run_name="__main__", alter_sys=True)
    """
)


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_during_the_heavy_imports_is_one_line(
    dataset: Path, tmp_path: Path, name: str
) -> None:
    script = tmp_path / "during_import.py"
    script.write_text(_DURING_IMPORT.format(signal=name, root=str(dataset)))
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    signum = getattr(signal, name)
    expected = "leakaudit: terminated" if signum == signal.SIGTERM else "leakaudit: interrupted"
    assert (result.returncode, result.stderr.splitlines()) == (128 + signum, [expected])


def test_importing_leakaudit_imports_nothing_heavy() -> None:
    """What lets the command line take its signals before pandas, numpy and Pillow load."""
    code = (
        "import sys, leakaudit, leakaudit.__main__; "
        "print(sorted(m for m in ('pandas', 'numpy', 'PIL') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (result.returncode, result.stdout.strip()) == (0, "[]"), result.stderr


# A finalizer (multiprocessing's Finalize, weakref.finalize, __del__) runs between any two
# lines of the main thread, when its object dies; an exception raised inside it is printed
# as "Exception ignored" and lost. A signal that came there was lost with it, and the run
# went on to the end (found on 3,000 images: SIGTERM 2.6 s into the scan, while the hashing
# pool's queues were finalized).
_IN_A_FINALIZER = textwrap.dedent(
    """
    import os, signal, sys, time, weakref
    import multiprocessing.util
    from leakaudit._interrupts import exit_code, handle_signals, interrupted_line

    class Thing:
        def __del__(self):
            if {kind!r} == "__del__":
                send()

    def send():
        os.kill(os.getpid(), signal.{signal})
        time.sleep(0.05)

    handle_signals()
    try:
        thing = Thing()
        if {kind!r} == "Finalize":
            multiprocessing.util.Finalize(thing, send)
        elif {kind!r} == "weakref.finalize":
            weakref.finalize(thing, send)
        del thing
        for _ in range(200):
            time.sleep(0.01)
        print("finished")
    except KeyboardInterrupt as interrupt:
        print(interrupted_line(interrupt), file=sys.stderr)
        sys.exit(exit_code(interrupt))
    """
)


@pytest.mark.parametrize("kind", ["Finalize", "weakref.finalize", "__del__"])
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_inside_a_finalizer_is_not_lost(tmp_path: Path, kind: str, name: str) -> None:
    script = tmp_path / "finalizer.py"
    script.write_text(_IN_A_FINALIZER.format(kind=kind, signal=name))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60
    )
    signum = int(getattr(signal, name))
    expected = "leakaudit: terminated" if name == "SIGTERM" else "leakaudit: interrupted"
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (
        128 + signum,
        "",
        [expected],
    )
