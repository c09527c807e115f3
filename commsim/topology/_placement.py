"""Placement: which host each rank runs on.

* ``"linear"`` (default): rank ``r`` on host ``r`` (hosts in graph order; a generator numbers a
  server's GPUs consecutively, so consecutive ranks share a server, as ``mpirun --map-by core``
  or one process per GPU does).
* ``"round_robin"``: rank ``r`` on server ``r mod S`` (``S`` servers, the hosts' ``node``
  attribute), filling each server's hosts in order (``mpirun --map-by node``).
* ``"random"`` or ``"random:SEED"``: a seeded random permutation of hosts (``numpy`` PCG64).
* a sequence of host indices, one per rank, all distinct.

At most one rank per host: a host is one endpoint of the network (one GPU, one NIC).

**Helper ranks at reducing switches** (``switch_helpers=h``: the last ``h`` ranks are a
schedule's in-network helpers, IR rule 7): the first ``w = p - h`` ranks are placed as above;
helper ``i`` goes on a switch that reduces (node attribute ``reduce``) at the schedule's tier
(``tier``: ``"server"``, a server's own NVSwitch; ``"fabric"``, a leaf between servers, as
InfiniBand SHARP) joined by a link to the host of worker ``i mod w`` (the first such switch in
graph order), so a schedule says which switch serves which GPUs by numbering its helpers:
``nvls``'s helper ``j`` sits beside GPU ``j``, ``nvls_tree``'s helpers of a server beside that
server's GPUs, ``collnet_direct``'s helper of a server's GPU ``j`` on its rail's leaf. A helper's
index is an endpoint past the hosts (:attr:`Network.endpoints`), so its messages use only the
links between that switch and the GPUs. Several helpers may share a switch: a switch is no
host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from commsim._switch_tiers import SWITCH_TIERS
from commsim.errors import ParameterError
from commsim.topology._network import Network

__all__ = ["PLACEMENTS", "place", "ranks_per_server", "reducing_switches"]

PLACEMENTS = ("linear", "round_robin", "random")


def place(
    network: Network,
    nranks: int,
    placement: str | Sequence[int] = "linear",
    *,
    switch_helpers: int = 0,
    tier: str = "server",
) -> np.ndarray:
    """Host index of each of ``nranks`` ranks on ``network`` (see the module docstring); the
    last ``switch_helpers`` ranks on the reducing switches of ``tier`` next to the others'
    hosts.

    Raises:
        ParameterError: more ranks than hosts; a bad placement; helpers but no reducing switch
            next to the placed hosts.

    Examples:
        >>> from commsim.topology import switch
        >>> place(Network(switch(4)), 3, "linear").tolist()
        [0, 1, 2]
        >>> sorted(place(Network(switch(4)), 4, "random:7").tolist())
        [0, 1, 2, 3]
        >>> from commsim.topology import nvlink_island
        >>> place(Network(nvlink_island(4, reduce=True)), 6, switch_helpers=2).tolist()
        [0, 1, 2, 3, 4, 4]
    """
    if switch_helpers:
        workers = place(network, nranks - switch_helpers, placement)
        sites = _helper_sites(network, workers, switch_helpers, tier)
        return np.concatenate([workers, sites])
    h = network.nhosts
    if nranks > h:
        raise ParameterError(
            f"{nranks} ranks on a topology with {h} hosts: at most one rank per host "
            "(use a larger topology or fewer ranks)"
        )
    if isinstance(placement, str):
        name, _, arg = placement.partition(":")
        if name == "linear" and not arg:
            return np.arange(nranks, dtype=np.int64)
        if name in ("round_robin", "round-robin") and not arg:
            servers = network.host_server
            order = np.lexsort((servers, _position_in_server(servers)))
            return order[:nranks].astype(np.int64)
        if name == "random":
            try:
                seed = int(arg) if arg else 0
                if seed < 0:
                    raise ValueError
            except ValueError:
                raise ParameterError(
                    f"placement random:SEED needs an integer seed >= 0, got {arg!r}"
                ) from None
            return np.random.default_rng(seed).permutation(h)[:nranks].astype(np.int64)
        raise ParameterError(
            f"unknown placement {placement!r}: use linear, round_robin, random[:SEED] or a list "
            "of host indices"
        )
    return _explicit(placement, nranks, h)


def reducing_switches(network: Network, hosts: np.ndarray) -> np.ndarray:
    """Endpoint indices (:attr:`Network.endpoints`) of the reducing switches joined by a link to
    one of ``hosts`` (host indices), in graph order."""
    k = len(network.reducing)
    if not k or not len(hosts):
        return np.zeros(0, dtype=np.int64)
    placed = np.zeros(len(network.nodes), dtype=bool)
    placed[network.hosts[hosts]] = True
    slot = np.full(len(network.nodes), -1, dtype=np.int64)
    slot[network.reducing] = np.arange(k)
    near = slot[network.link_src[placed[network.link_dst]]]
    return network.nhosts + np.unique(near[near >= 0])


def _helper_sites(network: Network, workers: np.ndarray, helpers: int, tier: str) -> np.ndarray:
    """The endpoints of ``helpers`` in-network helper ranks: helper ``i`` on the reducing switch
    of ``tier`` next to worker ``i mod w``'s host (the module docstring)."""
    beside = workers[np.arange(helpers, dtype=np.int64) % len(workers)]
    site = _first_reducing_neighbour(network, tier)[beside]
    lonely = np.flatnonzero(site < 0)
    if len(lonely) == len(site):
        what = (
            "an NVSwitch with NVLink SHARP: a cluster's nvls = true, or a graph switch's "
            "reduce = true"
            if tier == "server"
            else "an InfiniBand switch with SHARP: a cluster's sharp = true, or a graph "
            "switch's reduce = 'fabric'"
        )
        raise ParameterError(
            f"in-network reduction needs a switch that reduces next to the ranks' GPUs ({what});"
            " this network has none"
        )
    if len(lonely):
        w = int(lonely[0] % len(workers))
        raise ParameterError(
            f"in-network helper {len(workers) + int(lonely[0])} serves worker {w}, whose host "
            f"{int(workers[w])} has no reducing switch next to it: in-network rows need every "
            "GPU they use beside a switch that reduces"
        )
    return network.nhosts + site


def _first_reducing_neighbour(network: Network, tier: str = "server") -> np.ndarray:
    """Per host, the index (among :attr:`Network.reducing`) of the first reducing switch of
    ``tier`` joined to it by a link, in graph order; ``-1`` where none is."""
    k = len(network.reducing)
    slot = np.full(len(network.nodes), k, dtype=np.int64)
    mine = network.reducing_tier == SWITCH_TIERS.index(tier)
    slot[network.reducing[mine]] = np.flatnonzero(mine)
    first = np.full(len(network.nodes), k, dtype=np.int64)
    np.minimum.at(first, network.link_dst, slot[network.link_src])
    out = first[network.hosts]
    return np.where(out < k, out, -1)


def _position_in_server(servers: np.ndarray) -> np.ndarray:
    """Per host, how many hosts of its server come before it."""
    order = np.argsort(servers, kind="stable")
    s = servers[order]
    first = np.searchsorted(s, s)
    pos = np.empty_like(servers)
    pos[order] = np.arange(len(s)) - first
    return pos


def _explicit(placement: Any, nranks: int, nhosts: int) -> np.ndarray:
    try:
        hosts = np.asarray(placement)
    except Exception:  # pragma: no cover - exotic sequences
        raise ParameterError("a placement list must be host indices") from None
    if hosts.ndim != 1 or not np.issubdtype(hosts.dtype, np.integer):
        raise ParameterError("a placement list must be a flat list of integer host indices")
    if len(hosts) != nranks:
        raise ParameterError(f"the placement lists {len(hosts)} hosts for {nranks} ranks")
    bad = np.flatnonzero((hosts < 0) | (hosts >= nhosts))
    if len(bad):
        raise ParameterError(
            f"placement of rank {bad[0]}: host {hosts[bad[0]]} is out of range 0..{nhosts - 1}"
        )
    _, first, counts = np.unique(hosts, return_index=True, return_counts=True)
    if (counts > 1).any():
        raise ParameterError(
            f"placement puts two ranks on host {hosts[first[np.argmax(counts > 1)]]}: at most one rank per host"
        )
    return hosts.astype(np.int64)


def ranks_per_server(network: Network, hosts: np.ndarray) -> int | None:
    """``g`` when ranks ``0..p-1`` placed on ``hosts`` fill servers in consecutive groups of
    ``g`` (the last may be smaller): what ``ranks_per_node`` of a hierarchical algorithm needs.
    ``None`` when the placement does not keep a server's ranks together.

    Examples:
        >>> import networkx as nx
        >>> g = nx.complete_graph(4)
        >>> nx.set_edge_attributes(g, 1.0, "bandwidth")
        >>> nx.set_node_attributes(g, {0: "a", 1: "a", 2: "b", 3: "b"}, "node")
        >>> (
        ...     ranks_per_server(Network(g), np.arange(4)),
        ...     ranks_per_server(Network(g), np.array([0, 2, 1, 3])),
        ... )
        (2, None)
    """
    server = network.host_server[hosts]
    if len(server) == 0:
        return None
    change = np.flatnonzero(server[1:] != server[:-1]) + 1
    starts = np.concatenate([[0], change])
    if len(np.unique(server[starts])) != len(starts):
        return None  # a server's ranks are not contiguous
    sizes = np.diff(np.concatenate([starts, [len(server)]]))
    g = int(sizes[0])
    return g if (sizes[:-1] == g).all() and sizes[-1] <= g else None
