r"""The mpi4jax backend's device program: one rank's :class:`~commsim.exec.mpi._plan.RankPlan` as
one ``jax.jit`` function of its buffer, and the MPI library's own collectives.

Per step, :func:`program` reads every payload from the **pre-step** buffer (one ``lax.slice``, or
a concatenation of several), issues the rank's ``mpi4jax.sendrecv``, ``send`` or ``recv`` of each
round in the plan's order, and splits what it received into segments. An
``optimization_barrier`` then keeps XLA from moving any of the step's writes (overwrite, or add
for reductions) before its reads. The whole schedule is one function of the rank's buffer,
donated, so it runs in place: call ``buf = run(buf)``. Cost per round: a copy of the payload into
a send buffer (one slice, or a concatenation), the MPI transfer, and one read-modify-write of
each received range.

:func:`native_compiled` is the MPI library's collective on the same data: ``mpi4jax.allreduce``
(MPI_Allreduce), ``reduce`` (MPI_Reduce), ``bcast`` (MPI_Bcast), ``allgather`` (MPI_Allgather),
``alltoall`` (MPI_Alltoall) inside ``jax.jit``, and, since mpi4jax has no reduce-scatter,
mpi4py's ``Reduce_scatter_block`` (MPI_Reduce_scatter_block) on host numpy buffers (not an
allreduce then a slice, which would cost twice the data).

This module imports mpi4py (which initializes MPI) and mpi4jax; the backend imports it only when
it builds a program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import mpi4jax
import numpy as np
from jax import lax
from mpi4py import MPI

from commsim.errors import CommsimError
from commsim.exec._backend import Compiled, blocking, uploaded
from commsim.exec._layout import Layout
from commsim.exec.mpi._plan import RankPlan, Round, Segment, StepPlan

__all__ = ["compiled", "native_compiled", "program"]

Body = Callable[[Any], Any]
Piece = tuple[Segment, Any]  # a value to write at a segment's destination, after the reads


def _read(buf: Any, segs: tuple[Segment, ...]) -> Any:
    """The segments' source ranges of ``buf``, concatenated."""
    parts = [lax.slice(buf, (s.src,), (s.src + s.length,)) for s in segs]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts)


def _split(got: Any, segs: tuple[Segment, ...]) -> list[Piece]:
    """A received payload cut back into its segments."""
    if len(segs) == 1:
        return [(segs[0], got)]
    pieces, at = [], 0
    for s in segs:
        pieces.append((s, got[at : at + s.length]))
        at += s.length
    return pieces


def _round(old: Any, rnd: Round, tag: int, comm: Any, dtype: np.dtype) -> tuple[list, list[Piece]]:
    """This rank's operation in round ``rnd``: the payloads it only sent, and what it received."""
    payload = _read(old, rnd.send.segments) if rnd.send is not None else None
    if rnd.recv is None:
        assert rnd.send is not None and payload is not None
        mpi4jax.send(payload, rnd.send.peer, tag=tag, comm=comm)
        return [payload], []
    like = jnp.empty((rnd.recv.size,), dtype)
    if rnd.send is not None:
        got = mpi4jax.sendrecv(
            payload, like, rnd.recv.peer, rnd.send.peer, sendtag=tag, recvtag=tag, comm=comm
        )
    else:
        got = mpi4jax.recv(like, rnd.recv.peer, tag=tag, comm=comm)
    return [], _split(got, rnd.recv.segments)


def _step(buf: Any, st: StepPlan, comm: Any, dtype: np.dtype) -> Any:
    """``buf`` after step ``st``: every read of the step (payloads, local sources), then writes."""
    old = buf
    sent: list[Any] = []
    pieces: list[Piece] = []
    for rnd in st.rounds:
        s, got = _round(old, rnd, st.tag, comm, dtype)
        sent += s
        pieces += got
    pieces += [(s, _read(old, (s,))) for s in st.local]
    values, buf, _ = lax.optimization_barrier(([v for _, v in pieces], old, sent))
    for (s, _), v in zip(pieces, values, strict=True):
        if s.reduce:
            v = lax.slice(buf, (s.dst,), (s.dst + s.length,)) + v
        buf = lax.dynamic_update_slice(buf, v, (s.dst,))
    return buf


def program(pl: RankPlan, comm: Any, dtype: np.dtype) -> Body:
    """The jittable function ``buf -> buf`` of plan ``pl`` (``buf`` is this rank's ``[nelems]``)."""

    def body(buf: Any) -> Any:
        for st in pl.steps:
            if st.rounds or st.local:
                buf = _step(buf, st, comm, dtype)
        return buf

    return body


def _row(host: Any, rank: int, dt: np.dtype, nelems: int) -> np.ndarray:
    """Rank ``rank``'s row of ``[p, nelems]`` host buffers (or a ``[nelems]`` buffer as is)."""
    a = np.asarray(host)
    if a.ndim == 2:
        a = a[rank]
    if a.shape != (nelems,):
        raise CommsimError(f"expected [p, {nelems}] or [{nelems}] buffers, got {a.shape}")
    return np.ascontiguousarray(a, dtype=dt)


def _gather(comm: Any, row: np.ndarray) -> np.ndarray:
    """Every rank's ``[nelems]`` row, on every rank: ``[p, nelems]``."""
    row = np.ascontiguousarray(row)
    out = np.empty((comm.Get_size(), row.shape[0]), dtype=row.dtype)
    comm.Allgather(row, out)
    return out


def compiled(pl: RankPlan, comm: Any, dtype: np.dtype, donate: bool) -> Compiled:
    """Plan ``pl`` jitted (compiled on the first ``run``); ``put`` keeps this rank's row,
    ``get`` gathers every rank's buffer (``[p, nelems]``, on every rank)."""
    # (called, not AOT-compiled: the ordered MPI effects add a token argument that only the
    # jitted function's own call path supplies; it compiles on first call)
    exe = jax.jit(program(pl, comm, dtype), donate_argnums=0 if donate else ())
    return Compiled(
        put=lambda host: uploaded(jax.device_put(_row(host, pl.rank, dtype, pl.nelems))),
        run=blocking(exe),
        get=lambda buf: _gather(comm, np.asarray(buf)),
    )


# a native collective: (comm, root, output length, dtype) -> (upload of the input, run)
Native = Callable[[Any, int, int, np.dtype], tuple[Callable[[Any], Any], Callable[[Any], Any]]]


def _jitted(op: Callable[[Any, Any, int], Any]) -> Native:
    """An mpi4jax collective ``op(x, comm, root)``, jitted, on device buffers."""

    def make(comm: Any, root: int, out_len: int, dt: np.dtype) -> tuple[Callable, Callable]:
        return (lambda x: uploaded(jax.device_put(x))), blocking(
            jax.jit(lambda x: op(x, comm, root))
        )

    return make


def _reduce_scatter_block(comm: Any, root: int, out_len: int, dt: np.dtype) -> tuple:
    """mpi4py's ``Reduce_scatter_block`` on host buffers (mpi4jax has no reduce-scatter)."""

    def run(x: np.ndarray) -> np.ndarray:
        out = np.empty(out_len, dtype=dt)
        comm.Reduce_scatter_block(x, out, op=MPI.SUM)
        return out

    return (lambda x: x), run


_NATIVE: dict[str, Native] = {
    "allreduce": _jitted(lambda x, comm, root: mpi4jax.allreduce(x, op=MPI.SUM, comm=comm)),
    "reduce": _jitted(lambda x, comm, root: mpi4jax.reduce(x, op=MPI.SUM, root=root, comm=comm)),
    "broadcast": _jitted(lambda x, comm, root: mpi4jax.bcast(x, root=root, comm=comm)),
    "allgather": _jitted(lambda x, comm, root: mpi4jax.allgather(x, comm=comm)),
    "alltoall": _jitted(  # as [p, block]
        lambda x, comm, root: mpi4jax.alltoall(x.reshape(comm.Get_size(), -1), comm=comm)
    ),
    "reduce_scatter": _reduce_scatter_block,
}


def native_compiled(
    collective: str, root: int, layout: Layout, comm: Any, dtype: np.dtype
) -> Compiled:
    """The library's ``collective`` on this rank's input; ``get`` puts the result where the
    schedule leaves it and gathers every rank's buffer. ``run`` does not consume its argument."""
    rank, n = comm.Get_rank(), layout.nelems
    out = layout.output_slice(rank)
    upload, run = _NATIVE[collective](comm, root, out.stop - out.start, dtype)

    def put(host: Any) -> Any:
        return upload(_row(host, rank, dtype, n)[layout.input_slice(rank)].copy())

    def get(result: Any) -> np.ndarray:
        row = np.zeros(n, dtype=dtype)
        row[out] = np.asarray(result).reshape(-1)
        return _gather(comm, row)

    return Compiled(put=put, run=run, get=get)
