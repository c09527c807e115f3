"""CUDA kernels of the Numba-CUDA backend (compiled by numba on first launch, per dtype).

All kernels work on one flat device array, the **arena**: ``p`` rank buffers of ``nelems``
elements each (rank ``r``'s element ``e`` at ``r * nelems + e``), followed by a staging area.

``KERNELS`` holds them:

``apply(arena, groups, srcs, chunk)``
    Runs one launch of a plan (:mod:`commsim.exec.cuda._plan`): ``groups`` is
    ``int64 [5, G + 1]`` with rows ``dst`` (arena offset), ``len``, ``reduce``, ``ptr`` (CSR into
    ``srcs``) and ``cstart`` (exclusive prefix sum of each group's chunk count,
    ``ceil(len / chunk)``). Group ``g`` computes, for every element ``e < len[g]``,
    ``arena[dst + e] = (arena[dst + e] if reduce else 0) + sum_k arena[srcs[k] + e]``, the sources
    taken in order (an overwrite group has exactly one source). Blocks take chunks grid-stride;
    a block finds its chunk's group by binary search in ``cstart`` (once per chunk, not per
    element) and its threads stride over the chunk's elements, so consecutive threads touch
    consecutive addresses (coalesced) and unequal transfers balance across blocks; the one-source
    paths issue four elements' loads before their stores (memory-level parallelism: the loads
    cannot be hoisted past stores to the same array by the compiler). Every
    destination element belongs to exactly one group, so there are no write conflicts and no
    atomics; the summation order is the transfers' order, as in the reference interpreter.
``native_sum(arena, p, nelems, count, block, root, mode)``
    Sums the ``p`` rows' elements ``[0, count)`` (rank 0 first) and writes the sum to every rank
    (``mode`` 0, allreduce), to ``root`` (1, reduce) or to rank ``e // block`` (2, reduce-scatter).
``native_copy(arena, p, nelems, count, block, root, mode)``
    Copies element ``e`` of rank ``root`` (``mode`` 0, broadcast) or of rank ``e // block``
    (1, allgather) to every other rank.
``native_alltoall(arena, p, nelems, count, block)``
    ``arena[r, count + q*block + i] = arena[q, r*block + i]`` (alltoall's output after its input).

This module imports ``numba.cuda`` at import time (the simulator swaps the module-level ``cuda``
name inside kernels), so only :mod:`commsim.exec.cuda._program` imports it, and the backend
imports that lazily.
"""

from __future__ import annotations

import types

from numba import cuda

__all__ = ["KERNELS"]


@cuda.jit
def apply(arena, groups, srcs, chunk):  # pragma: no cover - runs on the device
    ngroups = groups.shape[1] - 1
    nchunks = groups[4, ngroups]
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    c = cuda.blockIdx.x
    while c < nchunks:
        lo = 0
        hi = ngroups
        while hi - lo > 1:  # the group whose chunks contain chunk c
            mid = (lo + hi) // 2
            if groups[4, mid] <= c:
                lo = mid
            else:
                hi = mid
        g = lo
        start = (c - groups[4, g]) * chunk
        end = start + chunk
        if end > groups[1, g]:  # not min(): two-argument min/max fail on CUDA in numba >= 0.66
            end = groups[1, g]
        d = groups[0, g]
        k0 = groups[3, g]
        k1 = groups[3, g + 1]
        e = start + tid
        if groups[2, g] == 0:  # overwrite: one source
            s = srcs[k0]
            while e + 3 * nthreads < end:  # 4 loads in flight before the stores
                v0 = arena[s + e]
                v1 = arena[s + e + nthreads]
                v2 = arena[s + e + 2 * nthreads]
                v3 = arena[s + e + 3 * nthreads]
                arena[d + e] = v0
                arena[d + e + nthreads] = v1
                arena[d + e + 2 * nthreads] = v2
                arena[d + e + 3 * nthreads] = v3
                e += 4 * nthreads
            while e < end:
                arena[d + e] = arena[s + e]
                e += nthreads
        elif k1 - k0 == 1:  # the common reduction: one source
            s = srcs[k0]
            while e + 3 * nthreads < end:
                a0 = arena[d + e]
                a1 = arena[d + e + nthreads]
                a2 = arena[d + e + 2 * nthreads]
                a3 = arena[d + e + 3 * nthreads]
                b0 = arena[s + e]
                b1 = arena[s + e + nthreads]
                b2 = arena[s + e + 2 * nthreads]
                b3 = arena[s + e + 3 * nthreads]
                arena[d + e] = a0 + b0
                arena[d + e + nthreads] = a1 + b1
                arena[d + e + 2 * nthreads] = a2 + b2
                arena[d + e + 3 * nthreads] = a3 + b3
                e += 4 * nthreads
            while e < end:
                arena[d + e] = arena[d + e] + arena[s + e]
                e += nthreads
        else:  # several reductions into the same elements, added in transfer order
            while e < end:
                acc = arena[d + e]
                for k in range(k0, k1):
                    acc += arena[srcs[k] + e]
                arena[d + e] = acc
                e += nthreads
        c += cuda.gridDim.x


@cuda.jit
def native_sum(arena, p, nelems, count, block, root, mode):  # pragma: no cover
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for e in range(start, count, stride):
        acc = arena[e]
        for r in range(1, p):
            acc += arena[r * nelems + e]
        if mode == 0:
            for r in range(p):
                arena[r * nelems + e] = acc
        elif mode == 1:
            arena[root * nelems + e] = acc
        else:
            arena[(e // block) * nelems + e] = acc


@cuda.jit
def native_copy(arena, p, nelems, count, block, root, mode):  # pragma: no cover
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for e in range(start, count, stride):
        src = root if mode == 0 else e // block
        v = arena[src * nelems + e]
        for r in range(p):
            if r != src:
                arena[r * nelems + e] = v


@cuda.jit
def native_alltoall(arena, p, nelems, count, block):  # pragma: no cover
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, p * count, stride):
        r = i // count
        j = i - r * count
        q = j // block
        arena[r * nelems + count + j] = arena[q * nelems + r * block + (j - q * block)]


KERNELS = types.SimpleNamespace(
    apply=apply,
    native_sum=native_sum,
    native_copy=native_copy,
    native_alltoall=native_alltoall,
)
