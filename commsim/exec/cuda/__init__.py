"""The Numba-CUDA backend: ``p`` ranks in one GPU array, one kernel launch per step.

:func:`plan` lowers a schedule to launch tables with numpy alone (:mod:`commsim.exec.cuda._plan`);
:class:`CudaBackend` validates, plans, uploads and launches them (:mod:`commsim.exec.cuda._program`,
kernels in :mod:`commsim.exec.cuda._kernels`) and runs a direct kernel as the native baseline
(:mod:`commsim.exec.cuda._backend`). Without a GPU, ``NUMBA_ENABLE_CUDASIM=1`` runs it on numba's
simulator; otherwise :meth:`CudaBackend.unavailable` says :data:`NO_GPU`.

How its transfers map to NVSHMEM (docs only: this backend does not call NVSHMEM). The arena is
the symmetric heap seen from one GPU: rank ``r``'s row is PE ``r``'s copy of one symmetric
buffer (``nvshmem_malloc``), and the staging area is a second symmetric buffer. A step's launch
moves every transfer ``q → r`` as a copy from row ``q`` into row ``r`` (or into staging, where
the step still reads the destination), which on several GPUs is
``nvshmemx_putmem_signal_nbi_block(dest, src, nbytes, sig, 1, NVSHMEM_SIGNAL_ADD, r)`` by the
sender's block; the groups that add several sources into one destination are the receiver's
reduction after its data arrived, ``nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, count)``
then a local kernel. The kernel boundary between steps stands for those waits, and is
stronger: every rank's writes of step ``s`` finish before any read of step ``s + 1`` (a
barrier), where a signal orders only one sender and one receiver. The ``shmem`` backend
(:mod:`commsim.exec.shmem`) runs exactly the per-pair form, with MPI-3 RMA in place of NVSHMEM
(its module docstrings give the call-for-call mapping and why its waits cannot deadlock).
"""

from commsim.exec.cuda._backend import DTYPES, NO_GPU, CudaBackend
from commsim.exec.cuda._plan import Plan, plan

__all__ = ["DTYPES", "NO_GPU", "CudaBackend", "Plan", "plan"]
