r"""A schedule run chunk by chunk as a software pipeline (a wavefront).

:func:`pipeline` cuts every slot into ``K`` sub-slots (slot ``i`` becomes slots
``i·K .. i·K + K - 1``, each holding ``1/K`` of it, as :func:`commsim.algorithms.parallel` cuts
a buffer) and runs the schedule on each share, chunk ``j`` shifted by ``j`` steps: global step
``t`` carries step ``t - j`` of every chunk ``j`` with ``0 <= t - j < S``. A schedule of ``S``
steps becomes one of ``S + K - 1``; while chunk ``j`` is in a later phase (the ring across
servers), chunk ``j + 1`` is in the earlier one (the ring inside), as NCCL overlaps its phases
(Jeaugey, "Massively scale your deep learning training with NCCL 2.4", NVIDIA blog, 2019).

The result is an ordinary schedule, proved by the verifier like any other. The IR's per-step
rules hold by construction:

* **Reads before writes, one writer per slot** (IR rule 1): the chunks use disjoint sub-slots,
  so two chunks never write one ``(rank, slot)`` in a step.
* **One message per** ``(step, src, dst, channel)`` (rule 2): where chunk ``j``'s step ``t - j``
  and chunk ``j + 1``'s step ``t - j - 1`` both send ``src → dst`` on one channel, their
  transfers are one message carrying both chunks (several slot ranges, the IR's own merging);
  nothing is renamed.
* **Channels** (rule 6): every chunk keeps the schedule's channels, and its sub-slots are
  touched on the channels that touched the whole slot, so a multi-channel schedule keeps the
  verifier's promise; :attr:`~commsim.Schedule.helpers` (rule 7) are kept as they are, and
  so is :attr:`~commsim.Schedule.in_network` (the helpers stay reducing switches).

Time (single-port :class:`commsim.models.Hockney`): the chunks move the schedule's bytes and
reduce its bytes, ``1/K`` each, so the β and γ terms are the schedule's; what changes is the
number of messages. Where every step of the schedule is one round of messages of one pattern
``κ_s`` (the set of its ``(src, dst, channel)``), every rank busy in it, and each global step's
patterns run one after the other on a rank's one port:

.. math::

    T_K = T_1 + \alpha \left( \sum_{t=0}^{S+K-2} \left|\{\kappa_s : s \in W_t\}\right| - S \right),
    \qquad W_t = [\max(0, t-K+1), \min(t, S-1)]

(:func:`wavefront_messages` counts the sum; a step of :math:`r_s` rounds counts its pattern
:math:`r_s` times, :math:`\sum_t \sum_{\kappa \in W_t} r_\kappa - \sum_s r_s`, as an estimate for
rows whose steps take several rounds, ``nvls_tree``'s). Under these conditions a pipeline only adds
latencies: :math:`(K-1)\alpha` for the longer wavefront, one more wherever two patterns meet
(where ranks idle in some steps, as in a chain's fill and drain, a wavefront may fill some of
that time instead, and the formula is only an estimate). The overlap
NCCL gains needs a rank to drive the two phases' links at once (NVLink beside the NIC): on such
a machine the wavefront takes about :math:`(S + K - 1)` steps of the slowest chunk-step,
:math:`\max_s \tau_s(n/K)`, instead of :math:`\sum_s \tau_s(n)`. commsim's models give a rank
one port per channel by default, and a chunk cannot change channel between phases (rule 6: the
channels of one slot are unordered), so they charge the one-port time above; the topology
model's link-port rule (``Topology(..., port_rule="link")``, :mod:`commsim.models._link_ports`)
lets a rank's messages of one step that leave by different host links go at once, and there a
pipeline overlaps its phases (``docs/benchmarks.md``, "Link ports").

See Also:
    :func:`commsim.algorithms.parallel`, :func:`commsim.algorithms.concat`,
    :func:`commsim.algorithms.hierarchical.hierarchical_allreduce`
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from commsim._ir import MAX_SLOTS, Schedule, Step
from commsim.algorithms._hierarchy import embed
from commsim.errors import ParameterError

__all__ = ["MAX_CHUNKS", "check_chunks", "pipeline", "wavefront_extra", "wavefront_messages"]

#: Most chunks :func:`pipeline` cuts a buffer into (slots multiply by it), as ``parallel``'s parts.
MAX_CHUNKS = 1024


def check_chunks(chunks: Any, name: str = "chunks") -> int:
    """``chunks`` as an ``int`` in ``[1, MAX_CHUNKS]``, or a :class:`ParameterError` in words."""
    if isinstance(chunks, bool) or not isinstance(chunks, (numbers.Integral, np.integer)):
        raise ParameterError(f"{name} must be an integer >= 1, got {chunks!r}")
    if not 1 <= chunks <= MAX_CHUNKS:
        raise ParameterError(f"{name} must be an integer in [1, {MAX_CHUNKS}], got {chunks}")
    return int(chunks)


def pipeline(
    schedule: Schedule,
    chunks: int,
    *,
    algorithm: str | None = None,
    params: dict[str, Any] | None = None,
) -> Schedule:
    """``schedule`` on ``chunks`` shares of every slot, share ``j`` ``j`` steps behind share 0.

    ``chunks = 1`` returns ``schedule`` itself. The result keeps the collective, ranks, root,
    helper ranks and channels; its ``params`` are the schedule's plus ``"pipeline": chunks``.

    Raises:
        ParameterError: ``chunks`` is not an integer in ``[1, MAX_CHUNKS]``, or the cut slots
            would exceed the IR's slot limit.

    Examples:
        >>> import commsim
        >>> ring = commsim.build("allreduce", "ring", nranks=4)
        >>> s = pipeline(ring, 3)
        >>> s.nsteps, s.nslots, commsim.verify(s).nranks  # 6 + 3 - 1 steps, 4 slots cut in 3
        (8, 12, 4)
    """
    k = check_chunks(chunks)
    if k == 1:
        return schedule
    if schedule.nslots * k > MAX_SLOTS:
        raise ParameterError(
            f"pipeline: {schedule.nslots:,} slots cut into {k} chunks exceed {MAX_SLOTS:,} slots"
        )
    n = schedule.nsteps
    ranks = np.arange(schedule.nranks, dtype=np.int64)[None, :]
    shares = [np.array([j], dtype=np.int64) for j in range(k)]

    def step_fn(t: int) -> Step:
        live = range(max(0, t - n + 1), min(t, k - 1) + 1)  # chunks j with 0 <= t - j < n
        return Step.cat([embed(schedule.step(t - j), ranks, shares[j], stride=k) for j in live])

    return Schedule(
        collective=schedule.collective,
        nranks=schedule.nranks,
        slot_units=np.repeat(schedule.slot_units, k),
        nsteps=n + k - 1 if n else 0,
        step_fn=step_fn,
        root=schedule.root,
        ndata=schedule.ndata * k,
        nchannels=schedule.nchannels,
        algorithm=algorithm or schedule.algorithm,
        params=params if params is not None else {**schedule.params, "pipeline": k},
        helpers=schedule.helpers,
        in_network=schedule.in_network,
    )


def wavefront_messages(
    patterns: np.ndarray | Sequence[int], chunks: int, rounds: Sequence[int] | None = None
) -> int:
    """How many (global step, pattern) pairs the wavefront of ``chunks`` has: the sum in the
    module's formula, for a schedule whose step ``s`` sends in pattern ``patterns[s]`` (equal
    labels: the same ``(src, dst, channel)`` set, whose chunks' messages merge). With
    ``rounds`` (step ``s`` takes ``rounds[s]`` rounds of messages on a port, equal for equal
    patterns) each pair counts its pattern's rounds.

    Examples:
        >>> wavefront_messages([0, 0, 1, 1, 0, 0], 1)  # no pipeline: one per step
        6
        >>> wavefront_messages([0, 0, 1, 1, 0, 0], 3)  # 8 steps, 4 of them meet two patterns
        12
        >>> wavefront_messages([0, 1], 2, rounds=[1, 3])  # steps 0, 1, 2 hold 0; 0 and 1; 1
        8
    """
    k = check_chunks(chunks)
    labels = np.asarray(patterns, dtype=np.int64)
    if not len(labels):
        return 0
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    weight = np.ones(len(first), dtype=np.int64)
    if rounds is not None:
        r = np.asarray(rounds)
        if (
            r.shape != labels.shape
            or r.dtype.kind not in "iu"
            or (r < 0).any()
            or not np.array_equal(r, r[first][inverse])
        ):
            raise ParameterError(
                "wavefront_messages: rounds needs one integer >= 0 per step, equal for equal "
                f"patterns; got {r.tolist()!r:.80} for patterns {labels.tolist()!r:.80}"
            )
        weight = r[first]
    onehot = np.zeros((len(first), len(labels) + k - 1), dtype=np.int64)
    onehot[inverse, np.arange(len(labels))] = 1
    # pattern c is in window W_t iff it occurs among steps t - k + 1 .. t
    ahead = np.cumsum(onehot, axis=1)
    behind = np.zeros_like(ahead)
    behind[:, k:] = ahead[:, :-k]
    live = ((ahead - behind) > 0).sum(axis=1)  # global steps each pattern is live in
    return int(live @ weight)


def wavefront_extra(
    patterns: np.ndarray | Sequence[int], chunks: int, rounds: Sequence[int] | None = None
) -> int:
    """The rounds the wavefront of ``chunks`` adds to the schedule's own (the module formula's
    bracket): :func:`wavefront_messages` less one per step, or less ``sum(rounds)``; each
    costs one α under the single-port Hockney model.

    Examples:
        >>> wavefront_extra([0, 0, 1, 1, 0, 0], 3)  # 12 (pattern, global step) pairs, 6 steps
        6
    """
    own = len(patterns) if rounds is None else int(np.sum(rounds))
    return wavefront_messages(patterns, chunks, rounds) - own
