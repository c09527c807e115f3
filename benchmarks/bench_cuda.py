r"""CUDA backend benchmark: ring and Rabenseifner allreduce of p simulated ranks on one GPU.

Target (issue: real execution): on a lent GPU the ring allreduce over 8 simulated ranks of
256 MiB float32 reaches >= 50% of the bandwidth bound given by the device-to-device copy rate
measured in the same run.

**The bound.** All ``p`` ranks share one GPU's memory, so time is memory traffic. A copy at rate
``C`` (bytes copied per second, ``cuMemcpyDtoD``) reads and writes each byte once: the memory
system sustains ``2C`` bytes/s of traffic. A schedule's transfers need, per moved element, one
read of the source and one write of the destination, plus one read of the destination when it
reduces (``Plan.traffic_elems``). For the ring allreduce of ``S`` bytes per rank this is
``(p-1)·S·3`` (reduce-scatter: p blocks of S/p per step) ``+ (p-1)·S·2`` (allgather), so

.. math::

    t_{bound} = \frac{5 (p-1) S}{2 C}, \qquad
    busbw_{bound} = \frac{2(p-1)}{p} \frac{S}{t_{bound}} = \frac{4 C}{5 p}

and the ratio reported is ``t_bound / t = busbw / busbw_bound`` (target >= 0.5). The same rule
gives each schedule's bound (Rabenseifner's traffic is the ring's; staging, where a step needs
it, is overhead and not in the bound). The native baseline (one launch summing the p rows and
writing the sum back, ``CudaBackend.native``) needs ``2 p S`` bytes of traffic.

busbw follows nccl-tests: ``algbw = S / t``, ``busbw = algbw · 2(p-1)/p`` for allreduce.

Usage::

    python benchmarks/bench_cuda.py --out cuda.json            # on a GPU: 8 ranks x 256 MiB
    python benchmarks/bench_cuda.py --smoke --out smoke.json   # anywhere: tiny, on the simulator
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import statistics
import sys
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", "-p", type=int, default=8)
    ap.add_argument("--size", default="256MiB", help="bytes per rank (the allreduce's vector)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--algorithms", default="ring,rabenseifner")
    ap.add_argument("--device", type=int, default=None)
    ap.add_argument("--no-check", action="store_true", help="skip the reference check")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (runs on the simulator)")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args(argv)
    if args.smoke:
        args.size, args.iters, args.warmup = f"{args.ranks * 16 * 4}B", 2, 1
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    no_gpu = not glob.glob("/dev/nvidia[0-9]*")
    if args.smoke and no_gpu and "NUMBA_ENABLE_CUDASIM" not in os.environ:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba is imported

    import numba
    import numpy as np

    import commsim
    from commsim.exec import check_outputs, layout
    from commsim.exec.cuda import CudaBackend
    from commsim.units import format_bandwidth, format_size, format_time, parse_size

    be = CudaBackend(device=args.device)
    why = be.unavailable()
    if why:
        sys.exit(f"bench_cuda: {why}")
    dtype = np.dtype(args.dtype)
    p, nbytes = args.ranks, parse_size(args.size)
    sim = be.simulated

    copy_rate = be.copy_bandwidth(nbytes, iters=args.iters)
    kernel_rate = be.copy_bandwidth(nbytes, iters=args.iters, kernel=True)
    bus = 2 * (p - 1) / p

    rows = []
    schedules = [(name, commsim.build("allreduce", name, nranks=p)) for name in
                 args.algorithms.split(",") if name]  # fmt: skip
    schedules.append(("native", schedules[0][1] if schedules else
                      commsim.build("allreduce", "ring", nranks=p)))  # fmt: skip
    rng = np.random.default_rng(0)
    for name, s in schedules:
        lay = layout(s, nbytes // dtype.itemsize)
        size = lay.count * dtype.itemsize
        x = rng.integers(-8, 9, size=lay.input_shape(), dtype=np.int8).astype(dtype)
        t0 = time.perf_counter()
        if name == "native":
            comp = be.native(s, lay, dtype)
            traffic, launches, staged = 2 * p * lay.count * dtype.itemsize, 1, []
        else:
            comp = be.compile(s, lay, dtype)
            plan = be.plan(s, lay)
            traffic = plan.traffic_elems * dtype.itemsize
            launches, staged = plan.nlaunches, plan.staged_steps
        compile_s = time.perf_counter() - t0
        buf = comp.put(lay.pack(x))
        if not args.no_check:  # the first run, on fresh data, against the reference interpreter
            check_outputs(s, lay, x, lay.unpack(comp.get(comp.run(buf))))
        del x
        times = be.time_calls(lambda comp=comp, buf=buf: comp.run(buf), args.iters, args.warmup)
        del buf
        t = statistics.median(times)
        t_bound = traffic / (2 * copy_rate)
        rows.append(
            {
                "algorithm": name,
                "nbytes": size,
                "median_s": t,
                "min_s": min(times),
                "max_s": max(times),
                "algbw": size / t,
                "busbw": bus * size / t,
                "traffic_bytes": traffic,
                "bound_s": t_bound,
                "busbw_bound": bus * size / t_bound,
                "ratio_to_bound": t_bound / t,
                "launches": launches,
                "staged_steps": staged,
                "compile_s": compile_s,
                "checked": not args.no_check,
            }
        )
    native = rows[-1]
    for r in rows:
        r["ratio_to_native"] = r["busbw"] / native["busbw"]

    if sim:
        dev = "numba CUDA simulator"
    else:
        from numba import cuda

        name = cuda.get_current_device().name
        dev = name.decode() if isinstance(name, bytes) else str(name)
    result = {
        "benchmark": "bench_cuda",
        "device": dev,
        "simulated": sim,
        "numba": numba.__version__,
        "python": platform.python_version(),
        "ranks": p,
        "dtype": dtype.name,
        "iters": args.iters,
        "warmup": args.warmup,
        "copy_rate": copy_rate,
        "copy_rate_kernel": kernel_rate,
        "bound": "t_bound = traffic / (2 * copy_rate); traffic = sum over transfers of "
        "len * (2 + reduce) * itemsize (ring allreduce: 5 (p-1) S)",
        "target": "ring ratio_to_bound >= 0.5",
        "results": rows,
    }

    print(f"device: {dev}{' (timings meaningless)' if sim else ''}; numba {numba.__version__}")
    print(
        f"copy rate (cuMemcpyDtoD, {format_size(nbytes)}): {format_bandwidth(copy_rate)}; "
        f"copy kernel: {format_bandwidth(kernel_rate)}"
    )
    print(f"allreduce, p = {p}, {format_size(rows[0]['nbytes'])} per rank, {dtype.name}")
    head = ("algorithm", "time", "spread", "algbw", "busbw", "bound busbw", "/bound", "/native")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = (
            r["algorithm"],
            format_time(r["median_s"]),
            f"{format_time(r['min_s'])}..{format_time(r['max_s'])}",
            format_bandwidth(r["algbw"]),
            format_bandwidth(r["busbw"]),
            format_bandwidth(r["busbw_bound"]),
            f"{r['ratio_to_bound']:.2f}",
            f"{r['ratio_to_native']:.2f}",
        )
        print("| " + " | ".join(cells) + " |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
