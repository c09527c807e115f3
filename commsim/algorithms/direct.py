r"""Direct and pairwise-exchange algorithms: every rank talks to every other rank directly.

* **Direct**: one step in which every rank sends all its messages at once. Under the single-port
  model a rank's ``p - 1`` messages still go one after another (the model splits the step into
  ``p - 1`` shift rounds, ``r → r + 1``, then ``r → r + 2``, …), so a direct algorithm costs what
  its pairwise counterpart does; it differs under a multi-port model and in how executors issue
  it.
* **Pairwise exchange** (Thakur, Rabenseifner & Gropp, "Optimization of collective communication
  operations in MPICH", IJHPCA 19(1), 2005, §3–4): ``p - 1`` steps; in step ``k`` rank ``r``
  sends to ``r + k`` and receives from ``r - k`` (mod ``p``), for any ``p`` (MPICH's alltoall
  pairs ``r`` with ``r xor k`` instead when ``p`` is a power of two, which costs the same
  here).

Layouts are those of :mod:`commsim._collectives` with one slot per block: reduce-scatter and
allgather have ``p`` slots (block ``r`` belongs to rank ``r``), alltoall ``2p`` (input blocks, then
output blocks). ``n`` is the collective's ``nbytes``, so every message carries one block of ``n/p``.
"""

from __future__ import annotations

import weakref

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms._combinators import concat, lazy
from commsim.algorithms._registry import register
from commsim.algorithms.ring import _ring_ag_cost, _ring_ar_cost, _ring_rs_cost

__all__ = [
    "direct_allgather",
    "direct_allreduce",
    "direct_alltoall",
    "direct_reduce_scatter",
    "pairwise_alltoall",
    "pairwise_reduce_scatter",
]


#: the arrays of :func:`_all_pairs` while a step still holds them (weakly: never kept alive)
_pairs: weakref.WeakValueDictionary[tuple[int, str], np.ndarray] = weakref.WeakValueDictionary()


def _all_pairs(p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Senders and receivers of every ordered pair ``r → r + k``, ``k = 1 … p-1``, by shift,
    and a count of one for each. While a step still holds the arrays of the last call with this
    ``p``, they are handed out again (a direct allreduce's allgather step is built while its
    reduce-scatter step is in use: 3 × p(p - 1) entries, 0.5 s at p = 4096, not made twice);
    steps are read-only, so sharing them is safe."""
    got = [_pairs.get((p, k)) for k in ("src", "dst", "count")]
    if all(a is not None for a in got):
        return got[0], got[1], got[2]  # type: ignore[return-value]
    r = np.arange(p)
    src = np.broadcast_to(r, (p - 1, p)).ravel()  # row k - 1: every rank
    twice = np.concatenate([r, r])  # row k - 1 of the windows: (r + k) mod p, no arithmetic
    dst = np.lib.stride_tricks.sliding_window_view(twice, p)[1:p].ravel()
    count = np.ones(len(src), dtype=np.int64)
    for k, a in (("src", src), ("dst", dst), ("count", count)):
        _pairs[(p, k)] = a
    return src, dst, count


def _shift_pairs(p: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    r = np.arange(p)
    return r, (r + k) % p


# Every algorithm here sends, and receives, one n/p block per round in p - 1 rounds, all ranks in
# lockstep: the ring's times (ring.py), which the docstrings below write per round.
_blocks_cost = _ring_ag_cost
_reduced_blocks_cost = _ring_rs_cost
_allreduce_cost = _ring_ar_cost


@register(
    "reduce_scatter",
    "direct",
    cost_fn=_reduced_blocks_cost,
    reference="Thakur, Rabenseifner & Gropp 2005",
)
def direct_reduce_scatter(nranks: int) -> Schedule:
    r"""Direct reduce-scatter: in one step every rank adds its block ``j`` into rank ``j``.

    Single-port: each rank sends ``p - 1`` blocks and receives (and reduces) ``p - 1``, one round
    at a time, all ranks in lockstep, so

    .. math:: T = (p-1)\left(\alpha + \frac{n}{p}\beta + \frac{n}{p}\gamma\right)

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`commsim.algorithms.ring.ring_reduce_scatter`, :func:`pairwise_reduce_scatter`,
        :func:`commsim.algorithms.recursive.recursive_halving_reduce_scatter`,
        :func:`commsim.algorithms.torus.torus_reduce_scatter`,
        :func:`commsim.algorithms.hierarchical.hierarchical_reduce_scatter`,
        :func:`direct_allreduce`, :func:`direct_allgather`

    Examples:
        >>> s = direct_reduce_scatter(4)
        >>> s.nsteps, s.ntransfers
        (1, 12)
    """
    p = nranks

    def step(_: int) -> Step:
        src, dst, count = _all_pairs(p)
        return Step.make(src, dst, dst, dst, count, reduce=np.ones(len(src), dtype=bool))

    return lazy(
        "reduce_scatter",
        p,
        1 if p > 1 else 0,
        step,
        slot_units=p,
        algorithm="direct",
        ntransfers_hint=p * (p - 1),
        max_step_transfers_hint=p * (p - 1),
    )


@register(
    "reduce_scatter",
    "pairwise",
    cost_fn=_reduced_blocks_cost,
    reference="Thakur, Rabenseifner & Gropp 2005",
)
def pairwise_reduce_scatter(nranks: int) -> Schedule:
    r"""Pairwise-exchange reduce-scatter: in step ``k = 1 … p-1`` rank ``r`` adds its block
    ``r + k`` into rank ``r + k`` (and receives block ``r`` from ``r - k``).

    Every step is one perfect matching of ``n/p``-byte reducing messages, so for every ``p``

    .. math:: T = (p-1)\,\alpha + \frac{p-1}{p}\,n\beta + \frac{p-1}{p}\,n\gamma

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`commsim.algorithms.ring.ring_reduce_scatter`, :func:`direct_reduce_scatter`,
        :func:`commsim.algorithms.recursive.recursive_halving_reduce_scatter`,
        :func:`commsim.algorithms.torus.torus_reduce_scatter`,
        :func:`commsim.algorithms.hierarchical.hierarchical_reduce_scatter`

    Examples:
        >>> s = pairwise_reduce_scatter(5)
        >>> s.nsteps, s.ntransfers
        (4, 20)
    """
    p = nranks

    def step(i: int) -> Step:
        src, dst = _shift_pairs(p, i + 1)
        return Step.make(src, dst, dst, dst, reduce=np.ones(p, dtype=bool))

    return lazy(
        "reduce_scatter",
        p,
        p - 1,
        step,
        slot_units=p,
        algorithm="pairwise",
        ntransfers_hint=p * (p - 1),
        max_step_transfers_hint=p if p > 1 else 0,
    )


@register(
    "allgather",
    "direct",
    cost_fn=_blocks_cost,
    reference="Thakur, Rabenseifner & Gropp 2005",
)
def direct_allgather(nranks: int) -> Schedule:
    r"""Direct allgather: in one step every rank sends its block to every other rank.

    Single-port: ``p - 1`` rounds of ``n/p``-byte messages, so

    .. math:: T = (p-1)\left(\alpha + \frac{n}{p}\beta\right)

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`commsim.algorithms.ring.ring_allgather`,
        :func:`commsim.algorithms.bruck.bruck_allgather`,
        :func:`commsim.algorithms.recursive.recursive_doubling_allgather`,
        :func:`commsim.algorithms.torus.torus_allgather`,
        :func:`commsim.algorithms.hierarchical.hierarchical_allgather`,
        :func:`direct_allreduce`, :func:`direct_reduce_scatter`

    Examples:
        >>> s = direct_allgather(4)
        >>> s.nsteps, s.ntransfers
        (1, 12)
    """
    p = nranks

    def step(_: int) -> Step:
        src, dst, count = _all_pairs(p)
        return Step.make(src, dst, src, src, count)

    return lazy(
        "allgather",
        p,
        1 if p > 1 else 0,
        step,
        slot_units=p,
        algorithm="direct",
        ntransfers_hint=p * (p - 1),
        max_step_transfers_hint=p * (p - 1),
    )


@register(
    "allreduce",
    "direct",
    cost_fn=_allreduce_cost,
    reference="Thakur, Rabenseifner & Gropp 2005",
)
def direct_allreduce(nranks: int) -> Schedule:
    r"""Direct reduce-scatter, then direct allgather, on ``p`` blocks (two steps).

    All ranks finish the reduce-scatter together, so the costs add:

    .. math:: T = 2(p-1)\,\alpha + 2\frac{p-1}{p}\,n\beta + \frac{p-1}{p}\,n\gamma

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`commsim.algorithms.ring.ring_allreduce`,
        :func:`commsim.algorithms.nccl.snake_ring_allreduce`,
        :func:`commsim.algorithms.torus.torus_allreduce`, :func:`direct_reduce_scatter`,
        :func:`direct_allgather`,
        :func:`commsim.algorithms.parameter_server.parameter_server_allreduce`

    Examples:
        >>> s = direct_allreduce(4)
        >>> s.nsteps, s.ntransfers
        (2, 24)
    """
    return concat(
        direct_reduce_scatter(nranks),
        direct_allgather(nranks),
        collective="allreduce",
        algorithm="direct",
    )


def _own_block_copy(p: int) -> Step:
    """Every rank copies its own input block ``r`` to its output block ``r`` (local: free)."""
    r = np.arange(p)
    return Step.make(r, r, r, p + r)


@register(
    "alltoall",
    "pairwise",
    cost_fn=_blocks_cost,
    reference="Thakur, Rabenseifner & Gropp 2005",
)
def pairwise_alltoall(nranks: int) -> Schedule:
    r"""Pairwise-exchange alltoall: in step ``k = 1 … p-1`` rank ``r`` sends input block ``r + k``
    to rank ``r + k``, which stores it as output block ``r``; the own block is copied locally
    (free) in the first step.

    Every step is one perfect matching of ``n/p``-byte messages (``n`` = a rank's send buffer):

    .. math:: T = (p-1)\left(\alpha + \frac{n}{p}\beta\right)

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`direct_alltoall`, :func:`commsim.algorithms.bruck.bruck_alltoall`,
        :func:`commsim.algorithms.hierarchical.hierarchical_alltoall`

    Examples:
        >>> s = pairwise_alltoall(4)
        >>> s.nsteps, s.ntransfers  # p - 1 steps; p(p-1) messages + p local copies
        (3, 16)
    """
    p = nranks

    def step(i: int) -> Step:
        src, dst = _shift_pairs(p, i + 1)
        msgs = Step.make(src, dst, dst, p + src) if p > 1 else Step.empty()
        return Step.cat([_own_block_copy(p), msgs]) if i == 0 else msgs

    return lazy(
        "alltoall",
        p,
        max(p - 1, 1),
        step,
        slot_units=2 * p,
        algorithm="pairwise",
        ntransfers_hint=p * p,
        max_step_transfers_hint=2 * p if p > 1 else 1,
    )


@register(
    "alltoall",
    "direct",
    cost_fn=_blocks_cost,
    reference="Thakur, Rabenseifner & Gropp 2005",
)
def direct_alltoall(nranks: int) -> Schedule:
    r"""Direct alltoall: in one step every rank sends input block ``q`` to rank ``q`` (output block
    ``r`` there) for all ``q ≠ r``, and copies its own block locally.

    Single-port: ``p - 1`` rounds of ``n/p``-byte messages, so

    .. math:: T = (p-1)\left(\alpha + \frac{n}{p}\beta\right)

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`pairwise_alltoall`, :func:`commsim.algorithms.bruck.bruck_alltoall`,
        :func:`commsim.algorithms.hierarchical.hierarchical_alltoall`

    Examples:
        >>> s = direct_alltoall(4)
        >>> s.nsteps, s.ntransfers
        (1, 16)
    """
    p = nranks

    def step(_: int) -> Step:
        src, dst, count = _all_pairs(p)
        msgs = Step.make(src, dst, dst, p + src, count) if p > 1 else Step.empty()
        return Step.cat([_own_block_copy(p), msgs])

    return lazy(
        "alltoall",
        p,
        1,
        step,
        slot_units=2 * p,
        algorithm="direct",
        ntransfers_hint=p * p,
        max_step_transfers_hint=p * p,
    )
