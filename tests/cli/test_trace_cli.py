"""``--trace`` on the command line: ``commsim predict`` with every model, ``commsim run`` on the
MPI backend (which launches mpirun itself), and the one-line refusals."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import commsim
from commsim.exec.mpi import missing
from commsim.models import Hockney, LogGP

_spec = importlib.util.spec_from_file_location(
    "trace_checks", Path(__file__).parents[1] / "trace_checks.py"
)
assert _spec is not None and _spec.loader is not None
checks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checks)


@pytest.mark.parametrize(
    ("flags", "model"),
    [([], Hockney()), (["--model", "loggp"], LogGP())],
    ids=["hockney", "loggp"],
)
def test_predict_trace_without_a_network(cli, tmp_path, flags, model):
    """The acceptance case on the command line: the file is the library's trace of the
    largest size, for the model the flags chose."""
    path = tmp_path / "rab.json"
    rc, out, err = cli(
        "predict", "-c", "allreduce", "-a", "rabenseifner", "-p", "16", "-s", "1KiB,1MiB",
        "--trace", str(path), *flags,
    )  # fmt: skip
    assert rc == 0, err
    assert f"trace of 1MiB written to {path}" in out
    doc = json.loads(path.read_text())
    s = commsim.build("allreduce", "rabenseifner", nranks=16)
    assert doc == json.loads(json.dumps(checks.check_prediction_trace(model, s, 2.0**20)))


def test_predict_trace_refuses_a_multi_port_model_in_one_line(cli, tmp_path):
    rc, _, err = cli(
        "predict", "-c", "allreduce", "-a", "ring", "-p", "4", "--ports", "multi",
        "--trace", str(tmp_path / "t.json"),
    )  # fmt: skip
    assert rc == 2 and "single-port" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "t.json").exists()


def test_run_trace_is_refused_on_backends_without_step_timestamps(cli, tmp_path):
    rc, _, err = cli(
        "run", "-c", "allreduce", "-a", "ring", "-p", "2", "--backend", "numpy", "-s", "1KiB",
        "--trace", str(tmp_path / "t.json"),
    )  # fmt: skip
    assert rc == 2 and "--backend mpi" in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(bool(missing()), reason="MPI is not installed")
def test_run_trace_on_mpi(cli, tmp_path):
    """``commsim run --backend mpi --trace``: mpirun -n 2, a step-timed run, the measured trace
    (one track per rank, a slice per step with traffic, an arrow per message)."""
    path = tmp_path / "t.json"
    rc, out, err = cli(
        "run", "-c", "allreduce", "-a", "ring", "-p", "2", "--backend", "mpi", "--sizes", "1MiB",
        "--iters", "2", "--warmup", "1", "--trace", str(path),
    )  # fmt: skip
    assert rc == 0, err
    assert f"trace of 1MiB written to {path}" in out and "not the timed runs" in out
    doc = json.loads(path.read_text())
    tracks = checks.check_trace(doc)
    assert set(checks.thread_names(doc).values()) == {"rank 0", "rank 1"}
    s = commsim.build("allreduce", "ring", nranks=2)
    assert sum(len(t) for t in tracks.values()) == 2 * s.nsteps
    assert sum(e["ph"] == "s" for e in doc["traceEvents"]) == checks.count_messages(s)
    assert doc["otherData"]["backend"] == "mpi"
