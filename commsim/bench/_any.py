"""One entry point for every backend: MPI starts ``mpirun``, the others run in this process.

:func:`measure_any` is what a caller that takes a backend's *name* uses (``commsim run``,
:func:`commsim.bench.validate`), so the choice between :func:`~commsim.bench.measure_mpi` and
:func:`~commsim.bench.measure`, and the JAX CPU devices a single process needs, are made here once.
"""

from __future__ import annotations

from collections.abc import Sequence

from commsim import Schedule
from commsim._compat import ensure_cpu_devices
from commsim.bench._launch import DEFAULT_TIMEOUT, measure_mpi
from commsim.bench._local import measure
from commsim.bench._measurement import Measurement
from commsim.bench._request import BenchRequest
from commsim.exec import MPI_BACKENDS, get_backend

__all__ = ["measure_any"]


def measure_any(
    schedules: Sequence[Schedule],
    backend: str,
    request: BenchRequest,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | None = None,
) -> list[Measurement]:
    """Time ``schedules`` (one ``nranks``) on the backend named ``backend``; schedule-major.

    ``"mpi"`` and ``"mpi4py"`` run them on ``p`` processes of one ``mpirun`` (``timeout`` seconds at most);
    ``"jax"`` asks XLA for ``p`` CPU devices first when JAX has not started (:mod:`commsim._compat`).
    """
    schedules = list(schedules)
    if backend in MPI_BACKENDS:
        return measure_mpi(schedules, request, timeout=timeout, progress=progress, backend=backend)
    if backend == "jax" and schedules:
        ensure_cpu_devices(schedules[0].nranks)
    be = get_backend(backend)
    return [m for s in schedules for m in measure(s, be, request, progress=progress)]
