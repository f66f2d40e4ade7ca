"""A progress bar on stderr for anything that takes seconds (shown on terminals only)."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """``with Progress(total, "benchmark") as bar: bar.update(n)``; silent when not a TTY.

    With ``after`` seconds, nothing is drawn until that long has passed since the bar was
    made: short runs stay quiet, long ones show they are alive.
    """

    def __init__(
        self,
        total: float,
        label: str,
        enabled: bool | None = None,
        stream: TextIO | None = None,
        after: float = 0.0,
    ) -> None:
        self.total = max(total, 1e-9)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.done = 0.0
        self._last = 0.0
        self._show_from = time.monotonic() + after
        self._drawn = False

    def update(self, done: float) -> None:
        """Set progress to ``done`` (of ``total``) and redraw at most 10 times a second."""
        self.done = done
        now = time.monotonic()
        if now < self._show_from:
            return
        if self.enabled and (now - self._last > 0.1 or done >= self.total):
            self._last = now
            self._drawn = True
            frac = min(done / self.total, 1.0)
            filled = int(frac * 30)
            bar = "#" * filled + "-" * (30 - filled)
            self.stream.write(f"\r{self.label} [{bar}] {frac * 100:5.1f}%")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._drawn:
            self.stream.write("\r" + " " * (len(self.label) + 42) + "\r")
            self.stream.flush()
