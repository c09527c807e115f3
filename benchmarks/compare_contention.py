"""How far the static contention modes are from ``flow`` (the reference), per schedule and topology.

For each (topology, algorithm) it predicts the completion time under ``none``, ``bottleneck``,
``maxmin`` and ``flow`` at a few sizes and prints each static mode's time over flow's
(1.00 = equal; below 1 = the mode is optimistic, above = pessimistic). The numbers in
``docs/sharp-bits.md`` ("Contention modes") come from this script.

Usage::

    python benchmarks/compare_contention.py            # markdown table on stdout
    python benchmarks/compare_contention.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

import commsim
from commsim.models import Topology
from commsim.topology import dragonfly, fat_tree, ring, torus

SIZES = np.array([2.0**16, 2.0**20, 2.0**26])  # 64 KiB, 1 MiB, 64 MiB
MODES = ("none", "bottleneck", "maxmin")
TOPOLOGIES = {
    "ring(16)": (lambda: ring(16), 16),
    "torus(8x8)": (lambda: torus((8, 8)), 64),
    "fat_tree(64, 16/leaf, 4:1)": (
        lambda: fat_tree(64, hosts_per_leaf=16, oversubscription=4),
        64,
    ),
    "dragonfly(9,4,2,2)": (lambda: dragonfly(9, 4, 2, 2), 72),
}
ALGORITHMS = [
    ("allreduce", "ring", {}),
    ("allreduce", "recursive_doubling", {}),
    ("allreduce", "rabenseifner", {}),
    ("allreduce", "hierarchical", {"ranks_per_node": 8}),
    ("alltoall", "pairwise", {}),
    ("allgather", "bruck", {}),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", help="also write the results to this JSON file")
    args = ap.parse_args()
    sizes = " / ".join(("64 KiB", "1 MiB", "64 MiB"))
    print(f"time of each mode / time of flow, at {sizes} (gamma = 1/(100 GB/s))\n")
    print("| topology | p | algorithm | none | bottleneck | maxmin | flow time at 64 MiB |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for label, (make, p) in TOPOLOGIES.items():
        graph = make()
        for collective, name, kw in ALGORITHMS:
            if name == "hierarchical" and p % kw["ranks_per_node"]:
                continue
            s = commsim.build(collective, name, nranks=p, **kw)
            flow = Topology(graph, contention="flow").predict(s, SIZES).time
            ratios = {m: Topology(graph, contention=m).predict(s, SIZES).time / flow for m in MODES}
            cells = [" / ".join(f"{x:.2f}" for x in ratios[m]) for m in MODES]
            print(f"| {label} | {p} | {collective}/{name} | {' | '.join(cells)} | "
                  f"{flow[-1] * 1e3:.3f} ms |")  # fmt: skip
            rows.append(
                {"topology": label, "p": p, "algorithm": f"{collective}/{name}",
                 "flow_s": flow.tolist(), **{m: r.tolist() for m, r in ratios.items()}}
            )  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
