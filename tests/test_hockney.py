"""The Hockney α-β-γ model: its rules on hand-made schedules, and bounds over the registry."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import commsim
from commsim import Schedule, Step
from commsim.algorithms import REGISTRY
from commsim.models import Hockney, lower_bound

A, B, G = 3e-6, 1 / 20e9, 1 / 50e9


def _sched(steps, kind="allreduce", p=4, nslots=1) -> Schedule:
    return Schedule.from_steps(steps, collective=kind, nranks=p, nslots=nslots)


def test_one_message_costs_alpha_plus_n_beta():
    s = _sched([Step.make(src=0, dst=1, src_slot=0, dst_slot=0)], kind="broadcast", p=2)
    assert Hockney(A, B, G).predict(s, 1e6).time == pytest.approx(A + 1e6 * B, rel=1e-12)


def test_reduction_adds_gamma_at_the_receiver():
    s = _sched([Step.make(src=1, dst=0, src_slot=0, dst_slot=0, reduce=True)], kind="reduce", p=2)
    pred = Hockney(A, B, G).predict(s, 1e6)
    assert pred.time == pytest.approx(A + 1e6 * (B + G), rel=1e-12)
    assert pred.rank_time.tolist() == pytest.approx([A + 1e6 * (B + G), A + 1e6 * B])


def test_transfers_of_one_src_dst_pair_are_one_message():
    # two slot ranges (a wrapped block range) to the same peer: one latency, both payloads
    st_ = Step.make(src=[0, 0], dst=[1, 1], src_slot=[0, 3], dst_slot=[0, 3])
    s = _sched([st_], kind="broadcast", p=2, nslots=4)
    assert Hockney(A, B, G).predict(s, 4000.0).time == pytest.approx(A + 2000 * B, rel=1e-12)


def test_single_port_serializes_and_multi_port_overlaps():
    # rank 0 receives from 1, 2, 3 in one step
    st_ = Step.make(src=[1, 2, 3], dst=0, src_slot=0, dst_slot=0, reduce=True)
    s = _sched([st_], kind="reduce", p=4)
    n = 1e5
    single = Hockney(A, B, G).predict(s, n).time
    multi = Hockney(A, B, G, ports="multi").predict(s, n).time
    # single port: each receive then its reduction, one after the other
    assert single == pytest.approx(3 * (A + n * B + n * G), rel=1e-12)
    # multi port: the three arrive together through rank 0's one link, then three reductions
    assert multi == pytest.approx(A + 3 * n * B + 3 * n * G, rel=1e-12)
    # two ports: two arrive together (sharing the link) and are reduced, then the third
    two = Hockney(A, B, G, ports=2).predict(s, n).time
    assert two == pytest.approx((A + 2 * n * B + 2 * n * G) + (A + n * B + n * G), rel=1e-12)


def test_idle_ranks_do_not_wait_for_a_step():
    big = Step.make(src=0, dst=1, src_slot=0, dst_slot=0)
    small = Step.make(src=2, dst=3, src_slot=0, dst_slot=0)
    s = _sched([big, small], kind="allreduce", p=4)
    pred = Hockney(A, B, G).predict(s, 1e6)
    assert pred.time == pytest.approx(A + 1e6 * B, rel=1e-12)  # max, not sum
    assert pred.rank_time[3] == pytest.approx(A + 1e6 * B)


def test_a_message_starts_when_both_ends_are_ready():
    # rank 1 is busy receiving a big message when rank 2 wants to send to it
    s = _sched(
        [
            Step.make(src=0, dst=1, src_slot=0, dst_slot=0),
            Step.make(src=2, dst=1, src_slot=0, dst_slot=0),
        ],
        p=3,
    )
    pred = Hockney(A, B, G).predict(s, 1e6)
    assert pred.time == pytest.approx(2 * (A + 1e6 * B), rel=1e-12)
    assert pred.step_time.tolist() == pytest.approx([A + 1e6 * B, 2 * (A + 1e6 * B)])


def test_local_reduction_costs_gamma_local_copy_is_free():
    red = Step.make(src=0, dst=0, src_slot=0, dst_slot=1, reduce=True)
    cp = Step.make(src=1, dst=1, src_slot=0, dst_slot=1)
    s = _sched([Step.cat([red, cp])], p=2, nslots=2)
    pred = Hockney(A, B, G).predict(s, 1e6)
    assert pred.rank_time.tolist() == pytest.approx([5e5 * G, 0.0])


def test_vector_of_sizes_matches_scalar_calls():
    s = commsim.build("allreduce", "ring", nranks=7)
    m = Hockney(A, B, G)
    sizes = np.array([0.0, 1.0, 1e3, 1e6, 3e9])
    vec = m.predict(s, sizes)
    assert vec.time.shape == (5,)
    assert vec.rank_time.shape == (7, 5)
    np.testing.assert_allclose(vec.time, [m.predict(s, float(n)).time for n in sizes], rtol=1e-14)


@pytest.mark.parametrize("p", [2, 3, 4, 7, 16, 33, 100])
def test_ring_allreduce_closed_form(p):
    n = np.array([1.0, 1e3, 1e6, 1e9])
    want = 2 * (p - 1) * A + 2 * (p - 1) / p * n * B + (p - 1) / p * n * G
    got = Hockney(A, B, G).predict(commsim.build("allreduce", "ring", nranks=p), n).time
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_bandwidths_follow_nccl_tests():
    p, n = 8, 1e8
    pred = Hockney(A, B, G).predict(commsim.build("allreduce", "ring", nranks=p), n)
    assert pred.algbw == pytest.approx(n / pred.time)
    assert pred.busbw == pytest.approx(pred.algbw * 2 * (p - 1) / p)
    d = pred.to_dict()
    assert d["time_s"] == pred.time and d["collective"] == "allreduce"


def test_model_rejects_bad_parameters():
    with pytest.raises(ValueError, match="alpha must be finite and >= 0"):
        Hockney(alpha=-1.0)
    with pytest.raises(ValueError, match="ports must be"):
        Hockney(ports="dual")
    with pytest.raises(ValueError, match="nbytes must be finite and >= 0"):
        Hockney().predict(commsim.build("allreduce", "ring", nranks=2), -5)


def test_lower_bound_values():
    assert lower_bound("broadcast", 1, 1e6, A, B, G) == 0.0
    assert lower_bound("broadcast", 5, 1e6, A, B, G) == pytest.approx(3 * A + 1e6 * B)
    want = math.ceil(math.log2(12)) * A + 2 * 11 / 12 * 1e6 * B + 11 / 12 * 1e6 * G
    assert lower_bound("allreduce", 12, 1e6, A, B, G) == pytest.approx(want)


ALGORITHMS = sorted(REGISTRY)


@settings(max_examples=120, deadline=None)
@given(
    row=st.sampled_from(ALGORITHMS),
    p=st.integers(1, 70),
    n=st.floats(0.0, 1e10),
    a=st.floats(0.0, 1e-4),
    b=st.floats(0.0, 1e-8),
    g=st.floats(0.0, 1e-8),
    ports=st.sampled_from(["single", 2, 3, 4, "multi"]),
)
def test_no_algorithm_beats_its_models_lower_bound(row, p, n, a, b, g, ports):
    # k ports share the rank's link: they buy latency (log_{k+1} p rounds), never bandwidth
    collective, name = row
    s = commsim.build(collective, name, nranks=p)
    model = Hockney(a, b, g, ports=ports)
    t = model.predict(s, n).time
    # helpers (an NVSwitch's ranks, IR rule 7) hold no data: the bound is over the workers
    bound = model.lower_bound(collective, p, n, helpers=s.helpers)
    assert t >= bound * (1 - 1e-9) - 1e-300


def test_nvls_of_one_gpu_reduces_nothing():
    # p = 2: one GPU and its switch; the found case of the property above (the bound over p
    # ranks asked for a reduction of n/2 bytes that one GPU never does)
    s = commsim.build("allreduce", "nvls", nranks=2)
    model = Hockney(0.0, 0.0, 1.85e-9)
    assert s.helpers == 1
    assert model.predict(s, 1.0).time == 0.0 == model.lower_bound("allreduce", 2, 1.0, helpers=1)


def test_k_port_lower_bound_counts_rounds_in_base_k_plus_1():
    assert lower_bound("broadcast", 9, 1e6, A, B, G, ports=2) == pytest.approx(2 * A + 1e6 * B)
    assert lower_bound("broadcast", 10, 1e6, A, B, G, ports=2) == pytest.approx(3 * A + 1e6 * B)
    assert Hockney(A, B, G, ports="multi").lower_bound("broadcast", 10, 0.0) == pytest.approx(A)


def test_more_ports_never_buy_bandwidth():
    # direct allreduce at 1 GiB: bandwidth-bound; ports cannot push it past the link
    s = commsim.build("allreduce", "direct", nranks=8)
    for ports in ("single", 2, 7, "multi"):
        pred = Hockney(0.0, 1 / 450e9, 0.0, ports=ports).predict(s, 2**30)
        assert pred.busbw <= 450e9 * (1 + 1e-9)


def test_predict_refuses_malformed_schedules():
    p2 = _sched([Step.make(src=0, dst=7, src_slot=0, dst_slot=0)], kind="broadcast", p=2)
    with pytest.raises(commsim.ScheduleError, match="dst rank 7 out of range"):
        Hockney(A, B, G).predict(p2, 1e3)
    huge = _sched([Step.make(src=0, dst=1, src_slot=0, dst_slot=0, count=50)], p=2)
    with pytest.raises(commsim.ScheduleError, match=r"count 50 not in \[1, 1\]"):
        Hockney(A, B, G).predict(huge, 1e3)
    bad_layout = _sched([], kind="allgather", p=3, nslots=2)
    with pytest.raises(commsim.ScheduleError, match="multiple of 3 data slots"):
        Hockney(A, B, G).predict(bad_layout, 1e3)


def test_step_time_is_a_running_maximum():
    s = _sched(
        [
            Step.make(src=0, dst=1, src_slot=0, dst_slot=0),  # ends at A + 1e6 B
            Step.make(src=2, dst=3, src_slot=0, dst_slot=0, count=1),  # ends earlier, elsewhere
        ]
    )
    pred = Hockney(A, B, G).predict(s, 1e6)
    assert pred.step_time.tolist() == pytest.approx([A + 1e6 * B] * 2)
