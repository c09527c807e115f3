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

from commsim.models import _shared_kernels

__all__ = ["fast_class_step", "periodic_class_step", "shared_class_step"]

_LATENCY, _REDUCTION, _TRANSFER = 0, 1, 3  # commsim.models._topology_kernels' components


@numba.njit(cache=True, nogil=True, inline="always")
def _message_end(
    clock, comp, a_row, b_row, u, x, lat, inv, per_unit, tmp, mcomp, j
):  # pragma: no cover
    """Message ``j``'s end per size into ``tmp[j]``, and its components into ``mcomp[j]``:
    from the later of rows ``a_row`` (sender) and ``b_row`` (receiver), plus its class's
    latency and ``u`` units' transfer time."""
    for k in range(clock.shape[1]):
        a = clock[a_row, k]
        b = clock[b_row, k]
        w = a_row if a >= b else b_row
        tr = u * per_unit[k] * inv[x]
        tmp[j, k] = (a if a > b else b) + lat[x] + tr
        for q in range(comp.shape[1]):
            mcomp[j, q, k] = comp[w, q, k]
        mcomp[j, _LATENCY, k] += lat[x]
        mcomp[j, _TRANSFER + x, k] += tr


@numba.njit(cache=True, nogil=True, inline="always")
def _receive(
    clock, comp, row, u, red, x, inv, per_unit, gw, overlap, tmp, mcomp, j
):  # pragma: no cover
    """Row ``row`` (the receiver) takes message ``j``'s end plus its reduction (what of it the
    transfer does not hide, with ``overlap``) where that is later."""
    for k in range(clock.shape[1]):
        rt = red * gw[k]
        if overlap:
            rt -= u * per_unit[k] * inv[x]
            if rt < 0.0:
                rt = 0.0
        e2 = tmp[j, k] + rt
        if e2 > clock[row, k]:
            clock[row, k] = e2
            for q in range(comp.shape[1]):
                comp[row, q, k] = mcomp[j, q, k]
            comp[row, _REDUCTION, k] += rt


@numba.njit(cache=True, nogil=True, inline="always")
def _send(clock, comp, row, tmp, mcomp, j):  # pragma: no cover
    """Row ``row`` (the sender) takes message ``j``'s end where that is later."""
    for k in range(clock.shape[1]):
        e = tmp[j, k]
        if e > clock[row, k]:
            clock[row, k] = e
            for q in range(comp.shape[1]):
                comp[row, q, k] = mcomp[j, q, k]


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
        _message_end(clock, comp, s, d, u, x, lat, inv, per_unit, tmp, mcomp, j)
    for j in range(m):  # the clocks, in the round kernel's order: receivers, then senders
        s = src[j]
        d = dst[j]
        x = 1 if server[s] != server[d] else 0
        u = offsets[src_slot[j] + count[j]] - offsets[src_slot[j]]
        sent[x, s] += u
        received[x, d] += u
        red = u if reduce[j] else 0
        _receive(clock, comp, d, u, red, x, inv, per_unit, gw, overlap, tmp, mcomp, j)
    for j in range(m):
        _send(clock, comp, src[j], tmp, mcomp, j)
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


@numba.njit(cache=True, nogil=True)
def _max_class_id(values, bits, index, nval, a, b, ns, nc):  # pragma: no cover
    """The id of row ``a`` updated by row ``b`` as the dense kernel updates a clock: per size,
    ``b``'s clock and components where its clock is later, else ``a``'s."""
    row = nval[0]
    takes_a = True
    takes_b = True
    for k in range(ns):
        w = b if values[b, k] > values[a, k] else a
        if w == b:
            takes_a = False
        for q in range(nc + 1):
            col = k + q * ns
            values[row, col] = values[w, col]
            if w == a and bits[a, col] != bits[b, col]:
                takes_b = False
    if takes_a:
        return a
    if takes_b:
        return b
    return _shared_kernels.find_or_add(values, bits, index, nval, row)


@numba.njit(cache=True, nogil=True)
def shared_class_step(  # pragma: no cover
    ids, values, bits, index, nval, src, dst, src_slot, dst_slot, count, reduce, offsets, unit,
    server, lat, inv, per_unit, gw, overlap, ends, seen_s, seen_d, tag, last, sent, received,
    ekey, eval_, mkey, mval, stamp,
):  # fmt: skip
    """:func:`fast_class_step` on shared clocks (:mod:`commsim.models._shared_kernels`): a row
    of ``values`` is one clock vector ``[sizes]`` then its components ``[components, sizes]``,
    and ranks hold row ids. Returns 1 done, 0 not of the fast shape (no id changed), -1 when
    the table may fill (compact and call again). The arithmetic is :func:`fast_class_step`'s,
    on the same operands, so the numbers are its bits.
    """
    m = src.shape[0]
    p = ids.shape[0]
    ns = per_unit.shape[0]
    nc = values.shape[1] // ns - 1
    nslots = offsets.shape[0] - 1
    if m > p or ends.shape[1] < m:
        return 0
    if nval[0] + 4 * m + 2 > values.shape[0]:
        return -1
    emask = ekey.shape[0] - 1
    la, lb, lu, lr, lx, le, le2 = -1, -1, -1, -1, -1, -1, -1
    for j in range(m):  # checks and message ends: no rank's id changes here
        s = src[j]
        d = dst[j]
        c = count[j]
        a0 = src_slot[j]
        b0 = dst_slot[j]
        if s < 0 or s >= p or d < 0 or d >= p or c < 1 or a0 < 0 or b0 < 0:
            return 0
        if a0 > nslots - c or b0 > nslots - c:
            return 0
        if s == d or seen_s[s] == tag or seen_d[d] == tag:
            return 0
        seen_s[s] = tag
        seen_d[d] = tag
        if unit > 0:
            u = c * unit
        else:
            u = offsets[a0 + c] - offsets[a0]
            if offsets[b0 + c] - offsets[b0] != u:
                return 0
        r = 1 if reduce[j] else 0
        x = 1 if server[s] != server[d] else 0
        ia = ids[s]
        ib = ids[d]
        if ia == la and ib == lb and u == lu and r == lr and x == lx:
            ends[0, j] = le
            ends[1, j] = le2
            continue
        slot = ((ia * 1000003) ^ (ib * 7919) ^ (u * 31) ^ (r * 2 + x)) & emask
        hit = ekey[slot, 0] == ia and ekey[slot, 1] == ib and ekey[slot, 2] == u
        if hit and ekey[slot, 3] == r * 2 + x:
            le, le2 = eval_[slot, 0], eval_[slot, 1]
        else:
            row = nval[0]
            for k in range(ns):
                a = values[ia, k]
                b = values[ib, k]
                w = ia if a >= b else ib
                tr = u * per_unit[k] * inv[x]
                values[row, k] = (a if a > b else b) + lat[x] + tr
                for q in range(nc):
                    values[row, ns + q * ns + k] = values[w, ns + q * ns + k]
                values[row, ns + _LATENCY * ns + k] += lat[x]
                values[row, ns + (_TRANSFER + x) * ns + k] += tr
            le = _shared_kernels.find_or_add(values, bits, index, nval, row)
            row = nval[0]
            red = u if r else 0
            for k in range(ns):
                rt = red * gw[k]
                if overlap:
                    rt -= u * per_unit[k] * inv[x]
                    if rt < 0.0:
                        rt = 0.0
                values[row, k] = values[le, k] + rt
                for q in range(nc):
                    values[row, ns + q * ns + k] = values[le, ns + q * ns + k]
                values[row, ns + _REDUCTION * ns + k] += rt
            le2 = _shared_kernels.find_or_add(values, bits, index, nval, row)
            ekey[slot, 0] = ia
            ekey[slot, 1] = ib
            ekey[slot, 2] = u
            ekey[slot, 3] = r * 2 + x
            eval_[slot, 0] = le
            eval_[slot, 1] = le2
        la, lb, lu, lr, lx = ia, ib, u, r, x
        ends[0, j] = le
        ends[1, j] = le2
    xa, xb, xv = -1, -1, -1  # the last update taken
    mmask = mkey.shape[0] - 1
    for j in range(m):
        s = src[j]
        d = dst[j]
        x = 1 if server[s] != server[d] else 0
        c = count[j]
        u = c * unit if unit > 0 else offsets[src_slot[j] + c] - offsets[src_slot[j]]
        sent[x, s] += u
        received[x, d] += u
    for side in (1, 0):  # the clocks, in the round kernel's order: receivers, then senders
        for j in range(m):
            rk = src[j] if side == 0 else dst[j]
            a = ids[rk]
            b = ends[side, j]
            if a == b:
                continue
            if a == xa and b == xb:
                ids[rk] = xv
                continue
            slot = ((a * 1000003) ^ (b * 7919)) & mmask
            if mkey[slot, 0] == a and mkey[slot, 1] == b:
                v = mval[slot]
            else:
                v = _max_class_id(values, bits, index, nval, a, b, ns, nc)
                mkey[slot, 0] = a
                mkey[slot, 1] = b
                mval[slot] = v
            ids[rk] = v
            xa, xb, xv = a, b, v
    for j in range(m):  # the step's end: its participants' latest clock
        for side in range(2):
            v = ids[src[j]] if side == 0 else ids[dst[j]]
            if stamp[v] != tag:
                stamp[v] = tag
                for k in range(ns):
                    if values[v, k] > last[k]:
                        last[k] = values[v, k]
    return 1


@numba.njit(cache=True, nogil=True)
def periodic_class_step(  # pragma: no cover
    clock, comp, src, dst, count, reduce, touching, unit, g, server, lat, inv, per_unit, gw,
    overlap, tmp, mcomp, last, sent, received,
):  # fmt: skip
    """:func:`fast_class_step` on **periodic** clocks: ``clock`` (``[g, sizes]``) and ``comp``
    hold ranks ``0 .. g-1``, rank ``r`` standing for every rank ``r mod g``
    (:mod:`commsim.models._periodic_clocks`). Only the messages ``touching`` (indices, in the
    step's order) one of those ranks are visited: their ends read ``clock[src mod g]`` and
    ``clock[dst mod g]``, and only ends below ``g`` are updated, in the step's order, with
    :func:`fast_class_step`'s arithmetic on the same operands (so the same bits). The caller
    has checked the step's shape once: every rank sends and receives at most one message, and
    the shift by ``g`` maps the step onto itself. ``sent``/``received`` (``[2, g]``) add the
    units of ranks ``0 .. g-1`` by class.
    """
    m = touching.shape[0]
    ns = clock.shape[1]
    for jj in range(m):  # message ends, from the old clocks
        j = touching[jj]
        x = 1 if server[src[j]] != server[dst[j]] else 0
        u = count[j] * unit
        _message_end(clock, comp, src[j] % g, dst[j] % g, u, x, lat, inv, per_unit, tmp, mcomp, jj)
    for jj in range(m):  # the clocks of ranks 0 .. g-1, in the round kernel's order:
        j = touching[jj]  # receivers, then senders
        d = dst[j]
        if d < g:
            x = 1 if server[src[j]] != server[d] else 0
            u = count[j] * unit
            received[x, d] += u
            red = u if reduce[j] else 0
            _receive(clock, comp, d, u, red, x, inv, per_unit, gw, overlap, tmp, mcomp, jj)
    for jj in range(m):
        j = touching[jj]
        s = src[j]
        if s < g:
            x = 1 if server[s] != server[dst[j]] else 0
            sent[x, s] += count[j] * unit
            _send(clock, comp, s, tmp, mcomp, jj)
    for jj in range(m):  # the step's end: its participants' latest clock
        j = touching[jj]
        for side in range(2):
            r = src[j] if side == 0 else dst[j]
            if r < g:
                for k in range(ns):
                    v = clock[r, k]
                    if v > last[k]:
                        last[k] = v
