"""``--wire`` on predict, compare, run and validate (issue #22): the model's bytes scale, the run
really converts and is checked within the bound, and bad input is one line with exit 2."""

from __future__ import annotations

import json

import pytest

BAD = [
    (["predict", "-c", "allgather", "-a", "ring", "-p", "8", "--wire", "fp16"], "allgather only"),
    (["compare", "-c", "alltoall", "-p", "8", "--wire", "int8"], "alltoall only moves data"),
    (["predict", "-c", "allreduce", "-a", "ring", "-p", "8", "--wire", "fp8"], "unknown wire"),
    (["run", "-c", "broadcast", "-a", "binomial", "-p", "4", "--backend", "numpy",
      "--wire", "bf16"], "broadcast only moves data"),
    (["run", "-c", "allreduce", "-a", "ring", "-p", "4", "--backend", "numpy", "--dtype",
      "int32", "--wire", "fp16"], "not int32"),
    (["run", "-c", "allreduce", "-a", "ring", "-p", "4", "--backend", "mpi4py",
      "--wire", "fp16"], "a wire format runs on numpy, jax, mpi"),
    (["validate", "-c", "allgather", "-p", "4", "--backend", "numpy", "--wire", "fp16"],
     "allgather only moves data"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "message"), BAD, ids=lambda a: a if isinstance(a, str) else a[0])
def test_bad_wire_input_is_one_line_and_exit_2(cli, argv, message):
    code, _, err = cli(*argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and message in err and "--wire" in err


def test_predict_with_fp16_halves_the_bandwidth_term(cli):
    base = ["predict", "-c", "allreduce", "-a", "ring", "-p", "8", "-s", "64MiB", "--json"]
    base += ["--alpha", "0s", "--gamma", "inf"]
    code, plain, _ = cli(*base)
    assert code == 0
    code, half, _ = cli(*base, "--wire", "fp16")
    assert code == 0
    t0 = json.loads(plain)["results"][0]["time_s"]
    doc = json.loads(half)
    assert doc["results"][0]["time_s"] == pytest.approx(t0 / 2, rel=1e-12)
    assert doc["results"][0]["nbytes"] == 64 * 2**20  # the data's bytes, not the wire's
    assert doc["model"]["wire"]["name"] == "fp16"


def test_compare_with_int8_names_the_wire(cli):
    code, out, _ = cli("compare", "-c", "allreduce", "-p", "8", "-s", "1MiB", "--wire", "int8")
    assert code == 0 and "wire int8" in out


@pytest.mark.parametrize("name", ["fp16", "bf16", "int8"])
def test_run_converts_and_checks_within_the_bound(cli, name):
    code, out, err = cli(
        "run", "-c", "allreduce", "-a", "ring", "-p", "4", "--backend", "numpy", "-s", "256KiB",
        "--iters", "2", "--warmup", "1", "--json", "--wire", name,
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["wire"] == name
    assert [m["check"] for m in doc["measurements"]] == ["ok"]
