"""``commsim verify``."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

import commsim
from commsim.cli import verify
from commsim.cli.memory import MemoryBudget
from commsim.cli.schedules import ScheduleChoice, ScheduleFile


def test_verify_prints_steps_transfers_and_ok(cli):
    rc, out, err = cli("verify", "-c", "allreduce", "-a", "ring", "-p", "4,5")
    assert rc == 0 and err == ""
    lines = [line.split() for line in out.splitlines()]
    assert lines[2][:5] == ["allreduce", "ring", "4", "6", "24"] and lines[2][-1] == "OK"
    assert lines[3][:5] == ["allreduce", "ring", "5", "8", "40"] and lines[3][-1] == "OK"


def test_verify_defaults_to_every_algorithm_and_json(cli_json):
    doc = cli_json("verify", "-c", "allgather", "-p", "3,4")
    assert {d["algorithm"] for d in doc} == set(commsim.available("allgather"))
    assert all(d["ok"] and d["nranks"] in (3, 4) and d["seconds"] >= 0 for d in doc)
    ring4 = next(d for d in doc if d["algorithm"] == "ring" and d["nranks"] == 4)
    assert (ring4["nsteps"], ring4["ntransfers"]) == (3, 12)


def test_verify_rooted_collective_with_root(cli, some):
    algos = some("broadcast", "binomial", "chain")
    if not algos:
        pytest.skip("no broadcast algorithm registered yet")
    rc, out, _ = cli("verify", "-c", "broadcast", "-a", algos[0], "-p", "7", "--root", "3")
    assert rc == 0 and "OK" in out


def test_verify_file_round_trip(cli, schedule_files):
    rc, out, _ = cli("verify", "--file", schedule_files["good"])
    assert rc == 0 and "OK" in out


def test_verify_file_that_fails_is_exit_1_with_the_error_line(cli, cli_json, schedule_files):
    rc, out, err = cli("verify", "--file", schedule_files["wrong"])
    assert rc == 1
    assert "FAILED" in out
    assert err.count("\n") == 1 and "rank 0 slot 2" in err and "Traceback" not in err
    doc = cli_json("verify", "--file", schedule_files["wrong"], rc=1)
    assert doc[0]["ok"] is False and (doc[0]["rank"], doc[0]["slot"]) == (0, 2)


def _namespace(**given):
    args = dict(
        collective=None,
        algorithm=None,
        nranks=None,
        param=[],
        root=None,
        file=None,
        json=False,
        progress=None,
        memory_limit=None,
    )
    return argparse.Namespace(**{**args, **given})


def test_parse_gives_a_frozen_request():
    args = _namespace(collective="broadcast", algorithm="chain", nranks="4,8",
                      param=["segments=2"], root=1, memory_limit="1GiB")  # fmt: skip
    request = verify.parse(args)
    assert request.schedules == ScheduleChoice(
        "broadcast", ("chain",), (4, 8), {"chain": {"segments": 2}}, root=1
    )
    assert request.budget == MemoryBudget(2**30, "--memory-limit")
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.as_json = True  # type: ignore[misc]
    assert verify.parse(_namespace(file="s.json")).schedules == ScheduleFile(
        __import__("pathlib").Path("s.json")
    )


def test_compute_without_argparse():
    choice = ScheduleChoice("allreduce", ("ring",), (3,), {"ring": {}})
    [v] = verify.compute(verify.VerifyRequest(choice, MemoryBudget(2**30, "test")))
    assert v.ok and (v.algorithm, v.nranks, v.ntransfers) == ("ring", 3, 12)
    assert v.to_dict()["ok"] is True and "ring" in verify.render([v], as_json=False)
