"""Hockney per link class: equal classes are Hockney; different ones cost as derived by hand."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.algorithms import REGISTRY
from commsim.errors import ParameterError
from commsim.models import Hockney, TwoLevelHockney

SIZES = np.array([0.0, 1.0, 4096.0, 1e6 + 3])


@pytest.mark.parametrize(
    "row", [REGISTRY[k] for k in sorted(REGISTRY)], ids=lambda r: f"{r.collective}/{r.algorithm}"
)
def test_equal_classes_are_hockney(row):
    """With one class, Hockney; a schedule's channels each on a port of their own, as in the
    topology model (Hockney with a link per channel)."""
    m = TwoLevelHockney(("2us", "25GB/s"), ("2us", "25GB/s"), ranks_per_node=4)
    for p in (1, 3, 8, 13):
        s = commsim.build(row.collective, row.algorithm, nranks=p)
        want = Hockney(links=s.nchannels).predict(s, SIZES).time
        np.testing.assert_allclose(m.predict(s, SIZES).time, want, rtol=1e-9, atol=1e-15)


def test_hierarchical_allreduce_pays_each_phase_on_its_class():
    """Ring reduce-scatter and allgather inside (intra α, β), ring allreduce across (inter)."""
    ai, bi, ae, be, n, g, servers = 1e-6, 1e-11, 5e-6, 1e-10, 1e8, 4, 4
    m = TwoLevelHockney((ai, bi), (ae, be), ranks_per_node=g, gamma=0)
    s = commsim.build("allreduce", "hierarchical", nranks=g * servers, ranks_per_node=g)
    inside = 2 * ((g - 1) * ai + (g - 1) / g * n * bi)
    across = 2 * ((servers - 1) * ae + (servers - 1) / servers * (n / g) * be)
    pred = m.predict(s, n)
    assert pred.time == pytest.approx(inside + across, rel=1e-12)
    assert pred.network.limiting == ("inter",)


def test_bad_inputs():
    with pytest.raises(ParameterError, match="pairs"):
        TwoLevelHockney(1.0, (1.0, 1.0), ranks_per_node=2)
    with pytest.raises(ParameterError, match="ranks_per_node"):
        TwoLevelHockney((1.0, 1.0), (1.0, 1.0), ranks_per_node=0)


@pytest.mark.parametrize("gamma", [0.0, 1e-10])
@pytest.mark.parametrize(
    ("p", "g", "intra", "inter"),
    [
        (8, 4, (1e-6, 1e-11), (5e-6, 1e-10)),
        (12, 3, (1e-6, 1e-11), (5e-6, 1e-10)),
        (16, 8, (3e-6, 1e-9), (1e-6, 1e-11)),  # a slower inside (a congested server)
    ],
)
def test_ring_allreduce_pays_the_slower_class_every_step(p, g, intra, inter, gamma):
    """Rendezvous: the pair across a server boundary (and every pair inside) exchanges every
    step, so each of the 2(p-1) steps waits for max(intra, inter) message time (plus the
    receiver's reduction in the p-1 reduce-scatter steps)."""
    n = 1e6 * p
    s = n / p
    m = TwoLevelHockney(intra, inter, ranks_per_node=g, gamma=gamma)
    slowest = max(intra[0] + s * intra[1], inter[0] + s * inter[1])
    want = 2 * (p - 1) * slowest + (p - 1) * s * gamma
    got = m.predict(commsim.build("allreduce", "ring", nranks=p), n).time
    assert got == pytest.approx(want, rel=1e-12)


def test_the_bound_uses_the_cheaper_class_and_no_row_undercuts_it():
    m = TwoLevelHockney((1e-6, 1e-9), (5e-6, 1e-11), ranks_per_node=4, gamma=1e-10)
    assert m.lower_bound("broadcast", 8, 1e3) == pytest.approx(3 * 1e-6 + 1e3 * 1e-11)
    for row in REGISTRY.values():
        for p in (2, 8, 12):
            s = commsim.build(row.collective, row.algorithm, nranks=p)
            t = m.predict(s, SIZES).time
            helpers = {"helpers": s.helpers} if s.in_network else {}  # a switch's: n/B, not 2n/B
            bound = m.lower_bound(row.collective, p, SIZES, **helpers)
            assert (t >= bound * (1 - 1e-9)).all(), row


def test_describe_and_to_dict_show_both_classes():
    m = TwoLevelHockney(("1us", "100GB/s"), ("5us", "10GB/s"), ranks_per_node=4)
    d = m.to_dict()
    assert (d["intra"]["alpha_s"], d["inter"]["alpha_s"]) == (1e-6, 5e-6)
    assert "intra alpha=1.00us" in m.describe() and "inter alpha=5.00us" in m.describe()
