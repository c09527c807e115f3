"""``pipeline(schedule, chunks)``: a schedule as a wavefront of chunks (issue #19 item 4).

The pipelined schedule is an ordinary one: the verifier proves it for every registry row (helper
ranks and rooted collectives included), a multi-channel schedule keeps its channels, two chunks
that send between one pair of ranks in one step are one message, and single-port Hockney charges
exactly the module's formula (the bytes of the schedule, the wavefront's latencies).
"""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim._messages import messages
from commsim.algorithms import REGISTRY, build, channels, info, pipeline
from commsim.algorithms._pipeline import MAX_CHUNKS, wavefront_messages
from commsim.errors import ParameterError
from commsim.exec import execute, layout, random_inputs
from commsim.models import Hockney

ROWS = [REGISTRY[key] for key in sorted(REGISTRY)]
P = (1, 2, 5, 8)  # one rank, a pair, a prime, a power of two
MODELS = [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (2.7e-6, 3.1e-10, 7.7e-11)]
SIZES = np.array([0.0, 8.0, 4096.0, 1e6 + 3])


def _build(row, p: int):
    root = {"root": p - 1} if commsim.spec(row.collective).rooted else {}
    return build(row.collective, row.algorithm, nranks=p, **root)


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.collective}/{r.algorithm}" for r in ROWS])
def test_every_registry_row_pipelined_verifies(row):
    for p in P:
        s = _build(row, p)
        for k in (2, 3):
            pk = pipeline(s, k)
            commsim.verify(pk)
            assert pk.nsteps == (s.nsteps + k - 1 if s.nsteps else 0)
            assert (pk.nslots, pk.ndata, pk.root) == (k * s.nslots, k * s.ndata, s.root)
            assert (pk.helpers, pk.nchannels) == (s.helpers, s.nchannels)
            assert pk.params == {**s.params, "pipeline": k}


def test_one_chunk_is_the_schedule_itself():
    s = build("allreduce", "hierarchical", nranks=16, ranks_per_node=4)
    assert pipeline(s, 1) is s
    same = build("allreduce", "hierarchical", nranks=16, ranks_per_node=4, pipeline=1)
    assert same.fingerprint == s.fingerprint and same.params == s.params


def test_helper_ranks_and_channels_are_kept():
    ps = build("allreduce", "parameter_server", nranks=6, placement="dedicated")
    assert ps.helpers
    pk = pipeline(ps, 3)
    commsim.verify(pk)
    assert pk.helpers == ps.helpers
    pk = pipeline(channels(build("allgather", "ring", nranks=5), 2), 3)
    commsim.verify(pk)
    assert pk.nchannels == 2
    assert {int(c) for st in pk.steps() for c in st.channel} == {0, 1}


def test_chunks_between_one_pair_in_one_step_are_one_message():
    """Ring step 1 of chunk 0 and step 0 of chunk 1 both send r -> r+1: one message each."""
    ring = build("allreduce", "ring", nranks=4)
    pk = pipeline(ring, 2)
    st = pk.step(1)
    assert st.ntransfers == 2 * ring.step(0).ntransfers  # two chunks' transfers
    msg = messages(st, pk)
    assert len(msg.src) == 4 and (msg.units == 2 * ring.slot_units[0]).all()


def test_wavefront_messages_counts_patterns_per_window():
    assert wavefront_messages([], 4) == 0
    assert wavefront_messages([0, 0, 0], 5) == 3 + 5 - 1  # one pattern: one message per step
    # two phases of a and b steps: K - 1 more steps, K - 1 where they meet
    for a, b, k in [(3, 2, 2), (3, 2, 4), (1, 1, 7)]:
        assert wavefront_messages([0] * a + [1] * b, k) == a + b + 2 * (k - 1)


@pytest.mark.parametrize(
    ("collective", "formula"),
    [
        ("reduce_scatter", lambda k, a, b: 2 * (k - 1)),
        ("allgather", lambda k, a, b: 2 * (k - 1)),
        ("allreduce", lambda k, a, b: (k - 1) + (k - 1) + min(k - 1, b)),
    ],
)
@pytest.mark.parametrize(("p", "g"), [(16, 4), (24, 8), (6, 2)])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_two_phase_cost_is_the_formula_and_hockneys(collective, formula, p, g, k):
    """Hockney's time of the pipelined hierarchical schedule is the unpipelined one plus the
    docstring's latencies, and the row's cost_fn says the same."""
    row = info(collective, "hierarchical")
    n = p // g
    b = 2 * (n - 1) if collective == "allreduce" else n - 1
    s1 = build(collective, "hierarchical", nranks=p, ranks_per_node=g)
    sk = build(collective, "hierarchical", nranks=p, ranks_per_node=g, pipeline=k)
    assert row.is_exact(p, ranks_per_node=g, pipeline=k)
    for alpha, beta, gamma in MODELS:
        model = Hockney(alpha, beta, gamma)
        t1, tk = model.predict(s1, SIZES).time, model.predict(sk, SIZES).time
        np.testing.assert_allclose(tk, t1 + formula(k, g - 1, b) * alpha, rtol=1e-12, atol=0)
        want = row.time(p, SIZES, alpha, beta, gamma, ranks_per_node=g, pipeline=k)
        np.testing.assert_allclose(tk, want, rtol=1e-12, atol=0)


def test_existing_results_are_unchanged_by_the_new_parameter():
    for collective in ("allreduce", "reduce_scatter", "allgather"):
        row = info(collective, "hierarchical")
        for inter in ("ring", "recursive_doubling" if collective == "allgather" else "ring"):
            got = row.time(64, SIZES, 1e-6, 1e-9, 1e-10, inter=inter)
            assert (got == row.time(64, SIZES, 1e-6, 1e-9, 1e-10, inter=inter, pipeline=1)).all()
    tree = info("allreduce", "nccl_tree")
    assert (tree.time(32, SIZES, 1e-6, 1e-9, 0.0) == tree.time(32, SIZES, 1e-6, 1e-9, 0.0)).all()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None, MAX_CHUNKS + 1])
def test_bad_chunks_are_a_parameter_error(bad):
    s = build("allreduce", "ring", nranks=4)
    with pytest.raises(ParameterError, match="chunks must be an integer"):
        pipeline(s, bad)
    with pytest.raises(ParameterError, match="pipeline must be an integer"):
        build("allreduce", "hierarchical", nranks=8, ranks_per_node=4, pipeline=bad)


def test_the_cli_takes_pipeline_and_refuses_a_bad_one_in_one_line(capsys):
    from commsim.cli import main

    args = ["predict", "-c", "allreduce", "-p", "16", "--param", "ranks_per_node=4", "-s", "1MiB"]
    assert main([*args, "-a", "hierarchical", "--param", "pipeline=3"]) == 0
    assert "hierarchical" in capsys.readouterr().out
    assert main([*args, "-a", "nccl_tree", "--param", "pipeline=0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "pipeline must be an integer" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("p", [3, 8])
def test_the_numpy_executor_runs_a_pipelined_schedule(p):
    s = build("allreduce", "nccl_tree", nranks=p, ranks_per_node=4, segments=1, pipeline=3)
    lay = layout(s, 2 * s.nbytes_units)
    execute(s, random_inputs(lay, np.float32, seed=p), backend="numpy")  # checks the result


def test_the_tuner_grows_pipeline_and_stops_where_it_helps_nowhere():
    """Under single-port Hockney a deeper pipeline only adds latencies: the walk stops at 2."""
    from commsim.tuner import sweep

    sizes = np.array([1e3, 1e6, 1e9])
    r = sweep("allreduce", Hockney(), 16, sizes, algorithms=["hierarchical"], progress=False)
    assert [c.params["pipeline"] for c in r.candidates] == [1, 2]
    assert (r.best() == 0).all()
    tree = sweep("allreduce", Hockney(), 16, sizes, algorithms=["nccl_tree"], progress=False)
    assert all("pipeline" not in c.params for c in tree.candidates)  # segments grows first


def test_a_depth_the_row_refuses_ends_the_family(monkeypatch):
    import commsim.algorithms._pipeline as pl
    from commsim.tuner._candidates import families

    monkeypatch.setattr(pl, "MAX_CHUNKS", 4)
    [family] = families("allreduce", 16, "hierarchical", {}, 1e9)
    assert [c.params["pipeline"] for c in family] == [1, 2, 4]


def test_wavefront_rounds_weigh_each_pattern_and_are_checked():
    # patterns 0, 1, 0 on 1 chunk: each step once, with its rounds
    assert wavefront_messages([0, 1, 0], 1, rounds=[2, 3, 2]) == 7
    # two chunks of [a, b]: steps hold a; a and b; b
    assert wavefront_messages([0, 1], 2, rounds=[1, 3]) == 2 * 1 + 2 * 3
    assert wavefront_messages([0, 1], 2, rounds=[1, 1]) == wavefront_messages([0, 1], 2)
    for bad in ([1], [1, 3, 99], [-1, 3], [1.5, 3]):
        with pytest.raises(ParameterError, match="one integer >= 0 per step"):
            wavefront_messages([0, 1], 2, rounds=bad)
    with pytest.raises(ParameterError, match="equal for equal patterns"):
        wavefront_messages([0, 0], 2, rounds=[1, 5])
