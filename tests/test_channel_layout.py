"""Channels laid out by the registry row (``commsim.algorithms.on_channels``): the server-ordered
rows rotate each server's ranks per channel, so their channels verify for every ``p``, ``k`` and
``ranks_per_node``, and on a rail-optimized cluster they drive every NIC where copies of one
ring queue on one (docs/library.md, "Channels")."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import commsim
from commsim._cluster_model import cluster_model
from commsim.algorithms import (
    channels,
    info,
    on_channels,
    register,
    rotate_in_servers,
    unregister,
)
from commsim.clusters import cluster
from commsim.errors import ParameterError
from commsim.models import Hockney

SPREAD = ("snake_ring", "nccl_tree")


@pytest.mark.parametrize("algorithm", SPREAD)
@pytest.mark.parametrize("p", range(1, 65))
def test_spread_channels_verify_for_every_p(algorithm, p):
    for g, k in ((8, 8), (3, 2), (5, 3)):
        s = commsim.build("allreduce", algorithm, nranks=p, ranks_per_node=g)
        spread = on_channels(s, k)
        assert spread.nchannels == k * s.nchannels and spread.params["channels"] == k
        commsim.verify(spread)


@pytest.mark.parametrize("algorithm", SPREAD)
@pytest.mark.parametrize("g", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("k", [2, 4, 8, 16])
def test_spread_channels_verify_for_every_server_size(algorithm, g, k):
    for p in (g, 2 * g + 1, 4 * g):
        commsim.verify(
            on_channels(commsim.build("allreduce", algorithm, nranks=p, ranks_per_node=g), k)
        )


@pytest.mark.parametrize("p, g, k", [(16, 8, 8), (13, 4, 3), (7, 8, 2), (24, 8, 16)])
def test_rotations_keep_every_rank_in_its_server(p, g, k):
    perms = rotate_in_servers(p, k, g)
    assert perms.shape == (k, p)
    for perm in perms:
        assert sorted(perm.tolist()) == list(range(p))
        assert np.array_equal(perm // g, np.arange(p) // g)
    assert np.array_equal(perms[0], np.arange(p))  # channel 0 is the schedule itself


def test_one_channel_is_the_schedule_itself():
    s = commsim.build("allreduce", "snake_ring", nranks=16)
    assert on_channels(s, 1) is s


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "8"])
def test_a_channel_count_below_one_is_refused(k):
    with pytest.raises(ParameterError, match="channels must be an integer >= 1"):
        on_channels(commsim.build("allreduce", "snake_ring", nranks=8), k)


def test_a_row_without_a_layout_gets_the_copies():
    s = commsim.build("allreduce", "ring", nranks=8)
    assert info("allreduce", "ring").channel_ranks is None
    a, b = on_channels(s, 4), channels(s, 4)
    for i in range(s.nsteps):
        assert all(np.array_equal(x, y) for x, y in zip(a.step(i), b.step(i), strict=True))


def test_a_layout_is_refused_off_allreduce():
    row = info("allgather", "ring")
    with pytest.raises(ValueError, match="keeps only a collective without a root or blocks"):
        register("allgather", "rotated_ring", cost_fn=row.cost_fn, channel_ranks=lambda p, k: None)(
            row.factory
        )


def test_a_layout_that_declines_gets_the_copies():
    row = info("allreduce", "ring")
    register("allreduce", "ring_declining", cost_fn=row.cost_fn, channel_ranks=lambda p, k: None)(
        row.factory
    )
    try:
        s = dataclasses.replace(
            commsim.build("allreduce", "ring_declining", nranks=8), algorithm="ring_declining"
        )
        out = on_channels(s, 2)
        assert out.nchannels == 2 and commsim.verify(out)
    finally:
        unregister("allreduce", "ring_declining")


def test_hockney_cannot_tell_a_rotation_from_a_copy():
    """A flat model sees the same messages: rotating ranks changes no time."""
    s = commsim.build("allreduce", "snake_ring", nranks=16)
    m = Hockney(links=8)
    sizes = [1e3, 1e6, 1e9]
    np.testing.assert_allclose(
        m.predict(on_channels(s, 8), sizes).time, m.predict(channels(s, 8), sizes).time
    )


def _rail_bytes(model, schedule):
    usage = model.predict(schedule, [float(1 << 30)]).network
    rail = usage.kinds.index("rail")
    return usage.link_bytes[usage.link_kind == rail, 0]


@pytest.mark.parametrize("preset", ["dgx-h100:2", "dgx-h100:4"])
def test_spread_rings_drive_every_nic(preset):
    c = cluster(preset)
    model = cluster_model(c)
    s = commsim.build("allreduce", "snake_ring", nranks=c.ngpus, ranks_per_node=c.gpus_per_node)
    spread, copies = on_channels(s, 8), channels(s, 8)
    spread_bytes, copy_bytes = _rail_bytes(model, spread), _rail_bytes(model, copies)
    assert (spread_bytes > 0).all()  # every GPU's NIC, both directions
    assert (copy_bytes > 0).sum() <= 2 * c.nodes * 2  # one rail out and one in per server
    assert spread_bytes.sum() == pytest.approx(copy_bytes.sum())  # the same bytes, spread
    t_spread = float(model.predict(spread, [float(1 << 30)]).time[0])
    t_copies = float(model.predict(copies, [float(1 << 30)]).time[0])
    # copies put 8 channels' crossings on one 50 GB/s NIC per direction, the spread rings one
    # on each of the 8: the NIC-bound time falls 8 times, and the NVLinks (4.5 ms at 1 GiB on
    # 16 ranks) nearly bind next, so the gain lies between 6 and the rail count
    assert 6.0 <= t_copies / t_spread <= 8.0 + 1e-9


def test_the_tree_crosses_servers_on_every_rail():
    c = cluster("dgx-h100:2")
    s = commsim.build("allreduce", "nccl_tree", nranks=16, ranks_per_node=8)
    model = cluster_model(c)
    assert (_rail_bytes(model, on_channels(s, 8)) > 0).all()
    assert (_rail_bytes(model, channels(s, 8)) > 0).sum() == 2 * 2  # the leaders' rail only


def test_hierarchical_already_spreads_its_inter_phase():
    """Why hierarchical has no layout: its phase across servers runs per local index, so one
    channel already uses every rail."""
    c = cluster("dgx-h100:2")
    s = commsim.build("allreduce", "hierarchical", nranks=16, ranks_per_node=8)
    assert info("allreduce", "hierarchical").channel_ranks is None
    assert (_rail_bytes(cluster_model(c), s) > 0).all()


def test_the_tuner_and_its_table_lay_out_channels_by_the_row():
    t = commsim.tune(
        "allreduce", "dgx-h100:2", 16, "1GiB", algorithms=["snake_ring"], channels=(8,)
    )
    [r] = t.ranges
    assert r.params["channels"] == 8
    s = t.schedule(1 << 30)
    expected = on_channels(commsim.build("allreduce", "snake_ring", nranks=16), 8)
    for i in (0, s.nsteps - 1):
        assert all(np.array_equal(x, y) for x, y in zip(s.step(i), expected.step(i), strict=True))
