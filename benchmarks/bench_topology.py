"""Scale benchmark of the topology model (issue: networks).

Targets (2-core machine, peak memory under 8 GB for all):

* ring allreduce on a 4096-host two-level fat tree, ``bottleneck`` contention: under 10 s (and on
  a 4096-host ring topology, the case ASTRA-sim's analytical backend took 308 s for); routed by
  the ECMP hash and by d-mod-k;
* Rabenseifner allreduce on 16,384 hosts (fat tree): under 10 s;
* hierarchical allreduce on ``dgx-h100:2048`` (16,384 GPUs): under 10 s;
* ``flow`` contention on 1024 hosts (ring and Rabenseifner): under 60 s;
* ``commsim compare -c allreduce --cluster dgx-h100:128 -n 1KiB..1GiB``: under 30 s.

Each case runs in a fresh process (its own peak RSS); the time includes building the network,
its routes and the schedule, and numba's kernel load (compiled kernels are cached on disk after a
first, untimed warm-up run), but not the interpreter's start-up and imports.

Usage::

    python benchmarks/bench_topology.py            # markdown table on stdout
    python benchmarks/bench_topology.py --json out.json
    python benchmarks/bench_topology.py -k hierarchical   # the cases whose label has this
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
from commsim.models import Topology
from commsim.topology import fat_tree, ring
from commsim.clusters import cluster
case = sys.argv[1]
t0 = time.perf_counter()
if case == "compare":
    from commsim.cli import main
    import contextlib, io
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(["compare", "-c", "allreduce", "--cluster", "dgx-h100:128", "-n", "1KiB..1GiB"])
    extra = {"rc": rc}
else:
    name, p, net, mode = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    if net.startswith("dgx"):
        c = cluster(net)
        graph, gamma, params = c.graph, c.gamma, {"ranks_per_node": c.ranks_per_node}
    elif net == "ring":
        graph, gamma, params = ring(p), 1 / 100e9, {}
    else:  # "fat" (ECMP, the generator's default) or "fat-dmodk"
        routing = "dmodk" if net == "fat-dmodk" else "ecmp"
        graph, gamma, params = fat_tree(p, hosts_per_leaf=32, routing=routing), 1 / 100e9, {}
    s = commsim.build("allreduce", name, nranks=p, **params)
    pred = Topology(graph, contention=mode, gamma=gamma).predict(s, 2**28)
    extra = {"predicted_s": pred.time, "limited_by": pred.network.limiting[0]}
dt = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": dt, "peak_rss": rss, **extra}))
"""

CASES = [  # (label, args, target seconds)
    (
        "ring, ring topology (ASTRA-sim's case), bottleneck",
        ["x", "ring", "4096", "ring", "bottleneck"],
        10.0,
    ),
    ("ring, fat tree, bottleneck", ["x", "ring", "4096", "fat", "bottleneck"], 10.0),
    ("ring, fat tree d-mod-k, bottleneck", ["x", "ring", "4096", "fat-dmodk", "bottleneck"], 10.0),
    (
        "rabenseifner, fat tree, bottleneck",
        ["x", "rabenseifner", "16384", "fat", "bottleneck"],
        10.0,
    ),
    (
        "hierarchical, dgx-h100:2048, bottleneck",
        ["x", "hierarchical", "16384", "dgx-h100:2048", "bottleneck"],
        10.0,
    ),
    (
        "rabenseifner, fat tree d-mod-k, bottleneck",
        ["x", "rabenseifner", "16384", "fat-dmodk", "bottleneck"],
        10.0,
    ),
    ("ring, fat tree, flow", ["x", "ring", "1024", "fat", "flow"], 60.0),
    ("rabenseifner, fat tree, flow", ["x", "rabenseifner", "1024", "fat", "flow"], 60.0),
    ("compare --cluster dgx-h100:128 -n 1KiB..1GiB", ["compare"], 30.0),
]


def run(args: list[str], timeout: float) -> dict:
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, *args], capture_output=True, text=True,
            timeout=timeout, check=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"seconds": float("inf"), "peak_rss": 0, "error": f"timeout after {timeout:.0f}s"}
    except subprocess.CalledProcessError as e:
        return {"seconds": float("nan"), "peak_rss": 0, "error": e.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", help="also write the results to this JSON file")
    ap.add_argument("-k", default="", help="run only the cases whose label contains this")
    args = ap.parse_args()
    run(["x", "ring", "64", "fat", "flow"], 600)  # warm numba's on-disk cache, untimed
    run(["x", "ring", "64", "fat", "bottleneck"], 600)
    run(["x", "ring", "64", "fat-dmodk", "bottleneck"], 600)
    print(f"# commsim topology benchmark — {time.strftime('%Y-%m-%d')}, "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()}\n")  # fmt: skip
    print("| case | hosts | seconds | target | peak RSS | limited by | status |")
    print("|---|---|---|---|---|---|---|")
    results = []
    ok = True
    for label, argv, target in CASES:
        if args.k not in label:
            continue
        r = run(argv, 10 * target)
        hosts = argv[2] if len(argv) > 2 else "1024"
        good = r["seconds"] <= target and r["peak_rss"] < 8 * 2**30
        ok &= good
        status = r.get("error") or ("ok" if good else "MISSED")
        print(f"| {label} | {hosts} | {r['seconds']:.2f} | < {target:.0f} s | "
              f"{r['peak_rss'] / 2**30:.2f} GiB | {r.get('limited_by', '-')} | {status} |")  # fmt: skip
        results.append({"case": label, "target_s": target, **r})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
