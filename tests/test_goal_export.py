"""GOAL export, read back with a parser of LogGOPSim's grammar written here (from ``txt2bin.re``):
every registry algorithm at p = 4..16 gives one send and one receive per message of the schedule,
counted here from the transfers directly, and the ``requires`` chain the module documents."""

from __future__ import annotations

import collections
import re
import shutil
import subprocess

import numpy as np
import pytest

import commsim
from commsim.errors import CommsimError, ParameterError
from commsim.interop import format_goal, goal_program

IDENT = r"[a-zA-Z][a-zA-Z0-9_]*"
LINE = {
    "send": re.compile(rf"^({IDENT}): send (\d+)b to (\d+) tag (\d+)$"),
    "recv": re.compile(rf"^({IDENT}): recv (\d+)b from (\d+) tag (\d+)$"),
    "calc": re.compile(rf"^({IDENT}): calc (\d+)$"),
    "requires": re.compile(rf"^({IDENT}) requires ({IDENT})$"),
}


def parse_goal(text: str) -> list[dict]:
    """Per rank: ``ops`` (label -> (kind, size, peer, tag), in order) and ``requires`` pairs."""
    lines = text.splitlines()
    m = re.fullmatch(r"num_ranks (\d+)", lines[0])
    assert m, lines[0]
    n = int(m.group(1))
    ranks, cur = [], None
    for line in lines[1:]:
        if cur is None:
            m = re.fullmatch(r"rank (\d+) \{", line)
            assert m and int(m.group(1)) == len(ranks), f"ranks out of order at {line!r}"
            cur = {"ops": {}, "requires": []}
            continue
        if line == "}":
            ranks.append(cur)
            cur = None
            continue
        found = [(kind, pat.match(line)) for kind, pat in LINE.items() if pat.match(line)]
        assert found, f"not GOAL: {line!r}"
        ((kind, m),) = found
        if kind == "requires":
            a, b = m.groups()
            assert a in cur["ops"] and b in cur["ops"], f"undefined label in {line!r}"
            cur["requires"].append((a, b))
        else:
            label, *nums = m.groups()
            assert label not in cur["ops"], f"label {label} defined twice"
            nums = [int(x) for x in nums] + [None] * (3 - len(nums))
            cur["ops"][label] = (kind, *nums)
    assert cur is None and len(ranks) == n
    return ranks


def schedule_messages(s: commsim.Schedule) -> dict[tuple[int, int, int], list[int]]:
    """``(tag, src, dst) -> [units, reduced units]`` of every remote message, from the
    transfers (the tag: the step, or ``step * C + channel`` with ``C > 1`` channels); and the
    local reductions under ``(tag, rank, rank)``."""
    off, nch = s.slot_offsets, s.nchannels
    out: dict[tuple[int, int, int], list[int]] = {}
    for k, st in enumerate(s.steps()):
        cols = (st.src, st.dst, st.src_slot, st.count, st.reduce, st.channel)
        for q, r, a, n, red, c in zip(*cols, strict=True):
            u = int(off[a + n] - off[a])
            m = out.setdefault((k * nch + int(c) if nch > 1 else k, int(q), int(r)), [0, 0])
            m[0] += u
            m[1] += u if red else 0
    return out


CASES = [(c, a) for c in commsim.COLLECTIVES for a in commsim.available(c)]


@pytest.mark.parametrize(("collective", "algorithm"), CASES, ids=[f"{c}-{a}" for c, a in CASES])
def test_every_registry_algorithm_reads_back(collective, algorithm):
    for p in range(4, 17):
        s = commsim.build(collective, algorithm, nranks=p)
        nbytes = s.nbytes_units * 8  # 8 bytes per slot unit: sizes are exact
        ranks = parse_goal(format_goal(s, nbytes))
        msgs = schedule_messages(s)
        sends, recvs, calcs = collections.Counter(), collections.Counter(), collections.Counter()
        for (k, q, r), (u, red) in msgs.items():
            if q != r:
                sends[q, k, r, 8 * u] += 1
                recvs[r, k, q, 8 * u] += 1
            calcs[r] += red > 0
        for r, rank in enumerate(ranks):
            ops = rank["ops"].values()
            got_s = collections.Counter(
                (r, t, peer, b) for kind, b, peer, t in ops if kind == "send"
            )
            got_r = collections.Counter(
                (r, t, peer, b) for kind, b, peer, t in ops if kind == "recv"
            )
            assert got_s == collections.Counter({k: v for k, v in sends.items() if k[0] == r})
            assert got_r == collections.Counter({k: v for k, v in recvs.items() if k[0] == r})
            assert sum(kind == "calc" for kind, *_ in ops) == calcs[r]
            # the chain: every operation but the first requires the one before it
            labels = list(rank["ops"])
            assert rank["requires"] == list(zip(labels[1:], labels[:-1], strict=True))


def _run(ranks: list[dict], L: int, o: int, g: int, G: int) -> list[int]:
    """LogGOPSim's eager rules for a chain per rank; returns each rank's finish time."""
    p = len(ranks)
    cpu, gap_s, gap_r = [0] * p, [0] * p, [0] * p
    queue = [list(r["ops"].values()) for r in ranks]
    pc = [0] * p
    arrivals: dict[tuple[int, int, int], int] = {}
    while any(pc[r] < len(queue[r]) for r in range(p)):
        moved = False
        for r in range(p):
            while pc[r] < len(queue[r]):
                kind, size, peer, tag = queue[r][pc[r]]
                if kind == "send":
                    t = max(cpu[r], gap_s[r])
                    cpu[r], gap_s[r] = t + o, t + g + (size - 1) * G
                    arrivals[(r, peer, tag)] = t + o + L
                elif kind == "recv":
                    if (peer, r, tag) not in arrivals:
                        break
                    a = max(arrivals.pop((peer, r, tag)), gap_r[r], cpu[r])
                    gap_r[r], cpu[r] = a + g + (size - 1) * G, a + o + (size - 1) * G
                else:
                    cpu[r] += size
                pc[r] += 1
                moved = True
        assert moved, "the GOAL chains deadlock"
    return cpu


@pytest.mark.parametrize(
    ("collective", "algorithm", "p"),
    [("allreduce", "ring", 6), ("allreduce", "rabenseifner", 8), ("allreduce", "binomial", 7),
     ("allgather", "bruck", 5), ("alltoall", "direct", 5), ("reduce", "rabenseifner", 6),
     ("broadcast", "scatter_allgather", 6), ("reduce_scatter", "recursive_halving", 8)],
)  # fmt: skip
def test_loggopsims_rules_on_the_goal_reproduce_commsims_loggp(collective, algorithm, p):
    """The export's point: LogGOPSim's event rules on the GOAL give commsim's LogGP time."""
    L, o, g, G, gamma = 2500, 1500, 1000, 6, 2  # LogGOPSim's defaults (ns), gamma ns/byte
    s = commsim.build(collective, algorithm, nranks=p)
    nbytes = s.nbytes_units * 64
    ranks = parse_goal(format_goal(s, nbytes, gamma=gamma))
    model = commsim.models.LogGP(L=L * 1e-9, o=o * 1e-9, g=g * 1e-9, G=G * 1e-9, gamma=gamma * 1e-9)
    want = model.predict(s, nbytes).time * 1e9
    assert max(_run(ranks, L, o, g, G)) == pytest.approx(want, rel=1e-9)


@pytest.mark.skipif(
    not (shutil.which("txt2bin") and shutil.which("LogGOPSim")),
    reason="LogGOPSim's txt2bin and LogGOPSim are not on PATH (docs/interop.md builds them)",
)
@pytest.mark.parametrize(
    ("collective", "algorithm", "p"),
    [("allreduce", "ring", 8), ("allreduce", "rabenseifner", 16), ("allgather", "bruck", 8),
     ("alltoall", "bruck", 8), ("broadcast", "chain", 8), ("reduce", "binomial", 7)],
)  # fmt: skip
def test_loggopsim_itself_agrees_with_commsims_loggp(tmp_path, collective, algorithm, p):
    s = commsim.build(collective, algorithm, nranks=p)
    nbytes = s.nbytes_units * 4096
    goal, binary = tmp_path / "x.goal", tmp_path / "x.bin"
    commsim.save(s, goal, nbytes=nbytes, gamma=1.0)
    subprocess.run(["txt2bin", "-i", goal, "-o", binary], check=True, capture_output=True)
    run = ["LogGOPSim", "-f", binary, "-L", "2500", "-o", "1500", "-g", "1000", "-G", "6",
           "-S", str(2**30), "-b"]  # fmt: skip
    out = subprocess.run(run, check=True, capture_output=True, text=True).stdout
    got = int(re.search(r"Maximum finishing time at host \d+: (\d+)", out).group(1))
    model = commsim.models.LogGP(L=2500e-9, o=1500e-9, g=1000e-9, G=6e-9, gamma=1e-9)
    assert got == pytest.approx(model.predict(s, nbytes).time * 1e9, abs=1)


def test_counts_and_size_strings():
    s = commsim.build("allreduce", "ring", nranks=4)
    prog = goal_program(s, "1KiB")
    assert (prog.nsends, prog.nrecvs, prog.ncalcs) == (24, 24, 12)
    assert prog.nrequires == prog.nsends + prog.nrecvs + prog.ncalcs - 4
    assert "send 256b to 1 tag 0" in prog.text


@pytest.mark.parametrize(
    ("nbytes", "gamma", "error"),
    [(0, 0.0, ParameterError), ("lots", 0.0, CommsimError), (8, -1.0, ParameterError),
     (1.5, 0.0, ParameterError)],
)  # fmt: skip
def test_bad_arguments(nbytes, gamma, error):
    s = commsim.build("allreduce", "ring", nranks=4)
    with pytest.raises(error):
        format_goal(s, nbytes, gamma=gamma)


def test_tiny_sizes_send_at_least_one_byte():
    s = commsim.build("allgather", "ring", nranks=8)
    ranks = parse_goal(format_goal(s, 1))
    assert {op[1] for rank in ranks for op in rank["ops"].values()} == {1}
    assert np.all([len(rank["ops"]) == 2 * 7 for rank in ranks])
