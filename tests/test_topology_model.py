"""The topology model: equal to Hockney where the network adds nothing, hand-derived contention
cases, the four contention modes where they must agree and where they must differ, link
accounting, time parts, the critical path, stragglers, the lower bound, and errors."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import commsim
from commsim import Schedule, Step
from commsim.algorithms import REGISTRY
from commsim.errors import ParameterError
from commsim.models import Hockney, Topology
from commsim.topology import Network, fat_tree, ring, switch, torus

ROWS = [REGISTRY[k] for k in sorted(REGISTRY)]
SIZES = np.array([0.0, 1.0, 4096.0, 1e6 + 3])
BW = 1e9  # bytes/s of every link in the hand-derived cases


def _build(row, p):
    return commsim.build(row.collective, row.algorithm, nranks=p)


# -- equal to Hockney on a crossbar -------------------------------------------------------------
@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.collective}/{r.algorithm}")
def test_switch_equals_hockney_for_every_row(row):
    """One non-blocking switch whose links each carry half of α: a single-port message never
    shares a link, so none, bottleneck, maxmin and flow all give Hockney's time to 1e-9."""
    for p in (1, 2, 3, 5, 8, 13):
        s = _build(row, p)
        if s.nchannels > 1:  # its channels share a host's link at once, not one after another
            pytest.skip("several channels: not single-port messages")
        if s.in_network:  # its helpers are a reducing switch, which switch(p) is not
            with pytest.raises(ParameterError, match="in-network reduction needs"):
                Topology(switch(p)).predict(s, SIZES)
            continue
        want = Hockney().predict(s, SIZES).time
        for mode in ("none", "bottleneck", "maxmin", "flow"):
            if mode == "flow" and p > 8:
                continue
            pred = Topology(switch(p), contention=mode).predict(s, SIZES)
            np.testing.assert_allclose(pred.time, want, rtol=1e-9, atol=1e-15, err_msg=mode)
            parts = pred.network.time_parts.sum(axis=0)
            np.testing.assert_allclose(parts, pred.time, rtol=1e-9, atol=1e-15)


# -- hand-derived contention ----------------------------------------------------------------------
def test_recursive_doubling_on_a_physical_ring_is_slowed_by_the_partner_distance():
    """Recursive doubling on ring(16), zero latency, γ = 0. In step k rank r exchanges with
    r xor d, d = 2^k. For d < 8 the short way is unique: the lower half of each 2d-block sends
    +d, the upper half -d. The d messages of a block's lower half all cross the link
    (base + d - 1 → base + d), so that link carries d messages and each runs at B/d: the step
    takes d·n/B, not n/B, under bottleneck and under maxmin (every message of the block crosses
    that one link, which fills first). Without contention each step takes n/B."""
    n = 1e6
    s = commsim.build("allreduce", "recursive_doubling", nranks=16)
    net = ring(16, bandwidth=BW, latency=0)
    none = Topology(net, contention="none", gamma=0).predict(s, n).step_time
    for mode in ("bottleneck", "maxmin"):
        st = Topology(net, contention=mode, gamma=0).predict(s, n).step_time
        took = np.diff(np.concatenate([[0.0], st]))
        for k, d in enumerate((1, 2, 4)):
            assert took[k] == pytest.approx(d * n / BW, rel=1e-12)
        # d = 8: both ways are 8 hops (ECMP picks one per pair): 16 messages x 8 hops on 32
        # directed links, so some link carries at least 4 of them
        assert took[3] >= 4 * n / BW * (1 - 1e-12)
    np.testing.assert_allclose(np.diff(np.concatenate([[0.0], none])), n / BW, rtol=1e-12)


@pytest.mark.parametrize("mode", ["none", "bottleneck", "maxmin", "flow"])
def test_ring_allreduce_on_a_ring_shares_nothing(mode):
    """Each ring message crosses one link r → r+1, its own: every mode gives the flat time."""
    s = commsim.build("allreduce", "ring", nranks=8)
    flat = Topology(switch(8, latency=0.5e-6), contention="none").predict(s, SIZES).time
    got = Topology(ring(8, latency=1e-6), contention=mode).predict(s, SIZES).time
    np.testing.assert_allclose(got, flat, rtol=1e-12)


def _one_step(pairs, nranks, units=None):
    """A one-step schedule of messages ``(src, dst)`` (units: slots per message)."""
    units = units or [1] * len(pairs)
    src = np.repeat([a for a, _ in pairs], units)
    dst = np.repeat([b for _, b in pairs], units)
    slot = np.concatenate([np.arange(u) for u in units])
    step = Step.make(src, dst, slot, slot)
    return Schedule.from_steps(
        [step], collective="allreduce", nranks=nranks, slot_units=[1] * max(units)
    )


def test_a_4_to_1_oversubscribed_fat_tree_slows_inter_leaf_traffic_4x():
    """16 hosts per leaf, one spine, oversubscription 4: the leaf's one uplink carries
    16·B/4 = 4B. All 16 hosts of leaf 0 sending to leaf 1 share it: B/4 each, 4x slower than a
    message inside a leaf, which gets its host link's B."""
    net = fat_tree(32, hosts_per_leaf=16, oversubscription=4, spines=1, bandwidth=BW, latency=0)
    n = 1e6  # one slot: every message carries n bytes
    across = _one_step([(i, 16 + i) for i in range(16)], 32)
    inside = _one_step([(i, (i + 1) % 16) for i in range(16)], 32)
    m = Topology(net, gamma=0)
    t_in, t_across = m.predict(inside, n).time, m.predict(across, n).time
    assert t_in == pytest.approx(n / BW, rel=1e-12)
    assert t_across == pytest.approx(4 * t_in, rel=1e-12)


def _shared_link_graph():
    """a, b → s1 → s2 → c, d; the s2 → c link is slow (B/5)."""
    g = nx.Graph()
    for h in "abcd":
        g.add_node(h, kind="host")
    g.add_nodes_from(["s1", "s2"], kind="switch")
    g.add_edges_from([("a", "s1"), ("b", "s1"), ("s1", "s2"), ("s2", "d")], bandwidth=BW)
    g.add_edge("s2", "c", bandwidth=BW / 5)
    return g


def test_modes_differ_where_theory_says():
    """Two messages of n bytes, a → c and b → d, share s1 → s2; a → c also crosses the slow
    (B/5) link. none: B/5 and B. bottleneck: each its smallest equal share, B/5 and B/2.
    maxmin: the slow link fills first, freezing a → c at B/5; b → d takes the rest, 4B/5.
    flow: the same rates (a → c never gets faster), so flow == maxmin here."""
    n = 1e6
    s = _one_step([(0, 2), (1, 3)], 4)  # hosts in order a, b, c, d
    times = {
        mode: Topology(_shared_link_graph(), contention=mode, gamma=0).predict(s, n).rank_time
        for mode in ("none", "bottleneck", "maxmin", "flow")
    }
    b_to_d = {m: t[1] for m, t in times.items()}
    assert b_to_d["none"] == pytest.approx(n / BW)
    assert b_to_d["bottleneck"] == pytest.approx(2 * n / BW)
    assert b_to_d["maxmin"] == pytest.approx(n / (0.8 * BW))
    assert b_to_d["flow"] == pytest.approx(n / (0.8 * BW))
    for m in times:
        assert times[m][0] == pytest.approx(5 * n / BW)  # a → c: its slow link, in every mode


def test_flow_lets_a_message_speed_up_when_its_neighbour_ends():
    """a → c sends 2 slots, b → d 1 slot (n/2 bytes each slot), sharing s1 → s2 (all links B).
    maxmin: both at B/2 for their whole length: a → c takes 2n/B. flow: both at B/2 until b → d
    is done at n/B, then a → c runs alone at B for its last n/2: 1.5 n/B."""
    g = _shared_link_graph()
    g.edges["s2", "c"]["bandwidth"] = BW
    n = 1e6
    s = _one_step([(0, 2), (1, 3)], 4, units=[2, 1])
    mm = Topology(g, contention="maxmin", gamma=0).predict(s, n).rank_time[0]
    fl = Topology(g, contention="flow", gamma=0).predict(s, n).rank_time[0]
    assert mm == pytest.approx(2 * n / BW)
    assert fl == pytest.approx(1.5 * n / BW)


# -- link accounting, time parts, critical path ------------------------------------------------------
def test_link_bytes_equal_an_independent_count():
    """Ring allreduce on ring(8): each link r → r+1 carries 2(p-1) messages of n/p bytes; the
    reverse links carry nothing."""
    p, n = 8, 8e6
    net = Network(ring(p))
    pred = Topology(net).predict(commsim.build("allreduce", "ring", nranks=p), n)
    forward = (net.link_dst - net.link_src) % p == 1
    np.testing.assert_allclose(pred.network.link_bytes[forward, 0], 2 * (p - 1) * n / p)
    assert (pred.network.link_bytes[~forward] == 0).all()
    assert pred.network.utilization.max() <= 1 + 1e-12


@pytest.mark.parametrize("name", ["ring", "rabenseifner", "hierarchical"])
def test_flow_never_uses_a_link_past_its_capacity(name):
    s = commsim.build("allreduce", name, nranks=32)
    net = fat_tree(32, hosts_per_leaf=8, oversubscription=2)
    pred = Topology(net, contention="flow").predict(s, SIZES)
    assert (pred.network.utilization <= 1 + 1e-9).all()


def test_time_parts_name_the_limiting_link_class():
    """A hierarchical allreduce on two servers of 4 GPUs with fast NVLink and a slow NIC: at a
    large size the NIC's class limits it, at a tiny one latency does."""
    from commsim.clusters import build_cluster

    c = build_cluster(
        {
            "nodes": 2,
            "gpus_per_node": 4,
            "intra": {"bandwidth": "400GB/s", "latency": "0.5us"},
            "inter": {"kind": "nic", "bandwidth": "10GB/s", "latency": "2us"},
            "topology": {"kind": "switch"},
        },
        "test",
    )
    s = commsim.build("allreduce", "hierarchical", nranks=8, ranks_per_node=4)
    pred = Topology(c.graph, gamma=0).predict(s, np.array([8.0, 1e9]))
    assert pred.network.limiting == ("latency", "nic")
    np.testing.assert_allclose(pred.network.time_parts.sum(axis=0), pred.time, rtol=1e-12)


@pytest.mark.parametrize("mode", ["bottleneck", "flow"])
def test_the_critical_path_ends_with_the_last_rank(mode):
    s = commsim.build("allreduce", "rabenseifner", nranks=12)
    pred = Topology(torus((3, 4)), contention=mode, start_skew={5: 2e-6}).predict(s, 1e6)
    cp = pred.network.critical_path
    assert cp is not None and cp.nmessages >= 1
    assert (cp.start[1:] >= cp.end[:-1] - 1e-15).all()  # a chain: each waits for the one before
    assert cp.end[-1] <= pred.time + 1e-15
    assert np.argmax(pred.rank_time) in (cp.src[-1], cp.dst[-1])  # the last rank's message
    assert pred.time - cp.end[-1] <= 1e6 / 100e9 + 1e-12  # at most its last reduction after it
    assert cp.latency.sum() + cp.transfer.sum() + cp.wait == pytest.approx(pred.time)


# -- stragglers ------------------------------------------------------------------------------------
def test_start_skew_delays_a_ring_by_exactly_the_skew():
    """Every rank of a ring depends on rank 0 within p - 1 steps, so starting it s late ends the
    whole allreduce s late."""
    s = commsim.build("allreduce", "ring", nranks=8)
    base = Topology(switch(8)).predict(s, 1e6).time
    late = Topology(switch(8), start_skew={0: 5e-6}).predict(s, 1e6).time
    assert late == pytest.approx(base + 5e-6, rel=1e-12)


def test_a_slow_rank_slows_every_ring_step_by_its_factor():
    """Rank 3 transfers 3x slower; it takes part in every step of the ring, and its neighbours
    wait for it, so each of the 2(p-1) steps costs α + 3·(n/p)β (γ = 0)."""
    p, n = 8, 8e6
    s = commsim.build("allreduce", "ring", nranks=p)
    t = Topology(switch(p), gamma=0, slow_ranks={3: 3.0}).predict(s, n).time
    assert t == pytest.approx(2 * (p - 1) * (2e-6 + 3 * n / p / 25e9), rel=1e-12)


def test_a_failed_link_reroutes_and_a_cut_is_one_error():
    m = Topology(ring(8, latency=1e-6), link_factor={(0, 1): 0})
    assert len(m.network.route(0, 1)) == 7  # the long way round
    slow = Topology(ring(8, bandwidth=BW, latency=0), link_factor={(0, 1): 0.5}, gamma=0)
    assert slow.predict(_one_step([(0, 1)], 8), 1e6).time == pytest.approx(2e6 / BW)
    with pytest.raises(ParameterError, match="disconnected") as e:
        Topology(ring(8), link_factor={(0, 1): 0, (4, 5): 0})
    assert "\n" not in str(e.value)


# -- the lower bound -------------------------------------------------------------------------------
def _host_links(net) -> int:
    return max(d for n, d in net.degree() if net.nodes[n].get("kind") == "host")


@pytest.mark.parametrize(
    "net", [fat_tree(16, hosts_per_leaf=4, oversubscription=2), torus((4, 4))], ids=["fat", "torus"]
)
@pytest.mark.parametrize("mode", ["bottleneck", "flow"])
def test_no_row_beats_the_lower_bound(net, mode):
    m = Topology(net, contention=mode)
    for row in ROWS:
        for p in (5, 16):
            s = _build(row, p)
            if s.nchannels > 1 and _host_links(net) > 1:  # the bound is the single-link one:
                continue  # a host's links at once beat it (the injection bound is issue #25's)
            if s.in_network:  # no switch of these networks reduces
                with pytest.raises(ParameterError, match="in-network reduction needs"):
                    m.predict(s, SIZES)
                continue
            t = m.predict(s, SIZES).time
            assert (t >= m.lower_bound(row.collective, p, SIZES) * (1 - 1e-9)).all(), row


# -- errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"contention": "bottlenek"}, "did you mean bottleneck"),
        ({"slow_ranks": {0: 0.5}}, "factor must be a number >= 1"),
        ({"link_factor": {(0, 1): 2}}, r"must be in \[0, 1\]"),
        ({"link_factor": {(0, 5): 0.5}}, "no edge"),
        ({"gamma": "fast"}, "gamma"),
    ],
)
def test_bad_model_inputs_are_one_line(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        Topology(ring(8), **kwargs)


def test_bad_predict_inputs_are_one_line():
    s = commsim.build("allreduce", "ring", nranks=8)
    with pytest.raises(ParameterError, match="8 ranks on a topology with 4 hosts"):
        Topology(switch(4)).predict(s, 1.0)
    with pytest.raises(ParameterError, match="start_skew has 2 values for 8 ranks"):
        Topology(switch(8), start_skew=[0, 1e-6]).predict(s, 1.0)
    with pytest.raises(ParameterError, match="rank 9"):
        Topology(switch(8), slow_ranks={9: 2.0}).predict(s, 1.0)


# -- timelines and Chrome traces -----------------------------------------------------------------
@pytest.mark.parametrize("mode", ["bottleneck", "flow"])
def test_chrome_trace_is_consistent_with_the_prediction(mode):
    import json

    from commsim.models import chrome_trace

    s = commsim.build("allreduce", "rabenseifner", nranks=8)
    m = Topology(torus((2, 4)), contention=mode)
    pred = m.predict(s, 1e6)
    doc = json.loads(json.dumps(chrome_trace(m, s, 1e6)))  # valid JSON
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    ranks = [e for e in slices if e["pid"] == 1]
    links = [e for e in slices if e["pid"] == 2]
    for r in range(8):  # tracks 2r (sends) and 2r + 1 (receives, reductions)
        last = max(e["ts"] + e["dur"] for e in ranks if e["tid"] // 2 == r)
        assert last == pytest.approx(pred.rank_time[r] * 1e6, rel=1e-9)  # ends at its clock
    assert max(e["ts"] + e["dur"] for e in links) <= pred.time * 1e6 * (1 + 1e-12)
    names = {e["args"].get("name") for e in doc["traceEvents"] if e["ph"] == "M"}
    assert {"ranks", "links", "rank 0 send", "rank 0 recv"} <= names
    tl = m.timeline(s, 1e6)
    assert tl.nmessages == sum(1 for e in ranks if e["name"].startswith("send"))
