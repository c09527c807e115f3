r"""Where an MSCCL-IR program's ``i``, ``o`` and ``s`` buffers sit in a commsim rank's slots.

One chunk is one slot. ``c = nchunksperloop`` is the collective's element count in chunks (the
compiler writes the larger of the input and output sizes, which is ``c`` for every collective), so
the data slots are ``ndata = c · nbytes_divisor`` (``2c`` for alltoall, ``c`` otherwise) and the
collective's own :meth:`~commsim.CollectiveSpec.input_region` / ``output_region`` say where rank
``r``'s input and output lie in them. The mapping:

* ``i`` is always the input region (that is where the verifier and the executors put the input).
* **In place** (``inplace="1"``): ``o`` is the output region. Where the regions overlap, this *is*
  NCCL's (and MSCCLang's) in-place aliasing: allreduce, broadcast and reduce ``o = i``; allgather
  ``i = o[r·m:(r+1)·m]``; reduce-scatter ``o = i[r·m:(r+1)·m]``. Where they are disjoint
  (alltoall) in place means ``o = i``: both sit on the input region and one final local copy
  moves the buffer to the output region.
* **Out of place** (``inplace="0"``): where the regions are disjoint (alltoall) ``o`` is the output
  region. Where they overlap, ``o`` cannot share slots with ``i`` (the program may still read input
  that the aliased output would have overwritten), so ``o`` lives in scratch slots after the data,
  and one final local copy moves every chunk the program wrote into ``o`` to the output region.
* ``s`` follows (scratch), then the temporaries of ``rrs`` steps (one fresh range each: a reduced
  chunk forwarded without being stored needs a slot to travel from), then the *snapshots* of the
  sends the importer copies at their post (:meth:`Layout.with_snapshots`, one fresh range each:
  see :mod:`._msccl_read`).

Every access is checked against its buffer: ``i`` and ``o`` hold the collective's input and output
lengths, ``s`` its ``s_chunks``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from commsim._collectives import spec
from commsim.errors import ResourceError, ScheduleError
from commsim.interop._msccl_parse import STEP_TYPES, Algo, Op

__all__ = ["MAX_SLOTS", "Layout"]

#: Slots per rank an imported program may need (buffers, scratch and temporaries together).
MAX_SLOTS = 2**22


@dataclasses.dataclass(frozen=True)
class Layout:
    """Slot bases of every rank's buffers, and the final copy the mapping needs.

    ``base[g][b]`` is gpu ``g``'s first slot of buffer ``b``; ``extent[g][b]`` its chunks;
    ``temp[op]`` the first slot of an ``rrs`` step's temporary, ``snapshot[op]`` that of the copy
    a send step's chunks are posted from (none until :meth:`with_snapshots`); ``top[g]`` gpu
    ``g``'s first slot past all of them.
    """

    ndata: int
    nslots: int
    base: tuple[dict[str, int], ...]
    extent: tuple[dict[str, int], ...]
    temp: dict[Op, int]
    out_region: tuple[int, ...]  # each rank's output region's first data slot
    final_copy: str  # "" (none), "written" (o in scratch) or "all" (in-place, disjoint regions)
    top: tuple[int, ...]
    snapshot: dict[Op, int] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, algo: Algo) -> Layout:
        p, c, sp = len(algo.gpus), algo.nchunks, spec(algo.collective)
        ndata = c * sp.nbytes_divisor
        try:
            sp.check_layout(p, ndata)
        except ScheduleError as e:
            raise ScheduleError(
                f"{algo.source}: <algo> nchunksperloop={c} does not fit {p} gpus: {e}"
            ) from None
        in_off, in_len = sp.input_region(p, c)
        out_off, out_len = sp.output_region(p, c)
        overlap = bool(in_off[0] < out_off[0] + out_len and out_off[0] < in_off[0] + in_len)
        o_scratch = not algo.inplace and overlap
        final = "written" if o_scratch else "all" if algo.inplace and not overlap else ""
        s_base = ndata + (out_len if o_scratch else 0)
        bases, extents, temp, tops = [], [], {}, []
        for g, gpu in enumerate(algo.gpus):
            where = f"{algo.source}: gpu {g}"
            for attr, have, limit in (
                ("i_chunks", gpu.i_chunks, in_len),
                ("o_chunks", gpu.o_chunks, out_len),
            ):
                if have > limit:
                    raise ScheduleError(
                        f"{where}: <gpu> {attr}={have} exceeds the {limit} chunks of a "
                        f"{algo.collective} {attr[0]} buffer with nchunksperloop={c} on {p} gpus"
                    )
            o_base = s_base - out_len if o_scratch else int(out_off[g])
            if algo.inplace and not overlap:
                o_base = int(in_off[g])  # o = i, moved to the output region at the end
            base = {"i": int(in_off[g]), "o": o_base, "s": s_base}
            extent = {"i": int(in_len), "o": int(out_len), "s": gpu.s_chunks}
            top = s_base + gpu.s_chunks
            for tb in gpu.tbs:
                for op in tb.ops:
                    _check_ranges(op, extent, f"{where} tb {op.tb} step {op.s}")
                    if op.type == "rrs":
                        temp[op] = top
                        top += op.cnt
            _check_top(top, where)
            tops.append(top)
            bases.append(base)
            extents.append(extent)
        return cls(
            ndata, max([ndata, *tops]), tuple(bases), tuple(extents), temp,
            tuple(map(int, out_off)), final, tuple(tops),
        )  # fmt: skip

    def with_snapshots(self, ops: list[Op], source: str) -> Layout:
        """This layout plus a fresh range of ``op.cnt`` slots (past ``top``) for each send step
        in ``ops`` that has none yet."""
        tops, snapshot = list(self.top), dict(self.snapshot)
        for op in ops:
            if op not in snapshot:
                snapshot[op] = tops[op.gpu]
                tops[op.gpu] += op.cnt
                _check_top(tops[op.gpu], f"{source}: gpu {op.gpu}")
        return dataclasses.replace(
            self, nslots=max([self.nslots, *tops]), top=tuple(tops), snapshot=snapshot
        )

    def slot(self, g: int, buf: str, off: int) -> int:
        return self.base[g][buf] + off

    def describe(self, g: int, slot: int) -> str:
        """``slot`` of gpu ``g`` in the file's terms: ``gpu 0's i[3]``, a temporary, ..."""
        names = [
            f"{b}[{slot - self.base[g][b]}]"
            for b in ("i", "o", "s")
            if 0 <= slot - self.base[g][b] < self.extent[g][b]
        ]
        if names:
            return f"gpu {g}'s {'/'.join(names)}"
        for op, first in self.temp.items():
            if op.gpu == g and first <= slot < first + op.cnt:
                return f"the temporary of {op.where}"
        for op, first in self.snapshot.items():
            if op.gpu == g and first <= slot < first + op.cnt:
                return f"the copy {op.where} sends from"
        j = slot - self.out_region[g]
        if self.final_copy and 0 <= j < self.extent[g]["o"]:
            return f"gpu {g}'s output chunk {j} (o[{j}] after the final copy)"
        return f"gpu {g}'s unused chunk {slot}"

    def written_o(self, algo: Algo) -> list[np.ndarray]:
        """Per gpu, a mask of the ``o`` chunks some step writes (for the final copy)."""
        masks = []
        for g, gpu in enumerate(algo.gpus):
            mask = np.zeros(self.extent[g]["o"], dtype=bool)
            for tb in gpu.tbs:
                for op in tb.ops:
                    if STEP_TYPES[op.type][1] and op.dstbuf == "o":
                        mask[op.dstoff : op.dstoff + op.cnt] = True
            masks.append(mask)
        return masks


def _check_top(top: int, where: str) -> None:
    if top > MAX_SLOTS:
        raise ResourceError(
            f"{where}: its buffers, scratch and temporaries need {top:,} chunks, more "
            f"than the {MAX_SLOTS:,} an imported program may use"
        )


def _check_ranges(op: Op, extent: dict[str, int], where: str) -> None:
    reads, writes, _, _ = STEP_TYPES[op.type]
    for used, buf, off, side in (
        (reads, op.srcbuf, op.srcoff, "src"),
        (writes, op.dstbuf, op.dstoff, "dst"),
    ):
        if used and off + op.cnt > extent[buf]:
            raise ScheduleError(
                f"{where}: <step> {side}buf={buf} {side}off={off} cnt={op.cnt} runs past the "
                f"{extent[buf]} chunks of buffer {buf}"
            )
