"""Timing on MPI ranks: what every rank runs, started by ``mpirun`` or already under it.

:func:`measure_ranks` is the loop of :mod:`commsim.bench._loop` with the MPI timer: each run
starts after a barrier; a run's time is the slowest rank's (an ``MPI_MAX`` reduction of the
per-rank times at the end); the check runs once per size from fresh inputs (the same seeded
inputs on every rank): the buffers are gathered, rank 0 compares them with the reference
interpreter and broadcasts its verdict. Every rank therefore ends with the same
:class:`Measurement` s. Two callers: the worker that :func:`commsim.bench.measure_mpi` starts
(:mod:`commsim.bench._mpi_worker`), and :func:`measure_in_place`, when the user started this
process under ``mpirun`` and every rank calls it.

:func:`check_mpi_request` refuses what would fail on the ranks (mixed or wrong rank counts, a dtype
MPI does not run, a size below a schedule's smallest) before any process starts or any rank
waits for another.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from commsim._ir import Schedule
from commsim.bench._loop import layout_for_size, measure_together
from commsim.bench._measurement import Measurement
from commsim.bench._request import BenchRequest
from commsim.bench._timer import MpiTimer, Timer
from commsim.errors import CommsimError
from commsim.exec import Backend

__all__ = ["check_mpi_request", "measure_in_place", "measure_ranks", "under_mpirun"]

_MPI_ENV = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


def under_mpirun() -> bool:
    """Whether this process was started by an MPI launcher (its rank environment is set)."""
    return any(v in os.environ for v in _MPI_ENV)


def check_mpi_request(schedules: Sequence[Schedule], request: BenchRequest) -> int:
    """The schedules' common rank count, or a one-line error for what the ranks would refuse."""
    from commsim.exec.mpi import MpiBackend

    if not schedules:
        raise CommsimError("give at least one schedule to measure")
    counts = sorted({s.nranks for s in schedules})
    if len(counts) > 1:
        raise CommsimError(
            f"one mpirun runs one rank count; these schedules have nranks "
            f"{', '.join(map(str, counts))}: measure them separately"
        )
    dt = MpiBackend.check_dtype(request.dtype)
    for s in schedules:
        for size in request.sizes:
            layout_for_size(s, size, dt)
    return counts[0]


def measure_ranks(
    schedules: Sequence[Schedule],
    request: BenchRequest,
    backend: Backend,
    timer: Timer,
    *,
    done: Callable[[int, int, Measurement], None] | None = None,
) -> list[Measurement]:
    """Every rank: check and time each schedule at each size; returned schedule-major,
    size-minor. The schedules run together size by size, their runs interleaved
    (:func:`~commsim.bench._loop.measure_together`), so that drift of the machine during the
    launch moves every schedule alike rather than the ones measured last.

    ``backend`` is an MPI backend on every rank; ``done(k, total, m)`` is called after the
    ``k``-th measurement (the worker's progress file).
    """
    total = len(schedules) * len(request.sizes)
    by_size: list[list[Measurement]] = []
    for size in request.sizes:
        by_size.append(measure_together(schedules, backend, size, request, timer))
        if done is not None:
            done(len(by_size) * len(schedules), total, by_size[-1][-1])
    return [by_size[j][i] for i in range(len(schedules)) for j in range(len(request.sizes))]


def measure_in_place(
    schedules: Sequence[Schedule], request: BenchRequest, *, backend: str = "mpi"
) -> tuple[int, list[Measurement]]:
    """Time ``schedules`` on the ranks of the ``mpirun`` that started this process.

    Every rank calls it with the same arguments; it returns ``(this rank, the results)``, the
    same results on every rank (so every rank can decide an exit status; print on rank 0). Each
    schedule's ``nranks`` must equal the number of processes; ``backend`` is the executor
    (``"mpi"``, ``"mpi4py"`` or ``"shmem"``). A request every rank would refuse
    raises :class:`CommsimError` on every rank; an error on one rank alone ends them all
    (``MPI_Abort``) after printing it, rather than leaving the others waiting.
    """
    from commsim.exec import get_backend

    nranks = check_mpi_request(schedules, request)
    executor = get_backend(backend, **request.backend_options())
    if nranks != executor.size:
        raise CommsimError(
            f"the schedules have nranks={nranks} but this mpirun started {executor.size} "
            f"processes; run `mpirun -n {nranks} ...`, or start without mpirun (commsim starts "
            "it itself)"
        )
    try:
        results = measure_ranks(schedules, request, executor, MpiTimer(executor.comm))
    except Exception as e:  # one rank alone: end them all rather than leave the others waiting
        print(f"commsim: error: rank {executor.rank}: {e}", file=sys.stderr, flush=True)
        executor.comm.Abort(1)
        raise
    return executor.rank, results
