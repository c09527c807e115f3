r"""Hockney with per-link-class parameters: one α, β inside a server, another between servers.

A message between ranks of the same server (``ranks_per_node`` consecutive ranks) costs
:math:`\alpha_\text{intra} + b\beta_\text{intra}`, between servers
:math:`\alpha_\text{inter} + b\beta_\text{inter}`; everything else is :class:`Hockney`'s
single-port rules. It is the topology model on a two-level network without contention — every
server a crossbar of ``intra`` links, every rank's port into one crossbar of ``inter`` links —
so the two agree by construction, and the prediction carries the same time parts per link class
(``"intra"``, ``"inter"``).
"""

from __future__ import annotations

import functools
from typing import Any

from commsim import units
from commsim._ir import Schedule
from commsim.errors import ParameterError
from commsim.models._bounds import lower_bound
from commsim.models._inputs import as_inverse_bandwidth, as_schedule, as_sizes, as_time
from commsim.models._prediction import Prediction
from commsim.models._usage import Timeline
from commsim.models.topology import Topology
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

    def lower_bound(self, collective: str, nranks: int, nbytes: Any) -> Any:
        alpha = min(self.intra[0], self.inter[0])
        beta = min(self.intra[1], self.inter[1])
        gamma = 0.0 if self.reduction_overlap else self.gamma  # reductions may hide in transfers
        return lower_bound(collective, nranks, nbytes, alpha, beta, gamma)

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
        clocks (:class:`~commsim.models.Topology`), described and bounded by this model."""
        schedule = as_schedule(schedule)
        sizes, scalar = as_sizes(nbytes)
        run = self._topology(schedule.nranks)._run(schedule, sizes)
        return Prediction.from_clocks(
            schedule, sizes, scalar, run.rank_clock, run.step_time, model=self, notes=run.notes,
            network=run.usage,
        )  # fmt: skip

    def timeline(
        self, schedule: Schedule, nbytes: Any, *, max_messages: int | None = None
    ) -> Timeline:
        """Every message at one size: the equivalent two-level network's timeline
        (:meth:`Topology.timeline <commsim.models.Topology.timeline>`, links included)."""
        schedule = as_schedule(schedule)
        return self._topology(schedule.nranks).timeline(schedule, nbytes, max_messages=max_messages)
