"""``--port-rule`` on the network paths: ``link`` is the topology model's link-port rule, a bad
value, a rule without a network, one where every host has one link, and the twin's commands get
one line and exit 2."""

from __future__ import annotations

import pytest

import commsim
from commsim._cluster_model import cluster_model
from commsim.clusters import cluster

BASE = ("predict", "-c", "allreduce", "-a", "hierarchical", "-s", "64MiB")


def test_port_rule_link_is_the_models_rule(cli_json):
    args = (*BASE, "--cluster", "dgx-h100:2", "--param", "pipeline=4")
    doc = cli_json(*args, "--port-rule", "link")
    default = cli_json(*args)
    s = commsim.build("allreduce", "hierarchical", nranks=16, ranks_per_node=8, pipeline=4)
    want = cluster_model(cluster("dgx-h100:2"), port_rule="link").predict(s, 2**26).time
    assert doc["results"][0]["time_s"] == pytest.approx(want, rel=1e-12)
    assert doc["results"][0]["time_s"] < default["results"][0]["time_s"]
    assert doc["model"]["port_rule"] == "link" and "port_rule" not in default["model"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--cluster", "dgx-h100:2", "--port-rule", "links"), "invalid choice: 'links'"),
        (("-p", "8", "--port-rule", "link"), "--port-rule needs a network"),
        (("--topology", "switch:8", "--port-rule", "link"), "every host has one link"),
        (
            ("--cluster", "dgx-h100:2", "--model", "hockney", "--port-rule", "link"),
            "drop --port-rule",
        ),
    ],
)
def test_bad_port_rules_are_one_line(cli, args, message):
    rc, _, err = cli(*BASE, *args)
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and message in err


def test_the_twin_refuses_the_link_rule(cli):
    rc, _, err = cli(
        "sensitivity", "-c", "allreduce", "-a", "ring", "-s", "1MiB",
        "--topology", "torus:4x4", "--port-rule", "link",
    )  # fmt: skip
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and "port_rule='link'" in err
