r"""In-network reduction: the switch sums the GPUs' data and multicasts the sum (NVLink SHARP).

NVLink SHARP ("NVLS", third-generation NVSwitch: H100, H200, B200, GB200 systems) lets a GPU
ask the NVSwitch for the sum of one slice of every GPU's buffer (``multimem.ld_reduce``) and
store a slice to every GPU at once (``multimem.st``, a multicast): the switch, not a GPU, adds.
NCCL (2.17 and later) runs its NVLS allreduce so: GPU ``j`` owns slice ``j``; it reads the
switch's sum of slice ``j`` and multicasts it back. Per GPU that is about ``n`` bytes out and
``n`` bytes in, where a ring moves :math:`2\frac{p-1}{p}n` each way: the bus bandwidth can exceed
the NVLink line rate.

In the IR the switch is **helper ranks** (IR rule 7) marked ``in_network``: helper ``j`` is the
switch acting for slice ``j`` (the reduction behind GPU ``j``'s ``ld_reduce``). It holds no data;
every worker pushes its slice ``j`` to helper ``j`` (the first arrival overwrites, the others
add), and helper ``j`` sends the sum to every worker (the multicast, one message per worker:
what each GPU's NVLink carries). The topology model places the helpers on the NVSwitch vertex
(:func:`commsim.topology.place`), so their messages cross only the switch–GPU links, and the
verifier proves the result as for any schedule.

With ``k`` helpers and ``w >= k`` workers, push round ``t`` pairs worker ``i`` with helper
``(t - i) mod w`` (when below ``k``) and pull round ``t`` helper ``j`` with worker
``(t - j) mod w``: matchings, as in the dedicated parameter server. With ``segments = S`` the
buffer is cut into ``S`` chunks and the pull of chunk ``c - 1`` runs in the same rounds as the
push of chunk ``c`` (full duplex: a GPU sends its next chunk while the switch multicasts the
last one), NCCL's pipelining of its two NVLS phases. The default ``S = 8`` puts the bandwidth
term :math:`(1 + 1/S)\,n\beta` within 12.5 % of the in-network bound :math:`n\beta` for
:math:`9w` latencies (``S = 1``: the two phases one after the other, :math:`2n\beta`).

References:
    NVIDIA, "NVIDIA H100 Tensor Core GPU Architecture" (whitepaper, 2022): the third-generation
    NVSwitch's NVLink SHARP, in-network reductions and multicast.
    NCCL 2.17 release notes (NVLS algorithm); NCCL ``src/graph/tuning.cc`` (commit 5067397:
    ``nvlsEfficiency`` 0.85 on Hopper, its NVLS bus bandwidth per channel).
"""

from __future__ import annotations

import numbers

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms import _pipeline
from commsim.algorithms._combinators import lazy
from commsim.algorithms._hierarchy import check_ranks_per_node
from commsim.algorithms._registry import FloatOrArray, register
from commsim.errors import ParameterError, ScheduleError

__all__ = ["nvls_allreduce", "nvls_helpers", "nvls_tree_allreduce"]


def nvls_helpers(nranks: int) -> int:
    """The helper (switch) ranks of :func:`nvls_allreduce` on ``p`` ranks: ``k = ⌊p/2⌋``, one
    per slice, beside ``w = p - k`` workers (``w = k`` for even ``p``).

    Examples:
        >>> nvls_helpers(16), nvls_helpers(7), nvls_helpers(1)
        (8, 3, 0)
    """
    return nranks // 2


def _one_switch(nranks: int, ranks_per_node: int | None) -> None:
    """NVLS reduces inside one NVSwitch: more GPUs than one server's are refused."""
    w = nranks - nvls_helpers(nranks)
    if ranks_per_node is not None and w > ranks_per_node:
        raise ScheduleError(
            f"nvls reduces inside one NVSwitch: {w} GPUs are more than one server's "
            f"ranks_per_node={ranks_per_node} (run it on one node)"
        )


def _segments(segments: int) -> int:
    if isinstance(segments, bool) or not isinstance(segments, numbers.Integral) or segments < 1:
        raise ParameterError(f"segments must be an integer >= 1, got {segments!r}")
    return int(segments)


def _nvls_steps(w: int, k: int, chunks: int):
    """Round ``r = c w + t``: push of chunk ``c`` (while ``c < S``) beside the pull of chunk
    ``c - 1`` (while ``c >= 1``), shift ``t``; slot ``c k + j`` is chunk ``c`` of slice ``j``."""
    i = np.arange(w, dtype=np.int64)
    j_all = np.arange(k, dtype=np.int64)

    def step(r: int) -> Step:
        c, t = divmod(r, w)
        parts = []
        if c < chunks:  # push: worker i -> helper (t - i) mod w; helpers add after the first
            j = (t - i) % w
            keep = j < k
            wi, sj = i[keep], j[keep]
            parts.append((wi, w + sj, c * k + sj, np.full(len(wi), t != 0)))
        if c >= 1:  # pull: helper j -> worker (t - j) mod w, chunk c - 1
            wi = (t - j_all) % w
            parts.append((w + j_all, wi, (c - 1) * k + j_all, np.zeros(k, dtype=bool)))
        src, dst, slot, red = (np.concatenate(col) for col in zip(*parts, strict=True))
        return Step(src, dst, slot, slot, np.ones(len(src), dtype=np.int64), red)

    return step


def _nvls_cost(
    nranks: int,
    nbytes: FloatOrArray,
    alpha: float,
    beta: float,
    gamma: float,
    segments: int = 8,
    ranks_per_node: int | None = None,
) -> FloatOrArray:
    """The single-port Hockney time of :func:`nvls_allreduce` (its ``.. math::``), exact for
    every ``p`` and ``segments``."""
    p, S = nranks, _segments(segments)
    _one_switch(p, ranks_per_node)
    k = nvls_helpers(p)
    if k == 0:
        return 0.0 * nbytes
    w = p - k
    return (
        (S + 1) * w * alpha + (S + 1) * w / (k * S) * nbytes * beta + (w - 1) / k * nbytes * gamma
    )


@register(
    "allreduce",
    "nvls",
    cost_fn=_nvls_cost,
    constraints="in-network reduction (NVLink SHARP): p/2 helper ranks are the NVSwitch "
    "(in_network), beside p - p/2 GPUs; the topology model needs a reducing switch "
    "(dgx-h100, dgx-h200, dgx-b200, gb200-nvl72: nvls) and one server's GPUs "
    "(ranks_per_node); segments pipelines push and multicast",
    reference="NVLink SHARP (NVIDIA H100 architecture whitepaper, 2022); NCCL 2.17 NVLS",
    helpers_for=lambda workers: workers,
)
def nvls_allreduce(nranks: int, segments: int = 8, ranks_per_node: int | None = None) -> Schedule:
    r"""NVLS allreduce: every GPU pushes slice ``j`` to the switch, which sums and multicasts it.

    ``k = ⌊p/2⌋`` helper ranks (the switch, one per slice; ``Schedule.in_network``) and
    ``w = p - k`` workers (the GPUs); the buffer is ``k`` slices of ``S = segments`` chunks. A
    round moves :math:`b = n/(kS)` bytes per message, and there are :math:`(S+1)w` rounds (the
    push of chunk ``c`` beside the multicast of chunk ``c - 1``); a helper adds ``w - 1`` of the
    ``w`` contributions it receives. With the single-port Hockney model:

    .. math::
        T = (S+1)\,w\,\alpha + \frac{(S+1)\,w}{kS}\,n\beta + \frac{w-1}{k}\,n\gamma

    With ``w = k`` (even ``p``) each GPU sends ``n`` and receives ``n`` bytes: ``2nβ`` for
    ``S = 1`` and :math:`(1 + 1/S)\,n\beta` pipelined, against the ring's
    :math:`2\frac{w-1}{w}n\beta`; the in-network bound is :math:`n\beta`
    (:func:`commsim.models.lower_bound` with helper ranks). On a cluster the GPUs' reductions
    move to the switch, and only the switch–GPU links carry the messages (the topology model
    places the helpers there). NVLS reduces inside one NVSwitch: with ``ranks_per_node`` (a
    cluster's server size, which the command line passes) more workers than that are refused.

    References:
        NVIDIA, "NVIDIA H100 Tensor Core GPU Architecture", whitepaper, 2022 (NVLink SHARP:
        in-switch reduction and multicast). NCCL ``src/graph/tuning.cc`` (the NVLS algorithm's
        bus bandwidth, ``nvlsEfficiency``).

    See Also:
        :func:`commsim.algorithms.parameter_server.parameter_server_allreduce` (the same
        matchings with the servers on hosts), :func:`nvls_tree_allreduce` (several servers),
        :func:`nvls_helpers`

    Examples:
        >>> s = nvls_allreduce(16, segments=1)
        >>> s.helpers, s.workers, s.in_network, s.nsteps  # 8 GPUs, 8 switch slices, 2 x 8 rounds
        (8, 8, True, 16)
        >>> nvls_allreduce(16).nsteps  # (S + 1) w rounds
        72
    """
    p, S = nranks, _segments(segments)
    _one_switch(p, ranks_per_node)
    k = nvls_helpers(p)
    params = {"segments": S}
    if k == 0:  # p = 1: the one GPU holds the sum already
        return lazy("allreduce", p, 0, lambda i: Step.empty(), slot_units=S, algorithm="nvls",
                    params=params, ntransfers_hint=0, max_step_transfers_hint=0)  # fmt: skip
    w = p - k
    return lazy(
        "allreduce", p, (S + 1) * w, _nvls_steps(w, k, S), slot_units=k * S,
        algorithm="nvls", params=params, helpers=k, in_network=True,
        ntransfers_hint=2 * S * w * k, max_step_transfers_hint=(2 if S > 1 else 1) * k,
    )  # fmt: skip


# -- NVLS inside servers, a ring between them (NCCL's NVLSTree, with a ring across) ------------------
def _tree_layout(p: int, g: int) -> tuple[int, int, int, np.ndarray, np.ndarray]:
    """``(w, L, N, owner, helper)``: workers, slices, nodes; ``owner[s, j]`` the GPU of node ``s``
    that carries slice ``j`` between nodes, ``helper[s, j]`` the switch rank that reduces it
    (``-1``: a node of one GPU and no helper)."""
    k = nvls_helpers(p)
    w = p - k
    L, N = min(g, w), -(-w // g)
    s = np.arange(N)[:, None]
    j = np.arange(L)[None, :]
    first = s * g
    g_s = np.minimum(g, w - first)  # GPUs of node s
    k_s = np.maximum(np.minimum(g, k - first), 0)  # its helpers (the last may have one fewer)
    owner = first + j % g_s
    helper = np.where(k_s > 0, w + first + j % np.maximum(k_s, 1), -1)
    return w, L, N, owner, helper


def _tree_phases(p: int, g: int) -> list[Step]:
    """The steps of :func:`nvls_tree_allreduce`: copy and reduce to the switch, to the owners,
    ring, back to the switch, multicast (its docstring); slot ``j N + q`` is piece ``q`` of
    slice ``j``."""
    w, L, N, owner, helper = _tree_layout(p, g)
    gpu = np.arange(w)
    node = gpu // g
    have = helper[node, 0] >= 0  # GPUs whose node has a switch helper
    # (node, slice) pairs that a switch reduces: the owner copies, every other GPU adds
    o, h = owner.ravel(), helper.ravel()
    js = np.tile(np.arange(L), N)
    keep = h >= 0
    o, h, js = o[keep], h[keep], js[keep]
    cnt = np.full(len(o), N, dtype=np.int64)
    steps = [Step(o, h, js * N, js * N, cnt, np.zeros(len(o), bool))]
    gpus = np.repeat(gpu[have], L)  # every GPU of a node with a switch, each slice
    slices = np.tile(np.arange(L), int(have.sum()))
    pieces = np.full(len(gpus), N, dtype=np.int64)
    add = owner[node[gpus], slices] != gpus
    if add.any():  # L = 1: the owner's copy is the whole sum
        adder, added = gpus[add], slices[add]
        steps.append(Step(adder, helper[node[adder], added], added * N, added * N, pieces[add],
                          np.ones(len(adder), bool)))  # fmt: skip
    if N > 1:
        steps.append(Step(h, o, js * N, js * N, cnt, np.zeros(len(o), bool)))
        steps += _ring_steps(owner, N)
        steps.append(Step(o, h, js * N, js * N, cnt, np.zeros(len(o), bool)))
    # multicast: the switch stores each slice on every GPU of its node at once
    steps.append(Step(helper[node[gpus], slices], gpus, slices * N, slices * N, pieces,
                      np.zeros(len(gpus), bool)))  # fmt: skip
    return steps


def _ring_steps(owner: np.ndarray, N: int) -> list[Step]:
    """Ring reduce-scatter then allgather of every slice among its ``N`` owners (one per
    node), piece by piece: ``2(N - 1)`` steps, all slices at once."""
    L = owner.shape[1]
    s = np.repeat(np.arange(N), L)
    j = np.tile(np.arange(L), N)
    src, dst = owner[s, j], owner[(s + 1) % N, j]
    one = np.ones(len(s), dtype=np.int64)
    out = []
    for u in range(N - 1):  # node s sends piece (s - u) mod N, the next node adds it
        q = (s - u) % N
        out.append(Step(src, dst, j * N + q, j * N + q, one, np.ones(len(s), bool)))
    for u in range(N - 1):  # node s sends the summed piece (s + 1 - u) mod N on
        q = (s + 1 - u) % N
        out.append(Step(src, dst, j * N + q, j * N + q, one, np.zeros(len(s), bool)))
    return out


def _tree_exact(nranks: int, ranks_per_node: int = 8, pipeline: int = 1, **_: object) -> bool:
    """Even ``p`` (a helper per GPU) and whole servers (or one server), not pipelined; one rank
    (no steps)."""
    w = nranks - nvls_helpers(nranks)
    whole = nranks % 2 == 0 and (w <= ranks_per_node or w % ranks_per_node == 0)
    return nranks == 1 or (pipeline == 1 and whole)


def _tree_cost(
    nranks: int,
    nbytes: FloatOrArray,
    alpha: float,
    beta: float,
    gamma: float,
    ranks_per_node: int = 8,
    pipeline: int = 1,
) -> FloatOrArray:
    """The single-port Hockney time of :func:`nvls_tree_allreduce` (its ``.. math::``), exact
    for even ``p`` on whole servers (``_tree_exact``); pipelined, an estimate: the wavefront's
    extra rounds added (:mod:`commsim.algorithms._pipeline`)."""
    p, g = nranks, check_ranks_per_node(ranks_per_node)
    chunks = _pipeline.check_chunks(pipeline, "pipeline")
    w = p - nvls_helpers(p)
    if p < 2:
        return 0.0 * nbytes
    L, N = min(g, w), -(-w // g)
    inside = 2 * L * alpha + 2 * nbytes * beta + (L - 1) / L * nbytes * gamma
    m = nbytes / L
    ring = 2 * (N - 1) * alpha + 2 * (N - 1) / N * m * beta + (N - 1) / N * m * gamma
    base = inside if N == 1 else inside + 2 * (alpha + m * beta) + ring
    if chunks == 1:
        return base
    # the steps' patterns and rounds: copy, add, (to the owners, ring, back to the switch: the
    # copy's pairs again), multicast
    add = [(1, L - 1)] if L > 1 else []
    middle = [(2, 1), *[(3, 1)] * (2 * (N - 1)), (0, 1)] if N > 1 else []
    labels, rounds = zip(*[(0, 1), *add, *middle, (5, L)], strict=True)
    return base + alpha * _pipeline.wavefront_extra(labels, chunks, rounds)


@register(
    "allreduce",
    "nvls_tree",
    cost_fn=_tree_cost,
    exact=_tree_exact,
    constraints="NVLS inside each server of ranks_per_node GPUs (its NVSwitch as p/2 helper "
    "ranks, in_network), a ring of the slice owners between servers over their NICs; needs "
    "reducing switches (nvls clusters); any p (odd p or a short last server: an estimate); "
    "pipeline overlaps the phases chunk by chunk (an estimate)",
    reference="NCCL 2.18 NVLSTree (NVLS inside, the network between nodes); "
    "Patarasuk & Yuan 2009 (the ring)",
    helpers_for=lambda workers: workers,
)
def nvls_tree_allreduce(nranks: int, ranks_per_node: int = 8, pipeline: int = 1) -> Schedule:
    r"""NVLS inside servers, a ring between them: to the switch, to the owners, ring, back,
    multicast.

    ``w = p - ⌊p/2⌋`` GPUs in servers of ``g = ranks_per_node``, and the servers' NVSwitches as
    helper ranks (``Schedule.in_network``; helper ``i`` serves GPU ``i``'s server). The buffer
    is ``L = min(g, w)`` slices; GPU ``j`` of each server owns slice ``j`` between servers.
    Inside a server, the switch sums every slice: its owner copies it to the switch, then every
    other GPU adds its own in one step (``L - 1`` messages per GPU, all arriving at once: the
    switch reduces them together, IR rule 1); the switch hands the sum to the owner
    (``multimem.ld_reduce``); the ``N`` owners of slice ``j`` allreduce it in a ring over their
    NICs (the pieces of :math:`m = n/L` bytes); each owner stores the result back to the switch,
    which multicasts every slice to every GPU of its server in one step (``multimem.st``). With
    the single-port Hockney model (a port sends and receives one message per round: ``L``
    rounds to the switch, ``L`` from it), exact for even ``p`` on whole servers and
    ``pipeline = 1`` (``N = 1``: the first two terms):

    .. math::
        T = 2L\,\alpha + 2n\beta + \frac{L-1}{L}\,n\gamma + 2(\alpha + m\beta)
        + 2(N-1)\,\alpha + 2\frac{N-1}{N}\,m\beta + \frac{N-1}{N}\,m\gamma

    NCCL's NVLSTree puts a tree between the nodes and pipelines all phases chunk by chunk;
    here the phases run one after the other (the bandwidth terms add up), and the ring's
    bandwidth term equals a pipelined tree's. ``pipeline = K > 1`` overlaps them chunk by
    chunk, a wavefront of ``K`` chunks (:func:`commsim.algorithms.pipeline`): its time is
    estimated as :math:`T` plus the wavefront's extra rounds (the pipeline module's formula,
    each step's pattern counted with its rounds); it is no bound either way: the model's time
    is lower where a GPU's sends to the switch share rounds with its receives of an earlier
    chunk's multicast (a port sends and receives at once: about 30-45 % lower at
    ``K = 3..8`` on one server), within about 7 % of it across servers. The overlap of NVLink
    and NIC needs a GPU to drive both at once: the topology model's link-port rule
    (``--port-rule link``).

    References:
        NCCL 2.18 release notes (NVLSTree: NVLink SHARP inside the node, the network between
        nodes); NCCL ``src/graph/tuning.cc`` (NVLSTree's bandwidth and latency). Patarasuk &
        Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC
        69(2), 2009 (the ring).

    See Also:
        :func:`nvls_allreduce` (one server),
        :func:`commsim.algorithms.collnet.collnet_direct_allreduce` (the fabric's switches
        reduce between servers)

    Examples:
        >>> s = nvls_tree_allreduce(32, ranks_per_node=8)  # 2 servers of 8 GPUs + 16 helpers
        >>> s.workers, s.helpers, s.nsteps  # copy, add, to the owners, 2 ring, back, multicast
        (16, 16, 7)
        >>> nvls_tree_allreduce(32, ranks_per_node=8, pipeline=4).nsteps  # 7 + 4 - 1
        10
    """
    g = check_ranks_per_node(ranks_per_node)
    chunks = _pipeline.check_chunks(pipeline, "pipeline")
    params = {"ranks_per_node": g}
    k = nvls_helpers(nranks)
    if k == 0:
        return lazy("allreduce", nranks, 0, lambda i: Step.empty(), slot_units=1,
                    algorithm="nvls_tree", params=params, ntransfers_hint=0,
                    max_step_transfers_hint=0)  # fmt: skip
    _, L, N, _, _ = _tree_layout(nranks, g)
    steps = _tree_phases(nranks, g)
    whole = lazy(
        "allreduce", nranks, len(steps), steps.__getitem__, slot_units=L * N,
        algorithm="nvls_tree", params=params, helpers=k, in_network=True,
        ntransfers_hint=sum(len(s.src) for s in steps),
        max_step_transfers_hint=max(len(s.src) for s in steps),
    )  # fmt: skip
    return _pipeline.pipeline(whole, chunks)
