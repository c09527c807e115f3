"""Lowering helpers shared by the executors (numpy only).

* :func:`checked_steps`: the steps, each validated by the IR's one check
  (:meth:`commsim.Schedule.check_step`) before any backend lowers it.
* :func:`element_ranges`: a step's transfers as element ranges (empty ones dropped).
* :func:`merge_segments`: a message's transfers as element segments, contiguous runs merged.
* :class:`CompileCache`: compiled programs per schedule (dropped with the schedule) and key.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from commsim._ir import Schedule, Step
    from commsim.exec._backend import Compiled

__all__ = ["CompileCache", "ElementRanges", "checked_steps", "element_ranges", "merge_segments"]


def checked_steps(schedule: Schedule) -> Iterator[tuple[int, Step]]:
    """``(i, step)`` for every step, after :meth:`~commsim.Schedule.check_step` accepted it."""
    for i, st in enumerate(schedule.steps()):
        schedule.check_step(st, i)
        yield i, st


class ElementRanges(NamedTuple):
    """A step's non-empty transfers in elements: ``[sa, sa + ln)`` of ``src`` → ``[da, ...)``."""

    src: np.ndarray
    dst: np.ndarray
    sa: np.ndarray
    ln: np.ndarray
    da: np.ndarray
    red: np.ndarray


def element_ranges(step: Step, off: np.ndarray) -> ElementRanges:
    """Element ranges of ``step``'s transfers for slot offsets ``off`` (zero-length dropped)."""
    sa = off[step.src_slot]
    ln = off[step.src_slot + step.count] - sa
    keep = ln > 0
    return ElementRanges(
        step.src[keep], step.dst[keep], sa[keep], ln[keep], off[step.dst_slot][keep],
        step.reduce[keep],
    )  # fmt: skip


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
