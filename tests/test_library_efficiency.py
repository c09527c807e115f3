"""The library's link efficiencies (issue #19): links driven below their line rate
(``link_efficiency``, a cluster's ``[intra] efficiency``) and in-switch reduction below the
links' rate (``switch_efficiency``, a cluster's ``nvls_efficiency``), each against its formula,
in every contention mode; the bounds keep the line rates; the presets carry NCCL's numbers."""

from __future__ import annotations

import pytest

import commsim
from commsim.clusters import cluster
from commsim.errors import ParameterError
from commsim.models import ProtocolChoice, Topology
from commsim.topology import nvlink_island, switch
from commsim.tuner import cluster_model

N = 4e9  # bytes
B = 1e9  # bytes/s per link


@pytest.mark.parametrize("contention", ["none", "bottleneck", "maxmin", "flow"])
def test_link_efficiency_scales_the_ring_s_transfer(contention):
    """Ring allreduce on 4 hosts of one switch, no latency: 2(p-1) messages of n/p bytes, each
    at the link rate; at efficiency 1/2 every one takes twice as long."""
    s = commsim.build("allreduce", "ring", nranks=4)
    net = switch(4, bandwidth=B, latency=0.0, kind="nvlink")
    formula = 2 * 3 * (N / 4) / B
    line = Topology(net, gamma=0.0, contention=contention)
    half = Topology(net, gamma=0.0, contention=contention, link_efficiency={"nvlink": 0.5})
    assert line.predict(s, N).time == pytest.approx(formula)
    assert half.predict(s, N).time == pytest.approx(2 * formula)
    assert half.lower_bound("allreduce", 4, N) == line.lower_bound("allreduce", 4, N)


@pytest.mark.parametrize("contention", ["bottleneck", "flow"])
def test_switch_efficiency_slows_only_the_switch_s_messages(contention):
    """Every transfer of ``nvls`` on two GPUs touches the switch: at 1/2 it takes twice as long;
    a ring on the same island (no switch rank) does not move."""
    isl = nvlink_island(2, bandwidth=B, latency=0.0, reduce=True)
    v = commsim.build("allreduce", "nvls", nranks=4, ranks_per_node=2)
    ring = commsim.build("allreduce", "ring", nranks=2)
    full = Topology(isl, gamma=0.0, contention=contention)
    half = Topology(isl, gamma=0.0, contention=contention, switch_efficiency=0.5)
    assert half.predict(v, N).time == pytest.approx(2 * full.predict(v, N).time)
    assert half.predict(ring, N).time == full.predict(ring, N).time


@pytest.mark.parametrize("contention", ["bottleneck", "flow"])
def test_a_link_is_busy_for_the_time_its_messages_take_at_their_share(contention):
    """``nvls`` on two GPUs, segments=1: each GPU's link to the switch carries n bytes each way
    (both slices up, both sums down) at the link rate times the switch's share; its busy time
    is that, and the links table's bytes do not change with the share."""
    isl = nvlink_island(2, bandwidth=B, latency=0.0, reduce=True)
    v = commsim.build("allreduce", "nvls", nranks=4, ranks_per_node=2, segments=1)
    for eta in (1.0, 0.5):
        pred = Topology(isl, gamma=0.0, contention=contention, switch_efficiency=eta).predict(v, N)
        usage = pred.network
        assert usage.kind_busiest.max() == pytest.approx(N / (B * eta))
        assert usage.kind_bytes.sum() == pytest.approx(4 * N)  # 2 GPUs x (n up + n down)
        assert usage.utilization.max() <= 1 + 1e-12


def test_presets_carry_nccl_s_numbers():
    h100, a100, b200 = cluster("dgx-h100:2"), cluster("dgx-a100:1"), cluster("gb200-nvl72:1")
    assert h100.link_efficiency == {"nvlink": pytest.approx(20.6 / 25)}
    assert h100.nvls and h100.nvls_efficiency == 0.85
    assert a100.link_efficiency == {"nvlink": pytest.approx(20 / 25)} and not a100.nvls
    assert b200.link_efficiency == {"nvlink": pytest.approx(40.1 / 50)}
    assert b200.nvls_efficiency == 0.74


def test_h100_ring_runs_at_nccl_s_nvlink_rate():
    """18 links × 20.6 GB/s = 370.8 GB/s: the ring's busbw on one H100 server (nccl-tests#212
    measured about 370 GB/s); the line rate, 450 GB/s, with the efficiency set to 1."""
    c = cluster("dgx-h100:1")
    s = commsim.build("allreduce", "ring", nranks=8)
    busbw = 2 * 7 / 8 * 2**32 / cluster_model(c).predict(s, 2**32).time
    assert busbw == pytest.approx(370.8e9, rel=0.01)
    inputs = c.topology_inputs()
    line = Topology(inputs.pop("network"), **{**inputs, "link_efficiency": None})
    assert 2 * 7 / 8 * 2**32 / line.predict(s, 2**32).time == pytest.approx(450e9, rel=0.01)


def test_protocol_choice_carries_an_in_network_row_with_simple():
    c = cluster("dgx-h100:1")
    v = commsim.build("allreduce", "nvls", nranks=16, ranks_per_node=8)
    pred = ProtocolChoice(lambda p: cluster_model(c, protocol=p)).predict(v, [1e3, 1e9])
    assert pred.protocol == ("Simple", "Simple")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"link_efficiency": {"nvlink": 0}}, "in (0, 1]"),
        ({"link_efficiency": {"nvlink": 1.5}}, "in (0, 1]"),
        ({"link_efficiency": {"pcie": 0.5}}, "link class 'pcie'"),
        ({"link_efficiency": 0.5}, "mapping"),
        ({"switch_efficiency": 0}, "in (0, 1]"),
    ],
)
def test_bad_efficiencies_are_one_line(kwargs, message):
    with pytest.raises(ParameterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Topology(switch(2, kind="nvlink"), **kwargs)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ('[intra]\nkind = "nvlink"\nbandwidth = "450GB/s"\nlatency = "1us"\nefficiency = 0\n',
         r"\[intra\] efficiency: must be a number in \(0, 1\]"),
        ('[intra]\nkind = "link"\nbandwidth = "450GB/s"\nlatency = "1us"\nefficiency = 0.5\n',
         r"\[inter\] efficiency: \[intra\] and \[inter\] are one link class"),
    ],
)  # fmt: skip
def test_bad_cluster_fields_name_themselves(tmp_path, edit, message):
    f = tmp_path / "c.toml"
    head, _, table = edit.partition("[intra]")
    f.write_text(
        f'nodes = 1\ngpus_per_node = 2\n{head}[inter]\nbandwidth = "50GB/s"\nlatency = "1us"\n'
        f'[topology]\nkind = "switch"\n[intra]{table}'
    )
    with pytest.raises(ParameterError, match=message):
        cluster(str(f))


# -- an in-network schedule's protocol latency: one per call ----------------------------------------
@pytest.mark.parametrize(
    ("algorithm", "servers", "per_call"),
    [("nvls", 1, 25e-6), ("nvls_tree", 2, 25e-6 + 2 * 20.9e-6), ("nvls_tree", 4, 25e-6 + 4 * 20.9e-6)],
)  # fmt: skip
def test_simple_charges_an_in_network_schedule_nccl_s_latency_once(algorithm, servers, per_call):
    """NCCL's model charges NVLS ``intraLat`` (25 µs) and NVLSTree ``intraLat + 2 log2(nNodes)
    interLat`` (20.9 µs) per call, not per step: under Simple the schedule's time is its time
    without a protocol with that per-call cost in place of the launch (efficiency 1, no
    per-message protocol latency)."""
    c = cluster(f"dgx-h100:{servers}")
    s = commsim.build("allreduce", algorithm, nranks=16 * servers, ranks_per_node=8)
    plain = cluster_model(c).predict(s, [1e3, 1e9]).time
    simple = cluster_model(c, protocol="Simple").predict(s, [1e3, 1e9]).time
    assert simple == pytest.approx(plain - c.launch + per_call, rel=1e-9)


def test_ll_does_not_carry_an_in_network_schedule():
    s = commsim.build("allreduce", "nvls", nranks=16, ranks_per_node=8)
    with pytest.raises(ParameterError, match="Simple only"):
        cluster_model(cluster("dgx-h100:1"), protocol="LL").predict(s, 1e6)


def test_nvls_efficiency_has_no_effect_without_nvls():
    """``--set nvls=false`` on a preset that sets ``nvls_efficiency``: accepted, and nothing
    reduces in the switch, so nothing is slowed."""
    from commsim.clusters import build_cluster, description

    d, origin, base = description("dgx-h100:1")
    c = build_cluster({**d, "nvls": False}, origin, base)
    assert not c.nvls and c.nvls_efficiency == 1.0


def test_a_share_may_be_any_real_number():
    import numpy as np

    m = Topology(switch(2, kind="nvlink"), link_efficiency={"nvlink": np.float32(0.5)})
    assert m.link_efficiency == {"nvlink": 0.5}


def test_the_call_cost_counts_the_workers_servers_only():
    """Three servers of two GPUs on one shared reducing switch: the switch's endpoint is a
    server of its own (``Network.endpoint_server``), but the call spans the workers' three
    servers: 25 µs + 2 ⌊log2 3⌋ × 20.9 µs, not the four-server 25 + 4 × 20.9."""
    import networkx as nx

    g = nx.Graph()
    g.add_node("sw", kind="switch", reduce=True)
    for h in range(6):
        g.add_node(h, node=h // 2)
        g.add_edge(h, "sw", bandwidth=B, latency=0.0)
    s = commsim.build("allreduce", "nvls_tree", nranks=12, ranks_per_node=2)
    m = Topology(g, gamma=0.0, protocol="Simple")
    hosts = m.hosts_of(s)
    assert len(set(m.network.endpoint_server[hosts].tolist())) == 4  # the switch's own
    assert m._params_of(s, hosts).launch == pytest.approx(25e-6 + 2 * 20.9e-6)


def test_the_tuner_names_an_in_network_row_it_cannot_build():
    """``sweep`` (``commsim tune``): a named switch row is tuned where the model places its
    helpers (a cluster whose NVSwitch reduces), skipped with a sentence saying why where it
    does not (not dropped in silence); the default list leaves switch rows out."""
    from commsim.tuner import sweep

    m = cluster_model(cluster("dgx-h100:1"))
    named = sweep("allreduce", m, 8, [2**20], algorithms=("ring", "nvls"), ranks_per_node=8)
    assert {c.algorithm for c in named.candidates} == {"ring", "nvls"}
    a100 = cluster_model(cluster("dgx-a100:1"))
    skipped = sweep("allreduce", a100, 8, [2**20], algorithms=("ring", "nvls"), ranks_per_node=8)
    assert "reducing switch" in skipped.skipped["nvls"]
    assert {c.algorithm for c in skipped.candidates} == {"ring"}
    every = sweep("allreduce", m, 8, [2**20], ranks_per_node=8)
    assert "nvls" not in every.skipped and "nvls_tree" not in every.skipped
