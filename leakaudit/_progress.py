"""A minimal progress bar on stderr (no dependencies)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress", "progress_enabled"]

# Batches shorter than this finish too fast for a bar to help.
AUTO_MIN_ITEMS = 500


def progress_enabled(progress: bool | None, total: int, stream: TextIO | None = None) -> bool:
    """Resolve the ``progress`` argument: None means on for long batches on a terminal."""
    if progress is not None:
        if not isinstance(progress, bool):
            raise TypeError(f"progress must be a bool or None; got {progress!r}.")
        return progress
    stream = sys.stderr if stream is None else stream
    try:
        is_tty = stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced stream
        is_tty = False
    return is_tty and total >= AUTO_MIN_ITEMS


class Progress:
    """Count finished items and redraw one status line, at most 10 times a second.

    Parameters
    ----------
    total : int
        The number of items expected.
    label : str
        Text shown before the counts.
    enabled : bool
        When False every method is a no-op.
    stream : file-like, optional
        Where to draw; ``sys.stderr`` by default.
    """

    def __init__(
        self, total: int, *, label: str, enabled: bool, stream: TextIO | None = None
    ) -> None:
        self.total = total
        self.label = label
        self.enabled = enabled
        self.stream = sys.stderr if stream is None else stream
        self.done = 0
        self._start = time.perf_counter()
        self._last_draw = 0.0
        if enabled:
            self._draw()

    def update(self, count: int = 1) -> None:
        """Record ``count`` more finished items."""
        if not self.enabled:
            return
        self.done += count
        now = time.perf_counter()
        if now - self._last_draw >= 0.1 or self.done >= self.total:
            self._draw(now)

    def close(self) -> None:
        """Draw the final state and end the line."""
        if not self.enabled:
            return
        self._draw()
        self.stream.write("\n")
        self.stream.flush()
        self.enabled = False

    def _draw(self, now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        self._last_draw = now
        elapsed = now - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        percent = 100.0 * self.done / self.total if self.total else 100.0
        width = 30
        filled = int(width * percent / 100.0)
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(
            f"\r{self.label} [{bar}] {self.done}/{self.total} ({percent:5.1f}%) {rate:,.0f}/s"
        )
        self.stream.flush()
