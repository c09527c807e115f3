"""commsim: write a collective-communication algorithm once, as a schedule; verify it, predict
its cost, and run it for real.

Examples:
    >>> import commsim
    >>> s = commsim.build("allreduce", "ring", nranks=8)
    >>> commsim.verify(s).ntransfers
    112
"""

from commsim import algorithms, exec, models
from commsim._collectives import COLLECTIVES, SPECS, CollectiveSpec, spec
from commsim._deprecation import deprecated as _deprecated
from commsim._ir import Schedule, Step
from commsim._verify import Verified, verify
from commsim.algorithms import available, build
from commsim.errors import (
    CommsimError,
    ParameterError,
    ResourceError,
    ScheduleError,
    UnknownNameError,
)
from commsim.interop import load, save
from commsim.tuner import TunerTable, tune
from commsim.viz import message_graph as _message_graph

__version__ = "0.1.0"

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
