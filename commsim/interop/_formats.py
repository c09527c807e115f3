"""The table of formats: one row per format, what it holds and which of the four verbs it has.

Every format in :mod:`commsim.interop` has the same verbs (networkx's ``readwrite`` idea):
``parse_X(text)`` and ``format_X(obj)`` for text, ``read_X(path)`` and ``write_X(obj, path)`` for
files. A row says which exist; a verb that makes no sense is ``None`` and :attr:`Format.why_not`
says why (NPZ is binary: no text form; GOAL is written for LogGOPSim and never read back).
:func:`commsim.save` and :func:`commsim.load` dispatch through this table by the file's suffix
(:func:`format_of`), so a new schedule format is a new row.

=========== =============== ============= ===== ====== ==== =====
name        holds           suffixes      parse format read write
=========== =============== ============= ===== ====== ==== =====
json        Schedule        ``.json``     yes   yes    yes  yes
npz         Schedule        ``.npz``      -     -      yes  yes
msccl       Schedule        ``.xml``      yes   yes    yes  yes
goal        Schedule        ``.goal``     -     yes    -    yes
nccl-tests  NcclTestsLog    ``.log``      yes   yes    yes  yes
=========== =============== ============= ===== ====== ==== =====

Examples:
    >>> [f.name for f in FORMATS.values() if f.holds is Schedule]
    ['json', 'npz', 'msccl', 'goal']
    >>> format_of("ring.XML").name, format_of("ring.anything").name
    ('msccl', 'json')
    >>> FORMATS["npz"].verbs()
    ('read', 'write')
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from commsim._ir import Schedule
from commsim.errors import ParameterError
from commsim.interop._goal import format_goal, write_goal
from commsim.interop._msccl_read import parse_msccl, read_msccl
from commsim.interop._msccl_write import format_msccl, write_msccl
from commsim.interop._native import (
    format_json,
    parse_json,
    read_json,
    read_npz,
    write_json,
    write_npz,
)
from commsim.interop._nccl_tests import NcclTestsLog, parse_nccl_tests, read_nccl_tests
from commsim.interop._nccl_tests_write import format_nccl_tests, write_nccl_tests

__all__ = ["DEFAULT_SCHEDULE_FORMAT", "FORMATS", "VERBS", "Format", "format_of", "schedule_format"]

#: The four verbs, in the order a row lists them.
VERBS = ("parse", "format", "read", "write")


@dataclasses.dataclass(frozen=True)
class Format:
    """One format: its name, its suffixes, what it holds, and its verbs (``None``: none).

    Attributes:
        name: the format's name (``commsim.save(..., format=name)``, ``--format``).
        title: how messages and docs name it (``"MSCCL-IR"``).
        suffixes: lower-case file suffixes that mean this format.
        holds: the type its text or file holds (:class:`~commsim.Schedule`, an
            :class:`~commsim.interop.NcclTestsLog`).
        parse: text → object; ``format``: object → text; ``read``: path → object;
            ``write``: (object, path, options) → the path written.
        options: keyword options ``format`` and ``write`` take (empty: none).
        required: the options a file cannot be written without, each with what it is.
        why_not: why a verb is missing, a sentence (:func:`commsim.load` says it for a format
            it cannot read).
    """

    name: str
    title: str
    suffixes: tuple[str, ...]
    holds: type
    parse: Callable[..., Any] | None
    format: Callable[..., str] | None
    read: Callable[..., Any] | None
    write: Callable[..., Path] | None
    options: tuple[str, ...] = ()
    required: tuple[tuple[str, str], ...] = ()
    why_not: str = ""

    def verbs(self) -> tuple[str, ...]:
        """The verbs this format has, in :data:`VERBS` order."""
        return tuple(v for v in VERBS if getattr(self, v) is not None)


#: Every format by name; schedule formats first, in the order messages list them.
FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("json", "JSON", (".json",), Schedule, parse_json, format_json, read_json,
               write_json),
        Format("npz", "NPZ", (".npz",), Schedule, None, None, read_npz, write_npz,
               why_not="NPZ is binary (a zip archive of arrays): it has no text form"),
        Format("msccl", "MSCCL-IR", (".xml",), Schedule, parse_msccl, format_msccl, read_msccl,
               write_msccl, options=("proto", "nchannels", "fuse", "inplace", "min_bytes",
                                     "max_bytes", "name")),
        Format("goal", "GOAL", (".goal",), Schedule, None, format_goal, None, write_goal,
               options=("nbytes", "gamma"), required=(("nbytes", "the message size"),),
               why_not="GOAL files are written for LogGOPSim, not read back"),
        Format("nccl-tests", "nccl-tests log", (".log",), NcclTestsLog, parse_nccl_tests,
               format_nccl_tests, read_nccl_tests, write_nccl_tests),
    )
}  # fmt: skip

#: The format of a schedule file whose suffix names none.
DEFAULT_SCHEDULE_FORMAT = "json"


def schedule_format(name: str) -> Format:
    """The schedule format called ``name``; any other name is a ParameterError listing them."""
    row = FORMATS.get(name)
    if row is None or row.holds is not Schedule:
        known = ", ".join(f.name for f in FORMATS.values() if f.holds is Schedule)
        raise ParameterError(f"unknown schedule format {name!r}; known: {known}")
    return row


def format_of(path: str | os.PathLike[str]) -> Format:
    """The schedule format a file's suffix names (any case); JSON for any other suffix."""
    suffix = Path(path).suffix.lower()
    for row in FORMATS.values():
        if row.holds is Schedule and suffix in row.suffixes:
            return row
    return FORMATS[DEFAULT_SCHEDULE_FORMAT]
