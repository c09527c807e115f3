r"""Drop-in collectives benchmark: a schedule inside the user's own program vs the native collective.

Targets (issue: "use a schedule inside your own program"): the drop-in allreduce of a 64 MiB
float32 gradient reaches >= 0.8x the native collective's speed on 2 MPI ranks
(``commsim.exec.mpi.collective`` vs ``mpi4jax.allreduce``, i.e. ``MPI_Allreduce``) and >= 0.6x on
8 JAX CPU devices (``commsim.exec.jax.collective`` inside ``shard_map`` vs ``lax.psum``); and the
overhead of bucketing 100 small tensors (1 KiB - 1 MiB, log-uniform) is reported.

Both sides are called the way a user calls them: one jitted function per call. Under MPI the input
is not donated (the output is a new array); on JAX the 64 MiB input is donated and both programs
are compiled with :func:`commsim.exec.jax.compiler_options`, which is how a gradient behaves inside
a jitted training step (an intermediate whose buffer XLA reuses); ``--no-donate`` calls both sides
on the same input without donation (each call then writes a new array, as a user's plain
``jax.jit`` does). The bucketing comparison is not donated. Times are medians of ``--iters`` calls, the two sides interleaved; under
MPI each call starts after a barrier and counts as the slowest rank's time. ``ratio`` is
``t_native / t_dropin`` (1.0: as fast as the native collective).

Usage::

    python benchmarks/bench_dropin.py --backend mpi     # starts mpirun -n 2 itself
    python benchmarks/bench_dropin.py --backend jax     # 8 CPU devices
    python benchmarks/bench_dropin.py --backend jax --no-donate --tensors 0
    python benchmarks/bench_dropin.py --backend jax --tensors 0 --lowerings --size 16MiB

``--lowerings`` (jax) adds three hand-written programs beside the drop-in, to see where a ring's
time goes on XLA CPU (``docs/benchmarks.md``, "Chunk arrays"): the ring allreduce lowered as
chunk arrays after rotating each device's buffer by its index (no ``dynamic_update_slice`` in
any step: each step a ``ppermute`` of one chunk array and an add into another, placed back once
at the end), the ring's ``2(p-1)`` ``ppermute`` s of one chunk each with nothing else, and one
copy of the buffer (``x + 0``).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=("mpi", "jax"), default="mpi")
    ap.add_argument("--ranks", "-p", type=int, default=None, help="[mpi: 2, jax: 8]")
    ap.add_argument("--size", default="64MiB", help="the gradient's bytes (float32) [64MiB]")
    ap.add_argument("--algorithms", default="ring,rabenseifner")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--tensors", type=int, default=100, help="small tensors to bucket [100]")
    ap.add_argument("--buckets", default="256KiB,1MiB,4MiB", help="bucket_bytes to try")
    ap.add_argument(
        "--no-donate",
        dest="donate",
        action="store_false",
        help="jax: do not donate the gradient (default: donated, as inside a training step)",
    )
    ap.add_argument(
        "--lowerings",
        action="store_true",
        help="jax: also time hand-written ring lowerings (rotated chunk arrays, ppermutes alone, a copy)",
    )
    args = ap.parse_args(argv)
    args.ranks = args.ranks or (2 if args.backend == "mpi" else 8)
    return args


def small_tensors(n: int, seed: int = 0) -> list[np.ndarray]:
    """``n`` float32 vectors of 1 KiB to 1 MiB, log-uniform sizes."""
    rng = np.random.default_rng(seed)
    elems = np.exp(rng.uniform(np.log(256), np.log(256 * 1024), n)).astype(int)
    return [rng.standard_normal(int(e)).astype(np.float32) for e in elems]


def timed(
    calls: dict[str, Callable[[], Any]],
    iters: int,
    sync: Callable[[float], float],
    fresh: Callable[[], Any] | None = None,
    cpu: dict[str, float] | None = None,
) -> dict:
    """Median seconds per call of each entry, interleaved, after one untimed warm-up each. With
    ``fresh``, each call takes ``fresh()``'s value (made untimed: a donated input is used up).
    With ``cpu``, it also gets each entry's median CPU seconds per call of this process
    (``time.process_time``: every device's thread on JAX CPU; less sensitive to load than wall)."""
    import jax

    used: dict[str, list[float]] = {k: [] for k in calls}

    def once(f: Callable[..., Any], name: str = "") -> float:
        args = () if fresh is None else (jax.block_until_ready(fresh()),)
        c, t = time.process_time(), time.perf_counter()
        jax.block_until_ready(f(*args))
        t = time.perf_counter() - t
        if name:
            used[name].append(time.process_time() - c)
        return t

    for f in calls.values():
        once(f)
    samples: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(iters):
        for name, f in calls.items():
            samples[name].append(sync(once(f, name)))
    if cpu is not None:
        cpu.update({k: float(np.median(v)) for k, v in used.items()})
    return {k: float(np.median(v)) for k, v in samples.items()}


def report(
    title: str, times: dict[str, float], baseline: str, cpu: dict[str, float] | None = None
) -> None:
    """A table of ``times`` and their ratios to ``baseline``'s, and CPU times when given."""
    from commsim.units import format_time

    print(f"\n## {title}")
    extra = f" {'cpu':>10} {'ratio':>7}" if cpu else ""
    print(f"{'':>28} {'median':>10} {'ratio':>7}{extra}")
    for name, t in times.items():
        row = f"{name:>28} {format_time(t):>10} {times[baseline] / t:6.2f}x"
        if cpu:
            row += f" {format_time(cpu[name]):>10} {cpu[baseline] / cpu[name]:6.2f}x"
        print(row)


def mpi_main(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.size == 1 and args.ranks > 1:  # start ourselves under mpirun
        mpirun = os.path.join(os.path.dirname(sys.executable), "mpirun")
        cmd = [mpirun, "-n", str(args.ranks), sys.executable, *sys.argv]
        return subprocess.call(cmd)
    import jax
    import jax.numpy as jnp
    import mpi4jax

    import commsim
    from commsim.units import parse_size

    p, rank = comm.size, comm.rank

    def slowest(t: float) -> float:
        return comm.allreduce(t, op=MPI.MAX)

    def barrier_then(f: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: (comm.Barrier(), f())[1]

    n = parse_size(args.size) // 4
    x = jnp.asarray(np.random.default_rng(rank).standard_normal(n).astype(np.float32))
    host = np.asarray(x)
    out = np.empty_like(host)
    native = jax.jit(lambda v: mpi4jax.allreduce(v, op=MPI.SUM, comm=comm))
    calls: dict[str, Callable[[], Any]] = {"mpi4jax.allreduce": barrier_then(lambda: native(x))}
    calls["mpi4py Allreduce (numpy)"] = barrier_then(lambda: comm.Allreduce(host, out, MPI.SUM))
    for a in args.algorithms.split(","):
        f = jax.jit(commsim.exec.mpi.collective(commsim.build("allreduce", a, nranks=p), comm=comm))
        calls[f"drop-in {a}"] = barrier_then(lambda f=f: f(x))
        got = np.asarray(f(x))
        want = np.asarray(native(x))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * np.sqrt(p))
    times = timed(calls, args.iters, slowest)

    tree = [jnp.asarray(t) for t in small_tensors(args.tensors)]
    ring = commsim.build("allreduce", "ring", nranks=p)
    tree_native = jax.jit(lambda t: [mpi4jax.allreduce(v, op=MPI.SUM, comm=comm) for v in t])
    bcalls: dict[str, Callable[[], Any]] = {
        "mpi4jax per tensor": barrier_then(lambda: tree_native(tree))
    }
    for b in [None, *args.buckets.split(",")]:
        f = jax.jit(commsim.exec.mpi.collective(ring, comm=comm, bucket_bytes=b))
        bcalls[f"ring, buckets {b or 'none'}"] = barrier_then(lambda f=f: f(tree))
    btimes = timed(bcalls, args.iters, slowest)
    if rank == 0:
        header(args, p)
        report(f"allreduce of {args.size} float32", times, "mpi4jax.allreduce")
        total = sum(t.nbytes for t in tree)
        report(
            f"{args.tensors} tensors, {total / 2**20:.1f} MiB in all", btimes, "mpi4jax per tensor"
        )
    return 0


def rotated_chunks_ring(p: int, axis: str) -> Callable[[Any], Any]:
    """The ring allreduce of a ``[n]`` buffer (``p`` divides ``n``) as ``p`` chunk arrays.

    Device ``d`` cuts its buffer into chunks rotated by ``d`` (chunk ``j`` is slot ``(j + d) mod
    p``), so the chunk every device sends at a step has the same static index: reduce-scatter
    step ``s`` sends chunk ``-s`` and adds what it receives into chunk ``-s - 1``, allgather step
    ``s`` sends chunk ``1 - s`` and keeps what it receives as chunk ``-s`` (indices mod ``p``).
    The chunks go back to their slots with one ``dynamic_update_slice`` each at the end."""
    import jax.numpy as jnp
    from jax import lax

    ring = [(i, (i + 1) % p) for i in range(p)]

    def body(x: Any) -> Any:
        size = x.shape[-1] // p
        d = lax.axis_index(axis)
        starts = [((j + d) % p) * size for j in range(p)]
        c = [lax.dynamic_slice(x, (st,), (size,)) for st in starts]
        for s in range(p - 1):
            c[(-s - 1) % p] = c[(-s - 1) % p] + lax.ppermute(c[-s % p], axis, ring)
        for s in range(p - 1):
            c[-s % p] = lax.ppermute(c[(1 - s) % p], axis, ring)
        out = jnp.zeros_like(x)
        for chunk, st in zip(c, starts, strict=True):
            out = lax.dynamic_update_slice(out, chunk, (st,))
        return out

    return body


def ring_ppermutes(p: int, axis: str) -> Callable[[Any], Any]:
    """The ring allreduce's ``2(p-1)`` ``ppermute`` s of one chunk each, and nothing else (its
    result is not an allreduce): what the ring's transfers alone cost."""
    import jax.numpy as jnp
    from jax import lax

    ring = [(i, (i + 1) % p) for i in range(p)]

    def body(x: Any) -> Any:
        size = x.shape[-1] // p
        c = [x[j * size : (j + 1) * size] for j in range(p)]
        for s in range(2 * (p - 1)):
            c[(-s - 1) % p] = lax.ppermute(c[-s % p], axis, ring)
        return jnp.concatenate(c)

    return body


def jax_main(args: argparse.Namespace) -> int:
    os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={args.ranks}")
    import jax
    from jax import lax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import commsim
    from commsim.exec.jax import compiler_options
    from commsim.units import parse_size

    p = args.ranks
    mesh = Mesh(np.array(jax.devices()[:p]), ("data",))
    sharded = NamedSharding(mesh, P("data"))

    def in_mesh(body: Callable[[Any], Any], like: Any, donate: bool = False) -> Callable:
        f = jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P("data"), check_vma=False)
        jitted = jax.jit(f, donate_argnums=0 if donate else ())
        return jitted.lower(like).compile(compiler_options=compiler_options("cpu"))

    n = parse_size(args.size) // 4
    host = np.random.default_rng(0).standard_normal((p * n,), np.float32)
    x = jax.device_put(host, sharded)
    native = in_mesh(lambda v: lax.psum(v, "data"), x, donate=args.donate)
    want = np.asarray(native(jax.device_put(host, sharded)))
    calls: dict[str, Callable[[], Any]] = {"lax.psum": native}
    for a in args.algorithms.split(","):
        s = commsim.build("allreduce", a, nranks=p)
        f = in_mesh(commsim.exec.jax.collective(s, axis_name="data"), x, donate=args.donate)
        calls[f"drop-in {a}"] = f
        got = np.asarray(f(jax.device_put(host, sharded)))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    if args.lowerings:
        chunks = in_mesh(rotated_chunks_ring(p, "data"), x, donate=args.donate)
        got = np.asarray(chunks(jax.device_put(host, sharded)))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
        calls["ring, rotated chunks"] = chunks
        calls["ring's ppermutes alone"] = in_mesh(ring_ppermutes(p, "data"), x, args.donate)
        calls["one copy (x + 0)"] = in_mesh(lambda v: v + 0, x, donate=args.donate)
    # a gradient inside a training step is an intermediate: XLA reuses its buffer, as donation does
    fresh = (lambda: jax.device_put(host, sharded)) if args.donate else (lambda: x)
    cpu: dict[str, float] = {}
    times = timed(calls, args.iters, lambda t: t, fresh=fresh, cpu=cpu)
    header(args, p)
    donated = "donated" if args.donate else "not donated"
    report(f"allreduce of {args.size} float32 per device ({donated})", times, "lax.psum", cpu)
    if not args.tensors:
        return 0

    tensors = small_tensors(args.tensors)
    tree = [jax.device_put(np.tile(t, p), sharded) for t in tensors]
    ring = commsim.build("allreduce", "ring", nranks=p)
    bcalls: dict[str, Callable[[], Any]] = {}
    per_leaf = in_mesh(lambda t: [lax.psum(v, "data") for v in t], tree)
    bcalls["lax.psum per tensor"] = lambda: per_leaf(tree)
    for b in [None, *args.buckets.split(",")]:
        f = in_mesh(commsim.exec.jax.collective(ring, axis_name="data", bucket_bytes=b), tree)
        bcalls[f"ring, buckets {b or 'none'}"] = lambda f=f: f(tree)
    btimes = timed(bcalls, args.iters, lambda t: t)
    total = sum(t.nbytes for t in tensors)
    report(f"{args.tensors} tensors, {total / 2**20:.1f} MiB in all", btimes, "lax.psum per tensor")
    return 0


def header(args: argparse.Namespace, p: int) -> None:
    import jax

    what = "MPI ranks" if args.backend == "mpi" else "JAX CPU devices"
    print(
        f"# drop-in collectives, {p} {what}, {os.cpu_count()} cores, {platform.machine()}, "
        f"jax {jax.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load average {os.getloadavg()[0]:.1f}, median of {args.iters}; ratio = t(native) / t"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("MPI4JAX_NO_WARN_JAX_VERSION", "1")
    return mpi_main(args) if args.backend == "mpi" else jax_main(args)


if __name__ == "__main__":
    sys.exit(main())
