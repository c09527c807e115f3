"""Compiled inner loop of :class:`commsim.models.LogGP` (numba): one round of eager messages.

It exists for speed only (ring allreduce at p = 16,384 spends most of its time in rounds); the
numpy equivalent is in its docstring and the tests compare the model against closed forms.
"""

from __future__ import annotations

import numba

__all__ = ["eager_round"]


@numba.njit(cache=True, nogil=True)
def eager_round(  # pragma: no cover
    cpu, gap_s, gap_r, src, dst, nbytes_unit, red_unit, per_unit, L, o, g, G, gamma, tmp, last
):
    """One round (a matching) of eager LogGP messages; updates ``cpu``, ``gap_s``, ``gap_r``
    ``[p, S]`` and ``last`` ``[S]`` in place. ``nbytes_unit``/``red_unit``: slot units per
    message (all of it / the reducing part); ``per_unit``: bytes per unit, one per size.

    numpy equivalent (every send before any receive): ``t = max(cpu[q], gap_s[q]);
    cpu[q] = t + o; gap_s[q] = t + g + inj; a = max(t + o + L, gap_r[r], cpu[r]);
    gap_r[r] = a + g + inj; cpu[r] = a + o + inj + red*gamma`` with
    ``inj = max(s - 1, 0) * G``.
    """
    m = src.shape[0]
    ns = cpu.shape[1]
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
            tmp[j, k] = t + o + L
    for j in range(m):  # receives
        r = dst[j]
        for k in range(ns):
            s = nbytes_unit[j] * per_unit[k]
            inj = (s - 1.0) * G if s > 1.0 else 0.0
            a = tmp[j, k]
            if gap_r[r, k] > a:
                a = gap_r[r, k]
            if cpu[r, k] > a:
                a = cpu[r, k]
            gap_r[r, k] = a + g + inj
            done = a + o + inj + red_unit[j] * per_unit[k] * gamma
            cpu[r, k] = done
            if done > last[k]:
                last[k] = done
