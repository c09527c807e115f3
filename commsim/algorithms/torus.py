r"""Bucket (multi-dimensional ring) algorithms for tori: a ring along each dimension in turn.

Ranks are a ``d``-dimensional grid ``k_0 × … × k_{d-1}`` in mixed radix, last dimension fastest
(the numbering of :func:`commsim.topology.torus`, so a ring along a dimension runs between
physical neighbours). The vector is cut into ``p`` blocks numbered the same way. Reduce-scatter:
along dimension 0, a ring reduce-scatter over the ``k_0`` slabs ``b_0 = x`` (each a contiguous
range of blocks); then, inside the slab a rank kept, along dimension 1; …; after ``d`` phases
rank ``r`` holds block ``r``. Allgather runs the phases in reverse. Allreduce is the two.
References: Jain & Sabharwal, "Optimal bucket algorithms for large MPI collectives on torus
interconnects", ICS 2010; Patarasuk & Yuan 2009 (the ring in each phase).

With :math:`m_i = n / \prod_{j \le i} k_j` (the slab a phase-``i`` message carries):

.. math::
    T_{RS} = \sum_i (k_i - 1)(\alpha + m_i(\beta + \gamma)), \qquad
    T_{AG} = \sum_i (k_i - 1)(\alpha + m_i\beta)

On a flat network that is more latency than one ring and the same bandwidth; on a torus each
ring stays on its own links, which the topology model shows.
"""

from __future__ import annotations

import math
import re

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms._combinators import concat, lazy
from commsim.algorithms._registry import FloatOrArray, register
from commsim.errors import ParameterError

__all__ = ["parse_dims", "torus_allgather", "torus_allreduce", "torus_reduce_scatter"]


def parse_dims(dims: str, nranks: int) -> tuple[int, ...]:
    """``"auto"`` (the most square ``a × b = p``, ``a <= b``) or ``"AxBx…"`` with product ``p``.

    Examples:
        >>> parse_dims("auto", 12), parse_dims("2x3x2", 12), parse_dims("auto", 7)
        ((3, 4), (2, 3, 2), (1, 7))
    """
    if not isinstance(dims, str):
        raise ParameterError(f"dims must be a string such as '4x4' or 'auto', got {dims!r}")
    text = dims.strip().lower()
    if text == "auto":
        a = max(d for d in range(1, math.isqrt(nranks) + 1) if nranks % d == 0)
        return (a, nranks // a)
    if not re.fullmatch(r"\d+(x\d+)*", text):
        raise ParameterError(f"dims must look like 4x4 or 2x2x2 (or auto), got {dims!r}")
    out = tuple(int(x) for x in text.split("x"))
    if min(out) < 1:
        raise ParameterError(f"dims must be >= 1 each, got {dims!r}")
    if math.prod(out) != nranks:
        raise ParameterError(f"dims {dims} hold {math.prod(out)} ranks, not {nranks}")
    return out


def _strides(dims: tuple[int, ...]) -> np.ndarray:
    return np.array([math.prod(dims[i + 1 :]) for i in range(len(dims))], dtype=np.int64)


def _phase_step(p: int, dims: tuple[int, ...], d: int, s: int, *, reduce: bool) -> Step:
    """Step ``s`` of the ring along dimension ``d`` (reduce-scatter or allgather)."""
    stride = _strides(dims)
    r = np.arange(p, dtype=np.int64)
    c = (r // stride[d]) % dims[d]
    prefix = (
        r // (stride[d] * dims[d]) * (stride[d] * dims[d])
    )  # digits before d, as a block offset
    x = (c - s - (1 if reduce else 0)) % dims[d]
    dst = r + (((c + 1) % dims[d]) - c) * stride[d]
    slot = prefix + x * stride[d]
    return Step.make(r, dst, slot, slot, int(stride[d]), reduce)


def _phases(p: int, dims: tuple[int, ...], *, reduce: bool) -> list[tuple[int, int]]:
    """``(dimension, step)`` in order: dimensions 0, 1, ... for reduce-scatter, reversed for
    allgather; dimensions of size 1 have no steps."""
    order = range(len(dims)) if reduce else reversed(range(len(dims)))
    return [(d, s) for d in order for s in range(dims[d] - 1)]


def _schedule(collective: str, p: int, dims: str, *, reduce: bool) -> Schedule:
    shape = parse_dims(dims, p)
    phases = _phases(p, shape, reduce=reduce)
    return lazy(
        collective,
        p,
        len(phases),
        lambda i: _phase_step(p, shape, *phases[i], reduce=reduce),
        slot_units=p,
        algorithm="torus",
        params={"dims": dims},
        ntransfers_hint=p * len(phases),
        max_step_transfers_hint=p if phases else 0,
    )


def _msgs(p: int, dims: str) -> list[tuple[int, float]]:
    """``(k_i, bytes fraction of a phase-i message)`` per dimension."""
    shape = parse_dims(dims, p)
    out, left = [], 1.0
    for k in shape:
        left /= k
        out.append((k, left))
    return out


def _rs_cost(nranks, nbytes, alpha, beta, gamma, dims="auto") -> FloatOrArray:
    """:func:`torus_reduce_scatter`'s ``.. math::``."""
    return sum((k - 1) * (alpha + f * nbytes * (beta + gamma)) for k, f in _msgs(nranks, dims))


def _ag_cost(nranks, nbytes, alpha, beta, gamma, dims="auto") -> FloatOrArray:
    """:func:`torus_allgather`'s ``.. math::``."""
    return sum((k - 1) * (alpha + f * nbytes * beta) for k, f in _msgs(nranks, dims))


def _ar_cost(nranks, nbytes, alpha, beta, gamma, dims="auto") -> FloatOrArray:
    """:func:`torus_allreduce`'s ``.. math::``."""
    return _rs_cost(nranks, nbytes, alpha, beta, gamma, dims) + _ag_cost(
        nranks, nbytes, alpha, beta, gamma, dims
    )


_COST_RS = "Σ_i (k_i-1)(α + n/Π_{j≤i}k_j·(β+γ))"
_COST_AG = "Σ_i (k_i-1)(α + n/Π_{j≤i}k_j·β)"
_REF = "Jain & Sabharwal, ICS 2010 (bucket algorithms)"


@register("reduce_scatter", "torus", cost=_COST_RS, cost_fn=_rs_cost, reference=_REF,
          constraints="any p; dims=AxB[xC...] (default: the most square 2-D grid)")  # fmt: skip
def torus_reduce_scatter(nranks: int, dims: str = "auto") -> Schedule:
    r"""Ring reduce-scatter along each dimension in turn (module docstring).

    .. math:: T = \sum_i (k_i - 1)\left(\alpha + \frac{n}{\prod_{j \le i} k_j}(\beta + \gamma)\right)

    Examples:
        >>> s = torus_reduce_scatter(12, "3x4")
        >>> s.nsteps, s.ntransfers  # (3 - 1) + (4 - 1) steps, p transfers each
        (5, 60)
    """
    return _schedule("reduce_scatter", nranks, dims, reduce=True)


@register("allgather", "torus", cost=_COST_AG, cost_fn=_ag_cost, reference=_REF,
          constraints="any p; dims=AxB[xC...] (default: the most square 2-D grid)")  # fmt: skip
def torus_allgather(nranks: int, dims: str = "auto") -> Schedule:
    r"""Ring allgather along each dimension, last dimension first (module docstring).

    .. math:: T = \sum_i (k_i - 1)\left(\alpha + \frac{n}{\prod_{j \le i} k_j}\beta\right)

    Examples:
        >>> torus_allgather(8, "2x2x2").nsteps
        3
    """
    return _schedule("allgather", nranks, dims, reduce=False)


@register("allreduce", "torus", cost=f"{_COST_RS} + {_COST_AG}", cost_fn=_ar_cost, reference=_REF,
          constraints="any p; dims=AxB[xC...] (default: the most square 2-D grid)")  # fmt: skip
def torus_allreduce(nranks: int, dims: str = "auto") -> Schedule:
    r"""Bucket allreduce: the torus reduce-scatter, then the torus allgather.

    .. math:: T = \sum_i 2(k_i - 1)\alpha + (k_i - 1)\frac{n}{\prod_{j \le i} k_j}(2\beta + \gamma)

    Examples:
        >>> s = torus_allreduce(16, "4x4")
        >>> s.nsteps  # 2 (3 + 3)
        12
    """
    return concat(
        torus_reduce_scatter(nranks, dims),
        torus_allgather(nranks, dims),
        collective="allreduce",
        algorithm="torus",
        params={"dims": dims},
    )
