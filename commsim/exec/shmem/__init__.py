"""The one-sided (SHMEM-style) backend: every transfer a put with a signal into MPI-3 RMA windows.

:func:`plan` lowers a schedule into every rank's puts, signals and waits with numpy alone
(:mod:`commsim.exec.shmem._plan`, with the argument that its waits cannot deadlock);
:class:`ShmemBackend` validates, plans and runs them through mpi4py
(:mod:`commsim.exec.shmem._program`, with the mapping to NVSHMEM's ``put_signal`` and
``signal_wait_until``), beside the MPI library's own two-sided collectives.
"""

from commsim.exec.shmem._backend import DTYPES, ShmemBackend
from commsim.exec.shmem._plan import Put, RankPuts, StepPuts, plan

__all__ = ["DTYPES", "Put", "RankPuts", "ShmemBackend", "StepPuts", "plan"]
