"""Calibration: robust piecewise fits, profiles as files, models of a measured transport."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim import units
from commsim.algorithms import REGISTRY, channels
from commsim.bench.calibrate import Samples, fit_curve, fit_pieces, profile_from_samples
from commsim.errors import CommsimError, ParameterError
from commsim.models import Hockney, LogGP
from commsim.profiles import (
    Piece,
    PiecewiseLinear,
    Profile,
    StepReduction,
    load_profile,
    save_profile,
)

SIZES = 2.0 ** np.arange(3, 27)  # 8 B .. 64 MiB


def _samples(kind, f, repeats=9, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    t = np.outer(f(SIZES), np.ones(repeats))
    t *= 1 + noise * rng.standard_normal(t.shape)
    return Samples(kind, SIZES, t, "mpi", 2)


def test_a_line_is_fitted_exactly_with_one_piece():
    c = fit_curve(_samples("pingpong", lambda n: 3e-6 + n / 7e9))
    [p] = c.fit.pieces
    assert p.alpha == pytest.approx(3e-6, rel=1e-9) and 1 / p.beta == pytest.approx(7e9, rel=1e-9)
    assert c.quality.r2 == pytest.approx(1.0) and c.quality.max_rel_residual < 1e-9


def test_a_protocol_switch_is_found_from_the_data():
    def f(n):
        return np.where(n < 16384, 1e-6 + n / 2e9, np.where(n < 2**21, 8e-6 + n / 9e9, n / 5e9))

    fit, resid = fit_pieces(SIZES, f(SIZES))
    assert [p.start for p in fit.pieces] == [0.0, 16384.0, 2.0**21]
    assert np.abs(resid).max() < 1e-9
    assert fit.pieces[1].alpha == pytest.approx(8e-6) and fit.pieces[2].alpha == pytest.approx(
        0, abs=1e-15
    )


def test_noise_alone_does_not_make_pieces():
    c = fit_curve(_samples("pingpong", lambda n: 2e-6 + n / 1e10, noise=0.02, seed=3))
    assert len(c.fit.pieces) == 1
    assert c.fit.pieces[0].alpha == pytest.approx(2e-6, rel=0.05)


def test_one_outlier_repeat_does_not_move_the_fit():
    clean = _samples("pingpong", lambda n: 2e-6 + n / 1e10, noise=0.01, seed=1)
    times = clean.times.copy()
    times[4, 0] *= 50  # the OS took the core away during one repeat at 128 B
    times[20, 3] *= 20
    dirty = Samples("pingpong", SIZES, times, "mpi", 2)
    a, b = fit_curve(clean).fit, fit_curve(dirty).fit
    assert len(b.pieces) == 1
    assert b.pieces[0].alpha == pytest.approx(a.pieces[0].alpha, rel=0.02)
    assert b.pieces[0].beta == pytest.approx(a.pieces[0].beta, rel=0.02)
    # what a mean would have done: the 128 B point moves by ~5x
    assert times[4].mean() > 5 * np.median(times[4])


def test_one_outlier_size_is_downweighted():
    t = 2e-6 + SIZES / 1e10
    t[10] *= 3  # a whole size disturbed
    fit, resid = fit_pieces(SIZES, t, noise=0.01)
    assert fit.pieces[0].alpha == pytest.approx(2e-6, rel=0.05)
    assert abs(resid[10]) > 0.5 and np.median(np.abs(resid)) < 0.01


@pytest.mark.parametrize(
    ("sizes", "times", "match"),
    [
        ([8.0], [1e-6], "at least 2 sizes"),
        ([8.0, 4.0], [1e-6, 2e-6], "increase"),
        ([8.0, 16.0], [1e-6, 0.0], "positive"),
        ([8.0, 16.0], [1e-6, float("nan")], "positive"),
    ],
)
def test_fits_refuse_bad_input_in_one_line(sizes, times, match):
    with pytest.raises(CommsimError, match=match):
        fit_pieces(np.array(sizes), np.array(times))


def test_samples_are_checked():
    with pytest.raises(CommsimError, match="unknown sample kind"):
        Samples("latency", [8], [[1.0]], "mpi", 2)
    with pytest.raises(CommsimError, match="times"):
        Samples("pingpong", [8, 16], [[1.0]], "mpi", 2)


def _profile(*extra):
    samples = [
        _samples("pingpong", lambda n: np.where(n < 65536, 1e-6 + n / 4e9, 9e-6 + n / 8e9)),
        _samples("exchange", lambda n: 1.5e-6 + n / 6e9),
        _samples("reduction", lambda n: 5e-7 + n / 20e9),
        _samples("burst", lambda n: 4e-7 + n / 10e9),
        Samples("overhead", SIZES[:6], np.full((6, 5), 3e-7), "mpi", 2),
        Samples("call", [0], np.full((1, 5), 1e-4), "mpi", 2),
        *extra,
    ]
    return profile_from_samples(samples, backend="mpi", nranks=2)


def test_a_profile_derives_gamma_loggp_and_the_call_overhead():
    p = _profile()
    assert p.gamma == pytest.approx(1 / 20e9)
    assert p.call_overhead == {"mpi": pytest.approx(1e-4)}
    lg = p.loggp
    assert lg.o == pytest.approx(3e-7) and lg.g == pytest.approx(4e-7 + 8 / 10e9)
    assert pytest.approx(1 / 10e9) == lg.G and pytest.approx(1e-6 - 2 * 3e-7) == lg.L
    assert p.message_curve().kind == "exchange"


def test_a_profile_round_trips_through_its_file(tmp_path):
    p = _profile()
    q = load_profile(save_profile(p, tmp_path / "p.toml"))
    assert q.to_dict() == p.to_dict()
    text = (tmp_path / "p.toml").read_text()
    assert "GB/s" in text and "# commsim profile" in text  # readable comments


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda t: t.replace('format = "commsim-profile"', 'format = "x"'), "format"),
        (lambda t: t.replace("version = 1", "version = 7"), "version"),
        (lambda t: t + "\ncolour = 1\n", "unknown field"),
        (lambda t: t.replace("alpha_s = ", "alpha_s = -", 1), "alpha_s: must be >= 0"),
        (lambda t: t.replace("nranks = 2", 'nranks = "two"'), "nranks"),
        (lambda t: t.replace("[curves.", "[[curves.", 1), "TOML|curves"),
        (lambda t: "this is not toml =", "not valid TOML"),
    ],
)
def test_a_bad_profile_is_one_line_naming_the_field(tmp_path, edit, match):
    path = save_profile(_profile(), tmp_path / "p.toml")
    path.write_text(edit(path.read_text()))
    with pytest.raises(ParameterError, match=match) as e:
        load_profile(path)
    assert "\n" not in str(e.value) and str(path) in str(e.value)


def test_a_hand_written_profile_may_use_units(tmp_path):
    path = tmp_path / "hand.toml"
    path.write_text(
        'format = "commsim-profile"\nversion = 1\nbackend = "mpi"\nnranks = 2\n'
        "[curves.pingpong]\n[[curves.pingpong.pieces]]\n"
        'start_bytes = 0\nalpha_s = "2us"\nbeta_s_per_byte = "10GB/s"\n'
        '[[curves.pingpong.pieces]]\nstart_bytes = "64KiB"\nalpha_s = "10us"\n'
        'beta_s_per_byte = "12GB/s"\n'
    )
    f = load_profile(path).message_curve().fit
    assert f.pieces[1].start == 65536 and f.pieces[0].alpha == pytest.approx(2e-6)
    assert float(f(65536)) == pytest.approx(10e-6 + 65536 / 12e9)


def test_one_piece_is_hockney_exactly_for_every_registry_row():
    plain = Hockney(alpha=2e-6, beta=1e-9, gamma=3e-10)
    measured = Hockney(gamma=3e-10, message=PiecewiseLinear.hockney(2e-6, 1e-9))
    two = PiecewiseLinear((Piece(0, 2e-6, 1e-9), Piece(1e15, 0.0, 0.0)))  # second never used
    general = Hockney(gamma=3e-10, message=two)  # takes the numpy path
    sizes = np.array([8.0, 4096.0, 3e6])
    for collective, algorithm in sorted(REGISTRY):
        for p in (2, 5, 8):
            try:
                s = commsim.build(collective, algorithm, nranks=p)
            except CommsimError:
                continue
            want = plain.predict(s, sizes).time
            np.testing.assert_allclose(measured.predict(s, sizes).time, want, rtol=1e-12)
            np.testing.assert_allclose(general.predict(s, sizes).time, want, rtol=1e-12)


def test_pieces_price_each_message_by_its_own_size():
    # ring allreduce on p ranks: 2(p-1) steps, each one message of n/p bytes per rank
    # (p-1 of them reduce n/p bytes): T = 2(p-1) t(n/p) + (p-1)(n/p) gamma
    t = PiecewiseLinear((Piece(0, 1e-6, 1e-9), Piece(4096, 5e-6, 2e-10)))
    m = Hockney(gamma=1e-10, message=t)
    p = 4
    s = commsim.build("allreduce", "ring", nranks=p)
    for n in (4096.0, 65536.0, 4e6):
        want = 2 * (p - 1) * float(t(n / p)) + (p - 1) * (n / p) * 1e-10
        assert m.predict(s, n).time == pytest.approx(want, rel=1e-12)
    # and the prediction never undercuts the model's own lower bound
    sizes = 2.0 ** np.arange(3, 27)
    assert (m.predict(s, sizes).time >= m.lower_bound("allreduce", p, sizes) * (1 - 1e-12)).all()


def test_models_from_a_profile():
    p = _profile()
    h = Hockney.from_profile(p)
    assert h.message is p.curves["exchange"].fit and h.gamma == p.gamma
    assert "exchange curve" in h.describe()
    lg = LogGP.from_profile(p)
    assert (lg.L, lg.o, lg.g, lg.G) == (p.loggp.L, p.loggp.o, p.loggp.g, p.loggp.G)
    bare = Profile("mpi", 2, "", "", "", {"pingpong": p.curves["pingpong"]})
    with pytest.raises(ParameterError, match="no LogGP parameters"):
        LogGP.from_profile(bare)


def test_a_cluster_link_class_can_come_from_a_profile(tmp_path):
    from commsim.clusters import load_cluster

    save_profile(_profile(), tmp_path / "intra.toml")
    text = (
        'nodes = 2\ngpus_per_node = 2\n[intra]\nprofile = "intra.toml"\n'
        '[inter]\nbandwidth = "100Gb/s"\nlatency = "2us"\n[topology]\nkind = "switch"\n'
    )
    (tmp_path / "c.toml").write_text(text)
    c = load_cluster(tmp_path / "c.toml")  # the profile's name is relative to the cluster file
    intra = c.link_classes["nvlink"]  # [intra]'s default kind
    assert intra.bandwidth == pytest.approx(6e9) and intra.latency == pytest.approx(1.5e-6)
    (tmp_path / "c.toml").write_text(text.replace('profile = "intra.toml"', 'profile = "x.toml"'))
    with pytest.raises(ParameterError, match=r"\[intra\] profile: cannot read profile"):
        load_cluster(tmp_path / "c.toml")
    both = text.replace('profile = "intra.toml"', 'profile = "intra.toml"\nlatency = "1us"')
    (tmp_path / "c.toml").write_text(both)
    with pytest.raises(ParameterError, match="not both"):
        load_cluster(tmp_path / "c.toml")


def _step_profile():
    """A profile with a step curve: the step costs 3 us + n/(2 GB/s), the exchange inside it
    1.5 us + n/(6 GB/s), the reduction alone 0.5 us + n/(20 GB/s)."""
    return _profile(_samples("step", lambda n: 3e-6 + n / 2e9))


def test_a_step_curve_prices_each_reduction_as_measured_inside_a_step():
    p = _step_profile()
    r = p.step_reduction()
    assert isinstance(r, StepReduction)
    ex, red = p.curves["exchange"].fit, p.curves["reduction"].fit

    def r_want(b):  # the module's rule, from the three fits
        return max(float(p.curves["step"].fit(b)) - float(ex(b)), float(red(b)))

    m = Hockney.from_profile(p)
    assert m.reduction == r and m.gamma == pytest.approx(1 / 20e9)  # r's floor: the bound's
    assert "reduction in a step" in m.describe()
    ring = commsim.build("allreduce", "ring", nranks=2)
    rd = commsim.build("allreduce", "recursive_doubling", nranks=2)
    for n in (4096.0, 65536.0, 4e6):
        # ring on 2 ranks: exchange halves and reduce one, then exchange the reduced halves
        want = 2 * float(ex(n / 2)) + r_want(n / 2)
        assert m.predict(ring, n).time == pytest.approx(want, rel=1e-12)
        # recursive doubling on 2 ranks: one exchange of everything, one reduction of it
        assert m.predict(rd, n).time == pytest.approx(float(ex(n)) + r_want(n), rel=1e-12)
    # steps that reduce nothing cost what the message curve says, as before
    ag = commsim.build("allgather", "ring", nranks=4)
    np.testing.assert_allclose(
        m.predict(ag, SIZES).time, Hockney.from_profile(_profile()).predict(ag, SIZES).time,
        rtol=1e-12,
    )  # fmt: skip


def test_the_step_reduction_never_undercuts_the_bound_or_the_reduction_alone():
    p = _step_profile()
    m = Hockney.from_profile(p)
    r = p.step_reduction()
    assert (r(SIZES) >= p.curves["reduction"].fit(SIZES)).all()
    for name in ("ring", "rabenseifner", "recursive_doubling"):
        for q in (2, 3, 8):
            s = commsim.build("allreduce", name, nranks=q)
            t = m.predict(s, SIZES).time
            assert (t >= m.lower_bound("allreduce", q, SIZES) * (1 - 1e-12)).all(), (name, q)
    # a profile without a step curve keeps gamma (older files keep their numbers)
    assert (
        _profile().step_reduction() is None and Hockney.from_profile(_profile()).reduction is None
    )


def test_a_step_profile_round_trips_and_its_model_says_so_in_json(tmp_path):
    p = _step_profile()
    q = load_profile(save_profile(p, tmp_path / "p.toml"))
    assert q.to_dict() == p.to_dict()
    d = Hockney.from_profile(q).to_dict()
    assert d["reduction"]["step"] == p.curves["step"].fit.to_dict()
    with pytest.raises(ParameterError, match="StepReduction"):
        Hockney(reduction=lambda b: b)


def _crossing_profile():
    """step − exchange = 3 us flat, under the reduction alone (0.5 us + n/(20 GB/s)) from
    50 KB on: there the floor binds."""
    return _profile(_samples("step", lambda n: 4.5e-6 + n / 6e9))


def test_the_reduction_alone_is_the_floor_where_the_step_costs_less():
    p = _crossing_profile()
    ex, red = p.curves["exchange"].fit, p.curves["reduction"].fit
    m = Hockney.from_profile(p)
    rd = commsim.build("allreduce", "recursive_doubling", nranks=2)
    for n in (4096.0, 4e6):  # below the crossing r = 3 us, above it the reduction alone
        want = float(ex(n)) + max(3e-6, float(red(n)))
        assert m.predict(rd, n).time == pytest.approx(want, rel=1e-9)
    assert float(red(4e6)) > 3e-6 > float(red(4096.0))


@pytest.mark.parametrize(("ports", "links"), [(1, 1), (2, 1), ("multi", 1), (1, 2)])
def test_step_reductions_never_undercut_the_bound_with_ports_or_links(ports, links):
    for p in (_step_profile(), _crossing_profile()):
        m = Hockney.from_profile(p, ports=ports, links=links)
        for name in ("ring", "rabenseifner", "recursive_doubling"):
            for q in (3, 4, 8):
                s = commsim.build("allreduce", name, nranks=q)
                s = channels(s, 2) if links > 1 else s
                t = m.predict(s, SIZES).time
                bound = m.lower_bound("allreduce", q, SIZES)
                assert (t >= bound * (1 - 1e-12)).all(), (name, q)


def test_steps_without_reductions_keep_the_fast_paths_and_the_same_numbers():
    """A measured reduction alone keeps the level clocks (a uniform step that reduces moves
    them by its message size's r) and sends only other reducing steps to the numpy path; the
    same model with a two-piece message curve whose second piece is never reached (every step
    on the numpy path) agrees to rounding."""
    r = _step_profile().step_reduction()
    fast = Hockney(alpha=1.5e-6, beta=1 / 6e9, reduction=r)
    never = PiecewiseLinear((Piece(0, 1.5e-6, 1 / 6e9), Piece(1e15, 0.0, 0.0)))
    slow = Hockney(message=never, reduction=r)
    sizes = np.concatenate([[0.0], SIZES])
    for name in ("ring", "rabenseifner", "recursive_doubling"):
        for q in (2, 5, 256):
            s = commsim.build("allreduce", name, nranks=q)
            np.testing.assert_allclose(
                fast.predict(s, sizes).time, slow.predict(s, sizes).time, rtol=1e-12
            )
    ring = commsim.build("allreduce", "ring", nranks=256)
    assert fast._run(ring, SIZES).level_steps == ring.nsteps  # every step on level clocks
    assert slow._run(ring, SIZES).level_steps == 0
    assert "reduction in a step" in fast.describe() and "reduction=" in repr(fast)


def test_models_that_cannot_take_a_step_reduction_refuse_it():
    from commsim.models import Twin, compressed

    m = Hockney.from_profile(_step_profile())
    with pytest.raises(ParameterError, match="--gamma"):
        compressed(m, "int8")
    r = m.reduction
    with pytest.raises(ParameterError, match="measured reduction"):
        Twin.of(Hockney(reduction=r), commsim.build("allreduce", "ring", nranks=4))


def test_a_reduction_of_zero_bytes_costs_nothing():
    """At a size of 0 bytes nothing is reduced: the step curve's intercept is not charged."""
    p = _step_profile()
    with_step = Hockney.from_profile(p)
    without = Hockney(message=p.curves["exchange"].fit, gamma=p.gamma)
    for name in ("ring", "recursive_doubling"):
        s = commsim.build("allreduce", name, nranks=8)
        t = with_step.predict(s, np.array([0.0, 4096.0])).time
        assert t[0] == without.predict(s, 0.0).time and t[1] > without.predict(s, 4096.0).time


def test_a_launch_bound_curve_says_its_bandwidth_is_not_measured():
    """A time flat within noise from 8 B to 64 MiB (120 us a copy, a GPU driven by a host that
    launches slower than the device copies: the H200 run of docs/benchmarks.md) gets a note;
    curves that grow, and curves over a short span, get none."""
    flat = _samples("pingpong", lambda n: 1.2e-4 + 0 * n, noise=0.02)
    p = _profile(Samples("exchange", SIZES, np.outer(1.2e-4 + SIZES / 1e15, np.ones(9)), "cuda", 2))
    assert not any("hardly grows" in n for n in _profile().notes)
    (note,) = [n for n in p.notes if "hardly grows" in n]
    assert note.startswith("exchange: ") and "hides the transfer" in note
    curve = profile_from_samples([flat], backend="cuda", nranks=2).curves["pingpong"]
    assert curve.hidden_transfer() is not None
    short = profile_from_samples(
        [Samples("pingpong", SIZES[:9], np.full((9, 9), 1e-4), "cuda", 2)], backend="cuda", nranks=2
    )  # 8 B .. 2 KiB: a fixed cost is what small messages cost
    assert short.curves["pingpong"].hidden_transfer() is None


def test_a_bandwidth_the_noise_leaves_unbounded_prints_as_a_lower_bound():
    """A blocked fit whose bandwidth interval has no upper end prints ``>=`` its lower end."""
    from commsim.cli.calibrate import CalibrateResult, render

    rng = np.random.default_rng(3)
    t = 1.2e-4 * (1 + 0.03 * rng.standard_normal((len(SIZES), 30))) + SIZES[:, None] / 1e14
    p = profile_from_samples([Samples("pingpong", SIZES, t, "cuda", 2, blocks=10)],
                             backend="cuda", nranks=2)  # fmt: skip
    c = p.curves["pingpong"]
    unbounded = [
        i for i in range(len(c.fit.pieces)) if c.intervals.beta[i][0] <= 0 < c.fit.pieces[i].beta
    ]
    text = render(CalibrateResult(p, (), None), False)
    assert unbounded
    rows = text.splitlines()
    for i in unbounded:
        cell = f">={units.format_bandwidth(1 / c.intervals.beta[i][1])}"
        start = units.format_size(c.fit.pieces[i].start, exact=False)
        assert any(ln.split()[:1] in ([start], ["pingpong"]) and cell in ln.split() for ln in rows)
