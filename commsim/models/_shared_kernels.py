r"""Compiled kernels of Hockney's shared clocks: every distinct clock vector stored once.

Many sizes at once cost ``O(transfers · sizes)`` in a dense ``[p, sizes]`` clock table, and past a
few thousand ranks that table no longer sits in a core's cache: ring allreduce at p = 16,384 over
21 sizes spends ~100 ns per transfer moving clock rows. Yet most ranks of a regular schedule hold
the *same* clock vector (a ring's ranks all do after every step). So each rank holds an id into a
table of distinct vectors ``V[id, sizes]``, found by their bits through a hash index, and a
message's arithmetic runs once per distinct ``(sender's id, receiver's id, units, reduce)``
(a small cache of such operations is kept), not once per transfer.

Exactness: every float a prediction holds is computed by the same expression on the same
operands as in the dense kernel (:func:`commsim.models._kernels.fast_single_port_step`),

.. math:: e = \max(c_q, c_r) + \alpha + u\,\beta_k, \qquad
          c_q \leftarrow \max(c_q, e), \qquad c_r \leftarrow \max(c_r, e + u_\text{red}\gamma_k),

only not repeated for equal operands, so the results are bit for bit the dense kernel's (and one
size alone gives the same bits as that size among many). A vector equal, bit for bit, to one in
the table takes its id, so equal clocks stay shared whatever chain of messages produced them.

The table grows by the new vectors of each step; the caller compacts it (keeps the vectors ranks
still hold) when it fills, and goes back to dense clocks when sharing is poor (a schedule whose
ranks all differ), which is exact too.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["CACHE", "find_or_add", "rebuild_index", "shared_single_port_step"]

CACHE = 4096  # entries of each direct-mapped operation cache (a power of two)
_EMPTY = -1


@numba.njit(cache=True, nogil=True)
def _hash_row(bits, i):  # pragma: no cover
    h = np.uint64(1469598103934665603)
    for k in range(bits.shape[1]):
        h = (h ^ np.uint64(bits[i, k])) * np.uint64(1099511628211)
        h = h ^ (h >> np.uint64(29))
    return h


@numba.njit(cache=True, nogil=True)
def find_or_add(values, bits, index, nval, row):  # pragma: no cover
    """The id of the vector ``values[row]`` (just written there, ``row == nval[0]``): an equal
    vector's id if the table has one (bitwise), else ``row`` itself, added to ``index``."""
    mask = np.uint64(index.shape[0] - 1)
    h = _hash_row(bits, row) & mask
    ns = bits.shape[1]
    while True:
        i = index[h]
        if i == _EMPTY:
            index[h] = row
            nval[0] = row + 1
            return row
        same = True
        for k in range(ns):
            if bits[i, k] != bits[row, k]:
                same = False
                break
        if same:
            return i
        h = (h + np.uint64(1)) & mask


@numba.njit(cache=True, nogil=True)
def rebuild_index(bits, n, index):  # pragma: no cover
    """Index rows ``0..n-1`` of the table (distinct vectors) after a compaction."""
    index[:] = _EMPTY
    mask = np.uint64(index.shape[0] - 1)
    for row in range(n):
        h = _hash_row(bits, row) & mask
        while index[h] != _EMPTY:
            h = (h + np.uint64(1)) & mask
        index[h] = row


@numba.njit(cache=True, nogil=True)
def _max_id(values, bits, index, nval, a, b, mkey, mval):  # pragma: no cover
    """The id of ``max(V[a], V[b])`` as the dense kernel writes it (``b if b > a else a``)."""
    if a == b:
        return a
    slot = ((a * 1000003) ^ (b * 7919)) & (mkey.shape[0] - 1)
    if mkey[slot, 0] == a and mkey[slot, 1] == b:
        return mval[slot]
    ns = values.shape[1]
    row = nval[0]
    takes_a = True
    takes_b = True
    for k in range(ns):
        x = values[a, k]
        y = values[b, k]
        if y > x:
            values[row, k] = y
            takes_a = False
        else:
            values[row, k] = x
            if bits[a, k] != bits[b, k]:
                takes_b = False
    if takes_a:
        out = a
    elif takes_b:
        out = b
    else:
        out = find_or_add(values, bits, index, nval, row)
    mkey[slot, 0] = a
    mkey[slot, 1] = b
    mval[slot] = out
    return out


@numba.njit(cache=True, nogil=True)
def shared_single_port_step(  # pragma: no cover
    ids, values, bits, index, nval, src, dst, src_slot, dst_slot, count, reduce, offsets, unit,
    alpha, bw, gw, ends, seen_s, seen_d, tag, out, ekey, eval_, mkey, mval, stamp,
):  # fmt: skip
    """:func:`commsim.models._kernels.fast_single_port_step` on shared clocks.

    Returns 1 when done, 0 (nothing a rank holds changed) when the step is not one round of
    distinct messages or not valid (the caller takes the general path, which names the error),
    and -1 when the table may fill during this step (the caller compacts and calls again).
    ``unit > 0`` says every slot holds ``unit`` units (the slot offsets are then not read).
    ``ends`` (int, ``[2, >= transfers]``) is scratch; ``ekey``/``eval_`` cache message results
    and ``mkey``/``mval`` maxima (valid until the next compaction); ``stamp`` (``[table]``)
    marks end vectors already folded into ``out`` in this step.
    """
    m = src.shape[0]
    p = ids.shape[0]
    ns = values.shape[1]
    nslots = offsets.shape[0] - 1
    if m > p or ends.shape[1] < m:  # more transfers than ranks: some rank sends twice
        return 0
    if nval[0] + 4 * m + 2 > values.shape[0]:
        return -1
    emask = ekey.shape[0] - 1
    la, lb, lu, lr, le, le2 = -1, -1, -1, -1, -1, -1  # the last message's key and ends
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
        if unit > 0:  # every slot holds ``unit`` units: sizes follow from the counts
            units = c * unit
        else:
            units = offsets[a0 + c] - offsets[a0]
            if offsets[b0 + c] - offsets[b0] != units:
                return 0
        r = 1 if reduce[j] else 0
        ia = ids[s]
        ib = ids[d]
        if ia == la and ib == lb and units == lu and r == lr:
            ends[0, j] = le
            ends[1, j] = le2
            continue
        slot = ((ia * 1000003) ^ (ib * 7919) ^ (units * 31) ^ r) & emask
        hit = ekey[slot, 0] == ia and ekey[slot, 1] == ib
        if hit and ekey[slot, 2] == units and ekey[slot, 3] == r:
            la, lb, lu, lr = ia, ib, units, r
            le, le2 = eval_[slot, 0], eval_[slot, 1]
            ends[0, j] = le
            ends[1, j] = le2
            continue
        row = nval[0]
        for k in range(ns):
            a = values[ia, k]
            b = values[ib, k]
            values[row, k] = (a if a > b else b) + alpha + units * bw[k]
        e = find_or_add(values, bits, index, nval, row)
        e2 = e
        if r:
            row = nval[0]
            for k in range(ns):
                values[row, k] = values[e, k] + units * gw[k]
            e2 = find_or_add(values, bits, index, nval, row)
        ekey[slot, 0] = ia
        ekey[slot, 1] = ib
        ekey[slot, 2] = units
        ekey[slot, 3] = r
        eval_[slot, 0] = e
        eval_[slot, 1] = e2
        ends[0, j] = e
        ends[1, j] = e2
        la, lb, lu, lr, le, le2 = ia, ib, units, r, e, e2
    mmask = mkey.shape[0] - 1
    xa, xb, xv = -1, -1, -1  # the last maximum taken
    for j in range(m):  # the clocks, in the dense kernel's order (cache hits written inline:
        s = src[j]  # a compiled call per transfer costs more than the arithmetic it saves)
        d = dst[j]
        for side in range(2):
            r = s if side == 0 else d
            a = ids[r]
            b = ends[side, j]
            if a == b:
                continue
            if a == xa and b == xb:
                ids[r] = xv
                continue
            slot = ((a * 1000003) ^ (b * 7919)) & mmask
            if mkey[slot, 0] == a and mkey[slot, 1] == b:
                v = mval[slot]
            else:
                v = _max_id(values, bits, index, nval, a, b, mkey, mval)
            ids[r] = v
            xa, xb, xv = a, b, v
        e2 = ends[1, j]
        if stamp[e2] != tag:
            stamp[e2] = tag
            for k in range(ns):
                v = values[e2, k]
                if v > out[k]:
                    out[k] = v
    return 1
