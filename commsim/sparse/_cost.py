r"""What sparse allreduce costs: SparCML's split-allgather, static and dynamic, in α-β-γ terms.

Sparse allreduce sits **beside** the schedule IR, not in it: a :class:`commsim.Schedule` moves
slot ranges whose sizes are fixed before any data exists, while a sparse message carries
index/value pairs whose count depends on the data (and grows as partial sums merge). So the
algorithm has its own cost here, with expected message sizes from a :class:`Density`, and its
own executor (:func:`commsim.sparse.sparse_allreduce`); the dense side of every comparison is
the registry's ring through the ordinary models.

**Split-allgather** (SparCML's SSAR_Split_allgather): the vector of ``N`` elements is cut into
``p`` blocks. Split: every rank sends the nonzeros of block ``j`` to rank ``j`` (``p - 1`` rounds
of a shift exchange), which sums them. Allgather: rank ``j`` sends its summed block to everyone.
A nonzero travels as an index and a value, :math:`r = (s_i + s_v)/s_v` times the bytes of the
value alone (2 for int32 indices and float32 values). With ``n = N s_v`` the dense bytes,
uniform density ``d`` and :math:`u_p = 1 - (1-d)^p` (the fill-in of a sum of ``p`` supports):

.. math::
    T_\mathrm{sparse} = 2(p-1)\,\alpha + \frac{p-1}{p}\,n\,r\,(d + u_p)\,\beta
    + \frac{p-1}{p}\,n\,d\,\gamma

against ring's :math:`2(p-1)\alpha + 2\frac{p-1}{p}n\beta + \frac{p-1}{p}n\gamma`. Single port,
full duplex: in each phase a rank's time is the larger of what it sends and what it receives,
and the slowest rank sets the phase (with a power law, rank 0 owns the hot block).

**Dynamic** (SparCML's DSAR: switch to dense when that pays): every message goes as pairs or as
the dense block, whichever is smaller; a block whose expected pairs take at least the dense
bytes (:math:`r\,E|S| \ge N/p`) is sent dense. At uniform density :math:`d \ge 1/r` (50 % for
float32 with int32 indices) both phases are dense, and the time is ring's bandwidth term with
the direct exchange's latencies.

References:
    Renggli, Ashkboos, Aghagolzadeh, Alistarh & Hoefler, "SparCML: High-Performance Sparse
    Communication for Machine Learning", SC 2019 (SSAR_Split_allgather, DSAR, §4's fill-in).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from commsim.errors import ParameterError
from commsim.sparse._density import Density

__all__ = ["ALGORITHMS", "SparseCost", "sparse_allreduce_cost"]

#: ``static``: always index/value pairs; ``dynamic``: each message dense when that is smaller.
ALGORITHMS = ("static", "dynamic")


@dataclasses.dataclass(frozen=True)
class SparseCost:
    """The predicted time of a sparse allreduce and what it sent.

    Attributes:
        time: seconds.
        split_bytes, allgather_bytes: the slowest rank's bytes (the larger of sent and received)
            in each phase.
        split_dense, allgather_dense: whether the phase sent its blocks dense (all of them:
            ``"dense"``; none: ``"sparse"``; some: ``"mixed"``).
        union: the expected nonzeros of the sum (all blocks).
    """

    time: float
    split_bytes: float
    allgather_bytes: float
    split_dense: str
    allgather_dense: str
    union: float


def _kind(dense: np.ndarray) -> str:
    return "dense" if dense.all() else "sparse" if not dense.any() else "mixed"


def _phase(per_block: np.ndarray, p: int) -> float:
    """The slowest rank's bytes in a shift exchange where block ``j``'s message is
    ``per_block[j]`` bytes: in the split rank ``j`` receives it from ``p - 1`` ranks and sends
    every other block once; in the allgather the other way round. Both: the larger of
    ``(p-1)·m_j`` and ``Σ m - m_j``."""
    return float(np.max(np.maximum((p - 1) * per_block, per_block.sum() - per_block)))


def sparse_allreduce_cost(
    nranks: int,
    nbytes: float,
    density: Density,
    alpha: float,
    beta: float,
    gamma: float,
    *,
    algorithm: str = "dynamic",
    itemsize: int = 4,
    index_bytes: int = 4,
) -> SparseCost:
    """The α-β-γ time of split-allgather sparse allreduce (see the module docstring).

    Args:
        nranks: ranks ``p``.
        nbytes: the dense vector's bytes (``N · itemsize``).
        density: the data's :class:`Density`.
        alpha, beta, gamma: Hockney's latency (s), seconds per byte sent, seconds per byte reduced.
        algorithm: ``"static"`` (always pairs) or ``"dynamic"`` (dense where smaller).
        itemsize, index_bytes: bytes of a value and of an index.

    Examples:
        >>> c = sparse_allreduce_cost(4, 4e6, Density(0.01), 0.0, 1.0, 0.0)
        >>> round(c.time / 3e6, 4)  # (p-1)/p n r (d + u_p) β over (p-1)/p n β
        0.0988
        >>> sparse_allreduce_cost(4, 4e6, Density(0.5), 0.0, 1.0, 0.0).allgather_dense
        'dense'
    """
    if algorithm not in ALGORITHMS:
        raise ParameterError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    p = int(nranks)
    if p < 1:
        raise ParameterError(f"nranks must be >= 1, got {nranks!r}")
    nelems = max(int(nbytes // itemsize), p)
    pair = itemsize + index_bytes
    block_dense = nelems / p * itemsize
    nnz = density.block_nnz(nelems, p)
    union = density.block_union(nelems, p, p)
    if p == 1:
        return SparseCost(0.0, 0.0, 0.0, "sparse", "sparse", float(union.sum()))
    split_msg, gather_msg = nnz * pair, union * pair
    split_dense = np.zeros(p, dtype=bool)
    gather_dense = np.zeros(p, dtype=bool)
    if algorithm == "dynamic":
        split_dense, gather_dense = split_msg >= block_dense, gather_msg >= block_dense
        split_msg = np.where(split_dense, block_dense, split_msg)
        gather_msg = np.where(gather_dense, block_dense, gather_msg)
    split, gather = _phase(split_msg, p), _phase(gather_msg, p)
    reduced = np.where(split_dense, block_dense, nnz * itemsize)  # value bytes added at rank j
    time = 2 * (p - 1) * alpha + (split + gather) * beta + float(np.max((p - 1) * reduced)) * gamma
    return SparseCost(
        time, split, gather, _kind(split_dense), _kind(gather_dense), float(union.sum())
    )
