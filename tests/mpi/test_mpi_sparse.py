"""Sparse allreduce on real index/value vectors under MPI, checked against the dense sum.

Run as ``mpirun -n 4 python -m pytest tests/mpi/test_mpi_sparse.py -q`` (and ``-n 2``); plain
pytest is world size 1. Every rank draws its own random sparse vector; the dense sum comes from
``MPI_Allreduce`` on the densified vectors.
"""

from __future__ import annotations

import numpy as np
import pytest

from commsim.errors import ParameterError
from commsim.sparse import Density, SparseRun, sparse_allreduce

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def comm():
    try:
        from mpi4py import MPI
    except ImportError as e:
        pytest.skip(f"mpi4py: {e}")
    return MPI.COMM_WORLD


def _vector(comm, nelems: int, density: Density, seed: int):
    rng = np.random.default_rng(seed * 1000 + comm.Get_rank())
    idx = density.sample(nelems, rng)
    val = rng.integers(-8, 9, size=idx.size).astype(np.float32)  # exact in any order
    dense = np.zeros(nelems, dtype=np.float32)
    dense[idx] = val
    return idx, val, dense


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("distribution", ["uniform", "powerlaw"])
@pytest.mark.parametrize("density", [0.001, 0.01, 0.2, 0.5, 1.0])
def test_sparse_allreduce_is_the_dense_sum(comm, density, distribution, dynamic):
    from mpi4py import MPI

    for seed, nelems in enumerate([7, 1000, 40_009]):
        if nelems < comm.Get_size():
            continue
        idx, val, dense = _vector(comm, nelems, Density(density, distribution), seed)
        want = np.empty_like(dense)
        comm.Allreduce(dense, want)
        got = sparse_allreduce(comm, idx, val, nelems, dynamic=dynamic)
        np.testing.assert_array_equal(got.dense(), want)
        if got.indices is not None:  # a sparse result: sorted, distinct, the union of supports
            assert (np.diff(got.indices) > 0).all()
            support = np.empty(nelems, dtype=bool)
            comm.Allreduce(dense != 0, support, op=MPI.LOR)
            assert set(np.flatnonzero(support)) <= set(got.indices.tolist())


def test_dynamic_goes_dense_at_half_density_and_stays_sparse_at_one_percent(comm):
    if comm.Get_size() < 2:
        pytest.skip("one rank sends nothing")
    for density, dense in ((0.01, False), (0.5, True)):
        idx, val, _ = _vector(comm, 100_000, Density(density), 3)
        run = SparseRun()
        sparse_allreduce(comm, idx, val, 100_000, run=run)
        assert run.dense["allgather"] is dense
    static = SparseRun()
    sparse_allreduce(comm, idx, val, 100_000, dynamic=False, run=static)
    assert not static.dense["allgather"] and static.sent["allgather"] > run.sent["allgather"]


def test_bad_vectors_are_one_sentence(comm):
    with pytest.raises(ParameterError, match="sorted, distinct"):
        sparse_allreduce(comm, np.array([3, 1]), np.ones(2, np.float32), 10)
    with pytest.raises(ParameterError, match="one length"):
        sparse_allreduce(comm, np.array([1]), np.ones(2, np.float32), 10)
