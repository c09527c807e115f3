"""The measurement loop, written once for every backend: check, warm up, time, summarize.

For one message size :func:`measure_size` lays the schedule out (:func:`layout_for_size`: the
element count is rounded **down** to what the schedule's slots divide evenly, as nccl-tests rounds
to its type size; the bytes that actually ran are reported), then

1. **checks** one run from fresh inputs (seeded random integers, the same on every rank) against
   the reference interpreter, and one run of the backend's own collective (the baseline); a
   mismatch is recorded in the :class:`Measurement`, never raised;
2. **times** ``warmup`` untimed and ``iters`` timed runs of the schedule and, interleaved with
   them, of the baseline, so both see the same machine. Every run, the schedule's and the
   baseline's, starts from the same well-scaled inputs, put on the device again (untimed) before
   it: schedules work in place (a backend may donate its buffer) and some native collectives
   too (the CUDA kernels write into their arena), and chaining runs would multiply an
   allreduce's values by ``p`` per run until floats overflow and the timing measures arithmetic
   on ``inf``;
3. **summarizes**: median, min, max and spread, algbw and busbw (:mod:`commsim.bench._measurement`).

How a run is timed and how several processes agree on the times and the verdict is the
:class:`~commsim.bench._timer.Timer`'s business: a local clock, or a barrier before each run and
the slowest rank's time per run under MPI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from commsim import Schedule
from commsim.bench._machine import memory, oversubscription
from commsim.bench._measurement import Measurement
from commsim.bench._request import BenchRequest
from commsim.bench._timer import Timer
from commsim.errors import CommsimError, ResourceError
from commsim.exec import Backend, Compiled, Layout, check_outputs, layout, random_inputs
from commsim.units import format_size

__all__ = ["layout_for_size", "measure_size"]


def layout_for_size(schedule: Schedule, size: int, dtype: Any) -> Layout:
    """The layout for ``size`` bytes of ``dtype`` (count rounded down like nccl-tests), or an error.

    Examples:
        >>> import commsim
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> layout_for_size(s, 1000, "float32").count  # 250 elements, rounded down to 4 slots
        248
    """
    dt = np.dtype(dtype)
    smallest = schedule.nbytes_units * dt.itemsize
    if size < smallest:
        raise CommsimError(
            f"size {format_size(size)} is below the smallest size {schedule.algorithm!r} on "
            f"{schedule.nranks} ranks can run with {dt} ({format_size(smallest)}: one element "
            "per slot unit)"
        )
    lay = layout(schedule, size // dt.itemsize)
    _check_memory(schedule, lay, dt)
    return lay


# host inputs, packed buffers, the backend's buffers, the output and the reference's copy
_COPIES = 5


def _check_memory(schedule: Schedule, lay: Layout, dt: np.dtype) -> None:
    """Refuse, before allocating, a size whose buffers (every rank's, a few copies) do not fit."""
    need = _COPIES * schedule.nranks * lay.nelems * dt.itemsize
    limit, why = memory()
    if need > limit:
        raise ResourceError(
            f"{schedule.algorithm!r} at {format_size(lay.count * dt.itemsize)} on "
            f"{schedule.nranks} ranks needs about {format_size(need, exact=False)} of buffers "
            f"({_COPIES} copies of every rank's), more than the "
            f"{format_size(limit, exact=False)} available ({why})"
        )


def _checked(
    schedule: Schedule,
    lay: Layout,
    inputs: np.ndarray,
    compiled: Compiled,
    what: str,
    timer: Timer,
) -> str | None:
    """Run once from fresh inputs and compare with the reference; the error text or ``None``."""
    out = compiled.get(compiled.run(compiled.put(lay.pack(inputs))))  # MPI: gathered on all ranks

    def compare() -> str | None:
        try:
            check_outputs(schedule, lay, inputs, lay.unpack(np.asarray(out)))
        except CommsimError as e:
            return f"{what}: {e}"
        return None

    return timer.verdict(compare)


def _timed_runs(
    compiled: Compiled,
    native: Compiled | None,
    host: np.ndarray,
    request: BenchRequest,
    timer: Timer,
    tick: Callable[[], None] | None,
) -> np.ndarray:
    """``[2, iters]`` times of the schedule's and the baseline's timed runs (zeros if none)."""
    times = np.zeros((2, request.iters))
    for i in range(request.warmup + request.iters):
        t = timer.time(compiled.run, compiled.put(host))[1]  # fresh inputs, put untimed
        nt = timer.time(native.run, native.put(host))[1] if native is not None else 0.0
        if i >= request.warmup:
            times[:, i - request.warmup] = t, nt
        if tick is not None:
            tick()
    return timer.slowest(times)  # the buffers are freed here, before the next size


def measure_size(
    schedule: Schedule,
    backend: Backend,
    size: int,
    request: BenchRequest,
    timer: Timer,
    *,
    tick: Callable[[], None] | None = None,
) -> Measurement:
    """Check and time ``schedule`` at ``size`` bytes on ``backend``; ``tick()`` after each run."""
    dt = backend.check_dtype(request.dtype)
    lay = layout_for_size(schedule, size, dt)
    inputs = random_inputs(lay, dt, request.seed)
    compiled = backend.compile(schedule, lay, dt)
    native = backend.native(schedule, lay, dt) if request.baseline else None
    found: list[str] = []
    if request.check:
        for what, c in (("schedule", compiled), ("native", native)):
            error = _checked(schedule, lay, inputs, c, what, timer) if c is not None else None
            found += [error] if error else []
    times, ntimes = _timed_runs(compiled, native, lay.pack(inputs), request, timer, tick)
    name = backend.native_name(schedule.collective) if native is not None else None
    crowded = oversubscription(backend.host_workers(schedule.nranks))
    return Measurement.from_times(
        schedule,
        backend.name,
        lay,
        dt,
        size=size,
        warmup=request.warmup,
        times=times,
        native_times=ntimes if native is not None else None,
        native=name,
        check=("FAILED" if found else "ok") if request.check else "skipped",
        error="; ".join(found) or None,
        notes=[crowded] if crowded else [],
    )
