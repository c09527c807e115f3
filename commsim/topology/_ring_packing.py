r"""Rings packed into a graph's direct links: as many directed Hamiltonian rings as the links carry.

A ring allgather moves :math:`\frac{p-1}{p}n` bytes over each of its :math:`p` links, so ``k``
rings on disjoint capacity, each carrying :math:`n/k`, finish ``k`` times sooner. On a graph whose
hosts are joined by direct links (a DGX-1's hybrid cube-mesh of NVLinks), each directed link
``u → v`` has a capacity in **units** (its ``links`` attribute where the generator counts
parallel links, else its bandwidth over the smallest host-to-host bandwidth, rounded); a ring
takes one unit of each directed link it uses. :func:`pack_rings` looks for the most rings that
fit, by exhaustive search over the directed Hamiltonian cycles through host 0 (the rings of the
NCCL channel search, which subtracts each ring's bandwidth from the links it uses; here the
search backtracks, so a greedy first choice cannot block a full packing). The upper bound it
stops at is the smallest out-capacity of a host: a host with 6 units out takes part in at most 6
rings. On a DGX-1 (6 NVLinks per GPU) it finds 6 rings, every NVLink busy in both directions:
allgather at :math:`6 \cdot 25\,\mathrm{GB/s} \cdot \frac{8}{7} = 171.4\,\mathrm{GB/s}` algbw.

The search is exponential in the host count: it is refused above :data:`MAX_PACKING_HOSTS` hosts
and stops after :data:`MAX_CYCLES` cycles, with a one-line error; past :data:`MAX_SEARCH` partial
packings it returns the largest found (valid, perhaps not the most). Links through switches are not
used (a ring here is a cycle of direct links); a graph without a ring of direct links gets none.

References:
    Jeaugey, "NCCL 2.0", GTC 2017 (rings over NVLink, channels); Wang et al., "Blink: Fast and
    Generic Collectives for Distributed ML", MLSys 2020 (packing on DGX-1 and partial
    allocations).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from commsim.errors import ParameterError

__all__ = ["MAX_CYCLES", "MAX_PACKING_HOSTS", "MAX_SEARCH", "link_units", "pack_rings"]

#: Most hosts :func:`pack_rings` searches over (the search is exponential in it).
MAX_PACKING_HOSTS = 16
#: Most directed Hamiltonian cycles it enumerates before refusing.
MAX_CYCLES = 200_000
#: Most partial packings it tries; past that it keeps the largest packing found so far.
MAX_SEARCH = 1_000_000


def link_units(graph: Any, hosts: Sequence[Any]) -> np.ndarray:
    """``[h, h]`` capacity in units of the direct link from ``hosts[i]`` to ``hosts[j]`` (0 if
    none): the edge's ``links`` attribute, else its bandwidth over the smallest bandwidth of a
    direct link between two of ``hosts`` (rounded, at least 1).

    Examples:
        >>> from commsim.topology import hybrid_cube_mesh
        >>> u = link_units(hybrid_cube_mesh(pcie=False), range(8))
        >>> u.sum(axis=1).tolist()  # six NVLinks out of every GPU
        [6, 6, 6, 6, 6, 6, 6, 6]
    """
    hosts = list(hosts)
    index = {h: i for i, h in enumerate(hosts)}
    edges = [(index[u], index[v], d) for u, v, d in graph.edges(hosts, data=True)
             if u in index and v in index and u != v]  # fmt: skip
    units = np.zeros((len(hosts), len(hosts)), dtype=np.int64)
    if not edges:
        return units
    smallest = min(float(d.get("bandwidth", 1.0)) for _, _, d in edges)
    for i, j, d in edges:
        n = d.get("links")
        if n is None:
            n = max(1, round(float(d.get("bandwidth", 1.0)) / smallest))
        units[i, j] = units[j, i] = int(n)
    return units


def _cycles(units: np.ndarray) -> list[tuple[int, ...]]:
    """Every directed Hamiltonian cycle through vertex 0 of the graph ``units > 0``."""
    p = len(units)
    nbrs = [np.flatnonzero(units[u]).tolist() for u in range(p)]
    out: list[tuple[int, ...]] = []
    path, seen = [0], [False] * p
    seen[0] = True

    def extend() -> None:
        u = path[-1]
        if len(path) == p:
            if units[u, 0] > 0:
                out.append(tuple(path))
                if len(out) > MAX_CYCLES:
                    raise ParameterError(
                        f"ring packing: more than {MAX_CYCLES:,} rings to choose from on "
                        f"{p} hosts; give the rings (rings=...) or use fewer hosts"
                    )
            return
        for v in nbrs[u]:
            if not seen[v]:
                seen[v] = True
                path.append(v)
                extend()
                path.pop()
                seen[v] = False

    extend()
    return out


def pack_rings(graph: Any, hosts: Sequence[Any]) -> tuple[tuple[int, ...], ...]:
    """The most directed rings over ``hosts`` (positions ``0..h-1`` of the list) that fit in the
    direct links' capacity (module docstring); ``()`` if there is no ring of direct links.

    Raises:
        ParameterError: more than :data:`MAX_PACKING_HOSTS` hosts, or too many rings to search.

    Examples:
        >>> from commsim.topology import hybrid_cube_mesh
        >>> len(pack_rings(hybrid_cube_mesh(pcie=False), range(8)))  # every NVLink, both ways
        6
        >>> pack_rings(hybrid_cube_mesh([0, 1, 2, 3], pcie=False), range(4))[:2]
        ((0, 1, 2, 3), (0, 1, 3, 2))
    """
    hosts = list(hosts)
    p = len(hosts)
    if p > MAX_PACKING_HOSTS:
        raise ParameterError(
            f"ring packing searches at most {MAX_PACKING_HOSTS} hosts, got {p}: give the rings "
            "(rings=...) or use channels"
        )
    if p < 2:
        return ()
    units = link_units(graph, hosts)
    cycles = _cycles(units)
    if not cycles:
        return ()
    edges = [(np.array(c), np.roll(np.array(c), -1)) for c in cycles]
    limit = int(units.sum(axis=1).min())
    best: list[int] = []
    chosen: list[int] = []
    free = units.copy()
    tries = 0

    def search(start: int) -> bool:
        nonlocal best, tries
        tries += 1
        if tries > MAX_SEARCH:
            return True  # keep what was found: every packing found is valid, maybe not maximal
        if len(chosen) > len(best):
            best = list(chosen)
            if len(best) == limit:
                return True
        for i in range(start, len(cycles)):
            a, b = edges[i]
            if (free[a, b] > 0).all():
                free[a, b] -= 1
                chosen.append(i)
                done = search(i)  # a ring may be used again where capacity allows
                chosen.pop()
                free[a, b] += 1
                if done:
                    return True
        return False

    search(0)
    return tuple(cycles[i] for i in best)
