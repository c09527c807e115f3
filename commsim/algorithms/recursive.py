r"""Recursive halving and doubling: reduce-scatter, allgather, allreduce, Rabenseifner, reduce.

On ``p' = 2^L`` ranks every step pairs rank ``v`` with ``v xor h``: **recursive halving**
(``h = p'/2, p'/4, ..., 1``) halves the blocks a rank is responsible for and reduces the half it
keeps; **recursive doubling** (``h = 1, 2, ..., p'/2``) doubles the blocks a rank holds.
Rabenseifner's allreduce is literally halving reduce-scatter followed by doubling allgather
(:func:`commsim.algorithms.concat`), and his reduce is halving followed by a binomial gather.

The cores are written once, over **virtual ranks with block boundaries**: virtual rank ``v`` owns
the slot range ``[bounds[v], bounds[v+1])`` and a step sends the range of a whole aligned group of
virtual ranks, so one code path serves equal blocks and the 1-or-2-block virtual ranks below.

**Non-powers of two** (``p = p' + r``, ``0 < r < p'``) use the MPICH fold (Thakur, Rabenseifner &
Gropp 2005): the first ``2r`` ranks pair up, the even rank ``2i`` sends its data to ``2i + 1`` (for
reduce, the odd one sends to the even one, so that root 0 stays in the core), the core runs on the
``p'`` remaining virtual ranks (virtual ``v < r`` is real ``2v + 1``, standing for blocks ``2v``
and ``2v + 1``; virtual ``v >= r`` is real ``v + r``), and a last step (none for reduce) hands the
even ranks their result. The fold costs two latencies (one for reduce) and at most
:math:`2n\beta + n\gamma` more than the core on ``p'`` ranks, except for the reduce-scatter, whose
halving steps also carry the extra blocks: up to :math:`1.5n\beta` (at ``p = 3``) and just under
:math:`1.4n\gamma` more. Each factory states its exact time.

Against the lower bounds of Chan et al. 2007 (:func:`commsim.models.lower_bound`): for powers of
two, halving reduce-scatter and doubling allgather attain them exactly, Rabenseifner's allreduce
attains the :math:`\beta` and :math:`\gamma` terms but pays ``2 lg p`` latencies where ``lg p``
suffice, and Rabenseifner's reduce attains :math:`\gamma` only (``2 lg p·α + 2(p-1)/p·nβ`` against
``lg p·α + nβ``); the fold puts every non-power of two above the bounds.

References: Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 19(1), 2005; Rabenseifner, "Optimization of collective reduction operations", ICCS
2004; Chan, Heimlich, Purkayastha & van de Geijn, "Collective communication: theory, practice, and
experience", CCPE 19(13), 2007.

**Exchange order.** The allreduces and the reduce take ``order = "far_first" | "near_first"``:
whether the first exchange pairs ``v`` with its farthest partner ``v xor p'/2`` or its nearest
``v xor 1``. Under Hockney (one port, no topology) every order costs the same, so the ``.. math::``
of each factory holds for both; on a network the order decides which links carry the big messages.
Rabenseifner's halving sends ``n/2`` in its first step and its doubling ``n/2`` in its last, so
``far_first`` (halving ``p'/2, ..., 1``, doubling ``1, ..., p'/2``) puts them between ranks
``p'/2`` apart, across the top of a tree, while ``near_first`` (MPICH's order, Thakur, Rabenseifner
& Gropp 2005) keeps them between neighbours and sends only the small messages far. Near-first
halving leaves rank ``v`` with block ``rev(v)`` (``v``'s ``L`` bits reversed): contiguous ranges
throughout, and the doubling (or the gather), run in the mirrored order, gathers them back. The
stand-alone reduce-scatter and allgather keep one order (far-first halving, near-first doubling):
the other one would end (or start) with rank ``v`` holding block ``rev(v)``, not its own.

In the formulas below ``p' = 2^L`` is the largest power of two ``<= p``, ``r = p - p'`` and
:math:`S = \sum_{k=0}^{L-1} \min(r, 2^k)` (the extra blocks of the largest group in each step).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms._combinators import concat, lazy, relabel
from commsim.algorithms._registry import FloatOrArray, register
from commsim.errors import ParameterError

__all__ = [
    "ORDERS",
    "rabenseifner_allreduce",
    "rabenseifner_reduce",
    "recursive_doubling_allgather",
    "recursive_doubling_allreduce",
    "recursive_halving_reduce_scatter",
]

StepFn = Callable[[int], Step]

#: the exchange orders of the allreduces and the reduce (module docstring, "Exchange order")
ORDERS = ("far_first", "near_first")


def _near(order: str, where: str) -> bool:
    """Whether ``order`` is ``"near_first"`` (one-line :class:`ParameterError` if neither)."""
    if order not in ORDERS:
        raise ParameterError(f"{where}: order must be one of {', '.join(ORDERS)}, got {order!r}")
    return order == "near_first"


def _reversed_bits(v: np.ndarray, nbits: int) -> np.ndarray:
    """``v``'s low ``nbits`` bits in reverse order (one pass per bit, never per rank)."""
    out = np.zeros_like(v)
    for b in range(nbits):
        out |= ((v >> b) & 1) << (nbits - 1 - b)
    return out


def _groups(pv: int, bounds: np.ndarray, near: bool) -> Callable[[np.ndarray, int], np.ndarray]:
    """``group(u, m)``: the slot range ``[start, end)`` (two rows) that virtual rank ``u`` holds
    after ``m`` halving steps: the ``p'/2^m`` blocks of its aligned group ``u >> (L-m)``
    (far-first), or of group ``rev_m(u mod 2^m)`` (near-first: the low bits decide first)."""
    L = pv.bit_length() - 1

    def group(u: np.ndarray, m: int) -> np.ndarray:
        key = _reversed_bits(u & ((1 << m) - 1), m) if near else u >> (L - m)
        size = 1 << (L - m)
        return np.stack([bounds[key * size], bounds[(key + 1) * size]])

    return group


# -- cores on p' = 2^L virtual ranks ------------------------------------------------------------
def _halving(pv: int, bounds: np.ndarray, near: bool = False) -> StepFn:
    """Step ``k``: ``v`` adds the half that its partner keeps into it; the partner is
    ``v xor p'/2^(k+1)`` (far-first) or ``v xor 2^k`` (near-first)."""
    v = np.arange(pv)
    group = _groups(pv, bounds, near)

    def step(k: int) -> Step:
        partner = v ^ ((1 << k) if near else pv >> (k + 1))
        start, end = group(partner, k + 1)  # the half the partner keeps
        return Step.make(v, partner, start, start, end - start, reduce=True)

    return step


def _doubling(pv: int, bounds: np.ndarray, near: bool = True) -> StepFn:
    """Step ``k``: ``v`` sends its ``2^k`` blocks to ``v xor 2^k`` (near-first, aligned groups) or
    to ``v xor p'/2^(k+1)`` (far-first, the mirror of near-first halving)."""
    v = np.arange(pv)
    group = _groups(pv, bounds, not near)
    L = pv.bit_length() - 1

    def step(k: int) -> Step:
        start, end = group(v, L - k)
        return Step.make(v, v ^ ((1 << k) if near else pv >> (k + 1)), start, start, end - start)

    return step


def _gather(pv: int, bounds: np.ndarray, near: bool = False) -> StepFn:
    """Binomial gather to 0 of what halving left: in step ``k``, ``v = 2^k mod 2^(k+1)`` sends
    its ``2^k`` blocks to ``v - 2^k`` (after far-first halving), or ``v`` in ``[h, 2h)`` sends to
    ``v - h`` for ``h = p'/2^(k+1)`` (after near-first halving, whose groups it merges back)."""
    group = _groups(pv, bounds, near)
    L = pv.bit_length() - 1

    def step(k: int) -> Step:
        h = pv >> (k + 1) if near else 1 << k
        v = np.arange(h, 2 * h) if near else np.arange(h, pv, 2 * h)
        start, end = group(v, L - k)
        return Step.make(v, v - h, start, start, end - start)

    return step


def _core(
    collective: str, pv: int, step_fn: StepFn, nslots: int, algorithm: str, gather: bool = False
) -> Schedule:
    """A ``lg p'``-step core on ``p'`` virtual ranks (``p'`` transfers a step; gather fewer)."""
    nsteps = pv.bit_length() - 1
    return lazy(
        collective,
        pv,
        nsteps,
        step_fn,
        slot_units=nslots,
        algorithm=algorithm,
        ntransfers_hint=pv - 1 if gather else pv * nsteps,
        max_step_transfers_hint=(pv // 2 if gather else pv) if nsteps else 0,
    )


def _bounds(pv: int, r: int) -> np.ndarray:
    """Slot boundaries of the virtual ranks: ``v < r`` owns blocks ``2v, 2v+1``, others one."""
    v = np.arange(pv + 1)
    return v + np.minimum(v, r)


# -- the fold for non-powers of two -------------------------------------------------------------
class _Folding(NamedTuple):
    """``p = p' + r``: ``extra[i]`` -> ``keep[i]``; virtual ``v`` is ``rank_map[v]``."""

    nranks: int
    pv: int
    extra: np.ndarray
    keep: np.ndarray
    rank_map: np.ndarray


def _folding(p: int, *, into_odd: bool = True) -> _Folding:
    pv = 1 << (p.bit_length() - 1)
    i = np.arange(p - pv)
    extra, keep = (2 * i, 2 * i + 1) if into_odd else (2 * i + 1, 2 * i)
    return _Folding(p, pv, extra, keep, np.concatenate([keep, np.arange(2 * len(i), p)]))


def _fold(
    core: Schedule,
    f: _Folding,
    *,
    fold_in: Callable[[], Step],
    fold_out: Callable[[], Step] | None,
    collective: str,
    algorithm: str,
) -> Schedule:
    """``fold_in()``, then ``core`` placed on the virtual ranks' real ranks, then ``fold_out()``.

    The edge steps are thunks: they are only built when ``p`` is not a power of two.
    """
    if f.pv == f.nranks:
        return dataclasses.replace(core, collective=collective, algorithm=algorithm)
    placed = relabel(core, f.rank_map, f.nranks, collective=collective)
    edges = [fold_in()] + ([fold_out()] if fold_out is not None else [])
    one = [
        Schedule.from_steps([s], collective=collective, nranks=f.nranks, slot_units=core.slot_units)
        for s in edges
    ]
    return concat(one[0], placed, *one[1:], collective=collective, algorithm=algorithm)


def _whole(src: np.ndarray, dst: np.ndarray, nslots: int, reduce: bool) -> Step:
    return Step.make(src, dst, 0, 0, nslots, reduce=reduce)


# -- exact costs (each factory's ``.. math::``, powers of two first) ------------------------------
def _fold_sizes(p: int) -> tuple[int, int, int, int]:
    """``p' = 2^L <= p``, ``r = p - p'``, ``L`` and ``S = Σ_{k<L} min(r, 2^k)`` (module docstring)."""
    pv = 1 << (p.bit_length() - 1)
    r, L = p - pv, pv.bit_length() - 1
    return pv, r, L, sum(min(r, 1 << k) for k in range(L))


def _halving_rs_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float
) -> FloatOrArray:
    """The single-port Hockney time of :func:`recursive_halving_reduce_scatter` (its
    ``.. math::``, both cases), exact for every ``p``."""
    p, n = nranks, nbytes
    pv, r, L, S = _fold_sizes(p)
    if r == 0:
        return L * alpha + (p - 1) / p * n * (beta + gamma)
    return (L + 2) * alpha + (n + (pv - 1 + S) * n / p) * (beta + gamma) + n / p * beta


def _doubling_ag_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float
) -> FloatOrArray:
    """The single-port Hockney time of :func:`recursive_doubling_allgather` (its
    ``.. math::``, both cases), exact for every ``p``."""
    p, n = nranks, nbytes
    pv, r, L, S = _fold_sizes(p)
    if r == 0:
        return L * alpha + (p - 1) / p * n * beta
    return (L + 2) * alpha + (p + pv - 1 + S) * n / p * beta


def _doubling_ar_cost(
    nranks: int,
    nbytes: FloatOrArray,
    alpha: float,
    beta: float,
    gamma: float,
    order: str = "near_first",
) -> FloatOrArray:
    """The single-port Hockney time of :func:`recursive_doubling_allreduce` (its
    ``.. math::``, both cases), exact for every ``p`` and both orders."""
    n = nbytes
    _, r, L, _ = _fold_sizes(nranks)
    if r == 0:
        return L * (alpha + n * beta + n * gamma)
    return (L + 2) * (alpha + n * beta) + (L + 1) * n * gamma


def _rabenseifner_cost(
    nranks: int,
    nbytes: FloatOrArray,
    alpha: float,
    beta: float,
    gamma: float,
    order: str = "far_first",
    *,
    unfold: int,
) -> FloatOrArray:
    """The single-port Hockney time of :func:`rabenseifner_allreduce` (``unfold = 1``) and of
    :func:`rabenseifner_reduce` (``0``: no last step), their ``.. math::``, exact for every ``p``
    and both orders."""
    n, u = nbytes, unfold
    pv, r, L, _ = _fold_sizes(nranks)
    f = (pv - 1) / pv  # (p-1)/p when p = p'
    if r == 0:
        return 2 * L * alpha + 2 * f * n * beta + f * n * gamma
    return (2 * L + 1 + u) * alpha + (1 + u + 2 * f) * n * beta + (1 + f) * n * gamma


# -- the algorithms -----------------------------------------------------------------------------
@register(
    "reduce_scatter",
    "recursive_halving",
    cost_fn=_halving_rs_cost,
    constraints="any p; non-powers of two fold r = p - p' ranks in and out (2 more steps)",
    reference="Thakur, Rabenseifner & Gropp 2005",
)
def recursive_halving_reduce_scatter(nranks: int) -> Schedule:
    r"""Recursive-halving reduce-scatter: ``lg p`` steps, step ``k`` exchanges ``p/2^(k+1)`` blocks.

    In step ``k`` rank ``v`` pairs with ``v xor p/2^(k+1)``, sends the half of its current blocks
    that the partner keeps and adds the half it keeps. Non-powers of two: fold (the even rank of
    each of the first ``r`` pairs adds its whole vector into the odd one), halving over ``p'``
    virtual ranks owning 1 or 2 blocks, then the odd rank sends the even one its block. Exact
    time, for :math:`p = 2^L` and otherwise (virtual rank 0 is on the critical path: it starts
    last and always receives the largest half):

    .. math::
        T = L\alpha + \frac{p-1}{p}n(\beta+\gamma) \quad (p = 2^L), \qquad
        T = (L+2)\alpha + \Bigl(n + (p'-1+S)\frac{n}{p}\Bigr)(\beta+\gamma) + \frac{n}{p}\beta
            \quad (\text{otherwise})

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`commsim.algorithms.ring.ring_reduce_scatter`,
        :func:`commsim.algorithms.direct.direct_reduce_scatter`,
        :func:`commsim.algorithms.direct.pairwise_reduce_scatter`,
        :func:`commsim.algorithms.torus.torus_reduce_scatter`,
        :func:`commsim.algorithms.hierarchical.hierarchical_reduce_scatter`,
        :func:`recursive_doubling_allgather`, :func:`rabenseifner_allreduce`,
        :func:`rabenseifner_reduce`, :func:`commsim.algorithms.swing.swing_bandwidth_allreduce`

    Examples:
        >>> s = recursive_halving_reduce_scatter(8)
        >>> s.nsteps, s.ntransfers  # lg p steps of p transfers
        (3, 24)
        >>> s = recursive_halving_reduce_scatter(6)  # p' = 4, r = 2
        >>> s.nsteps, s.ntransfers  # fold, 2 halving steps, unfold
        (4, 12)
    """
    f = _folding(nranks)
    pv, r = f.pv, nranks - f.pv
    core = _core("reduce_scatter", pv, _halving(pv, _bounds(pv, r)), nranks, "recursive_halving")
    return _fold(
        core,
        f,
        fold_in=lambda: _whole(f.extra, f.keep, nranks, True),
        fold_out=lambda: Step.make(f.keep, f.extra, f.extra, f.extra),
        collective="reduce_scatter",
        algorithm="recursive_halving",
    )


@register(
    "allgather",
    "recursive_doubling",
    cost_fn=_doubling_ag_cost,
    constraints="any p; non-powers of two fold r = p - p' ranks in and out (2 more steps)",
    reference="Thakur, Rabenseifner & Gropp 2005",
)
def recursive_doubling_allgather(nranks: int) -> Schedule:
    r"""Recursive-doubling allgather: ``lg p`` steps; in step ``k``, ``v``, ``v xor 2^k`` swap all.

    Non-powers of two: fold (the even rank of each of the first ``r`` pairs sends its block to the
    odd one), doubling over ``p'`` virtual ranks holding 1 or 2 blocks, then the odd rank sends the
    even one every block but its own (one message of ``p - 1`` blocks, two transfers). Exact time,
    for :math:`p = 2^L` and otherwise:

    .. math::
        T = L\alpha + \frac{p-1}{p}n\beta \quad (p = 2^L), \qquad
        T = (L+2)\alpha + (p+p'-1+S)\frac{n}{p}\beta \quad (\text{otherwise})

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`commsim.algorithms.ring.ring_allgather`,
        :func:`commsim.algorithms.direct.direct_allgather`,
        :func:`commsim.algorithms.bruck.bruck_allgather`,
        :func:`commsim.algorithms.torus.torus_allgather`,
        :func:`commsim.algorithms.hierarchical.hierarchical_allgather`,
        :func:`recursive_halving_reduce_scatter`, :func:`rabenseifner_allreduce`,
        :func:`rabenseifner_reduce`, :func:`commsim.algorithms.swing.swing_bandwidth_allreduce`

    Examples:
        >>> s = recursive_doubling_allgather(8)
        >>> s.nsteps, s.ntransfers
        (3, 24)
        >>> s = recursive_doubling_allgather(6)  # fold 2, doubling 4·2, unfold 1 + 2
        >>> s.nsteps, s.ntransfers
        (4, 13)
    """
    f = _folding(nranks)
    pv, r = f.pv, nranks - f.pv
    core = _core("allgather", pv, _doubling(pv, _bounds(pv, r)), nranks, "recursive_doubling")

    def fold_out() -> Step:  # every block but the even rank's own: [0, 2i) and [2i+1, p)
        high = Step.make(f.keep, f.extra, f.keep, f.keep, nranks - f.keep)
        low = f.extra > 0  # rank 0 has no blocks below its own
        if not low.any():  # (Step.make cannot build an empty step from scalars)
            return high
        return Step.cat([Step.make(f.keep[low], f.extra[low], 0, 0, f.extra[low]), high])

    return _fold(
        core,
        f,
        fold_in=lambda: Step.make(f.extra, f.keep, f.extra, f.extra),
        fold_out=fold_out,
        collective="allgather",
        algorithm="recursive_doubling",
    )


@register(
    "allreduce",
    "recursive_doubling",
    cost_fn=_doubling_ar_cost,
    constraints="any p; latency-optimal for small n; non-powers of two fold (2 more steps)",
    reference="Thakur, Rabenseifner & Gropp 2005",
    choices={"order": ORDERS},
)
def recursive_doubling_allreduce(nranks: int, order: str = "near_first") -> Schedule:
    r"""Recursive-doubling allreduce: ``lg p`` steps of exchange-and-add with ``v xor 2^k``.

    One data slot. Non-powers of two (MPICH): the even rank of each of the first ``r`` pairs adds
    its vector into the odd one, the ``p'`` others run the doubling, the odd rank sends the result
    back. ``order="near_first"`` (the default) pairs ``v`` with ``v xor 2^k`` in step ``k``,
    ``"far_first"`` with ``v xor p'/2^(k+1)``: every step moves the whole vector, so the order only
    decides which links each step loads, and the time below holds for both. Exact time, for
    :math:`p = 2^L` and otherwise:

    .. math::
        T = L(\alpha + n\beta + n\gamma) \quad (p = 2^L), \qquad
        T = (L+2)(\alpha + n\beta) + (L+1)n\gamma \quad (\text{otherwise})

    References:
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`commsim.algorithms.swing.swing_latency_allreduce`, :func:`rabenseifner_allreduce`

    Examples:
        >>> s = recursive_doubling_allreduce(8)
        >>> s.nsteps, s.ntransfers, s.nslots
        (3, 24, 1)
        >>> recursive_doubling_allreduce(5).nsteps  # fold, 2 steps on 4 ranks, unfold
        4
        >>> int(recursive_doubling_allreduce(8, order="far_first").step(0).dst[0])  # 0 <-> 4
        4
    """
    near = _near(order, "allreduce/recursive_doubling")
    f = _folding(nranks)
    pv = f.pv
    v = np.arange(pv)
    core = _core(
        "allreduce",
        pv,
        lambda k: Step.make(v, v ^ ((1 << k) if near else pv >> (k + 1)), 0, 0, reduce=True),
        1,
        "recursive_doubling",
    )
    out = _fold(
        core,
        f,
        fold_in=lambda: _whole(f.extra, f.keep, 1, True),
        fold_out=lambda: _whole(f.keep, f.extra, 1, False),
        collective="allreduce",
        algorithm="recursive_doubling",
    )
    return dataclasses.replace(out, params={"order": order})


@register(
    "allreduce",
    "rabenseifner",
    cost_fn=functools.partial(_rabenseifner_cost, unfold=1),
    constraints="any p; vector cut into p' slots; non-powers of two fold (2 more steps)",
    reference="Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005",
    choices={"order": ORDERS},
)
def rabenseifner_allreduce(nranks: int, order: str = "far_first") -> Schedule:
    r"""Rabenseifner's allreduce: recursive-halving reduce-scatter, recursive-doubling allgather.

    ``fold(concat(halving, doubling))`` on ``p'`` virtual ranks, the vector cut into ``p'`` equal
    slots; the fold is the same as :func:`recursive_doubling_allreduce`'s. The halving sends
    ``n/2`` in its first step and the doubling ``n/2`` in its last: ``order="far_first"`` (the
    default) exchanges them with the partner ``p'/2`` away, ``"near_first"`` (MPICH's order,
    Thakur et al. 2005) with the neighbour ``v xor 1``, the doubling running in the mirrored
    order; on a tree that keeps the big messages under one switch. The time below holds for both
    orders. Exact time, for :math:`p = 2^L` (Thakur et al. 2005) and otherwise:

    .. math::
        T = 2L\alpha + 2\frac{p-1}{p}n\beta + \frac{p-1}{p}n\gamma \quad (p = 2^L), \qquad
        T = (2L+2)\alpha + \Bigl(2 + 2\frac{p'-1}{p'}\Bigr)n\beta
            + \Bigl(1 + \frac{p'-1}{p'}\Bigr)n\gamma \quad (\text{otherwise})

    References:
        Rabenseifner, "Optimization of collective reduction operations", ICCS 2004.
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`recursive_halving_reduce_scatter`, :func:`recursive_doubling_allgather`,
        :func:`rabenseifner_reduce`, :func:`commsim.algorithms.swing.swing_bandwidth_allreduce`,
        :func:`recursive_doubling_allreduce`,
        :func:`commsim.algorithms.swing.swing_latency_allreduce`

    Examples:
        >>> s = rabenseifner_allreduce(8)
        >>> s.nsteps, s.ntransfers, s.nslots  # 2 lg p steps of p transfers
        (6, 48, 8)
        >>> s = rabenseifner_allreduce(12)  # p' = 8
        >>> s.nsteps, s.nslots
        (8, 8)
        >>> st = rabenseifner_allreduce(8, order="near_first").step(0)  # n/2 to the neighbour
        >>> int(st.dst[0]), int(st.count[0])
        (1, 4)
    """
    near = _near(order, "allreduce/rabenseifner")
    f = _folding(nranks)
    pv = f.pv
    bounds = np.arange(pv + 1)
    core = concat(
        _core("reduce_scatter", pv, _halving(pv, bounds, near), pv, "recursive_halving"),
        _core("allgather", pv, _doubling(pv, bounds, not near), pv, "recursive_doubling"),
        collective="allreduce",
    )
    out = _fold(
        core,
        f,
        fold_in=lambda: _whole(f.extra, f.keep, pv, True),
        fold_out=lambda: _whole(f.keep, f.extra, pv, False),
        collective="allreduce",
        algorithm="rabenseifner",
    )
    return dataclasses.replace(out, params={"order": order})


@register(
    "reduce",
    "rabenseifner",
    cost_fn=functools.partial(_rabenseifner_cost, unfold=0),
    constraints="any p, any root; vector cut into p' slots; non-powers of two fold (1 more step)",
    reference="Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005",
    choices={"order": ORDERS},
)
def rabenseifner_reduce(nranks: int, order: str = "far_first") -> Schedule:
    r"""Rabenseifner's reduce: recursive-halving reduce-scatter then a binomial gather to the root.

    On ``p'`` virtual ranks, the vector cut into ``p'`` equal slots; in gather step ``k`` virtual
    rank ``v = 2^k (mod 2^(k+1))`` sends its ``2^k`` slots to ``v - 2^k``. Non-powers of two: the
    odd rank of each of the first ``r`` pairs adds its vector into the even one first (so root 0 is
    virtual rank 0; no unfold is needed). ``order="near_first"`` runs the halving nearest partner
    first (MPICH's order, Thakur et al. 2005) and the gather farthest first (``v`` in
    ``[h, 2h)`` sends to ``v - h``, ``h = p'/2^(k+1)``), so the ``n/2`` messages stay between
    neighbours; the time below holds for both orders. Exact time, for :math:`p = 2^L` and
    otherwise:

    .. math::
        T = 2L\alpha + 2\frac{p-1}{p}n\beta + \frac{p-1}{p}n\gamma \quad (p = 2^L), \qquad
        T = (2L+1)\alpha + \Bigl(1 + 2\frac{p'-1}{p'}\Bigr)n\beta
            + \Bigl(1 + \frac{p'-1}{p'}\Bigr)n\gamma \quad (\text{otherwise})

    References:
        Rabenseifner, "Optimization of collective reduction operations", ICCS 2004.
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`commsim.algorithms.trees.binomial_reduce`,
        :func:`commsim.algorithms.trees.binomial_allreduce`,
        :func:`recursive_halving_reduce_scatter`, :func:`recursive_doubling_allgather`,
        :func:`rabenseifner_allreduce`,
        :func:`commsim.algorithms.swing.swing_bandwidth_allreduce`

    Examples:
        >>> s = rabenseifner_reduce(8)
        >>> s.nsteps, s.ntransfers  # lg p halving steps of p transfers, gather of p - 1
        (6, 31)
        >>> rabenseifner_reduce(7).nsteps  # fold, 2 + 2 steps on 4 ranks
        5
        >>> rabenseifner_reduce(8, order="near_first").ntransfers  # the same counts
        31
    """
    near = _near(order, "reduce/rabenseifner")
    f = _folding(nranks, into_odd=False)
    pv = f.pv
    bounds = np.arange(pv + 1)
    core = concat(
        _core("reduce_scatter", pv, _halving(pv, bounds, near), pv, "recursive_halving"),
        _core("reduce", pv, _gather(pv, bounds, near), pv, "binomial_gather", gather=True),
        collective="reduce",
    )
    out = _fold(
        core,
        f,
        fold_in=lambda: _whole(f.extra, f.keep, pv, True),
        fold_out=None,
        collective="reduce",
        algorithm="rabenseifner",
    )
    return dataclasses.replace(out, params={"order": order})
