"""Starting ``mpirun`` for the MPI backend, and collecting what the ranks measured.

:func:`measure_mpi` saves each schedule as NPZ (:func:`commsim.interop.write_npz`) into a temporary
directory, writes the worker's JSON configuration beside them (the schedule files, the request
as a dict) and runs ``mpirun -n p python -m commsim.bench._mpi_worker CONFIG`` (``mpirun`` from
the interpreter's directory, else ``PATH``) once, in its own process group, with a timeout.
Schedules travel as files: the ranks load them and never build anything by name.

Failures are one line, never a hang: a run past the timeout ends in ``mpirun timed out after N s
(deadlock or hung rank?)`` with every process killed (SIGTERM to the group, SIGKILL after 5 s);
a rank that raises is named with its error (``rank 1 failed: ...``, from the error file it writes
before ``MPI_Abort``); a rank that dies is named with its exit code or signal, read from
``mpirun``'s log (MPICH is asked for ``-print-all-exitcodes``). The log rides along on the error
(``error.log``) for diagnosis. While it runs, rank 0's progress file feeds a progress bar.

This side only looks for the packages and ``mpirun``; it never initializes MPI itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from commsim._ir import Schedule
from commsim._progress import Progress
from commsim.bench._measurement import Measurement
from commsim.bench._ranks import check_mpi_request
from commsim.bench._request import BenchRequest
from commsim.errors import CommsimError
from commsim.exec import BACKENDS, backend_info
from commsim.interop import write_npz

__all__ = ["DEFAULT_TIMEOUT", "measure_mpi", "run_module", "run_worker"]

DEFAULT_TIMEOUT = 300.0
_EXIT_CODES = re.compile(r"Exit codes: \[[^\]]*\] ([-\d,]+)")
_ABORT = re.compile(r"MPI_Abort\([^)]*\)[^\n]*? process (\d+)")


def measure_mpi(
    schedules: Sequence[Schedule],
    request: BenchRequest,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | None = None,
    backend: str = "mpi",
) -> list[Measurement]:
    """Time ``schedules`` on ``p`` MPI processes started by one ``mpirun -n p``.

    ``backend`` is the executor on the ranks: ``"mpi"`` (mpi4jax inside ``jax.jit``),
    ``"mpi4py"`` (mpi4py on numpy buffers, :class:`commsim.exec.mpi.HostMpiBackend`) or
    ``"shmem"`` (one-sided puts with signals, :class:`commsim.exec.shmem.ShmemBackend`).

    All schedules must have the same ``nranks`` (``p``). Bad requests (mixed rank counts, a dtype
    MPI does not run, a size too small for a schedule) are refused before any process starts;
    then a one-line :class:`CommsimError` when MPI is missing, when a rank fails (naming it), or
    when the run exceeds ``timeout`` seconds (every process is killed).

    Returns:
        One :class:`Measurement` per schedule and size, schedule-major, size-minor; each time is
        the slowest rank's.
    """
    schedules = list(schedules)
    if not backend_info(backend).multiprocess:
        able = [n for n, row in BACKENDS.items() if row.multiprocess]
        mpirun = ", ".join(able[:-1]) + f" or {able[-1]}" if len(able) > 1 else "".join(able)
        raise CommsimError(f"measure_mpi runs {mpirun}, not {backend!r}")
    check_mpi_request(schedules, request)
    return run_worker(schedules, request, timeout=timeout, progress=progress, backend=backend)


def run_worker(
    schedules: Sequence[Schedule],
    request: BenchRequest,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | None = None,
    fault: dict[str, Any] | None = None,
    backend: str = "mpi",
) -> list[Measurement]:
    """:func:`measure_mpi` without its checks on this side (the ranks refuse bad requests).

    ``fault`` is the worker's test hook (:mod:`commsim.bench._mpi_worker`).
    """
    if not schedules:
        raise CommsimError("give at least one schedule to measure")
    with tempfile.TemporaryDirectory(prefix="commsim-mpi-") as tmp:
        work = Path(tmp)
        config = _config(work, schedules, request, fault)
        config["backend"] = backend
        results = run_module(_WORKER, config, schedules[0].nranks, work, timeout, progress)
        return [Measurement(**m) for m in results]


def run_module(
    module: str,
    config: dict[str, Any],
    nprocs: int,
    work: Path,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | None = None,
) -> Any:
    """``mpirun -n nprocs python -m module CONFIG`` in ``work``: rank 0's ``results.json``.

    ``config`` (plus ``dir``: ``work``) is written to ``work/config.json``; the module's ranks
    write ``progress`` (``done<TAB>total<TAB>note``), ``results.json`` and, on failure,
    ``error-RANK.txt``. A failure is one :class:`CommsimError` naming the rank (the module
    docstring), with mpirun's log as ``error.log``.
    """
    from commsim.exec.mpi import find_mpirun, missing

    why = missing()
    if why:
        raise CommsimError(why)
    mpirun = find_mpirun()
    assert mpirun is not None
    path = work / "config.json"
    path.write_text(json.dumps({**config, "dir": str(work)}, indent=1))
    cmd = [*_mpirun_command(mpirun, nprocs), sys.executable, "-m", module, str(path)]
    rc = _run(cmd, work, nprocs, timeout, progress)
    text = (work / "mpirun.log").read_text(errors="replace")
    errors = {int(f.stem.split("-")[1]): f.read_text().strip() for f in work.glob("error-*.txt")}
    out = work / "results.json"
    if rc != 0 or errors or not out.exists():
        error = CommsimError(_who_failed(text, rc, errors))
        error.log = text  # type: ignore[attr-defined]  # the ranks' output, for diagnosis
        raise error
    return json.loads(out.read_text())


_WORKER = "commsim.bench._mpi_worker"


def _config(
    work: Path,
    schedules: Sequence[Schedule],
    request: BenchRequest,
    fault: dict[str, Any] | None,
) -> dict[str, Any]:
    """Save the schedules (NPZ) into ``work``; the worker's configuration."""
    paths = [str(write_npz(s, work / f"schedule-{i}.npz")) for i, s in enumerate(schedules)]
    config: dict[str, Any] = {"schedules": paths, "request": request.to_dict()}
    if fault:
        config["fault"] = dict(fault)
    return config


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the directory holding commsim/
    env["PYTHONPATH"] = os.pathsep.join(x for x in (root, env.get("PYTHONPATH")) if x)
    env.setdefault("JAX_PLATFORMS", "cpu")  # mpi4jax's CUDA bridge is optional
    env.setdefault("MPI4JAX_NO_WARN_JAX_VERSION", "1")
    return env


def _run(cmd: list[str], work: Path, nprocs: int, timeout: float, progress: bool | None) -> int:
    """Run ``cmd`` (``mpirun ...``) in its own process group; its exit status, or a timeout."""
    t0 = time.monotonic()
    with (
        open(work / "mpirun.log", "w") as log,
        Progress(1, f"mpirun -n {nprocs}", enabled=progress) as bar,
    ):
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_environment(),
            start_new_session=True,  # its own process group: killed as a whole on timeout
        )
        try:
            while True:
                try:
                    return proc.wait(timeout=0.25)
                except subprocess.TimeoutExpired:
                    if time.monotonic() - t0 > timeout:
                        _kill_group(proc)
                        raise CommsimError(
                            f"mpirun timed out after {timeout:g} s (deadlock or hung rank?)"
                        ) from None
                    _show_progress(work / "progress", bar)
        except BaseException:
            if proc.poll() is None:
                _kill_group(proc)
            raise


def _show_progress(path: Path, bar: Progress) -> None:
    try:
        done, total, note = path.read_text().split("\t", 2)
    except (OSError, ValueError):
        return
    bar.total = max(int(total), 1)
    bar.update(int(done) - bar.done, note=note.strip())


def _mpirun_command(mpirun: str, nprocs: int) -> list[str]:
    cmd = [mpirun]
    try:
        version = subprocess.run(
            [mpirun, "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    if "HYDRA" in version:  # MPICH: report every rank's exit status on failure
        cmd.append("-print-all-exitcodes")
    elif "Open MPI" in version or "OpenRTE" in version:
        cmd.append("--oversubscribe")
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
    return [*cmd, "-n", str(nprocs)]


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    """End ``mpirun`` and its ranks (its process group): SIGTERM, up to 5 s, then SIGKILL."""
    with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5.0)
    with contextlib.suppress(ProcessLookupError):  # stragglers, or an mpirun ignoring SIGTERM
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _who_failed(log: str, rc: int, errors: dict[int, str]) -> str:
    """One line naming the rank that failed, from the workers' error files and mpirun's log."""
    if errors:
        rank = min(errors)
        return f"rank {rank} failed: {errors[rank]}"
    m = _EXIT_CODES.search(log)
    if m:
        codes = [int(x) for x in m.group(1).split(",") if x]
        exited = [(r, c >> 8) for r, c in enumerate(codes) if c and c & 0x7F == 0]
        killed = [(r, c & 0x7F) for r, c in enumerate(codes) if c and c & 0x7F]
        if exited:
            r, code = exited[0]
            return f"rank {r} exited with code {code}"
        # ranks killed by mpirun's cleanup get SIGTERM/SIGKILL too; other signals come first
        killed.sort(key=lambda rc_: rc_[1] in (signal.SIGTERM, signal.SIGKILL))
        if killed:
            r, sig = killed[0]
            return f"rank {r} was killed by {_signal_name(sig)}"
    m = _ABORT.search(log)
    if m:
        return f"rank {m.group(1)} called MPI_Abort"
    last = [line.strip() for line in log.splitlines() if line.strip()]
    return f"mpirun exited with code {rc}" + (f": {last[-1]}" if last else "")
