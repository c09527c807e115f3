"""A small progress bar on stderr for long work (timing runs, verifying and predicting schedules).

One bar for the whole package: :mod:`commsim.bench` advances it by timed runs, the command line by
the steps its consumers pull from schedules (:meth:`Progress.track`). It goes to stderr, so it
never mixes with tables or JSON printed on stdout.

When it shows (``enabled``): ``True`` from the start, ``False`` never, ``None`` (auto) once the
work has lasted :data:`TERMINAL_DELAY` seconds on a terminal or :data:`LOG_DELAY` seconds
elsewhere, so short runs stay quiet. How: on a terminal one line redrawn in place (``\\r``, at most
every 0.1 s) and erased by :meth:`Progress.close`; elsewhere (a log file, a pipe) one line per
tenth of the work.

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

import dataclasses
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from commsim._ir import Schedule, Step

__all__ = ["LOG_DELAY", "TERMINAL_DELAY", "Progress"]

#: seconds of work before an automatic bar appears on a terminal
TERMINAL_DELAY = 0.5
#: seconds of work before an automatic bar writes its first line elsewhere (a log file)
LOG_DELAY = 10.0
_REDRAW_INTERVAL = 0.1  # seconds between redraws on a terminal


class Progress:
    """Progress of ``total`` units of work: ``LABEL [#####.....] done/total 50% done, 1.2s NOTE``.

    Args:
        total: units of work (e.g. timed runs).
        label: text before the bar.
        stream: where to draw (default ``sys.stderr``).
        enabled: ``True`` always draw, ``False`` never, ``None`` after a delay (see the module).
        width: characters of the bar itself.
        count: show ``done/total`` (off when the units mean nothing to the reader).
    """

    def __init__(
        self,
        total: int,
        label: str = "",
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        width: int = 30,
        count: bool = True,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self.enabled = enabled is not False
        self.delay = 0.0 if enabled else (TERMINAL_DELAY if self.tty else LOG_DELAY)
        self.total, self.label, self.width, self.count = max(int(total), 1), label, width, count
        self.done, self.note = 0, ""
        self._start = time.monotonic()
        self._last = float("-inf")  # last redraw on a terminal
        self._tenth = -1  # last tenth written elsewhere
        self._drawn = 0  # length of the line on the terminal

    def update(self, n: int = 1, note: str | None = None) -> None:
        """Add ``n`` finished units; ``note`` (e.g. the current size) replaces the old one."""
        self.done = min(self.done + n, self.total)
        if note is not None:
            self.note = note
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._start < self.delay:
            return
        if self.tty:
            if now - self._last >= _REDRAW_INTERVAL or self.done == self.total:
                self._last = now
                self._redraw(now)
        elif 10 * self.done // self.total > self._tenth:
            self._tenth = 10 * self.done // self.total
            self.stream.write(self._line(now) + "\n")
            self.stream.flush()

    def track(self, schedule: Schedule, label: str) -> Schedule:
        """``schedule`` with a step function that advances the bar by ``nranks`` per step pulled.

        Give the bar a ``total`` of ``nsteps · nranks`` summed over the schedules it tracks, so a
        schedule on many ranks weighs more; ``label`` becomes the note while its steps are pulled.
        """
        weight = schedule.nranks

        def step_fn(i: int) -> Step:
            step = schedule.step(i)
            self.update(weight, note=label)
            return step

        origin = getattr(schedule.step_fn, "origin", None)
        if origin is not None:  # the same steps: where they came from still holds
            step_fn.origin = origin  # type: ignore[attr-defined]
        return dataclasses.replace(schedule, step_fn=step_fn)

    def _line(self, now: float) -> str:
        fill = self.width * self.done // self.total
        bar = "#" * fill + "." * (self.width - fill)
        count = f" {self.done}/{self.total}" if self.count else ""
        head = f"{self.label} [" if self.label else "["
        done = f"{self.done / self.total:.0%} done, {now - self._start:.1f}s"
        return f"{head}{bar}]{count} {done} {self.note}".rstrip()

    def _redraw(self, now: float) -> None:
        text = self._line(now)
        self.stream.write("\r" + text + " " * max(self._drawn - len(text), 0))
        self.stream.flush()
        self._drawn = len(text)

    def close(self) -> None:
        """Erase the bar from the terminal (lines written to a log stay)."""
        if self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
            self._drawn = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
