r"""Fold a twin program onto the orbits of its port symmetry: the same clocks on fewer ports.

A ring allreduce on 128 identical servers does the same thing on every server: shift every port
by the 8 GPUs of a server and the program (who sends to whom, how many units, over which links
with how many other messages, which stragglers) is unchanged. :func:`fold` finds the smallest
such shift :math:`s` from the program's own arrays (never from the algorithm's name) and keeps
only the ports :math:`0 \dots s-1`, one per orbit, with every message that touches them.

Exactness. Let :math:`\sigma(i) = (i + s) \bmod P` on the :math:`P` ports. If every round maps
its set of messages onto itself under :math:`\sigma` (each message :math:`q \to d` has a twin
:math:`\sigma(q) \to \sigma(d)` with the same units, reduction, link latencies, shares, link
classes and straggler factors) and the start clocks satisfy :math:`c_i = c_{\sigma(i)}`, then
the round's update commutes with :math:`\sigma`, and by induction over rounds

.. math::

    c_i(t) = c_{i \bmod s}(t) \quad\text{for every port } i \text{ and round } t,

as floating-point numbers: port :math:`i` performs the same operations on the same operands
as its representative. The folded replay reads the clock of a port :math:`i \ge s` as
:math:`c_{i \bmod s}`, so its clocks are bitwise those of the full replay, its time
(:math:`\max_i c_i`) is the same number, and so is its gradient (JAX shares a maximum's
gradient equally among tied ports, and tied ports of one orbit have equal gradients).

The check is a comparison of ``[rounds, ports]`` arrays with their shifts, one feature at a
time, over the divisors of :math:`P`; a program with no symmetry (a straggler, a skewed start,
an irregular topology) is not folded and the twin replays every port.

See Also:
    :mod:`commsim.models._twin_program`: the program it folds;
    :mod:`commsim.models.twin`: the replay, which runs the folded program unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from commsim.models._twin_program import Program, _bucket

__all__ = ["fold", "period"]


def fold(program: Program) -> Program | None:
    """``program`` on one port per orbit of its smallest shift symmetry, or ``None`` when its
    only symmetry is the identity (then nothing is gained)."""
    s = period(program)
    return None if s == program.nports else _restrict(program, s)


def period(program: Program) -> int:
    """The smallest shift :math:`s` (a divisor of the port count) under which ``program`` is
    invariant; the port count itself when there is none."""
    n = program.nports
    candidates = [s for s in range(1, n) if n % s == 0]
    for feature in _features(program):
        candidates = [s for s in candidates if np.array_equal(feature[:, s:], feature[:, : n - s])]
        if not candidates:
            return n
    return candidates[0]


def _features(program: Program) -> Iterator[np.ndarray]:
    """``[rounds, ports]`` arrays, per port the message it sends (of a local round: the
    reduction it does): the program is invariant under a shift iff every one is periodic."""
    n, width = program.nports, program.src.shape[1]
    yield program.start[None, :]
    j = program.sent[:, :n]  # ``width`` for none

    def gather(values: np.ndarray, none: float) -> np.ndarray:
        padded = np.concatenate([values, np.full((len(values), 1), none)], axis=1)
        return np.take_along_axis(padded, j, axis=1)

    has = j < width
    rel = (gather(program.dst, -1) - np.arange(n)) % n
    yield np.where(has & ~program.local[:, None], rel, np.where(has, -1, -2))
    yield gather(program.units, -1.0)
    yield gather(program.red, -1.0)
    yield gather(program.slow_msg, -1.0)
    yield gather(program.slow_dst, -1.0)
    yield np.where(program.local[:, None], 0, gather(_cost_ids(program)[program.pattern], -1))


def _cost_ids(program: Program) -> np.ndarray:
    """``[patterns, width]``: equal ids for messages with equal link latencies, shares and
    link classes."""
    P, width = program.lat.shape[:2]
    rows = np.concatenate(
        [program.lat.reshape(P * width, -1), program.share.reshape(P * width, -1),
         program.hop_class.reshape(P * width, -1)], axis=1,
    )  # fmt: skip
    _, ids = np.unique(rows, axis=0, return_inverse=True)
    return ids.reshape(P, width)


def _restrict(program: Program, s: int) -> Program:
    """The program on ports ``0 .. s-1``: every message that one of them sends or receives,
    ports read modulo ``s`` (the dummy clock moves to ``s``)."""
    n = program.nports
    keep = (program.src < s) | ((program.dst < s) & ~program.local[:, None])
    order = np.argsort(~keep, axis=1, kind="stable")  # kept messages first, in their order
    w = _bucket(int(keep.sum(axis=1).max(initial=1)))
    order, kept = order[:, :w], np.take_along_axis(keep, order[:, :w], axis=1)
    position = np.where(keep, np.cumsum(keep, axis=1) - 1, w)
    position = np.concatenate([position, np.full((len(position), 1), w)], axis=1)

    def take(values: np.ndarray, pad: float) -> np.ndarray:
        return np.where(kept, np.take_along_axis(values, order, axis=1), pad)

    def port(values: np.ndarray) -> np.ndarray:
        return np.where((values >= n) | (values < 0), s, values % s).astype(np.int32)

    def index(table: np.ndarray) -> np.ndarray:
        out = np.take_along_axis(position, table[:, :s], axis=1)
        return np.concatenate([out, np.full((len(out), 1), w)], axis=1).astype(np.int32)

    lat, share, hop_class = _restrict_patterns(program, order, kept)
    return dataclasses.replace(
        program, nports=s, src=port(take(program.src, n)), dst=port(take(program.dst, n)),
        units=take(program.units, 0.0), red=take(program.red, 0.0),
        slow_msg=take(program.slow_msg, 1.0), slow_dst=take(program.slow_dst, 1.0),
        sent=index(program.sent), received=index(program.received), lat=lat, share=share,
        hop_class=hop_class, start=program.start[:s],
    )  # fmt: skip


def _restrict_patterns(program: Program, order: np.ndarray, kept: np.ndarray):
    """The pattern arrays with the kept messages' positions: rounds of one pattern have the
    same pairs, so any message round of the pattern gives its order (local rounds read no
    pattern)."""
    P = len(program.lat)
    rounds = np.flatnonzero(~program.local & (program.src < program.nports).any(axis=1))
    patterns, at = np.unique(program.pattern[rounds], return_index=True)
    first = np.full(P, -1)
    first[patterns] = rounds[at]  # the first message round of each pattern (not padding)
    r = np.maximum(first, 0)
    mask = kept[r] & (first >= 0)[:, None]
    idx = order[r]
    lat = np.where(mask[..., None], np.take_along_axis(program.lat, idx[..., None], axis=1), 0.0)
    share = np.where(
        mask[..., None], np.take_along_axis(program.share, idx[..., None], axis=1), 0.0
    )
    hop_class = np.where(
        mask[..., None], np.take_along_axis(program.hop_class, idx[..., None], axis=1), 0
    ).astype(np.int32)
    return lat, share, hop_class
