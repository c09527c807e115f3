"""Channels (IR rule 6): concurrency in the IR, proved independent, and honoured by the models.

Each test checks a property a user relies on: a multi-channel schedule still computes its
collective, the verifier refuses channels that share data, files keep channels, and the models
put a rank's channels on separate ports (Hockney ``links``) or in flight together on the network.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import commsim
from commsim import Schedule, Step
from commsim._messages import matchings
from commsim.algorithms import REGISTRY, channels, parallel, relabel
from commsim.errors import ParameterError, ScheduleError
from commsim.models import Hockney, Topology, lower_bound
from commsim.topology import ring, switch

A, B = 1e-6, 1e-9


def _rows():
    return sorted(REGISTRY)


@pytest.mark.parametrize("key", _rows(), ids=lambda k: f"{k[0]}-{k[1]}")
@pytest.mark.parametrize("p", [1, 3, 8])
def test_channels_of_every_row_verify(key, p):
    collective, algorithm = key
    try:
        s = commsim.build(collective, algorithm, nranks=p)
    except (ParameterError, ScheduleError):
        pytest.skip(f"{algorithm} does not run on {p} ranks")
    c = channels(s, 3)
    assert c.nchannels == 3
    assert c.nslots == 3 * s.nslots
    commsim.verify(c)


def test_parallel_of_two_orders_verifies_and_keeps_each_part_on_its_channels():
    p = 6
    fwd = commsim.build("allreduce", "ring", nranks=p)
    back = relabel(fwd, (-np.arange(p)) % p, p)  # the same ring the other way round
    both = parallel(fwd, back)
    commsim.verify(both)
    st = both.step(0)
    assert set(st.channel.tolist()) == {0, 1}
    # part 0 holds the even slots, part 1 the odd ones
    assert (st.src_slot[st.channel == 0] % 2 == 0).all()
    assert (st.src_slot[st.channel == 1] % 2 == 1).all()


def _pair(channel_a: int, channel_b: int, kind: str = "allreduce") -> Schedule:
    st = Step.make([0, 1], [1, 0], 0, 0, reduce=True, channel=[channel_a, channel_b])
    return Schedule.from_steps([st], collective=kind, nranks=2, nslots=1, nchannels=2)


def test_one_channel_exchange_verifies():
    commsim.verify(_pair(1, 1))


def test_verifier_refuses_two_channels_on_one_slot():
    with pytest.raises(ScheduleError, match="IR rule 6") as e:
        commsim.verify(_pair(0, 1))
    assert e.value.step == 0 and e.value.slot == 0


def test_verifier_refuses_a_read_of_another_channels_write():
    # channel 0 reduces into rank 1 slot 0; a later step on channel 1 reads it
    steps = [
        Step.make(0, 1, 0, 0, reduce=True, channel=0),
        Step.make(1, 0, 0, 0, channel=1),
    ]
    s = Schedule.from_steps(steps, collective="allreduce", nranks=2, nslots=1, nchannels=2)
    with pytest.raises(ScheduleError, match="channel 1 reads rank 1 slot 0") as e:
        commsim.verify(s)
    assert (e.value.step, e.value.rank, e.value.slot) == (1, 1, 0)


def test_a_channel_outside_nchannels_is_named():
    st = Step.make(0, 1, 0, 0, channel=2)
    s = Schedule.from_steps([st], collective="broadcast", nranks=2, nslots=1, nchannels=2)
    with pytest.raises(ScheduleError, match=r"channel 2 out of range \[0, 2\)"):
        s.check_step(st, 0)


def test_files_keep_channels_and_single_channel_files_do_not_change(tmp_path):
    s = commsim.build("allgather", "ring", nranks=4)
    c = channels(s, 2)
    for suffix in (".json", ".npz"):
        path = tmp_path / f"c{suffix}"
        commsim.save(c, path)
        back = commsim.load(path)
        assert back.nchannels == 2
        assert back.fingerprint == c.fingerprint
    text = (tmp_path / "c.json").read_text()
    assert json.loads(text)["nchannels"] == 2
    plain = tmp_path / "s.json"
    commsim.save(s, plain)
    assert '"channel"' not in plain.read_text() and "nchannels" not in plain.read_text()


def test_fingerprint_sees_channels_only_when_there_are_several():
    st = Step.make([0, 1], [1, 0], 0, 0, reduce=True)
    one = Schedule.from_steps([st], collective="allreduce", nranks=2, nslots=1)
    two = Schedule.from_steps(
        [st.on_channel(1)], collective="allreduce", nranks=2, nslots=1, nchannels=2
    )
    assert one.fingerprint != two.fingerprint
    ring_ = commsim.build("allreduce", "ring", nranks=5)
    assert ring_.fingerprint == _fingerprint_before_channels(ring_)


def _fingerprint_before_channels(s: Schedule) -> str:
    """The digest as it was computed before channels existed (six fields per transfer)."""
    import hashlib

    h = hashlib.sha256()
    h.update(repr((s.collective, s.root, s.nranks, s.ndata, s.nsteps)).encode())
    h.update(s.slot_units.tobytes())
    for st in s.steps():
        order = np.lexsort((st.reduce, st.count, st.dst_slot, st.src_slot, st.dst, st.src))
        h.update(np.int64(len(order)).tobytes())
        for f in (st.src, st.dst, st.src_slot, st.dst_slot, st.count, st.reduce):
            h.update(np.ascontiguousarray(f[order], dtype=np.int64).tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("k", [1, 2, 3])
def test_matchings_split_repeated_pairs_into_separate_rounds(k):
    rng = np.random.default_rng(k)
    p = 7
    src = np.repeat(rng.integers(0, p, 20), k)
    dst = (src + np.repeat(rng.integers(1, p, 20), k)) % p
    rounds = matchings(src, dst, p)
    covered = np.sort(np.concatenate(rounds))
    assert covered.tolist() == list(range(len(src)))
    for r in rounds:
        assert len(np.unique(src[r])) == len(r) and len(np.unique(dst[r])) == len(r)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_hockney_links_run_channels_side_by_side(k):
    p, n = 8, 8e6
    ring_ = commsim.build("allreduce", "ring", nranks=p)
    c = channels(ring_, k)
    # k links: each channel carries n/k on its own link
    t = Hockney(A, B, 0.0, links=k).predict(c, n).time
    assert t == pytest.approx(2 * (p - 1) * A + 2 * (p - 1) / p * (n / k) * B, rel=1e-12)
    # one link: the channels take turns, k latencies per step
    t1 = Hockney(A, B, 0.0).predict(c, n).time
    assert t1 == pytest.approx(k * 2 * (p - 1) * A + 2 * (p - 1) / p * n * B, rel=1e-12)
    bound = Hockney(A, B, 0.0, links=k).lower_bound("allreduce", p, n)
    assert t >= bound * (1 - 1e-12)
    assert bound == pytest.approx(lower_bound("allreduce", p, n, A, B, 0.0, links=k))


@pytest.mark.parametrize("k", [2, 4])
def test_hockney_links_prediction_never_below_its_bound_with_reductions(k):
    """Each link's receiver reduces its own share, so γ is divided by the links as well."""
    p, n, g = 8, 8e6, 1e-10
    c = channels(commsim.build("allreduce", "ring", nranks=p), k)
    model = Hockney(A, B, g, links=k)
    t = model.predict(c, n).time
    assert t == pytest.approx(
        2 * (p - 1) * A + (2 * (p - 1) / p * B + (p - 1) / p * g) * n / k, rel=1e-12
    )
    assert t >= model.lower_bound("allreduce", p, n) * (1 - 1e-12)


def test_hockney_links_change_nothing_for_one_channel():
    s = commsim.build("allreduce", "rabenseifner", nranks=16)
    sizes = np.array([1e3, 1e6, 1e9])
    one = Hockney(A, B, 1e-10).predict(s, sizes).time
    four = Hockney(A, B, 1e-10, links=4).predict(s, sizes).time
    assert np.array_equal(one, four)


def test_injection_bound_divides_bandwidth_by_links():
    p, n = 16, 1e9
    one = lower_bound("allreduce", p, n, 0.0, B, 0.0)
    assert lower_bound("allreduce", p, n, 0.0, B, 0.0, links=4) == pytest.approx(one / 4)
    assert lower_bound("allreduce", p, 0.0, A, B, 0.0, links=3) == pytest.approx(2 * A)  # 4^2>=16


def test_hockney_refuses_ports_with_links():
    with pytest.raises(ParameterError, match="not both"):
        Hockney(ports=2, links=2)
    with pytest.raises(ParameterError, match="links"):
        Hockney(links=0)


@pytest.mark.parametrize("contention", ["none", "bottleneck", "maxmin", "flow"])
def test_topology_shares_a_hosts_link_between_its_channels(contention):
    """On a switch every host has one link: two channels save latency, not bandwidth (a
    contention mode), or run side by side (``none``: links are not shared)."""
    p, n = 8, 64 * 2**20
    net = switch(p, bandwidth="25GB/s", latency="1us")
    ring_ = commsim.build("allreduce", "ring", nranks=p)
    model = Topology(net, contention=contention, gamma=0.0)
    one = model.predict(ring_, n).time
    two = model.predict(channels(ring_, 2), n).time
    if contention == "none":
        assert two < 0.6 * one
    else:
        assert two == pytest.approx(one, rel=0.02)


@pytest.mark.parametrize("contention", ["bottleneck", "maxmin", "flow"])
def test_two_directions_on_a_ring_use_both_links_of_each_host(contention):
    p, n = 8, 64 * 2**20
    fwd = commsim.build("allreduce", "ring", nranks=p)
    back = relabel(fwd, (-np.arange(p)) % p, p)
    model = Topology(ring(p, bandwidth="25GB/s", latency="1us"), contention=contention, gamma=0)
    one = model.predict(fwd, n).time
    both = model.predict(parallel(fwd, back), n)
    assert both.time == pytest.approx(one / 2, rel=0.02)
    assert both.rank_time.shape == (p,)


def test_timeline_and_critical_path_name_real_ranks():
    p = 6
    fwd = commsim.build("allreduce", "ring", nranks=p)
    both = parallel(fwd, relabel(fwd, (-np.arange(p)) % p, p))
    model = Topology(ring(p), contention="bottleneck")
    tl = model.timeline(both, "1MiB")
    assert tl.src.max() < p and tl.dst.max() < p
    path = model.predict(both, "1MiB").network.critical_path
    assert path is not None
