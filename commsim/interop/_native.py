"""commsim's own formats, JSON and NPZ, with the four verbs of every format in this package.

The codec itself (the layout, the version, the validation of every field) belongs to the IR
(:mod:`commsim._serialize`). This module gives it the verbs the foreign formats have, and checks
that a path names a regular file before anything reads it (:func:`schedule_file`), which
:func:`commsim.load` does for every format.

NPZ is binary (a zip archive of arrays): it has :func:`read_npz` and :func:`write_npz` and no
text form.

Examples:
    >>> import commsim
    >>> s = commsim.build("allreduce", "ring", nranks=4)
    >>> parse_json(format_json(s)).nsteps == s.nsteps
    True
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from commsim._ir import Schedule
from commsim._serialize import from_json, from_json_file, from_npz, to_json, to_npz
from commsim.errors import ParameterError, ScheduleError

__all__ = [
    "format_json",
    "parse_json",
    "read_json",
    "read_npz",
    "schedule_file",
    "write_json",
    "write_npz",
]


def schedule_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a :class:`~pathlib.Path` once it is known to be a regular file.

    Raises:
        ParameterError: ``path`` is not a path.
        ScheduleError: no such file, a directory, or a device or pipe (which would never end).
    """
    try:
        path = Path(path)
    except TypeError:
        raise ParameterError(
            f"load expects a file path, got {type(path).__name__} {path!r:.40}"
        ) from None
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise ScheduleError(f"{path}: no such file") from None
    except (OSError, ValueError) as e:  # a name too long, a symlink loop, a NUL in the name
        raise ScheduleError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    if stat.S_ISDIR(info.st_mode):
        raise ScheduleError(f"{path}: is a directory, not a schedule file")
    if not stat.S_ISREG(info.st_mode):
        raise ScheduleError(f"{path}: not a regular file (a device or a pipe), not a schedule")
    return path


def parse_json(text: str | bytes, *, source: str = "<text>") -> Schedule:
    """The schedule in JSON ``text`` (:func:`format_json`'s), every field validated."""
    return from_json(text, source=source)


def format_json(schedule: Schedule) -> str:
    """``schedule`` as compact JSON (every step materialized)."""
    return to_json(schedule)


def read_json(path: str | os.PathLike[str]) -> Schedule:
    """The schedule in a JSON file; a file past an eighth of half the machine's memory is a
    ResourceError, whatever it holds."""
    return from_json_file(schedule_file(path))


def write_json(schedule: Schedule, path: str | os.PathLike[str]) -> Path:
    """Write ``schedule`` to ``path`` as JSON."""
    path = Path(path)
    path.write_text(format_json(schedule))
    return path


def read_npz(path: str | os.PathLike[str]) -> Schedule:
    """The schedule in an NPZ file, the archive checked before it inflates (a zip bomb is a
    ResourceError)."""
    return from_npz(schedule_file(path))


def write_npz(schedule: Schedule, path: str | os.PathLike[str]) -> Path:
    """Write ``schedule`` to ``path`` as NPZ (exactly that name: no ``.npz`` is appended)."""
    return to_npz(schedule, path)
