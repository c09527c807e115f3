r"""The message dependency DAG of a schedule, as a networkx graph.

**Nodes** are messages: one per ``(step, src, dst)`` with ``src != dst`` (the IR's "one message
per ``(step, src, dst)``" rule, grouped by :func:`commsim._messages.group`), and per channel in
a schedule of several (IR rule 6). The node key is the tuple ``(step, src, dst)``, or
``(step, src, dst, channel)`` in a schedule of several channels; its attributes are ``step``,
``src``, ``dst``, ``channel``, ``slots`` (the source
slot ranges, half-open ``(lo, hi)`` pairs in the sender's buffer), ``dst_slots`` (the same in the
receiver's), ``units`` (data units moved) and ``reduce_units`` (units the receiver reduces).
Local transfers (``src == dst``) are memory operations, not messages: they are no nodes, but
data flows through them (below).

**Edges** ``u -> v`` mean "``u`` must finish before ``v`` can start", for one of two reasons,
recorded as boolean edge attributes (an edge may have both):

* ``order`` (**per-rank, per-channel program order**, the IR's rule 3): a rank starts its
  step-``k`` work on a channel once it has finished its own earlier steps on that channel. So a
  message of step ``k`` from ``s`` to ``d`` on channel ``c`` depends on every message that ``s``
  sent or received on ``c`` in ``s``'s latest earlier step with one, and likewise for ``d`` (the
  receiver must have finished its earlier steps to take part). Only the latest such step is
  linked; earlier ones are ancestors through it. Channels share no order edge: independent
  rings or trees progress separately.
* ``data`` (**data dependencies**): the message depends on the message that last wrote each
  slot it sends (at the sender), and, for a reduction, on the message that last wrote each slot
  it reduces into (at the receiver). "Last wrote" follows local copies: a slot copied locally
  inherits the source slot's writer. A local *reduction* merges two writers; the slot keeps the
  destination's (none of the built-in algorithms reduces locally; both writers stay ancestors
  through program order). Slots that still hold a rank's input have no writer.

Program order implies every data dependency transitively; the ``data`` edges say *why* a rank
waits, and the subgraph of ``data`` edges alone is the dataflow a runtime without per-rank step
order could exploit (``networkx.subgraph_view(g, filter_edge=lambda u, v: g.edges[u, v]["data"])``).

:func:`critical_path` is the longest chain of messages (by count, or by a node weight such as a
modelled message time). With program order, a ring allreduce on ``p`` ranks has a critical path
of ``2(p - 1)`` messages and recursive doubling of ``lg p``: one message per step.

Cost: one pass over the steps; ``O(messages + slots moved)`` numpy work plus one networkx node
per message and a few edges each, so building is refused past :data:`MAX_DAG_TRANSFERS`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

from commsim._ir import Schedule, Step
from commsim._messages import group
from commsim.errors import ParameterError, ResourceError

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["MAX_DAG_TRANSFERS", "critical_path", "message_graph", "slot_ranges"]

#: Transfers beyond which :func:`message_graph` refuses (networkx keeps a dict per node and edge).
MAX_DAG_TRANSFERS = 2_000_000


def _per_slot(st: Step, idx: np.ndarray) -> tuple[np.ndarray, ...]:
    """Transfers ``idx`` of ``st`` expanded to one entry per moved slot:
    ``(transfer, src_slot, dst_slot)``."""
    count = st.count[idx]
    rep = np.repeat(idx, count)
    offs = np.arange(len(rep)) - np.repeat(np.cumsum(count) - count, count)
    return rep, st.src_slot[rep] + offs, st.dst_slot[rep] + offs


def slot_ranges(lo: np.ndarray, count: np.ndarray) -> tuple[tuple[int, int], ...]:
    """Half-open slot ranges ``[lo, lo + count)``, sorted, adjacent ones merged.

    Examples:
        >>> slot_ranges(np.array([4, 0, 2]), np.array([2, 2, 1]))
        ((0, 3), (4, 6))
    """
    out: list[list[int]] = []
    for a, c in sorted(zip(lo.tolist(), count.tolist(), strict=True)):
        if out and out[-1][1] == a:
            out[-1][1] = a + c
        else:
            out.append([a, a + c])
    return tuple((a, b) for a, b in out)


class _Writers:
    """Which message last wrote each ``(rank, slot)`` (flat key ``rank * nslots + slot``): one id
    per key (``-1``: none, the slot holds input), and for a key that several messages of one step
    reduced into, all of them (rare, so kept in a dict)."""

    def __init__(self, nkeys: int) -> None:
        self.last = np.full(nkeys, -1, dtype=np.int64)
        self.many: dict[int, tuple[int, ...]] = {}

    def read(self, keys: np.ndarray, users: np.ndarray) -> set[tuple[int, int]]:
        """``(writer, user)`` pairs for message ``users[i]`` reading key ``keys[i]``."""
        w = self.last[keys]
        ok = w >= 0
        pairs = np.unique(np.stack([w[ok], users[ok]], axis=1), axis=0)
        out = {(a, b) for a, b in pairs.tolist()}
        if self.many:
            hit = np.isin(keys, np.fromiter(self.many, dtype=np.int64))
            for key, user in zip(keys[hit].tolist(), users[hit].tolist(), strict=True):
                out.update((a, user) for a in self.many[key])
        return out

    def write(
        self, keys: np.ndarray, msgs: np.ndarray, copy_to: np.ndarray, copy_from: np.ndarray
    ) -> None:
        """One step's writes: message ``msgs[i]`` wrote key ``keys[i]``; then local copies
        ``copy_from -> copy_to`` pass on the writers the source had before the step."""
        inherited = self.last[copy_from]
        inherited_many = {
            t: self.many[f]
            for t, f in zip(copy_to.tolist(), copy_from.tolist(), strict=True)
            if f in self.many
        }
        written = np.unique(np.concatenate([keys, copy_to]))
        for key in written[np.isin(written, np.fromiter(self.many, dtype=np.int64))].tolist():
            del self.many[key]
        uk, counts = np.unique(keys, return_counts=True)
        for key in uk[counts > 1].tolist():  # several reductions into one slot in one step
            self.many[key] = tuple(sorted(set(msgs[keys == key].tolist())))
        self.last[keys] = msgs
        self.last[copy_to] = inherited
        self.many.update(inherited_many)


def message_graph(schedule: Schedule) -> nx.DiGraph:
    """The message dependency DAG of ``schedule`` (see the module docstring for its definition).

    Args:
        schedule: any schedule with at most :data:`MAX_DAG_TRANSFERS` transfers.

    Returns:
        A ``networkx.DiGraph`` keyed by ``(step, src, dst)`` (``(step, src, dst, channel)`` for a
        schedule of several channels); ``graph.graph`` holds the schedule's
        :meth:`~commsim.Schedule.summary`.

    Raises:
        ResourceError: the schedule is too large for a Python graph.

    Examples:
        >>> import commsim
        >>> g = message_graph(commsim.build("allreduce", "ring", nranks=4))
        >>> g.number_of_nodes(), len(critical_path(g))  # 6 steps of 4 messages; one per step
        (24, 6)
        >>> sorted(g.predecessors((1, 1, 2)))  # step 1, rank 1 -> 2: both ranks' step-0 messages
        [(0, 0, 1), (0, 1, 2), (0, 2, 3)]
        >>> [u for u in g.predecessors((1, 1, 2)) if g.edges[u, (1, 1, 2)]["data"]]  # the slot
        [(0, 0, 1)]
    """
    import networkx as nx

    if not isinstance(schedule, Schedule):
        raise ParameterError(
            f"message_graph expects a commsim.Schedule, got {type(schedule).__name__}"
        )
    if schedule.ntransfers > MAX_DAG_TRANSFERS:
        raise ResourceError(
            f"{schedule.algorithm} (p={schedule.nranks}) has {schedule.ntransfers:,} transfers; "
            f"a networkx graph is built for at most {MAX_DAG_TRANSFERS:,} (use a smaller p)"
        )
    builder = _DagBuilder(schedule, nx.DiGraph(**schedule.summary()))
    for k, st in enumerate(schedule.steps()):
        if len(st.src) == 0:
            continue
        schedule.check_step(st, k)
        builder.add_step(k, st)
    return builder.graph


class _DagBuilder:
    """The DAG of :func:`message_graph`, grown one step at a time: the message keys so far, who
    wrote each ``(rank, slot)`` last, and each rank's latest step's messages."""

    def __init__(self, schedule: Schedule, graph: nx.DiGraph) -> None:
        p, self.nch = schedule.nranks, schedule.nchannels
        self.schedule, self.graph = schedule, graph
        self.keys: list[tuple[int, ...]] = []  # message id -> node key
        self.channel: list[int] = []  # message id -> its channel
        self.writers = _Writers(p * schedule.nslots)
        # per port (rank r's channel c: r·channels + c): the latest step's message ids
        self.latest: list[list[int]] = [[] for _ in range(p * self.nch)]

    def add_step(self, k: int, st: Step) -> None:
        """Step ``k``'s messages as nodes, their edges from what they wait for, and the writers
        and latest messages after it."""
        schedule, keys, nslots, nch = self.schedule, self.keys, self.schedule.nslots, self.nch
        g = group(st.src, st.dst, schedule.nranks, st.channel if nch > 1 else None)
        ids = list(range(len(keys), len(keys) + len(g.src)))
        chans = [int(st.channel[tr[0]]) for tr in g.transfers]
        self.channel += chans
        if nch > 1:
            keys += [(k, int(s), int(d), c) for s, d, c in zip(g.src, g.dst, chans, strict=True)]
        else:
            keys += [(k, int(s), int(d)) for s, d in zip(g.src, g.dst, strict=True)]
        owner = np.full(len(st.src), -1, dtype=np.int64)  # transfer -> its message id
        for m, tr in zip(ids, g.transfers, strict=True):
            owner[tr] = m
        t, s_idx, d_idx = _per_slot(st, np.flatnonzero(owner >= 0))
        msg, red = owner[t], st.reduce[t]
        src_key = st.src[t] * nslots + s_idx
        dst_key = st.dst[t] * nslots + d_idx
        data = self.writers.read(
            np.concatenate([src_key, dst_key[red]]), np.concatenate([msg, msg[red]])
        )
        self._add_messages(k, st, g, ids, data)
        lt, ls, ld = _per_slot(st, g.local)
        copy = ~st.reduce[lt]  # local reductions keep the destination's writer
        self.writers.write(
            dst_key,
            msg,
            st.dst[lt][copy] * nslots + ld[copy],
            st.src[lt][copy] * nslots + ls[copy],
        )
        step_ports: dict[int, list[int]] = {}
        for m, s, d, c in zip(ids, g.src.tolist(), g.dst.tolist(), chans, strict=True):
            step_ports.setdefault(s * nch + c, []).append(m)
            step_ports.setdefault(d * nch + c, []).append(m)
        for port, ms in step_ports.items():
            self.latest[port] = ms

    def _add_messages(self, k: int, st: Step, g: Any, ids: list[int], data: set) -> None:
        """The nodes of step ``k``'s messages ``ids``; program-order edges from both ranks'
        latest messages on the same channel, data edges from the messages that wrote what they
        read."""
        schedule, graph, keys, latest = self.schedule, self.graph, self.keys, self.latest
        nch = self.nch
        for m, s, d, tr in zip(ids, g.src.tolist(), g.dst.tolist(), g.transfers, strict=True):
            units = schedule.range_units(st.src_slot[tr], st.count[tr])
            c = self.channel[m]
            graph.add_node(
                keys[m],
                step=k,
                src=s,
                dst=d,
                channel=c,
                slots=slot_ranges(st.src_slot[tr], st.count[tr]),
                dst_slots=slot_ranges(st.dst_slot[tr], st.count[tr]),
                units=int(units.sum()),
                reduce_units=int(units[st.reduce[tr]].sum()),
            )
            for u in {*latest[s * nch + c], *latest[d * nch + c]}:
                graph.add_edge(keys[u], keys[m], order=True, data=(u, m) in data)
        for u, m in data:
            if not graph.has_edge(keys[u], keys[m]):
                graph.add_edge(keys[u], keys[m], order=False, data=True)


def critical_path(
    graph: nx.DiGraph,
    weight: str | Callable[[dict[str, Any]], float] | None = None,
) -> list[Hashable]:
    """The longest chain of dependent messages in a message DAG (:func:`message_graph`).

    Args:
        graph: a DAG whose nodes are messages.
        weight: what a message costs: ``None`` counts messages; a node attribute name (such as
            ``"units"``); or a function of the node's attribute dict (e.g. a modelled time,
            ``lambda m: alpha + m["units"] * unit_bytes * beta``).

    Returns:
        The messages on the path, first to last (empty for an empty graph). Ties go to the
        path networkx's topological order meets first.

    Examples:
        >>> import commsim
        >>> g = message_graph(commsim.build("allreduce", "recursive_doubling", nranks=8))
        >>> [step for step, src, dst in critical_path(g)]  # lg 8 = 3 messages, one per step
        [0, 1, 2]
    """
    import networkx as nx

    if weight is None:
        cost: Callable[[dict[str, Any]], float] = lambda attrs: 1.0
    elif isinstance(weight, str):
        key = weight
        cost = lambda attrs: float(attrs[key])
    else:
        cost = weight
    best: dict[Hashable, float] = {}
    prev: dict[Hashable, Hashable | None] = {}
    for v in nx.topological_sort(graph):
        u_best = max(graph.predecessors(v), key=best.__getitem__, default=None)
        best[v] = cost(graph.nodes[v]) + (best[u_best] if u_best is not None else 0.0)
        prev[v] = u_best
    if not best:
        return []
    v: Hashable | None = max(best, key=best.__getitem__)
    path = []
    while v is not None:
        path.append(v)
        v = prev[v]
    return path[::-1]
