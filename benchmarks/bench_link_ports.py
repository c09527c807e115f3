"""The link-port rule (issues #19 item 4 and #25): predictions with ``port_rule="link"`` beside
the default ``"channel"`` where a host has several links.

* hierarchical allreduce on ``dgx-h100:16`` and ``dgx-h100:128`` (128 and 1,024 GPUs) at 1 GiB, ``pipeline`` K = 1, 2, 4, 8
  (bottleneck), with CPU and wall seconds per prediction;
* ``packed_trees`` allgather at 1 GiB on the DGX-1 subsets without an NVLink ring
  (``{0,1,2,4}``, ``0-4``) against their cut bound, bottleneck and flow, ``segments`` 1 to 8
  (the command line's rule marked);
* ``torus_multiport`` and ``packed_trees`` (allgather, allreduce) on ``torus:4x4x4`` with 45 GB/s
  links at 1 GiB, bottleneck, against the injection bound.

Run: ``PYTHONPATH=. python benchmarks/bench_link_ports.py [--quick]`` (``--quick``: K = 1, 2
only, no flow). Results: docs/benchmarks.md, "Link ports".
"""

from __future__ import annotations

import argparse
import time

import commsim
from commsim._cluster_model import cluster_model
from commsim.algorithms.packed_trees import format_trees, suggested_segments
from commsim.clusters import cluster
from commsim.models import Topology
from commsim.topology import pack_trees, torus

GIB = 2**30
RULES = ("channel", "link")


def _timed(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def hierarchical_rows(ks, spec: str) -> None:
    c = cluster(spec)
    print(f"{spec} ({c.ngpus} GPUs)")
    print("| K | rule | time ms | busbw GB/s | CPU s | wall s |")
    print("|---|---|---|---|---|---|")
    for k in ks:
        params = {"ranks_per_node": 8} | ({"pipeline": k} if k > 1 else {})
        s = commsim.build("allreduce", "hierarchical", nranks=c.ngpus, **params)
        for rule in RULES:
            m = cluster_model(c, port_rule=rule)
            pred, cpu, wall = _timed(lambda m=m, s=s: m.predict(s, GIB))
            print(f"| {k} | {rule} | {pred.time * 1e3:.3f} | {pred.busbw / 1e9:.1f} | "
                  f"{cpu:.1f} | {wall:.1f} |", flush=True)  # fmt: skip


def dgx_rows(modes) -> None:
    print(
        "| GPUs | contention | segments | channel GB/s | link GB/s | cut bound GB/s | link/bound |"
    )
    print("|---|---|---|---|---|---|---|")
    for spec in ("dgx1-v100:0,1,2,4:nvlink", "dgx1-v100:0-4:nvlink"):
        c = cluster(spec)
        pk = pack_trees(c.graph, range(c.ngpus))
        rule_seg = suggested_segments(pk.trees, c.ngpus)
        bound = pk.bound * c.ngpus
        for mode in modes:
            for seg in (1, 2, 3, 4, 8):
                s = commsim.build("allgather", "packed_trees", nranks=c.ngpus,
                                  trees=format_trees(pk.trees), segments=seg)  # fmt: skip
                a, b = (GIB / cluster_model(c, contention=mode, port_rule=r).predict(s, GIB).time
                        for r in RULES)  # fmt: skip
                mark = " (rule)" if seg == rule_seg else ""
                print(f"| {spec} | {mode} | {seg}{mark} | {a / 1e9:.1f} | {b / 1e9:.1f} | "
                      f"{bound / 1e9:.1f} | {100 * b / bound:.1f} % |", flush=True)  # fmt: skip


def torus_rows() -> None:
    g = torus([4, 4, 4], bandwidth="45GB/s")
    pk = pack_trees(g, range(64))
    seg = suggested_segments(pk.trees, 64)
    print("| collective | algorithm | channel ms | link ms | injection bound ms |")
    print("|---|---|---|---|---|")
    for coll, factor in (("allgather", 63 / 64), ("allreduce", 2 * 63 / 64)):
        bound = factor * GIB / (6 * 45e9)
        for name, params in (("torus_multiport", {"dims": "4x4x4"}),
                             ("packed_trees", {"trees": format_trees(pk.trees), "segments": seg})):  # fmt: skip
            s = commsim.build(coll, name, nranks=64, **params)
            a, b = (Topology(g, port_rule=r).predict(s, GIB).time for r in RULES)
            print(f"| {coll} | {name} | {a * 1e3:.3f} | {b * 1e3:.3f} | {bound * 1e3:.3f} |",
                  flush=True)  # fmt: skip
    print(f"(packed_trees segments = {seg}, the command line's rule)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="K = 1, 2 only; no flow")
    args = ap.parse_args()
    torus_rows()
    dgx_rows(("bottleneck",) if args.quick else ("bottleneck", "flow"))
    for spec in ("dgx-h100:16", "dgx-h100:128"):
        hierarchical_rows((1, 2) if args.quick else (1, 2, 4, 8), spec)


if __name__ == "__main__":
    main()
