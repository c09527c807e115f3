r"""The LogGP model (Alexandrov, Ionescu, Schauser & Scheiman, "LogGP: incorporating long
messages into the LogP model", SPAA 1995), with the event rules of LogGOPSim (Hoefler,
Schneider & Lumsdaine, "LogGOPSim: simulating large-scale applications in the LogGOPS model",
HPDC 2010).

Parameters: ``L`` latency through the network, ``o`` CPU overhead to send or to receive a message,
``g`` gap between consecutive messages on a NIC (each direction), ``G`` gap per byte (the inverse
bandwidth), and ``gamma`` per byte reduced. A message of :math:`s` bytes from ``q`` to ``r``:

* starts when ``q``'s CPU and send NIC are free: :math:`t_0 = \max(\mathrm{cpu}_q, \mathrm{nic}^s_q)`;
  ``q`` pays :math:`o` of CPU, then injects for :math:`(s-1)G`; its send NIC takes the next message
  no earlier than :math:`t_0 + o + \max(g, (s-1)G)`;
* arrives at :math:`t_0 + o + (s-1)G + L`, is taken by ``r``'s receive NIC no earlier than its last
  reception plus :math:`\max(g, (s-1)G)`, and is received when ``r``'s CPU is free, for another
  :math:`o` (then :math:`s\gamma` if it reduces).

Sends are eager (LogGOPSim below its rendezvous threshold): unlike Hockney's rendezvous, a sender
does not wait for its receiver, and its CPU is free after :math:`o`. Each step's messages run in the
same rounds as Hockney's (:func:`commsim._messages.matchings`): in a round a rank first sends,
then receives. A rank's finish time is when its CPU and its last injection are done.

Relation to Hockney: one message alone costs :math:`2o + (s-1)G + L`, i.e. Hockney's
:math:`\alpha + s\beta` with :math:`\alpha = L + 2o - G`, :math:`\beta = G`; schedules differ where
eager sends or the gap matter (a root sending to many ranks pays :math:`\max(g, o)` per message, not a
full :math:`\alpha`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim import units
from commsim._ir import Schedule
from commsim._messages import matchings, messages
from commsim.models._bounds import lower_bound
from commsim.models._inputs import as_inverse_bandwidth, as_schedule, as_sizes, as_time
from commsim.models._prediction import Prediction

__all__ = ["LogGP"]


class LogGP:
    """The LogGP model (implements :class:`commsim.models.Model`); see the module docstring.

    Args:
        L: network latency (seconds or ``"1.5us"``).
        o: CPU overhead per send and per receive.
        g: gap between consecutive messages of one NIC direction.
        G: time per byte (seconds/byte or a bandwidth string: ``"25GB/s"``).
        gamma: time per byte reduced.

    Examples:
        >>> import commsim
        >>> m = LogGP(L=1e-6, o=0.5e-6, g=1e-6, G=1e-9, gamma=0.0)
        >>> s = commsim.build("allgather", "ring", nranks=4)
        >>> round(m.predict(s, 4000).time * 1e6, 6)  # 3 x (2o + (1000 - 1)G + L)
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
    ) -> None:
        self.L = as_time("L", L)
        self.o = as_time("o", o)
        self.g = as_time("g", g)
        self.G = as_inverse_bandwidth("G", G)
        self.gamma = as_inverse_bandwidth("gamma", gamma)

    def __repr__(self) -> str:
        return (
            f"LogGP(L={self.L:g}, o={self.o:g}, g={self.g:g}, G={self.G:g}, gamma={self.gamma:g})"
        )

    def describe(self) -> str:
        def inv(x: float) -> str:
            return "0s/B" if x == 0 else f"1/({units.format_bandwidth(1 / x)})"

        t = units.format_time
        return (
            f"LogGP L={t(self.L)} o={t(self.o)} g={t(self.g)} G={inv(self.G)} "
            f"gamma={inv(self.gamma)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "L_s": self.L,
            "o_s": self.o,
            "g_s": self.g,
            "G_s_per_byte": self.G,
            "gamma_s_per_byte": self.gamma,
        }

    def lower_bound(self, collective: str, nranks: int, nbytes: Any) -> Any:
        r"""A valid bound under LogGP: one message (:math:`L + 2o`) when :math:`p > 1`, plus
        the reductions every reducing collective needs (Chan et al.'s γ term). Many small eager
        messages can beat Hockney's bandwidth term under LogGP (each saves a :math:`G`), so no
        bandwidth term is claimed, and no ⌈lg p⌉ latencies: eager sends overlap them."""
        reductions = lower_bound(collective, nranks, nbytes, 0.0, 0.0, self.gamma)
        return reductions + (self.L + 2 * self.o if nranks > 1 else 0.0)

    def predict(self, schedule: Schedule, nbytes: Any) -> Prediction:
        """Time ``schedule`` for message size(s) ``nbytes`` (a number, an array or a size
        string)."""
        schedule = as_schedule(schedule)
        sizes, scalar = as_sizes(nbytes)
        schedule.spec.check_layout(schedule.nranks, schedule.ndata)
        p, ns = schedule.nranks, len(sizes)
        per_unit = sizes / schedule.nbytes_units
        cpu = np.zeros((p, ns))
        nic_send = np.zeros((p, ns))
        nic_recv = np.zeros((p, ns))
        injected = np.zeros((p, ns))
        step_time = np.zeros((schedule.nsteps, ns))
        last = np.zeros(ns)
        for i, st in enumerate(schedule.steps()):
            if len(st.src):
                schedule.check_step(st, i)
                msg = messages(st, schedule)
                rounds = (
                    [np.arange(len(msg.src))]
                    if msg.unique_ports
                    else matchings(msg.src, msg.dst, p)
                )
                for idx in (x for x in rounds if len(x)):
                    q, r = msg.src[idx], msg.dst[idx]
                    nbytes_m = np.multiply.outer(msg.units[idx], per_unit)
                    inject = np.maximum(nbytes_m - 1, 0) * self.G
                    t0 = np.maximum(cpu[q], nic_send[q])
                    cpu[q] = t0 + self.o
                    nic_send[q] = t0 + self.o + np.maximum(self.g, inject)
                    injected[q] = np.maximum(injected[q], t0 + self.o + inject)
                    arrive = np.maximum(t0 + self.o + inject + self.L, nic_recv[r] + inject)
                    nic_recv[r] = arrive + np.maximum(self.g, inject) - inject
                    done = np.maximum(arrive, cpu[r]) + self.o
                    red = np.multiply.outer(msg.reduce_units[idx], per_unit) * self.gamma
                    cpu[r] = done + red
                    last = np.maximum(last, cpu[r].max(axis=0))
                if len(msg.local_rank):
                    red = np.bincount(msg.local_rank, msg.local_reduce_units, minlength=p)
                    cpu += np.multiply.outer(red, per_unit) * self.gamma
                    last = np.maximum(last, cpu[msg.local_rank].max(axis=0))
                last = np.maximum(last, injected.max(axis=0))
            step_time[i] = last
        clock = np.maximum(cpu, injected)
        total = clock.max(axis=0) if p else np.zeros(ns)

        def out(a: np.ndarray) -> Any:
            return a[..., 0] if scalar else a

        return Prediction(
            algorithm=schedule.algorithm,
            collective=schedule.collective,
            nranks=p,
            model=self.describe(),
            nbytes=float(sizes[0]) if scalar else sizes,
            time=float(total[0]) if scalar else total,
            rank_time=out(clock),
            step_time=out(step_time),
            busbw_factor=schedule.spec.busbw_factor(p),
        )
