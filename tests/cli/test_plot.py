"""``commsim compare --plot``: the figures, checked on what is drawn.

Each test runs the command line (``commsim.cli.main``) and inspects the figure it wrote (caught
from :func:`commsim.cli.plot.draw_compare`): text inside the canvas and clear of the panels, every
algorithm's colour visible in every panel, ties named, ticks labelled by :mod:`commsim.units`.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.lines import Line2D

import commsim
from commsim import units
from commsim.cli import plot

FAST_SIZES = "1KiB..1GiB:x8"  # 11 sizes joined by lines, quick to predict


@pytest.fixture
def figure(cli, tmp_path, monkeypatch) -> Callable[..., tuple[int, str, Any]]:
    """``figure("-c", "allreduce", ..., suffix=".png")`` -> ``(rc, stderr, Figure or None)``:
    runs ``compare ... --plot FILE`` and catches the figure drawn."""
    caught: list[Any] = []
    draw = plot.draw_compare

    def spy(*args: Any, **kwargs: Any) -> Any:
        caught.append(draw(*args, **kwargs))
        return caught[-1]

    monkeypatch.setattr(plot, "draw_compare", spy)

    def run(*argv: str, suffix: str = ".png") -> tuple[int, str, Any]:
        path = tmp_path / f"figure{len(caught)}{suffix}"
        rc, out, err = cli("compare", *argv, "--plot", str(path))
        if rc == 0:
            assert f"plot written to {path}" in out and path.stat().st_size > 1000
            caught[-1].canvas.draw()
            return rc, err, caught[-1]
        assert not path.exists()
        return rc, err, None

    return run


# ---------------------------------------------------------------------------------------------
# properties of a drawn figure


def title(fig: Any) -> Any:
    """The figure's title (a Text)."""
    return next(t for t in fig.texts if t.get_text() == fig.get_suptitle())


def title_text(fig: Any) -> str:
    return fig.get_suptitle().replace("\n", " ")


def _texts(fig: Any) -> Iterator[tuple[str, Any]]:
    """Every piece of text with something in it: (what, Text)."""
    yield "title", title(fig)
    for ax in fig.axes:
        yield "panel title", ax.title
        yield "x label", ax.xaxis.label
        yield "y label", ax.yaxis.label
        yield from (("x tick", t) for t in ax.get_xticklabels() if t.get_visible())
        yield from (("y tick", t) for t in ax.get_yticklabels() if t.get_visible())
    for legend in fig.legends:
        yield from (("legend", t) for t in legend.get_texts())


def assert_laid_out(fig: Any) -> None:
    """Title, labels, ticks and legend lie inside the canvas; title and legend off the panels;
    tick labels of one axis apart from each other."""
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    for what, text in _texts(fig):
        if not text.get_text():
            continue
        box = text.get_window_extent(renderer)
        assert canvas.x0 - 1 <= box.x0 and box.x1 <= canvas.x1 + 1, (what, text.get_text())
        assert canvas.y0 - 1 <= box.y0 and box.y1 <= canvas.y1 + 1, (what, text.get_text())
    (legend,) = fig.legends
    boxes = [title(fig).get_window_extent(renderer), legend.get_window_extent(renderer)]
    for ax in fig.axes:
        for box in boxes:
            assert not box.overlaps(ax.get_window_extent(renderer))
        assert not boxes[1].overlaps(ax.get_tightbbox(renderer))  # ticks and labels too
        for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            shown = [t.get_window_extent(renderer) for t in labels if t.get_text()]
            assert not any(a.overlaps(b) for a, b in itertools.pairwise(shown))


def assert_ticks_use_commsim_units(fig: Any) -> None:
    """Every labelled tick reads as format_size / format_time of where it is; minor ticks carry
    no label; each row shows two time labels or more, each column a size label or more."""
    fig.canvas.draw()
    for ax in fig.axes:
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        xs = [(t.get_position()[0], t.get_text()) for t in ax.get_xticklabels()]
        ys = [(t.get_position()[1], t.get_text()) for t in ax.get_yticklabels()]
        assert all(text == units.format_size(round(v)) for v, text in xs if x0 <= v <= x1)
        assert all(text == units.format_time(v) for v, text in ys if y0 <= v <= y1)
        assert not any(t.get_text() for t in ax.get_yticklabels(minor=True))
        assert not any(t.get_text() for t in ax.get_xticklabels(minor=True))
        if ax.get_subplotspec().is_first_col():
            assert len({text for v, text in ys if y0 <= v <= y1 and text}) >= 2
        if ax.xaxis.label.get_text():  # the bottom panel of its column
            assert len({text for v, text in xs if x0 <= v <= x1 and text}) >= 1


def legend_labels(fig: Any) -> list[str]:
    (legend,) = fig.legends
    return [t.get_text() for t in legend.get_texts()]


def curve_names(fig: Any) -> list[str]:
    names = [label.split(" (= ")[0] for label in legend_labels(fig)]
    return [name for name in names if name != plot.BOUND]


def rendered(fig: Any) -> np.ndarray:
    """The figure drawn, as ``[rows, columns, RGB]`` floats."""
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(float)


def colour_pixels(image: np.ndarray, ax: Any, colour: str) -> int:
    """How many pixels inside ``ax`` of the drawn figure ``image`` (:func:`rendered`) show
    ``colour`` (within anti-aliasing)."""
    box = ax.get_window_extent()
    height = image.shape[0]
    rows = slice(int(height - box.y1) + 2, int(height - box.y0) - 2)
    cols = slice(int(box.x0) + 2, int(box.x1) - 2)
    target = np.array(to_rgb(colour)) * 255
    return int((np.abs(image[rows, cols] - target).max(axis=-1) < 40).sum())


def assert_every_curve_shows(fig: Any) -> None:
    """In every panel, every algorithm drawn there shows its own colour, and the bound is
    drawn with something finite in view."""
    image = rendered(fig)  # one drawing for every panel and colour
    for ax in fig.axes:
        lines = [a for a in ax.get_children() if getattr(a, "get_label", None)]
        here = {a.get_label() for a in lines if isinstance(a, Line2D)}
        for name in curve_names(fig):
            if name not in here:
                continue
            colour = next(a.get_color() for a in lines if a.get_label() == name)
            assert colour_pixels(image, ax, colour) >= 30, (ax.get_title(), name)
        bound = [a for a in lines if a.get_label() == plot.BOUND]
        assert bound and all(b.get_visible() for b in bound), ax.get_title()


# ---------------------------------------------------------------------------------------------
# the reported problems


def test_size_zero_alone_is_refused_in_one_line(figure):
    rc, err, fig = figure("-c", "allreduce", "-p", "8", "-s", "0")
    assert rc == 2 and fig is None
    assert err.count("\n") == 1 and err.startswith("commsim: error: --plot")
    assert "Traceback" not in err and "0B" in err


def test_sizes_of_zero_are_left_out_with_a_note(figure):
    rc, _, fig = figure("-c", "allreduce", "-p", "4,8", "-s", "0,1KiB..1MiB:x4")
    assert rc == 0
    assert "not drawn: size 0B (log axis)" in title_text(fig)
    for ax in fig.axes:
        for line in ax.get_lines():
            assert (np.asarray(line.get_xdata()) > 0).all()
    assert_laid_out(fig)
    assert_ticks_use_commsim_units(fig)
    assert_every_curve_shows(fig)


def test_a_model_with_every_time_zero_is_refused_in_one_line(figure):
    argv = ["-c", "allreduce", "-p", "8", "-s", "1KiB", "--alpha", "0", "--beta", "inf"]
    rc, err, fig = figure(*argv, "--gamma", "inf")
    assert rc == 2 and fig is None
    assert err.count("\n") == 1 and "nothing to draw" in err


def test_a_panel_with_every_time_zero_is_left_out_with_a_note(figure):
    rc, _, fig = figure("-c", "allreduce", "-a", "ring,binomial", "-p", "1,8", "-s", FAST_SIZES)
    assert rc == 0 and len(fig.axes) == 1 and fig.axes[0].get_title() == "p = 8"
    assert "p=1 (every time is 0s)" in title_text(fig)


def _listed(collective: str) -> list[str]:
    """The rows a command without -a shows: all but those whose helpers are a switch (nvls)."""
    names = commsim.available(collective)
    return [a for a in names if commsim.algorithms.info(collective, a).helpers_for is None]


def test_one_panel_with_every_allreduce_algorithm_fits_and_shows_every_curve(figure):
    rc, _, fig = figure("-c", "allreduce", "-p", "8")
    assert rc == 0
    labels = legend_labels(fig)
    assert len(labels) == len(_listed("allreduce")) + 1 and plot.BOUND in labels
    assert "direct (= ring)" in labels and "ring" in labels  # the tie, named once
    assert_laid_out(fig)
    assert_ticks_use_commsim_units(fig)
    assert_every_curve_shows(fig)


def test_reduce_scatter_ties_all_show(figure):
    rc, _, fig = figure("-c", "reduce_scatter", "-p", "8", "-s", FAST_SIZES)
    assert rc == 0
    labels = legend_labels(fig)
    assert {"direct (= ring)", "pairwise (= ring)"} <= set(labels)
    (ax,) = fig.axes
    tied = [line for line in ax.get_lines() if line.get_label() in ("ring", "direct", "pairwise")]
    assert len({str(line.get_linestyle()) + str(line._dash_pattern) for line in tied}) == 3
    assert_every_curve_shows(fig)


def test_ties_in_one_panel_only_are_named_in_its_title(figure):
    rc, _, fig = figure("-c", "allreduce", "-a", "ring,direct,rabenseifner", "-p", "2,8")
    assert rc == 0
    p2, p8 = fig.axes
    assert "ties: ring = direct = rabenseifner" in p2.get_title().replace("\n", " ")
    assert p8.get_title() == "p = 8"
    assert "rabenseifner" in legend_labels(fig)  # not a tie everywhere: no "(= ...)"
    assert_every_curve_shows(fig)


def test_the_bound_is_drawn_on_top_and_labelled(figure):
    rc, _, fig = figure("-c", "allgather", "-p", "8", "-s", FAST_SIZES)
    assert rc == 0 and "lower bound (= bruck)" in legend_labels(fig)
    (ax,) = fig.axes
    (bound,) = [line for line in ax.get_lines() if line.get_label() == plot.BOUND]
    assert bound.get_linestyle() == "--" and bound.get_color() == "k"
    assert bound.get_zorder() > max(
        line.get_zorder() for line in ax.get_lines() if line is not bound
    )


@pytest.mark.parametrize(
    ("nranks", "shape"),
    [("8", (1, 1)), ("8,64", (1, 2)), ("8,16,64", (1, 3)), ("2..16", (2, 2)), ("2..128", (3, 3))],
)
def test_panels_are_laid_out_for_any_count(figure, nranks, shape):
    rc, _, fig = figure("-c", "allreduce", "-p", nranks, "-s", FAST_SIZES)
    assert rc == 0
    assert fig.axes[0].get_subplotspec().get_gridspec().get_geometry() == shape
    assert_laid_out(fig)
    assert_ticks_use_commsim_units(fig)


@pytest.mark.parametrize("collective", ["broadcast", "reduce", "alltoall", "allgather"])
def test_every_collective(figure, collective):
    rc, _, fig = figure("-c", collective, "-p", "8,64", "-s", FAST_SIZES)
    drawn = {line.get_label() for ax in fig.axes for line in ax.get_lines()}
    assert rc == 0 and set(curve_names(fig)) == drawn - {plot.BOUND}
    assert_laid_out(fig)
    assert_every_curve_shows(fig)


def test_one_size_is_drawn_as_points_side_by_side(figure):
    rc, _, fig = figure("-c", "allreduce", "-p", "8", "-s", "1KiB")
    assert rc == 0
    (ax,) = fig.axes
    points = [line for line in ax.get_lines() if line.get_label() != plot.BOUND]
    n = len(_listed("allreduce"))
    assert len(points) == n and all(line.get_linestyle() == "None" for line in points)
    xs = [float(line.get_xdata()[0]) for line in points]
    assert len(set(xs)) == n and all(ax.get_xlim()[0] < x < ax.get_xlim()[1] for x in xs)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1KiB"]
    assert_laid_out(fig)
    assert_ticks_use_commsim_units(fig)
    assert_every_curve_shows(fig)


def test_two_sizes_far_apart_are_not_joined_and_their_ticks_are_labelled(figure):
    rc, _, fig = figure("-c", "allreduce", "-p", "8", "-s", "4KiB,64MiB")
    assert rc == 0
    (ax,) = fig.axes
    assert all(line.get_linestyle() == "None" for line in ax.get_lines())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4KiB", "64MiB"]
    assert_ticks_use_commsim_units(fig)
    assert_every_curve_shows(fig)


def test_sizes_out_of_order_are_drawn_in_order(figure):
    rc, _, fig = figure("-c", "allreduce", "-a", "ring", "-p", "8", "-s", "64KiB,1KiB,16KiB,4KiB")
    assert rc == 0
    (ring,) = [line for line in fig.axes[0].get_lines() if line.get_label() == "ring"]
    assert list(ring.get_xdata()) == [1024, 4096, 16384, 65536]


def test_one_algorithm_alone(figure):
    rc, _, fig = figure("-c", "allreduce", "-a", "ring", "-p", "8", "-s", "64MiB")
    assert rc == 0 and sorted(legend_labels(fig)) == [plot.BOUND, "ring"]
    assert_laid_out(fig)
    assert_ticks_use_commsim_units(fig)


@pytest.mark.parametrize(("suffix", "magic"), [(".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_svg_and_pdf(figure, tmp_path, suffix, magic):
    rc, _, fig = figure("-c", "allreduce", "-p", "8,64", "-s", FAST_SIZES, suffix=suffix)
    assert rc == 0
    (path,) = tmp_path.glob(f"*{suffix}")
    assert path.read_bytes().startswith(magic)
    assert_laid_out(fig)


def test_multi_port_title_fits(figure):
    rc, _, fig = figure("-c", "allreduce", "-p", "8", "-s", FAST_SIZES, "--ports", "multi")
    assert rc == 0 and "multi-port (shared link)" in title_text(fig)
    assert_laid_out(fig)


def test_skipped_algorithms_are_noted(figure):
    argv = ["-c", "allreduce", "-a", "ring,direct", "-p", "8,4096", "-s", "1KiB,1MiB"]
    rc, _, fig = figure(*argv, "--memory-limit", "16MiB")
    assert rc == 0 and len(fig.axes) == 2
    assert "direct at p=4096 (skipped" in title_text(fig)


def test_too_many_panels_are_refused_in_one_line(figure):
    rc, err, _ = figure("-c", "allreduce", "-a", "ring", "-p", "1..40:+1", "-s", "1KiB")
    assert rc == 2 and err.count("\n") == 1 and f"at most {plot.MAX_PANELS}" in err


# ---------------------------------------------------------------------------------------------
# the figure code on its own


class _Panel:
    def __init__(self, nranks: int, times: dict[str, list[float]], bound: list[float]) -> None:
        self.nranks, self.skipped = nranks, {}
        self.times = {a: np.array(t) for a, t in times.items()}
        self.lower_bound = np.array(bound)


def test_a_long_model_description_and_many_algorithms_wrap_inside_the_figure():
    names = [f"algorithm_with_a_long_name_{i}" for i in range(9)]
    sizes = np.array([2.0**k for k in range(10, 31, 2)])
    times = {a: list(1e-6 * (i + 1) + sizes * 1e-10) for i, a in enumerate(names)}
    model = "Model " + " ".join(f"parameter_{i}=1.{i}us" for i in range(30))
    fig = plot.draw_compare("allreduce", model, sizes, [_Panel(8, times, list(sizes * 5e-11))])
    fig.canvas.draw()
    assert fig.get_suptitle().count("\n") >= 3
    assert_laid_out(fig)
    assert_every_curve_shows(fig)


def test_times_of_zero_are_left_out_with_a_note():
    sizes = np.array([1024.0, 2048.0, 4096.0])
    panel = _Panel(2, {"a": [0.0, 1e-6, 2e-6], "b": [1e-6, 2e-6, 3e-6]}, [0.0, 5e-7, 1e-6])
    fig = plot.draw_compare("allgather", "Hockney", sizes, [panel])
    fig.canvas.draw()
    assert "times of 0s (log axis)" in title_text(fig)
    assert_laid_out(fig)
    assert_ticks_use_commsim_units(fig)


@pytest.mark.parametrize(
    ("lo", "hi"), [(1e-9, 1e3), (1e-6, 2e-6), (5.3e-6, 47e-6), (1.01, 3.03), (2e-3, 9e-3)]
)
def test_time_ticks_are_few_distinct_and_labelled(lo, hi):
    major, minor = plot._time_ticks(lo, hi)
    labels = [units.format_time(v) for v in major]
    assert 2 <= len(major) <= 9 and len(set(labels)) == len(labels)
    assert all(lo <= v <= hi for v in major + minor)


def test_importing_the_command_line_does_not_import_matplotlib():
    code = "import sys, commsim, commsim.cli; assert 'matplotlib' not in sys.modules"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
