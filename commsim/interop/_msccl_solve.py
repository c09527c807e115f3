r"""Earliest steps under constraints ``t(v) >= t(u) + w``, or the cycle of waits that forbids them.

The importer (:mod:`._msccl_read`) states what an MSCCL-IR program requires as a graph: *ordering*
edges ``(u, v, w)`` with ``w`` in ``{0, 1}`` (``v`` waits for ``u``; ``w = 1``: a step later) and
*weak* edges ``(u, v)`` (``v`` no earlier than ``u``: a write that must not overtake a pending
send's read, which commsim's reads-before-writes rule allows in the same step). The earliest
solution is a longest path. A cycle of edges that all allow the same step is satisfiable: every
node on it takes one step. Weak edges close such cycles (an exchange: each side overwrites what
the other's send reads, in one step), and so do ordering edges of weight 0 (a step that waits on a
thread block's *sending* step may run in the step its message moves: MSCCL's sends are buffered,
a sending step is done once posted, so two ranks that each wait on their own send to the other,
as recursive doubling's exchange does, meet in one step). Only a cycle through a weight-1 edge (a wait for data to arrive)
is a deadlock (:class:`Deadlock` carries the nodes of every component holding one, so the
importer can snapshot the posted sends on them and solve again). So the graph is first cut into strongly connected components (Tarjan, iteratively,
``O(nodes + edges)``); a component holding a weight-1 edge is a cycle of waits, a deadlock, and
the error names the XML steps on it. The condensation is a DAG whose
components Tarjan numbers in reverse topological order, so one backwards pass finds the longest
paths.
"""

from __future__ import annotations

from collections.abc import Sequence

from commsim.errors import ScheduleError
from commsim.interop._msccl_parse import Op

__all__ = ["Deadlock", "earliest_steps"]


class Deadlock(ScheduleError):
    """A cycle of waits; ``nodes``: every node of a strongly connected component that holds one
    (the message names the first such cycle)."""

    def __init__(self, message: str, nodes: frozenset[int]) -> None:
        super().__init__(message)
        self.nodes = nodes


def earliest_steps(
    label: Sequence[Op],
    edges: Sequence[tuple[int, int, int]],
    weak: Sequence[tuple[int, int]],
    source: str,
) -> list[int]:
    """The smallest ``t`` (one per node) meeting every constraint; ``label[v]``: node ``v``'s
    XML step, for the deadlock message.

    Raises:
        Deadlock: a cycle of waits through a weight-1 edge (names its XML steps).
    """
    succ: list[list[int]] = [[] for _ in label]
    for u, v, _ in edges:
        succ[u].append(v)
    for u, v in weak:
        succ[u].append(v)
    comp, ncomp = _components(succ)
    into: list[list[tuple[int, int]]] = [[] for _ in range(ncomp)]
    stuck: dict[int, tuple[int, int]] = {}  # component -> a weight-1 edge inside it
    for u, v, w in edges:
        if comp[u] != comp[v]:
            into[comp[v]].append((comp[u], w))
        elif w:
            stuck.setdefault(comp[u], (u, v))
    if stuck:
        u, v = next(iter(stuck.values()))
        nodes = frozenset(x for x, c in enumerate(comp) if c in stuck)
        raise Deadlock(_deadlock(label, succ, comp, u, v, source), nodes)
    for u, v in weak:
        if comp[u] != comp[v]:
            into[comp[v]].append((comp[u], 0))
    t = [0] * ncomp
    for c in range(ncomp - 1, -1, -1):  # every edge runs from a higher component to a lower
        for a, w in into[c]:
            t[c] = max(t[c], t[a] + w)
    return [t[c] for c in comp]


def _components(succ: list[list[int]]) -> tuple[list[int], int]:
    """Tarjan's strongly connected components: ``(component of each node, count)``.

    Components are numbered in the order Tarjan completes them, so an edge between two
    components always runs from the higher number to the lower.
    """
    n = len(succ)
    index, low, comp = [-1] * n, [0] * n, [-1] * n
    on_stack = [False] * n
    stack: list[int] = []
    counter = ncomp = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]  # (node, next successor to look at): the recursion, made explicit
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


def _deadlock(
    label: Sequence[Op], succ: list[list[int]], comp: list[int], u: int, v: int, source: str
) -> str:
    """The XML steps on a cycle through the ordering edge ``u -> v`` (``v`` waits for ``u``)."""
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
    back = [u]
    while back[-1] != v:
        back.append(parent[back[-1]])
    cycle = [u, *reversed(back[1:])]  # u, v, ..., u's predecessor: each waits for the one before
    names = list(dict.fromkeys(label[x].where for x in cycle))
    shown = " -> ".join(names[:6]) + (" -> ..." if len(names) > 6 else "")
    return (
        f"{source}: deadlock: {names[0]} waits for itself through a cycle of {len(names)} "
        f"step(s), each waiting for the one before: {shown} -> {names[0]}"
    )
