r"""nccl-tests logs out: print an :class:`~commsim.interop.NcclTestsLog` as nccl-tests does.

The layout is nccl-tests' since 2.14 (``src/common.cu``): a version line when the log has one,
``# Collective test starting``, the settings line, one ``#  Rank`` line per rank (with
``Group``), the two column header lines (with a ``root`` column), one row per size with its
out-of-place and in-place halves, the two footers. Numbers are printed as nccl-tests'
``getFloatStr`` prints them: time in µs, bandwidths in GB/s, 2 decimals, fewer where the field
is too narrow, so :func:`~commsim.interop.parse_nccl_tests` gives the log back up to that
rounding. What a parsed log does not keep (process ids, PCI bus ids) is made up.

See Also:
    :mod:`commsim.interop._nccl_tests`, the grammar the parser accepts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from commsim.interop._nccl_tests import BINARY_OF, NcclTestsLog

__all__ = ["format_nccl_tests", "write_nccl_tests"]

_BARE = ("nThread", "nGpus", "minBytes", "maxBytes")  # settings printed without a colon


def _float(value: float, width: int) -> str:
    """nccl-tests' ``getFloatStr``: 2 decimals, fewer if it does not fit, then an exponent."""
    for fmt in (f"{{:{width}.2f}}", f"{{:{width}.1f}}", f"{{:{width}.0f}}"):
        s = fmt.format(value)
        if len(s) <= width:
            return s
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def format_nccl_tests(log: NcclTestsLog) -> str:
    """``log`` as nccl-tests (2.14 and later) prints it (module docstring); a log without
    ``# Rank`` lines is printed without them.

    Examples:
        >>> log = NcclTestsLog.from_times("allgather", 2, [8], [1e-5])
        >>> print(format_nccl_tests(log).splitlines()[-5])  # doctest: +NORMALIZE_WHITESPACE
        8  1  float  none  -1  10.00  0.00  0.00  0  10.00  0.00  0.00  0
    """
    binary = log.program or BINARY_OF[log.collective]
    lines = [f"# nccl-tests version {log.version} nccl-headers=22602 nccl-library=22602"]
    lines = lines if log.version else []
    lines.append(f"# Collective test starting: {binary}")
    if log.settings:
        lines.append("# " + " ".join(f"{k}{'' if k in _BARE else ':'} {v}"
                                     for k, v in log.settings.items()))  # fmt: skip
    lines += ["#", "# Using devices"]
    local: dict[str, int] = {}
    for r, h in enumerate(log.hosts):
        dev = local[h] = local.get(h, -1) + 1
        name = log.devices[r] if r < len(log.devices) else ""
        lines.append(
            f"#  Rank {r:2d} Group {0:2d} Pid {40000 + r:6d} on {h:>10s} device {dev:2d} "
            f"[{0:04x}:{0x18 + 0x10 * dev:02x}:{0:02x}] {name}"
        )
    t, w = log.time_column, log.wrong_column
    blank = ("",) * 5
    lines += [
        "#",
        "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}           out-of-place                "
        "       in-place          ".format(*blank),
        "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}  {:>7s}  {:>6s}  {:>6s}  {:>6s}  {:>7s}  "
        "{:>6s}  {:>6s}  {:>6s} ".format(
            "size", "count", "type", "redop", "root", t, "algbw", "busbw", w, t, "algbw", "busbw", w,
        ),
        "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}  {:>7s}  {:>6s}  {:>6s}  {:>6s}  {:>7s}  "
        "{:>6s}  {:>6s}  {:>6s} ".format(
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
            "(us)", "(GB/s)", "(GB/s)", "",
        ),
    ]  # fmt: skip
    for r in log.rows:
        row = f"{r.size:12d}  {r.count:12d}  {r.type:>8s}  {r.redop:>6s}  {r.root:6d}"
        for t_s, algbw, busbw, wrong in (
            (r.time_oop_s, r.algbw_oop, r.busbw_oop, r.wrong_oop),
            (r.time_ip_s, r.algbw_ip, r.busbw_ip, r.wrong_ip),
        ):
            row += (
                f"  {_cell(None if t_s is None else t_s * 1e6, 7)}  {_cell(algbw, 6)}"
                f"  {_cell(busbw, 6)}  {'N/A' if wrong is None else format(wrong, 'g'):>6s}"
            )
        lines.append(row)
    if log.out_of_bounds is not None:
        bad = log.out_of_bounds
        lines.append(f"# {'Out of bounds values':<20s} : {bad} {'FAILED' if bad else 'OK'}")
    if log.avg_busbw is not None:
        lines.append(f"# {'Avg bus bandwidth':<20s} : {log.avg_busbw:g} ")
    lines += ["#", f"# Collective test concluded: {binary}", ""]
    return "\n".join(lines)


def write_nccl_tests(log: NcclTestsLog, path: str | os.PathLike[str]) -> Path:
    """Write :func:`format_nccl_tests`'s text to ``path``."""
    path = Path(path)
    path.write_text(format_nccl_tests(log))
    return path


def format_nccl_tests_log(*args: Any, **kwargs: Any) -> str:
    """Deprecated (``commsim.interop`` and ``commsim.bench.calibrate`` serve it with a warning):
    ``format_nccl_tests(NcclTestsLog.from_times(*args, **kwargs))``, the old writer."""
    return format_nccl_tests(NcclTestsLog.from_times(*args, **kwargs))


def _cell(value: float | None, width: int) -> str:
    return f"{'N/A' if value is None else _float(value, width):>{width}s}"
