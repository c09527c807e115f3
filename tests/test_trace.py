"""Chrome traces of predictions (``commsim.models.chrome_trace``) and of measured steps
(``step_trace``): valid Trace Event Format, tracks that nest, one send slice per message, flow
arrows bound to the sender's and the receiver's slices, and the last event at the predicted time.

The timelines behind them (``Hockney.timeline``, ``LogGP.timeline``) run the clocks of
``predict``: their last end is the prediction's time, and each message's duration is the
model's formula for it, derived here independently.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim import Schedule, Step
from commsim.errors import ParameterError, ResourceError
from commsim.models import Hockney, LogGP, Topology, TwoLevelHockney, chrome_trace, step_trace
from commsim.profiles import Piece, PiecewiseLinear
from commsim.topology import fat_tree, torus

_spec = importlib.util.spec_from_file_location(
    "trace_checks", Path(__file__).with_name("trace_checks.py")
)
assert _spec is not None and _spec.loader is not None
checks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checks)
check_trace, check_prediction_trace = checks.check_trace, checks.check_prediction_trace
count_messages, thread_names = checks.count_messages, checks.thread_names

RABENSEIFNER_16 = commsim.build("allreduce", "rabenseifner", nranks=16)
MiB = 2.0**20


@pytest.mark.parametrize(
    "model",
    [
        Hockney(),
        LogGP(),
        Topology(torus((4, 4))),
        Topology(fat_tree(16, hosts_per_leaf=4, oversubscription=2), contention="flow"),
        TwoLevelHockney(("1us", "100GB/s"), ("5us", "10GB/s"), ranks_per_node=4),
    ],
    ids=["hockney", "loggp", "topology-torus", "topology-flow", "two-level"],
)
def test_rabenseifner_trace_at_16_ranks(model):
    """The acceptance case: Rabenseifner allreduce, p = 16, 1 MiB, each model's defaults."""
    doc = check_prediction_trace(model, RABENSEIFNER_16, MiB)
    assert doc["otherData"]["model"] == model.describe()
    links = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 2]
    assert bool(links) == (not isinstance(model, Hockney | LogGP))


@pytest.mark.parametrize(
    ("collective", "name", "p"),
    [
        ("allreduce", "ring", 5),
        ("allreduce", "rabenseifner", 6),
        ("broadcast", "binomial", 7),
        ("allgather", "ring", 4),
        ("reduce_scatter", "ring", 3),
    ],
)
@pytest.mark.parametrize("model", [Hockney(), LogGP(g=2e-6)], ids=["hockney", "loggp"])
def test_timeline_ends_at_the_prediction(model, collective, name, p):
    """The timeline runs predict's clocks (through the general path): its last end is the
    predicted time and each rank's last event is its finish time."""
    s = commsim.build(collective, name, nranks=p)
    for n in (1e3, 3e6):
        pred, tl = model.predict(s, n), model.timeline(s, n)
        assert tl.last_end == pytest.approx(pred.time, rel=1e-15)
        assert tl.nmessages == count_messages(s)
        ends = np.zeros(p)
        np.maximum.at(ends, tl.dst, tl.reduce_end)
        np.maximum.at(ends, tl.src, tl.send_end)
        np.testing.assert_allclose(ends, pred.rank_time, rtol=1e-15)


def test_hockney_messages_cost_alpha_plus_bytes_beta():
    """Each message of a Hockney timeline lasts α + bβ, reduces for bγ after it arrives, and
    starts when both ends are ready: after everything its sender and receiver did in earlier
    steps (a rank's send and receive of one round overlap: full duplex)."""
    m = Hockney(alpha=1e-6, beta=1e-9, gamma=2e-10)
    s = commsim.build("allreduce", "ring", nranks=4)
    n = 4e6
    tl = m.timeline(s, n)
    b = n / 4  # ring: a quarter of the vector per message
    np.testing.assert_allclose(tl.end - tl.start, 1e-6 + b * 1e-9, rtol=1e-12)
    red = np.where(tl.step < 3, b * 2e-10, 0.0)  # reduce-scatter steps reduce, allgather copy
    np.testing.assert_allclose(tl.reduce_end - tl.end, red, rtol=1e-9, atol=1e-18)
    for r in range(4):
        mine = np.flatnonzero((tl.src == r) | (tl.dst == r))
        done = np.where(tl.src[mine] == r, tl.end[mine], tl.reduce_end[mine])
        for k in range(1, s.nsteps):
            now, before = tl.step[mine] == k, tl.step[mine] < k
            assert tl.start[mine][now].min() >= done[before].max()


def test_loggp_messages_follow_the_eager_rules():
    """LogGP: a send's slice is its overhead o; a receive takes o + (s - 1)G from when the
    receiver takes it, which is no earlier than t + o + L."""
    m = LogGP(L=1e-6, o=0.3e-6, g=0.1e-6, G=1e-9, gamma=0.0)
    s = commsim.build("broadcast", "binomial", nranks=8)
    n = 1e5
    tl = m.timeline(s, n)
    np.testing.assert_allclose(tl.send_end - tl.start, 0.3e-6, rtol=1e-9)
    np.testing.assert_allclose(tl.end - tl.recv_start, 0.3e-6 + (n - 1) * 1e-9, rtol=1e-9)
    assert (tl.recv_start >= tl.start + 1.3e-6 - 1e-15).all()


def test_piecewise_hockney_traces_like_its_prediction():
    """A measured message curve takes the numpy round path; the trace still ends at predict."""
    curve = PiecewiseLinear((Piece(0, 1e-6, 1e-9), Piece(65536, 5e-6, 5e-10)))
    check_prediction_trace(
        Hockney(message=curve), commsim.build("allreduce", "ring", nranks=6), MiB
    )


def test_local_reductions_are_drawn():
    """A hand-made schedule whose rank 1 reduces a received slot into its own data locally:
    the local reduction is a slice on its receive track, and the trace ends with it."""
    steps = [
        Step.make(0, 1, 0, 1),  # rank 0's slot 0 into rank 1's scratch slot 1
        Step.make(1, 1, 1, 0, reduce=True),  # rank 1 adds it into its slot 0
    ]
    s = Schedule.from_steps(steps, collective="reduce", nranks=2, nslots=2, ndata=1, root=1)
    for model in (Hockney(), LogGP()):
        tl = model.timeline(s, 1e6)
        assert tl.local_rank.tolist() == [1]
        assert tl.local_end[0] - tl.local_start[0] == pytest.approx(1e6 * model.gamma)
        doc = check_prediction_trace(model, s, 1e6)
        local = [e for e in doc["traceEvents"] if e.get("name") == "local reduce"]
        assert [e["tid"] for e in local] == [3]


def test_refusals_are_one_line():
    s = commsim.build("allreduce", "ring", nranks=4)
    with pytest.raises(ParameterError, match="single-port") as e:
        Hockney(ports="multi").timeline(s, 1e6)
    assert "\n" not in str(e.value)
    with pytest.raises(ParameterError, match="one message size"):
        Hockney().timeline(s, [1e3, 1e6])

    class NoTimeline:
        name = "mine"

    with pytest.raises(ParameterError, match="'mine' has no timeline"):
        chrome_trace(NoTimeline(), s, 1e6)


@pytest.mark.parametrize("model", [Hockney(), LogGP()], ids=["hockney", "loggp"])
def test_a_trace_past_the_event_budget_is_refused_early(model):
    """Ring allreduce on 1024 ranks has 2.1 M messages, five events each: refused, one line."""
    s = commsim.build("allreduce", "ring", nranks=1024)
    with pytest.raises(ResourceError, match="refused") as e:
        chrome_trace(model, s, 1e6)
    assert "\n" not in str(e.value)


def test_step_trace_of_measured_steps():
    """Measured intervals: one track per rank, a slice per (rank, step) with traffic, an arrow
    per message from the sender's step to the receiver's; NaN (no part in a step) draws nothing."""
    s = commsim.build("broadcast", "binomial", nranks=4)  # 2 steps: 0 -> 2, then 0 -> 1, 2 -> 3
    start = np.array([[0.0, 2.0], [np.nan, 2.0], [0.0, 2.0], [np.nan, 2.5]]) * 1e-6
    end = start + 1e-6
    doc = step_trace(s, start, end, backend="mpi")
    tracks = check_trace(doc)
    assert set(thread_names(doc).values()) == {f"rank {r}" for r in range(4)}
    assert sum(len(t) for t in tracks.values()) == 2 + 4  # ranks 0, 2; then all four
    assert sum(e["ph"] == "s" for e in doc["traceEvents"]) == count_messages(s) == 3
    assert doc["otherData"]["backend"] == "mpi"
    with pytest.raises(ParameterError, match=r"\[4, 2\]"):
        step_trace(s, start[:, :1], end[:, :1])


def test_an_arrow_never_points_back_when_the_slices_overlap():
    """A measured sender whose step lasts long (it also waits for its own receive) and a
    receiver done early: the arrow sits in the time both steps share, not midpoint to midpoint."""
    s = commsim.build("allreduce", "ring", nranks=2)
    start = np.array([[0.0, 200.0], [10.0, 200.0]]) * 1e-6
    end = np.array([[100.0, 201.0], [40.0, 201.0]]) * 1e-6
    doc = step_trace(s, start, end)
    check_trace(doc)
    first = [e for e in doc["traceEvents"] if e["ph"] in "sf" and e["id"] == 0]
    assert [(e["ph"], e["tid"]) for e in first] == [("s", 0), ("f", 1)]
    assert [e["ts"] for e in first] == pytest.approx([25.0, 25.0])
