"""commsim: write a collective-communication algorithm once, as a schedule; verify it, predict
its cost, and run it for real.

The names below are imported on first use (PEP 562): ``import commsim`` loads the errors and the
IR only, so that a script, and ``commsim --help``, start at once; ``commsim.build``,
``commsim.models.Hockney`` and ``from commsim import verify`` work as always.

Examples:
    >>> import commsim
    >>> s = commsim.build("allreduce", "ring", nranks=8)
    >>> commsim.verify(s).ntransfers
    112
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from commsim._deprecation import deprecated as _deprecated
from commsim._ir import Schedule, Step
from commsim.errors import (
    CommsimError,
    ParameterError,
    ResourceError,
    ScheduleError,
    UnknownNameError,
)

if TYPE_CHECKING:
    from commsim import algorithms, exec, models
    from commsim._collectives import COLLECTIVES, SPECS, CollectiveSpec, spec
    from commsim._verify import Verified, verify
    from commsim.algorithms import available, build
    from commsim.interop import load, save
    from commsim.tuner import TunerTable, tune

__version__ = "0.1.0"

#: where each public name lives: imported from there on first use (``__getattr__``)
_LAZY = {
    "algorithms": "commsim.algorithms",
    "exec": "commsim.exec",
    "models": "commsim.models",
    "COLLECTIVES": "commsim._collectives",
    "SPECS": "commsim._collectives",
    "CollectiveSpec": "commsim._collectives",
    "spec": "commsim._collectives",
    "Verified": "commsim._verify",
    "verify": "commsim._verify",
    "available": "commsim.algorithms",
    "build": "commsim.algorithms",
    "load": "commsim.interop",
    "save": "commsim.interop",
    "TunerTable": "commsim.tuner",
    "tune": "commsim.tuner",
}


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use, and keep the name here (PEP 562)."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'commsim' has no attribute {name!r}")
    module = importlib.import_module(where)
    value = module if where == f"commsim.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def _message_graph(schedule: Schedule) -> Any:
    from commsim.viz import message_graph  # networkx: imported on first use

    return message_graph(schedule)


# deprecated aliases, for one release (commsim._deprecation)
Schedule.to_networkx = _deprecated(  # type: ignore[attr-defined]
    _message_graph, "Schedule.to_networkx()", "commsim.viz.message_graph(schedule)"
)

__all__ = [
    "COLLECTIVES",
    "SPECS",
    "CollectiveSpec",
    "CommsimError",
    "ParameterError",
    "ResourceError",
    "Schedule",
    "ScheduleError",
    "Step",
    "TunerTable",
    "UnknownNameError",
    "Verified",
    "algorithms",
    "available",
    "build",
    "exec",
    "load",
    "models",
    "save",
    "spec",
    "tune",
    "verify",
]
