"""The model-side subcommands: ``algorithms``, ``verify``, ``predict`` and ``compare``."""

from __future__ import annotations

import argparse
import shutil
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import commsim
from commsim import units
from commsim._cli_common import (
    _PLOT_FORMATS,
    EXIT_FAILED,
    EXIT_OK,
    CLIError,
    _add_common_args,
    _add_model_args,
    _add_schedule_args,
    _algorithms,
    _Budget,
    _build,
    _check_params_known,
    _check_predict_memory,
    _check_verify_memory,
    _collective,
    _file_excludes,
    _load_file,
    _model,
    _model_dict,
    _model_label,
    _params_for,
    _rank_counts,
    _raw_params,
    _sizes,
)
from commsim._cli_output import _bw, _print_json, _Progress, _ratio, _table
from commsim._collectives import COLLECTIVES
from commsim.algorithms import REGISTRY, info
from commsim.errors import ScheduleError
from commsim.models import lower_bound

# ---------------------------------------------------------------------------------------------
# commands


def _cmd_algorithms(args: argparse.Namespace) -> int:
    collective = _collective(args) if args.collective else None
    if args.algorithm and collective is None:
        raise CLIError("-a needs -c (which collective's algorithm?)")
    if args.algorithm:
        rows = [info(collective, args.algorithm)]  # type: ignore[arg-type]
    else:
        rows = [r for r in REGISTRY.values() if collective in (None, r.collective)]
        rows.sort(key=lambda r: (COLLECTIVES.index(r.collective), r.algorithm))
    if args.json:
        _print_json(
            [
                {
                    "collective": r.collective,
                    "name": r.algorithm,
                    "params": r.params,
                    "constraints": r.constraints,
                    "cost": r.cost,
                    "reference": r.reference,
                }
                for r in rows
            ]
        )
        return EXIT_OK
    if not rows:
        print(f"no {collective} algorithms are registered yet")
        return EXIT_OK
    if args.algorithm:
        r = rows[0]
        print(f"{r.collective}/{r.algorithm}\n")
        print(f"cost:        {r.cost}\nconstraints: {r.constraints}")
        print(f"parameters:  {_param_text(r.params)}\nreference:   {r.reference or '-'}\n")
        print(r.doc)
        return EXIT_OK
    width = max(shutil.get_terminal_size((120, 24)).columns, 100)
    fixed = max(len(r.collective) for r in rows) + max(len(r.algorithm) for r in rows) + 2 * 4
    param_w = min(max(len(_param_text(r.params)) for r in rows), 20)
    free = max(width - fixed - param_w - 2, 40)
    cons_w, cost_w = free * 2 // 5, free - free * 2 // 5

    def wrap(text: str, w: int) -> str:
        return "\n".join(textwrap.wrap(text, w, break_on_hyphens=False)) or "-"

    table = [
        [
            r.collective,
            r.algorithm,
            wrap(_param_text(r.params), param_w),
            wrap(r.constraints, cons_w),
            wrap(r.cost, cost_w),
        ]
        for r in rows
    ]
    print(_table(["collective", "algorithm", "parameters", "constraints", "cost"], table, "lllll"))
    print(
        "\nn = message size (bytes), p = ranks. Details: commsim algorithms -c COLLECTIVE -a NAME"
    )
    return EXIT_OK


def _param_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items() if k != "root") or "-"


def _cmd_verify(args: argparse.Namespace) -> int:
    budget = _Budget.from_args(args)
    if args.file:
        _file_excludes(args)
        s = _load_file(args.file)
        _check_verify_memory(s, budget)
        jobs = [(s.collective, s.algorithm, s)]
    else:
        collective = _collective(args)
        algos = _algorithms(args, collective, default_all=True)
        ps = _rank_counts(args, single=False)
        raw = _raw_params(args.param)
        _check_params_known(collective, algos, raw)
        jobs = []
        for a in algos:  # build (lazily) and check memory for all before running any
            for p in ps:
                s = _build(collective, a, p, _params_for(collective, a, raw), budget, args.root)
                _check_verify_memory(s, budget)
                jobs.append((collective, a, s))
    progress = _Progress(sum(s.nsteps * s.nranks for *_, s in jobs), args.progress)
    results = []
    try:
        for collective, name, s in jobs:
            tracked, _ = progress.track(s, f"verify {name} p={s.nranks}")
            row: dict[str, Any] = {
                "collective": collective,
                "algorithm": name,
                "nranks": s.nranks,
                "params": s.params,
                "nsteps": s.nsteps,
            }
            try:
                v = commsim.verify(tracked)
            except ScheduleError as e:
                row.update(ok=False, error=_one_line(e), step=e.step, rank=e.rank, slot=e.slot)
            else:
                row.update(ok=True, ntransfers=v.ntransfers, seconds=v.seconds)
            results.append(row)
    finally:
        progress.close()
    failed = [r for r in results if not r["ok"]]
    if args.json:
        _print_json(results)
    else:
        table = [
            [
                r["collective"],
                r["algorithm"],
                str(r["nranks"]),
                str(r["nsteps"]),
                f"{r['ntransfers']:,}" if r["ok"] else "-",
                units.format_time(r["seconds"]) if r["ok"] else "-",
                "OK" if r["ok"] else "FAILED",
            ]
            for r in results
        ]
        print(
            _table(
                ["collective", "algorithm", "p", "steps", "transfers", "verified in", "result"],
                table,
                "llrrrrl",
            )
        )
        if failed:
            print(f"\n{len(failed)} of {len(results)} failed:")
            for r in failed:
                print(f"  {r['algorithm']} p={r['nranks']}: {r['error']}")
    for r in failed:
        print(f"commsim: verification failed: {r['error']}", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _cmd_predict(args: argparse.Namespace) -> int:
    budget = _Budget.from_args(args)
    sizes = _sizes(args)
    model = _model(args)
    if args.file:
        _file_excludes(args)
        s = _load_file(args.file)
    else:
        collective = _collective(args)
        algos = _algorithms(args, collective, default_all=False)
        if len(algos) > 1:
            raise CLIError(f"predict takes one algorithm, got {args.algorithm!r}; use compare")
        algo = algos[0]
        (p,) = _rank_counts(args, single=True)
        raw = _raw_params(args.param)
        _check_params_known(collective, [algo], raw)
        s = _build(collective, algo, p, _params_for(collective, algo, raw), budget, args.root)
    _check_predict_memory(s, len(sizes), budget)
    progress = _Progress(s.nsteps * s.nranks, args.progress)
    tracked, ntransfers = progress.track(s, f"predict {s.algorithm} p={s.nranks}")
    try:
        pred = model.predict(tracked, sizes)
    finally:
        progress.close()
    p = s.nranks
    bound = np.array(
        [lower_bound(s.collective, p, n, model.alpha, model.beta, model.gamma) for n in sizes]
    )
    with np.errstate(invalid="ignore"):  # p = 1: time 0, algbw inf, busbw factor 0
        times, algbw, busbw = (
            np.atleast_1d(np.asarray(x, float)) for x in (pred.time, pred.algbw, pred.busbw)
        )
    if args.json:
        _print_json(
            {
                "collective": s.collective,
                "root": s.root,
                "algorithm": s.algorithm,
                "nranks": p,
                "params": s.params,
                "nsteps": s.nsteps,
                "ntransfers": ntransfers[0],
                "model": _model_dict(model),
                "results": [
                    {
                        "nbytes": int(n),
                        "time_s": t,
                        "algbw_Bps": a,
                        "busbw_Bps": b,
                        "lower_bound_s": lb,
                        "ratio_to_bound": t / lb if lb > 0 else None,
                    }
                    for n, t, a, b, lb in zip(sizes, times, algbw, busbw, bound, strict=True)
                ],
            }
        )
        return EXIT_OK
    root = f" root={s.root}" if s.spec.rooted else ""
    params = f" {_param_text(s.params)}" if _param_text(s.params) != "-" else ""
    print(
        f"{s.collective}{root} {s.algorithm}{params}, p={p}: {s.nsteps} steps, {ntransfers[0]:,} transfers"
    )
    print(f"model: {_model_label(model)}; bound: Chan et al. 2007 lower bound\n")
    table = [
        [
            units.format_size(int(n)),
            units.format_time(t),
            _bw(a),
            _bw(b),
            units.format_time(lb),
            _ratio(t, lb),
        ]
        for n, t, a, b, lb in zip(sizes, times, algbw, busbw, bound, strict=True)
    ]
    print(_table(["size", "time", "algbw", "busbw", "bound", "time/bound"], table, "rrrrrr"))
    return EXIT_OK


def _cmd_compare(args: argparse.Namespace) -> int:
    budget = _Budget.from_args(args)
    collective = _collective(args)
    algos = _algorithms(args, collective, default_all=True)
    ps = _rank_counts(args, single=False)
    sizes = _sizes(args)
    model = _model(args)
    raw = _raw_params(args.param)
    _check_params_known(collective, algos, raw)
    plot_path = _check_plot_path(args.plot) if args.plot else None
    # build everything lazily first: failures and memory skips are known before the long part
    panels: list[dict[str, Any]] = []
    for p in ps:
        panel: dict[str, Any] = {"nranks": p, "schedules": {}, "skipped": {}}
        for a in algos:
            params = _params_for(collective, a, raw)  # a bad value is an error, not a skip
            try:
                s = _build(collective, a, p, params, budget, args.root)
                _check_predict_memory(s, len(sizes), budget)
            except (CLIError, ScheduleError) as e:
                panel["skipped"][a] = _one_line(e)
                continue
            panel["schedules"][a] = s
        panels.append(panel)
    if not any(panel["schedules"] for panel in panels):
        reasons = {r for panel in panels for r in panel["skipped"].values()}
        raise CLIError("nothing to compare: " + "; ".join(sorted(reasons)))
    total = sum(s.nsteps * s.nranks for panel in panels for s in panel["schedules"].values())
    progress = _Progress(total, args.progress)
    try:
        for panel in panels:
            p = panel["nranks"]
            panel["times"] = {}
            for a, s in panel["schedules"].items():
                tracked, _ = progress.track(s, f"p={p} {a}")
                panel["times"][a] = np.atleast_1d(np.asarray(model.predict(tracked, sizes).time))
            panel["bound"] = np.array(
                [lower_bound(collective, p, n, model.alpha, model.beta, model.gamma) for n in sizes]
            )
            names = list(panel["times"])
            panel["winner"] = []
            if names:
                stacked = np.stack([panel["times"][a] for a in names])
                panel["winner"] = [names[i] for i in np.argmin(stacked, axis=0)]
    finally:
        progress.close()
    if plot_path is not None:
        from commsim import _plot

        plot_panels = [pn for pn in panels if pn["times"]]
        _plot.plot_compare(plot_path, collective, _model_label(model), sizes, plot_panels)
    if args.json:
        _print_json(
            {
                "collective": collective,
                "model": _model_dict(model),
                "sizes": sizes.astype(np.int64),
                "algorithms": algos,
                "results": [
                    {
                        "nranks": pn["nranks"],
                        "time_s": pn["times"],
                        "lower_bound_s": pn["bound"],
                        "winner": pn["winner"],
                        "skipped": pn["skipped"],
                    }
                    for pn in panels
                ],
                "plot": str(plot_path) if plot_path else None,
            }
        )
        return EXIT_OK
    print(f"{collective}: predicted time; model: {_model_label(model)}")
    print("* marks the fastest algorithm per size; bound: Chan et al. 2007 lower bound")
    for pn in panels:
        _print_panel(collective, sizes, pn)
    if plot_path is not None:
        print(f"\nplot written to {plot_path}")
    return EXIT_OK


def _print_panel(collective: str, sizes: np.ndarray, pn: dict[str, Any]) -> None:
    print(f"\n{collective}, p={pn['nranks']}")
    names = list(pn["times"])
    if names:
        rows = []
        for j, n in enumerate(sizes):
            win = pn["winner"][j]
            cells = [
                units.format_time(pn["times"][a][j]) + ("*" if a == win else " ") for a in names
            ]
            t_win, lb = pn["times"][win][j], pn["bound"][j]
            rows.append(
                [units.format_size(int(n)), *cells, units.format_time(lb), win, _ratio(t_win, lb)]
            )
        headers = ["size", *(f"{a} " for a in names), "bound", "winner", "winner/bound"]
        print(_table(headers, rows, "r" + "r" * len(names) + "rlr"))
        print("fastest: " + _ranges(sizes, pn["winner"]))
    for a, why in pn["skipped"].items():
        print(f"note: skipped {a}: {why}")


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


def _check_plot_path(text: str) -> Path:
    path = Path(text)
    if path.suffix.lower() not in _PLOT_FORMATS:
        raise CLIError(f"--plot {text!r}: the name must end in {', '.join(_PLOT_FORMATS)}")
    if not path.parent.is_dir():
        raise CLIError(f"--plot {text!r}: directory {str(path.parent)!r} does not exist")
    return path


def _algorithms_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--collective", metavar="C", help="only this collective's algorithms")
    p.add_argument("-a", "--algorithm", metavar="A", help="show one algorithm in full (needs -c)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")


def _verify_args(p: argparse.ArgumentParser) -> None:
    _add_schedule_args(p, many_algorithms=True, many_p=True, file=True)
    _add_common_args(p, sweep=True)


def _predict_args(p: argparse.ArgumentParser) -> None:
    _add_schedule_args(p, many_algorithms=False, many_p=False, file=True)
    _add_model_args(p)
    _add_common_args(p, sweep=True)


def _compare_args(p: argparse.ArgumentParser) -> None:
    _add_schedule_args(p, many_algorithms=True, many_p=True, file=False)
    _add_model_args(p)
    output = _add_common_args(p, sweep=True)
    output.add_argument(
        "--plot",
        metavar="FILE",
        help="also write a log-log figure of time vs size (.png, .pdf or .svg): one panel per p, "
        "one line per algorithm, the lower bound dashed",
    )
