"""The program every rank runs under ``mpirun``: build, check and time schedules on MPI.

``python -m commsim.exec._mpi_worker CONFIG`` (started by :func:`commsim.exec.mpi_launch.run_mpirun`),
where ``CONFIG`` is a JSON object:

============== =====================================================================
``rows``       ``[[collective, algorithm, params], ...]``, or ``"all"``: every registry row
``root``       root of broadcast/reduce rows (default 0)
``sizes``      message sizes in bytes (nccl-tests ``nbytes``), rounded down to the slots
``units``      instead of ``sizes``: one size of ``units`` elements per slot unit, per row
``dtype``      element type (default ``float32``)
``iters``      timed runs per size (default 20), after ``warmup`` untimed ones (default 5)
``check``      compare one run per size (and the baseline's) with the reference (default true)
``baseline``   also time the MPI library's collective (default true)
``dir``        where rank 0 writes ``results.json`` and ``progress``, and a failing rank
               ``error-RANK.txt``
``fault``      for tests: ``{"rank": R, "action": "exit" | "sleep" | "raise",
               "at": "start" | "timing", "code": C, "seconds": S}``
============== =====================================================================

Timing (as in :mod:`commsim.exec.harness`, but across processes): each run starts after a
barrier; a run's time is the slowest rank's (an ``MPI_MAX`` reduction of the per-rank times at
the end); median, min, max and spread over ``iters`` runs. The schedule's runs and the
baseline's alternate, so both see the same machine. The check runs once per size from fresh
inputs (the same seeded inputs on every rank): the buffers are gathered, rank 0 compares them
with the reference interpreter and broadcasts its verdict. A rank that raises writes its error
and calls ``MPI_Abort``, so the other ranks never wait for it forever.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["main", "run_in_place"]


def _rows(config: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    from commsim.algorithms import REGISTRY

    rows = config.get("rows", "all")
    if rows == "all":
        return [(c, n, {}) for c, n in REGISTRY]
    return [(c, n, dict(params or {})) for c, n, params in rows]


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _timed(run: Any, buf: Any, comm: Any) -> tuple[Any, float]:
    comm.Barrier()
    t0 = time.perf_counter()
    out = run(buf)
    return out, time.perf_counter() - t0


def _measure(
    schedule: Any, backend: Any, size: int, config: dict[str, Any], units: int | None
) -> dict[str, Any]:
    """Check and time ``schedule`` at one size; the :class:`Measurement` as a dict (all ranks)."""
    from mpi4py import MPI

    from commsim.errors import CommsimError
    from commsim.exec._execute import check_outputs, random_inputs
    from commsim.exec._layout import layout
    from commsim.exec.harness import Measurement, layout_for_size

    comm = backend.comm
    dt = np.dtype(config.get("dtype", "float32"))
    iters, warmup = int(config.get("iters", 20)), int(config.get("warmup", 5))
    if units is not None:
        lay = layout(schedule, schedule.nbytes_units * units)
        size = lay.count * dt.itemsize
    else:
        lay = layout_for_size(schedule, size, dt)
    inputs = random_inputs(lay, dt, seed=int(config.get("seed", 0)))
    compiled = backend.compile(schedule, lay, dt)
    native = backend.native(schedule, lay, dt) if config.get("baseline", True) else None
    found = []
    if config.get("check", True):
        for what, c in (("schedule", compiled), ("native", native)):
            if c is None:
                continue
            out = c.get(c.run(c.put(lay.pack(inputs))))  # gathered on every rank
            error = None
            if backend.rank == 0:
                try:
                    check_outputs(schedule, lay, inputs, lay.unpack(out))
                except CommsimError as e:
                    error = f"{what}: {e}"
            error = comm.bcast(error, root=0)
            if error:
                found.append(error)
    _fault(config, backend.rank, "timing")
    host = lay.pack(inputs)
    buf = compiled.put(host)
    nbuf = native.put(host) if native is not None else None
    times = np.zeros(iters)
    ntimes = np.zeros(iters)
    for i in range(warmup + iters):
        buf, t = _timed(compiled.run, buf, comm)
        nt = _timed(native.run, nbuf, comm)[1] if native is not None else 0.0
        if i >= warmup:
            times[i - warmup], ntimes[i - warmup] = t, nt
    del buf, nbuf
    both = np.stack([times, ntimes])
    slowest = np.empty_like(both)
    comm.Allreduce(both, slowest, op=MPI.MAX)
    times, ntimes = slowest
    return Measurement.from_times(
        schedule,
        "mpi",
        lay,
        dt,
        size=size,
        warmup=warmup,
        times=times,
        native_times=ntimes if native is not None else None,
        native=backend.native_name(schedule.collective) if native is not None else None,
        check=("FAILED" if found else "ok") if config.get("check", True) else "skipped",
        error="; ".join(found) or None,
    ).to_dict()


def run_in_place(config: dict[str, Any], backend: Any) -> list[dict[str, Any]]:
    """Run ``config`` on this rank (every rank calls it); the results on rank 0, ``[]`` elsewhere.

    Schedules are built for ``p`` = the communicator's size.
    """
    from commsim.algorithms import build

    p, rank = backend.size, backend.rank
    rows = _rows(config)
    units = config.get("units")
    sizes = [None] if units is not None else [int(s) for s in config["sizes"]]
    progress = Path(config["dir"]) / "progress" if config.get("dir") and rank == 0 else None
    total, done, results = len(rows) * len(sizes), 0, []
    for collective, algorithm, params in rows:
        kw = dict(params)
        if collective in ("broadcast", "reduce"):
            kw["root"] = int(config.get("root", 0))
        schedule = build(collective, algorithm, p, **kw)
        for size in sizes:
            m = _measure(schedule, backend, size or 0, config, units)
            results.append(m)
            done += 1
            if progress is not None:
                _write(progress, f"{done}\t{total}\t{collective}/{algorithm} {m['nbytes']} B\n")
    return results if rank == 0 else []


def _fault(config: dict[str, Any], rank: int, at: str) -> None:
    """Test hooks: make one rank die, hang or raise, at ``"start"`` or before the ``"timing"``."""
    fault = config.get("fault") or {}
    if fault.get("rank") != rank or fault.get("at", "start") != at:
        return
    action = fault.get("action")
    if action == "exit":
        os._exit(int(fault.get("code", 3)))
    if action == "sleep":
        time.sleep(float(fault.get("seconds", 3600)))
    if action == "raise":
        raise RuntimeError(f"fault injected on rank {rank}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of one rank: run the configuration, write rank 0's results, or abort."""
    argv = sys.argv[1:] if argv is None else argv
    config = json.loads(argv[0])
    workdir = Path(config.get("dir") or ".")
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    try:
        from commsim.exec.mpi import MpiBackend

        _fault(config, rank, "start")
        backend = MpiBackend()
        why = backend.unavailable()
        if why:
            raise RuntimeError(why)
        results = run_in_place(config, backend)
        if rank == 0:
            _write(workdir / "results.json", json.dumps(results))
        return 0
    except BaseException as e:  # one line for the launcher, the traceback for the log
        from commsim.errors import CommsimError

        line = " ".join(str(e).split())
        if not isinstance(e, CommsimError):
            line = f"{type(e).__name__}: {line}".rstrip(": ")
        try:
            _write(workdir / f"error-{rank}.txt", line + "\n")
        finally:
            traceback.print_exc()
            sys.stderr.flush()
            MPI.COMM_WORLD.Abort(1)
        return 1


if __name__ == "__main__":
    sys.exit(main())
