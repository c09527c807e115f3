r"""Bruck's algorithms: allgather and alltoall in :math:`\lceil \lg p \rceil` steps for any ``p``.

In step ``k`` every rank exchanges with the ranks at distance ``2^k`` (it sends to ``r - 2^k`` in
the allgather, to ``r + 2^k`` in the alltoall), so every step is one shift, a perfect matching, and
no power of two is needed. The allgather keeps every block in its own slot (a range that wraps past
slot ``p - 1`` is two transfers forming one message), so the initial and final rotations of the
paper are not needed. The alltoall keeps a rank's outgoing data in place too: position ``i`` of rank
``r`` (the data headed ``i`` ranks ahead) lives in input slot ``(r + i) mod p`` all along, and a
final step of local copies (free in the cost models) moves it to output block ``(r - i) mod p``.

Against the lower bounds of Chan et al. 2007 (:func:`commsim.models.lower_bound`), the allgather is
optimal in both terms for every ``p``; the alltoall is latency-optimal but sends each block
``popcount`` times, about :math:`\frac{\lg p}{2}` times the :math:`\frac{p-1}{p}n\beta` bound.

Reference: Bruck, Ho, Kipnis, Upfal & Weathersby, "Efficient algorithms for all-to-all
communications in multiport message-passing systems", IEEE TPDS 8(11), 1997; costs as in Thakur,
Rabenseifner & Gropp, IJHPCA 19(1), 2005.
"""

from __future__ import annotations

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms._combinators import lazy
from commsim.algorithms._registry import FloatOrArray, register

__all__ = ["bruck_allgather", "bruck_alltoall"]


def _nsteps(p: int) -> int:
    """:math:`\\lceil \\lg p \\rceil` (0 for ``p = 1``); the tree algorithms use it too."""
    return (p - 1).bit_length()


def _bruck_ag_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float
) -> FloatOrArray:
    """The single-port Hockney time of :func:`bruck_allgather` (its ``.. math::``), exact for every
    ``p``."""
    p = nranks
    return _nsteps(p) * alpha + (p - 1) / p * nbytes * beta


def _bruck_a2a_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float
) -> FloatOrArray:
    """The single-port Hockney time of :func:`bruck_alltoall` (its ``.. math::``), exact for every
    ``p``."""
    p = nranks
    positions = np.arange(p)
    c = [int(((positions >> k) & 1).sum()) for k in range(_nsteps(p))]
    return len(c) * alpha + sum(c) * nbytes / p * beta


@register(
    "allgather",
    "bruck",
    cost_fn=_bruck_ag_cost,
    reference="Bruck et al. 1997; Thakur, Rabenseifner & Gropp 2005",
)
def bruck_allgather(nranks: int) -> Schedule:
    r"""Bruck allgather: in step ``k`` rank ``r`` sends ``min(2^k, p - 2^k)`` blocks to ``r - 2^k``.

    Before step ``k`` rank ``r`` holds blocks ``r, ..., r + 2^k - 1`` (mod ``p``); it sends the
    first ``min(2^k, p - 2^k)`` of them to ``r - 2^k``, which then holds ``min(2^(k+1), p)``
    blocks. Every rank sends one message per step, all of the same size, so for every ``p``:

    .. math:: T = \lceil \lg p \rceil\,\alpha + \frac{p-1}{p}\,n\beta

    References:
        Bruck, Ho, Kipnis, Upfal & Weathersby, "Efficient algorithms for all-to-all
        communications in multiport message-passing systems", IEEE TPDS 8(11), 1997.
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`commsim.algorithms.ring.ring_allgather`,
        :func:`commsim.algorithms.direct.direct_allgather`,
        :func:`commsim.algorithms.recursive.recursive_doubling_allgather`,
        :func:`commsim.algorithms.torus.torus_allgather`,
        :func:`commsim.algorithms.hierarchical.hierarchical_allgather`

    Examples:
        >>> s = bruck_allgather(6)
        >>> s.nsteps  # ceil(lg 6)
        3
        >>> s.ntransfers  # p per step, plus one per wrapped range: 6 + 7 + 7
        20
    """
    p = nranks
    K = _nsteps(p)
    r = np.arange(p)

    def step(k: int) -> Step:
        d = 1 << k
        c = min(d, p - d)
        dst = (r - d) % p
        head = np.minimum(c, p - r)  # blocks r .. p-1 of the range
        wrap = r[head < c]  # ranges that go on from slot 0
        return Step.cat(
            [
                Step.make(r, dst, r, r, head),
                Step.make(wrap, dst[wrap], 0, 0, c - (p - wrap)) if len(wrap) else Step.empty(),
            ]
        )

    counts = [min(1 << k, p - (1 << k)) for k in range(K)]
    return lazy(
        "allgather",
        p,
        K,
        step,
        slot_units=p,
        algorithm="bruck",
        ntransfers_hint=K * p + sum(c - 1 for c in counts),
        max_step_transfers_hint=max((p + c - 1 for c in counts), default=0),
    )


@register(
    "alltoall",
    "bruck",
    cost_fn=_bruck_a2a_cost,
    reference="Bruck et al. 1997; Thakur, Rabenseifner & Gropp 2005",
)
def bruck_alltoall(nranks: int) -> Schedule:
    r"""Bruck alltoall: in step ``k``, rank ``r`` sends positions with bit ``k`` set to ``r + 2^k``.

    Position ``i`` of rank ``r`` (in input slot ``(r + i) mod p``) starts as the block for rank
    ``r + i``; in step ``k`` the positions with bit ``k`` set move to the same position of rank
    ``r + 2^k``, overwriting the slot that rank sends away in the same step. After
    :math:`\lceil \lg p \rceil` steps position ``i`` of rank ``r`` is the block rank ``r - i`` sent
    it, and a last step of local copies puts it in output block ``(r - i) mod p``. With
    :math:`c_k = \#\{0 \le i < p : \text{bit } k \text{ of } i \text{ set}\}` blocks of
    :math:`n/p` bytes per message, for every ``p`` (Thakur et al. 2005 for powers of two):

    .. math::
        T = \sum_k \Bigl(\alpha + c_k\,\frac{n}{p}\beta\Bigr), \qquad
        c_k = \#\{0 \le i < p : \text{bit } k \text{ of } i \text{ set}\}, \qquad
        T = \lg p\,\alpha + \frac{n}{2}\lg p\,\beta \quad (p = 2^L)

    (the sum over the steps ``k = 0 … ⌈lg p⌉ - 1``).

    References:
        Bruck, Ho, Kipnis, Upfal & Weathersby, "Efficient algorithms for all-to-all
        communications in multiport message-passing systems", IEEE TPDS 8(11), 1997.
        Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), 2005.

    See Also:
        :func:`commsim.algorithms.direct.pairwise_alltoall`,
        :func:`commsim.algorithms.direct.direct_alltoall`,
        :func:`commsim.algorithms.hierarchical.hierarchical_alltoall`

    Examples:
        >>> s = bruck_alltoall(8)
        >>> s.nsteps  # lg p exchanges and one step of local copies
        4
        >>> s.step(s.nsteps - 1).ntransfers  # the copies: p per rank
        64
    """
    p = nranks
    K = _nsteps(p)
    r = np.arange(p)

    def step(k: int) -> Step:
        if k == K:  # local copies: position i -> output block (r - i) mod p
            rr, i = np.repeat(r, p), np.tile(r, p)
            return Step.make(rr, rr, (rr + i) % p, p + (rr - i) % p)
        d = 1 << k
        a = np.arange(d, p, 2 * d)  # runs [a, a + 2^k) of positions with bit k set
        rr, aa = np.repeat(r, len(a)), np.tile(a, p)
        end = np.minimum(aa + d, p)
        cut, inside = _wraps(p, k)
        split = np.zeros(len(rr), dtype=bool)
        split[np.broadcast_to(r * len(a), cut.shape)[inside] + (cut[inside] >> (k + 1))] = True
        sr, sa, se = rr[split], aa[split], end[split]
        x = np.clip(cut.min(axis=0)[sr], sa, se)
        y = np.clip(cut.max(axis=0)[sr], sa, se)
        lo = np.concatenate([aa[~split], sa, x, y])  # split runs: [a, x), [x, y), [y, end)
        hi = np.concatenate([end[~split], x, y, se])
        src = np.concatenate([rr[~split], sr, sr, sr])
        keep = hi > lo
        lo, hi, src = lo[keep], hi[keep], src[keep]
        dst = (src + d) % p
        return Step.make(src, dst, (src + lo) % p, (dst + lo) % p, hi - lo)

    counts = [p * len(range(1 << k, p, 2 << k)) + int(_wraps(p, k)[1].sum()) for k in range(K)]
    counts.append(p * p)
    return lazy(
        "alltoall",
        p,
        K + 1,
        step,
        slot_units=2 * p,
        algorithm="bruck",
        ntransfers_hint=sum(counts),
        max_step_transfers_hint=max(counts),
    )


def _wraps(p: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Where the slot ranges of rank ``r``'s step-``k`` runs wrap past slot ``p - 1``.

    Returns ``cut`` ``[2, p]``: the positions ``(p - r) mod p`` (source) and ``(p - r - 2^k) mod p``
    (destination), and ``inside``: whether that cut lies strictly inside a run of positions with
    bit ``k`` set, which it then splits into one more transfer (a run holds both cuts at most).
    """
    d = 1 << k
    r = np.arange(p)
    cut = np.stack([(p - r) % p, (p - r - d) % p])
    inside = ((cut & d) > 0) & ((cut & (2 * d - 1)) != d)
    return cut, inside
