"""LogGP's timeline is the kernel's own timing: for registry schedules of every collective and
several sizes, every message obeys the eager LogGP rules (Alexandrov et al., 1995) and the
timeline ends exactly where :meth:`LogGP.predict` does."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.models import LogGP

P = 8
MODEL = LogGP(L=1.5e-6, o=0.4e-6, g=0.7e-6, G=2e-10, gamma=1e-10)
SCHEDULES = [
    ("allreduce", "ring"),
    ("allreduce", "rabenseifner"),
    ("allreduce", "double_binary_tree"),
    ("allreduce", "direct"),
    ("allgather", "bruck"),
    ("reduce_scatter", "recursive_halving"),
    ("broadcast", "chain"),
    ("broadcast", "scatter_allgather"),
    ("reduce", "binomial"),
    ("alltoall", "direct"),  # a rank sends to many per step: the matching rounds
]
SIZES = [1.0, 4096.0, 3e6]


def _rank_order(ranks: np.ndarray) -> list[np.ndarray]:
    """Per rank, its messages' indices in the order they were timed."""
    return [np.flatnonzero(ranks == r) for r in range(P)]


@pytest.mark.parametrize(("collective", "algorithm"), SCHEDULES)
@pytest.mark.parametrize("nbytes", SIZES)
def test_every_message_follows_the_loggp_rules(collective, algorithm, nbytes):
    m, s = MODEL, commsim.build(collective, algorithm, nranks=P)
    pred, tl = m.predict(s, nbytes), m.timeline(s, nbytes)
    assert tl.last_end == pred.time  # exactly: the same clocks
    finish = np.zeros(P)
    np.maximum.at(finish, tl.dst, tl.reduce_end)
    np.maximum.at(finish, tl.src, tl.send_end)
    np.maximum.at(finish, tl.local_rank, tl.local_end)
    np.testing.assert_array_equal(finish, pred.rank_time)

    eps = 1e-12 * max(pred.time, 1e-9)
    np.testing.assert_allclose(tl.send_end - tl.start, m.o, rtol=1e-9)  # sender busy o
    assert (tl.recv_start >= tl.start + m.o + m.L - eps).all()  # no earlier than it arrives
    inj = tl.end - tl.recv_start - m.o  # (s - 1)G: the receive takes o + (s - 1)G
    assert (inj >= -eps).all() and (tl.reduce_end >= tl.end - eps).all()
    for mine in _rank_order(tl.src):  # a NIC injects one message per g + (s-1)G
        gap = tl.start[mine[:-1]] + m.g + inj[mine[:-1]]
        assert (tl.start[mine[1:]] >= np.maximum(gap, tl.send_end[mine[:-1]]) - eps).all()
    for mine in _rank_order(tl.dst):  # and takes one per g + (s-1)G
        gap = tl.recv_start[mine[:-1]] + m.g + inj[mine[:-1]]
        assert (tl.recv_start[mine[1:]] >= np.maximum(gap, tl.reduce_end[mine[:-1]]) - eps).all()
    for k in range(1, s.nsteps):  # a rank starts a step after its earlier steps' work
        now, before = tl.step == k, tl.step < k
        done = np.zeros(P)
        np.maximum.at(done, tl.src[before], tl.send_end[before])
        np.maximum.at(done, tl.dst[before], tl.reduce_end[before])
        assert (tl.start[now] >= done[tl.src[now]] - eps).all()
        assert (tl.recv_start[now] >= done[tl.dst[now]] - eps).all()


def test_the_receive_takes_the_message_bytes():
    """One message of b bytes: the receive lasts o + (b - 1)G and starts at t + o + L."""
    m, s = MODEL, commsim.build("broadcast", "chain", nranks=2, segments=1)
    b = 1e6
    tl = m.timeline(s, b)
    assert tl.nmessages == 1
    assert tl.recv_start[0] == pytest.approx(tl.start[0] + m.o + m.L, rel=1e-15)
    assert tl.end[0] - tl.recv_start[0] == pytest.approx(m.o + (b - 1) * m.G, rel=1e-12)
