"""Compiled inner loops of the models (numba), one pass over a round's messages each.

They exist for speed only; each has a one-line numpy equivalent in its docstring and the tests
compare the model against closed forms, so a kernel bug cannot hide.

The per-transfer check of the two fast kernels is written out in each on purpose: moving it into
a shared compiled helper (inlined by numba or called) made ring predict at p = 16,384 go from
~6 s to 38-150 s on the benchmark machine.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "fast_single_port_step",
    "fast_single_port_step_1d",
    "participants_max",
    "shift_classes_step",
    "single_port_round",
    "uniform_step",
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
    clock,
    src,
    dst,
    src_slot,
    dst_slot,
    count,
    reduce,
    offsets,
    alpha,
    bw,
    gw,
    tmp,
    seen_s,
    seen_d,
    tag,
    out,
):
    """A whole step whose transfers are distinct messages on distinct ports, in one pass.

    Returns False, without touching ``clock`` or ``out``, when the step is not of that shape (a
    rank sends or receives twice, a transfer is local) or not valid (a rank or slot range out of
    bounds, source and destination sizes differ): the caller then takes the general path, which
    checks the step and raises. Otherwise it does what :func:`single_port_round` and
    :func:`participants_max` do. The step's
    last finish (``out``) is the largest receiver finish: every message ends no earlier than both
    of its ends' old clocks, so no participant's clock can exceed it.
    ``tmp`` is ``[2 * transfers, sizes]``: end times, then receiver finish times.
    """
    m = src.shape[0]
    ns = clock.shape[1]
    p = clock.shape[0]
    nslots = offsets.shape[0] - 1
    if tmp.shape[0] < 2 * m:
        return False
    mx = out.copy()
    for j in range(m):
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
        units = offsets[a0 + c] - offsets[a0]
        if offsets[b0 + c] - offsets[b0] != units:
            return False
        r = reduce[j]
        for k in range(ns):
            a = clock[s, k]
            b = clock[d, k]
            e = (a if a > b else b) + alpha + units * bw[k]
            tmp[j, k] = e
            if r:
                e = e + units * gw[k]
            tmp[m + j, k] = e
            if e > mx[k]:
                mx[k] = e
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
    out[:] = mx
    return True


@numba.njit(cache=True, nogil=True)
def fast_single_port_step_1d(  # pragma: no cover
    clock,
    src,
    dst,
    src_slot,
    dst_slot,
    count,
    reduce,
    offsets,
    unit,
    alpha,
    bw,
    gw,
    old,
    seen_s,
    seen_d,
    tag,
    out,
):
    """:func:`fast_single_port_step` for one message size (``clock`` is ``[p]``): no size loop,
    and one pass over the transfers instead of two.

    ``old`` (``[>= p]``) receives a copy of the clocks first: every message reads its ends'
    clocks there, so updating ``clock`` in the same pass keeps "all reads before any write",
    and a step that turns out not to be of the fast shape is undone from it (``clock`` and
    ``out`` are then as they were). The arithmetic and the order of the updates are
    :func:`fast_single_port_step`'s, so the results are its bits.
    ``unit > 0`` says every slot holds ``unit`` units: sizes then follow from the counts, and
    equal counts mean equal sizes, so the slot offsets are not read.
    """
    m = src.shape[0]
    p = clock.shape[0]
    nslots = offsets.shape[0] - 1
    if old.shape[0] < p:
        return False
    old[:p] = clock
    mx = out[0]
    for j in range(m):
        s = src[j]
        d = dst[j]
        c = count[j]
        a0 = src_slot[j]
        b0 = dst_slot[j]
        bad = s < 0 or s >= p or d < 0 or d >= p or c < 1 or a0 < 0 or b0 < 0
        if bad or a0 > nslots - c or b0 > nslots - c or s == d:
            clock[:] = old[:p]
            return False
        if seen_s[s] == tag or seen_d[d] == tag:
            clock[:] = old[:p]
            return False
        seen_s[s] = tag
        seen_d[d] = tag
        if unit > 0:
            units = c * unit
        else:
            units = offsets[a0 + c] - offsets[a0]
            if offsets[b0 + c] - offsets[b0] != units:
                clock[:] = old[:p]
                return False
        a = old[s]
        b = old[d]
        e = (a if a > b else b) + alpha + units * bw
        if e > clock[s]:
            clock[s] = e
        if reduce[j]:
            e = e + units * gw
        if e > clock[d]:
            clock[d] = e
        if e > mx:
            mx = e
    out[0] = mx
    return True


@numba.njit(cache=True, nogil=True)
def uniform_step(  # pragma: no cover
    src, dst, src_slot, dst_slot, count, reduce, offsets, unit, p, seen_s, seen_d, tag, known,
    level, alpha, bw, gw, out,
):  # fmt: skip
    """Move level clocks (every rank's clock is ``level``, ``[sizes]``) by one uniform step:
    ``True`` when every one of the ``p`` ranks sends exactly one message and receives exactly
    one, each of ``u`` units with one reduce flag ``r`` (slot ranges in bounds, equal units at
    both ends); ``False``, with nothing touched, otherwise.

    The new level is :func:`fast_single_port_step`'s arithmetic for ends on one clock:
    ``level + alpha + u*bw``, plus ``u*gw`` when ``r``; ``out`` (the running maximum) takes it.
    ``known``: ``src`` and ``dst`` were found to be two permutations of the ranks with no fixed
    point before (that check is skipped). ``tag`` marks ``seen_*`` and must differ from the
    fast kernels' tags.

    numpy: uniform when ``len(src) == p``, ``sorted(src) == sorted(dst) == range(p)``,
    ``(src != dst).all()``, ``(units == units[0]).all()`` and ``(reduce == reduce[0]).all()``.
    """
    m = src.shape[0]
    if m != p or m == 0:
        return False
    nslots = offsets.shape[0] - 1
    r0 = reduce[0]
    c0 = count[0]
    bad = False
    for j in range(m):  # branch-free: every transfer's checks in one pass
        c = count[j]
        a0 = src_slot[j]
        b0 = dst_slot[j]
        bad |= (c < 1) | (a0 < 0) | (b0 < 0) | (a0 > nslots - c) | (b0 > nslots - c)
        bad |= reduce[j] != r0
        if unit > 0:
            bad |= c != c0
    if bad:
        return False
    if unit > 0:
        u = c0 * unit
    else:
        u = offsets[src_slot[0] + c0] - offsets[src_slot[0]]
        for j in range(m):
            c = count[j]
            a0 = src_slot[j]
            b0 = dst_slot[j]
            if offsets[a0 + c] - offsets[a0] != u or offsets[b0 + c] - offsets[b0] != u:
                return False
    if not known:
        for j in range(m):
            s = src[j]
            d = dst[j]
            if s < 0 or s >= p or d < 0 or d >= p or s == d:
                return False
            if seen_s[s] == tag or seen_d[d] == tag:
                return False
            seen_s[s] = tag
            seen_d[d] = tag
    for k in range(level.shape[0]):
        e = level[k] + alpha + u * bw[k]
        if r0:
            e = e + u * gw[k]
        level[k] = e
        if e > out[k]:
            out[k] = e
    return True


@numba.njit(cache=True, nogil=True)
def shift_classes_step(  # pragma: no cover
    src, dst, src_slot, dst_slot, count, reduce, offsets, unit, p, level, alpha, bw, gw, out
):
    """Move level clocks by a step whose remote transfers form whole **shift classes**: ``True``
    when every ordered pair ``(s, d)`` occurs at most once, each shift ``k = (d - s) mod p``
    that occurs does so for all ``p`` senders (a permutation), all of one size ``u_k`` and one
    reduce flag, and local transfers are copies (free); ``False``, nothing touched, otherwise.

    Such a step's rounds (:func:`commsim._messages.matchings`) are its shift classes in
    increasing ``k``, each a perfect matching, so the general path moves every clock alike,
    round by round: ``level + alpha + u_k*bw`` (``+ u_k*gw`` when class ``k`` reduces), the
    round kernel's arithmetic. All-to-all and direct reduce-scatter/allgather steps are of
    this shape. The pair check takes ``p²`` bits (refused above 64 MiB of them).

    numpy: the pairs are distinct, ``np.bincount(shift)`` is 0 or ``p`` for every shift, and
    ``units`` and ``reduce`` are constant on each shift.
    """
    m = src.shape[0]
    if m == 0 or p * p > 2**29:
        return False
    nslots = offsets.shape[0] - 1
    bits = np.zeros((p * p + 63) // 64, dtype=np.uint64)
    cnt = np.zeros(p, dtype=np.int64)
    cls_units = np.zeros(p, dtype=np.int64)
    cls_red = np.zeros(p, dtype=np.bool_)
    for j in range(m):
        s = src[j]
        d = dst[j]
        c = count[j]
        a0 = src_slot[j]
        b0 = dst_slot[j]
        if s < 0 or s >= p or d < 0 or d >= p or c < 1 or a0 < 0 or b0 < 0:
            return False
        if a0 > nslots - c or b0 > nslots - c:
            return False
        if unit > 0:
            u = c * unit
        else:
            u = offsets[a0 + c] - offsets[a0]
            if offsets[b0 + c] - offsets[b0] != u:
                return False
        if s == d:
            if reduce[j]:
                return False  # a local reduction: the general path charges it
            continue
        k = (d - s + p) % p
        at = s * p + k
        word = at >> 6
        bit = np.uint64(1) << np.uint64(at & 63)
        if bits[word] & bit:
            return False
        bits[word] |= bit
        if cnt[k] == 0:
            cls_units[k] = u
            cls_red[k] = reduce[j]
        elif cls_units[k] != u or cls_red[k] != reduce[j]:
            return False
        cnt[k] += 1
    for k in range(1, p):
        if cnt[k] != 0 and cnt[k] != p:
            return False
    for k in range(1, p):
        if cnt[k] == 0:
            continue
        u = cls_units[k]
        for q in range(level.shape[0]):
            e = level[q] + alpha + u * bw[q]
            if cls_red[k]:
                e = e + u * gw[q]
            level[q] = e
            if e > out[q]:
                out[q] = e
    return True
