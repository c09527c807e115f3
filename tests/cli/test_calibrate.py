"""``commsim calibrate`` measures this machine; ``--profile`` makes the models use it."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.bench import Validation, summarize
from commsim.cli import main
from commsim.models import Hockney
from commsim.profiles import load_profile


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One real calibration on 2 MPI processes (small sizes, few repeats: a few seconds)."""
    pytest.importorskip("mpi4jax")
    out = tmp_path_factory.mktemp("cal") / "p.toml"
    rc = main(
        ["calibrate", "-p", "2", "-s", "8B..64KiB", "--repeats", "3", "--warmup", "1", "-o",
         str(out), "--json"]
    )  # fmt: skip
    assert rc == 0
    return out


@pytest.mark.mpi
def test_calibrate_measures_every_curve_and_writes_a_profile(measured):
    p = load_profile(measured)
    assert set(p.curves) == {"pingpong", "exchange", "step", "burst", "reduction"}
    assert p.backend == "mpi" and p.nranks == 2 and p.loggp is not None
    assert p.call_overhead["mpi"] > 0
    for c in p.curves.values():
        assert (c.median_s > 0).all() and len(c.sizes) == 14
        assert 0 < c.quality.points == len(c.sizes)
    for kind in ("pingpong", "exchange", "step", "reduction"):  # 64 KiB costs more than 8 B
        # (not asserted for the burst: a gap is a difference of two times, noisy on a busy box)
        assert float(p.curves[kind].fit(65536)) > float(p.curves[kind].fit(8)), kind


@pytest.mark.mpi
def test_predict_with_the_profile_uses_its_curve(measured, cli_json):
    doc = cli_json("predict", "-c", "allreduce", "-a", "ring", "-p", "2", "-s", "4KiB",
                   "--profile", str(measured))  # fmt: skip
    want = Hockney.from_profile(load_profile(measured)).predict(
        commsim.build("allreduce", "ring", nranks=2), 4096
    )
    [row] = doc["results"]
    assert row["time_s"] == pytest.approx(float(want.time), rel=1e-12)
    assert doc["model"]["message"] == load_profile(measured).message_curve().fit.to_dict()


def test_calibrate_refuses_bad_input_in_one_line(cli, tmp_path):
    for argv, match in [
        (["-s", "1KiB"], "at least 2 distinct sizes"),
        (["-s", "lots"], "cannot parse size"),
        (["-p", "1"], "-p"),
        (["-o", str(tmp_path / "p.json")], ".toml"),
        (["--cluster", "dgx-h100:1"], "--from-nccl-tests"),
    ]:
        rc, _, err = cli("calibrate", *argv)
        assert rc == 2 and match in err and err.count("\n") == 1, (argv, err)


def test_predict_refuses_a_profile_with_parameters_it_would_override(cli, tmp_path):
    rc, _, err = cli("predict", "-c", "allreduce", "-a", "ring", "-p", "2", "--profile",
                     str(tmp_path / "none.toml"), "--alpha", "1us")  # fmt: skip
    assert rc == 2 and "--alpha" in err and "--profile" in err
    rc, _, err = cli("predict", "-c", "allreduce", "-a", "ring", "-p", "2", "--profile",
                     str(tmp_path / "none.toml"))  # fmt: skip
    assert rc == 2 and "cannot read profile" in err


def _validation(size, predicted, measured, spread, overhead=0.0, ties=()):
    best_p = min(predicted, key=predicted.get)
    best_m = min(measured, key=measured.get)
    return Validation(
        size=size, nbytes=size, predicted_best=best_p, predicted_s=predicted[best_p],
        measured_s=measured[best_p], native=None, native_s=None, measured_over_predicted=None,
        fastest_measured=best_m, check="ok", measured=measured, predicted=predicted,
        spread=spread, measured_ties=ties, overhead_s=overhead,
    )  # fmt: skip


def test_summary_medians_and_ranking_are_what_they_say():
    vs = [
        _validation(1, {"a": 1.0, "b": 2.0}, {"a": 2.0, "b": 2.5}, {"a": 0.1, "b": 0.2}, 1.0),
        _validation(2, {"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 0.5}, {"a": 0.3, "b": 0.4}, 1.0),
        _validation(
            3, {"a": 3.0, "b": 2.0}, {"a": 3.0, "b": 3.1}, {"a": 0.1, "b": 0.1}, 1.0, ("b",)
        ),
    ]
    s = summarize(vs)
    a, b = s.algorithms
    # a: errors -50%, 0%, 0% -> median 0; with +1 s: 0%, +100%, +33% -> median 33%
    assert a.median_abs_error == pytest.approx(0.0)
    assert a.median_abs_error_with_overhead == pytest.approx(1 / 3)
    # b: errors -20%, +300%, -35.5% -> median |.| 35.5%
    assert b.median_abs_error == pytest.approx(abs(2.0 / 3.1 - 1))
    assert a.median_spread == pytest.approx(0.1) and b.median_spread == pytest.approx(0.2)
    # ranked right at sizes 1 (a, a) and 3 (b predicted, within a's spread); wrong at 2
    assert (s.ranked_right, s.ranked) == (2, 3)
    assert s.ranking_share == pytest.approx(2 / 3)


def test_validate_prints_errors_and_the_summary(cli_json, cli):
    doc = cli_json("validate", "-c", "allreduce", "-p", "2", "-a", "ring,rabenseifner", "-s",
                   "64KiB,1MiB", "--backend", "numpy", "--iters", "3", "--warmup", "0")  # fmt: skip
    r = doc["results"][0]
    for a in ("ring", "rabenseifner"):
        want = (r["predicted"][a] - r["measured"][a]) / r["measured"][a]
        assert r["error"][a] == pytest.approx(want)
    assert {x["algorithm"] for x in doc["summary"]["algorithms"]} == {"ring", "rabenseifner"}
    assert doc["summary"]["ranked"] == 2
    rc, out, _ = cli("validate", "-c", "allreduce", "-p", "2", "-a", "ring,rabenseifner", "-s",
                     "64KiB", "--backend", "numpy", "--iters", "2", "--warmup", "0")  # fmt: skip
    assert rc == 0 and "median |error|" in out and "ranking:" in out
    assert np.isfinite(doc["summary"]["algorithms"][0]["median_abs_error"])


@pytest.mark.mpi
def test_gamma_replaces_the_step_curve_and_wire_refuses_it(measured, cli_json, cli):
    """--gamma prices every reduction at its rate (the bound with it); --wire refuses a model
    whose reductions come from the step curve, in one line."""
    argv = ["predict", "-c", "allreduce", "-a", "ring", "-p", "4", "-s", "16MiB",
            "--profile", str(measured)]  # fmt: skip
    doc = cli_json(*argv, "--gamma", "1GB/s")
    profile = load_profile(measured)
    plain = Hockney(message=profile.message_curve().fit, gamma=1e-9)
    s = commsim.build("allreduce", "ring", nranks=4)
    [row] = doc["results"]
    assert row["time_s"] == pytest.approx(float(plain.predict(s, 16 * 2**20).time), rel=1e-12)
    assert "reduction" not in doc["model"] and doc["model"]["gamma_s_per_byte"] == 1e-9
    assert not any("cannot compute" in n for n in doc.get("notes", []))
    rc, _, err = cli(*argv, "--wire", "int8")
    assert rc == 2 and "--gamma" in err and len(err.strip().splitlines()) == 1
