"""Bench: time schedules like nccl-tests, and check a model's predictions against the clock.

The fourth consumer of a schedule (after the verifier, the models and the executors). One
measurement loop (check once per size against the reference interpreter, warm-up, timed runs
interleaved with the backend's native collective, median and spread, algbw and busbw) with a
timer strategy: the local clock for single-process backends, a barrier before each run and the
slowest rank's time under MPI. Bench receives :class:`commsim.Schedule` objects and a
:class:`BenchRequest`; it never builds a schedule by name, and the MPI ranks get the schedules
as saved files.

* :func:`measure`: numpy, JAX or CUDA, in this process.
* :func:`measure_mpi`: starts ``mpirun -n p`` itself, with a timeout and a named failing rank.
* :func:`measure_in_place`: every rank calls it when the user started the program under
  ``mpirun`` (:func:`under_mpirun`).
* :func:`validate`: schedules run for real, measured beside predicted (:func:`validate_tuned`:
  each algorithm with the tuner's parameters per size, judged against the tuner's choice); :func:`summarize`: the
  median error per algorithm and the share of sizes where the model ranked the winner right;
  :func:`median_error_interval`: that median error's interval over the timed repeats.
* :func:`format_table`: nccl-tests' columns, one row per size.
* :func:`trace_mpi` / :func:`trace_in_place`: one step-timed MPI run as a Chrome trace.

Examples:
    >>> import commsim
    >>> from commsim.bench import BenchRequest, measure
    >>> s = commsim.build("allgather", "ring", nranks=3)
    >>> [m] = measure(s, "numpy", BenchRequest(sizes=(1000,), iters=2, warmup=0))
    >>> m.nbytes, m.check  # 250 float32 rounded down to 3 slots of 83
    (996, 'ok')
"""

from typing import TYPE_CHECKING

from commsim._lazy import lazy_exports

if TYPE_CHECKING:
    from commsim.bench._any import measure_any
    from commsim.bench._error_interval import median_error_interval
    from commsim.bench._honesty import ERROR_BOUND, validation_warnings
    from commsim.bench._launch import DEFAULT_TIMEOUT, measure_mpi
    from commsim.bench._local import measure
    from commsim.bench._loop import layout_for_size
    from commsim.bench._measurement import Measurement, format_table, timing_stats
    from commsim.bench._other_load import OtherLoad
    from commsim.bench._ranks import measure_in_place, under_mpirun
    from commsim.bench._request import BenchRequest
    from commsim.bench._timer import LocalTimer, MpiTimer, Timer
    from commsim.bench._trace import check_traceable, trace_in_place, trace_mpi
    from commsim.bench._validate import (
        AlgorithmAccuracy,
        Validation,
        ValidationSummary,
        summarize,
        validate,
        validate_tuned,
    )

__all__ = [
    "DEFAULT_TIMEOUT",
    "ERROR_BOUND",
    "AlgorithmAccuracy",
    "BenchRequest",
    "LocalTimer",
    "Measurement",
    "MpiTimer",
    "OtherLoad",
    "Timer",
    "Validation",
    "ValidationSummary",
    "check_traceable",
    "format_table",
    "layout_for_size",
    "measure",
    "measure_any",
    "measure_in_place",
    "measure_mpi",
    "median_error_interval",
    "summarize",
    "timing_stats",
    "trace_in_place",
    "trace_mpi",
    "under_mpirun",
    "validate",
    "validate_tuned",
    "validation_warnings",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "commsim.bench._any": ("measure_any",),
        "commsim.bench._error_interval": ("median_error_interval",),
        "commsim.bench._honesty": ("ERROR_BOUND", "validation_warnings"),
        "commsim.bench._other_load": ("OtherLoad",),
        "commsim.bench._launch": ("DEFAULT_TIMEOUT", "measure_mpi"),
        "commsim.bench._local": ("measure",),
        "commsim.bench._loop": ("layout_for_size",),
        "commsim.bench._measurement": ("Measurement", "format_table", "timing_stats"),
        "commsim.bench._ranks": ("measure_in_place", "under_mpirun"),
        "commsim.bench._request": ("BenchRequest",),
        "commsim.bench._timer": ("LocalTimer", "MpiTimer", "Timer"),
        "commsim.bench._trace": ("check_traceable", "trace_in_place", "trace_mpi"),
        "commsim.bench._validate": (
            "AlgorithmAccuracy",
            "Validation",
            "ValidationSummary",
            "summarize",
            "validate",
            "validate_tuned",
        ),
    },
)
