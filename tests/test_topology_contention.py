"""The contention modes against their definitions, and the Chrome trace against the prediction.

Max-min rates are checked by the characterization of Bertsekas & Gallager (*Data Networks*,
1992, §6.5.2), not by a second progressive filling: a feasible allocation is max-min fair iff
every flow crosses a saturated link on which no flow is faster. What the static modes leave out
(messages of different rounds never share) is shown on a case where ``flow`` must differ.
"""

from __future__ import annotations

import json
from collections import defaultdict

import networkx as nx
import numpy as np
import pytest

import commsim
from commsim import Schedule, Step
from commsim.algorithms import REGISTRY
from commsim.errors import ParameterError, ResourceError
from commsim.models import Topology, chrome_trace
from commsim.models._contention import rates
from commsim.topology import Network, fat_tree, ring, switch, torus

BW = 1e9
SIZES_T = np.array([8.0, 1e6])
ROWS = [REGISTRY[k] for k in sorted(REGISTRY)]


def _random_round(net: Network, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Routes of ``m`` random distinct (src, dst) host pairs (CSR)."""
    rng = np.random.default_rng(seed)
    pairs = set()
    while len(pairs) < m:
        a, b = rng.integers(net.nhosts, size=2)
        if a != b:
            pairs.add((int(a), int(b)))
    src, dst = (np.array(x) for x in zip(*sorted(pairs), strict=True))
    return net.routes(src, dst)


def _networks():
    big = fat_tree(32, hosts_per_leaf=8, oversubscription=4, bandwidth=BW)
    slow = {e: f for e, f in zip(list(big.edges)[::7], (0.3, 0.5, 0.9) * 20, strict=False)}
    yield "fat tree", Network(big)
    yield "fat tree, uneven links", Topology(big, link_factor=slow).network
    yield "torus", Network(torus((4, 8), bandwidth=BW))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("label", "net"), list(_networks()), ids=lambda x: str(x)[:14])
def test_maxmin_rates_are_max_min_fair(label, net, seed):
    """Feasible (no link over capacity) and every message has a bottleneck: a saturated link of
    its route on which it is the fastest. Also bottleneck <= maxmin <= none per message: a
    message's max-min rate is at least its equal share of its bottleneck link."""
    indptr, links = _random_round(net, 40, seed)
    bw = net.bandwidth
    mm = rates("maxmin", indptr, links, bw)
    owner = np.repeat(np.arange(len(mm)), np.diff(indptr))
    load = np.bincount(links, mm[owner], minlength=net.nlinks)
    assert (load <= bw * (1 + 1e-9)).all()
    saturated = load >= bw * (1 - 1e-9)
    fastest = np.zeros(net.nlinks)
    np.maximum.at(fastest, links, mm[owner])
    is_bottleneck = saturated[links] & (mm[owner] >= fastest[links] * (1 - 1e-9))
    has = np.zeros(len(mm), dtype=bool)
    has[owner[is_bottleneck]] = True
    assert has.all()
    bn, none = rates("bottleneck", indptr, links, bw), rates("none", indptr, links, bw)
    assert (bn <= mm * (1 + 1e-12)).all() and (mm <= none * (1 + 1e-12)).all()


def _one_step_each(pairs_per_step, nranks):
    """A schedule with one message ``(src, dst)`` of one slot per listed pair, per step."""
    steps = [Step.make([a for a, _ in ps], [b for _, b in ps], [0] * len(ps), [0] * len(ps))
             for ps in pairs_per_step]  # fmt: skip
    return Schedule.from_steps(steps, collective="allreduce", nranks=nranks, slot_units=[1])


def test_static_modes_share_links_only_within_a_round():
    """Hosts 0, 1 under leaf 0, hosts 2, 3 under leaf 1; the leaf's uplink has bandwidth B
    (2 hosts, 2:1 oversubscribed). Step 0 sends 0 → 2, step 1 sends 1 → 3. Ranks 1 and 3 have
    nothing in step 0, so by the per-rank clock rule 1 → 3 starts at t = 0 too: both messages
    cross the uplink at once. The static modes share a link only among one round's messages,
    so each runs at B and ends at n/B (and the uplink shows utilization 2); flow shares it,
    B/2 each, both end at 2n/B."""
    net = fat_tree(4, hosts_per_leaf=2, oversubscription=2, spines=1, bandwidth=BW, latency=0)
    s = _one_step_each([[(0, 2)], [(1, 3)]], 4)
    n = 1e6
    for mode in ("none", "bottleneck", "maxmin"):
        pred = Topology(net, contention=mode, gamma=0).predict(s, n)
        assert pred.time == pytest.approx(n / BW, rel=1e-12)
        assert pred.network.utilization.max() == pytest.approx(2.0, rel=1e-12)
    flow = Topology(net, contention="flow", gamma=0).predict(s, n)
    assert flow.time == pytest.approx(2 * n / BW, rel=1e-12)
    assert flow.network.utilization.max() == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("mode", ["none", "bottleneck", "maxmin", "flow"])
def test_start_skew_off_the_critical_path_changes_nothing_else(mode):
    """0 → 1 carries 4 slots, 2 → 3 one slot, on a crossbar (one step). Delaying rank 2 by less
    than the difference moves 2 → 3 by exactly its skew and leaves the finish time alone;
    delaying rank 0 moves the finish by exactly its skew."""
    src, dst = np.repeat([0, 2], [4, 1]), np.repeat([1, 3], [4, 1])
    slot = np.array([0, 1, 2, 3, 0])
    s = Schedule.from_steps([Step.make(src, dst, slot, slot)], collective="allreduce",
                            nranks=4, slot_units=[1] * 4)  # fmt: skip
    n, net = 4e6, switch(4, bandwidth=BW, latency=0)
    base = Topology(net, contention=mode, gamma=0).predict(s, n)
    assert base.time == pytest.approx(n / BW)
    skew = 1e-3  # < 3n/(4B) = 3 ms of slack
    off = Topology(net, contention=mode, gamma=0, start_skew={2: skew}).predict(s, n)
    assert off.time == pytest.approx(base.time, rel=1e-12)
    np.testing.assert_allclose(off.rank_time[2:], base.rank_time[2:] + skew, rtol=1e-12)
    on = Topology(net, contention=mode, gamma=0, start_skew={0: skew}).predict(s, n)
    assert on.time == pytest.approx(base.time + skew, rel=1e-12)


@pytest.mark.parametrize("mode", ["none", "bottleneck", "maxmin", "flow"])
def test_a_slow_rank_slows_its_messages_in_every_mode(mode):
    """Ring allreduce on a crossbar, rank 3 three times slower: each of the 2(p-1) steps costs
    α + 3(n/p)β, since every step waits for rank 3's neighbours (γ = 0)."""
    p, n = 8, 8e6
    s = commsim.build("allreduce", "ring", nranks=p)
    t = Topology(switch(p), contention=mode, gamma=0, slow_ranks={3: 3.0}).predict(s, n).time
    assert t == pytest.approx(2 * (p - 1) * (2e-6 + 3 * n / p / 25e9), rel=1e-12)


def test_the_bound_uses_the_fastest_way_out_not_the_direct_link():
    """Hosts a, b, c: a slow direct cable a–b (10 µs) and a switch s reaching all three in
    0.1 + 0.1 µs. A message between placed hosts takes at least min(10, 0.2) µs, so the bound's
    α is 0.2 µs; predictions of every allreduce stay above it."""
    g = nx.Graph()
    g.add_nodes_from("abc")
    g.add_node("s", kind="switch")
    g.add_edge("a", "b", bandwidth=BW, latency=10e-6)
    g.add_edges_from([("a", "s"), ("b", "s"), ("c", "s")], bandwidth=BW, latency=0.1e-6)
    m = Topology(g)
    assert m._bound_terms(3)[0] == pytest.approx(0.2e-6)
    for name in ("ring", "recursive_doubling", "rabenseifner", "binomial"):
        s = commsim.build("allreduce", name, nranks=3)
        sizes = np.array([0.0, 8.0, 1e6])
        assert (m.predict(s, sizes).time >= m.lower_bound("allreduce", 3, sizes)).all()


@pytest.mark.parametrize("mode", ["bottleneck", "flow"])
def test_predictions_with_network_usage_are_plain_json(mode):
    s = commsim.build("allreduce", "rabenseifner", nranks=16)
    pred = Topology(fat_tree(16, hosts_per_leaf=4), contention=mode).predict(s, [1e3, 1e6])
    doc = json.loads(json.dumps(pred.to_dict()))
    assert len(doc["network"]["limited_by"]) == 2
    assert doc["network"]["critical_path"]["nmessages"] >= 1


# -- Chrome traces ---------------------------------------------------------------------------------
def _tracks(doc):
    out = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            out[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    return out


CASES = [
    ("rabenseifner", 8, lambda: torus((2, 4)), {}),
    ("ring", 32, lambda: fat_tree(32, hosts_per_leaf=8, oversubscription=2), {"slow_ranks": {3: 2}}),
    ("hierarchical", 16, lambda: fat_tree(16, hosts_per_leaf=4, oversubscription=4),
     {"start_skew": {5: 3e-6}}),
]  # fmt: skip


@pytest.mark.parametrize("mode", ["none", "bottleneck", "maxmin", "flow"])
@pytest.mark.parametrize(("name", "p", "graph", "kw"), CASES, ids=[c[0] for c in CASES])
def test_trace_tracks_are_sequences_within_the_prediction(mode, name, p, graph, kw):
    """The JSON format needs the slices of a track to nest; here each track is a sequence of
    disjoint slices (rank send / recv tracks by the single-port rule, link tracks by merging).
    Each rank's last slice ends at its finish time, links are busy within the total time, and
    under flow a link's busy intervals are at least its bytes over its bandwidth."""
    kwargs = {"ranks_per_node": 4} if name == "hierarchical" else {}
    s = commsim.build("allreduce", name, nranks=p, **kwargs)
    m = Topology(graph(), contention=mode, **kw)
    n = 1e6
    pred = m.predict(s, n)
    doc = json.loads(json.dumps(chrome_trace(m, s, n)))
    tracks = _tracks(doc)
    us = 1e6 * pred.time
    for (pid, tid), sl in tracks.items():
        sl.sort()
        a = np.array(sl)
        assert (a[1:, 0] >= a[:-1, 1] - 1e-9 * us).all(), (pid, tid)
        assert a[:, 1].max() <= us * (1 + 1e-12)
    for r in range(p):
        last = max(tracks[(1, 2 * r)][-1][1], tracks[(1, 2 * r + 1)][-1][1])
        assert last == pytest.approx(pred.rank_time[r] * 1e6, rel=1e-9)
    if mode == "flow":
        busy = pred.network.link_busy[:, 0] * 1e6
        for link in np.flatnonzero(busy):
            length = sum(b - a for a, b in tracks[(2, int(link))])
            assert length >= busy[link] * (1 - 1e-9)


def test_a_trace_past_the_event_budget_is_refused_early():
    """Ring allreduce on 1024 ranks: 2·1023·1024 ≈ 2.1 M messages, three events each, over the
    2 M event budget: one line, raised before the run reaches the end of the schedule."""
    s = commsim.build("allreduce", "ring", nranks=1024)
    with pytest.raises(ResourceError, match="refused") as e:
        chrome_trace(Topology(switch(1024)), s, 1e6)
    assert "\n" not in str(e.value)


def test_a_trace_draws_a_ring_on_a_ring():
    """ring(4): each rank sends on its own link r → r+1, 2(p-1) messages, back to back: one busy
    slice per used link, four used links."""
    s = commsim.build("allreduce", "ring", nranks=4)
    doc = chrome_trace(Topology(ring(4), gamma=0), s, 4e6)
    links = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 2]
    assert len(links) == 4 and all(e["args"]["messages"] == 6 for e in links)


def test_a_reused_model_predicts_as_a_fresh_one():
    """The per-round cache (and its fast path for a round equal to the one before) must not
    carry routes across schedules or placements: a sequence of predictions on one model equals
    fresh models' predictions."""
    net = fat_tree(16, hosts_per_leaf=4, oversubscription=2)
    cases = [("ring", 16, "linear"), ("ring", 8, "linear"), ("ring", 8, "round_robin"),
             ("rabenseifner", 16, "linear"), ("ring", 16, "linear")]  # fmt: skip
    for mode in ("bottleneck", "maxmin"):
        reused = Topology(net, contention=mode)
        for name, p, placement in cases:
            reused.placement = placement
            s = commsim.build("allreduce", name, nranks=p)
            fresh = Topology(net, contention=mode, placement=placement).predict(s, SIZES_T)
            got = reused.predict(s, SIZES_T)
            np.testing.assert_array_equal(got.time, fresh.time)
            np.testing.assert_array_equal(got.network.link_bytes, fresh.network.link_bytes)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.collective}/{r.algorithm}")
def test_flow_equals_none_on_a_crossbar_with_stragglers(row):
    """On a crossbar a single-port message never shares a link, so flow must give none's clocks
    exactly, also when start skew and a slow rank make ends ready at different times: a rank's
    send and receive of one round both start from its clock before the round, even when one
    of them waits for a late partner while the other has already ended."""
    rng = np.random.default_rng(sum(map(ord, row.algorithm + row.collective)))
    for p in (4, 6, 8):
        s = commsim.build(row.collective, row.algorithm, nranks=p)
        if s.nchannels > 1:  # its channels share a host's link under flow, not under none
            pytest.skip("several channels: not single-port messages")
        if s.in_network:  # its helpers are a reducing switch, which switch(p) is not
            with pytest.raises(ParameterError, match="in-network reduction needs"):
                Topology(switch(p), contention="flow").predict(s, SIZES_T)
            continue
        for _ in range(3):
            kw = {"start_skew": list(rng.uniform(0, 50e-6, p)),
                  "slow_ranks": {int(rng.integers(p)): float(rng.uniform(1, 3))}}  # fmt: skip
            want = Topology(switch(p), contention="none", **kw).predict(s, SIZES_T).rank_time
            got = Topology(switch(p), contention="flow", **kw).predict(s, SIZES_T).rank_time
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize(("name", "overlap"), [("ring", False), ("recursive_doubling", True)])
def test_flow_sizes_run_together_give_each_size_alone(name, overlap):
    # the sizes of one call are simulated in parallel threads, each the serial simulation
    s = commsim.build("allreduce", name, nranks=16)
    model = Topology(torus((4, 4)), contention="flow", reduction_overlap=overlap, launch=1e-6)
    sizes = np.array([1.0, 1e3, 2**20, 1e8, 2**30])
    together = model.predict(s, sizes)
    for k, n in enumerate(sizes):
        alone = model.predict(s, np.array([n]))
        assert together.time[k] == alone.time[0]
        assert np.array_equal(together.rank_time[:, k], alone.rank_time[:, 0])
        assert np.array_equal(together.step_time[:, k], alone.step_time[:, 0])
