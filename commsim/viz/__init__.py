"""Seeing schedules: a step-by-step diagram, the symbolic slot contents behind it, the per-step
message table, and the message dependency DAG's critical path (the DAG itself is
:meth:`commsim.Schedule.to_networkx`).

Examples:
    >>> import commsim
    >>> from commsim.viz import contributions, message_rows
    >>> s = commsim.build("allreduce", "ring", nranks=4)
    >>> *_, last = contributions(s)
    >>> bool(last.all())  # every slot of every rank holds all four inputs
    True
    >>> message_rows(s)[0].label()
    '→1 ⊕3'
"""

from commsim._dag import critical_path, message_graph
from commsim.viz._contents import contributions
from commsim.viz._diagram import draw_schedule
from commsim.viz._table import MessageRow, message_rows, step_rows

__all__ = [
    "MessageRow",
    "contributions",
    "critical_path",
    "draw_schedule",
    "message_graph",
    "message_rows",
    "step_rows",
]
