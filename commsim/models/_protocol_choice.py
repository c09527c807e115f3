r"""NCCL's choice of protocol, read from a model: per size, the fastest of LL, LL128 and Simple.

NCCL's tuner predicts every (algorithm, protocol) pair with its cost model and runs the one of
least predicted time (``src/graph/tuning.cc``, ``ncclTopoGetAlgoTime``). :class:`ProtocolChoice`
does the same for one schedule: it times the schedule under a model per protocol (the topology
model with ``protocol=``, :mod:`commsim.models._library`) and keeps, per size,

.. math::

    T(n) = \min_{p \in \{\text{LL}, \text{LL128}, \text{Simple}\}} T_p(n),

ties to the earlier protocol. An in-network schedule (helper ranks at a reducing switch, IR
rule 7) is carried by Simple alone where Simple is among the choices: NCCL's tuner offers NVLS
and NVLSTree with Simple only (``tuning.cc`` skips LL and LL128 for them). The prediction says
which one won per size
(:attr:`Prediction.protocol <commsim.models.Prediction.protocol>`); its clocks, breakdown and
critical path are the winner's.

See Also:
    :class:`commsim.models.Topology`: the model timed per protocol.
    :func:`commsim.tuner.sweep`: the same choice over algorithms.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from commsim._ir import Schedule
from commsim.errors import ParameterError
from commsim.models._bounds import bound_of, model_bound
from commsim.models._inputs import as_schedule, as_sizes
from commsim.models._library import PROTOCOLS, Protocol
from commsim.models._model import Model
from commsim.models._prediction import Prediction, fastest
from commsim.models._usage import Timeline

__all__ = ["ProtocolChoice"]


class ProtocolChoice:
    """The fastest protocol per size (implements :class:`commsim.models.Model`).

    Args:
        make: a function of a :class:`~commsim.models._library.Protocol` returning the model
            that carries messages with it (``lambda p: Topology(net, protocol=p)``).
        protocols: the protocols to choose from, in tie order (default: LL, LL128, Simple).

    Examples:
        >>> import commsim
        >>> from commsim.models import Topology
        >>> from commsim.topology import switch
        >>> m = ProtocolChoice(lambda p: Topology(switch(8), protocol=p))
        >>> pred = m.predict(commsim.build("allreduce", "ring", nranks=8), [1e3, 1e9])
        >>> pred.protocol
        ('LL', 'Simple')
    """

    name = "protocol_choice"

    def __init__(
        self,
        make: Callable[[Protocol], Model],
        protocols: Sequence[str | Protocol] = tuple(PROTOCOLS),
    ) -> None:
        chosen = [PROTOCOLS[p] if isinstance(p, str) else p for p in protocols]
        if not chosen:
            raise ParameterError("ProtocolChoice needs at least one protocol")
        self.models: Mapping[str, Model] = {p.name: make(p) for p in chosen}
        first = next(iter(self.models.values()))
        self.bound_name = first.bound_name
        self._first = first

    def describe(self) -> str:
        base = re.sub(r" (launch|protocol)=\S+", "", self._first.describe())
        return f"{base} protocol=auto ({', '.join(self.models)}: the fastest per size)"

    def to_dict(self) -> dict[str, Any]:
        return {**self._first.to_dict(), "protocol": "auto", "protocols": list(self.models)}

    def lower_bound(self, collective: str, nranks: int, nbytes: Any, helpers: int = 0) -> Any:
        """The models' bound (a protocol only slows messages down, so the first one's holds)."""
        return model_bound(self._first, collective, nranks, nbytes, helpers)

    def bound(self, collective: str, nranks: int, nbytes: Any, helpers: int = 0) -> tuple[Any, str]:
        """The first model's bound and the name of the one that binds (:func:`bound_of`)."""
        return bound_of(self._first, collective, nranks, nbytes, helpers)

    def predict(self, schedule: Schedule, nbytes: Any) -> Prediction:
        """Per size, the prediction of the fastest protocol; ``protocol`` names it."""
        schedule = as_schedule(schedule)
        sizes, scalar = as_sizes(nbytes)
        models = self._carriers(schedule)
        preds = [m.predict(schedule, sizes) for m in models.values()]
        times = np.array([np.atleast_1d(p.time) for p in preds])
        win = fastest(times)
        cols = np.arange(len(sizes))
        names = tuple(list(models)[i] for i in win)

        def pick(arrays: list[np.ndarray]) -> np.ndarray:
            stacked = np.stack([np.asarray(a) for a in arrays])  # [protocol, ..., size]
            return np.moveaxis(np.moveaxis(stacked, -1, 1)[win, cols], 0, -1)

        last = preds[int(win[-1])]
        network = last.network
        if network is not None:
            network = dataclasses.replace(
                network,
                time=pick([p.network.time for p in preds]),
                time_parts=pick([p.network.time_parts for p in preds]),
            )
        time = times[win, cols]
        rank_time = pick([p.rank_time for p in preds])
        step_time = pick([p.step_time for p in preds])
        if scalar:
            return dataclasses.replace(
                last, time=float(time[0]), rank_time=rank_time[..., 0],
                step_time=step_time[..., 0], network=network, model=self.describe(),
                protocol=names[0], nbytes=float(sizes[0]),
            )  # fmt: skip
        return dataclasses.replace(
            last, time=time, rank_time=rank_time, step_time=step_time, network=network,
            model=self.describe(), protocol=names,
        )  # fmt: skip

    def hosts_of(self, schedule: Schedule) -> Any:
        """Where each rank sits, as its models place them (a protocol needs a topology model:
        :meth:`~commsim.models.Topology.hosts_of`)."""
        return self._first.hosts_of(schedule)

    @property
    def places_in_network(self) -> bool:
        """Whether its models place in-network helper ranks on reducing switches."""
        return bool(getattr(self._first, "places_in_network", False))

    def _carriers(self, schedule: Schedule) -> Mapping[str, Model]:
        """The protocols ``schedule`` may run with: Simple alone for an in-network schedule
        (module docstring), every choice otherwise."""
        if schedule.in_network and "Simple" in self.models:
            return {"Simple": self.models["Simple"]}
        return self.models

    def timeline(
        self, schedule: Schedule, nbytes: Any, *, max_messages: int | None = None
    ) -> Timeline:
        """The winning protocol's timeline at one size."""
        pred = self.predict(schedule, nbytes)
        name = pred.protocol if isinstance(pred.protocol, str) else pred.protocol[0]
        return self.models[name].timeline(schedule, nbytes, max_messages=max_messages)
