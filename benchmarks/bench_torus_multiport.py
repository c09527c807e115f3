"""Scale benchmark of the multiport torus allreduce (issue #25, "Use every link").

Target (2-core machine): ``torus_multiport`` allreduce on ``tpu-v5p:16x16x16`` (4,096 chips, 6
parts on 6 channels, 90 steps of 24,576 ranges) under ``bottleneck`` contention: under 10 s.
Also timed, for scale: the same on ``tpu-v5p:8x8x8`` under ``bottleneck`` and ``flow``, and the
one-dimension-at-a-time ``torus`` row on 16x16x16.

Each case runs in a fresh process (its own peak RSS); the time includes building the cluster,
its routes and the schedule, and numba's kernel load (compiled kernels are cached on disk after a
first, untimed warm-up run), but not the interpreter's start-up and imports.

Usage::

    python benchmarks/bench_torus_multiport.py            # markdown table on stdout
    python benchmarks/bench_torus_multiport.py --json out.json
    python benchmarks/bench_torus_multiport.py -k 16x16x16   # the cases whose label has this
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, time
import commsim
from commsim.clusters import cluster
from commsim.models import Topology
name, spec, mode, nbytes = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
t0 = time.perf_counter()
c = cluster(spec)
shape = spec.split(":")[1]
s = commsim.build("allreduce", name, nranks=c.ngpus, dims=shape)
pred = Topology(c.graph, contention=mode, gamma=c.gamma).predict(s, nbytes)
dt = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps({"seconds": dt, "peak_gib": rss, "predicted_s": pred.time,
                  "limited_by": pred.network.limiting[0]}))
"""

#: (label, algorithm, cluster, contention, bytes, target seconds or None)
CASES = [
    ("torus_multiport, tpu-v5p:16x16x16, bottleneck", "torus_multiport", "tpu-v5p:16x16x16",
     "bottleneck", 2**28, 10.0),
    ("torus, tpu-v5p:16x16x16, bottleneck", "torus", "tpu-v5p:16x16x16", "bottleneck", 2**28,
     None),
    ("torus_multiport, tpu-v5p:8x8x8, bottleneck", "torus_multiport", "tpu-v5p:8x8x8",
     "bottleneck", 2**28, None),
    ("torus_multiport, tpu-v5p:8x8x8, flow", "torus_multiport", "tpu-v5p:8x8x8", "flow", 2**28,
     None),
]  # fmt: skip


def run(case: tuple) -> dict:
    label, name, spec, mode, nbytes, target = case
    argv = [sys.executable, "-c", CHILD, name, spec, mode, str(nbytes)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return {"case": label, "target_s": target, **json.loads(out.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("-k", default="", help="only the cases whose label contains this")
    args = parser.parse_args()
    cases = [c for c in CASES if args.k in c[0]]
    run(cases[0])  # warm-up: numba compiles and caches its kernels
    rows = [run(c) for c in cases]
    print(
        f"{platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print("| case | seconds | peak GiB | predicted | target |")
    print("|---|---|---|---|---|")
    for r in rows:
        target = f"< {r['target_s']:.0f} s" if r["target_s"] else "-"
        print(f"| {r['case']} | {r['seconds']:.2f} | {r['peak_gib']:.2f} | "
              f"{r['predicted_s'] * 1e3:.3f} ms ({r['limited_by']}) | {target} |")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
