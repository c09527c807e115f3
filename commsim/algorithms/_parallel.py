r"""Schedules side by side: each on its own part of every slot and on its own channels.

* :func:`parallel` runs ``k`` schedules of one collective at once, schedule ``i`` on part ``i`` of
  every slot (slot ``j`` becomes slots ``j·k .. j·k + k - 1``, each holding ``1/k`` of it) and on
  channels of its own (IR rule 6). This is how a torus runs its dimension orders together, how
  the double binary tree runs its two trees, and how packed rings or trees share a buffer.
* :func:`channels` is ``parallel`` of ``k`` copies of one schedule: NCCL's channels, each copy
  carrying ``1/k`` of the buffer on a channel of its own (Jeaugey, "NCCL 2.0", GTC 2017).

Each part computes the collective on its share of every slot, so the whole computes it on the
whole buffer; the parts touch disjoint slots, which is the promise the verifier checks for
channels. Part ``i``'s slot ``j`` is slot ``j·k + i``, so a collective's block structure (rank
``r``'s block of an allgather) is kept; a transfer of a slot range becomes one transfer per slot
(the same message: one per ``(step, src, dst, channel)``).

Time: with ``k`` independent links (:class:`commsim.models.Hockney` ``links=k``) and ``k`` copies
of a schedule whose time is :math:`a\alpha + b\,n\beta + c\,n\gamma`, the copies take
:math:`a\alpha + b\,\frac{n}{k}\beta + c\,\frac{n}{k}\gamma` (each runs on its own link with
``n/k`` bytes); on one link they take turns, which costs :math:`ka\alpha + bn\beta + cn\gamma`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from commsim._ir import Schedule, Step
from commsim.algorithms._hierarchy import embed
from commsim.errors import ParameterError, ScheduleError

__all__ = ["MAX_PARTS", "channels", "parallel"]

#: Most parts :func:`parallel` splits a buffer into (slots multiply by it).
MAX_PARTS = 1024


def parallel(
    *parts: Schedule, algorithm: str | None = None, params: dict[str, Any] | None = None
) -> Schedule:
    """``parts`` at once, part ``i`` on the ``i``-th share of every slot and its own channels.

    The parts must compute one collective on the same ranks, root and slot layout.

    Examples:
        >>> import commsim
        >>> ring = commsim.build("allreduce", "ring", nranks=4)
        >>> two = parallel(ring, ring)
        >>> two.nchannels, two.nslots, commsim.verify(two).nsteps
        (2, 8, 6)
    """
    if not parts:
        raise ScheduleError("parallel needs at least one schedule")
    if len(parts) > MAX_PARTS:
        raise ParameterError(f"parallel splits a buffer into at most {MAX_PARTS} parts")
    first = parts[0]
    if len(parts) == 1:  # one part: its own steps, on the whole of every slot
        return dataclasses.replace(
            first,
            algorithm=algorithm or first.algorithm,
            params=params if params is not None else {},
        )
    for s in parts[1:]:
        for what in ("collective", "nranks", "root", "ndata", "helpers", "in_network"):
            if getattr(s, what) != getattr(first, what):
                raise ScheduleError(
                    f"parallel: {what} of {first.algorithm!r} and {s.algorithm!r} differ "
                    f"({getattr(first, what)} vs {getattr(s, what)})"
                )
        if not np.array_equal(s.slot_units, first.slot_units):
            raise ScheduleError(
                f"parallel: slot layouts of {first.algorithm!r} and {s.algorithm!r} differ"
            )
    k = len(parts)
    offsets = np.cumsum([0] + [s.nchannels for s in parts]).tolist()
    ranks = np.arange(first.nranks, dtype=np.int64)[None, :]

    def step_fn(i: int) -> Step:
        pieces = []
        for j, s in enumerate(parts):
            if i < s.nsteps:
                st = embed(s.step(i), ranks, np.array([j]), stride=k)
                pieces.append(st._replace(channel=st.channel + offsets[j]))
        return Step.cat(pieces) if pieces else Step.empty()

    return Schedule(
        collective=first.collective,
        nranks=first.nranks,
        slot_units=np.repeat(first.slot_units, k),
        nsteps=max(s.nsteps for s in parts),
        step_fn=step_fn,
        root=first.root,
        ndata=first.ndata * k,
        nchannels=offsets[-1],
        algorithm=algorithm or "||".join(s.algorithm for s in parts),
        params=params if params is not None else {},
        helpers=first.helpers,
        in_network=first.in_network,
    )


def channels(schedule: Schedule, k: int) -> Schedule:
    """``k`` copies of ``schedule`` at once, each on ``1/k`` of the buffer and its own channel
    (:func:`parallel`); ``k = 1`` returns ``schedule`` itself.

    Examples:
        >>> import commsim
        >>> s = channels(commsim.build("allgather", "ring", nranks=4), 2)
        >>> s.nchannels, s.params["channels"]
        (2, 2)
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ParameterError(f"channels must be an integer >= 1, got {k!r}")
    if k == 1:
        return schedule
    return parallel(
        *[schedule] * int(k),
        algorithm=schedule.algorithm,
        params={**schedule.params, "channels": int(k)},
    )
