"""``--from-nccl-tests LOG``: calibrate a cluster from an nccl-tests log, or validate against one.

``commsim calibrate --from-nccl-tests LOG --cluster PRESET|FILE [-o fitted.toml]`` fits the
cluster's link latency and bandwidth efficiency per link table to the log's rows up to
``--fit-up-to`` (:func:`commsim.bench.calibrate.fit_cluster`) and writes the fitted cluster file;
``commsim validate --from-nccl-tests LOG --cluster PRESET|FILE`` prints predicted against
measured for every row, the median absolute error, and the held-out rows (64 MiB and up)
apart. ``docs/nccl-tests.md`` explains what is fitted and what a fit cannot know.

The model runs the NCCL-like algorithm for the log's collective (:data:`DEFAULT_ALGORITHMS`;
``--algorithm`` overrides): NCCL runs rings for allreduce, allgather and reduce_scatter, ordered
through the servers (``snake_ring``), and pipelined chains for broadcast; its alltoall posts
every send at once (``direct``); commsim has no pipelined-chain reduce, so reduce runs
Rabenseifner's (its fitted efficiency absorbs the difference).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

import commsim
from commsim import units
from commsim.algorithms import info
from commsim.bench.calibrate._cluster_fit import (
    DEFAULT_FIT_UP_TO,
    HELD_OUT_FROM,
    ClusterFit,
    cluster_description,
    fit_cluster,
    predict_rows,
)
from commsim.bench.calibrate._nccl_tests import NcclTestsLog, read_nccl_tests
from commsim.cli.errors import EXIT_OK, UsageError
from commsim.cli.output import format_table, to_json
from commsim.clusters import build_cluster

__all__ = [
    "DEFAULT_ALGORITHMS",
    "add_arguments",
    "calibrate_main",
    "validate_main",
]

#: The algorithm the model runs for a log of each collective (module docstring: why).
DEFAULT_ALGORITHMS: dict[str, str] = {
    "allreduce": "snake_ring",
    "allgather": "ring",
    "reduce_scatter": "ring",
    "broadcast": "chain",
    "reduce": "rabenseifner",
    "alltoall": "direct",
}


def _add_once(parser: argparse.ArgumentParser, *flags: str, **kwargs: Any) -> None:
    """Add an option unless the command already has it (``validate`` has ``-c``/``--cluster``)."""
    existing = getattr(parser, "_option_string_actions", {})
    if not any(f in existing for f in flags):
        parser.add_argument(*flags, **kwargs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--from-nccl-tests LOG --fit-up-to SIZE`` (and ``--cluster --collective --algorithm``
    where the command does not have them yet)."""
    g = parser.add_argument_group("nccl-tests log")
    g.add_argument(
        "--from-nccl-tests",
        dest="from_nccl_tests",
        metavar="LOG",
        help="an nccl-tests output (all_reduce_perf, all_gather_perf, ...): calibrate the "
        "cluster's links to it, or validate the cluster's predictions against it",
    )
    g.add_argument(
        "--fit-up-to",
        dest="fit_up_to",
        metavar="SIZE",
        default="16MiB",
        help="fit the rows up to this size; larger rows are only predicted (default 16MiB)",
    )
    _add_once(
        g, "--cluster", metavar="PRESET|FILE.toml", help="the cluster the log ran on (dgx-h100:1)"
    )
    _add_once(
        g,
        "--collective",
        metavar="C",
        help="the log's collective, when the log does not name its binary (allgather vs alltoall)",
    )
    _add_once(
        g,
        "--algorithm",
        metavar="NAME",
        help="the algorithm the model runs (default: NCCL-like: snake_ring for allreduce, ring "
        "for allgather and reduce_scatter, chain for broadcast, rabenseifner for reduce, direct "
        "for alltoall)",
    )


# -- shared -------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class _Inputs:
    log: NcclTestsLog
    cluster: str
    schedule: commsim.Schedule
    notes: tuple[str, ...]


def _one(value: Any, flag: str) -> str | None:
    """An option that may arrive as a list (``validate``'s ``-a``): exactly one value."""
    if value is None or isinstance(value, str):
        return value
    values = [v for v in value if v]
    if len(values) > 1:
        raise UsageError(
            f"{flag}: an nccl-tests log is one algorithm's run, got {', '.join(values)}"
        )
    return values[0] if values else None


def _inputs(args: argparse.Namespace) -> _Inputs:
    path = getattr(args, "from_nccl_tests", None)
    if not path:
        raise UsageError("give the log: --from-nccl-tests LOG")
    spec = getattr(args, "cluster", None)
    if not spec:
        raise UsageError(
            "--from-nccl-tests needs the cluster the log ran on: --cluster PRESET|FILE.toml "
            "(e.g. dgx-h100:1)"
        )
    collective = _one(getattr(args, "collective", None), "--collective")
    log = read_nccl_tests(path, collective=collective)
    desc, origin = cluster_description(spec)
    c = build_cluster(desc, origin)
    algorithm = _one(getattr(args, "algorithm", None), "--algorithm")
    algorithm = algorithm or DEFAULT_ALGORITHMS[log.collective]
    params: dict[str, Any] = {}
    taken = info(log.collective, algorithm).params
    if "ranks_per_node" in taken:
        params["ranks_per_node"] = c.gpus_per_node
    if commsim.spec(log.collective).rooted:
        roots = {r.root for r in log.rows}
        if len(roots) > 1:
            raise UsageError(
                f"{path}: rows with roots {sorted(roots)}; the model runs one root: keep one"
            )
        params["root"] = max(roots.pop(), 0)
    schedule = commsim.build(log.collective, algorithm, nranks=log.nranks, **params)
    notes = list(log.notes)
    if log.collective_from != "the columns":
        notes.append(f"collective {log.collective} from {log.collective_from}")
    if log.time_column == "cputime":
        notes.append("the log's times are CPU times (nccl-tests -C), not GPU times")
    return _Inputs(log, spec, schedule, tuple(notes))


def _size(value: Any, flag: str) -> int:
    try:
        return units.parse_size(value)
    except units.UnitError as e:
        raise UsageError(f"{flag}: {e}") from None


def _time(s: float) -> str:
    return units.format_time(float(s))


def _pct(e: float) -> str:
    return f"{100 * e:+.1f}%"


def _summary(sizes: np.ndarray, err: np.ndarray, fit_up_to: int) -> dict[str, Any]:
    """Median |error| over every row, the fit range, and the held-out rows (>= 64 MiB)."""
    out: dict[str, Any] = {"median_abs_error": float(np.median(np.abs(err)))}
    for key, mask in (
        ("fit_rows", sizes <= fit_up_to),
        ("held_out", sizes >= HELD_OUT_FROM),
    ):
        if mask.any():
            a = np.abs(err[mask])
            out[key] = {"rows": int(mask.sum()), "median_abs_error": float(np.median(a)),
                        "max_abs_error": float(a.max())}  # fmt: skip
        else:
            out[key] = {"rows": 0, "median_abs_error": None, "max_abs_error": None}
    return out


def _summary_lines(s: dict[str, Any], fit_up_to: int) -> list[str]:
    lines = [f"median |error|, every row: {100 * s['median_abs_error']:.1f}%"]
    for key, what in (
        ("fit_rows", f"rows up to {units.format_size(fit_up_to)}"),
        ("held_out", f"held-out rows ({units.format_size(HELD_OUT_FROM)} and up)"),
    ):
        part = s[key]
        if part["rows"]:
            lines.append(
                f"median |error|, {what}: {100 * part['median_abs_error']:.1f}% "
                f"(max {100 * part['max_abs_error']:.1f}%, {part['rows']} rows)"
            )
        else:
            lines.append(f"{what}: none in this log")
    return lines


def _rows_table(
    log: NcclTestsLog, predicted: np.ndarray, fit_up_to: int, in_fit: np.ndarray | None
) -> str:
    sizes, measured = log.sizes, log.times
    err = predicted / measured - 1
    rows = []
    for i, r in enumerate(log.rows):
        role = "fit" if (in_fit[i] if in_fit is not None else sizes[i] <= fit_up_to) else ""
        role = role or ("held out" if sizes[i] >= HELD_OUT_FROM else "")
        busbw = r.busbw_oop
        rows.append([
            units.format_size(int(r.size)), _time(measured[i]), _time(predicted[i]), _pct(err[i]),
            "-" if busbw is None else f"{busbw:.2f}", role,
        ])  # fmt: skip
    return format_table(
        ["size", "measured", "predicted", "error", "busbw GB/s", "row"], rows, "rrrrrl"
    )


# -- calibrate ----------------------------------------------------------------------------------
def calibrate_main(args: argparse.Namespace) -> int:
    """Fit ``--cluster`` to ``--from-nccl-tests``; print the fit; write ``-o`` (or print it)."""
    inp = _inputs(args)
    fit_up_to = _size(getattr(args, "fit_up_to", None) or DEFAULT_FIT_UP_TO, "--fit-up-to")
    fit = fit_cluster(inp.log, inp.cluster, inp.schedule, fit_up_to=fit_up_to)
    toml = fit.to_toml()
    output = getattr(args, "output", None)
    if output:
        try:
            Path(output).write_text(toml)
        except OSError as e:
            raise UsageError(f"-o {output}: cannot write ({e.strerror or e})") from None
    plot = getattr(args, "plot", None)
    if plot:
        _plot(
            Path(plot), inp.log, fit.predicted, fit_up_to, fit.breakpoint, f"fitted {inp.cluster}"
        )
    summary = _summary(fit.sizes, fit.error, fit_up_to)
    if getattr(args, "json", False):
        doc = {"log": inp.log.describe(), **fit.to_dict(), "summary": summary, "toml": toml,
               "output": output, "notes": [*inp.notes, *fit.notes]}  # fmt: skip
        print(to_json(doc))
        return EXIT_OK
    print(f"{inp.log.describe()}")
    print(f"model: topology on {inp.cluster}, {fit.algorithm} ({inp.log.collective}, "
          f"{inp.log.nranks} ranks), fit on rows up to {units.format_size(fit_up_to)}")  # fmt: skip
    print()
    print(_fit_table(fit))
    if fit.breakpoint is not None:
        print(
            f"regimes: a protocol switch at {units.format_size(fit.breakpoint)}; the file gets "
            "the large-size regime (it extrapolates), the small one is in its header"
        )
    print(f"R^2 (log time, fit rows): {fit.r2:.4f}")
    print()
    print(_rows_table(inp.log, fit.predicted, fit_up_to, fit.in_fit))
    print()
    print("\n".join(_summary_lines(summary, fit_up_to)))
    for n in (*inp.notes, *fit.notes):
        print(f"note: {n}")
    if output:
        print(f"wrote {output} (use it: --cluster {output})")
    else:
        print("\n# the fitted cluster file (give -o FILE to write it):")
        print(toml, end="")
    return EXIT_OK


def _fit_table(fit: ClusterFit) -> str:
    rows = []
    for x in fit.links:
        lat = _time(x.latency) + ("" if x.latency_determined else " (not fitted)")
        eff = f"{x.efficiency:.3f}" + ("" if x.efficiency_determined else " (not fitted)")
        small = (
            f"{_time(x.small_latency)}, {x.small_efficiency:.3f}"
            if fit.breakpoint is not None and (x.latency_determined or x.efficiency_determined)
            else "-"
        )
        rows.append([
            f"[{x.table}] {x.kind}", units.format_bandwidth(x.bandwidth), lat, eff,
            units.format_bandwidth(x.fitted_bandwidth), small,
        ])  # fmt: skip
    return format_table(
        [
            "link table",
            "configured",
            "latency/link",
            "efficiency",
            "fitted bw",
            "small-size regime",
        ],
        rows,
        "llrrrl",
    )


# -- validate -----------------------------------------------------------------------------------
def validate_main(args: argparse.Namespace) -> int:
    """Predicted (the cluster as given) against measured, every row of the log."""
    inp = _inputs(args)
    fit_up_to = _size(getattr(args, "fit_up_to", None) or DEFAULT_FIT_UP_TO, "--fit-up-to")
    predicted = predict_rows(inp.log, inp.cluster, inp.schedule)
    sizes, measured = inp.log.sizes, inp.log.times
    err = predicted / measured - 1
    summary = _summary(sizes, err, fit_up_to)
    plot = getattr(args, "plot", None)
    if plot:
        _plot(Path(plot), inp.log, predicted, fit_up_to, None, inp.cluster)
    if getattr(args, "json", False):
        rows = [
            {"size": int(s), "measured_s": m, "predicted_s": p, "error": e}
            for s, m, p, e in zip(sizes, measured, predicted, err, strict=True)
        ]
        print(to_json({"log": inp.log.to_dict(), "cluster": inp.cluster,
                       "algorithm": inp.schedule.algorithm, "rows": rows, "summary": summary,
                       "notes": list(inp.notes)}))  # fmt: skip
        return EXIT_OK
    print(inp.log.describe())
    print(f"model: topology on {inp.cluster}, {inp.schedule.algorithm} ({inp.log.collective}, "
          f"{inp.log.nranks} ranks)")  # fmt: skip
    print()
    print(_rows_table(inp.log, predicted, fit_up_to, None))
    print()
    print("\n".join(_summary_lines(summary, fit_up_to)))
    for n in inp.notes:
        print(f"note: {n}")
    return EXIT_OK


# -- plot ---------------------------------------------------------------------------------------
def _plot(
    path: Path,
    log: NcclTestsLog,
    predicted: np.ndarray,
    fit_up_to: int,
    breakpoint: int | None,
    label: str,
) -> None:
    """Measured points over the predicted curve (log-log), the fit range shaded."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    sizes, measured = log.sizes, log.times
    ok = sizes > 0
    order = np.argsort(sizes[ok])
    x, m, p = sizes[ok][order], measured[ok][order], predicted[ok][order]
    fig = Figure(figsize=(7.5, 6.4))
    FigureCanvasAgg(fig)
    ax, ex = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    span = {"color": "0.92", "zorder": 0}
    for a in (ax, ex):
        a.axvspan(x.min() / 1.3, min(fit_up_to, x.max()) * 1.15, **span,
                  label=f"fit rows (<= {units.format_size(fit_up_to)})")  # fmt: skip
        if breakpoint is not None:
            a.axvline(breakpoint, color="0.5", ls=":", lw=1,
                      label=f"protocol switch ({units.format_size(breakpoint)})")  # fmt: skip
        a.grid(True, which="major", alpha=0.3)
    ax.plot(x, p, "-", color="tab:blue", lw=1.8, label=f"predicted ({label})")
    held = x >= HELD_OUT_FROM
    ax.plot(x[~held], m[~held], "o", color="black", ms=4.5, label="measured")
    err = 100 * (p / m - 1)
    ex.axhspan(-15, 15, color="tab:green", alpha=0.08, zorder=0, label="±15%")
    ex.axhline(0, color="tab:blue", lw=1)
    ex.plot(x[~held], err[~held], "o", color="black", ms=4)
    if held.any():
        ax.plot(x[held], m[held], "s", mfc="none", color="tab:red", ms=6,
                label=f"measured, held out (>= {units.format_size(HELD_OUT_FROM)})")  # fmt: skip
        ex.plot(x[held], err[held], "s", mfc="none", color="tab:red", ms=5)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = [v for v in 2.0 ** np.arange(0, 64, 4) if x.min() <= v <= x.max()]
    ex.set_xticks(ticks, [units.format_size(int(v)) for v in ticks])
    lo, hi = min(m.min(), p.min()), max(m.max(), p.max())
    yt = [v for v in 10.0 ** np.arange(-9, 3) if lo / 3 <= v <= hi * 3]
    ax.set_yticks(yt, [units.format_time(v) for v in yt])
    ex.set_xlabel(f"size ({log.collective}, nccl-tests convention)")
    ax.set_ylabel("time (out-of-place)")
    ex.set_ylabel("predicted/measured - 1 (%)", fontsize=8)
    top = max(20.0, float(np.abs(err).max()) * 1.15)
    ex.set_ylim(-top, top)
    ax.set_title(f"{Path(log.source).name}: {log.collective}, {log.nranks} ranks", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise UsageError(f"--plot {path}: cannot write ({e.strerror or e})") from None
