r"""Parameter-server allreduce: push shards to their servers, servers sum, workers pull them back.

The buffer is cut into ``k`` **shards**, one per server. Every worker **pushes** shard ``j`` to
server ``j``, which sums what arrives; then server ``j`` sends the summed shard back to every
worker (**pull**). Two placements (``placement=``):

* ``"colocated"`` (BytePS' summation service on every machine, Horovod's comparison point): all
  ``p`` ranks are workers and ``k`` of them also serve, server ``j`` on rank
  :math:`s_j = \lfloor j p / k \rfloor`; a server's own shard is already in place. With
  ``k = p`` this is the direct reduce-scatter + allgather, with ``k = 1`` the classic single
  parameter server (a reduce then a broadcast, both as a star).
* ``"dedicated"`` (TensorFlow's parameter-server strategy, BytePS' CPU machines): the last ``k``
  of the ``p`` ranks are servers that hold no data of their own (helper ranks, IR rule 7:
  :attr:`commsim.Schedule.helpers`); the first ``w = p - k`` ranks are the workers, and the
  allreduce is over them alone.

Steps are matchings, so every model and backend sees one message per rank and step. Colocated:
in push step ``t = 1 .. p-1`` rank ``r`` sends to rank ``r + t`` (mod ``p``) when that rank is a
server, so every server receives exactly once per step (its ``p - 1`` incoming shards are the
step count: no schedule does it in fewer); the pull mirrors it (server ``s`` sends to ``s + t``).
Dedicated: with :math:`m = \max(w, k)`, push step ``t = 0 .. m-1`` pairs worker ``i`` with server
``(t - i) mod m`` (when below ``k``), a proper edge colouring of the complete bipartite graph
:math:`K_{w,k}` in :math:`m` colours (König); the first shard a server receives overwrites, the
others reduce; the pull pairs server ``j`` with worker ``(t - j) mod m``.

References:
    Li et al., "Scaling Distributed Machine Learning with the Parameter Server", OSDI 2014
    (sharded key ranges on server nodes, push and pull).
    Jiang et al., "A Unified Architecture for Accelerating Distributed DNN Training in
    Heterogeneous GPU/CPU Clusters" (BytePS), OSDI 2020 (colocated summation servers, the
    communication time of dedicated and colocated servers).
    Sergeev & Del Balso, "Horovod: fast and easy distributed deep learning in TensorFlow", 2018
    (ring allreduce against parameter servers).
"""

from __future__ import annotations

import numbers

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms._combinators import lazy
from commsim.algorithms._registry import FloatOrArray, register
from commsim.errors import ParameterError

__all__ = ["PLACEMENTS", "parameter_server_allreduce", "server_count", "server_ranks"]

#: Where the servers run: on ``k`` of the workers, or on ``k`` ranks of their own.
PLACEMENTS = ("colocated", "dedicated")


def server_count(nranks: int, servers: int | None = None, placement: str = "colocated") -> int:
    """The server count ``k``, checked: ``servers``, or by default ``p`` colocated (every rank
    serves, BytePS) and ``⌊p/2⌋`` dedicated (as many servers as workers, BytePS' balanced case;
    0 at ``p = 1``, where the one worker has nothing to do).

    Raises:
        ParameterError: ``servers`` not an integer, below 1, above ``p`` (colocated) or leaving
            no worker (dedicated: at most ``p - 1``); an unknown ``placement``.

    Examples:
        >>> server_count(8), server_count(8, placement="dedicated"), server_count(8, 3)
        (8, 4, 3)
    """
    if placement not in PLACEMENTS:
        raise ParameterError(f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
    dedicated = placement == "dedicated"
    if servers is None:
        return nranks // 2 if dedicated else nranks
    if isinstance(servers, bool) or not isinstance(servers, numbers.Integral):
        raise ParameterError(f"servers must be an integer, got {servers!r}")
    top = nranks - 1 if dedicated else nranks
    if not 1 <= servers <= top:
        why = (
            f"dedicated servers leave at least one of the {nranks} ranks a worker"
            if dedicated
            else f"there are {nranks} ranks"
        )
        raise ParameterError(f"servers must be in [1, {top}] ({why}), got {servers}")
    return int(servers)


def server_ranks(
    nranks: int, servers: int | None = None, placement: str = "colocated"
) -> np.ndarray:
    """The rank of each server: :math:`\\lfloor j p / k \\rfloor` colocated, ``w + j`` dedicated.

    Examples:
        >>> server_ranks(8, 3).tolist(), server_ranks(8, 3, "dedicated").tolist()
        ([0, 2, 5], [5, 6, 7])
    """
    k = server_count(nranks, servers, placement)
    j = np.arange(k, dtype=np.int64)
    return nranks - k + j if placement == "dedicated" else j * nranks // k


# -- steps --------------------------------------------------------------------------------------
def _colocated_steps(p: int, k: int):
    """Push steps ``1 .. p-1`` then pull steps ``1 .. p-1`` (step index ``i`` is shift
    ``i % (p-1) + 1``): server ``j`` on rank ``s_j`` takes shard ``j`` from ``s_j - t`` and
    later gives it to ``s_j + t``."""
    s = server_ranks(p, k)
    j = np.arange(k, dtype=np.int64)
    ones = np.ones(k, dtype=np.int64)
    push, pull = np.ones(k, dtype=bool), np.zeros(k, dtype=bool)

    def step(i: int) -> Step:
        t = i % (p - 1) + 1
        if i < p - 1:
            return Step((s - t) % p, s, j, j, ones, push)
        return Step(s, (s + t) % p, j, j, ones, pull)

    return step


def _dedicated_steps(p: int, k: int):
    """Push steps ``0 .. m-1`` then pull steps ``0 .. m-1``, ``m = max(w, k)``: worker ``i`` and
    server ``j`` meet in step ``(i + j) mod m``. Server ``j``'s first shard arrives at step 0,
    or at step ``j`` when ``1 <= j <= k - w`` (no worker ``i < w`` has ``i + j`` wrap to 0)."""
    w = p - k
    m = max(w, k)
    i = np.arange(w, dtype=np.int64)
    j_all = np.arange(k, dtype=np.int64)
    first = np.where((j_all == 0) | (j_all >= m - w + 1), 0, j_all)

    def step(n: int) -> Step:
        t = n % m
        j = (t - i) % m
        keep = j < k
        wi, sj = i[keep], j[keep]
        ones = np.ones(len(wi), dtype=np.int64)
        if n < m:
            return Step(wi, w + sj, sj, sj, ones, first[sj] != t)
        return Step(w + sj, wi, sj, sj, ones, np.zeros(len(wi), dtype=bool))

    return step


# -- exact costs --------------------------------------------------------------------------------
def _cost(
    nranks: int,
    nbytes: FloatOrArray,
    alpha: float,
    beta: float,
    gamma: float,
    servers: int | None = None,
    placement: str = "colocated",
) -> FloatOrArray:
    """The single-port Hockney time of :func:`parameter_server_allreduce` (its ``.. math::``),
    exact for every ``p``, ``k`` and placement."""
    p = nranks
    k = server_count(p, servers, placement)
    if placement == "colocated":
        return 2 * (p - 1) * alpha + (p - 1) / k * nbytes * (2 * beta + gamma)
    if k == 0:
        return 0.0 * nbytes
    w = p - k
    m = max(w, k)
    return 2 * m * alpha + 2 * m / k * nbytes * beta + (w - 1) / k * nbytes * gamma


@register(
    "allreduce",
    "parameter_server",
    cost_fn=_cost,
    constraints="servers=k shards (default: every rank colocated, p/2 dedicated); "
    "placement=dedicated puts k server ranks beside p-k workers (helper ranks)",
    reference="Li et al., OSDI 2014; Jiang et al. (BytePS), OSDI 2020",
    choices={"placement": PLACEMENTS},
)
def parameter_server_allreduce(
    nranks: int, servers: int | None = None, placement: str = "colocated"
) -> Schedule:
    r"""Parameter-server allreduce with ``k = servers`` shards: push, sum on the servers, pull.

    Colocated (every rank a worker, ``k`` of them also servers): each server receives ``p - 1``
    shards of ``n/k`` bytes and reduces them, then sends its sum to ``p - 1`` ranks. Dedicated
    (``w = p - k`` workers, ``k`` server ranks holding no data), with :math:`m = \max(w, k)`: each
    push and pull is ``m`` matchings of ``n/k``-byte messages, and a server reduces ``w - 1`` of
    the ``w`` shards it receives. With the single-port Hockney model:

    .. math::
        T = 2(p-1)\,\alpha + \frac{p-1}{k}\,n(2\beta + \gamma) \quad (\text{colocated}),
        \qquad T = 2m\,\alpha + 2\frac{m}{k}\,n\beta + \frac{w-1}{k}\,n\gamma
        \quad (\text{dedicated})

    Colocated with ``k = p`` has ring allreduce's bandwidth term :math:`2\frac{p-1}{p}n\beta`
    with ``2(p-1)`` latencies, BytePS' observation that colocated summation servers cost what
    allreduce costs; one server (``k = 1``) carries ``2(p-1)n`` bytes through one port, the
    bottleneck Horovod was built to avoid. Dedicated with ``k = w = p/2``:
    :math:`T = p\alpha + 2n\beta + \dots`: every worker sends ``n`` and receives ``n`` (BytePS'
    bound for dedicated servers, without the pipelining of push and pull that BytePS adds).

    References:
        Li et al., "Scaling Distributed Machine Learning with the Parameter Server", OSDI 2014.
        Jiang et al., "A Unified Architecture for Accelerating Distributed DNN Training in
        Heterogeneous GPU/CPU Clusters", OSDI 2020 (BytePS).

    See Also:
        :func:`commsim.algorithms.ring.ring_allreduce`,
        :func:`commsim.algorithms.direct.direct_allreduce`, :func:`server_ranks`,
        :func:`commsim.algorithms.in_network.nvls_allreduce` (the dedicated servers' matchings
        with the switch as the servers)

    Examples:
        >>> s = parameter_server_allreduce(6, servers=2)
        >>> s.nsteps, s.nslots, s.ntransfers  # 5 push + 5 pull steps, one per server each
        (10, 2, 20)
        >>> d = parameter_server_allreduce(6, servers=2, placement="dedicated")
        >>> d.helpers, d.workers, d.nsteps, d.ntransfers  # 4 workers x 2 servers, both ways
        (2, 4, 8, 16)
    """
    p = nranks
    k = server_count(p, servers, placement)
    params = {"servers": k, "placement": placement}
    if placement == "colocated":
        nsteps = 2 * (p - 1)
        return lazy(
            "allreduce", p, nsteps, _colocated_steps(p, k), slot_units=k,
            algorithm="parameter_server", params=params,
            ntransfers_hint=nsteps * k, max_step_transfers_hint=k if nsteps else 0,
        )  # fmt: skip
    if k == 0:  # p = 1: the one worker holds the sum already
        return lazy("allreduce", p, 0, lambda i: Step.empty(), slot_units=1, algorithm="parameter_server",
                    params=params, ntransfers_hint=0, max_step_transfers_hint=0)  # fmt: skip
    w = p - k
    m = max(w, k)
    return lazy(
        "allreduce", p, 2 * m, _dedicated_steps(p, k), slot_units=k,
        algorithm="parameter_server", params=params, helpers=k,
        ntransfers_hint=2 * w * k, max_step_transfers_hint=min(w, k),
    )  # fmt: skip
