r"""MPI backend benchmark: ring and Rabenseifner allreduce against ``MPI_Allreduce``.

Target (issue: real execution): on 2 MPI ranks at 64 MiB float32, ring and Rabenseifner reach
>= 0.8x the busbw of ``MPI_Allreduce`` (``mpi4jax.allreduce``) timed in the same run.

Each schedule is lowered by :class:`commsim.exec.mpi.MpiBackend` (one jitted program per rank,
one ``sendrecv`` per round) and timed by the MPI worker under ``mpirun -n P`` started by
:func:`commsim.bench.measure_mpi`: a barrier before each run, the slowest rank's time per run,
the median of ``--iters`` runs, the library's ``MPI_Allreduce`` interleaved with them. busbw
follows nccl-tests: ``algbw = S / t``, ``busbw = algbw · 2(p-1)/p``; ``ratio = busbw /
busbw(MPI_Allreduce) = t_MPI / t``.

On one machine MPI moves data through shared memory, so absolute numbers measure memory
bandwidth and process scheduling; the ratio is the meaningful output. On a shared machine (more
busy processes than cores) both sides are noisy: use more ``--iters``.

Usage::

    python benchmarks/bench_mpi.py                        # 2 ranks, 1MiB..64MiB
    python benchmarks/bench_mpi.py --sizes 64MiB --iters 20 --json out.json
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

from _summary import bench_request, finish  # benchmarks/ is on sys.path when run as a script


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", "-p", type=int, default=2)
    ap.add_argument(
        "--sizes", default="1MiB,8MiB,64MiB", help="allreduce sizes (nccl-tests nbytes)"
    )
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--algorithms", default="ring,rabenseifner")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds for the whole mpirun")
    ap.add_argument("--no-check", action="store_true", help="skip the reference check")
    ap.add_argument("--json", metavar="FILE", help="also write the measurements as JSON")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import commsim
    from commsim.bench import format_table, measure_mpi
    from commsim.exec import layout
    from commsim.exec.mpi import plan
    from commsim.units import parse_sizes

    sizes = parse_sizes(args.sizes)
    names = args.algorithms.split(",")
    print(
        f"# MPI backend on {args.ranks} ranks, {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), {args.dtype}, "
        f"median of {args.iters} runs after {args.warmup} warm-up"
    )
    schedules = [commsim.build("allreduce", name, nranks=args.ranks) for name in names]
    for s in schedules:
        [pl] = plan(s, layout(s, max(sizes) // 4), ranks=[0])
        print(f"## allreduce/{s.algorithm}, rank 0's program: {pl.summary()}")
    request = bench_request(args, sizes)
    ms = measure_mpi(schedules, request, timeout=args.timeout)
    for name in names:
        print(f"\n## allreduce/{name} vs MPI_Allreduce")
        print(format_table([m for m in ms if m.algorithm == name]), flush=True)
    out = [m.to_dict() for m in ms]
    return finish(out, "MPI_Allreduce", ">= 0.8", args.json)


if __name__ == "__main__":
    sys.exit(main())
