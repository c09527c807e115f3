"""The message dependency DAG (``commsim.viz.message_graph``) and its critical path."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest

import commsim
from commsim._messages import messages
from commsim.viz import _dag, critical_path, message_graph

CASES = [(c, a) for c in commsim.COLLECTIVES for a in commsim.available(c)]


def _message_list(s: commsim.Schedule) -> list[tuple[int, int, int, int, int]]:
    """``(step, src, dst, units, reduce_units)`` of every message, from ``_messages.messages``."""
    out = []
    for k, st in enumerate(s.steps()):
        m = messages(st, s)
        out += [
            (k, int(a), int(b), int(u), int(r))
            for a, b, u, r in zip(m.src, m.dst, m.units, m.reduce_units, strict=True)
        ]
    return sorted(out)


@pytest.mark.parametrize(("collective", "algorithm"), CASES)
@pytest.mark.parametrize("p", [2, 5, 8])
def test_nodes_are_the_messages_and_the_graph_is_a_dag(collective, algorithm, p):
    s = commsim.build(collective, algorithm, p)
    g = message_graph(s)
    want = _message_list(s)
    assert g.number_of_nodes() == len(want)
    got = sorted(
        (d["step"], d["src"], d["dst"], d["units"], d["reduce_units"])
        for _, d in g.nodes(data=True)
    )
    assert got == want
    for key, d in g.nodes(data=True):  # the channel in the key only where there are several
        assert key == (d["step"], d["src"], d["dst"], d["channel"])[: 3 + (s.nchannels > 1)]
    assert nx.is_directed_acyclic_graph(g)
    for u, v, e in g.edges(data=True):
        assert u[0] < v[0]  # a dependency always points forward in steps
        assert e["order"] or e["data"]
        if e["order"]:  # program order: the two messages share a rank and a channel
            assert {u[1], u[2]} & {v[1], v[2]}
            assert g.nodes[u]["channel"] == g.nodes[v]["channel"]
        if e["data"]:  # v sends what u delivered, or reduces into it
            assert u[2] == v[1] or (u[2] == v[2] and g.nodes[v]["reduce_units"] > 0)


@pytest.mark.parametrize("p", range(2, 10))
def test_ring_allreduce_critical_path_is_2_p_minus_1(p):
    g = message_graph(commsim.build("allreduce", "ring", p))
    path = critical_path(g)
    assert len(path) == 2 * (p - 1)
    assert [k for k, _, _ in path] == list(range(2 * (p - 1)))
    assert all(g.has_edge(u, v) for u, v in itertools.pairwise(path))


@pytest.mark.parametrize("p", [2, 4, 8, 16, 32])
def test_recursive_doubling_critical_path_is_lg_p(p):
    g = message_graph(commsim.build("allreduce", "recursive_doubling", p))
    assert len(critical_path(g)) == int(math.log2(p))


def test_order_edges_are_the_latest_earlier_step_of_both_ranks():
    # binomial reduce on 8 ranks: rank 4 sends to 0 in step 2; rank 4 last took part in step 1
    # (it received from 6), rank 0 in step 1 (it received from 2)
    g = message_graph(commsim.build("reduce", "binomial", 8))
    preds = sorted(g.predecessors((2, 4, 0)))
    assert preds == [(1, 2, 0), (1, 6, 4)]
    assert all(g.edges[u, (2, 4, 0)]["data"] for u in preds)  # both were reduced into slot 0


def test_pipelining_shows_in_the_data_edges():
    """A chain broadcast with segments: program order makes the critical path every step, but
    a segment's own journey down the chain is only p - 1 messages."""
    for p in (4, 8):
        s = commsim.build("broadcast", "chain", p)
        g = message_graph(s)
        assert len(critical_path(g)) == s.nsteps
        data = nx.subgraph_view(g, filter_edge=lambda u, v, g=g: g.edges[u, v]["data"])
        assert len(critical_path(data)) == p - 1


def test_weighted_critical_path():
    s = commsim.build("allreduce", "rabenseifner", 8)
    g = message_graph(s)
    path = critical_path(g, weight="units")  # halving 4 + 2 + 1 slots, doubling 1 + 2 + 4
    assert sum(g.nodes[v]["units"] for v in path) == 14
    double = critical_path(g, weight=lambda m: 2.0 * m["units"])
    assert sum(g.nodes[v]["units"] for v in double) == 14
    assert critical_path(nx.DiGraph()) == []


def test_slots_of_a_node():
    g = message_graph(commsim.build("allreduce", "rabenseifner", 8))
    node = g.nodes[(0, 0, 4)]  # step 0: rank 0 hands the upper half to rank 4
    assert node["slots"] == node["dst_slots"] == ((4, 8),)
    assert node["units"] == node["reduce_units"] == 4


def test_local_copies_pass_on_their_writer():
    """Alltoall Bruck ends with local copies into the output half; the data edges of every
    message still point at the message that delivered the block it sends."""
    s = commsim.build("alltoall", "bruck", 5)
    g = message_graph(s)
    assert nx.is_directed_acyclic_graph(g)
    assert any(e["data"] for *_, e in g.edges(data=True))


def test_several_reductions_into_one_slot_in_one_step():
    # ranks 1, 2 reduce into rank 0 slot 0 in step 0; rank 0 sends it to 3 in step 1
    steps = [
        commsim.Step.make(src=[1, 2], dst=[0, 0], src_slot=0, dst_slot=0, reduce=True),
        commsim.Step.make(src=[0, 3], dst=[3, 0], src_slot=0, dst_slot=0, reduce=True),
    ]
    s = commsim.Schedule.from_steps(steps, collective="reduce", nranks=4, nslots=1)
    g = message_graph(s)
    data = sorted(u for u in g.predecessors((1, 0, 3)) if g.edges[u, (1, 0, 3)]["data"])
    assert data == [(0, 1, 0), (0, 2, 0)]


def test_too_large_is_refused(monkeypatch):
    monkeypatch.setattr(_dag, "MAX_DAG_TRANSFERS", 10)
    with pytest.raises(commsim.ResourceError, match="smaller p"):
        message_graph(commsim.build("allreduce", "ring", 8))
    with pytest.raises(commsim.ParameterError, match="Schedule"):
        message_graph(np.zeros(3))


def test_to_networkx_is_a_deprecated_alias():
    s = commsim.build("allreduce", "ring", nranks=4)
    with pytest.warns(DeprecationWarning, match=r"use commsim.viz.message_graph\(schedule\)"):
        g = s.to_networkx()
    assert nx.utils.graphs_equal(g, message_graph(s))


def test_channels_keep_their_own_program_order():
    """Two rings side by side (channels 0 and 1, IR rule 6): each message waits for its ranks'
    latest messages on its own channel only, so the critical path is one ring's 2(p - 1)."""
    p = 5
    two = commsim.algorithms.channels(commsim.build("allreduce", "ring", p), 2)
    g = message_graph(two)
    assert g.number_of_nodes() == 2 * 2 * (p - 1) * p
    for u, v in g.edges():
        assert u[3] == v[3]  # no edge crosses channels
    assert len(critical_path(g)) == 2 * (p - 1)
    preds = sorted(g.predecessors((1, 1, 2, 1)))  # step 1, rank 1 -> 2 on channel 1
    assert preds == [(0, 0, 1, 1), (0, 1, 2, 1), (0, 2, 3, 1)]
