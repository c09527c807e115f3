"""What the machine a measurement ran on can honestly support.

A timing is only a property of the algorithm when every rank has a core to itself. With more
ranks (MPI processes, JAX CPU devices) than cores, the operating system time-slices them, and the
numbers measure the scheduler: the measurement says so in its notes.
"""

from __future__ import annotations

import os

__all__ = ["oversubscription", "usable_cores"]


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def oversubscription(workers: int, cores: int | None = None) -> str | None:
    """A note when ``workers`` concurrent host threads or processes exceed the usable cores."""
    cores = usable_cores() if cores is None else cores
    if workers <= cores:
        return None
    return (
        f"{workers} ranks share {cores} cores: these times measure oversubscription (ranks "
        "waiting for a core), not the algorithm; use at most one rank per core for timings"
    )
