"""Writes commsim's synthetic example logs (their headers say what their numbers follow).

Run from the repository root: python examples/nccl-tests/make_example_log.py
"""

from pathlib import Path

import numpy as np

SIZES = [8 * 2**k for k in range(31)]  # 8 B .. 8 GiB


def fstr(v, w):
    """nccl-tests' getFloatStr: 2 decimals, fewer if the field is too narrow."""
    for f in (f"{{:{w}.2f}}", f"{{:{w}.1f}}", f"{{:{w}.0f}}"):
        s = f.format(v)
        if len(s) <= w:
            return s
    return f"{v:{w}.1e}"


def write(path, header, hosts, protocols, seed, modern):
    """A log of all_reduce_perf on ``len(hosts)`` ranks; per size NCCL's tuner takes the fastest
    protocol, each ``latency + 2(p-1)/p * size / busbw``; then 1.5-3% jitter per column."""
    p = len(hosts)
    factor = 2 * (p - 1) / p
    rng = np.random.default_rng(seed)
    rows, total, n = [], 0.0, 0
    for s in SIZES:
        t = min(lat + s * factor / (bw * 1e3) for lat, bw in protocols.values())  # us
        line = f"{s:12d}  {s // 4:12d}  {'float':>8s}  {'sum':>6s}  {-1:6d}"
        for _ in range(2):  # out-of-place, in-place
            tt = t * (1 + rng.normal(0, 0.015 if s >= 1 << 20 else 0.03))
            alg = s / 1e3 / tt
            bus = alg * factor
            total, n = total + bus, n + 1
            line += f"  {fstr(tt, 7):>7s}  {fstr(alg, 6):>6s}  {fstr(bus, 6):>6s}  {0:6g}"
        rows.append(line)
    buses = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB]
    ranks = []
    for r, h in enumerate(hosts):
        d = r % 8
        bus = f"[0000:{buses[d]:02x}:00]" if modern else f"[0x{buses[d]:02x}]"
        ranks.append(
            f"#  Rank {r:2d} Group {0:2d} Pid {61203 + r:6d} on {h:>10s} device {d:2d} {bus} "
            "NVIDIA H100 80GB HBM3"
        )
    blank = ("",) * 5
    top = "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}".format(*blank)
    columns = ("time", "algbw", "busbw", "#wrong") * 2
    unit_row = ("(us)", "(GB/s)", "(GB/s)", "") * 2
    widths = (7, 6, 6, 6) * 2

    def head(lead: tuple[str, ...], cells: tuple[str, ...]) -> str:
        body = "".join(f"  {c:>{w}s}" for c, w in zip(cells, widths, strict=True))
        return "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}".format(*lead) + body + " "

    start = (
        ["# nccl-tests version 2.17.1 nccl-headers=22602 nccl-library=22602",
         "# Collective test starting: all_reduce_perf"]
        if modern else []
    )  # fmt: skip
    settings = (
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0" + (" unalign: 0" if modern else "")
    )
    lines = [
        header.rstrip("\n"),
        *start,
        settings,
        "#",
        "# Using devices",
        *ranks,
        "#",
        top + "           out-of-place                       in-place          ",
        head(("size", "count", "type", "redop", "root"), columns),
        head(("(B)", "(elements)", "", "", ""), unit_row),
        *rows,
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {total / n:g} ",
        "#",
        *(["# Collective test concluded: all_reduce_perf"] if modern else []),
        "",
    ]
    Path(path).write_text("\n".join(lines))


ONE_NODE = """\
# commsim example: a synthetic but realistic nccl-tests log of ONE DGX H100 (8 x H100 SXM on
# NVLink4/NVSwitch), all_reduce_perf -b 8 -e 8G -f 2 -g 1 under mpirun -np 8, NCCL_ALGO=Ring.
# Not a measurement. Its numbers follow published figures: NCCL's ring reaches a bus bandwidth
# of about 370 GB/s on 8 H100s (sjeaugey, NVIDIA/nccl-tests issue #212: "an effective NVLink
# bandwidth of 370GB/s ... with NCCL_ALGO=RING", 80% of the 450 GB/s line rate); small sizes take
# 15-25 us. Recipe (examples/nccl-tests/make_example_log.py): NCCL's tuner takes, per size, the fastest of
# three protocols, each latency + 2(p-1)/p * size / busbw: LL 14.5 us and 150 GB/s, LL128 23 us
# and 330 GB/s, Simple 43 us and 368 GB/s; then 1.5-3% random jitter per column. The format is
# nccl-tests 2.13's (no version line, one-byte PCI bus ids), as src/common.cu printed it.
"""

TWO_NODES = """\
# commsim example: a synthetic but realistic nccl-tests log of TWO DGX H100 (16 x H100, one
# 400 Gb/s NDR NIC per GPU), all_reduce_perf -b 8 -e 8G -f 2 -g 1 under mpirun -np 16,
# NCCL_ALGO=Ring. Not a measurement. Its large-size bus bandwidth follows the published figure
# for 400 Gb/s NDR: "you should see 46-48GB/s per NIC" (AddyLaddy, NVIDIA/nccl-tests issue #290);
# the latencies are assumptions. Recipe (examples/nccl-tests/make_example_log.py): per size the
# fastest of LL (25 us, 12 GB/s busbw), LL128 (40 us, 40 GB/s) and Simple (70 us, 47 GB/s),
# each latency + 2(p-1)/p * size / busbw; then 1.5-3% random jitter per column. The format is
# nccl-tests 2.14 and later's (a version line, PCI domain:bus:device ids).
"""

if __name__ == "__main__":
    here = Path(__file__).parent
    write(
        here / "dgx-h100-1node-all_reduce.log", ONE_NODE, ["dgx-h100-017"] * 8,
        {"LL": (14.5, 150.0), "LL128": (23.0, 330.0), "Simple": (43.0, 368.0)}, 20240506, False,
    )  # fmt: skip
    write(
        here / "dgx-h100-2node-all_reduce.log", TWO_NODES,
        ["dgx-h100-017"] * 8 + ["dgx-h100-018"] * 8,
        {"LL": (25.0, 12.0), "LL128": (40.0, 40.0), "Simple": (70.0, 47.0)}, 20250303, True,
    )  # fmt: skip
