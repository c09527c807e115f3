r"""Declarative specs of the six collectives: the data layout, what holds before, what must hold after.

Each spec works on arrays of shape ``[nranks, ndata]`` (msccl-tools' pre/post-conditions, as arrays),
so the verifier scales to thousands of ranks. ``m`` below is the number of slots per rank-block.

=============== ================================ ==================================== ==============
collective      data slots (``ndata``)           before                               after
=============== ================================ ==================================== ==============
allreduce       any                              every rank holds its vector          every rank: the sum
reduce_scatter  ``p·m``                          every rank holds its vector          rank ``r``, block ``r``: the sum
allgather       ``p·m``                          rank ``r`` holds block ``r`` only    every rank: every block
broadcast       any                              the root holds the vector            every rank: the root's vector
reduce          any                              every rank holds its vector          the root: the sum
alltoall        ``2·p·m``: input, then output    input blocks                         output block ``q`` of rank ``r`` =
                                                                                      input block ``r`` of rank ``q``
=============== ================================ ==================================== ==============

The bus-bandwidth factors are nccl-tests' (``busbw = algbw × factor``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from commsim._ir import Schedule
from commsim.errors import ScheduleError

__all__ = ["SPECS", "CollectiveSpec", "spec_of"]


@dataclasses.dataclass(frozen=True)
class CollectiveSpec:
    """Pre/post-conditions and conventions of one collective."""

    kind: str
    reduces: bool
    block_multiple: int  # ndata must be a multiple of block_multiple * p (0: any ndata)
    busbw_factor: Callable[[int], float]
    summary: str

    def check_layout(self, nranks: int, ndata: int) -> int:
        """Validate the data-slot count; return ``m``, slots per block (1 where blocks don't apply)."""
        if self.block_multiple == 0:
            return 1
        unit = self.block_multiple * nranks
        if ndata % unit:
            raise ScheduleError(
                f"{self.kind} needs a multiple of {unit} data slots "
                f"({self.block_multiple} x {nranks} ranks), the schedule has {ndata}"
            )
        return ndata // unit

    def initial(self, nranks: int, ndata: int, root: int) -> np.ndarray:
        """Boolean ``[nranks, ndata]``: which data slots hold input before the collective."""
        m = self.check_layout(nranks, ndata)
        defined = np.zeros((nranks, ndata), dtype=bool)
        if self.kind in ("allreduce", "reduce", "reduce_scatter"):
            defined[:] = True
        elif self.kind == "broadcast":
            defined[root] = True
        elif self.kind == "allgather":
            ranks = np.arange(ndata) // m
            defined[ranks, np.arange(ndata)] = True
        elif self.kind == "alltoall":
            defined[:, : nranks * m] = True
        return defined

    def expected(self, init: np.ndarray, root: int) -> tuple[np.ndarray, np.ndarray]:
        """Given the input values ``init`` (``[p, ndata]``), the required result and its mask.

        Reductions are sums in ``uint64`` (wrapping), matching the verifier's interpreter.
        """
        p, ndata = init.shape
        m = self.check_layout(p, ndata)
        mask = np.zeros((p, ndata), dtype=bool)
        if self.reduces:
            total = init.sum(axis=0, dtype=np.uint64)
            want = np.broadcast_to(total, (p, ndata))
            if self.kind == "allreduce":
                mask[:] = True
            elif self.kind == "reduce":
                mask[root] = True
            else:  # reduce_scatter
                owner = np.arange(ndata) // m
                mask[owner, np.arange(ndata)] = True
            return want, mask
        if self.kind == "broadcast":
            mask[:] = True
            return np.broadcast_to(init[root], (p, ndata)), mask
        if self.kind == "allgather":
            mask[:] = True
            owner = np.arange(ndata) // m
            return np.broadcast_to(init[owner, np.arange(ndata)], (p, ndata)), mask
        # alltoall: out[r, p*m + q*m + i] = init[q, r*m + i]
        want = np.zeros_like(init)
        blocks = init[:, : p * m].reshape(p, p, m)  # [q, r, i]
        want[:, p * m :] = blocks.transpose(1, 0, 2).reshape(p, p * m)
        mask[:, p * m :] = True
        return want, mask


def _allreduce_factor(p: int) -> float:
    return 2.0 * (p - 1) / p


def _gather_factor(p: int) -> float:
    return (p - 1) / p


def _one(p: int) -> float:
    return 1.0


SPECS: dict[str, CollectiveSpec] = {
    s.kind: s
    for s in (
        CollectiveSpec("allreduce", True, 0, _allreduce_factor, "every rank gets the sum"),
        CollectiveSpec("reduce_scatter", True, 1, _gather_factor, "rank r gets block r of the sum"),
        CollectiveSpec("allgather", False, 1, _gather_factor, "every rank gets every block"),
        CollectiveSpec("broadcast", False, 0, _one, "every rank gets the root's vector"),
        CollectiveSpec("reduce", True, 0, _one, "the root gets the sum"),
        CollectiveSpec("alltoall", False, 2, _gather_factor, "rank r's block q goes to rank q"),
    )
}


def spec_of(schedule: Schedule) -> CollectiveSpec:
    return SPECS[schedule.kind]
