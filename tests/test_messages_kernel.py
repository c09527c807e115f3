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


def test_first_fit_rounds_keeps_groups_whole_and_rounds_proper():
    """Random groups of messages: every round has each sender and each receiver once, a group
    shares one round, and that round is the first one free for it (first fit)."""
    from commsim._messages_kernel import first_fit_rounds

    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 4, 300)
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    m = int(ptr[-1])
    src, dst = rng.integers(0, 40, m), rng.integers(0, 40, m)
    for g in range(len(sizes)):  # a group is a matching itself
        sl = slice(ptr[g], ptr[g + 1])
        src[sl] = rng.permutation(40)[: sizes[g]]
        dst[sl] = rng.permutation(40)[: sizes[g]]
    rnd = first_fit_rounds(src, dst, ptr, 40, 2)
    for r in np.unique(rnd):
        k = rnd == r
        assert len(set(src[k].tolist())) == k.sum() and len(set(dst[k].tolist())) == k.sum()
    for g in range(len(sizes)):
        sl = slice(ptr[g], ptr[g + 1])
        assert len(set(rnd[sl].tolist())) == 1
        for r in range(rnd[sl][0]):  # every earlier round has a clash with the group
            earlier = rnd[: ptr[g]] == r
            assert (
                np.isin(src[sl], src[: ptr[g]][earlier]).any()
                or np.isin(dst[sl], dst[: ptr[g]][earlier]).any()
            )


def test_link_matchings_of_a_switch_s_many_to_one_step_is_quick_and_tight():
    """72 GPUs each send to the 71 helper ranks on their switch (an NVLS add step): 71 rounds,
    the GPUs' degree, from the compiled first fit."""
    from commsim._messages import link_matchings

    g = 72
    src = np.repeat(np.arange(g), g - 1)
    dst = g + np.concatenate([np.delete(np.arange(g), i) for i in range(g)])
    rounds = link_matchings(src, dst, 2 * g, np.zeros(len(src), int), src % g)
    assert len(rounds) == g - 1
    assert sorted(np.concatenate(rounds).tolist()) == list(range(len(src)))
