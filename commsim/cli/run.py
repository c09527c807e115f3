"""``commsim run``: execute one algorithm for real on a backend and time it like nccl-tests.

Single-process backends (``numpy``, ``jax``, ``cuda``) are timed here by
:func:`commsim.bench.measure`; ``--backend mpi`` starts ``mpirun`` itself
(:func:`commsim.bench.measure_mpi`) or, when the command already runs under the user's
``mpirun``, measures in place on every rank (:func:`commsim.bench.measure_in_place`) and prints
on rank 0. Either way the arguments are parsed once, here; the schedule travels to the ranks as
a saved file, never as arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from commsim._ir import Schedule
from commsim._wire import wire as as_wire
from commsim.bench import (
    DEFAULT_TIMEOUT,
    BenchRequest,
    Measurement,
    check_traceable,
    format_table,
    layout_for_size,
    measure_any,
    measure_in_place,
    trace_in_place,
    trace_mpi,
    under_mpirun,
)
from commsim.cli.arguments import DEFAULT_RUN_SIZES, parse_sizes
from commsim.cli.errors import EXIT_FAILED, EXIT_OK, UsageError
from commsim.cli.execution import ExecutionGroup
from commsim.cli.memory import MemoryBudget
from commsim.cli.output import add_output_group, to_json
from commsim.cli.schedules import ScheduleChoice, ScheduleFile, ScheduleGroup
from commsim.cli.traces import add_trace_argument, parse_trace, write_trace
from commsim.cli.wire import (
    add_wire_argument,
    check_backend,
    check_collective,
    check_dtype,
    parse_wire,
)
from commsim.errors import CommsimError
from commsim.exec import backend_info

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "RunRequest",
    "RunResult",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "run an algorithm for real on a backend and time it against the native collective"
DESCRIPTION = """\
Execute one schedule for real and time it like nccl-tests: for each size, warm-up runs, then
--iters timed runs (median, min, max, spread), algbw = size/time and busbw = algbw x nccl-tests'
factor (decimal GB/s), next to the backend's own collective timed in the same run (jax:
lax.psum/psum_scatter/all_gather/all_to_all; mpi: MPI_Allreduce etc.) and the ratio
busbw/native busbw. Each size's output is checked against the reference interpreter unless
--no-check; exit status 1 if a check fails. Sizes are rounded down to what the schedule's slots
divide evenly (the bytes that ran are shown). Backends: numpy (the reference interpreter), jax
(one device per rank; on CPU the device count is set from -p unless XLA_FLAGS sets it), cuda
(p simulated ranks on one GPU), mpi (one process per rank under mpirun, mpi4jax inside
jax.jit), mpi4py (the same rank programs by mpi4py on numpy buffers: no JAX between the
schedule and MPI; its baseline is the library called the same way), shmem (one process per
rank, every transfer a put with a signal into MPI-3 RMA windows, one-sided as NVSHMEM; its
baseline is the two-sided library collective through mpi4py). With --backend mpi,
--trace FILE.json also writes a Chrome trace of the largest size from one more run, timed
step by step on every rank (a track per rank, a slice per step, an arrow per message); that
run is not one of the timed runs: reading the clock between steps slows it down."""
EXAMPLES = """\
  commsim run -c allreduce -a ring -p 8 --backend jax --sizes 1MiB..64MiB
  commsim run -c allreduce -a rabenseifner -p 4 --backend numpy -s 1KiB..1MiB --iters 5
  commsim run -c broadcast -a binomial -p 6 --root 3 --backend jax --dtype int32 --json
  commsim run -c broadcast -a chain -p 4 --param segments=16 --backend jax -s 4MiB
  commsim run -c allreduce -a ring -p 2 --backend mpi -s 64MiB
  commsim run -c allreduce -a ring -p 2 --backend mpi -s 1MiB --trace ring.json
  commsim run --file my_schedule.json --backend mpi -s 1MiB   # a saved (or hand-made) schedule
  commsim run -c allreduce -a ring -p 8 --backend jax -s 16MiB --wire int8"""

SCHEDULES = ScheduleGroup("run", file=True)
EXECUTION = ExecutionGroup(
    backend="jax", iters=20, warmup=5, optional_checks=True, sizes=DEFAULT_RUN_SIZES
)


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """Time the one schedule of ``schedules`` on ``backend`` as ``bench`` says."""

    schedules: ScheduleChoice | ScheduleFile
    backend: str
    bench: BenchRequest
    timeout: float = DEFAULT_TIMEOUT
    as_json: bool = False
    progress: bool | None = None
    trace: Path | None = None


@dataclasses.dataclass(frozen=True)
class RunResult:
    """The measurements (one per size); ``rank`` is this process's under the user's mpirun."""

    schedule: Schedule
    backend: str
    bench: BenchRequest
    measurements: tuple[Measurement, ...]
    rank: int = 0
    notes: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return any(m.check == "FAILED" for m in self.measurements)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SCHEDULES.add(parser)
    EXECUTION.add(parser)
    add_wire_argument(parser)
    output = add_output_group(parser)
    add_trace_argument(
        output,
        "with --backend mpi: after the timed runs, one step-timed run of the largest size "
        "written as a Chrome trace (open it in https://ui.perfetto.dev)",
    )


def parse(args: argparse.Namespace) -> RunRequest:
    schedules = SCHEDULES.parse(args)
    bench = EXECUTION.parse(args, parse_sizes(args.sizes))
    wire = parse_wire(args)
    if wire is not None:
        check_backend(wire, args.backend)
        check_dtype(wire, bench.dtype)
        if isinstance(schedules, ScheduleChoice):
            check_collective(wire, schedules.collective)
        bench = dataclasses.replace(bench, wire=wire.name)
    trace = parse_trace(args)
    if trace is not None and wire is not None:
        raise UsageError("--trace times exact messages step by step; drop --wire or --trace")
    if trace is not None:
        try:
            check_traceable(args.backend)
        except CommsimError as e:
            raise UsageError(str(e)) from None
    return RunRequest(
        schedules, args.backend, bench, float(args.timeout), args.json, args.progress, trace
    )


def compute(request: RunRequest) -> RunResult:
    [schedule] = request.schedules.build_all(MemoryBudget.parse(None))
    rank, bench, progress = 0, request.bench, request.progress
    for size in bench.sizes:  # every size's buffers fit, checked before a backend starts
        layout_for_size(schedule, size, bench.dtype)
    if bench.wire is not None:  # a --file schedule's collective is known now
        check_collective(as_wire(bench.wire), schedule.collective)
    if backend_info(request.backend).multiprocess and under_mpirun():
        rank, ms = measure_in_place([schedule], bench, backend=request.backend)
    else:
        ms = measure_any(
            [schedule], request.backend, bench, timeout=request.timeout, progress=progress
        )
    notes: tuple[str, ...] = ()
    if request.trace is not None:
        if under_mpirun():
            rank, doc = trace_in_place(schedule, bench, backend=request.backend)
        else:
            doc = trace_mpi(
                schedule, bench, timeout=request.timeout, progress=progress, backend=request.backend
            )
        if doc is not None:  # rank 0
            what = f" from {doc['otherData']['note']}"
            notes = (write_trace(request.trace, doc, doc["otherData"]["nbytes"], what),)
    return RunResult(schedule, request.backend, bench, tuple(ms), rank, notes)


def render(result: RunResult, as_json: bool) -> str:
    s, bench = result.schedule, result.bench
    if as_json:
        return to_json(
            {
                "collective": s.collective,
                "algorithm": s.algorithm,
                "params": {k: v for k, v in s.params.items() if k != "root"},  # root: own key
                "root": s.root,
                "nranks": s.nranks,
                "backend": result.backend,
                "dtype": str(bench.dtype),
                "wire": bench.wire,
                "measurements": [m.to_dict() for m in result.measurements],
                "notes": list(result.notes),
            }
        )
    native = result.measurements[0].native if result.measurements else None
    root = f" root={s.root}" if s.spec.rooted else ""
    median = (
        "median over {} runs (slowest rank per run)"
        if backend_info(result.backend).multiprocess
        else "median of {} runs"
    )
    return (
        f"# {s.collective}/{s.algorithm} p={s.nranks}{root} on {result.backend}, {bench.dtype}"
        + (f" over wire {bench.wire}" if bench.wire else "")
        + ", "
        + median.format(bench.iters)
        + f" after {bench.warmup} warm-up"
        + (f"; baseline {native}" if native else "")
        + "\n"
        + format_table(list(result.measurements))
        + "".join(f"\nnote: {n}" for n in result.notes)
    )


def main(args: argparse.Namespace) -> int:
    request = parse(args)
    result = compute(request)
    if result.rank == 0:
        print(render(result, request.as_json))
    return EXIT_FAILED if result.failed else EXIT_OK
