"""The schedule diagram (``commsim.viz``): the symbolic slot contents behind it, the message
table, and the figures themselves."""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest

import commsim
from commsim._messages import messages
from commsim.viz import contributions, draw_schedule, message_rows
from commsim.viz._contents import apply_step, initial_contributions
from commsim.viz._diagram import MAX_RANKS, _kinds, _lines, figure_size

ALLREDUCE = commsim.available("allreduce")


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _last(s: commsim.Schedule) -> np.ndarray:
    *_, last = contributions(s)
    return last


@pytest.mark.parametrize("algorithm", ALLREDUCE)
@pytest.mark.parametrize("p", [2, 3, 5, 8, 16])
def test_after_the_last_step_every_slot_holds_every_input(algorithm, p):
    s = commsim.build("allreduce", algorithm, p)
    last = _last(s)
    assert last.shape == (p, s.nslots, p)
    w = p - s.helpers  # helper ranks (a switch, a server) hold no input and end with nothing
    assert last[:w, : s.ndata, :w].all()
    assert not last[:, :, w:].any()


@pytest.mark.parametrize("p", [3, 4, 7])
def test_postconditions_of_the_other_collectives(p):
    eye = np.eye(p, dtype=bool)
    for a in commsim.available("allgather"):  # block j of every rank: exactly rank j's input
        s = commsim.build("allgather", a, p)
        block = np.repeat(eye, s.ndata // p, axis=0)  # a block may be several slots
        assert (_last(s) == block[None, :, :]).all(), a
    for a in commsim.available("reduce_scatter"):  # rank r's block r: every input
        s = commsim.build("reduce_scatter", a, p)
        b = s.ndata // p
        last = _last(s)[:, : s.ndata].reshape(p, p, b, p)
        assert last[np.arange(p), np.arange(p)].all(), a
    for a in commsim.available("broadcast"):  # everything is the root's input
        s = commsim.build("broadcast", a, p, root=p - 1)
        assert (_last(s)[:, : s.ndata] == eye[p - 1]).all(), a
    for a in commsim.available("alltoall"):  # output block q of rank r: rank q's input
        s = commsim.build("alltoall", a, p)
        out = _last(s)[:, p : 2 * p]
        assert (out == eye[None, :, :]).all(), a


def test_a_broken_schedule_misses_contributions():
    """The symbolic run is a real check: turn one reduction of a ring into a copy and a
    contribution goes missing."""
    s = commsim.build("allreduce", "ring", 4).materialize()
    steps = list(s.steps())
    red = steps[1].reduce.copy()
    red[0] = False
    steps[1] = steps[1]._replace(reduce=red)
    broken = dataclasses.replace(s, step_fn=steps.__getitem__)
    assert not _last(broken)[:, : s.ndata].all()


def test_reads_happen_before_writes():
    # an exchange: ranks 0 and 1 swap-and-add in one step; both must end with both inputs
    st = commsim.Step.make(src=[0, 1], dst=[1, 0], src_slot=0, dst_slot=0, reduce=True)
    s = commsim.Schedule.from_steps([st], collective="allreduce", nranks=2, nslots=1)
    holds = apply_step(initial_contributions(s), st)
    assert holds.all()
    copy = commsim.Step.make(src=[0, 1], dst=[1, 0], src_slot=0, dst_slot=0, reduce=False)
    swapped = apply_step(initial_contributions(s), copy)
    assert swapped[0, 0].tolist() == [False, True] and swapped[1, 0].tolist() == [True, False]


@pytest.mark.parametrize("algorithm", ["ring", "rabenseifner", "direct", "double_binary_tree"])
def test_message_rows_are_the_messages(algorithm):
    s = commsim.build("allreduce", algorithm, 6)
    rows = message_rows(s)
    want = sorted(
        (k, int(a), int(b), int(u))
        for k, st in enumerate(s.steps())
        for a, b, u in zip(*messages(st, s)[:3], strict=True)
    )
    assert sorted((r.step, r.src, r.dst, r.units) for r in rows if not r.local) == want


def test_labels():
    rows = message_rows(commsim.build("allreduce", "rabenseifner", 8), range(0, 1))
    assert next(r for r in rows if r.src == 0).label() == "→4 ⊕4-7"
    rows = message_rows(commsim.build("alltoall", "bruck", 5))
    local = [r for r in rows if r.local]
    assert local and all(r.label().startswith("local ") for r in local)
    assert local[0].to_dict()["local"] is True


@pytest.mark.parametrize("algorithm", ALLREDUCE)
def test_every_allreduce_algorithm_draws_at_p8(algorithm, tmp_path):
    out = draw_schedule(commsim.build("allreduce", algorithm, 8), tmp_path / f"{algorithm}.png")
    width, height = _png_size(out)
    assert 800 <= width <= 2600 and 300 <= height <= 4000, (width, height)


def test_ring_lines_follow_its_phases():
    s = commsim.build("allreduce", "ring", 8)
    steps = range(s.nsteps)
    assert _lines(steps, _kinds(s, steps), fit=7) == [range(0, 7), range(7, 14)]
    assert _lines(steps, _kinds(s, steps), fit=5) == [range(0, 4), range(4, 7), range(7, 11),
                                                      range(11, 14)]  # fmt: skip
    s = commsim.build("allreduce", "rabenseifner", 8)
    assert _lines(range(6), _kinds(s, range(6)), fit=7) == [range(0, 6)]
    assert _lines(range(6), _kinds(s, range(6)), fit=4) == [range(0, 3), range(3, 6)]


def test_formats_axes_and_step_ranges(tmp_path):
    s = commsim.build("allreduce", "ring", 16)
    for suffix, magic in ((".svg", b"<?xml"), (".pdf", b"%PDF-")):
        assert (
            draw_schedule(s, tmp_path / f"r{suffix}", steps=range(2, 5)).read_bytes()[:5] == magic
        )
    _, h_all = figure_size(s)
    w_few, h_few = figure_size(s, range(2, 5))
    assert h_few < h_all
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w_few, h_few))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    assert draw_schedule(s, ax, steps=range(2, 5)) is ax
    assert len(ax.patches) > 3 * 16  # the arrows of three steps, and the legend's


def test_what_is_refused(tmp_path):
    with pytest.raises(commsim.ParameterError, match=f"at most {MAX_RANKS}.*p=8"):
        draw_schedule(commsim.build("allreduce", "ring", 33), tmp_path / "x.png")
    s = commsim.build("allreduce", "ring", 4)
    with pytest.raises(commsim.ParameterError, match=r"\.png, \.svg or \.pdf"):
        draw_schedule(s, tmp_path / "x.gif")
    with pytest.raises(commsim.ParameterError, match="6"):
        draw_schedule(s, tmp_path / "x.png", steps=range(4, 9))
    assert not (tmp_path / "x.png").exists()
