"""The collective library's layer (commsim.models._library): the per-call launch cost and the
reduction overlapped with its transfer, in the topology model (static modes and flow), in the
per-class Hockney model, and from a cluster's fields."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
import commsim.cli
from commsim._cluster_model import cluster_model
from commsim.clusters import build_cluster, cluster
from commsim.errors import ParameterError
from commsim.models import Topology, TwoLevelHockney
from commsim.topology import switch

SIZES = np.array([8.0, 64e3, 8e6])
MODES = ["none", "bottleneck", "flow"]
NET = switch(8, bandwidth="100GB/s", latency="1us")  # 1/β = 100 GB/s per link


@pytest.mark.parametrize("mode", MODES)
def test_launch_is_paid_once_per_call(mode):
    s = commsim.build("allreduce", "ring", nranks=8)
    base = Topology(NET, contention=mode).predict(s, SIZES)
    pred = Topology(NET, contention=mode, launch="6.6us").predict(s, SIZES)
    np.testing.assert_allclose(pred.time, base.time + 6.6e-6, rtol=1e-12)
    parts = pred.network.time_parts
    names = pred.network.part_names
    np.testing.assert_allclose(parts[names.index("launch")], 6.6e-6)
    np.testing.assert_allclose(parts.sum(axis=0), pred.time, rtol=1e-12)
    long = Topology(NET, contention=mode, launch="50us").predict(s, SIZES)
    assert long.network.limiting[0] == "launch"  # 8 bytes: the call costs more than 14 hops


def test_without_launch_the_part_is_zero_and_other_keeps_the_skew():
    s = commsim.build("allreduce", "ring", nranks=4)
    pred = Topology(switch(4), start_skew={0: 3e-6}).predict(s, 1e3)
    names = pred.network.part_names
    assert names[:4] == ("latency", "reduction", "other", "launch")
    assert pred.network.time_parts[names.index("launch"), 0] == 0.0
    assert pred.network.time_parts[names.index("other"), 0] == pytest.approx(3e-6)


@pytest.mark.parametrize("mode", MODES)
def test_overlapped_reduction_faster_than_the_link_is_hidden(mode):
    """γ below β: every reduction hides behind its transfer, the time is γ = 0's."""
    s = commsim.build("allreduce", "ring", nranks=8)
    free = Topology(NET, contention=mode, gamma=0).predict(s, SIZES)
    serial = Topology(NET, contention=mode, gamma="400GB/s").predict(s, SIZES)
    hidden = Topology(NET, contention=mode, gamma="400GB/s", reduction_overlap=True)
    pred = hidden.predict(s, SIZES)
    np.testing.assert_allclose(pred.time, free.time, rtol=1e-12)
    assert (serial.time > pred.time).all()
    assert not pred.notes  # not below the bound: the bound drops γ when reductions overlap
    np.testing.assert_allclose(pred.network.time_parts.sum(axis=0), pred.time, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_overlapped_reduction_slower_than_the_link_shows_its_excess(mode):
    r"""γ above β: each of the ring's p - 1 reduce-scatter steps costs
    :math:`\max(b\beta, b\gamma)`, i.e. :math:`(p-1)\,b\,(\gamma - \beta)` more than γ = 0."""
    p, s = 8, commsim.build("allreduce", "ring", nranks=8)
    free = Topology(NET, contention=mode, gamma=0).predict(s, SIZES)
    slow = Topology(NET, contention=mode, gamma="25GB/s", reduction_overlap=True)
    pred = slow.predict(s, SIZES)
    b = SIZES / p
    np.testing.assert_allclose(
        pred.time, free.time + (p - 1) * b * (1 / 25e9 - 1 / 100e9), rtol=1e-9
    )


def test_local_reductions_stay_serial():
    """A rank's reduction into its own buffer has no message to hide behind."""
    s = commsim.build("reduce", "binomial", nranks=4)
    for overlap in (False, True):
        m = Topology(switch(4), gamma="1GB/s", reduction_overlap=overlap)
        assert m.predict(s, 1e6).time > 0


def test_timeline_ends_reductions_at_the_later_of_transfer_and_reduction():
    s = commsim.build("allreduce", "ring", nranks=4)
    for mode in ("bottleneck", "flow"):
        m = Topology(NET, contention=mode, gamma="25GB/s", reduction_overlap=True)
        tl = m.timeline(s, 4e6)
        assert tl.last_end == pytest.approx(m.predict(s, 4e6).time)
        reduced = tl.reduce_end > tl.end
        assert reduced.any()
        # done 1e6 B at 25 GB/s after the first byte arrived (latency 2 us after the start)
        np.testing.assert_allclose(tl.reduce_end[reduced], tl.start[reduced] + 2e-6 + 1e6 / 25e9)


def test_model_describes_and_reports_the_library():
    m = Topology(NET, launch="5us", reduction_overlap=True)
    assert "launch=5.00us" in m.describe() and "reduction overlapped" in m.describe()
    assert m.to_dict()["launch_s"] == 5e-6 and m.to_dict()["reduction_overlap"] is True
    plain = Topology(NET).to_dict()
    assert plain["launch_s"] == 0.0 and plain["reduction_overlap"] is False
    with pytest.raises(ParameterError, match="reduction_overlap must be true or false"):
        Topology(NET, reduction_overlap="yes")


def test_two_level_hockney_carries_the_library():
    s = commsim.build("allreduce", "ring", nranks=8)
    args = (("1us", "100GB/s"), ("5us", "10GB/s"))
    base = TwoLevelHockney(*args, ranks_per_node=4, gamma=0).predict(s, 8e6)
    with_launch = TwoLevelHockney(*args, ranks_per_node=4, gamma=0, launch="3us")
    assert with_launch.predict(s, 8e6).time == pytest.approx(base.time + 3e-6)
    assert with_launch.to_dict()["launch_s"] == 3e-6


# -- clusters ------------------------------------------------------------------------------------
DESC = {
    "nodes": 2,
    "gpus_per_node": 4,
    "intra": {"bandwidth": "400GB/s", "latency": "0.5us"},
    "inter": {"bandwidth": "50GB/s", "latency": "1us"},
    "topology": {"kind": "switch"},
}


def test_gpu_presets_launch_and_overlap_cpu_ones_do_not():
    for name in ("dgx-h100:1", "dgx-h200:1", "dgx-b200:1", "dgx-a100:1", "gb200-nvl72:1"):
        c = cluster(name)
        assert c.launch == pytest.approx(6.6e-6) and c.reduction_overlap is True
    e = cluster("ethernet:4")
    assert e.launch == 0.0 and e.reduction_overlap is False


def test_cluster_fields_reach_the_model():
    c = build_cluster({**DESC, "launch": "4us", "reduction_overlap": True}, "test")
    m = cluster_model(c)
    assert m.launch == 4e-6 and m.reduction_overlap is True
    assert c.to_dict()["launch_s"] == 4e-6
    plain = cluster_model(build_cluster(DESC, "test"))
    assert plain.launch == 0.0 and plain.reduction_overlap is False


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("launch", "fast", r"cluster test: launch: "),
        ("launch", -1e-6, r"cluster test: launch: "),
        ("reduction_overlap", "yes", r"reduction_overlap: must be true or false, got 'yes'"),
        ("lanch", "1us", r"lanch: unknown field \(did you mean launch\?\)"),
    ],
)
def test_bad_library_fields_are_one_line(field, value, match):
    with pytest.raises(ParameterError, match=match) as e:
        build_cluster({**DESC, field: value}, "test")
    assert "\n" not in str(e.value)


def test_predict_shows_the_breakdown(capsys):
    argv = ["predict", "-c", "allreduce", "-a", "ring", "--cluster", "dgx-h100:1", "-s", "1KiB"]
    assert commsim.cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "reduction overlapped" in out
    [line] = [x for x in out.splitlines() if x.startswith("time at 1KiB:")]
    assert line.startswith("time at 1KiB: launch 6.60us, latency ")


def test_cluster_file_with_bad_launch_exits_2(tmp_path, capsys):
    f = tmp_path / "c.toml"
    f.write_text(
        'nodes = 2\nlaunch = "soon"\n[inter]\nbandwidth = "50GB/s"\nlatency = "1us"\n'
        '[topology]\nkind = "switch"\n'
    )
    argv = ["predict", "-c", "allreduce", "-a", "ring", "--cluster", str(f), "-s", "1KiB"]
    assert commsim.cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "launch" in err and len(err.splitlines()) == 1
