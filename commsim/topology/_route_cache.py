"""A cache of computed routes, looked up for whole arrays of host pairs at once.

See Also:
    :mod:`commsim.topology._routing`: the compiled routers whose results it keeps.
"""

from __future__ import annotations

import numpy as np

__all__ = ["RouteCache"]


class RouteCache:
    """Routes already computed, by ``(src, dst)`` pair, looked up for whole arrays at once.

    Keys are ``src * n + dst`` in two sorted tables, a large one and a small one of recent
    additions; each key points into an append-only pool of link ids (grown by doubling). A
    lookup is one ``searchsorted`` per table; the pairs not yet known are routed in one call of
    ``route_fn`` and merged into the small table, which is merged into the large one when it
    reaches an eighth of it. So many small additions (a direct all-to-all's 1,023 rounds of
    1,024 new pairs on 1,024 GPUs) cost ``O(n log n)`` in all, not a re-sort of the whole cache
    each (11.6 s of 30 s in ``compare --cluster dgx-h100:128`` before).
    """

    def __init__(self, n: int, route_fn) -> None:
        self.n = n
        self.route_fn = route_fn  # (src, dst) unique pairs -> (indptr, links)
        self.tables = [_EMPTY, _EMPTY]  # large, small: (keys, start, length), sorted by key
        self.pool = np.zeros(1024, dtype=np.int64)
        self.used = 0

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(indptr, links)``: the route of pair ``i`` is ``links[indptr[i]:indptr[i + 1]]``."""
        key = np.asarray(src, dtype=np.int64) * self.n + np.asarray(dst, dtype=np.int64)
        start, length, known = self._find(key)
        if not known.all():
            self._add(np.unique(key[~known]))
            start, length, known = self._find(key)
        indptr = np.zeros(len(key) + 1, dtype=np.int64)
        np.cumsum(length, out=indptr[1:])
        offset = np.repeat(start - indptr[:-1], length)
        return indptr, self.pool[offset + np.arange(indptr[-1])]

    def _find(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each key's ``(start, length)`` in the pool, and whether it is known."""
        start = np.zeros(len(key), dtype=np.int64)
        length = np.zeros(len(key), dtype=np.int64)
        known = np.zeros(len(key), dtype=bool)
        for keys, st, ln in self.tables:
            if not len(keys):
                continue
            pos = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
            hit = keys[pos] == key
            start[hit], length[hit] = st[pos[hit]], ln[pos[hit]]
            known |= hit
        return start, length, known

    def _add(self, new: np.ndarray) -> None:
        """Route the sorted, unknown keys ``new`` and file them in the small table."""
        indptr, links = self.route_fn(new // self.n, new % self.n)
        need = self.used + len(links)
        if need > len(self.pool):
            pool = np.zeros(max(need, 2 * len(self.pool)), dtype=np.int64)
            pool[: self.used] = self.pool[: self.used]
            self.pool = pool
        self.pool[self.used : need] = links
        added = (new, self.used + indptr[:-1], np.diff(indptr))
        self.used = need
        self.tables[1] = _merge(self.tables[1], added)
        if len(self.tables[1][0]) * 8 >= len(self.tables[0][0]):
            self.tables = [_merge(*self.tables), _EMPTY]


_EMPTY = (np.zeros(0, dtype=np.int64),) * 3


def _merge(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Two ``(keys, start, length)`` tables with disjoint sorted keys, as one sorted table."""
    keys = np.concatenate([a[0], b[0]])
    order = np.argsort(keys, kind="stable")
    return tuple(np.concatenate([x, y])[order] for x, y in zip(a, b, strict=True))
