"""``commsim predict``: one schedule's predicted time, algbw and busbw over message sizes."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from commsim import units
from commsim._ir import Schedule, Step
from commsim._progress import Progress
from commsim._wire import Wire
from commsim.algorithms import on_channels
from commsim.cli.arguments import DEFAULT_PREDICT_SIZES, parse_sizes
from commsim.cli.errors import EXIT_OK, UsageError
from commsim.cli.memory import MemoryBudget
from commsim.cli.model import add_library_group, add_model_group, parse_channels, parse_model
from commsim.cli.network import add_network_group, parse_network
from commsim.cli.output import (
    add_output_group,
    format_bandwidth,
    format_params,
    format_ratio,
    format_table,
    to_json,
)
from commsim.cli.schedules import ScheduleChoice, ScheduleFile, ScheduleGroup
from commsim.cli.traces import add_trace_argument, parse_trace, write_trace
from commsim.cli.wire import add_wire_argument, check_collective, parse_wire, wired_model
from commsim.models import Model, NetworkUsage, Prediction, bound_of, chrome_trace

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "PredictRequest",
    "PredictResult",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "predict one algorithm's time, algbw and busbw over message sizes"
DESCRIPTION = """\
Time one schedule under the Hockney alpha-beta-gamma model (per-rank clocks) for each
message size. Columns: time; algbw = size/time and busbw = algbw x nccl-tests' factor
(decimal GB/s, as nccl-tests reports); the lower bound no algorithm can beat under the
same model (Chan et al. 2007 for Hockney; on a topology the strongest of its injection, cut
and bisection bounds), named in the header, and the ratio to it."""
EXAMPLES = """\
  commsim predict -c allreduce -a ring -p 64 --sizes 1KiB..1GiB
  commsim predict -c allreduce -a ring -p 64 -s 64MiB --beta 200Gb/s --alpha 1.5us
  commsim predict -c allgather -a ring -p 1024 -s 1MiB,1GiB --ports multi --json
  commsim predict --file my_schedule.json -s 1MiB
  commsim predict -c allreduce -a hierarchical --cluster dgx-h100:16 -s 1GiB
  commsim predict -c allreduce -a ring --topology torus:4x4 -s 1MiB --trace ring.json
  commsim predict -c allreduce -a rabenseifner -p 16 -s 1MiB --trace rab.json
  commsim predict -c allreduce -a ring -p 64 -s 1MiB..1GiB --wire fp16"""

SCHEDULES = ScheduleGroup("predict", file=True)


@dataclasses.dataclass(frozen=True)
class PredictRequest:
    """Predict the one schedule of ``schedules`` with ``model`` at each of ``sizes`` (bytes)."""

    schedules: ScheduleChoice | ScheduleFile
    sizes: tuple[int, ...]
    model: Model
    budget: MemoryBudget
    as_json: bool = False
    progress: bool | None = None
    notes: tuple[str, ...] = ()
    trace: Path | None = None
    channels: int = 1  # --channels: the schedule on C channels (on_channels lays them out)
    wire: Wire | None = None  # --wire: the messages in this format (the model is compressed)


@dataclasses.dataclass(frozen=True, eq=False)
class PredictResult:
    """Per size (arrays along ``sizes``): the predicted time (s), algbw and busbw (bytes/s) and
    the model's lower bound (s); ``ntransfers`` counted while predicting."""

    schedule: Schedule
    ntransfers: int
    model: Model
    prediction: Prediction
    sizes: np.ndarray
    time: np.ndarray
    algbw: np.ndarray
    busbw: np.ndarray
    lower_bound: np.ndarray
    notes: tuple[str, ...] = ()
    bound_name: str = ""  # the bound that binds (the model's bound_name when it has one)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SCHEDULES.add(parser)
    add_model_group(parser, sizes=DEFAULT_PREDICT_SIZES)
    add_network_group(parser)
    add_library_group(parser)
    add_wire_argument(parser)
    output = add_output_group(parser, memory_limit=True)
    add_trace_argument(
        output,
        "write a Chrome trace of the largest size (open it in https://ui.perfetto.dev): "
        "tracks per rank (sends, receives, reductions), an arrow per message, and with "
        "--topology or --cluster a track per busy link",
    )


def parse(args: argparse.Namespace) -> PredictRequest:
    budget = MemoryBudget.parse(args.memory_limit)
    sizes = parse_sizes(args.sizes)
    nchannels = parse_channels(args)
    network = parse_network(args)
    if network is not None and args.nranks is None and not args.file:
        args.nranks = str(network.default_nranks())  # every host
    schedules = SCHEDULES.parse(args)
    if isinstance(schedules, ScheduleChoice):  # -p counts GPUs: a switch's helpers on top
        schedules = dataclasses.replace(schedules, gpus=True)
    notes: list[str] = []
    if network is not None and isinstance(schedules, ScheduleChoice):
        schedules, notes = network.with_network_params(schedules)
    wire = parse_wire(args)
    if isinstance(schedules, ScheduleChoice):
        check_collective(wire, schedules.collective)
    model = wired_model(parse_model(args, network), wire)
    trace = parse_trace(args)
    if trace is not None and getattr(model, "timeline", None) is None:
        raise UsageError(f"--trace: the {model.name} model has no timeline to trace")
    return PredictRequest(
        schedules, sizes, model, budget, args.json, args.progress, tuple(notes), trace, nchannels,
        wire,
    )  # fmt: skip


def compute(request: PredictRequest) -> PredictResult:
    [s] = request.schedules.build_all(request.budget)
    check_collective(request.wire, s.collective)  # a --file schedule's collective is known now
    s = on_channels(s, request.channels)
    sizes = np.array(request.sizes, dtype=np.float64)
    request.budget.check_predict(s, len(sizes))
    with Progress(s.nsteps * s.nranks, "commsim", enabled=request.progress, count=False) as bar:
        counted, ntransfers = _counting(bar.track(s, f"predict {s.algorithm} p={s.nranks}"))
        pred = request.model.predict(counted, sizes)
    bound, bound_name = bound_of(request.model, s.collective, s.nranks, sizes, s.helpers)
    with np.errstate(invalid="ignore"):  # p = 1: time 0, algbw inf, busbw factor 0
        time, algbw, busbw, bound = (
            np.atleast_1d(np.asarray(x, float)) for x in (pred.time, pred.algbw, pred.busbw, bound)
        )
    notes = request.notes
    if s.in_network and getattr(request.model, "hosts_of", None) is None:
        where = ("a cluster whose NVSwitch reduces (nvls)" if s.switch_tier == "server"
                 else "a cluster whose InfiniBand leaves reduce (sharp = true)")  # fmt: skip
        notes = (*notes, f"{s.algorithm}'s {s.helpers} helper ranks are a reducing switch, but "
                 "this model has no network: they are charged as ranks with one port each; "
                 f"the topology model (drop --model) on {where} places them on the switch")  # fmt: skip
    if request.trace is not None:
        doc = chrome_trace(request.model, s, sizes[-1:])
        notes = (*notes, write_trace(request.trace, doc, sizes[-1]))
    return PredictResult(
        s, ntransfers[0], request.model, pred, sizes, time, algbw, busbw, bound, notes, bound_name
    )


def _counting(schedule: Schedule) -> tuple[Schedule, list[int]]:
    """``schedule`` whose step function counts the transfers pulled into ``[count]``."""
    count = [0]

    def step_fn(i: int) -> Step:
        step = schedule.step(i)
        count[0] += len(step.src)
        return step

    return dataclasses.replace(schedule, step_fn=step_fn), count


def render(result: PredictResult, as_json: bool) -> str:
    s, columns = result.schedule, _columns(result)
    pred = result.prediction
    rank_time = np.asarray(pred.rank_time).reshape(s.nranks, len(result.sizes))  # [rank, size]
    protocols = (
        None
        if pred.protocol is None
        else [str(x) for x in np.atleast_1d(np.asarray(pred.protocol, dtype=object))]
    )
    step_time = np.asarray(pred.step_time).reshape(s.nsteps, len(result.sizes))  # [step, size]
    if as_json:
        return to_json(
            {
                "collective": s.collective,
                "root": s.root,
                "algorithm": s.algorithm,
                "nranks": s.nranks,
                "params": s.params,
                "nsteps": s.nsteps,
                "ntransfers": result.ntransfers,
                "model": result.model.to_dict(),
                "bound": result.bound_name or result.model.bound_name,
                "notes": [*result.notes, *result.prediction.notes],
                **({"network": pred.network.to_dict()} if pred.network is not None else {}),
                "results": [
                    {
                        "nbytes": int(n),
                        "time_s": t,
                        "algbw_Bps": a,
                        "busbw_Bps": b,
                        "lower_bound_s": lb,
                        "ratio_to_bound": t / lb if lb > 0 else None,
                        **({"protocol": protocols[j]} if protocols else {}),
                        "rank_time_s": rank_time[:, j],
                        "step_time_s": step_time[:, j],
                    }
                    for j, (n, t, a, b, lb) in enumerate(columns)
                ],
            }
        )
    root = f" root={s.root}" if s.spec.rooted else ""
    params = format_params(s.params)
    params = f" {params}" if params != "-" else ""
    table = [
        [
            units.format_size(int(n)),
            units.format_time(t),
            format_bandwidth(a),
            format_bandwidth(b),
            units.format_time(lb),
            format_ratio(t, lb),
        ]
        for n, t, a, b, lb in columns
    ]
    headers = ["size", "time", "algbw", "busbw", "bound", "time/bound"]
    align = "rrrrrr"
    if pred.network is not None:
        for row, limit in zip(table, np.atleast_1d(pred.network.limiting), strict=True):
            row.append(limit)
        headers.append("limited by")
        align += "l"
    if protocols is not None:
        for row, name in zip(table, protocols, strict=True):
            row.append(name)
        headers.append("protocol")
        align += "l"
    where = f" ({s.workers} GPUs + {s.helpers} helper ranks at the switch)" if s.in_network else ""
    return (
        f"{s.collective}{root} {s.algorithm}{params}, p={s.nranks}{where}: {s.nsteps} steps, "
        f"{result.ntransfers:,} transfers\n"
        f"model: {result.model.describe()}; bound: {result.bound_name or result.model.bound_name}"
        "\n\n"
        + format_table(headers, table, align)
        + (_network_lines(result) if pred.network is not None else "")
        + "".join(f"\nnote: {n}" for n in (*result.notes, *pred.notes))
    )


def _network_lines(result: PredictResult) -> str:
    """Per link class at the largest size: bytes carried and the busiest link's utilization;
    then the critical path."""
    usage = result.prediction.network
    if not usage.kinds:  # one host, no links
        return ""
    j = len(result.sizes) - 1
    kind_bytes = usage.kind_bytes.reshape(len(usage.kinds), -1)[:, j]
    util = usage.utilization.reshape(len(usage.kinds), -1)[:, j]
    busiest = usage.kind_busiest.reshape(len(usage.kinds), -1)[:, j]
    rows = [
        [k, units.format_size(float(b), exact=False), units.format_time(float(t)), f"{u:.0%}"]
        for k, b, t, u in zip(usage.kinds, kind_bytes, busiest, util, strict=True)
    ]
    size = units.format_size(int(result.sizes[j]))
    text = (
        f"\n\nlinks at {size} (busiest link of each class: its busy time and share of the "
        "total time)\n"
        + format_table(["class", "bytes", "busiest link busy", "utilization"], rows, "lrrr")
    )
    text += f"\n{_breakdown(usage, j, size)}"
    if usage.critical_path is not None:
        text += f"\ncritical path at {size}: {usage.critical_path.summary()}"
    return text


def _breakdown(usage: NetworkUsage, j: int, size: str) -> str:
    """One line: what the last rank's time at size index ``j`` is made of (the prediction's
    :attr:`~commsim.models.NetworkUsage.time_parts`: launch, latency, reduction, the link
    classes, other), the parts that are not zero (nor rounding noise: under a billionth of the
    whole, as a reduction hidden by the transfer leaves in the flow simulation)."""
    parts = usage.time_parts.reshape(len(usage.part_names), -1)[:, j]
    names = usage.part_names
    order = ["launch", "latency", "reduction", *usage.kinds, "other"]
    noise = 1e-9 * float(np.abs(parts).sum())
    shown = [
        f"{k} {units.format_time(float(parts[names.index(k)]))}"
        for k in order
        if parts[names.index(k)] > noise
    ]
    return f"time at {size}: " + (", ".join(shown) or "0s")


def _columns(r: PredictResult) -> list[tuple[float, float, float, float, float]]:
    return list(zip(r.sizes, r.time, r.algbw, r.busbw, r.lower_bound, strict=True))


def main(args: argparse.Namespace) -> int:
    request = parse(args)
    print(render(compute(request), request.as_json))
    return EXIT_OK
