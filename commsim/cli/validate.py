"""``commsim validate``: run the predicted-best schedules for real, measured next to predicted.

For each message size the model picks the fastest algorithm; those schedules (or, with ``--all``,
every algorithm) then run on the chosen backend (:func:`commsim.bench.validate`), and the table
sets the measured median beside the prediction and the backend's own collective. A prediction is
only as good as its model's parameters: with the defaults (a 200 Gb/s InfiniBand cluster) a
laptop's shared-memory MPI will not match, and the ``measured/predicted`` column says by how much.
"""

from __future__ import annotations

import argparse
import dataclasses
import math

from commsim import units
from commsim.bench import DEFAULT_TIMEOUT, BenchRequest, Measurement, Validation, validate
from commsim.cli.arguments import DEFAULT_VALIDATE_SIZES, parse_sizes
from commsim.cli.errors import EXIT_FAILED, EXIT_OK
from commsim.cli.execution import ExecutionGroup
from commsim.cli.memory import MemoryBudget
from commsim.cli.model import add_model_group, parse_model
from commsim.cli.output import add_output_group, format_table, to_json
from commsim.cli.schedules import ScheduleChoice, ScheduleGroup
from commsim.models import Model

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "ValidateRequest",
    "ValidateResult",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "run the predicted-best algorithms for real and print measured next to predicted"
DESCRIPTION = """\
Predict every algorithm of the collective (Hockney model, the same options as 'compare'), pick
the fastest per message size, run those schedules for real on the backend (default: MPI
processes started with mpirun), check their output against the reference interpreter, and print
for each size: the predicted winner, its predicted and measured time, the backend's own collective
(MPI_Allreduce, lax.psum, ...) and measured/predicted. --all runs every algorithm."""
EXAMPLES = """\
  commsim validate -c allreduce -p 4
  commsim validate -c allreduce -p 2 -s 1MiB,64MiB --alpha 5us --beta 5GB/s --all
  commsim validate -c allgather -p 8 --backend jax --json"""

SCHEDULES = ScheduleGroup("validate", many_algorithms=True)
EXECUTION = ExecutionGroup(backend="mpi", iters=10, warmup=3)


@dataclasses.dataclass(frozen=True)
class ValidateRequest:
    """Predict every schedule of ``schedules`` with ``model``; run the winners (or, with
    ``run_all``, all) on ``backend`` as ``bench`` says."""

    schedules: ScheduleChoice
    model: Model
    backend: str
    bench: BenchRequest
    run_all: bool = False
    timeout: float = DEFAULT_TIMEOUT
    as_json: bool = False
    progress: bool | None = None


@dataclasses.dataclass(frozen=True)
class ValidateResult:
    """One :class:`commsim.bench.Validation` per size, and every measurement taken."""

    collective: str
    nranks: int
    backend: str
    model: Model
    bench: BenchRequest
    validations: tuple[Validation, ...]
    measurements: tuple[Measurement, ...]

    @property
    def failed(self) -> bool:
        return any(m.check == "FAILED" for m in self.measurements)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SCHEDULES.add(parser)
    add_model_group(parser, sizes=DEFAULT_VALIDATE_SIZES)
    group = EXECUTION.add(parser, title="execution")
    group.add_argument(
        "--all", action="store_true", help="run every algorithm, not only the predicted winners"
    )
    add_output_group(parser)


def parse(args: argparse.Namespace) -> ValidateRequest:
    schedules = SCHEDULES.parse(args)
    assert isinstance(schedules, ScheduleChoice)  # the group takes no --file
    bench = EXECUTION.parse(args, parse_sizes(args.sizes))
    return ValidateRequest(
        schedules, parse_model(args), args.backend, bench, args.all, float(args.timeout),
        args.json, args.progress,
    )  # fmt: skip


def compute(request: ValidateRequest) -> ValidateResult:
    choice, budget = request.schedules, MemoryBudget.parse(None)
    [nranks] = choice.nranks
    schedules = [choice.build(a, nranks, budget) for a in choice.algorithms]
    validations, measurements = validate(
        schedules, request.model, request.backend, request.bench, run_all=request.run_all,
        timeout=request.timeout, progress=request.progress,
    )  # fmt: skip
    return ValidateResult(
        choice.collective, nranks, request.backend, request.model, request.bench,
        tuple(validations), tuple(measurements),
    )  # fmt: skip


def render(result: ValidateResult, as_json: bool) -> str:
    if as_json:
        return to_json(
            {
                "collective": result.collective,
                "nranks": result.nranks,
                "backend": result.backend,
                "model": result.model.to_dict(),
                "results": [v.to_dict() for v in result.validations],
            }
        )
    native = next((m.native for m in result.measurements if m.native), None)
    checks = {(m.algorithm, m.nbytes): m.check for m in result.measurements}
    table = [row for v in result.validations for row in _rows(v, checks)]
    headers = ["size", "algorithm", "predicted", "measured", "spread", native or "native",
               "measured/predicted", "best", "check"]  # fmt: skip
    bench = result.bench
    lines = [
        f"{result.collective}, p={result.nranks}, on {result.backend} ({bench.dtype}, median of "
        f"{bench.iters}); predicted with {result.model.describe()}",
        "P: predicted fastest (P= : tied with it under the model); "
        "M: measured fastest of those run (M~ : within its interquartile range)",
        format_table(headers, table, "rlrrrrrll"),
    ]
    lines += [f"note: {n}" for n in dict.fromkeys(n for m in result.measurements for n in m.notes)]
    if any(math.isfinite(v.measured_s) for v in result.validations):
        lines.append(
            "(predictions use the model parameters above; they describe the machine you model, "
            "not necessarily this one)"
        )
    return "\n".join(lines)


def _rows(v: Validation, checks: dict[tuple[str, int], str]) -> list[list[str]]:
    """One row per schedule that ran at this size, the predicted winner first."""
    order = sorted(v.measured, key=lambda a: (a != v.predicted_best, v.predicted[a], a))
    rows = []
    for i, a in enumerate(order):
        marks = "P" if a == v.predicted_best else "P=" if a in v.predicted_ties else ""
        marks += " M" if a == v.fastest_measured else " M~" if a in v.measured_ties else ""
        t_pred, t_meas = v.predicted[a], v.measured[a]
        rows.append(
            [
                units.format_size(v.nbytes) if i == 0 else "",
                a,
                units.format_time(t_pred),
                units.format_time(t_meas),
                f"{100 * v.spread[a]:.0f}%",
                (units.format_time(v.native_s) if v.native_s else "-") if i == 0 else "",
                f"{t_meas / t_pred:.2f}x" if t_pred > 0 else "-",
                marks.strip(),
                checks.get((a, v.nbytes), "-"),
            ]
        )
    return rows


def main(args: argparse.Namespace) -> int:
    request = parse(args)
    result = compute(request)
    print(render(result, request.as_json))
    return EXIT_FAILED if result.failed else EXIT_OK
