"""``commsim compare``."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from commsim.cli import compare
from commsim.cli.memory import MemoryBudget
from commsim.cli.schedules import ScheduleChoice
from commsim.models import Hockney

ALPHA, BETA, GAMMA = 2e-6, 1 / 25e9, 1 / 100e9  # the documented defaults
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_compare_latency_algorithm_wins_small_and_bandwidth_wins_large(cli_json, some, ring_time):
    algos = some("allreduce", "ring", "rabenseifner", "recursive_doubling", "binomial")
    doc = cli_json("compare", "-c", "allreduce", "-a", ",".join(algos), "-p", "64", "-s", "8B,1GiB")
    (res,) = doc["results"]
    small, large = res["winner"]
    assert small != "ring"  # 126 latencies lose to lg p = 6 at 8 bytes
    if "recursive_doubling" in algos:
        assert small == "recursive_doubling"
        assert res["time_s"]["recursive_doubling"][0] == pytest.approx(
            6 * (ALPHA + 8 * BETA + 8 * GAMMA), rel=1e-12
        )
    assert large == ("rabenseifner" if "rabenseifner" in algos else "ring")
    assert res["time_s"]["ring"][1] == pytest.approx(ring_time(64, 2**30), rel=1e-12)
    assert doc["sizes"] == [8, 2**30] and res["skipped"] == {}


def test_compare_table_marks_the_winner(cli, some):
    algos = some("allreduce", "ring", "recursive_doubling")
    rc, out, _ = cli(
        "compare", "-c", "allreduce", "-a", ",".join(algos), "-p", "8,64", "-s", "1KiB"
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


def test_compare_plot_writes_a_png(cli, tmp_path):
    path = tmp_path / "cmp.png"
    rc, out, _ = cli(
        "compare", "-c", "allreduce", "-p", "4,8", "-s", "0,1KiB..1MiB:x32", "--plot", str(path)
    )
    assert rc == 0 and str(path) in out
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 5000


def test_compare_skips_what_does_not_fit_with_a_note(cli):
    rc, out, _ = cli(
        "compare", "-c", "allreduce", "-a", "ring", "-p", "8,1048576", "-s", "1KiB",
        "--memory-limit", "32MiB",
    )  # fmt: skip
    assert rc == 0
    assert "allreduce, p=8" in out
    assert "note: skipped ring: p=1048576 needs about" in out


def test_compare_progress_is_opt_in_off_a_terminal(cli):
    argv = ["compare", "-c", "allreduce", "-a", "ring", "-p", "16", "-s", "1KiB"]
    rc, _, err = cli(*argv)
    assert rc == 0 and err == ""
    rc, _, err = cli(*argv, "--progress")
    assert rc == 0 and "% done" in err


def test_parse_gives_a_frozen_request(tmp_path):
    args = argparse.Namespace(
        collective="allgather", algorithm=None, nranks="2..8", param=[], root=None,
        sizes="1KiB", alpha=None, beta=None, gamma=None, ports="single", json=False,
        progress=None, memory_limit=None, plot=str(tmp_path / "f.svg"), file=[],
    )  # fmt: skip
    request = compare.parse(args)
    assert request.schedules.nranks == (2, 4, 8) and request.plot == Path(tmp_path / "f.svg")
    assert set(request.schedules.algorithms) >= {"ring"}


def test_compute_without_argparse():
    choice = ScheduleChoice("allreduce", ("ring", "direct"), (4, 8), {"ring": {}, "direct": {}})
    request = compare.CompareRequest(choice, (8, 2**20), Hockney(), MemoryBudget(2**30, "test"))
    result = compare.compute(request)
    assert [pn.nranks for pn in result.panels] == [4, 8]
    assert all(len(pn.winners) == 2 and set(pn.times) == {"ring", "direct"} for pn in result.panels)
    assert result.plot is None and "fastest:" in compare.render(result, as_json=False)


def test_compare_takes_saved_schedules_into_the_panel_of_their_rank_count(cli_json, tmp_path):
    import commsim

    hand = commsim.Schedule.from_steps(
        [commsim.Step.make(src=[0, 1], dst=[1, 0], src_slot=0, dst_slot=0, reduce=True)],
        collective="allreduce", nranks=2, nslots=1, algorithm="hand_made",
    )  # fmt: skip
    mine = str(commsim.save(hand, tmp_path / "hand.json"))
    ring8 = str(commsim.save(commsim.build("allreduce", "ring", nranks=8), tmp_path / "r.json"))
    doc = cli_json(
        "compare", "-c", "allreduce", "-a", "ring", "-p", "2,8", "-s", "1KiB",
        "--file", mine, "--file", ring8,
    )  # fmt: skip
    small, big = doc["results"]
    assert set(small["time_s"]) == {"ring", "hand_made"} and small["winner"] == ["hand_made"]
    assert big["time_s"]["ring (file)"] == big["time_s"]["ring"]
    assert doc["algorithms"] == ["ring", "hand_made", "ring (file)"]


def test_a_saved_schedule_of_another_collective_or_p_is_refused(cli, tmp_path):
    import commsim

    path = str(commsim.save(commsim.build("allreduce", "ring", nranks=4), tmp_path / "r.json"))
    rc, _, err = cli("compare", "-c", "allgather", "-p", "4", "--file", path)
    assert rc == 2 and "cannot join a comparison of allgather" in err
    rc, _, err = cli("compare", "-c", "allreduce", "-p", "8", "--file", path)
    assert rc == 2 and "on 4 ranks cannot join" in err
