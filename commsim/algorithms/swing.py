r"""Swing allreduce (De Sensi, Bonato, Saam & Hoefler, "Swing: short-cutting rings for higher
bandwidth allreduce", NSDI 2024).

In step ``s`` rank ``r`` talks to :math:`\pi(r, s) = r + \rho(s)` if ``r`` is even and
:math:`r - \rho(s)` if odd (mod ``p``), with :math:`\rho(s) = \sum_{i=0}^{s} (-2)^i = 1, -1, 3,
-5, 11, \dots`: partners swing left and right at growing distances, so on a ring or torus the
distances stay short (:math:`|\rho(s)| \approx 2^{s+1}/3` instead of recursive doubling's
:math:`2^s`). :math:`\pi(\cdot, s)` is an involution, so every step is a perfect matching.

* ``swing_latency``: ``lg p`` steps of exchange-and-add of the whole vector (like recursive
  doubling).
* ``swing_bandwidth``: a reduce-scatter then an allgather over ``p`` blocks: in step ``s`` of the
  reduce-scatter ``r`` sends its peer the blocks of the ranks the peer reaches in the steps left
  (:math:`R(q, s+1)`, with :math:`R(x, L) = \{x\}`, :math:`R(x, t) = R(x, t+1) \cup R(\pi(x, t),
  t+1)`), halving what it holds each step; the allgather mirrors it.

On a flat network their costs are recursive doubling's and Rabenseifner's (the distances are
invisible there); on a ring or torus the topology model shows the shorter distances. Non-powers
of two use the fold of :mod:`commsim.algorithms.recursive` (the extra ranks add into a partner
first and get the result back after), not the paper's own treatment.
"""

from __future__ import annotations

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms._combinators import lazy
from commsim.algorithms._registry import register
from commsim.algorithms.recursive import (
    _doubling_ar_cost,
    _fold,
    _folding,
    _whole,
)

__all__ = ["swing_bandwidth_allreduce", "swing_latency_allreduce", "swing_peer"]


def _rho(s: int) -> int:
    return (1 - (-2) ** (s + 1)) // 3


def swing_peer(ranks: np.ndarray, s: int, p: int) -> np.ndarray:
    """:math:`\\pi(r, s)` for every ``r`` of ``ranks`` on ``p`` ranks.

    Examples:
        >>> swing_peer(np.arange(8), 0, 8).tolist(), swing_peer(np.arange(8), 2, 8).tolist()
        ([1, 0, 3, 2, 5, 4, 7, 6], [3, 6, 5, 0, 7, 2, 1, 4])
    """
    r = np.asarray(ranks, dtype=np.int64)
    return np.where(r % 2 == 0, r + _rho(s), r - _rho(s)) % p


def _swing_bw_cost(nranks, nbytes, alpha, beta, gamma):
    """:func:`swing_bandwidth_allreduce`'s ``.. math::``."""
    pv = 1 << (nranks.bit_length() - 1)
    lg = pv.bit_length() - 1
    core = 2 * lg * alpha + (pv - 1) / pv * nbytes * (2 * beta + gamma)
    if pv == nranks:
        return core
    return core + 2 * alpha + nbytes * (2 * beta + gamma)


@register(
    "allreduce",
    "swing_latency",
    cost="pow2: lg p·(α + nβ + nγ); else (L+2)(α + nβ) + (L+1)nγ",
    cost_fn=_doubling_ar_cost,
    constraints="any p (non-powers of two fold); short partner distances on rings and tori",
    reference="De Sensi et al., NSDI 2024",
)
def swing_latency_allreduce(nranks: int) -> Schedule:
    r"""Latency-optimal Swing: ``lg p`` exchanges of the whole vector with :math:`\pi(r, s)`.

    .. math:: T = L(\alpha + n\beta + n\gamma), \qquad
              T = (L+2)(\alpha + n\beta) + (L+1)n\gamma \text{ (fold)}

    Examples:
        >>> swing_latency_allreduce(8).nsteps, swing_latency_allreduce(6).nsteps
        (3, 4)
    """
    f = _folding(nranks)
    pv = f.pv
    v = np.arange(pv)
    core = lazy(
        "allreduce",
        pv,
        pv.bit_length() - 1,
        lambda s: Step.make(v, swing_peer(v, s, pv), 0, 0, reduce=True),
        slot_units=1,
        algorithm="swing_latency",
    )
    return _fold(
        core, f,
        fold_in=lambda: _whole(f.extra, f.keep, 1, True),
        fold_out=lambda: _whole(f.keep, f.extra, 1, False),
        collective="allreduce", algorithm="swing_latency",
    )  # fmt: skip


def _reach(pv: int, t: int) -> np.ndarray:
    """``R(x, t)`` for every ``x``: ``[pv, 2^{L-t}]`` ranks (the blocks ``x`` gathers)."""
    lg = pv.bit_length() - 1
    r = np.arange(pv, dtype=np.int64)[:, None]
    for u in range(lg - 1, t - 1, -1):
        r = np.concatenate([r, r[swing_peer(np.arange(pv), u, pv)]], axis=1)
    return r


def _bw_step(pv: int, i: int) -> Step:
    lg = pv.bit_length() - 1
    reduce = i < lg
    s = i if reduce else 2 * lg - 1 - i
    v = np.arange(pv, dtype=np.int64)
    q = swing_peer(v, s, pv)
    blocks = _reach(pv, s + 1)[q if reduce else v]  # what v sends: its peer's share / its own
    width = blocks.shape[1]
    src = np.repeat(v, width)
    dst = np.repeat(q, width)
    slot = blocks.ravel()
    return Step.make(src, dst, slot, slot, 1, reduce)


@register(
    "allreduce",
    "swing_bandwidth",
    cost="pow2: 2lg p·α + 2(p-1)/p·nβ + (p-1)/p·nγ; else + 2α + 2nβ + nγ (fold)",
    cost_fn=_swing_bw_cost,
    constraints="any p (non-powers of two fold); p' blocks; short partner distances on tori",
    reference="De Sensi et al., NSDI 2024",
)
def swing_bandwidth_allreduce(nranks: int) -> Schedule:
    r"""Bandwidth-optimal Swing: a reduce-scatter and an allgather along the swing pattern.

    For :math:`p = 2^L` (otherwise the fold adds :math:`2\alpha + n(2\beta + \gamma)`):

    .. math:: T = 2L\alpha + 2\frac{p-1}{p}n\beta + \frac{p-1}{p}n\gamma

    Examples:
        >>> s = swing_bandwidth_allreduce(8)
        >>> s.nsteps, s.ntransfers  # 2 lg p steps; p(p-1) block transfers each way
        (6, 112)
    """
    f = _folding(nranks)
    pv = f.pv
    lg = pv.bit_length() - 1
    core = lazy(
        "allreduce",
        pv,
        2 * lg,
        lambda i: _bw_step(pv, i),
        slot_units=np.ones(pv, dtype=np.int64),
        algorithm="swing_bandwidth",
    )
    return _fold(
        core, f,
        fold_in=lambda: _whole(f.extra, f.keep, pv, True),
        fold_out=lambda: _whole(f.keep, f.extra, pv, False),
        collective="allreduce", algorithm="swing_bandwidth",
    )  # fmt: skip
