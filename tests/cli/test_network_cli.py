"""The network options of predict and compare, and ``commsim topology``."""

from __future__ import annotations

import networkx as nx
import pytest

import commsim
from commsim.algorithms import info
from commsim.models import Topology
from commsim.topology import torus


def test_predict_on_a_topology_is_the_topology_model(cli_json):
    doc = cli_json(
        "predict", "-c", "allreduce", "-a", "ring", "--topology", "torus:4x4", "-s", "1MiB"
    )
    want = Topology(torus((4, 4))).predict(commsim.build("allreduce", "ring", nranks=16), 2**20)
    assert doc["nranks"] == 16  # -p defaults to every host
    assert doc["results"][0]["time_s"] == pytest.approx(want.time, rel=1e-12)
    assert doc["network"]["limited_by"] == list(want.network.limiting)
    assert doc["model"]["name"] == "topology"


def test_predict_text_names_what_limits_it(cli):
    rc, out, _ = cli(
        "predict", "-c", "allreduce", "-a", "ring", "--topology", "ring:8", "-s", "1KiB,1GiB"
    )
    assert rc == 0
    assert "limited by" in out and "latency" in out and "critical path at 1GiB" in out


def test_compare_on_a_cluster_picks_hierarchical_for_large_sizes(cli_json):
    doc = cli_json("compare", "-c", "allreduce", "--cluster", "dgx-h100:8", "-n", "1KiB,1GiB")
    panel = doc["results"][0]
    assert panel["nranks"] == 64
    assert panel["winner"][1] == "hierarchical"
    assert panel["winner_limited_by"][1] in ("rail", "nvlink")
    assert any("ranks_per_node=8" in n for n in doc["notes"])
    row = info("allreduce", "hierarchical")
    assert row.params["ranks_per_node"] == 8  # the default, but the note says the cluster set it


def test_cluster_gamma_and_placement(cli_json):
    doc = cli_json(
        "predict", "-c", "allreduce", "-a", "hierarchical", "--cluster", "dgx-h100:2",
        "--placement", "round_robin", "-s", "1MiB",
    )  # fmt: skip
    assert doc["model"]["placement"] == "round_robin"
    assert doc["model"]["gamma_s_per_byte"] == pytest.approx(1 / 1.1e12)
    assert any("does not keep a server's ranks together" in n for n in doc["notes"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--topology", "torus:4x4", "--alpha", "1us"], "--alpha set the Hockney model"),
        (["--topology", "tours:4x4"], "did you mean torus"),
        (["--cluster", "dgx-h10:4"], "did you mean dgx-h100"),
        (["--cluster", "dgx-h100:1", "-p", "16"], "16 ranks on a topology with 8 hosts"),
        (["--cluster", "dgx-h100:1", "--topology", "ring:8"], "not both"),
        (["--placement", "random"], "--placement needs a network"),
        (["--topology", "ring:8", "--placement", "snake"], "unknown placement"),
        (["--topology", "ring:8", "--contention", "fair"], "invalid choice"),
    ],
)
def test_bad_network_options_are_one_line_and_exit_2(cli, argv, message):
    rc, out, err = cli("predict", "-c", "allreduce", "-a", "ring", "-s", "1KiB", *argv)
    assert rc == 2 and out == ""
    assert message in err and err.count("\n") == 1


def test_topology_command(cli, cli_json, tmp_path):
    doc = cli_json("topology", "fat_tree:64,hosts_per_leaf=16,oversubscription=4")
    assert (doc["hosts"], doc["switches"], doc["diameter_links"]) == (64, 8, 4)
    assert doc["bisection_bandwidth_Bps"] == pytest.approx(32 * 25e9 / 4)
    rc, out, _ = cli("topology", "dgx-h100:2", "--draw", str(tmp_path / "d.png"))
    assert rc == 0 and "nvlink" in out and (tmp_path / "d.png").stat().st_size > 10_000
    rc, _, err = cli("topology", "dgx-h100:64", "--draw", str(tmp_path / "big.png"))
    assert rc == 2 and "too many to draw" in err


def test_topology_command_file_errors(cli, tmp_path):
    g = nx.path_graph(3)
    path = tmp_path / "g.graphml"
    nx.write_graphml(g, path)
    rc, _, err = cli("topology", str(path))
    assert rc == 2 and "edge ('0', '1') has no 'bandwidth'" in err  # GraphML ids are text
    g = nx.Graph()
    g.add_edge("a", "b", bandwidth=1e9)
    g.add_node("c")
    nx.write_graphml(g, path)
    rc, _, err = cli("topology", str(path))
    assert rc == 2 and "disconnected" in err


def test_predict_trace(cli, tmp_path):
    import json

    path = tmp_path / "t.json"
    rc, out, _ = cli(
        "predict", "-c", "allreduce", "-a", "ring", "--topology", "ring:4", "-s", "1KiB,1MiB",
        "--trace", str(path),
    )  # fmt: skip
    assert rc == 0 and "trace of 1MiB written" in out
    events = json.loads(path.read_text())["traceEvents"]
    assert (
        sum(e["ph"] == "X" and e["pid"] == 1 and e["name"].startswith("send") for e in events) == 24
    )


def test_model_choice(cli_json, cli):
    doc = cli_json("predict", "-c", "allreduce", "-a", "ring", "-p", "8", "--model", "loggp",
                   "--loggp", "L=1us,o=0.2us,g=0.5us,G=25GB/s", "-s", "1MiB")  # fmt: skip
    assert doc["model"]["name"] == "loggp" and doc["model"]["o_s"] == pytest.approx(2e-7)
    doc = cli_json("predict", "-c", "allreduce", "-a", "hierarchical", "--cluster", "dgx-h100:2",
                   "--model", "hockney", "-s", "1MiB")  # fmt: skip
    assert doc["model"]["name"] == "hockney_classes"
    assert doc["model"]["intra"]["beta_s_per_byte"] == pytest.approx(1 / 450e9)
    assert doc["model"]["inter"]["beta_s_per_byte"] == pytest.approx(1 / 50e9)
    for argv, message in [
        (["--model", "topology"], "needs a network"),
        (["--model", "loggp", "--topology", "ring:8"], "LogGP has no network"),
        (["--loggp", "L=1us"], "add --model loggp"),
        (["--model", "hockney", "--topology", "ring:8"], "needs a cluster"),
    ]:
        rc, _, err = cli("predict", "-c", "allreduce", "-a", "ring", "-p", "8", "-s", "1KiB", *argv)
        assert rc == 2 and message in err


def test_explicit_placements(cli_json, cli, tmp_path):
    """Ranks 0..3 on hosts 0, 2, 1, 3 of a ring: every ring message crosses two links, so the
    ring allreduce is slower than with the linear placement."""
    base = [
        "predict",
        "-c",
        "allreduce",
        "-a",
        "ring",
        "-p",
        "4",
        "--topology",
        "ring:4",
        "-s",
        "1MiB",
    ]
    linear = cli_json(*base)["results"][0]["time_s"]
    doc = cli_json(*base, "--placement", "0,2,1,3")
    assert doc["model"]["placement"] == [0, 2, 1, 3] and doc["results"][0]["time_s"] > linear
    path = tmp_path / "hosts.txt"
    path.write_text("0\n2\n1\n3\n")
    assert (
        cli_json(*base, "--placement", f"@{path}")["results"][0]["time_s"]
        == doc["results"][0]["time_s"]
    )
    rc, _, err = cli(*base, "--placement", "0,0,1,2")
    assert rc == 2 and "two ranks on host 0" in err


def test_one_host_and_oversized_clusters(cli):
    rc, out, _ = cli(
        "predict", "-c", "allreduce", "-a", "ring", "--topology", "ring:1", "-s", "1MiB"
    )
    assert rc == 0 and "1MiB" in out
    rc, _, err = cli("predict", "-c", "allreduce", "-a", "ring", "--cluster", "dgx-h100:99999999")
    assert rc == 2 and "would not fit in memory" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-p", "4", "--contention", "flow"], "--contention needs a network"),
        (["--topology", "switch:4", "--placement", ""], "--placement is empty"),
        (["--topology", "switch:4", "--trace", ""], "--trace is empty"),
        (["--topology", "switch:4", "--trace", "/proc/no/t.json"], "a .json file in an existing"),
        (["--cluster", "dgx-h100:2", "--model", "hockney", "--placement", "round_robin"],
         "places ranks linearly"),
        (["--cluster", "dgx-h100:2", "--model", "hockney", "--contention", "flow"], "shares no link"),
    ],
)  # fmt: skip
def test_options_a_model_would_ignore_are_refused(cli, argv, message):
    rc, out, err = cli("predict", "-c", "allreduce", "-a", "ring", "-s", "1KiB", *argv)
    assert rc == 2 and out == "" and message in err


def test_unreadable_graph_and_unwritable_outputs(cli, tmp_path):
    empty = tmp_path / "e.graphml"
    empty.write_text("")
    rc, _, err = cli("topology", str(empty))
    assert rc == 2 and "cannot read the graph" in err
    rc, _, err = cli("topology", "switch:4", "--draw", "/proc/x.png")
    assert rc == 2 and "cannot write" in err


def test_set_changes_a_presets_field_as_a_file_would(cli_json, cli, tmp_path):
    """Issue #26: ``--set inter.bandwidth=800Gb/s`` = the preset written out and edited."""
    args = ["predict", "-c", "allreduce", "-a", "ring", "-s", "1GiB", "--json"]
    fast = cli_json(*args, "--cluster", "dgx-h100:2", "--set", "inter.bandwidth=800Gb/s")
    path = tmp_path / "c.toml"
    assert cli("topology", "dgx-h100:2", "--toml", str(path))[0] == 0
    path.write_text(path.read_text().replace('bandwidth = "400Gb/s"', 'bandwidth = "800Gb/s"'))
    edited = cli_json(*args, "--cluster", str(path))
    slow = cli_json(*args, "--cluster", "dgx-h100:2")
    t = fast["results"][0]["time_s"]
    assert t == edited["results"][0]["time_s"] < slow["results"][0]["time_s"]
    # a link class's name stands for its table, as whatif --vary names it: rail is [inter]
    by_class = cli_json(*args, "--cluster", "dgx-h100:2", "--set", "rail.bandwidth=800Gb/s")
    assert by_class["results"][0]["time_s"] == t


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--cluster", "dgx-h100:2", "--set", "inter.bandwith=1Gb/s"], "did you mean bandwidth"),
        (["--cluster", "dgx-h100:2", "--set", "nope"], "FIELD=VALUE"),
        (["-p", "4", "--set", "nodes=2"], "add --cluster"),
    ],
)
def test_a_bad_set_is_one_line(cli, extra, match):
    code, _, err = cli("predict", "-c", "allreduce", "-a", "ring", "-s", "1MiB", *extra)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1
