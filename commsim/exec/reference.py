"""The numpy backend: the reference interpreter on real data.

Every other backend is checked against it. It applies each step with the IR's semantics
(all reads of a step before its writes; overwrite or add) on per-rank buffers ``[p, nelems]``,
one slice per transfer, so it is exact and simple rather than fast.

With a wire format (``NumpyBackend(wire="fp16")``, :mod:`commsim._wire`), every transfer
between two ranks is converted by its sender and back by its receiver, which then adds in the
buffer's dtype (:func:`commsim._wire_run.interpret`); int8 cuts each transfer's payload into its
own chunks, so results differ from other backends' within the format's error bound, which is
what :func:`commsim.exec.check_outputs` checks with ``wire=``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim._compat import INTEGER_DTYPES, check_dtype
from commsim._ir import Schedule
from commsim._wire import Wire, check_wire
from commsim._wire import wire as as_wire
from commsim._wire_run import interpret as interpret_wire
from commsim.exec._backend import Compiled
from commsim.exec._layout import Layout
from commsim.exec._lowering import check_layout

__all__ = ["DTYPES", "NumpyBackend", "interpret"]

DTYPES = ("float16", "float32", "float64", "complex64", "complex128", *INTEGER_DTYPES)


def interpret(
    schedule: Schedule, layout: Layout, buffers: np.ndarray, wire: Wire | None = None
) -> np.ndarray:
    """Run ``schedule`` on ``buffers`` (``[p, nelems]``, modified in place and returned), its
    messages in wire format ``wire`` when given (``None``: exact copies).

    Floating-point overflow gives ``inf`` as IEEE arithmetic does, without a warning: the data's
    range is the caller's business, and :func:`check_outputs` compares infinities as equal.
    """
    if wire is not None:
        return interpret_wire(schedule, layout.offsets, buffers, wire)
    with np.errstate(over="ignore", invalid="ignore"):
        return _apply(schedule, layout, buffers)


def _apply(schedule: Schedule, layout: Layout, buffers: np.ndarray) -> np.ndarray:
    off = layout.offsets
    for st in schedule.steps():
        if len(st.src) == 0:
            continue
        sa, sb = off[st.src_slot], off[st.src_slot + st.count]
        da = off[st.dst_slot]
        reads = [buffers[q, a:b].copy() for q, a, b in zip(st.src, sa, sb, strict=True)]
        for r, d, red, v in zip(st.dst, da, st.reduce, reads, strict=True):
            if red:
                buffers[r, d : d + len(v)] += v
            else:
                buffers[r, d : d + len(v)] = v
    return buffers


class NumpyBackend:
    """Runs schedules with :func:`interpret` on host memory.

    Args:
        wire: send every message in this wire format (``"fp16"``, ``"bf16"``, ``"int8"``;
            reductions of float data only); ``None``: exact.
    """

    name = "numpy"
    #: the wire format every message travels in (``None``: the data's own dtype)
    wire: Wire | None = None

    def __init__(self, wire: str | Wire | None = None) -> None:
        self.wire = as_wire(wire)

    @staticmethod
    def prepare(nranks: int) -> None:
        """Nothing to set up before it starts."""

    @staticmethod
    def check_dtype(dtype: Any) -> np.dtype:
        return check_dtype(dtype, "numpy", DTYPES)

    def unavailable(self) -> str | None:
        return None

    @staticmethod
    def native_name(collective: str) -> str:
        return "none"

    @staticmethod
    def host_workers(nranks: int) -> int:
        return 1  # one process walks every rank's buffer

    def compile(self, schedule: Schedule, layout: Layout, dtype: np.dtype) -> Compiled:
        check_layout(schedule, layout)
        check_wire(self.wire, schedule.collective, dtype)
        return Compiled(
            put=lambda host: np.array(host, dtype=dtype),
            run=lambda buf: interpret(schedule, layout, buf, self.wire),
            get=lambda buf: buf,
        )

    def native(self, schedule: Schedule, layout: Layout, dtype: np.dtype) -> Compiled | None:
        return None  # the reference has no library collective to compare against
