"""What the topology model's timing reads of the model: :class:`NetworkParams`.

The topology model times a schedule two ways: step by step with a static contention mode
(:mod:`commsim.models.topology`) or as one event-driven flow simulation
(:mod:`commsim.models._flow`). Both start from the same clocks and scale the same transfers, so
what they read of the model lives here, in one parameter object that both import: the network,
the per-message overhead, γ, the stragglers given as inputs (each rank's start time, each
rank's slowdown factor), and what the collective library adds (the per-call ``launch`` cost,
a reduction overlapped with its transfer: :mod:`commsim.models._library`). The flow simulation never sees the model itself, so the import graph
of :mod:`commsim.models` has no cycle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from commsim.errors import ParameterError
from commsim.models._inputs import as_time
from commsim.models._library import Protocol, launch_clock
from commsim.topology import Network

__all__ = ["FLOW_RULES", "NetworkParams", "random_skew"]

#: How ``contention="flow"`` shares links and pays latency (:mod:`commsim.models._flow`):
#: ``"fair"`` (default): a message moves bytes from its start, links are shared max-min fair
#: (equal shares, as a link's arbiter serves its queues in turn), and its path latency is added
#: after its last byte; ``"cm02"``: SimGrid's CM02 network model (Velho and Legrand, SIMUTools
#: 2009; ``network_cm02.cpp``): a message takes no bandwidth until its path latency is paid,
#: then shares links in proportion to 1 / its path latency (TCP's RTT unfairness), and ends
#: with its last byte.
FLOW_RULES = ("fair", "cm02")


def random_skew(text: str) -> tuple[float, int]:
    """``"random:T[,seed=S]"``: every rank starts at a time drawn uniformly from ``[0, T]``
    (seeded, so a prediction is reproducible); returns ``(T, S)``, ``S`` 0 by default.

    Examples:
        >>> random_skew("random:50us,seed=3")
        (5e-05, 3)
    """
    head, _, rest = text.partition(":")
    top_text, _, seed_text = rest.partition(",")
    key, _, seed_value = seed_text.partition("=")
    if head.strip() != "random" or not top_text.strip() or (seed_text and key.strip() != "seed"):
        raise ParameterError(
            f"start_skew {text!r}: expected random:TIME or random:TIME,seed=N (e.g. random:50us)"
        )
    seed = 0
    if seed_text:
        if not seed_value.strip().isdigit():
            raise ParameterError(f"start_skew {text!r}: the seed must be an integer >= 0")
        seed = int(seed_value)
    return as_time("start_skew", top_text.strip()), seed


@dataclasses.dataclass(frozen=True)
class NetworkParams:
    """The topology model's parameters, as its timing reads them.

    Attributes:
        network: the network (:class:`commsim.topology.Network`), failed links already removed.
        gamma: reduction time per byte, seconds/byte.
        overhead: software time added to every message's path latency, seconds.
        start_skew: per rank, the time it starts: ``p`` seconds (numbers or time strings), a
            mapping ``{rank: seconds}``, ``"random:T[,seed=S]"`` (uniform in ``[0, T]``,
            :func:`random_skew`), or ``None`` (every rank at 0). Checked against the
            schedule's rank count when a schedule is timed (:meth:`initial_clock`).
        slow_ranks: ``{rank: factor >= 1}`` (factors checked by the model's constructor).
        launch: the collective library's per-call cost, seconds: every rank's clock starts
            there (:func:`commsim.models._library.launch_clock`).
        reduction_overlap: a received message is reduced while it arrives (GPU reduce-copy
            kernels): the receiver is done at the later of its transfer and its reduction,
            not after both (:func:`commsim.models._library.reduction_exposed`).
        protocol: how messages are carried (:class:`commsim.models._library.Protocol`: a
            per-message latency and a bandwidth efficiency), or ``None``.
        channel_bandwidth: the per-channel rate cap, bytes/s, or ``None`` (no cap;
            :func:`commsim.models._library.with_channel_cap`).
        switch_efficiency: the share of its route's rate a message to or from a reducing
            switch moves at (one number, or one per reducing switch:
            :attr:`commsim.models.Topology.switch_shares`;
            :func:`commsim.models._library.message_efficiency`).
        protocol_hops: whether a message takes the protocol's per-message latency (the larger
            of it and its path's); ``False`` for an in-network schedule, whose protocol latency
            is one per call (:func:`commsim.models._library.call_cost`).
        link_profiles: measured rates by link class (:mod:`commsim.models._link_profiles`):
            a message's rate capped at its size's on every class it crosses; a run with them
            times one size.
        flow_rule: how the flow simulation shares links and pays latency (:data:`FLOW_RULES`).

    Examples:
        >>> from commsim.topology import as_network, switch
        >>> net = as_network(switch(4))
        >>> params = NetworkParams(net, 0.0, 0.0, start_skew={1: "1us"}, slow_ranks={2: 3})
        >>> params.initial_clock(4, 1)[:, 0].tolist(), params.slow_factors(4).tolist()
        ([0.0, 1e-06, 0.0, 0.0], [1.0, 1.0, 3.0, 1.0])
    """

    network: Network
    gamma: float
    overhead: float
    start_skew: Sequence[Any] | Mapping[int, Any] | str | None = None
    slow_ranks: Mapping[int, float] = dataclasses.field(default_factory=dict)
    launch: float = 0.0
    reduction_overlap: bool = False
    protocol: Protocol | None = None
    channel_bandwidth: float | None = None
    switch_efficiency: float | np.ndarray = 1.0
    protocol_hops: bool = True
    link_profiles: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    flow_rule: str = "fair"

    def initial_clock(self, nranks: int, nsizes: int) -> np.ndarray:
        """``[nranks, nsizes]`` clocks at time 0: each rank's start skew (0 without one), plus
        the per-call :attr:`launch` cost.

        Raises :class:`~commsim.errors.ParameterError` for a rank outside ``0..nranks-1``, a
        sequence of the wrong length, or a time that is not one.
        """
        clock = np.zeros((nranks, nsizes))
        skew = self.start_skew
        if skew is None:
            return launch_clock(clock, self.launch)
        if isinstance(skew, str):  # "random:50us" or "random:50us,seed=1"
            top, seed = random_skew(skew)
            values = np.random.default_rng(seed).uniform(0.0, top, nranks)
            return launch_clock(clock + values[:, None], self.launch)
        if isinstance(skew, Mapping):
            for r, t in skew.items():
                clock[_rank(r, nranks, "start_skew")] = as_time(f"start_skew[{r}]", t)
            return launch_clock(clock, self.launch)
        values = np.asarray([as_time("start_skew", t) for t in skew])
        if len(values) != nranks:
            raise ParameterError(f"start_skew has {len(values)} values for {nranks} ranks")
        return launch_clock(clock + values[:, None], self.launch)

    def slow_factors(self, nranks: int) -> np.ndarray:
        """``[nranks]`` factors on each rank's transfers and reductions (1 for a rank on time)."""
        slow = np.ones(nranks)
        for r, f in self.slow_ranks.items():
            slow[_rank(r, nranks, "slow_ranks")] = f
        return slow


def _rank(r: Any, nranks: int, what: str) -> int:
    if isinstance(r, bool) or not isinstance(r, int | np.integer) or not 0 <= r < nranks:
        raise ParameterError(f"{what}: rank {r!r} is not one of 0..{nranks - 1}")
    return int(r)
