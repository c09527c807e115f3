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
   on ``inf``. Where one run is short and the backend offers ``Compiled.repeat``, a timed call
   runs ``k`` times back to back from one put (nccl-tests' way: the runtime's per-call dispatch
   is paid once per ``k`` runs) and counts ``1/k`` of it per run, ``k`` bounded so that ``k``
   chained runs stay finite (:func:`batch_limit`);
3. **summarizes**: median, min, max and spread, algbw and busbw (:mod:`commsim.bench._measurement`).

How a run is timed and how several processes agree on the times and the verdict is the
:class:`~commsim.bench._timer.Timer`'s business: a local clock, or a barrier before each run and
the slowest rank's time per run under MPI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from commsim._ir import Schedule
from commsim.bench._machine import memory, oversubscription
from commsim.bench._measurement import Measurement
from commsim.bench._request import BenchRequest
from commsim.bench._timer import Timer
from commsim.errors import CommsimError, ResourceError
from commsim.exec import (
    Backend,
    Compiled,
    HostNative,
    Layout,
    check_outputs,
    layout,
    random_inputs,
    supports,
)
from commsim.units import format_size

__all__ = ["layout_for_size", "measure_size", "measure_together"]


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
    wire: str | None = None,
) -> str | None:
    """Run once from fresh inputs and compare with the reference (within ``wire``'s error bound
    when the schedule's messages travel in a wire format); the error text or ``None``."""
    out = compiled.get(compiled.run(compiled.put(lay.pack(inputs))))  # MPI: gathered on all ranks

    def compare() -> str | None:
        try:
            check_outputs(schedule, lay, inputs, lay.unpack(np.asarray(out)), wire)
        except CommsimError as e:
            return f"{what}: {e}"
        return None

    return timer.verdict(compare)


# a timed call of ``Compiled.repeat`` lasts about this long (when one run is shorter): nccl-tests'
# way of timing back-to-back runs, so that a per-call cost of the runtime is paid once per call
BATCH_SECONDS = 10e-3
MAX_BATCH = 256
PROBE = 4  # runs in the call that estimates one batched run's time


def batch_limit(host: np.ndarray) -> int:
    """How many chained runs keep ``host``'s values finite: each run multiplies them by at most
    ``p`` (an allreduce's sum over ``p`` ranks), so ``k`` runs need ``max|x| p^k`` below the
    dtype's largest value (half its exponent range, for margin); integers wrap, harmlessly.

    Examples:
        >>> batch_limit(np.full((2, 4), 100.0, np.float32))  # (log2(3.4e38) - log2(100)) / 2
        60
        >>> batch_limit(np.ones((8, 4), np.float16))  # 8^k below sqrt(65504)
        2
    """
    p = max(int(host.shape[0]), 2)
    if not np.issubdtype(host.dtype, np.inexact):
        return MAX_BATCH
    big = float(np.abs(host).max(initial=1.0))
    room = np.log(float(np.finfo(host.dtype).max)) - np.log(max(big, 1.0))
    return int(np.clip(room / 2 / np.log(p), 1, MAX_BATCH))


def _batch(seconds: float, limit: int) -> int:
    """Runs per timed call: enough to last :data:`BATCH_SECONDS` at ``seconds`` per run, at most
    ``limit``."""
    return int(np.clip(BATCH_SECONDS // max(seconds, 1e-9), 1, limit))


def _repeated(repeat: Callable[[Any, int], Any], k: int) -> Callable[[Any], Any]:
    return lambda buf: repeat(buf, k)


def _nothing(buf: Any) -> Any:
    return buf


def _timed_runs(
    compiled: Compiled,
    native: Compiled | None,
    host: np.ndarray,
    request: BenchRequest,
    timer: Timer,
    tick: Callable[[], None] | None,
    *others: Compiled | None,
) -> np.ndarray:
    """``[2 + len(others), iters]`` times of one run of the schedule, of the baseline and of
    any further baselines (``others``), all from ``host``, interleaved; zeros for a ``None``
    (:func:`_interleaved`)."""
    pair = (compiled, native, *others)
    return _interleaved([(c, host) for c in pair], request, timer, tick)


def _interleaved(
    entries: list[tuple[Compiled | None, np.ndarray]],
    request: BenchRequest,
    timer: Timer,
    tick: Callable[[], None] | None,
) -> np.ndarray:
    """``[len(entries), iters]`` times of one run of each ``(compiled, inputs)``, interleaved
    run by run so that every entry sees the same machine; zeros for a ``None``.

    Warm-up runs are single runs. Where a :class:`Compiled` offers ``repeat`` and the fastest
    warm-up run (the slowest process's, so that every MPI rank decides alike) lasts less than
    :data:`BATCH_SECONDS`, a probe of :data:`PROBE` back-to-back runs (untimed for the results)
    says what one run costs without the per-call dispatch, and each timed call then runs ``k``
    times (:func:`_batch`, within :func:`batch_limit`) and counts ``1/k`` of the call per run.
    """
    warm = np.zeros((len(entries), request.warmup))
    for i in range(request.warmup):  # fresh inputs, put untimed
        for j, (c, host) in enumerate(entries):
            warm[j, i] = timer.time(c.run, c.put(host))[1] if c is not None else 0.0
        if tick is not None:
            tick()
    warm = timer.slowest(warm)
    runs: list[tuple[Callable[[Any], Any], int]] = []
    for j, (c, host) in enumerate(entries):
        if c is None:
            runs.append((_nothing, 1))
            continue
        limit = batch_limit(host)
        fastest = float(warm[j].min()) if request.warmup else BATCH_SECONDS
        if c.repeat is None or limit < 2 or fastest >= BATCH_SECONDS:
            runs.append((c.run, 1))
            continue
        probe = _repeated(c.repeat, min(PROBE, limit))
        probe(c.put(host))  # compiles the batched program
        t = timer.slowest(np.array([timer.time(probe, c.put(host))[1]]))[0]
        k = _batch(float(t) / min(PROBE, limit), limit)
        runs.append((_repeated(c.repeat, k) if k > 1 else c.run, k))
    times = np.zeros((len(entries), request.iters))
    for i in range(request.iters):
        for j, (c, host) in enumerate(entries):
            if c is not None:
                run, k = runs[j]
                times[j, i] = timer.time(run, c.put(host))[1] / k
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
    return measure_together([schedule], backend, size, request, timer, tick=tick)[0]


def measure_together(
    schedules: Sequence[Schedule],
    backend: Backend,
    size: int,
    request: BenchRequest,
    timer: Timer,
    *,
    tick: Callable[[], None] | None = None,
) -> list[Measurement]:
    """Check and time every schedule of ``schedules`` (one collective) at ``size`` bytes, their
    runs interleaved (the first schedule's, the second's, ..., the baselines', then again) so
    that a machine that drifts during the measurement moves them all alike; one
    :class:`Measurement` each. The baselines (the backend's collective) run once, on the first
    schedule's layout, and stand beside every schedule."""
    dt = backend.check_dtype(request.dtype)
    lays = [layout_for_size(s, size, dt) for s in schedules]
    inputs = [random_inputs(lay, dt, request.seed) for lay in lays]
    compiled = [backend.compile(s, lay, dt) for s, lay in zip(schedules, lays, strict=True)]
    first, lay0 = schedules[0], lays[0]
    native = backend.native(first, lay0, dt) if request.baseline else None
    host = request.baseline and supports(backend, HostNative)
    raw = backend.host_native(first, lay0, dt) if host else None
    found: list[list[str]] = [[] for _ in schedules]
    if request.check:
        for k, (s, lay, x, c) in enumerate(zip(schedules, lays, inputs, compiled, strict=True)):
            error = _checked(s, lay, x, c, "schedule", timer, request.wire)
            found[k] += [error] if error else []
        for what, c in (("native", native), ("host native", raw)):
            error = _checked(first, lay0, inputs[0], c, what, timer) if c is not None else None
            found[0] += [error] if error else []  # a baseline's failure: said once
    hosts = [lay.pack(x) for lay, x in zip(lays, inputs, strict=True)]
    entries = [*zip(compiled, hosts, strict=True), (native, hosts[0]), (raw, hosts[0])]
    times = _interleaved(entries, request, timer, tick)
    ntimes, rtimes = times[len(schedules)], times[len(schedules) + 1]
    name = backend.native_name(first.collective) if native is not None else None
    raw_name = backend.host_native_name(first.collective) if raw is not None else None
    crowded = oversubscription(backend.host_workers(first.nranks))
    return [
        Measurement.from_times(
            s,
            backend.name,
            lay,
            dt,
            size=size,
            warmup=request.warmup,
            times=times[k],
            native_times=ntimes if native is not None else None,
            native=name,
            host_native_times=rtimes if raw is not None else None,
            host_native=raw_name,
            check=("FAILED" if found[k] else "ok") if request.check else "skipped",
            error="; ".join(found[k]) or None,
            notes=[crowded] if crowded else [],
        )
        for k, (s, lay) in enumerate(zip(schedules, lays, strict=True))
    ]
