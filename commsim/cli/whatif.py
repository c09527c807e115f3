"""``commsim whatif``: a grid of hypothetical clusters in one vectorised call, and where the winner
changes.

Each algorithm's schedule is recorded once as the model's JAX twin
(:class:`commsim.models.Twin`); the grid of ``--vary`` multipliers is evaluated with one
``jax.vmap`` per algorithm and size.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import itertools
import re

import numpy as np

from commsim import units
from commsim.cli.arguments import parse_sizes
from commsim.cli.errors import EXIT_OK, UsageError, quote
from commsim.cli.memory import MemoryBudget
from commsim.cli.model import add_model_group, parse_model
from commsim.cli.network import add_network_group, parse_network
from commsim.cli.output import add_output_group, format_table, to_json
from commsim.cli.schedules import ScheduleGroup
from commsim.errors import CommsimError
from commsim.models import Model

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "MAX_POINTS",
    "Vary",
    "WhatifRequest",
    "WhatifResult",
    "add_arguments",
    "compute",
    "compute_over_nodes",
    "main",
    "node_counts",
    "parse",
    "parse_vary",
    "render",
]

HELP = (
    "evaluate a grid of what-if clusters at once: times per algorithm and where the winner changes"
)
DESCRIPTION = """\
Scale the model's parameters by factors on a grid (--vary, repeatable: the grid is their
product) and predict every algorithm of the collective at every point in one vectorised call
of the model's JAX twin. Names: per link class CLASS.bandwidth and CLASS.latency (the classes of
the --cluster or --topology; 'commsim topology NAME' lists them), gamma and overhead; without a
network, Hockney's alpha, beta (or bandwidth) and gamma. Values are multipliers of the model's
own: 2x, 0.5x..4x (powers of two), 1x..8x:x4, or a list 0.5x,1x,2x. CLASS.bandwidth=2x makes the
class twice as fast. With --cluster, nodes=16..256 (counts, not factors: 16..256 doubles,
16..256:x4, or a list 16,48) rebuilds the cluster, its ranks and the schedules at each node
count; the other --vary axes are evaluated in one call per node count. Models: Hockney (single
port) and the topology model with --contention none or bottleneck."""
EXAMPLES = """\
  commsim whatif -c allreduce --cluster dgx-h100:4 -s 1GiB --vary rail.bandwidth=0.5x..4x
  commsim whatif -c allreduce -a ring,hierarchical --cluster dgx-h100:16 -s 64MiB \\
      --vary rail.bandwidth=1x,2x --vary nvlink.latency=0.5x,1x,2x
  commsim whatif -c allreduce -p 64 -s 1MiB --vary alpha=0.25x..4x --json
  commsim whatif -c allreduce -a ring,hierarchical --cluster dgx-h100:16 -s 1GiB \
      --vary nodes=4..64 --vary rail.bandwidth=1x,2x"""

SCHEDULES = ScheduleGroup("whatif", many_algorithms=True)
#: Grid points one call evaluates at most (the product of the --vary lists).
MAX_POINTS = 100_000
_HOCKNEY = {"alpha": ("alpha", False), "beta": ("beta", False), "bandwidth": ("beta", True)}


@dataclasses.dataclass(frozen=True)
class Vary:
    """One ``--vary``: the twin parameter it scales (``key``, ``index`` of the class or
    ``None``), whether the factor divides (a bandwidth scales an inverse bandwidth), the
    factors, and the name the user gave."""

    name: str
    key: str
    index: int | None
    inverse: bool
    factors: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class WhatifRequest:
    schedules: object
    sizes: tuple[int, ...]
    model: Model
    budget: MemoryBudget
    vary: tuple[str, ...]
    as_json: bool = False
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, eq=False)
class WhatifResult:
    """``time[a, g, k]``: algorithm ``a`` at grid point ``g`` and size ``k``."""

    collective: str
    nranks: int
    model: Model
    vary: tuple[Vary, ...]
    points: np.ndarray  # [G, len(vary)] factors
    sizes: np.ndarray
    algorithms: tuple[str, ...]
    time: np.ndarray
    skipped: dict[str, str]
    notes: tuple[str, ...] = ()
    #: ranks at each grid point when ``nodes`` is varied (``None``: ``nranks`` everywhere)
    point_nranks: np.ndarray | None = None

    @property
    def winner(self) -> np.ndarray:
        """``[G, sizes]`` index of the fastest algorithm (the first on ties; an algorithm
        that cannot run at a point, NaN there, never wins)."""
        return np.argmin(np.where(np.isnan(self.time), np.inf, self.time), axis=0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SCHEDULES.add(parser)
    add_model_group(parser, sizes="1MiB")
    add_network_group(parser)
    output = add_output_group(parser, memory_limit=True)
    output.add_argument(
        "--vary",
        metavar="NAME=FACTORS",
        action="append",
        required=True,
        help="a parameter and its factors, e.g. rail.bandwidth=0.5x..4x (repeatable)",
    )


def parse(args: argparse.Namespace) -> WhatifRequest:
    budget = MemoryBudget.parse(args.memory_limit)
    sizes = parse_sizes(args.sizes)
    network = parse_network(args)
    if network is not None and args.nranks is None:
        args.nranks = str(network.default_nranks())
    schedules = SCHEDULES.parse(args)
    notes: list[str] = []
    if network is not None:
        schedules, notes = network.with_ranks_per_node(schedules)
    model = parse_model(args, network)
    return WhatifRequest(schedules, sizes, model, budget, tuple(args.vary), args.json, tuple(notes))


_FACTOR = r"\s*([0-9.eE+-]+)\s*x\s*"


def _factor(text: str, where: str) -> float:
    m = re.fullmatch(_FACTOR, text)
    try:
        value = float(m.group(1)) if m else float("nan")
    except ValueError:
        value = float("nan")
    if not (np.isfinite(value) and value > 0):
        raise UsageError(f"--vary {quote(where)}: {quote(text)} is not a factor such as 2x or 0.5x")
    return value


def _factors(text: str, where: str) -> tuple[float, ...]:
    out: list[float] = []
    for item in text.split(","):
        if ".." not in item:
            out.append(_factor(item, where))
            continue
        span, _, step = item.partition(":")
        lo_text, _, hi_text = span.partition("..")
        lo, hi = _factor(lo_text, where), _factor(hi_text, where)
        ratio = 2.0
        if step:
            m = re.fullmatch(r"\s*x\s*([0-9.]+)\s*", step)
            ratio = float(m.group(1)) if m else 0.0
            if not ratio > 1:
                raise UsageError(f"--vary {quote(where)}: the step {quote(step)} must be like :x2")
        if hi < lo:
            raise UsageError(f"--vary {quote(where)}: the range {quote(span)} runs backwards")
        n = int(np.floor(np.log(hi / lo) / np.log(ratio) + 1e-9)) + 1
        if n > MAX_POINTS:
            raise UsageError(f"--vary {quote(where)}: more than {MAX_POINTS:,} factors")
        out.extend(lo * ratio**k for k in range(n))
    return tuple(dict.fromkeys(out))


def parse_vary(text: str, twin_kind: str, classes: tuple[str, ...]) -> Vary:
    """``NAME=FACTORS`` for a twin of ``twin_kind`` whose link classes are ``classes``."""
    name, eq, values = text.partition("=")
    name = name.strip()
    if not eq or not name or not values.strip():
        raise UsageError(f"--vary {quote(text)}: expected NAME=FACTORS, e.g. rail.bandwidth=2x")
    factors = _factors(values, text)
    if twin_kind == "hockney":
        known = [*_HOCKNEY, "gamma"]
        if name in _HOCKNEY:
            key, inverse = _HOCKNEY[name]
            return Vary(name, key, None, inverse, factors)
        if name == "gamma":
            return Vary(name, "gamma", None, False, factors)
    else:
        known = [f"{c}.{what}" for c in classes for what in ("bandwidth", "latency")]
        known += ["gamma", "overhead"]
        cls, dot, what = name.rpartition(".")
        if dot and cls in classes and what in ("bandwidth", "latency"):
            key = "inv_bandwidth" if what == "bandwidth" else "latency"
            return Vary(name, key, classes.index(cls), what == "bandwidth", factors)
        if name in ("gamma", "overhead"):
            return Vary(name, name, None, False, factors)
    raise UsageError(f"--vary: unknown parameter {quote(name)}; known: {', '.join(known)}")


def node_counts(texts: list[str] | tuple[str, ...]) -> tuple[tuple[int, ...] | None, list[str]]:
    """The ``nodes=`` axis of ``--vary`` (``None`` if absent) and the other ``--vary`` texts.

    Examples:
        >>> node_counts(["nodes=16..128", "rail.bandwidth=2x"])
        ((16, 32, 64, 128), ['rail.bandwidth=2x'])
        >>> node_counts(["nodes=4..64:x4"])[0], node_counts(["nodes=3,5"])[0]
        ((4, 16, 64), (3, 5))
    """
    counts: tuple[int, ...] | None = None
    rest = []
    for text in texts:
        name, _, values = text.partition("=")
        if name.strip() != "nodes":
            rest.append(text)
            continue
        if counts is not None:
            raise UsageError("--vary: a parameter is given twice")
        out: list[int] = []
        for item in values.split(","):
            span, _, step = item.partition(":")
            lo_text, dots, hi_text = span.partition("..")
            try:
                lo, hi = int(lo_text), int(hi_text) if dots else int(lo_text)
                ratio = int(step.strip().removeprefix("x")) if step else 2
            except ValueError:
                lo, hi, ratio = 0, 0, 0
            if lo < 1 or hi < lo or ratio < 2:
                raise UsageError(
                    f"--vary {quote(text)}: node counts are whole numbers >= 1: 16..256, "
                    "16..256:x4 or 16,48"
                )
            while lo <= hi:
                out.append(lo)
                lo *= ratio
        counts = tuple(dict.fromkeys(out))
        if len(counts) > 64:
            raise UsageError(f"--vary {quote(text)}: more than 64 node counts")
    return counts, rest


def compute_over_nodes(args: argparse.Namespace, counts: tuple[int, ...]) -> WhatifResult:
    """:func:`compute` once per node count (the cluster rebuilt with ``--set nodes=N``, its
    ranks and schedules with it), stacked into one grid whose first axis is ``nodes``."""
    if getattr(args, "cluster", None) is None:
        raise UsageError("--vary nodes needs --cluster (a preset or file whose nodes can change)")
    if args.nranks is not None:
        raise UsageError("--vary nodes sets the rank count at each point: drop -p")
    _, rest = node_counts(args.vary)
    parts = []
    for n in counts:
        each = copy.copy(args)
        each.set, each.vary, each.nranks = [*(args.set or []), f"nodes={n}"], rest, None
        parts.append(compute(parse(each)))
    names = tuple(dict.fromkeys(a for r in parts for a in r.algorithms))
    first = parts[0]
    rows, times, ranks = [], [], []
    for n, r in zip(counts, parts, strict=True):
        rows.append(np.column_stack([np.full(len(r.points), float(n)), r.points]))
        t = np.full((len(names), len(r.points), len(r.sizes)), np.nan)
        for a, name in enumerate(r.algorithms):
            t[names.index(name)] = r.time[a]
        times.append(t)
        ranks.append(np.full(len(r.points), r.nranks))
    skipped = {}
    for n, r in zip(counts, parts, strict=True):
        for a, why in r.skipped.items():
            skipped.setdefault(a, f"at nodes={n}: {why}")
    nodes = Vary("nodes", "nodes", None, False, tuple(float(n) for n in counts))
    return WhatifResult(
        first.collective, first.nranks, first.model, (nodes, *first.vary), np.concatenate(rows),
        first.sizes, names, np.concatenate(times, axis=1), skipped,
        tuple(dict.fromkeys(n for r in parts for n in r.notes)), np.concatenate(ranks),
    )  # fmt: skip


def compute(request: WhatifRequest) -> WhatifResult:
    from commsim.models.twin import Twin

    choice = request.schedules
    [p] = choice.nranks
    twins, skipped = {}, {}
    for a in choice.algorithms:
        try:
            twins[a] = Twin.of(request.model, choice.build(a, p, request.budget))
        except CommsimError as e:
            skipped[a] = str(e).split("\n")[0]
    if not twins:
        raise UsageError("nothing to evaluate: " + "; ".join(sorted(set(skipped.values()))))
    first = next(iter(twins.values()))
    vary = tuple(parse_vary(v, first.kind, first.classes) for v in request.vary)
    if len({(v.key, v.index) for v in vary}) < len(vary):
        raise UsageError("--vary: a parameter is given twice")
    npoints = int(np.prod([len(v.factors) for v in vary]))
    if npoints > MAX_POINTS:
        raise UsageError(f"--vary: the grid has {npoints:,} points, over {MAX_POINTS:,}")
    points = np.array(list(itertools.product(*(v.factors for v in vary))), dtype=np.float64)
    sizes = np.array(request.sizes, dtype=np.float64)
    names = tuple(twins)
    time = np.empty((len(names), len(points), len(sizes)))
    for a, name in enumerate(names):
        twin = twins[name]
        base = twin.params()
        batch = {k: np.broadcast_to(v, (len(points), *np.shape(v))).copy() for k, v in base.items()}
        for j, v in enumerate(vary):
            scale = 1 / points[:, j] if v.inverse else points[:, j]
            if v.index is None:
                batch[v.key] = batch[v.key] * scale
            else:
                batch[v.key][:, v.index] *= scale
        for k, n in enumerate(sizes):
            time[a, :, k] = twin.sweep(batch, float(n))
    return WhatifResult(
        choice.collective, p, request.model, vary, points, sizes, names, time, skipped,
        request.notes,
    )  # fmt: skip


def _label(vary: tuple[Vary, ...], point: np.ndarray) -> str:
    return ", ".join(
        f"{v.name}={f:g}" if v.key == "nodes" else f"{v.name}={f:g}x"
        for v, f in zip(vary, point, strict=True)
    )


def _changes(result: WhatifResult) -> list[str]:
    """Per size, the grid points whose winner differs from the 1x point's (or the first's)."""
    factors = [j for j, v in enumerate(result.vary) if v.key != "nodes"]
    ones = np.flatnonzero(np.all(np.isclose(result.points[:, factors], 1.0), axis=1))
    ref = int(ones[0]) if len(ones) else 0
    out = []
    win = result.winner
    for k, n in enumerate(result.sizes):
        base = win[ref, k]
        ran = ~np.isnan(result.time[:, :, k]).all(axis=0)  # points where some algorithm ran
        moved = np.flatnonzero((win[:, k] != base) & ran)
        if len(moved):
            shown = "; ".join(
                f"{_label(result.vary, result.points[g])} -> {result.algorithms[win[g, k]]}"
                for g in moved[:5]
            )
            more = f" (and {len(moved) - 5} more)" if len(moved) > 5 else ""
            out.append(
                f"at {units.format_size(int(n))} the winner changes from "
                f"{result.algorithms[base]} ({_label(result.vary, result.points[ref])}): "
                f"{shown}{more}"
            )
    return out


def render(result: WhatifResult, as_json: bool) -> str:
    changes = _changes(result)
    notes = [*result.notes, *(f"{a} skipped: {why}" for a, why in result.skipped.items())]
    if as_json:
        return to_json(
            {
                "collective": result.collective,
                "nranks": result.nranks,
                "model": result.model.to_dict(),
                "vary": [{"name": v.name, "factors": list(v.factors)} for v in result.vary],
                "algorithms": list(result.algorithms),
                "notes": notes,
                "winner_changes": changes,
                "results": [
                    {
                        "point": dict(
                            zip((v.name for v in result.vary), map(float, pt), strict=True)
                        ),
                        "nranks": _nranks(result, g),
                        "nbytes": int(n),
                        "time_s": {
                            a: None if np.isnan(t) else float(t)
                            for a, t in zip(result.algorithms, result.time[:, g, k], strict=True)
                        },
                        "winner": _winner(result, g, k),
                    }
                    for g, pt in enumerate(result.points)
                    for k, n in enumerate(result.sizes)
                ],
            }
        )
    rows = [
        [
            _label(result.vary, pt),
            units.format_size(int(n)),
            *("-" if np.isnan(t) else units.format_time(float(t)) for t in result.time[:, g, k]),
            _winner(result, g, k) or "-",
        ]
        for g, pt in enumerate(result.points)
        for k, n in enumerate(result.sizes)
    ]
    headers = ["what if", "size", *result.algorithms, "winner"]
    ranks = f"p={result.nranks}"
    if result.point_nranks is not None:
        ranks = f"p={int(result.point_nranks.min())}..{int(result.point_nranks.max())}"
    text = (
        f"{result.collective}, {ranks}: {len(result.points)} grid points x "
        f"{len(result.sizes)} sizes\nmodel: {result.model.describe()}\n\n"
        + format_table(headers, rows, "lr" + "r" * len(result.algorithms) + "l")
    )
    text += "".join(f"\n{c}" for c in changes) or "\nthe winner is the same at every point"
    return text + "".join(f"\nnote: {n}" for n in notes)


def _winner(result: WhatifResult, g: int, k: int) -> str | None:
    """The fastest algorithm at grid point ``g`` and size ``k``; ``None`` if none could run."""
    if np.isnan(result.time[:, g, k]).all():
        return None
    return result.algorithms[result.winner[g, k]]


def _nranks(result: WhatifResult, g: int) -> int:
    return result.nranks if result.point_nranks is None else int(result.point_nranks[g])


def main(args: argparse.Namespace) -> int:
    counts, _ = node_counts(args.vary)
    if counts is not None:
        print(render(compute_over_nodes(args, counts), args.json))
        return EXIT_OK
    request = parse(args)
    print(render(compute(request), request.as_json))
    return EXIT_OK
