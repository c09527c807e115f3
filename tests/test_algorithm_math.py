"""The mathematics once per algorithm: the docstring's ``.. math::`` is the table's text.

Each factory states its cost in one ``.. math::`` block; ``commsim algorithms`` shows
:func:`commsim.algorithms.cost_text` of it (so the two cannot drift), ``cost_fn`` is the same time
as code (checked against the model by ``tests/test_registry.py``) and says so without a third copy
of the formula, and the factories link their siblings under See Also, both ways.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from pathlib import Path

import pytest

import commsim
from commsim.algorithms import REGISTRY, cost_text, info, math_text, register, unregister
from commsim.algorithms._math import math_blocks
from commsim.cli import algorithms as cli_algorithms

ROWS = [REGISTRY[key] for key in sorted(REGISTRY)]
IDS = ["/".join(key) for key in sorted(REGISTRY)]
FACTORIES = {row.factory for row in ROWS}
README = (Path(__file__).parent.parent / "README.md").read_text()


# -- the converter -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("latex", "text"),
    [
        (r"(p-1)\,\alpha + \frac{p-1}{p}\,n\beta", "(p-1)α + (p-1)/p·nβ"),
        (r"2\frac{p-1}{p}n\beta + \frac{p-1}{p}n\gamma", "2(p-1)/p·nβ + (p-1)/p·nγ"),
        (r"\lceil \lg p \rceil\,(\alpha + n\beta)", "⌈lg p⌉(α + nβ)"),
        (r"\lfloor p/2 \rfloor \cdot \alpha", "⌊p/2⌋ · α"),
        (r"\lg p\,\alpha + \frac{n}{2}\lg p\,\beta", "lg p·α + n/2·lg p·β"),
        (r"(p-1)\left(\alpha + \frac{n}{p}\beta\right)", "(p-1)(α + n/p·β)"),
        (r"\frac{n}{2k}\gamma + \frac{n}{D_i}\beta", "n/(2k)·γ + n/D_i·β"),
        (r"\Bigl(1 + \frac{p'-1}{p'}\Bigr)n\gamma", "(1 + (p'-1)/p')nγ"),
        (r"\frac{n}{2^{k}}\beta + 2^{H-1}", "n/(2^k)·β + 2^(H-1)"),
        (r"\sum_i(d_i-1)\,\alpha", "Σ_i(d_i-1)α"),
        (r"T_\text{inter}(N, n/g)", "T_inter(N, n/g)"),
        (r"c_k\,\frac{n}{p}\beta", "c_k·n/p·β"),
        (r"\#\{0 \le i < p\}", "#{0 ≤ i < p}"),
        (r"K = 2\,\text{segments}", "K = 2·segments"),
    ],
)
def test_math_text_converts_the_docstrings_latex(latex, text):
    assert math_text(latex) == text


def test_cost_text_reads_displays_conditions_and_definitions():
    doc = (
        "A factory.\n\n.. math::\n    T = L\\alpha \\quad (p = 2^L), \\qquad\n"
        "    T = (L+2)\\alpha \\quad (\\text{otherwise}), \\qquad L = \\lg p'\n\nExamples:\n"
    )
    assert math_blocks(doc) == [
        r"T = L\alpha \quad (p = 2^L), \qquad T = (L+2)\alpha \quad (\text{otherwise}), "
        r"\qquad L = \lg p'"
    ]
    assert cost_text(doc) == "p = 2^L: Lα; otherwise: (L+2)α; L = lg p'"
    assert cost_text(".. math:: S \\le T \\le 2S,") == "S ≤ T ≤ 2S"
    assert cost_text("no formula at all") == ""


# -- every row: the table's text is its docstring's formula -----------------------------------------
@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_every_rows_table_text_is_derived_from_its_docstring(row):
    assert math_blocks(row.doc), "the docstring must state the cost in a .. math:: block"
    assert row.legacy_cost == "", "no registered row overrides the derived text"
    assert row.cost == cost_text(row.doc) != ""
    assert "\\" not in row.cost and "{" not in row.cost.replace("#{", ""), row.cost


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_detail_view_shows_the_one_formula(row):
    request = cli_algorithms.AlgorithmsRequest(row.collective, row.algorithm)
    out = cli_algorithms.render(cli_algorithms.compute(request), as_json=False)
    assert f"cost:        {row.cost}\n" in out
    (block,) = math_blocks(row.doc)[:1]
    if r"\qquad" not in block and r"\le" not in block:  # one display: the same text below
        assert f"T = {row.cost}" in " ".join(out.split()), out


def _edited(row, old: str, new: str):
    """A copy of ``row``'s factory whose docstring says ``new`` where it said ``old``."""

    @functools.wraps(row.factory)
    def factory(nranks: int):
        return row.factory(nranks)

    assert old in row.factory.__doc__
    factory.__doc__ = row.factory.__doc__.replace(old, new)
    return factory


def test_editing_the_docstring_edits_the_table():
    """The table cannot keep an old formula: it reads the docstring each time."""
    ring = info("allgather", "ring")
    factory = _edited(ring, r"(p-1)\,\alpha", r"(p-2)\,\alpha")
    register("allgather", "ring_edited", cost_fn=ring.cost_fn)(factory)
    try:
        row = info("allgather", "ring_edited")
        assert row.cost == "(p-2)α + (p-1)/p·nβ" != ring.cost
        result = cli_algorithms.compute(cli_algorithms.AlgorithmsRequest("allgather"))
        table = cli_algorithms.render(result, as_json=False)
        line = next(x for x in table.splitlines() if "ring_edited" in x)
        assert "(p-2)α" in line
    finally:
        unregister("allgather", "ring_edited")


def test_the_cost_argument_is_deprecated_and_never_beats_the_docstring():
    ring = info("allgather", "ring")
    with pytest.warns(DeprecationWarning, match=r"register\(cost=...\) is deprecated"):
        register("allgather", "ring_old_style", cost="stale", cost_fn=ring.cost_fn)(ring.factory)
    try:
        assert info("allgather", "ring_old_style").cost == ring.cost  # the docstring wins
    finally:
        unregister("allgather", "ring_old_style")

    def bare(nranks: int) -> commsim.Schedule:  # a plug-in without a .. math:: block
        return ring.factory(nranks)

    with pytest.warns(DeprecationWarning):
        register("allgather", "bare", cost="(p-1)α", cost_fn=ring.cost_fn)(bare)
    try:
        assert info("allgather", "bare").cost == "(p-1)α"
    finally:
        unregister("allgather", "bare")


def test_the_readme_table_quotes_the_derived_text():
    cells = re.findall(r"^\| (\w+) \| `(\w+)` \| [^|]* \| ([^|]*) \|", README, flags=re.MULTILINE)
    assert cells, "the README's algorithm table"
    for collective, algorithm, cost in cells:
        assert cost.strip() == info(collective, algorithm).cost, f"{collective}/{algorithm}"


# -- cost_fn: no third copy ------------------------------------------------------------------------
def _function(fn):
    return fn.func if isinstance(fn, functools.partial) else fn


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_cost_fn_docstrings_point_at_the_formula_instead_of_copying_it(row):
    doc = inspect.getdoc(_function(row.cost_fn)) or ""
    assert "``.. math::``" in doc, doc
    assert not re.search("[αβγ]", doc), f"a copy of the formula: {doc}"
    assert "exact" in doc, "where the code is exact"
    names = set(re.findall(r":func:`~?([\w.]+)`", doc))
    assert any(n.rsplit(".", 1)[-1] == row.factory.__name__ for n in names) or (
        _function(row.cost_fn).__module__ != row.factory.__module__  # a shared time (ring's)
    ), doc


# -- References and See Also -----------------------------------------------------------------------
def _section(doc: str, title: str) -> str:
    m = re.search(rf"^{title}:\n((?:[ \t]+\S.*\n?)+)", doc, flags=re.MULTILINE)
    return m.group(1) if m else ""


def _resolve(target: str, home: str):
    if "." not in target:
        return getattr(importlib.import_module(home), target, None)
    module, _, name = target.rpartition(".")
    return getattr(importlib.import_module(module), name, None)


def _see_also(fn) -> list:
    text = _section(inspect.getdoc(fn) or "", "See Also")
    targets = re.findall(r":func:`~?([\w.]+)`", text)
    return [(t, _resolve(t, fn.__module__)) for t in targets]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_every_factory_has_references_and_see_also_that_resolve(row):
    doc = row.doc
    assert _section(doc, "References").strip(), "References:"
    links = _see_also(row.factory)
    assert links, "See Also:"
    for target, fn in links:
        assert callable(fn), f"See Also {target} does not resolve"
        assert fn is not row.factory, "a factory is not its own sibling"


def test_see_also_links_both_ways():
    for fn in FACTORIES:
        for _, other in _see_also(fn):
            if other in FACTORIES:
                back = [g for _, g in _see_also(other)]
                assert fn in back, f"{other.__name__} does not link back to {fn.__name__}"


@pytest.mark.parametrize(
    "family",
    [
        ("ring_allgather", "direct_allgather", "bruck_allgather"),
        ("pairwise_alltoall", "direct_alltoall", "bruck_alltoall"),
        ("ring_reduce_scatter", "direct_reduce_scatter", "pairwise_reduce_scatter"),
        ("binomial_broadcast", "scatter_allgather_broadcast", "double_binary_tree_allreduce"),
        ("hierarchical_allreduce", "nccl_tree_allreduce"),
        (
            "recursive_doubling_allgather",
            "recursive_halving_reduce_scatter",
            "rabenseifner_allreduce",
            "swing_bandwidth_allreduce",
        ),
        ("recursive_doubling_allreduce", "swing_latency_allreduce"),
    ],
)
def test_the_sibling_families_are_linked(family):
    by_name = {f.__name__: f for f in FACTORIES}
    for a in family:
        linked = {g.__name__ for _, g in _see_also(by_name[a])}
        assert set(family) - {a} <= linked, f"{a} misses {set(family) - {a} - linked}"


def test_a_broken_link_is_caught():
    """The checks above fail on a target that does not exist, and on a one-way link."""

    def lonely(nranks: int):
        """A factory whose siblings do not know it.

        See Also:
            :func:`commsim.algorithms.ring.no_such_ring`,
            :func:`commsim.algorithms.ring.ring_allgather`
        """

    (missing, _), (_, fn) = _see_also(lonely)
    assert _resolve(missing, __name__) is None and fn is commsim.algorithms.ring.ring_allgather
    assert lonely not in [g for _, g in _see_also(fn)]
