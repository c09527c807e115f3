"""The command line's output: progress on stderr, aligned tables, JSON on stdout."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np

from commsim import units
from commsim._ir import Schedule

# ---------------------------------------------------------------------------------------------
# progress


class _Progress:
    """A text progress bar on stderr, advanced by the steps the consumers pull from schedules.

    On a terminal it is a bar redrawn in place; elsewhere (a log file) one line per 10%.
    ``enabled=None`` (auto) shows it once the run has lasted 0.5 s on a terminal, 10 s elsewhere,
    so short runs stay quiet; ``True`` shows it from the start; ``False`` never.
    """

    def __init__(self, total: float, enabled: bool | None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.enabled = enabled is not False
        self.delay = 0.0 if enabled else (0.5 if self.tty else 10.0)
        self.total = max(total, 1.0)
        self.done = 0.0
        self.label = ""
        self.t0 = time.monotonic()
        self.last_draw = 0.0
        self.last_decile = -1
        self.drawn = False

    def track(self, s: Schedule, label: str) -> tuple[Schedule, list[int]]:
        """``s`` with a step function that advances the bar; also counts transfers into ``[n]``."""
        counter = [0]
        weight = float(s.nranks)

        def step_fn(i: int) -> Any:
            st = s.step(i)
            counter[0] += len(st.src)
            self.advance(weight, label)
            return st

        return dataclasses.replace(s, step_fn=step_fn), counter

    def advance(self, amount: float, label: str) -> None:
        self.done += amount
        self.label = label
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.t0 < self.delay or now - self.last_draw < 0.1:
            return
        self.last_draw = now
        frac = min(self.done / self.total, 1.0)
        elapsed = now - self.t0
        if self.tty:
            bar = "#" * int(frac * 30)
            self.stream.write(f"\r[{bar:<30}] {frac:4.0%} {elapsed:5.1f}s  {label[:40]:<40}")
            self.drawn = True
        elif int(frac * 10) > self.last_decile:
            self.last_decile = int(frac * 10)
            self.stream.write(f"commsim: {frac:.0%} done after {elapsed:.1f}s ({label})\n")
        self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r" + " " * 82 + "\r")
            self.stream.flush()


# ---------------------------------------------------------------------------------------------
# output


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> str:
    """Columns padded to their widest cell; ``align`` is one ``l``/``r`` per column.

    A cell may hold several lines (wrapped text); its row then spans that many lines.
    """
    cells = [[h.split("\n") for h in headers]] + [[str(c).split("\n") for c in r] for r in rows]
    widths = [max(len(line) for row in cells for line in row[j]) for j in range(len(headers))]
    out = []
    for n, row in enumerate(cells):
        for k in range(max(len(c) for c in row)):
            parts = []
            for j, c in enumerate(row):
                text = c[k] if k < len(c) else ""
                parts.append(text.rjust(widths[j]) if align[j] == "r" else text.ljust(widths[j]))
            out.append("  ".join(parts).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _plain(x: Any) -> Any:
    """JSON-safe data: numpy to Python, non-finite floats to ``None``."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _print_json(doc: Any) -> None:
    print(json.dumps(_plain(doc), indent=2, allow_nan=False))


def _ratio(t: float, bound: float) -> str:
    return f"{t / bound:.2f}x" if bound > 0 and math.isfinite(t) else "-"


def _bw(x: float) -> str:
    return units.format_bandwidth(x) if math.isfinite(x) else "-"
