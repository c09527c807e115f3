"""Cluster presets and TOML files: the documented counts, the routes between GPUs, errors."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim import cli
from commsim.clusters import PRESETS, build_cluster, cluster, load_cluster
from commsim.errors import ParameterError, UnknownNameError
from commsim.models import Topology
from commsim.topology import place

ROOT = Path(__file__).parent.parent
DOC = (ROOT / "docs" / "clusters.md").read_text()

# preset -> (GPUs, servers, link classes) as docs/clusters.md states them
EXPECTED = {
    "dgx-h100:4": (32, 4, {"nvlink", "rail", "spine"}),
    "dgx-h200:5": (40, 5, {"nvlink", "rail", "spine"}),
    "dgx-b200:2": (16, 2, {"nvlink", "rail", "spine"}),
    "dgx-a100:3": (24, 3, {"nvlink", "rail", "spine"}),
    "gb200-nvl72:2": (144, 2, {"nvlink", "rail", "spine"}),
    "tpu-v5p:2x2x4": (16, 4, {"ici"}),
    "dgx1-v100:all": (8, 1, {"nvlink", "pcie", "qpi"}),
    "tpu-v4:4x4x8": (128, 32, {"ici"}),
    "tpu-v5e:4x8": (32, 4, {"ici"}),
    "tpu-v6e:2x2": (4, 1, {"ici"}),
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
    assert set(c.link_classes) == {"nvlink", "eth"}  # [profiles.inter] is the eth class's
    assert c.profiles["eth"].sizes.tolist() == [1024, 2**20]
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
        (("hosts_per_leaf = 4", "leaf_hosts = 4"), r"\[topology\]: unknown field leaf_hosts"),
        (
            ("hosts_per_leaf = 4", "host_per_leaf = 4"),
            r"unknown field host_per_leaf \(did you mean hosts_per_leaf\?\) for kind = 'fat_tree'",
        ),
        (
            ("hosts_per_leaf = 4", 'latency = "1us"'),
            r"\[topology\] latency: comes from the \[intra\] and \[inter\] tables",
        ),
        (
            ("hosts_per_leaf = 4", "nvls = true"),
            r"\[topology\] nvls: a top-level field: write nvls = \.\.\. above the tables",
        ),
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
        ("dragonfly:600", ParameterError, "at most 513 groups"),
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


# ---------------------------------------------------------------------------------------------
# The numbers docs/clusters.md documents, per preset: per link class (bandwidth B/s per
# direction, latency s), the reduction bandwidth, and the switch count as a function of size.

GB, Gb, us = 1e9, 1e9 / 8, 1e-6
DOCUMENTED = {
    "dgx-h100": ({"nvlink": (450 * GB, 0.5 * us), "rail": (400 * Gb, 1 * us)}, 1.1e12),
    "dgx-h200": ({"nvlink": (450 * GB, 0.5 * us), "rail": (400 * Gb, 1 * us)}, 1.6e12),
    "dgx-b200": ({"nvlink": (900 * GB, 0.5 * us), "rail": (400 * Gb, 1 * us)}, 2.7e12),
    "dgx-a100": ({"nvlink": (300 * GB, 0.5 * us), "rail": (200 * Gb, 1 * us)}, 680e9),
    "gb200-nvl72": ({"nvlink": (900 * GB, 0.5 * us), "rail": (400 * Gb, 1 * us)}, 2.7e12),
    "tpu-v5p": ({"ici": (100 * GB, 1 * us)}, 920e9),
    "tpu-v4": ({"ici": (45 * GB, 1 * us)}, 400e9),
    "tpu-v5e": ({"ici": (50 * GB, 1 * us)}, 273e9),
    "tpu-v6e": ({"ici": (100 * GB, 1 * us)}, 546e9),
    "dragonfly": (
        {"xgmi": (50 * GB, 1 * us), "host": (200 * Gb, 1 * us), "local": (200 * Gb, 1 * us)},
        1.07e12,
    ),
    "ethernet": ({"host": (100 * Gb, 2 * us)}, 100e9),
}


def _switches(spec: str) -> int:
    """docs/clusters.md, "Switch counts"."""
    name, _, arg = spec.partition(":")
    if name.startswith("tpu-"):
        return 0
    n = int(arg)
    rails = {
        "dgx-h100": (8, 32),
        "dgx-h200": (8, 32),
        "dgx-b200": (8, 32),
        "dgx-a100": (8, 20),
        "gb200-nvl72": (72, 8),
    }
    if name in rails:
        g, unit = rails[name]
        return n + g * math.ceil(n / unit) + max(1, round(min(unit, n) / 2))
    if name == "dragonfly":
        return 32 * n + 128 * n
    return math.ceil(n / 32) + 16  # ethernet


@pytest.mark.parametrize(
    "spec",
    [
        "dgx-h100:1",
        "dgx-h100:33",
        "dgx-h200:2",
        "dgx-h200:40",
        "dgx-b200:1",
        "dgx-b200:65",
        "dgx-a100:7",
        "dgx-a100:41",
        "gb200-nvl72:3",
        "gb200-nvl72:17",
        "tpu-v5p:2x2x1",
        "tpu-v5p:4x4x8",
        "tpu-v4:4x4x4",
        "tpu-v5e:16x16",
        "tpu-v6e:8x16",
        "dragonfly:1",
        "dragonfly:2",
        "ethernet:1",
        "ethernet:65",
    ],
)
def test_presets_have_the_documented_numbers(spec):
    c = cluster(spec)
    net = c.network
    classes, reduction = DOCUMENTED[spec.split(":")[0]]
    for name, (bw, lat) in classes.items():
        on = net.link_kind == net.kind_index(name)
        assert on.any(), name
        assert np.allclose(net.bandwidth[on], bw) and np.allclose(net.latency[on], lat), name
        if name in c.link_classes:
            assert (c.link_classes[name].bandwidth, c.link_classes[name].latency) == pytest.approx(
                (bw, lat)
            )
    assert c.reduction == pytest.approx(reduction)
    kinds = [k for _, k in c.graph.nodes(data="kind")]
    assert kinds.count("switch") == _switches(spec)
    assert net.nhosts == c.ngpus and net.nservers == c.nodes
    assert np.array_equal(net.host_server, np.arange(c.ngpus) // c.gpus_per_node)


def test_every_documented_preset_has_a_section_in_the_doc():
    for name in PRESETS:
        assert re.search(rf"^## {re.escape(name)}$", DOC, flags=re.MULTILINE), name
        assert f"docs/clusters.md#{name}" == cluster(_small(name)).sources


def _small(name: str) -> str:
    return {
        "tpu-v4": "tpu-v4:2x2x1",
        "tpu-v5p": "tpu-v5p:2x2x1",
        "tpu-v5e": "tpu-v5e:1x1",
        "tpu-v6e": "tpu-v6e:1x1",
    }.get(name, f"{name}:1")


def test_rail_fabric_is_non_blocking_at_the_leaves():
    """A leaf's uplinks carry what its servers' NICs can send (the SuperPOD's 32 down, 32 up)."""
    for spec, unit in [
        ("dgx-h100:64", 32),
        ("dgx-h200:40", 32),
        ("dgx-b200:33", 32),
        ("dgx-a100:40", 20),
        ("gb200-nvl72:16", 8),
    ]:
        c = cluster(spec)
        net = c.network
        leaf = ("fabric", ("leaf", 0, 0))
        nodes = list(c.graph.nodes)
        src = np.array([nodes[i] for i in net.link_src], dtype=object)
        rail = net.link_kind == net.kind_index("rail")
        spine = net.link_kind == net.kind_index("spine")
        down = net.bandwidth[rail & np.array([s == leaf for s in src])].sum()
        up = net.bandwidth[spine & np.array([s == leaf for s in src])].sum()
        assert down == pytest.approx(unit * c.link_classes["rail"].bandwidth)
        assert up == pytest.approx(down)


# ---------------------------------------------------------------------------------------------
# Routes take the documented link classes.


def _classes(c, a, b):
    net = c.network
    return [net.kinds[k] for k in net.link_kind[net.route(a, b)]]


NV, SAME_RAIL, CROSS = ["nvlink"] * 2, ["rail"] * 2, ["rail", "spine", "spine", "rail"]


@pytest.mark.parametrize(
    ("spec", "a", "b", "expected"),
    [
        ("dgx-h100:64", 0, 7, NV),  # inside a server: NVSwitch only
        ("dgx-h100:64", 8 * 5 + 2, 8 * 31 + 2, SAME_RAIL),  # rail 2, same unit: the rail leaf
        ("dgx-h100:64", 8 * 5 + 2, 8 * 6 + 3, CROSS),  # another rail: through a spine
        ("dgx-h100:64", 2, 8 * 32 + 2, CROSS),  # same rail, another unit
        ("dgx-h200:40", 0, 7, NV),
        ("dgx-h200:40", 8 * 31 + 4, 4, SAME_RAIL),
        ("dgx-h200:40", 8 * 32 + 4, 4, CROSS),  # units of 32 servers
        ("dgx-b200:40", 1, 6, NV),
        ("dgx-b200:40", 8 * 31 + 4, 4, SAME_RAIL),
        ("dgx-b200:40", 8 * 32 + 4, 4, CROSS),
        ("dgx-a100:40", 8 * 19 + 1, 1, SAME_RAIL),
        ("dgx-a100:40", 8 * 20 + 1, 1, CROSS),  # units of 20 servers
        ("gb200-nvl72:16", 0, 71, NV),  # a whole rack is one NVLink domain
        ("gb200-nvl72:16", 5, 72 * 7 + 5, SAME_RAIL),
        ("gb200-nvl72:16", 5, 72 * 8 + 5, CROSS),  # units of 8 racks
        ("tpu-v5p:4x4x8", 0, 1, ["ici"]),
        ("tpu-v5p:4x4x8", 0, 127, ["ici"] * 3),  # (0,0,0) -> (3,3,7): one wrap-around hop each
        ("tpu-v5p:4x4x8", 0, 2 * 32 + 2 * 8 + 4, ["ici"] * 8),  # torus distance 2 + 2 + 4
        ("dragonfly:3", 0, 3, ["xgmi"] * 2),
        ("dragonfly:3", 0, 15, ["host"] * 2),  # one router serves 16 GPUs
        ("ethernet:64", 0, 31, ["host"] * 2),
        ("ethernet:64", 0, 32, ["host", "leaf-spine", "leaf-spine", "host"]),
    ],
)
def test_routes_take_the_documented_link_classes(spec, a, b, expected):
    assert _classes(cluster(spec), a, b) == expected


def test_dragonfly_global_links_between_two_routers_add_up():
    """docs/clusters.md: dragonfly:3 has 256 global links per group pair, 8 per router pair."""
    net = cluster("dragonfly:3").network
    on = net.link_kind == net.kind_index("global")
    assert on.sum() == 2 * 96 and np.allclose(net.bandwidth[on], 8 * 200 * Gb)


def test_dragonfly_routes_cross_at_most_one_global_link():
    c = cluster("dragonfly:4")
    net = c.network
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, c.ngpus, 3000), rng.integers(0, c.ngpus, 3000)
    indptr, links = net.routes(a, b)
    pair = np.repeat(np.arange(len(a)), np.diff(indptr))
    globals_ = np.bincount(pair[net.link_kind[links] == net.kind_index("global")], minlength=len(a))
    other_group = a // 512 != b // 512
    assert np.array_equal(globals_, other_group.astype(int))


def test_dgx_h100_2048_routes_every_pair_class_right():
    """16,384 GPUs: a sample of GPU pairs of each kind, all routes checked at once."""
    c = cluster("dgx-h100:2048")
    net = c.network
    assert (net.nhosts, net.nservers) == (16384, 2048)
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 16384, 4000), rng.integers(0, 16384, 4000)
    b[:1000] = a[:1000] // 8 * 8 + rng.integers(0, 8, 1000)  # same server
    b[1000:2000] = (a[1000:2000] // 256 * 32 + rng.integers(0, 32, 1000)) * 8 + a[1000:2000] % 8
    keep = a != b
    a, b = a[keep], b[keep]
    indptr, links = net.routes(a, b)
    pair = np.repeat(np.arange(len(a)), np.diff(indptr))
    count = {
        k: np.bincount(pair[net.link_kind[links] == net.kind_index(k)], minlength=len(a))
        for k in ("nvlink", "rail", "spine")
    }
    server = a // 8 == b // 8
    same_rail_unit = ~server & (a % 8 == b % 8) & (a // 256 == b // 256)
    cross = ~server & ~same_rail_unit
    assert server.sum() > 500 and same_rail_unit.sum() > 500 and cross.sum() > 500
    assert np.array_equal(count["nvlink"], 2 * server)
    assert np.array_equal(count["rail"], 2 * ~server)
    assert np.array_equal(count["spine"], 2 * cross)


# ---------------------------------------------------------------------------------------------
# Files: a TOML writer for the round trip, the examples, the doc's example.


def _toml(d, prefix=""):
    def value(v):
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)

    lines = [f"{k} = {value(v)}" for k, v in d.items() if not isinstance(v, dict)]
    for k, v in d.items():
        if isinstance(v, dict):
            lines += ["", f"[{prefix}{k}]", _toml(v, f"{prefix}{k}.")]
    return "\n".join(lines)


def _same_network(x, y):
    nx_, ny = x.network, y.network
    assert nx_.kinds == ny.kinds
    for attr in ("link_src", "link_dst", "link_kind", "bandwidth", "latency", "host_server"):
        assert np.array_equal(getattr(nx_, attr), getattr(ny, attr)), attr
    assert x.graph.graph.get("routing") == y.graph.graph.get("routing")  # d-mod-k or ECMP


@pytest.mark.parametrize(
    "spec",
    [
        "dgx-h100:3",
        "dgx-h200:2",
        "dgx-b200:3",
        "dgx-a100:2",
        "gb200-nvl72:2",
        "tpu-v5p:2x2x4",
        "tpu-v4:4x4x8",
        "tpu-v5e:16x16",
        "tpu-v6e:2x4",
        "dragonfly:2",
        "ethernet:9",
    ],
)
def test_toml_round_trip_of_every_preset(spec, tmp_path):
    name, _, arg = spec.partition(":")
    description = PRESETS[name][1](spec, arg)
    path = tmp_path / "preset.toml"
    path.write_text(_toml(description))
    a, b = cluster(spec), load_cluster(path)
    assert (b.name, b.nodes, b.gpus_per_node, b.reduction) == (
        a.name,
        a.nodes,
        a.gpus_per_node,
        a.reduction,
    )
    assert b.link_classes == a.link_classes
    _same_network(a, b)


EXAMPLES = sorted((ROOT / "examples" / "clusters").glob("*.toml"))


def test_there_are_examples():
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_files_load(path):
    c = cluster(str(path))
    assert c.network.nhosts == c.ngpus == c.nodes * c.gpus_per_node
    assert set(c.link_classes) <= set(c.network.kinds)  # the file's class names are the graph's
    place(c.network, c.ngpus, c.placement)  # its placement is valid for all its GPUs


def test_the_docs_full_example_is_dgx_h100_64(tmp_path):
    block = re.search(r"```toml\n(.*?)```", DOC, flags=re.DOTALL).group(1)
    path = tmp_path / "doc.toml"
    path.write_text(block)
    c = load_cluster(path)
    _same_network(c, cluster("dgx-h100:64"))
    assert c.profiles["rail"].bandwidth.tolist() == [6e9, 40e9, 48e9]
    assert (ROOT / "examples/clusters/dgx-h100-like.toml").read_text().endswith(block)


def test_a_torus_file_is_the_tpu_preset():
    _same_network(
        cluster(str(ROOT / "examples/clusters/tpu-like-torus.toml")), cluster("tpu-v5p:4x4x8")
    )


def test_file_link_class_names_name_the_graphs_links():
    d = {
        "nodes": 4,
        "gpus_per_node": 2,
        "intra": {"kind": "nvl", "bandwidth": "100GB/s", "latency": 0},
        "inter": {"kind": "ib", "bandwidth": "25Gb/s", "latency": "5us"},
        "topology": {"kind": "rail_optimized", "nodes_per_unit": 2},
    }
    c = build_cluster(d, "x.toml")
    assert set(c.network.kinds) == {"nvl", "ib", "spine"}
    assert _classes(c, 0, 1) == ["nvl", "nvl"] and _classes(c, 0, 2) == ["ib", "ib"]
    d["topology"] = {"kind": "fat_tree", "hosts_per_leaf": 4}
    assert set(build_cluster(d, "x.toml").network.kinds) == {"nvl", "ib", "leaf-spine"}


# ---------------------------------------------------------------------------------------------
# Every error path: one line, naming the file and the field.

BASE = {
    "nodes": 4,
    "gpus_per_node": 2,
    "intra": {"bandwidth": "100GB/s", "latency": "1us"},
    "inter": {"kind": "eth", "bandwidth": "25Gb/s", "latency": "5us"},
    "topology": {"kind": "fat_tree", "hosts_per_leaf": 4},
}


def _edit(**changes):
    d = json.loads(json.dumps(BASE))
    for key, v in changes.items():
        table, _, field = key.partition("__")
        if not field:
            d.pop(table) if v is None else d.__setitem__(table, v)
        elif v is None:
            d[table].pop(field)
        else:
            d[table][field] = v
    return d


ERRORS = [
    (_edit(nodes=None), r"nodes: missing"),
    (_edit(nodes="4"), r"nodes: must be an integer >= 1, got '4'"),
    (_edit(nodes=True), r"nodes: must be an integer >= 1, got True"),
    (_edit(gpus_per_node=0), r"gpus_per_node: must be an integer >= 1"),
    (_edit(placement=3), r"placement: must be linear, round_robin or random\[:SEED\], got 3"),
    (_edit(placement="diagonal"), r"placement: .*got 'diagonal'"),
    (_edit(placement="random:-1"), r"placement: .*got 'random:-1'"),
    (_edit(intra=None), r"\[intra\]: missing table: 2 GPUs per server"),
    (_edit(intra=5), r"\[intra\]: must be a table, got 5"),
    (_edit(intra__speed=1), r"\[intra\] speed: unknown field"),
    (_edit(intra__latency=None), r"\[intra\] latency: missing"),
    (_edit(intra__latency="fast"), r"\[intra\] latency: cannot parse time 'fast'"),
    (_edit(intra__latency=-1), r"\[intra\] latency: must be finite and >= 0 seconds, got -1$"),
    (_edit(inter__bandwidth=0), r"\[inter\] bandwidth: must be > 0 bytes/s, got 0$"),
    (_edit(inter__bandwidth=None), r"\[inter\] bandwidth: missing"),
    (_edit(inter__kind=""), r"\[inter\] kind: must be a name"),
    (_edit(inter=None), r"\[inter\]: missing table"),
    (_edit(topology=None), r"\[topology\]: missing table"),
    (_edit(topology__kind=None), r"\[topology\] kind: must be one of .*got None"),
    (_edit(topology__kind="fat-tree"), r"\[topology\] kind: .*did you mean fat_tree\?"),
    (_edit(topology__oversubscription=0.5), r"\[topology\] kind = 'fat_tree': .*oversubscription"),
    (_edit(topology__hosts_per_leaf="four"), r"\[topology\] kind = 'fat_tree': .*hosts_per_leaf"),
    (_edit(topology__leaf_hosts=4), r"\[topology\]: .*leaf_hosts"),
    (_edit(topology={"kind": "torus", "dims": [2, 2]}), r"\[topology\] dims: 2x2 = 4 chips"),
    (_edit(topology={"kind": "torus", "dims": "2x4"}), r"\[topology\] dims: must be a list"),
    (_edit(topology={"kind": "torus"}), r"\[topology\] dims: must be a list"),
    (_edit(topology={"kind": "dragonfly", "groups": 2}), r"\[topology\]: this dragonfly has 16"),
    (
        _edit(topology={"kind": "rail_optimized", "nodes_per_unit": 0}),
        r"\[topology\] kind = 'rail_optimized': .*nodes_per_unit",
    ),
    (_edit(profiles={"bogus": {}}), r"\[profiles.bogus\]: no link class 'bogus'"),
    (_edit(profiles={"inter": 3}), r"\[profiles.inter\]: must be a table"),
    (_edit(profiles=[1]), r"\[profiles\]: must be a table"),
    (
        _edit(profiles={"inter": {"sizes": ["1KiB"], "bandwidth": []}}),
        r"\[profiles.inter\]: needs lists sizes and bandwidth of the same",
    ),
    (
        _edit(profiles={"eth": {"sizes": ["1KiB"], "bandwidth": ["1GB/s"], "x": 1}}),
        r"\[profiles.eth\] x: unknown field",
    ),
    (
        _edit(profiles={"inter": {"sizes": ["1QB"], "bandwidth": ["1GB/s"]}}),
        r"\[profiles.inter\]: cannot parse size '1QB'",
    ),
    (
        _edit(profiles={"inter": {"sizes": ["1KiB"], "bandwidth": [0]}}),
        r"\[profiles.inter\]: .*bandwidth must be > 0",
    ),
    (_edit(reduction="fast"), r"reduction: cannot parse bandwidth 'fast'"),
    (_edit(reduction=0), r"reduction: must be > 0 bytes/s, got 0$"),
]


@pytest.mark.parametrize(("description", "message"), ERRORS, ids=[m for _, m in ERRORS])
def test_every_bad_field_is_one_line_naming_it(tmp_path, description, message):
    path = tmp_path / "bad.toml"
    path.write_text(_toml(description))
    with pytest.raises(ParameterError, match=r"^cluster bad\.toml: " + message) as e:
        load_cluster(path)
    assert "\n" not in str(e.value)


def test_the_base_of_the_error_cases_loads(tmp_path):
    path = tmp_path / "good.toml"
    path.write_text(_toml(BASE))
    assert load_cluster(path).ngpus == 8


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        (
            "dgx:4",
            UnknownNameError,
            r"did you mean dgx-h100, dgx-h200, dgx-b200, dgx-a100, dgx1-v100\?",
        ),
        ("dgx-h20:4", UnknownNameError, r"did you mean dgx-h200\?"),
        ("dgx-b200:0", ParameterError, "DGX B200 nodes must be an integer >= 1, got '0'"),
        ("nvl72:2", UnknownNameError, r"did you mean gb200-nvl72\?"),
        ("ethernt:4", UnknownNameError, r"did you mean ethernet\?"),
        ("zzz:1", UnknownNameError, r"^unknown cluster 'zzz' \(presets: dgx-h100:N, .*\.toml"),
        ("dgx-h100:abc", ParameterError, "DGX H100 nodes must be an integer >= 1, got 'abc'"),
        ("ethernet:", ParameterError, "must be an integer >= 1, got ''"),
        ("tpu-v5p:0x2x2", ParameterError, "every dimension must be >= 1"),
        ("tpu-v5p:2x2", ParameterError, "AxBxC"),
        ("dragonfly:0", ParameterError, "integer >= 1"),
    ],
)
def test_more_bad_specs(spec, error, message):
    with pytest.raises(error, match=message) as e:
        cluster(spec)
    assert "\n" not in str(e.value)


def test_the_largest_dragonfly_is_accepted_and_one_more_group_is_not():
    """100 groups: 3,200 routers and 12,800 per-server crossbars; the preset routes there (one
    sample pair). Routes come from indices, so the limit is the balanced dragonfly's 513
    groups (tests/test_dragonfly_router.py), not the hop table's 16,384 switches."""
    net = cluster("dragonfly:100").network
    assert len(net.route(0, net.nhosts - 1)) > 0
    with pytest.raises(ParameterError, match="at most 513 groups"):
        cluster("dragonfly:514")


def test_placements_on_a_cluster():
    net = cluster("dgx-h100:4").network
    assert net.host_server[place(net, 4, "round_robin")].tolist() == [0, 1, 2, 3]
    assert net.host_server[place(net, 16, "linear")].tolist() == [0] * 8 + [1] * 8
    assert sorted(place(net, 32, "random:5").tolist()) == list(range(32))
    with pytest.raises(ParameterError, match="33 ranks on a topology with 32 hosts"):
        place(net, 33, "linear")
    with pytest.raises(ParameterError, match=r"integer seed >= 0, got '-1'"):
        place(net, 4, "random:-1")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["predict", "-c", "allreduce", "-a", "ring", "-p", "8", "--cluster", "dgx-h10:4"],
            "dgx-h100",
        ),
        (["topology", "missing.toml"], "no such file"),
        (
            [
                "predict",
                "-c",
                "allreduce",
                "-a",
                "ring",
                "-p",
                "16",
                "--cluster",
                "dgx-h100:1",
                "--model",
                "topology",
                "-s",
                "1KiB",
            ],
            "16 ranks on a topology with 8 hosts",
        ),
    ],
)
def test_the_command_line_says_it_in_one_line_and_exits_2(argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_the_docs_python_example_runs():
    code = re.search(r"```python\n(.*?)```", DOC, flags=re.DOTALL).group(1)
    scope: dict = {}
    exec(compile(code, "docs/clusters.md", "exec"), scope)
    c = scope["c"]
    assert (c.ngpus, c.nodes, c.ranks_per_node) == (1024, 128, 8)  # as the example's comment says


def test_a_fat_tree_file_gives_its_spine_a_bandwidth_and_latency_of_its_own(tmp_path):
    """Issue #26: a fat_tree cluster file could not give the spine its own numbers."""
    path = tmp_path / "ft.toml"
    path.write_text(
        'name = "ft"\nnodes = 32\ngpus_per_node = 1\n\n'
        '[inter]\nkind = "nic"\nbandwidth = "400Gb/s"\nlatency = "1us"\n\n'
        '[topology]\nkind = "fat_tree"\nhosts_per_leaf = 8\nspines = 4\n'
        'spine_bandwidth = "800Gb/s"\nspine_latency = "3us"\n'
    )
    net = cluster(str(path)).network
    spine = net.link_kind == net.kinds.index("leaf-spine")
    assert set(net.bandwidth[spine]) == {100e9} and set(net.latency[spine]) == {3e-6}


# ---------------------------------------------------------------------------------------------
# Graphs built on first use, and the per-class costs read off two servers.


def _costs_on_the_whole_network(c):
    """Each route's latency and its slowest link as the library drives it (the class's
    ``efficiency`` times its bandwidth)."""
    net, g = c.network, c.gpus_per_node
    share = {k: c.link_classes[k].efficiency if k in c.link_classes else 1.0 for k in net.kinds}
    driven = net.bandwidth * np.array([share[k] for k in net.kinds])[net.link_kind]

    def alpha_beta(a, b):
        links = net.route(a, b)
        bw = float(driven[links].min())
        return float(net.latency[links].sum()), 0.0 if bw == float("inf") else 1 / bw

    return alpha_beta(0, 1 if g > 1 else g), alpha_beta(0, g)


RAILS = {"kind": "rail_optimized"}


@pytest.mark.parametrize(
    "description",
    [
        _edit(nodes=64, topology={**RAILS, "nodes_per_unit": 8}),
        _edit(nodes=64, topology={**RAILS, "nodes_per_unit": 1, "routing": "dmodk"}),
        _edit(nodes=40, topology={**RAILS, "nodes_per_unit": 1, "oversubscription": 4}),
        _edit(nodes=9, gpus_per_node=1, topology={**RAILS, "nodes_per_unit": 2}),
        _edit(nodes=33, topology={"kind": "switch"}),
        _edit(nodes=12, gpus_per_node=1, topology={"kind": "switch"}),
    ],
    ids=["units-of-8", "units-of-1-dmodk", "units-of-1-4to1", "one-gpu", "switch", "switch-1"],
)
def test_class_costs_on_two_servers_are_the_whole_clusters(description):
    c = build_cluster(description, "test")
    assert c.two_servers_suffice
    assert c.class_costs() == _costs_on_the_whole_network(c)


@pytest.mark.parametrize("spec", ["dgx-h100:64", "dgx-b200:5", "dgx-a100:33", "ethernet:48"])
def test_class_costs_of_presets_are_the_whole_clusters(spec):
    c = cluster(spec)
    assert c.class_costs() == _costs_on_the_whole_network(c)


def test_a_rail_cluster_builds_its_graph_when_asked_and_checks_its_fields_at_once():
    c = cluster("dgx-h100:2048")
    assert "graph" not in vars(c)  # not built yet
    assert c.class_costs() == ((1e-6, 1 / (0.824 * 450e9)), (2e-6, 1 / 50e9))  # as NCCL drives
    assert "graph" not in vars(c)  # two servers were enough
    assert c.network.nhosts == 16384 and c.graph.graph["name"] == "dgx-h100:2048"
    with pytest.raises(ParameterError, match="nodes_per_unit"):
        build_cluster(_edit(nodes=4096, topology={**RAILS, "nodes_per_unit": 0}), "bad")
    with pytest.raises(
        ParameterError, match=r"\[topology\] kind = 'rail_optimized': .*hosts is more"
    ):
        build_cluster(_edit(nodes=10**7, topology=RAILS), "huge")


def test_a_cluster_pickles_and_a_renamed_copy_leaves_its_graph_alone():
    import dataclasses
    import pickle

    for spec in ("dgx-h100:4", "tpu-v4:4x4x4"):
        c = cluster(spec)
        back = pickle.loads(pickle.dumps(c))
        assert back.network.nhosts == c.ngpus and back.graph.graph["name"] == spec
        dataclasses.replace(c, name="other").graph  # noqa: B018  (builds or shares the graph)
        assert c.graph.graph["name"] == spec
