r"""The mpi4jax backend's device program: one rank's :class:`~commsim.exec.mpi._plan.RankPlan` as
one ``jax.jit`` function of its buffer, and the MPI library's own collectives.

The rank's ``[nelems]`` buffer is held as **chunks**, a tuple of arrays cut at every element
offset where the plan starts or ends a range it reads or writes (:func:`cuts`): ``put`` cuts it
(untimed), ``get`` joins it. Per step, :func:`program` takes every payload from the **pre-step**
chunks (a chunk as it is, or a concatenation when a message spans several), issues the rank's
``mpi4jax.sendrecv``, ``send`` or ``recv`` of each round in the plan's order, then writes what it
received and its local transfers: a received range *replaces* its chunks, a reduction adds into
them (a new array; several reductions into one place add up in order). The whole schedule is
one function of the chunks, donated: call ``chunks = run(chunks)``. The rounds of a wave (one
per channel, IR rule 6) are issued one after another too: mpi4jax's operations block, so a
rank's channels take turns here (:mod:`commsim.exec.mpi._host` runs them at once). Cost per round: the MPI
transfer, plus one elementwise add per reduced element; a message spanning several chunks adds
one copy into a send buffer. There is no ``dynamic_update_slice`` and no slice of a larger
buffer, on purpose: XLA's CPU fusion emitter (jaxlib 0.10) compiles an add into a static window
of a buffer as a loop over the *whole* buffer with masked loads, and under ``mpirun`` on this
machine that loop cost 3 ms at 1 MiB and 40 ms at 16 MiB where the transfer takes 0.1 and 3 ms
(``docs/where-the-time-goes.md``).

``repeat(chunks, k)`` is the same program in a ``lax.fori_loop`` of ``k`` runs (one dispatch for
``k`` runs, as nccl-tests times); :func:`idle` is a program that moves nothing through the same
path, whose time is the executor's own overhead. :func:`stepped` is the same program cut at
step boundaries, one jitted function per step, for a run that reads the clock between steps
(a trace: :func:`commsim.bench.trace_mpi`); it is not the timed program (a step's ranks
synchronize with the host between steps, which the fused program never does).

:func:`native_compiled` is the MPI library's collective on the same data: ``mpi4jax.allreduce``
(MPI_Allreduce), ``reduce`` (MPI_Reduce), ``bcast`` (MPI_Bcast), ``allgather`` (MPI_Allgather),
``alltoall`` (MPI_Alltoall) inside ``jax.jit``, and, since mpi4jax has no reduce-scatter,
mpi4py's ``Reduce_scatter_block`` (MPI_Reduce_scatter_block) on host numpy buffers (not an
allreduce then a slice, which would cost twice the data).

With a wire format (:mod:`commsim._wire`), a round's payload is encoded before it is sent and
decoded after it arrives, so the receiver adds in the buffer's dtype: fp16 and bf16 travel as
their bits in ``uint16`` (MPI and mpi4jax have no 16-bit float type), int8 as ``int8`` followed
by a second message of its float32 chunk scales, same peers, same tag, same order on every
rank of the round (MPI's non-overtaking rule keeps the pairs matched, and each round is then two
rounds of the same matching, so the deadlock-freedom argument of the plan holds for each).

This module imports mpi4py (which initializes MPI) and mpi4jax; the backend imports it only when
it builds a program.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mpi4jax
import numpy as np
from jax import lax
from mpi4py import MPI

from commsim._wire import CHUNK, Wire
from commsim.exec._aligned import aligned_copy, aligned_zeros
from commsim.exec._backend import Compiled, blocking, rank_row, uploaded
from commsim.exec._layout import Layout
from commsim.exec.mpi._host import _gather
from commsim.exec.mpi._plan import RankPlan, Round, Segment, StepPlan

__all__ = ["Stepped", "compiled", "cuts", "idle", "native_compiled", "program", "stepped"]

Body = Callable[[Any], Any]
Chunks = tuple[Any, ...]  # this rank's buffer, cut at every boundary the plan ever reads or writes


def cuts(pl: RankPlan) -> np.ndarray:
    """Where this rank's buffer is cut into chunks: ``0``, ``nelems`` and every end of a range the
    plan reads (its sends' and local transfers' sources) or writes (receives' and local
    transfers' destinations), sorted. Every such range is then a run of whole chunks.

    Examples:
        >>> import commsim
        >>> from commsim.exec import layout
        >>> from commsim.exec.mpi import plan
        >>> s = commsim.build("allreduce", "ring", nranks=2)
        >>> [pl] = plan(s, layout(s, 8), ranks=[0])
        >>> cuts(pl).tolist()
        [0, 4, 8]
    """
    ends = {0, pl.nelems}
    for st in pl.steps:
        ranges = [(s.src, s.length) for r in st.rounds if r.send for s in r.send.segments]
        ranges += [(s.dst, s.length) for r in st.rounds if r.recv for s in r.recv.segments]
        ranges += [(a, s.length) for s in st.local for a in (s.src, s.dst)]
        ends.update(e for a, n in ranges for e in (a, a + n))
    return np.array(sorted(ends), dtype=np.int64)


class _Cut:
    """Element ranges ``[a, a + n)`` of the buffer as runs of chunks ``[i, j)``."""

    def __init__(self, ends: np.ndarray) -> None:
        self.ends = ends
        self.index = {int(e): i for i, e in enumerate(ends.tolist())}

    def chunks(self, a: int, n: int) -> range:
        return range(self.index[a], self.index[a + n])

    def read(self, chunks: Chunks, a: int, n: int) -> Any:
        """Elements ``[a, a + n)``: the chunk itself (no copy) or a concatenation."""
        parts = [chunks[i] for i in self.chunks(a, n)]
        return parts[0] if len(parts) == 1 else jnp.concatenate(parts)

    def write(self, chunks: list[Any], a: int, value: Any, reduce: bool) -> None:
        """Overwrite (or add ``value`` to) elements ``[a, a + len(value))``, chunk by chunk."""
        at = 0
        for i in self.chunks(a, value.shape[0]):
            n = int(self.ends[i + 1] - self.ends[i])
            part = value if n == value.shape[0] else value[at : at + n]
            chunks[i] = chunks[i] + part if reduce else part
            at += n


def _payload(cut: _Cut, old: Chunks, segs: tuple[Segment, ...]) -> Any:
    """A message's payload: its segments' source ranges, concatenated (one chunk: no copy)."""
    parts = [cut.read(old, s.src, s.length) for s in segs]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts)


def _bits(x: Any) -> Any:
    """A 16-bit float as ``uint16`` bits (what MPI can send); anything else as it is."""
    return lax.bitcast_convert_type(x, jnp.uint16) if x.dtype.itemsize == 2 else x


def _exchange(rnd: Round, payload: Any, like: Any, tag: int, comm: Any) -> Any:
    """One array of this rank's round: sent, received, or both (``like``: what arrives)."""
    if rnd.recv is None:
        mpi4jax.send(payload, rnd.send.peer, tag=tag, comm=comm)
        return None
    if rnd.send is not None:
        return mpi4jax.sendrecv(
            payload, like, rnd.recv.peer, rnd.send.peer, sendtag=tag, recvtag=tag, comm=comm
        )
    return mpi4jax.recv(like, rnd.recv.peer, tag=tag, comm=comm)


def _wired(rnd: Round, payload: Any, tag: int, comm: Any, dtype: np.dtype, wire: Wire) -> Any:
    """Round ``rnd`` with its payload in wire format ``wire``: encoded, sent (one message per
    part, in the same order on both ends), received and decoded into ``dtype``."""
    sent = wire.encode(payload[None, :], jnp) if payload is not None else None
    n = rnd.recv.size if rnd.recv is not None else 0
    shapes = [((1, n), jnp.dtype(wire.payload_dtype(jnp)))]
    if wire.scaled:
        shapes.append(((1, -(-n // CHUNK)), jnp.dtype(np.float32)))
    got = []
    for k, (shape, dt) in enumerate(shapes):
        like = _bits(jnp.empty(shape, dt))
        part = _exchange(rnd, None if sent is None else _bits(sent[k]), like, tag, comm)
        if part is not None:
            got.append(lax.bitcast_convert_type(part, dt) if dt.itemsize == 2 else part)
    return wire.decode(tuple(got), dtype, jnp)[0] if rnd.recv is not None else None


def _round(
    cut: _Cut, old: Chunks, rnd: Round, tag: int, comm: Any, dtype: np.dtype, wire: Wire | None
) -> list:
    """This rank's operation in round ``rnd``; what it received, as ``(segment, value)``."""
    payload = _payload(cut, old, rnd.send.segments) if rnd.send is not None else None
    if wire is not None:
        got = _wired(rnd, payload, tag, comm, dtype, wire)
    else:
        got = _exchange(rnd, payload, jnp.empty((rnd.recv.size,), dtype) if rnd.recv else None,
                        tag, comm)  # fmt: skip
    if rnd.recv is None:
        return []
    if len(rnd.recv.segments) == 1:
        return [(rnd.recv.segments[0], got)]
    pieces, at = [], 0
    for s in rnd.recv.segments:
        pieces.append((s, got[at : at + s.length]))
        at += s.length
    return pieces


def _step(
    cut: _Cut, old: Chunks, st: StepPlan, comm: Any, dtype: np.dtype, wire: Wire | None = None
) -> Chunks:
    """The chunks after step ``st``: every read of the step (from ``old``), then the writes."""
    pieces = []
    for rnd in st.rounds:
        pieces += _round(cut, old, rnd, st.tag, comm, dtype, wire)
    pieces += [(s, cut.read(old, s.src, s.length)) for s in st.local]
    new = list(old)
    for s, v in pieces:
        cut.write(new, s.dst, v, s.reduce)
    return tuple(new)


def program(pl: RankPlan, comm: Any, dtype: np.dtype, wire: Wire | None = None) -> Body:
    """The jittable function ``chunks -> chunks`` of plan ``pl``: this rank's ``[nelems]``
    buffer held as the pieces between :func:`cuts`, so that XLA never copies or rewrites the
    whole buffer (a slice to send is a chunk as it is, a received range replaces chunks, a
    reduction adds into them; no ``dynamic_update_slice``); messages in wire format ``wire``."""
    cut = _Cut(cuts(pl))

    def body(chunks: Chunks) -> Chunks:
        for st in pl.steps:
            if st.rounds or st.local:
                chunks = _step(cut, chunks, st, comm, dtype, wire)
        return chunks

    return body


class Stepped(NamedTuple):
    """A rank's program one step at a time: ``put`` and ``get`` as :class:`Compiled`'s, and
    ``steps``, per step with work on this rank (rounds or local transfers), its index and a
    blocking ``run(chunks) -> chunks``, in schedule order (every rank walks its steps in that
    order, which keeps the plan's deadlock-freedom argument)."""

    put: Callable[[Any], Any]
    steps: tuple[tuple[int, Callable[[Any], Any]], ...]
    get: Callable[[Any], np.ndarray]


def stepped(pl: RankPlan, comm: Any, dtype: np.dtype, wire: Wire | None = None) -> Stepped:
    """Plan ``pl`` as one jitted function per step (each compiled on its first call), so that
    a caller can read the clock between steps; the buffers are the chunks of :func:`compiled`."""
    ends = cuts(pl)
    cut = _Cut(ends)

    def one(st: StepPlan) -> Callable[[Any], Any]:
        return blocking(jax.jit(lambda chunks: _step(cut, chunks, st, comm, dtype, wire)))

    steps = tuple((i, one(st)) for i, st in enumerate(pl.steps) if st.rounds or st.local)

    def put(host: Any) -> Chunks:
        row = rank_row(host, pl.rank, dtype, pl.nelems)
        return uploaded(tuple(jax.device_put(row[a:b]) for a, b in itertools.pairwise(ends)))

    def get(chunks: Chunks) -> np.ndarray:
        return _gather(comm, np.concatenate([np.asarray(c) for c in chunks]))

    return Stepped(put, steps, get)


def compiled(
    pl: RankPlan, comm: Any, dtype: np.dtype, donate: bool, wire: Wire | None = None
) -> Compiled:
    """Plan ``pl`` jitted (compiled on the first ``run``); ``put`` cuts this rank's row into
    chunks (untimed), ``get`` joins them and gathers every rank's buffer (``[p, nelems]``)."""
    # (called, not AOT-compiled: the ordered MPI effects add a token argument that only the
    # jitted function's own call path supplies; it compiles on first call)
    ends = cuts(pl)
    body = program(pl, comm, dtype, wire)
    exe = jax.jit(body, donate_argnums=0 if donate else ())
    many = jax.jit(
        lambda chunks, k: lax.fori_loop(0, k, lambda _, c: body(c), chunks),
        donate_argnums=0 if donate else (),
    )

    def put(host: Any) -> Chunks:
        row = rank_row(host, pl.rank, dtype, pl.nelems)
        return uploaded(tuple(jax.device_put(row[a:b]) for a, b in itertools.pairwise(ends)))

    return Compiled(
        put=put,
        run=blocking(exe),
        get=lambda chunks: _gather(comm, np.concatenate([np.asarray(c) for c in chunks])),
        repeat=blocking(many),
    )


def idle(comm: Any, dtype: np.dtype) -> Compiled:
    """A run that moves nothing through the same path as :func:`compiled`'s: one jitted call
    holding one ordered MPI effect (a zero-element ``sendrecv`` of the rank with itself), so it
    pays what every program pays per call (JAX's dispatch with the effects token,
    ``block_until_ready``) and, in ``repeat``, per run (a loop iteration, one custom call)."""
    rank = comm.Get_rank()

    def body(chunks: Chunks) -> Chunks:
        (x,) = chunks
        return (mpi4jax.sendrecv(x, x, rank, rank, comm=comm),)

    exe = jax.jit(body, donate_argnums=0)
    many = jax.jit(lambda c, k: lax.fori_loop(0, k, lambda _, y: body(y), c), donate_argnums=0)
    return Compiled(
        put=lambda host: uploaded((jax.device_put(np.zeros(0, dtype)),)),
        run=blocking(exe),
        get=lambda chunks: np.zeros((comm.Get_size(), 0), dtype),
        repeat=blocking(many),
    )


# a native collective: (comm, root, output length, dtype) -> (upload of the input, run, repeat)
Native = Callable[[Any, int, int, np.dtype], tuple[Callable, Callable, Callable | None]]


def _jitted(op: Callable[[Any, Any, int], Any], chains: bool = True) -> Native:
    """An mpi4jax collective ``op(x, comm, root)``, jitted, on device buffers; ``repeat`` (when
    the output has the input's size, ``chains``) runs it ``k`` times in one call, each run on
    the previous output."""

    def make(comm: Any, root: int, out_len: int, dt: np.dtype) -> tuple:
        def once(x: Any) -> Any:
            return op(x, comm, root)

        def many(x: Any, k: Any) -> Any:
            return lax.fori_loop(0, k, lambda _, y: once(y).reshape(y.shape), x)

        repeat = blocking(jax.jit(many)) if chains else None
        return (lambda x: uploaded(jax.device_put(x))), blocking(jax.jit(once)), repeat

    return make


def _reduce_scatter_block(comm: Any, root: int, out_len: int, dt: np.dtype) -> tuple:
    """mpi4py's ``Reduce_scatter_block`` on page-aligned host buffers (mpi4jax has no
    reduce-scatter), as the mpi4py executor's baseline runs it: a run and the timed repeats
    write output buffers allocated and touched before them, so no page fault is timed (a run
    is timed alone where it lasts long enough)."""
    out, timed = aligned_zeros(out_len, dt), aligned_zeros(out_len, dt)

    def run(x: np.ndarray) -> np.ndarray:
        comm.Reduce_scatter_block(x, out, op=MPI.SUM)
        return out

    def repeat(x: np.ndarray, k: int) -> np.ndarray:
        for _ in range(k):
            comm.Reduce_scatter_block(x, timed, op=MPI.SUM)
        return timed

    return aligned_copy, run, repeat


_NATIVE: dict[str, Native] = {
    "allreduce": _jitted(lambda x, comm, root: mpi4jax.allreduce(x, op=MPI.SUM, comm=comm)),
    "reduce": _jitted(lambda x, comm, root: mpi4jax.reduce(x, op=MPI.SUM, root=root, comm=comm)),
    "broadcast": _jitted(lambda x, comm, root: mpi4jax.bcast(x, root=root, comm=comm)),
    "allgather": _jitted(lambda x, comm, root: mpi4jax.allgather(x, comm=comm), chains=False),
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
    upload, run, repeat = _NATIVE[collective](comm, root, out.stop - out.start, dtype)

    def put(host: Any) -> Any:
        return upload(rank_row(host, rank, dtype, n)[layout.input_slice(rank)].copy())

    def get(result: Any) -> np.ndarray:
        row = np.zeros(n, dtype=dtype)
        row[out] = np.asarray(result).reshape(-1)
        return _gather(comm, row)

    return Compiled(put=put, run=run, get=get, repeat=repeat)
