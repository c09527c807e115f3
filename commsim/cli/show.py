"""``commsim show``: see a schedule, step by step (a diagram, or the table of its messages)."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import Any

from commsim._ir import Schedule
from commsim.cli.errors import EXIT_OK, UsageError, quote
from commsim.cli.memory import MemoryBudget
from commsim.cli.output import format_table, to_json
from commsim.cli.schedules import ScheduleChoice, ScheduleFile, ScheduleGroup
from commsim.viz import MAX_RANKS, MAX_STEPS, MessageRow, check_drawable, message_rows

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "ShowRequest",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "draw a schedule step by step, or list its messages"
DESCRIPTION = f"""\
See what a schedule does. With -o, draw it: one row per rank, each rank's buffer a strip of
cells (one per slot), one column of buffers per step boundary, and between them the step's
messages as arrows from sender to receiver, labelled with the slots they carry. A cell's
colour and number say what the slot holds at that point: for a reducing collective, how many
ranks' inputs it has summed; for the others, whose input it holds. Solid red arrows reduce
(the receiver adds the data into its slots, marked ⊕), dashed blue ones copy (the receiver
overwrites). Read Rabenseifner at p=8: three steps of recursive halving, each halving the slots
a rank is responsible for while doubling the inputs summed in them, then three of recursive
doubling that copy the finished slots back out.

Without -o, print the schedule's messages as a table: per step, who sends which slots to whom
and whether the receiver reduces; --json prints the same as one document (slot ranges are
half-open [lo, hi) pairs). Drawings are for p <= {MAX_RANKS} (readable to p = 16); long schedules
wrap into lines of steps, and at most {MAX_STEPS} steps are drawn unless --steps picks a range."""
EXAMPLES = """\
  commsim show -c allreduce -a rabenseifner -p 8 -o rab8.png   # halving, then doubling
  commsim show -c allreduce -a ring -p 8 -o ring8.svg          # reduce-scatter, then allgather
  commsim show -c allreduce -a rabenseifner -p 5 -o rab5.png   # the fold for p not a power of 2
  commsim show -c broadcast -a binomial -p 8 --root 3 -o bcast.png
  commsim show -c allreduce -a ring -p 32 --steps 0..3 -o ring32.png
  commsim show -c allgather -a bruck -p 6                      # the message table
  commsim show -c allreduce -a double_binary_tree -p 8 --param segments=2 --json
  commsim show --file my_schedule.json -o mine.png"""

SCHEDULES = ScheduleGroup("show", file=True)
MAX_LISTED = 200_000  # transfers in a message table
_STEPS = re.compile(r"\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?")


@dataclasses.dataclass(frozen=True)
class ShowRequest:
    """Draw ``schedule``'s ``steps`` to ``output``, or list its messages (``output`` None)."""

    schedules: ScheduleChoice | ScheduleFile
    output: Path | None = None
    steps: tuple[int, int] | None = None  # first and last step, inclusive
    as_json: bool = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SCHEDULES.add(parser)
    g = parser.add_argument_group("output")
    g.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="draw the schedule to FILE (.png, .svg or .pdf: the suffix picks the format)",
    )
    g.add_argument(
        "--steps",
        metavar="A..B",
        help=f"only steps A to B (inclusive, from 0), or one step A (default: the first {MAX_STEPS})",
    )
    g.add_argument(
        "--json", action="store_true", help="print the message table as one JSON document"
    )


def _parse_steps(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    m = _STEPS.fullmatch(text)
    if not m:
        raise UsageError(f"--steps expects A..B or A (step numbers from 0), got {quote(text)}")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) is not None else first
    if last < first:
        raise UsageError(f"--steps {text}: the last step comes before the first")
    return first, last


def parse(args: argparse.Namespace) -> ShowRequest:
    schedules = SCHEDULES.parse(args)
    if isinstance(schedules, ScheduleChoice) and args.output:
        check_drawable(schedules.nranks[0])  # before anything is built
    if args.output and args.json:
        raise UsageError("-o draws the schedule and --json prints its messages; give one")
    output = Path(args.output) if args.output else None
    return ShowRequest(schedules, output, _parse_steps(args.steps), args.json)


def _steps(schedule: Schedule, steps: tuple[int, int] | None) -> range | None:
    if steps is None:
        return None
    first, last = steps
    if last >= schedule.nsteps:
        raise UsageError(
            f"--steps {first}..{last}: {schedule.algorithm} (p={schedule.nranks}) has "
            f"{schedule.nsteps} steps, 0..{schedule.nsteps - 1}"
        )
    return range(first, last + 1)


def compute(request: ShowRequest) -> tuple[Schedule, Path | list[MessageRow]]:
    """The schedule, and the file drawn (with ``output``) or its message rows."""
    (schedule,) = request.schedules.build_all(MemoryBudget.parse(None))
    steps = _steps(schedule, request.steps)
    if request.output is not None:
        from commsim.viz import draw_schedule

        return schedule, draw_schedule(schedule, request.output, steps=steps)
    listed = schedule.ntransfers if steps is None else len(steps) * schedule.max_step_transfers
    if listed > MAX_LISTED:
        raise UsageError(
            f"{schedule.algorithm} (p={schedule.nranks}) has {listed:,} transfers, too many to "
            f"list (at most {MAX_LISTED:,}); use a smaller p or --steps"
        )
    return schedule, message_rows(schedule, steps)


def _describe(schedule: Schedule) -> dict[str, Any]:
    keys = ("collective", "algorithm", "nranks", "root", "nslots", "ndata", "nsteps", "params")
    summary = schedule.summary()
    return {k: summary[k] for k in keys}


def render(schedule: Schedule, result: Path | list[MessageRow], as_json: bool) -> str:
    if isinstance(result, Path):
        return (
            f"wrote {result} ({schedule.algorithm}, p={schedule.nranks}, {schedule.nsteps} steps)"
        )
    if as_json:
        return to_json({**_describe(schedule), "messages": [r.to_dict() for r in result]})
    table = [
        [
            str(r.step),
            str(r.src),
            "local" if r.local else str(r.dst),
            r.slots_text,
            "" if r.dst_slots == r.slots else r.dst_slots_text,
            f"{r.units:,}",
            "reduce" if r.reduce else "copy",
        ]
        for r in result
    ]
    head = (
        f"{schedule.collective} {schedule.algorithm} p={schedule.nranks}: {schedule.nsteps} "
        f"steps, {schedule.nslots} slots per rank (slots a-b: a to b inclusive)\n\n"
    )
    headers = ["step", "src", "dst", "slots", "into slots", "units", "op"]
    return head + format_table(headers, table, "rrrllrl")


def main(args: argparse.Namespace) -> int:
    request = parse(args)
    schedule, result = compute(request)
    print(render(schedule, result, request.as_json))
    return EXIT_OK
