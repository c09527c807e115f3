r"""Bisection bandwidth: the least capacity of any cut that splits the hosts in half.

.. math::

    B_{\mathrm{bis}} = \min_{A \subset V,\ |A \cap H| = \lfloor |H|/2 \rfloor \text{ or }
    \lceil |H|/2 \rceil} \ \sum_{(u, v) \in E,\ u \in A,\ v \notin A} b(u, v)

over every set ``A`` of nodes (switches fall on whichever side is cheaper) holding half of the
hosts ``H``; ``b`` is a directed link's bandwidth (an undirected edge is two such links, so the
value is bytes/s **per direction**). Dally & Towles, *Principles and Practices of Interconnection
Networks* (2004), §3.3; the problem is NP-hard in general (Garey, Johnson & Stockmeyer 1976), so:

* :func:`exact_bisection` enumerates every side of every node in numpy — ``2^m`` cuts, where the
  ``m`` enumerated nodes are the switches and the hosts with more than one link; a host hanging
  off one switch by one link (all of them with the same bandwidth) is placed optimally in closed
  form: it costs its link's bandwidth if it sits apart from its switch, so the cheapest balanced
  placement moves ``|m_1 - t|`` such hosts, with ``m_1`` the hosts whose switch is on side 1 and
  ``t`` how many side 1 still needs.
* :func:`bisection_upper_bound` takes a few balanced splits of the hosts (node order: the
  generators number hosts by locality; Kernighan–Lin, Kernighan & Lin 1970, on the whole graph;
  the Fiedler vector, Fiedler 1973) and for each the exact least cut between its two host sets
  (a maximum flow, Ford & Fulkerson 1956): the smallest is a **heuristic upper bound**.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from commsim._lazy import lazy_module
from commsim.errors import ParameterError
from commsim.topology._network import Network

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")

__all__ = [
    "EXACT_BISECTION_NODES",
    "HEURISTIC_BISECTION_NODES",
    "SEARCH_BISECTION_NODES",
    "bisection_upper_bound",
    "exact_bisection",
]

#: :func:`exact_bisection` refuses more enumerated nodes than this (``2^22`` cuts).
EXACT_BISECTION_NODES = 22
#: :func:`bisection_upper_bound` refuses graphs with more nodes than this; above
#: :data:`SEARCH_BISECTION_NODES` it cuts the node-order split only (the searches cost seconds).
HEURISTIC_BISECTION_NODES = 16_384
SEARCH_BISECTION_NODES = 4096
_CHUNK = 1 << 15


def _leaf_hosts(net: Network) -> tuple[np.ndarray, np.ndarray, float]:
    """Hosts with one link to a switch (undirected graphs, one shared bandwidth): their node
    indices, their switch's node index, the bandwidth; empty if there are none or they differ."""
    empty = np.zeros(0, dtype=np.int64)
    if net.directed:
        return empty, empty, 0.0
    degree = np.bincount(net.link_src, minlength=len(net.nodes))
    hosts = net.hosts[degree[net.hosts] == 1]
    out = np.flatnonzero(np.isin(net.link_src, hosts))
    out = out[net.is_switch[net.link_dst[out]]]
    if len(out) == 0 or np.ptp(net.bandwidth[out]) > 0:
        return empty, empty, 0.0
    return net.link_src[out], net.link_dst[out], float(net.bandwidth[out[0]])


def exact_bisection(network: Network) -> float:
    """The bisection bandwidth (bytes/s per direction) by enumerating every cut (module
    docstring); at most :data:`EXACT_BISECTION_NODES` nodes besides single-link hosts.

    Examples:
        >>> from commsim.topology import ring, switch
        >>> exact_bisection(Network(ring(8))) / 25e9  # a ring is cut twice
        2.0
        >>> exact_bisection(Network(switch(7))) / 25e9  # 3 hosts apart from the switch
        3.0
    """
    net = network
    h = net.nhosts
    if h < 2:
        return 0.0
    leaf, leaf_switch, leaf_bw = _leaf_hosts(net)
    core = np.setdiff1d(np.arange(len(net.nodes)), leaf)
    m = len(core)
    if m > EXACT_BISECTION_NODES:
        raise ParameterError(
            f"exact bisection enumerates 2^{m} cuts; at most 2^{EXACT_BISECTION_NODES} "
            "(use the heuristic upper bound)"
        )
    pos = np.full(len(net.nodes), -1, dtype=np.int64)
    pos[core] = np.arange(m)
    inner = (pos[net.link_src] >= 0) & (pos[net.link_dst] >= 0)
    src, dst, bw = pos[net.link_src[inner]], pos[net.link_dst[inner]], net.bandwidth[inner]
    core_host = pos[np.intersect1d(net.hosts, core)]
    leaf_at = pos[leaf_switch]
    targets = np.array(sorted({h // 2, h - h // 2}), dtype=np.int64)
    best = np.inf
    bits = np.arange(m, dtype=np.int64)
    for lo in range(0, 1 << m, _CHUNK):
        codes = np.arange(lo, min(lo + _CHUNK, 1 << m), dtype=np.int64)
        side = ((codes[:, None] >> bits) & 1).astype(bool)  # True: side B
        cut = (~side[:, src] & side[:, dst]) @ bw  # capacity from A to B
        on_b = side[:, core_host].sum(axis=1)
        natural = side[:, leaf_at].sum(axis=1)  # single-link hosts whose switch is in B
        for t in targets:
            need = t - on_b
            ok = (need >= 0) & (need <= len(leaf))
            moved = np.abs(natural - need) * leaf_bw
            if ok.any():
                best = min(best, float((cut + moved)[ok].min()))
    return best


def _cut_between(digraph: nx.DiGraph, a: list, b: list) -> float:
    g = digraph.copy()
    g.add_edges_from(("source", x) for x in a)  # no capacity: unbounded
    g.add_edges_from((x, "sink") for x in b)
    return float(nx.minimum_cut_value(g, "source", "sink"))


def bisection_upper_bound(network: Network, *, seed: int = 0) -> float:
    """An upper bound on the bisection bandwidth (bytes/s per direction): the least cut over
    a few balanced host splits, each cut exact for its split (module docstring). At most
    :data:`HEURISTIC_BISECTION_NODES` nodes; the node-order split only above
    :data:`SEARCH_BISECTION_NODES`.

    Examples:
        >>> from commsim.topology import torus
        >>> bisection_upper_bound(Network(torus((4, 4)))) / 25e9  # two rings of 4 cut twice
        8.0
    """
    net = network
    n, h = len(net.nodes), net.nhosts
    if n > HEURISTIC_BISECTION_NODES:
        raise ParameterError(
            f"{n} nodes are too many for the bisection heuristic "
            f"(at most {HEURISTIC_BISECTION_NODES})"
        )
    if h < 2:
        return 0.0
    d = nx.DiGraph()
    d.add_nodes_from(range(n))
    cap: dict[tuple[int, int], float] = {}
    for u, v, b in zip(
        net.link_src.tolist(), net.link_dst.tolist(), net.bandwidth.tolist(), strict=True
    ):
        cap[u, v] = cap.get((u, v), 0.0) + b
    d.add_edges_from((u, v, {"capacity": c}) for (u, v), c in cap.items())
    u = nx.Graph()
    u.add_nodes_from(range(n))
    for (a, b), c in cap.items():
        w = u.edges[a, b]["weight"] + c if u.has_edge(a, b) else c
        u.add_edge(a, b, weight=w)
    hosts = net.hosts.tolist()
    orders = [hosts]
    if n <= SEARCH_BISECTION_NODES:
        part, _ = nx.community.kernighan_lin_bisection(u, weight="weight", seed=seed)
        orders.append(sorted(hosts, key=lambda x: x not in part))
    if 2 < n <= SEARCH_BISECTION_NODES and nx.is_connected(u):
        fiedler = nx.fiedler_vector(u, weight="weight", seed=seed, method="tracemin_lu")
        orders.append(sorted(hosts, key=lambda x: fiedler[x]))
    best = np.inf
    for order in orders:
        for half in sorted({h // 2, h - h // 2}):
            a, b = order[:half], order[half:]
            best = min(best, _cut_between(d, a, b))
            if net.directed:
                best = min(best, _cut_between(d, b, a))
    return best
