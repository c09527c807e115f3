"""Hockney's level clocks (issue #20): while every rank's clock is one vector, a uniform step
(each rank sends one message and receives one, all of one size and one reduce flag) moves that
vector at once. The shortcut must give the per-rank kernels' numbers bit for bit, take every
step of a ring, and never trust an array that could have changed since it was checked."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import commsim
from commsim.algorithms import REGISTRY
from commsim.errors import ScheduleError
from commsim.models import Hockney
from commsim.models import _numpy_kernels as arrays
from commsim.models.hockney import _Clocks, _read_only

SIZES = np.array([0.0, 1.0, 7.0, 4096.0, 1e6 + 3, 2.0**30])
MODELS = [Hockney(), Hockney(alpha=1e-6, beta=1e-10, gamma=0.0), Hockney(links=2)]
ROWS = [REGISTRY[k] for k in sorted(REGISTRY)]


def _predictions(model, schedule, sizes, monkeypatch):
    """``model``'s predictions with and without level clocks, on array and compiled kernels."""
    out = []
    for level in (False, True):
        for limit in (2**62, -1):  # every prediction small, then every one large
            with monkeypatch.context() as mp:
                mp.setattr(arrays, "NUMPY_MAX_WORK", limit)
                mp.setattr(_Clocks, "LEVEL", level)
                out.append(model.predict(schedule, sizes))
    return out


def _same_bits(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f)))
        for f in ("time", "rank_time", "step_time")
    )


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.collective}/{r.algorithm}")
def test_level_clocks_give_the_per_rank_bits(row, monkeypatch):
    for p in (2, 5, 8, 16):
        s = commsim.build(row.collective, row.algorithm, nranks=p)
        for m in MODELS:
            for sizes in (SIZES, SIZES[4]):
                first, *rest = _predictions(m, s, sizes, monkeypatch)
                assert all(_same_bits(first, r) for r in rest), (p, m)


@pytest.mark.parametrize("limit", [2**62, -1], ids=["arrays", "compiled"])
def test_every_step_of_a_ring_is_uniform_and_a_tree_leaves_the_level(limit, monkeypatch):
    monkeypatch.setattr(arrays, "NUMPY_MAX_WORK", limit)
    ring = commsim.build("allreduce", "ring", nranks=64)
    clocks = Hockney()._run(ring, SIZES)
    assert clocks.level_steps == ring.nsteps == 126
    assert clocks._perm is not None and clocks._flat is not None  # checked once, then trusted
    tree = commsim.build("allreduce", "binomial", nranks=64)
    assert Hockney()._run(tree, SIZES).level_steps == 0  # a tree step leaves ranks idle
    rd = commsim.build("allreduce", "recursive_doubling", nranks=64)
    assert Hockney()._run(rd, SIZES).level_steps == rd.nsteps  # exchanges: every step uniform


@pytest.mark.parametrize("limit", [2**62, -1], ids=["arrays", "compiled"])
@pytest.mark.parametrize("collective", ["allreduce", "alltoall", "allgather", "reduce_scatter"])
def test_direct_steps_are_whole_shift_classes(collective, limit, monkeypatch):
    """Every rank to every other in one step: its rounds are the p - 1 shifts, each a perfect
    matching, so the level moves without grouping p(p - 1) transfers into messages."""
    monkeypatch.setattr(arrays, "NUMPY_MAX_WORK", limit)
    s = commsim.build(collective, "direct", nranks=13)
    assert Hockney()._run(s, SIZES).level_steps == s.nsteps
    half = dataclasses.replace(s, step_fn=lambda i: _drop_one(s.step(i)))
    assert Hockney()._run(half, SIZES).level_steps == 0  # one class short of a sender


def _drop_one(st):
    """The step without its last remote transfer (its shift class is no longer whole)."""
    last = int(np.flatnonzero(st.src != st.dst)[-1])
    keep = np.arange(len(st.src)) != last
    return commsim.Step(*(f[keep] for f in st))


def test_the_level_equals_the_closed_form():
    """Ring allreduce, uniform throughout: ``2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ`` (Patarasuk &
    Yuan 2009), up to rounding."""
    p, n, a, b, g = 1000, 1e6, 2e-6, 1e-10, 1e-11
    t = Hockney(alpha=a, beta=b, gamma=g).predict(commsim.build("allreduce", "ring", nranks=p), n)
    expect = 2 * (p - 1) * a + (p - 1) / p * n * (2 * b + g)
    assert t.time == pytest.approx(expect, rel=1e-12)


def test_writable_arrays_are_checked_every_step(monkeypatch):
    """A step function that reuses one writable array and changes it between steps: the
    shortcut must see the change (a rank sending twice is not uniform)."""
    p = 8
    src = np.arange(p)
    nxt = (src + 1) % p
    ones = np.ones(p, dtype=np.int64)

    def step_fn(i):
        if i == 3:  # rank 0 sends twice: not a permutation any more
            src[1] = 0
        else:
            src[1] = 1
        block = (np.arange(p) - i) % p
        return commsim.Step(src, nxt, block, block, ones, np.zeros(p, bool))

    good = commsim.build("allgather", "ring", nranks=p)
    s = dataclasses.replace(good, step_fn=step_fn)
    clocks = Hockney()._run(s, np.array([1e6]))
    assert clocks.level_steps == 3  # steps 0-2; step 3 leaves the level for per-rank clocks
    assert clocks._perm is None  # nothing writable was trusted


def test_a_read_only_view_of_a_writable_array_is_not_trusted():
    a = np.arange(4)
    v = a[:]
    v.flags.writeable = False
    assert not _read_only(v)
    a.flags.writeable = False
    assert _read_only(a) and _read_only(a[1:])


def test_a_bad_slot_in_a_trusted_ring_is_still_named(monkeypatch):
    """The shortcut trusts a ring's ranks, counts and flags, never its slot ranges."""
    good = commsim.build("allreduce", "ring", nranks=6)

    def step_fn(i):
        st = good.step(i)
        return st._replace(src_slot=st.src_slot + 6, dst_slot=st.src_slot + 6) if i == 4 else st

    bad = dataclasses.replace(good, step_fn=step_fn)
    for limit in (2**62, -1):
        monkeypatch.setattr(arrays, "NUMPY_MAX_WORK", limit)
        with pytest.raises(ScheduleError, match="step 4"):
            Hockney().predict(bad, 1e6)
