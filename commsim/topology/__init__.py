"""Networks: topology graphs (networkx), their generators, placement of ranks, and routes.

A topology is a networkx graph of hosts and switches whose edges carry ``bandwidth`` and
``latency``; :class:`Network` checks it and compiles it to arrays; :func:`place` puts ranks on
hosts. The topology model (:class:`commsim.models.Topology`) times schedules on it.
"""

from commsim.topology._attributes import as_bandwidth, as_latency
from commsim.topology._basic import hypercube, ring, switch, torus
from commsim.topology._network import Network, as_network
from commsim.topology._placement import PLACEMENTS, place, ranks_per_server
from commsim.topology._spec import GENERATORS, load_topology, parse_topology, register_generator

__all__ = [
    "GENERATORS",
    "PLACEMENTS",
    "Network",
    "as_bandwidth",
    "as_latency",
    "as_network",
    "hypercube",
    "load_topology",
    "parse_topology",
    "place",
    "ranks_per_server",
    "register_generator",
    "ring",
    "switch",
    "torus",
]
