"""The JAX mesh backend against the reference interpreter, on 8 CPU devices.

Every registry row runs on this backend in the registry sweep (``tests/test_registry.py``,
``BACKEND_P``); this file tests what is particular to the backend: its native collectives, random
schedules that exercise the IR's semantics directly (exchanges, several reductions into one slot,
local copies, mixed reduce flags, unequal slot sizes) compared buffer for buffer, the plan's
shape, the compile cache and its errors.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

if "jax" not in sys.modules and "device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()
jax = pytest.importorskip("jax")

import commsim  # noqa: E402
from commsim import COLLECTIVES, Schedule, Step, spec  # noqa: E402
from commsim.errors import CommsimError  # noqa: E402
from commsim.exec import check_outputs, execute, interpret, layout, random_inputs  # noqa: E402
from commsim.exec.jax import JaxMeshBackend, plan  # noqa: E402

NDEV = len(jax.devices())
pytestmark = pytest.mark.skipif(NDEV < 8, reason=f"needs 8 JAX devices, {NDEV} visible")


@pytest.fixture(scope="module")
def backend() -> JaxMeshBackend:
    return JaxMeshBackend()  # shared: its compile cache is part of what is tested


@pytest.mark.parametrize("p", [1, 3, 8])
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_native_collectives_match_the_reference(backend, collective, p):
    name = commsim.available(collective)[0]
    rooted = spec(collective).rooted
    s = commsim.build(collective, name, nranks=p, **({"root": p - 1} if rooted else {}))
    lay = layout(s, 2 * s.nbytes_units)
    for dtype in ("int32", "float32"):
        inputs = random_inputs(lay, dtype)
        nat = backend.native(s, lay, dtype)
        out = lay.unpack(nat.get(nat.run(nat.put(lay.pack(inputs)))))
        check_outputs(s, lay, inputs, out)
    assert backend.native_name(collective).startswith("lax.")


def test_refuses_more_ranks_than_devices():
    s = commsim.build("allreduce", "ring", nranks=NDEV + 1)
    lay = layout(s, s.nbytes_units)
    with pytest.raises(CommsimError, match=rf"p={NDEV + 1} .* only {NDEV} JAX devices") as e:
        JaxMeshBackend().compile(s, lay, np.float32)
    assert "xla_force_host_platform_device_count" in str(e.value)
    s3 = commsim.build("allreduce", "ring", nranks=3)
    with pytest.raises(CommsimError, match=r"p=3 .* given 2 devices"):
        JaxMeshBackend(devices=jax.devices()[:2]).compile(s3, layout(s3, 3), np.float32)


def test_64_bit_dtypes_turn_on_jax_64_bit_mode():
    # in a subprocess: the mode is global, and this test process keeps JAX's default
    import os
    import subprocess
    import sys

    # a fresh JAX: an earlier 64-bit run in this process exported JAX_ENABLE_X64 (ensure_x64)
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    code = (
        "import jax, numpy as np, commsim\n"
        "from commsim.exec import execute\n"
        "assert not jax.config.read('jax_enable_x64')\n"
        "x = np.arange(8.0).reshape(2, 4)\n"
        "out = execute(commsim.build('allreduce', 'ring', nranks=2), x, backend='jax')\n"
        "assert out.dtype == np.float64 and jax.config.read('jax_enable_x64')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_second_compile_and_runs_do_not_retrace():
    be = JaxMeshBackend()
    s = commsim.build("allreduce", "ring", nranks=4)
    lay = layout(s, 8)
    first = be.compile(s, lay, np.int32)
    assert be.traces == 1
    assert be.compile(s, lay, np.int32) is first
    inputs = random_inputs(lay, np.int32)
    for _ in range(3):
        execute(s, inputs, be)
    buf = first.put(lay.pack(inputs))
    for _ in range(3):
        buf = first.run(buf)  # donated and chained: runs in place
    assert be.traces == 1
    be.compile(s, layout(s, 16), np.int32)  # another size is another program
    be.compile(s, lay, np.float32)  # and so is another dtype
    assert be.traces == 3


def test_execute_by_backend_name():
    s = commsim.build("allgather", "ring", nranks=4)
    out = execute(s, np.arange(8, dtype=np.int32).reshape(4, 2), "jax")
    assert (out == np.arange(8)).all()


# -- the IR's semantics, on schedules no algorithm would write ---------------------------------


def random_schedule(seed: int, p: int = 4, units=(1, 2, 1, 3, 1, 1), nsteps: int = 4) -> Schedule:
    """Random legal steps: any transfers, reduce or not, but no conflicting writes in a step."""
    rng = np.random.default_rng(seed)
    nslots = len(units)
    steps = []
    for _ in range(nsteps):
        written: dict[tuple[int, int], bool] = {}
        rows = []
        for _ in range(int(rng.integers(1, 4 * p))):
            src, dst = (int(x) for x in rng.integers(p, size=2))
            count = int(rng.integers(1, 3))
            a = int(rng.integers(0, nslots - count + 1))
            size = sum(units[a : a + count])
            fits = [b for b in range(nslots - count + 1) if sum(units[b : b + count]) == size]
            b = int(rng.choice(fits))  # a range of as many units (a itself fits)
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


def same_as_interpreter(backend, s, per_unit=3, dtype=np.int32):
    lay = layout(s, per_unit * s.nbytes_units)
    rng = np.random.default_rng(0)
    buf = rng.integers(-50, 50, size=(s.nranks, lay.nelems)).astype(dtype)
    want = interpret(s, lay, buf.copy())
    c = backend.compile(s, lay, dtype)
    got = c.get(c.run(c.put(buf)))
    np.testing.assert_array_equal(got, want)
    return lay


@pytest.mark.parametrize("seed", range(4))
def test_random_schedules_match_the_interpreter(backend, seed):
    same_as_interpreter(backend, random_schedule(seed))


def test_exchange_multiple_reductions_and_local_copies(backend):
    step = Step.make(
        src=[0, 1, 2, 3, 1, 2, 2, 0],
        dst=[1, 0, 0, 0, 1, 2, 2, 0],
        src_slot=[0, 0, 1, 1, 2, 0, 1, 2],
        dst_slot=[0, 0, 1, 1, 3, 2, 3, 2],
        reduce=[False, False, True, True, False, True, False, True],
    )
    s = Schedule.from_steps([step], collective="allreduce", nranks=4, nslots=4)
    same_as_interpreter(backend, s)


def test_window_that_cannot_shift_pads_the_buffer(backend):
    # one round, one column: 0->1 moves 3 slots, 2->3 moves the last slot into the first;
    # no shift keeps both of the short transfer's windows inside the buffer
    step = Step.make(src=[0, 2], dst=[1, 3], src_slot=[0, 3], dst_slot=[0, 0], count=[3, 1])
    s = Schedule.from_steps([step], collective="allreduce", nranks=4, nslots=4)
    lay = layout(s, 4 * 2)
    pl = plan(s, lay)
    assert pl.pad == 2 * 2 and pl.nmasked == 1
    same_as_interpreter(backend, s, per_unit=2)


def test_ring_lowers_to_one_unmasked_ppermute_per_step():
    s = commsim.build("allreduce", "ring", nranks=8)
    pl = plan(s, layout(s, 8 * 1024))
    assert pl.summary() | {"table_cols": 0} == {
        "steps": 14,
        "ppermutes": 14,
        "segments": 14,
        "masked_segments": 0,
        "pad": 0,
        "table_cols": 0,
    }


def test_cli_run_on_the_mesh_against_psum(capsys):
    from commsim.cli import main

    argv = ["run", "-c", "allreduce", "-a", "ring", "-p", "4", "-s", "4KiB", "--iters", "2"]
    assert main([*argv, "--warmup", "1", "--json"]) == 0
    [m] = json.loads(capsys.readouterr().out)["measurements"]
    assert (m["backend"], m["native"], m["check"]) == ("jax", "lax.psum", "ok")
    assert m["ratio"] == pytest.approx(m["busbw_Bps"] / m["native_busbw_Bps"])


def test_schedules_too_long_for_one_program_are_refused_up_front():
    s = commsim.build("allreduce", "ring", nranks=4)  # 6 steps, 6 rounds
    lay = layout(s, 4 * s.nbytes_units)
    with pytest.raises(commsim.ResourceError, match="needs 6 ppermute rounds or more, past the 5"):
        JaxMeshBackend(max_rounds=5).compile(s, lay, np.float32)
    long = commsim.build("broadcast", "chain", nranks=4, segments=20_000)
    with pytest.raises(commsim.ResourceError, match="20,002 ppermute rounds"):
        JaxMeshBackend().compile(long, layout(long, 20_000), np.float32)  # before planning
