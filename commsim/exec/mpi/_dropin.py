r"""A schedule as a collective inside the caller's own mpi4jax program: :func:`collective`.

Every rank of a communicator calls the drop-in on its own pytree, eagerly or inside
``jax.jit``; each leaf's result equals the MPI library's collective on the same data (a
drop-in for ``mpi4jax.allreduce(x, op=MPI.SUM, comm=comm)``, which returns the reduced array).
The rank's program is the MPI backend's (:func:`commsim.exec.mpi._program.program`, planned
for this rank with :func:`commsim.exec.mpi.plan`): ``sendrecv`` / ``send`` / ``recv`` per
round, deadlock-free by construction, on the buffer held as chunks. Pytrees, dtype groups,
buckets, packing and ``mean`` are :class:`commsim.exec._dropin.TreeCollective`'s, shared with
the JAX drop-in; per leaf the semantics are those of :mod:`commsim.exec.jax._dropin`'s table
(allreduce as ``MPI_Allreduce``, allgather stacked or tiled, reduce-scatter and alltoall by
blocks of the leading dimension, broadcast from the schedule's root).

**Communicator.** The drop-in talks on a private duplicate of ``comm`` (``comm.Clone()``, made
once, collectively, when the drop-in is created on every rank), so its messages, tagged by
step, never match the application's own. ``comm``'s size must be the schedule's ``p``.

**Alignment.** The packing pads every slot to a multiple of :attr:`MpiCollective.align_bytes`
(8 bytes): a chunk cut at an odd float32 offset cost more than the padding's one copy.

**Copies.** The packed buffer is cut into the plan's chunks (slices of the packing
``concatenate``, which XLA fuses: one write of the buffer), and the output leaves are sliced
from the chunks (one read). For one array whose size the schedule's units divide, that is one
copy in and one out, the price of holding the buffer as chunks (the backend's ``put`` and
``get`` do the same outside the timed run).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from commsim._ir import Schedule
from commsim.errors import ParameterError
from commsim.exec._dropin import TreeCollective, Tuner
from commsim.exec._layout import Layout
from commsim.exec.mpi._backend import DTYPES
from commsim.exec.mpi._plan import RankPlan, plan

__all__ = ["MpiCollective", "collective"]


class MpiCollective(TreeCollective):
    """A collective over the ranks of an MPI communicator (see :func:`collective`)."""

    backend = "mpi"
    dtypes = DTYPES
    #: slots of a multiple of 8 bytes: cuts between chunks on 4-byte (odd float32) offsets made
    #: a 20 MiB ring allreduce on 2 ranks 1.6-2x slower than on 8-byte ones, more than the pad
    #: costs (measured; ``docs/benchmarks.md``, "Static windows")
    align_bytes = 8

    def __init__(self, schedule: Schedule | str, comm: Any = None, **options: Any) -> None:
        super().__init__(schedule, **options)
        if comm is None:
            from mpi4py import MPI

            comm = MPI.COMM_WORLD
        size = int(comm.Get_size())
        if size != self.nranks:  # checked on every rank before the collective Clone
            raise ParameterError(
                f"{self.collective} {self._what()} is for p={self.nranks} ranks but the "
                f"communicator has {size}; start it with `mpirun -n {self.nranks}`"
            )
        self.comm = comm.Clone()
        self.rank = int(self.comm.Get_rank())

    def _size(self) -> int:
        return int(self.comm.Get_size())

    def _where(self) -> str:
        return "a communicator"

    def _rank(self) -> int:
        return self.rank

    def _plan(self, schedule: Schedule, lay: Layout) -> RankPlan:
        def make() -> RankPlan:
            [pl] = plan(schedule, lay, ranks=[self.rank])
            return pl

        return self._cache.get(schedule, ("plan", lay.count), make)

    def _run(self, schedule: Schedule, lay: Layout, buf: Any) -> Any:
        import jax.numpy as jnp

        from commsim.exec.mpi._program import cuts, program

        pl = self._plan(schedule, lay)
        ends = cuts(pl)
        chunks = tuple(buf[a:b] for a, b in itertools.pairwise(ends.tolist()))
        chunks = program(pl, self.comm, np.dtype(buf.dtype), self.wire)(chunks)
        return chunks[0] if len(chunks) == 1 else jnp.concatenate(chunks)

    def free(self) -> None:
        """Free the private communicator (collective: call on every rank, once no call runs)."""
        self.comm.Free()


def collective(
    schedule: Schedule | str,
    comm: Any = None,
    *,
    mean: bool = False,
    tiled: bool = False,
    bucket_bytes: int | str | None = None,
    tuner: Tuner | None = None,
    collective: str | None = None,
    compression: str | None = None,
    error_feedback: bool | None = None,
) -> MpiCollective:
    """``schedule`` as a function of a pytree, called on every rank of ``comm`` (jittable).

    Create it on every rank (it duplicates ``comm``, a collective call); call ``g(tree)`` on
    every rank with trees of the same structure and shapes. ``tree`` is any pytree of arrays
    (the dtypes of :data:`commsim.exec.mpi.DTYPES`); the result has the same structure, each
    leaf the collective's result for this rank.

    Args:
        schedule: a :class:`commsim.Schedule` for ``p = comm.size`` ranks, or ``"auto"`` to ask
            ``tuner`` for one per call by the packed size in bytes.
        comm: an ``mpi4py`` communicator (default ``MPI.COMM_WORLD``).
        mean: divide a reduction's result by ``p`` (floating dtypes only).
        tiled: allgather only: concatenate along axis 0 (``True``) or stack (``False``).
        bucket_bytes: pack leaves into buckets of at most this many bytes (an int or a size
            string), one schedule call each; ``None``: one call per dtype.
        tuner: for ``"auto"``: a table with ``collective``, ``nranks``, ``schedule(nbytes)``.
        collective: the collective expected (checked against the schedule or the tuner).
        compression: send every message as ``"fp16"``, ``"bf16"`` or ``"int8"`` (per-chunk
            scale) and add in the leaf's dtype (reductions of float leaves).
        error_feedback: keep the quantisation error of each call's input and add it to the
            next (default: on for int8); under ``jit``, ``out, residual = g.feedback(tree,
            residual)`` (:class:`commsim.exec._dropin.TreeCollective`).

    Example, on every rank of ``mpirun -n 4 python train.py``:

    .. code-block:: python

        from mpi4py import MPI

        g = collective(commsim.build("allreduce", "ring", nranks=4), MPI.COMM_WORLD, mean=True)
        grads = jax.jit(g)(grads)  # for mpi4jax.allreduce(x, op=MPI.SUM, comm=comm) / 4, leafwise
    """
    return MpiCollective(
        schedule,
        comm,
        mean=mean,
        tiled=tiled,
        bucket_bytes=bucket_bytes,
        tuner=tuner,
        collective=collective,
        compression=compression,
        error_feedback=error_feedback,
    )
