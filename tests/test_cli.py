"""The ``commsim`` command line, run in-process through ``main([...])``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import warnings

import pytest

import commsim
from commsim import _cli_output, cli
from commsim.cli import main

ALPHA, BETA, GAMMA = 2e-6, 1 / 25e9, 1 / 100e9  # the documented defaults
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys, *argv: str):
    rc, out, err = run(capsys, *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


def ring_allreduce_time(p: int, n: float, alpha=ALPHA, beta=BETA, gamma=GAMMA) -> float:
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta + (p - 1) / p * n * gamma


def some(collective: str, *names: str) -> list[str]:
    """The given algorithms that are registered (others land concurrently)."""
    have = commsim.available(collective)
    return [n for n in names if n in have]


# -- help ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["algorithms", "verify", "predict", "compare"])
def test_each_subcommand_help_teaches_with_examples(capsys, command):
    rc, out, _ = run(capsys, command, "--help")
    assert rc == 0
    assert "examples:" in out and f"commsim {command}" in out
    if command in ("predict", "compare"):
        assert "default: 2us" in out and "25GB/s" in out and "100GB/s" in out
        assert "InfiniBand" in out and "1KiB..1GiB" in out


def test_top_level_help_version_and_missing_command(capsys):
    rc, out, _ = run(capsys, "--help")
    assert rc == 0 and "compare" in out and "Exit status" in out
    rc, out, _ = run(capsys, "--version")
    assert rc == 0 and commsim.__version__ in out
    rc, out, err = run(capsys)
    assert rc == 2 and out == "" and "choose a command" in err


def test_python_dash_m_runs_the_cli():
    proc = subprocess.run(
        [sys.executable, "-m", "commsim", "algorithms", "-c", "allreduce"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "ring" in proc.stdout


# -- algorithms ----------------------------------------------------------------------------------


def test_algorithms_lists_ring_for_allreduce(capsys):
    rc, out, _ = run(capsys, "algorithms", "-c", "allreduce")
    assert rc == 0
    rows = [line.split() for line in out.splitlines()]
    ring = next(r for r in rows if r[:2] == ["allreduce", "ring"])
    assert "2(p-1)α" in " ".join(ring)  # the cost formula from the registry row
    assert all(
        r[0] in ("allreduce", "collective") for r in rows if r and r[0] in commsim.COLLECTIVES
    )


def test_algorithms_json_has_every_registry_row(capsys):
    doc = run_json(capsys, "algorithms")
    assert {(d["collective"], d["name"]) for d in doc} == set(commsim.algorithms.REGISTRY)
    ring = next(d for d in doc if (d["collective"], d["name"]) == ("allreduce", "ring"))
    assert set(ring) >= {"params", "constraints", "cost", "reference"}
    assert ring["params"] == {}


def test_algorithms_detail_prints_the_docstring(capsys):
    rc, out, _ = run(capsys, "algorithms", "-c", "allreduce", "-a", "ring")
    assert rc == 0 and out.startswith("allreduce/ring") and "Examples:" in out


# -- verify --------------------------------------------------------------------------------------


def test_verify_prints_steps_transfers_and_ok(capsys):
    rc, out, err = run(capsys, "verify", "-c", "allreduce", "-a", "ring", "-p", "4,5")
    assert rc == 0 and err == ""
    lines = [line.split() for line in out.splitlines()]
    assert lines[2][:5] == ["allreduce", "ring", "4", "6", "24"] and lines[2][-1] == "OK"
    assert lines[3][:5] == ["allreduce", "ring", "5", "8", "40"] and lines[3][-1] == "OK"


def test_verify_defaults_to_every_algorithm_and_json(capsys):
    doc = run_json(capsys, "verify", "-c", "allgather", "-p", "3,4")
    assert {d["algorithm"] for d in doc} == set(commsim.available("allgather"))
    assert all(d["ok"] and d["nranks"] in (3, 4) and d["seconds"] >= 0 for d in doc)
    ring4 = next(d for d in doc if d["algorithm"] == "ring" and d["nranks"] == 4)
    assert (ring4["nsteps"], ring4["ntransfers"]) == (3, 12)


def test_verify_rooted_collective_with_root(capsys):
    algos = some("broadcast", "binomial", "chain")
    if not algos:
        pytest.skip("no broadcast algorithm registered yet")
    rc, out, _ = run(capsys, "verify", "-c", "broadcast", "-a", algos[0], "-p", "7", "--root", "3")
    assert rc == 0 and "OK" in out


@pytest.fixture
def schedule_files(tmp_path):
    serialize = pytest.importorskip("commsim._serialize")
    good = tmp_path / "ring4.json"
    serialize.save(commsim.build("allreduce", "ring", 4), good)
    data = json.loads(good.read_text())

    def variant(name, edit):
        d = json.loads(json.dumps(data))
        edit(d)
        path = tmp_path / name
        path.write_text(json.dumps(d))
        return str(path)

    def unreduce(d):
        d["steps"][2]["reduce"][1] = False

    def out_of_range(d):
        d["steps"][1]["dst"][2] = 7

    return {
        "good": str(good),
        "wrong": variant("wrong.json", unreduce),
        "out_of_range": variant("oor.json", out_of_range),
        "no_nranks": variant("nof.json", lambda d: d.pop("nranks")),
    }


def test_verify_file_round_trip(capsys, schedule_files):
    rc, out, _ = run(capsys, "verify", "--file", schedule_files["good"])
    assert rc == 0 and "OK" in out


def test_verify_file_that_fails_is_exit_1_with_the_error_line(capsys, schedule_files):
    rc, out, err = run(capsys, "verify", "--file", schedule_files["wrong"])
    assert rc == 1
    assert "FAILED" in out
    assert err.count("\n") == 1 and "rank 0 slot 2" in err and "Traceback" not in err
    doc = run_json_rc(capsys, 1, "verify", "--file", schedule_files["wrong"])
    assert doc[0]["ok"] is False and (doc[0]["rank"], doc[0]["slot"]) == (0, 2)


def run_json_rc(capsys, want_rc, *argv):
    rc, out, _ = run(capsys, *argv, "--json")
    assert rc == want_rc
    return json.loads(out)


def test_predict_file(capsys, schedule_files):
    doc = run_json(capsys, "predict", "--file", schedule_files["good"], "-s", "1MiB")
    assert doc["results"][0]["time_s"] == pytest.approx(ring_allreduce_time(4, 2**20), rel=1e-12)


# -- predict -------------------------------------------------------------------------------------


def test_predict_json_matches_the_ring_closed_form(capsys):
    p, sizes = 8, [0, 1024, 2**20, 2**30]
    doc = run_json(
        capsys, "predict", "-c", "allreduce", "-a", "ring", "-p", str(p), "-s", "0,1KiB,1MiB,1GiB"
    )
    assert (doc["collective"], doc["algorithm"], doc["nranks"]) == ("allreduce", "ring", p)
    assert doc["model"]["alpha_s"] == ALPHA and doc["model"]["ports"] == "single"
    assert [r["nbytes"] for r in doc["results"]] == sizes
    for r, n in zip(doc["results"], sizes, strict=True):
        assert r["time_s"] == pytest.approx(ring_allreduce_time(p, n), rel=1e-12)
        assert set(r) == {
            "nbytes",
            "time_s",
            "algbw_Bps",
            "busbw_Bps",
            "lower_bound_s",
            "ratio_to_bound",
        }
    big = doc["results"][-1]
    assert big["algbw_Bps"] == pytest.approx(2**30 / big["time_s"])
    assert big["busbw_Bps"] == pytest.approx(big["algbw_Bps"] * 2 * (p - 1) / p)  # nccl-tests
    assert big["lower_bound_s"] <= big["time_s"]


def test_predict_model_parameters_accept_units(capsys):
    p, n = 16, 2**20
    doc = run_json(
        capsys,
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
    want = ring_allreduce_time(p, n, alpha=1.5e-6, beta=8e-11, gamma=4e-11)
    assert doc["results"][0]["time_s"] == pytest.approx(want, rel=1e-12)


def test_predict_table_is_readable(capsys):
    rc, out, _ = run(
        capsys, "predict", "-c", "allreduce", "-a", "ring", "-p", "64", "-s", "1KiB,1MiB,1GiB"
    )
    assert rc == 0
    lines = out.splitlines()
    assert "126 steps" in lines[0] and "alpha=2.00us" in lines[1]
    header = lines[3].split()
    assert header == ["size", "time", "algbw", "busbw", "bound", "time/bound"]
    rows = [line.split() for line in lines[5:]]
    assert [r[0] for r in rows] == ["1KiB", "1MiB", "1GiB"]
    assert rows[0][1] == "252us" and rows[2][3].endswith("GB/s")
    assert len({len(line) for line in lines[3:]}) == 1  # right-aligned columns


# -- compare -------------------------------------------------------------------------------------


def test_compare_latency_algorithm_wins_small_and_bandwidth_wins_large(capsys):
    algos = some("allreduce", "ring", "rabenseifner", "recursive_doubling", "binomial")
    doc = run_json(
        capsys, "compare", "-c", "allreduce", "-a", ",".join(algos), "-p", "64", "-s", "8B,1GiB"
    )
    (res,) = doc["results"]
    small, large = res["winner"]
    assert small != "ring"  # 126 latencies lose to lg p = 6 at 8 bytes
    if "recursive_doubling" in algos:
        assert small == "recursive_doubling"
        assert res["time_s"]["recursive_doubling"][0] == pytest.approx(
            6 * (ALPHA + 8 * BETA + 8 * GAMMA), rel=1e-12
        )
    assert large == ("rabenseifner" if "rabenseifner" in algos else "ring")
    assert res["time_s"]["ring"][1] == pytest.approx(ring_allreduce_time(64, 2**30), rel=1e-12)
    assert doc["sizes"] == [8, 2**30] and res["skipped"] == {}


def test_compare_table_marks_the_winner(capsys):
    algos = some("allreduce", "ring", "recursive_doubling")
    rc, out, _ = run(
        capsys, "compare", "-c", "allreduce", "-a", ",".join(algos), "-p", "8,64", "-s", "1KiB"
    )
    assert rc == 0
    assert "allreduce, p=8" in out and "allreduce, p=64" in out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("size"))
    assert "winner" in header and "ring" in header
    row = next(line for line in out.splitlines() if line.lstrip().startswith("1KiB"))
    if "recursive_doubling" in algos:
        assert row.split()[-2] == "recursive_doubling"
        assert row.count("*") == 1
    assert "fastest:" in out


def test_compare_plot_writes_a_png(capsys, tmp_path):
    path = tmp_path / "cmp.png"
    rc, out, _ = run(
        capsys,
        "compare",
        "-c",
        "allreduce",
        "-p",
        "4,8",
        "-s",
        "0,1KiB..1MiB:x32",
        "--plot",
        str(path),
    )
    assert rc == 0 and str(path) in out
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 5000


def test_compare_skips_what_does_not_fit_with_a_note(capsys):
    rc, out, _ = run(
        capsys,
        "compare",
        "-c",
        "allreduce",
        "-a",
        "ring",
        "-p",
        "8,1048576",
        "-s",
        "1KiB",
        "--memory-limit",
        "32MiB",
    )
    assert rc == 0
    assert "allreduce, p=8" in out
    assert "note: skipped ring: p=1048576 needs about" in out


def test_compare_progress_is_opt_in_off_a_terminal(capsys):
    argv = ["compare", "-c", "allreduce", "-a", "ring", "-p", "16", "-s", "1KiB"]
    rc, _, err = run(capsys, *argv)
    assert rc == 0 and err == ""
    rc, _, err = run(capsys, *argv, "--progress")
    assert rc == 0 and "% done" in err


# -- bad input: exit 2, one line, no traceback -------------------------------------------------

PREDICT = ["predict", "-c", "allreduce", "-a", "ring", "-p", "8"]


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["predict", "-c", "allreduc", "-a", "ring", "-p", "8"], "did you mean allreduce"),
        (["predict", "-c", "allreduce", "-a", "rign", "-p", "8"], "did you mean ring"),
        (["compare", "-c", "allreduce", "-a", "ring,rign", "-p", "8"], "'rign'"),
        (["predict", "-c", "allreduce", "-a", "ring", "-p", "0"], "p must be an integer >= 1"),
        (["predict", "-c", "allreduce", "-a", "ring", "-p", "2.5"], "'2.5'"),
        (["verify", "-c", "allreduce", "-a", "ring", "-p", "four"], "'four'"),
        (["predict", "-c", "allreduce", "-a", "ring", "-p", "-3"], "'-3'"),
        ([*PREDICT, "-s", "12XB"], "cannot parse size '12XB'"),
        ([*PREDICT, "-s", "64K"], "ambiguous size"),
        ([*PREDICT, "-s", "-1KiB"], "size must be >= 0"),
        ([*PREDICT, "--alpha", "2parsec"], "cannot parse time"),
        ([*PREDICT, "--beta", "0GB/s"], "bandwidth must be > 0"),
        ([*PREDICT, "--ports", "dual"], "invalid choice"),
        ([*PREDICT, "--param", "segments=8"], "no parameter 'segments'"),
        ([*PREDICT, "--param", "segments"], "KEY=VALUE"),
        ([*PREDICT, "--root", "1"], "no root"),
        ([*PREDICT, "--bogus"], "unrecognized arguments: --bogus"),
        (["predict", "-a", "ring", "-p", "8"], "-c"),
        (["predict", "-c", "allreduce", "-p", "8"], "-a"),
        (["predict", "-c", "allreduce", "-a", "ring", "-p", "8,16"], "one rank count"),
        (["predict", "-c", "allreduce", "-a", "ring", "-p", "1000000000"], "p=1000000000 needs"),
        (["verify", "-c", "allreduce", "-a", "ring", "-p", "100000"], "p=100000 needs about"),
        (
            ["verify", "-c", "allreduce", "-a", "ring", "-p", "256", "--memory-limit", "1MiB"],
            "more than the 1.0 MiB available",
        ),
        (["compare", "-c", "allreduce", "-p", "8", "--plot", "x.gif"], ".png"),
        (["compare", "-c", "allreduce", "-p", "8", "--plot", "/no/such/dir/x.png"], "/no/such"),
        (
            ["compare", "-c", "allreduce", "-a", "ring", "-p", "1048576", "--memory-limit", "1MiB"],
            "nothing to compare",
        ),
        (["verify", "--file", "/no/such/file.json"], "no such file"),
        (["verify", "--file", "x.json", "-c", "allreduce"], "drop -c"),
        (["algorithms", "-c", "alltoal"], "did you mean alltoall"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, expect):
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    assert out == ""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "error" in err and expect in err
    assert "Traceback" not in err


def test_malformed_schedule_files_are_exit_2_naming_the_fault(capsys, schedule_files):
    rc, _, err = run(capsys, "verify", "--file", schedule_files["out_of_range"])
    assert rc == 2 and err.count("\n") == 1 and "step 1: transfer 2: dst rank 7 out of range" in err
    rc, _, err = run(capsys, "predict", "--file", schedule_files["no_nranks"])
    assert rc == 2 and err.count("\n") == 1 and "'nranks'" in err


def test_root_out_of_range_is_bad_input(capsys):
    algos = some("broadcast", "binomial", "chain")
    if not algos:
        pytest.skip("no broadcast algorithm registered yet")
    rc, out, err = run(
        capsys, "verify", "-c", "broadcast", "-a", algos[0], "-p", "4", "--root", "9"
    )
    assert rc == 2 and out == "" and err.count("\n") == 1 and "root must be" in err


def test_progress_bar_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    progress = _cli_output._Progress(total=0, enabled=True, stream=stream)
    s = commsim.build("allreduce", "ring", 4)
    tracked, ntransfers = progress.track(s, "ring p=4")
    assert sum(st.ntransfers for st in tracked.steps()) == ntransfers[0] == 24
    progress.close()
    text = stream.getvalue()
    assert text.startswith("\r[") and "100%" in text and "ring p=4" in text
    assert text.endswith("\r")  # the bar is erased, the terminal line left clean


def test_single_rank_has_no_bandwidth_and_no_warning(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        doc = run_json(capsys, "predict", "-c", "allreduce", "-a", "ring", "-p", "1", "-s", "1KiB")
    (row,) = doc["results"]
    # one rank moves nothing over the bus: nccl-tests' factor is 0, so busbw is 0
    assert row["time_s"] == 0.0 and row["busbw_Bps"] == 0.0 and row["ratio_to_bound"] is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["predict", "-c", "allreduce", "-a", "ring", "-p", "4", "-s", "1e400"], "too large"),
        (["predict", "-c", "allreduce", "-a", "ring", "-p", "4", "--alpha", "1e400"], "too large"),
        (
            ["predict", "-c", "broadcast", "-a", "chain", "-p", "4", "--param", "segments=1e30"],
            "out of range",
        ),
        (
            ["validate", "-c", "allreduce", "-p", "2", "--dtype", "bool", "--backend", "numpy"],
            "dtype must be numeric",
        ),
        (
            [
                "run",
                "-c",
                "allreduce",
                "-a",
                "ring",
                "-p",
                "2",
                "--backend",
                "numpy",
                "-s",
                "1e300",
            ],
            "too large",
        ),
    ],
)
def test_absurd_numbers_are_one_line_errors(capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
