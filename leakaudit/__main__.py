"""``python -m leakaudit`` and the ``leakaudit`` command: signal handlers first, then the CLI.

The handlers (:mod:`leakaudit._interrupts`) go in before :mod:`leakaudit.cli`
imports pandas, numpy and Pillow, so Ctrl-C or SIGTERM at any moment, start-up
included, is one line and exit 130 or 143. A signal during those imports waits
until they are done (a second or so): raised inside one, the interrupt can come
out as another error (numpy turns it into an ImportError with a page of advice).
Only the interpreter's own start-up, before this module runs, is Python's.
"""

from __future__ import annotations

import sys

from leakaudit._interrupts import (
    exit_code,
    finish,
    handle_signals,
    interrupted_line,
    signals_held,
)

__all__ = ["main_entry"]


def main_entry() -> None:
    """Console-script entry point: take the signals, import the CLI, run it, exit."""
    handle_signals()
    try:
        with signals_held():
            from leakaudit.cli import main_entry as run
        run()
    except KeyboardInterrupt as interrupt:
        print(interrupted_line(interrupt), file=sys.stderr)
        finish(exit_code(interrupt))


if __name__ == "__main__":
    main_entry()
