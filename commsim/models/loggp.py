r"""The LogGP model (Alexandrov, Ionescu, Schauser & Scheiman, "LogGP: incorporating long
messages into the LogP model", SPAA 1995), with the event rules of LogGOPSim (Hoefler,
Schneider & Lumsdaine, "LogGOPSim: simulating large-scale applications in the LogGOPS model",
HPDC 2010; its ``loggop`` module with ``O = 0`` and every message eager).

Parameters: ``L`` latency through the network, ``o`` CPU overhead to send or to receive a message,
``g`` gap between consecutive messages of one NIC direction, ``G`` gap per byte (the inverse
bandwidth), and ``gamma`` per byte reduced. Every rank ``r`` keeps three clocks (arrays over ranks
and sizes): ``cpu[r]`` when its CPU is next free, ``gap_s[r]`` and ``gap_r[r]`` when its NIC may
next start a send and a receive. A message of :math:`s` bytes from ``q`` to ``r``, with
:math:`I = (s-1)G` (0 below one byte):

* is **sent** at :math:`t = \max(\mathrm{cpu}_q, \mathrm{gap\_s}_q)`; the sender's CPU is busy
  for :math:`o` and its NIC may start the next send :math:`g + I` after this one:
  :math:`\mathrm{cpu}_q \leftarrow t + o`, :math:`\mathrm{gap\_s}_q \leftarrow t + g + I`;
* reaches ``r`` at :math:`t + o + L` and is **received** from
  :math:`a = \max(t + o + L, \mathrm{gap\_r}_r, \mathrm{cpu}_r)`: as in LogGOPSim the bytes are
  charged at the receiver, whose CPU completes the message at :math:`a + o + I` (then
  :math:`s_\text{red}\gamma` if it reduces) and whose NIC takes the next message from
  :math:`a + g + I`.

One message alone thus takes :math:`L + 2o + (s-1)G`, and a rank sends a new message every
:math:`\max(o, g + (s-1)G)`.

**One-sided messages** (``one_sided=True``; ``--one-sided``): a put into the receiver's memory
with a signal, as NVSHMEM's ``nvshmem_putmem_signal`` and MPI-3 RMA's ``MPI_Put`` then
``MPI_Accumulate`` on a flag (the ``shmem`` backend, :mod:`commsim.exec.shmem`): nobody posts a
receive, so the receiver pays no overhead: the receive completes at :math:`a + (s-1)G` instead
of :math:`a + o + (s-1)G` (one term; the sender's :math:`o`, the gaps and the arrival rule are
unchanged). The receiver's CPU still gates :math:`a` (it reads the data after its signal wait,
in program order). One message alone takes :math:`L + o + (s-1)G`; for exchanges in lockstep
(ring, recursive doubling) with :math:`g \le L + o`, each message on the critical path is one
:math:`o` shorter, so ring allreduce of :math:`n` bytes on :math:`p` ranks takes

.. math::

    T_\text{one-sided} = 2(p-1)\Big(L + o + \big(\tfrac{n}{p} - 1\big)G\Big)
        + (p-1)\tfrac{n}{p}\gamma
        = T_\text{two-sided} - 2(p-1)\,o .

Sends are **eager** (LogGOPSim below its rendezvous threshold ``S``): a sender never waits for its
receiver, whereas Hockney's messages start when both ends are ready (rendezvous). The IR's
matching send and receive are the one message above; its receive waits for the receiver's CPU,
so data received in a step can be forwarded in the next (a rank's events are in step order).
Each step's messages run in the rounds of :func:`commsim._messages.matchings` (as Hockney's): in
a round every rank first sends, then receives. Local reductions cost :math:`b\gamma` of CPU at
the end of the step. A rank's finish time is its ``cpu`` clock; unlike LogGOPSim's "maximum
finishing time" it leaves out a last NIC gap, which is idle time.

Receives are charged in **program order**, and this is where the model departs from LogGOPSim,
which handles a message as soon as it arrives and the receiver's CPU and NIC are free (a later
``recv`` matches it from the unexpected queue). The two agree whenever messages arrive in the
order their receiver takes them; for pipelined trees, whose messages can arrive early, they
differ (``double_binary_tree`` at p = 8: 650 µs here against LogGOPSim's 829 µs, where early
receives take the CPU away from the rank's own sends; measured on the GOAL export,
``docs/interop.md``).

Relation to Hockney: with :math:`g \le o`, every schedule's LogGP time is at most its Hockney
time with :math:`\alpha = L + 2o`, :math:`\beta = G` (eager sends only relax rendezvous, and
each gap ends before the Hockney message would); for exchanges in lockstep (ring, recursive
doubling, Rabenseifner), with :math:`g \le L + 2o` and messages of at least a byte, it equals
Hockney with :math:`\alpha = L + 2o - G`, :math:`\beta = G` exactly. A root sending to many ranks
pays :math:`\max(o, g + (s-1)G)` per message instead of a whole :math:`\alpha + s\beta`.

:meth:`LogGP.timeline` runs the same clocks at one size and keeps each message's send, receive
and reduction times (what :func:`commsim.models.chrome_trace` draws); its last end is
:meth:`LogGP.predict`'s time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim import units
from commsim._ir import Schedule
from commsim._messages import matchings, messages
from commsim.errors import ParameterError
from commsim.models._bounds import lower_bound
from commsim.models._inputs import as_inverse_bandwidth, as_schedule, as_sizes, as_time
from commsim.models._prediction import Prediction
from commsim.models._record import Recorder
from commsim.models._usage import Timeline
from commsim.profiles import Profile

__all__ = ["LogGP"]


class LogGP:
    """The LogGP model (implements :class:`commsim.models.Model`); see the module docstring.

    Args:
        L: network latency (seconds or ``"1.5us"``).
        o: CPU overhead per send and per receive.
        g: gap between consecutive messages of one NIC direction.
        G: time per byte (seconds/byte or a bandwidth string: ``"25GB/s"``).
        gamma: time per byte reduced.
        one_sided: messages are one-sided puts: the receiver pays no overhead ``o`` (module
            docstring); ``False`` (default) is LogGP's two-sided message.

    Examples:
        >>> import commsim
        >>> m = LogGP(L=1e-6, o=0.5e-6, g=1e-6, G=1e-9, gamma=0.0)
        >>> s = commsim.build("allgather", "ring", nranks=4)
        >>> round(m.predict(s, 4000).time * 1e6, 6)  # 3 x (L + 2o + (1000 - 1)G), g <= L + 2o
        8.997
    """

    name = "loggp"
    bound_name = "one message's L + 2o, plus the reductions"

    def __init__(
        self,
        L: float | str = 1.5e-6,
        o: float | str = 0.25e-6,
        g: float | str = 0.5e-6,
        G: float | str = 1 / 25e9,
        gamma: float | str = 1 / 100e9,
        one_sided: bool = False,
    ) -> None:
        self.L = as_time("L", L)
        self.o = as_time("o", o)
        self.g = as_time("g", g)
        self.G = as_inverse_bandwidth("G", G)
        self.gamma = as_inverse_bandwidth("gamma", gamma)
        self.one_sided = bool(one_sided)
        if self.one_sided:
            self.bound_name = "one message's L + o (one-sided), plus the reductions"

    @classmethod
    def from_profile(cls, profile: Profile, *, one_sided: bool = False) -> LogGP:
        """LogGP's L, o, g, G as ``commsim calibrate`` measured them, and the profile's γ."""
        p = profile.loggp
        if p is None:
            raise ParameterError(
                f"profile {profile.source or profile.backend} has no LogGP parameters (it was "
                "measured without the burst and overhead benchmarks)"
            )
        return cls(L=p.L, o=p.o, g=p.g, G=p.G, gamma=profile.gamma, one_sided=one_sided)

    def __repr__(self) -> str:
        one = ", one_sided=True" if self.one_sided else ""
        return (
            f"LogGP(L={self.L:g}, o={self.o:g}, g={self.g:g}, G={self.G:g}, gamma={self.gamma:g}"
            f"{one})"
        )

    def describe(self) -> str:
        def inv(x: float) -> str:
            return "0s/B" if x == 0 else f"1/({units.format_bandwidth(1 / x)})"

        t = units.format_time
        return (
            f"LogGP L={t(self.L)} o={t(self.o)} g={t(self.g)} G={inv(self.G)} "
            f"gamma={inv(self.gamma)}" + (" one-sided" if self.one_sided else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "L_s": self.L,
            "o_s": self.o,
            "g_s": self.g,
            "G_s_per_byte": self.G,
            "gamma_s_per_byte": self.gamma,
        } | ({"one_sided": True} if self.one_sided else {})

    def lower_bound(self, collective: str, nranks: int, nbytes: Any, helpers: int = 0) -> Any:
        r"""A valid bound under LogGP: one message (:math:`L + 2o`; one-sided :math:`L + o`)
        when :math:`p > 1`, plus the reductions every reducing collective needs (Chan et al.'s
        γ term). Many small eager messages can beat Hockney's bandwidth term under LogGP (each
        saves a :math:`G`), so no bandwidth term is claimed, and no ⌈lg p⌉ latencies: eager
        sends overlap them. ``helpers``: ranks that hold no data (IR rule 7)."""
        reductions = lower_bound(collective, nranks, nbytes, 0.0, 0.0, self.gamma, helpers=helpers)
        one = self.L + (1 if self.one_sided else 2) * self.o
        return reductions + (one if nranks - helpers > 1 else 0.0)

    def predict(self, schedule: Schedule, nbytes: Any) -> Prediction:
        """Time ``schedule`` for message size(s) ``nbytes`` (a number, an array or a size
        string)."""
        schedule = as_schedule(schedule)
        sizes, scalar = as_sizes(nbytes)
        cpu, step_time = self._run(schedule, sizes)
        return Prediction.from_clocks(schedule, sizes, scalar, cpu, step_time, model=self)

    def timeline(
        self, schedule: Schedule, nbytes: Any, *, max_messages: int | None = None
    ) -> Timeline:
        """Every message at one message size (what :func:`commsim.models.chrome_trace` draws),
        from the clocks :meth:`predict` runs: ``start`` when it is sent, ``send_end`` when the
        sender's overhead ends, ``recv_start`` when the receiver takes it, ``end`` when the
        receive completes, ``reduce_end`` when its reduction does. Refuses
        (:class:`~commsim.errors.ResourceError`) past ``max_messages`` messages.

        Examples:
            >>> import commsim
            >>> s = commsim.build("allgather", "ring", nranks=4)
            >>> m = LogGP()
            >>> tl = m.timeline(s, "1MiB")
            >>> tl.nmessages, tl.last_end == m.predict(s, "1MiB").time
            (12, True)
        """
        schedule = as_schedule(schedule)
        sizes, _ = as_sizes(nbytes)
        if len(sizes) != 1:
            raise ParameterError("a timeline is for one message size")
        recorder = Recorder(max_messages)
        self._run(schedule, sizes, recorder)
        return recorder.timeline()

    def _run(
        self, schedule: Schedule, sizes: np.ndarray, recorder: Recorder | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The final ``cpu`` clocks ``[p, sizes]`` and the step times: the one computation of
        :meth:`predict` and :meth:`timeline`. With a ``recorder`` every step takes the general
        path (its round kernel does the fast step's arithmetic) and each round is recorded."""
        schedule.spec.check_layout(schedule.nranks, schedule.ndata)
        from commsim.models import _loggp_kernels  # numba: imported on first use

        p, ns = schedule.nranks, len(sizes)
        per_unit = sizes / schedule.nbytes_units
        cpu, gap_s, gap_r = np.zeros((p, ns)), np.zeros((p, ns)), np.zeros((p, ns))
        step_time = np.zeros((schedule.nsteps, ns))
        last = np.zeros(ns)
        tmp = np.empty((0, ns))
        # the round kernel's t, a and receive end per message (t alone when not recording)
        times = np.empty((1 if recorder is None else 3, 0, ns))
        params = (self.L, self.o, self.g, self.G, self.gamma)
        o_r = 0.0 if self.one_sided else self.o  # the receiver's overhead
        seen_s, seen_d = np.zeros(p, dtype=np.int64), np.zeros(p, dtype=np.int64)
        units = np.empty(0, dtype=np.int64)
        offsets = schedule.slot_offsets
        for i, st in enumerate(schedule.steps()):
            if len(st.src) > len(tmp):
                tmp = np.empty((len(st.src), ns))
                units = np.empty(len(st.src), dtype=np.int64)
            if len(st.src) and (
                recorder is not None
                or not _loggp_kernels.fast_eager_step(
                    cpu, gap_s, gap_r, st.src, st.dst, st.src_slot, st.dst_slot, st.count,
                    st.reduce, offsets, per_unit, *params, units, tmp, seen_s, seen_d, i + 1,
                    last, o_r,
                )
            ):  # fmt: skip
                schedule.check_step(st, i)  # the general path: a malformed step is named here
                msg = messages(st, schedule)
                if len(msg.src) > times.shape[1]:
                    times = np.empty((len(times), len(msg.src), ns))
                rounds = [slice(None)] if msg.unique_ports else matchings(msg.src, msg.dst, p)
                for idx in rounds:
                    src, dst = msg.src[idx], msg.dst[idx]
                    _loggp_kernels.eager_round(
                        cpu, gap_s, gap_r, src, dst, msg.units[idx], msg.reduce_units[idx],
                        per_unit, *params, times, last, o_r,
                    )  # fmt: skip
                    if recorder is not None:
                        self._record(recorder, i, src, dst, times[:, : len(src), 0], cpu)
                if len(msg.local_rank):
                    local = np.bincount(msg.local_rank, msg.local_reduce_units, minlength=p)
                    was = cpu[:, 0].copy()
                    cpu += np.multiply.outer(local, per_unit) * self.gamma
                    last = np.maximum(last, cpu[msg.local_rank].max(axis=0))
                    if recorder is not None:
                        busy = np.flatnonzero(local > 0)
                        recorder.local(busy, was[busy], cpu[busy, 0])
            step_time[i] = last
        return cpu, step_time

    def _record(
        self,
        recorder: Recorder,
        step: int,
        src: np.ndarray,
        dst: np.ndarray,
        times: np.ndarray,
        cpu: np.ndarray,
    ) -> None:
        """One round's messages (one size), as the round kernel timed them: ``times`` holds
        each message's send time ``t``, receive start ``a`` and receive end; the sender is busy
        until ``t + o``; the reduction ends at the receiver's clock after the round (a round is
        a matching: each rank receives once)."""
        t, a, received = times
        recorder.messages(
            step, src, dst, t, received, cpu[dst, 0], recv_start=a, send_end=t + self.o
        )
