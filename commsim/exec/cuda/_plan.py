r"""The Numba-CUDA backend's plan: a schedule as kernel launch tables (numpy only).

All ranks' buffers live in one device array, the **arena**: rank ``r``'s buffer is the row
``arena[r * nelems : (r + 1) * nelems]``, followed by a staging area. :func:`plan` lowers a
schedule once per layout, on the host, with no name of any algorithm involved; the device program
(:mod:`commsim.exec.cuda._program`) uploads its tables once and launches
:mod:`commsim.exec.cuda._kernels`' ``apply`` on them, whatever the dtype.

Lowering of a step (all transfers of the step become one launch, two where it must stage):

1. **Elements.** Each transfer becomes ``(src offset, dst offset, length, reduce)`` in the arena.
2. **Ordered writes.** Destination ranges are cut at every other destination range's ends, so
   that the pieces are either equal or disjoint, and pieces with the same destination form a
   **group**: ``dst = (dst if reduce else 0) + Σ sources``, sources in transfer order. Several
   reductions into one element in one step (direct reduce-scatter: ``p - 1`` of them) are thus
   added by the one thread that owns the element: no atomics, no write conflicts, the reference
   interpreter's summation order, and the destination is read and written once, not ``k``
   times. Two writes to an element that are not both reductions are refused (a write race).
3. **Reads see the pre-step state.** The union of the step's read ranges and of its write ranges
   are computed as disjoint intervals; a read interval that meets a written one (an exchange:
   ``r ↔ r xor 2^k`` both reading and writing the whole vector, or a local shift within a rank) is
   **staged**: a first launch copies it to the staging area, and the groups read it there.
   Reads that no write of the step touches are read in place. Ring steps (rank ``r`` reads block
   ``b``, rank ``r + 1``'s block ``b`` is written) and recursive-halving steps (a rank sends one
   half and receives into the other) are disjoint, so they run as one fused read-modify-write
   launch; recursive doubling's exchanges are staged. The staging area is the largest staged
   volume of any step: the double buffer of the data that moves, not of the whole arena.
4. **Launch tables.** Each group is cut into chunks of ``chunk`` elements (the launch geometry's
   ``threads × per_thread``); a launch's table holds per group its destination, length, reduce
   flag, sources (CSR) and the prefix sum of chunk counts by which blocks find their group. A
   step's table is ``5 × (groups + 1)`` integers plus one per source, independent of the
   message size.

Channels (IR rule 6) need nothing here: a step's transfers on every channel are one launch, so
the channels of a step run at once; steps run in order.

Cost of a step, in memory traffic: every moved element is read once and written once, plus one
read of the destination per reducing group, plus ``2 ×`` the staged elements; one launch (two
if staged). A ring allreduce on ``p`` ranks of ``n`` elements therefore moves ``5 (p - 1) n``
elements through memory (``3`` per element in its ``p - 1`` reduce-scatter steps, ``2`` in its
``p - 1`` allgather steps): :attr:`Plan.traffic_elems`, the basis of the bandwidth bound in
``benchmarks/bench_cuda.py``.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from commsim._ir import Schedule, Step
from commsim.errors import ScheduleError
from commsim.exec._layout import Layout
from commsim.exec._lowering import check_layout, checked_steps, element_ranges

__all__ = ["Launch", "Plan", "StepPlan", "launch_table", "plan"]


class Launch(NamedTuple):
    """One kernel launch: a group table (see :mod:`commsim.exec.cuda._kernels`) and its sources."""

    groups: np.ndarray  # int64 [5, G + 1]: dst, len, reduce, ptr, cstart
    srcs: np.ndarray  # int64 [sources]: arena offsets
    nchunks: int

    @property
    def ngroups(self) -> int:
        return self.groups.shape[1] - 1


class StepPlan(NamedTuple):
    """A lowered step: an optional staging launch, then the launch that applies the transfers."""

    index: int
    stage: Launch | None
    apply: Launch
    moved: int  # elements moved by the step's transfers
    staged: int  # elements copied to the staging area first

    @property
    def launches(self) -> list[Launch]:
        return [self.apply] if self.stage is None else [self.stage, self.apply]


@dataclasses.dataclass(frozen=True)
class Plan:
    """A schedule lowered for one layout: the launches of every non-empty step.

    Attributes:
        nranks, nelems: the arena holds ``nranks`` rows of ``nelems`` elements...
        stage_elems: ...followed by this many staging elements.
        chunk: elements per chunk of a group (the unit a block takes).
        steps: the lowered non-empty steps, in order.
        traffic_elems: element reads and writes the transfers need (excluding staging): each
            moved element read and written once, plus one read of the destination per reduction.
    """

    nranks: int
    nelems: int
    stage_elems: int
    chunk: int
    steps: list[StepPlan]
    traffic_elems: int

    @property
    def arena_elems(self) -> int:
        return self.nranks * self.nelems + self.stage_elems

    @property
    def staged_steps(self) -> list[int]:
        return [s.index for s in self.steps if s.stage is not None]

    @property
    def nlaunches(self) -> int:
        return sum(len(s.launches) for s in self.steps)

    def summary(self) -> dict[str, int]:
        """Counts for a benchmark's header: steps, launches, staging, memory traffic."""
        return {
            "steps": len(self.steps),
            "launches": self.nlaunches,
            "staged_steps": len(self.staged_steps),
            "stage_elems": self.stage_elems,
            "traffic_elems": self.traffic_elems,
        }


def launch_table(
    dst: np.ndarray,
    length: np.ndarray,
    red: np.ndarray,
    ptr: np.ndarray,
    srcs: np.ndarray,
    chunk: int,
) -> Launch:
    """The launch of groups ``dst, length, red`` with sources ``srcs`` (CSR by ``ptr``)."""
    g = len(dst)
    t = np.zeros((5, g + 1), dtype=np.int64)
    t[0, :g], t[1, :g], t[2, :g], t[3] = dst, length, red, ptr
    t[4, 1:] = np.cumsum(-(-length // chunk))
    return Launch(t, np.ascontiguousarray(srcs, dtype=np.int64), int(t[4, g]))


def _merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint union of the intervals ``[starts, ends)``; overlapping (not touching) ones merge."""
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], ends[o]
    reach = np.maximum.accumulate(e)
    first = np.flatnonzero(np.concatenate([[True], s[1:] >= reach[:-1]]))
    return s[first], np.maximum.reduceat(e, first)


def _group_writes(
    s0: np.ndarray, d0: np.ndarray, n: np.ndarray, red: np.ndarray, index: int, nelems: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cut destination ranges at each other's ends; group equal pieces (sources in order).

    Returns per group ``dst, len, reduce, ptr`` and the sources ``srcs`` (CSR by ``ptr``).
    """
    bp = np.unique(np.concatenate([d0, d0 + n]))
    first, last = np.searchsorted(bp, d0), np.searchsorted(bp, d0 + n)
    npieces = last - first
    t = np.repeat(np.arange(len(d0)), npieces)  # transfer of each piece, in transfer order
    j = first[t] + np.arange(len(t)) - np.repeat(np.cumsum(npieces) - npieces, npieces)
    psrc = s0[t] + (bp[j] - d0[t])
    order = np.argsort(j, kind="stable")  # by destination piece, transfers in order within
    j, t, psrc = j[order], t[order], psrc[order]
    gfirst = np.flatnonzero(np.concatenate([[True], j[1:] != j[:-1]]))
    ptr = np.append(gfirst, len(j))
    allred = np.logical_and.reduceat(red[t], gfirst)
    race = (np.diff(ptr) > 1) & ~allred
    if race.any():
        at = int(bp[j[gfirst[np.argmax(race)]]])
        rank, elem = divmod(at, nelems)
        raise ScheduleError(
            f"step {index}: several transfers write rank {rank} element {elem} and not all of "
            "them reduce (a write race)",
            step=index,
            rank=rank,
        )
    gj = j[gfirst]
    return bp[gj], bp[gj + 1] - bp[gj], allred, ptr, psrc


def _stage(
    s0: np.ndarray, n: np.ndarray, d0: np.ndarray, srcs: np.ndarray, base: int, chunk: int
) -> tuple[Launch | None, int, np.ndarray]:
    """The staging launch for the reads that meet a write of the step (``None`` if none), the
    elements it stages, and ``srcs`` redirected to the staged copies."""
    rs, re_ = _merge(s0, s0 + n)
    ws, we = _merge(d0, d0 + n)
    i = np.searchsorted(we, rs, side="right")  # first written interval ending after each read
    hazard = np.zeros(len(rs), dtype=bool)
    inside = i < len(ws)
    hazard[inside] = ws[i[inside]] < re_[inside]
    if not hazard.any():
        return None, 0, srcs
    hs, hlen = rs[hazard], (re_ - rs)[hazard]
    hoff = base + np.concatenate([[0], np.cumsum(hlen)[:-1]])
    k = np.searchsorted(rs, srcs, side="right") - 1  # read interval of each source
    hk = np.cumsum(hazard)[k] - 1  # its index among the staged ones (if staged)
    srcs = np.where(hazard[k], hoff[hk] + (srcs - rs[k]), srcs)
    one = np.arange(len(hs) + 1)
    stage = launch_table(hoff, hlen, np.zeros(len(hs), dtype=bool), one, hs, chunk)
    return stage, int(hlen.sum()), srcs


def _step_plan(
    step: Step, index: int, off: np.ndarray, nelems: int, base: int, chunk: int
) -> StepPlan | None:
    src, dst, sa, n, da, red = element_ranges(step, off)
    if len(src) == 0:
        return None
    s0 = src * nelems + sa
    d0 = dst * nelems + da
    gdst, glen, gred, ptr, srcs = _group_writes(s0, d0, n, red, index, nelems)
    # reads that meet this step's writes are staged, so that every read sees the pre-step state
    stage, staged, srcs = _stage(s0, n, d0, srcs, base, chunk)
    apply = launch_table(gdst, glen, gred, ptr, srcs, chunk)
    return StepPlan(index, stage, apply, int(n.sum()), staged)


def plan(schedule: Schedule, layout: Layout, chunk: int = 2048) -> Plan:
    """Lower ``schedule`` to launch tables for buffers of ``layout`` (host only, no CUDA).

    Examples:
        >>> import commsim
        >>> from commsim.exec import layout
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> pl = plan(s, layout(s, 16))
        >>> pl.nlaunches, pl.staged_steps, pl.traffic_elems  # 6 steps, 5 (p-1) n elements
        (6, [], 240)
    """
    check_layout(schedule, layout)
    p, nelems = schedule.nranks, layout.nelems
    off = layout.offsets
    steps: list[StepPlan] = []
    traffic = 0
    for index, step in checked_steps(schedule):
        sp = _step_plan(step, index, off, nelems, p * nelems, chunk)
        if sp is not None:
            steps.append(sp)
            n = off[step.src_slot + step.count] - off[step.src_slot]
            traffic += int((n * (2 + step.reduce)).sum())
    stage = max((s.staged for s in steps), default=0)
    return Plan(p, nelems, stage, chunk, steps, traffic)
