r"""Hockney with per-link-class parameters: one α, β inside a server, another between servers.

A message between ranks of the same server (``ranks_per_node`` consecutive ranks) costs
:math:`\alpha_\text{intra} + b\beta_\text{intra}`, between servers
:math:`\alpha_\text{inter} + b\beta_\text{inter}`; everything else is :class:`Hockney`'s
single-port rules (a schedule's channels each on a port of their own, as Hockney with a link
per channel). It is the topology model on a two-level network without contention — every
server a crossbar of ``intra`` links, every rank's port into one crossbar of ``inter`` links —
so the two agree by construction, and the prediction carries the same time parts per link class
(``"intra"``, ``"inter"``).

Past the critical path's budget it times messages by class directly (:class:`_DirectRun`), and
while the steps commute with the shift by one server (a ring's) it keeps the clocks of one
server's ranks only, standing for all (:mod:`commsim.models._periodic_clocks`): a ring of
16,384 ranks visits 16 messages a step instead of 16,384, the same bits.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import numpy as np

from commsim import units
from commsim._ir import Schedule
from commsim.errors import ParameterError
from commsim.models._bounds import lower_bound
from commsim.models._inputs import as_inverse_bandwidth, as_schedule, as_sizes, as_time
from commsim.models._periodic_clocks import PeriodicClocks, period
from commsim.models._prediction import Prediction
from commsim.models._shared_clocks import SharedClocks
from commsim.models._usage import NetworkUsage, Timeline
from commsim.models.topology import CRITICAL_PATH_BUDGET, Topology
from commsim.topology import join, switch

__all__ = ["TwoLevelHockney"]


class TwoLevelHockney:
    """Hockney with intra- and inter-server α, β (implements :class:`commsim.models.Model`).

    Args:
        intra: ``(alpha, beta)`` inside a server (seconds, seconds/byte, or unit strings).
        inter: ``(alpha, beta)`` between servers.
        ranks_per_node: ranks per server (consecutive ranks).
        gamma: reduction time per byte.
        launch: the collective library's per-call cost (default 0;
            :mod:`commsim.models._library`).
        reduction_overlap: reduce a received message while it arrives (default ``False``).

    Examples:
        >>> import commsim
        >>> m = TwoLevelHockney(("1us", "100GB/s"), ("5us", "10GB/s"), ranks_per_node=4, gamma=0)
        >>> s = commsim.build("allreduce", "ring", nranks=8)
        >>> round(m.predict(s, 8e6).time * 1e3, 6)  # 14 steps, each waiting for an inter hop
        1.47
    """

    name = "hockney_classes"
    bound_name = "Chan et al. 2007 bound (the faster class)"

    def __init__(
        self,
        intra: tuple[Any, Any],
        inter: tuple[Any, Any],
        *,
        ranks_per_node: int,
        gamma: float | str = 1 / 100e9,
        launch: float | str = 0.0,
        reduction_overlap: bool = False,
    ) -> None:
        try:
            (ai, bi), (ae, be) = intra, inter
        except (TypeError, ValueError):
            raise ParameterError("intra and inter are (alpha, beta) pairs") from None
        self.intra = (as_time("intra alpha", ai), as_inverse_bandwidth("intra beta", bi))
        self.inter = (as_time("inter alpha", ae), as_inverse_bandwidth("inter beta", be))
        if (
            isinstance(ranks_per_node, bool)
            or not isinstance(ranks_per_node, int)
            or ranks_per_node < 1
        ):
            raise ParameterError(f"ranks_per_node must be an integer >= 1, got {ranks_per_node!r}")
        self.ranks_per_node = ranks_per_node
        self.gamma = as_inverse_bandwidth("gamma", gamma)
        self.launch = as_time("launch", launch)
        self.reduction_overlap = bool(reduction_overlap)

    def describe(self) -> str:
        def cls(a: float, b: float) -> str:
            bw = "inf" if b == 0 else units.format_bandwidth(1 / b)
            return f"alpha={units.format_time(a)} beta=1/({bw})"

        library = f", launch={units.format_time(self.launch)}" if self.launch else ""
        library += ", reduction overlapped" if self.reduction_overlap else ""
        return (
            f"Hockney per link class: intra {cls(*self.intra)}, inter {cls(*self.inter)}, "
            f"{self.ranks_per_node} ranks per node{library}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "intra": {"alpha_s": self.intra[0], "beta_s_per_byte": self.intra[1]},
            "inter": {"alpha_s": self.inter[0], "beta_s_per_byte": self.inter[1]},
            "ranks_per_node": self.ranks_per_node,
            "gamma_s_per_byte": self.gamma,
            "launch_s": self.launch,
            "reduction_overlap": self.reduction_overlap,
        }

    def lower_bound(self, collective: str, nranks: int, nbytes: Any, helpers: int = 0) -> Any:
        alpha = min(self.intra[0], self.inter[0])
        beta = min(self.intra[1], self.inter[1])
        gamma = 0.0 if self.reduction_overlap else self.gamma  # reductions may hide in transfers
        return lower_bound(collective, nranks, nbytes, alpha, beta, gamma, helpers=helpers)

    @functools.lru_cache(maxsize=8)  # noqa: B019  (a few rank counts per model)
    def _topology(self, nranks: int) -> Topology:
        g = self.ranks_per_node
        servers = -(-nranks // g)

        def bw(beta: float) -> float | str:
            return "inf" if beta == 0 else 1 / beta

        island = switch(g, bandwidth=bw(self.intra[1]), latency=self.intra[0] / 2, kind="intra")
        fabric = switch(
            servers * g, bandwidth=bw(self.inter[1]), latency=self.inter[0] / 2, kind="inter"
        )
        return Topology(
            join(island, fabric, servers), contention="none", gamma=self.gamma,
            launch=self.launch, reduction_overlap=self.reduction_overlap,
        )  # fmt: skip

    def predict(self, schedule: Schedule, nbytes: Any) -> Prediction:
        """Time ``schedule`` for message size(s) ``nbytes``: the equivalent two-level network's
        clocks (:class:`~commsim.models.Topology`), described and bounded by this model.

        A schedule too long for a critical path (more than
        :data:`~commsim.models.topology.CRITICAL_PATH_BUDGET` transfers) whose steps are each
        one round of distinct messages takes the direct run (:class:`_DirectRun`): the same
        clocks, components and link bytes without routes; any other takes the network's run."""
        schedule = as_schedule(schedule)
        sizes, scalar = as_sizes(nbytes)
        run: Any = self._direct_run(schedule, sizes)
        if run is None:
            run = self._topology(schedule.nranks)._run(_hosted(schedule), sizes)
        return Prediction.from_clocks(
            schedule, sizes, scalar, run.rank_clock, run.step_time, model=self, notes=run.notes,
            network=run.usage,
        )  # fmt: skip

    def _direct_run(self, schedule: Schedule, sizes: np.ndarray) -> _DirectRun | None:
        """The direct run (:class:`_DirectRun`), or ``None`` where the network's run is needed.
        It reads its two classes off the network of two servers at most: every server's links
        are alike, so it builds no graph of ``p`` hosts."""
        g = self.ranks_per_node
        return _DirectRun.of(self._topology(min(schedule.nranks, 2 * g)), schedule, sizes, g)

    def timeline(
        self, schedule: Schedule, nbytes: Any, *, max_messages: int | None = None
    ) -> Timeline:
        """Every message at one size: the equivalent two-level network's timeline
        (:meth:`Topology.timeline <commsim.models.Topology.timeline>`, links included)."""
        schedule = as_schedule(schedule)
        return self._topology(schedule.nranks).timeline(
            _hosted(schedule), nbytes, max_messages=max_messages
        )


class _HostLinks(NamedTuple):
    """The link classes, class and rate of every host's four links on the two-level network
    (what :meth:`NetworkUsage.of_links <commsim.models._usage.NetworkUsage.of_links>` reads)."""

    kinds: tuple[str, ...]
    link_kind: np.ndarray
    bandwidth: np.ndarray


def _hosted(schedule: Schedule) -> Schedule:
    """The two classes have no switch that reduces: in-network helpers sit on hosts, as in the
    Hockney model."""
    return dataclasses.replace(schedule, in_network=False) if schedule.in_network else schedule


class _DirectRun:
    """TwoLevelHockney's clocks computed per message from its class, without routes: what
    :class:`~commsim.models.Topology`'s run gives on the two-level network, for schedules whose
    steps are each one round of distinct messages (:mod:`commsim.models._two_level_kernels`).

    ``model`` is the two-level network of ``p`` ranks or a smaller one of the same servers
    (``g`` GPUs each): the run reads from it only what every server has alike, the two classes'
    costs and each host's four links (its GPU's link up and down inside the server, then between
    servers, as :func:`~commsim.topology.join` numbers them), and places rank ``r`` on host
    ``r`` of server ``r // g`` (the linear placement). :meth:`of` gives ``None`` (take the
    network's run) for schedules of several channels, short enough for a critical path (the
    network's run keeps one), or with a step of another shape.
    """

    def __init__(self, model: Topology, schedule: Schedule, sizes: np.ndarray, g: int) -> None:
        net, p, ns = model.network, schedule.nranks, len(sizes)
        self.model, self.schedule, self.net, self.g = model, schedule, net, g
        self.hosts = np.arange(p, dtype=np.int64)  # linear: two link classes, helpers on hosts
        self.server = self.hosts // g
        self.per_unit = sizes / schedule.nbytes_units
        self.gw = model.gamma * self.per_unit
        self.clock = model.initial_clock(p, ns)
        from commsim.models._topology_kernels import OTHER, TRANSFER  # numba: on first use

        self.comp = np.zeros((p, TRANSFER + len(net.kinds), ns))
        self.comp[:, OTHER, :] = self.clock
        self.last = self.clock.max(axis=0) if p else np.zeros(ns)
        self.step_time = np.zeros((schedule.nsteps, ns))
        m = max(min(schedule.max_step_transfers_hint or p, p), 1)
        self.tmp, self.mcomp = np.empty((m, ns)), np.empty((m, *self.comp.shape[1:]))
        self.seen_s, self.seen_d = np.zeros(p, np.int64), np.zeros(p, np.int64)
        self.units = np.zeros((2, 2, p))  # [sent/received, class, rank]
        self.lat, self.inv = self._class_costs()
        self.nmsg = 0
        self.unit = int(schedule.slot_units[0]) if schedule.uniform_slots else 0
        # each distinct (clock, components) row once, while every rank starts alike
        start = np.concatenate([self.clock[:1], self.comp[:1].reshape(1, -1)], axis=1)
        alike = p > 0 and bool((self.clock == self.clock[0]).all())
        self.shared = SharedClocks(p, start.shape[1], m, start[0]) if alike else None
        # g clocks for p ranks while the steps commute with the shift by a server (g ranks)
        g = period(self.server, self.clock) if self.unit > 0 else None
        self.periodic = PeriodicClocks(self.clock, self.comp, g) if g else None

    @classmethod
    def of(
        cls, model: Topology, schedule: Schedule, sizes: np.ndarray, g: int
    ) -> _DirectRun | None:
        """The direct run of ``schedule`` on servers of ``g`` ranks, or ``None`` where the
        network's run is needed."""
        hint = schedule.ntransfers_hint
        if schedule.nchannels > 1 or hint is None or hint <= CRITICAL_PATH_BUDGET:
            return None
        schedule.spec.check_layout(schedule.nranks, schedule.ndata)
        run = cls(model, schedule, sizes, g)
        if run.lat is None:
            return None
        from commsim.models import _two_level_kernels as k  # numba: imported on first use

        offsets = schedule.slot_offsets
        for i, st in enumerate(schedule.steps()):
            if run.periodic is not None and len(st.src):
                if run._periodic_step(k, st):
                    run.nmsg += len(st.src)
                    run.step_time[i] = run.last
                    continue
                run._leave_periodic()
            if run.shared is not None and len(st.src):
                done = run.shared.advance(len(st.src), run._shared_step(k, st, i + 1))
                if done == 0:
                    return None  # a step of another shape: the network's run, from the start
                if done == 1:
                    run.nmsg += len(st.src)
                    run.step_time[i] = run.last
                    continue
                run._dense()  # sharing does not pay: dense clocks from here on
            if len(st.src) > len(run.tmp):
                run.tmp = np.empty((len(st.src), len(sizes)))
                run.mcomp = np.empty((len(st.src), *run.comp.shape[1:]))
            if len(st.src) and not k.fast_class_step(
                run.clock, run.comp, st.src, st.dst, st.src_slot, st.dst_slot, st.count,
                st.reduce, offsets, run.server, run.lat, run.inv, run.per_unit, run.gw,
                model.reduction_overlap, run.tmp, run.mcomp, run.seen_s, run.seen_d, i + 1,
                run.last, run.units[0], run.units[1],
            ):  # fmt: skip
                return None  # a step of another shape: the network's run, from the start
            run.nmsg += len(st.src)
            run.step_time[i] = run.last
        run._dense()
        return run

    def _periodic_step(self, k: Any, st: Any) -> bool:
        """``st`` on the periodic clocks, or ``False`` (nothing changed) where it does not
        commute with the shift by a server (:mod:`commsim.models._periodic_clocks`)."""
        per = self.periodic
        assert per is not None
        touching = per.touching(st, self.schedule.nslots)
        if touching is None:
            return False
        k.periodic_class_step(
            per.clock, per.comp, st.src, st.dst, st.count, st.reduce, touching, self.unit,
            per.g, self.server, self.lat, self.inv, self.per_unit, self.gw,
            self.model.reduction_overlap, per.tmp, per.mcomp, self.last, per.sent, per.received,
        )  # fmt: skip
        return True

    def _leave_periodic(self) -> None:
        """From the periodic clocks to every rank's (dense, then shared again where every
        rank's row is one of a few: the same numbers)."""
        per, self.periodic = self.periodic, None
        if per is None:
            return
        per.expand(self.clock, self.comp, self.units[0], self.units[1])
        if self.shared is not None:
            rows = np.concatenate([per.clock, per.comp.reshape(per.g, -1)], axis=1)
            self.shared.load(rows, np.arange(len(self.clock)) % per.g)

    def _shared_step(self, k: Any, st: Any, tag: int) -> Any:
        """The shared clocks' step kernel for ``st``, as :meth:`SharedClocks.advance
        <commsim.models._shared_clocks.SharedClocks.advance>` calls it."""
        sh, sizes = self.shared, self.per_unit
        return lambda: k.shared_class_step(
            sh.ids, sh.values, sh.bits, sh.index, sh.nval, st.src, st.dst, st.src_slot,
            st.dst_slot, st.count, st.reduce, self.schedule.slot_offsets, self.unit, self.server,
            self.lat, self.inv, sizes, self.gw, self.model.reduction_overlap, sh.ends,
            self.seen_s, self.seen_d, tag, self.last, self.units[0], self.units[1], sh.ekey,
            sh.eval_, sh.mkey, sh.mval, sh.stamp,
        )  # fmt: skip

    def _dense(self) -> None:
        """Leave the periodic or shared clocks for the dense tables (same numbers)."""
        if self.periodic is not None:
            per, self.periodic, self.shared = self.periodic, None, None
            per.expand(self.clock, self.comp, self.units[0], self.units[1])
        if self.shared is not None:
            ns = len(self.per_unit)
            rows = self.shared.dense()
            self.clock[:] = rows[:, :ns]
            self.comp[:] = rows[:, ns:].reshape(self.comp.shape)
            self.shared = None

    def _class_costs(self) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
        """Latency and inverse rate of a message inside a server and of one between servers,
        as the network's run computes them (:meth:`Topology.round_costs
        <commsim.models.Topology.round_costs>` of one message of each class)."""
        pairs = self._pairs()
        if pairs is None:
            return None, None
        src, dst = pairs
        model = self.model
        if model.protocol is not None or model.channel_bandwidth is not None:
            return None, None
        _, inv, _, _, links, _ = model._round_costs(self.hosts, src, dst)
        x = (self.server[dst] != self.server[0]).astype(np.int64)  # each pair's class
        if not np.array_equal(links, np.stack([2 * x, 4 * dst + 2 * x + 1], axis=1).ravel()):
            return None, None  # not each host's four links (usage): not the two-level network
        # the two links' latencies summed as written (the network's run sums a round's routes
        # through one running sum, which can differ from this in the last bit)
        latency = self.net.latency
        lat = latency[links[0::2]] + latency[links[1::2]] + model.overhead
        return lat, inv.copy()

    def _pairs(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Ranks ``(0, a)`` on one server and ``(0, b)`` on two, for the class costs (a rank
        stands for its class: every rank's links of a class are alike)."""
        server = self.server  # r // g: servers in rank order
        if len(server) < 2:
            return None
        same = np.flatnonzero(server == server[0])
        other = np.flatnonzero(server != server[0])
        a = int(same[1]) if len(same) > 1 else 0
        b = int(other[0]) if len(other) else 0
        if a == 0 and b == 0:
            return None
        return np.array([0, 0]), np.array([a if a else b, b if b else a])

    @property
    def rank_clock(self) -> np.ndarray:
        return self.clock

    @property
    def notes(self) -> tuple[str, ...]:
        """As the network's run: its critical path is not tracked past the budget."""
        if not self.nmsg:
            return ()
        return (
            f"critical path not tracked: {self.nmsg:,} messages exceed the "
            f"{CRITICAL_PATH_BUDGET:,} budget",
        )

    def usage(self, total: np.ndarray) -> NetworkUsage:
        """Bytes per link from the units each rank sent and received per class: a message's
        route is its sender's link up and its receiver's link down, of its class; host ``h``'s
        links are ``4h + 2x + side`` (class ``x``; side 0 up, 1 down), as on the network of
        ``p`` ranks (checked on the two classes' routes, :meth:`_class_costs`)."""
        net, p = self.net, len(self.hosts)
        nhosts = -(-p // self.g) * self.g
        link_units = np.zeros((nhosts, 2, 2))
        link_units[:p] = self.units.transpose(2, 1, 0)  # [rank, class, side]
        links = _HostLinks(
            net.kinds, np.tile(net.link_kind[:4], nhosts), np.tile(net.bandwidth[:4], nhosts)
        )
        last = np.argmax(self.clock, axis=0)
        parts = self.comp[last, :, np.arange(len(last))].T  # [components, sizes]
        return NetworkUsage.of_links(
            links, link_units.reshape(-1), self.per_unit, total, parts, None,
            launch=self.model.call_cost,
        )  # fmt: skip
