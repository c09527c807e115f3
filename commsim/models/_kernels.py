"""Compiled inner loops of the models (numba), one pass over a round's messages each.

They exist for speed only; each has a one-line numpy equivalent in its docstring and the tests
compare the model against closed forms, so a kernel bug cannot hide.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "fast_single_port_step",
    "fast_single_port_step_1d",
    "participants_max",
    "single_port_round",
]


@numba.njit(cache=True, nogil=True)
def single_port_round(clock, src, dst, units, red, alpha, bw, gw, tmp):  # pragma: no cover
    """One round (a matching) of rendezvous messages; updates ``clock`` ``[p, S]`` in place.

    numpy equivalent: ``e = max(c[src], c[dst]) + alpha + units*bw; c[src] = max(c[src], e);
    c[dst] = max(c[dst], e + red*gw)``, all reads of ``c`` before any write.
    """
    m = src.shape[0]
    ns = clock.shape[1]
    for j in range(m):
        s = src[j]
        d = dst[j]
        for k in range(ns):
            a = clock[s, k]
            b = clock[d, k]
            tmp[j, k] = (a if a > b else b) + alpha + units[j] * bw[k]
    for j in range(m):
        s = src[j]
        d = dst[j]
        for k in range(ns):
            e = tmp[j, k]
            if e > clock[s, k]:
                clock[s, k] = e
            e2 = e + red[j] * gw[k]
            if e2 > clock[d, k]:
                clock[d, k] = e2


@numba.njit(cache=True, nogil=True)
def participants_max(clock, src, dst, out):  # pragma: no cover
    """``out[k] = max(out[k], clock[src, k].max(), clock[dst, k].max())``."""
    ns = clock.shape[1]
    for j in range(src.shape[0]):
        s = src[j]
        d = dst[j]
        for k in range(ns):
            v = clock[s, k]
            if v > out[k]:
                out[k] = v
            v = clock[d, k]
            if v > out[k]:
                out[k] = v


@numba.njit(cache=True, nogil=True)
def fast_single_port_step(  # pragma: no cover
    clock, src, dst, src_slot, count, reduce, offsets, alpha, bw, gw, tmp, seen_s, seen_d, tag, out
):
    """A whole step whose transfers are distinct messages on distinct ports, in one pass.

    Returns False, without touching ``clock``, when the step is not of that shape (a rank sends
    or receives twice, or a transfer is local); the caller then takes the general path.
    Otherwise it does what :func:`single_port_round` and :func:`participants_max` do. The step's
    last finish (``out``) is the largest receiver finish: every message ends no earlier than both
    of its ends' old clocks, so no participant's clock can exceed it.
    ``tmp`` is ``[2 * transfers, sizes]``: end times, then receiver finish times.
    """
    m = src.shape[0]
    ns = clock.shape[1]
    if tmp.shape[0] < 2 * m:
        return False
    for j in range(m):
        s = src[j]
        d = dst[j]
        if s == d or seen_s[s] == tag or seen_d[d] == tag:
            return False
        seen_s[s] = tag
        seen_d[d] = tag
        units = offsets[src_slot[j] + count[j]] - offsets[src_slot[j]]
        r = reduce[j]
        for k in range(ns):
            a = clock[s, k]
            b = clock[d, k]
            e = (a if a > b else b) + alpha + units * bw[k]
            tmp[j, k] = e
            if r:
                e = e + units * gw[k]
            tmp[m + j, k] = e
            if e > out[k]:
                out[k] = e
    for j in range(m):
        s = src[j]
        d = dst[j]
        for k in range(ns):
            e = tmp[j, k]
            if e > clock[s, k]:
                clock[s, k] = e
            e = tmp[m + j, k]
            if e > clock[d, k]:
                clock[d, k] = e
    return True


@numba.njit(cache=True, nogil=True)
def fast_single_port_step_1d(  # pragma: no cover
    clock, src, dst, src_slot, count, reduce, offsets, alpha, bw, gw, tmp, seen_s, seen_d, tag, out
):
    """:func:`fast_single_port_step` for one message size (``clock`` is ``[p]``): no size loop."""
    m = src.shape[0]
    if tmp.shape[0] < 2 * m:
        return False
    mx = out[0]
    for j in range(m):
        s = src[j]
        d = dst[j]
        if s == d or seen_s[s] == tag or seen_d[d] == tag:
            return False
        seen_s[s] = tag
        seen_d[d] = tag
        units = offsets[src_slot[j] + count[j]] - offsets[src_slot[j]]
        a = clock[s]
        b = clock[d]
        e = (a if a > b else b) + alpha + units * bw
        tmp[j] = e
        if reduce[j]:
            e = e + units * gw
        tmp[m + j] = e
        if e > mx:
            mx = e
    for j in range(m):
        e = tmp[j]
        s = src[j]
        if e > clock[s]:
            clock[s] = e
        e = tmp[m + j]
        d = dst[j]
        if e > clock[d]:
            clock[d] = e
    out[0] = mx
    return True


def warm_up() -> None:
    """Compile the kernels (or load them from the cache) once."""
    c = np.zeros((2, 1))
    i = np.zeros(1, dtype=np.int64)
    f = np.zeros(1)
    single_port_round(c, i, i, i, i, 0.0, f, f, np.zeros((1, 1)))
    participants_max(c, i, i, f)
    fast_single_port_step(
        c,
        i,
        i + 1,
        i,
        i + 1,
        np.zeros(1, dtype=np.bool_),
        np.arange(3),
        0.0,
        f,
        f,
        np.zeros((1, 1)),
        np.zeros(2, dtype=np.int64),
        np.zeros(2, dtype=np.int64),
        1,
        f,
    )
