r"""Packed rings: ``k`` rings at once, each in its own rank order, on its own channel and share.

On a mesh of direct links (a DGX-1's NVLinks) one ring uses one link out of and one into each
rank; ``k`` rings in different orders can use ``k`` links of every rank at once.
:func:`commsim.topology.pack_rings` finds orders whose links fit the graph's capacity (the
command line fills ``rings`` from ``--cluster``/``--topology`` when it can); here ring ``i``
runs the ring schedule with virtual rank ``v`` on rank ``order_i[v]``, on channel ``i`` and on
the ``i``-th ``1/k`` of every slot (:func:`~commsim.algorithms._parallel.parallel`). For
reduce-scatter and allgather a ring's blocks follow its ranks (virtual block ``v`` is rank
``order_i[v]``'s), so every rank still owns its own block.

``rings`` is ``"auto"`` (one ring in rank order: the plain ring on one channel) or the orders,
ranks joined by ``-`` and rings by ``,``: ``"0-1-2-3,0-2-3-1"``.

Cost with ``k`` rings on ``k`` independent links (:class:`commsim.models.Hockney` ``links=k``):
each ring is a ring on :math:`n/k` bytes,

.. math:: T_{\mathrm{AG}} = (p-1)\alpha + \frac{p-1}{p}\,\frac{n}{k}\beta

and on one link the rings take turns at every step: :math:`k(p-1)\alpha + \frac{p-1}{p}n\beta`,
exact for one ring; with more, a step's messages may need more than ``k`` rounds of
:func:`commsim._messages.matchings` (7 for the 6 DGX-1 rings), so it is a lower estimate there.

References:
    Jeaugey, "NCCL 2.0", GTC 2017 (several rings over NVLink); Wang et al., "Blink: Fast and
    Generic Collectives for Distributed ML", MLSys 2020 (packing a DGX-1's links).
"""

from __future__ import annotations

import numpy as np

from commsim._ir import Schedule
from commsim.algorithms._combinators import relabel, relabel_blocks
from commsim.algorithms._parallel import parallel
from commsim.algorithms._registry import FloatOrArray, register
from commsim.algorithms.ring import ring_allgather, ring_allreduce, ring_reduce_scatter
from commsim.errors import ParameterError

__all__ = [
    "format_rings",
    "one_ring",
    "packed_rings_allgather",
    "packed_rings_allreduce",
    "packed_rings_reduce_scatter",
    "parse_rings",
]

Rings = str


def parse_rings(rings: Rings | tuple, nranks: int) -> tuple[tuple[int, ...], ...]:
    """``"auto"``, ``"0-1-2-3,0-2-3-1"`` or a sequence of orders, each a permutation of
    ``0..p-1``.

    Examples:
        >>> parse_rings("auto", 3), parse_rings("0-2-1,0-1-2", 3)
        (((0, 1, 2),), ((0, 2, 1), (0, 1, 2)))
    """
    if isinstance(rings, str):
        text = rings.strip().lower()
        if text == "auto":
            return (tuple(range(nranks)),)
        try:
            orders = tuple(tuple(int(r) for r in ring.split("-")) for ring in text.split(","))
        except ValueError:
            raise ParameterError(
                f"rings must be 'auto' or orders like '0-1-2-3,0-2-3-1', got {rings!r}"
            ) from None
    else:
        orders = tuple(tuple(int(r) for r in ring) for ring in rings)
    if not orders:
        raise ParameterError("rings: at least one ring")
    for ring in orders:
        if sorted(ring) != list(range(nranks)):
            raise ParameterError(
                f"rings: each ring visits every rank 0..{nranks - 1} once, got {'-'.join(map(str, ring))}"
            )
    return orders


def format_rings(orders: tuple[tuple[int, ...], ...]) -> str:
    """The ``rings`` text of ``orders`` (:func:`parse_rings` reads it back)."""
    return ",".join("-".join(map(str, ring)) for ring in orders)


def _packed(factory, nranks: int, rings: Rings, blocks: bool) -> Schedule:
    orders = parse_rings(rings, nranks)
    parts = []
    for order in orders:
        ring = factory(nranks)
        perm = np.asarray(order, dtype=np.int64)
        if np.array_equal(perm, np.arange(nranks)):  # the ring in rank order: itself
            parts.append(ring)  # (its slots are single: renaming blocks changes nothing)
            continue
        parts.append(relabel_blocks(ring, perm) if blocks else relabel(ring, perm, nranks))
    return parallel(*parts, algorithm="packed_rings", params={"rings": rings})


def one_ring(nranks: int, rings: Rings = "auto") -> bool:
    """Where the one-link display is exact: a single ring.

    Examples:
        >>> one_ring(4), one_ring(4, "0-1-2-3,0-3-2-1")
        (True, False)
    """
    return len(parse_rings(rings, nranks)) == 1


def _per_link(nranks: int, rings: Rings, links: int) -> tuple[int, float]:
    """The rings that take turns on a link (``k`` on one link, 1 on ``k`` or more: each ring on
    its own) and the share of :math:`\frac{p-1}{p}n` each link carries (all of it, or
    :math:`1/k`)."""
    k = len(parse_rings(rings, nranks))
    f = (nranks - 1) / nranks
    if links == 1:
        return k, f
    if isinstance(links, bool) or not isinstance(links, int) or links < k:
        raise ParameterError(
            f"packed_rings: its time has a closed form on 1 link or on k = {k} links or more, "
            f"got links={links!r}"
        )
    return 1, f / k


def _rs_cost(nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *,
             rings: Rings = "auto", links: int = 1) -> FloatOrArray:  # fmt: skip
    """:func:`packed_rings_reduce_scatter`'s ``.. math::`` on ``links`` links: exact on ``k`` links or more,
    and on one link for one ring (:func:`one_ring`)."""
    turns, f = _per_link(nranks, rings, links)
    return turns * (nranks - 1) * alpha + f * nbytes * (beta + gamma)


def _ag_cost(nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *,
             rings: Rings = "auto", links: int = 1) -> FloatOrArray:  # fmt: skip
    """:func:`packed_rings_allgather`'s ``.. math::`` on ``links`` links: exact on ``k`` links or more,
    and on one link for one ring (:func:`one_ring`)."""
    turns, f = _per_link(nranks, rings, links)
    return turns * (nranks - 1) * alpha + f * nbytes * beta


def _ar_cost(nranks: int, nbytes: FloatOrArray, alpha: float, beta: float, gamma: float, *,
             rings: Rings = "auto", links: int = 1) -> FloatOrArray:  # fmt: skip
    """:func:`packed_rings_allreduce`'s ``.. math::`` on ``links`` links: exact on ``k`` links or more,
    and on one link for one ring (:func:`one_ring`)."""
    turns, f = _per_link(nranks, rings, links)
    return 2 * turns * (nranks - 1) * alpha + f * nbytes * (2 * beta + gamma)


_CONSTRAINTS = (
    "any p; k rings on k channels, each on 1/k of the buffer; rings='auto' is one ring in rank "
    "order (the CLI packs rings into a --cluster/--topology mesh of direct links, up to 16 hosts)"
)
_REFERENCE = "Jeaugey 2017 (NCCL rings); Wang et al. 2020 (Blink)"


@register("reduce_scatter", "packed_rings", cost_fn=_rs_cost, exact=one_ring,
          constraints=_CONSTRAINTS, reference=_REFERENCE)  # fmt: skip
def packed_rings_reduce_scatter(nranks: int, rings: Rings = "auto") -> Schedule:
    r"""``k`` ring reduce-scatters at once, ring ``i`` in rank order ``order_i``, on channel ``i``
    and the ``i``-th ``1/k`` of every block (module docstring). On ``k`` links / one link:

    .. math::
        T = (p-1)\alpha + \frac{p-1}{p}\,\frac{n}{k}(\beta + \gamma) \quad (\text{k links}),
        \qquad T = k(p-1)\alpha + \frac{p-1}{p}\,n(\beta + \gamma) \quad (\text{one link})

    References:
        Jeaugey, "NCCL 2.0", GTC 2017; Wang et al., "Blink", MLSys 2020.

    See Also:
        :func:`commsim.algorithms.ring.ring_reduce_scatter`, :func:`packed_rings_allgather`,
        :func:`packed_rings_allreduce`, :func:`commsim.topology.pack_rings`

    Examples:
        >>> s = packed_rings_reduce_scatter(4, "0-1-2-3,0-3-2-1")
        >>> s.nchannels, s.nsteps
        (2, 3)
    """
    return _packed(ring_reduce_scatter, nranks, rings, blocks=True)


@register("allgather", "packed_rings", cost_fn=_ag_cost, exact=one_ring,
          constraints=_CONSTRAINTS, reference=_REFERENCE)  # fmt: skip
def packed_rings_allgather(nranks: int, rings: Rings = "auto") -> Schedule:
    r"""``k`` ring allgathers at once, ring ``i`` in rank order ``order_i``, on channel ``i`` and
    the ``i``-th ``1/k`` of every block. On ``k`` links / one link:

    .. math::
        T = (p-1)\alpha + \frac{p-1}{p}\,\frac{n}{k}\beta \quad (\text{k links}),
        \qquad T = k(p-1)\alpha + \frac{p-1}{p}\,n\beta \quad (\text{one link})

    References:
        Jeaugey, "NCCL 2.0", GTC 2017; Wang et al., "Blink", MLSys 2020.

    See Also:
        :func:`commsim.algorithms.ring.ring_allgather`, :func:`packed_rings_reduce_scatter`,
        :func:`packed_rings_allreduce`, :func:`commsim.topology.pack_rings`

    Examples:
        >>> packed_rings_allgather(8, "auto").nchannels
        1
    """
    return _packed(ring_allgather, nranks, rings, blocks=True)


@register("allreduce", "packed_rings", cost_fn=_ar_cost, exact=one_ring,
          constraints=_CONSTRAINTS, reference=_REFERENCE)  # fmt: skip
def packed_rings_allreduce(nranks: int, rings: Rings = "auto") -> Schedule:
    r"""``k`` ring allreduces at once, ring ``i`` in rank order ``order_i``, on channel ``i`` and
    the ``i``-th ``1/k`` of every slot. On ``k`` links / one link:

    .. math::
        T = 2(p-1)\alpha + \frac{p-1}{p}\,\frac{n}{k}(2\beta + \gamma) \quad (\text{k links}),
        \qquad T = 2k(p-1)\alpha + \frac{p-1}{p}\,n(2\beta + \gamma) \quad (\text{one link})

    References:
        Jeaugey, "NCCL 2.0", GTC 2017; Wang et al., "Blink", MLSys 2020.

    See Also:
        :func:`commsim.algorithms.ring.ring_allreduce`, :func:`packed_rings_reduce_scatter`,
        :func:`packed_rings_allgather`, :func:`commsim.topology.pack_rings`

    Examples:
        >>> s = packed_rings_allreduce(4, "0-1-2-3,0-3-2-1")
        >>> s.nchannels, s.nsteps
        (2, 6)
    """
    return _packed(ring_allreduce, nranks, rings, blocks=False)
