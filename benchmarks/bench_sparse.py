r"""Sparse allreduce on real index/value vectors against dense ring and ``MPI_Allreduce``.

Target (issue #22): at density 1 % on 4 MPI ranks and 64 MiB (float32), sparse allreduce's
predicted and measured times are both below dense ring's; at 50 % the dynamic algorithm sends
dense.

Run under ``mpirun`` (every rank runs this script)::

    mpirun -n 4 python benchmarks/bench_sparse.py                  # 64MiB, 1 % and 50 %
    mpirun -n 4 python benchmarks/bench_sparse.py --densities 0.001,0.01,0.1,0.5 --iters 10

Dense ring is the registry's ring schedule on :class:`commsim.exec.mpi.HostMpiBackend`
(mpi4py on numpy buffers; its baseline is ``MPI_Allreduce`` called the same way), timed by
:func:`commsim.bench.measure_in_place`: a barrier before each run, the slowest rank's time, the
median of ``--iters``. Sparse allreduce (:func:`commsim.sparse.sparse_allreduce`) is timed the same way here:
a barrier, ``MPI.Wtime`` around the call, the slowest rank's time (``MPI_MAX``), the median. Its
input is each rank's random vector of the given density (uniform), float32 values and int32
indices; its output is the sum on every rank (sparse where every block stayed sparse: the
dense vector is not assembled in the timed call), checked once against ``MPI_Allreduce``.
Predictions use commsim's default Hockney model (a 200 Gb/s InfiniBand cluster), not this
machine: their comparison with ring, not their absolute values, is what carries over.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

import numpy as np


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="64MiB")
    ap.add_argument("--densities", default="0.01,0.5")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    return ap.parse_args(argv)


def _timed(comm, fn, iters: int, warmup: int) -> tuple[float, float]:
    """Median over runs of the slowest rank's wall time, and of the largest CPU time (this
    process's user + system) of a rank: on a machine with more busy processes than cores, wall
    time is mostly waiting for a core, and CPU time says what the call itself costs."""
    import time

    from mpi4py import MPI

    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(iters):
        comm.Barrier()
        t0, c0 = MPI.Wtime(), time.process_time()
        fn()
        wall.append(comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX))
        cpu.append(comm.allreduce(time.process_time() - c0, op=MPI.MAX))
    return float(np.median(wall)), float(np.median(cpu))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from mpi4py import MPI

    import commsim
    from commsim.bench import BenchRequest, measure_in_place
    from commsim.exec import get_backend, layout
    from commsim.models import Hockney
    from commsim.sparse import Density, SparseRun, sparse_allreduce, sparse_allreduce_cost
    from commsim.units import format_time, parse_size

    comm = MPI.COMM_WORLD
    p, rank = comm.Get_size(), comm.Get_rank()
    nbytes = parse_size(args.size)
    nelems = nbytes // 4
    ring = commsim.build("allreduce", "ring", nranks=p)
    request = BenchRequest((nbytes,), iters=args.iters, warmup=args.warmup)
    _, [m] = measure_in_place([ring], request, backend="mpi4py")
    host = get_backend("mpi4py")
    lay = layout(ring, nelems)
    program = host.compile(ring, lay, np.float32)
    buf = program.put(np.ones((p, lay.nelems), dtype=np.float32))
    ring_wall, ring_cpu = _timed(comm, lambda: program.run(buf), args.iters, args.warmup)
    model = Hockney()
    ring_pred = float(model.predict(ring, nbytes).time)
    lines = [
        f"# {p} ranks, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
        f"{args.size} float32, median of {args.iters} after {args.warmup} warm-up; predicted "
        f"with {model.describe()}",
        f"dense ring (mpi4py executor): measured {format_time(m.time_s)} (bench loop; "
        f"{format_time(ring_wall)} wall, {format_time(ring_cpu)} CPU here), predicted "
        f"{format_time(ring_pred)}; MPI_Allreduce {format_time(m.native_time_s)}; check {m.check}",
    ]
    ok = m.check != "FAILED"
    for text in args.densities.split(","):
        dens = Density(float(text))
        rng = np.random.default_rng(1000 + rank)
        idx = dens.sample(nelems, rng)
        val = rng.integers(-8, 9, size=idx.size).astype(np.float32)
        dense = np.zeros(nelems, dtype=np.float32)
        dense[idx] = val
        want = np.empty_like(dense)
        comm.Allreduce(dense, want)
        for dynamic in (False, True):
            run = SparseRun()
            got = sparse_allreduce(comm, idx, val, nelems, dynamic=dynamic, run=run)
            good = comm.allreduce(bool(np.array_equal(got.dense(), want)), op=MPI.LAND)
            ok &= good
            call = functools.partial(sparse_allreduce, comm, idx, val, nelems, dynamic=dynamic)
            t, cpu = _timed(comm, call, args.iters, args.warmup)
            algorithm = "dynamic" if dynamic else "static"
            pred = sparse_allreduce_cost(p, nbytes, dens, model.alpha, model.beta, model.gamma,
                                         algorithm=algorithm)  # fmt: skip
            sends = "/".join("dense" if run.dense[k] else "sparse" for k in ("split", "allgather"))
            lines.append(
                f"sparse {algorithm:>7} d={dens.density:g}: measured {format_time(t)} wall "
                f"({t / ring_wall:.2f}x ring), {format_time(cpu)} CPU ({cpu / ring_cpu:.2f}x "
                f"ring), predicted {format_time(pred.time)} "
                f"({pred.time / ring_pred:.2f}x ring); sends {sends}; check "
                f"{'ok' if good else 'FAILED'}"
            )
    if rank == 0:
        print("\n".join(lines), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
