"""``commsim run`` on numpy (on the JAX mesh: tests/test_exec_jax.py; on MPI:
tests/test_bench_mpi_launch.py and tests/mpi)."""

from __future__ import annotations

import argparse
import json

import pytest

from commsim.bench import BenchRequest
from commsim.cli import run
from commsim.cli.schedules import ScheduleChoice

NUMPY = ["--backend", "numpy"]


def test_cli_run_table(cli):
    rc, out, _ = cli(
        "run", "-c", "allreduce", "-a", "ring", "-p", "3", *NUMPY,
        "-s", "1KiB,4KiB", "--iters", "2", "--warmup", "0",
    )  # fmt: skip
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("# allreduce/ring p=3 on numpy, float32")
    assert len(lines) == 5 and lines[3].split()[0] == "1020B" and lines[4].endswith("ok")


def test_cli_run_json_with_param_and_root(cli):
    rc, out, _ = cli(
        "run", "-c", "broadcast", "-a", "chain", "-p", "3", "--root", "2", "--param",
        "segments=2", *NUMPY, "-s", "256B", "--iters", "1", "--warmup", "0",
        "--dtype", "int32", "--json",
    )  # fmt: skip
    assert rc == 0
    doc = json.loads(out)
    assert (doc["root"], doc["params"]["segments"], doc["dtype"]) == (2, 2, "int32")
    [m] = doc["measurements"]
    assert m["check"] == "ok" and m["nbytes"] == 256 and m["native_busbw_Bps"] is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-c", "allreduce", "-a", "ring", "-p", "2,4"], "one rank count"),
        (["-c", "allreduce", "-a", "ring", "-p", "2", "--dtype", "str"], "numeric"),
        (["-c", "allreduce", "-a", "ring", "-p", "2", "--dtype", "floaty"], "unknown dtype"),
        (["-c", "allreduce", "-a", "rign", "-p", "2"], "did you mean ring"),
        (["-c", "allreduce", "-a", "ring", "-p", "2", "--param", "x=1"], "no parameter"),
        (["-c", "allreduce", "-a", "ring", "-p", "2", "-s", "1KB..1K"], "ambiguous"),
        (["-c", "allreduce", "-a", "ring,direct", "-p", "2"], "run takes one algorithm"),
    ],
)
def test_cli_run_bad_input_is_one_error(cli, argv, message):
    rc, out, err = cli("run", *argv, *NUMPY)
    assert rc == 2 and out == "" and err.count("\n") == 1 and message in err


def test_parse_gives_a_frozen_request():
    args = argparse.Namespace(
        collective="allreduce", algorithm="ring", nranks="4", param=[], root=None, file=None,
        backend="numpy", sizes="1KiB..4KiB", dtype="f4", iters=3, warmup=1, no_check=False,
        no_baseline=True, timeout=60, json=False, progress=None,
    )  # fmt: skip
    request = run.parse(args)
    assert request.schedules == ScheduleChoice("allreduce", ("ring",), (4,), {"ring": {}})
    assert request.bench == BenchRequest(
        sizes=(1024, 2048, 4096), dtype="float32", iters=3, warmup=1, baseline=False
    )
    assert (request.backend, request.timeout) == ("numpy", 60.0)


def test_compute_without_argparse():
    choice = ScheduleChoice("allgather", ("ring",), (3,), {"ring": {}})
    bench = BenchRequest(sizes=(300,), iters=1, warmup=0)
    result = run.compute(run.RunRequest(choice, "numpy", bench, timeout=60.0))
    [m] = result.measurements
    assert (m.check, result.rank, result.failed) == ("ok", 0, False)
    assert run.render(result, as_json=False).startswith("# allgather/ring p=3 on numpy")


def test_bfloat16_runs_on_jax(cli):
    rc, out, err = cli(
        "run", "-c", "allreduce", "-a", "ring", "-p", "4", "--backend", "jax",
        "-s", "64KiB", "--iters", "2", "--warmup", "0", "--dtype", "bfloat16",
    )  # fmt: skip
    assert rc == 0, err
    assert "bfloat16" in out and out.rstrip().splitlines()[3].split()[-1] == "ok"


@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_64_bit_types_need_no_environment_variable(dtype, tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    argv = ["run", "-c", "allreduce", "-a", "ring", "-p", "2", "--backend", "jax", "-s", "4KiB"]
    done = subprocess.run(
        [sys.executable, "-m", "commsim", *argv, "--iters", "2", "--warmup", "0", "--dtype", dtype],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert dtype in done.stdout


def test_run_takes_a_saved_schedule(cli, tmp_path):
    import json

    import commsim

    hand = commsim.Schedule.from_steps(
        [commsim.Step.make(src=[0, 1], dst=[1, 0], src_slot=0, dst_slot=0, reduce=True)],
        collective="allreduce", nranks=2, nslots=1, algorithm="hand_made",
    )  # fmt: skip
    path = str(commsim.save(hand, tmp_path / "mine.json"))
    rc, out, err = cli("run", "--file", path, "--backend", "numpy", "-s", "4KiB", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert (doc["algorithm"], doc["nranks"]) == ("hand_made", 2)
    assert doc["measurements"][0]["check"] == "ok"
    rc, _, err = cli("run", "--file", path, "-p", "2", "--backend", "numpy")
    assert rc == 2 and "drop -p" in err
