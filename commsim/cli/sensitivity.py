"""``commsim sensitivity``: which parameter one schedule's time is most sensitive to, per size.

The model's JAX twin (:class:`commsim.models.Twin`) differentiates the predicted time; the
elasticity of the time :math:`T` to a parameter :math:`\\theta` is
:math:`\\partial \\log T / \\partial \\log \\theta`: 0.6 for a link class's inverse bandwidth means
that a 1 % faster class makes the collective about 0.6 % faster. For a time homogeneous in its
parameters the elasticities sum to 1 (Euler's theorem). The parameter to buy is the one with the
largest elasticity.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from commsim import units
from commsim._ir import Schedule
from commsim.cli.arguments import DEFAULT_PREDICT_SIZES, parse_sizes
from commsim.cli.errors import EXIT_OK, UsageError, quote
from commsim.cli.memory import MemoryBudget
from commsim.cli.model import add_model_group, parse_model
from commsim.cli.network import add_network_group, parse_network
from commsim.cli.output import add_output_group, format_params, format_table, to_json
from commsim.cli.schedules import ScheduleChoice, ScheduleFile, ScheduleGroup
from commsim.models import Model

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "SensitivityRequest",
    "SensitivityResult",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "which parameter one algorithm's time is most sensitive to, per message size"
DESCRIPTION = """\
Differentiate one schedule's predicted time with the model's JAX twin and print, per message
size, the elasticity d log T / d log theta of the time to every parameter: per link class its
latency and its inverse bandwidth (time per byte), the reduction's gamma (and the per-message
overhead); Hockney's alpha, beta, gamma without a network. An elasticity of 0.6 for a class's
inverse bandwidth means a 1% faster class makes the collective ~0.6% faster; the elasticities
add up to 1. The last column names the parameter to buy. Models: Hockney (single port,
--links allowed) and the topology model with --contention none or bottleneck."""
EXAMPLES = """\
  commsim sensitivity -c allreduce -a hierarchical --cluster dgx-h100:16 -s 1KiB..1GiB
  commsim sensitivity -c allreduce -a ring -p 64 -s 1KiB,1MiB,1GiB
  commsim sensitivity -c allreduce -a ring --cluster dgx-h100:4 -s 64MiB --json
  commsim sensitivity -c allgather -a bruck --topology fat_tree:64 --plot bruck.png"""

SCHEDULES = ScheduleGroup("sensitivity", file=True)
_PLOT_FORMATS = (".png", ".pdf", ".svg")


@dataclasses.dataclass(frozen=True)
class SensitivityRequest:
    """Differentiate ``schedules``' one schedule under ``model`` at each of ``sizes``."""

    schedules: ScheduleChoice | ScheduleFile
    sizes: tuple[int, ...]
    model: Model
    budget: MemoryBudget
    as_json: bool = False
    plot: Path | None = None
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, eq=False)
class SensitivityResult:
    """Per size: the time and each parameter's elasticity (``names[j]`` is column ``j``)."""

    schedule: Schedule
    model: Model
    sizes: np.ndarray
    time: np.ndarray
    names: tuple[str, ...]
    elasticity: np.ndarray  # [sizes, parameters]
    notes: tuple[str, ...] = ()
    plot: Path | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SCHEDULES.add(parser)
    add_model_group(parser, sizes=DEFAULT_PREDICT_SIZES)
    add_network_group(parser)
    output = add_output_group(parser, memory_limit=True)
    output.add_argument(
        "--plot",
        metavar="FILE",
        help="draw the elasticities against message size (.png, .pdf or .svg)",
    )


def parse(args: argparse.Namespace) -> SensitivityRequest:
    budget = MemoryBudget.parse(args.memory_limit)
    sizes = parse_sizes(args.sizes)
    network = parse_network(args)
    if network is not None and args.nranks is None and not args.file:
        args.nranks = str(network.default_nranks())  # every host
    schedules = SCHEDULES.parse(args)
    notes: list[str] = []
    if network is not None and isinstance(schedules, ScheduleChoice):
        schedules, notes = network.with_ranks_per_node(schedules)
    plot = None
    if args.plot:
        plot = Path(args.plot)
        if plot.suffix.lower() not in _PLOT_FORMATS:
            raise UsageError(
                f"--plot {quote(args.plot)}: the name must end in {', '.join(_PLOT_FORMATS)}"
            )
        if not plot.parent.is_dir():
            raise UsageError(f"--plot {quote(args.plot)}: directory {plot.parent} does not exist")
    model = parse_model(args, network)
    return SensitivityRequest(schedules, sizes, model, budget, args.json, plot, tuple(notes))


def compute(request: SensitivityRequest) -> SensitivityResult:
    from commsim.models.twin import Twin  # JAX: imported on this command's path only

    [s] = request.schedules.build_all(request.budget)
    twin = Twin.of(request.model, s)
    sizes = np.array(request.sizes, dtype=np.float64)
    time = twin.times(twin.params(), sizes)
    names, columns = [], []
    for key, value in twin.elasticities(sizes).items():
        if value.ndim == 1:
            names.append(key)
            columns.append(value)
            continue
        label = "1/bw" if key == "inv_bandwidth" else key
        for k, cls in enumerate(twin.classes):
            names.append(f"{cls} {label}")
            columns.append(value[:, k])
    elasticity = np.stack(columns, axis=1) if columns else np.zeros((len(sizes), 0))
    keep = np.abs(elasticity).max(axis=0) > 0 if len(sizes) else np.ones(len(names), bool)
    result = SensitivityResult(
        s,
        request.model,
        sizes,
        time,
        tuple(n for n, k in zip(names, keep, strict=True) if k),
        elasticity[:, keep],
        request.notes,
    )
    if request.plot is not None:
        _draw(result, request.plot)
        result = dataclasses.replace(result, plot=request.plot)
    return result


def _best(result: SensitivityResult, j: int) -> str:
    if not result.names:
        return "-"
    k = int(np.argmax(result.elasticity[j]))
    return f"{result.names[k]} ({result.elasticity[j, k]:.2f})"


def render(result: SensitivityResult, as_json: bool) -> str:
    s = result.schedule
    if as_json:
        return to_json(
            {
                "collective": s.collective,
                "algorithm": s.algorithm,
                "nranks": s.nranks,
                "params": s.params,
                "model": result.model.to_dict(),
                "parameters": list(result.names),
                "notes": list(result.notes),
                "plot": str(result.plot) if result.plot else None,
                "results": [
                    {
                        "nbytes": int(n),
                        "time_s": float(t),
                        "elasticity": dict(
                            zip(result.names, map(float, result.elasticity[j]), strict=True)
                        ),
                        "buy": result.names[int(np.argmax(result.elasticity[j]))]
                        if result.names
                        else None,
                    }
                    for j, (n, t) in enumerate(zip(result.sizes, result.time, strict=True))
                ],
            }
        )
    rows = [
        [
            units.format_size(int(n)),
            units.format_time(float(t)),
            *(f"{e:.2f}" for e in result.elasticity[j]),
            _best(result, j),
        ]
        for j, (n, t) in enumerate(zip(result.sizes, result.time, strict=True))
    ]
    headers = ["size", "time", *result.names, "buy"]
    params = format_params(s.params)
    params = f" {params}" if params != "-" else ""
    text = (
        f"{s.collective} {s.algorithm}{params}, p={s.nranks}\n"
        f"model: {result.model.describe()}\n"
        "elasticity d log T / d log theta (1/bw: time per byte; they add up to 1)\n\n"
        + format_table(headers, rows, "rr" + "r" * len(result.names) + "l")
    )
    if result.plot is not None:
        text += f"\nplot: {result.plot}"
    return text + "".join(f"\nnote: {n}" for n in result.notes)


def _draw(result: SensitivityResult, path: Path) -> None:
    """Elasticity against size, one line per parameter, sizes on a log axis."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.add_subplot()
    x = result.sizes
    for k, name in enumerate(result.names):
        ax.plot(x, result.elasticity[:, k], marker="o", ms=3, label=name)
    ax.set_xscale("log", base=2)
    ticks = x[:: max(1, len(x) // 7)]
    ax.set_xticks(ticks, [units.format_size(int(v)) for v in ticks])
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("message size")
    ax.set_ylabel("elasticity  d log T / d log θ")
    s = result.schedule
    ax.set_title(f"{s.collective} {s.algorithm}, p={s.nranks}: what the time depends on")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.savefig(path, dpi=120)


def main(args: argparse.Namespace) -> int:
    request = parse(args)
    print(render(compute(request), request.as_json))
    return EXIT_OK
