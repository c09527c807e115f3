"""Sparse allreduce's model: expected unions (against sampled supports), SparCML's
split-allgather cost (its closed form at uniform density), the dynamic switch to dense, and the
crossover with dense ring. The MPI executor is checked in ``tests/mpi/test_mpi_sparse.py``."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.errors import ParameterError
from commsim.models import Hockney
from commsim.sparse import Density, expected_union, sparse_allreduce_cost

ALPHA, BETA, GAMMA = 2e-6, 1 / 25e9, 1 / 100e9
MiB = 2**20


@pytest.mark.parametrize("distribution", ["uniform", "powerlaw"])
@pytest.mark.parametrize("density", [0.01, 0.1, 0.5])
def test_expected_union_matches_sampled_supports(distribution, density):
    """k random supports: the union's size is the model's expectation within 2 %, and so is one
    support's size (the density)."""
    nelems, k, dens = 200_000, 4, Density(density, distribution)
    rng = np.random.default_rng(1)
    supports = [dens.sample(nelems, rng) for _ in range(k)]
    union = len(np.unique(np.concatenate(supports)))
    assert union == pytest.approx(dens.block_union(nelems, 1, k)[0], rel=0.02)
    assert np.mean([len(s) for s in supports]) == pytest.approx(density * nelems, rel=0.02)
    if distribution == "uniform":
        assert dens.block_union(nelems, 1, k)[0] == pytest.approx(
            expected_union(nelems, density, k), rel=1e-12
        )


def test_the_static_cost_is_the_closed_form_at_uniform_density():
    for p in (2, 3, 4, 8, 64):
        for d in (0.001, 0.01, 0.3):
            n = 64.0 * MiB
            got = sparse_allreduce_cost(p, n, Density(d), ALPHA, BETA, GAMMA, algorithm="static")
            u = 1 - (1 - d) ** p
            want = 2 * (p - 1) * ALPHA + (p - 1) / p * n * (2 * (d + u) * BETA + d * GAMMA)
            assert got.time == pytest.approx(want, rel=1e-6)  # p = 3: blocks differ by one


def test_dynamic_switches_to_dense_at_half_density_and_costs_ring():
    ring = Hockney(ALPHA, BETA, GAMMA).predict(
        commsim.build("allreduce", "ring", nranks=4), 64 * MiB
    )
    half = sparse_allreduce_cost(4, 64 * MiB, Density(0.5), ALPHA, BETA, GAMMA)
    assert (half.split_dense, half.allgather_dense) == ("dense", "dense")
    assert half.time == pytest.approx(ring.time, rel=1e-12)
    static = sparse_allreduce_cost(
        4, 64 * MiB, Density(0.5), ALPHA, BETA, GAMMA, algorithm="static"
    )
    assert static.time > ring.time  # pairs of a half-full vector cost more than the values alone


@pytest.mark.parametrize("distribution", ["uniform", "powerlaw"])
def test_one_percent_is_below_dense_ring_at_64_MiB_on_4_ranks(distribution):
    ring = Hockney(ALPHA, BETA, GAMMA).predict(
        commsim.build("allreduce", "ring", nranks=4), 64 * MiB
    )
    for algorithm in ("static", "dynamic"):
        c = sparse_allreduce_cost(
            4, 64 * MiB, Density(0.01, distribution), ALPHA, BETA, GAMMA, algorithm=algorithm
        )
        assert c.time < ring.time / 5
        assert c.split_dense == c.allgather_dense == "sparse"


def test_a_power_law_loads_the_hot_block():
    uniform = sparse_allreduce_cost(8, 64 * MiB, Density(0.01), 0.0, 1.0, 0.0)
    hot = sparse_allreduce_cost(8, 64 * MiB, Density(0.01, "powerlaw"), 0.0, 1.0, 0.0)
    assert hot.split_bytes > 2 * uniform.split_bytes  # rank 0 receives everyone's hot block
    assert hot.union < uniform.union  # hot indices overlap


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.5, float("nan"), True, "0.1"])
def test_density_outside_0_1_is_one_sentence(bad):
    with pytest.raises(ParameterError, match=r"density must be in \(0, 1\]"):
        Density(bad)


def test_bad_distribution_and_algorithm():
    with pytest.raises(ParameterError, match="distribution must be one of uniform, powerlaw"):
        Density(0.1, "zipf")
    with pytest.raises(ParameterError, match="algorithm must be one of static, dynamic"):
        sparse_allreduce_cost(4, 1e6, Density(0.1), 0, 0, 0, algorithm="sometimes")
