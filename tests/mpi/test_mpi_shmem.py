"""The one-sided backend (``--backend shmem``) against the reference interpreter.

Run as ``mpirun -n 2 python -m pytest tests/mpi/test_mpi_shmem.py`` (and ``-n 4``); plain
``pytest`` runs it at world size 1 and adds the launcher's fault tests. Three kinds of tests:

* **Replays** (no MPI): every rank's program from :func:`commsim.exec.shmem.plan`, for every
  registry row at p = 1..8, multi-channel schedules and random ones, executed by a simulator
  that interleaves the ranks adversarially (a seeded random rank moves, one put or one wait at a
  time) over three runs of one program. It must finish, leave buffers identical to the
  interpreter's applied three times, and no put may overwrite staged data its target has not
  read (what the credits are for).
* **Real runs** under MPI: every registry row and every multi-channel case equals the reference;
  back-to-back runs reuse the staging (credits); a schedule for another p is refused; a signal
  wait past its timeout ends in one line.
* **Faults** through the launcher (plain pytest only): a hung rank ends in mpirun's timeout, a
  dead rank is named with its exit code; neither hangs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim import Schedule, spec
from commsim.algorithms import REGISTRY
from commsim.bench import BenchRequest, under_mpirun
from commsim.errors import CommsimError
from commsim.exec import execute, interpret, layout, random_inputs
from commsim.exec.shmem import RankPuts, plan

pytestmark = pytest.mark.mpi

ROWS = sorted(REGISTRY)
RUNS = 3


def _load(name: str):
    path = Path(__file__).parent / f"{name}.py"
    if not path.exists():
        path = Path(__file__).parents[1] / f"{name}.py"
    sp = importlib.util.spec_from_file_location(f"shmem_{name}", path)
    assert sp is not None and sp.loader is not None
    module = importlib.util.module_from_spec(sp)
    sp.loader.exec_module(module)
    return module


channel_cases = _load("channel_cases")
random_schedule = _load("test_mpi_exec").random_schedule


# ---------------------------------------------------------------------------------------------
# replays: the one-sided programs, ranks interleaved adversarially (no MPI)


def replay(plans: list[RankPuts], buffers: np.ndarray, runs: int = RUNS, seed: int = 0):
    """Run every rank's program ``runs`` times; one put or one wait per move, by a random rank."""
    p = len(plans)
    rng = np.random.default_rng(seed)
    stage = [np.zeros(pl.staging, buffers.dtype) for pl in plans]
    unread = [np.zeros(pl.staging, bool) for pl in plans]
    sig = np.zeros((p, 2 * p), dtype=np.int64)
    run, step, put = [0] * p, [0] * p, [0] * p  # where each rank is; put: its next put

    def move(r: int) -> bool:
        pl = plans[r]
        if run[r] == runs:
            return False
        st = pl.steps[step[r]]
        if put[r] < len(st.puts):
            m = st.puts[put[r]]
            if run[r] and m.peer in st.first and sig[r, p + m.peer] < run[r]:
                return False  # waits for the target's credit
            at = m.offset
            for s in m.segments:
                where = slice(at, at + s.length)
                assert not unread[m.peer][where].any(), f"rank {r} overwrote unread staging"
                stage[m.peer][where] = buffers[r, s.src : s.src + s.length]
                unread[m.peer][where] = True
                at += s.length
            put[r] += 1
            if put[r] == len(st.puts):  # flushed: the signals
                for t, n in st.signals:
                    sig[t, r] += n
            return True
        if any(sig[r, s] < run[r] * pl.per_run[s] + c for s, c in st.waits):
            return False
        local = [(s, buffers[r, s.src : s.src + s.length].copy()) for s in st.local]
        writes = []
        for m in st.arrivals:
            at = m.offset
            for s in m.segments:
                writes.append((s, stage[r][at : at + s.length].copy()))
                at += s.length
        for m in st.arrivals:
            unread[r][m.offset : m.offset + m.size] = False
        for s, v in writes + local:
            if s.reduce:
                buffers[r, s.dst : s.dst + s.length] += v
            else:
                buffers[r, s.dst : s.dst + s.length] = v
        for s in st.credits:
            sig[s, p + r] += 1
        put[r], step[r] = 0, step[r] + 1
        if step[r] == len(pl.steps):
            step[r], run[r] = 0, run[r] + 1
        return True

    for r in range(p):
        if not plans[r].steps:
            run[r] = runs
    while True:
        order = rng.permutation(p)
        if not any(move(int(r)) for r in order):
            break
    stuck = [r for r in range(p) if run[r] < runs]
    assert not stuck, f"deadlock: ranks {stuck} stuck in steps {[step[r] for r in stuck]}"
    return buffers


def replay_matches_interpreter(s: Schedule, per_unit: int = 2, seed: int = 0) -> None:
    lay = layout(s, per_unit * s.nbytes_units)
    rng = np.random.default_rng(s.nranks)
    buf = rng.integers(-50, 50, size=(s.nranks, lay.nelems)).astype(np.int64)
    want = buf.copy()
    for _ in range(RUNS):
        want = interpret(s, lay, want)
    np.testing.assert_array_equal(replay(plan(s, lay), buf.copy(), seed=seed), want)


@pytest.mark.parametrize("row", ROWS, ids="/".join)
def test_replay_of_every_row_is_deadlock_free_and_exact(row):
    for p in range(1, 9):
        root = {"root": p - 1} if spec(row[0]).rooted else {}
        replay_matches_interpreter(commsim.build(*row, nranks=p, **root), seed=p)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
def test_replay_of_multichannel_schedules(p):
    for _, s in channel_cases.cases(p):
        replay_matches_interpreter(s, seed=p)


@pytest.mark.parametrize("seed", range(12))
def test_replay_of_random_schedules(seed):
    s = random_schedule(seed, p=2 + seed % 6)
    replay_matches_interpreter(s, per_unit=1 + seed % 3, seed=seed)


def test_the_replay_catches_a_missing_credit():
    """Without credits a sender that never waits races a run ahead into unread staging."""
    s = commsim.build("broadcast", "binomial", nranks=4)
    lay = layout(s, 2 * s.nbytes_units)
    plans = [
        RankPuts(pl.rank, pl.nranks, pl.nelems, pl.staging, pl.per_run,
                 tuple(st._replace(first=()) for st in pl.steps))
        for pl in plan(s, lay)
    ]  # fmt: skip
    buf = np.zeros((4, lay.nelems), dtype=np.int64)
    with pytest.raises(AssertionError, match="overwrote unread staging"):
        for seed in range(20):
            replay(plans, buf.copy(), seed=seed)


def test_staging_is_symmetric_and_holds_one_run():
    s = commsim.build("allreduce", "ring", nranks=4)
    lay = layout(s, 4 * s.nbytes_units)
    plans = plan(s, lay)
    assert {pl.staging for pl in plans} == {2 * 3 * lay.nelems // 4}  # 2(p-1) quarters
    assert [pl.summary()["puts"] for pl in plans] == [6] * 4
    assert all(st.credits == ((pl.rank - 1) % 4,) for pl in plans for st in pl.steps[-1:])
    assert all(pl.steps[0].first == ((pl.rank + 1) % 4,) for pl in plans)


# ---------------------------------------------------------------------------------------------
# real runs at p = world size


@pytest.fixture(scope="module")
def shmem(backend):
    from commsim.exec.shmem import ShmemBackend

    return ShmemBackend(backend.comm, timeout=60.0)


@pytest.mark.parametrize("row", ROWS, ids="/".join)
def test_every_row_matches_the_reference(shmem, world, row):
    root = {"root": world - 1} if spec(row[0]).rooted else {}
    s = commsim.build(*row, nranks=world, **root)
    lay = layout(s, 3 * s.nbytes_units)
    out = execute(s, random_inputs(lay, np.float32, seed=world), shmem)  # raises if it differs
    assert out.dtype == np.float32


def test_multichannel_schedules_match_the_reference(shmem, world):
    """``channels(., 2)`` and ``parallel(., .)`` of every collective (IR rule 6): a rank's
    channels are all put at once, then it waits."""
    for _, s in channel_cases.cases(world):
        lay = layout(s, 2 * s.nbytes_units)
        buf = np.random.default_rng(world).integers(-50, 50, (world, lay.nelems)).astype(np.int32)
        c = shmem.compile(s, lay, np.int32)
        np.testing.assert_array_equal(c.get(c.run(c.put(buf))), interpret(s, lay, buf.copy()))


@pytest.mark.parametrize("name", ["ring", "recursive_doubling", "direct"])
def test_back_to_back_runs_reuse_the_staging(shmem, world, name):
    if ("allreduce", name) not in REGISTRY:
        pytest.skip(f"no allreduce/{name}")
    s = commsim.build("allreduce", name, nranks=world)
    lay = layout(s, 4 * s.nbytes_units)
    buf = np.random.default_rng(2).integers(-3, 3, size=(world, lay.nelems)).astype(np.int64)
    want = buf.copy()
    for _ in range(4):
        want = interpret(s, lay, want)
    c = shmem.compile(s, lay, np.int64)
    np.testing.assert_array_equal(c.get(c.repeat(c.put(buf), 4)), want)


@pytest.mark.parametrize("seed", range(3))
def test_random_schedules_match_the_interpreter(shmem, world, seed):
    s = random_schedule(500 + seed, p=world)
    lay = layout(s, 2 * s.nbytes_units)
    buf = np.random.default_rng(seed).integers(-50, 50, size=(world, lay.nelems)).astype(np.int32)
    c = shmem.compile(s, lay, np.int32)
    np.testing.assert_array_equal(c.get(c.run(c.put(buf))), interpret(s, lay, buf.copy()))


def test_a_schedule_for_another_p_is_refused(shmem, world):
    s = commsim.build("allreduce", "ring", nranks=world + 1)
    with pytest.raises(CommsimError, match=rf"p={world + 1} ranks but MPI runs {world} processes"):
        shmem.compile(s, layout(s, s.nbytes_units), np.float32)


def test_a_signal_wait_past_its_timeout_is_one_line(shmem, world):
    from commsim.exec.shmem._program import Signals

    sig = Signals(shmem.comm, timeout=0.2)  # nobody raises it
    with pytest.raises(CommsimError, match=r"waited 0.2 s in step 3 for the signal of rank 0"):
        sig.wait(np.array([0]), np.array([1]), 3, "the signal")


def test_the_baseline_is_the_library_on_numpy(shmem, world):
    from commsim.exec import check_outputs

    s = commsim.build("allreduce", "ring", nranks=world)
    lay = layout(s, 2 * s.nbytes_units)
    inputs = random_inputs(lay, np.int32, seed=3)
    nat = shmem.native(s, lay, np.int32)
    check_outputs(s, lay, inputs, lay.unpack(nat.get(nat.run(nat.put(lay.pack(inputs))))))
    assert shmem.native_name("allreduce") == "MPI_Allreduce (mpi4py)"


# ---------------------------------------------------------------------------------------------
# faults through the launcher (plain pytest: it starts mpirun itself)

launcher_only = pytest.mark.skipif(under_mpirun(), reason="starts its own mpirun")


def _faulty(fault: dict, timeout: float) -> str:
    from commsim.bench import _launch as launcher

    ring = commsim.build("allreduce", "ring", nranks=2)
    request = BenchRequest((4096,), iters=2, warmup=0)
    with pytest.raises(CommsimError) as e:
        launcher.run_worker([ring], request, timeout=timeout, fault=fault, backend="shmem")
    return str(e.value)


@launcher_only
def test_a_hang_ends_in_the_timeout_error(backend):
    msg = _faulty({"rank": 1, "action": "sleep", "at": "timing"}, timeout=8)
    assert msg == "mpirun timed out after 8 s (deadlock or hung rank?)"


@launcher_only
def test_a_dead_rank_is_named_with_its_exit_code(backend):
    # rank 0 polls its signals (or waits in a barrier) when rank 1 dies: it must not hang
    msg = _faulty({"rank": 1, "action": "exit", "code": 3, "at": "timing"}, timeout=60)
    assert msg == "rank 1 exited with code 3"


@launcher_only
def test_measure_mpi_runs_the_one_sided_backend(backend):
    from commsim.bench import measure_mpi

    ring = commsim.build("allreduce", "ring", nranks=2)
    [m] = measure_mpi([ring], BenchRequest((65536,), iters=2, warmup=1), backend="shmem")
    assert (m.backend, m.check, m.native) == ("shmem", "ok", "MPI_Allreduce (mpi4py)")


@launcher_only
def test_cli_run_on_the_one_sided_backend(backend, capsys):
    import json

    from commsim import cli

    argv = ["run", "-c", "allgather", "-a", "ring", "-p", "2", "--backend", "shmem", "-s",
            "4KiB", "--iters", "2", "--warmup", "1", "--json", "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 0
    [m] = json.loads(capsys.readouterr().out)["measurements"]
    assert (m["backend"], m["check"], m["native"]) == ("shmem", "ok", "MPI_Allgather (mpi4py)")


@pytest.mark.parametrize("name", ["ring", "rabenseifner"])
def test_results_equal_the_two_sided_host_executor_bit_for_bit(shmem, world, name):
    """Reductions in the target, in the plan's order: the same float sums as ``mpi4py``."""
    from commsim.exec.mpi import HostMpiBackend

    s = commsim.build("allreduce", name, nranks=world)
    lay = layout(s, 5 * s.nbytes_units)
    buf = np.random.default_rng(7).standard_normal((world, lay.nelems)).astype(np.float32)
    a, b = shmem.compile(s, lay, np.float32), HostMpiBackend(shmem.comm).compile(s, lay, np.float32)
    np.testing.assert_array_equal(a.get(a.run(a.put(buf))), b.get(b.run(b.put(buf))))


@launcher_only
def test_cli_validate_on_the_one_sided_backend(backend, capsys):
    import json

    from commsim import cli

    argv = ["validate", "-c", "allreduce", "-a", "ring", "-p", "2", "-s", "64KiB",
            "--backend", "shmem", "--iters", "2", "--warmup", "1", "--json", "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] == "shmem"
