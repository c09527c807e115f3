"""Routes the structure implies: up-down and shortest on fat trees, at most one global link
and minimal on dragonflies (the generic minimal ECMP router does both)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from commsim.topology import Network, dragonfly, fat_tree, kary_fat_tree


def _all_routes(net: Network) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    a, b = np.divmod(np.arange(net.nhosts**2, dtype=np.int64), net.nhosts)
    keep = a != b
    a, b = a[keep], b[keep]
    indptr, links = net.routes(a, b)
    return a, b, indptr, links


@pytest.mark.parametrize(
    "g",
    [
        fat_tree(64, hosts_per_leaf=8, oversubscription=2),
        fat_tree(40, hosts_per_leaf=16),  # an uneven last leaf
        fat_tree(48, hosts_per_leaf=4, levels=3, leaves_per_pod=4),
        kary_fat_tree(4),
    ],
    ids=["two-level", "uneven", "three-level", "k-ary"],
)
def test_fat_tree_routes_go_up_then_down_and_are_shortest(g):
    net = Network(g)
    level = np.zeros(len(net.nodes), dtype=np.int64)  # hops above the hosts
    for v, d in nx.multi_source_dijkstra_path_length(
        g, [net.nodes[h] for h in net.hosts], weight=None
    ).items():
        level[net.node_index[v]] = d
    a, b, indptr, links = _all_routes(net)
    hop = np.diff(indptr)
    assert np.all(net.link_src[links[indptr[:-1]]] == net.hosts[a])  # valid, connected paths
    assert np.all(net.link_dst[links[indptr[1:] - 1]] == net.hosts[b])
    inner = np.ones(len(links), dtype=bool)
    inner[indptr[1:] - 1] = False
    assert np.all(net.link_dst[links[inner]] == net.link_src[links[np.flatnonzero(inner) + 1]])
    step = level[net.link_dst[links]] - level[net.link_src[links]]
    assert np.all(np.abs(step) == 1)
    pair = np.repeat(np.arange(len(a)), hop)
    # up then down: once a step goes down, no later step of the same route goes up
    down_seen = np.maximum.accumulate(np.where(step < 0, np.arange(len(step)), -1))
    first = indptr[:-1][pair]
    assert not np.any((step > 0) & (down_seen >= first))
    shortest = dict(nx.all_pairs_shortest_path_length(g))
    want = np.array(
        [shortest[net.nodes[net.hosts[x]]][net.nodes[net.hosts[y]]] for x, y in zip(a, b)]
    )
    np.testing.assert_array_equal(hop, want)


@pytest.mark.parametrize("shape", [(5, 4, 2, 1), (9, 4, 2, 2), (4, 3, 2, 2)])
def test_dragonfly_routes_cross_at_most_one_global_link_and_are_minimal(shape):
    g = dragonfly(*shape)
    net = Network(g)
    a, b, indptr, links = _all_routes(net)
    glob = net.link_kind[links] == net.kind_index("global")
    per_route = np.add.reduceat(glob.astype(np.int64), indptr[:-1])
    group = np.array([g.nodes[net.nodes[h]].get("kind") for h in net.hosts])  # all "host"
    assert set(group) == {"host"}
    hosts_per_group = shape[1] * shape[2]
    same = a // hosts_per_group == b // hosts_per_group
    assert np.all(per_route[same] == 0) and np.all(per_route[~same] == 1)
    hop = np.diff(indptr)
    assert np.all(hop[same] <= 3) and np.all(hop[~same] <= 5)
    # minimal: no shorter path with at most one global link (weights: global 3, else 1)
    weighted = dict(
        nx.all_pairs_dijkstra_path_length(g, weight=lambda u, v, d: d.get("route_weight", 1))
    )
    cost = hop + 2 * per_route  # a global link weighs 3
    want = np.array(
        [weighted[net.nodes[net.hosts[x]]][net.nodes[net.hosts[y]]] for x, y in zip(a, b)]
    )
    np.testing.assert_array_equal(cost, want)
