"""A topology graph compiled to arrays: hosts, directed links, link classes, and routes.

The user-facing object is a networkx graph (STYLE: networkx generators): nodes are hosts and
switches, edges are links. Attributes read:

* node ``kind``: ``"switch"`` for a switch; any other value (or none) is a host. Hosts are the
  endpoints ranks are placed on, in the graph's node order. Optional node ``node``: the server a
  host (a GPU) belongs to, used by round-robin placement and by ``ranks_per_node``.
* switch ``reduce`` (optional: false, true or ``"server"``, ``"fabric"``): the switch reduces in
  the network, as a server's own switch (``true`` or ``"server"``: NVLink SHARP on an NVSwitch)
  or as a switch of the fabric between servers (``"fabric"``: InfiniBand SHARP on a leaf); a
  schedule's in-network helper ranks (IR rule 7, ``Schedule.in_network``, which names the
  tier) are placed on these switches, which are then endpoints ``nhosts, nhosts + 1, ...``
  after the hosts (:attr:`Network.endpoints`).
* edge ``bandwidth`` (bytes/s, or a string such as ``"400Gb/s"``; required), ``latency``
  (seconds or ``"500ns"``; default 0), ``kind`` (the link's class, e.g. ``"nvlink"``,
  ``"rail"``; default ``"link"``) and ``route_weight`` (its length for routing, 1..8; default 1).

An undirected edge is a full-duplex link: two directed links, each with the full bandwidth. An
``nx.DiGraph`` gives one directed link per edge. :class:`Network` checks the graph once (every
problem is one line naming the node or edge) and keeps flat arrays, so models never touch
networkx in their loops.
"""

from __future__ import annotations

import copy
import difflib
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from commsim._lazy import lazy_module
from commsim._switch_tiers import SWITCH_TIERS, switch_tier
from commsim.errors import NoRouteError, ParameterError
from commsim.topology._attributes import as_bandwidth, as_latency, as_share
from commsim.topology._dmodk import DmodkTables, dmodk_tables
from commsim.topology._route_cache import RouteCache

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")

__all__ = ["MAX_FORWARDING_NODES", "Network", "as_network"]

#: Shortest-path routing keeps an ``F × F`` int16 distance table over forwarding nodes; past
#: this many (512 MiB) a graph needs a structured router (a generator's ``graph["routing"]``:
#: torus, d-mod-k trees, dragonfly), which keeps no such table.
MAX_FORWARDING_NODES = 16_384


_PLAIN = (str, int, float)  # link values parsed once per distinct value (bool is not int here)


def _edge_name(u: Any, v: Any) -> str:
    return f"({u!r}, {v!r})"


class Network:
    """A graph of hosts, switches and links, as arrays (see the module docstring).

    Attributes:
        graph: the networkx graph it was built from.
        nodes: node labels; arrays below index into this list.
        hosts: node index of each host, in graph order (host ``i`` is ``nodes[hosts[i]]``).
        host_server: per host, the server it belongs to (node attribute ``node``; the host
            itself when absent), numbered from 0 in order of appearance.
        link_src, link_dst: node index of each directed link's ends.
        bandwidth, latency: per directed link, bytes/s and seconds.
        link_kind: per directed link, an index into ``kinds`` (its class).
        kinds: link class names, in order of first appearance.
        reducing: node index of each switch that reduces (node attribute ``reduce``).
        reducing_tier: per reducing switch, its tier: an index into :data:`SWITCH_TIERS`
            (0: a server's own switch, 1: a fabric switch).
        endpoints: node index of each endpoint a rank may sit on: the hosts, then the
            reducing switches (endpoint ``nhosts + k`` is ``nodes[reducing[k]]``).
        endpoint_server: per endpoint, its server (:attr:`host_server`; a reducing switch
            joined only to one server's hosts is that server's, else a server of its own).

    Examples:
        >>> import networkx as nx
        >>> g = nx.path_graph(3)
        >>> nx.set_edge_attributes(g, 1e9, "bandwidth")
        >>> net = Network(g)
        >>> net.nhosts, net.nlinks  # an undirected edge is two directed links
        (3, 4)
        >>> net.route(0, 2)  # link ids along the path
        [0, 2]
    """

    def __init__(self, graph: Any) -> None:
        if isinstance(graph, Network):
            graph = graph.graph
        if not isinstance(graph, nx.Graph):
            raise ParameterError(f"a topology is a networkx graph, got {type(graph).__name__}")
        if graph.is_multigraph():
            raise ParameterError(
                "multigraphs are not supported: join parallel links into one edge whose "
                "bandwidth is their sum"
            )
        self.graph = graph
        self.directed = graph.is_directed()
        self.nodes = list(graph.nodes)
        index = {v: i for i, v in enumerate(self.nodes)}
        self.node_index = index
        kind = [graph.nodes[v].get("kind", "host") for v in self.nodes]
        self.is_switch = np.array([k == "switch" for k in kind], dtype=bool)
        self.hosts = np.flatnonzero(~self.is_switch)
        if len(self.hosts) == 0:
            raise ParameterError("the topology has no hosts (every node has kind='switch')")
        self._read_links(index)
        self._read_servers()
        self._read_reducing(kind)
        self._check_connected()
        n = len(self.nodes)
        out_order = np.lexsort((self.link_dst, self.link_src))
        self.out_indptr = np.searchsorted(self.link_src[out_order], np.arange(n + 1))
        self.out_nbr = self.link_dst[out_order]
        self.out_link = out_order.astype(np.int64)
        self.out_weight = self.link_weight[out_order]
        in_order = np.lexsort((self.link_src, self.link_dst))
        self.in_indptr = np.searchsorted(self.link_dst[in_order], np.arange(n + 1))
        self.in_nbr = self.link_src[in_order]
        self.in_weight = self.link_weight[in_order]
        self._dist: np.ndarray | None = None
        self._fwd_of: np.ndarray | None = None
        self._cache = RouteCache(n, self._route_nodes)

    # -- reading the graph -----------------------------------------------------------------
    def _read_links(self, index: dict[Any, int]) -> None:
        src, dst, bw, lat, kinds, weights = [], [], [], [], [], []
        kind_ids: dict[str, int] = {}
        parsed: dict[tuple[Any, Any], tuple[float, float]] = {}  # many links share their values
        for u, v, data in self.graph.edges(data=True):
            if u == v:
                raise ParameterError(f"edge {_edge_name(u, v)} is a self-loop; remove it")
            if "bandwidth" not in data:
                raise ParameterError(
                    f"edge {_edge_name(u, v)} has no 'bandwidth' attribute "
                    "(bytes/s, or a string such as '400Gb/s')"
                )
            raw = (data["bandwidth"], data.get("latency", 0.0))
            try:
                b, t = parsed[raw]
            except (KeyError, TypeError):  # TypeError: an unhashable value, parsed to say so
                b = as_bandwidth(raw[0], f"bandwidth of edge {_edge_name(u, v)}")
                t = as_latency(raw[1], f"latency of edge {_edge_name(u, v)}")
                if type(raw[0]) in _PLAIN and type(raw[1]) in _PLAIN:
                    parsed[raw] = b, t
            k = str(data.get("kind", "link"))
            w = data.get("route_weight", 1)
            if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= 8:
                raise ParameterError(
                    f"edge {_edge_name(u, v)}: route_weight must be an integer 1..8, got {w!r}"
                )
            kid = kind_ids.setdefault(k, len(kind_ids))
            pairs = [(u, v)] if self.directed else [(u, v), (v, u)]
            for a, c in pairs:
                src.append(index[a])
                dst.append(index[c])
                bw.append(b)
                lat.append(t)
                kinds.append(kid)
                weights.append(w)
        self.link_src = np.array(src, dtype=np.int64)
        self.link_dst = np.array(dst, dtype=np.int64)
        self.bandwidth = np.array(bw, dtype=np.float64)
        self.latency = np.array(lat, dtype=np.float64)
        self.link_kind = np.array(kinds, dtype=np.int64)
        self.link_weight = np.array(weights, dtype=np.int64)
        self.kinds = tuple(kind_ids)

    def _read_servers(self) -> None:
        labels = [
            self.graph.nodes[self.nodes[h]].get("node", ("host", i))
            for i, h in enumerate(self.hosts)
        ]
        ids: dict[Any, int] = {}
        self.host_server = np.array([ids.setdefault(x, len(ids)) for x in labels], dtype=np.int64)

    def _read_reducing(self, kind: list[Any]) -> None:
        tiers = []  # -1: does not reduce
        for v, k in zip(self.nodes, kind, strict=True):
            flag = self.graph.nodes[v].get("reduce", False)
            try:
                tier = switch_tier(flag)
            except ValueError as e:
                raise ParameterError(f"node {v!r}: reduce {e}") from None
            if tier is not None and k != "switch":
                shown = (
                    "true"
                    if tier == "server" and isinstance(flag, bool | np.bool_)
                    else f"{flag!r}"
                )
                raise ParameterError(f"node {v!r} reduces (reduce={shown}) but is not a switch")
            tiers.append(-1 if tier is None else SWITCH_TIERS.index(tier))
        tier_of = np.array(tiers, dtype=np.int64)
        self.reducing = np.flatnonzero(tier_of >= 0)
        self.reducing_tier = tier_of[self.reducing]
        self.endpoints = np.concatenate([self.hosts, self.reducing]).astype(np.int64)
        server_of = np.full(len(self.nodes), -1, dtype=np.int64)
        server_of[self.hosts] = self.host_server
        slot = np.full(len(self.nodes), -1, dtype=np.int64)
        slot[self.reducing] = np.arange(len(self.reducing))
        edge = (slot[self.link_src] >= 0) & (server_of[self.link_dst] >= 0)  # switch -> host
        k, srv = slot[self.link_src[edge]], server_of[self.link_dst[edge]]
        lo = np.full(len(self.reducing), np.iinfo(np.int64).max)
        hi = np.full(len(self.reducing), -1)
        np.minimum.at(lo, k, srv)
        np.maximum.at(hi, k, srv)
        own = np.where(lo == hi, lo, self.nservers + np.arange(len(self.reducing)))
        self.endpoint_server = np.concatenate([self.host_server, own]).astype(np.int64)

    def _check_connected(self) -> None:
        g = self.graph
        comps = nx.strongly_connected_components(g) if self.directed else nx.connected_components(g)
        first = self.nodes[self.hosts[0]]
        for comp in comps:
            if first in comp:
                missing = [self.nodes[h] for h in self.hosts if self.nodes[h] not in comp]
                if missing:
                    more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
                    raise ParameterError(
                        f"the topology is disconnected: host {missing[0]!r}{more} cannot reach "
                        f"host {first!r}"
                    )
                return

    # -- sizes -------------------------------------------------------------------------------
    @property
    def nhosts(self) -> int:
        return len(self.hosts)

    @property
    def nlinks(self) -> int:
        return len(self.link_src)

    @property
    def nservers(self) -> int:
        return int(self.host_server.max()) + 1

    def driven(self, shares: Mapping[str, float]) -> Network:
        """This network with every link of class ``k`` at ``shares[k]`` times its rate (the
        others as they are): the links as a collective library drives them (``[intra]
        efficiency`` of a cluster, docs/library.md). The routes are this network's (shared
        underneath: a library does not change routing); this network is unchanged.

        Raises:
            ParameterError: a class this network does not have, or a share outside (0, 1].

        Examples:
            >>> from commsim.topology import switch
            >>> net = Network(switch(2, bandwidth=10.0, kind="nic"))
            >>> net.driven({"nic": 0.5}).bandwidth.tolist(), net.bandwidth.tolist()
            ([5.0, 5.0, 5.0, 5.0], [10.0, 10.0, 10.0, 10.0])
        """
        if not shares:
            return self
        unknown = [k for k in shares if k not in self.kinds]
        if unknown:
            raise ParameterError(
                f"link_efficiency names link class {unknown[0]!r}, which this network does not "
                f"have (classes: {', '.join(self.kinds)})"
            )
        factor = np.array(
            [as_share(shares.get(k, 1.0), f"efficiency of {k!r}") for k in self.kinds]
        )
        driven = copy.copy(self)
        driven.bandwidth = self.bandwidth * factor[self.link_kind]
        return driven

    def host_label(self, host: int) -> Any:
        """The graph's label of host ``host`` (an index into :attr:`hosts`)."""
        return self.nodes[self.hosts[host]]

    def link_label(self, link: int) -> tuple[Any, Any]:
        """``(u, v)`` graph labels of directed link ``link``."""
        return self.nodes[self.link_src[link]], self.nodes[self.link_dst[link]]

    def kind_index(self, kind: str) -> int:
        """The index of link class ``kind`` in :attr:`kinds` (an error names the closest)."""
        if kind in self.kinds:
            return self.kinds.index(kind)
        close = difflib.get_close_matches(kind, self.kinds, n=3)
        hint = (
            f"; did you mean {', '.join(close)}?"
            if close
            else f"; classes: {', '.join(self.kinds)}"
        )
        raise ParameterError(f"no link class {kind!r} in this topology{hint}")

    # -- routes ------------------------------------------------------------------------------
    def routes(self, src_host: np.ndarray, dst_host: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Routes between hosts ``src_host[i] -> dst_host[i]`` (host indices, arrays; an index
        past the hosts is a reducing switch, :attr:`endpoints`).

        Returns ``(indptr, links)`` in CSR form: the directed link ids of route ``i`` are
        ``links[indptr[i]:indptr[i + 1]]``, in order. A network whose generator recorded its
        routing rule (d-mod-k, a dragonfly's minimal routes, a torus's dimension order) routes
        every call afresh in compiled code, which costs less than finding the pairs in a cache
        (a direct all-to-all on 1,024 GPUs asks for 1,023 rounds of new pairs: ``compare
        --cluster dgx-h100:128`` 20-30 % faster); any other is routed by shortest paths once
        per pair and cached (:class:`~commsim.topology._route_cache.RouteCache`).
        """
        src, dst = self.endpoints[src_host], self.endpoints[dst_host]
        if self._rule_routed:
            return self._route_nodes(np.asarray(src, np.int64), np.asarray(dst, np.int64))
        return self._cache.routes(src, dst)

    @functools.cached_property
    def _rule_routed(self) -> bool:
        """Whether routes come from a generator's routing rule in compiled code (cheaper to
        compute again than to look up), not from shortest paths."""
        routing = self.graph.graph.get("routing")
        torus = routing is not None and routing[0] == "torus" and not self.is_switch.any()
        return torus or self._dragonfly is not None or self._dmodk is not None

    def route(self, src_host: int, dst_host: int) -> list[int]:
        """The link ids of one route (a convenience over :meth:`routes`)."""
        indptr, links = self.routes(np.array([src_host]), np.array([dst_host]))
        return links[indptr[0] : indptr[1]].tolist()

    def _route_nodes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from commsim.topology._dmodk_kernels import route_dmodk  # numba: imported on first use
        from commsim.topology._routing import route_shortest, route_torus

        routing = self.graph.graph.get("routing")
        if routing is not None and routing[0] == "torus" and not self.is_switch.any():
            dims = np.asarray(routing[1], dtype=np.int64)
            wrap = np.asarray(routing[2] if len(routing) > 2 else [True] * len(dims))
            if int(np.prod(dims)) == len(self.nodes):
                indptr, links, ok = route_torus(
                    src, dst, dims, wrap, self.out_indptr, self.out_nbr, self.out_link
                )
                if ok:
                    return indptr, links
        if self._dragonfly is not None:
            return self._route_dragonfly(src, dst)
        if self._dmodk is not None:
            indptr, links, ok = route_dmodk(
                src, dst, *self._dmodk, self.out_indptr, self.out_nbr, self.out_link
            )
            if ok:
                return indptr, links
        fwd_of, dist = self._distances()
        indptr, links, bad = route_shortest(
            src, dst, self.out_indptr, self.out_nbr, self.out_link, self.out_weight,
            self.in_indptr, self.in_nbr, self.in_weight, fwd_of, dist,
        )  # fmt: skip
        self._refuse_unrouted(src, dst, bad)
        return indptr, links

    def _refuse_unrouted(self, src: np.ndarray, dst: np.ndarray, bad: int) -> None:
        """One line for the first pair a router found no route for (``bad``; ``-1``: none)."""
        if bad >= 0:
            raise NoRouteError(
                f"no route from {self.nodes[src[bad]]!r} to {self.nodes[dst[bad]]!r}: in a graph "
                "with switches, traffic is forwarded by switches only"
            )

    def _route_dragonfly(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Minimal routes on a dragonfly from group and router indices (the shortest paths'
        routes without their ``F × F`` table: :mod:`commsim.topology._dragonfly_kernels`)."""
        from commsim.topology._dragonfly_kernels import route_dragonfly  # numba: on first use

        indptr, links, bad = route_dragonfly(
            src, dst, self.out_indptr, self.out_nbr, self.out_link, self.out_weight,
            self.in_indptr, self.in_nbr, self.in_weight, *self._dragonfly,
        )  # fmt: skip
        self._refuse_unrouted(src, dst, bad)
        return indptr, links

    @functools.cached_property
    def _dragonfly(self) -> Any:
        """The tables of a dragonfly generator's record (``None``: no record, or the graph was
        edited so that the index rule for minimal routes no longer holds: shortest paths)."""
        record = self.graph.graph.get("routing")
        if record is None or record[0] != "dragonfly":
            return None
        from commsim.topology._dragonfly_kernels import dragonfly_tables

        return dragonfly_tables(record[1], self)

    @functools.cached_property
    def _dmodk(self) -> DmodkTables | None:
        """The tables of a generator's d-mod-k record (``None``: no record, or a node it names is
        missing); a pair the tables cannot route sends its whole batch to shortest paths."""
        record = self.graph.graph.get("routing")
        if record is None or record[0] != "dmodk":
            return None
        return dmodk_tables(record[1], self.node_index, len(self.nodes))

    def _distances(self) -> tuple[np.ndarray, np.ndarray]:
        if self._dist is None:
            from commsim.topology._routing import forwarding_distances  # numba: on first use

            fwd = self.is_switch if self.is_switch.any() else np.ones(len(self.nodes), bool)
            fwd_nodes = np.flatnonzero(fwd)
            if len(fwd_nodes) > MAX_FORWARDING_NODES:
                raise ParameterError(
                    f"routing this network needs a table of hop counts between its "
                    f"{len(fwd_nodes):,} switches ({len(fwd_nodes) ** 2 * 2 / 2**30:.1f} GiB); at "
                    f"most {MAX_FORWARDING_NODES:,} switches are supported: use a smaller network"
                )
            fwd_of = np.full(len(self.nodes), -1, dtype=np.int64)
            fwd_of[fwd_nodes] = np.arange(len(fwd_nodes))
            self._fwd_of = fwd_of
            self._dist = forwarding_distances(
                self.in_indptr, self.in_nbr, self.in_weight, fwd_of, fwd_nodes
            )
        return self._fwd_of, self._dist


def as_network(topology: Any) -> Network:
    """A :class:`Network` from a ``Network`` or a networkx graph."""
    return topology if isinstance(topology, Network) else Network(topology)
