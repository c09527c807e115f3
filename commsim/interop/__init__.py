"""Interoperability: schedules to and from other tools' formats.

* :func:`read_msccl`: import an MSCCL-IR XML algorithm (what MSCCL's executor runs, what
  msccl-tools' MSCCLang compiler writes) as a :class:`commsim.Schedule`
  (:mod:`commsim.interop._msccl_read`).
* :func:`to_msccl_xml` / :func:`export_msccl`: write a schedule as MSCCL-IR
  (:mod:`commsim.interop._msccl_write`).
* :func:`to_goal` / :func:`export_goal`: LogGOPSim's GOAL text schedules
  (:mod:`commsim.interop._goal`).
"""

from commsim.interop._goal import GoalProgram, export_goal, to_goal
from commsim.interop._msccl_read import read_msccl
from commsim.interop._msccl_write import PROTOCOLS, MscclProgram, export_msccl, to_msccl_xml

__all__ = [
    "PROTOCOLS",
    "GoalProgram",
    "MscclProgram",
    "export_goal",
    "export_msccl",
    "read_msccl",
    "to_goal",
    "to_msccl_xml",
]
