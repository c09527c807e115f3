r"""The mpi4jax backend's plan: each rank's program of rounds (numpy only), and why it cannot
deadlock.

Rank ``r`` is MPI rank ``r`` of a communicator of exactly ``p`` processes; it holds only its own
flat buffer ``[nelems]``. For each step, every rank computes the same global decomposition,
:func:`commsim.exec._lowering.step_messages`: the step's remote transfers grouped into messages
by ``(src, dst, channel)`` and split into rounds by :func:`commsim._messages.matchings` (the
decomposition the cost models use), per channel, the ``j``-th rounds of every channel forming
**wave** ``j`` (:func:`commsim.exec._lowering.port_rounds`; one channel: a wave per round). The
rank keeps its part of each round: at most one message to send and one to receive, with the
round's channel and wave. Per round its program (:mod:`commsim.exec.mpi._program`) issues

* ``mpi4jax.sendrecv`` when it both sends and receives, else ``mpi4jax.send`` or ``mpi4jax.recv``,
  tagged with the step index (mod :data:`TAG_LIMIT`);
* the payload of a message is the concatenation of its transfers' element ranges (contiguous
  runs merged: its :class:`Segment` s), read from the **pre-step** buffer; the receiver splits it
  the same way.

mpi4jax has only blocking operations, so its program runs the rounds one after another and a
rank's channels take turns (their messages are all sent, but not at once). The host executor
(:mod:`commsim.exec.mpi._host`) runs the rounds of a wave together, with non-blocking
``Isend`` / ``Irecv`` to several peers and one ``Waitall``: a rank's channels are then in flight
at once, as IR rule 6 says.

After the step's last round, the received pieces and the local transfers (``src == dst``) are
written: overwrite or add (several reductions into one place add up). All reads of a step come
before all of its writes, which is the IR's semantics.

Why this cannot deadlock, for any schedule the verifier accepts. Every rank walks the same list
of (step, round) pairs in the same order, doing nothing in rounds it has no part in. Within a
round each rank sends at most one and receives at most one message, so the round's messages
form disjoint simple paths and cycles. Take the first round, in that global order, in which
some operation never completes. Every rank finishes its earlier operations, so it reaches this
round and posts its operation in it. Each message ``a → b`` of the round is then posted on both
sides: ``a``'s send (or the send half of its ``sendrecv``) and ``b``'s receive (``recv``, or the
receive half of its ``sendrecv``, which MPI progresses concurrently with its send half, so a
``sendrecv`` never waits for its own send before receiving). A send whose matching receive is
posted completes, even in synchronous mode, and so does the receive; hence every operation of
the round completes, including along a cycle ``a → b → … → a`` of ``sendrecv`` s, which is what a
blocking ``send`` then ``recv`` would deadlock on. Contradiction. The host executor's waves
follow the same argument with a wave in place of a round: every rank walks the same list of
(step, wave) pairs; in the first wave with an operation that never completes, every rank has
posted *all* of its operations of the wave (non-blocking, before it waits, or the one blocking
``sendrecv`` of a rank with a single round in the wave), so both sides of every message of
the wave are posted, and all of them complete. Matching is also unambiguous: messages between
a pair are posted in the global (step, round) order on both sides (two channels between one
pair are two rounds of one wave, posted in round order by sender and receiver alike), and MPI
does not let messages between a pair on one communicator with one tag overtake each other, so
every receive gets its own message even when tags wrap. (``tests/mpi`` replays every
registered schedule's rank programs, and multi-channel ones, with rendezvous sends, the worst
case, round by round and wave by wave, and checks that they finish and compute the reference.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from commsim._ir import Schedule, Step
from commsim.exec._layout import Layout
from commsim.exec._lowering import Segments, check_layout, checked_steps, step_messages

__all__ = ["TAG_LIMIT", "Message", "RankPlan", "Round", "Segment", "StepPlan", "plan"]

TAG_LIMIT = 32768  # MPI guarantees tags 0..32767


class Segment(NamedTuple):
    """``length`` elements from ``src`` (sender's buffer) to ``dst`` (receiver's), or added."""

    src: int
    length: int
    dst: int
    reduce: bool


class Message(NamedTuple):
    """One message of a round, seen from one side: the other rank and the payload's segments."""

    peer: int
    segments: tuple[Segment, ...]

    @property
    def size(self) -> int:
        return sum(s.length for s in self.segments)


class Round(NamedTuple):
    """This rank's part of one round: at most one send and one receive, on ``channel``; the
    rounds of one ``wave`` are on different channels and may run at once."""

    send: Message | None
    recv: Message | None
    channel: int = 0
    wave: int = 0


class StepPlan(NamedTuple):
    """This rank's rounds in one step (global round order), then its local transfers."""

    tag: int
    rounds: tuple[Round, ...]
    local: tuple[Segment, ...]


@dataclasses.dataclass(frozen=True)
class RankPlan:
    """The program of one rank: per step, its rounds and local transfers."""

    rank: int
    nranks: int
    nelems: int
    steps: tuple[StepPlan, ...]

    def summary(self) -> dict[str, int]:
        """Counts for a benchmark's header: steps, ``sendrecv`` / ``send`` / ``recv``, data."""
        rounds = [r for st in self.steps for r in st.rounds]
        return {
            "steps": len(self.steps),
            "sendrecv": sum(r.send is not None and r.recv is not None for r in rounds),
            "send": sum(r.send is not None and r.recv is None for r in rounds),
            "recv": sum(r.send is None and r.recv is not None for r in rounds),
            "elements_sent": sum(r.send.size for r in rounds if r.send is not None),
        }


def _segments(m: Segments) -> tuple[Segment, ...]:
    return tuple(Segment(*s) for s in m.segments)


def _step_plans(step: Step, off: np.ndarray, p: int, ranks: list[int], tag: int) -> list[StepPlan]:
    """The plans of ``ranks`` for one step (the same global rounds for everyone)."""
    sm = step_messages(step, off, p, ranks)
    rounds: dict[int, list[Round]] = {r: [] for r in ranks}
    for msgs, wave in zip(sm.rounds, sm.waves, strict=True):
        send = {m.src: Message(m.dst, _segments(m)) for m in msgs if m.src in rounds}
        recv = {m.dst: Message(m.src, _segments(m)) for m in msgs if m.dst in rounds}
        channel = msgs[0].channel if msgs else 0
        for r in send.keys() | recv.keys():
            rounds[r].append(Round(send.get(r), recv.get(r), channel, wave))
    local: dict[int, tuple[Segment, ...]] = {}
    for m in sm.local:  # a rank's channels touch disjoint slots: their order does not matter
        local[m.src] = local.get(m.src, ()) + _segments(m)
    return [StepPlan(tag, tuple(rounds[r]), local.get(r, ())) for r in ranks]


def plan(schedule: Schedule, layout: Layout, ranks: Iterable[int] | None = None) -> list[RankPlan]:
    """The programs of ``ranks`` (default: all) for ``schedule`` on ``layout`` (no MPI needed).

    Every rank derives its program from the whole schedule, so all ranks agree on the rounds.

    Examples:
        >>> import commsim
        >>> from commsim.exec import layout
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> [pl] = plan(s, layout(s, 400), ranks=[0])
        >>> pl.summary()  # one sendrecv per step, a quarter of the vector each
        {'steps': 6, 'sendrecv': 6, 'send': 0, 'recv': 0, 'elements_sent': 600}
    """
    check_layout(schedule, layout)
    p = schedule.nranks
    ranks = list(range(p)) if ranks is None else [int(r) for r in ranks]
    per_rank: list[list[StepPlan]] = [[] for _ in ranks]
    for i, st in checked_steps(schedule):
        plans = _step_plans(st, layout.offsets, p, ranks, i % TAG_LIMIT)
        for acc, sp in zip(per_rank, plans, strict=True):
            acc.append(sp)
    return [
        RankPlan(r, p, layout.nelems, tuple(steps))
        for r, steps in zip(ranks, per_rank, strict=True)
    ]
