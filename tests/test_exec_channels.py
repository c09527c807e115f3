"""Multi-channel schedules (IR rule 6) on every single-process backend, and their lowering.

A channel is a port with its own program order, and one message per ``(step, src, dst,
channel)``: two channels between one pair of ranks are two messages, in rounds of their own, in
one **wave** (:func:`commsim.exec._lowering.port_rounds`). The cases (``tests/channel_cases.py``)
are ``channels(s, 2)`` and ``parallel(a, b)`` for every collective; each must equal the reference
interpreter buffer for buffer on the JAX mesh (8 CPU devices) and the CUDA simulator. The MPI
backends run the same cases under ``mpirun`` (``tests/mpi/test_mpi_exec.py``).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim import Schedule, Step
from commsim.exec import execute, interpret, layout, random_inputs
from commsim.exec._lowering import port_rounds, step_messages
from commsim.exec.cuda import plan as cuda_plan
from commsim.exec.jax import plan as jax_plan
from commsim.exec.mpi import plan as mpi_plan

_spec = importlib.util.spec_from_file_location(
    "channel_cases", Path(__file__).with_name("channel_cases.py")
)
assert _spec is not None and _spec.loader is not None
channel_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(channel_cases)

P = 4
CASES = channel_cases.cases(P)
IDS = [name for name, _ in CASES]


def _buffers(s: Schedule, per_unit: int = 2) -> tuple:
    lay = layout(s, per_unit * s.nbytes_units)
    rng = np.random.default_rng(s.nranks)
    buf = rng.integers(-50, 50, size=(s.nranks, lay.nelems)).astype(np.int32)
    return lay, buf, interpret(s, lay, buf.copy())


# -- lowering (numpy only) -----------------------------------------------------------------------
def test_two_channels_between_one_pair_are_two_messages():
    """Before channels were lowered, these two transfers merged into one message."""
    step = Step.make(src=[0, 0, 1], dst=[1, 1, 0], src_slot=[0, 1, 2], dst_slot=[0, 1, 2],
                     channel=[0, 1, 1])  # fmt: skip
    sm = step_messages(step, np.arange(4) * 3, 2)
    msgs = [[(m.src, m.dst, m.channel, m.segments) for m in r] for r in sm.rounds]
    assert msgs == [
        [(0, 1, 0, [(0, 3, 0, False)])],
        [(0, 1, 1, [(3, 3, 3, False)]), (1, 0, 1, [(6, 3, 6, False)])],
    ]
    assert sm.waves == [0, 0]  # the two channels run at once


def test_port_rounds_keep_each_channels_order_and_one_channel_is_matchings():
    r = np.arange(4)
    src = np.r_[r, r, r]
    dst = np.r_[(r + 1) % 4, (r + 2) % 4, (r + 3) % 4]
    rounds, waves = port_rounds(src, dst, np.r_[np.zeros(8, int), np.ones(4, int)], 4)
    # channel 0 has two shift classes (two rounds), channel 1 one: waves 0 and 1
    assert [x.tolist() for x in rounds] == [[0, 1, 2, 3], [8, 9, 10, 11], [4, 5, 6, 7]]
    assert waves == [0, 0, 1]
    one, w = port_rounds(src, dst, np.zeros(12, int), 4)
    assert [x.tolist() for x in one] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert w == [0, 1, 2]


def test_channels_of_a_ring_lower_to_one_ppermute_per_channel_and_step():
    s = channel_cases.cases(8)[0][1]  # allreduce/channels(ring,2)
    pl = jax_plan(s, layout(s, 8 * s.nbytes_units))
    assert pl.nppermutes == 2 * s.nsteps and pl.nmasked == 0
    assert all([r.channel for r in st] == [0, 1] for st in pl.steps)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_and_mpi_plans_agree_round_for_round(case):
    """Every rank's MPI rounds are the JAX plan's ``ppermute`` s it takes part in, in order and
    on the same channels; and the CUDA plan moves what the MPI ranks send and copy."""
    _, s = case
    lay = layout(s, 2 * s.nbytes_units)
    jp = jax_plan(s, lay)
    plans = mpi_plan(s, lay)
    for rp in plans:
        for mine, rounds in zip(rp.steps, jp.steps, strict=True):
            want = []
            for rnd in rounds:
                send = [d for q, d in rnd.perm or () if q == rp.rank]
                recv = [q for q, d in rnd.perm or () if d == rp.rank]
                if send or recv:
                    want.append((send[0] if send else None, recv[0] if recv else None, rnd.channel))
            got = [(r.send.peer if r.send else None, r.recv.peer if r.recv else None, r.channel)
                   for r in mine.rounds]  # fmt: skip
            assert got == want
    sent = sum(rp.summary()["elements_sent"] for rp in plans)
    local = sum(seg.length for rp in plans for st in rp.steps for seg in st.local)
    assert sent + local == sum(sp.moved for sp in cuda_plan(s, lay).steps)


# -- the JAX mesh: every case, and the channels' ppermutes independent -------------------------
@pytest.fixture(scope="module")
def jax_backend():
    jax = pytest.importorskip("jax")
    if len(jax.devices()) < 8:
        pytest.skip(f"needs 8 JAX devices, {len(jax.devices())} visible")
    from commsim.exec.jax import JaxMeshBackend

    return JaxMeshBackend()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_mesh_runs_every_case_exactly(jax_backend, case):
    _, s = case
    lay, buf, want = _buffers(s)
    c = jax_backend.compile(s, lay, np.int32)
    np.testing.assert_array_equal(c.get(c.run(c.put(buf))), want)


@pytest.mark.parametrize("p", [3])
def test_jax_mesh_runs_channels_at_other_p(jax_backend, p):
    s = channel_cases.cases(p)[0][1]
    lay = layout(s, 2 * s.nbytes_units)
    execute(s, random_inputs(lay, np.float32, seed=p), jax_backend)  # raises if it differs


def _ppermute_dependencies(pl, nelems: int) -> list[set[int]]:
    """Per ``ppermute`` of the traced program (in order), the earlier ones it depends on."""
    import jax
    from jax.sharding import PartitionSpec

    from commsim._compat import shard_map
    from commsim.exec.jax._program import mesh, program

    m = mesh(jax.devices()[: pl.nranks], "r")
    f = shard_map(program(pl, "r", lambda: None), mesh=m, in_specs=PartitionSpec("r"),
                  out_specs=PartitionSpec("r"))  # fmt: skip
    outer = jax.make_jaxpr(f)(np.zeros((pl.nranks, nelems), np.int32)).jaxpr
    [inner] = [e.params["jaxpr"] for e in outer.eqns if "jaxpr" in e.params]
    inner = getattr(inner, "jaxpr", inner)
    ancestors: dict = {}  # var -> the ppermutes it depends on
    perms: list[set[int]] = []
    for e in inner.eqns:
        deps = set().union(*(ancestors.get(v, set()) for v in e.invars if not hasattr(v, "val")))
        if e.primitive.name == "ppermute":
            perms.append(deps)
            deps = deps | {len(perms) - 1}
        for v in e.outvars:
            ancestors[v] = deps
    return perms


def test_jax_channels_progress_apart_on_buffers_of_their_own(jax_backend):
    """A channel's ``ppermute`` s depend on its own earlier ones only: nothing orders one
    channel's steps after another's (one buffer per channel, merged at the end)."""
    s = channel_cases.cases(P)[0][1]  # allreduce/channels(ring,2): 2 ppermutes per step
    lay = layout(s, 2 * s.nbytes_units)
    pl = jax_plan(s, lay)
    assert pl.nbuffers == 2 and pl.owner.shape == (P, s.nslots)
    perms = _ppermute_dependencies(pl, lay.nelems)
    assert len(perms) == 2 * s.nsteps  # per step: channel 0's, then channel 1's
    assert perms == [set(range(j % 2, j - 1, 2)) for j in range(len(perms))]


def test_jax_one_buffer_still_sends_a_steps_channels_together(jax_backend, monkeypatch):
    """With one buffer (past ``MAX_BUFFERS`` channels), the ``ppermute`` s of a step depend on
    the earlier steps' only, never on each other: they are in flight together."""
    import commsim.exec.jax._plan as jp

    monkeypatch.setattr(jp, "MAX_BUFFERS", 1)
    s = channel_cases.cases(P)[0][1]
    lay = layout(s, 2 * s.nbytes_units)
    pl = jax_plan(s, lay)
    assert pl.owner is None and pl.nbuffers == 1
    perms = _ppermute_dependencies(pl, lay.nelems)
    assert [len(d) for d in perms] == [2 * (j // 2) for j in range(len(perms))]
    lay, buf, want = _buffers(s)
    c = jax_backend.compile(s, lay, np.int32)  # a fresh schedule's plan: one buffer
    np.testing.assert_array_equal(c.get(c.run(c.put(buf))), want)


def test_a_schedule_that_breaks_the_channel_promise_keeps_one_buffer(jax_backend):
    """Slot 0 of rank 1 is written on channel 0 and read on channel 1 in the next step: wrong
    on separate buffers, so the plan keeps one (and the result is the interpreter's)."""
    steps = [Step.make(src=0, dst=1, src_slot=0, dst_slot=0, channel=0),
             Step.make(src=1, dst=0, src_slot=0, dst_slot=1, channel=1)]  # fmt: skip
    s = Schedule.from_steps(steps, collective="allreduce", nranks=2, nslots=2, nchannels=2)
    lay, buf, want = _buffers(s)
    assert jax_plan(s, lay).owner is None
    c = jax_backend.compile(s, lay, np.int32)
    np.testing.assert_array_equal(c.get(c.run(c.put(buf))), want)


# -- the CUDA simulator ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cuda_backend():
    from commsim.exec.cuda import CudaBackend

    be = CudaBackend()
    why = be.unavailable()
    if why:
        pytest.skip(why)
    return be


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_cuda_runs_every_case_exactly(cuda_backend, case):
    _, s = case
    lay, buf, want = _buffers(s, per_unit=1)
    c = cuda_backend.compile(s, lay, np.int32)
    np.testing.assert_array_equal(c.get(c.run(c.put(buf))), want)


def test_jax_drop_in_runs_two_channels_on_eight_devices(jax_backend):
    """``channels(ring, 2)`` as a drop-in inside the user's ``shard_map`` on all 8 devices: the
    sum over devices (integers: exact), on every device."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as PS

    from commsim.algorithms._parallel import channels
    from commsim.exec.jax import collective

    f = collective(channels(commsim.build("allreduce", "ring", nranks=8), 2), "d")
    m = jax.make_mesh((8,), ("d",))
    host = np.random.default_rng(8).integers(-1000, 1000, (8, 13)).astype(np.int32)
    x = jax.device_put(host, NamedSharding(m, PS("d")))

    run = jax.jit(jax.shard_map(lambda v: f(v[0])[None], mesh=m, in_specs=PS("d"),
                                out_specs=PS("d")))  # fmt: skip
    np.testing.assert_array_equal(np.asarray(run(x)), np.broadcast_to(host.sum(0), (8, 13)))


@pytest.mark.parametrize("suffix", ["json", "npz"])
def test_cli_runs_a_saved_multichannel_schedule(cuda_backend, tmp_path, capsys, suffix):
    """``commsim save`` keeps the channels, and ``commsim run -f`` runs and checks the file."""
    from commsim.cli import main

    s = CASES[1][1]  # allreduce/parallel(ring,rabenseifner)
    path = tmp_path / f"two.{suffix}"
    commsim.save(s, path)
    assert commsim.load(path).nchannels == 2
    argv = ["run", "-f", str(path), "-s", "256", "--iters", "2", "--warmup", "1", "--json"]
    assert main([*argv, "--backend", "cuda", "--no-progress"]) == 0
    [m] = json.loads(capsys.readouterr().out)["measurements"]
    assert (m["backend"], m["check"], m["nranks"]) == ("cuda", "ok", P)


def test_jax_mesh_runs_a_multi_channel_schedule_with_no_steps(jax_backend):
    """p = 1: every part has nothing to send; the plan keeps one buffer, not max() of nothing."""
    one = commsim.build("allreduce", "ring", nranks=1)
    s = commsim.algorithms.parallel(one, one)
    assert (s.nchannels, s.nsteps) == (2, 0)
    lay = layout(s, 2 * s.nbytes_units)
    execute(s, random_inputs(lay, np.float32, seed=1), jax_backend)
