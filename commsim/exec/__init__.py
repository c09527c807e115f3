"""Executors: run any schedule for real (numpy reference, JAX mesh, mpi4jax, Numba-CUDA).

Backends are loaded lazily by name (:func:`get_backend`), so importing commsim never needs MPI
or a GPU.
"""

from commsim.exec._backend import BACKENDS, MPI_BACKENDS, Backend, Compiled, get_backend
from commsim.exec._dropin import buckets
from commsim.exec._execute import check_outputs, execute, random_inputs
from commsim.exec._layout import Layout, layout
from commsim.exec.reference import interpret

__all__ = [
    "BACKENDS",
    "MPI_BACKENDS",
    "Backend",
    "Compiled",
    "Layout",
    "buckets",
    "check_outputs",
    "execute",
    "get_backend",
    "interpret",
    "layout",
    "random_inputs",
]


def __getattr__(name: str) -> object:
    """The backend packages (``commsim.exec.jax``, ``.mpi``, ``.cuda``) load on first use, so
    ``commsim.exec.jax.collective`` works after ``import commsim`` and importing commsim needs
    neither JAX nor MPI."""
    if name in ("jax", "mpi", "cuda"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
