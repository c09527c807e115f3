r"""A schedule's timing program: what the models do to their clocks, as parameter-free arrays.

For a fixed schedule, placement and routes, the compiled models (:class:`~commsim.models.Hockney`,
:class:`~commsim.models.Topology` under ``"none"`` or ``"bottleneck"``) apply the same sequence of
clock updates whatever their parameters: the rounds (:func:`commsim._messages.matchings` of each
step's messages, on the ports of :func:`commsim._messages.port_ranks`), who talks to whom, how many
units each message carries, and which links it crosses with how many other messages of its round.
Only the numbers change. :func:`program` records that sequence once; the JAX twin
(:mod:`commsim.models.twin`) replays it as a pure function of the parameters.

A message of round :math:`r` costs

.. math::

    e = \max(c_q, c_d) + \underbrace{\textstyle\sum_k L_{mk}\,\lambda_k + o}_{\text{latency}}
        + u_m\,\frac{n}{U}\,f_m \max_{l \in m} \frac{n_l}{B_l}\,\beta_{k(l)}

with :math:`L_{mk}` the summed latency of its links of class :math:`k`, :math:`\lambda_k` and
:math:`\beta_k` the class's latency and inverse-bandwidth multipliers (1 reproduces the network),
:math:`n_l` the messages of the round on link :math:`l` (1 under ``"none"``), :math:`u_m` its units,
:math:`n/U` the bytes per unit and :math:`f_m` the straggler factor; the receiver then reduces
for :math:`u^\text{red}_m\,\frac{n}{U}\,\gamma\,s_d`. Hockney's program is the same with one link
class whose latency is :math:`\alpha` and inverse bandwidth :math:`\beta` per byte.

Rounds are stored once per distinct pattern of pairs (a ring's :math:`2(p-1)` rounds are one), as
the topology model caches them; arrays are padded to the widest round, padding pointing at a
dummy clock, and every dimension is rounded up to a power of two, so that programs of similar
size share one compiled replay (JAX compiles once per shape).
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from commsim._ir import Schedule
from commsim._messages import port_messages
from commsim.errors import ParameterError, ResourceError

__all__ = ["MAX_PROGRAM_MESSAGES", "Program", "hockney_program", "topology_program"]

#: Messages (padded rounds times width) a program may hold: past it, the twin refuses.
MAX_PROGRAM_MESSAGES = 50_000_000


@dataclasses.dataclass(frozen=True)
class Program:
    """The clock updates of one schedule on one network, without parameters.

    Attributes:
        nports: clocks (ranks times ports); index ``nports`` is the padding's dummy clock.
        nranks: ranks (a rank's time is the latest of its ports').
        units_per_byte: ``1 / nbytes_units``: slot units per byte of the collective's size.
        src, dst: ``[rounds, width]`` ports of each message (dummy for padding); for a local round
            ``src`` is the rank's port that reduces and ``dst`` the dummy.
        units, red: ``[rounds, width]`` units sent and units reduced at the receiver.
        local: ``[rounds]`` whether the round is a step's local reductions.
        pattern: ``[rounds]`` index of the round's pattern.
        lat: ``[patterns, width, classes]`` summed link latency per class, seconds.
        share: ``[patterns, width, hops]`` :math:`n_l / B_l` per link of the route, s/B (0 pads).
        hop_class: ``[patterns, width, hops]`` the class of each of those links.
        slow_msg: ``[rounds, width]`` straggler factor of the message, ``slow_dst`` of its receiver.
        sent, received: ``[rounds, nports + 1]`` per port the index of the message it sends
            (of a local round: the reduction it does) and receives in the round, ``width`` for
            none: the replay gathers its new clocks instead of scattering them.
        start: ``[nports]`` clocks at time 0.
        classes: link class names (Hockney: ``("link",)``).
        overhead: seconds added to every message's latency (the topology model's ``overhead``).
        overlap: a received message is reduced while it arrives (the collective library's
            ``reduction_overlap``): only the reduction's excess over the transfer is exposed.
    """

    nports: int
    nranks: int
    units_per_byte: float
    src: np.ndarray
    dst: np.ndarray
    units: np.ndarray
    red: np.ndarray
    local: np.ndarray
    pattern: np.ndarray
    lat: np.ndarray
    share: np.ndarray
    hop_class: np.ndarray
    slow_msg: np.ndarray
    slow_dst: np.ndarray
    sent: np.ndarray
    received: np.ndarray
    start: np.ndarray
    classes: tuple[str, ...]
    overhead: float
    overlap: bool = False

    @property
    def nrounds(self) -> int:
        return len(self.local)


class _Builder:
    """Collects rounds and patterns; ``cost(src, dst)`` gives a new pattern's route arrays."""

    def __init__(self, schedule: Schedule, ports: int, nclasses: int, cost, slow) -> None:
        self.schedule, self.ports, self.cost = schedule, ports, cost
        self.nports = schedule.nranks * ports
        self.nclasses, self.slow = nclasses, slow
        self.rounds: list[tuple] = []
        self.patterns: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.seen: dict[bytes, int] = {}
        self.total = 0

    def add_round(self, src, dst, units, red) -> None:
        key = hashlib.blake2b(src.tobytes() + b"|" + dst.tobytes(), digest_size=16).digest()
        k = self.seen.get(key)
        if k is None:
            k = self.seen[key] = len(self.patterns)
            self.patterns.append(self.cost(src // self.ports, dst // self.ports))
        self.rounds.append((src, dst, units, red, False, k))
        self._count(len(src))

    def add_local(self, port, red) -> None:
        self.rounds.append((port, np.full(len(port), -1), np.zeros(len(port)), red, True, 0))
        self._count(len(port))

    def _count(self, m: int) -> None:
        self.total += m
        if self.total > MAX_PROGRAM_MESSAGES:
            raise ResourceError(
                f"the twin records every message: this schedule has more than "
                f"{MAX_PROGRAM_MESSAGES:,}; use the compiled model at this size"
            )

    def run(self) -> None:
        schedule, K = self.schedule, self.ports
        for i, st in enumerate(schedule.steps()):
            if not len(st.src):
                continue
            schedule.check_step(st, i)
            msg, rounds = port_messages(st, schedule, K)
            for idx in rounds:
                self.add_round(msg.src[idx], msg.dst[idx], msg.units[idx], msg.reduce_units[idx])
            if len(msg.local_rank):
                red = np.bincount(msg.local_rank, msg.local_reduce_units, minlength=self.nports)
                busy = np.flatnonzero(red)
                self.add_local(busy, red[busy])

    def program(
        self, start: np.ndarray, classes: tuple[str, ...], overhead: float, overlap: bool = False
    ) -> Program:
        R = _bucket(len(self.rounds))
        width = _bucket(max((len(r[0]) for r in self.rounds), default=1))
        dummy = self.nports
        src = np.full((R, width), dummy, dtype=np.int32)
        dst = np.full((R, width), dummy, dtype=np.int32)
        units = np.zeros((R, width))
        red = np.zeros((R, width))
        local = np.zeros(R, dtype=bool)
        pattern = np.zeros(R, dtype=np.int32)
        slow_msg = np.ones((R, width))
        slow_dst = np.ones((R, width))
        if R * (self.nports + 1) > MAX_PROGRAM_MESSAGES:
            raise ResourceError(
                f"the twin's replay needs rounds x ports = {R * (self.nports + 1):,} cells, over "
                f"its {MAX_PROGRAM_MESSAGES:,} limit; use the compiled model at this size"
            )
        sent = np.full((R, self.nports + 1), width, dtype=np.int32)
        received = np.full((R, self.nports + 1), width, dtype=np.int32)
        for r, (s, d, u, rd, is_local, k) in enumerate(self.rounds):
            m = len(s)
            src[r, :m] = s
            sent[r, s] = np.arange(m)
            units[r, :m], red[r, :m], local[r], pattern[r] = u, rd, is_local, k
            rank_s = s // self.ports
            if is_local:
                slow_dst[r, :m] = self.slow[rank_s]
                continue
            dst[r, :m] = d
            received[r, d] = np.arange(m)
            rank_d = d // self.ports
            slow_msg[r, :m] = np.maximum(self.slow[rank_s], self.slow[rank_d])
            slow_dst[r, :m] = self.slow[rank_d]
        hops = _bucket(max((p[1].shape[1] for p in self.patterns), default=1))
        P = _bucket(len(self.patterns))
        lat = np.zeros((P, width, self.nclasses))
        share = np.zeros((P, width, hops))
        hop_class = np.zeros((P, width, hops), dtype=np.int32)
        for k, (plat, pshare, pcls) in enumerate(self.patterns):
            m, h = pshare.shape
            lat[k, :m] = plat
            share[k, :m, :h] = pshare
            hop_class[k, :m, :h] = pcls
        return Program(
            self.nports, self.schedule.nranks, 1.0 / self.schedule.nbytes_units, src, dst,
            units, red, local, pattern, lat, share, hop_class, slow_msg, slow_dst, sent,
            received, start, classes, overhead, overlap,
        )  # fmt: skip


def _bucket(n: int) -> int:
    """``n`` rounded up to a power of two (at least 1): the shapes the replay is compiled for."""
    return 1 << max(int(n) - 1, 0).bit_length()


def hockney_program(schedule: Schedule, *, links: int = 1) -> Program:
    """The program of :class:`~commsim.models.Hockney` (single port, ``links`` independent
    links): every message one "link" of class ``link`` with latency 1 s and 1 s/B, so the twin's
    multipliers are α and β themselves."""
    schedule.spec.check_layout(schedule.nranks, schedule.ndata)
    ports = min(links, schedule.nchannels)

    def cost(src: np.ndarray, dst: np.ndarray):
        m = len(src)
        return np.ones((m, 1)), np.ones((m, 1)), np.zeros((m, 1), dtype=np.int32)

    b = _Builder(schedule, ports, 1, cost, np.ones(schedule.nranks))
    b.run()
    return b.program(np.zeros(b.nports), ("link",), 0.0)


def topology_program(model, schedule: Schedule) -> Program:
    """The program of a :class:`~commsim.models.Topology` model (``"none"`` or ``"bottleneck"``
    contention) for ``schedule``: routes, link classes, shares and stragglers as the model sees
    them."""

    if model.protocol is not None or model.channel_bandwidth is not None:
        raise ParameterError(
            "the twin does not replay a protocol or a per-channel rate cap yet: predict "
            "without --protocol (and without a channel_bandwidth in the cluster)"
        )
    if getattr(model, "link_profiles", None):
        raise ParameterError(
            "the twin does not replay measured link profiles (the cluster's [profiles]) yet: "
            "predict with the compiled model"
        )
    shares = np.asarray(getattr(model, "switch_shares", 1.0))
    if schedule.in_network and (shares != 1.0).any():
        raise ParameterError(
            "the twin does not replay an in-switch reduction's efficiency "
            "(the cluster's nvls_efficiency or sharp_efficiency) yet: predict with the compiled "
            "model"
        )
    if getattr(model, "port_rule", "channel") != "channel":
        raise ParameterError(
            "the twin replays the default port rule (a port per channel), not "
            f"port_rule={model.port_rule!r}: predict with the compiled model"
        )
    if model.contention not in ("none", "bottleneck"):
        raise ParameterError(
            f"the twin replays static contention ('none', 'bottleneck'), not "
            f"{model.contention!r}: maxmin and flow rates are not a fixed function of the "
            f"parameters (use finite differences of the compiled model there)"
        )
    schedule.spec.check_layout(schedule.nranks, schedule.ndata)
    net = model.network
    hosts = model.hosts_of(schedule)
    K = schedule.nchannels
    params = dataclasses.replace(model._params, launch=0.0)  # launch is a twin parameter
    nclasses = len(net.kinds)

    def cost(src: np.ndarray, dst: np.ndarray):
        indptr, links = net.routes(hosts[src], hosts[dst])
        m = len(src)
        lengths = np.diff(indptr)
        owner = np.repeat(np.arange(m), lengths)
        lat = np.zeros((m, nclasses))
        np.add.at(lat, (owner, net.link_kind[links]), net.latency[links])
        if model.contention == "bottleneck":
            count = np.bincount(links, minlength=net.nlinks)[links]
        else:
            count = np.ones(len(links))
        with np.errstate(divide="ignore"):
            per = np.where(np.isinf(net.bandwidth[links]), 0.0, count / net.bandwidth[links])
        h = int(lengths.max(initial=1)) or 1
        hop = np.arange(len(links)) - np.repeat(indptr[:-1], lengths)
        share = np.zeros((m, h))
        cls = np.zeros((m, h), dtype=np.int32)
        share[owner, hop] = per
        cls[owner, hop] = net.link_kind[links]
        return lat, share, cls

    slow = params.slow_factors(schedule.nranks)
    b = _Builder(schedule, K, nclasses, cost, slow)
    b.run()
    start = np.repeat(params.initial_clock(schedule.nranks, 1)[:, 0], K)
    return b.program(start, tuple(net.kinds), model.overhead, model.reduction_overlap)
