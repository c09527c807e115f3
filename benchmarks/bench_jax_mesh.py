r"""JAX mesh backend benchmark: ring and Rabenseifner allreduce against ``lax.psum``.

Target (issue: real execution): on 8 CPU devices the ring allreduce of 64 MiB float32 reaches
>= 0.5x the busbw of ``jax.lax.psum`` timed in the same run.

Each schedule is lowered by :class:`commsim.exec.jax.JaxMeshBackend` (one jitted
``shard_map``, one ``ppermute`` per round) and timed by :func:`commsim.bench.measure`
(warm-up, median of ``--iters`` runs, native collective interleaved). busbw follows nccl-tests:
``algbw = S / t``, ``busbw = algbw · 2(p-1)/p``; ``ratio = busbw / busbw(psum)``.

On CPU the p "devices" are threads of one process sharing the machine's cores and memory, so
absolute numbers measure memory bandwidth and thread scheduling, not a network; the ratio is the
meaningful output. On a GPU host the same script uses the GPUs (``--platform gpu``).

Usage::

    python benchmarks/bench_jax_mesh.py                      # 8 CPU devices, 1MiB..64MiB
    python benchmarks/bench_jax_mesh.py --sizes 64MiB --iters 10 --json out.json
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

from _summary import bench_request, finish  # benchmarks/ is on sys.path when run as a script


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", "-p", type=int, default=8)
    ap.add_argument("--sizes", default="1MiB..64MiB", help="allreduce sizes (nccl-tests nbytes)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--algorithms", default="ring,rabenseifner")
    ap.add_argument("--platform", default="cpu", help="JAX platform: cpu (default) or gpu")
    ap.add_argument("--no-check", action="store_true", help="skip the reference check")
    ap.add_argument("--json", metavar="FILE", help="also write the measurements as JSON")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.platform == "cpu":  # must happen before JAX starts
        flag = f"--xla_force_host_platform_device_count={args.ranks}"
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    import commsim
    from commsim.bench import format_table, measure
    from commsim.exec import layout
    from commsim.exec.jax import JaxMeshBackend, plan
    from commsim.units import parse_sizes

    sizes = parse_sizes(args.sizes)
    request = bench_request(args, sizes)
    backend = JaxMeshBackend(devices=jax.devices(args.platform)[: args.ranks])
    print(
        f"# jax {jax.__version__} on {args.ranks} {args.platform} devices, "
        f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), {args.dtype}"
    )
    out = []
    for name in args.algorithms.split(","):
        s = commsim.build("allreduce", name, nranks=args.ranks)
        pl = plan(s, layout(s, max(sizes) // 4))
        print(f"\n## allreduce/{name}: {pl.summary()}")
        ms = measure(s, backend, request)
        print(format_table(ms), flush=True)
        out += [m.to_dict() for m in ms]
    return finish(out, "lax.psum", "ring >= 0.5", args.json)


if __name__ == "__main__":
    sys.exit(main())
