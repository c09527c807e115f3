r"""What one message size of one schedule measured, its statistics, and the nccl-tests table.

Definitions (nccl-tests' ``PERFORMANCE.md``, with the median instead of the mean, which is robust
to the outliers of shared machines):

.. math::

    \text{algbw} = \frac{\text{nbytes}}{t_\text{median}}, \qquad
    \text{busbw} = \text{algbw} \cdot f(p), \qquad
    \text{ratio} = \frac{\text{busbw}}{\text{busbw}_\text{native}}
                 = \frac{t_\text{native}}{t_\text{median}}

with nccl-tests' factor :math:`f` (:attr:`commsim.CollectiveSpec.busbw_factor`:
:math:`2(p-1)/p` for allreduce, :math:`(p-1)/p` for the gathers and scatters, 1 for broadcast and
reduce). ``spread`` is the interquartile range over the median. ``nbytes`` is what actually ran:
the element count is rounded **down** to what the schedule's slots divide evenly, as nccl-tests
rounds to its type size; ``size`` is what was asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from commsim._ir import Schedule
from commsim.exec import Layout
from commsim.units import format_bandwidth, format_size, format_time

__all__ = ["Measurement", "format_table", "timing_stats"]


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
    notes: tuple[str, ...] = ()  # why the numbers may not mean what they seem (oversubscription)
    time_q1_s: float | None = None  # first quartile of the timed runs
    time_q3_s: float | None = None  # third quartile
    host_native: str | None = None  # the library called directly (MPI: mpi4py on numpy)
    host_native_time_s: float | None = None  # its median: the transport's own time

    def __post_init__(self) -> None:
        object.__setattr__(self, "notes", tuple(self.notes))  # from JSON: a list

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (the notes as a list)."""
        return {**dataclasses.asdict(self), "notes": list(self.notes)}

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
        host_native_times: Sequence[float] | None = None,
        host_native: str | None = None,
        check: str = "skipped",
        error: str | None = None,
        notes: Sequence[str] = (),
    ) -> Measurement:
        """Statistics of the timed runs (and the native ones): median, spread, algbw, busbw."""
        med, tmin, tmax, spread = timing_stats(times)
        q1, q3 = (float(q) for q in np.percentile(np.asarray(times, dtype=np.float64), [25, 75]))
        nbytes = lay.count * dt.itemsize
        factor = schedule.spec.busbw_factor(schedule.workers)
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
            notes=tuple(notes),
            time_q1_s=q1,
            time_q3_s=q3,
            host_native=host_native if host_native_times is not None else None,
            host_native_time_s=(
                timing_stats(host_native_times)[0] if host_native_times is not None else None
            ),
        )


def timing_stats(times: Sequence[float]) -> tuple[float, float, float, float]:
    """``(median, min, max, spread)`` of run times; spread is the interquartile range / median."""
    t = np.asarray(times, dtype=np.float64)
    med = float(np.median(t))
    q1, q3 = np.percentile(t, [25, 75])
    return med, float(t.min()), float(t.max()), float((q3 - q1) / med) if med > 0 else 0.0


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
    ("host native", ">"),
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
        "-" if m.host_native_time_s is None else format_time(m.host_native_time_s),
        m.check,
    ]


def format_table(measurements: Sequence[Measurement]) -> str:
    """An aligned table, one row per size: time median/min/max, spread, algbw, busbw, baseline.

    ``time`` is the median; ``spread`` the interquartile range relative to it; bandwidths in
    decimal GB/s as nccl-tests prints them; ``ratio`` is busbw over the native busbw. A failed
    check adds a line ``FAILED at SIZE: what it found`` below the table, and each distinct note a
    line ``note: ...``.
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
    lines += [f"note: {n}" for n in dict.fromkeys(n for m in measurements for n in m.notes)]
    return "\n".join(lines)
