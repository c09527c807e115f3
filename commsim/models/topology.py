r"""The topology model: schedules timed on a network graph, with link contention.

A message's time is its path latency plus its bytes over its rate; how links are shared sets the
rate (``contention=``, :mod:`commsim.models._contention`; ``"flow"`` is an event-driven
flow-level simulation, :mod:`commsim.models._flow`). Everything else follows
:class:`~commsim.models.Hockney`'s rules, so the two agree exactly where the network adds nothing
(one non-blocking switch, ``contention="none"``):

* ranks sit on hosts (``placement``, :func:`commsim.topology.place`), one rank per host;
* each step's messages (one per ``(step, src, dst, channel)``) run in rounds in which a port
  sends one and receives one message (full duplex; :func:`commsim._messages.matchings`); every
  channel of a schedule is a port of its own with its own clock (IR rule 6,
  :func:`commsim._messages.port_ranks`), so a rank's channels progress independently; the
  messages of one round, on every port of every rank, are in flight together and share links
  (a host's own links too: a torus chip's six, NVLink beside a NIC);
* with ``port_rule="link"`` (:mod:`commsim.models._link_ports`) a rank drives each of its host's
  links at once: a port has a queue per link of its host, each with its own clock within a step
  (a message waits for its sender's queue on its first link and its receiver's on its last),
  and the queues meet at the latest of their clocks at the step's end, so a step's messages that
  leave by distinct links (NVLink and the NIC, a torus chip's six links) are in flight together
  and share links through the contention mode; a host with one link (one NIC behind a switch)
  keeps the default's numbers exactly;
* per-port clocks and rendezvous: a message :math:`q \to r` starts at
  :math:`s = \max(c_q, c_r)` and ends at :math:`e = s + L_m + b / R_m`, where :math:`L_m` is the
  sum of its links' latencies (plus ``overhead``) and :math:`R_m` its rate; then
  :math:`c_q \leftarrow \max(c_q, e)`, :math:`c_r \leftarrow \max(c_r, e + b_\text{red}\gamma)`.

The collective library's layer (:mod:`commsim.models._library`): ``launch`` is a per-call
cost every rank's clock starts with; with ``reduction_overlap`` the receiver reduces while the
message arrives, :math:`c_r \leftarrow \max(c_r, e + \max(0, b_\text{red}\gamma - b/R_m))`.
With a ``protocol`` (NCCL's LL, LL128, Simple: :class:`~commsim.models._library.Protocol`) a
message's latency is the larger of its path's and the protocol's per-message latency, its rate
the protocol's efficiency times the links' (every link carries the protocol's flags too), and
the per-call cost is the protocol's. With ``link_efficiency`` the library drives each link
class at a share of its rate (NCCL's NVLink rate, 20.6 of 25 GB/s on Hopper): messages are
timed on those rates, the bounds keep the line rates; with ``switch_efficiency`` a message to
or from a reducing switch moves at that share of its route's rate (NCCL's ``nvlsEfficiency``).
All are off by default (a cluster's GPU presets set ``launch``, ``reduction_overlap`` and the
efficiencies; ``protocol`` is chosen per prediction).

Stragglers, as inputs: ``start_skew`` (each rank's clock at time 0), ``slow_ranks`` (a factor
:math:`f \ge 1` per rank on its transfers, :math:`\max(f_q, f_r)`, and its reductions) and
``link_factor`` (per edge a bandwidth factor in [0, 1]; 0 is a failed link: it is removed and
routes go around it).

The prediction carries :class:`~commsim.models.NetworkUsage`: bytes and busy time per link, the
busiest link class, and the critical path.

Cost of the model: the rates of a round depend only on which pairs talk, so they are computed
once per distinct round (a ring's rounds are all one) and cached; timing is then one compiled
pass over each round's messages.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from commsim import units
from commsim._ir import Schedule, Step
from commsim._lazy import lazy_module
from commsim._messages import Messages, port_messages
from commsim.errors import NoRouteError, ParameterError, ResourceError
from commsim.models._bounds import lower_bound
from commsim.models._contention import CONTENTION, bottleneck_link, path_latency, rates
from commsim.models._inputs import as_inverse_bandwidth, as_schedule, as_sizes, as_time
from commsim.models._library import (
    Protocol,
    as_protocol,
    as_shares,
    call_cost,
    message_efficiency,
    protocol_latency,
    reduction_exposed,
    with_channel_cap,
)
from commsim.models._link_ports import PORT_RULES, link_queue_messages, link_queues
from commsim.models._link_profiles import (
    PerSizeRuns,
    as_link_profiles,
    capped_classes,
    message_caps,
)
from commsim.models._network_params import FLOW_RULES, NetworkParams, random_skew
from commsim.models._prediction import Prediction
from commsim.models._usage import CriticalPath, NetworkUsage, Timeline, route_kinds
from commsim.topology import Network, as_bandwidth, as_network, as_share, place

if TYPE_CHECKING:
    import networkx as nx

    from commsim.models._flow import _FlowRun
else:
    nx = lazy_module("networkx")

__all__ = ["CRITICAL_PATH_BUDGET", "Topology"]

#: Critical paths are tracked when a schedule has at most this many messages (16 bytes each).
CRITICAL_PATH_BUDGET = 20_000_000
_CACHE_ROUNDS = 4096  # distinct rounds whose routes and rates are kept


def _check_rules(contention: str, port_rule: str, flow_rule: str) -> None:
    """One line for an unknown contention mode, port rule or flow rule, or a flow rule given
    to a static contention mode."""
    if contention not in CONTENTION:
        close = difflib.get_close_matches(str(contention), CONTENTION, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ParameterError(
            f"unknown contention {contention!r}{hint}: use {', '.join(CONTENTION)}"
        )
    if port_rule not in PORT_RULES:
        raise ParameterError(
            f"unknown port_rule {port_rule!r}: use {' or '.join(PORT_RULES)} "
            "(a port per channel, or per channel and host link)"
        )
    if flow_rule not in FLOW_RULES:
        raise ParameterError(
            f"unknown flow_rule {flow_rule!r}: use {' or '.join(FLOW_RULES)} "
            "(equal shares, latency after the bytes; or SimGrid's CM02)"
        )
    if flow_rule != "fair" and contention != "flow":
        raise ParameterError(
            f"flow_rule={flow_rule!r} is a rule of contention='flow' (the event-driven "
            f"simulation), got contention={contention!r}"
        )


class Topology:
    """Schedules timed on a network (implements :class:`commsim.models.Model`).

    Args:
        network: a :class:`commsim.topology.Network` or a networkx graph (edge ``bandwidth``,
            ``latency``; see :mod:`commsim.topology`).
        placement: ``"linear"``, ``"round_robin"``, ``"random[:SEED]"`` or a list of host
            indices (:func:`commsim.topology.place`); applied to each schedule's rank count.
        contention: ``"none"``, ``"bottleneck"`` (default), ``"maxmin"`` or ``"flow"``.
        gamma: reduction time per byte (seconds/byte or a bandwidth string).
        overhead: software time added to every message's path latency (seconds or ``"1us"``).
        start_skew: per rank, the time it starts (``"random:50us[,seed=1]"``: uniform in
            ``[0, 50 µs]``; a sequence of ``p`` seconds, or a mapping
            ``{rank: seconds}``).
        slow_ranks: ``{rank: factor >= 1}``: its transfers and reductions take ``factor`` times
            longer.
        link_factor: ``{(u, v): factor in [0, 1]}`` per graph edge: its bandwidth times
            ``factor``; 0 removes the link (a failed link).
        launch: the collective library's per-call cost (seconds or ``"6.6us"``), paid once
            by every rank before its first message (default 0).
        reduction_overlap: reduce a received message while it arrives (GPU reduce-copy
            kernels): charge the larger of transfer and reduction, not their sum (default
            ``False``: the serial rule of CPU/MPI reductions).
        protocol: ``"LL"``, ``"LL128"``, ``"Simple"`` (:data:`commsim.models._library.PROTOCOLS`)
            or ``None`` (default: messages at the links' latency and rate, the per-call cost
            ``launch``); a protocol brings its own per-call cost.
        channel_bandwidth: a per-channel rate cap (bytes/s or ``"60GB/s"``): each message
            also crosses a private link of this rate
            (:func:`~commsim.models._library.with_channel_cap`); ``None`` (default): no cap.
        port_rule: ``"channel"`` (default): a port per (rank, channel) sends one and receives
            one message per round; ``"link"``: a queue per link of its host, the queues meeting
            at each step's end (:mod:`commsim.models._link_ports`: NVLink beside the NIC, a
            torus chip's links).
        link_efficiency: ``{link class: share in (0, 1]}``: the library drives those links at
            that share of their rate (:meth:`commsim.topology.Network.driven`); the
            bounds keep the line rates. ``None`` (default): every link at its rate.
        switch_efficiency: the share of its route's rate a message to or from a reducing
            switch of a server reaches (in-network reduction, NCCL's ``nvlsEfficiency``;
            default 1).
        fabric_efficiency: the same for a reducing switch of the fabric (InfiniBand SHARP:
            NCCL's ``.85`` on CollNetDirect from Hopper on; default 1).
        link_profiles: ``{link class: profile}``, measured rates by message size
            (:class:`commsim.clusters.LinkProfile`, a cluster file's ``[profiles.CLASS]``): a
            message's rate is capped at the profiled rate of its size on every class it
            crosses (:mod:`commsim.models._link_profiles`); each size is then timed on its own.
        flow_rule: with ``contention="flow"``: ``"fair"`` (default: bytes from a message's
            start, equal max-min shares, its path latency after its last byte) or ``"cm02"``
            (SimGrid's CM02 network model, TCP-like: its path latency first, then shares in
            proportion to 1 / path latency; :data:`~commsim.models._network_params.FLOW_RULES`).

    Examples:
        >>> import commsim
        >>> from commsim.topology import switch, ring
        >>> s = commsim.build("allreduce", "recursive_doubling", nranks=8)
        >>> flat = Topology(switch(8)).predict(s, "1MiB").time
        >>> phys = Topology(ring(8, latency=0.5e-6)).predict(s, "1MiB").time
        >>> phys > flat  # partners 4 hops apart share ring links
        True
    """

    name = "topology"

    def __init__(
        self,
        network: Any,
        *,
        placement: str | Sequence[int] = "linear",
        contention: str = "bottleneck",
        gamma: float | str = 1 / 100e9,
        overhead: float | str = 0.0,
        start_skew: Sequence[float] | Mapping[int, float] | str | None = None,
        slow_ranks: Mapping[int, float] | None = None,
        link_factor: Mapping[tuple[Any, Any], float] | None = None,
        launch: float | str = 0.0,
        reduction_overlap: bool = False,
        protocol: Protocol | str | None = None,
        channel_bandwidth: float | str | None = None,
        port_rule: str = "channel",
        link_efficiency: Mapping[str, float] | None = None,
        switch_efficiency: float = 1.0,
        link_profiles: Mapping[str, Any] | None = None,
        fabric_efficiency: float = 1.0,
        flow_rule: str = "fair",
    ) -> None:
        _check_rules(contention, port_rule, flow_rule)
        self.port_rule, self.flow_rule = port_rule, flow_rule
        net = as_network(network)
        if link_factor:
            net = Network(_apply_link_factor(net.graph, link_factor))
        #: the network at its links' line rates (the bounds); :attr:`network` is the one the
        #: messages are timed on, each link class at its ``link_efficiency``
        self.line_network = net
        self.link_efficiency = as_shares(link_efficiency)
        self.network = net.driven(self.link_efficiency)
        self.switch_efficiency = as_share(switch_efficiency, "switch_efficiency")
        self.fabric_efficiency = as_share(fabric_efficiency, "fabric_efficiency")
        self.link_profiles = as_link_profiles(link_profiles, net.kinds)
        self.placement = placement
        self.contention = contention
        self.gamma = as_inverse_bandwidth("gamma", gamma)
        self.overhead = as_time("overhead", overhead)
        if isinstance(start_skew, str):
            random_skew(start_skew)  # a bad spec is one line now, not at the first prediction
        self.start_skew = start_skew
        self.slow_ranks = dict(slow_ranks or {})
        for r, f in self.slow_ranks.items():
            if isinstance(f, bool) or not isinstance(f, int | float) or not 1 <= f < np.inf:
                raise ParameterError(
                    f"slow_ranks: rank {r}'s factor must be a number >= 1, got {f!r}"
                )
        self.link_factor = dict(link_factor or {})
        self.launch = as_time("launch", launch)
        if not isinstance(reduction_overlap, bool | np.bool_):
            raise ParameterError(
                f"reduction_overlap must be true or false, got {reduction_overlap!r}"
            )
        self.reduction_overlap = bool(reduction_overlap)
        self.protocol = as_protocol(protocol)
        self.channel_bandwidth = (
            None if channel_bandwidth is None else as_bandwidth(channel_bandwidth)
        )
        self._rounds: dict[bytes, tuple[np.ndarray, ...]] = {}
        self._last_round: tuple[np.ndarray, ...] | None = None  # (hosts, src, dst, costs...)

    # -- the Model protocol -------------------------------------------------------------------
    def __repr__(self) -> str:
        """Says which γ it took: a bare network brings none, and 1/(100 GB/s) is the default
        (a cluster's model, ``commsim.tuner.cluster_model``, takes the cluster's)."""
        gamma = "0s/B" if self.gamma == 0 else f"1/({units.format_bandwidth(1 / self.gamma)})"
        return f"Topology({self._graph_name()}, contention={self.contention!r}, gamma={gamma})"

    def _graph_name(self) -> str:
        g = self.network.graph
        return str(g.graph.get("name") or f"graph of {self.network.nhosts} hosts")

    def describe(self) -> str:
        """E.g. ``topology fat_tree(1024) contention=bottleneck gamma=1/(100 GB/s)``."""
        gamma = "0s/B" if self.gamma == 0 else f"1/({units.format_bandwidth(1 / self.gamma)})"
        extra = f" overhead={units.format_time(self.overhead)}" if self.overhead else ""
        launch = self.call_cost
        extra += f" launch={units.format_time(launch)}" if launch else ""
        if self.protocol is not None and self.protocol.switch_latency and self.places_in_network:
            extra += " (in-network rows: NCCL's NVLS or CollNet latency per call)"
        extra += f" protocol={self.protocol.name}" if self.protocol else ""
        cap = self.channel_bandwidth
        extra += f" channel cap={units.format_bandwidth(cap)}" if cap is not None else ""
        extra += " reduction overlapped" if self.reduction_overlap else ""
        driven = [f"{k}={v:.1%}" for k, v in self.link_efficiency.items()]
        eta = self.switch_efficiency
        driven += [f"in-switch={eta:.0%}"] if eta != 1 else []
        driven += [f"in-fabric={self.fabric_efficiency:.0%}"] if self.fabric_efficiency != 1 else []
        extra += f" driven at {','.join(driven)}" if driven else ""
        extra += " ports=link" if self.port_rule == "link" else ""
        extra += f" flow_rule={self.flow_rule}" if self.flow_rule != "fair" else ""
        extra += f" profiled={','.join(self.link_profiles)}" if self.link_profiles else ""
        place_ = self.placement if isinstance(self.placement, str) else "explicit"
        stragglers = (
            " with stragglers"
            if (self.start_skew is not None or self.slow_ranks or self.link_factor)
            else ""
        )
        return (
            f"topology {self._graph_name()} contention={self.contention} placement={place_} "
            f"gamma={gamma}{extra}{stragglers}"
        )

    def to_dict(self) -> dict[str, Any]:
        net = self.network
        return {
            "name": self.name,
            "topology": self._graph_name(),
            "hosts": net.nhosts,
            "links": net.nlinks,
            "link_classes": list(net.kinds),
            "contention": self.contention,
            "placement": self.placement
            if isinstance(self.placement, str)
            else list(self.placement),
            "gamma_s_per_byte": self.gamma,
            "overhead_s": self.overhead,
            "launch_s": self.call_cost,
            "reduction_overlap": self.reduction_overlap,
            "protocol": self.protocol.name if self.protocol else None,
            "channel_bandwidth_Bps": self.channel_bandwidth,
            **({"link_efficiency": dict(self.link_efficiency)} if self.link_efficiency else {}),
            **(
                {"switch_efficiency": self.switch_efficiency} if self.switch_efficiency != 1 else {}
            ),
            **(
                {"fabric_efficiency": self.fabric_efficiency} if self.fabric_efficiency != 1 else {}
            ),
            **({"port_rule": self.port_rule} if self.port_rule != "channel" else {}),
            **({"flow_rule": self.flow_rule} if self.flow_rule != "fair" else {}),
            **(
                {"link_profiles": {k: _profile_dict(v) for k, v in self.link_profiles.items()}}
                if self.link_profiles
                else {}
            ),
        }

    #: what :meth:`lower_bound` is, for table headers; :meth:`bound` names the one that binds
    bound_name = (
        "strongest graph bound (injection, cut, bisection; with a switch row's helper ranks, "
        "the in-network bound, which holds for every row beside it; docs/bounds.md)"
    )

    def lower_bound(self, collective: str, nranks: int, nbytes: Any, helpers: int = 0) -> Any:
        """Seconds no schedule of ``collective`` on ``nranks`` ranks can beat on this network
        (:meth:`bound`'s value)."""
        return self.bound(collective, nranks, nbytes, helpers)[0]

    def bound(self, collective: str, nranks: int, nbytes: Any, helpers: int = 0) -> tuple[Any, str]:
        r"""The strongest lower bound of this model's port rules and its name.

        A rank drives all of its host's links at once (its channels), so the bound is the
        largest of the graph's injection, cut and bisection bounds
        (:mod:`commsim.models._graph_bounds`), plus one message's least latency:

        .. math::

            T \ge \alpha_\min + n \max_{\text{cuts } S}
            \max\left(\frac{d_\text{in}(S)}{B_\text{in}(S)},
            \frac{d_\text{out}(S)}{B_\text{out}(S)}\right)

        With ``contention="none"`` no link is shared, so a schedule with enough channels moves
        any number of bytes at once: only the latency term holds. A schedule with ``helpers``
        (ranks that hold no data, IR rule 7: a reducing switch, dedicated servers) gets the
        in-network bound over its workers
        (:func:`~commsim.models._graph_bounds.in_network_bound`: for allreduce
        :math:`n/B_\text{in}`, each worker sends and receives its data once).

        Returns:
            ``(seconds, name)``: a float for a number ``nbytes`` (an array for an array), and
            the bound that binds, e.g. ``"injection bound (all of a host's links)"``, followed
            by ``"; no bisection cut on over 512 nodes (max-flow)"`` where a family was left
            out.

        Examples:
            >>> from commsim.topology import switch
            >>> net = switch(4, bandwidth=1e9, latency=0.0)
            >>> Topology(net).bound("allgather", 4, 4e9)  # (p - 1)/p · n / B
            (3.0, "injection bound (all of a host's links)")
        """
        from commsim.models._graph_bounds import BOUND_NAMES, graph_cuts

        if nranks - helpers > self.line_network.nhosts:
            place(self.line_network, nranks - helpers, "linear")  # raises the one-line error
        zero = lower_bound(collective, nranks, nbytes, 0.0, 0.0, 0.0, helpers=helpers)  # checks
        if nranks - helpers < 2:
            return zero, "one rank: nothing to move"
        alpha, _ = self._bound_terms(nranks, helpers)
        if self.contention == "none":
            return zero + alpha, "one message's latency (contention=none shares no link)"
        w = nranks - helpers
        cache = self.__dict__.setdefault("_bound_cuts", {})
        cuts = cache.get(w)
        if cuts is None:
            net = self.line_network  # the hardware's rates: no schedule beats them
            cuts = cache[w] = graph_cuts(net, place(net, w, self.placement))
        per_byte = _per_byte(collective, cuts, helpers)
        key = max(per_byte, key=lambda k: per_byte[k])  # the first of equals: injection
        value = zero + alpha + np.asarray(nbytes, float) * per_byte[key]
        name = "; ".join((BOUND_NAMES[key], *cuts.notes))
        return (float(value) if np.ndim(value) == 0 else value), name

    def _bound_terms(self, nranks: int, helpers: int = 0) -> tuple[float, float]:
        net = self.line_network
        w = nranks - helpers
        hosts = net.hosts[place(net, w, self.placement)] if w > 1 else net.hosts[:1]
        is_placed = np.zeros(len(net.nodes), dtype=bool)
        is_placed[hosts] = True
        out = is_placed[net.link_src]
        inn = is_placed[net.link_dst]
        # a route of one link is a direct link; a longer one starts with a link out of a placed
        # host and ends with another into one; with helper ranks (a switch may be one), some
        # message still leaves or enters a worker's host
        direct = float(net.latency[out & inn].min(initial=np.inf))
        two = float(net.latency[out].min(initial=np.inf) + net.latency[inn].min(initial=np.inf))
        if helpers:
            two = float(
                min(net.latency[out].min(initial=np.inf), net.latency[inn].min(initial=np.inf))
            )
        alpha = min(direct, two)
        alpha = (0.0 if not np.isfinite(alpha) else alpha) + self.overhead
        # a message's rate is at most its first link's and its last link's bandwidth
        fastest = float(net.bandwidth[out | inn].max(initial=0.0))
        beta = 0.0 if not (fastest > 0) or np.isinf(fastest) else 1.0 / fastest
        return alpha, beta

    def predict(self, schedule: Schedule, nbytes: Any) -> Prediction:
        """Time ``schedule`` on the network for message size(s) ``nbytes`` (bytes, an array, or
        a size string such as ``"1KiB..1GiB"``)."""
        schedule = as_schedule(schedule)
        sizes, scalar = as_sizes(nbytes)
        run = self._run(schedule, sizes)
        return Prediction.from_clocks(
            schedule, sizes, scalar, run.rank_clock, run.step_time, model=self, notes=run.notes,
            network=run.usage, protocol=self.protocol.name if self.protocol else None,
        )  # fmt: skip

    def timeline(
        self, schedule: Schedule, nbytes: Any, *, max_messages: int | None = None
    ) -> Timeline:
        """Every message's start and end for one message size (what :func:`chrome_trace`
        draws); refuses (:class:`~commsim.errors.ResourceError`) as soon as the schedule has
        more than ``max_messages`` messages (``None``: :data:`CRITICAL_PATH_BUDGET`)."""
        schedule = as_schedule(schedule)
        sizes, _ = as_sizes(nbytes)
        if len(sizes) != 1:
            raise ParameterError("a timeline is for one message size")
        limit = CRITICAL_PATH_BUDGET if max_messages is None else max_messages
        return self._run(schedule, sizes, max_messages=limit).timeline()

    def _run(
        self, schedule: Schedule, sizes: np.ndarray, *, max_messages: int | None = None
    ) -> _Run | _FlowRun:
        """The clocks of ``schedule`` on the network (the one computation of :meth:`predict`
        and :meth:`timeline`, and of :class:`~commsim.models.TwoLevelHockney`'s): a static
        contention mode's run, or the flow simulation's."""
        schedule.spec.check_layout(schedule.nranks, schedule.ndata)
        # a message's cap depends on its size: the static modes time one size at a time (flow
        # does already, and caps each size's messages itself)
        if self.link_profiles and len(sizes) > 1 and self.contention != "flow":
            return PerSizeRuns(
                [self._run(schedule, sizes[k : k + 1], max_messages=max_messages)
                 for k in range(len(sizes))]
            )  # fmt: skip
        hosts = self.hosts_of(schedule)
        queues = link_queues(self.network, hosts) if self.port_rule == "link" else 1
        params = self._params_of(schedule, hosts)
        try:
            if self.contention == "flow":
                from commsim.models._flow import simulate  # numba: imported on first use

                return simulate(
                    params, schedule, sizes, hosts, max_messages=max_messages,
                    split=self._split(hosts, queues), queues=queues,
                )  # fmt: skip
            run = _Run(self, schedule, sizes, hosts, max_messages=max_messages, queues=queues,
                       params=params)  # fmt: skip
            run.split = self._split(hosts, queues)
            for i, st in enumerate(schedule.steps()):
                run.step(i, st)
            return run
        except NoRouteError as e:
            if schedule.in_network:
                raise NoRouteError(_SWITCH_OUT_OF_REACH.format(error=e)) from None
            raise

    def _split(
        self, hosts: np.ndarray, queues: int = 1
    ) -> Callable[..., tuple[Messages, list[np.ndarray]]]:
        """How a step becomes messages and rounds under :attr:`port_rule`:
        :func:`~commsim._messages.port_messages`, or
        :func:`~commsim.models._link_ports.link_queue_messages` on this network (``queues``
        per port)."""
        if self.port_rule == "channel":
            return port_messages
        return functools.partial(
            link_queue_messages, network=self.network, hosts=hosts, queues=queues
        )

    def hosts_of(self, schedule: Schedule) -> np.ndarray:
        """Where each rank of ``schedule`` sits: host indices by the placement; a schedule's
        in-network helper ranks (``Schedule.in_network``, IR rule 7) on the reducing switches
        next to its workers (endpoints past the hosts, :func:`commsim.topology.place`).

        Raises:
            ParameterError: more ranks than hosts, or in-network helpers on a network with no
                reducing switch next to the ranks (an NVLS row on a cluster without NVSwitch).
        """
        helpers = schedule.helpers if schedule.in_network else 0
        tier = schedule.switch_tier or "server"
        return place(
            self.network, schedule.nranks, self.placement, switch_helpers=helpers, tier=tier
        )

    # -- inputs -------------------------------------------------------------------------------
    @property
    def _params(self) -> NetworkParams:
        """What the timing reads of this model, as the flow simulation reads it too (the
        network, γ, the overhead, the stragglers:
        :class:`~commsim.models._network_params.NetworkParams`)."""
        return NetworkParams(
            self.network, self.gamma, self.overhead, self.start_skew, self.slow_ranks,
            self.call_cost, self.reduction_overlap, self.protocol, self.channel_bandwidth,
            self.switch_shares, link_profiles=self.link_profiles, flow_rule=self.flow_rule,
        )  # fmt: skip

    @property
    def switch_shares(self) -> float | np.ndarray:
        """The share of its route's rate a message to or from each reducing switch reaches:
        :attr:`switch_efficiency` for a server's switch, :attr:`fabric_efficiency` for a
        fabric's (one number where they are equal)."""
        if self.fabric_efficiency == self.switch_efficiency:
            return self.switch_efficiency
        tier = self.network.reducing_tier
        return np.where(tier == 1, self.fabric_efficiency, self.switch_efficiency)

    @property
    def places_in_network(self) -> bool:
        """Whether the network has a switch that reduces, where in-network helper ranks sit
        (:meth:`hosts_of`)."""
        return len(self.network.reducing) > 0

    def check_carried(self, schedule: Schedule) -> None:
        """Raise :class:`~commsim.errors.ParameterError` where this model's protocol cannot
        carry ``schedule`` (an in-network schedule under LL or LL128,
        :func:`~commsim.models._library.call_cost`), before any work."""
        if schedule.in_network and self.protocol is not None:
            call_cost(self.protocol, self.launch, schedule.in_network, 1)

    def _params_of(self, schedule: Schedule, hosts: np.ndarray) -> NetworkParams:
        """:attr:`_params` for ``schedule``: an in-network schedule under a protocol pays the
        protocol's in-network latency once per call and its messages their paths' latencies
        (:func:`~commsim.models._library.call_cost`)."""
        params = self._params
        if not (schedule.in_network and self.protocol is not None):
            return params
        per_server = np.unique(self.network.endpoint_server[hosts[: schedule.workers]],
                               return_counts=True)[1]  # fmt: skip
        launch = call_cost(self.protocol, self.launch, schedule.in_network, len(per_server),
                           int(per_server.max()))  # fmt: skip
        return dataclasses.replace(params, launch=launch, protocol_hops=False)

    @property
    def call_cost(self) -> float:
        """The per-call cost a prediction starts with: the protocol's, else ``launch``."""
        return self.protocol.launch if self.protocol is not None else self.launch

    def initial_clock(self, nranks: int, nsizes: int) -> np.ndarray:
        """``[nranks, nsizes]`` clocks at time 0 (:meth:`NetworkParams.initial_clock
        <commsim.models._network_params.NetworkParams.initial_clock>`)."""
        return self._params.initial_clock(nranks, nsizes)

    def slow_factors(self, nranks: int) -> np.ndarray:
        """``[nranks]`` straggler factors (:meth:`NetworkParams.slow_factors
        <commsim.models._network_params.NetworkParams.slow_factors>`)."""
        return self._params.slow_factors(nranks)

    def round_costs(
        self,
        hosts: np.ndarray,
        src: np.ndarray,
        dst: np.ndarray,
        hops: bool = True,
        nbytes: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        """``(latency, inverse rate, bottleneck class, indptr, links, efficiency)`` of a round's
        messages (cached per round; the efficiency,
        :func:`~commsim.models._library.message_efficiency`, is already in the inverse rate);
        ``hops``: the protocol's per-message latency applies
        (:attr:`NetworkParams.protocol_hops <commsim.models._network_params.NetworkParams>`);
        ``nbytes``: the messages' bytes, which the :attr:`link_profiles` cap rates by (read
        only where the model has profiles)."""
        if self.link_profiles:
            return self._round_costs(hosts, src, dst, hops, nbytes)
        last = self._last_round  # consecutive equal rounds (rings) skip hashing
        if (
            last is not None
            and last[0] is hosts
            and last[3] == hops
            and np.array_equal(last[1], src)
            and np.array_equal(last[2], dst)
        ):
            return last[4:]
        costs = self._round_costs(hosts, src, dst, hops)
        self._last_round = (hosts, src, dst, hops, *costs)
        return costs

    def _round_costs(
        self,
        hosts: np.ndarray,
        src: np.ndarray,
        dst: np.ndarray,
        hops: bool = True,
        nbytes: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        sized = b"" if nbytes is None or not self.link_profiles else b"|" + nbytes.tobytes()
        key = hashlib.blake2b(
            src.tobytes() + b"|" + dst.tobytes() + (b"" if hops else b"|no hops") + sized,
            digest_size=16,
        ).digest()
        hit = self._rounds.get(key)
        if hit is not None and hit[0] is hosts:
            return hit[1:]
        net = self.network
        indptr, links = net.routes(hosts[src], hosts[dst])
        same = net.endpoint_server[hosts[src]] == net.endpoint_server[hosts[dst]]
        protocol = self.protocol if hops else None
        lat = protocol_latency(path_latency(indptr, links, net.latency), same, protocol)
        lat = lat + self.overhead
        cap, cap_kind = message_caps(self.link_profiles, net.kinds, self.channel_bandwidth,
                                     net.link_kind, indptr, links, nbytes if sized else None)  # fmt: skip
        capped = with_channel_cap(indptr, links, net.bandwidth, cap)
        rate = rates(self.contention, *capped)
        with np.errstate(divide="ignore"):
            inv = np.where(np.isinf(rate), 0.0, 1.0 / rate)
        eta = message_efficiency(
            self.protocol, self.switch_shares, hosts[src], hosts[dst], net.nhosts
        )
        inv = inv / eta
        alone = np.arange(len(indptr) - 1) if self.contention == "none" else None  # no sharing
        cls = net.link_kind[bottleneck_link(indptr, links, net.bandwidth, group=alone)]
        cls = capped_classes(cls, cap_kind, capped, net.nlinks, alone)
        if len(self._rounds) >= _CACHE_ROUNDS:
            self._rounds.clear()
        self._rounds[key] = (hosts, lat, inv, cls, indptr, links, eta)
        return lat, inv, cls, indptr, links, eta


#: A message between a GPU and an in-network helper that sits on another server's switch: the
#: schedule's servers (helper ``i`` beside worker ``i mod w``, :func:`commsim.topology.place`)
#: are not the network's.
_SWITCH_OUT_OF_REACH = (
    "{error}. A rank of this in-network schedule talks to a reducing switch that is not its "
    "server's: the schedule's servers (its ranks_per_node, ranks numbered server by server) "
    "do not match the network's; use the network's server size and a linear placement"
)


def _profile_dict(profile: Any) -> Any:
    """A profile as JSON reads it (its ``to_dict`` where it has one)."""
    return profile.to_dict() if hasattr(profile, "to_dict") else repr(profile)


def _per_byte(collective: str, cuts: Any, helpers: int) -> dict[str, float]:
    """Seconds per byte of each bound family; with helper ranks, the in-network bound alone."""
    from commsim.models._graph_bounds import cut_bound, in_network_bound

    if helpers:
        return {"in_network": in_network_bound(collective, cuts)}
    return cut_bound(collective, cuts)


def _apply_link_factor(graph: nx.Graph, factors: Mapping[tuple[Any, Any], float]) -> nx.Graph:
    g = graph.copy()
    for edge, f in factors.items():
        try:
            u, v = edge
        except (TypeError, ValueError):
            raise ParameterError(f"link_factor keys are edges (u, v), got {edge!r}") from None
        if not g.has_edge(u, v):
            raise ParameterError(f"link_factor: the topology has no edge ({u!r}, {v!r})")
        if isinstance(f, bool) or not isinstance(f, int | float) or not 0 <= f <= 1:
            raise ParameterError(f"link_factor of ({u!r}, {v!r}) must be in [0, 1], got {f!r}")
        if f == 0:
            g.remove_edge(u, v)
        else:
            from commsim.topology import as_bandwidth

            g.edges[u, v]["bandwidth"] = as_bandwidth(g.edges[u, v]["bandwidth"]) * f
    return g


class _Run:
    """The per-rank clocks and link counters of one prediction, advanced round by round."""

    def __init__(
        self,
        model: Topology,
        schedule: Schedule,
        sizes: np.ndarray,
        hosts: np.ndarray,
        *,
        max_messages: int | None = None,
        queues: int = 1,
        params: NetworkParams | None = None,
    ) -> None:
        from commsim.models import _topology_kernels as kern  # numba: imported on first use

        self.kern = kern
        # one clock per port: virtual rank r·K + channel (port_ranks); under the link-port rule
        # one per port and host link, (r·K + channel)·queues + slot (commsim.models._link_ports)
        self.queues = queues
        ns, K = len(sizes), schedule.nchannels * queues
        p = schedule.nranks * K
        self.K = K
        hosts = np.repeat(hosts, K) if K > 1 else hosts
        self.model, self.schedule, self.hosts, self.p = model, schedule, hosts, p
        self.per_unit = sizes / schedule.nbytes_units
        self.gw = model.gamma * self.per_unit
        params = model._params if params is None else params
        self.params = params
        self.clock = np.repeat(params.initial_clock(schedule.nranks, ns), K, axis=0)
        ncomp = kern.TRANSFER + len(model.network.kinds)
        self.comp = np.zeros((p, ncomp, ns))
        self.comp[:, kern.OTHER, :] = self.clock  # start skew
        self.mcomp = np.empty((max(p, 1), ncomp, ns))
        self.slow = np.repeat(params.slow_factors(schedule.nranks), K)
        self.step_time = np.zeros((schedule.nsteps, ns))
        self.last = self.clock.max(axis=0) if p else np.zeros(ns)
        self.tmp = np.empty((max(p, 1), ns))
        self.kc = ns - 1  # the critical path is tracked at the largest index (last size)
        self.setter = np.full(p, -1, dtype=np.int64)
        self.track = (schedule.ntransfers_hint or 0) <= CRITICAL_PATH_BUDGET
        self.nmsg = 0
        self.max_messages = max_messages  # a timeline: refuse past it, before timing the rest
        self.chunks: list[tuple[np.ndarray, ...]] = []
        self.units_by_round: dict[int, tuple[np.ndarray, ...]] = {}
        self.kernel = kern.round_per_message
        self.split: Callable[..., tuple[Messages, list[np.ndarray]]] = port_messages

    def step(self, i: int, st: Step) -> None:
        if len(st.src):
            self.schedule.check_step(st, i)
            msg, rounds = self.split(st, self.schedule, self.schedule.nchannels)
            for idx in rounds:
                self._round(i, msg.src[idx], msg.dst[idx], msg.units[idx], msg.reduce_units[idx])
            if self.queues > 1 and len(msg.src):
                self._meet(np.concatenate([msg.src, msg.dst]))
            if len(msg.local_rank):
                red = np.bincount(msg.local_rank, msg.local_reduce_units, minlength=self.p)
                if self.queues > 1:  # on the port's first queue: every queue of it (they met)
                    red = np.repeat(red[:: self.queues], self.queues)
                work = np.multiply.outer(red * self.slow, self.gw)
                self.clock += work
                self.comp[:, self.kern.REDUCTION, :] += work
                self.last = np.maximum(self.last, self.clock[msg.local_rank].max(axis=0))
            if len(msg.src):
                self.last = np.maximum(
                    self.last,
                    np.maximum(self.clock[msg.src].max(axis=0), self.clock[msg.dst].max(axis=0)),
                )
        self.step_time[i] = self.last

    def _meet(self, queues_used: np.ndarray) -> None:
        """The link queues of every port that ``queues_used`` touch take the latest clock of
        their port, with its time parts and critical-path setter (the end of a step under the
        link-port rule, :mod:`commsim.models._link_ports`)."""
        q = self.queues
        rows = np.unique(queues_used // q)[:, None] * q + np.arange(q)  # [ports, queues]
        ns = self.clock.shape[1]
        best = np.take_along_axis(rows[:, :, None], self.clock[rows].argmax(axis=1)[:, None, :],
                                  axis=1)[:, 0, :]  # fmt: skip  # [ports, sizes]: the latest queue
        cols = np.arange(ns)
        self.clock[rows] = self.clock[best, cols][:, None, :]
        self.comp[rows] = np.moveaxis(self.comp[best, :, cols], 1, 2)[:, None]
        self.setter[rows] = self.setter[best[:, self.kc]][:, None]

    def _round(
        self, i: int, src: np.ndarray, dst: np.ndarray, units: np.ndarray, red: np.ndarray
    ) -> None:
        nbytes = units * self.per_unit[0] if self.model.link_profiles else None
        lat, inv, cls, indptr, links, eta = self.model.round_costs(
            self.hosts, src, dst, self.params.protocol_hops, nbytes
        )
        m = len(src)
        if self.max_messages is not None and self.nmsg + m > self.max_messages:
            raise ResourceError(
                f"a timeline of more than {self.max_messages:,} messages is refused: "
                f"use a smaller p or fewer segments"
            )
        if m > len(self.tmp):
            self.tmp = np.empty((m, self.clock.shape[1]))
            self.mcomp = np.empty((m, *self.comp.shape[1:]))
        track = self.track and self.nmsg + m <= CRITICAL_PATH_BUDGET
        pred = np.empty(m if track else 0, dtype=np.int64)
        start = self.clock[src, self.kc].copy(), self.clock[dst, self.kc].copy()
        self.kernel(
            self.clock, self.comp, src, dst, units.astype(np.float64), red.astype(np.float64),
            lat, inv, cls, self.slow, self.per_unit, self.gw, self.tmp, self.mcomp, self.kc,
            self.setter, pred, self.nmsg, self.model.reduction_overlap,
        )  # fmt: skip
        if track:
            end = self.tmp[:m, self.kc].copy()
            red_s = reduction_exposed(
                red * self.per_unit[self.kc] * self.model.gamma * self.slow[dst],
                units * self.per_unit[self.kc] * inv * np.maximum(self.slow[src], self.slow[dst]),
                self.model.reduction_overlap,
            )
            self.chunks.append(
                (np.full(m, i), src, dst, np.maximum(*start), end, lat, pred, red_s, indptr, links)
            )
        else:
            self.track = False
        self.nmsg += m
        key = id(indptr)
        busy = units / eta  # a link is in use for the time the message takes at its share
        acc = self.units_by_round.get(key)
        if acc is None:
            self.units_by_round[key] = (indptr, links, units.astype(np.float64), busy)
        else:
            acc[2][:] += units
            acc[3][:] += busy

    @property
    def rank_clock(self) -> np.ndarray:
        """``[p, sizes]``: each rank's clock, the latest of its ports'."""
        if self.K == 1:
            return self.clock
        return self.clock.reshape(self.schedule.nranks, self.K, -1).max(axis=1)

    @property
    def notes(self) -> tuple[str, ...]:
        """The run's caveats: a critical path too long to track."""
        if self.track or not self.nmsg:
            return ()
        return (
            f"critical path not tracked: {self.nmsg:,} messages exceed the "
            f"{CRITICAL_PATH_BUDGET:,} budget",
        )

    def usage(self, total: np.ndarray) -> NetworkUsage:
        net = self.model.network
        link_units, busy_units = np.zeros(net.nlinks), np.zeros(net.nlinks)
        for indptr, links, acc, busy in self.units_by_round.values():
            per_link = np.diff(indptr)
            link_units += np.bincount(links, np.repeat(acc, per_link), minlength=net.nlinks)
            busy_units += np.bincount(links, np.repeat(busy, per_link), minlength=net.nlinks)
        last = np.argmax(self.clock, axis=0)
        parts = self.comp[last, :, np.arange(len(last))].T  # [components, sizes]
        return NetworkUsage.of_links(
            net, link_units, self.per_unit, total, parts, self._critical_path(total),
            launch=self.params.launch, busy_units=busy_units,
        )  # fmt: skip

    def timeline(self) -> Timeline:
        """Every message at the last size (needs the critical path's records)."""
        if not self.track:
            raise ResourceError(
                f"a timeline of {self.nmsg:,} messages exceeds the {CRITICAL_PATH_BUDGET:,} budget"
            )
        cols = [
            np.concatenate([c[k] for c in self.chunks]) if self.chunks else np.zeros(0)
            for k in range(8)
        ]
        step, src, dst, start, end, _, _, red = cols
        lengths = (
            np.concatenate([np.diff(c[8]) for c in self.chunks])
            if self.chunks
            else np.zeros(0, np.int64)
        )
        links = (
            np.concatenate([c[9] for c in self.chunks]) if self.chunks else np.zeros(0, np.int64)
        )
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return Timeline(
            step.astype(np.int64), src.astype(np.int64) // self.K, dst.astype(np.int64) // self.K,
            start, end,
            end + red, indptr, links.astype(np.int64), self.model.network,
        )  # fmt: skip

    def _critical_path(self, total: np.ndarray) -> CriticalPath | None:
        if not self.track or not self.chunks:
            return None
        last = int(np.argmax(self.clock[:, self.kc]))
        g = int(self.setter[last])
        if g < 0:
            return None
        cols = [np.concatenate([c[k] for c in self.chunks]) for k in range(7)]
        step, src, dst, start, end, lat, pred = cols
        chain = []
        while g >= 0:
            chain.append(g)
            g = int(pred[g])
        chain.reverse()
        idx = np.array(chain)
        net = self.model.network
        indptr, links = net.routes(self.hosts[src[idx]], self.hosts[dst[idx]])
        kinds = route_kinds(net.kinds, net.link_kind, indptr, links)
        columns = (step, src // self.K, dst // self.K, start, end, lat)
        return CriticalPath.of_chain(idx, columns, kinds, float(total[self.kc]))
