r"""The Numba-CUDA backend's device program: a :class:`~commsim.exec.cuda._plan.Plan`'s tables on
the GPU, launched step by step, and the direct kernels that stand in for a native collective.

:func:`upload` copies every launch table of a plan to the device once and configures ``apply``
(:mod:`commsim.exec.cuda._kernels`) for it: a grid of ``min(chunks, max_blocks)`` blocks of
``threads`` threads. :func:`compiled` allocates the arena on ``put`` (the ``p`` rank rows, then
the plan's staging area), runs the launches in order and synchronizes on ``run``, and copies the
rows back on ``get``. The dtype only selects numba's specialization of the kernels.

:class:`Geometry` is the launch geometry (:func:`geometry`): 256 threads per block, 8 elements
per thread per chunk and 8 blocks per SM on a GPU; 4, 2 and 2 blocks in all under numba's CUDA
simulator, which runs a Python thread per CUDA thread. On a real GPU numba warns
(``NumbaPerformanceWarning``) about grids under 128 blocks when a launch is configured; it is
silenced here, where launches are configured, since small steps get small grids on purpose.

:func:`copy_bandwidth` and :func:`time_calls` measure the device (CUDA events on a GPU, a clock
under the simulator, whose events record no time). This module imports ``numba.cuda``; the
backend imports it only when it starts the device.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from commsim.errors import CommsimError
from commsim.exec._backend import Compiled
from commsim.exec._layout import Layout
from commsim.exec.cuda._kernels import KERNELS
from commsim.exec.cuda._plan import Plan, launch_table

__all__ = [
    "Geometry",
    "compiled",
    "copy_bandwidth",
    "geometry",
    "native_compiled",
    "time_calls",
    "upload",
]

# launch geometry: (threads per block, elements per thread per chunk, blocks per SM)
_GPU_GEOMETRY = (256, 8, 8)
_SIM_GEOMETRY = (4, 2, 2)  # the simulator runs a Python thread per CUDA thread: keep it small

# a configured kernel, and the device copies of one launch's group table and sources
DeviceLaunch = tuple[Callable[..., Any], Any, Any]


class Geometry(NamedTuple):
    """How kernels are launched: ``threads`` per block, ``chunk`` elements per chunk, at most
    ``max_blocks`` blocks (grid-stride beyond), and whether numba simulates the GPU."""

    threads: int
    chunk: int
    max_blocks: int
    simulated: bool


def geometry(
    device: int | None,
    threads: int | None,
    per_thread: int | None,
    blocks_per_sm: int | None,
    *,
    simulated: bool,
) -> Geometry:
    """Select GPU ``device`` (``None``: numba's current one) and fill in the default geometry."""
    if device is not None:
        cuda.select_device(device)
    defaults = _SIM_GEOMETRY if simulated else _GPU_GEOMETRY
    t, per, per_sm = (
        a if a is not None else d
        for a, d in zip((threads, per_thread, blocks_per_sm), defaults, strict=True)
    )
    sms = 1 if simulated else cuda.get_current_device().MULTIPROCESSOR_COUNT
    return Geometry(t, t * per, per_sm * sms, simulated)


def _launcher(kernel: Any, blocks: int, g: Geometry) -> Callable[..., Any]:
    """``kernel`` configured for up to ``blocks`` blocks (under the simulator: at each call,
    since the simulator stores the configuration on the kernel object itself)."""
    grid = max(1, min(blocks, g.max_blocks))
    if g.simulated:
        return lambda *args: kernel[grid, g.threads](*args)
    from numba.core.errors import NumbaPerformanceWarning

    with warnings.catch_warnings():  # small steps get small grids on purpose
        warnings.simplefilter("ignore", NumbaPerformanceWarning)
        return kernel[grid, g.threads]


def upload(pl: Plan, g: Geometry) -> list[DeviceLaunch]:
    """Every launch of ``pl``, configured, with its tables on the device (once per plan)."""
    return [
        (
            _launcher(KERNELS.apply, la.nchunks, g),
            cuda.to_device(la.groups),
            cuda.to_device(la.srcs),
        )
        for sp in pl.steps
        for la in sp.launches
    ]


def _check_memory(nbytes: int, simulated: bool) -> None:
    if simulated:
        return
    try:
        free, total = cuda.current_context().get_memory_info()
    except NotImplementedError:  # an external memory manager that cannot say
        return
    if nbytes > free:
        gib = 2.0**30
        raise CommsimError(
            f"the cuda backend needs {nbytes / gib:.2f} GiB of GPU memory for this schedule "
            f"and size, the GPU has {free / gib:.2f} of {total / gib:.2f} GiB free"
        )


def _buffers(
    p: int, nelems: int, arena_elems: int, dtype: np.dtype, simulated: bool
) -> tuple[Callable[[np.ndarray], Any], Callable[[Any], np.ndarray]]:
    """``put`` (host ``[p, nelems]`` into a new arena of ``arena_elems``) and ``get`` (its rows)."""
    rows = p * nelems
    _check_memory(arena_elems * dtype.itemsize, simulated)

    def put(host: np.ndarray) -> Any:
        host = np.asarray(host)
        if host.shape != (p, nelems):
            raise CommsimError(f"buffers must have shape {(p, nelems)}, got {host.shape}")
        arena = cuda.device_array(arena_elems, dtype=dtype)
        arena[:rows].copy_to_device(np.ascontiguousarray(host, dtype=dtype).reshape(-1))
        return arena

    def get(arena: Any) -> np.ndarray:
        return arena[:rows].copy_to_host().reshape(p, nelems)

    return put, get


def compiled(pl: Plan, launches: list[DeviceLaunch], dtype: np.dtype, g: Geometry) -> Compiled:
    """Plan ``pl`` on arenas of ``dtype``: ``run`` launches every step in order and waits."""
    put, get = _buffers(pl.nranks, pl.nelems, pl.arena_elems, dtype, g.simulated)

    def run(arena: Any) -> Any:
        for launch, groups, srcs in launches:
            launch(arena, groups, srcs, pl.chunk)
        cuda.synchronize()
        return arena

    return Compiled(put=put, run=run, get=get)


def native_compiled(
    kernel: str, mode: int | None, layout: Layout, root: int, dtype: np.dtype, g: Geometry
) -> Compiled:
    """The direct kernel ``kernel`` (with ``mode``; ``None``: it takes no root and mode) as one
    launch over the element index, on the same arena rows as the schedule."""
    p, nelems, c = layout.nranks, layout.nelems, layout.count
    block = max(1, c // p)
    if mode is None:  # alltoall: every element of every rank moves
        args, work = (p, nelems, c, block), p * c
    else:
        args, work = (p, nelems, c, block, root, mode), c
    launch = _launcher(getattr(KERNELS, kernel), -(-work // g.threads), g)
    put, get = _buffers(p, nelems, p * nelems, dtype, g.simulated)

    def run(arena: Any) -> Any:
        launch(arena, *args)
        cuda.synchronize()
        return arena

    return Compiled(put=put, run=run, get=get)


def time_calls(fn: Callable[[], Any], iters: int, warmup: int, simulated: bool) -> list[float]:
    """Seconds per call of ``fn`` (device work included): CUDA events on a GPU, else a clock."""
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    out = []
    for _ in range(iters):
        if simulated:  # the simulator's events record no time
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


def _kernel_copy(src: Any, n: int, g: Geometry) -> Callable[[], None]:
    """A copy of ``src`` by one overwrite group of the ``apply`` kernel."""
    arena = cuda.device_array(2 * n, dtype=np.float32)
    arena[:n].copy_to_device(src)
    la = launch_table(np.array([n]), np.array([n]), np.array([False]), np.array([0, 1]),
                      np.array([0]), g.chunk)  # fmt: skip
    launch = _launcher(KERNELS.apply, la.nchunks, g)
    groups, srcs = cuda.to_device(la.groups), cuda.to_device(la.srcs)
    return lambda: launch(arena, groups, srcs, g.chunk)


def copy_bandwidth(nbytes: int, iters: int, kernel: bool, g: Geometry) -> float:
    """Median device-to-device copy rate in bytes copied per second (see the backend's method)."""
    n = max(1, nbytes // 4)
    src = cuda.to_device(np.ones(n, dtype=np.float32))
    if kernel:
        copy = _kernel_copy(src, n, g)
    else:
        dst = cuda.device_array(n, dtype=np.float32)
        copy = lambda: dst.copy_to_device(src)
    if not g.simulated:  # an idle GPU runs at low clocks: keep it busy until they have risen
        end = time.perf_counter() + _CLOCK_RAMP_S
        while time.perf_counter() < end:
            copy()
            cuda.synchronize()
    return 4 * n / statistics.median(time_calls(copy, iters, 2, g.simulated))


# Seconds of back-to-back copies before a copy rate is timed. An H200 idles at 345 MHz SM clock
# and reaches 1980 MHz under load (nvidia-smi on a lent H200, docs/benchmarks.md); a cold
# 20-copy measurement there read 1.14 TB/s where a warm one reads more (bench_cuda, 2026-11-26).
_CLOCK_RAMP_S = 0.5
