"""``flow_rule="cm02"``: the flow simulation under SimGrid's CM02 rules (latency paid first,
shares in proportion to 1 / path latency), against times derived by hand; ``"fair"`` stays the
default (the CLI's ``--flow-rule``: tests/cli/test_flow_rule_cli.py)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from commsim import Schedule, Step
from commsim.errors import ParameterError
from commsim.models import FLOW_RULES, Topology
from commsim.topology import ring, torus

GB = 1e9  # bytes/s
US = 1e-6


def _path_graph(latency: float = US) -> nx.Graph:
    """Hosts 2 - 0 - 1 in a line, every link 1 GB/s and ``latency``: a message 0 -> 1 crosses
    one link, a message 2 -> 1 two, and both share the link 0 -> 1."""
    g = nx.Graph(name="line(3)")
    g.add_nodes_from(range(3), kind="host")
    g.add_edge(0, 1, bandwidth=GB, latency=latency, kind="link")
    g.add_edge(2, 0, bandwidth=GB, latency=latency, kind="link")
    return g


def _together(src: list[int], dst: list[int], nranks: int) -> Schedule:
    """One step whose messages all start at 0, each on a channel of its own (IR rule 6)."""
    step = Step.make(np.array(src), np.array(dst), 0, 0, channel=np.arange(len(src)))
    return Schedule.from_steps([step], collective="allreduce", nranks=nranks, slot_units=[1],
                               nchannels=len(src))  # fmt: skip


def _ends(model: Topology, schedule: Schedule, nbytes: float) -> np.ndarray:
    tl = model.timeline(schedule, nbytes)
    return (tl.end - tl.start)[np.argsort(tl.src)]


def test_cm02_pays_latency_first_and_shares_by_one_over_latency():
    """1 MB from host 0 (1 µs away) and from host 2 (2 µs away) to host 1. CM02: the 1-hop
    message runs alone from 1 to 2 µs (1,000 B), then the shares are 2:1 until it is done
    (999,000 B at 2/3 GB/s: 1.4985 ms), then the 2-hop one runs alone: 1.5005 ms and 2.001 ms,
    the ends SimGrid 3.32 gives (docs/validation.md)."""
    b = 1e6
    s = _together([0, 2], [1, 1], 3)
    cm02 = Topology(_path_graph(), contention="flow", gamma=0, flow_rule="cm02")
    t1 = 2 * US + (b - GB * US) / (2 * GB / 3)
    t2 = t1 + (b - (GB / 3) * (t1 - 2 * US)) / GB
    np.testing.assert_allclose(_ends(cm02, s, b), [t1, t2], rtol=1e-12)
    assert (t1, t2) == pytest.approx((1.5005e-3, 2.001e-3), rel=1e-9)
    # fair: equal shares from 0, each message's latency after its last byte
    fair = Topology(_path_graph(), contention="flow", gamma=0)
    np.testing.assert_allclose(_ends(fair, s, b), [2 * b / GB + US, 2 * b / GB + 2 * US],
                               rtol=1e-12)  # fmt: skip


def test_rules_agree_where_every_sharing_flow_has_the_same_latency():
    """A ring's neighbour exchange: every link carries one message, alone: ``L + b/B`` under
    both rules."""
    s = _together(list(range(8)), [(i + 1) % 8 for i in range(8)], 8)
    g = ring(8, bandwidth="10GB/s", latency="2us")
    for rule in FLOW_RULES:
        t = Topology(g, contention="flow", gamma=0, flow_rule=rule).predict(s, "1MiB").time
        assert t == pytest.approx(2e-6 + 2**20 / 10e9, rel=1e-12)


@pytest.mark.parametrize("port_rule", ["channel", "link"])
@pytest.mark.parametrize("overlap", [False, True])
def test_the_rules_agree_on_a_whole_schedule_whose_messages_share_one_latency(port_rule, overlap):
    """Ring allreduce on a ring: every message crosses one link, so paying the latency first or
    last and weighting by it change nothing, under either port rule, with or without reductions
    overlapped."""
    import commsim

    s = commsim.build("allreduce", "ring", nranks=8)
    g = ring(8, bandwidth="10GB/s", latency="2us")
    times = [
        Topology(g, contention="flow", flow_rule=rule, port_rule=port_rule,
                 reduction_overlap=overlap).predict(s, [2**16, 2**24]).time
        for rule in FLOW_RULES
    ]  # fmt: skip
    np.testing.assert_allclose(times[0], times[1], rtol=1e-12)


def _fluid_reference(
    routes: list, bw: np.ndarray, lat: np.ndarray, b: float, rule: str
) -> np.ndarray:
    """Every message's end, all starting at 0 with ``b`` bytes, by a plain event loop written
    apart from commsim's: rates by weighted progressive filling, recomputed at every start and
    end; ``cm02``: a message waits its path latency, then shares by 1 / latency; ``fair``:
    equal shares from 0, the latency added after the last byte."""
    n = len(routes)
    path = np.array([lat[r].sum() for r in routes])
    w = 1 / path if rule == "cm02" else np.ones(n)
    begin = path if rule == "cm02" else np.zeros(n)
    left, end, t = np.full(n, b), np.full(n, np.nan), 0.0
    while np.isnan(end).any():
        on = np.isnan(end) & (begin <= t * (1 + 1e-12))
        rate, frozen, cap = np.zeros(n), ~on, bw.astype(float).copy()
        while not frozen.all():
            share = np.zeros(len(bw))
            for m in np.flatnonzero(~frozen):
                share[routes[m]] += w[m]
            level = np.min(np.where(share > 0, cap / np.where(share > 0, share, 1), np.inf))
            rate[~frozen] += level * w[~frozen]
            cap -= level * share
            full = set(np.flatnonzero((share > 0) & (cap <= 1e-9 * bw)).tolist())
            for m in np.flatnonzero(~frozen):
                frozen[m] = frozen[m] or bool(full & set(routes[m]))
        waiting = np.isnan(end) & ~on
        dt = min(np.min(left[on] / rate[on], initial=np.inf),
                 np.min(begin[waiting] - t, initial=np.inf))  # fmt: skip
        left[on] -= rate[on] * dt
        t += dt
        done = on & (left <= 1e-9 * b)
        end[done] = t + (0 if rule == "cm02" else path[done])
    return end


@pytest.mark.parametrize("rule", FLOW_RULES)
@pytest.mark.parametrize("b", [64 * 2**10, 2**20])
def test_cm02_matches_an_independent_fluid_reference(rule, b):
    """The DGX-1's NVLink all to all (1- and 2-hop routes sharing links of two rates): every
    message's end under each rule equals a separately written fluid simulation's."""
    from commsim.clusters import cluster

    g = cluster("dgx1-v100:all:nvlink").graph
    src, dst = (np.array(x) for x in zip(*[(a, c) for a in range(8) for c in range(8) if a != c]))
    model = Topology(g, contention="flow", gamma=0, flow_rule=rule)
    tl = model.timeline(_together(src.tolist(), dst.tolist(), 8), b)
    routes = [tl.links[tl.indptr[m] : tl.indptr[m + 1]] for m in range(len(tl.src))]
    net = model.network
    want = _fluid_reference(routes, net.bandwidth, net.latency, float(b), rule)
    np.testing.assert_allclose(tl.end - tl.start, want, rtol=1e-9)


def test_a_truncated_record_and_a_chain_of_sizes_change_no_bit(monkeypatch):
    """Sizes predicted together (recalling rates from the size before, the record cut short
    at 7 entries) equal each size alone, bit for bit, under both rules."""
    import commsim
    from commsim.models import _flow

    s = commsim.build("alltoall", "pairwise", nranks=16)
    sizes = [2**10, 2**12, 2**14, 2**16]
    for rule in FLOW_RULES:
        m = Topology(torus((4, 4)), contention="flow", flow_rule=rule)
        alone = [float(m.predict(s, x).time) for x in sizes]
        for limit in (7, _flow.RECALL_ENTRIES):
            monkeypatch.setattr(_flow, "RECALL_ENTRIES", limit)
            assert np.asarray(m.predict(s, sizes).time).tolist() == alone


def test_bad_rules_are_one_line_errors():
    g = _path_graph()
    with pytest.raises(ParameterError, match="unknown flow_rule 'tcp'"):
        Topology(g, contention="flow", flow_rule="tcp")
    with pytest.raises(ParameterError, match="rule of contention='flow'"):
        Topology(g, contention="maxmin", flow_rule="cm02")
    zero = Topology(_path_graph(latency=0.0), contention="flow", flow_rule="cm02")
    with pytest.raises(ParameterError, match="route of zero latency"):
        zero.predict(_together([0], [1], 3), 1024)


def test_model_says_its_rule():
    m = Topology(_path_graph(), contention="flow", flow_rule="cm02")
    assert "flow_rule=cm02" in m.describe() and m.to_dict()["flow_rule"] == "cm02"
    fair = Topology(_path_graph(), contention="flow")
    assert "flow_rule" not in fair.describe() and "flow_rule" not in fair.to_dict()


def test_a_flow_simulation_past_its_effort_limit_is_refused_in_one_line(monkeypatch):
    """Past :data:`FLOW_EFFORT` the simulation stops and the prediction is refused with a
    ResourceError naming the way out, also from several sizes simulated in parallel chains;
    the limit that refuses one size refuses it among others too (recalled computations count)."""
    import commsim
    from commsim.errors import ResourceError
    from commsim.models import _flow

    s = commsim.build("alltoall", "pairwise", nranks=16)
    model = Topology(torus((4, 4)), contention="flow")
    sizes = [2**10, 2**12, 2**14, 2**16]

    def passes(limit: int, nbytes) -> bool:
        monkeypatch.setattr(_flow, "FLOW_EFFORT", limit)
        try:
            model.predict(s, nbytes)
        except ResourceError as e:
            assert "\n" not in str(e) and "use contention='bottleneck'" in str(e)
            return False
        return True

    def least(nbytes) -> int:  # the least limit at which this size passes alone
        lo, hi = 0, 10**9
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if passes(mid, nbytes) else (mid + 1, hi)
        return lo

    need = max(least(x) for x in sizes)
    assert need > 0
    assert passes(need, sizes)  # together, as each alone: the recalled computations count
    assert not passes(need - 1, sizes)  # refused from the chains of sizes, in one line
