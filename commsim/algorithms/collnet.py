r"""CollNet Direct: the fabric's switches reduce between servers (InfiniBand SHARP).

NCCL's CollNetDirect allreduce (with the SHARP plugin on InfiniBand Quantum switches) reduces
inside each server over NVLink, hands each GPU's share to the network, which sums it across
servers in the switches and returns the sum, and gathers the result inside each server again.
A GPU's NIC then carries about ``n/g`` bytes each way (``g`` GPUs per server), where a ring
across servers moves :math:`2\frac{N-1}{N}\frac{n}{g}` per NIC and the hierarchical algorithms
more: the network, not the GPUs, adds.

In the IR the switches are **helper ranks** (IR rule 7) at the fabric tier
(``Schedule.in_network == "fabric"``): helper ``s·g + j`` sits on the switch that GPU ``j`` of
server ``s`` reaches by its NIC (its rail's leaf in a rail-optimized fabric;
:func:`commsim.topology.place`), so every helper of rail ``j`` in one scalable unit is that
unit's leaf ``j``. The buffer is ``L = g`` slices (one per GPU of a server, as NCCL's heads), each
cut in ``M`` pieces (``M = N`` servers): piece ``m`` of slice ``j`` is reduced by helper
``m·g + j``. Four steps:

1. reduce-scatter inside each server, direct: every GPU sends each slice it does not own to
   its owner (GPU ``j`` owns slice ``j``), ``g - 1`` messages of ``n/g`` bytes, ordered by shift;
2. to the switches: server ``m`` copies piece ``m`` of each slice to its helper, then every
   other server adds its piece (two steps: a helper starts empty), each owner sending ``N - 1``
   pieces of ``n/(gN)`` bytes, one per round, to ``N - 1`` different helpers;
3. the multicast back: each helper sends its summed piece to the owner of that slice in every
   server;
4. allgather inside each server, direct: each owner sends its summed slice to the other GPUs.

With the single-port Hockney model (exact for even ``p`` on whole servers, ``pipeline = 1``):

.. math::
    T = (2(g-1) + 2N)\,\alpha + 2n\beta + \left(\frac{g-1}{g} + \frac{N-1}{gN}\right) n\gamma

On a cluster the intra-server steps run on NVLink and steps 2–3 on the NICs (``n/g`` each way
per NIC). Where the servers span several scalable units each unit's leaf reduces ``1/N`` of
every slice of its rail (the reduction spread over the leaves, not a tree through the spines):
on a non-blocking fabric the uplinks carry no more than they can; an oversubscribed one is
charged more than a SHARP tree's single aggregated message per leaf would cost (an upper bound
there). NCCL charges CollNetDirect's latency once per call (:func:`commsim.models._library.
call_cost`: 2(3.7 µs + (g-1)·0.4 µs) + 31 µs) and its bandwidth at 0.85 from Hopper on (a
cluster's ``sharp_efficiency``).

For other ``p`` (helpers ``k = ⌊p/2⌋`` beside the first ``k`` of ``w = p - k`` GPUs, servers of
``g = ranks_per_node``, a short last server whose GPU ``j mod g_s`` owns slice ``j``): rail
``j`` has the helpers ``s·g + j < k``, pieces ``m`` beyond its count go to its helper ``m`` modulo
that count, and a rail with none borrows helper ``j mod k``: the schedule still computes the
allreduce (verified), its cost formula an estimate that does not count the short server's
GPUs owning several slices (30–50 % below the schedule's Hockney time at ``p = 20..30``; the
models time the schedule itself, not the formula).

References:
    Graham et al., "Scalable Hierarchical Aggregation Protocol (SHArP): A Hardware Architecture
    for Efficient Data Reduction", COMHPC 2016. NCCL 2.12 release notes (CollNet Direct);
    NCCL ``src/graph/tuning.cc`` (commit 5067397: CollNetDirect's latency and bandwidth).
"""

from __future__ import annotations

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms import _pipeline
from commsim.algorithms._combinators import lazy
from commsim.algorithms._hierarchy import check_ranks_per_node
from commsim.algorithms._registry import FloatOrArray, register

__all__ = ["collnet_direct_allreduce"]


def _layout(p: int, g: int) -> tuple[int, int, int, int, np.ndarray, list[np.ndarray]]:
    """``(w, k, L, M, owner, helpers)``: workers, helpers, slices, pieces per slice;
    ``owner[s, j]`` the GPU of server ``s`` that owns slice ``j``; ``helpers[j]`` the helper
    indices (``0..k-1``) of rail ``j``."""
    k = p // 2
    w = p - k
    L, N = min(g, w), -(-w // g)
    first = np.arange(N)[:, None] * g
    g_s = np.minimum(g, w - first)
    owner = first + np.arange(L)[None, :] % g_s
    helpers = []
    for j in range(L):
        mine = np.arange(N) * g + j
        mine = mine[mine < k]
        helpers.append(mine if len(mine) else np.array([j % k]))
    M = max(N, max(len(h) for h in helpers))
    return w, k, L, M, owner, helpers


class _Phases:
    """The steps of :func:`collnet_direct_allreduce` (the module docstring), each built when
    asked for (the two to and from the switches hold ``N`` transfers per piece: 8.4 M each at
    16,384 ranks); slot ``j·M + m`` is piece ``m`` of slice ``j``."""

    def __init__(self, p: int, g: int) -> None:
        w, _, L, M, owner, helpers = _layout(p, g)
        self.w, self.L, self.M, self.owner, self.N = w, L, M, owner, owner.shape[0]
        self.helper = w + np.stack([hj[np.arange(M) % len(hj)] for hj in helpers])  # [L, M]
        self.inside = _inside_pairs(w, g, L, self.N)
        pieces = L * M
        counts = [len(self.inside[0])] if self.inside else []
        counts += [pieces, (self.N - 1) * pieces] if self.N > 1 else [pieces]
        counts += [self.N * pieces] + ([len(self.inside[0])] if self.inside else [])
        self.counts = counts
        kinds = ["rs"] if self.inside else []
        kinds += ["copy", "add"] if self.N > 1 else ["copy"]
        self.kinds = [*kinds, "multicast", *(["ag"] if self.inside else [])]

    def __len__(self) -> int:
        return len(self.kinds)

    def __getitem__(self, i: int) -> Step:
        kind, M = self.kinds[i], self.M
        if kind in ("rs", "ag"):  # 1 and 4: inside each server, along the same pairs
            a, b, j = self.inside
            return _step(a, b, j * M, M, True) if kind == "rs" else _step(b, a, j * M, M, False)
        # 2 and 3: shift t, server (m - t) mod N sends piece m to its helper (copy at t = 0,
        # add after), and the helper multicasts it back to server (m + t) mod N: each shift one
        # round (arrays over t, j, m)
        ts = {"copy": np.arange(1), "add": np.arange(1, self.N)}.get(kind, np.arange(self.N))
        t, j, m = np.meshgrid(ts, np.arange(self.L), np.arange(M), indexing="ij")
        slot = (j * M + m).ravel()
        helper = self.helper[j, m].ravel()
        if kind == "multicast":
            return _step(helper, self.owner[(m + t) % self.N, j].ravel(), slot, 1, False)
        return _step(self.owner[(m - t) % self.N, j].ravel(), helper, slot, 1, kind == "add")


def _inside_pairs(w: int, g: int, L: int, N: int) -> list[np.ndarray]:
    """Step 1's transfers (``src``, ``dst``, slice) inside each server: GPU ``a`` sends slice
    ``j`` (not its own) to its owner, ordered by shift so that each shift is one round; ``[]``
    where no server has two GPUs."""
    gpu = np.arange(w)
    server = gpu // g
    parts = []
    js = np.arange(L)
    for t in range(1, g):
        for s in range(N):
            mine = gpu[server == s]
            if t >= len(mine):
                continue
            own = js % len(mine)  # slice j's owner among the server's GPUs
            parts.append((mine[(own + t) % len(mine)], mine[own], js))
    return [np.concatenate(c).astype(np.int64) for c in zip(*parts, strict=True)] if parts else []


def _step(src: np.ndarray, dst: np.ndarray, slot: np.ndarray, count: int, red: bool) -> Step:
    n = len(src)
    return Step(src, dst, np.broadcast_to(slot, (n,)).copy(), np.broadcast_to(slot, (n,)).copy(),
                np.full(n, count, dtype=np.int64), np.full(n, red, dtype=bool))  # fmt: skip


def _exact(nranks: int, ranks_per_node: int = 8, pipeline: int = 1, **_: object) -> bool:
    """Even ``p`` on whole servers of at least two GPUs (or one rank), not pipelined."""
    w = nranks - nranks // 2
    g = ranks_per_node
    return nranks == 1 or (pipeline == 1 and nranks % 2 == 0 and g > 1 and w % g == 0)


def _cost(
    nranks: int,
    nbytes: FloatOrArray,
    alpha: float,
    beta: float,
    gamma: float,
    ranks_per_node: int = 8,
    pipeline: int = 1,
) -> FloatOrArray:
    """The single-port Hockney time of :func:`collnet_direct_allreduce` (its ``.. math::``),
    exact where ``_exact``; pipelined, the wavefront's extra rounds added as ``nvls_tree``'s."""
    g = check_ranks_per_node(ranks_per_node)
    chunks = _pipeline.check_chunks(pipeline, "pipeline")
    if nranks < 2:
        return 0.0 * nbytes
    w = nranks - nranks // 2
    L, N = min(g, w), -(-w // g)
    base = (
        (2 * (L - 1) + 2 * N) * alpha
        + 2 * nbytes * beta
        + ((L - 1) / L + (N - 1) / (L * N)) * nbytes * gamma
    )
    if chunks == 1:
        return base
    inside = [(0, L - 1)] if L > 1 else []
    middle = [(1, 1), *([(2, N - 1)] if N > 1 else []), (3, N)]
    labels, rounds = zip(*inside, *middle, *([(4, L - 1)] if L > 1 else []), strict=True)
    return base + alpha * _pipeline.wavefront_extra(labels, chunks, rounds)


@register(
    "allreduce",
    "collnet_direct",
    cost_fn=_cost,
    exact=_exact,
    constraints="in-network reduction between servers (InfiniBand SHARP): p/2 helper ranks "
    "are the fabric's switches (in_network='fabric'), one beside each GPU's NIC; needs a "
    "cluster whose leaves reduce (sharp = true); servers of ranks_per_node GPUs; any p (odd "
    "p or a short last server: an estimate); pipeline overlaps the steps chunk by chunk",
    reference="NCCL 2.12 CollNet Direct; Graham et al. 2016 (SHARP)",
    helpers_for=lambda workers: workers,
)
def collnet_direct_allreduce(nranks: int, ranks_per_node: int = 8, pipeline: int = 1) -> Schedule:
    r"""CollNet Direct: reduce-scatter in each server, the fabric's switches sum the slices
    across servers, allgather in each server (:mod:`commsim.algorithms.collnet` has the four
    steps and the placement).

    ``w = p - ⌊p/2⌋`` GPUs in servers of ``g = ranks_per_node`` and ``⌊p/2⌋`` helper ranks, the
    fabric's SHARP switches (``Schedule.in_network == "fabric"``). With the single-port Hockney
    model, exact for even ``p`` on whole servers and ``pipeline = 1``:

    .. math::
        T = (2(g-1) + 2N)\,\alpha + 2n\beta + \left(\frac{g-1}{g} + \frac{N-1}{gN}\right) n\gamma

    ``pipeline = K > 1`` runs the steps as a wavefront of ``K`` chunks
    (:func:`commsim.algorithms.pipeline`; its time an estimate).

    References:
        Graham et al., "Scalable Hierarchical Aggregation Protocol (SHArP)", COMHPC 2016.
        NCCL 2.12 release notes (CollNet Direct); NCCL ``src/graph/tuning.cc``.

    See Also:
        :func:`commsim.algorithms.in_network.nvls_tree_allreduce` (the servers' NVSwitches
        reduce inside, a ring between them)

    Examples:
        >>> s = collnet_direct_allreduce(32, ranks_per_node=8)  # 2 servers + 16 SHARP helpers
        >>> s.workers, s.helpers, s.switch_tier, s.nsteps  # RS, copy, add, multicast, AG
        (16, 16, 'fabric', 5)
    """
    g = check_ranks_per_node(ranks_per_node)
    chunks = _pipeline.check_chunks(pipeline, "pipeline")
    params = {"ranks_per_node": g}
    k = nranks // 2
    if k == 0:
        return lazy("allreduce", nranks, 0, lambda i: Step.empty(), slot_units=1,
                    algorithm="collnet_direct", params=params, ntransfers_hint=0,
                    max_step_transfers_hint=0)  # fmt: skip
    _, _, L, M, _, _ = _layout(nranks, g)
    steps = _Phases(nranks, g)
    whole = lazy(
        "allreduce", nranks, len(steps), steps.__getitem__, slot_units=L * M,
        algorithm="collnet_direct", params=params, helpers=k, in_network="fabric",
        ntransfers_hint=sum(steps.counts), max_step_transfers_hint=max(steps.counts),
    )  # fmt: skip
    return _pipeline.pipeline(whole, chunks)
