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


def test_compare_skips_a_row_the_flow_simulation_gives_up_on(cli_json, monkeypatch):
    """A row the flow simulation refuses (its effort limit) is skipped with its reason; the
    others are compared."""
    from commsim.models import _flow

    monkeypatch.setattr(_flow, "FLOW_EFFORT", 10)
    doc = cli_json("compare", "-c", "allgather", "-a", "ring,direct", "--topology", "ring:8",
                   "--contention", "flow", "-s", "1MiB")  # fmt: skip
    (panel,) = doc["results"]
    assert set(panel["skipped"]) == {"ring", "direct"}
    assert all("gave up after" in why for why in panel["skipped"].values())


def test_tune_skips_what_the_flow_simulation_gives_up_on(cli, monkeypatch):
    """tune: a candidate the flow simulation refuses is skipped; when every algorithm's first
    candidate is refused, one line says why (exit 2)."""
    from commsim.models import _flow

    monkeypatch.setattr(_flow, "FLOW_EFFORT", 10)
    rc, _, err = cli("tune", "-c", "allgather", "-a", "ring,direct", "--topology", "ring:8",
                     "--contention", "flow", "-s", "1MiB")  # fmt: skip
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "could be predicted" in err and "gave up after" in err
