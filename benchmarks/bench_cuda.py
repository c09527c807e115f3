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

and the ratio reported is ``t_bound / t = busbw / busbw_bound`` (target >= 0.5). A copy does not
reach the memory's peak (numba's copy pays a host cost per call; reads and writes turn the bus
around), so ``/peak`` puts the same traffic against the datasheet's peak memory bandwidth
(``PEAK_MEMORY_BANDWIDTH``, or ``--peak``): the ceiling no schedule can pass. On an H200 the ring
moved more traffic per second than a 256 MiB ``cuMemcpyDtoD`` (docs/benchmarks.md), so the copy
is timed at ``--copy-size`` (4 GiB) after 0.5 s of warm-up. The same rule
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

# Peak memory bandwidth from each GPU's datasheet, in bytes/s: the true ceiling on memory traffic,
# which a copy does not reach (on a lent H200, 2026-11-26, cuMemcpyDtoD read 1.09 TB/s copied, i.e.
# 2.2 TB/s of traffic, while the ring allreduce below moved 3.2 TB/s of traffic).
PEAK_MEMORY_BANDWIDTH = {
    "H200": 4.8e12,  # NVIDIA H200 Tensor Core GPU datasheet: 4.8 TB/s HBM3e
    "H100 80GB HBM3": 3.35e12,  # NVIDIA H100 datasheet, SXM5: 3.35 TB/s HBM3
    "H100 PCIe": 2.0e12,  # NVIDIA H100 datasheet, PCIe: 2 TB/s HBM2e
    "A100-SXM4-80GB": 2.039e12,  # NVIDIA A100 datasheet, 80GB SXM: 2,039 GB/s HBM2e
    "A100-SXM4-40GB": 1.555e12,  # NVIDIA A100 datasheet, 40GB SXM: 1,555 GB/s HBM2
}


def peak_memory_bandwidth(device: str, given: float | None) -> float | None:
    """The device's datasheet memory bandwidth (bytes/s), ``given`` if set, else None if unknown."""
    if given:
        return given
    keys = [key for key in PEAK_MEMORY_BANDWIDTH if key in device]
    return PEAK_MEMORY_BANDWIDTH[max(keys, key=len)] if keys else None


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
    ap.add_argument("--copy-size", default="4GiB",
                    help="bytes per timed copy for the copy-rate bound (numba's cuMemcpyDtoD has a "
                    "per-call host cost: on an H200 it read 0.76-1.06 TB/s at 256 MiB, 2.01 TB/s "
                    "at 4 GiB, torch 2.13 TB/s)")  # fmt: skip
    ap.add_argument("--peak", help="the device's peak memory bandwidth (e.g. 4.8TB/s); default "
                    "from the datasheet table for known devices")  # fmt: skip
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (runs on the simulator)")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args(argv)
    if args.smoke:
        args.size, args.iters, args.warmup = f"{args.ranks * 16 * 4}B", 2, 1
        args.copy_size = args.size
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

    copy_bytes = parse_size(args.copy_size)
    copy_before = be.copy_bandwidth(copy_bytes, iters=args.iters)
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
                "launches": launches,
                "staged_steps": staged,
                "compile_s": compile_s,
                "checked": not args.no_check,
            }
        )
    # The bound uses the best copy rate seen, before or after the schedules ran (clocks and
    # memory state differ between the two; a bound from the lower one would flatter the ratio).
    copy_after = be.copy_bandwidth(copy_bytes, iters=args.iters)
    copy_rate = max(copy_before, copy_after)
    for r in rows:
        r["bound_s"] = r["traffic_bytes"] / (2 * copy_rate)
        r["busbw_bound"] = bus * r["nbytes"] / r["bound_s"]
        r["ratio_to_bound"] = r["bound_s"] / r["median_s"]
    native = rows[-1]
    for r in rows:
        r["ratio_to_native"] = r["busbw"] / native["busbw"]

    if sim:
        dev = "numba CUDA simulator"
    else:
        from numba import cuda

        name = cuda.get_current_device().name
        dev = name.decode() if isinstance(name, bytes) else str(name)
    from commsim.units import parse_bandwidth_or_inverse

    given = 1 / parse_bandwidth_or_inverse(args.peak) if args.peak else None
    peak = peak_memory_bandwidth(dev, given)
    for r in rows:
        r["ratio_to_peak"] = (r["traffic_bytes"] / peak) / r["median_s"] if peak else None
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
        "copy_rate_before": copy_before,
        "copy_rate_after": copy_after,
        "copy_rate_kernel": kernel_rate,
        "peak_memory_bandwidth": peak,
        "bound": "t_bound = traffic / (2 * copy_rate); traffic = sum over transfers of "
        "len * (2 + reduce) * itemsize (ring allreduce: 5 (p-1) S)",
        "target": "ring ratio_to_bound >= 0.5",
        "results": rows,
    }

    print(f"device: {dev}{' (timings meaningless)' if sim else ''}; numba {numba.__version__}")
    print(
        f"copy rate (cuMemcpyDtoD, {format_size(copy_bytes)}): {format_bandwidth(copy_rate)} "
        f"(before {format_bandwidth(copy_before)}, after {format_bandwidth(copy_after)}); "
        f"copy kernel: {format_bandwidth(kernel_rate)}"
    )
    print(f"allreduce, p = {p}, {format_size(rows[0]['nbytes'])} per rank, {dtype.name}")
    if peak:
        print(f"peak memory bandwidth (datasheet or --peak): {format_bandwidth(peak)}")
    head = ("algorithm", "time", "spread", "algbw", "busbw", "bound busbw", "/bound", "/peak",
            "/native")  # fmt: skip
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
            f"{r['ratio_to_peak']:.2f}" if peak else "-",
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
