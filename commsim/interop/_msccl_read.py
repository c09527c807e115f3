r"""Import an MSCCL-IR program as a commsim :class:`~commsim.Schedule`.

An MSCCL-IR file (format and checks: :mod:`._msccl_parse`; buffers onto slots:
:mod:`._msccl_layout`) describes thread blocks that run their steps in order and meet through
messages and explicit dependencies. A schedule needs a global step for every transfer. This module
gives every *phase* of every XML step the **earliest** global step that keeps what the program
computes, as a longest path over the constraints ``t(v) >= t(u) + w``:

* **Phases.** A step becomes at most three phases: a local *pre-copy* (``rrs`` copies its local
  operand into a fresh temporary, ``rrc``/``rrcs`` copy ``src`` to ``dst`` when they differ, so the
  received chunk can be reduced into it), the *receive* (one transfer from the peer, reducing for
  ``rrs``/``rrc``/``rrcs``), and the *forward* (``rcs``/``rrs``/``rrcs`` send the stored or reduced
  chunk on); ``cpy`` and ``re`` are one local transfer, ``nop`` none. A phase that reads what an
  earlier phase wrote goes at least one step later (commsim reads a step's state before its writes).
* **Messages.** The k-th send on a connection (sender, receiver, channel) is the k-th receive of
  the receiver's thread block with that ``recv`` and ``chan``: the pair is one transfer, one node.
* **Program order.** A step starts no earlier than its predecessor's start, and a step after one
  that wrote a slot one step later. Sends are buffered, as in MSCCL: the next step need not wait
  for the receiver, but a later write to a slot a pending send reads waits for that send (in the
  same step is fine: reads first). An ``rrs`` pre-copy writes a fresh temporary, so it may run
  alongside the previous step (after the last write of its operand): the ring's reduce-and-forward
  then costs one step per hop.
* **Dependencies.** ``depid``/``deps`` makes a step start after that step (and every send its
  thread block issued up to it) is done; a send is done in the step its message moves (sends
  are buffered), so two ranks that each wait on their own send to the other meet in one step.

* **Posted sends.** In MSCCL a send's data leaves when the send is *posted*: the executor copies
  it into the connection's buffer and the step is done; a commsim transfer reads its slot in the
  step its message moves. The two agree unless the chunk is overwritten in between, which the
  rules above forbid (a later write waits for the pending send, a dependency on the sending step
  for its message). A program that needs it (Bruck's alltoall reuses a scratch chunk another
  thread block has posted) then has a cycle of waits: the message waits, through the receiver,
  for the overwrite, which waits for the message. The importer then **snapshots** each send on
  such a cycle whose step's completion, or a later write of its chunk, the cycle waits for: a
  local copy of the chunk into a fresh slot (:meth:`.Layout.with_snapshots`) at the post, which
  the step's completion and later writes wait for instead, and the transfer reads the copy a step
  later. It solves again until no such send is left (each round snapshots every send on every
  cycle found); only a cycle that remains is a deadlock. So a program that imports without
  snapshots keeps exactly its transfers; a snapshot is a local copy (free in the Hockney model)
  and one more slot per send that needs it.

* **Channels.** The thread blocks run concurrently on the GPU; each transfer goes on its thread
  block's IR channel (rule 6), the thread blocks grouped as finely as the verifier's
  channel-independence rule allows (:mod:`._msccl_channels`), so models with several links time
  them concurrently.

A cycle of waits is a **deadlock** (:mod:`._msccl_solve` finds the earliest steps or names the
XML steps on such a cycle), and so is a receive that no send matches. Empty global steps are
dropped. The schedule keeps, for every transfer, the XML step that wrote (and the one that sent)
it; :func:`commsim.verify` names them when the program does not compute its collective
(``step_fn.origin``, see :class:`commsim.Schedule` and :mod:`._msccl_origin`).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from commsim._collectives import spec
from commsim._ir import Schedule, Step
from commsim.errors import ParameterError, ResourceError, ScheduleError
from commsim.interop._msccl_channels import assign_channels
from commsim.interop._msccl_layout import Layout
from commsim.interop._msccl_origin import Steps
from commsim.interop._msccl_parse import MAX_BYTES, STEP_TYPES, Algo, Op, Tb, parse, too_large
from commsim.interop._msccl_solve import Deadlock, earliest_steps

__all__ = ["parse_msccl", "read_msccl"]

#: Chunk accesses (the sum of ``cnt`` over all steps) an import may track.
_MAX_ACCESSES = 2**24


def parse_msccl(text: str | bytes) -> Schedule:
    """Import MSCCL-IR XML text as a :class:`commsim.Schedule` (:func:`read_msccl` reads a file).

    See Also:
        :func:`commsim.interop.format_msccl`, the other way; a schedule written and parsed back
        computes the same, its steps perhaps regrouped (``docs/interop.md``).
    """
    if isinstance(text, str):
        if len(text) > MAX_BYTES:  # refused before encoding it (a character is >= 1 byte)
            raise ResourceError(too_large("<text>", len(text)))
        text = text.encode()
    if not isinstance(text, bytes):
        raise ParameterError(f"parse_msccl expects XML text, got {type(text).__name__}")
    return read_msccl(text)


def read_msccl(source: str | os.PathLike[str] | bytes) -> Schedule:
    """Import an MSCCL-IR XML file as a :class:`commsim.Schedule` (XML text, anything starting
    with ``<``, is read as :func:`parse_msccl` reads it).

    Raises:
        ScheduleError: a malformed file, or a program that deadlocks; the message names the
            element and attribute, or the XML's gpu, thread block and step.
        ResourceError: a file past the size limit (refused before parsing).

    Examples:
        >>> import commsim
        >>> from commsim.interop import read_msccl
        >>> def gpu(g):  # two gpus swap their chunk and add: an allreduce in one step
        ...     step = (
        ...         '<step s="{}" type="{}" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" '
        ...         'cnt="1" depid="-1" deps="-1"/>'
        ...     )
        ...     return (
        ...         f'<gpu id="{g}" i_chunks="1" o_chunks="0" s_chunks="0">'
        ...         f'<tb id="0" send="{1 - g}" recv="{1 - g}" chan="0">'
        ...         + step.format(0, "s")
        ...         + step.format(1, "rrc")
        ...         + "</tb></gpu>"
        ...     )
        >>> xml = (
        ...     '<algo name="swap" proto="Simple" nchunksperloop="1" ngpus="2" '
        ...     'coll="allreduce" inplace="1">' + gpu(0) + gpu(1) + "</algo>"
        ... )
        >>> s = read_msccl(xml)
        >>> s.nsteps, commsim.verify(s).ntransfers
        (1, 2)
    """
    algo = parse(source)
    layout = Layout.of(algo)
    if sum(op.cnt for op in _ops(algo)) > _MAX_ACCESSES:
        raise ResourceError(f"{algo.source}: more than {_MAX_ACCESSES:,} chunk accesses to import")
    while True:
        plan = _Plan(algo, layout)
        try:
            steps = plan.steps()
            break
        except Deadlock as e:  # snapshot the sends on the cycle, or report it
            posted = plan.unsnapshotted(e.nodes)
            if not posted:
                raise
            layout = layout.with_snapshots(posted, algo.source)
    return Schedule(
        collective=algo.collective,
        nranks=len(algo.gpus),
        slot_units=layout.nslots,
        nsteps=len(steps.steps),
        step_fn=steps,
        ndata=layout.ndata,
        nchannels=steps.nchannels,
        root=_root(algo),
        algorithm=algo.name,
        params={"format": "msccl-ir", "proto": algo.proto, "nchannels": algo.nchannels,
                "nchunksperloop": algo.nchunks, "inplace": algo.inplace},
        ntransfers_hint=sum(s.ntransfers for s in steps.steps),
        max_step_transfers_hint=max((s.ntransfers for s in steps.steps), default=0),
    )  # fmt: skip


def _ops(algo: Algo) -> Iterator[Op]:
    for gpu in algo.gpus:
        for tb in gpu.tbs:
            yield from tb.ops


def _root(algo: Algo) -> int:
    """A rooted collective's root, which the file does not state: the one gpu that never
    receives (a broadcast's) or never sends (a reduce's); 0 if that is not one gpu."""
    sp = spec(algo.collective)
    if not sp.rooted:
        return 0
    silent = 3 if sp.reduces else 2  # STEP_TYPES column: sends, receives
    quiet = [
        g.id
        for g in algo.gpus
        if not any(STEP_TYPES[op.type][silent] for tb in g.tbs for op in tb.ops)
    ]
    return quiet[0] if len(quiet) == 1 else 0


class _Transfer(NamedTuple):
    """One commsim transfer, placed at the step of ``node``; ``op`` wrote it, ``sender`` sent it."""

    node: int
    src: int
    dst: int
    src_slot: int
    dst_slot: int
    count: int
    reduce: bool
    op: Op
    sender: Op | None = None


class _Hazards:
    """One thread block's slots: the last node that wrote each, and the sends still to read it."""

    def __init__(self, weak: list[tuple[int, int]]) -> None:
        self.weak = weak
        self.last_write: dict[int, int] = {}
        self.pending: dict[int, list[int]] = collections.defaultdict(list)

    def send_reads(self, node: int, first: int, cnt: int) -> None:
        for k in range(first, first + cnt):
            self.pending[k].append(node)

    def write(self, node: int, first: int, cnt: int) -> None:
        """A write waits for the pending sends of the same slots (same step allowed)."""
        for k in range(first, first + cnt):
            self.weak.extend((r, node) for r in self.pending.pop(k, ()))
            self.last_write[k] = node

    def writers(self, first: int, cnt: int) -> set[int]:
        return {self.last_write[k] for k in range(first, first + cnt) if k in self.last_write}


class _Plan:
    """The constraints of one program (see the module docstring) and the transfers they place.

    Nodes are phases; every XML step also has a *start* node and a *done* node (what a
    dependency on it waits for: its own phases and every send its thread block issued so far).
    """

    def __init__(self, algo: Algo, layout: Layout) -> None:
        self.algo, self.layout = algo, layout
        self.label: list[Op] = []  # node -> its XML step
        self.edges: list[tuple[int, int, int]] = []  # (u, v, w): t(v) >= t(u) + w
        self.weak: list[tuple[int, int]] = []  # (u, v): t(v) >= t(u), may close an exchange
        self.transfers: list[_Transfer] = []
        self.sends: dict[tuple[int, int, int], list] = collections.defaultdict(list)
        self.recvs: dict[tuple[int, int, int], list] = collections.defaultdict(list)
        self.posts: dict[int, Op] = {}  # a message's node -> the XML step that sent it
        self.start = {op: self._node(op) for op in _ops(algo)}
        self.done = {op: self._node(op) for op in _ops(algo)}
        for gpu in algo.gpus:
            _unique_connections(gpu, algo.source)
            for tb in gpu.tbs:
                self._thread_block(tb)
        self._match()

    def _node(self, op: Op) -> int:
        self.label.append(op)
        return len(self.label) - 1

    def _dep(self, op: Op) -> int | None:
        if op.depid < 0:
            return None
        return self.done[self.algo.gpus[op.gpu].tbs[op.depid].ops[op.deps]]

    def _thread_block(self, tb: Tb) -> None:
        hazards = _Hazards(self.weak)
        after: tuple[int, int] | None = None  # (node, weight) the next step starts after
        prev: Op | None = None
        for op in tb.ops:
            S, D = self.start[op], self.done[op]
            if after is not None:
                self.edges.append((after[0], S, after[1]))
            if (dep := self._dep(op)) is not None:
                self.edges.append((dep, S, 0))
            if op.type in ("cpy", "re"):
                after = self._local(op, hazards)
            elif STEP_TYPES[op.type][2]:
                after = self._receive(op, tb, hazards, prev)
            else:  # s, nop
                after = (S, 0)
                if op.type == "s":
                    self._send(op, tb, self.layout.slot(op.gpu, op.srcbuf, op.srcoff), S, hazards)
            self.edges.append((after[0], D, after[1]))
            if prev is not None:
                self.edges.append((self.done[prev], D, 0))
            prev = op

    def _local(self, op: Op, hazards: _Hazards) -> tuple[int, int]:
        L, g = self.layout, op.gpu
        node = self._node(op)
        src, dst = L.slot(g, op.srcbuf, op.srcoff), L.slot(g, op.dstbuf, op.dstoff)
        self.edges.append((self.start[op], node, 0))
        self.transfers.append(_Transfer(node, g, g, src, dst, op.cnt, op.type == "re", op))
        hazards.write(node, dst, op.cnt)
        return node, 1

    def _receive(self, op: Op, tb: Tb, hazards: _Hazards, prev: Op | None) -> tuple[int, int]:
        """r, rcs (store), rrs, rrc, rrcs (reduce into a copy of the local operand)."""
        L, g, S = self.layout, op.gpu, self.start[op]
        reduce = op.type in ("rrs", "rrc", "rrcs")
        target = L.temp[op] if op.type == "rrs" else L.slot(g, op.dstbuf, op.dstoff)
        recv = self._node(op)
        self.edges.append((S, recv, 0))
        src = L.slot(g, op.srcbuf, op.srcoff) if reduce else target
        if src != target:  # the local operand first goes where the received chunk reduces into
            pre = self._node(op)
            self.transfers.append(_Transfer(pre, g, g, src, target, op.cnt, False, op))
            self.edges.append((pre, recv, 1))
            if op.type == "rrs":  # a fresh temporary: it only waits for its operand
                self.edges.extend((w, pre, 1) for w in hazards.writers(src, op.cnt))
                if prev is not None:
                    self.edges.append((self.start[prev], pre, 0))
                if (dep := self._dep(op)) is not None:
                    self.edges.append((dep, pre, 0))
            else:
                self.edges.append((S, pre, 0))
                hazards.write(pre, target, op.cnt)
        self.recvs[(tb.recv, g, tb.chan)].append((op, recv, target, reduce))
        hazards.write(recv, target, op.cnt)
        if STEP_TYPES[op.type][3]:  # forward what was stored or reduced
            self._send(op, tb, target, recv, hazards, weight=1)
        return recv, 1

    def _send(
        self, op: Op, tb: Tb, slot: int, after: int, hazards: _Hazards, weight: int = 0
    ) -> None:
        """A buffered send of ``slot``: the transfer waits for ``after``; ``done`` for it.

        A snapshotted send instead copies ``slot`` into its snapshot when posted (after
        ``after``); the transfer reads the snapshot a step later and ``done`` waits for the copy.
        """
        g, node = op.gpu, self._node(op)
        posted = node
        if op in self.layout.snapshot:
            posted, snap = self._node(op), self.layout.snapshot[op]
            self.transfers.append(_Transfer(posted, g, g, slot, snap, op.cnt, False, op))
            self.edges.append((after, posted, weight))
            self.edges.append((posted, node, 1))
            self.sends[(g, tb.send, tb.chan)].append((op, node, snap))
        else:
            self.edges.append((after, node, weight))
            self.sends[(g, tb.send, tb.chan)].append((op, node, slot))
        self.edges.append((posted, self.done[op], 0))
        hazards.send_reads(posted, slot, op.cnt)

    def _match(self) -> None:
        """Pair the k-th send and receive of every connection; merge their nodes."""
        alias = {}
        for key in sorted(set(self.sends) | set(self.recvs)):
            a, b, chan = key
            sends, recvs = self.sends.get(key, []), self.recvs.get(key, [])
            for (sop, snode, sslot), (rop, rnode, rslot, red) in zip(sends, recvs):
                if sop.cnt != rop.cnt:
                    raise ScheduleError(
                        f"{self.algo.source}: {sop.where} sends {sop.cnt} chunk(s) but the "
                        f"matching receive, {rop.where}, takes {rop.cnt}"
                    )
                alias[snode] = rnode
                self.posts[rnode] = sop
                self.transfers.append(_Transfer(rnode, a, b, sslot, rslot, rop.cnt, red, rop, sop))
            if len(sends) > len(recvs):
                op = sends[len(recvs)][0]
                raise ScheduleError(
                    f"{self.algo.source}: {op.where} sends to gpu {b} on channel {chan}, but gpu "
                    f"{b} receives only {len(recvs)} message(s) from gpu {a} there"
                )
            if len(recvs) > len(sends):
                op = recvs[len(sends)][0]
                raise ScheduleError(
                    f"{self.algo.source}: {op.where} waits forever (a deadlock): it receives "
                    f"from gpu {a} on channel {chan}, which sends only {len(sends)} message(s) "
                    f"to gpu {b} there"
                )
        self.edges = [(alias.get(u, u), alias.get(v, v), w) for u, v, w in self.edges]
        self.weak = [(alias.get(u, u), alias.get(v, v)) for u, v in self.weak]

    def unsnapshotted(self, nodes: frozenset[int]) -> list[Op]:
        """The send steps not yet snapshotted whose message waits, inside ``nodes`` (cycles of
        waits), for what waits for it: their step's completion (a dependency on it) or a later
        write of their chunk in their thread block. A snapshot frees both at the post."""
        released = collections.defaultdict(list)
        for u, v in self.weak:
            released[u].append(v)
        return [
            op
            for node, op in self.posts.items()
            if node in nodes
            and op not in self.layout.snapshot
            and any(v in nodes for v in (self.done[op], *released[node]))
        ]

    def steps(self) -> Steps:
        """The transfers grouped by their earliest step (empty steps dropped), then the final
        copy the buffer mapping needs, each on its thread block's channel
        (:mod:`._msccl_channels`)."""
        t = earliest_steps(self.label, self.edges, self.weak, self.algo.source)
        by_step: dict[int, list[_Transfer]] = collections.defaultdict(list)
        for tr in self.transfers:
            by_step[t[tr.node]].append(tr)
        steps, writers = [], []
        for i in sorted(by_step):
            trs = by_step[i]
            cols = (np.array([getattr(tr, f) for tr in trs]) for f in Step.ARRAYS)
            steps.append(Step.make(*cols))
            writers.append([(tr.op, tr.sender) for tr in trs])
        final = self._final_copy()
        if final is not None:
            steps.append(final)
            writers.append([(None, None)] * final.ntransfers)
        steps, writers, nchannels = assign_channels(self.algo, steps, writers, self.layout.nslots)
        return Steps(steps, writers, self.layout, self.algo.source, nchannels)

    def _final_copy(self) -> Step | None:
        L = self.layout
        if not L.final_copy:
            return None
        rows = []
        for g, mask in enumerate(L.written_o(self.algo)):
            if L.final_copy == "all":
                mask[:] = True
            edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
            for a, b in zip(edges[::2], edges[1::2]):
                rows.append((g, g, L.slot(g, "o", int(a)), L.out_region[g] + int(a), int(b - a)))
        return Step.make(*np.array(rows).T) if rows else None


def _unique_connections(gpu, source: str) -> None:
    """A connection (peer, channel) has one sending and one receiving thread block per gpu."""
    for side in ("send", "recv"):
        owner: dict[tuple[int, int], int] = {}
        for tb in gpu.tbs:
            peer = getattr(tb, side)
            if peer < 0:
                continue
            key = (peer, tb.chan)
            if key in owner:
                verb = "send to" if side == "send" else "receive from"
                raise ScheduleError(
                    f"{source}: gpu {gpu.id} tb {owner[key]} and tb {tb.id} both {verb} gpu "
                    f"{peer} on channel {tb.chan} (<tb> {side}): one thread block per connection"
                )
            owner[key] = tb.id
