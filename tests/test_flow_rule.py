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
from commsim.topology import ring

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


def test_cm02_rule_on_a_whole_schedule_is_never_faster_than_latency_plus_transfer():
    """Ring allreduce, 8 ranks on a ring: under CM02 every message still pays its path latency
    and its bytes at most at the link rate, so each step takes at least ``L + b/B``."""
    import commsim

    s = commsim.build("allreduce", "ring", nranks=8)
    g = ring(8, bandwidth="10GB/s", latency="2us")
    n = 2**20
    pred = Topology(g, contention="flow", flow_rule="cm02", gamma=0).predict(s, n)
    steps = 2 * (8 - 1)
    assert pred.time >= steps * (2e-6 + n / 8 / 10e9) * (1 - 1e-12)


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
    ResourceError naming the way out; under the limit the same schedule is predicted."""
    import commsim
    from commsim.errors import ResourceError
    from commsim.models import _flow

    s = commsim.build("alltoall", "pairwise", nranks=8)
    model = Topology(ring(8), contention="flow")
    assert model.predict(s, "1MiB").time > 0
    monkeypatch.setattr(_flow, "FLOW_EFFORT", 10)
    with pytest.raises(ResourceError, match=r"gave up after .* use contention='bottleneck'") as e:
        model.predict(s, "1MiB")
    assert "\n" not in str(e.value)
