"""What a model returns: a :class:`Prediction`."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = ["TIE_RTOL", "Prediction", "fastest", "tied"]

#: predictions this close (relative) are the same prediction: ring and direct allreduce cost the
#: same, and floating-point rounding must not pick between them
TIE_RTOL = 1e-9


def tied(times: Any) -> np.ndarray:
    """``[candidate, size]`` mask of the predictions within :data:`TIE_RTOL` of each size's best
    (``inf`` never ties).

    Examples:
        >>> tied([[1.0, 2.0], [1.0 + 1e-12, 1.5]]).tolist()
        [[True, False], [True, True]]
    """
    t = np.asarray(times, dtype=np.float64)
    best = t.min(axis=0)
    return np.isfinite(t) & (t <= best * (1 + TIE_RTOL) + 1e-300)


def fastest(times: Any) -> np.ndarray:
    """Per size, the index of the first candidate tied with the fastest (:func:`tied`): ties go
    to the earlier candidate, whatever the last bits of their times say.

    Examples:
        >>> fastest([[1.0 + 1e-12, 2.0], [1.0, 1.5]]).tolist()
        [0, 1]
    """
    return np.argmax(tied(times), axis=0)


@dataclasses.dataclass(frozen=True)
class Prediction:
    """A model's prediction for one schedule over one or more message sizes.

    Sizes are along the last axis; when the model was given a scalar ``nbytes`` the size axis is
    dropped, so ``pred.time`` is a float.

    Attributes:
        algorithm, collective, nranks: what was predicted.
        model: a short description of the model and its parameters.
        nbytes: message size(s) in bytes (the collective's ``nbytes`` convention).
        time: completion time in seconds (the last rank's clock).
        rank_time: per-rank finish times, shape ``(p, ...)``.
        step_time: ``step_time[i]``: the time by which every rank had finished its part of steps
            ``0..i`` (a running maximum: per-rank clocks let a later step end before an earlier
            one on other ranks), shape ``(nsteps, ...)``.
        busbw_factor: nccl-tests' bus-bandwidth factor for this collective and ``p``.
        notes: the model's caveats about this prediction, one sentence each (e.g. a time below
            the lower bound: the schedule cannot compute its collective). Empty when none.
        network: what a network model adds (:class:`~commsim.models.NetworkUsage`: bytes and
            busy time per link, the busiest link class, the critical path); ``None`` otherwise.
    """

    algorithm: str
    collective: str
    nranks: int
    model: str
    nbytes: Any
    time: Any
    rank_time: np.ndarray
    step_time: np.ndarray
    busbw_factor: float
    notes: tuple[str, ...] = ()
    network: Any = None

    @property
    def algbw(self) -> Any:
        """Algorithm bandwidth, bytes/s: ``nbytes / time`` (nccl-tests)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(self.time > 0, np.asarray(self.nbytes) / self.time, np.inf)
        return float(out) if np.ndim(out) == 0 else out

    @property
    def busbw(self) -> Any:
        """Bus bandwidth, bytes/s: ``algbw × factor`` (nccl-tests), comparable across collectives."""
        if self.busbw_factor == 0.0:  # p = 1: nothing crosses the bus
            return 0.0 if np.ndim(self.time) == 0 else np.zeros(np.shape(self.time))
        return self.algbw * self.busbw_factor

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json`` (no per-rank/per-step arrays)."""

        def plain(x: Any) -> Any:
            return x.tolist() if isinstance(x, np.ndarray) else x

        return {
            "algorithm": self.algorithm,
            "collective": self.collective,
            "nranks": self.nranks,
            "model": self.model,
            "nbytes": plain(self.nbytes),
            "time_s": plain(self.time),
            "algbw_Bps": plain(self.algbw),
            "busbw_Bps": plain(self.busbw),
            "notes": list(self.notes),
            **({"network": self.network.to_dict()} if self.network is not None else {}),
        }
