"""From slots to elements: how a schedule's buffers look in memory, and user data in and out.

Every rank holds one flat buffer of ``Layout.nelems`` elements: slot ``j`` is the element range
``[offsets[j], offsets[j + 1])``, ``units[j] × per_unit`` elements long. ``per_unit`` comes from
the collective's element count ``count`` (``nbytes / itemsize``, in the collective's ``nbytes``
convention) as ``count // nbytes_units``: like nccl-tests, a count that does not divide evenly is
rounded **down** to a multiple of the schedule's units, and :attr:`Layout.count` says what ran.

User-facing arrays (``[p, ...]``, one row per rank), as in MPI:

=============== ====================== ======================
collective      input per rank         output per rank
=============== ====================== ======================
allreduce       ``count``              ``count`` (the sum)
reduce          ``count``              ``count`` (root: the sum)
broadcast       ``count`` (root's)     ``count``
reduce_scatter  ``count``              ``count / p`` (block r)
allgather       ``count / p``          ``count``
alltoall        ``count`` (p blocks)   ``count`` (p blocks)
=============== ====================== ======================
"""

from __future__ import annotations

import dataclasses

import numpy as np

from commsim._ir import Schedule
from commsim.errors import CommsimError

__all__ = ["Layout", "ceil_count", "layout"]


@dataclasses.dataclass(frozen=True)
class Layout:
    """Element layout of a schedule's per-rank buffers for one message size."""

    nranks: int
    kind: str
    per_unit: int
    offsets: np.ndarray  # [nslots + 1] element offsets of the slots
    data_elems: int  # elements of the data slots (the collective's buffer)
    count: int  # the collective's element count that actually runs

    @property
    def nelems(self) -> int:
        return int(self.offsets[-1])

    def slot_range(self, slot: int, count: int = 1) -> tuple[int, int]:
        return int(self.offsets[slot]), int(self.offsets[slot + count])

    def input_shape(self) -> tuple[int, int]:
        per_rank = self.count // self.nranks if self.kind == "allgather" else self.count
        return (self.nranks, per_rank)

    def pack(self, inputs: np.ndarray) -> np.ndarray:
        """User inputs ``[p, ...]`` → full per-rank buffers ``[p, nelems]`` (zeros elsewhere)."""
        p = self.nranks
        want = self.input_shape()
        if inputs.shape != want:
            raise CommsimError(f"{self.kind} input must have shape {want}, got {inputs.shape}")
        buf = np.zeros((p, self.nelems), dtype=inputs.dtype)
        if self.kind == "allgather":
            b = self.count // p
            for r in range(p):
                buf[r, r * b : (r + 1) * b] = inputs[r]
        else:
            buf[:, : self.count] = inputs
        return buf

    def unpack(self, buffers: np.ndarray) -> np.ndarray:
        """Full buffers ``[p, nelems]`` → user outputs ``[p, ...]``."""
        p, c = self.nranks, self.count
        if self.kind == "reduce_scatter":
            b = c // p
            return np.stack([buffers[r, r * b : (r + 1) * b] for r in range(p)])
        if self.kind == "alltoall":
            return buffers[:, c : 2 * c].copy()
        return buffers[:, :c].copy()

    def reference(self, inputs: np.ndarray, root: int = 0) -> np.ndarray:
        """The collective's result computed directly with numpy (independent of any schedule).

        Rows the collective leaves undefined (non-roots of reduce) are returned as the input.
        """
        p, c = self.nranks, self.count
        kind = self.kind
        if kind == "allreduce":
            return np.broadcast_to(inputs.sum(axis=0, dtype=inputs.dtype), inputs.shape).copy()
        if kind == "reduce":
            out = inputs.copy()
            out[root] = inputs.sum(axis=0, dtype=inputs.dtype)
            return out
        if kind == "broadcast":
            return np.broadcast_to(inputs[root], inputs.shape).copy()
        if kind == "reduce_scatter":
            return inputs.sum(axis=0, dtype=inputs.dtype).reshape(p, c // p)
        if kind == "allgather":
            return np.broadcast_to(inputs.reshape(-1), (p, c)).copy()
        # alltoall: out[r, q-block] = in[q, r-block]
        b = c // p
        return inputs.reshape(p, p, b).transpose(1, 0, 2).reshape(p, c).copy()

    def checked_rows(self, root: int = 0) -> np.ndarray:
        """Ranks whose output the collective defines (all but reduce's non-roots)."""
        if self.kind == "reduce":
            return np.array([root])
        return np.arange(self.nranks)


def layout(schedule: Schedule, count: int) -> Layout:
    """The element layout of ``schedule`` for a collective of ``count`` elements.

    Examples:
        >>> import commsim
        >>> lay = layout(commsim.build("allreduce", "ring", nranks=4), 1001)
        >>> lay.count, lay.per_unit, lay.nelems  # 1001 rounds down to 1000 = 4 slots x 250
        (1000, 250, 1000)
    """
    u = schedule.nbytes_units
    if count < u:
        raise CommsimError(
            f"{schedule.kind} {schedule.name!r} on {schedule.nranks} ranks needs at least {u} "
            f"elements (one per slot unit), got {count}"
        )
    per_unit = count // u
    offsets = np.concatenate([[0], np.cumsum(schedule.slot_units * per_unit)]).astype(np.int64)
    data = int(offsets[schedule.ndata])
    real = data // 2 if schedule.kind == "alltoall" else data
    p = schedule.nranks
    if schedule.kind in ("allgather", "reduce_scatter", "alltoall"):
        nblocks = p * (2 if schedule.kind == "alltoall" else 1)
        m = schedule.ndata // nblocks
        sizes = np.diff(offsets[: schedule.ndata + 1 : m])
        if len(sizes) != nblocks or (sizes != sizes[0]).any():
            raise CommsimError(
                f"{schedule.kind} {schedule.name!r}: rank blocks have unequal sizes; "
                "executors need equal blocks"
            )
    return Layout(p, schedule.kind, per_unit, offsets, data, real)


def ceil_count(schedule: Schedule, count: int) -> int:
    """The smallest count >= ``count`` that runs without rounding (a multiple of the units)."""
    u = schedule.nbytes_units
    return max(u, -(-count // u) * u)
