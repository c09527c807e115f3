"""Compiled step of :class:`commsim.models.TwoLevelHockney`'s direct run: per-message α, β by
link class, read from the ranks' servers, with no network routes.

numpy equivalent of one step of distinct messages (sizes along the last axis, every read of
``clock`` before any write; ``x = server[src] != server[dst]`` is the message's class, 0 inside
a server and 1 between servers)::

    tr = units * per_unit * inv[x]
    e = max(c[src], c[dst]) + lat[x] + tr
    c[src] = max(c[src], e)
    c[dst] = max(c[dst], e + red * gw)  # overlap: e + max(0, red * gw - tr)

which is :func:`commsim.models._topology_kernels.round_per_message` on the two-level network
(whose every route is one link up and one link down, of the message's class), written for a
whole step at once and with the same arithmetic, so the two give the same bits. The clock
components (``comp``: latency, reduction, other, transfer per class) follow the chain of
messages that set each clock, as there.
"""

from __future__ import annotations

import numba

__all__ = ["fast_class_step"]

_LATENCY, _REDUCTION, _TRANSFER = 0, 1, 3  # commsim.models._topology_kernels' components


@numba.njit(cache=True, nogil=True)
def fast_class_step(  # pragma: no cover
    clock, comp, src, dst, src_slot, dst_slot, count, reduce, offsets, server, lat, inv,
    per_unit, gw, overlap, tmp, mcomp, seen_s, seen_d, tag, last, sent, received,
):  # fmt: skip
    """One step whose transfers are distinct messages on distinct ranks.

    Returns False, touching nothing but the scratch, when the step is not of that shape or not
    valid (the caller then takes the general path, which names the error). ``tmp``
    (``[>= transfers, sizes]``) and ``mcomp`` (``[>= transfers, components, sizes]``) are
    scratch; ``last`` (``[sizes]``) becomes the largest clock of the step's participants;
    ``sent``/``received`` (``[2, p]``) add each message's units at its ends, by class.
    """
    m = src.shape[0]
    p = clock.shape[0]
    ns = clock.shape[1]
    nc = comp.shape[1]
    nslots = offsets.shape[0] - 1
    if tmp.shape[0] < m or mcomp.shape[0] < m:
        return False
    for j in range(m):  # checks first: a step of the wrong shape changes no clock
        s = src[j]
        d = dst[j]
        c = count[j]
        a0 = src_slot[j]
        b0 = dst_slot[j]
        if s < 0 or s >= p or d < 0 or d >= p or c < 1 or a0 < 0 or b0 < 0:
            return False
        if a0 > nslots - c or b0 > nslots - c:
            return False
        if s == d or seen_s[s] == tag or seen_d[d] == tag:
            return False
        seen_s[s] = tag
        seen_d[d] = tag
        if offsets[b0 + c] - offsets[b0] != offsets[a0 + c] - offsets[a0]:
            return False
    for j in range(m):  # message ends, from the old clocks
        s = src[j]
        d = dst[j]
        x = 1 if server[s] != server[d] else 0
        u = offsets[src_slot[j] + count[j]] - offsets[src_slot[j]]
        for k in range(ns):
            a = clock[s, k]
            b = clock[d, k]
            w = s if a >= b else d
            tr = u * per_unit[k] * inv[x]
            tmp[j, k] = (a if a > b else b) + lat[x] + tr
            for q in range(nc):
                mcomp[j, q, k] = comp[w, q, k]
            mcomp[j, _LATENCY, k] += lat[x]
            mcomp[j, _TRANSFER + x, k] += tr
    for j in range(m):  # the clocks, in the round kernel's order
        s = src[j]
        d = dst[j]
        x = 1 if server[s] != server[d] else 0
        u = offsets[src_slot[j] + count[j]] - offsets[src_slot[j]]
        red = u if reduce[j] else 0
        sent[x, s] += u
        received[x, d] += u
        for k in range(ns):
            e = tmp[j, k]
            if e > clock[s, k]:
                clock[s, k] = e
                for q in range(nc):
                    comp[s, q, k] = mcomp[j, q, k]
            rt = red * gw[k]
            if overlap:
                rt -= u * per_unit[k] * inv[x]
                if rt < 0.0:
                    rt = 0.0
            e2 = e + rt
            if e2 > clock[d, k]:
                clock[d, k] = e2
                for q in range(nc):
                    comp[d, q, k] = mcomp[j, q, k]
                comp[d, _REDUCTION, k] += rt
    for j in range(m):  # the step's end: its participants' latest clock
        s = src[j]
        d = dst[j]
        for k in range(ns):
            v = clock[s, k]
            if v > last[k]:
                last[k] = v
            v = clock[d, k]
            if v > last[k]:
                last[k] = v
    return True
