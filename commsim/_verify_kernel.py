"""The verifier's inner loop, compiled (numba): apply one step to a flat ``uint64`` state.

It walks slot ranges directly instead of building per-slot index arrays, which is what makes
``verify`` fast at thousands of ranks. It only *detects* faults: on any fault it returns a
nonzero code before the state is touched by the faulty write, and the caller re-runs the step
through the numpy interpreter, which produces the message (one code path owns the wording).
The ranges must already be validated (the caller checks them first).
"""

from __future__ import annotations

import functools

import numba
import numpy as np

__all__ = ["OK", "apply_step", "warm_up"]

OK = 0


@numba.njit(cache=True, nogil=True)
def apply_step(  # pragma: no cover
    values, defined, stamp, src, dst, src_slot, dst_slot, count, reduce, nslots, tag, buf
):
    """Reads of the whole step first (into ``buf``), then its writes; returns 0 or a fault code.

    ``stamp[k] // 2 == tag`` marks a slot already written in this step, ``stamp[k] % 2`` whether
    that write reduced (one array, so one cache miss); codes: 1 read of a slot holding no data, 2 reduce into such a slot,
    3 write race. numpy equivalent: ``_Interpreter.apply`` in ``_verify.py``.
    """
    n = src.shape[0]
    pos = 0
    for t in range(n):
        base = src[t] * nslots + src_slot[t]
        for o in range(count[t]):
            k = base + o
            if not defined[k]:
                return 1
            buf[pos] = values[k]
            pos += 1
    # detect every fault before writing anything
    for t in range(n):
        base = dst[t] * nslots + dst_slot[t]
        r = reduce[t]
        for o in range(count[t]):
            k = base + o
            st = stamp[k]
            if st >> 1 == tag:
                if not (r and st & 1):
                    return 3
            else:
                if r and not defined[k]:
                    return 2
                stamp[k] = (tag << 1) | (1 if r else 0)
    pos = 0
    for t in range(n):
        base = dst[t] * nslots + dst_slot[t]
        r = reduce[t]
        for o in range(count[t]):
            k = base + o
            if r:
                values[k] += buf[pos]
            else:
                values[k] = buf[pos]
            defined[k] = True
            pos += 1
    return 0


def scratch(nelems: int) -> np.ndarray:
    """The ``stamp`` array for a state of ``nelems`` slots."""
    return np.zeros(nelems, dtype=np.int64)


@functools.cache
def warm_up() -> None:
    """Load (or compile) :func:`apply_step` once per process, so no verification is charged for it."""
    one = np.ones(1, dtype=np.int64)
    zero = np.zeros(1, dtype=np.int64)
    values, defined = np.zeros(2, dtype=np.uint64), np.ones(2, dtype=bool)
    buf = np.empty(1, dtype=np.uint64)
    apply_step(
        values, defined, scratch(2), zero, one, zero, zero, one, np.zeros(1, bool), 1, 1, buf
    )
