"""What a topology is: its hosts, switches, links by class, diameter and bisection bandwidth."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from commsim.errors import ParameterError
from commsim.topology._attributes import as_bandwidth
from commsim.topology._bisection import (
    EXACT_BISECTION_NODES,
    HEURISTIC_BISECTION_NODES,
    SEARCH_BISECTION_NODES,
    bisection_upper_bound,
    exact_bisection,
)
from commsim.topology._dmodk import routing_name
from commsim.topology._network import Network

__all__ = [
    "BISECTION_METHODS",
    "DIAMETER_EXACT_HOSTS",
    "LinkClassSummary",
    "TopologySummary",
    "summarize",
]

#: How :attr:`TopologySummary.bisection_bandwidth` was found, in order of preference.
BISECTION_METHODS = {
    "stated": "as the graph states it (graph['bisection_bandwidth'], set by the generators "
    "where their formula is exact)",
    "exact": f"exact, every cut enumerated (up to {EXACT_BISECTION_NODES} switches and "
    "multi-link hosts)",
    "upper bound": "a heuristic upper bound: the least cut over node-order, Kernighan-Lin and "
    f"spectral splits of the hosts (node order only above {SEARCH_BISECTION_NODES} nodes; up "
    f"to {HEURISTIC_BISECTION_NODES})",
}

#: Up to this many hosts the diameter is over every pair of hosts; above, over a sample.
DIAMETER_EXACT_HOSTS = 512
_SAMPLE = 200_000


@dataclasses.dataclass(frozen=True)
class LinkClassSummary:
    """One link class: ``links`` cables (an undirected edge counts once), their bandwidth range
    (bytes/s per direction) and latency range (s)."""

    kind: str
    links: int
    bandwidth: tuple[float, float]
    latency: tuple[float, float]


@dataclasses.dataclass(frozen=True)
class TopologySummary:
    """A topology in numbers (:func:`summarize`).

    Attributes:
        name: the graph's name.
        hosts, switches, servers: node counts (servers: distinct ``node`` attributes).
        classes: per link class, a :class:`LinkClassSummary`.
        diameter: the most links on any route between two hosts.
        diameter_exact: whether every host pair was routed (else a random sample: a lower bound).
        bisection_bandwidth: bytes/s per direction across the least cut that splits the
            hosts in half (:mod:`commsim.topology._bisection`); ``None`` when the graph does
            not state it and is too large to compute.
        bisection_method: a key of :data:`BISECTION_METHODS` (``None`` with no value).
        routing: how routes are chosen, in words (d-mod-k, ECMP hash, dimension order).
        reducing_switches: switches that reduce in the network (node attribute ``reduce``:
            NVLink SHARP, InfiniBand SHARP), where the in-network rows' helpers sit.
        fabric_reducing: how many of them are fabric switches between servers (SHARP; the
            rest are servers' own, NVLS).
    """

    name: str
    hosts: int
    switches: int
    servers: int
    classes: tuple[LinkClassSummary, ...]
    diameter: int
    diameter_exact: bool
    bisection_bandwidth: float | None
    bisection_method: str | None = None
    routing: str = "shortest paths, ECMP hash"
    reducing_switches: int = 0
    fabric_reducing: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "hosts": self.hosts,
            "switches": self.switches,
            "servers": self.servers,
            "link_classes": [
                {
                    "kind": c.kind,
                    "links": c.links,
                    "bandwidth_Bps": list(c.bandwidth),
                    "latency_s": list(c.latency),
                }
                for c in self.classes
            ],
            "diameter_links": self.diameter,
            "diameter_exact": self.diameter_exact,
            "bisection_bandwidth_Bps": self.bisection_bandwidth,
            "bisection_method": self.bisection_method,
            "routing": self.routing,
            "reducing_switches": self.reducing_switches,
            "fabric_reducing_switches": self.fabric_reducing,
        }


def summarize(network: Network) -> TopologySummary:
    """Count and measure ``network`` (routes are computed for the diameter: all host pairs up to
    :data:`DIAMETER_EXACT_HOSTS` hosts, else a seeded random sample of pairs; the bisection
    bandwidth as the graph states it, else computed exactly or bounded, see
    :data:`BISECTION_METHODS`).

    Examples:
        >>> from commsim.topology import fat_tree
        >>> s = summarize(Network(fat_tree(64, hosts_per_leaf=16)))
        >>> s.hosts, s.switches, s.diameter, [c.links for c in s.classes]
        (64, 20, 4, [64, 64])
        >>> s.bisection_bandwidth / 25e9, s.bisection_method  # 32 hosts' worth, per direction
        (32.0, 'stated')
        >>> from commsim.topology import dragonfly
        >>> s = summarize(Network(dragonfly(5, 4, 2, 1)))  # 5 groups: one group is split
        >>> s.bisection_bandwidth / 25e9, s.bisection_method
        (8.0, 'exact')
    """
    net = network
    per_edge = 1 if net.directed else 2
    classes = []
    for k, kind in enumerate(net.kinds):
        sel = net.link_kind == k
        bw, lat = net.bandwidth[sel], net.latency[sel]
        classes.append(
            LinkClassSummary(
                kind,
                int(sel.sum()) // per_edge,
                (float(bw.min()), float(bw.max())),
                (float(lat.min()), float(lat.max())),
            )
        )
    h = net.nhosts
    if h <= DIAMETER_EXACT_HOSTS:
        a, b = np.divmod(np.arange(h * h, dtype=np.int64), h)
        exact = True
    else:
        rng = np.random.default_rng(0)
        a, b = rng.integers(0, h, _SAMPLE), rng.integers(0, h, _SAMPLE)
        exact = False
    diameter = 0
    for lo in range(0, len(a), 1 << 16):
        indptr, _ = net.routes(a[lo : lo + (1 << 16)], b[lo : lo + (1 << 16)])
        diameter = max(diameter, int(np.diff(indptr).max(initial=0)))
    bis, method = _bisection(net)
    return TopologySummary(
        name=str(net.graph.graph.get("name") or "graph"),
        hosts=h,
        switches=int(net.is_switch.sum()),
        servers=net.nservers,
        classes=tuple(classes),
        diameter=diameter,
        diameter_exact=exact,
        bisection_bandwidth=bis,
        bisection_method=method,
        routing=routing_name(net.graph),
        reducing_switches=len(net.reducing),
        fabric_reducing=int((net.reducing_tier == 1).sum()),
    )


def _bisection(net: Network) -> tuple[float | None, str | None]:
    stated = net.graph.graph.get("bisection_bandwidth")
    if stated is not None:
        return as_bandwidth(stated, "the graph's bisection_bandwidth"), "stated"
    for method, fn in (("exact", exact_bisection), ("upper bound", bisection_upper_bound)):
        try:
            return fn(net), method
        except ParameterError:  # too large for this method
            continue
    return None, None
