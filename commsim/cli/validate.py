"""``commsim validate``: run algorithms for real and set each measurement beside its prediction.

Every chosen algorithm (``--winners-only``: only the model's winner per size) runs on the
backend (:func:`commsim.bench.validate`); the table gives, per size and algorithm, the
prediction, the measured median and its spread, the relative error (and, with a profile that
measured the executor's per-call overhead, the error with that overhead added), the backend's
own collective, and which schedule the model and the clock each put first. Below it,
:func:`commsim.bench.summarize`: the median absolute error per algorithm beside the measurements'
own spread, and the share of sizes where the model's winner was the measured one (or within its
spread). A prediction is only as good as its parameters: ``--profile`` (``commsim calibrate``)
gives this machine's; the defaults describe a 200 Gb/s InfiniBand cluster.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any

import numpy as np

from commsim import units
from commsim.bench import (
    DEFAULT_TIMEOUT,
    BenchRequest,
    Measurement,
    OtherLoad,
    Validation,
    ValidationSummary,
    summarize,
    validate,
    validate_tuned,
    validation_warnings,
)
from commsim.cli import nccl_tests
from commsim.cli.arguments import DEFAULT_VALIDATE_SIZES, parse_sizes
from commsim.cli.errors import EXIT_FAILED, EXIT_OK, UsageError
from commsim.cli.execution import ExecutionGroup
from commsim.cli.memory import MemoryBudget
from commsim.cli.model import add_model_group, parse_model
from commsim.cli.output import add_output_group, format_table, say_plot, to_json
from commsim.cli.schedules import ScheduleChoice, ScheduleGroup
from commsim.cli.wire import (
    add_wire_argument,
    check_backend,
    check_collective,
    parse_wire,
    wired_model,
)
from commsim.models import Model
from commsim.profiles import Profile, load_profile
from commsim.tuner import GROWN, sweep

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

HELP = "run algorithms for real and print measured next to predicted, with the error"
DESCRIPTION = """\
Predict every algorithm of the collective (the same model options as 'compare'; --profile FILE
from 'commsim calibrate' for this machine's measured transport), run each for real on the
backend (default: MPI processes started with mpirun), check every output against the reference
interpreter, and print per size and algorithm: predicted, measured (median) and its spread
(IQR/median), the error (predicted - measured)/measured, the error with the executor's measured
per-call overhead added (when the profile has it), and the backend's own collective. Then, per
algorithm, the median absolute error beside the median spread, and how often the predicted
winner was the measured winner or within its spread ("ranked right").
P marks the predicted winner, M the measured one, M~ those within its interquartile range.
--tune judges 'commsim tune' instead: each algorithm runs with the segments the tuner finds best
for it at each size (shown beside its name), and P is the tuner's choice."""
EXAMPLES = """\
  commsim calibrate -p 2 -o profile.toml
  commsim validate -c allreduce -p 2 --profile profile.toml -a ring,rabenseifner,recursive_doubling
  commsim validate -c allreduce -p 2 -s 64KiB..64MiB --profile profile.toml --plot v.png
  commsim validate -c allreduce -p 2 -s 1MiB,64MiB --alpha 5us --beta 5GB/s --winners-only
  commsim validate -c allreduce -p 2 -s 1KiB..64MiB:x4 --profile profile.toml --tune
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
    overhead: float = 0.0  # the executor's per-call overhead from the profile (0: unknown)
    plot: str | None = None
    tune: bool = False  # each algorithm with the tuner's parameters per size, judged as the tuner
    profile: Profile | None = None  # --profile, for the warnings' likely causes


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
    overhead: float = 0.0
    notes: tuple[str, ...] = ()  # what was left out and why (--tune: algorithms not built)
    tuned: bool = False  # --tune: each algorithm with the tuner's parameters, the tuner's pick
    warnings: tuple[str, ...] = ()  # errors above the documented bound, and likely causes

    @property
    def summary(self) -> ValidationSummary:
        return summarize(self.validations)

    @property
    def failed(self) -> bool:
        return any(m.check == "FAILED" for m in self.measurements)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SCHEDULES.add(parser)
    add_model_group(parser, sizes=DEFAULT_VALIDATE_SIZES)
    group = EXECUTION.add(parser, title="execution")
    runs = group.add_mutually_exclusive_group()
    runs.add_argument(
        "--all",
        action="store_true",
        help="run every algorithm (the default; kept for scripts that say it)",
    )
    runs.add_argument(
        "--winners-only",
        action="store_true",
        help="run only the schedule the model predicts fastest at each size (no ranking check)",
    )
    out = add_output_group(parser)
    out.add_argument(
        "--plot", metavar="FILE.png", help="draw measured points over the predicted curves"
    )
    runs.add_argument(
        "--tune",
        action="store_true",
        help="judge the tuner (commsim tune): each algorithm runs at each size with the "
        "parameters the tuner finds best for it there (segments of the pipelines, those not set "
        "by --param), and the pick is the tuner's choice; 'ranking' then says how often the "
        "tuner chose what was measured fastest (or within its spread)",
    )
    add_wire_argument(parser)
    nccl_tests.add_arguments(parser, carry=True)


def parse(args: argparse.Namespace) -> ValidateRequest:
    given = [f for f, d in (("--protocol", "protocol"), ("--channels", "channels"), ("--port-rule", "nccl_port_rule")) if getattr(args, d, None) is not None]  # fmt: skip
    if given:
        raise UsageError(
            f"{' and '.join(given)} {'goes' if len(given) == 1 else 'go'} with "
            "--from-nccl-tests (they say how NCCL carried the "
            "log's schedule); a run on a backend carries its schedule as it is"
        )
    if getattr(args, "tune", False) and args.root is not None:
        raise UsageError(
            "--root with --tune: the tuner builds rooted collectives at root 0; drop one"
        )
    schedules = SCHEDULES.parse(args)
    assert isinstance(schedules, ScheduleChoice)  # the group takes no --file
    bench = EXECUTION.parse(args, parse_sizes(args.sizes))
    wire = parse_wire(args)
    model = wired_model(parse_model(args), wire)
    if wire is not None:
        check_backend(wire, args.backend)
        check_collective(wire, schedules.collective, bench.dtype)
        bench = dataclasses.replace(bench, wire=wire.name)
    overhead, profile = 0.0, None
    if getattr(args, "profile", None):
        profile = load_profile(args.profile)
        overhead = profile.call_overhead.get(args.backend, 0.0)
    return ValidateRequest(
        schedules, model, args.backend, bench, not args.winners_only, float(args.timeout),
        args.json, args.progress, overhead, args.plot, getattr(args, "tune", False), profile,
    )  # fmt: skip


def compute(request: ValidateRequest) -> ValidateResult:
    choice, budget = request.schedules, MemoryBudget.parse(None)
    [nranks] = choice.nranks
    others = OtherLoad.start()  # other jobs' CPU use while this runs (not the run's own ranks)
    if request.tune:
        budget.check_build(nranks)
        result = sweep(
            choice.collective, request.model, nranks, np.array(request.bench.sizes),
            algorithms=choice.algorithms, params={a: p for a, p in choice.params.items() if p},
            progress=request.progress,
        )  # fmt: skip
        validations, measurements = validate_tuned(
            result, request.backend, request.bench, timeout=request.timeout,
            progress=request.progress, overhead=request.overhead,
        )  # fmt: skip
        notes = tuple(f"skipped {a}: {why}" for a, why in result.skipped.items())
    else:
        notes = ()
        schedules = [choice.build(a, nranks, budget) for a in choice.algorithms]
        validations, measurements = validate(
            schedules, request.model, request.backend, request.bench, run_all=request.run_all,
            timeout=request.timeout, progress=request.progress, overhead=request.overhead,
        )  # fmt: skip
    summary = summarize(tuple(validations))
    load = others.stop(own_processes=nranks)
    warnings = validation_warnings(summary, nranks, request.profile, load=load)
    return ValidateResult(
        choice.collective, nranks, request.backend, request.model, request.bench,
        tuple(validations), tuple(measurements), request.overhead, notes, request.tune, warnings,
    )  # fmt: skip


def render(result: ValidateResult, as_json: bool) -> str:
    summary = result.summary
    if as_json:
        return to_json(
            {
                "collective": result.collective,
                "nranks": result.nranks,
                "backend": result.backend,
                "model": result.model.to_dict(),
                "overhead_s": result.overhead,
                "results": [v.to_dict() for v in result.validations],
                "summary": summary.to_dict(),
                "tuned": result.tuned,
                "notes": list(result.notes),
                "warnings": list(result.warnings),
            }
        )
    native = next((m.native for m in result.measurements if m.native), None)
    host = next((m.host_native for m in result.measurements if m.host_native), None)
    ovh = result.overhead > 0
    table = [row for v in result.validations for row in _rows(v, ovh, host is not None)]
    headers = ["size", "algorithm", "predicted", "measured", "spread", "error"]
    headers += ["error+ovh"] if ovh else []
    headers += [native or "native"] + ([host] if host else []) + ["best", "check"]
    bench = result.bench
    lines = [
        f"{result.collective}, p={result.nranks}, on {result.backend} ({bench.dtype}, median of "
        f"{bench.iters}); predicted with {result.model.describe()}",
        "error = (predicted - measured) / measured; P: predicted fastest (P= : tied with it "
        "under the model); M: measured fastest of those run (M~ : within its interquartile range)",
    ]
    if result.tuned:
        lines.append(
            "--tune: each algorithm ran with the parameters the tuner finds best for it at that "
            "size; P is the tuner's choice"
        )
    if ovh:
        lines.append(
            f"error+ovh: the prediction plus the executor's measured per-call overhead "
            f"({units.format_time(result.overhead)} per run, from the profile)"
        )
    align = "rlrrrr" + "r" * ovh + "r" + "r" * (host is not None) + "ll"
    lines += [format_table(headers, table, align), ""]
    lines += _summary_lines(summary, ovh, result.tuned)
    lines += [f"warning: {w}" for w in result.warnings]
    lines += [f"note: {n}" for n in result.notes]
    lines += [f"note: {n}" for n in dict.fromkeys(n for m in result.measurements for n in m.notes)]
    return "\n".join(lines)


def _summary_lines(summary: ValidationSummary, ovh: bool, tuned: bool = False) -> list[str]:
    rows = [
        [a.algorithm, str(a.points), _pct(a.median_abs_error), _interval(a.error_interval)]
        + ([_pct(a.median_abs_error_with_overhead)] if ovh else [])
        + [_pct(a.median_spread)]
        for a in summary.algorithms
    ]
    heads = ["algorithm", "sizes", "median |error|", "95% interval"]
    heads += ["with overhead"] if ovh else []
    heads += ["median spread"]
    lines = [format_table(heads, rows, "lrrr" + "r" * ovh + "r")]
    lines.append(
        "95% interval: of the median |error|, over the timed repeats (a parametric bootstrap of "
        "each size's median from its spread; docs/validation.md)"
    )
    share = summary.ranking_share
    if share is None:
        lines.append("ranking: not checked (fewer than two algorithms ran at every size)")
    else:
        who = "the tuner's choice" if tuned else "the predicted winner"
        lines.append(
            f"ranking: {who} (or a schedule identical to it) was measured fastest "
            f"(or within its spread) at "
            f"{summary.ranked_right} of {summary.ranked} sizes ({100 * share:.0f}%)"
        )
    return lines


def _label(algorithm: str, params: dict[str, Any]) -> str:
    """The algorithm, with the tuned parameters it ran with (``--tune``)."""
    grown = " ".join(f"{k}={v}" for k, v in params.items() if k in GROWN)
    return f"{algorithm} {grown}".rstrip()


def _time_or_dash(x: float | None) -> str:
    return "-" if x is None else units.format_time(x)


def _interval(lo_hi: tuple[float, float]) -> str:
    lo, hi = lo_hi
    return (
        "-" if not (math.isfinite(lo) and math.isfinite(hi)) else f"{100 * lo:.1f}..{100 * hi:.1f}%"
    )


def _pct(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{100 * x:.1f}%"


def _rows(v: Validation, ovh: bool, host: bool) -> list[list[str]]:
    """One row per schedule that ran at this size, the predicted winner first."""
    order = sorted(v.measured, key=lambda a: (a != v.predicted_best, v.predicted[a], a))
    err, err_o = v.error, v.error_with_overhead
    rows = []
    for i, a in enumerate(order):
        marks = "P" if a == v.predicted_best else "P=" if a in v.predicted_ties else ""
        marks += " M" if a == v.fastest_measured else " M~" if a in v.measured_ties else ""
        rows.append(
            [
                units.format_size(v.nbytes) if i == 0 else "",
                _label(a, v.params.get(a, {})),
                units.format_time(v.predicted[a]),
                units.format_time(v.measured[a]),
                f"{100 * v.spread[a]:.0f}%",
                f"{100 * err[a]:+.0f}%",
                *([f"{100 * err_o[a]:+.0f}%"] if ovh else []),
                (units.format_time(v.native_s) if v.native_s else "-") if i == 0 else "",
                *([_time_or_dash(v.host_native_s) if i == 0 else ""] if host else []),
                marks.strip(),
                v.checks.get(a, "-"),
            ]
        )
    return rows


def plot(result: ValidateResult, path: str) -> None:
    """Measured points over the predicted curves, one panel per algorithm."""
    from commsim.cli.measured_plots import draw_validation

    vs = result.validations
    names = list(dict.fromkeys(a for v in vs for a in v.measured))
    measured, predicted = {}, {}
    for a in names:
        here = [v for v in vs if a in v.measured]
        x = np.array([v.nbytes for v in here], dtype=float)
        measured[a] = (
            x,
            np.array([v.measured[a] for v in here]),
            np.array([v.spread[a] for v in here]),
        )
        predicted[a] = (x, np.array([v.predicted[a] for v in here]))
    baselines = []  # the backend's own collective, and the library called directly
    for name_of, time_of in (
        (lambda v: v.native or "native", lambda v: v.native_s),
        (lambda v: v.host_native, lambda v: v.host_native_s),
    ):
        ran = [v for v in vs if time_of(v) is not None]
        if ran:
            x = np.array([v.nbytes for v in ran], dtype=float)
            baselines.append((str(name_of(ran[0])), x, np.array([time_of(v) for v in ran])))
    title = (
        f"{result.collective}, p={result.nranks}, {result.backend}: measured vs "
        f"{result.model.describe()}"
        + (
            "\n(--tune: each algorithm at the segments the tuner finds best per size)"
            if result.tuned
            else ""
        )
    )
    draw_validation(title, predicted, measured, path, overhead=result.overhead, baselines=baselines)


#: what ``validate --from-nccl-tests`` reads: the log fixes the ranks, sizes, root and run, and
#: the cluster's topology model predicts; any other option given with it is refused (issue #26)
_NCCL_TESTS_READS = frozenset(
    {"collective", "algorithm", "param", "json", "progress", "plot", "from_nccl_tests",
     "fit_up_to", "cluster", "protocol", "channels", "nccl_port_rule", "set"}
)  # fmt: skip


def _refuse_unread(args: argparse.Namespace) -> None:
    """One line naming the options ``--from-nccl-tests`` would not read (their defaults from a
    parse of nothing: anything else was given)."""
    from commsim.cli._main import _parser

    sp = _parser(["validate"])[1]["validate"]
    defaults = sp.parse_args([])
    given = [
        a.option_strings[-1]
        for a in sp._actions
        if a.option_strings
        and a.dest not in _NCCL_TESTS_READS
        and a.dest != "help"
        and getattr(args, a.dest, None) != getattr(defaults, a.dest, None)
    ]
    if given:
        raise UsageError(
            f"{', '.join(given)} with --from-nccl-tests: the log fixes the ranks, sizes, root and "
            "run, and the cluster's topology model predicts them; drop "
            + ("it" if len(given) == 1 else "them")
        )


def main(args: argparse.Namespace) -> int:
    if getattr(args, "from_nccl_tests", None):
        _refuse_unread(args)
        return nccl_tests.validate_main(args)
    request = parse(args)
    result = compute(request)
    if request.plot:
        plot(result, request.plot)
    print(render(result, request.as_json))
    say_plot(request.plot, request.as_json)
    return EXIT_FAILED if result.failed else EXIT_OK
