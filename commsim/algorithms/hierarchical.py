r"""Hierarchical (two-level) collectives: inside each server, across servers, inside again.

Ranks are cut into groups of ``ranks_per_node`` (``g``) consecutive ranks, one group per server
under linear placement (a cluster supplies ``g``); the last group may be smaller. The phase inside
a group is a ring over virtual blocks (:mod:`commsim.algorithms._hierarchy`); the phase across
groups is any registry algorithm (``inter=``), run on ``N = ⌈p/g⌉`` ranks, one per group, all
copies in the same steps; the outer algorithm may itself be hierarchical (three levels or more). Inner phases move :math:`\frac{g-1}{g}n` bytes over the fast links,
the outer phase only :math:`n/g` per rank over the slow ones — the point of BlueConnect (Cho et
al., "BlueConnect: decomposing all-reduce for deep learning on heterogeneous network hierarchy",
SysML 2019) and of IBM's DDL (Cho et al., "PowerAI DDL", 2017). More levels: pass
:func:`hierarchical_allreduce` a callable ``inter`` that builds a hierarchical allreduce.

Uneven last group (``p`` not a multiple of ``g``): its ``q < g`` members each own several
virtual blocks, so they take part in several outer copies at once; those messages share the
member's port and the formula on the row is then an estimate (``exact`` says where it is exact).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms import _pipeline
from commsim.algorithms._combinators import lazy
from commsim.algorithms._hierarchy import (
    Blocks,
    check_ranks_per_node,
    embed,
    group_classes,
    intra_ring_step,
)
from commsim.algorithms._registry import build, info, register
from commsim.algorithms.ring import _ring_ag_cost as _ring_ag
from commsim.algorithms.ring import _ring_rs_cost as _ring_rs
from commsim.errors import ParameterError

__all__ = [
    "hierarchical_allgather",
    "hierarchical_allreduce",
    "hierarchical_alltoall",
    "hierarchical_reduce_scatter",
]


def _check(nranks: int, ranks_per_node: int) -> tuple[int, int]:
    g = check_ranks_per_node(ranks_per_node)
    return g, -(-nranks // g)


def _inter(collective: str, inter: Any, n: int) -> Schedule:
    """The outer phase on ``n`` ranks: a registry name, or a callable ``inter(n) -> Schedule``
    (a nested hierarchical schedule: more levels). It must keep its data in its data slots."""
    s = inter(n) if callable(inter) else build(collective, inter, nranks=n)
    if s.collective != collective or s.nranks != n:
        raise ParameterError(
            f"inter must give a {collective} on {n} ranks, got {s.collective} on {s.nranks}"
        )
    if s.nslots != s.ndata:
        raise ParameterError(
            f"inter={inter!r}: {collective}/{inter} uses scratch slots, which a hierarchical "
            "schedule cannot embed; choose another inter algorithm"
        )
    return s


def _phases(parts: list[tuple[int, object]]):
    """A step function over phases ``[(nsteps, step_fn)]`` run one after another."""
    offsets = np.cumsum([0] + [n for n, _ in parts])

    def step(i: int) -> Step:
        k = int(np.searchsorted(offsets, i, side="right")) - 1
        return parts[k][1](i - int(offsets[k]))

    return int(offsets[-1]), step


# -- allreduce -------------------------------------------------------------------------------
def _outer_steps(collective: str, inter: str, n_groups: int, rings: int = 1) -> int:
    """Steps of the outer phase: a ring's (``rings`` passes of ``N - 1`` steps) in closed form,
    any other algorithm's by building it."""
    if n_groups == 1:
        return 0
    if inter == "ring":
        return rings * (n_groups - 1)
    return build(collective, inter, nranks=n_groups).nsteps


def _pipelined(base, alpha, pipeline: int, phases):
    """``base`` plus the latencies :func:`commsim.algorithms._pipeline.pipeline` adds to the
    phases ``[(steps, pattern)]`` (a callable, evaluated only when ``pipeline > 1``) cut into
    ``pipeline`` chunks: its module's formula. One chunk returns ``base`` untouched."""
    if pipeline == 1:
        return base
    parts = phases()
    labels = np.repeat([k for _, k in parts], [n for n, _ in parts])
    return base + alpha * _pipeline.wavefront_extra(labels, pipeline)


def _allreduce_cost(nranks, nbytes, alpha, beta, gamma, ranks_per_node=8, inter="ring", pipeline=1):
    """The single-port Hockney time of :func:`hierarchical_allreduce` (its ``.. math::``), exact
    where :func:`_allreduce_exact` says, an estimate elsewhere."""
    g = min(ranks_per_node, nranks)
    n_groups = -(-nranks // ranks_per_node)
    outer = info("allreduce", inter).time(n_groups, nbytes / g, alpha, beta, gamma)
    base = _ring_rs(g, nbytes, alpha, beta, gamma) + outer + _ring_ag(g, nbytes, alpha, beta, gamma)
    return _pipelined(
        base,
        alpha,
        pipeline,
        lambda: [(g - 1, 0), (_outer_steps("allreduce", inter, n_groups, rings=2), 1), (g - 1, 0)],
    )


def _allreduce_exact(nranks, ranks_per_node=8, inter="ring", pipeline=1):
    """Whole groups, and an outer algorithm exact at ``N`` that leaves every rank finishing at
    once (so the phases add); pipelined, the outer ring alone (one message pattern, every rank
    busy in every step: :mod:`commsim.algorithms._pipeline`'s formula)."""
    n_groups = -(-nranks // ranks_per_node)
    return (
        (nranks % ranks_per_node == 0 or nranks < ranks_per_node)
        and inter
        in (("ring", "rabenseifner", "recursive_doubling") if pipeline == 1 else ("ring",))
        and info("allreduce", inter).is_exact(n_groups)
    )


@register(
    "allreduce",
    "hierarchical",
    cost_fn=_allreduce_cost,
    exact=_allreduce_exact,
    constraints="groups of ranks_per_node (a server's GPUs); any p (an uneven last group)",
    reference="Cho et al., BlueConnect, SysML 2019; PowerAI DDL 2017",
)
def hierarchical_allreduce(
    nranks: int,
    ranks_per_node: int = 8,
    inter: str | Callable[[int], Schedule] = "ring",
    pipeline: int = 1,
) -> Schedule:
    r"""Reduce-scatter inside each group, allreduce across groups, allgather inside.

    With ``g = min(ranks_per_node, p)`` and ``N = ⌈p/g⌉`` groups, the vector is cut into ``g``
    blocks; member ``m`` of a group owns block ``m`` (and ``m + q``, ... in a last group of
    ``q``); block ``b`` is allreduced across groups among its owners by ``inter`` (``N`` ranks,
    ``n/g`` bytes). For whole groups and an outer algorithm that ends on every rank at once:

    .. math:: T = 2(g-1)\alpha + \frac{g-1}{g}n(2\beta + \gamma) + T_\text{inter}(N, n/g)

    ``inter`` is a registry name, or a callable ``inter(N)`` returning the outer allreduce: a
    nested hierarchical one gives three levels (or more).

    ``pipeline = K > 1`` runs the three phases as a wavefront of ``K`` chunks
    (:func:`commsim.algorithms.pipeline`): chunk ``j`` is ``j`` steps behind chunk 0, so one
    chunk crosses the servers while the next is still inside them. On one port per rank the
    bytes are the same and the latencies grow: with ``a = g - 1`` steps inside and
    ``b = 2(N-1)`` across (``inter="ring"``, whole groups, ``g, N > 1``), the ``K - 1`` steps
    more and the ``M`` steps where both patterns meet (two messages each) add

    .. math:: T_K = T + (K - 1 + M)\,\alpha, \qquad M = (K-1) + \min(K-1, b)

    References:
        Cho et al., "BlueConnect: decomposing all-reduce for deep learning on heterogeneous
        network hierarchy", SysML 2019.
        Cho et al., "PowerAI DDL", 2017.

    See Also:
        :func:`hierarchical_reduce_scatter`, :func:`hierarchical_allgather`,
        :func:`commsim.algorithms.nccl.nccl_tree_allreduce`,
        :func:`commsim.algorithms.nccl.snake_ring_allreduce`

    Examples:
        >>> s = hierarchical_allreduce(16, ranks_per_node=4)
        >>> s.nsteps  # 3 ring steps inside, 2(4 - 1) ring steps across, 3 inside
        12
        >>> three = hierarchical_allreduce(32, 4, inter=lambda n: hierarchical_allreduce(n, 2))
        >>> three.nsteps  # 3 + (1 + 2(4 - 1) + 1) + 3
        14
        >>> hierarchical_allreduce(16, ranks_per_node=4, pipeline=3).nsteps  # 12 + 3 - 1
        14
    """
    p = nranks
    g_node, n_groups = _check(p, ranks_per_node)
    k = _pipeline.check_chunks(pipeline, "pipeline")
    g = min(g_node, p)
    outer = _inter("allreduce", inter, n_groups)
    size = outer.nslots
    blocks = Blocks.contiguous(g, size)
    owners = np.empty((g, n_groups), dtype=np.int64)
    for q, bases in group_classes(p, g_node):
        owners[:, bases // g_node] = bases[None, :] + (np.arange(g) % q)[:, None]
    offset = np.arange(g, dtype=np.int64) * size
    nsteps, step = _phases(
        [
            (g - 1, lambda s: intra_ring_step(s, p, g_node, blocks, reduce=True)),
            (outer.nsteps, lambda t: embed(outer.step(t), owners, offset)),
            (g - 1, lambda s: intra_ring_step(s, p, g_node, blocks, reduce=False)),
        ]
    )
    whole = lazy(
        "allreduce",
        p,
        nsteps,
        step,
        slot_units=np.tile(outer.slot_units, g),
        algorithm="hierarchical",
        params={
            "ranks_per_node": ranks_per_node,
            "inter": inter if isinstance(inter, str) else outer.algorithm,
        },
    )
    return _pipeline.pipeline(whole, k)


# -- reduce_scatter and allgather -------------------------------------------------------------
def _columns_phase(collective: str, inter: str, p: int, g: int, n_groups: int):
    """The outer phase per column ``j`` (ranks ``k g + j``, slots ``k g + j``): one sub-schedule
    per distinct column height (``N``, and ``N - 1`` when the last group is short)."""
    q_last = p - (n_groups - 1) * g
    heights = [(n_groups, np.arange(min(q_last, g)))]
    if q_last < g and n_groups > 1:
        heights.append((n_groups - 1, np.arange(q_last, g)))
    parts = []
    for h, cols in heights:
        sub = _inter(collective, inter, h)
        if not (sub.nslots == h and (np.asarray(sub.slot_units) == sub.slot_units[0]).all()):
            raise ParameterError(
                f"inter={inter!r}: {collective}/{inter} needs one equal slot per rank"
            )
        ranks = cols[:, None] + g * np.arange(h, dtype=np.int64)[None, :]
        parts.append((sub, ranks, cols.astype(np.int64)))
    nsteps = max(sub.nsteps for sub, _, _ in parts)

    def step(t: int) -> Step:
        return Step.cat(
            [embed(sub.step(t), r, c, stride=g) for sub, r, c in parts if t < sub.nsteps]
        )

    return nsteps, step


def _fold_step(p: int, g: int, n_groups: int, *, reduce: bool) -> tuple[int, object]:
    """The short last group's partial columns ``j >= q`` to/from rank ``j`` of group 0."""
    q = p - (n_groups - 1) * g
    if q >= g or n_groups < 2:
        return 0, None
    cols = np.arange(q, g, dtype=np.int64)
    k = np.arange(n_groups - 1, dtype=np.int64)
    slots = (k[None, :] * g + cols[:, None]).ravel()
    last = np.repeat((n_groups - 1) * g + cols % q, len(k))
    first = np.repeat(cols, len(k))
    src, dst = (last, first) if reduce else (first, last)
    st = Step.make(src, dst, slots, slots, 1, reduce)
    return 1, lambda _: st


def _rs_cost(nranks, nbytes, alpha, beta, gamma, ranks_per_node=8, inter="ring", pipeline=1):
    """The single-port Hockney time of :func:`hierarchical_reduce_scatter` (its ``.. math::``),
    exact for whole groups and ``inter="ring"`` (:func:`_columns_exact`), an estimate elsewhere."""
    g = min(ranks_per_node, nranks)
    n_groups = -(-nranks // ranks_per_node)
    outer = info("reduce_scatter", inter).time(n_groups, nbytes / g, alpha, beta, gamma)
    base = _ring_rs(g, nbytes, alpha, beta, gamma) + outer
    return _pipelined(
        base,
        alpha,
        pipeline,
        lambda: [(g - 1, 0), (_outer_steps("reduce_scatter", inter, n_groups), 1)],
    )


def _ag_cost(nranks, nbytes, alpha, beta, gamma, ranks_per_node=8, inter="ring", pipeline=1):
    """The single-port Hockney time of :func:`hierarchical_allgather` (its ``.. math::``), exact
    for whole groups and ``inter="ring"`` (:func:`_columns_exact`), an estimate elsewhere."""
    g = min(ranks_per_node, nranks)
    n_groups = -(-nranks // ranks_per_node)
    outer = info("allgather", inter).time(n_groups, nbytes / g, alpha, beta, gamma)
    base = outer + _ring_ag(g, nbytes, alpha, beta, gamma)
    return _pipelined(
        base,
        alpha,
        pipeline,
        lambda: [(_outer_steps("allgather", inter, n_groups), 1), (g - 1, 0)],
    )


def _columns_exact(collective: str):
    def exact(nranks, ranks_per_node=8, inter="ring", pipeline=1):
        n_groups = -(-nranks // ranks_per_node)
        return (
            (nranks % ranks_per_node == 0 or nranks < ranks_per_node)
            and inter == "ring"
            and info(collective, inter).is_exact(n_groups)
        )

    return exact


@register(
    "reduce_scatter",
    "hierarchical",
    cost_fn=_rs_cost,
    exact=_columns_exact("reduce_scatter"),
    constraints="groups of ranks_per_node; any p (a short last group folds into group 0)",
    reference="Cho et al., BlueConnect, SysML 2019",
)
def hierarchical_reduce_scatter(
    nranks: int, ranks_per_node: int = 8, inter: str = "ring", pipeline: int = 1
) -> Schedule:
    r"""Reduce-scatter inside each group by columns, then across groups per column.

    Column ``j`` is the blocks ``k g + j`` of the ranks with local index ``j``. A ring inside each
    group leaves column ``j`` reduced over the group on member ``j``; ``inter`` then
    reduce-scatters each column across the groups (``N`` ranks, ``n/g`` bytes). A short last group
    hands its columns ``j >= q`` to rank ``j`` first (one more step). For whole groups:

    .. math:: T = (g-1)\alpha + \frac{g-1}{g}n(\beta + \gamma) + T_\text{inter}(N, n/g)

    ``pipeline = K > 1``: the two phases as a wavefront of ``K`` chunks
    (:func:`commsim.algorithms.pipeline`); on one port, ``K - 1`` more steps and ``K - 1`` steps
    where both patterns meet (whole groups, ``inter="ring"``, ``g, N > 1``):

    .. math:: T_K = T + 2(K-1)\,\alpha

    References:
        Cho et al., "BlueConnect: decomposing all-reduce for deep learning on heterogeneous
        network hierarchy", SysML 2019.

    See Also:
        :func:`commsim.algorithms.ring.ring_reduce_scatter`,
        :func:`commsim.algorithms.direct.direct_reduce_scatter`,
        :func:`commsim.algorithms.direct.pairwise_reduce_scatter`,
        :func:`commsim.algorithms.recursive.recursive_halving_reduce_scatter`,
        :func:`commsim.algorithms.torus.torus_reduce_scatter`, :func:`hierarchical_allreduce`,
        :func:`hierarchical_allgather`

    Examples:
        >>> hierarchical_reduce_scatter(12, ranks_per_node=4).nsteps  # 3 inside, 2 across
        5
        >>> hierarchical_reduce_scatter(12, ranks_per_node=4, pipeline=2).nsteps  # 5 + 2 - 1
        6
    """
    p = nranks
    g, n_groups = _check(p, ranks_per_node)
    k = _pipeline.check_chunks(pipeline, "pipeline")
    columns = Blocks.columns(p, g)
    fold = _fold_step(p, g, n_groups, reduce=True)
    nsteps, step = _phases(
        [
            (min(g, p) - 1, lambda s: intra_ring_step(s, p, g, columns, reduce=True)),
            fold,
            _columns_phase("reduce_scatter", inter, p, g, n_groups),
        ]
    )
    whole = lazy(
        "reduce_scatter",
        p,
        nsteps,
        step,
        slot_units=np.ones(p, dtype=np.int64),
        algorithm="hierarchical",
        params={"ranks_per_node": ranks_per_node, "inter": inter},
    )
    return _pipeline.pipeline(whole, k)


@register(
    "allgather",
    "hierarchical",
    cost_fn=_ag_cost,
    exact=_columns_exact("allgather"),
    constraints="groups of ranks_per_node; any p (group 0 fills a short last group's columns)",
    reference="Cho et al., BlueConnect, SysML 2019",
)
def hierarchical_allgather(
    nranks: int, ranks_per_node: int = 8, inter: str = "ring", pipeline: int = 1
) -> Schedule:
    r"""Allgather across groups per column, then inside each group by columns (the mirror of
    :func:`hierarchical_reduce_scatter`). For whole groups:

    .. math:: T = T_\text{inter}(N, n/g) + (g-1)\alpha + \frac{g-1}{g}n\beta

    ``pipeline = K > 1``: the two phases as a wavefront of ``K`` chunks, as in
    :func:`hierarchical_reduce_scatter`:

    .. math:: T_K = T + 2(K-1)\,\alpha

    References:
        Cho et al., "BlueConnect: decomposing all-reduce for deep learning on heterogeneous
        network hierarchy", SysML 2019.

    See Also:
        :func:`commsim.algorithms.ring.ring_allgather`,
        :func:`commsim.algorithms.direct.direct_allgather`,
        :func:`commsim.algorithms.bruck.bruck_allgather`,
        :func:`commsim.algorithms.recursive.recursive_doubling_allgather`,
        :func:`commsim.algorithms.torus.torus_allgather`, :func:`hierarchical_allreduce`,
        :func:`hierarchical_reduce_scatter`

    Examples:
        >>> hierarchical_allgather(12, ranks_per_node=4).nsteps  # 2 across, 3 inside
        5
        >>> hierarchical_allgather(12, ranks_per_node=4, pipeline=2).nslots  # 12 slots cut in 2
        24
    """
    p = nranks
    g, n_groups = _check(p, ranks_per_node)
    k = _pipeline.check_chunks(pipeline, "pipeline")
    columns = Blocks.columns(p, g)
    nsteps, step = _phases(
        [
            _columns_phase("allgather", inter, p, g, n_groups),
            _fold_step(p, g, n_groups, reduce=False),
            (min(g, p) - 1, lambda s: intra_ring_step(s, p, g, columns, reduce=False)),
        ]
    )
    whole = lazy(
        "allgather",
        p,
        nsteps,
        step,
        slot_units=np.ones(p, dtype=np.int64),
        algorithm="hierarchical",
        params={"ranks_per_node": ranks_per_node, "inter": inter},
    )
    return _pipeline.pipeline(whole, k)


# -- alltoall --------------------------------------------------------------------------------
def _a2a_layout(p: int, g: int) -> tuple[int, int, list[tuple[int, np.ndarray]]]:
    """``(N, nc, classes)``: groups, the most columns one agent serves, the group classes."""
    classes = group_classes(p, g)
    q_min = min(q for q, _ in classes)
    return -(-p // g), -(-min(g, p) // q_min), classes


def _a2a_gather_step(t: int, p: int, g: int) -> Step:
    """Step ``t`` inside each group: source ``j`` hands agent ``(j + t + 1) mod q`` (and, in
    step 0, itself) every input block whose destination's local index that agent serves."""
    n_groups, nc, classes = _a2a_layout(p, g)
    parts = []
    for q, bases in classes:
        for shift in ([0] if t == 0 else []) + ([t + 1] if t + 1 < q else []):
            j = np.arange(q, dtype=np.int64)
            agent = (j + shift) % q
            c = np.arange(min(g, p), dtype=np.int64)
            kk = np.arange(n_groups, dtype=np.int64)
            # (source j, column c, destination group k'): c served by agent[j], k'g + c < p
            jj, cc, kq = np.meshgrid(j, c, kk, indexing="ij")
            ok = (cc % q == agent[jj]) & (kq * g + cc < p)
            jj, cc, kq = jj[ok], cc[ok], kq[ok]
            src_slot = kq * g + cc
            dst_slot = 2 * p + (kq * nc + cc // q) * g + jj
            src = (bases[:, None] + jj[None, :]).ravel()
            dst = (bases[:, None] + agent[jj][None, :]).ravel()
            k = len(bases)
            parts.append(Step.make(src, dst, np.tile(src_slot, k), np.tile(dst_slot, k), 1))
    return Step.cat(parts) if parts else Step.empty()


def _a2a_deliver_step(t: int, p: int, g: int) -> Step:
    """Step ``t`` across groups: agent ``a`` of group ``k`` sends destination ``d`` of group
    ``k + t`` (a column it serves) the ``q_k`` blocks of group ``k``'s sources, one message."""
    n_groups, nc, classes = _a2a_layout(p, g)
    parts = []
    for q, bases in classes:
        k = bases // g
        c = np.arange(min(g, p), dtype=np.int64)
        kd = (k + t) % n_groups  # destination group of each source group
        kk, cc = np.meshgrid(np.arange(len(bases)), c, indexing="ij")
        d = kd[kk] * g + cc
        ok = d < p
        kk, cc, d = kk[ok], cc[ok], d[ok]
        agent = bases[kk] + cc % q
        first = 2 * p + (kd[kk] * nc + cc // q) * g
        parts.append(Step.make(agent, d, first, p + bases[kk], q))
    return Step.cat(parts) if parts else Step.empty()


def _a2a_cost(nranks, nbytes, alpha, beta, gamma, ranks_per_node=8):
    """The single-port Hockney time of :func:`hierarchical_alltoall` (its ``.. math::``), exact
    for whole groups, an estimate for a short last group."""
    g = min(ranks_per_node, nranks)
    n_groups = -(-nranks // ranks_per_node)
    return (g - 1) * (alpha + nbytes / g * beta) + (n_groups - 1) * (
        alpha + nbytes / n_groups * beta
    )


@register(
    "alltoall",
    "hierarchical",
    cost_fn=_a2a_cost,
    exact=lambda nranks, ranks_per_node=8: nranks % ranks_per_node == 0 or nranks < ranks_per_node,
    constraints="groups of ranks_per_node; any p; N + g - 2 messages per rank instead of p - 1",
    reference="Sack & Gropp, 'Collective algorithms for multiported torus networks', 2015 (two-phase); "
    "Thakur, Rabenseifner & Gropp 2005",
)
def hierarchical_alltoall(nranks: int, ranks_per_node: int = 8) -> Schedule:
    r"""Two-phase alltoall: gather by destination column inside each group, then one message
    per (group, destination) across groups.

    Destination ``d`` has local index ``c = d mod g``; in each group one member (an *agent*,
    ``c mod q`` in a group of ``q``) collects every block its group sends to a column ``c``
    (phase 1: ``g - 1`` pairwise steps of ``n/g``-byte messages), then sends each destination
    in each other group one message of its group's ``q`` blocks (phase 2: ``N`` steps, the first
    local, then ``n/N``-byte messages). Each rank sends ``g + N - 2`` messages instead of the
    direct algorithm's ``p - 1``, moving every byte twice. For whole groups:

    .. math:: T = (g-1)\left(\alpha + \frac{n}{g}\beta\right)
              + (N-1)\left(\alpha + \frac{n}{N}\beta\right)

    References:
        Sack & Gropp, "Collective algorithms for multiported torus networks", 2015 (the
        two-phase alltoall).
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`commsim.algorithms.direct.pairwise_alltoall`,
        :func:`commsim.algorithms.direct.direct_alltoall`,
        :func:`commsim.algorithms.bruck.bruck_alltoall`

    Examples:
        >>> s = hierarchical_alltoall(16, ranks_per_node=4)
        >>> s.nsteps, s.nslots  # 3 inside + 4 across; 2p data slots and p of staging
        (7, 48)
    """
    p = nranks
    g, _ = _check(p, ranks_per_node)
    n_groups, nc, _ = _a2a_layout(p, g)
    g_eff = min(g, p)
    nsteps, step = _phases(
        [
            (max(g_eff - 1, 1), lambda t: _a2a_gather_step(t, p, g)),
            (n_groups, lambda t: _a2a_deliver_step(t, p, g)),
        ]
    )
    return lazy(
        "alltoall",
        p,
        nsteps,
        step,
        slot_units=np.ones(2 * p + n_groups * nc * g, dtype=np.int64),
        ndata=2 * p,
        algorithm="hierarchical",
        params={"ranks_per_node": ranks_per_node},
    )
