"""The memory budget: refuse a schedule before it is iterated if it would not fit.

Schedules are built lazily, so a rank count of a million costs nothing until someone pulls its
steps. Before that, each command checks what its consumer will hold against ``--memory-limit``
(default 75% of physical RAM): the verifier's state (:func:`commsim._verify.memory_estimate`), or a
prediction's one step of transfers plus ``O(p · sizes)`` clocks. ``verify`` and ``predict`` refuse
a ``p`` that would not fit; ``compare`` skips it with a note.
"""

from __future__ import annotations

import dataclasses
import os

from commsim import units
from commsim._ir import MAX_NRANKS, Schedule
from commsim.cli.errors import UsageError
from commsim.errors import ResourceError

__all__ = ["EXPORT_BYTES_PER_TRANSFER", "RAM_FRACTION", "MemoryBudget", "about"]

#: share of physical RAM a command may use when ``--memory-limit`` is not given
RAM_FRACTION = 0.75
_BYTES_PER_RANK = 64  # any schedule holds a few O(p) arrays
_PREDICT_BYTES_PER_TRANSFER = 100  # one step's transfer and message arrays in the model
_SMALL_MACHINE = 8 * 2**30  # assumed RAM where the system does not say (not POSIX)
#: bytes of text per transfer in an exported file, at least: measured on ring allreduce p = 16
#: (MSCCL-IR 125 B, GOAL at 1 MiB 123 B per transfer; GOAL at p = 64 132 B); the file is built
#: in memory before it is written, so this is a lower bound of what ``export`` holds
EXPORT_BYTES_PER_TRANSFER = 100


@dataclasses.dataclass(frozen=True)
class MemoryBudget:
    """At most ``limit`` bytes; ``why`` says where the limit comes from, for the error message."""

    limit: float
    why: str

    @classmethod
    def parse(cls, memory_limit: str | None) -> MemoryBudget:
        """The budget of ``--memory-limit`` (a size), or 75% of physical RAM when it is ``None``."""
        if memory_limit:
            limit = units.parse_size(memory_limit)
            if limit <= 0:
                raise UsageError(f"--memory-limit must be more than 0 bytes, got {memory_limit!r}")
            return cls(limit, "--memory-limit")
        try:
            ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):
            ram = _SMALL_MACHINE
        return cls(ram * RAM_FRACTION, f"{RAM_FRACTION:.0%} of {about(ram)} RAM")

    def check(self, nranks: int, need: float, what: str, hard_limit: float | None = None) -> None:
        """Raise :class:`commsim.ResourceError` if ``need`` bytes (for ``what``) do not fit."""
        limit = self.limit if hard_limit is None else min(hard_limit, self.limit)
        if need > limit:
            why = self.why if limit == self.limit else "the verifier's limit"
            raise ResourceError(
                f"p={nranks} needs about {about(need)} ({what}), more than the {about(limit)} "
                f"available ({why}); use a smaller p"
            )

    def check_build(self, nranks: int) -> None:
        """Building any schedule on ``nranks`` ranks holds a few ``O(p)`` arrays (past
        :data:`commsim._ir.MAX_NRANKS` building refuses by itself, with its own sentence)."""
        if nranks > MAX_NRANKS:
            return
        self.check(nranks, nranks * _BYTES_PER_RANK, f"{_BYTES_PER_RANK} B per rank to build")

    def check_verify(self, schedule: Schedule) -> None:
        """What :func:`commsim.verify` holds for ``schedule``."""
        from commsim._verify import MEMORY_LIMIT, memory_estimate

        p, need = schedule.nranks, memory_estimate(schedule)
        what = f"{p} ranks x {schedule.nslots} slots of verifier state"
        self.check(p, need, what, MEMORY_LIMIT)

    def check_export(self, schedule: Schedule, fmt: str) -> None:
        """What ``export`` holds writing ``schedule`` as ``fmt``: its text, at least
        :data:`EXPORT_BYTES_PER_TRANSFER` bytes a transfer (from the schedule's transfer count,
        never by iterating it)."""
        hint = schedule.ntransfers_hint
        if hint is None:
            return
        need = float(hint) * EXPORT_BYTES_PER_TRANSFER
        what = f"{hint:,} transfers as {fmt} text, {EXPORT_BYTES_PER_TRANSFER} B or more each"
        self.check(schedule.nranks, need, what)

    def check_predict(self, schedule: Schedule, nsizes: int) -> None:
        """What a model holds predicting ``schedule`` at ``nsizes`` sizes: one step, the clocks."""
        hint = schedule.max_step_transfers_hint  # never iterate a schedule just to size it
        t = schedule.nranks if hint is None else max(int(hint), schedule.nranks)
        clocks = 8 * nsizes * (3 * schedule.nranks + schedule.nsteps)
        need = t * (_PREDICT_BYTES_PER_TRANSFER + 8 * nsizes) + clocks
        self.check(schedule.nranks, need, f"{t} transfers in a step x {nsizes} sizes to predict")


def about(nbytes: float) -> str:
    """An estimate in binary units, three significant digits: ``"1.5GiB"``, ``"640KiB"``."""
    if nbytes >= 1024**6:  # past any machine: keep it short
        return f"{nbytes / 1024**5:.3g}PiB"
    return units.format_size(nbytes, exact=False)
