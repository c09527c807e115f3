"""Timing the transport, not the harness: back-to-back runs per call, their bound, and the
executors' idle run (``commsim.bench._overhead``)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import commsim
from commsim.bench import BenchRequest
from commsim.bench._loop import MAX_BATCH, _timed_runs, batch_limit
from commsim.bench._overhead import call_overhead, call_samples
from commsim.bench._timer import LocalTimer
from commsim.errors import CommsimError
from commsim.exec import Compiled, get_backend, interpret, layout


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("p", [2, 3, 8])
def test_chained_sums_stay_finite_within_the_batch_limit(dtype, p):
    host = np.full((p, 16), -8, dtype)
    k = batch_limit(host)
    x = host[0].copy()
    for _ in range(k):  # the worst growth: every run sums p copies
        x = (x * dtype(p)).astype(dtype)
    assert np.isfinite(x).all() and k >= 1
    assert batch_limit(np.ones((p, 4), np.int32)) == MAX_BATCH  # integers wrap, harmlessly


class _Clock:
    """A fake device: each run advances a clock by ``cost`` seconds; the timer reads it."""

    def __init__(self, cost: float) -> None:
        self.now, self.cost, self.calls = 0.0, cost, []

    def compiled(self, batched: bool) -> Compiled:
        def run(buf):
            self.now += self.cost
            self.calls.append(1)
            return buf

        def repeat(buf, k):
            self.now += self.cost * k
            self.calls.append(k)
            return buf

        return Compiled(
            put=lambda h: h, run=run, get=lambda b: b, repeat=repeat if batched else None
        )

    def time(self, run, buf):
        t0 = self.now
        return run(buf), self.now - t0

    def slowest(self, times):
        return np.asarray(times, dtype=float)


@pytest.mark.parametrize("cost", [2e-5, 5e-2])
@pytest.mark.parametrize("batched", [True, False])
def test_timed_runs_report_one_run_whether_batched_or_not(cost, batched):
    clock = _Clock(cost)
    request = BenchRequest(sizes=(8,), iters=4, warmup=3)
    host = np.ones((2, 4), np.float32)
    times, native = _timed_runs(clock.compiled(batched), None, host, request, clock, None)
    np.testing.assert_allclose(times, cost)
    assert not native.any()
    timed = clock.calls[3:]
    if batched and cost < 1e-3:  # short runs: a probe (compile, time), then k per timed call
        assert timed[:2] == [4, 4] and len(timed) == 6
        assert len(set(timed[2:])) == 1 and timed[2] == batch_limit(host)
    else:
        assert timed == [1] * 4


def test_jax_repeat_is_k_chained_runs():
    s = commsim.build("allreduce", "ring", nranks=4)
    lay = layout(s, 2 * s.nbytes_units)
    buf = np.random.default_rng(3).integers(-3, 4, size=(4, lay.nelems)).astype(np.int32)
    want = buf.copy()
    for _ in range(3):
        want = interpret(s, lay, want)
    backend = get_backend("jax")
    c = backend.compile(s, lay, np.int32)
    np.testing.assert_array_equal(c.get(c.repeat(c.put(buf), 3)), want)
    nat = backend.native(s, lay, np.int32)
    got = nat.get(nat.repeat(nat.put(buf), 3))
    np.testing.assert_array_equal(got, np.broadcast_to(buf.sum(0) * 16, got.shape))


def test_the_jax_call_overhead_is_amortized_by_batching():
    backend = get_backend("jax")
    samples = call_samples(backend, 2, iters=5, warmup=3, timer=LocalTimer())
    assert samples.kind == "call" and samples.times.shape == (1, 5) and samples.sizes[0] == 0
    idle = backend.idle(2)
    single = []
    for _ in range(5):
        buf = idle.put(None)
        t0 = time.perf_counter()
        idle.run(buf)
        single.append(time.perf_counter() - t0)
    assert 0 < samples.median[0] < 0.5 * np.median(single)  # dispatch paid once per k runs
    assert call_overhead("jax", 2, iters=3, warmup=2) > 0


def test_call_overhead_refuses_what_it_cannot_time():
    with pytest.raises(CommsimError, match="no idle run"):
        call_samples(get_backend("numpy"), 2)
    with pytest.raises(CommsimError, match="iters >= 1"):
        call_samples(get_backend("jax"), 2, iters=0)
    with pytest.raises(CommsimError, match="mpirun -n 2"):
        call_overhead("mpi", 2)
