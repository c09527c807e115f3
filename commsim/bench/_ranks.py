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

from commsim import Schedule
from commsim.bench._loop import layout_for_size, measure_size
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
    """Every rank: check and time each schedule at each size (schedule-major, size-minor).

    ``backend`` is an :class:`~commsim.exec.mpi.MpiBackend` on every rank; ``done(k, total, m)``
    is called after the ``k``-th measurement (the worker's progress file).
    """
    total = len(schedules) * len(request.sizes)
    results = []
    for s in schedules:
        for size in request.sizes:
            results.append(measure_size(s, backend, size, request, timer))
            if done is not None:
                done(len(results), total, results[-1])
    return results


def measure_in_place(
    schedules: Sequence[Schedule], request: BenchRequest
) -> tuple[int, list[Measurement]]:
    """Time ``schedules`` on the ranks of the ``mpirun`` that started this process.

    Every rank calls it with the same arguments; it returns ``(this rank, the results)``, the
    same results on every rank (so every rank can decide an exit status; print on rank 0). Each
    schedule's ``nranks`` must equal the number of processes. A request every rank would refuse
    raises :class:`CommsimError` on every rank; an error on one rank alone ends them all
    (``MPI_Abort``) after printing it, rather than leaving the others waiting.
    """
    from commsim.exec.mpi import MpiBackend

    nranks = check_mpi_request(schedules, request)
    backend = MpiBackend()
    why = backend.unavailable()
    if why:
        raise CommsimError(why)
    if nranks != backend.size:
        raise CommsimError(
            f"the schedules have nranks={nranks} but this mpirun started {backend.size} "
            f"processes; run `mpirun -n {nranks} ...`, or start without mpirun (commsim starts "
            "it itself)"
        )
    try:
        results = measure_ranks(schedules, request, backend, MpiTimer(backend.comm))
    except Exception as e:  # one rank alone: end them all rather than leave the others waiting
        print(f"commsim: error: rank {backend.rank}: {e}", file=sys.stderr, flush=True)
        backend.comm.Abort(1)
        raise
    return backend.rank, results
