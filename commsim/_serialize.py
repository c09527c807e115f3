"""The schedule's own codec: versioned JSON (readable) or NPZ (compact, for large schedules).

This module knows these two forms only; :func:`commsim.save` and :func:`commsim.load` choose a
format by the file's suffix in :mod:`commsim.interop`, where the foreign formats live too.

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
                "channel": [...],  # only in schedules with several channels
            },
            ...,
        ],
    }

``nchannels`` (IR rule 6) is written, and each step's ``channel`` field, only when the schedule
has more than one channel: single-channel files are byte-identical to those of earlier versions,
and a file without them loads as one channel. ``helpers`` (IR rule 7) likewise: written only
when the schedule has helper ranks, 0 when absent; ``in_network`` (the helpers are reducing
switches: ``true`` a server's own, ``"fabric"`` those between servers) only when set, false
when absent.

The NPZ form holds the same metadata as a JSON string (``meta``) plus each transfer field
concatenated over all steps and ``step_ptr`` (step ``i`` is ``[step_ptr[i], step_ptr[i+1])``).

Reading validates everything a user's hand-written file can get wrong and names the field, the
step and the transfer at fault; it does not check that the schedule computes its collective
(that is :func:`commsim.verify`'s job).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import tokenize
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from commsim._collectives import COLLECTIVES
from commsim._ir import MAX_NRANKS, Schedule, Step
from commsim._switch_tiers import switch_tier
from commsim.errors import CommsimError, ResourceError, ScheduleError
from commsim.units import format_size

__all__ = [
    "FORMAT",
    "VERSION",
    "from_dict",
    "from_json",
    "from_json_file",
    "from_npz",
    "to_dict",
    "to_json",
    "to_npz",
]

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
        **({"nchannels": schedule.nchannels} if schedule.nchannels > 1 else {}),
        **({"helpers": schedule.helpers} if schedule.helpers else {}),
        **({"in_network": schedule.in_network} if schedule.in_network else {}),
        "params": {k: v if isinstance(v, (int, float, str, bool)) else str(v)
                   for k, v in schedule.params.items()},
    }  # fmt: skip


def to_dict(schedule: Schedule) -> dict[str, Any]:
    """The JSON-ready form of a schedule (materializes every step)."""
    out = _meta(schedule)
    fields = _fields(schedule)
    out["steps"] = [{f: getattr(st, f).tolist() for f in fields}
                    for st in schedule.steps()]  # fmt: skip
    return out


def _fields(schedule: Schedule) -> tuple[str, ...]:
    """The transfer fields a file of ``schedule`` holds (``channel`` only with several)."""
    return (*Step.ARRAYS, "channel") if schedule.nchannels > 1 else Step.ARRAYS


def to_json(schedule: Schedule) -> str:
    """The schedule as compact JSON text (:func:`to_dict`; every step materialized)."""
    return json.dumps(to_dict(schedule), separators=(",", ":"))


def to_npz(schedule: Schedule, path: str | os.PathLike[str]) -> Path:
    """Write the NPZ form (module docstring) to ``path``, exactly that name."""
    path = Path(path)
    steps = list(schedule.steps())
    ptr = np.cumsum([0] + [st.ntransfers for st in steps])
    fields = _fields(schedule)
    cols = {f: np.concatenate([getattr(st, f) for st in steps])
            if steps else np.zeros(0) for f in fields}  # fmt: skip
    with path.open("wb") as f:  # a file object: numpy appends no .npz to the name
        np.savez_compressed(f, meta=json.dumps(_meta(schedule)), step_ptr=ptr, **cols)
    return path


def _memory_limit() -> int:
    """Half the machine's physical memory: what loading one file may inflate to."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (AttributeError, ValueError, OSError):  # not POSIX: assume a small machine
        return 4 * 2**30


_NPZ_ARRAYS = ("meta", "step_ptr", *Step.ARRAYS)  # and "channel" when the file has it
# what a damaged or foreign archive raises from zipfile, zlib and numpy's .npy reader
_ARCHIVE_ERRORS = (
    OSError,
    EOFError,
    ValueError,
    TypeError,  # a header's dtype that is not one
    KeyError,
    zipfile.BadZipFile,
    zlib.error,
    NotImplementedError,  # a compression method or zip feature zipfile lacks
    RuntimeError,  # an encrypted member
    RecursionError,
    SyntaxError,  # a header numpy's literal_eval cannot read
    tokenize.TokenError,  # ... nor its fallback tokenizer
)


def _check_archive(path: Path) -> None:
    """Check an NPZ before inflating any of it: a zip archive holding every array of a schedule,
    each stored or deflated (not encrypted), each ``.npy`` header declaring a plain array of
    exactly the bytes its member holds (a header claiming 2**40 elements would otherwise be
    allocated before its data is found missing), all of it within :func:`_memory_limit` (a zip
    bomb is refused here)."""
    try:
        with zipfile.ZipFile(path) as z:
            members = {info.filename: info for info in z.infolist()}
            inflated = sum(info.file_size for info in members.values())
            if inflated > _memory_limit():
                raise ResourceError(
                    f"{path}: its arrays inflate to {format_size(inflated)}, more than the "
                    f"{format_size(_memory_limit())} allowed (half of this machine's memory)"
                )
            shapes = {}
            optional = ("channel",) if "channel.npy" in members else ()
            for name in (*_NPZ_ARRAYS, *optional):
                info = members.get(f"{name}.npy")
                if info is None:
                    raise ScheduleError(f"{path}: not a commsim NPZ schedule (no array {name!r})")
                if info.flag_bits & 0x1 or info.compress_type not in (
                    zipfile.ZIP_STORED,
                    zipfile.ZIP_DEFLATED,
                ):
                    raise ScheduleError(
                        f"{path}: array {name!r} is encrypted or compressed in a way NPZ files "
                        f"never are"
                    )
                with z.open(info) as f:
                    shapes[name] = _check_npy_header(f, info.file_size, f"{path}: array {name!r}")
            lengths = {
                f: shapes[f][0] if len(shapes[f]) == 1 else -1 for f in (*Step.ARRAYS, *optional)
            }
            if len(set(lengths.values())) != 1 or -1 in lengths.values():
                raise ScheduleError(
                    f"{path}: the transfer fields must be 1-D arrays of one length, got {lengths}"
                )
    except CommsimError:
        raise
    except _ARCHIVE_ERRORS as e:
        raise ScheduleError(f"{path}: not a commsim NPZ schedule ({e})") from None


def _check_npy_header(f: Any, member_size: int, where: str) -> tuple[int, ...]:
    """Read a ``.npy`` header from ``f`` and return its shape: a plain dtype, and a shape whose
    bytes are exactly what is left of the member's ``member_size``."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise ScheduleError(f"{where}: .npy format {version} is not one numpy saves schedules in")
    if dtype.hasobject:
        raise ScheduleError(f"{where}: holds Python objects, not numbers")
    claimed = math.prod(shape) * dtype.itemsize
    held = member_size - f.tell()
    if claimed != held:
        raise ScheduleError(
            f"{where}: its header declares {format_size(claimed)} ({dtype} {shape}) but it "
            f"holds {format_size(max(held, 0))}"
        )
    return tuple(shape)


def _step_pointers(ptr: np.ndarray, ntransfers: int, source: str) -> np.ndarray:
    """Validate ``step_ptr``: integers from 0 to the transfer count, never decreasing."""
    if ptr.ndim != 1 or ptr.dtype.kind not in "iu" or len(ptr) < 1:
        raise ScheduleError(f"{source}: field 'step_ptr' must be a 1-D array of integers")
    if ptr.dtype.kind == "u" and int(ptr.max()) >= 2**63:  # uint64 differences never go negative
        raise ScheduleError(f"{source}: field 'step_ptr' holds an integer past 2**63")
    ptr = ptr.astype(np.int64)
    if ptr[0] != 0 or ptr[-1] != ntransfers:
        raise ScheduleError(
            f"{source}: field 'step_ptr' must rise from 0 to the {ntransfers} transfers "
            f"without decreasing (it goes from {int(ptr[0])} to {int(ptr[-1])})"
        )
    down = np.diff(ptr) < 0
    if down.any():
        i = int(np.argmax(down))
        raise ScheduleError(
            f"{source}: field 'step_ptr' must not decrease, but step {i} would end at transfer "
            f"{int(ptr[i + 1])}, before its start at {int(ptr[i])}"
        )
    return ptr


def from_npz(path: str | os.PathLike[str]) -> Schedule:
    """Read an NPZ schedule, checking the archive before inflating it (:func:`_check_archive`)
    and every field after."""
    path = Path(path)
    _check_archive(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            ptr = z["step_ptr"]
            fields = (*Step.ARRAYS, "channel") if "channel" in z.files else Step.ARRAYS
            cols = {f: z[f] for f in fields}
    except _ARCHIVE_ERRORS as e:
        raise ScheduleError(f"{path}: not a commsim NPZ schedule ({e})") from None
    lengths = {f: len(c) if c.ndim == 1 else -1 for f, c in cols.items()}
    if len(set(lengths.values())) != 1 or -1 in lengths.values():
        raise ScheduleError(
            f"{path}: the transfer fields must be 1-D arrays of one length, got {lengths}"
        )
    ptr = _step_pointers(ptr, lengths["src"], str(path))
    steps = [{f: cols[f][a:b] for f in fields} for a, b in itertools.pairwise(ptr)]
    if not isinstance(meta, dict):
        raise ScheduleError(f"{path}: field 'meta' must hold a JSON object")
    return from_dict({**meta, "steps": steps}, source=str(path))


def from_json(text: str | bytes, *, source: str = "<text>") -> Schedule:
    """Build a schedule from its JSON text; malformed text is a ScheduleError naming ``source``."""
    try:
        data = json.loads(text)
    except UnicodeDecodeError as e:
        raise ScheduleError(f"{source}: cannot read ({e})") from None
    except json.JSONDecodeError as e:
        raise ScheduleError(f"{source}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except RecursionError:
        raise ScheduleError(f"{source}: JSON nested too deeply to be a schedule") from None
    return from_dict(data, source=source)


def from_json_file(path: str | os.PathLike[str]) -> Schedule:
    """Read a JSON schedule file: no more than an eighth of :func:`_memory_limit` (parsed JSON
    takes about 8x its text), whatever its size claims; a larger file is a ResourceError."""
    path = Path(path)
    limit = _memory_limit() // 8
    size = path.stat().st_size
    if size > limit:
        raise ResourceError(f"{path}: {format_size(size)} of JSON is too large")
    try:
        with path.open("rb") as f:
            text = f.read(limit + 1)  # no more than allowed, whatever stat said
    except OSError as e:
        raise ScheduleError(f"{path}: cannot read ({e})") from None
    if len(text) > limit:
        raise ResourceError(f"{path}: more than {format_size(limit)} of JSON is too large")
    return from_json(text, source=str(path))


def _field(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise ScheduleError(f"{where}: missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ScheduleError(f"{where}: field {key!r} must be {name}, got {value!r:.60}")
    return value


def _int_array(value: Any, where: str) -> np.ndarray:
    """A JSON list of ints or an NPZ integer array as int64; anything else (nested or ragged
    lists, booleans, floats, integers past int64) a ScheduleError naming ``where``."""
    if isinstance(value, list):
        if not all(type(x) is int for x in value):
            raise ScheduleError(f"{where} must be a list of integers")
        try:
            return np.array(value, dtype=np.int64)
        except OverflowError:
            raise ScheduleError(f"{where} holds an integer outside [-2**63, 2**63)") from None
    arr = np.asarray(value)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ScheduleError(f"{where} must be a 1-D array of integers, got {arr.dtype} {arr.shape}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) >= 2**63:
        raise ScheduleError(f"{where} holds an integer outside [-2**63, 2**63)")
    return arr.astype(np.int64)


def _bool_array(value: Any, where: str) -> np.ndarray:
    """A JSON list of booleans (or 0/1) or an NPZ boolean or 0/1 array, as bool."""
    if isinstance(value, list):
        if not all(x is True or x is False or (type(x) is int and x in (0, 1)) for x in value):
            raise ScheduleError(f"{where} must be a list of booleans")
        return np.array(value, dtype=bool)
    arr = np.asarray(value)
    if arr.ndim != 1 or (
        arr.size
        and arr.dtype != bool
        and (arr.dtype.kind not in "iu" or not np.isin(arr, [0, 1]).all())
    ):
        raise ScheduleError(f"{where} must be a 1-D array of booleans, got {arr.dtype} {arr.shape}")
    return arr.astype(bool)


def _integer(data: dict[str, Any], key: str, default: int, lo: int, hi: int, source: str) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ScheduleError(f"{source}: field {key!r} must be an integer in [{lo}, {hi}]")
    return value


def _in_network(data: dict[str, Any], source: str) -> bool | str:
    """``in_network``: false, true (a server's switch) or ``"fabric"`` (switches between
    servers; :mod:`commsim._switch_tiers`)."""
    value = data.get("in_network", False)
    try:
        tier = switch_tier(value)
    except ValueError as e:
        raise ScheduleError(f"{source}: field 'in_network' {e!s:.80}") from None
    return "fabric" if tier == "fabric" else tier == "server"


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
        "nchannels": _integer(data, "nchannels", 1, 1, 2**20, source),
        "helpers": _integer(data, "helpers", 0, 0, p - 1, source),
        "in_network": _in_network(data, source),
        "algorithm": str(data.get("algorithm" if version > 1 else "name", Path(source).stem)),
        "params": params if isinstance(params, dict) else {},
    }


def _step(raw: Any, where: str) -> Step:
    """One step from its dict form: six equal-length fields, integers and booleans, and an
    optional seventh (``channel``)."""
    if not isinstance(raw, dict):
        raise ScheduleError(f"{where}: expected an object with fields {', '.join(Step.ARRAYS)}")
    ints = (*_INT_FIELDS, "channel") if "channel" in raw else _INT_FIELDS
    cols = {f: _int_array(_field(raw, f, (list, np.ndarray), where), f"{where}: field {f!r}")
            for f in ints}  # fmt: skip
    red = _bool_array(_field(raw, "reduce", (list, np.ndarray), where), f"{where}: field 'reduce'")
    n = len(cols["src"])
    for f, col in [*cols.items(), ("reduce", red)]:
        if len(col) != n:
            raise ScheduleError(f"{where}: field {f!r} has {len(col)} entries, 'src' has {n}")
    return Step(**cols, reduce=red)


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
