"""What every execution backend provides, and the registry of backends.

A backend lowers *any* schedule (it never looks at the algorithm's name) and hands back a
:class:`Compiled`: ``put`` moves per-rank buffers ``[p, nelems]`` to where the backend computes
and returns once they are there (so a timed ``run`` never waits for a transfer), ``run`` executes the whole schedule once and returns when it is done (so it can be timed), and
``get`` brings the buffers back. ``native`` gives the same for the backend's own collective
(``MPI_Allreduce``, ``jax.lax.psum``, ...), the baseline :mod:`commsim.bench` times beside it.

Backends are imported lazily (``get_backend("mpi")`` imports mpi4py only then), so
``import commsim`` works where MPI, CUDA or extra JAX devices are absent; ``unavailable()``
returns one line saying why a backend cannot run here and how to fix it.

Every device backend is a package with one anatomy (:mod:`commsim.exec.jax`,
:mod:`commsim.exec.mpi`, :mod:`commsim.exec.cuda`): ``_plan`` lowers a schedule to a static
plan with numpy alone (which rounds, segments, launches: testable anywhere), ``_program`` builds
the device program from a plan, and ``_backend`` holds the backend class, its sections in the
order **validate → plan → program → native collective → register**. The class lists the members
of :class:`Backend` in the protocol's order; its plans and programs live in one
:class:`~commsim.exec._lowering.CompileCache`.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from commsim._ir import Schedule
from commsim.errors import CommsimError, UnknownNameError
from commsim.exec._layout import Layout

__all__ = [
    "BACKENDS",
    "MPI_BACKENDS",
    "Backend",
    "Compiled",
    "blocking",
    "get_backend",
    "uploaded",
]


@dataclasses.dataclass(frozen=True)
class Compiled:
    """A schedule (or native collective) ready to run on one backend for one layout and dtype.

    ``repeat(buf, k)``, where a backend offers it, runs the schedule ``k`` times back to back in
    one call (one dispatch), each run on the previous run's output, and returns the last output:
    what nccl-tests times, so that the per-call cost of the runtime (JAX's dispatch) is paid once
    per ``k`` runs. ``k`` is an argument of the compiled program (one compilation serves all).
    """

    put: Callable[[np.ndarray], Any]
    run: Callable[[Any], Any]
    get: Callable[[Any], np.ndarray]
    repeat: Callable[[Any, int], Any] | None = None


def uploaded(array: Any) -> Any:
    """A JAX array (or a tuple of them) once its transfer to the device is done
    (``device_put`` is asynchronous): a :attr:`Compiled.put` returns only then, so no timed
    ``run`` waits for an upload."""
    import jax

    return jax.block_until_ready(array)


def blocking(exe: Callable[..., Any]) -> Callable[..., Any]:
    """``exe`` (a compiled JAX function) as a :attr:`Compiled.run` (or ``repeat``): it returns
    only when its result (an array or a tuple of arrays) is ready, so that the call can be timed."""
    import jax

    def run(*args: Any) -> Any:
        return jax.block_until_ready(exe(*args))

    return run


class Backend(Protocol):
    """What the harness, :func:`~commsim.exec.execute` and the CLI use of a backend, in order."""

    name: str

    def check_dtype(self, dtype: Any) -> np.dtype:
        """``dtype`` as a numpy dtype if this backend runs it, else a one-line CommsimError
        (callable on the class: it never starts the device or MPI)."""

    def unavailable(self) -> str | None:
        """``None`` when usable here, else one line: why not, and how to fix it."""

    def native_name(self, collective: str) -> str:
        """What :meth:`native` runs for ``collective``, e.g. ``"MPI_Allreduce"``."""

    def host_workers(self, nranks: int) -> int:
        """Host threads or processes that run at once for ``nranks`` ranks (1 for one process
        driving a GPU; ``nranks`` for MPI processes or JAX CPU devices): more than the cores,
        and timings measure the operating system's scheduler."""

    def compile(self, schedule: Schedule, layout: Layout, dtype: np.dtype) -> Compiled:
        """Lower ``schedule`` for buffers of ``layout`` and ``dtype``."""

    def native(self, schedule: Schedule, layout: Layout, dtype: np.dtype) -> Compiled | None:
        """The backend's own implementation of ``schedule``'s collective, or ``None``.

        A backend whose executor wraps a library may also offer ``host_native(schedule,
        layout, dtype)`` and ``host_native_name(collective)``: the same library collective
        called directly on host buffers, outside the executor (MPI: mpi4py on numpy), so a
        measurement shows the transport's own time beside the executor's (optional; the
        harness looks for it with ``getattr``)."""


# name -> "module:attribute"; modules are imported on first use
BACKENDS: dict[str, str] = {
    "numpy": "commsim.exec.reference:NumpyBackend",
    "jax": "commsim.exec.jax:JaxMeshBackend",
    "mpi": "commsim.exec.mpi:MpiBackend",
    "mpi4py": "commsim.exec.mpi:HostMpiBackend",
    "cuda": "commsim.exec.cuda:CudaBackend",
}


# backends whose ranks are MPI processes: started by ``mpirun`` (:func:`commsim.bench.measure_mpi`)
MPI_BACKENDS = ("mpi", "mpi4py")


def get_backend(name: str, **options: Any) -> Backend:
    """Instantiate backend ``name`` (raises a one-line error if unknown or unusable here)."""
    if name not in BACKENDS:
        raise UnknownNameError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
    module, attr = BACKENDS[name].split(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except ImportError as e:
        raise CommsimError(f"backend {name!r} cannot be imported here: {e}") from None
    backend = cls(**options)
    why = backend.unavailable()
    if why:
        raise CommsimError(f"backend {name!r} is not usable here: {why}")
    return backend
