r"""What a model returns, a :class:`Prediction`, and the one way every model builds it.

A model is its rule: how a schedule's messages advance per-rank clocks. What it does with the
clocks is the same for every model and is written here once (as optax's ``base.py`` holds the
record every transformation returns, so its aliases hold only rules):
:meth:`Prediction.from_clocks` takes the final clocks ``[p, sizes]`` and the step times
``[nsteps, sizes]``, drops the size axis for a scalar ``nbytes``, takes the completion time as
the last rank's clock,

.. math::

    T(n) = \max_r c_r(n),

reads nccl-tests' bus-bandwidth factor from the collective's spec, and checks the time against
the model's own lower bound: a prediction below it gets :func:`below_bound_note`, one wording for
every model.

See Also:
    :class:`commsim.models.Model`: the protocol whose ``describe`` and ``lower_bound`` the
    constructor reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from commsim import units
from commsim._ir import Schedule
from commsim.models._bounds import model_bound

__all__ = ["TIE_RTOL", "Prediction", "below_bound_note", "fastest", "tied"]

#: predictions this close (relative) are the same prediction: ring and direct allreduce cost the
#: same, and floating-point rounding must not pick between them
TIE_RTOL = 1e-9


#: a time this far below the bound (relative, then absolute) is below it, not rounding
_BOUND_RTOL, _BOUND_ATOL = 1e-9, 1e-15


class _Rule(Protocol):
    """What :meth:`Prediction.from_clocks` reads of the model that timed the schedule (a part
    of :class:`commsim.models.Model`, whose module imports this one)."""

    def describe(self) -> str: ...

    def lower_bound(self, collective: str, nranks: int, nbytes: Any, helpers: int = 0) -> Any: ...


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
        protocol: the collective library's protocol that carried the messages, per size (a
            name for one size; :class:`~commsim.models.ProtocolChoice` picks it), ``None``
            when the model has no protocol choice.
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
    protocol: Any = None

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

    @classmethod
    def from_clocks(
        cls,
        schedule: Schedule,
        sizes: np.ndarray,
        scalar: bool,
        rank_time: np.ndarray,
        step_time: np.ndarray,
        *,
        model: _Rule,
        notes: Sequence[str] = (),
        network: Any = None,
        protocol: str | None = None,
    ) -> Prediction:
        """The prediction of a model's final clocks: how every model builds its
        :class:`Prediction`.

        Args:
            schedule: the schedule that was timed.
            sizes: the message sizes, 1-D, in bytes (as :func:`commsim.models.as_sizes` reads
                ``nbytes``).
            scalar: whether ``nbytes`` was one number: the size axis is then dropped.
            rank_time: ``[p, len(sizes)]`` each rank's final clock.
            step_time: ``[nsteps, len(sizes)]`` the running maximum of the clocks after each
                step.
            model: the model that ran the clocks: its ``describe()`` becomes the prediction's
                ``model``, and its ``lower_bound`` the bound the time is checked against
                (:func:`below_bound_note`).
            notes: the model's own caveats; the below-bound note, if any, comes after them.
            network: what a network model adds (:class:`~commsim.models.NetworkUsage`), or a
                function of the completion times ``[len(sizes)]`` that returns it (the link
                usage reports the busy fraction of the time, computed here once).
            protocol: the protocol that carried every message (its name, for every size), or
                ``None``.

        Examples:
            >>> import commsim
            >>> from commsim.models import Hockney
            >>> s = commsim.build("allgather", "ring", nranks=4)
            >>> clocks, steps = np.full((4, 1), 3.0), np.array([[1.0], [2.0], [3.0]])
            >>> pred = Prediction.from_clocks(
            ...     s, np.array([4e3]), True, clocks, steps, model=Hockney()
            ... )
            >>> pred.time, pred.rank_time.shape, pred.notes
            (3.0, (4,), ())
        """
        time = rank_time.max(axis=0) if len(rank_time) else np.zeros(len(sizes))
        bound = model_bound(model, schedule.collective, schedule.nranks, sizes, schedule.helpers)
        if callable(network):
            network = network(time)

        def out(a: np.ndarray) -> Any:
            return a[..., 0] if scalar else a

        return cls(
            algorithm=schedule.algorithm,
            collective=schedule.collective,
            nranks=schedule.nranks,
            model=model.describe(),
            nbytes=float(sizes[0]) if scalar else sizes,
            time=float(time[0]) if scalar else time,
            rank_time=out(rank_time),
            step_time=out(step_time),
            busbw_factor=schedule.spec.busbw_factor(schedule.workers),
            notes=(*notes, *below_bound_note(schedule, sizes, time, bound)),
            network=network,
            protocol=protocol if protocol is None or scalar else (protocol,) * len(sizes),
        )

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
            **({"protocol": plain(self.protocol)} if self.protocol is not None else {}),
        }


def below_bound_note(
    schedule: Schedule, sizes: np.ndarray, time: np.ndarray, bound: Any
) -> tuple[str, ...]:
    """The note of a prediction below its model's lower bound (one sentence), or ``()``.

    No schedule of the collective can beat the bound, so a time below it says the schedule
    (empty, truncated, hand-made) cannot compute its collective, and the number is not a time
    for it. The note names the first such size, the predicted time and the bound; every model
    words it this way (:meth:`Prediction.from_clocks` adds it).

    Args:
        schedule: the schedule that was timed (its collective and rank count are named).
        sizes: ``[n]`` message sizes, bytes.
        time: ``[n]`` predicted times, seconds.
        bound: ``[n]`` (or a number for one size) the model's lower bound at those sizes.

    Examples:
        >>> import commsim
        >>> empty = commsim.Schedule.from_steps([], collective="allreduce", nranks=8, nslots=8)
        >>> [note] = below_bound_note(empty, np.array([2.0**20]), np.zeros(1), 1e-3)
        >>> note.split(":")[0]
        'predicted 0s at 1MiB is below the 1.00ms any allreduce on 8 ranks needs under this model'
    """
    bound = np.broadcast_to(bound, np.shape(time))
    low = time < bound * (1 - _BOUND_RTOL) - _BOUND_ATOL
    if not low.any():
        return ()
    j = int(np.argmax(low))
    return (
        f"predicted {units.format_time(float(time[j]))} at "
        f"{units.format_size(float(sizes[j]))} is below the "
        f"{units.format_time(float(bound[j]))} any {schedule.collective} on "
        f"{schedule.nranks} ranks needs under this model: this schedule cannot compute its "
        "collective (commsim.verify says where it goes wrong)",
    )
