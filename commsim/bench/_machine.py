"""What the machine a measurement ran on can honestly support.

A timing is only a property of the algorithm when every rank has a core to itself. With more
ranks (MPI processes, JAX CPU devices) than cores, the operating system time-slices them, and the
numbers measure the scheduler: the measurement says so in its notes.
"""

from __future__ import annotations

import os

__all__ = ["memory", "oversubscription", "usable_cores"]

_RAM_FRACTION = 0.75  # of physical memory, what one measurement may hold


def memory() -> tuple[float, str]:
    """``(bytes a measurement may hold, where that figure comes from)``: 75% of physical RAM."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX: assume a small machine
        ram = 8 * 2**30
    return ram * _RAM_FRACTION, f"{_RAM_FRACTION:.0%} of this machine's memory"


def usable_cores() -> int:
    """The machine's cores (``os.cpu_count``). Not this process's affinity: an MPI rank bound
    to one core would count one core for all. A container's CPU quota is not seen, and neither
    are the other nodes of a multi-node run: there the note can be missing, never false."""
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
