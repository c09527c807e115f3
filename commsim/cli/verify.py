"""``commsim verify``: prove that schedules compute their collective."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

import commsim
from commsim import units
from commsim._progress import Progress
from commsim.cli.errors import EXIT_FAILED, EXIT_OK, one_line
from commsim.cli.memory import MemoryBudget
from commsim.cli.output import add_output_group, format_table, to_json
from commsim.cli.schedules import ScheduleChoice, ScheduleFile, ScheduleGroup
from commsim.errors import ScheduleError

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "Verification",
    "VerifyRequest",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "prove that schedules compute their collective"
DESCRIPTION = """\
Build each schedule and run it on random integers with the reference interpreter,
checking every rank's final buffer, write races and reads of empty slots. Prints steps,
transfers and the time taken; exit status 1 if any schedule fails (the error names the
step, rank and slot), 2 on bad input. Memory is about p x slots x 17-46 bytes; a p that
would not fit is refused before anything runs."""
EXAMPLES = """\
  commsim verify -c allreduce -a ring -p 8
  commsim verify -c allreduce -p 2..64              # every allreduce algorithm
  commsim verify -c allreduce -a ring,rabenseifner -p 3,5,8,1000
  commsim verify -c broadcast -a binomial -p 7 --root 3
  commsim verify --file my_schedule.json"""

SCHEDULES = ScheduleGroup("verify", many_algorithms=True, many_nranks=True, file=True)


@dataclasses.dataclass(frozen=True)
class VerifyRequest:
    """Verify every schedule of ``schedules`` that fits in ``budget``."""

    schedules: ScheduleChoice | ScheduleFile
    budget: MemoryBudget
    as_json: bool = False
    progress: bool | None = None


@dataclasses.dataclass(frozen=True)
class Verification:
    """One schedule's verdict: ``ntransfers`` and ``seconds`` if it passed, else ``error``."""

    collective: str
    algorithm: str
    nranks: int
    params: dict[str, Any]
    nsteps: int
    ntransfers: int | None = None
    seconds: float | None = None
    error: ScheduleError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` entry: what was verified, ``ok``, then the counts or the fault."""
        d = {k: getattr(self, k) for k in ("collective", "algorithm", "nranks", "params", "nsteps")}
        e = self.error
        if e is None:
            return {**d, "ok": True, "ntransfers": self.ntransfers, "seconds": self.seconds}
        return {
            **d,
            "ok": False,
            "error": one_line(e),
            "step": e.step,
            "rank": e.rank,
            "slot": e.slot,
        }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SCHEDULES.add(parser)
    add_output_group(parser, memory_limit=True)


def parse(args: argparse.Namespace) -> VerifyRequest:
    budget = MemoryBudget.parse(args.memory_limit)
    return VerifyRequest(SCHEDULES.parse(args), budget, args.json, args.progress)


def compute(request: VerifyRequest) -> list[Verification]:
    """Build every schedule and check its memory first, then verify them one by one."""
    schedules = request.schedules.build_all(request.budget)
    for s in schedules:
        request.budget.check_verify(s)
    total = sum(s.nsteps * s.nranks for s in schedules)
    with Progress(total, "commsim", enabled=request.progress, count=False) as progress:
        return [_verify(s, progress) for s in schedules]


def _verify(s: commsim.Schedule, progress: Progress) -> Verification:
    row = Verification(s.collective, s.algorithm, s.nranks, dict(s.params), s.nsteps)
    try:
        v = commsim.verify(progress.track(s, f"verify {s.algorithm} p={s.nranks}"))
    except ScheduleError as e:
        return dataclasses.replace(row, error=e)
    return dataclasses.replace(row, ntransfers=v.ntransfers, seconds=v.seconds)


def render(results: Sequence[Verification], as_json: bool) -> str:
    if as_json:
        return to_json([r.to_dict() for r in results])
    table = [
        [
            r.collective,
            r.algorithm,
            str(r.nranks),
            str(r.nsteps),
            f"{r.ntransfers:,}" if r.ok else "-",
            units.format_time(r.seconds) if r.seconds is not None else "-",
            "OK" if r.ok else "FAILED",
        ]
        for r in results
    ]
    headers = ["collective", "algorithm", "p", "steps", "transfers", "verified in", "result"]
    text = format_table(headers, table, "llrrrrl")
    failed = [r for r in results if not r.ok]
    if failed:
        text += f"\n\n{len(failed)} of {len(results)} failed:"
        text += "".join(f"\n  {r.algorithm} p={r.nranks}: {one_line(r.error)}" for r in failed)
    return text


def main(args: argparse.Namespace) -> int:
    request = parse(args)
    results = compute(request)
    print(render(results, request.as_json))
    failed = [r for r in results if r.error is not None]
    for r in failed:
        print(f"commsim: verification failed: {one_line(r.error)}", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK
