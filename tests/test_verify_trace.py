"""The verifier names the earliest step where a contribution was counted twice or lost."""

from __future__ import annotations

import re

import numpy as np
import pytest

import commsim
from commsim import Schedule, ScheduleError, Step
from commsim import _verify as verify_module
from commsim._verify_trace import Fault, first_fault
from commsim.algorithms import channels

RING8 = commsim.build("allreduce", "ring", nranks=8)  # 14 steps: 7 reduce-scatter, 7 allgather


def _with(schedule: Schedule, step: int, change) -> Schedule:
    steps = list(schedule.steps())
    steps[step] = change(steps[step])
    return Schedule.from_steps(
        steps,
        collective=schedule.collective,
        nranks=schedule.nranks,
        slot_units=schedule.slot_units,
        ndata=schedule.ndata,
        root=schedule.root,
        nchannels=schedule.nchannels,
        algorithm=schedule.algorithm,
    )


def _flip_reduce(st: Step) -> Step:
    red = st.reduce.copy()
    red[0] = ~red[0]
    return st._replace(reduce=red)


def _drop_first(st: Step) -> Step:
    return Step(*(f[1:] for f in st))


def _duplicate_first(st: Step) -> Step:
    return Step.cat([st, Step(*(f[:1] for f in st))])


def _error(schedule: Schedule) -> ScheduleError:
    with pytest.raises(ScheduleError) as e:
        commsim.verify(schedule)
    return e.value


def test_a_reduction_turned_into_a_copy_at_step_0_is_named_at_step_0():
    e = _error(_with(RING8, 0, _flip_reduce))
    msg = str(e)
    # the final symptom is still there, first ...
    assert "after the last step, rank 0 slot 7 is missing the contribution of rank(s) 1" in msg
    assert "(last written at step 7 by a transfer from rank 7)" in msg
    assert e.step == 7  # the error's step stays the symptom's (tools jump there)
    # ... then where it began: rank 0's copy overwrote rank 1's own contribution
    assert (
        "it first went wrong at step 0: rank 1's contribution to slot 7 was lost at step 0" in msg
    )
    assert "step 0 overwrote it before anything read it (rank 0's transfer does not reduce)" in msg


def test_a_dropped_transfer_at_step_0_is_named_at_step_0():
    msg = str(_error(_with(RING8, 0, _drop_first)))
    assert "is missing the contribution of rank(s) 0" in msg
    # rank 0's copy sat unread from step 0 until step 7 overwrote it: the fault is in that
    # window, and the one place the result could have taken it is rank 1 at step 0
    assert (
        "it first went wrong between steps 0 and 7: rank 0's contribution to slot 7 sat unread "
        "in rank 0 slot 7 from the start until step 7 overwrote it (from rank 7); a reduction "
        "into rank 1 slot 7, which the result is computed from, at step 0 would have kept it"
    ) in msg


def test_a_dropped_transfer_mid_reduce_scatter_names_its_step_not_step_0():
    msg = str(_error(_with(RING8, 3, _drop_first)))
    assert "(last written at step 10 " in msg
    assert "it first went wrong between steps 3 and 10: " in msg
    assert "sat unread in rank 0 slot 4 since step 2 until step 10 overwrote it" in msg
    assert "a reduction into rank 1 slot 4, which the result is computed from, at step 3" in msg


def test_a_duplicated_reduction_at_step_0_is_counted_twice_at_step_0():
    msg = str(_error(_with(RING8, 0, _duplicate_first)))
    assert "counts the contribution of rank(s) 0 (2 times)" in msg
    assert (
        "it first went wrong at step 0: rank 0's contribution to slot 7 was first counted "
        "twice at step 0, in rank 1 slot 7 (reduced from rank(s) 0)"
    ) in msg


def test_reducing_where_the_allgather_copies_names_the_allgather_step():
    every = _with(RING8, 9, lambda st: st._replace(reduce=np.ones_like(st.reduce)))
    msg = str(_error(every))
    assert "it first went wrong at step 9: " in msg
    assert "first counted twice at step 9, in rank 4 slot 1 (reduced from rank(s) 3)" in msg


@pytest.mark.parametrize(
    ("name", "change"),
    [
        (n, c)
        for n in ("rabenseifner", "recursive_doubling", "ring")
        for c in (_flip_reduce, _duplicate_first)
    ]
    + [("rabenseifner", _drop_first), ("ring", _drop_first)],
)
def test_a_fault_at_step_0_of_an_allreduce_is_traced_to_step_0(name, change):
    s = commsim.build("allreduce", name, nranks=8)
    msg = str(_error(_with(s, 0, change)))
    assert re.search(r"it first went wrong (at step 0|between steps 0 and \d+): ", msg)


def test_a_fault_on_one_channel_is_traced_on_that_channel():
    two = channels(RING8, 2)  # slot j -> 2j (channel 0) and 2j + 1 (channel 1)
    msg = str(_error(_with(two, 0, _flip_reduce)))
    assert (
        "it first went wrong at step 0: rank 1's contribution to slot 14 was lost at step 0" in msg
    )


def test_a_message_missing_from_an_exchange_leaves_only_the_symptom():
    # recursive doubling, 0 -> 1 dropped at step 0: no copy of rank 0's contribution is lost or
    # doubled (rank 0 keeps it and it reaches half the ranks); rank 1 simply never received it.
    # Without a reference schedule no rule can tell which later step should have delivered it.
    s = _with(commsim.build("allreduce", "recursive_doubling", nranks=8), 0, _drop_first)
    msg = str(_error(s))
    assert msg.endswith(
        "missing the contribution of rank(s) 0 (last written at step 2 by a transfer from rank 5)"
    )


def test_a_partial_sum_nobody_forwards_is_lost_until_the_end():
    # a chain reduce to root 0: 3 -> 2 -> 1 -> 0; rank 2 never forwards its partial sum
    chain = [
        Step.make(src=3, dst=2, src_slot=0, dst_slot=0, reduce=True),
        Step.make(src=2, dst=1, src_slot=0, dst_slot=0, reduce=True),
        Step.make(src=1, dst=0, src_slot=0, dst_slot=0, reduce=True),
    ]
    s = Schedule.from_steps(
        [chain[0], Step.empty(), chain[2]], collective="reduce", nranks=4, nslots=1
    )
    msg = str(_error(s))
    assert "missing the contribution of rank(s) 2, 3" in msg
    assert (
        "it first went wrong at step 1 or later: rank 2's contribution to slot 0 sat unread in "
        "rank 2 slot 0 since step 0 to the end, in a slot whose result does not need it"
    ) in msg


def test_only_versions_the_result_was_computed_from_count():
    # step 1 doubles rank 0's data in a scratch slot the result never uses; the real fault (rank
    # 0's slot 0 reduced into rank 1 a second time) is at step 3
    steps = [
        Step.make(src=0, dst=0, src_slot=0, dst_slot=1),
        Step.make(src=0, dst=0, src_slot=1, dst_slot=1, reduce=True),
        Step.make(src=[0, 1], dst=[1, 0], src_slot=0, dst_slot=0, reduce=True),
        Step.make(src=0, dst=1, src_slot=0, dst_slot=0, reduce=True),
    ]
    s = Schedule.from_steps(steps, collective="allreduce", nranks=2, slot_units=[1, 1], ndata=1)
    msg = str(_error(s))
    assert "rank 1 slot 0 counts the contribution of rank(s) 0 (2 times), 1 (2 times)" in msg
    assert "it first went wrong at step 3: rank 0's contribution" in msg


def test_first_fault_returns_the_record():
    s = _with(RING8, 0, _flip_reduce)
    pre = s.spec.initial(8, s.ndata, 0)
    mask = np.ones_like(pre)
    assert first_fault(s, pre, mask, 0, 7) == Fault(
        step=0, kind="stranded", origin=1, slot=7, at_rank=1, at_slot=7, sources=(0,), until=0
    )
    assert first_fault(RING8, pre, mask, 0, 7) is None  # nothing wrong, nothing found


def test_copies_are_not_traced_and_big_schedules_are_not_traced(monkeypatch):
    gather = commsim.build("allgather", "ring", nranks=4)
    assert "first went wrong" not in str(_error(_with(gather, 0, _drop_first)))
    monkeypatch.setattr(verify_module, "_DIAGNOSE_LIMIT", 0)
    msg = str(_error(_with(RING8, 0, _flip_reduce)))
    assert msg.endswith("holds the wrong value (last written at step 7 by a transfer from rank 7)")


WINDOW = re.compile(r"first went wrong (?:at step (\d+)( or later)?|between steps (\d+) and (\d+))")


@pytest.mark.parametrize(
    ("collective", "name"),
    [("allreduce", "double_binary_tree"), ("allreduce", "rabenseifner"), ("reduce", "binomial"),
     ("reduce_scatter", "pairwise")],
)  # fmt: skip
def test_the_named_step_or_window_holds_the_broken_step(collective, name):
    """Break every step in turn (three ways): the trace never names a step the fault is not in."""
    s = commsim.build(collective, name, nranks=5)
    named = 0
    for k in range(s.nsteps):
        for change in (_flip_reduce, _drop_first, _duplicate_first):
            try:
                commsim.verify(_with(s, k, change))
            except ScheduleError as e:
                m = WINDOW.search(str(e))
                if m is None:
                    continue
                if m.group(3):
                    lo, hi = int(m.group(3)), int(m.group(4))
                else:
                    lo = int(m.group(1))
                    hi = s.nsteps if m.group(2) else lo
                assert lo <= k <= hi, (k, change.__name__, str(e))
                named += 1
    assert named >= s.nsteps
