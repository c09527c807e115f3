"""Checks of Chrome trace documents shared by ``tests/test_trace.py``,
``tests/cli/test_trace_cli.py`` and ``tests/mpi/test_mpi_trace.py`` (each imports it by path:
the tests are not a package): the tests' own reading of the Trace Event Format, independent of
the code that writes it."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

from commsim import Schedule
from commsim._messages import messages
from commsim.models import chrome_trace

REQUIRED = {
    "X": {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"},
    "M": {"name", "ph", "pid", "args"},
    "s": {"name", "cat", "ph", "id", "ts", "pid", "tid"},
    "f": {"name", "cat", "ph", "id", "ts", "pid", "tid", "bp"},
}


def check_trace(doc: dict[str, Any]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """Validate ``doc`` as the tests' reading of the Trace Event Format; its slices per track.

    Every event has its phase's keys; the slices of a track nest or follow each other (a
    stack walk, with a rounding tolerance); each flow id has one start and one end, the end
    no earlier than the start, each strictly inside one slice of its track.
    """
    doc = json.loads(json.dumps(doc))  # plain JSON
    assert set(doc) >= {"traceEvents", "displayTimeUnit", "otherData"}
    tracks: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    flows: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for e in doc["traceEvents"]:
        assert REQUIRED[e["ph"]] <= set(e), e
        if e["ph"] == "X":
            assert e["dur"] >= 0, e
            tracks[(e["pid"], e["tid"])].append(e)
        elif e["ph"] in "sf":
            assert e["ph"] not in flows[e["id"]], f"flow {e['id']} has two {e['ph']} events"
            flows[e["id"]][e["ph"]] = e
    tol = 1e-9 * max((e["ts"] + e["dur"] for t in tracks.values() for e in t), default=1.0)
    for key, slices in tracks.items():
        slices.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ends: list[float] = []
        for e in slices:
            while open_ends and e["ts"] >= open_ends[-1] - tol:
                open_ends.pop()
            if open_ends:  # inside the enclosing slice: it must nest
                assert e["ts"] + e["dur"] <= open_ends[-1] + tol, (key, e)
            open_ends.append(e["ts"] + e["dur"])
    for fid, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {fid} is not one start and one end"
        s, f = pair["s"], pair["f"]
        assert f["ts"] >= s["ts"] - tol and s["name"] == f["name"] and s["cat"] == f["cat"]
        for ev in (s, f):
            assert enclosing(tracks, ev) is not None, ev
    return tracks


def enclosing(tracks: dict, ev: dict[str, Any]) -> dict[str, Any] | None:
    """The one slice of ``ev``'s track strictly around its timestamp (``None`` if none)."""
    around = [e for e in tracks[(ev["pid"], ev["tid"])] if e["ts"] < ev["ts"] < e["ts"] + e["dur"]]
    assert len(around) <= 1, (ev, around)
    return around[0] if around else None


def thread_names(doc: dict[str, Any]) -> dict[tuple[int, int], str]:
    return {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }


def count_messages(schedule: Schedule) -> int:
    return sum(len(messages(st, schedule).src) for st in schedule.steps())


def check_prediction_trace(model: Any, schedule: Schedule, nbytes: float) -> dict[str, Any]:
    """The acceptance checks of a prediction's trace; the document."""
    doc = chrome_trace(model, schedule, nbytes)
    tracks = check_trace(doc)
    names = thread_names(doc)
    p = schedule.nranks
    ranks = {int(n.split()[1]) for (pid, _), n in names.items() if pid == 1}
    assert ranks == set(range(p))
    slices = [e for (pid, _), t in tracks.items() if pid == 1 for e in t]
    time = model.predict(schedule, nbytes).time
    assert max(e["ts"] + e["dur"] for e in slices) == pytest.approx(time * 1e6, rel=1e-12)
    sends = [e for e in slices if e["cat"] == "send"]
    assert len(sends) == count_messages(schedule)
    starts = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "f"}
    assert len(starts) == len(sends)
    for fid, s in starts.items():
        f = ends[fid]
        q, r = (int(x) for x in s["name"].split(" -> "))
        assert names[(1, s["tid"])] == f"rank {q} send"
        assert names[(1, f["tid"])] == f"rank {r} recv"
        sent, got = enclosing(tracks, s), enclosing(tracks, f)
        assert sent is not None and sent["name"] == f"send to {r}"
        assert got is not None and got["name"] == f"recv from {q}"
        assert sent["args"]["step"] == got["args"]["step"]
    return doc
