r"""The Numba-CUDA backend: ``p`` simulated ranks on one GPU, one kernel launch per step.

All ranks' buffers live in one device array, the **arena**: rank ``r``'s buffer is the row
``arena[r * nelems : (r + 1) * nelems]`` (``Compiled.get`` returns them as ``[p, nelems]``),
followed by a staging area. The schedule is lowered once per ``(schedule, layout)`` on the host
(:func:`lower`, pure numpy, no name of any algorithm involved) and its tables are uploaded once;
the dtype only selects numba's specialization of the kernels.

Lowering of a step (all transfers of the step become one launch, two where it must stage):

1. **Elements.** Each transfer becomes ``(src offset, dst offset, length, reduce)`` in the arena.
2. **Ordered writes.** Destination ranges are cut at every other destination range's ends, so
   that the pieces are either equal or disjoint, and pieces with the same destination form a
   **group**: ``dst = (dst if reduce else 0) + Σ sources``, sources in transfer order. Several
   reductions into one element in one step (direct reduce-scatter: ``p - 1`` of them) are thus
   added by the one thread that owns the element: no atomics, no write conflicts, the reference
   interpreter's summation order, and the destination is read and written once, not ``k``
   times. Two writes to an element that are not both reductions are refused (a write race).
3. **Reads see the pre-step state.** The union of the step's read ranges and of its write ranges
   are computed as disjoint intervals; a read interval that meets a written one (an exchange:
   ``r ↔ r xor 2^k`` both reading and writing the whole vector, or a local shift within a rank) is
   **staged**: a first launch copies it to the staging area, and the groups read it there.
   Reads that no write of the step touches are read in place. Ring steps (rank ``r`` reads block
   ``b``, rank ``r + 1``'s block ``b`` is written) and recursive-halving steps (a rank sends one
   half and receives into the other) are disjoint, so they run as one fused read-modify-write
   launch; recursive doubling's exchanges are staged. The staging area is the largest staged
   volume of any step: the double buffer of the data that moves, not of the whole arena.
4. **Launch geometry.** Each group is cut into chunks of ``chunk = threads × per_thread``
   elements; blocks take chunks grid-stride, find the chunk's group by binary search in a prefix
   sum of chunk counts, and stride their threads over its elements (coalesced); see
   :mod:`commsim.exec._cuda_kernels`. A step's table is ``5 × (groups + 1)`` integers plus one per
   source, independent of the message size.

Cost of a step, in memory traffic: every moved element is read once and written once, plus one
read of the destination per reducing group, plus ``2 ×`` the staged elements; one launch (two
if staged). A ring allreduce on ``p`` ranks of ``n`` elements therefore moves ``5 (p - 1) n``
elements through memory (``3`` per element in its ``p - 1`` reduce-scatter steps, ``2`` in its
``p - 1`` allgather steps): :attr:`Plan.traffic_elems`, the basis of the bandwidth bound in
``benchmarks/bench_cuda.py``.

**Native baseline.** There is no vendor collective across simulated ranks on one GPU (NCCL
needs one device per rank). :meth:`CudaBackend.native` instead runs the collective as one
straightforward launch over the element index: allreduce sums the ``p`` rows (rank 0 first) and
writes the sum to every row; reduce, reduce-scatter, broadcast, allgather and alltoall are the
corresponding direct sums and copies. It reads every input once and writes every output once:
what the collective costs when all ranks share one memory, the floor a schedule is compared to.

Environment: ``NUMBA_ENABLE_CUDASIM=1`` (set before numba is imported) runs everything on
numba's CUDA simulator (Python threads: exact but slow, for tests). ``numba.cuda`` is imported
only inside the backend's methods. Numba 0.68's built-in CUDA target (deprecated upstream in favour
of the ``numba-cuda`` package) imports without a warning; on a real GPU, numba warns
(``NumbaPerformanceWarning``) about grids under 128 blocks at configuration time, which the
backend silences where it configures its launches (small steps get small grids on purpose).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from commsim._compat import check_dtype
from commsim._ir import Schedule, Step
from commsim.errors import CommsimError, ScheduleError
from commsim.exec._backend import Compiled
from commsim.exec._layout import Layout
from commsim.exec._lowering import checked_steps, element_ranges

__all__ = ["NO_GPU", "CudaBackend", "Launch", "Plan", "StepPlan", "lower"]

NO_GPU = "no CUDA GPU found (set NUMBA_ENABLE_CUDASIM=1 to run on numba's CUDA simulator)"

# launch geometry: (threads per block, elements per thread per chunk, blocks per SM)
_GPU_GEOMETRY = (256, 8, 8)
_SIM_GEOMETRY = (4, 2, 2)  # the simulator runs a Python thread per CUDA thread: keep it small
# collective -> (kernel of commsim.exec._cuda_kernels, its mode argument; None: it takes none)
_NATIVE: dict[str, tuple[str, int | None]] = {
    "allreduce": ("native_sum", 0),
    "reduce": ("native_sum", 1),
    "reduce_scatter": ("native_sum", 2),
    "broadcast": ("native_copy", 0),
    "allgather": ("native_copy", 1),
    "alltoall": ("native_alltoall", None),
}


# -- validate -----------------------------------------------------------------------------------
DTYPES = ("float32", "float64", *(f"{k}int{b}" for k in ("", "u") for b in (8, 16, 32, 64)))


def _check_dtype(dtype: Any) -> np.dtype:
    return check_dtype(dtype, "cuda", DTYPES)


def _check_layout(schedule: Schedule, layout: Layout) -> None:
    if layout.nranks != schedule.nranks:
        raise CommsimError(
            f"schedule {schedule.algorithm!r} has p={schedule.nranks} ranks but the layout is for "
            f"{layout.nranks} ranks"
        )
    if len(layout.offsets) != schedule.nslots + 1:
        raise CommsimError(
            f"the layout has {len(layout.offsets) - 1} slots, schedule {schedule.algorithm!r} has "
            f"{schedule.nslots}: build the layout from this schedule (commsim.exec.layout)"
        )


# -- lower --------------------------------------------------------------------------------------
class Launch(NamedTuple):
    """One kernel launch: a group table (see :mod:`commsim.exec._cuda_kernels`) and its sources."""

    groups: np.ndarray  # int64 [5, G + 1]: dst, len, reduce, ptr, cstart
    srcs: np.ndarray  # int64 [sources]: arena offsets
    nchunks: int

    @property
    def ngroups(self) -> int:
        return self.groups.shape[1] - 1


class StepPlan(NamedTuple):
    """A lowered step: an optional staging launch, then the launch that applies the transfers."""

    index: int
    stage: Launch | None
    apply: Launch
    moved: int  # elements moved by the step's transfers
    staged: int  # elements copied to the staging area first

    @property
    def launches(self) -> list[Launch]:
        return [self.apply] if self.stage is None else [self.stage, self.apply]


@dataclasses.dataclass(frozen=True)
class Plan:
    """A schedule lowered for one layout: the launches of every non-empty step.

    Attributes:
        nranks, nelems: the arena holds ``nranks`` rows of ``nelems`` elements...
        stage_elems: ...followed by this many staging elements.
        steps: the lowered non-empty steps, in order.
        traffic_elems: element reads and writes the transfers need (excluding staging): each
            moved element read and written once, plus one read of the destination per reduction.
    """

    nranks: int
    nelems: int
    stage_elems: int
    chunk: int
    steps: list[StepPlan]
    traffic_elems: int

    @property
    def arena_elems(self) -> int:
        return self.nranks * self.nelems + self.stage_elems

    @property
    def staged_steps(self) -> list[int]:
        return [s.index for s in self.steps if s.stage is not None]

    @property
    def nlaunches(self) -> int:
        return sum(len(s.launches) for s in self.steps)


def _table(dst: np.ndarray, length: np.ndarray, red: np.ndarray, ptr: np.ndarray,
           srcs: np.ndarray, chunk: int) -> Launch:  # fmt: skip
    g = len(dst)
    t = np.zeros((5, g + 1), dtype=np.int64)
    t[0, :g], t[1, :g], t[2, :g], t[3] = dst, length, red, ptr
    t[4, 1:] = np.cumsum(-(-length // chunk))
    return Launch(t, np.ascontiguousarray(srcs, dtype=np.int64), int(t[4, g]))


def _merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint union of the intervals ``[starts, ends)``; overlapping (not touching) ones merge."""
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], ends[o]
    reach = np.maximum.accumulate(e)
    first = np.flatnonzero(np.concatenate([[True], s[1:] >= reach[:-1]]))
    return s[first], np.maximum.reduceat(e, first)


def _group_writes(
    s0: np.ndarray, d0: np.ndarray, n: np.ndarray, red: np.ndarray, index: int, nelems: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cut destination ranges at each other's ends; group equal pieces (sources in order).

    Returns per group ``dst, len, reduce, ptr`` and the sources ``srcs`` (CSR by ``ptr``).
    """
    bp = np.unique(np.concatenate([d0, d0 + n]))
    first, last = np.searchsorted(bp, d0), np.searchsorted(bp, d0 + n)
    npieces = last - first
    t = np.repeat(np.arange(len(d0)), npieces)  # transfer of each piece, in transfer order
    j = first[t] + np.arange(len(t)) - np.repeat(np.cumsum(npieces) - npieces, npieces)
    psrc = s0[t] + (bp[j] - d0[t])
    order = np.argsort(j, kind="stable")  # by destination piece, transfers in order within
    j, t, psrc = j[order], t[order], psrc[order]
    gfirst = np.flatnonzero(np.concatenate([[True], j[1:] != j[:-1]]))
    ptr = np.append(gfirst, len(j))
    allred = np.logical_and.reduceat(red[t], gfirst)
    race = (np.diff(ptr) > 1) & ~allred
    if race.any():
        at = int(bp[j[gfirst[np.argmax(race)]]])
        rank, elem = divmod(at, nelems)
        raise ScheduleError(
            f"step {index}: several transfers write rank {rank} element {elem} and not all of "
            "them reduce (a write race)",
            step=index,
            rank=rank,
        )
    gj = j[gfirst]
    return bp[gj], bp[gj + 1] - bp[gj], allred, ptr, psrc


def _lower_step(
    step: Step, index: int, off: np.ndarray, nelems: int, base: int, chunk: int
) -> StepPlan | None:
    src, dst, sa, n, da, red = element_ranges(step, off)
    if len(src) == 0:
        return None
    s0 = src * nelems + sa
    d0 = dst * nelems + da
    gdst, glen, gred, ptr, srcs = _group_writes(s0, d0, n, red, index, nelems)
    # reads that meet this step's writes are staged, so that every read sees the pre-step state
    rs, re_ = _merge(s0, s0 + n)
    ws, we = _merge(d0, d0 + n)
    i = np.searchsorted(we, rs, side="right")  # first written interval ending after each read
    hazard = np.zeros(len(rs), dtype=bool)
    inside = i < len(ws)
    hazard[inside] = ws[i[inside]] < re_[inside]
    stage, staged = None, 0
    if hazard.any():
        hs, hlen = rs[hazard], (re_ - rs)[hazard]
        hoff = base + np.concatenate([[0], np.cumsum(hlen)[:-1]])
        k = np.searchsorted(rs, srcs, side="right") - 1  # read interval of each source
        hk = np.cumsum(hazard)[k] - 1  # its index among the staged ones (if staged)
        srcs = np.where(hazard[k], hoff[hk] + (srcs - rs[k]), srcs)
        one = np.arange(len(hs) + 1)
        stage = _table(hoff, hlen, np.zeros(len(hs), dtype=bool), one, hs, chunk)
        staged = int(hlen.sum())
    return StepPlan(index, stage, _table(gdst, glen, gred, ptr, srcs, chunk), int(n.sum()), staged)


def lower(schedule: Schedule, layout: Layout, chunk: int = 2048) -> Plan:
    """Lower ``schedule`` to launch tables for buffers of ``layout`` (host only, no CUDA).

    Examples:
        >>> import commsim
        >>> from commsim.exec import layout
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> plan = lower(s, layout(s, 16))
        >>> plan.nlaunches, plan.staged_steps, plan.traffic_elems  # 6 steps, 5 (p-1) n elements
        (6, [], 240)
    """
    _check_layout(schedule, layout)
    p, nelems = schedule.nranks, layout.nelems
    off = layout.offsets
    steps: list[StepPlan] = []
    traffic = 0
    for index, step in checked_steps(schedule):
        sp = _lower_step(step, index, off, nelems, p * nelems, chunk)
        if sp is not None:
            steps.append(sp)
            n = off[step.src_slot + step.count] - off[step.src_slot]
            traffic += int((n * (2 + step.reduce)).sum())
    stage = max((s.staged for s in steps), default=0)
    return Plan(p, nelems, stage, chunk, steps, traffic)


# -- run ----------------------------------------------------------------------------------------
def _cuda() -> Any:
    from numba import cuda

    return cuda


def _simulated() -> bool:
    from numba.core import config

    return bool(config.ENABLE_CUDASIM)


def _kernels() -> Any:
    from commsim.exec._cuda_kernels import KERNELS  # imports numba.cuda

    return KERNELS


def _launcher(kernel: Any, grid: int, threads: int) -> Callable[..., Any]:
    """``kernel[grid, threads]``, configured once (under the simulator: at every call)."""
    if _simulated():  # the simulator stores the configuration on the kernel object itself
        return lambda *args: kernel[grid, threads](*args)
    from numba.core.errors import NumbaPerformanceWarning

    with warnings.catch_warnings():  # small steps get small grids on purpose
        warnings.simplefilter("ignore", NumbaPerformanceWarning)
        return kernel[grid, threads]


class CudaBackend:
    """Runs schedules on one GPU (or numba's CUDA simulator), ``p`` ranks in one device array.

    Args:
        device: GPU index (``None``: numba's current device).
        threads, per_thread, blocks_per_sm: launch geometry (defaults: 256, 8, 8 on a GPU;
            4, 2 and 2 blocks in all under the simulator). A chunk is ``threads × per_thread``
            elements; a launch has at most ``blocks_per_sm × SMs`` blocks (grid-stride beyond).
    """

    name = "cuda"

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
        self._plans: weakref.WeakKeyDictionary[Schedule, dict[tuple[int, int], Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._ready = False

    # -- availability and device ----------------------------------------------------------------
    @property
    def simulated(self) -> bool:
        """Whether numba runs kernels on its CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
        return _simulated()

    def unavailable(self) -> str | None:
        try:
            cuda = _cuda()
        except ImportError:
            return "numba is not installed (pip install numba)"
        if not cuda.is_available():
            return NO_GPU
        if self.device is not None:
            ngpus = 1 if _simulated() else len(cuda.gpus)
            if not 0 <= self.device < ngpus:
                return f"GPU {self.device} requested but {ngpus} GPU(s) are visible"
        return None

    def _init(self) -> Any:
        cuda = _cuda()
        if not self._ready:
            why = self.unavailable()
            if why:
                raise CommsimError(f"backend 'cuda' is not usable here: {why}")
            if self.device is not None:
                cuda.select_device(self.device)
            sim = _simulated()
            threads, per_thread, per_sm = (
                a if a is not None else d
                for a, d in zip(
                    self._geometry_args, _SIM_GEOMETRY if sim else _GPU_GEOMETRY, strict=True
                )
            )
            sms = 1 if sim else cuda.get_current_device().MULTIPROCESSOR_COUNT
            self.threads, self.chunk, self.max_blocks = threads, threads * per_thread, per_sm * sms
            self._ready = True
        return cuda

    def _check_memory(self, nbytes: int) -> None:
        if _simulated():
            return
        try:
            free, total = _cuda().current_context().get_memory_info()
        except NotImplementedError:  # an external memory manager that cannot say
            return
        if nbytes > free:
            gib = 2.0**30
            raise CommsimError(
                f"the cuda backend needs {nbytes / gib:.2f} GiB of GPU memory for this schedule "
                f"and size, the GPU has {free / gib:.2f} of {total / gib:.2f} GiB free"
            )

    # -- lower and run --------------------------------------------------------------------------
    def plan(self, schedule: Schedule, layout: Layout) -> Plan:
        """The lowered plan (cached per schedule and layout)."""
        return self._device_plan(schedule, layout)[0]

    def _device_plan(self, schedule: Schedule, layout: Layout) -> tuple[Plan, list[tuple]]:
        cuda = self._init()
        _check_layout(schedule, layout)
        per_schedule = self._plans.setdefault(schedule, {})
        key = (layout.per_unit, self.chunk)
        if key not in per_schedule:
            plan = lower(schedule, layout, self.chunk)
            kern = _kernels().apply
            launches = []
            for sp in plan.steps:
                for la in sp.launches:
                    grid = max(1, min(la.nchunks, self.max_blocks))
                    launches.append(
                        (
                            _launcher(kern, grid, self.threads),
                            cuda.to_device(la.groups),
                            cuda.to_device(la.srcs),
                        )
                    )
            per_schedule[key] = (plan, launches)
        return per_schedule[key]

    def _buffers(
        self, p: int, nelems: int, extra: int, dtype: np.dtype
    ) -> tuple[Callable, Callable]:
        cuda = _cuda()
        rows = p * nelems
        self._check_memory((rows + extra) * dtype.itemsize)

        def put(host: np.ndarray) -> Any:
            host = np.asarray(host)
            if host.shape != (p, nelems):
                raise CommsimError(f"buffers must have shape {(p, nelems)}, got {host.shape}")
            arena = cuda.device_array(rows + extra, dtype=dtype)
            arena[:rows].copy_to_device(np.ascontiguousarray(host, dtype=dtype).reshape(-1))
            return arena

        def get(arena: Any) -> np.ndarray:
            return arena[:rows].copy_to_host().reshape(p, nelems)

        return put, get

    def compile(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled:
        """Lower ``schedule`` (cached), upload its tables, and return put/run/get on the GPU."""
        dt = _check_dtype(dtype)
        cuda = self._init()
        plan, launches = self._device_plan(schedule, layout)
        put, get = self._buffers(plan.nranks, plan.nelems, plan.stage_elems, dt)
        chunk = plan.chunk

        def run(arena: Any) -> Any:
            for launch, groups, srcs in launches:
                launch(arena, groups, srcs, chunk)
            cuda.synchronize()
            return arena

        return Compiled(put=put, run=run, get=get)

    def native(self, schedule: Schedule, layout: Layout, dtype: Any) -> Compiled | None:
        """The collective as one direct launch (sum over rows / copy): see the module docstring."""
        dt = _check_dtype(dtype)
        cuda = self._init()
        _check_layout(schedule, layout)
        p, nelems, c, root = layout.nranks, layout.nelems, layout.count, schedule.root
        block = max(1, c // p)
        kernel, mode = _NATIVE[schedule.collective]
        kern = getattr(_kernels(), kernel)
        if mode is None:  # alltoall: every element of every rank moves
            args, work = (p, nelems, c, block), p * c
        else:
            args, work = (p, nelems, c, block, root, mode), c
        grid = max(1, min(-(-work // self.threads), self.max_blocks))
        launch = _launcher(kern, grid, self.threads)
        put, get = self._buffers(p, nelems, 0, dt)

        def run(arena: Any) -> Any:
            launch(arena, *args)
            cuda.synchronize()
            return arena

        return Compiled(put=put, run=run, get=get)

    @staticmethod
    def host_workers(nranks: int) -> int:
        return 1  # one process drives the GPU (the simulator's threads are not timed honestly)

    @staticmethod
    def native_name(collective: str) -> str:
        """The direct kernel :meth:`native` uses for ``collective``."""
        kernel, mode = _NATIVE[collective]
        return kernel if mode is None else f"{kernel}[mode={mode}]"

    # -- measurement ----------------------------------------------------------------------------
    def copy_bandwidth(
        self, nbytes: int = 256 * 2**20, iters: int = 10, *, kernel: bool = False
    ) -> float:
        """Median device-to-device copy rate in bytes copied per second.

        ``kernel=False`` times ``DeviceNDArray.copy_to_device`` (``cuMemcpyDtoD``);
        ``kernel=True`` times this backend's own copy (one overwrite group of the ``apply``
        kernel). Each copied byte is read once and written once: memory traffic is twice the rate.
        Under the simulator the number is meaningless (but the code path runs).
        """
        cuda = self._init()
        n = max(1, nbytes // 4)
        src = cuda.to_device(np.ones(n, dtype=np.float32))
        if kernel:
            arena = cuda.device_array(2 * n, dtype=np.float32)
            arena[:n].copy_to_device(src)
            la = _table(np.array([n]), np.array([n]), np.array([False]), np.array([0, 1]),
                        np.array([0]), self.chunk)  # fmt: skip
            launch = _launcher(_kernels().apply, max(1, min(la.nchunks, self.max_blocks)),
                               self.threads)  # fmt: skip
            groups, srcs = cuda.to_device(la.groups), cuda.to_device(la.srcs)

            def copy() -> None:
                launch(arena, groups, srcs, self.chunk)
        else:
            dst = cuda.device_array(n, dtype=np.float32)

            def copy() -> None:
                dst.copy_to_device(src)

        return 4 * n / statistics.median(self.time_calls(copy, iters=iters, warmup=2))

    def time_calls(self, fn: Callable[[], Any], iters: int = 10, warmup: int = 2) -> list[float]:
        """Seconds per call of ``fn`` (device work included): CUDA events on a GPU, else a clock."""
        cuda = self._init()
        for _ in range(warmup):
            fn()
        cuda.synchronize()
        out = []
        for _ in range(iters):
            if _simulated():  # the simulator's events record no time
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
                continue
            start, end = cuda.event(), cuda.event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(cuda.event_elapsed_time(start, end) / 1e3)
        return out


# -- register: ``BACKENDS["cuda"] = "commsim.exec.cuda:CudaBackend"`` (commsim.exec._backend) --
