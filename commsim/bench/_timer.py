"""How a run is timed, and how the processes that ran it agree: the loop's one strategy.

The measurement loop (:mod:`commsim.bench._loop`) is the same for one process and for ``p`` MPI
processes; what differs is a :class:`Timer`:

* :class:`LocalTimer`: ``perf_counter`` around ``run``, which returns only when the device is
  done; the numbers are this process's, and so is the check's verdict.
* :class:`MpiTimer`: a barrier before each run, so every rank starts together; at the end the
  per-run times of every rank are reduced with ``MPI_MAX`` (a run lasts until its slowest rank is
  done), and the check's verdict is rank 0's (it holds the gathered buffers' comparison),
  broadcast, so every rank returns the same :class:`Measurement`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

__all__ = ["LocalTimer", "MpiTimer", "Timer"]


class Timer(Protocol):
    def time(self, run: Callable[[Any], Any], buf: Any) -> tuple[Any, float]:
        """``(run(buf), seconds it took)``."""

    def slowest(self, times: np.ndarray) -> np.ndarray:
        """The per-run times that count: here, or the slowest process's for each run."""

    def verdict(self, compare: Callable[[], str | None]) -> str | None:
        """The check's result (an error text or ``None``), the same for every process."""


class LocalTimer:
    """One process: ``perf_counter`` around each run."""

    def time(self, run: Callable[[Any], Any], buf: Any) -> tuple[Any, float]:
        t0 = time.perf_counter()
        out = run(buf)
        return out, time.perf_counter() - t0

    def slowest(self, times: np.ndarray) -> np.ndarray:
        return np.asarray(times, dtype=np.float64)

    def verdict(self, compare: Callable[[], str | None]) -> str | None:
        return compare()


class MpiTimer:
    """Every rank of ``comm`` (an mpi4py communicator): barrier, time, ``MPI_MAX`` at the end."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm

    def time(self, run: Callable[[Any], Any], buf: Any) -> tuple[Any, float]:
        self.comm.Barrier()
        t0 = time.perf_counter()
        out = run(buf)
        return out, time.perf_counter() - t0

    def slowest(self, times: np.ndarray) -> np.ndarray:
        from mpi4py import MPI

        mine = np.ascontiguousarray(times, dtype=np.float64)
        out = np.empty_like(mine)
        self.comm.Allreduce(mine, out, op=MPI.MAX)
        return out

    def verdict(self, compare: Callable[[], str | None]) -> str | None:
        error = compare() if self.comm.Get_rank() == 0 else None
        return self.comm.bcast(error, root=0)
