r"""A schedule as a step-by-step diagram a student can follow.

The picture is a row of **buffer states** joined by **steps**, read left to right like a
butterfly diagram: state column ``k`` is every rank's buffer before step ``k`` (after step
``k - 1``); the arrows between columns ``k`` and ``k + 1`` are step ``k``'s messages.

* **Rows are ranks**; in each state column a rank's buffer is a strip of cells, one per slot
  (the collective's data slots, then a gap, then scratch slots, if any).
* **A cell's colour and number say what the slot holds**, worked out by running the schedule on
  sets of contributions (:mod:`commsim.viz._contents`): for a reducing collective, how many
  ranks' inputs it has summed so far (``p``: done); for the others, whose input it holds.
  Empty cells are white; the cells a step wrote are outlined in black.
* **Arrows** go from the sender's strip before the step to the receiver's after it: solid red
  when the receiver reduces (``⊕``, adds the data into its slots), dashed blue when it overwrites
  (a copy), dotted grey for a local operation. Beside its start, each arrow is labelled with the
  receiver and the slots (``→4 ⊕0-3``: to rank 4, add into slots 0 to 3); a step where a rank
  sends more than :data:`MAX_LABELS` messages is left unlabelled (the outlines show where the
  data landed) and says so in its header.
* Long schedules wrap: each line of the figure holds as many steps as fit in
  :data:`MAX_WIDTH` inches (balanced across lines), and starts with the state the previous line
  ended with. At most :data:`MAX_STEPS` steps are drawn unless a range is asked for.

Geometry is in inches: the whole figure is one axes whose data coordinates are inches from the
top-left corner, so text in points and cells in inches keep their proportions at every ``p``.
Readable to ``p = 16``; more than :data:`MAX_RANKS` ranks are refused. Matplotlib is imported when
drawing (Agg canvas, no pyplot), so ``import commsim.viz`` stays light.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from commsim._ir import Schedule, Step
from commsim.errors import ParameterError
from commsim.viz._contents import contributions
from commsim.viz._table import MessageRow, step_rows

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "MAX_LABELS",
    "MAX_RANKS",
    "MAX_STEPS",
    "MAX_WIDTH",
    "check_drawable",
    "draw_schedule",
    "figure_size",
]

MAX_RANKS = 32  # rows; beyond it the diagram is a texture, not a picture
MAX_STEPS = 40  # steps drawn when no range is given
MAX_LABELS = 2  # messages per sender in a step that still get a label each
MAX_WIDTH = 20.0  # inches: lines wrap to stay within it
FORMATS = (".png", ".svg", ".pdf")

_REDUCE = "#c0392b"
_COPY = "#1f5fa8"
_LOCAL = "#7f7f7f"
_EMPTY = "#ffffff"
_EDGE = "#b0b0b0"
_DPI = 120


@dataclasses.dataclass(frozen=True)
class _Geometry:
    """Sizes in inches of one figure line and its parts."""

    nranks: int
    ndata: int
    nslots: int
    cell: float  # cell width
    row: float  # row pitch
    gap: float = 0.9  # between state columns, for the arrows and their labels
    left: float = 0.75  # rank labels
    right: float = 0.3
    header: float = 0.5  # step titles above a line
    below: float = 0.25  # space under a line

    @classmethod
    def of(cls, schedule: Schedule) -> _Geometry:
        S = schedule.nslots
        cell = min(max(1.4 / S, 0.04), 0.4)
        row = 0.26 if schedule.nranks <= 16 else 0.2
        return cls(schedule.nranks, schedule.ndata, S, cell, row)

    @property
    def scratch_gap(self) -> float:
        return 0.5 * self.cell if self.nslots > self.ndata else 0.0

    @property
    def strip(self) -> float:
        return self.nslots * self.cell + self.scratch_gap

    @property
    def pitch(self) -> float:
        return self.strip + self.gap

    @property
    def line_height(self) -> float:
        return self.header + self.nranks * self.row + self.below

    @property
    def fit(self) -> int:
        """Steps that fit on one line of :data:`MAX_WIDTH` inches."""
        return max(1, int((MAX_WIDTH - self.left - self.right - self.strip) // self.pitch))

    def line_width(self, nsteps: int) -> float:
        return self.left + (nsteps + 1) * self.strip + nsteps * self.gap + self.right

    def slot_x(self) -> np.ndarray:
        """Left edge of each slot's cell within a strip."""
        j = np.arange(self.nslots)
        return j * self.cell + np.where(j >= self.ndata, self.scratch_gap, 0.0)

    @property
    def numbers(self) -> bool:
        """Whether cells are big enough to carry a number."""
        return self.cell >= 0.14


def check_drawable(nranks: int) -> None:
    """Refuse a rank count too large to draw readably (one line, suggesting a smaller ``p``)."""
    if nranks > MAX_RANKS:
        raise ParameterError(
            f"p={nranks} is too many ranks to draw readably (at most {MAX_RANKS}); "
            "draw the same algorithm at p=8 or p=16"
        )


def _step_range(schedule: Schedule, steps: range | None) -> range:
    if steps is None:
        return range(min(schedule.nsteps, MAX_STEPS))
    if steps.step != 1 or (len(steps) and not 0 <= steps.start < steps.stop <= schedule.nsteps):
        raise ParameterError(
            f"steps {steps.start}..{steps.stop - 1} are not consecutive steps of a schedule "
            f"with {schedule.nsteps} (0..{schedule.nsteps - 1})"
        )
    return steps


def _written(step: Step, nranks: int, nslots: int) -> np.ndarray:
    """``[p, nslots]``: the slots a step writes."""
    out = np.zeros((nranks, nslots), dtype=bool)
    c = step.count
    rep = np.repeat(np.arange(len(c)), c)
    offs = np.arange(len(rep)) - np.repeat(np.cumsum(c) - c, c)
    out[step.dst[rep], step.dst_slot[rep] + offs] = True
    return out


class _Palette:
    """Cell colours: by contribution count (reducing collectives) or by origin rank."""

    def __init__(self, nranks: int, reduces: bool) -> None:
        from matplotlib import colormaps
        from matplotlib.colors import to_rgba

        self.p, self.reduces = nranks, reduces
        if reduces:
            cmap = colormaps["viridis_r"]  # lightness rises evenly: 1 of p to p of p
            levels = np.linspace(0.0, 1.0, nranks) if nranks > 1 else np.array([1.0])
            self.colors = np.array([to_rgba(_EMPTY), *cmap(levels)])
        else:
            if nranks <= 10:
                cols = [to_rgba(f"C{i}") for i in range(nranks)]
            elif nranks <= 20:
                order = [*range(0, 20, 2), *range(1, 20, 2)]
                cols = [colormaps["tab20"](i) for i in order[:nranks]]
            else:
                cols = list(colormaps["hsv"](np.arange(nranks) / nranks))
            self.colors = np.array([to_rgba(_EMPTY), *cols, to_rgba("#444444")])

    def index(self, holds: np.ndarray) -> np.ndarray:
        """``[p, nslots]`` colour indices of a state ``holds[p, nslots, p]``."""
        n = holds.sum(axis=-1)
        if self.reduces:
            return n
        origin = np.argmax(holds, axis=-1) + 1
        return np.where(n == 0, 0, np.where(n == 1, origin, self.p + 1))

    def text(self, holds: np.ndarray) -> np.ndarray:
        """The number written in each cell ('' for empty)."""
        n = holds.sum(axis=-1)
        shown = n if self.reduces else np.argmax(holds, axis=-1)
        out = np.where(n > 0, shown.astype(str), "")
        return out if self.reduces else np.where(n > 1, "+", out)

    def dark(self, idx: np.ndarray) -> np.ndarray:
        rgb = self.colors[idx][..., :3]
        return (rgb @ np.array([0.299, 0.587, 0.114])) < 0.5


def draw_schedule(
    schedule: Schedule,
    path_or_ax: str | Path | Axes,
    *,
    steps: range | None = None,
    dpi: int = _DPI,
) -> Path | Axes:
    """Draw ``schedule`` step by step (see the module docstring for how to read the picture).

    Args:
        schedule: any schedule on at most :data:`MAX_RANKS` ranks.
        path_or_ax: a file to write (``.png``, ``.svg`` or ``.pdf``: the suffix picks the
            format), or a matplotlib ``Axes`` to draw into (its limits and aspect are set; the
            figure is not resized, so give it :func:`figure_size` for the intended proportions).
        steps: consecutive steps to draw, e.g. ``range(0, 3)`` (default: the first
            :data:`MAX_STEPS`).
        dpi: resolution of a ``.png``.

    Returns:
        The path written, or the axes drawn into.

    Raises:
        ParameterError: too many ranks, a step range outside the schedule, or an unknown suffix.

    Examples:
        >>> import commsim, tempfile, pathlib
        >>> s = commsim.build("allreduce", "rabenseifner", nranks=8)
        >>> out = pathlib.Path(tempfile.mkdtemp()) / "rab8.png"
        >>> draw_schedule(s, out).read_bytes()[:4]
        b'\\x89PNG'
    """
    check_drawable(schedule.nranks)
    drawn = _step_range(schedule, steps)
    path = None if hasattr(path_or_ax, "figure") else Path(path_or_ax)
    if path is not None and path.suffix.lower() not in FORMATS:
        raise ParameterError(f"{path}: write a .png, .svg or .pdf file (the suffix picks)")
    layout = _Layout(schedule, drawn)
    if path is None:
        ax = path_or_ax
        layout.draw(ax)
        return ax
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(layout.width, layout.height))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    layout.draw(ax)
    try:
        fig.savefig(path, dpi=dpi)
    except OSError as e:
        raise ParameterError(f"cannot write {path}: {e.strerror or e}") from None
    return path


def figure_size(schedule: Schedule, steps: range | None = None) -> tuple[float, float]:
    """``(width, height)`` in inches of :func:`draw_schedule`'s figure."""
    check_drawable(schedule.nranks)
    layout = _Layout(schedule, _step_range(schedule, steps))
    return layout.width, layout.height


def _kinds(schedule: Schedule, steps: range) -> list[int]:
    """Per step: 1 if every transfer reduces, 0 if none does, 2 if mixed (or empty: 3)."""
    out = []
    for i in steps:
        red = schedule.step(i).reduce
        out.append(3 if len(red) == 0 else 1 if red.all() else 0 if not red.any() else 2)
    return out


def _lines(steps: range, kinds: list[int], fit: int) -> list[range]:
    """Steps cut into lines of at most ``fit``, a new line where a phase begins (a run of steps
    of one kind: reductions, copies) when the phase would not fit on the current line; a phase
    longer than a line is cut into balanced lines."""
    phases: list[range] = []
    start = 0
    for k in range(1, len(kinds) + 1):
        if k == len(kinds) or kinds[k] != kinds[start]:
            phases.append(steps[start:k])
            start = k
    lines: list[range] = []
    current: range | None = None
    for ph in phases:
        if current is not None and len(current) + len(ph) <= fit:
            current = range(current.start, ph.stop)
            continue
        if current is not None:
            lines.append(current)
            current = None
        if len(ph) <= fit:
            current = ph
            continue
        n = math.ceil(len(ph) / fit)
        size = math.ceil(len(ph) / n)
        lines += [ph[i : i + size] for i in range(0, len(ph), size)]
    if current is not None:
        lines.append(current)
    return lines


def _operations(schedule: Schedule, steps: range) -> set[str]:
    """The kinds of arrow the drawn steps need: ``reduce``, ``copy`` (messages), ``local``."""
    ops = set()
    for i in steps:
        st = schedule.step(i)
        remote = st.src != st.dst
        for op, present in (
            ("reduce", remote & st.reduce),
            ("copy", remote & ~st.reduce),
            ("local", ~remote),
        ):
            if present.any():
                ops.add(op)
    return ops


def _explanation(s: Schedule) -> str:
    if s.spec.reduces:
        what = (
            "colour and number = how many ranks' inputs the slot has summed so far "
            f"({s.nranks} = complete)"
        )
    else:
        what = "colour and number = whose input the slot holds (white: nothing yet)"
    return (
        f"Rows are ranks, cells are the slots of a rank's buffer; {what}. Each step's arrows "
        "go from the sender's slots before the step to the receiver's after it, labelled "
        "with the receiver and the slots; outlined cells were written by the step."
    )


class _Layout:
    """Where everything goes: title, lines of steps, legend (all in inches from the top-left)."""

    def __init__(self, schedule: Schedule, steps: range) -> None:
        self.s, self.steps = schedule, steps
        self.g = _Geometry.of(schedule)
        self.lines = _lines(steps, _kinds(schedule, steps), self.g.fit) or [steps]
        self.width = max(8.0, max(self.g.line_width(len(ln)) for ln in self.lines))
        self.how = textwrap.fill(_explanation(schedule), int((self.width - 0.4) * 72 / 4.3))
        self.title = 0.8 + 0.15 * self.how.count("\n")  # the explanation's lines
        self.ops = _operations(schedule, steps)
        legend = max(0.95, 0.35 + 0.2 * (len(self.ops) + 1))
        self.height = self.title + len(self.lines) * self.g.line_height + legend

    def draw(self, ax: Axes) -> None:
        s, g = self.s, self.g
        ax.set_xlim(0, self.width)
        ax.set_ylim(self.height, 0)
        ax.set_aspect("equal")
        ax.set_axis_off()
        palette = _Palette(s.nranks, s.spec.reduces)
        self._marks: list[tuple[np.ndarray, ...]] = []  # cell numbers, drawn at the end
        states = list(contributions(s, stop=self.steps.stop if len(self.steps) else 0))
        rows = {i: step_rows(s, s.step(i), i) for i in self.steps}
        self._title(ax, sum(len(r) for r in rows.values()))
        y = self.title
        for line in self.lines:
            first = line.start if len(line) else self.steps.start
            self._line(ax, y, first, line, states, rows, palette)
            y += g.line_height
        self._legend(ax, y, palette, self.ops)
        self._numbers(ax)

    # -- parts -------------------------------------------------------------------------------
    def _title(self, ax: Axes, nmessages: int) -> None:
        s = self.s
        params = ", ".join(f"{k}={v}" for k, v in s.params.items())
        root = f", root {s.root}" if s.spec.rooted else ""
        head = f"{s.collective} · {s.algorithm}{f' ({params})' if params else ''} · p = {s.nranks}"
        scratch = f" + {s.nslots - s.ndata} scratch" if s.nslots > s.ndata else ""
        shown = (
            ""
            if len(self.steps) == s.nsteps
            else f" (showing steps {self.steps.start}-{self.steps.stop - 1})"
        )
        facts = (
            f"{s.nsteps} steps{shown}, {nmessages} messages drawn, "
            f"{s.ndata} data slot{'s' if s.ndata != 1 else ''} per rank{scratch}{root}"
        )
        ax.text(0.2, 0.12, head, fontsize=12, fontweight="bold", va="top")
        ax.text(0.2, 0.42, facts, fontsize=8.5, va="top")
        ax.text(0.2, 0.62, self.how, fontsize=7.5, va="top", color="#333333")

    def _line(
        self,
        ax: Axes,
        top: float,
        first: int,
        line: range,
        states: list[np.ndarray],
        rows: dict[int, list[MessageRow]],
        palette: _Palette,
    ) -> None:
        g, s = self.g, self.s
        y0 = top + g.header
        ycen = y0 + (np.arange(g.nranks) + 0.5) * g.row
        for r in range(g.nranks):
            name = f"rank {r}" + (" (root)" if s.spec.rooted and r == s.root else "")
            ax.text(g.left - 0.08, ycen[r], name, fontsize=7, ha="right", va="center")
        cols = [first, *(i + 1 for i in line)]
        for c, state in enumerate(cols):
            x = g.left + c * g.pitch
            written = _written(s.step(state - 1), g.nranks, g.nslots) if c else None
            self._cells(ax, x, ycen, states[state], palette, written)
            if c == 0:
                self._slot_numbers(ax, x, y0)
            if state == 0 and c == 0:
                ax.text(x + g.strip / 2, y0 - 0.05, "start", fontsize=7, ha="center", va="bottom")
            if state == s.nsteps:
                ax.text(x + g.strip / 2, y0 - 0.05, "result", fontsize=7, ha="center", va="bottom")
        for c, i in enumerate(line):
            x_from = g.left + c * g.pitch + g.strip
            self._step(ax, i, x_from, x_from + g.gap, ycen, top, rows[i])

    def _cells(
        self,
        ax: Axes,
        x: float,
        ycen: np.ndarray,
        holds: np.ndarray,
        palette: _Palette,
        written: np.ndarray | None,
    ) -> None:
        from matplotlib.collections import PolyCollection

        g = self.g
        h = 0.72 * g.row
        xs = x + g.slot_x()
        x0 = np.broadcast_to(xs, (g.nranks, g.nslots))
        y0 = np.broadcast_to((ycen - h / 2)[:, None], (g.nranks, g.nslots))
        boxes = np.stack(
            [
                np.stack([x0, y0], -1),
                np.stack([x0 + g.cell, y0], -1),
                np.stack([x0 + g.cell, y0 + h], -1),
                np.stack([x0, y0 + h], -1),
            ],
            axis=2,
        ).reshape(-1, 4, 2)
        idx = palette.index(holds)
        lw = 0.4 if g.cell > 0.06 else 0.2
        ax.add_collection(
            PolyCollection(boxes, facecolors=palette.colors[idx.ravel()], edgecolors=_EDGE, lw=lw)
        )
        if written is not None and written.any():
            ax.add_collection(
                PolyCollection(
                    boxes[written.ravel()], facecolors="none", edgecolors="black", lw=1.1
                )
            )
        if g.numbers:
            text, dark = palette.text(holds), palette.dark(idx)
            r, j = np.nonzero(text != "")
            self._marks.append((xs[j] + g.cell / 2, ycen[r], text[r, j], dark[r, j]))

    def _numbers(self, ax: Axes) -> None:
        """The numbers in the cells: one path collection per distinct number (thousands of
        ``Text`` artists would take seconds to render), glyphs sized in points."""
        if not self._marks:
            return
        from matplotlib.collections import PathCollection
        from matplotlib.textpath import TextPath
        from matplotlib.transforms import Affine2D

        x, y, text, dark = (np.concatenate(col) for col in zip(*self._marks, strict=True))
        size = 6 if self.g.cell < 0.2 else 6.5
        points = Affine2D().scale(1 / 72) + ax.figure.dpi_scale_trans
        for word in np.unique(text):
            glyphs = TextPath((0, 0), str(word), size=size)
            (x0, y0), (x1, y1) = glyphs.get_extents().get_points()
            glyphs = Affine2D().translate(-(x0 + x1) / 2, -(y0 + y1) / 2).transform_path(glyphs)
            mine = text == word
            ax.add_collection(
                PathCollection(
                    [glyphs],
                    offsets=np.column_stack([x[mine], y[mine]]),
                    offset_transform=ax.transData,
                    transform=points,
                    facecolors=np.where(dark[mine], "white", "black"),
                    edgecolors="none",
                    zorder=3,
                )
            )

    def _slot_numbers(self, ax: Axes, x: float, y0: float) -> None:
        g = self.g
        if g.cell < 0.1:
            ax.text(
                x, y0 - 0.2, f"slots 0-{g.nslots - 1}", fontsize=5.5, va="bottom", color="#555555"
            )
            return
        for j, sx in enumerate(g.slot_x()):
            ax.text(x + sx + g.cell / 2, y0 - 0.2, str(j), fontsize=5.5, ha="center",
                    va="bottom", color="#555555")  # fmt: skip

    def _step(
        self,
        ax: Axes,
        i: int,
        x0: float,
        x1: float,
        ycen: np.ndarray,
        top: float,
        rows: list[MessageRow],
    ) -> None:
        from matplotlib.patches import FancyArrowPatch

        g = self.g
        nmsg = sum(not r.local for r in rows)
        per_sender = np.bincount([r.src for r in rows], minlength=1)
        labelled = per_sender.max(initial=0) <= MAX_LABELS
        note = f"{nmsg} msg{'s' if nmsg != 1 else ''}" if nmsg else "local copies only"
        if not labelled:
            note += f", up to {per_sender.max()} per rank:\narrows unlabelled"
        xm = (x0 + x1) / 2
        ax.text(xm, top + 0.12, f"step {i}", fontsize=8.5, fontweight="bold", ha="center",
                va="center")  # fmt: skip
        ax.text(xm, top + 0.28, note, fontsize=6, ha="center", va="top", color="#444444")
        alpha = 0.9 if nmsg <= 2 * g.nranks else 0.45
        pad = 0.04
        seen: dict[int, int] = {}
        for r in rows:
            ya, yb = ycen[r.src], ycen[r.dst]
            color, style = (
                (_LOCAL, ":") if r.local else (_REDUCE, "-") if r.reduce else (_COPY, "--")
            )
            ax.add_patch(
                FancyArrowPatch(
                    (x0 + pad, ya),
                    (x1 - pad, yb),
                    arrowstyle="-|>",
                    mutation_scale=6,
                    lw=0.9,
                    ls=style,
                    color=color,
                    alpha=alpha,
                    shrinkA=0,
                    shrinkB=0,
                    zorder=2,
                )
            )
            if labelled:
                k = seen.get(r.src, 0)
                seen[r.src] = k + 1
                many = per_sender[r.src] > 1
                dy = (k - 0.5) * 0.42 * g.row if many else 0.0
                label = r.label()
                if len(label) > 18:
                    label = label[:17] + "…"
                ax.text(
                    x0 + 0.07,
                    ya + dy,
                    label,
                    fontsize=5.8 if many else 6.5,
                    ha="left",
                    va="center",
                    color=color if not r.local else "#444444",
                    zorder=3,
                    bbox=dict(boxstyle="square,pad=0.08", fc="white", ec="none", alpha=0.85),
                )

    def _legend(self, ax: Axes, top: float, palette: _Palette, ops: set[str]) -> None:
        from matplotlib.patches import FancyArrowPatch, Rectangle

        p = self.s.nranks
        x, y = 0.3, top + 0.15
        title = "slot holds (inputs summed)" if palette.reduces else "slot holds input of rank"
        ax.text(x, y, title, fontsize=7, va="top")
        first = 0 if palette.reduces else 1
        n = p + 1 - first
        w = min(0.28, 4.2 / n)
        for k in range(n):
            ax.add_patch(
                Rectangle(
                    (x + k * w, y + 0.2),
                    w,
                    0.16,
                    fc=palette.colors[first + k],
                    ec=_EDGE,
                    lw=0.4,
                )
            )
            if w >= 0.14 or k in (0, n - 1) or k % 4 == 0:
                ax.text(x + (k + 0.5) * w, y + 0.42, str(first + k - (0 if palette.reduces else 1)),
                        fontsize=5.5, ha="center", va="top")  # fmt: skip
        if palette.reduces:
            ax.text(x, y + 0.6, "0 = empty", fontsize=5.5, va="top", color="#555555")
        x = 0.3 + n * w + 0.6
        items = [
            (color, style, text)
            for op, color, style, text in (
                ("reduce", _REDUCE, "-", "⊕ reduce: the receiver adds the slots into its own"),
                ("copy", _COPY, "--", "copy: the receiver overwrites its slots"),
                ("local", _LOCAL, ":", "local copy or reduction within a rank"),
            )
            if op in ops
        ]
        for k, (color, style, text) in enumerate(items):
            yy = y + 0.08 + k * 0.2
            ax.add_patch(
                FancyArrowPatch((x, yy), (x + 0.45, yy), arrowstyle="-|>", mutation_scale=6,
                                lw=0.9, ls=style, color=color, shrinkA=0, shrinkB=0)
            )  # fmt: skip
            ax.text(x + 0.55, yy, text, fontsize=7, va="center")
        yy = y + 0.08 + len(items) * 0.2
        ax.add_patch(Rectangle((x + 0.12, yy - 0.06), 0.2, 0.12, fc="none", ec="black", lw=1.1))
        ax.text(x + 0.55, yy, "slot written by this step", fontsize=7, va="center")
