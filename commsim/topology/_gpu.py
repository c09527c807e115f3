r"""GPU clusters: NVLink islands inside servers, NIC fabrics between them, and :func:`join`.

* :func:`nvlink_island`: the GPUs of one server (or one NVLink domain, such as a GB200 NVL72
  rack) on an NVSwitch, modelled as one non-blocking switch (``"nvswitch"``); links ``"nvlink"``
  with the per-GPU NVLink bandwidth per direction; ``reduce=True`` marks the NVSwitch as one
  that reduces (NVLink SHARP, "NVLS": NVSwitch gen 3 of H100/H200 systems and later; node
  attribute ``reduce``), where a schedule's in-network helper ranks sit.
* :func:`join`: ``servers`` copies of an intra-server graph whose hosts (GPUs) are also the hosts
  of an inter-server graph (each GPU's NIC port): GPU ``i`` of server ``s`` is host
  ``s * g + i`` of both. Hosts get the node attribute ``node = s`` (their server).
* :func:`rail_optimized`: NVIDIA's rail-optimized fabric (DGX SuperPOD reference architectures):
  GPU ``i`` of every server of a scalable unit hangs off rail ``i``'s leaf switch of that unit
  (``"rail"`` links); every leaf is joined to every spine (``"spine"`` links).

Routes: between GPUs of one server, through its NVSwitch (two ``"nvlink"`` hops); between
servers, from the GPU's own NIC through the rail fabric: same rail and unit, up to the leaf and
down; otherwise leaf–spine–leaf. GPUs never forward traffic (no PXN-style relay through a
neighbour GPU): a cross-rail message crosses a spine. Which spine: the ``routing`` keyword of
:func:`rail_optimized`, an ECMP hash (the default) or d-mod-k by destination
(:mod:`commsim.topology._dmodk`; InfiniBand rails).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from commsim._lazy import lazy_module
from commsim.errors import ParameterError
from commsim.topology._attributes import as_bandwidth, as_latency
from commsim.topology._basic import _count, check_hosts
from commsim.topology._dmodk import check_routing, rail_record

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")

__all__ = ["join", "nvlink_island", "rail_optimized"]


def nvlink_island(
    gpus: int,
    *,
    bandwidth: float | str = "450GB/s",
    latency: float | str = "0.5us",
    reduce: bool = False,
) -> nx.Graph:
    """``gpus`` GPUs on one NVSwitch (a non-blocking crossbar), links of class ``"nvlink"``.

    The default bandwidth is an H100's NVLink4 (900 GB/s both directions, 450 GB/s each way).
    ``reduce``: the NVSwitch reduces in the network (NVLink SHARP; the module docstring).

    Examples:
        >>> g = nvlink_island(8)
        >>> g.number_of_nodes(), g.number_of_edges(), g.graph["bisection_bandwidth"] / 1e9
        (9, 8, 1800.0)
    """
    gpus = check_hosts(_count(gpus, "nvlink_island: the number of GPUs"), "nvlink_island")
    bw, lat = as_bandwidth(bandwidth), as_latency(latency)
    g = nx.Graph(name=f"nvlink_island({gpus})", bisection_bandwidth=gpus // 2 * bw)
    g.add_nodes_from(range(gpus), kind="host", node=0)
    if not isinstance(reduce, bool):
        raise ParameterError(f"nvlink_island: reduce must be true or false, got {reduce!r}")
    g.add_node("nvswitch", kind="switch", **({"reduce": True} if reduce else {}))
    g.add_edges_from(
        ((i, "nvswitch") for i in range(gpus)), bandwidth=bw, latency=lat, kind="nvlink"
    )
    return g


def _hosts(g: nx.Graph) -> list:
    return [v for v, k in g.nodes(data="kind") if k != "switch"]


def join(intra: nx.Graph, inter: nx.Graph, servers: int, *, name: str | None = None) -> nx.Graph:
    """One graph of ``servers`` copies of ``intra`` joined by ``inter`` (module docstring).

    ``inter`` must have ``servers × g`` hosts (``g``: ``intra``'s hosts), in server-major order:
    its host ``s * g + i`` is GPU ``i`` of server ``s``. The fabric's links weigh twice their
    ``route_weight`` in routing, so traffic between GPUs of one server stays inside it when it
    can (over NVLink, not out through the NICs and back). Switches are renamed
    ``(server, label)`` for ``intra``'s and ``("fabric", label)`` for ``inter``'s. A fabric
    routed d-mod-k (``inter.graph["routing"]``) stays so; its intra-server routes go through
    the server's switch, so ``intra`` must then be one switch with every GPU on it (an
    :func:`nvlink_island`).

    Examples:
        >>> from commsim.topology import switch
        >>> g = join(nvlink_island(4), switch(8, bandwidth="400Gb/s"), 2)
        >>> g.number_of_nodes(), g.number_of_edges()  # 8 GPUs, 2 NVSwitches, 1 switch
        (11, 16)
    """
    servers = _count(servers, "join: servers")
    ih, xh = _hosts(intra), _hosts(inter)
    gpn = len(ih)
    if len(xh) != servers * gpn:
        raise ParameterError(
            f"join: the inter-server graph has {len(xh)} hosts, but {servers} servers of "
            f"{gpn} GPUs need {servers * gpn}"
        )
    ipos = {v: i for i, v in enumerate(ih)}
    xpos = {v: i for i, v in enumerate(xh)}
    out = nx.Graph(
        name=name or f"join({intra.graph.get('name', 'intra')}, {inter.graph.get('name', 'inter')})"
    )
    out.add_nodes_from((h, {"kind": "host", "node": h // gpn}) for h in range(servers * gpn))
    for s in range(servers):
        base = s * gpn

        def rename(v, s=s, base=base):
            return base + ipos[v] if v in ipos else (s, v)

        out.add_nodes_from(
            ((s, v), {**intra.nodes[v], "kind": "switch"}) for v in intra if v not in ipos
        )
        out.add_edges_from((rename(u), rename(v), d) for u, v, d in intra.edges(data=True))

    def rename_x(v):
        return xpos.get(v, ("fabric", v))

    out.add_nodes_from((("fabric", v), {"kind": "switch"}) for v in inter if v not in xpos)
    out.add_edges_from(
        (rename_x(u), rename_x(v), {**d, "route_weight": 2 * d.get("route_weight", 1)})
        for u, v, d in inter.edges(data=True)
    )
    record = inter.graph.get("routing")
    if record and record[0] == "dmodk":
        out.graph["routing"] = ("dmodk", {**record[1], **_island(intra, ih), "prefix": "fabric"})
    elif record and record[0] == "dragonfly":  # routers renamed; the islands reach only GPUs
        out.graph["routing"] = ("dragonfly", {**record[1], "prefix": "fabric"})
    return out


def _island(intra: nx.Graph, hosts: list) -> dict:
    """The keys a d-mod-k record needs for routes inside a server: its one switch."""
    host_set = set(hosts)
    switches = [v for v in intra if v not in host_set]
    if len(switches) != 1 or any(not intra.has_edge(h, switches[0]) for h in hosts):
        raise ParameterError(
            "join: a fabric routed d-mod-k needs each server's GPUs on one switch (an "
            f"nvlink_island); this server graph has {len(switches)} switches"
        )
    return {"island": switches[0], "gpus_per_server": len(hosts)}


def _check_oversubscription(oversubscription: Any) -> None:
    if (
        isinstance(oversubscription, bool)
        or not isinstance(oversubscription, int | float)
        or oversubscription < 1
    ):
        raise ParameterError(
            f"rail_optimized: oversubscription must be >= 1, got {oversubscription!r}"
        )


def rail_optimized(
    nodes: int,
    gpus_per_node: int = 8,
    *,
    bandwidth: float | str = "400Gb/s",
    latency: float | str = "1us",
    nodes_per_unit: int = 32,
    spines: int | None = None,
    oversubscription: float = 1.0,
    spine_latency: float | str = "0.5us",
    nvlink_bandwidth: float | str = "450GB/s",
    nvlink_latency: float | str = "0.5us",
    routing: str = "ecmp",
    nvls: bool = False,
) -> nx.Graph:
    r"""``nodes`` servers of ``gpus_per_node`` GPUs on NVLink, one NIC per GPU on a rail fabric.

    Servers form scalable units of ``nodes_per_unit`` (``U``); unit ``u`` has one leaf per rail
    (``("leaf", u, i)``) joined to GPU ``i`` of each of its servers. Every leaf is joined to every
    spine; a leaf's uplink capacity is ``U × bandwidth / oversubscription``, shared by ``S``
    spines (default ``max(1, round(U / (2 o)))``: two links per leaf–spine pair, as in the DGX
    SuperPOD). Spines have unbounded radix here (a non-blocking core); a real fabric of many units
    puts a core layer above them, which adds a hop of latency, not a bottleneck.

    ``nvls``: every server's NVSwitch reduces (NVLink SHARP: :func:`nvlink_island`'s
    ``reduce``).

    ``routing``: ``"ecmp"`` (a hash of the pair picks the spine) or ``"dmodk"`` (by destination:
    spine ``D mod S``, ``D`` the destination's place on its leaf, leaf by leaf;
    :mod:`commsim.topology._dmodk`).

    Examples:
        >>> g = rail_optimized(4, 8, nodes_per_unit=2)
        >>> kinds = nx.get_edge_attributes(g, "kind")
        >>> [
        ...     sum(k == c for k in kinds.values()) for c in ("nvlink", "rail", "spine")
        ... ]  # 2x8 leaves x 1 spine
        [32, 32, 16]
    """
    nodes = _count(nodes, "rail_optimized: nodes")
    g_ = _count(gpus_per_node, "rail_optimized: gpus_per_node")
    unit = _count(nodes_per_unit, "rail_optimized: nodes_per_unit")
    check_hosts(nodes * g_, "rail_optimized")
    _check_oversubscription(oversubscription)
    routing = check_routing(routing, "rail_optimized")
    bw, lat = as_bandwidth(bandwidth), as_latency(latency)
    slat = as_latency(spine_latency, "spine_latency")
    u_eff = min(unit, nodes)
    s = (
        max(1, round(u_eff / (2 * oversubscription)))
        if spines is None
        else _count(spines, "rail_optimized: spines")
    )
    units = -(-nodes // unit)
    fabric = nx.Graph(name="rails")
    if routing == "dmodk":
        fabric.graph["routing"] = ("dmodk", rail_record(nodes, g_, unit, s))
    n = nodes * g_
    fabric.add_nodes_from(range(n), kind="host")
    leaves = [("leaf", u, i) for u in range(units) for i in range(g_)]
    spine_nodes = [("spine", j) for j in range(s)]
    fabric.add_nodes_from(leaves + spine_nodes, kind="switch")
    h = np.arange(n)
    leaf_of = ((h // g_) // unit) * g_ + h % g_
    fabric.add_edges_from(
        zip(h.tolist(), [leaves[i] for i in leaf_of.tolist()], strict=True),
        bandwidth=bw,
        latency=lat,
        kind="rail",
    )
    up = u_eff * bw / (oversubscription * s)
    fabric.add_edges_from(
        ((lf, sp) for lf in leaves for sp in spine_nodes), bandwidth=up, latency=slat, kind="spine"
    )
    island = nvlink_island(g_, bandwidth=nvlink_bandwidth, latency=nvlink_latency, reduce=nvls)
    out = join(island, fabric, nodes, name=f"rail_optimized({nodes}x{g_})")
    out.graph["bisection_bandwidth"] = n / 2 * bw / oversubscription  # NIC bandwidth; full units
    return out
