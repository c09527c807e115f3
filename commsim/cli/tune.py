"""``commsim tune``: the fastest algorithm and parameters per size range under a model, as a table
(NCCL's tuner choice, read from a model), optionally saved for the drop-in collectives."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import commsim
from commsim import units
from commsim.algorithms import info
from commsim.cli.arguments import DEFAULT_PREDICT_SIZES, add_epilog, parse_sizes
from commsim.cli.errors import EXIT_OK, UsageError, quote
from commsim.cli.memory import MemoryBudget
from commsim.cli.model import add_library_group, add_model_group, parse_channels, parse_model
from commsim.cli.network import add_network_group, parse_network
from commsim.cli.output import add_output_group, format_bandwidth, format_table, to_json
from commsim.cli.schedules import ScheduleChoice, ScheduleGroup, coerce_param
from commsim.models import Model
from commsim.tuner import Range, TunerTable, channel_counts, sweep, table_from_sweep

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "TuneRequest",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "choose the fastest algorithm and parameters per size range (a tuner table)"
DESCRIPTION = """\
Like NCCL's tuner choosing algorithm and protocol per size, from a model: every algorithm
of the collective is predicted at every size, the pipelined ones (segments) at 1, 2, 4, ...
segments, and per size the fastest wins. Equal choices at consecutive sizes merge into a
range; a range ends halfway (geometrically) between the last size it won and the next
range's first. Columns: the range, the choice and its parameters, the predicted time at the
range's ends, busbw at its end, and the runner-up (the best other algorithm where it came
closest, and how much slower it was there). -o writes the table as TOML, which
commsim.TunerTable.load reads (and the drop-in collectives use)."""
EXAMPLES = """\
  commsim tune -c allreduce --cluster dgx-h100:16 -s 1KiB..1GiB -o table.toml
  commsim tune -c allreduce -p 1024 --alpha 2us --beta 25GB/s
  commsim tune -c broadcast -p 64 -a binomial,chain --param segments=1,8,64
  commsim tune -c allgather -p 8 --profile mpi.toml --json"""

SCHEDULES = ScheduleGroup("tune", many_algorithms=True)

PARAMS_EPILOG = """\
parameters:
  --param K=V fixes a parameter; --param K=V1,V2,... makes each value a candidate
  (segments=1,8,64). Without it, segments grows by doubling from 1 until a segment would
  be under 1KiB at the largest size, or the evaluation too long, or deeper pipelines stop
  helping; the other parameters keep their defaults (ranks_per_node: the cluster's).
"""


@dataclasses.dataclass(frozen=True)
class TuneRequest:
    """Tune ``schedules`` (one rank count; ``params`` holds lists of candidate values) at
    ``sizes`` with ``model``; write the table to ``output`` if given."""

    schedules: ScheduleChoice
    params: Mapping[str, Mapping[str, Any]]
    sizes: tuple[int, ...]
    model: Model
    ranks_per_node: int | None = None
    output: Path | None = None
    as_json: bool = False
    progress: bool | None = None
    channels: tuple[int, ...] = (1,)  # --channels C: the counts tried, 1, 2, 4, ..., C


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SCHEDULES.add(parser)
    add_model_group(parser, sizes=DEFAULT_PREDICT_SIZES)
    add_network_group(parser)
    add_library_group(parser, sweep=True)
    output = add_output_group(parser)
    output.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="also write the table as TOML (commsim.TunerTable.load reads it)",
    )
    add_epilog(parser, PARAMS_EPILOG)


def parse(args: argparse.Namespace) -> TuneRequest:
    if args.root is not None:
        raise UsageError("--root: the tuner builds rooted collectives at root 0; drop it")
    raw, args.param = args.param, []
    counts = channel_counts(parse_channels(args))
    network = parse_network(args)
    if network is not None and args.nranks is None:
        args.nranks = str(network.default_nranks())  # every host
    choice = SCHEDULES.parse(args)
    assert isinstance(choice, ScheduleChoice)  # the group takes no --file
    params = _params(raw, choice)
    rpn = network.servers_of(choice.nranks[0]) if network is not None else None
    output = Path(args.output) if args.output else None
    if output is not None and not output.parent.is_dir():
        raise UsageError(
            f"-o {quote(args.output)}: directory {quote(str(output.parent))} does not exist"
        )
    sizes, model = parse_sizes(args.sizes), parse_model(args, network)
    return TuneRequest(choice, params, sizes, model, rpn, output, args.json, args.progress, counts)


def _params(items: list[str], choice: ScheduleChoice) -> dict[str, dict[str, Any]]:
    """``--param K=V`` or ``K=V1,V2``: per algorithm that accepts ``K``, a value or a list."""
    out: dict[str, dict[str, Any]] = {a: {} for a in choice.algorithms}
    for item in items:
        key, eq, value = (part.strip() for part in item.partition("="))
        if not eq or not key.isidentifier() or not value:
            raise UsageError(f"--param expects KEY=VALUE or KEY=V1,V2, got {quote(item)}")
        takers = [a for a in choice.algorithms if key in info(choice.collective, a).params]
        if not takers:
            raise UsageError(
                f"no chosen {choice.collective} algorithm has a parameter {quote(key)}"
            )
        for a in takers:
            default = info(choice.collective, a).params[key]
            values = [coerce_param(key, v.strip(), default) for v in value.split(",")]
            out[a][key] = values if len(values) > 1 else values[0]
    return {a: p for a, p in out.items() if p}


def compute(request: TuneRequest) -> TunerTable:
    choice, budget = request.schedules, MemoryBudget.parse(None)
    result = sweep(
        choice.collective,
        request.model,
        choice.nranks[0],
        request.sizes,
        algorithms=choice.algorithms,
        params=request.params,
        ranks_per_node=request.ranks_per_node,
        progress=request.progress,
        channels=request.channels,
        check=lambda s: budget.check_predict(s, len(request.sizes)),
    )
    table = table_from_sweep(result)
    if request.output is not None:
        table.save(request.output)
    return table


def render(table: TunerTable, as_json: bool, output: Path | None = None) -> str:
    if as_json:
        return to_json({**table.to_dict(), "output": str(output) if output else None})
    factor = commsim.spec(table.collective).busbw_factor(table.nranks)
    rows = [_row(r, factor) for r in table.ranges]
    headers = ["sizes", "algorithm", "params", "time", "busbw", "runner-up", "margin"]
    align = "lllrrll"
    if any(r.protocol is not None for r in table.ranges):
        for row, r in zip(rows, table.ranges, strict=True):
            row.append(r.protocol or "-")
        headers.append("protocol")
        align += "l"
    lines = [
        f"{table.collective} on p={table.nranks}: fastest algorithm per size range",
        f"model: {table.model_description}",
        "",
        format_table(headers, rows, align),
    ]
    lines += [f"note: {n}" for n in table.notes]
    if output is not None:
        lines.append(f"\ntable written to {output}")
    return "\n".join(lines)


def _row(r: Range, factor: float) -> list[str]:
    lo, hi = (units.format_size(n, exact=False) for n in (r.min_bytes, r.max_bytes))
    t0, t1 = (units.format_time(t) for t in r.time_s)
    busbw = r.max_bytes / r.time_s[1] * factor if r.time_s[1] > 0 else float("nan")
    runner = "-"
    if r.runner_up is not None:
        runner = f"{r.runner_up} {_show(r.runner_up_params)}".rstrip()
    margin = f"+{100 * (r.margin - 1):.1f}%" if r.margin is not None else "-"
    return [f"{lo}..{hi}", r.algorithm, _show(r.params) or "-", f"{t0}..{t1}",
            format_bandwidth(busbw), runner, margin]  # fmt: skip


def _show(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def main(args: argparse.Namespace) -> int:
    request = parse(args)
    print(render(compute(request), request.as_json, request.output))
    return EXIT_OK
