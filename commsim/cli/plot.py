"""Figures for the command line: predicted time versus message size (``compare --plot``).

One panel per rank count, on shared log axes so that panels compare honestly; a curve per
algorithm; the lower bound dashed black on top. Lines join sizes at most :data:`MAX_STEP` apart
(further apart, a straight line would not be the model's curve); a size alone (one or two sizes,
or a gap) gets a point per algorithm, side by side, with the bound a bar beneath.

Nothing hides: curves that coincide (ties, equal within :data:`commsim.models.TIE_RTOL` at every size of a
panel, and near ties within :data:`OVERLAP_RTOL`) take turns along the line, each member drawing
its own dashes and markers. Ties are named: in the legend ("direct (= ring)") when they hold in
every panel, else in the panel's title. What a log axis cannot show is left out and said in the
title ("not drawn: size 0B (log axis)"); a figure with nothing to show is refused (exit 2).

Ticks are labelled by :func:`commsim.units.format_size` and :func:`commsim.units.format_time`,
for any number of sizes and any range of times. The title and legend are wrapped and laid out to
the figure's width, and the figure grows to hold them.

Matplotlib is imported inside the functions that draw, so neither ``import commsim`` nor
``import commsim.cli`` pays for it. The figure is drawn on an Agg canvas built directly
(``matplotlib.figure.Figure``), which needs no display and leaves pyplot's global state and
backend alone.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from commsim import units
from commsim.cli.errors import UsageError
from commsim.models import TIE_RTOL

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "BOUND",
    "MAX_PANELS",
    "Panel",
    "check_drawable",
    "draw_compare",
    "plot_compare",
]

BOUND = "lower bound"  # the bound's name in the legend and in tie labels
MAX_PANELS = 24  # one panel per rank count; more would be unreadable
OVERLAP_RTOL = 0.01  # curves this close at every drawn size would hide each other: interleaved
MAX_STEP = 10.0  # sizes further apart are not joined: a line across would not be the model's
_DODGE_PT = 10.0  # with points, algorithms sit this many points apart around each size
_MARKERS = "os^vD<>phX"
_Style = tuple[str, str]  # color, marker


def _colour(i: int, n: int) -> str:
    """The ``i``-th of ``n`` distinct colours: matplotlib's ten, or for more the twenty of
    ``tab20`` (its dark shades first, then the light ones), as hex."""
    if n <= 10:
        return f"C{i}"
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    order = [*range(0, 20, 2), *range(1, 20, 2)]
    return to_hex(colormaps["tab20"](order[i % 20]))


_DPI = 120
_PANEL_WIDTH = 6.0  # inches, a figure of one panel
_PANEL_HEIGHT = 2.9  # inches per row of panels, without titles


class Panel(Protocol):
    """What one panel shows (:class:`commsim.cli.compare.Panel` is one)."""

    nranks: int
    times: Mapping[str, np.ndarray]
    lower_bound: np.ndarray
    skipped: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class _Curves:
    """One drawable panel: its curves at the drawn sizes (NaN where not drawable) and its ties."""

    nranks: int
    curves: dict[str, np.ndarray]  # algorithms in order, then BOUND
    ties: list[list[str]]  # groups of two or more equal curves, BOUND included


def check_drawable(sizes: Sequence[int], npanels: int) -> None:
    """Refuse, before any work, a figure that could show nothing or would be unreadable."""
    if not any(n > 0 for n in sizes):
        raise UsageError(
            "--plot: no message size above 0B to draw on a log axis; give sizes > 0 or drop --plot"
        )
    if npanels > MAX_PANELS:
        raise UsageError(
            f"--plot draws one panel per p, at most {MAX_PANELS}; got {npanels} rank counts"
        )


def plot_compare(
    path: str | Path,
    collective: str,
    model_label: str,
    sizes: np.ndarray,
    panels: Sequence[Panel],
) -> Figure:
    """Draw :func:`draw_compare`'s figure and write it to ``path`` (``.png``, ``.pdf`` or
    ``.svg``: the suffix picks the format). Returns the figure."""
    fig = draw_compare(collective, model_label, sizes, panels)
    fig.savefig(Path(path), dpi=_DPI)
    return fig


def draw_compare(
    collective: str, model_label: str, sizes: np.ndarray, panels: Sequence[Panel]
) -> Figure:
    """A log-log figure of predicted time vs size: a panel per rank count, a curve per algorithm.

    Args:
        collective: the collective, for the title.
        model_label: the model and its parameters (``Model.describe()``), for the title.
        sizes: message sizes in bytes; sizes of 0 are left out (with a note).
        panels: one per rank count, with ``nranks``, ``times`` (``{algorithm: seconds per
            size}``), ``lower_bound`` (per size) and ``skipped`` (``{algorithm: why}``).

    Raises:
        UsageError: nothing at all can be drawn on log axes (every size or every time is 0).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    sizes = np.asarray(sizes, dtype=float)
    keep = np.isfinite(sizes) & (sizes > 0)
    order = np.flatnonzero(keep)[np.argsort(sizes[keep], kind="stable")]
    drawn = [c for c in (_curves(pn, order) for pn in panels) if c is not None]
    if not drawn:
        raise UsageError(
            "--plot: nothing to draw on log axes (every size or every predicted time is 0)"
        )
    fig = Figure(layout="constrained")
    FigureCanvasAgg(fig)
    axes = _grid(fig, len(drawn))
    names = list(dict.fromkeys(a for c in drawn for a in c.curves))
    curves = [a for a in names if a != BOUND]
    style = {
        a: (_colour(i, len(curves)), _MARKERS[i % len(_MARKERS)]) for i, a in enumerate(curves)
    }
    shared = _shared_ties(drawn)
    points = _draw(axes, drawn, sizes[order], style)
    for ax, c in zip(axes, drawn, strict=True):
        _panel_title(ax, c, shared)
    _time_axis(axes[0], [c.curves for c in drawn])
    notes = _notes(sizes, keep, panels, drawn)
    _finish(fig, (collective, model_label, notes), style, shared, points)
    return fig


# ---------------------------------------------------------------------------------------------
# what to draw


def _curves(pn: Panel, order: np.ndarray) -> _Curves | None:
    """The panel's curves at the sizes drawn (``order``: their indices, by size), times of 0 as
    NaN; None if nothing shows. Ties are decided at every size, drawn or not."""
    raw = {a: np.asarray(t, dtype=float) for a, t in pn.times.items()}
    raw[BOUND] = np.asarray(pn.lower_bound, dtype=float)
    curves = {a: np.where(y[order] > 0, y[order], np.nan) for a, y in raw.items()}
    if not any(np.isfinite(y).any() for a, y in curves.items() if a != BOUND):
        return None
    return _Curves(pn.nranks, curves, _groups(raw, TIE_RTOL))


def _groups(
    curves: Mapping[str, np.ndarray], rtol: float, singletons: bool = False
) -> list[list[str]]:
    """Curves equal within ``rtol`` at every size (NaN equal to NaN), grouped in order: the
    groups of two or more, and with ``singletons`` the curves alone too."""
    groups: list[list[str]] = []
    for a, y in curves.items():
        same = (g for g in groups if np.allclose(y, curves[g[0]], rtol, 0.0, equal_nan=True))
        if (g := next(same, None)) is not None:
            g.append(a)
        else:
            groups.append([a])
    return [g for g in groups if singletons or len(g) > 1]


def _partners(groups: Iterable[list[str]], a: str) -> set[str]:
    return {b for g in groups if a in g for b in g if b != a}


def _shared_ties(drawn: Sequence[_Curves]) -> dict[str, list[str]]:
    """For each curve, the curves it ties with in every panel that draws both (for the legend)."""
    names = list(dict.fromkeys(a for c in drawn for a in c.curves))
    shared: dict[str, list[str]] = {}
    for a in names:
        both = {b: [c for c in drawn if a in c.curves and b in c.curves] for b in names if b != a}
        ties = [b for b, cs in both.items() if cs and all(b in _partners(c.ties, a) for c in cs)]
        if ties:
            shared[a] = ties
    return shared


def _notes(
    sizes: np.ndarray, keep: np.ndarray, panels: Sequence[Panel], drawn: Sequence[_Curves]
) -> list[str]:
    """What the figure leaves out, one phrase each (the title says "not drawn: ...")."""
    notes = []
    if not keep.all():
        left = ", ".join(dict.fromkeys(units.format_size(n) for n in sizes[~keep]))
        notes.append(f"size {left} (log axis)")
    if any(np.isnan(y).any() for c in drawn for a, y in c.curves.items() if a != BOUND):
        notes.append("times of 0s (log axis)")
    shown = {c.nranks for c in drawn}
    for pn in panels:
        if not pn.times:
            notes.append(f"p={pn.nranks} (every algorithm skipped, see the table)")
        elif pn.nranks not in shown:
            notes.append(f"p={pn.nranks} (every time is 0s)")
        elif pn.skipped:
            notes.append(f"{', '.join(pn.skipped)} at p={pn.nranks} (skipped, see the table)")
    return notes


# ---------------------------------------------------------------------------------------------
# drawing


def _grid(fig: Figure, n: int) -> list[Axes]:
    """``n`` panels on a grid with shared log axes; tick labels on the left and bottom edges."""
    ncols = n if n <= 3 else 2 if n == 4 else 3 if n <= 9 else 4
    nrows = math.ceil(n / ncols)
    fig.set_size_inches(_PANEL_WIDTH if ncols == 1 else 3.9 * ncols + 0.5, _PANEL_HEIGHT * nrows)
    grid = fig.add_gridspec(nrows, ncols)
    first = fig.add_subplot(grid[0, 0])
    first.set_xscale("log", base=2)
    first.set_yscale("log")
    axes = [first] + [
        fig.add_subplot(grid[k // ncols, k % ncols], sharex=first, sharey=first)
        for k in range(1, n)
    ]
    for k, ax in enumerate(axes):
        ax.tick_params(labelleft=k % ncols == 0, labelbottom=k + ncols >= n)
        ax.set_xlabel("message size" if k + ncols >= n else "")
        ax.set_ylabel("predicted time" if k % ncols == 0 else "")
        ax.tick_params(axis="x", labelrotation=30)
        ax.grid(True, which="major", alpha=0.3)
    return axes


def _draw(
    axes: Sequence[Axes], drawn: Sequence[_Curves], x: np.ndarray, style: Mapping[str, _Style]
) -> bool:
    """Every panel's curves at sizes ``x`` (sorted): lines through runs of sizes at most
    :data:`MAX_STEP` apart, points side by side at sizes alone. Sets the size axis. Returns
    whether there are points only."""
    cuts = [0, *(np.flatnonzero(x[1:] / x[:-1] > MAX_STEP) + 1).tolist(), len(x)]
    runs = [slice(a, b) for a, b in itertools.pairwise(cuts) if b - a > 1]
    alone = np.array([a for a, b in itertools.pairwise(cuts) if b - a == 1], dtype=int)
    lo, hi = _size_axis(axes[0], x)
    step = _dodge(axes[0], lo, hi, len(style)) if len(alone) else 0.0
    for ax, c in zip(axes, drawn, strict=True):
        _draw_lines(ax, c, x, runs, style)
        if len(alone):
            _draw_points(ax, c, x, alone, style, step)
    return not runs


def _draw_lines(
    ax: Axes, c: _Curves, x: np.ndarray, runs: Sequence[slice], style: Mapping[str, _Style]
) -> None:
    """A line per algorithm and run of sizes, then the bound dashed on top. Curves that would
    hide each other (within :data:`OVERLAP_RTOL` at every size: ties, and near ties) take turns:
    member ``j`` of ``k`` draws every ``k``-th dash and marker, so each shows its color."""
    algorithms = {a: y for a, y in c.curves.items() if a != BOUND}
    for group in _groups(algorithms, OVERLAP_RTOL, singletons=True):
        k = len(group)
        for (j, a), r in itertools.product(enumerate(group), runs):
            color, marker = style[a]
            dash: Any = (3.0 * j, (3.0, 3.0 * (k - 1))) if k > 1 else "-"
            kw = {"color": color, "marker": marker, "ls": dash, "lw": 1.6, "ms": 4}
            ax.plot(x[r], algorithms[a][r], markevery=(j, k) if k > 1 else None, label=a, **kw)
    for r in runs:
        ax.plot(x[r], c.curves[BOUND][r], color="k", ls=(0, (4, 3)), lw=1.0, zorder=3, label=BOUND)


def _draw_points(
    ax: Axes, c: _Curves, x: np.ndarray, at: np.ndarray, style: Mapping[str, _Style], step: float
) -> None:
    """At sizes ``x[at]``, a marker per algorithm side by side (``step`` apart on the log axis,
    in the legend's order), so equal times stay visible; the bound a bar under them."""
    half = (len(style) - 1) / 2
    for i, (a, (color, marker)) in enumerate(style.items()):
        if a in c.curves:
            dodged = x[at] * math.exp((i - half) * step)
            kw = {"color": color, "marker": marker, "ms": 8, "mec": "white", "mew": 0.6}
            ax.plot(dodged, c.curves[a][at], ls="none", label=a, **kw)
    width = math.exp((half + 1) * step)
    y = c.curves[BOUND][at]
    ax.hlines(y, x[at] / width, x[at] * width, colors="k", lw=1.4, zorder=1.5, label=BOUND)


def _dodge(ax: Axes, lo: float, hi: float, n: int) -> float:
    """Widen the size axis to hold ``n`` points side by side around a size, about
    :data:`_DODGE_PT` apart (closer where the axis is crowded); returns their step on the axis
    (log units). Sizes drawn as points are more than :data:`MAX_STEP` apart: room enough."""
    fig_width, _ = ax.figure.get_size_inches()
    ncols = ax.get_subplotspec().get_gridspec().ncols
    width_pt = (fig_width / ncols - 0.8) * 72  # the panel's width, less its tick labels
    half_pt = min(_DODGE_PT * (n + 1) / 2, width_pt / 4)
    span = math.log(hi / lo) / (1 - 2 * half_pt / width_pt)  # the widened axis, log units
    half = min(half_pt * span / width_pt, 0.4 * math.log(MAX_STEP))
    ax.set_xlim(lo / math.exp(half), hi * math.exp(half))
    return 2 * half / (n + 1)


def _panel_title(ax: Axes, c: _Curves, shared: Mapping[str, list[str]]) -> None:
    """``p = 8``, and the panel's ties that the legend does not already name."""
    local = [g for g in c.ties if any(set(g) - {a} - set(shared.get(a, ())) for a in g)]
    ties = "; ".join(" = ".join(g) for g in local)
    ax.set_title(f"p = {c.nranks}" + (f"\nties: {ties}" if ties else ""), fontsize=10)


# ---------------------------------------------------------------------------------------------
# axes


def _size_axis(ax: Axes, x: np.ndarray) -> tuple[float, float]:
    """Sizes: the sizes themselves as ticks when few, else powers of two; format_size labels.
    Returns the axis limits."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    lo, hi = _padded(float(x.min()), float(x.max()), min_ratio=16.0)
    ax.set_xlim(lo, hi)
    distinct = sorted(set(x.tolist()))
    ticks = _power_of_two_ticks(lo, hi) if len(distinct) > 6 else []
    if len(ticks) < 2:
        ticks = _thin(distinct, lo, hi)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: units.format_size(round(v))))
    return lo, hi


def _time_axis(ax: Axes, panels: Sequence[Mapping[str, np.ndarray]]) -> None:
    """Times: 1-2-5 style ticks (decades when the range is wide), format_time labels."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ys = np.concatenate([y for curves in panels for y in curves.values()])
    ys = ys[np.isfinite(ys)]
    lo, hi = _padded(float(ys.min()), float(ys.max()), min_ratio=3.0)
    ax.set_ylim(lo, hi)
    major, minor = _time_ticks(lo, hi)
    ax.yaxis.set_major_locator(FixedLocator(major))
    ax.yaxis.set_minor_locator(FixedLocator(minor))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: units.format_time(v)))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _padded(lo: float, hi: float, min_ratio: float) -> tuple[float, float]:
    """``[lo, hi]`` widened by 6% on a log scale, and to at least ``hi / lo = min_ratio``."""
    span = math.log(hi / lo)
    pad = max(0.06 * span, (math.log(min_ratio) - span) / 2)
    return lo * math.exp(-pad), hi * math.exp(pad)


def _power_of_two_ticks(lo: float, hi: float) -> list[float]:
    """At most six powers of two in ``[lo, hi]``, on round exponents (1KiB, 32KiB, 1MiB...)."""
    e0, e1 = math.ceil(math.log2(lo)), math.floor(math.log2(hi))
    for stride in (1, 2, 5, 10, 20, 40):
        ticks = [2.0**e for e in range(e0, e1 + 1) if e % stride == 0]
        if len(ticks) <= 6:
            return ticks
    return ticks


def _thin(values: Sequence[float], lo: float, hi: float, most: int = 7) -> list[float]:
    """``values`` without those closer than 1/``most`` of the log axis to the previous kept; the
    last one stays (in place of its neighbour if need be), unless only the first is kept."""
    gap = math.log(hi / lo) / most
    kept: list[float] = []
    for v in values:
        if not kept or math.log(v / kept[-1]) >= gap:
            kept.append(v)
    if len(kept) > 1:
        kept[-1] = values[-1]
    return kept


_MANTISSAS = ((1, 3), (1, 2, 5), (1, 2, 3, 5), (1, 2, 3, 4, 5, 6, 7, 8, 9))


def _time_ticks(lo: float, hi: float) -> tuple[list[float], list[float]]:
    """Major ticks in ``[lo, hi]``: decades (every 2nd, 3rd... when more than eight), or when
    fewer than three decades show, the sparsest of 1-3, 1-2-5, 1-2-3-5 and 1..9 giving three or
    more. Minor ticks (unlabelled) only between single decades."""
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))

    def inside(subs: Iterable[int], stride: int = 1) -> list[float]:
        return [
            v
            for e in range(e0, e1 + 1)
            if e % stride == 0
            for v in (float(f"{m}e{e}") for m in subs)
            if lo <= v <= hi
        ]

    for stride in (1, 2, 3, 5, 10, 20, 50):
        decades = inside((1,), stride)
        if len(decades) <= 8:
            break
    if len(decades) >= 3:
        return decades, inside(range(2, 10)) if stride == 1 else []
    for subs in _MANTISSAS:
        ticks = inside(subs)
        if len(ticks) >= 3:
            break
    return ticks, []


# ---------------------------------------------------------------------------------------------
# title, legend, size


def _finish(
    fig: Figure,
    title: tuple[str, str, list[str]],
    style: Mapping[str, _Style],
    shared: Mapping[str, list[str]],
    points: bool,
) -> None:
    """Wrap the titles and lay out the legend to the figure's width; grow it to hold them."""
    renderer = fig.canvas.get_renderer()
    width = fig.bbox.width * 0.97
    collective, model_label, notes = title
    lines = [f"{collective}: predicted time vs message size", model_label]
    lines += ["not drawn: " + "; ".join(notes)] if notes else []
    head = fig.suptitle("", fontsize=10)
    _wrap(head, lines, width, renderer)
    axes = fig.axes
    nrows, ncols = axes[0].get_subplotspec().get_gridspec().get_geometry()
    for ax in axes:
        _wrap(ax.title, ax.get_title().split("\n"), width / ncols * 0.95, renderer)
    legend = _legend(fig, style, shared, points, width, renderer)
    titles = sum(
        max(ax.title.get_window_extent(renderer).height for ax in axes[r * ncols : (r + 1) * ncols])
        for r in range(nrows)
    )
    extra = head.get_window_extent(renderer).height + legend.get_window_extent(renderer).height
    inches = fig.get_size_inches()
    fig.set_size_inches(inches[0], inches[1] + (titles + extra) / fig.dpi + 0.9)


def _wrap(text: Any, lines: Sequence[str], max_px: float, renderer: Any) -> None:
    """Set ``text`` to ``lines``, each wrapped at spaces until the whole fits ``max_px``."""
    chars = max(len(line) for line in lines)
    while True:
        wrapped = [w for line in lines for w in (textwrap.wrap(line, chars) or [""])]
        text.set_text("\n".join(wrapped))
        if text.get_window_extent(renderer).width <= max_px or chars <= 12:
            return
        chars = int(chars * 0.9)


def _legend(
    fig: Figure,
    style: Mapping[str, _Style],
    shared: Mapping[str, list[str]],
    points: bool,
    max_px: float,
    renderer: Any,
) -> Any:
    """The figure's legend below the panels, in as many columns as fit ``max_px``."""
    from matplotlib.lines import Line2D

    ls = "none" if points else "-"
    handles = [Line2D([], [], color=c, marker=m, ls=ls, ms=5) for c, m in style.values()]
    bound = {"marker": "_", "ms": 12, "mew": 1.6} if points else {"ls": (0, (4, 3))}
    handles.append(Line2D([], [], color="k", **({"ls": "none"} | bound)))
    names = [*style, BOUND]
    labels = [_tie_label(a, shared, names) for a in names]
    for ncols in range(len(labels), 0, -1):
        order = [i for j in range(ncols) for i in range(j, len(labels), ncols)]  # row by row
        legend = fig.legend(
            [handles[i] for i in order],
            [labels[i] for i in order],
            loc="outside lower center",
            ncols=ncols,
            frameon=False,
            fontsize=9,
        )
        if ncols == 1 or legend.get_window_extent(renderer).width <= max_px:
            return legend
        legend.remove()
    raise AssertionError("unreachable")  # pragma: no cover


def _tie_label(name: str, shared: Mapping[str, list[str]], names: list[str]) -> str:
    """``direct (= ring)``: the first curve before ``name`` that it ties with in every panel."""
    earlier = [b for b in shared.get(name, ()) if names.index(b) < names.index(name)]
    return f"{name} (= {earlier[0]})" if earlier else name
