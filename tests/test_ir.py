"""The IR, combinators, registry front door, and serialization."""

from __future__ import annotations

import json

import numpy as np
import pytest

import commsim
from commsim import Schedule, ScheduleError, Step, UnknownNameError
from commsim.algorithms import REGISTRY, concat, relabel, with_root

ALGORITHMS = sorted(REGISTRY)


def test_step_make_broadcasts_scalars():
    st = Step.make(src=[0, 1, 2], dst=1, src_slot=0, dst_slot=[0, 1, 2], reduce=True)
    assert st.ntransfers == 3
    assert st.dst.tolist() == [1, 1, 1]
    assert st.count.tolist() == [1, 1, 1]
    assert st.reduce.dtype == bool


def test_step_make_rejects_mismatched_lengths():
    with pytest.raises(ScheduleError, match="shape"):
        Step.make(src=[0, 1], dst=[1, 0, 2], src_slot=0, dst_slot=0)


def test_slot_bytes_follow_the_nbytes_convention():
    # alltoall: nbytes is the per-rank send buffer, i.e. half of the data slots
    s = Schedule(
        collective="alltoall",
        nranks=2,
        slot_units=4,
        nsteps=0,
        step_fn=lambda i: Step.empty(),
    )
    assert s.nbytes_units == 2
    np.testing.assert_allclose(s.slot_bytes(1000.0), [500.0] * 4)
    # uneven units: sizes need not divide evenly
    u = Schedule(
        collective="allreduce",
        nranks=2,
        slot_units=[1, 2],
        nsteps=0,
        step_fn=lambda i: Step.empty(),
    )
    np.testing.assert_allclose(u.slot_bytes(10.0), [10 / 3, 20 / 3])
    assert u.range_units(np.array([0]), np.array([2])).tolist() == [3]


def test_steps_are_lazy():
    calls = []

    def step_fn(i):
        calls.append(i)
        return Step.make(src=[0], dst=[1], src_slot=0, dst_slot=0)

    s = Schedule(collective="broadcast", nranks=2, slot_units=1, nsteps=3, step_fn=step_fn)
    assert calls == []
    s.step(2)
    assert calls == [2]


def test_concat_and_relabel_and_root():
    rs = commsim.algorithms.ring.ring_reduce_scatter(4)
    ag = commsim.algorithms.ring.ring_allgather(4)
    ar = concat(rs, ag, collective="allreduce", algorithm="mine")
    assert (ar.nsteps, ar.ntransfers, ar.algorithm) == (6, 24, "mine")
    commsim.verify(ar)
    # relabelling an allreduce by any permutation keeps it an allreduce
    perm = np.array([2, 0, 3, 1])
    commsim.verify(relabel(ar, perm, 4))
    b = commsim.build("broadcast", commsim.available("broadcast")[0], nranks=5)
    rooted = with_root(b, 3)
    assert rooted.root == 3
    commsim.verify(rooted)


def test_concat_rejects_different_layouts():
    with pytest.raises(ScheduleError, match="slot layouts"):
        concat(
            commsim.build("allreduce", "ring", nranks=4),
            Schedule.from_steps([], collective="allreduce", nranks=4, nslots=3),
        )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("allreduse", "ring", 4), "did you mean allreduce"),
        (("allreduce", "rign", 4), "did you mean ring"),
        (("allreduce", "ring", 0), "nranks must be an integer >= 1"),
        (("allreduce", "ring", 2.5), "nranks must be an integer >= 1"),
        (("allreduce", "ring", "8"), "nranks must be an integer >= 1"),
    ],
)
def test_build_errors_are_one_readable_line(args, message):
    with pytest.raises((ScheduleError, UnknownNameError), match=message) as e:
        commsim.build(*args)
    assert "\n" not in str(e.value)


def test_build_rejects_bad_root_and_unknown_params():
    with pytest.raises(ScheduleError, match="root must be an integer in"):
        commsim.build("broadcast", commsim.available("broadcast")[0], nranks=4, root=4)
    with pytest.raises(ScheduleError, match="has no root"):
        commsim.build("allreduce", "ring", nranks=4, root=1)
    with pytest.raises(ScheduleError, match="no parameter segmnts"):
        commsim.build("allreduce", "ring", nranks=4, segmnts=2)


def test_available_lists_registry_names():
    assert "ring" in commsim.available("allreduce")
    assert all("/" in n for n in commsim.available())


@pytest.mark.parametrize(("collective", "name"), ALGORITHMS)
@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_save_load_round_trip(tmp_path, collective, name, suffix):
    s = commsim.build(collective, name, nranks=6)
    t = commsim.load(commsim.save(s, tmp_path / f"s{suffix}"))
    assert (t.collective, t.nranks, t.nsteps, t.ntransfers, t.algorithm) == (
        s.collective,
        s.nranks,
        s.nsteps,
        s.ntransfers,
        s.algorithm,
    )
    np.testing.assert_array_equal(t.slot_units, s.slot_units)
    for a, b in zip(s.steps(), t.steps(), strict=True):
        for fa, fb in zip(a, b, strict=True):
            np.testing.assert_array_equal(fa, fb)
    commsim.verify(t)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("nranks"), "missing field 'nranks'"),
        (lambda d: d.update(version=99), "unsupported version 99"),
        (lambda d: d.update(collective="allreduse"), "field 'collective' must be one of"),
        (
            lambda d: d["steps"][1]["dst"].__setitem__(0, 9),
            r"step 1: transfer 0: dst rank 9 out of range \[0, 4\)",
        ),
        (lambda d: d["steps"][0].pop("count"), "step 0: missing field 'count'"),
        (lambda d: d["steps"][0]["src"].append(1), "field 'dst' has 4 entries, 'src' has 5"),
        (lambda d: d["steps"][2].update(src_slot=[0, 0, 0, 9]), r"src_slot range \[9, 10\)"),
        (lambda d: d.update(slot_units=[1, -1]), "positive ints"),
    ],
)
def test_malformed_files_name_the_field(tmp_path, edit, message):
    d = commsim._serialize.to_dict(commsim.build("allreduce", "ring", nranks=4))
    edit(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ScheduleError, match=message):
        commsim.load(path)


def test_not_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{nope")
    with pytest.raises(ScheduleError, match="not valid JSON"):
        commsim.load(path)
