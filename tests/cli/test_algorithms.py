"""``commsim algorithms``."""

from __future__ import annotations

import argparse

import pytest

import commsim
from commsim.cli import algorithms


def test_algorithms_lists_ring_for_allreduce(cli):
    rc, out, _ = cli("algorithms", "-c", "allreduce")
    assert rc == 0
    rows = [line.split() for line in out.splitlines()]
    ring = next(r for r in rows if r[:2] == ["allreduce", "ring"])
    assert "2(p-1)α" in " ".join(ring)  # the cost formula from the registry row
    assert all(
        r[0] in ("allreduce", "collective") for r in rows if r and r[0] in commsim.COLLECTIVES
    )


def test_algorithms_json_has_every_registry_row(cli_json):
    doc = cli_json("algorithms")
    assert {(d["collective"], d["algorithm"]) for d in doc} == set(commsim.algorithms.REGISTRY)
    ring = next(d for d in doc if (d["collective"], d["algorithm"]) == ("allreduce", "ring"))
    assert set(ring) >= {"params", "constraints", "cost", "reference"}
    assert "name" not in ring  # the vocabulary: an algorithm's registry name is "algorithm"
    assert ring["params"] == {}


def test_algorithms_detail_prints_the_docstring(cli):
    rc, out, _ = cli("algorithms", "-c", "allreduce", "-a", "ring")
    assert rc == 0 and out.startswith("allreduce/ring") and "Examples:" in out


def test_parse_gives_a_frozen_request():
    args = argparse.Namespace(collective="allreduce", algorithm="ring", json=True)
    request = algorithms.parse(args)
    assert request == algorithms.AlgorithmsRequest("allreduce", "ring", as_json=True)


def test_compute_and_render_without_argparse():
    result = algorithms.compute(algorithms.AlgorithmsRequest(collective="allgather"))
    assert {r.algorithm for r in result.rows} == set(commsim.available("allgather"))
    assert not result.detail and "allgather" in algorithms.render(result, as_json=False)


@pytest.mark.parametrize("row", sorted(commsim.algorithms.REGISTRY), ids="/".join)
def test_one_algorithms_documentation_is_plain_text(cli, row):
    rc, out, _ = cli("algorithms", "-c", row[0], "-a", row[1])
    assert rc == 0
    for markup in (":math:", ":func:", ".. math::", "``", "\\frac", "\\alpha", "\\Bigl", "\\lceil"):
        assert markup not in out, markup


def test_math_renders_nested_groups_and_ends_with_its_block():
    from commsim.cli.rst import to_text

    assert to_text(r":math:`\frac{n}{2^{k}}\beta`") == "n/(2^k)·β"
    text = to_text("Args:\n    .. math::\n        a=\\frac{1}{2}\n\n    more text with {braces}")
    assert text.splitlines()[1].strip() == "a=1/2" and text.endswith("more text with {braces}")
    assert to_text(r":math:`\text{bit } k \text{ of } i`") == "bit k of i"
