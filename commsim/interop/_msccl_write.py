r"""Write a schedule as MSCCL-IR, the XML algorithm file MSCCL's executor runs.

The format is that of ``msccl-tools`` (``ir_to_xml`` in ``msccl/language/ir.py``) as read by
``msccl-executor-nccl`` (``src/misc/msccl/msccl_parser.cc``)::

    <algo name proto nchannels nchunksperloop ngpus coll inplace outofplace minBytes maxBytes>
      <gpu id i_chunks o_chunks s_chunks>
        <tb id send recv chan>
          <step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep/>

:mod:`commsim.interop._msccl_lower` turns the schedule into each rank's instructions in order
(chunks, buffers, pieces, fusion; its docstring says where the MSCCL program sends more
messages than the schedule and how fusion changes their timing). This module places them:

* **Thread blocks.** Per channel of the schedule (IR rule 6), one per send peer and one per
  receive peer, a receive peer and a send peer sharing one when fused instructions join them or
  when they are the same rank (an exchange), plus one for local copies. Each thus has at most one send and one receive peer, and each
  ``(sender, receiver, channel)`` connection has one thread block at each end, so MSCCL's FIFO
  matching pairs the ``k``-th send with the ``k``-th receive, as both follow step order.
* **Dependencies.** A step waits (``depid``/``deps``) for the last step of another thread block
  that wrote what it reads or writes, or read what it writes (reads before writes, as in the
  IR). Waits already implied by earlier ones (tracked with one vector clock per step) are
  dropped; a step that still needs several waits gets ``nop`` steps carrying all but one, placed
  before it as the executor requires; every step waited on has ``hasdep="1"``.
* **Channels.** The schedule's channel ``c`` (IR rule 6: concurrent, on data of its own) runs
  on thread blocks of its own, so MSCCL runs them at once, and ``nchannels = k`` runs ``k``
  copies of the program: copy ``j`` of channel ``c`` is MSCCL channel ``c·k + j`` and moves
  sub-chunk ``j`` of every chunk (``nchunksperloop`` grows ``k``-fold); a range of ``n > 1``
  chunks is then ``n`` steps of one chunk each, as the sub-chunks are not contiguous. Reading
  the file back (:func:`commsim.interop.parse_msccl`) gives the schedule's channels again
  (:mod:`._msccl_channels`).

Deadlock freedom: every thread block runs its steps in the schedule's step order, sends before
receives within a step, and every wait points to a step of an earlier schedule step or to a send
of the same one (which waits for nothing of that step); by induction over steps every receive's
matching send is eventually issued (the executor buffers one loop's sends per connection).

Limits of the executor (``msccl_struct.h``, ``msccl_parser.h``, ``makefiles/common.mk``): at most
64 steps per thread block, ``cnt`` below 72 (longer ranges are split), 32 channels, 32 sending
and 32 receiving thread blocks per channel, waits on thread blocks below 128 (``int8``), chunk
offsets below 32768 (``int16``) and 4096 XML nodes per rank. A schedule past one of them is a
:class:`~commsim.errors.ResourceError` naming the limit and by how much, never a file the
executor would reject.

Examples:
    >>> import commsim
    >>> prog = msccl_program(commsim.build("allreduce", "ring", nranks=4))
    >>> prog.nchunksperloop, prog.max_tb_steps, prog.nfused
    (4, 7, 20)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from commsim._ir import Schedule
from commsim._messages import messages
from commsim.errors import ParameterError, ResourceError
from commsim.interop._msccl_lower import INPUT, OUTPUT, SCRATCH, Instr, Layout, lower

__all__ = ["PROTOCOLS", "MscclProgram", "format_msccl", "msccl_program", "write_msccl"]

PROTOCOLS = ("Simple", "LL", "LL128")
MAX_STEPS = 64  # MSCCL_MAX_NUM_STEPS (a build-time constant, 64 by default)
MAX_CHANNELS = 32  # MAXCHANNELS
MAX_TB_PER_CHANNEL = 32  # MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL
MAX_TB = MAX_TB_PER_CHANNEL * MAX_CHANNELS  # MSCCL_MAX_NUM_THREAD_BLOCKS
MAX_DEPID = 127  # dependentBid is an int8_t
MAX_OFFSET = 32767  # srcOffset/dstOffset are int16_t
MAX_NODES = 4096  # XML nodes the parser keeps per rank (algo, gpus, this rank's tbs and steps)

#: MSCCL's name for each collective (its executor spells reduce-scatter without the underscore).
COLL = {
    "allreduce": "allreduce",
    "reduce_scatter": "reducescatter",
    "allgather": "allgather",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "alltoall": "alltoall",
}
_SENDS = ("s", "rcs", "rrs", "rrcs")


@dataclasses.dataclass(frozen=True)
class MscclProgram:
    """An exported MSCCL-IR program and its counts (``summary()`` for ``--json``).

    Attributes:
        xml: the file's text.
        nmessages: the schedule's messages (one per step, sender and receiver).
        nsends: MSCCL steps that send (``s``, ``rcs``, ``rrs``, ``rrcs``), all ranks and channels.
        nfused: receives fused with the send that forwards them.
        nnops: ``nop`` steps carrying extra dependencies.
        nthreadblocks: the most thread blocks of any rank.
        max_tb_steps: the most steps of any thread block (the executor allows 64).
    """

    xml: str
    name: str
    collective: str
    nranks: int
    proto: str
    nchannels: int
    nchunksperloop: int
    nmessages: int
    nsends: int
    nfused: int
    nnops: int
    nthreadblocks: int
    max_tb_steps: int

    def summary(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "xml"}


@dataclasses.dataclass
class _Tb:
    send: int
    recv: int
    chan: int
    ops: list[tuple[Instr, list[tuple[int, int]]]] = dataclasses.field(default_factory=list)

    def describe(self) -> str:
        return f"send {self.send}, recv {self.recv}, channel {self.chan}"


def format_msccl(schedule: Schedule, **options: Any) -> str:
    """The MSCCL-IR XML of ``schedule`` (options as :func:`msccl_program`).

    See Also:
        :func:`commsim.interop.parse_msccl` (the XML back to a schedule), :func:`write_msccl`.
    """
    return msccl_program(schedule, **options).xml


def write_msccl(schedule: Schedule, path: str | os.PathLike[str], **options: Any) -> Path:
    """Write :func:`format_msccl`'s XML to ``path`` (nothing is written if the export fails)."""
    path = Path(path)
    path.write_text(format_msccl(schedule, **options))
    return path


def _check_no_helpers(schedule: Schedule) -> None:
    """MSCCL-IR has no ranks that hold no data (IR rule 7): refuse them in one line."""
    if schedule.helpers:
        raise ParameterError(
            f"{schedule.algorithm} p={schedule.nranks}: MSCCL-IR has no ranks that hold no data "
            f"(this schedule has {schedule.helpers} helper ranks); export it as JSON or GOAL"
        )


def msccl_program(
    schedule: Schedule,
    *,
    proto: str = "Simple",
    nchannels: int = 1,
    fuse: bool = True,
    inplace: bool = False,
    min_bytes: int = 0,
    max_bytes: int = 0,
    name: str | None = None,
) -> MscclProgram:
    """``schedule`` as an MSCCL-IR program: its XML and counts (see the module docstring).

    Args:
        proto: MSCCL's protocol, ``"Simple"``, ``"LL"`` or ``"LL128"``.
        nchannels: copies of the program on that many channels (1 to 32).
        fuse: fuse receive-then-forward into ``rcs``/``rrs``/``rrcs``.
        inplace: serve NCCL's in-place calls instead of out-of-place ones.
        min_bytes, max_bytes: the message sizes it serves (``max_bytes = 0``: no upper limit).
        name: the algorithm's name in the file (default ``commsim-<algorithm>``).

    Raises:
        ParameterError: a bad option. ResourceError: past one of the executor's limits.
    """
    _check_options(proto, nchannels, min_bytes, max_bytes)
    _check_no_helpers(schedule)
    s = schedule.materialize()
    lay = Layout(s, inplace)
    ranks = lower(s, lay, fuse)
    k = nchannels
    total = s.nchannels * k  # the schedule's channels, each in k copies
    if total > MAX_CHANNELS:
        raise ResourceError(
            f"{s.algorithm} p={s.nranks}: {s.nchannels} channel(s) in {k} copies need {total} "
            f"MSCCL channels; MSCCL's executor has at most {MAX_CHANNELS} "
            f"({total - MAX_CHANNELS} too many)"
        )
    gpus = [_threadblocks(instrs, k) for instrs in ranks]
    label = f"{s.algorithm} p={s.nranks}"
    for r, tbs in enumerate(gpus):
        _check_limits(tbs, r, s.nranks, label)
    name = name if name is not None else f"commsim-{s.algorithm}"
    head = {
        "name": name,
        "proto": proto,
        "nchannels": total,
        "nchunksperloop": lay.nchunks * k,
        "ngpus": s.nranks,
        "coll": COLL[s.collective],
        "inplace": int(inplace),
        "outofplace": int(not inplace),
        "minBytes": min_bytes,
        "maxBytes": max_bytes,
    }
    lines = [f"<algo {_attrs(head)}>"]
    for r, tbs in enumerate(gpus):
        sizes = _chunk_counts(tbs, lay, k, r, label)
        gpu = {"id": r, "i_chunks": sizes[INPUT], "o_chunks": sizes[OUTPUT],
               "s_chunks": sizes[SCRATCH]}  # fmt: skip
        lines.append(f"  <gpu {_attrs(gpu)}>")
        lines += _tb_lines(tbs)
        lines.append("  </gpu>")
    lines.append("</algo>")
    return MscclProgram(
        xml="\n".join(lines) + "\n",
        name=name,
        collective=s.collective,
        nranks=s.nranks,
        proto=proto,
        nchannels=total,
        nchunksperloop=lay.nchunks * k,
        nmessages=sum(len(messages(st, s).src) for st in s.steps()),
        nsends=sum(op.kind in _SENDS for tbs in gpus for tb in tbs for op, _ in tb.ops),
        nfused=sum(op.kind in _SENDS[1:] for tbs in gpus for tb in tbs for op, _ in tb.ops),
        nnops=sum(max(len(d) - 1, 0) for tbs in gpus for tb in tbs for _, d in tb.ops),
        nthreadblocks=max(len(tbs) for tbs in gpus),
        max_tb_steps=max((_nsteps(tb) for tbs in gpus for tb in tbs), default=0),
    )


def _chunk_counts(tbs: list, lay: Layout, k: int, r: int, label: str) -> dict[str, int]:
    """Rank ``r``'s chunks per buffer (input and output from the layout, scratch as far as its
    thread blocks ``tbs`` reach); an error past MSCCL's int16 chunk offsets."""
    sizes = {b: lay.nbuf[b] * k for b in (INPUT, OUTPUT)}
    used = [op.src for tb in tbs for op, _ in tb.ops if op.src is not None]
    used += [op.dst for tb in tbs for op, _ in tb.ops if op.dst is not None]
    sizes[SCRATCH] = max((o + n for b, o, n in used if b == SCRATCH), default=0)
    for b, o, n in used:
        if o + n > MAX_OFFSET + 1:
            raise ResourceError(
                f"{label}: rank {r} uses chunk {o + n - 1} of buffer {b!r}; MSCCL's chunk "
                f"offsets are int16 (at most {MAX_OFFSET}): use fewer slots or channels"
            )
    return sizes


def _check_options(proto: str, nchannels: int, min_bytes: int, max_bytes: int) -> None:
    if proto not in PROTOCOLS:
        raise ParameterError(f"MSCCL protocol must be one of {', '.join(PROTOCOLS)}, got {proto!r}")
    if isinstance(nchannels, bool) or not isinstance(nchannels, int) or nchannels < 1:
        raise ParameterError(f"nchannels must be a positive integer, got {nchannels!r}")
    if nchannels > MAX_CHANNELS:
        raise ParameterError(
            f"MSCCL's executor has at most {MAX_CHANNELS} channels, asked for {nchannels} "
            f"({nchannels - MAX_CHANNELS} too many)"
        )
    for what, v in (("min_bytes", min_bytes), ("max_bytes", max_bytes)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ParameterError(f"{what} must be a non-negative integer, got {v!r}")
    if max_bytes and max_bytes < min_bytes:
        raise ParameterError(f"max_bytes ({max_bytes}) is below min_bytes ({min_bytes})")


def _attrs(d: dict[str, Any]) -> str:
    from xml.sax.saxutils import quoteattr  # imports urllib and http: 50 ms, only to write XML

    return " ".join(f"{k}={quoteattr(str(v))}" for k, v in d.items())


def _nsteps(tb: _Tb) -> int:
    return sum(max(len(d), 1) for _, d in tb.ops)


def _channel_copies(instrs: list[Instr], k: int) -> list[list[Instr]]:
    """Channel ``c``'s instructions: sub-chunk ``c`` of each chunk, one chunk per step."""
    if k == 1:
        return [instrs]
    out: list[list[Instr]] = [[] for _ in range(k)]
    for ins in instrs:
        n = (ins.src or ins.dst or ("", 0, 1))[2]
        for c in range(k):
            for j in range(n):
                out[c].append(dataclasses.replace(
                    ins,
                    src=None if ins.src is None else (ins.src[0], (ins.src[1] + j) * k + c, 1),
                    dst=None if ins.dst is None else (ins.dst[0], (ins.dst[1] + j) * k + c, 1),
                ))  # fmt: skip
    return out


def _pairs(instrs: Sequence[Instr]) -> list[tuple[int, int, int]]:
    """The ``(channel, send, recv)`` of each thread block (module docstring), sorted."""
    keys: set[tuple[int, int, int]] = set()
    for c in sorted({i.chan for i in instrs}):
        mine = [i for i in instrs if i.chan == c]
        fused = {(i.send, i.recv) for i in mine if i.send >= 0 and i.recv >= 0}
        sends = {i.send for i in mine if i.send >= 0} - {s for s, _ in fused}
        recvs = {i.recv for i in mine if i.recv >= 0} - {g for _, g in fused}
        pairs = fused | {(q, q) for q in sends & recvs}
        pairs |= {(s, -1) for s in sends - recvs} | {(-1, g) for g in recvs - sends}
        if any(i.send < 0 and i.recv < 0 for i in mine):
            pairs.add((-1, -1))
        keys |= {(c, s, g) for s, g in pairs}
    return sorted(keys)


def _threadblocks(instrs: list[Instr], k: int) -> list[_Tb]:
    """Thread blocks of one rank with their steps and dependencies ``(tb id, op index)``.

    The schedule's channel ``c`` and copy ``j`` of ``k`` run on MSCCL channel ``c·k + j``.
    """
    keys = _pairs(instrs)
    by_send = {(c, s): n for n, (c, s, _) in enumerate(keys) if s >= 0}
    by_recv = {(c, g): n for n, (c, _, g) in enumerate(keys) if g >= 0}
    local = {c: n for n, (c, s, g) in enumerate(keys) if s < 0 and g < 0}

    def key(i: Instr) -> int:
        if i.send >= 0:
            return by_send[(i.chan, i.send)]
        return by_recv[(i.chan, i.recv)] if i.recv >= 0 else local[i.chan]

    tbs = [_Tb(s, g, c * k + j) for c, s, g in keys for j in range(k)]  # id = key index·k + j
    for j, copy in enumerate(_channel_copies(instrs, k)):
        _place(copy, [key(i) * k + j for i in copy], tbs)
    return tbs


def _place(instrs: list[Instr], where: list[int], tbs: list[_Tb]) -> None:
    """Append ``instrs`` (one rank, one channel, in order) to thread blocks ``where`` with the
    waits they need (module docstring), each kept only if not implied by an earlier one."""
    last_writer: dict[tuple[str, int], tuple[int, int]] = {}
    readers: dict[tuple[str, int], dict[int, int]] = {}
    known: dict[tuple[int, int], dict[int, int]] = {}
    order: dict[tuple[int, int], int] = {}
    for n, (ins, t) in enumerate(zip(instrs, where, strict=True)):
        pos = len(tbs[t].ops)
        need: dict[int, int] = {}
        reads, writes = list(ins.reads()), list(ins.writes())
        for loc in reads + writes:
            if loc in last_writer:
                u, x = last_writer[loc]
                need[u] = max(need.get(u, -1), x)
        for loc in writes:
            for u, x in readers.get(loc, {}).items():
                need[u] = max(need.get(u, -1), x)
        need.pop(t, None)
        clock = dict(known[(t, pos - 1)]) if pos else {}
        deps = []
        for u, x in sorted(need.items(), key=lambda ux: -order[ux]):
            if clock.get(u, -1) >= x:
                continue
            deps.append((u, x))
            for v, y in known[(u, x)].items():
                clock[v] = max(clock.get(v, -1), y)
        clock[t] = pos
        known[(t, pos)], order[(t, pos)] = clock, n
        tbs[t].ops.append((ins, deps))
        for loc in reads:
            readers.setdefault(loc, {})[t] = pos
        for loc in writes:
            last_writer[loc] = (t, pos)
            readers[loc] = {}


def _tb_lines(tbs: list[_Tb]) -> list[str]:
    """The ``<tb>`` elements: ops become steps, extra waits ``nop`` steps before them."""
    index = [[] for _ in tbs]  # op -> its step number ``s``
    for t, tb in enumerate(tbs):
        s = 0
        for _, deps in tb.ops:
            s += max(len(deps), 1)
            index[t].append(s - 1)
    waited = {(u, index[u][x]) for tb in tbs for _, deps in tb.ops for u, x in deps}
    lines = []
    for t, tb in enumerate(tbs):
        lines.append(f'    <tb id="{t}" send="{tb.send}" recv="{tb.recv}" chan="{tb.chan}">')
        s = 0
        for ins, deps in tb.ops:
            waits = [(u, index[u][x]) for u, x in deps] or [(-1, -1)]
            for u, x in waits[1:]:
                lines.append(_step(s, "nop", None, None, (u, x), False))
                s += 1
            lines.append(_step(s, ins.kind, ins.src, ins.dst, waits[0], (t, s) in waited))
            s += 1
        lines.append("    </tb>")
    return lines


def _step(s: int, kind: str, src: Any, dst: Any, dep: tuple[int, int], hasdep: bool) -> str:
    sb, so, n = src if src is not None else (INPUT, -1, 0)
    db, do, m = dst if dst is not None else (OUTPUT, -1, 0)
    return (
        f'      <step s="{s}" type="{kind}" srcbuf="{sb}" srcoff="{so}" dstbuf="{db}" '
        f'dstoff="{do}" cnt="{max(n, m)}" depid="{dep[0]}" deps="{dep[1]}" '
        f'hasdep="{int(hasdep)}"/>'
    )


def _check_limits(tbs: list[_Tb], rank: int, nranks: int, label: str) -> None:
    """Raise ResourceError naming the first executor limit rank ``rank``'s program exceeds."""
    where = f"{label}: rank {rank}"
    for t, tb in enumerate(tbs):
        n = _nsteps(tb)
        if n > MAX_STEPS:
            raise ResourceError(
                f"{where}'s thread block {t} ({tb.describe()}) needs {n} steps; MSCCL's executor "
                f"runs at most {MAX_STEPS} per thread block ({n - MAX_STEPS} too many)"
            )
    for role, attr in (("sending", "send"), ("receiving", "recv")):
        per: dict[int, int] = {}
        for tb in tbs:
            if getattr(tb, attr) >= 0:
                per[tb.chan] = per.get(tb.chan, 0) + 1
        worst = max(per.values(), default=0)
        if worst > MAX_TB_PER_CHANNEL:
            raise ResourceError(
                f"{where} needs {worst} {role} thread blocks on one channel (one per peer); "
                f"MSCCL's executor allows {MAX_TB_PER_CHANNEL} ({worst - MAX_TB_PER_CHANNEL} "
                f"too many)"
            )
    if len(tbs) > MAX_TB:
        raise ResourceError(
            f"{where} needs {len(tbs)} thread blocks; MSCCL's executor allows {MAX_TB} "
            f"({len(tbs) - MAX_TB} too many)"
        )
    waited = max((u for tb in tbs for _, deps in tb.ops for u, _ in deps), default=-1)
    if waited > MAX_DEPID:
        raise ResourceError(
            f"{where} waits on thread block {waited}; MSCCL's executor can wait only on "
            f"thread blocks 0 to {MAX_DEPID} ({waited - MAX_DEPID} too many)"
        )
    nodes = 1 + nranks + len(tbs) + sum(_nsteps(tb) for tb in tbs)
    if nodes > MAX_NODES:
        raise ResourceError(
            f"{where}'s part of the XML has {nodes} elements; MSCCL's parser keeps at most "
            f"{MAX_NODES} per rank ({nodes - MAX_NODES} too many)"
        )
