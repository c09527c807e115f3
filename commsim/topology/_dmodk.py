r"""Destination-based (d-mod-k) routing on leaf–spine trees: the generator's record, its tables,
and the compiled router.

InfiniBand subnet managers fill the switches' forwarding tables by destination: every route to
a host enters the same down-going links, so the links a route takes are a function of the
destination alone. Zahavi's d-mod-k rule numbers the hosts leaf by leaf (``D``; host ``x`` of a
fat tree is ``D = x``) and sends traffic for ``D`` up through

.. math::

    k_1 = D \bmod S \quad \text{(the leaf's uplink: spine } k_1 \text{ of the source's pod)},
    \qquad k_2 = \lfloor D / S \rfloor \bmod C \quad \text{(the pod spine's uplink: core } k_2)

where ``S`` is the number of spines per pod and ``C`` the number of cores (three levels only).
The route is minimal: up to the lowest level the two hosts share, then down. Going down, the
route to ``D`` descends through spine :math:`k_1` of the destination's pod, so the down links
are also a function of ``D``: from a spine to a leaf, only the destinations with one residue
:math:`D \bmod S`. On a full-bisection two-level tree (``S`` equal to the hosts per leaf ``h``)
a *shift permutation* (host ``i`` sends to :math:`(i + k h) \bmod n`) therefore puts one flow on
every link: the hosts of a leaf send to the ``h`` hosts of one leaf, whose residues modulo ``S``
are all different. With ``S < h`` (an oversubscribed leaf) the flows of a leaf spread evenly,
:math:`h / S` per uplink. ECMP's hash gives no such guarantee (up to 4 of a leaf's 16 flows on
one uplink in the example of ``docs/sharp-bits.md``).

Between GPUs of one server (:func:`commsim.topology.join` with an NVLink island) the route is
the island's switch; between servers, the rail fabric's tree above.

A generator states its tree in ``graph.graph["routing"] = ("dmodk", record)``; ``record`` is a
dict of ints and names (:func:`fat_tree_record`, :func:`rail_record`, extended by ``join`` with
the island's switch). :func:`dmodk_tables` turns it into arrays over the graph's nodes, and
:func:`commsim.topology._dmodk_kernels.route_dmodk` routes host pairs with them (compiled, in its
own module, so that numba is imported only when a route is computed). When the graph was edited so that a link a
route needs is missing, the router says so and the caller falls back to shortest paths.

References:
    E. Zahavi, "D-Mod-K Routing Providing Non-Blocking Traffic for Shift Permutations on Real
    Life Fat Trees", CCIT Report, Technion, 2010. OpenSM's ``ftree`` routing engine (fat
    trees, destination-based up-port selection) and ``updn`` engine (up–down, minimal).

See Also:
    :mod:`commsim.topology._routing`: shortest paths with an ECMP hash, and dimension order.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from commsim.errors import ParameterError

__all__ = [
    "ROUTINGS",
    "DmodkTables",
    "check_routing",
    "dmodk_tables",
    "fat_tree_record",
    "rail_record",
    "routing_name",
]

#: The routings a tree generator takes: ``"ecmp"`` (the default: a hash over equal-cost next
#: hops, as Ethernet switches do) and ``"dmodk"`` (destination-based, as InfiniBand does).
ROUTINGS = ("ecmp", "dmodk")


def check_routing(routing: Any, where: str) -> str:
    """``routing`` if it is one of :data:`ROUTINGS`, else a one-line ParameterError.

    Examples:
        >>> check_routing("dmodk", "fat_tree")
        'dmodk'
        >>> check_routing("hash", "fat_tree")
        Traceback (most recent call last):
        ...
        commsim.errors.ParameterError: fat_tree: routing must be 'ecmp' or 'dmodk', got 'hash'
    """
    if routing not in ROUTINGS:
        raise ParameterError(
            f"{where}: routing must be {' or '.join(map(repr, ROUTINGS))}, got {routing!r}"
        )
    return routing


def routing_name(graph: Any) -> str:
    """How a graph is routed, in words (``commsim topology`` prints it)."""
    record = graph.graph.get("routing")
    if record and record[0] == "dmodk":
        return "d-mod-k (destination-based, up-down)"
    if record and record[0] == "torus":
        return "dimension order"
    return "shortest paths, ECMP hash"


def fat_tree_record(n: int, h: int, spines: int, levels: int, leaves_per_pod: int) -> dict:
    """The record of :func:`commsim.topology.fat_tree`: host ``x`` on leaf ``x // h``,
    ``D = x``."""
    return {
        "tree": "fat_tree",
        "hosts": n,
        "hosts_per_leaf": h,
        "spines": spines,
        "levels": levels,
        "leaves_per_pod": leaves_per_pod,
    }


def rail_record(nodes: int, gpus_per_node: int, nodes_per_unit: int, spines: int) -> dict:
    """The record of :func:`commsim.topology.rail_optimized`'s fabric: GPU ``i`` of server
    ``s`` on leaf ``(s // U) g + i``, ``D`` = leaf × hosts per leaf + ``s mod U``."""
    return {
        "tree": "rail",
        "nodes": nodes,
        "gpus_per_node": gpus_per_node,
        "nodes_per_unit": nodes_per_unit,
        "spines": spines,
    }


class DmodkTables(NamedTuple):
    """A tree as arrays. Per node (-1 where the node is not a host of the tree): ``rank``
    (``D``), ``leaf`` (leaf id), ``island`` (node of its server's NVLink switch) and ``server``.
    Per leaf id: ``leaf_node``, ``leaf_pod``. ``spine_node[pod, k]``; ``core_node[c]`` (empty
    with two levels)."""

    rank: np.ndarray
    leaf: np.ndarray
    island: np.ndarray
    server: np.ndarray
    leaf_node: np.ndarray
    leaf_pod: np.ndarray
    spine_node: np.ndarray
    core_node: np.ndarray


def _structure(record: dict) -> tuple[np.ndarray, np.ndarray, list, np.ndarray, list, list]:
    """``(rank, leaf, leaf labels, leaf pod, spine labels per pod, core labels)`` for hosts
    ``0..n-1`` of the record's generator."""
    s = record["spines"]
    if record["tree"] == "fat_tree":
        n, h = record["hosts"], record["hosts_per_leaf"]
        x = np.arange(n, dtype=np.int64)
        nleaves = -(-n // h)
        leaves = [("leaf", i) for i in range(nleaves)]
        if record["levels"] == 2:
            pod = np.zeros(nleaves, dtype=np.int64)
            return x, x // h, leaves, pod, [[("spine", j) for j in range(s)]], []
        lpp = record["leaves_per_pod"]
        npods = -(-nleaves // lpp)
        pod = np.arange(nleaves, dtype=np.int64) // lpp
        spines = [[("spine", p, j) for j in range(s)] for p in range(npods)]
        return x, x // h, leaves, pod, spines, [("core", j) for j in range(s)]
    nodes, g, u = record["nodes"], record["gpus_per_node"], record["nodes_per_unit"]
    x = np.arange(nodes * g, dtype=np.int64)
    server = x // g
    leaf = (server // u) * g + x % g
    per_leaf = min(u, nodes)
    units = -(-nodes // u)
    leaves = [("leaf", v, i) for v in range(units) for i in range(g)]
    pod = np.zeros(len(leaves), dtype=np.int64)
    return leaf * per_leaf + server % u, leaf, leaves, pod, [[("spine", j) for j in range(s)]], []


def dmodk_tables(record: dict, node_index: dict, nnodes: int) -> DmodkTables | None:
    """The :class:`DmodkTables` of ``record`` over a graph whose nodes are numbered by
    ``node_index``; ``None`` when a node the record names is missing (the graph was edited)."""
    rank, leaf, leaves, pod, spines, cores = _structure(record)
    prefix = record.get("prefix")

    def nodes(labels: list) -> np.ndarray:
        keys = [(prefix, v) for v in labels] if prefix is not None else labels
        return np.array([node_index.get(k, -1) for k in keys], dtype=np.int64).reshape(-1)

    n = len(rank)
    host = np.array([node_index.get(x, -1) for x in range(n)], dtype=np.int64)  # hosts: 0..n-1
    leaf_node = nodes(leaves)
    spine_node = nodes([v for row in spines for v in row]).reshape(len(spines), -1)
    core_node = nodes(cores)
    if min(host.min(), leaf_node.min(), spine_node.min(), core_node.min(initial=0)) < 0:
        return None
    full = np.full(nnodes, -1, dtype=np.int64)
    t_rank, t_leaf, t_island, t_server = full.copy(), full.copy(), full.copy(), full.copy()
    t_rank[host], t_leaf[host] = rank, leaf
    island = record.get("island")
    if island is not None:
        g = record["gpus_per_server"]
        isl = np.array([node_index.get((s, island), -1) for s in range(n // g)], dtype=np.int64)
        if isl.min(initial=0) < 0:
            return None
        t_server[host] = np.arange(n) // g
        t_island[host] = isl[np.arange(n) // g]
    return DmodkTables(t_rank, t_leaf, t_island, t_server, leaf_node, pod, spine_node, core_node)
