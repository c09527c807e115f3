r"""The DGX-1 (V100) hybrid cube-mesh: eight GPUs, six NVLinks each, PCIe between the rest.

Each V100 has six NVLink 2.0 links of 25 GB/s per direction; in a DGX-1 they join the eight
GPUs in a *hybrid cube-mesh*: two fully connected quads {0, 1, 2, 3} and {4, 5, 6, 7} whose
GPUs are also joined to their counterpart in the other quad, with some pairs doubled (two
links, 50 GB/s). :data:`DGX1_NVLINKS` is the link count per GPU pair (msccl-tools'
``topologies/nvidia.py``, which agrees with NVIDIA's DGX-1 whitepaper figure); every GPU has
six. An undirected edge ``(i, j)`` of class ``"nvlink"`` carries ``links × bandwidth``.

PCIe (``pcie=True``): each pair of GPUs ``(2k, 2k+1)`` sits behind PCIe switch ``("plx", k)``,
switches 0 and 1 on CPU socket 0, 2 and 3 on socket 1 (``("cpu", s)``), the sockets joined by
QPI: links ``"pcie"`` (GPU–switch and switch–CPU, PCIe 3.0 x16) and ``"qpi"``. Switches forward;
GPUs do not, so a message between GPUs without an NVLink goes over PCIe. With ``pcie=False``
the graph is NVLink only and GPUs forward traffic to one another (the graph ForestColl, Blink
and the issue's numbers use).

``gpus`` keeps a subset of the GPUs (a partial allocation, Blink's case): the others and their
links are gone, and so are PCIe switches and sockets without a kept GPU below them. Hosts are
numbered ``0..k-1`` in the order of ``gpus`` (sorted), each with node attributes ``gpu`` (its
DGX-1 index) and ``node = 0``.

References:
    NVIDIA, "NVIDIA DGX-1 With Tesla V100 System Architecture", WP-08437-002, 2017 (the
    hybrid cube-mesh, Figure 2; PCIe switches and sockets).
    microsoft/msccl-tools, ``msccl/topologies/nvidia.py`` (``dgx1()``: the link matrix).
    G. Wang et al., "Blink: Fast and Generic Collectives for Distributed ML", MLSys 2020
    (partial allocations of a DGX-1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from commsim._lazy import lazy_module
from commsim.errors import ParameterError
from commsim.topology._attributes import as_bandwidth, as_latency

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")

__all__ = ["DGX1_NVLINKS", "hybrid_cube_mesh"]

#: NVLinks between DGX-1 GPUs ``i`` and ``j`` (symmetric, six per GPU)
DGX1_NVLINKS = np.array(
    [
        [0, 2, 1, 1, 2, 0, 0, 0],
        [2, 0, 1, 2, 0, 1, 0, 0],
        [1, 1, 0, 2, 0, 0, 2, 0],
        [1, 2, 2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2, 1, 1],
        [0, 1, 0, 0, 2, 0, 1, 2],
        [0, 0, 2, 0, 1, 1, 0, 2],
        [0, 0, 0, 1, 1, 2, 2, 0],
    ],
    dtype=np.int64,
)


def _check_gpus(gpus: Sequence[int] | None) -> list[int]:
    if gpus is None:
        return list(range(8))
    out = sorted({int(g) for g in gpus})
    bad = [g for g in out if not 0 <= g < 8]
    if bad or not out:
        raise ParameterError(
            f"a DGX-1 has GPUs 0..7; got {bad[0] if bad else 'no GPU'}: give a subset of 0..7"
        )
    return out


def hybrid_cube_mesh(
    gpus: Sequence[int] | None = None,
    *,
    bandwidth: float | str = "25GB/s",
    latency: float | str = "0.7us",
    pcie: bool = True,
    pcie_bandwidth: float | str = "15.75GB/s",
    pcie_latency: float | str = "1us",
    qpi_bandwidth: float | str = "38.4GB/s",
    qpi_latency: float | str = "1us",
) -> nx.Graph:
    """A DGX-1's GPUs (``gpus``: a subset of 0..7, default all) on NVLink, and PCIe unless
    ``pcie=False`` (module docstring); ``bandwidth`` is one NVLink's, per direction.

    Examples:
        >>> g = hybrid_cube_mesh(pcie=False)
        >>> g.number_of_nodes(), g.number_of_edges()  # 24 NVLinks on 16 GPU pairs
        (8, 16)
        >>> sorted(d for _, d in g.degree(weight="links"))  # six NVLinks per GPU
        [6, 6, 6, 6, 6, 6, 6, 6]
        >>> hybrid_cube_mesh([0, 1, 2, 3]).number_of_nodes()  # 4 GPUs, 2 PCIe switches, 1 CPU
        7
    """
    keep = _check_gpus(gpus)
    bw, lat = as_bandwidth(bandwidth), as_latency(latency)
    name = "dgx1-v100" if len(keep) == 8 else f"dgx1-v100[{','.join(map(str, keep))}]"
    g = nx.Graph(name=name)
    for h, gpu in enumerate(keep):
        g.add_node(h, kind="host", gpu=gpu, node=0)
    index = {gpu: h for h, gpu in enumerate(keep)}
    for a, b in zip(*np.nonzero(np.triu(DGX1_NVLINKS)), strict=True):
        if int(a) in index and int(b) in index:
            links = int(DGX1_NVLINKS[a, b])
            g.add_edge(
                index[int(a)], index[int(b)], bandwidth=links * bw, latency=lat, kind="nvlink",
                links=links,
            )  # fmt: skip
    if pcie:
        pbw, plat = as_bandwidth(pcie_bandwidth), as_latency(pcie_latency)
        for gpu in keep:
            plx, cpu = ("plx", gpu // 2), ("cpu", gpu // 4)
            g.add_node(plx, kind="switch")
            g.add_node(cpu, kind="switch")
            g.add_edge(index[gpu], plx, bandwidth=pbw, latency=plat, kind="pcie")
            g.add_edge(plx, cpu, bandwidth=pbw, latency=plat, kind="pcie")
        if g.has_node(("cpu", 0)) and g.has_node(("cpu", 1)):
            g.add_edge(
                ("cpu", 0), ("cpu", 1), bandwidth=as_bandwidth(qpi_bandwidth),
                latency=as_latency(qpi_latency), kind="qpi",
            )  # fmt: skip
    elif len(keep) > 1 and not nx.is_connected(g):
        raise ParameterError(
            f"GPUs {','.join(map(str, keep))} of a DGX-1 are not connected by NVLink alone: "
            "keep PCIe (pcie=True) or choose connected GPUs"
        )
    return g
