r"""The dragonfly's compiled router: minimal routes from group and router indices.

A dragonfly's minimal route crosses at most one global link (:mod:`commsim.topology._dragonfly`),
so the least route weight between two of its routers is a rule, not a table. With local links
of weight :math:`w_l` (every group a clique) and global links of weight :math:`w_g > 2 w_l`
(every pair of groups joined), the weight from router :math:`a` (group :math:`g_a`) to router
:math:`b` (group :math:`g_b`) is

.. math::

    d(a, b) = \begin{cases}
        0 & a = b \\
        w_l & g_a = g_b \\
        w_g & a \text{ and } b \text{ joined by a global link} \\
        w_l + w_g & a \text{ has a global link into } g_b, \text{ or } b \text{ into } g_a \\
        2 w_l + w_g & \text{otherwise}
    \end{cases}

(a route through a third group weighs at least :math:`2 w_g > w_g + 2 w_l`). The router walks
exactly as the shortest-path router does (:func:`commsim.topology._routing.route_shortest`):
the same candidate next hops in the same order and the same ECMP hash of ``(src, dst, node)``,
with :math:`d` computed from the indices instead of read from an ``F × F`` hop table, so its
routes are those of the table, link for link (tested), at any number of groups. What it reads:
a router's group, and one bit per (router, group): whether the router has a global link into
that group (``routers × groups`` bytes: 8 MiB at 513 groups of 32 routers).

Forwarding nodes that are not routers (the per-server crossbar :func:`commsim.topology.join`
adds) must have no link to another forwarding node: each then reaches only itself, which is
what the table holds for them. :func:`dragonfly_tables` checks every condition on the compiled
network and returns ``None`` where one fails (an edited graph, a failed link): the caller then
routes by shortest paths.

See Also:
    :func:`commsim.topology.dragonfly`: the generator whose record
    (``graph.graph["routing"] = ("dragonfly", record)``) names the routers.
    :mod:`commsim.topology._routing`: the shortest-path router this one reproduces.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numba
import numpy as np

from commsim.topology._routing import _link, _mix

__all__ = ["DragonflyTables", "dragonfly_tables", "route_dragonfly"]


class DragonflyTables(NamedTuple):
    """What :func:`route_dragonfly` reads besides the network's adjacency."""

    fwd: np.ndarray  # per node: a forwarding node (switch)
    group: np.ndarray  # per node: its dragonfly group (-1: not a router)
    rid: np.ndarray  # per node: its router index (-1: not a router)
    gmask: np.ndarray  # [routers, groups]: a global link from the router into the group
    wl: int  # local links' route weight
    wg: int  # global links' route weight


def dragonfly_tables(record: dict[str, Any], net: Any) -> DragonflyTables | None:
    """The tables of a dragonfly record over the compiled network ``net``
    (:class:`~commsim.topology.Network`), or ``None`` where the minimal-route rule does not hold
    (a router missing, a group not a clique, two groups not joined, mixed weights, a
    non-router switch joined to another switch)."""
    G, a = int(record["groups"]), int(record["routers"])
    prefix = record.get("prefix")
    labels = [("router", x, r) for x in range(G) for r in range(a)]
    if prefix is not None:
        labels = [(prefix, v) for v in labels]
    index = net.node_index
    if net.directed or any(v not in index for v in labels):
        return None
    n = len(net.nodes)
    nodes = np.array([index[v] for v in labels], dtype=np.int64)
    group = np.full(n, -1, dtype=np.int64)
    group[nodes] = np.repeat(np.arange(G), a)
    rid = np.full(n, -1, dtype=np.int64)
    rid[nodes] = np.arange(G * a)
    fwd = net.is_switch.copy()
    u, v, w = net.link_src, net.link_dst, net.link_weight
    between = fwd[u] & fwd[v]
    if (between & ((rid[u] < 0) | (rid[v] < 0))).any():
        return None  # a switch that is not a router forwards to another switch
    rr = between & (rid[u] >= 0) & (rid[v] >= 0)
    local = rr & (group[u] == group[v])
    glob = rr & (group[u] != group[v])
    wls, wgs = np.unique(w[local]), np.unique(w[glob])
    if len(wls) > 1 or len(wgs) > 1 or local.sum() != G * a * (a - 1):
        return None  # mixed weights, or a group that is not a clique
    wl = int(wls[0]) if len(wls) else 1
    wg = int(wgs[0]) if len(wgs) else 3
    gmask = np.zeros((G * a, G), dtype=np.bool_)
    gmask[rid[u[glob]], group[v[glob]]] = True
    joined = gmask.reshape(G, a, G).any(axis=1) | np.eye(G, dtype=np.bool_)
    if G > 1 and (wg <= 2 * wl or not joined.all()):
        return None  # minimal routes could cross two global links
    return DragonflyTables(fwd, group, rid, gmask, wl, wg)


@numba.njit(cache=True, nogil=True)
def _dist(b, a, out_indptr, out_nbr, group, rid, gmask, wl, wg):  # pragma: no cover
    """The least route weight from forwarding node ``a`` to forwarding node ``b`` (module
    docstring); -1 where ``b`` is unreachable (a non-router switch other than ``a``)."""
    if a == b:
        return 0
    ga, gb = group[a], group[b]
    if ga < 0 or gb < 0:
        return -1
    if ga == gb:
        return wl
    for e in range(out_indptr[a], out_indptr[a + 1]):
        if out_nbr[e] == b:
            return wg
    if gmask[rid[a], gb] or gmask[rid[b], ga]:
        return wl + wg
    return 2 * wl + wg


@numba.njit(cache=True, nogil=True)
def _ends(
    s, d, out_indptr, out_nbr, out_weight, in_indptr, in_nbr, in_weight, t
):  # pragma: no cover
    """As :func:`commsim.topology._routing._ends`, distances by :func:`_dist`; ``t`` is
    ``(fwd, group, rid, gmask, wl, wg)``. Returns the least weight from host ``s`` to host ``d``
    (-1 if none) and the number of (first, last) forwarding node choices that achieve it."""
    fwd, group, rid, gmask, wl, wg = t
    best, n = -1, 0
    a_self, b_self = fwd[s], fwd[d]
    a_lo, a_hi = (0, 1) if a_self else (out_indptr[s], out_indptr[s + 1])
    b_lo, b_hi = (0, 1) if b_self else (in_indptr[d], in_indptr[d + 1])
    for i in range(a_lo, a_hi):
        a = s if a_self else out_nbr[i]
        if not fwd[a]:
            continue
        for j in range(b_lo, b_hi):
            b = d if b_self else in_nbr[j]
            if not fwd[b]:
                continue
            h = _dist(b, a, out_indptr, out_nbr, group, rid, gmask, wl, wg)
            if h < 0:
                continue
            h = h + (0 if a_self else out_weight[i]) + (0 if b_self else in_weight[j])
            if best < 0 or h < best:
                best, n = h, 1
            elif h == best:
                n += 1
    return best, n


@numba.njit(cache=True, nogil=True)
def _pick_ends(s, d, best, pick, out_indptr, out_nbr, out_weight, in_indptr, in_nbr, in_weight,
               t):  # fmt: skip  # pragma: no cover
    """The ``pick``-th (first, last) forwarding node pair of weight ``best``, in
    :func:`_ends`' order."""
    fwd, group, rid, gmask, wl, wg = t
    a_self, b_self = fwd[s], fwd[d]
    a_lo, a_hi = (0, 1) if a_self else (out_indptr[s], out_indptr[s + 1])
    b_lo, b_hi = (0, 1) if b_self else (in_indptr[d], in_indptr[d + 1])
    for i in range(a_lo, a_hi):
        a = s if a_self else out_nbr[i]
        if not fwd[a]:
            continue
        for j in range(b_lo, b_hi):
            b = d if b_self else in_nbr[j]
            if not fwd[b]:
                continue
            h = _dist(b, a, out_indptr, out_nbr, group, rid, gmask, wl, wg)
            if h < 0:
                continue
            if h + (0 if a_self else out_weight[i]) + (0 if b_self else in_weight[j]) == best:
                if pick == 0:
                    return a, b
                pick -= 1
    return -1, -1


@numba.njit(cache=True, nogil=True)
def route_dragonfly(  # pragma: no cover
    src, dst, out_indptr, out_nbr, out_link, out_weight, in_indptr, in_nbr, in_weight, fwd,
    group, rid, gmask, wl, wg,
):  # fmt: skip
    """Minimal routes with ECMP for node pairs ``(src[i], dst[i])``: the routes of
    :func:`~commsim.topology._routing.route_shortest`, distances from indices. Returns
    ``(indptr, links, bad)``; ``bad`` is the first pair with no route, or -1."""
    t = (fwd, group, rid, gmask, wl, wg)
    m = src.shape[0]
    hops = np.zeros(m + 1, dtype=np.int64)
    for i in range(m):
        s, d = src[i], dst[i]
        if s != d and _link(out_indptr, out_nbr, out_link, s, d) < 0:
            h, _ = _ends(s, d, out_indptr, out_nbr, out_weight, in_indptr, in_nbr, in_weight, t)
            if h < 0:
                return np.zeros(1, np.int64), np.zeros(0, np.int64), i
            hops[i + 1] = h  # an upper bound on the links (each weighs at least 1)
        elif s != d:
            hops[i + 1] = 1
    bound = np.cumsum(hops)
    indptr = np.zeros(m + 1, dtype=np.int64)
    links = np.empty(bound[m], dtype=np.int64)
    k = 0
    for i in range(m):
        s, d = src[i], dst[i]
        indptr[i] = k
        if s == d:
            continue
        direct = _link(out_indptr, out_nbr, out_link, s, d)
        if direct >= 0:
            links[k] = direct
            k += 1
            continue
        best, n = _ends(s, d, out_indptr, out_nbr, out_weight, in_indptr, in_nbr, in_weight, t)
        ca, cb = _pick_ends(s, d, best, _mix(s, d, s) % n, out_indptr, out_nbr, out_weight,
                            in_indptr, in_nbr, in_weight, t)  # fmt: skip
        if not fwd[s]:
            links[k] = _link(out_indptr, out_nbr, out_link, s, ca)
            k += 1
        x = ca
        while x != cb:
            left = _dist(cb, x, out_indptr, out_nbr, group, rid, gmask, wl, wg)
            n_next = 0
            for e in range(out_indptr[x], out_indptr[x + 1]):
                y = out_nbr[e]
                if fwd[y] and _dist(cb, y, out_indptr, out_nbr, group, rid, gmask, wl, wg) == (
                    left - out_weight[e]
                ):
                    n_next += 1
            c = _mix(s, d, x) % n_next
            for e in range(out_indptr[x], out_indptr[x + 1]):
                y = out_nbr[e]
                if fwd[y] and _dist(cb, y, out_indptr, out_nbr, group, rid, gmask, wl, wg) == (
                    left - out_weight[e]
                ):
                    if c == 0:
                        links[k] = out_link[e]
                        k += 1
                        x = y
                        break
                    c -= 1
        if not fwd[d]:
            links[k] = _link(out_indptr, out_nbr, out_link, cb, d)
            k += 1
    indptr[m] = k
    return indptr, links[:k].copy(), -1
