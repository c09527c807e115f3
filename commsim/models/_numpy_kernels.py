r"""The Hockney model's inner loops as array programs (numpy), for predictions too small to pay
for numba's start-up.

A process that runs a compiled kernel first imports numba and loads the kernel's machine code
from its cache: 0.7-1.2 s of CPU on the benchmark machine (``docs/benchmarks.md``, "Start-up
and small predictions (issue #20)"), while a ring allreduce at p = 1024 (two million transfers)
takes about 0.05 s in the compiled kernels and 0.2 s in these. :func:`choose` gives :meth:`commsim.models.Hockney.predict`
these array versions of :mod:`commsim.models._kernels` when the prediction's work (transfers
times message sizes) is at most :data:`NUMPY_MAX_WORK`, and the compiled ones above it.

Each function takes its compiled twin's arguments and returns what it returns, with the same
arithmetic in the same order on every element (:math:`e = \max(c_s, c_d) + \alpha + u\beta`,
then :math:`e + u\gamma` at a reducing receiver, then the running maxima), so both give the same
bits (``tests/test_models_numpy_kernels.py`` sweeps the registry on both). Scratch arguments
the compiled kernels need (``tmp``, ``old``, ``seen_*``, ``tag``) are accepted and unused where
an array expression needs none. Maxima are exact, so the order in which a rank's send and
receive updates its clock does not change a bit.

See Also:
    :mod:`commsim.models._kernels`: the compiled kernels, each with its numpy equivalent in one
    line.
"""

from __future__ import annotations

import sys
from types import ModuleType

import numpy as np

Array = np.ndarray

__all__ = [
    "NUMPY_MAX_WORK",
    "choose",
    "fast_single_port_step",
    "fast_single_port_step_1d",
    "level_step",
    "participants_max",
    "shift_classes_step",
    "single_port_round",
    "uniform_step",
]

#: the most transfer-size pairs a prediction runs through these array kernels. Measured on the
#: benchmark machine (ring allreduce, CPU time, ``docs/benchmarks.md``): the array kernels cost
#: 50-90 ns a pair, numba's first prediction in a process 0.7-1.2 s (import and cache load) and
#: then 10-20 ns a pair, so numba pays from about 20 M pairs; a ring at p = 2048 (8.4 M, one
#: size) is below, a ring at p = 1024 with 21 sizes (44 M) above
NUMPY_MAX_WORK = 16_000_000


def choose(ntransfers: int, nsizes: int) -> ModuleType:
    """The kernels for a prediction of ``ntransfers`` transfers at ``nsizes`` sizes: this
    module up to :data:`NUMPY_MAX_WORK` pairs, :mod:`commsim.models._kernels` (numba, imported
    now) above."""
    if ntransfers * max(nsizes, 1) <= NUMPY_MAX_WORK:
        return sys.modules[__name__]
    from commsim.models import _kernels  # numba: imported on first use, not with commsim

    return _kernels


def single_port_round(
    clock: Array, src: Array, dst: Array, units: Array, red: Array, alpha: float, bw: Array,
    gw: Array, tmp: Array,
) -> None:  # fmt: skip
    """One round (a matching) of rendezvous messages on ``clock`` ``[p, S]``, all reads before
    any write (:func:`commsim.models._kernels.single_port_round`)."""
    end = np.maximum(clock[src], clock[dst]) + alpha + np.multiply.outer(units, bw)
    clock[src] = np.maximum(clock[src], end)
    clock[dst] = np.maximum(clock[dst], end + np.multiply.outer(red, gw))
    tmp[: len(src)] = end


def participants_max(clock: Array, src: Array, dst: Array, out: Array) -> None:
    """``out[k] = max(out[k], clock[src, k].max(), clock[dst, k].max())``."""
    if len(src):
        np.maximum(out, clock[src].max(axis=0), out=out)
        np.maximum(out, clock[dst].max(axis=0), out=out)


def _fast_units(
    src: Array, dst: Array, src_slot: Array, dst_slot: Array, count: Array, offsets: Array,
    unit: int, p: int,
) -> Array | None:  # fmt: skip
    """Each transfer's units when the step has the fast shape (distinct senders, distinct
    receivers, no local transfer, ranks and slot ranges in bounds, equal sizes at both ends),
    else ``None``: the compiled kernels' per-transfer check, on whole arrays."""
    if min(src.min(), dst.min(), src_slot.min(), dst_slot.min()) < 0 or count.min() < 1:
        return None
    if max(src.max(), dst.max()) >= p or (src == dst).any():
        return None
    if (np.maximum(src_slot, dst_slot) > len(offsets) - 1 - count).any():
        return None
    if np.bincount(src, minlength=p).max() > 1 or np.bincount(dst, minlength=p).max() > 1:
        return None
    if unit > 0:
        return count * unit
    units = offsets[src_slot + count] - offsets[src_slot]
    return None if (offsets[dst_slot + count] - offsets[dst_slot] != units).any() else units


def fast_single_port_step(
    clock: Array, src: Array, dst: Array, src_slot: Array, dst_slot: Array, count: Array,
    reduce: Array, offsets: Array, alpha: float, bw: Array, gw: Array, tmp: Array,
    seen_s: Array, seen_d: Array, tag: int, out: Array,
) -> bool:  # fmt: skip
    """A whole step of distinct messages on distinct ports at every size (``clock`` ``[p, S]``),
    or ``False`` with nothing touched (:func:`commsim.models._kernels.fast_single_port_step`)."""
    units = _fast_units(src, dst, src_slot, dst_slot, count, offsets, 0, clock.shape[0])
    if units is None:
        return False
    end = np.maximum(clock[src], clock[dst]) + alpha + np.multiply.outer(units, bw)
    finish = np.where(reduce[:, None], end + np.multiply.outer(units, gw), end)
    clock[src] = np.maximum(clock[src], end)
    clock[dst] = np.maximum(clock[dst], finish)
    np.maximum(out, finish.max(axis=0), out=out)
    return True


def fast_single_port_step_1d(
    clock: Array, src: Array, dst: Array, src_slot: Array, dst_slot: Array, count: Array,
    reduce: Array, offsets: Array, unit: int, alpha: float, bw: float, gw: float, old: Array,
    seen_s: Array, seen_d: Array, tag: int, out: Array,
) -> bool:  # fmt: skip
    """:func:`fast_single_port_step` at one size (``clock`` ``[p]``, ``bw`` and ``gw`` numbers;
    :func:`commsim.models._kernels.fast_single_port_step_1d`)."""
    units = _fast_units(src, dst, src_slot, dst_slot, count, offsets, unit, clock.shape[0])
    if units is None:
        return False
    end = np.maximum(clock[src], clock[dst]) + alpha + units * bw
    finish = np.where(reduce, end + units * gw, end)
    clock[src] = np.maximum(clock[src], end)
    clock[dst] = np.maximum(clock[dst], finish)
    out[0] = max(out[0], finish.max())
    return True


def uniform_step(
    src: Array, dst: Array, src_slot: Array, dst_slot: Array, count: Array, reduce: Array,
    offsets: Array, unit: int, p: int, seen_s: Array, seen_d: Array, tag: int, known: bool,
    level: Array, alpha: float, bw: Array, gw: Array, out: Array,
) -> bool:  # fmt: skip
    """Level clocks moved by one uniform step (each of the ``p`` ranks sends one message and
    receives one, all of ``u`` units and one reduce flag), or ``False`` with nothing touched
    (:func:`commsim.models._kernels.uniform_step`)."""
    if len(src) != p or p == 0:
        return False
    units = _fast_units(src, dst, src_slot, dst_slot, count, offsets, unit, p)
    if units is None or (units != units[0]).any() or (reduce != reduce[0]).any():
        return False
    level_step(level, alpha, int(units[0]), bw, gw, bool(reduce[0]), out)
    return True


def level_step(
    level: Array, alpha: float, u: int, bw: Array, gw: Array, red: bool, out: Array
) -> None:
    """Every rank at ``level`` sends one message of ``u`` units and receives one: the new level
    ``level + alpha + u*bw`` (``+ u*gw`` when it reduces), the fast kernels' arithmetic in their
    order; ``out`` (the running maximum) takes it."""
    end = level + alpha + u * bw
    if red:
        end = end + u * gw
    level[:] = end
    np.maximum(out, end, out=out)


def shift_classes_step(
    src: Array, dst: Array, src_slot: Array, dst_slot: Array, count: Array, reduce: Array,
    offsets: Array, unit: int, p: int, level: Array, alpha: float, bw: Array, gw: Array,
    out: Array,
) -> bool:  # fmt: skip
    """Level clocks moved by a step of whole shift classes, one size and flag per class, or
    ``False`` with nothing touched (:func:`commsim.models._kernels.shift_classes_step`)."""
    if len(src) == 0 or p * p > 2**29:
        return False
    if min(src.min(), dst.min(), src_slot.min(), dst_slot.min()) < 0 or count.min() < 1:
        return False
    if max(src.max(), dst.max()) >= p:
        return False
    if (np.maximum(src_slot, dst_slot) > len(offsets) - 1 - count).any():
        return False
    units = count * unit if unit > 0 else offsets[src_slot + count] - offsets[src_slot]
    if unit <= 0 and (offsets[dst_slot + count] - offsets[dst_slot] != units).any():
        return False
    local = src == dst
    if (local & reduce).any():
        return False
    remote = ~local
    s, units, red = src[remote], units[remote], reduce[remote]
    shift = (dst[remote] - s) % p
    if np.bincount(s * p + shift, minlength=p * p).max(initial=0) > 1:
        return False
    cnt = np.bincount(shift, minlength=p)
    if ((cnt != 0) & (cnt != p)).any():
        return False
    first = np.full(p, -1)
    first[shift[::-1]] = np.arange(len(shift))[::-1]  # each class's first transfer
    if (units != units[first[shift]]).any() or (red != red[first[shift]]).any():
        return False
    for k in np.flatnonzero(cnt):
        j = first[k]
        level_step(level, alpha, int(units[j]), bw, gw, bool(red[j]), out)
    return True
