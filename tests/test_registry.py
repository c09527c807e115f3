"""The registry sweep: every row of every collective, checked on everything the row declares.

A registry row (:func:`commsim.algorithms.register`) owns its algorithm's properties, and this file
checks them all for every row, without naming an algorithm (optax's registry sweep):

* verification at the standard rank counts (``STANDARD_P``, ``LARGE_P``; rooted ones from every
  root at ``ROOTED_P``), with the declared transfer counts equal to those of the steps;
* the Hockney time equal to the row's ``cost_fn`` wherever its ``exact`` says so, and never below
  the Chan et al. lower bound (``COST_P`` × ``MODELS`` × ``SIZES``);
* execution on every single-process backend against the reference (``BACKEND_P``; MPI runs its
  own sweep under mpirun, ``tests/mpi/test_mpi_exec.py``).

Every integer parameter (``segments``) is swept at its default and at ``PARAM_VALUES`` too (so it
must accept them), and every parameter with declared choices (``order``) at each of its values. The
checks are plain functions (``check_*``), so that :func:`test_a_new_row_needs_nothing_but_its_row`
runs on a row registered for one test (``toy_row`` in ``tests/conftest.py``) exactly what the sweep
runs on the registered ones. The closed forms from the papers are checked independently in
``tests/test_hockney.py`` and ``tests/test_algorithms_*.py``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import pytest

import commsim
from commsim import Schedule
from commsim.algorithms import REGISTRY, AlgorithmInfo
from commsim.errors import CommsimError
from commsim.exec import execute, get_backend, layout, random_inputs
from commsim.models import Hockney

# -- the tables ----------------------------------------------------------------------------------
STANDARD_P = [*range(1, 34), 64, 100, 127, 128]
LARGE_P = [1000, 4096]
ROOTED_P = [2, 7, 16, 33]
# non-powers of two, primes, one above and below powers of two
COST_P = [*range(1, 20), 23, 24, 31, 32, 33, 37, 48, 63, 64, 65, 97, 100, 127, 128, 129]
MODELS = [  # (alpha, beta, gamma): one term at a time, then mixed (gamma > 0 for reductions)
    (1.0, 0.0, 0.0),
    (0.0, 1.0, 0.0),
    (0.0, 0.0, 1.0),
    (1e-6, 1e-9, 2e-10),
    (2.7e-6, 3.1e-10, 7.7e-11),
]
SIZES = np.array([0.0, 1.0, 8.0, 4096.0, 1e6 + 3, 3.3e8])
BACKEND_P = {
    "numpy": [1, 2, 3, 5, 6, 8, 13, 16],
    "jax": [1, 2, 3, 8],  # each p compiles every row anew (~1 s); numpy and cuda cover 5, 6
    "cuda": [1, 2, 3, 5, 6, 8],
}
PARAM_VALUES = (1, 3)  # every integer parameter, besides its default
DTYPES = ("int32", "float32")  # alternating over p: inputs are small integers, exact in both


# -- the rows and their cases ----------------------------------------------------------------------
def row_cases(row: AlgorithmInfo) -> list[dict[str, Any]]:
    """The row's defaults, then each integer parameter at each of ``PARAM_VALUES`` and each
    parameter with declared choices at each of its other values."""
    cases: list[dict[str, Any]] = [{}]
    for name, default in row.params.items():
        if name in row.choices:
            cases += [{name: v} for v in row.choices[name] if v != default]
        elif isinstance(default, int) and not isinstance(default, bool):
            cases += [{name: v} for v in PARAM_VALUES if v != default]
    return cases


def sweep(rows: list[AlgorithmInfo]) -> list[tuple[AlgorithmInfo, dict[str, Any]]]:
    """Every ``(row, params)`` the sweep checks."""
    return [(row, params) for row in rows for params in row_cases(row)]


def _id(row: AlgorithmInfo, params: dict[str, Any] | None = None) -> str:
    return f"{row.collective}/{row.algorithm}" + "".join(
        f",{k}={v}" for k, v in (params or {}).items()
    )


ROWS = [REGISTRY[key] for key in sorted(REGISTRY)]
IDS = [_id(row) for row in ROWS]
CASES = sweep(ROWS)
CASE_IDS = [_id(row, params) for row, params in CASES]


def _build(row: AlgorithmInfo, p: int, **params: Any) -> Schedule:
    return commsim.build(row.collective, row.algorithm, nranks=p, **params)


# -- the checks ------------------------------------------------------------------------------------
def check_documented(row: AlgorithmInfo) -> None:
    """The docstring states the cost and an invariant doctest; the row has its text and code."""
    assert ".. math::" in row.doc, "the docstring must state the cost formula"
    assert "Examples:" in row.doc, "the docstring must have an invariant doctest"
    assert row.cost and row.reference, "the table needs the cost and its source"
    assert row.cost == commsim.algorithms.cost_text(row.doc), "the table's text is the docstring's"
    assert callable(row.cost_fn) and callable(row.exact), "the row needs cost_fn and exact"


def check_hints(schedule: Schedule) -> None:
    """The counts the factory declares are those of its steps."""
    sizes = [st.ntransfers for st in schedule.steps()]
    where = f"{schedule.algorithm} p={schedule.nranks}"
    if schedule.ntransfers_hint is not None:
        assert schedule.ntransfers_hint == sum(sizes), f"{where}: ntransfers_hint is off"
    if schedule.max_step_transfers_hint is not None:
        assert schedule.max_step_transfers_hint == max(sizes, default=0), (
            f"{where}: max_step_transfers_hint is off"
        )


def check_verifies(row: AlgorithmInfo, p: int, params: dict[str, Any]) -> None:
    """The schedule computes the collective, and its declared counts are right."""
    s = _build(row, p, **params)
    assert (s.collective, s.nranks) == (row.collective, p)
    commsim.verify(s)
    check_hints(s)


def check_cost(row: AlgorithmInfo, p: int, params: dict[str, Any]) -> None:
    """Hockney's time is the row's ``cost_fn`` where ``exact``, and never below the lower bound."""
    s = _build(row, p, **params)
    exact = row.is_exact(p, **params)
    for alpha, beta, gamma in MODELS:
        model = Hockney(alpha, beta, gamma)
        got = model.predict(s, SIZES).time
        where = f"{_id(row, params)} p={p} (α, β, γ) = {(alpha, beta, gamma)}"
        extra = {"helpers": s.helpers} if s.helpers else {}  # ranks that hold no data
        bound = model.lower_bound(row.collective, p, SIZES, **extra)
        assert (got >= bound * (1 - 1e-9)).all(), f"{where}: below the lower bound"
        if exact:
            want = row.time(p, SIZES, alpha, beta, gamma, **params)
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=0, err_msg=where)


@functools.cache
def backend_unavailable(backend: str) -> str | None:
    """Why ``backend`` cannot run ``BACKEND_P`` here, or ``None``."""
    try:
        get_backend(backend)
    except CommsimError as e:
        return str(e)
    if backend == "jax":
        import jax

        if len(jax.devices()) < max(BACKEND_P["jax"]):
            return f"needs {max(BACKEND_P['jax'])} JAX devices, {len(jax.devices())} visible"
    return None


def check_executes(row: AlgorithmInfo, backend: str, p: int) -> None:
    """``backend`` gives the reference interpreter's and the collective's results (rooted
    collectives from root ``p - 1``)."""
    root = {"root": p - 1} if commsim.spec(row.collective).rooted else {}
    s = _build(row, p, **root)
    lay = layout(s, 2 * s.nbytes_units)
    dtype = DTYPES[p % len(DTYPES)]
    out = execute(s, random_inputs(lay, dtype, seed=p), backend=backend)  # checks the results
    assert out.dtype == np.dtype(dtype)


def check_row(row: AlgorithmInfo) -> None:
    """Everything the sweep checks, on one row (the tests below split it by row, case and p)."""
    check_documented(row)
    for params in row_cases(row):
        for p in STANDARD_P:
            check_verifies(row, p, params)
        for p in COST_P:
            check_cost(row, p, params)
    missing = []
    for backend, ps in BACKEND_P.items():
        if backend_unavailable(backend):
            missing.append(f"{backend}: {backend_unavailable(backend)}")
            continue
        for p in ps:
            check_executes(row, backend, p)
    if missing:  # the rest ran; say what could not
        pytest.skip("; ".join(missing))


# -- the sweep -------------------------------------------------------------------------------------
@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_registry_rows_are_documented(row):
    check_documented(row)


@pytest.mark.parametrize(("row", "params"), CASES, ids=CASE_IDS)
def test_verifies_at_standard_p(row, params):
    for p in STANDARD_P:
        check_verifies(row, p, params)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
@pytest.mark.parametrize("p", LARGE_P)
def test_verifies_at_large_p(row, p):
    assert commsim.verify(_build(row, p)).nranks == p


@pytest.mark.parametrize("row", [r for r in ROWS if commsim.spec(r.collective).rooted], ids=_id)
@pytest.mark.parametrize("p", ROOTED_P)
def test_rooted_collectives_work_from_every_root(row, p):
    for root in range(p):
        s = _build(row, p, root=root)
        assert s.root == root
        commsim.verify(s)


@pytest.mark.parametrize(("row", "params"), CASES, ids=CASE_IDS)
def test_cost_is_the_rows_formula_and_above_the_bound(row, params):
    assert any(row.is_exact(p, **params) for p in COST_P), "exact nowhere in COST_P"
    for p in COST_P:
        check_cost(row, p, params)


@pytest.mark.parametrize(
    ("row", "backend", "p"),
    [(row, b, p) for b, ps in BACKEND_P.items() for p in ps for row in ROWS],
    ids=[f"{b}-p{p}-{_id(row)}" for b, ps in BACKEND_P.items() for p in ps for row in ROWS],
)
def test_executes_on_every_backend(row, backend, p):
    if backend_unavailable(backend):
        pytest.skip(backend_unavailable(backend))
    check_executes(row, backend, p)


# -- a new row needs nothing but its row ------------------------------------------------------------
def test_a_new_row_needs_nothing_but_its_row(toy_row):
    """A row registered by a fixture alone is swept: verified, cost-checked, executed."""
    key = (toy_row.collective, toy_row.algorithm)
    assert key in REGISTRY and key not in {(r.collective, r.algorithm) for r in ROWS}
    assert toy_row in [row for row, _ in sweep(list(REGISTRY.values()))]
    check_row(toy_row)


def test_the_checks_catch_a_wrong_row(toy_row):
    """The sweep's checks have teeth: a formula off by one latency, or a wrong hint, fails."""
    off = dataclasses.replace(
        toy_row, cost_fn=lambda p, n, a, b, g: toy_row.time(p, n, a, b, g) + a
    )
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        check_cost(off, 5, {})
    bad_hint = dataclasses.replace(_build(toy_row, 5), ntransfers_hint=7)
    with pytest.raises(AssertionError, match="ntransfers_hint is off"):
        check_hints(bad_hint)
