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


@pytest.mark.parametrize(
    ("collective", "algorithm"),
    [
        ("allreduce", "ring"),
        ("allreduce", "recursive_doubling"),
        ("allreduce", "rabenseifner"),
        ("alltoall", "direct"),
    ],
)
@pytest.mark.parametrize("p", [2, 4, 7, 8, 16])
def test_symmetric_exchanges_equal_hockney(collective, algorithm, p):
    """Every rank sends and receives once per step and the gap never binds: each message costs
    2o + (s-1)G + L = Hockney's α + sβ with α = L + 2o - G, β = G."""
    s = commsim.build(collective, algorithm, nranks=p)
    sizes = np.array([1e3 * p, 1e6])
    got = LogGP(L=L, o=O, g=G_, G=BYTE, gamma=1e-10).predict(s, sizes).time
    want = Hockney(alpha=L + 2 * O - BYTE, beta=BYTE, gamma=1e-10).predict(s, sizes).time
    np.testing.assert_allclose(got, want, rtol=1e-12)


def _fan(k: int, *, out: bool) -> Schedule:
    """Rank 0 sends its one slot to ranks 1..k (``out``), or ranks 1..k send theirs to rank 0,
    reducing, in one step (k rounds: a single port)."""
    others = list(range(1, k + 1))
    src, dst = ([0] * k, others) if out else (others, [0] * k)
    steps = [Step.make(src=src, dst=dst, src_slot=0, dst_slot=0, reduce=not out)]
    return Schedule.from_steps(
        steps, collective="broadcast" if out else "reduce", nranks=k + 1, nslots=1
    )


@pytest.mark.parametrize("g", [0.1e-6, 5e-6])
def test_a_root_sending_to_many_pays_the_gap_not_a_latency(g):
    """The root starts message j (1-based) at (j-1) max(o, g + (s-1)G) (its CPU's o, or its
    NIC's gap, whichever is longer) and each is received L + 2o + (s-1)G later: eager sends
    overlap their latencies."""
    s_bytes, k = 1000.0, 3
    inj = (s_bytes - 1) * BYTE
    m = LogGP(L=L, o=O, g=g, G=BYTE, gamma=0.0)
    rank_time = m.predict(_fan(k, out=True), s_bytes).rank_time
    assert rank_time[0] == pytest.approx((k - 1) * max(O, g + inj) + O, rel=1e-12)
    for j in range(1, k + 1):
        want = (j - 1) * max(O, g + inj) + 2 * O + inj + L
        assert rank_time[j] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("g", [0.1e-6, 5e-6])
def test_a_root_receiving_from_many_takes_them_one_by_one(g):
    """All k senders start at 0; the root takes the first at o + L and each next one
    max(o, g) + (s-1)G later (LogGOPSim charges the bytes at the receiver), then reduces it."""
    s_bytes, k, gamma = 1000.0, 4, 1e-11
    inj = (s_bytes - 1) * BYTE
    m = LogGP(L=L, o=O, g=g, G=BYTE, gamma=gamma)
    pred = m.predict(_fan(k, out=False), s_bytes)
    step = max(O + s_bytes * gamma, g) + inj
    want = O + L + (k - 1) * step + O + inj + s_bytes * gamma
    assert pred.time == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(pred.rank_time[1:], O, rtol=1e-12)  # eager: senders leave at o


@pytest.mark.parametrize("gamma", [0.0, 1e-10])
def test_two_ranks_exchanging(gamma):
    """Allreduce on 2 ranks is one exchange: both send at 0, both receive L + 2o + (n-1)G
    later and reduce n bytes."""
    n = 4096.0
    s = commsim.build("allreduce", "recursive_doubling", nranks=2)
    pred = LogGP(L=L, o=O, g=G_, G=BYTE, gamma=gamma).predict(s, n)
    want = L + 2 * O + (n - 1) * BYTE + n * gamma
    np.testing.assert_allclose(pred.rank_time, [want, want], rtol=1e-12)


@pytest.mark.parametrize("g", [0.2e-6, 3e-6, 20e-6])
@pytest.mark.parametrize("p", [2, 3, 8, 13])
def test_ring_allgather(p, g):
    """Every step a rank sends as soon as it received (L + 2o + I after its last send) or its
    NIC's gap g + I has passed: T = (p-2) (max(L + 2o, g) + I) + L + 2o + I, I = (n/p - 1)G;
    that is (p-1)(L + 2o + I) when g <= L + 2o."""
    n = 1e5
    inj = (n / p - 1) * BYTE
    s = commsim.build("allgather", "ring", nranks=p)
    got = LogGP(L=L, o=O, g=g, G=BYTE, gamma=0.0).predict(s, n).time
    want = (p - 2) * (max(L + 2 * O, g) + inj) + L + 2 * O + inj
    assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("g", [0.2e-6, 20e-6])
@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_binomial_broadcast(p, g):
    """A rank that received at time x sends its k-th message at x + (k-1)D, D = max(o, g + I),
    each received R = L + 2o + I after it starts; the last rank is reached by a path of j
    second-or-later sends: T = (lg p - 1) max(R, D) + R."""
    n = 1e4
    inj = (n - 1) * BYTE
    big_r, d = L + 2 * O + inj, max(O, g + inj)
    s = commsim.build("broadcast", "binomial", nranks=p)
    got = LogGP(L=L, o=O, g=g, G=BYTE, gamma=0.0).predict(s, n).time
    assert got == pytest.approx((p.bit_length() - 2) * max(big_r, d) + big_r, rel=1e-12)


ROWS = [REGISTRY[k] for k in sorted(REGISTRY)]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.collective}/{r.algorithm}")
def test_never_slower_than_hockney_with_alpha_l_plus_2o(row):
    """With g <= o, LogGP(L, o, g, G) <= Hockney(alpha = L + 2o, beta = G) on every schedule:
    eager sends only drop rendezvous waits, a message's L + 2o + (s-1)G is below
    alpha + s beta, and each gap ends before Hockney's message would. o = g = 0 is the case
    LogGP(L=alpha, G=beta) <= Hockney(alpha, beta). Equality for lockstep exchanges is
    test_symmetric_exchanges_equal_hockney."""
    sizes = np.array([0.0, 1.0, 100.0, 4096.0, 1e6 + 3])
    for o, g in ((0.0, 0.0), (O, 0.5 * O), (O, O)):
        m = LogGP(L=L, o=o, g=g, G=BYTE, gamma=1e-10)
        h = Hockney(alpha=L + 2 * o, beta=BYTE, gamma=1e-10)
        for p in (2, 3, 8, 13):
            s = commsim.build(row.collective, row.algorithm, nranks=p)
            got, bound = m.predict(s, sizes).time, h.predict(s, sizes).time
            assert (got <= bound * (1 + 1e-12)).all(), (o, g, p, got, bound)


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


def _with_local_copies(s: Schedule) -> Schedule:
    """``s`` with a free local copy added to every step: the compiled one-pass step refuses
    local transfers, so every step of the copy takes the general path (messages, rounds)."""
    steps = []
    for st in s.steps():
        r = int(st.src[0])
        step = Step.make(
            src=np.append(st.src, r), dst=np.append(st.dst, r),
            src_slot=np.append(st.src_slot, 0), dst_slot=np.append(st.dst_slot, 0),
            count=np.append(st.count, 1), reduce=np.append(st.reduce, False),
        )  # fmt: skip
        steps.append(step)
    return Schedule.from_steps(
        steps, collective=s.collective, nranks=s.nranks, nslots=s.nslots,
        slot_units=s.slot_units,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("collective", "algorithm"),
    [("allreduce", "ring"), ("allreduce", "recursive_doubling"), ("broadcast", "binomial")],
)
@pytest.mark.parametrize("g", [0.2e-6, 20e-6])
def test_the_fast_and_the_general_path_agree(collective, algorithm, g):
    m = LogGP(L=L, o=O, g=g, G=BYTE, gamma=1e-10)
    s = commsim.build(collective, algorithm, nranks=8)
    sizes = np.array([0.0, 100.0, 1e6])
    fast, general = m.predict(s, sizes), m.predict(_with_local_copies(s), sizes)
    np.testing.assert_array_equal(fast.rank_time, general.rank_time)
    np.testing.assert_array_equal(fast.step_time, general.step_time)


def test_a_malformed_step_is_named():
    bad = Schedule.from_steps(
        [Step.make(src=[0], dst=[9], src_slot=0, dst_slot=0)],
        collective="broadcast", nranks=2, nslots=1,
    )  # fmt: skip
    with pytest.raises(commsim.errors.ScheduleError, match="step 0: transfer 0: dst rank 9"):
        LogGP().predict(bad, 10)
    with pytest.raises(ParameterError, match="nbytes"):
        LogGP().predict(commsim.build("allreduce", "ring", nranks=2), -1)
    with pytest.raises(ParameterError, match="Schedule"):
        LogGP().predict("ring", 10)
