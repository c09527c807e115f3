"""The compiled grouping of :mod:`commsim._messages` (a radix sort for many transfers) gives what
the numpy path gives, array for array: messages, their order, and every round."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import commsim
from commsim import _messages
from commsim._messages_kernel import counting_order
from commsim.algorithms import channels


def _numpy_and_compiled(monkeypatch, fn):
    """``fn()`` on the numpy path, then with the compiled path for every size."""
    monkeypatch.setattr(_messages, "_COMPILED_MIN", 2**62)
    want = fn()
    monkeypatch.setattr(_messages, "_COMPILED_MIN", 1)
    return want, fn()


def _same(a, b) -> None:
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        assert a == b


@pytest.mark.parametrize("bits", [1, 5, 12, 13, 30])
def test_the_radix_sort_is_numpys_stable_argsort(bits):
    rng = np.random.default_rng(bits)
    key = rng.integers(0, 2**bits, 5000)
    order, starts = counting_order(key, 2**bits)
    want = np.argsort(key, kind="stable")
    assert np.array_equal(order, want)
    skey = key[want]
    assert np.array_equal(starts, np.flatnonzero(np.r_[True, skey[1:] != skey[:-1]]))


@pytest.mark.parametrize(
    ("collective", "algorithm", "nranks", "nchannels"),
    [
        ("allreduce", "direct", 13, 1),
        ("alltoall", "direct", 8, 1),
        ("allreduce", "ring", 6, 3),
        ("allreduce", "rabenseifner", 12, 2),
        ("reduce_scatter", "direct", 9, 2),
    ],
)
@pytest.mark.parametrize("ports", [1, 2])
def test_port_messages_compiled_or_not(
    monkeypatch, collective, algorithm, nranks, nchannels, ports
):
    s = commsim.build(collective, algorithm, nranks=nranks)
    if nchannels > 1:
        s = channels(s, nchannels)
    for st in s.steps():

        def both(st=st):
            return _messages.port_messages(st, s, ports)

        _same(*_numpy_and_compiled(monkeypatch, both))


def test_matchings_and_group_compiled_or_not(monkeypatch):
    rng = np.random.default_rng(0)
    for _ in range(50):
        p, n = int(rng.integers(2, 16)), int(rng.integers(1, 120))
        src, dst, ch = rng.integers(0, p, n), rng.integers(0, p, n), rng.integers(0, 3, n)
        rounds = functools.partial(_messages.matchings, src, dst, p)
        _same(*_numpy_and_compiled(monkeypatch, rounds))
        grouped = functools.partial(_messages.group, src, dst, p, ch)
        _same(*_numpy_and_compiled(monkeypatch, lambda g=grouped: tuple(g())))
