"""Routes between hosts, computed in compiled loops for the pairs a schedule uses.

Two routers, both minimal (no path is longer than a shortest one):

* **Shortest paths with ECMP** (any graph; a link's ``route_weight``, default 1, is its length:
  the dragonfly gives its global links 2, so minimal routes take one at most). Traffic is
  forwarded by *forwarding nodes*: the
  switches (nodes with ``kind="switch"``) or, in a graph without switches (a direct network such
  as a torus), the hosts themselves. A breadth-first search from every forwarding node gives the
  hop distances between them (``F × F`` int16: 16 MiB for 2,900 switches); a route then leaves the
  source host by a forwarding neighbour, walks down the distance to the destination's forwarding
  neighbour and enters the destination. Where several next hops are equally short (equal-cost
  multi-path), one is chosen by a hash of ``(src host, dst host, current node)``, the way switches
  hash a flow's header: a pair always takes the same path, different pairs spread over the
  equal-cost paths. In a fat tree this is up–down routing; in a dragonfly, minimal
  (local–global–local) routing. A direct link between the two hosts is always taken.
* **Dimension-order routing** on tori and rings built by :func:`commsim.topology.torus` (the
  graph carries ``graph.graph["routing"] = ("torus", dims)``): the route corrects dimension 0
  first, then 1, ..., each the short way round (a tie, half-way round, is broken by the same
  hash). If the graph was edited so that a needed link is missing, routing falls back to
  shortest paths.

A third router, destination-based (d-mod-k) routing on the leaf–spine trees of
:func:`commsim.topology.fat_tree` and :func:`commsim.topology.rail_optimized` built with
``routing="dmodk"``, lives in :mod:`commsim.topology._dmodk` (``graph.graph["routing"] =
("dmodk", record)``).

Routes are computed only for the ``(src, dst)`` host pairs asked for, and cached
(:class:`commsim.topology._route_cache.RouteCache`), never for all pairs of a large graph. This
module is compiled code only, imported by :class:`commsim.topology.Network` when it first routes
a pair (numba costs about 0.2 s to import; ``commsim --help`` needs none of it).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["forwarding_distances", "route_shortest", "route_torus"]

_UNREACHABLE = -1


@numba.njit(cache=True, nogil=True)
def forwarding_distances(in_indptr, in_nbr, in_weight, fwd_of, fwd_nodes):  # pragma: no cover
    """``D[b, a]``: the least route weight from forwarding node ``a`` to forwarding node ``b``
    (-1: unreachable), by a label-correcting search from each ``b`` over incoming links between
    forwarding nodes (a breadth-first search when every weight is 1)."""
    f = fwd_nodes.shape[0]
    dist = np.full((f, f), _UNREACHABLE, dtype=np.int16)
    queue = np.empty(f, dtype=np.int64)
    queued = np.zeros(f, dtype=np.bool_)
    for b in range(f):
        row = dist[b]
        row[b] = 0
        head = 0
        size = 1
        queue[0] = b
        queued[b] = True
        while size > 0:
            x = queue[head]
            head = (head + 1) % f
            size -= 1
            queued[x] = False
            node = fwd_nodes[x]
            for e in range(in_indptr[node], in_indptr[node + 1]):
                y = fwd_of[in_nbr[e]]
                if y < 0:
                    continue
                d = row[x] + in_weight[e]
                if row[y] == _UNREACHABLE or d < row[y]:
                    row[y] = d
                    if not queued[y]:
                        queue[(head + size) % f] = y
                        size += 1
                        queued[y] = True
    return dist


@numba.njit(cache=True, nogil=True)
def _mix(a, b, c):  # pragma: no cover
    """A cheap integer hash of three non-negative ints (< 2**31 each)."""
    h = (a * 2654435761 + b * 2246822519 + c * 3266489917 + 374761393) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 2246822519) & 0xFFFFFFFF
    h ^= h >> 13
    return h


@numba.njit(cache=True, nogil=True)
def _ends(
    s, d, out_indptr, out_nbr, out_weight, in_indptr, in_nbr, in_weight, fwd_of, dist
):  # pragma: no cover
    """The least route weight from host ``s`` to host ``d`` (-1 if none) and how many
    (first forwarding node, last forwarding node) choices achieve it."""
    best = -1
    n = 0
    if fwd_of[s] >= 0:
        a_lo, a_hi, a_self = 0, 1, True
    else:
        a_lo, a_hi, a_self = out_indptr[s], out_indptr[s + 1], False
    if fwd_of[d] >= 0:
        b_lo, b_hi, b_self = 0, 1, True
    else:
        b_lo, b_hi, b_self = in_indptr[d], in_indptr[d + 1], False
    for i in range(a_lo, a_hi):
        a = s if a_self else out_nbr[i]
        fa = fwd_of[a]
        if fa < 0:
            continue
        for j in range(b_lo, b_hi):
            b = d if b_self else in_nbr[j]
            fb = fwd_of[b]
            if fb < 0:
                continue
            h = dist[fb, fa]
            if h < 0:
                continue
            h = h + (0 if a_self else out_weight[i]) + (0 if b_self else in_weight[j])
            if best < 0 or h < best:
                best = h
                n = 1
            elif h == best:
                n += 1
    return best, n


@numba.njit(cache=True, nogil=True)
def _link(out_indptr, out_nbr, out_link, u, v):  # pragma: no cover
    for e in range(out_indptr[u], out_indptr[u + 1]):
        if out_nbr[e] == v:
            return out_link[e]
    return -1


@numba.njit(cache=True, nogil=True)
def route_shortest(  # pragma: no cover
    src, dst, out_indptr, out_nbr, out_link, out_weight, in_indptr, in_nbr, in_weight, fwd_of, dist
):
    """Minimal routes with ECMP for host pairs ``(src[i], dst[i])`` (node indices).

    Returns ``(indptr, links, bad)``: route ``i`` is ``links[indptr[i]:indptr[i + 1]]`` (link
    ids in order); ``bad`` is the index of the first pair with no route, or -1.
    """
    m = src.shape[0]
    hops = np.empty(m, dtype=np.int64)  # links per route (weights may exceed 1)
    for i in range(m):
        s, d = src[i], dst[i]
        if s == d:
            hops[i] = 0
        elif _link(out_indptr, out_nbr, out_link, s, d) >= 0:
            hops[i] = 1
        else:
            h, _ = _ends(
                s, d, out_indptr, out_nbr, out_weight, in_indptr, in_nbr, in_weight, fwd_of, dist
            )
            if h < 0:
                return np.zeros(1, np.int64), np.zeros(0, np.int64), i
            hops[i] = h  # an upper bound on the links (each weighs at least 1)
    bound = np.zeros(m + 1, dtype=np.int64)
    for i in range(m):
        bound[i + 1] = bound[i] + hops[i]
    indptr = np.zeros(m + 1, dtype=np.int64)
    links = np.empty(bound[m], dtype=np.int64)
    k = 0
    for i in range(m):
        s, d = src[i], dst[i]
        indptr[i] = k
        if hops[i] == 0:
            continue
        direct = _link(out_indptr, out_nbr, out_link, s, d)
        if direct >= 0:
            links[k] = direct
            k += 1
            continue
        best, n = _ends(
            s, d, out_indptr, out_nbr, out_weight, in_indptr, in_nbr, in_weight, fwd_of, dist
        )
        pick = _mix(s, d, s) % n
        # find the picked (a, b) pair again
        a_self = fwd_of[s] >= 0
        b_self = fwd_of[d] >= 0
        a_lo, a_hi = (0, 1) if a_self else (out_indptr[s], out_indptr[s + 1])
        b_lo, b_hi = (0, 1) if b_self else (in_indptr[d], in_indptr[d + 1])
        ca = -1
        cb = -1
        for ii in range(a_lo, a_hi):
            a = s if a_self else out_nbr[ii]
            if fwd_of[a] < 0:
                continue
            for jj in range(b_lo, b_hi):
                b = d if b_self else in_nbr[jj]
                if fwd_of[b] < 0:
                    continue
                h = dist[fwd_of[b], fwd_of[a]]
                if h < 0:
                    continue
                if h + (0 if a_self else out_weight[ii]) + (0 if b_self else in_weight[jj]) == best:
                    if pick == 0:
                        ca = a
                        cb = b
                    pick -= 1
        if not a_self:
            links[k] = _link(out_indptr, out_nbr, out_link, s, ca)
            k += 1
        x = ca
        fb = fwd_of[cb]
        while x != cb:
            left = dist[fb, fwd_of[x]]
            n_next = 0
            for e in range(out_indptr[x], out_indptr[x + 1]):
                y = fwd_of[out_nbr[e]]
                if y >= 0 and dist[fb, y] == left - out_weight[e]:
                    n_next += 1
            c = _mix(s, d, x) % n_next
            for e in range(out_indptr[x], out_indptr[x + 1]):
                y = fwd_of[out_nbr[e]]
                if y >= 0 and dist[fb, y] == left - out_weight[e]:
                    if c == 0:
                        links[k] = out_link[e]
                        k += 1
                        x = out_nbr[e]
                        break
                    c -= 1
        if not b_self:
            links[k] = _link(out_indptr, out_nbr, out_link, cb, d)
            k += 1
    indptr[m] = k
    return indptr, links[:k].copy(), -1


@numba.njit(cache=True, nogil=True)
def route_torus(src, dst, dims, wrap, out_indptr, out_nbr, out_link):  # pragma: no cover
    """Dimension-order routes on a torus whose node ``i`` has mixed-radix coordinates over
    ``dims`` (last dimension fastest); a dimension with ``wrap[k]`` false is a line, crossed
    the only way there is. Returns ``(indptr, links, ok)``; ``ok`` is False when a needed link
    is missing (the graph was edited)."""
    m = src.shape[0]
    nd = dims.shape[0]
    stride = np.ones(nd, dtype=np.int64)
    for k in range(nd - 2, -1, -1):
        stride[k] = stride[k + 1] * dims[k + 1]
    indptr = np.zeros(m + 1, dtype=np.int64)
    for i in range(m):
        h = 0
        for k in range(nd):
            n = dims[k]
            delta = ((dst[i] // stride[k]) % n - (src[i] // stride[k]) % n) % n
            if wrap[k]:
                h += min(delta, n - delta)
            else:
                h += abs((dst[i] // stride[k]) % n - (src[i] // stride[k]) % n)
        indptr[i + 1] = indptr[i] + h
    links = np.empty(indptr[m], dtype=np.int64)
    for i in range(m):
        x = src[i]
        j = indptr[i]
        for k in range(nd):
            n = dims[k]
            delta = ((dst[i] // stride[k]) % n - (x // stride[k]) % n) % n
            if delta == 0:
                continue
            if wrap[k]:
                up = delta < n - delta or (2 * delta == n and _mix(src[i], dst[i], k) % 2 == 0)
            else:  # a line: towards the destination's coordinate
                up = (dst[i] // stride[k]) % n > (x // stride[k]) % n
            steps = delta if up else n - delta
            for _ in range(steps):
                c = (x // stride[k]) % n
                nc = (c + 1) % n if up else (c - 1 + n) % n
                y = x + (nc - c) * stride[k]
                e = _link(out_indptr, out_nbr, out_link, x, y)
                if e < 0:
                    return indptr, links, False
                links[j] = e
                j += 1
                x = y
    return indptr, links, True
