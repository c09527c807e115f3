"""``commsim topology``: the summary table and document, drawings, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest

from commsim.topology import Network, dragonfly, exact_bisection

B = 25e9


def test_json_counts_a_fat_tree(cli_json):
    doc = cli_json("topology", "fat_tree:128,hosts_per_leaf=16,oversubscription=2")
    assert (doc["hosts"], doc["switches"], doc["servers"]) == (128, 8 + 8, 128)
    assert {c["kind"]: c["links"] for c in doc["link_classes"]} == {
        "host": 128,
        "leaf-spine": 8 * 8,
    }
    assert doc["diameter_links"] == 4 and doc["diameter_exact"]
    assert doc["bisection_bandwidth_Bps"] == pytest.approx(64 * B / 2)
    assert doc["bisection_method"] == "stated" and doc["drawing"] is None


def test_a_name_both_preset_and_generator(cli_json):
    gen = cli_json("topology", "dragonfly:5,4,2,1")  # the generator: 40 hosts
    assert gen["hosts"] == 40 and gen["switches"] == 20
    assert gen["bisection_method"] == "exact"
    assert gen["bisection_bandwidth_Bps"] == exact_bisection(Network(dragonfly(5, 4, 2, 1)))
    assert cli_json("topology", "dragonfly:2")["hosts"] == 2 * 512  # the cluster preset


def test_text_labels_how_the_bisection_was_found(cli):
    rc, out, err = cli("topology", "torus:3x3")
    assert rc == 0 and err == ""
    assert "torus:3x3: 9 hosts, 0 switches" in out
    assert "bisection bandwidth: 200GB/s per direction (exact)" in out  # 8 links of 25 GB/s
    assert "diameter: 2 links" in out
    rc, out, _ = cli("topology", "dragonfly:9,4,2,2")
    assert rc == 0 and "(heuristic upper bound)" in out


def test_draw_writes_a_png(cli, tmp_path):
    path = tmp_path / "ft.png"
    rc, out, _ = cli("topology", "kary_fat_tree:4", "--draw", str(path))
    assert rc == 0 and f"drawing written to {path}" in out
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_graph_file_round_trips(cli_json, tmp_path):
    g = nx.cycle_graph(6)
    nx.set_edge_attributes(g, "100Gb/s", "bandwidth")
    nx.set_edge_attributes(g, "500ns", "latency")
    path = tmp_path / "ring.json"
    path.write_text(json.dumps(nx.node_link_data(g, edges="links")))
    doc = cli_json("topology", str(path))
    assert doc["hosts"] == 6 and doc["diameter_links"] == 3
    assert doc["link_classes"][0]["bandwidth_Bps"] == [12.5e9, 12.5e9]
    assert doc["bisection_bandwidth_Bps"] == 2 * 12.5e9 and doc["bisection_method"] == "exact"


def test_help_teaches_by_example(cli):
    rc, out, _ = cli("topology", "--help")
    assert rc == 0
    assert "commsim topology dragonfly:9,4,2,2 --draw dragonfly.png" in out
    assert "dragonfly:G is the Slingshot-like" in out and "heuristic" in out


@pytest.mark.parametrize(
    ("setup", "argv", "message"),
    [
        ("no-bandwidth", [], "edge ('0', '1') has no 'bandwidth'"),
        ("disconnected", [], "the topology is disconnected: host 'c'"),
        (None, ["fat_tre:64"], "unknown network 'fat_tre'; did you mean fat_tree"),
        (None, ["torus:4x4", "--draw", "out.gif"], "must end in .png, .pdf or .svg"),
        (None, ["fat_tree:1024", "--draw", "big.png"], "too many to draw (at most 300)"),
        (None, ["ring:8,speed=3"], "usage: ring"),
        (
            None,
            ["fat_tree:16,host_per_leaf=4"],
            "unknown keyword host_per_leaf (did you mean hosts_per_leaf?)",
        ),
        (None, ["fat_tree"], "missing the number of hosts n (the first value)"),
        (None, ["fat_tree:16,4"], "2 values before the keywords, fat_tree takes 1 (n)"),
        (None, ["missing.graphml"], "no such file"),
    ],
)
def test_errors_are_one_line_and_exit_2(cli, tmp_path, setup, argv, message):
    path = tmp_path / "g.graphml"
    if setup == "no-bandwidth":
        nx.write_graphml(nx.path_graph(3), path)
    elif setup == "disconnected":
        g = nx.Graph()
        g.add_edge("a", "b", bandwidth=1e9)
        g.add_node("c")
        nx.write_graphml(g, path)
    argv = [str(path)] if setup else [str(tmp_path / a) if "." in a else a for a in argv]
    rc, out, err = cli("topology", *argv)
    assert rc == 2 and out == ""
    assert message in err and err.count("\n") == 1, err


@pytest.mark.parametrize("preset", ["dgx-h100:2", "tpu-v5p:4x4x4", "dgx1-v100:0-3", "ethernet:8"])
def test_a_preset_written_as_toml_is_the_same_cluster(cli, tmp_path, preset):
    """``--toml`` writes a preset out as a file to edit; reading it back predicts the same."""
    import commsim
    from commsim.clusters import cluster
    from commsim.tuner import cluster_model

    path = tmp_path / "c.toml"
    code, out, _ = cli("topology", preset, "--toml", str(path))
    assert code == 0 and str(path) in out
    a, b = cluster(preset), cluster(str(path))
    assert (a.nodes, a.gpus_per_node, a.ngpus) == (b.nodes, b.gpus_per_node, b.ngpus)
    s = commsim.build("allreduce", "ring", nranks=a.ngpus)
    assert cluster_model(b).predict(s, "64MiB").time == cluster_model(a).predict(s, "64MiB").time


def test_toml_of_a_bare_network_is_one_line(cli, tmp_path):
    code, _, err = cli("topology", "torus:4x4", "--toml", str(tmp_path / "t.toml"))
    assert code == 2 and "bare network" in err and len(err.strip().splitlines()) == 1


def test_topology_says_which_switches_reduce(cli, cli_json):
    rc, out, _ = cli("topology", "dgx-h100:1")
    assert rc == 0 and out.splitlines()[0].endswith("1 server")
    assert "in-network reduction: 1 server switch (NVLink SHARP: nvls rows) reduces" in out
    assert cli_json("topology", "dgx-h100:2")["reducing_switches"] == 2
    rc, out, _ = cli("topology", "dgx-a100:1")
    assert rc == 0 and "in-network reduction" not in out
    # --set sharp=true: the 8 rail leaves reduce too, at the fabric tier, and the library says so
    doc = cli_json("topology", "dgx-h100:2", "--set", "sharp=true")
    assert (doc["reducing_switches"], doc["fabric_reducing_switches"]) == (10, 8)
    assert doc["library"]["sharp_efficiency"] == 0.85
    rc, out, _ = cli("topology", "dgx-h100:2", "--set", "sharp=true")
    assert "8 fabric switches (InfiniBand SHARP: collnet_direct)" in out
    rc, _, err = cli("topology", "torus:4x4", "--set", "sharp=true")
    assert rc == 2 and "bare network" in err


def test_topology_shows_a_cluster_file_s_profiles(cli, cli_json):
    """A cluster file's measured profiles are part of what its model does: ``topology`` says
    which class they cap, in text and JSON."""
    path = str(Path(__file__).resolve().parents[2] / "examples" / "clusters" / "dgx-h100-like.toml")
    rc, out, _ = cli("topology", path)
    assert rc == 0 and "rail messages capped by a measured profile (8KiB..256MiB)" in out
    assert cli_json("topology", path)["library"]["profiles"]["rail"]["sizes"][0] == 8192
