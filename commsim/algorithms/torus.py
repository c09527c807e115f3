r"""Torus (bucket) algorithms: a ring along each dimension of a ``d``-dimensional grid of ranks.

The ranks form a grid of shape :math:`d_0 \times d_1 \times \dots \times d_{k-1}`
(:math:`\prod_i d_i = p`), in C order: rank ``r`` has coordinates ``numpy.unravel_index(r, dims)``,
so ``c_0`` is the most significant digit and a grid line along dimension ``i`` is the ranks
``r + j·P_i`` (``j`` in ``[0, d_i)``, :math:`P_i = \prod_{j>i} d_j`). **Reduce-scatter** runs a ring
reduce-scatter along dimension 0, then along dimension 1 on the block the rank now holds, and so
on: after dimension ``i`` a rank holds, reduced over its sub-grid of dimensions ``0..i``, the
contiguous slot range of the blocks whose first ``i + 1`` coordinates are its own
(:math:`P_i` blocks), and after the last dimension its own block. **Allgather** is the same rings
in reverse order of dimensions, and **allreduce** is their concatenation. Every step is a ring step
inside the grid lines of one dimension, so a rank only ever talks to its torus neighbour
``c_i + 1 (mod d_i)`` along that dimension (wrap-around links included).

Every step has every rank send one message and receive one, of the same size, so the single-port
Hockney time is the sum of the steps. The message of a ring step along dimension ``i`` is one
block of :math:`P_i` of the ``p`` blocks, i.e. :math:`n / D_i` bytes with
:math:`D_i = \prod_{j \le i} d_j`, and :math:`\sum_i (d_i - 1)/D_i = 1 - 1/p` telescopes: the torus
algorithms move exactly the bytes of the ring (bandwidth-optimal) with
:math:`\sum_i (d_i - 1)` latencies instead of :math:`p - 1`.

References: Jain & Sabharwal, "Optimal bucket algorithms for large MPI collectives on torus
interconnects", ICS 2010; Sack & Gropp, "Faster topology-aware collective algorithms through
non-minimal communication", PPoPP 2012; the 2-D ring allreduce of TPU pods (Ying et al., "Image
classification at supercomputer scale", 2018). The flat Hockney model does not see why the grid
helps (every message here crosses one torus link); a topology model does.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms._combinators import concat, lazy
from commsim.algorithms._registry import FloatOrArray, register
from commsim.errors import ParameterError

__all__ = ["auto_dims", "parse_dims", "torus_allgather", "torus_allreduce", "torus_reduce_scatter"]

Dims = str | Sequence[int]


def auto_dims(nranks: int) -> tuple[int, ...]:
    """The near-square 2-D grid ``a x b`` (``a <= b``, ``a`` the largest divisor ``<= √p``).

    A prime ``p`` (and ``p = 1``) gives the 1-D ring ``(p,)``.

    Examples:
        >>> auto_dims(16), auto_dims(12), auto_dims(7), auto_dims(1)
        ((4, 4), (3, 4), (7,), (1,))
    """
    p = int(nranks)
    a = next(d for d in range(math.isqrt(p), 0, -1) if p % d == 0)
    return (p,) if a == 1 else (a, p // a)


def parse_dims(dims: Dims, nranks: int, *, of: str = "") -> tuple[int, ...]:
    """``"auto"``, ``"4x4x2"`` or a sequence of ints, checked against ``nranks``.

    ``of`` names the ranks the grid must hold in the error (default ``nranks=...``).

    Raises:
        ParameterError: a malformed string, a non-integer or zero size, or a product != ``p``.

    Examples:
        >>> parse_dims("4x2", 8), parse_dims("auto", 6), parse_dims([2, 2, 2], 8)
        ((4, 2), (2, 3), (2, 2, 2))
    """
    if isinstance(dims, str):
        text = dims.strip().lower()
        if text == "auto":
            return auto_dims(nranks)
        parts = text.replace("×", "x").split("x")
        try:
            sizes = [int(s) for s in parts]
        except ValueError:
            raise ParameterError(
                f"dims must be 'auto' or sizes like '4x4x2', got {dims!r}"
            ) from None
    elif isinstance(dims, Sequence) and all(
        isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in dims
    ):
        sizes = [int(d) for d in dims]
    else:
        raise ParameterError(f"dims must be 'auto' or sizes like '4x4x2', got {dims!r}")
    if not sizes or min(sizes) < 1:
        raise ParameterError(f"dims sizes must be integers >= 1, got {dims!r}")
    if math.prod(sizes) != nranks:
        raise ParameterError(
            f"dims {'x'.join(map(str, sizes))} hold {math.prod(sizes)} ranks, "
            f"not {of or f'nranks={nranks}'}"
        )
    return tuple(sizes)


# -- steps ------------------------------------------------------------------------------------
def _phases(dims: tuple[int, ...]) -> list[tuple[int, int]]:
    """``(d_i, P_i)`` for each dimension with ``d_i > 1``, in order (``P_i = prod(dims[i+1:])``)."""
    out = []
    for i, d in enumerate(dims):
        if d > 1:
            out.append((d, math.prod(dims[i + 1 :])))
    return out


def _ring_phase(p: int, d: int, inner: int, first_shift: int, reduce: bool):
    """Ring steps along one dimension (size ``d``, stride ``inner``); ``d - 1`` steps.

    In step ``s`` the rank at position ``c`` of its grid line sends sub-block
    ``(c - s - first_shift) mod d`` of its current range (``d`` sub-blocks of ``inner`` slots,
    starting at its line's base) to position ``c + 1 (mod d)``.
    """
    r = np.arange(p)
    c = (r // inner) % d
    base = r - c * inner - (r % inner)  # first slot of the range: the blocks of the line's prefix
    nxt = r + (((c + 1) % d) - c) * inner
    count = np.full(p, inner)
    red = np.full(p, reduce)

    def step(s: int) -> Step:
        slot = base + ((c - s - first_shift) % d) * inner
        return Step(r, nxt, slot, slot, count, red)

    return step


def _rings(
    collective: str,
    p: int,
    phases: list[tuple[int, int]],
    first_shift: int,
    reduce: bool,
    dims: Dims,
) -> Schedule:
    fns = [_ring_phase(p, d, inner, first_shift, reduce) for d, inner in phases]
    offsets = np.cumsum([0] + [d - 1 for d, _ in phases]).tolist()
    nsteps = offsets[-1]

    def step(i: int) -> Step:
        k = int(np.searchsorted(offsets, i, side="right")) - 1
        return fns[k](i - offsets[k])

    return lazy(
        collective,
        p,
        nsteps,
        step,
        slot_units=p,
        algorithm="torus",
        params={"dims": dims},
        ntransfers_hint=p * nsteps,
        max_step_transfers_hint=p if nsteps else 0,
    )


# -- exact costs ------------------------------------------------------------------------------
def _terms(nranks: int, dims: Dims) -> tuple[int, float]:
    """``Σ (d_i - 1)`` and ``Σ (d_i - 1)/D_i`` (which is ``(p-1)/p``)."""
    ds = parse_dims(dims, nranks)
    steps, frac, prefix = 0, 0.0, 1
    for d in ds:
        prefix *= d
        steps += d - 1
        frac += (d - 1) / prefix
    return steps, frac


def _torus_rs_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *, dims: Dims
) -> FloatOrArray:
    """The single-port Hockney time of :func:`torus_reduce_scatter` (its ``.. math::``), exact for every ``p``
    and every ``dims``."""
    k, f = _terms(nranks, dims)
    return k * alpha + f * nbytes * (beta + gamma)


def _torus_ag_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *, dims: Dims
) -> FloatOrArray:
    """The single-port Hockney time of :func:`torus_allgather` (its ``.. math::``), exact for every ``p``
    and every ``dims``."""
    k, f = _terms(nranks, dims)
    return k * alpha + f * nbytes * beta


def _torus_ar_cost(
    nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *, dims: Dims
) -> FloatOrArray:
    """The single-port Hockney time of :func:`torus_allreduce` (its ``.. math::``), exact for every ``p``
    and every ``dims``."""
    k, f = _terms(nranks, dims)
    return 2 * k * alpha + f * nbytes * (2 * beta + gamma)


_CONSTRAINTS = "any p; dims='auto' is a near-square 2-D grid (a prime p is a 1-D ring)"


@register(
    "reduce_scatter",
    "torus",
    cost_fn=_torus_rs_cost,
    constraints=_CONSTRAINTS,
    reference="Jain & Sabharwal 2010",
)
def torus_reduce_scatter(nranks: int, dims: Dims = "auto") -> Schedule:
    r"""Torus (bucket) reduce-scatter: a ring reduce-scatter along each dimension in turn.

    Along dimension ``i`` (``d_i - 1`` steps) a rank reduces the :math:`d_i` sub-blocks of its
    current range with its grid line; messages are :math:`n/D_i` bytes,
    :math:`D_i = \prod_{j \le i} d_j`, so
    :math:`T = \sum_i (d_i - 1)\bigl(\alpha + \frac{n}{D_i}(\beta + \gamma)\bigr)`, which
    telescopes (module docstring) to

    .. math:: T = \sum_i(d_i-1)\,\alpha + \frac{p-1}{p}\,n(\beta+\gamma)

    References:
        Jain & Sabharwal, "Optimal bucket algorithms for large MPI collectives on torus
        interconnects", ICS 2010.

    See Also:
        :func:`commsim.algorithms.ring.ring_reduce_scatter`,
        :func:`commsim.algorithms.direct.direct_reduce_scatter`,
        :func:`commsim.algorithms.direct.pairwise_reduce_scatter`,
        :func:`commsim.algorithms.recursive.recursive_halving_reduce_scatter`,
        :func:`commsim.algorithms.hierarchical.hierarchical_reduce_scatter`,
        :func:`torus_allreduce`, :func:`torus_allgather`,
        :func:`commsim.algorithms.torus_multiport.torus_multiport_reduce_scatter` (every link
        at once)

    Examples:
        >>> s = torus_reduce_scatter(12, "3x4")
        >>> s.nsteps, s.ntransfers  # (3-1) + (4-1) steps of p transfers
        (5, 60)
    """
    p = nranks
    return _rings("reduce_scatter", p, _phases(parse_dims(dims, p)), 1, True, dims)


@register(
    "allgather",
    "torus",
    cost_fn=_torus_ag_cost,
    constraints=_CONSTRAINTS,
    reference="Jain & Sabharwal 2010",
)
def torus_allgather(nranks: int, dims: Dims = "auto") -> Schedule:
    r"""Torus (bucket) allgather: a ring allgather along each dimension, last dimension first.

    Messages along dimension ``i`` are :math:`n/D_i` bytes, so
    :math:`T = \sum_i (d_i - 1)\bigl(\alpha + \frac{n}{D_i}\beta\bigr)`, which telescopes to

    .. math:: T = \sum_i(d_i-1)\,\alpha + \frac{p-1}{p}\,n\beta

    References:
        Jain & Sabharwal, "Optimal bucket algorithms for large MPI collectives on torus
        interconnects", ICS 2010.

    See Also:
        :func:`commsim.algorithms.ring.ring_allgather`,
        :func:`commsim.algorithms.direct.direct_allgather`,
        :func:`commsim.algorithms.bruck.bruck_allgather`,
        :func:`commsim.algorithms.recursive.recursive_doubling_allgather`,
        :func:`commsim.algorithms.hierarchical.hierarchical_allgather`, :func:`torus_allreduce`,
        :func:`torus_reduce_scatter`,
        :func:`commsim.algorithms.torus_multiport.torus_multiport_allgather` (every link at once)

    Examples:
        >>> s = torus_allgather(8, "2x2x2")  # the hypercube: lg p steps
        >>> s.nsteps, s.ntransfers
        (3, 24)
    """
    p = nranks
    return _rings("allgather", p, _phases(parse_dims(dims, p))[::-1], 0, False, dims)


@register(
    "allreduce",
    "torus",
    cost_fn=_torus_ar_cost,
    constraints=_CONSTRAINTS,
    reference="Jain & Sabharwal 2010",
)
def torus_allreduce(nranks: int, dims: Dims = "auto") -> Schedule:
    r"""Torus (bucket, multi-dimensional ring) allreduce: torus reduce-scatter, then allgather.

    .. math:: T = 2\sum_i(d_i-1)\,\alpha + 2\frac{p-1}{p}\,n\beta + \frac{p-1}{p}\,n\gamma

    References:
        Jain & Sabharwal, "Optimal bucket algorithms for large MPI collectives on torus
        interconnects", ICS 2010.

    See Also:
        :func:`commsim.algorithms.ring.ring_allreduce`,
        :func:`commsim.algorithms.direct.direct_allreduce`,
        :func:`commsim.algorithms.nccl.snake_ring_allreduce`, :func:`torus_reduce_scatter`,
        :func:`torus_allgather`, :func:`commsim.algorithms.swing.swing_latency_allreduce`,
        :func:`commsim.algorithms.swing.swing_bandwidth_allreduce`,
        :func:`commsim.algorithms.torus_multiport.torus_multiport_allreduce` (every link at once)

    Examples:
        >>> s = torus_allreduce(16)  # auto: 4x4
        >>> s.nsteps, s.ntransfers  # 2·(3 + 3) steps of p transfers, against 30 for the ring
        (12, 192)
    """
    p = nranks
    phases = _phases(parse_dims(dims, p))
    return concat(
        _rings("reduce_scatter", p, phases, 1, True, dims),
        _rings("allgather", p, phases[::-1], 0, False, dims),
        collective="allreduce",
        algorithm="torus",
        params={"dims": dims},
    )
