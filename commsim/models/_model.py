"""The :class:`Model` protocol: what every cost model provides, so no consumer branches on its type.

A model maps ``(schedule, nbytes)`` to a :class:`~commsim.models.Prediction`, knows the lower
bound no algorithm can beat *under that model* (the CLI prints the ratio to it, and a property test
checks that no prediction falls below it), lays out one size's messages in time for a trace, and
describes itself: one line for table headers and a plain dict for ``--json``. The command line,
the tuner and the notebooks only use these five.

A model is its rule (how messages advance per-rank clocks); what turns the clocks into a
:class:`~commsim.models.Prediction`, and the note of a prediction below the bound, are written
once (:meth:`Prediction.from_clocks <commsim.models.Prediction.from_clocks>`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from commsim._ir import Schedule
from commsim.models._prediction import Prediction
from commsim.models._usage import Timeline

__all__ = ["Model"]


@runtime_checkable
class Model(Protocol):
    """A cost model (``Hockney`` is one; LogGP and the topology model are others)."""

    #: short lower-case name, e.g. ``"hockney"`` (the ``"model"`` of ``--json`` output)
    name: str
    #: what :meth:`lower_bound` is, for table headers, e.g. ``"Chan et al. 2007 lower bound"``
    bound_name: str

    def predict(self, schedule: Schedule, nbytes: Any) -> Prediction:
        """Time ``schedule`` for message size(s) ``nbytes`` (a number or a 1-D array of bytes)."""
        ...

    def lower_bound(self, collective: str, nranks: int, nbytes: Any, helpers: int = 0) -> Any:
        """Seconds no schedule of ``collective`` on ``nranks`` ranks can beat under this model
        (a float for a number ``nbytes``, an array for an array); ``helpers`` of the ranks hold
        no data (IR rule 7; callers pass it only when nonzero)."""
        ...

    def timeline(
        self, schedule: Schedule, nbytes: Any, *, max_messages: int | None = None
    ) -> Timeline:
        """Every message of ``schedule`` at one message size, from the clocks :meth:`predict`
        runs (what :func:`~commsim.models.chrome_trace` draws): a
        :class:`~commsim.models.Timeline` of each message's start, end and reduction end (and
        where the model has them, its send and receive times and its links), whose last end is
        :meth:`predict`'s time.

        Refuses with :class:`~commsim.errors.ParameterError` more than one size (or a setting
        whose messages overlap on a rank's track, e.g. Hockney's k ports), and with
        :class:`~commsim.errors.ResourceError` a schedule of more than ``max_messages``
        messages, as soon as it has seen them (``None``: the model's own limit, if any).
        """
        ...

    def describe(self) -> str:
        """One line naming the model and its parameters, with units, for table headers."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The model and its parameters as plain data (SI units), for ``--json``."""
        ...
