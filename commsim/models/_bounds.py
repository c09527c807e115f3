r"""Lower bounds on any algorithm's α-β-γ time (Chan, Heimlich, Purkayastha & van de Geijn,
"Collective communication: theory, practice, and experience", CCPE 19(13), 2007, Table 1).

With :math:`p` ranks, message size :math:`n` (the collective's ``nbytes`` convention) and
:math:`\lceil \lg p \rceil` the fewest steps in which information can reach every rank:

=============== ======================================================================
broadcast       :math:`\lceil\lg p\rceil\alpha + n\beta`
reduce          :math:`\lceil\lg p\rceil\alpha + n\beta + \frac{p-1}{p}n\gamma`
allgather       :math:`\lceil\lg p\rceil\alpha + \frac{p-1}{p}n\beta`
reduce_scatter  :math:`\lceil\lg p\rceil\alpha + \frac{p-1}{p}n\beta + \frac{p-1}{p}n\gamma`
allreduce       :math:`\lceil\lg p\rceil\alpha + 2\frac{p-1}{p}n\beta + \frac{p-1}{p}n\gamma`
alltoall        :math:`\lceil\lg p\rceil\alpha + \frac{p-1}{p}n\beta` (each rank must send its
                :math:`p-1` foreign blocks)
=============== ======================================================================
"""

from __future__ import annotations

import math

__all__ = ["lower_bound"]

_TERMS = {  # (beta factor f(p), gamma factor g(p))
    "broadcast": (lambda p: 1.0, lambda p: 0.0),
    "reduce": (lambda p: 1.0, lambda p: (p - 1) / p),
    "allgather": (lambda p: (p - 1) / p, lambda p: 0.0),
    "reduce_scatter": (lambda p: (p - 1) / p, lambda p: (p - 1) / p),
    "allreduce": (lambda p: 2 * (p - 1) / p, lambda p: (p - 1) / p),
    "alltoall": (lambda p: (p - 1) / p, lambda p: 0.0),
}


def lower_bound(
    collective: str, p: int, n: float, alpha: float, beta: float, gamma: float
) -> float:
    """The Chan et al. 2007 lower bound for ``collective`` on ``p`` ranks and ``n`` bytes.

    Examples:
        >>> lower_bound("allreduce", 4, 1000.0, 1.0, 0.001, 0.0)
        3.5
    """
    if p <= 1:
        return 0.0
    fb, fg = _TERMS[collective]
    return math.ceil(math.log2(p)) * alpha + fb(p) * n * beta + fg(p) * n * gamma
