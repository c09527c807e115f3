"""A hypothetical cluster: servers of GPUs, their links, the fabric between them, the placement.

A :class:`Cluster` is what a preset (``dgx-h100:128``) or a TOML file describes; its graph is a
:mod:`commsim.topology` graph, so the topology model and ``commsim topology`` take it as is.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from commsim import units
from commsim._lazy import lazy_module
from commsim.errors import ParameterError
from commsim.topology import Network, place, ranks_per_server

if TYPE_CHECKING:
    import networkx as nx
else:
    nx = lazy_module("networkx")

__all__ = ["Cluster", "LinkClass", "LinkProfile"]


@dataclasses.dataclass(frozen=True)
class LinkClass:
    """A class of links: ``bandwidth`` bytes/s per direction and ``latency`` seconds per link;
    ``efficiency``: the share of that rate a collective library's kernels reach on it (1: the
    line rate; NCCL rates an H100 NVLink at 20.6 of its 25 GB/s, docs/library.md)."""

    name: str
    bandwidth: float
    latency: float
    efficiency: float = 1.0

    def describe(self) -> str:
        driven = f" (the library reaches {self.efficiency:.1%})" if self.efficiency != 1 else ""
        return (
            f"{self.name}: {units.format_bandwidth(self.bandwidth)}, "
            f"{units.format_time(self.latency)}{driven}"
        )


@dataclasses.dataclass(frozen=True, eq=False)
class LinkProfile:
    r"""A measured rate profile of a link class: message size (bytes) → bandwidth (bytes/s).

    The rate a message of ``n`` bytes reaches on one link of the class, as a bandwidth test
    measures it with messages back to back (``osu_bw``, nccl-tests' ``sendrecv_perf``): the
    topology model caps a message's rate on every link of the class at :meth:`rate` of its size
    (the link's latency is still added per message). Between the measured sizes the rate is
    interpolated linearly in :math:`\log_2 n`; outside them it stays at the nearest end
    (no extrapolation). ``link_class`` is the class's name in the graph.

    Examples:
        >>> prof = LinkProfile("rail", np.array([8192.0, 2**17]), np.array([6e9, 40e9]))
        >>> prof.rate(np.array([1024.0, 8192, 2**15, 2**17, 2**30])).tolist()
        [6000000000.0, 6000000000.0, 23000000000.0, 40000000000.0, 40000000000.0]
    """

    link_class: str
    sizes: np.ndarray
    bandwidth: np.ndarray

    def rate(self, nbytes: np.ndarray) -> np.ndarray:
        """The measured rate at ``nbytes`` (interpolated in log size, clamped at the ends)."""
        n = np.maximum(np.asarray(nbytes, dtype=np.float64), 1.0)
        return np.interp(np.log2(n), np.log2(self.sizes), self.bandwidth)

    def to_dict(self) -> dict[str, Any]:
        return {
            "link_class": self.link_class,
            "sizes": self.sizes.astype(np.int64).tolist(),
            "bandwidth_Bps": self.bandwidth.tolist(),
        }


@dataclasses.dataclass(frozen=True, eq=False)
class Cluster:
    """A cluster to predict on.

    Attributes:
        name: the preset spec or file it came from.
        nodes: servers; ``gpus_per_node``: GPUs (hosts, one rank each) per server.
        graph_of: the topology graph of ``nodes`` servers of this cluster's kind, named as the
            cluster (its :attr:`graph` is ``graph_of(nodes)``, built on first use).
        placement: the default placement of ranks (``"linear"``: a server's GPUs consecutive).
        link_classes: the link classes by name, as configured.
        profiles: measured rate profiles by link class name (:class:`LinkProfile`): the
            topology model caps a message's rate on each link of the class at the measured
            rate for its size.
        sources: where the numbers come from (documented in ``docs/clusters.md``).
        reduction: bytes/s at which a GPU reduces received data into its buffer (the topology
            model's γ = 1 / reduction).
        launch: the collective library's per-call cost, seconds (kernel launch and the ranks'
            synchronisation), paid once per collective call (0: none, as MPI on CPUs is
            modelled; :mod:`commsim.models._library`).
        reduction_overlap: whether a received message is reduced while it arrives (GPU
            reduce-copy kernels: the larger of transfer and reduction is charged, not their
            sum); ``False`` keeps the serial γ of CPU/MPI reductions.
        channel_bandwidth: the library's per-channel rate cap, bytes/s (``None``: no cap); a
            schedule on C channels (``--channels C``) then moves at most C times it per rank.
        nvls: whether each server's NVSwitch reduces (NVLink SHARP; its graph's switches carry
            ``reduce``), so in-network rows (``nvls``, ``nvls_tree``) run on it.
        nvls_efficiency: the share of its NVLinks' rate (as the library drives them) a message
            to or from a reducing NVSwitch reaches (NCCL's ``nvlsEfficiency``: 0.85 on Hopper,
            0.74 on Blackwell; 1 where no switch reduces; docs/library.md).
        fitted_up_to: a fitted file's (``commsim calibrate --from-nccl-tests -o``): the log's
            rows up to this many bytes were fitted, so ``validate`` holds out the larger ones
            (``None``: not fitted; every row is a prediction).
        sharp: whether the fabric's leaves reduce (InfiniBand SHARP: the switches a GPU's NIC
            joins carry ``reduce = "fabric"``), so fabric in-network rows (``collnet_direct``)
            run on it.
        sharp_efficiency: the share of its links' rate a message to or from a SHARP switch
            reaches (NCCL's ``.85`` on CollNetDirect from Hopper on; 1 without ``sharp``).
    """

    name: str
    nodes: int
    gpus_per_node: int
    graph_of: Callable[[int], nx.Graph] = dataclasses.field(repr=False)
    placement: str = "linear"
    link_classes: Mapping[str, LinkClass] = dataclasses.field(default_factory=dict)
    profiles: Mapping[str, LinkProfile] = dataclasses.field(default_factory=dict)
    sources: str = ""
    reduction: float = 100e9
    launch: float = 0.0
    reduction_overlap: bool = False
    channel_bandwidth: float | None = None
    #: fabrics on which GPU 0's routes to GPU 1 and to GPU 0 of server 1 are the same for any
    #: number of servers (``rail_optimized``: the two servers share a scalable unit, or both
    #: reach the spines by the same links; ``switch``: one switch), so a two-server instance
    #: gives :meth:`class_costs`; set by the builder (:func:`commsim.clusters.build_cluster`)
    two_servers_suffice: bool = False
    nvls: bool = False
    nvls_efficiency: float = 1.0
    fitted_up_to: int | None = None
    sharp: bool = False
    sharp_efficiency: float = 1.0

    @property
    def gamma(self) -> float:
        """Seconds per byte reduced (the models' γ)."""
        return 1.0 / self.reduction

    @property
    def ngpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def ranks_per_node(self) -> int:
        """What a hierarchical algorithm's ``ranks_per_node`` is on this cluster."""
        return self.gpus_per_node

    @property
    def link_efficiency(self) -> dict[str, float]:
        """The link classes the library drives below their line rate: class name → the share
        it reaches (:attr:`LinkClass.efficiency`; classes at 1 left out)."""
        return {k: c.efficiency for k, c in self.link_classes.items() if c.efficiency != 1}

    @functools.cached_property
    def graph(self) -> nx.Graph:
        """The topology graph (hosts ``0..nodes*gpus_per_node-1``, server-major), built on
        first use."""
        return self.graph_of(self.nodes)

    @functools.cached_property
    def network(self) -> Network:
        """The graph checked and compiled (built once)."""
        return Network(self.graph)

    def class_costs(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """``((α, β) intra, (α, β) inter)``: the summed latency and the inverse bottleneck
        bandwidth of GPU 0's route to GPU 1 (inside a server; to GPU 0 of server 1 when a
        server has one GPU) and to GPU 0 of server 1, each link at the rate the library drives
        it (:attr:`link_efficiency`): what Hockney per link class takes from a cluster
        (:class:`commsim.models.TwoLevelHockney`). Where :attr:`two_servers_suffice`, they are
        read off a graph of two servers, whatever :attr:`nodes`.

        Examples:
            >>> from commsim.clusters import cluster
            >>> (ai, bi), (ae, be) = cluster("dgx-h100:2048").class_costs()
            >>> round(ai * 1e6, 3), round(1 / bi / 1e9, 1), round(ae * 1e6, 3), round(1 / be / 1e9)
            (1.0, 370.8, 2.0, 50)
        """
        if self.nodes < 2:
            raise ParameterError(f"{self.name}: per-class costs need two or more servers")
        small = self.two_servers_suffice and self.nodes > 2
        net = Network(self.graph_of(2)) if small else self.network
        g = self.gpus_per_node
        driven = net.driven(self.link_efficiency).bandwidth

        def alpha_beta(a: int, b: int) -> tuple[float, float]:
            links = net.route(a, b)
            bw = float(driven[links].min())
            return float(net.latency[links].sum()), 0.0 if bw == float("inf") else 1 / bw

        return alpha_beta(0, 1 if g > 1 else g), alpha_beta(0, g)

    def ranks_per_server(
        self, nranks: int, placement: str | Sequence[int] | None = None
    ) -> int | None:
        """The ``ranks_per_node`` a hierarchical algorithm gets for ``nranks`` ranks placed by
        ``placement`` (default: the cluster's): the declared :attr:`ranks_per_node` under a
        ``"linear"`` placement (a server's GPUs consecutive, even when ``nranks`` fills only
        part of one), otherwise what the placement gives
        (:func:`commsim.topology.ranks_per_server`), ``None`` if it does not keep a server's
        ranks together.

        Examples:
            >>> from commsim.clusters import cluster
            >>> c = cluster("dgx-h100:2")
            >>> c.ranks_per_server(16), c.ranks_per_server(4), c.ranks_per_server(16, "round_robin")
            (8, 8, None)
        """
        placement = self.placement if placement is None else placement
        if isinstance(placement, str) and placement == "linear":
            return self.ranks_per_node
        return ranks_per_server(self.network, place(self.network, nranks, placement))

    def topology_inputs(
        self, placement: str | Sequence[int] | None = None, contention: str = "bottleneck"
    ) -> dict[str, Any]:
        """The keyword arguments of :class:`commsim.models.Topology` on this cluster: its compiled
        ``network``, ``placement`` (default: the cluster's), ``contention``, γ from its
        reduction rate, and the collective library's ``launch``, ``reduction_overlap``,
        ``channel_bandwidth``, ``link_efficiency`` and ``switch_efficiency`` (its
        :attr:`nvls_efficiency`), ``fabric_efficiency`` (its :attr:`sharp_efficiency`), and
        its measured ``link_profiles`` (:attr:`profiles`). ``commsim.tuner.cluster_model``
        builds the model from them (this package sits below the models and does not import
        them).

        Examples:
            >>> from commsim.clusters import cluster
            >>> inputs = cluster("dgx-h100:2").topology_inputs()
            >>> inputs["network"].nhosts, inputs["placement"], inputs["contention"], inputs["gamma"]
            (16, 'linear', 'bottleneck', 1e-11)
        """
        return {
            "network": self.network,
            "placement": self.placement if placement is None else placement,
            "contention": contention,
            "gamma": self.gamma,
            "launch": self.launch,
            "reduction_overlap": self.reduction_overlap,
            "channel_bandwidth": self.channel_bandwidth,
            "link_efficiency": self.link_efficiency,
            "switch_efficiency": self.nvls_efficiency,
            "fabric_efficiency": self.sharp_efficiency,
            "link_profiles": dict(self.profiles) or None,
        }

    def describe(self) -> str:
        classes = "; ".join(c.describe() for c in self.link_classes.values())
        return f"{self.name}: {self.nodes} x {self.gpus_per_node} GPUs ({classes})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "placement": self.placement,
            "reduction_Bps": self.reduction,
            "launch_s": self.launch,
            "reduction_overlap": self.reduction_overlap,
            "channel_bandwidth_Bps": self.channel_bandwidth,
            "nvls_efficiency": self.nvls_efficiency,
            "sharp": self.sharp,
            "sharp_efficiency": self.sharp_efficiency,
            "link_classes": {
                k: {
                    "bandwidth_Bps": c.bandwidth,
                    "latency_s": c.latency,
                    "efficiency": c.efficiency,
                }
                for k, c in self.link_classes.items()
            },
        }
