r"""``contention="flow"``: an event-driven flow-level simulation of a whole schedule.

Every message is a flow from its start to its last byte; rates are max-min fair over the flows
in flight (progressive filling, as ``"maxmin"``), recomputed whenever a flow starts or ends.
Events at the same instant are handled together, so a symmetric schedule costs about two rate
computations per round.

When a message may start follows :class:`~commsim.models.Topology`'s rules: a rank takes part in
its messages round after round (single port), and a message starts when both ends are ready,
:math:`s = \max(c_q, c_r)`, where a rank's clock :math:`c` is the end of the last message that
involved it in an earlier round on the same port (each channel of a schedule is a port of its
own, IR rule 6: a rank's channels progress independently and their flows share its links; full
duplex: a rank's send and receive of one round both start
from its clock before the round, as in the static modes, even when one of them has to wait for
its other end). Unlike the static modes, a message ends when its bytes are through at the rates it
actually got, so a flow slowed by a neighbour speeds up when the neighbour finishes, and a
message of a later round can overlap an earlier one on other ranks. Its path latency is added
after its last byte: :math:`e = t_\text{last byte} + L_m` (under ``flow_rule="cm02"``,
SimGrid's CM02, it is paid first instead: the message takes no bandwidth until :math:`s + L_m`,
ends with its last byte, and shares each link in proportion to :math:`1/L_m`, a weighted
max-min; :data:`~commsim.models._network_params.FLOW_RULES`); the receiver then reduces for
:math:`b_\text{red}\gamma` (with ``reduction_overlap``, while the message arrives: it is done at
:math:`\max(e, s + L_m + b_\text{red}\gamma)`, :mod:`commsim.models._library`). Local reductions are items of their rank alone, after its messages
of the step. With one message per link at a time, this is ``"none"`` exactly.

Cost: the whole schedule's messages are materialized (arrays of ``O(messages)``), and each event
costs ``O(flows in flight × path length)``: meant for small and medium ``p``. The messages,
routes and per-rank sequences are built once for all sizes; each size then runs its own serial
simulation, because the order of events may depend on the size (a message's latency against its
transfer time decides which of two flows ends first). The sizes run as chains of neighbouring
sizes, one Python thread per chain (the compiled loop releases the GIL, :func:`_run_sizes`),
and a size *recalls* the previous size's rate computations: the max-min rates of a set of flows
are a function of the list of flows in flight alone, so where the list at the ``c``-th
computation is the one the previous size had there, its rates are copied, bit for bit
(:func:`_recall`; neighbouring sizes of a ring on a cluster share most of their event
structure). Predictions are those of one size at a time, bit for bit (tested).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numba
import numpy as np

from commsim._messages import port_messages
from commsim.errors import ParameterError, ResourceError
from commsim.models._contention import bottleneck_link, path_latency
from commsim.models._library import (
    message_efficiency,
    protocol_latency,
    reduction_exposed,
    with_channel_cap,
)
from commsim.models._link_profiles import capped_classes, message_caps
from commsim.models._network_params import FLOW_RULES, NetworkParams
from commsim.models._usage import CriticalPath, NetworkUsage, Timeline, route_kinds

__all__ = ["MAX_FLOW_MESSAGES", "simulate"]

#: The flow simulation materializes every message; beyond this many it refuses.
MAX_FLOW_MESSAGES = 20_000_000
#: The most (flow, rate) entries a size records for the next to recall (16 bytes each: 64 MiB
#: per chain of sizes, beside the record it recalls from). The record grows as the flows in
#: flight at each rate computation, which can be events × flows (packed_trees, 24 segments, on
#: a 4×4×4 torus: the process held 23.8 GB when the kernel killed it, before this cap); beyond
#: it only the first computations are recalled, so the cap costs time, never bits.
RECALL_ENTRIES = 2**22
#: The most work (flows and links visited, summed over the filling rounds of every rate
#: computation) one size's simulation may take before it is refused: a rule that keeps a size
#: to about a minute on this project's 2-vCPU machine, which visits about 10^8 a second
#: (packed_trees allgather on a 4×4×4 torus: 3.2·10^9 in 33 s at 4 segments; ring allreduce
#: on 1,024 GPUs of dgx-h100:128, whose rounds end together, 10^7 in 4 s).
FLOW_EFFORT = 5 * 10**9
#: threads, each simulating a chain of neighbouring sizes (one size's arrays in memory each)
_CHAINS = 4


@numba.njit(cache=True, nogil=True)
def _maxmin(
    active, nact, indptr, links, bw, rate, cap, cnt, wsum, used, frozen, weight
):  # pragma: no cover
    r"""Weighted max-min fair rates of the network flows ``active[:nact]`` (progressive
    filling, Bertsekas and Gallager, *Data Networks*, 6.5.2): every unfrozen flow grows as
    :math:`r_m = w_m \lambda` with a common level :math:`\lambda`, raised until a link it
    crosses is full, :math:`\sum_{m \ni \ell} r_m = B_\ell`; its flows then keep their rates.
    Weights :math:`w_m = 1` are max-min fairness. ``cnt`` counts a link's unfrozen flows,
    ``wsum`` sums their weights. Returns its work: the flows and links it visited, summed over
    its filling rounds."""
    nused = 0
    for a in range(nact):
        m = active[a]
        rate[m] = 0.0
        frozen[m] = indptr[m] == indptr[m + 1]  # local items: no links
        for e in range(indptr[m], indptr[m + 1]):
            link = links[e]
            if cnt[link] == 0:
                used[nused] = link
                nused += 1
                cap[link] = bw[link]
                wsum[link] = 0.0
            cnt[link] += 1
            wsum[link] += weight[m]
    left = 0
    for a in range(nact):
        if not frozen[active[a]]:
            left += 1
    work = 0
    while left > 0:
        work += nact + nused
        delta = np.inf
        for u in range(nused):
            link = used[u]
            if cnt[link] > 0:
                s = cap[link] / wsum[link]
                if s < delta:
                    delta = s
        if delta == np.inf:
            for a in range(nact):
                m = active[a]
                if not frozen[m]:
                    rate[m] = np.inf
                    frozen[m] = True
            break
        for a in range(nact):
            m = active[a]
            if not frozen[m]:
                rate[m] += delta * weight[m]
        for u in range(nused):
            link = used[u]
            if cnt[link] > 0:
                cap[link] -= delta * wsum[link]
        for a in range(nact):
            m = active[a]
            if frozen[m]:
                continue
            hit = False
            for e in range(indptr[m], indptr[m + 1]):
                link = links[e]
                if cap[link] <= 1e-12 * bw[link] or cap[link] / max(wsum[link], 1e-300) <= 0.0:
                    hit = True
                    break
            if hit:
                frozen[m] = True
                left -= 1
                for e in range(indptr[m], indptr[m + 1]):
                    cnt[links[e]] -= 1
                    wsum[links[e]] -= weight[m]
    for u in range(nused):
        cnt[used[u]] = 0
    return work


@numba.njit(cache=True, nogil=True)
def _recall(active, nact, rate, call, prev_ptr, prev_items, prev_rates):  # pragma: no cover
    """Rates of the flows ``active[:nact]`` from the previous size's rate computation number
    ``call``, if it had the same flows in the same order (max-min rates are a function of that
    list alone, so they are its bits); ``False`` if it did not."""
    if call + 1 >= prev_ptr.shape[0]:
        return False
    lo = prev_ptr[call]
    if prev_ptr[call + 1] - lo != nact:
        return False
    for a in range(nact):
        if prev_items[lo + a] != active[a]:
            return False
    for a in range(nact):
        rate[active[a]] = prev_rates[lo + a]
    return True


@numba.njit(cache=True, nogil=True)
def _grow(items, rates, need, limit):  # pragma: no cover
    """``items`` and ``rates`` copied into arrays of at least ``need`` entries (doubling, to at
    most ``limit``)."""
    size = max(need, min(2 * items.shape[0], limit))
    new_items = np.empty(size, dtype=np.int64)
    new_rates = np.empty(size)
    new_items[: items.shape[0]] = items
    new_rates[: rates.shape[0]] = rates
    return new_items, new_rates


@numba.njit(cache=True, nogil=True)
def _grow_ptr(ptr):  # pragma: no cover
    """``ptr`` copied into an array twice as long (zeros after it)."""
    new = np.zeros(2 * ptr.shape[0], dtype=ptr.dtype)
    new[: ptr.shape[0]] = ptr
    return new


@numba.njit(cache=True, nogil=True)
def _simulate(  # pragma: no cover
    src, dst, rnd, work, lat, red_time, indptr, links, bw, seq_indptr, seq_items, clock, is_local,
    overlap, queues, phase, prev_ptr, prev_items, prev_rates, prev_work, lat_first, weight,
    record_limit, effort_limit,
):  # fmt: skip
    """Run the events; returns per item (start, end, pred), the items done (all of them unless
    ``effort_limit`` stopped it) and the effort spent, then this run's record of rate
    computations ``(ptr, items, rates, work)`` for the next size to recall (``work``: each
    computation's effort, counted again when it is recalled, so the limit does not depend on
    which sizes share a chain). ``work``: bytes (network
    items) or seconds (local items, which run at rate 1 on no link); ``overlap``: a receiver
    reduces while the message arrives; ``prev_*``: the previous size's record (``ptr = [0]``:
    none). ``lat_first``: a message takes no bandwidth until its path latency ``lat`` is paid
    and ends with its last byte (SimGrid's CM02), instead of moving bytes from its start and
    ending ``lat`` after its last byte; ``weight``: each flow's weight in the max-min shares;
    ``record_limit``: the most (flow, rate) entries the record keeps (the first computations'
    only, beyond it); ``effort_limit``: the most work of rate computations (:func:`_maxmin`)
    before it stops, returning ``done < n`` items ended (the caller refuses the schedule).

    ``queues > 1`` (the link-port rule): ranks ``g·queues .. g·queues + queues - 1`` are the
    link queues of one port ``g``; an item of ``phase`` P (messages ``2·step``, local items
    ``2·step + 1``) starts only when no queue of its ends' ports has an item of an earlier
    phase left, and not before the latest clock of those queues when the port entered P
    (:mod:`commsim.models._link_ports`: the queues meet at each step's end)."""
    n = src.shape[0]
    p = clock.shape[0]
    ngroups = p // queues
    gphase = np.full(ngroups, -1, dtype=np.int64)  # the phase each port last entered
    gbar = np.zeros(ngroups)  # the latest clock of its queues when it entered it
    gset = np.full(ngroups, -1, dtype=np.int64)
    state = np.zeros(n, dtype=np.int8)  # 0 waiting, 1 scheduled, 2 active, 3 done
    start = np.zeros(n)
    end = np.zeros(n)
    pred = np.full(n, -1, dtype=np.int64)
    setter = np.full(p, -1, dtype=np.int64)
    remaining = np.zeros(n)
    rate = np.zeros(n)
    ptr = seq_indptr[:-1].copy()
    head = np.full(p, -1, dtype=np.int64)  # the round of each rank's first unfinished item
    base = clock.copy()  # each rank's clock before that round (full duplex: a rank's send
    base_setter = np.full(p, -1, dtype=np.int64)  # and receive of a round both start from it)
    active = np.empty(n, dtype=np.int64)
    nact = 0
    sched = np.empty(n, dtype=np.int64)
    nsched = 0
    cap = np.zeros(bw.shape[0])
    cnt = np.zeros(bw.shape[0], dtype=np.int64)
    wsum = np.zeros(bw.shape[0])
    delay = lat if lat_first else np.zeros(n)  # from a message's start to its first byte
    tail = np.zeros(n) if lat_first else lat  # from its last byte to its end
    used = np.empty(bw.shape[0], dtype=np.int64)
    frozen = np.zeros(n, dtype=np.bool_)
    touched = np.empty(2 * n + p, dtype=np.int64)
    seen = np.full(p, -1, dtype=np.int64)  # the event that last visited each rank
    ntouched = 0
    event = 0
    for r in range(p):
        touched[ntouched] = r
        ntouched += 1
    now = 0.0
    done = 0
    ncalls = 0  # rate computations so far, and what each gave (for the next size to recall)
    nrec = 0  # how many of them are recorded: the first, up to record_limit entries in all
    effort = 0  # the rate computations' work so far (flows and links visited)
    rec_ptr = np.zeros(1024, dtype=np.int64)
    rec_work = np.zeros(1024, dtype=np.int64)
    rec_items = np.empty(min(max(1024, n), max(record_limit, 1)), dtype=np.int64)
    rec_rates = np.empty(rec_items.shape[0])

    def advance(r):
        # Skip rank r's finished items; when its first unfinished item is of a new round, its
        # clock so far is the clock its messages of that round start from. A closure, which
        # numba inlines: a compiled function taking the eleven arrays as arguments spent half
        # the simulation in their atomic reference counts (perf, ring p = 1024).
        q = ptr[r]
        while q < seq_indptr[r + 1] and state[seq_items[q]] == 3:
            q += 1
        ptr[r] = q
        if q < seq_indptr[r + 1] and rnd[seq_items[q]] != head[r]:
            head[r] = rnd[seq_items[q]]
            base[r] = clock[r]
            base_setter[r] = setter[r]
        return q

    def entered(r, ph):
        # Whether port r // queues may run phase ph: none of its queues has an item of an
        # earlier phase left; on the first yes, the port's barrier clock is its queues' latest.
        g = r // queues
        if gphase[g] >= ph:
            return True
        for s in range(g * queues, g * queues + queues):
            q = advance(s)
            if q < seq_indptr[s + 1] and phase[seq_items[q]] < ph:
                return False
        gphase[g] = ph
        best = g * queues
        for s in range(g * queues + 1, g * queues + queues):
            if clock[s] > clock[best]:
                best = s
        gbar[g] = clock[best]
        gset[g] = setter[best]
        return True

    while done < n:
        # schedule the items whose ends are both free of earlier rounds
        event += 1
        for t in range(ntouched * queues):
            r = touched[t // queues] // queues * queues + t % queues  # each queue of the port
            if seen[r] == event:
                continue  # a second visit in one event finds nothing new (no item ends here)
            seen[r] = event
            advance(r)
            if ptr[r] == seq_indptr[r + 1]:
                continue
            head_round = rnd[seq_items[ptr[r]]]
            k = ptr[r]
            while k < seq_indptr[r + 1] and rnd[seq_items[k]] == head_round:
                m = seq_items[k]
                k += 1
                if state[m] != 0:
                    continue
                other = dst[m] if src[m] == r else src[m]
                q = advance(other)
                if q < seq_indptr[other + 1] and rnd[seq_items[q]] < rnd[m]:
                    continue  # the other end still has earlier rounds to do
                a, b = base[src[m]], base[dst[m]]
                sa, sb = base_setter[src[m]], base_setter[dst[m]]
                if queues > 1:
                    if not entered(src[m], phase[m]) or not entered(dst[m], phase[m]):
                        continue  # a queue of an end's port has an earlier step to finish
                    ga, gb = src[m] // queues, dst[m] // queues
                    if gbar[ga] > a:
                        a, sa = gbar[ga], gset[ga]
                    if gbar[gb] > b:
                        b, sb = gbar[gb], gset[gb]
                start[m] = a if a > b else b
                pred[m] = sa if a >= b else sb
                state[m] = 1
                sched[nsched] = m
                nsched += 1
        ntouched = 0
        # the next event: a start or a finish
        t_next = np.inf
        for i in range(nsched):
            if start[sched[i]] + delay[sched[i]] < t_next:
                t_next = start[sched[i]] + delay[sched[i]]
        for i in range(nact):
            m = active[i]
            f = now + (remaining[m] / rate[m] if rate[m] > 0 else np.inf)
            if f < t_next:
                t_next = f
        if t_next == np.inf:
            break  # cannot happen for a valid schedule
        dt = t_next - now
        tol = 1e-12 * (abs(t_next) + 1e-9)
        changed = False
        # finishes
        i = 0
        while i < nact:
            m = active[i]
            if rate[m] == np.inf:
                left_t = 0.0
            else:
                remaining[m] -= rate[m] * dt
                left_t = remaining[m] / rate[m] if rate[m] > 0 else np.inf
            if left_t <= tol:
                e = t_next + tail[m]
                end[m] = e
                state[m] = 3
                done += 1
                s, d = src[m], dst[m]
                if e > clock[s]:
                    clock[s] = e
                    setter[s] = m
                e2 = e + red_time[m]
                if overlap:
                    e2 = start[m] + lat[m] + red_time[m]
                    if e2 < e:
                        e2 = e
                if e2 > clock[d]:
                    clock[d] = e2
                    setter[d] = m
                touched[ntouched] = s
                touched[ntouched + 1] = d
                ntouched += 2
                nact -= 1
                active[i] = active[nact]
                changed = True
            else:
                i += 1
        now = t_next
        # starts
        i = 0
        while i < nsched:
            m = sched[i]
            if start[m] + delay[m] <= now + tol:
                state[m] = 2
                remaining[m] = work[m]
                active[nact] = m
                nact += 1
                nsched -= 1
                sched[i] = sched[nsched]
                changed = True
                if is_local[m]:
                    rate[m] = 1.0
            else:
                i += 1
        if changed and nact:
            if _recall(active, nact, rate, ncalls, prev_ptr, prev_items, prev_rates):
                spent = prev_work[ncalls]
            else:
                spent = _maxmin(
                    active, nact, indptr, links, bw, rate, cap, cnt, wsum, used, frozen, weight
                )
                for a in range(nact):
                    if is_local[active[a]]:
                        rate[active[a]] = 1.0
            effort += spent
            if effort > effort_limit:
                break  # refused by the caller
            ncalls += 1
            if nrec + 1 == ncalls and rec_ptr[nrec] + nact <= record_limit:
                # recorded: the computations 0 .. nrec - 1, a prefix (recall is by index)
                if rec_ptr[nrec] + nact > rec_items.shape[0]:
                    need = rec_ptr[nrec] + nact
                    rec_items, rec_rates = _grow(rec_items, rec_rates, need, record_limit)
                if nrec + 2 > rec_ptr.shape[0]:
                    rec_ptr, rec_work = _grow_ptr(rec_ptr), _grow_ptr(rec_work)
                lo = rec_ptr[nrec]
                for a in range(nact):
                    rec_items[lo + a] = active[a]
                    rec_rates[lo + a] = rate[active[a]]
                rec_work[nrec] = spent
                nrec += 1
                rec_ptr[nrec] = lo + nact
    tot = rec_ptr[nrec]
    return (
        start,
        end,
        pred,
        done,
        effort,
        rec_ptr[: nrec + 1].copy(),
        rec_items[:tot].copy(),
        rec_rates[:tot].copy(),
        rec_work[:nrec].copy(),
    )


class _Items(NamedTuple):
    """The schedule's messages and local reductions, one entry per item, in round order."""

    src: np.ndarray  # port ranks (rank · K + channel)
    dst: np.ndarray
    rnd: np.ndarray  # global round number, non-decreasing
    units: np.ndarray  # slot units moved (0 for local items)
    red: np.ndarray  # slot units reduced by the receiver (or locally)
    step: np.ndarray  # the schedule's step, non-decreasing
    local: np.ndarray  # a local reduction (no route)


class _Routes(NamedTuple):
    """Each item's links (CSR), its path latency, its bottleneck link class and the share of
    its route's rate it moves at (protocol, in-switch reduction)."""

    indptr: np.ndarray
    links: np.ndarray
    lengths: np.ndarray
    lat: np.ndarray
    cls: np.ndarray
    efficiency: np.ndarray | float


class _FlowRun:
    """What :func:`simulate` returns: the interface of the static modes' run (final clocks, step
    times, notes, and the link usage and timeline on demand)."""

    def __init__(self, net, items, routes, per_unit, clock, step_time, parts, last, red_net,
                 K, launch) -> None:  # fmt: skip
        self.net, self.items, self.routes, self.per_unit = net, items, routes, per_unit
        self.port_clock, self.step_time, self.parts, self.notes = clock, step_time, parts, ()
        self.last, self.red_net, self.K, self.launch = last, red_net, K, launch
        p0 = clock.shape[0] // K
        self.rank_clock = clock.reshape(p0, K, -1).max(axis=1)  # the latest of a rank's ports
        self.clock = self.rank_clock  # already one clock per rank

    def usage(self, total: np.ndarray) -> NetworkUsage:
        """Bytes per link, the time split, and the last size's critical path."""
        it, rt, net = self.items, self.routes, self.net
        units = np.repeat(it.units, rt.lengths)
        link_units = np.bincount(rt.links, units, minlength=net.nlinks)
        eta = np.broadcast_to(rt.efficiency, it.units.shape)
        busy = np.bincount(rt.links, np.repeat(it.units / eta, rt.lengths), minlength=net.nlinks)
        cp = self._critical_path(float(total[-1])) if self.last is not None else None
        return NetworkUsage.of_links(
            net, link_units, self.per_unit, total, self.parts, cp, launch=self.launch,
            busy_units=busy,
        )  # fmt: skip

    def _critical_path(self, total: float) -> CriticalPath | None:
        """The chain of messages that ends at the last size's slowest rank."""
        it, rt, net = self.items, self.routes, self.net
        if not len(it.src):
            return None
        start, end, pred = self.last
        idx = _chain(self.port_clock[:, -1], it.src, it.dst, end, pred)
        idx = idx[~it.local[idx]]
        if not len(idx):
            return None
        kinds = route_kinds(
            net.kinds,
            net.link_kind,
            np.concatenate([[0], np.cumsum(rt.indptr[idx + 1] - rt.indptr[idx])]),
            np.concatenate([rt.links[rt.indptr[m] : rt.indptr[m + 1]] for m in idx]),
        )
        columns = (it.step, it.src // self.K, it.dst // self.K, start, end, rt.lat)
        return CriticalPath.of_chain(idx, columns, kinds, total)

    def timeline(self) -> Timeline:
        """Every network message of the last size: when it ran and on which links."""
        it, rt = self.items, self.routes
        start, end, _ = self.last if self.last is not None else (np.zeros(0),) * 3
        keep = np.flatnonzero(~it.local)
        red_end = end + self.red_net
        lengths = np.diff(rt.indptr)[keep]
        sel = (
            np.concatenate([np.arange(rt.indptr[m], rt.indptr[m + 1]) for m in keep])
            if len(keep)
            else np.zeros(0, np.int64)
        )
        return Timeline(
            it.step[keep], it.src[keep] // self.K, it.dst[keep] // self.K, start[keep], end[keep],
            red_end[keep], np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            rt.links[sel], self.net,
        )  # fmt: skip


def simulate(
    params: NetworkParams, schedule, sizes: np.ndarray, hosts: np.ndarray, *, max_messages=None,
    split=port_messages, queues: int = 1,
) -> _FlowRun:  # fmt: skip
    """Materialize the schedule's messages and run the flow simulation once per size (refused
    past ``max_messages`` messages, :data:`MAX_FLOW_MESSAGES` by default). ``params`` are the
    topology model's (:class:`~commsim.models._network_params.NetworkParams`).

    The sizes run as chains of neighbouring sizes in parallel threads: each size's event order
    may depend on its size (latency against transfer time), so each runs its own simulation,
    recalling the previous size's rates where its flows in flight are the same (module
    docstring); the messages, routes and per-rank sequences are built once for all. ``split``
    turns a step into messages and rounds (:func:`~commsim._messages.port_messages`, or the link-port rule's
    :func:`~commsim.models._link_ports.link_queue_messages`, with ``queues`` link queues per
    port).
    """
    limit = MAX_FLOW_MESSAGES if max_messages is None else min(max_messages, MAX_FLOW_MESSAGES)
    # one port per channel: virtual rank r·K + c (port_ranks); under the link-port rule each
    # port's link queues, (r·K + c)·queues + slot (commsim.models._link_ports)
    K = schedule.nchannels * queues
    items = _materialize(schedule, schedule.nchannels, limit, split, queues)
    port_hosts = np.repeat(hosts, K)
    routes = _route(params, items, port_hosts)
    seq_indptr, seq_items = _sequences(items, schedule.nranks * K)
    per_unit = sizes / schedule.nbytes_units
    run = _run_sizes(params, schedule, items, routes, seq_indptr, seq_items, per_unit, K, queues)
    clock, step_time, parts, last, red_net = run
    return _FlowRun(
        params.network, items, routes, per_unit, clock, step_time, parts, last, red_net, K,
        params.launch,
    )  # fmt: skip


def _materialize(schedule, K: int, limit: int, split=port_messages, queues: int = 1) -> _Items:
    """Every message of every round, and one local item per rank that reduces locally in a
    step; refused past ``limit`` messages (the caller's) or :data:`MAX_FLOW_MESSAGES`. ``K``
    ports per rank, each of ``queues`` link queues (``split``'s names)."""
    p = schedule.nranks * K * queues
    cols: dict[str, list[np.ndarray]] = {k: [] for k in _Items._fields}
    nround = total = 0
    for i, st in enumerate(schedule.steps()):
        if not len(st.src):
            continue
        schedule.check_step(st, i)
        msg, rounds = split(st, schedule, K)
        for idx in rounds:
            _append(cols, msg.src[idx], msg.dst[idx], nround, msg.units[idx],
                    msg.reduce_units[idx], i, False)  # fmt: skip
            nround += 1
            total += len(idx)
        if len(msg.local_rank):
            red = np.bincount(msg.local_rank, msg.local_reduce_units, minlength=p)
            ranks = np.flatnonzero(red)
            _append(cols, ranks, ranks, nround, np.zeros(len(ranks)), red[ranks], i, True)
            nround += 1
        _check_total(total, limit)
    a = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}
    return _Items(
        a["src"].astype(np.int64), a["dst"].astype(np.int64), a["rnd"].astype(np.int64),
        a["units"], a["red"], a["step"].astype(np.int64), a["local"].astype(bool),
    )  # fmt: skip


def _check_total(total: int, limit: int) -> None:
    if total > limit and limit < MAX_FLOW_MESSAGES:
        raise ResourceError(
            f"a timeline of more than {limit:,} messages is refused: "
            f"use a smaller p or fewer segments"
        )
    if total > MAX_FLOW_MESSAGES:
        raise ResourceError(
            f"contention='flow' materializes every message: this schedule has more than "
            f"{MAX_FLOW_MESSAGES:,}; use contention='maxmin' or 'bottleneck' at this size"
        )


def _route(params: NetworkParams, items: _Items, hosts: np.ndarray) -> _Routes:
    """Routes, path latencies (with the protocol's and the per-message overhead) and bottleneck
    link classes of the network items; local items get empty routes."""
    net, src, dst = params.network, items.src, items.dst
    n = len(src)
    remote = np.flatnonzero(~items.local)
    r_ptr, r_links = (
        net.routes(hosts[src[remote]], hosts[dst[remote]])
        if len(remote)
        else (np.zeros(1, np.int64), np.zeros(0, np.int64))
    )
    lengths = np.zeros(n, dtype=np.int64)
    lengths[remote] = np.diff(r_ptr)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    lat = np.zeros(n)
    same = net.endpoint_server[hosts[src[remote]]] == net.endpoint_server[hosts[dst[remote]]]
    protocol = params.protocol if params.protocol_hops else None  # in-network: one per call
    lat[remote] = (
        protocol_latency(path_latency(r_ptr, r_links, net.latency), same, protocol)
        + params.overhead
    )
    cls = np.zeros(n, dtype=np.int64)
    if len(remote):
        cls[remote] = net.link_kind[
            bottleneck_link(r_ptr, r_links, net.bandwidth, group=items.rnd[remote])
        ]
    eta = message_efficiency(
        params.protocol, params.switch_efficiency, hosts[src], hosts[dst], net.nhosts
    )
    return _Routes(indptr, r_links, lengths, lat, cls, eta)  # remote items keep their order


def _sequences(items: _Items, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Each port rank's items in round order (CSR ``seq_indptr``, ``seq_items``)."""
    n = len(items.src)
    remote = ~items.local
    ranks = np.concatenate([items.src, items.dst[remote]])
    idx = np.concatenate([np.arange(n), np.flatnonzero(remote)])
    order = np.lexsort((idx, items.rnd[idx], ranks))
    return np.searchsorted(ranks[order], np.arange(p + 1)), idx[order]


def _run_sizes(params, schedule, items, routes, seq_indptr, seq_items, per_unit, K, queues=1):
    """Simulate every size (a chain of neighbouring sizes per thread); returns the final clocks
    ``[p·K, sizes]``, step times ``[nsteps, sizes]``, time parts ``[parts, sizes]``, the last
    size's ``(start, end, pred)`` and its exposed reductions. ``K``: clocks per rank (ports
    times ``queues``, the link queues of each port under the link-port rule)."""
    net, n, p0 = params.network, len(items.src), schedule.nranks
    phase = 2 * items.step + items.local  # a step's local reductions after its messages
    efficiency = routes.efficiency
    slow = np.repeat(params.slow_factors(p0), K)
    f = np.maximum(slow[items.src], slow[items.dst])
    init = np.repeat(params.initial_clock(p0, 1)[:, 0], K)
    lat_first, weight = _sharing(params.flow_rule, routes, items, K)
    stop = threading.Event()  # set when a size is refused: the other chains stop too

    def capped_at(k: int) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """Routes with each network item's rate cap at size ``k`` as a private link (the
        per-channel cap; measured profiles' rates at the item's bytes, which change with the
        size; local items have no route), and each item's class to charge ("limited by")."""
        nbytes = items.units * per_unit[k] if params.link_profiles else None
        cap, cap_kind = message_caps(params.link_profiles, net.kinds, params.channel_bandwidth,
                                     net.link_kind, routes.indptr, routes.links, nbytes)  # fmt: skip
        routed = with_channel_cap(routes.indptr, routes.links, net.bandwidth, cap, ~items.local)
        return routed, capped_classes(routes.cls, cap_kind, routed, net.nlinks, items.rnd)

    capped = None if params.link_profiles else capped_at(0)  # the same at every size
    nsizes, nparts = len(per_unit), 3 + len(net.kinds)
    parts = np.zeros((nparts, nsizes))
    clock = np.zeros((len(init), nsizes))
    step_time = np.zeros((schedule.nsteps, nsizes))
    step_ends = np.flatnonzero(np.diff(items.step)) + 1  # items are in step order
    out: dict[str, Any] = {"last": None, "red_net": np.zeros(n)}

    def one(k: int, prev: tuple, record_limit: int) -> tuple:
        bytes_ = items.units * per_unit[k] * f / efficiency  # + flags
        red_time = items.red * per_unit[k] * params.gamma * slow[items.dst]
        work = np.where(items.local, red_time, bytes_)
        red_net = np.where(items.local, 0.0, red_time)
        c = init.copy()
        routed, cls = capped if capped is not None else capped_at(k)
        start, end, pred, done, effort, *record = _simulate(
            items.src, items.dst, items.rnd, work, routes.lat, red_net, *routed, seq_indptr,
            seq_items, c, items.local, params.reduction_overlap, queues, phase, *prev, lat_first,
            weight, record_limit, FLOW_EFFORT,
        )  # fmt: skip
        if done < n:
            stop.set()
            _refuse(items, done, int(effort))
        clock[:, k] = c
        parts[:, k] = _chain_parts(
            c, items.src, items.dst, start, end, pred, routes.lat, cls, items.local, nparts,
            params.launch,
        )  # fmt: skip
        if params.reduction_overlap:  # what is left of each reduction after its transfer
            red_net = reduction_exposed(red_net, end - start - routes.lat, True)
        if n:
            step_time[:, k] = _step_times(end + red_net, items.step, step_ends, schedule.nsteps,
                                          init.max())  # fmt: skip
        if k == nsizes - 1:
            out["last"], out["red_net"] = (start, end, pred), red_net
        return tuple(record)

    def chain(ks: np.ndarray) -> None:
        nothing = (np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))
        prev = nothing  # nothing to recall
        for i, k in enumerate(ks):
            if stop.is_set():
                return
            # a size recalls the previous one's rates only where its links are the same: not
            # where measured profiles cap each size's messages at rates of their own; the
            # chain's last size records nothing, as no size follows it
            record = i < len(ks) - 1 and capped is not None
            prev = one(
                int(k), prev if capped is not None else nothing, RECALL_ENTRIES if record else 0
            )

    _in_chains(chain, nsizes)
    return clock, step_time, parts, out["last"], out["red_net"]


def _in_chains(chain: Any, nsizes: int) -> None:
    """Run ``chain`` on the sizes split into up to :data:`_CHAINS` chains of neighbouring
    sizes, one Python thread each (the compiled loop releases the GIL)."""
    chains = np.array_split(
        np.arange(nsizes), max(1, min(numba.get_num_threads(), _CHAINS, nsizes))
    )
    if len(chains) == 1:
        chain(chains[0])
    else:
        with ThreadPoolExecutor(len(chains)) as pool:
            list(pool.map(chain, chains))


def _refuse(items: _Items, done: int, effort: int) -> None:
    """Raise for a simulation that ended with items left: the effort limit's one line, or an
    error that says the loop stalled (a schedule it cannot time: a bug)."""
    n = len(items.src)
    if effort > FLOW_EFFORT:
        raise ResourceError(_too_long(items, effort))
    raise RuntimeError(f"the flow simulation stalled with {n - done:,} of {n:,} items left")


def _sharing(rule: str, routes: _Routes, items: _Items, K: int) -> tuple[bool, np.ndarray]:
    """Whether latency comes first, and each item's weight in the max-min shares, under the
    flow rule (:data:`~commsim.models._network_params.FLOW_RULES`): ``"fair"`` weights every
    flow 1; ``"cm02"`` (SimGrid's CM02, Velho and Legrand 2009: TCP's RTT unfairness) weights
    it 1 / its path latency. ``K``: port ranks per rank (to name a message's ranks)."""
    n = len(routes.lat)
    if rule == "fair":
        return False, np.ones(n)
    if rule not in FLOW_RULES:  # the model checks it; params built by hand may not be
        raise ParameterError(f"unknown flow_rule {rule!r}: use {' or '.join(FLOW_RULES)}")
    routed = np.diff(routes.indptr) > 0
    zero = np.flatnonzero(routed & ~items.local & (routes.lat <= 0))
    if len(zero):
        m = zero[0]
        raise ParameterError(
            f"flow_rule='cm02' shares a link in proportion to 1 / each message's path latency: "
            f"the message of step {int(items.step[m])} from rank {int(items.src[m]) // K} to "
            f"rank {int(items.dst[m]) // K} has a route of zero latency; give the links a "
            f"latency or use flow_rule='fair'"
        )
    return True, np.where(routes.lat > 0, 1.0 / np.maximum(routes.lat, 1e-300), 1.0)


def _too_long(items: _Items, effort: int) -> str:
    """Why a flow simulation was stopped, in one line."""
    return (
        f"contention='flow' gave up after {effort:.2g} flow and link visits in its max-min "
        f"computations (its limit, about a minute): this schedule's {len(items.src):,} messages "
        f"end at many different times, each a new computation over the flows in flight; use "
        f"contention='bottleneck' or 'maxmin', or fewer segments"
    )


def _step_times(fin, step, step_ends, nsteps: int, start: float) -> np.ndarray:
    """When each step is over for every rank (cumulative): the latest ``fin`` of its items."""
    per_step = np.full(nsteps, -np.inf)
    bounds = np.concatenate([[0], step_ends])
    per_step[step[bounds]] = np.maximum.reduceat(fin, bounds)
    return np.maximum.accumulate(np.maximum(per_step, start))


def _chain(clock, src, dst, end, pred) -> np.ndarray:
    """The items of the chain that ends at the slowest rank's last item, first to last."""
    rank = int(np.argmax(clock)) if len(clock) else 0
    mine = np.flatnonzero((src == rank) | (dst == rank))
    g = int(mine[np.argmax(end[mine])]) if len(mine) else -1
    chain = []
    while g >= 0:
        chain.append(g)
        g = int(pred[g])
    return np.array(chain[::-1], dtype=np.int64)


def _chain_parts(
    clock, src, dst, start, end, pred, lat, cls, is_local, nparts, launch=0.0
) -> np.ndarray:
    """The last rank's time split along its chain of messages: latency, reduction and local
    work ("reduction"), other (the per-call ``launch``), transfer per bottleneck link class."""
    out = np.zeros(nparts)
    out[2] = launch
    total = float(clock.max()) if len(clock) else 0.0
    for g in _chain(clock, src, dst, end, pred)[::-1]:
        if not is_local[g]:
            out[0] += lat[g]
            out[3 + cls[g]] += end[g] - start[g] - lat[g]
    out[1] = max(total - out.sum(), 0.0)
    return out


def _append(cols, src, dst, rnd, units, red, step, local) -> None:
    m = len(src)
    cols["src"].append(np.asarray(src))
    cols["dst"].append(np.asarray(dst))
    cols["rnd"].append(np.full(m, rnd))
    cols["units"].append(np.asarray(units, dtype=np.float64))
    cols["red"].append(np.asarray(red, dtype=np.float64))
    cols["step"].append(np.full(m, step))
    cols["local"].append(np.full(m, local))
