"""A cache of computed routes, looked up for whole arrays of host pairs at once.

See Also:
    :mod:`commsim.topology._routing`: the compiled routers whose results it keeps.
"""

from __future__ import annotations

import numpy as np

__all__ = ["RouteCache"]


class RouteCache:
    """Routes already computed, by ``(src, dst)`` pair, looked up for whole arrays at once.

    Keys are ``src * n + dst`` in a sorted array; each key points into an append-only pool of
    link ids. A lookup is one ``searchsorted``; the pairs not yet known are routed in one call of
    ``route_fn`` and merged in.
    """

    def __init__(self, n: int, route_fn) -> None:
        self.n = n
        self.route_fn = route_fn  # (src, dst) unique pairs -> (indptr, links)
        self.keys = np.zeros(0, dtype=np.int64)
        self.start = np.zeros(0, dtype=np.int64)
        self.length = np.zeros(0, dtype=np.int64)
        self.pool = np.zeros(0, dtype=np.int64)

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(indptr, links)``: the route of pair ``i`` is ``links[indptr[i]:indptr[i + 1]]``."""
        key = np.asarray(src, dtype=np.int64) * self.n + np.asarray(dst, dtype=np.int64)
        pos = np.searchsorted(self.keys, key)
        known = pos < len(self.keys)
        known[known] = self.keys[pos[known]] == key[known]
        if not known.all():
            self._add(np.unique(key[~known]))
            pos = np.searchsorted(self.keys, key)
        length = self.length[pos]
        indptr = np.zeros(len(key) + 1, dtype=np.int64)
        np.cumsum(length, out=indptr[1:])
        offset = np.repeat(self.start[pos] - indptr[:-1], length)
        return indptr, self.pool[offset + np.arange(indptr[-1])]

    def _add(self, new: np.ndarray) -> None:
        indptr, links = self.route_fn(new // self.n, new % self.n)
        start = len(self.pool) + indptr[:-1]
        self.pool = np.concatenate([self.pool, links])
        keys = np.concatenate([self.keys, new])
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.start = np.concatenate([self.start, start])[order]
        self.length = np.concatenate([self.length, np.diff(indptr)])[order]
