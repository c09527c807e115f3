"""The dragonfly's router from indices (:mod:`commsim.topology._dragonfly_kernels`): the same
routes as the shortest-path router with its hop table, link for link, and presets past the
table's 16,384 switches."""

from __future__ import annotations

import numpy as np
import pytest

from commsim.clusters import cluster
from commsim.clusters._presets import MAX_DRAGONFLY_GROUPS
from commsim.errors import ParameterError
from commsim.topology import Network, dragonfly
from commsim.topology._dragonfly_kernels import dragonfly_tables


def _pairs(net: Network, npairs: int = 3000) -> tuple[np.ndarray, np.ndarray]:
    """Random endpoint pairs, every host to its neighbour, and every host to itself."""
    rng = np.random.default_rng(0)
    n = net.nhosts
    a = np.concatenate([rng.integers(0, n, npairs), np.arange(n), np.arange(n)])
    b = np.concatenate([rng.integers(0, n, npairs), (np.arange(n) + 1) % n, np.arange(n)])
    return net.endpoints[a], net.endpoints[b]


def _by_table(g) -> Network:
    """The graph's network routed by shortest paths (the router the index rule replaces)."""
    net = Network(g)
    net.__dict__["_dragonfly"] = None  # the cached property, as for a graph with no record
    return net


@pytest.mark.parametrize(
    "graph",
    [
        lambda: dragonfly(9, 4, 2, 2),
        lambda: dragonfly(5, 4, 2, 1),
        lambda: dragonfly(2, 4, 1, 4),  # 4 parallel global links per router pair, added up
        lambda: dragonfly(17, 8, 4, 2),
        lambda: dragonfly(1, 3, 2, 1),  # one group
        lambda: cluster("dragonfly:3").graph,  # joined to 4-GPU islands: weights doubled
        lambda: cluster("dragonfly:7").graph,
    ],
    ids=["9x4x2x2", "5x4x2x1", "2x4x1x4", "17x8x4x2", "one-group", "preset-3", "preset-7"],
)
def test_routes_from_indices_are_the_hop_tables_routes(graph):
    g = graph()
    net = Network(g)
    assert net._dragonfly is not None
    src, dst = _pairs(net)
    mine = net._route_nodes(src, dst)
    table = _by_table(g)._route_nodes(src, dst)
    np.testing.assert_array_equal(mine[0], table[0])
    np.testing.assert_array_equal(mine[1], table[1])
    loads = np.bincount(mine[1], minlength=net.nlinks)  # link loads too, trivially equal
    np.testing.assert_array_equal(loads, np.bincount(table[1], minlength=net.nlinks))


def test_an_edited_dragonfly_falls_back_to_shortest_paths():
    """A failed global link: two groups may no longer be joined directly, so the index rule
    does not hold; the tables are refused and the routes are the hop table's."""
    g = dragonfly(3, 2, 2, 1)  # one global link per pair of groups
    u, v = next((u, v) for u, v, k in g.edges(data="kind") if k == "global")
    g.remove_edge(u, v)
    net = Network(g)
    assert net._dragonfly is None
    assert len(net.route(0, net.nhosts - 1)) > 0


@pytest.mark.slow
def test_a_dragonfly_past_the_hop_tables_limit_routes():
    """200 groups: 32,000 switches (6,400 routers, 25,600 crossbars), past the 16,384 switches
    of the hop table; routes cross one global link between groups."""
    net = cluster("dragonfly:200").network
    last = net.nhosts - 1
    kinds = [net.kinds[k] for k in net.link_kind[net.route(0, last)]]
    assert kinds.count("global") == 1 and kinds[0] == kinds[-1] == "host"


def test_the_preset_takes_up_to_its_largest_balanced_size_and_no_more():
    assert MAX_DRAGONFLY_GROUPS == 513
    with pytest.raises(ParameterError, match="at most 513 groups") as e:
        cluster("dragonfly:514")
    assert "\n" not in str(e.value)


def test_tables_need_every_router_of_the_record():
    g = dragonfly(3, 2, 2, 1)
    g.graph["routing"] = ("dragonfly", {"groups": 4, "routers": 2})  # a group too many
    assert dragonfly_tables(g.graph["routing"][1], Network(g)) is None
