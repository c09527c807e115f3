"""The MPI transport's microbenchmarks, as every rank runs them under ``mpirun`` (mpi4py, numpy).

``python -m commsim.bench.calibrate._mpi_bench CONFIG`` (started by
:func:`commsim.bench.calibrate.mpi_samples`). The transport is timed the way the OSU
micro-benchmarks time it: mpi4py on numpy buffers, no JAX in the loop, so the numbers are MPI's,
not an executor's. Each repeat times ``inner`` back-to-back operations (chosen so one repeat lasts
about a millisecond, the same count on every rank) and divides; the repeats give the median and
the spread.

=============  =======================================================================
``pingpong``   rank 0 sends, rank 1 sends back; half the round trip (``osu_latency``)
``exchange``   every pair ``(2i, 2i+1)`` ``Sendrecv`` s at once: a schedule's step, all
               pairs sharing the memory system; each sends what it received in the repeat
               before, as a collective's step sends data just written (received, reduced or
               computed), never a buffer both cores still hold in their caches
``step``       every pair at once, recursive doubling's step: ``Sendrecv`` the buffer, then
               ``numpy.add`` what arrived into it, so each repeat sends what the one before
               reduced; the models read ``step − exchange`` as what a reduction costs inside
               a step (:meth:`commsim.profiles.Profile.step_reduction`)
``burst``      rank 0 sends ``k`` messages back to back (``Isend`` … ``Waitall``), rank 1
               answers with one empty message; the per-message gap is
               :math:`(T_k - T_1) / (k - 1)`, with ``k = 16`` up to 16 MiB and fewer
               above, at most 256 MiB in flight (:func:`burst_count`)
``overhead``   rank 0's time inside one ``Send`` of an eager-size message (LogGP's o)
``reduction``  ``numpy.add(a, b, out=a)`` over ``size`` bytes of float32 on every rank at
               once (γ): an allreduce step reduces on every rank together, so they share
               the memory system as the ``exchange`` pairs do
``call``       each MPI executor's run that moves nothing (mpi4jax's, ``mpi``, and
               mpi4py's on numpy, ``mpi4py``), timed as the measurement loop times a
               schedule (:mod:`commsim.bench._overhead`): its per-run overhead
=============  =======================================================================

Every buffer starts on a page, as the OSU micro-benchmarks allocate theirs
(:mod:`commsim.exec._aligned`: a step's time changed 2× with its buffer's alignment). Ranks past
the ones a benchmark needs wait at the barriers. Rank 0 writes the samples (JSON)
and a progress file; a rank that raises writes its error and calls ``MPI_Abort``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from commsim.exec import aligned_zeros

__all__ = ["MPI_KINDS", "burst_count", "main"]

#: the kinds this suite measures, in this order (the table above)
MPI_KINDS = ("pingpong", "exchange", "step", "burst", "overhead", "reduction", "call")

_TARGET = 1e-3  # seconds one repeat should last
_PROBE = 2e-4  # seconds the probe that sets the count must last (_inner)
_INNER_MAX = 1000  # operations per repeat at most
_BURST = 16  # messages in a burst, at most ...
_BURST_BYTES = 256 * 2**20  # ... and at most this many bytes in flight (burst_count)
_EAGER_MAX = 4096  # overhead: only sizes sent eagerly (Send returns before delivery)


def _inner(comm: Any, op: Any) -> int:
    """Back-to-back operations per repeat: about :data:`_TARGET` of them, the same count on
    every rank. The rate comes from a probe that doubles its count until it lasts
    :data:`_PROBE` (as ``timeit``'s autorange does), each step's continue-or-stop decided by
    rank 0 for everyone: a probe of one operation, cold and dominated by the barrier's exit,
    read 20-250 µs for an 8-byte exchange that takes 2, so the count came out anywhere from 4
    to 48, and the per-operation times with it (2.0-3.2 µs). The count that reached
    :data:`_PROBE` runs once more and the faster of the two sets the rate, so one interrupted
    probe does not either."""

    def timed(k: int) -> float:
        comm.Barrier()
        t0 = time.perf_counter()
        op(k)
        return time.perf_counter() - t0

    k = 1
    while not comm.bcast((spent := timed(k)) >= _PROBE or k >= _INNER_MAX, root=0):
        k *= 2
    if comm.bcast(spent / k < _TARGET, root=0):  # else one operation it is, whatever again says
        spent = min(spent, timed(k))  # twice: one hiccup cannot set the count
    per = comm.bcast(spent / k, root=0)
    return int(min(max(_TARGET / max(per, 1e-9), 1), _INNER_MAX))


def _repeats(comm: Any, op: Any, repeats: int, warmup: int) -> list[float]:
    """``repeats`` times per operation (after ``warmup`` untimed), the slowest rank's each."""
    from mpi4py import MPI

    inner = _inner(comm, op)
    for _ in range(warmup):
        op(inner)
    out = np.empty(repeats)
    for j in range(repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        op(inner)
        out[j] = (time.perf_counter() - t0) / inner
    slowest = np.empty_like(out)
    comm.Allreduce(out, slowest, op=MPI.MAX)
    return slowest.tolist()


def _pingpong(comm: Any, n: int) -> Any:
    rank = comm.Get_rank()
    buf = aligned_zeros(n, np.uint8)

    def op(k: int) -> None:
        for _ in range(k):
            if rank == 0:
                comm.Send(buf, 1, 1)
                comm.Recv(buf, 1, 1)
            elif rank == 1:
                comm.Recv(buf, 0, 1)
                comm.Send(buf, 0, 1)

    return op, 0.5  # one-way: half of what op times


def _exchange(comm: Any, n: int) -> Any:
    rank, size = comm.Get_rank(), comm.Get_size()
    peer = rank ^ 1
    bufs = [aligned_zeros(n, np.uint8), aligned_zeros(n, np.uint8)]
    active = peer < size

    def op(k: int) -> None:
        if active:
            for _ in range(k):  # send what arrived last time: data this core just wrote
                comm.Sendrecv(bufs[0], peer, 2, bufs[1], peer, 2)
                bufs.reverse()

    return op, 1.0


def _step(comm: Any, n: int) -> Any:
    """Every pair at once: ``Sendrecv`` the buffer, add what arrived into it (float32 zeros,
    so the values never grow); the next repeat sends what this one reduced."""
    rank, size = comm.Get_rank(), comm.Get_size()
    peer = rank ^ 1
    buf = aligned_zeros(max(n // 4, 1), np.float32)
    got = aligned_zeros(buf.shape, np.float32)
    active = peer < size

    def op(k: int) -> None:
        if active:
            for _ in range(k):
                comm.Sendrecv(buf, peer, 6, got, peer, 6)
                np.add(buf, got, out=buf)

    return op, 1.0


def burst_count(n: int) -> int:
    """Messages in a burst of ``n``-byte messages: 16, fewer where 16 would put more than
    256 MiB in flight (at least 2). Past a few MiB a message's latency is a small part of its
    time, so a few messages measure the gap as well as 16 do; 16 × 64 MiB took half of a
    calibration's time (9 of 25 s, two ranks) and held 1 GiB on each rank.

    Examples:
        >>> burst_count(8), burst_count(16 * 2**20), burst_count(32 * 2**20), burst_count(2**30)
        (16, 16, 8, 2)
    """
    return max(2, min(_BURST, _BURST_BYTES // max(n, 1)))


def _burst(comm: Any, n: int, count: int) -> Any:
    rank = comm.Get_rank()
    bufs = (
        [aligned_zeros(n, np.uint8) for _ in range(count)] if rank < 2 else []
    )  # the two that send
    ack = np.zeros(0, np.uint8)

    def op(k: int) -> None:
        for _ in range(k):
            if rank == 0:
                reqs = [comm.Isend(b, 1, 3) for b in bufs]
                from mpi4py import MPI

                MPI.Request.Waitall(reqs)
                comm.Recv(ack, 1, 4)
            elif rank == 1:
                from mpi4py import MPI

                reqs = [comm.Irecv(b, 0, 3) for b in bufs]
                MPI.Request.Waitall(reqs)
                comm.Send(ack, 0, 4)

    return op, 1.0


def _overhead(comm: Any, n: int) -> Any:
    """Rank 0's time inside ``Send`` of an eager message; rank 1 receives them afterwards."""
    rank = comm.Get_rank()
    buf = aligned_zeros(n, np.uint8)

    def op(k: int) -> float:
        spent = 0.0
        if rank == 0:
            for _ in range(k):
                t0 = time.perf_counter()
                comm.Send(buf, 1, 5)
                spent += time.perf_counter() - t0
        elif rank == 1:
            for _ in range(k):
                comm.Recv(buf, 0, 5)
        return spent

    return op


def _reduce(comm: Any, n: int) -> Any:
    """Every rank reduces its own ``n`` bytes at once (the slowest rank's time counts): a
    reduce-scatter or allreduce step has every rank reduce together, and one rank alone would
    have the memory bandwidth to itself."""
    a = aligned_zeros(max(n // 4, 1), np.float32)
    a.fill(1.0)
    b = aligned_zeros(a.shape, np.float32)
    b.fill(1.0)

    def op(k: int) -> None:
        for _ in range(k):
            np.add(a, b, out=a)
            a[:1] = 1.0  # keep the values small; one element, negligible

    return op, 1.0


def _one(comm: Any, kind: str, n: int, repeats: int, warmup: int) -> list[float]:
    """``repeats`` times of ``kind`` at ``n`` bytes (after ``warmup`` untimed)."""
    if kind == "overhead":
        op = _overhead(comm, n)
        for _ in range(warmup):
            op(10)
        inner = 100
        return comm.bcast([op(inner) / inner for _ in range(repeats)], root=0)
    if kind == "burst":
        k = burst_count(n)
        op_k, _ = _burst(comm, n, k)
        op_1, _ = _burst(comm, n, 1)
        t_k = np.array(_repeats(comm, op_k, repeats, warmup))
        t_1 = np.array(_repeats(comm, op_1, repeats, warmup))
        return np.maximum((t_k - t_1) / (k - 1), 1e-12).tolist()
    makers = {"pingpong": _pingpong, "exchange": _exchange, "step": _step, "reduction": _reduce}
    make = makers[kind]
    op, scale = make(comm, n)
    return [scale * x for x in _repeats(comm, op, repeats, warmup)]


def _measure(
    comm: Any,
    per_kind: dict[str, list[int]],
    repeats: int,
    warmup: int,
    blocks: int,
    tick: Any,
) -> list[dict]:
    """Every kind's repeats at every size, taken in ``blocks`` interleaved passes over all the
    kinds and sizes (block-major columns): each block spans the whole run, so a disturbance that
    lasts seconds (another virtual machine on the host drawing on the memory system) lands in
    some blocks of every kind, where the block bootstrap sees it, instead of in every block of
    the one kind measured meanwhile. Each pass warms each size up again, the first with
    ``warmup`` runs, later ones with one."""
    rows = {k: [[] for _ in sizes] for k, sizes in per_kind.items()}
    per = repeats // blocks
    for b in range(blocks):
        for kind, sizes in per_kind.items():
            for i, n in enumerate(sizes):
                rows[kind][i] += _one(comm, kind, n, per, warmup if b == 0 else min(warmup, 1))
                tick(f"{kind} {n} B, pass {b + 1} of {blocks}")
    return [
        {"kind": k, "sizes": sizes, "times": rows[k], "blocks": blocks}
        for k, sizes in per_kind.items()
    ]


def _calls(comm: Any, repeats: int) -> list[dict]:
    """Each MPI executor's per-run overhead, timed exactly as the measurement loop times a
    schedule (:mod:`commsim.bench._overhead`)."""
    from commsim.bench._overhead import call_samples
    from commsim.exec.mpi import HostMpiBackend, MpiBackend

    out = []
    for executor in (MpiBackend(comm), HostMpiBackend(comm)):
        s = call_samples(executor, comm.Get_size(), iters=max(repeats, 20))
        out.append(
            {"kind": "call", "sizes": [0], "times": s.times.tolist(), "notes": [f"{executor.name} executor: {n}" for n in s.notes],
             "executor": executor.name}
        )  # fmt: skip
    return out


def _run(config: dict[str, Any], workdir: Path, comm: Any) -> None:
    rank = comm.Get_rank()
    kinds, sizes = config["kinds"], [int(s) for s in config["sizes"]]
    repeats, warmup = int(config["repeats"]), int(config["warmup"])
    blocks = int(config.get("blocks", 1))
    per_kind = {
        k: [s for s in sizes if s <= _EAGER_MAX] if k == "overhead" else sizes
        for k in kinds
        if k != "call"
    }
    per_kind = {k: v for k, v in per_kind.items() if v}
    total = blocks * sum(len(v) for v in per_kind.values()) + ("call" in kinds)
    done = [0]

    def tick(note: str) -> None:
        done[0] += 1
        if rank == 0:
            _write(workdir / "progress", f"{done[0]}\t{total}\t{note}\n")

    out = _measure(comm, per_kind, repeats, warmup, blocks, tick)
    if "call" in kinds:
        out += _calls(comm, repeats)
        tick("call")
    if rank == 0:
        order = {k: i for i, k in enumerate(kinds)}
        _write(workdir / "results.json", json.dumps(sorted(out, key=lambda d: order[d["kind"]])))


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    """Entry point of one rank (errors: one line for the launcher, then ``MPI_Abort``)."""
    from commsim.bench._mpi_worker import rank_main

    return rank_main(
        sys.argv[1:] if argv is None else argv,
        lambda config, workdir, world: _run(config, workdir, world.Clone()),
    )


if __name__ == "__main__":
    sys.exit(main())
