r"""Packed trees: every root's data pipelined down weighted spanning trees, one channel per tree.

On a graph of direct links (a DGX-1's NVLinks, a torus) an allgather is ``p`` broadcasts, and
each root's broadcast can run over several spanning out-trees at once, each carrying a share of
the data: :func:`commsim.topology.pack_trees` chooses trees and integer weights that load every
link evenly (Blink, ForestColl), also on GPU subsets where no ring of direct links exists (the
command line fills ``trees`` from ``--cluster``/``--topology`` when it can). Here tree ``t`` of
root ``r`` with weight ``w_t`` carries ``w_t`` of ``r``'s ``W`` shares, as ``w_t`` copies of one
share each (so that every message is one share: contention models share a link equally among
messages), each copy cut in ``c = segments`` chunks that follow each other down the tree one
level per step (pipelined). Each copy has a channel of its own, except chains that close into
one ring, which share one (:func:`~commsim.algorithms._tree_edges.ring_channels`: the chains of
:func:`commsim.topology.pack_rings`' rings are then the packed rings' schedule).
Reduce-scatter and reduce run the trees reversed, reducing towards the root; allreduce is the
reduce-scatter then the allgather over the same trees. The slot layout and the step of each
chunk are :mod:`commsim.algorithms._tree_edges`'.

``trees="auto"`` (the default, no graph) is one chain per root along the ranks, ``r → r+1 → …``
(towards ``r`` for the reductions), weight 1: with ``c = 1`` the ring's messages, each block on a
channel of its own. Its single-port Hockney time is each row's ``.. math::``, exact for every
``p`` and ``c``: each of the ``c(p-1)`` chunk steps of a rank is one perfect matching
(``r → r+1``) of :math:`n/(pc)` bytes; the rooted rows are a pipelined chain of ``p + c - 2``
steps. For given trees the rows' ``cost_fn`` is an estimate, not exact: the slowest tree alone,
each of its edges on a link of its own (:func:`tree_estimate`).

Sharp bit: a channel sends one message at a time (IR rule 6: a channel is a port), and a
slot received on one channel may be sent on no other, so a rank with ``k`` children in a tree
sends to them in turn: stars cost ``k`` times their chunk at the branching rank, chains nothing.
Rings packed as chains (:func:`commsim.topology.pack_trees` keeps them where they are as fast)
run at the links' rate; trees that branch run below it in the contention models
(``docs/benchmarks.md``, "Packed trees").

References:
    Wang et al., "Blink: Fast and Generic Collectives for Distributed ML", MLSys 2020; Zhao et
    al., "ForestColl: Efficient Collective Communications on Heterogeneous Network Fabrics",
    2024; Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast, reduction
    and scan", Parallel Computing 35(12), 2009 (pipelining down trees).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms._combinators import concat, lazy
from commsim.algorithms._registry import FloatOrArray, register
from commsim.algorithms._tree_edges import (
    Edges,
    TreeSpec,
    depths,
    format_trees,
    parse_trees,
    tree_edges,
)
from commsim.errors import ParameterError

__all__ = [
    "format_trees",
    "packed_trees_allgather",
    "packed_trees_allreduce",
    "packed_trees_broadcast",
    "packed_trees_reduce",
    "packed_trees_reduce_scatter",
    "parse_trees",
    "suggested_segments",
    "tree_estimate",
]

NAME = "packed_trees"


def _segments(segments: int) -> int:
    if isinstance(segments, bool) or not isinstance(segments, (int, np.integer)) or segments < 1:
        raise ParameterError(f"segments must be an integer >= 1, got {segments!r}")
    return int(segments)


def _auto(trees: object) -> bool:
    return isinstance(trees, str) and trees.strip().lower() == "auto"


# -- "auto": one chain per root, lazily (p chains of p ranks never sit in memory) ---------------
def _chains(p: int, c: int, shift: int, reduce: bool, collective: str, params: dict) -> Schedule:
    """Root ``r``'s chain starts at rank ``r + shift`` and runs up the ranks on channel ``r``;
    edge ``i`` (from rank ``r + shift + i``) carries chunk ``j`` (slot ``r·c + j``) in step
    ``i + j``."""
    r = np.arange(p, dtype=np.int64)
    ones = np.ones(p, dtype=np.int64)

    def step(s: int) -> Step:
        js = range(max(0, s - (p - 2)), min(c - 1, s) + 1)
        src = [(r + shift + s - j) % p for j in js]
        slot = [r * c + j for j in js]
        n = len(src) * p
        return Step(np.concatenate(src), (np.concatenate(src) + 1) % p, np.concatenate(slot),
                    np.concatenate(slot), np.tile(ones, len(src)), np.full(n, reduce),
                    np.tile(r, len(src)))  # fmt: skip

    nsteps = p + c - 2 if p > 1 else 0
    return lazy(collective, p, nsteps, step, slot_units=p * c, algorithm=NAME, params=params,
                nchannels=p, ntransfers_hint=p * (p - 1) * c,
                max_step_transfers_hint=p * min(c, p - 1) if p > 1 else 0)  # fmt: skip


# -- given trees ----------------------------------------------------------------------------------
def _shares(trees: tuple[TreeSpec, ...], roots: list[int]) -> int:
    """``W``: each of ``roots``' trees' weights add up to it (the same for every root)."""
    have = {r: 0 for r in roots}
    for r, _, w in trees:
        if r in have:
            have[r] += w
    missing = [r for r, w in have.items() if w == 0]
    if missing:
        raise ParameterError(f"trees: no tree rooted at rank {missing[0]}")
    if len(set(have.values())) > 1:
        raise ParameterError(
            "trees: every root's weights must add up to the same number of shares, got "
            + ", ".join(f"{r}: {w}" for r, w in list(have.items())[:4])
        )
    return next(iter(have.values()))


def _phase(edges: Edges, collective: str, p: int, nslots: int, params) -> Schedule:
    per = edges.per_step()
    return lazy(collective, p, edges.nsteps, edges.step, slot_units=nslots, algorithm=NAME,
             params=params, nchannels=int(edges.channel.max(initial=0)) + 1, ntransfers_hint=int(per.sum()),
             max_step_transfers_hint=int(per.max(initial=0)))  # fmt: skip


def _packed(collective: str, p: int, trees: object, c: int, root: int | None, up: bool):
    """The phase of ``trees`` for every root (``root`` None) or for ``root``'s trees alone."""
    given = parse_trees(trees, p)  # type: ignore[arg-type]
    roots = list(range(p)) if root is None else [root]
    mine = tuple((r, par, 1) for r, par, w in given if r in roots for _ in range(w))
    w = _shares(mine, roots)
    base = np.zeros(p, dtype=np.int64)
    base[roots] = np.arange(len(roots)) * c * w
    edges = tree_edges(mine, c, base, w, up)
    params = {"trees": trees, "segments": c}
    return _phase(edges, collective, p, len(roots) * c * w, params)


# -- exact costs ----------------------------------------------------------------------------------
def tree_estimate(nranks: int, trees: object, segments: int):
    """``(steps, share)`` of the slowest of ``trees`` alone, each edge on a link of its own: its
    ``depth + c - 1`` steps and the fraction of a root's data in each of its chunks,
    :math:`w_t / (cW)`. For ``"auto"``'s chains, ``(p + c - 2, 1/c)``."""
    c = _segments(segments)
    if _auto(trees):
        return max(nranks + c - 2, 0), 1.0 / c
    given = parse_trees(trees, nranks)  # type: ignore[arg-type]
    mine = given
    w = _shares(mine, sorted({t[0] for t in mine}))
    depth = depths(np.array([t[1] for t in mine], dtype=np.int64)).max(axis=1)
    return int(depth.max()) + c - 1, max(t[2] for t in mine) / (c * w)


def _every_root(p, n, alpha, beta, gamma, trees, segments, phases, reduce) -> FloatOrArray:
    c = _segments(segments)
    if p == 1:
        return 0.0 * np.asarray(n, dtype=np.float64)
    if _auto(trees):
        return phases * c * (p - 1) * alpha + (p - 1) / p * n * (phases * beta + reduce * gamma)
    steps, share = tree_estimate(p, trees, c)
    return phases * steps * (alpha + share * n / p * beta) + reduce * steps * share * n / p * gamma


def _ag_cost(nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *,
             trees: str = "auto", segments: int = 1) -> FloatOrArray:  # fmt: skip
    """:func:`packed_trees_allgather`'s ``.. math::``, exact for ``trees="auto"`` (every ``p``
    and ``segments``); for given trees :func:`tree_estimate`'s time."""
    return _every_root(nranks, nbytes, alpha, beta, gamma, trees, segments, 1, 0)


def _rs_cost(nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *,
             trees: str = "auto", segments: int = 1) -> FloatOrArray:  # fmt: skip
    """:func:`packed_trees_reduce_scatter`'s ``.. math::``, exact for ``trees="auto"`` (every
    ``p`` and ``segments``); for given trees :func:`tree_estimate`'s time."""
    return _every_root(nranks, nbytes, alpha, beta, gamma, trees, segments, 1, 1)


def _ar_cost(nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *,
             trees: str = "auto", segments: int = 1) -> FloatOrArray:  # fmt: skip
    """:func:`packed_trees_allreduce`'s ``.. math::``, exact for ``trees="auto"`` (every ``p``
    and ``segments``); for given trees :func:`tree_estimate`'s time."""
    return _every_root(nranks, nbytes, alpha, beta, gamma, trees, segments, 2, 1)


def _rooted_cost(p, n, alpha, beta, gamma, trees, segments, reduce) -> FloatOrArray:
    if p == 1:
        return 0.0 * np.asarray(n, dtype=np.float64)
    steps, share = tree_estimate(p, trees, segments)
    return steps * (alpha + share * n * (beta + reduce * gamma))


def _bcast_cost(nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *,
                trees: str = "auto", segments: int = 1) -> FloatOrArray:  # fmt: skip
    """:func:`packed_trees_broadcast`'s ``.. math::``, exact for ``trees="auto"``; for given
    trees :func:`tree_estimate`'s time."""
    return _rooted_cost(nranks, nbytes, alpha, beta, gamma, trees, segments, 0)


def _reduce_cost(nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *,
                 trees: str = "auto", segments: int = 1) -> FloatOrArray:  # fmt: skip
    """:func:`packed_trees_reduce`'s ``.. math::``, exact for ``trees="auto"``; for given trees
    :func:`tree_estimate`'s time."""
    return _rooted_cost(nranks, nbytes, alpha, beta, gamma, trees, segments, 1)


def suggested_segments(trees: object, nranks: int) -> int:
    """``segments`` for ``trees``: 1 where every tree is a chain (the rings of
    :func:`commsim.topology.pack_rings`: every step of a ring is already balanced), else the
    deepest tree's depth, so that a tree's pipeline has at least as many steady steps as
    filling ones. The command line uses it when it packs trees.

    Examples:
        >>> suggested_segments("r.0.1.2,3.r.1.2", 4), suggested_segments("r.0.0.2", 4)
        (1, 2)
    """
    given = parse_trees(trees, nranks)  # type: ignore[arg-type]
    if not given:
        return 1
    parents = np.array([t[1] for t in given], dtype=np.int64)
    branches = any(len(set(p)) < len(p) for p in parents.tolist())  # a parent twice: two children
    return int(depths(parents).max()) if branches else 1


def auto_trees(nranks: int, trees: str = "auto", segments: int = 1, **_: object) -> bool:
    """Where the rows' ``cost_fn`` is exact: ``trees="auto"``.

    Examples:
        >>> auto_trees(4), auto_trees(4, "r.0.1.2")
        (True, False)
    """
    return _auto(trees)


_CONSTRAINTS = (
    "any p; one channel per tree, c = segments chunks pipelined down each; trees='auto' is one "
    "chain per root (the ring's messages at c = 1; the CLI packs trees into a --cluster/"
    "--topology graph of direct links, up to 128 hosts)"
)
_REFERENCE = "Wang et al. 2020 (Blink); Zhao et al. 2024 (ForestColl)"


def _chain(p: int, up: bool) -> tuple[TreeSpec, ...]:
    """``"auto"``'s tree for a rooted row: the chain ``0 → 1 → …`` (broadcast), or the one that
    ends at the root, ``1 → 2 → … → 0`` (reduce)."""
    order = (np.arange(p) * (-1 if up else 1)) % p
    parent = np.full(p, -1, dtype=np.int64)
    parent[order[1:]] = order[:-1]
    return ((0, tuple(parent.tolist()), 1),)


def _at_root_zero(trees: object, p: int) -> tuple[TreeSpec, ...]:
    """The trees (one root ``q`` for all), ranks shifted by ``-q`` so the root is rank 0 (the
    registry shifts them back to the broadcast's root)."""
    given = parse_trees(trees, p)  # type: ignore[arg-type]
    q = given[0][0]
    if any(t[0] != q for t in given):
        raise ParameterError("trees: a broadcast or reduce takes trees of one root")
    out = []
    for _, par, w in given:
        old = np.asarray(par, dtype=np.int64)
        new = np.full(p, -1, dtype=np.int64)
        new[(np.arange(p) - q) % p] = np.where(old < 0, -1, (old - q) % p)
        out.append((0, tuple(new.tolist()), w))
    return tuple(out)


def _rooted_row(collective: str, p: int, trees: object, segments: int, up: bool) -> Schedule:
    c = _segments(segments)
    given = _chain(p, up) if _auto(trees) or p == 1 else _at_root_zero(trees, p)
    s = _packed(collective, p, given, c, 0, up)
    return dataclasses.replace(s, params={"trees": trees, "segments": c})


# -- the rows ---------------------------------------------------------------------------------
@register("allgather", NAME, cost_fn=_ag_cost, exact=auto_trees, constraints=_CONSTRAINTS,
          reference=_REFERENCE)  # fmt: skip
def packed_trees_allgather(nranks: int, trees: str = "auto", segments: int = 1) -> Schedule:
    r"""Every root's block down its weighted spanning trees at once, one channel per tree, each
    tree's share in ``c = segments`` pipelined chunks (module docstring). For ``trees="auto"``
    (one chain per root) on one link:

    .. math:: T = c(p-1)\alpha + \frac{p-1}{p}\,n\beta

    For packed trees the β term is set by the most loaded link,
    :math:`\frac{n}{p} \max_e L_e / (W c_e)` (:func:`commsim.topology.pack_trees`), plus the
    pipeline's fill of :math:`\text{depth} - 1` chunk steps.

    References:
        Wang et al., "Blink: Fast and Generic Collectives for Distributed ML", MLSys 2020; Zhao
        et al., "ForestColl", 2024.

    See Also:
        :func:`packed_trees_reduce_scatter`, :func:`packed_trees_allreduce`,
        :func:`packed_trees_broadcast`, :func:`commsim.topology.pack_trees` (and
        ``packed_rings``, whose rings it runs as chains)

    Examples:
        >>> s = packed_trees_allgather(4, "r.0.1.2,1.r.1.2,1.2.r.2,1.2.3.r", segments=2)
        >>> s.nchannels, s.nsteps, s.nslots  # 4 trees; depth 3 + 2 - 1 steps; 2 chunks a root
        (4, 4, 8)
    """
    c = _segments(segments)
    if _auto(trees):
        return _chains(nranks, c, 0, False, "allgather", {"trees": trees, "segments": c})
    return _packed("allgather", nranks, trees, c, None, up=False)


@register("reduce_scatter", NAME, cost_fn=_rs_cost, exact=auto_trees, constraints=_CONSTRAINTS,
          reference=_REFERENCE)  # fmt: skip
def packed_trees_reduce_scatter(nranks: int, trees: str = "auto", segments: int = 1) -> Schedule:
    r"""Every root's block reduced up its trees, reversed, at once: a rank adds its children's
    chunks into its own and passes the sum to its parent (module docstring). For
    ``trees="auto"`` (one chain ending at each root) on one link:

    .. math:: T = c(p-1)\alpha + \frac{p-1}{p}\,n(\beta + \gamma)

    References:
        Wang et al., "Blink: Fast and Generic Collectives for Distributed ML", MLSys 2020; Zhao
        et al., "ForestColl", 2024.

    See Also:
        :func:`packed_trees_allgather`, :func:`packed_trees_allreduce`,
        :func:`packed_trees_reduce`

    Examples:
        >>> s = packed_trees_reduce_scatter(5, segments=3)
        >>> s.nchannels, s.nsteps  # a chain per root; p + c - 2 steps
        (5, 6)
    """
    c = _segments(segments)
    if _auto(trees):
        return _chains(nranks, c, 1, True, "reduce_scatter", {"trees": trees, "segments": c})
    return _packed("reduce_scatter", nranks, trees, c, None, up=True)


@register("allreduce", NAME, cost_fn=_ar_cost, exact=auto_trees, constraints=_CONSTRAINTS,
          reference=_REFERENCE)  # fmt: skip
def packed_trees_allreduce(nranks: int, trees: str = "auto", segments: int = 1) -> Schedule:
    r"""Reduce-scatter up the trees, then allgather down the same trees (module docstring).
    For ``trees="auto"`` on one link:

    .. math:: T = 2c(p-1)\alpha + \frac{p-1}{p}\,n(2\beta + \gamma)

    References:
        Wang et al., "Blink: Fast and Generic Collectives for Distributed ML", MLSys 2020; Zhao
        et al., "ForestColl", 2024.

    See Also:
        :func:`packed_trees_reduce_scatter`, :func:`packed_trees_allgather`

    Examples:
        >>> s = packed_trees_allreduce(4)
        >>> s.nchannels, s.nsteps  # the ring's 2(p - 1) steps, a channel per block
        (4, 6)
    """
    rs = packed_trees_reduce_scatter(nranks, trees, segments)
    ag = packed_trees_allgather(nranks, trees, segments)
    return concat(rs, ag, collective="allreduce", algorithm=NAME, params=dict(ag.params))


@register("broadcast", NAME, cost_fn=_bcast_cost, exact=auto_trees, constraints=_CONSTRAINTS,
          reference=_REFERENCE)  # fmt: skip
def packed_trees_broadcast(nranks: int, trees: str = "auto", segments: int = 1,
                           ) -> Schedule:  # fmt: skip
    r"""The root's data down its weighted spanning trees (those of ``trees`` rooted at
    ``root``), in ``c = segments`` pipelined chunks each. For ``trees="auto"`` (the chain
    ``root → root+1 → …``, :func:`commsim.algorithms.trees.chain_broadcast`'s schedule) on one link:

    .. math:: T = (p + c - 2)\left(\alpha + \frac{n}{c}\beta\right)

    References:
        Wang et al., "Blink: Fast and Generic Collectives for Distributed ML", MLSys 2020;
        Edmonds, "Edge-disjoint branchings", 1973 (a root's rate is its smallest cut).

    See Also:
        :func:`packed_trees_reduce`, :func:`packed_trees_allgather`,
        :func:`commsim.topology.pack_trees`

    Examples:
        >>> s = packed_trees_broadcast(4, "r.0.0.0,2:r.0.1.2", segments=2)
        >>> s.nchannels, s.nsteps, s.nslots  # a star, the chain twice (weight 2): 3 + 2 - 1 steps
        (3, 4, 6)
    """
    return _rooted_row("broadcast", nranks, trees, segments, up=False)


@register("reduce", NAME, cost_fn=_reduce_cost, exact=auto_trees, constraints=_CONSTRAINTS,
          reference=_REFERENCE)  # fmt: skip
def packed_trees_reduce(nranks: int, trees: str = "auto", segments: int = 1,
                        ) -> Schedule:  # fmt: skip
    r"""Every rank's vector reduced up the root's trees, reversed, in ``c = segments`` pipelined
    chunks each. For ``trees="auto"`` (the chain ``root+1 → root+2 → … → root``) on one link:

    .. math:: T = (p + c - 2)\left(\alpha + \frac{n}{c}(\beta + \gamma)\right)

    References:
        Wang et al., "Blink: Fast and Generic Collectives for Distributed ML", MLSys 2020; Zhao
        et al., "ForestColl", 2024.

    See Also:
        :func:`packed_trees_broadcast`, :func:`packed_trees_reduce_scatter`,
        :func:`commsim.topology.pack_trees`

    Examples:
        >>> packed_trees_reduce(6, segments=2).nsteps  # p + c - 2
        6
    """
    return _rooted_row("reduce", nranks, trees, segments, up=True)
