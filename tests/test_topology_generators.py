"""Generators: counts, degrees, capacities, and the routes their structure implies."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from commsim.errors import ParameterError, UnknownNameError
from commsim.topology import (
    Network,
    dragonfly,
    fat_tree,
    join,
    kary_fat_tree,
    load_topology,
    nvlink_island,
    parse_topology,
    rail_optimized,
    switch,
)


def _kinds(net: Network, route: list[int]) -> list[str]:
    return [net.kinds[net.link_kind[x]] for x in route]


def test_fat_tree_capacity_and_up_down_routes():
    g = fat_tree(128, hosts_per_leaf=16, oversubscription=2)
    net = Network(g)
    assert net.nhosts == 128
    leaf = ("leaf", 0)
    up = sum(
        d["bandwidth"]
        for _, v, d in g.edges(leaf, data=True)
        if isinstance(v, tuple) and v[0] == "spine"
    )
    assert up == pytest.approx(16 * 25e9 / 2)  # hosts' bandwidth over the oversubscription
    for a, b in [(0, 1), (0, 17), (5, 127)]:
        kinds = _kinds(net, net.route(a, b))
        same = a // 16 == b // 16
        assert kinds == (["host", "host"] if same else ["host", "leaf-spine", "leaf-spine", "host"])
    assert g.graph["bisection_bandwidth"] == pytest.approx(64 * 25e9 / 2)


def test_three_level_fat_tree_routes_through_the_core_only_between_pods():
    g = fat_tree(64, hosts_per_leaf=4, levels=3, leaves_per_pod=4)
    net = Network(g)
    assert len(net.route(0, 5)) == 4  # two leaves of one pod: up to a pod spine
    assert _kinds(net, net.route(0, 63)) == [
        "host", "leaf-spine", "spine-core", "spine-core", "leaf-spine", "host",
    ]  # fmt: skip


@pytest.mark.parametrize("k", [2, 4, 6])
def test_kary_fat_tree(k):
    g = kary_fat_tree(k)
    hosts = [v for v, d in g.nodes(data="kind") if d == "host"]
    assert len(hosts) == k**3 // 4
    assert {d for v, d in g.degree() if g.nodes[v]["kind"] == "switch"} == {k}
    net = Network(g)
    assert max(len(net.route(0, h)) for h in range(1, len(hosts))) == 6  # across pods


def test_dragonfly_routes_take_at_most_one_global_link():
    g = dragonfly(5, 4, 2, 1)  # a*h = 4 = groups - 1: one link per pair of groups
    net = Network(g)
    n = net.nhosts
    assert n == 40
    for a, b in itertools.product(range(0, n, 3), range(1, n, 5)):
        kinds = _kinds(net, net.route(a, b))
        assert kinds.count("global") <= 1 and len(kinds) <= 5  # host-local-global-local-host
    with pytest.raises(ParameterError, match="use at most 5 groups"):
        dragonfly(6, 4, 2, 1)


def test_rail_optimized_routes_by_rail():
    net = Network(rail_optimized(4, 8, nodes_per_unit=2))
    assert _kinds(net, net.route(0, 7)) == ["nvlink", "nvlink"]  # one server
    assert _kinds(net, net.route(3, 11)) == ["rail", "rail"]  # same rail, same unit: one leaf
    assert _kinds(net, net.route(3, 27)) == ["rail", "spine", "spine", "rail"]  # other unit
    assert _kinds(net, net.route(3, 12)) == ["rail", "spine", "spine", "rail"]  # other rail
    assert net.nservers == 4 and net.host_server[9] == 1


def test_join_checks_the_host_count():
    with pytest.raises(ParameterError, match="has 6 hosts, but 2 servers of 4 GPUs need 8"):
        join(nvlink_island(4), switch(6), 2)


def test_specs_and_files(tmp_path):
    assert parse_topology("fat_tree:64,hosts_per_leaf=8,oversubscription=2").number_of_nodes() > 64
    assert parse_topology("kary_fat_tree:4").graph["name"] == "kary_fat_tree(4)"
    with pytest.raises(UnknownNameError, match="did you mean fat_tree"):
        parse_topology("fat_tre:64")
    with pytest.raises(ParameterError, match="usage: ring"):
        parse_topology("ring:8,speed=3")
    g = switch(4, bandwidth="400Gb/s")
    for suffix, write in [(".graphml", nx.write_graphml), (".gml", nx.write_gml)]:
        path = tmp_path / f"t{suffix}"
        write(g, path)
        back = Network(load_topology(path))
        assert back.nhosts == 4 and np.allclose(back.bandwidth, 50e9)
    with pytest.raises(ParameterError, match="ends in"):
        load_topology(tmp_path / "t.txt")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ParameterError, match="cannot read the graph"):
        load_topology(bad)


@pytest.mark.parametrize(
    "spec",
    [
        "switch:2000000",
        "torus:2048x1024",
        "fat_tree:1048577",
        "kary_fat_tree:1000",
        "dragonfly:500,32,128,16",
    ],
)
def test_graphs_too_big_to_build_are_refused(spec):
    with pytest.raises(ParameterError, match="hosts is more than 1,048,576"):
        parse_topology(spec)
