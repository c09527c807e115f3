"""Chrome trace export of a topology prediction: open the JSON in Perfetto (ui.perfetto.dev) or
``chrome://tracing``.

Two processes: ``ranks`` (per rank two tracks, ``rank r send`` with its sends and ``rank r recv``
with its receives and the reductions after them) and ``links`` (a track per link that carried
traffic, a slice per busy interval: the union of the intervals of the messages crossing it, named
by the message when it is one, else by their number). Times are microseconds (the format's
unit). A message occupies its links from its start to its arrival, at the rate its contention
mode gave it; the trace shows the model's view of time, one message size at a time.

The JSON format requires the slices of one track to nest (Perfetto drops the others): a rank's
send and receive of one round overlap without nesting whenever their ends differ, hence two
tracks per rank; each is a sequence (single port: a rank's next send starts after its clock,
which is past its previous send's end, and its next receive after its previous reduction), and
the link tracks are unions, so every track is a sequence of disjoint slices.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim import units

__all__ = ["MAX_TRACE_EVENTS", "chrome_trace"]

#: Traces past this many events are refused (Perfetto slows down well before).
MAX_TRACE_EVENTS = 2_000_000


def chrome_trace(model: Any, schedule: Any, nbytes: Any) -> dict[str, Any]:
    """The Chrome trace (JSON object format) of ``schedule`` at one size on ``model`` (a
    :class:`~commsim.models.Topology`); ``json.dump`` it to a file.

    Refuses (:class:`~commsim.errors.ResourceError`, one line) a schedule of more than
    ``MAX_TRACE_EVENTS / 3`` messages before timing all of it.

    Examples:
        >>> import commsim
        >>> from commsim.models import Topology
        >>> from commsim.topology import ring
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> doc = chrome_trace(Topology(ring(4)), s, "1MiB")
        >>> sends = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "send"]
        >>> len(sends) == 4 * 2 * 3  # p ranks, 2(p - 1) steps
        True
    """
    tl = model.timeline(schedule, nbytes, max_messages=MAX_TRACE_EVENTS // 3)
    net = model.network
    us = 1e6
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "ranks"}},
        {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "links"}},
    ]
    for r in range(schedule.nranks):
        for tid, what in ((2 * r, "send"), (2 * r + 1, "recv")):
            events.append(
                {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                 "args": {"name": f"rank {r} {what}"}}
            )  # fmt: skip
            events.append(
                {"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid,
                 "args": {"sort_index": tid}}
            )  # fmt: skip
    start, end, red_end = tl.start * us, tl.end * us, tl.reduce_end * us
    for i in range(tl.nmessages):
        s, d, st = int(tl.src[i]), int(tl.dst[i]), int(tl.step[i])
        ts, dur = float(start[i]), float(end[i] - start[i])
        args = {"step": st}
        events.append({"ph": "X", "pid": 1, "tid": 2 * s, "ts": ts, "dur": dur, "cat": "send",
                       "name": f"send to {d}", "args": args})  # fmt: skip
        events.append({"ph": "X", "pid": 1, "tid": 2 * d + 1, "ts": ts, "dur": dur,
                       "cat": "recv", "name": f"recv from {s}", "args": args})  # fmt: skip
        if red_end[i] > end[i]:
            events.append(
                {"ph": "X", "pid": 1, "tid": 2 * d + 1, "ts": float(end[i]), "cat": "reduce",
                 "dur": float(red_end[i] - end[i]), "name": "reduce", "args": args}
            )  # fmt: skip
    events += _link_events(net, tl, start, end)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "model": model.describe(),
            "algorithm": schedule.algorithm,
            "nbytes": float(np.atleast_1d(nbytes)[0]) if not isinstance(nbytes, str) else nbytes,
        },
    }


def _link_events(net: Any, tl: Any, start: np.ndarray, end: np.ndarray) -> list[dict[str, Any]]:
    """A track per busy link; a slice per maximal interval in which some message crossed it."""
    owner = np.repeat(np.arange(tl.nmessages), np.diff(tl.indptr))
    link = tl.links
    order = np.lexsort((start[owner], link))
    link, owner = link[order], owner[order]
    s, e = start[owner], end[owner]
    events: list[dict[str, Any]] = []
    for lk in np.unique(link).tolist():
        u, v = net.link_label(lk)
        kind = net.kinds[net.link_kind[lk]]
        events.append(
            {"name": "thread_name", "ph": "M", "pid": 2, "tid": lk,
             "args": {"name": f"{u} -> {v} ({kind}, {units.format_bandwidth(net.bandwidth[lk])})"}}
        )  # fmt: skip
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
        events.append(
            {"ph": "X", "pid": 2, "tid": lk, "ts": lo, "dur": hi - lo, "cat": "link",
             "name": name, "args": {"messages": count, "step": int(tl.step[first])}}
        )  # fmt: skip
    return events
