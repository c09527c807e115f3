"""The table of backends: what each one is, how it launches and what it can do, known without
importing it.

A row (:class:`BackendInfo`) is plain data, in the manner of networkx's backend metadata: the
backend's class as a ``"module:attribute"`` string (imported on first use, so ``import commsim``
needs neither MPI nor a GPU), its **launcher** (``"in-process"``: every rank lives in the
calling process; ``"mpirun"``: one process per rank, started by ``mpirun``), and the optional
capabilities a caller must know before anything starts (a step-timed trace; transport
microbenchmarks for ``commsim calibrate``). :mod:`commsim.bench` and :mod:`commsim.cli` read the
row and never ask which backend it is; capabilities of a running backend are checked with
:func:`~commsim.exec.supports` on the protocols of :mod:`commsim.exec._backend`.

A new backend is a package under ``commsim/exec/`` and one row here; a plug-in (or a test's toy
backend) calls :func:`register_backend` with its row and, when done, :func:`unregister_backend`.

Examples:
    >>> backend_info("mpi4py").launcher, backend_info("numpy").launcher
    ('mpirun', 'in-process')
    >>> sorted(n for n, row in BACKENDS.items() if row.calibration)
    ['cuda', 'jax', 'mpi']
"""

from __future__ import annotations

import dataclasses
import importlib
import types
from collections.abc import Callable, Mapping
from typing import Any, Literal

from commsim._deprecation import warn_deprecated
from commsim.errors import CommsimError, ParameterError, UnknownNameError

__all__ = [
    "BACKENDS",
    "IN_PROCESS",
    "MPIRUN",
    "BackendInfo",
    "backend_info",
    "get_backend",
    "register_backend",
    "unregister_backend",
]

Launcher = Literal["in-process", "mpirun"]
#: every rank lives in the calling process (numpy rows, JAX devices, one GPU)
IN_PROCESS: Launcher = "in-process"
#: one process per rank, started by ``mpirun`` (:func:`commsim.bench.measure_mpi`)
MPIRUN: Launcher = "mpirun"


def _load(entry: str | Callable[..., Any], what: str) -> Any:
    """``entry`` itself, or the attribute a ``"module:attribute"`` string names (imported now)."""
    if not isinstance(entry, str):
        return entry
    module, _, attr = entry.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as e:
        raise CommsimError(f"{what} cannot be imported here: {e}") from None


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    """One backend, described without importing it.

    Attributes:
        name: what ``--backend`` takes, e.g. ``"jax"``.
        entry: the backend class, as ``"module:attribute"`` (imported by :meth:`load`) or the
            class itself (a plug-in's).
        launcher: :data:`IN_PROCESS` or :data:`MPIRUN` (how :mod:`commsim.bench` starts its ranks,
            and whether a run's time is the local clock or the slowest rank's).
        summary: a short phrase for ``--help``: what runs the ranks (no parentheses or
            semicolons: it is listed with the others).
        step_trace: the class offers :class:`~commsim.exec.StepTimed` (``compile_steps``), so
            ``commsim run --trace`` can time it step by step.
        calibration: its transport microbenchmarks for ``commsim calibrate``, as
            ``"module:function"``; the function takes ``(nranks, sizes, *, repeats, warmup,
            timeout, progress)`` and returns :class:`commsim.bench.calibrate.Samples`. ``None``:
            not calibrated on its own.
        transport: what those microbenchmarks measure, for a profile's header.
    """

    name: str
    entry: str | Callable[..., Any]
    launcher: Launcher = IN_PROCESS
    summary: str = ""
    step_trace: bool = False
    calibration: str | None = None
    transport: str = ""

    def __post_init__(self) -> None:
        if self.launcher not in (IN_PROCESS, MPIRUN):
            raise ParameterError(
                f"backend {self.name!r}: launcher must be {IN_PROCESS!r} or {MPIRUN!r}, "
                f"not {self.launcher!r}"
            )

    @property
    def multiprocess(self) -> bool:
        """Whether its ranks are separate processes under ``mpirun``."""
        return self.launcher == MPIRUN

    def load(self) -> type:
        """The backend class (imports its module; starts no device and no MPI)."""
        return _load(self.entry, f"backend {self.name!r}")

    def calibrator(self) -> Callable[..., Any]:
        """The microbenchmark function :attr:`calibration` names (a one-line error if none)."""
        if self.calibration is None:
            able = [n for n, r in BACKENDS.items() if r.calibration]
            listed = ", ".join(able[:-1]) + f" or {able[-1]}" if len(able) > 1 else "".join(able)
            raise CommsimError(f"calibrate runs on {listed}, not {self.name!r}")
        return _load(self.calibration, f"the {self.name} calibration")


_ROWS: dict[str, BackendInfo] = {}
#: name -> :class:`BackendInfo`, read-only (change it with :func:`register_backend`)
BACKENDS: Mapping[str, BackendInfo] = types.MappingProxyType(_ROWS)


def register_backend(info: BackendInfo) -> BackendInfo:
    """Add (or replace) a backend's row; ``--backend NAME`` reaches it from then on."""
    if not info.name or not info.name.replace("-", "").replace("_", "").isalnum():
        raise ParameterError(f"a backend name is letters, digits, '-' and '_', not {info.name!r}")
    _ROWS[info.name] = info
    return info


def unregister_backend(name: str) -> None:
    """Remove backend ``name``'s row (a test's toy backend, a plug-in experiment)."""
    backend_info(name)
    del _ROWS[name]


def backend_info(name: str) -> BackendInfo:
    """The row of backend ``name`` (a one-line error naming the backends when unknown)."""
    if name not in _ROWS:
        raise UnknownNameError(f"unknown backend {name!r}; available: {', '.join(_ROWS)}")
    return _ROWS[name]


def get_backend(name: str, *, nranks: int | None = None, **options: Any) -> Any:
    """Instantiate backend ``name``; a one-line error if unknown or unusable here.

    ``nranks``, when given, is how many ranks it will run: the class's ``prepare(nranks)`` runs
    first, before the backend starts (JAX on CPU asks XLA for that many devices). ``options``
    go to the class.
    """
    info = backend_info(name)
    cls = info.load()
    if nranks is not None:
        cls.prepare(nranks)
    backend = cls(**options)
    why = backend.unavailable()
    if why:
        raise CommsimError(f"backend {name!r} is not usable here: {why}")
    return backend


def _mpi_backends() -> tuple[str, ...]:
    """The deprecated ``commsim.exec.MPI_BACKENDS``: the names of the ``mpirun`` rows."""
    warn_deprecated(
        "commsim.exec.MPI_BACKENDS", "commsim.exec.backend_info(name).multiprocess", stacklevel=4
    )
    return tuple(n for n, r in _ROWS.items() if r.multiprocess)


_CALIBRATE = "commsim.bench.calibrate"  # the microbenchmarks live with the fits that read them
for _row in (
    BackendInfo(
        "numpy",
        "commsim.exec.reference:NumpyBackend",
        summary="the reference interpreter, every rank a row of one numpy array",
    ),
    BackendInfo(
        "jax",
        "commsim.exec.jax:JaxMeshBackend",
        summary="one JAX device per rank, on CPU as many devices as -p",
        calibration=f"{_CALIBRATE}:jax_device_samples",
        transport="JAX devices as the executor runs a step (ppermute rounds with their slices "
        "and write-backs in one jitted shard_map, every device at once, batch differences)",
    ),
    BackendInfo(
        "mpi",
        "commsim.exec.mpi:MpiBackend",
        MPIRUN,
        summary="one process per rank under mpirun, mpi4jax inside jax.jit",
        step_trace=True,
        calibration=f"{_CALIBRATE}:mpi_samples",
        transport="MPI (mpi4py on numpy buffers, OSU-style); reductions numpy float32",
    ),
    BackendInfo(
        "mpi4py",
        "commsim.exec.mpi:HostMpiBackend",
        MPIRUN,
        summary="the same rank programs by mpi4py on numpy buffers, no JAX",
    ),
    BackendInfo(
        "cuda",
        "commsim.exec.cuda:CudaBackend",
        summary="p ranks on one GPU, numba-CUDA kernels",
        calibration=f"{_CALIBRATE}:cuda_device_samples",
        transport="CUDA devices (numba device copies, batch differences); a numba add kernel",
    ),
):
    register_backend(_row)
