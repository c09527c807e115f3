"""``commsim show``."""

from __future__ import annotations

import struct

import pytest

import commsim
from commsim._messages import messages


def test_draws_a_png(cli, tmp_path):
    out = tmp_path / "rab8.png"
    rc, stdout, err = cli(
        "show", "-c", "allreduce", "-a", "rabenseifner", "-p", "8", "-o", str(out)
    )
    assert rc == 0 and err == ""
    assert stdout.strip() == f"wrote {out} (rabenseifner, p=8, 6 steps)"
    data = out.read_bytes()
    assert data[:4] == b"\x89PNG"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 1000 and height > 300


def test_too_many_ranks_is_one_line(cli, tmp_path):
    rc, stdout, err = cli("show", "-c", "allreduce", "-a", "ring", "-p", "64", "-o",
                          str(tmp_path / "x.png"))  # fmt: skip
    assert rc == 2 and stdout == ""
    assert err.count("\n") == 1 and "p=64" in err and "p=8" in err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-a", "ring", "-p", "4", "--steps", "3..1"], "before the first"),
        (["-a", "ring", "-p", "4", "--steps", "x"], "A..B"),
        (["-a", "ring", "-p", "4", "--steps", "2..9"], "0..5"),
        (["-a", "ring", "-p", "4", "-o", "x.gif"], ".png, .svg or .pdf"),
        (["-a", "ring", "-p", "4", "-o", "x.png", "--json"], "give one"),
        (["-a", "ring", "-p", "4,8"], "one rank count"),
        (["-a", "rign", "-p", "4"], "ring"),
    ],
)
def test_bad_input(cli, args, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli("show", "-c", "allreduce", *args)
    assert rc == 2 and err.count("\n") == 1 and words in err, err


def test_json_is_the_message_table(cli_json):
    doc = cli_json("show", "-c", "allreduce", "-a", "double_binary_tree", "-p", "6")
    s = commsim.build("allreduce", "double_binary_tree", 6)
    assert (doc["algorithm"], doc["nranks"], doc["nsteps"]) == ("double_binary_tree", 6, s.nsteps)
    assert doc["params"] == {"segments": 4}
    nmsg = sum(len(messages(st, s).src) for st in s.steps())
    assert len(doc["messages"]) == nmsg  # no local operations in this one
    first = doc["messages"][0]
    assert set(first) == {"step", "src", "dst", "local", "slots", "dst_slots", "units",
                          "reduce_units", "reduce"}  # fmt: skip
    assert all(lo < hi for m in doc["messages"] for lo, hi in m["slots"])


def test_json_of_some_steps(cli_json):
    doc = cli_json("show", "-c", "allreduce", "-a", "rabenseifner", "-p", "4", "--steps", "1")
    assert {m["step"] for m in doc["messages"]} == {1}
    assert [(m["src"], m["dst"], m["slots"]) for m in doc["messages"]][:2] == [
        (0, 1, [[1, 2]]),
        (1, 0, [[0, 1]]),
    ]


def test_table_by_default(cli):
    rc, out, _ = cli("show", "-c", "broadcast", "-a", "binomial", "-p", "4", "--root", "2")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("broadcast binomial p=4: 2 steps")
    rows = [line.split() for line in lines[4:]]
    assert rows[0][:3] == ["0", "2", "0"] and rows[0][-1] == "copy"
    assert len(rows) == 3  # a binomial broadcast sends p - 1 messages


def test_file(cli, schedule_files, tmp_path):
    out = tmp_path / "f.svg"
    rc, _, _ = cli("show", "--file", schedule_files["good"], "-o", str(out))
    assert rc == 0 and out.read_bytes()[:5] == b"<?xml"


def test_help_teaches(cli):
    rc, out, _ = cli("show", "--help")
    assert rc == 0
    assert "examples:" in out and "rabenseifner -p 8 -o rab8.png" in out and "--steps" in out
