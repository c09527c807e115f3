"""The MPI executor's chunked buffers, back-to-back runs and idle run, on every rank of
``mpirun -n N python -m pytest tests/mpi`` (and as plain pytest: world size 1)."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.algorithms import REGISTRY
from commsim.bench import MpiTimer
from commsim.bench._overhead import call_samples
from commsim.exec import interpret, layout
from commsim.exec.mpi import plan

ALLREDUCES = sorted(n for c, n in REGISTRY if c == "allreduce")


@pytest.mark.parametrize("name", ALLREDUCES)
def test_every_range_a_plan_touches_is_whole_chunks(name):
    from commsim.exec.mpi._program import cuts

    s = commsim.build("allreduce", name, nranks=4)
    for pl in plan(s, layout(s, 5 * s.nbytes_units)):
        ends = set(cuts(pl).tolist())
        assert {0, pl.nelems} <= ends
        for st in pl.steps:
            segs = [(g.src, g.length) for r in st.rounds if r.send for g in r.send.segments]
            segs += [(g.dst, g.length) for r in st.rounds if r.recv for g in r.recv.segments]
            segs += [(a, g.length) for g in st.local for a in (g.src, g.dst)]
            for a, n in segs:
                assert a in ends and a + n in ends, (pl.rank, a, n)


@pytest.mark.parametrize("name", ["ring", "rabenseifner", "recursive_doubling"])
def test_repeat_is_k_chained_runs(backend, world, name):
    if ("allreduce", name) not in REGISTRY:
        pytest.skip(f"no allreduce/{name}")
    s = commsim.build("allreduce", name, nranks=world)
    lay = layout(s, 3 * s.nbytes_units)
    buf = np.random.default_rng(7).integers(-3, 4, size=(world, lay.nelems)).astype(np.int32)
    want = buf.copy()
    for _ in range(3):
        want = interpret(s, lay, want)
    c = backend.compile(s, lay, np.int32)
    np.testing.assert_array_equal(c.get(c.repeat(c.put(buf), 3)), want)
    nat = backend.native(s, lay, np.int32)
    got = nat.get(nat.repeat(nat.put(buf), 3))
    np.testing.assert_array_equal(got, np.broadcast_to(buf.sum(0) * world**2, got.shape))


def test_the_idle_run_moves_nothing_and_is_timed_like_a_schedule(backend, world):
    samples = call_samples(backend, world, iters=5, warmup=3, timer=MpiTimer(backend.comm))
    assert samples.kind == "call" and samples.times.shape == (1, 5)
    assert np.all(samples.times > 0)
    # every rank returns the slowest rank's times
    gathered = backend.comm.allgather(samples.times.tolist())
    assert all(g == gathered[0] for g in gathered)
    with pytest.raises(commsim.CommsimError, match=f"p={world + 1} ranks but MPI runs {world}"):
        backend.idle(world + 1)
