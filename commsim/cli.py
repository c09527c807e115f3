r"""The ``commsim`` command line: list, verify, predict and compare collective algorithms.

Commands (``commsim COMMAND --help`` shows each one's options and examples)::

    commsim algorithms [-c COLLECTIVE] [-a ALGORITHM] [--json]
    commsim verify     -c COLLECTIVE [-a A1,A2,..] -p P[,P..] [--param k=v] [--root R] [--json]
    commsim verify     --file schedule.json
    commsim predict    -c COLLECTIVE -a ALGORITHM -p P [-s SIZES] [MODEL] [--json]
    commsim predict    --file schedule.json [-s SIZES] [MODEL] [--json]
    commsim compare    -c COLLECTIVE [-a A1,A2,..] -p P[,P..] [-s SIZES] [MODEL] [--json] [--plot F]

Units. Sizes are bytes with an optional unit: ``B``, decimal ``KB MB GB`` (powers of 1000) or
binary ``KiB MiB GiB`` (powers of 1024); ``--sizes`` takes lists and ranges (``1KiB,64MiB``,
``1KiB..1GiB`` doubling, ``1KB..1GB:x10``, ``0..4KiB:+1KiB``), as ``-p`` does for rank counts
(``8,64,1024``, ``2..1024``). A size is the collective's ``nbytes`` as nccl-tests counts it: the
vector for allreduce/broadcast/reduce, the gathered output for allgather, the input for
reduce-scatter, the per-rank send buffer for alltoall. Times take ``s, ms, us, ns`` (a bare number
is seconds); ``--beta``/``--gamma`` take a bandwidth (``25GB/s``, ``200Gb/s``) or seconds per byte
(``4e-11s/B``).

Model defaults (:data:`DEFAULT_MODEL`) describe a 200 Gb/s (HDR) InfiniBand cluster:
α = 2 µs per message (MPI latency through one switch), β = 1/(25 GB/s) (the link's byte rate),
γ = 1/(100 GB/s) (a reduction kernel streaming near memory bandwidth), single-port full duplex.

Output: aligned tables by default; ``--json`` prints one JSON document on stdout with sizes in
bytes (``nbytes``), times in seconds (``*_s``), bandwidths in bytes/s (``*_Bps``) and ``null`` for
a number that is not finite. A progress indicator goes to stderr for long runs (``--progress``).

Memory: before a schedule is iterated, its footprint is estimated (the verifier's state is about
``Schedule.estimate_bytes()`` (17 to 46 bytes per slot per rank); a prediction holds one step's transfers, about 100 bytes each, plus
``O(p · sizes)`` clocks) against ``--memory-limit`` (default 75% of physical RAM). ``verify`` and
``predict`` refuse a ``p`` that would not fit; ``compare`` skips that algorithm with a note.

Exit status: 0 success; 1 a schedule failed verification (a result, not a usage error); 2 bad
input (unknown name, unparsable value, malformed schedule file, a ``p`` that would not fit in
memory), reported as one ``commsim[ COMMAND]: error: ...`` line on stderr; 130 interrupted.

Adding a command (``run``, ``calibrate``, ...) is one :class:`_Command` row in :data:`COMMANDS`:
an ``add_arguments(parser)`` that reuses :func:`_add_schedule_args` / :func:`_add_model_args`,
and a ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shutil
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

import numpy as np

import commsim
from commsim import _cli_run, _cli_validate, units
from commsim._ir import COLLECTIVES, Schedule
from commsim.algorithms import REGISTRY, available, build, info
from commsim.errors import CommsimError, ScheduleError
from commsim.models import Hockney, lower_bound

__all__ = ["DEFAULT_MODEL", "DEFAULT_SIZES", "main"]

#: Hockney parameters as typed on the command line: a 200 Gb/s InfiniBand cluster.
DEFAULT_MODEL = {"alpha": "2us", "beta": "25GB/s", "gamma": "100GB/s", "ports": "single"}
#: Message sizes swept by ``predict`` and ``compare`` when ``--sizes`` is not given.
DEFAULT_SIZES = "1KiB..1GiB"

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

_RAM_FRACTION = 0.75
_PREDICT_BYTES_PER_TRANSFER = 100  # one step's transfer and message arrays in the model
_MIN_BYTES_PER_RANK = 64  # any schedule holds a few O(p) arrays
_PLOT_FORMATS = (".png", ".pdf", ".svg")


class CLIError(CommsimError):
    """Bad command-line input found after parsing (printed as one line, exit status 2)."""


# ---------------------------------------------------------------------------------------------
# argument parsing


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line: ``PROG: error: MSG (see 'PROG --help')``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # `--sizes -1KiB`, `-p -3`: a value that looks negative is a value (no option looks so),
        # so the user hears "size must be >= 0" instead of "expected one argument"
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        width = min(shutil.get_terminal_size((100, 24)).columns, 100)
        super().__init__(prog, max_help_position=30, width=width)


_SIZES_HELP = (
    "message sizes: a list and/or ranges of sizes with units B, KB/MB/GB (x1000) or "
    "KiB/MiB/GiB (x1024); A..B doubles from A to B, A..B:xF multiplies by F, A..B:+S adds S "
    f"(default: {DEFAULT_SIZES})"
)
_UNITS_EPILOG = """\
units:
  sizes   64MiB, 1GB, 4096 (bytes); lists 1KiB,64MiB; ranges 1KiB..1GiB (doubling),
          1KB..1GB:x10, 0..4KiB:+1KiB. A size is nccl-tests' nbytes: the vector for
          allreduce/broadcast/reduce, the gathered output for allgather, the input for
          reduce_scatter, the per-rank send buffer for alltoall.
  ranks   8 | 8,64,1024 | 2..1024 (powers of two) | 2..16:+1 (every p)
"""
_MODEL_EPILOG = """\
model:
  Hockney alpha-beta-gamma: a message of b bytes costs alpha + b*beta; reducing b received
  bytes costs b*gamma. The defaults describe a 200 Gb/s (HDR) InfiniBand cluster:
  alpha = 2us (MPI latency through one switch), beta = 1/(25 GB/s) (the link's byte rate;
  --beta 200Gb/s is the same: b = bits, B = bytes), gamma = 1/(100 GB/s) (a reduction
  near memory bandwidth; --gamma inf makes it free).
"""


def _add_schedule_args(
    p: argparse.ArgumentParser, *, many_algorithms: bool, many_p: bool, file: bool
) -> None:
    """``-c -a -p --param --root`` (and ``--file``): which schedule(s) a command works on."""
    g = p.add_argument_group("schedule")
    g.add_argument(
        "-c", "--collective", metavar="C", help=f"the collective: {', '.join(COLLECTIVES)}"
    )
    if many_algorithms:
        g.add_argument(
            "-a",
            "--algorithm",
            metavar="A1,A2",
            help="algorithm name(s), comma-separated (default: every algorithm of the collective)",
        )
    else:
        g.add_argument(
            "-a",
            "--algorithm",
            metavar="A",
            help="algorithm name ('commsim algorithms' lists them)",
        )
    g.add_argument(
        "-p",
        "--nranks",
        metavar="P",
        help="rank count(s): 8, 8,64,1024 or 2..1024" if many_p else "rank count, e.g. 64",
    )
    g.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="K=V",
        help="algorithm parameter passed to its factory, e.g. segments=8 (repeatable)",
    )
    g.add_argument(
        "--root",
        type=_int_arg("root", 0),
        metavar="R",
        help="root rank of broadcast/reduce (default: 0)",
    )
    if file:
        g.add_argument(
            "-f",
            "--file",
            metavar="FILE",
            help="a saved schedule (.json or .npz) instead of -c/-a/-p",
        )


def _add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sizes and model (Hockney alpha-beta-gamma)")
    g.add_argument("-s", "--sizes", default=DEFAULT_SIZES, metavar="SIZES", help=_SIZES_HELP)
    g.add_argument(
        "--alpha",
        default=DEFAULT_MODEL["alpha"],
        metavar="TIME",
        help=f"latency per message: 2us, 800ns, 1.5e-6 (s) (default: {DEFAULT_MODEL['alpha']})",
    )
    g.add_argument(
        "--beta",
        default=DEFAULT_MODEL["beta"],
        metavar="BW",
        help="time per byte sent: a bandwidth (25GB/s, 200Gb/s) or s/B (4e-11s/B) "
        f"(default: {DEFAULT_MODEL['beta']})",
    )
    g.add_argument(
        "--gamma",
        default=DEFAULT_MODEL["gamma"],
        metavar="BW",
        help=f"time per byte reduced, same forms as --beta (default: {DEFAULT_MODEL['gamma']})",
    )
    g.add_argument(
        "--ports",
        choices=("single", "multi"),
        default=DEFAULT_MODEL["ports"],
        help="single: a rank sends one and receives one message at a time; multi: all at once "
        f"(default: {DEFAULT_MODEL['ports']})",
    )


def _add_common_args(p: argparse.ArgumentParser, *, sweep: bool) -> Any:
    """``--json`` (and for sweeps ``--progress``, ``--memory-limit``); returns the group."""
    g = p.add_argument_group("output")
    g.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    if sweep:
        g.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="progress on stderr (default: after 0.5 s on a terminal, 10 s otherwise)",
        )
        g.add_argument(
            "--memory-limit",
            metavar="SIZE",
            help="refuse (or skip) schedules needing more memory than this "
            f"(default: {_RAM_FRACTION * 100:.0f}%% of physical RAM)",
        )
    return g


def _int_arg(name: str, lo: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"{name} must be >= {lo}, got {value}")
        return value

    return parse


# ---------------------------------------------------------------------------------------------
# from arguments to objects


def _collective(args: argparse.Namespace) -> str:
    if not args.collective:
        raise CLIError("give the collective with -c (one of " + ", ".join(COLLECTIVES) + ")")
    available(args.collective)  # UnknownNameError with the closest names
    return args.collective


def _algorithms(args: argparse.Namespace, collective: str, *, default_all: bool) -> list[str]:
    names = available(collective)
    if not args.algorithm:
        if not default_all:
            raise CLIError(f"give the algorithm with -a (for {collective}: {', '.join(names)})")
        if not names:
            raise CLIError(f"no {collective} algorithms are registered yet")
        return names
    chosen = [a.strip() for a in args.algorithm.split(",")]
    if "" in chosen:
        raise CLIError(f"empty name in algorithm list {args.algorithm!r}")
    for a in chosen:
        info(collective, a)  # UnknownNameError with the closest names
    return list(dict.fromkeys(chosen))


def _rank_counts(args: argparse.Namespace, *, single: bool) -> list[int]:
    if args.nranks is None:
        raise CLIError(
            "give the rank count with -p (e.g. -p 64" + ("" if single else " or -p 2..1024") + ")"
        )
    ps = units.parse_int_list(args.nranks)
    if single and len(ps) > 1:
        raise CLIError(f"predict takes one rank count, got {len(ps)} ({args.nranks}); use compare")
    return ps


def _raw_params(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key.isidentifier() or not value:
            raise CLIError(f"--param expects KEY=VALUE such as segments=8, got {item!r}")
        out[key] = value
    return out


_PARAM_LIMIT = 2**31  # numeric algorithm parameters (segments, ...): beyond it is a typo


def _coerce(key: str, value: str, default: Any) -> Any:
    """Parse ``value`` like the parameter's default: bool, int (sizes allowed), float or text."""
    if isinstance(default, bool):
        low = value.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise CLIError(f"parameter {key} is a boolean (true/false), got {value!r}")
    for parse in (int, float):
        try:
            number = parse(value)
        except ValueError:
            continue
        if isinstance(default, int) and isinstance(number, float):
            if not number.is_integer():
                raise CLIError(f"parameter {key} is an integer, got {value!r}")
            number = int(number)
        if not math.isfinite(number) or abs(number) > _PARAM_LIMIT:
            raise CLIError(f"parameter {key}={value} is out of range (|value| <= {_PARAM_LIMIT})")
        return number
    if isinstance(default, int):
        try:
            return units.parse_size(value)
        except units.UnitError:
            raise CLIError(f"parameter {key} is an integer, got {value!r}") from None
    if isinstance(default, float):
        raise CLIError(f"parameter {key} is a number, got {value!r}")
    return value


def _params_for(collective: str, algorithm: str, raw: dict[str, str]) -> dict[str, Any]:
    """The subset of ``raw`` that ``algorithm`` accepts, each parsed like its default."""
    accepted = info(collective, algorithm).params
    return {k: _coerce(k, v, accepted[k]) for k, v in raw.items() if k in accepted}


def _check_params_known(collective: str, algorithms: Sequence[str], raw: dict[str, str]) -> None:
    for key in raw:
        if not any(key in info(collective, a).params for a in algorithms):
            accepted = sorted({k for a in algorithms for k in info(collective, a).params})
            names = "/".join(algorithms)
            raise CLIError(
                f"{collective}/{names} has no parameter {key!r}; "
                f"accepted: {', '.join(accepted) or 'none'}"
            )


def _sizes(args: argparse.Namespace) -> np.ndarray:
    return np.array(units.parse_sizes(args.sizes), dtype=np.float64)


def _model(args: argparse.Namespace) -> Hockney:
    alpha = units.parse_time(args.alpha)
    beta = units.parse_bandwidth_or_inverse(args.beta)
    gamma = units.parse_bandwidth_or_inverse(args.gamma)
    try:
        return Hockney(alpha=alpha, beta=beta, gamma=gamma, ports=args.ports)
    except ValueError as e:
        raise CLIError(str(e)) from None


def _model_dict(m: Hockney) -> dict[str, Any]:
    return {
        "name": "hockney",
        "alpha_s": m.alpha,
        "beta_s_per_byte": m.beta,
        "gamma_s_per_byte": m.gamma,
        "ports": m.ports,
    }


def _model_label(m: Hockney) -> str:
    def inv(x: float) -> str:
        return "0s/B" if x == 0 else f"1/({units.format_bandwidth(1 / x)})"

    return (
        f"Hockney alpha={units.format_time(m.alpha)} beta={inv(m.beta)} gamma={inv(m.gamma)} "
        f"{m.ports}-port"
    )


def _load_file(path: str) -> Schedule:
    from commsim import _serialize

    try:
        return _serialize.load(path)
    except OSError as e:  # a directory, permissions: whatever load did not word itself
        raise CLIError(f"{path}: cannot read ({e.strerror or e})") from None


def _file_excludes(args: argparse.Namespace) -> None:
    given = [
        f
        for f, v in (
            ("-c", args.collective),
            ("-a", args.algorithm),
            ("-p", args.nranks),
            ("--param", args.param),
            ("--root", args.root),
        )
        if v
    ]
    if given:
        raise CLIError(f"--file takes the schedule from the file; drop {', '.join(given)}")


# ---------------------------------------------------------------------------------------------
# memory


@dataclasses.dataclass(frozen=True)
class _Budget:
    limit: float
    why: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> _Budget:
        if getattr(args, "memory_limit", None):
            return cls(units.parse_size(args.memory_limit), "--memory-limit")
        try:
            ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):  # not POSIX: assume a small machine
            ram = 8 * 2**30
        return cls(ram * _RAM_FRACTION, f"{_RAM_FRACTION:.0%} of {_bytes(ram)} RAM")

    def check(self, p: int, need: float, what: str, limit: float | None = None) -> None:
        limit = self.limit if limit is None else min(limit, self.limit)
        if need > limit:
            why = self.why if limit == self.limit else "the verifier's limit"
            raise CLIError(
                f"p={p} needs about {_bytes(need)} ({what}), more than the {_bytes(limit)} "
                f"available ({why}); use a smaller p"
            )


def _bytes(x: float) -> str:
    return f"{x / 2**30:.1f} GiB" if x >= 0.1 * 2**30 else f"{x / 2**20:.1f} MiB"


def _build(
    collective: str,
    algorithm: str,
    p: int,
    params: dict[str, Any],
    budget: _Budget,
    root: int | None,
) -> Schedule:
    """Build lazily, refusing a ``p`` whose bare O(p) arrays would not fit."""
    budget.check(p, p * _MIN_BYTES_PER_RANK, f"{_MIN_BYTES_PER_RANK} B per rank to build")
    kwargs = dict(params)
    if root is not None:
        kwargs["root"] = root
    try:
        return build(collective, algorithm, p, **kwargs)
    except MemoryError:
        raise CLIError(f"p={p}: out of memory building {collective}/{algorithm}") from None


def _step_transfers(s: Schedule) -> int:
    known = s.known_max_step_transfers  # never iterate a schedule just to size it
    return s.nranks if known is None else max(int(known), s.nranks)


def _check_predict_memory(s: Schedule, nsizes: int, budget: _Budget) -> None:
    t = _step_transfers(s)
    need = t * (_PREDICT_BYTES_PER_TRANSFER + 8 * nsizes) + 8 * nsizes * (3 * s.nranks + s.nsteps)
    budget.check(s.nranks, need, f"{t} transfers in a step x {nsizes} sizes to predict")


def _check_verify_memory(s: Schedule, budget: _Budget) -> None:
    from commsim import _verify

    need = s.estimate_bytes()["verify"] + _step_transfers(s) * 8 * 12
    hard = _verify.MEMORY_LIMIT
    budget.check(s.nranks, need, f"{s.nranks} ranks x {s.nslots} slots of verifier state", hard)


# ---------------------------------------------------------------------------------------------
# progress


class _Progress:
    """A text progress bar on stderr, advanced by the steps the consumers pull from schedules.

    On a terminal it is a bar redrawn in place; elsewhere (a log file) one line per 10%.
    ``enabled=None`` (auto) shows it once the run has lasted 0.5 s on a terminal, 10 s elsewhere,
    so short runs stay quiet; ``True`` shows it from the start; ``False`` never.
    """

    def __init__(self, total: float, enabled: bool | None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.enabled = enabled is not False
        self.delay = 0.0 if enabled else (0.5 if self.tty else 10.0)
        self.total = max(total, 1.0)
        self.done = 0.0
        self.label = ""
        self.t0 = time.monotonic()
        self.last_draw = 0.0
        self.last_decile = -1
        self.drawn = False

    def track(self, s: Schedule, label: str) -> tuple[Schedule, list[int]]:
        """``s`` with a step function that advances the bar; also counts transfers into ``[n]``."""
        counter = [0]
        weight = float(s.nranks)

        def step_fn(i: int) -> Any:
            st = s.step(i)
            counter[0] += len(st.src)
            self.advance(weight, label)
            return st

        return s.replace(step_fn=step_fn), counter

    def advance(self, amount: float, label: str) -> None:
        self.done += amount
        self.label = label
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.t0 < self.delay or now - self.last_draw < 0.1:
            return
        self.last_draw = now
        frac = min(self.done / self.total, 1.0)
        elapsed = now - self.t0
        if self.tty:
            bar = "#" * int(frac * 30)
            self.stream.write(f"\r[{bar:<30}] {frac:4.0%} {elapsed:5.1f}s  {label[:40]:<40}")
            self.drawn = True
        elif int(frac * 10) > self.last_decile:
            self.last_decile = int(frac * 10)
            self.stream.write(f"commsim: {frac:.0%} done after {elapsed:.1f}s ({label})\n")
        self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r" + " " * 82 + "\r")
            self.stream.flush()


# ---------------------------------------------------------------------------------------------
# output


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> str:
    """Columns padded to their widest cell; ``align`` is one ``l``/``r`` per column.

    A cell may hold several lines (wrapped text); its row then spans that many lines.
    """
    cells = [[h.split("\n") for h in headers]] + [[str(c).split("\n") for c in r] for r in rows]
    widths = [max(len(line) for row in cells for line in row[j]) for j in range(len(headers))]
    out = []
    for n, row in enumerate(cells):
        for k in range(max(len(c) for c in row)):
            parts = []
            for j, c in enumerate(row):
                text = c[k] if k < len(c) else ""
                parts.append(text.rjust(widths[j]) if align[j] == "r" else text.ljust(widths[j]))
            out.append("  ".join(parts).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _plain(x: Any) -> Any:
    """JSON-safe data: numpy to Python, non-finite floats to ``None``."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _print_json(doc: Any) -> None:
    print(json.dumps(_plain(doc), indent=2, allow_nan=False))


def _ratio(t: float, bound: float) -> str:
    return f"{t / bound:.2f}x" if bound > 0 and math.isfinite(t) else "-"


def _bw(x: float) -> str:
    return units.format_bandwidth(x) if math.isfinite(x) else "-"


# ---------------------------------------------------------------------------------------------
# commands


def _cmd_algorithms(args: argparse.Namespace) -> int:
    collective = _collective(args) if args.collective else None
    if args.algorithm and collective is None:
        raise CLIError("-a needs -c (which collective's algorithm?)")
    if args.algorithm:
        rows = [info(collective, args.algorithm)]  # type: ignore[arg-type]
    else:
        rows = [r for r in REGISTRY.values() if collective in (None, r.collective)]
        rows.sort(key=lambda r: (COLLECTIVES.index(r.collective), r.name))
    if args.json:
        _print_json(
            [
                {
                    "collective": r.collective,
                    "name": r.name,
                    "params": r.params,
                    "constraints": r.constraints,
                    "cost": r.cost,
                    "reference": r.reference,
                }
                for r in rows
            ]
        )
        return EXIT_OK
    if not rows:
        print(f"no {collective} algorithms are registered yet")
        return EXIT_OK
    if args.algorithm:
        r = rows[0]
        print(f"{r.collective}/{r.name}\n")
        print(f"cost:        {r.cost}\nconstraints: {r.constraints}")
        print(f"parameters:  {_param_text(r.params)}\nreference:   {r.reference or '-'}\n")
        print(r.doc)
        return EXIT_OK
    width = max(shutil.get_terminal_size((120, 24)).columns, 100)
    fixed = max(len(r.collective) for r in rows) + max(len(r.name) for r in rows) + 2 * 4
    param_w = min(max(len(_param_text(r.params)) for r in rows), 20)
    free = max(width - fixed - param_w - 2, 40)
    cons_w, cost_w = free * 2 // 5, free - free * 2 // 5

    def wrap(text: str, w: int) -> str:
        return "\n".join(textwrap.wrap(text, w, break_on_hyphens=False)) or "-"

    table = [
        [
            r.collective,
            r.name,
            wrap(_param_text(r.params), param_w),
            wrap(r.constraints, cons_w),
            wrap(r.cost, cost_w),
        ]
        for r in rows
    ]
    print(_table(["collective", "algorithm", "parameters", "constraints", "cost"], table, "lllll"))
    print(
        "\nn = message size (bytes), p = ranks. Details: commsim algorithms -c COLLECTIVE -a NAME"
    )
    return EXIT_OK


def _param_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items() if k != "root") or "-"


def _cmd_verify(args: argparse.Namespace) -> int:
    budget = _Budget.from_args(args)
    if args.file:
        _file_excludes(args)
        s = _load_file(args.file)
        _check_verify_memory(s, budget)
        jobs = [(s.kind, s.name, s)]
    else:
        collective = _collective(args)
        algos = _algorithms(args, collective, default_all=True)
        ps = _rank_counts(args, single=False)
        raw = _raw_params(args.param)
        _check_params_known(collective, algos, raw)
        jobs = []
        for a in algos:  # build (lazily) and check memory for all before running any
            for p in ps:
                s = _build(collective, a, p, _params_for(collective, a, raw), budget, args.root)
                _check_verify_memory(s, budget)
                jobs.append((collective, a, s))
    progress = _Progress(sum(s.nsteps * s.nranks for *_, s in jobs), args.progress)
    results = []
    try:
        for collective, name, s in jobs:
            tracked, _ = progress.track(s, f"verify {name} p={s.nranks}")
            row: dict[str, Any] = {
                "collective": collective,
                "algorithm": name,
                "nranks": s.nranks,
                "params": s.params,
                "nsteps": s.nsteps,
            }
            try:
                v = commsim.verify(tracked)
            except ScheduleError as e:
                row.update(ok=False, error=_one_line(e), step=e.step, rank=e.rank, slot=e.slot)
            else:
                row.update(ok=True, ntransfers=v.ntransfers, seconds=v.seconds)
            results.append(row)
    finally:
        progress.close()
    failed = [r for r in results if not r["ok"]]
    if args.json:
        _print_json(results)
    else:
        table = [
            [
                r["collective"],
                r["algorithm"],
                str(r["nranks"]),
                str(r["nsteps"]),
                f"{r['ntransfers']:,}" if r["ok"] else "-",
                units.format_time(r["seconds"]) if r["ok"] else "-",
                "OK" if r["ok"] else "FAILED",
            ]
            for r in results
        ]
        print(
            _table(
                ["collective", "algorithm", "p", "steps", "transfers", "verified in", "result"],
                table,
                "llrrrrl",
            )
        )
        if failed:
            print(f"\n{len(failed)} of {len(results)} failed:")
            for r in failed:
                print(f"  {r['algorithm']} p={r['nranks']}: {r['error']}")
    for r in failed:
        print(f"commsim: verification failed: {r['error']}", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _cmd_predict(args: argparse.Namespace) -> int:
    budget = _Budget.from_args(args)
    sizes = _sizes(args)
    model = _model(args)
    if args.file:
        _file_excludes(args)
        s = _load_file(args.file)
    else:
        collective = _collective(args)
        algos = _algorithms(args, collective, default_all=False)
        if len(algos) > 1:
            raise CLIError(f"predict takes one algorithm, got {args.algorithm!r}; use compare")
        algo = algos[0]
        (p,) = _rank_counts(args, single=True)
        raw = _raw_params(args.param)
        _check_params_known(collective, [algo], raw)
        s = _build(collective, algo, p, _params_for(collective, algo, raw), budget, args.root)
    _check_predict_memory(s, len(sizes), budget)
    progress = _Progress(s.nsteps * s.nranks, args.progress)
    tracked, ntransfers = progress.track(s, f"predict {s.name} p={s.nranks}")
    try:
        pred = model.predict(tracked, sizes)
    finally:
        progress.close()
    p = s.nranks
    bound = np.array(
        [lower_bound(s.kind, p, n, model.alpha, model.beta, model.gamma) for n in sizes]
    )
    with np.errstate(invalid="ignore"):  # p = 1: time 0, algbw inf, busbw factor 0
        times, algbw, busbw = (
            np.atleast_1d(np.asarray(x, float)) for x in (pred.time, pred.algbw, pred.busbw)
        )
    if args.json:
        _print_json(
            {
                "collective": s.kind,
                "root": s.root,
                "algorithm": s.name,
                "nranks": p,
                "params": s.params,
                "nsteps": s.nsteps,
                "ntransfers": ntransfers[0],
                "model": _model_dict(model),
                "results": [
                    {
                        "nbytes": int(n),
                        "time_s": t,
                        "algbw_Bps": a,
                        "busbw_Bps": b,
                        "lower_bound_s": lb,
                        "ratio_to_bound": t / lb if lb > 0 else None,
                    }
                    for n, t, a, b, lb in zip(sizes, times, algbw, busbw, bound, strict=True)
                ],
            }
        )
        return EXIT_OK
    root = f" root={s.root}" if s.collective.rooted else ""
    params = f" {_param_text(s.params)}" if _param_text(s.params) != "-" else ""
    print(f"{s.kind}{root} {s.name}{params}, p={p}: {s.nsteps} steps, {ntransfers[0]:,} transfers")
    print(f"model: {_model_label(model)}; bound: Chan et al. 2007 lower bound\n")
    table = [
        [
            units.format_size(int(n)),
            units.format_time(t),
            _bw(a),
            _bw(b),
            units.format_time(lb),
            _ratio(t, lb),
        ]
        for n, t, a, b, lb in zip(sizes, times, algbw, busbw, bound, strict=True)
    ]
    print(_table(["size", "time", "algbw", "busbw", "bound", "time/bound"], table, "rrrrrr"))
    return EXIT_OK


def _cmd_compare(args: argparse.Namespace) -> int:
    budget = _Budget.from_args(args)
    collective = _collective(args)
    algos = _algorithms(args, collective, default_all=True)
    ps = _rank_counts(args, single=False)
    sizes = _sizes(args)
    model = _model(args)
    raw = _raw_params(args.param)
    _check_params_known(collective, algos, raw)
    plot_path = _check_plot_path(args.plot) if args.plot else None
    # build everything lazily first: failures and memory skips are known before the long part
    panels: list[dict[str, Any]] = []
    for p in ps:
        panel: dict[str, Any] = {"nranks": p, "schedules": {}, "skipped": {}}
        for a in algos:
            params = _params_for(collective, a, raw)  # a bad value is an error, not a skip
            try:
                s = _build(collective, a, p, params, budget, args.root)
                _check_predict_memory(s, len(sizes), budget)
            except (CLIError, ScheduleError) as e:
                panel["skipped"][a] = _one_line(e)
                continue
            panel["schedules"][a] = s
        panels.append(panel)
    if not any(panel["schedules"] for panel in panels):
        reasons = {r for panel in panels for r in panel["skipped"].values()}
        raise CLIError("nothing to compare: " + "; ".join(sorted(reasons)))
    total = sum(s.nsteps * s.nranks for panel in panels for s in panel["schedules"].values())
    progress = _Progress(total, args.progress)
    try:
        for panel in panels:
            p = panel["nranks"]
            panel["times"] = {}
            for a, s in panel["schedules"].items():
                tracked, _ = progress.track(s, f"p={p} {a}")
                panel["times"][a] = np.atleast_1d(np.asarray(model.predict(tracked, sizes).time))
            panel["bound"] = np.array(
                [lower_bound(collective, p, n, model.alpha, model.beta, model.gamma) for n in sizes]
            )
            names = list(panel["times"])
            panel["winner"] = []
            if names:
                stacked = np.stack([panel["times"][a] for a in names])
                panel["winner"] = [names[i] for i in np.argmin(stacked, axis=0)]
    finally:
        progress.close()
    if plot_path is not None:
        from commsim import _plot

        plot_panels = [pn for pn in panels if pn["times"]]
        _plot.plot_compare(plot_path, collective, _model_label(model), sizes, plot_panels)
    if args.json:
        _print_json(
            {
                "collective": collective,
                "model": _model_dict(model),
                "sizes": sizes.astype(np.int64),
                "algorithms": algos,
                "results": [
                    {
                        "nranks": pn["nranks"],
                        "time_s": pn["times"],
                        "lower_bound_s": pn["bound"],
                        "winner": pn["winner"],
                        "skipped": pn["skipped"],
                    }
                    for pn in panels
                ],
                "plot": str(plot_path) if plot_path else None,
            }
        )
        return EXIT_OK
    print(f"{collective}: predicted time; model: {_model_label(model)}")
    print("* marks the fastest algorithm per size; bound: Chan et al. 2007 lower bound")
    for pn in panels:
        _print_panel(collective, sizes, pn)
    if plot_path is not None:
        print(f"\nplot written to {plot_path}")
    return EXIT_OK


def _print_panel(collective: str, sizes: np.ndarray, pn: dict[str, Any]) -> None:
    print(f"\n{collective}, p={pn['nranks']}")
    names = list(pn["times"])
    if names:
        rows = []
        for j, n in enumerate(sizes):
            win = pn["winner"][j]
            cells = [
                units.format_time(pn["times"][a][j]) + ("*" if a == win else " ") for a in names
            ]
            t_win, lb = pn["times"][win][j], pn["bound"][j]
            rows.append(
                [units.format_size(int(n)), *cells, units.format_time(lb), win, _ratio(t_win, lb)]
            )
        headers = ["size", *(f"{a} " for a in names), "bound", "winner", "winner/bound"]
        print(_table(headers, rows, "r" + "r" * len(names) + "rlr"))
        print("fastest: " + _ranges(sizes, pn["winner"]))
    for a, why in pn["skipped"].items():
        print(f"note: skipped {a}: {why}")


def _ranges(sizes: np.ndarray, winners: Sequence[str]) -> str:
    """``"a for 1KiB..16KiB, b for 32KiB..1GiB"``: runs of equal winners over the sizes."""
    runs: list[tuple[str, int, int]] = []
    for j, w in enumerate(winners):
        if runs and runs[-1][0] == w:
            runs[-1] = (w, runs[-1][1], j)
        else:
            runs.append((w, j, j))

    def span(i: int, k: int) -> str:
        lo, hi = units.format_size(int(sizes[i])), units.format_size(int(sizes[k]))
        return lo if i == k else f"{lo}..{hi}"

    return ", ".join(f"{w} for {span(i, k)}" for w, i, k in runs)


def _check_plot_path(text: str) -> Path:
    path = Path(text)
    if path.suffix.lower() not in _PLOT_FORMATS:
        raise CLIError(f"--plot {text!r}: the name must end in {', '.join(_PLOT_FORMATS)}")
    if not path.parent.is_dir():
        raise CLIError(f"--plot {text!r}: directory {str(path.parent)!r} does not exist")
    return path


# ---------------------------------------------------------------------------------------------
# the command table and main


@dataclasses.dataclass(frozen=True)
class _Command:
    name: str
    help: str
    description: str
    examples: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    show_units: bool = True


def _algorithms_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--collective", metavar="C", help="only this collective's algorithms")
    p.add_argument("-a", "--algorithm", metavar="A", help="show one algorithm in full (needs -c)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")


def _verify_args(p: argparse.ArgumentParser) -> None:
    _add_schedule_args(p, many_algorithms=True, many_p=True, file=True)
    _add_common_args(p, sweep=True)


def _predict_args(p: argparse.ArgumentParser) -> None:
    _add_schedule_args(p, many_algorithms=False, many_p=False, file=True)
    _add_model_args(p)
    _add_common_args(p, sweep=True)


def _compare_args(p: argparse.ArgumentParser) -> None:
    _add_schedule_args(p, many_algorithms=True, many_p=True, file=False)
    _add_model_args(p)
    output = _add_common_args(p, sweep=True)
    output.add_argument(
        "--plot",
        metavar="FILE",
        help="also write a log-log figure of time vs size (.png, .pdf or .svg): one panel per p, "
        "one line per algorithm, the lower bound dashed",
    )


COMMANDS: tuple[_Command, ...] = (
    _Command(
        "algorithms",
        "list the registered algorithms with their parameters, constraints and cost",
        "List every registered (collective, algorithm) with its parameters and their defaults,\n"
        "the rank counts it handles, and its alpha-beta-gamma cost formula (n = message size,\n"
        "p = ranks). With -c and -a, print one algorithm's full documentation.",
        "  commsim algorithms\n"
        "  commsim algorithms -c allreduce\n"
        "  commsim algorithms -c allreduce -a ring\n"
        "  commsim algorithms --json",
        _algorithms_args,
        _cmd_algorithms,
        show_units=False,
    ),
    _Command(
        "verify",
        "prove that schedules compute their collective",
        "Build each schedule and run it on random integers with the reference interpreter,\n"
        "checking every rank's final buffer, write races and reads of empty slots. Prints steps,\n"
        "transfers and the time taken; exit status 1 if any schedule fails (the error names the\n"
        "step, rank and slot), 2 on bad input. Memory is about p x slots x 17-46 bytes; a p that\n"
        "would not fit is refused before anything runs.",
        "  commsim verify -c allreduce -a ring -p 8\n"
        "  commsim verify -c allreduce -p 2..64              # every allreduce algorithm\n"
        "  commsim verify -c allreduce -a ring,rabenseifner -p 3,5,8,1000\n"
        "  commsim verify -c broadcast -a binomial -p 7 --root 3\n"
        "  commsim verify --file my_schedule.json",
        _verify_args,
        _cmd_verify,
    ),
    _Command(
        "predict",
        "predict one algorithm's time, algbw and busbw over message sizes",
        "Time one schedule under the Hockney alpha-beta-gamma model (per-rank clocks) for each\n"
        "message size. Columns: time; algbw = size/time and busbw = algbw x nccl-tests' factor\n"
        "(decimal GB/s, as nccl-tests reports); the Chan et al. 2007 lower bound no algorithm can\n"
        "beat under the same model, and the ratio to it.",
        "  commsim predict -c allreduce -a ring -p 64 --sizes 1KiB..1GiB\n"
        "  commsim predict -c allreduce -a ring -p 64 -s 64MiB --beta 200Gb/s --alpha 1.5us\n"
        "  commsim predict -c allgather -a ring -p 1024 -s 1MiB,1GiB --ports multi --json\n"
        "  commsim predict --file my_schedule.json -s 1MiB",
        _predict_args,
        _cmd_predict,
    ),
    _Command(
        "compare",
        "compare algorithms' predicted times over rank counts and sizes; pick the fastest",
        "For each rank count, a table of predicted times (rows: sizes, columns: algorithms) with\n"
        "the fastest marked * and named in the 'winner' column, next to the lower bound. By\n"
        "default every algorithm of the collective takes part; one whose schedule would not fit\n"
        "in memory (or does not support a p) is skipped with a note. Long sweeps show a\n"
        "progress bar on stderr.",
        "  commsim compare -c allreduce -p 64\n"
        "  commsim compare -c allreduce -a ring,rabenseifner -p 8,64,1024 -s 1KiB..1GiB:x4\n"
        "  commsim compare -c allreduce -p 2..1024 -s 4KiB,64MiB --plot allreduce.png\n"
        "  commsim compare -c allgather -p 128 --alpha 5us --beta 400Gb/s --json",
        _compare_args,
        _cmd_compare,
    ),
    _Command(
        "validate",
        _cli_validate.HELP,
        _cli_validate.DESCRIPTION,
        _cli_validate.EXAMPLES,
        _cli_validate.add_arguments,
        _cli_validate.main,
    ),
    _Command(
        "run",
        _cli_run.HELP,
        _cli_run.DESCRIPTION,
        _cli_run.EXAMPLES,
        _cli_run.add_arguments,
        _cli_run.main,
    ),
)


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    top = _Parser(
        prog="commsim",
        description="Collective-communication algorithms as schedules: list them, verify them, "
        "predict and compare their cost.",
        epilog="commands:\n"
        + "\n".join(f"  {c.name:<12}{c.help}" for c in COMMANDS)
        + "\n\nRun 'commsim COMMAND --help' for a command's options and examples.\n"
        "Exit status: 0 ok, 1 verification failed, 2 bad input.",
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    top.add_argument("--version", action="version", version=f"commsim {commsim.__version__}")
    sub = top.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=_Parser, help="one of the commands below"
    )
    subparsers = {}
    for c in COMMANDS:
        epilog = "examples:\n" + c.examples + "\n"
        if c.show_units:
            epilog += "\n" + _UNITS_EPILOG
        if c.name in ("predict", "compare"):
            epilog += "\n" + _MODEL_EPILOG
        sp = sub.add_parser(  # no help=: the epilog lists the commands, aligned
            c.name,
            description=c.description,
            epilog=epilog,
            formatter_class=_Formatter,
            allow_abbrev=False,
        )
        c.add_arguments(sp)
        sp.set_defaults(_run=c.run)
        subparsers[c.name] = sp
    return top, subparsers


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``commsim`` command line; return the exit status (see the module docstring)."""
    parser, subparsers = _parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # report it against the subcommand, whose --help is the one to read
            sub = subparsers.get(getattr(args, "command", None) or "", parser)
            sub.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:  # --help, --version, or a usage error already printed
        return int(e.code or 0) if not isinstance(e.code, str) else EXIT_USAGE
    if args.command is None:
        names = ", ".join(c.name for c in COMMANDS)
        print(f"commsim: error: choose a command: {names} (see 'commsim --help')", file=sys.stderr)
        return EXIT_USAGE
    try:
        return args._run(args)
    except CommsimError as e:
        print(f"commsim: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("commsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `commsim ... | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
