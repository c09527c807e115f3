"""``commsim predict``."""

from __future__ import annotations

import argparse
import warnings

import pytest

from commsim.cli import predict
from commsim.cli.memory import MemoryBudget
from commsim.cli.schedules import ScheduleChoice
from commsim.models import Hockney


def test_predict_file(cli_json, schedule_files, ring_time):
    doc = cli_json("predict", "--file", schedule_files["good"], "-s", "1MiB")
    assert doc["results"][0]["time_s"] == pytest.approx(ring_time(4, 2**20), rel=1e-12)


def test_predict_json_matches_the_ring_closed_form(cli_json, ring_time):
    p, sizes = 8, [0, 1024, 2**20, 2**30]
    doc = cli_json(
        "predict", "-c", "allreduce", "-a", "ring", "-p", str(p), "-s", "0,1KiB,1MiB,1GiB"
    )
    assert (doc["collective"], doc["algorithm"], doc["nranks"]) == ("allreduce", "ring", p)
    assert doc["model"]["alpha_s"] == 2e-6 and doc["model"]["ports"] == "single"
    assert [r["nbytes"] for r in doc["results"]] == sizes
    for r, n in zip(doc["results"], sizes, strict=True):
        assert r["time_s"] == pytest.approx(ring_time(p, n), rel=1e-12)
        assert set(r) == {
            "nbytes",
            "time_s",
            "algbw_Bps",
            "busbw_Bps",
            "lower_bound_s",
            "ratio_to_bound",
            "rank_time_s",
            "step_time_s",
        }
        assert len(r["rank_time_s"]) == p and max(r["rank_time_s"]) == r["time_s"]
        assert len(r["step_time_s"]) == doc["nsteps"] and r["step_time_s"][-1] == r["time_s"]
    big = doc["results"][-1]
    assert big["algbw_Bps"] == pytest.approx(2**30 / big["time_s"])
    assert big["busbw_Bps"] == pytest.approx(big["algbw_Bps"] * 2 * (p - 1) / p)  # nccl-tests
    assert big["lower_bound_s"] <= big["time_s"]


def test_predict_model_parameters_accept_units(cli_json, ring_time):
    p, n = 16, 2**20
    doc = cli_json(
        "predict",
        "-c",
        "allreduce",
        "-a",
        "ring",
        "-p",
        str(p),
        "-s",
        "1MiB",
        "--alpha",
        "1.5us",
        "--beta",
        "100Gb/s",
        "--gamma",
        "4e-11s/B",
    )
    want = ring_time(p, n, alpha=1.5e-6, beta=8e-11, gamma=4e-11)
    assert doc["results"][0]["time_s"] == pytest.approx(want, rel=1e-12)


def test_predict_table_is_readable(cli):
    rc, out, _ = cli("predict", "-c", "allreduce", "-a", "ring", "-p", "64", "-s", "1KiB,1MiB,1GiB")
    assert rc == 0
    lines = out.splitlines()
    assert "126 steps" in lines[0] and "alpha=2.00us" in lines[1]
    header = lines[3].split()
    assert header == ["size", "time", "algbw", "busbw", "bound", "time/bound"]
    rows = [line.split() for line in lines[5:]]
    assert [r[0] for r in rows] == ["1KiB", "1MiB", "1GiB"]
    assert rows[0][1] == "252us" and rows[2][3].endswith("GB/s")
    assert len({len(line) for line in lines[3:]}) == 1  # right-aligned columns


def test_single_rank_has_no_bandwidth_and_no_warning(cli_json):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        doc = cli_json("predict", "-c", "allreduce", "-a", "ring", "-p", "1", "-s", "1KiB")
    (row,) = doc["results"]
    # one rank moves nothing over the bus: nccl-tests' factor is 0, so busbw is 0
    assert row["time_s"] == 0.0 and row["busbw_Bps"] == 0.0 and row["ratio_to_bound"] is None


def test_parse_gives_a_frozen_request_with_the_model():
    args = argparse.Namespace(
        collective="allreduce", algorithm="ring", nranks="8", param=[], root=None, file=None,
        sizes="1KiB,1MiB", alpha="1us", beta=None, gamma="inf", ports="multi", json=True,
        progress=False, memory_limit=None,
    )  # fmt: skip
    request = predict.parse(args)
    assert request.schedules == ScheduleChoice("allreduce", ("ring",), (8,), {"ring": {}})
    assert request.sizes == (1024, 2**20) and request.as_json and request.progress is False
    model = request.model
    assert (model.alpha, model.beta, model.gamma, model.ports) == (1e-6, 1 / 25e9, 0.0, "multi")


def test_compute_takes_any_model_without_argparse(ring_time):
    choice = ScheduleChoice("allreduce", ("ring",), (4,), {"ring": {}})
    model = Hockney(alpha=1e-6)
    request = predict.PredictRequest(choice, (1000,), model, MemoryBudget(2**30, "test"))
    result = predict.compute(request)
    assert result.ntransfers == 24
    assert result.time[0] == pytest.approx(ring_time(4, 1000, alpha=1e-6), rel=1e-12)
    assert model.describe() in predict.render(result, as_json=False)


def test_an_impossible_prediction_is_said_in_the_table_and_the_json(cli, cli_json, tmp_path):
    import commsim

    empty = commsim.Schedule.from_steps([], collective="allreduce", nranks=8, nslots=8)
    path = str(commsim.save(empty, tmp_path / "empty.json"))
    rc, out, _ = cli("predict", "--file", path, "-s", "1MiB")
    assert rc == 0 and "note: predicted 0s at 1MiB is below" in out
    [note] = cli_json("predict", "--file", path, "-s", "1MiB")["notes"]
    assert "cannot compute its collective" in note


@pytest.mark.parametrize("ports", ["2", "4", "multi"])
def test_k_ports_predict_between_the_bound_and_single_port(cli_json, ports):
    args = ("predict", "-c", "allreduce", "-a", "direct", "-p", "8", "-s", "1MiB")
    single = cli_json(*args)["results"][0]
    k = cli_json(*args, "--ports", ports)["results"][0]
    assert k["lower_bound_s"] <= k["time_s"] <= single["time_s"]


def test_a_bad_port_count_is_one_line(cli):
    rc, _, err = cli("predict", "-c", "allreduce", "-a", "ring", "-p", "8", "--ports", "0")
    assert rc == 2 and err.count("\n") == 1 and "--ports" in err
