"""Parameter-server allreduce (colocated and dedicated servers) and helper ranks (IR rule 7).

The registry sweep (``tests/test_registry.py``) checks the row at its defaults and at each
placement; here every server count ``k = 1..p`` at ``p = 1..64`` is verified, the cost formula is
checked against the model for every ``k``, dedicated servers run on the single-process backends,
and the IR's helper ranks are checked on their own: what they may not do, what the verifier,
the reference, serialization and the bounds make of them. The CLI: ``servers`` out of range is
one line and exit 2, and the row sits beside ring in ``compare``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import commsim
from commsim import Schedule, Step
from commsim._serialize import from_json, from_npz, to_dict, to_npz
from commsim.algorithms import info, relabel
from commsim.algorithms.parameter_server import server_count, server_ranks
from commsim.errors import ParameterError, ScheduleError
from commsim.exec import execute, get_backend, layout, random_inputs
from commsim.interop import msccl_program
from commsim.models import Hockney, lower_bound

MODELS = [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (2.7e-6, 3.1e-10, 7.7e-11)]
SIZES = np.array([0.0, 1.0, 4096.0, 3.3e8])


def _ps(p: int, k: int | None = None, placement: str = "colocated") -> Schedule:
    return commsim.build("allreduce", "parameter_server", nranks=p, servers=k, placement=placement)


@pytest.mark.parametrize("p", range(1, 65))
def test_every_server_count_verifies(p):
    """p = 1..64, k = 1..p colocated and k = 1..p-1 dedicated: the verifier proves each."""
    for k in range(1, p + 1):
        commsim.verify(_ps(p, k))
        if k < p:
            s = _ps(p, k, "dedicated")
            assert (s.helpers, s.workers) == (k, p - k)
            commsim.verify(s)


@pytest.mark.parametrize("placement", ["colocated", "dedicated"])
def test_the_formula_is_the_models_time_for_every_k(placement):
    row = info("allreduce", "parameter_server")
    for p in [*range(1, 14), 16, 31, 32]:
        for k in range(1, p + (placement == "colocated")):
            s = _ps(p, k, placement)
            for a, b, g in MODELS:
                got = Hockney(a, b, g).predict(s, SIZES).time
                want = row.time(p, SIZES, a, b, g, servers=k, placement=placement)
                np.testing.assert_allclose(got, want, rtol=1e-9, atol=0, err_msg=f"{p=} {k=}")


def test_colocated_on_every_rank_costs_ring_bandwidth_and_one_server_p_times_more():
    """BytePS: colocated servers on every rank move what ring moves; one server is the
    bottleneck (2(p-1) n bytes through one port)."""
    p, n = 16, 2.0**26
    beta_only = Hockney(0.0, 1.0, 0.0)
    ring = beta_only.predict(commsim.build("allreduce", "ring", nranks=p), n).time
    assert beta_only.predict(_ps(p), n).time == pytest.approx(ring, rel=1e-12)
    assert beta_only.predict(_ps(p, 1), n).time == pytest.approx(p * ring, rel=1e-12)
    # dedicated, as many servers as workers: each worker sends n and receives n
    assert beta_only.predict(_ps(p, placement="dedicated"), n).time == pytest.approx(2 * n)


def test_servers_are_spread_colocated_and_last_dedicated():
    assert server_ranks(8, 3).tolist() == [0, 2, 5]
    assert server_ranks(8, 3, "dedicated").tolist() == [5, 6, 7]
    assert (server_count(1), server_count(1, placement="dedicated")) == (1, 0)
    assert _ps(1, placement="dedicated").nsteps == 0


@pytest.mark.parametrize(
    ("p", "k", "placement", "match"),
    [
        (4, 5, "colocated", r"servers must be in \[1, 4\]"),
        (4, 0, "colocated", r"servers must be in \[1, 4\]"),
        (4, 4, "dedicated", r"servers must be in \[1, 3\] \(dedicated"),
        (4, 2.5, "colocated", "servers must be an integer"),
        (4, True, "colocated", "servers must be an integer"),
        (4, 2, "remote", "placement must be one of"),
    ],
)
def test_bad_server_counts_are_one_sentence(p, k, placement, match):
    with pytest.raises((ParameterError, ScheduleError), match=match):
        _ps(p, k, placement)


@pytest.mark.parametrize("backend", ["numpy", "jax", "cuda"])
def test_dedicated_servers_execute_and_ignore_the_helpers_inputs(backend):
    try:
        be = get_backend(backend)
    except commsim.CommsimError as e:
        pytest.skip(str(e))
    if backend == "jax":
        import jax

        if len(jax.devices()) < 8:
            pytest.skip("needs 8 JAX devices")
    for p, k in [(2, 1), (3, 1), (5, 2), (6, 3), (8, 5)]:
        s = _ps(p, k, "dedicated")
        lay = layout(s, 3 * s.nbytes_units)
        x = random_inputs(lay, "float32", seed=p)
        out = execute(s, x, backend=be)  # checks the workers against the reference
        np.testing.assert_array_equal(
            out[: p - k], np.broadcast_to(x[: p - k].sum(0), out[: p - k].shape)
        )


# -- helper ranks in the IR ----------------------------------------------------------------------
def test_helper_ranks_are_checked_when_a_schedule_is_made():
    step = Step.make(src=[0], dst=[1], src_slot=0, dst_slot=0)
    make = Schedule.from_steps
    with pytest.raises(ScheduleError, match=r"helpers must be in \[0, 1\]"):
        make([step], collective="allreduce", nranks=2, nslots=1, helpers=2)
    with pytest.raises(ScheduleError, match="alltoall has a block per rank"):
        make([step], collective="alltoall", nranks=2, nslots=4, helpers=1)
    with pytest.raises(ScheduleError, match="root 1 of broadcast must be a worker"):
        make([step], collective="broadcast", nranks=2, nslots=1, helpers=1, root=1)


def test_the_verifier_knows_helpers_hold_no_data():
    """A helper that sends before it receives reads an empty slot; a helper left without the
    result is fine; a worker's missing result is not."""
    ok = [
        Step.make(src=[0], dst=[2], src_slot=0, dst_slot=0),
        Step.make(src=[1], dst=[2], src_slot=0, dst_slot=0, reduce=True),
        Step.make(src=[2, 2], dst=[0, 1], src_slot=0, dst_slot=0),
    ]
    s = Schedule.from_steps(ok, collective="allreduce", nranks=3, nslots=1, helpers=1)
    assert commsim.verify(s).nranks == 3
    early = [Step.make(src=[2], dst=[0], src_slot=0, dst_slot=0, reduce=True), *ok]
    with pytest.raises(ScheduleError, match="rank 2 sends slot 0, which holds no data yet"):
        commsim.verify(
            Schedule.from_steps(early, collective="allreduce", nranks=3, nslots=1, helpers=1)
        )
    last = Step.make(src=[2], dst=[0], src_slot=0, dst_slot=0)  # rank 1 never gets the sum
    short = Schedule.from_steps(
        [*ok[:2], last], collective="allreduce", nranks=3, nslots=1, helpers=1
    )
    with pytest.raises(ScheduleError, match="rank 1 slot 0"):
        commsim.verify(short)


def test_helpers_survive_files_channels_and_refuse_what_cannot_hold_them(tmp_path):
    s = _ps(6, 2, "dedicated")
    doc = to_dict(s)
    assert doc["helpers"] == 2 and "helpers" not in to_dict(_ps(6, 2))
    back = from_json(json.dumps(doc))
    assert back.helpers == 2 and back.fingerprint == s.fingerprint
    npz = from_npz(to_npz(s, tmp_path / "ps.npz"))
    assert npz.helpers == 2 and npz.fingerprint == s.fingerprint
    assert commsim.verify(commsim.algorithms.channels(s, 2)).nranks == 6
    assert commsim.algorithms.channels(s, 2).helpers == 2
    with pytest.raises(ScheduleError, match=r"helper ranks .* must stay the last ranks"):
        relabel(s, np.arange(6)[::-1], 6)
    with pytest.raises(commsim.CommsimError, match="MSCCL-IR has no ranks that hold no data"):
        msccl_program(s)


def test_the_bound_with_helpers_counts_workers_and_in_network_reduction():
    """w workers: ⌈lg w⌉ latencies, n β (each element received once, reduced by a helper), and
    the (w - 1) n reductions spread over all p ranks."""
    assert lower_bound("allreduce", 6, 100.0, 1.0, 1.0, 1.0, helpers=2) == pytest.approx(
        2 + 100 + 3 / 6 * 100
    )
    assert lower_bound("allreduce", 4, 100.0, 1.0, 1.0, 1.0, helpers=3) == 0.0
    for p in range(2, 20):
        for k in range(1, p):
            s = _ps(p, k, "dedicated")
            pred = Hockney(2.7e-6, 3.1e-10, 7.7e-11).predict(s, SIZES)
            assert not pred.notes, (p, k, pred.notes)  # never below the bound


def test_a_model_whose_bound_takes_no_helpers_gives_0_not_a_wrong_bound():
    """A plug-in model whose ``lower_bound`` has no ``helpers``: its bound is 0, named so."""
    from commsim.models import bound_of

    class NoHelpers(Hockney):
        def lower_bound(self, collective, nranks, nbytes):
            return super().lower_bound(collective, nranks, nbytes)

    model = NoHelpers(alpha="1us", beta="10GB/s", gamma=0)
    s = _ps(8, 4, "dedicated")
    pred = model.predict(s, SIZES)
    assert (pred.time > 0).all()
    bound, name = bound_of(model, "allreduce", 8, SIZES, helpers=4)
    assert (bound == 0).all() and "does not take helper ranks" in name


def test_the_tuner_never_picks_dedicated_servers():
    """Dedicated servers reduce fewer ranks' data: faster at small sizes, never a candidate."""
    from commsim.tuner import sweep

    result = sweep("allreduce", Hockney(), 16, [1024, 2**26], algorithms=["parameter_server"])
    assert {c.params["placement"] for c in result.candidates} == {"colocated"}
