"""The numpy backend: the reference interpreter on real data.

Every other backend is checked against it. It applies each step with the IR's semantics
(all reads of a step before its writes; overwrite or add) on per-rank buffers ``[p, nelems]``,
one slice per transfer, so it is exact and simple rather than fast.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim._compat import INTEGER_DTYPES, check_dtype
from commsim._ir import Schedule
from commsim.exec._backend import Compiled
from commsim.exec._layout import Layout
from commsim.exec._lowering import check_layout

__all__ = ["DTYPES", "NumpyBackend", "interpret"]

DTYPES = ("float16", "float32", "float64", "complex64", "complex128", *INTEGER_DTYPES)


def interpret(schedule: Schedule, layout: Layout, buffers: np.ndarray) -> np.ndarray:
    """Run ``schedule`` on ``buffers`` (``[p, nelems]``, modified in place and returned).

    Floating-point overflow gives ``inf`` as IEEE arithmetic does, without a warning: the data's
    range is the caller's business, and :func:`check_outputs` compares infinities as equal.
    """
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
    """Runs schedules with :func:`interpret` on host memory."""

    name = "numpy"

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
        return Compiled(
            put=lambda host: np.array(host, dtype=dtype),
            run=lambda buf: interpret(schedule, layout, buf),
            get=lambda buf: buf,
        )

    def native(self, schedule: Schedule, layout: Layout, dtype: np.dtype) -> Compiled | None:
        return None  # the reference has no library collective to compare against
