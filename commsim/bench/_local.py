"""Timing a schedule in this process: the numpy, JAX and CUDA backends.

Every rank of the schedule lives in this one process (JAX devices, GPU buffers, numpy rows), so
the local clock (:class:`~commsim.bench._timer.LocalTimer`) times a whole run: ``perf_counter``
around ``run``, which returns only when the device is done. MPI ranks are separate processes:
:func:`commsim.bench.measure_mpi` starts them, :func:`commsim.bench.measure_in_place` runs as one.
"""

from __future__ import annotations

from commsim._ir import Schedule
from commsim._progress import Progress
from commsim.bench._loop import layout_for_size, measure_size
from commsim.bench._measurement import Measurement
from commsim.bench._request import BenchRequest
from commsim.bench._timer import LocalTimer
from commsim.errors import CommsimError
from commsim.exec import BACKENDS, Backend, OnCommunicator, backend_info, get_backend, supports
from commsim.units import format_size

__all__ = ["measure"]


def _use_mpi() -> str:
    """The one line for an ``mpirun`` backend given to :func:`measure`."""
    here = ", ".join(n for n, row in BACKENDS.items() if not row.multiprocess)
    return (
        f"measure() runs single-process backends ({here}); time MPI with measure_mpi() "
        "(`commsim run --backend mpi`)"
    )


def _backend(backend: str | Backend, options: dict | None = None) -> Backend:
    if isinstance(backend, str) and backend_info(backend).multiprocess:
        raise CommsimError(_use_mpi())
    if supports(backend, OnCommunicator):  # an MPI backend made by the caller
        raise CommsimError(_use_mpi())
    return get_backend(backend, **(options or {})) if isinstance(backend, str) else backend


def measure(
    schedule: Schedule,
    backend: str | Backend,
    request: BenchRequest,
    *,
    progress: bool | None = None,
) -> list[Measurement]:
    """Time ``schedule`` (and the backend's native collective) at each of ``request.sizes``.

    Args:
        schedule: what to run.
        backend: a single-process backend or its name (``"numpy"``, ``"jax"``, ``"cuda"``).
        request: sizes, dtype, runs, checks and seed (:class:`BenchRequest`).
        progress: a progress bar on stderr: ``None`` on a terminal only, or force on/off.

    Returns:
        One :class:`Measurement` per size, in order. Bad sizes and dtypes are refused before
        anything runs; a failed check is recorded in :attr:`Measurement.check` / ``error``.

    Examples:
        >>> import commsim
        >>> from commsim.bench import BenchRequest
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> [m] = measure(s, "numpy", BenchRequest(sizes=(4096,), iters=3, warmup=1))
        >>> m.nbytes, m.count, m.check, m.algbw_Bps == m.nbytes / m.time_s
        (4096, 1024, 'ok', True)
    """
    be = _backend(backend, request.backend_options())
    dt = be.check_dtype(request.dtype)
    for size in request.sizes:  # refuse bad sizes before running
        layout_for_size(schedule, size, dt)
    label = f"{schedule.collective}/{schedule.algorithm} p={schedule.nranks} {be.name}"
    timer = LocalTimer()
    results = []
    runs = request.warmup + request.iters
    with Progress(len(request.sizes) * runs, label, enabled=progress) as bar:
        for size in request.sizes:
            bar.update(0, note=format_size(size))
            results.append(measure_size(schedule, be, size, request, timer, tick=bar.update))
    return results
