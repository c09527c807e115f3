"""``commsim compare``: predicted times of several algorithms over rank counts and sizes, the
fastest per size, and optionally a figure."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from commsim import units
from commsim._ir import Schedule
from commsim._progress import Progress
from commsim.algorithms import on_channels
from commsim.cli import plot
from commsim.cli.arguments import DEFAULT_PREDICT_SIZES, parse_sizes
from commsim.cli.errors import EXIT_OK, UsageError, one_line, quote
from commsim.cli.memory import MemoryBudget
from commsim.cli.model import add_library_group, add_model_group, parse_channels, parse_model
from commsim.cli.network import add_network_group, parse_network, without_skipped
from commsim.cli.output import add_output_group, format_ratio, format_table, to_json
from commsim.cli.schedules import ScheduleChoice, ScheduleFile, ScheduleGroup
from commsim.cli.wire import add_wire_argument, check_collective, parse_wire, wired_model
from commsim.errors import ParameterError, ResourceError, ScheduleError
from commsim.models import Model, Prediction, bound_of, fastest

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "CompareRequest",
    "CompareResult",
    "Panel",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "compare algorithms' predicted times over rank counts and sizes; pick the fastest"
DESCRIPTION = """\
For each rank count, a table of predicted times (rows: sizes, columns: algorithms) with
the fastest marked * and named in the 'winner' column, next to the lower bound. By
default every algorithm of the collective takes part; one whose schedule would not fit
in memory (or does not support a p) is skipped with a note. --file adds your own saved
schedule to the panel of its rank count. Long sweeps show a progress bar on stderr."""
EXAMPLES = """\
  commsim compare -c allreduce -p 64
  commsim compare -c allreduce -a ring,rabenseifner -p 8,64,1024 -s 1KiB..1GiB:x4
  commsim compare -c allreduce -p 2..1024 -s 4KiB,64MiB --plot allreduce.png
  commsim compare -c allgather -p 128 --alpha 5us --beta 400Gb/s --json
  commsim compare -c allreduce -p 8 --file my_schedule.json   # yours beside the registry's
  commsim compare -c allreduce -p 1024 --tune   # pipeline depths tuned per size (commsim tune)"""

SCHEDULES = ScheduleGroup("compare", many_algorithms=True, many_nranks=True)
_PLOT_FORMATS = (".png", ".pdf", ".svg")


@dataclasses.dataclass(frozen=True)
class CompareRequest:
    """Predict every schedule of ``schedules`` at ``sizes`` (bytes) with ``model``; with
    ``plot``, also draw the result there."""

    schedules: ScheduleChoice
    sizes: tuple[int, ...]
    model: Model
    budget: MemoryBudget
    plot: Path | None = None
    as_json: bool = False
    progress: bool | None = None
    files: tuple[Schedule, ...] = ()  # saved schedules, each joining the panel of its nranks
    notes: tuple[str, ...] = ()
    tune: bool = False  # grow the pipelined algorithms' segments per size (commsim tune)
    channels: int = 1  # --channels: every schedule on C channels (on_channels lays them out)


@dataclasses.dataclass(frozen=True, eq=False)
class Panel:
    """One rank count: predicted ``times`` per algorithm (s per size), the ``lower_bound`` per
    size, the fastest algorithm per size, and the algorithms ``skipped`` with why."""

    nranks: int
    times: Mapping[str, np.ndarray]
    lower_bound: np.ndarray
    winners: tuple[str, ...]
    skipped: Mapping[str, str]
    limiting: tuple[str, ...] | None = None  # per size, the link class limiting the winner
    tuned: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # --tune
    bound_name: str = ""  # the bound that binds at this rank count (bound_of)
    protocols: tuple[str, ...] | None = None  # per size, the winner's protocol (--protocol)


@dataclasses.dataclass(frozen=True, eq=False)
class CompareResult:
    """One :class:`Panel` per rank count; ``plot`` is the figure written, if any."""

    collective: str
    algorithms: tuple[str, ...]
    model: Model
    sizes: np.ndarray
    panels: tuple[Panel, ...]
    plot: Path | None = None
    notes: tuple[str, ...] = ()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SCHEDULES.add(parser)
    parser.add_argument(
        "-f",
        "--file",
        action="append",
        default=[],
        metavar="FILE",
        help="also compare a saved schedule (.json, .npz or MSCCL-IR .xml), in the panel of its "
        "rank count: its collective must be -c's and its p one of -p's (repeatable)",
    )
    add_model_group(parser, sizes=DEFAULT_PREDICT_SIZES)
    add_network_group(parser)
    add_library_group(parser)
    add_wire_argument(parser)
    output = add_output_group(parser, memory_limit=True)
    output.add_argument(
        "--plot",
        metavar="FILE",
        help="also write a log-log figure of time vs size (.png, .pdf or .svg): one panel per p "
        f"(at most {plot.MAX_PANELS}), one line per algorithm (points where sizes are far apart), "
        "ties named, the lower bound dashed; sizes of 0 are left out",
    )
    output.add_argument(
        "--tune",
        action="store_true",
        help="tune the pipelined algorithms' depth per size (segments, or pipeline: the "
        "chunks of hierarchical and nvls_tree phases), as commsim tune does (those not set by "
        "--param): each takes its best depth per size, shown in a column",
    )


def parse(args: argparse.Namespace) -> CompareRequest:
    budget = MemoryBudget.parse(args.memory_limit)
    nchannels = parse_channels(args)
    if nchannels > 1 and getattr(args, "tune", False):
        raise UsageError("--tune sweeps segments, --channels fixes C: use commsim tune --channels")
    network = parse_network(args)
    if network is not None and args.nranks is None:
        args.nranks = str(network.default_nranks())  # every host
    schedules = SCHEDULES.parse(args)
    assert isinstance(schedules, ScheduleChoice)  # the group takes no --file
    schedules = dataclasses.replace(schedules, gpus=True)  # -p counts GPUs (switch rows)
    notes: list[str] = []
    if network is not None:
        schedules, notes = network.with_network_params(schedules)
    wire = parse_wire(args)
    check_collective(wire, schedules.collective)
    sizes, model = parse_sizes(args.sizes), wired_model(parse_model(args, network), wire)
    plot = _plot_path(args.plot) if args.plot else None
    files = tuple(on_channels(_load(path, schedules, budget), nchannels) for path in args.file)
    return CompareRequest(
        schedules, sizes, model, budget, plot, args.json, args.progress, files, tuple(notes),
        getattr(args, "tune", False), nchannels,
    )  # fmt: skip


def _load(path: str, choice: ScheduleChoice, budget: MemoryBudget) -> Schedule:
    """The saved schedule at ``path``, if it computes ``choice``'s collective at one of its p."""
    [s] = ScheduleFile(Path(path)).build_all(budget)
    if s.collective != choice.collective or s.nranks not in choice.nranks:
        raise UsageError(
            f"{path}: a {s.collective} on {s.nranks} ranks cannot join a comparison of "
            f"{choice.collective} at p={','.join(map(str, choice.nranks))}"
        )
    return s


def _plot_path(text: str) -> Path:
    path = Path(text)
    if path.suffix.lower() not in _PLOT_FORMATS:
        raise UsageError(f"--plot {quote(text)}: the name must end in {', '.join(_PLOT_FORMATS)}")
    if not path.parent.is_dir():
        raise UsageError(
            f"--plot {quote(text)}: directory {quote(str(path.parent))} does not exist"
        )
    return path


def compute(request: CompareRequest) -> CompareResult:
    """Build everything first (failures and memory skips are known before the long part),
    predict, pick the winners, and draw the figure if asked."""
    choice, sizes = request.schedules, np.array(request.sizes, dtype=np.float64)
    if request.plot is not None:
        plot.check_drawable(request.sizes, len(choice.nranks))
    built = [
        _build(choice, p, request.budget, len(sizes), request.channels, request.model)
        for p in choice.nranks
    ]
    for p, (schedules, _) in zip(choice.nranks, built, strict=True):
        for s in (s for s in request.files if s.nranks == p):
            name = s.algorithm if s.algorithm not in choice.algorithms else f"{s.algorithm} (file)"
            schedules[name] = s
    if not any(schedules for schedules, _ in built):
        reasons = {why for _, skipped in built for why in skipped.values()}
        raise UsageError("nothing to compare: " + "; ".join(sorted(reasons)))
    tuned = [_tuned(request, p, sch) for p, (sch, _) in zip(choice.nranks, built, strict=True)]
    total = sum(
        s.nsteps * s.nranks
        for (schedules, _), t in zip(built, tuned, strict=True)
        for a, s in schedules.items()
        if a not in t
    )
    with Progress(total, "commsim", enabled=request.progress, count=False) as bar:
        panels = tuple(
            _panel(choice.collective, p, schedules, skipped, request.model, sizes, bar, t)
            for p, (schedules, skipped), t in zip(choice.nranks, built, tuned, strict=True)
        )
    names = tuple(dict.fromkeys([*choice.algorithms, *(a for sch, _ in built for a in sch)]))
    everywhere = {a for a in choice.algorithms if all(a in skipped for _, skipped in built)}
    notes = without_skipped(request.notes, everywhere)
    result = CompareResult(choice.collective, names, request.model, sizes, panels, notes=notes)
    if request.plot is None:
        return result
    plot.plot_compare(request.plot, choice.collective, request.model.describe(), sizes, panels)
    return dataclasses.replace(result, plot=request.plot)


def _build(
    choice: ScheduleChoice,
    nranks: int,
    budget: MemoryBudget,
    nsizes: int,
    nchannels: int = 1,
    model: Model | None = None,
) -> tuple[dict[str, Schedule], dict[str, str]]:
    """The schedules on ``nranks`` ranks that fit (each on ``nchannels`` channels, laid out by
    :func:`commsim.algorithms.on_channels`) and that the model's network can place (in-network
    helper ranks need a reducing switch: ``hosts_of`` of a topology model), and why the others
    were skipped."""
    schedules, skipped = {}, {}
    placeable = getattr(model, "hosts_of", None)
    for a in choice.algorithms:
        try:
            s = on_channels(choice.build(a, nranks, budget), nchannels)
            budget.check_predict(s, nsizes)
        except (ResourceError, ScheduleError) as e:
            skipped[a] = one_line(e)
            continue
        if placeable is not None and s.in_network:
            try:
                placeable(s)
                getattr(model, "check_carried", lambda _: None)(s)  # a protocol may refuse it
            except ParameterError as e:
                skipped[a] = one_line(e)
                continue
        schedules[a] = s
    return schedules, skipped


def _tuned(
    request: CompareRequest, nranks: int, schedules: Mapping[str, Schedule]
) -> dict[str, _Tuned]:
    """With ``--tune``, each algorithm with a grown parameter (``segments``, ``pipeline``) not
    set by ``--param``: its best time per size over the tuner's candidates, and the winning
    values; the panel predicts its fixed-parameter schedule no more. An in-network row is tuned
    on its GPUs, its switch helpers added by the tuner (``sweep``'s ``switch_rows``), where the
    model places helpers on switches; elsewhere (Hockney) it keeps its built parameters."""
    from commsim.algorithms import info
    from commsim.tuner import GROWN, sweep

    choice, out = request.schedules, {}
    for a in choice.algorithms if request.tune else ():
        given = choice.params[a]
        row = info(choice.collective, a)
        if a not in schedules or not any(k in GROWN and k not in given for k in row.params):
            continue
        if schedules[a].in_network and not getattr(request.model, "places_in_network", False):
            continue  # the tuner builds switch rows where the model places them; kept as built
        result = sweep(
            choice.collective, request.model, schedules[a].workers, request.sizes,
            algorithms=[a], params={a: given}, progress=request.progress,
        )  # fmt: skip
        best = result.best()
        at = np.searchsorted(result.sizes, np.array(request.sizes, dtype=np.float64))
        won = [result.candidates[i] for i in best[at]]
        shown = tuple(" ".join(f"{k}={v}" for k, v in c.params.items() if k in GROWN) for c in won)
        times = result.times[best, np.arange(best.size)][at]
        out[a] = _Tuned(times, shown, tuple(c.schedule for c in won))
    return out


@dataclasses.dataclass(frozen=True)
class _Tuned:
    """A tuned row of a panel: per size its best time, the winning values as shown, and the
    winning candidate's schedule."""

    times: np.ndarray
    shown: tuple[str, ...]
    schedules: tuple[Schedule, ...]


def _winners_predictions(
    model: Model,
    sizes: np.ndarray,
    winners: Sequence[str],
    preds: Mapping[str, Prediction],
    tuned: Mapping[str, _Tuned],
) -> list[tuple[Prediction, int]]:
    """Per size, the prediction (at that size) of the schedule that won it: a fixed row's, or a
    tuned row's winning candidate (each candidate predicted once, at the sizes it won)."""
    out: list[tuple[Prediction, int]] = [None] * len(winners)  # type: ignore[list-item]
    wins: dict[int, tuple[Schedule, list[int]]] = {}
    for j, w in enumerate(winners):
        if w in tuned:
            s = tuned[w].schedules[j]
            wins.setdefault(id(s), (s, []))[1].append(j)
        else:
            out[j] = (preds[w], j)
    for s, js in wins.values():
        pred = model.predict(s, sizes[js])
        for k, j in enumerate(js):
            out[j] = (pred, k)
    return out


def _panel(
    collective: str,
    nranks: int,
    schedules: Mapping[str, Schedule],
    skipped: Mapping[str, str],
    model: Model,
    sizes: np.ndarray,
    bar: Progress,
    tuned: Mapping[str, _Tuned],
) -> Panel:
    preds, skipped = {}, dict(skipped)
    for a, s in schedules.items():
        if a in tuned:
            continue
        try:
            preds[a] = model.predict(bar.track(s, f"p={nranks} {a}"), sizes)
        except ResourceError as e:  # a model that gives up on it (flow's effort limit)
            skipped[a] = one_line(e)
    schedules = {a: s for a, s in schedules.items() if a in preds or a in tuned}
    times = {
        a: tuned[a].times if a in tuned else np.atleast_1d(np.asarray(preds[a].time))
        for a in schedules
    }
    # helper ranks (a reducing switch) void the bounds that assume every rank holds data: the
    # panel shows the bound of the schedule with the most helpers, which holds for them all
    p_all, helpers = max(((s.nranks, s.helpers) for s in schedules.values()), key=lambda x: x[1],
                         default=(nranks, 0))  # fmt: skip
    bound, bound_name = bound_of(model, collective, p_all, sizes, helpers)
    bound = np.atleast_1d(np.asarray(bound))
    names = list(times)
    winners = [names[i] for i in fastest([times[a] for a in names])] if names else []
    won = _winners_predictions(model, sizes, winners, preds, tuned) if names else []
    limiting = None
    if won and all(pr.network is not None for pr, _ in won):
        limiting = tuple(str(np.atleast_1d(pr.network.limiting)[k]) for pr, k in won)
    shown = {a: t.shown for a, t in tuned.items()}
    protocols = None
    if won and all(pr.protocol is not None for pr, _ in won):
        protocols = tuple(
            str(np.atleast_1d(np.asarray(pr.protocol, dtype=object))[k]) for pr, k in won
        )
    return Panel(
        nranks, times, bound, tuple(winners), dict(skipped), limiting, shown, bound_name, protocols
    )


def render(result: CompareResult, as_json: bool) -> str:
    if as_json:
        return to_json(
            {
                "collective": result.collective,
                "model": result.model.to_dict(),
                "sizes": result.sizes.astype(np.int64),
                "algorithms": result.algorithms,
                "results": [
                    {
                        "nranks": pn.nranks,
                        "time_s": pn.times,
                        "lower_bound_s": pn.lower_bound,
                        "bound": pn.bound_name or result.model.bound_name,
                        "winner": pn.winners,
                        "winner_limited_by": pn.limiting,
                        **({"winner_protocol": pn.protocols} if pn.protocols else {}),
                        "skipped": pn.skipped,
                        "tuned_params": pn.tuned,
                    }
                    for pn in result.panels
                ],
                "plot": str(result.plot) if result.plot else None,
                "notes": list(result.notes),
            }
        )
    lines = [
        f"{result.collective}: predicted time; model: {result.model.describe()}",
        f"* marks the fastest algorithm per size; bound: {result.model.bound_name}",
    ]
    lines += [
        _render_panel(result.collective, result.sizes, pn, result.model.bound_name)
        for pn in result.panels
    ]
    lines += [f"note: {n}" for n in result.notes]
    if result.plot is not None:
        lines.append(f"\nplot written to {result.plot}")
    return "\n".join(lines)


def _render_panel(collective: str, sizes: np.ndarray, pn: Panel, bound_name: str) -> str:
    binds = f" (bound: {pn.bound_name})" if pn.bound_name not in ("", bound_name) else ""
    lines = [f"\n{collective}, p={pn.nranks}{binds}"]
    names = list(pn.times)
    if names:
        rows = []
        for j, n in enumerate(sizes):
            win = pn.winners[j]
            cells = [units.format_time(pn.times[a][j]) + ("*" if a == win else " ") for a in names]
            t_win, lb = pn.times[win][j], pn.lower_bound[j]
            limit = [pn.limiting[j]] if pn.limiting is not None else []
            limit += [pn.protocols[j]] if pn.protocols is not None else []
            rows.append(
                [
                    units.format_size(int(n)),
                    *cells,
                    units.format_time(lb),
                    win,
                    format_ratio(t_win, lb),
                    *limit,
                    *(params[j] for params in pn.tuned.values()),
                ]
            )
        headers = ["size", *(f"{a} " for a in names), "bound", "winner", "winner/bound"]
        align = "r" + "r" * len(names) + "rlr"
        if pn.limiting is not None:
            headers.append("limited by")
            align += "l"
        if pn.protocols is not None:
            headers.append("protocol")
            align += "l"
        headers += [f"{a} tuned" for a in pn.tuned]
        align += "l" * len(pn.tuned)
        lines.append(format_table(headers, rows, align))
        lines.append("fastest: " + _ranges(sizes, pn.winners))
    lines += [f"note: skipped {a}: {why}" for a, why in pn.skipped.items()]
    return "\n".join(lines)


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


def main(args: argparse.Namespace) -> int:
    request = parse(args)
    print(render(compute(request), request.as_json))
    return EXIT_OK
