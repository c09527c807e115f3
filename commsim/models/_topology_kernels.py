"""Compiled inner loop of the topology model: one round of messages with per-message costs.

numpy equivalent (sizes along the last axis, all reads of ``clock`` before any write)::

    e = max(c[src], c[dst]) + lat + units * per_unit * inv * max(slow[src], slow[dst])
    c[src] = max(c[src], e)
    c[dst] = max(c[dst], e + red * gw * slow[dst])

For the critical path it also records, at size index ``kc``, which message last set each rank's
clock (``setter``) and, per message, the message that set the clock its start waited for
(``pred``, -1 for none).
"""

from __future__ import annotations

import numba

__all__ = ["round_per_message"]


@numba.njit(cache=True, nogil=True)
def round_per_message(  # pragma: no cover
    clock, src, dst, units, red, lat, inv, slow, per_unit, gw, tmp, kc, setter, pred, first_id
):
    m = src.shape[0]
    ns = clock.shape[1]
    for j in range(m):
        s = src[j]
        d = dst[j]
        f = slow[s] if slow[s] > slow[d] else slow[d]
        for k in range(ns):
            a = clock[s, k]
            b = clock[d, k]
            tmp[j, k] = (a if a > b else b) + lat[j] + units[j] * per_unit[k] * inv[j] * f
        if pred.shape[0] > 0:
            pred[j] = setter[s] if clock[s, kc] >= clock[d, kc] else setter[d]
    for j in range(m):
        s = src[j]
        d = dst[j]
        g = first_id + j
        for k in range(ns):
            e = tmp[j, k]
            if e > clock[s, k]:
                clock[s, k] = e
                if k == kc:
                    setter[s] = g
            e2 = e + red[j] * gw[k] * slow[d]
            if e2 > clock[d, k]:
                clock[d, k] = e2
                if k == kc:
                    setter[d] = g
