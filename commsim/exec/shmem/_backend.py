r"""The one-sided backend: one process per rank, every transfer a put with a signal into MPI-3
RMA windows, the way NVSHMEM and OpenSHMEM collectives move data (``--backend shmem``).

Rank ``r`` is MPI rank ``r`` of a communicator of exactly ``p`` processes (a private clone of
``COMM_WORLD`` by default); run it under ``mpirun`` (``commsim run --backend shmem`` starts it
itself: :func:`commsim.bench.measure_mpi`). The anatomy, as in every backend:

* **validate**: the dtype (:data:`commsim.exec.mpi.DTYPES`), the layout, and that MPI runs
  exactly ``p`` processes (the MPI backend's checks, inherited).
* **plan**: :func:`commsim.exec.shmem._plan.plan`, numpy only: every rank's puts into the
  targets' symmetric staging, the signals it raises and waits for, and the credits that let a
  run reuse the staging (the module states why the waits cannot deadlock).
* **program**: :func:`commsim.exec.shmem._program.compiled`, the plan as ``MPI_Put`` +
  ``MPI_Win_flush`` + ``MPI_Accumulate`` on a signal, passive target (``MPI_Win_lock_all``
  once, no fences), on numpy buffers; reductions by the target after the signal.
* **native collective**: the MPI library's collective through mpi4py on numpy buffers (as
  ``--backend mpi4py``): ``MPI_Allreduce`` and the others, two-sided.
* **register**: :class:`ShmemBackend`, its row in the backend table.

Compiling is collective here (``MPI_Win_allocate``): every rank compiles the same schedules in
the same order, which :func:`commsim.exec.execute` and the bench do. ``timeout`` bounds every
signal wait, so a dead peer ends the run with one line instead of a hang.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim._ir import Schedule
from commsim.exec._backend import Compiled
from commsim.exec._layout import Layout
from commsim.exec._lowering import CompileCache, check_layout
from commsim.exec.mpi import HostMpiBackend
from commsim.exec.shmem._plan import RankPuts, plan

__all__ = ["ShmemBackend"]


# -- plan ------------------------------------------------------------------------------------------
# commsim.exec.shmem._plan.plan (numpy only, all ranks at once), made once per (schedule, count)
def _planned(cache: CompileCache, schedule: Schedule, layout: Layout, rank: int) -> RankPuts:
    return cache.get(schedule, ("puts", layout.count), lambda: plan(schedule, layout))[rank]


# -- register --------------------------------------------------------------------------------------
class ShmemBackend(HostMpiBackend):
    """Runs schedules as one-sided puts with signals; create it on every rank.

    Args:
        comm: the communicator whose ranks are the schedule's ranks (default: a clone of
            ``COMM_WORLD``).
        timeout: seconds a signal wait may last before a one-line error (``None``: no limit;
            ``mpirun``'s own timeout still applies under :func:`commsim.bench.measure_mpi`).
    """

    name = "shmem"

    def __init__(self, comm: Any = None, timeout: float | None = None) -> None:
        super().__init__(comm)
        self.timeout = timeout

    def plan(self, schedule: Schedule, layout: Layout) -> RankPuts:  # type: ignore[override]
        """This rank's one-sided program, the one :meth:`compile` runs (cached)."""
        check_layout(schedule, layout)
        return _planned(self._cache, schedule, layout, self.rank)

    def _program(self, schedule: Schedule, layout: Layout, dt: np.dtype) -> Compiled:
        """The plan as puts with signals on numpy buffers (collective: makes its windows)."""
        from commsim.exec.shmem import _program as prog

        def make() -> Compiled:
            pl = _planned(self._cache, schedule, layout, self.rank)
            return prog.compiled(pl, self.comm, dt, self.timeout)

        return self._cache.get(schedule, ("shmem program", layout.count, dt.str), make)

    def _idle(self, dt: np.dtype) -> Compiled:
        """One atomic read of this rank's signals (:func:`commsim.exec.shmem._program.idle`)."""
        from commsim.exec.shmem import _program as prog

        return prog.idle(self.comm, dt)

    def close(self) -> None:
        """Free every RMA window the programs made (collective; the programs end with it)."""
        from commsim.exec.shmem import _program as prog

        prog.free_windows()
        self._cache = CompileCache()
