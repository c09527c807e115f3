"""The MPI launcher, from plain pytest: ``mpirun`` subprocesses, each with a timeout.

* Every registry row at p = 2, 3, 4 computes the reference result, and so does the MPI library's
  collective (one ``mpirun`` per p checks all rows, int32, exact).
* ``launch`` (what ``commsim run --backend mpi`` calls) prints a table or JSON.
* Faults end with one clear line: a rank that hangs (timeout, mpirun killed), dies (exit code),
  raises (its error); and a machine without MPI gets the install hint.
* A bad request is refused before ``mpirun`` starts.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from commsim.algorithms import REGISTRY
from commsim.errors import CommsimError
from commsim.exec import mpi_launch
from commsim.exec.mpi import missing
from commsim.exec.mpi_launch import run_mpirun

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(missing() is not None, reason=str(missing())),
]


@pytest.mark.parametrize("p", [2, 3, 4])
def test_every_row_and_the_native_collective_match_the_reference(p):
    config = {"rows": "all", "units": 3, "iters": 1, "warmup": 0, "root": p - 1, "dtype": "int32"}
    results = run_mpirun(config, p, timeout=240).results
    assert {(m["collective"], m["algorithm"]) for m in results} == set(REGISTRY)
    for m in results:
        assert m["check"] == "ok", m["error"]
        assert m["nranks"] == p
        assert m["native"] is not None  # the baseline ran and was checked too
        assert m["time_s"] > 0 and m["native_time_s"] > 0


def _args(**kw) -> argparse.Namespace:
    base = dict(
        collective="allreduce",
        algorithm="rabenseifner",
        nranks="3",
        sizes="4KiB,16KiB",
        dtype="float32",
        iters=3,
        warmup=1,
        no_check=False,
        no_baseline=False,
        json=False,
        param=[],
        root=None,
        progress=False,
    )
    return argparse.Namespace(**{**base, **kw})


def test_launch_prints_the_harness_table(capsys):
    from commsim.exec.mpi_launch import launch

    assert launch(_args()) == 0
    out = capsys.readouterr().out
    assert "allreduce/rabenseifner p=3" in out and "MPI_Allreduce" in out
    assert "busbw" in out and out.count(" ok") == 2


def test_launch_json_with_params_and_root(capsys):
    from commsim.exec.mpi_launch import launch

    args = _args(
        collective="broadcast",
        algorithm="chain",
        nranks="2",
        sizes="8KiB",
        param=["segments=2"],
        root=1,
        json=True,
    )
    assert launch(args) == 0
    doc = json.loads(capsys.readouterr().out)
    [m] = doc["measurements"]
    assert (doc["params"], doc["root"], doc["nranks"], m["check"], m["native"]) == (
        {"segments": 2},
        1,
        2,
        "ok",
        "MPI_Bcast",
    )


def _faulty(fault: dict, timeout: float) -> str:
    config = {"rows": [["allreduce", "ring", {}]], "sizes": [4096], "iters": 1, "warmup": 0}
    with pytest.raises(CommsimError) as e:
        run_mpirun({**config, "fault": fault}, 2, timeout=timeout)
    return str(e.value)


def test_a_hang_ends_in_the_timeout_error(monkeypatch):
    started: list[subprocess.Popen] = []
    popen = subprocess.Popen

    def recording_popen(*args, **kwargs):
        proc = popen(*args, **kwargs)
        started.append(proc)
        return proc

    monkeypatch.setattr(mpi_launch.subprocess, "Popen", recording_popen)
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
    # every rank raises it; the message names one of them (whichever wrote its error first)
    config = {"rows": [["allreduce", "ring", {}]], "sizes": [1], "iters": 1, "warmup": 0}
    with pytest.raises(CommsimError, match=r"rank [01] failed: size 1B is below the smallest"):
        run_mpirun(config, 2, timeout=60)


def test_without_mpirun_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # no mpirun beside it
    monkeypatch.setenv("PATH", str(tmp_path))
    why = missing()
    assert why is not None and "mpirun not found" in why and "scripts/bootstrap.sh" in why
    assert "\n" not in why
    with pytest.raises(CommsimError, match="MPI is not installed"):
        run_mpirun({"rows": "all", "sizes": [4096]}, 2)


def test_launch_refuses_a_bad_request_before_starting_mpirun(monkeypatch):
    from commsim.exec.mpi_launch import launch

    def no_popen(*args, **kwargs):
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(mpi_launch.subprocess, "Popen", no_popen)  # subprocess.run uses it too
    with pytest.raises(CommsimError, match="below the smallest size"):
        launch(_args(sizes="1B"))
    with pytest.raises(CommsimError, match=r"the mpi backend runs .*; got float16"):
        launch(_args(dtype="float16"))
    with pytest.raises(CommsimError, match="unknown allreduce algorithm 'rign'; did you mean ring"):
        launch(_args(algorithm="rign"))
