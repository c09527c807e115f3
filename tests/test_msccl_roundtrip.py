"""MSCCL-IR round trip: every registry algorithm at p = 2..16, exported (``to_msccl_xml``) and read
back (``read_msccl``), still computes its collective (``commsim.verify``), and keeps its Hockney
cost wherever the format can carry the schedule's step structure (docs/interop.md, "Round trip",
lists where it cannot and why)."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.errors import ScheduleError
from commsim.interop import read_msccl, to_msccl_xml
from commsim.models import Hockney

P = range(2, 17)
SIZES = ("1KiB", "1MiB")

#: Same messages, other steps: MSCCL has no global steps, the importer places every message at
#: the earliest step its thread blocks allow, so messages the schedule spreads over steps meet.
REGROUPED = {
    ("allreduce", "direct"), ("allreduce", "binomial"), ("allreduce", "double_binary_tree"),
    ("allreduce", "nccl_tree"), ("reduce_scatter", "direct"), ("broadcast", "binomial"),
    ("broadcast", "scatter_allgather"), ("reduce", "rabenseifner"),
}  # fmt: skip
#: A message whose chunks are not contiguous in MSCCL's i/o/s buffers is several sends.
PIECES = {
    ("allreduce", "hierarchical"), ("reduce_scatter", "hierarchical"),
    ("reduce_scatter", "recursive_halving"), ("reduce_scatter", "torus"), ("allgather", "bruck"),
    ("allgather", "hierarchical"), ("allgather", "recursive_doubling"), ("allgather", "torus"),
    ("alltoall", "bruck"), ("alltoall", "hierarchical"),
}  # fmt: skip
#: Not importable: a send's data leaves at the step it is posted in MSCCL, but commsim reads it at
#: the transfer's step, and another thread block overwrites that scratch chunk in between.
UNIMPORTABLE = {("alltoall", "bruck"): range(7, 17)}

ALGORITHMS = [(c, a) for c in commsim.COLLECTIVES for a in commsim.available(c)]


def _messages(s: commsim.Schedule) -> int:
    """Distinct (step, sender, receiver) pairs: what Hockney charges one latency each."""
    n = 0
    for i in range(s.nsteps):
        st = s.step_fn(i)
        net = st.src != st.dst
        n += len(set(zip(st.src[net].tolist(), st.dst[net].tolist())))
    return n


@pytest.mark.parametrize(("collective", "algorithm"), ALGORITHMS)
def test_export_import_verifies_and_keeps_the_cost(collective, algorithm):
    model = Hockney()
    for p in P:
        s = commsim.build(collective, algorithm, nranks=p)
        xml = to_msccl_xml(s)
        if p in UNIMPORTABLE.get((collective, algorithm), ()):
            with pytest.raises(ScheduleError, match="deadlock"):
                read_msccl(xml)
            continue
        r = read_msccl(xml)
        commsim.verify(r)
        before = np.array([model.predict(s, n).time for n in SIZES])
        after = np.array([model.predict(r, n).time for n in SIZES])
        key, label = (collective, algorithm), f"{collective}/{algorithm} p={p}"
        if key in PIECES:
            assert _messages(r) >= _messages(s), label
        else:
            assert _messages(r) == _messages(s), label
        if key not in REGROUPED | PIECES:
            np.testing.assert_allclose(after, before, rtol=1e-12, err_msg=label)


@pytest.mark.parametrize("p", [4, 5, 8, 16])
@pytest.mark.parametrize("algorithm", ["recursive_doubling", "swing_latency"])
def test_a_wait_on_a_sending_step_is_not_a_wait_for_its_receiver(algorithm, p):
    """Regression: a step that sends and a step of another thread block that waits on it
    (``depid``) form, with the peer doing the same, a cycle of zero-step waits (the pairwise
    exchange of recursive doubling): no deadlock, since MSCCL's sends are buffered; both
    messages go in one step, as in the original."""
    s = commsim.build("allreduce", algorithm, nranks=p)
    r = read_msccl(to_msccl_xml(s))
    assert commsim.verify(r).ntransfers > 0
    assert _messages(r) == _messages(s)


def test_a_real_cycle_of_receives_is_still_a_deadlock():
    """Two gpus that each receive before they send wait for each other forever."""
    step = (
        '<step s="{}" type="{}" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" '
        'depid="-1" deps="-1"/>'
    )

    def gpu(g: int) -> str:
        return (
            f'<gpu id="{g}" i_chunks="1" o_chunks="0" s_chunks="0">'
            f'<tb id="0" send="{1 - g}" recv="{1 - g}" chan="0">'
            + step.format(0, "rrc")
            + step.format(1, "s")
            + "</tb></gpu>"
        )

    xml = (
        '<algo name="stuck" proto="Simple" nchunksperloop="1" ngpus="2" coll="allreduce" '
        'inplace="1">' + gpu(0) + gpu(1) + "</algo>"
    )
    with pytest.raises(ScheduleError, match="deadlock"):
        read_msccl(xml)
