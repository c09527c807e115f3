"""The mpi4jax backend: one MPI process per rank, ``sendrecv`` / ``send`` / ``recv`` per round.

:func:`plan` lowers a schedule into every rank's program with numpy alone
(:mod:`commsim.exec.mpi._plan`, with the argument that it cannot deadlock); :class:`MpiBackend`
validates, plans, builds the device program (:mod:`commsim.exec.mpi._program`) and runs the MPI
library's own collectives beside it (:mod:`commsim.exec.mpi._backend`); :class:`HostMpiBackend`
runs the same plans through mpi4py on numpy buffers (:mod:`commsim.exec.mpi._host`). :func:`missing`,
:func:`find_mpirun` and :data:`INSTALL_HINT` say whether MPI is installed, without importing it.
:func:`collective` runs a schedule inside the caller's own mpi4jax program, on any pytree
(:mod:`commsim.exec.mpi._dropin`).
"""

from commsim.exec.mpi._backend import (
    DTYPES,
    INSTALL_HINT,
    HostMpiBackend,
    MpiBackend,
    find_mpirun,
    missing,
)
from commsim.exec.mpi._dropin import MpiCollective, collective
from commsim.exec.mpi._plan import RankPlan, plan

__all__ = [
    "DTYPES",
    "INSTALL_HINT",
    "HostMpiBackend",
    "MpiBackend",
    "MpiCollective",
    "RankPlan",
    "collective",
    "find_mpirun",
    "missing",
    "plan",
]
