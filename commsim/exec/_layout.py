"""From slots to elements: how a schedule's buffers look in memory, and user data in and out.

Every rank holds one flat buffer of ``Layout.nelems`` elements: slot ``j`` is the element range
``[offsets[j], offsets[j + 1])``, ``units[j] × per_unit`` elements long. ``per_unit`` comes from
the collective's element count ``count`` (``nbytes / itemsize``, in the collective's ``nbytes``
convention) as ``count // nbytes_units``: like nccl-tests, a count that does not divide evenly is
rounded **down** to a multiple of the schedule's units, and :attr:`Layout.count` says what ran.

User-facing arrays are ``[p, ...]``, one row per rank, as in MPI; where each rank's input and
output sit in its buffer is the collective's :class:`~commsim.CollectiveSpec` (``input_region``,
``output_region``), so this module never looks at which collective it lays out.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from commsim._collectives import CollectiveSpec
from commsim._ir import Schedule
from commsim.errors import CommsimError

__all__ = ["Layout", "layout"]


@dataclasses.dataclass(frozen=True)
class Layout:
    """Element layout of a schedule's per-rank buffers for one message size."""

    nranks: int
    spec: CollectiveSpec
    per_unit: int
    offsets: np.ndarray  # [nslots + 1] element offsets of the slots
    data_elems: int  # elements of the data slots (the collective's buffer)
    count: int  # the collective's element count that actually runs
    helpers: int = 0  # the last ranks hold no data (IR rule 7): inputs ignored, outputs unchecked

    @property
    def nelems(self) -> int:
        return int(self.offsets[-1])

    def _index(self, region: tuple[np.ndarray, int]) -> np.ndarray:
        starts, length = region
        return starts[:, None] + np.arange(length)

    def _rows(self, buffers: np.ndarray, region: tuple[np.ndarray, int]) -> np.ndarray | None:
        """Each rank's ``region`` of C-contiguous ``buffers [p, nelems]`` as a ``[p, length]``
        view, where rank ``r``'s region starts at ``a + d·r`` (``d >= 0``: every collective's
        regions, the same start or rank ``r``'s own block); ``None`` otherwise.

        A view moves the data once; the index arrays of :meth:`_index` cost 8 bytes per
        element (256 MiB for a 64 MiB float32 buffer on 2 ranks) and a gather on top."""
        starts, length = region
        p = self.nranks
        if (
            not isinstance(buffers, np.ndarray)
            or buffers.shape != (p, self.nelems)
            or p == 0
            or length == 0
            or not buffers.flags.c_contiguous
        ):
            return None
        a = int(starts[0])
        d = int(starts[1] - starts[0]) if p > 1 else 0
        if d < 0 or not np.array_equal(starts, a + d * np.arange(p)):
            return None
        size = buffers.itemsize
        return np.lib.stride_tricks.as_strided(
            buffers.reshape(-1)[a:],
            shape=(p, length),
            strides=((self.nelems + d) * size, size),
            writeable=buffers.flags.writeable,
        )

    def input_slice(self, rank: int) -> slice:
        """Rank ``rank``'s input elements in its buffer."""
        starts, length = self.spec.input_region(self.nranks, self.count)
        return slice(int(starts[rank]), int(starts[rank]) + length)

    def output_slice(self, rank: int) -> slice:
        """Rank ``rank``'s output elements in its buffer."""
        starts, length = self.spec.output_region(self.nranks, self.count)
        return slice(int(starts[rank]), int(starts[rank]) + length)

    def input_shape(self) -> tuple[int, int]:
        """``(p, elements of each rank's input)``."""
        return (self.nranks, self.spec.input_region(self.nranks, self.count)[1])

    def take_input(self, buffers: np.ndarray) -> np.ndarray:
        """Each rank's input region of full buffers ``[p, nelems]`` → ``[p, input length]``."""
        region = self.spec.input_region(self.nranks, self.count)
        view = self._rows(buffers, region)
        if view is not None:
            return view.copy()
        return np.take_along_axis(buffers, self._index(region), axis=1)

    def pack(self, inputs: np.ndarray) -> np.ndarray:
        """User inputs ``[p, ...]`` → full per-rank buffers ``[p, nelems]`` (zeros elsewhere, and
        on helper ranks, whose input rows are ignored)."""
        want = self.input_shape()
        if inputs.shape != want:
            raise CommsimError(f"{self.spec.name} input must have shape {want}, got {inputs.shape}")
        buf = np.zeros((self.nranks, self.nelems), dtype=inputs.dtype)
        region = self.spec.input_region(self.nranks, self.count)
        view = self._rows(buf, region)
        if view is not None:
            view[...] = inputs
        else:
            np.put_along_axis(buf, self._index(region), inputs, axis=1)
        buf[self.nranks - self.helpers :] = 0  # helper ranks hold no data
        return buf

    def unpack(self, buffers: np.ndarray) -> np.ndarray:
        """Full buffers ``[p, nelems]`` → user outputs ``[p, ...]``."""
        region = self.spec.output_region(self.nranks, self.count)
        view = self._rows(buffers, region)
        if view is not None:
            return view.copy()
        return np.take_along_axis(buffers, self._index(region), axis=1)

    def place_output(self, outputs: np.ndarray) -> np.ndarray:
        """User outputs ``[p, ...]`` → full buffers ``[p, nelems]`` holding them (zeros elsewhere):
        where a backend's native collective leaves its result, the schedule leaves it too."""
        out = np.zeros((self.nranks, self.nelems), dtype=outputs.dtype)
        region = self.spec.output_region(self.nranks, self.count)
        shape = (self.nranks, region[1])
        view = self._rows(out, region)
        if view is not None:
            view[...] = np.asarray(outputs).reshape(shape)
        else:
            idx = self._index(region)
            np.put_along_axis(out, idx, np.asarray(outputs).reshape(shape), axis=1)
        return out

    def reference(self, inputs: np.ndarray, root: int = 0) -> np.ndarray:
        """The collective's result computed directly (:meth:`CollectiveSpec.reference`), over
        the workers' rows (helper ranks' inputs take no part)."""
        return self.spec.reference(inputs, root, self.helpers)

    def checked_rows(self, root: int = 0) -> np.ndarray:
        """Ranks whose output the collective defines (all but reduce's non-roots and helpers)."""
        return self.spec.checked_ranks(self.nranks, root, self.helpers)


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
            f"{schedule.collective} {schedule.algorithm!r} on {schedule.nranks} ranks needs at "
            f"least {u} elements (one per slot unit), got {count}"
        )
    sp, p = schedule.spec, schedule.nranks
    per_unit = count // u
    offsets = np.concatenate([[0], np.cumsum(schedule.slot_units * per_unit)]).astype(np.int64)
    data = int(offsets[schedule.ndata])
    if sp.block_multiple:
        nblocks = p * sp.block_multiple
        m = schedule.ndata // nblocks
        sizes = np.diff(offsets[: schedule.ndata + 1 : m])
        if len(sizes) != nblocks or (sizes != sizes[0]).any():
            raise CommsimError(
                f"{schedule.collective} {schedule.algorithm!r}: rank blocks have unequal sizes; "
                "executors need equal blocks"
            )
    return Layout(p, sp, per_unit, offsets, data, sp.nbytes_units(data), schedule.helpers)
