"""The Numba-CUDA backend (every registry row runs on it in ``tests/test_registry.py``).

Runs on a GPU when one is present, else on numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``,
set here when no NVIDIA device exists and numba.cuda is not loaded yet). The simulator runs one
Python thread per CUDA thread, so sizes are tiny: one or two elements per slot unit.
Lowering tests (which transfers get staged, how reductions are grouped) need no CUDA at all.
"""

from __future__ import annotations

import glob
import json
import os
import runpy
import subprocess
import sys

import numpy as np
import pytest

import commsim
from commsim import Schedule, Step
from commsim.errors import CommsimError, ScheduleError
from commsim.exec import execute, interpret, layout
from commsim.exec.cuda import NO_GPU, CudaBackend, plan

_NO_GPU = not glob.glob("/dev/nvidia[0-9]*")
if _NO_GPU and "NUMBA_ENABLE_CUDASIM" not in os.environ and "numba.cuda" not in sys.modules:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # numba.cuda is imported lazily: not yet
    from numba.core import config

    config.reload_config()


gpu = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend() -> CudaBackend:
    be = CudaBackend()
    why = be.unavailable()
    if why:
        pytest.skip(why)
    return be


def _inputs(lay, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = lay.input_shape()
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-1000, 1000, size=shape).astype(dtype)


def _run(schedule, per_unit: int, dtype, backend="cuda", seed: int = 0) -> None:
    """Run on ``backend`` (checked against the interpreter) and compare with the collective."""
    count = schedule.nbytes_units * per_unit
    lay = layout(schedule, count)
    x = _inputs(lay, dtype, seed)
    out = execute(schedule, x, backend)  # raises if it differs from the reference interpreter
    rows = lay.checked_rows(schedule.root)
    want = lay.reference(x, schedule.root)
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(out[rows], want[rows], rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(out[rows], want[rows])


@gpu
@pytest.mark.parametrize(
    "geometry",
    [(1, 1, 1), (3, 2, 2), (2, 5, 1), (1, 8, 3)],
    ids=["serial", "3x2x2", "2x5x1", "1x8x3"],
)
@pytest.mark.parametrize(
    "row,p",
    [
        (("allreduce", "ring"), 5),
        (("allreduce", "recursive_doubling"), 6),
        (("reduce_scatter", "direct"), 4),
        (("alltoall", "bruck"), 5),
    ],
    ids=lambda v: "/".join(v) if isinstance(v, tuple) else str(v),
)
def test_launch_geometry_does_not_change_results(backend, row, p, geometry):
    """Chunks cut inside transfers, grid-stride over chunks and threads, the 4-way unrolled
    loops and their remainders: same results."""
    threads, per_thread, blocks = geometry
    be = CudaBackend(threads=threads, per_thread=per_thread, blocks_per_sm=blocks)
    _run(commsim.build(*row, nranks=p), 7, np.int64, backend=be)


# -- lowering: staging only where a step's reads meet its writes --------------------------------
def _plan(collective: str, name: str, p: int, per_unit: int = 1):
    s = commsim.build(collective, name, nranks=p)
    return s, plan(s, layout(s, s.nbytes_units * per_unit))


def _one_step(step: Step, p: int, nslots: int) -> Schedule:
    return Schedule.from_steps([step], collective="allreduce", nranks=p, nslots=nslots)


def test_ring_steps_are_fused_exchanges_are_staged():
    s, pl = _plan("allreduce", "ring", 5)
    assert pl.staged_steps == [] and pl.stage_elems == 0
    assert pl.nlaunches == s.nsteps == 8  # one launch per step
    assert pl.traffic_elems == 5 * (5 - 1) * 5  # 5 (p - 1) n for n = 5 elements
    s, pl = _plan("allreduce", "recursive_doubling", 4)
    assert pl.staged_steps == list(range(s.nsteps))  # r <-> r xor 2^k read and write all
    assert pl.nlaunches == 2 * s.nsteps
    assert pl.stage_elems == 4  # the whole vector of every rank, once
    # recursive halving: a rank sends one half and receives into the other: nothing staged
    assert _plan("allreduce", "rabenseifner", 8)[1].staged_steps == []


def test_overlap_is_an_ir_property():
    swap = Step.make(src=[0, 1], dst=[1, 0], src_slot=0, dst_slot=0)
    assert plan(_one_step(swap, 2, 1), layout(_one_step(swap, 2, 1), 1)).staged_steps == [0]
    ring = Step.make(src=[0, 1, 2], dst=[1, 2, 0], src_slot=[0, 1, 2], dst_slot=[0, 1, 2])
    assert plan(_one_step(ring, 3, 3), layout(_one_step(ring, 3, 3), 3)).staged_steps == []
    # a local shift within one rank reads what it writes
    shift = Step.make(src=0, dst=0, src_slot=0, dst_slot=1, count=2)
    s = _one_step(shift, 1, 3)
    pl = plan(s, layout(s, 6))
    assert pl.staged_steps == [0] and pl.stage_elems == 4


def test_many_reductions_into_one_block_are_one_group():
    # direct reduce-scatter: p - 1 ranks add into every block in one step
    _, pl = _plan("reduce_scatter", "direct", 4)
    (st,) = pl.steps
    g = st.apply.groups
    assert st.stage is None and st.apply.ngroups == 4
    assert (np.diff(g[3]) == 3).all() and g[2, :4].all()  # 3 sources each, reducing


def test_partially_overlapping_reductions_are_cut_into_pieces():
    step = Step.make(src=[0, 1], dst=[2, 2], src_slot=[0, 1], dst_slot=[0, 1], count=2, reduce=True)
    s = _one_step(step, 3, 3)
    (st,) = plan(s, layout(s, 3)).steps
    assert st.apply.groups[1, :3].tolist() == [1, 1, 1]  # [0,1) [1,2) [2,3)
    assert np.diff(st.apply.groups[3]).tolist() == [1, 2, 1]


def test_write_race_is_refused():
    step = Step.make(src=[0, 1], dst=[2, 2], src_slot=0, dst_slot=0)
    s = _one_step(step, 3, 1)
    with pytest.raises(ScheduleError, match="step 0: several transfers write rank 2 element 0"):
        plan(s, layout(s, 1))


@gpu
@pytest.mark.parametrize("per_unit", [1, 3])
def test_handmade_steps_run_exactly(backend, per_unit):
    steps = [
        Step.make(src=[0, 1], dst=[1, 0], src_slot=0, dst_slot=0, count=3, reduce=True),
        Step.make(src=[0, 1], dst=[2, 2], src_slot=[0, 1], dst_slot=[0, 1], count=2, reduce=True),
        Step.make(src=[2, 2], dst=[2, 2], src_slot=[0, 1], dst_slot=[1, 0], count=[2, 1]),
    ]
    # not an allreduce (execute's check would say so): compare with the interpreter directly
    s = Schedule.from_steps(steps, collective="allreduce", nranks=3, nslots=3)
    x = np.arange(9 * per_unit, dtype=np.int32).reshape(3, 3 * per_unit)
    lay = layout(s, x.shape[1])
    want = lay.unpack(interpret(s, lay, lay.pack(x)))
    np.testing.assert_array_equal(execute(s, x, backend, check=False), want)


# -- native baseline, errors, availability ---------------------------------------------------------
NATIVE = [
    ("allreduce", "ring"),
    ("reduce", "binomial"),
    ("reduce_scatter", "ring"),
    ("broadcast", "binomial"),
    ("allgather", "ring"),
    ("alltoall", "direct"),
]


@gpu
@pytest.mark.parametrize("p", [1, 3, 4])
@pytest.mark.parametrize("row", NATIVE, ids="/".join)
def test_native_computes_the_collective(backend, row, p):
    s = commsim.build(*row, nranks=p)
    lay = layout(s, s.nbytes_units * 2)
    x = _inputs(lay, np.int32, p)
    nat = backend.native(s, lay, np.int32)
    out = lay.unpack(nat.get(nat.run(nat.put(lay.pack(x)))))
    rows = lay.checked_rows(s.root)
    np.testing.assert_array_equal(out[rows], lay.reference(x, s.root)[rows])


@gpu
def test_plan_is_cached_and_rank_mismatch_is_refused(backend):
    s = commsim.build("allreduce", "ring", nranks=3)
    lay = layout(s, 6)
    assert backend.plan(s, lay) is backend.plan(s, lay)
    other = commsim.build("allreduce", "ring", nranks=4)
    with pytest.raises(CommsimError, match="p=4 ranks but the layout is for 3 ranks"):
        backend.compile(other, lay, np.float32)
    with pytest.raises(CommsimError, match=r"runs float32.*got complex64"):
        backend.compile(s, lay, np.complex64)


@gpu
def test_copy_bandwidth_runs(backend):
    assert backend.copy_bandwidth(256, iters=1) > 0
    assert backend.copy_bandwidth(256, iters=1, kernel=True) > 0


_TYPECHECK = """
from numba import types
from numba.cuda.compiler import compile_cuda
from commsim.exec.cuda._kernels import KERNELS
i64 = types.int64
for dt in (types.float32, types.int32):
    arena = types.Array(dt, 1, "C")
    sigs = {
        "apply": (arena, types.Array(i64, 2, "C"), types.Array(i64, 1, "C"), i64),
        "native_sum": (arena,) + (i64,) * 6,
        "native_copy": (arena,) + (i64,) * 6,
        "native_alltoall": (arena,) + (i64,) * 4,
    }
    for name, sig in sigs.items():
        compile_cuda(getattr(KERNELS, name).py_func, types.void, sig, cc=(9, 0))
print("ok")
"""


def test_kernels_type_and_lower_for_the_cuda_target():
    """The simulator runs kernels as Python, so it misses numba typing errors (two-argument
    ``min`` fails on CUDA in numba >= 0.66, numba#10753): type and lower every kernel to LLVM IR
    for the real target, which needs neither a GPU nor the CUDA toolkit."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", _TYPECHECK],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_unavailable_without_gpu_and_lazy_import():
    """Without a GPU or the simulator: one line; importing commsim never loads numba.cuda."""
    if not _NO_GPU:
        pytest.skip("a GPU is present")
    code = (
        "import sys, commsim\n"
        "assert 'numba.cuda' not in sys.modules\n"
        "from commsim.exec.cuda import CudaBackend\n"
        "print(CudaBackend().unavailable())\n"
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == NO_GPU
    assert NO_GPU == (
        "no CUDA GPU found (set NUMBA_ENABLE_CUDASIM=1 to run on numba's CUDA simulator)"
    )


@gpu
def test_benchmark_smoke(backend, tmp_path):
    """benchmarks/bench_cuda.py --smoke runs end to end (checked results, JSON written)."""
    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "bench_cuda.py")
    bench = runpy.run_path(path)
    out = tmp_path / "cuda.json"
    bench["main"](["--smoke", "--out", str(out)])
    res = json.loads(out.read_text())
    assert [r["algorithm"] for r in res["results"]] == ["ring", "rabenseifner", "native"]
    assert all(r["checked"] and r["ratio_to_bound"] > 0 for r in res["results"])
