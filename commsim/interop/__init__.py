"""Interoperability: every format commsim reads or writes, each with the same four verbs.

``parse_X(text)`` / ``format_X(obj)`` for text and ``read_X(path)`` / ``write_X(obj, path)`` for
files, where the format has them (:data:`FORMATS`, one :class:`Format` row each, says which):

* **json**, **npz**: commsim's own schedule files (:mod:`commsim.interop._native`, over the IR's
  codec); NPZ is binary: read and write only.
* **msccl**: MSCCL-IR XML, what MSCCL's executor runs and msccl-tools' MSCCLang compiler writes
  (:mod:`commsim.interop._msccl_read`, :mod:`commsim.interop._msccl_write`);
  :func:`msccl_program` also gives the export's counts.
* **goal**: LogGOPSim's GOAL text schedules, written only (:mod:`commsim.interop._goal`);
  :func:`goal_program` also gives the counts.
* **nccl-tests**: the logs ``all_reduce_perf`` and its siblings print (an :class:`NcclTestsLog`,
  not a schedule; :mod:`commsim.interop._nccl_tests`, :mod:`commsim.interop._nccl_tests_write`).

:func:`save` and :func:`load` (also ``commsim.save``/``commsim.load``) pick a schedule format
by the file's suffix through the same table. The old names (``to_msccl_xml``, ``export_msccl``,
``to_goal``, ``export_goal``, ``format_nccl_tests_log``) still work for one release, with a
:class:`DeprecationWarning`. ``docs/interop.md`` has the table.

Examples:
    >>> import commsim
    >>> s = commsim.build("allgather", "ring", nranks=4)
    >>> back = parse_msccl(format_msccl(s))  # computes the same, its steps perhaps regrouped
    >>> _ = commsim.verify(back)
    >>> back.collective, back.nranks
    ('allgather', 4)
    >>> [name for name, f in FORMATS.items() if "parse" not in f.verbs()]
    ['npz', 'goal']
"""

import importlib
from typing import TYPE_CHECKING, Any

from commsim._deprecation import warn_deprecated
from commsim._lazy import lazy_exports

if TYPE_CHECKING:
    from commsim.interop._files import load, save
    from commsim.interop._formats import (
        DEFAULT_SCHEDULE_FORMAT,
        FORMATS,
        VERBS,
        Format,
        format_of,
        schedule_format,
    )
    from commsim.interop._goal import GoalProgram, format_goal, goal_program, write_goal
    from commsim.interop._msccl_read import parse_msccl, read_msccl
    from commsim.interop._msccl_write import (
        PROTOCOLS,
        MscclProgram,
        format_msccl,
        msccl_program,
        write_msccl,
    )
    from commsim.interop._native import (
        format_json,
        parse_json,
        read_json,
        read_npz,
        write_json,
        write_npz,
    )
    from commsim.interop._nccl_tests import (
        BINARIES,
        TYPE_SIZES,
        NcclTestsLog,
        NcclTestsRow,
        parse_nccl_tests,
        read_nccl_tests,
    )
    from commsim.interop._nccl_tests_write import format_nccl_tests, write_nccl_tests

__all__ = [
    "BINARIES",
    "DEFAULT_SCHEDULE_FORMAT",
    "FORMATS",
    "PROTOCOLS",
    "TYPE_SIZES",
    "VERBS",
    "Format",
    "GoalProgram",
    "MscclProgram",
    "NcclTestsLog",
    "NcclTestsRow",
    "format_goal",
    "format_json",
    "format_msccl",
    "format_nccl_tests",
    "format_of",
    "goal_program",
    "load",
    "msccl_program",
    "parse_json",
    "parse_msccl",
    "parse_nccl_tests",
    "read_json",
    "read_msccl",
    "read_nccl_tests",
    "read_npz",
    "save",
    "schedule_format",
    "write_goal",
    "write_json",
    "write_msccl",
    "write_nccl_tests",
    "write_npz",
]


#: old names, for one release (commsim._deprecation): old → (the replacement, as the user should
#: write it; the module and the name that serve it)
_DEPRECATED = {
    "to_msccl_xml": (
        "commsim.interop.format_msccl",
        "commsim.interop._msccl_write",
        "format_msccl",
    ),
    "export_msccl": (
        "commsim.interop.msccl_program",
        "commsim.interop._msccl_write",
        "msccl_program",
    ),
    "to_goal": ("commsim.interop.format_goal", "commsim.interop._goal", "format_goal"),
    "export_goal": ("commsim.interop.goal_program", "commsim.interop._goal", "goal_program"),
    "format_nccl_tests_log": (
        "commsim.interop.format_nccl_tests(NcclTestsLog.from_times(...))",
        "commsim.interop._nccl_tests_write",
        "format_nccl_tests_log",
    ),
}


def _deprecated(name: str) -> Any:
    if name not in _DEPRECATED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new, module, attribute = _DEPRECATED[name]
    warn_deprecated(f"{__name__}.{name}", new, stacklevel=4)
    return getattr(importlib.import_module(module), attribute)


__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "commsim.interop._files": ("load", "save"),
        "commsim.interop._formats": (
            "DEFAULT_SCHEDULE_FORMAT",
            "FORMATS",
            "VERBS",
            "Format",
            "format_of",
            "schedule_format",
        ),
        "commsim.interop._goal": ("GoalProgram", "format_goal", "goal_program", "write_goal"),
        "commsim.interop._msccl_read": ("parse_msccl", "read_msccl"),
        "commsim.interop._msccl_write": (
            "PROTOCOLS",
            "MscclProgram",
            "format_msccl",
            "msccl_program",
            "write_msccl",
        ),
        "commsim.interop._native": (
            "format_json",
            "parse_json",
            "read_json",
            "read_npz",
            "write_json",
            "write_npz",
        ),
        "commsim.interop._nccl_tests": (
            "BINARIES",
            "TYPE_SIZES",
            "NcclTestsLog",
            "NcclTestsRow",
            "parse_nccl_tests",
            "read_nccl_tests",
        ),
        "commsim.interop._nccl_tests_write": ("format_nccl_tests", "write_nccl_tests"),
    },
    fallback=_deprecated,
)
