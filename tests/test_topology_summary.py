"""Summaries: link classes, diameter, and bisection bandwidth (stated, exact, bounded)."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from commsim.errors import ParameterError
from commsim.topology import (
    Network,
    bisection_upper_bound,
    dragonfly,
    exact_bisection,
    fat_tree,
    hypercube,
    kary_fat_tree,
    load_topology,
    nvlink_island,
    ring,
    summarize,
    switch,
    torus,
)

B = 25e9  # the generators' default bandwidth

STATED = {
    "switch(7)": switch(7),
    "ring(7)": ring(7),
    "ring(8)": ring(8),
    "torus(4,3)": torus((4, 3)),
    "torus(4,4)": torus((4, 4)),
    "torus(4,2,2)": torus((4, 2, 2)),
    "hypercube(4)": hypercube(4),
    "fat_tree(32,8,o=2)": fat_tree(32, hosts_per_leaf=8, oversubscription=2),
    "fat_tree(64,16,o=4)": fat_tree(64, hosts_per_leaf=16, oversubscription=4),
    "fat_tree(48,4,3 levels)": fat_tree(48, hosts_per_leaf=4, levels=3, leaves_per_pod=3, spines=1),
    "kary_fat_tree(4)": kary_fat_tree(4),
    "nvlink_island(8)": nvlink_island(8),
}


@pytest.mark.parametrize("name", STATED)
def test_a_stated_bisection_is_the_least_balanced_cut(name):
    g = STATED[name]
    net = Network(g)
    assert g.graph["bisection_bandwidth"] == pytest.approx(exact_bisection(net), rel=1e-12)
    assert bisection_upper_bound(net) >= exact_bisection(net) * (1 - 1e-12)
    s = summarize(net)
    assert s.bisection_method == "stated"


@pytest.mark.parametrize(
    ("g", "want"),
    [
        (fat_tree(8, hosts_per_leaf=8, oversubscription=4), 4 * B),  # one leaf: host links cut
        (fat_tree(7, hosts_per_leaf=4), 3 * B),  # 3 hosts apart from their 4 + 3 peers
        (torus((2, 3)), 3 * B),  # cut the three 2-rings (one link each), not a 3-ring
        (dragonfly(2, 4, 1, 4), 4 * B),  # 8 hosts: 4 host links, not 16 global links
        (dragonfly(3, 2, 2, 1), 2 * B),
    ],
)
def test_generators_do_not_state_what_their_formula_gets_wrong(g, want):
    assert "bisection_bandwidth" not in g.graph
    s = summarize(Network(g))
    assert s.bisection_method == "exact"
    assert s.bisection_bandwidth == pytest.approx(want, rel=1e-12)


def _random_graph(seed: int) -> nx.Graph:
    rng = np.random.default_rng(seed)
    g = nx.connected_watts_strogatz_graph(12, 4, 0.5, seed=seed)
    for u, v in g.edges:
        g.edges[u, v]["bandwidth"] = float(rng.integers(1, 5)) * 1e9
    for v in rng.choice(12, 4, replace=False).tolist():
        g.nodes[v]["kind"] = "switch"
    return g


@pytest.mark.parametrize("seed", range(6))
def test_the_heuristic_never_undercuts_the_exact_bisection(seed):
    net = Network(_random_graph(seed))
    exact = exact_bisection(net)
    assert exact > 0
    assert bisection_upper_bound(net) >= exact * (1 - 1e-12)


def test_exact_bisection_agrees_with_all_host_splits_by_max_flow():
    """An independent derivation: every balanced split of 8 hosts, its least cut by max flow."""
    import itertools

    g = _random_graph(3)
    net = Network(g)
    hosts = [net.nodes[h] for h in net.hosts]
    best = np.inf
    for a in itertools.combinations(hosts, len(hosts) // 2):
        h = g.copy()
        nx.set_edge_attributes(h, nx.get_edge_attributes(g, "bandwidth"), "capacity")
        h.add_edges_from(("s", x) for x in a)
        h.add_edges_from((x, "t") for x in hosts if x not in a)
        for x in hosts:  # the super source and sink reach hosts, never the reverse
            if x in a:
                h.edges["s", x]["capacity"] = np.inf
            else:
                h.edges[x, "t"]["capacity"] = np.inf
        best = min(best, nx.minimum_cut_value(h.to_directed(), "s", "t"))
    assert exact_bisection(net) == pytest.approx(best, rel=1e-12)


def test_a_directed_graph_counts_the_weaker_direction():
    g = nx.DiGraph()
    g.add_edge(0, 1, bandwidth=1e9)
    g.add_edge(1, 0, bandwidth=3e9)
    net = Network(g)
    assert exact_bisection(net) == bisection_upper_bound(net) == 1e9


def test_a_medium_graph_is_bounded_by_its_node_order_split():
    g = torus((65, 65))  # odd: not stated; 4225 nodes: past the searches, the node order only
    assert "bisection_bandwidth" not in g.graph
    with pytest.raises(ParameterError, match="2\\^"):
        exact_bisection(Network(g))
    s = summarize(Network(g))
    assert s.bisection_method == "upper bound"
    side = np.arange(65 * 65) >= 65 * 65 // 2  # no switches: the cut is the crossing links
    crossing = sum(side[u] != side[v] for u, v in g.edges)
    assert s.bisection_bandwidth == pytest.approx(crossing * B, rel=1e-12)
    assert not s.diameter_exact and s.diameter <= 64  # a sample: never above the true 32 + 32


def test_too_large_for_either_method_is_none():
    s = summarize(Network(torus((129, 129))))  # 16,641 nodes
    assert s.bisection_bandwidth is None and s.bisection_method is None


def test_links_by_class_and_diameter():
    s = summarize(Network(fat_tree(64, hosts_per_leaf=16, oversubscription=4)))
    assert [(c.kind, c.links) for c in s.classes] == [("host", 64), ("leaf-spine", 16)]
    assert s.classes[1].bandwidth == (B, B)  # 16 hosts / 4 = 4 spines of one host's bandwidth
    assert (s.hosts, s.switches, s.diameter, s.diameter_exact) == (64, 8, 4, True)
    assert summarize(Network(kary_fat_tree(4))).diameter == 6
    assert summarize(Network(torus((4, 4)))).diameter == 4
    assert summarize(Network(ring(12))).diameter == 6
    assert summarize(Network(dragonfly(5, 4, 2, 1))).diameter == 5


def test_diameter_over_a_sample_is_a_lower_bound():
    s = summarize(Network(fat_tree(1024, hosts_per_leaf=16)))
    assert not s.diameter_exact and s.diameter == 4  # any two leaves: 4 links


def test_to_dict_is_json_and_a_file_may_state_its_bisection(tmp_path):
    g = switch(4, bandwidth="400Gb/s")
    g.graph["bisection_bandwidth"] = "800Gb/s"  # text, as a graph file holds it
    path = tmp_path / "s.graphml"
    nx.write_graphml(g, path)
    s = summarize(Network(load_topology(path)))
    doc = json.loads(json.dumps(s.to_dict()))
    assert doc["bisection_bandwidth_Bps"] == 100e9 and doc["bisection_method"] == "stated"
    assert doc["link_classes"] == [
        {"kind": "link", "links": 4, "bandwidth_Bps": [50e9, 50e9], "latency_s": [1e-6, 1e-6]}
    ]
