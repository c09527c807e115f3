r"""Sparse allreduce on real index/value vectors with mpi4py: split-allgather, static or dynamic.

Each rank holds a sparse vector of ``N`` elements: sorted, distinct ``indices`` and their
``values``. The result is the dense sum on every rank (``N`` values), as a dense allreduce gives,
so the two can be checked and timed against each other.

1. **Split.** Block ``j`` is elements ``[jN/p, (j+1)N/p)``. In round ``t = 1 .. p-1`` rank ``r``
   sends its nonzeros of block ``r + t`` to that rank and receives block ``r``'s from ``r - t``
   (``Sendrecv``, a shift exchange: every round is a perfect matching, so it cannot deadlock).
   Each message is a header (its kind and length) and then its payload: index/value pairs, or,
   with ``dynamic=True``, the dense block when the pairs would take at least as many bytes.
2. **Reduce.** Rank ``r`` adds what arrives into a dense accumulator of its block and marks the
   union of the supports.
3. **Allgather.** The summed block goes, as pairs of the union or dense (``dynamic``, the same
   rule), to every rank in a second shift exchange; each rank writes the blocks it receives into
   its dense result.

The dense accumulator costs ``O(N/p)`` memory and time per rank, like SparCML's dense
fallback; the messages are what the sparse format saves.

References:
    Renggli et al., "SparCML: High-Performance Sparse Communication for Machine Learning",
    SC 2019.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim.errors import ParameterError

__all__ = ["SparseRun", "sparse_allreduce"]

_SPARSE, _DENSE = 0, 1


class SparseRun:
    """What one :func:`sparse_allreduce` call sent: bytes per phase and which phases went dense."""

    def __init__(self) -> None:
        self.sent = {"split": 0, "allgather": 0}
        self.dense = {"split": False, "allgather": False}


def _message(
    idx: np.ndarray, val: np.ndarray, lo: int, hi: int, dynamic: bool, dtype: np.dtype
) -> tuple[int, np.ndarray]:
    """``(kind, payload bytes)`` of block ``[lo, hi)`` given its nonzeros ``idx``, ``val``."""
    pair = idx.size * (4 + dtype.itemsize)
    if dynamic and pair >= (hi - lo) * dtype.itemsize:
        dense = np.zeros(hi - lo, dtype=dtype)
        dense[idx - lo] = val
        return _DENSE, dense.view(np.uint8)
    rel = (idx - lo).astype(np.int32)  # within the block: int32 for any block under 2**31
    return _SPARSE, np.concatenate([rel.view(np.uint8), np.ascontiguousarray(val).view(np.uint8)])


def _unpack(
    kind: int, payload: np.ndarray, lo: int, hi: int, dtype: np.dtype
) -> tuple[np.ndarray | None, np.ndarray]:
    """``(indices relative to lo, values)``; ``indices`` is ``None`` for a dense block."""
    if kind == _DENSE:
        return None, payload.view(dtype)
    n = payload.size // (4 + dtype.itemsize)
    return payload[: 4 * n].view(np.int32), payload[4 * n :].view(dtype)


def _exchange(
    comm: Any, dst: int, src: int, kind: int, payload: np.ndarray
) -> tuple[int, np.ndarray]:
    """Send ``(kind, payload)`` to ``dst`` and receive one from ``src`` (header, then data)."""
    head = np.array([kind, payload.size], dtype=np.int64)
    got = np.empty(2, dtype=np.int64)
    comm.Sendrecv(head, dest=dst, sendtag=1, recvbuf=got, source=src, recvtag=1)
    buf = np.empty(int(got[1]), dtype=np.uint8)
    comm.Sendrecv(payload, dest=dst, sendtag=2, recvbuf=buf, source=src, recvtag=2)
    return int(got[0]), buf


def sparse_allreduce(
    comm: Any,
    indices: np.ndarray,
    values: np.ndarray,
    nelems: int,
    *,
    dynamic: bool = True,
    run: SparseRun | None = None,
) -> np.ndarray:
    """The dense sum (``nelems`` values) of every rank's sparse vector, on every rank.

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
    if idx.shape != val.shape or idx.ndim != 1:
        raise ParameterError(
            f"indices and values must be 1-D of one length, got {idx.shape} and {val.shape}"
        )
    if idx.size and (idx[0] < 0 or idx[-1] >= nelems or (np.diff(idx) <= 0).any()):
        raise ParameterError(f"indices must be sorted, distinct and in [0, {nelems})")
    if nelems < p:
        raise ParameterError(f"a vector of {nelems} elements cannot be split over {p} ranks")
    run = run if run is not None else SparseRun()
    edges = np.arange(p + 1, dtype=np.int64) * nelems // p
    cut = np.searchsorted(idx, edges)
    lo, hi = int(edges[r]), int(edges[r + 1])
    acc = np.zeros(hi - lo, dtype=dtype)
    mask = np.zeros(hi - lo, dtype=bool)
    own = slice(cut[r], cut[r + 1])
    acc[idx[own] - lo] = val[own]
    mask[idx[own] - lo] = True
    for t in range(1, p):  # split: block r + t out, block r in
        dst, src = (r + t) % p, (r - t) % p
        part = slice(cut[dst], cut[dst + 1])
        kind, payload = _message(
            idx[part], val[part], int(edges[dst]), int(edges[dst + 1]), dynamic, dtype
        )
        run.sent["split"] += payload.size
        run.dense["split"] |= kind == _DENSE
        k, buf = _exchange(comm, dst, src, kind, payload)
        rel, v = _unpack(k, buf, lo, hi, dtype)
        if rel is None:
            acc += v
            mask[:] = True
        else:
            acc[rel] += v  # distinct indices within one message
            mask[rel] = True
    out = np.zeros(nelems, dtype=dtype)
    out[lo:hi] = acc
    union = np.flatnonzero(mask) + lo
    kind, payload = _message(union, acc[union - lo], lo, hi, dynamic, dtype)
    for t in range(1, p):  # allgather: block r out to r + t, block r - t in
        dst, src = (r + t) % p, (r - t) % p
        run.sent["allgather"] += payload.size
        run.dense["allgather"] |= kind == _DENSE
        k, buf = _exchange(comm, dst, src, kind, payload)
        a, b = int(edges[src]), int(edges[src + 1])
        rel, v = _unpack(k, buf, a, b, dtype)
        if rel is None:
            out[a:b] = v
        else:
            out[a + rel.astype(np.int64)] = v
    return out
