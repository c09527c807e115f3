r"""One-sided backend benchmark (issue #22): ring allreduce as puts with signals
(``--backend shmem``) beside the same schedule two-sided (``mpi4py``: ``Sendrecv`` on numpy;
``mpi``: mpi4jax in ``jax.jit``) and the MPI library's ``MPI_Allreduce``.

Each executor is timed by :func:`commsim.bench.measure_mpi` under ``mpirun -n P``, nccl-tests
style: a barrier before each run, the slowest rank's time per run, the median of ``--iters``
runs after ``--warmup``, the library's ``MPI_Allreduce`` timed in the same ``mpirun``
(``shmem`` and ``mpi4py``: through mpi4py on numpy; ``mpi``: through mpi4jax). The executors
take turns for ``--rounds`` rounds, so that a change of the machine's load touches all of them;
the summary is the median over rounds of each one's median. ``algbw = S / t``, ``busbw = algbw
· 2(p-1)/p``. On one machine MPI moves data through shared memory: the numbers measure memory
bandwidth and process scheduling, and the ratios are the meaningful output.

Usage::

    python benchmarks/bench_shmem.py                       # 2 ranks, 64MiB, 3 rounds
    python benchmarks/bench_shmem.py --sizes 1MiB,64MiB --iters 20 --json out.json
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys

from _summary import bench_request  # benchmarks/ is on sys.path when run as a script


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", "-p", type=int, default=2)
    ap.add_argument("--sizes", default="64MiB", help="allreduce sizes (nccl-tests nbytes)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backends", default="shmem,mpi4py,mpi")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per mpirun")
    ap.add_argument("--no-check", action="store_true", help="skip the reference check")
    ap.add_argument("--json", metavar="FILE", help="also write the measurements as JSON")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import json

    import commsim
    from commsim.bench import measure_mpi
    from commsim.units import format_bandwidth, format_time, parse_sizes

    sizes = parse_sizes(args.sizes)
    backends = args.backends.split(",")
    ring = commsim.build("allreduce", "ring", nranks=args.ranks)
    print(
        f"# allreduce/ring on {args.ranks} ranks, {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), {args.dtype}, median of "
        f"{args.iters} runs after {args.warmup} warm-up, {args.rounds} rounds; "
        f"load average {os.getloadavg()[0]:.1f} at the start"
    )
    request = bench_request(args, sizes)
    out = []
    for k in range(args.rounds):
        for be in backends:
            for m in measure_mpi([ring], request, timeout=args.timeout, backend=be):
                out.append({**m.to_dict(), "round": k})
                print(
                    f"round {k} {be:>6} {m.nbytes:>10} B: {format_time(m.time_s):>8} "
                    f"({m.check}); {m.native}: {format_time(m.native_time_s):>8}",
                    flush=True,
                )
    print(f"\n# median over rounds (load average {os.getloadavg()[0]:.1f} at the end)")
    print(f"{'executor':>24} {'size':>10} {'time':>9} {'busbw':>10} {'vs MPI_Allreduce':>17}")
    factor = 2 * (args.ranks - 1) / args.ranks
    for size in sorted({m["nbytes"] for m in out}):
        rows = [m for m in out if m["nbytes"] == size]
        for be in backends:
            t = statistics.median(m["time_s"] for m in rows if m["backend"] == be)
            nat = statistics.median(m["native_time_s"] for m in rows if m["backend"] == be)
            print(
                f"{be:>24} {size:>10} {format_time(t):>9} "
                f"{format_bandwidth(size / t * factor):>10} {nat / t:>16.2f}x"
            )
        for be, name in (("shmem", "MPI_Allreduce (mpi4py)"), ("mpi", "MPI_Allreduce (mpi4jax)")):
            if be in backends:
                nat = statistics.median(m["native_time_s"] for m in rows if m["backend"] == be)
                print(
                    f"{name:>24} {size:>10} {format_time(nat):>9} "
                    f"{format_bandwidth(size / nat * factor):>10} {1.0:>16.2f}x"
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if all(m["check"] != "FAILED" for m in out) else 1


if __name__ == "__main__":
    sys.exit(main())
