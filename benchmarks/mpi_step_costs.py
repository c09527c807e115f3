"""What an allreduce step costs on this machine, part by part, in plain mpi4py (2 ranks).

docs/validation.md ("On a fresh, idle machine of another kind") traces `validate`'s errors to
costs that `commsim calibrate` times apart but an allreduce pays together. This script times,
per size ``b`` (each rank's half of a ring allreduce of ``2b``), the median of many back-to-back
iterations of:

* ``exchange``: ``Sendrecv`` of an untouched buffer (what the calibration's exchange curve times);
* ``forward``: ``Sendrecv`` of the buffer received in the iteration before;
* ``add``: ``numpy.add(a, b, out=a)`` alone;
* ``reduce then send``: ``Sendrecv`` into scratch, ``numpy.add`` into the half that the second
  ``Sendrecv`` then sends (a ring allreduce of ``2b`` on 2 ranks, step for step);
* ``sum of parts``: ``exchange + forward + add``, what a model built from the first three predicts
  for the line above;
* ``step``: ``Sendrecv`` of the whole buffer, then ``numpy.add`` of what arrived into it
  (recursive doubling's step, what ``commsim calibrate`` times as its ``step`` curve), beside
  ``forward + add``, its parts timed apart.

Every buffer starts on a page, as ``commsim calibrate`` and the mpi4py executor allocate
theirs; ``--align numpy`` puts them where numpy does (16-byte aligned), which changed the
step's time 2× on a 2-vCPU machine (``docs/validation.md``). Run it under MPI with two ranks
(rank 0 prints a markdown table)::

    mpirun -n 2 python benchmarks/mpi_step_costs.py
    mpirun -n 2 python benchmarks/mpi_step_costs.py --sizes 32KiB,512KiB,8MiB --align numpy
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

from commsim import units


def _median_time(fn, comm, iters: int) -> float:
    fn(3)
    times = []
    for _ in range(5):
        comm.Barrier()
        t = time.perf_counter()
        fn(iters)
        comm.Barrier()
        times.append((time.perf_counter() - t) / iters)
    return float(np.median(times))


def measure(comm, nbytes: int, zeros=None) -> dict[str, float]:
    """The times (seconds per iteration, the columns of the table) for halves of ``nbytes``
    bytes."""
    peer = 1 - comm.Get_rank()
    n = max(nbytes // 4, 1)
    if zeros is None:  # on a page, as calibrate and the mpi4py executor allocate
        from commsim.exec import aligned_zeros

        def zeros(n):
            return aligned_zeros(n, np.float32)

    mine, other, scratch = (zeros(n) for _ in range(3))
    out, back = zeros(n), zeros(n)

    def exchange(k):
        for _ in range(k):
            comm.Sendrecv(out, peer, 0, back, peer, 0)

    def forward(k):
        x, y = out, back
        for _ in range(k):
            comm.Sendrecv(x, peer, 0, y, peer, 0)
            x, y = y, x

    def add(k):
        for _ in range(k):
            np.add(mine, scratch, out=mine)

    def reduce_then_send(k):
        for _ in range(k):
            comm.Sendrecv(other, peer, 0, scratch, peer, 0)
            np.add(mine, scratch, out=mine)
            comm.Sendrecv(mine, peer, 1, other, peer, 1)

    def step(k):
        for _ in range(k):
            comm.Sendrecv(mine, peer, 2, scratch, peer, 2)
            np.add(mine, scratch, out=mine)

    iters = max(10, int(2e7 // max(nbytes, 1)))
    parts = [("exchange", exchange), ("forward", forward), ("add", add)]
    parts += [("reduce then send", reduce_then_send), ("step", step)]
    got = {name: _median_time(fn, comm, iters) for name, fn in parts}
    got["sum of parts"] = got["exchange"] + got["forward"] + got["add"]
    got["forward + add"] = got["forward"] + got["add"]
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="32KiB,256KiB,1MiB,8MiB,32MiB",
                    help="each rank's half, e.g. 32KiB,1MiB (default: %(default)s)")  # fmt: skip
    ap.add_argument("--align", choices=("page", "numpy"), default="page",
                    help="buffers on a page, as calibrate and the mpi4py executor allocate them, "
                    "or where numpy puts them (16-byte aligned; default: %(default)s)")  # fmt: skip
    args = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    if comm.Get_size() != 2:
        if comm.Get_rank() == 0:
            print("mpi_step_costs: run it on 2 ranks (mpirun -n 2 python ...)")
        return 2
    sizes = [units.parse_size(s) for s in args.sizes.split(",")]

    def numpy_zeros(n):
        return np.zeros(n, np.float32)

    zeros = numpy_zeros if args.align == "numpy" else None
    rows = [(b, measure(comm, int(b), zeros)) for b in sizes]
    if comm.Get_rank() == 0:
        cols = ["exchange", "forward", "add", "reduce then send", "sum of parts", "step",
                "forward + add"]  # fmt: skip
        print("| half | " + " | ".join(cols) + " |")
        print("|---|" + "---|" * len(cols))
        for b, got in rows:
            cells = " | ".join(units.format_time(got[c]) for c in cols)
            print(f"| {units.format_size(b)} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
