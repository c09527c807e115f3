"""The :class:`Model` protocol: what every cost model provides, so no consumer branches on its type.

A model maps ``(schedule, nbytes)`` to a :class:`~commsim.models.Prediction`, knows the lower
bound no algorithm can beat *under that model* (the CLI prints the ratio to it, and a property test
checks that no prediction falls below it), and describes itself: one line for table headers and a
plain dict for ``--json``. The command line, the tuner and the notebooks only use these four.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from commsim._ir import Schedule
from commsim.models._prediction import Prediction

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

    def lower_bound(self, collective: str, nranks: int, nbytes: Any) -> Any:
        """Seconds no schedule of ``collective`` on ``nranks`` ranks can beat under this model
        (a float for a number ``nbytes``, an array for an array)."""
        ...

    def describe(self) -> str:
        """One line naming the model and its parameters, with units, for table headers."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The model and its parameters as plain data (SI units), for ``--json``."""
        ...
