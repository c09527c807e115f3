r"""nccl-tests logs: parse the table ``all_reduce_perf`` (and its siblings) print, and format one.

`nccl-tests <https://github.com/NVIDIA/nccl-tests>`_ prints (``src/util.cu``, ``src/common.cu``)::

    # nccl-tests version 2.17.1 nccl-headers=22602 nccl-library=22602      (2.14 and later)
    # Collective test starting: all_reduce_perf                            (2.14 and later)
    # nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 ...
    #
    # Using devices
    #  Rank  0 Group  0 Pid  41731 on    node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3
    ...                                                                     (one line per rank)
    #                                        out-of-place                       in-place
    #       size         count      type   redop    root     time   algbw   busbw  #wrong ...
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)         ...
               8             2     float     sum      -1    38.51    0.00    0.00       0 ...
    ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 98.2345
    #
    # Collective test concluded: all_reduce_perf

What the parser accepts, and how it decides:

* **Columns** are read by name from the column header line (``size count type redop root
  time algbw busbw #wrong`` twice), so older versions (no ``root`` column, ``error`` instead of
  ``#wrong``, ``#  Rank  0 Pid ...`` without ``Group``), ``-C`` (``cputime``), ``-I`` per-iteration
  columns and ``-T`` timestamps all parse. ``#wrong`` may read ``N/A`` (not checked).
* **The rank count** is the number of ``# Rank`` lines; the hosts are their ``on HOST`` names.
  It is checked against the busbw/algbw ratio nccl-tests printed (``busbw = algbw ×
  busbw_factor(p)``, e.g. :math:`2(p-1)/p` for allreduce), which catches a truncated device list.
  A log without ``# Rank`` lines gets its count from that ratio (allreduce, allgather,
  reduce_scatter, alltoall) or is refused (broadcast, reduce: the ratio is 1 for every ``p``).
* **The collective** comes from, in order: an explicit ``collective=`` (the CLI's
  ``--collective``); the binary's name in the log (``# Collective test starting: NAME``, or a
  command line that names ``NAME_perf`` — the ``_mpi`` builds too); the columns alone. The
  columns always narrow it down, and a named binary that contradicts them is an error: ``redop``
  is ``none`` exactly for the collectives that do not reduce, ``root`` is ``-1`` exactly for the
  unrooted ones, ``count × sizeof(type)`` is ``size`` (allreduce, broadcast, reduce) or
  ``size / p`` (allgather, reduce_scatter, alltoall: the per-rank count), and busbw/algbw is the
  collective's factor. allgather and alltoall agree on all four: such a log needs its binary
  name or ``--collective``.
* **#wrong > 0** (the collective computed a wrong result) refuses the log: the time of a wrong
  run is not a time of the collective. ``allow_wrong=True`` keeps such rows (flagged in
  :attr:`NcclTestsRow.wrong_oop`). Older versions' ``error`` column is a maximum error, not a count,
  and is kept but not checked.
* Lines that are not part of the table (``NCCL INFO`` debug output, launcher noise) are skipped;
  a launcher's tag (``[1,0]<stdout>:`` from Open MPI ``--tag-output``, ``0: `` from
  ``srun --label``, which right-aligns it to the widest task id, `` 0: `` with 10 or more
  tasks; ``[0]`` from MPICH's ``-prepend-rank``, which tags every write, so mid-line too) is
  removed first. A log holding two tables (two runs pasted together) is
  refused: split it.

``size`` is commsim's ``nbytes`` (both follow nccl-tests' conventions: the vector for allreduce,
broadcast and reduce, the gathered output for allgather, the input for reduce_scatter, the per-rank
send buffer for alltoall), and ``algbw = size / time`` for every collective.

Every problem is one :class:`~commsim.errors.CommsimError` line naming the file and line.

:meth:`NcclTestsLog.from_times` makes the log nccl-tests would print for times per size (the
model's, in tests and examples); :mod:`commsim.interop._nccl_tests_write` prints a log.

See Also:
    :func:`commsim.bench.calibrate.fit_cluster`, which fits a cluster to a log's rows.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from commsim._collectives import COLLECTIVES, spec
from commsim.errors import CommsimError

__all__ = [
    "BINARIES",
    "BINARY_OF",
    "TYPE_SIZES",
    "NcclTestsLog",
    "NcclTestsRow",
    "parse_nccl_tests",
    "read_nccl_tests",
]

#: nccl-tests binary → commsim collective.
BINARIES: dict[str, str] = {
    "all_reduce_perf": "allreduce",
    "all_gather_perf": "allgather",
    "reduce_scatter_perf": "reduce_scatter",
    "broadcast_perf": "broadcast",
    "reduce_perf": "reduce",
    "alltoall_perf": "alltoall",
}
#: commsim collective → nccl-tests binary.
BINARY_OF: dict[str, str] = {c: b for b, c in BINARIES.items()}

#: Collectives whose ``count`` column is per rank (``size = count × sizeof(type) × p``).
_PER_RANK_COUNT = {"allgather": True, "reduce_scatter": True, "alltoall": True}

#: Bytes per element of nccl-tests' type names (``test_typenames`` in ``src/common.cu``).
TYPE_SIZES: dict[str, int] = {
    "int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1,
    "half": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "int": 4, "float": 4,
    "int64": 8, "uint64": 8, "double": 8,
}  # fmt: skip

# srun --label right-aligns the task id to the widest one (" 0: " with 10 or more tasks)
_TAG = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+: )")
_RANK_TAG = re.compile(r"^\[\d+\] ?|(?<=\S)\[\d+\]")
_RANK = re.compile(
    r"#\s+Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
    r"\s+\[([^\]]*)\]\s*(.*)$"
)
_VERSION = re.compile(r"#\s*nccl-tests version\s+(\S+)")
_STARTING = re.compile(r"#\s*Collective test starting:\s*(\S+)")
_BINARY = re.compile(r"\b(" + "|".join(BINARIES) + r")(?:_mpi)?\b")
_FOOT = re.compile(r"#\s*(Out of bounds values|Avg bus bandwidth)\s*:\s*(\S+)")
_DATA = re.compile(r"^\s*\d+\s+\d+\s+\S")
_ROW_START = re.compile(r"^\d+(?:\s|$)")  # a line that starts as a data row does (a size)
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


@dataclasses.dataclass(frozen=True)
class NcclTestsRow:
    """One data row. Times in seconds, bandwidths in GB/s (10⁹ B/s) as printed; ``None`` where
    the log printed nothing (``N/A``, or an out-of-place half left blank)."""

    line: int  # 1-based line number in the log
    size: int  # bytes (commsim's nbytes)
    count: int  # elements (per rank for allgather, reduce_scatter, alltoall)
    type: str
    redop: str
    root: int  # -1 where the collective has none (or the log has no root column)
    time_oop_s: float | None
    algbw_oop: float | None
    busbw_oop: float | None
    wrong_oop: float | None
    time_ip_s: float | None
    algbw_ip: float | None
    busbw_ip: float | None
    wrong_ip: float | None

    @property
    def time_s(self) -> float:
        """The out-of-place time (in-place where out-of-place is blank): what a fit uses."""
        return self.time_oop_s if self.time_oop_s is not None else float(self.time_ip_s or 0.0)


@dataclasses.dataclass(frozen=True, eq=False)
class NcclTestsLog:
    """A parsed nccl-tests log.

    Attributes:
        collective: commsim's name (``"allreduce"``); ``collective_from`` says how it was known.
        nranks: ranks in the run; ``hosts``: the host of each rank (``# Rank`` lines), empty when
            the log had none; ``devices``: each rank's device name.
        rows: the data rows, in the log's order.
        avg_busbw: the ``# Avg bus bandwidth`` footer (GB/s), ``None`` if absent.
        out_of_bounds: the ``# Out of bounds values`` footer, ``None`` if absent.
        program: the binary's name when the log gives it.
        settings: the ``# nThread ...`` line's fields (``{"nThread": "1", "iters": "20", ...}``).
        time_column: ``"time"`` (GPU time) or ``"cputime"`` (``-C``: CPU time).
        wrong_column: ``"#wrong"`` (a count) or ``"error"`` (older versions: a maximum error).
        source: the file (or ``"<text>"``).
        notes: what the reader assumed or skipped.
        version: nccl-tests' version (``# nccl-tests version ...``, 2.14 and later), or ``None``.
    """

    collective: str
    nranks: int
    hosts: tuple[str, ...]
    devices: tuple[str, ...]
    rows: tuple[NcclTestsRow, ...]
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    program: str | None = None
    settings: dict[str, str] = dataclasses.field(default_factory=dict)
    time_column: str = "time"
    wrong_column: str = "#wrong"
    source: str = "<text>"
    collective_from: str = ""
    notes: tuple[str, ...] = ()
    version: str | None = None

    @classmethod
    def from_times(
        cls,
        collective: str,
        nranks: int,
        sizes: Sequence[int],
        times_oop: Sequence[float],
        times_ip: Sequence[float] | None = None,
        *,
        hosts: Sequence[str] | None = None,
        device: str = "NVIDIA H100 80GB HBM3",
        dtype: str = "float",
        root: int = 0,
        wrong: Sequence[int] | None = None,
        version: str = "2.17.1",
        iters: int = 20,
    ) -> NcclTestsLog:
        """The log nccl-tests would print for these times per size
        (:func:`commsim.interop.format_nccl_tests` prints it).

        Args:
            collective: commsim's name; the binary is its nccl-tests name (``all_reduce_perf``).
            nranks: ranks; ``hosts``: each rank's host (default: one host, ``node-0``).
            sizes: bytes per row (nccl-tests' size column); ``times_oop``/``times_ip``: seconds
                per row, out-of-place and in-place (in-place defaults to out-of-place).
            device: every rank's device name; ``dtype``: the type column; ``root``: the root of
                broadcast and reduce.
            wrong: ``#wrong`` per row (default 0); ``version``, ``iters``: the header's.

        Bandwidths are nccl-tests': ``algbw = size / time`` and ``busbw = algbw`` times the
        collective's factor, in GB/s; ``avg_busbw`` is their mean over both halves.
        """
        s = spec(collective)
        wsize = TYPE_SIZES[dtype]
        hosts = tuple(hosts) if hosts is not None else ("node-0",) * nranks
        if len(hosts) != nranks:
            raise CommsimError(f"NcclTestsLog.from_times: {len(hosts)} hosts for {nranks} ranks")
        times_ip = times_oop if times_ip is None else times_ip
        wrong = [0] * len(sizes) if wrong is None else list(wrong)
        redop = "sum" if s.reduces else "none"
        root_col = root if s.rooted else -1
        factor = s.busbw_factor(nranks)
        per_rank = nranks if _PER_RANK_COUNT.get(collective) else 1
        rows, total = [], 0.0
        for size, t_oop, t_ip, w in zip(sizes, times_oop, times_ip, wrong, strict=True):
            halves = []
            for t in (t_oop, t_ip):
                algbw = size / 1e9 / t
                halves += [t, algbw, algbw * factor, float(w)]
                total += algbw * factor
            rows.append(NcclTestsRow(0, size, size // wsize // per_rank, dtype, redop, root_col,
                                     *halves))  # fmt: skip
        settings = {
            "nThread": "1", "nGpus": "1", "minBytes": str(min(sizes)), "maxBytes": str(max(sizes)),
            "step": "2(factor)", "warmup iters": "5", "iters": str(iters), "agg iters": "1",
            "validation": "1", "graph": "0", "unalign": "0",
        }  # fmt: skip
        return cls(
            collective, nranks, hosts, (device,) * nranks, tuple(rows),
            avg_busbw=total / max(2 * len(rows), 1), out_of_bounds=sum(1 for w in wrong if w),
            program=BINARY_OF[collective], settings=settings, source="<times>",
            collective_from="the caller", version=version,
        )  # fmt: skip

    @property
    def sizes(self) -> np.ndarray:
        """Bytes per row (float64)."""
        return np.array([r.size for r in self.rows], dtype=np.float64)

    @property
    def times(self) -> np.ndarray:
        """Seconds per row: out-of-place (the fit's measurement)."""
        return np.array([r.time_s for r in self.rows], dtype=np.float64)

    @property
    def nodes(self) -> int | None:
        """Distinct hosts, or ``None`` when the log lists no ranks."""
        return len(dict.fromkeys(self.hosts)) if self.hosts else None

    @property
    def ranks_per_host(self) -> tuple[int, ...]:
        """Ranks on each distinct host, in order of first appearance."""
        counts: dict[str, int] = {}
        for h in self.hosts:
            counts[h] = counts.get(h, 0) + 1
        return tuple(counts.values())

    def describe(self) -> str:
        hosts = f" on {self.nodes} host{'s' * (self.nodes != 1)}" if self.nodes else ""
        return (
            f"{self.source}: {self.program or self.collective}, {self.nranks} ranks{hosts}, "
            f"{len(self.rows)} sizes {int(self.rows[0].size)}..{int(self.rows[-1].size)} B"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "collective": self.collective,
            "collective_from": self.collective_from,
            "program": self.program,
            "nranks": self.nranks,
            "hosts": list(self.hosts),
            "avg_busbw_GBps": self.avg_busbw,
            "out_of_bounds": self.out_of_bounds,
            "rows": [dataclasses.asdict(r) for r in self.rows],
            "notes": list(self.notes),
        }


# -- reading ------------------------------------------------------------------------------------
class _Where:
    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, line: int | None, problem: str) -> CommsimError:
        at = f"{self.source}:{line}" if line else self.source
        return CommsimError(f"nccl-tests log {at}: {problem}")


def read_nccl_tests(
    path: str | os.PathLike[str], *, collective: str | None = None, allow_wrong: bool = False
) -> NcclTestsLog:
    """:func:`parse_nccl_tests` on a file."""
    path = Path(path)
    where = _Where(str(path))
    if not path.is_file():
        raise where.error(None, "no such file")
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise where.error(None, f"cannot read it ({e.strerror or e})") from None
    return parse_nccl_tests(text, collective=collective, source=str(path), allow_wrong=allow_wrong)


def parse_nccl_tests(
    text: str,
    *,
    collective: str | None = None,
    source: str = "<text>",
    allow_wrong: bool = False,
) -> NcclTestsLog:
    """The :class:`NcclTestsLog` in ``text`` (the module docstring says what is accepted).

    Args:
        text: the log (nccl-tests' stdout; other lines are skipped).
        collective: the collective, overriding what the log says (an error if its columns
            contradict it).
        source: the file name, for messages.
        allow_wrong: keep rows whose ``#wrong`` is above 0 instead of refusing the log.

    Examples:
        >>> from commsim.interop import format_nccl_tests
        >>> log = parse_nccl_tests(
        ...     format_nccl_tests(NcclTestsLog.from_times("allreduce", 8, [1024], [20e-6]))
        ... )
        >>> log.collective, log.nranks, log.rows[0].size, log.rows[0].time_oop_s
        ('allreduce', 8, 1024, 2e-05)
    """
    where = _Where(source)
    if not text.strip():
        raise where.error(None, "the file is empty")
    scan = _scan(where, text)
    columns, rows, programs = scan.columns, scan.rows, scan.programs
    if columns is None:
        raise where.error(
            None, "not an nccl-tests log: no column header line ('#  size  count  type ...')"
        )
    if not rows:
        raise where.error(scan.header_line, "not an nccl-tests log: a header but no data rows")
    wrong_column = "error" if "error" in columns else "#wrong"
    if not allow_wrong and wrong_column == "#wrong":
        _check_wrong(where, rows)
    program = programs[0][0] if programs else None
    named = {
        BINARIES[p.removesuffix("_mpi")] for p, _ in programs if p.removesuffix("_mpi") in BINARIES
    }
    if len(named) > 1:
        raise where.error(
            programs[1][1], f"names two binaries ({', '.join(p for p, _ in programs)}): split it"
        )
    notes: list[str] = []
    ranks, foot, settings, version = scan.ranks, scan.foot, scan.settings, scan.version
    nranks, hosts, devices = _ranks(where, ranks)
    coll, coll_from, nranks = _collective(where, rows, collective, named, program, nranks, notes)
    if not hosts:
        notes.append(f"no '# Rank' lines: {nranks} ranks from the busbw/algbw ratio")
    avg = _foot_value(where, foot, "Avg bus bandwidth", float)
    oob = _foot_value(where, foot, "Out of bounds values", int)
    return NcclTestsLog(
        coll, nranks, hosts, devices, tuple(rows), avg, oob, program, settings,
        "cputime" if "cputime" in columns else "time", wrong_column, source, coll_from,
        tuple(notes), version,
    )  # fmt: skip


@dataclasses.dataclass
class _Scanned:
    """What one pass over a log's lines found (:func:`_scan`)."""

    ranks: list[tuple[int, str, str]] = dataclasses.field(default_factory=list)
    columns: list[str] | None = None
    header_line: int = 0
    rows: list[NcclTestsRow] = dataclasses.field(default_factory=list)
    foot: dict[str, tuple[str, int]] = dataclasses.field(default_factory=dict)
    programs: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    settings: dict[str, str] = dataclasses.field(default_factory=dict)
    version: str | None = None


def _scan(where: _Where, text: str) -> _Scanned:
    """The rank lines, the header, the data rows, the footer, the binaries named, the settings
    and the version of ``text``, line by line; a malformed or second table is an error."""
    out = _Scanned()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _TAG.sub("", raw).rstrip()
        if _RANK_TAG.match(line):  # MPICH -prepend-rank tags every write, mid-line too
            line = _RANK_TAG.sub("", line)
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            _comment(where, out, stripped, number)
            continue
        if _DATA.match(stripped):
            if out.columns is None:
                raise where.error(number, "a data row before the column header line")
            out.rows.append(_row(where, number, stripped, out.columns))
        elif out.columns is not None and _ROW_START.match(stripped):
            raise where.error(
                number,
                f"a malformed data row {stripped[:60]!r}: expected the columns of the header at "
                f"line {out.header_line} ({' '.join(out.columns[:4])} ...); fix or delete the row",
            )
        elif m := _BINARY.search(stripped):
            out.programs.append((m.group(1), number))
    return out


def _comment(where: _Where, out: _Scanned, stripped: str, number: int) -> None:
    """One ``#`` line of the log into ``out``: a rank, the program, the version, the settings,
    a footer value or the column header."""
    body = stripped.lstrip("#").strip()
    if m := _RANK.match(stripped):
        out.ranks.append((int(m.group(1)), m.group(4), m.group(7).strip()))
    elif m := _STARTING.match(stripped):
        out.programs.append((m.group(1), number))
    elif m := _VERSION.match(stripped):
        out.version = m.group(1)
    elif body.startswith("nThread"):
        out.settings = _settings(body)
    elif m := _FOOT.match(stripped):
        out.foot[m.group(1)] = (m.group(2), number)
    elif body.split()[:2] == ["size", "count"]:
        if out.columns is not None:
            raise where.error(
                number,
                f"a second table (the first starts at line {out.header_line}): this file "
                "holds two runs; split it into one file per run",
            )
        out.columns, out.header_line = body.split(), number


def _check_wrong(where: _Where, rows: list[NcclTestsRow]) -> None:
    """Refuse a row whose ``#wrong`` is above 0: its times are not the collective's."""
    for r in rows:
        for label, w in (("out-of-place", r.wrong_oop), ("in-place", r.wrong_ip)):
            if w is not None and w > 0:
                raise where.error(
                    r.line,
                    f"size {r.size} has {w:g} wrong elements {label} (#wrong): the run "
                    "computed a wrong result, so its times are not the collective's; fix "
                    "the run or delete the row",
                )


def _settings(body: str) -> dict[str, str]:
    """``nThread 1 nGpus 1 ... step: 2(factor) warmup iters: 5`` → ``{"nThread": "1", ...}``."""
    return {m.group(1): m.group(2) for m in re.finditer(r"([A-Za-z]+(?: iters)?):?\s+(\S+)", body)}


def _value(where: _Where, number: int, column: str, text: str, kind: type) -> Any:
    if text == "N/A":
        return None
    if kind is int:
        if not re.fullmatch(r"-?\d+", text):
            raise where.error(number, f"column {column}: not an integer: {text!r}")
        return int(text)
    if kind is float:
        if not re.fullmatch(_NUMBER, text):
            raise where.error(number, f"column {column}: not a number: {text!r}")
        return float(text)
    return text


def _row(where: _Where, number: int, line: str, columns: Sequence[str]) -> NcclTestsRow:
    """One data row, its fields found by the header's column names (the out-of-place half
    starts at the first ``time``/``cputime`` column, the in-place half at the second)."""
    tokens = line.split()
    names = [{"cputime": "time", "error": "#wrong"}.get(c, c) for c in columns]
    starts = [i for i, c in enumerate(names) if c == "time"][:2]
    if not starts or "size" not in names[: starts[0]]:
        raise where.error(number, "the column header has no size or time column")
    halves = [names[a:b] for a, b in zip(starts, [*starts[1:], len(names)], strict=True)]
    want = {"time", "algbw", "busbw", "#wrong"}
    needed = max(
        start + k
        for start, h in zip(starts, halves, strict=True)
        for k, c in enumerate(h)
        if c in want
    )
    if len(tokens) <= needed:
        raise where.error(
            number, f"a data row cut short: {len(tokens)} fields where the header has {needed + 1}"
        )

    def field(i: int, kind: type) -> Any:
        return _value(where, number, columns[i], tokens[i], kind)

    lead = {c: i for i, c in enumerate(names[: starts[0]])}
    parsed = []
    for start, h in zip(starts, halves, strict=True):
        parsed.append({c: field(start + k, float) for k, c in enumerate(h) if c in want})
    while len(parsed) < 2:
        parsed.append({})
    oop, ip = parsed
    for label, half in (("out-of-place", oop), ("in-place", ip)):
        t = half.get("time")
        if t is not None and not t > 0:
            raise where.error(number, f"{label} time {t:g} us is not positive")

    def sec(t: float | None) -> float | None:
        return None if t is None else t / 1e6

    return NcclTestsRow(
        number, field(lead["size"], int),
        field(lead["count"], int) if "count" in lead else 0,
        field(lead["type"], str) if "type" in lead else "float",
        field(lead["redop"], str) if "redop" in lead else "sum",
        field(lead["root"], int) if "root" in lead else -1,
        sec(oop.get("time")), oop.get("algbw"), oop.get("busbw"), oop.get("#wrong"),
        sec(ip.get("time")), ip.get("algbw"), ip.get("busbw"), ip.get("#wrong"),
    )  # fmt: skip


def _foot_value(where: _Where, foot: dict[str, tuple[str, int]], key: str, kind: type) -> Any:
    if key not in foot:
        return None
    text, number = foot[key]
    try:
        return kind(text)
    except ValueError:
        raise where.error(number, f"{key}: not a number: {text!r}") from None


def _ranks(
    where: _Where, ranks: list[tuple[int, str, str]]
) -> tuple[int | None, tuple[str, ...], tuple[str, ...]]:
    if not ranks:
        return None, (), ()
    ids = sorted(r for r, _, _ in ranks)
    if ids != list(range(len(ids))):
        raise where.error(
            None, f"the '# Rank' lines list ranks {_ranges(ids)}, not 0..{len(ids) - 1}"
        )
    by_rank = sorted(ranks)
    return len(ids), tuple(h for _, h, _ in by_rank), tuple(d for _, _, d in by_rank)


def _ranges(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:6])) + (", ..." if len(ids) > 6 else "")


def _ratio_row(rows: Sequence[NcclTestsRow]) -> NcclTestsRow | None:
    """The row whose busbw/algbw ratio is best resolved (the largest algbw)."""
    good = [r for r in rows if r.algbw_oop and r.busbw_oop is not None and r.algbw_oop >= 1.0]
    return max(good, key=lambda r: r.algbw_oop) if good else None


def _contradiction(
    c: str, p: int | None, first: NcclTestsRow, ratio_row: NcclTestsRow | None
) -> str | None:
    """Why collective ``c`` on ``p`` ranks contradicts the columns (``None``: it doesn't)."""
    s = spec(c)
    if (first.redop == "none") == s.reduces:
        return f"redop is {first.redop!r}, and {c} {'reduces' if s.reduces else 'does not reduce'}"
    if first.root >= 0 and not s.rooted:
        return f"root is {first.root}, and {c} has no root"
    if p is None:
        return None
    ratio = ratio_row.busbw_oop / ratio_row.algbw_oop if ratio_row else None
    if ratio is not None and abs(ratio - s.busbw_factor(p)) > 0.03 * s.busbw_factor(p) + 0.005:
        return (
            f"busbw/algbw is {ratio:.3f} at size {ratio_row.size} (line {ratio_row.line}), but "
            f"{c} on {p} ranks has {s.busbw_factor(p):.3f}"
        )
    wsize = TYPE_SIZES.get(first.type)
    if wsize and first.count and first.size:
        per_rank = _PER_RANK_COUNT.get(c, False)
        expect = first.count * wsize * (p if per_rank else 1)
        if expect != first.size:
            return (
                f"count {first.count} x {wsize} B{f' x {p} ranks' if per_rank else ''} "
                f"= {expect} B is not size {first.size} (line {first.line}), as {c} has it"
            )
    return None


def _ranks_from_ratio(c: str, ratio_row: NcclTestsRow | None) -> int | None:
    """The rank count whose busbw factor for ``c`` is the ratio printed (``None`` when there is
    no ratio, or neighbouring counts are within the ratio's rounding)."""
    if ratio_row is None:
        return None
    ratio = ratio_row.busbw_oop / ratio_row.algbw_oop
    factors = np.array([spec(c).busbw_factor(p) for p in range(2, 4098)])
    best = int(np.argmin(np.abs(factors[:-1] - ratio)))
    rounding = ratio * (0.005 / ratio_row.busbw_oop + 0.005 / ratio_row.algbw_oop)
    gap = min(
        abs(factors[best + 1 : best + 2] - factors[max(best - 1, 0) : best + 1]).max(),
        abs(factors[best + 1] - factors[best]),
    )
    if abs(factors[best] - ratio) > 0.03 * ratio or gap <= 2 * rounding:
        return None
    return best + 2


def _candidates(given: str | None, named: set[str]) -> tuple[str, list[str]]:
    """How the collective is decided, and the collectives to try: the one given, the one the
    binary names, else every one."""
    if given is not None:
        spec(given)  # unknown name → one line with suggestions
        return f"--collective {given}", [given]
    if named:
        (c,) = named
        return f"the binary {BINARY_OF[c]}", [c]
    return "the columns", list(COLLECTIVES)


def _collective(
    where: _Where,
    rows: Sequence[NcclTestsRow],
    given: str | None,
    named: set[str],
    program: str | None,
    nranks: int | None,
    notes: list[str],
) -> tuple[str, str, int]:
    """Which collective the log holds, how that was decided, and the rank count."""
    first = rows[0]
    ratio_row = _ratio_row(rows)

    def ranks_for(c: str) -> int | None:
        return nranks if nranks is not None else _ranks_from_ratio(c, ratio_row)

    def consistent(c: str, p: int | None) -> str | None:
        return _contradiction(c, p, first, ratio_row)

    how, candidates = _candidates(given, named)
    verdicts = {c: consistent(c, ranks_for(c)) for c in candidates}
    fits = [c for c, why in verdicts.items() if why is None]
    if not fits:
        if len(candidates) == 1:
            c = candidates[0]
            claim = f"--collective {c}" if given else f"the log names {BINARY_OF[c]} ({c})"
            raise where.error(first.line, f"{claim}, but {verdicts[c]}")
        raise where.error(first.line, "the columns fit no collective commsim knows")
    if len(fits) > 1:
        raise where.error(
            first.line,
            f"the columns fit {' and '.join(fits)} alike and the log does not name its binary: "
            "give --collective",
        )
    c = fits[0]
    p = ranks_for(c)
    if p is None:
        raise where.error(
            None,
            f"no '# Rank' lines, and {c}'s busbw/algbw ratio is the same for every rank count: "
            "cannot tell how many ranks ran",
        )
    if given is None and not named:
        notes.append(f"collective {c} inferred from the columns (no binary name in the log)")
    return c, how, p
