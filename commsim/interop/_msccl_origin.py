"""An imported MSCCL-IR program's steps, and where each transfer came from in the file.

:class:`Steps` is the schedule's ``step_fn``. Its ``origin(step, rank, slot)`` is the hook
:func:`commsim.verify` calls to word an error (see :class:`commsim.Schedule`): it names the slot in
the file's terms (``gpu 2's o[3]``) and the XML step whose transfer in ``step`` wrote or read it.
When that transfer is the importer's own final copy of ``o`` into the output region, it names the
XML step that last wrote the copied chunk instead: that is where the wrong value came from.
"""

from __future__ import annotations

import numpy as np

from commsim._ir import Step
from commsim.interop._msccl_layout import Layout
from commsim.interop._msccl_parse import Op

__all__ = ["Steps"]

Writer = tuple[
    Op | None, Op | None
]  # (the XML step that wrote, the one that sent); None: final copy


class Steps:
    """The schedule's steps (``steps[i]``), their channel count and, per transfer, the XML
    steps it came from."""

    def __init__(
        self,
        steps: list[Step],
        writers: list[list[Writer]],
        layout: Layout,
        source: str,
        nchannels: int = 1,
    ) -> None:
        self.steps, self.writers, self.layout, self.source = steps, writers, layout, source
        self.nchannels = nchannels  # the channels the steps' transfers use

    def __call__(self, i: int) -> Step:
        return self.steps[i]

    def origin(self, step: int | None, rank: int | None, slot: int | None) -> str | None:
        """Where ``rank``'s ``slot`` in ``step`` came from in the file, as a phrase."""
        if rank is None or slot is None:
            return None
        what = f"{self.source}: rank {rank} slot {slot} is {self.layout.describe(rank, slot)}"
        if step is None or not 0 <= step < len(self.steps):
            return what
        for side in ("written", "read"):
            found = self._transfer(step, rank, slot, side)
            if found is None:
                continue
            t, (op, sender) = found
            if op is None:  # the final copy: blame whoever wrote the chunk it copied
                st = self.steps[step]
                src = int(
                    st.src_slot[t]
                    + slot
                    - (st.dst_slot[t] if side == "written" else st.src_slot[t])
                )
                return f"{what}, copied at the end from {self._last_write(step, rank, src)}"
            if sender is None:
                return f"{what}, {side} by {op.where}"
            if side == "read":
                return f"{what}, read by {sender.where}, sending to {op.where}"
            return f"{what}, written by {op.where}, sent by {sender.where}"
        return what

    def _transfer(self, step: int, rank: int, slot: int, side: str) -> tuple[int, Writer] | None:
        st = self.steps[step]
        ranks, slots = (st.dst, st.dst_slot) if side == "written" else (st.src, st.src_slot)
        hit = np.flatnonzero((ranks == rank) & (slots <= slot) & (slot < slots + st.count))
        return (int(hit[0]), self.writers[step][int(hit[0])]) if len(hit) else None

    def _last_write(self, before: int, rank: int, slot: int) -> str:
        where = self.layout.describe(rank, slot)
        for i in range(before - 1, -1, -1):
            found = self._transfer(i, rank, slot, "written")
            if found is not None:
                op, sender = found[1]
                by = f", sent by {sender.where}" if sender is not None else ""
                return f"{where}, last written by {op.where}{by}"
        return f"{where}, which no step wrote"
