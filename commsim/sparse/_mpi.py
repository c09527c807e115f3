r"""Sparse allreduce on real index/value vectors with mpi4py: split-allgather, static or dynamic.

Each rank holds a sparse vector of ``N`` elements: sorted, distinct ``indices`` and their
``values``. The result is the sum on every rank, sparse (its nonzero indices and values) where
every block stayed sparse and dense otherwise (:class:`SparseSum`; ``.dense()`` for the vector
a dense allreduce gives, so the two can be checked against each other).

1. **Split.** Block ``j`` is elements ``[jN/p, (j+1)N/p)``. Rank ``r`` sends its nonzeros of
   every other block ``j`` to rank ``j`` and receives block ``r``'s from every other rank: all
   its sends posted at once (``Isend``), then the receives in the order messages arrive (their
   lengths probed), so no rank waits on one slow partner and nothing can deadlock. A message is
   index/value pairs or, with ``dynamic=True``, the dense block when the pairs would take at
   least as many bytes (so a message is dense exactly when it has the dense block's length).
2. **Reduce.** Rank ``r`` merges what arrives: the union of the supports and the sum on it (a
   merge of the ``p`` sorted runs of received indices, ``O(nnz log p)``); a dense contribution
   makes the block dense.
3. **Allgather.** The summed block goes, as pairs of the union or dense (``dynamic``, the same
   rule), to every rank in a second such phase; each rank puts the blocks in order.

References:
    Renggli et al., "SparCML: High-Performance Sparse Communication for Machine Learning",
    SC 2019.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from commsim.errors import ParameterError

__all__ = ["SparseRun", "SparseSum", "sparse_allreduce"]

_TAG = 7100  # the split's tag; the allgather's is _TAG + 1


class SparseRun:
    """What one :func:`sparse_allreduce` call sent: bytes per phase and which phases went dense."""

    def __init__(self) -> None:
        self.sent = {"split": 0, "allgather": 0}
        self.dense = {"split": False, "allgather": False}


def _message(
    idx: np.ndarray, val: np.ndarray, lo: int, hi: int, dynamic: bool, dtype: np.dtype
) -> tuple[bool, np.ndarray]:
    """``(dense?, payload bytes)`` of block ``[lo, hi)`` given its nonzeros ``idx``, ``val``:
    pairs, or the dense block when ``dynamic`` and the pairs would take at least its bytes."""
    if dynamic and idx.size * (4 + dtype.itemsize) >= (hi - lo) * dtype.itemsize:
        dense = np.zeros(hi - lo, dtype=dtype)
        dense[idx - lo] = val
        return True, dense.view(np.uint8)
    rel = (idx - lo).astype(np.int32)  # within the block: int32 for any block under 2**31
    return False, np.concatenate([rel.view(np.uint8), np.ascontiguousarray(val).view(np.uint8)])


def _unpack(
    payload: np.ndarray, lo: int, hi: int, dtype: np.dtype, dynamic: bool
) -> tuple[np.ndarray | None, np.ndarray]:
    """``(indices relative to lo, values)``; ``indices`` is ``None`` for a dense block. A
    dynamic message is dense exactly when it has the dense block's length (pairs go only when
    they take fewer bytes); a static one never is."""
    if dynamic and payload.size == (hi - lo) * dtype.itemsize:
        return None, payload.view(dtype)
    n = payload.size // (4 + dtype.itemsize)
    return payload[: 4 * n].view(np.int32), payload[4 * n :].view(dtype)


def _phase(comm: Any, sends: dict[int, np.ndarray], nrecv: int, tag: int) -> dict[int, np.ndarray]:
    """Post every send of a phase (``{dst: payload}``), then take its ``nrecv`` messages in the
    order they arrive (``Probe`` from any source for the length, then ``Recv``): ``{src:
    bytes}``. Every send is posted before any receive blocks, so the phase cannot deadlock;
    the phase's own tag keeps a fast rank's next phase apart (MPI keeps one pair's messages of
    one tag in order, and no rank starts a phase before it has all of the previous one's)."""
    from mpi4py import MPI

    reqs = [comm.Isend(payload, dest=dst, tag=tag) for dst, payload in sends.items()]
    got: dict[int, np.ndarray] = {}
    status = MPI.Status()
    for _ in range(nrecv):
        comm.Probe(source=MPI.ANY_SOURCE, tag=tag, status=status)
        src = status.Get_source()
        got[src] = np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8)
        comm.Recv(got[src], source=src, tag=tag)
    MPI.Request.Waitall(reqs)
    return got


class SparseSum(NamedTuple):
    """The result: the sum's nonzero ``indices`` (sorted) and ``values``, or, where a block
    arrived dense, the whole vector (``indices`` is ``None``, ``values`` has ``nelems``)."""

    indices: np.ndarray | None
    values: np.ndarray
    nelems: int

    def dense(self) -> np.ndarray:
        """The sum as a dense vector of ``nelems`` values."""
        if self.indices is None:
            return self.values
        out = np.zeros(self.nelems, dtype=self.values.dtype)
        out[self.indices] = self.values
        return out


def _merge(parts: list[tuple[np.ndarray | None, np.ndarray]], size: int, dtype: np.dtype):
    """Sum the block's contributions: ``(sorted indices, values)`` when all are pairs (a merge
    of their sorted runs), ``(None, dense block)`` when any arrived dense."""
    if any(rel is None for rel, _ in parts):
        acc = np.zeros(size, dtype=dtype)
        for rel, v in parts:
            if rel is None:
                acc += v
            else:
                acc[rel] += v  # distinct indices within one contribution
        return None, acc
    idx = np.concatenate([rel.astype(np.int32, copy=False) for rel, _ in parts])
    val = np.concatenate([v for _, v in parts])
    if not idx.size:
        return idx, val
    order = np.argsort(idx, kind="stable")  # timsort: p sorted runs merge in O(nnz log p)
    idx, val = idx[order], val[order]
    starts = np.flatnonzero(np.concatenate([[True], idx[1:] != idx[:-1]]))
    return idx[starts], np.add.reduceat(val, starts)


def sparse_allreduce(
    comm: Any,
    indices: np.ndarray,
    values: np.ndarray,
    nelems: int,
    *,
    dynamic: bool = True,
    run: SparseRun | None = None,
) -> SparseSum:
    """The sum of every rank's sparse vector, on every rank (:meth:`SparseSum.dense` for the
    dense vector).

    Args:
        comm: an mpi4py communicator; every rank calls with the same ``nelems`` and ``dynamic``.
        indices: this rank's nonzero positions, sorted and distinct, in ``[0, nelems)``.
        values: their values (float32 or float64).
        nelems: the dense length ``N`` (at least the rank count).
        dynamic: send a block dense when its pairs would take at least the dense bytes.
        run: filled with the bytes this rank sent per phase and which phases went dense.

    Raises:
        ParameterError: indices not sorted and distinct, out of range, or not matching values.
    """
    p, r = comm.Get_size(), comm.Get_rank()
    idx = np.asarray(indices, dtype=np.int64)
    val = np.ascontiguousarray(values)
    dtype = val.dtype
    why = None
    if idx.shape != val.shape or idx.ndim != 1:
        why = f"indices and values must be 1-D of one length, got {idx.shape} and {val.shape}"
    elif idx.size and (idx[0] < 0 or idx[-1] >= nelems or (np.diff(idx) <= 0).any()):
        why = f"indices must be sorted, distinct and in [0, {nelems})"
    bad = comm.allgather(why)  # every rank raises, or none: no rank is left waiting in Probe
    if any(bad):
        first = next(q for q, w in enumerate(bad) if w)
        raise ParameterError(f"rank {first}: {bad[first]}")
    if nelems < p:
        raise ParameterError(f"a vector of {nelems} elements cannot be split over {p} ranks")
    run = run if run is not None else SparseRun()
    edges = np.arange(p + 1, dtype=np.int64) * nelems // p
    cut = np.searchsorted(idx, edges)
    lo, hi = int(edges[r]), int(edges[r + 1])
    parts = [(idx[cut[r] : cut[r + 1]] - lo, val[cut[r] : cut[r + 1]])]
    sends = {}
    for t in range(1, p):  # split: block r + t to rank r + t
        dst = (r + t) % p
        part = slice(cut[dst], cut[dst + 1])
        dense, sends[dst] = _message(
            idx[part], val[part], int(edges[dst]), int(edges[dst + 1]), dynamic, dtype
        )
        run.sent["split"] += sends[dst].size
        run.dense["split"] |= dense
    for buf in _phase(comm, sends, p - 1, _TAG).values():
        parts.append(_unpack(buf, lo, hi, dtype, dynamic))
    rel, summed = _merge(parts, hi - lo, dtype)
    if rel is None:
        dense, payload = True, summed.view(np.uint8)
    else:
        dense, payload = _message(rel + lo, summed, lo, hi, dynamic, dtype)
    blocks: list[tuple[np.ndarray | None, np.ndarray]] = [(None, np.empty(0))] * p
    blocks[r] = (rel, summed)
    run.sent["allgather"] += payload.size * (p - 1)
    run.dense["allgather"] |= dense
    got = _phase(comm, {(r + t) % p: payload for t in range(1, p)}, p - 1, _TAG + 1)
    for src, buf in got.items():  # allgather: block src from rank src
        blocks[src] = _unpack(buf, int(edges[src]), int(edges[src + 1]), dtype, dynamic)
    if all(b is not None for b, _ in blocks):  # every block as pairs: a sorted sparse sum
        return SparseSum(
            np.concatenate([b.astype(np.int64) + edges[j] for j, (b, _) in enumerate(blocks)]),
            np.concatenate([v for _, v in blocks]),
            nelems,
        )
    out = np.zeros(nelems, dtype=dtype)
    for j, (b, v) in enumerate(blocks):
        if b is None:
            out[edges[j] : edges[j + 1]] = v
        else:
            out[edges[j] + b] = v
    return SparseSum(None, out, nelems)
