"""The multiport torus rows: verified on every grid, their closed forms with 2D links, the
injection bound, and the one-line errors (the registry sweep checks the rest)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import commsim
from commsim.algorithms import torus_multiport as tm
from commsim.cli import main
from commsim.errors import ParameterError
from commsim.models import Hockney

COLLECTIVES = ("reduce_scatter", "allgather", "allreduce")
SIZES = np.array([0.0, 8.0, 4096.0, 1e6 + 3, 3.3e8])
MODELS = [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (2.7e-6, 3.1e-10, 7.7e-11)]


def grids(p: int, most: int = 3) -> list[tuple[int, ...]]:
    """Every ordered factorization of ``p`` into 1..``most`` sizes, 1s included."""
    divisors = [d for d in range(1, p + 1) if p % d == 0]
    out = []
    for k in range(1, most + 1):
        for head in itertools.product(divisors, repeat=k - 1):
            if p % math.prod(head) == 0:
                out.append((*head, p // math.prod(head)))
    return out


def build(collective: str, dims: tuple[int, ...]) -> commsim.Schedule:
    return commsim.build(
        collective, "torus_multiport", nranks=math.prod(dims), dims="x".join(map(str, dims))
    )


def parts(dims: tuple[int, ...]) -> int:
    return max(2 * sum(d > 1 for d in dims), 1)


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("p", range(1, 65))
def test_verifies_on_every_grid_of_p(collective, p):
    for dims in grids(p):
        s = build(collective, dims)
        commsim.verify(s)
        assert (s.nchannels, s.algorithm) == (parts(dims), "torus_multiport")


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize(
    "dims", [(8, 8, 8), (4, 4, 8), (16, 16), (4, 8), (2, 2, 1), (2, 4, 4), (3, 1, 5, 2)]
)
def test_verifies_on_preset_shapes(collective, dims):
    commsim.verify(build(collective, dims))


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("p", [1, 2, 5, 8, 12, 16, 24, 27, 30, 36, 64])
def test_2d_links_time_is_the_closed_form(collective, p):
    row = commsim.algorithms.info(collective, "torus_multiport")
    for dims in grids(p):
        s = build(collective, dims)
        for alpha, beta, gamma in MODELS:
            got = Hockney(alpha, beta, gamma, links=parts(dims)).predict(s, SIZES).time
            want = row.time(p, SIZES, alpha, beta, gamma, dims=dims, links=parts(dims))
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=f"{dims}")


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("dims", [(2,), (7,), (4, 4), (2, 2, 2), (4, 4, 4), (3, 4, 5), (8, 8, 8)])
def test_bandwidth_term_is_the_injection_bound(collective, dims):
    """With 2D links (α = γ = 0) the time is the injection bound: every link busy all along."""
    p, k = math.prod(dims), parts(dims)
    model = Hockney(0.0, 1e-9, 0.0, links=k)
    got = model.predict(build(collective, dims), SIZES).time
    bound = model.lower_bound(collective, p, SIZES)
    np.testing.assert_allclose(got, bound, rtol=1e-9, atol=0)


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("dims", [(4, 4), (2, 3), (4, 4, 4)])
def test_one_link_is_never_faster_than_its_display(collective, dims):
    """Off D = 1 the one-link display is an estimate: the model's turns only add to it."""
    p = math.prod(dims)
    row = commsim.algorithms.info(collective, "torus_multiport")
    assert not row.is_exact(p, dims=dims)
    for alpha, beta, gamma in MODELS:
        got = Hockney(alpha, beta, gamma).predict(build(collective, dims), SIZES).time
        want = row.time(p, SIZES, alpha, beta, gamma, dims=dims)
        assert (got >= want * (1 - 1e-9)).all()


def test_parts_use_every_direction_of_every_dimension():
    """At every step of a cube the 6 parts send along 6 different (dimension, direction)s."""
    dims = (4, 4, 4)
    s = build("allreduce", dims)
    coords = np.array(np.unravel_index(np.arange(64), dims)).T
    for st in s.steps():
        delta = (coords[st.dst] - coords[st.src]) % 4  # +1 -> 1, -1 -> 3 in one coordinate
        for c in range(6):  # one direction per part
            assert len(np.unique(delta[st.channel == c], axis=0)) == 1
        assert len(np.unique(delta, axis=0)) == 6  # six parts, six directions


def test_the_closed_form_needs_one_link_or_every_part_its_own():
    row = commsim.algorithms.info("allreduce", "torus_multiport")
    assert row.time(64, 1.0, 1.0, 0.0, 0.0, dims="4x4x4", links=8) == 18.0
    with pytest.raises(ParameterError, match="1 link or on 2D = 6 links or more, got links=3"):
        row.time(64, 1.0, 1.0, 0.0, 0.0, dims="4x4x4", links=3)


def test_part_orders_rotate_and_mirror():
    assert tm.part_orders((4, 4, 4)) == [
        ((0, 1, 2), 1), ((0, 1, 2), -1), ((1, 2, 0), 1), ((1, 2, 0), -1),
        ((2, 0, 1), 1), ((2, 0, 1), -1),
    ]  # fmt: skip


@pytest.mark.parametrize("dims", ["4x5", "0x4", "4xx4", "auto4", [2, 2.5]])
def test_bad_dims_are_one_parameter_error(dims):
    with pytest.raises(ParameterError, match="dims"):
        commsim.build("allreduce", "torus_multiport", nranks=16, dims=dims)


def test_bad_dims_on_the_cli_are_one_line_and_exit_2(capsys):
    rc = main(["predict", "-c", "allgather", "-a", "torus_multiport", "-p", "16",
               "--param", "dims=4x5", "-s", "1MiB"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "dims 4x5 hold 20 ranks, not nranks=16" in err
