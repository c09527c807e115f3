"""The topology model's bounds (injection, cut, bisection) and the dgx1-v100 preset.

Two promises: the bound is never above what a schedule achieves (single- and multi-channel
schedules, every contention mode, several graphs), and it is the optimum the literature quotes
where that is known (the DGX-1's allgather, ForestColl's and Blink's numbers).
"""

from __future__ import annotations

import json
import time

import networkx as nx
import numpy as np
import pytest

import commsim
from commsim import cli
from commsim.algorithms import REGISTRY
from commsim.algorithms._parallel import channels, parallel
from commsim.clusters import cluster
from commsim.errors import ParameterError
from commsim.models import Hockney, Topology, bound_of
from commsim.models._graph_bounds import BOUND_NAMES, cut_bound, graph_cuts
from commsim.topology import (
    DGX1_NVLINKS,
    Network,
    fat_tree,
    hybrid_cube_mesh,
    switch,
    torus,
)

SIZES = np.array([0.0, 4096.0, 1e6 + 3, 2.0**30])
GIB = 2.0**30
NV = 25e9  # one NVLink, per direction


def _per_byte(graph, collective, p):
    """The strongest bound's seconds per byte (latency aside)."""
    cuts = graph_cuts(Network(graph), np.arange(p))
    return max(cut_bound(collective, cuts).values())


# -- the numbers the issue quotes ------------------------------------------------------------------
def test_dgx1_allgather_optimum_is_the_cut_bound():
    """ForestColl's and the issue's optimum: 8 GPUs x 6 NVLinks of 25 GB/s give 150 GB/s per
    GPU, (7/8) n / 150 GB/s: 171.4 GB/s algbw; GPUs {0,1,2,3} keep 4 links on GPUs 0 and 2:
    (3/4) n / 100 GB/s: 133.3 GB/s."""
    full = 1 / _per_byte(hybrid_cube_mesh(pcie=False), "allgather", 8)
    quad = 1 / _per_byte(hybrid_cube_mesh([0, 1, 2, 3], pcie=False), "allgather", 4)
    assert full / 1e9 == pytest.approx(150 * 8 / 7) == pytest.approx(171.43, abs=0.01)
    assert quad / 1e9 == pytest.approx(100 * 4 / 3) == pytest.approx(133.33, abs=0.01)


def test_dgx1_bound_at_1GiB_is_below_what_hardware_reaches():
    """The old bound (one link: 50 GB/s) said 18.8 ms for a 1 GiB allgather; the hardware's
    171.4 GB/s is 6.26 ms, and the new bound is that."""
    m = Topology(hybrid_cube_mesh(pcie=False, latency=0.0), gamma=0.0)
    t, name = m.bound("allgather", 8, GIB)
    assert t == pytest.approx(7 / 8 * GIB / (6 * NV))
    assert t * 1e3 == pytest.approx(6.26, abs=0.01)
    assert name == BOUND_NAMES["injection"]
    single_link = 7 / 8 * GIB / (2 * NV)
    assert single_link * 1e3 == pytest.approx(18.8, abs=0.05) and t < single_link


def test_dgx1_link_matrix():
    assert (DGX1_NVLINKS == DGX1_NVLINKS.T).all() and (DGX1_NVLINKS.sum(axis=1) == 6).all()
    g = hybrid_cube_mesh(pcie=False)
    assert g.number_of_edges() == 16 and sum(d["links"] for *_, d in g.edges(data=True)) == 24
    assert g.edges[0, 1]["bandwidth"] == 2 * NV and g.edges[0, 2]["bandwidth"] == NV


# -- each family, by hand --------------------------------------------------------------------------
def test_injection_bound_per_collective_on_a_switch():
    """Equal hosts of bandwidth B: Chan et al.'s factor f_beta(p) n / B, except the rooted
    collectives' n / B and alltoall's (p-1)/p n / B."""
    p, b = 8, 1e9
    net = switch(p, bandwidth=b, latency=0.0)
    want = {
        "allgather": (p - 1) / p,
        "reduce_scatter": (p - 1) / p,
        "allreduce": 2 * (p - 1) / p,
        "alltoall": (p - 1) / p,
        "broadcast": 1.0,
        "reduce": 1.0,
    }
    for collective, f in want.items():
        t, name = Topology(net, gamma=0.0).bound(collective, p, 1e9)
        assert t == pytest.approx(f), collective
        assert name == BOUND_NAMES["injection"], collective


def test_allreduce_injection_averages_over_unequal_hosts():
    """A hub of three links and three leaves of one: reduce at the hub and broadcast back takes
    n / B (each leaf sends and receives n once), below 2(p-1)/p n / B_leaf; the bound counts the
    2(p-1) n bytes over the sum of the hosts' bandwidths instead, and each host's n."""
    g = nx.star_graph(3)
    nx.set_edge_attributes(g, 1e9, "bandwidth")
    per_byte = _per_byte(g, "allreduce", 4)
    assert per_byte == pytest.approx(max(1 / 1e9, 6 / 6e9))
    assert per_byte < 2 * 3 / 4 / 1e9


def test_a_thin_link_between_two_halves_is_found_by_the_cuts():
    """Two switches of 4 hosts joined by one link of B/10: allgather must move n/2 across it."""
    g = nx.Graph()
    for side in (0, 1):
        g.add_node(("s", side), kind="switch")
        for i in range(4):
            g.add_edge(side * 4 + i, ("s", side), bandwidth=1e9)
    g.add_edge(("s", 0), ("s", 1), bandwidth=1e8)
    g = nx.relabel_nodes(g, {})  # hosts first in insertion order: 0..3, then 4..7
    cuts = graph_cuts(Network(g), np.arange(8))
    per = cut_bound("allgather", cuts)
    assert per["every"] == pytest.approx(0.5 / 1e8)
    assert per["bisection"] == pytest.approx(0.5 / 1e8)
    t, name = Topology(g).bound("allgather", 8, 1e9)
    assert name in (BOUND_NAMES["every"], BOUND_NAMES["bisection"])
    assert t >= 0.5 * 1e9 / 1e8


def test_server_groups_bind_where_the_nics_are_thin():
    """dgx-h100: a server's 8 NICs of 50 GB/s carry every broadcast byte into it."""
    c = cluster("dgx-h100:4")
    t, name = Topology(c.graph, gamma=c.gamma).bound("broadcast", 32, GIB)
    assert name == BOUND_NAMES["servers"]
    assert t >= GIB / (8 * 50e9)


def test_contention_none_has_only_the_latency():
    """No link is shared, so channels move any amount at once: one message's latency."""
    m = Topology(switch(4, latency=1e-6), contention="none")
    t, name = m.bound("allreduce", 4, SIZES)
    assert np.allclose(t, 2e-6) and "latency" in name


def test_one_rank_has_no_bound():
    assert Topology(switch(4)).bound("allreduce", 1, 1e6) == (0.0, "one rank: nothing to move")


def test_bound_of_any_model():
    assert bound_of(Hockney(1.0, 0.001, 0.0), "allreduce", 4, 1e3) == (3.5, Hockney().bound_name)
    m = Topology(torus((4, 4)))
    assert bound_of(m, "allgather", 16, GIB) == m.bound("allgather", 16, GIB)


# -- never above a schedule ------------------------------------------------------------------------
def _nets():
    star = nx.star_graph(7)
    nx.set_edge_attributes(star, 25e9, "bandwidth")
    return {
        "dgx1-nvlink": hybrid_cube_mesh(pcie=False),
        "dgx1-pcie": hybrid_cube_mesh(),
        "dgx1-0123": hybrid_cube_mesh([0, 1, 2, 3], pcie=False),
        "torus4x4": torus((4, 4), bandwidth=45e9),
        "fat_tree": fat_tree(16, hosts_per_leaf=4, oversubscription=2),
        "switch": switch(8),
        "star": star,
    }


NETS = _nets()
ROWS = [REGISTRY[k] for k in sorted(REGISTRY)]


def _candidates(row, p):
    s = commsim.build(row.collective, row.algorithm, nranks=p)
    out = [s]
    if s.nchannels == 1:
        out += [channels(s, 2), channels(s, 3)]
    return out


@pytest.mark.parametrize("mode", ["bottleneck", "maxmin", "flow", "none"])
@pytest.mark.parametrize("net", sorted(NETS))
def test_no_schedule_beats_the_bound(net, mode):
    """Every registry row at p = min(hosts, 8), as is and as 2 and 3 channels."""
    m = Topology(NETS[net], contention=mode, gamma=1e-11)
    p = min(m.network.nhosts, 8)
    rows = ROWS if net in ("dgx1-nvlink", "torus4x4") else ROWS[::3]
    for row in rows:
        bound = m.lower_bound(row.collective, p, SIZES)
        for s in _candidates(row, p):
            if s.in_network and not len(m.network.reducing):  # no switch here reduces
                with pytest.raises(ParameterError, match="in-network reduction needs"):
                    m.predict(s, SIZES)
                continue
            t = m.predict(s, SIZES).time
            assert (t >= bound * (1 - 1e-9)).all(), (row.collective, row.algorithm, s.nchannels)


@pytest.mark.parametrize("mode", ["bottleneck", "maxmin", "flow"])
def test_parallel_parts_of_different_shapes_never_beat_it(mode):
    """Ring and recursive doubling side by side (different steps on different channels)."""
    for net in ("dgx1-nvlink", "torus4x4"):
        m = Topology(NETS[net], contention=mode)
        p = 8
        for collective, algs in [
            ("allgather", ("ring", "recursive_doubling", "bruck")),
            ("allreduce", ("ring", "rabenseifner")),
        ]:
            s = parallel(*(commsim.build(collective, a, nranks=p) for a in algs))
            commsim.verify(s)
            pred = m.predict(s, SIZES)
            assert (pred.time >= m.lower_bound(collective, p, SIZES) * (1 - 1e-9)).all()
            assert not any("below" in n for n in pred.notes)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_unequal_graphs_never_beat_it(seed):
    """Six hosts on a random connected graph of links of 10, 25 or 50 GB/s (hosts of unequal
    bandwidth forward for one another): every other row, 1 and 2 channels, under flow."""
    rng = np.random.default_rng(seed)
    g = nx.connected_watts_strogatz_graph(6, 2, 0.5, seed=seed)
    for u, v in g.edges:
        g.edges[u, v]["bandwidth"] = float(rng.choice([10e9, 25e9, 50e9]))
        g.edges[u, v]["latency"] = float(rng.choice([0.0, 1e-6]))
    m = Topology(g, contention="flow", gamma=1e-11)
    for row in ROWS[seed::2]:
        s = commsim.build(row.collective, row.algorithm, nranks=6)
        bound = m.lower_bound(row.collective, 6, SIZES)
        for sk in (s, channels(s, 2)):
            if sk.in_network:  # no switch of this graph reduces
                with pytest.raises(ParameterError, match="in-network reduction needs"):
                    m.predict(sk, SIZES)
                continue
            assert (m.predict(sk, SIZES).time >= bound * (1 - 1e-9)).all(), row


def test_the_best_dgx1_allgather_is_within_the_bound():
    """Flow mode, NVLink only: every registry allgather is at or above 171.4 GB/s's time."""
    m = Topology(NETS["dgx1-nvlink"], contention="flow", gamma=0.0)
    bound = m.lower_bound("allgather", 8, GIB)
    best = min(
        m.predict(commsim.build("allgather", a, nranks=8), GIB).time
        for (c, a) in REGISTRY
        if c == "allgather"
    )
    assert best >= bound


# -- scale ------------------------------------------------------------------------------------------
def test_bounds_are_arrays_at_16384_ranks():
    c = cluster("dgx-h100:2048")
    m = Topology(c.graph, gamma=c.gamma)
    start = time.perf_counter()
    for collective in ("allreduce", "allgather", "alltoall", "broadcast"):
        t, name = m.bound(collective, 16384, SIZES)
        assert (np.diff(t) >= 0).all()
        assert name.endswith("; no bisection cut on over 512 nodes (max-flow)")
    assert time.perf_counter() - start < 10
    cuts = graph_cuts(m.network, np.arange(16384))
    assert "bisection" not in [f.name for f in cuts.families]
    assert cuts.notes == ("no bisection cut on over 512 nodes (max-flow)",)


# -- the preset --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "gpus", "kinds"),
    [
        ("dgx1-v100:all", 8, {"nvlink", "pcie", "qpi"}),
        ("dgx1-v100:0-7", 8, {"nvlink", "pcie", "qpi"}),
        ("dgx1-v100:0,1,2,3", 4, {"nvlink", "pcie"}),
        ("dgx1-v100:gpus=0-3", 4, {"nvlink", "pcie"}),
        ("dgx1-v100:0-3:nvlink", 4, {"nvlink"}),
        ("dgx1-v100:0,5", 2, {"pcie", "qpi"}),
    ],
)
def test_dgx1_preset_subsets(spec, gpus, kinds):
    c = cluster(spec)
    assert (c.ngpus, c.nodes, c.ranks_per_node) == (gpus, 1, gpus)
    assert set(c.network.kinds) == kinds


def test_dgx1_routes_use_nvlink_where_there_is_one():
    net = cluster("dgx1-v100:all").network
    assert [net.kinds[k] for k in net.link_kind[net.route(0, 4)]] == ["nvlink"]
    assert [net.kinds[k] for k in net.link_kind[net.route(0, 5)]] == [
        "pcie", "pcie", "qpi", "pcie", "pcie",
    ]  # fmt: skip
    assert set(net.bandwidth[net.link_kind == net.kind_index("nvlink")]) == {NV, 2 * NV}


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("dgx1-v100:0,9", "GPUs 0..7, got GPU 9"),
        ("dgx1-v100:x", "give GPUs as all"),
        ("dgx1-v100:3-1", "give GPUs as all"),
        ("dgx1-v100:0-3:pcie", "only ':nvlink'"),
        ("dgx1-v100:0,5:nvlink", "not connected by NVLink alone"),
    ],
)
def test_bad_subsets_are_one_line_exit_2(spec, words, capsys):
    code = cli.main(["predict", "-c", "allgather", "-a", "ring", "--cluster", spec, "-s", "1MiB"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and words in err and "\n" not in err
    with pytest.raises(ParameterError):
        cluster(spec)


def test_hybrid_cube_mesh_rejects_gpus_outside_the_node():
    with pytest.raises(ParameterError, match=r"GPUs 0\.\.7"):
        hybrid_cube_mesh([0, 8])


# -- the CLI names the bound that binds ------------------------------------------------------------
def test_predict_names_the_binding_bound(capsys):
    args = ["predict", "-c", "allgather", "-a", "ring", "--cluster", "dgx1-v100:all:nvlink"]
    assert cli.main([*args, "-s", "1GiB"]) == 0
    out = capsys.readouterr().out
    assert "bound: injection bound (all of a host's links)" in out
    assert cli.main([*args, "-s", "1GiB", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["bound"] == BOUND_NAMES["injection"]
    [row] = doc["results"]
    assert row["lower_bound_s"] == pytest.approx(7 / 8 * GIB / (6 * NV), rel=1e-3)
    assert row["lower_bound_s"] <= row["time_s"]


def test_compare_names_the_binding_bound_per_panel(capsys):
    """An alltoall on a 4x8 torus (32 nodes: no exhaustive cuts) is bisection-bound: half of
    every rank's data crosses the middle."""
    args = ["compare", "-c", "alltoall", "-a", "direct", "--topology", "torus:4x8", "-s", "1MiB"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "alltoall, p=32 (bound: bisection bound" in out
    assert cli.main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["results"][0]["bound"] == BOUND_NAMES["bisection"]
