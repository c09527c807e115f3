"""Exceptions raised by commsim. Each carries one readable line for the user."""

from __future__ import annotations

__all__ = [
    "CommsimError",
    "NoRouteError",
    "ParameterError",
    "ResourceError",
    "ScheduleError",
    "UnknownNameError",
]


class CommsimError(Exception):
    """Base class of every error commsim raises on purpose (the CLI prints it as one line)."""


class ScheduleError(CommsimError, ValueError):
    """A schedule is malformed or does not compute its collective.

    The message names the step, rank and slot involved where there is one; the same facts are
    kept as attributes (``None`` where not applicable) so tools can act on them.
    """

    def __init__(
        self,
        message: str,
        *,
        step: int | None = None,
        rank: int | None = None,
        slot: int | None = None,
    ) -> None:
        super().__init__(message)
        self.step, self.rank, self.slot = step, rank, slot


class ParameterError(CommsimError, ValueError):
    """A bad argument to a commsim function: wrong type, out of range, or an unparsable unit."""


class NoRouteError(ParameterError):
    """A network with no route between two endpoints a schedule connects (a
    :class:`ParameterError`: the schedule, the placement or the graph does not fit)."""


class UnknownNameError(CommsimError, KeyError):
    """An unknown collective or algorithm name; the message suggests the closest names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class ResourceError(CommsimError, MemoryError):
    """A request that would need more memory (or other resources) than allowed; says how much."""
