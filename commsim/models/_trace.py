"""Chrome trace export of a topology prediction: open the JSON in Perfetto (ui.perfetto.dev) or
``chrome://tracing``.

Two processes: ``ranks`` (a track per rank: its sends, receives and reductions) and ``links`` (a
track per link that carried traffic: a slice per message while it crossed, named by its ends).
Times are microseconds (the format's unit). A message occupies its links from its start to its
arrival, at the rate its contention mode gave it; the trace shows the model's view of time, one
message size at a time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim import units
from commsim.errors import ResourceError

__all__ = ["MAX_TRACE_EVENTS", "chrome_trace"]

#: Traces past this many events are refused (Perfetto slows down well before).
MAX_TRACE_EVENTS = 2_000_000


def chrome_trace(model: Any, schedule: Any, nbytes: Any) -> dict[str, Any]:
    """The Chrome trace (JSON object format) of ``schedule`` at one size on ``model`` (a
    :class:`~commsim.models.Topology`); ``json.dump`` it to a file."""
    tl = model.timeline(schedule, nbytes)
    net = model.network
    nevents = 3 * tl.nmessages + len(tl.links)
    if nevents > MAX_TRACE_EVENTS:
        raise ResourceError(
            f"a trace of {nevents:,} events is more than {MAX_TRACE_EVENTS:,}: trace a smaller p"
        )
    us = 1e6
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "ranks"}},
        {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "links"}},
    ]
    events += [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": r, "args": {"name": f"rank {r}"}}
        for r in range(schedule.nranks)
    ]
    start, end, red_end = tl.start * us, tl.end * us, tl.reduce_end * us
    for i in range(tl.nmessages):
        s, d, st = int(tl.src[i]), int(tl.dst[i]), int(tl.step[i])
        dur = float(end[i] - start[i])
        common = {"ph": "X", "pid": 1, "ts": float(start[i]), "dur": dur, "cat": "message"}
        events.append({**common, "tid": s, "name": f"send to {d}", "args": {"step": st}})
        events.append({**common, "tid": d, "name": f"recv from {s}", "args": {"step": st}})
        if red_end[i] > end[i]:
            events.append(
                {"ph": "X", "pid": 1, "tid": d, "ts": float(end[i]), "cat": "reduce",
                 "dur": float(red_end[i] - end[i]), "name": "reduce", "args": {"step": st}}
            )  # fmt: skip
    used = np.unique(tl.links)
    for link in used.tolist():
        u, v = net.link_label(link)
        kind = net.kinds[net.link_kind[link]]
        events.append(
            {"name": "thread_name", "ph": "M", "pid": 2, "tid": link,
             "args": {"name": f"{u} -> {v} ({kind}, {units.format_bandwidth(net.bandwidth[link])})"}}
        )  # fmt: skip
    owner = np.repeat(np.arange(tl.nmessages), np.diff(tl.indptr))
    for k, link in enumerate(tl.links.tolist()):
        i = int(owner[k])
        events.append(
            {"ph": "X", "pid": 2, "tid": link, "ts": float(start[i]),
             "dur": float(end[i] - start[i]), "cat": "link",
             "name": f"{int(tl.src[i])} -> {int(tl.dst[i])}", "args": {"step": int(tl.step[i])}}
        )  # fmt: skip
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "model": model.describe(),
            "algorithm": schedule.algorithm,
            "nbytes": float(np.atleast_1d(nbytes)[0]) if not isinstance(nbytes, str) else nbytes,
        },
    }
