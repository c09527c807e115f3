"""Per-rank clocks over many sizes, each distinct clock vector stored once (Hockney's fast path).

:class:`SharedClocks` holds, per rank, an id into a table of distinct ``[sizes]`` vectors and
advances them one single-port step at a time with
:func:`commsim.models._shared_kernels.shared_single_port_step`, whose results are bit for bit
the dense kernel's (the module docstring of :mod:`commsim.models._shared_kernels` says why).
It gives up, and hands over dense ``[p, sizes]`` clocks, when sharing does not pay: when the
vectors ranks hold after a compaction exceed an eighth of the ranks.

See Also:
    :class:`commsim.models.Hockney`, :mod:`commsim.models._kernels` (the dense kernels).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SharedClocks"]


def _pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 1).bit_length()


class SharedClocks:
    """Shared clocks of ``p`` ranks at ``nsizes`` sizes, all starting at 0.

    Args:
        p: ranks (virtual ranks: one per rank and link).
        nsizes: message sizes, the vectors' length.
        max_transfers: transfers per step expected (scratch is grown when a step has more).
    """

    def __init__(
        self, p: int, nsizes: int, max_transfers: int, start: np.ndarray | None = None
    ) -> None:
        from commsim.models import _shared_kernels  # numba: imported on first use

        self.k = _shared_kernels
        self.p, self.ns = p, nsizes
        self.cap = 4 * p + p // 8 + 64  # a step adds at most 4 per transfer, <= p transfers
        self.values = np.zeros((self.cap, nsizes))
        if start is not None:  # every rank's first vector (else zeros)
            self.values[0] = start
        self.bits = self.values.view(np.int64)
        self.index = np.full(_pow2(2 * self.cap), -1, dtype=np.int64)
        self.nval = np.ones(1, dtype=np.int64)  # row 0: every rank's start
        self.k.rebuild_index(self.bits, 1, self.index)
        self.ids = np.zeros(p, dtype=np.int64)
        self.ends = np.empty((2, max(min(max_transfers, p), 1)), dtype=np.int64)
        self.stamp = np.zeros(self.cap, dtype=np.int64)
        self._clear_caches()

    def _clear_caches(self) -> None:
        self.ekey = np.full((self.k.CACHE, 4), -1, dtype=np.int64)
        self.eval_ = np.zeros((self.k.CACHE, 2), dtype=np.int64)
        self.mkey = np.full((self.k.CACHE, 2), -1, dtype=np.int64)
        self.mval = np.zeros(self.k.CACHE, dtype=np.int64)

    def step(self, st: Any, offsets: np.ndarray, unit: int, alpha: float, bw: np.ndarray,
             gw: np.ndarray, seen_s: np.ndarray, seen_d: np.ndarray, tag: int, out: np.ndarray) -> int:  # fmt: skip
        """One single-port step (as :func:`~commsim.models._kernels.fast_single_port_step`):
        1 done, 0 not of that shape (nothing changed), -1 sharing given up (call
        :meth:`dense` and go on densely; nothing changed)."""
        return self.advance(
            len(st.src),
            lambda: self.k.shared_single_port_step(
                self.ids, self.values, self.bits, self.index, self.nval, st.src, st.dst,
                st.src_slot, st.dst_slot, st.count, st.reduce, offsets, unit, alpha, bw, gw,
                self.ends, seen_s, seen_d, tag, out, self.ekey, self.eval_, self.mkey,
                self.mval, self.stamp,
            ),
        )  # fmt: skip

    def advance(self, m: int, kernel: Any) -> int:
        """Run ``kernel()`` (a step of ``m`` transfers on this table: 1 done, 0 not of the
        fast shape, -1 table full), compacting once when full; -1 when sharing is given up."""
        if self.ends.shape[1] < m <= self.p:
            self.ends = np.empty((2, m), dtype=np.int64)
        for attempt in range(2):
            done = int(kernel())
            if done >= 0:
                return done
            if attempt or not self._compact(m):
                return -1
        return -1  # pragma: no cover

    def _compact(self, m: int) -> bool:
        """Keep the vectors ranks hold; False when sharing does not pay (too many of them)."""
        live, inverse = np.unique(self.ids, return_inverse=True)
        n = len(live)
        if 8 * n > self.p or n + 4 * m + 2 > self.cap:
            return False
        self.values[:n] = self.values[live]
        self.ids[:] = inverse
        self.nval[0] = n
        self.k.rebuild_index(self.bits, n, self.index)
        self.stamp[:] = 0
        self._clear_caches()
        return True

    def load(self, rows: np.ndarray, ids: np.ndarray) -> None:
        """Start again from rank ``r`` holding ``rows[ids[r]]`` (a few rows for many ranks:
        the periodic clocks' :mod:`commsim.models._periodic_clocks`); equal rows (bitwise) are
        stored once."""
        bits = np.ascontiguousarray(rows).view(np.int64)
        distinct, first, inverse = np.unique(bits, axis=0, return_index=True, return_inverse=True)
        n = len(distinct)
        self.values[:n] = rows[first]
        self.ids[:] = inverse.reshape(-1)[ids]
        self.nval[0] = n
        self.k.rebuild_index(self.bits, n, self.index)
        self.stamp[:] = 0
        self._clear_caches()

    def dense(self) -> np.ndarray:
        """``[p, sizes]``: every rank's clock."""
        return self.values[self.ids]
