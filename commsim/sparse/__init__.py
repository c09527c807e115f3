"""Sparse allreduce beside the IR: density models, SparCML's split-allgather cost, and an MPI
executor on real index/value vectors (:func:`sparse_allreduce`, mpi4py imported when it runs).

It sits beside :class:`commsim.Schedule` because a schedule's message sizes are fixed before the
data exists, and a sparse message's size is the data's (see :mod:`commsim.sparse._cost`).
"""

from commsim.sparse._cost import ALGORITHMS, SparseCost, sparse_allreduce_cost
from commsim.sparse._density import DISTRIBUTIONS, Density, expected_union
from commsim.sparse._mpi import SparseRun, SparseSum, sparse_allreduce

__all__ = [
    "ALGORITHMS",
    "DISTRIBUTIONS",
    "Density",
    "SparseCost",
    "SparseRun",
    "SparseSum",
    "expected_union",
    "sparse_allreduce",
    "sparse_allreduce_cost",
]
