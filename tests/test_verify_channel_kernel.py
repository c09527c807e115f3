"""The verifier's compiled channel check (IR rule 6, issue #20) against its numpy version: on
random multi-channel steps, the same verdict (the same error, worded by the numpy version) and
the same tables after every step that passes."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim import ScheduleError, Step
from commsim._verify import _ChannelOwners


def _random_step(rng: np.random.Generator, p: int, nslots: int, n: int) -> Step:
    count = rng.integers(1, 4, n)
    src_slot = rng.integers(0, nslots - count + 1)
    dst_slot = rng.integers(0, nslots - count + 1)
    return Step(
        rng.integers(0, p, n), rng.integers(0, p, n), src_slot, dst_slot, count,
        rng.random(n) < 0.3, rng.integers(0, 3, n),
    )  # fmt: skip


def _verdict(owners: _ChannelOwners, st: Step, i: int, compiled: bool) -> str:
    try:
        (owners.check if compiled else owners.apply)(st, i)
    except ScheduleError as e:
        return str(e)
    return "ok"


@pytest.mark.parametrize("seed", range(12))
def test_the_compiled_channel_check_is_the_numpy_one(seed):
    rng = np.random.default_rng(seed)
    p = 6
    s = commsim.build("allgather", "ring", nranks=p)  # only its name, p and nslots are read
    compiled, numpy = _ChannelOwners(s), _ChannelOwners(s)
    faults = 0
    for i in range(40):
        st = _random_step(rng, p, s.nslots, int(rng.integers(1, 5)))
        before = compiled.owner.copy(), compiled.written.copy()
        a, b = _verdict(compiled, st, i, True), _verdict(numpy, st, i, False)
        assert a == b
        if a != "ok":  # verification ends at a fault; go on from the state before it
            faults += 1
            compiled.owner[:], compiled.written[:] = before
            numpy.owner[:], numpy.written[:] = before
            continue
        np.testing.assert_array_equal(compiled.owner, numpy.owner)
        np.testing.assert_array_equal(compiled.written, numpy.written)
    assert faults  # the random steps do break the rule now and then
