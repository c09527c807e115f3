"""Writes dgx-h100-1node-all_reduce.log: the recipe of commsim's synthetic example log (see its header).

Run from the repository root: python examples/nccl-tests/make_example_log.py
"""

from pathlib import Path

import numpy as np

sizes = [8 * 2**k for k in range(31)]  # 8 B .. 8 GiB
p = 8
# NCCL's tuner picks, per size, the fastest of its protocols; each is latency + bytes/busbw.
protocols = {  # name: (latency us, busbw GB/s)
    "LL": (14.5, 150.0),
    "LL128": (23.0, 330.0),
    "Simple": (43.0, 368.0),
}
rng = np.random.default_rng(20240506)
factor = 2 * (p - 1) / p


def fstr(v, w):
    for f in (f"{{:{w}.2f}}", f"{{:{w}.1f}}", f"{{:{w}.0f}}"):
        s = f.format(v)
        if len(s) <= w:
            return s
    return f"{v:{w}.1e}"


rows, total, n = [], 0.0, 0
for s in sizes:
    t = min(lat + s * factor / (bw * 1e3) for lat, bw in protocols.values())  # us
    # run-to-run jitter: ~1.5% multiplicative, a little more at small sizes
    t_oop = t * (1 + rng.normal(0, 0.015 if s >= 1 << 20 else 0.03))
    t_ip = t * (1 + rng.normal(0, 0.015 if s >= 1 << 20 else 0.03))
    line = f"{s:12d}  {s // 4:12d}  {'float':>8s}  {'sum':>6s}  {-1:6d}"
    for tt in (t_oop, t_ip):
        alg = s / 1e3 / tt
        bus = alg * factor
        total, n = total + bus, n + 1
        line += f"  {fstr(tt, 7):>7s}  {fstr(alg, 6):>6s}  {fstr(bus, 6):>6s}  {0:6g}"
    rows.append(line)
hdr = """\
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
ranks = "\n".join(
    f"#  Rank {r:2d} Group {0:2d} Pid {61203 + r:6d} on {'dgx-h100-017':>10s} device {r:2d} [0x{b:02x}] NVIDIA H100 80GB HBM3"
    for r, b in enumerate([0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB])
)
blank = ("",) * 5
top = "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}".format(*blank)
columns = ("time", "algbw", "busbw", "#wrong") * 2
unit_row = ("(us)", "(GB/s)", "(GB/s)", "") * 2
widths = (7, 6, 6, 6) * 2


def header(lead: tuple[str, ...], cells: tuple[str, ...]) -> str:
    body = "".join(f"  {c:>{w}s}" for c, w in zip(cells, widths, strict=True))
    return "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}".format(*lead) + body + " "


lines = [
    hdr.rstrip("\n"),
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0",
    "#",
    "# Using devices",
    ranks,
    "#",
    top + "           out-of-place                       in-place          ",
    header(("size", "count", "type", "redop", "root"), columns),
    header(("(B)", "(elements)", "", "", ""), unit_row),
    *rows,
    "# Out of bounds values : 0 OK",
    f"# Avg bus bandwidth    : {total / n:g} ",
    "#",
    "",
]
Path("examples/nccl-tests/dgx-h100-1node-all_reduce.log").write_text("\n".join(lines))
