"""Collecting a :class:`~commsim.models.Timeline` while a model runs its clocks.

A model that can show its timeline (:meth:`Hockney.timeline <commsim.models.Hockney.timeline>`,
:meth:`LogGP.timeline <commsim.models.LogGP.timeline>`) runs the same per-rank clocks as its
``predict`` at one message size, handing a :class:`Recorder` each round's messages (arrays over
the round, never a loop over ranks) and each step's local reductions. The recorder refuses a
schedule past its message budget as soon as it gets there, before the rest is timed.
"""

from __future__ import annotations

import numpy as np

from commsim.errors import ResourceError
from commsim.models._usage import Timeline

__all__ = ["Recorder"]


class Recorder:
    """Per-message columns, appended round by round; :meth:`timeline` joins them.

    Args:
        max_messages: refuse (:class:`~commsim.errors.ResourceError`) past this many messages;
            ``None`` for no limit.
    """

    def __init__(self, max_messages: int | None = None) -> None:
        self.max_messages = max_messages
        self.nmessages = 0
        self._messages: list[tuple[np.ndarray, ...]] = []
        self._local: list[tuple[np.ndarray, ...]] = []

    def messages(
        self,
        step: int,
        src: np.ndarray,
        dst: np.ndarray,
        start: np.ndarray,
        end: np.ndarray,
        reduce_end: np.ndarray,
        recv_start: np.ndarray | None = None,
        send_end: np.ndarray | None = None,
    ) -> None:
        """One round's messages of step ``step`` (seconds; the optional columns default to
        ``start`` and ``end``, the rendezvous case). Arrays are copied."""
        m = len(src)
        if self.max_messages is not None and self.nmessages + m > self.max_messages:
            raise ResourceError(
                f"a timeline of more than {self.max_messages:,} messages is refused: "
                "use a smaller p or fewer segments"
            )
        self.nmessages += m
        cols = (
            np.full(m, step, dtype=np.int64),
            np.asarray(src, dtype=np.int64).copy(),
            np.asarray(dst, dtype=np.int64).copy(),
            np.array(start, dtype=np.float64),
            np.array(end, dtype=np.float64),
            np.array(reduce_end, dtype=np.float64),
            np.array(start if recv_start is None else recv_start, dtype=np.float64),
            np.array(end if send_end is None else send_end, dtype=np.float64),
        )
        self._messages.append(cols)

    def local(self, ranks: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        """Ranks ``ranks`` reduced into their own buffers from ``start`` to ``end``."""
        if len(ranks):
            self._local.append(
                (np.asarray(ranks, dtype=np.int64).copy(), np.array(start), np.array(end))
            )

    def timeline(self) -> Timeline:
        """Every recorded message, in the order they were timed."""
        kinds = (np.int64,) * 3 + (np.float64,) * 5
        cols = [
            np.concatenate([c[k] for c in self._messages])
            if self._messages
            else np.zeros(0, dtype=kinds[k])
            for k in range(8)
        ]
        local = [
            np.concatenate([c[k] for c in self._local])
            if self._local
            else np.zeros(0, dtype=np.int64 if k == 0 else np.float64)
            for k in range(3)
        ]
        step, src, dst, start, end, red_end, recv_start, send_end = cols
        return Timeline(
            step,
            src,
            dst,
            start,
            end,
            red_end,
            recv_start=recv_start,
            send_end=send_end,
            local_rank=local[0],
            local_start=local[1],
            local_end=local[2],
        )
