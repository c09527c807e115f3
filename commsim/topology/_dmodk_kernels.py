"""The compiled d-mod-k router (numba): the rule and the tables are in
:mod:`commsim.topology._dmodk`.

Imported by :class:`commsim.topology.Network` when it first routes a pair on a ``("dmodk", ...)``
graph, never with the package: numba costs about 0.2 s to import.
"""

from __future__ import annotations

import numba
import numpy as np

from commsim.topology._routing import _link

__all__ = ["route_dmodk"]


@numba.njit(cache=True, nogil=True)
def _path(
    s, d, rank, leaf, island, server, leaf_node, leaf_pod, spine_node, core_node, buf
):  # pragma: no cover
    """The nodes of the d-mod-k route ``s -> d`` into ``buf``; their count (0: not a tree
    host)."""
    if rank[s] < 0 or rank[d] < 0:
        return 0
    buf[0] = s
    if island[s] >= 0 and server[s] == server[d]:
        buf[1] = island[s]
        buf[2] = d
        return 3
    ls, ld = leaf[s], leaf[d]
    buf[1] = leaf_node[ls]
    if ls == ld:
        buf[2] = d
        return 3
    nspines = spine_node.shape[1]
    r = rank[d]
    k = r % nspines
    ps, pd = leaf_pod[ls], leaf_pod[ld]
    buf[2] = spine_node[ps, k]
    j = 3
    if ps != pd:
        buf[3] = core_node[(r // nspines) % core_node.shape[0]]
        buf[4] = spine_node[pd, k]
        j = 5
    buf[j] = leaf_node[ld]
    buf[j + 1] = d
    return j + 2


@numba.njit(cache=True, nogil=True)
def route_dmodk(  # pragma: no cover
    src, dst, rank, leaf, island, server, leaf_node, leaf_pod, spine_node, core_node,
    out_indptr, out_nbr, out_link,
):  # fmt: skip
    """D-mod-k routes for host pairs ``(src[i], dst[i])`` (node indices; module docstring).

    Returns ``(indptr, links, ok)`` like :func:`commsim.topology._routing.route_torus`; ``ok``
    is False when a pair is not in the tree or a link the route needs is missing.
    """
    m = src.shape[0]
    indptr = np.zeros(m + 1, dtype=np.int64)
    links = np.empty(6 * m, dtype=np.int64)
    buf = np.empty(7, dtype=np.int64)
    k = 0
    for i in range(m):
        indptr[i] = k
        s, d = src[i], dst[i]
        if s == d:
            continue
        c = _path(s, d, rank, leaf, island, server, leaf_node, leaf_pod, spine_node, core_node, buf)
        if c == 0:
            return indptr, links[:0].copy(), False
        for j in range(c - 1):
            e = _link(out_indptr, out_nbr, out_link, buf[j], buf[j + 1])
            if e < 0:
                return indptr, links[:0].copy(), False
            links[k] = e
            k += 1
    indptr[m] = k
    return indptr, links[:k].copy(), True
