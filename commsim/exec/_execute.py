"""Run a schedule on user data with any backend, and check it against the reference."""

from __future__ import annotations

from typing import Any

import numpy as np

from commsim._compat import float_eps
from commsim._ir import Schedule
from commsim._wire import Wire, check_wire
from commsim._wire import wire as as_wire
from commsim._wire_run import error_bound, tolerance
from commsim.errors import CommsimError
from commsim.exec._backend import Backend
from commsim.exec._layout import Layout, layout
from commsim.exec._registry import get_backend
from commsim.exec.reference import interpret

__all__ = ["check_outputs", "execute", "random_inputs"]


def random_inputs(lay: Layout, dtype: Any, seed: int = 0) -> np.ndarray:
    """Inputs of the right shape: small integers (exact in every dtype, any summation order)."""
    rng = np.random.default_rng(seed)
    return rng.integers(-8, 9, size=lay.input_shape()).astype(dtype)


def check_outputs(
    schedule: Schedule,
    lay: Layout,
    inputs: np.ndarray,
    outputs: np.ndarray,
    wire: str | Wire | None = None,
) -> None:
    """Compare backend ``outputs`` with the reference interpreter's, and with the collective
    computed directly (:meth:`Layout.reference`, which does not look at the schedule); raise
    naming rank and element.

    Integers must match exactly; floats within float32/float64 reassociation tolerance. With a
    ``wire`` format the outputs were computed from messages in that format: each element must be
    within its error bound (:func:`commsim._wire_run.error_bound`: the format's error per
    conversion, times the conversions on every path into the element) of the exact result.
    """
    rows = lay.checked_rows(schedule.root)
    interpreted = lay.unpack(interpret(schedule, lay, lay.pack(inputs)))
    direct = lay.reference(inputs, schedule.root)
    w = as_wire(wire)
    bound = None if w is None else _wire_tolerance(schedule, lay, inputs, w)
    got = _rows_of(outputs, rows)
    for name, ref in (("the reference interpreter", interpreted), ("the collective", direct)):
        want = _rows_of(ref, rows)
        bad = _first_bad(
            got, want, schedule.nranks, None if bound is None else _rows_of(bound, rows)
        )
        if bad is not None:
            r, e = bad
            raise CommsimError(
                f"{schedule.collective} {schedule.algorithm!r} (p={schedule.nranks}): rank {int(rows[r])} "
                f"element {e} is {got[r, e]!r}, {name} gives {want[r, e]!r}"
            )


def _rows_of(a: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The rows ``rows`` of ``a``: a view where they are the first ``len(rows)`` in order."""
    if len(rows) and rows[0] == 0 and np.array_equal(rows, np.arange(len(rows))):
        return a[: len(rows)]
    return a[rows]


#: elements compared at once: temporaries small enough to stay in cache and heap memory
_BLOCK = 1 << 18


def _first_bad(
    got: np.ndarray, want: np.ndarray, nranks: int, bound: np.ndarray | None
) -> tuple[int, int] | None:
    """The first ``(row, element)`` where ``got`` is not ``want``: integers exactly, floats
    within ``4·eps·p·max(|want|, 1)`` (and ``bound``), equal infinities and NaN alike.

    Compared a block of elements at a time, each block first for plain equality (the inputs
    are small integers: sums are exact, almost every element is equal), so no temporary is as
    large as the outputs."""
    nrows, n = want.shape
    cols = min(n, _BLOCK)
    rows_at_once = max(1, _BLOCK // max(cols, 1))
    exact = np.issubdtype(want.dtype, np.integer)
    eps = 0.0 if exact else float_eps(want.dtype)
    for r0 in range(0, nrows, rows_at_once):  # row-major: the first bad element is the first
        for c in range(0, n, max(cols, 1)):
            at = (slice(r0, r0 + rows_at_once), slice(c, c + cols))
            g, x = got[at], want[at]
            bad = g != x
            if not bad.any():
                continue
            if not exact:
                tol = 4 * eps * nranks * np.maximum(np.abs(x), 1.0)
                if bound is not None:
                    tol = np.maximum(tol, bound[at])
                with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: compared below
                    close = np.abs(g - x) <= tol
                bad &= ~(close | (np.isnan(g) & np.isnan(x)))  # equal infinities: not bad
            if bad.any():
                r, e = (int(v) for v in np.argwhere(bad)[0])
                return r0 + r, c + e
    return None


def _wire_tolerance(schedule: Schedule, lay: Layout, inputs: np.ndarray, w: Wire) -> np.ndarray:
    """``[p, output]``: how far each output may be from the exact one over wire ``w``."""
    magnitude = lay.pack(np.abs(inputs).astype(np.float64))
    eps = float_eps(np.dtype(inputs.dtype))
    bound = error_bound(schedule, lay.offsets, magnitude, w, eps)
    return tolerance(lay.unpack(bound), lay.unpack(magnitude), eps, schedule.nranks)


def execute(
    schedule: Schedule,
    inputs: np.ndarray,
    backend: str | Backend = "numpy",
    *,
    check: bool = True,
    wire: str | Wire | None = None,
) -> np.ndarray:
    """Run ``schedule`` on ``inputs`` (``[p, ...]``, see :mod:`commsim.exec._layout`).

    Single-process backends only (numpy, jax, cuda); MPI runs one process per rank
    (``commsim run --backend mpi``). ``wire`` (``"fp16"``, ``"bf16"``, ``"int8"``) sends every
    message in that format (the backend, given by name, is made with ``wire=``); the check is
    then within the format's error bound.

    Examples:
        >>> import numpy as np, commsim
        >>> s = commsim.build("allreduce", "ring", nranks=3)
        >>> execute(s, np.arange(9.0).reshape(3, 3))[0].tolist()
        [9.0, 12.0, 15.0]
    """
    if not isinstance(schedule, Schedule):
        raise CommsimError(f"execute expects a commsim.Schedule, got {type(schedule).__name__}")
    w = as_wire(wire)
    be = get_backend(backend, **({"wire": w} if w else {})) if isinstance(backend, str) else backend
    inputs = np.asarray(inputs)
    be.check_dtype(inputs.dtype)
    check_wire(w, schedule.collective, inputs.dtype)
    if inputs.ndim != 2 or inputs.shape[0] != schedule.nranks:
        raise CommsimError(
            f"inputs must have shape [nranks={schedule.nranks}, count], got {inputs.shape}"
        )
    count = schedule.spec.count_from_input(schedule.nranks, inputs.shape[1])
    lay = layout(schedule, count)
    if lay.count != count:
        raise CommsimError(
            f"{count} elements do not divide into {schedule.algorithm!r}'s "
            f"{schedule.nbytes_units} slot units; use a multiple of {schedule.nbytes_units}"
        )
    compiled = be.compile(schedule, lay, inputs.dtype)
    outputs = lay.unpack(compiled.get(compiled.run(compiled.put(lay.pack(inputs)))))
    if check:
        check_outputs(schedule, lay, inputs, outputs, w if w else getattr(be, "wire", None))
    return outputs
