"""How busy *other* jobs kept the machine while a measurement ran.

The load average after a run counts the run's own ranks: two MPI processes busy-polling on two
cores read as "load 2", and a validation that was the only job on the machine would blame
"other jobs". :class:`OtherLoad` measures instead, over the run,

.. math::

    \\text{other load} = \\frac{\\Delta B - \\Delta C}{\\Delta t}

where :math:`\\Delta B` is the CPU time every core spent busy (``/proc/stat``: user, nice,
system, irq, softirq, steal), :math:`\\Delta C` the CPU time of this process and its waited-for
children (``os.times()``: ``mpirun`` and its ranks are children), and :math:`\\Delta t` the wall
time: the average number of cores other jobs used, comparable with a load average. Where
``/proc/stat`` is absent (not Linux) it falls back to the 1-minute load average minus the
run's own processes, a cruder reading.

References:
    ``proc(5)``, ``/proc/stat`` (Linux man-pages); ``os.times`` (Python docs).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["OtherLoad"]

_STAT = Path("/proc/stat")
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (idle, iowait excluded)


def _busy_seconds() -> float | None:
    """CPU seconds all cores have spent busy since boot, or ``None`` without ``/proc/stat``."""
    try:
        first = _STAT.read_text().splitlines()[0].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(first[1 + i]) for i in _BUSY_FIELDS) / ticks


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class OtherLoad:
    """A stopwatch of the other jobs' CPU use (module docstring): ``start()``, then ``stop()``.

    Examples:
        >>> w = OtherLoad.start()
        >>> load = w.stop(own_processes=1)
        >>> load is None or load >= 0.0
        True
    """

    def __init__(self, busy: float | None, own: float, wall: float) -> None:
        self._busy, self._own, self._wall = busy, own, wall

    @classmethod
    def start(cls) -> OtherLoad:
        return cls(_busy_seconds(), _own_seconds(), time.perf_counter())

    def stop(self, own_processes: int) -> float | None:
        """The average number of cores other jobs kept busy since :meth:`start`;
        ``own_processes`` (the run's busy processes) is subtracted from the load average where
        ``/proc/stat`` is absent. ``None`` when neither reading is available."""
        wall = time.perf_counter() - self._wall
        busy = _busy_seconds()
        if self._busy is not None and busy is not None and wall > 0.05:
            other = (busy - self._busy) - (_own_seconds() - self._own)
            return max(other / wall, 0.0)
        try:
            return max(os.getloadavg()[0] - own_processes, 0.0)
        except OSError:
            return None
