"""TwoLevelHockney's periodic clocks (issue #20): ``g`` clocks standing for ``p`` ranks give the
dense direct run's numbers bit for bit, clocks, step times, components and link bytes; the
shift check refuses every step the shift does not map onto itself; and a rank's send and
receive that end together leave it the receive's components whatever the messages' order
(the tie rule that makes the shortcut exact)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import commsim
import commsim.models.two_level as two_level_module
from commsim._ir import Step, share_between_steps
from commsim.algorithms._combinators import concat
from commsim.models import TwoLevelHockney
from commsim.models._periodic_clocks import PeriodicClocks, touching_messages
from commsim.models._topology_kernels import round_per_message

SIZES = np.array([0.0, 1.0, 7.0, 4096.0, 1e6 + 3, 2.0**30])
MODELS = [
    TwoLevelHockney(("1us", "100GB/s"), ("5us", "10GB/s"), ranks_per_node=4),
    TwoLevelHockney(
        ("3us", "1GB/s"),
        ("1us", "100GB/s"),
        ranks_per_node=3,
        gamma=1e-10,
        launch="4us",
        reduction_overlap=True,
    ),
    TwoLevelHockney(("1us", "inf"), ("2us", "25GB/s"), ranks_per_node=8, gamma=0),
    TwoLevelHockney(("0s", "inf"), ("0s", "inf"), ranks_per_node=2, gamma=0),  # all ties
]


def _run(model, schedule, monkeypatch, periodic: bool):
    with monkeypatch.context() as mp:
        mp.setattr(two_level_module, "CRITICAL_PATH_BUDGET", -1)  # always the direct run
        if not periodic:
            mp.setattr(two_level_module, "period", lambda server, clock: None)
        return model._direct_run(schedule, SIZES)


def _same(a, b) -> None:
    for x, y in ((a.rank_clock, b.rank_clock), (a.step_time, b.step_time), (a.comp, b.comp)):
        np.testing.assert_array_equal(x, y)
    total = b.rank_clock.max(axis=0)
    ua, ub = a.usage(total), b.usage(total)
    np.testing.assert_array_equal(ua.link_bytes, ub.link_bytes)
    np.testing.assert_array_equal(ua.time_parts, ub.time_parts)


@pytest.mark.parametrize("collective", ["allreduce", "reduce_scatter", "allgather"])
@pytest.mark.parametrize("m", range(len(MODELS)))
def test_periodic_clocks_are_the_dense_clocks_bit_for_bit(collective, m, monkeypatch):
    model = MODELS[m]
    g = model.ranks_per_node
    for p in (g, 2 * g, 5 * g, 12):
        if p % g:
            continue
        s = commsim.build(collective, "ring", nranks=p)
        fast = _run(model, s, monkeypatch, periodic=True)
        assert fast.periodic is None  # expanded at the end
        _same(fast, _run(model, s, monkeypatch, periodic=False))


def test_a_ring_takes_the_periodic_clocks_every_step(monkeypatch):
    model = MODELS[0]
    s = commsim.build("allreduce", "ring", nranks=16)
    visited = []
    real = two_level_module._DirectRun._periodic_step

    def spy(run, k, st):
        done = real(run, k, st)
        visited.append(done)
        return done

    monkeypatch.setattr(two_level_module._DirectRun, "_periodic_step", spy)
    _run(model, s, monkeypatch, periodic=True)
    assert visited == [True] * s.nsteps


def test_leaving_the_periodic_clocks_midway_keeps_the_numbers(monkeypatch):
    """A ring reduce-scatter (periodic) then a ring allgather whose arrays are fresh copies in
    every step (not declared shared): the clocks leave the shortcut at the seam."""
    for model in MODELS:
        p = 4 * model.ranks_per_node
        s = concat(
            commsim.build("reduce_scatter", "ring", nranks=p),
            _copied(commsim.build("allgather", "ring", nranks=p)),
            collective="allreduce",
            algorithm="ring_then_copied_ring",
        )
        fast = _run(model, s, monkeypatch, True)
        assert fast is not None
        _same(fast, _run(model, s, monkeypatch, False))


def _copied(schedule):
    """``schedule`` with every step's arrays copied (none declared shared between steps)."""
    return dataclasses.replace(
        schedule, step_fn=lambda i: Step(*(np.array(f) for f in schedule.step(i)[:6]))
    )


def _ring_arrays(p: int, shift: int = 1):
    r = np.arange(p)
    return r, (r + shift) % p, np.ones(p, dtype=np.int64), np.zeros(p, dtype=bool)


def test_the_shift_check_takes_rings_and_refuses_what_the_shift_moves():
    p, g = 12, 4
    src, dst, count, red = _ring_arrays(p)
    touching = touching_messages(src, dst, count, red, p, g)
    assert touching is not None
    np.testing.assert_array_equal(touching, [0, 1, 2, 3, 11])  # ends below g, step order
    order = np.random.default_rng(0).permutation(p)  # message order does not matter
    assert touching_messages(src[order], dst[order], count, red, p, g) is not None
    bad_count = count.copy()
    bad_count[5] = 2  # rank 5 sends 2 units, rank 1 one: not shifted onto itself
    assert touching_messages(src, dst, bad_count, red, p, g) is None
    bad_red = red.copy()
    bad_red[0] = True
    assert touching_messages(src, dst, count, bad_red, p, g) is None
    assert touching_messages(src, (src + 1) % p, count, red, p, 5) is None  # 12 % 5
    half = np.arange(p // 2)
    assert touching_messages(half, half + 1, count[:6], red[:6], p, g) is None  # ranks 6.. idle
    twice = np.array([0, 0, 4, 8]), np.array([1, 2, 5, 9])
    assert touching_messages(*twice, count[:4], red[:4], p, g) is None  # rank 0 sends twice
    assert touching_messages(src, src, count, red, p, g) is None  # to itself


def test_steps_of_arrays_not_declared_shared_take_the_dense_path(monkeypatch):
    """The same ring, its arrays copied for every step (not declared shared): no shortcut,
    same numbers."""
    model = MODELS[0]
    ring = commsim.build("allreduce", "ring", nranks=8)
    fresh = _copied(ring)
    run = _run(model, fresh, monkeypatch, periodic=True)
    assert run.periodic is None
    _same(run, _run(model, ring, monkeypatch, periodic=False))


def test_a_send_and_a_receive_that_tie_leave_the_receives_components():
    """Rank 1 sends to 2 and receives from 0, both ending at t = 2: whichever message comes
    first in the round, rank 1's clock components are the received message's."""
    ns, nc = 1, 5
    for order in ([0, 1], [1, 0]):
        clock = np.array([[1.0], [1.0], [1.0]])
        comp = np.zeros((3, nc, ns))
        comp[0, 2, 0], comp[1, 2, 0], comp[2, 2, 0] = 1.0, 1.0, 1.0
        comp[0, 2, 0], comp[0, 4, 0] = 0.5, 0.5  # rank 0's clock: other 0.5 + class-1 0.5
        src, dst = np.array([0, 1])[order], np.array([1, 2])[order]
        one = np.ones(2)
        round_per_message(
            clock, comp, src, dst, one, np.zeros(2), np.ones(2), np.zeros(2),
            np.zeros(2, dtype=np.int64), one, np.ones(ns), np.zeros(ns), np.empty((2, ns)),
            np.empty((2, nc, ns)), 0, np.zeros(3, dtype=np.int64), np.zeros(0, dtype=np.int64),
            0, False,
        )  # fmt: skip
        assert clock[1, 0] == 2.0
        np.testing.assert_array_equal(comp[1, :, 0], [1.0, 0.0, 0.5, 0.0, 0.5])


def test_declared_views_are_bounded_by_their_array():
    from commsim._ir import shared_bounds

    base = np.arange(3, 20)
    share_between_steps(base)
    assert shared_bounds(base[5:9]) == (3, 19)  # the array's range bounds each view
    assert shared_bounds(base) == (3, 19)
    assert shared_bounds(np.arange(4)) is None
    assert shared_bounds(np.arange(4)[1:]) is None


def test_a_block_past_the_slots_is_refused_when_its_array_was_seen_in_bounds():
    p, g = 8, 2
    src = np.arange(p)
    dst, count, red, slots = (src + 1) % p, np.ones(p, np.int64), np.ones(p, bool), np.arange(10)
    share_between_steps(src, dst, count, red, slots)
    per = PeriodicClocks(np.zeros((p, 1)), np.zeros((p, 5, 1)), g)

    def step(lo: int) -> Step:
        view = slots[lo : lo + p]
        return Step(src, dst, view, view, count, red)

    assert per.touching(step(0), 10) is not None  # blocks 0..8, array 0..9 fits
    assert per.touching(step(2), 10) is not None  # blocks 2..10
    assert per.touching(step(0), 9) is not None  # 9 slots: this view's blocks still fit
    assert per.touching(step(2), 9) is None  # block 9..10 is past 9 slots
    assert per.touching(step(2), 10) is not None


def test_shared_views_of_one_unshared_array_are_bounded_each_by_its_own_values():
    p, g = 8, 2
    src = np.arange(p)
    dst, count, red = (src + 1) % p, np.ones(p, np.int64), np.ones(p, bool)
    low, high = np.arange(16).reshape(2, 8)  # views: 0..7 and 8..15 of one unshared array
    share_between_steps(src, dst, count, red, low, high)
    per = PeriodicClocks(np.zeros((p, 1)), np.zeros((p, 5, 1)), g)
    assert per.touching(Step(src, dst, low, low, count, red), 9) is not None
    assert per.touching(Step(src, dst, high, high, count, red), 9) is None  # blocks to 16 > 9
