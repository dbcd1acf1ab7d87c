"""Hashing many sources: the process pool, its worker signals and its collector of results."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit._interrupts import signals_held
from leakaudit._progress import Progress, progress_enabled
from leakaudit._text import printable
from leakaudit._validation import (
    check_bool,
    check_choice,
    check_workers,
    describe,
    usable_cpu_count,
)
from leakaudit._workers import worker_context
from leakaudit.errors import ImageLoadError
from leakaudit.hashing._batch import (
    _BATCH_ITEMS,
    _ChunkResult,
    _entry_array,
    _hash_chunk,
    _hash_items,
    _hash_pil,
    _ItemResult,
    _orientation_hashes,
    _wants_crop_entries,
)
from leakaudit.hashing._errors import (
    ON_ERROR_CHOICES,
    _summarise_notes,
    apply_on_error,
)
from leakaudit.hashing._records import (
    HashTable,
)
from leakaudit.loading import (
    DecodeOptions,
    ImageDecodeWarning,
    ImageSource,
    resolve_decode,
)

if TYPE_CHECKING:
    from multiprocessing.connection import Connection


__all__ = [
    "hash_sources",
    "source_name",
]


# Below this many items a process pool costs more to start than it saves.
PARALLEL_MIN_ITEMS = 200
# Chunks handed to the pool and not yet finished, per worker: enough to keep every
# worker busy while results are collected in order, without queueing the whole
# batch (each queued chunk holds its sources and a future until it runs).
POOL_CHUNKS_PER_WORKER = 3
# How often a wait for the pool's next result stops to ask whether the pool broke
# (see _hash_in_pool's from_pool). Only a wait with no result for this long asks.
_BROKEN_POLL_SECONDS = 0.5
# How long stopping an interrupted pool waits for each step (workers to end on
# SIGTERM, then on SIGKILL, the pool's thread to end); each takes milliseconds.
_STOP_SECONDS = 2.0


class _Collector:
    """The columns of a HashTable being filled in; raises the first failure if asked."""

    def __init__(self, names: list[str], raise_first: bool) -> None:
        n = len(names)
        self.names = names
        self.raise_first = raise_first
        self.values = np.zeros((n, 3), dtype=np.uint64)  # phash, dhash, digest
        self.low_information = np.zeros(n, dtype=np.bool_)
        self.valid = np.zeros(n, dtype=np.bool_)
        self.done = np.zeros(n, dtype=np.bool_)
        self.errors: dict[int, str] = {}
        self.notes: dict[int, str] = {}  # row -> ImageDecodeWarning text
        self.entries: list[NDArray[np.uint64]] = []

    def item(self, index: int, result: _ItemResult) -> None:
        self.done[index] = True
        if isinstance(result, str):
            if self.raise_first:
                raise ImageLoadError(self.names[index], result)
            self.errors[index] = result
            return
        phash, dhash, low_information, digest, entries, note = result
        if entries:
            self.entries.append(_entry_array([(index, *entry) for entry in entries]))
        if note:
            self.notes[index] = note
        self.values[index] = (phash, dhash, digest)
        self.low_information[index] = low_information
        self.valid[index] = True

    def chunk(self, indices: list[int], result: _ChunkResult) -> None:
        values, low_information, errors, entries, notes = result
        if errors and self.raise_first:
            first = min(errors)
            raise ImageLoadError(self.names[indices[first]], errors[first])
        rows = np.asarray(indices, dtype=np.intp)
        self.values[rows] = values
        self.low_information[rows] = low_information
        self.valid[rows] = True
        self.done[rows] = True
        if len(entries):
            entries = entries.copy()
            entries[:, 0] = rows[entries[:, 0].astype(np.intp)]
            self.entries.append(entries)
        for k, reason in sorted(errors.items()):
            self.valid[indices[k]] = False
            self.errors[indices[k]] = reason
        for k, note in notes.items():
            self.notes[indices[k]] = note

    def table(self, dihedral: bool = False) -> HashTable:
        for i in np.flatnonzero(~self.done).tolist():
            self.errors[i] = "not processed"
        orientations = None
        if dihedral:
            entries = np.concatenate([_entry_array([]), *self.entries])
            # Rows in order, each row's canonical orientation first (a stable sort
            # keeps the order the entries were made in).
            entries = entries[np.argsort(entries[:, 0], kind="stable")]
            orientations = _orientation_hashes(entries)
        return HashTable(
            sources=list(self.names),
            phash=self.values[:, 0].copy(),
            dhash=self.values[:, 1].copy(),
            digest=self.values[:, 2].copy(),
            low_information=self.low_information,
            valid=self.valid,
            errors=dict(sorted(self.errors.items())),
            orientations=orientations,
        )


def source_name(item: object, index: int) -> str:
    """What the tables call source ``index``: its path, or ``<bytes #i>`` / ``<PIL image #i>``.

    The one naming of in-memory images, shared by hashing, the cache and the
    DataFrame API.

    Examples
    --------
    >>> source_name("train/a.jpg", 0), source_name(b"...", 3)
    ('train/a.jpg', '<bytes #3>')
    """
    if isinstance(item, (str, os.PathLike)):
        return str(os.fspath(item))
    if isinstance(item, Image.Image):
        return f"<PIL image #{index}>"
    return f"<bytes #{index}>"


def _normalise_sources(
    sources: Sequence[ImageSource],
) -> tuple[list[str | bytes | Image.Image], list[str]]:
    if isinstance(sources, (str, bytes, bytearray, os.PathLike, Image.Image)):
        raise TypeError(
            "sources must be a sequence of paths, bytes or PIL images; "
            f"got a single {type(sources).__name__}. Wrap it in a list."
        )
    items: list[str | bytes | Image.Image] = []
    names: list[str] = []
    for i, source in enumerate(sources):
        if isinstance(source, str):
            items.append(source)
            names.append(source)
        elif isinstance(source, os.PathLike):
            path = os.fspath(source)
            if not isinstance(path, str):
                raise TypeError(f"sources[{i}] must be a str path; got {describe(source)}.")
            items.append(path)
            names.append(path)
        elif isinstance(source, (bytes, bytearray, memoryview)):
            items.append(bytes(source))
            names.append(source_name(source, i))
        elif isinstance(source, Image.Image):
            items.append(source)
            names.append(source_name(source, i))
        else:
            raise TypeError(
                f"sources[{i}] must be a path, bytes or a PIL image; got {type(source).__name__}."
            )
    return items, names


def _pool_context() -> Any:
    context = worker_context()  # workers that never import __main__ (see leakaudit._workers)
    if context.get_start_method() == "forkserver":
        # Workers fork from a server that has already imported numpy/Pillow/leakaudit,
        # instead of each importing them again. Only takes effect if the server
        # is not running yet.
        context.set_forkserver_preload(["leakaudit.hashing"])
    return context


def _chunks(indices: list[int], size: int) -> list[list[int]]:
    return [indices[i : i + size] for i in range(0, len(indices), size)]


def hash_sources(
    sources: Sequence[ImageSource],
    *,
    decode: DecodeOptions | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    on_error: str = "warn",
    dihedral: bool = False,
    crop_entries: bool = False,
) -> HashTable:
    """Hash many images, in parallel, recording (not raising) every failure.

    Parameters
    ----------
    sources : sequence of str, os.PathLike, bytes or PIL.Image.Image
        Paths, encoded image bytes, or opened images, in any mix.
    decode : DecodeOptions, optional
        Decoding settings shared by all images.
    workers : int or None, default None
        Processes to use; None means every usable core, and more than that are
        not started (a ``RuntimeWarning`` says so). Batches under 200 items,
        and ``workers=1``, run in this process. PIL images are always hashed in
        this process (no pickling of pixel buffers). The pool starts its workers
        with ``forkserver`` on Linux (``spawn`` elsewhere) without importing the
        main module again, so a script needs no ``if __name__ == "__main__":``
        guard to call this (see :mod:`leakaudit._workers`). The workers exit as
        soon as this process is gone (killed included) and at once on
        ``KeyboardInterrupt``; only a few chunks per worker are queued at a time.
    progress : bool or None, default None
        Draw a progress bar on stderr. None: only when stderr is a terminal and
        there are at least 500 items.
    on_error : {"warn", "raise", "ignore"}, default "warn"
        What to do about unreadable images besides recording them in
        ``HashTable.errors``: emit one :class:`UnreadableImageWarning` naming them,
        raise the first :class:`~leakaudit.errors.ImageLoadError`, or stay silent.
    dihedral : bool, default False
        Also hash each image in its canonical orientation
        (``HashTable.orientations``), for matching flipped and rotated copies.
        From the same decode; costs one more pair of thumbnails per image.
    crop_entries : bool, default False
        With ``dihedral``, also index each image's hashes as it is, of its
        content inside a uniform background, of a few crops (95% of each side
        at 9 positions, 85% at 16) and of small rotations (+-3 and +-6 degrees,
        centre crops), each entry with its :class:`EntryKind`: the candidate
        net that reaches padded, cropped and slightly rotated copies, which no
        whole-image hash does. These entries only *propose* candidate pairs;
        :mod:`leakaudit.verify` decides each one (the audits ask for them when
        they verify with dihedral matching). Well under a decode per image:
        fixed matrices on the 32 x 32 pHash thumbnail, not Pillow's exact
        resampling. (Formerly ``DecodeOptions.crop_entries``, deprecated.)

    Returns
    -------
    HashTable
        One row per source, in input order; unreadable rows have ``valid=False``.

    Warns
    -----
    ImageDecodeWarning
        One, naming (in input order) the images that were hashed although
        Pillow warned about them (corrupt EXIF data, ...), each with the warning.
    UnreadableImageWarning
        With ``on_error="warn"``, one naming the images that could not be read.
    RuntimeWarning
        ``workers`` is more than the usable cores; or the worker processes
        failed and the rest was hashed in this process.

    Examples
    --------
    >>> import io
    >>> from PIL import Image
    >>> buffer = io.BytesIO()
    >>> Image.effect_noise((96, 96), 40).save(buffer, "PNG")
    >>> table = hash_sources([buffer.getvalue(), b"not an image"], on_error="ignore")
    >>> table.valid.tolist(), table.errors
    ([True, False], {1: 'not a recognised image format'})
    """
    check_choice("on_error", on_error, ON_ERROR_CHOICES)
    options = resolve_decode(decode)
    check_bool("dihedral", dihedral)
    check_bool("crop_entries", crop_entries)
    crop = _wants_crop_entries(options, crop_entries)
    n_workers = check_workers(workers)
    usable = usable_cpu_count()
    if n_workers > usable:
        # More processes than cores only adds memory (a worker each) and switching.
        warnings.warn(
            f"asked for workers={n_workers} but only {usable} cores are usable; "
            f"using {usable} worker processes.",
            RuntimeWarning,
            stacklevel=2,
        )
        n_workers = usable
    items, names = _normalise_sources(sources)
    n = len(items)
    collector = _Collector(names, raise_first=on_error == "raise")
    bar = Progress(n, label="hashing", enabled=progress_enabled(progress, n))

    try:
        encoded = [i for i, item in enumerate(items) if not isinstance(item, Image.Image)]
        in_memory = [i for i, item in enumerate(items) if isinstance(item, Image.Image)]
        if n_workers > 1 and len(encoded) >= PARALLEL_MIN_ITEMS:
            _hash_in_pool(
                items,
                names,
                encoded,
                in_memory,
                options,
                n_workers,
                collector,
                bar,
                dihedral,
                crop,
            )
        else:
            for start in range(0, n, _BATCH_ITEMS):
                chunk = list(range(start, min(n, start + _BATCH_ITEMS)))
                result = _hash_items(
                    items[start : chunk[-1] + 1],
                    names[start : chunk[-1] + 1],
                    options,
                    dihedral,
                    crop,
                )
                collector.chunk(chunk, result)
                bar.update(len(chunk))
    finally:
        bar.close()

    table = collector.table(dihedral)
    if collector.notes:
        warnings.warn(_summarise_notes(collector.notes, n), ImageDecodeWarning, stacklevel=2)
    if on_error == "warn":  # "raise" has already raised the first failure, in input order
        apply_on_error(table.errors, on_error, total=n, name_of=table.sources.__getitem__)
    return table


def _hash_in_pool(
    items: list[str | bytes | Image.Image],
    names: list[str],
    encoded: list[int],
    in_memory: list[int],
    options: DecodeOptions,
    n_workers: int,
    collector: _Collector,
    bar: Progress,
    dihedral: bool = False,
    crop_entries: bool = False,
) -> None:
    """Hash the encoded items in a process pool, the in-memory ones here, in input order.

    One function on purpose: the futures in flight, the chunks hashed here while
    the pool starts, the PIL results waiting for their turn and the shutdown on
    an interrupt are one loop's shared state, and each step needs all of it.
    """
    # Small chunks balance the load (the last one finishes alone) and keep the bar
    # moving; a chunk of 32 images is tens of milliseconds of work, far above the
    # per-task IPC cost (a list of paths out, three small arrays back).
    size = max(4, min(32, len(encoded) // (n_workers * 16) or 1))
    chunks = _chunks(encoded, size)
    in_flight = max(1, POOL_CHUNKS_PER_WORKER * n_workers)
    futures: dict[int, Future[_ChunkResult]] = {}  # submitted, not collected yet
    running: set[Future[_ChunkResult]] = set()  # submitted, not finished
    local: dict[int, _ChunkResult] = {}
    pil_results: dict[int, _ItemResult] = {}
    broken: BaseException | None = None
    submitted = 0  # chunks [0, submitted) went to the pool
    pool_end = len(chunks)  # chunks [pool_end, len) are hashed here

    def encoded_items(chunk: list[int]) -> list[str | bytes]:
        return [cast("str | bytes", items[i]) for i in chunk]

    def hash_here(chunk: list[int]) -> _ChunkResult:
        return _hash_chunk(
            encoded_items(chunk), [names[i] for i in chunk], options, dihedral, crop_entries
        )

    context = _pool_context()
    # Every worker holds the reading end of this pipe and exits when it reads EOF:
    # when this process closes the writing end, or dies (SIGKILL included).
    alive_reader, alive_writer = context.Pipe(duplex=False)
    try:
        with signals_held():
            pool = ProcessPoolExecutor(
                max_workers=n_workers,
                mp_context=context,
                initializer=_init_worker,
                initargs=(alive_reader,),
            )
        # Every call into the pool that takes its locks (submit, wait, a future's state)
        # runs with signals held (leakaudit._interrupts.signals_held): an interrupt
        # inside one would leave a lock taken and the pool's thread waiting on it for ever.

        def top_up() -> None:
            nonlocal submitted, broken
            with signals_held():
                running.difference_update([f for f in running if f.done()])
            while broken is None and submitted < pool_end and len(running) < in_flight:
                chunk = chunks[submitted]
                try:
                    with signals_held():
                        future = pool.submit(
                            _hash_chunk,
                            encoded_items(chunk),
                            [names[i] for i in chunk],
                            options,
                            dihedral,
                            crop_entries,
                        )
                except BrokenProcessPool as exc:
                    broken = exc
                    return
                futures[submitted] = future
                running.add(future)
                submitted += 1

        def from_pool(future: Future[_ChunkResult]) -> _ChunkResult | None:
            """The chunk's result from the pool, or None if the pool broke first.

            Never waits on a broken pool: on Python 3.11 a chunk submitted while
            the pool is breaking (a worker killed, by the OOM killer say) can be
            left pending for ever, as the pool marks its pending chunks failed
            without holding the lock that submit takes (fixed in 3.12). So the
            wait wakes up now and then and asks the pool whether it broke (and
            an interrupt waits at most that long).
            """
            nonlocal broken
            while broken is None:
                with signals_held():
                    if future.done():
                        break
                    finished, _ = wait(
                        running, timeout=_BROKEN_POLL_SECONDS, return_when=FIRST_COMPLETED
                    )
                top_up()  # keep the workers fed meanwhile (this also sees a broken pool)
                if not finished and broken is None:
                    with signals_held():
                        broken = _broken_pool(pool)
            with signals_held():
                if not future.done():
                    return None
                try:
                    return future.result()
                except BrokenProcessPool as exc:  # a worker died or could not start
                    broken = broken or exc
                    return None

        worker_results = 0
        try:
            top_up()
            # A fresh pool needs a few hundred milliseconds (a new interpreter
            # importing numpy, Pillow, leakaudit) before its first result. Work
            # here meanwhile: in-memory images first (never pickled), then chunks
            # taken from the end, which the pool has not been given yet. (Never
            # by cancelling a queued one: on Python 3.11, should a worker then
            # die, the pool's manager thread fails on the cancelled future and
            # leaves the other workers running.)
            for i in in_memory:
                image = items[i]
                assert isinstance(image, Image.Image)
                pil_results[i] = _hash_pil(image, names[i], options, dihedral, crop_entries)
                bar.update()
            first = futures.get(0)
            while pool_end > max(1, submitted) and first is not None and not _done(first):
                pool_end -= 1
                local[pool_end] = hash_here(chunks[pool_end])
                bar.update(len(chunks[pool_end]))
            # Stored in input order, so on_error="raise" reports the same (first)
            # failure as a serial run.
            pending_pil = sorted(pil_results, reverse=True)

            def store_pil_before(limit: int) -> None:
                while pending_pil and pending_pil[-1] < limit:
                    index = pending_pil.pop()
                    collector.item(index, pil_results[index])

            for number, chunk in enumerate(chunks):
                if number in local:
                    result = local.pop(number)
                else:
                    top_up()
                    future = futures.pop(number, None)
                    pooled = None if future is None else from_pool(future)
                    if pooled is None:  # the pool broke before it hashed this chunk
                        result = hash_here(chunk)
                    else:
                        result = pooled
                        worker_results += 1
                    bar.update(len(chunk))
                errors = result[2]
                store_pil_before(chunk[min(errors)] if errors else chunk[0])
                collector.chunk(chunk, result)
            store_pil_before(len(items))
            pool.shutdown(wait=True)  # every chunk is in: the workers exit at once
        except BaseException:
            # KeyboardInterrupt (or a first failure to raise): stop the workers now,
            # rather than after the chunks they are on, and never wait on the pool.
            _stop_pool(pool, alive_writer)
            raise
    finally:
        alive_writer.close()
        alive_reader.close()
    if broken is not None:
        warnings.warn(
            f"the worker processes failed ({broken}); the images they had not hashed "
            "were hashed in this process instead." + _unguarded_main_hint(worker_results),
            RuntimeWarning,
            stacklevel=3,
        )


def _done(future: Future[Any]) -> bool:
    with signals_held():  # Future.done takes the future's lock
        return future.done()


def _stop_pool(pool: ProcessPoolExecutor, alive_writer: Connection) -> None:
    """Stop the pool's workers now and let go of the pool, each wait bounded.

    Never ``pool.shutdown(wait=True)``: it waits for the pool's thread, which waits
    for the workers, and a worker killed while it sends a result leaves part of a
    message in the result pipe that the thread then waits to complete, for ever
    (the interpreter's exit joins that thread too). So: the workers' watchdogs
    see ``alive`` close, each worker gets SIGTERM then SIGKILL, and once none is
    left this process closes its own writing end of the result pipe (the only one
    left), so the thread reads EOF, takes the pool for broken and ends.
    """
    alive_writer.close()  # each worker's watchdog ends it (see _init_worker)
    processes = list((getattr(pool, "_processes", None) or {}).values())
    results = getattr(pool, "_result_queue", None)
    thread = getattr(pool, "_executor_manager_thread", None)
    with contextlib.suppress(Exception):
        pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.terminate()
    deadline = time.monotonic() + _STOP_SECONDS
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        with contextlib.suppress(Exception):
            if process.is_alive():
                process.kill()
                process.join(_STOP_SECONDS)
    writer = getattr(results, "_writer", None)
    if writer is not None:
        with contextlib.suppress(Exception):
            writer.close()
    if thread is not None:
        with contextlib.suppress(Exception):
            thread.join(_STOP_SECONDS)


def _broken_pool(pool: ProcessPoolExecutor) -> BrokenProcessPool | None:
    """The pool's breakage, if it broke; asked through ``submit``, which refuses a broken pool.

    If the pool is fine, the no-op task this leaves is done by the next free worker.
    """
    try:
        pool.submit(int)
    except BrokenProcessPool as exc:
        return exc
    return None


def _unguarded_main_hint(worker_results: int) -> str:
    """Why workers that never returned a result most likely failed, when a script runs.

    Each worker imports the main script again (Python's ``forkserver`` and
    ``spawn``): a script that calls leakaudit at its top level, not under
    ``if __name__ == "__main__":``, makes every worker start the audit again,
    which Python refuses.
    """
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if worker_results or not main_file:
        return ""
    return (
        f" No worker returned a result: if {printable(os.path.basename(main_file))} calls "
        "leakaudit with workers > 1 at its top level, move the call under "
        "'if __name__ == \"__main__\":' (every worker process imports the script again)."
    )


def _init_worker(alive: Connection) -> None:
    """Set up a pool worker: leave Ctrl-C to the main process, and die with it.

    The main process stops the pool on KeyboardInterrupt; a worker that took
    the terminal's SIGINT itself would print a traceback, or take a chunk's
    exception for the result. A worker's parent is the forkserver, not the
    main process, so the parent-death signal (Linux) only covers the
    forkserver dying; the thread reading ``alive`` covers the main process: it
    holds the only writing end, so the read ends (EOF) when it closes it or
    dies, however it dies. Once the workers are gone the forkserver and the
    resource tracker exit by themselves (each waits for EOF on a pipe that
    only the main process and the workers hold open).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # started with both held (leakaudit._workers)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    if sys.platform.startswith("linux"):
        _exit_with_parent()
    threading.Thread(
        target=_exit_when_closed, args=(alive,), name="leakaudit-watchdog", daemon=True
    ).start()


def _exit_with_parent() -> None:
    """Ask Linux to send this process SIGTERM when its parent exits (PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl: the watchdog thread still works
        pass


def _exit_when_closed(alive: Connection) -> None:
    """Block until the main process closes its end of ``alive`` (or dies), then exit."""
    with contextlib.suppress(EOFError, OSError):
        alive.recv_bytes()  # nothing is ever sent: this returns only at EOF
    # From a thread only os._exit ends the process, and a worker has nothing to clean up.
    os._exit(1)
