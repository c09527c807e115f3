"""Scale benchmark of the model and the verifier (issue: foundation acceptance).

Targets (2-core machine): ``predict`` of ring allreduce at p = 16,384 under 10 s; of Rabenseifner
at p = 65,536 under 2 s; peak memory under 4 GB; ``verify`` of any algorithm at p = 4096 under 30 s.

Each case runs in a fresh process so its peak resident memory (``ru_maxrss``) is its own; the
time excludes interpreter start-up and imports but includes building the schedule's steps and
numba's kernel load (compiled kernels are cached on disk after the first run).

Usage::

    python benchmarks/bench_scale.py                 # all cases, markdown table on stdout
    python benchmarks/bench_scale.py --only predict  # just the model cases
    python benchmarks/bench_scale.py --only kernels  # issue #20: whole predict commands

``--only kernels`` times whole ``commsim predict`` commands (issue #20's table: ring allreduce
at p = 1024, 16,384 and 65,536, 21 sizes at once, and Hockney per link class on a cluster),
start-up included, with the user and system CPU seconds of each (the machine is shared: CPU
time says what the command cost when the wall time says mostly what else ran).
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

# issue #20, model kernels: whole ``commsim predict`` commands, each a fresh process (start-up
# included, as a user meets it); (label, arguments after ``predict``, target seconds)
KERNELS = [
    ("ring p=1024, 1 size", "-c allreduce -a ring -p 1024 -s 1MiB", 0.5),
    ("ring p=16384, 1 size", "-c allreduce -a ring -p 16384 -s 1MiB", 2.0),
    ("ring p=16384, 21 sizes", "-c allreduce -a ring -p 16384 -s 1KiB..1GiB", 5.0),
    ("ring p=65536, 1 size", "-c allreduce -a ring -p 65536 -s 1MiB", 10.0),
    (
        "TwoLevelHockney ring p=16384, 1 size",
        "-c allreduce -a ring --cluster dgx-h100:2048 --model hockney -p 16384 -s 1MiB",
        2.0,
    ),
]


def run_command(args: str, timeout: float) -> dict:
    """``commsim predict ARGS`` in a fresh process: wall seconds, user and system CPU seconds,
    peak resident memory (of the child alone: ``os.wait4``)."""
    cmd = [sys.executable, "-m", "commsim", "predict", *args.split()]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"seconds": float("inf"), "error": f"timeout after {timeout:.0f}s"}
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # cumulative: the caller subtracts
    res = {"seconds": wall, "user": usage.ru_utime, "sys": usage.ru_stime}
    if proc.returncode:
        res["error"] = (err.strip().splitlines() or ["exit " + str(proc.returncode)])[-1]
    return res


def run_kernels(timeout: float) -> list[dict]:
    """The issue #20 rows: a markdown table of wall and CPU seconds against the targets."""
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| case | wall s | user s | sys s | target (wall) | status |")
    print("|---|---|---|---|---|---|")
    rows = []
    for label, args, target in KERNELS:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        res = run_command(args, timeout)
        if "user" in res:
            res["user"] -= before.ru_utime
            res["sys"] -= before.ru_stime
        status = res.get("error") or ("ok" if res["seconds"] <= target else "MISSED")
        print(f"| {label} | {res['seconds']:.2f} | {res.get('user', float('nan')):.2f} | "
              f"{res.get('sys', float('nan')):.2f} | < {target:g} s | {status} |", flush=True)  # fmt: skip
        rows.append({"case": label, "args": args, "target": target, **res})
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
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
        "--only", choices=["predict", "verify", "kernels"], help="run one group of cases"
    )
    ap.add_argument("--verify-p", type=int, default=4096, help="rank count of the verify cases")
    ap.add_argument("--json", help="also write the results to this JSON file")
    args = ap.parse_args()

    import commsim  # noqa: F401  (warm numba's on-disk cache once, outside the timings)
    from commsim.algorithms import REGISTRY

    run_case("predict", "allreduce", "ring", 8, 600)
    if args.only == "kernels":  # issue #20's commands, start-up included
        run_command("-c allreduce -a ring -p 8 -s 1KiB..1MiB", 600)  # numba's caches, warm
        rows = run_kernels(timeout=600)
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


if __name__ == "__main__":
    sys.exit(main())
