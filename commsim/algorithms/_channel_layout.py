r"""A schedule on ``k`` channels, laid out as its registry row says: NCCL's channels over the NICs.

:func:`commsim.algorithms.channels` runs ``k`` *copies* of one schedule, each on ``1/k`` of the
buffer and its own channel. That is the generic layout, and on a rail-optimized cluster (GPU
``i`` of every server on rail ``i``, its own NIC) it is the wrong one for a ring: every copy's
server-to-server hops leave and enter on the same GPUs, so all ``k`` channels queue on one or
two of the server's NICs while the others idle. NCCL's ring search instead gives each channel a
ring of its own, so that 8 channels on an 8-NIC server drive all 8 NICs.

A channel layout is knowledge about an algorithm, so it lives on the algorithm's registry row
(:attr:`commsim.algorithms.AlgorithmInfo.channel_ranks`): a function that returns, per channel,
a permutation of the ranks; channel ``c`` runs the schedule with rank ``v`` renamed
``perm[c][v]`` (:func:`commsim.algorithms.relabel`), on share ``c`` of every slot
(:func:`commsim.algorithms.parallel`). :func:`on_channels` is the one function that lays out
channels: the CLI (``predict``, ``compare``, ``tune``, ``validate``) and the tuner all call it;
a row without a layout, or a schedule no row claims, gets the copies.

:func:`rotate_in_servers` is the layout of the server-ordered rows (``snake_ring``,
``nccl_tree``): channel ``c`` rotates every server's local order by ``c``,

.. math::

    \pi_c(s g + l) = s g + (l + c) \bmod q_s,

where ``g`` is ``ranks_per_node``, ``s`` the server, ``l`` the local index and ``q_s`` the
server's size (``g``, or fewer for a short last server). A snake ring joins server ``i``'s exit
GPU to server ``i + 1``'s entry GPU on one rail ``r``; rotated, channel ``c`` joins them on rail
``(r + c) mod g``, so ``g`` channels put one ring's worth of traffic on every rail in each
direction, where ``g`` copies put ``g`` rings' worth on one rail. At large sizes, where the
NICs bound the time, that is up to ``g`` times faster (``docs/library.md`` says what else
changes). The NCCL tree's leaders (local rank 0) become local rank ``c``: each channel's tree
crosses the servers on its own rail.

Relabelling ranks keeps an allreduce an allreduce (every rank holds the same role: all of it
in, all of it out), so a layout is accepted on allreduce rows only
(:func:`commsim.algorithms.register` checks); the result is verified like any schedule.

References:
    NVIDIA NCCL, ``src/graph/search.cc`` (``ncclTopoCompute``: one ring per channel, searched
    over the NICs) and ``src/graph/rings.cc``; Jeaugey, "NCCL 2.0", GTC 2017 (channels).
    NVIDIA, "DGX SuperPOD: rail-optimized network" (GPU ``i`` of every node on leaf ``i``).

See Also:
    :func:`commsim.algorithms.channels`: the generic layout (copies).
    :func:`commsim.algorithms.nccl.snake_ring_allreduce`,
    :func:`commsim.algorithms.nccl.nccl_tree_allreduce`: the rows that spread their channels.
"""

from __future__ import annotations

import numpy as np

from commsim._ir import Schedule
from commsim.algorithms._combinators import relabel
from commsim.algorithms._parallel import channels, parallel
from commsim.algorithms._registry import REGISTRY
from commsim.errors import ParameterError

__all__ = ["on_channels", "rotate_in_servers"]


def rotate_in_servers(nranks: int, k: int, ranks_per_node: int) -> np.ndarray:
    """Per channel ``c < k``, every server's ranks rotated by ``c`` (the module docstring's
    :math:`\\pi_c`); a short last server rotates within its own size.

    Examples:
        >>> rotate_in_servers(6, 2, 4).tolist()
        [[0, 1, 2, 3, 4, 5], [1, 2, 3, 0, 5, 4]]
    """
    r = np.arange(nranks, dtype=np.int64)
    base = (r // ranks_per_node) * ranks_per_node
    size = np.minimum(ranks_per_node, nranks - base)
    shift = np.arange(k, dtype=np.int64)[:, None]
    return base + (r - base + shift) % size


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ParameterError(f"channels must be an integer >= 1, got {k!r}")
    return int(k)


def on_channels(schedule: Schedule, k: int) -> Schedule:
    """``schedule`` on ``k`` channels, each on ``1/k`` of the buffer, laid out by its row.

    The row of ``(schedule.collective, schedule.algorithm)`` lays them out when it has a
    ``channel_ranks`` (channel ``c`` is ``schedule`` relabelled by its ``c``-th permutation),
    else they are ``k`` copies (:func:`commsim.algorithms.channels`). ``k = 1`` returns
    ``schedule`` itself. The result records ``channels = k`` in its parameters.

    Examples:
        >>> import commsim
        >>> s = commsim.build("allreduce", "snake_ring", nranks=8, ranks_per_node=4)
        >>> two = on_channels(s, 2)
        >>> two.nchannels, two.params["channels"], commsim.verify(two).nsteps
        (2, 2, 14)
        >>> sorted({(int(a), int(b)) for a, b in zip(*two.step(0)[:2]) if a // 4 != b // 4})
        [(0, 4), (3, 7), (4, 0), (5, 1)]
    """
    k = _check_k(k)
    if k == 1:
        return schedule
    row = REGISTRY.get((schedule.collective, schedule.algorithm))
    layout = getattr(row, "channel_ranks", None)
    perms = None
    if layout is not None:
        params = {key: schedule.params.get(key, v) for key, v in row.params.items()}
        perms = layout(schedule.nranks, k, **params)
    if perms is None:
        return channels(schedule, k)
    return parallel(
        *(relabel(schedule, perm, schedule.nranks) for perm in np.asarray(perms)),
        algorithm=schedule.algorithm,
        params={**schedule.params, "channels": k},
    )
