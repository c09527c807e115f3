r"""Lower bounds of the topology model from its graph: injection, cut and bisection bounds.

Under the topology model a rank drives all of its host's links at once (IR rule 6: every channel
is a port of its own), so "one link at a time" (Chan et al. 2007 with the fastest host link) is
not a bound there: a multi-channel schedule beats it. What no schedule can beat is a **cut**: for
a set :math:`S` of graph nodes holding :math:`s` of the :math:`p` placed ranks, the bytes the
collective must move into :math:`S` cross the links entering :math:`S`, whose bandwidths sum to
:math:`B_\text{in}(S)` (the same for out of :math:`S`):

.. math::

    T \;\ge\; \max_S \max\left(\frac{d_\text{in}(s)\,n}{B_\text{in}(S)},
    \frac{d_\text{out}(s)\,n}{B_\text{out}(S)}\right)

(ForestColl, Zhao et al. 2024, bound every collective this way). The demands, in multiples of
``n`` (the collective's ``nbytes`` convention), for :math:`0 < s < p`:

=============== ============================== ==============================
collective      :math:`d_\text{in}(s)`          :math:`d_\text{out}(s)`
=============== ============================== ==============================
allgather       :math:`(p-s)/p` (blocks held   :math:`s/p` (blocks held in S)
                outside S)
reduce_scatter  :math:`s/p` (one reduced block :math:`(p-s)/p`
                per rank of S)
allreduce       1 (the sum depends on every    1
                input outside S)
alltoall        :math:`s(p-s)/p`               :math:`s(p-s)/p`
broadcast       1 if the root is outside S     1 if the root is in S
reduce          1 if the root is in S          1 if the root is outside S
=============== ============================== ==============================

A bound must hold for every root, so a rooted collective's cut counts
:math:`\min(n/B_\text{in}, n/B_\text{out})`.

The cuts computed (each family is a valid bound on its own; the strongest one binds):

* **injection**: every placed host alone (:math:`s = 1`: all of the host's links, each
  direction), plus the total over all ranks: allreduce must move at least :math:`2(p-1)n` bytes
  between ranks (each element is a one-way gossip among :math:`p` ranks, which needs
  :math:`2(p-1)` messages; Patarasuk & Yuan 2009's :math:`2\frac{p-1}{p}n` per rank on average),
  the other collectives :math:`(p-1)n` (reduce_scatter, alltoall, broadcast, reduce) or
  :math:`(p-1)n` received (allgather), over the sum of all placed hosts' bandwidths. On hosts of
  equal bandwidth :math:`B` this is :math:`f_\beta(p)\,n/B` with Chan et al.'s factor. For a
  rooted collective the single-host cuts count the second largest host term (all but one host
  are not the root);
* **cut (server groups)**: each server's hosts (node attribute ``node``) with the switches all
  of whose links lead into that server, when the placed ranks span several servers and some
  server holds two;
* **cut (every cut)**: every subset of the graph's nodes, when it has at most
  :data:`MAX_EXHAUSTIVE_NODES` nodes (:math:`2^{16}` cuts in numpy);
* **bisection**: the placed ranks split in half (in rank order, and by a Kernighan–Lin bisection
  of the graph), each split's least cut by a maximum flow (networkx, Ford & Fulkerson 1956),
  on graphs of at most :data:`MAX_FLOW_NODES` nodes; larger graphs skip it (a note says so).

The **in-network-reduction** bound :math:`n/B_\text{in}` (:func:`in_network_bound`): with
helper ranks (IR rule 7: a switch that reduces, SHARP or NVLS, or dedicated servers), a worker
need send and receive each element only once, so the aggregate term above (:math:`2(p-1)n`
bytes among the ranks) no longer holds: the helpers take part. Every cut still does, over the
``w`` workers (helpers hold no data): for allreduce a worker alone must send :math:`n` and
receive :math:`n` through its host's links, :math:`T \ge n/B_\text{in}` with
:math:`B_\text{in}` its injection bandwidth (all of its links, NVLink and NIC).

The latency term is one message's least latency: with one channel per peer a rank reaches every
other rank in one message, so ``⌈lg p⌉`` rounds are not a bound of this model; nor is a γ term,
since a rank's channels reduce concurrently.

References:
    L. Zhao, S. Maleki, A. Shah, Z. Yang, H. Pourreza, A. Krishnamurthy, "ForestColl:
    Throughput-Optimal Collective Communications on Heterogeneous Network Fabrics", 2024
    (arXiv:2402.06787).
    P. Patarasuk, X. Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
    workstations", JPDC 69(2), 2009.
    E. Chan, M. Heimlich, A. Purkayastha, R. van de Geijn, "Collective communication: theory,
    practice, and experience", CCPE 19(13), 2007.

See Also:
    :meth:`commsim.models.Topology.bound`: the strongest of these, named;
    :func:`commsim.models.lower_bound`: Chan et al.'s bound of the Hockney model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from commsim._collectives import spec
from commsim._lazy import lazy_module
from commsim.topology import Network

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")

__all__ = [
    "BOUND_NAMES",
    "MAX_EXHAUSTIVE_NODES",
    "MAX_FLOW_NODES",
    "CutFamily",
    "GraphCuts",
    "cut_bound",
    "graph_cuts",
    "in_network_bound",
]

#: graphs of at most this many nodes get every cut (``2^16`` subsets, vectorized)
MAX_EXHAUSTIVE_NODES = 16
#: graphs of at most this many nodes get the bisection's maximum flows (networkx)
MAX_FLOW_NODES = 512

#: the name of each bound family, as predict and compare print it
BOUND_NAMES = {
    "injection": "injection bound (all of a host's links)",
    "servers": "cut bound (each server's hosts)",
    "every": "cut bound (every cut of the graph)",
    "bisection": "bisection bound (max-flow cut between the rank halves)",
    "in_network": "in-network bound (n/B_in: helper ranks reduce, each worker sends and "
    "receives its data once)",
}

_Demand = Callable[[int, np.ndarray], tuple[np.ndarray, np.ndarray]]

# per collective: (d_in(s), d_out(s)) in multiples of n for 0 < s < p (module docstring)
_DEMAND: dict[str, _Demand] = {
    "allgather": lambda p, s: ((p - s) / p, s / p),
    "reduce_scatter": lambda p, s: (s / p, (p - s) / p),
    "allreduce": lambda p, s: (np.ones_like(s), np.ones_like(s)),
    "alltoall": lambda p, s: (s * (p - s) / p, s * (p - s) / p),
    "broadcast": lambda p, s: (np.ones_like(s), np.ones_like(s)),
    "reduce": lambda p, s: (np.ones_like(s), np.ones_like(s)),
}
# per collective: (bytes received by all ranks together, bytes sent), in multiples of n
_TOTAL: dict[str, Callable[[int], tuple[float, float]]] = {
    "allgather": lambda p: (p - 1.0, 1.0),
    "reduce_scatter": lambda p: (1.0, p - 1.0),
    "allreduce": lambda p: (2.0 * (p - 1), 2.0 * (p - 1)),
    "alltoall": lambda p: (p - 1.0, p - 1.0),
    "broadcast": lambda p: (p - 1.0, p - 1.0),
    "reduce": lambda p: (p - 1.0, p - 1.0),
}


@dataclasses.dataclass(frozen=True)
class CutFamily:
    """Cuts of one family: per cut, the placed ranks inside ``s`` and the bandwidth into and out
    of it (bytes/s)."""

    name: str
    s: np.ndarray
    b_in: np.ndarray
    b_out: np.ndarray


@dataclasses.dataclass(frozen=True)
class GraphCuts:
    """The cuts of one placement (:func:`graph_cuts`): ``p`` ranks, the families, the summed
    host bandwidths ``(in, out)`` and the notes on families left out."""

    p: int
    families: tuple[CutFamily, ...]
    total_in: float
    total_out: float
    notes: tuple[str, ...] = ()


def _link_sums(net: Network, side: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[cuts]`` bandwidth into and out of each cut; ``side`` is ``[cuts, nodes]`` bool."""
    a, b = side[:, net.link_src], side[:, net.link_dst]
    return (~a & b) @ net.bandwidth, (a & ~b) @ net.bandwidth


def _single_hosts(net: Network, nodes: np.ndarray) -> CutFamily:
    n = len(net.nodes)
    b_in = np.bincount(net.link_dst, net.bandwidth, minlength=n)[nodes]
    b_out = np.bincount(net.link_src, net.bandwidth, minlength=n)[nodes]
    return CutFamily("injection", np.ones(len(nodes)), b_in, b_out)


def _server_groups(net: Network, placed: np.ndarray) -> CutFamily | None:
    """Each server's hosts, with the switches whose links all lead into that server."""
    servers = net.host_server[placed]
    count = np.bincount(servers)
    if (count > 0).sum() < 2 or count.max() < 2:  # one server, or servers of one rank each
        return None
    n = len(net.nodes)
    label = np.full(n, -1, dtype=np.int64)
    label[net.hosts] = net.host_server
    # a switch joins a server when every neighbour is one of that server's hosts
    nbr = label[net.link_dst]
    sw = net.is_switch[net.link_src]
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.full(n, -2)
    np.minimum.at(lo, net.link_src[sw], nbr[sw])
    np.maximum.at(hi, net.link_src[sw], nbr[sw])
    own = net.is_switch & (lo == hi) & (lo >= 0)
    label[own] = lo[own]
    ns = net.nservers
    ls, ld = label[net.link_src], label[net.link_dst]
    cross = ls != ld
    b_in = np.bincount(ld[cross & (ld >= 0)], net.bandwidth[cross & (ld >= 0)], minlength=ns)
    b_out = np.bincount(ls[cross & (ls >= 0)], net.bandwidth[cross & (ls >= 0)], minlength=ns)
    s = np.bincount(servers, minlength=ns).astype(np.float64)
    used = s > 0
    return CutFamily("servers", s[used], b_in[used], b_out[used])


def _every_cut(net: Network, placed_nodes: np.ndarray) -> CutFamily:
    m = len(net.nodes)
    codes = np.arange(1, (1 << m) - 1, dtype=np.int64)
    side = ((codes[:, None] >> np.arange(m)) & 1).astype(bool)
    b_in, b_out = _link_sums(net, side)
    s = side[:, placed_nodes].sum(axis=1).astype(np.float64)
    return CutFamily("every", s, b_in, b_out)


def _capacity_graph(net: Network) -> nx.DiGraph:
    d = nx.DiGraph()
    d.add_nodes_from(range(len(net.nodes)))
    cap: dict[tuple[int, int], float] = {}
    for u, v, b in zip(
        net.link_src.tolist(), net.link_dst.tolist(), net.bandwidth.tolist(), strict=True
    ):
        cap[u, v] = cap.get((u, v), 0.0) + b
    d.add_edges_from((u, v, {"capacity": c}) for (u, v), c in cap.items())
    return d


def _least_cut(d: nx.DiGraph, a: list[int], b: list[int]) -> float:
    """The least bandwidth of links from a node set holding ``a`` into one holding ``b``."""
    g = d.copy()
    g.add_edges_from(("source", x) for x in a)  # no capacity: unbounded
    g.add_edges_from((x, "sink") for x in b)
    return float(nx.minimum_cut_value(g, "source", "sink"))


def _bisections(net: Network, placed_nodes: np.ndarray) -> CutFamily:
    """The rank-order halves and a Kernighan–Lin split, each cut by a maximum flow."""
    p = len(placed_nodes)
    nodes = placed_nodes.tolist()
    orders = [nodes]
    if not net.directed:
        part, _ = nx.community.kernighan_lin_bisection(
            nx.Graph(_capacity_graph(net).to_undirected()), weight="capacity", seed=0
        )
        orders.append(sorted(nodes, key=lambda x: x not in part))
    d = _capacity_graph(net)
    s, b_in, b_out = [], [], []
    for order in orders:
        half = p // 2
        inside, outside = order[:half], order[half:]
        s.append(half)
        b_in.append(_least_cut(d, outside, inside))
        b_out.append(_least_cut(d, inside, outside))
    return CutFamily("bisection", np.array(s, float), np.array(b_in), np.array(b_out))


def graph_cuts(network: Network, hosts: np.ndarray) -> GraphCuts:
    """The cuts of ranks placed on ``hosts`` (host indices, one per rank) that the bounds
    use (module docstring): arrays over hosts and links, networkx only where affordable.

    Examples:
        >>> from commsim.topology import ring
        >>> cuts = graph_cuts(Network(ring(8)), np.arange(8))
        >>> [f.name for f in cuts.families], cuts.total_in / 25e9  # 8 hosts x 2 links
        (['injection', 'every', 'bisection'], 16.0)
    """
    net = network
    placed = np.asarray(hosts, dtype=np.int64)
    nodes = net.hosts[placed]
    inj = _single_hosts(net, nodes)
    families: list[CutFamily] = [inj]
    notes: list[str] = []
    groups = _server_groups(net, placed)
    if groups is not None:
        families.append(groups)
    if len(net.nodes) <= MAX_EXHAUSTIVE_NODES:
        families.append(_every_cut(net, nodes))
    if len(placed) >= 2:
        if len(net.nodes) <= MAX_FLOW_NODES:
            families.append(_bisections(net, nodes))
        else:
            notes.append(f"no bisection cut on over {MAX_FLOW_NODES:,} nodes (max-flow)")
    return GraphCuts(
        len(placed), tuple(families), float(inj.b_in.sum()), float(inj.b_out.sum()), tuple(notes)
    )


def _family_bound(collective: str, p: int, f: CutFamily) -> float:
    """Seconds per byte that the family's strongest cut forces (module docstring)."""
    s = f.s
    proper = (s > 0) & (s < p)
    if not proper.any():
        return 0.0
    s, b_in, b_out = s[proper], f.b_in[proper], f.b_out[proper]
    d_in, d_out = _DEMAND[collective](p, s)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_in = np.where(d_in > 0, d_in / b_in, 0.0)
        t_out = np.where(d_out > 0, d_out / b_out, 0.0)
    sp = spec(collective)
    if sp.rooted:
        if f.name == "injection" and len(s) == p:
            return _rooted_hosts(t_out, t_in) if sp.reduces else _rooted_hosts(t_in, t_out)
        return float(np.minimum(t_in, t_out).max())  # the root is on one side or the other
    return float(np.maximum(t_in, t_out).max())


def _rooted_hosts(t_other: np.ndarray, t_root: np.ndarray) -> float:
    """Single hosts of a rooted collective, for the worst root: every host but the root needs
    ``t_other`` (a broadcast's receivers), the root ``t_root``; the least over roots."""
    top = int(np.argmax(t_other))
    rest = np.delete(t_other, top)
    others = np.full(len(t_other), t_other[top])
    others[top] = rest.max() if len(rest) else 0.0
    return float(np.maximum(others, t_root).min())


def cut_bound(collective: str, cuts: GraphCuts) -> dict[str, float]:
    """Per bound family (:data:`BOUND_NAMES`' keys), the seconds per byte of ``n`` that no
    schedule of ``collective`` on the placement of ``cuts`` can beat (0: no bound).

    Examples:
        >>> from commsim.topology import switch
        >>> cuts = graph_cuts(Network(switch(4, bandwidth=1e9)), np.arange(4))
        >>> cut_bound("allgather", cuts)["injection"] * 1e9  # (p - 1)/p / B
        0.75
    """
    sp = spec(collective)
    p = cuts.p
    if p < 2:
        return {f.name: 0.0 for f in cuts.families}
    out = {f.name: _family_bound(sp.name, p, f) for f in cuts.families}
    recv, sent = _TOTAL[sp.name](p)
    with np.errstate(divide="ignore"):
        total = max(recv / cuts.total_in, sent / cuts.total_out)
    out["injection"] = max(out["injection"], float(total))
    return out


def in_network_bound(collective: str, cuts: GraphCuts) -> float:
    r"""The in-network-reduction bound per byte of ``n``, for a schedule whose ``cuts.p``
    workers have helper ranks beside them (module docstring): the strongest cut over the
    workers, without the aggregate term the helpers void; for allreduce :math:`1/B_\text{in}`.

    Examples:
        >>> from commsim.topology import switch
        >>> cuts = graph_cuts(Network(switch(4, bandwidth=1e9)), np.arange(4))
        >>> (
        ...     in_network_bound("allreduce", cuts) * 1e9,
        ...     cut_bound("allreduce", cuts)["injection"] * 1e9,
        ... )
        (1.0, 1.5)
    """
    sp = spec(collective)
    if cuts.p < 2:
        return 0.0
    return max(_family_bound(sp.name, cuts.p, f) for f in cuts.families)
