"""The multiprocessing context of leakaudit's worker pools: workers that skip ``__main__``.

Python starts a ``forkserver`` or ``spawn`` worker by importing the main module
again (as ``__mp_main__``), so that functions defined there can be unpickled. A
script that calls leakaudit at its top level, outside
``if __name__ == "__main__":``, then runs the call again in every worker, which
Python refuses with a traceback per worker; a guarded script still pays for the
re-import in every worker (often ``import torch``: seconds). leakaudit's workers
run only leakaudit's own functions and need nothing from the main module, so
:func:`worker_context` gives a context whose workers are started without it:
scripts with or without the guard, notebooks and ``python -c`` all work quietly.

How: the preparation data a new worker receives (:func:`multiprocessing.spawn.
get_preparation_data`) is built without its ``init_main_from_*`` entries, for the
moment this context starts a process. Where this Python's multiprocessing lacks
the pieces (``popen_forkserver`` / ``popen_spawn_posix``), the standard context is
returned and the guard is needed again, as with any multiprocessing code.

A launch is also shielded from SIGINT and SIGTERM (:func:`leakaudit._interrupts.signals_held`): a
signal that arrives while a worker is being started waits until the start is
complete, so the pool's owner always knows every process it has to stop; and
the processes started meanwhile (the forkserver, the workers it forks) begin
life with both signals blocked: a Ctrl-C sent to the whole process group never
prints a traceback from a forkserver importing its modules or a worker not yet
set up. The pool's worker initializer ignores SIGINT and unblocks SIGTERM
(``leakaudit.hashing``), so a worker still ends on SIGTERM; the forkserver ends
when the main process does.

Threads were measured as the alternative and not taken: hashing collects each
image's decoder warnings with :func:`warnings.catch_warnings`, which before
Python 3.14 swaps process-wide state and is not safe from several threads.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
import threading
from collections.abc import Iterator
from typing import Any

from leakaudit._interrupts import signals_held

__all__ = ["worker_context"]

_LAUNCH_LOCK = threading.Lock()
_MAIN_KEYS = ("init_main_from_path", "init_main_from_name")


def worker_context() -> Any:
    """A multiprocessing context for leakaudit's pools; its workers never import ``__main__``.

    ``forkserver`` on Linux, ``spawn`` elsewhere.

    Examples
    --------
    >>> worker_context().get_start_method() in ("forkserver", "spawn")
    True
    """
    method = "forkserver" if sys.platform.startswith("linux") else "spawn"
    mainless = _MAINLESS.get(method)
    return mainless if mainless is not None else multiprocessing.get_context(method)


@contextlib.contextmanager
def _preparation_without_main() -> Iterator[None]:
    """While a worker is launched, its preparation data names no main module."""
    from multiprocessing import spawn

    original = spawn.get_preparation_data

    def without_main(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        for key in _MAIN_KEYS:
            data.pop(key, None)
        return data

    with _LAUNCH_LOCK:
        spawn.get_preparation_data = without_main
        try:
            yield
        finally:
            spawn.get_preparation_data = original


def _mainless_contexts() -> dict[str, Any]:
    """The mainless contexts this Python's multiprocessing supports, by start method."""
    if sys.platform == "win32" or not _HAVE_PIECES:
        return {}
    contexts: dict[str, Any] = {"spawn": _SpawnContext()}
    if sys.platform.startswith("linux"):
        contexts["forkserver"] = _ForkServerContext()
    return contexts


try:  # the pieces of multiprocessing this relies on (POSIX only)
    from multiprocessing import context as _mp_context
    from multiprocessing import popen_forkserver as _popen_forkserver
    from multiprocessing import popen_spawn_posix as _popen_spawn_posix
    from multiprocessing import spawn as _spawn

    _HAVE_PIECES = callable(getattr(_spawn, "get_preparation_data", None))
except ImportError:
    _HAVE_PIECES = False

if _HAVE_PIECES:
    # At module level: a worker unpickles its process object by this module's name.

    class _ForkServerProcess(_mp_context.ForkServerProcess):
        @staticmethod
        def _Popen(process_obj: Any) -> Any:
            with signals_held(), _preparation_without_main():
                return _popen_forkserver.Popen(process_obj)

    class _SpawnProcess(_mp_context.SpawnProcess):
        @staticmethod
        def _Popen(process_obj: Any) -> Any:
            with signals_held(), _preparation_without_main():
                return _popen_spawn_posix.Popen(process_obj)

    class _ForkServerContext(_mp_context.ForkServerContext):
        Process = _ForkServerProcess

    class _SpawnContext(_mp_context.SpawnContext):
        Process = _SpawnProcess


_MAINLESS = _mainless_contexts()
