r"""Ring algorithms: reduce-scatter, allgather, and allreduce as their concatenation.

Every rank ``r`` sends only to ``r + 1`` and receives only from ``r - 1`` (mod ``p``), so each step
is one perfect matching and the ring is bandwidth-optimal for any ``p``, at the price of ``p - 1``
latencies per phase. References: Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for
clusters of workstations", JPDC 69(2), 2009; Thakur, Rabenseifner & Gropp, "Optimization of
collective communication operations in MPICH", IJHPCA 19(1), 2005 (ring allgather).
"""

from __future__ import annotations

import numpy as np

from commsim._ir import Schedule, Step, share_between_steps
from commsim.algorithms._combinators import concat, lazy
from commsim.algorithms._registry import FloatOrArray, register

__all__ = ["ring_allgather", "ring_allreduce", "ring_reduce_scatter"]


def _ring_steps(p: int, first_shift: int, reduce: bool):
    """Step function: in step ``s`` rank ``r`` sends block ``(r - s - first_shift) mod p`` to ``r + 1``.

    The rank, neighbour, count and reduce arrays are shared by all steps, and declared so
    (:func:`commsim._ir.share_between_steps`: a model may check the permutation they form once),
    as is the array whose slices are the steps' blocks (their range is known once).
    """
    r = np.arange(p)
    nxt = (r + 1) % p
    ones = np.ones(p, dtype=np.int64)
    red = np.full(p, reduce)
    twice = np.concatenate([r, r])  # twice[p - k + r] = (r - k) mod p: each step's blocks, a view
    share_between_steps(r, nxt, ones, red, twice)

    def step(s: int) -> Step:
        k = (s + first_shift) % p  # block = (r - k) mod p, without a modulo over p elements
        block = twice[p - k : 2 * p - k]
        return Step(r, nxt, block, block, ones, red)

    return step


def _ring_rs_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float
) -> FloatOrArray:
    """The single-port Hockney time of :func:`ring_reduce_scatter` (its ``.. math::``), exact for
    every ``p``."""
    p = nranks
    return (p - 1) * alpha + (p - 1) / p * nbytes * (beta + gamma)


def _ring_ag_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float
) -> FloatOrArray:
    """The single-port Hockney time of :func:`ring_allgather` (its ``.. math::``), exact for every
    ``p``."""
    p = nranks
    return (p - 1) * alpha + (p - 1) / p * nbytes * beta


def _ring_ar_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float
) -> FloatOrArray:
    """The single-port Hockney time of :func:`ring_allreduce` (its ``.. math::``), exact for every
    ``p``."""
    p = nranks
    return 2 * (p - 1) * alpha + (p - 1) / p * nbytes * (2 * beta + gamma)


@register(
    "reduce_scatter",
    "ring",
    cost_fn=_ring_rs_cost,
    reference="Patarasuk & Yuan 2009",
)
def ring_reduce_scatter(nranks: int) -> Schedule:
    r"""Ring reduce-scatter: ``p - 1`` steps, in step ``s`` rank ``r`` adds block ``r - s - 1`` into ``r + 1``.

    .. math:: T = (p-1)\,\alpha + \frac{p-1}{p}\,n\beta + \frac{p-1}{p}\,n\gamma

    References:
        Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
        workstations", JPDC 69(2), 2009.

    See Also:
        :func:`commsim.algorithms.direct.direct_reduce_scatter`,
        :func:`commsim.algorithms.direct.pairwise_reduce_scatter`,
        :func:`commsim.algorithms.recursive.recursive_halving_reduce_scatter`,
        :func:`commsim.algorithms.torus.torus_reduce_scatter`,
        :func:`commsim.algorithms.hierarchical.hierarchical_reduce_scatter`,
        :func:`ring_allreduce`, :func:`ring_allgather`,
        :func:`commsim.algorithms.packed_rings.packed_rings_reduce_scatter`

    Examples:
        >>> s = ring_reduce_scatter(4)
        >>> s.nsteps, s.ntransfers, s.nslots
        (3, 12, 4)
    """
    p = nranks
    return lazy(
        "reduce_scatter",
        p,
        p - 1,
        _ring_steps(p, 1, True),
        slot_units=p,
        algorithm="ring",
        ntransfers_hint=p * (p - 1),
        max_step_transfers_hint=p if p > 1 else 0,
    )


@register(
    "allgather",
    "ring",
    cost_fn=_ring_ag_cost,
    reference="Thakur, Rabenseifner & Gropp 2005",
)
def ring_allgather(nranks: int) -> Schedule:
    r"""Ring allgather: ``p - 1`` steps, in step ``s`` rank ``r`` forwards block ``r - s`` to ``r + 1``.

    .. math:: T = (p-1)\,\alpha + \frac{p-1}{p}\,n\beta

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`commsim.algorithms.direct.direct_allgather`,
        :func:`commsim.algorithms.bruck.bruck_allgather`,
        :func:`commsim.algorithms.recursive.recursive_doubling_allgather`,
        :func:`commsim.algorithms.torus.torus_allgather`,
        :func:`commsim.algorithms.hierarchical.hierarchical_allgather`, :func:`ring_allreduce`,
        :func:`ring_reduce_scatter`,
        :func:`commsim.algorithms.packed_rings.packed_rings_allgather`

    Examples:
        >>> s = ring_allgather(5)
        >>> s.nsteps, s.ntransfers
        (4, 20)
    """
    p = nranks
    return lazy(
        "allgather",
        p,
        p - 1,
        _ring_steps(p, 0, False),
        slot_units=p,
        algorithm="ring",
        ntransfers_hint=p * (p - 1),
        max_step_transfers_hint=p if p > 1 else 0,
    )


@register(
    "allreduce",
    "ring",
    cost_fn=_ring_ar_cost,
    reference="Patarasuk & Yuan 2009",
)
def ring_allreduce(nranks: int) -> Schedule:
    r"""Ring allreduce = ring reduce-scatter followed by ring allgather, on ``p`` blocks.

    .. math:: T = 2(p-1)\,\alpha + 2\frac{p-1}{p}\,n\beta + \frac{p-1}{p}\,n\gamma

    References:
        Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
        workstations", JPDC 69(2), 2009.

    See Also:
        :func:`commsim.algorithms.direct.direct_allreduce`,
        :func:`commsim.algorithms.nccl.snake_ring_allreduce`,
        :func:`commsim.algorithms.torus.torus_allreduce`, :func:`ring_reduce_scatter`,
        :func:`ring_allgather`,
        :func:`commsim.algorithms.packed_rings.packed_rings_allreduce`,
        :func:`commsim.algorithms.parameter_server.parameter_server_allreduce`

    Examples:
        >>> s = ring_allreduce(4)
        >>> s.nsteps, s.ntransfers  # 2(p-1) steps, 2p(p-1) transfers
        (6, 24)
    """
    return concat(
        ring_reduce_scatter(nranks),
        ring_allgather(nranks),
        collective="allreduce",
        algorithm="ring",
    )
