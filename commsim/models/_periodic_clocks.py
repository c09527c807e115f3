r"""Periodic clocks: ``g`` clocks stand for ``p`` ranks while the steps commute with a shift by ``g``.

On a network of whole servers of ``g`` consecutive ranks (``p`` a multiple of ``g``), the link
class of a message is a function of ``src // g != dst // g``, which the shift
:math:`\sigma(r) = r + g \bmod p` preserves. If a step's messages are mapped onto themselves by
:math:`\sigma` (message ``s → d`` of ``u`` units present exactly when ``σ(s) → σ(d)`` of ``u``
units is, with the same reduce flag), the step maps clocks with ``c[σ(r)] = c[r]`` to clocks
with the same property: rank ``σ(r)``'s messages are rank ``r``'s, moved, and read equal clocks.
They also meet them in the same order, whatever the order of the step's messages: every kernel
that keeps clock components updates a rank's receive before its send
(:data:`commsim.models._topology_kernels.RECEIVE_FIRST`). So the clocks of ranks ``0 .. g-1``
stand for all of them, and a step costs the at most ``2g`` messages that touch those ranks
instead of ``p`` (:func:`commsim.models._two_level_kernels.periodic_class_step`, the dense
kernel's arithmetic on the same operands, so the same bits).

Checking that a step commutes with :math:`\sigma` costs ``O(p)``, once per set of arrays: only
steps whose rank, count and flag arrays the step function declared shared between steps
(:func:`commsim._ir.share_between_steps`, a ring's) are taken, and each such set is checked
the first time it is seen. A ring on ``dgx-h100:2048`` (p = 16,384, ``g = 8``) is 32,766 steps
of 16,384 messages each: 537 M messages visited, or 32,766 × 16 here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim._ir import Step, is_shared, shared_bounds

__all__ = ["PeriodicClocks", "period", "touching_messages"]


def period(server: np.ndarray, clock: np.ndarray) -> int | None:
    """``g`` when ``server`` is ``r // g`` for whole servers of ``g`` ranks and every rank's
    clock is alike (the start is periodic); ``None`` otherwise."""
    p = len(server)
    if p == 0 or not (clock == clock[0]).all():
        return None
    g = int(np.count_nonzero(server == server[0]))
    if g < 1 or p % g or not np.array_equal(server, server[0] + np.arange(p) // g):
        return None
    return g


def touching_messages(
    src: np.ndarray, dst: np.ndarray, count: np.ndarray, reduce: np.ndarray, p: int, g: int
) -> np.ndarray | None:
    """The indices of the messages with an end below ``g``, in the step's order, when the shift
    by ``g`` (a divisor of ``p``) maps the step onto itself (module docstring); ``None`` when it
    does not, or when a rank sends or receives more than one message, sends to itself, or a
    field is out of range (the caller then takes the dense path, which names any error)."""
    m = len(src)
    if not (m and len(dst) == m == len(count) == len(reduce)) or m > p or g < 1 or p % g:
        return None
    if min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= p or count.min() < 1:
        return None
    if (src == dst).any():
        return None
    send_at = np.full(p, -1)
    send_at[src] = np.arange(m)
    if np.count_nonzero(send_at >= 0) != m or np.bincount(dst, minlength=p).max() > 1:
        return None  # a rank sends or receives twice
    to = np.where(send_at >= 0, dst[send_at], -1)
    units = np.where(send_at >= 0, count[send_at], 0)
    red = np.where(send_at >= 0, reduce[send_at], False)
    shifted = np.where(to >= 0, (to + g) % p, -1)
    if not (
        np.array_equal(np.roll(to, -g), shifted)
        and np.array_equal(np.roll(units, -g), units)
        and np.array_equal(np.roll(red, -g), red)
    ):
        return None
    return np.flatnonzero((src < g) | (dst < g))


class PeriodicClocks:
    """The clocks and clock components of ranks ``0 .. g-1`` (standing for all ``p``), and the
    units they sent and received per link class, advanced one shift-invariant step at a time.

    Args:
        clock: ``[p, sizes]`` start clocks (alike: :func:`period`).
        comp: ``[p, components, sizes]`` start components.
        g: the period.
    """

    def __init__(self, clock: np.ndarray, comp: np.ndarray, g: int) -> None:
        self.g, self.p = g, len(clock)
        self.clock, self.comp = clock[:g].copy(), comp[:g].copy()
        self.sent, self.received = np.zeros((2, g)), np.zeros((2, g))
        self.tmp = np.empty((2 * g, clock.shape[1]))
        self.mcomp = np.empty((2 * g, *comp.shape[1:]))
        self._checked: dict[tuple[int, ...], tuple[tuple[np.ndarray, ...], Any]] = {}
        self._last: tuple[tuple[np.ndarray, ...], Any] | None = None  # the last step's entry

    def touching(self, st: Step, nslots: int) -> np.ndarray | None:
        """The messages of ``st`` to visit (:func:`touching_messages`), or ``None`` when ``st``
        is not a shift-invariant step of shared arrays with its slot ranges in bounds. The
        step before's arrays, met again (a ring's every step), cost four identity tests."""
        fields = (st.src, st.dst, st.count, st.reduce)
        seen = self._last
        if seen is None or any(a is not b for a, b in zip(seen[0], fields, strict=True)):
            seen = self._lookup(fields)
            if seen is None:
                return None
            self._last = seen
        touching, widest = seen[1]
        if touching is None:
            return None
        for slot in (st.src_slot, st.dst_slot):
            if len(slot) != len(st.src) or not self._in_bounds(slot, st.count, widest, nslots):
                return None
        return touching

    def _lookup(self, fields: tuple[np.ndarray, ...]) -> tuple[tuple[np.ndarray, ...], Any] | None:
        """The checked entry of a step's rank, count and flag arrays (checked now if new), or
        ``None`` where one of them is not shared."""
        if not all(map(is_shared, fields)):
            return None
        key = tuple(map(id, fields))
        seen = self._checked.get(key)
        if seen is None or any(a is not b for a, b in zip(seen[0], fields, strict=True)):
            touching = touching_messages(*fields, self.p, self.g)
            widest = int(fields[2].max()) if touching is not None else 0
            seen = (fields, (touching, widest))
            self._checked[key] = seen
        return seen

    @staticmethod
    def _in_bounds(slot: np.ndarray, count: np.ndarray, widest: int, nslots: int) -> bool:
        """Whether every block ``slot .. slot + count`` lies in ``0 .. nslots``; a view of a
        shared array (a ring's blocks) is bounded by that array's values
        (:func:`commsim._ir.shared_bounds`, found once per array)."""
        lo, hi = shared_bounds(slot) or (int(slot.min()), int(slot.max()))
        return lo >= 0 and (hi <= nslots - widest or int((slot + count).max()) <= nslots)

    def expand(self, clock: np.ndarray, comp: np.ndarray, sent: np.ndarray,
               received: np.ndarray) -> None:  # fmt: skip
        """Write every rank's clock and components, and add the units, to the dense tables."""
        reps = np.arange(self.p) % self.g
        clock[:] = self.clock[reps]
        comp[:] = self.comp[reps]
        sent += self.sent[:, reps]
        received += self.received[:, reps]
