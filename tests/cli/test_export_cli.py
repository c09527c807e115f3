"""``commsim export``: files in both formats, options reaching the exporters, one-line refusals."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

import commsim


def test_msccl_file_with_the_options(cli, tmp_path):
    out = tmp_path / "ring8.xml"
    argv = ["export", "-c", "allreduce", "-a", "ring", "-p", "8", "--format", "msccl", "-o"]
    rc, stdout, err = cli(*argv, str(out), "--proto", "LL", "--channels", "2",
                          "--max-bytes", "1MiB")  # fmt: skip
    assert rc == 0, err
    algo = ET.parse(out).getroot()
    assert algo.get("proto") == "LL" and algo.get("nchannels") == "2"
    assert (algo.get("maxBytes"), algo.get("coll"), algo.get("ngpus")) == (
        "1048576",
        "allreduce",
        "8",
    )
    assert len(algo.findall("gpu")) == 8
    assert stdout.startswith(f"wrote {out}: MSCCL-IR of allreduce/ring p=8")


def test_format_from_the_suffix_and_json_summary(cli, tmp_path):
    out = tmp_path / "x.xml"
    rc, stdout, err = cli("export", "-c", "alltoall", "-a", "bruck", "-p", "8", "-o", str(out),
                          "--no-fuse", "--json")  # fmt: skip
    assert rc == 0, err
    doc = json.loads(stdout)
    assert doc["format"] == "msccl" and doc["nfused"] == 0 and doc["nranks"] == 8
    assert doc["nsends"] >= doc["nmessages"] > 0
    assert "rcs" not in out.read_text()


def test_goal_to_stdout_with_a_summary_on_stderr(cli):
    rc, stdout, err = cli("export", "-c", "allreduce", "-a", "ring", "-p", "4", "--format", "goal",
                          "--size", "1KiB", "--gamma", "0.5")  # fmt: skip
    assert rc == 0, err
    assert stdout.startswith("num_ranks 4\nrank 0 {\n")
    assert "s0t1: send 256b to 1 tag 0" in stdout and "calc 128" in stdout
    assert err.startswith("wrote standard output: GOAL of allreduce/ring p=4 at 1KiB; 24 sends")


def test_a_saved_schedule_file_exports(cli, tmp_path):
    src = commsim.save(
        commsim.build("broadcast", "binomial", nranks=8, root=3), tmp_path / "b.json"
    )
    rc, stdout, err = cli("export", "--file", str(src), "--format", "goal", "--size", "64KiB")
    assert rc == 0, err
    assert stdout.count(": send ") == 7 and stdout.count(": recv ") == 7


def test_save_picks_the_format_from_the_suffix(tmp_path):
    s = commsim.build("allgather", "ring", nranks=4)
    assert ET.parse(commsim.save(s, tmp_path / "a.xml")).getroot().get("coll") == "allgather"
    goal = commsim.save(s, tmp_path / "a.goal", nbytes=4096).read_text()
    assert goal.startswith("num_ranks 4\n") and "send 1024b" in goal
    npz = commsim.save(s, tmp_path / "a.bin", format="npz")
    assert commsim.load(npz.rename(tmp_path / "a.npz")).nsteps == s.nsteps
    with pytest.raises(commsim.ParameterError, match="needs the message size"):
        commsim.save(s, tmp_path / "b.goal")
    with pytest.raises(commsim.ParameterError, match="unknown schedule format"):
        commsim.save(s, tmp_path / "b", format="yaml")


def test_a_suffix_in_capitals_saves_and_loads_as_the_same_format(tmp_path):
    s = commsim.build("allreduce", "ring", nranks=4)
    xml = commsim.save(s, tmp_path / "RING.XML")
    assert ET.parse(xml).getroot().tag == "algo"
    commsim.verify(commsim.load(xml))  # read back through the MSCCL-IR importer
    npz = commsim.save(s, tmp_path / "RING.NPZ")
    assert commsim.load(npz).nsteps == s.nsteps
    goal = commsim.save(s, tmp_path / "ring.goal", nbytes=1024)
    with pytest.raises(commsim.ScheduleError, match="GOAL files are written"):
        commsim.load(goal)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-c", "allreduce", "-a", "ring", "-p", "33", "-o", "{tmp}/r.xml"],
         r"needs 65 steps; MSCCL's executor runs at most 64 per thread block \(1 too many\)"),
        (["-c", "alltoall", "-a", "direct", "-p", "40", "-o", "{tmp}/a.xml"],
         r"39 sending thread blocks on one channel .* allows 32 \(7 too many\)"),
        (["-c", "allreduce", "-a", "ring", "-p", "4", "-o", "{tmp}/r.xml", "--channels", "33"],
         r"at most 32 channels, asked for 33 \(1 too many\)"),
        (["-c", "alltoall", "-a", "pairwise", "-p", "4", "-o", "{tmp}/a.xml", "--in-place"],
         "no in-place form"),
        (["-c", "allreduce", "-a", "ring", "-p", "4", "--format", "goal"], "needs the message size"),
        (["-c", "allreduce", "-a", "ring", "-p", "4", "-o", "{tmp}/x.goal", "--proto", "LL",
          "--size", "1KiB"], "--proto: only for --format msccl"),
        (["-c", "allreduce", "-a", "ring", "-p", "4", "-o", "{tmp}/x.txt"], "give --format"),
        (["-c", "allreduce", "-a", "ring", "-p", "4", "--format", "msccl", "--json"], "give the file"),
        (["-c", "allreduce", "-a", "ring", "-p", "4", "-o", "{tmp}/x.goal", "--size", "lots"],
         "lots"),
        (["-c", "allreduce", "-a", "ring", "-p", "4", "-o", "{tmp}/x.goal", "--size", "1KiB",
          "--gamma", "inf"], "gamma must be a finite number"),
    ],
)  # fmt: skip
def test_refusals_are_one_line_and_exit_2(cli, tmp_path, argv, message):
    rc, stdout, err = cli("export", *(a.replace("{tmp}", str(tmp_path)) for a in argv))
    assert rc == 2 and stdout == ""
    assert err.count("\n") == 1 and err.startswith("commsim: error: "), err
    assert re.search(message, err), err
    assert "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_help_teaches(cli):
    rc, out, _ = cli("export", "--help")
    assert rc == 0
    for needle in ("MSCCL", "txt2bin", "--no-fuse", "--size", "commsim export -c allreduce"):
        assert needle in out
