"""Starting ``mpirun`` for the mpi4jax backend, and collecting what the ranks measured.

:func:`run_mpirun` runs ``mpirun -n p python -m commsim.exec._mpi_worker CONFIG`` (``mpirun`` from
the interpreter's directory, else ``PATH``) in its own process group, with a timeout: a hang ends
in ``mpirun timed out after N s (deadlock or hung rank?)`` with every process killed, and a rank
that dies or raises is named (``rank 1 exited with code 3``), never a hang. :func:`launch` is
``commsim run --backend mpi``: it starts ``mpirun`` itself, or, when the user already started the
command under ``mpirun``, runs in place on every rank and prints on rank 0.

This side only looks for the packages and ``mpirun``; it never initializes MPI itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from commsim.errors import CommsimError
from commsim.exec.mpi import MpiBackend, find_mpirun, missing

__all__ = ["DEFAULT_TIMEOUT", "WorkerResult", "launch", "run_mpirun", "under_mpirun"]

# ---------------------------------------------------------------------------------------------
# launch: `commsim run --backend mpi` starts mpirun, or runs as one rank under the user's mpirun

_MPI_ENV = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")
_EXIT_CODES = re.compile(r"Exit codes: \[[^\]]*\] ([-\d,]+)")
_ABORT = re.compile(r"MPI_Abort\([^)]*\)[^\n]*? process (\d+)")
DEFAULT_TIMEOUT = 300.0


def under_mpirun() -> bool:
    """Whether this process was started by an MPI launcher (its rank environment is set)."""
    return any(v in os.environ for v in _MPI_ENV)


class WorkerResult(NamedTuple):
    """What one ``mpirun`` of the worker gave back: rank 0's results and the launch log."""

    results: list[dict[str, Any]]
    log: str


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


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    """End ``mpirun`` and its ranks (its process group): SIGTERM, up to 5 s, then SIGKILL."""
    with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5.0)
    with contextlib.suppress(ProcessLookupError):  # stragglers, or an mpirun ignoring SIGTERM
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


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


def run_mpirun(
    config: dict[str, Any],
    nprocs: int,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool | None = None,
) -> WorkerResult:
    """Run ``mpirun -n nprocs python -m commsim.exec._mpi_worker CONFIG`` and collect results.

    ``config`` is the worker's JSON configuration (see :mod:`commsim.exec._mpi_worker`). Raises
    a one-line :class:`CommsimError` when MPI is missing, when a rank fails (naming it), or when
    the run exceeds ``timeout`` seconds (then every process is killed).
    """
    why = missing()
    if why:
        raise CommsimError(why)
    mpirun = find_mpirun()
    assert mpirun is not None
    import commsim
    from commsim._progress import Progress

    with tempfile.TemporaryDirectory(prefix="commsim-mpi-") as tmp:
        work = Path(tmp)
        cfg = {**config, "dir": str(work)}
        cmd = [
            *_mpirun_command(mpirun, nprocs),
            sys.executable,
            "-m",
            "commsim.exec._mpi_worker",
            json.dumps(cfg),
        ]
        env = dict(os.environ)
        root = str(Path(commsim.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(x for x in (root, env.get("PYTHONPATH")) if x)
        env.setdefault("JAX_PLATFORMS", "cpu")  # mpi4jax's CUDA bridge is optional
        env.setdefault("MPI4JAX_NO_WARN_JAX_VERSION", "1")
        logpath = work / "mpirun.log"
        t0 = time.monotonic()
        with open(logpath, "w") as log, Progress(1, f"mpirun -n {nprocs}", enabled=progress) as bar:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: killed as a whole on timeout
            )
            try:
                while True:
                    try:
                        rc = proc.wait(timeout=0.25)
                        break
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
        text = logpath.read_text(errors="replace")
        errors = {
            int(f.stem.split("-")[1]): f.read_text().strip() for f in work.glob("error-*.txt")
        }
        out = work / "results.json"
        if rc != 0 or errors or not out.exists():
            error = CommsimError(_who_failed(text, rc, errors))
            error.log = text  # type: ignore[attr-defined]  # the ranks' output, for diagnosis
            raise error
        return WorkerResult(json.loads(out.read_text()), text)


def _show_progress(path: Path, bar: Any) -> None:
    try:
        done, total, note = path.read_text().split("\t", 2)
    except (OSError, ValueError):
        return
    bar.total = max(int(total), 1)
    bar.update(int(done) - bar.done, note=note.strip())


def _request(args: argparse.Namespace) -> tuple[dict[str, Any], list[int]]:
    """The worker configuration and rank counts from ``commsim run``'s arguments.

    Accepts the CLI's raw strings (``nranks="4"``, ``sizes="1KiB..1MiB"``, ``param=["k=v"]``,
    ``no_check``) or already parsed values (``nranks=[4]``, ``sizes=[1024]``, ``params={}``,
    ``check``).
    """
    from commsim import _cli_common, units  # the other commands' checks and --param coercion

    collective = _cli_common._collective(args)
    if isinstance(args.algorithm, (list, tuple)):
        args = argparse.Namespace(**{**vars(args), "algorithm": ",".join(args.algorithm)})
    algorithms = _cli_common._algorithms(args, collective, default_all=False)
    if len(algorithms) != 1:
        raise CommsimError(f"run takes one algorithm, got {len(algorithms)} ({args.algorithm})")
    [algorithm] = algorithms
    nranks = args.nranks
    if nranks is None:
        raise CommsimError("give the rank count with -p (e.g. -p 4)")
    ps = units.parse_int_list(nranks) if isinstance(nranks, (str, int)) else list(nranks)
    sizes = args.sizes
    sizes = units.parse_sizes(sizes) if isinstance(sizes, (str, int)) else list(sizes)
    params = getattr(args, "params", None)
    if params is None:
        raw = _cli_common._raw_params(getattr(args, "param", None) or [])
        _cli_common._check_params_known(collective, [algorithm], raw)
        params = _cli_common._params_for(collective, algorithm, raw)
    root = getattr(args, "root", None)
    check = getattr(args, "check", None)
    if check is None:
        check = not getattr(args, "no_check", False)
    config = {
        "rows": [[collective, algorithm, dict(params)]],
        "root": int(root or 0),
        "sizes": [int(s) for s in sizes],
        "dtype": str(np.dtype(args.dtype)),
        "iters": int(getattr(args, "iters", 20)),
        "warmup": int(getattr(args, "warmup", 5)),
        "check": bool(check),
        "baseline": not getattr(args, "no_baseline", False),
    }
    return config, [int(p) for p in ps]


def _print_results(results: list[dict[str, Any]], config: dict[str, Any], as_json: bool) -> None:
    from commsim.exec.harness import Measurement, format_table

    ms = [Measurement(**m) for m in results]
    ps = list(dict.fromkeys(m.nranks for m in ms))
    if as_json:
        [[collective, algorithm, params]] = config["rows"]
        doc = {
            "collective": collective,
            "algorithm": algorithm,
            "params": params,
            "root": config["root"],
            "nranks": ps[0] if len(ps) == 1 else ps,
            "backend": "mpi",
            "dtype": config["dtype"],
            "measurements": [
                {
                    k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                    for k, v in m.items()
                }
                for m in results
            ],
        }
        print(json.dumps(doc, indent=2, allow_nan=False))
        return
    for p in ps:
        rows = [m for m in ms if m.nranks == p]
        native = rows[0].native
        root = f" root={config['root']}" if rows[0].collective in ("broadcast", "reduce") else ""
        print(
            f"# {rows[0].collective}/{rows[0].algorithm} p={p}{root} on mpi, {config['dtype']}, "
            f"median over {config['iters']} runs (slowest rank per run) after "
            f"{config['warmup']} warm-up" + (f"; baseline {native}" if native else "")
        )
        print(format_table(rows))


def launch(args: argparse.Namespace) -> int:
    """``commsim run --backend mpi``: run on ``p`` MPI processes; 0 if every check passed, else 1.

    Started normally, it runs ``mpirun -n p`` (from the interpreter's directory, else ``PATH``)
    once per rank count, with ``--timeout`` seconds (default 300) each; a hang or a dead rank ends
    in a one-line :class:`CommsimError`. Started under ``mpirun`` by the user, every process runs
    its rank in place and only rank 0 prints; ``-p`` must then equal the number of processes.
    """
    config, ps = _request(args)
    _validate(config, ps)
    timeout = float(getattr(args, "timeout", None) or DEFAULT_TIMEOUT)
    as_json = bool(getattr(args, "json", False))
    if under_mpirun():
        from commsim.exec import _mpi_worker

        backend = MpiBackend()
        why = backend.unavailable()
        if why:
            raise CommsimError(why)
        for p in ps:
            _check_world_size(p, backend.size)
        try:
            results = _mpi_worker.run_in_place(config, backend)
        except Exception as e:  # one rank alone: end them all rather than leave the others waiting
            print(f"commsim: error: rank {backend.rank}: {e}", file=sys.stderr, flush=True)
            backend.comm.Abort(1)
            raise
        if backend.rank == 0:
            _print_results(results, config, as_json)
        failed = backend.comm.bcast(any(m["check"] == "FAILED" for m in results), root=0)
        return 1 if failed else 0
    results = []
    progress = getattr(args, "progress", None)
    for p in ps:
        results += run_mpirun(config, p, timeout=timeout, progress=progress).results
    _print_results(results, config, as_json)
    return 1 if any(m["check"] == "FAILED" for m in results) else 0


def _validate(config: dict[str, Any], ps: list[int]) -> None:
    """Refuse bad requests here, before any process starts: dtype, and sizes too small for p."""
    from commsim.algorithms import build
    from commsim.exec.harness import layout_for_size

    dt = MpiBackend.check_dtype(config["dtype"])
    [[collective, algorithm, params]] = config["rows"]
    for p in ps:
        root = {"root": config["root"]} if collective in ("broadcast", "reduce") else {}
        schedule = build(collective, algorithm, p, **params, **root)
        for size in config["sizes"]:
            layout_for_size(schedule, size, dt)


def _check_world_size(p: int, size: int) -> None:
    if p != size:
        raise CommsimError(
            f"-p {p} asks for {p} ranks but this mpirun started {size} processes; "
            f"run `mpirun -n {p} ...` or drop mpirun (commsim starts it itself)"
        )
