"""Packed trees (issue #25): packing time, rate against the cut bound, and predicted times.

Run ``python benchmarks/bench_packed_trees.py`` (``--quick`` skips the flow model on 64 ranks).
Prints one table row per case; ``docs/benchmarks.md`` ("Packed trees") holds a run.

* packing: :func:`commsim.topology.pack_trees` on DGX-1 GPU sets and on 64-host tori, wall and
  CPU seconds, trees, each root's rate as allgather algbw (``p · rate``), the cut bound, the gap;
* allgather at 1 GiB, ``packed_trees`` (the command line's ``segments`` rule) against
  ``packed_rings`` and ``torus_multiport``, bottleneck and flow;
* the 4x4x4 torus allreduce at 1 GiB (45 GB/s links, γ = 1/(100 GB/s)): ``torus_multiport`` as
  registered, with the receiver reducing while a message arrives (``reduction_overlap``, the
  collective library's documented option), and the injection bound.
"""

from __future__ import annotations

import argparse
import time

import commsim
from commsim.algorithms.packed_rings import format_rings
from commsim.algorithms.packed_trees import format_trees, suggested_segments
from commsim.clusters import cluster
from commsim.errors import ResourceError
from commsim.models import Topology
from commsim.topology import pack_rings, pack_trees, torus
from commsim.tuner import cluster_model

GIB = 2**30


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def _segments(packing) -> int:
    """The command line's rule (:func:`commsim.algorithms.packed_trees.suggested_segments`)."""
    return suggested_segments(packing.trees, len(packing.trees[0].parent))


def packing_rows(cases):
    print("| graph | hosts | wall s | CPU s | trees | rate·p GB/s | cut bound GB/s | gap |")
    print("|---|---|---|---|---|---|---|---|")
    out = {}
    for name, graph, h in cases:
        pk, wall, cpu = _timed(lambda g=graph, h=h: pack_trees(g, range(h)))
        out[name] = pk
        print(f"| {name} | {h} | {wall:.2f} | {cpu:.2f} | {len(pk.trees)} | "
              f"{pk.rate * h / 1e9:.1f} | {pk.bound * h / 1e9:.1f} | {100 * pk.gap:.2f} % |")  # fmt: skip
    return out


def dgx_rows(specs, packings):
    print("| GPUs | contention | segments | packed_trees GB/s | packed_rings GB/s | cut bound |")
    print("|---|---|---|---|---|---|")
    for spec in specs:
        c = cluster(spec)
        pk = packings[spec]
        seg = _segments(pk)
        trees = commsim.build("allgather", "packed_trees", nranks=c.ngpus,
                              trees=format_trees(pk.trees), segments=seg)  # fmt: skip
        rings = format_rings(pack_rings(c.graph, range(c.ngpus))) or "auto"
        ring = commsim.build("allgather", "packed_rings", nranks=c.ngpus, rings=rings)
        for mode in ("bottleneck", "flow"):
            m = cluster_model(c, contention=mode)
            try:
                a, b = (GIB / m.predict(s, GIB).time / 1e9 for s in (trees, ring))
            except ResourceError as e:  # flow's effort limit (commsim.models._flow)
                print(f"| {spec} | {mode} | {seg} | refused: {e} | - | - |")
                continue
            print(f"| {spec} | {mode} | {seg} | {a:.1f} | {b:.1f}{'' if rings != 'auto' else ' (no ring)'}"
                  f" | {pk.bound * c.ngpus / 1e9:.1f} |")  # fmt: skip


def torus_rows(pk, quick):
    g = torus([4, 4, 4], bandwidth="45GB/s")
    seg = _segments(pk)
    trees = commsim.build("allgather", "packed_trees", nranks=64, trees=format_trees(pk.trees),
                          segments=seg)  # fmt: skip
    multi = commsim.build("allgather", "torus_multiport", nranks=64, dims="4x4x4")
    print("| case | contention | time ms | algbw GB/s |")
    print("|---|---|---|---|")
    for name, s in ((f"allgather packed_trees (segments={seg})", trees),
                    ("allgather torus_multiport", multi)):  # fmt: skip
        for mode in ("bottleneck",) if quick else ("bottleneck", "flow"):
            try:
                t = Topology(g, contention=mode).predict(s, GIB).time
            except ResourceError as e:  # flow's effort limit (commsim.models._flow)
                print(f"| {name} | {mode} | refused: {e} | - |")
                continue
            print(f"| {name} | {mode} | {t * 1e3:.3f} | {GIB / t / 1e9:.1f} |")
    ar = commsim.build("allreduce", "torus_multiport", nranks=64, dims="4x4x4")
    bound = 2 * 63 / 64 * GIB / (6 * 45e9)
    for overlap in (False, True):
        t = Topology(g, contention="bottleneck", reduction_overlap=overlap).predict(ar, GIB).time
        print(
            f"| allreduce torus_multiport, reduction_overlap={overlap} | bottleneck | "
            f"{t * 1e3:.3f} | {t / bound:.3f} x the injection bound {bound * 1e3:.3f} ms |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="no flow model on 64 ranks")
    args = ap.parse_args()
    specs = ["dgx1-v100:all:nvlink", "dgx1-v100:0-3:nvlink", "dgx1-v100:0,1,2,4:nvlink",
             "dgx1-v100:0-4:nvlink"]  # fmt: skip
    cases = [(s, cluster(s).graph, cluster(s).ngpus) for s in specs]
    cases += [("torus:4x4x4,45GB/s", torus([4, 4, 4], bandwidth="45GB/s"), 64),
              ("torus:8x8", torus([8, 8]), 64)]  # fmt: skip
    packings = packing_rows(cases)
    dgx_rows(specs, packings)
    torus_rows(packings["torus:4x4x4,45GB/s"], args.quick)


if __name__ == "__main__":
    main()
