r"""What each slot holds, step by step: a schedule run symbolically on sets of contributions.

Instead of numbers, every ``(rank, slot)`` holds the **set of ranks whose input it contains**, a
boolean vector of length ``p``: the state is ``holds[p, nslots, p]``. Before the first step,
``holds[r, j, r]`` is set where the collective's pre-condition puts rank ``r``'s input
(:meth:`commsim.CollectiveSpec.initial`): every data slot of every rank for allreduce, block ``r``
of rank ``r`` for allgather, the root's slots for broadcast. A step applies the IR's semantics
(:mod:`commsim._ir`) to these sets, reads before writes: a copy replaces the destination's set
with the source's, a reduction adds the source's set to it (set union).

After the last step of a correct allreduce every data slot of every rank holds all ``p``
contributions; after an allgather, slot ``j`` of every rank holds exactly its block owner's. The
sets say *whose* data a slot holds, not how often (a contribution counted twice is the
verifier's business, :func:`commsim.verify`), which is what a diagram of the schedule shows.

Memory ``p · nslots · p`` booleans per state; :data:`MAX_STATE` bounds it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from commsim._ir import Schedule, Step
from commsim.errors import ResourceError

__all__ = ["MAX_STATE", "apply_step", "contributions", "initial_contributions"]

#: Booleans in one state ``[p, nslots, p]`` beyond which :func:`contributions` refuses (256 MiB).
MAX_STATE = 2**28


def initial_contributions(schedule: Schedule) -> np.ndarray:
    """``holds[p, nslots, p]`` before the first step: rank ``r``'s input where the collective's
    pre-condition puts it; scratch slots empty."""
    p, S = schedule.nranks, schedule.nslots
    if p * S * p > MAX_STATE:
        raise ResourceError(
            f"{schedule.algorithm} (p={p}, {S} slots): the symbolic state would take "
            f"{p * S * p / 2**20:,.0f} MiB (limit {MAX_STATE / 2**20:,.0f} MiB); use a smaller p"
        )
    pre = schedule.spec.initial(p, schedule.ndata, schedule.root, schedule.helpers)
    holds = np.zeros((p, S, p), dtype=bool)
    r, j = np.nonzero(pre)
    holds[r, j, r] = True
    return holds


def apply_step(holds: np.ndarray, step: Step) -> np.ndarray:
    """``holds`` after ``step`` (updated in place and returned): copies replace a slot's set,
    reductions add to it; every transfer reads the state from before the step."""
    if len(step.src) == 0:
        return holds
    count = step.count
    rep = np.repeat(np.arange(len(count)), count)
    offs = np.arange(len(rep)) - np.repeat(np.cumsum(count) - count, count)
    src, dst = step.src[rep], step.dst[rep]
    s_idx, d_idx = step.src_slot[rep] + offs, step.dst_slot[rep] + offs
    red = step.reduce[rep]
    moved = holds[src, s_idx]  # a copy: reads before writes
    holds[dst[~red], d_idx[~red]] = moved[~red]
    np.logical_or.at(holds, (dst[red], d_idx[red]), moved[red])
    return holds


def contributions(schedule: Schedule, stop: int | None = None) -> Iterator[np.ndarray]:
    """The states before step 0 and after each step up to ``stop`` (default: all), each a fresh
    ``holds[p, nslots, p]`` boolean array (``holds[r, j, q]``: rank ``r``'s slot ``j`` contains
    rank ``q``'s input).

    Examples:
        >>> import commsim
        >>> s = commsim.build("allreduce", "rabenseifner", nranks=4)
        >>> states = list(contributions(s))
        >>> [int(h[0].sum(axis=-1).max()) for h in states]  # rank 0's fullest slot
        [1, 2, 4, 4, 4]
        >>> bool(states[-1][:, : s.ndata].all())  # at the end every slot holds all 4 inputs
        True
    """
    stop = schedule.nsteps if stop is None else min(stop, schedule.nsteps)
    holds = initial_contributions(schedule)
    yield holds.copy()
    for i in range(stop):
        step = schedule.step(i)
        schedule.check_step(step, i)
        yield apply_step(holds, step).copy()
