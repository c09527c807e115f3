"""In-network reduction between servers (InfiniBand SHARP): the fabric's switches as helper
ranks at the fabric tier, ``collnet_direct`` on them.

The row verifies at every p (and pipelined), its exact cost is the Hockney model's, its helpers
sit on each GPU's rail leaf (not the NVSwitch beside it), it runs within the in-network bound on
a cluster with ``sharp = true`` and is refused in one line without; NCCL's per-call latency and
bandwidth factor apply; the schedule's tier survives a file.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import commsim
from commsim._cluster_model import cluster_model
from commsim.algorithms import info, nccl_choices
from commsim.clusters import build_cluster, cluster, description
from commsim.errors import ParameterError, ScheduleError
from commsim.models import Hockney, Topology
from commsim.models._library import PROTOCOLS, call_cost
from commsim.topology import Network, place, rail_optimized, switch

GIB = 2**30


def _sharp(spec: str, **fields) -> commsim.clusters.Cluster:
    d, origin, base = description(spec)
    return build_cluster({**d, "sharp": True, **fields}, origin, base)


# -- the schedule ------------------------------------------------------------------------------
@pytest.mark.parametrize("g", [1, 2, 3, 8])
def test_collnet_direct_verifies_at_every_p_up_to_64(g):
    for p in range(1, 65):
        s = commsim.build("allreduce", "collnet_direct", nranks=p, ranks_per_node=g)
        commsim.verify(s)
        assert s.helpers == p // 2 and (s.switch_tier == "fabric" or p == 1)
        counts = [len(st.src) for st in s.steps()]  # the steps are built lazily from hints
        assert s.ntransfers_hint == sum(counts)
        assert s.max_step_transfers_hint == max(counts, default=0)


@pytest.mark.parametrize("k", [2, 5])
def test_pipelined_collnet_direct_verifies(k):
    for p in (2, 7, 16, 33, 64):
        commsim.verify(
            commsim.build("allreduce", "collnet_direct", nranks=p, ranks_per_node=8, pipeline=k)
        )


@pytest.mark.parametrize(("p", "g"), [(4, 2), (16, 4), (32, 8), (64, 8), (128, 8)])
def test_the_exact_cost_is_the_hockney_time(p, g):
    """T = (2(g-1) + 2N)α + 2nβ + ((g-1)/g + (N-1)/(gN))nγ, N = p/(2g) servers."""
    a, b, c, n = 1e-6, 1e-9, 1e-10, 3e6
    s = commsim.build("allreduce", "collnet_direct", nranks=p, ranks_per_node=g)
    N = p // 2 // g
    formula = (2 * (g - 1) + 2 * N) * a + 2 * n * b + ((g - 1) / g + (N - 1) / (g * N)) * n * c
    row = info("allreduce", "collnet_direct")
    assert row.exact(p, ranks_per_node=g)
    assert row.time(p, n, a, b, c, ranks_per_node=g) == pytest.approx(formula, rel=1e-12)
    assert Hockney(alpha=a, beta=b, gamma=c).predict(s, n).time == pytest.approx(formula)


def test_the_tier_survives_a_file_and_names_itself(tmp_path):
    s = commsim.build("allreduce", "collnet_direct", nranks=8, ranks_per_node=2)
    for suffix in (".json", ".npz"):
        path = tmp_path / f"collnet{suffix}"
        commsim.save(s, path)
        back = commsim.load(path)
        assert back.switch_tier == "fabric" and back.fingerprint == s.fingerprint
    server = commsim.build("allreduce", "nvls", nranks=8)
    assert server.in_network is True and server.switch_tier == "server"
    assert "in_network=fabric" in repr(s)
    with pytest.raises(ScheduleError, match="in_network must be true, false, 'server' or"):
        commsim.Schedule.from_steps([], collective="allreduce", nranks=2, nslots=1,
                                    helpers=1, in_network="spine")  # fmt: skip


# -- the topology: the fabric tier -------------------------------------------------------------
def test_fabric_helpers_sit_on_the_rail_leaf_not_the_nvswitch():
    g = rail_optimized(2, 4, nvls=True)
    leaves = [v for v in g.nodes if isinstance(v, tuple) and v[0] == "fabric" and v[1][0] == "leaf"]
    nx.set_node_attributes(g, dict.fromkeys(leaves, "fabric"), "reduce")
    net = Network(g)
    assert sorted(net.reducing_tier.tolist()) == [0, 0, 1, 1, 1, 1]
    server = place(net, 16, switch_helpers=8)
    fabric = place(net, 16, switch_helpers=8, tier="fabric")
    assert {net.nodes[net.endpoints[h]][1] for h in server[8:]} == {"nvswitch"}
    assert [net.nodes[net.endpoints[h]][1] for h in fabric[8:12]] == [
        ("leaf", 0, j) for j in range(4)
    ]
    with pytest.raises(ParameterError, match="sharp = true"):
        place(Network(rail_optimized(2, 4, nvls=True)), 16, switch_helpers=8, tier="fabric")


def test_reduce_names_a_tier_or_is_refused():
    g = switch(2)
    nx.set_node_attributes(g, {"switch": "spine"}, "reduce")
    with pytest.raises(ParameterError, match="reduce must be true, false, 'server' or 'fabric'"):
        Network(g)


# -- on a cluster --------------------------------------------------------------------------------
def test_sharp_marks_the_rail_leaves_and_is_refused_without_switches():
    c = _sharp("dgx-h100:4")
    net = c.network
    fabric = net.reducing[net.reducing_tier == 1]
    assert sorted(net.nodes[v][1] for v in fabric) == [("leaf", 0, j) for j in range(8)]
    assert c.sharp and c.sharp_efficiency == 0.85
    assert cluster("dgx-h100:4").sharp_efficiency == 1.0  # no effect without sharp
    with pytest.raises(ParameterError, match="sharp: needs InfiniBand switches"):
        _sharp("tpu-v4:4x4x4")


def test_sharp_never_marks_a_server_s_own_switch():
    """[intra] and [inter] may share a class name: the NVSwitch (which joins several GPUs of one
    server, and may reduce already) stays a server's switch; only the rail leaves join."""
    d, origin, base = description("dgx-h100:2")
    d = {**d, "sharp": True, "intra": {**d["intra"], "kind": "rail", "efficiency": 1.0}}
    net = build_cluster(d, origin, base).network
    assert sorted(net.reducing_tier.tolist()) == [0, 0, *[1] * 8]
    d["nvls"] = False
    net = build_cluster(d, origin, base).network
    assert net.reducing_tier.tolist() == [1] * 8


def test_collnet_runs_within_the_bound_and_sends_n_over_g_per_nic():
    c = _sharp("dgx-h100:4")
    m = cluster_model(c)
    s = commsim.build("allreduce", "collnet_direct", nranks=64, ranks_per_node=8)
    pred = m.predict(s, GIB)
    bound, name = m.bound("allreduce", 64, GIB, s.helpers)
    assert pred.time >= bound and name.startswith("in-network bound")
    usage = pred.network
    rail = list(usage.kinds).index("rail")
    assert usage.kind_bytes[rail, 0] == pytest.approx(32 * 2 * GIB / 8)  # n/g up and down
    slower = Topology(c.network, gamma=c.gamma, reduction_overlap=True, launch=c.launch)
    assert slower.predict(s, GIB).time < pred.time  # without NCCL's 0.85 and 0.824


def test_without_sharp_collnet_is_refused_in_one_line():
    m = cluster_model(cluster("dgx-h100:4"))
    s = commsim.build("allreduce", "collnet_direct", nranks=64, ranks_per_node=8)
    with pytest.raises(ParameterError, match="sharp = true"):
        m.predict(s, GIB)


def test_simple_charges_collnet_direct_nccl_s_latency_once():
    """tuning.cc: 2 (min(1, g-1) 3.7 µs + (g-1) 0.4 µs) + 31 µs = 44 µs for 8 GPUs a server."""
    assert call_cost(PROTOCOLS["Simple"], 0.0, "fabric", 4, 8) == pytest.approx(44.0e-6)
    c = _sharp("dgx-h100:4")
    s = commsim.build("allreduce", "collnet_direct", nranks=64, ranks_per_node=8)
    simple = cluster_model(c, protocol="Simple")
    t = simple.predict(s, 8.0).time
    assert 44.0e-6 < t < 80e-6
    with pytest.raises(ParameterError, match="Simple only"):
        cluster_model(c, protocol="LL").predict(s, 8.0)


def test_nccl_s_choices_add_collnet_across_servers_where_the_fabric_reduces():
    assert "collnet_direct" in nccl_choices("allreduce", servers=4, fabric_reduces=True)
    assert "collnet_direct" not in nccl_choices("allreduce", servers=1, fabric_reduces=True)
    assert "collnet_direct" not in nccl_choices("allreduce", servers=4)
    assert np.isfinite(info("allreduce", "collnet_direct").time(64, GIB, 1e-6, 1e-9, 0.0))
