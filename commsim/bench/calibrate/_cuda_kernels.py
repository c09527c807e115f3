"""The CUDA microbenchmarks' kernels (numba, compiled on first launch).

``add(a, b)``
    ``a[i] += b[i]`` for every ``i`` of ``a``, grid-stride (any grid covers any length).
``empty(a)``
    Does nothing: one launch's cost, beside the work of any step.

This module imports ``numba.cuda`` at import time (under the simulator, numba swaps the
module-level ``cuda`` name inside kernels), so only :mod:`._cuda_bench` imports it, lazily.
"""

from __future__ import annotations

from numba import cuda

__all__ = ["add", "empty"]


@cuda.jit
def add(a, b):  # pragma: no cover - runs on the device
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < a.size:
        a[i] += b[i]
        i += stride


@cuda.jit
def empty(a):  # pragma: no cover - runs on the device
    pass
