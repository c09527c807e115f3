"""Multi-port ``flow`` against SimGrid: a 4×4×4 torus and the DGX-1's NVLinks (issue #25).

Each host sends to *several* neighbours at once (non-blocking sends on distinct links), and
both simulators time the same set of concurrent messages:

* ``torus(4, 4, 4)``, 45 GB/s per link and direction (Cloud TPU v4's ICI, the ``tpu-v4``
  preset), 1 µs per link, wrap-around, dimension-order routes:

  - **torus_multiport step 0**: the row's first step, every chip to its ±x, ±y, ±z
    neighbours (six messages on six links);
  - **diagonals**: every chip to ``(x±1, y±1)``: two 2-hop messages on every x link;
  - **neighbours + diagonal**: the six neighbours and ``(x+1, y+1)``: a 1-hop and a 2-hop
    message share every +x and +y link;
  - **shift by 2 in x**: every chip to ``x+2``, half-way round, each route's direction
    chosen by commsim's hash: uneven sharing;

* the DGX-1 (V100) hybrid cube-mesh, NVLink only (the ``dgx1-v100:all:nvlink`` preset:
  25 GB/s per NVLink and direction, a doubled pair one 50 GB/s link, 0.7 µs):

  - **NVLink neighbours**: every GPU to each GPU it has an NVLink to;
  - **packed rings step 0**: the six rings of :func:`commsim.topology.pack_rings` (every
    NVLink busy both ways; :func:`commsim.topology.pack_trees` packs the same rings here, so
    it is also packed_trees' step 0);
  - **all to all**: every GPU to the seven others at once, 1- and 2-hop routes sharing links;

* the DGX-1 GPUs 0-4, NVLink only (Blink's partial allocation, where trees branch):
  **packed trees step 0**, every message of the row's first step at once.

Every message carries the same number of bytes (1 KiB: latency-bound, to 256 MiB:
bandwidth-bound).

* commsim: a one-step schedule with every message on a channel of its own (IR rule 6: all
  start at once), ``Topology(graph, contention="flow", gamma=0)`` under each flow rule: the
  default ``fair`` (bytes from a message's start, equal shares, latency after the last byte)
  and ``cm02`` (SimGrid's own rule: latency first, shares weighted by 1 / path latency); its
  timeline gives each message's end and route.
* SimGrid (3.32's Python bindings, ``python3-simgrid``): a Full zone with one host per commsim
  host and **one link per directed commsim link** (commsim's undirected edge is two directed
  links, each with the full bandwidth: SimGrid's split-duplex), and for every pair the route
  commsim took, given with ``add_route`` (so routing is not what is compared). Every message
  is one ``Comm.sendto_async``, all started at once; each one's ``finish_time`` is read. The
  network model is :func:`compare_simgrid.engine_flags`' (CM02 with factors 1, no TCP window,
  no cross traffic, weight-S 0).

Printed: per set and size, the times of the last message (the step's time) by SimGrid and
by commsim under each rule, their relative errors, and the largest relative error of one
message's end. Run::

    python benchmarks/compare_simgrid_multiport.py --simgrid-python /usr/bin/python3

The script calls itself with ``--simgrid-side`` under that interpreter (which imports only
SimGrid and this directory's ``compare_simgrid``, no numpy), feeding it the networks and
messages as JSON on stdin.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

KiB, MiB = 2**10, 2**20
SIZES = (KiB, 64 * KiB, MiB, 16 * MiB, 256 * MiB)  # bytes per message
TORUS_BANDWIDTH = 45e9  # bytes/s per link and direction: Cloud TPU v4 ICI (tpu-v4 preset)
TORUS_LATENCY = 1e-6  # s per link (the presets' ICI latency)


# -- the message sets (commsim side) ---------------------------------------------------------------
# numpy and commsim are imported inside the commsim side's functions: the SimGrid side runs this
# file under an interpreter that has neither (Debian's /usr/bin/python3).
def _torus_shift(dx: int, dy: int, dz: int) -> tuple:
    """Every chip of the 4×4×4 torus to the chip ``(x+dx, y+dy, z+dz)``: ``(src, dst)``."""
    import numpy as np

    r = np.arange(64)
    x, y, z = r // 16, (r // 4) % 4, r % 4
    return r, ((x + dx) % 4) * 16 + ((y + dy) % 4) * 4 + (z + dz) % 4


def _cat(*pairs: tuple) -> tuple:
    """The messages of several ``(src, dst)`` sets as one set."""
    import numpy as np

    return np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs])


def _first_step(schedule) -> tuple:
    """The messages of a schedule's step 0: one per distinct ``(src, dst, channel)``."""
    import numpy as np

    st = schedule.step(0)
    keys = np.unique(np.stack([st.src, st.dst, st.channel], axis=1), axis=0)
    return keys[:, 0], keys[:, 1]


def networks() -> list[tuple[str, object, list[tuple[str, object, object]]]]:
    """``(network label, graph, [(set label, src, dst), ...])`` for every network compared."""
    import commsim
    from commsim.algorithms.packed_rings import format_rings
    from commsim.algorithms.packed_trees import format_trees
    from commsim.clusters import cluster
    from commsim.topology import pack_rings, pack_trees, torus

    g = torus((4, 4, 4), bandwidth=TORUS_BANDWIDTH, latency=TORUS_LATENCY)
    six = [_torus_shift(*d) for d in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1),
                                      (0, 0, -1))]  # fmt: skip
    diag = [_torus_shift(dx, dy, 0) for dx in (1, -1) for dy in (1, -1)]
    multiport = commsim.build("allreduce", "torus_multiport", nranks=64, dims="4x4x4")
    torus_sets = [
        ("torus_multiport step 0", *_first_step(multiport)),
        ("diagonals (x±1, y±1)", *_cat(*diag)),
        ("neighbours + diagonal", *_cat(*six, _torus_shift(1, 1, 0))),
        ("shift by 2 in x", *_torus_shift(2, 0, 0)),
    ]
    dgx = cluster("dgx1-v100:all:nvlink").graph
    ends = [(a, b) for a, b in dgx.edges] + [(b, a) for a, b in dgx.edges]
    rings = commsim.build("allgather", "packed_rings", nranks=8,
                          rings=format_rings(pack_rings(dgx, range(8))))  # fmt: skip
    every = [(a, b) for a in range(8) for b in range(8) if a != b]
    dgx_sets = [
        ("NVLink neighbours", *map(list, zip(*ends, strict=True))),
        ("packed rings step 0", *_first_step(rings)),
        ("all to all", *map(list, zip(*every, strict=True))),
    ]
    part = cluster("dgx1-v100:0-4:nvlink").graph
    trees = commsim.build("allgather", "packed_trees", nranks=5,
                          trees=format_trees(pack_trees(part, range(5)).trees))  # fmt: skip
    return [
        ("torus 4x4x4", g, torus_sets),
        ("DGX-1", dgx, dgx_sets),
        ("DGX-1 GPUs 0-4", part, [("packed trees step 0", *_first_step(trees))]),
    ]


def one_step(src, dst, nranks: int):
    """A one-step schedule moving one slot from ``src[i]`` to ``dst[i]`` on channel ``i``: every
    message its own port, so all start at time 0 (IR rule 6)."""
    import numpy as np

    from commsim import Schedule, Step

    src, dst = np.asarray(src), np.asarray(dst)
    step = Step.make(src, dst, 0, 0, channel=np.arange(len(src)))
    return Schedule.from_steps([step], collective="allreduce", nranks=nranks, slot_units=[1],
                               nchannels=len(src))  # fmt: skip


def commsim_side(graph, sets, sizes=SIZES, flow_rule: str = "fair") -> tuple[dict, list[dict]]:
    """commsim's times and the SimGrid side's input: the network's directed links and, per set
    and size (bytes per message), every message with its route (link ids) as commsim routed
    it. ``sets`` are ``(label, src, dst)``; commsim's rows carry the step's time and each
    message's end, in the order of the platform's messages, under ``flow_rule``."""
    from commsim.models import Topology

    model = Topology(graph, contention="flow", gamma=0, flow_rule=flow_rule)
    net = model.network
    platform = {"nhosts": net.nhosts, "bandwidth": net.bandwidth.tolist(),
                "latency": net.latency.tolist(), "cases": []}  # fmt: skip
    ours = []
    for label, src, dst in sets:
        s = one_step(src, dst, net.nhosts)
        for size in sizes:
            tl = model.timeline(s, size)
            routes = [
                tl.links[tl.indptr[m] : tl.indptr[m + 1]].tolist() for m in range(len(tl.src))
            ]
            msgs = list(zip(tl.src.tolist(), tl.dst.tolist(), routes, strict=True))
            platform["cases"].append({"set": label, "size": size, "messages": msgs})
            ours.append({"set": label, "size": size, "time": model.predict(s, size).time,
                         "ends": (tl.end - tl.start).tolist()})  # fmt: skip
    return platform, ours


# -- the SimGrid side (runs under the SimGrid interpreter, imports nothing of commsim) ------------
def simgrid_side(model: str, optim: str = "Lazy") -> None:
    """Read a platform (``commsim_side``'s) on stdin, print each case's message end times;
    ``optim``: SimGrid's rate update, ``Lazy`` (its default) or ``Full``."""
    import simgrid
    from compare_simgrid import engine_flags  # this script's directory is sys.path[0]

    plat = json.load(sys.stdin)
    flags = [*engine_flags(model), f"--cfg=network/optim:{optim}"]
    engine = simgrid.Engine(["compare_simgrid_multiport", *flags])
    root = simgrid.NetZone.create_full_zone("root")
    hosts = [root.create_host(f"h{i}", 1e9).seal() for i in range(plat["nhosts"])]
    links = [
        root.create_link(f"l{k}", bw).set_latency(lat).seal()
        for k, (bw, lat) in enumerate(zip(plat["bandwidth"], plat["latency"], strict=True))
    ]
    routed = {}
    for case in plat["cases"]:
        for a, b, route in case["messages"]:
            if routed.setdefault((a, b), route) != route:
                raise SystemExit(f"two routes for {a} -> {b}: {routed[(a, b)]} and {route}")
    for (a, b), route in routed.items():
        path = [simgrid.LinkInRoute(links[k]) for k in route]
        root.add_route(hosts[a].netpoint, hosts[b].netpoint, None, None, path, False)
    root.seal()
    out = []

    def controller():
        for case in plat["cases"]:
            start = engine.clock
            comms = [simgrid.Comm.sendto_async(hosts[a], hosts[b], case["size"])
                     for a, b, _ in case["messages"]]  # fmt: skip
            simgrid.Comm.wait_all(comms)
            out.append([c.finish_time - start for c in comms])

    simgrid.Actor.create("controller", hosts[0], controller)
    engine.run()
    print(json.dumps(out))


def run_simgrid(
    simgrid_python: str, platform: dict, model: str = "CM02", optim: str = "Lazy"
) -> list[list[float]]:
    """Each case's message end times (seconds after the case's start), from SimGrid run under
    ``simgrid_python`` on ``platform`` (:func:`commsim_side`'s) with rate updates ``optim``."""
    run = subprocess.run(
        [simgrid_python, __file__, "--simgrid-side", "--model", model, "--optim", optim],
        input=json.dumps(platform), capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(run.stdout.strip().splitlines()[-1])


# -- the comparison --------------------------------------------------------------------------------
def _worst(ours: list[float], theirs: list[float]) -> float:
    """The largest relative difference of one message's end."""
    return max(abs(a / b - 1) for a, b in zip(ours, theirs, strict=True))


def compare(simgrid_python: str, model: str) -> list[dict]:
    """Every network's sets at every size, timed by SimGrid (its default lazy rate updates, and
    full ones) and by commsim under each flow rule: one row per case."""
    rows = []
    for name, graph, sets in networks():
        platform, fair = commsim_side(graph, sets)
        _, cm02 = commsim_side(graph, sets, flow_rule="cm02")
        lazy = run_simgrid(simgrid_python, platform, model)
        full = run_simgrid(simgrid_python, platform, model, optim="Full")
        for case, a, b, ends, ends_full in zip(platform["cases"], fair, cm02, lazy, full,
                                               strict=True):  # fmt: skip
            rows.append({
                "network": name, "set": case["set"], "size": case["size"],
                "messages": len(ends), "simgrid": max(ends), "simgrid_full": max(ends_full),
                "fair": a["time"], "fair_worst_message": _worst(a["ends"], ends),
                "cm02": b["time"], "cm02_worst_message": _worst(b["ends"], ends),
                "cm02_worst_message_full": _worst(b["ends"], ends_full),
            })  # fmt: skip
    return rows


def _size(b: int) -> str:
    return f"{b // MiB} MiB" if b >= MiB else f"{b // KiB} KiB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--simgrid-python", default="/usr/bin/python3",
                    help="an interpreter with simgrid installed (Debian: python3-simgrid)")  # fmt: skip
    ap.add_argument("--model", default="CM02", help="SimGrid's network/model (CM02, or raw on 4.x)")
    ap.add_argument("--optim", default="Lazy", help=argparse.SUPPRESS)  # the SimGrid side's
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--simgrid-side", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.simgrid_side:
        simgrid_side(args.model, args.optim)
        return 0
    rows = compare(args.simgrid_python, args.model)
    print("| network | message set | messages | bytes each | SimGrid (s) | flow, fair (s) | "
          "error | worst message | flow, cm02 (s) | error | worst message | same, Full |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cells = [f"{r[rule]:.4e} | {100 * (r[rule] / r['simgrid'] - 1):+.2f} % | "
                 f"{100 * r[f'{rule}_worst_message']:.1f} %" for rule in ("fair", "cm02")]  # fmt: skip
        print(f"| {r['network']} | {r['set']} | {r['messages']} | {_size(r['size'])} | "
              f"{r['simgrid']:.4e} | {' | '.join(cells)} | "
              f"{100 * r['cm02_worst_message_full']:.1f} % |")  # fmt: skip
    for rule in ("fair", "cm02"):
        worst = max(abs(r[rule] / r["simgrid"] - 1) for r in rows)
        message = max(r[f"{rule}_worst_message"] for r in rows)
        print(
            f"flow_rule={rule}: largest |error| of a step's time {100 * worst:.2f} %, "
            f"of one message's end {100 * message:.1f} % (SimGrid's lazy updates)"
        )
    full = max(abs(r["cm02"] / r["simgrid_full"] - 1) for r in rows)
    message = max(r["cm02_worst_message_full"] for r in rows)
    print(
        f"flow_rule=cm02 against SimGrid's full updates (network/optim:Full): step "
        f"{100 * full:.2e} %, one message's end {100 * message:.2e} %"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
