"""Basic generators: a crossbar switch, a ring, a torus, a hypercube.

Every generator (networkx style) takes the size first and the keywords ``bandwidth=`` (bytes/s
per direction, or ``"400Gb/s"``) and ``latency=`` (seconds per link, or ``"500ns"``), and returns
an ``nx.Graph`` whose hosts are ``0..n-1`` and whose edges carry ``bandwidth``, ``latency`` and
``kind``. The defaults (25 GB/s, 1 µs per link) make a host-to-host message through one switch
cost what the default :class:`commsim.models.Hockney` says: 2 µs and 1/(25 GB/s) per byte.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from commsim._lazy import lazy_module
from commsim.errors import ParameterError
from commsim.topology._attributes import as_bandwidth, as_latency

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")

__all__ = ["DEFAULT_BANDWIDTH", "DEFAULT_LATENCY", "hypercube", "ring", "switch", "torus"]

DEFAULT_BANDWIDTH = 25e9
DEFAULT_LATENCY = 1e-6


#: The most hosts a generator builds: a networkx graph holds ~1 KiB per node and edge, so a
#: million hosts is already gigabytes (the models handle 16,384 hosts in seconds).
MAX_HOSTS = 2**20


def _count(n: Any, what: str, minimum: int = 1) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < minimum:
        raise ParameterError(f"{what} must be an integer >= {minimum}, got {n!r}")
    return int(n)


def check_hosts(n: int, what: str) -> int:
    """``n`` hosts, refused past :data:`MAX_HOSTS` with one line."""
    if n > MAX_HOSTS:
        raise ParameterError(
            f"{what}: {n:,} hosts is more than {MAX_HOSTS:,} (a graph that large would not fit "
            "in memory)"
        )
    return n


def switch(
    n: int,
    *,
    bandwidth: float | str = DEFAULT_BANDWIDTH,
    latency: float | str = DEFAULT_LATENCY,
    kind: str = "link",
) -> nx.Graph:
    """``n`` hosts on one non-blocking crossbar switch (node ``"switch"``).

    Every host has one full-duplex link to the switch, so any permutation of messages runs at
    full bandwidth: a message crosses two links (latency ``2 × latency``).

    Examples:
        >>> g = switch(8)
        >>> g.number_of_nodes(), g.number_of_edges()
        (9, 8)
    """
    n = check_hosts(_count(n, "switch: the number of hosts"), "switch")
    bw, lat = as_bandwidth(bandwidth), as_latency(latency)
    g = nx.Graph(name=f"switch({n})", bisection_bandwidth=n // 2 * bw)
    g.add_nodes_from(range(n), kind="host")
    g.add_node("switch", kind="switch")
    g.add_edges_from(((i, "switch") for i in range(n)), bandwidth=bw, latency=lat, kind=kind)
    return g


def torus(
    dims: Sequence[int] | int,
    *,
    bandwidth: float | str = DEFAULT_BANDWIDTH,
    latency: float | str = DEFAULT_LATENCY,
    kind: str = "link",
    wrap: bool | Sequence[bool] = True,
) -> nx.Graph:
    """A direct network: hosts on a ``d``-dimensional torus, joined to their grid neighbours.

    Host ``i`` has mixed-radix coordinates over ``dims`` (last dimension fastest). Along a
    dimension of size ``k >= 3`` each host has two links (wrap-around included); of size 2, one
    (a hypercube dimension); of size 1, none. ``wrap`` (one flag, or one per dimension) says
    which dimensions have the wrap-around link: a dimension without it is a line (a mesh
    dimension, as TPU slices whose size the vendor does not wrap). Routed dimension by
    dimension, the short way round where the dimension wraps.

    Examples:
        >>> g = torus((4, 4))
        >>> g.number_of_nodes(), g.number_of_edges(), {d for _, d in g.degree()}
        (16, 32, {4})
        >>> torus((2, 2, 2)).number_of_edges()  # the 3-cube
        12
        >>> torus((4, 3), wrap=(True, False)).number_of_edges()  # 3 rings of 4, 4 lines of 3
        20
    """
    dims_t = (dims,) if isinstance(dims, int | np.integer) else tuple(dims)
    if not dims_t:
        raise ParameterError("torus: dims must name at least one dimension")
    dims_t = tuple(_count(k, "torus: every dimension") for k in dims_t)
    wraps = _wraps(wrap, len(dims_t))
    bw, lat = as_bandwidth(bandwidth), as_latency(latency)
    n = check_hosts(math.prod(dims_t), "torus")
    record = ("torus", dims_t) if all(wraps) else ("torus", dims_t, wraps)
    g = nx.Graph(name=f"torus({'x'.join(map(str, dims_t))})", routing=record)
    if max(dims_t) % 2 == 0 or sum(k > 1 for k in dims_t) <= 1:  # else an odd cut: not stated
        g.graph["bisection_bandwidth"] = _torus_bisection(dims_t, wraps, bw)
    g.add_nodes_from(range(n), kind="host")
    idx = np.arange(n)
    stride = 1
    for k, w in zip(reversed(dims_t), reversed(wraps), strict=True):
        if k >= 2:
            c = (idx // stride) % k
            keep = c + 1 < k if not w else np.ones(n, dtype=bool)
            nxt = idx + (((c + 1) % k) - c) * stride
            pairs = zip(idx[keep].tolist(), nxt[keep].tolist(), strict=True)
            if k == 2:
                pairs = ((a, b) for a, b in pairs if a < b)
            g.add_edges_from(pairs, bandwidth=bw, latency=lat, kind=kind)
        stride *= k
    return g


def _wraps(wrap: bool | Sequence[bool], nd: int) -> tuple[bool, ...]:
    """One wrap-around flag per dimension, from one flag or a sequence of ``nd``."""
    if isinstance(wrap, bool | np.bool_):
        return (bool(wrap),) * nd
    flags = tuple(wrap) if isinstance(wrap, Sequence) and not isinstance(wrap, str) else None
    if flags is None or len(flags) != nd or not all(isinstance(f, bool | np.bool_) for f in flags):
        raise ParameterError(
            f"torus: wrap must be true, false or one flag per dimension ({nd}), got {wrap!r}"
        )
    return tuple(bool(f) for f in flags)


def _torus_bisection(dims: tuple[int, ...], wraps: tuple[bool, ...], bw: float) -> float:
    """Cutting a dimension ``k`` in half cuts ``n/k`` lines: 2 links each on a ring of ``k > 2``,
    1 on a line or a pair; the cheapest even dimension (the longest one when all wrap)."""
    n = math.prod(dims)
    if max(dims) == 1:
        return 0.0
    cuts = [
        (n // k) * (2 if w and k > 2 else 1)
        for k, w in zip(dims, wraps, strict=True)
        if k > 1 and (k % 2 == 0 or sum(d > 1 for d in dims) == 1)
    ]
    return min(cuts) * bw


def ring(
    n: int,
    *,
    bandwidth: float | str = DEFAULT_BANDWIDTH,
    latency: float | str = DEFAULT_LATENCY,
    kind: str = "link",
) -> nx.Graph:
    """``n`` hosts in a cycle, each joined to the next: the 1-D torus.

    Examples:
        >>> g = ring(6)
        >>> g.number_of_edges(), nx.diameter(g)
        (6, 3)
    """
    _count(n, "ring: the number of hosts")
    g = torus((n,), bandwidth=bandwidth, latency=latency, kind=kind)
    g.graph["name"] = f"ring({n})"
    return g


def hypercube(
    dim: int,
    *,
    bandwidth: float | str = DEFAULT_BANDWIDTH,
    latency: float | str = DEFAULT_LATENCY,
    kind: str = "link",
) -> nx.Graph:
    """``2**dim`` hosts, host ``i`` joined to ``i xor 2**k`` for each ``k``: a torus of 2s.

    Examples:
        >>> g = hypercube(4)
        >>> g.number_of_nodes(), g.number_of_edges(), nx.diameter(g)
        (16, 32, 4)
    """
    dim = _count(dim, "hypercube: the dimension", minimum=0)
    g = torus((2,) * dim if dim else (1,), bandwidth=bandwidth, latency=latency, kind=kind)
    g.graph["name"] = f"hypercube({dim})"
    return g
