"""The verifier: IR semantics, structural faults, and fault injection over the whole registry."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim import Schedule, ScheduleError, Step
from commsim.algorithms import REGISTRY

ALGORITHMS = sorted(REGISTRY)


def _one_step(steps, kind="allreduce", p=2, nslots=1, **kw) -> Schedule:
    return Schedule.from_steps(steps, collective=kind, nranks=p, nslots=nslots, **kw)


def test_exchange_in_one_step_reads_before_writes():
    # a <-> b swap-and-add is an allreduce only if both reads see the pre-step values
    st = Step.make(src=[0, 1], dst=[1, 0], src_slot=0, dst_slot=0, reduce=True)
    assert commsim.verify(_one_step([st])).ntransfers == 2


def test_two_overwrites_of_one_slot_are_a_race():
    st = Step.make(src=[0, 1], dst=[2, 2], src_slot=0, dst_slot=0, reduce=False)
    with pytest.raises(ScheduleError, match="write race") as e:
        commsim.verify(_one_step([st], p=3))
    assert (e.value.step, e.value.rank, e.value.slot) == (0, 2, 0)


def test_two_reductions_into_one_slot_in_one_step_are_allowed():
    # reduce to root 0 in one step: both children add into the root's slot
    st = Step.make(src=[1, 2], dst=[0, 0], src_slot=0, dst_slot=0, reduce=True)
    assert commsim.verify(_one_step([st], kind="reduce", p=3)).nsteps == 1


def test_read_of_a_slot_holding_no_data_is_rejected():
    # broadcast: rank 1 forwards before it has received anything
    steps = [Step.make(src=[1], dst=[2], src_slot=0, dst_slot=0)]
    with pytest.raises(ScheduleError, match="holds no data yet") as e:
        commsim.verify(_one_step(steps, kind="broadcast", p=3))
    assert (e.value.step, e.value.rank) == (0, 1)


def test_reduce_into_unwritten_scratch_is_rejected():
    st = Step.make(src=[0], dst=[1], src_slot=0, dst_slot=1, reduce=True)
    s = Schedule.from_steps([st], collective="allreduce", nranks=2, slot_units=[1, 1], ndata=1)
    with pytest.raises(ScheduleError, match="reduces into slot 1"):
        commsim.verify(s)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("dst", 7, "dst rank 7 out of range"),
        ("src", -1, "src rank -1 out of range"),
        ("dst_slot", 3, r"dst_slot range \[3, 4\) out of range"),
        ("count", 0, r"count 0 not in \[1, 1\]"),
        ("src_slot", 2**63 - 1, r"src_slot range \[9223372036854775807"),  # no int64 overflow
    ],
)
def test_out_of_range_fields_name_the_transfer(field, value, message):
    st = Step.make(src=[0, 1], dst=[1, 0], src_slot=0, dst_slot=0, reduce=True)
    bad = st._replace(**{field: np.array([getattr(st, field)[0], value])})
    with pytest.raises(ScheduleError, match=message) as e:
        commsim.verify(_one_step([bad]))
    assert "transfer 1" in str(e.value)


def test_source_and_destination_ranges_must_hold_the_same_data():
    # slot 0 holds 2 units, slot 1 one unit: moving slot 0 into slot 1 would lose data
    st = Step.make(src=0, dst=1, src_slot=0, dst_slot=1)
    s = Schedule.from_steps([st], collective="broadcast", nranks=2, slot_units=[2, 1], ndata=1)
    with pytest.raises(ScheduleError, match="hold different amounts of data"):
        commsim.verify(s)


def test_root_must_be_a_rank():
    with pytest.raises(ScheduleError, match="root 5 is not a rank of 2"):
        _one_step([], kind="broadcast", p=2, root=5)


def test_missing_contribution_is_named():
    # rank 2's vector never reaches anyone
    steps = [
        Step.make(src=[1], dst=[0], src_slot=0, dst_slot=0, reduce=True),
        Step.make(src=[0, 0], dst=[1, 2], src_slot=0, dst_slot=0),
    ]
    with pytest.raises(ScheduleError, match=r"missing the contribution of rank\(s\) 2") as e:
        commsim.verify(_one_step(steps, p=3))
    assert e.value.rank == 0


def test_alltoall_spec_catches_a_misplaced_block():
    # p=2, m=1: slots [in0, in1, out0, out1]; rank r must end with out q = rank q's input r
    good = [
        Step.make(src=[0, 1, 0, 1], dst=[1, 0, 0, 1], src_slot=[1, 0, 0, 1], dst_slot=[2, 3, 2, 3])
    ]
    assert commsim.verify(_one_step(good, kind="alltoall", nslots=4)).ntransfers == 4
    swapped = [good[0]._replace(dst_slot=np.array([3, 2, 2, 3]))]
    with pytest.raises(ScheduleError):
        commsim.verify(_one_step(swapped, kind="alltoall", nslots=4))


def test_layout_mismatch_is_reported():
    s = _one_step([], kind="allgather", p=4, nslots=6)
    with pytest.raises(ScheduleError, match="multiple of 4 data slots"):
        commsim.verify(s)


# -- fault injection over every registered algorithm --------------------------------------


def _mutate(schedule: Schedule, how: str) -> Schedule:
    """Change one transfer of the first non-empty step at or after the middle."""
    steps = list(schedule.steps())
    k = next(i for i in range(len(steps) // 2, len(steps)) if steps[i].ntransfers)
    st = steps[k]
    if how == "remove":
        st = Step(*(f[1:] for f in st))
    elif how == "duplicate":
        st = Step.cat([st, Step(*(f[:1] for f in st))])
    else:  # shift the destination slot range of transfer 0 by one (wrapping inside the buffer)
        if st.count[0] == schedule.nslots:
            pytest.skip("the transfer spans the whole buffer: no room to shift it")
        dst_slot = st.dst_slot.copy()
        dst_slot[0] = (dst_slot[0] + 1) % (schedule.nslots - st.count[0] + 1)
        st = st._replace(dst_slot=dst_slot)
    steps[k] = st
    return Schedule.from_steps(
        steps,
        collective=schedule.collective,
        nranks=schedule.nranks,
        slot_units=schedule.slot_units,
        ndata=schedule.ndata,
        algorithm=schedule.algorithm,
    )


@pytest.mark.parametrize(("collective", "name"), ALGORITHMS)
@pytest.mark.parametrize("how", ["remove", "duplicate", "shift"])
@pytest.mark.parametrize("p", [5, 8])
def test_every_algorithm_rejects_a_corrupted_schedule(collective, name, how, p):
    s = commsim.build(collective, name, nranks=p)
    commsim.verify(s)
    with pytest.raises(ScheduleError):
        commsim.verify(_mutate(s, how))


def test_duplicate_reduction_is_diagnosed_as_double_counting():
    s = commsim.build("allreduce", "ring", nranks=5)
    steps = list(s.steps())
    steps[1] = Step.cat([steps[1], Step(*(f[:1] for f in steps[1]))])  # a reduce-scatter step
    bad = Schedule.from_steps(steps, collective=s.collective, nranks=5, nslots=5, algorithm="ring")
    with pytest.raises(ScheduleError, match=r"counts the contribution of rank\(s\) .*2 times"):
        commsim.verify(bad)


# -- the compact state (issue #20): uint16 stamps, tags that wrap, one-pass steps ---------------


@pytest.mark.parametrize(
    ("coll", "name"),
    [("allreduce", "ring"), ("allreduce", "recursive_doubling"), ("alltoall", "bruck")],
)
def test_stamps_that_run_out_of_tags_start_again(monkeypatch, coll, name):
    from commsim import _verify_kernel

    monkeypatch.setattr(_verify_kernel, "MAX_TAG", 2)  # retag every second step
    s = commsim.build(coll, name, nranks=8)
    assert commsim.verify(s).nsteps == s.nsteps


def test_a_race_after_the_tags_restart_is_still_found(monkeypatch):
    from commsim import _verify_kernel

    s = commsim.build("allreduce", "ring", nranks=4).materialize()
    steps = list(s.steps())
    st = steps[5]
    steps[5] = Step(
        st.src, st.dst.copy(), st.src_slot, st.dst_slot.copy(), st.count, st.reduce * False
    )  # copies: a ring's step arrays are read-only
    steps[5].dst[1] = steps[5].dst[0]  # two overwrites of one slot
    steps[5].dst_slot[1] = steps[5].dst_slot[0]
    bad = _one_step(steps, p=4, nslots=s.nslots)
    with pytest.raises(ScheduleError) as want:
        commsim.verify(bad)
    monkeypatch.setattr(_verify_kernel, "MAX_TAG", 2)
    with pytest.raises(ScheduleError) as got:
        commsim.verify(bad)
    assert "write race" in str(want.value) and str(got.value) == str(want.value)


def test_a_step_that_reads_what_it_writes_takes_the_three_pass_kernel():
    # rank 0 -> 1 then 1 -> 2 of the same slot in one step: the second reads the pre-step value
    st = Step.make(src=[0, 1], dst=[1, 2], src_slot=0, dst_slot=0, reduce=False)
    s = _one_step([st], kind="broadcast", p=3)
    with pytest.raises(ScheduleError, match="rank 1 sends slot 0, which holds no data yet"):
        commsim.verify(s)


def test_the_state_is_ten_bytes_per_slot_and_nothing_of_its_size_twice():
    import tracemalloc

    from commsim._verify import memory_estimate

    s = commsim.build("allreduce", "ring", nranks=256)
    commsim.verify(s)  # load the kernels outside the trace
    tracemalloc.start()
    commsim.verify(s)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    state = 10 * s.nranks * s.nslots
    assert peak < 1.3 * state + 2**20  # the old state (17 B per slot plus the inputs) was 3x
    assert memory_estimate(s) < 1.2 * state + 2**20
