"""A measured Chrome trace: one step-timed run of a schedule on an MPI backend.

The backend is one whose row declares ``step_trace`` (an ``mpirun`` backend offering
:class:`~commsim.exec.StepTimed`, today ``mpi``). Every rank runs its program one step at a time
(:meth:`MpiBackend.compile_steps <commsim.exec.mpi.MpiBackend.compile_steps>`: one jitted
function per step, each blocking until its result is ready) and reads ``time.perf_counter()``
before and after each step it takes part in. Rank 0 gathers the ``[2, nsteps]`` times of every
rank (``MPI_Gather``) and draws them with :func:`commsim.models.step_trace`: a track per rank, a
slice per (rank, step) that sends or receives, an arrow per message. Steps run once untimed
first (each step's function compiles on its first call) and are checked against the reference
interpreter (rank 0's verdict, broadcast), then once more from the same inputs, timed.

**Clock alignment.** Each rank reads ``time.perf_counter()`` right after a barrier that ends
the warm-up (its *origin*) and around each step. When every rank runs on one host (their MPI
processor names agree) they read one clock, the system's monotonic clock (``perf_counter`` is
``CLOCK_MONOTONIC`` on Linux, ``mach_absolute_time`` on macOS, ``QueryPerformanceCounter`` on
Windows: one per machine, not per process), so times are used as read, from the earliest
origin: no assumption. Across hosts the clocks are unrelated, and each rank's times are taken
from its own origin, which **assumes that the barrier releases every rank at the same
moment**: the ranks' offsets are then the barrier's exit skew (microseconds on a fast network,
more when a rank is descheduled), and the trace's cross-rank order is only as good as that.
``otherData["clock"]`` says which was used.

**Not a benchmark.** A step-timed run synchronizes host and device between steps, which the
timed program (one fused function per run) never does, so its steps take longer than a timed
run's; use it to see the schedule's shape and where ranks wait, and ``commsim run``'s timed
runs for how fast it is.

Two entry points, as for timing: :func:`trace_mpi` starts ``mpirun -n p`` itself
(:mod:`commsim.bench._trace_worker` on every rank); :func:`trace_in_place` is called by every
rank of the user's own ``mpirun``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from commsim._ir import Schedule
from commsim.bench._launch import DEFAULT_TIMEOUT, run_module
from commsim.bench._loop import layout_for_size
from commsim.bench._ranks import check_mpi_request
from commsim.bench._request import BenchRequest
from commsim.bench._timer import MpiTimer
from commsim.errors import CommsimError
from commsim.exec import (
    BACKENDS,
    StepTimed,
    backend_info,
    check_outputs,
    get_backend,
    random_inputs,
    supports,
)
from commsim.interop import write_npz
from commsim.models import step_trace

__all__ = ["STEP_TIMED_NOTE", "results_json", "trace_in_place", "trace_mpi", "trace_ranks"]

#: What a measured trace's ``otherData`` and the command line say about it.
STEP_TIMED_NOTE = (
    "a separate step-timed run, not the timed runs: reading the clock between steps adds a "
    "host-device synchronization per step"
)


SHARED_CLOCK = "one host: the ranks' shared monotonic clock (perf_counter)"
BARRIER_CLOCK = "several hosts: each rank's perf_counter from a common barrier's exit"


def trace_ranks(
    schedule: Schedule, request: BenchRequest, backend: Any
) -> tuple[np.ndarray, np.ndarray, int, str] | None:
    """Every rank: one checked warm-up pass and one step-timed pass of ``schedule`` at the
    request's last size. Rank 0 gets ``(start, end, nbytes, clock)``: ``[p, nsteps]`` seconds
    from the barrier before the timed pass (NaN where a rank has no work in a step; the module
    docstring says how clocks are aligned, ``clock`` which way was used) and the bytes that
    ran; the other ranks get ``None``."""
    from mpi4py import MPI

    if not supports(backend, StepTimed):
        raise CommsimError(f"backend {backend.name!r} cannot run a schedule step by step")
    comm = backend.comm
    dt = backend.check_dtype(request.dtype)
    lay = layout_for_size(schedule, request.sizes[-1], dt)
    inputs = random_inputs(lay, dt, request.seed)
    program = backend.compile_steps(schedule, lay, dt)
    buf = program.put(lay.pack(inputs))
    for _, run in program.steps:  # compiles each step's function
        buf = run(buf)
    if request.check:
        out = program.get(buf)

        def compare() -> str | None:
            try:
                check_outputs(schedule, lay, inputs, lay.unpack(np.asarray(out)))
            except CommsimError as e:
                return f"the step-timed run: {e}"
            return None

        error = MpiTimer(comm).verdict(compare)
        if error:
            raise CommsimError(error)
    times = np.full((2, schedule.nsteps), np.nan)
    buf = program.put(lay.pack(inputs))
    comm.Barrier()
    origin = time.perf_counter()
    for i, run in program.steps:
        t0 = time.perf_counter()
        buf = run(buf)
        times[:, i] = (t0, time.perf_counter())
    rows = comm.gather((times, origin, MPI.Get_processor_name()), root=0)
    if rows is None:
        return None
    both = np.stack([r[0] for r in rows], axis=1)  # [2, p, nsteps]
    origins = np.array([r[1] for r in rows])
    one_host = len({r[2] for r in rows}) == 1
    both -= (np.full_like(origins, origins.min()) if one_host else origins)[None, :, None]
    clock = SHARED_CLOCK if one_host else BARRIER_CLOCK
    return both[0], both[1], lay.count * dt.itemsize, clock


def check_traceable(backend: str) -> None:
    """A one-line error unless backend ``backend`` can be traced step by step under ``mpirun``
    (its row declares ``step_trace``)."""
    info = backend_info(backend)
    if not (info.step_trace and info.multiprocess):
        able = [n for n, row in BACKENDS.items() if row.step_trace and row.multiprocess]
        raise CommsimError(
            f"--trace needs per-step timestamps, which only --backend {' or '.join(able)} takes "
            f"(not {backend})"
        )


def _document(
    schedule: Schedule, start: Any, end: Any, nbytes: int, clock: str, dtype: str, backend: str
) -> dict:
    return step_trace(
        schedule,
        np.asarray(start, dtype=np.float64),
        np.asarray(end, dtype=np.float64),
        backend=backend,
        nbytes=int(nbytes),
        dtype=dtype,
        clock=clock,
        note=STEP_TIMED_NOTE,
    )


def trace_mpi(
    schedule: Schedule,
    request: BenchRequest,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | None = None,
    backend: str = "mpi",
) -> dict[str, Any]:
    """The measured Chrome trace of ``schedule`` at the request's last size, on ``p`` MPI
    processes started by ``mpirun -n p`` (the module docstring: what is timed, how clocks are
    aligned). Refuses a bad request before any process starts; a failing rank or a timeout is a
    one-line :class:`CommsimError`, as for :func:`commsim.bench.measure_mpi`."""
    check_traceable(backend)
    check_mpi_request([schedule], request)
    with tempfile.TemporaryDirectory(prefix="commsim-trace-") as tmp:
        work = Path(tmp)
        config = {
            "schedule": str(write_npz(schedule, work / "schedule.npz")),
            "request": request.to_dict(),
            "backend": backend,
        }
        got = run_module(_WORKER, config, schedule.nranks, work, timeout, progress)
    nan = float("nan")
    start, end = (
        [[nan if t is None else t for t in row] for row in got[k]] for k in ("start", "end")
    )
    return _document(schedule, start, end, got["nbytes"], got["clock"], request.dtype, backend)


def trace_in_place(
    schedule: Schedule, request: BenchRequest, *, backend: str = "mpi"
) -> tuple[int, dict | None]:
    """:func:`trace_mpi` on the ranks of the ``mpirun`` that started this process: every rank
    calls it; returns ``(this rank, the trace on rank 0 / None elsewhere)``. An error on one
    rank alone ends them all (``MPI_Abort``) after printing it."""
    check_traceable(backend)
    check_mpi_request([schedule], request)
    name, backend = backend, get_backend(backend)
    if schedule.nranks != backend.size:
        raise CommsimError(
            f"the schedule has nranks={schedule.nranks} but this mpirun started {backend.size} "
            f"processes; run `mpirun -n {schedule.nranks} ...`"
        )
    try:
        got = trace_ranks(schedule, request, backend)
    except Exception as e:  # one rank alone: end them all rather than leave the others waiting
        print(f"commsim: error: rank {backend.rank}: {e}", file=sys.stderr, flush=True)
        backend.comm.Abort(1)
        raise
    if got is None:
        return backend.rank, None
    return backend.rank, _document(schedule, *got, request.dtype, name)


def results_json(got: tuple[np.ndarray, np.ndarray, int, str]) -> str:
    """Rank 0's ``results.json`` for the launcher: the times with NaN as ``null``."""
    start, end, nbytes, clock = got

    def plain(a: np.ndarray) -> list:
        return [[None if np.isnan(t) else float(t) for t in row] for row in a]

    doc = {"start": plain(start), "end": plain(end), "nbytes": int(nbytes), "clock": clock}
    return json.dumps(doc)


_WORKER = "commsim.bench._trace_worker"
