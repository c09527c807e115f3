"""Measured link profiles (a cluster file's ``[profiles.CLASS]``) in the topology model: a
message's rate capped at the profiled rate of its size on every class it crosses, in every
contention mode, each size timed on its own; checked against hand-derived ring times."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.clusters import LinkProfile, cluster
from commsim.errors import ParameterError
from commsim.models import Topology
from commsim.topology import switch
from commsim.tuner import cluster_model

B = 1e9  # bytes/s per link
MODES = ["none", "bottleneck", "maxmin", "flow"]


def _flat(rate: float, name: str = "nvlink") -> LinkProfile:
    return LinkProfile(name, np.array([1.0, 2.0**40]), np.array([rate, rate]))


def _ring_time(p: int, n: float, rate: float) -> float:
    """Ring allreduce, no latency, no reduction cost: 2(p-1) messages of n/p bytes each."""
    return 2 * (p - 1) * (n / p) / rate


@pytest.mark.parametrize("contention", MODES)
def test_a_flat_profile_caps_the_ring_at_its_rate(contention):
    s = commsim.build("allreduce", "ring", nranks=4)
    net = switch(4, bandwidth=B, latency=0.0, kind="nvlink")
    sizes = np.array([4e6, 4e9])
    line = Topology(net, gamma=0.0, contention=contention)
    half = Topology(net, gamma=0.0, contention=contention, link_profiles={"nvlink": _flat(B / 2)})
    same = Topology(net, gamma=0.0, contention=contention, link_profiles={"nvlink": _flat(B)})
    assert half.predict(s, sizes).time == pytest.approx([_ring_time(4, n, B / 2) for n in sizes])
    assert same.predict(s, sizes).time == pytest.approx(line.predict(s, sizes).time, rel=1e-12)
    assert (half.predict(s, sizes).time >= half.lower_bound("allreduce", 4, sizes)).all()


@pytest.mark.parametrize("contention", MODES)
def test_a_ramp_caps_each_size_at_its_interpolated_rate(contention):
    """The rate at a message's size, linear in log2(size) between the measured points and flat
    beyond them; a prediction of several sizes equals each size predicted alone."""
    prof = LinkProfile("nvlink", np.array([2.0**10, 2.0**20]), np.array([0.1 * B, 0.6 * B]))
    s = commsim.build("allreduce", "ring", nranks=4)
    net = switch(4, bandwidth=B, latency=0.0, kind="nvlink")
    m = Topology(net, gamma=0.0, contention=contention, link_profiles={"nvlink": prof})
    sizes = np.array([4 * 2.0**8, 4 * 2.0**15, 4 * 2.0**30])  # messages of 2^8, 2^15, 2^30 B
    rate = [0.1 * B, 0.1 * B + 0.5 * B * (15 - 10) / 10, 0.6 * B]
    expect = [_ring_time(4, n, r) for n, r in zip(sizes, rate, strict=True)]
    pred = m.predict(s, sizes)
    assert pred.time == pytest.approx(expect)
    alone = [float(m.predict(s, n).time) for n in sizes]
    assert pred.time == pytest.approx(alone, rel=1e-12)
    assert pred.network.link_bytes[:, 1] == pytest.approx(
        m.predict(s, sizes[1]).network.link_bytes[:, 0]
    )


def test_the_smaller_of_a_profile_and_the_channel_cap_holds():
    s = commsim.build("allreduce", "ring", nranks=4)
    net = switch(4, bandwidth=B, latency=0.0, kind="nvlink")
    for cap, prof, rate in ((B / 4, B / 2, B / 4), (B / 2, B / 4, B / 4)):
        m = Topology(net, gamma=0.0, channel_bandwidth=cap, link_profiles={"nvlink": _flat(prof)})
        assert m.predict(s, 4e9).time == pytest.approx(_ring_time(4, 4e9, rate))


def test_a_class_without_a_profile_is_not_capped():
    """Two servers of two GPUs: a profile of the NIC class leaves NVLink messages alone."""
    c = cluster("dgx-h100:2")
    nic = next(k for k in c.network.kinds if k != "nvlink")
    slow = LinkProfile(nic, np.array([1.0, 2.0**40]), np.array([1e9, 1e9]))
    inside = commsim.build("allreduce", "ring", nranks=8)  # one server: NVLink only
    m0, m1 = cluster_model(c), Topology(c.network, gamma=c.gamma, link_profiles={nic: slow})
    assert m1.predict(inside, 1e9).time == pytest.approx(
        Topology(c.network, gamma=c.gamma).predict(inside, 1e9).time, rel=1e-12
    )
    across = commsim.build("allreduce", "ring", nranks=16)
    assert m1.predict(across, 1e9).time > 5 * m0.predict(across, 1e9).time


def test_a_cluster_file_s_profiles_reach_the_model(tmp_path):
    text = """name = "lab"
nodes = 4
gpus_per_node = 2
[intra]
kind = "nvlink"
bandwidth = "100GB/s"
latency = "1us"
[inter]
kind = "eth"
bandwidth = "400Gb/s"
latency = "2us"
[topology]
kind = "switch"
[profiles.inter]
sizes = ["8KiB", "1MiB", "256MiB"]
bandwidth = ["6GB/s", "40GB/s", "48GB/s"]
"""
    path = tmp_path / "lab.toml"
    path.write_text(text)
    c = cluster(str(path))
    assert set(c.profiles) == {"eth"} and c.profiles["eth"].rate(np.array([2.0**20])) == [40e9]
    model = cluster_model(c)
    assert set(model.link_profiles) == {"eth"} and "profiled=eth" in model.describe()
    s = commsim.build("allreduce", "ring", nranks=8)
    plain = Topology(c.network, gamma=c.gamma)
    assert model.predict(s, "1GiB").time > plain.predict(s, "1GiB").time
    bad = text.replace('"48GB/s"', '"60GB/s"')
    path.write_text(bad)
    with pytest.raises(ParameterError, match=r"\[profiles.inter\] bandwidth: 60.0GB/s is above"):
        cluster(str(path))


def test_bad_profiles_are_one_line():
    net = switch(4, bandwidth=B, kind="nvlink")
    with pytest.raises(ParameterError, match="no link class 'nic'"):
        Topology(net, link_profiles={"nic": _flat(B)})
    with pytest.raises(ParameterError, match=r"must have rate\(nbytes\)"):
        Topology(net, link_profiles={"nvlink": 3.0})


@pytest.mark.parametrize("contention", MODES)
def test_a_binding_profile_is_what_limits(contention):
    """Class ``a`` at 10 GB/s profiled to 1 GB/s, class ``b`` at 5 GB/s on the same route: the
    transfer is charged to ``a`` (the time parts, "limited by"), whose cap binds."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from([0, 1], kind="host")
    g.add_node("s", kind="switch")
    g.add_edge(0, "s", bandwidth=10e9, latency=0.0, kind="a")
    g.add_edge("s", 1, bandwidth=5e9, latency=0.0, kind="b")
    s = commsim.build("allreduce", "ring", nranks=2)
    m = Topology(g, gamma=0.0, contention=contention, link_profiles={"a": _flat(1e9, "a")})
    pred = m.predict(s, [2e9, 4e9])
    assert pred.time == pytest.approx([2 * 1e9 / 1e9, 2 * 2e9 / 1e9])
    assert list(np.atleast_1d(pred.network.limiting)) == ["a", "a"]
    parts = dict(zip(pred.network.part_names, pred.network.time_parts[:, -1], strict=True))
    assert parts["a"] == pytest.approx(4.0) and parts["b"] == 0.0
    plain = Topology(g, gamma=0.0, contention=contention).predict(s, 4e9)
    assert list(np.atleast_1d(plain.network.limiting)) == ["b"]


def test_a_profile_may_name_any_class_of_the_graph(tmp_path):
    """A fabric's own class (rail_optimized's ``spine``) takes a profile by its name, capped at
    its links' bandwidth (here two spine links of 100 GB/s per leaf)."""
    text = """nodes = 4
gpus_per_node = 2
[intra]
kind = "nvlink"
bandwidth = "100GB/s"
latency = "1us"
[inter]
kind = "rail"
bandwidth = "400Gb/s"
latency = "1us"
[topology]
kind = "rail_optimized"
nodes_per_unit = 2
[profiles.spine]
sizes = ["8KiB", "1MiB"]
bandwidth = ["6GB/s", "40GB/s"]
"""
    path = tmp_path / "spine.toml"
    path.write_text(text)
    c = cluster(str(path))
    assert set(c.profiles) == {"spine"}
    assert "profiled=spine" in cluster_model(c).describe()
    path.write_text(text.replace('"40GB/s"', '"400GB/s"'))
    with pytest.raises(ParameterError, match=r"400GB/s is above the spine links' 100GB/s"):
        cluster(str(path))
    path.write_text(text.replace("[profiles.spine]", "[profiles.core]"))
    with pytest.raises(ParameterError, match="no link class 'core'"):
        cluster(str(path))
