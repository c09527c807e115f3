"""One entry point for every backend: its row's launcher says how its ranks start.

:func:`measure_any` is what a caller that takes a backend's *name* uses (``commsim run``,
:func:`commsim.bench.validate`), so the choice between :func:`~commsim.bench.measure_mpi`
(``mpirun`` backends) and :func:`~commsim.bench.measure` (in-process ones, prepared for ``p``
ranks first: JAX's CPU devices) is made here once, from the backend's row.
"""

from __future__ import annotations

from collections.abc import Sequence

from commsim._ir import Schedule
from commsim.bench._launch import DEFAULT_TIMEOUT, measure_mpi
from commsim.bench._local import measure
from commsim.bench._measurement import Measurement
from commsim.bench._request import BenchRequest
from commsim.exec import backend_info, get_backend

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

    An ``mpirun`` backend (``"mpi"``, ``"mpi4py"``, ``"shmem"``) runs them on ``p`` processes of one
    ``mpirun`` (``timeout`` seconds at most); an in-process one is prepared for ``p`` ranks
    first (``"jax"`` asks XLA for ``p`` CPU devices when JAX has not started).
    """
    schedules = list(schedules)
    if backend_info(backend).multiprocess:
        return measure_mpi(schedules, request, timeout=timeout, progress=progress, backend=backend)
    nranks = schedules[0].nranks if schedules else None
    be = get_backend(backend, nranks=nranks, **request.backend_options())
    return [m for s in schedules for m in measure(s, be, request, progress=progress)]
