r"""An imported MSCCL-IR program's thread blocks as IR channels: their concurrency, kept.

In MSCCL every ``<tb>`` is one CUDA thread block: its own thread of execution, bound to one send
peer, one receive peer and one NCCL channel (``chan``: the namespace of its connections), running
its steps in order while the GPU's other thread blocks run theirs. So the unit of concurrency is
the **thread block**, not ``chan``: two thread blocks of one channel that talk to different peers
run at the same time, and ``chan`` only says which connection (and so which of NCCL's rings or
paths) a message takes. A commsim channel (IR rule 6, :mod:`commsim._ir`) is a port with its own
program order; a rank drives its channels at once. The importer therefore puts every thread
block on a channel, as finely as the IR allows:

* **One channel per message.** A transfer has one channel at both ends, so the sending and the
  receiving thread block of every message share one: channels are global, and a ring's thread
  blocks, joined message by message, are one channel (as in NCCL, where a ring is one channel).
* **Shared data.** The verifier proves channels independent: a ``(rank, slot)`` written on one
  channel is touched by no other. Thread blocks that touch a slot some step writes (one writes
  what another reads, reduces into, or sends: the data a dependency hands over) share a channel.
  Slots only read (an input chunk two thread blocks send to two peers) keep them apart.
* **Dependencies.** A step that waits (``depid``/``deps``) for another thread block's step keeps
  that order only inside one channel, so a wait joins the two thread blocks too (nearly always
  they share data anyway; a ``nop`` that only orders keeps its order this way).
* **The importer's own final copy** of ``o`` into the output region (:mod:`._msccl_layout`) runs
  chunk by chunk on the channel of the chunk it copies, and joins that channel with those that
  read the output slot it overwrites (an out-of-place allgather's own input block, read by every
  thread block that sends it, then overwritten by the copy: they become one channel).

The channels are the **connected components** of the thread blocks under these three relations
(min-label propagation with pointer jumping, ``O(edges · log)`` array work), the finest grouping
that keeps every written slot on one channel. Each component is then given a channel number:
components that send from one GPU get distinct numbers, and so do components that receive at one
GPU, so a rank's concurrent thread blocks leave and arrive by distinct ports
(:func:`commsim._messages.port_ranks`). A port is full duplex (one send and one receive at a
time, the models' rule), so a sending and a receiving thread block may share one: an allpairs
alltoall's ``p - 1`` sending and ``p - 1`` receiving thread blocks per GPU need about ``p - 1``
numbers, not ``2(p - 1)`` (König: a bipartite graph's edges take as many colours as its largest
degree; the greedy numbering below may use a few more). Components are numbered in order of the
smallest ``chan`` they hold (then of their first thread block), each taking its ``chan`` when
that number is free at all its ends, else the smallest free one: a file whose channels are
already independent (a schedule exported by :func:`commsim.interop.format_msccl`) keeps its
numbers, and a round trip keeps its channels.

Time: with ``Hockney(links=k)`` channel ``c`` runs on link ``c mod k``; the topology model puts a
rank's channels in flight together. A single-link model (``links=1``, the default) charges the
same as before, every channel taking turns on the one link.

Examples:
    >>> import numpy as np
    >>> _components(4, np.array([0, 2]), np.array([1, 3])).tolist()
    [0, 0, 2, 2]
"""

from __future__ import annotations

import numpy as np

from commsim._ir import Step
from commsim.interop._msccl_origin import Writer
from commsim.interop._msccl_parse import Algo

__all__ = ["assign_channels"]

_I = np.int64


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest node of each node's connected component under edges ``a[i] -- b[i]``."""
    label = np.arange(n, dtype=_I)
    while True:
        low = np.minimum(label[a], label[b])
        new = label.copy()
        np.minimum.at(new, label[a], low)  # hook both roots under the smaller label
        np.minimum.at(new, label[b], low)
        new = new[new]
        while not np.array_equal(new, new[new]):  # pointer jumping to the roots
            new = new[new]
        if np.array_equal(new, label):
            return label
        label = new


def _unit_copies(st: Step) -> Step:
    """A step of local copies, one transfer per slot (the final copy, cut chunk by chunk)."""
    rep = np.repeat(np.arange(len(st.count)), st.count)
    offs = np.arange(len(rep)) - (np.cumsum(st.count) - st.count)[rep]
    return Step.make(st.src[rep], st.dst[rep], st.src_slot[rep] + offs, st.dst_slot[rep] + offs,
                     1, st.reduce[rep])  # fmt: skip


def _merge_runs(st: Step) -> Step:
    """Consecutive one-slot copies of one rank and channel, adjacent at both ends, as ranges."""
    n = len(st.src)
    brk = np.ones(n, dtype=bool)
    brk[1:] = (
        (st.src[1:] != st.src[:-1])
        | (st.channel[1:] != st.channel[:-1])
        | (st.src_slot[1:] != st.src_slot[:-1] + 1)
        | (st.dst_slot[1:] != st.dst_slot[:-1] + 1)
        | (st.reduce[1:] != st.reduce[:-1])
    )
    starts = np.flatnonzero(brk)
    count = np.diff(np.append(starts, n))
    return Step.make(st.src[starts], st.dst[starts], st.src_slot[starts], st.dst_slot[starts],
                     count, st.reduce[starts], st.channel[starts])  # fmt: skip


def assign_channels(
    algo: Algo, steps: list[Step], writers: list[list[Writer]], nslots: int
) -> tuple[list[Step], list[list[Writer]], int]:
    """``steps`` with every transfer on its thread block's channel (the module docstring), the
    writers of any re-cut final copy, and the number of channels.

    ``writers[i][t]`` is ``(op, sender)``: the XML step that wrote transfer ``t`` of step ``i``
    and the one that sent it (``(None, None)``: the importer's final copy, the last step).
    """
    first = np.cumsum([0, *(len(g.tbs) for g in algo.gpus)])
    ntb = int(first[-1])
    tb_gpu = np.repeat(np.arange(len(algo.gpus), dtype=_I), np.diff(first))
    tb_chan = np.array([tb.chan for g in algo.gpus for tb in g.tbs], dtype=_I)
    final = bool(steps) and bool(writers[-1]) and writers[-1][0] == (None, None)
    if final:
        steps = [*steps[:-1], _unit_copies(steps[-1])]
        writers = [*writers[:-1], [(None, None)] * steps[-1].ntransfers]
    nfinal = steps[-1].ntransfers if final else 0
    n = ntb + nfinal
    # the thread block of every transfer (the final copy's chunks: nodes of their own)
    owner, sender = [], []
    for i, ws in enumerate(writers):
        if final and i == len(steps) - 1:
            owner.append(ntb + np.arange(nfinal, dtype=_I))
            sender.append(np.full(nfinal, -1, dtype=_I))
            continue
        owner.append(np.array([first[op.gpu] + op.tb for op, _ in ws], dtype=_I))
        sender.append(np.array([-1 if s is None else first[s.gpu] + s.tb for _, s in ws], dtype=_I))
    owner_all, sender_all = np.concatenate(owner), np.concatenate(sender)
    msg = sender_all >= 0
    edges_a, edges_b = [owner_all[msg]], [sender_all[msg]]
    deps = [(first[g] + tb.id, first[g] + op.depid)
            for g, gpu in enumerate(algo.gpus) for tb in gpu.tbs for op in tb.ops
            if op.depid >= 0]  # fmt: skip
    if deps:
        d = np.array(deps, dtype=_I)
        edges_a.append(d[:, 0])
        edges_b.append(d[:, 1])
    # every (rank, slot) a transfer reads or writes, and the node that does it
    keys, nodes, writes = [], [], []
    for st, own in zip(steps, owner, strict=True):
        rep = np.repeat(np.arange(len(st.count)), st.count)
        offs = np.arange(len(rep)) - (np.cumsum(st.count) - st.count)[rep]
        for ranks, slots, w in ((st.src, st.src_slot, False), (st.dst, st.dst_slot, True)):
            keys.append(ranks[rep] * nslots + slots[rep] + offs)
            nodes.append(own[rep])
            writes.append(np.full(len(rep), w))
    key, node, write = np.concatenate(keys), np.concatenate(nodes), np.concatenate(writes)
    shared = np.isin(key, np.unique(key[write]))
    key, node = key[shared], node[shared]
    order = np.argsort(key, kind="stable")
    key, node = key[order], node[order]
    head = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    lead = np.repeat(node[head], np.diff(np.append(head, len(key))))
    edges_a.append(lead)
    edges_b.append(node)
    comp = _components(n, np.concatenate(edges_a), np.concatenate(edges_b))
    # a port is full duplex: components conflict where both send from, or both receive at, a gpu
    sends = np.stack([sender_all[msg], 2 * tb_gpu[sender_all[msg]]], axis=1)
    recvs = np.stack([owner_all[msg], 2 * tb_gpu[owner_all[msg]] + 1], axis=1)
    node_chan = np.concatenate([tb_chan, np.zeros(nfinal, dtype=_I)])
    channel_of = _number(comp, np.concatenate([sends, recvs]), node_chan, 2 * len(algo.gpus))
    out = [st.on_channel(channel_of[own]) for st, own in zip(steps, owner, strict=True)]
    if final:
        out[-1] = _merge_runs(out[-1])
        writers = [*writers[:-1], [(None, None)] * out[-1].ntransfers]
    return out, writers, max((int(st.channel.max(initial=0)) for st in out), default=0) + 1


def _number(comp: np.ndarray, ends: np.ndarray, chan: np.ndarray, nkeys: int) -> np.ndarray:
    """A channel number per node: its component's, distinct among the components with an end
    ``ends[:, 1]`` in common (a GPU's sending or receiving side; ``ends[:, 0]``: the node), in
    the module docstring's order; each takes its preferred ``chan`` when free."""
    roots, inverse = np.unique(comp, return_inverse=True)
    pref = np.full(len(roots), np.iinfo(_I).max, dtype=_I)
    np.minimum.at(pref, inverse, chan)
    owner = inverse[ends[:, 0]]
    by_comp = np.argsort(owner, kind="stable")  # ends grouped by component
    bounds = np.searchsorted(owner[by_comp], np.arange(len(roots) + 1))
    taken = np.zeros((nkeys, len(roots) + int(chan.max(initial=0)) + 1), dtype=bool)
    number = np.zeros(len(roots), dtype=_I)
    for c in np.lexsort((roots, pref)).tolist():  # one pass over components, not ranks
        at = ends[by_comp[bounds[c] : bounds[c + 1]], 1]
        busy = taken[at].any(axis=0)
        k = int(pref[c]) if not busy[pref[c]] else int(np.argmin(busy))
        taken[at, k] = True
        number[c] = k
    return number[inverse]
