"""Interoperation with other tools' schedule formats.

* :func:`to_msccl_xml` / :func:`export_msccl`: MSCCL-IR, the XML algorithm files of Microsoft's
  MSCCL executor (:mod:`commsim.interop._msccl_write`).
* :func:`to_goal` / :func:`export_goal`: LogGOPSim's GOAL text schedules (:mod:`commsim.interop._goal`).
"""

from commsim.interop._goal import GoalProgram, export_goal, to_goal
from commsim.interop._msccl_write import PROTOCOLS, MscclProgram, export_msccl, to_msccl_xml

__all__ = [
    "PROTOCOLS",
    "GoalProgram",
    "MscclProgram",
    "export_goal",
    "export_msccl",
    "to_goal",
    "to_msccl_xml",
]
