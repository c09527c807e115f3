"""commsim's ``flow`` contention against SimGrid on fat trees routed d-mod-k (issue #19, part 7).

The same sets of concurrent messages are timed by both: one step of a ring (host ``i`` to
``i + 1``) and the exchanges of Rabenseifner's recursive halving (host ``i`` with ``i XOR d``,
``d = 32, 16, ..., 1``, the buffer halving each step), plus a shift permutation by a whole leaf
(``i`` to ``i + 16``, the case d-mod-k makes contention-free), at several buffer sizes, on a
64-host two-level fat tree of 16 hosts per leaf with 16 spines (1:1) and with 4 spines (4:1).
Every link has the same bandwidth and latency.

* commsim: ``fat_tree(64, hosts_per_leaf=16, spines=S, oversubscription=16 / S,
  routing="dmodk")`` (every leaf-spine link of one host's bandwidth) with
  ``Topology(..., contention="flow", gamma=0)``; the set is a one-step schedule.
* SimGrid (4.1, its Python bindings): a FatTreeZone ``2;16,4;1,S;1,1`` (SimGrid routes fat
  trees d-mod-k itself), split-duplex links, one ``Comm.sendto_async`` per message (host to
  host, the s4u communication that Mailbox put/get also create, without the actors), all
  started at once; the time is when the last one ends. The network model is ``raw``
  (``time = latency + size / bandwidth`` with max-min fair sharing: latency and bandwidth
  factors 1, no TCP window bound, no cross traffic, weight-S 0), so what is compared is the
  sharing model, not TCP corrections.

The last column routes commsim by its ECMP hash instead (``routing="ecmp"``, the generator's
default), against the same SimGrid times: what the routing alone changes.

SimGrid runs under its own interpreter (it is not a dependency of commsim): by default Debian's
``/usr/bin/python3`` with ``python3-simgrid`` (3.32, ``--model CM02``, the default); with
SimGrid 4.x from PyPI in a virtual environment, ``--model raw``::

    python benchmarks/compare_simgrid.py                       # Debian's python3-simgrid
    python benchmarks/compare_simgrid.py --simgrid-python /tmp/sg/bin/python --model raw

The script calls itself with ``--simgrid-side`` under that interpreter (which imports only
SimGrid) and prints a markdown table of both times and the relative error.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys

N, H = 64, 16  # hosts, hosts per leaf
BANDWIDTH = 25e9  # bytes/s per link and direction
LATENCY = 1e-6  # s per link
SIZES = (64 * 2**10, 2**20, 16 * 2**20, 256 * 2**20)  # the collective's buffer
TREES = {"1:1": 16, "4:1": 4}  # spines
MODEL = "CM02"  # with the factors of engine_flags: 3.3x's plain max-min model; "raw" on 4.x


def message_sets(size: int) -> list[tuple[str, list[int], list[int], float]]:
    """``(label, src, dst, bytes per message)`` of each set for a buffer of ``size`` bytes."""
    hosts = list(range(N))
    sets = [("ring step", hosts, [(i + 1) % N for i in hosts], size / N)]
    d, part = N // 2, size / 2
    while d >= 1:
        sets.append((f"rabenseifner d={d}", hosts, [i ^ d for i in hosts], part))
        d, part = d // 2, part / 2
    sets.append(("shift by a leaf", hosts, [(i + H) % N for i in hosts], size / N))
    perm = hosts[:]
    random.Random(0).shuffle(perm)  # the same in both interpreters: uneven sharing, staggered ends
    sets.append(("random permutation", hosts, perm, size / N))
    return sets


# -- the SimGrid side (runs under the SimGrid interpreter, imports nothing of commsim) ------------
def engine_flags(model: str) -> list[str]:
    """SimGrid's configuration for a comparison of sharing models, not of TCP corrections:
    ``model`` (``raw`` on 4.x, ``CM02`` on 3.3x) with latency and bandwidth factors 1, no TCP
    window bound, no cross traffic on the reverse links, weight-S 0."""
    return [
        f"--cfg=network/model:{model}",
        "--cfg=network/latency-factor:1",
        "--cfg=network/bandwidth-factor:1",
        "--cfg=network/TCP-gamma:1e30",  # no window bound (4.1's raw model: 0, the same)
        "--cfg=network/crosstraffic:0",
        "--cfg=network/weight-S:0",
        "--log=root.thres:critical",
    ]


def simgrid_side(spines: int, model: str) -> None:
    import simgrid

    engine = simgrid.Engine(["compare_simgrid", *engine_flags(model)])
    policy = simgrid.Link.SharingPolicy.SPLITDUPLEX
    if hasattr(simgrid.NetZone, "add_netzone_fatTree"):  # SimGrid >= 4.0
        root = engine.netzone_root
        zone = root.add_netzone_fatTree(
            "ft", 2, [H, N // H], [1, spines], [1, 1], BANDWIDTH, LATENCY, policy
        )
        zone.set_host_cb(lambda z, coord, ident: z.create_host(f"h{ident}", 1e9).seal())
        zone.seal()
        root.seal()
    else:  # SimGrid 3.3x: create_fatTree_zone with callbacks
        root = simgrid.NetZone.create_full_zone("root")

        def host(zone, coord, ident):
            return zone.create_host(f"h{ident}", 1e9).seal().netpoint, None

        params = simgrid.FatTreeParams(2, [H, N // H], [1, spines], [1, 1])
        callbacks = simgrid.ClusterCallbacks(host, None, None)
        simgrid.NetZone.create_fatTree_zone(
            "ft", root, params, callbacks, BANDWIDTH, LATENCY, policy
        ).seal()
        root.seal()
    hosts = [simgrid.Host.by_name(f"h{i}") for i in range(N)]
    results = []

    def controller():
        for size in SIZES:
            for label, src, dst, nbytes in message_sets(size):
                start = engine.clock
                comms = [
                    simgrid.Comm.sendto_async(hosts[a], hosts[b], round(nbytes))
                    for a, b in zip(src, dst, strict=True)
                ]
                for c in comms:
                    c.wait()
                results.append({"size": size, "set": label, "time": engine.clock - start})

    simgrid.Actor.create("controller", hosts[0], controller)
    engine.run()
    print(json.dumps(results))


# -- the commsim side ------------------------------------------------------------------------------
def commsim_times(spines: int, routing: str) -> list[dict]:
    import numpy as np

    from commsim import Schedule, Step
    from commsim.models import Topology
    from commsim.topology import fat_tree

    graph = fat_tree(N, hosts_per_leaf=H, spines=spines, oversubscription=H / spines,
                     bandwidth=BANDWIDTH, latency=LATENCY, routing=routing)  # fmt: skip
    model = Topology(graph, contention="flow", gamma=0)
    out = []
    for size in SIZES:
        for label, src, dst, nbytes in message_sets(size):
            step = Step.make(np.array(src), np.array(dst), 0, 0)
            s = Schedule.from_steps([step], collective="allreduce", nranks=N, slot_units=[1])
            out.append({"size": size, "set": label, "time": model.predict(s, nbytes).time})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--simgrid-python", default="/usr/bin/python3",
                    help="an interpreter with simgrid installed")  # fmt: skip
    ap.add_argument("--model", default=MODEL, help="SimGrid's network/model (raw, or CM02)")
    ap.add_argument("--simgrid-side", type=int, metavar="SPINES", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.simgrid_side is not None:
        simgrid_side(args.simgrid_side, args.model)
        return 0
    print("| tree | buffer | message set | SimGrid (s) | commsim flow, d-mod-k (s) | error | "
          "error with ECMP |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    for tree, spines in TREES.items():
        run = subprocess.run(
            [args.simgrid_python, __file__, "--simgrid-side", str(spines), "--model", args.model],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        theirs = json.loads(run.stdout.strip().splitlines()[-1])
        ours, hashed = commsim_times(spines, "dmodk"), commsim_times(spines, "ecmp")
        for a, b, c in zip(theirs, ours, hashed, strict=True):
            err, err_ecmp = b["time"] / a["time"] - 1, c["time"] / a["time"] - 1
            worst = max(worst, abs(err))
            size = f"{a['size'] / 2**20:g} MiB"
            print(f"| {tree} | {size} | {a['set']} | {a['time']:.4e} | {b['time']:.4e} | "
                  f"{100 * err:+.2f} % | {100 * err_ecmp:+.1f} % |")  # fmt: skip
    print(f"\nlargest |error| with d-mod-k: {100 * worst:.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
