"""Measured traces on the MPI backend, at p = the MPI world size.

Run as ``mpirun -n 2 python -m pytest tests/mpi/test_mpi_trace.py`` (and ``-n 4``); plain
``pytest`` runs it at world size 1. The stepped program (one jitted function per step) computes
what the reference interpreter computes; a traced run (:func:`commsim.bench.trace_in_place`)
gives rank 0 a trace with one track per rank, a slice per (rank, step) that sends or receives,
in step order on each rank, and an arrow per message; the other ranks get ``None``.
"""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim import spec
from commsim._messages import messages
from commsim.algorithms import REGISTRY
from commsim.bench import BenchRequest, trace_in_place
from commsim.exec import check_outputs, layout, random_inputs

pytestmark = pytest.mark.mpi

_spec = importlib.util.spec_from_file_location(
    "trace_checks", Path(__file__).parents[1] / "trace_checks.py"
)
assert _spec is not None and _spec.loader is not None
checks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checks)

ROWS = [
    row
    for row in [
        ("allreduce", "ring"),
        ("allreduce", "rabenseifner"),
        ("broadcast", "binomial"),
        ("reduce_scatter", "ring"),
        ("allgather", "ring"),
        ("alltoall", "pairwise"),
    ]
    if row in REGISTRY
]


def build(collective: str, name: str, p: int) -> commsim.Schedule:
    return commsim.build(
        collective, name, nranks=p, **({"root": p - 1} if spec(collective).rooted else {})
    )


@pytest.mark.parametrize(("collective", "name"), ROWS)
def test_the_stepped_program_computes_the_collective(backend, world, collective, name):
    s = build(collective, name, world)
    lay = layout(s, 96 * s.nbytes_units)
    inputs = random_inputs(lay, "int32", seed=3)
    program = backend.compile_steps(s, lay, "int32")
    buf = program.put(lay.pack(inputs))
    ran = []
    for i, run in program.steps:
        buf = run(buf)
        ran.append(i)
    assert ran == sorted(ran)
    check_outputs(s, lay, inputs, lay.unpack(np.asarray(program.get(buf))))


@pytest.mark.parametrize(("collective", "name"), ROWS)
def test_a_traced_run_has_a_slice_per_rank_and_step_with_traffic(backend, world, collective, name):
    s = build(collective, name, world)
    rank, doc = trace_in_place(s, BenchRequest((64 * 1024,)))
    assert rank == backend.rank
    if rank != 0:
        assert doc is None
        return
    tracks = checks.check_trace(doc)
    assert set(checks.thread_names(doc).values()) == {f"rank {r}" for r in range(world)}
    busy: set[tuple[int, int]] = set()  # (rank, step) pairs with a send or a receive
    for i, st in enumerate(s.steps()):
        m = messages(st, s)
        busy |= {(r, i) for r in np.union1d(m.src, m.dst).tolist()}
    slices = {(e["tid"], e["args"]["step"]): e for t in tracks.values() for e in t}
    assert set(slices) == busy and sum(len(t) for t in tracks.values()) == len(busy)
    for r in range(world):  # in step order, one after the other, on each rank
        mine = [slices[k] for k in sorted(k for k in slices if k[0] == r)]
        for a, b in itertools.pairwise(mine):
            assert b["ts"] >= a["ts"] + a["dur"]
    assert sum(e["ph"] == "s" for e in doc["traceEvents"]) == checks.count_messages(s)
    other = doc["otherData"]
    assert (other["backend"], other["algorithm"]) == ("mpi", name)
    assert "step-timed" in other["note"]
    assert other["clock"].startswith("one host")  # the tests' ranks share one machine


def test_a_multichannel_trace_has_an_arrow_per_message_and_channel(backend, world):
    """``channels(ring, 2)``: two messages between each pair per step (IR rule 6), two arrows."""
    from commsim.algorithms._parallel import channels

    s = channels(build("allreduce", "ring", world), 2)
    rank, doc = trace_in_place(s, BenchRequest((16 * 1024,)))
    if rank != 0:
        assert doc is None
        return
    checks.check_trace(doc)
    arrows = sum(e["ph"] == "s" for e in doc["traceEvents"])
    assert arrows == checks.count_messages(s) == 2 * world * (world > 1) * s.nsteps
