"""Calibration that reproduces (issue #19 item 12): the fewest pieces within a tolerance, each
breakpoint checked by resamples of the blocks, an interval for every parameter, the repeat
count of the MPI microbenchmarks, and profiles that keep them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from commsim.bench.calibrate import (
    Samples,
    default_blocks,
    fit_at,
    fit_pieces,
    fit_stable,
    splits_of,
)
from commsim.errors import CommsimError
from commsim.profiles import FitIntervals, Profile, load_profile, save_profile

N = 2.0 ** np.arange(3, 25)  # 8 B .. 16 MiB
SWITCH = 65536.0
TRUTH = ((1e-6, 1 / 4e9), (20e-6, 1 / 8e9))  # (alpha, beta) below and from the switch


def _curve(n: np.ndarray) -> np.ndarray:
    (a0, b0), (a1, b1) = TRUTH
    return np.where(n < SWITCH, a0 + n * b0, a1 + n * b1)


def _draw(seed: int, noise: float = 0.02, blocks: int = 5, per: int = 3) -> Samples:
    """A curve with a protocol switch, measured with relative noise, in interleaved blocks."""
    rng = np.random.default_rng(seed)
    times = _curve(N)[:, None] * (1 + noise * rng.standard_normal((len(N), blocks * per)))
    return Samples("exchange", N, np.abs(times), "mpi", 2, blocks=blocks)


def test_a_known_switch_is_recovered_and_its_intervals_cover_the_truth():
    c = fit_stable(_draw(3))
    iv = c.intervals
    assert [p.start for p in c.fit.pieces] == [0.0, SWITCH]
    assert iv.status == "stable" and iv.stable and iv.support[1] >= 0.75
    assert iv.start[1, 0] <= SWITCH <= iv.start[1, 1]
    assert iv.replicates == 100 and iv.blocks == 5 and iv.level == 0.95
    # 95% intervals: over 10 independent draws each parameter's covers the truth at least 8
    # times (28 of 30 to 30 of 30 per parameter over 30 draws when this was written)
    covered = np.zeros((2, 2))
    for seed in range(10):
        iv = fit_stable(_draw(seed)).intervals
        for k, (alpha, beta) in enumerate(TRUTH):
            covered[k] += [
                iv.alpha[k, 0] <= alpha <= iv.alpha[k, 1],
                iv.beta[k, 0] <= beta <= iv.beta[k, 1],
            ]
    assert (covered >= 8).all(), covered


@pytest.mark.parametrize("seeds", [(1, 2), (5, 6), (7, 8)])
def test_two_noisy_draws_of_one_curve_give_the_same_pieces(seeds):
    a, b = (fit_stable(_draw(s, noise=0.05)) for s in seeds)
    assert [p.start for p in a.fit.pieces] == [p.start for p in b.fit.pieces]
    assert a.intervals.agrees(b.intervals)  # every parameter's two intervals overlap


def test_the_same_samples_give_the_same_intervals():
    s = _draw(4)
    a, b = fit_stable(s), fit_stable(s)
    assert np.array_equal(a.intervals.alpha, b.intervals.alpha)
    assert np.array_equal(a.intervals.beta, b.intervals.beta)


def test_a_bend_below_the_tolerance_is_one_piece_however_quiet_the_run():
    # a 3% bend over 4 KiB .. 64 KiB: the BIC splits it when the repeats are quiet enough, the
    # tolerance rule (5%) never does, so a quieter run does not get more pieces
    t = (2e-6 + N / 5e9) * np.where((N >= 4096) & (N < 65536), 1.03, 1.0)
    for noise in (0.0005, 0.01, 0.03):
        rng = np.random.default_rng(0)
        times = t[:, None] * (1 + noise * rng.standard_normal((len(N), 10)))
        c = fit_stable(Samples("exchange", N, times, "mpi", 2, blocks=5))
        assert len(c.fit.pieces) == 1, noise
    assert len(fit_pieces(N, t, noise=0.0005)[0].pieces) > 1  # what the BIC does there


def test_a_bend_above_the_tolerance_is_a_piece_however_noisy_the_run():
    # the protocol switch (a 2x jump) under 10% noise per repeat: still two pieces
    c = fit_stable(_draw(2, noise=0.10, blocks=10, per=3))
    assert [p.start for p in c.fit.pieces] == [0.0, SWITCH]


def test_a_breakpoint_the_resamples_do_not_confirm_is_kept_and_reported():
    # support above 1 can never be reached: every breakpoint is reported, none is merged away
    c = fit_stable(_draw(3), support=1.01)
    assert [p.start for p in c.fit.pieces] == [0.0, SWITCH]
    assert c.intervals.status.startswith("unstable breakpoints: 64KiB (")
    assert not c.intervals.stable and c.quality.max_rel_residual < 0.05


def test_splits_give_the_fewest_pieces_within_the_tolerance_or_an_exact_count():
    t = _curve(N)
    sp = splits_of(N, t)
    assert [p.start for p in sp.within(0.05)[0].pieces] == [0.0, SWITCH]
    assert len(sp.within(10.0)[0].pieces) == 1  # everything is within 1000%
    three = sp.exactly(3)
    assert len(three.pieces) == 3 and np.allclose(three(N), t, rtol=1e-9)
    assert sp.exactly(9) is None  # 22 sizes do not make 9 pieces of 3


def test_the_centre_is_a_trimmed_mean_of_the_block_medians():
    # 10 blocks, two of them slow: a median would sit on one mode or the other as their share
    # moves; the trimmed mean leaves the 2 slowest and 2 fastest out and moves smoothly
    times = np.ones((len(N), 10))
    times[:, 8:] = 3.0
    c = fit_stable(Samples("exchange", N, times * _curve(N)[:, None], "mpi", 2, blocks=10))
    assert np.allclose(c.median_s, _curve(N))
    times[:, 6:] = 3.0  # four slow blocks: two of them count
    c = fit_stable(Samples("exchange", N, times * _curve(N)[:, None], "mpi", 2, blocks=10))
    assert np.allclose(c.median_s, _curve(N) * (4 + 2 * 3) / 6)


def test_one_block_falls_back_to_the_plain_fit():
    s = dataclasses.replace(_draw(3), blocks=1)
    assert fit_stable(s).intervals is None


def test_block_medians_and_the_blocks_are_checked():
    s = _draw(3, blocks=3, per=2)
    assert s.block_medians().shape == (3, len(N))
    with pytest.raises(CommsimError, match="do not split into 4 blocks"):
        Samples("exchange", N, s.times, "mpi", 2, blocks=4)
    assert default_blocks(30) == 10 and default_blocks(15) == 5 and default_blocks(7) == 7


def test_fit_at_uses_the_given_breakpoints():
    fit, r = fit_at(N, _curve(N), [0, int(np.searchsorted(N, SWITCH))])
    assert [p.start for p in fit.pieces] == [0.0, SWITCH] and np.abs(r).max() < 1e-9
    free, _ = fit_pieces(N, _curve(N))
    assert np.allclose(free.alphas, fit.alphas) and np.allclose(free.betas, fit.betas)


def _profile(curve) -> Profile:
    return Profile("mpi", 2, "test", "here", "2026-11-26", {"exchange": curve})


def test_intervals_round_trip_through_the_profile_file(tmp_path):
    c = fit_stable(_draw(3))
    back = load_profile(save_profile(_profile(c), tmp_path / "p.toml")).curves["exchange"]
    assert isinstance(back.intervals, FitIntervals)
    assert np.array_equal(back.intervals.alpha, c.intervals.alpha)
    assert back.intervals.status == "stable" and back.intervals.blocks == 5
    assert "stable" in back.describe()


def test_a_profile_without_intervals_still_loads(tmp_path):
    # a file as commsim wrote it before intervals existed: no [curves.*.intervals]
    old = tmp_path / "old.toml"
    old.write_text(
        'format = "commsim-profile"\nversion = 1\nbackend = "mpi"\nnranks = 2\n'
        'transport = "t"\nmachine = "m"\ndate = "2026-01-01"\nnotes = []\n\n'
        "[call_overhead_s]\n\n[curves.exchange]\nr2 = 1.0\nmedian_rel_residual = 0.0\n"
        "max_rel_residual = 0.0\npoints = 2\nsizes = [8.0, 1024.0]\n"
        "median_s = [1e-06, 2e-06]\nspread = [0.0, 0.0]\n\n[[curves.exchange.pieces]]\n"
        "start_bytes = 0.0\nalpha_s = 1e-06\nbeta_s_per_byte = 1e-09\n"
    )
    p = load_profile(old)
    assert p.curves["exchange"].intervals is None
    assert float(p.message_curve().fit(1000)) == pytest.approx(2e-6)


def test_a_bad_intervals_table_is_one_line_naming_the_field(tmp_path):
    c = fit_stable(_draw(3))
    path = save_profile(_profile(c), tmp_path / "p.toml")
    path.write_text(path.read_text().replace("replicates = 100\n", ""))
    with pytest.raises(Exception, match=r"curves\.exchange\.intervals: missing replicates"):
        load_profile(path)


def test_the_median_error_interval_covers_the_error_and_shrinks_with_repeats():
    from commsim.bench import median_error_interval

    pred, meas, spread = np.array([1.1, 1.3, 0.8, 1.2]), np.ones(4), np.full(4, 0.2)
    lo, hi = median_error_interval(pred, meas, spread, 5)
    assert lo <= 0.2 <= hi  # the median |error| itself, 20%
    lo2, hi2 = median_error_interval(pred, meas, spread, 500)
    assert hi2 - lo2 < hi - lo
    assert median_error_interval(pred, meas, spread, 5) == (lo, hi)  # a fixed seed


def test_until_stable_measures_more_blocks_and_says_when_it_stays_unstable(monkeypatch):
    import functools

    from commsim.bench.calibrate import _calibrate
    from commsim.bench.calibrate._calibrate import Suite

    calls = []

    def run(nranks, sizes, *, repeats, warmup, blocks, timeout, progress):
        calls.append(blocks)
        return [_draw(len(calls), blocks=blocks, per=repeats // blocks)]

    monkeypatch.setattr(_calibrate, "suite_of", lambda backend: Suite(run, "fake", ("exchange",)))
    # every breakpoint refused: the switch at 64 KiB stays "unstable" however much is measured
    monkeypatch.setattr(_calibrate, "fit_stable", functools.partial(fit_stable, support=1.01))
    profile, samples = _calibrate.calibrate("mpi", 2, repeats=15, until_stable=2)
    assert calls == [5, 5, 5] and samples[0].blocks == 15 and samples[0].times.shape[1] == 45
    assert any(
        "still unstable after 2 more rounds of 5 blocks (exchange)" in n for n in profile.notes
    )
    calls.clear()
    monkeypatch.setattr(_calibrate, "fit_stable", fit_stable)
    profile, _ = _calibrate.calibrate("mpi", 2, repeats=15, until_stable=2)
    assert calls == [5] and not any("unstable" in n for n in profile.notes)  # one round
    assert any("5 blocks: intervals" in n for n in profile.notes)  # fewer than 10: it says so


def test_compare_profiles_script_applies_the_reproduction_rule(tmp_path, capsys):
    """``benchmarks/compare_profiles.py`` (docs/validation.md's reproduction check): two draws
    of one curve agree; a curve twice as slow does not; a profile without intervals says so."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parent.parent / "benchmarks" / "compare_profiles.py"
    spec = importlib.util.spec_from_file_location("compare_profiles", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    one = save_profile(_profile(fit_stable(_draw(3))), tmp_path / "one.toml")
    two = save_profile(_profile(fit_stable(_draw(4))), tmp_path / "two.toml")
    slow = dataclasses.replace(_draw(5), times=2 * _draw(5).times)
    three = save_profile(_profile(fit_stable(slow)), tmp_path / "three.toml")
    assert [r["agree"] for r in script.compare(one, two)] == [True]
    assert [r["agree"] for r in script.compare(one, three)] == [False]
    bare = save_profile(_profile(dataclasses.replace(fit_stable(_draw(3)), intervals=None)),
                        tmp_path / "bare.toml")  # fmt: skip
    assert script.compare(one, bare)[0]["agree"] is None
    assert script.main([str(one), str(tmp_path / "missing.toml")]) == 2
    assert "compare_profiles:" in capsys.readouterr().err


def test_three_blocks_take_their_median_so_one_interrupted_repeat_cannot_move_the_centre():
    times = np.outer(_curve(N), np.ones(3))
    times[5, 1] *= 50  # one repeat the OS interrupted, in a run of 3 blocks of one repeat
    c = fit_stable(Samples("exchange", N, times, "mpi", 2, blocks=3))
    assert np.allclose(c.median_s, _curve(N))


class _OneRank:
    """A communicator of one rank, as the MPI microbenchmarks use it: barriers pass, rank 0's
    broadcast is its own value."""

    def Barrier(self):
        pass

    def bcast(self, value, root=0):
        return value

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1


def test_the_repeat_count_comes_from_a_probe_long_enough_to_trust(monkeypatch):
    # a fake clock: each operation takes 2 us, and the first call stalls 250 us (cold, the
    # barrier's exit): one probe operation would read 252 us and set a count of 3
    from commsim.bench.calibrate import _mpi_bench

    now = [0.0]
    monkeypatch.setattr(_mpi_bench.time, "perf_counter", lambda: now[0])
    calls = []

    def op(k):
        now[0] += 2e-6 * k + (250e-6 if not calls else 0.0)
        calls.append(k)

    assert _mpi_bench._inner(_OneRank(), op) == 500  # 1 ms / 2 us: the stall's probe ran again
    assert calls == [1, 1]
    calls.clear()
    calls.append(0)  # no stall now: the probe doubles until it lasts 0.2 ms, then runs again
    assert _mpi_bench._inner(_OneRank(), op) == 500
    assert calls[1:] == [1, 2, 4, 8, 16, 32, 64, 128, 128]
    # an operation longer than a repeat: one, and the probe is not timed again
    calls.clear()
    assert _mpi_bench._inner(_OneRank(), lambda k: now.__setitem__(0, now[0] + 3e-3 * k)) == 1


def test_every_block_is_a_pass_over_every_kind_and_size(monkeypatch):
    from commsim.bench.calibrate import _mpi_bench

    order, ticks = [], []
    monkeypatch.setattr(
        _mpi_bench,
        "_one",
        lambda comm, kind, n, per, warmup: order.append((kind, n)) or [1.0] * per,
    )
    sizes = {"pingpong": [8, 16], "overhead": [8]}
    out = _mpi_bench._measure(_OneRank(), sizes, 6, 2, 3, ticks.append)
    assert order == [("pingpong", 8), ("pingpong", 16), ("overhead", 8)] * 3
    assert len(ticks) == 9 and [d["kind"] for d in out] == ["pingpong", "overhead"]
    assert all(len(row) == 6 for d in out for row in d["times"]) and out[0]["blocks"] == 3
