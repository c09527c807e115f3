"""The program every rank runs under ``mpirun``: load, check and time schedules on MPI.

``python -m commsim.bench._mpi_worker CONFIG`` (started by :func:`commsim.bench.measure_mpi`),
where ``CONFIG`` is the path of a JSON object the launcher wrote:

============== =====================================================================
``schedules``  paths of the schedules to time, saved as NPZ (:func:`commsim.interop.write_npz`); each
               one's ``nranks`` is the number of processes
``request``    :meth:`commsim.bench.BenchRequest.to_dict`: sizes, dtype, iters, warmup,
               check, baseline, seed
``dir``        where rank 0 writes ``results.json`` and ``progress``, and a failing rank
               ``error-RANK.txt`` (default: the configuration's directory)
``fault``      for tests: ``{"rank": R, "action": "exit" | "sleep" | "raise",
               "at": "start" | "timing", "code": C, "seconds": S}``
============== =====================================================================

Schedules travel as files: the worker never builds one by name. Timing and checks are
:func:`commsim.bench._ranks.measure_ranks`' (a barrier before each run, the slowest rank's time
per run, rank 0's verdict broadcast). A rank that raises writes its error as one line and calls
``MPI_Abort``, so the other ranks never wait for it forever and the launcher can name it.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["main", "rank_main"]


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


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


class _FaultAtTiming:
    """The MPI timer, with the ``"timing"`` fault fired before the first timed run."""

    def __init__(self, timer: Any, config: dict[str, Any], rank: int) -> None:
        self.timer, self.config, self.rank = timer, config, rank

    def time(self, run: Callable[[Any], Any], buf: Any) -> tuple[Any, float]:
        _fault(self.config, self.rank, "timing")
        return self.timer.time(run, buf)

    def slowest(self, times: np.ndarray) -> np.ndarray:
        return self.timer.slowest(times)

    def verdict(self, compare: Callable[[], str | None]) -> str | None:
        return self.timer.verdict(compare)


def _progress(workdir: Path, rank: int) -> Callable[[int, int, Any], None] | None:
    """Rank 0 writes ``done<TAB>total<TAB>note`` after each measurement, for the progress bar."""
    if rank != 0:
        return None

    def done(k: int, total: int, m: Any) -> None:
        _write(workdir / "progress", f"{k}\t{total}\t{m.collective}/{m.algorithm} {m.nbytes} B\n")

    return done


def _run(config: dict[str, Any], workdir: Path, rank: int) -> None:
    """Load the schedules and the request, measure on every rank, rank 0 writes the results."""
    from commsim.bench._ranks import measure_ranks
    from commsim.bench._request import BenchRequest
    from commsim.bench._timer import MpiTimer
    from commsim.exec import get_backend
    from commsim.interop import read_npz

    _fault(config, rank, "start")
    request = BenchRequest.from_dict(config["request"])
    backend = get_backend(config.get("backend", "mpi"), **request.backend_options())
    schedules = [read_npz(p) for p in config["schedules"]]
    timer = _FaultAtTiming(MpiTimer(backend.comm), config, rank)
    results = measure_ranks(schedules, request, backend, timer, done=_progress(workdir, rank))
    if rank == 0:
        _write(workdir / "results.json", json.dumps([m.to_dict() for m in results]))


def rank_main(argv: list[str], body: Callable[[dict[str, Any], Path, Any], None]) -> int:
    """One rank of a module started by :func:`commsim.bench._launch.run_module`: read the
    configuration ``argv[0]``, run ``body(config, workdir, COMM_WORLD)``; on any error write it
    as one line to ``error-RANK.txt`` (for the launcher) and ``MPI_Abort`` (no rank waits)."""
    path = Path(argv[0])
    config = json.loads(path.read_text())
    workdir = Path(config.get("dir") or path.parent)
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    try:
        body(config, workdir, MPI.COMM_WORLD)
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


def main(argv: list[str] | None = None) -> int:
    """Entry point of one rank: run the configuration, write rank 0's results, or abort."""
    return rank_main(
        sys.argv[1:] if argv is None else argv,
        lambda config, workdir, world: _run(config, workdir, world.Get_rank()),
    )


if __name__ == "__main__":
    sys.exit(main())
