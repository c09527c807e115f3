"""Compiled inner loop of the topology model: one round of messages with per-message costs.

numpy equivalent (sizes along the last axis, all reads of ``clock`` before any write)::

    e = max(c[src], c[dst]) + lat + units * per_unit * inv * max(slow[src], slow[dst])
    c[src] = max(c[src], e)
    c[dst] = max(c[dst], e + red * gw * slow[dst])  # overlap=False
    c[dst] = max(c[dst], e + max(0, red * gw * slow[dst] - tr))  # overlap=True, tr = e - s - lat

(``overlap``: the receiver reduces while the message arrives, :mod:`commsim.models._library`.)

Besides the clocks it keeps, per rank and size, what its clock is made of along the chain of
messages that set it (``comp[rank, component, size]``: latency, reduction, other, then transfer
time per link class): a message inherits the components of the end whose clock it waited for and
adds its own latency and its transfer time to its bottleneck link's class; a clock it raises takes
the message's components. So ``comp[r].sum(axis=0) == clock[r]`` at all times, and the components
of the last rank say what the critical path spent its time on, at every size.

A rank that sends and receives in one round takes its receive's update before its send's, whatever
their order in the round, so where the two end at the same time (frequent: a ring's every rank
sends and receives alike) its components and its critical path follow the data it received
(:data:`RECEIVE_FIRST`); a rank's clock is the same either way.

For the critical path's messages it also records, at size index ``kc``, which message last set each
rank's clock (``setter``) and, per message, the message its start waited for (``pred``).
"""

from __future__ import annotations

import numba

__all__ = ["LATENCY", "OTHER", "RECEIVE_FIRST", "REDUCTION", "TRANSFER", "round_per_message"]

LATENCY, REDUCTION, OTHER, TRANSFER = 0, 1, 2, 3  # TRANSFER + k: link class k
#: the tie rule of every kernel that keeps components: a rank's receive updates its clock before
#: its send does, so a tie keeps the receive's components (independent of message order, which
#: lets :mod:`commsim.models._periodic_clocks` stand ``g`` ranks for ``p``)
RECEIVE_FIRST = True


@numba.njit(cache=True, nogil=True)
def round_per_message(  # pragma: no cover
    clock, comp, src, dst, units, red, lat, inv, cls, slow, per_unit, gw, tmp, mcomp, kc,
    setter, pred, first_id, overlap,
):  # fmt: skip
    m = src.shape[0]
    ns = clock.shape[1]
    nc = comp.shape[1]
    for j in range(m):
        s = src[j]
        d = dst[j]
        f = slow[s] if slow[s] > slow[d] else slow[d]
        for k in range(ns):
            a = clock[s, k]
            b = clock[d, k]
            w = s if a >= b else d
            tr = units[j] * per_unit[k] * inv[j] * f
            tmp[j, k] = (a if a > b else b) + lat[j] + tr
            for c in range(nc):
                mcomp[j, c, k] = comp[w, c, k]
            mcomp[j, LATENCY, k] += lat[j]
            mcomp[j, TRANSFER + cls[j], k] += tr
        if pred.shape[0] > 0:
            pred[j] = setter[s] if clock[s, kc] >= clock[d, kc] else setter[d]
    for j in range(m):  # receivers first: see RECEIVE_FIRST
        s = src[j]
        d = dst[j]
        g = first_id + j
        f = slow[s] if slow[s] > slow[d] else slow[d]
        for k in range(ns):
            rt = red[j] * gw[k] * slow[d]
            if overlap:
                rt -= units[j] * per_unit[k] * inv[j] * f
                if rt < 0.0:
                    rt = 0.0
            e2 = tmp[j, k] + rt
            if e2 > clock[d, k]:
                clock[d, k] = e2
                for c in range(nc):
                    comp[d, c, k] = mcomp[j, c, k]
                comp[d, REDUCTION, k] += rt
                if k == kc:
                    setter[d] = g
    for j in range(m):  # then senders
        s = src[j]
        g = first_id + j
        for k in range(ns):
            e = tmp[j, k]
            if e > clock[s, k]:
                clock[s, k] = e
                for c in range(nc):
                    comp[s, c, k] = mcomp[j, c, k]
                if k == kc:
                    setter[s] = g
