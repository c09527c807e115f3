"""Figures for the command line: predicted time versus message size (``compare --plot``).

Matplotlib is imported here only, and lazily by ``compare``, so ``import commsim`` never pays for
it. The figure is drawn on an Agg canvas built directly (``matplotlib.figure.Figure``), which needs
no display and leaves pyplot's global state and backend alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from commsim import units

__all__ = ["Panel", "plot_compare"]

_MAX_COLUMNS = 3
_MARKERS = "os^vD<>ph*"


class Panel(Protocol):
    """What one panel shows (:class:`commsim.cli.compare.Panel` is one)."""

    nranks: int
    times: Mapping[str, np.ndarray]
    lower_bound: np.ndarray


def plot_compare(
    path: str | Path,
    collective: str,
    model_label: str,
    sizes: np.ndarray,
    panels: Sequence[Panel],
) -> Path:
    """Write a log-log figure of time vs size: one panel per rank count, one line per algorithm.

    Args:
        path: output file; the format follows the suffix (``.png``, ``.pdf``, ``.svg``).
        collective: the collective, for the title.
        model_label: the model and its parameters, for the title.
        sizes: message sizes in bytes (sizes of 0 cannot be drawn on a log axis and are left out).
        panels: one per rank count, with ``nranks``, ``times`` (``{algorithm: seconds per
            size}``) and ``lower_bound`` (per size, drawn dashed).

    Returns:
        The path written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    n = max(len(panels), 1)
    ncols = min(n, _MAX_COLUMNS)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(4.6 * ncols + 0.6, 3.6 * nrows + 0.9), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    names = list(dict.fromkeys(a for pn in panels for a in pn.times))
    style = {a: (f"C{i % 10}", _MARKERS[i % len(_MARKERS)]) for i, a in enumerate(names)}
    for k, ax in enumerate(axes.flat):
        if k >= len(panels):
            ax.set_visible(False)
            continue
        _draw_panel(ax, panels[k], np.asarray(sizes, dtype=float), style)
        if k % ncols == 0:
            ax.set_ylabel("predicted time")
        if k >= len(panels) - ncols:
            ax.set_xlabel("message size")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    by_label = dict(zip(labels, handles, strict=True))
    for pn in panels[1:]:  # algorithms missing from the first panel (skipped there)
        for a in pn.times:
            if a not in by_label:
                by_label[a] = _proxy(*style[a])
    fig.legend(
        by_label.values(),
        by_label.keys(),
        loc="outside lower center",
        ncols=min(len(by_label), 5),
        frameon=False,
    )
    fig.suptitle(f"{collective}: predicted time ({model_label})", fontsize=10)
    fig.savefig(path, dpi=120)
    return path


def _draw_panel(ax: Any, pn: Panel, sizes: np.ndarray, style: dict[str, tuple[str, str]]) -> None:
    """One rank count on ``ax``: a line per algorithm (``style``: color, marker), the bound
    dashed, log-log axes labelled with sizes and times."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    keep = sizes > 0
    x = sizes[keep]
    for a, t in pn.times.items():
        color, marker = style[a]
        ax.plot(
            x,
            np.asarray(t)[keep],
            color=color,
            marker=marker,
            markersize=3,
            linewidth=1.4,
            label=a,
        )
    ax.plot(x, np.asarray(pn.lower_bound)[keep], "k--", linewidth=1, label="lower bound")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_title(f"p = {pn.nranks}")
    if len(x):
        ax.xaxis.set_major_locator(FixedLocator(_size_ticks(x)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: units.format_size(round(v))))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: units.format_time(v)))
    ax.grid(True, which="major", alpha=0.3)
    ax.tick_params(axis="x", labelrotation=30)


def _size_ticks(x: np.ndarray) -> list[float]:
    """Powers of two spanning ``x``, at most seven, on round exponents (1KiB, 32KiB, 1MiB, ...)."""
    lo, hi = math.floor(math.log2(x.min())), math.ceil(math.log2(x.max()))
    stride = next(s for s in (1, 2, 5, 10, 20, 40) if (hi - lo) // s < 7 or s == 40)
    start = lo + (-lo) % stride
    return [2.0**e for e in range(start, hi + 1, stride)] or [2.0**lo]


def _proxy(color: str, marker: str) -> Any:
    from matplotlib.lines import Line2D

    return Line2D([], [], color=color, marker=marker, markersize=3)
