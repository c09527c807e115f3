r"""What the device microbenchmarks share: their arguments' checks and the batch difference.

A device runs one message in a few microseconds but one call from Python costs tens of
microseconds (dispatch, launch, synchronization), so timing one message per call measures the
call. The JAX and CUDA benchmarks (:mod:`._jax_bench`, :mod:`._cuda_bench`) therefore run a
**batch** of :math:`k` identical operations, each depending on the one before, inside one timed
call, and difference two batch lengths:

.. math:: t = \frac{T(k) - T(1)}{(k - 1)\,m}

where :math:`T(k)` is the time of one call running :math:`k` iterations and :math:`m` the
operations per iteration (2 for a ping-pong's there and back). Whatever a call costs besides its
iterations (dispatch, launch, the final synchronization) is in both :math:`T(k)` and :math:`T(1)`
and cancels; one iteration's own bookkeeping (a loop's counter and branch) stays in :math:`t`.
Both lengths are timed once per repeat, back to back, so a slow spell of the machine hits both.

:func:`batch_times` picks :math:`k` once per size from the warm-up, so that a batch lasts about
``target_s`` (at least :data:`KMIN`, at most :data:`KMAX` iterations): long enough that the
call's jitter, divided by :math:`k - 1`, is small beside :math:`t`; short enough that a large
message's repeats stay cheap. Starting at :data:`KMIN`, each untimed batch sets the next
:math:`k` from the shorter of two :math:`T(k)`, as :math:`T(k)/k`, until :math:`k` stops more
than doubling; :math:`k` never shrinks. :math:`T(k)/k` overstates the time per iteration by the
call's cost over :math:`k`, and a pause of the machine only lengthens :math:`T(k)` (the shorter
of two ignores one pause), so :math:`k` grows towards its target for small operations, and a
batch never lasts much longer than ``target_s`` (or :data:`KMIN` iterations). When a repeat's
difference still comes out non-positive (the call's jitter outlasted the batch), :math:`k`
doubles for it and the repeats after it.

Examples:
    >>> check_sizes([64, 8, 64])
    array([ 8, 64])
    >>> batch_length(1e-6, target_s=1e-3)
    1000
    >>> batch_length(1e-2, target_s=1e-3)
    4
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from commsim.errors import CommsimError, ParameterError

__all__ = [
    "KMAX",
    "KMIN",
    "batch_length",
    "batch_times",
    "check_counts",
    "check_kinds",
    "check_sizes",
]

#: fewest iterations of a timed batch (the difference divides the call's jitter by ``k - 1``)
KMIN = 4
#: most iterations of a timed batch (an operation of nanoseconds needs many to rise above jitter)
KMAX = 2**20
_SEARCH = 8  # batches timed at most while looking for k
_RETRIES = 8  # tries of one repeat whose difference came out non-positive, k doubling each


def check_sizes(sizes: Iterable[int]) -> np.ndarray:
    """``sizes`` as increasing distinct byte counts (``int64``), or a one-line ParameterError."""
    values = list(sizes)
    if not values:
        raise ParameterError("sizes is empty: give at least one message size in bytes")
    for s in values:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
            raise ParameterError(f"message size {s!r} is not a whole number of bytes >= 1")
    return np.unique(np.asarray(values, dtype=np.int64))


def check_kinds(kinds: Sequence[str], supported: Sequence[str], backend: str) -> tuple[str, ...]:
    """``kinds`` without repeats, each one that ``backend`` measures, or a one-line error."""
    if isinstance(kinds, str):
        kinds = (kinds,)
    out = tuple(dict.fromkeys(kinds))
    if not out:
        raise ParameterError(f"kinds is empty: give some of {', '.join(supported)}")
    bad = [k for k in out if k not in supported]
    if bad:
        raise ParameterError(
            f"the {backend} microbenchmarks measure {', '.join(supported)}; not {', '.join(bad)}"
        )
    return out


def check_counts(repeats: int, warmup: int) -> None:
    """A one-line error unless ``repeats >= 1`` and ``warmup >= 0`` (whole numbers)."""
    for name, value, low in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ParameterError(f"{name} must be a whole number >= {low}, got {value!r}")


def batch_length(per_iteration_s: float, *, target_s: float) -> int:
    """Iterations that make a batch last about ``target_s``, within ``[KMIN, KMAX]``."""
    if not per_iteration_s > 0:
        return KMAX
    return int(np.clip(round(target_s / per_iteration_s), KMIN, KMAX))


def batch_times(
    run: Callable[[int], float],
    *,
    repeats: int,
    warmup: int,
    per_iteration: int = 1,
    target_s: float = 2e-3,
    what: str = "operation",
    tick: Callable[[], None] | None = None,
) -> tuple[np.ndarray, int]:
    """Seconds per operation, one per repeat, and the batch length ``k`` used (the last).

    Args:
        run: ``run(k)`` runs one call of ``k`` iterations and returns its seconds.
        repeats: differences to return.
        warmup: untimed pairs ``run(1)``, ``run(k)`` before the repeats; before them, a first
            call compiles and up to 8 untimed batches look for ``k``.
        per_iteration: operations per iteration (``m`` in the module's formula).
        target_s: about how long one batch of ``k`` iterations should last.
        what: names the operation in the error when noise swamps it.
        tick: called after each repeat (a progress bar).
    """
    run(1)  # the first call compiles, loads or allocates: never timed
    k = KMIN
    for _ in range(_SEARCH):  # grow k until a batch lasts about target_s
        grown = batch_length(min(run(k), run(k)) / k, target_s=target_s)
        k, settled = max(k, grown), grown <= 2 * k
        if settled:
            break
    for _ in range(warmup):
        run(1), run(k)
    out = np.empty(repeats)
    for j in range(repeats):
        for _ in range(_RETRIES):
            t1, tk = run(1), run(k)
            out[j] = (tk - t1) / ((k - 1) * per_iteration)
            if out[j] > 0:
                break
            k = min(2 * k, KMAX)  # the call's jitter outlasted the batch: lengthen it
        else:
            raise CommsimError(
                f"a batch of {k} x {what} took no longer than one ({_RETRIES} tries): "
                "the timer's noise swamps it"
            )
        if tick is not None:
            tick()
    return out, k
