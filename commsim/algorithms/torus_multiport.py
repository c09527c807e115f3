r"""Multiport torus algorithms: every dimension and direction at once, one part per link.

A torus chip has two links per dimension (``+1`` and ``-1``), :math:`2D` in all on a grid with
:math:`D` dimensions of size :math:`> 1`. The :mod:`torus <commsim.algorithms.torus>` rows use one
of them at a time. Here the buffer is cut into :math:`2D` **parts** that run at once, each on a
channel of its own (IR rule 6): part ``j`` starts at dimension :math:`s = \lfloor j/2 \rfloor`
(among those of size :math:`> 1`) in direction ``+1`` (``j`` even) or ``-1`` (``j`` odd), and runs
the torus rings over the dimensions in rotated order: reduce-scatter along dimensions
:math:`s, s+1, \dots \pmod D`, allgather in the reverse order, allreduce the one then the other,
every ring in the part's direction. When the dimensions have one size, at every step the
:math:`2D` parts use the :math:`2D` different (dimension, direction) pairs, so every link of a
chip carries one part: the multi-axis collective of TPU pods and Swing's multiport form.

Each part is the :func:`torus <commsim.algorithms.torus.torus_reduce_scatter>` schedule on a
*virtual* grid whose axes are the real ones in the part's order, mirrored for direction ``-1``
(virtual coordinate ``u`` is real coordinate ``d - 1 - u``): a virtual ring step ``u → u + 1`` is
a real step ``c → c ∓ 1``. Reduce-scatter and allgather map the virtual blocks to the real ones
with the same permutation and are put side by side with
:func:`~commsim.algorithms._parallel.parallel` (part ``j`` on slot ``b·2D + j`` of block ``b``,
so rank ``r``'s block stays its own). The allreduce has no blocks to keep, so part ``j`` holds the
contiguous slots ``[j p, (j+1) p)`` in its own virtual order: its transfers stay ``p`` ranges per
step, which is what lets a 4,096-chip torus be timed in seconds.

Cost with :math:`2D` independent links (:class:`commsim.models.Hockney` ``links=2D``): each part
runs on its own link with :math:`n/2D` bytes, and its rings telescope as the torus rows' do
(:math:`\sum_i (d_i - 1)/D_i = (p-1)/p` in every order), so with
:math:`K = \sum_i (d_i - 1)`

.. math:: T_{\mathrm{RS}} = K\alpha + \frac{p-1}{p}\,\frac{n}{2D}(\beta + \gamma)

and the β term is the injection bound's, :math:`f_\beta(p)\,n\beta/2D` (every byte a chip must
receive arrives over one of its :math:`2D` links, all busy all the time). The rows' ``cost_fn``
gives it with ``links=2D`` (``info(...).time(..., links=2D)``). The γ term is divided too: the
model keeps a clock per link, so each part reduces its own share as the bytes arrive, as if a
chip had :math:`2D` reduction units. On one link (``links=1``, the registry's default) the
parts take turns: where :math:`D = 1` (a ring) the time is
:math:`2K\alpha + \frac{p-1}{p}n(\beta+\gamma)`; on more dimensions the turns are not aligned
step by step (the rounds of :func:`commsim._messages.matchings` mix the parts) and that
expression with :math:`2DK` latencies is a lower estimate.

Sharp bit: when the dimensions differ in size, a part still on its first dimension and a part
already on its second may share a (dimension, direction) for a while; the contention models
charge it, the independent-links Hockney model does not see links.

References:
    De Sensi et al., "Swing: Short-cutting Rings for Higher Bandwidth Allreduce", NSDI 2024
    (the multiport torus form); Jain & Sabharwal, "Optimal bucket algorithms for large MPI
    collectives on torus interconnects", ICS 2010 (the per-dimension rings); Jouppi et al.,
    "TPU v4: An Optically Reconfigurable Supercomputer for Machine Learning", ISCA 2023 (all-reduce
    over every ICI link of a 3-D torus).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms._combinators import relabel, relabel_blocks
from commsim.algorithms._parallel import parallel
from commsim.algorithms._registry import FloatOrArray, register
from commsim.algorithms.torus import (
    Dims,
    parse_dims,
    torus_allgather,
    torus_allreduce,
    torus_reduce_scatter,
)
from commsim.errors import ParameterError

__all__ = [
    "one_dimensional",
    "part_orders",
    "torus_multiport_allgather",
    "torus_multiport_allreduce",
    "torus_multiport_reduce_scatter",
]


def part_orders(dims: tuple[int, ...]) -> list[tuple[tuple[int, ...], int]]:
    """``(axes, direction)`` of each of the ``2D`` parts: the dimensions of size ``> 1`` rotated
    to start at the ``j // 2``-th, direction ``+1`` for even ``j`` and ``-1`` for odd.

    Examples:
        >>> part_orders((4, 1, 2))
        [((0, 2), 1), ((0, 2), -1), ((2, 0), 1), ((2, 0), -1)]
        >>> part_orders((1, 1))
        []
    """
    axes = [i for i, d in enumerate(dims) if d > 1]
    n = len(axes)
    return [
        (tuple(axes[(j // 2 + t) % n] for t in range(n)), 1 - 2 * (j % 2)) for j in range(2 * n)
    ]


def _rank_map(dims: tuple[int, ...], axes: tuple[int, ...], direction: int) -> np.ndarray:
    """``perm[v]``: the real rank of virtual rank ``v`` of the grid ``dims[axes]`` (C order),
    whose coordinate ``t`` is real axis ``axes[t]``, mirrored when ``direction`` is ``-1``."""
    p = math.prod(dims)
    virtual = np.unravel_index(np.arange(p, dtype=np.int64), [dims[a] for a in axes])
    real = [np.zeros(p, dtype=np.int64) for _ in dims]
    for a, u in zip(axes, virtual, strict=True):
        real[a] = u if direction > 0 else dims[a] - 1 - u
    return np.ravel_multi_index(real, dims).astype(np.int64)


def _parts(factory: Callable[..., Schedule], nranks: int, dims: Dims) -> list[Schedule]:
    """The torus schedule of each part, ranks and blocks in the real order."""
    ds = parse_dims(dims, nranks)
    parts = []
    for axes, direction in part_orders(ds):
        virtual = factory(nranks, [ds[a] for a in axes])
        parts.append(relabel_blocks(virtual, _rank_map(ds, axes, direction)))
    return parts


def _alone(schedule: Schedule) -> Schedule:
    """The one-rank schedule (no dimension of size > 1, no part), under this row's name."""
    return dataclasses.replace(schedule, algorithm="torus_multiport")


def _side_by_side(parts: list[Schedule], params: dict[str, object]) -> Schedule:
    """Allreduce parts at once: part ``j`` on channel ``j`` and the contiguous slots
    ``[j p, (j+1) p)`` (each part's slot ``v`` is its virtual rank ``v``'s block)."""
    k, first = len(parts), parts[0]
    p, m = first.nranks, first.nslots

    def step_fn(i: int) -> Step:
        pieces = []
        for j, s in enumerate(parts):
            st = s.step(i)
            n = len(st.src)
            pieces.append(
                Step(st.src, st.dst, st.src_slot + j * m, st.dst_slot + j * m, st.count,
                     st.reduce, np.full(n, j, dtype=np.int64))
            )  # fmt: skip
        return Step.cat(pieces)

    return Schedule(
        collective=first.collective,
        nranks=p,
        slot_units=np.tile(first.slot_units, k),
        nsteps=first.nsteps,
        step_fn=step_fn,
        nchannels=k,
        algorithm="torus_multiport",
        params=params,
        ntransfers_hint=k * p * first.nsteps,
        max_step_transfers_hint=k * p if first.nsteps else 0,
    )


# -- exact costs ------------------------------------------------------------------------------
def _terms(nranks: int, dims: Dims) -> tuple[int, float, int]:
    """``K = Σ (d_i - 1)``, ``(p-1)/p`` and the part count ``2D`` (at least 1)."""
    ds = parse_dims(dims, nranks)
    return sum(d - 1 for d in ds), (nranks - 1) / nranks, max(2 * sum(d > 1 for d in ds), 1)


def one_dimensional(nranks: int, dims: Dims = "auto") -> bool:
    """Where the one-link display of the rows' ``.. math::`` is exact: ``D <= 1`` (a ring).

    Examples:
        >>> one_dimensional(7), one_dimensional(8, "8x1"), one_dimensional(16)
        (True, True, False)
    """
    return sum(d > 1 for d in parse_dims(dims, nranks)) <= 1


def _per_link(nranks: int, dims: Dims, links: int) -> tuple[int, float, int]:
    """``K``, ``(p-1)/p`` and the parts that take turns on one link: ``2D`` on one link, 1 on
    ``2D`` links or more (each part on its own, :class:`commsim.models.Hockney` ``links=``)."""
    k, f, parts = _terms(nranks, dims)
    if links == 1:
        return k, f, parts
    if isinstance(links, bool) or not isinstance(links, int) or links < parts:
        raise ParameterError(
            f"torus_multiport: its time has a closed form on 1 link or on 2D = {parts} links or "
            f"more, got links={links!r}"
        )
    return k, f / parts, 1


def _rs_cost(
    nranks: int,
    nbytes: FloatOrArray,
    alpha: float,
    beta: float,
    gamma: float,
    *,
    dims: Dims,
    links: int = 1,
) -> FloatOrArray:
    """:func:`torus_multiport_reduce_scatter`'s ``.. math::`` on ``links`` links per rank: the
    one-link display (exact where :func:`one_dimensional`) or, with ``links >= 2D``, the 2D-link
    one (exact for every ``p`` and ``dims``)."""
    k, f, turns = _per_link(nranks, dims, links)
    return turns * k * alpha + f * nbytes * (beta + gamma)


def _ag_cost(
    nranks: int,
    nbytes: FloatOrArray,
    alpha: float,
    beta: float,
    gamma: float,
    *,
    dims: Dims,
    links: int = 1,
) -> FloatOrArray:
    """:func:`torus_multiport_allgather`'s ``.. math::`` on ``links`` links: exact on one link
    where :func:`one_dimensional`, and on ``2D`` links or more for every ``p`` and ``dims``."""
    k, f, turns = _per_link(nranks, dims, links)
    return turns * k * alpha + f * nbytes * beta


def _ar_cost(
    nranks: int,
    nbytes: FloatOrArray,
    alpha: float,
    beta: float,
    gamma: float,
    *,
    dims: Dims,
    links: int = 1,
) -> FloatOrArray:
    """:func:`torus_multiport_allreduce`'s ``.. math::`` on ``links`` links: exact on one link
    where :func:`one_dimensional`, and on ``2D`` links or more for every ``p`` and ``dims``."""
    k, f, turns = _per_link(nranks, dims, links)
    return 2 * turns * k * alpha + f * nbytes * (2 * beta + gamma)


_CONSTRAINTS = (
    "any p; 2D parts on 2D channels, one per torus link; dims='auto' is a near-square 2-D grid "
    "(the CLI passes a torus cluster's shape); the one-link cost is exact for D = 1"
)
_REFERENCE = "De Sensi et al. 2024 (Swing, multiport); Jain & Sabharwal 2010"


# -- the rows ---------------------------------------------------------------------------------
@register(
    "reduce_scatter",
    "torus_multiport",
    cost_fn=_rs_cost,
    exact=one_dimensional,
    constraints=_CONSTRAINTS,
    reference=_REFERENCE,
)
def torus_multiport_reduce_scatter(nranks: int, dims: Dims = "auto") -> Schedule:
    r"""Multiport torus reduce-scatter: :math:`2D` torus reduce-scatters at once, one per link.

    Part ``j`` reduce-scatters :math:`1/2D` of every block along the dimensions from the
    :math:`\lfloor j/2 \rfloor`-th on, in direction :math:`\pm 1` (module docstring). With
    :math:`K = \sum_i (d_i - 1)` and :math:`2D` independent links, and on one link (exact for a
    ring, :math:`D = 1`; an estimate for more dimensions, whose turns do not align):

    .. math::
        T = K\alpha + \frac{p-1}{p}\,\frac{n}{2D}(\beta + \gamma) \quad (\text{2D links}),
        \qquad T = 2DK\alpha + \frac{p-1}{p}\,n(\beta + \gamma) \quad (\text{one link})

    References:
        De Sensi et al., "Swing: Short-cutting Rings for Higher Bandwidth Allreduce", NSDI 2024;
        Jain & Sabharwal, "Optimal bucket algorithms for large MPI collectives on torus
        interconnects", ICS 2010.

    See Also:
        :func:`commsim.algorithms.torus.torus_reduce_scatter` (one dimension at a time, one
        link), :func:`torus_multiport_allreduce`, :func:`torus_multiport_allgather`

    Examples:
        >>> s = torus_multiport_reduce_scatter(64, "4x4x4")
        >>> s.nchannels, s.nsteps  # 6 parts, 3 + 3 + 3 steps each
        (6, 9)
    """
    p = nranks
    parts = _parts(torus_reduce_scatter, p, dims)
    if not parts:  # p = 1: nothing to send
        return _alone(torus_reduce_scatter(p, dims))
    return parallel(*parts, algorithm="torus_multiport", params={"dims": dims})


@register(
    "allgather",
    "torus_multiport",
    cost_fn=_ag_cost,
    exact=one_dimensional,
    constraints=_CONSTRAINTS,
    reference=_REFERENCE,
)
def torus_multiport_allgather(nranks: int, dims: Dims = "auto") -> Schedule:
    r"""Multiport torus allgather: :math:`2D` torus allgathers at once, one per link.

    Part ``j`` gathers :math:`1/2D` of every block along the dimensions in the reverse of its
    reduce-scatter order, in direction :math:`\pm 1`. With :math:`K = \sum_i (d_i - 1)`:

    .. math::
        T = K\alpha + \frac{p-1}{p}\,\frac{n}{2D}\beta \quad (\text{2D links}),
        \qquad T = 2DK\alpha + \frac{p-1}{p}\,n\beta \quad (\text{one link})

    (the one-link display exact for :math:`D = 1`). On a full torus the 2D-link β term is the
    injection bound's, :math:`\frac{p-1}{p}n\beta/2D`.

    References:
        De Sensi et al., "Swing: Short-cutting Rings for Higher Bandwidth Allreduce", NSDI 2024;
        Jain & Sabharwal, "Optimal bucket algorithms for large MPI collectives on torus
        interconnects", ICS 2010.

    See Also:
        :func:`commsim.algorithms.torus.torus_allgather` (one dimension at a time, one link),
        :func:`torus_multiport_allreduce`, :func:`torus_multiport_reduce_scatter`

    Examples:
        >>> s = torus_multiport_allgather(12, "3x4")
        >>> s.nchannels, s.nsteps, s.nslots  # 4 parts of 2 + 3 steps; a quarter of each block
        (4, 5, 48)
    """
    p = nranks
    parts = _parts(torus_allgather, p, dims)
    if not parts:
        return _alone(torus_allgather(p, dims))
    return parallel(*parts, algorithm="torus_multiport", params={"dims": dims})


@register(
    "allreduce",
    "torus_multiport",
    cost_fn=_ar_cost,
    exact=one_dimensional,
    constraints=_CONSTRAINTS,
    reference=_REFERENCE,
)
def torus_multiport_allreduce(nranks: int, dims: Dims = "auto") -> Schedule:
    r"""Multiport torus allreduce: :math:`2D` torus allreduces at once, one per link (TPU's
    multi-axis all-reduce).

    Part ``j`` runs the torus reduce-scatter from dimension :math:`\lfloor j/2 \rfloor` on in
    direction :math:`\pm 1`, then the allgather back, on its own contiguous :math:`1/2D` of the
    buffer. With :math:`K = \sum_i (d_i - 1)`:

    .. math::
        T = 2K\alpha + \frac{p-1}{p}\,\frac{n}{2D}(2\beta + \gamma) \quad (\text{2D links}),
        \qquad T = 4DK\alpha + \frac{p-1}{p}\,n(2\beta + \gamma) \quad (\text{one link})

    (the one-link display exact for :math:`D = 1`). On a full torus the 2D-link β term is the
    injection bound's, :math:`2\frac{p-1}{p}n\beta/2D`.

    References:
        De Sensi et al., "Swing: Short-cutting Rings for Higher Bandwidth Allreduce", NSDI 2024;
        Jouppi et al., "TPU v4: An Optically Reconfigurable Supercomputer for Machine Learning
        with Hardware Support for Embeddings", ISCA 2023; Jain & Sabharwal, ICS 2010.

    See Also:
        :func:`commsim.algorithms.torus.torus_allreduce` (one dimension at a time, one link),
        :func:`torus_multiport_reduce_scatter`, :func:`torus_multiport_allgather`

    Examples:
        >>> s = torus_multiport_allreduce(64, "4x4x4")
        >>> s.nchannels, s.nsteps, s.ntransfers  # 6 parts of 2·9 steps of p ranges each
        (6, 18, 6912)
    """
    p = nranks
    ds = parse_dims(dims, p)
    parts = [
        relabel(torus_allreduce(p, [ds[a] for a in axes]), _rank_map(ds, axes, direction), p)
        for axes, direction in part_orders(ds)
    ]
    if not parts:
        return _alone(torus_allreduce(p, dims))
    return _side_by_side(parts, {"dims": dims})
