"""The MPI launcher, from plain pytest: ``mpirun`` subprocesses, each with a timeout.

* Every registry row at p = 2, 3, 4 computes the reference result, and so does the MPI library's
  collective (one ``mpirun`` per p checks all rows, int32, exact).
* Schedules travel as files: a hand-built schedule (not in the registry) is measured and checked
  on the ranks, results schedule-major, size-minor.
* ``commsim run --backend mpi`` prints a table or JSON.
* Faults end with one clear line: a rank that hangs (timeout, mpirun killed), dies (exit code),
  raises (its error); and a machine without MPI gets the install hint.
* A bad request is refused before ``mpirun`` starts.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import commsim
from commsim import cli, spec
from commsim.algorithms import REGISTRY
from commsim.bench import BenchRequest, measure_mpi
from commsim.bench import _launch as launcher
from commsim.errors import CommsimError
from commsim.exec.mpi import missing

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(missing() is not None, reason=str(missing())),
]


@pytest.mark.parametrize("p", [2, 3, 4])
def test_every_row_and_the_native_collective_match_the_reference(p):
    schedules = [
        commsim.build(c, a, nranks=p, **({"root": p - 1} if spec(c).rooted else {}))
        for c, a in sorted(REGISTRY)
    ]
    size = 3 * 4 * max(s.nbytes_units for s in schedules)  # >= 3 int32 per slot unit for all
    request = BenchRequest((size,), dtype="int32", iters=1, warmup=0)
    results = measure_mpi(schedules, request, timeout=240)
    assert [(m.collective, m.algorithm) for m in results] == sorted(REGISTRY)
    for m in results:
        assert m.check == "ok", m.error
        assert m.nranks == p and m.backend == "mpi"
        assert m.native is not None  # the baseline ran and was checked too
        assert m.time_s > 0 and m.native_time_s > 0
        # and the library called directly on numpy (mpi4py), checked against the reference too
        assert m.host_native == f"{m.native} (mpi4py)" and m.host_native_time_s > 0


def test_hand_built_schedules_travel_as_files_schedule_major(toy_allreduce):
    toy, half = toy_allreduce(), toy_allreduce(complete=False)
    request = BenchRequest((64, 256), iters=2, warmup=1, baseline=False)
    results = measure_mpi([toy, half], request, timeout=120)
    assert [(m.algorithm, m.size) for m in results] == [
        ("toy", 64),
        ("toy", 256),
        ("half_toy", 64),
        ("half_toy", 256),
    ]
    assert [m.check for m in results] == ["ok", "ok", "FAILED", "FAILED"]
    assert "rank" in results[-1].error and results[0].native is None


def run_cli(capsys, *argv):
    rc = cli.main(["run", "--backend", "mpi", "--no-progress", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_run_prints_the_bench_table(capsys):
    rc, out, err = run_cli(
        capsys, "-c", "allreduce", "-a", "rabenseifner", "-p", "3", "-s", "4KiB,16KiB",
        "--iters", "3", "--warmup", "1",
    )  # fmt: skip
    assert rc == 0, err
    assert "allreduce/rabenseifner p=3" in out and "MPI_Allreduce" in out
    assert "busbw" in out and out.count(" ok") == 2


def test_run_json_with_params_and_root(capsys):
    rc, out, err = run_cli(
        capsys, "-c", "broadcast", "-a", "chain", "-p", "2", "-s", "8KiB", "--param",
        "segments=2", "--root", "1", "--iters", "3", "--warmup", "1", "--json",
    )  # fmt: skip
    assert rc == 0, err
    doc = json.loads(out)
    [m] = doc["measurements"]
    assert (doc["params"], doc["root"], doc["nranks"], m["check"], m["native"]) == (
        {"segments": 2},
        1,
        2,
        "ok",
        "MPI_Bcast",
    )


RING2 = commsim.build("allreduce", "ring", nranks=2)


def _faulty(fault: dict, timeout: float) -> str:
    request = BenchRequest((4096,), iters=1, warmup=0)
    with pytest.raises(CommsimError) as e:
        launcher.run_worker([RING2], request, timeout=timeout, fault=fault)
    return str(e.value)


def test_a_hang_ends_in_the_timeout_error(monkeypatch):
    started: list[subprocess.Popen] = []
    popen = subprocess.Popen

    def recording_popen(*args, **kwargs):
        proc = popen(*args, **kwargs)
        started.append(proc)
        return proc

    monkeypatch.setattr(launcher.subprocess, "Popen", recording_popen)
    msg = _faulty({"rank": 1, "action": "sleep"}, timeout=6)
    assert msg == "mpirun timed out after 6 s (deadlock or hung rank?)"
    # mpirun (the last process started; an `mpirun --version` probe may come first) was killed
    # and reaped before the error was raised
    assert started and started[-1].returncode is not None


@pytest.mark.parametrize("at", ["start", "timing"])
def test_a_dead_rank_is_named_with_its_exit_code(at):
    # at "timing", rank 0 is blocked in a barrier or a sendrecv when rank 1 dies; it must not
    # hang: then the message would be the timeout's, not the exit code's
    msg = _faulty({"rank": 1, "action": "exit", "code": 3, "at": at}, timeout=60)
    assert msg == "rank 1 exited with code 3"


def test_a_rank_that_raises_is_named_with_its_error():
    msg = _faulty({"rank": 1, "action": "raise"}, timeout=60)
    assert msg == "rank 1 failed: RuntimeError: fault injected on rank 1"


def test_a_bad_request_is_reported_from_the_ranks():
    # run_worker skips this side's checks; every rank raises it; the message names one of them
    # (whichever wrote its error first)
    request = BenchRequest((1,), iters=1, warmup=0)
    with pytest.raises(CommsimError, match=r"rank [01] failed: size 1B is below the smallest"):
        launcher.run_worker([RING2], request, timeout=60)


def test_without_mpirun_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # no mpirun beside it
    monkeypatch.setenv("PATH", str(tmp_path))
    why = missing()
    assert why is not None and "mpirun not found" in why and "scripts/bootstrap.sh" in why
    assert "\n" not in why
    with pytest.raises(CommsimError, match="MPI is not installed"):
        measure_mpi([RING2], BenchRequest((4096,)))


def test_a_bad_request_is_refused_before_starting_mpirun(monkeypatch, capsys):
    def no_popen(*args, **kwargs):
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(launcher.subprocess, "Popen", no_popen)  # subprocess.run uses it too
    argv = ["-c", "allreduce", "-a", "rabenseifner", "-p", "3", "-s", "4KiB"]

    def refused(*more: str) -> str:
        rc, _, err = run_cli(capsys, *argv, *more)
        assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
        return err

    assert "below the smallest size" in refused("-s", "1B")
    assert "the mpi backend runs" in refused("--dtype", "float16")
    assert "got float16" in refused("--dtype", "float16")
    assert "unknown allreduce algorithm 'rign'; did you mean ring" in refused("-a", "rign")
    with pytest.raises(CommsimError, match=r"one mpirun runs one rank count; .* nranks 2, 3"):
        measure_mpi([RING2, commsim.build("allreduce", "ring", nranks=3)], BenchRequest((64,)))
    with pytest.raises(CommsimError, match="at least one schedule"):
        measure_mpi([], BenchRequest((64,)))
