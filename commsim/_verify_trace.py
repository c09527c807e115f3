r"""Where a wrong reduction first went wrong: follow one result slot's contributions step by step.

When :func:`commsim.verify` finds a reducing collective's result slot ``(r, j)`` wrong, the final
symptom (the step that last wrote it) is often far from the fault: a ring allreduce on 8 ranks
that turns one reduction of step 0 into a copy shows it at step 7. This module names the
**earliest step** (or the window of steps) where a contribution was counted twice or lost, by
tracing the contributions the slot needs.

The slot must hold, once each, the **seed** of every rank ``q``: rank ``q``'s input slot ``j``
(every reducing spec defines result slot ``j`` as the sum of the ranks' input slots ``j``). A
**version** of a ``(rank, slot)`` is its content between two writes; ``w`` is the step that wrote
it (``-1`` for an input). Two passes over the steps, each ``O(moved slots)`` per step:

1. Backwards from ``(r, j)``: its **ancestors**, the versions its final value was computed from
   (an overwrite's source; a reduction's source and the destination's previous version).
2. Forwards: ``held[k, q]``, how many copies of seed ``q`` the current version of slot ``k``
   holds (saturated at 2), and whether any transfer has read that version yet.

The rules, stated exactly:

* **Counted twice at step t**: ``t`` is the first step that creates an ancestor of ``(r, j)``
  holding some seed ``q`` twice. Counts only grow along ancestry, so this is where two copies of
  ``q`` met (and the result counts ``q`` at least twice).
* **Stranded between steps w + 1 and t**: for a seed ``q`` missing from ``(r, j)``, a stranded
  copy is a version holding ``q`` that no transfer reads before step ``t`` overwrites it with
  data without ``q`` (or before the schedule ends, in a slot whose result does not need ``q``).
  It was written at step ``w`` and sat unread from step ``w + 1``: either a send that should
  have read it is missing (somewhere in ``w + 1 .. t``) or step ``t`` should not have
  overwritten it (a copy where a reduction was meant); ``w + 1 == t`` names one step. Reads
  come before writes in a step (IR rule 1), so a copy read by the step that overwrites it is
  not stranded. When the window is longer, the error also names the earliest ancestor of
  ``(r, j)`` on a rank the copy's rank sends to (or its own) that was unread at a step of the
  window: a reduction of the copy into it there would have put ``q`` into the result.
* **Overwritten at step t**: for a seed ``q`` missing from ``(r, j)``, step ``t`` creates an
  ancestor of ``(r, j)`` by an overwrite that replaces a version holding ``q`` with data without
  ``q``: the result's own history dropped ``q`` there, even if other copies of ``q`` live on
  (recursive doubling's partner still has it).

The diagnosis is the event whose window starts first (then ends first; at one step: stranded,
then overwritten, then twice). ``None`` when no rule applies: a contribution taken from the
wrong input slot, a result slot that was simply never updated (the final symptom's "last
written at step w" says that), or a message missing from an exchange (recursive doubling's
``0 -> 1`` dropped: rank 0 keeps the contribution and passes it on, rank 1 never gets it;
without a reference schedule no rule can tell which step should have delivered it).

Measured: over every reducing algorithm of the registry at ``p = 5`` and ``8``, with one
transfer of one step dropped, duplicated or its reduce flag flipped (every step in turn, 891
broken schedules), the named step or window contained the broken step every time one was named:
381 times as that one step, 244 as a window; 146 left only the symptom (and 120 failed a
structural check at once). ``tests/test_verify_trace.py`` repeats the sweep on a few algorithms.

Memory: ``p · nslots · p`` counters of 4 bytes, under the verifier's ``_DIAGNOSE_LIMIT``; the
ancestors cost one flag per ``(rank, slot)`` plus the versions they created, and ``p · p`` flags
say who sends to whom.

See Also:
    :func:`commsim.verify`, which calls :func:`first_fault` when a result is wrong.

References:
    msccl-tools' chunk checker (pre/post-conditions per collective, a chunk reduced twice is
    caught) is the idea this follows, with arrays and a step named instead of a boolean.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from commsim._ir import Schedule, Step

__all__ = ["Fault", "first_fault", "per_slot"]

_NEVER = np.iinfo(np.int64).max


def per_slot(st: Step) -> tuple[np.ndarray, ...]:
    """``(src, dst, src_slot, dst_slot, reduce)`` with one entry per moved slot."""
    if (st.count == 1).all():
        return st.src, st.dst, st.src_slot, st.dst_slot, st.reduce
    n = len(st.count)
    rep = np.repeat(np.arange(n), st.count)
    offs = np.arange(len(rep)) - (np.cumsum(st.count) - st.count)[rep]
    return (
        st.src[rep],
        st.dst[rep],
        st.src_slot[rep] + offs,
        st.dst_slot[rep] + offs,
        st.reduce[rep],
    )


@dataclasses.dataclass(frozen=True)
class Fault:
    """Where a result's contribution was counted twice or lost: one step, or a window of steps.

    Attributes:
        step: the first step of the window (``"stranded"``: the first step the copy sat unread).
        kind: ``"twice"``, ``"stranded"`` or ``"overwritten"`` (the module docstring's rules).
        origin: the rank whose contribution it is.
        slot: the result slot (and the origin's input slot) it belongs to.
        at_rank, at_slot: the ``(rank, slot)`` where it happened.
        sources: ``"twice"``: the ranks whose transfers reduced into it at ``step``; otherwise
            the rank whose transfer overwrote the copy (empty: it sat until the end).
        until: the step that overwrote the copy (``None``: the end, or ``"twice"``).
        join: ``"stranded"``: ``(rank, slot, step)``, the earliest place in the window where a
            reduction from the copy's rank would have put it into a version the result is
            computed from, if there is one.
    """

    step: int
    kind: str
    origin: int
    slot: int
    at_rank: int
    at_slot: int
    sources: tuple[int, ...] = ()
    until: int | None = None
    join: tuple[int, int, int] | None = None

    @property
    def last(self) -> int:
        """The last step of the window (past the schedule's end: the copy sat to the end)."""
        if self.kind == "twice":
            return self.step
        return _NEVER if self.until is None else self.until

    def when(self) -> str:
        """``"at step 3"``, ``"between steps 0 and 7"`` or ``"at step 4 or later"``."""
        if self.kind != "stranded" or self.until == self.step:
            return f"at step {self.step}"
        if self.until is None:
            return f"at step {self.step} or later"
        return f"between steps {self.step} and {self.until}"

    def sentence(self) -> str:
        """One clause for the verifier's error, naming the place and what happened."""
        whose = f"rank {self.origin}'s contribution to slot {self.slot}"
        where = f"rank {self.at_rank} slot {self.at_slot}"
        by = self.sources[0] if self.sources else -1
        if self.kind == "twice":
            srcs = ", ".join(map(str, self.sources))
            return (
                f"{whose} was first counted twice at step {self.step}, in {where} "
                f"(reduced from rank(s) {srcs})"
            )
        if self.kind == "overwritten":
            return (
                f"{whose} was lost at step {self.step}: a transfer from rank {by} overwrote "
                f"{where}, which held it, with data lacking it, and the result was computed "
                "from that data (should the transfer reduce?)"
            )
        since = "from the start" if self.step == 0 else f"since step {self.step - 1}"
        if self.until == self.step:
            return (
                f"{whose} was lost at step {self.step}: {where} held it {since}, and step "
                f"{self.until} overwrote it before anything read it (rank {by}'s transfer does "
                "not reduce)"
            )
        if self.until is None:
            end = "to the end, in a slot whose result does not need it"
        else:
            end = f"until step {self.until} overwrote it (from rank {by})"
        said = f"{whose} sat unread in {where} {since} {end}"
        if self.join is None:
            return said
        b, sl, s = self.join
        return (
            f"{said}; a reduction into rank {b} slot {sl}, which the result is computed from, "
            f"at step {s} would have kept it (is that transfer missing?)"
        )


def _ancestors(schedule: Schedule, key: int) -> tuple[list[np.ndarray | None], np.ndarray]:
    """Per step, the slots (``rank * nslots + slot``) whose new versions are ancestors of
    ``key``'s final version (``None``: none), and which inputs are; one backward pass."""
    S = schedule.nslots
    anc = np.zeros(schedule.nranks * S, dtype=bool)
    anc[key] = True
    created: list[np.ndarray | None] = [None] * schedule.nsteps
    for t in reversed(range(schedule.nsteps)):
        st = schedule.step(t)
        if len(st.src) == 0:
            continue
        src, dst, s_idx, d_idx, red = per_slot(st)
        dk = dst * S + d_idx
        hit = anc[dk]
        if not hit.any():
            continue
        created[t] = np.unique(dk[hit])
        anc[dk[hit & ~red]] = False  # an overwritten version is no ancestor; a reduced one is
        anc[(src * S + s_idx)[hit]] = True  # the sources as they were before the step (rule 1)
    return created, anc


@dataclasses.dataclass
class _Losses:
    """Per origin, the loss of one kind with the earliest end (then start) seen so far."""

    kind: str
    since: np.ndarray
    hi: np.ndarray
    key: np.ndarray
    by: np.ndarray

    @classmethod
    def none(cls, kind: str, p: int) -> _Losses:
        return cls(kind, *(np.full(p, v, dtype=np.int64) for v in (_NEVER, _NEVER, -1, -1)))

    def note(self, gone: np.ndarray, keys: np.ndarray, since, hi: int, by) -> None:
        """Record the losses ``gone[row, q]``: the copy in slot ``keys[row]``, idle from
        ``since`` (a scalar or one per row) and overwritten at step ``hi`` by rank ``by``."""
        rows = np.flatnonzero(gone.any(axis=1))
        if len(rows) == 0:
            return
        lo = np.broadcast_to(since, len(keys))
        rows = rows[np.argsort(lo[rows], kind="stable")]  # each origin's first row: its earliest
        hits = gone[rows]
        best = hits.argmax(axis=0)
        first = np.where(hits.any(axis=0), lo[rows[best]], _NEVER)
        better = (first < _NEVER) & ((hi < self.hi) | ((hi == self.hi) & (first < self.since)))
        row = rows[best[better]]
        self.since[better] = first[better]
        self.hi[better] = hi
        self.key[better] = keys[row]
        self.by[better] = np.broadcast_to(by, len(keys))[row]

    def first(self, missing: np.ndarray, slot: int, schedule: Schedule) -> Fault | None:
        """The loss among the ``missing`` origins with the earliest end, as a :class:`Fault`."""
        missing = missing[self.since[missing] < _NEVER]
        if len(missing) == 0:
            return None
        q = int(missing[np.lexsort((self.since[missing], self.hi[missing]))[0]])
        end = int(self.hi[q]) >= schedule.nsteps
        return Fault(
            int(self.since[q]), self.kind, q, slot, *divmod(int(self.key[q]), schedule.nslots),
            sources=() if end else (int(self.by[q]),),
            until=None if end else int(self.hi[q]),
        )  # fmt: skip


@dataclasses.dataclass
class _Openings:
    """When each version the result is computed from could still take a reduction: steps
    ``[written + 1, first read - 1]`` (reads before writes), and who sends to whom."""

    keys: list[np.ndarray]
    lo: list[np.ndarray]
    hi: list[np.ndarray]
    talks: np.ndarray

    def note(self, keys: np.ndarray, written: np.ndarray, read_at: int) -> None:
        self.keys.append(keys)
        self.lo.append(written[keys] + 1)
        self.hi.append(np.full(len(keys), read_at - 1, dtype=np.int64))

    def join(self, fault: Fault, nsteps: int, S: int) -> Fault:
        """``fault`` with the earliest place its copy could have joined the result."""
        keys, lo, hi = (np.concatenate(x) for x in (self.keys, self.lo, self.hi))
        until = nsteps - 1 if fault.until is None else fault.until
        ranks, slots = np.divmod(keys, S)
        a = fault.at_rank
        start = np.maximum(lo, fault.step)
        ok = (start <= np.minimum(hi, until)) & (self.talks[a, ranks] | (ranks == a))
        if not ok.any():
            return fault
        order = np.lexsort((slots != fault.at_slot, start))
        e = order[ok[order]][0]
        return dataclasses.replace(fault, join=(int(ranks[e]), int(slots[e]), int(start[e])))


def first_fault(
    schedule: Schedule, pre: np.ndarray, mask: np.ndarray, r: int, j: int
) -> Fault | None:
    """Where result slot ``(r, j)`` first had a contribution counted twice or lost.

    Args:
        schedule: a reducing collective's schedule that passed the structural checks.
        pre: ``[p, ndata]``, which data slots hold input (the spec's ``initial``).
        mask: ``[p, ndata]``, which data slots the result defines (the spec's ``expected``).
        r, j: the wrong result slot (a data slot).

    Returns:
        The :class:`Fault` the module docstring's rules find first, or ``None``.

    Examples:
        >>> import numpy as np
        >>> from commsim._ir import Schedule
        >>> from commsim.algorithms import build
        >>> ring = build("allreduce", "ring", nranks=8)
        >>> steps = list(ring.steps())
        >>> steps[0] = steps[0]._replace(reduce=np.arange(8) > 0)  # rank 0 copies, not adds
        >>> bad = Schedule.from_steps(steps, collective="allreduce", nranks=8, nslots=8)
        >>> all_ = np.ones((8, 8), dtype=bool)
        >>> f = first_fault(bad, all_, all_, 0, 7)
        >>> f.when(), f.kind, f.origin, (f.at_rank, f.at_slot)
        ('at step 0', 'stranded', 1, (1, 7))
    """
    p, S, T = schedule.nranks, schedule.nslots, schedule.nsteps
    key = r * S + j
    created, lineage = _ancestors(schedule, key)  # lineage[k]: slot k's version is an ancestor
    origins, held = _inputs_held(pre, j, S)
    written = np.full(p * S, -1, dtype=np.int64)
    read = np.zeros(p * S, dtype=bool)
    stranded, overwritten = _Losses.none("stranded", p), _Losses.none("overwritten", p)
    openings = _Openings([], [], [], np.zeros((p, p), dtype=bool))
    twice: Fault | None = None
    for t, st in enumerate(schedule.steps()):
        if len(st.src) == 0:
            continue
        openings.talks[st.src, st.dst] = True
        src, dst, s_idx, d_idx, red = per_slot(st)
        sk, dk = src * S + s_idx, dst * S + d_idx
        vals = held[sk]
        reads = np.unique(np.concatenate([sk, dk[red]]))  # a reduction reads its destination
        first = reads[~read[reads] & lineage[reads]]
        if len(first):
            openings.note(first, written, t)
        read[reads] = True
        ow = ~red
        dko = dk[ow]
        gone = (held[dko] > 0) & (vals[ow] == 0)
        if gone.any():
            stranded.note(gone & ~read[dko, None], dko, written[dko] + 1, t, src[ow])
            if created[t] is not None:
                mine = np.isin(dko, created[t])
                overwritten.note(gone & mine[:, None], dko, t, t, src[ow])
        held[dko] = vals[ow]
        if red.any():
            np.add.at(held, dk[red], vals[red])
        held[dk] = np.minimum(held[dk], 2)
        written[dk] = t
        read[dk] = False
        lineage[dk] = False
        if created[t] is not None:
            lineage[created[t]] = True
            if twice is None:
                hit = held[created[t]] >= 2
                if hit.any():
                    row, q = (int(x) for x in np.argwhere(hit)[0])
                    k = int(created[t][row])
                    srcs = tuple(int(x) for x in np.unique(src[(dk == k) & red]))
                    twice = Fault(t, "twice", q, j, *divmod(k, S), sources=srcs)
    openings.note(np.flatnonzero(lineage & ~read), written, T)  # never read: open to the end
    # copies still unread at the end, in slots whose result does not need them
    needed = np.zeros((p, S), dtype=bool)
    needed[:, j] = mask[:, j]
    keys = np.flatnonzero(~read & ~needed.reshape(-1))
    stranded.note(held[keys] > 0, keys, written[keys] + 1, T, -1)
    missing = origins[held[key, origins] == 0]
    return _earliest(schedule, j, missing, stranded, overwritten, openings, twice)


def _inputs_held(pre: np.ndarray, j: int, S: int) -> tuple[np.ndarray, np.ndarray]:
    """The ranks whose input feeds result slot ``j`` (``origins``), and ``held[k, o]``: slot
    ``k`` (``rank · S + slot``) holds origin ``o``'s contribution, at the start (each origin's
    input slot ``j`` holds its own, once)."""
    origins = np.flatnonzero(pre[:, j])
    held = np.zeros((len(pre) * S, len(pre)), dtype=np.int32)
    held[origins * S + j, origins] = 1
    return origins, held


def _earliest(
    schedule: Schedule,
    j: int,
    missing: np.ndarray,
    stranded: _Losses,
    overwritten: _Losses,
    openings: _Openings,
    twice: Fault | None,
) -> Fault | None:
    """The earliest of the faults found for result slot ``j``: the first loss of a
    ``missing`` contribution (stranded, joined to the window it stayed open in, or
    overwritten) and the first contribution counted twice."""
    lost = stranded.first(missing, j, schedule)
    if lost is not None and lost.until != lost.step:
        lost = openings.join(lost, schedule.nsteps, schedule.nslots)
    found = [f for f in (lost, overwritten.first(missing, j, schedule), twice) if f is not None]
    return min(found, key=lambda f: (f.step, f.last), default=None)
