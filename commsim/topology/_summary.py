"""What a topology is: its hosts, switches, links by class, diameter and bisection bandwidth."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from commsim.topology._network import Network

__all__ = ["DIAMETER_EXACT_HOSTS", "LinkClassSummary", "TopologySummary", "summarize"]

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
        bisection_bandwidth: bytes/s per direction across the worst balanced cut, as the
            generator states it; ``None`` for a graph that does not say.
    """

    name: str
    hosts: int
    switches: int
    servers: int
    classes: tuple[LinkClassSummary, ...]
    diameter: int
    diameter_exact: bool
    bisection_bandwidth: float | None

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
        }


def summarize(network: Network) -> TopologySummary:
    """Count and measure ``network`` (routes are computed for the diameter: all host pairs up to
    :data:`DIAMETER_EXACT_HOSTS` hosts, else a seeded random sample of pairs).

    Examples:
        >>> from commsim.topology import fat_tree
        >>> s = summarize(Network(fat_tree(64, hosts_per_leaf=16)))
        >>> s.hosts, s.switches, s.diameter, [c.links for c in s.classes]
        (64, 20, 4, [64, 64])
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
    bis = net.graph.graph.get("bisection_bandwidth")
    return TopologySummary(
        name=str(net.graph.graph.get("name") or "graph"),
        hosts=h,
        switches=int(net.is_switch.sum()),
        servers=net.nservers,
        classes=tuple(classes),
        diameter=diameter,
        diameter_exact=exact,
        bisection_bandwidth=None if bis is None else float(bis),
    )
