"""Chrome traces of a schedule: open the JSON in Perfetto (ui.perfetto.dev) or ``chrome://tracing``.

Two sources, one format. :func:`chrome_trace` draws a model's prediction at one message size
(any model with a ``timeline(schedule, nbytes)``: Hockney, LogGP, two-level Hockney,
topology); :func:`step_trace` draws measured per-(rank, step) intervals (the MPI backend's
traced run, :func:`commsim.bench.trace_mpi`).

The file is the Trace Event Format's JSON object form (Google, "Trace Event Format", the
document behind ``chrome://tracing``): ``{"traceEvents": [...], "displayTimeUnit": "ns",
"otherData": {...}}``, times in microseconds (the format's unit). ``otherData`` says what was
traced (algorithm, size, the model's description or ``"measured"``). The events:

* **Metadata** (``ph: "M"``): ``process_name`` and ``thread_name`` (and ``thread_sort_index``)
  name the tracks.
* **Process 1, "ranks".** A prediction has *two tracks per rank*: ``rank r send`` (tid ``2r``)
  with a slice per message sent (``cat: "send"``, ``"send to d"``, from its start to the
  sender's end of it), and ``rank r recv`` (tid ``2r + 1``) with a slice per message received
  (``cat: "recv"``, ``"recv from s"``, from when the receiver takes it to its arrival), then
  its reduction (``cat: "reduce"``, up to the reduction's end) and local reductions
  (``"local reduce"``). A measured trace has *one track per rank*, ``rank r`` (tid ``r``), with a
  slice per step the rank takes part in (``cat: "step"``, ``"step i"``). Every slice's
  ``args`` hold its ``step``.
* **Flow arrows**, one per message: ``ph: "s"`` and ``ph: "f"`` events with the same ``id``,
  ``cat: "message"`` and ``name``; the start lies inside the sender's slice, the end
  (``bp: "e"``: bound to the *enclosing* slice) inside the receiver's, at a timestamp no
  earlier than the start. Both sit at their slice's midpoint or, when the receiver's midpoint
  comes first (a measured step that also waits for its own receives), both at the midpoint of
  the time the two slices share: never on a boundary where two slices touch, so each binds to
  exactly one slice. (Only clocks that disagree, see :mod:`commsim.bench._trace`, can make a
  measured receive end before its send began; its arrow then points back.)
* **Process 2, "links"** (network models): a track per link that carried traffic, a slice per
  busy interval (the union of the intervals of the messages crossing it, named by the message
  when it is one, else by their number). A message occupies its links from its start to its
  arrival, at the rate its contention mode gave it.

Why two tracks per rank in a prediction: the format requires the slices of one track to nest
(Perfetto drops the others), and a rank's send and receive of one round overlap without nesting
whenever their ends differ. Each track is a sequence: under the single-port rule a rank's next
send starts after its clock, which is past its previous send's end, and its next receive after
its previous reduction; link tracks are unions. A measured rank runs its steps one after the
other, so one track suffices.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim import units
from commsim._messages import messages
from commsim.errors import ParameterError

__all__ = ["MAX_TRACE_EVENTS", "ChromeTrace", "chrome_trace", "step_trace"]

#: Traces past this many events are refused (Perfetto slows down well before).
MAX_TRACE_EVENTS = 2_000_000
#: Events per message at most: send, receive, reduction, flow start, flow end.
EVENTS_PER_MESSAGE = 5
RANKS, LINKS = 1, 2  # process ids
US = 1e6  # seconds to the format's microseconds


class ChromeTrace:
    """A Trace Event Format document under construction: tracks, slices, flow arrows.

    Examples:
        >>> t = ChromeTrace()
        >>> t.thread(1, 0, "rank 0")
        >>> t.slice(1, 0, 0.0, 2.0, "send to 1", "send", {"step": 0})
        >>> sorted(t.to_dict()) == ["displayTimeUnit", "otherData", "traceEvents"]
        True
    """

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.nflows = 0

    def process(self, pid: int, name: str) -> None:
        self.events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})

    def thread(self, pid: int, tid: int, name: str) -> None:
        """A named track, sorted by ``tid``."""
        self.events.append(
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
        )
        self.events.append(
            {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
             "args": {"sort_index": tid}}
        )  # fmt: skip

    def slice(
        self, pid: int, tid: int, ts: float, dur: float, name: str, cat: str, args: dict
    ) -> None:
        """A complete event (``ph: "X"``) from ``ts`` for ``dur`` microseconds."""
        self.events.append(
            {"ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": name, "cat": cat,
             "args": args}
        )  # fmt: skip

    def flow(
        self, src: tuple[int, int, float, float], dst: tuple[int, int, float, float], name: str
    ) -> None:
        """An arrow from the slice ``src = (pid, tid, ts, dur)`` to the slice ``dst``: from
        ``src``'s midpoint to ``dst``'s or, when that would point back in time, both ends at
        the midpoint of the time the two slices share (strictly inside both)."""
        (spid, stid, sts, sdur), (dpid, dtid, dts, ddur) = src, dst
        t0, t1 = sts + sdur / 2, dts + ddur / 2
        lo, hi = max(sts, dts), min(sts + sdur, dts + ddur)
        if t1 < t0 and lo < hi:
            t0 = t1 = (lo + hi) / 2
        fid = self.nflows
        self.nflows += 1
        self.events.append(
            {"ph": "s", "id": fid, "pid": spid, "tid": stid, "ts": t0, "name": name,
             "cat": "message"}
        )  # fmt: skip
        self.events.append(
            {"ph": "f", "bp": "e", "id": fid, "pid": dpid, "tid": dtid, "ts": t1, "name": name,
             "cat": "message"}
        )  # fmt: skip

    def to_dict(self, **other: Any) -> dict[str, Any]:
        """The document; ``other`` goes into ``otherData``."""
        return {"traceEvents": self.events, "displayTimeUnit": "ns", "otherData": other}


def _size(nbytes: Any) -> Any:
    return float(np.atleast_1d(nbytes)[0]) if not isinstance(nbytes, str) else nbytes


def chrome_trace(model: Any, schedule: Any, nbytes: Any) -> dict[str, Any]:
    """The Chrome trace of ``schedule`` at one size as ``model`` predicts it (the module
    docstring has the structure); ``json.dump`` it to a file.

    ``model`` needs a ``timeline(schedule, nbytes, max_messages=...)`` (Hockney, LogGP,
    two-level Hockney, topology); refuses (:class:`~commsim.errors.ParameterError`, one line) a
    model without one, and (:class:`~commsim.errors.ResourceError`) a schedule of more than
    ``MAX_TRACE_EVENTS / 5`` messages, before timing all of it.

    Examples:
        >>> import commsim
        >>> from commsim.models import Hockney
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> doc = chrome_trace(Hockney(), s, "1MiB")
        >>> sends = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "send"]
        >>> len(sends) == 4 * 2 * 3  # p ranks, 2(p - 1) steps
        True
    """
    timeline = getattr(model, "timeline", None)
    if timeline is None:
        name = getattr(model, "name", type(model).__name__)
        raise ParameterError(
            f"model {name!r} has no timeline to trace (hockney, loggp, two-level hockney and "
            "topology models have one)"
        )
    tl = timeline(schedule, nbytes, max_messages=MAX_TRACE_EVENTS // EVENTS_PER_MESSAGE)
    trace = ChromeTrace()
    trace.process(RANKS, "ranks")
    for r in range(schedule.nranks):
        trace.thread(RANKS, 2 * r, f"rank {r} send")
        trace.thread(RANKS, 2 * r + 1, f"rank {r} recv")
    start, send_end, recv_start = tl.start * US, tl.send_end * US, tl.recv_start * US
    end, red_end = tl.end * US, tl.reduce_end * US
    src, dst, step = tl.src.tolist(), tl.dst.tolist(), tl.step.tolist()
    for i in range(tl.nmessages):
        s, d, args = src[i], dst[i], {"step": step[i]}
        sent = (RANKS, 2 * s, float(start[i]), float(send_end[i] - start[i]))
        got = (RANKS, 2 * d + 1, float(recv_start[i]), float(end[i] - recv_start[i]))
        trace.slice(*sent, f"send to {d}", "send", args)
        trace.slice(*got, f"recv from {s}", "recv", args)
        if red_end[i] > end[i]:
            dur = float(red_end[i] - end[i])
            trace.slice(RANKS, 2 * d + 1, float(end[i]), dur, "reduce", "reduce", args)
        trace.flow(sent, got, f"{s} -> {d}")
    local_start, local_end = tl.local_start * US, tl.local_end * US
    for r, a, b in zip(tl.local_rank.tolist(), local_start, local_end, strict=True):
        trace.slice(RANKS, 2 * r + 1, float(a), float(b - a), "local reduce", "reduce", {})
    if tl.network is not None and tl.indptr is not None:
        trace.process(LINKS, "links")
        _link_events(trace, tl, start, end)
    return trace.to_dict(model=model.describe(), algorithm=schedule.algorithm, nbytes=_size(nbytes))


def step_trace(schedule: Any, start: np.ndarray, end: np.ndarray, **other: Any) -> dict[str, Any]:
    """The Chrome trace of measured steps: ``start`` and ``end`` (``[p, nsteps]``, seconds on
    one clock; NaN where a rank has no part in a step) give each rank's interval per step; a
    slice per (rank, step) that sends or receives, and a flow arrow per message from its
    sender's slice of that step to its receiver's. ``other`` goes into ``otherData``.

    Examples:
        >>> import commsim
        >>> s = commsim.build("allreduce", "ring", nranks=2)
        >>> t0 = np.array([[0.0, 1.0], [0.0, 1.0]]) * 1e-6
        >>> doc = step_trace(s, t0, t0 + 1e-6)
        >>> [sum(e["ph"] == ph for e in doc["traceEvents"]) for ph in "Xsf"]  # 2 ranks, 2 steps
        [4, 4, 4]
    """
    p, nsteps = schedule.nranks, schedule.nsteps
    start, end = np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64)
    if start.shape != (p, nsteps) or end.shape != (p, nsteps):
        raise ParameterError(
            f"step times must be [{p}, {nsteps}] (ranks, steps), got {start.shape} and {end.shape}"
        )
    trace = ChromeTrace()
    trace.process(RANKS, "ranks")
    for r in range(p):
        trace.thread(RANKS, r, f"rank {r}")
    t0, t1 = start * US, end * US
    for i, st in enumerate(schedule.steps()):
        msg = messages(st, schedule)
        sends = np.bincount(msg.src, minlength=p)
        recvs = np.bincount(msg.dst, minlength=p)
        busy = np.flatnonzero(((sends + recvs) > 0) & np.isfinite(t0[:, i]))
        for r in busy.tolist():
            trace.slice(
                RANKS, r, float(t0[r, i]), float(t1[r, i] - t0[r, i]), f"step {i}", "step",
                {"step": i, "sends": int(sends[r]), "receives": int(recvs[r])},
            )  # fmt: skip
        ok = np.isfinite(t0[msg.src, i]) & np.isfinite(t0[msg.dst, i])
        for s, d in zip(msg.src[ok].tolist(), msg.dst[ok].tolist(), strict=True):
            trace.flow(
                (RANKS, s, float(t0[s, i]), float(t1[s, i] - t0[s, i])),
                (RANKS, d, float(t0[d, i]), float(t1[d, i] - t0[d, i])),
                f"{s} -> {d}",
            )
    return trace.to_dict(algorithm=schedule.algorithm, **other)


def _link_events(trace: ChromeTrace, tl: Any, start: np.ndarray, end: np.ndarray) -> None:
    """A track per busy link; a slice per maximal interval in which some message crossed it."""
    net = tl.network
    owner = np.repeat(np.arange(tl.nmessages), np.diff(tl.indptr))
    link = tl.links
    order = np.lexsort((start[owner], link))
    link, owner = link[order], owner[order]
    s, e = start[owner], end[owner]
    for lk in np.unique(link).tolist():
        u, v = net.link_label(lk)
        kind = net.kinds[net.link_kind[lk]]
        bw = units.format_bandwidth(net.bandwidth[lk])
        trace.thread(LINKS, lk, f"{u} -> {v} ({kind}, {bw})")
    k, n = 0, len(link)
    while k < n:  # one pass over the (link, start)-sorted crossings, merging overlaps
        lk, lo, hi, first, count = int(link[k]), float(s[k]), float(e[k]), int(owner[k]), 0
        while k < n and link[k] == lk and s[k] <= hi:
            hi = max(hi, float(e[k]))
            count += 1
            k += 1
        name = (
            f"{int(tl.src[first])} -> {int(tl.dst[first])}" if count == 1 else f"{count} messages"
        )
        args = {"messages": count, "step": int(tl.step[first])}
        trace.slice(LINKS, lk, lo, hi - lo, name, "link", args)
