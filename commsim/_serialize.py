"""Save and load schedules: versioned JSON (readable) or NPZ (compact, for large schedules).

JSON layout (``version`` 2; version 1 files, which said ``"name"`` for ``"algorithm"``, load too)::

    {
        "format": "commsim.schedule",
        "version": 2,
        "algorithm": "ring",
        "collective": "allreduce",
        "root": 0,
        "nranks": 4,
        "slot_units": [1, 1, 1, 1],
        "ndata": 4,
        "params": {},
        "steps": [
            {
                "src": [...],
                "dst": [...],
                "src_slot": [...],
                "dst_slot": [...],
                "count": [...],
                "reduce": [...],
            },
            ...,
        ],
    }

The NPZ form holds the same metadata as a JSON string (``meta``) plus each transfer field
concatenated over all steps and ``step_ptr`` (step ``i`` is ``[step_ptr[i], step_ptr[i+1])``).

Loading validates everything a user's hand-written file can get wrong and names the field, the
step and the transfer at fault; it does not check that the schedule computes its collective
(that is :func:`commsim.verify`'s job).
"""

from __future__ import annotations

import itertools
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from commsim._collectives import COLLECTIVES
from commsim._ir import MAX_NRANKS, Schedule, Step
from commsim.errors import ResourceError, ScheduleError
from commsim.units import format_size

__all__ = ["FORMAT", "VERSION", "from_dict", "load", "save", "to_dict"]

FORMAT = "commsim.schedule"
VERSION = 2
_READS = (1, 2)  # versions this commsim loads
_INT_FIELDS = ("src", "dst", "src_slot", "dst_slot", "count")


def _meta(schedule: Schedule) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "algorithm": schedule.algorithm,
        "collective": schedule.collective,
        "root": schedule.root,
        "nranks": schedule.nranks,
        "slot_units": schedule.slot_units.tolist(),
        "ndata": schedule.ndata,
        "params": {k: v if isinstance(v, (int, float, str, bool)) else str(v)
                   for k, v in schedule.params.items()},
    }  # fmt: skip


def to_dict(schedule: Schedule) -> dict[str, Any]:
    """The JSON-ready form of a schedule (materializes every step)."""
    out = _meta(schedule)
    out["steps"] = [{f: getattr(st, f).tolist() for f in Step._fields} for st in schedule.steps()]
    return out


def save(schedule: Schedule, path: str | os.PathLike[str]) -> Path:
    """Write ``schedule`` to ``path`` (``.npz`` for the binary form, anything else JSON)."""
    path = Path(path)
    if path.suffix == ".npz":
        steps = list(schedule.steps())
        ptr = np.cumsum([0] + [st.ntransfers for st in steps])
        cols = {f: np.concatenate([getattr(st, f) for st in steps]) if steps else np.zeros(0)
                for f in Step._fields}  # fmt: skip
        np.savez_compressed(path, meta=json.dumps(_meta(schedule)), step_ptr=ptr, **cols)
    else:
        path.write_text(json.dumps(to_dict(schedule), separators=(",", ":")))
    return path


def _memory_limit() -> int:
    """Half the machine's physical memory: what loading one file may inflate to."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (AttributeError, ValueError, OSError):  # not POSIX: assume a small machine
        return 4 * 2**30


def _check_inflated_size(path: Path) -> None:
    """Refuse an NPZ whose members would inflate past :func:`_memory_limit` (a zip bomb)."""
    try:
        with zipfile.ZipFile(path) as z:
            inflated = sum(info.file_size for info in z.infolist())
    except (zipfile.BadZipFile, OSError) as e:
        raise ScheduleError(
            f"{path}: not a commsim NPZ schedule (not a zip archive: {e})"
        ) from None
    if inflated > _memory_limit():
        raise ResourceError(
            f"{path}: its arrays inflate to {format_size(inflated)}, more than the "
            f"{format_size(_memory_limit())} allowed (half of this machine's memory)"
        )


def _step_pointers(ptr: np.ndarray, ntransfers: int, source: str) -> np.ndarray:
    """Validate ``step_ptr``: integers from 0 to the transfer count, never decreasing."""
    if ptr.ndim != 1 or not np.issubdtype(ptr.dtype, np.integer) or len(ptr) < 1:
        raise ScheduleError(f"{source}: field 'step_ptr' must be a 1-D array of integers")
    if ptr[0] != 0 or ptr[-1] != ntransfers or (np.diff(ptr) < 0).any():
        raise ScheduleError(
            f"{source}: field 'step_ptr' must rise from 0 to the {ntransfers} transfers "
            f"without decreasing (it goes from {int(ptr[0])} to {int(ptr[-1])})"
        )
    return ptr


def _load_npz(path: Path) -> Schedule:
    _check_inflated_size(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            ptr = z["step_ptr"]
            cols = {f: z[f] for f in Step._fields}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, RecursionError) as e:
        raise ScheduleError(f"{path}: not a commsim NPZ schedule ({e})") from None
    lengths = {f: len(c) if c.ndim == 1 else -1 for f, c in cols.items()}
    if len(set(lengths.values())) != 1 or -1 in lengths.values():
        raise ScheduleError(
            f"{path}: the transfer fields must be 1-D arrays of one length, got {lengths}"
        )
    ptr = _step_pointers(ptr, lengths["src"], str(path))
    steps = [{f: cols[f][a:b] for f in Step._fields} for a, b in itertools.pairwise(ptr)]
    if not isinstance(meta, dict):
        raise ScheduleError(f"{path}: field 'meta' must hold a JSON object")
    return from_dict({**meta, "steps": steps}, source=str(path))


def load(path: str | os.PathLike[str]) -> Schedule:
    """Read a schedule written by :func:`save` (or by hand); raise ScheduleError if malformed.

    Validates the file's structure (NPZ step index, JSON nesting, sizes) before building
    anything; a file that would need more than half the machine's memory is a ResourceError.
    """
    path = Path(path)
    if not path.exists():
        raise ScheduleError(f"{path}: no such file")
    if path.is_dir():
        raise ScheduleError(f"{path}: is a directory, not a schedule file")
    if path.suffix == ".npz":
        return _load_npz(path)
    if path.stat().st_size > _memory_limit() // 8:  # parsed JSON takes ~8x its text
        raise ResourceError(f"{path}: {format_size(path.stat().st_size)} of JSON is too large")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise ScheduleError(f"{path}: cannot read ({e})") from None
    except json.JSONDecodeError as e:
        raise ScheduleError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except RecursionError:
        raise ScheduleError(f"{path}: JSON nested too deeply to be a schedule") from None
    return from_dict(data, source=str(path))


def _field(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise ScheduleError(f"{where}: missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ScheduleError(f"{where}: field {key!r} must be {name}, got {value!r:.60}")
    return value


def _int_array(value: Any, where: str) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):  # ragged nesting
        raise ScheduleError(f"{where} must be a list of integers") from None
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise ScheduleError(f"{where} must be a list of integers")
    return arr.astype(np.int64)


def _integer(data: dict[str, Any], key: str, default: int, lo: int, hi: int, source: str) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ScheduleError(f"{source}: field {key!r} must be an integer in [{lo}, {hi}]")
    return value


def _header(data: Any, source: str) -> dict[str, Any]:
    """The schedule's metadata from its dict form, each field validated (no steps)."""
    if not isinstance(data, dict):
        raise ScheduleError(f"{source}: expected a JSON object at the top level")
    if data.get("format") != FORMAT:
        raise ScheduleError(f"{source}: field 'format' must be {FORMAT!r}")
    version = _field(data, "version", int, source)
    if version not in _READS:
        raise ScheduleError(
            f"{source}: unsupported version {version} (this commsim reads "
            f"{', '.join(map(str, _READS))})"
        )
    collective = _field(data, "collective", str, source)
    if collective not in COLLECTIVES:
        raise ScheduleError(f"{source}: field 'collective' must be one of {', '.join(COLLECTIVES)}")
    _field(data, "nranks", int, source)  # present, and an integer
    p = _integer(data, "nranks", -1, 1, MAX_NRANKS, source)
    units = _int_array(_field(data, "slot_units", list, source), f"{source}: field 'slot_units'")
    if len(units) == 0 or (units <= 0).any():
        raise ScheduleError(
            f"{source}: field 'slot_units' must be a non-empty list of positive ints"
        )
    params = data.get("params", {})
    return {
        "collective": collective,
        "nranks": p,
        "root": _integer(data, "root", 0, 0, p - 1, source),
        "slot_units": units,
        "ndata": _integer(data, "ndata", len(units), 1, len(units), source),
        "algorithm": str(data.get("algorithm" if version > 1 else "name", Path(source).stem)),
        "params": params if isinstance(params, dict) else {},
    }


def _step(raw: Any, where: str) -> Step:
    """One step from its dict form: six equal-length fields, integers and booleans."""
    if not isinstance(raw, dict):
        raise ScheduleError(f"{where}: expected an object with fields {', '.join(Step._fields)}")
    cols = {f: _int_array(_field(raw, f, (list, np.ndarray), where), f"{where}: field {f!r}")
            for f in _INT_FIELDS}  # fmt: skip
    try:
        red = np.asarray(_field(raw, "reduce", (list, np.ndarray), where))
    except (ValueError, TypeError):
        red = np.zeros((0, 0))
    if red.ndim != 1 or (red.size and red.dtype != bool and not np.isin(red, [0, 1]).all()):
        raise ScheduleError(f"{where}: field 'reduce' must be a list of booleans")
    n = len(cols["src"])
    for f, col in [*cols.items(), ("reduce", red)]:
        if len(col) != n:
            raise ScheduleError(f"{where}: field {f!r} has {len(col)} entries, 'src' has {n}")
    return Step(**cols, reduce=red.astype(bool))


def from_dict(data: Any, *, source: str = "schedule") -> Schedule:
    """Build a materialized schedule from its dict form, validating every field; every error
    names ``source`` (the file) and, for a step, the step and the transfer."""
    header = _header(data, source)
    raw_steps = _field(data, "steps", list, source)
    steps = [_step(raw, f"{source}: step {i}") for i, raw in enumerate(raw_steps)]
    try:
        schedule = Schedule.from_steps(steps, **header)
    except ScheduleError as e:  # what the IR checks itself (slot_units overflowing, ...)
        raise ScheduleError(f"{source}: {e}") from None
    for i, st in enumerate(steps):  # ranks, slot ranges, equal source/destination sizes
        try:
            schedule.check_step(st, i)
        except ScheduleError as e:
            raise ScheduleError(f"{source}: {e}", step=i) from None
    return schedule
