"""Scale benchmark: the CLI's start-up, the model and the verifier at scale (issues "foundation
acceptance" and #20 "Scale").

Every case is one command run in a fresh process, ``/usr/bin/time``-style: wall time including
interpreter start-up and imports, CPU time (user + system) and peak resident memory of that
process alone (``os.wait4``). The model and verifier cases also report the time inside the
process (building the schedule's steps and predicting or verifying, numba's kernel load
included; compiled kernels are cached on disk after the warm-up run).

Each case runs once untimed first (so that byte-compiled modules and numba's cache exist, as on
a user's machine), then ``--repeat`` times; the row shows the fastest run. The load average is
printed with the table: on a shared machine, wall times are only comparable at equal load, and
CPU time is the steadier number.

Adding a case is one entry in :data:`CASES`.

Usage::

    python benchmarks/bench_scale.py                  # every case, a markdown table on stdout
    python benchmarks/bench_scale.py --only startup   # one group (or several: startup,kernels)
    python benchmarks/bench_scale.py --only kernels --match "ring -p"   # rows whose label has it
    python benchmarks/bench_scale.py --repeat 5 --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the model and verifier cases' process: times the work after the imports
CHILD = r"""
import json, sys, time
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
print(json.dumps({"seconds": time.perf_counter() - t0, "steps": s.nsteps, **extra}))
"""


@dataclasses.dataclass(frozen=True)
class Case:
    """One row: ``argv`` after the interpreter (``-m commsim ...`` or ``-c CHILD ...``)."""

    group: str
    label: str
    argv: tuple[str, ...]
    target_s: float  # on the wall, start-up included (cli) or inside the process (model)
    inside: bool = False  # the target is the child's own "seconds", not the wall time


def cli(group: str, command: str, target_s: float) -> Case:
    """A ``commsim`` command line, timed on the wall from the interpreter's start."""
    return Case(group, f"commsim {command}", ("-m", "commsim", *command.split()), target_s)


def model(kind: str, coll: str, name: str, p: int, target_s: float) -> Case:
    """A prediction or a verification, timed inside its process."""
    argv = ("-c", CHILD, kind, coll, name, str(p))
    return Case(kind, f"{kind} {coll}/{name} p={p}", argv, target_s, inside=True)


#: every row of the table, in order; ``group`` is what ``--only`` selects
CASES: list[Case] = [
    cli("startup", "--help", 0.3),
    cli("startup", "algorithms", 0.3),
    model("predict", "allreduce", "ring", 16384, 10.0),
    model("predict", "allreduce", "rabenseifner", 65536, 2.0),
    # issue #20: a verifier that fits in 4 GB, compare at p = 4096, a fast flow simulation
    # issue #20's predict commands, start-up included (as a user meets them)
    cli("kernels", "predict -c allreduce -a ring -p 1024 -s 1MiB", 0.5),
    cli("kernels", "predict -c allreduce -a ring -p 16384 -s 1MiB", 2.0),
    cli("kernels", "predict -c allreduce -a ring -p 16384 -s 1KiB..1GiB", 5.0),
    cli("kernels", "predict -c allreduce -a ring -p 65536 -s 1MiB", 10.0),
    cli(
        "kernels",
        "predict -c allreduce -a ring --cluster dgx-h100:2048 --model hockney -p 16384 -s 1MiB",
        2.0,
    ),
    cli("verifyflow", "verify -c allreduce -a ring -p 16384", 15.0),
    cli("verifyflow", "compare -c allreduce -p 4096 -s 1MiB", 5.0),
    cli(
        "verifyflow",
        "predict -c allreduce -a ring -p 1024 --cluster dgx-h100:128 "
        "--contention flow -s 1KiB..1GiB",
        20.0,
    ),
]


def verify_cases(p: int) -> list[Case]:
    """``verify`` of every registered algorithm at ``p`` ranks (target 30 s)."""
    from commsim.algorithms import REGISTRY

    return [model("verify", c, n, p, 30.0) for c, n in sorted(REGISTRY)]


def run_once(case: Case, timeout: float) -> dict:
    """Run ``case`` in a fresh process: its wall time, CPU time and peak RSS (``os.wait4``: this
    child's own), and the JSON line a model case prints."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's install has its .pyc files
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        argv = [sys.executable, *case.argv]
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=ROOT)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > timeout:
                proc.kill()
                os.wait4(proc.pid, 0)
                return {"error": f"timeout after {timeout:.0f}s"}
            time.sleep(0.002)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    res: dict = {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss": usage.ru_maxrss * 1024,  # KiB on Linux
    }
    if proc.returncode != 0:
        return {**res, "error": (stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    if case.inside:
        res.update(json.loads(stdout.strip().splitlines()[-1]))
    return res


def measure(case: Case, repeat: int, timeout: float) -> dict:
    """The fastest of ``repeat`` runs after an untimed one (.pyc files, numba's cache)."""
    run_once(case, timeout)
    runs = [run_once(case, timeout) for _ in range(repeat)]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[-1]
    return min(ok, key=lambda r: r["seconds" if case.inside else "wall_s"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--only",
        help="run these groups of cases, comma-separated (startup, predict, verify, kernels, "
        "verifyflow)",
    )
    ap.add_argument("--match", help="run the cases whose label contains this text")
    ap.add_argument("--verify-p", type=int, default=4096, help="rank count of the verify cases")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per case (default 3)")
    ap.add_argument("--json", help="also write the results to this JSON file")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))

    cases = CASES + verify_cases(args.verify_p)
    if args.only:
        cases = [c for c in cases if c.group in args.only.split(",")]
    if args.match:
        cases = [c for c in cases if args.match in c.label]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"# commsim scale benchmark — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, load average {load} (before)\n")  # fmt: skip
    print("| case | wall s | CPU s | in-process s | target | peak RSS | status |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for case in cases:
        res = measure(case, args.repeat, timeout=max(120.0, 4 * case.target_s))
        took = res.get("seconds" if case.inside else "wall_s", float("inf"))
        ok = "error" not in res and took <= case.target_s and res.get("peak_rss", 0) < 4e9
        status = "ok" if ok else res.get("error", "MISSED")
        inside = f"{res['seconds']:.2f}" if "seconds" in res else "-"
        print(f"| {case.label} | {res.get('wall_s', float('nan')):.2f} | "
              f"{res.get('cpu_s', float('nan')):.2f} | {inside} | < {case.target_s:g} s | "
              f"{res.get('peak_rss', 0) / 2**20:.0f} MiB | {status} |", flush=True)  # fmt: skip
        rows.append({"group": case.group, "case": case.label, "target_s": case.target_s, **res})
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nload average after: {load}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
