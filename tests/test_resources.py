"""Bounded resources (issue #11): what a hostile file or an interrupted run may cost.

* A huge file is refused from its header, never read whole: a sparse 3 GiB file
  costs a few megabytes, whatever its name says it is.
* A JPEG that ends before its declared size is filled (libjpeg pads it with grey)
  is a failure, "truncated image", not a blank image.
* Pillow's warnings name the file they are about.
* The pool never starts more workers than there are usable cores, keeps only a few
  chunks per worker queued, and its processes (workers, forkserver, resource
  tracker) end when the main process is killed or interrupted.

Every image is generated here; subprocesses measure memory and are killed on purpose.
"""

from __future__ import annotations

import concurrent.futures.process
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import imagegen
import numpy as np
import pytest
from PIL import Image

from leakaudit import hashing
from leakaudit._validation import usable_cpu_count
from leakaudit.errors import ImageLoadError
from leakaudit.hashing import hash_image, hash_sources
from leakaudit.loading import DecodeOptions, ImageDecodeWarning, load_reduced_grey

LINUX = sys.platform.startswith("linux")
needs_proc = pytest.mark.skipif(not LINUX, reason="reads the process tree from /proc")
needs_two_cores = pytest.mark.skipif(
    usable_cpu_count() < 2, reason="a pool of 2 workers needs 2 usable cores"
)


def _jpeg(size: tuple[int, int] = (640, 480), seed: int = 3, **params: object) -> bytes:
    """A photo-like JPEG of ``size`` (drawn small and scaled up: cheap at any size)."""
    small = imagegen.photo_like(seed, (max(8, size[0] // 8), max(8, size[1] // 8)))
    return imagegen.encode(small.resize(size, Image.Resampling.BILINEAR), "JPEG", **params)


# ------------------------------------------------------------------------- huge files

_MEASURE = textwrap.dedent(
    """
    import json, resource, sys
    from PIL import Image
    from leakaudit.hashing import hash_sources

    Image.init()  # the format plugins, imported once by any first decode
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    table = hash_sources(sys.argv[1:], workers=1, on_error="ignore")
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    errors = {table.sources[i]: reason for i, reason in table.errors.items()}
    print(json.dumps({"errors": errors, "growth_kib": after - before}))
    """
)


def _sparse(path: Path, head: bytes, size: int) -> Path:
    with open(path, "wb") as file:
        file.write(head)
        file.truncate(size)  # a hole: no disk space, reads as zeros
    return path


@pytest.mark.skipif(not LINUX, reason="ru_maxrss is in KiB on Linux")
def test_huge_sparse_files_are_refused_from_their_header(tmp_path: Path) -> None:
    head = _jpeg()[:2000]  # SOI, tables, the frame header and the start of the scan
    big = _sparse(tmp_path / "x.jpg", head, 3 * 2**30)
    zeros = _sparse(tmp_path / "zeros.jpg", b"", 3 * 2**30)
    # Under max_file_bytes, but more than a 640x480 JPEG can hold.
    tail = _sparse(tmp_path / "tail.jpg", head, 160 * 2**20)
    before = {path: path.stat() for path in (big, zeros, tail)}
    result = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(big), str(zeros), str(tail)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # import leakaudit as installed, whatever the current folder holds
    )
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout)
    errors = measured["errors"]
    assert errors[str(big)] == (
        f"file too large: {3 * 2**30} bytes exceeds max_file_bytes={512 * 2**20}"
    )
    assert errors[str(zeros)] == "not a recognised image format"
    assert errors[str(tail)].startswith(f"file too large: {160 * 2**20} bytes, more than a 640x480")
    # Reading any of them whole would cost 160 MiB to 3 GiB.
    assert measured["growth_kib"] < 100 * 1024
    for path, status in before.items():  # the user's files are left as they were
        after = path.stat()
        assert (after.st_size, after.st_mtime_ns) == (status.st_size, status.st_mtime_ns)


def test_max_file_bytes_is_an_option(tmp_path: Path) -> None:
    data = imagegen.encode(imagegen.photo_like(1), "PNG")
    path = tmp_path / "photo.png"
    path.write_bytes(data)
    small = DecodeOptions(max_file_bytes=1000)
    table = hash_sources([path, data], decode=small, on_error="ignore", workers=1)
    assert table.errors == {0: f"file too large: {len(data)} bytes exceeds max_file_bytes=1000"}
    assert table.valid[1]  # in-memory bytes are already in memory: not checked
    assert hash_sources([path], workers=1).valid.all()
    with pytest.raises(ValueError, match=r"^max_file_bytes must be an int >= 1; got 0\.$"):
        DecodeOptions(max_file_bytes=0)
    with pytest.raises(TypeError, match=r"^max_file_bytes must be an int >= 1; got 1\.5\.$"):
        DecodeOptions(max_file_bytes=1.5)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- truncated JPEG

_EOI = b"\xff\xd9"


def _claiming(data: bytes, width: int, height: int) -> bytes:
    """``data`` with its (baseline, 3-component) frame header claiming ``width x height``."""
    at = data.index(b"\xff\xc0\x00\x11")
    return data[: at + 5] + struct.pack(">HH", height, width) + data[at + 9 :]


def _reason(data: bytes) -> str | None:
    table = hash_sources([data], workers=1, on_error="ignore")
    return table.errors.get(0)


def test_a_header_claiming_more_than_the_file_holds_is_truncated() -> None:
    data = _claiming(_jpeg((256, 192)), 13_000, 13_000)
    assert len(data) < 8192
    # libjpeg would fill 13000 x 13000 pixels of grey: a "low information" image.
    assert _reason(data) == "truncated image"


@pytest.mark.parametrize(
    "params",
    [{}, {"progressive": True}, {"subsampling": 0}, {"optimize": True}],
    ids=["baseline", "progressive", "4:4:4", "optimized"],
)
def test_a_large_jpeg_cut_to_8_kb_is_truncated(params: dict[str, Any]) -> None:
    data = _jpeg((3000, 2000), **params)
    assert _reason(data) is None
    cut = data[:8192]
    assert _reason(cut) == "truncated image"
    # A cut-off file "repaired" with an end-of-image marker decodes without an error.
    assert _reason(cut + _EOI) == "truncated image"


def test_a_jpeg_missing_restart_markers_is_truncated(tmp_path: Path) -> None:
    data = _jpeg((1024, 768), restart_marker_rows=1)
    assert _reason(data) is None
    cut = data[: len(data) * 6 // 10] + _EOI
    assert _reason(cut) == "truncated image"
    path = tmp_path / "cut.jpg"
    path.write_bytes(cut)
    assert hash_sources([path], workers=1, on_error="ignore").errors == {0: "truncated image"}


@pytest.mark.parametrize(
    ("size", "mode", "params"),
    [
        ((1, 1), "RGB", {}),
        ((9, 17), "L", {}),
        ((100, 37), "RGB", {"progressive": True}),
        ((513, 129), "RGB", {"subsampling": 1, "restart_marker_blocks": 3}),
        ((640, 480), "CMYK", {"progressive": True, "restart_marker_rows": 2}),
        ((1000, 750), "RGB", {"quality": 5, "optimize": True}),
    ],
)
def test_complete_jpegs_are_not_truncated(
    size: tuple[int, int], mode: str, params: dict[str, Any]
) -> None:
    flat = imagegen.encode(Image.new(mode, size), "JPEG", **params)
    photo = imagegen.encode(imagegen.photo_like(5, size).convert(mode), "JPEG", **params)
    assert _reason(flat) is None
    assert _reason(photo) is None


# ---------------------------------------------------------------------- Pillow warnings


def _corrupt_exif_jpeg() -> bytes:
    exif = Image.Exif()
    exif[0x010E] = "x" * 200  # ImageDescription
    block = exif.tobytes()[:20]  # the IFD says 1 entry, the block ends inside it
    return imagegen.encode(imagegen.photo_like(2), "JPEG", exif=block)


def _decode_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, ImageDecodeWarning)]


def test_pillow_warnings_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "holiday photo.jpg"
    path.write_bytes(_corrupt_exif_jpeg())
    good = imagegen.write_images(tmp_path / "good", [imagegen.photo_like(4)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = hash_sources([good[0], path, good[0]], workers=1)
        hash_image(path)
        load_reduced_grey(path)
    assert table.valid.all()  # a broken EXIF block does not stop the image being hashed
    messages = _decode_warnings(caught)
    assert len(messages) == 3  # one per call: hash_sources sums up its batch in one
    assert messages[0].startswith("1 of 3 image(s) were decoded and hashed despite")
    for message in messages:
        assert f"{path}: " in message
        assert "Corrupt EXIF data" in message
    # Pillow's own warning, which names no file, does not get through as well.
    assert all(issubclass(w.category, ImageDecodeWarning) for w in caught)


# ----------------------------------------------------------------------------- workers


def test_workers_beyond_the_usable_cores_are_capped() -> None:
    cores = usable_cpu_count()
    for asked in (cores + 1, 100_000):
        message = rf"^asked for workers={asked} but only {cores} cores are usable; using {cores}"
        with pytest.warns(RuntimeWarning, match=message):
            hash_sources([Image.new("L", (8, 8))], workers=asked)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hash_sources([Image.new("L", (8, 8))], workers=cores)


def _batch(tmp_path: Path, count: int = 300) -> list[Any]:
    """Tiny images (paths, bytes, a PIL image) with failures and a corrupt EXIF block."""
    images = [imagegen.photo_like(seed, (40, 30)) for seed in range(count)]
    sources: list[Any] = list(imagegen.write_images(tmp_path / "batch", images))
    sources[3] = tmp_path / "missing.png"
    sources[10] = imagegen.encode(images[10], "JPEG")
    sources[20] = images[20]
    sources[150] = imagegen.truncated(imagegen.encode(images[150], "JPEG"))
    corrupt = tmp_path / "corrupt exif.jpg"
    corrupt.write_bytes(_corrupt_exif_jpeg())
    sources[200] = corrupt
    return sources


def _assert_same(a: hashing.HashTable, b: hashing.HashTable) -> None:
    assert a.sources == b.sources and a.errors == b.errors
    for name in ("phash", "dhash", "digest", "low_information", "valid"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.orientations is None) == (b.orientations is None)
    if a.orientations is not None and b.orientations is not None:
        for name in ("owner", "phash", "dhash"):
            assert np.array_equal(getattr(a.orientations, name), getattr(b.orientations, name))


@pytest.fixture
def submitted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Record, at each submit to a process pool, how many submitted futures are unfinished."""
    futures: list[Future[Any]] = []
    unfinished: list[int] = []
    original = ProcessPoolExecutor.submit

    def submit(self: ProcessPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = original(self, fn, *args, **kwargs)
        futures.append(future)
        unfinished.append(sum(not f.done() for f in futures))
        return future

    monkeypatch.setattr(ProcessPoolExecutor, "submit", submit)
    yield unfinished


@pytest.mark.slow
@needs_two_cores
def test_pool_keeps_few_chunks_in_flight_and_equals_serial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, submitted: list[int]
) -> None:
    monkeypatch.setattr(hashing._pool, "POOL_CHUNKS_PER_WORKER", 2)
    sources = _batch(tmp_path)
    with pytest.raises(ImageLoadError) as info:
        hash_sources(sources, workers=2, on_error="raise")
    assert info.value.path == str(tmp_path / "missing.png")  # the first, as in a serial run
    # A batch eight times as long, now that the forkserver runs: this process hashes
    # only the few chunks it can while the new workers start, the pool the rest (three
    # times as long was not enough on a loaded machine: workers slow to start left the
    # pool 4 chunks).
    submitted.clear()
    copies = 8
    batch = sources * copies
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pooled = hash_sources(batch, workers=2, on_error="ignore", dihedral=True)
    assert len(submitted) > 2 * 2  # chunks were handed out as others finished
    assert max(submitted) <= 2 * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ImageDecodeWarning)
        serial = hash_sources(batch, workers=1, on_error="ignore", dihedral=True)
    _assert_same(serial, pooled)
    assert set(serial.errors) == {row + 300 * k for k in range(copies) for row in (3, 150)}
    # One warning for the batch, naming each corrupt EXIF block's file wherever it was decoded.
    messages = _decode_warnings(caught)
    assert len(messages) == 1 and messages[0].count(f"{sources[200]}: ") == copies


def _descendants(root: int) -> dict[int, str]:
    """``pid -> start time`` of every process under ``root`` (``root`` included)."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                stat = file.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry)] = (int(fields[1]), fields[19])  # ppid, starttime
    found = {root} if root in parents else set()
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return {pid: parents[pid][1] for pid in found}


def _alive(processes: dict[int, str]) -> list[int]:
    alive = []
    for pid, started in processes.items():
        try:
            with open(f"/proc/{pid}/stat") as file:
                stat = file.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[19] == started and fields[0] != "Z":  # not a reused pid, not a zombie
            alive.append(pid)
    return alive


_RUN_FOREVER = textwrap.dedent(
    """
    import signal, sys
    from leakaudit.hashing import hash_sources

    def interrupt(signum, frame):
        raise KeyboardInterrupt  # what the CLI does on SIGTERM

    if __name__ == "__main__":
        signal.signal(signal.SIGTERM, interrupt)
        paths = sys.argv[1:] * 400
        try:
            hash_sources(paths, workers=2, on_error="ignore")
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
        print("finished", flush=True)
    """
)


@pytest.mark.slow
@needs_proc
@needs_two_cores
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_no_process_outlives_a_killed_or_interrupted_run(tmp_path: Path, how: str) -> None:
    paths = imagegen.write_images(
        tmp_path / "images", [imagegen.photo_like(s, (64, 48)) for s in range(100)]
    )
    script = tmp_path / "run_forever.py"
    script.write_text(_RUN_FOREVER)
    # Files, not pipes: a process left behind would hold a pipe open, and reading it hang.
    out_path = tmp_path / "out.txt"
    with open(out_path, "w") as out, open(tmp_path / "err.txt", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(script), *map(str, paths)], stdout=out, stderr=err, cwd=tmp_path
        )
    tree: dict[int, str] = {}
    try:
        # The main process, the resource tracker, the forkserver and 2 workers.
        deadline = time.monotonic() + 60
        while len(tree) < 5 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            tree.update(_descendants(proc.pid))
        assert len(tree) >= 5, (tree, proc.poll())
        os.kill(proc.pid, getattr(signal, how))
        code = proc.wait(timeout=30)
        if how == "SIGKILL":
            assert code == -signal.SIGKILL
        else:  # SIGTERM raised KeyboardInterrupt: the pool was stopped, not waited for
            assert (code, out_path.read_text().strip()) == (130, "interrupted")
        deadline = time.monotonic() + 15
        while _alive(tree) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive(tree) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _alive(tree):  # never leave a process behind, even when failing
            os.kill(pid, signal.SIGKILL)


def _kill_one_worker(stop: threading.Event, killed: list[int]) -> None:
    """Kill the first pool worker of this process that appears (children of its forkserver)."""
    me = os.getpid()
    while not stop.is_set() and not killed:
        tree = _descendants(me)
        servers = {pid for pid in tree if pid != me and _parent(pid) == me}
        workers = sorted(pid for pid in tree if _parent(pid) in servers)
        if workers:
            os.kill(workers[0], signal.SIGKILL)
            killed.append(workers[0])
        time.sleep(0.01)


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as file:
            stat = file.read()
    except OSError:
        return -1
    return int(stat[stat.rindex(")") + 2 :].split()[1])


@pytest.mark.slow
@needs_proc
@needs_two_cores
def test_a_dead_worker_falls_back_to_hashing_here(tmp_path: Path) -> None:
    sources = _batch(tmp_path, 300) * 8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ImageDecodeWarning)
        serial = hash_sources(sources, workers=1, on_error="ignore")
    stop = threading.Event()
    killed: list[int] = []
    killer = threading.Thread(target=_kill_one_worker, args=(stop, killed))
    killer.start()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pooled = hash_sources(sources, workers=2, on_error="ignore")
    finally:
        stop.set()
        killer.join()
    _assert_same(serial, pooled)
    if not killed:
        pytest.skip("the batch was hashed before a worker could be killed")
    assert any(
        issubclass(w.category, RuntimeWarning) and "worker processes failed" in str(w.message)
        for w in caught
    )


@pytest.mark.slow
@needs_two_cores
@pytest.mark.parametrize("first_orphan", [1, 4, 10_000])
def test_chunks_a_breaking_pool_never_finishes_are_hashed_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_orphan: int
) -> None:
    """Python 3.11's race, played out: a pool that breaks leaves chunks pending for ever.

    On 3.11 the pool marks its pending chunks failed without the lock that submit
    takes, so a chunk submitted as a worker dies may never finish (CI hung here for
    an hour, in test_a_dead_worker_falls_back_to_hashing_here). Here, from the
    ``first_orphan``-th submit on, the pool accepts chunks it will never run, and a
    moment later refuses new ones, as a broken pool does. (10,000: no chunk is
    orphaned, the control.)
    """
    original = ProcessPoolExecutor.submit
    submits = 0
    refusing = threading.Event()

    def submit(self: ProcessPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        nonlocal submits
        if refusing.is_set():
            raise concurrent.futures.process.BrokenProcessPool("a child process terminated")
        submits += 1
        if submits < first_orphan:
            return original(self, fn, *args, **kwargs)
        if submits == first_orphan:
            threading.Timer(0.2, refusing.set).start()
        return Future()  # accepted, and never run

    sources = _batch(tmp_path, 300) * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ImageDecodeWarning)
        serial = hash_sources(sources, workers=1, on_error="ignore")
    monkeypatch.setattr(ProcessPoolExecutor, "submit", submit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pooled = hash_sources(sources, workers=2, on_error="ignore")
    _assert_same(serial, pooled)
    failed = [w for w in caught if "worker processes failed" in str(w.message)]
    assert len(failed) == (submits >= first_orphan)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX worker start")
@pytest.mark.parametrize("form", ["unguarded script", "guarded script", "python -c"])
def test_scripts_with_or_without_a_main_guard_run_quietly(tmp_path: Path, form: str) -> None:
    """Issue 25.1: a top-level script, a guarded one and a one-liner: same result, empty stderr.

    The workers never import the main module again (leakaudit._workers), so the
    script's top level runs once: its marker is printed once, not once per worker.
    """
    images = []
    for seed in range(400):  # enough chunks for the pool to start
        path = tmp_path / f"img{seed}.png"
        imagegen.photo_like(seed, (40, 30)).save(path)
        images.append(str(path))
    body = textwrap.dedent(
        f"""
        import leakaudit
        print("top level ran")
        files = {images!r}
        def audit(workers):
            return leakaudit.audit_splits(
                {{"train": files[:300], "test": files[300:]}}, cache=False, workers=workers
            ).table
        """
    )
    call = (
        "pooled, serial = audit(2), audit(1)\n"
        "assert pooled.drop(columns=['load_seconds'], errors='ignore').equals(\n"
        "    serial.drop(columns=['load_seconds'], errors='ignore'))\n"
        "print('audited', len(pooled))\n"
    )
    if form == "guarded script":
        body += "if __name__ == '__main__':\n" + textwrap.indent(call, "    ")
    else:
        body += call
    if form == "python -c":
        command = [sys.executable, "-c", body]
    else:
        script = tmp_path / "script.py"
        script.write_text(body)
        command = [sys.executable, str(script)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""
    assert done.stdout.count("top level ran") == 1
    assert "audited 400" in done.stdout
