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
  thread block issued up to it) is done.

A cycle among these constraints is a **deadlock** (found as an ordering edge inside a strongly
connected component; the error names the XML steps on it), and a receive that no send matches
waits forever. The one legitimate cycle is an exchange: two sends that each read a slot the
other side's receive overwrites in the same step (reads first), joined by "not earlier than"
edges only. Empty global steps are dropped. The schedule keeps, for every transfer, the XML step that
wrote (and the one that sent) it; :func:`commsim.verify` names them when the program does not
compute its collective (``step_fn.origin``, see :class:`commsim.Schedule`).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator

import numpy as np

from commsim._ir import Schedule, Step
from commsim.errors import ResourceError, ScheduleError
from commsim.interop._msccl_layout import Layout
from commsim.interop._msccl_origin import Steps
from commsim.interop._msccl_parse import STEP_TYPES, Algo, Op, parse

__all__ = ["read_msccl"]

#: Chunk accesses (the sum of ``cnt`` over all steps) an import may track.
_MAX_ACCESSES = 2**24


def read_msccl(source: str | os.PathLike[str] | bytes) -> Schedule:
    """Import an MSCCL-IR XML program (a path, or the XML text) as a :class:`commsim.Schedule`.

    Raises:
        ScheduleError: a malformed file, or a program that deadlocks; the message names the
            element and attribute, or the XML's gpu, thread block and step.
        ResourceError: a file past the size limit (refused before parsing).

    Examples:
        >>> import commsim
        >>> from commsim.interop import read_msccl
        >>> xml = '''<algo name="swap" proto="Simple" nchunksperloop="1" ngpus="2"
        ...   coll="allreduce" inplace="1">
        ...  <gpu id="0" i_chunks="1" o_chunks="0" s_chunks="1"><tb id="0" send="1" recv="1" chan="0">
        ...   <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1"/>
        ...   <step s="1" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1"/>
        ...  </tb></gpu>
        ...  <gpu id="1" i_chunks="1" o_chunks="0" s_chunks="1"><tb id="0" send="0" recv="0" chan="0">
        ...   <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1"/>
        ...   <step s="1" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1"/>
        ...  </tb></gpu></algo>'''
        >>> s = read_msccl(xml)
        >>> s.nsteps, commsim.verify(s).ntransfers
        (1, 2)
    """
    algo = parse(source)
    layout = Layout.of(algo)
    if sum(op.cnt for op in _ops(algo)) > _MAX_ACCESSES:
        raise ResourceError(f"{algo.source}: more than {_MAX_ACCESSES:,} chunk accesses to import")
    plan = _Plan(algo, layout)
    steps = plan.steps()
    return Schedule(
        collective=algo.collective,
        nranks=len(algo.gpus),
        slot_units=layout.nslots,
        nsteps=len(steps.steps),
        step_fn=steps,
        ndata=layout.ndata,
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


class _Plan:
    """The constraint graph of one program and its solution (see the module docstring)."""

    def __init__(self, algo: Algo, layout: Layout) -> None:
        self.algo, self.layout = algo, layout
        self.label: list[Op] = []  # node -> the XML step it belongs to
        self.edges: list[tuple[int, int, int]] = []  # (u, v, w): t(v) >= t(u) + w, v after u
        self.weak: list[tuple[int, int]] = []  # t(v) >= t(u) only: a write after a pending send
        # transfers: (node, src, dst, src_slot, dst_slot, count, reduce, op, sender)
        self.transfers: list[tuple] = []
        self.sends: dict[tuple[int, int, int], list] = collections.defaultdict(list)
        self.recvs: dict[tuple[int, int, int], list] = collections.defaultdict(list)
        self.start = {op: self._node(op) for op in _ops(algo)}
        self.done = {op: self._node(op) for op in _ops(algo)}  # what a dependency waits for
        for gpu in algo.gpus:
            _unique_connections(gpu, algo.source)
            for tb in gpu.tbs:
                self._thread_block(tb)
        for op in _ops(algo):
            if op.depid >= 0:
                dep = algo.gpus[op.gpu].tbs[op.depid].ops[op.deps]
                self.edges.append((self.done[dep], self.start[op], 0))
        self._match()

    def _node(self, op: Op) -> int:
        self.label.append(op)
        return len(self.label) - 1

    def _thread_block(self, tb) -> None:
        L = self.layout
        prev: tuple[int, int] | None = None  # (node, weight) the next step starts after
        prev_start = prev_done = None
        last_write: dict[int, int] = {}  # slot -> node of the tb's last write
        pending: dict[int, list[int]] = collections.defaultdict(list)  # slot -> send nodes

        def write(node: int, first: int, cnt: int) -> None:
            for k in range(first, first + cnt):
                self.weak.extend((r, node) for r in pending.pop(k, ()))
                last_write[k] = node

        for op in tb.ops:
            g, S, D = op.gpu, self.start[op], self.done[op]
            if prev is not None:
                self.edges.append((prev[0], S, prev[1]))
            src = L.slot(g, op.srcbuf, op.srcoff) if STEP_TYPES[op.type][0] else -1
            dst = L.slot(g, op.dstbuf, op.dstoff) if STEP_TYPES[op.type][1] else -1
            own: tuple[int, int] = (S, 0)
            if op.type in ("cpy", "re"):
                node = self._node(op)
                self.edges.append((S, node, 0))
                self.transfers.append((node, g, g, src, dst, op.cnt, op.type == "re", op, None))
                write(node, dst, op.cnt)
                own = (node, 1)
            elif op.type != "s" and op.type != "nop":  # the receiving types
                target = L.temp[op] if op.type == "rrs" else dst
                reduce = op.type in ("rrs", "rrc", "rrcs")
                recv = self._node(op)
                self.edges.append((S, recv, 0))
                if reduce and src != target:
                    pre = self._node(op)
                    self.transfers.append((pre, g, g, src, target, op.cnt, False, op, None))
                    self.edges.append((pre, recv, 1))
                    if op.type == "rrs":  # a fresh temporary: only the operand's writes matter
                        for k in range(src, src + op.cnt):
                            if k in last_write:
                                self.edges.append((last_write[k], pre, 1))
                        if prev_start is not None:
                            self.edges.append((prev_start, pre, 0))
                        if op.depid >= 0:
                            dep = self.algo.gpus[g].tbs[op.depid].ops[op.deps]
                            self.edges.append((self.done[dep], pre, 0))
                    else:
                        self.edges.append((S, pre, 0))
                        write(pre, target, op.cnt)
                self.recvs[(tb.recv, g, tb.chan)].append((op, recv, target, reduce))
                write(recv, target, op.cnt)
                own = (recv, 1)
                if STEP_TYPES[op.type][3]:  # forward what was stored or reduced
                    fwd = self._send(op, tb, target)
                    self.edges.append((recv, fwd, 1))
                    _pending_add(pending, fwd, target, op.cnt)
                    self.edges.append((fwd, D, 0))
            elif op.type == "s":
                fwd = self._send(op, tb, src)
                self.edges.append((S, fwd, 0))
                _pending_add(pending, fwd, src, op.cnt)
                self.edges.append((fwd, D, 0))
            self.edges.append((own[0], D, own[1]))
            if prev_done is not None:
                self.edges.append((prev_done, D, 0))
            prev, prev_start, prev_done = own, S, D

    def _send(self, op: Op, tb, slot: int) -> int:
        node = self._node(op)
        self.sends[(op.gpu, tb.send, tb.chan)].append((op, node, slot))
        return node

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
                self.transfers.append((rnode, a, b, sslot, rslot, rop.cnt, red, rop, sop))
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

    def solve(self) -> list[int]:
        """Earliest step of every node: a longest path over the strongly connected components.

        A component may only hold nodes joined by weak edges (an exchange: both sides read a
        slot the other's step then overwrites, all in one step); an ordering edge inside one is
        a cycle of waits, a deadlock.
        """
        n = len(self.label)
        succ: list[list[int]] = [[] for _ in range(n)]
        for u, v, _ in self.edges:
            succ[u].append(v)
        for u, v in self.weak:
            succ[u].append(v)
        comp, ncomp = _components(succ)
        into: list[list[tuple[int, int]]] = [[] for _ in range(ncomp)]
        for u, v, w in self.edges:
            if comp[u] == comp[v]:
                self._deadlock(succ, comp, u, v)
            into[comp[v]].append((comp[u], w))
        for u, v in self.weak:
            if comp[u] != comp[v]:
                into[comp[v]].append((comp[u], 0))
        t = [0] * ncomp
        for c in range(ncomp - 1, -1, -1):  # every edge runs from a higher component to a lower
            for a, w in into[c]:
                t[c] = max(t[c], t[a] + w)
        return [t[c] for c in comp]

    def _deadlock(self, succ: list[list[int]], comp: list[int], u: int, v: int) -> None:
        """Name the XML steps on a cycle through the edge ``u -> v`` (``v`` waits for ``u``)."""
        parent = {v: v}
        frontier = [v]
        while u not in parent:  # breadth first from v back to u, inside their component
            reached = []
            for x in frontier:
                for y in succ[x]:
                    if comp[y] == comp[u] and y not in parent:
                        parent[y] = x
                        reached.append(y)
            frontier = reached
        path = [u]
        while path[-1] != v:
            path.append(parent[path[-1]])
        cycle = [u, *reversed(path[1:])] if len(path) > 1 else [u]
        names = list(dict.fromkeys(self.label[x].where for x in cycle))
        shown = " -> ".join(names[:6]) + (" -> ..." if len(names) > 6 else "")
        raise ScheduleError(
            f"{self.algo.source}: deadlock: {names[0]} waits for itself through a cycle of "
            f"{len(names)} step(s), each waiting for the one before: {shown} -> {names[0]}"
        )

    def steps(self) -> Steps:
        t = self.solve()
        by_step: dict[int, list] = collections.defaultdict(list)
        for tr in self.transfers:
            if tr[1] != tr[2] or tr[3] != tr[4] or tr[6]:  # skip copies onto themselves
                by_step[t[tr[0]]].append(tr)
        order = sorted(by_step)
        steps, writers = [], []
        for i in order:
            trs = by_step[i]
            steps.append(Step.make(*(np.array([tr[k] for tr in trs]) for k in range(1, 7))))
            writers.append([(tr[7], tr[8]) for tr in trs])
        final = self._final_copy()
        if final is not None:
            steps.append(final)
            writers.append([(None, None)] * final.ntransfers)
        return Steps(steps, writers, self.layout, self.algo.source)

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
        if not rows:
            return None
        return Step.make(*np.array(rows).T)


def _pending_add(pending: dict[int, list[int]], node: int, first: int, cnt: int) -> None:
    for k in range(first, first + cnt):
        pending[k].append(node)


def _components(succ: list[list[int]]) -> tuple[list[int], int]:
    """Tarjan's strongly connected components, iteratively: ``(component of each node, count)``.

    Components are numbered in the order Tarjan completes them, so an edge between two
    components always runs from the higher number to the lower. ``O(nodes + edges)``.
    """
    n = len(succ)
    index, low, comp = [-1] * n, [0] * n, [-1] * n
    on_stack = [False] * n
    stack: list[int] = []
    counter = ncomp = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            v, i = work[-1]
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            for k in range(i, len(succ[v])):
                w = succ[v][k]
                if index[w] < 0:
                    work[-1] = (v, k + 1)
                    work.append((w, 0))
                    break
                if on_stack[w]:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
                if low[v] == index[v]:
                    while True:
                        w = stack.pop()
                        on_stack[w] = False
                        comp[w] = ncomp
                        if w == v:
                            break
                    ncomp += 1
    return comp, ncomp


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
