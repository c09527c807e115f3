"""The Cloud TPU presets (docs/clusters.md, tpu-v4 / tpu-v5p / tpu-v5e / tpu-v6e), the torus
generator's per-dimension wrap-around they use, and the torus shape the CLI passes as ``dims``."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from commsim.cli import main
from commsim.clusters import cluster
from commsim.errors import ParameterError
from commsim.topology import Network, torus

GB = 1e9


# -- the presets ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "chips", "per_host", "link", "wrap"),
    [
        ("tpu-v4:4x4x4", 64, 4, 45 * GB, (True, True, True)),
        ("tpu-v4:4x4x8", 128, 4, 45 * GB, (True, True, True)),
        ("tpu-v4:2x2x2", 8, 4, 45 * GB, (False, False, False)),  # below a cube: a mesh
        ("tpu-v5p:2x4x4", 32, 4, 100 * GB, (False, False, False)),
        ("tpu-v5p:8x8x8", 512, 4, 100 * GB, (True, True, True)),
        ("tpu-v5p:4x4x6", 96, 4, 100 * GB, (True, True, False)),  # 6: not the cube's side
        ("tpu-v5e:16x16", 256, 8, 50 * GB, (True, True)),
        ("tpu-v5e:8x16", 128, 8, 50 * GB, (False, True)),
        ("tpu-v5e:2x2", 4, 4, 50 * GB, (False, False)),  # one host holds a small slice
        ("tpu-v6e:16x16", 256, 8, 100 * GB, (True, True)),
        ("tpu-v6e:4x8", 32, 8, 100 * GB, (False, False)),
    ],
)
def test_tpu_slices_have_their_published_shape(spec, chips, per_host, link, wrap):
    c = cluster(spec)
    dims = tuple(int(x) for x in spec.split(":")[1].split("x"))
    assert (c.ngpus, c.ranks_per_node) == (chips, per_host)
    record = c.graph.graph["routing"]
    assert record[:2] == ("torus", dims)
    assert (record[2] if len(record) > 2 else (True,) * len(dims)) == wrap
    assert set(c.network.bandwidth) == {link}
    assert nx.Graph(c.graph).number_of_edges() == nx.Graph(torus(dims, wrap=wrap)).number_of_edges()


def test_a_chip_of_a_full_torus_has_2d_links():
    for spec, links in [("tpu-v4:4x4x4", 6), ("tpu-v5e:16x16", 4), ("tpu-v6e:16x16", 4)]:
        assert {d for _, d in cluster(spec).graph.degree()} == {links}, spec


def test_v4_pod_bandwidth_is_the_published_all_reduce_bandwidth():
    """4,096 chips × 6 links × 45 GB/s = 1.1 PB/s, Google's "all-reduce bandwidth per pod"."""
    assert pytest.approx(1.1e15, rel=0.01) == 4096 * 6 * 45 * GB


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tpu-v4:4x4", "tpu-v4 takes a 3-D shape AxBxC"),
        ("tpu-v5e:4x4x4", "tpu-v5e takes a 2-D shape AxB"),
        ("tpu-v6e:3x4", "multiple of 8 chips"),
        ("tpu-v4:1x1x2", "multiple of 4 chips"),
        ("tpu-v5e:0x8", "every dimension must be >= 1"),
    ],
)
def test_bad_shapes_are_one_parameter_error(spec, message):
    with pytest.raises(ParameterError, match=message):
        cluster(spec)


def test_bad_shape_on_the_cli_is_one_line_and_exit_2(capsys):
    rc = main(["compare", "-c", "allreduce", "--cluster", "tpu-v5e:4x4x4", "-s", "1MiB"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "AxB" in err


# -- per-dimension wrap-around ----------------------------------------------------------------
def test_a_dimension_without_wrap_is_a_line():
    g = torus((4, 3), wrap=(True, False))
    assert g.number_of_edges() == 3 * 4 + 4 * 2  # 3 rings of 4, 4 lines of 3
    net = Network(g)
    assert len(net.route(0, 2)) == 2  # along the line, not round
    assert len(net.route(0, 9)) == 1  # the wrapped dimension goes the short way
    assert torus((4, 4), wrap=False).number_of_edges() == 2 * 4 * 3


def test_wrap_flags_keep_the_full_torus_as_it_was():
    assert torus((4, 4, 2)).graph["routing"] == ("torus", (4, 4, 2))
    assert nx.utils.graphs_equal(torus((4, 4, 2)), torus((4, 4, 2), wrap=(True, True, True)))


def test_bisection_of_a_mesh_dimension_cuts_one_link_per_line():
    assert torus((4, 4)).graph["bisection_bandwidth"] == 2 * 4 * 25e9
    assert torus((4, 4), wrap=False).graph["bisection_bandwidth"] == 4 * 25e9
    assert torus((4, 8), wrap=(False, True)).graph["bisection_bandwidth"] == 8 * 25e9


@pytest.mark.parametrize("wrap", [(True,), "yes", (True, 1)])
def test_bad_wrap_is_one_parameter_error(wrap):
    with pytest.raises(ParameterError, match="wrap must be"):
        torus((4, 4), wrap=wrap)


def test_routes_on_a_mesh_are_shortest():
    g = torus((3, 4, 2), wrap=(False, True, False))
    net = Network(g)
    dist = dict(nx.all_pairs_shortest_path_length(g))
    src, dst = np.meshgrid(np.arange(24), np.arange(24))
    indptr, _ = net.routes(src.ravel(), dst.ravel())
    lengths = np.diff(indptr)
    assert lengths.tolist() == [dist[a][b] for a, b in zip(src.ravel(), dst.ravel(), strict=True)]


# -- the torus's shape as dims -----------------------------------------------------------------
def _json(capsys, *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_dims_default_to_the_clusters_shape(capsys):
    doc = _json(
        capsys, "predict", "-c", "allreduce", "-a", "torus_multiport", "--cluster",
        "tpu-v5p:4x4x8", "-s", "1MiB",
    )  # fmt: skip
    assert doc["params"]["dims"] == "4x4x8"
    assert any("dims=4x4x8 (the torus's shape) for torus_multiport" in n for n in doc["notes"])


def test_dims_default_to_the_topologys_shape_and_a_given_dims_wins(capsys):
    doc = _json(capsys, "compare", "-c", "allgather", "--topology", "torus:2x3x4", "-s", "1MiB")
    assert any("dims=2x3x4" in n and "torus_multiport" in n for n in doc["notes"])
    doc = _json(
        capsys, "predict", "-c", "allgather", "-a", "torus", "--topology", "torus:2x3x4",
        "--param", "dims=6x4", "-s", "1MiB",
    )  # fmt: skip
    assert doc["params"]["dims"] == "6x4" and not any("dims=" in n for n in doc["notes"])


def test_no_dims_when_ranks_are_not_the_torus_in_order(capsys):
    doc = _json(
        capsys, "predict", "-c", "allreduce", "-a", "torus_multiport", "--topology",
        "torus:4x4", "--placement", "random:3", "-s", "1MiB",
    )  # fmt: skip
    assert doc["params"]["dims"] == "auto"
