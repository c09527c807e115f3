"""The table of backends: what each one is, how it launches and what it can do, known without
importing it.

A row (:class:`BackendInfo`) is plain data, in the manner of networkx's backend metadata: the
backend's class as a ``"module:attribute"`` string (imported on first use, so ``import commsim``
needs neither MPI nor a GPU), its **launcher** (``"in-process"``: every rank lives in the
calling process; ``"mpirun"``: one process per rank, started by ``mpirun``), and the optional
capabilities a caller must know before anything starts (a step-timed trace; which suite of
transport microbenchmarks ``commsim calibrate`` runs for it). :mod:`commsim.bench` and
:mod:`commsim.cli` read the
row and never ask which backend it is; capabilities of a running backend are checked with
:func:`~commsim.exec.supports` on the protocols of :mod:`commsim.exec._backend`.

A new backend is a package under ``commsim/exec/`` and one row here; a plug-in (or a test's toy
backend) calls :func:`register_backend` with its row and, when done, :func:`unregister_backend`.

Examples:
    >>> backend_info("mpi4py").launcher, backend_info("numpy").launcher
    ('mpirun', 'in-process')
    >>> {n: row.calibration for n, row in BACKENDS.items() if row.calibration}
    {'jax': 'jax-devices', 'mpi': 'mpi-processes', 'cuda': 'cuda-device'}
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable
from typing import Any, Literal

from commsim._deprecation import warn_deprecated
from commsim.errors import CommsimError, ParameterError, UnknownNameError

__all__ = [
    "BACKENDS",
    "IN_PROCESS",
    "MPIRUN",
    "BackendInfo",
    "backend_info",
    "check_compression",
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
        calibration: the suite of transport microbenchmarks ``commsim calibrate`` runs for it,
            a key of :data:`commsim.bench.calibrate.SUITES` (the kind of transport, not the
            backend: measuring a transport is the bench's business); ``None``: not calibrated
            on its own.
        compression: the class takes ``wire=`` (:mod:`commsim._wire`) and sends every message
            in that format (``--wire``).
    """

    name: str
    entry: str | Callable[..., Any]
    launcher: Launcher = IN_PROCESS
    summary: str = ""
    step_trace: bool = False
    calibration: str | None = None
    compression: bool = False

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

    def split(self, sep: str | None = None) -> list[str]:
        """Deprecated: ``BACKENDS[name]`` was the ``"module:attribute"`` string; its parts."""
        warn_deprecated("commsim.exec.BACKENDS[name].split(...)", "BackendInfo.load()")
        return str(self.entry).split(sep)


class _BackendTable(dict):
    """The rows by name. Assigning a ``"module:attribute"`` string (the table's old shape)
    still registers a backend, with a DeprecationWarning."""

    def __setitem__(self, name: str, row: BackendInfo | str) -> None:
        if isinstance(row, str):
            warn_deprecated(
                "commsim.exec.BACKENDS[name] = 'module:attribute'",
                "commsim.exec.register_backend(commsim.exec.BackendInfo(name, entry))",
            )
            row = BackendInfo(name, row)
        super().__setitem__(name, row)


#: name -> :class:`BackendInfo` (add one with :func:`register_backend`)
BACKENDS: dict[str, BackendInfo] = _BackendTable()
_ROWS = BACKENDS


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


def check_compression(name: str) -> None:
    """Refuse, in one line, a wire format for backend ``name`` when its row cannot send one."""
    if not backend_info(name).compression:
        able = ", ".join(n for n, row in _ROWS.items() if row.compression)
        raise ParameterError(
            f"backend {name!r} sends the data's own dtype; a wire format runs on {able}"
        )


def get_backend(name: str, *, nranks: int | None = None, **options: Any) -> Any:
    """Instantiate backend ``name``; a one-line error if unknown or unusable here.

    ``nranks``, when given, is how many ranks it will run: the class's ``prepare(nranks)`` runs
    first, before the backend starts (JAX on CPU asks XLA for that many devices). ``options``
    go to the class.
    """
    info = backend_info(name)
    if options.get("wire") is not None:
        check_compression(name)
    cls = info.load()
    if nranks is not None:
        if inspect.getattr_static(cls, "prepare", None) is None:  # a backend older than it
            warn_deprecated(f"backend class {cls.__name__} without prepare(nranks)", "a no-op")
        else:
            cls.prepare(nranks)
    backend = cls(**options)
    why = backend.unavailable()
    if why:
        raise CommsimError(f"backend {name!r} is not usable here: {why}")
    return backend


for _row in (
    BackendInfo(
        "numpy",
        "commsim.exec.reference:NumpyBackend",
        summary="the reference interpreter, every rank a row of one numpy array",
        compression=True,
    ),
    BackendInfo(
        "jax",
        "commsim.exec.jax:JaxMeshBackend",
        summary="one JAX device per rank, on CPU as many devices as -p",
        calibration="jax-devices",
        compression=True,
    ),
    BackendInfo(
        "mpi",
        "commsim.exec.mpi:MpiBackend",
        MPIRUN,
        summary="one process per rank under mpirun, mpi4jax inside jax.jit",
        step_trace=True,
        calibration="mpi-processes",
        compression=True,
    ),
    BackendInfo(
        "mpi4py",
        "commsim.exec.mpi:HostMpiBackend",
        MPIRUN,
        summary="the same rank programs by mpi4py on numpy buffers, no JAX",
    ),
    BackendInfo(
        "shmem",
        "commsim.exec.shmem:ShmemBackend",
        MPIRUN,
        summary="one process per rank under mpirun, puts with signals into MPI-3 RMA windows",
    ),
    BackendInfo(
        "cuda",
        "commsim.exec.cuda:CudaBackend",
        summary="p ranks on one GPU, numba-CUDA kernels",
        calibration="cuda-device",
    ),
):
    register_backend(_row)
