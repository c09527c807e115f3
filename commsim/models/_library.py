r"""The collective library's layer: what a library such as NCCL adds to a schedule's messages.

A schedule says which bytes move where; the network model says how long each message takes on
its links. Between the two sits the library that carries the schedule, and it costs time of its
own (``docs/library.md``):

* **a per-call cost** (``launch``): launching the collective's kernel and synchronising the
  ranks before the first message, paid once per call, not per message. Every rank's clock
  starts there:

  .. math::

      c_r(0) = \text{skew}_r + t_\text{launch}.

  It is the "launch" part of a prediction's breakdown
  (:attr:`~commsim.models.NetworkUsage.part_names`), beside "latency", "reduction" and the
  link classes.

* **a reduction overlapped with its transfer** (``reduction_overlap``): a GPU's reduce-copy
  kernel adds each chunk of a received message into the buffer while later chunks are still
  arriving, so the receiver of :math:`b` bytes, of which :math:`b_\text{red}` are reduced, is
  done at

  .. math::

      e_\text{red} = s + L_m + \max\left(\frac{b}{R_m},\; b_\text{red}\,\gamma\right)
                   = e + \max\left(0,\; b_\text{red}\,\gamma - \frac{b}{R_m}\right)

  instead of :math:`e + b_\text{red}\gamma` (the serial rule, kept for CPU/MPI reductions,
  which start after the receive completes). Only the excess of the reduction over the
  transfer is exposed (:func:`reduction_exposed`); it is the "reduction" part of the
  breakdown. A rank's local reductions (no message to hide behind) stay serial.

* **a protocol** (:class:`Protocol`: NCCL's LL, LL128 and Simple): how each message is carried.
  A protocol has its own per-call cost (replacing ``launch``), a per-message latency (the time
  of one step of NCCL's ring, wire included; a message takes the larger of it and its path's
  latency: :func:`protocol_latency`) and a bandwidth efficiency :math:`\eta` (the payload's share
  of what crosses a link: every link carries the message at :math:`\eta` times its rate):

  .. math::

      e = s + \max(L_m, h_p) + \frac{b}{\eta_p R_m}, \qquad
      h_p = \begin{cases} h_p^\text{intra} & \text{within a server} \\
                          h_p^\text{inter} & \text{across servers.} \end{cases}

  :data:`PROTOCOLS` holds NCCL's numbers for its ring algorithm (``tuning.cc``: ``baseLatencies``,
  ``hwLatencies`` of NVLink and of the network, the bandwidth factors 0.5 for LL and 0.92 for
  LL128); :class:`~commsim.models.ProtocolChoice` picks the fastest per size, as NCCL's tuner
  picks the protocol of least predicted time.

* **a per-channel rate cap** (``channel_bandwidth``): one channel of a library moves at most
  so many bytes/s however fast its links (NCCL: a thread block per channel; its topology search
  tries per-channel speeds up to 60 GB/s within an H100 server, ``sm90SpeedArrayIntra`` in
  ``src/graph/search.cc``). Each message then crosses a private link of that rate besides its
  route (:func:`with_channel_cap`), so every contention mode shares the rest as before.

* **links driven below their line rate** (``link_efficiency``): a library's copy kernels do not
  reach a link's spec rate. NCCL's own model rates an NVLink at ``SM90_NVLINK_BW`` = 20.6 GB/s
  on Hopper against the 25 GB/s per direction of its spec (``src/graph/topo.h``), and a
  measured H100 ring without NVLS reaches 370 GB/s busbw over 18 links (NVIDIA/nccl-tests#212).
  Per link class :math:`k` a share :math:`\epsilon_k \le 1`: the model times every message on
  links of rate :math:`\epsilon_k B_l` (:meth:`commsim.topology.Network.driven`), while the bounds keep the line
  rates :math:`B_l` (no schedule beats the hardware).

* **in-network reduction below the links' rate** (``switch_efficiency``, and
  ``fabric_efficiency`` for the switches between servers): a message to or from a reducing
  switch moves at that share of its route's rate (NVLS, a server's NVSwitch: NCCL's
  ``nvlsEfficiency``, 0.85 on Hopper, 0.74 on Blackwell; CollNet over InfiniBand SHARP, a
  fabric's leaf: NCCL's factor ``.85`` on its CollNetDirect bandwidth from compute capability
  9.0 on; ``src/graph/tuning.cc``), on top of the links' own (:func:`message_efficiency`):

  .. math::

      e = s + L_m + \frac{b}{\eta_p\,\eta_\text{sw}(m)\,R_m}, \qquad
      \eta_\text{sw}(m) = \begin{cases} \eta_\text{NVLS} & \text{$m$ starts or ends at a
      reducing switch} \\ 1 & \text{otherwise.} \end{cases}

All of them are parameters of the topology model (:class:`~commsim.models.Topology`'s
``launch=``, ``reduction_overlap=``, ``protocol=``, ``channel_bandwidth=``,
``link_efficiency=``, ``switch_efficiency=``, read by its timing through
:class:`~commsim.models._network_params.NetworkParams`). A cluster sets all but the protocol
from its fields (:mod:`commsim.clusters`: ``[intra] efficiency``, ``nvls_efficiency``); the
protocol is chosen per prediction (``--protocol``). Models without a cluster keep every part
off, so their results do not change.

References:
    NVIDIA NCCL, ``src/graph/tuning.cc`` (commit 5067397, 2026): ``baseLatencies``, the
    per-call latency of each algorithm and protocol, ``hwLatencies`` per step, the protocols'
    bandwidth factors, ``nvlsEfficiency``; ``src/graph/topo.h``: ``SM80_NVLINK_BW``,
    ``SM90_NVLINK_BW``, ``SM100_NVLINK_BW``; ``src/graph/search.cc``: per-channel speeds; ``src/device/prims_simple.h``
    (``recvReduceCopy``, ``recvReduceSend``): the primitives that reduce a chunk as it arrives.

See Also:
    :class:`commsim.models.Topology`: the model these parameters shape.
    :func:`commsim.algorithms.channels`: a schedule as C copies on NCCL's channels.
    :class:`commsim.models.ProtocolChoice`: the fastest protocol per size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from commsim import units
from commsim.errors import ParameterError
from commsim.topology import as_share

__all__ = [
    "PROTOCOLS",
    "Protocol",
    "as_protocol",
    "as_shares",
    "call_cost",
    "launch_clock",
    "message_efficiency",
    "protocol_latency",
    "reduction_exposed",
    "with_channel_cap",
]


@dataclasses.dataclass(frozen=True)
class Protocol:
    """How a library carries a message: NCCL's LL, LL128 or Simple.

    Attributes:
        name: ``"LL"``, ``"LL128"`` or ``"Simple"``.
        launch: the per-call cost with this protocol, seconds (NCCL's ``baseLatencies``).
        hop_intra: the latency of one message within a server, seconds (NCCL's
            ``hwLatencies`` of NVLink): a message takes the larger of it and its path's latency.
        hop_inter: the same across servers (NCCL's ``hwLatencies`` of the network).
        efficiency: the payload's share of a link's rate (LL: 8-byte lines of 4 bytes of data
            and a 4-byte flag, 0.5; LL128: 120 of 128 bytes, NCCL's factor 0.92; Simple: 1).
        switch_latency: ``(per call, per server level)``, seconds, for an in-network schedule
            on the servers' own switches (NVLS, NVLSTree): NCCL charges its latency per call,
            not per step (:func:`call_cost`); ``None``: the protocol does not carry one (NCCL
            offers NVLS with Simple only).
        fabric_latency: ``(inside a server, across the fabric, per GPU of a server)``,
            seconds, for an in-network schedule on the fabric's switches (CollNetDirect over
            InfiniBand SHARP), per call as NCCL charges it (:func:`call_cost`); ``None``: not
            carried (Simple only, as NCCL).
    """

    name: str
    launch: float
    hop_intra: float
    hop_inter: float
    efficiency: float
    switch_latency: tuple[float, float] | None = None
    fabric_latency: tuple[float, float, float] | None = None

    def carries(self, in_network: bool | str) -> bool:
        """Whether this protocol carries a schedule whose helpers sit on switches of that tier
        (``Schedule.in_network``: ``False``, ``True`` a server's, ``"fabric"`` between them):
        NCCL runs NVLS, NVLSTree and CollNet with Simple only.

        Examples:
            >>> PROTOCOLS["Simple"].carries("fabric"), PROTOCOLS["LL"].carries(True)
            (True, False)
        """
        if not in_network:
            return True
        latency = self.fabric_latency if in_network == "fabric" else self.switch_latency
        return latency is not None

    def describe(self) -> str:
        """E.g. ``LL (launch 6.60us, hop 600ns/2.70us, 50% of the link rate)``."""
        return (
            f"{self.name} (launch {units.format_time(self.launch)}, hop "
            f"{units.format_time(self.hop_intra)}/{units.format_time(self.hop_inter)}, "
            f"{self.efficiency:.0%} of the link rate)"
        )


#: NCCL's protocols as its ring algorithm's cost model has them (``src/graph/tuning.cc`` at
#: commit 5067397: ``baseLatencies`` Ring row, ``hwLatencies`` NVLINK and NET Ring rows, µs; the
#: bandwidth factors ``busBw * .5`` for LL and ``busBw * 0.92`` for LL128); Simple's
#: in-network latencies are ``hwLatencies`` NVLINK NVLS (25 µs) and NET NVLSTree (20.9 µs),
#: whose ``baseLatencies`` are 0, and for CollNetDirect NVLINK 3.7 µs, NET 31 µs and the
#: 0.4 µs "arity serialization" per GPU of a server that its latency formula adds.
PROTOCOLS: dict[str, Protocol] = {
    "LL": Protocol("LL", 6.6e-6, 0.6e-6, 2.7e-6, 0.5),
    "LL128": Protocol("LL128", 14.0e-6, 1.9e-6, 4.0e-6, 0.92),
    "Simple": Protocol(
        "Simple", 8.4e-6, 3.4e-6, 14.0e-6, 1.0, (25.0e-6, 20.9e-6), (3.7e-6, 31.0e-6, 0.4e-6)
    ),
}


def as_protocol(protocol: Protocol | str | None) -> Protocol | None:
    """A :class:`Protocol` from itself or its name (any case); ``None`` stays ``None``.

    Examples:
        >>> as_protocol("ll128").efficiency
        0.92
    """
    if protocol is None or isinstance(protocol, Protocol):
        return protocol
    names = {k.lower(): v for k, v in PROTOCOLS.items()}
    found = names.get(str(protocol).strip().lower())
    if found is None:
        raise ParameterError(f"unknown protocol {protocol!r}: use {', '.join(PROTOCOLS)} (or auto)")
    return found


def call_cost(
    protocol: Protocol | None,
    launch: float,
    in_network: bool | str,
    servers: int,
    per_server: int = 1,
) -> float:
    r"""The per-call cost of a schedule: ``launch`` without a protocol; the protocol's
    ``launch`` for an ordinary schedule; for an in-network one (helper ranks at reducing
    switches) NCCL's per-call latency of those algorithms, which stands for all of their steps
    (``tuning.cc``). On the servers' own switches (``in_network`` true: NVLS, NVLSTree;
    NVLS ``intraLat``, NVLSTree ``intraLat + 2 log2(nNodes) interLat``):

    .. math::

        t_\text{call} = h_\text{NVLS} + 2 \lfloor \log_2 S \rfloor\, h_\text{net},

    with ``S`` the servers the schedule spans; on the fabric's switches (``in_network ==
    "fabric"``: CollNetDirect over SHARP), with ``g`` GPUs per server (``per_server``):

    .. math::

        t_\text{call} = 2\,(\min(1, g - 1)\, h_\text{intra} + (g - 1)\, h_\text{arity})
        + h_\text{net}

    (the schedule's messages then take their paths' latencies only, :func:`protocol_latency` is
    not applied).

    Raises:
        ParameterError: an in-network schedule under a protocol that does not carry one (LL,
            LL128: NCCL runs NVLS with Simple only).

    Examples:
        >>> round(call_cost(PROTOCOLS["Simple"], 0.0, True, 2) * 1e6, 1)  # 25 + 2 x 20.9 µs
        66.8
        >>> round(call_cost(PROTOCOLS["Simple"], 6.6e-6, False, 2) * 1e6, 1)
        8.4
        >>> round(call_cost(PROTOCOLS["Simple"], 0.0, "fabric", 4, 8) * 1e6, 1)  # 2(3.7+2.8)+31
        44.0
    """
    if protocol is None:
        return launch
    if not in_network:
        return protocol.launch
    if not protocol.carries(in_network):
        raise ParameterError(
            f"protocol {protocol.name} does not carry an in-network schedule: NCCL runs NVLS, "
            "NVLSTree and CollNet with Simple only (--protocol Simple or auto)"
        )
    if in_network == "fabric" and protocol.fabric_latency is not None:
        intra, net, arity = protocol.fabric_latency
        g = max(int(per_server), 1)
        return 2 * (min(1, g - 1) * intra + (g - 1) * arity) + net
    assert protocol.switch_latency is not None  # carries() said so
    per_call, per_level = protocol.switch_latency
    return per_call + 2 * (max(int(servers), 1).bit_length() - 1) * per_level


def protocol_latency(
    latency: np.ndarray, same_server: np.ndarray, protocol: Protocol | None
) -> np.ndarray:
    """Messages' latencies under ``protocol``: the larger of each one's path ``latency`` and the
    protocol's per-message latency (within a server where ``same_server``, else across).

    Examples:
        >>> p = PROTOCOLS["LL"]
        >>> protocol_latency(np.array([1e-6, 0.2e-6]), np.array([True, False]), p).tolist()
        [1e-06, 2.7e-06]
    """
    if protocol is None:
        return latency
    hop = np.where(same_server, protocol.hop_intra, protocol.hop_inter)
    return np.maximum(latency, hop)


def launch_clock(clock: np.ndarray, launch: float) -> np.ndarray:
    """Clocks ``clock`` (``[ranks, sizes]``, each rank's start skew) after the per-call cost.

    Examples:
        >>> launch_clock(np.zeros((2, 1)), 5e-6)[:, 0].tolist()
        [5e-06, 5e-06]
    """
    return clock + launch if launch else clock


def reduction_exposed(reduction: np.ndarray, transfer: np.ndarray, overlap: bool) -> np.ndarray:
    """The part of a received message's reduction time charged after its transfer ends: all of
    it (serial), or its excess over the transfer time when the two overlap.

    Args:
        reduction: seconds to reduce the message's reduced bytes (:math:`b_\\text{red}\\gamma`).
        transfer: seconds its bytes took on the wire (:math:`b / R_m`).
        overlap: whether the receiver reduces while the message arrives.

    Examples:
        >>> reduction_exposed(np.array([3.0, 1.0]), np.array([2.0, 2.0]), True).tolist()
        [1.0, 0.0]
        >>> reduction_exposed(np.array([3.0, 1.0]), np.array([2.0, 2.0]), False).tolist()
        [3.0, 1.0]
    """
    if not overlap:
        return np.asarray(reduction, dtype=np.float64)
    return np.maximum(np.asarray(reduction, dtype=np.float64) - transfer, 0.0)


def with_channel_cap(
    indptr: np.ndarray,
    links: np.ndarray,
    bandwidth: np.ndarray,
    cap: float | np.ndarray | None,
    capped: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Routes (CSR ``indptr``/``links`` over links of ``bandwidth``) with a private link of rate
    ``cap`` appended to each route where ``capped`` (default: every route): what a per-channel
    rate cap does to a message, in the form every contention mode reads. ``cap`` may be one
    rate per route (a measured profile's, :mod:`commsim.models._link_profiles`), ``inf``
    where a route has no cap; ``cap=None`` returns the routes as they are.

    Examples:
        >>> ptr, lk, bw = with_channel_cap(
        ...     np.array([0, 1, 3]), np.array([0, 0, 1]), np.array([10.0, 20.0]), 4.0
        ... )
        >>> ptr.tolist(), lk.tolist(), bw.tolist()
        ([0, 2, 5], [0, 2, 0, 1, 3], [10.0, 20.0, 4.0, 4.0])
    """
    if cap is None:
        return indptr, links, bandwidth
    n, nlinks = len(indptr) - 1, len(bandwidth)
    lengths = np.diff(indptr)
    rate = np.broadcast_to(np.asarray(cap, dtype=np.float64), (n,))
    extra = np.ones(n, dtype=bool) if capped is None else capped.astype(bool)
    extra = (extra & np.isfinite(rate)).astype(np.int64)
    new_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths + extra, out=new_indptr[1:])
    new_links = np.empty(int(new_indptr[-1]), dtype=np.int64)
    shift = np.repeat(new_indptr[:-1] - indptr[:-1], lengths)
    new_links[np.arange(len(links)) + shift] = links
    own = np.flatnonzero(extra)
    new_links[new_indptr[own + 1] - 1] = nlinks + own
    private = np.where(np.isfinite(rate), rate, 1.0)  # an uncapped route's is never used
    return new_indptr, new_links, np.concatenate([bandwidth, private])


def as_shares(value: Mapping[str, float] | None) -> dict[str, float]:
    """``link_efficiency``: link class name → share of its rate (checked), ``{}`` for ``None``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParameterError(
            f"link_efficiency is a mapping of link class to a share, got {value!r}"
        )
    return {str(k): as_share(v, f"link_efficiency[{k!r}]") for k, v in value.items()}


def message_efficiency(
    protocol: Protocol | None,
    switch_efficiency: float | np.ndarray,
    src_endpoint: np.ndarray,
    dst_endpoint: np.ndarray,
    nhosts: int,
) -> np.ndarray | float:
    r"""Per message, the share of its route's rate it moves at: the protocol's efficiency
    :math:`\eta_p` times ``switch_efficiency`` where it starts or ends at a reducing switch
    (an endpoint past the ``nhosts`` hosts, :attr:`commsim.topology.Network.endpoints`; one
    share for every such switch, or one per reducing switch: a server's NVSwitch and a fabric's
    SHARP leaf differ); a number where every message gets the same.

    Examples:
        >>> message_efficiency(None, 0.5, np.array([0, 2]), np.array([1, 1]), 2).tolist()
        [1.0, 0.5]
        >>> message_efficiency(as_protocol("LL"), 1.0, np.array([0]), np.array([1]), 2)
        0.5
        >>> shares = np.array([0.5, 0.8])  # switch endpoints 2 and 3
        >>> message_efficiency(None, shares, np.array([3, 0]), np.array([0, 2]), 2).tolist()
        [0.8, 0.5]
    """
    eta = protocol.efficiency if protocol is not None else 1.0
    shares = np.asarray(switch_efficiency, dtype=np.float64)
    if (shares == 1.0).all():
        return eta
    src, dst = np.asarray(src_endpoint), np.asarray(dst_endpoint)
    if shares.ndim == 0:
        switch = (src >= nhosts) | (dst >= nhosts)
        return np.where(switch, eta * float(shares), eta)
    per_endpoint = np.concatenate([np.ones(nhosts), shares])
    return eta * np.minimum(per_endpoint[src], per_endpoint[dst])
