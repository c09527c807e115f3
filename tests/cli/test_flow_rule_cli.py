"""``--flow-rule``: ``cm02`` reaches the flow simulation and its model's JSON; a bad value, a
rule outside ``--contention flow`` or without a network: one line, exit 2."""

from __future__ import annotations

import pytest

import commsim
from commsim.models import Topology
from commsim.topology import torus

BASE = ("predict", "-c", "allreduce", "-a", "ring", "-s", "1MiB")


def test_flow_rule_cm02_is_the_models_rule(cli_json):
    doc = cli_json(*BASE, "--topology", "torus:2x2", "--contention", "flow", "--flow-rule", "cm02")
    s = commsim.build("allreduce", "ring", nranks=4)
    want = Topology(torus((2, 2)), contention="flow", flow_rule="cm02").predict(s, 2**20).time
    assert doc["results"][0]["time_s"] == pytest.approx(want, rel=1e-12)
    assert doc["model"]["flow_rule"] == "cm02"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--topology", "torus:2x2", "--contention", "flow", "--flow-rule", "tcp"),
         "invalid choice: 'tcp'"),
        (("--topology", "torus:2x2", "--flow-rule", "cm02"), "add --contention flow"),
        (("-p", "4", "--contention", "flow", "--flow-rule", "cm02"), "needs a network"),
    ],
)  # fmt: skip
def test_bad_flow_rules_are_one_line(cli, args, message):
    rc, _, err = cli(*BASE, *args)
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
