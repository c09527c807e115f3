"""``commsim run``: execute one algorithm for real on a backend and time it like nccl-tests.

The arguments are parsed here, once, into a schedule and a :class:`commsim.bench.BenchRequest`;
single-process backends (``numpy``, ``jax``, ``cuda``) are timed by :func:`commsim.bench.measure`,
``--backend mpi`` by :func:`commsim.bench.measure_mpi`, which starts ``mpirun`` itself (or, when
already under ``mpirun``, :func:`commsim.bench.measure_in_place` on every rank; rank 0 prints).

The command line is hooked into :mod:`commsim.cli` through :func:`add_parser` (or
:func:`add_arguments` plus :func:`main`). Schedule options (``-c -a -p --param --root``) are the
other commands' own, parsed by their helpers, so ``--param`` values coerce the same way everywhere.

Exit status: 0 when every run matched the reference interpreter (or ``--no-check``), 1 when one
did not (a result, reported in the table and the JSON); bad input raises
:class:`commsim.CommsimError`, which :func:`commsim.cli.main` prints as one line (status 2).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

import numpy as np

from commsim import spec
from commsim.errors import CommsimError
from commsim.units import parse_int_list, parse_sizes

__all__ = [
    "DEFAULT_SIZES",
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "add_arguments",
    "add_parser",
    "main",
]

DEFAULT_SIZES = "1KiB..64MiB"
BACKEND_CHOICES = ("numpy", "jax", "mpi", "cuda")
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
(p simulated ranks on one GPU), mpi (one process per rank under mpirun)."""
EXAMPLES = """\
  commsim run -c allreduce -a ring -p 8 --backend jax --sizes 1MiB..64MiB
  commsim run -c allreduce -a rabenseifner -p 4 --backend numpy -s 1KiB..1MiB --iters 5
  commsim run -c broadcast -a binomial -p 6 --root 3 --backend jax --dtype int32 --json
  commsim run -c broadcast -a chain -p 4 --param segments=16 --backend jax -s 4MiB
  commsim run -c allreduce -a ring -p 2 --backend mpi -s 64MiB"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``run`` options: schedule (shared with the other commands), backend, timing, output."""
    from commsim import _cli_common

    _cli_common._add_schedule_args(p, many_algorithms=False, many_p=False, file=False)
    g = p.add_argument_group("execution and timing")
    g.add_argument(
        "--backend",
        choices=BACKEND_CHOICES,
        default="jax",
        help="where to run (default: jax)",
    )
    g.add_argument(
        "-s",
        "--sizes",
        default=DEFAULT_SIZES,
        metavar="SIZES",
        help=f"message sizes (nccl-tests nbytes), lists and ranges (default: {DEFAULT_SIZES})",
    )
    g.add_argument("--dtype", default="float32", help="element type (default: float32)")
    g.add_argument(
        "--iters",
        type=_cli_common._int_arg("iters", 1),
        default=20,
        help="timed runs (default: 20)",
    )
    g.add_argument(
        "--warmup",
        type=_cli_common._int_arg("warmup", 0),
        default=5,
        help="untimed runs first (default: 5)",
    )
    g.add_argument(
        "--no-check",
        action="store_true",
        help="skip comparing each size's output with the reference interpreter",
    )
    g.add_argument(
        "--no-baseline", action="store_true", help="do not time the backend's native collective"
    )
    g.add_argument(
        "--timeout",
        type=_cli_common._int_arg("timeout", 1),
        default=300,
        metavar="SECONDS",
        help="--backend mpi: end mpirun with an error after this long, e.g. on a deadlock or a "
        "hung rank (default: 300)",
    )
    out = p.add_argument_group("output")
    out.add_argument(
        "--json", action="store_true", help="print one JSON document instead of a table"
    )
    out.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: on a terminal)",
    )


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``run`` to an ``add_subparsers()`` object; ``args._run`` is :func:`main`."""
    sp = subparsers.add_parser(
        "run",
        help=HELP,
        description=DESCRIPTION,
        epilog="examples:\n" + EXAMPLES + "\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(sp)
    sp.set_defaults(_run=main)
    return sp


# ---------------------------------------------------------------------------------------------


def _nranks(text: str | None) -> int:
    if text is None:
        raise CommsimError("give the rank count with -p (e.g. -p 8)")
    ps = parse_int_list(text)
    if len(ps) != 1:
        raise CommsimError(f"run takes one rank count, got {len(ps)} ({text})")
    return ps[0]


def _dtype(text: str) -> np.dtype:
    try:
        dt = np.dtype(text)
    except TypeError:
        raise CommsimError(f"unknown dtype {text!r}; e.g. float32, float64, int32") from None
    if dt.kind not in "iufc":
        raise CommsimError(f"dtype must be numeric, got {text!r}")
    return dt


def _ensure_cpu_devices(p: int) -> None:
    """Ask XLA for ``p`` host devices if JAX has not started and the user did not say."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "jax" not in sys.modules and "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={p}".strip()


def _finite(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _run_mpi(args: argparse.Namespace, collective: str, algorithm: str) -> int:
    """``--backend mpi``: one schedule per ``-p``, timed by ``commsim.bench`` on MPI processes."""
    from commsim import _cli_common, bench
    from commsim.algorithms import build

    if args.nranks is None:
        raise CommsimError("give the rank count with -p (e.g. -p 4)")
    ps = parse_int_list(args.nranks)
    sizes = parse_sizes(args.sizes)
    raw = _cli_common._raw_params(args.param)
    _cli_common._check_params_known(collective, [algorithm], raw)
    params = _cli_common._params_for(collective, algorithm, raw)
    root = int(args.root or 0)
    kw = {"root": root} if spec(collective).rooted else {}
    request = bench.BenchRequest(
        sizes=tuple(sizes),
        dtype=args.dtype,
        iters=args.iters,
        warmup=args.warmup,
        check=not args.no_check,
        baseline=not args.no_baseline,
    )
    schedules = [build(collective, algorithm, p, **params, **kw) for p in ps]
    if bench.under_mpirun():  # the user started us: every rank runs in place, rank 0 prints
        rank, results = bench.measure_in_place(schedules, request)
    else:
        timeout = float(args.timeout or bench.DEFAULT_TIMEOUT)
        rank, results = 0, []
        for s in schedules:
            results += bench.measure_mpi([s], request, timeout=timeout, progress=args.progress)
    if rank == 0:
        _print_mpi(results, params, root, request, as_json=args.json)
    return 1 if any(m.check == "FAILED" for m in results) else 0


def _print_mpi(
    results: list[Any], params: dict[str, Any], root: int, request: Any, *, as_json: bool
) -> None:
    from commsim.bench import format_table

    ps = list(dict.fromkeys(m.nranks for m in results))
    if as_json:
        doc = {
            "collective": results[0].collective,
            "algorithm": results[0].algorithm,
            "params": params,
            "root": root,
            "nranks": ps[0] if len(ps) == 1 else ps,
            "backend": "mpi",
            "dtype": request.dtype,
            "measurements": [{k: _finite(v) for k, v in m.to_dict().items()} for m in results],
        }
        print(json.dumps(doc, indent=2, allow_nan=False))
        return
    for p in ps:
        rows = [m for m in results if m.nranks == p]
        native = rows[0].native
        at = f" root={root}" if spec(rows[0].collective).rooted else ""
        print(
            f"# {rows[0].collective}/{rows[0].algorithm} p={p}{at} on mpi, {request.dtype}, "
            f"median over {request.iters} runs (slowest rank per run) after "
            f"{request.warmup} warm-up" + (f"; baseline {native}" if native else "")
        )
        print(format_table(rows))


def main(args: argparse.Namespace) -> int:
    """Run ``commsim run`` with parsed ``args``; the exit status (0 ok, 1 a check failed)."""
    from commsim import _cli_common
    from commsim.algorithms import build
    from commsim.bench import BenchRequest, format_table, measure
    from commsim.exec import get_backend

    collective = _cli_common._collective(args)
    algorithms = _cli_common._algorithms(args, collective, default_all=False)
    if len(algorithms) != 1:
        raise CommsimError(
            f"run takes one algorithm (-a NAME), got {len(algorithms)}: {', '.join(algorithms)}; "
            "run them one after another, or use 'commsim compare' for predictions"
        )
    [algorithm] = algorithms
    if args.backend == "mpi":
        return _run_mpi(args, collective, algorithm)
    p = _nranks(args.nranks)
    raw = _cli_common._raw_params(args.param)
    _cli_common._check_params_known(collective, [algorithm], raw)
    params = _cli_common._params_for(collective, algorithm, raw)
    if args.root is not None:
        params["root"] = args.root
    sizes = parse_sizes(args.sizes)
    dt = _dtype(args.dtype)
    schedule = build(collective, algorithm, p, **params)
    if args.backend == "jax":
        _ensure_cpu_devices(p)
    backend = get_backend(args.backend)
    request = BenchRequest(
        sizes=tuple(sizes),
        dtype=str(dt),
        iters=args.iters,
        warmup=args.warmup,
        check=not args.no_check,
        baseline=not args.no_baseline,
    )
    results = measure(schedule, backend, request, progress=args.progress)
    if args.json:
        doc = {
            "collective": collective,
            "algorithm": algorithm,
            "params": schedule.params,
            "root": schedule.root,
            "nranks": p,
            "backend": args.backend,
            "dtype": str(dt),
            "measurements": [{k: _finite(v) for k, v in m.to_dict().items()} for m in results],
        }
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        native = results[0].native if results else None
        root = f" root={schedule.root}" if schedule.spec.rooted else ""
        print(
            f"# {collective}/{algorithm} p={p}{root} on {args.backend}, {dt}, "
            f"median of {args.iters} runs after {args.warmup} warm-up"
            + (f"; baseline {native}" if native else "")
        )
        print(format_table(results))
    return 1 if any(m.check == "FAILED" for m in results) else 0
