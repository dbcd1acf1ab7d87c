"""How the command line takes SIGINT (Ctrl-C) and SIGTERM: one line, exit 130 or 143, no hang.

Imports nothing heavy, so :mod:`leakaudit.__main__` installs these handlers
before pandas, numpy or Pillow are imported: an interrupt while they load is
the same one line as one later on.

The first signal raises :class:`KeyboardInterrupt` (:class:`Terminated` for
SIGTERM) where the main thread is, so every ``finally`` and ``with`` on the
way out runs: partial outputs are removed, the cache's transaction is rolled
back, the hashing pool's processes are killed (:mod:`leakaudit.hashing`).
Signals after the first are noted and nothing more: a second Ctrl-C (or the
SIGINT a terminal sends the whole process group at once) never cuts that
cleanup in half. Once the command has returned, a signal ends the process at
once with its line and code (the outputs are complete by then); and once an
interrupted command has returned, the interpreter's own exit (joining
threads, atexit) is given :data:`EXIT_GRACE_SECONDS` before the process ends
regardless, so nothing left waiting can hang it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = [
    "EXIT_GRACE_SECONDS",
    "Terminated",
    "exit_code",
    "finish",
    "handle_signals",
    "interrupted_line",
    "restore_signals",
    "signals_held",
]

#: How long the interpreter's exit may take after an interrupt before the process
#: ends regardless (what is left then is threads and atexit hooks, no user data).
EXIT_GRACE_SECONDS = 5.0

_HANDLED = (signal.SIGINT, signal.SIGTERM)
_state: dict[str, Any] = {"received": None, "returned": False, "held": 0, "pending": None}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be, so every cleanup path runs."""


def exit_code(interrupt: BaseException) -> int:
    """130 for an interrupt (SIGINT), 143 for :class:`Terminated` (SIGTERM)."""
    return 128 + int(signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)


def interrupted_line(interrupt: BaseException) -> str:
    """The one line a signal prints."""
    return f"leakaudit: {'terminated' if isinstance(interrupt, Terminated) else 'interrupted'}"


#: Code where an exception raised by the handler would be swallowed ("Exception ignored
#: in ..." on stderr) and the run would go on as if no signal had come: a finalizer, run
#: when its object dies, between any two lines of the main thread. Name and file suffix.
_SWALLOWING = (
    ("__call__", "multiprocessing/util.py"),  # multiprocessing.util.Finalize
    ("__call__", "weakref.py"),  # weakref.finalize
    ("__del__", ""),
)

#: How long a signal that came inside a finalizer waits before it is delivered again.
_REDELIVER_SECONDS = 0.02


def _in_finalizer(frame: Any) -> bool:
    """Whether ``frame`` runs inside a finalizer (:data:`_SWALLOWING`)."""
    while frame is not None:
        code = frame.f_code
        for name, suffix in _SWALLOWING:
            if code.co_name == name and code.co_filename.replace("\\", "/").endswith(suffix):
                return True
        frame = frame.f_back
    return False


def _deliver_again(signum: int) -> None:
    if _state["pending"] != signum:  # a signals_held block ending delivered it already
        return
    _state.update(pending=None, received=None)
    os.kill(os.getpid(), signum)


def _handler(signum: int, frame: Any) -> None:
    if _state["received"] is not None:
        return  # the first signal is being handled: let its cleanup finish
    _state["received"] = signum
    if _state["held"]:  # raised where signals_held ends
        _state["pending"] = signum
        return
    if not _state["returned"] and _in_finalizer(frame):
        # Raised here, the interrupt would be printed as ignored and lost: deliver it
        # again in a moment, once the finalizer has returned.
        _state["pending"] = signum
        timer = threading.Timer(_REDELIVER_SECONDS, _deliver_again, args=(signum,))
        timer.daemon = True
        timer.start()
        return
    interrupt = Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
    if _state["returned"]:  # the command is over and its outputs complete: end now
        _write_line(interrupted_line(interrupt))
        _flush()
        os._exit(exit_code(interrupt))
    raise interrupt


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until this block ends; processes started in it inherit the block.

    For the steps an exception must not cut in half: starting a worker process, a
    call into :mod:`concurrent.futures` that holds its locks (an interrupt inside
    one would leave a lock taken, and the pool's thread waiting on it for ever).
    With this module's handlers the signal is raised as the block ends; with
    Python's own, the block's thread has the signals blocked (a process-wide
    signal may still reach Python through another thread).
    """
    mask = getattr(signal, "pthread_sigmask", None)
    previous = None if mask is None else mask(signal.SIG_BLOCK, _HANDLED)
    _state["held"] += 1
    try:
        yield
    finally:
        _state["held"] -= 1
        if mask is not None and previous is not None:
            mask(signal.SIG_SETMASK, previous)
        pending = _state["pending"]
        if pending is not None and not _state["held"]:
            # Deliver it again, now that it may raise (in the main thread, whichever
            # thread this block ran in).
            _state.update(pending=None, received=None)
            os.kill(os.getpid(), pending)


def handle_signals() -> dict[int, Any] | None:
    """Take SIGINT and SIGTERM as described above; return the handlers they had.

    A signal the process inherited as ignored (``nohup``, a background job) stays
    ignored. Returns None (and changes nothing) outside the main thread, where
    Python cannot set handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    _state.update(received=None, returned=False, pending=None)
    previous: dict[int, Any] = {}
    for signum in _HANDLED:
        current = signal.getsignal(signum)
        previous[signum] = current
        if current is not signal.SIG_IGN:
            signal.signal(signum, _handler)
    return previous


def restore_signals(previous: dict[int, Any] | None) -> None:
    """Put back the handlers :func:`handle_signals` replaced."""
    if previous is None or threading.current_thread() is not threading.main_thread():
        return
    for signum, handler in previous.items():
        signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def finish(code: int) -> None:
    """End the command line's process with ``code``, bounded once a signal came.

    From here on a first signal ends the process at once (with its line); after
    an interrupt, the interpreter's exit gets :data:`EXIT_GRACE_SECONDS`.
    """
    _state["returned"] = True
    _flush()
    if _state["received"] is not None:
        timer = threading.Timer(EXIT_GRACE_SECONDS, os._exit, args=(code,))
        timer.daemon = True
        timer.start()
    sys.exit(code)


def _write_line(line: str) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.write(line + "\n")


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
