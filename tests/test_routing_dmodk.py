"""D-mod-k routing: the rule, the theorem for shift permutations, ECMP beside it, predictions
under ``flow`` against the analytic value, where it is recorded (generators, join, specs,
cluster files, presets), and one-line errors for bad input."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from commsim import Schedule, Step
from commsim.cli import main
from commsim.clusters import cluster
from commsim.clusters._build import build_cluster
from commsim.errors import ParameterError
from commsim.models import Topology
from commsim.topology import (
    Network,
    fat_tree,
    join,
    parse_topology,
    rail_optimized,
    summarize,
    switch,
)

BW = 1e9


def _shift(n: int, h: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    src = np.arange(n)
    return src, (src + k * h) % n


def _load(net: Network, src, dst) -> np.ndarray:
    """Flows per directed link when every pair ``src[i] -> dst[i]`` sends at once."""
    _, links = net.routes(np.asarray(src), np.asarray(dst))
    return np.bincount(links, minlength=net.nlinks)


def _uplinks(net: Network) -> np.ndarray:
    """The directed leaf-to-spine links."""
    leaf = np.array([isinstance(v, tuple) and v[0] == "leaf" for v in net.nodes])
    return np.flatnonzero((net.link_kind == net.kind_index("leaf-spine")) & leaf[net.link_src])


def _permutation(src, dst, nranks: int) -> Schedule:
    step = Step.make(src, dst, 0, 0)
    return Schedule.from_steps([step], collective="allreduce", nranks=nranks, slot_units=[1])


# -- the rule ----------------------------------------------------------------------------------
def test_the_uplink_is_the_destination_mod_the_spines():
    net = Network(fat_tree(64, hosts_per_leaf=16, spines=8, routing="dmodk"))
    dst = np.arange(16, 64)
    indptr, links = net.routes(np.zeros(len(dst), dtype=np.int64), dst)
    up = [net.link_label(x) for x in links[indptr[:-1] + 1]]
    assert up == [(("leaf", 0), ("spine", int(d) % 8)) for d in dst]


def test_three_levels_take_core_d_div_s_mod_s_and_descend_by_spine_d_mod_s():
    net = Network(fat_tree(256, hosts_per_leaf=8, levels=3, leaves_per_pod=4, routing="dmodk"))
    for d in (40, 200, 255):
        route = [net.link_label(x) for x in net.route(0, d)]
        k, c = d % 8, (d // 8) % 8
        pod = d // 8 // 4
        assert route == [
            (0, ("leaf", 0)),
            (("leaf", 0), ("spine", 0, k)),
            (("spine", 0, k), ("core", c)),
            (("core", c), ("spine", pod, k)),
            (("spine", pod, k), ("leaf", d // 8)),
            (("leaf", d // 8), d),
        ]


def test_routes_into_a_host_are_a_function_of_the_destination():
    """Destination-based: every route to ``d`` takes the same last two links."""
    net = Network(fat_tree(96, hosts_per_leaf=8, levels=3, leaves_per_pod=3, routing="dmodk"))
    a, b = np.divmod(np.arange(96 * 96), 96)
    far = a // 8 != b // 8
    indptr, links = net.routes(a[far], b[far])
    last2 = links[indptr[1:] - 2]
    for d in range(96):
        assert len(np.unique(last2[b[far] == d])) == 1


@pytest.mark.parametrize(
    "kw",
    [
        {"hosts_per_leaf": 8, "oversubscription": 2},
        {"hosts_per_leaf": 16},  # with n = 40: an uneven last leaf
        {"hosts_per_leaf": 4, "levels": 3, "leaves_per_pod": 4},
    ],
)
def test_dmodk_routes_are_as_long_as_ecmp_routes(kw):
    """Both are minimal (up to the lowest common level, then down)."""
    n = 40 if kw == {"hosts_per_leaf": 16} else 48
    a, b = np.divmod(np.arange(n * n), n)
    hops = [
        np.diff(Network(fat_tree(n, routing=r, **kw)).routes(a, b)[0]) for r in ("ecmp", "dmodk")
    ]
    np.testing.assert_array_equal(*hops)


# -- the theorem, and ECMP beside it -----------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_shift_permutation_puts_one_flow_on_every_link_of_a_full_bisection_tree(k):
    """Zahavi (2010): d-mod-k is non-blocking for shift permutations; the ECMP hash is not."""
    g = {
        r: Network(fat_tree(64, hosts_per_leaf=16, spines=16, routing=r)) for r in ("ecmp", "dmodk")
    }
    src, dst = _shift(64, 16, k)
    assert _load(g["dmodk"], src, dst).max() == 1
    assert _load(g["ecmp"], src, dst)[_uplinks(g["ecmp"])].max() >= 3  # the hash collides


def test_an_oversubscribed_leaf_spreads_its_flows_evenly():
    net = Network(fat_tree(64, hosts_per_leaf=16, oversubscription=4, routing="dmodk"))
    src, dst = _shift(64, 16, 1)
    load = _load(net, src, dst)[_uplinks(net)]
    assert set(load.tolist()) == {4}  # 16 flows of a leaf on its 4 uplinks, 4 each


@pytest.mark.parametrize(
    ("kw", "per_uplink"),
    [({"spines": 16}, 1), ({"oversubscription": 4}, 4)],
    ids=["1:1", "4:1"],
)
def test_flow_predicts_the_analytic_time_of_a_shift(kw, per_uplink):
    """One message of ``m`` bytes per host; an uplink of bandwidth ``B`` (1:1: 16 spines of
    ``B``; 4:1: 4 spines of ``16 B / 16``) carries ``per_uplink`` flows, so all end at
    ``per_uplink · m / B``. ECMP's hash piles more on some uplink and is slower."""
    m = 1e6
    src, dst = _shift(64, 16, 1)
    s = _permutation(src, dst, 64)
    t = {
        r: Topology(
            fat_tree(64, hosts_per_leaf=16, bandwidth=BW, latency=0, routing=r, **kw),
            contention="flow",
            gamma=0,
        )
        .predict(s, m)
        .time
        for r in ("dmodk", "ecmp")
    }
    assert t["dmodk"] == pytest.approx(per_uplink * m / BW, rel=1e-9)
    assert t["ecmp"] > 1.2 * t["dmodk"]


# -- rail-optimized fabrics and join -----------------------------------------------------------
def test_rail_routes_stay_in_the_server_then_on_the_rail_then_by_spine_d_mod_s():
    net = Network(rail_optimized(8, 4, nodes_per_unit=2, spines=2, routing="dmodk"))
    labels = [[net.link_label(x) for x in net.route(0, d)] for d in (1, 4, 8, 9)]
    assert labels[0] == [(0, (0, "nvswitch")), ((0, "nvswitch"), 1)]  # same server: NVLink
    assert labels[1] == [(0, ("fabric", ("leaf", 0, 0))), (("fabric", ("leaf", 0, 0)), 4)]
    # GPU 8 = server 2, rail 0: leaf (1, 0) = leaf id 4, place 0 -> D = 4 * 2 + 0 = 8
    assert labels[2][1] == (("fabric", ("leaf", 0, 0)), ("fabric", ("spine", 0)))
    # GPU 9 = server 2, rail 1: leaf id 5 -> D = 10 -> spine 0; GPU 13 (server 3): D = 11
    assert labels[3][1][1] == ("fabric", ("spine", 0))
    assert [net.link_label(x) for x in net.route(0, 13)][1][1] == ("fabric", ("spine", 1))


def test_rail_dmodk_and_ecmp_routes_have_equal_lengths():
    n = 6 * 4
    a, b = np.divmod(np.arange(n * n), n)
    hops = [
        np.diff(Network(rail_optimized(6, 4, nodes_per_unit=2, routing=r)).routes(a, b)[0])
        for r in ("ecmp", "dmodk")
    ]
    np.testing.assert_array_equal(*hops)


def test_join_keeps_the_fabric_routing_and_needs_one_switch_per_server():
    g = join(switch(4), fat_tree(16, hosts_per_leaf=4, routing="dmodk"), 4)
    assert g.graph["routing"][0] == "dmodk"
    net = Network(g)
    assert net.link_label(net.route(0, 1)[0]) == (0, (0, "switch"))
    two = nx.path_graph(["a", 0, "s", 1, "t", 2, 3])
    nx.set_node_attributes(two, {"a": "switch", "s": "switch", "t": "switch"}, "kind")
    nx.set_edge_attributes(two, 1e9, "bandwidth")
    two.add_edge(3, "t", bandwidth=1e9)
    with pytest.raises(ParameterError, match="one switch") as e:
        join(two, fat_tree(16, hosts_per_leaf=4, routing="dmodk"), 4)
    assert "\n" not in str(e.value)


def test_an_edited_graph_falls_back_to_shortest_paths():
    g = fat_tree(32, hosts_per_leaf=8, spines=4, routing="dmodk")
    g.remove_edge(("leaf", 0), ("spine", 1))  # the d-mod-k uplink of destination 9
    route = [Network(g).link_label(x) for x in Network(g).route(0, 9)]
    assert len(route) == 4 and route[1][1] != ("spine", 1)


# -- where the choice is made -------------------------------------------------------------------
def test_the_spec_passes_routing_to_the_generator_and_summaries_name_it():
    g = parse_topology("fat_tree:64,hosts_per_leaf=16,spines=16,routing=dmodk")
    assert g.graph["routing"][0] == "dmodk"
    assert "routing" not in parse_topology("fat_tree:64,routing=ecmp").graph
    assert summarize(Network(g)).routing.startswith("d-mod-k")
    assert summarize(Network(fat_tree(8))).routing == "shortest paths, ECMP hash"
    assert parse_topology("rail_optimized:2,4,routing=dmodk").graph["routing"][0] == "dmodk"


def test_presets_infiniband_dmodk_ethernet_ecmp():
    for name in ("dgx-h100:4", "dgx-a100:4", "gb200-nvl72:2"):
        assert cluster(name).graph.graph["routing"][0] == "dmodk", name
    assert "routing" not in cluster("ethernet:64").graph.graph


def test_a_cluster_file_takes_routing():
    d = {
        "nodes": 8,
        "gpus_per_node": 2,
        "intra": {"bandwidth": "100GB/s", "latency": "1us"},
        "inter": {"bandwidth": "100Gb/s", "latency": "1us"},
        "topology": {"kind": "fat_tree", "hosts_per_leaf": 4, "routing": "dmodk"},
    }
    c = build_cluster(d, "x.toml")
    assert c.graph.graph["routing"][0] == "dmodk" and len(c.network.route(0, 15)) == 4


# -- bad input: one line -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: fat_tree(8, routing="updown"), "routing must be 'ecmp' or 'dmodk', got 'updown'"),
        (lambda: rail_optimized(2, routing="dmod"), "rail_optimized: routing must be"),
        (lambda: parse_topology("torus:4x4,routing=dmodk"), "torus takes no routing="),
        (lambda: parse_topology("fat_tree:8,routing=5"), "got 5"),
        (
            lambda: build_cluster(
                {
                    "nodes": 4,
                    "inter": {"bandwidth": "100Gb/s", "latency": "1us"},
                    "topology": {"kind": "switch", "routing": "dmodk"},
                },
                "x.toml",
            ),
            r"\[topology\] routing: only rail_optimized and fat_tree",
        ),
        (
            lambda: build_cluster(
                {
                    "nodes": 4,
                    "inter": {"bandwidth": "100Gb/s", "latency": "1us"},
                    "topology": {"kind": "fat_tree", "routing": "hash"},
                },
                "x.toml",
            ),
            "routing must be",
        ),
    ],
)
def test_bad_routing_is_one_line(make, message):
    with pytest.raises(ParameterError, match=message) as e:
        make()
    assert "\n" not in str(e.value)


def test_the_cli_names_the_routing_and_exits_2_on_bad_routing(capsys):
    assert main(["topology", "fat_tree:64,hosts_per_leaf=16,spines=16,routing=dmodk"]) == 0
    assert "routing: d-mod-k" in capsys.readouterr().out
    assert main(["topology", "fat_tree:64,routing=bogus"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "dmodk" in err


def test_the_cli_predicts_rabenseifner_at_its_bound_on_a_dmodk_tree(capsys):
    """The issue's spec: Rabenseifner's exchanges between whole leaves share no uplink under
    d-mod-k, so ``flow`` lands on the bandwidth bound; the ECMP hash makes it far slower.
    γ = 0: the topology model's bound has no γ term (a rank's channels reduce concurrently,
    docs/bounds.md), so the reductions would stand between the time and the bound."""
    ratio = {}
    for routing in ("dmodk", "ecmp"):
        spec = f"fat_tree:64,hosts_per_leaf=16,spines=16,routing={routing}"
        argv = ["predict", "-c", "allreduce", "-a", "rabenseifner", "-p", "64", "--gamma", "0",
                "--topology", spec, "--contention", "flow", "-s", "64MiB", "--json"]  # fmt: skip
        assert main(argv) == 0
        ratio[routing] = json.loads(capsys.readouterr().out)["results"][0]["ratio_to_bound"]
    assert ratio["dmodk"] < 1.01 and ratio["ecmp"] > 2
