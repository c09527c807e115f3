"""``commsim calibrate``: measure this machine's transport and write a profile the models read.

Runs the backend's microbenchmarks (:func:`commsim.bench.calibrate.calibrate`: ping-pong,
concurrent exchange, burst, sender overhead, local reduction, the executor's per-call overhead),
fits each curve robustly and piecewise (breakpoints from the data), prints the fit and its
quality, and writes the profile (``-o``, TOML) that ``predict``/``compare``/``validate
--profile`` read. ``--from-nccl-tests LOG --cluster ...`` instead fits a cluster's link
parameters to an nccl-tests log.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from commsim import units
from commsim.bench import DEFAULT_TIMEOUT
from commsim.bench.calibrate import DEFAULT_BLOCKS, DEFAULT_REPEATS, SUITES, Samples, calibrate
from commsim.cli import nccl_tests
from commsim.cli.arguments import int_type, parse_sizes
from commsim.cli.errors import EXIT_OK, UsageError
from commsim.cli.output import add_output_group, format_table, say_plot, to_json
from commsim.exec import BACKENDS
from commsim.profiles import Curve, Profile, save_profile

__all__ = [
    "DESCRIPTION",
    "EXAMPLES",
    "HELP",
    "CalibrateRequest",
    "CalibrateResult",
    "add_arguments",
    "compute",
    "main",
    "parse",
    "render",
]

HELP = "measure this machine's transport (or read an nccl-tests log) and fit the models to it"
DESCRIPTION = """\
Measure the transport a backend runs on and fit the models' parameters to it:
  pingpong  one message, half a round trip (OSU osu_latency): alpha and beta
  exchange  every pair of ranks sends to each other at once, as in a schedule's step,
            each sending what it received the time before (data just written)
  step      an exchange, then adding what arrived into the buffer (recursive doubling's
            step): what a reduction costs inside a step is step - exchange (MPI only)
  burst     16 messages back to back (fewer past 16 MiB): LogGP's gap g and G
  overhead  the sender's time in one eager send: LogGP's o
  reduction a local a += b: gamma
  call      one executor call that moves nothing: the per-call overhead of the executor
For MPI the transport is timed as the OSU micro-benchmarks time it: mpi4py on numpy buffers,
ranks started with mpirun, each repeat as many back-to-back operations as last about 1 ms.
The repeats are taken in --blocks interleaved passes over every kind and size; each size's
centre (the mean of the blocks' medians, the 20% highest and lowest left out) is fitted with a
robust (Huber), relative least-squares line, piecewise: the fewest pieces that put every size
within 5% of the curve, or within 3 standard errors where its centre is that uncertain (the
breakpoints, an eager/rendezvous switch or a cache level, found from the data). 100 resamples of the blocks are fitted again: a breakpoint found in fewer
than 75% of them is reported ("unstable breakpoints"), and each piece's start, alpha and
bandwidth get a 95% interval (percentiles of the resamples, widened for the few blocks they
come from), written into the profile beside the fit with R^2 and the residuals. Two
calibrations agree when they have the same pieces and every parameter's intervals overlap.
--until-stable N measures up to N more rounds of blocks while a curve stays unstable.

--from-nccl-tests LOG --cluster PRESET|FILE fits a cluster's link parameters (latency and a
bandwidth efficiency per link class) to an nccl-tests log instead, and writes a cluster file."""
EXAMPLES = """\
  commsim calibrate --backend mpi -p 2 -o profile.toml --plot profile.png
  commsim predict -c allreduce -a ring -p 2 -s 64KiB..64MiB --profile profile.toml
  commsim validate -c allreduce -p 2 --profile profile.toml -s 64KiB..64MiB
  commsim calibrate --backend jax -p 2 -s 8B..16MiB --repeats 10 --json
  commsim calibrate --from-nccl-tests all_reduce.log --cluster dgx-h100:1 -o fitted.toml"""

_DEFAULT_SIZES = "8B..64MiB"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("measurement")
    g.add_argument(
        "--backend",
        choices=tuple(n for n, row in BACKENDS.items() if row.calibration),
        default="mpi",
        help="whose transport (default: mpi) | "
        + " | ".join(
            f"{name}: {SUITES[row.calibration].transport}"
            for name, row in BACKENDS.items()
            if row.calibration
        ),
    )
    g.add_argument(
        "-p",
        "--nranks",
        type=int_type("-p", 2),
        default=2,
        help="ranks (MPI processes, devices) to measure on; ping-pong uses the first two, the "
        "exchange all pairs at once (default: 2)",
    )
    g.add_argument(
        "-s",
        "--sizes",
        default=_DEFAULT_SIZES,
        metavar="SIZES",
        help=f"message sizes, e.g. 8B..64MiB (doubling) or 1KiB,1MiB (default: {_DEFAULT_SIZES})",
    )
    g.add_argument(
        "--repeats",
        type=int_type("--repeats", 3),
        default=DEFAULT_REPEATS,
        help="timed repeats per size; the centre of their blocks' medians is fitted, the spread "
        f"reported (default: {DEFAULT_REPEATS})",
    )
    g.add_argument(
        "--blocks",
        type=int_type("--blocks", 1),
        default=None,
        help="take the repeats in this many blocks (MPI: interleaved passes over every kind and "
        "size; JAX, CUDA: runs of consecutive repeats); "
        "resamples of the blocks check every breakpoint and give every parameter a 95%% "
        "interval (1: one pass, no intervals, pieces by the BIC; default: the most blocks up "
        f"to {DEFAULT_BLOCKS} that divide --repeats, {DEFAULT_BLOCKS} for {DEFAULT_REPEATS})",
    )
    g.add_argument(
        "--until-stable",
        type=int_type("--until-stable", 0),
        default=0,
        metavar="ROUNDS",
        help="while a curve has a breakpoint its resamples do not confirm, measure up to this "
        "many more rounds of --blocks blocks and refit on all of them; a profile still "
        "unstable says so (default: 0, one round)",
    )
    g.add_argument(
        "--warmup", type=int_type("--warmup", 0), default=2, help="untimed repeats (default: 2)"
    )
    g.add_argument(
        "--timeout",
        type=int_type("--timeout", 1),
        default=int(DEFAULT_TIMEOUT),
        metavar="SECONDS",
        help=f"--backend mpi: end mpirun after this long (default: {DEFAULT_TIMEOUT:g})",
    )
    out = add_output_group(parser)
    out.add_argument("-o", "--output", metavar="FILE", help="write the profile (TOML) here")
    out.add_argument(
        "--plot", metavar="FILE.png", help="draw the measured points over the fitted curves"
    )
    nccl_tests.add_arguments(parser)


@dataclasses.dataclass(frozen=True)
class CalibrateRequest:
    """Measure ``backend`` on ``nranks`` ranks at ``sizes``; write the profile to ``output``."""

    backend: str
    nranks: int
    sizes: tuple[int, ...]
    repeats: int = DEFAULT_REPEATS
    warmup: int = 2
    timeout: float = DEFAULT_TIMEOUT
    output: Path | None = None
    plot: str | None = None
    as_json: bool = False
    progress: bool | None = None
    blocks: int | None = None  # None: the most up to DEFAULT_BLOCKS that divide the repeats
    until_stable: int = 0  # more rounds of blocks while a curve is unstable


@dataclasses.dataclass(frozen=True)
class CalibrateResult:
    profile: Profile
    samples: tuple[Samples, ...]
    output: Path | None


def render(result: CalibrateResult, as_json: bool) -> str:
    p = result.profile
    if as_json:
        return to_json(
            {
                "profile": p.to_dict(),
                "output": str(result.output) if result.output else None,
                "samples": [s.to_dict() for s in result.samples],
            }
        )
    rows = []
    for kind, c in p.curves.items():
        for i, piece in enumerate(c.fit.pieces):
            q = c.quality
            rows.append(
                [
                    kind if i == 0 else "",
                    units.format_size(piece.start, exact=False),
                    units.format_time(piece.alpha),
                    _piece_bandwidth(c, i),
                    f"{q.r2:.4f}" if i == 0 else "",
                    f"{100 * q.median_rel_residual:.1f}%" if i == 0 else "",
                    f"{100 * q.max_rel_residual:.1f}%" if i == 0 else "",
                    f"{100 * float(np.median(c.spread)):.1f}%" if i == 0 else "",
                ]
            )
    lines = [
        f"{p.backend} on {p.nranks} ranks: {p.transport}",
        f"measured on {p.machine}, {p.date}",
        "",
        format_table(
            ["curve", "from", "alpha", "bandwidth", "R^2", "|resid| med", "max", "spread"],
            rows,
            "llrrrrrr",
        ),
    ]
    lines += _interval_lines(p)
    red = p.curves.get("reduction")
    if red is not None:
        lines.append(
            f"gamma: 1/({units.format_bandwidth(1 / p.gamma)}) (the reduction curve's largest piece)"
        )
    inside = p.step_reduction()
    if inside is not None:
        lines.append(
            f"{inside.describe()} (max(step - exchange, reduction): what the Hockney model "
            "charges a reduction in place of gamma)"
        )
    if p.loggp is not None:
        lg = p.loggp
        lines.append(
            f"LogGP: L={units.format_time(lg.L)} o={units.format_time(lg.o)} "
            f"g={units.format_time(lg.g)} G=1/({units.format_bandwidth(1 / lg.G) if lg.G else 'inf'})"
        )
    for name, s in p.call_overhead.items():
        lines.append(
            f"per-call overhead of the {name} executor: {units.format_time(s)} (one call that "
            "moves nothing; validate reports errors with and without it)"
        )
    lines += [f"note: {n}" for n in p.notes]
    if result.output:
        lines.append(f"wrote {result.output} (use it with --profile)")
    return "\n".join(lines)


def _interval_lines(p: Profile) -> list[str]:
    """Each resampled curve's status, and its pieces' 95% intervals (start, alpha, bandwidth)."""
    lines = []
    for kind, c in p.curves.items():
        iv = c.intervals
        if iv is None:
            continue
        lines.append(
            f"{kind}: {iv.status} ({iv.replicates} resamples of {iv.blocks} blocks, "
            f"{100 * iv.level:.0f}% intervals, expanded percentiles)"
        )
        for i in range(len(c.fit.pieces)):
            (s0, s1), (a0, a1), (b0, b1) = iv.start[i], iv.alpha[i], iv.beta[i]
            where = (
                "from 0"
                if i == 0
                else f"from {units.format_size(s0, exact=False)}..{units.format_size(s1, exact=False)}"
                f" (found in {100 * iv.support[i]:.0f}%)"
            )
            lines.append(
                f"  {where}: alpha {units.format_time(a0)}..{units.format_time(a1)}, bandwidth "
                f"{_bw(b1)}..{_bw(b0)}"
            )
    return lines


def _piece_bandwidth(c: Curve, i: int) -> str:
    """Piece ``i``'s fitted bandwidth; ``>=X`` where its interval has no upper end (the time
    grows by less than the noise over the piece: only a lower bound is measured)."""
    beta = c.fit.pieces[i].beta
    if beta == 0:
        return "-"
    iv = c.intervals
    if iv is not None and iv.beta[i][0] <= 0 < iv.beta[i][1]:
        return f">={_bw(iv.beta[i][1])}"
    return _bw(beta)


def _bw(beta: float) -> str:
    return "inf" if beta <= 0 else units.format_bandwidth(1 / beta)


def parse(args: argparse.Namespace) -> CalibrateRequest:
    if args.cluster:
        raise UsageError("--cluster goes with --from-nccl-tests LOG")
    output = Path(args.output) if args.output else None
    if output is not None and output.suffix.lower() != ".toml":
        raise UsageError(f"-o {args.output}: a profile is a .toml file")
    return CalibrateRequest(
        args.backend, args.nranks, parse_sizes(args.sizes), args.repeats, args.warmup,
        float(args.timeout), output, args.plot, args.json, args.progress, args.blocks,
        args.until_stable,
    )  # fmt: skip


def compute(request: CalibrateRequest) -> CalibrateResult:
    """Measure, fit, and write the profile (and the plot) where the request says."""
    profile, samples = calibrate(
        request.backend, request.nranks, request.sizes, repeats=request.repeats,
        warmup=request.warmup, blocks=request.blocks, until_stable=request.until_stable,
        timeout=request.timeout, progress=request.progress,
    )  # fmt: skip
    if request.output is not None:
        save_profile(profile, request.output)
    if request.plot:
        from commsim.cli.measured_plots import draw_profile

        draw_profile(profile, request.plot)
    return CalibrateResult(profile, tuple(samples), request.output)


def main(args: argparse.Namespace) -> int:
    if getattr(args, "from_nccl_tests", None):
        return nccl_tests.calibrate_main(args)
    request = parse(args)
    print(render(compute(request), request.as_json))
    say_plot(request.plot, request.as_json)
    return EXIT_OK
