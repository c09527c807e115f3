"""The Hockney model's array kernels (``_numpy_kernels``, small predictions) give the compiled
kernels' numbers bit for bit, on every registry row, with channels, links and ports, at one size
and at many (issue #20: a small prediction does not start numba).

The compiled side runs with many sizes on shared clocks (``_shared_clocks``) and with one size
in the one-pass kernel; the array side on the dense ``[p, sizes]`` clocks; so these tests also
keep the compiled kernels checked now that small predictions in the other tests take the
array path.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import pathlib

import numpy as np
import pytest

import commsim
from commsim.algorithms import REGISTRY
from commsim.errors import ScheduleError
from commsim.models import Hockney
from commsim.models import _kernels as compiled
from commsim.models import _numpy_kernels as arrays
from commsim.profiles import Piece, PiecewiseLinear

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
    Hockney(ports="multi"),
]
ROWS = [REGISTRY[k] for k in sorted(REGISTRY)]


def _both(model, schedule, sizes, monkeypatch):
    """``model``'s prediction with the array kernels, then with the compiled ones."""
    out = []
    for limit in (2**62, -1):  # every prediction small, then every one large
        with monkeypatch.context() as mp:
            mp.setattr(arrays, "NUMPY_MAX_WORK", limit)
            out.append(model.predict(schedule, sizes))
    return out


def _assert_same_bits(a, b) -> None:
    for name in ("time", "rank_time", "step_time"):
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        assert x.shape == y.shape and np.array_equal(x, y), name


def test_the_choice_follows_the_work():
    assert arrays.choose(1, 1) is arrays
    assert arrays.choose(arrays.NUMPY_MAX_WORK, 1) is arrays
    assert arrays.choose(arrays.NUMPY_MAX_WORK, 2) is compiled
    assert arrays.choose(arrays.NUMPY_MAX_WORK + 1, 1) is compiled


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.collective}/{r.algorithm}")
def test_array_kernels_equal_compiled_kernels_bit_for_bit(row, monkeypatch):
    for p in (2, 5, 8, 13):
        s = commsim.build(row.collective, row.algorithm, nranks=p)
        for m in MODELS:
            for sizes in (SIZES, SIZES[4]):
                _assert_same_bits(*_both(m, s, sizes, monkeypatch))


@pytest.mark.parametrize("case", channel_cases.cases(8), ids=lambda c: c[0])
def test_array_kernels_equal_compiled_kernels_with_channels(case, monkeypatch):
    _, s = case
    for m in (Hockney(), Hockney(links=2), Hockney(links=3)):
        for sizes in (SIZES, SIZES[3]):
            _assert_same_bits(*_both(m, s, sizes, monkeypatch))


def test_a_measured_transport_and_a_timeline_agree_too(monkeypatch):
    s = commsim.build("allreduce", "rabenseifner", nranks=6)
    curve = PiecewiseLinear((Piece(0, 1e-6, 1e-10), Piece(4096, 3e-6, 4e-11)))
    _assert_same_bits(*_both(Hockney(message=curve), s, SIZES, monkeypatch))
    lines = []
    for limit in (2**62, -1):
        with monkeypatch.context() as mp:
            mp.setattr(arrays, "NUMPY_MAX_WORK", limit)
            lines.append(Hockney().timeline(s, "1MiB"))
    assert lines[0].last_end == lines[1].last_end
    assert lines[0].nmessages == lines[1].nmessages


def test_a_malformed_step_is_named_on_both_paths(monkeypatch):
    """A step the fast path refuses (a slot range out of bounds) goes to the general path,
    which names it, whichever kernels run."""
    good = commsim.build("allreduce", "ring", nranks=4)

    def step_fn(i):
        st = good.step(i)
        return st._replace(src_slot=st.src_slot + 100) if i == 2 else st

    bad = dataclasses.replace(good, step_fn=step_fn)
    for limit in (2**62, -1):
        with monkeypatch.context() as mp:
            mp.setattr(arrays, "NUMPY_MAX_WORK", limit)
            with pytest.raises(ScheduleError, match="step 2"):
                Hockney().predict(bad, 1e6)
