r"""Lower a schedule to per-rank MSCCL instructions: chunks, buffers, order and fusion.

This is the first half of the MSCCL-IR export (:mod:`commsim.interop._msccl_write` is the
second: thread blocks, dependencies, limits, XML). It decides *what* each rank does, in order:

**Chunks.** MSCCL cuts the collective's buffer into ``nchunksperloop`` equal chunks and counts
every offset in chunks. A chunk here is ``q`` slot units, the gcd of the slot sizes and of the
collective's region bounds, so a slot of ``slot_units[j]`` units is ``slot_units[j] / q`` chunks
and ``nchunksperloop`` is the collective's element count ``c`` (its ``nbytes``) over ``q``.

**Buffers.** The commsim buffer holds the collective's data (laid out as
:class:`commsim.CollectiveSpec`'s ``input_region``/``output_region`` say) and then scratch.
MSCCL has an input ``i``, an output ``o`` and a scratch ``s`` buffer. Out of place (the default),
a rank's data chunk lives in ``i`` until the schedule first writes it, then at its *work*
location: ``o`` inside the output region, ``s`` elsewhere (``i`` is never written: NCCL's send
buffer is read-only). Reads before the first write read ``i``; a reducing receive into a chunk
not yet written is one ``rrc`` from ``i`` into ``o``/``s``; a local reduction into one is a ``cpy``
then an ``re``. Output chunks of a checked rank the schedule never writes (an allgather's own
block, a broadcast's root) get a final ``cpy`` from ``i``. In place, the data is one buffer
(``o`` where the output region is the larger, else ``i``), as NCCL's in-place calls lay it out.

**Order.** A rank's instructions follow the schedule's steps; within a step its sends come first,
then its local copies and reductions (those that read a slot before those that write it), then
its receives, which is how MSCCL's thread blocks honour the IR's reads-before-writes rule. A
transfer whose chunks are not contiguous in one MSCCL buffer on both ends is cut into pieces,
each one send and one receive, so **an MSCCL send is a piece of a commsim message**: a message
of ``k`` pieces is ``k`` MSCCL sends. Pieces are also cut at ``MAX_COUNT`` chunks.

**Fusion** (``fuse=True``). A receive whose chunks the rank sends on, unchanged, as its next
message to that peer becomes one instruction: ``rcs`` (receive, store, send), ``rrcs`` (receive,
reduce, store, send) or ``rrs`` (receive, reduce, send without storing, when no later
instruction reads the stored sum before overwriting it and it is not output). Fusion removes
an instruction, not a message: every piece is still one send. What changes is *when* the
forward starts: the runtime forwards each slice as it arrives, so a fused chain is cut-through
where commsim's models (Hockney, LogGP) charge store-and-forward, one full message time per hop.
A fused chain of ``h`` hops carrying ``n`` bytes in ``L`` slices takes about
:math:`(h + L - 1)(\alpha + \beta n/L)` instead of :math:`h(\alpha + \beta n)`. Pieces, not
fusion, change the message count: a commsim message whose transfers are not contiguous in
MSCCL's buffers becomes several sends, each charged its own latency.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator

import numpy as np

from commsim._ir import Schedule
from commsim._messages import group
from commsim.errors import ParameterError

__all__ = ["MAX_COUNT", "Instr", "Layout", "Loc", "lower"]

#: MSCCL's ``cnt`` must stay below 72 (``MSCCL_MAX_COUNT`` in ``msccl_struct.h``).
MAX_COUNT = 71

INPUT, OUTPUT, SCRATCH = "i", "o", "s"
Loc = tuple[str, int, int]  # (buffer, first chunk, chunk count)
_BUF = (INPUT, OUTPUT, SCRATCH)
_SENDS = {"s", "rcs", "rrs", "rrcs"}
_SRC_READS = {"s", "rrs", "rrc", "rrcs", "cpy", "re"}


@dataclasses.dataclass
class Instr:
    """One MSCCL step of one rank before thread blocks are assigned.

    ``step`` is the schedule step it comes from (``nsteps`` for the final output copies);
    ``send``/``recv`` the peers (-1: none); ``src``/``dst`` the chunk ranges it reads/writes;
    ``chan`` the schedule's channel it runs on (IR rule 6; a final copy: the channel that used
    the chunk).
    """

    kind: str
    step: int
    send: int = -1
    recv: int = -1
    src: Loc | None = None
    dst: Loc | None = None
    chan: int = 0

    def reads(self) -> Iterator[tuple[str, int]]:
        """The ``(buffer, chunk)`` locations it reads."""
        if self.src is not None and self.kind in _SRC_READS:
            b, o, n = self.src
            yield from ((b, o + i) for i in range(n))
        if self.kind == "re" and self.dst is not None:
            b, o, n = self.dst
            yield from ((b, o + i) for i in range(n))

    def writes(self) -> Iterator[tuple[str, int]]:
        """The ``(buffer, chunk)`` locations it writes."""
        if self.dst is not None:
            b, o, n = self.dst
            yield from ((b, o + i) for i in range(n))


class Layout:
    """Where each rank's chunks live in MSCCL's ``i``/``o``/``s`` buffers (module docstring)."""

    def __init__(self, schedule: Schedule, inplace: bool) -> None:
        s, p = schedule, schedule.nranks
        sp = s.spec
        c = s.nbytes_units
        in_off, in_len = sp.input_region(p, c)
        out_off, out_len = sp.output_region(p, c)
        q = math.gcd(*map(int, s.slot_units), c, in_len, out_len, *map(int, in_off),
                     *map(int, out_off))  # fmt: skip
        self.q = q
        self.offsets = s.slot_offsets // q  # slot j starts at chunk offsets[j]
        self.ndata = int(self.offsets[s.ndata])
        self.nscratch = int(self.offsets[-1]) - self.ndata
        self.nchunks = c // q  # nchunksperloop
        self.in_off, self.in_len = in_off // q, in_len // q
        self.out_off, self.out_len = out_off // q, out_len // q
        self.inplace = inplace
        self.checked = set(sp.checked_ranks(p, s.root).tolist())
        if inplace:
            big = self.out_len >= self.in_len
            whole = self.out_len if big else self.in_len
            starts = self.out_off if big else self.in_off
            if whole != self.ndata or starts.any():
                raise ParameterError(
                    f"{s.collective} has no in-place form in MSCCL: its input and output are "
                    f"not one buffer (export it out of place)"
                )
            self.data_buf = OUTPUT if big else INPUT
            self.nbuf = {INPUT: self.in_len, OUTPUT: self.out_len, SCRATCH: self.nscratch}
        else:
            spill = self.ndata - self.out_len  # data chunks outside the output region
            self.nbuf = {
                INPUT: self.in_len,
                OUTPUT: self.out_len,
                SCRATCH: self.nscratch + (self.ndata if spill else 0),
            }

    def work(self, r: int, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Buffer codes (0 i, 1 o, 2 s) and chunk indices of chunks ``u`` once written."""
        data = u < self.ndata
        if self.inplace:
            buf = np.where(data, _BUF.index(self.data_buf), 2)
            return buf, np.where(data, u, u - self.ndata)
        rel = u - self.out_off[r]
        out = data & (rel >= 0) & (rel < self.out_len)
        buf = np.where(out, 1, 2)
        idx = np.where(out, rel, np.where(data, self.nscratch + u, u - self.ndata))
        return buf, idx

    def read(self, r: int, u: np.ndarray, written: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where chunks ``u`` of rank ``r`` are read from, given its data chunks' ``written``."""
        buf, idx = self.work(r, u)
        if self.inplace:
            return buf, idx
        rel = u - self.in_off[r]
        data = u < self.ndata
        fresh = data & ~written[np.minimum(u, self.ndata - 1)] & (rel >= 0) & (rel < self.in_len)
        return np.where(fresh, 0, buf), np.where(fresh, rel, idx)

    def required(self, r: int, loc: tuple[str, int]) -> bool:
        """Whether the chunk at ``loc`` of rank ``r`` is part of its checked output."""
        if r not in self.checked:
            return False
        b, i = loc
        if not self.inplace:
            return b == OUTPUT
        if b != self.data_buf:
            return False
        return 0 <= i - int(self.out_off[r]) < self.out_len


def _cuts(*locs: tuple[np.ndarray, np.ndarray]) -> list[tuple[int, int]]:
    """Split ``[0, n)`` where any of the location arrays stops being one contiguous run."""
    n = len(locs[0][0])
    brk = np.zeros(n, dtype=bool)
    brk[0] = True
    for buf, idx in locs:
        brk[1:] |= (buf[1:] != buf[:-1]) | (idx[1:] != idx[:-1] + 1)
    starts = [*np.flatnonzero(brk).tolist(), n]
    out = []
    for a, b in itertools.pairwise(starts):
        out += [(x, min(x + MAX_COUNT, b)) for x in range(a, b, MAX_COUNT)]
    return out


def _loc(loc: tuple[np.ndarray, np.ndarray], a: int, b: int) -> Loc:
    return (_BUF[int(loc[0][a])], int(loc[1][a]), b - a)


def _local_order(ranges: list[tuple[int, int, int, int]], rank: int, step: int) -> list[int]:
    """Order local transfers ``(src_a, src_b, dst_a, dst_b)`` so each reads before any writes."""
    n = len(ranges)
    before = [[j for j in range(n) if j != i and ranges[j][0] < ranges[i][3]
               and ranges[i][2] < ranges[j][1]] for i in range(n)]  # fmt: skip
    order, done = [], set()
    while len(order) < n:
        ready = [i for i in range(n) if i not in done and all(j in done for j in before[i])]
        if not ready:
            raise ParameterError(
                f"step {step}: rank {rank}'s local copies read each other's destinations in a "
                f"cycle; MSCCL runs them one after another and cannot export that"
            )
        order += ready
        done.update(ready)
    return order


def lower(schedule: Schedule, layout: Layout, fuse: bool) -> list[list[Instr]]:
    """Every rank's MSCCL instructions in order (see the module docstring)."""
    p, lay, off = schedule.nranks, layout, layout.offsets
    written = np.zeros((p, lay.ndata), dtype=bool)
    touched = np.zeros((p, lay.ndata), dtype=np.int64)  # the channel that last used a chunk
    ranks: list[list[Instr]] = [[] for _ in range(p)]
    for k, st in enumerate(schedule.steps()):
        schedule.check_step(st, k)
        pre = written.copy()
        sends: list[list[Instr]] = [[] for _ in range(p)]
        local: list[list[Instr]] = [[] for _ in range(p)]
        recvs: list[list[Instr]] = [[] for _ in range(p)]
        sa, sb = off[st.src_slot], off[st.src_slot + st.count]
        da, db = off[st.dst_slot], off[st.dst_slot + st.count]
        grp = group(st.src, st.dst, p, st.channel)
        ch = st.channel.tolist()
        by_rank: dict[int, list[int]] = {}
        for t in grp.local.tolist():
            by_rank.setdefault(int(st.src[t]), []).append(t)
        for r, ts in by_rank.items():
            rng = [(int(sa[t]), int(sb[t]), int(da[t]), int(db[t])) for t in ts]
            for i in _local_order(rng, r, k):
                t = ts[i]
                u, v = np.arange(sa[t], sb[t]), np.arange(da[t], db[t])
                src, work = lay.read(r, u, pre[r]), lay.work(r, v)
                old = lay.read(r, v, written[r])
                for a, b in _cuts(src, work, old):
                    if st.reduce[t]:
                        if _loc(old, a, b) != _loc(work, a, b):
                            local[r].append(Instr("cpy", k, src=_loc(old, a, b),
                                                  dst=_loc(work, a, b), chan=ch[t]))  # fmt: skip
                        local[r].append(Instr("re", k, src=_loc(src, a, b), dst=_loc(work, a, b),
                                              chan=ch[t]))  # fmt: skip
                    else:
                        local[r].append(Instr("cpy", k, src=_loc(src, a, b), dst=_loc(work, a, b),
                                              chan=ch[t]))  # fmt: skip
                _mark(written[r], v, lay.ndata)
                _touch(touched, (r, u), (r, v), chan=ch[t], ndata=lay.ndata)
        for g, r, ts in zip(grp.src.tolist(), grp.dst.tolist(), grp.transfers, strict=True):
            for t in ts.tolist():
                u, v = np.arange(sa[t], sb[t]), np.arange(da[t], db[t])
                src, work = lay.read(g, u, pre[g]), lay.work(r, v)
                old = lay.read(r, v, written[r])
                for a, b in _cuts(src, work, old):
                    sends[g].append(Instr("s", k, send=r, src=_loc(src, a, b), chan=ch[t]))
                    if st.reduce[t]:
                        recvs[r].append(Instr("rrc", k, recv=g, src=_loc(old, a, b),
                                              dst=_loc(work, a, b), chan=ch[t]))  # fmt: skip
                    else:
                        recvs[r].append(Instr("r", k, recv=g, dst=_loc(work, a, b), chan=ch[t]))
                _mark(written[r], v, lay.ndata)
                _touch(touched, (g, u), (r, v), chan=ch[t], ndata=lay.ndata)
        for r in range(p):
            ranks[r] += sends[r] + local[r] + recvs[r]
    if not lay.inplace:
        _final_copies(ranks, lay, written, touched, schedule.nsteps)
    if fuse:
        for r, instrs in enumerate(ranks):
            ranks[r] = _fuse(instrs, r, lay)
    return ranks


def _mark(written: np.ndarray, v: np.ndarray, ndata: int) -> None:
    written[v[v < ndata]] = True


def _touch(touched: np.ndarray, *ends: tuple[int, np.ndarray], chan: int, ndata: int) -> None:
    for r, u in ends:
        touched[r, u[u < ndata]] = chan


def _final_copies(
    ranks: list[list[Instr]], lay: Layout, written: np.ndarray, touched: np.ndarray, end: int
) -> None:
    """Copy from ``i`` the output chunks of checked ranks that no step wrote, each on the
    channel that used the chunk (so an imported file keeps the schedule's channels apart)."""
    for r in sorted(lay.checked):
        u = lay.out_off[r] + np.arange(lay.out_len)
        todo = u[~written[r, u]]
        rel = todo - lay.in_off[r]
        todo = todo[(rel >= 0) & (rel < lay.in_len)]
        if not len(todo):
            continue
        src, dst = lay.read(r, todo, written[r]), lay.work(r, todo)
        chan = touched[r, todo]
        for a, b in _cuts(src, dst, (chan, np.arange(len(todo)))):
            ranks[r].append(Instr("cpy", end, src=_loc(src, a, b), dst=_loc(dst, a, b),
                                  chan=int(chan[a])))  # fmt: skip


def _overlaps(x: Loc, y: Loc | None) -> bool:
    return y is not None and x[0] == y[0] and x[1] < y[1] + y[2] and y[1] < x[1] + x[2]


def _fuse(instrs: list[Instr], rank: int, lay: Layout) -> list[Instr]:
    """Fuse each receive with the send that forwards its chunks next (module docstring)."""
    # (recv peer, channel) -> the send peer sharing its thread block, and the other way
    pair_recv: dict[tuple[int, int], int] = {}
    pair_send: dict[tuple[int, int], int] = {}
    removed: set[int] = set()
    for i, rcv in enumerate(instrs):
        if rcv.kind not in ("r", "rrc") or i in removed:
            continue
        x, peers, j = rcv.dst, set(), None
        assert x is not None
        for jj in range(i + 1, len(instrs)):
            ins = instrs[jj]
            if jj in removed:
                continue
            if _overlaps(x, ins.dst):
                break
            if ins.kind == "s":
                if ins.src == x and ins.chan == rcv.chan and ins.send not in peers:
                    j = jj
                    break
                peers.add(ins.send)
        if j is None:
            continue
        g, s, c = rcv.recv, instrs[j].send, rcv.chan
        if pair_recv.get((g, c), s) != s or pair_send.get((s, c), g) != g:
            continue
        pair_recv[(g, c)], pair_send[(s, c)] = s, g
        removed.add(j)
        rcv.send = s
        if rcv.kind == "r":
            rcv.kind = "rcs"
        elif _dead_after(instrs, i, j, removed, rank, lay):
            rcv.kind, rcv.dst = "rrs", None
        else:
            rcv.kind = "rrcs"
    return [ins for n, ins in enumerate(instrs) if n not in removed]


def _dead_after(
    instrs: list[Instr], i: int, j: int, removed: set[int], rank: int, lay: Layout
) -> bool:
    """Whether no instruction after ``i`` (but the forward ``j``) reads what ``i`` stores
    before overwriting it, and none of it is output."""
    x = instrs[i].dst
    assert x is not None
    pending = set(range(x[1], x[1] + x[2]))
    for n in range(i + 1, len(instrs)):
        ins = instrs[n]
        if n in removed or n == j:
            continue
        if any(b == x[0] and c in pending for b, c in ins.reads()):
            return False
        if ins.dst is not None and ins.dst[0] == x[0]:
            pending -= set(range(ins.dst[1], ins.dst[1] + ins.dst[2]))
        if not pending:
            return True
    return not any(lay.required(rank, (x[0], c)) for c in pending)
