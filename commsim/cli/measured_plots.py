"""Figures of measurements against models: a profile's fits (``calibrate --plot``) and measured
against predicted times (``validate --plot``).

Log-log, one panel per curve (calibrate) or per algorithm (validate): the measured medians as
points with their interquartile range as error bars, the fitted or predicted curve as a line,
and (calibrate) the fit's breakpoints as dotted verticals labelled with their size. Drawn on an
Agg canvas made directly (no pyplot state, no display); matplotlib is imported only here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from commsim import units
from commsim.cli.errors import UsageError
from commsim.profiles import Profile

__all__ = ["draw_profile", "draw_validation"]


def _figure(npanels: int) -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure

    cols = min(npanels, 3)
    rows = math.ceil(npanels / cols)
    fig = Figure(figsize=(4.6 * cols, 3.6 * rows), layout="constrained")
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(npanels)]
    return fig, axes


def _minor_time(y: float, _: Any) -> str:
    """A minor tick's label on a log time axis: 2 and 5 times a power of ten, else none."""
    mantissa = y / 10 ** np.floor(np.log10(y)) if y > 0 else 0.0
    return units.format_time(y) if any(abs(mantissa - m) < 1e-6 for m in (2, 5)) else ""


def _axes_format(ax: Any, ylabel: str = "time") -> None:
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: units.format_size(x, exact=False)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: units.format_time(y)))
    # less than a decade on the axis: matplotlib labels minor ticks, in its own notation; label
    # the 2s and 5s in ours instead, and no others
    ax.yaxis.set_minor_formatter(FuncFormatter(_minor_time))
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    ax.tick_params(axis="y", which="both", labelsize=7)
    ax.set_xlabel("message size")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)


def _points(
    ax: Any, x: np.ndarray, med: np.ndarray, spread: np.ndarray, color: str, label: str
) -> None:
    half = np.maximum(spread * med / 2, 0)
    low = np.minimum(half, med * 0.999)
    ax.errorbar(x, med, yerr=[low, half], fmt="o", ms=3.5, color=color, capsize=2, label=label)


def _save(fig: Any, path: str | Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path = Path(path)
    if path.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise UsageError(f"--plot {path}: write a .png, .pdf or .svg file")
    FigureCanvasAgg(fig)
    try:
        fig.savefig(path, dpi=120)
    except OSError as e:
        raise UsageError(f"cannot write --plot {path}: {e.strerror or e}") from None
    return path


def draw_profile(profile: Profile, path: str | Path) -> Path:
    """One panel per curve: the measured points the fit was made to (each size's median, or
    its blocks' trimmed mean; IQR bars) over the piecewise fit, breakpoints."""
    curves = [c for c in profile.curves.values() if len(c.sizes)]
    if not curves:
        raise UsageError("the profile has no measured points to plot")
    fig, axes = _figure(len(curves))
    for ax, c in zip(axes, curves, strict=True):
        x = c.sizes[c.sizes > 0]
        med, spread = c.median_s[c.sizes > 0], c.spread[c.sizes > 0]
        grid = np.geomspace(x.min(), x.max(), 400)
        ax.plot(grid, c.fit(grid), "-", color="C1", lw=1.5, label="fit")
        what = "median" if c.intervals is None else "blocks' trimmed mean"
        _points(ax, x, med, spread, "C0", f"measured ({what}, IQR)")
        inside = profile.step_reduction() if c.kind == "step" else None
        if inside is not None:  # what the models charge a reduction, against it alone
            ax.plot(grid, inside(grid), "--", color="C3", lw=1.2,
                    label="reduction in a step: max(step − exchange, alone)")  # fmt: skip
            if inside.alone is not None:
                ax.plot(grid, inside.alone(grid), ":", color="C2", lw=1.2,
                        label="reduction alone")  # fmt: skip
        for piece in c.fit.pieces[1:]:
            ax.axvline(piece.start, color="0.5", ls=":", lw=1)
            ax.text(piece.start, ax.get_ylim()[1], units.format_size(piece.start, exact=False),
                    fontsize=6, rotation=90, va="top", ha="right", color="0.4")  # fmt: skip
        q = c.quality
        ax.set_title(
            f"{c.kind}: {len(c.fit.pieces)} piece(s), R²={q.r2:.3f}, "
            f"|resid| med {100 * q.median_rel_residual:.1f}%",
            fontsize=8,
        )
        _axes_format(ax)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(
        f"{profile.backend} on {profile.nranks} ranks — {profile.transport}\n{profile.machine}",
        fontsize=8,
    )
    return _save(fig, path)


def draw_validation(
    title: str,
    predicted: Mapping[str, tuple[np.ndarray, np.ndarray]],
    measured: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
    path: str | Path,
    *,
    overhead: float = 0.0,
    baselines: Sequence[tuple[str, np.ndarray, np.ndarray]] = (),
) -> Path:
    """One panel per algorithm: measured points over the predicted curve (and, with a per-call
    ``overhead``, the prediction plus it, dashed); ``baselines`` (name, sizes, times) grey."""
    names = list(measured)
    if not names:
        raise UsageError("nothing was measured: no plot")
    fig, axes = _figure(len(names))
    for ax, name in zip(axes, names, strict=True):
        xs, ts = predicted[name]
        ax.plot(xs, ts, "-", color="C1", lw=1.5, label="predicted")
        if overhead > 0:
            ax.plot(xs, ts + overhead, "--", color="C2", lw=1.2,
                    label=f"predicted + call overhead {units.format_time(overhead)}")  # fmt: skip
        for i, (bname, bx, bt) in enumerate(baselines):
            ax.plot(
                bx, bt, ls="-.", marker="x", ms=3, lw=0.8, color=str(0.35 + 0.2 * i), label=bname
            )
        mx, mt, ms = measured[name]
        _points(ax, mx, mt, ms, "C0", "measured (median, IQR)")
        ax.set_title(name, fontsize=9)
        _axes_format(ax)
        ax.legend(fontsize=6, loc="upper left")
    fig.suptitle(title, fontsize=8)
    return _save(fig, path)
