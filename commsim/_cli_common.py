"""The command line's shared parts: argument groups, parsing arguments into objects, exit
codes, the memory budget. Used by :mod:`commsim.cli` and every ``_cli_*`` subcommand module."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import shutil
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from commsim import units
from commsim._collectives import COLLECTIVES
from commsim._ir import Schedule
from commsim.algorithms import available, build, info
from commsim.errors import CommsimError
from commsim.models import Hockney

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
    known = s.max_step_transfers_hint  # never iterate a schedule just to size it
    return s.nranks if known is None else max(int(known), s.nranks)


def _check_predict_memory(s: Schedule, nsizes: int, budget: _Budget) -> None:
    t = _step_transfers(s)
    need = t * (_PREDICT_BYTES_PER_TRANSFER + 8 * nsizes) + 8 * nsizes * (3 * s.nranks + s.nsteps)
    budget.check(s.nranks, need, f"{t} transfers in a step x {nsizes} sizes to predict")


def _check_verify_memory(s: Schedule, budget: _Budget) -> None:
    from commsim import _verify

    need = _verify.memory_estimate(s)
    hard = _verify.MEMORY_LIMIT
    budget.check(s.nranks, need, f"{s.nranks} ranks x {s.nslots} slots of verifier state", hard)
