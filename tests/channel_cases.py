"""Multi-channel schedules (IR rule 6) for the executor tests, shared by
``tests/test_exec_channels.py`` and ``tests/mpi/test_mpi_exec.py`` (each imports it by path: the
tests are not a package).

For every collective: ``channels(s, 2)`` (two copies of one row, NCCL's channels) and
``parallel(a, b)`` of two different schedules with the same slot layout, so that two channels
between one pair of ranks, channels that progress at different paces (the parts have different
step counts) and unequal messages per channel all occur. And ``packed_rings`` with two rings in
opposite directions (each rank sends to both neighbours at once, on two channels). A
pipelined one (``pipeline(channels(hierarchical, 2), 2)``: two chunks' messages merged, on two
channels). And ``packed_trees`` with a star (weight 2: two channels) and a chain per root, in two
pipelined chunks: branching ranks, chunks of different trees in one step, and a reduction up the
trees.
"""

from __future__ import annotations

import commsim
from commsim import Schedule
from commsim.algorithms._parallel import channels, parallel
from commsim.algorithms._pipeline import pipeline

# per collective: a row for channels(., 2), and two schedules for parallel(., .) (same slots)
PAIRS: dict[str, tuple[tuple[str, dict], tuple[str, dict], tuple[str, dict]]] = {
    "allreduce": (("ring", {}), ("ring", {}), ("rabenseifner", {})),
    "reduce_scatter": (("ring", {}), ("ring", {}), ("recursive_halving", {})),
    "allgather": (("ring", {}), ("ring", {}), ("bruck", {})),
    "alltoall": (("pairwise", {}), ("bruck", {}), ("pairwise", {})),
    "broadcast": (("binomial", {}), ("scatter_allgather", {}), ("chain", {"segments": "p"})),
    "reduce": (
        ("binomial", {}),
        ("rabenseifner", {"order": "far_first"}),
        ("rabenseifner", {"order": "near_first"}),
    ),
}


def _build(collective: str, algorithm: str, params: dict, p: int) -> Schedule:
    kw = {k: (p if v == "p" else v) for k, v in params.items()}
    if commsim.spec(collective).rooted:
        kw["root"] = p - 1
    return commsim.build(collective, algorithm, nranks=p, **kw)


def _same_slots(a: Schedule, b: Schedule) -> bool:
    return a.ndata == b.ndata and a.slot_units.tolist() == b.slot_units.tolist()


def cases(p: int) -> list[tuple[str, Schedule]]:
    """``(id, schedule)`` for every collective: its ``channels(., 2)``, and its ``parallel``
    where the two schedules have the same slots at this ``p`` (always at powers of two)."""
    out = []
    for c, (one, a, b) in PAIRS.items():
        out.append((f"{c}/channels({one[0]},2)", channels(_build(c, *one, p), 2)))
        sa, sb = _build(c, *a, p), _build(c, *b, p)
        if _same_slots(sa, sb):
            out.append((f"{c}/parallel({a[0]},{b[0]})", parallel(sa, sb)))
    both_ways = "-".join(map(str, range(p))) + "," + "-".join(map(str, [0, *range(p - 1, 0, -1)]))
    for c in ("allreduce", "reduce_scatter", "allgather"):
        out.append((f"{c}/packed_rings(2)", _build(c, "packed_rings", {"rings": both_ways}, p)))
    hier = channels(_build("allreduce", "hierarchical", {"ranks_per_node": 2}, p), 2)
    out.append(("allreduce/pipeline(channels(hierarchical,2),2)", pipeline(hier, 2)))
    out += _packed_trees_cases(p)
    return out


def _star_and_chain(p: int, root: int) -> str:
    """Root's star (weight 2) and its chain up the ranks, as ``trees`` text."""
    star = ["r" if v == root else str(root) for v in range(p)]
    chain = ["r" if v == root else str((v - 1) % p) for v in range(p)]
    return f"2:{'.'.join(star)},{'.'.join(chain)}"


def _packed_trees_cases(p: int) -> list[tuple[str, Schedule]]:
    """``packed_trees`` with :func:`_star_and_chain` trees for every root (every collective it
    has), two chunks each."""
    if p < 2:
        return []
    every = ",".join(_star_and_chain(p, r) for r in range(p))
    out = []
    for c in ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"):
        trees = _star_and_chain(p, p - 1) if commsim.spec(c).rooted else every
        params = {"trees": trees, "segments": 2}
        out.append((f"{c}/packed_trees(star+chain)", _build(c, "packed_trees", params, p)))
    return out
