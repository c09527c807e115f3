"""Scale benchmark of the model and the verifier (issue: foundation acceptance).

Targets (2-core machine): ``predict`` of ring allreduce at p = 16,384 under 10 s; of Rabenseifner
at p = 65,536 under 2 s; peak memory under 4 GB; ``verify`` of any algorithm at p = 4096 under 30 s.

Each case runs in a fresh process so its peak resident memory (``ru_maxrss``) is its own; the
time excludes interpreter start-up and imports but includes building the schedule's steps and
numba's kernel load (compiled kernels are cached on disk after the first run).

The ``verifyflow`` group (issue #20: a verifier that fits in 4 GB, a fast flow simulation)
runs three commands through the CLI in a fresh process each, timed with ``/usr/bin/time``-style
accounting (wall, user and system CPU of the child, peak RSS), because on a shared machine the
CPU time is the number that does not depend on the load:

* ``commsim verify -c allreduce -a ring -p 16384`` (target < 15 s, < 4 GB);
* ``commsim compare -c allreduce -p 4096 -s 1MiB`` (target < 5 s);
* ``commsim predict -c allreduce -a ring -p 1024 --cluster dgx-h100:128 --contention flow
  -s 1KiB..1GiB`` (21 sizes; target < 20 s).

Usage::

    python benchmarks/bench_scale.py                    # all cases, markdown table on stdout
    python benchmarks/bench_scale.py --only predict     # just the model cases
    python benchmarks/bench_scale.py --only verifyflow  # the issue #20 verifier and flow rows
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, time
import commsim
from commsim.models import Hockney
kind, coll, name, p = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
t0 = time.perf_counter()
s = commsim.build(coll, name, nranks=p)
if kind == "predict":
    pred = Hockney(alpha=2e-6, beta=1 / 25e9, gamma=1 / 100e9).predict(s, 2**20)
    extra = {"predicted_s": pred.time}
else:
    extra = {"transfers": commsim.verify(s).ntransfers}
dt = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": dt, "peak_rss": rss, "steps": s.nsteps, **extra}))
"""

PREDICT = [("allreduce", "ring", 16384, 10.0), ("allreduce", "rabenseifner", 65536, 2.0)]

#: (label, CLI arguments, target seconds, target peak bytes or None): issue #20's rows.
VERIFYFLOW = [
    ("verify allreduce/ring", "verify -c allreduce -a ring -p 16384", 15.0, 4e9),
    ("compare allreduce 1MiB", "compare -c allreduce -p 4096 -s 1MiB", 5.0, None),
    (
        "flow allreduce/ring dgx-h100:128, 21 sizes",
        "predict -c allreduce -a ring -p 1024 --cluster dgx-h100:128 --contention flow "
        "-s 1KiB..1GiB",
        20.0,
        None,
    ),
]


def run_cli(args: str, timeout: float) -> dict:
    """One ``python -m commsim ARGS`` in a fresh process: wall (with start-up), the child's
    user and system CPU seconds and its peak RSS (``getrusage(RUSAGE_CHILDREN)`` deltas)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        subprocess.run(
            [sys.executable, "-m", "commsim", *args.split()],
            capture_output=True, text=True, timeout=timeout, check=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"seconds": float("inf"), "peak_rss": 0, "error": f"timeout after {timeout:.0f}s"}
    except subprocess.CalledProcessError as e:
        return {"seconds": float("nan"), "peak_rss": 0, "error": e.stderr.strip().splitlines()[-1]}
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "seconds": wall,
        "user": after.ru_utime - before.ru_utime,
        "sys": after.ru_stime - before.ru_stime,
        "peak_rss": after.ru_maxrss * 1024,  # the largest child so far: run alone per process
        "load": os.getloadavg()[0],
    }


def verifyflow_rows(timeout: float = 900.0) -> list[dict]:
    """Issue #20's verifier and flow rows, each in a fresh process, as a markdown table."""
    print("| case | seconds (wall) | user CPU s | target | peak RSS | load (1 min) | status |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for label, args, target, mem in VERIFYFLOW:
        res = run_cli(args, timeout)
        ok = "error" not in res and res["seconds"] <= target
        ok = ok and (mem is None or res["peak_rss"] < mem)
        status = "ok" if ok else res.get("error", "MISSED")
        print(f"| {label} | {res['seconds']:.1f} | {res.get('user', float('nan')):.1f} | "
              f"< {target:g} s | {res['peak_rss'] / 2**30:.2f} GiB | {res.get('load', 0):.1f} | "
              f"{status} |", flush=True)  # fmt: skip
        rows.append({"kind": "verifyflow", "case": label, "args": args, **res})
    return rows


def run_case(kind: str, coll: str, name: str, p: int, timeout: float) -> dict:
    t0 = time.perf_counter()
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, kind, coll, name, str(p)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return {"seconds": float("inf"), "peak_rss": 0, "error": f"timeout after {timeout:.0f}s"}
    except subprocess.CalledProcessError as e:
        return {"seconds": float("nan"), "peak_rss": 0, "error": e.stderr.strip().splitlines()[-1]}
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall_with_startup"] = time.perf_counter() - t0
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--only", choices=["predict", "verify", "verifyflow"], help="run one group of cases"
    )
    ap.add_argument("--verify-p", type=int, default=4096, help="rank count of the verify cases")
    ap.add_argument("--json", help="also write the results to this JSON file")
    args = ap.parse_args()

    import commsim  # noqa: F401  (warm numba's on-disk cache once, outside the timings)
    from commsim.algorithms import REGISTRY

    run_case("predict", "allreduce", "ring", 8, 600)
    if args.only == "verifyflow":
        # peak RSS comes from RUSAGE_CHILDREN, the largest child so far: one process per row
        rows = [_one_row(i) for i in range(len(VERIFYFLOW))]
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
        return 0
    rows = []
    print(f"# commsim scale benchmark — {time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}\n")  # fmt: skip
    print("| case | p | steps | seconds | target | peak RSS | status |")
    print("|---|---|---|---|---|---|---|")
    cases = []
    if args.only in (None, "predict"):
        cases += [("predict", c, n, p, t) for c, n, p, t in PREDICT]
    if args.only in (None, "verify"):
        cases += [("verify", c, n, args.verify_p, 30.0) for c, n in sorted(REGISTRY)]
    for kind, coll, name, p, target in cases:
        res = run_case(kind, coll, name, p, timeout=max(120.0, 4 * target))
        ok = res["seconds"] <= target and res.get("peak_rss", 0) < 4e9 and "error" not in res
        status = "ok" if ok else res.get("error", "MISSED")
        print(f"| {kind} {coll}/{name} | {p} | {res.get('steps', '-')} | {res['seconds']:.2f} | "
              f"< {target:g} s | {res['peak_rss'] / 2**30:.2f} GiB | {status} |", flush=True)  # fmt: skip
        rows.append({"kind": kind, "collective": coll, "algorithm": name, "p": p, **res})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def _one_row(i: int) -> dict:
    """Row ``i`` of :data:`VERIFYFLOW` in a process of its own (so its children's peak RSS is
    that row's alone); prints the table header before the first row."""
    code = (
        "import json, sys; sys.path.insert(0, 'benchmarks'); import bench_scale as b; "
        f"b.VERIFYFLOW = b.VERIFYFLOW[{i}:{i + 1}]; rows = b.verifyflow_rows(); "
        "print('JSON' + json.dumps(rows[0]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    if i == 0:
        print("\n".join(lines[:2]))
    print(lines[2], flush=True)
    return json.loads(lines[-1][4:])


if __name__ == "__main__":
    sys.exit(main())
