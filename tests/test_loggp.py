"""The LogGP model: hand-derived times, its relation to Hockney, the bound, inputs."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim import Schedule, Step
from commsim.algorithms import REGISTRY
from commsim.errors import ParameterError
from commsim.models import Hockney, LogGP, Model

L, O, G_, BYTE = 1.5e-6, 0.3e-6, 0.2e-6, 1e-9


def test_it_is_a_model():
    m = LogGP()
    assert isinstance(m, Model) and m.to_dict()["name"] == "loggp" and "LogGP" in m.describe()


@pytest.mark.parametrize("algorithm", ["ring", "recursive_doubling", "rabenseifner"])
@pytest.mark.parametrize("p", [2, 4, 7, 8, 16])
def test_symmetric_exchanges_equal_hockney(algorithm, p):
    """Every rank sends and receives once per step and the gap never binds: each message costs
    2o + (s-1)G + L = Hockney's α + sβ with α = L + 2o - G, β = G."""
    s = commsim.build("allreduce", algorithm, nranks=p)
    sizes = np.array([1e3, 1e6])
    got = LogGP(L=L, o=O, g=G_, G=BYTE, gamma=1e-10).predict(s, sizes).time
    want = Hockney(alpha=L + 2 * O - BYTE, beta=BYTE, gamma=1e-10).predict(s, sizes).time
    np.testing.assert_allclose(got, want, rtol=1e-12)


def _fan_out(k: int) -> Schedule:
    """Rank 0 sends its one slot to ranks 1..k in one step (k rounds: a single port)."""
    steps = [Step.make(src=[0] * k, dst=list(range(1, k + 1)), src_slot=0, dst_slot=0)]
    return Schedule.from_steps(steps, collective="broadcast", nranks=k + 1, nslots=1)


@pytest.mark.parametrize("g", [0.1e-6, 5e-6])
def test_a_root_sending_to_many_pays_the_gap_not_a_latency(g):
    """Message j (1-based) starts at (j-1)(o + max(g, (s-1)G)) (the CPU's o, then the NIC's gap)
    and is received 2o + (s-1)G + L later: eager sends overlap their latencies."""
    s_bytes, k = 1000.0, 3
    inj = (s_bytes - 1) * BYTE
    m = LogGP(L=L, o=O, g=g, G=BYTE, gamma=0.0)
    rank_time = m.predict(_fan_out(k), s_bytes).rank_time
    for j in range(1, k + 1):
        want = (j - 1) * (O + max(g, inj)) + 2 * O + inj + L
        assert rank_time[j] == pytest.approx(want, rel=1e-12)


def test_no_row_beats_the_bound():
    m = LogGP(L=L, o=O, g=G_, G=BYTE, gamma=1e-10)
    sizes = np.array([0.0, 1.0, 4096.0, 1e6])
    for row in REGISTRY.values():
        for p in (2, 5, 16):
            t = m.predict(commsim.build(row.collective, row.algorithm, nranks=p), sizes).time
            assert (t >= m.lower_bound(row.collective, p, sizes) * (1 - 1e-9)).all(), row


def test_units_and_errors():
    m = LogGP(L="1.5us", o="300ns", g="0.2us", G="1GB/s", gamma="inf")
    assert (m.L, m.o, m.g, m.G, m.gamma) == (1.5e-6, 3e-7, 2e-7, 1e-9, 0.0)
    with pytest.raises(ParameterError, match="L"):
        LogGP(L="fast")
    with pytest.raises(ParameterError, match="o must be finite and >= 0"):
        LogGP(o=-1.0)
