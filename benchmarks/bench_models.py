"""Each cost model's ``predict`` at scale: Hockney, LogGP and per-link-class Hockney.

Times ``predict`` of one schedule (default ring allreduce at p = 16,384, 1 MiB) under each model,
each in a fresh process (so numba's kernel load and the schedule's steps are counted the same way
as ``bench_scale.py``; compiled kernels are cached on disk after the first run).

Usage::

    python benchmarks/bench_models.py                       # ring allreduce, p = 16,384
    python benchmarks/bench_models.py -a rabenseifner -p 65536 --models hockney,loggp
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, sys, time
import commsim
from commsim.models import Hockney, LogGP, TwoLevelHockney
model, coll, name, p = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
m = {
    "hockney": lambda: Hockney(),
    "loggp": lambda: LogGP(),
    "hockney_classes": lambda: TwoLevelHockney(("1us", "100GB/s"), ("2us", "25GB/s"),
                                               ranks_per_node=8),
}[model]()
m.predict(commsim.build(coll, name, nranks=16), 2**20)  # load the kernels
s = commsim.build(coll, name, nranks=p)
t0 = time.perf_counter()
pred = m.predict(s, 2**20)
print(json.dumps({"seconds": time.perf_counter() - t0, "predicted_s": pred.time}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--collective", default="allreduce")
    ap.add_argument("-a", "--algorithm", default="ring")
    ap.add_argument("-p", "--nranks", type=int, default=16384)
    ap.add_argument("--models", default="hockney,loggp,hockney_classes")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    print(f"{args.collective}/{args.algorithm} p={args.nranks}, 1 MiB\n")
    print("| model | predict (s) | predicted time |\n|---|---|---|")
    for model in args.models.split(","):
        cmd = [sys.executable, "-c", CHILD, model, args.collective, args.algorithm]
        try:
            out = subprocess.run(
                [*cmd, str(args.nranks)], capture_output=True, text=True, timeout=args.timeout
            )
        except subprocess.TimeoutExpired:
            print(f"| {model} | > {args.timeout:g} | |")
            continue
        if out.returncode:
            print(f"| {model} | failed: {out.stderr.strip().splitlines()[-1]} | |")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {model} | {r['seconds']:.2f} | {r['predicted_s'] * 1e3:.3f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
