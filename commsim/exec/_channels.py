r"""Which channel owns each ``(rank, slot)``: what lets an executor run channels apart (numpy).

IR rule 6 promises that a ``(rank, slot)`` written on one channel is read or written on no other
(the verifier proves it). An executor may then give every channel a **copy of the buffer** of its
own and run each channel's steps on its copy alone, with no dependence between channels: a slot
a channel reads is either written by that channel only (its copy has every write) or written by
none (every copy holds the input). At the end, each ``(rank, slot)`` is taken from the copy of
the channel that wrote it (its **owner**; channel 0 where none did). The JAX mesh backend does
this (:mod:`commsim.exec.jax._program`), so that one channel's steps never wait for another's.

:class:`Owners` collects a schedule's accesses step by step (ranges expanded with array
operations, no loop over ranks) and :meth:`Owners.table` answers the ``[p, nslots]`` owner table,
or ``None`` where the schedule breaks the promise (an executor then keeps one buffer, which is
right for any schedule whose steps are valid).

Examples:
    >>> import commsim
    >>> from commsim.algorithms._parallel import channels
    >>> s = channels(commsim.build("allgather", "ring", nranks=2), 2)
    >>> own = Owners(s.nranks, s.nslots)
    >>> for i in range(s.nsteps):
    ...     own.add(s.step(i))
    >>> own.table().tolist()  # slot 2j + c is channel c's share of block j
    [[0, 0, 0, 1], [0, 1, 0, 0]]
"""

from __future__ import annotations

import numpy as np

from commsim._ir import Step

__all__ = ["Owners"]


def _cells(rank: np.ndarray, start: np.ndarray, count: np.ndarray, nslots: int) -> np.ndarray:
    """The ``rank * nslots + slot`` of every slot of the ranges ``[start, start + count)``."""
    first = np.repeat(rank * nslots + start, count)
    within = np.arange(len(first)) - np.repeat(np.cumsum(count) - count, count)
    return first + within


class Owners:
    """The accesses of a schedule's steps, per channel, and the owner table they imply."""

    def __init__(self, nranks: int, nslots: int) -> None:
        self.nranks, self.nslots = nranks, nslots
        self._writes: list[tuple[np.ndarray, np.ndarray]] = []  # (cell, channel)
        self._reads: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, step: Step) -> None:
        """Record the slots ``step`` reads and writes, with their channels."""
        n = self.nslots
        self._reads.append(
            (_cells(step.src, step.src_slot, step.count, n), np.repeat(step.channel, step.count))
        )
        self._writes.append(
            (_cells(step.dst, step.dst_slot, step.count, n), np.repeat(step.channel, step.count))
        )

    def table(self) -> np.ndarray | None:
        """``[p, nslots]``: the channel that writes each ``(rank, slot)`` (0 where none does), or
        ``None`` if a cell written on one channel is read or written on another."""
        ncells = self.nranks * self.nslots
        owner = np.full(ncells, -1, dtype=np.int64)
        if self._writes:
            cell = np.concatenate([c for c, _ in self._writes])
            chan = np.concatenate([c for _, c in self._writes])
            owner[cell] = chan
            if (owner[cell] != chan).any():  # two channels write one cell
                return None
        for cell, chan in self._reads:
            o = owner[cell]
            if ((o >= 0) & (o != chan)).any():
                return None
        return np.maximum(owner, 0).reshape(self.nranks, self.nslots)
