"""Lowering helpers shared by the executors (numpy only).

Every device backend plans a schedule the same way before it builds a device program: it checks
that the layout belongs to the schedule, takes the steps one by one as the IR validates them,
turns slots into element ranges, and (for the message-passing backends) groups a step's transfers
into messages and rounds with :func:`commsim._messages.group`, the one decomposition the cost
models use too. Those steps live here, once:

* :func:`check_layout`: the layout was made for this schedule (same ranks, same slots).
* :func:`checked_steps`: the steps, each validated by the IR's one check
  (:meth:`commsim.Schedule.check_step`) before any backend lowers it.
* :func:`element_ranges`: a step's transfers as element ranges (empty ones dropped).
* :func:`merge_segments`: a message's transfers as element segments, contiguous runs merged.
* :func:`step_messages`: a step's messages in rounds, and its local transfers, as segments.
* :func:`port_rounds`: the rounds of messages on several channels, as **waves** (IR rule 6).
* :class:`CompileCache`: plans and programs per schedule (dropped with the schedule) and key.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from commsim._messages import group, matchings
from commsim.errors import CommsimError

if TYPE_CHECKING:
    from commsim._ir import Schedule, Step
    from commsim.exec._layout import Layout

__all__ = [
    "CompileCache",
    "ElementRanges",
    "Segments",
    "StepMessages",
    "check_layout",
    "checked_steps",
    "element_ranges",
    "merge_segments",
    "port_rounds",
    "step_messages",
]

T = TypeVar("T")
Segment = tuple[int, int, int, bool]  # (source start, length, destination start, reduce)


def check_layout(schedule: Schedule, layout: Layout) -> None:
    """Refuse a layout made for another schedule (other ranks or other slots), in one line."""
    if layout.nranks != schedule.nranks:
        raise CommsimError(
            f"schedule {schedule.algorithm!r} has p={schedule.nranks} ranks but the layout is for "
            f"{layout.nranks} ranks"
        )
    if len(layout.offsets) != schedule.nslots + 1:
        raise CommsimError(
            f"the layout has {len(layout.offsets) - 1} slots, schedule {schedule.algorithm!r} has "
            f"{schedule.nslots}: build the layout from this schedule (commsim.exec.layout)"
        )


def checked_steps(schedule: Schedule) -> Iterator[tuple[int, Step]]:
    """``(i, step)`` for every step, after :meth:`~commsim.Schedule.check_step` accepted it."""
    for i, st in enumerate(schedule.steps()):
        schedule.check_step(st, i)
        yield i, st


class ElementRanges(NamedTuple):
    """A step's non-empty transfers in elements: ``[sa, sa + ln)`` of ``src`` → ``[da, ...)``."""

    src: np.ndarray
    dst: np.ndarray
    sa: np.ndarray
    ln: np.ndarray
    da: np.ndarray
    red: np.ndarray


def element_ranges(step: Step, off: np.ndarray) -> ElementRanges:
    """Element ranges of ``step``'s transfers for slot offsets ``off`` (zero-length dropped)."""
    sa = off[step.src_slot]
    ln = off[step.src_slot + step.count] - sa
    keep = ln > 0
    return ElementRanges(
        step.src[keep], step.dst[keep], sa[keep], ln[keep], off[step.dst_slot][keep],
        step.reduce[keep],
    )  # fmt: skip


def merge_segments(
    sa: np.ndarray, ln: np.ndarray, da: np.ndarray, red: np.ndarray
) -> list[Segment]:
    """Transfers as segments ``(src, len, dst, reduce)``, sorted by source start (stably), runs
    contiguous on both sides with the same ``reduce`` merged.

    Examples:
        >>> import numpy as np
        >>> merge_segments(
        ...     np.array([4, 0, 2]),
        ...     np.array([2, 2, 2]),
        ...     np.array([10, 5, 7]),
        ...     np.array([False, False, False]),
        ... )
        [(0, 4, 5, False), (4, 2, 10, False)]
    """
    segs: list[list[Any]] = []
    for i in np.argsort(sa, kind="stable").tolist():
        a, n, d, f = int(sa[i]), int(ln[i]), int(da[i]), bool(red[i])
        if segs:
            pa, pn, pd, pf = segs[-1]
            if pa + pn == a and pd + pn == d and pf == f:
                segs[-1][1] += n
                continue
        segs.append([a, n, d, f])
    return [(a, n, d, f) for a, n, d, f in segs]


class Segments(NamedTuple):
    """One message's merged segments (:func:`merge_segments`), from ``src`` to ``dst``, on
    ``channel``."""

    src: int
    dst: int
    segments: list[Segment]
    channel: int = 0


class StepMessages(NamedTuple):
    """A step as the message-passing backends lower it.

    Attributes:
        rounds: per round of :func:`port_rounds` (in that order), its messages: each round is
            a matching (a rank sends at most one and receives at most one message in it), and
            all of a round's messages are on one channel.
        local: per rank and channel with local transfers (``src == dst``, in rank then channel
            order), those transfers as one message from the rank to itself.
        waves: per round, its wave: the rounds of one wave are on different channels and may
            run at once (a rank's channels are its ports); waves run one after another.
    """

    rounds: list[list[Segments]]
    local: list[Segments]
    waves: list[int]


def port_rounds(
    src: np.ndarray, dst: np.ndarray, channel: np.ndarray, nranks: int
) -> tuple[list[np.ndarray], list[int]]:
    r"""Split messages ``(src[i], dst[i], channel[i])`` into rounds, each a matching on one
    channel, grouped into waves; returns the rounds (index arrays) and each round's wave.

    On one channel this is :func:`commsim._messages.matchings` itself, a wave per round. On
    several, each channel's messages are split by ``matchings`` on their own, and wave ``j``
    holds the ``j``-th round of every channel (channels in increasing order): a rank then
    sends at most one and receives at most one message **per channel** in a wave, so the wave's
    rounds can be in flight together, one per port, while each channel keeps its own round
    order. Every rank derives the same waves from the same step, which is what the MPI
    backend's deadlock-freedom argument needs (:mod:`commsim.exec.mpi._plan`).

    Examples:
        >>> import numpy as np
        >>> r = np.arange(4)
        >>> # a ring on two channels: one round per channel, both in wave 0
        >>> rounds, waves = port_rounds(
        ...     np.r_[r, r], np.r_[(r + 1) % 4, (r + 1) % 4], np.repeat([0, 1], 4), 4
        ... )
        >>> [x.tolist() for x in rounds], waves
        ([[0, 1, 2, 3], [4, 5, 6, 7]], [0, 0])
    """
    if not len(channel) or not channel.any() or (channel == channel[0]).all():
        rounds = matchings(src, dst, nranks)
        return rounds, list(range(len(rounds)))
    per_channel = []
    for c in np.unique(channel).tolist():
        idx = np.flatnonzero(channel == c)
        per_channel.append([idx[m] for m in matchings(src[idx], dst[idx], nranks)])
    out: list[np.ndarray] = []
    waves: list[int] = []
    for j in range(max(len(rs) for rs in per_channel)):
        for rs in per_channel:
            if j < len(rs):
                out.append(rs[j])
                waves.append(j)
    return out, waves


def step_messages(
    step: Step, off: np.ndarray, nranks: int, ranks: Collection[int] | None = None
) -> StepMessages:
    """``step``'s messages in rounds and its local transfers, as segments for slot offsets ``off``.

    Messages are one per ``(src, dst, channel)`` (:func:`commsim._messages.group`), in the
    rounds and waves of :func:`port_rounds`. With ``ranks``, only the messages that those ranks
    send or receive (rounds where none of them takes part stay, empty, so that every rank
    numbers the rounds alike).

    Examples:
        >>> import numpy as np, commsim
        >>> st = commsim.Step.make(src=[0, 1, 1], dst=[1, 0, 1], src_slot=[0, 1, 0], dst_slot=1)
        >>> sm = step_messages(st, np.array([0, 2, 4]), 2)
        >>> [[(m.src, m.dst, m.segments) for m in r] for r in sm.rounds]
        [[(0, 1, [(0, 2, 2, False)]), (1, 0, [(2, 2, 2, False)])]]
        >>> sm.local
        [Segments(src=1, dst=1, segments=[(0, 2, 2, False)], channel=0)]
        >>> # the same pair on two channels: two messages, in one wave
        >>> two = commsim.Step.make(src=0, dst=1, src_slot=[0, 1], dst_slot=[0, 1], channel=[0, 1])
        >>> sm = step_messages(two, np.array([0, 2, 4]), 2)
        >>> [[(m.src, m.dst, m.channel) for m in r] for r in sm.rounds], sm.waves
        ([[(0, 1, 0)], [(0, 1, 1)]], [0, 0])
    """
    keep = off[step.src_slot + step.count] > off[step.src_slot]
    chan = step.channel[keep]
    src, dst, sa, ln, da, red = element_ranges(step, off)
    wanted = None if ranks is None else set(ranks)
    g = group(src, dst, nranks, chan)
    first = np.array([t[0] for t in g.transfers], dtype=np.int64)  # one per message
    mchan = chan[first] if chan.any() else np.zeros(len(first), dtype=np.int64)
    rounds = []
    if len(mchan) and (mchan != mchan[0]).any():
        split, waves = port_rounds(g.src, g.dst, mchan, nranks)
    else:  # one channel: the rounds group() split already
        split, waves = g.rounds, list(range(len(g.rounds)))
    for rnd in split:
        msgs = []
        for m in rnd.tolist():
            s, d, t = int(g.src[m]), int(g.dst[m]), g.transfers[m]
            if wanted is None or s in wanted or d in wanted:
                segs = merge_segments(sa[t], ln[t], da[t], red[t])
                msgs.append(Segments(s, d, segs, int(mchan[m])))
        rounds.append(msgs)
    local = []
    lsrc, lchan = src[g.local], chan[g.local]
    for r, c in sorted(set(zip(lsrc.tolist(), lchan.tolist(), strict=True))):
        if wanted is None or r in wanted:
            t = g.local[(lsrc == r) & (lchan == c)]
            local.append(Segments(r, r, merge_segments(sa[t], ln[t], da[t], red[t]), c))
    return StepMessages(rounds, local, waves)


class CompileCache:
    """Plans and programs per schedule (weakly held) and key, each made once.

    Every device backend keeps one: its plans under ``("plan", count)``, its programs under
    ``("program", count, dtype)``, its native collectives under ``("native", count, dtype)``
    (and CUDA its uploaded launch tables, which serve every dtype, under ``("launches", count)``).
    """

    def __init__(self) -> None:
        self._entries: weakref.WeakKeyDictionary[Schedule, dict[tuple[Any, ...], Any]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, schedule: Schedule, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        """The entry for ``(schedule, key)``, made by ``make()`` the first time."""
        entry = self._entries.setdefault(schedule, {})
        if key not in entry:
            entry[key] = make()
        return entry[key]
