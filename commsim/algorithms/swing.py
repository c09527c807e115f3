r"""Swing allreduce (De Sensi, Bonato, Saam & Hoefler, NSDI 2024): short-cutting rings on a torus.

On a 1-D torus of ``p = 2^L`` ranks, in step ``s`` rank ``r`` talks to

.. math::
    \pi(r, s) = \begin{cases} r + \rho(s) \bmod p & r \text{ even} \\
                              r - \rho(s) \bmod p & r \text{ odd} \end{cases}, \qquad
    \rho(s) = \sum_{i=0}^{s} (-2)^i = \frac{1 - (-2)^{s+1}}{3}

(``ρ = 1, -1, 3, -5, 11, -21, ...``): the distance :math:`|\rho(s)| \approx 2^{s+1}/3` is about
two thirds of recursive doubling's :math:`2^s`, because the peer swings left and right. ``π(·, s)``
is an involution (``ρ(s)`` is odd, so even ranks pair with odd ones), and the ``L`` steps form a
butterfly: the ranks reachable from ``r`` through steps ``s..L-1`` are :math:`2^{L-s}` ranks, and
those of ``r`` and of ``π(r, s)`` are disjoint.

On a multi-dimensional torus ``d_0 x ... x d_{k-1}`` (each :math:`d_i` a power of two, ranks in C
order) the steps cycle over the dimensions: step ``s`` moves along dimension ``s mod k`` (skipping
dimensions whose :math:`\lg d_i` steps are spent), by the 1-D rule applied to that coordinate and
that dimension's own step count (the sign by the parity of that coordinate), so every peer
differs from ``r`` in one coordinate only.
``dims="auto"`` (the default) is the 1-D Swing; ``dims="8x8"`` the 2-D one, which on an 8x8
torus network keeps every peer within its row or column (64 MiB on :func:`commsim.topology.torus`
with the topology model's default links: 6.2 ms against 7.3 ms for the 1-D Swing and 16.5 ms
for Rabenseifner).

Two variants, as in the paper:

* **latency-optimal** (``allreduce/swing_latency``): recursive-doubling-like, the whole vector is
  exchanged and added in each of the ``L`` steps.
* **bandwidth-optimal** (``allreduce/swing_bandwidth``): a reduce-scatter in which rank ``r``
  sends its peer the blocks of the ranks the peer reaches in the remaining steps, then the
  allgather of the same steps in reverse order. Those block sets are not contiguous in rank
  order, but they are nested, so the vector's ``p`` slots are numbered in the order of the
  butterfly (slot ``pos(r)`` is the one rank ``r`` finally owns; an allreduce may number its
  pieces freely) and every message is one contiguous slot range.

In the flat single-port Hockney model both variants cost exactly what recursive doubling and
Rabenseifner's algorithm cost: Swing's gain is that its peers are closer (fewer hops, less link
congestion) on a torus, which only a topology model sees.

**Non-powers of two**: the paper's own treatment of such ``p`` is not reproduced here; they use
the MPICH fold of :mod:`commsim.algorithms.recursive` (``r = p - p'`` ranks add their vector into a
neighbour first and get the result back last; two more steps) and run Swing on the ``p' = 2^L``
others; ``dims`` then describes the grid of those ``p'`` ranks.
"""

from __future__ import annotations

import math

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms._combinators import concat, lazy
from commsim.algorithms._registry import FloatOrArray, register
from commsim.algorithms.recursive import (
    _doubling_ar_cost,
    _fold,
    _folding,
    _rabenseifner_cost,
    _whole,
)
from commsim.algorithms.torus import Dims, parse_dims
from commsim.errors import ParameterError, ScheduleError

__all__ = [
    "rho",
    "swing_bandwidth_allreduce",
    "swing_latency_allreduce",
    "swing_peer",
    "swing_peers",
]


def rho(s: int) -> int:
    r""":math:`\rho(s) = \sum_{i=0}^{s} (-2)^i = (1 - (-2)^{s+1})/3`.

    Examples:
        >>> [rho(s) for s in range(6)]
        [1, -1, 3, -5, 11, -21]
    """
    return (1 - (-2) ** (s + 1)) // 3


def _swing_dims(nranks: int, dims: Dims) -> tuple[int, ...]:
    """The grid of the ``p' = 2^L <= p`` ranks Swing runs on (so every size is a power of two).

    ``"auto"`` is one dimension, the paper's 1-D Swing (``"8x8"`` asks for the 2-D one).
    """
    p = int(nranks)
    pv = 1 << (p.bit_length() - 1)
    if isinstance(dims, str) and dims.strip().lower() == "auto":
        return (pv,)
    of = f"nranks={p}" if pv == p else f"the p' = {pv} ranks Swing runs on (of nranks={p})"
    return parse_dims(dims, pv, of=of)


def _schedule_of_dims(sizes: tuple[int, ...]) -> list[tuple[int, int]]:
    """``(dimension, that dimension's step)`` for each step: cycling over unspent dimensions."""
    left = [d.bit_length() - 1 for d in sizes]
    done = [0] * len(sizes)
    out = []
    while any(done[i] < left[i] for i in range(len(sizes))):
        for i in range(len(sizes)):
            if done[i] < left[i]:
                out.append((i, done[i]))
                done[i] += 1
    return out


def swing_peer(ranks: np.ndarray, s: int, p: int) -> np.ndarray:
    """:math:`\\pi(r, s)` on a 1-D torus of ``p`` ranks, for every ``r`` of ``ranks``.

    Examples:
        >>> swing_peer(np.arange(8), 0, 8).tolist(), swing_peer(np.arange(8), 2, 8).tolist()
        ([1, 0, 3, 2, 5, 4, 7, 6], [3, 6, 5, 0, 7, 2, 1, 4])
    """
    r = np.asarray(ranks, dtype=np.int64)
    return np.where(r % 2 == 0, r + rho(s), r - rho(s)) % p


def swing_peers(nranks: int, dims: Dims = "auto") -> list[np.ndarray]:
    """``π(·, s)`` for every step ``s`` on a ``nranks = 2^L``-rank grid: one array per step.

    Examples:
        >>> [pi.tolist() for pi in swing_peers(8)]  # 1-D: ρ = 1, -1, 3
        [[1, 0, 3, 2, 5, 4, 7, 6], [7, 2, 1, 4, 3, 6, 5, 0], [3, 6, 5, 0, 7, 2, 1, 4]]
        >>> all((pi[pi] == np.arange(16)).all() for pi in swing_peers(16, "4x4"))  # involutions
        True
    """
    p = int(nranks)
    if p & (p - 1):
        raise ParameterError(f"swing peers need a power of two, got nranks={p}")
    sizes = _swing_dims(p, dims)
    r = np.arange(p)
    peers = []
    for i, t in _schedule_of_dims(sizes):
        d, inner = sizes[i], math.prod(sizes[i + 1 :])
        c = (r // inner) % d
        sign = np.where(c % 2 == 0, 1, -1)
        peers.append(r + ((c + sign * rho(t)) % d - c) * inner)
    return peers


def _positions(peers: list[np.ndarray]) -> np.ndarray:
    """``pos[r]``: the slot rank ``r`` owns, numbering slots in the order of the butterfly.

    Bit ``L-1-s`` of ``pos[r]`` says which of the two halves of step ``s`` (``r``'s reach after
    ``s``, or its peer's) ``r`` is in: 0 for the half holding the smaller least rank.
    """
    p, L = len(peers[0]) if peers else 1, len(peers)
    least = np.arange(p)  # the least rank reachable through steps s..L-1
    pos = np.zeros(p, dtype=np.int64)
    for s in range(L - 1, -1, -1):
        merged = np.minimum(least, least[peers[s]])
        pos |= (least != merged).astype(np.int64) << (L - 1 - s)
        least = merged
    if not (least == 0).all() or len(np.unique(pos)) != p:
        raise ScheduleError("swing steps do not form a butterfly")  # a bug, not a user error
    return pos


# -- exact costs ------------------------------------------------------------------------------
def _latency_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *, dims: Dims
) -> FloatOrArray:
    """The single-port Hockney time of :func:`swing_latency_allreduce` (its ``.. math::``,
    recursive doubling's), exact for every ``p``."""
    _swing_dims(nranks, dims)
    return _doubling_ar_cost(nranks, nbytes, alpha, beta, gamma)


def _bandwidth_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *, dims: Dims
) -> FloatOrArray:
    """The single-port Hockney time of :func:`swing_bandwidth_allreduce` (its ``.. math::``,
    Rabenseifner's), exact for every ``p``."""
    _swing_dims(nranks, dims)
    return _rabenseifner_cost(nranks, nbytes, alpha, beta, gamma, unfold=1)


_CONSTRAINTS = (
    "any p; dims = grid of the p' = 2^L ranks ('auto': 1-D; '8x8': 2-D, steps cycle over "
    "dimensions); non-powers of two fold (2 more steps)"
)


@register(
    "allreduce",
    "swing_latency",
    cost_fn=_latency_cost,
    constraints=_CONSTRAINTS,
    reference="De Sensi, Bonato, Saam & Hoefler, NSDI 2024",
)
def swing_latency_allreduce(nranks: int, dims: Dims = "auto") -> Schedule:
    r"""Latency-optimal Swing allreduce: ``lg p`` steps of exchange-and-add with ``π(r, s)``.

    One data slot. Non-powers of two fold (module docstring). Exact time, for :math:`p = 2^L`
    and otherwise (the same as recursive doubling's; the hop savings are invisible here):

    .. math::
        T = L(\alpha + n\beta + n\gamma) \quad (p = 2^L), \qquad
        T = (L+2)(\alpha + n\beta) + (L+1)n\gamma \quad (\text{otherwise})

    References:
        De Sensi, Bonato, Saam & Hoefler, "Swing: short-cutting rings for higher bandwidth
        allreduce", NSDI 2024.

    See Also:
        :func:`commsim.algorithms.recursive.recursive_doubling_allreduce`,
        :func:`commsim.algorithms.recursive.rabenseifner_allreduce`,
        :func:`swing_bandwidth_allreduce`, :func:`commsim.algorithms.torus.torus_allreduce`

    Examples:
        >>> s = swing_latency_allreduce(16)
        >>> s.nsteps, s.ntransfers, s.nslots
        (4, 64, 1)
        >>> swing_latency_allreduce(12).nsteps  # fold, 3 steps on 8 ranks, unfold
        5
    """
    f = _folding(nranks)
    pv = f.pv
    peers = swing_peers(pv, _swing_dims(nranks, dims))
    v = np.arange(pv)
    core = lazy(
        "allreduce",
        pv,
        len(peers),
        lambda s: Step.make(v, peers[s], 0, 0, reduce=True),
        slot_units=1,
        algorithm="swing_latency",
        ntransfers_hint=pv * len(peers),
        max_step_transfers_hint=pv if peers else 0,
    )
    return _fold(
        core,
        f,
        fold_in=lambda: _whole(f.extra, f.keep, 1, True),
        fold_out=lambda: _whole(f.keep, f.extra, 1, False),
        collective="allreduce",
        algorithm="swing_latency",
    )


@register(
    "allreduce",
    "swing_bandwidth",
    cost_fn=_bandwidth_cost,
    constraints=_CONSTRAINTS,
    reference="De Sensi, Bonato, Saam & Hoefler, NSDI 2024",
)
def swing_bandwidth_allreduce(nranks: int, dims: Dims = "auto") -> Schedule:
    r"""Bandwidth-optimal Swing allreduce: Swing reduce-scatter, then its steps in reverse.

    The vector is cut into ``p'`` slots numbered in butterfly order (module docstring). In
    reduce-scatter step ``s`` rank ``r`` adds into ``π(r, s)`` the :math:`p'/2^{s+1}` slots of the
    ranks ``π(r, s)`` reaches in steps ``s+1..L-1``; allgather step ``s`` (``s = L-1, ..., 0``)
    sends back those ``r`` reaches. Exact time, for :math:`p = 2^L` and otherwise (the same as
    Rabenseifner's; the hop savings are invisible here):

    .. math::
        T = 2L\alpha + 2\frac{p-1}{p}n\beta + \frac{p-1}{p}n\gamma \quad (p = 2^L), \qquad
        T = (2L+2)\alpha + \Bigl(2 + 2\frac{p'-1}{p'}\Bigr)n\beta
            + \Bigl(1 + \frac{p'-1}{p'}\Bigr)n\gamma \quad (\text{otherwise})

    References:
        De Sensi, Bonato, Saam & Hoefler, "Swing: short-cutting rings for higher bandwidth
        allreduce", NSDI 2024.

    See Also:
        :func:`commsim.algorithms.recursive.recursive_halving_reduce_scatter`,
        :func:`commsim.algorithms.recursive.recursive_doubling_allgather`,
        :func:`commsim.algorithms.recursive.rabenseifner_allreduce`,
        :func:`commsim.algorithms.recursive.rabenseifner_reduce`,
        :func:`swing_latency_allreduce`, :func:`commsim.algorithms.torus.torus_allreduce`

    Examples:
        >>> s = swing_bandwidth_allreduce(8)
        >>> s.nsteps, s.ntransfers, s.nslots  # 2 lg p steps of p transfers
        (6, 48, 8)
    """
    f = _folding(nranks)
    pv = f.pv
    peers = swing_peers(pv, _swing_dims(nranks, dims))
    L = len(peers)
    pos = _positions(peers)
    v = np.arange(pv)

    def block(owner: np.ndarray, s: int) -> tuple[np.ndarray, int]:
        size = 1 << (L - 1 - s)  # the slots of the ranks ``owner`` reaches in steps s+1..L-1
        return (pos[owner] // size) * size, size

    def rs(s: int) -> Step:
        start, size = block(peers[s], s)
        return Step.make(v, peers[s], start, start, size, reduce=True)

    def ag(i: int) -> Step:
        s = L - 1 - i
        start, size = block(v, s)
        return Step.make(v, peers[s], start, start, size)

    def part(collective: str, fn, algorithm: str) -> Schedule:
        return lazy(
            collective,
            pv,
            L,
            fn,
            slot_units=pv,
            algorithm=algorithm,
            ntransfers_hint=pv * L,
            max_step_transfers_hint=pv if L else 0,
        )

    core = concat(
        part("reduce_scatter", rs, "swing_reduce_scatter"),
        part("allgather", ag, "swing_allgather"),
        collective="allreduce",
    )
    return _fold(
        core,
        f,
        fold_in=lambda: _whole(f.extra, f.keep, pv, True),
        fold_out=lambda: _whole(f.keep, f.extra, pv, False),
        collective="allreduce",
        algorithm="swing_bandwidth",
    )
