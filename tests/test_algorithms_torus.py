"""Torus (bucket) and Swing algorithms: verified at every p the issue names, steps that talk only
to grid neighbours, Swing's peers, and what the topology model sees on rings and tori."""

from __future__ import annotations

import math

import numpy as np
import pytest

import commsim
from commsim.algorithms.swing import swing_peer
from commsim.algorithms.torus import parse_dims
from commsim.errors import ParameterError
from commsim.models import Hockney, Topology
from commsim.topology import ring, torus

P = [*range(1, 65), 100, 1000]


@pytest.mark.parametrize("algorithm", ["torus", "swing_latency", "swing_bandwidth"])
def test_allreduce_verifies_at_every_p(algorithm):
    for p in P:
        commsim.verify(commsim.build("allreduce", algorithm, nranks=p))


@pytest.mark.parametrize("collective", ["reduce_scatter", "allgather", "allreduce"])
@pytest.mark.parametrize("dims", ["4x4", "2x3x4", "2x2x2x2", "1x5", "8x1x2", "3x3x3"])
def test_torus_verifies_on_explicit_grids(collective, dims):
    p = math.prod(int(x) for x in dims.split("x"))
    commsim.verify(commsim.build(collective, "torus", nranks=p, dims=dims))


@pytest.mark.parametrize("dims", [(4, 4), (2, 3, 4), (2, 2, 2, 2)])
def test_torus_steps_talk_to_grid_neighbours_along_one_dimension(dims):
    p = math.prod(dims)
    s = commsim.build("allreduce", "torus", nranks=p, dims="x".join(map(str, dims)))
    coords = np.array(np.unravel_index(np.arange(p), dims)).T
    for st in s.steps():
        diff = coords[st.dst] - coords[st.src]
        moved = diff != 0
        assert (moved.sum(axis=1) == 1).all()  # one coordinate changes
        d = int(np.flatnonzero(moved[0])[0])
        assert (moved[:, d]).all()  # the same one for the whole step
        assert ((diff[:, d] % dims[d]) == 1).all()  # to the +1 neighbour, wrapping


def test_torus_cost_is_the_sum_of_its_rings():
    a, b, g, n = 1e-6, 1e-9, 2e-10, 1e6
    s = commsim.build("allreduce", "torus", nranks=24, dims="2x3x4")
    want, share = 0.0, n
    for k in (2, 3, 4):
        share /= k
        want += 2 * (k - 1) * a + (k - 1) * share * (2 * b + g)
    assert Hockney(a, b, g).predict(s, n).time == pytest.approx(want, rel=1e-12)


def test_torus_on_its_torus_shares_no_link():
    """Each phase's rings run between physical neighbours, each on its own links: contention
    changes nothing."""
    s = commsim.build("allreduce", "torus", nranks=16, dims="4x4")
    net = torus((4, 4))
    none = Topology(net, contention="none").predict(s, 1e6).time
    assert Topology(net, contention="bottleneck").predict(s, 1e6).time == pytest.approx(none)


@pytest.mark.parametrize(
    ("dims", "message"),
    [
        ("5x5", "hold 25 ranks, not 16"),
        ("4-4", "must look like"),
        ("0x16", ">= 1"),
        (16, "a string"),
    ],
)
def test_bad_dims(dims, message):
    with pytest.raises(ParameterError, match=message):
        parse_dims(dims, 16)


def test_swing_peers_follow_the_paper():
    """π(r, s) = r + ρ(s) for even r, r - ρ(s) for odd r, ρ(s) = Σ_{i≤s} (-2)^i; an involution."""
    p = 64
    r = np.arange(p)
    for s in range(6):
        rho = sum((-2) ** i for i in range(s + 1))
        want = np.where(r % 2 == 0, r + rho, r - rho) % p
        peer = swing_peer(r, s, p)
        assert (peer == want).all() and (peer[peer] == r).all()
    st = commsim.build("allreduce", "swing_latency", nranks=16).step(2)
    assert (st.dst == swing_peer(st.src, 2, 16)).all()


@pytest.mark.parametrize("p", [16, 32])
def test_swing_beats_recursive_doubling_on_a_ring(p):
    """On a physical ring Swing's partners are closer (|ρ(s)| ≈ 2^(s+1)/3, not 2^s), so fewer
    messages share each link: the NSDI 2024 point, as the topology model sees it."""
    net = ring(p, latency=0.0)
    n = 64e6
    for swing, classic in [
        ("swing_bandwidth", "rabenseifner"),
        ("swing_latency", "recursive_doubling"),
    ]:
        t_swing = Topology(net).predict(commsim.build("allreduce", swing, nranks=p), n).time
        t_classic = Topology(net).predict(commsim.build("allreduce", classic, nranks=p), n).time
        assert t_swing < t_classic
