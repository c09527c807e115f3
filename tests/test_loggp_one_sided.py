"""LogGP's one-sided messages (``LogGP(one_sided=True)``, ``--one-sided``): the receiver pays
no overhead. Closed forms for ring and recursive doubling, the relation to the two-sided model,
the bound, both kernel paths, and the CLI flag."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.algorithms import REGISTRY
from commsim.models import LogGP

L, O, G_, BYTE, GAMMA = 1.5e-6, 0.3e-6, 0.2e-6, 1e-9, 1e-10


def _pair(**kw) -> tuple[LogGP, LogGP]:
    args = {"L": L, "o": O, "g": G_, "G": BYTE, "gamma": GAMMA, **kw}
    return LogGP(**args), LogGP(**args, one_sided=True)


@pytest.mark.parametrize("p", [2, 3, 4, 7, 8, 16])
def test_ring_allreduce_closed_form(p):
    """2(p-1) messages of n/p bytes on the critical path, each L + o + (n/p - 1)G (no
    receiver o), p-1 reductions of n/p bytes: the two-sided time minus 2(p-1)o."""
    s = commsim.build("allreduce", "ring", nranks=p)
    n = np.array([1e3 * p, 1e6 * p, 64 * 2**20])
    two, one = _pair()
    chunk = n / p
    want = 2 * (p - 1) * (L + O + (chunk - 1) * BYTE) + (p - 1) * chunk * GAMMA
    got = one.predict(s, n).time
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got, two.predict(s, n).time - 2 * (p - 1) * O, rtol=1e-12)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_recursive_doubling_closed_form(p):
    s = commsim.build("allreduce", "recursive_doubling", nranks=p)
    n = np.array([8e3, 1e6])
    two, one = _pair()
    lg = int(np.log2(p))
    want = lg * (L + O + (n - 1) * BYTE + n * GAMMA)
    np.testing.assert_allclose(one.predict(s, n).time, want, rtol=1e-12)
    np.testing.assert_allclose(one.predict(s, n).time, two.predict(s, n).time - lg * O)


ROWS = [REGISTRY[k] for k in sorted(REGISTRY)]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.collective}/{r.algorithm}")
def test_never_below_the_bound_nor_above_two_sided(row):
    """The clocks are max-plus in the receiver's overhead: dropping it never makes a schedule
    slower; and no one-sided prediction beats the one-sided bound (one L + o)."""
    sizes = np.array([0.0, 1.0, 4096.0, 1e6])
    for g in (G_, 20e-6):
        two, one = _pair(g=g)
        for p in (2, 5, 16):
            s = commsim.build(row.collective, row.algorithm, nranks=p)
            t1, t2 = one.predict(s, sizes).time, two.predict(s, sizes).time
            assert (t1 >= one.lower_bound(row.collective, p, sizes) * (1 - 1e-9)).all(), p
            assert (t1 <= t2 * (1 + 1e-12)).all(), p


def test_the_bound_is_one_overhead_smaller():
    two, one = _pair()
    assert two.lower_bound("allgather", 4, 1e6) - one.lower_bound("allgather", 4, 1e6) == (
        pytest.approx(O, rel=1e-9)
    )
    assert one.lower_bound("allgather", 1, 1e6) == 0.0
    assert "L + o (one-sided)" in one.bound_name and "L + 2o" in two.bound_name


@pytest.mark.parametrize("algorithm", ["ring", "recursive_doubling"])
def test_the_fast_path_and_the_timeline_agree(algorithm):
    """predict takes the compiled one-pass step; timeline the general rounds."""
    _, one = _pair()
    s = commsim.build("allreduce", algorithm, nranks=8)
    tl = one.timeline(s, 1e6)
    assert tl.last_end == pytest.approx(one.predict(s, 1e6).time, rel=1e-12)


def test_the_default_is_two_sided_and_unchanged():
    two, one = _pair()
    assert not two.one_sided and "one_sided" not in two.to_dict() and "one" not in repr(two)
    assert one.to_dict()["one_sided"] is True
    assert repr(one).endswith("one_sided=True)") and one.describe().endswith("one-sided")
