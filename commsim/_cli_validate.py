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

from commsim import units

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


def main(args: argparse.Namespace) -> int:
    """Run ``commsim validate``; 0, or 1 if a run's output differed from the reference."""
    from commsim import _cli_common, _cli_output, bench
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
    request = bench.BenchRequest(
        sizes=tuple(sizes), dtype=args.dtype, iters=args.iters, warmup=args.warmup
    )
    validations, results = bench.validate(
        list(schedules.values()),
        model,
        args.backend,
        request,
        run_all=args.all,
        timeout=float(args.timeout),
    )

    table, doc = [], []
    for v in validations:
        doc.append(v.to_dict())
        t_pred = v.predicted_s
        table.append(
            [
                units.format_size(v.nbytes),
                v.predicted_best,
                units.format_time(t_pred),
                units.format_time(v.measured_s),
                units.format_time(v.native_s) if v.native_s else "-",
                f"{v.measured_s / t_pred:.2f}x" if t_pred > 0 else "-",
                v.fastest_measured,
                v.check,
            ]
        )
    failed = any(m.check == "FAILED" for m in results)
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
    native_name = next((m.native for m in results if m.native), None)
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
