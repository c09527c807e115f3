"""The link-port rule (``Topology(port_rule="link")``, issues #19 item 4 and #25): a queue per host
link on hand-made steps, the queues meeting at each step's end, the default and one-link hosts unchanged bit for bit, pipelined hierarchical
allreduce gaining from it, the lower bound holding under it, every contention mode, and errors."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import commsim
from commsim import Schedule, Step
from commsim._cluster_model import cluster_model
from commsim.algorithms import REGISTRY
from commsim.clusters import cluster
from commsim.errors import ParameterError
from commsim.models import PORT_RULES, Topology
from commsim.models._link_ports import host_link_slots
from commsim.topology import Network, fat_tree, switch, torus

ROWS = [REGISTRY[k] for k in sorted(REGISTRY)]
SIZES = np.array([0.0, 1.0, 4096.0, 1e6 + 3])
MODES = ("none", "bottleneck", "maxmin", "flow")
BW = 1e9


def _star() -> nx.Graph:
    """Host 0 joined to hosts 1 and 2 by two links of its own (BW each, no latency)."""
    g = nx.star_graph(2)
    nx.set_edge_attributes(g, BW, "bandwidth")
    nx.set_edge_attributes(g, 0.0, "latency")
    return g


def _fan_out(nranks: int = 3) -> Schedule:
    """One step: rank 0 sends one slot (1 byte per unit) to ranks 1 and 2."""
    st = Step.make([0, 0], [1, 2], [0, 0], [0, 0])
    return Schedule.from_steps([st], collective="broadcast", nranks=nranks, nslots=1)


# -- queues ---------------------------------------------------------------------------------------
def _queue_rounds(st, s, net):
    from commsim.models._link_ports import link_queue_messages, link_queues

    hosts = np.arange(s.nranks)
    return link_queue_messages(st, s, 1, net, hosts, link_queues(net, hosts))


def test_two_messages_on_two_links_go_on_two_queues_and_on_one_link_in_turn():
    s = _fan_out()
    msg, by_links = _queue_rounds(s.step(0), s, Network(_star()))
    assert len(set(msg.src.tolist())) == 2 and [r.tolist() for r in by_links] == [[0, 1]]
    msg, on_switch = _queue_rounds(s.step(0), s, Network(switch(3)))
    assert len(set(msg.src.tolist())) == 1 and len(on_switch) == 2  # one link to the switch


def test_a_receiver_takes_one_message_per_last_hop_link():
    st = Step.make([1, 2], [0, 0], [0, 0], [0, 0])
    s = Schedule.from_steps([st], collective="reduce", nranks=3, nslots=1)
    assert len(_queue_rounds(st, s, Network(_star()))[1]) == 1
    assert len(_queue_rounds(st, s, Network(switch(3)))[1]) == 2


def test_host_link_slots_number_each_nodes_links_from_zero():
    net = Network(torus((4, 4, 4)))
    out_slot, in_slot = host_link_slots(net)
    for ends, slot in ((net.link_src, out_slot), (net.link_dst, in_slot)):
        for node in (0, 17, 63):
            assert sorted(slot[ends == node].tolist()) == list(range(6))


@pytest.mark.parametrize("mode", MODES)
def test_a_fan_out_on_two_links_takes_one_message_time_in_every_mode(mode):
    s = _fan_out()
    chan = Topology(_star(), contention=mode, gamma=0.0).predict(s, 1e6).time
    link = Topology(_star(), contention=mode, gamma=0.0, port_rule="link").predict(s, 1e6).time
    assert chan == pytest.approx(2e6 / BW, rel=1e-12)  # one after the other
    assert link == pytest.approx(1e6 / BW, rel=1e-12)  # at once, on distinct links


# -- unchanged where it must be -----------------------------------------------------------------
def _build(row, p):
    return commsim.build(row.collective, row.algorithm, nranks=p)


@pytest.mark.parametrize(
    "net", [switch(16), fat_tree(16, hosts_per_leaf=4, oversubscription=2)], ids=["switch", "fat"]
)
def test_one_link_hosts_give_the_default_numbers_for_every_row(net):
    """A host with one link sends every message by it: the link rule's rounds are the
    default's, so every registry row's prediction is equal bit for bit, in every mode."""
    for row in ROWS:
        for p in (5, 16):
            s = _build(row, p)
            if s.in_network:
                continue
            for mode in MODES:
                if mode == "flow" and p > 8:
                    continue
                want = Topology(net, contention=mode).predict(s, SIZES)
                got = Topology(net, contention=mode, port_rule="link").predict(s, SIZES)
                np.testing.assert_array_equal(got.time, want.time, err_msg=f"{row} {mode}")
                np.testing.assert_array_equal(got.step_time, want.step_time)
                np.testing.assert_array_equal(got.rank_time, want.rank_time)


def test_the_default_rule_is_channel_and_describes_as_before():
    m = Topology(torus((4, 4)))
    assert m.port_rule == "channel" and "port_rule" not in m.to_dict()
    assert "ports=link" not in m.describe()
    link = Topology(torus((4, 4)), port_rule="link")
    assert link.to_dict()["port_rule"] == "link" and "ports=link" in link.describe()


# -- what it changes ----------------------------------------------------------------------------
def test_pipelined_hierarchical_gains_with_the_link_rule():
    """GPUs of dgx-h100:2 have an NVLink and a NIC link: a pipelined step sends chunk k inside
    the server and chunk k - 1 across at once, so K = 4 beats K = 1 under the link rule (it
    does not under the default, where the two messages go one after the other)."""
    c = cluster("dgx-h100:2")

    def time(rule: str, k: int) -> float:
        params = {"ranks_per_node": 8} | ({"pipeline": k} if k > 1 else {})
        s = commsim.build("allreduce", "hierarchical", nranks=16, **params)
        return cluster_model(c, port_rule=rule).predict(s, "256MiB").time

    assert time("link", 1) == time("channel", 1)
    assert time("link", 4) < time("link", 1)
    assert time("channel", 4) >= time("channel", 1)
    assert time("link", 4) < time("channel", 4)


@pytest.mark.parametrize("mode", ["bottleneck", "maxmin", "flow"])
@pytest.mark.parametrize(
    "net",
    [torus((4, 4)), cluster("dgx-h100:2").network.graph],
    ids=["torus", "dgx"],
)
def test_no_row_beats_the_lower_bound_with_the_link_rule(net, mode):
    m = Topology(net, contention=mode, port_rule="link")
    for row in ROWS:
        s = _build(row, 16)
        if s.in_network:
            continue
        t = m.predict(s, SIZES).time
        assert (t >= m.lower_bound(row.collective, 16, SIZES) * (1 - 1e-9)).all(), row


def test_multichannel_schedules_keep_a_port_per_channel():
    s = commsim.algorithms.channels(commsim.build("allreduce", "ring", nranks=8), 2)
    for mode in MODES:
        t = Topology(torus((2, 4)), contention=mode, port_rule="link").predict(s, SIZES).time
        assert np.isfinite(t).all() and (t[1:] > 0).all()


def test_sixteen_thousand_ranks_fan_out_in_one_round():
    """16,384 ranks on a 32x32x16 torus, each sending to both ring neighbours in one step: the
    two messages leave by two of its six links, so the link rule has one round, the default
    two."""
    p = 16384
    r = np.arange(p)
    st = Step.make(np.repeat(r, 2), np.stack([(r + 1) % p, (r - 1) % p], 1).ravel(), 0, 0)
    s = Schedule.from_steps([st], collective="broadcast", nranks=p, nslots=1)
    net = Network(torus((32, 32, 16)))
    assert len(_queue_rounds(st, s, net)[1]) == 1
    link = Topology(net, port_rule="link", contention="none").predict(s, 1e6).time
    chan = Topology(net, contention="none").predict(s, 1e6).time
    assert link == pytest.approx(chan / 2, rel=1e-6)


# -- errors ---------------------------------------------------------------------------------------
def test_a_bad_port_rule_is_one_line():
    assert PORT_RULES == ("channel", "link")
    with pytest.raises(ParameterError, match="unknown port_rule 'links': use channel or link"):
        Topology(switch(4), port_rule="links")


# -- a queue per host link -------------------------------------------------------------------------
def _nvlink_and_rail() -> nx.Graph:
    """Two servers of 8 GPUs: NVLink 450 GB/s to each server's switch, a 50 GB/s NIC per GPU on
    its rail; no latency."""
    from commsim.topology import rail_optimized

    return rail_optimized(2, 8, bandwidth=50e9, latency=0.0, nvlink_bandwidth=450e9,
                          nvlink_latency=0.0, spine_latency=0.0)  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
def test_each_host_link_is_its_own_queue_within_a_step(mode):
    """GPU 0 sends two messages over NVLink (to GPUs 1, 2) and one over its NIC (to GPU 8), in
    each of two steps: each step takes max(2 t_NVLink, t_NIC) under the link rule (the NVLink
    queue does not wait for the NIC's message), the sum under the default rule."""
    st = Step.make([0, 0, 0], [1, 2, 8], [0, 0, 0], [0, 0, 0])
    s = Schedule.from_steps([st, st], collective="broadcast", nranks=16, nslots=1)
    n, g = 1e9, _nvlink_and_rail()
    t_nv, t_nic = n / 450e9, n / 50e9
    link = Topology(g, gamma=0.0, contention=mode, port_rule="link").predict(s, n).time
    default = Topology(g, gamma=0.0, contention=mode).predict(s, n).time
    assert link == pytest.approx(2 * max(2 * t_nv, t_nic), rel=1e-12)
    assert default == pytest.approx(2 * (2 * t_nv + t_nic), rel=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_the_queues_of_a_port_meet_at_each_step_s_end(mode):
    """Program order (IR rule 3) across queues: GPU 0's NVLink message of step 2 waits for its
    NIC message of step 1, though the NVLink queue is free; so does what GPU 1 receives."""
    s1 = Step.make([0], [8], [0], [0])  # the NIC
    s2 = Step.make([0], [1], [0], [0])  # NVLink
    s = Schedule.from_steps([s1, s2], collective="broadcast", nranks=16, nslots=1)
    n = 1e9
    t = Topology(_nvlink_and_rail(), gamma=0.0, contention=mode, port_rule="link").predict(s, n)
    assert t.time == pytest.approx(n / 50e9 + n / 450e9, rel=1e-12)


def test_link_queue_messages_names_the_queues():
    from commsim.models._link_ports import link_queue_messages, link_queues

    g = Network(_nvlink_and_rail())
    hosts = np.arange(16)
    st = Step.make([0, 0, 0], [1, 2, 8], [0, 0, 0], [0, 0, 0])
    s = Schedule.from_steps([st], collective="broadcast", nranks=16, nslots=1)
    q = link_queues(g, hosts)
    assert q == 2  # a GPU's NVLink and its NIC
    msg, rounds = link_queue_messages(st, s, 1, g, hosts, q)
    assert sorted(set((msg.src // q).tolist())) == [0]  # all from rank 0's port
    assert len(set(msg.src.tolist())) == 2  # on two queues
    assert sorted(len(r) for r in rounds) == [1, 2]  # the NVLink queue's two go in turn
