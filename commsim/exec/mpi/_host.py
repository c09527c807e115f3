r"""The host executor of the MPI backend: one rank's plan as mpi4py calls on a numpy buffer.

The same :class:`~commsim.exec.mpi._plan.RankPlan` the mpi4jax program lowers (the same rounds in
the same order, so the same deadlock-freedom argument), run the way a C MPI library runs its own
algorithms and the OSU micro-benchmarks time a transport: ``MPI_Sendrecv`` / ``MPI_Send`` /
``MPI_Recv`` through mpi4py straight on the rank's ``[nelems]`` numpy buffer, reductions as
``numpy.add(..., out=...)`` in place. Nothing passes through JAX or XLA, so a measurement is the
schedule's transfers and reductions on this transport, with no executor of ours in between;
beside the mpi4jax program's time (``--backend mpi``) it says what that executor adds
(``docs/validation.md``).

The step's semantics are the IR's (all reads of a step before its writes, overwrite or add):

* a send reads the buffer itself (one contiguous segment: a view, no copy; several: packed
  into a send buffer), and the buffer is not written until the step's rounds are over;
* a receive lands in a scratch buffer, or straight in its destination when it is one segment
  that overwrites a range no send or local transfer of the same step reads;
* after the rounds, received ranges are written (copied, or added with ``numpy.add``) in the
  plan's order, then local transfers (their sources read before any write of the step).

Channels (IR rule 6) run at once: the rounds of one **wave** of the plan are on different
channels, so where a rank takes part in several rounds of a wave it posts them all with
non-blocking ``Irecv`` then ``Isend`` (to several peers at once) and waits for them with one
``Waitall``; a wave in which it has one round is the blocking call above. Each channel keeps
its round order (its ``j``-th round is in wave ``j``), and the plan's module states why this
cannot deadlock either (:mod:`commsim.exec.mpi._plan`).

Scratch buffers are allocated once per program (:func:`compiled`), so a timed run allocates
nothing; every buffer starts on a page (:mod:`commsim.exec._aligned`: where a buffer starts
changed a step's time by 2× on a 2-vCPU machine), as the OSU micro-benchmarks allocate theirs.
A message is a range of the buffer, so it starts on a cache line only where its offset is a
multiple of 64 bytes (every message of a power-of-two size on a power-of-two rank count; a
ring on 3 ranks cuts 64 KiB at 20 and 40 bytes past a line), while ``calibrate`` times
aligned messages. ``run`` works in place on the buffer ``put`` returns (``buf = run(buf)``, as the
donated mpi4jax program); ``repeat(buf, k)`` is ``k`` runs, one Python loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from commsim.exec._aligned import aligned_copy, aligned_empty
from commsim.exec._backend import Compiled, rank_row
from commsim.exec._layout import Layout
from commsim.exec.mpi._plan import RankPlan, Round, Segment, StepPlan

__all__ = ["compiled", "idle"]

Op = Callable[[np.ndarray], None]


def _touched(st: StepPlan) -> list[tuple[int, int]]:
    """Element ranges ``[a, b)`` the step reads (its sends' and local transfers' sources) or
    writes (every destination): a receive that lands in place must not meet one of them."""
    out = [(s.src, s.src + s.length) for r in st.rounds if r.send for s in r.send.segments]
    out += [(s.dst, s.dst + s.length) for r in st.rounds if r.recv for s in r.recv.segments]
    return out + [(a, a + s.length) for s in st.local for a in (s.src, s.dst)]


def _in_place(segs: tuple[Segment, ...], touched: list[tuple[int, int]]) -> bool:
    """A receive can land in its destination: one overwriting segment whose range meets no
    other range the step touches (its own destination appears once in ``touched``)."""
    if len(segs) != 1 or segs[0].reduce:
        return False
    a, b = segs[0].dst, segs[0].dst + segs[0].length
    return sum(a < hi and lo < b for lo, hi in touched) == 1


def _step(st: StepPlan, comm: Any, dt: np.dtype) -> Op:
    """One step of the plan as a function of the rank's buffer (scratch made here, once)."""
    touched = _touched(st)
    calls: list[Op] = []
    writes: list[tuple[Segment, np.ndarray | None, int]] = []  # (segment, scratch, offset)
    for wave in _waves(st.rounds):
        ops = []
        for rnd in wave:
            send_segs = rnd.send.segments if rnd.send is not None else ()
            packed = (
                aligned_empty(sum(s.length for s in send_segs), dt) if len(send_segs) > 1 else None
            )
            direct = rnd.recv is not None and _in_place(rnd.recv.segments, touched)
            scratch = None
            if rnd.recv is not None and not direct:
                scratch = aligned_empty(rnd.recv.size, dt)
                at = 0
                for s in rnd.recv.segments:
                    writes.append((s, scratch, at))
                    at += s.length
            ops.append((rnd, packed, scratch, direct))
        if len(ops) == 1:
            rnd, packed, scratch, direct = ops[0]
            calls.append(_round(rnd, comm, st.tag, packed, scratch, direct))
        else:
            calls.append(_wave(ops, comm, st.tag))
    local = [(s, aligned_empty(s.length, dt)) for s in st.local]

    def step(buf: np.ndarray) -> None:
        for call in calls:
            call(buf)
        for s, tmp in local:  # read before any write of the step
            np.copyto(tmp, buf[s.src : s.src + s.length])
        for s, scratch, at in writes:
            _write(buf, s, scratch[at : at + s.length])  # type: ignore[index]
        for s, tmp in local:
            _write(buf, s, tmp)

    return step


def _waves(rounds: tuple[Round, ...]) -> list[list[Round]]:
    """This rank's rounds, grouped by wave (the plan lists them wave by wave)."""
    out: list[list[Round]] = []
    for rnd in rounds:
        if out and out[-1][0].wave == rnd.wave:
            out[-1].append(rnd)
        else:
            out.append([rnd])
    return out


def _write(buf: np.ndarray, s: Segment, value: np.ndarray) -> None:
    dst = buf[s.dst : s.dst + s.length]
    if s.reduce:
        np.add(dst, value, out=dst)
    else:
        np.copyto(dst, value)


def _payload(send: Any, packed: np.ndarray | None) -> Callable[[np.ndarray], np.ndarray]:
    """The send buffer of message ``send``: a view of its one segment, or packed."""

    def payload(buf: np.ndarray) -> np.ndarray:
        if packed is None:
            [s] = send.segments
            return buf[s.src : s.src + s.length]
        at = 0
        for s in send.segments:
            packed[at : at + s.length] = buf[s.src : s.src + s.length]
            at += s.length
        return packed

    return payload


def _target(recv: Any, scratch: np.ndarray | None, direct: bool) -> Callable[[np.ndarray], Any]:
    """Where message ``recv`` lands: its destination range (``direct``) or its scratch."""

    def target(buf: np.ndarray) -> np.ndarray:
        if direct:
            [s] = recv.segments
            return buf[s.dst : s.dst + s.length]
        assert scratch is not None
        return scratch

    return target


def _round(
    rnd: Any, comm: Any, tag: int, packed: np.ndarray | None, scratch: np.ndarray | None,
    direct: bool,
) -> Op:  # fmt: skip
    """The round's MPI call on the buffer: ``Sendrecv``, ``Send`` or ``Recv``."""
    send, recv = rnd.send, rnd.recv
    payload = _payload(send, packed) if send is not None else None
    target = _target(recv, scratch, direct) if recv is not None else None
    if payload is not None and target is not None:
        return lambda buf: comm.Sendrecv(payload(buf), send.peer, tag, target(buf), recv.peer, tag)
    if payload is not None:
        return lambda buf: comm.Send(payload(buf), send.peer, tag)
    assert target is not None
    return lambda buf: comm.Recv(target(buf), recv.peer, tag)


def _wave(
    ops: list[tuple[Any, np.ndarray | None, np.ndarray | None, bool]], comm: Any, tag: int
) -> Op:
    """Several rounds of one wave (one per channel) at once: every receive posted with
    ``Irecv``, every send with ``Isend``, in round order, then one ``Waitall``."""
    from mpi4py import MPI

    recvs = [(r.recv.peer, _target(r.recv, sc, d)) for r, _, sc, d in ops if r.recv is not None]
    sends = [(r.send.peer, _payload(r.send, pk)) for r, pk, _, _ in ops if r.send is not None]

    def wave(buf: np.ndarray) -> None:
        reqs = [comm.Irecv(target(buf), peer, tag) for peer, target in recvs]
        reqs += [comm.Isend(payload(buf), peer, tag) for peer, payload in sends]
        MPI.Request.Waitall(reqs)

    return wave


def compiled(pl: RankPlan, comm: Any, dtype: np.dtype) -> Compiled:
    """Plan ``pl`` on host buffers: ``put`` copies this rank's row (untimed), ``run`` runs the
    schedule in place and returns the buffer, ``get`` gathers every rank's (``[p, nelems]``)."""
    steps = [_step(st, comm, dtype) for st in pl.steps if st.rounds or st.local]

    def run(buf: np.ndarray) -> np.ndarray:
        for step in steps:
            step(buf)
        return buf

    return Compiled(
        put=lambda host: aligned_copy(rank_row(host, pl.rank, dtype, pl.nelems)),
        run=run,
        get=lambda buf: _gather(comm, buf),
        repeat=_repeating(run),
    )


def _repeating(run: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray, int], Any]:
    """``repeat(buf, k)``: ``k`` runs in place, one Python loop."""

    def repeat(buf: np.ndarray, k: int) -> np.ndarray:
        for _ in range(k):
            run(buf)
        return buf

    return repeat


def idle(comm: Any, dtype: np.dtype) -> Compiled:
    """A run that moves nothing through the host executor's path: one zero-element
    ``Sendrecv`` of the rank with itself (a Python call into mpi4py), the per-run overhead."""
    rank, empty = comm.Get_rank(), np.zeros(0, dtype)

    def run(buf: np.ndarray) -> np.ndarray:
        comm.Sendrecv(buf, rank, 0, empty, rank, 0)
        return buf

    return Compiled(
        put=lambda host: np.zeros(0, dtype),
        run=run,
        get=lambda buf: np.zeros((comm.Get_size(), 0), dtype),
        repeat=_repeating(run),
    )


def _gather(comm: Any, row: np.ndarray) -> np.ndarray:
    """Every rank's ``[nelems]`` row, on every rank: ``[p, nelems]``."""
    row = np.ascontiguousarray(row)
    out = np.empty((comm.Get_size(), row.shape[0]), dtype=row.dtype)
    comm.Allgather(row, out)
    return out


# the library's collective called directly, on host numpy buffers (mpi4py, as OSU calls it)
def _bcast(comm: Any, root: int, x: np.ndarray, out: np.ndarray) -> None:
    """MPI_Bcast works in place: the root's output buffer holds its input (one local copy)."""
    if comm.Get_rank() == root:
        out[:] = x
    comm.Bcast(out, root=root)


def _host_call(comm: Any, collective: str, root: int, out: np.ndarray) -> Callable:
    """``call(x)``: ``collective`` through mpi4py from ``x`` into ``out``."""
    from mpi4py import MPI

    p = comm.Get_size()
    calls: dict[str, Callable] = {
        "allreduce": lambda x: comm.Allreduce(x, out, op=MPI.SUM),
        "reduce": lambda x: comm.Reduce(x, out, op=MPI.SUM, root=root),
        "broadcast": lambda x: _bcast(comm, root, x, out),
        "allgather": lambda x: comm.Allgather(x, out),
        "alltoall": lambda x: comm.Alltoall(x.reshape(p, -1), out.reshape(p, -1)),
        "reduce_scatter": lambda x: comm.Reduce_scatter_block(x, out, op=MPI.SUM),
    }
    return calls[collective]


def host_compiled(
    collective: str, root: int, layout: Layout, comm: Any, dtype: np.dtype
) -> Compiled:
    """The library's ``collective`` through mpi4py on numpy buffers, outside JAX: what the
    transport itself costs for the same data (the OSU micro-benchmarks' way of calling it)."""
    rank, n = comm.Get_rank(), layout.nelems
    out_slice = layout.output_slice(rank)
    out = aligned_empty(out_slice.stop - out_slice.start, dtype)
    call = _host_call(comm, collective, root, out)

    def put(host: Any) -> np.ndarray:
        return aligned_copy(rank_row(host, rank, dtype, n)[layout.input_slice(rank)])

    def run(x: np.ndarray) -> np.ndarray:
        call(x)
        return out

    def repeat(x: np.ndarray, k: int) -> np.ndarray:  # back to back, timed like the others
        for _ in range(int(k)):
            call(x)
        return out

    def get(result: Any) -> np.ndarray:
        row = np.zeros(n, dtype=dtype)
        row[out_slice] = np.asarray(result).reshape(-1)
        return _gather(comm, row)

    return Compiled(put=put, run=run, get=get, repeat=repeat)
