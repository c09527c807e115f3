"""Run docs/validation.md's reproduction commands several times and summarize them.

Each *pair* is the documented command: two ``commsim calibrate -p 2`` back to back, then
``commsim validate -c allreduce -p 2 --backend mpi4py`` with each profile. This script runs
``--pairs`` of them (so ``2 × pairs`` calibrations and validations), then prints, per
algorithm, every run's median |error| with its 95 % interval, the range over the runs, and
whether any two runs' intervals fail to overlap, and the 95 % prediction interval for the next
run's median |error| from these runs (Student's t: mean ± t(0.975, n−1) · s · √(1 + 1/n), as for
a new observation from a normal sample); and per curve, how many pairs of profiles
agree by :meth:`commsim.profiles.FitIntervals.agrees` (``benchmarks/compare_profiles.py``).
Run it on an idle machine (nothing else running: ``uptime`` below 1 on two cores)::

    python benchmarks/reproduce_validation.py --pairs 3 --out repro/
    python benchmarks/reproduce_validation.py --pairs 3 --out repro/ --json

It takes about 70 s per pair on a 2-vCPU virtual machine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

ALGORITHMS = "ring,rabenseifner,recursive_doubling"
#: Student's t, 97.5 % quantile, by degrees of freedom (any statistics table)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}  # fmt: skip


def prediction_interval(values: list[float]) -> tuple[float, float]:
    """95 % prediction interval for one more run, from ``values`` (at least 2).

    Examples:
        >>> [round(x, 3) for x in prediction_interval([1.0, 2.0, 3.0])]
        [-2.969, 6.969]
    """
    n = len(values)
    mean = sum(values) / n
    s = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5
    t = T975[max(k for k in T975 if k <= n - 1)]  # the next smaller df: a wider interval
    half = t * s * (1 + 1 / n) ** 0.5
    return mean - half, mean + half


SIZES = "64KiB..64MiB"


def _commsim(*args: str) -> dict:
    cmd = [sys.executable, "-m", "commsim", *args, "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def _validate(profile: Path) -> dict:
    doc = _commsim(
        "validate", "-c", "allreduce", "-p", "2", "--backend", "mpi4py", "-a", ALGORITHMS,
        "-s", SIZES, "--profile", str(profile), "--timeout", "900",
    )  # fmt: skip
    return {
        row["algorithm"]: (row["median_abs_error"], *row["error_interval"])
        for row in doc["summary"]["algorithms"]
    }


def run(pairs: int, out: Path) -> dict:
    """Every calibration and validation of ``pairs`` pairs, and the comparisons."""
    sys.path.insert(0, str(Path(__file__).parent))
    from compare_profiles import compare

    out.mkdir(parents=True, exist_ok=True)
    profiles, errors = [], []
    for i in range(pairs):
        pair = [out / f"pair{i + 1}-p{j}.toml" for j in (1, 2)]
        for p in pair:
            _commsim("calibrate", "-p", "2", "-o", str(p))
        for p in pair:
            errors.append(_validate(p))
            print(f"{time.strftime('%H:%M:%S')} {p.name}: {errors[-1]}", file=sys.stderr)
        profiles += pair
    curves: dict[str, list[bool]] = {}
    for a, b in itertools.combinations(profiles, 2):
        for row in compare(str(a), str(b)):
            curves.setdefault(row["curve"], []).append(bool(row["agree"]))
    algorithms = {}
    for name in errors[0]:
        runs = [e[name] for e in errors]
        apart = [
            (i, j) for (i, a), (j, b) in itertools.combinations(enumerate(runs), 2)
            if a[1] > b[2] or b[1] > a[2]
        ]  # fmt: skip
        algorithms[name] = {
            "runs": runs,
            "range": [min(r[0] for r in runs), max(r[0] for r in runs)],
            "next_run_95": list(prediction_interval([r[0] for r in runs]))
            if len(runs) > 1
            else None,
            "pairs_of_runs_apart": len(apart),
            "pairs_of_runs": len(runs) * (len(runs) - 1) // 2,
        }
    return {
        "profiles": [str(p) for p in profiles],
        "algorithms": algorithms,
        "curves_agree": {k: [sum(v), len(v)] for k, v in curves.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pairs", type=int, default=2, help="calibrate-twice pairs (default: 2)")
    ap.add_argument("--out", type=Path, default=Path("repro"), help="where the profiles go")
    ap.add_argument("--json", action="store_true", help="the summary as JSON")
    args = ap.parse_args(argv)
    if args.pairs < 1:
        ap.error("--pairs must be >= 1")
    doc = run(args.pairs, args.out)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(
        "| algorithm | median abs error per run [95%] | range | pairs of runs apart | "
        "next run, 95% |"
    )
    print("|---|---|---|---|---|")
    for name, a in doc["algorithms"].items():
        cells = ", ".join(
            f"{100 * m:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]" for m, lo, hi in a["runs"]
        )
        lo, hi = a["range"]
        nxt = a["next_run_95"]
        pi = f"{100 * max(nxt[0], 0):.1f}–{100 * nxt[1]:.1f}%" if nxt else "-"
        print(
            f"| {name} | {cells} | {100 * lo:.1f}–{100 * hi:.1f}% | "
            f"{a['pairs_of_runs_apart']} of {a['pairs_of_runs']} | {pi} |"
        )
    print()
    print("| curve | pairs of profiles that agree |")
    print("|---|---|")
    for name, (ok, n) in doc["curves_agree"].items():
        print(f"| {name} | {ok} of {n} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
