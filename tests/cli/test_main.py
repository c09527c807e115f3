"""The command table and ``main``: help, version, ``python -m commsim``, errors as one line."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

import commsim
from commsim.cli import COMMANDS, arguments

ALL = [c.__name__.rsplit(".", 1)[-1] for c in COMMANDS]


@pytest.mark.parametrize("command", ["algorithms", "verify", "predict", "compare"])
def test_each_subcommand_help_teaches_with_examples(cli, command):
    rc, out, _ = cli(command, "--help")
    assert rc == 0
    assert "examples:" in out and f"commsim {command}" in out
    if command in ("predict", "compare"):
        assert "default: 2us" in out and "25GB/s" in out and "100GB/s" in out
        assert "InfiniBand" in out and "1KiB..1GiB" in out


@pytest.mark.parametrize("command", ALL)
def test_every_command_has_the_same_anatomy(command):
    module = next(c for c in COMMANDS if c.__name__.endswith(f".{command}"))
    for name in ("HELP", "DESCRIPTION", "EXAMPLES"):
        assert isinstance(getattr(module, name), str) and getattr(module, name)
    for name in ("add_arguments", "parse", "compute", "render", "main"):
        assert callable(getattr(module, name)), name
    assert module.__doc__


def test_help_explains_units_only_where_there_are_units(cli):
    _, out, _ = cli("algorithms", "--help")
    assert "units:" not in out and "model:" not in out
    _, out, _ = cli("verify", "--help")
    assert "units:" in out and "model:" not in out


def test_top_level_help_version_and_missing_command(cli):
    rc, out, _ = cli("--help")
    assert rc == 0 and "compare" in out and "Exit status" in out
    assert all(name in out for name in ALL)
    rc, out, _ = cli("--version")
    assert rc == 0 and commsim.__version__ in out
    rc, out, err = cli()
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
        ([*PREDICT, "--ports", "dual"], "--ports: ports must be"),
        ([*PREDICT, "--param", "segments=8"], "no parameter 'segments'"),
        ([*PREDICT, "--param", "segments"], "KEY=VALUE"),
        ([*PREDICT, "--root", "1"], "no root"),
        ([*PREDICT, "--bogus"], "unrecognized arguments: --bogus"),
        (["predict", "-a", "ring", "-p", "8"], "-c"),
        (["predict", "-c", "allreduce", "-p", "8"], "-a"),
        (["predict", "-c", "allreduce", "-a", "ring", "-p", "8,16"], "one rank count"),
        (["predict", "-c", "allreduce", "-a", "ring,direct", "-p", "8"], "one algorithm"),
        (
            ["predict", "-c", "allreduce", "-a", "ring", "-p", "1000000000"],
            "nranks must be at most 16,777,216",
        ),
        (["verify", "-c", "allreduce", "-a", "ring", "-p", "100000"], "p=100000 needs about"),
        (
            ["verify", "-c", "allreduce", "-a", "ring", "-p", "512", "--memory-limit", "1MiB"],
            "more than the 1MiB available",
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
        (["algorithms", "-a", "ring"], "-a needs -c"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, argv, expect):
    rc, out, err = cli(*argv)
    assert rc == 2
    assert out == ""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "error" in err and expect in err
    assert "Traceback" not in err


def test_malformed_schedule_files_are_exit_2_naming_the_fault(cli, schedule_files):
    rc, _, err = cli("verify", "--file", schedule_files["out_of_range"])
    assert rc == 2 and err.count("\n") == 1 and "step 1: transfer 2: dst rank 7 out of range" in err
    rc, _, err = cli("predict", "--file", schedule_files["no_nranks"])
    assert rc == 2 and err.count("\n") == 1 and "'nranks'" in err


def test_root_out_of_range_is_bad_input(cli, some):
    algos = some("broadcast", "binomial", "chain")
    if not algos:
        pytest.skip("no broadcast algorithm registered yet")
    rc, out, err = cli("verify", "-c", "broadcast", "-a", algos[0], "-p", "4", "--root", "9")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "root must be" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["predict", "-c", "allreduce", "-a", "ring", "-p", "4", "-s", "1e400"], "too large"),
        (["predict", "-c", "allreduce", "-a", "ring", "-p", "4", "--alpha", "1e400"], "too large"),
        (["predict", "-c", "allreduce", "-a", "ring", "-p", "4", "--alpha", "2"], "write the unit"),
        (["compare", "-c", "allreduce", "-p", "4", "--alpha", "0.5"], "write the unit"),
        (["sparse", "-p", "8", "--density", "0.1", "--alpha", "3"], "write the unit"),
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
def test_absurd_numbers_are_one_line_errors(cli, argv, message):
    rc, _, err = cli(*argv)
    assert rc == 2
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


# -- one wording for the shared options ------------------------------------------------------------


@pytest.mark.parametrize("command", ["predict", "run", "validate"])
def test_one_rank_count_wording_for_every_command(cli, command):
    algorithm = [] if command == "validate" else ["-a", "ring"]
    argv = [command, "-c", "allreduce", *algorithm, "-p", "2,4", "--backend", "numpy"]
    if command == "predict":
        argv = argv[:-2]
    rc, _, err = cli(*argv)
    assert rc == 2
    assert f"commsim: error: {command} takes one rank count, got 2 (2,4)" in err


@pytest.mark.parametrize("command", ["verify", "predict", "compare", "run", "validate"])
def test_one_missing_rank_count_wording_for_every_command(cli, command):
    algorithm = [] if command in ("verify", "compare", "validate") else ["-a", "ring"]
    rc, _, err = cli(command, "-c", "allreduce", *algorithm)
    assert rc == 2 and "give the rank count with -p (e.g. -p 64" in err


def test_integer_options_are_checked_by_argparse():
    parse = arguments.int_type("root", 0)
    assert parse("3") == 3
    for bad in ("x", "-1"):
        with pytest.raises(argparse.ArgumentTypeError, match="root must be"):
            parse(bad)


def test_alpha_with_a_unit_or_a_small_bare_number_is_taken(cli_json):
    """Seconds stay seconds where written so (``2s``) and bare numbers below a millisecond are
    seconds as before (``1.5e-6``); only ``--alpha 2`` style numbers are refused."""
    two_s = cli_json("predict", "-c", "allreduce", "-a", "ring", "-p", "4", "-s", "1KiB",
                     "--alpha", "2s")  # fmt: skip
    small = cli_json("predict", "-c", "allreduce", "-a", "ring", "-p", "4", "-s", "1KiB",
                     "--alpha", "1.5e-6")  # fmt: skip
    assert two_s["results"][0]["time_s"] > 12 > small["results"][0]["time_s"]
