"""Torus (bucket) algorithms: verified on many grids, neighbour-only steps, closed-form costs, errors.

The closed forms are written from the algorithm's description (Jain & Sabharwal 2010): one ring
per dimension, the message along dimension ``i`` being one ``d_i``-th of what the rank held before
it, in plain Python loops; they never call the module's cost code.
"""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.algorithms import info, torus
from commsim.errors import ParameterError
from commsim.models import Hockney, lower_bound

COLLECTIVES = ["allreduce", "reduce_scatter", "allgather"]
SWEEP = [*range(1, 65), 100, 1000]
GRIDS = [
    (16, "4x4"),
    (12, "3x4"),
    (12, "4x3"),
    (24, "2x3x4"),
    (32, "4x4x2"),
    (16, "2x2x2x2"),  # the hypercube: a torus of 2s
    (64, "2x2x2x2x2x2"),
    (30, "5x3x2"),
    (7, "7"),
    (8, "1x8x1"),
    (60, "3x4x5"),
]
MODELS = [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (2e-6, 4e-11, 1e-11)]
SIZES = np.array([0.0, 1.0, 1000.0, 3.3e8])


def _sizes(dims: str) -> list[int]:
    return [int(x) for x in dims.split("x")]


def t_torus(collective: str, dims: list[int], n, a, b, g):
    """Sum over the ring steps: along dim i, ``d_i - 1`` messages of ``n / (d_0 ... d_i)``."""
    total, held = 0.0, n
    for d in dims:
        held = held / d  # the size of one sub-block along this dimension
        for _ in range(d - 1):
            if collective in ("allreduce", "reduce_scatter"):
                total += a + held * (b + g)
            if collective in ("allreduce", "allgather"):
                total += a + held * b
    return total


# -- verification ------------------------------------------------------------------------------
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_verifies_with_auto_dims(collective):
    for p in SWEEP:
        s = commsim.build(collective, "torus", p)
        assert commsim.verify(s).nranks == p


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize(("p", "dims"), GRIDS)
def test_verifies_on_explicit_grids(collective, p, dims):
    s = commsim.build(collective, "torus", p, dims=dims)
    commsim.verify(s)
    steps = sum(d - 1 for d in _sizes(dims)) * (2 if collective == "allreduce" else 1)
    assert (s.nsteps, s.ntransfers) == (steps, steps * p)


def test_auto_dims_is_near_square_and_prime_is_a_ring():
    assert torus.auto_dims(36) == (6, 6)
    assert torus.auto_dims(32) == (4, 8)
    assert torus.auto_dims(1000) == (25, 40)
    assert torus.auto_dims(97) == (97,)  # prime: the 1-D ring
    ring = commsim.build("allreduce", "ring", 97)
    s = commsim.build("allreduce", "torus", 97)
    for a, b in zip(ring.steps(), s.steps(), strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


# -- every step talks to grid neighbours along one dimension --------------------------------------
@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize(("p", "dims"), GRIDS)
def test_every_step_is_one_dimension_of_neighbours(collective, p, dims):
    sizes = _sizes(dims)
    s = commsim.build(collective, "torus", p, dims=dims)
    seen = []
    for st in s.steps():
        src = np.array(np.unravel_index(st.src, sizes))  # (k, transfers) coordinates
        dst = np.array(np.unravel_index(st.dst, sizes))
        moved = np.flatnonzero((src != dst).any(axis=1))
        assert len(moved) == 1, f"step moves along dimensions {moved.tolist()}"
        (i,) = moved
        # along that dimension, every transfer goes to the next rank of the ring (wrapping)
        assert ((dst[i] - src[i]) % sizes[i] == 1).all()
        assert (np.delete(src, i, axis=0) == np.delete(dst, i, axis=0)).all()
        # every rank sends once and receives once: a perfect matching on the grid lines
        assert len(np.unique(st.src)) == len(np.unique(st.dst)) == p
        seen.append(int(i))
    # dimensions in order for reduce-scatter, reversed for allgather
    busy = [i for i, d in enumerate(sizes) if d > 1]
    rs = [i for i in busy for _ in range(sizes[i] - 1)]
    want = {"reduce_scatter": rs, "allgather": rs[::-1], "allreduce": rs + rs[::-1]}
    assert seen == want[collective]


# -- costs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize(("p", "dims"), [*GRIDS, (1, "1"), (2, "2"), (48, "auto"), (97, "auto")])
def test_cost_is_the_closed_form_and_above_the_bound(collective, p, dims):
    s = commsim.build(collective, "torus", p, dims=dims)
    sizes = list(torus.parse_dims(dims, p))
    for a, b, g in MODELS:
        m = Hockney(a, b, g)
        got = m.predict(s, SIZES).time
        want = np.array([t_torus(collective, sizes, n, a, b, g) for n in SIZES])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(
            info(collective, "torus").time(p, SIZES, a, b, g, dims=dims), want, rtol=1e-12
        )
        assert (got >= lower_bound(collective, p, SIZES, a, b, g) * (1 - 1e-12)).all()


def test_bandwidth_term_is_the_rings_and_latency_is_the_sum_of_dims():
    for p, dims in GRIDS:
        sizes = _sizes(dims)
        ring = info("allreduce", "ring")
        row = info("allreduce", "torus")
        # β: identical to the ring; α: 2 Σ (d_i - 1) instead of 2 (p - 1)
        assert row.time(p, 1.0, 0.0, 1.0, 0.0, dims=dims) == pytest.approx(
            ring.time(p, 1.0, 0.0, 1.0, 0.0)
        )
        assert row.time(p, 1.0, 1.0, 0.0, 0.0, dims=dims) == 2 * sum(d - 1 for d in sizes)


# -- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("dims", "needle"),
    [
        ("4x3", "hold 12 ranks, not nranks=16"),
        ("4x0x4", "integers >= 1"),
        ("4x-4", "integers >= 1"),
        ("4.0x4", "sizes like"),
        ("4 by 4", "sizes like"),
        ("", "sizes like"),
        ("x", "sizes like"),
        (3.5, "sizes like"),
        ([4, 4.5], "sizes like"),
    ],
)
def test_bad_dims_are_one_line_parameter_errors(dims, needle):
    for collective in COLLECTIVES:
        with pytest.raises(ParameterError, match=needle) as e:
            commsim.build(collective, "torus", 16, dims=dims)
        assert "\n" not in str(e.value)


def test_dims_accept_sequences_and_whitespace():
    assert torus.parse_dims([2, 8], 16) == (2, 8)
    assert torus.parse_dims(" 2X8 ", 16) == (2, 8)


def test_on_a_torus_network_the_grid_beats_the_flat_ring():
    """Neighbour-only steps, 2·14 latencies instead of 2·63: faster on an 8x8 torus."""
    from commsim.models import Topology
    from commsim.topology import torus as torus_network

    model = Topology(torus_network((8, 8)))
    for n in ("8B", "64MiB"):
        ours = model.predict(commsim.build("allreduce", "torus", 64, dims="8x8"), n).time
        ring = model.predict(commsim.build("allreduce", "ring", 64), n).time
        assert ours < ring


def test_on_its_own_torus_no_link_is_shared():
    """Each ring runs between physical neighbours on its own links: contention changes nothing."""
    from commsim.models import Topology
    from commsim.topology import torus as torus_network

    for sizes in ((4, 4), (2, 3, 4), (8, 8)):
        p, dims = int(np.prod(sizes)), "x".join(map(str, sizes))
        s = commsim.build("allreduce", "torus", p, dims=dims)
        net = torus_network(sizes)
        free = Topology(net, contention="none").predict(s, 1e6).time
        assert Topology(net, contention="bottleneck").predict(s, 1e6).time == pytest.approx(free)
