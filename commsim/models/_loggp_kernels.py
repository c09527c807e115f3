"""Compiled inner loop of :class:`commsim.models.LogGP` (numba): one round of eager messages.

They exist for speed only (ring allreduce at p = 16,384: 30 s with numpy rounds, 12 s with
:func:`eager_round`, less with :func:`fast_eager_step`); the numpy equivalent is in each
docstring and the tests compare the model against closed forms on both paths. The fast step's
per-transfer check is written out as in :mod:`commsim.models._kernels`, on purpose: a shared
compiled helper cost Hockney's fast path 6x (see that module).
"""

from __future__ import annotations

import numba

__all__ = ["eager_round", "fast_eager_step"]


@numba.njit(cache=True, nogil=True)
def eager_round(  # pragma: no cover
    cpu, gap_s, gap_r, src, dst, nbytes_unit, red_unit, per_unit, L, o, g, G, gamma, times, last,
    o_r,
):  # fmt: skip
    """One round (a matching) of eager LogGP messages; updates ``cpu``, ``gap_s``, ``gap_r``
    ``[p, S]`` and ``last`` ``[S]`` in place. ``nbytes_unit``/``red_unit``: slot units per
    message (all of it / the reducing part); ``per_unit``: bytes per unit, one per size.

    ``times`` ``[3, >= messages, S]`` receives, per message and size, the send time ``t``
    (``times[0]``), the receive start ``a`` (``times[1]``) and the receive's end before its
    reduction (``times[2]``): what :meth:`commsim.models.LogGP.timeline` records, so a trace
    states these rules nowhere else. Given ``[1, >= messages, S]`` (predict, which records
    nothing) it is scratch for ``t`` only and the round skips the other two stores (they cost
    it about 5%: ring allreduce, p = 512, 64 sizes).

    numpy equivalent (every send before any receive): ``t = max(cpu[q], gap_s[q]);
    cpu[q] = t + o; gap_s[q] = t + g + inj; a = max(t + o + L, gap_r[r], cpu[r]);
    gap_r[r] = a + g + inj; cpu[r] = a + o_r + inj + red*gamma`` with
    ``inj = max(s - 1, 0) * G``; ``o_r`` is the receiver's overhead (``o``, or 0 for
    one-sided messages).
    """
    m = src.shape[0]
    ns = cpu.shape[1]
    keep = times.shape[0] == 3
    for j in range(m):  # sends: every read of a sender's clocks before any receive
        q = src[j]
        for k in range(ns):
            s = nbytes_unit[j] * per_unit[k]
            inj = (s - 1.0) * G if s > 1.0 else 0.0
            a = cpu[q, k]
            b = gap_s[q, k]
            t = a if a > b else b
            cpu[q, k] = t + o
            gap_s[q, k] = t + g + inj
            times[0, j, k] = t
    for j in range(m):  # receives
        r = dst[j]
        for k in range(ns):
            s = nbytes_unit[j] * per_unit[k]
            inj = (s - 1.0) * G if s > 1.0 else 0.0
            a = times[0, j, k] + o + L
            if gap_r[r, k] > a:
                a = gap_r[r, k]
            if cpu[r, k] > a:
                a = cpu[r, k]
            gap_r[r, k] = a + g + inj
            received = a + o_r + inj
            done = received + red_unit[j] * per_unit[k] * gamma
            if keep:
                times[1, j, k] = a
                times[2, j, k] = received
            cpu[r, k] = done
            if done > last[k]:
                last[k] = done


@numba.njit(cache=True, nogil=True)
def fast_eager_step(  # pragma: no cover
    cpu, gap_s, gap_r, src, dst, src_slot, dst_slot, count, reduce, offsets, per_unit,
    L, o, g, G, gamma, units, tmp, seen_s, seen_d, tag, last, o_r,
):  # fmt: skip
    """A whole step whose transfers are distinct messages on distinct ports: one
    :func:`eager_round`, without grouping the transfers into messages first.

    Returns False, touching no clock, when the step is not of that shape (a rank sends or
    receives twice, a transfer is local) or not valid (a rank or slot range out of bounds,
    source and destination sizes differ): the caller then takes the general path, which checks
    the step and raises. ``units`` (int, ``[transfers]``) and ``tmp`` (``[transfers, sizes]``)
    are scratch; ``seen_s``/``seen_d`` hold ``tag`` for ranks already seen in this step.
    """
    m = src.shape[0]
    ns = cpu.shape[1]
    p = cpu.shape[0]
    nslots = offsets.shape[0] - 1
    if tmp.shape[0] < m or units.shape[0] < m:
        return False
    for j in range(m):  # check everything before touching a clock
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
        u = offsets[a0 + c] - offsets[a0]
        if offsets[b0 + c] - offsets[b0] != u:
            return False
        units[j] = u
    for j in range(m):  # sends
        q = src[j]
        for k in range(ns):
            s = units[j] * per_unit[k]
            inj = (s - 1.0) * G if s > 1.0 else 0.0
            a = cpu[q, k]
            b = gap_s[q, k]
            t = a if a > b else b
            cpu[q, k] = t + o
            gap_s[q, k] = t + g + inj
            tmp[j, k] = t + o + L
    for j in range(m):  # receives
        r = dst[j]
        red = gamma if reduce[j] else 0.0
        for k in range(ns):
            s = units[j] * per_unit[k]
            inj = (s - 1.0) * G if s > 1.0 else 0.0
            a = tmp[j, k]
            if gap_r[r, k] > a:
                a = gap_r[r, k]
            if cpu[r, k] > a:
                a = cpu[r, k]
            gap_r[r, k] = a + g + inj
            done = a + o_r + inj + s * red
            cpu[r, k] = done
            if done > last[k]:
                last[k] = done
    return True
