"""The JAX twin at scale: build, one evaluation, and vmapped what-if sweeps.

Ring allreduce at p = 1024 on ``dgx-h100:128`` (bottleneck contention): the twin's program is
recorded once, then ``N`` parameter sets (each link class's inverse bandwidth scaled by a random
factor in [0.5, 2]) are evaluated in one jit-compiled ``vmap``; the first call includes the
compilation. Each sweep prints its wall time and the process's CPU time beside it (on a shared
machine the wall time includes waiting for a core). Run: ``python benchmarks/bench_twin.py
[N ...]`` (default 10 100 1000).
"""

from __future__ import annotations

import platform
import sys
import time

import jax
import numpy as np

import commsim
from commsim._cluster_model import cluster_model
from commsim.clusters import cluster
from commsim.models import Twin


def main(counts: list[int]) -> None:
    print(f"# {platform.machine()}, {jax.device_count()} {jax.default_backend()} device(s), "
          f"jax {jax.__version__}")  # fmt: skip
    t0 = time.perf_counter()
    model = cluster_model(cluster("dgx-h100:128"), contention="bottleneck")
    schedule = commsim.build("allreduce", "ring", nranks=1024)
    twin = Twin.of(model, schedule)
    t1 = time.perf_counter()
    one = float(twin.time(twin.params(), 2**30))
    t2 = time.perf_counter()
    ref = model.predict(schedule, 2**30).time
    t3 = time.perf_counter()
    print(f"record program: {t1 - t0:.2f} s ({twin.program.nrounds} rounds)")
    replayed = getattr(twin, "replayed", twin.program)  # absent before the orbit fold
    print(f"replayed ports: {replayed.nports} of {twin.program.nports}")
    print(f"twin, one size (compile + run): {t2 - t1:.2f} s; compiled model: {t3 - t2:.2f} s; "
          f"relative difference {abs(one - ref) / ref:.1e}")  # fmt: skip
    base = twin.params()
    for n in counts:
        rng = np.random.default_rng(0)
        batch = {k: np.broadcast_to(v, (n, *np.shape(v))) for k, v in base.items()}
        batch["inv_bandwidth"] = rng.uniform(0.5, 2.0, (n, len(twin.classes)))
        t, c = time.perf_counter(), time.process_time()
        twin.sweep(batch, 2**30)
        first, first_cpu = time.perf_counter() - t, time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        twin.sweep(batch, 2**30)
        again, again_cpu = time.perf_counter() - t, time.process_time() - c
        print(f"sweep of {n:>6} parameter sets: {first:.2f} s first call ({first_cpu:.2f} s CPU), "
              f"{again:.2f} s again ({again_cpu:.2f} s CPU)")  # fmt: skip


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [10, 100, 1000])
