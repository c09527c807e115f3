"""``commsim export``: write a schedule for another tool (MSCCL-IR XML, LogGOPSim GOAL)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from commsim import interop, units
from commsim._ir import Schedule
from commsim.cli.arguments import int_type
from commsim.cli.errors import EXIT_OK, UsageError
from commsim.cli.memory import MemoryBudget
from commsim.cli.output import to_json
from commsim.cli.schedules import ScheduleChoice, ScheduleFile, ScheduleGroup

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "ExportRequest",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "write a schedule as MSCCL-IR XML or LogGOPSim GOAL"
DESCRIPTION = """\
Write one schedule in another tool's format. msccl: the XML algorithm file Microsoft's
MSCCL executor runs (put it in the directory named by MSCCL_ALGO_DIR): slots become
chunks, the collective's data the input/output buffers, scratch the scratch buffer;
one thread block per peer, receive-then-forward fused into rcs/rrs/rrcs unless --no-fuse.
A schedule past the executor's limits (64 steps per thread block, 32 channels, 32 peers
per channel) is refused with the limit named. goal: LogGOPSim's text schedule at one
message size (--size), each rank's sends, receives and reductions chained in the order
commsim's LogGP model charges them; compile it with txt2bin and simulate it with
LogGOPSim to cross-check 'commsim predict --model loggp' (docs/interop.md). The format
comes from --format or the suffix of -o (.xml, .goal); without -o the file goes to
standard output and a one-line summary to standard error."""
EXAMPLES = """\
  commsim export -c allreduce -a ring -p 8 --format msccl -o ring8.xml
  commsim export -c allreduce -a ring -p 8 -o ring8_ll.xml --proto LL --channels 2
  commsim export -c alltoall -a bruck -p 16 -o bruck.xml --no-fuse --json
  commsim export -c allreduce -a rabenseifner -p 16 --size 1MiB -o rab16.goal
  commsim export --file my_schedule.json --format goal --size 64KiB > mine.goal"""

SCHEDULES = ScheduleGroup("export", file=True)
_MSCCL_FLAGS = ("proto", "channels", "min_bytes", "max_bytes", "no_fuse", "in_place")
_GOAL_FLAGS = ("size", "gamma")


@dataclasses.dataclass(frozen=True)
class ExportRequest:
    """Export the schedule of ``schedules`` as ``fmt`` to ``output`` (``None``: stdout)."""

    schedules: ScheduleChoice | ScheduleFile
    fmt: str
    output: Path | None
    options: dict[str, Any]
    as_json: bool = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SCHEDULES.add(parser)
    g = parser.add_argument_group("export")
    g.add_argument(
        "--format",
        choices=("msccl", "goal"),
        help="msccl (MSCCL-IR XML) or goal (LogGOPSim); default: from the suffix of -o",
    )
    g.add_argument("-o", "--output", metavar="FILE", help="the file to write (default: stdout)")
    m = parser.add_argument_group("msccl")
    m.add_argument(
        "--proto",
        choices=interop.PROTOCOLS,
        help="the MSCCL protocol (default: Simple)",
    )
    m.add_argument(
        "--channels",
        type=int_type("--channels", 1),
        metavar="N",
        help="copies of the program on N channels, each moving 1/N of every chunk (default 1)",
    )
    m.add_argument("--min-bytes", metavar="SIZE", help="smallest size it serves (default 0)")
    m.add_argument("--max-bytes", metavar="SIZE", help="largest size it serves (default: any)")
    m.add_argument(
        "--no-fuse",
        action="store_true",
        default=None,
        help="keep receive and forward as separate s/r steps (no rcs/rrs/rrcs)",
    )
    m.add_argument(
        "--in-place",
        action="store_true",
        default=None,
        help="serve NCCL's in-place calls (default: out-of-place)",
    )
    goal = parser.add_argument_group("goal")
    goal.add_argument("--size", metavar="SIZE", help="the collective's size in bytes, e.g. 1MiB")
    goal.add_argument(
        "--gamma",
        type=float,
        metavar="T",
        help="calc time per byte reduced, in LogGOPSim's time unit (default 0)",
    )
    g.add_argument("--json", action="store_true", help="print the summary as JSON")


def _format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    if args.output and interop.format_of(args.output).name in ("msccl", "goal"):
        return interop.format_of(args.output).name
    raise UsageError("give --format msccl or --format goal (or an -o FILE ending .xml or .goal)")


def parse(args: argparse.Namespace) -> ExportRequest:
    fmt = _format(args)
    other = "goal" if fmt == "msccl" else "msccl"
    mine, theirs = (_MSCCL_FLAGS, _GOAL_FLAGS) if fmt == "msccl" else (_GOAL_FLAGS, _MSCCL_FLAGS)
    wrong = [f"--{f.replace('_', '-')}" for f in theirs if getattr(args, f) is not None]
    if wrong:
        raise UsageError(f"{', '.join(wrong)}: only for --format {other}, not {fmt}")
    if fmt == "goal":
        if args.size is None:
            raise UsageError("a GOAL file needs the message size: add --size, e.g. --size 1MiB")
        options = {"nbytes": units.parse_size(args.size), "gamma": args.gamma or 0.0}
    else:
        given = {f: getattr(args, f) for f in mine if getattr(args, f) is not None}
        options = {
            "proto": given.get("proto", "Simple"),
            "nchannels": given.get("channels", 1),
            "fuse": not given.get("no_fuse", False),
            "inplace": bool(given.get("in_place", False)),
            "min_bytes": units.parse_size(given.get("min_bytes", "0")),
            "max_bytes": units.parse_size(given.get("max_bytes", "0")),
        }
    output = Path(args.output) if args.output and args.output != "-" else None
    if args.json and output is None:
        raise UsageError("--json prints the summary; give the file to write with -o")
    return ExportRequest(SCHEDULES.parse(args), fmt, output, options, args.json)


def compute(request: ExportRequest) -> tuple[Schedule, Any]:
    """The schedule and its export (an :class:`~commsim.interop.MscclProgram` or
    :class:`~commsim.interop.GoalProgram`); the executor's refusals raise ResourceError."""
    budget = MemoryBudget.parse(None)
    (schedule,) = request.schedules.build_all(budget)
    budget.check_export(schedule, request.fmt)  # before a gigabyte of text is built
    if request.fmt == "msccl":
        return schedule, interop.msccl_program(schedule, **request.options)
    return schedule, interop.goal_program(schedule, **request.options)


def render(request: ExportRequest, schedule: Schedule, program: Any) -> str:
    where = str(request.output) if request.output else "standard output"
    info = {"file": where, "format": request.fmt, "algorithm": schedule.algorithm,
            **program.summary()}  # fmt: skip
    if request.as_json:
        return to_json(info)
    what = f"{schedule.collective}/{schedule.algorithm} p={schedule.nranks}"
    if request.fmt == "msccl":
        p = program
        return (
            f"wrote {where}: MSCCL-IR of {what}, {p.proto}, {p.nchannels} channel(s), "
            f"{p.nchunksperloop} chunks per loop; {p.nthreadblocks} thread block(s) per rank, at "
            f"most {p.max_tb_steps} steps each; {p.nsends} sends for {p.nmessages} messages, "
            f"{p.nfused} fused, {p.nnops} nops"
        )
    return (
        f"wrote {where}: GOAL of {what} at {units.format_size(program.nbytes)}; "
        f"{program.nsends} sends, {program.nrecvs} receives, {program.ncalcs} calcs, "
        f"{program.nrequires} requires"
    )


def main(args: argparse.Namespace) -> int:
    request = parse(args)
    schedule, program = compute(request)
    text = program.xml if request.fmt == "msccl" else program.text
    if request.output is None:
        sys.stdout.write(text)
        print(render(request, schedule, program), file=sys.stderr)
        return EXIT_OK
    try:
        request.output.write_text(text)
    except OSError as e:
        raise UsageError(f"{request.output}: cannot write ({e.strerror or e})") from None
    print(render(request, schedule, program))
    return EXIT_OK
