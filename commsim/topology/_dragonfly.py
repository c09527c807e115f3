r"""The dragonfly (Kim, Dally, Scott & Abts, "Technology-driven, highly-scalable dragonfly
topology", ISCA 2008).

``groups`` groups of ``a = routers_per_group`` routers; each router serves ``p =
hosts_per_router`` hosts and has ``h = global_links_per_router`` global links. Inside a group the
routers are all-to-all (link class ``"local"``); every pair of groups is joined by
``⌊a h / (groups - 1)⌋`` global links (``"global"``), taken by a group's routers in turn (the
consecutive arrangement). Hosts attach by ``"host"`` links. Global links have ``route_weight``
3, so minimal routes are local–global–local: at most one global link (one costs at most
``1 + 3 + 1``, two at least ``3 + 3``; with weight 2 a global–global route would tie). A balanced dragonfly has :math:`a = 2p = 2h` and at most
:math:`a h + 1` groups.

The graph carries ``graph.graph["routing"] = ("dragonfly", {"groups": G, "routers": a})``: its
minimal routes are computed from group and router indices
(:mod:`commsim.topology._dragonfly_kernels`), the routes shortest paths would take, without a
table of hop counts between all routers, so any size up to :math:`a h + 1` groups routes.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from commsim._lazy import lazy_module
from commsim.errors import ParameterError
from commsim.topology._attributes import as_bandwidth, as_latency
from commsim.topology._basic import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, _count, check_hosts

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")

__all__ = ["dragonfly"]


def dragonfly(
    groups: int,
    routers_per_group: int = 4,
    hosts_per_router: int = 2,
    global_links_per_router: int = 2,
    *,
    bandwidth: float | str = DEFAULT_BANDWIDTH,
    latency: float | str = DEFAULT_LATENCY,
    global_bandwidth: float | str | None = None,
    global_latency: float | str | None = None,
) -> nx.Graph:
    """A dragonfly of ``groups × routers_per_group × hosts_per_router`` hosts (module docstring).

    Examples:
        >>> g = dragonfly(9, 4, 2, 2)  # the balanced a = 4, p = h = 2: 9 groups, 72 hosts
        >>> kinds = nx.get_edge_attributes(g, "kind")
        >>> [sum(k == c for k in kinds.values()) for c in ("host", "local", "global")]
        [72, 54, 36]
    """
    G = _count(groups, "dragonfly: groups")
    a = _count(routers_per_group, "dragonfly: routers_per_group")
    p = _count(hosts_per_router, "dragonfly: hosts_per_router")
    h = _count(global_links_per_router, "dragonfly: global_links_per_router", minimum=0)
    per_pair = (a * h) // (G - 1) if G > 1 else 0
    if G > 1 and per_pair < 1:
        raise ParameterError(
            f"dragonfly: {G} groups need {G - 1} global links per group to join every pair, but "
            f"a group has {a}x{h}={a * h}; use at most {a * h + 1} groups or more global links"
        )
    bw, lat = as_bandwidth(bandwidth), as_latency(latency)
    gbw = bw if global_bandwidth is None else as_bandwidth(global_bandwidth, "global_bandwidth")
    glat = lat if global_latency is None else as_latency(global_latency, "global_latency")
    # No bisection_bandwidth: cuts through groups or host links can undercut the global links
    # between two halves of the groups; summarize() computes it.
    check_hosts(G * a * p, "dragonfly")
    g = nx.Graph(name=f"dragonfly({G},{a},{p},{h})")
    n = G * a * p
    g.add_nodes_from(range(n), kind="host")
    routers = [("router", x, r) for x in range(G) for r in range(a)]
    g.add_nodes_from(routers, kind="switch")
    g.add_edges_from(
        ((x, routers[x // p]) for x in range(n)), bandwidth=bw, latency=lat, kind="host"
    )
    g.add_edges_from(
        (
            (("router", x, r), ("router", x, q))
            for x in range(G)
            for r, q in itertools.combinations(range(a), 2)
        ),
        bandwidth=bw,
        latency=lat,
        kind="local",
    )
    used = [0] * G  # global ports taken per group, handed to its routers in turn
    edges = []
    for x, y in itertools.combinations(range(G), 2):
        for _ in range(per_pair):
            edges.append((("router", x, used[x] % a), ("router", y, used[y] % a)))
            used[x] += 1
            used[y] += 1
    for u, v in edges:  # parallel links between the same two routers add up
        if g.has_edge(u, v):
            g.edges[u, v]["bandwidth"] += gbw
        else:
            g.add_edge(u, v, bandwidth=gbw, latency=glat, kind="global", route_weight=3)
    g.graph["routing"] = ("dragonfly", {"groups": G, "routers": a})
    return g
