"""All sizes in one pass give each size's numbers bit for bit (issue #20), and the direct
TwoLevelHockney run gives the network run's predictions.

Hockney's many-size pass keeps each distinct clock vector once (``_shared_clocks``); one size
takes the one-pass dense kernel; steps of another shape the general path. All three must agree
to the bit, on every row, with channels and links.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import pathlib

import numpy as np
import pytest

import commsim
import commsim.models.hockney as hockney_module
import commsim.models.two_level as two_level_module
from commsim.algorithms import REGISTRY
from commsim.models import Hockney, TwoLevelHockney

_spec = importlib.util.spec_from_file_location(
    "channel_cases", pathlib.Path(__file__).with_name("channel_cases.py")
)
channel_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(channel_cases)

SIZES = np.array([0.0, 1.0, 7.0, 4096.0, 1e6 + 3, 2.0**30])
MODELS = [
    Hockney(),
    Hockney(alpha=1e-6, beta=1e-10, gamma=0.0),
    Hockney(links=2),
    Hockney(ports=2),
]
ROWS = [REGISTRY[k] for k in sorted(REGISTRY)]


def _assert_same_bits(many, one_by_one) -> None:
    assert np.array_equal(many.time, [o.time for o in one_by_one])
    assert np.array_equal(many.rank_time, np.stack([o.rank_time for o in one_by_one], axis=-1))
    assert np.array_equal(many.step_time, np.stack([o.step_time for o in one_by_one], axis=-1))


def _dense(model, schedule, sizes, monkeypatch):
    """The prediction with the dense ``[p, sizes]`` clocks throughout (no shared clocks)."""
    with monkeypatch.context() as mp:
        mp.setattr(hockney_module, "SharedClocks", lambda *args: None)
        return model.predict(schedule, sizes)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.collective}/{r.algorithm}")
def test_one_pass_equals_each_size_bit_for_bit(row, monkeypatch):
    for p in (2, 5, 8, 13):
        s = commsim.build(row.collective, row.algorithm, nranks=p)
        for m in MODELS:
            many = m.predict(s, SIZES)
            _assert_same_bits(many, [m.predict(s, float(n)) for n in SIZES])
            dense = _dense(m, s, SIZES, monkeypatch)
            assert np.array_equal(many.rank_time, dense.rank_time)
            assert np.array_equal(many.step_time, dense.step_time)


@pytest.mark.parametrize("case", channel_cases.cases(8), ids=lambda c: c[0])
def test_one_pass_equals_each_size_with_channels(case, monkeypatch):
    _, s = case
    for m in (Hockney(), Hockney(links=2), Hockney(links=3)):
        many = m.predict(s, SIZES)
        _assert_same_bits(many, [m.predict(s, float(n)) for n in SIZES])
        dense = _dense(m, s, SIZES, monkeypatch)
        assert np.array_equal(many.rank_time, dense.rank_time)
        assert np.array_equal(many.step_time, dense.step_time)


def test_shared_clocks_hold_one_vector_per_distinct_clock():
    """A ring's ranks share one clock vector after every step, whatever the table's
    compactions (p = 64: one every few steps)."""
    from commsim.models._shared_clocks import SharedClocks

    p, sizes = 64, np.geomspace(1.0, 2.0**30, 5)
    s = commsim.build("allreduce", "ring", nranks=p)
    per_unit = sizes / s.nbytes_units
    clocks = SharedClocks(p, len(sizes), p)
    seen = np.zeros(p, np.int64), np.zeros(p, np.int64)
    out = np.zeros(len(sizes))
    for i, st in enumerate(s.steps()):
        done = clocks.step(st, s.slot_offsets, 1, 2e-6, 4e-11 * per_unit, 1e-11 * per_unit,
                           *seen, i + 1, out)  # fmt: skip
        assert done == 1
        assert len(np.unique(clocks.ids)) == 1
    want = Hockney(2e-6, 4e-11, 1e-11).predict(s, sizes)
    assert np.array_equal(clocks.dense(), want.rank_time)


def test_sharing_given_up_is_still_exact(monkeypatch):
    """Past the sharing limit the clocks go dense mid-run, with the same numbers."""
    from commsim.models import _shared_clocks

    s = commsim.build("broadcast", "binomial", nranks=64)
    m = Hockney()
    want = _dense(m, s, SIZES, monkeypatch)
    monkeypatch.setattr(_shared_clocks.SharedClocks, "_compact", lambda self, m: False)
    got = m.predict(s, SIZES)
    assert np.array_equal(got.rank_time, want.rank_time)
    assert np.array_equal(got.step_time, want.step_time)


# -- TwoLevelHockney: the direct run against the network's run --------------------------------

TWO_LEVEL = [
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
]


def _direct(model, schedule, sizes, monkeypatch):
    with monkeypatch.context() as mp:  # every schedule is "too long for a critical path"
        mp.setattr(two_level_module, "CRITICAL_PATH_BUDGET", -1)
        return model._direct_run(schedule, sizes)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.collective}/{r.algorithm}")
def test_two_level_direct_run_is_the_network_run(row, monkeypatch):
    ran = 0
    for p in (2, 3, 8, 12, 13):
        s = commsim.build(row.collective, row.algorithm, nranks=p)
        if s.in_network:  # TwoLevelHockney has no reducing switch: its helpers sit on hosts
            s = dataclasses.replace(s, in_network=False)
        for m in TWO_LEVEL:
            direct = _direct(m, s, SIZES, monkeypatch)
            if direct is None:  # a step that is not one round of distinct messages
                continue
            ran += 1
            net = m._topology(p)._run(s, SIZES)
            for a, b in ((direct.rank_clock, net.rank_clock), (direct.step_time, net.step_time)):
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)
            total = net.rank_clock.max(axis=0)
            du, nu = direct.usage(total), net.usage(total)
            np.testing.assert_array_equal(du.link_bytes, nu.link_bytes)
            np.testing.assert_allclose(du.time_parts, nu.time_parts, rtol=1e-12, atol=1e-25)
            assert du.limiting == nu.limiting
    if row.algorithm == "ring":
        assert ran, "the ring must take the direct run"


def test_two_level_predict_takes_the_direct_run_past_the_budget(monkeypatch):
    m = TWO_LEVEL[0]
    s = commsim.build("allreduce", "ring", nranks=12)
    before = m.predict(s, SIZES)
    monkeypatch.setattr(two_level_module, "CRITICAL_PATH_BUDGET", 10)
    after = m.predict(s, SIZES)
    np.testing.assert_allclose(after.rank_time, before.rank_time, rtol=1e-12, atol=0)
    assert before.network.critical_path is not None and after.network.critical_path is None
    assert after.notes[0].startswith("critical path not tracked: 264 messages")


def test_two_level_channels_take_the_network_run(monkeypatch):
    s = channel_cases.cases(8)[0][1]
    assert s.nchannels > 1
    assert _direct(TWO_LEVEL[0], s, SIZES, monkeypatch) is None


def test_two_level_direct_run_with_one_rank_per_server_is_the_network_run(monkeypatch):
    m = TwoLevelHockney(("1us", "100GB/s"), ("5us", "10GB/s"), ranks_per_node=1, gamma=1e-10)
    for p in (2, 5):
        s = commsim.build("allreduce", "ring", nranks=p)
        direct = _direct(m, s, SIZES, monkeypatch)
        assert direct is not None
        net = m._topology(p)._run(s, SIZES)
        np.testing.assert_allclose(direct.rank_clock, net.rank_clock, rtol=1e-12, atol=0)
        total = net.rank_clock.max(axis=0)
        np.testing.assert_array_equal(direct.usage(total).link_bytes, net.usage(total).link_bytes)
