"""The registry sweep: every algorithm of every collective, verified at the acceptance rank counts.

A new algorithm is covered by adding its registry row; nothing here names an algorithm.
"""

from __future__ import annotations

import inspect

import pytest

import commsim
from commsim.algorithms import REGISTRY

ROWS = sorted(REGISTRY)
IDS = [f"{c}/{n}" for c, n in ROWS]
P_SMALL = [*range(1, 34), 64, 100, 127, 128]


@pytest.mark.parametrize(("collective", "name"), ROWS, ids=IDS)
def test_verifies_for_p_1_to_33_and_more(collective, name):
    for p in P_SMALL:
        s = commsim.build(collective, name, nranks=p)
        declared = s.ntransfers  # what the factory says (or a count of its steps)
        assert commsim.verify(s).ntransfers == declared, f"p={p}: declared transfer count is off"


@pytest.mark.parametrize(("collective", "name"), ROWS, ids=IDS)
@pytest.mark.parametrize("p", [1000, 4096])
def test_verifies_at_large_p(collective, name, p):
    v = commsim.verify(commsim.build(collective, name, nranks=p))
    assert v.nranks == p


@pytest.mark.parametrize(("collective", "name"), [r for r in ROWS if commsim.spec(r[0]).rooted])
@pytest.mark.parametrize("p", [2, 7, 16, 33])
def test_rooted_collectives_work_from_every_root(collective, name, p):
    for root in range(p):
        s = commsim.build(collective, name, nranks=p, root=root)
        assert s.root == root
        commsim.verify(s)


@pytest.mark.parametrize(("collective", "name"), ROWS, ids=IDS)
def test_registry_rows_are_documented(collective, name):
    row = REGISTRY[(collective, name)]
    doc = inspect.getdoc(row.factory) or ""
    assert ".. math::" in doc, "the docstring must state the cost formula"
    assert "Examples:" in doc, "the docstring must have an invariant doctest"
    assert row.cost and row.reference, "the table needs the cost and its source"
