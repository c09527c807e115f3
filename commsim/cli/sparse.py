"""``commsim sparse``: sparse allreduce (SparCML's split-allgather, static and dynamic) against
dense ring, per data density; where the dynamic algorithm switches to dense; a crossover plot."""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

import numpy as np

import commsim
from commsim import units
from commsim.cli.arguments import add_sizes_argument, parse_sizes
from commsim.cli.errors import EXIT_OK, UsageError, quote
from commsim.cli.model import parse_alpha
from commsim.cli.output import add_output_group, format_table, to_json
from commsim.cli.schedules import parse_nranks
from commsim.models import Hockney
from commsim.sparse import DISTRIBUTIONS, Density, SparseCost, sparse_allreduce_cost

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "SparseRequest",
    "SparseResult",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "sparse allreduce vs dense ring per data density (SparCML split-allgather)"
DESCRIPTION = """\
Predict sparse allreduce (SparCML's split-allgather: each rank's nonzeros of block j go to
rank j as index/value pairs, the summed blocks are allgathered) against dense ring, for each
density: the fraction of nonzeros in each rank's vector, uniform or a power law. Message
sizes are expected sizes: a sum of k supports of density d has N(1 - (1 - d)^k) nonzeros
(its union). 'static' always sends pairs; 'dynamic' sends a block dense where its pairs
would take at least the dense bytes; the table says which phases went dense. Values are
float32 with int32 indices; the model is Hockney alpha-beta-gamma."""
EXAMPLES = """\
  commsim sparse -p 4 -s 64MiB --density 0.01,0.5
  commsim sparse -p 64 -s 1MiB,256MiB --density 0.1% --distribution powerlaw
  commsim sparse -p 4 -s 64MiB --plot crossover.png   # sparse vs dense vs density"""

_DEFAULT_DENSITIES = "0.001,0.01,0.1,0.5"
_PLOT_DENSITIES = np.geomspace(1e-4, 1.0, 81)
_PLOT_FORMATS = (".png", ".pdf", ".svg")


@dataclasses.dataclass(frozen=True)
class SparseRequest:
    """Predict at ``nranks`` for every size and density."""

    nranks: int
    sizes: tuple[int, ...]
    densities: tuple[Density, ...]
    model: Hockney
    plot: Path | None = None
    as_json: bool = False


@dataclasses.dataclass(frozen=True)
class SparseResult:
    """``ring[i]``: dense ring's time at ``sizes[i]``; ``costs[i][j]``: ``(static, dynamic)`` at
    size ``i`` and density ``j``; ``switch``: the uniform density from which the dynamic
    algorithm's allgather and split go dense (float32 values, int32 indices)."""

    request: SparseRequest
    ring: tuple[float, ...]
    costs: tuple[tuple[tuple[SparseCost, SparseCost], ...], ...]
    switch: tuple[float, float]
    plot: Path | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("data and model")
    g.add_argument("-p", "--nranks", default="4", metavar="P", help="ranks (default: 4)")
    add_sizes_argument(g, "64MiB")
    g.add_argument(
        "--density",
        default=_DEFAULT_DENSITIES,
        metavar="D[,D..]",
        help="fractions of nonzeros in each rank's vector, in (0, 1]: 0.01 or 1%% "
        f"(default: {_DEFAULT_DENSITIES})",
    )
    g.add_argument(
        "--distribution",
        default="uniform",
        choices=DISTRIBUTIONS,
        help="uniform: every index equally likely; powerlaw: index i with weight (i+1)^-a "
        "(default: uniform)",
    )
    g.add_argument(
        "--exponent", default="1", metavar="A", help="the power law's a > 0 (default: 1)"
    )
    g.add_argument("--alpha", metavar="TIME", help="latency per message (default: 2us)")
    g.add_argument("--beta", metavar="BW", help="time per byte sent (default: 25GB/s)")
    g.add_argument("--gamma", metavar="BW", help="time per byte reduced (default: 100GB/s)")
    output = add_output_group(parser)
    output.add_argument(
        "--plot",
        metavar="FILE",
        help="also draw time vs density at the first size (.png, .pdf or .svg): static, "
        "dynamic and dense ring, the crossovers marked",
    )


def _density(text: str) -> float:
    word = text.strip()
    try:
        value = float(word[:-1]) / 100 if word.endswith("%") else float(word)
    except ValueError:
        raise UsageError(f"--density {quote(text)}: not a number (0.01 or 1%)") from None
    if not (math.isfinite(value) and 0 < value <= 1):
        raise UsageError(f"--density {quote(text)}: a density must be in (0, 1]")
    return value


def parse(args: argparse.Namespace) -> SparseRequest:
    (p,) = parse_nranks(args.nranks, command="sparse", many=False)
    try:
        exponent = float(args.exponent)
    except ValueError:
        raise UsageError(f"--exponent {quote(args.exponent)}: not a number") from None
    dens = tuple(Density(_density(t), args.distribution, exponent) for t in args.density.split(","))
    default = Hockney()
    model = Hockney(
        alpha=default.alpha if args.alpha is None else parse_alpha(args.alpha),
        beta=default.beta if args.beta is None else units.parse_bandwidth_or_inverse(args.beta),
        gamma=default.gamma if args.gamma is None else units.parse_bandwidth_or_inverse(args.gamma),
    )
    plot = None
    if args.plot:
        plot = Path(args.plot)
        if plot.suffix.lower() not in _PLOT_FORMATS:
            raise UsageError(f"--plot {quote(args.plot)}: the name must end in .png, .pdf or .svg")
        if not plot.parent.is_dir():
            raise UsageError(f"--plot {quote(args.plot)}: its directory does not exist")
    return SparseRequest(p, parse_sizes(args.sizes), dens, model, plot, args.json)


def _both(req: SparseRequest, nbytes: float, density: Density) -> tuple[SparseCost, SparseCost]:
    m = req.model
    return tuple(  # type: ignore[return-value]
        sparse_allreduce_cost(
            req.nranks, nbytes, density, m.alpha, m.beta, m.gamma, algorithm=algorithm
        )
        for algorithm in ("static", "dynamic")
    )


def compute(request: SparseRequest) -> SparseResult:
    ring_schedule = commsim.build("allreduce", "ring", nranks=request.nranks)
    ring = request.model.predict(ring_schedule, np.array(request.sizes, dtype=float)).time
    costs = tuple(
        tuple(_both(request, float(n), d) for d in request.densities) for n in request.sizes
    )
    p, ratio = request.nranks, 2.0  # (index + value) / value bytes
    switch = (1 - (1 - 1 / ratio) ** (1 / p), 1 / ratio)  # uniform: allgather, split go dense
    result = SparseResult(request, tuple(float(t) for t in np.atleast_1d(ring)), costs, switch)
    if request.plot is None:
        return result
    _draw(request, float(np.atleast_1d(ring)[0]))
    return dataclasses.replace(result, plot=request.plot)


def _draw(request: SparseRequest, ring: float) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n, first = request.sizes[0], request.densities[0]
    grid = [dataclasses.replace(first, density=float(d)) for d in _PLOT_DENSITIES]
    static, dynamic = (
        np.array([c.time for c in col]) for col in zip(*(_both(request, n, d) for d in grid))
    )
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ms = 1e3
    ax.plot(_PLOT_DENSITIES, static * ms, label="sparse, static (index/value pairs)")
    ax.plot(_PLOT_DENSITIES, dynamic * ms, "--", label="sparse, dynamic (dense where smaller)")
    ax.axhline(ring * ms, color="k", lw=1, label="dense ring")
    cross = _PLOT_DENSITIES[np.argmax(static >= ring)] if (static >= ring).any() else None
    if cross is not None:
        ax.axvline(cross, color="grey", lw=0.8, ls=":")
        ax.annotate(f"static = ring at d ≈ {cross:.2g}", (cross, ring * ms), xytext=(-5, 6),
                    textcoords="offset points", fontsize=8, ha="right")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"density (fraction of nonzeros per rank, {first.distribution})")
    ax.set_ylabel("predicted time (ms)")
    m = request.model
    ax.set_title(
        f"allreduce of {units.format_size(n)} on {request.nranks} ranks: sparse vs dense\n"
        f"Hockney α = {units.format_time(m.alpha)}, β = 1/({units.format_bandwidth(1 / m.beta)}), "
        f"γ = 1/({units.format_bandwidth(1 / m.gamma)})",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    fig.savefig(request.plot, dpi=120)


def _fastest(times: dict[str, float]) -> str:
    """The fastest name, ties (within 1e-9) joined: ``"dynamic = ring"``."""
    low = min(times.values())
    return " = ".join(a for a, t in times.items() if t <= low * (1 + 1e-9))


def _ms(t: float) -> str:
    return units.format_time(t)


def render(result: SparseResult, as_json: bool) -> str:
    req = result.request
    if as_json:
        doc = {
            "nranks": req.nranks,
            "sizes": list(req.sizes),
            "model": req.model.describe(),
            "dynamic_dense_from": {"allgather": result.switch[0], "split": result.switch[1]},
            "results": [
                {
                    "nbytes": n,
                    "ring_time_s": ring,
                    "densities": [
                        {
                            "density": d.density,
                            "distribution": d.distribution,
                            "expected_union": s.union,
                            "static_time_s": s.time,
                            "dynamic_time_s": dyn.time,
                            "dynamic_split": dyn.split_dense,
                            "dynamic_allgather": dyn.allgather_dense,
                        }
                        for d, (s, dyn) in zip(req.densities, row, strict=True)
                    ],
                }
                for n, ring, row in zip(req.sizes, result.ring, result.costs, strict=True)
            ],
            "plot": str(result.plot) if result.plot else None,
        }
        return to_json(doc)
    out = [
        f"allreduce on {req.nranks} ranks, {req.model.describe()}; float32 values, int32 indices"
    ]
    for n, ring, row in zip(req.sizes, result.ring, result.costs, strict=True):
        rows = []
        for d, (s, dyn) in zip(req.densities, row, strict=True):
            sends = f"{dyn.split_dense}/{dyn.allgather_dense}"
            best = _fastest({"static": s.time, "dynamic": dyn.time, "ring": ring})
            rows.append([
                d.describe(), f"{s.union:,.0f}", _ms(s.time), _ms(dyn.time), sends, _ms(ring), best
            ])  # fmt: skip
        out += [
            "",
            f"{units.format_size(n)} ({n // 4:,} elements)",
            format_table(
                [
                    "density",
                    "E[union]",
                    "static",
                    "dynamic",
                    "dynamic sends\n(split/allgather)",
                    "dense ring",
                    "fastest",
                ],
                rows,
                "lrrrlrl",
            ),
        ]
    a, s = result.switch
    out += [
        "",
        f"dynamic (uniform density): the allgather goes dense from d = {a:.3g} (the union's pairs "
        f"take the dense bytes: 2·(1 - (1 - d)^{req.nranks}) >= 1), the split too from d = {s:.3g}",
    ]
    if result.plot is not None:
        out.append(f"plot: {result.plot}")
    return "\n".join(out)


def main(args: argparse.Namespace) -> int:
    request = parse(args)
    print(render(compute(request), request.as_json))
    return EXIT_OK
