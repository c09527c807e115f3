"""Combinators: bigger schedules from smaller ones, without materializing any step.

* :func:`concat` runs schedules one after another on the same ranks and slots (Rabenseifner is
  ``concat(recursive-halving reduce-scatter, recursive-doubling allgather)``).
* :func:`relabel` renames ranks (a schedule on ``p'`` virtual ranks placed on ``p`` real ones).
* :func:`with_root` rotates ranks so a root-0 schedule runs from any root.
* :func:`lazy` wraps a step function with the bookkeeping a factory would otherwise repeat.

All of them keep steps lazy: a combined step is computed from the parts' steps when asked for.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from commsim._ir import Schedule, Step
from commsim.errors import ScheduleError

__all__ = ["concat", "lazy", "relabel", "relabel_blocks", "with_root"]


def lazy(
    collective: str,
    nranks: int,
    nsteps: int,
    step_fn: Callable[[int], Step],
    *,
    slot_units: int | Sequence[int] | np.ndarray,
    algorithm: str,
    params: dict[str, Any] | None = None,
    ndata: int | None = None,
    ntransfers_hint: int | None = None,
    max_step_transfers_hint: int | None = None,
    nchannels: int = 1,
    helpers: int = 0,
    in_network: bool | str = False,
) -> Schedule:
    """A schedule for root 0 of ``collective`` from its step function (``helpers``: how many of
    the last ranks hold no data, IR rule 7; ``in_network``: they are reducing switches)."""
    return Schedule(
        collective=collective,
        nranks=nranks,
        slot_units=slot_units,
        nsteps=nsteps,
        step_fn=step_fn,
        ndata=ndata,
        algorithm=algorithm,
        params=params or {},
        ntransfers_hint=ntransfers_hint,
        max_step_transfers_hint=max_step_transfers_hint,
        nchannels=nchannels,
        helpers=helpers,
        in_network=in_network,
    )


def concat(
    *parts: Schedule,
    collective: str | None = None,
    algorithm: str | None = None,
    params: dict[str, Any] | None = None,
) -> Schedule:
    """Run ``parts`` one after another. They must share ranks and slot layout.

    The result computes ``collective`` (default: the last part's). Per-rank program order carries
    across the seam: a rank starts the second part when it has finished its own steps of the first.
    """
    if not parts:
        raise ScheduleError("concat needs at least one schedule")
    first = parts[0]
    for s in parts[1:]:
        if s.nranks != first.nranks:
            raise ScheduleError(f"concat: nranks differ ({first.nranks} vs {s.nranks})")
        if s.helpers != first.helpers:
            raise ScheduleError(f"concat: helper ranks differ ({first.helpers} vs {s.helpers})")
        if s.in_network != first.in_network:
            raise ScheduleError("concat: one part's helpers are reducing switches, another's not")
        if not np.array_equal(s.slot_units, first.slot_units):
            raise ScheduleError(
                f"concat: slot layouts of {first.algorithm!r} and {s.algorithm!r} differ"
            )
    offsets = np.cumsum([0] + [s.nsteps for s in parts]).tolist()

    def step_fn(i: int) -> Step:
        k = bisect.bisect_right(offsets, i) - 1
        return parts[k].step(i - offsets[k])

    known = [s.ntransfers_hint for s in parts]
    maxes = [s.max_step_transfers_hint for s in parts]
    return Schedule(
        collective=collective or parts[-1].collective,
        root=parts[-1].root,
        nranks=first.nranks,
        slot_units=first.slot_units,
        nsteps=offsets[-1],
        step_fn=step_fn,
        ndata=parts[-1].ndata,
        nchannels=max(s.nchannels for s in parts),
        algorithm=algorithm or "+".join(s.algorithm for s in parts),
        params=params if params is not None else {},
        ntransfers_hint=None if None in known else sum(known),  # type: ignore[arg-type]
        max_step_transfers_hint=None if None in maxes else max(maxes),  # type: ignore[type-var]
        helpers=first.helpers,
        in_network=first.in_network,
    )


def relabel(
    schedule: Schedule,
    rank_map: np.ndarray | Sequence[int],
    nranks: int,
    *,
    collective: str | None = None,
    root: int = 0,
) -> Schedule:
    """Place a schedule's ranks on ``nranks`` ranks: virtual rank ``v`` becomes ``rank_map[v]``.

    The result computes ``collective`` (default: the schedule's) with root ``root``.
    """
    rank_map = np.asarray(rank_map, dtype=np.int64)
    if rank_map.shape != (schedule.nranks,):
        raise ScheduleError(f"rank_map needs {schedule.nranks} entries, got {rank_map.shape}")
    if len(np.unique(rank_map)) != len(rank_map) or rank_map.min(initial=0) < 0:
        raise ScheduleError("rank_map must map virtual ranks to distinct ranks >= 0")
    if len(rank_map) and rank_map.max() >= nranks:
        raise ScheduleError(f"rank_map points past nranks={nranks}")
    h = schedule.helpers
    if h and not np.array_equal(rank_map[-h:], np.arange(nranks - h, nranks)):
        raise ScheduleError(
            "relabel: helper ranks (IR rule 7) must stay the last ranks: map them to "
            f"{nranks - h}..{nranks - 1}"
        )
    return dataclasses.replace(
        schedule,
        nranks=nranks,
        collective=collective or schedule.collective,
        root=root,
        step_fn=lambda i: schedule.step(i).relabel(rank_map),
    )


def relabel_blocks(schedule: Schedule, perm: np.ndarray) -> Schedule:
    """``schedule`` with rank ``v`` and block (slot) ``v`` renamed ``perm[v]``; slot ranges
    become single slots, since a virtual range is strided in the real order. A schedule with
    helper ranks (IR rule 7), whose ranks are not its blocks, is refused."""
    if schedule.helpers:
        raise ScheduleError(
            "relabel_blocks renames ranks and blocks alike: a schedule with helper ranks "
            f"({schedule.helpers}) has more ranks than blocks"
        )

    def step_fn(i: int) -> Step:
        src, dst, a, b, count, red, ch = schedule.step(i)
        idx = np.repeat(np.arange(len(src)), count)
        within = np.arange(len(idx)) - np.repeat(np.cumsum(count) - count, count)
        return Step(
            perm[src[idx]], perm[dst[idx]], perm[a[idx] + within], perm[b[idx] + within],
            np.ones(len(idx), dtype=np.int64), red[idx], ch[idx],
        )  # fmt: skip

    return Schedule(
        collective=schedule.collective,
        nranks=schedule.nranks,
        slot_units=schedule.slot_units,
        nsteps=schedule.nsteps,
        step_fn=step_fn,
        algorithm=schedule.algorithm,
        params=schedule.params,
    )


def with_root(schedule: Schedule, root: int) -> Schedule:
    """Rotate ranks by ``root``: a schedule rooted at 0 becomes one rooted at ``root``."""
    p = schedule.nranks
    rank_map = (np.arange(p) + root) % p
    out = relabel(schedule, rank_map, p, root=root)
    return dataclasses.replace(out, params={**schedule.params, "root": root})
