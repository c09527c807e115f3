"""Recursive halving/doubling, Rabenseifner and Bruck: verified, counted, and costed in closed form.

The closed forms below are written from the papers (Thakur, Rabenseifner & Gropp 2005; Bruck et
al. 1997) and from the fold's own arithmetic, in plain Python: they never call the algorithms, so a
schedule, a formula and the model can only agree by being right together.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import commsim
from commsim.algorithms import bruck, recursive
from commsim.models import Hockney, lower_bound

ALGORITHMS = [
    ("reduce_scatter", "recursive_halving"),
    ("allgather", "recursive_doubling"),
    ("allreduce", "recursive_doubling"),
    ("allreduce", "rabenseifner"),
    ("reduce", "rabenseifner"),
    ("allgather", "bruck"),
    ("alltoall", "bruck"),
]
IDS = [f"{c}/{a}" for c, a in ALGORITHMS]
SWEEP = [*range(1, 34), 64, 100, 127, 128, 1000]


# -- closed forms ----------------------------------------------------------------------------------
def _fold_terms(p: int) -> tuple[int, int, int]:
    """``p' = 2^L <= p``, ``r = p - p'`` and ``L``, by plain loops."""
    pv = 1
    while 2 * pv <= p:
        pv *= 2
    return pv, p - pv, round(math.log2(pv))


def _ceil_lg(p: int) -> int:
    k = 0
    while 2**k < p:
        k += 1
    return k


def t_recursive_halving_rs(p, n, a, b, g):
    pv, r, L = _fold_terms(p)
    if r == 0:  # Thakur et al. 2005: lg p α + (p-1)/p n β + (p-1)/p n γ
        return L * a + (p - 1) / p * n * (b + g)
    # fold (whole vector, reduced) + halving where virtual rank 0 receives h + min(r, h) blocks
    # per step + the odd rank sends the even one its block
    fold = a + n * (b + g)
    halving = sum(a + (h + min(r, h)) * n / p * (b + g) for h in (pv >> (k + 1) for k in range(L)))
    return fold + halving + a + n / p * b


def t_recursive_doubling_ag(p, n, a, b, g):
    _, r, L = _fold_terms(p)
    if r == 0:
        return L * a + (p - 1) / p * n * b
    fold = a + n / p * b
    doubling = sum(a + (2**k + min(r, 2**k)) * n / p * b for k in range(L))
    return fold + doubling + a + (p - 1) / p * n * b


def t_recursive_doubling_ar(p, n, a, b, g):
    _, r, L = _fold_terms(p)
    core = L * (a + n * b + n * g)
    return core if r == 0 else (a + n * b + n * g) + core + (a + n * b)


def t_rabenseifner_ar(p, n, a, b, g):
    pv, r, L = _fold_terms(p)
    f = (pv - 1) / pv
    core = 2 * L * a + 2 * f * n * b + f * n * g  # Thakur et al. 2005 on p' ranks
    return core if r == 0 else (a + n * b + n * g) + core + (a + n * b)


def t_rabenseifner_reduce(p, n, a, b, g):
    pv, r, L = _fold_terms(p)
    f = (pv - 1) / pv
    core = 2 * L * a + 2 * f * n * b + f * n * g
    return core if r == 0 else (a + n * b + n * g) + core


def t_bruck_ag(p, n, a, b, g):
    return _ceil_lg(p) * a + (p - 1) / p * n * b


def t_bruck_a2a(p, n, a, b, g):
    total = 0.0
    for k in range(_ceil_lg(p)):
        c = sum(1 for i in range(p) if (i >> k) & 1)
        total += a + c * n / p * b
    return total


FORMULAS = {
    ("reduce_scatter", "recursive_halving"): t_recursive_halving_rs,
    ("allgather", "recursive_doubling"): t_recursive_doubling_ag,
    ("allreduce", "recursive_doubling"): t_recursive_doubling_ar,
    ("allreduce", "rabenseifner"): t_rabenseifner_ar,
    ("reduce", "rabenseifner"): t_rabenseifner_reduce,
    ("allgather", "bruck"): t_bruck_ag,
    ("alltoall", "bruck"): t_bruck_a2a,
}


def test_closed_forms_by_hand():
    # the formulas themselves, on numbers worked out on paper (α = 1, β = 1e-3, γ = 1e-4)
    a, b, g = 1.0, 1e-3, 1e-4
    assert t_recursive_halving_rs(8, 800, a, b, g) == pytest.approx(3 + 700 * 1.1e-3)
    # p = 3: fold 1 + 300·1.1e-3, halving 1 + 200·1.1e-3, unfold 1 + 100e-3
    assert t_recursive_halving_rs(3, 300, a, b, g) == pytest.approx(3 + 0.33 + 0.22 + 0.1)
    assert t_recursive_doubling_ag(3, 300, a, b, g) == pytest.approx(3 + 0.5)  # 100+200+200 B
    assert t_rabenseifner_ar(4, 400, a, b, g) == pytest.approx(4 + 0.6 + 0.03)
    assert t_bruck_a2a(8, 800, a, b, g) == pytest.approx(3 + 3 * 400e-3)  # lg p α + n/2 lg p β
    assert t_bruck_a2a(3, 300, a, b, g) == pytest.approx(2 + 100e-3 + 100e-3)  # c = [1, 1]
    for f in FORMULAS.values():
        assert f(1, 1000, a, b, g) == 0


# -- verification (the registry-wide sweep is tests/test_registry.py) -------------------------
@pytest.mark.parametrize("p", [2, 3, 5, 6, 8, 13, 16, 31, 100])
def test_reduce_roots(p):
    for root in sorted({0, 1, p // 2, p - 1}):
        s = commsim.build("reduce", "rabenseifner", p, root=root)
        assert s.root == root
        commsim.verify(s)


# -- invariants ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("collective", "algorithm", "p", "nsteps", "ntransfers"),
    [
        ("reduce_scatter", "recursive_halving", 1, 0, 0),
        ("reduce_scatter", "recursive_halving", 16, 4, 64),
        ("reduce_scatter", "recursive_halving", 12, 5, 8 * 3 + 4 + 4),  # fold, 3 steps, unfold
        ("allgather", "recursive_doubling", 16, 4, 64),
        ("allgather", "recursive_doubling", 3, 3, 1 + 2 + 1),
        ("allgather", "recursive_doubling", 12, 5, 4 + 24 + 7),  # unfold: 1 + 2·3 transfers
        ("allreduce", "recursive_doubling", 2, 1, 2),
        ("allreduce", "recursive_doubling", 7, 4, 3 + 8 + 3),
        ("allreduce", "rabenseifner", 16, 8, 128),
        ("allreduce", "rabenseifner", 7, 6, 3 + 16 + 3),
        ("reduce", "rabenseifner", 16, 8, 64 + 15),
        ("reduce", "rabenseifner", 7, 5, 3 + 8 + 3),
        ("allgather", "bruck", 1, 0, 0),
        ("allgather", "bruck", 8, 3, 24 + 0 + 1 + 3),  # + (min(2^k, p-2^k) - 1) wrapped ranges
        ("allgather", "bruck", 7, 3, 21 + 0 + 1 + 2),
        ("alltoall", "bruck", 1, 1, 1),  # one local copy
        # p = 8: runs of positions with bit k set (4, 2, 1 per rank), one more transfer per slot
        # range that wraps (0, 4, 6 in all), then p^2 local copies
        ("alltoall", "bruck", 8, 4, 32 + (16 + 4) + (8 + 6) + 64),
    ],
)
def test_counts(collective, algorithm, p, nsteps, ntransfers):
    s = commsim.build(collective, algorithm, p)
    assert (s.nsteps, s.ntransfers) == (nsteps, ntransfers)


@pytest.mark.parametrize("p", [2, 5, 8, 13, 32])
def test_bruck_one_message_per_rank_per_step(p):
    for name in ("allgather", "alltoall"):
        s = commsim.build(name, "bruck", p)
        for i, st in enumerate(s.steps()):
            remote = st.src != st.dst
            pairs = np.unique(st.src[remote] * p + st.dst[remote])
            if i < _ceil_lg(p):
                assert len(pairs) == p  # every rank sends exactly one message
                shift = np.unique((pairs % p - pairs // p) % p)
                assert len(shift) == 1  # one shift: a perfect matching
            else:
                assert len(pairs) == 0  # alltoall's final local copies
        if name == "alltoall":
            last = s.step(s.nsteps - 1)
            assert last.ntransfers == p * p and (last.src == last.dst).all()


@pytest.mark.parametrize("p", [1, 2, 4, 8, 64])
def test_rabenseifner_is_halving_then_doubling(p):
    # for powers of two the allreduce is literally the concatenation of the two registered schedules
    ar = commsim.build("allreduce", "rabenseifner", p)
    parts = [
        *commsim.build("reduce_scatter", "recursive_halving", p).steps(),
        *commsim.build("allgather", "recursive_doubling", p).steps(),
    ]
    assert ar.nsteps == len(parts)
    for got, want in zip(ar.steps(), parts, strict=True):
        for x, y in zip(got, want, strict=True):
            np.testing.assert_array_equal(x, y)


def test_fold_helper_maps_virtual_ranks():
    f = recursive._folding(11)  # p' = 8, r = 3
    assert f.pv == 8
    assert f.extra.tolist() == [0, 2, 4] and f.keep.tolist() == [1, 3, 5]
    assert f.rank_map.tolist() == [1, 3, 5, 6, 7, 8, 9, 10]
    g = recursive._folding(11, into_odd=False)
    assert g.rank_map[0] == 0  # reduce keeps root 0 in the core
    assert recursive._bounds(8, 3).tolist() == [0, 2, 4, 6, 7, 8, 9, 10, 11]
    assert bruck._nsteps(1) == 0 and bruck._nsteps(5) == 3 and bruck._nsteps(8) == 3


# -- cost: the Hockney model reproduces the closed forms -------------------------------------------
COST_P = [*range(1, 34), 48, 63, 64, 65, 96, 100, 127, 128]
SIZES = np.array([0.0, 1.0, 8.0, 1000.0, 7777.0, 1e6, 3.3e8])


@pytest.mark.parametrize(("collective", "algorithm"), ALGORITHMS, ids=IDS)
def test_cost_matches_closed_form(collective, algorithm):
    rng = np.random.default_rng(7)
    formula = FORMULAS[(collective, algorithm)]
    ps = COST_P + ([1000] if collective != "alltoall" else [200])
    for p in ps:
        s = commsim.build(collective, algorithm, p)
        for a, b, g in [(1e-6, 1e-9, 2e-10), (0.0, 1.0, 0.0), (1.0, 0.0, 0.0), rng.random(3)]:
            got = Hockney(alpha=a, beta=b, gamma=g).predict(s, nbytes=SIZES).time
            want = np.array([formula(p, n, a, b, g) for n in SIZES])
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=0, err_msg=f"p={p}")


@pytest.mark.parametrize("p", [3, 6, 12])
def test_reduce_cost_independent_of_root(p):
    m = Hockney(alpha=1e-6, beta=1e-9, gamma=3e-10)
    want = t_rabenseifner_reduce(p, 1e6, 1e-6, 1e-9, 3e-10)
    for root in range(p):
        s = commsim.build("reduce", "rabenseifner", p, root=root)
        assert m.predict(s, nbytes=1e6).time == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("p", [*range(1, 40), 64, 100, 128])
def test_against_lower_bounds(p):
    # Chan et al. 2007: never beaten; attained by Bruck allgather (every p) and, for powers of two,
    # by recursive halving / doubling; Rabenseifner pays lg p more latencies than the bound.
    a, b, g, n = 1e-6, 1e-9, 3e-10, 1e6
    for (collective, _), f in FORMULAS.items():
        assert f(p, n, a, b, g) >= lower_bound(collective, p, n, a, b, g) * (1 - 1e-12)
    assert t_bruck_ag(p, n, a, b, g) == pytest.approx(lower_bound("allgather", p, n, a, b, g))
    if p & (p - 1) == 0:
        for collective, f in [
            ("reduce_scatter", t_recursive_halving_rs),
            ("allgather", t_recursive_doubling_ag),
        ]:
            assert f(p, n, a, b, g) == pytest.approx(lower_bound(collective, p, n, a, b, g))
        lg = _ceil_lg(p)
        assert t_rabenseifner_ar(p, n, a, b, g) == pytest.approx(
            lower_bound("allreduce", p, n, a, b, g) + lg * a
        )
