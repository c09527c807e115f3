"""What the commands print: the output argument group, aligned tables, JSON, and cell formats.

Tables are for people (sizes and times with units, columns aligned); ``--json`` prints one
document for machines: sizes in bytes (``nbytes``), times in seconds (``*_s``), bandwidths in
bytes/s (``*_Bps``) and ``null`` for a number that is not finite.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from commsim import units
from commsim.cli.memory import RAM_FRACTION

__all__ = [
    "add_output_group",
    "format_bandwidth",
    "format_params",
    "format_ratio",
    "format_table",
    "plain",
    "say_plot",
    "to_json",
]


def add_output_group(parser: argparse.ArgumentParser, *, memory_limit: bool = False) -> Any:
    """``--json``, ``--progress`` and, if asked, ``--memory-limit``; returns the group."""
    g = parser.add_argument_group("output")
    g.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    g.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress on stderr (default: after 0.5 s on a terminal, 10 s otherwise)",
    )
    if memory_limit:
        g.add_argument(
            "--memory-limit",
            metavar="SIZE",
            help="refuse (or skip) schedules needing more memory than this "
            f"(default: {RAM_FRACTION * 100:.0f}%% of physical RAM)",
        )
    return g


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str) -> str:
    """Columns padded to their widest cell; ``align`` is one ``l``/``r`` per column.

    A cell may hold several lines (wrapped text); its row then spans that many lines.

    Examples:
        >>> print(format_table(["size", "time"], [["1KiB", "2us"], ["1GiB", "40ms"]], "rr"))
        size  time
        ----  ----
        1KiB   2us
        1GiB  40ms
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


def plain(x: Any) -> Any:
    """JSON-safe data: numpy to Python, tuples to lists, non-finite floats to ``None``.

    Examples:
        >>> plain({"t": np.array([1.0, np.inf]), "n": np.int64(3)})
        {'t': [1.0, None], 'n': 3}
    """
    if isinstance(x, Mapping):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return plain(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def say_plot(path: Any, as_json: bool) -> None:
    """Print where ``--plot`` went (nothing for ``--json``, which stays one document, or when no
    plot was asked for)."""
    if path and not as_json:
        print(f"plot written to {path}")


def to_json(doc: Any) -> str:
    """``doc`` as an indented JSON document (see :func:`plain`)."""
    return json.dumps(plain(doc), indent=2, allow_nan=False)


#: the longest parameter value a text header shows whole (``--json`` shows every value whole)
LONG_PARAM = 60


def format_params(params: Mapping[str, Any]) -> str:
    """``segments=8, k=2`` (the root is shown on its own), or ``-`` when there are none; a value
    longer than :data:`LONG_PARAM` characters (a packing's trees) is cut to its start and
    its length.

    Examples:
        >>> format_params({"segments": 8, "trees": "r.0.1." * 40})
        "segments=8, trees='r.0.1.r.0.1.r.0.1.r.0.1... (242 characters)"
    """

    def shown(v: Any) -> str:
        text = repr(v)
        return text if len(text) <= LONG_PARAM else f"{text[:24]}... ({len(text):,} characters)"

    return ", ".join(f"{k}={shown(v)}" for k, v in params.items() if k != "root") or "-"


def format_ratio(time: float, bound: float) -> str:
    """``1.25x``: a time over its lower bound, or ``-`` where that means nothing."""
    return f"{time / bound:.2f}x" if bound > 0 and math.isfinite(time) else "-"


def format_bandwidth(bytes_per_s: float) -> str:
    """A bandwidth cell: ``12.3GB/s``, or ``-`` when not finite."""
    return units.format_bandwidth(bytes_per_s) if math.isfinite(bytes_per_s) else "-"
