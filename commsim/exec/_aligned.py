"""Host buffers aligned to the page, as MPI benchmarks allocate them.

Where a buffer starts changes what moving it costs. On the 2-vCPU virtual machine of
``docs/validation.md`` (MPICH's shared memory, two ranks), recursive doubling's step at 64 KiB,
``Sendrecv`` of a buffer and ``numpy.add`` of what arrived into it, took 23 µs when the buffer
started on a 64-byte cache line and 50–57 µs when it started 16, 32 or 48 bytes past one, the
alignment ``malloc`` (and so numpy) gives: whether a run was fast depended on where its
allocations happened to land. The OSU micro-benchmarks align every buffer to the page
(``posix_memalign``), and so do commsim's MPI calibration and its mpi4py executor, so the
transport is timed, and run, on the same footing every time.
"""

from __future__ import annotations

import mmap
import operator
from typing import Any

import numpy as np

from commsim.errors import ParameterError

__all__ = ["PAGE", "aligned_copy", "aligned_empty", "aligned_zeros"]

#: bytes: where an aligned buffer starts, this system's page (``sysconf(_SC_PAGESIZE)``, as
#: the OSU benchmarks ask), so a multiple of every cache line too
PAGE = mmap.PAGESIZE


def aligned_empty(shape: Any, dtype: Any, align: int = PAGE) -> np.ndarray:
    """An uninitialised array whose data start at a multiple of ``align`` bytes (an empty
    array has no data to place: it is numpy's own).

    Examples:
        >>> a = aligned_empty((3, 5), np.float32)
        >>> a.shape, a.dtype, a.ctypes.data % PAGE
        ((3, 5), dtype('float32'), 0)
        >>> aligned_empty(-1, np.float32)
        Traceback (most recent call last):
        ...
        commsim.errors.ParameterError: aligned_empty: shape (-1,) has a negative dimension
    """
    dims = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    dims = tuple(operator.index(d) for d in dims)
    if any(d < 0 for d in dims):
        raise ParameterError(f"aligned_empty: shape {dims} has a negative dimension")
    if operator.index(align) < 1:
        raise ParameterError(f"aligned_empty: align must be >= 1 byte, got {align!r}")
    dt = np.dtype(dtype)
    count = int(np.prod(dims, dtype=np.int64))
    if count == 0:
        return np.empty(dims, dt)
    raw = np.empty(count * dt.itemsize + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start : start + count * dt.itemsize].view(dt).reshape(dims)


def aligned_zeros(shape: Any, dtype: Any, align: int = PAGE) -> np.ndarray:
    """:func:`aligned_empty`, filled with zeros."""
    out = aligned_empty(shape, dtype, align)
    out.reshape(-1).view(np.uint8).fill(0)  # every byte: any dtype, a 0-d array too
    return out


def aligned_copy(a: Any, align: int = PAGE) -> np.ndarray:
    """A copy of ``a`` in an aligned buffer (its shape and dtype).

    Examples:
        >>> b = aligned_copy(np.arange(4.0))
        >>> b.tolist(), b.ctypes.data % PAGE
        ([0.0, 1.0, 2.0, 3.0], 0)
    """
    a = np.asarray(a)
    out = aligned_empty(a.shape, a.dtype, align)
    np.copyto(out, a)
    return out
