"""A schedule as a table of messages: per step, who sends which slots to whom, and how.

One row per ``(step, src, dst)``: a **message** when ``src != dst`` (the IR's grouping, by
:func:`commsim._messages.group`, so this table, the cost models and the executors agree on what a
message is), a **local** operation when ``src == dst``. Slot ranges are half-open ``[lo, hi)``
pairs, adjacent transfers merged; ``reduce`` says whether the receiver adds the data into its
slots (``⊕``) rather than overwriting them. :func:`MessageRow.label` is the short form the
diagram writes beside an arrow, with inclusive ranges for people (``⊕0-3`` is slots 0 to 3).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from commsim._ir import Schedule, Step
from commsim._messages import group
from commsim.viz._dag import slot_ranges

__all__ = ["MessageRow", "message_rows", "step_rows"]

Ranges = tuple[tuple[int, int], ...]


def _show(ranges: Ranges) -> str:
    return ",".join(str(a) if b == a + 1 else f"{a}-{b - 1}" for a, b in ranges)


@dataclasses.dataclass(frozen=True)
class MessageRow:
    """One message (or local operation) of a step.

    Attributes:
        step, src, dst: where it sits; ``src == dst`` is a local copy or reduction.
        slots: the sender's slot ranges, half-open ``(lo, hi)`` pairs.
        dst_slots: the receiver's slot ranges (usually the same).
        units: data units moved.
        reduce_units: units the receiver reduces into its slots (the rest it overwrites).
    """

    step: int
    src: int
    dst: int
    slots: Ranges
    dst_slots: Ranges
    units: int
    reduce_units: int

    @property
    def local(self) -> bool:
        return self.src == self.dst

    @property
    def reduce(self) -> bool:
        """Whether the receiver reduces (any part of) the message into its slots."""
        return self.reduce_units > 0

    @property
    def slots_text(self) -> str:
        """The sender's slots, ``0-3,8`` (inclusive ranges)."""
        return _show(self.slots)

    @property
    def dst_slots_text(self) -> str:
        """The receiver's slots, the same way."""
        return _show(self.dst_slots)

    def label(self) -> str:
        """``→4 ⊕0-3``: to rank 4, reduce into slots 0 to 3 (``as 8-11`` if they land elsewhere)."""
        where = self.slots_text
        if self.dst_slots != self.slots:
            where += f" as {self.dst_slots_text}"
        to = "local" if self.local else f"→{self.dst}"
        return f"{to} {'⊕' if self.reduce else ''}{where}"

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` row (ranges as ``[lo, hi]`` pairs, half-open)."""
        return {
            "step": self.step,
            "src": self.src,
            "dst": self.dst,
            "local": self.local,
            "slots": [list(r) for r in self.slots],
            "dst_slots": [list(r) for r in self.dst_slots],
            "units": self.units,
            "reduce_units": self.reduce_units,
            "reduce": self.reduce,
        }


def step_rows(schedule: Schedule, step: Step, index: int) -> list[MessageRow]:
    """The rows of one step: its messages in ``(src, dst)`` order, then its local operations."""
    g = group(step.src, step.dst, schedule.nranks)
    local = [g.local[step.src[g.local] == r] for r in np.unique(step.src[g.local]).tolist()]
    rows = []
    for tr in [*g.transfers, *local]:
        units = schedule.range_units(step.src_slot[tr], step.count[tr])
        rows.append(
            MessageRow(
                index,
                int(step.src[tr[0]]),
                int(step.dst[tr[0]]),
                slot_ranges(step.src_slot[tr], step.count[tr]),
                slot_ranges(step.dst_slot[tr], step.count[tr]),
                int(units.sum()),
                int(units[step.reduce[tr]].sum()),
            )
        )
    return rows


def message_rows(schedule: Schedule, steps: range | None = None) -> list[MessageRow]:
    """Every row of ``steps`` (default: all steps), step by step.

    Examples:
        >>> import commsim
        >>> s = commsim.build("allreduce", "rabenseifner", nranks=4)
        >>> [r.label() for r in message_rows(s, range(1)) if r.src == 0]  # step 0: halve
        ['→2 ⊕2-3']
    """
    steps = range(schedule.nsteps) if steps is None else steps
    rows: list[MessageRow] = []
    for i in steps:
        st = schedule.step(i)
        schedule.check_step(st, i)
        rows += step_rows(schedule, st, i)
    return rows
