r"""The JAX mesh backend's plan: a schedule as rounds of buffer windows (numpy only).

Rank ``r`` is device ``r`` of a 1-D mesh; its buffer is row ``r`` of a ``[p, nelems]`` array
sharded over the mesh. The device program (:mod:`commsim.exec.jax._program`) follows a
:class:`Plan` made here, without JAX, step by step:

1. The step's remote transfers are grouped into **messages** by ``(src, dst, channel)`` and the
   messages split into **rounds** (each rank sends ≤ 1 and receives ≤ 1 message per round, all
   of a round on one channel; :func:`commsim.exec._lowering.step_messages`): **one**
   ``lax.ppermute`` **per round**. Local transfers (``src == dst``) form one extra round without
   a ``ppermute``, placed first: its writes then come first, and XLA, which fuses a local
   payload's read into its write, sees every read of the buffer before any write of the step.
   Channels (IR rule 6) cost nothing extra: a step's ``ppermute`` s, on every channel, all read
   the pre-step buffer and none waits for another, so the rounds of different channels are in
   flight together and XLA is free to overlap them (the program puts no barrier between them).
2. A message's transfers, sorted and merged where contiguous on both sides, are its
   **segments**; segment ``k`` of every message of a round forms a segment column of static
   length ``L_k`` (the longest one). The sender's payload is the concatenation over ``k`` of
   ``lax.dynamic_slice(buf, start_k[me], L_k)``: windows of the buffer, no per-element index
   arrays. Where some device's segment is shorter than ``L_k`` (or absent), its window is shifted
   to stay inside the buffer and the receiver **masks** the write to the real range; only if no
   shift fits is the working buffer padded (one copy in, one out).
3. All payloads of a step are sliced from the pre-step buffer, then all writes are applied
   (the local round's first): ``lax.dynamic_update_slice`` of ``x`` (overwrite) or ``old + x``
   (reduce), so several reductions into one place add up and exchanges work.

Per-device values (window starts, mask bounds, reduce flags) live in one small static table
``[p, ncols]`` (int32, :attr:`Plan.table`) whose row the program picks once with
``lax.axis_index``.

4. **Channels apart.** With 2 to :data:`MAX_BUFFERS` channels that keep IR rule 6's promise
   (:class:`commsim.exec._channels.Owners`), every channel gets a copy of the buffer: its rounds
   (``Round.channel``) read and write that copy only, so a channel's step waits for its own
   earlier steps and never for another channel's, and the channels progress separately as the
   IR says; :attr:`Plan.owner` says from which copy each ``(rank, slot)`` is taken at the end.
   Cost: one buffer per channel, and one select over the buffer per channel past the first
   when they are merged. Past :data:`MAX_BUFFERS`, or for a schedule that breaks the
   promise, one buffer (channels then overlap within a step only).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from commsim._ir import Schedule, Step
from commsim.errors import CommsimError
from commsim.exec._channels import Owners
from commsim.exec._layout import Layout
from commsim.exec._lowering import Segments, check_layout, checked_steps, step_messages

__all__ = ["MAX_BUFFERS", "Plan", "Round", "Segment", "plan"]

#: Most channels that get a buffer copy of their own (device memory grows by one buffer each).
MAX_BUFFERS = 8

Perm = tuple[tuple[int, int], ...]


class Segment(NamedTuple):
    """One segment column of a round: each device moves at most one window of ``length``.

    ``send``, ``recv``, ``lo``, ``hi``, ``red`` are columns of :attr:`Plan.table` (``-1``: unused):
    the window start in the sender's and the receiver's buffer, the receiver's mask bounds within
    the window, and its reduce flag (only for ``mode == "mixed"``).
    """

    length: int
    offset: int  # start of this segment in the round's payload
    mode: str  # "set" (overwrite), "add" (reduce) or "mixed" (per-device flag)
    masked: bool
    send: int
    recv: int
    lo: int
    hi: int
    red: int


class Round(NamedTuple):
    """One ``ppermute`` (``perm`` is its ``(src, dst)`` pairs) or the local round (``None``),
    and the channel its messages are on."""

    perm: Perm | None
    segments: tuple[Segment, ...]
    size: int  # payload elements
    channel: int = 0


@dataclasses.dataclass(frozen=True)
class Plan:
    """A schedule lowered to rounds of windows, for one layout."""

    nranks: int
    nelems: int
    pad: int  # extra elements appended to the working buffer (0 unless windows do not fit)
    steps: tuple[tuple[Round, ...], ...]
    table: np.ndarray  # [p, ncols] int32: per-device window starts, mask bounds, flags
    #: [p, nslots] int32: the channel whose buffer holds each (rank, slot) at the end, when the
    #: channels run on buffers of their own (``None``: one buffer)
    owner: np.ndarray | None = None
    slot_elems: np.ndarray | None = None  # [nslots]: elements per slot (with ``owner``)

    @property
    def nbuffers(self) -> int:
        """Buffer copies the program keeps: one per channel, or one."""
        if self.owner is None:
            return 1
        return int(max((r.channel for st in self.steps for r in st), default=0)) + 1

    @property
    def nppermutes(self) -> int:
        return sum(r.perm is not None for st in self.steps for r in st)

    @property
    def nmasked(self) -> int:
        return sum(s.masked for st in self.steps for r in st for s in r.segments)

    def summary(self) -> dict[str, int]:
        """Counts for a benchmark's header: steps, ``ppermute`` s, segments, masks, padding."""
        return {
            "steps": len(self.steps),
            "ppermutes": self.nppermutes,
            "segments": sum(len(r.segments) for st in self.steps for r in st),
            "masked_segments": self.nmasked,
            "pad": self.pad,
            "table_cols": int(self.table.shape[1]),
        }


class _Column(NamedTuple):
    """A segment column before windows are placed: one entry per participating message."""

    s: np.ndarray  # sender
    r: np.ndarray  # receiver
    off: np.ndarray  # source start (elements)
    doff: np.ndarray  # destination start
    ln: np.ndarray  # length
    red: np.ndarray  # reduce flag
    length: int  # L, the column's window length


def _columns(messages: list[Segments]) -> list[_Column]:
    """Segment columns of one round from its messages."""
    ncols = max((len(m.segments) for m in messages), default=0)
    cols = []
    for k in range(ncols):
        rows = [(m.src, m.dst, *m.segments[k]) for m in messages if len(m.segments) > k]
        s, r, off, ln, doff, red = (np.array(c) for c in zip(*rows, strict=True))
        cols.append(_Column(s, r, off, doff, ln, red.astype(bool), int(ln.max())))
    return cols


RawRound = tuple[Perm | None, list[_Column], int]  # permutation, columns, channel


def _step_rounds(step: Step, off: np.ndarray, p: int) -> list[RawRound]:
    """The rounds of one step (the local rounds first, one per channel): permutation, columns
    and channel."""
    sm = step_messages(step, off, p)
    local = sorted({m.channel for m in sm.local})
    rounds: list[RawRound] = [
        (None, _columns([m for m in sm.local if m.channel == c]), c) for c in local
    ]
    return rounds + [
        (tuple((m.src, m.dst) for m in msgs), _columns(msgs), msgs[0].channel) for msgs in sm.rounds
    ]


def _shifts(col: _Column, n: int) -> np.ndarray | None:
    """Per-entry window shifts keeping both windows inside ``[0, n)``, or ``None`` if impossible."""
    lo = np.maximum(0, np.maximum(col.off, col.doff) + col.length - n)
    hi = np.minimum(col.length - col.ln, np.minimum(col.off, col.doff))
    return lo if (lo <= hi).all() else None


def _padding(raw: list[list[RawRound]], n: int) -> int:
    """Elements to append to the buffer so that every window fits (0 almost always)."""
    pad = 0
    for rounds in raw:
        for _, cols, _ in rounds:
            for c in cols:
                if _shifts(c, n) is None:
                    pad = max(pad, int((np.maximum(c.off, c.doff) + c.length - n).max()))
    return pad


class _Table:
    """The columns of :attr:`Plan.table`, added as segments are placed."""

    def __init__(self, p: int) -> None:
        self.p = p
        self.columns: list[np.ndarray] = []

    def add(self, values: np.ndarray, at: np.ndarray) -> int:
        """A new column holding ``values`` at devices ``at`` (0 elsewhere); its index."""
        col = np.zeros(self.p, dtype=np.int64)
        col[at] = values
        self.columns.append(col)
        return len(self.columns) - 1

    def array(self) -> np.ndarray:
        tab = np.stack(self.columns, axis=1) if self.columns else np.zeros((self.p, 1), np.int64)
        return tab.astype(np.int32)


def _segment(c: _Column, offset: int, n: int, receivers: set[int], table: _Table) -> Segment:
    """Place column ``c`` (at ``offset`` in the payload) in a buffer of ``n`` elements."""
    shift = _shifts(c, n)
    assert shift is not None
    full = (c.ln == c.length).all()
    if c.red.all():
        mode = "add"
        # non-receivers of a ppermute get zeros: adding them is harmless
        masked = not full or set(c.r.tolist()) != receivers
    else:
        mode = "set" if not c.red.any() else "mixed"
        masked = not full or len(c.r) < table.p
    lo = hi = red = -1
    if masked:
        lo = table.add(shift, c.r)
        hi = table.add(shift + c.ln, c.r)
    if mode == "mixed":
        red = table.add(c.red.astype(np.int64), c.r)
    send = table.add(c.off - shift, c.s)
    recv = table.add(c.doff - shift, c.r)
    return Segment(c.length, offset, mode, masked, send, recv, lo, hi, red)


def _round(perm: Perm | None, cols: list[_Column], channel: int, n: int, table: _Table) -> Round:
    receivers = {r for _, r in perm} if perm is not None else set(range(table.p))
    segs, offset = [], 0
    for c in cols:
        segs.append(_segment(c, offset, n, receivers, table))
        offset += c.length
    return Round(perm, tuple(segs), offset, channel)


def plan(schedule: Schedule, layout: Layout) -> Plan:
    """Lower ``schedule`` for ``layout`` into rounds of windows (no JAX needed).

    Examples:
        >>> import commsim
        >>> from commsim.exec import layout
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> pl = plan(s, layout(s, 400))
        >>> pl.nppermutes, pl.nmasked, pl.pad  # one full-cycle ppermute per step, no masks
        (6, 0, 0)
    """
    check_layout(schedule, layout)
    p, n = schedule.nranks, layout.nelems
    apart = 1 < schedule.nchannels <= MAX_BUFFERS
    owners = Owners(p, schedule.nslots)
    raw = []
    for _, st in checked_steps(schedule):
        raw.append(_step_rounds(st, layout.offsets, p))
        if apart:
            owners.add(st)
    pad = _padding(raw, n)
    if n + pad >= 2**31:
        raise CommsimError(f"buffers of {n + pad} elements are too large for the jax backend")
    table = _Table(p)
    steps = tuple(tuple(_round(*r, n + pad, table) for r in rs) for rs in raw)
    owner = owners.table() if apart else None
    if owner is None:
        return Plan(p, n, pad, steps, table.array())
    sizes = np.diff(layout.offsets)
    return Plan(p, n, pad, steps, table.array(), owner.astype(np.int32), sizes)
