"""Do two calibrations agree? The reproduction rule of docs/validation.md, per curve.

Two profiles (``commsim calibrate -o``) agree on a curve when they have as many pieces and every
parameter's 95 % intervals overlap (:meth:`commsim.profiles.FitIntervals.agrees`); a profile
written without intervals (``calibrate`` before resampling) cannot be compared.

Usage::

    python benchmarks/compare_profiles.py p1.toml p2.toml          # a table
    python benchmarks/compare_profiles.py p1.toml p2.toml --json   # the same as JSON
"""

from __future__ import annotations

import argparse
import json
import sys

from commsim.bench.calibrate import SUITES
from commsim.profiles import load_profile

#: the fitted curves of an MPI profile (the suite's kinds less the two that are not curves)
CURVES = tuple(k for k in SUITES["mpi-processes"].kinds if k not in ("overhead", "call"))


def compare(first: str, second: str) -> list[dict]:
    """Per curve both profiles have: pieces, whether they agree, and each fit's status."""
    a, b = load_profile(first), load_profile(second)
    rows = []
    for name in CURVES:
        ca, cb = a.curves.get(name), b.curves.get(name)
        if ca is None or cb is None:
            continue
        ia, ib = ca.intervals, cb.intervals
        if ia is None or ib is None:
            rows.append({"curve": name, "agree": None, "why": "a profile has no intervals"})
            continue
        rows.append(
            {
                "curve": name,
                "pieces": [len(ia.support), len(ib.support)],
                "agree": ia.agrees(ib),
                "status": [ia.status, ib.status],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("first", help="a profile TOML (commsim calibrate -o)")
    ap.add_argument("second", help="another profile TOML")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    try:
        rows = compare(args.first, args.second)
    except Exception as e:  # a missing or malformed file: one line
        print(f"compare_profiles: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("| curve | pieces | intervals overlap | status |")
    print("|---|---|---|---|")
    for r in rows:
        if r["agree"] is None:
            print(f"| {r['curve']} | - | - | {r['why']} |")
            continue
        pieces = " / ".join(map(str, r["pieces"]))
        print(f"| {r['curve']} | {pieces} | {'yes' if r['agree'] else 'no'} | "
              f"{' / '.join(r['status'])} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
