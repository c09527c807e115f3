"""MSCCL-IR thread blocks as IR channels (``commsim/interop/_msccl_channels.py``): a GPU's thread
blocks that share no written data run on channels of their own, so models with several links
time them concurrently; thread blocks that share data, or wait on each other, share a channel,
so the verifier's channel-independence rule (IR rule 6) holds for every imported file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim.interop import parse_msccl, read_msccl
from commsim.models import Hockney
from commsim.topology import ring

DATA = Path(__file__).parent / "data" / "msccl"
FILES = sorted(DATA.glob("*.xml"))


def _step(s: int, kind: str, src: str = "i0", dst: str = "i0", dep=(-1, -1), cnt: int = 1) -> str:
    return (
        f'<step s="{s}" type="{kind}" srcbuf="{src[0]}" srcoff="{src[1:]}" dstbuf="{dst[0]}" '
        f'dstoff="{dst[1:]}" cnt="{cnt}" depid="{dep[0]}" deps="{dep[1]}" hasdep="0"/>'
    )


def bidirectional_ring_allgather(p: int, chan1: int = 0) -> str:
    """An in-place allgather on two rings at once: each gpu's block is two chunks, chunk 0 goes
    clockwise (thread block 0: send r+1, receive r-1), chunk 1 counter-clockwise (thread block 1:
    send r-1, receive r+1, on MSCCL channel ``chan1``). Two thread blocks per GPU, two peers."""
    gpus = []
    for r in range(p):
        tbs = []
        for t, (to, frm, d) in enumerate(
            (((r + 1) % p, (r - 1) % p, -1), ((r - 1) % p, (r + 1) % p, 1))
        ):
            steps = [_step(0, "s", f"o{2 * r + t}")]
            for h in range(1, p):
                owner = (r + d * h) % p  # the block that arrives at hop h
                kind = "r" if h == p - 1 else "rcs"
                steps.append(_step(h, kind, dst=f"o{2 * owner + t}"))
            chan = 0 if t == 0 else chan1
            tbs.append(f'<tb id="{t}" send="{to}" recv="{frm}" chan="{chan}">{"".join(steps)}</tb>')
        gpus.append(
            f'<gpu id="{r}" i_chunks="2" o_chunks="{2 * p}" s_chunks="0">{"".join(tbs)}</gpu>'
        )
    return (
        f'<algo name="biring" proto="Simple" nchannels="{1 + chan1}" nchunksperloop="{2 * p}" '
        f'ngpus="{p}" coll="allgather" inplace="1">{"".join(gpus)}</algo>'
    )


@pytest.mark.parametrize("chan1", [0, 1])
@pytest.mark.parametrize("p", [3, 4, 8])
def test_two_thread_blocks_to_two_peers_are_two_channels_and_two_links_halve_the_time(p, chan1):
    s = parse_msccl(bidirectional_ring_allgather(p, chan1))
    commsim.verify(s)
    assert s.nchannels == 2
    for st in s.steps():  # the clockwise ring on channel 0, the other on channel 1
        net = st.src != st.dst
        clockwise = (st.dst[net] - st.src[net]) % p == 1
        assert (st.channel[net] == np.where(clockwise, 0, 1)).all()
    one, two = (Hockney(alpha=1e-6, beta=1e-9, gamma=0, links=k) for k in (1, 2))
    n = 2 * p * 1000  # 1000 bytes per chunk
    t1, t2 = one.predict(s, n).time, two.predict(s, n).time
    # one link: both rings take turns, 2(p-1) messages; two links: each ring alone, p-1 messages
    assert t1 == pytest.approx(2 * (p - 1) * (1e-6 + 1000e-9))
    assert t2 == pytest.approx((p - 1) * (1e-6 + 1000e-9))


def test_the_topology_model_runs_the_two_rings_together():
    s = parse_msccl(bidirectional_ring_allgather(4))
    # the same transfers on one channel, as the importer made them before
    single = dataclasses.replace(s, step_fn=lambda i: s.step(i).on_channel(0), nchannels=1)
    model = commsim.models.Topology(ring(4, bandwidth="10GB/s", latency="1us"))
    assert model.predict(s, "8MiB").time < 0.75 * model.predict(single, "8MiB").time


def _split_messages(s: commsim.Schedule) -> bool:
    """Whether some step sends two messages between one pair of gpus on two channels."""
    for st in s.steps():
        net = st.src != st.dst
        pairs = set(zip(st.src[net].tolist(), st.dst[net].tolist()))
        if len(
            set(zip(st.src[net].tolist(), st.dst[net].tolist(), st.channel[net].tolist()))
        ) > len(pairs):
            return True
    return False


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_one_link_charges_what_one_channel_did(path):
    """On a single-link model (the default) the channels take turns: every file's time is that
    of the same transfers on channel 0, at two sizes, except where two thread blocks (two
    instances of a program) send to one peer in one step: that is two MSCCL messages, now
    charged a latency each (one channel merged them into one message)."""
    s = read_msccl(path)
    flat = dataclasses.replace(s, step_fn=lambda i: s.step(i).on_channel(0), nchannels=1)
    model = Hockney()
    for n in ("4KiB", "4MiB"):
        t, t_flat = model.predict(s, n).time, model.predict(flat, n).time
        if _split_messages(s):
            assert t > t_flat
        else:
            assert t == pytest.approx(t_flat, rel=1e-12)


@pytest.mark.parametrize(
    ("name", "nchannels"),
    [("alltoall_allpairs_p4_Simple.xml", 3),  # 3 sending, 3 receiving thread blocks: 3 ports
     ("alltoall_allpairs_p8_i2_LL.xml", 14),  # 7 peers x 2 instances
     ("allgather_allpairs_p4_LL.xml", 3),
     ("allreduce_allpairs_p4_i2_LL128.xml", 2),  # the two instances; within one, shared sums
     ("allreduce_allpairs_p4_LL.xml", 1),
     ("allreduce_ring_p4_LL.xml", 1),
     ("allreduce_ring_p8_ch2_i2_Simple.xml", 4)],  # four rings
)  # fmt: skip
def test_independent_thread_blocks_get_ports_of_their_own(name, nchannels):
    s = read_msccl(DATA / name)
    assert s.nchannels == nchannels
    commsim.verify(s)  # and the verifier proves the channels independent


def _two_tb_reduce(dep: bool) -> str:
    """Two gpus, an allreduce of one chunk: thread block 0 sends i[0] to the peer, thread block
    1 receives the peer's and adds it into i[0], after the send when
    ``dep`` (a ``depid`` wait), else in the same step (reads first)."""
    gpus = []
    for g in (0, 1):
        q = 1 - g
        wait = (0, 0) if dep else (-1, -1)
        tbs = (
            f'<tb id="0" send="{q}" recv="-1" chan="1">{_step(0, "s")}</tb>'
            f'<tb id="1" send="-1" recv="{q}" chan="1">{_step(0, "rrc", dep=wait)}</tb>'
        )
        gpus.append(f'<gpu id="{g}" i_chunks="1" o_chunks="1" s_chunks="0">{tbs}</gpu>')
    return (
        '<algo name="two" proto="Simple" nchannels="2" nchunksperloop="1" ngpus="2" '
        f'coll="allreduce" inplace="1">{"".join(gpus)}</algo>'
    )


@pytest.mark.parametrize("dep", [False, True])
def test_thread_blocks_that_share_written_data_share_a_channel(dep):
    """The sending and the reducing thread block both touch i[0], which one writes: the
    verifier's rule puts them, and so both gpus' thread blocks, on one channel (the ``chan``
    they declare, 1)."""
    s = parse_msccl(_two_tb_reduce(dep))
    commsim.verify(s)
    assert {c for st in s.steps() for c in st.channel.tolist()} == {1}


def test_a_round_trip_of_independent_channels_keeps_their_numbers():
    """``chan`` is kept where it is free: the counter-clockwise ring declared on channel 1 is
    channel 1, and it is the one that goes counter-clockwise."""
    s = parse_msccl(bidirectional_ring_allgather(5, chan1=1))
    st = next(st for st in s.steps() if (st.src != st.dst).any())
    net = st.src != st.dst
    ccw = (st.dst[net] - st.src[net]) % 5 == 4
    assert (st.channel[net][ccw] == 1).all() and (st.channel[net][~ccw] == 0).all()
