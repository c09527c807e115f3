"""Cluster presets and TOML files: the documented counts, the routes between GPUs, errors."""

from __future__ import annotations

import pytest

import commsim
from commsim.clusters import PRESETS, cluster, load_cluster
from commsim.errors import ParameterError, UnknownNameError
from commsim.models import Topology

# preset -> (GPUs, servers, link classes) as docs/clusters.md states them
EXPECTED = {
    "dgx-h100:4": (32, 4, {"nvlink", "rail", "spine"}),
    "dgx-a100:3": (24, 3, {"nvlink", "rail", "spine"}),
    "gb200-nvl72:2": (144, 2, {"nvlink", "rail", "spine"}),
    "tpu-v5p:2x2x4": (16, 4, {"ici"}),
    "dragonfly:3": (1536, 384, {"xgmi", "host", "local", "global"}),
    "ethernet:40": (40, 40, {"host", "leaf-spine"}),
}


@pytest.mark.parametrize("spec", sorted(EXPECTED))
def test_presets_build_with_their_documented_shape(spec):
    c = cluster(spec)
    gpus, servers, kinds = EXPECTED[spec]
    assert (c.ngpus, c.nodes, c.network.nservers) == (gpus, servers, servers)
    assert set(c.network.kinds) == kinds
    assert c.ranks_per_node == gpus // servers


def test_every_preset_is_tested():
    assert {s.split(":")[0] for s in EXPECTED} == set(PRESETS)


def test_dgx_h100_routes_and_numbers():
    c = cluster("dgx-h100:64")
    net = c.network
    kinds = [net.kinds[k] for k in net.link_kind[net.route(0, 5)]]
    assert kinds == ["nvlink", "nvlink"]
    nv = net.bandwidth[net.link_kind == net.kinds.index("nvlink")]
    rail = net.bandwidth[net.link_kind == net.kinds.index("rail")]
    assert set(nv) == {450e9} and set(rail) == {50e9}  # NVLink4 per direction; 400 Gb/s
    assert [net.kinds[k] for k in net.link_kind[net.route(2, 8 * 33 + 2)]] == [
        "rail",
        "spine",
        "spine",
        "rail",
    ]  # fmt: skip  (another scalable unit of 32 servers)


def test_a_hierarchical_allreduce_predicts_on_a_preset():
    """16 servers: the rails carry 2(15/16)(n/8) per GPU at 50 GB/s (5.0 ms at 1 GiB), NVLink
    2(7/8)n at 450 GB/s (4.2 ms): the rail class limits."""
    c = cluster("dgx-h100:16")
    s = commsim.build("allreduce", "hierarchical", nranks=128, ranks_per_node=c.ranks_per_node)
    commsim.verify(s)
    pred = Topology(c.graph, gamma=c.gamma).predict(s, 2**30)
    assert pred.network.limiting == ("rail",)


def _write(tmp_path, text):
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


GOOD = """
name = "lab"
nodes = 4
gpus_per_node = 2
reduction = "500GB/s"
[intra]
bandwidth = "100GB/s"
latency = "1us"
[inter]
kind = "eth"
bandwidth = "25Gb/s"
latency = "5us"
[topology]
kind = "fat_tree"
hosts_per_leaf = 4
oversubscription = 2
[profiles.inter]
sizes = ["1KiB", "1MiB"]
bandwidth = ["0.5GB/s", "3GB/s"]
"""


def test_a_toml_file(tmp_path):
    c = load_cluster(_write(tmp_path, GOOD))
    assert (c.name, c.ngpus, c.ranks_per_node) == ("lab", 8, 2)
    assert c.gamma == pytest.approx(1 / 500e9)
    assert set(c.link_classes) == {"nvlink", "eth"} and c.profiles["inter"].sizes.tolist() == [
        1024,
        2**20,
    ]
    assert cluster(str(_write(tmp_path, GOOD))).ngpus == 8


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("nodes = 4", "nodes = 0"), "nodes: must be an integer >= 1"),
        (("nodes = 4", "nodez = 4"), "nodez: unknown field"),
        (('bandwidth = "25Gb/s"', 'bandwidth = "25gb/s"'), r"\[inter\] bandwidth: ambiguous"),
        (
            ('kind = "fat_tree"', 'kind = "fat_three"'),
            r"\[topology\] kind: .*did you mean fat_tree",
        ),
        (("hosts_per_leaf = 4", "leaf_hosts = 4"), r"\[topology\]: .*leaf_hosts"),
        (('sizes = ["1KiB", "1MiB"]', 'sizes = ["1MiB", "1KiB"]'), "sizes: must increase"),
        (("[intra]", "[intraa]"), "intraa: unknown field"),
        (("name =", "name ="), None),
    ],
)
def test_bad_files_name_the_field(tmp_path, edit, message):
    text = GOOD.replace(*edit)
    if message is None:
        load_cluster(_write(tmp_path, text))
        return
    with pytest.raises(ParameterError, match=message) as e:
        load_cluster(_write(tmp_path, text))
    assert "\n" not in str(e.value) and "c.toml" in str(e.value)


def test_not_toml(tmp_path):
    with pytest.raises(ParameterError, match="not valid TOML"):
        load_cluster(_write(tmp_path, "nodes = = 3"))


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("dgx-h10:4", UnknownNameError, "did you mean dgx-h100"),
        ("dgx-h100", ParameterError, "give its size"),
        ("dgx-h100:0", ParameterError, "integer >= 1"),
        ("tpu-v5p:4x4", ParameterError, "AxBxC"),
        ("tpu-v5p:3x3x3", ParameterError, "multiple of 4"),
        ("dragonfly:600", ParameterError, "at most 513"),
        ("missing.toml", ParameterError, "no such file"),
    ],
)
def test_bad_specs(spec, error, message):
    with pytest.raises(error, match=message):
        cluster(spec)


def test_more_ranks_than_gpus_is_one_line():
    c = cluster("dgx-h100:1")
    with pytest.raises(ParameterError, match="16 ranks on a topology with 8 hosts"):
        Topology(c.graph).predict(commsim.build("allreduce", "ring", nranks=16), 1.0)
