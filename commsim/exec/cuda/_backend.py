r"""The Numba-CUDA backend: ``p`` simulated ranks on one GPU, one kernel launch per step.

All ranks' buffers live in one device array, the arena (``Compiled.get`` returns its rows as
``[p, nelems]``). The anatomy, as in every backend:

* **validate**: the dtype (:data:`DTYPES`), the layout, and that a GPU (or numba's simulator) is
  there (:data:`NO_GPU` otherwise).
* **plan**: :func:`commsim.exec.cuda._plan.plan`, numpy only: launch tables, staging where a
  step's reads meet its writes, for the chunk size of the launch geometry.
* **program**: :mod:`commsim.exec.cuda._program`, the tables uploaded once per plan and launched
  step by step.
* **native collective**: there is no vendor collective across simulated ranks on one GPU (NCCL
  needs one device per rank), so :meth:`CudaBackend.native` runs the collective as one
  straightforward launch over the element index: allreduce sums the ``p`` rows (rank 0 first)
  and writes the sum to every row; reduce, reduce-scatter, broadcast, allgather and alltoall are
  the corresponding direct sums and copies. It reads every input once and writes every output
  once: what the collective costs when all ranks share one memory, the floor a schedule is
  compared to.
* **register**: :class:`CudaBackend`, its row in the backend table (:mod:`commsim.exec._registry`).

Environment: ``NUMBA_ENABLE_CUDASIM=1`` (set before numba is imported) runs everything on
numba's CUDA simulator (Python threads: exact but slow, for tests). ``numba.cuda`` is imported
only when the backend checks for a GPU or starts it. Numba 0.68's built-in CUDA target
(deprecated upstream in favour of the ``numba-cuda`` package) imports without a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from commsim._compat import INTEGER_DTYPES, check_dtype
from commsim._ir import Schedule
from commsim.errors import CommsimError
from commsim.exec._backend import Compiled
from commsim.exec._layout import Layout
from commsim.exec._lowering import CompileCache, check_layout
from commsim.exec.cuda._plan import Plan, plan

if TYPE_CHECKING:
    from commsim.exec.cuda._program import Geometry

__all__ = ["DTYPES", "NO_GPU", "CudaBackend"]

NO_GPU = "no CUDA GPU found (set NUMBA_ENABLE_CUDASIM=1 to run on numba's CUDA simulator)"


# -- validate --------------------------------------------------------------------------------------
DTYPES = ("float32", "float64", *INTEGER_DTYPES)


def _check_dtype(dtype: Any) -> np.dtype:
    return check_dtype(dtype, "cuda", DTYPES)


def _simulated() -> bool:
    from numba.core import config

    return bool(config.ENABLE_CUDASIM)


def _unavailable(device: int | None) -> str | None:
    """Why GPU ``device`` (``None``: the current one) cannot run here, or ``None``."""
    try:
        from numba import cuda
    except ImportError:
        return "numba is not installed (pip install numba)"
    if not cuda.is_available():
        return NO_GPU
    if device is not None:
        ngpus = 1 if _simulated() else len(cuda.gpus)
        if not 0 <= device < ngpus:
            return f"GPU {device} requested but {ngpus} GPU(s) are visible"
    return None


# -- plan ------------------------------------------------------------------------------------------
# commsim.exec.cuda._plan.plan (numpy only), made once per (schedule, count)
def _planned(cache: CompileCache, schedule: Schedule, layout: Layout, chunk: int) -> Plan:
    return cache.get(schedule, ("plan", layout.count), lambda: plan(schedule, layout, chunk))


# -- program ---------------------------------------------------------------------------------------
# commsim.exec.cuda._program (numba.cuda), built once per (schedule, count, dtype)
def _compiled(
    cache: CompileCache, schedule: Schedule, layout: Layout, dt: np.dtype, g: Geometry
) -> Compiled:
    from commsim.exec.cuda import _program as prog

    pl = _planned(cache, schedule, layout, g.chunk)

    def make() -> Compiled:  # the tables are uploaded once, whatever the dtype
        launches = cache.get(schedule, ("launches", layout.count), lambda: prog.upload(pl, g))
        return prog.compiled(pl, launches, dt, g)

    return cache.get(schedule, ("program", layout.count, dt.str), make)


# -- native collective -----------------------------------------------------------------------------
# collective -> (kernel of commsim.exec.cuda._kernels, its mode argument; None: it takes none)
_NATIVE: dict[str, tuple[str, int | None]] = {
    "allreduce": ("native_sum", 0),
    "reduce": ("native_sum", 1),
    "reduce_scatter": ("native_sum", 2),
    "broadcast": ("native_copy", 0),
    "allgather": ("native_copy", 1),
    "alltoall": ("native_alltoall", None),
}


def _native_compiled(
    cache: CompileCache, schedule: Schedule, layout: Layout, dt: np.dtype, g: Geometry
) -> Compiled:
    from commsim.exec.cuda import _program as prog

    kernel, mode = _NATIVE[schedule.collective]

    def make() -> Compiled:
        return prog.native_compiled(kernel, mode, layout, schedule.root, dt, g)

    return cache.get(schedule, ("native", layout.count, dt.str), make)


# -- register --------------------------------------------------------------------------------------
class CudaBackend:
    """Runs schedules on one GPU (or numba's CUDA simulator), ``p`` ranks in one device array.

    Args:
        device: GPU index (``None``: numba's current device).
        threads, per_thread, blocks_per_sm: launch geometry (defaults: 256, 8, 8 on a GPU;
            4, 2 and 2 blocks in all under the simulator). A chunk is ``threads × per_thread``
            elements; a launch has at most ``blocks_per_sm × SMs`` blocks (grid-stride beyond).
    """

    name = "cuda"

    @staticmethod
    def prepare(nranks: int) -> None:
        """Nothing: every rank is a slice of one device array."""

    check_dtype = staticmethod(_check_dtype)

    def __init__(
        self,
        device: int | None = None,
        *,
        threads: int | None = None,
        per_thread: int | None = None,
        blocks_per_sm: int | None = None,
    ) -> None:
        self.device = device
        self._geometry_args = (threads, per_thread, blocks_per_sm)
        self._geometry: Geometry | None = None
        self._cache = CompileCache()

    def unavailable(self) -> str | None:
        return _unavailable(self.device)

    @staticmethod
    def native_name(collective: str) -> str:
        """The direct kernel :meth:`native` uses for ``collective``."""
        kernel, mode = _NATIVE[collective]
        return kernel if mode is None else f"{kernel}[mode={mode}]"

    @staticmethod
    def host_workers(nranks: int) -> int:
        return 1  # one process drives the GPU (the simulator's threads are not timed honestly)

    def plan(self, schedule: Schedule, layout: Layout) -> Plan:
        """The plan :meth:`compile` lowers (cached per schedule and count)."""
        check_layout(schedule, layout)
        return _planned(self._cache, schedule, layout, self._start().chunk)

    def compile(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled:
        """Lower ``schedule`` (cached), upload its tables, and return put/run/get on the GPU."""
        dt = _check_dtype(dtype)
        check_layout(schedule, layout)
        return _compiled(self._cache, schedule, layout, dt, self._start())

    def native(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled | None:
        """The collective as one direct launch (sum over rows / copy): see the module docstring."""
        dt = _check_dtype(dtype)
        check_layout(schedule, layout)
        return _native_compiled(self._cache, schedule, layout, dt, self._start())

    @property
    def simulated(self) -> bool:
        """Whether numba runs kernels on its CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
        return _simulated()

    def copy_bandwidth(
        self, nbytes: int = 256 * 2**20, iters: int = 10, *, kernel: bool = False
    ) -> float:
        """Median device-to-device copy rate in bytes copied per second.

        ``kernel=False`` times ``DeviceNDArray.copy_to_device`` (``cuMemcpyDtoD``);
        ``kernel=True`` times this backend's own copy (one overwrite group of the ``apply``
        kernel). Each copied byte is read once and written once: memory traffic is twice the rate.
        Under the simulator the number is meaningless (but the code path runs).
        """
        from commsim.exec.cuda import _program as prog

        return prog.copy_bandwidth(nbytes, iters, kernel, self._start())

    def time_calls(self, fn: Callable[[], Any], iters: int = 10, warmup: int = 2) -> list[float]:
        """Seconds per call of ``fn`` (device work included): CUDA events on a GPU, else a clock."""
        from commsim.exec.cuda import _program as prog

        return prog.time_calls(fn, iters, warmup, self._start().simulated)

    def _start(self) -> Geometry:
        """Start the device once (or refuse in one line); the launch geometry."""
        if self._geometry is None:
            why = self.unavailable()
            if why:
                raise CommsimError(f"backend 'cuda' is not usable here: {why}")
            from commsim.exec.cuda import _program as prog

            self._geometry = prog.geometry(
                self.device, *self._geometry_args, simulated=_simulated()
            )
        return self._geometry
