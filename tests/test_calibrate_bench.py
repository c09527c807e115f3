"""The JAX and CUDA calibration microbenchmarks: well-formed Samples, physical numbers, clear errors.

The batch difference (``_micro.batch_times``) is checked against a synthetic clock whose
per-operation time is known; the JAX benchmarks run on the test session's 8 CPU devices; the
CUDA ones on numba's simulator (``NUMBA_ENABLE_CUDASIM=1``, set by ``conftest.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from commsim.bench.calibrate import Samples
from commsim.bench.calibrate._cuda_bench import SIMULATED_NOTE, cuda_samples
from commsim.bench.calibrate._jax_bench import JAX_KINDS, jax_samples
from commsim.bench.calibrate._micro import KMAX, KMIN, batch_times
from commsim.errors import CommsimError

MIB = 2**20


class FakeClock:
    """``run(k)`` of a call costing ``call`` s plus ``per`` s per iteration, with jitter, and a
    pause of ``pause`` s on the calls listed in ``paused``."""

    def __init__(self, call: float, per: float, jitter: float = 0.0, paused=(), pause=0.0):
        self.call, self.per, self.jitter = call, per, jitter
        self.paused, self.pause = set(paused), pause
        self.rng = np.random.default_rng(1)
        self.calls: list[int] = []

    def __call__(self, k: int) -> float:
        self.calls.append(k)
        extra = self.pause if len(self.calls) in self.paused else 0.0
        return self.call + k * self.per + self.jitter * self.rng.random() + extra


def _one_line(excinfo: pytest.ExceptionInfo) -> str:
    text = str(excinfo.value)
    assert text and "\n" not in text
    return text


# -- the batch difference ---------------------------------------------------------------------------
def test_batch_difference_recovers_the_per_operation_time_and_drops_the_call():
    clock = FakeClock(call=50e-6, per=3e-6, jitter=5e-6)
    times, k = batch_times(clock, repeats=20, warmup=2, per_iteration=2, target_s=4e-3)
    assert times.shape == (20,)
    # a ping-pong iteration is 2 operations: 1.5 us each; the 50 us call is gone
    assert np.median(times) == pytest.approx(1.5e-6, rel=0.02)
    assert KMIN <= k <= KMAX
    assert k * 3e-6 == pytest.approx(4e-3, rel=0.2)  # the batch lasts about target_s


def test_a_pause_while_choosing_k_changes_nothing():
    _, k_steady = batch_times(FakeClock(50e-6, 1e-6), repeats=5, warmup=0, target_s=4e-3)
    # the first search batch paused for 100 ms: its T(k)/k alone would settle on k = KMIN
    paused = FakeClock(50e-6, 1e-6, paused=[2], pause=0.1)
    times, k = batch_times(paused, repeats=5, warmup=0, target_s=4e-3)
    assert k == k_steady > 50 * KMIN
    assert np.median(times) == pytest.approx(1e-6, rel=1e-6)


def test_a_batch_shorter_than_the_jitter_grows():
    # calls: 1 compiles, 2-3 search (k stays KMIN), 4 is the first repeat's T(1): paused 1 ms,
    # longer than the batch's 4 x 0.1 ms, so its difference is negative and k doubles
    clock = FakeClock(10e-6, 1e-4, paused=[4], pause=1e-3)
    times, k = batch_times(clock, repeats=3, warmup=0, target_s=1e-4)
    assert k == 2 * KMIN
    assert np.allclose(times, 1e-4)


def test_large_operations_get_the_shortest_batch():
    times, k = batch_times(FakeClock(1e-3, 5e-3), repeats=3, warmup=1, target_s=4e-3)
    assert k == KMIN
    assert np.allclose(times, 5e-3)


def test_noise_that_swamps_the_operation_is_one_line():
    with pytest.raises(CommsimError) as e:
        batch_times(lambda k: 1e-3, repeats=1, warmup=0, what="reduce 8B")
    assert "reduce 8B" in _one_line(e)


# -- JAX ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def jax_small() -> list[Samples]:
    return jax_samples([1024, 8, 64], repeats=3, warmup=1, target_s=1e-3)


def test_jax_samples_are_well_formed(jax_small):
    assert [s.kind for s in jax_small] == list(JAX_KINDS)
    for s in jax_small:
        assert s.backend == "jax"
        assert np.all(s.times > 0) and np.all(np.isfinite(s.times))
        assert s.notes
        if s.kind == "call":
            assert s.sizes.tolist() == [0] and s.times.shape == (1, 3)
            assert s.nranks == 8  # every device of the session, as the executor runs
        else:
            assert s.sizes.tolist() == [8, 64, 1024]  # sorted
            assert s.times.shape == (3, 3)
            assert s.nranks == (1 if s.kind == "reduction" else 2)
    assert Samples.from_dict(jax_small[0].to_dict()).times.tolist() == jax_small[0].times.tolist()


@pytest.mark.parametrize("as_executor", [False, True])
def test_jax_times_grow_with_the_message_and_stay_physical(as_executor):
    small, large = 8, 16 * MIB
    kinds = ("pingpong", "exchange", "reduction")
    out = jax_samples(
        [small, large], repeats=3, warmup=1, kinds=kinds, target_s=1e-3, as_executor=as_executor
    )
    for s in out:
        assert s.times.shape == (2, 3) and np.all(s.times > 0)
        assert any("as the executor" in n for n in s.notes) == as_executor
        t_small, t_large = s.median
        # 2 million times the bytes: far more than noise, even on a busy machine
        assert t_large > 2 * t_small, s.kind
        # XLA neither dropped nor merged the batch's operations: no memory moves 1 TB/s here
        assert large / t_large < 1e12, s.kind


def test_jax_ranks_runs_the_step_on_that_many_devices():
    out = jax_samples([64], repeats=2, warmup=0, kinds=("exchange", "reduction", "call"), ranks=4)
    assert [s.nranks for s in out] == [4, 4, 4]
    assert any("cyclic shift" in n for n in out[0].notes)
    assert all(np.all(s.times > 0) for s in out)


@pytest.mark.parametrize(("ranks", "words"), [(9, "needs 9 devices"), (1, "ranks"), (2.5, "2.5")])
def test_jax_bad_ranks_are_one_line(ranks, words):
    with pytest.raises(CommsimError) as e:
        jax_samples([8], repeats=1, warmup=0, ranks=ranks)
    assert words in _one_line(e)


def test_jax_call_alone_needs_one_device():
    import jax

    (call,) = jax_samples([8], repeats=2, warmup=0, kinds=("call",), devices=jax.devices()[:1])
    assert call.nranks == 1 and call.times.shape == (1, 2)


def test_jax_progress_bar_counts_every_repeat(capsys):
    jax_samples([8, 64], repeats=2, warmup=0, kinds=("exchange", "call"), progress=True)
    err = capsys.readouterr().err
    assert "calibrate jax" in err and "6/6 100%" in err  # 2 sizes x 2 repeats + 2 calls


@pytest.mark.parametrize(
    ("sizes", "words"),
    [([], "empty"), ([8, -8], "-8"), ([0], "0"), ([1.5], "1.5"), (["8"], "'8'")],
)
def test_jax_bad_sizes_are_one_line(sizes, words):
    with pytest.raises(CommsimError) as e:
        jax_samples(sizes, repeats=1, warmup=0)
    assert words in _one_line(e)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"kinds": ("burst",)}, "burst"),
        ({"kinds": ()}, "empty"),
        ({"repeats": 0}, "repeats"),
        ({"warmup": -1}, "warmup"),
    ],
)
def test_jax_bad_arguments_are_one_line(kwargs, words):
    with pytest.raises(CommsimError) as e:
        jax_samples([8], **{"repeats": 1, "warmup": 0, **kwargs})
    assert words in _one_line(e)


def test_jax_pair_needs_two_devices():
    import jax

    with pytest.raises(CommsimError) as e:
        jax_samples([8], repeats=1, warmup=0, devices=jax.devices()[:1], kinds=("exchange",))
    assert "2 devices" in _one_line(e)


# -- CUDA (numba's simulator in the test session) ----------------------------------------------------
@pytest.mark.gpu
def test_cuda_samples_are_well_formed():
    out = cuda_samples([64, 8], repeats=2, warmup=0, target_s=1e-3)
    assert [s.kind for s in out] == ["pingpong", "exchange", "reduction", "call"]
    for s in out:
        assert s.backend == "cuda"
        assert np.all(s.times > 0) and np.all(np.isfinite(s.times))
        assert s.times.shape == ((1, 2) if s.kind == "call" else (2, 2))
        assert s.sizes.tolist() == ([0] if s.kind == "call" else [8, 64])
        assert SIMULATED_NOTE in s.notes  # the simulator's times mean nothing: it says so
    pair = [s for s in out if s.kind in ("pingpong", "exchange")]
    assert all(any("one GPU" in n for n in s.notes) for s in pair)


@pytest.mark.gpu
def test_cuda_bad_input_is_one_line():
    with pytest.raises(CommsimError) as e:
        cuda_samples([], repeats=1, warmup=0)
    assert "empty" in _one_line(e)
    with pytest.raises(CommsimError) as e:
        cuda_samples([8], repeats=1, warmup=0, kinds=("overhead",))
    assert "overhead" in _one_line(e)


@pytest.mark.parametrize(
    ("repeats", "words"), [(4, "4 blocks: intervals"), (11, "one block of 11")]
)
def test_fewer_blocks_than_the_default_say_so(repeats, words):
    """A calibration of fewer than 10 blocks notes that it reproduces less well (a prime
    --repeats falls to one block: no intervals at all); the default gets no such note."""
    from commsim.bench.calibrate import calibrate

    profile, _ = calibrate("cuda", 2, [8, 64], repeats=repeats, warmup=0)
    assert any(words in n for n in profile.notes)
    assert not any(
        "blocks: intervals" in n for n in calibrate("cuda", 2, [8, 64], warmup=0)[0].notes
    )
