"""The network core: graph checks, routes (valid, minimal, ECMP-spread, dimension-ordered),
the route cache, and placement."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from commsim.errors import ParameterError
from commsim.topology import (
    Network,
    _network,
    hypercube,
    place,
    ranks_per_server,
    ring,
    switch,
    torus,
)


def _two_level(hosts_per_leaf: int = 2, leaves: int = 2, spines: int = 2) -> nx.Graph:
    g = nx.Graph()
    n = hosts_per_leaf * leaves
    g.add_nodes_from(range(n), kind="host")
    for leaf in range(leaves):
        g.add_node(("leaf", leaf), kind="switch")
        for h in range(hosts_per_leaf):
            g.add_edge(leaf * hosts_per_leaf + h, ("leaf", leaf), bandwidth=1e9, kind="host")
        for s in range(spines):
            g.add_node(("spine", s), kind="switch")
            g.add_edge(("leaf", leaf), ("spine", s), bandwidth=1e9, kind="uplink")
    return g


def _check_path(net: Network, a: int, b: int, links: list[int]) -> None:
    """``links`` is a walk from host ``a`` to host ``b`` along directed links."""
    node = net.hosts[a]
    for link in links:
        assert net.link_src[link] == node
        node = net.link_dst[link]
    assert node == net.hosts[b]


def _forwarding_subgraph_length(g: nx.Graph, a, b) -> int:
    """Shortest hop count from a to b where only switches forward (hosts are endpoints)."""
    switches = {v for v, k in g.nodes(data="kind") if k == "switch"}
    if not switches or g.has_edge(a, b):
        return nx.shortest_path_length(g, a, b)
    h = g.subgraph(switches | {a, b})
    return nx.shortest_path_length(h, a, b)


@pytest.mark.parametrize("seed", range(4))
def test_routes_are_shortest_paths_on_random_direct_networks(seed):
    g = nx.connected_watts_strogatz_graph(30, 4, 0.3, seed=seed)
    nx.set_edge_attributes(g, 1e9, "bandwidth")
    net = Network(g)
    a, b = np.array(list(itertools.product(range(30), repeat=2))).T
    indptr, links = net.routes(a, b)
    for i in range(len(a)):
        route = links[indptr[i] : indptr[i + 1]].tolist()
        _check_path(net, a[i], b[i], route)
        assert len(route) == nx.shortest_path_length(g, a[i], b[i])


def test_switched_routes_go_up_and_down_and_spread_over_spines():
    g = _two_level(hosts_per_leaf=4, leaves=4, spines=4)
    net = Network(g)
    used = set()
    for a, b in itertools.permutations(range(16), 2):
        route = net.route(a, b)
        _check_path(net, a, b, route)
        assert len(route) == _forwarding_subgraph_length(g, a, b)
        same_leaf = a // 4 == b // 4
        assert len(route) == (2 if same_leaf else 4)
        if not same_leaf:
            used.add(net.link_label(route[1])[1])  # the spine it crosses
        assert net.route(a, b) == route  # a pair always takes the same path
    assert used == {("spine", s) for s in range(4)}  # ECMP spreads pairs over every spine


def test_switched_routes_never_forward_through_hosts():
    g = _two_level()
    g.add_edge(0, 2, bandwidth=1e9)  # a direct host-host link is used ...
    net = Network(g)
    assert [net.link_label(x) for x in net.route(0, 2)] == [(0, 2)]
    assert all(net.link_label(x)[1] != 2 for x in net.route(0, 3)[:-1])  # ... but never as a hop


@pytest.mark.parametrize("dims", [(8,), (5,), (4, 4), (3, 4, 2), (2, 2, 2, 2)])
def test_torus_routes_are_dimension_ordered_and_minimal(dims):
    net = Network(torus(dims))
    n = int(np.prod(dims))
    coords = np.array(list(itertools.product(*[range(k) for k in dims])))
    for a, b in itertools.product(range(n), repeat=2):
        route = net.route(a, b)
        _check_path(net, a, b, route)
        dist = [min((cb - ca) % k, (ca - cb) % k) for ca, cb, k in zip(coords[a], coords[b], dims)]
        assert len(route) == sum(dist)
        changed = [
            int(np.flatnonzero(coords[net.link_src[x]] != coords[net.link_dst[x]])[0])
            for x in route
        ]
        assert changed == sorted(changed)  # dimension 0 first, then 1, ...


def test_an_edited_torus_falls_back_to_shortest_paths():
    g = torus((4, 4))
    g.remove_edge(0, 1)
    net = Network(g)
    route = net.route(0, 1)
    _check_path(net, 0, 1, route)
    assert len(route) == nx.shortest_path_length(g, 0, 1) == 3


def test_directed_graphs_have_one_link_per_edge():
    g = nx.DiGraph()
    nx.add_cycle(g, range(4), bandwidth=2e9, latency=1e-6)
    net = Network(g)
    assert net.nlinks == 4
    assert len(net.route(1, 0)) == 3  # one way round only
    assert Network(ring(4)).nlinks == 8


def test_link_arrays_read_units_and_classes():
    g = nx.Graph()
    g.add_edge("a", "b", bandwidth="400Gb/s", latency="500ns", kind="rail")
    g.add_edge("b", "c", bandwidth=1e9)
    net = Network(g)
    assert net.bandwidth.tolist() == [50e9, 50e9, 1e9, 1e9]
    assert net.latency.tolist() == [5e-7, 5e-7, 0.0, 0.0]
    assert net.kinds == ("rail", "link")
    assert net.kind_index("link") == 1
    with pytest.raises(ParameterError, match="did you mean rail"):
        net.kind_index("rial")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda g: g.add_edge(0, 9), r"edge \(0, 9\) has no 'bandwidth'"),
        (lambda g: g.add_edge(0, 0, bandwidth=1), "self-loop"),
        (lambda g: g.add_edge(0, 1, bandwidth="fast"), r"bandwidth of edge \(0, 1\)"),
        (lambda g: g.add_edge(0, 1, bandwidth=0), "must be > 0"),
        (lambda g: g.add_edge(0, 1, bandwidth=1, latency=-1), r"latency of edge \(0, 1\)"),
        (lambda g: g.add_node(99), "disconnected: host 99"),
    ],
)
def test_bad_graphs_are_one_line_errors(edit, message):
    g = ring(4)
    edit(g)
    with pytest.raises(ParameterError, match=message) as e:
        Network(g)
    assert "\n" not in str(e.value)


def test_other_bad_topologies():
    with pytest.raises(ParameterError, match="networkx graph"):
        Network([1, 2])
    with pytest.raises(ParameterError, match="multigraph"):
        Network(nx.MultiGraph([(0, 1)]))
    with pytest.raises(ParameterError, match="no hosts"):
        Network(nx.Graph([("s", "t", {"bandwidth": 1})]).subgraph([]).copy())
    g = nx.Graph()
    g.add_node("s", kind="switch")
    with pytest.raises(ParameterError, match="no hosts"):
        Network(g)


def test_too_many_forwarding_nodes_for_shortest_paths(monkeypatch):
    monkeypatch.setattr(_network, "MAX_FORWARDING_NODES", 3)
    g = nx.path_graph(6)
    nx.set_edge_attributes(g, 1.0, "bandwidth")
    with pytest.raises(ParameterError, match="at most 3 switches are supported"):
        Network(g).route(0, 5)


def test_switch_and_generators_match_hockney_defaults():
    net = Network(switch(4))
    route = net.route(0, 3)
    assert len(route) == 2
    assert net.latency[route].sum() == pytest.approx(2e-6)
    assert net.bandwidth[route].min() == 25e9
    assert Network(hypercube(3)).nlinks == 24


def test_route_cache_answers_mixed_known_and_new_pairs():
    net = Network(torus((6, 6)))
    a = np.arange(36)
    first = net.routes(a, (a + 1) % 36)
    again = net.routes(np.concatenate([a, a]), np.concatenate([(a + 1) % 36, (a + 7) % 36]))
    n = first[0][-1]
    assert np.array_equal(again[1][:n], first[1])
    for i in range(36, 72):
        _check_path(
            net, a[i - 36], (a[i - 36] + 7) % 36, again[1][again[0][i] : again[0][i + 1]].tolist()
        )


def _servers(nodes: int, per: int) -> Network:
    g = switch(nodes * per)
    nx.set_node_attributes(g, {h: h // per for h in range(nodes * per)}, "node")
    return Network(g)


def test_placements():
    net = _servers(3, 4)
    assert place(net, 5).tolist() == [0, 1, 2, 3, 4]
    assert place(net, 6, "round_robin").tolist() == [0, 4, 8, 1, 5, 9]
    r = place(net, 12, "random:3")
    assert (
        sorted(r.tolist()) == list(range(12)) and r.tolist() == place(net, 12, "random:3").tolist()
    )
    assert r.tolist() != place(net, 12, "random:4").tolist()
    assert place(net, 3, [11, 0, 5]).tolist() == [11, 0, 5]
    assert ranks_per_server(net, place(net, 10)) == 4  # 4 + 4 + 2
    assert ranks_per_server(net, place(net, 12, "round_robin")) is None


@pytest.mark.parametrize(
    ("nranks", "placement", "message"),
    [
        (13, "linear", "13 ranks on a topology with 12 hosts"),
        (2, "snake", "unknown placement 'snake'"),
        (2, "random:x", "integer seed"),
        (2, [0, 0], "two ranks on host 0"),
        (2, [0, 12], "host 12 is out of range"),
        (3, [0, 1], "lists 2 hosts for 3 ranks"),
        (2, [0.5, 1.0], "integer host indices"),
    ],
)
def test_bad_placements(nranks, placement, message):
    with pytest.raises(ParameterError, match=message):
        place(_servers(3, 4), nranks, placement)


def test_the_route_cache_gives_what_the_router_gives_over_many_small_additions():
    """Lookups of random pairs, a few new ones at a time (the small table merged into the large
    one now and then), equal the router's own answer for every pair, in the caller's order."""
    from commsim.topology._route_cache import RouteCache

    n = 50

    def route_fn(s, d):  # a route of 1..4 links named after its pair
        lens = (s + d) % 4 + 1
        indptr = np.concatenate([[0], np.cumsum(lens)])
        return indptr, np.repeat(s * 1000 + d, lens).astype(np.int64)

    rng = np.random.default_rng(0)
    cache = RouteCache(n, route_fn)
    for _ in range(300):
        k = int(rng.integers(1, 40))
        s, d = rng.integers(0, n, k), rng.integers(0, n, k)
        got, want = cache.routes(s, d), route_fn(s, d)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    assert len(cache.tables[0][0]) > 8 * len(cache.tables[1][0]) > 0  # both tables in use


@pytest.mark.parametrize("preset", ["dgx-h100:4", "tpu-v4:4x4x4", "dragonfly:9"])
def test_rule_routed_networks_route_afresh_as_the_cache_would(preset):
    """A generator's routing rule (d-mod-k, a torus's order, a dragonfly's minimal routes) is
    computed on every call instead of cached; the answers are the cache's, pairs repeated."""
    from commsim.clusters import cluster

    net = cluster(preset).network
    assert net._rule_routed
    rng = np.random.default_rng(1)
    h = net.nhosts
    src, dst = rng.integers(0, h, 300), rng.integers(0, h, 300)
    src, dst = src[src != dst], dst[src != dst]
    src, dst = np.concatenate([src, src[:20]]), np.concatenate([dst, dst[:20]])
    got = net.routes(src, dst)
    want = net._cache.routes(net.endpoints[src], net.endpoints[dst])
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert not Network(switch(4, bandwidth=1e9))._rule_routed  # shortest paths: cached
