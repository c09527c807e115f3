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


# -- channels ------------------------------------------------------------------------------------
def test_tuner_sweeps_channels_and_the_table_builds_them(tmp_path):
    """Two independent links per rank: two channels halve a large allreduce's transfers."""
    from commsim.models import Hockney
    from commsim.tuner import TunerTable, channel_counts

    model = Hockney(alpha=1e-6, beta=1e-9, gamma=0, links=2)
    table = commsim.tune(
        "allreduce", model, 8, "1KiB..64MiB:x64", algorithms=["ring"], channels=(1, 2)
    )
    big = table.lookup(64 << 20)
    assert big.params["channels"] == 2
    s = table.schedule(64 << 20)
    assert s.nchannels == 2 and s.algorithm == "ring"
    commsim.verify(s)
    path = table.save(tmp_path / "t.toml")
    again = TunerTable.load(path)
    assert again.lookup(64 << 20).params == big.params
    assert again.schedule(64 << 20).nchannels == 2
    assert channel_counts(4) == (1, 2, 4)
    plain = commsim.tune("allreduce", model, 8, "1KiB..64MiB:x64", algorithms=["ring"])
    assert all("channels" not in r.params for r in plain.ranges)  # one channel: as before


def test_tuner_refuses_a_bad_channel_count():
    from commsim.models import Hockney

    with pytest.raises(ParameterError, match="channels must be an integer >= 1, got 0"):
        commsim.tune("allreduce", Hockney(), 8, "1KiB", channels=(1, 0))


def test_predict_and_compare_take_channels(capsys):
    argv = ["predict", "-c", "allreduce", "-a", "ring", "-p", "8", "-s", "1MiB", "--json"]
    assert commsim.cli.main([*argv, "--channels", "2"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["params"] == {"channels": 2} and out["ntransfers"] == 2 * 14 * 8
    argv = ["compare", "-c", "allreduce", "-a", "ring,rabenseifner", "-p", "8", "-s", "1MiB"]
    assert commsim.cli.main([*argv, "--channels", "4"]) == 0
    assert "allreduce, p=8" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["predict", "compare", "tune"])
@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5"])
def test_bad_channels_are_one_line_and_exit_2(command, bad, capsys):
    argv = [command, "-c", "allreduce", "-a", "ring", "-p", "8", "-s", "1KiB"]
    assert commsim.cli.main([*argv, f"--channels={bad}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"--channels must be an integer >= 1, got '{bad}'")
    assert len(err.splitlines()) == 1


def test_compare_tune_and_channels_together_are_refused(capsys):
    argv = ["compare", "-c", "allreduce", "-p", "8", "-s", "1KiB", "--tune", "--channels", "2"]
    assert commsim.cli.main(argv) == 2
    assert "commsim tune --channels" in capsys.readouterr().err


# -- protocols -----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["LL", "LL128", "Simple"])
def test_a_protocol_sets_call_cost_hop_latency_and_efficiency(mode, name):
    r"""Ring allreduce on one switch of 1 µs links (a route: 2 µs) and no reduction cost:
    :math:`T = t_p + 2(p-1)\,(\max(2\,\mu s, h_p) + b / (\eta_p B))`."""
    from commsim.models import PROTOCOLS

    p, proto = 8, PROTOCOLS[name]
    s = commsim.build("allreduce", "ring", nranks=p)
    pred = Topology(NET, contention=mode, gamma=0, protocol=name).predict(s, SIZES)
    hop = proto.hop_inter  # every host of a bare switch is a server of its own
    expect = proto.launch + 2 * (p - 1) * (max(2e-6, hop) + SIZES / p / (proto.efficiency * 100e9))
    np.testing.assert_allclose(pred.time, expect, rtol=1e-9)
    assert pred.protocol == (name,) * len(SIZES)
    names = pred.network.part_names
    np.testing.assert_allclose(pred.network.time_parts[names.index("launch")], proto.launch)


def test_intra_server_messages_take_the_nvlink_hop():
    from commsim.models import PROTOCOLS

    c = build_cluster(DESC, "test")
    s = commsim.build("allreduce", "ring", nranks=4)  # the first server's 4 GPUs only
    pred = cluster_model(c, protocol="LL").predict(s, 8.0)
    assert PROTOCOLS["LL"].hop_intra < 1e-6  # 0.6 µs, below the route's 2 x 0.5 µs
    assert pred.time == pytest.approx(PROTOCOLS["LL"].launch + 6 * 1e-6, rel=1e-4)
    across = commsim.build("allreduce", "ring", nranks=8)  # every step has a crossing
    slow = cluster_model(c, protocol="Simple").predict(across, 8.0)
    simple = PROTOCOLS["Simple"]  # 3.4 µs within a server, 14 µs across
    assert slow.time == pytest.approx(simple.launch + 14 * simple.hop_inter, rel=1e-4)


def test_protocol_choice_picks_the_fastest_per_size():
    from commsim.models import ProtocolChoice

    s = commsim.build("allreduce", "ring", nranks=8)
    choice = ProtocolChoice(lambda p: Topology(NET, gamma=0, protocol=p))
    sizes = np.array([1e3, 1e6, 1e9])
    pred = choice.predict(s, sizes)
    each = {n: m.predict(s, sizes).time for n, m in choice.models.items()}
    np.testing.assert_allclose(pred.time, np.min(list(each.values()), axis=0))
    assert pred.protocol[0] == "LL" and pred.protocol[-1] == "Simple"
    for j, name in enumerate(pred.protocol):
        assert each[name][j] == pred.time[j]
    np.testing.assert_allclose(pred.network.time_parts.sum(axis=0), pred.time, rtol=1e-12)
    one = choice.predict(s, 1e3)
    assert one.protocol == "LL" and one.time == pytest.approx(pred.time[0])
    assert one.to_dict()["protocol"] == "LL"
    assert "protocol=auto" in choice.describe() and choice.to_dict()["protocol"] == "auto"
    assert choice.timeline(s, 1e3).last_end == pytest.approx(one.time)


def test_unknown_protocol_is_one_line():
    with pytest.raises(ParameterError, match=r"unknown protocol 'LL64': use LL, LL128, Simple"):
        Topology(NET, protocol="LL64")


def test_cli_protocol_is_reported(capsys):
    import json

    argv = ["predict", "-c", "allreduce", "-a", "ring", "--cluster", "dgx-h100:1"]
    assert commsim.cli.main([*argv, "-s", "1KiB,1GiB", "--protocol", "auto", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["protocol"] for r in out["results"]] == ["LL", "Simple"]
    argv = ["compare", "-c", "allreduce", "-a", "ring", "--cluster", "dgx-h100:1", "-s", "1KiB"]
    assert commsim.cli.main([*argv, "--protocol", "ll128"]) == 0
    out = capsys.readouterr().out
    [row] = [x for x in out.splitlines() if x.startswith("1KiB")]
    assert "protocol=LL128" in out and row.rstrip().endswith("LL128")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-p", "8", "--protocol", "LL"], "--protocol needs the topology model, not hockney"),
        (
            ["--cluster", "dgx-h100:2", "--model", "hockney", "--protocol", "LL"],
            "--protocol needs the topology model, not hockney",
        ),
        (["--cluster", "dgx-h100:1", "--protocol", "fast"], "unknown protocol 'fast'"),
    ],
)
def test_cli_bad_protocol_is_one_line_and_exit_2(extra, message, capsys):
    argv = ["predict", "-c", "allreduce", "-a", "ring", "-s", "1KiB", *extra]
    assert commsim.cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


# -- the per-channel rate cap ------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["none", "bottleneck", "maxmin", "flow"])
def test_a_channel_cap_is_lifted_by_more_channels(mode):
    """Two ranks on 100 GB/s links, 25 GB/s per channel: one channel moves at 25 GB/s, two at
    25 GB/s each (half the bytes each: half the time), eight share the link (12.5 GB/s each;
    ``"none"`` shares nothing, so each of them runs at its cap)."""
    from commsim.algorithms import channels

    n, s = 8e6, commsim.build("allgather", "ring", nranks=2)
    net = switch(2, bandwidth="100GB/s", latency=0)
    capped = Topology(net, contention=mode, gamma=0, channel_bandwidth="25GB/s")
    free = Topology(net, contention=mode, gamma=0)
    assert capped.predict(s, n).time == pytest.approx(n / 2 / 25e9)
    assert capped.predict(channels(s, 2), n).time == pytest.approx(n / 4 / 25e9)
    eight = capped.predict(channels(s, 8), n).time
    if mode == "none":  # no sharing: each channel alone on its path, at its cap
        assert eight == pytest.approx(n / 16 / 25e9)
    else:
        assert eight == pytest.approx(free.predict(s, n).time)
    assert "channel cap=25.0GB/s" in capped.describe()
    assert capped.to_dict()["channel_bandwidth_Bps"] == 25e9


def test_channel_cap_from_a_cluster_file():
    c = build_cluster({**DESC, "channel_bandwidth": "60GB/s"}, "test")
    assert c.channel_bandwidth == 60e9 and cluster_model(c).channel_bandwidth == 60e9
    assert cluster("dgx-h100:1").channel_bandwidth is None  # presets: no cap (docs/library.md)
    with pytest.raises(ParameterError, match="cluster test: channel_bandwidth: "):
        build_cluster({**DESC, "channel_bandwidth": "fast"}, "test")


# -- the tuner: algorithm x protocol x channels ----------------------------------------------------
def test_tuner_table_records_the_protocol_per_range(tmp_path):
    from commsim.models import ProtocolChoice
    from commsim.tuner import TunerTable

    model = ProtocolChoice(lambda p: Topology(NET, gamma=0, protocol=p))
    table = commsim.tune("allreduce", model, 8, "1KiB..1GiB:x16", algorithms=["ring"])
    assert [r.protocol for r in table.ranges] == ["LL", "LL128", "Simple"][: len(table.ranges)]
    assert table.ranges[0].protocol == "LL" and table.ranges[-1].protocol == "Simple"
    again = TunerTable.load(table.save(tmp_path / "t.toml"))
    assert [r.protocol for r in again.ranges] == [r.protocol for r in table.ranges]
    text = (tmp_path / "t.toml").read_text().replace('protocol = "LL"', 'protocol = "LL64"', 1)
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(ParameterError, match=r"ranges\[0\]\.protocol: must be one of LL, LL128"):
        TunerTable.load(tmp_path / "bad.toml")
    plain = commsim.tune("allreduce", Topology(NET), 8, "1KiB..1GiB:x16", algorithms=["ring"])
    assert all(r.protocol is None for r in plain.ranges)
    assert "protocol" not in plain.to_dict()["ranges"][0]


def test_cli_tune_shows_the_protocol(capsys):
    argv = ["tune", "-c", "allreduce", "-a", "ring", "--cluster", "dgx-h100:1"]
    assert commsim.cli.main([*argv, "-s", "1KiB,1GiB", "--protocol", "auto"]) == 0
    out = capsys.readouterr().out
    assert "protocol" in out.splitlines()[3]
    assert out.splitlines()[5].rstrip().endswith("LL")


def test_json_reports_the_winners_protocol_and_the_launch_part(capsys):
    import json

    argv = ["compare", "-c", "allreduce", "-a", "ring,rabenseifner", "--cluster", "dgx-h100:1"]
    assert commsim.cli.main([*argv, "-s", "1KiB,1GiB", "--protocol", "auto", "--json"]) == 0
    [panel] = json.loads(capsys.readouterr().out)["results"]
    assert panel["winner_protocol"] == ["LL", "Simple"]
    argv = ["predict", "-c", "allreduce", "-a", "ring", "--cluster", "dgx-h100:1", "-s", "1KiB"]
    assert commsim.cli.main([*argv, "--json"]) == 0
    parts = json.loads(capsys.readouterr().out)["network"]["time_parts_s"]
    assert parts["launch"] == [pytest.approx(6.6e-6)]


def test_protocol_auto_names_the_bound_that_binds_as_one_protocol_does(capsys):
    import json

    argv = ["compare", "-c", "allreduce", "-a", "ring", "--cluster", "dgx-h100:1", "-s", "1MiB"]
    bounds = []
    for extra in ((), ("--protocol", "auto")):
        assert commsim.cli.main([*argv, *extra, "--json"]) == 0
        [panel] = json.loads(capsys.readouterr().out)["results"]
        bounds.append((panel["bound"], panel["lower_bound_s"]))
    assert bounds[0] == bounds[1] and "injection" in bounds[0][0]
