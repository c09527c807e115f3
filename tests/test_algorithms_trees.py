"""Tree, direct and pairwise algorithms: verified, counted, and costed in closed form.

The closed forms below are written from the papers (Thakur, Rabenseifner & Gropp 2005; Sanders,
Speck & Träff 2009; van de Geijn's scatter-allgather) in plain Python: they never call the
algorithms, so a schedule, a formula and the model can only agree by being right together.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import commsim
from commsim.algorithms import direct, trees
from commsim.models import Hockney, lower_bound

ALGORITHMS = [
    ("broadcast", "binomial", {}),
    ("reduce", "binomial", {}),
    ("allreduce", "binomial", {}),
    ("broadcast", "chain", {}),
    ("broadcast", "chain", {"segments": 3}),
    ("broadcast", "scatter_allgather", {}),
    ("allreduce", "double_binary_tree", {}),
    ("allreduce", "double_binary_tree", {"segments": 1}),
    ("allreduce", "double_binary_tree", {"segments": 5}),
    ("reduce_scatter", "direct", {}),
    ("reduce_scatter", "pairwise", {}),
    ("allgather", "direct", {}),
    ("allreduce", "direct", {}),
    ("alltoall", "pairwise", {}),
    ("alltoall", "direct", {}),
]
IDS = [f"{c}/{a}" + "".join(f",{k}={v}" for k, v in kw.items()) for c, a, kw in ALGORITHMS]
SWEEP = [*range(1, 34), 64, 100, 127, 128, 1000]


# -- closed forms ---------------------------------------------------------------------------------
def _ceil_lg(p: int) -> int:
    k = 0
    while 2**k < p:
        k += 1
    return k


def t_binomial_bcast(p, n, a, b, g):  # Thakur et al. 2005
    return _ceil_lg(p) * (a + n * b)


def t_binomial_reduce(p, n, a, b, g):
    return _ceil_lg(p) * (a + n * b + n * g)


def t_binomial_allreduce(p, n, a, b, g):
    L = _ceil_lg(p)
    return 2 * L * a + 2 * L * n * b + L * n * g


def t_chain(p, n, a, b, g, k):  # classic pipeline: p - 1 hops + k - 1 more segments
    return 0.0 if p == 1 else (p + k - 2) * (a + n / k * b)


def t_scatter_allgather(p, n, a, b, g):  # van de Geijn: scatter + ring allgather
    return (_ceil_lg(p) + p - 1) * a + 2 * (p - 1) / p * n * b


def t_dbt_round(p, n, a, b, g, k):
    """One reduce step plus one broadcast step of the double binary tree: 2 messages of n/(2k)."""
    return 2 * a + n / k * b + n / (2 * k) * g


def t_rs_direct(p, n, a, b, g):  # p - 1 single-port rounds, each received block reduced
    return (p - 1) * (a + n / p * b + n / p * g)


def t_rs_pairwise(p, n, a, b, g):  # Thakur et al. 2005, pairwise exchange
    return (p - 1) * a + (p - 1) / p * n * b + (p - 1) / p * n * g


def t_ag_direct(p, n, a, b, g):
    return (p - 1) * (a + n / p * b)


def t_ar_direct(p, n, a, b, g):
    return 2 * (p - 1) * a + 2 * (p - 1) / p * n * b + (p - 1) / p * n * g


def t_alltoall(p, n, a, b, g):  # Thakur et al. 2005: p - 1 blocks of n/p, one per step/round
    return (p - 1) * (a + n / p * b)


FORMULAS = {
    ("broadcast", "binomial"): t_binomial_bcast,
    ("reduce", "binomial"): t_binomial_reduce,
    ("allreduce", "binomial"): t_binomial_allreduce,
    ("broadcast", "scatter_allgather"): t_scatter_allgather,
    ("reduce_scatter", "direct"): t_rs_direct,
    ("reduce_scatter", "pairwise"): t_rs_pairwise,
    ("allgather", "direct"): t_ag_direct,
    ("allreduce", "direct"): t_ar_direct,
    ("alltoall", "pairwise"): t_alltoall,
    ("alltoall", "direct"): t_alltoall,
}
COST_PS = [*range(1, 41), 47, 64, 65, 96, 97, 100, 127, 128]


def _params(seed: int) -> tuple[float, float, float]:
    rng = random.Random(seed)
    return rng.uniform(1e-6, 1e-5), rng.uniform(1e-11, 1e-9), rng.uniform(1e-12, 1e-9)


def _check(model_time: float, want: float) -> None:
    assert model_time == pytest.approx(want, rel=1e-9, abs=1e-15)


# -- verification ---------------------------------------------------------------------------------
# default parameters are swept by tests/test_registry.py; here the non-default ones
VARIANTS = [(c, a, kw) for c, a, kw in ALGORITHMS if kw]


@pytest.mark.parametrize("p", SWEEP)
@pytest.mark.parametrize(
    ("collective", "algorithm", "kw"), VARIANTS, ids=[f"{c}/{a}/{kw}" for c, a, kw in VARIANTS]
)
def test_verifies(collective, algorithm, kw, p):
    s = commsim.build(collective, algorithm, nranks=p, **kw)
    assert s.collective == collective and s.nranks == p
    commsim.verify(s)


ROOTED = [(c, a, kw) for c, a, kw in ALGORITHMS if c in ("broadcast", "reduce")]


@pytest.mark.parametrize("p", [2, 3, 5, 8, 13, 64, 100])
@pytest.mark.parametrize(
    ("collective", "algorithm", "kw"), ROOTED, ids=[f"{c}/{a}" for c, a, _ in ROOTED]
)
def test_verifies_from_other_roots(collective, algorithm, kw, p):
    for root in sorted({1, p // 2, p - 1}):
        s = commsim.build(collective, algorithm, nranks=p, root=root, **kw)
        assert s.root == root
        commsim.verify(s)


# -- counts ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("collective", "algorithm", "kw", "p", "nsteps", "ntransfers"),
    [
        ("broadcast", "binomial", {}, 1, 0, 0),
        ("broadcast", "binomial", {}, 8, 3, 7),
        ("broadcast", "binomial", {}, 9, 4, 8),
        ("reduce", "binomial", {}, 7, 3, 6),
        ("allreduce", "binomial", {}, 5, 6, 8),
        ("broadcast", "chain", {"segments": 4}, 2, 4, 4),
        ("broadcast", "chain", {"segments": 4}, 6, 8, 20),
        ("broadcast", "chain", {"segments": 1}, 6, 5, 5),
        ("broadcast", "scatter_allgather", {}, 8, 3 + 7, 7 + 56),
        ("broadcast", "scatter_allgather", {}, 5, 3 + 4, 4 + 20),
        ("allreduce", "double_binary_tree", {"segments": 4}, 1, 0, 0),
        ("allreduce", "double_binary_tree", {"segments": 4}, 2, 8, 16),
        ("allreduce", "double_binary_tree", {"segments": 4}, 8, 22, 112),
        ("allreduce", "double_binary_tree", {"segments": 2}, 16, 2 * 9, 4 * 15 * 2),
        ("reduce_scatter", "direct", {}, 1, 0, 0),
        ("reduce_scatter", "direct", {}, 6, 1, 30),
        ("reduce_scatter", "pairwise", {}, 6, 5, 30),
        ("allgather", "direct", {}, 7, 1, 42),
        ("allreduce", "direct", {}, 7, 2, 84),
        ("alltoall", "pairwise", {}, 1, 1, 1),
        ("alltoall", "pairwise", {}, 6, 5, 36),
        ("alltoall", "direct", {}, 1, 1, 1),
        ("alltoall", "direct", {}, 6, 1, 36),
    ],
)
def test_counts(collective, algorithm, kw, p, nsteps, ntransfers):
    s = commsim.build(collective, algorithm, nranks=p, **kw)
    assert (s.nsteps, s.ntransfers) == (nsteps, ntransfers)
    # the counts the factory declares are the real ones
    sizes = [st.ntransfers for st in s.steps()]
    assert sum(sizes) == ntransfers
    assert s.max_step_transfers == max(sizes, default=0)


@pytest.mark.parametrize("p", [2, 5, 6, 16, 31])
def test_pairwise_steps_are_perfect_matchings(p):
    for s in (direct.pairwise_reduce_scatter(p), direct.pairwise_alltoall(p)):
        for st in s.steps():
            remote = st.src != st.dst
            assert sorted(st.src[remote]) == list(range(p))
            assert sorted(st.dst[remote]) == list(range(p))


@pytest.mark.parametrize("p", [2, 3, 5, 8, 9, 12])
def test_binomial_scatter_root_sends_p_minus_1_blocks(p):
    s = trees.scatter_allgather_broadcast(p)
    L = _ceil_lg(p)
    scatter = list(s.steps())[:L]
    root = [int(st.count[st.src == 0].sum()) for st in scatter]
    assert sum(root) == p - 1  # the root sends every other block once, in ⌈lg p⌉ messages
    assert root[0] == p - 2 ** (L - 1)  # first the upper part, [2^(L-1), p)
    receivers = np.concatenate([st.dst for st in scatter])
    assert sorted(receivers.tolist()) == list(range(1, p))  # every other rank receives once


# -- closed-form costs ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("collective", "algorithm"), list(FORMULAS), ids=[f"{c}/{a}" for c, a in FORMULAS]
)
def test_cost_matches_closed_form(collective, algorithm):
    formula = FORMULAS[(collective, algorithm)]
    for i, p in enumerate(COST_PS):
        s = commsim.build(collective, algorithm, nranks=p)
        a, b, g = _params(i)
        model = Hockney(alpha=a, beta=b, gamma=g)
        for n in (1.0, 4096.0, 3.0e6 + 7):
            _check(model.predict(s, n).time, formula(p, n, a, b, g))


@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_chain_cost_matches_closed_form(k):
    for i, p in enumerate(COST_PS):
        s = trees.chain_broadcast(p, segments=k)
        a, b, g = _params(i)
        for n in (1.0, 1e6 + 3):
            _check(Hockney(alpha=a, beta=b, gamma=g).predict(s, n).time, t_chain(p, n, a, b, g, k))


def test_chain_default_segments():
    s = commsim.build("broadcast", "chain", nranks=10)
    assert s.params == {"segments": 8} and s.nsteps == 10 + 8 - 2


def test_costs_respect_lower_bound():
    a, b, g = 2e-6, 1e-10, 3e-10
    model = Hockney(alpha=a, beta=b, gamma=g)
    for c, alg, kw in ALGORITHMS:
        for p in (2, 3, 7, 16, 33):
            for n in (8.0, 1e7):
                t = model.predict(commsim.build(c, alg, nranks=p, **kw), n).time
                assert t >= lower_bound(c, p, n, a, b, g) * (1 - 1e-12)


# -- double binary tree ---------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 4, 6])
def test_double_binary_tree_bounds(k):
    """Everywhere: Chan's lower bound <= (S-1) rounds <= T <= S rounds, S = 2k + 2⌈lg p⌉ - 3.

    Where T = S rounds exactly is the row's ``exact`` domain, checked by the registry sweep."""
    ps = [*range(3, 70), 96, 97, 99, 130, 200, 255, 257, 300, 513]
    for p in ps:
        s = trees.double_binary_tree_allreduce(p, segments=k)
        a, b, g = _params(p + 1000 * k)
        model = Hockney(alpha=a, beta=b, gamma=g)
        S = 2 * k + 2 * _ceil_lg(p) - 3
        assert s.nsteps <= 2 * S
        for n in (1.0, 1e6):
            t = model.predict(s, n).time
            rnd = t_dbt_round(p, n, a, b, g, k)
            assert t >= lower_bound("allreduce", p, n, a, b, g)
            assert (S - 1) * rnd * (1 - 1e-12) <= t <= S * rnd * (1 + 1e-12), (p, k, n)


@pytest.mark.parametrize("p", [*range(1, 20), 32, 33, 64, 100, 127, 1000])
def test_double_binary_tree_structure(p):
    par0, par1 = trees._double_tree(p)
    H = _ceil_lg(p)
    interior = []
    for par in (par0, par1):
        assert (par < 0).sum() == 1
        children = np.bincount(par[par >= 0], minlength=p)
        assert children.max(initial=0) <= 2
        _, depth = trees._heights_depths(par)
        assert depth.max() == H
        interior.append(children > 0)
    both = np.flatnonzero(interior[0] & interior[1])
    # every rank is interior in at most one tree, except rank 0 for odd p (one child in each)
    assert both.tolist() == ([0] if p % 2 and p > 1 else [])
    total = np.bincount(par0[par0 >= 0], minlength=p) + np.bincount(par1[par1 >= 0], minlength=p)
    assert total.max(initial=0) <= 2
    # the edges into both roots get colour 0 (the cost bound relies on it)
    e = trees._dbt_edges(p)
    roots = np.where(e["tree"] == 0, np.flatnonzero(par0 < 0)[0], np.flatnonzero(par1 < 0)[0])
    assert (e["colour"][e["parent"] == roots] == 0).all()


@pytest.mark.parametrize("p", [2, 3, 4, 5, 6, 7, 12, 17, 33, 100])
def test_double_binary_tree_steps_are_matchings(p):
    for st in trees.double_binary_tree_allreduce(p, segments=3).steps():
        assert len(np.unique(st.src)) == len(st.src)
        assert len(np.unique(st.dst)) == len(st.dst)
        assert (st.src != st.dst).all()


def test_double_binary_tree_rejects_bad_segments():
    with pytest.raises(commsim.ScheduleError, match="segments"):
        commsim.build("allreduce", "double_binary_tree", nranks=4, segments=0)
    with pytest.raises(commsim.ScheduleError, match="segments"):
        commsim.build("broadcast", "chain", nranks=4, segments=2.5)
