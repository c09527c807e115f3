r"""A schedule run over a wire format, and the error bound its result must meet.

Two interpreters of the IR's semantics (all reads of a step before its writes; overwrite or add)
on per-rank buffers ``[p, nelems]`` whose slot ``j`` is the element range
``[offsets[j], offsets[j + 1])``:

* :func:`interpret` moves the data: each transfer between two ranks is converted to the wire
  format by its sender and back by its receiver (:meth:`commsim._wire.Wire.transmit`), and the
  receiver adds (or stores) in the buffer's own dtype; a rank's local transfers are not converted
  (they never reach the wire). The numpy backend's reference run with ``wire=``.
* :func:`error_bound` runs the same steps on two bounds per element: :math:`A`, the sum of the
  magnitudes of the inputs a value holds, and :math:`E`, the error it may carry. A conversion of a
  value bounded by :math:`A + E` adds its format's error (:meth:`~commsim._wire.Wire.hop_error`):

  .. math::

      E_\text{sent} = E + u\,(A + E) + \text{tiny} \quad\text{(fp16, bf16)},\qquad
      E_\text{sent} = E + \frac{\max_\text{rank}(A + E)}{254} + \epsilon (A + E)
      \quad\text{(int8)},

  and a reduction adds the two errors and the rounding of the sum,
  :math:`E \leftarrow E + E_\text{sent} + \epsilon (A + A_\text{sent})`. So :math:`E` is the
  per-hop error times the conversions on every path into the value, each weighted by the partial
  sum it converted (a running error analysis, Higham 2002 §3.3). int8's chunk scale is bounded
  by the largest bound on the sending rank, whatever chunks a backend cuts.

:func:`verify` checks a schedule with them on random data, slot by slot, as the exact verifier
does on integers (:func:`commsim.verify` calls it for ``wire=``).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from commsim._ir import Schedule
from commsim._wire import Wire, check_wire
from commsim.errors import ScheduleError

__all__ = ["WireVerified", "error_bound", "interpret", "tolerance", "verify"]


def _moves(schedule: Schedule, offsets: np.ndarray):
    """Per non-empty step: ``(step index, src, dst, reduce, src starts, src ends, dst starts)``."""
    for i, st in enumerate(schedule.steps()):
        if len(st.src):
            sa, sb = offsets[st.src_slot], offsets[st.src_slot + st.count]
            yield i, st.src, st.dst, st.reduce, sa, sb, offsets[st.dst_slot]


def interpret(schedule: Schedule, offsets: np.ndarray, buffers: np.ndarray, w: Wire | None):
    """Run ``schedule`` on ``buffers`` (modified in place and returned), each message between
    two ranks sent in wire format ``w`` (``None``: exact copies)."""
    with np.errstate(over="ignore", invalid="ignore"):
        for _, src, dst, red, sa, sb, da in _moves(schedule, offsets):
            reads = []
            for q, r, a, b in zip(src, dst, sa, sb, strict=True):
                v = buffers[q, a:b].copy()
                reads.append(w.transmit(v[None, :])[0] if w is not None and q != r else v)
            for r, d, add, v in zip(dst, da, red, reads, strict=True):
                if add:
                    buffers[r, d : d + len(v)] += v
                else:
                    buffers[r, d : d + len(v)] = v
    return buffers


def error_bound(
    schedule: Schedule, offsets: np.ndarray, magnitude: np.ndarray, w: Wire, eps: float
) -> np.ndarray:
    """The error bound :math:`E` (``[p, nelems]``, float64) of every element after ``schedule``
    runs over wire ``w`` with arithmetic of machine epsilon ``eps``; ``magnitude`` (``|inputs|``
    where they are, float64) becomes :math:`A` in place."""
    A = magnitude
    E = np.zeros_like(A)
    with np.errstate(over="ignore", invalid="ignore"):
        for _, src, dst, red, sa, sb, da in _moves(schedule, offsets):
            rank_max = (A + E).max(axis=1) if w.scaled else None
            reads = []
            for q, r, a, b in zip(src, dst, sa, sb, strict=True):
                m, e = A[q, a:b].copy(), E[q, a:b].copy()
                if q != r:
                    bound = m + e
                    e = e + w.hop_error(bound, None if rank_max is None else rank_max[q])
                    if w.scaled:
                        e += eps * bound  # decoding q * s rounds once more
                reads.append((m, e))
            for r, d, add, (m, e) in zip(dst, da, red, reads, strict=True):
                sl = slice(d, d + len(m))
                if add:
                    A[r, sl] += m
                    E[r, sl] += e + eps * A[r, sl]
                else:
                    A[r, sl], E[r, sl] = m, e
    return E


def tolerance(bound: np.ndarray, magnitude: np.ndarray, eps: float, nranks: int) -> np.ndarray:
    """What a compressed result may differ by from the exact one: the wire bound plus the
    reassociation allowance of the exact checks (:math:`4 \\epsilon p \\max(A, 1)`)."""
    return bound * (1 + 1e-6) + 4 * eps * nranks * np.maximum(magnitude, 1.0)


@dataclasses.dataclass(frozen=True)
class WireVerified:
    """A schedule whose compressed result met its bound on random data."""

    algorithm: str
    collective: str
    nranks: int
    wire: str
    max_error: float  # the largest |compressed - exact| seen
    max_ratio: float  # the largest error as a share of its bound (<= 1)
    seconds: float


def verify(schedule: Schedule, w: Wire, *, seed: int = 0, per_unit: int = 8) -> WireVerified:
    """Check that ``schedule`` run over wire ``w`` on random float32 data stays within
    :func:`error_bound` of the exact run; a :class:`ScheduleError` names the first rank and
    element out of bound. Every slot unit holds ``per_unit`` elements (so int8 chunks hold
    several values); the schedule must already verify exactly (:func:`commsim.verify` does that
    first), so the exact run (float64, no wire) is the collective's result.

    Examples:
        >>> import commsim
        >>> from commsim._wire import wire
        >>> verify(commsim.build("allreduce", "ring", nranks=4), wire("int8")).max_ratio < 1
        True
    """
    t0 = time.perf_counter()
    check_wire(w, schedule.collective)
    p, D = schedule.nranks, schedule.ndata
    pre = schedule.spec.initial(p, D, schedule.root)
    _, mask = schedule.spec.expected(np.zeros((p, D), np.uint64), schedule.root)
    units = np.asarray(schedule.slot_units, np.int64) * per_unit
    offsets = np.concatenate([[0], np.cumsum(units)]).astype(np.int64)
    n = int(offsets[D])
    pre_e, mask_e = (np.repeat(m, units[:D], axis=1) for m in (pre, mask))
    values = np.zeros((p, int(offsets[-1])), np.float32)
    init = np.random.default_rng(seed).standard_normal((p, n)).astype(np.float32)
    values[:, :n][pre_e] = init[pre_e]
    exact = values.astype(np.float64)
    magnitude = np.abs(exact)
    eps = float(np.finfo(np.float32).eps)
    bound = error_bound(schedule, offsets, magnitude, w, eps)
    got = interpret(schedule, offsets, values, w)[:, :n]
    want = interpret(schedule, offsets, exact, None)[:, :n]
    tol = tolerance(bound[:, :n], magnitude[:, :n], eps, p)
    err = np.where(mask_e, np.abs(got - want), 0.0)
    bad = ~(err <= tol)
    if bad.any():
        r, e = (int(x) for x in np.argwhere(bad)[0])
        slot = int(np.searchsorted(offsets, e, side="right") - 1)
        raise ScheduleError(
            f"{schedule.collective} {schedule.algorithm!r} (p={p}) over wire {w.name}: rank {r} "
            f"slot {slot} element {e} is {float(got[r, e])!r}, off the exact {float(want[r, e])!r} by "
            f"{err[r, e]:.3g}, past its bound {tol[r, e]:.3g}",
            rank=r,
            slot=slot,
        )
    ratio = float(np.max(np.where(mask_e, err / tol, 0.0))) if err.size else 0.0
    return WireVerified(
        schedule.algorithm, schedule.collective, p, w.name, float(err.max(initial=0.0)), ratio,
        time.perf_counter() - t0,
    )  # fmt: skip
