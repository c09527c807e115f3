"""Seeing schedules: a step-by-step diagram, the symbolic slot contents behind it, the per-step
message table, and the message dependency DAG's critical path (the DAG itself is
:func:`message_graph`).

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

from commsim.viz._contents import contributions
from commsim.viz._dag import critical_path, message_graph
from commsim.viz._diagram import MAX_RANKS, MAX_STEPS, check_drawable, draw_schedule, figure_size
from commsim.viz._table import MessageRow, message_rows, step_rows

__all__ = [
    "MAX_RANKS",
    "MAX_STEPS",
    "MessageRow",
    "check_drawable",
    "contributions",
    "critical_path",
    "draw_schedule",
    "figure_size",
    "message_graph",
    "message_rows",
    "step_rows",
]
