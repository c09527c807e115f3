"""``commsim.save`` and ``commsim.load``: a schedule file in any format, chosen by its suffix.

Both go through the table of formats (:mod:`commsim.interop._formats`): the suffix (any case)
picks the row, ``.npz`` NPZ, ``.xml`` MSCCL-IR, ``.goal`` GOAL, anything else commsim's JSON, and
the row's ``write`` or ``read`` does the work. Nothing here knows a format by name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from commsim._ir import Schedule
from commsim.errors import ParameterError, ScheduleError
from commsim.interop._formats import format_of, schedule_format
from commsim.interop._native import schedule_file

__all__ = ["load", "save"]


def save(
    schedule: Schedule,
    path: str | os.PathLike[str],
    format: str | None = None,
    **options: Any,
) -> Path:
    """Write ``schedule`` to ``path`` as ``format``; by default from the suffix: ``.npz`` the
    binary form, ``.xml`` MSCCL-IR, ``.goal`` LogGOPSim's GOAL, anything else JSON.

    ``options`` go to the format's writer: :func:`commsim.interop.write_msccl` (``proto``,
    ``nchannels``, ...) or :func:`commsim.interop.write_goal` (``nbytes``, required, and
    ``gamma``). JSON and NPZ load back as the same schedule; ``.xml`` loads back through the
    MSCCL-IR importer, a schedule that computes the same but whose steps may be regrouped
    (``docs/interop.md``); GOAL does not load.

    Examples:
        >>> import commsim, tempfile, pathlib
        >>> s = commsim.build("allreduce", "ring", nranks=4)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     commsim.load(commsim.save(s, pathlib.Path(d) / "ring.npz")).nsteps == s.nsteps
        True
    """
    path = Path(path)
    row = schedule_format(format) if format is not None else format_of(path)
    for option, what in row.required:
        if option not in options:
            raise ParameterError(f"a {row.title} file needs {what}: save(..., {option}=...)")
    if options and not row.options:
        raise ParameterError(f"{row.name} files take no options, got {', '.join(sorted(options))}")
    return row.write(schedule, path, **options)  # every schedule format writes


def load(path: str | os.PathLike[str]) -> Schedule:
    """Read a schedule written by :func:`save` (or by hand); raise ScheduleError if malformed.

    A ``.xml`` file is read as an MSCCL-IR algorithm (:func:`commsim.interop.read_msccl`).

    Validates the file's structure (NPZ step index, JSON nesting, sizes) before building
    anything; a file that would need more than half the machine's memory is a ResourceError.
    Only regular files are read: a device (``/dev/zero``) or a pipe would never end.
    """
    path = schedule_file(path)
    row = format_of(path)
    if row.read is None:
        raise ScheduleError(f"{path}: {row.why_not}")
    return row.read(path)
