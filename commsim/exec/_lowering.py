"""Lowering helpers shared by the executors (numpy only).

* :func:`merge_segments`: a message's transfers as element segments, contiguous runs merged.
* :class:`CompileCache`: compiled programs per schedule (dropped with the schedule) and key.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from commsim._ir import Schedule
    from commsim.exec._backend import Compiled

__all__ = ["CompileCache", "merge_segments"]


def merge_segments(
    sa: np.ndarray, ln: np.ndarray, da: np.ndarray, red: np.ndarray
) -> list[tuple[int, int, int, bool]]:
    """Transfers as segments ``(src, len, dst, reduce)``, sorted by source start (stably), runs
    contiguous on both sides with the same ``reduce`` merged.

    Examples:
        >>> import numpy as np
        >>> merge_segments(
        ...     np.array([4, 0, 2]),
        ...     np.array([2, 2, 2]),
        ...     np.array([10, 5, 7]),
        ...     np.array([False, False, False]),
        ... )
        [(0, 4, 5, False), (4, 2, 10, False)]
    """
    segs: list[list] = []
    for i in np.argsort(sa, kind="stable").tolist():
        a, n, d, f = int(sa[i]), int(ln[i]), int(da[i]), bool(red[i])
        if segs:
            pa, pn, pd, pf = segs[-1]
            if pa + pn == a and pd + pn == d and pf == f:
                segs[-1][1] += n
                continue
        segs.append([a, n, d, f])
    return [(a, n, d, f) for a, n, d, f in segs]


class CompileCache:
    """Compiled programs per schedule (weakly held) and key, each made once."""

    def __init__(self) -> None:
        self._entries: weakref.WeakKeyDictionary[Schedule, dict[tuple, Compiled]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, schedule: Schedule, key: tuple, make: Callable[[], Compiled]) -> Compiled:
        """The program for ``(schedule, key)``, made by ``make()`` the first time."""
        entry = self._entries.setdefault(schedule, {})
        if key not in entry:
            entry[key] = make()
        return entry[key]
