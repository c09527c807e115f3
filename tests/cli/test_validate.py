"""``commsim validate``: predicted winners run for real, measured beside predicted."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

import commsim
from commsim.bench import BenchRequest
from commsim.cli import main, validate
from commsim.cli.schedules import ScheduleChoice
from commsim.models import Hockney
from commsim.tuner import table_from_sweep


def _run(capsys, *argv):
    rc = main(["validate", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_validate_runs_the_predicted_winners_on_numpy(capsys):
    rc, out, _ = _run(
        capsys, "-c", "allreduce", "-p", "4", "-s", "64,1MiB", "--backend", "numpy",
        "--iters", "2", "--warmup", "0", "--json",
    )  # fmt: skip
    assert rc == 0
    doc = json.loads(out)
    small, big = doc["results"]
    # under the default model: latency-bound at 64 B, bandwidth-bound at 1 MiB
    assert small["predicted_best"] == "recursive_doubling"
    assert big["predicted_best"] == "rabenseifner"
    for r in doc["results"]:
        assert r["check"] == "ok" and r["measured_s"] > 0
        assert r["measured_over_predicted"] == pytest.approx(r["measured_s"] / r["predicted_s"])
    # the prediction is the model's at the bytes that ran
    m = Hockney(alpha=2e-6, beta=1 / 25e9, gamma=1 / 100e9)
    s = commsim.build("allreduce", "rabenseifner", nranks=4)
    assert big["predicted_s"] == pytest.approx(m.predict(s, big["nbytes"]).time, rel=1e-12)


def test_validate_all_measures_every_algorithm(capsys):
    rc, out, _ = _run(
        capsys, "-c", "allgather", "-p", "3", "-s", "3KiB", "--backend", "numpy", "--all",
        "--iters", "1", "--warmup", "0", "--json",
    )  # fmt: skip
    assert rc == 0
    [r] = json.loads(out)["results"]
    assert set(r["measured"]) == set(commsim.available("allgather"))


@pytest.mark.mpi
def test_validate_on_mpi_processes_prints_measured_next_to_predicted(capsys):
    pytest.importorskip("mpi4jax")
    rc, out, _ = _run(
        capsys, "-c", "allreduce", "-a", "ring,rabenseifner", "-p", "2", "-s", "4KiB,256KiB", "--iters", "2", "--warmup", "1",
        "--timeout", "120",
    )  # fmt: skip
    assert rc == 0, out
    assert "MPI_Allreduce" in out and "error" in out and "median |error|" in out
    assert "MPI_Allreduce (mpi4py)" in out  # the transport's own time beside mpi4jax's
    assert out.count(" ok") == 4


def test_validate_errors_are_one_line(capsys):
    rc, _, err = _run(capsys, "-c", "allreduce", "-p", "4,8", "--backend", "numpy")
    assert rc == 2 and err.count("\n") == 1


def test_parse_gives_a_frozen_request():
    args = argparse.Namespace(
        collective="allreduce", algorithm="ring,direct", nranks="4", param=[], root=None,
        sizes="1MiB", alpha="1us", beta=None, gamma=None, ports="single", backend="numpy",
        dtype="float64", iters=2, warmup=0, timeout=30, all=True, winners_only=False, json=True, progress=False, plot=None,
    )  # fmt: skip
    request = validate.parse(args)
    assert request.schedules.algorithms == ("ring", "direct") and request.run_all
    assert request.bench == BenchRequest(sizes=(2**20,), dtype="float64", iters=2, warmup=0)
    assert request.model.alpha == 1e-6 and request.backend == "numpy"


def test_compute_without_argparse():
    choice = ScheduleChoice("allreduce", ("ring", "direct"), (3,), {"ring": {}, "direct": {}})
    bench = BenchRequest(sizes=(3000,), iters=1, warmup=0)
    request = validate.ValidateRequest(choice, Hockney(), "numpy", bench, run_all=True)
    result = validate.compute(request)
    [v] = result.validations
    assert set(v.measured) == {"ring", "direct"} and not result.failed
    text = validate.render(result, as_json=False)
    assert "P: predicted fastest" in text and "spread" in text


def test_validate_tuned_runs_each_algorithm_with_the_tuners_parameters_per_size():
    """The tuner's own choice is the pick at every size, each algorithm runs with its best
    segments there, and a deep pipeline never runs at a size too small for it."""
    from commsim.bench import validate_tuned
    from commsim.tuner import sweep

    model = Hockney(alpha=1e-6, beta=1e-9, gamma=0.0)
    sizes = (4096, 1 << 22)
    result = sweep(
        "allreduce", model, 4, np.array(sizes), algorithms=["ring", "double_binary_tree"]
    )
    table = table_from_sweep(result)
    bench = BenchRequest(sizes=sizes, iters=1, warmup=0)
    validations, raw = validate_tuned(result, "numpy", bench)
    for v in validations:
        assert v.predicted_best == table.lookup(v.size).algorithm
        want = result.candidates[result.best(["double_binary_tree"])[sizes.index(v.size)]]
        assert v.params["double_binary_tree"] == dict(want.params)
        assert v.check == "ok" and set(v.measured) == {"ring", "double_binary_tree"}
    small, large = (v.params["double_binary_tree"]["segments"] for v in validations)
    assert small < large  # the depth grows with the size: a per-size choice, not one count
    assert {(m.algorithm, m.size) for m in raw} == {
        (a, s) for a in ("ring", "double_binary_tree") for s in sizes
    }  # each candidate only where it is its algorithm's best: one run per algorithm and size


def test_validate_tune_on_the_command_line(capsys):
    line = "validate -c allreduce -p 4 -a ring,double_binary_tree --backend numpy -s 4KiB,4MiB"
    model = "--alpha 1us --beta 1GB/s --gamma 0 --iters 1"
    code = main([*line.split(), *model.split(), "--tune"])
    out = capsys.readouterr().out
    assert code == 0 and "segments=" in out and "the tuner's choice" in out
    # --tune judges the tuner: every algorithm runs, so it cannot be --winners-only
    assert main([*line.split(), "--tune", "--winners-only"]) == 2
    assert "not allowed with argument --tune" in capsys.readouterr().err


def test_every_row_shows_its_own_check_when_sizes_round_differently():
    """On 3 ranks ring and Rabenseifner round 64 KiB down to different byte counts; each row's
    check is its own schedule's, not looked up under the winner's byte count."""
    algos = ("ring", "rabenseifner", "recursive_doubling")
    choice = ScheduleChoice("allreduce", algos, (3,), {a: {} for a in algos})
    bench = BenchRequest(sizes=(65536,), iters=1, warmup=0)
    request = validate.ValidateRequest(choice, Hockney(), "numpy", bench, run_all=True)
    result = validate.compute(request)
    [v] = result.validations
    assert len({m.nbytes for m in result.measurements}) > 1  # the premise: they round apart
    assert v.checks == dict.fromkeys(algos, "ok")
    rows = [line.split() for line in validate.render(result, as_json=False).splitlines()]
    table = [r for r in rows if any(a in r for a in algos) and len(r) > 5]  # not the summary
    assert [r[-1] for r in table] == ["ok"] * 3
