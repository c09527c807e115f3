"""Networks: topology graphs (networkx), their generators, placement of ranks, and routes.

A topology is a networkx graph of hosts and switches whose edges carry ``bandwidth`` and
``latency``; :class:`Network` checks it and compiles it to arrays; :func:`place` puts ranks on
hosts. Generators (networkx style, size first, ``bandwidth=``/``latency=`` everywhere):
:func:`switch`, :func:`ring`, :func:`torus`, :func:`hypercube`, :func:`fat_tree`,
:func:`kary_fat_tree`, :func:`dragonfly`, :func:`nvlink_island`, :func:`rail_optimized`,
:func:`hybrid_cube_mesh` (a DGX-1's GPUs), and
:func:`join` for an intra-server graph joined by an inter-server one. :func:`pack_rings` finds
the rings a mesh of direct links carries at once, :func:`pack_trees` its weighted spanning
trees. :func:`summarize` measures a
network (links by class, diameter, bisection bandwidth); :func:`draw` pictures a small one. The topology model (:class:`commsim.models.Topology`) times schedules on it.
"""

from commsim._switch_tiers import SWITCH_TIERS, switch_tier
from commsim.topology._attributes import as_bandwidth, as_latency, as_share
from commsim.topology._basic import MAX_HOSTS, check_hosts, hypercube, ring, switch, torus
from commsim.topology._bisection import bisection_upper_bound, exact_bisection
from commsim.topology._dgx1 import DGX1_NVLINKS, hybrid_cube_mesh
from commsim.topology._dragonfly import dragonfly
from commsim.topology._draw import MAX_DRAW_NODES, draw
from commsim.topology._fat_tree import fat_tree, kary_fat_tree
from commsim.topology._gpu import join, nvlink_island, rail_optimized
from commsim.topology._network import Network, as_network
from commsim.topology._placement import PLACEMENTS, place, ranks_per_server, reducing_switches
from commsim.topology._ring_packing import link_units, pack_rings
from commsim.topology._spec import (
    GENERATORS,
    call_problem,
    load_topology,
    parse_topology,
    register_generator,
)
from commsim.topology._summary import (
    BISECTION_METHODS,
    LinkClassSummary,
    TopologySummary,
    summarize,
)
from commsim.topology._tree_packing import MAX_TREE_HOSTS, Tree, TreePacking, pack_trees

__all__ = [
    "BISECTION_METHODS",
    "DGX1_NVLINKS",
    "GENERATORS",
    "MAX_DRAW_NODES",
    "MAX_HOSTS",
    "MAX_TREE_HOSTS",
    "PLACEMENTS",
    "SWITCH_TIERS",
    "LinkClassSummary",
    "Network",
    "TopologySummary",
    "Tree",
    "TreePacking",
    "as_bandwidth",
    "as_latency",
    "as_network",
    "as_share",
    "bisection_upper_bound",
    "call_problem",
    "check_hosts",
    "dragonfly",
    "draw",
    "exact_bisection",
    "fat_tree",
    "hybrid_cube_mesh",
    "hypercube",
    "join",
    "kary_fat_tree",
    "link_units",
    "load_topology",
    "nvlink_island",
    "pack_rings",
    "pack_trees",
    "parse_topology",
    "place",
    "rail_optimized",
    "ranks_per_server",
    "reducing_switches",
    "register_generator",
    "ring",
    "summarize",
    "switch",
    "switch_tier",
    "torus",
]
