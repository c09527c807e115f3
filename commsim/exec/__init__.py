"""Executors: run any schedule for real (numpy reference, JAX mesh, mpi4jax, Numba-CUDA).

Backends are loaded lazily by name (:func:`get_backend`), so importing commsim never needs MPI
or a GPU.
"""

from commsim.exec._backend import BACKENDS, Backend, Compiled, get_backend
from commsim.exec._execute import check_outputs, execute, random_inputs
from commsim.exec._layout import Layout, layout
from commsim.exec.reference import interpret

__all__ = [
    "BACKENDS",
    "Backend",
    "Compiled",
    "Layout",
    "check_outputs",
    "execute",
    "get_backend",
    "interpret",
    "layout",
    "random_inputs",
]
