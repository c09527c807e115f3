"""Swing allreduce: verified, peers as in the paper, data volumes, closed-form costs, errors.

The peers are recomputed here from the paper's definition (De Sensi et al., NSDI 2024) with plain
Python integers, and the closed forms are written from the step structure (``L`` whole-vector
exchanges; or ``L`` reduce-scatter steps of ``p/2^(s+1)`` blocks and their mirror image), plus the
MPICH fold's two whole-vector steps; they never call the module's cost code.
"""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.algorithms import info, swing
from commsim.errors import ParameterError
from commsim.models import Hockney, lower_bound

ROWS = ["swing_latency", "swing_bandwidth"]
SWEEP = [*range(1, 65), 100, 1000]
GRIDS = [
    (16, "16"),
    (16, "4x4"),
    (16, "2x8"),
    (16, "2x2x2x2"),  # hypercube
    (32, "8x2x2"),
    (64, "4x4x4"),
    (128, "2x64"),
    (20, "4x4"),  # fold: Swing on 16 of the 20 ranks
    (40, "2x4x4"),
]
MODELS = [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (2e-6, 4e-11, 1e-11)]
SIZES = np.array([0.0, 1.0, 1000.0, 3.3e8])


def paper_rho(s: int) -> int:
    return sum((-2) ** i for i in range(s + 1))


def paper_peer(r: int, s: int, p: int) -> int:
    return (r + paper_rho(s)) % p if r % 2 == 0 else (r - paper_rho(s)) % p


def _fold(p: int) -> tuple[int, int]:
    pv, L = 1, 0
    while 2 * pv <= p:
        pv, L = 2 * pv, L + 1
    return pv, L


def t_latency(p, n, a, b, g):
    pv, L = _fold(p)
    core = L * (a + n * b + n * g)  # L exchange-and-add steps of the whole vector
    if pv == p:
        return core
    return (a + n * b + n * g) + core + (a + n * b)  # fold in (reduced), fold out


def t_bandwidth(p, n, a, b, g):
    pv, L = _fold(p)
    block = n / pv
    rs = sum(a + pv // 2 ** (s + 1) * block * (b + g) for s in range(L))
    ag = sum(a + pv // 2 ** (s + 1) * block * b for s in range(L))
    if pv == p:
        return rs + ag
    return (a + n * (b + g)) + rs + ag + (a + n * b)


# -- verification ------------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ROWS)
def test_verifies_with_auto_dims(algorithm):
    for p in SWEEP:
        assert commsim.verify(commsim.build("allreduce", algorithm, p)).nranks == p


@pytest.mark.parametrize("algorithm", ROWS)
@pytest.mark.parametrize(("p", "dims"), GRIDS)
def test_verifies_on_explicit_grids(algorithm, p, dims):
    s = commsim.build("allreduce", algorithm, p, dims=dims)
    commsim.verify(s)
    pv, L = _fold(p)
    steps = (2 * L if algorithm == "swing_bandwidth" else L) + (2 if pv != p else 0)
    assert s.nsteps == steps


# -- peers: the paper's formula ----------------------------------------------------------------
def test_rho_is_the_papers_sum():
    assert [swing.rho(s) for s in range(12)] == [paper_rho(s) for s in range(12)]


@pytest.mark.parametrize("p", [2, 4, 8, 16, 64, 256])
def test_1d_peers_are_the_papers_and_closer_than_recursive_doubling(p):
    L = p.bit_length() - 1
    peers = swing.swing_peers(p, str(p))
    assert len(peers) == L
    for s, pi in enumerate(peers):
        assert pi.tolist() == [paper_peer(r, s, p) for r in range(p)]
        hops = np.minimum((pi - np.arange(p)) % p, (np.arange(p) - pi) % p)
        assert (hops == min(abs(paper_rho(s)), p - abs(paper_rho(s)))).all()
        assert (hops <= 2**s).all() and (s < 2 or (hops < 2**s).all())


@pytest.mark.parametrize("algorithm", ROWS)
@pytest.mark.parametrize("p", [4, 8, 32])
def test_schedule_steps_talk_to_the_paper_peers(algorithm, p):
    s = commsim.build("allreduce", algorithm, p, dims=str(p))
    L = p.bit_length() - 1
    order = list(range(L)) + (list(range(L - 1, -1, -1)) if algorithm == "swing_bandwidth" else [])
    for st, k in zip(s.steps(), order, strict=True):
        assert st.dst.tolist() == [paper_peer(int(r), k, p) for r in st.src]


@pytest.mark.parametrize(("p", "dims"), [(16, "4x4"), (32, "8x2x2"), (64, "4x4x4"), (16, "2x8")])
def test_multidim_peers_cycle_over_dimensions(p, dims):
    sizes = [int(x) for x in dims.split("x")]
    left = [d.bit_length() - 1 for d in sizes]
    # the expected (dimension, local step) order: round-robin over dimensions with steps left
    order, done = [], [0] * len(sizes)
    while done != left:
        for i in range(len(sizes)):
            if done[i] < left[i]:
                order.append((i, done[i]))
                done[i] += 1
    peers = swing.swing_peers(p, dims)
    assert len(peers) == len(order)
    for pi, (i, t) in zip(peers, order, strict=True):
        for r in range(p):
            c = list(np.unravel_index(r, sizes))
            c[i] = paper_peer(int(c[i]), t, sizes[i])
            assert pi[r] == np.ravel_multi_index(c, sizes)


@pytest.mark.parametrize(("p", "dims"), [(16, "16"), (64, "8x8"), (32, "2x2x8")])
def test_bandwidth_variant_moves_halving_volumes(p, dims):
    s = commsim.build("allreduce", "swing_bandwidth", p, dims=dims)
    L = p.bit_length() - 1
    for k, st in enumerate(s.steps()):
        slots = p >> (k + 1) if k < L else p >> (2 * L - k)
        assert (st.count == slots).all() and len(st.src) == p
        assert st.reduce.all() == (k < L)


# -- costs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ROWS)
@pytest.mark.parametrize("p", [1, 2, 3, 5, 8, 12, 16, 31, 32, 48, 64, 100, 128])
def test_cost_is_the_closed_form_and_above_the_bound(algorithm, p):
    s = commsim.build("allreduce", algorithm, p)
    closed = t_latency if algorithm == "swing_latency" else t_bandwidth
    for a, b, g in MODELS:
        got = Hockney(a, b, g).predict(s, SIZES).time
        want = np.array([closed(p, n, a, b, g) for n in SIZES])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(info("allreduce", algorithm).time(p, SIZES, a, b, g), want)
        assert (got >= lower_bound("allreduce", p, SIZES, a, b, g) * (1 - 1e-12)).all()


@pytest.mark.parametrize(("p", "dims"), GRIDS)
def test_cost_does_not_depend_on_the_grid_in_the_flat_model(p, dims):
    for algorithm, closed in (("swing_latency", t_latency), ("swing_bandwidth", t_bandwidth)):
        s = commsim.build("allreduce", algorithm, p, dims=dims)
        got = Hockney(2e-6, 4e-11, 1e-11).predict(s, SIZES).time
        want = [closed(p, n, 2e-6, 4e-11, 1e-11) for n in SIZES]
        np.testing.assert_allclose(got, want, rtol=1e-12)


# -- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("p", "dims", "needle"),
    [
        (16, "4x2", "hold 8 ranks, not nranks=16"),
        (12, "3x4", r"hold 12 ranks, not the p' = 8 ranks Swing runs on \(of nranks=12\)"),
        (16, "4x0", "integers >= 1"),
        (16, "four", "sizes like"),
    ],
)
def test_bad_dims_are_one_line_parameter_errors(p, dims, needle):
    for algorithm in ROWS:
        with pytest.raises(ParameterError, match=needle) as e:
            commsim.build("allreduce", algorithm, p, dims=dims)
        assert "\n" not in str(e.value)


def test_peers_refuse_a_non_power_of_two():
    with pytest.raises(ParameterError, match="power of two"):
        swing.swing_peers(12)


# -- on a torus network the short-cut shows ----------------------------------------------------
@pytest.mark.parametrize(
    ("p", "dims", "network"), [(16, "16", "ring"), (16, "4x4", "torus"), (64, "8x8", "torus")]
)
def test_swing_beats_the_butterflies_on_a_torus_network(p, dims, network):
    """The paper's claim: closer peers, fewer shared links, so Swing wins where Hockney ties."""
    from commsim.models import Topology
    from commsim.topology import ring, torus

    sizes = tuple(int(x) for x in dims.split("x"))
    model = Topology(ring(p) if network == "ring" else torus(sizes))
    pairs = [("swing_bandwidth", "rabenseifner"), ("swing_latency", "recursive_doubling")]
    for ours, theirs in pairs:
        for n in ("8B", "64MiB"):
            t_ours = model.predict(commsim.build("allreduce", ours, p, dims=dims), n).time
            t_theirs = model.predict(commsim.build("allreduce", theirs, p), n).time
            assert t_ours < t_theirs, (ours, theirs, n)


def test_auto_is_the_1d_swing_and_swing_peer_is_the_formula():
    for p in (2, 8, 64):
        r = np.arange(p)
        auto, one_d = swing.swing_peers(p), swing.swing_peers(p, str(p))
        for s, (a, b) in enumerate(zip(auto, one_d, strict=True)):
            assert (a == b).all()
            assert swing.swing_peer(r, s, p).tolist() == [paper_peer(x, s, p) for x in range(p)]


def test_2d_swing_beats_1d_swing_on_a_2d_torus():
    """On an 8x8 torus the 2-D variant keeps peers in a row or column: fewer shared links."""
    from commsim.models import Topology
    from commsim.topology import torus

    model = Topology(torus((8, 8)))
    for algorithm in ROWS:
        two = model.predict(commsim.build("allreduce", algorithm, 64, dims="8x8"), "64MiB").time
        one = model.predict(commsim.build("allreduce", algorithm, 64), "64MiB").time
        assert two < one, algorithm
