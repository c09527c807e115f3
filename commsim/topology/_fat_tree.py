r"""Fat trees: leaf–spine (two or three levels, with oversubscription) and the k-ary fat tree.

Hosts are ``0..n-1`` (first in node order); switches are nodes with ``kind="switch"``. Link
classes (edge ``kind``): ``"host"`` (host–leaf), ``"leaf-spine"``, ``"spine-core"``. Minimal
routes on these graphs go up to the lowest common level and down again (up–down routing). Which
uplink a route takes is the ``routing`` keyword of :func:`fat_tree`: ``"ecmp"`` (the default)
spreads routes over the equal-cost uplinks by the hash of :mod:`commsim.topology._routing`, as an
Ethernet fabric does; ``"dmodk"`` chooses by destination (:mod:`commsim.topology._dmodk`), as an
InfiniBand subnet manager does.

References: Leiserson, "Fat-trees: universal networks for hardware-efficient supercomputing",
IEEE Trans. Computers 34(10), 1985; Al-Fares, Loukissas & Vahdat, "A scalable, commodity data
center network architecture", SIGCOMM 2008 (the k-ary fat tree).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from commsim._lazy import lazy_module
from commsim.errors import ParameterError
from commsim.topology._attributes import as_bandwidth, as_latency
from commsim.topology._basic import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, _count, check_hosts
from commsim.topology._dmodk import check_routing, fat_tree_record

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")

__all__ = ["fat_tree", "kary_fat_tree"]


def _ratio(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value < math.inf:
        raise ParameterError(f"{what} must be a number >= 1 (1 = non-blocking), got {value!r}")
    return float(value)


def fat_tree(
    n: int,
    *,
    hosts_per_leaf: int = 32,
    oversubscription: float = 1.0,
    levels: int = 2,
    leaves_per_pod: int = 16,
    spines: int | None = None,
    bandwidth: float | str = DEFAULT_BANDWIDTH,
    latency: float | str = DEFAULT_LATENCY,
    routing: str = "ecmp",
    spine_bandwidth: float | str | None = None,
    spine_latency: float | str | None = None,
) -> nx.Graph:
    r"""``n`` hosts on a leaf–spine fat tree of two or three levels.

    Two levels: ``⌈n / h⌉`` leaves of ``h = hosts_per_leaf`` hosts; every leaf is joined to every
    spine. A leaf's uplink capacity is its hosts' bandwidth over ``oversubscription`` (``o``):
    with ``S`` spines (default ``max(1, round(h / o))``) each leaf–spine edge carries
    :math:`h \cdot B / (o S)`, so traffic leaving a leaf at full rate is slowed ``o``-fold. Three
    levels: leaves form pods of ``leaves_per_pod``; each pod has its own ``S`` spines, and every
    pod spine is joined to every core switch (``S`` cores) with the pod's leaf-to-spine capacity
    (the core is non-blocking; oversubscription is at the leaves).

    Bisection bandwidth (``graph.graph["bisection_bandwidth"]``, bytes/s per direction, for
    full leaves and an even number of them; not stated otherwise): :math:`\frac{n}{2} B / o`.

    ``spine_bandwidth`` gives every leaf–spine (and spine–core) edge a bandwidth of its own
    instead of :math:`h B / (o S)` (a file whose spine runs at 800 Gb/s beside 400 Gb/s NICs), and
    ``spine_latency`` their latency instead of ``latency``; the stated bisection is then left to
    :func:`commsim.topology.summarize`.

    ``routing``: ``"ecmp"`` (a hash of the pair picks the uplink) or ``"dmodk"`` (destination
    ``d`` leaves its source leaf by spine ``d mod S``, and a pod spine by core
    ``(d // S) mod S``: :mod:`commsim.topology._dmodk`).

    Examples:
        >>> g = fat_tree(64, hosts_per_leaf=16, oversubscription=4)
        >>> kinds = nx.get_edge_attributes(g, "kind")
        >>> sum(k == "host" for k in kinds.values()), sum(k == "leaf-spine" for k in kinds.values())
        (64, 16)
        >>> sum(d for u, v, d in g.edges(data="bandwidth") if u == ("leaf", 0)) / 25e9  # uplinks
        4.0
        >>> fat_tree(256, hosts_per_leaf=8, levels=3, leaves_per_pod=4).number_of_nodes()  # 32+64+8
        360
        >>> from commsim.topology import Network
        >>> net = Network(fat_tree(32, hosts_per_leaf=8, spines=8, routing="dmodk"))
        >>> net.link_label(net.route(0, 13)[1])  # to host 13: up by spine 13 mod 8
        (('leaf', 0), ('spine', 5))
        >>> g = fat_tree(32, hosts_per_leaf=8, spine_bandwidth="800Gb/s", spine_latency="2us")
        >>> up = g.edges[("leaf", 0), ("spine", 0)]
        >>> up["bandwidth"], up["latency"], g.edges[0, ("leaf", 0)]["latency"]  # host link as given
        (100000000000.0, 2e-06, 1e-06)
    """
    n = check_hosts(_count(n, "fat_tree: the number of hosts"), "fat_tree")
    h = _count(hosts_per_leaf, "fat_tree: hosts_per_leaf")
    o = _ratio(oversubscription, "fat_tree: oversubscription")
    if levels not in (2, 3):
        raise ParameterError(f"fat_tree: levels must be 2 or 3, got {levels!r}")
    s = max(1, round(h / o)) if spines is None else _count(spines, "fat_tree: spines")
    routing = check_routing(routing, "fat_tree")
    bw, lat = as_bandwidth(bandwidth), as_latency(latency)
    up_bw = h * bw / (o * s) if spine_bandwidth is None else as_bandwidth(spine_bandwidth)
    up_lat = lat if spine_latency is None else as_latency(spine_latency)
    nleaves = -(-n // h)
    g = nx.Graph(name=f"fat_tree({n})")
    if n % h == 0 and nleaves % 2 == 0 and spine_bandwidth is None:  # else summarize() does
        g.graph["bisection_bandwidth"] = n / 2 * bw / o
    if routing == "dmodk":
        lpp = _count(leaves_per_pod, "fat_tree: leaves_per_pod")
        g.graph["routing"] = ("dmodk", fat_tree_record(n, h, s, levels, lpp))
    leaves = _leaves(g, n, h, bw, lat)
    if levels == 2:
        _spines(g, leaves, s, up_bw, up_lat)
        return g
    _pods(g, leaves, s, _count(leaves_per_pod, "fat_tree: leaves_per_pod"), up_bw, up_lat)
    g.graph["name"] = f"fat_tree({n},levels=3)"
    return g


def _leaves(g: nx.Graph, n: int, h: int, bw: float, lat: float) -> list[tuple[str, int]]:
    """Hosts ``0..n-1`` and their leaves, ``h`` hosts a leaf; the leaves' nodes."""
    g.add_nodes_from(range(n), kind="host")
    leaves = [("leaf", i) for i in range(-(-n // h))]
    g.add_nodes_from(leaves, kind="switch")
    hosts = np.arange(n)
    g.add_edges_from(
        zip(hosts.tolist(), [leaves[i] for i in (hosts // h).tolist()], strict=True),
        bandwidth=bw,
        latency=lat,
        kind="host",
    )
    return leaves


def _spines(g: nx.Graph, leaves: list, s: int, up_bw: float, up_lat: float) -> None:
    """Two levels: ``s`` spines, every leaf joined to every spine."""
    spine_nodes = [("spine", j) for j in range(s)]
    g.add_nodes_from(spine_nodes, kind="switch")
    g.add_edges_from(
        ((leaf, sp) for leaf in leaves for sp in spine_nodes),
        bandwidth=up_bw,
        latency=up_lat,
        kind="leaf-spine",
    )


def _pods(g: nx.Graph, leaves: list, s: int, lpp: int, up_bw: float, up_lat: float) -> None:
    """Three levels: pods of ``lpp`` leaves with ``s`` spines each, every pod spine joined to
    every one of ``s`` cores with the pod's leaf-to-spine capacity."""
    npods = -(-len(leaves) // lpp)
    cores = [("core", j) for j in range(s)]
    g.add_nodes_from(cores, kind="switch")
    for pod in range(npods):
        pod_spines = [("spine", pod, j) for j in range(s)]
        g.add_nodes_from(pod_spines, kind="switch")
        pod_leaves = leaves[pod * lpp : (pod + 1) * lpp]
        g.add_edges_from(
            ((leaf, sp) for leaf in pod_leaves for sp in pod_spines),
            bandwidth=up_bw,
            latency=up_lat,
            kind="leaf-spine",
        )
        g.add_edges_from(
            ((sp, c) for sp in pod_spines for c in cores),
            bandwidth=len(pod_leaves) * up_bw / s,
            latency=up_lat,
            kind="spine-core",
        )


def kary_fat_tree(
    k: int,
    *,
    bandwidth: float | str = DEFAULT_BANDWIDTH,
    latency: float | str = DEFAULT_LATENCY,
) -> nx.Graph:
    r"""The k-ary fat tree of Al-Fares et al. (2008), built of identical ``k``-port switches.

    ``k`` pods of ``k/2`` edge and ``k/2`` aggregation switches; each edge switch serves ``k/2``
    hosts and is joined to every aggregation switch of its pod; aggregation switch ``j`` of each
    pod is joined to core switches ``j k/2 .. (j+1) k/2 - 1`` (``(k/2)^2`` cores). ``k^3/4``
    hosts, full bisection bandwidth :math:`\frac{k^3}{8} B`.

    Examples:
        >>> g = kary_fat_tree(4)
        >>> g.number_of_nodes() - 16, g.number_of_edges()  # 20 switches; 16 + 16 + 16 links
        (20, 48)
        >>> {d for v, d in g.degree() if g.nodes[v]["kind"] == "switch"}  # all k-port
        {4}
    """
    k = _count(k, "kary_fat_tree: k", minimum=2)
    if k % 2:
        raise ParameterError(f"kary_fat_tree: k must be even, got {k}")
    bw, lat = as_bandwidth(bandwidth), as_latency(latency)
    half = k // 2
    n = check_hosts(k**3 // 4, "kary_fat_tree")
    g = nx.Graph(name=f"kary_fat_tree({k})", bisection_bandwidth=n / 2 * bw)
    g.add_nodes_from(range(n), kind="host")
    edge = [("edge", p, i) for p in range(k) for i in range(half)]
    agg = [("agg", p, i) for p in range(k) for i in range(half)]
    core = [("core", i) for i in range(half * half)]
    g.add_nodes_from(edge + agg + core, kind="switch")
    g.add_edges_from(
        ((x, edge[x // half]) for x in range(n)), bandwidth=bw, latency=lat, kind="host"
    )
    g.add_edges_from(
        (
            (("edge", p, i), ("agg", p, j))
            for p in range(k)
            for i in range(half)
            for j in range(half)
        ),
        bandwidth=bw,
        latency=lat,
        kind="edge-agg",
    )
    g.add_edges_from(
        (
            (("agg", p, j), ("core", j * half + c))
            for p in range(k)
            for j in range(half)
            for c in range(half)
        ),
        bandwidth=bw,
        latency=lat,
        kind="agg-core",
    )
    return g
