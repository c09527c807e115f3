"""Executors: run any schedule for real (numpy reference, JAX mesh, mpi4jax, Numba-CUDA).

Backends are rows of one table (:data:`BACKENDS`, :class:`BackendInfo`: the class to import,
the launcher, what it can do) and are loaded lazily by name (:func:`get_backend`), so importing
commsim never needs MPI or a GPU. Callers read the row and ask :func:`supports` about optional
capabilities; none compares a backend's name.
"""

from commsim._deprecation import deprecated_aliases
from commsim.exec._aligned import aligned_copy, aligned_empty, aligned_zeros
from commsim.exec._backend import (
    Backend,
    Compiled,
    HostNative,
    IdleRun,
    OnCommunicator,
    StepTimed,
    supports,
)
from commsim.exec._dropin import buckets
from commsim.exec._execute import check_outputs, execute, random_inputs
from commsim.exec._layout import Layout, layout
from commsim.exec._registry import (
    BACKENDS,
    IN_PROCESS,
    MPIRUN,
    BackendInfo,
    backend_info,
    check_compression,
    get_backend,
    register_backend,
    unregister_backend,
)
from commsim.exec.reference import interpret

__all__ = [
    "BACKENDS",
    "IN_PROCESS",
    "MPIRUN",
    "Backend",
    "BackendInfo",
    "Compiled",
    "HostNative",
    "IdleRun",
    "Layout",
    "OnCommunicator",
    "StepTimed",
    "aligned_copy",
    "aligned_empty",
    "aligned_zeros",
    "backend_info",
    "buckets",
    "check_compression",
    "check_outputs",
    "execute",
    "get_backend",
    "interpret",
    "layout",
    "random_inputs",
    "register_backend",
    "supports",
    "unregister_backend",
]


def __getattr__(name: str) -> object:
    """The backend packages (``commsim.exec.jax``, ``.mpi``, ``.shmem``, ``.cuda``) load on first use, so
    ``commsim.exec.jax.collective`` works after ``import commsim`` and importing commsim needs
    neither JAX nor MPI; ``MPI_BACKENDS`` is deprecated (read a row's launcher)."""
    if name in ("jax", "mpi", "cuda", "shmem"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    return _deprecated(name)


_deprecated = deprecated_aliases(
    __name__,
    {
        "MPI_BACKENDS": (
            "commsim.exec.backend_info(name).multiprocess",
            tuple(n for n, row in BACKENDS.items() if row.multiprocess),
        )
    },
)
