"""One owner per concept: the command line and the library reach a cluster's model, its ranks per
server and a profile file through the same calls, so they cannot disagree."""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import pytest

import commsim
from commsim.cli.network import parse_network
from commsim.clusters import cluster
from commsim.profiles import is_profile_file
from commsim.tuner import as_model, cluster_model

PLACEMENTS = ["linear", "round_robin", "random:3", "0,1,8,9", "0,8,1,9"]


def _network(placement: str):
    args = argparse.Namespace(
        topology=None, cluster="dgx-h100:2", placement=placement, contention=None
    )
    return parse_network(args)


def _placed(placement: str):
    c = cluster("dgx-h100:2")
    if "," in placement:
        return dataclasses.replace(c, placement=tuple(int(h) for h in placement.split(",")))
    return dataclasses.replace(c, placement=placement)


@pytest.mark.parametrize(
    ("placement", "nranks"),
    [(p, n) for p in PLACEMENTS for n in (2, 4) if "," not in p or len(p.split(",")) == n],
)
def test_cli_and_tuner_give_the_same_ranks_per_server(placement, nranks):
    cli = _network(placement).servers_of(nranks)
    assert as_model(_placed(placement)).ranks_per_node(nranks) == cli
    if placement == "linear":
        assert cli == 8  # the declared server size, even when p fills part of one


def test_a_placement_that_splits_servers_two_by_two():
    assert _placed("0,1,8,9").ranks_per_server(4) == 2
    assert _placed("0,8,1,9").ranks_per_server(4) is None
    assert _placed("round_robin").ranks_per_server(2) == 1


def test_tune_on_a_placed_cluster_agrees_with_the_command_line(cli_json):
    doc = cli_json("tune", "-c", "allreduce", "--cluster", "dgx-h100:2", "--placement",
                   "0,1,8,9", "-p", "4", "-a", "hierarchical", "-s", "1MiB,64MiB")  # fmt: skip
    table = commsim.tune(
        "allreduce", _placed("0,1,8,9"), 4, "1MiB,64MiB", algorithms=["hierarchical"]
    )
    assert [r["params"]["ranks_per_node"] for r in doc["ranges"]] == [2] * len(doc["ranges"])
    assert [r.params for r in table.ranges] == [r["params"] for r in doc["ranges"]]
    np.testing.assert_allclose(
        [r.time_s for r in table.ranges],
        [(r["time_at_min_s"], r["time_at_max_s"]) for r in doc["ranges"]],
        rtol=1e-12,
    )


def test_the_cli_topology_model_is_cluster_model(cli_json):
    doc = cli_json("predict", "-c", "allreduce", "-a", "ring", "--cluster", "dgx-h100:2",
                   "--placement", "round_robin", "-s", "1MiB")  # fmt: skip
    model = cluster_model(cluster("dgx-h100:2"), placement="round_robin")
    assert doc["model"] == model.to_dict()
    want = model.predict(commsim.build("allreduce", "ring", 16), 1 << 20).time
    assert doc["results"][0]["time_s"] == pytest.approx(float(want), rel=1e-12)


def test_is_profile_file_tells_a_profile_from_a_cluster(tmp_path):
    mine, theirs = tmp_path / "p.toml", tmp_path / "c.toml"
    mine.write_text('format = "commsim-profile"\n')
    theirs.write_text("[cluster]\nnodes = 2\n")
    (tmp_path / "bad.toml").write_text("format = \n")
    assert is_profile_file(mine) and not is_profile_file(theirs)
    assert not is_profile_file(tmp_path / "bad.toml") and not is_profile_file(tmp_path)
