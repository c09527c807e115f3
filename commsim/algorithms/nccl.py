r"""NCCL-style algorithms that follow the servers: a ring that snakes through them, and the tree.

* **Snake ring** (NCCL orders its rings by the topology): the ring visits each server's ranks
  consecutively, servers in turn, alternately up and down, so consecutive servers are joined by
  the *same* local index. On a rail-optimized cluster (GPU ``i`` of every server on rail ``i``)
  every server-to-server hop then stays on one rail, through one leaf switch, instead of crossing
  to another rail through the spines.
* **NCCL tree** (NCCL 2.4; Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth
  broadcast, reduction and scan", Parallel Computing 35(12), 2009): inside each server a
  pipelined chain reduces onto its first rank, the first ranks run the double-binary-tree
  allreduce across servers, and a chain broadcasts back down. (NCCL also pipelines across the
  three phases; here they run one after another, or as a wavefront with ``pipeline=K``.)

Both take ``ranks_per_node`` (``g``; a cluster supplies it) and any ``p`` (a short last server).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms import _pipeline
from commsim.algorithms._channel_layout import rotate_in_servers
from commsim.algorithms._combinators import lazy, relabel
from commsim.algorithms._hierarchy import embed, group_classes
from commsim.algorithms._registry import info, register
from commsim.algorithms.hierarchical import _check, _phases
from commsim.algorithms.ring import _ring_ar_cost, ring_allreduce
from commsim.algorithms.trees import double_binary_tree_allreduce

__all__ = ["nccl_tree_allreduce", "snake_ring_allreduce"]


def snake_order(nranks: int, g: int) -> np.ndarray:
    """Ring position ``v`` → rank: server ``k`` in order, its ranks ascending for even ``k`` and
    descending for odd ``k``.

    Examples:
        >>> snake_order(8, 3).tolist()
        [0, 1, 2, 5, 4, 3, 6, 7]
    """
    v = np.arange(nranks, dtype=np.int64)
    base = (v // g) * g
    size = np.minimum(g, nranks - base)
    local = v - base
    return np.where((v // g) % 2 == 1, base + size - 1 - local, v)


def _snake_cost(nranks, nbytes, alpha, beta, gamma, ranks_per_node=8):
    """The single-port Hockney time of :func:`snake_ring_allreduce` (its ``.. math::``, the
    ring's), exact for every ``p``."""
    return _ring_ar_cost(nranks, nbytes, alpha, beta, gamma)


def _server_channels(nranks: int, k: int, ranks_per_node: int = 8, **params) -> np.ndarray:
    """Both rows' channel layout: channel ``c`` rotates every server's ranks by ``c``
    (:func:`~commsim.algorithms._channel_layout.rotate_in_servers`), so the channels' server
    crossings spread over the servers' rails (one NIC per GPU) instead of sharing one."""
    return rotate_in_servers(nranks, k, ranks_per_node)


@register(
    "allreduce",
    "snake_ring",
    cost_fn=_snake_cost,
    channel_ranks=_server_channels,
    constraints="any p; server-to-server hops on one rail when ranks_per_node is the server size",
    reference="Patarasuk & Yuan 2009; NCCL's topology-ordered rings",
)
def snake_ring_allreduce(nranks: int, ranks_per_node: int = 8) -> Schedule:
    r"""Ring allreduce along :func:`snake_order`: the ring's cost on a flat network, fewer
    rail crossings on a rail-optimized one.

    .. math:: T = 2(p-1)\,\alpha + 2\frac{p-1}{p}\,n\beta + \frac{p-1}{p}\,n\gamma

    References:
        Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
        workstations", JPDC 69(2), 2009.
        NVIDIA NCCL: rings ordered by the servers' topology.

    See Also:
        :func:`commsim.algorithms.ring.ring_allreduce`,
        :func:`commsim.algorithms.direct.direct_allreduce`,
        :func:`commsim.algorithms.torus.torus_allreduce`,
        :func:`commsim.algorithms.hierarchical.hierarchical_allreduce`,
        :func:`nccl_tree_allreduce`

    Examples:
        >>> s = snake_ring_allreduce(16, ranks_per_node=4)
        >>> (
        ...     s.nsteps,
        ...     sorted(
        ...         {
        ...             (int(a), int(b))
        ...             for a, b in zip(s.step(0).src, s.step(0).dst)
        ...             if a // 4 != b // 4
        ...         }
        ...     ),
        ... )
        (30, [(3, 7), (4, 8), (11, 15), (12, 0)])
    """
    g, _ = _check(nranks, ranks_per_node)
    out = relabel(ring_allreduce(nranks), snake_order(nranks, g), nranks)
    return dataclasses.replace(
        out, algorithm="snake_ring", params={"ranks_per_node": ranks_per_node}
    )


def _chain_step(t: int, p: int, g: int, nslots: int, *, reduce: bool) -> Step:
    """Step ``t`` of the pipelined chain in every server: toward its first rank (``reduce``:
    member ``m`` sends slot ``t - (q - 1 - m)`` to ``m - 1``) or away from it (broadcast: member
    ``m`` sends slot ``t - m`` to ``m + 1``)."""
    parts = []
    for q, bases in group_classes(p, g):
        m = np.arange(1, q) if reduce else np.arange(q - 1)
        slot = t - (q - 1 - m) if reduce else t - m
        ok = (slot >= 0) & (slot < nslots)
        m, slot = m[ok], slot[ok]
        if not len(m):
            continue
        to = m - 1 if reduce else m + 1
        src = (bases[:, None] + m[None, :]).ravel()
        dst = (bases[:, None] + to[None, :]).ravel()
        s = np.tile(slot, len(bases))
        parts.append(Step.make(src, dst, s, s, 1, reduce))
    return Step.cat(parts) if parts else Step.empty()


def _tree_cost(nranks, nbytes, alpha, beta, gamma, ranks_per_node=8, segments=4, pipeline=1):
    """The single-port Hockney time of :func:`nccl_tree_allreduce` (its ``.. math::``), exact
    inside one server (:func:`_tree_exact`); across servers the double binary tree's upper bound.
    Pipelined, an estimate: the wavefront's latencies added (:mod:`commsim.algorithms._pipeline`;
    exact where the schedule has no steps)."""
    q = min(ranks_per_node, nranks)
    n_groups = -(-nranks // ranks_per_node)
    k = 2 * segments
    chain = 0.0 if q == 1 else (k + q - 2) * (2 * alpha + nbytes / k * (2 * beta + gamma))
    tree = info("allreduce", "double_binary_tree").time(
        n_groups, nbytes, alpha, beta, gamma, segments=segments
    )
    if pipeline == 1:
        return chain + tree
    up = k + q - 2 if q > 1 else 0
    labels = np.repeat([0, 1, 2], [up, double_binary_tree_allreduce(n_groups, segments).nsteps, up])
    return chain + tree + alpha * _pipeline.wavefront_extra(labels, pipeline)


def _tree_exact(nranks, ranks_per_node=8, segments=4, pipeline=1):
    """One server: the chains alone; pipelined, one rank (no steps)."""
    return nranks <= ranks_per_node and (pipeline == 1 or nranks == 1)


@register(
    "allreduce",
    "nccl_tree",
    cost_fn=_tree_cost,
    exact=_tree_exact,
    channel_ranks=_server_channels,
    constraints="any p; chains inside servers of ranks_per_node, a double binary tree across",
    reference="NCCL 2.4 trees; Sanders, Speck & Träff 2009",
)
def nccl_tree_allreduce(
    nranks: int, ranks_per_node: int = 8, segments: int = 4, pipeline: int = 1
) -> Schedule:
    r"""Chain reduce inside each server, double-binary-tree allreduce across the servers' first
    ranks (``segments`` per tree), chain broadcast inside.

    The vector is cut into the tree's ``K = 2 segments`` slots, which the chains pipeline: a
    server of ``q = min(g, p)`` ranks needs ``K + q - 2`` steps per chain (none when ``q = 1``),
    each delaying the chain's end by :math:`\alpha + \frac{n}{K}(\beta + \gamma)` up and
    :math:`\alpha + \frac{n}{K}\beta` down; across the ``N = ⌈p/g⌉`` servers the double binary
    tree's time on ``N`` ranks, :math:`T_\text{DBT}(N, n)` (its own upper bound, exact where
    :func:`commsim.algorithms.trees.double_binary_tree_allreduce` says), is added:

    .. math::
        T = (K+q-2)\left(2\alpha + \frac{n}{K}(2\beta + \gamma)\right) + T_\text{DBT}(N, n),
        \qquad K = 2\,\text{segments}

    Exact inside one server (``p ≤ g``, where :math:`T_\text{DBT}(1, n) = 0`).

    ``pipeline = K > 1`` overlaps the three phases chunk by chunk, as NCCL does: a wavefront of
    ``K`` chunks (:func:`commsim.algorithms.pipeline`), chunk ``j`` ``j`` steps behind chunk 0.
    Its time is estimated as :math:`T` plus the wavefront's extra latencies (the pipeline
    module's formula, with the chain up, the tree and the chain down as three patterns); the
    chains' idle ranks make the model's time differ from it (lower or higher).

    References:
        NVIDIA NCCL 2.4: the double binary tree (``ncclGetBtree``, ``ncclGetDtree``).
        Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and
        scan", Parallel Computing 35(12), 2009.

    See Also:
        :func:`commsim.algorithms.hierarchical.hierarchical_allreduce`,
        :func:`snake_ring_allreduce`,
        :func:`commsim.algorithms.trees.double_binary_tree_allreduce`,
        :func:`commsim.algorithms.trees.chain_broadcast`

    Examples:
        >>> s = nccl_tree_allreduce(16, ranks_per_node=8, segments=2)
        >>> s.nslots, s.nsteps > 2 * (4 + 8 - 2)
        (4, True)
        >>> t = nccl_tree_allreduce(16, ranks_per_node=8, segments=2, pipeline=2)
        >>> t.nslots, t.nsteps - s.nsteps
        (8, 1)
    """
    p = nranks
    g, n_groups = _check(p, ranks_per_node)
    chunks = _pipeline.check_chunks(pipeline, "pipeline")
    tree = double_binary_tree_allreduce(n_groups, segments)
    k = tree.nslots
    q = min(g, p)
    leaders = (np.arange(n_groups, dtype=np.int64) * g)[None, :]
    chain = k + q - 2 if q > 1 else 0
    nsteps, step = _phases(
        [
            (chain, lambda t: _chain_step(t, p, g, k, reduce=True)),
            (tree.nsteps, lambda t: embed(tree.step(t), leaders, np.zeros(1, np.int64))),
            (chain, lambda t: _chain_step(t, p, g, k, reduce=False)),
        ]
    )
    whole = lazy(
        "allreduce",
        p,
        nsteps,
        step,
        slot_units=tree.slot_units,
        algorithm="nccl_tree",
        params={"ranks_per_node": ranks_per_node, "segments": segments},
    )
    return _pipeline.pipeline(whole, chunks)
