r"""Timing like nccl-tests: warm-up, timed iterations, median and spread, algbw and busbw.

For each message size :func:`measure` lays the schedule out (the element count is rounded
**down** to what the schedule's slots divide evenly, as nccl-tests rounds to its type size; the
bytes that actually ran are reported), puts the inputs on the device once, checks one run against
the reference interpreter, then times ``warmup`` untimed and ``iters`` timed runs of the schedule
and, interleaved with them, of the backend's own collective (the baseline): ``perf_counter``
around ``run``, which returns only when the device is done. The schedule's runs are chained
(``buf = run(buf)``: schedules work in place, so a backend may donate its buffer); the native
collective's output may differ in shape from its input, so each of its runs starts from the same
input (a native ``run`` must not consume its argument).

Definitions (nccl-tests' ``PERFORMANCE.md``, with the median instead of the mean, which is robust
to the outliers of shared machines):

.. math::

    \text{algbw} = \frac{\text{nbytes}}{t_\text{median}}, \qquad
    \text{busbw} = \text{algbw} \cdot f(p), \qquad
    \text{ratio} = \frac{\text{busbw}}{\text{busbw}_\text{native}}
                 = \frac{t_\text{native}}{t_\text{median}}

with nccl-tests' factor :math:`f` (:attr:`commsim.CollectiveSpec.busbw_factor`:
:math:`2(p-1)/p` for allreduce, :math:`(p-1)/p` for the gathers and scatters, 1 for broadcast and
reduce). ``spread`` is the interquartile range over the median.

Single-process backends only (numpy, jax, cuda); MPI ranks time themselves under ``mpirun``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from commsim._collectives import SPECS
from commsim._ir import Schedule
from commsim._progress import Progress
from commsim.errors import CommsimError
from commsim.exec._backend import Backend, Compiled, get_backend
from commsim.exec._execute import check_outputs, random_inputs
from commsim.exec._layout import Layout, layout
from commsim.units import format_bandwidth, format_size, format_time

__all__ = ["Measurement", "format_table", "layout_for_size", "measure", "timing_stats"]


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One message size of one schedule on one backend (times in s, bandwidths in bytes/s)."""

    collective: str
    algorithm: str
    backend: str
    nranks: int
    dtype: str
    size: int  # bytes asked for
    nbytes: int  # bytes that ran (count x itemsize, in the collective's nbytes convention)
    count: int  # elements that ran
    iters: int
    warmup: int
    time_s: float  # median
    time_min_s: float
    time_max_s: float
    spread: float  # interquartile range / median
    algbw_Bps: float
    busbw_Bps: float
    native: str | None = None  # the baseline's name, e.g. "lax.psum"
    native_time_s: float | None = None
    native_busbw_Bps: float | None = None
    ratio: float | None = None  # busbw / native busbw
    check: str = "skipped"  # "ok", "skipped" or "FAILED"
    error: str | None = None  # what the check found

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_times(
        cls,
        schedule: Schedule,
        backend: str,
        lay: Layout,
        dt: np.dtype,
        *,
        size: int,
        warmup: int,
        times: Sequence[float],
        native_times: Sequence[float] | None = None,
        native: str | None = None,
        check: str = "skipped",
        error: str | None = None,
    ) -> Measurement:
        """Statistics of the timed runs (and the native ones): median, spread, algbw, busbw."""
        med, tmin, tmax, spread = timing_stats(times)
        nbytes = lay.count * dt.itemsize
        factor = SPECS[schedule.collective].busbw_factor(schedule.nranks)
        algbw = nbytes / med if med > 0 else float("inf")
        n_med = n_busbw = ratio = None
        if native_times is not None and len(native_times):
            n_med = timing_stats(native_times)[0]
            n_busbw = nbytes / n_med * factor if n_med > 0 else float("inf")
            ratio = n_med / med if med > 0 else float("inf")
        return cls(
            collective=schedule.collective,
            algorithm=schedule.algorithm,
            backend=backend,
            nranks=schedule.nranks,
            dtype=str(dt),
            size=int(size),
            nbytes=int(nbytes),
            count=int(lay.count),
            iters=len(times),
            warmup=warmup,
            time_s=med,
            time_min_s=tmin,
            time_max_s=tmax,
            spread=spread,
            algbw_Bps=algbw,
            busbw_Bps=algbw * factor,
            native=native if n_med is not None else None,
            native_time_s=n_med,
            native_busbw_Bps=n_busbw,
            ratio=ratio,
            check=check,
            error=error,
        )


def _backend(backend: str | Backend) -> Backend:
    if isinstance(backend, str):
        if backend == "mpi":
            raise CommsimError(
                "measure() runs single-process backends (numpy, jax, cuda); "
                "time MPI with `commsim run --backend mpi`"
            )
        return get_backend(backend)
    return backend


def layout_for_size(schedule: Schedule, size: int, dt: np.dtype) -> Layout:
    """The layout for ``size`` bytes of ``dt`` (count rounded down like nccl-tests), or an error."""
    smallest = schedule.nbytes_units * dt.itemsize
    if size < smallest:
        raise CommsimError(
            f"size {format_size(size)} is below the smallest size {schedule.algorithm!r} on "
            f"{schedule.nranks} ranks can run with {dt} ({format_size(smallest)}: one element "
            "per slot unit)"
        )
    return layout(schedule, size // dt.itemsize)


def _checked(
    schedule: Schedule, lay: Layout, inputs: np.ndarray, compiled: Compiled, what: str
) -> str | None:
    """Run once from fresh inputs and compare with the reference; the error text or ``None``."""
    out = compiled.get(compiled.run(compiled.put(lay.pack(inputs))))
    try:
        check_outputs(schedule, lay, inputs, lay.unpack(np.asarray(out)))
    except CommsimError as e:
        return f"{what}: {e}"
    return None


def timing_stats(times: Sequence[float]) -> tuple[float, float, float, float]:
    """``(median, min, max, spread)`` of run times; spread is the interquartile range / median."""
    t = np.asarray(times, dtype=np.float64)
    med = float(np.median(t))
    q1, q3 = np.percentile(t, [25, 75])
    return med, float(t.min()), float(t.max()), float((q3 - q1) / med) if med > 0 else 0.0


def _timed(run: Callable[[Any], Any], buf: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    buf = run(buf)
    return buf, time.perf_counter() - t0


def measure(
    schedule: Schedule,
    backend: str | Backend,
    sizes_bytes: Sequence[int],
    dtype: Any = "float32",
    iters: int = 20,
    warmup: int = 5,
    check: bool = True,
    baseline: bool = True,
    progress: bool | None = None,
    seed: int = 0,
) -> list[Measurement]:
    """Time ``schedule`` (and the backend's native collective) at each size in ``sizes_bytes``.

    Args:
        schedule: what to run.
        backend: a single-process backend or its name (``"numpy"``, ``"jax"``, ``"cuda"``).
        sizes_bytes: message sizes in the collective's ``nbytes`` convention.
        dtype: element type.
        iters: timed runs per size (median, min, max, spread over them).
        warmup: untimed runs before them.
        check: compare one run per size (and of the baseline) with the reference interpreter;
            a mismatch is recorded in :attr:`Measurement.check` / ``error``, not raised.
        baseline: also time the backend's own collective, when it has one.
        progress: a progress bar on stderr: ``None`` on a terminal only, or force on/off.
        seed: of the random integer inputs.

    Examples:
        >>> import commsim
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> [m] = measure(s, "numpy", [4096], iters=3, warmup=1)
        >>> m.nbytes, m.count, m.check, m.algbw_Bps == m.nbytes / m.time_s
        (4096, 1024, 'ok', True)
    """
    if iters < 1 or warmup < 0:
        raise CommsimError(f"need iters >= 1 and warmup >= 0, got iters={iters}, warmup={warmup}")
    be = _backend(backend)
    dt = np.dtype(dtype)
    sizes = [int(s) for s in sizes_bytes]
    if any(s < 0 for s in sizes):
        raise CommsimError(f"sizes must be >= 0 bytes, got {min(sizes)}")
    layouts = [layout_for_size(schedule, s, dt) for s in sizes]  # refuse bad sizes before running
    native_name = getattr(be, "native_name", None)
    label = f"{schedule.collective}/{schedule.algorithm} p={schedule.nranks} {be.name}"
    results = []
    with Progress(len(sizes) * (warmup + iters), label, enabled=progress) as bar:
        for size, lay in zip(sizes, layouts, strict=True):
            bar.update(0, note=format_size(size))
            inputs = random_inputs(lay, dt, seed)
            compiled = be.compile(schedule, lay, dt)
            native = be.native(schedule, lay, dt) if baseline else None
            errors = []
            if check:
                errors.append(_checked(schedule, lay, inputs, compiled, "schedule"))
                if native is not None:
                    errors.append(_checked(schedule, lay, inputs, native, "native"))
            found = [e for e in errors if e]
            host = lay.pack(inputs)
            buf = compiled.put(host)
            nbuf = native.put(host) if native is not None else None
            times, ntimes = [], []
            for i in range(warmup + iters):
                buf, t = _timed(compiled.run, buf)
                if native is not None:
                    _, nt = _timed(native.run, nbuf)
                if i >= warmup:
                    times.append(t)
                    if native is not None:
                        ntimes.append(nt)
                bar.update(1)
            del buf, nbuf
            results.append(
                Measurement.from_times(
                    schedule,
                    be.name,
                    lay,
                    dt,
                    size=size,
                    warmup=warmup,
                    times=times,
                    native_times=ntimes or None,
                    native=(native_name(schedule.collective) if native_name else "native")
                    if ntimes
                    else None,
                    check=("FAILED" if found else "ok") if check else "skipped",
                    error="; ".join(found) or None,
                )
            )
    return results


_COLUMNS = (
    ("size", ">"),
    ("count", ">"),
    ("time", ">"),
    ("min", ">"),
    ("max", ">"),
    ("spread", ">"),
    ("algbw", ">"),
    ("busbw", ">"),
    ("native busbw", ">"),
    ("ratio", ">"),
    ("check", "<"),
)


def _row(m: Measurement) -> list[str]:
    def bw(x: float | None) -> str:
        return "-" if x is None else format_bandwidth(x)

    return [
        format_size(m.nbytes),
        str(m.count),
        format_time(m.time_s),
        format_time(m.time_min_s),
        format_time(m.time_max_s),
        f"{100 * m.spread:.0f}%",
        bw(m.algbw_Bps),
        bw(m.busbw_Bps),
        bw(m.native_busbw_Bps),
        "-" if m.ratio is None else f"{m.ratio:.2f}x",
        m.check,
    ]


def format_table(measurements: Sequence[Measurement]) -> str:
    """An aligned table, one row per size: time median/min/max, spread, algbw, busbw, baseline.

    ``time`` is the median; ``spread`` the interquartile range relative to it; bandwidths in
    decimal GB/s as nccl-tests prints them; ``ratio`` is busbw over the native busbw.
    """
    rows = [_row(m) for m in measurements]
    heads = [h for h, _ in _COLUMNS]
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(len(heads))]
    lines = []
    for r in [heads, *rows]:
        cells = [f"{c:{a}{w}}" for c, (_, a), w in zip(r, _COLUMNS, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
        if r is heads:
            lines.append("  ".join("-" * w for w in widths))
    failed = [m for m in measurements if m.error]
    lines += [f"FAILED at {format_size(m.nbytes)}: {m.error}" for m in failed]
    return "\n".join(lines)
