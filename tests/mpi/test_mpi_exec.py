"""The MPI backend against the reference interpreter, at p = the MPI world size.

Run as ``mpirun -n 2 python -m pytest tests/mpi -q`` (and ``-n 4``); plain ``pytest`` runs the
same file at world size 1. Two kinds of tests:

* **Replays** (no MPI needed): every rank's program from :func:`commsim.exec.mpi.plan` for
  every registry row at p = 1..9, and for random schedules, is executed by a small simulator in
  which a send completes only when its receiver has posted the matching receive (MPI's
  synchronous mode, the worst case for deadlocks). It must finish and leave buffers identical to
  the reference interpreter's: the lowering's order is deadlock-free and its data movement right.
  Multi-channel schedules (IR rule 6) are replayed round by round (mpi4jax) and wave by wave
  (the host executor's non-blocking ``Isend`` / ``Irecv`` of a wave, then ``Waitall``).
* **Real runs** under MPI: every registry row, the MPI library's native collectives, random
  schedules; and a schedule whose p differs from the world size is refused.
* **The host executor** (``--backend mpi4py``, :class:`commsim.exec.mpi.HostMpiBackend`): the
  same plans run by mpi4py on numpy buffers, against the reference and the interpreter.
* **Bench in place** (under ``mpirun`` only): :func:`commsim.bench.measure_in_place` on every rank,
  the MPI timer's slowest-rank reduction and rank 0's verdict, and ``commsim run --backend mpi``
  printing on rank 0.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim import Schedule, Step, spec
from commsim.algorithms import REGISTRY
from commsim.bench import BenchRequest, MpiTimer, measure_in_place, under_mpirun
from commsim.errors import CommsimError
from commsim.exec import check_outputs, execute, interpret, layout, random_inputs
from commsim.exec.mpi import RankPlan, plan

pytestmark = pytest.mark.mpi

ROWS = sorted(REGISTRY)

_spec = importlib.util.spec_from_file_location(
    "channel_cases", Path(__file__).parents[1] / "channel_cases.py"
)
assert _spec is not None and _spec.loader is not None
channel_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(channel_cases)


def random_schedule(seed: int, p: int, units=(1, 2, 1, 3, 1, 1), nsteps: int = 4) -> Schedule:
    """Random legal steps: any transfers (remote or local, reduce or not, several per message),
    but no two writes to one place in a step unless both reduce."""
    rng = np.random.default_rng(seed)
    nslots = len(units)
    steps = []
    for _ in range(nsteps):
        written: dict[tuple[int, int], bool] = {}
        rows = []
        for _ in range(int(rng.integers(1, 4 * p + 1))):
            src, dst = (int(x) for x in rng.integers(p, size=2))
            count = int(rng.integers(1, 3))
            a = int(rng.integers(0, nslots - count + 1))
            size = sum(units[a : a + count])
            fits = [b for b in range(nslots - count + 1) if sum(units[b : b + count]) == size]
            b = int(rng.choice(fits))
            red = bool(rng.integers(2))
            cells = [(dst, b + i) for i in range(count)]
            if any(c in written and not (red and written[c]) for c in cells):
                continue
            written.update(dict.fromkeys(cells, red))
            rows.append((src, dst, a, b, count, red))
        steps.append(Step.make(*(np.array(c) for c in zip(*rows, strict=True))))
    return Schedule.from_steps(
        steps, collective="allreduce", nranks=p, slot_units=list(units), algorithm="random"
    )


# ---------------------------------------------------------------------------------------------
# replays: the rank programs under rendezvous semantics (no MPI)


def replay(plans: list[RankPlan], buffers: np.ndarray) -> np.ndarray:
    """Run every rank's program; a send completes only when its receive is posted."""
    p = len(plans)
    ops = [
        [(si, k) for si, st in enumerate(pl.steps) for k in range(len(st.rounds))] for pl in plans
    ]
    step = [0] * p  # the step each rank is in
    pos = [0] * p  # index into ops[r] of its current round
    old = [buffers[r].copy() for r in range(p)]  # pre-step state of the current step
    pending: list[list] = [[] for _ in range(p)]  # (segment, values) to write at the step's end
    sent = [False] * p
    got = [False] * p

    def current(r):
        if pos[r] < len(ops[r]) and ops[r][pos[r]][0] == step[r]:
            si, k = ops[r][pos[r]]
            return plans[r].steps[si], plans[r].steps[si].rounds[k]
        return None

    def finish_steps(r) -> bool:
        moved = False
        while step[r] < len(plans[r].steps) and current(r) is None:
            st = plans[r].steps[step[r]]
            writes = pending[r] + [(s, old[r][s.src : s.src + s.length]) for s in st.local]
            for s, v in writes:
                if s.reduce:
                    buffers[r, s.dst : s.dst + s.length] += v
                else:
                    buffers[r, s.dst : s.dst + s.length] = v
            pending[r] = []
            step[r] += 1
            old[r] = buffers[r].copy()
            moved = True
        return moved

    progress = True
    while progress:
        progress = False
        for r in range(p):
            progress |= finish_steps(r)
            cur = current(r)
            if cur is None:
                continue
            st, rnd = cur
            if rnd.send is not None and not sent[r]:
                d = rnd.send.peer
                other = current(d)
                # matched only by the receive of this very message: d in the same round, its
                # receive not yet done (r may already be a step ahead, sending d its next message)
                if (
                    other is not None
                    and not got[d]
                    and other[1].recv is not None
                    and other[1].recv.peer == r
                ):
                    ost, orn = other
                    assert (ost.tag, orn.recv.size) == (st.tag, rnd.send.size)
                    payload = np.concatenate(
                        [old[r][s.src : s.src + s.length] for s in rnd.send.segments]
                    )
                    at = 0
                    for s in orn.recv.segments:
                        pending[d].append((s, payload[at : at + s.length]))
                        at += s.length
                    sent[r] = got[d] = True
                    progress = True
            if (rnd.send is None or sent[r]) and (rnd.recv is None or got[r]):
                pos[r] += 1
                sent[r] = got[r] = False
                progress = True
    stuck = [r for r in range(p) if step[r] < len(plans[r].steps)]
    assert not stuck, f"deadlock: ranks {stuck} stuck in steps {[step[r] for r in stuck]}"
    return buffers


def replay_matches_interpreter(s: Schedule, per_unit: int = 2) -> None:
    lay = layout(s, per_unit * s.nbytes_units)
    rng = np.random.default_rng(s.nranks)
    buf = rng.integers(-50, 50, size=(s.nranks, lay.nelems)).astype(np.int64)
    want = interpret(s, lay, buf.copy())
    np.testing.assert_array_equal(replay(plan(s, lay), buf.copy()), want)


@pytest.mark.parametrize("row", ROWS, ids="/".join)
def test_replay_of_every_row_is_deadlock_free_and_exact(row):
    for p in range(1, 10):
        root = {"root": p - 1} if spec(row[0]).rooted else {}
        replay_matches_interpreter(commsim.build(*row, nranks=p, **root))


@pytest.mark.parametrize("seed", range(12))
def test_replay_of_random_schedules(seed):
    replay_matches_interpreter(random_schedule(seed, p=2 + seed % 6), per_unit=1 + seed % 3)


def replay_waves(plans: list[RankPlan], buffers: np.ndarray) -> np.ndarray:
    """Run every rank's program the host executor's way: per step, the rank's rounds of one wave
    are posted together (non-blocking receives and sends), and it moves on when all of them are
    matched. A send matches the earliest receive its peer has posted for it (same source and
    tag, MPI's order) and completes only then (rendezvous); a size mismatch is a failure."""
    from commsim.exec.mpi._host import _waves

    p = len(plans)
    units = [[(si, w) for si, st in enumerate(pl.steps) for w in _waves(st.rounds)] for pl in plans]
    step = [0] * p
    pos = [0] * p
    old = [buffers[r].copy() for r in range(p)]
    pending: list[list] = [[] for _ in range(p)]
    sends: list[list] = [[] for _ in range(p)]  # (peer, tag, message) posted, not yet matched
    recvs: list[list] = [[] for _ in range(p)]
    posted = [False] * p

    def finish_steps(r) -> bool:
        moved = False
        while step[r] < len(plans[r].steps) and not (
            pos[r] < len(units[r]) and units[r][pos[r]][0] == step[r]
        ):
            st = plans[r].steps[step[r]]
            for s, v in pending[r] + [(s, old[r][s.src : s.src + s.length]) for s in st.local]:
                if s.reduce:
                    buffers[r, s.dst : s.dst + s.length] += v
                else:
                    buffers[r, s.dst : s.dst + s.length] = v
            pending[r] = []
            step[r] += 1
            old[r] = buffers[r].copy()
            moved = True
        return moved

    progress = True
    while progress:
        progress = False
        for r in range(p):
            progress |= finish_steps(r)
            if pos[r] >= len(units[r]):
                continue
            si, wave = units[r][pos[r]]
            if not posted[r]:
                tag = plans[r].steps[si].tag
                sends[r] = [(x.send.peer, tag, x.send) for x in wave if x.send is not None]
                recvs[r] = [(x.recv.peer, tag, x.recv) for x in wave if x.recv is not None]
                posted[r] = progress = True
            for k, (d, tag, msg) in enumerate(sends[r]):
                if any(e[0] == d and e[1] == tag for e in sends[r][:k]):
                    continue  # an earlier send to d with this tag goes first (MPI's order)
                match = [i for i, e in enumerate(recvs[d]) if e[0] == r and e[1] == tag]
                if not match:
                    continue
                _, _, want = recvs[d].pop(match[0])
                assert want.size == msg.size, f"rank {r} -> {d}: sizes {msg.size} != {want.size}"
                payload = np.concatenate([old[r][s.src : s.src + s.length] for s in msg.segments])
                at = 0
                for s in want.segments:
                    pending[d].append((s, payload[at : at + s.length]))
                    at += s.length
                sends[r][k] = (-1, -1, None)
                progress = True
            sends[r] = [e for e in sends[r] if e[2] is not None]
            if posted[r] and not sends[r] and not recvs[r]:
                pos[r] += 1
                posted[r] = False
                progress = True
    stuck = [r for r in range(p) if step[r] < len(plans[r].steps)]
    assert not stuck, f"deadlock: ranks {stuck} stuck in steps {[step[r] for r in stuck]}"
    return buffers


def _channel_ids(p: int) -> list[str]:
    return [name for name, _ in channel_cases.cases(p)]


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
def test_replay_of_multichannel_schedules_round_by_round_and_wave_by_wave(p):
    for _, s in channel_cases.cases(p):
        lay = layout(s, 2 * s.nbytes_units)
        buf = np.random.default_rng(p).integers(-50, 50, size=(p, lay.nelems)).astype(np.int64)
        want = interpret(s, lay, buf.copy())
        plans = plan(s, lay)
        np.testing.assert_array_equal(replay(plans, buf.copy()), want)
        np.testing.assert_array_equal(replay_waves(plans, buf.copy()), want)


@pytest.mark.parametrize("seed", range(6))
def test_replay_of_random_schedules_in_parallel(seed):
    """Two random schedules side by side (``parallel``): many channels, pairs repeated across
    channels, unequal messages, local transfers; replayed both ways."""
    from commsim.algorithms._parallel import parallel

    p = 3 + seed % 4
    units = (1, 1, 1, 1, 1)  # parallel cuts a transfer into one per slot: equal slots on both sides
    a = random_schedule(300 + seed, p, units)
    s = parallel(a, random_schedule(400 + seed, p, units, nsteps=2 + seed))
    lay = layout(s, (1 + seed % 2) * s.nbytes_units)
    buf = np.random.default_rng(seed).integers(-50, 50, size=(p, lay.nelems)).astype(np.int64)
    want = interpret(s, lay, buf.copy())
    plans = plan(s, lay)
    assert s.nchannels == 2
    np.testing.assert_array_equal(replay(plans, buf.copy()), want)
    np.testing.assert_array_equal(replay_waves(plans, buf.copy()), want)


def test_two_channels_between_one_pair_are_two_messages_in_one_wave():
    s = channel_cases.cases(4)[0][1]  # allreduce/channels(ring,2)
    [pl] = plan(s, layout(s, 2 * s.nbytes_units), ranks=[0])
    st = pl.steps[0]
    assert [(r.send.peer, r.recv.peer, r.channel, r.wave) for r in st.rounds] == [
        (1, 3, 0, 0),
        (1, 3, 1, 0),
    ]


def test_the_wave_replay_catches_a_deadlock_and_a_size_mismatch():
    from commsim.exec.mpi._plan import Message, Round, Segment, StepPlan

    one, two = (Segment(0, 1, 0, False),), (Segment(0, 2, 0, False),)

    def prog(r: int, waves: tuple[int, int], segs) -> RankPlan:
        rounds = (Round(Message(1 - r, one), None, 0, waves[0]),
                  Round(None, Message(1 - r, segs), 1, waves[1]))  # fmt: skip
        return RankPlan(r, 2, 2, (StepPlan(0, rounds, ()),))

    buf = np.zeros((2, 2), dtype=np.int64)
    with pytest.raises(AssertionError, match="deadlock"):  # send first, receive a wave later
        replay_waves([prog(0, (0, 1), one), prog(1, (0, 1), one)], buf)
    replay_waves([prog(0, (0, 0), one), prog(1, (0, 0), one)], buf)  # one wave: no deadlock
    with pytest.raises(AssertionError, match="sizes"):
        replay_waves([prog(0, (0, 0), two), prog(1, (0, 0), two)], buf)


def test_plan_orders_rounds_like_the_shared_matchings():
    s = (
        commsim.build("allgather", "direct", nranks=4)
        if ("allgather", "direct") in REGISTRY
        else None
    )
    if s is None:
        pytest.skip("no allgather/direct in the registry")
    plans = plan(s, layout(s, 4 * s.nbytes_units))
    for pl in plans:
        [st] = [st for st in pl.steps if st.rounds]
        assert len(st.rounds) == 3  # p - 1 messages out and in, one of each per round
        assert all(r.send is not None and r.recv is not None for r in st.rounds)
        assert {r.send.peer for r in st.rounds} == set(range(4)) - {pl.rank}


# ---------------------------------------------------------------------------------------------
# real runs at p = world size


@pytest.mark.parametrize("row", ROWS, ids="/".join)
def test_every_row_matches_the_reference(backend, world, row):
    root = {"root": world - 1} if spec(row[0]).rooted else {}
    s = commsim.build(*row, nranks=world, **root)
    lay = layout(s, 3 * s.nbytes_units)
    inputs = random_inputs(lay, np.float32, seed=world)
    out = execute(s, inputs, backend)  # raises, naming rank and element, if it differs
    assert out.dtype == np.float32


@pytest.mark.parametrize("executor", ["mpi", "mpi4py"])
def test_multichannel_schedules_match_the_reference(backend, world, executor):
    """``channels(., 2)`` and ``parallel(., .)`` of every collective (IR rule 6): under mpi4jax
    the channels take turns, under the host executor a wave's rounds go out at once."""
    from commsim.exec.mpi import HostMpiBackend

    be = backend if executor == "mpi" else HostMpiBackend(backend.comm)
    for _, s in channel_cases.cases(world):
        lay = layout(s, 2 * s.nbytes_units)
        buf = np.random.default_rng(world).integers(-50, 50, (world, lay.nelems)).astype(np.int32)
        c = be.compile(s, lay, np.int32)  # exact, scratch slots included
        np.testing.assert_array_equal(c.get(c.run(c.put(buf))), interpret(s, lay, buf.copy()))


@pytest.mark.parametrize("collective", sorted({c for c, _ in ROWS}))
def test_native_collective_matches_the_reference(backend, world, collective):
    name = next(n for c, n in ROWS if c == collective)
    s = commsim.build(collective, name, nranks=world)
    lay = layout(s, 2 * s.nbytes_units)
    for dtype in (np.int32, np.float32):
        inputs = random_inputs(lay, dtype, seed=1)
        nat = backend.native(s, lay, dtype)
        out = nat.get(nat.run(nat.put(lay.pack(inputs))))
        check_outputs(s, lay, inputs, lay.unpack(out))


@pytest.mark.parametrize("seed", range(3))
def test_random_schedules_match_the_interpreter(backend, world, seed):
    s = random_schedule(100 + seed, p=world)
    lay = layout(s, 2 * s.nbytes_units)
    buf = np.random.default_rng(seed).integers(-50, 50, size=(world, lay.nelems)).astype(np.int32)
    want = interpret(s, lay, buf.copy())
    c = backend.compile(s, lay, np.int32)
    np.testing.assert_array_equal(c.get(c.run(c.put(buf))), want)


def test_compiled_once_per_schedule_and_size(backend, world):
    s = commsim.build("allreduce", "ring", nranks=world)
    lay = layout(s, 4 * s.nbytes_units)
    assert backend.compile(s, lay, np.float32) is backend.compile(s, lay, np.float32)


def test_a_schedule_for_another_p_is_refused(backend, world):
    s = commsim.build("allreduce", "ring", nranks=world + 1)
    lay = layout(s, s.nbytes_units)
    with pytest.raises(CommsimError, match=rf"p={world + 1} ranks but MPI runs {world} processes"):
        backend.compile(s, lay, np.float32)
    with pytest.raises(CommsimError, match=rf"p={world + 1} ranks but MPI runs {world}"):
        backend.native(s, lay, np.float32)


def test_unsupported_dtype_is_refused(backend, world):
    s = commsim.build("allreduce", "ring", nranks=world)
    with pytest.raises(CommsimError, match="float16"):
        backend.compile(s, layout(s, s.nbytes_units), np.float16)


# ---------------------------------------------------------------------------------------------
# bench: the MPI timer, and measuring in place when the user started mpirun


def test_the_mpi_timer_keeps_the_slowest_rank_per_run(backend, world):
    timer = MpiTimer(backend.comm)
    r = backend.rank
    mine = np.array([[r + 1.0, 10.0 - r, 0.5], [0.0, 2.0 * r, 7.0]])
    slowest = timer.slowest(mine)
    want = np.array([[world, 10.0, 0.5], [0.0, 2.0 * (world - 1), 7.0]])
    np.testing.assert_array_equal(slowest, want)
    np.testing.assert_array_equal(mine[0, :2], [r + 1.0, 10.0 - r])  # the input is untouched


def test_the_check_verdict_is_rank_0s_on_every_rank(backend, world):
    timer = MpiTimer(backend.comm)
    assert timer.verdict(lambda: f"found by rank {backend.rank}") == "found by rank 0"
    out, t = timer.time(lambda b: b + 1, 1)  # after a barrier
    assert out == 2 and t >= 0


@pytest.fixture
def in_place(backend):
    if not under_mpirun():
        pytest.skip("measure_in_place runs only under mpirun (plain pytest: world size 1)")


def test_measure_in_place_gives_every_rank_the_same_results(backend, world, in_place):
    schedules = [commsim.build("allreduce", a, nranks=world) for a in ("ring", "direct")
                 if ("allreduce", a) in REGISTRY]  # fmt: skip
    request = BenchRequest((4096, 8192), iters=2, warmup=1)
    rank, results = measure_in_place(schedules, request)
    assert rank == backend.rank
    assert [(m.algorithm, m.size) for m in results] == [
        (s.algorithm, n) for s in schedules for n in request.sizes
    ]
    assert all((m.nranks, m.check, m.native) == (world, "ok", "MPI_Allreduce") for m in results)
    everyone = backend.comm.allgather([m.to_dict() for m in results])
    assert all(r == everyone[0] for r in everyone)


def test_measure_in_place_refuses_another_p(backend, world, in_place):
    s = commsim.build("allreduce", "ring", nranks=world + 1)
    with pytest.raises(CommsimError, match=rf"nranks={world + 1} .* started {world} processes"):
        measure_in_place([s], BenchRequest((4096,)))


def test_cli_run_in_place_runs_every_rank_and_prints_on_rank_0(backend, world, in_place, capsys):
    from commsim import cli

    argv = ["run", "-c", "allreduce", "-a", "ring", "-p", str(world), "--backend", "mpi",
            "-s", "4KiB", "--iters", "2", "--warmup", "1", "--json", "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    if backend.rank == 0:
        doc = json.loads(out)
        [m] = doc["measurements"]
        assert (m["nranks"], m["check"], m["native"]) == (world, "ok", "MPI_Allreduce")
    else:
        assert out == ""


def test_the_replay_catches_a_deadlock():
    """Two ranks that both send first and receive in a later round block forever."""
    from commsim.exec.mpi._plan import Message, Round, Segment, StepPlan

    seg = (Segment(0, 1, 0, False),)

    def prog(r: int) -> RankPlan:
        rounds = (Round(Message(1 - r, seg), None), Round(None, Message(1 - r, seg)))
        return RankPlan(r, 2, 1, (StepPlan(0, rounds, ()),))

    with pytest.raises(AssertionError, match="deadlock"):
        replay([prog(0), prog(1)], np.zeros((2, 1), dtype=np.int64))


# ---------------------------------------------------------------------------------------------
# the host executor (--backend mpi4py): the same plans by mpi4py on numpy buffers. Random
# schedules exercise what the allreduce rows do not: several segments per message (packed sends,
# scattered receives), local transfers, and a step that reads a range another of its rounds
# overwrites (the receive must not land in place there).


@pytest.fixture(scope="module")
def host(backend):
    from commsim.exec.mpi import HostMpiBackend

    return HostMpiBackend(backend.comm)


@pytest.mark.parametrize("row", ROWS, ids="/".join)
def test_host_executor_every_row_matches_the_reference(host, world, row):
    root = {"root": world - 1} if spec(row[0]).rooted else {}
    s = commsim.build(*row, nranks=world, **root)
    lay = layout(s, 3 * s.nbytes_units)
    out = execute(s, random_inputs(lay, np.float32, seed=world), host)
    assert out.dtype == np.float32


@pytest.mark.parametrize("seed", range(6))
def test_host_executor_random_schedules_match_the_interpreter(host, world, seed):
    s = random_schedule(200 + seed, p=world)
    lay = layout(s, 2 * s.nbytes_units)
    buf = np.random.default_rng(seed).integers(-50, 50, size=(world, lay.nelems)).astype(np.int32)
    want = interpret(s, lay, buf.copy())
    c = host.compile(s, lay, np.int32)
    got = c.get(c.repeat(c.put(buf), 1))
    np.testing.assert_array_equal(got, want)
    again = c.get(c.run(c.put(buf)))  # scratch reused: the second run is the same
    np.testing.assert_array_equal(again, want)


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "alltoall"])
def test_host_executor_baseline_is_the_library_on_numpy(host, world, collective):
    s = commsim.build(collective, "ring" if collective != "alltoall" else "direct", nranks=world)
    lay = layout(s, 2 * s.nbytes_units)
    inputs = random_inputs(lay, np.int32, seed=3)
    nat = host.native(s, lay, np.int32)
    check_outputs(s, lay, inputs, lay.unpack(nat.get(nat.run(nat.put(lay.pack(inputs))))))
    assert host.native_name(collective).endswith("(mpi4py)")


@pytest.mark.skipif(not under_mpirun(), reason="measures on the ranks of a running mpirun")
def test_measure_in_place_on_the_host_executor(world):
    ring = commsim.build("allreduce", "ring", nranks=world)
    rd = commsim.build("allreduce", "recursive_doubling", nranks=world)
    req = BenchRequest(sizes=(4096, 65536), iters=3, warmup=1)
    _, ms = measure_in_place([ring, rd], req, backend="mpi4py")
    assert [(m.algorithm, m.nbytes) for m in ms] == [
        ("ring", 4096), ("ring", 65536), ("recursive_doubling", 4096),
        ("recursive_doubling", 65536),
    ]  # fmt: skip
    assert all(m.backend == "mpi4py" and m.check == "ok" and m.time_s > 0 for m in ms)
    assert ms[0].native == "MPI_Allreduce (mpi4py)" and ms[0].host_native is None


def test_the_host_executor_runs_on_page_aligned_buffers(backend, world):
    """Where a buffer starts changed a step's time 2x (commsim.exec._aligned): the mpi4py
    executor's buffer, and the library's collective it is compared with, start on a page."""
    from commsim.exec._aligned import PAGE
    from commsim.exec.mpi import HostMpiBackend

    be = HostMpiBackend(backend.comm)
    s = commsim.build("allreduce", "recursive_doubling", nranks=world)
    lay = layout(s, 4 * s.nbytes_units + 3)  # a size whose rows start off any page
    host = np.arange(world * lay.nelems, dtype=np.float32).reshape(world, lay.nelems)
    buf = be.compile(s, lay, np.float32).put(host)
    assert buf.ctypes.data % PAGE == 0
    native = backend.host_native(s, lay, np.float32)
    assert native is not None and native.put(host).ctypes.data % PAGE == 0
