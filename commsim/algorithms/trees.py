r"""Tree algorithms: binomial broadcast, reduce and allreduce; the pipelined chain broadcast; van de
Geijn's scatter-allgather broadcast; and the double-binary-tree allreduce.

Rooted schedules are built for root 0 (:func:`commsim.build` rotates ranks for another root).
``L`` below is :math:`\lceil \lg p \rceil`, the fewest steps in which one rank's data can reach all.

* **Binomial trees** (MPICH; Thakur, Rabenseifner & Gropp, "Optimization of collective communication
  operations in MPICH", IJHPCA 19(1), 2005): in step ``k`` of a broadcast every rank that holds the
  data sends it ``2^(L-1-k)`` ranks further (largest distance first), a reduce is its mirror image,
  and a scatter sends, instead of the whole vector, the blocks of the receiver's subtree.
* **Chain** (the classic pipeline; Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth
  broadcast, reduction and scan", Parallel Computing 35(12), 2009): the vector cut into ``k``
  segments flows down the path ``0 → 1 → … → p-1``, one hop per step.
* **Scatter-allgather** (van de Geijn; Barnett et al. 1994; Thakur et al. 2005 long-message
  broadcast): a binomial scatter of ``p`` blocks, then the ring allgather.
* **Double binary tree** (Sanders, Speck & Träff 2009, two-tree reduction and broadcast; NVIDIA
  NCCL's ``ncclGetBtree``/``ncclGetDtree`` trees): two binary trees in which every rank is
  interior in at most one, each carrying half of the vector, with edges 2-coloured so that every
  step is a matching; ``double_binary_tree_channels`` runs each tree on a channel of its own
  (IR rule 6), as NCCL does.

Exact α-β-γ costs (the per-rank-clock Hockney model of :mod:`commsim.models`) are in each factory's
docstring; ``n`` is the vector length in bytes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms._combinators import concat, lazy
from commsim.algorithms._parallel import parallel
from commsim.algorithms._registry import FloatOrArray, register
from commsim.algorithms.bruck import _nsteps as _lg
from commsim.algorithms.ring import ring_allgather
from commsim.errors import ScheduleError

__all__ = [
    "binomial_allreduce",
    "binomial_broadcast",
    "binomial_reduce",
    "chain_broadcast",
    "double_binary_tree_allreduce",
    "double_binary_tree_channels",
    "scatter_allgather_broadcast",
]


def _check_segments(segments: int) -> int:
    if isinstance(segments, bool) or not isinstance(segments, (int, np.integer)) or segments < 1:
        raise ScheduleError(f"segments must be an integer >= 1, got {segments!r}")
    return int(segments)


# -- exact costs (each factory's ``.. math::``) ---------------------------------------------------


def _binomial_bcast_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float
) -> FloatOrArray:
    """The single-port Hockney time of :func:`binomial_broadcast` (its ``.. math::``), exact for
    every ``p``."""
    return _lg(nranks) * (alpha + nbytes * beta)


def _binomial_reduce_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float
) -> FloatOrArray:
    """The single-port Hockney time of :func:`binomial_reduce` (its ``.. math::``), exact for every
    ``p``."""
    return _lg(nranks) * (alpha + nbytes * beta + nbytes * gamma)


def _binomial_ar_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float
) -> FloatOrArray:
    """The single-port Hockney time of :func:`binomial_allreduce` (its ``.. math::``), exact for
    every ``p``."""
    L = _lg(nranks)
    return 2 * L * alpha + 2 * L * nbytes * beta + L * nbytes * gamma


def _chain_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *, segments: int
) -> FloatOrArray:
    """The single-port Hockney time of :func:`chain_broadcast` (its ``.. math::``; nothing for
    ``p = 1``), exact for every ``p``."""
    p, k = nranks, segments
    return (p + k - 2 if p > 1 else 0) * (alpha + nbytes / k * beta)


def _scatter_allgather_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float
) -> FloatOrArray:
    """The single-port Hockney time of :func:`scatter_allgather_broadcast` (its ``.. math::``),
    exact for every ``p``."""
    p = nranks
    return (_lg(p) + p - 1) * alpha + 2 * (p - 1) / p * nbytes * beta


def _dbt_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *, segments: int
) -> FloatOrArray:
    """The right side of :func:`double_binary_tree_allreduce`'s ``.. math::`` (its exact time
    for ``p = 2`` below ``p = 3``), exact where :func:`_dbt_exact` says, an upper bound elsewhere."""
    p, k, n = nranks, segments, nbytes
    if p <= 2:
        return (p - 1) * (2 * k * alpha + n * beta + n / 2 * gamma)
    return (2 * k + 2 * _lg(p) - 3) * (2 * alpha + n / k * beta + n / (2 * k) * gamma)


def _dbt_exact(nranks: int, *, segments: int) -> bool:
    """Where :func:`_dbt_cost` is exact: ``p ≤ 3``, ``p = 2^H``, or ``k ≥ 2`` and
    ``p = 2^(H-1) + 1`` or ``3·2^(H-2) < p``, ``H = ⌈lg p⌉``."""
    p, H = nranks, _lg(nranks)
    if p <= 3 or p == 1 << H:
        return True
    return segments >= 2 and (p == (1 << (H - 1)) + 1 or p > 3 << (H - 2))


# -- binomial trees ---------------------------------------------------------------------------


def _binomial_bcast_step(p: int, k: int, nslots: int) -> Step:
    """Step ``k`` of a root-0 binomial broadcast: ranks ``0 mod 2d`` send all slots to ``+d``."""
    d = 1 << (_lg(p) - 1 - k)
    src = np.arange(0, p - d, 2 * d)
    return Step.make(src=src, dst=src + d, src_slot=0, dst_slot=0, count=np.full(len(src), nslots))


def _binomial_reduce_step(p: int, k: int, nslots: int) -> Step:
    """Step ``k`` of a root-0 binomial reduce: ranks ``d mod 2d`` add all slots into ``-d``."""
    d = 1 << k
    src = np.arange(d, p, 2 * d)
    n = len(src)
    return Step.make(src, src - d, 0, 0, count=np.full(n, nslots), reduce=np.ones(n, dtype=bool))


def _binomial_scatter_step(p: int, k: int) -> Step:
    """Step ``k`` of a root-0 binomial scatter of ``p`` one-slot blocks: the receiver ``r + d``
    gets the blocks of its subtree, ``[r + d, min(r + 2d, p))``."""
    d = 1 << (_lg(p) - 1 - k)
    dst = np.arange(d, p, 2 * d)
    count = np.minimum(dst + d, p) - dst
    return Step.make(src=dst - d, dst=dst, src_slot=dst, dst_slot=dst, count=count)


@register(
    "broadcast",
    "binomial",
    cost_fn=_binomial_bcast_cost,
    reference="Thakur, Rabenseifner & Gropp 2005",
)
def binomial_broadcast(nranks: int) -> Schedule:
    r"""Binomial-tree broadcast (MPICH's short-message broadcast), one slot.

    In step ``k`` (of ``L = ⌈lg p⌉``) every rank ``r ≡ 0 (mod 2d)``, ``d = 2^{L-1-k}``, sends the
    whole vector to ``r + d`` when ``r + d < p``. The root sends in every step, so for every ``p``

    .. math:: T = \lceil \lg p \rceil\,(\alpha + n\beta)

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`chain_broadcast`, :func:`scatter_allgather_broadcast`,
        :func:`double_binary_tree_allreduce`, :func:`binomial_allreduce`

    Examples:
        >>> s = binomial_broadcast(6)
        >>> s.nsteps, s.ntransfers  # ⌈lg 6⌉ steps, every non-root receives once
        (3, 5)
    """
    p = nranks
    return lazy(
        "broadcast",
        p,
        _lg(p),
        lambda k: _binomial_bcast_step(p, k, 1),
        slot_units=1,
        algorithm="binomial",
        ntransfers_hint=p - 1,
        max_step_transfers_hint=p // 2,
    )


@register(
    "reduce",
    "binomial",
    cost_fn=_binomial_reduce_cost,
    reference="Thakur, Rabenseifner & Gropp 2005",
)
def binomial_reduce(nranks: int) -> Schedule:
    r"""Binomial-tree reduce (MPICH's short-message reduce), one slot.

    In step ``k`` (of ``⌈lg p⌉``) every rank ``r ≡ 2^k (mod 2^{k+1})`` adds its partial sum into
    ``r - 2^k``. The root receives in every step, each time from a rank that is ready no later than
    it, so for every ``p``

    .. math:: T = \lceil \lg p \rceil\,(\alpha + n\beta + n\gamma)

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`binomial_allreduce`, :func:`commsim.algorithms.recursive.rabenseifner_reduce`

    Examples:
        >>> s = binomial_reduce(6)
        >>> s.nsteps, s.ntransfers
        (3, 5)
    """
    p = nranks
    return lazy(
        "reduce",
        p,
        _lg(p),
        lambda k: _binomial_reduce_step(p, k, 1),
        slot_units=1,
        algorithm="binomial",
        ntransfers_hint=p - 1,
        max_step_transfers_hint=p // 2,
    )


@register(
    "allreduce",
    "binomial",
    cost_fn=_binomial_ar_cost,
    reference="Thakur, Rabenseifner & Gropp 2005",
)
def binomial_allreduce(nranks: int) -> Schedule:
    r"""Binomial reduce to rank 0, then binomial broadcast from it.

    The root finishes the reduce last, at :math:`\lceil\lg p\rceil(\alpha + n\beta + n\gamma)`, and
    then sends in every broadcast step, so for every ``p``

    .. math:: T = 2\lceil \lg p \rceil\,\alpha + 2\lceil \lg p \rceil\,n\beta
              + \lceil \lg p \rceil\,n\gamma

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`binomial_reduce`, :func:`commsim.algorithms.recursive.rabenseifner_reduce`,
        :func:`double_binary_tree_allreduce`, :func:`binomial_broadcast`

    Examples:
        >>> s = binomial_allreduce(5)
        >>> s.nsteps, s.ntransfers
        (6, 8)
    """
    return concat(
        binomial_reduce(nranks),
        binomial_broadcast(nranks),
        collective="allreduce",
        algorithm="binomial",
    )


# -- pipelined chain ----------------------------------------------------------------------------


@register(
    "broadcast",
    "chain",
    cost_fn=_chain_cost,
    reference="Sanders, Speck & Träff 2009",
)
def chain_broadcast(nranks: int, segments: int = 8) -> Schedule:
    r"""Pipelined chain broadcast: ``k = segments`` slots flow down ``0 → 1 → … → p-1``.

    In step ``s`` rank ``i`` sends segment ``s - i`` to rank ``i + 1`` (when ``0 ≤ s - i < k``);
    ``p + k - 2`` steps. Every message ``(i, j)`` (rank ``i``, segment ``j``) ends at
    ``(i + j + 1)(α + nβ/k)``, so for ``p ≥ 2`` (``T = 0`` for ``p = 1``)

    .. math:: T = (p+k-2)\left(\alpha + \frac{n}{k}\beta\right), \qquad k = \text{segments}

    References:
        Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and
        scan", Parallel Computing 35(12), 2009.

    See Also:
        :func:`binomial_broadcast`, :func:`scatter_allgather_broadcast`,
        :func:`double_binary_tree_allreduce`,
        :func:`commsim.algorithms.nccl.nccl_tree_allreduce`

    Examples:
        >>> s = chain_broadcast(5, segments=3)
        >>> s.nsteps, s.ntransfers  # p + k - 2 steps, (p - 1) k transfers
        (6, 12)
    """
    p, k = nranks, _check_segments(segments)

    def step(s: int) -> Step:
        i = np.arange(max(0, s - k + 1), min(s, p - 2) + 1)
        return Step.make(src=i, dst=i + 1, src_slot=s - i, dst_slot=s - i)

    return lazy(
        "broadcast",
        p,
        p + k - 2 if p > 1 else 0,
        step,
        slot_units=k,
        algorithm="chain",
        params={"segments": k},
        ntransfers_hint=(p - 1) * k,
        max_step_transfers_hint=min(p - 1, k),
    )


# -- scatter + allgather ------------------------------------------------------------------------


def _binomial_scatter(p: int) -> Schedule:
    """Root-0 binomial scatter of ``p`` one-slot blocks (block ``r`` ends at rank ``r``)."""
    return lazy(
        "broadcast",  # an intermediate: the caller's concat names the collective
        p,
        _lg(p),
        lambda k: _binomial_scatter_step(p, k),
        slot_units=p,
        algorithm="binomial_scatter",
        ntransfers_hint=p - 1,
        max_step_transfers_hint=p // 2,
    )


@register(
    "broadcast",
    "scatter_allgather",
    cost_fn=_scatter_allgather_cost,
    reference="Thakur, Rabenseifner & Gropp 2005 (van de Geijn)",
)
def scatter_allgather_broadcast(nranks: int) -> Schedule:
    r"""van de Geijn's long-message broadcast: binomial scatter of ``p`` blocks, ring allgather.

    The scatter's step ``k`` sends the receiver's whole subtree of blocks, so the root sends
    :math:`p - 1` blocks in :math:`\lceil\lg p\rceil` messages and is the last rank to finish the
    scatter (every other rank's sends are a subset of its parent's later ones), at
    :math:`\lceil\lg p\rceil\alpha + \frac{p-1}{p}n\beta`. In ring step ``s`` a rank can start
    once its neighbours within distance ``s + 1`` have, so after ``p - 1`` steps every rank has
    waited for the slowest one: for every ``p`` (powers of two or not)

    .. math:: T = (\lceil \lg p \rceil + p - 1)\,\alpha + 2\frac{p-1}{p}\,n\beta

    References:
        Barnett et al., "Interprocessor collective communication library (InterCom)", SHPCC 1994
        (van de Geijn's scatter-allgather broadcast).
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`binomial_broadcast`, :func:`chain_broadcast`,
        :func:`double_binary_tree_allreduce`

    Examples:
        >>> s = scatter_allgather_broadcast(6)
        >>> s.nsteps, s.ntransfers  # ⌈lg 6⌉ + 5 steps; 5 scatter + 30 ring transfers
        (8, 35)
    """
    return concat(
        _binomial_scatter(nranks),
        ring_allgather(nranks),
        collective="broadcast",
        algorithm="scatter_allgather",
    )


# -- double binary tree -----------------------------------------------------------------------


def _btree_parent(p: int) -> np.ndarray:
    """NCCL's in-order binary tree (``ncclGetBtree``): parent of every rank, ``-1`` at root 0.

    Rank ``r`` with lowest set bit ``b`` hangs below ``(r ^ b) | 2b``, or ``r ^ b`` when that is
    out of range; odd ranks are leaves, the root 0 has the single child ``2^(L-1)``.
    """
    r = np.arange(p)
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    up = np.where(up >= p, r ^ bit, up)
    up[0] = -1
    return up


def _double_tree(p: int) -> tuple[np.ndarray, np.ndarray]:
    """NCCL's two trees (``ncclGetDtree``): the in-order tree and, for even ``p``, its mirror
    ``r ↦ p-1-r`` or, for odd ``p``, its shift ``r ↦ r+1``. Leaves of one are interior in the other
    (odd ``p``: except rank 0, which has one child in each)."""
    par0 = _btree_parent(p)
    r = np.arange(p)
    if p % 2 == 0:
        q = par0[p - 1 - r]
        par1 = np.where(q < 0, -1, p - 1 - q)
    else:
        q = par0[(r - 1) % p]
        par1 = np.where(q < 0, -1, (q + 1) % p)
    return par0, par1


def _heights_depths(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Height of every rank's subtree (leaves 0) and its depth (root 0), one pass per level."""
    p = len(parent)
    v = np.flatnonzero(parent >= 0)
    height = np.zeros(p, dtype=np.int64)
    depth = np.zeros(p, dtype=np.int64)
    for _ in range(p):  # at most the tree height passes
        h = height.copy()
        np.maximum.at(h, parent[v], height[v] + 1)
        d = depth.copy()
        d[v] = depth[parent[v]] + 1
        if np.array_equal(h, height) and np.array_equal(d, depth):
            break
        height, depth = h, d
    return height, depth


def _two_colour(sender: np.ndarray, receiver: np.ndarray, first: list[int]) -> np.ndarray:
    """Colour the edges ``sender[e] → receiver[e]`` 0/1 so that no rank sends, or receives, two
    edges of one colour (König; every rank has at most two edges of each kind, so the edges sharing
    a rank form paths and even cycles, coloured alternately). Edges in ``first`` get colour 0
    unless an earlier one forces otherwise."""
    E = len(sender)

    def partner(ends: np.ndarray) -> np.ndarray:  # the other edge with the same end, or -1
        out = np.full(E, -1, dtype=np.int64)
        order = np.argsort(ends, kind="stable")
        same = ends[order[1:]] == ends[order[:-1]]
        a, b = order[:-1][same], order[1:][same]
        out[a], out[b] = b, a
        return out

    links = (partner(sender), partner(receiver))
    colour = np.full(E, -1, dtype=np.int64)
    for e0 in [*first, *range(E)]:  # build-time walk over edges, O(p)
        if colour[e0] >= 0:
            continue
        colour[e0] = 0
        for via in (0, 1):  # walk the path (or cycle) through e0 both ways
            e, kind = e0, via
            while True:
                f = int(links[kind][e])
                if f < 0 or colour[f] >= 0:
                    break
                colour[f] = 1 - colour[e]
                e, kind = f, 1 - kind
    return colour


def _dbt_edges(p: int) -> dict[str, np.ndarray]:
    """Edges of both trees (child → parent) with tree id, colour, child height and parent depth."""
    parents = _double_tree(p)
    child, parent, tree, height, depth = [], [], [], [], []
    for t, par in enumerate(parents):
        h, d = _heights_depths(par)
        v = np.flatnonzero(par >= 0)
        child.append(v)
        parent.append(par[v])
        tree.append(np.full(len(v), t, dtype=np.int64))
        height.append(h[v])
        depth.append(d[par[v]])
    e = {
        "child": np.concatenate(child),
        "parent": np.concatenate(parent),
        "tree": np.concatenate(tree),
        "height": np.concatenate(height),
        "pdepth": np.concatenate(depth),
    }
    roots = [int(np.flatnonzero(par < 0)[0]) for par in parents]
    first = [
        int(i) for t in (0, 1) for i in np.flatnonzero((e["tree"] == t) & (e["parent"] == roots[t]))
    ]
    e["colour"] = _two_colour(e["child"], e["parent"], first)
    return e


def _pipelined_phase(
    p: int,
    k: int,
    src: np.ndarray,
    dst: np.ndarray,
    slot0: np.ndarray,
    offset: np.ndarray,
    reduce: bool,
    name: str,
    nslots: int | None = None,
) -> Schedule:
    """Edge ``e`` carries segment ``j`` (slot ``slot0[e] + j``) at time ``offset[e] + 2j``; the
    occupied times, in order, are the steps (times no edge uses are dropped). ``nslots``:
    ``2k`` (both trees' halves) unless given."""
    times = (offset[:, None] + 2 * np.arange(k)[None, :]).ravel()
    used, per_step = np.unique(times, return_counts=True)

    def step(i: int) -> Step:
        j2 = used[i] - offset
        on = (j2 >= 0) & (j2 < 2 * k) & (j2 % 2 == 0)
        seg = j2[on] // 2
        n = int(on.sum())
        return Step.make(
            src[on], dst[on], slot0[on] + seg, slot0[on] + seg, reduce=np.full(n, reduce)
        )

    return lazy(
        "allreduce",
        p,
        len(used),
        step,
        slot_units=2 * k if nslots is None else nslots,
        algorithm=name,
        ntransfers_hint=len(times),
        max_step_transfers_hint=int(per_step.max(initial=0)),
    )


@register(
    "allreduce",
    "double_binary_tree",
    cost_fn=_dbt_cost,
    exact=_dbt_exact,
    constraints=(
        "p = 2: 2kα + nβ + nγ/2; exact for p = 3, 2^m "
        "(and p = 2^(m-1)+1, 3·2^(m-2) < p ≤ 2^m if k ≥ 2)"
    ),
    reference="Sanders, Speck & Träff 2009; NCCL double binary tree",
)
def double_binary_tree_allreduce(nranks: int, segments: int = 4) -> Schedule:
    r"""Double-binary-tree allreduce: pipelined reduce up two trees, then broadcast down them.

    The trees are NCCL's (``ncclGetDtree``): ``T_0`` is the in-order binary tree rooted at rank 0
    (odd ranks are its leaves, the root has one child ``2^{H-1}``), ``T_1`` its mirror image
    ``r ↦ p-1-r`` for even ``p`` or its shift ``r ↦ r+1`` for odd ``p``, so every rank is interior
    in at most one tree (odd ``p``: rank 0 has one child in each) and has at most two children in
    all. Both have height ``H = ⌈lg p⌉``. Tree ``t`` reduces and broadcasts half ``t`` of the
    vector, cut into ``k = segments`` slots of :math:`m = n/(2k)` bytes (``2k`` slots in all).

    The edges of both trees are 2-coloured (Sanders, Speck & Träff 2009: no rank sends two edges of
    one colour, nor receives two), and edge ``child → parent`` of colour ``c`` carries segment
    ``j`` at time ``2(j + height(child)) + c`` in the reduce and at ``2(j + depth(parent)) + c``
    in the broadcast (times no edge uses are skipped). So every step is a matching, in which each
    rank sends and receives at most one :math:`m`-byte message, and a rank forwards a segment in a
    later step than its children (its parent) sent it. The reduce and the broadcast are
    consecutive: the broadcast of a segment starts once its root has all ``k``.

    Cost. Let :math:`c = \alpha + m\beta`, :math:`g = m\gamma` and, for :math:`p \ge 3`,
    :math:`S = 2k + 2H - 3`. Every step is a matching, so it delays the latest clock by at most
    :math:`c + g` (reduce) or :math:`c` (broadcast). The two root edges are coloured 0 first, so the
    reduce uses at most ``S`` times, and so does the broadcast (its time 1 is unused: only the
    roots send at depth 0). Conversely, below the root's only child ``2^{H-1}`` of ``T_0`` hang the
    ranks ``1 … 2^{H-1}-1`` as a perfect binary tree, and a chain of messages through it (up, then
    back down) is busy in all but one step of each phase. Hence, for every :math:`p \ge 3`,

    .. math:: (S-1)\left(2\alpha + \frac{n}{k}\beta + \frac{n}{2k}\gamma\right) \le T
              \le S\left(2\alpha + \frac{n}{k}\beta + \frac{n}{2k}\gamma\right),
              \qquad S = 2k + 2\lceil \lg p \rceil - 3, \qquad k = \text{segments},

    with equality on the right for :math:`p = 2^H` (every :math:`k`; the whole of ``T_0`` below the
    root is perfect), for :math:`p = 3`, and, when :math:`k \ge 2`, for every
    :math:`3 \cdot 2^{H-2} < p \le 2^H` (checked for all such :math:`p \le 4096`) and for
    :math:`p = 2^{H-1} + 1` (checked up to 4097); elsewhere ``T`` can fall short of the right side
    by a part of one round (with :math:`k = 1` it reaches it at some other ``p`` too, e.g. 15 and
    27). :math:`p = 2` (one exchange per segment each way) takes exactly
    :math:`2k\alpha + n\beta + \frac{n}{2}\gamma`, and :math:`p = 1` nothing. The bandwidth term tends to the optimal :math:`2n\beta` as ``k`` grows,
    at the price of :math:`4k` latencies.

    References:
        Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and
        scan", Parallel Computing 35(12), 2009.
        NVIDIA NCCL 2.4: the double binary tree (``ncclGetBtree``, ``ncclGetDtree``).

    See Also:
        :func:`binomial_broadcast`, :func:`chain_broadcast`,
        :func:`scatter_allgather_broadcast`, :func:`binomial_allreduce`,
        :func:`commsim.algorithms.nccl.nccl_tree_allreduce`,
        :func:`double_binary_tree_channels` (a tree per channel)

    Examples:
        >>> s = double_binary_tree_allreduce(8, segments=4)
        >>> s.nsteps, s.ntransfers  # 2S steps, S = 2k + 2H - 3 = 11; 4(p-1)k transfers
        (22, 112)
    """
    p, k = nranks, _check_segments(segments)
    e = _dbt_edges(p)
    child, parent, slot0 = e["child"], e["parent"], e["tree"] * k
    up = _pipelined_phase(p, k, child, parent, slot0, 2 * e["height"] + e["colour"], True, "up")
    down = _pipelined_phase(
        p, k, parent, child, slot0, 2 * e["pdepth"] + e["colour"], False, "down"
    )
    return concat(
        up, down, collective="allreduce", algorithm="double_binary_tree", params={"segments": k}
    )


def _one_tree(p: int, k: int, t: int) -> Schedule:
    """Tree ``t`` of :func:`double_binary_tree_allreduce` alone, on the whole vector (``k``
    slots): its edges at the times they have there."""
    e = _dbt_edges(p)
    on = e["tree"] == t
    child, parent, colour = e["child"][on], e["parent"][on], e["colour"][on]
    zero = np.zeros(len(child), dtype=np.int64)
    up = _pipelined_phase(p, k, child, parent, zero, 2 * e["height"][on] + colour, True, "up", k)
    down = _pipelined_phase(
        p, k, parent, child, zero, 2 * e["pdepth"][on] + colour, False, "down", k
    )
    return concat(up, down, collective="allreduce", algorithm=f"tree{t}")


def _dbt_channels_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *, segments: int
) -> FloatOrArray:
    """The right side of :func:`double_binary_tree_channels`' first ``.. math::`` (its time on
    one link and on two for ``p = 2^H``; ``p = 2`` as :func:`_dbt_cost`), exact where
    :func:`_dbt_channels_exact` says."""
    return _dbt_cost(nranks, nbytes, alpha, beta, gamma, segments=segments)


def _dbt_channels_exact(nranks: int, *, segments: int) -> bool:
    """Where :func:`_dbt_cost` is the exact time of :func:`double_binary_tree_channels` on one
    link and on two: ``p ≤ 2`` and ``p = 2^H``.

    With :func:`_dbt_channels_cost`, the registry row the factory is ready for
    (``tests/test_dbt_channels.py`` registers it and runs the registry sweep's checks on it).
    """
    return nranks <= 2 or nranks & (nranks - 1) == 0


def double_binary_tree_channels(nranks: int, segments: int = 4) -> Schedule:
    r"""The double binary tree with each tree on a channel of its own (IR rule 6), as NCCL runs
    it: ``parallel(T_0, T_1)`` (:func:`commsim.algorithms.parallel`), tree ``t``
    reducing and broadcasting half ``t`` of the vector on channel ``t``.

    The trees, segments and per-edge times are those of :func:`double_binary_tree_allreduce`;
    only the one port the trees shared becomes a port per tree. Each tree alone still sends one
    message of :math:`m = n/(2k)` bytes per edge and step, so for :math:`p = 2^H \ge 4`, on one
    link (the channels take turns) and on two independent links
    (:class:`commsim.models.Hockney` ``links=2``, a tree per link) alike,

    .. math:: T = S\left(2\alpha + \frac{n}{k}\beta + \frac{n}{2k}\gamma\right),
              \qquad S = 2k + 2\lceil \lg p \rceil - 3, \qquad k = \text{segments},

    and :math:`p = 2` takes :math:`2k\alpha + n\beta + \frac{n}{2}\gamma` (checked for
    :math:`p \le 128` and every :math:`k` the registry sweeps). For every :math:`p \ge 3`, two
    links give

    .. math:: T_{\text{links}=2} \le S\left(2\alpha + \frac{n}{k}\beta
              + \frac{n}{2k}\gamma\right),

    never more than the one-port tree's time on one link, and less where the two trees'
    colours made one wait for the other on the shared port (:math:`p = 3`,
    :math:`p = 2^{H-1} + 1`, ...). Two links buy no more: at an interior rank the binary fan-in (two receives per
    segment) holds each tree to one segment every two steps, which is why the two trees fit one
    full-duplex port in the first place (Sanders, Speck & Träff 2009).

    References:
        Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and
        scan", Parallel Computing 35(12), 2009.
        NVIDIA NCCL 2.4: the double binary tree, each tree on its own channels.

    See Also:
        :func:`double_binary_tree_allreduce` (both trees on one port),
        :func:`commsim.algorithms.parallel`

    Examples:
        >>> s = double_binary_tree_channels(8, segments=4)
        >>> s.nchannels, s.nslots, s.ntransfers  # both trees' 4(p-1)k transfers, on 2k slots
        (2, 8, 112)
    """
    p, k = nranks, _check_segments(segments)
    if p == 1:  # nothing moves: one (unused) channel, the 2k slots of the general case
        return dataclasses.replace(
            double_binary_tree_allreduce(1, k), algorithm="double_binary_tree_channels"
        )
    return parallel(
        _one_tree(p, k, 0),
        _one_tree(p, k, 1),
        algorithm="double_binary_tree_channels",
        params={"segments": k},
    )
