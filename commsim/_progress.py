"""A small progress bar on stderr for long sweeps (timing runs, size sweeps).

Shown when the stream is a terminal or when asked (``enabled=True``); redrawn at most every
0.1 s on one line (``\\r``) and ended with a newline by :meth:`Progress.close`; it goes to stderr,
so it never mixes with tables or JSON printed on stdout.

Examples:
    >>> import io
    >>> out = io.StringIO()
    >>> with Progress(4, "sizes", stream=out, enabled=True) as bar:
    ...     bar.update(note="1KiB")
    ...     bar.update(3)
    >>> out.getvalue().splitlines()[-1].startswith("sizes [")
    True
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["Progress"]


class Progress:
    """Progress of ``total`` units of work, drawn as ``LABEL [#####.....] done/total NOTE``.

    Args:
        total: units of work (e.g. timed runs).
        label: text before the bar.
        stream: where to draw (default ``sys.stderr``).
        enabled: ``True`` always draw, ``False`` never, ``None`` only on a terminal.
        width: characters of the bar itself.
    """

    def __init__(
        self,
        total: int,
        label: str = "",
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        width: int = 30,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.total, self.label, self.width = max(int(total), 1), label, width
        self.done, self.note = 0, ""
        self._last = 0.0
        self._drawn = 0  # length of the line on screen

    def update(self, n: int = 1, note: str | None = None) -> None:
        """Add ``n`` finished units; ``note`` (e.g. the current size) replaces the old one."""
        self.done = min(self.done + n, self.total)
        if note is not None:
            self.note = note
        now = time.monotonic()
        if self.enabled and (now - self._last >= 0.1 or self.done == self.total):
            self._last = now
            self._draw()

    def _draw(self) -> None:
        fill = self.width * self.done // self.total
        bar = "#" * fill + "." * (self.width - fill)
        text = f"{self.label} [{bar}] {self.done}/{self.total} {self.note}".rstrip()
        pad = max(self._drawn - len(text), 0)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._drawn = len(text)

    def close(self) -> None:
        """Finish the line (keeps the final bar visible)."""
        if self.enabled and self._drawn:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
