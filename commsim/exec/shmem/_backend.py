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
from commsim.exec.mpi import DTYPES, HostMpiBackend
from commsim.exec.shmem._plan import RankPuts, plan

__all__ = ["DTYPES", "ShmemBackend"]


# -- validate --------------------------------------------------------------------------------------
# the MPI backend's checks (DTYPES, the layout, p == the number of processes), inherited


# -- plan ------------------------------------------------------------------------------------------
# commsim.exec.shmem._plan.plan (numpy only, all ranks at once), made once per (schedule, count)
def _planned(cache: CompileCache, schedule: Schedule, layout: Layout, rank: int) -> RankPuts:
    return cache.get(schedule, ("puts", layout.count), lambda: plan(schedule, layout))[rank]


# -- program ---------------------------------------------------------------------------------------
# commsim.exec.shmem._program (mpi4py RMA), built once per (schedule, count, dtype): collective
def _compiled(
    cache: CompileCache, schedule: Schedule, layout: Layout, dt: np.dtype, comm: Any,
    timeout: float | None,
) -> Compiled:  # fmt: skip
    from commsim.exec.shmem import _program as prog

    def make() -> Compiled:
        pl = _planned(cache, schedule, layout, comm.Get_rank())
        return prog.compiled(pl, comm, dt, timeout)

    return cache.get(schedule, ("shmem program", layout.count, dt.str), make)


# -- native collective -----------------------------------------------------------------------------
# the MPI library's two-sided collective through mpi4py on numpy buffers (HostMpiBackend.native)


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

    @staticmethod
    def prepare(nranks: int) -> None:
        """Nothing: ``mpirun`` starts the ``nranks`` processes (:func:`commsim.bench.measure_mpi`)."""

    check_dtype = staticmethod(HostMpiBackend.check_dtype)

    def __init__(self, comm: Any = None, timeout: float | None = None) -> None:
        super().__init__(comm)
        self.timeout = timeout

    def unavailable(self) -> str | None:
        """Why not here (mpi4py cannot be imported), else ``None``; MPI-3 RMA is in every MPI
        library mpi4py 4 builds against."""
        return super().unavailable()

    @staticmethod
    def native_name(collective: str) -> str:
        """The two-sided library collective :meth:`native` runs, e.g. ``"MPI_Allreduce
        (mpi4py)"``."""
        return HostMpiBackend.native_name(collective)

    def compile(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled:
        """This rank's puts with signals for ``schedule`` (collective: every rank compiles the
        same schedules in the same order, since the windows are made here). ``put`` copies this
        rank's row, ``run`` runs in place, ``repeat(buf, k)`` runs ``k`` times back to back,
        ``get`` gathers every rank's buffer (``[p, nelems]``)."""
        return super().compile(schedule, layout, dtype)

    def native(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled | None:
        """The MPI library's two-sided collective through mpi4py on numpy buffers."""
        return super().native(schedule, layout, dtype)

    def plan(self, schedule: Schedule, layout: Layout) -> RankPuts:  # type: ignore[override]
        """This rank's one-sided program, the one :meth:`compile` runs (cached)."""
        check_layout(schedule, layout)
        return _planned(self._cache, schedule, layout, self.rank)

    def _program(self, schedule: Schedule, layout: Layout, dt: np.dtype) -> Compiled:
        """The plan as puts with signals on numpy buffers (collective: makes its windows)."""
        return _compiled(self._cache, schedule, layout, dt, self.comm, self.timeout)

    def _idle(self, dt: np.dtype) -> Compiled:
        """One atomic read of this rank's signals (:func:`commsim.exec.shmem._program.idle`)."""
        from commsim.exec.shmem import _program as prog

        return prog.idle(self.comm, dt)

    def close(self) -> None:
        """Free every RMA window the programs made (collective; the programs end with it)."""
        from commsim.exec.shmem import _program as prog

        prog.free_windows()
        self._cache = CompileCache()
