"""Trees packed from the network for the ``packed_trees`` rows (``NetworkChoice``).

The packing (:func:`commsim.topology.pack_trees`) runs on the placed hosts of the one ``p``
asked for; its trees become the rows' ``trees`` text and, unless given, ``segments`` becomes
:func:`commsim.algorithms.packed_trees.suggested_segments` (1 for chains, else the deepest
tree's depth).
``trees=pack`` asks for a packing explicitly: where there is none (a graph too large for it, no
direct links joining the hosts, several ``-p``) that is a one-line error; the default
``trees=auto`` is replaced only where a packing exists, with a note either way.

Examples:
    >>> from commsim.cli.packing import shown
    >>> shown(2, 0.0125)
    '2 trees packed (each root at 98.8 % of the cut bound)'
"""

from __future__ import annotations

import dataclasses
from typing import Any

from commsim.cli.schedules import ScheduleChoice
from commsim.errors import ParameterError

__all__ = ["pack_trees_for", "shown"]


def shown(ntrees: int, gap: float) -> str:
    """The note's words for a packing of ``ntrees`` trees ``gap`` below the cut bound."""
    return f"{ntrees} trees packed (each root at {100 * (1 - gap):.1f} % of the cut bound)"


def _takers(choice: ScheduleChoice) -> tuple[list[str], list[str]]:
    """Algorithms with a ``trees`` parameter not given, and those given ``trees=pack``."""
    from commsim.algorithms import info

    free, asked = [], []
    for a in choice.algorithms:
        if "trees" not in info(choice.collective, a).params:
            continue
        given = choice.params[a].get("trees")
        if given is None:
            free.append(a)
        elif isinstance(given, str) and given.strip().lower() == "pack":
            asked.append(a)
    return free, asked


def _direct(graph: Any, hosts: list[Any]) -> bool:
    """Whether two of ``hosts`` share a link (one pass over the edges: no ``h × h`` matrix on
    a 4,096-chip torus)."""
    inside = set(hosts)
    return any(u in inside and v in inside and u != v for u, v in graph.edges)


def pack_trees_for(network: Any, choice: ScheduleChoice) -> tuple[ScheduleChoice, list[str]]:
    """:meth:`NetworkChoice.with_packed_trees` (module docstring)."""
    from commsim import spec
    from commsim.algorithms.packed_trees import format_trees, suggested_segments
    from commsim.topology import pack_trees, place

    free, asked = _takers(choice)
    if not free and not asked:
        return choice, []
    names = ", ".join(free + asked)
    net = network.network
    why = None
    if len(choice.nranks) != 1:
        why = "trees are packed for one -p at a time"
    else:
        hosts = [net.nodes[net.hosts[h]] for h in place(net, choice.nranks[0], network.placement)]
        if not _direct(net.graph, hosts):
            if not asked:  # a switched network: nothing to pack, no note
                return choice, []
            why = "the hosts share no direct link"
    packing = None
    if why is None:
        root = (choice.root or 0) if spec(choice.collective).rooted else None
        try:
            packing = pack_trees(net.graph, hosts, root=root)
        except ParameterError as e:
            why = str(e)
        else:
            why = None if packing is not None else "the direct links do not join the hosts"
    if why is not None:
        if asked:
            raise ParameterError(f"{', '.join(asked)}: trees=pack: {why}")
        return choice, [f"{names} keep trees=auto: {why}"]
    text = format_trees(packing.trees)
    segments = suggested_segments(text, choice.nranks[0])
    params = {a: dict(v) for a, v in choice.params.items()}
    for a in free + asked:
        params[a]["trees"] = text
        params[a].setdefault("segments", segments)
    note = f"{shown(len(packing.trees), packing.gap)} for {names}"
    return dataclasses.replace(choice, params=params), [note]
