"""Networks: topology graphs (networkx), their generators, placement of ranks, and routes.

A topology is a networkx graph of hosts and switches whose edges carry ``bandwidth`` and
``latency``; :class:`Network` checks it and compiles it to arrays; :func:`place` puts ranks on
hosts. The topology model (:class:`commsim.models.Topology`) times schedules on it.
"""

from commsim.topology._attributes import as_bandwidth, as_latency
from commsim.topology._basic import hypercube, ring, switch, torus
from commsim.topology._network import Network, as_network
from commsim.topology._placement import PLACEMENTS, place, ranks_per_server

__all__ = [
    "PLACEMENTS",
    "Network",
    "as_bandwidth",
    "as_latency",
    "as_network",
    "hypercube",
    "place",
    "ranks_per_server",
    "ring",
    "switch",
    "torus",
]
