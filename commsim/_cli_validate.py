"""``commsim validate``: run the predicted-best schedules for real, measured next to predicted.

For each message size the model picks the fastest algorithm; those schedules (or, with ``--all``,
every algorithm) then run on the chosen backend, and the table sets the measured median beside
the prediction and the backend's own collective. A prediction is only as good as its α, β, γ:
with the defaults (a 200 Gb/s InfiniBand cluster) a laptop's shared-memory MPI will not match,
and the ``measured/predicted`` column says by how much.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from commsim import units
from commsim.errors import CommsimError

HELP = "run the predicted-best algorithms for real and print measured next to predicted"
DESCRIPTION = """\
Predict every algorithm of the collective (Hockney model, the same options as 'compare'), pick
the fastest per message size, run those schedules for real on the backend (default: MPI
processes started with mpirun), check their output against the reference interpreter, and print
for each size: the predicted winner, its predicted and measured time, the backend's own collective
(MPI_Allreduce, lax.psum, ...) and measured/predicted. --all runs every algorithm."""
EXAMPLES = """\
  commsim validate -c allreduce -p 4
  commsim validate -c allreduce -p 2 -s 1MiB,64MiB --alpha 5us --beta 5GB/s --all
  commsim validate -c allgather -p 8 --backend jax --json"""
DEFAULT_SIZES = "64KiB,1MiB,16MiB"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from commsim import _cli_common

    _cli_common._add_schedule_args(p, many_algorithms=True, many_p=False, file=False)
    _cli_common._add_model_args(p)
    p.set_defaults(sizes=DEFAULT_SIZES)
    g = p.add_argument_group("execution")
    g.add_argument(
        "--backend",
        choices=("mpi", "jax", "numpy", "cuda"),
        default="mpi",
        help="where to run (default: mpi, p local processes)",
    )
    g.add_argument("--dtype", default="float32", help="element type (default: float32)")
    g.add_argument(
        "--iters", type=_cli_common._int_arg("iters", 1), default=10, help="timed runs (10)"
    )
    g.add_argument(
        "--warmup", type=_cli_common._int_arg("warmup", 0), default=3, help="untimed runs (3)"
    )
    g.add_argument(
        "--timeout",
        type=_cli_common._int_arg("timeout", 1),
        default=300,
        metavar="SECONDS",
        help="--backend mpi: give up on mpirun after this long (default: 300)",
    )
    g.add_argument(
        "--all", action="store_true", help="run every algorithm, not only the predicted winners"
    )
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON document")


def _measure(
    backend: str,
    rows: list[tuple[str, str, dict[str, Any]]],
    schedules: dict[str, Any],
    p: int,
    root: int,
    sizes: list[int],
    args: argparse.Namespace,
) -> list[dict[str, Any]]:
    """Measurements (dicts of :class:`commsim.exec.harness.Measurement`) of every row."""
    if backend == "mpi":
        from commsim.exec import mpi_launch

        if mpi_launch.under_mpirun():
            raise CommsimError("validate starts mpirun itself: run it without mpirun")
        config = {
            "rows": [[c, a, prm] for c, a, prm in rows],
            "root": root,
            "sizes": sizes,
            "dtype": str(np.dtype(args.dtype)),
            "iters": args.iters,
            "warmup": args.warmup,
            "check": True,
            "baseline": True,
        }
        return mpi_launch.run_mpirun(config, p, timeout=float(args.timeout)).results
    from commsim import _cli_run
    from commsim.exec import get_backend
    from commsim.exec.harness import measure

    if backend == "jax":
        _cli_run._ensure_cpu_devices(p)
    be = get_backend(backend)
    out = []
    for _, a, _ in rows:
        ms = measure(
            schedules[a], be, sizes, dtype=args.dtype, iters=args.iters, warmup=args.warmup
        )
        out += [m.to_dict() for m in ms]
    return out


def main(args: argparse.Namespace) -> int:
    """Run ``commsim validate``; 0, or 1 if a run's output differed from the reference."""
    from commsim import _cli_common, _cli_output
    from commsim._cli_run import _dtype
    from commsim.algorithms import build

    collective = _cli_common._collective(args)
    args.dtype = str(_dtype(args.dtype))  # one-line error for a dtype that is not numeric
    algos = _cli_common._algorithms(args, collective, default_all=True)
    [p] = _cli_common._rank_counts(args, single=True)
    raw = _cli_common._raw_params(args.param)
    _cli_common._check_params_known(collective, algos, raw)
    root = args.root or 0
    params = {a: _cli_common._params_for(collective, a, raw) for a in algos}
    sizes = [int(s) for s in _cli_common._sizes(args)]
    model = _cli_common._model(args)
    kw = {"root": root} if root else {}
    schedules = {a: build(collective, a, p, **params[a], **kw) for a in algos}
    predicted = {a: model.predict(schedules[a], np.array(sizes, float)).time for a in algos}
    winners = [min(algos, key=lambda a, j=j: predicted[a][j]) for j in range(len(sizes))]
    run = algos if args.all else list(dict.fromkeys(winners))
    rows = [(collective, a, params[a]) for a in run]
    results = _measure(args.backend, rows, schedules, p, root, sizes, args)
    got = {(m["algorithm"], m["size"]): m for m in results}

    table, doc = [], []
    for j, size in enumerate(sizes):
        w = winners[j]
        m = got[(w, size)]
        # predict again at the bytes that actually ran (counts round down like nccl-tests)
        t_pred = float(model.predict(schedules[w], float(m["nbytes"])).time)
        measured = {a: got[(a, size)]["time_s"] for a in run}
        fastest = min(measured, key=measured.get)
        native = m.get("native_time_s")
        entry = {
            "size": size,
            "nbytes": m["nbytes"],
            "predicted_best": w,
            "predicted_s": t_pred,
            "measured_s": m["time_s"],
            "native": m.get("native"),
            "native_s": native,
            "measured_over_predicted": m["time_s"] / t_pred if t_pred > 0 else None,
            "fastest_measured": fastest,
            "check": m["check"],
            "measured": measured,
        }
        doc.append(entry)
        table.append(
            [
                units.format_size(m["nbytes"]),
                w,
                units.format_time(t_pred),
                units.format_time(m["time_s"]),
                units.format_time(native) if native else "-",
                f"{m['time_s'] / t_pred:.2f}x" if t_pred > 0 else "-",
                fastest,
                m["check"],
            ]
        )
    failed = any(r["check"] == "FAILED" for r in results)
    if args.json:
        _cli_output._print_json(
            {
                "collective": collective,
                "nranks": p,
                "backend": args.backend,
                "model": _cli_common._model_dict(model),
                "results": doc,
            }
        )
        return 1 if failed else 0
    native_name = next((r.get("native") for r in results if r.get("native")), None)
    print(
        f"{collective}, p={p}, on {args.backend} ({args.dtype}, median of {args.iters}); "
        f"predicted with {_cli_common._model_label(model)}"
    )
    print(
        _cli_output._table(
            [
                "size",
                "predicted best",
                "predicted",
                "measured",
                native_name or "native",
                "measured/predicted",
                "fastest measured",
                "check",
            ],
            table,
            "rlrrrrll",
        )
    )
    if any(math.isfinite(e["measured_s"]) for e in doc):
        print(
            "(predictions use the model parameters above; they describe the machine you model, "
            "not necessarily this one)"
        )
    return 1 if failed else 0
