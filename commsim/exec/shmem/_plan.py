r"""The one-sided backend's plan: each rank's puts, signals and waits (numpy only), and why the
waits cannot deadlock.

Every rank computes the same global decomposition of each step,
:func:`commsim.exec._lowering.step_messages` (messages per ``(src, dst, channel)``, in the rounds
and waves the cost models and the two-sided backends use), and keeps the messages it sends and
receives. A message becomes a **put**: the sender writes its payload (its segments' source
ranges of the **pre-step** buffer, one ``MPI_Put`` per contiguous segment) into the receiver's
**staging** region, at an offset every rank derives alike, then raises the receiver's
**signal** for that sender; the receiver waits on its signals and only then reads the staging
region and writes its buffer (overwrite, or add: the reduction is the target's, after the
signal). Nobody posts a receive.

* **Staging** is symmetric, as a SHMEM heap is: every rank allocates
  :attr:`RankPuts.staging` elements, the most that lands on any rank in one run of the
  schedule; each message of a run has its own region (messages of different steps and channels
  never share one), so within a run no put overwrites data its target has yet to read.
* **Signals** are ``2 p`` counters per rank, cumulative over the runs of one program. Counter
  ``s`` (``0 <= s < p``) counts the messages rank ``s`` has completed into this rank; the sender
  adds a step's message count to it after the step's puts are complete at the target
  (``MPI_Win_flush``). In step ``k`` of run ``e`` the rank waits until counter ``s`` reaches
  ``e · M_s + C_s(k)`` for each sender ``s`` of the step, where ``M_s`` is the number of
  messages ``s`` sends it per run (:attr:`RankPuts.per_run`) and ``C_s(k)`` the number through
  step ``k`` (:attr:`StepPuts.waits`).
* **Credits** reuse the staging across runs: counter ``p + t`` counts the runs whose data from
  this rank target ``t`` has consumed; ``t`` adds one after the last step of a run in which it
  reads from this rank (:attr:`StepPuts.credits`), and before its first put to ``t`` in run
  ``e >= 1`` this rank waits until the counter reaches ``e`` (:attr:`StepPuts.first`).

In a step a rank: (1) for each of its puts, in the global round order, waits for a credit if it
is the run's first put to that target, then issues the put; (2) completes them all
(``MPI_Win_flush_all``) and raises each target's signal by its message count; (3) waits for the
signals of its senders; (4) reads its local transfers' sources, then writes the staged arrivals
(in the global round order) and its local transfers; (5) sends the credits due after this step.
All reads of a step (the puts' sources and the local sources) come before its writes, as the
IR's semantics say; a rank's channels (IR rule 6) are all in flight in (1) and (2) at once: none
waits for another, because no put waits for anything but a credit of an earlier run.

Why this cannot deadlock, for any schedule the verifier accepts. Order the pairs (run, step)
lexicographically; every rank walks them in that order. Suppose some rank waits forever, and
take the first pair ``(e, k)`` in which one does. By minimality every rank completes every
earlier pair. A wait in ``(e, k)`` is of one of two kinds. *A credit wait* of rank ``r`` for
target ``t`` needs ``t`` to have finished the last step of run ``e - 1`` in which it reads from
``r``: an earlier pair, which ``t`` completes. *A signal wait* of rank ``r`` for sender ``s``
needs every put of ``s`` to ``r`` up to step ``k`` of run ``e``: ``s`` completed all earlier
pairs, so it reaches ``(e, k)``, where its only waits before raising signals are credit waits,
which complete (the first case); its puts then complete (a passive-target put needs no action of
the target's program, and every waiting rank is inside the MPI library, polling, which is
where an MPI library without hardware RMA makes progress), and it raises ``r``'s signal. So the
wait ends; a contradiction. A signal never lies about data: it is raised only after the puts it
counts are complete at the target (``MPI_Win_flush``), and counts only grow, so a later run's
signal cannot satisfy an earlier wait of the same sender falsely (the wait counts all messages
through the pair). A later run's put cannot overwrite unread data: within a run every message
has its own region, and across runs the credit orders the sender's first put after the target's
last read. (``tests/mpi/test_mpi_shmem.py`` replays every registered schedule's programs, and
multi-channel ones, with ranks interleaved adversarially, and checks that they finish and
compute the reference.)
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from commsim._ir import Schedule
from commsim.exec._layout import Layout
from commsim.exec._lowering import check_layout, checked_steps, step_messages

__all__ = ["Put", "RankPuts", "Segment", "StepPuts", "plan"]


class Segment(NamedTuple):
    """``length`` elements from ``src`` (sender's buffer) to ``dst`` (receiver's), or added."""

    src: int
    length: int
    dst: int
    reduce: bool


class Put(NamedTuple):
    """One message as a put, seen from one side: ``peer`` is the target (in
    :attr:`StepPuts.puts`) or the sender (in :attr:`StepPuts.arrivals`); the segments land one
    after another in the target's staging region from element ``offset``."""

    peer: int
    channel: int
    segments: tuple[Segment, ...]
    offset: int

    @property
    def size(self) -> int:
        return sum(s.length for s in self.segments)


class StepPuts(NamedTuple):
    """One rank's part of one step.

    Attributes:
        puts: the messages it sends, in the global round order.
        arrivals: the messages that land on it, in the same order (written in that order).
        signals: ``(target, messages)``: what it adds to each target's signal after its puts.
        waits: ``(sender, count)``: it waits until the sender's signal reaches
            ``run · per_run[sender] + count`` (the sender's messages to it through this step).
        local: its local transfers (``src == dst``).
        first: targets it puts to for the first time in a run here (a credit wait before).
        credits: senders whose last message of a run it reads here (a credit after).
    """

    puts: tuple[Put, ...]
    arrivals: tuple[Put, ...]
    signals: tuple[tuple[int, int], ...]
    waits: tuple[tuple[int, int], ...]
    local: tuple[Segment, ...]
    first: tuple[int, ...]
    credits: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class RankPuts:
    """The one-sided program of one rank.

    Attributes:
        rank, nranks, nelems: the rank, ``p`` and its buffer's length in elements.
        staging: elements of the symmetric staging region (the same on every rank).
        per_run: ``[p]``: messages each sender puts into this rank per run.
        steps: per step, this rank's :class:`StepPuts`.
    """

    rank: int
    nranks: int
    nelems: int
    staging: int
    per_run: np.ndarray
    steps: tuple[StepPuts, ...]

    def summary(self) -> dict[str, int]:
        """Counts for a benchmark's header: steps, puts, signal waits, data, staging."""
        return {
            "steps": len(self.steps),
            "puts": sum(len(st.puts) for st in self.steps),
            "waits": sum(len(st.waits) for st in self.steps),
            "elements_put": sum(m.size for st in self.steps for m in st.puts),
            "staging": self.staging,
        }


def _segments(segs: list[tuple[int, int, int, bool]]) -> tuple[Segment, ...]:
    return tuple(Segment(*s) for s in segs)


def plan(schedule: Schedule, layout: Layout) -> list[RankPuts]:
    """Every rank's one-sided program for ``schedule`` on ``layout`` (no MPI needed).

    All ranks are planned together: the staging offsets a sender writes at are the target's,
    and the staging size is the largest any rank needs.

    Examples:
        >>> import commsim
        >>> from commsim.exec import layout
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> pl = plan(s, layout(s, 400))
        >>> pl[0].summary()  # a put and a wait per step, a quarter of the vector each
        {'steps': 6, 'puts': 6, 'waits': 6, 'elements_put': 600, 'staging': 600}
        >>> pl[0].per_run.tolist()  # six messages from its left neighbour per run
        [0, 0, 0, 6]
    """
    check_layout(schedule, layout)
    p = schedule.nranks
    cursor = np.zeros(p, dtype=np.int64)  # next free staging element, per target
    counts = np.zeros((p, p), dtype=np.int64)  # [target, sender]: messages so far in the run
    raw: list[list[tuple[list[Put], list[Put], list[Segment]]]] = [[] for _ in range(p)]
    cum: list[np.ndarray] = []  # per step, counts after it
    for _, st in checked_steps(schedule):
        sm = step_messages(st, layout.offsets, p)
        puts: list[list[Put]] = [[] for _ in range(p)]
        arrivals: list[list[Put]] = [[] for _ in range(p)]
        for msgs in sm.rounds:
            for m in msgs:
                segs = _segments(m.segments)
                size = sum(s.length for s in segs)
                at = int(cursor[m.dst])
                cursor[m.dst] += size
                counts[m.dst, m.src] += 1
                puts[m.src].append(Put(m.dst, m.channel, segs, at))
                arrivals[m.dst].append(Put(m.src, m.channel, segs, at))
        local: list[list[Segment]] = [[] for _ in range(p)]
        for m in sm.local:  # a rank's channels touch disjoint slots: their order does not matter
            local[m.src].extend(_segments(m.segments))
        for r in range(p):
            raw[r].append((puts[r], arrivals[r], local[r]))
        cum.append(counts.copy())
    nsteps = len(cum)
    first_last = _first_last(np.stack(cum) if nsteps else np.zeros((0, p, p), np.int64))
    return [
        RankPuts(
            r, p, layout.nelems, int(cursor.max(initial=0)), counts[r].copy(),
            tuple(_step(r, k, raw[r][k], cum, first_last) for k in range(nsteps)),
        )
        for r in range(p)
    ]  # fmt: skip


def _first_last(cum: np.ndarray) -> np.ndarray:
    """``[2, target, sender]``: the first and the last step with a message from the sender to
    the target (``-1`` if none), from ``cum`` (``[step, target, sender]``, cumulative)."""
    nsteps = cum.shape[0]
    if not nsteps:
        return np.full((2, *cum.shape[1:]), -1, dtype=np.int64)
    per_step = np.diff(cum, axis=0, prepend=np.zeros_like(cum[:1])) > 0
    any_ = per_step.any(axis=0)
    first = np.where(any_, per_step.argmax(axis=0), -1)
    last = np.where(any_, nsteps - 1 - per_step[::-1].argmax(axis=0), -1)
    return np.stack([first, last])


def _step(
    r: int,
    k: int,
    raw: tuple[list[Put], list[Put], list[Segment]],
    cum: list[np.ndarray],
    first_last: np.ndarray,
) -> StepPuts:
    """Rank ``r``'s :class:`StepPuts` for step ``k``."""
    puts, arrivals, local = raw
    here = cum[k] - (cum[k - 1] if k else 0)  # [target, sender]: messages in this step
    signals = tuple((int(t), int(here[t, r])) for t in np.flatnonzero(here[:, r]))
    waits = tuple((int(s), int(cum[k][r, s])) for s in np.flatnonzero(here[r]))
    first, last = first_last
    return StepPuts(
        tuple(puts), tuple(arrivals), signals, waits, tuple(local),
        tuple(int(t) for t in np.flatnonzero(first[:, r] == k)),
        tuple(int(s) for s in np.flatnonzero(last[r] == k)),
    )  # fmt: skip
