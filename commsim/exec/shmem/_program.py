r"""The one-sided backend's program: one rank's :class:`~commsim.exec.shmem._plan.RankPuts` as
MPI-3 RMA calls (mpi4py) on a numpy buffer.

Two windows per program, made by ``MPI_Win_allocate`` (collective: every rank compiles the same
schedules in the same order, as every rank of an MPI program calls the same collectives) and
opened once for passive-target access (``MPI_Win_lock_all``), never fenced:

* the **staging** window, :attr:`~commsim.exec.shmem._plan.RankPuts.staging` elements of the
  buffer's dtype (symmetric: the same size on every rank), where puts land;
* the **signal** window, ``2 p`` ``int64`` counters (arrivals per sender, then credits per
  target; :mod:`commsim.exec.shmem._plan`).

A step, as the plan orders it: ``MPI_Put`` of each segment straight from the rank's buffer (a
view, no packing) into the target's staging; one ``MPI_Win_flush_all`` (the puts are complete
at their targets); ``MPI_Accumulate(MPI_SUM)`` of the step's message count into each target's
signal, ``MPI_Win_flush_all``; then the waits, a loop of ``MPI_Get_accumulate(MPI_NO_OP)`` on
the rank's own signal window (an atomic read, which MPI orders with the accumulates, and a call
into the library, which drives its progress) until every counter has its value; then the
writes from staging: ``numpy.copyto`` or ``numpy.add(..., out=...)`` in place.

Reductions are the target's, after the signal: the sender puts into the staging region and the
target adds, rather than ``MPI_Accumulate(MPI_SUM)`` into the destination. An accumulate is
element-atomic, which costs (MPICH runs it in software, through the target's progress engine,
on most transports) and buys nothing here (a destination gets one message per step and per
channel); staging keeps overwrite and reduce on one path, lets a destination that the step
still reads receive in the same step (the IR's read-before-write), and adds in the same order
as the two-sided executors, so results are bit-for-bit the same. It is also what NVSHMEM offers:
puts are plain copies, and reductions of received data are the receiver's kernel's.

How it maps to NVSHMEM (and OpenSHMEM 1.5 signals): the staging window is a symmetric
allocation (``nvshmem_malloc``); a put followed by its signal is
``nvshmem_putmem_signal_nbi(dest, src, nbytes, sig_addr, count, NVSHMEM_SIGNAL_ADD, pe)``, which
delivers the signal only after the data (here: ``MPI_Win_flush`` before the ``MPI_Accumulate``);
a signal wait is ``nvshmem_signal_wait_until(sig_addr, NVSHMEM_CMP_GE, value)`` (here: the
polling loop); credits are the same two calls in the other direction; ``MPI_Win_lock_all`` once
is NVSHMEM's always-open symmetric heap.

A wait longer than ``timeout`` seconds (``None``: no limit) raises a one-line
:class:`~commsim.errors.CommsimError` naming the rank, the step and the peer it waits for, so a
dead or hung peer ends the run with an error (``mpirun`` itself is ended by the launcher's
timeout, :mod:`commsim.bench._launch`). Windows live until :func:`free_windows` (collective) or
the interpreter's exit, where they are freed before MPI is finalized.

This module imports mpi4py (which initializes MPI); the backend imports it only when it builds a
program.
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from commsim.errors import CommsimError
from commsim.exec._backend import Compiled, rank_row
from commsim.exec.shmem._plan import RankPuts, Segment, StepPuts

__all__ = ["Signals", "compiled", "free_windows", "idle"]

_LIVE: list[Any] = []  # windows, in the order every rank made them


def _allocate(comm: Any, nelems: int, dt: np.dtype) -> tuple[Any, np.ndarray]:
    """A window of ``nelems`` elements (at least one) on every rank, locked for passive
    access; its local memory as a numpy array."""
    win = MPI.Win.Allocate(max(nelems, 1) * dt.itemsize, dt.itemsize, comm=comm)
    _LIVE.append(win)
    win.Lock_all()
    return win, np.frombuffer(win.tomemory(), dtype=dt)


def free_windows() -> None:
    """Unlock and free every window the programs made (collective: call on every rank; the
    programs cannot run after it)."""
    while _LIVE:
        win = _LIVE.pop(0)
        win.Unlock_all()
        win.Free()


@atexit.register
def _at_exit() -> None:  # before mpi4py finalizes MPI (atexit runs in reverse order)
    if _LIVE and MPI.Is_initialized() and not MPI.Is_finalized():
        free_windows()


class Signals:
    """This rank's ``2 p`` signal counters: raise a peer's, wait on its own.

    Args:
        comm: the communicator (collective: the window is made here).
        timeout: seconds a wait may last (``None``: no limit).
    """

    def __init__(self, comm: Any, timeout: float | None = None) -> None:
        self.rank, self.nranks = comm.Get_rank(), comm.Get_size()
        self.timeout = timeout
        self.win, local = _allocate(comm, 2 * self.nranks, np.dtype(np.int64))
        local[:] = 0
        self.win.Sync()
        comm.Barrier()  # zeroed everywhere before anyone signals
        self._seen = np.zeros(2 * self.nranks, dtype=np.int64)
        self._none = np.zeros(2 * self.nranks, dtype=np.int64)

    def add(self, peer: int, slot: int, value: np.ndarray) -> None:
        """Add ``value`` (a one-element ``int64`` array, left untouched until :meth:`flush`:
        MPI reads it after the call) to counter ``slot`` of ``peer``."""
        self.win.Accumulate(value, peer, target=(slot,), op=MPI.SUM)

    def flush(self) -> None:
        self.win.Flush_all()

    def poll(self) -> np.ndarray:
        """This rank's counters, read atomically."""
        self.win.Get_accumulate(self._none, self._seen, self.rank, op=MPI.NO_OP)
        self.win.Flush_local(self.rank)
        return self._seen

    def wait(self, slots: np.ndarray, want: np.ndarray, step: int, what: str) -> None:
        """Until ``counter[slots] >= want``; a one-line error after :attr:`timeout` seconds."""
        if not len(slots):
            return
        t0 = None
        while True:
            seen = self.poll()[slots]
            if (seen >= want).all():
                return
            if self.timeout is not None:
                now = time.monotonic()
                t0 = now if t0 is None else t0
                if now - t0 > self.timeout:
                    peer = int(slots[np.argmax(seen < want)]) % self.nranks
                    raise CommsimError(
                        f"rank {self.rank} waited {self.timeout:g} s in step {step} for {what} "
                        f"of rank {peer} (is it dead or hung?)"
                    )


def _write(buf: np.ndarray, s: Segment, value: np.ndarray) -> None:
    dst = buf[s.dst : s.dst + s.length]
    if s.reduce:
        np.add(dst, value, out=dst)
    else:
        np.copyto(dst, value)


def _gather(comm: Any, row: np.ndarray) -> np.ndarray:
    """Every rank's ``[nelems]`` row, on every rank: ``[p, nelems]``."""
    out = np.empty((comm.Get_size(), row.shape[0]), dtype=row.dtype)
    comm.Allgather(np.ascontiguousarray(row), out)
    return out


Step = Callable[[np.ndarray, int], None]


def _step(
    k: int, st: StepPuts, pl: RankPuts, win: Any, stage: np.ndarray, sig: Signals, dt: np.dtype
) -> Step:
    """Step ``k`` of the plan as a function of the rank's buffer and the run's index."""
    p, r = pl.nranks, pl.rank
    credit = {t: np.array([p + t], dtype=np.int64) for t in st.first}  # slots waited on
    senders = np.array([s for s, _ in st.waits], dtype=np.int64)
    counts = np.array([c for _, c in st.waits], dtype=np.int64)
    per_run = pl.per_run[senders] if len(senders) else np.zeros(0, np.int64)
    local = [(s, np.empty(s.length, dt)) for s in st.local]
    signals = [(t, np.array([n], dtype=np.int64)) for t, n in st.signals]
    one = np.ones(1, dtype=np.int64)

    def step(buf: np.ndarray, run: int) -> None:
        for m in st.puts:
            if run and m.peer in credit:  # the target has read our previous run's data
                sig.wait(credit[m.peer], np.array([run]), k, "the credit")
            at = m.offset
            for s in m.segments:
                win.Put(buf[s.src : s.src + s.length], m.peer, target=(at,))
                at += s.length
        if st.puts:
            win.Flush_all()
            for t, n in signals:
                sig.add(t, r, n)
            sig.flush()
        sig.wait(senders, run * per_run + counts, k, "the signal")
        if st.arrivals:  # MPI-3 passive target: make the puts visible to this rank's own loads
            win.Sync()
        for s, tmp in local:  # read before any write of the step
            np.copyto(tmp, buf[s.src : s.src + s.length])
        for m in st.arrivals:
            at = m.offset
            for s in m.segments:
                _write(buf, s, stage[at : at + s.length])
                at += s.length
        for s, tmp in local:
            _write(buf, s, tmp)
        if st.credits:
            win.Sync()  # our loads of the staging are done before the senders may overwrite it
            for s in st.credits:
                sig.add(s, p + r, one)
            sig.flush()

    return step


def compiled(pl: RankPuts, comm: Any, dtype: np.dtype, timeout: float | None = None) -> Compiled:
    """Plan ``pl`` as puts with signals (collective: makes two windows on every rank).

    ``put`` copies this rank's row (untimed), ``run`` runs the schedule in place and returns the
    buffer, ``repeat(buf, k)`` is ``k`` runs (no barrier between them: credits order them),
    ``get`` gathers every rank's buffer (``[p, nelems]``).
    """
    dt = np.dtype(dtype)
    win, stage = _allocate(comm, pl.staging, dt)
    sig = Signals(comm, timeout)
    steps = [
        _step(k, st, pl, win, stage, sig, dt)
        for k, st in enumerate(pl.steps)
        if st.puts or st.arrivals or st.local
    ]
    runs = [0]

    def run(buf: np.ndarray) -> np.ndarray:
        e = runs[0]
        for step in steps:
            step(buf, e)
        runs[0] = e + 1
        return buf

    def repeat(buf: np.ndarray, k: int) -> np.ndarray:
        for _ in range(int(k)):
            run(buf)
        return buf

    return Compiled(
        put=lambda host: rank_row(host, pl.rank, dt, pl.nelems).copy(),
        run=run,
        get=lambda buf: _gather(comm, buf),
        repeat=repeat,
    )


def idle(comm: Any, dtype: np.dtype) -> Compiled:
    """A run that moves nothing through this executor's path: one atomic read of the rank's
    own signals (``MPI_Get_accumulate`` + ``MPI_Win_flush_local``), the per-run overhead."""
    sig = Signals(comm)

    def run(buf: np.ndarray) -> np.ndarray:
        sig.poll()
        return buf

    def repeat(buf: np.ndarray, k: int) -> np.ndarray:
        for _ in range(int(k)):
            sig.poll()
        return buf

    return Compiled(
        put=lambda host: np.zeros(0, dtype),
        run=run,
        get=lambda buf: np.zeros((comm.Get_size(), 0), dtype),
        repeat=repeat,
    )
