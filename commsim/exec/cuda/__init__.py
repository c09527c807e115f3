"""The Numba-CUDA backend: ``p`` ranks in one GPU array, one kernel launch per step.

:func:`plan` lowers a schedule to launch tables with numpy alone (:mod:`commsim.exec.cuda._plan`);
:class:`CudaBackend` validates, plans, uploads and launches them (:mod:`commsim.exec.cuda._program`,
kernels in :mod:`commsim.exec.cuda._kernels`) and runs a direct kernel as the native baseline
(:mod:`commsim.exec.cuda._backend`). Without a GPU, ``NUMBA_ENABLE_CUDASIM=1`` runs it on numba's
simulator; otherwise :meth:`CudaBackend.unavailable` says :data:`NO_GPU`.
"""

from commsim.exec.cuda._backend import DTYPES, NO_GPU, CudaBackend
from commsim.exec.cuda._plan import Plan, plan

__all__ = ["DTYPES", "NO_GPU", "CudaBackend", "Plan", "plan"]
