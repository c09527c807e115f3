"""``port_messages`` remembers a schedule's grouped and matched steps: a schedule predicted again
gets the same bits, memory stays bounded, and a malformed step is still named."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import commsim
from commsim import _messages
from commsim._messages import port_messages, remembered
from commsim.errors import ScheduleError
from commsim.models import Hockney

SIZES = np.array([0.0, 8.0, 1e6])
MODELS = [Hockney(1e-6, 1e-9, 2e-10), Hockney(0.0, 1.0, 0.0), Hockney(2e-6, 1e-10, 0.0, ports=2)]


def _general(p: int = 7) -> commsim.Schedule:
    """A schedule whose steps take Hockney's general path (a rank sends several messages)."""
    return commsim.build("allreduce", "packed_trees", nranks=p, segments=3)


@pytest.mark.parametrize("p", [3, 7, 12])
def test_predicting_again_gives_the_same_bits(p):
    s = _general(p)
    for model in MODELS:
        fresh = model.predict(_general(p), SIZES)
        first, again = model.predict(s, SIZES), model.predict(s, SIZES)
        np.testing.assert_array_equal(first.time, fresh.time)
        np.testing.assert_array_equal(again.time, fresh.time)
    assert any(remembered(s, i, 1) for i in range(s.nsteps))  # the memo was used


def test_answers_are_shared_and_bounded(monkeypatch):
    s = commsim.build("alltoall", "direct", nranks=5)
    a = port_messages(s.step(0), s, 1, 0)
    assert remembered(s, 0, 1) and not remembered(s, 0, 2)
    assert port_messages(s.step(0), s, 1, 0) is a
    assert port_messages(s.step(0), s, 1) is not a  # no index: nothing remembered or read
    t = commsim.build("alltoall", "direct", nranks=5)
    monkeypatch.setattr(_messages, "MEMO_MESSAGES", len(a[0].src) - 1)
    port_messages(t.step(0), t, 1, 0)
    assert not remembered(t, 0, 1)  # over the budget: recomputed each time


def test_a_malformed_step_is_named_on_every_prediction():
    good = _general()
    last = good.nsteps - 1

    def step(i):
        st = good.step(i)
        return st._replace(dst_slot=st.dst_slot + 99) if i == last else st

    bad = dataclasses.replace(good, step_fn=step)
    for _ in range(2):
        with pytest.raises(ScheduleError, match=f"step {last}"):
            Hockney(1e-6, 1e-9, 0.0).predict(bad, SIZES)
    assert any(remembered(bad, i, 1) for i in range(last)) and not remembered(bad, last, 1)
