"""The verifier's skewed layout (issue #20): a ring's state kept with rank ``r``'s slot ``j`` in
row ``r - j mod p``. It changes where the state lies, never a verdict or an error message."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim import Schedule, ScheduleError, Step, _verify
from commsim import _verify_kernel as kern
from commsim.algorithms import REGISTRY, channels


def _outcome(schedule: Schedule) -> str:
    try:
        return f"ok {commsim.verify(schedule).ntransfers}"
    except ScheduleError as e:
        return f"{e} {(e.step, e.rank, e.slot)}"


def _both_layouts(monkeypatch, schedule: Schedule) -> tuple[str, str]:
    out = []
    for skew in (0, 1):
        monkeypatch.setattr(_verify, "_layout", lambda s, skew=skew: skew)
        out.append(_outcome(schedule))
    return out[0], out[1]


@pytest.mark.parametrize(("collective", "name"), [("allreduce", "ring"), ("allgather", "ring")])
def test_rings_take_the_skewed_layout(collective, name):
    assert _verify._layout(commsim.build(collective, name, nranks=6)) == 1


@pytest.mark.parametrize(
    ("collective", "name"), [("allreduce", "rabenseifner"), ("alltoall", "bruck")]
)
def test_transfers_of_many_slots_keep_rank_order(collective, name):
    assert _verify._layout(commsim.build(collective, name, nranks=8)) == 0


def test_skewing_and_back_is_the_identity():
    a = np.arange(7 * 20, dtype=np.uint64).reshape(7, 20)
    b = a.copy()
    kern.skew_rows(b, 1)
    assert b[(3 - 5) % 7, 5] == a[3, 5]  # rank 3's slot 5 in row 3 - 5 mod 7
    kern.skew_rows(b, -1)
    assert np.array_equal(a, b)


@pytest.mark.parametrize(("collective", "name"), sorted(REGISTRY))
def test_every_row_passes_in_both_layouts(monkeypatch, collective, name):
    s = commsim.build(collective, name, nranks=6)
    got = _both_layouts(monkeypatch, s)
    assert got[0] == got[1] and got[0].startswith("ok")


def _broken(s: Schedule, i: int, how: str) -> Schedule:
    steps = [st for st in s.materialize().steps()]
    st = steps[i]
    if how == "remove":
        st = Step(*(f[1:] for f in st))
    elif how == "race":
        st = st._replace(dst=st.dst.copy(), dst_slot=st.dst_slot.copy(), reduce=st.reduce * False)
        st.dst[1], st.dst_slot[1] = st.dst[0], st.dst_slot[0]
    else:  # a read of a slot one later than it should be
        st = st._replace(src_slot=(st.src_slot + 1) % s.nslots)
    steps[i] = st
    return Schedule.from_steps(
        steps, collective=s.collective, nranks=s.nranks, nslots=s.nslots, algorithm=s.algorithm
    )


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reduce_scatter"])
@pytest.mark.parametrize("how", ["remove", "race", "shift"])
@pytest.mark.parametrize("step", [0, 3])
def test_a_broken_ring_gets_the_same_error_in_both_layouts(monkeypatch, collective, how, step):
    bad = _broken(commsim.build(collective, "ring", nranks=7), step, how)
    got = _both_layouts(monkeypatch, bad)
    assert got[0] == got[1] and not got[0].startswith("ok")


def test_channels_keep_their_checks_in_the_skewed_layout(monkeypatch):
    s = channels(commsim.build("allreduce", "ring", nranks=6), 2)
    got = _both_layouts(monkeypatch, s)
    assert got[0] == got[1] and got[0].startswith("ok")


def _splitmix_inputs(p: int, d: int, skew: int, seed: int) -> np.ndarray:
    """Every input by the definition, one Python integer at a time: SplitMix64's output
    function of ``key XOR (rank·d + j)``, rank ``row + skew·j mod p``."""
    mask = 2**64 - 1
    key = kern.input_key(seed)
    out = np.empty((p, d), dtype=np.uint64)
    for row in range(p):
        for j in range(d):
            z = ((key ^ (((row + skew * j) % p) * d + j)) + 0x9E3779B97F4A7C15) & mask
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
            out[row, j] = z ^ (z >> 31)
    return out


@pytest.mark.parametrize(("p", "d"), [(1, 3), (5, 12), (7, 7), (16, 4)])
@pytest.mark.parametrize("skew", [0, 1])
def test_inputs_are_splitmix64_of_rank_and_slot_in_either_layout(p, d, skew):
    got = np.empty((p, d), dtype=np.uint64)
    kern.fill_inputs(got, np.uint64(kern.input_key(3)), skew)
    np.testing.assert_array_equal(got, _splitmix_inputs(p, d, skew, 3))
