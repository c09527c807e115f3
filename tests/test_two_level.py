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
    m = TwoLevelHockney(("2us", "25GB/s"), ("2us", "25GB/s"), ranks_per_node=4)
    for p in (1, 3, 8, 13):
        s = commsim.build(row.collective, row.algorithm, nranks=p)
        np.testing.assert_allclose(
            m.predict(s, SIZES).time, Hockney().predict(s, SIZES).time, rtol=1e-9, atol=1e-15
        )


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
