"""In-network reduction (NVLink SHARP): the switch as helper ranks, placed on a reducing switch.

The ``nvls`` row verifies at every p and on every preset with a reducing NVSwitch, its exact
cost is the Hockney model's, it beats the ring on a DGX H100 and never beats the in-network
bound; a cluster without a reducing switch refuses it in one line.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import commsim
from commsim._cluster_model import cluster_model
from commsim.algorithms import info
from commsim.clusters import cluster
from commsim.errors import ParameterError, ScheduleError
from commsim.models import Hockney, Topology
from commsim.models._graph_bounds import graph_cuts, in_network_bound
from commsim.topology import Network, nvlink_island, place, rail_optimized, switch

GIB = 2**30
NVLS_PRESETS = ["dgx-h100:1", "dgx-h200:1", "dgx-b200:1", "gb200-nvl72:1"]


# -- the schedule ------------------------------------------------------------------------------
@pytest.mark.parametrize("segments", [1, 3, 8])
def test_nvls_verifies_at_every_p_up_to_64(segments):
    for p in range(1, 65):
        s = commsim.build("allreduce", "nvls", nranks=p, segments=segments)
        commsim.verify(s)
        assert s.helpers == p // 2 and s.in_network == (p > 1)


@pytest.mark.parametrize("p", [2, 3, 8, 16, 17, 33])
@pytest.mark.parametrize("segments", [1, 2, 8])
def test_the_exact_cost_is_the_hockney_time(p, segments):
    s = commsim.build("allreduce", "nvls", nranks=p, segments=segments)
    alpha, beta, gamma = 2e-6, 1 / 25e9, 1 / 100e9
    sizes = np.array([1e3, 1e6, 1e9])
    got = Hockney(alpha, beta, gamma).predict(s, sizes).time
    want = info("allreduce", "nvls").time(p, sizes, alpha, beta, gamma, segments=segments)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_segments_are_checked_in_one_line():
    with pytest.raises(ParameterError, match="segments must be an integer >= 1"):
        commsim.build("allreduce", "nvls", nranks=8, segments=0)


def test_the_command_line_counts_gpus():
    row = info("allreduce", "nvls")
    assert row.nranks_for(8) == 16 and info("allreduce", "ring").nranks_for(8) == 8


# -- the IR flag ---------------------------------------------------------------------------------
def test_in_network_needs_helpers_and_survives_a_file(tmp_path):
    s = commsim.build("allreduce", "nvls", nranks=6)
    for suffix in (".json", ".npz"):
        path = tmp_path / f"nvls{suffix}"
        commsim.save(s, path)
        back = commsim.load(path)
        assert back.in_network and back.helpers == 3 and back.fingerprint == s.fingerprint
    plain = commsim.build("allreduce", "parameter_server", nranks=6, placement="dedicated")
    assert not plain.in_network and "in_network" not in plain.summary()
    with pytest.raises(ScheduleError, match="in_network needs helper ranks"):
        commsim.Schedule.from_steps([], collective="allreduce", nranks=2, nslots=1, in_network=True)


# -- the topology: reducing switches and where helpers sit -----------------------------------------
def test_a_reducing_switch_is_an_endpoint_after_the_hosts():
    net = Network(nvlink_island(4, reduce=True))
    assert net.nhosts == 4 and net.nodes[net.reducing[0]] == "nvswitch"
    assert net.route(0, 4) == net.route(0, 1)[:1]  # GPU -> switch: the GPU's own NVLink
    assert len(Network(nvlink_island(4)).reducing) == 0


def test_helpers_sit_on_the_switch_next_to_the_workers():
    g = rail_optimized(2, 4, nvls=True)
    net = Network(g)
    hosts = place(net, 8, switch_helpers=4)
    assert hosts[:4].tolist() == [0, 1, 2, 3]
    assert {net.nodes[net.endpoints[h]] for h in hosts[4:]} == {(0, "nvswitch")}
    with pytest.raises(ParameterError, match="in-network reduction needs a switch"):
        place(Network(switch(8)), 8, switch_helpers=4)


def test_reduce_must_be_a_switchs_flag():
    g = switch(2)
    nx.set_node_attributes(g, {0: True}, "reduce")
    with pytest.raises(ParameterError, match=r"reduces \(reduce=true\) but is not a switch"):
        Network(g)


def test_a_cluster_file_sets_nvls_and_a_fabric_without_nvswitch_refuses_it():
    from commsim.clusters import build_cluster, description

    d, origin, base = description("dgx-a100:1")
    assert not len(cluster("dgx-a100:1").network.reducing)
    d = {**d, "nvls": True}
    assert len(build_cluster(d, origin, base).network.reducing) == 1
    flat = {"nodes": 4, "inter": {"bandwidth": "100Gb/s", "latency": "1us"}, "nvls": True,
            "topology": {"kind": "switch"}}  # fmt: skip
    with pytest.raises(ParameterError, match="nvls: needs an NVSwitch"):
        build_cluster(flat, "flat")


# -- on the presets --------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", NVLS_PRESETS)
def test_nvls_runs_on_every_preset_with_nvswitch(preset):
    c = cluster(preset)
    s = commsim.build("allreduce", "nvls", nranks=2 * c.gpus_per_node)
    commsim.verify(s)
    m = cluster_model(c)
    pred = m.predict(s, [1e6, GIB])
    bound, name = m.bound("allreduce", s.nranks, np.array([1e6, GIB]), s.helpers)
    assert (pred.time >= bound).all() and name.startswith("in-network bound")
    assert not any("below" in n for n in pred.notes)


def test_nvls_beats_the_ring_on_a_dgx_h100_and_stays_within_the_bound():
    m = cluster_model(cluster("dgx-h100:1"))
    ring = m.predict(commsim.build("allreduce", "ring", nranks=8), GIB)
    nvls = m.predict(commsim.build("allreduce", "nvls", nranks=16), GIB)
    assert nvls.busbw > ring.busbw
    bound, _ = m.bound("allreduce", 16, GIB, 8)
    assert nvls.time >= bound
    # the bound is n over a GPU's injection bandwidth: 450 GB/s NVLink + 50 GB/s NIC
    assert bound == pytest.approx(GIB / 500e9, rel=0.01)


def test_the_in_network_bound_is_n_over_the_injection_bandwidth():
    cuts = graph_cuts(Network(switch(4, bandwidth=1e9)), np.arange(4))
    assert in_network_bound("allreduce", cuts) == pytest.approx(1e-9)
    assert Topology(switch(4, bandwidth=1e9, latency=0.0)).bound("allreduce", 8, 4e9, 4)[0] == 4.0


def test_a_cluster_without_a_reducing_switch_refuses_nvls():
    m = cluster_model(cluster("dgx-a100:1"))
    with pytest.raises(ParameterError, match="in-network reduction needs a switch"):
        m.predict(commsim.build("allreduce", "nvls", nranks=16), GIB)


# -- nvls_tree: NVLS inside servers, a ring between them ------------------------------------------
@pytest.mark.parametrize("g", [8, 3])
def test_nvls_tree_verifies_at_every_p_up_to_64(g):
    for p in range(1, 65):
        s = commsim.build("allreduce", "nvls_tree", nranks=p, ranks_per_node=g)
        commsim.verify(s)
        assert s.helpers == p // 2


@pytest.mark.parametrize(
    ("p", "g"), [(2, 8), (16, 8), (32, 8), (48, 8), (24, 4), (12, 3), (18, 9), (64, 16), (144, 72)]
)
def test_nvls_tree_exact_cost_is_the_hockney_time(p, g):
    row = info("allreduce", "nvls_tree")
    assert row.is_exact(p, ranks_per_node=g)
    s = commsim.build("allreduce", "nvls_tree", nranks=p, ranks_per_node=g)
    sizes = np.array([1e3, 1e6, 1e9])
    got = Hockney(2e-6, 1 / 25e9, 1 / 100e9).predict(s, sizes).time
    want = row.time(p, sizes, 2e-6, 1 / 25e9, 1 / 100e9, ranks_per_node=g)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("preset", ["dgx-h100:2", "dgx-h200:2", "dgx-b200:2", "gb200-nvl72:2"])
def test_nvls_tree_runs_on_two_servers_within_the_bound(preset):
    c = cluster(preset)
    s = commsim.build("allreduce", "nvls_tree", nranks=2 * c.ngpus, ranks_per_node=c.gpus_per_node)
    m = cluster_model(c)
    pred = m.predict(s, GIB)
    assert pred.time >= m.bound("allreduce", s.nranks, GIB, s.helpers)[0]
    assert not any("below" in n for n in pred.notes)


@pytest.mark.parametrize("k", [2, 5])
def test_pipelined_nvls_tree_verifies(k):
    for p in (1, 2, 3, 7, 16, 31, 32, 48, 64):
        for g in (8, 3):
            s = commsim.build("allreduce", "nvls_tree", nranks=p, ranks_per_node=g, pipeline=k)
            commsim.verify(s)
            assert s.in_network == (p > 1) and s.helpers == p // 2


def test_pipelined_nvls_tree_overlaps_its_phases():
    """Chunks overlap the phases: under the default rule a GPU's port sends to the switch while
    it receives an earlier chunk's multicast; under ``port_rule="link"`` it also drives its
    NVLink and its NIC at once. 16 chunks beat the phases one after the other (8.07 ms at 1 GiB
    on two DGX H100) under both, the link rule at least as much, never below the in-network
    bound."""
    from commsim.models import Topology

    c = cluster("dgx-h100:2")
    inputs = {k: v for k, v in c.topology_inputs().items() if k != "network"}
    whole = commsim.build("allreduce", "nvls_tree", nranks=32)
    piped = commsim.build("allreduce", "nvls_tree", nranks=32, pipeline=16)
    link = Topology(c.network, port_rule="link", **inputs)
    one_port = Topology(c.network, **inputs)
    t_whole = one_port.predict(whole, GIB).time
    assert link.predict(whole, GIB).time == pytest.approx(t_whole, rel=1e-12)
    t_link, t_port = link.predict(piped, GIB).time, one_port.predict(piped, GIB).time
    bound = link.bound("allreduce", 32, GIB, piped.helpers)[0]
    assert bound <= t_link <= t_port < 0.8 * t_whole


@pytest.mark.parametrize("gpus", [9, 12, 14, 16])
def test_each_servers_helpers_sit_on_its_own_switch(gpus):
    """Helper ``i`` sits beside worker ``i`` (``commsim.topology.place``): ``nvls_tree`` numbers
    a server's helpers after that server's GPUs, so every helper a GPU talks to is on the GPU's
    own NVSwitch, also when the last server is short."""
    c = cluster("dgx-h100:2")
    s = commsim.build("allreduce", "nvls_tree", nranks=2 * gpus, ranks_per_node=8)
    hosts = cluster_model(c).hosts_of(s)
    net = c.network
    server = np.asarray(net.endpoint_server)[hosts]
    w = s.nranks - s.helpers
    for st in s.steps():
        assert (server[st.src] == server[st.dst])[(st.src >= w) | (st.dst >= w)].all()


def test_nvls_tree_is_refused_without_nvswitch_and_nvls_on_two_servers():
    s = commsim.build("allreduce", "nvls_tree", nranks=32)
    with pytest.raises(ParameterError, match="in-network reduction needs a switch"):
        cluster_model(cluster("dgx-a100:2")).predict(s, GIB)
    with pytest.raises(ScheduleError, match="nvls reduces inside one NVSwitch"):
        commsim.build("allreduce", "nvls", nranks=32, ranks_per_node=8)


def test_the_tuner_leaves_switch_rows_out():
    """A tuner table runs on p ranks that all hold data: a row whose helpers are a switch is
    no candidate unless the model places them (``switch_rows``), and says why; with them it is
    built on the p GPUs plus their switch helpers."""
    from commsim.errors import ScheduleError
    from commsim.tuner._candidates import families

    with pytest.raises(ScheduleError, match="reducing switch"):
        families("allreduce", 8, "nvls", {}, float(GIB))
    assert families("allreduce", 8, "ring", {}, float(GIB)) != []
    built = families("allreduce", 8, "nvls", {}, float(GIB), switch_rows=True)
    assert built and all(c.schedule.workers == 8 for f in built for c in f)


@pytest.mark.parametrize("combine", ["channels", "pipeline"])
@pytest.mark.parametrize("name", ["nvls", "nvls_tree"])
def test_channels_and_pipelines_keep_the_switch_helpers(combine, name):
    """``channels`` (``parallel``) and ``pipeline`` of an in-network row keep its helpers
    reducing switches: they verify, sit on the switch and never beat the bound (before, the
    flag was dropped and the helpers were placed on hosts: "16 ranks on 8 hosts")."""
    from commsim.algorithms import channels, pipeline

    c = cluster("dgx-h100:1" if name == "nvls" else "dgx-h100:2")  # nvls: one server
    s = commsim.build("allreduce", name, nranks=2 * c.nodes * c.gpus_per_node)
    t = channels(s, 2) if combine == "channels" else pipeline(s, 3)
    assert t.in_network and t.helpers == s.helpers
    commsim.verify(t)
    m = cluster_model(c)
    pred = m.predict(t, [1e6, GIB])
    bound, _ = m.bound("allreduce", t.nranks, np.array([1e6, GIB]), t.helpers)
    assert (pred.time >= bound).all()


def test_relabelling_blocks_refuses_a_schedule_with_helpers():
    from commsim.algorithms._combinators import relabel_blocks

    s = commsim.build("allreduce", "nvls", nranks=8)
    with pytest.raises(ScheduleError, match="helper ranks"):
        relabel_blocks(s, np.arange(8))
    ring = commsim.build("allreduce", "ring", nranks=4)
    commsim.verify(relabel_blocks(ring, np.array([2, 0, 3, 1])))  # no helpers: renamed


@pytest.mark.parametrize("rule", ["channel", "link"])
def test_nvls_tree_on_a_server_of_72_gpus_takes_its_closed_forms_rounds(rule):
    """One step of 71 adds (and one of 72 stores) per GPU takes 71 (72) rounds, not twice as
    many: ``matchings``' window of 8 rounds missed the complementary shift classes for servers
    of more than 9 GPUs (gb200-nvl72: 4.89 ms at 1 GiB instead of 2.46 ms)."""
    from commsim.models import Topology

    c = cluster("gb200-nvl72:1")
    s = commsim.build("allreduce", "nvls_tree", nranks=144, ranks_per_node=72)
    inputs = {k: v for k, v in c.topology_inputs().items() if k != "network"}
    t = Topology(c.network, port_rule=rule, **inputs).predict(s, GIB).time
    link = c.link_classes["nvlink"]
    rate = link.bandwidth * link.efficiency * c.nvls_efficiency  # every message is the switch's
    assert t == pytest.approx(inputs["launch"] + 144 * 0.5e-6 + 2 * GIB / rate, rel=1e-3)
